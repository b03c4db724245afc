//! Runnable examples of vnfm: one program per task under `examples/examples/`, each on the
//! simulated cloud (`cargo run -p vnfm-examples --example NAME`), and the files they read
//! (`clouds/`, `packages/`, `grants/`, `alerts/`, `intent/`).
//!
//! The library has no API. It holds the README as a doctest, so that the README's library
//! snippet is compiled and run by `cargo test` (`cargo test -p vnfm-examples --doc`).

/// The workspace README; its `rust` code blocks are doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;
