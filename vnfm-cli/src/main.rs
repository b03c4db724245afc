//! The `vnfm` command-line program: [`vnfm_cli::run`] with mimalloc as the allocator.

use std::process::ExitCode;

/// mimalloc rather than the system allocator: `vnfm serve` allocates from many threads at
/// once, and glibc's malloc spent a third of the alert endpoint's time in its arena locks
/// (`benches/README.md`). A program that embeds the library picks its own allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    vnfm_cli::run()
}
