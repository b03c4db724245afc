//! One operation per instance across processes, and recovery of operations whose process
//! died, through the `vnfm` binary on the simulated cloud with one state file:
//!
//! - a command SIGKILLed after each commit of its instantiate (the simulator's fault injection
//!   `VNFM_SIM_KILL_AFTER_COMMIT`) leaves an occurrence that nobody touches while its lease is
//!   alive (`vnfm serve` started meanwhile included), and that can be rolled back (no stack,
//!   no server left in the simulated cloud) or retried (completed) once it expired;
//! - SIGINT ends the operation FAILED_TEMP at its next step (exit 130), rollback works right
//!   away;
//! - two commands instantiating one instance at the same moment: exactly one runs.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const VNFM_ENV: &[&str] = &[
    "VNFM_CONFIG",
    "VNFM_STATE",
    "VNFM_VIM",
    "VNFM_SIM_SEED",
    "VNFM_ID_SALT",
    "VNFM_PACKAGES_DIR",
    "VNFM_CLOUD",
    "VNFM_LISTEN",
    "VNFM_SIM_KILL_AFTER_COMMIT",
];

/// The lease of these tests' operations (`[state] lease_seconds`).
const LEASE: Duration = Duration::from_secs(4);

struct Dir {
    _tmp: tempfile::TempDir,
    config: PathBuf,
    state: PathBuf,
}

fn dir() -> Dir {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("vnfm.toml");
    std::fs::write(
        &config,
        format!("[state]\nlease_seconds = {}\n", LEASE.as_secs()),
    )
    .unwrap();
    let state = tmp.path().join("state.sqlite");
    Dir {
        _tmp: tmp,
        config,
        state,
    }
}

fn vnfm(d: &Dir, state: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.arg("--config")
        .arg(&d.config)
        .arg("--state")
        .arg(state)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    cmd
}

fn run(d: &Dir, state: &Path, args: &[&str]) -> Output {
    vnfm(d, state, args).output().expect("vnfm runs")
}

fn text(out: &Output) -> String {
    format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(out)))
}

/// The only occurrence of the state file.
fn only_op(d: &Dir, state: &Path) -> Value {
    let out = run(d, state, &["--json", "op", "list"]);
    let ops = json(&out)["vnfLcmOpOccs"].as_array().unwrap().clone();
    assert_eq!(ops.len(), 1, "{ops:#?}");
    ops[0].clone()
}

/// The simulated cloud saved in the state file.
fn sim(state: &Path) -> Value {
    let store = vnfm_cli::store::SqliteStore::open(state).unwrap();
    let doc = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(store.document("sim"))
        .unwrap()
        .expect("the simulated cloud is saved");
    serde_json::from_str(&doc).unwrap()
}

/// Top-level stacks that are not deleted, and servers, of the simulated cloud.
fn leftovers(state: &Path) -> (usize, usize) {
    let s = sim(state);
    let stacks = s["stacks"]
        .as_object()
        .unwrap()
        .values()
        .filter(|st| st["parent"].is_null() && st["status"] != "DELETE_COMPLETE")
        .count();
    let servers = s["servers"].as_object().unwrap().len();
    (stacks, servers)
}

fn instantiate_killed_after(d: &Dir, commit: &str) -> Output {
    vnfm(d, &d.state, &["--json", "instantiate"])
        .env("VNFM_SIM_KILL_AFTER_COMMIT", commit)
        .output()
        .unwrap()
}

