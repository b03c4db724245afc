//! The `vnfm` command-line program.
fn main() {}
