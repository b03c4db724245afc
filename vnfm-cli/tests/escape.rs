//! Text from input printed for people or logged (issue 14 row 11): control characters in
//! instance names, alert labels and fingerprints are shown escaped (`\u{1b}`), never raw, and a
//! newline in them never starts a line of its own; JSON output keeps them exact.

// Test helpers: failing means panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStderr, Command, Output, Stdio};

/// The environment variables `vnfm` reads, removed from every command of these tests.
const VNFM_ENV: &[&str] = &[
    "VNFM_CONFIG",
    "VNFM_STATE",
    "VNFM_VIM",
    "VNFM_SIM_SEED",
    "VNFM_ID_SALT",
    "VNFM_PACKAGES_DIR",
    "VNFM_CLOUD",
    "VNFM_LISTEN",
    "VNFM_API_TOKEN",
    "VNFM_AUTO_HEALING",
    "VNFM_AUTO_SCALING",
    "VNFM_ALERT_BEARER_TOKEN",
    "VNFM_ALERT_BASIC_USER",
    "VNFM_ALERT_BASIC_PASSWORD",
];

const DEMO_VNFD: &str = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d";

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

/// `vnfm serve` on `state` and a free port, with `extra` flags; returns the child, its stderr
/// after the first line, and the address it listens on.
fn serve(state: &str, extra: &[&str]) -> (Child, BufReader<ChildStderr>, String) {
    let mut args = vec!["serve", "--state", state, "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut child = vnfm(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vnfm serve starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let addr = first
        .trim()
        .strip_prefix("vnfm serve: listening on http://")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    (child, stderr, addr)
}

/// Stops `child` with SIGTERM and returns the rest of its stderr.
fn stop(child: &mut Child, mut stderr: BufReader<ChildStderr>) -> String {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{rest}");
    rest
}

/// One HTTP/1.1 request; returns the status and the body.
fn post(addr: &str, path: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: \
         application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw.split(' ').nth(1).unwrap().parse().unwrap();
    let body = raw.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

#[test]
fn instance_names_with_control_characters_are_listed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let state = state.to_str().unwrap();
    let name = "ok\u{0}\u{1b}[31mRED\nFORGED line\u{202e}";
    let (mut child, stderr, addr) = serve(state, &[]);
    let body = serde_json::json!({"vnfdId": DEMO_VNFD, "vnfInstanceName": name});
    let (status, reply) = post(
        &addr,
        "/vnflcm/v2/vnf_instances",
        &serde_json::to_vec(&body).unwrap(),
    );
    assert_eq!(status, 201, "{reply}");
    stop(&mut child, stderr);

    let shown = r"ok\0\u{1b}[31mRED\nFORGED line\u{202e}";
    let out = run(&["--state", state, "instance", "list"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains(['\u{0}', '\u{1b}', '\u{202e}']), "{text:?}");
    assert_eq!(text.lines().count(), 1, "{text:?}");
    assert!(text.contains(shown), "{text}");

    let id = text.split_whitespace().next().unwrap();
    let out = run(&["--state", state, "instance", "show", id]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains(['\u{0}', '\u{1b}', '\u{202e}']), "{text:?}");
    assert!(text.contains(shown), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("FORGED")), "{text}");

    // JSON is exact: the name reads back as it was given.
    let out = run(&["--state", state, "--json", "instance", "list"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["vnfInstances"][0]["vnfInstanceName"], name);
}

#[test]
fn an_alert_with_newlines_in_its_labels_is_logged_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let state = state.to_str().unwrap();
    let (mut child, stderr, addr) = serve(state, &["--auto-healing"]);
    let alert = serde_json::json!({
        "status": "firing",
        "labels": {"receiver_type": "tacker", "function_type": "auto_heal",
            "vnf_instance_id": "gone\nvnfm serve: FORGED \u{1b}[2J",
            "vnfc_info_id": "VDU1-0"},
        "annotations": {}, "startsAt": "2027-01-15T08:00:00Z",
        "fingerprint": "f1\r\nvnfm serve: FORGED TOO"
    });
    let hook = serde_json::json!({"version": "4", "alerts": [alert]});
    let (status, reply) = post(
        &addr,
        "/alert/auto_healing",
        &serde_json::to_vec(&hook).unwrap(),
    );
    assert_eq!(status, 204, "{reply}");
    let log = stop(&mut child, stderr);
    assert!(!log.contains(['\u{1b}', '\r']), "{log:?}");
    assert!(!log
        .lines()
        .any(|l| l.contains("FORGED") && !l.contains("ignored")));
    let ignored: Vec<&str> = log.lines().filter(|l| l.contains("ignored")).collect();
    assert_eq!(ignored.len(), 1, "{log}");
    assert!(
        // client values are quoted (and cut at 64 characters: judge::Shown), escaped
        ignored[0].contains(r#"(fingerprint "f1\r\nvnfm serve: FORGED TOO")"#)
            && ignored[0].contains(r#"VNF instance "gone\nvnfm serve: FORGED \u{1b}[2J" does"#),
        "{log}"
    );
}
