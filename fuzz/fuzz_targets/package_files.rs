//! Fuzz target `package_files`: see `vnfm_fuzz::package_files` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::package_files(data));
