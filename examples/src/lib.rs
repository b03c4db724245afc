//! Runnable examples of vnfm; see the `examples/` directory.
