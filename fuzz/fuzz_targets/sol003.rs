//! Fuzz target `sol003`: see `vnfm_fuzz::sol003` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::sol003(data));
