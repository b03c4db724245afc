//! Inputs that used to be taken silently or fail late (issue 14 row 12): each is now a usage
//! error (exit 2) that names what was wrong, where, and what was expected.

// Test helpers: failing means panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

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

const T0: &str = "2030-01-01T00:00:00Z";

fn run(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    cmd.output().expect("vnfm runs")
}

/// Asserts exit 2 and that stderr contains every one of `want`.
fn refused(o: &Output, want: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for w in want {
        assert!(err.contains(w), "{w:?} not in: {err}");
    }
}

#[test]
fn a_zone_pin_must_name_a_new_vnfc_and_a_known_zone() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let state = state.to_str().unwrap();
    for (pin, want) in [
        (
            "VDU1-99=AZ-1",
            "--zone VDU1-99=AZ-1 names VNFC VDU1-99, which this operation does not create; it \
             creates VDU1-0, VDU1-1, VDU2-0",
        ),
        (
            "VDU1-00=AZ-1",
            "--zone VDU1-00=AZ-1 names VNFC VDU1-00, which this operation does not create",
        ),
        (
            "VDU1-0=AZ-9",
            "--zone VDU1-0=AZ-9: zone AZ-9 is not in the zone catalogue; its zones are AZ-1, \
             AZ-2, AZ-3, AZ-4",
        ),
        (
            "VDU2=AZ-l",
            "--zone VDU2=AZ-l: zone AZ-l is not in the zone catalogue",
        ),
    ] {
        let o = run(&[
            "--state",
            state,
            "instantiate",
            "--zone",
            pin,
            "--reselect-zones",
        ]);
        refused(&o, &[want]);
        // Refused before it started: no occurrence, and the instance it created is gone.
        let o = run(&["--state", state, "--json", "instance", "list"]);
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["vnfInstances"], serde_json::json!([]), "{pin}");
        let o = run(&["--state", state, "--json", "op", "list"]);
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["vnfLcmOpOccs"], serde_json::json!([]), "{pin}");
    }
    // The canonical spelling of a VNFC that exists, and a VDU, are taken.
    let o = run(&[
        "--state",
        state,
        "instantiate",
        "--zone",
        "VDU1-1=AZ-2",
        "--zone",
        "VDU2=AZ-4",
        "--reselect-zones",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn capacity_increase_refuses_an_unknown_zone_without_new_zone() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let state = state.to_str().unwrap();
    let o = run(&["--state", state, "provider", "add", "--now", T0]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(&[
        "--state", state, "capacity", "increase", "--now", T0, "--zone", "AZ-l", "--cores", "4",
    ]);
    refused(
        &o,
        &[
            "capacity increase --zone \"AZ-l\": the ledger has no zone \"AZ-l\"; its zones are \
             AZ-1, AZ-2, AZ-3, AZ-4",
            "--new-zone",
        ],
    );
    let o = run(&["--state", state, "--json", "provider", "list", "--now", T0]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("AZ-l"));
    let o = run(&[
        "--state",
        state,
        "capacity",
        "increase",
        "--now",
        T0,
        "--zone",
        "AZ-l",
        "--new-zone",
        "--cores",
        "4",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_declared_provider_needs_a_name_and_a_zone() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let state = state.to_str().unwrap();
    for (name, zone, want) in [
        ("", "EDGE-1", "provider add --declared --name \"\": empty"),
        (" ", "EDGE-1", "provider add --declared --name \" \": empty"),
        ("edge", "", "provider add --declared --zone \"\": empty"),
    ] {
        let o = run(&[
            "--state",
            state,
            "provider",
            "add",
            "--now",
            T0,
            "--declared",
            "--name",
            name,
            "--zone",
            zone,
            "--cores",
            "2",
        ]);
        refused(&o, &[want]);
    }
}

#[test]
fn config_values_that_make_the_server_unusable_are_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vnfm.toml");
    let shown = file.display().to_string();
    for (text, want) in [
        (
            "[server]\nbody_limit = 0\n",
            "[server] body_limit = 0: expected at least 1 byte",
        ),
        (
            "[server]\napi_token = \"\"\n",
            "[server] api_token is empty: expected a non-empty value",
        ),
        (
            "[prometheus_plugin]\nbearer_token = \"\"\n",
            "[prometheus_plugin] bearer_token is empty",
        ),
        (
            "[prometheus_plugin]\nbasic_auth_user = \"\"\nbasic_auth_password = \"pw\"\n",
            "[prometheus_plugin] basic_auth_user is empty",
        ),
        (
            "[packages]\ndir = \"no/such/folder\"\n",
            "[packages] dir = \"no/such/folder\": cannot be read",
        ),
        (
            "[packages]\ndir = \"Cargo.toml\"\n",
            "[packages] dir = \"Cargo.toml\": not a folder; expected a folder of VNF packages",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let o = run(&["--config", &shown, "config", "show"]);
        refused(&o, &[&format!("configuration {shown}: "), want]);
    }
    // The same from flags and environment.
    let o = run(&["--packages-dir", "no/such/folder", "config", "show"]);
    refused(
        &o,
        &["--packages-dir / VNFM_PACKAGES_DIR \"no/such/folder\": cannot be read"],
    );
    let state = dir.path().join("state.sqlite");
    let state = state.to_str().unwrap();
    let o = run(&[
        "--state",
        state,
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--api-token",
        "",
    ]);
    refused(
        &o,
        &["--api-token / VNFM_API_TOKEN / [server] api_token) is empty"],
    );
    let o = run(&[
        "--state",
        state,
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--alert-bearer-token",
        "",
    ]);
    refused(&o, &["--alert-bearer-token / VNFM_ALERT_BEARER_TOKEN / [prometheus_plugin] bearer_token is empty"]);
}
