//! Locating the shared reference payloads (`../shared/vectors/`) for tests, and how tests skip.
//!
//! The project's tests read real payloads (OpenStack API samples and captures, Alertmanager
//! webhooks, Tacker scenarios) from the `shared/vectors/` folder that sits beside the project's
//! root. The folder is not part of the project: when it is absent, the tests that need it
//! *skip*: they call [`skip`], which prints a `skipping` line naming the path they looked at.
//!
//! `VNFM_SHARED_DIR` overrides the location of `shared/`.
//!
//! # Skips are recorded, and fail in strict mode
//! Every skip goes through [`skip`] (the vectors here, the real-service suites with
//! [`real_suite_enabled`]):
//! - it prints `skipping <suite>: <what>: <why>` on stderr;
//! - with `VNFM_SKIP_LOG` set to a file, it appends `<suite>\t<what>\t<why>` to it, so the test
//!   command (`scripts/test.sh`) can say at the end what was skipped and why;
//! - with `VNFM_STRICT` true (`.ci/run` sets it; `scripts/test.sh --strict` too) the skip is a
//!   failure naming what could not run, unless its suite is listed in `VNFM_SKIP_DEFERRED`
//!   (comma-separated: suites that the same test command runs later, e.g. the real-service
//!   suites, which the main test pass runs without their services).
//!
//! Boolean variables (`VNFM_STRICT`, `VNFM_TEST_OPENSTACK`, ...) take the usual spellings:
//! `1`, `true`, `yes`, `on` and `0`, `false`, `no`, `off`, `""` in any case; anything else is an
//! error, so that a typo does not silently skip a suite ([`flag`]).

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
        skip(
            "vectors",
            what,
            &format!(
                "reference vectors not found at {} (set VNFM_SHARED_DIR to the shared/ folder)",
                vectors.display()
            ),
        );
        None
    }
}

/// The value of the boolean environment variable `name`: `None` when unset, `Some` for the
/// usual spellings (see the [module docs](self)).
///
/// # Panics
/// On any other value, naming the variable and the value (a test-support function: a typo
/// must fail the test run, not skip a suite).
#[allow(clippy::panic)]
pub fn flag(name: &str) -> Option<bool> {
    let v = std::env::var(name).ok()?;
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" | "" => Some(false),
        _ => panic!("{name}={v:?}: expected 1, true, yes, on (or 0, false, no, off, empty)"),
    }
}

/// Records that the test `what` of `suite` did not run, and why (see the [module docs](self)).
///
/// # Panics
/// In strict mode (`VNFM_STRICT` true) unless `suite` is deferred (`VNFM_SKIP_DEFERRED`): a
/// skip on CI is a failure that names what could not run.
#[allow(clippy::panic)]
pub fn skip(suite: &str, what: &str, why: &str) {
    eprintln!("skipping {suite}: {what}: {why}");
    if let Some(log) = std::env::var_os("VNFM_SKIP_LOG") {
        use std::io::Write;
        let line = format!(
            "{suite}\t{}\t{}\n",
            what.replace(['\t', '\n'], " "),
            why.replace(['\t', '\n'], " ")
        );
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
    let deferred = std::env::var("VNFM_SKIP_DEFERRED").unwrap_or_default();
    if flag("VNFM_STRICT") == Some(true) && !deferred.split(',').any(|d| d.trim() == suite) {
        panic!("strict mode (VNFM_STRICT): {suite}: {what} could not run: {why}");
    }
}

/// True when the real-service suite `suite` is asked for by the boolean variable `var`
/// (`VNFM_TEST_OPENSTACK`, `VNFM_TEST_PROMETHEUS`, ...); otherwise records a [`skip`] of
/// `what`, saying how to run it (`how`), and returns false.
pub fn real_suite_enabled(var: &str, suite: &str, what: &str, how: &str) -> bool {
    if flag(var) == Some(true) {
        return true;
    }
    skip(suite, what, &format!("{var} is not set to true; {how}"));
    false
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
