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
//! - `--no-default-features --features mimalloc,openstack,k8s`: mimalloc; faster on the alert
//!   endpoint (`benches/README.md`), at the cost of the resident memory above. jemalloc takes
//!   precedence when both are on, so that `--all-features` (as CI builds and tests) gives the
//!   binary users get by default.
//!
//! With jemalloc, its counters (`stats.allocated`, `active`, `metadata`, `resident`, `mapped`,
//! `retained`) are registered for `vnfm serve`'s `/metrics` (`vnfm_heap_*_bytes`,
//! [`vnfm_cli::heap`]).

use std::process::ExitCode;

/// jemalloc, the default (feature `jemalloc`; it takes precedence over `mimalloc`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// mimalloc, when the `mimalloc` feature is on and `jemalloc` is not.
#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// jemalloc's counters (`stats.*`, refreshed by advancing its `epoch`), for `/metrics`.
#[cfg(feature = "jemalloc")]
fn jemalloc_stats() -> Option<vnfm_cli::heap::HeapStats> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    let bytes = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    Some(vnfm_cli::heap::HeapStats {
        allocated: bytes(stats::allocated::read().ok()?),
        active: bytes(stats::active::read().ok()?),
        metadata: bytes(stats::metadata::read().ok()?),
        resident: bytes(stats::resident::read().ok()?),
        mapped: bytes(stats::mapped::read().ok()?),
        retained: bytes(stats::retained::read().ok()?),
    })
}

fn main() -> ExitCode {
    #[cfg(feature = "jemalloc")]
    vnfm_cli::heap::register("jemalloc", jemalloc_stats);
    vnfm_cli::run()
}
