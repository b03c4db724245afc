//! Fuzz target `cloud`: see `vnfm_fuzz::cloud` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::cloud(data));
