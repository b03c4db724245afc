//! `vnfm serve` with its state in PostgreSQL (`VNFM_STATE_URL` / `[state] url`, issue 27, one
//! replica): the SOL003 API on the simulated cloud with the rows in the database and no state
//! file, a restart that finds the instances, the CLI's commands on the same database while the
//! server runs (seen by the server), and Alertmanager webhooks saved in the database before
//! their answers.
//!
//! Needs `VNFM_TEST_POSTGRES_URL` (a server to create a database on; `scripts/test.sh` starts
//! one on CI or with `VNFM_TEST_POSTGRES=1`, or `eval "$(scripts/postgres-dev.sh start DIR)"`);
//! without it each test records a skip of the suite `postgres`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod pg_common;
mod serve_common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;

use pg_common::{client, TestDb};
use serde_json::{json, Value};
use serve_common::*;
use vnfm_cli::config::{Config, Secret};

/// The configuration of the in-process servers: `serve_common::config` with the state in
/// the database `url` instead of a file.
fn pg_config(dir: &Path, url: &str, timer_interval: u64) -> Config {
    let mut c = config(dir, timer_interval);
    c.state.path = None;
    c.state.url = Some(Secret::new(url));
    c
}

/// `vnfm ARGS` on the database `url`, `home` as its home (where a default state file would
/// go), nothing else of the caller's environment for vnfm.
fn cli(url: &str, home: &Path, args: &[&str]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, _) in std::env::vars() {
        if k.starts_with("VNFM_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("HOME", home)
        .env("XDG_STATE_HOME", home.join("state"))
        .env("VNFM_STATE_URL", url);
    cmd.output().expect("vnfm runs")
}

fn cli_json(url: &str, home: &Path, args: &[&str]) -> Value {
    let out = cli(url, home, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `vnfm --config CONFIG serve` with `VNFM_STATE_URL=url` and `home` as its home.
fn serve_on(url: &str, config: &Path, home: &Path) -> ServeProcess {
    let mut cmd = serve_command(config, None);
    cmd.env("VNFM_STATE_URL", url)
        .env("HOME", home)
        .env("XDG_STATE_HOME", home.join("state"));
    ServeProcess::start(cmd)
}

/// The whole SOL003 round on the simulated cloud through the `vnfm serve` binary with
/// `VNFM_STATE_URL`: create, instantiate, GET, then a restart that finds the instance and
/// terminates it. The rows are in PostgreSQL, no state file or alert journal is written.
/// (Until issue 27's second step, `vnfm serve` refused a state database with exit 2.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_keeps_its_state_in_postgres_across_a_restart() {
    let Some(db) = TestDb::create("serve_round").await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("vnfm.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[placement]\nreselect_zones = true\n\
         fallback_best_effort = true\n",
    )
    .unwrap();

    let server = serve_on(&db.url, &config, home.path());
    let addr = server.addr;
    let (id, op) = create_and_instantiate(addr, DEMO_VNFD, "default").await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}")).await;
    assert_eq!(inst.status, 200);
    assert_eq!(inst.json()["instantiationState"], "INSTANTIATED");
    assert_eq!(db.count("SELECT count(*) FROM vnf_instances").await, 1);
    assert_eq!(db.count("SELECT count(*) FROM vnf_lcm_op_occs").await, 1);
    assert_eq!(
        db.count("SELECT count(*) FROM documents WHERE name = 'sim'")
            .await,
        1,
        "the simulated cloud is saved in the database"
    );
    let (code, said) = server.stop();
    assert_eq!(code, Some(0), "{said}");

    // A new server on the database: the instance is there, with its servers on the saved
    // simulated cloud, and it terminates.
    let server = serve_on(&db.url, &config, home.path());
    let addr = server.addr;
    let list = get(addr, "/vnflcm/v2/vnf_instances").await.json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["id"], id.as_str());
    let r = post_json(
        addr,
        &format!("/vnflcm/v2/vnf_instances/{id}/terminate"),
        &json!({"terminationType": "FORCEFUL"}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = wait_op(addr, r.header("location").unwrap()).await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}")).await;
    assert_eq!(inst.json()["instantiationState"], "NOT_INSTANTIATED");
    assert_eq!(db.count("SELECT count(*) FROM vnf_lcm_op_occs").await, 2);
    let (code, said) = server.stop();
    assert_eq!(code, Some(0), "{said}");

    // Nothing beside the database: no state file, no alert journal folder.
    assert!(
        !home.path().join("state").exists(),
        "a state file was created beside the database"
    );
    let left: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("vnfm.toml")], "{left:?}");
    db.drop_now().await;
}

