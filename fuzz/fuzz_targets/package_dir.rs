//! Fuzz target `package_dir`: see `vnfm_fuzz::package_dir` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::package_dir(data));
