//! The commands. [`run`] loads the configuration and dispatches; each command builds the
//! drivers it needs and calls the core.

use serde::Serialize;

use crate::cli::{Cli, CloudCommand, Command, ConfigCommand, PackageCommand};
use crate::config::Config;
use crate::error::CliError;
use crate::output::Output;

pub mod cloud;
pub mod cluster;
pub mod demo;
mod demo_hw;
pub mod intent;
pub mod lcm;
pub mod package;
pub mod promise;

/// Runs the parsed command line.
///
/// # Errors
/// Any [`CliError`]; the caller prints it and exits with its code.
pub fn run(cli: Cli, out: Output) -> Result<(), CliError> {
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
    match cli.command {
        Command::Config(ConfigCommand::Show) => config_show(&config, config_file, out),
        Command::Package(PackageCommand::Show { path }) => package::show(&path, out),
        Command::Cloud(CloudCommand::Show { cloud: path }) => {
            cloud::show(path.as_deref().or(config.vim.cloud.as_deref()), out)
        }
        Command::Cloud(CloudCommand::Migrate { server, to }) => {
            cluster::migrate(&config, &server, &to, out)
        }
        Command::Cluster(cmd) => cluster::run(&config, &cmd, out),
        Command::Demo(args) => demo::run(&args, out),
        Command::Grant(args) => lcm::grant(&config, &args, out),
        Command::Select(args) => intent::select(&config, &args, out),
        Command::Instantiate(args) => lcm::instantiate(&config, &args, out),
        Command::Scale(args) => lcm::scale(&config, &args, out),
        Command::Heal(args) => lcm::heal(&config, &args, out),
        Command::Terminate(args) => lcm::terminate(&config, &args, out),
        Command::Instance(cmd) => lcm::instance(&config, &cmd, out),
        Command::Op(cmd) => lcm::op(&config, &cmd, out),
        Command::Reservation(args) => promise::reservation(&config, &args, out),
        Command::Allocation(args) => promise::allocation(&config, &args, out),
        Command::Capacity(args) => promise::capacity(&config, &args, out),
        Command::Provider(args) => promise::provider(&config, &args, out),
        Command::Serve(args) => crate::serve::run(args.apply_to(config), out.quiet),
    }
}

#[derive(Serialize)]
struct ConfigReport<'a> {
    file: Option<String>,
    state_path: String,
    config: &'a Config,
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
