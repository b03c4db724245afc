//! Fuzz target `hot`: see `vnfm_fuzz::hot` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::hot(data));
