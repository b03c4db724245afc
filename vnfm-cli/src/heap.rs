//! What the allocator of the running program says of its heap, for `vnfm serve`'s `/metrics`.
//!
//! The library does not choose the allocator: the program does (`src/main.rs`: jemalloc by
//! default), and registers how to read its counters with [`register`]. Without a registration
//! (the system allocator, mimalloc, an embedder, the tests that run the server in-process)
//! `/metrics` has no `vnfm_heap_*` lines.
//!
//! The counters tell the live heap from what the allocator keeps: `VmRSS` of the process is
//! `resident` plus the program's own mapped pages, the threads' stacks and what C code
//! allocates with the C library's `malloc` (the bundled SQLite: jemalloc's symbols are
//! prefixed, so glibc holds that), and `resident` minus `active` is what was freed and not yet
//! given back (jemalloc gives it back after its `dirty_decay_ms`, 10 s; docs/soak.md).

use std::sync::OnceLock;

/// The allocator's counters, in bytes (the names are jemalloc's `stats.*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes the program allocated and has not freed (`stats.allocated`).
    pub allocated: u64,
    /// Bytes in the pages that hold those allocations (`stats.active`): `allocated` and the
    /// room between them.
    pub active: u64,
    /// Bytes of the allocator's own bookkeeping (`stats.metadata`).
    pub metadata: u64,
    /// Bytes the allocator holds in physical memory (`stats.resident`): active pages,
    /// metadata, and freed pages not yet given back to the system.
    pub resident: u64,
    /// Bytes the allocator has mapped for its allocations (`stats.mapped`).
    pub mapped: u64,
    /// Bytes of address space kept for reuse and not resident (`stats.retained`).
    pub retained: u64,
}

/// Reads the allocator's counters; `None` when it cannot (the metrics are then left out).
pub type ReadHeapStats = fn() -> Option<HeapStats>;

static PROVIDER: OnceLock<(&'static str, ReadHeapStats)> = OnceLock::new();

/// Registers the allocator of the program (`allocator`, its name as `/metrics` labels it) and how
/// to read its counters. The first registration holds: false when one was made before.
pub fn register(allocator: &'static str, read: ReadHeapStats) -> bool {
    PROVIDER.set((allocator, read)).is_ok()
}

/// The registered allocator's name and counters, if one is registered and answers (`vnfm
/// serve`'s `/metrics` renders them as `vnfm_heap_*_bytes`).
pub(crate) fn read() -> Option<(&'static str, HeapStats)> {
    let (allocator, read) = PROVIDER.get()?;
    Some((allocator, read()?))
}
