//! Fuzz target `config`: see `vnfm_fuzz::config` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::config(data));
