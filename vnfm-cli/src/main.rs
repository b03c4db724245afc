//! The `vnfm` command-line program: [`vnfm_cli::run`].
//!
//! The allocator is jemalloc (the default feature `jemalloc`), with its background threads on:
//! memory freed by a burst of work goes back to the system by time decay (dirty pages unused for
//! 10 s, jemalloc's `dirty_decay_ms`), also while `vnfm serve` is idle and allocates nothing.
//! The soak of `vnfm serve` (docs/soak.md) chose it: glibc's malloc keeps what the last burst
//! freed, so two idle samples of the same plateau differed by up to 14 %; mimalloc held 45-60 MB
//! more than either.
//!
//! - `--no-default-features` (plus the drivers wanted, e.g. `--features openstack,k8s`): the
//!   system allocator.
//! - `--features mimalloc`: mimalloc, which takes precedence over `jemalloc`; faster on the
//!   alert endpoint (`benches/README.md`), at the cost of the resident memory above.

use std::process::ExitCode;

/// jemalloc, the default (feature `jemalloc`, unless `mimalloc` is on too).
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// mimalloc, when the `mimalloc` feature is on.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    vnfm_cli::run()
}
