//! # vnfm-cli
//!
//! The library half of the `vnfm` command-line program: the pieces the binary wires together
//! and that embedders may reuse. The binary itself (`src/main.rs`) only parses the command
//! line, calls [`commands::run`], prints the error chain and exits with [`CliError::exit_code`].
//!
//! - [`cli`]: the command line (clap derive).
//! - [`config`]: `vnfm.toml` and how flags and environment variables override it.
//! - [`app`]: the composition root: the runtime, the clock, the state file, the VIM, the
//!   drivers and the [`vnfm_core::lifecycle::Lifecycle`] built from the configuration. Commands
//!   and the server take them from here, never from each other.
//! - [`commands`]: one function per command; they take the drivers from [`app`] and call
//!   `vnfm-core`.
//! - [`inputs`]: cloud files and VNF packages, read from disk or built in.
//! - [`intent`]: intent-based cloud selection as the CLI wires it (`select`, `--intent`).
//! - [`output`]: data on stdout (human or JSON), diagnostics and progress on stderr; [`render`]:
//!   what the core returns, written for people.
//! - [`exit`]: the exit codes.
//! - [`serve`]: `vnfm serve`, the HTTP server (SOL003 VNF LCM API, Prometheus alert endpoints,
//!   `/metrics`).
//! - [`promise`]: the Promise reservation ledger kept in the state file, shared by `vnfm
//!   reservation | allocation | capacity | provider`, the operations that draw from
//!   reservations, and `vnfm serve`.
//! - [`vim`]: the VIM drivers of a command: the simulated cloud (saved in the state file) or a
//!   real OpenStack.
//! - [`store`]: [`store::SqliteStore`], the persistent [`vnfm_core::driver::Store`] the CLI
//!   keeps its state in (VNF instances and LCM operation occurrences in one SQLite file).
//!
//! No module imports another that imports it back (`tests/module_cycles.rs` checks it).

pub mod app;
pub mod builtin;
pub mod cli;
pub mod commands;
pub mod config;
pub mod error;
pub mod exit;
pub mod inputs;
pub mod intent;
pub mod output;
pub mod promise;
pub mod render;
pub mod serve;
pub mod store;
pub mod vim;

pub use error::CliError;
