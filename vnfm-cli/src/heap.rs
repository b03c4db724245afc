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

use std::fmt::Write as _;
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

/// Appends the `vnfm_heap_*` gauges of the registered allocator to `text`, if one is registered
/// and answers.
pub(crate) fn render_metrics(text: &mut String) {
    if let Some((allocator, read)) = PROVIDER.get() {
        render(text, allocator, read());
    }
}

fn render(text: &mut String, allocator: &str, stats: Option<HeapStats>) {
    let Some(s) = stats else { return };
    let gauges: [(&str, &str, u64); 6] = [
        (
            "allocated",
            "Bytes the program allocated and has not freed, as its allocator counts them.",
            s.allocated,
        ),
        (
            "active",
            "Bytes in the allocator's pages that hold the program's allocations.",
            s.active,
        ),
        (
            "metadata",
            "Bytes of the allocator's own bookkeeping.",
            s.metadata,
        ),
        (
            "resident",
            "Bytes the allocator holds in physical memory (active, metadata, freed pages not yet \
             given back).",
            s.resident,
        ),
        (
            "mapped",
            "Bytes the allocator has mapped for allocations.",
            s.mapped,
        ),
        (
            "retained",
            "Bytes of address space the allocator keeps for reuse, not resident.",
            s.retained,
        ),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(text, "# HELP vnfm_heap_{name}_bytes {help}");
        let _ = writeln!(text, "# TYPE vnfm_heap_{name}_bytes gauge");
        let _ = writeln!(
            text,
            "vnfm_heap_{name}_bytes{{allocator=\"{allocator}\"}} {value}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_is_a_gauge_labelled_with_the_allocator() {
        let mut text = String::new();
        let stats = HeapStats {
            allocated: 1,
            active: 2,
            metadata: 3,
            resident: 4,
            mapped: 5,
            retained: 6,
        };
        render(&mut text, "jemalloc", Some(stats));
        for (name, value) in [
            ("allocated", 1),
            ("active", 2),
            ("metadata", 3),
            ("resident", 4),
            ("mapped", 5),
            ("retained", 6),
        ] {
            assert!(
                text.contains(&format!("# TYPE vnfm_heap_{name}_bytes gauge\n")),
                "{text}"
            );
            assert!(
                text.contains(&format!(
                    "\nvnfm_heap_{name}_bytes{{allocator=\"jemalloc\"}} {value}\n"
                )),
                "{text}"
            );
        }
        assert_eq!(text.lines().count(), 18);
    }

    #[test]
    fn an_allocator_that_does_not_answer_adds_nothing() {
        let mut text = String::new();
        render(&mut text, "jemalloc", None);
        assert!(text.is_empty());
    }
}