/// The CLI's commands on the database while the server runs: an instance the CLI
/// instantiates, a scale it leaves in FAILED_TEMP and then fails (`vnfm op fail`) are seen by
/// the server's next requests (409 for a heal while it is FAILED_TEMP, the heal runs once it
/// is FAILED); the Promise
/// ledger the CLI writes is reloaded by the server (the change detection: the document's
/// stamp on PostgreSQL where SQLite has `data_version`), and the server's reservation is the
/// CLI's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_the_server_share_one_database() {
    let Some(db) = TestDb::create("serve_cli").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let server = start(pg_config(dir.path(), &db.url, 1)).await;
    let addr = server.local_addr();
    assert_eq!(get(addr, "/promise/v1/zones").await.json(), json!([]));

    // An instance the CLI makes.
    let a = cli_json(
        &db.url,
        home,
        &[
            "--json",
            "instantiate",
            "--package",
            "../examples/packages/demo-vnf",
            "--name",
            "from-cli",
        ],
    );
    let id = a["vnfInstance"]["id"].as_str().unwrap().to_owned();
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}")).await;
    assert_eq!(inst.status, 200, "{}", String::from_utf8_lossy(&inst.body));
    assert_eq!(inst.json()["vnfInstanceName"], "from-cli");
    // A scale-out the CLI leaves in FAILED_TEMP (no best effort: the only zone left is
    // full) holds the instance for the server too, until `vnfm op fail` ends it.
    let out = cli(
        &db.url,
        home,
        &[
            "--json",
            "scale",
            "--instance",
            &id,
            "--aspect",
            "VDU1_scale",
            "--type",
            "out",
        ],
    );
    let failed: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("scale: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        failed["vnfLcmOpOcc"]["operationState"], "FAILED_TEMP",
        "{failed}"
    );
    let stuck = failed["vnfLcmOpOcc"]["id"].as_str().unwrap().to_owned();
    let heal = format!("/vnflcm/v2/vnf_instances/{id}/heal");
    let r = post_json(addr, &heal, &json!({})).await;
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    let op = get(addr, &format!("/vnflcm/v2/vnf_lcm_op_occs/{stuck}")).await;
    assert_eq!(op.json()["operationState"], "FAILED_TEMP");
    let v = cli_json(&db.url, home, &["--json", "op", "fail", &stuck]);
    assert_eq!(v["vnfLcmOpOcc"]["operationState"], "FAILED");
    let op = get(addr, &format!("/vnflcm/v2/vnf_lcm_op_occs/{stuck}")).await;
    assert_eq!(
        op.json()["operationState"],
        "FAILED",
        "the server reads the CLI's fail"
    );
    // The instance takes an operation again, and the heal completes: on PostgreSQL the CLI's
    // commands and the server share one simulated cloud (the CLI's stack is the server's).
    let location = eventually(
        20,
        "a heal accepted once the CLI failed the scale",
        || async {
            let r = post_json(addr, &heal, &json!({})).await;
            (r.status == 202).then(|| r.header("location").unwrap().to_owned())
        },
    )
    .await;
    let healed = wait_op(addr, &location).await;
    assert_eq!(healed["operationState"], "COMPLETED", "{healed}");

    // The Promise ledger: the CLI registers the cloud and reserves while the server runs.
    let expiry = (chrono::Utc::now() + chrono::Duration::hours(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    cli_json(&db.url, home, &["--json", "provider", "add"]);
    let v = cli_json(
        &db.url,
        home,
        &[
            "--json",
            "reservation",
            "create",
            "--zone",
            "AZ-2",
            "--cores",
            "3",
            "--expiry",
            &expiry,
            "--id",
            "from-cli",
        ],
    );
    assert_eq!(v["reservationId"], "from-cli");
    assert_eq!(
        get(addr, "/promise/v1/zones").await.json(),
        json!(["AZ-1", "AZ-2", "AZ-3", "AZ-4"]),
        "the server reloaded the ledger the CLI wrote"
    );
    let r = get(addr, "/promise/v1/reservations/from-cli").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["capacity"]["cores"], 3);

    // The other way round, and a cancel on the CLI shows on the server.
    let r = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"id": "from-server", "zone": "AZ-3", "capacity": {"cores": 2},
                "expiry": expiry}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let v = cli_json(
        &db.url,
        home,
        &["--json", "reservation", "show", "from-server"],
    );
    assert_eq!(v["reservation"]["zone"], "AZ-3");
    cli_json(
        &db.url,
        home,
        &["--json", "reservation", "cancel", "from-server"],
    );
    let r = get(addr, "/promise/v1/reservations/from-server").await;
    assert_eq!(r.json()["status"], "cancelled");
    server.shutdown().await.unwrap();
    assert!(!dir.path().join("state.sqlite").exists());
    db.drop_now().await;
}

