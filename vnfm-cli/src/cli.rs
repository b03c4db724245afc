//! Command-line arguments (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{Overrides, VimKind};
use crate::output::Format;

const ABOUT: &str = "vnfm: NFV placement and VNF lifecycle management.

Decides where the virtual resources of a network function go (SOL003 grants with affinity /
anti-affinity, availability-zone reselection) and drives their lifecycle, on the built-in
simulated cloud by default.";

/// The `vnfm` command line.
#[derive(Debug, Parser)]
#[command(name = "vnfm", version, about = ABOUT, after_long_help = crate::exit::HELP, after_help = crate::exit::HELP)]
pub struct Cli {
    /// Global options.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Configuration file (default: ./vnfm.toml when it exists).
    #[arg(long, global = true, env = "VNFM_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// SQLite state file [default: $XDG_STATE_HOME/vnfm/state.sqlite].
    #[arg(long, global = true, env = "VNFM_STATE", value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// The VIM to use [default: sim].
    #[arg(long, global = true, env = "VNFM_VIM", value_name = "KIND")]
    pub vim: Option<VimKind>,
    /// Seed of the simulated cloud's ids and choices [default: 0].
    #[arg(long, global = true, env = "VNFM_SIM_SEED", value_name = "N")]
    pub sim_seed: Option<u64>,
    /// Directory of VNF packages known by vnfdId.
    #[arg(long, global = true, env = "VNFM_PACKAGES_DIR", value_name = "DIR")]
    pub packages_dir: Option<PathBuf>,
    /// Output format.
    #[arg(long, global = true, value_name = "FORMAT", default_value = "human")]
    pub format: Format,
    /// Shorthand for --format json.
    #[arg(long, global = true)]
    pub json: bool,
    /// No progress and no diagnostics except errors.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// More diagnostics on stderr (repeatable).
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl GlobalArgs {
    /// The effective output format.
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else {
            self.format
        }
    }

    /// The configuration overrides given by flags or environment.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            vim: self.vim,
            cloud: None,
            sim_seed: self.sim_seed,
            packages_dir: self.packages_dir.clone(),
            state: self.state.clone(),
        }
    }
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the main job end to end on the built-in simulated cloud, narrated step by step.
    Demo(DemoArgs),
    /// Inspect a cloud file of the simulator.
    #[command(subcommand)]
    Cloud(CloudCommand),
    /// Inspect a VNF package.
    #[command(subcommand)]
    Package(PackageCommand),
    /// Inspect the effective configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
}

/// `vnfm demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Seed of every random choice in the demo.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `vnfm cloud ...`
#[derive(Debug, Subcommand)]
pub enum CloudCommand {
    /// Show zones, hosts, capacity and flavors of a cloud file.
    Show {
        /// The cloud file (YAML) [default: the configured one, else the built-in demo cloud].
        #[arg(long, env = "VNFM_CLOUD", value_name = "FILE")]
        cloud: Option<PathBuf>,
    },
}

/// `vnfm package ...`
#[derive(Debug, Subcommand)]
pub enum PackageCommand {
    /// Show the VDUs, flavors, storage, placement rules and scaling aspects of a package.
    Show {
        /// A package directory or zip file.
        path: PathBuf,
    },
}

/// `vnfm config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Show the effective configuration (file, environment and flags merged).
    Show,
}