/// `vnfm serve` on `state` until it listens, then SIGTERM: what it did at start.
fn serve_briefly(d: &Dir, state: &Path) {
    let mut child = vnfm(d, state, &["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    assert!(first.contains("listening on"), "{first}");
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn an_instantiate_killed_after_any_commit_is_left_alone_while_alive_then_rolls_back_or_retries() {
    // Commits of `vnfm instantiate`: 1 the new instance, 2 STARTING, 3 PROCESSING, 4 the
    // stack id right after the create, 5 COMPLETED.
    for commit in 2..=4 {
        let d = dir();
        let killed_at = Instant::now();
        let out = instantiate_killed_after(&d, &commit.to_string());
        assert_eq!(
            out.status.signal(),
            Some(9),
            "commit {commit}: {}",
            text(&out)
        );
        let op = only_op(&d, &d.state);
        let id = op["id"].as_str().unwrap().to_owned();
        let state = op["operationState"].as_str().unwrap();
        assert!(
            ["STARTING", "PROCESSING"].contains(&state),
            "commit {commit}: {op:#}"
        );
        assert!(op["lease"]["owner"].is_string(), "{op:#}");
        let (stacks, _) = leftovers(&d.state);
        assert_eq!(stacks, usize::from(commit == 4), "commit {commit}");
        // While the lease is alive: nobody takes it, `vnfm serve` leaves it alone.
        serve_briefly(&d, &d.state);
        let out = run(&d, &d.state, &["op", "rollback", &id]);
        assert!(
            killed_at.elapsed() < LEASE,
            "the machine was too slow to test a live lease"
        );
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("alive"), "{}", text(&out));
        assert_eq!(only_op(&d, &d.state)["operationState"], state);
        // Once it expired: roll back on one copy, retry on another. Wait for the lease's own
        // expiry (taken at the commit, which a loaded machine may make well after the kill).
        let expires: chrono::DateTime<chrono::Utc> =
            serde_json::from_value(op["lease"]["expires"].clone()).unwrap();
        let left = (expires - chrono::Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        std::thread::sleep(left + Duration::from_millis(300));
        let copy = d.state.with_extension("copy.sqlite");
        std::fs::copy(&d.state, &copy).unwrap();
        let out = run(&d, &d.state, &["--json", "op", "rollback", &id]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "commit {commit}: {}",
            text(&out)
        );
        assert_eq!(json(&out)["vnfLcmOpOcc"]["operationState"], "ROLLED_BACK");
        assert_eq!(
            leftovers(&d.state),
            (0, 0),
            "commit {commit}: nothing left behind"
        );
        let out = run(&d, &copy, &["--json", "op", "retry", &id]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "commit {commit}: {}",
            text(&out)
        );
        let v = json(&out);
        assert_eq!(v["vnfLcmOpOcc"]["operationState"], "COMPLETED");
        assert_eq!(v["vnfInstance"]["instantiationState"], "INSTANTIATED");
        assert_eq!(v["vnfcs"].as_array().unwrap().len(), 3);
        assert_eq!(
            leftovers(&copy),
            (1, 3),
            "commit {commit}: one stack, three servers"
        );
    }
}

#[test]
fn sigint_ends_the_operation_failed_temp_and_it_rolls_back_at_once() {
    let d = dir();
    // After the PROCESSING commit: the signal is taken at the next step (the stack create's
    // checkpoint commit), the operation ends there.
    let out = instantiate_killed_after(&d, "3:INT");
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let v = json(&out);
    assert_eq!(v["vnfLcmOpOcc"]["operationState"], "FAILED_TEMP");
    let detail = v["vnfLcmOpOcc"]["error"]["detail"].as_str().unwrap();
    assert!(detail.contains("interrupted (SIGINT)"), "{detail}");
    assert!(detail.contains("vnfm op retry"), "{detail}");
    let id = v["vnfLcmOpOcc"]["id"].as_str().unwrap();
    let out = run(&d, &d.state, &["--json", "op", "rollback", id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(json(&out)["vnfLcmOpOcc"]["operationState"], "ROLLED_BACK");
    assert_eq!(leftovers(&d.state), (0, 0));
}

#[test]
fn two_commands_instantiating_one_instance_at_once_exactly_one_runs() {
    let d = dir();
    let out = run(&d, &d.state, &["--json", "instantiate"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let inst = json(&out)["vnfInstance"]["id"].as_str().unwrap().to_owned();
    let mut conflicts_at_start = 0;
    for round in 0..8 {
        let out = run(&d, &d.state, &["terminate", "--instance", &inst]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let spawn = || {
            vnfm(
                &d,
                &d.state,
                &["--json", "instantiate", "--instance", &inst],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
        let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
        let won = codes.iter().filter(|c| **c == Some(0)).count();
        assert_eq!(won, 1, "round {round}: exactly one runs: {codes:?}");
        let lost = outs.iter().find(|o| o.status.code() != Some(0)).unwrap();
        assert_eq!(lost.status.code(), Some(2), "round {round}: {}", text(lost));
        let msg = String::from_utf8_lossy(&lost.stderr);
        assert!(msg.contains("conflict"), "round {round}: {msg}");
        if msg.contains("at the same moment") || msg.contains("is PROCESSING") {
            conflicts_at_start += 1;
        }
        // One more instantiate occurrence, COMPLETED; the loser left none.
        let out = run(&d, &d.state, &["--json", "op", "list", "--instance", &inst]);
        let ops = json(&out)["vnfLcmOpOccs"].as_array().unwrap().clone();
        let instantiates: Vec<&Value> = ops
            .iter()
            .filter(|o| o["operation"] == "INSTANTIATE")
            .collect();
        assert_eq!(instantiates.len(), round + 2, "round {round}: {ops:#?}");
        assert!(ops.iter().all(|o| o["operationState"] == "COMPLETED"));
    }
    eprintln!("{conflicts_at_start} of 8 rounds conflicted while the winner was starting");
}

#[test]
fn failing_an_instantiate_killed_after_its_create_deletes_its_stack() {
    let d = dir();
    // Killed right after commit 4: the stack exists, only the occurrence's progress knows it.
    let out = instantiate_killed_after(&d, "4");
    assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
    let op = only_op(&d, &d.state);
    let id = op["id"].as_str().unwrap().to_owned();
    let inst = op["vnfInstanceId"].as_str().unwrap().to_owned();
    let stack = op["progress"]["stackId"].as_str().unwrap().to_owned();
    assert_eq!(leftovers(&d.state), (1, 3));
    let expires: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(op["lease"]["expires"].clone()).unwrap();
    let left = (expires - chrono::Utc::now())
        .to_std()
        .unwrap_or(Duration::ZERO);
    std::thread::sleep(left + Duration::from_millis(300));

    let out = run(&d, &d.state, &["--json", "op", "fail", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(json(&out)["vnfLcmOpOcc"]["operationState"], "FAILED");
    assert_eq!(
        leftovers(&d.state),
        (0, 0),
        "stack {stack} and its servers deleted"
    );
    let out = run(&d, &d.state, &["--json", "instance", "show", &inst]);
    let shown = json(&out);
    assert_eq!(
        shown["vnfInstance"]["instantiationState"],
        "NOT_INSTANTIATED"
    );
    assert!(
        shown["vnfInstance"]["metadata"]["stackId"].is_null(),
        "{shown:#}"
    );
    // Its stack name is free again: the instance instantiates.
    let out = run(
        &d,
        &d.state,
        &["--json", "instantiate", "--instance", &inst],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(json(&out)["vnfLcmOpOcc"]["operationState"], "COMPLETED");
    assert_eq!(leftovers(&d.state), (1, 3));
}
