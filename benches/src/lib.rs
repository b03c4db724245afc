//! criterion benchmarks of vnfm; see `benches/README.md`.

/// The AZ reselection workload of the `reselection` bench and of the claims test.
pub mod reselection;

/// The linked-VNF family (OSM PLA's model) of the `intent` bench and its claims test.
pub mod links_family;
