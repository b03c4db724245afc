//! Locating the shared reference payloads (`../shared/vectors/`) for tests.
//!
//! The project's tests read real payloads (OpenStack API samples and captures, Alertmanager
//! webhooks, Tacker scenarios) from the `shared/vectors/` folder that sits beside the project's
//! root. The folder is not part of the project: when it is absent, the tests that need it print
//! a `skipping` line naming the path they looked at and pass without checking anything.
//!
//! `VNFM_SHARED_DIR` overrides the location of `shared/`.

use std::path::{Path, PathBuf};

/// The `shared/vectors` directory, or `None` (after printing a `skipping` line to stderr
/// naming `what`) when it does not exist.
///
/// `manifest_dir` is the calling crate's `CARGO_MANIFEST_DIR`; `shared/` is looked for two
/// levels above it (beside the workspace root) unless `VNFM_SHARED_DIR` is set.
pub fn shared_vectors(manifest_dir: &str, what: &str) -> Option<PathBuf> {
    let shared = std::env::var_os("VNFM_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(manifest_dir).join("..").join("..").join("shared"));
    let vectors = shared.join("vectors");
    if vectors.is_dir() {
        Some(vectors)
    } else {
        eprintln!(
            "skipping {what}: reference vectors not found at {} (set VNFM_SHARED_DIR to the shared/ folder)",
            vectors.display()
        );
        None
    }
}

/// Reads a file below `shared/vectors` as a string; `None` when the vectors are absent.
///
/// # Panics
/// When the vectors directory exists but the file does not: a test that names a missing vector
/// is broken, and must fail loudly rather than skip.
#[allow(clippy::panic)]
pub fn read_vector(manifest_dir: &str, rel: &str) -> Option<String> {
    let dir = shared_vectors(manifest_dir, rel)?;
    let path = dir.join(rel);
    match std::fs::read_to_string(&path) {
        Ok(s) => Some(s),
        Err(e) => panic!(
            "vector {} exists as a folder but {rel} cannot be read: {e}",
            dir.display()
        ),
    }
}
