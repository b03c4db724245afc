//! Fuzz target `filter`: see `vnfm_fuzz::filter` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::filter(data));
