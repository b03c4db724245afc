//! The commands. [`run`] loads the configuration and dispatches; each command builds the
//! drivers it needs and calls the core, and prints its result through a report type
//! (`crate::report`).

use crate::cli::{Cli, CloudCommand, Command, ConfigCommand, PackageCommand};
use crate::config::Config;
use crate::display::escape_text;
use crate::error::CliError;
use crate::exit;
use crate::output::Output;
use crate::report::{ConfigReport, PlacementOutcome, Version};

pub mod cloud;
pub mod cluster;
pub mod demo;
mod demo_hw;
pub mod intent;
pub mod lcm;
pub mod package;
pub mod promise;

/// Runs the parsed command line and returns its exit code: 0, or the code of a valid "no"
/// (an infeasible placement: [`PlacementOutcome`]) whose result was printed.
///
/// # Errors
/// Any [`CliError`]; the caller prints it and exits with its code.
pub fn run(cli: Cli, out: Output) -> Result<i32, CliError> {
    let (config, config_file) = Config::load(cli.global.config.as_deref())?;
    let overrides = cli.global.overrides();
    if let Some(dir) = &overrides.packages_dir {
        crate::config::check_packages_dir(dir).map_err(|why| {
            CliError::Usage(format!(
                "--packages-dir / VNFM_PACKAGES_DIR {:?}: {why}",
                dir.display().to_string()
            ))
        })?;
    }
    let config = config.with_overrides(&overrides);
    let ok = |r: Result<(), CliError>| r.map(|()| exit::OK);
    match cli.command {
        Command::Config(ConfigCommand::Show) => ok(config_show(&config, config_file, out)),
        Command::Package(PackageCommand::Show { path }) => ok(package::show(&path, out)),
        Command::Cloud(CloudCommand::Show { cloud: path }) => ok(cloud::show(
            path.as_deref().or(config.vim.cloud.as_deref()),
            out,
        )),
        Command::Cloud(CloudCommand::Migrate { server, to }) => {
            ok(cluster::migrate(&config, &server, &to, out))
        }
        Command::Cluster(cmd) => ok(cluster::run(&config, &cmd, out)),
        Command::Demo(args) => ok(demo::run(&args, out)),
        Command::Grant(args) => Ok(finish(&lcm::grant(&config, &args, out)?)),
        Command::Select(args) => Ok(finish(&intent::select(&config, &args, out)?)),
        Command::Instantiate(args) => ok(lcm::instantiate(&config, &args, out)),
        Command::Scale(args) => ok(lcm::scale(&config, &args, out)),
        Command::Heal(args) => ok(lcm::heal(&config, &args, out)),
        Command::Terminate(args) => ok(lcm::terminate(&config, &args, out)),
        Command::Instance(cmd) => ok(lcm::instance(&config, &cmd, out)),
        Command::Op(cmd) => ok(lcm::op(&config, &cmd, out)),
        Command::Reservation(args) => ok(promise::reservation(&config, &args, out)),
        Command::Allocation(args) => ok(promise::allocation(&config, &args, out)),
        Command::Capacity(args) => ok(promise::capacity(&config, &args, out)),
        Command::Provider(args) => ok(promise::provider(&config, &args, out)),
        Command::Serve(args) => ok(crate::serve::run(args.apply_to(config), out.quiet)),
    }
}

/// The exit code of a placement whose result was printed; a "no" also says why on stderr (as
/// `error: ...`, printed even with `--quiet`, as errors are).
fn finish(outcome: &PlacementOutcome) -> i32 {
    if let Some(message) = outcome.message() {
        eprintln!("error: {}", escape_text(message));
    }
    outcome.exit_code()
}

fn config_show(
    config: &Config,
    file: Option<std::path::PathBuf>,
    out: Output,
) -> Result<(), CliError> {
    let report = ConfigReport {
        file: file.as_ref().map(|f| f.display().to_string()),
        state_path: config.state_path().display().to_string(),
        config,
        version: Version,
    };
    let toml = toml::to_string_pretty(config)
        .map_err(|e| CliError::Output(std::io::Error::other(format!("cannot encode TOML: {e}"))))?;
    let human = format!(
        "# configuration file: {}\n# state file: {}\n{toml}",
        report.file.as_deref().unwrap_or("none (defaults)"),
        report.state_path
    );
    out.data(&human, &report)
}
