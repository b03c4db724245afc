//! criterion benchmarks of vnfm; see `benches/README.md`.
