//! The `vnfm` command-line program: parse, run, print the error chain, exit.

use std::process::ExitCode;

use clap::Parser;
use vnfm_cli::{cli, commands, exit, output};

/// mimalloc rather than the system allocator: `vnfm serve` allocates from many threads at
/// once, and glibc's malloc spent a third of the alert endpoint's time in its arena locks
/// (`benches/README.md`). A program that embeds the library picks its own allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let out = output::Output::new(args.global.format(), args.global.quiet, args.global.verbose);
    let code = match commands::run(args, out) {
        Ok(()) => exit::OK,
        Err(e) if output::is_broken_pipe(&e) => exit::OK,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            e.exit_code()
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
