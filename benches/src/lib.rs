//! criterion benchmarks of vnfm; see `benches/README.md`.

/// The AZ reselection workload of the `reselection` bench and of the claims test.
pub mod reselection;
