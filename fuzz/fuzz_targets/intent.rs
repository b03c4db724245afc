//! Fuzz target `intent`: see `vnfm_fuzz::intent` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::intent(data));