/// Alertmanager webhooks on PostgreSQL: accepted heal alerts sent together are all in the
/// database before their answers (there is no journal folder: a snapshot of the alert state,
/// shared by the requests waiting together), and after a restart their window runs its heal,
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_alerts_are_saved_in_postgres_and_heal_after_a_restart() {
    const N: usize = 12;
    let Some(db) = TestDb::create("serve_alerts").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = start(pg_config(dir.path(), &db.url, 3600)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let vnfc = servers(addr, &id).await.into_keys().next().unwrap();
    let posts: Vec<_> = (0..N)
        .map(|i| {
            let body = webhook(&[heal_alert(&id, &vnfc, &format!("fp-{i}"), "firing", false)]);
            tokio::spawn(async move {
                post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body)
                    .await
                    .status
            })
        })
        .collect();
    for p in posts {
        assert_eq!(p.await.unwrap(), 204);
    }
    // Read from the database while the server runs, as a crash would leave it.
    let store = vnfm_cli::store_postgres::PgStore::open(&db.url)
        .await
        .unwrap();
    let plugin = config(dir.path(), 3600).prometheus_plugin.plugin;
    let saved = saved_now(&store, &plugin).await;
    let window = saved
        .heal
        .pending
        .iter()
        .find(|p| p.instance.as_str() == id)
        .unwrap_or_else(|| panic!("no saved window for {id}: {saved:?}"));
    let mut fps: Vec<_> = window
        .alerts
        .iter()
        .map(|a| a.fingerprint.clone())
        .collect();
    fps.sort();
    let mut want: Vec<_> = (0..N).map(|i| format!("fp-{i}")).collect();
    want.sort();
    assert_eq!(fps, want);
    server.shutdown().await.unwrap();
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "nothing is written beside the database (no state file, no alert journal)"
    );

    // The window closes while no server runs (its due time moved to its opening in the
    // database); the next start heals, once.
    let mut closed = saved_now(&store, &plugin).await;
    for p in &mut closed.heal.pending {
        p.due = p.opened_at;
    }
    store
        .write_documents(
            vec![
                (
                    vnfm_cli::serve::ALERT_DOCUMENT.to_owned(),
                    serde_json::to_string(&closed).unwrap(),
                ),
                (
                    vnfm_cli::serve::ALERT_GENERATION_DOCUMENT.to_owned(),
                    "0".to_owned(),
                ),
            ],
            None,
            vnfm_cli::store::Flush::Commit,
        )
        .await
        .unwrap();
    let server = start(pg_config(dir.path(), &db.url, 3600)).await;
    let addr = server.local_addr();
    let heals = eventually(30, "the saved window's heal", || async {
        let heals = ops(addr, &id, "HEAL").await;
        (heals.len() == 1 && heals[0]["operationState"] == "COMPLETED").then_some(heals)
    })
    .await;
    assert_eq!(heals.len(), 1);
    let m = settled(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_lcm_operations_total{operation=\"HEAL\",state=\"STARTING\"}"
        ),
        1,
        "{m}"
    );
    server.shutdown().await.unwrap();
    assert_eq!(
        db.count("SELECT count(*) FROM vnf_lcm_op_occs WHERE body LIKE '%\"HEAL\"%'")
            .await,
        1
    );
    db.drop_now().await;
}

/// The alert state saved in the database now (as a crash would leave it).
async fn saved_now(
    store: &vnfm_cli::store_postgres::PgStore,
    plugin: &vnfm_core::alert::PrometheusPluginConfig,
) -> vnfm_core::alert::AlertState {
    vnfm_cli::serve::load_alert_handler(store, plugin)
        .await
        .unwrap()
        .snapshot()
}

