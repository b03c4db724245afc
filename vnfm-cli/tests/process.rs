//! Tests that need more than one command line and its output: a corrupt state file, a closed
//! output pipe, and known bugs (ignored, with the reason) that the trycmd cases cannot express.

// Test helpers: failing means panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use vnfm_cli::store::SqliteStore;
use vnfm_cli::CliError;
use vnfm_core::driver::DriverError;

/// The environment variables `vnfm` reads, removed from every command of these tests.
const VNFM_ENV: &[&str] = &[
    "VNFM_CONFIG",
    "VNFM_STATE",
    "VNFM_VIM",
    "VNFM_SIM_SEED",
    "VNFM_ID_SALT",
    "VNFM_PACKAGES_DIR",
    "VNFM_CLOUD",
];

/// `vnfm` with `args`, run in the crate directory without any inherited `VNFM_*` variable.
fn vnfm(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    cmd
}

fn run(args: &[&str]) -> Output {
    vnfm(args).output().expect("vnfm runs")
}

/// 8 KiB that are not an SQLite file (the same bytes on every run).
fn junk() -> Vec<u8> {
    (0..8192u32)
        .map(|i| (i.wrapping_mul(7) + 3) as u8)
        .collect()
}

fn junk_file(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("junk.sqlite");
    std::fs::write(&path, junk()).unwrap();
    path
}

/// The message of an error followed by its causes, as `vnfm` prints them.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = format!("error: {e}\n");
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(&format!("  caused by: {c}\n"));
        cur = c.source();
    }
    out
}

// ---- a corrupt state file ----

#[test]
fn corrupt_state_file_is_refused_naming_the_file_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = junk_file(&dir);
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(
        matches!(
            err,
            DriverError::Other {
                driver: "sqlite",
                ..
            }
        ),
        "{err:?}"
    );
    // The first cause is SQLite's own text; rusqlite may add its error code below it.
    let shown = chain(&err);
    assert!(
        shown.starts_with(&format!(
            "error: sqlite: {}: not a vnfm state database (expected an SQLite file written by \
             vnfm, or no file: vnfm creates it): cannot read the database header\n  caused by: file is \
             not a database\n",
            path.display()
        )),
        "{shown}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        junk(),
        "the file was changed"
    );
}

#[test]
fn corrupt_state_file_reported_as_a_state_error_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = junk_file(&dir);
    let source = SqliteStore::open(&path).unwrap_err();
    let err = CliError::State {
        path: path.clone(),
        message: "cannot open the state file".into(),
        source: Some(source),
    };
    assert_eq!(err.exit_code(), 2);
    let shown = chain(&err);
    assert!(
        shown.starts_with(&format!(
            "error: state file {}: cannot open the state file\n  caused by: sqlite: {}: not a \
             vnfm state database",
            path.display(),
            path.display()
        )),
        "{shown}"
    );
}

