//! # vnfm-cli
//!
//! The library half of the `vnfm` command-line program: the pieces the binary wires together
//! and that embedders may reuse. The binary itself (`src/main.rs`) only parses the command
//! line, calls [`commands::run`], prints the error chain and exits with [`CliError::exit_code`].
//!
//! - [`cli`]: the command line (clap derive).
//! - [`config`]: `vnfm.toml` and how flags and environment variables override it.
//! - [`commands`]: one function per command; they build the drivers and call `vnfm-core`.
//! - [`output`]: data on stdout (human or JSON), diagnostics and progress on stderr.
//! - [`exit`]: the exit codes.
//! - [`serve`]: `vnfm serve`, the HTTP server (SOL003 VNF LCM API, Prometheus alert endpoints,
//!   `/metrics`).
//! - [`promise`]: the Promise reservation ledger kept in the state file, shared by `vnfm
//!   reservation | allocation | capacity | provider` and `vnfm serve`.
//! - [`vim`]: the VIM drivers of a command: the simulated cloud or a real OpenStack.
//! - [`store`]: [`store::SqliteStore`], the persistent [`vnfm_core::driver::Store`] the CLI
//!   keeps its state in (VNF instances and LCM operation occurrences in one SQLite file).

pub mod builtin;
pub mod cli;
pub mod commands;
pub mod config;
pub mod error;
pub mod exit;
pub mod output;
pub mod promise;
pub mod serve;
pub mod store;
pub mod vim;

pub use error::CliError;
