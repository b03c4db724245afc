//! The CLI's commands with their state in PostgreSQL (`VNFM_STATE_URL` / `[state] url`),
//! through the `vnfm` binary: instances, occurrences and the simulated cloud live in the
//! database (no state file is written), another process sees them, and a database that
//! cannot be used is an error naming it without its password.
//!
//! The PostgreSQL part needs `VNFM_TEST_POSTGRES_URL` (a server to create a database on;
//! `scripts/test.sh` starts one on CI or with `VNFM_TEST_POSTGRES=1`); without it, it records a
//! skip of the suite `postgres`. The errors need no server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod pg_common;

use std::path::Path;
use std::process::{Command, Output};

use pg_common::{admin_url, client, with_database};
use serde_json::Value;

const VNFM_ENV: &[&str] = &[
    "VNFM_CONFIG",
    "VNFM_STATE",
    "VNFM_STATE_URL",
    "VNFM_VIM",
    "VNFM_SIM_SEED",
    "VNFM_ID_SALT",
    "VNFM_PACKAGES_DIR",
    "VNFM_CLOUD",
];

/// `vnfm ARGS` with the state in `url` (when given), `home` as its home (where a default
/// state file would go), and nothing else of the caller's environment for vnfm.
fn vnfm(url: Option<&str>, home: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    cmd.env("HOME", home)
        .env("XDG_STATE_HOME", home.join("state"));
    if let Some(url) = url {
        cmd.env("VNFM_STATE_URL", url);
    }
    cmd.output().expect("vnfm runs")
}

fn json(out: &Output, what: &str) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn cli_commands_keep_their_state_in_postgres() {
    let Some(admin) = admin_url("CLI commands on PostgreSQL") else {
        return;
    };
    let name = format!("t_{}_cli_state", std::process::id());
    let admin_client = client(&admin).await;
    admin_client
        .batch_execute(&format!("CREATE DATABASE \"{name}\" TEMPLATE template0"))
        .await
        .unwrap();
    let url = with_database(&admin, &name);
    let home = tempfile::tempdir().unwrap();
    let pg = Some(url.as_str());

    let a = json(
        &vnfm(
            pg,
            home.path(),
            &[
                "--json",
                "instantiate",
                "--package",
                "../examples/packages/demo-vnf",
                "--name",
                "on-postgres",
            ],
        ),
        "instantiate",
    );
    assert_eq!(a["vnfLcmOpOcc"]["operationState"], "COMPLETED", "{a}");
    let id = a["vnfInstance"]["id"].as_str().unwrap().to_owned();

    // another process reads it from the database
    let shown = json(
        &vnfm(pg, home.path(), &["--json", "instance", "show", &id]),
        "instance show",
    );
    assert_eq!(
        shown["vnfInstance"]["vnfInstanceName"], "on-postgres",
        "{shown}"
    );
    assert_eq!(shown["vnfcs"], a["vnfcs"], "{shown}");

    // the rows and the simulated cloud are in the database, and no state file was written
    let db = client(&url).await;
    let count = |sql: &'static str| {
        let db = &db;
        async move { db.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(count("SELECT count(*) FROM vnf_instances").await, 1);
    assert_eq!(count("SELECT count(*) FROM vnf_lcm_op_occs").await, 1);
    assert_eq!(
        count("SELECT count(*) FROM documents WHERE name = 'sim'").await,
        1
    );
    assert!(
        !home.path().join("state").exists(),
        "a state file was created beside the database"
    );

    // the next process terminates the servers the first one made (the saved simulated cloud)
    let t = json(
        &vnfm(
            pg,
            home.path(),
            &["--json", "terminate", "--instance", &id, "--delete"],
        ),
        "terminate",
    );
    assert_eq!(t["vnfLcmOpOcc"]["operationState"], "COMPLETED", "{t}");
    // `--delete`: the instance and its occurrences are gone from the database
    assert_eq!(count("SELECT count(*) FROM vnf_instances").await, 0);
    assert_eq!(count("SELECT count(*) FROM vnf_lcm_op_occs").await, 0);

    drop(db);
    admin_client
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .await
        .unwrap();
}

#[test]
fn a_state_database_that_cannot_be_used_is_named_without_its_password() {
    let home = tempfile::tempdir().unwrap();
    // nothing listens on port 1
    let url = "postgres://vnfm:s3cr3t@127.0.0.1:1/vnfm";
    let o = vnfm(Some(url), home.path(), &["instance", "list"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(
        err.contains(
            "state database postgres://vnfm:***@127.0.0.1:1/vnfm: cannot open the state database"
        ),
        "{err}"
    );
    assert!(!err.contains("s3cr3t"), "{err}");

    // not a PostgreSQL URL: the caller's to fix
    let o = vnfm(
        Some("mysql://vnfm:s3cr3t@db/vnfm"),
        home.path(),
        &["instance", "list"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not a PostgreSQL URL"), "{err}");
    assert!(!err.contains("s3cr3t"), "{err}");

    // a file and a database at once: refused, naming both
    let state = home.path().join("s.sqlite");
    let o = vnfm(
        Some(url),
        home.path(),
        &["--state", state.to_str().unwrap(), "instance", "list"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("both a state file"), "{err}");
    assert!(err.contains("VNFM_STATE_URL"), "{err}");
    assert!(!state.exists());

    // vnfm serve opens the database as the commands do (its runs on PostgreSQL are
    // `serve_postgres.rs`): one it cannot reach stops it at start, named, exit 5
    let o = vnfm(
        Some(url),
        home.path(),
        &["serve", "--listen", "127.0.0.1:0"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(
        err.contains(
            "state database postgres://vnfm:***@127.0.0.1:1/vnfm: cannot open the state database"
        ),
        "{err}"
    );
    assert!(!err.contains("s3cr3t"), "{err}");
    assert!(!home.path().join("state").exists(), "no state file instead");

    // the effective configuration never shows the URL
    let o = vnfm(Some(url), home.path(), &["config", "show"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(out.contains("url = \"<redacted>\""), "{out}");
    assert!(!out.contains("s3cr3t"), "{out}");
}

/// TLS parameters of the URL that cannot be used stop the command before any connection,
/// named, exit 2 (docs/configuration.md, `[state]`).
#[test]
fn tls_parameters_that_cannot_be_used_are_named() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("no-ca.pem");
    for (query, expected) in [
        (
            "sslmode=require".to_owned(),
            "sslmode=require needs sslrootcert=PATH".to_owned(),
        ),
        (
            format!("sslmode=verify-full&sslrootcert={}", missing.display()),
            format!("sslrootcert {}: cannot be read", missing.display()),
        ),
        (
            "sslmode=verify_full".to_owned(),
            "sslmode=verify_full: unknown; expected disable, allow, prefer, require, verify-ca \
             or verify-full"
                .to_owned(),
        ),
    ] {
        let url = format!("postgres://vnfm:s3cr3t@127.0.0.1:1/vnfm?{query}");
        let o = vnfm(Some(&url), home.path(), &["instance", "list"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{query}: {err}");
        assert!(err.contains(&expected), "{query}: {err}");
        assert!(!err.contains("s3cr3t"), "{err}");
    }
}