#[test]
fn an_empty_state_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    std::fs::write(&path, b"").unwrap();
    let out = run(&["--state", path.to_str().unwrap(), "instance", "list"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}: the state file is empty (0 bytes)",
            path.display()
        )),
        "{stderr}"
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "the file was changed"
    );
    // A state file that does not exist is created.
    let fresh = dir.path().join("new.sqlite");
    let out = run(&["--state", fresh.to_str().unwrap(), "instance", "list"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn a_corrupt_state_file_exits_2_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = junk_file(&dir);
    let out = run(&["--state", path.to_str().unwrap(), "instance", "list"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "error: state file {}: cannot open the state file",
            path.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("not a vnfm state database"), "{stderr}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        junk(),
        "the file was changed"
    );
}

#[test]
fn commands_without_state_do_not_open_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = junk_file(&dir);
    let state = path.to_str().unwrap();
    let out = run(&["--state", state, "config", "show"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains(&format!("# state file: {state}\n")),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        junk(),
        "the file was changed"
    );
}

// ---- a closed output pipe ----

/// Runs `vnfm args` with its stdout connected to a socket whose other end is already closed,
/// so that its first write fails with EPIPE (deterministically, unlike a pipe closed by a
/// reader that may lose the race against the write).
#[cfg(unix)]
fn run_with_closed_stdout(args: &[&str]) -> Output {
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;

    let (ours, theirs) = UnixStream::pair().unwrap();
    drop(ours);
    let stdout: OwnedFd = theirs.into();
    vnfm(args)
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::piped())
        .output()
        .expect("vnfm runs")
}

#[cfg(unix)]
#[test]
fn closed_stdout_exits_0_without_a_message() {
    for args in [
        &["cloud", "show"][..],
        &["cloud", "show", "--json"],
        &["package", "show", "../examples/packages/demo-vnf"],
        &["config", "show"],
    ] {
        let out = run_with_closed_stdout(args);
        assert_eq!(out.status.code(), Some(0), "vnfm {args:?}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "",
            "vnfm {args:?} wrote to stderr"
        );
    }
}

#[test]
fn reader_closing_after_the_first_line_exits_0() {
    // `vnfm cloud show | head -1`: read one line, close the pipe, wait.
    let mut child = vnfm(&["cloud", "show"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vnfm starts");
    let mut first = String::new();
    {
        let stdout = child.stdout.take().unwrap();
        BufReader::new(stdout).read_line(&mut first).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        first,
        "cloud <built-in demo cloud: examples/clouds/demo.yaml>\n"
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

// ---- known bugs of the CLI's output ----

#[test]
fn unreadable_config_file_shows_the_io_error_as_the_cause() {
    let out = run(&[
        "--config",
        "tests/cmd/config/no-such.toml",
        "config",
        "show",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let mut lines = stderr.lines();
    assert_eq!(
        lines.next(),
        Some("error: configuration tests/cmd/config/no-such.toml: cannot read the configuration file"),
        "{stderr}"
    );
    assert!(
        lines.next().is_some_and(|l| l.starts_with("  caused by: ")),
        "{stderr}"
    );
}

#[test]
fn package_show_lists_each_base_hot_file_once() {
    let out = run(&["package", "show", "--json", "tests/cmd/packages/mini"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["flavours"][0]["baseHot"],
        serde_json::json!(["(top template)", "nested/web.yaml"])
    );
}

/// The fixtures these tests name exist (a renamed fixture would make the bug tests above pass
/// or fail for the wrong reason).
#[test]
fn fixtures_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(root
        .join("tests/cmd/packages/mini/BaseHOT/simple/nested/web.yaml")
        .is_file());
    assert!(!root.join("tests/cmd/config/no-such.toml").exists());
    assert!(root.join("../examples/packages/demo-vnf").is_dir());
}

// ---- vnfm serve ----

/// `vnfm serve` with alert endpoints on says at start when they take webhooks without
/// credentials, and not when a token guards them; SIGTERM stops it (exit 0).
#[cfg(unix)]
#[test]
fn serve_warns_when_the_alert_endpoints_are_open() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let state = state.to_str().unwrap();
    for (token, warned) in [(None, true), (Some("t0k3n"), false)] {
        let mut args = vec![
            "serve",
            "--state",
            state,
            "--listen",
            "127.0.0.1:0",
            "--auto-healing",
        ];
        if let Some(t) = token {
            args.extend(["--alert-bearer-token", t]);
        }
        let mut cmd = vnfm(&args);
        for var in [
            "VNFM_LISTEN",
            "VNFM_AUTO_HEALING",
            "VNFM_AUTO_SCALING",
            "VNFM_ALERT_BEARER_TOKEN",
            "VNFM_ALERT_BASIC_USER",
            "VNFM_ALERT_BASIC_PASSWORD",
        ] {
            cmd.env_remove(var);
        }
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("vnfm serve starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        assert!(
            first.starts_with("vnfm serve: listening on http://127.0.0.1:"),
            "{first}"
        );
        let killed = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{first}{rest}");
        assert_eq!(
            rest.contains("the alert endpoints take webhooks without credentials"),
            warned,
            "token {token:?}: {rest}"
        );
        assert!(rest.contains("vnfm serve: stopping"), "{rest}");
    }
}