/// Two replicas on one database share the heal windows (issue 27): alerts for the VNFCs of one
/// instance, spread over both replicas, open one window between them, and it heals once, with
/// every VNFC alerted, whichever replica received which alert. (With a window in each
/// replica's memory, each replica ran a heal of its own.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_heal_one_window_between_them() {
    let Some(db) = TestDb::create("replica_heal").await else {
        return;
    };
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let a = start(pg_config(dir_a.path(), &db.url, 2)).await;
    let id = instantiated(a.local_addr()).await;
    // Started after the instantiate: its instance cache has the instance.
    let b = start(pg_config(dir_b.path(), &db.url, 2)).await;
    let replicas = [a.local_addr(), b.local_addr()];
    let vnfcs: Vec<String> = servers(replicas[0], &id).await.into_keys().collect();
    assert!(
        vnfcs.len() >= 2,
        "the demo instance has two VNFCs: {vnfcs:?}"
    );
    let posts: Vec<_> = (0..8)
        .map(|i| {
            // Replica A gets the alerts of the first VNFC, B those of the second.
            let vnfc = &vnfcs[i % 2];
            let body = webhook(&[heal_alert(&id, vnfc, &format!("fp-{i}"), "firing", false)]);
            let to = replicas[i % 2];
            tokio::spawn(async move {
                post_alert(to, "auto_healing", Some(BASIC_HEADER), &body)
                    .await
                    .status
            })
        })
        .collect();
    for p in posts {
        assert_eq!(p.await.unwrap(), 204);
    }
    one_heal_of_both(&replicas, &id, &vnfcs[..2], 5).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    db.drop_now().await;
}

/// Waits for the heal of `id`'s window to complete (asked of the second replica), then `wait`
/// seconds more (a second window, had a replica kept one of its own, would have run by then),
/// and checks that every replica sees that one heal only, of exactly `vnfcs`, whichever replica
/// got their alerts.
async fn one_heal_of_both(replicas: &[SocketAddr], id: &str, vnfcs: &[String], wait: u64) {
    let heal = eventually(30, "the window's heal", || async {
        let heals = ops(replicas[1], id, "HEAL").await;
        heals
            .iter()
            .find(|h| h["operationState"] == "COMPLETED")
            .cloned()
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    for r in replicas {
        let heals = ops(*r, id, "HEAL").await;
        assert_eq!(heals.len(), 1, "one heal between the replicas: {heals:?}");
    }
    let mut healed: Vec<String> = heal["operationParams"]["vnfcInstanceId"]
        .as_array()
        .unwrap_or_else(|| panic!("a heal of VNFCs: {heal}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    healed.sort();
    let mut want = vnfcs.to_vec();
    want.sort();
    assert_eq!(
        healed, want,
        "every alerted VNFC, from both replicas, in the one heal"
    );
}

/// The last stamp drawn for a document write: every insert or update of a document, by any
/// process, draws one or two from the sequence `documents_stamp` (an upsert that updates draws
/// its insert's default and the update trigger's), so the difference of two readings bounds
/// the writes between them from above, and twice them from below.
async fn document_writes(db: &TestDb) -> i64 {
    client(&db.url)
        .await
        .query_one("SELECT last_value FROM documents_stamp", &[])
        .await
        .unwrap()
        .get(0)
}

/// A webhook of duplicates only writes nothing before its answer (issue 27): a storm of
/// repeats of an accepted alert costs no write of the shared alert state each (the dispatcher
/// saves when they were last seen at most once a second). Before, each wrote the whole state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_alerts_write_nothing_before_their_answer() {
    const REPEATS: i64 = 40;
    let Some(db) = TestDb::create("dup_no_write").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = start(pg_config(dir.path(), &db.url, 3600)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let vnfc = servers(addr, &id).await.into_keys().next().unwrap();
    let body = webhook(&[heal_alert(&id, &vnfc, "fp-dup", "firing", false)]);
    assert_eq!(
        post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body)
            .await
            .status,
        204
    );
    let before = document_writes(&db).await;
    let started = std::time::Instant::now();
    for _ in 0..REPEATS {
        assert_eq!(
            post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body)
                .await
                .status,
            204
        );
    }
    let writes = document_writes(&db).await - before;
    // At most one save a second by the dispatcher, and one more at each end (two stamps each).
    let bound = 2 * (i64::try_from(started.elapsed().as_secs()).unwrap() + 2);
    assert!(
        writes <= bound.min(REPEATS - 1),
        "{writes} document writes for {REPEATS} duplicate webhooks in {:?}",
        started.elapsed()
    );
    // (The window stays open: `settled` would wait for it.)
    let m = metrics(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_healing\",reason=\"duplicate\"}"
        ),
        REPEATS as u64,
        "{m}"
    );
    server.shutdown().await.unwrap();
    db.drop_now().await;
}

/// Webhooks that reach replicas at the same time are judged a group at a time (issue 27): all
/// accepted and saved before their answers, in fewer writes of the shared alert state than
/// webhooks, and their one window heals once, with every VNFC alerted through either replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_webhooks_are_written_together_and_heal_once() {
    const PER_REPLICA: usize = 24;
    let Some(db) = TestDb::create("grouped").await else {
        return;
    };
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let a = start(pg_config(dir_a.path(), &db.url, 4)).await;
    let id = instantiated(a.local_addr()).await;
    let b = start(pg_config(dir_b.path(), &db.url, 4)).await;
    let replicas = [a.local_addr(), b.local_addr()];
    let vnfcs: Vec<String> = servers(replicas[0], &id).await.into_keys().collect();
    let before = document_writes(&db).await;
    let posts: Vec<_> = (0..2 * PER_REPLICA)
        .map(|i| {
            let body = webhook(&[heal_alert(
                &id,
                &vnfcs[i % 2],
                &format!("fp-{i}"),
                "firing",
                false,
            )]);
            let to = replicas[i % 2];
            tokio::spawn(async move {
                post_alert(to, "auto_healing", Some(BASIC_HEADER), &body)
                    .await
                    .status
            })
        })
        .collect();
    for p in posts {
        assert_eq!(p.await.unwrap(), 204);
    }
    // Two stamps a write: one write per webhook draws twice as many.
    let writes = document_writes(&db).await - before;
    assert!(
        writes < 2 * PER_REPLICA as i64,
        "{writes} document writes for {} webhooks: not grouped",
        2 * PER_REPLICA
    );
    let store = vnfm_cli::store_postgres::PgStore::open(&db.url)
        .await
        .unwrap();
    let plugin = config(dir_a.path(), 4).prometheus_plugin.plugin;
    let saved = saved_now(&store, &plugin).await;
    let window = saved
        .heal
        .pending
        .iter()
        .find(|p| p.instance.as_str() == id)
        .unwrap_or_else(|| panic!("no saved window for {id}: {saved:?}"));
    assert_eq!(window.alerts.len(), 2 * PER_REPLICA, "{window:?}");
    one_heal_of_both(&replicas, &id, &vnfcs[..2], 9).await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    db.drop_now().await;
}

