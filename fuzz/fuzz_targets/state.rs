//! Fuzz target `state`: see `vnfm_fuzz::state` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::state(data));
