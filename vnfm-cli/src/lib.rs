//! # vnfm-cli
//!
//! The library half of the `vnfm` command-line program. The binary (`src/main.rs`) only picks
//! the allocator and calls [`run`], which parses the command line, runs the command, prints the
//! error chain and exits with [`CliError::exit_code`].
//!
//! Public are the pieces that tests, benches and embedders use: [`config`] (the
//! configuration), [`store`] (the SQLite state file), [`promise`] (the Promise ledger document),
//! [`serve`] (the server, to run in-process), [`exit`] (the exit codes) and [`CliError`]. The
//! other modules are the program's wiring and stay inside the crate.
//!
//! - `cli`: the command line (clap derive).
//! - [`config`]: `vnfm.toml` and how flags and environment variables override it.
//! - `app`: the composition root: the runtime, the clock, the state file, the VIM, the
//!   drivers and the [`vnfm_core::lifecycle::Lifecycle`] built from the configuration. Commands
//!   and the server take them from here, never from each other.
//! - `commands`: one function per command; they take the drivers from `app` and call
//!   `vnfm-core`.
//! - `inputs`: cloud files and VNF packages, read from disk or built in; `package_dir`: the
//!   folder of packages (which entries are packages, what is refused, change stamps).
//! - `intent`: intent-based cloud selection as the CLI wires it (`select`, `--intent`).
//! - `output`: data on stdout (human or JSON), diagnostics and progress on stderr; `report`:
//!   the named, versioned types every `--json` document is the serde form of; `render`: what
//!   the core returns, written for people; `display`: the control characters of what is
//!   printed for people or logged, escaped.
//! - [`exit`]: the exit codes.
//! - [`serve`]: `vnfm serve`, the HTTP server (SOL003 VNF LCM API, Prometheus alert endpoints,
//!   `/metrics`); [`heap`]: the allocator's counters the program registers for `/metrics`.
//! - [`promise`]: the Promise reservation ledger kept in the state file, shared by `vnfm
//!   reservation | allocation | capacity | provider`, the operations that draw from
//!   reservations, and `vnfm serve`.
//! - `vim`: the VIM drivers of a command: the simulated cloud (saved in the state file) or a
//!   real OpenStack.
//! - [`outgoing`]: the one HTTP client of every outgoing request of `vnfm serve` (its
//!   notifications, callback tests, token requests and the NFVO's grants; [`nfvo`]): bounded
//!   connections, answers and time, and the destination policy of client-given URLs.
//! - [`store`]: [`store::SqliteStore`], the persistent [`vnfm_core::driver::Store`] the CLI
//!   keeps its state in (VNF instances and LCM operation occurrences in one SQLite file).
//! - [`store_postgres`]: [`store_postgres::PgStore`], the same store in a PostgreSQL database
//!   shared by several processes.
//! - [`state_store`]: the state of a command in either store (`[state] url` selects
//!   PostgreSQL), and [`state_store::Documents`], the named documents both keep. The CLI's
//!   commands work on either; `vnfm serve` on the SQLite file only, for now.
//!
//! No module imports another that imports it back (`tests/module_cycles.rs` checks it).

pub(crate) mod app;
pub(crate) mod builtin;
pub(crate) mod cli;
pub(crate) mod commands;
pub mod config;
pub(crate) mod display;
pub mod dn;
mod error;
pub mod exit;
pub mod heap;
pub(crate) mod inputs;
pub(crate) mod intent;
pub mod nfvo;
pub mod outgoing;
pub(crate) mod output;
pub(crate) mod package_dir;
pub(crate) mod package_zip;
pub(crate) mod pem;
pub mod promise;
pub(crate) mod render;
pub(crate) mod report;
pub mod serve;
pub mod shared_sim;
pub mod state_store;
pub mod store;
pub mod store_postgres;
pub(crate) mod vim;

pub use error::CliError;

/// Runs the `vnfm` program: parses the process's arguments, runs the command, prints the
/// error and its causes on stderr, and returns the exit status (see [`exit`]).
pub fn run() -> std::process::ExitCode {
    use clap::Parser;
    let args = cli::Cli::parse();
    let out = output::Output::new(args.global.format(), args.global.quiet);
    let code = match commands::run(args, out) {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&e) => exit::OK,
        Err(e) => {
            // Errors name what was wrong, and that may hold any character.
            eprintln!("error: {}", display::escape_text(&e.to_string()));
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                eprintln!("  caused by: {}", display::escape_text(&s.to_string()));
                source = s.source();
            }
            e.exit_code()
        }
    };
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