/// Two replicas on one database see one simulated cloud (issue 27), as they would one
/// OpenStack: of two instances instantiated through one replica, one is terminated through the
/// other replica and then the other through the first, and the cloud is empty again. (With a
/// copy of the cloud in each replica's memory, the second replica found no stack to delete and
/// the first wrote back the first instance's servers.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_one_simulated_cloud() {
    let Some(db) = TestDb::create("replica_sim").await else {
        return;
    };
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let a = start(pg_config(dir_a.path(), &db.url, 3600)).await;
    let b = start(pg_config(dir_b.path(), &db.url, 3600)).await;
    let (a_addr, b_addr) = (a.local_addr(), b.local_addr());
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (id, op) = create_and_instantiate(a_addr, DEMO_VNFD, "default").await;
        assert_eq!(op["operationState"], "COMPLETED", "{op}");
        ids.push(id);
    }
    for (id, to) in ids.iter().zip([b_addr, a_addr]) {
        let r = post_json(
            to,
            &format!("/vnflcm/v2/vnf_instances/{id}/terminate"),
            &json!({"terminationType": "FORCEFUL"}),
        )
        .await;
        assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
        let op = wait_op(to, r.header("location").unwrap()).await;
        assert_eq!(op["operationState"], "COMPLETED", "{op}");
    }
    let store = vnfm_cli::store_postgres::PgStore::open(&db.url)
        .await
        .unwrap();
    let sim: Value = serde_json::from_str(&store.document("sim").await.unwrap().unwrap()).unwrap();
    assert_eq!(
        sim["servers"].as_object().unwrap().len(),
        0,
        "no server left in the one cloud: {}",
        sim["servers"]
    );
    assert_eq!(
        sim["stacks"].as_object().unwrap().len(),
        0,
        "{}",
        sim["stacks"]
    );
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    db.drop_now().await;
}
