//! Fuzz target `package_zip`: see `vnfm_fuzz::package_zip` and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| vnfm_fuzz::package_zip(data));
