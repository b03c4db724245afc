//! A row of the state file that does not have the shape of its table (issue 14 row 13): the
//! commands that read it exit 2 naming the table, the row and the field, and `vnfm serve`
//! refuses to start with the same message.

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
    "VNFM_AUTO_HEALING",
    "VNFM_AUTO_SCALING",
];

fn run(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    cmd.output().expect("vnfm runs")
}

#[test]
fn a_row_of_the_wrong_shape_is_a_usage_error_naming_row_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let state = state.to_str().unwrap();
    let o = run(&[
        "--state",
        state,
        "--json",
        "instantiate",
        "--reselect-zones",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = doc["vnfInstance"]["id"].as_str().unwrap().to_owned();

    // Another program wrote a row whose vnfdId is a number.
    let conn = rusqlite::Connection::open(state).unwrap();
    let changed = conn
        .execute(
            "UPDATE vnf_instances SET body = json_set(body, '$.vnfdId', 42) WHERE id = ?1",
            [&id],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);

    let want = format!("table vnf_instances, row id {id:?}: field vnfdId:");
    for args in [
        vec!["--state", state, "instance", "list"],
        vec!["--state", state, "instance", "show", &id],
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&want), "{args:?}: {err}");
        assert!(
            err.contains("invalid type: integer `42`"),
            "{args:?}: {err}"
        );
    }

    // `vnfm serve` refuses to start, naming the same row.
    let o = run(&["--state", state, "serve", "--listen", "127.0.0.1:0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot read the VNF instances") && err.contains(&want),
        "{err}"
    );
}
