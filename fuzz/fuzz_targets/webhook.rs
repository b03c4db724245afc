//! Fuzz target `webhook`: see `vnfm_fuzz::webhook` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::webhook(data));
