//! The `vnfm` command-line program: [`vnfm_cli::run`].
//!
//! The allocator is the system's unless the binary is built with `--features mimalloc`. The
//! soak of `vnfm serve` (docs/soak.md) measured both: with glibc the resident memory stays
//! within its bound (+6 % after the warm-up); mimalloc holds 45-60 MB more and keeps growing as
//! the threads of tokio's blocking pool come and go, each with its own heap. mimalloc is faster
//! for the alert endpoint (glibc's arena locks, `benches/README.md`): a deployment that values
//! that over a flat footprint builds with the feature.

use std::process::ExitCode;

/// mimalloc, when the `mimalloc` feature is on.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    vnfm_cli::run()
}
