//! Fuzz target `subscription`: see `vnfm_fuzz::subscription` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::subscription(data));
