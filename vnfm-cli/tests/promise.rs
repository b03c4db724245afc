//! `vnfm promise` end to end through the binary, with a state file in a temporary folder:
//! the ledger survives between runs (restart), counter-offers and refusals have their exit
//! codes, and a corrupt ledger document is refused naming the state file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const VNFM_ENV: &[&str] = &[
    "VNFM_CONFIG",
    "VNFM_STATE",
    "VNFM_VIM",
    "VNFM_SIM_SEED",
    "VNFM_PACKAGES_DIR",
    "VNFM_CLOUD",
];

const T0: &str = "2027-01-01T00:00:00Z";
const T1: &str = "2027-01-01T01:00:00Z";
const T2: &str = "2027-01-01T02:00:00Z";
const T3: &str = "2027-01-01T03:00:00Z";
const T4: &str = "2027-01-01T04:00:00Z";

fn run(state: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.arg("--state")
        .arg(state)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    cmd.output().expect("vnfm runs")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn reservations_persist_across_runs_with_counter_offers_and_draws() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");

    // A fresh state file starts from the demo cloud's zones: AZ-2 has 16 free vCPUs.
    let out = run(
        &state,
        &[
            "--json", "promise", "--now", T0, "capacity", "--zone", "AZ-2",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["capacity"][0]["available"]["cores"], 16);
    assert_eq!(v["capacity"][0]["total"]["instances"], 10);

    // A future reservation of 12 cores over [T1, T3).
    let out = run(
        &state,
        &[
            "--json",
            "promise",
            "--now",
            T0,
            "reserve",
            "--zone",
            "AZ-2",
            "--cores",
            "12",
            "--ram",
            "4096",
            "--instances",
            "2",
            "--start",
            T1,
            "--end",
            T3,
            "--id",
            "r-1",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["reservations"][0]["id"], "r-1");
    assert_eq!(v["reservations"][0]["status"], "initialized");

    // In another run: 8 more cores over [T2, T4) do not fit; the counter-offer says 4 would,
    // or the whole request from T3 on. Exit 4.
    let out = run(
        &state,
        &[
            "--json", "promise", "--now", T0, "reserve", "--zone", "AZ-2", "--cores", "8",
            "--start", T2, "--end", T4,
        ],
    );
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["counterOffer"]["largest"]["cores"], 4);
    assert_eq!(v["counterOffer"]["earliest"]["start"], T3);
    assert!(
        stderr(&out).contains("does not fit in zone AZ-2"),
        "{}",
        stderr(&out)
    );

    // The human form says the same.
    let out = run(
        &state,
        &[
            "promise", "--now", T0, "reserve", "--zone", "AZ-2", "--cores", "8", "--start", T2,
            "--end", T4,
        ],
    );
    assert_eq!(code(&out), 4);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("largest amount over the window: 4 cores"),
        "{text}"
    );
    assert!(
        text.contains("earliest window where it fits: [2027-01-01T03:00:00Z"),
        "{text}"
    );

    // Drawing before the start is refused (exit 2), after it works and the reservation shows it.
    let out = run(
        &state,
        &["promise", "--now", T0, "draw", "r-1", "--cores", "2"],
    );
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("reservation r-1 is initialized, expected active"));
    let out = run(
        &state,
        &[
            "--json",
            "promise",
            "--now",
            T1,
            "draw",
            "r-1",
            "--cores",
            "2",
            "--instances",
            "1",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["reservations"][0]["status"], "active");
    assert_eq!(v["reservations"][0]["remaining"]["cores"], 10);
    assert_eq!(v["events"][0]["event"], "reservationStarted");
    let alloc = v["allocation"]["id"].as_str().unwrap().to_owned();

    // More than remains: exit 4.
    let out = run(
        &state,
        &["promise", "--now", T1, "draw", "r-1", "--cores", "11"],
    );
    assert_eq!(code(&out), 4);
    assert!(
        stderr(&out).contains("has 10 cores remaining, 11 requested"),
        "{}",
        stderr(&out)
    );

    // Release, then list: what was drawn is back.
    let out = run(&state, &["promise", "--now", T2, "release", &alloc]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(
        &state,
        &["--json", "promise", "--now", T2, "list", "--zone", "AZ-2"],
    );
    let v = json(&out);
    assert_eq!(v["reservations"].as_array().unwrap().len(), 1);
    assert_eq!(v["reservations"][0]["remaining"]["cores"], 12);

    // Going back in time is refused.
    let out = run(&state, &["promise", "--now", T0, "list"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));

    // Cancel; then the zone has its 16 cores over the whole window again.
    let out = run(&state, &["promise", "--now", T2, "cancel", "r-1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cancelled"));
    let out = run(
        &state,
        &[
            "--json", "promise", "--now", T2, "capacity", "--zone", "AZ-2", "--end", T4,
        ],
    );
    assert_eq!(json(&out)["capacity"][0]["available"]["cores"], 16);
}

#[test]
fn capacity_declared_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let out = run(
        &state,
        &[
            "--json",
            "promise",
            "--now",
            T0,
            "add-capacity",
            "--zone",
            "AZ-1",
            "--cores",
            "4",
            "--start",
            T1,
            "--end",
            T2,
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(
        &state,
        &[
            "--json", "promise", "--now", T0, "capacity", "--zone", "AZ-1", "--start", T1,
        ],
    );
    // AZ-1 has 2 free vCPUs plus the 4 declared over [T1, T2).
    assert_eq!(json(&out)["capacity"][0]["available"]["cores"], 6);
    // A reservation of 5 over [T1, T2) holds it; removing 2 cores then needs --force.
    let out = run(
        &state,
        &[
            "promise", "--now", T0, "reserve", "--zone", "AZ-1", "--cores", "5", "--start", T1,
            "--end", T2,
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = run(
        &state,
        &[
            "promise",
            "--now",
            T0,
            "remove-capacity",
            "--zone",
            "AZ-1",
            "--cores",
            "2",
        ],
    );
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains("set force"), "{}", stderr(&out));
    let out = run(
        &state,
        &[
            "--json",
            "promise",
            "--now",
            T0,
            "remove-capacity",
            "--zone",
            "AZ-1",
            "--cores",
            "2",
            "--force",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(json(&out)["events"][0]["event"], "capacityLost");
}

#[test]
fn bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let out = run(
        &state,
        &[
            "promise", "--now", T0, "reserve", "--zone", "AZ-9", "--cores", "1",
        ],
    );
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("AZ-9"), "{}", stderr(&out));
    let out = run(&state, &["promise", "--now", "yesterday", "list"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--now"), "{}", stderr(&out));
    let out = run(&state, &["promise", "--now", T0, "show", "r-404"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("reservation r-404 does not exist"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_grant_draws_from_a_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let out = run(
        &state,
        &[
            "promise",
            "--now",
            T0,
            "reserve",
            "--zone",
            "AZ-3",
            "--cores",
            "4",
            "--ram",
            "8192",
            "--instances",
            "2",
            "--size",
            "100",
            "--start",
            T1,
            "--end",
            T3,
            "--id",
            "rollout",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Capacity-aware selection puts a VNFC in AZ-3, the largest zone of the demo cloud.
    let grant = |now: &str| {
        run(
            &state,
            &[
                "--json",
                "grant",
                "--selection",
                "capacity-aware",
                "--reservation",
                "rollout",
                "--now",
                now,
            ],
        )
    };
    // Before the reservation starts: refused, exit 2.
    let out = grant(T0);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("reservation rollout is initialized"),
        "{}",
        stderr(&out)
    );
    let out = grant(T1);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json(&out);
    let allocations = v["allocations"].as_array().unwrap();
    assert!(!allocations.is_empty());
    let tagged: Vec<&Value> = v["grant"]["addResources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["reservationId"] == "rollout")
        .collect();
    assert!(tagged.len() >= allocations.len());
    for a in allocations {
        assert_eq!(a["reservation"], "rollout");
        assert!(tagged
            .iter()
            .any(|g| g["resourceDefinitionId"] == a["instanceRef"]));
    }
    // The ledger of the state file kept the draw.
    let out = run(
        &state,
        &["--json", "promise", "--now", T1, "show", "rollout"],
    );
    let drawn = json(&out)["reservations"][0]["allocated"]["instances"]
        .as_u64()
        .unwrap();
    assert_eq!(drawn, allocations.len() as u64);
    // Until the reservation has nothing left: then exit 4 and nothing more is drawn.
    let mut last = grant(T1);
    for _ in 0..3 {
        if code(&last) != 0 {
            break;
        }
        last = grant(T1);
    }
    assert_eq!(code(&last), 4, "{}", stderr(&last));
    assert!(stderr(&last).contains("remaining"), "{}", stderr(&last));
    let out = run(
        &state,
        &["--json", "promise", "--now", T1, "show", "rollout"],
    );
    let v = json(&out);
    assert!(
        v["reservations"][0]["allocated"]["instances"]
            .as_u64()
            .unwrap()
            <= 2
    );
}

#[test]
fn the_demo_reserves_and_draws() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("unused.sqlite");
    let out = run(&state, &["--json", "demo"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["ok"], true);
    let steps = v["steps"].as_array().unwrap();
    let reserve = steps[steps.len() - 2]["narrative"].as_str().unwrap();
    assert!(reserve.contains("the counter-offer: 8 cores"), "{reserve}");
    let draw = steps[steps.len() - 1]["narrative"].as_str().unwrap();
    assert!(draw.contains("from reservation rollout"), "{draw}");
    assert!(!state.exists(), "the demo keeps its state in memory");
}
