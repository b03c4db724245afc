//! `vnfm serve` under an alert storm, and across a restart in the middle of a heal window.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serve_common::*;
use vnfm_cli::config::AlertFsync;

const INSTANCES: usize = 100;
const ALERTS: usize = 10_000;
const PER_REQUEST: usize = 5;
const CONCURRENCY: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_alerts_for_a_hundred_instances_give_one_heal_each() {
    let dir = tempfile::tempdir().unwrap();
    // A cloud with room for 100 demo VNFs (and their heals), in four zones of two hosts. A
    // heal replaces a server the way Heat's convergence engine does, the original kept until
    // its replacement is up: VDU1's host anti-affinity group then needs a second host in the
    // zone (with one host per zone half the heals ran out of zones and ended FAILED_TEMP).
    let cloud = dir.path().join("big.yaml");
    let zones: String = (1..=4)
        .map(|z| {
            format!(
                "  AZ-{z}:\n    hosts:\n      host-{z}a: {{vcpus: 2048, memory_mb: 4194304, disk_gb: 40960}}\n      \
                 host-{z}b: {{vcpus: 2048, memory_mb: 4194304, disk_gb: 40960}}\n"
            )
        })
        .collect();
    std::fs::write(
        &cloud,
        format!(
            "zones:\n{zones}flavors:\n  m1.tiny: {{vcpus: 1, memory_mb: 512, disk_gb: 1}}\n  \
             m1.small: {{vcpus: 1, memory_mb: 2048, disk_gb: 20}}\n  \
             m1.medium: {{vcpus: 2, memory_mb: 4096, disk_gb: 40}}\n  \
             m1.large: {{vcpus: 4, memory_mb: 8192, disk_gb: 80}}\n\
             images: [cirros, demo-frontend-image, demo-backend-image]\n"
        ),
    )
    .unwrap();
    let mut c = config(dir.path(), 2);
    // 300 occurrences (instantiate, modify, heal per instance) on one page of the list
    c.server.page_size = 1000;
    c.vim.cloud = Some(cloud);
    let server = start(c).await;
    let addr = server.local_addr();
    let mut vnfcs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let setup = Instant::now();
    for _ in 0..INSTANCES {
        let id = instantiated(addr).await;
        let names: Vec<String> = servers(addr, &id).await.into_keys().take(3).collect();
        vnfcs.insert(id, names);
    }
    eprintln!(
        "{INSTANCES} instances instantiated in {:?}",
        setup.elapsed()
    );
    // Alert i: instance i % 100, one of its 3 VNFCs; every (instance, VNFC) alert is sent
    // ~33 times (Alertmanager's re-sends, duplicated groups).
    let ids: Vec<String> = vnfcs.keys().cloned().collect();
    let alerts: Vec<serde_json::Value> = (0..ALERTS)
        .map(|i| {
            let id = &ids[i % INSTANCES];
            let v = &vnfcs[id][(i / INSTANCES) % 3];
            heal_alert(id, v, &format!("{id}-{v}"), "firing", i % 2 == 0)
        })
        .collect();
    let bodies: Vec<Vec<u8>> = alerts.chunks(PER_REQUEST).map(webhook).collect();

    let storming = Arc::new(AtomicBool::new(true));
    let prober = {
        let storming = storming.clone();
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            while storming.load(Ordering::SeqCst) {
                let t = Instant::now();
                let r = get(addr, "/metrics").await;
                assert_eq!(r.status, 200);
                latencies.push(t.elapsed());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            latencies
        })
    };
    let started = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    for body in bodies {
        let permit = sem.clone().acquire_owned().await.unwrap();
        tasks.spawn(async move {
            let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
            drop(permit);
            r.status
        });
    }
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    while let Some(s) = tasks.join_next().await {
        *statuses.entry(s.unwrap()).or_default() += 1;
    }
    let storm = started.elapsed();
    storming.store(false, Ordering::SeqCst);
    let mut latencies = prober.await.unwrap();
    assert_eq!(statuses, BTreeMap::from([(204, ALERTS / PER_REQUEST)]));
    assert!(
        !latencies.is_empty(),
        "no /metrics probe ran during the storm"
    );
    latencies.sort();
    eprintln!(
        "storm: {ALERTS} alerts in {} requests in {storm:?}; {} /metrics probes answered, \
         latency p50 {:?} max {:?}",
        ALERTS / PER_REQUEST,
        latencies.len(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );

    let waited = Instant::now();
    eventually(120, "one heal per instance", || async {
        let all = get(addr, "/vnflcm/v2/vnf_lcm_op_occs").await.json();
        let heals: Vec<&serde_json::Value> = all
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["operation"] == "HEAL")
            .collect();
        // a heal that ended otherwise never completes: say so instead of timing out
        if let Some(o) = heals
            .iter()
            .find(|o| o["operationState"] == "FAILED_TEMP" || o["operationState"] == "FAILED")
        {
            panic!("a heal did not complete: {o}");
        }
        let done = heals
            .iter()
            .filter(|o| o["operationState"] == "COMPLETED")
            .count();
        (done == INSTANCES).then_some(())
    })
    .await;
    eprintln!(
        "heals: {INSTANCES} completed {:?} after the storm",
        waited.elapsed()
    );
    // Settled: no window left, no instance busy: no other heal runs or is about to start.
    settled(addr).await;
    for id in &ids {
        let heals = ops(addr, id, "HEAL").await;
        assert_eq!(heals.len(), 1, "{id}: {heals:?}");
        let mut healed: Vec<String> = heals[0]["operationParams"]["vnfcInstanceId"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        healed.sort();
        let mut want = vnfcs[id].clone();
        want.sort();
        assert_eq!(healed, want, "{id}");
    }
    let m = metrics(addr).await;
    let received = metric(&m, "vnfm_alerts_received_total{endpoint=\"auto_healing\"}");
    let accepted = metric(&m, "vnfm_alerts_accepted_total{endpoint=\"auto_healing\"}");
    let ignored: u64 = m
        .lines()
        .filter(|l| l.starts_with("vnfm_alerts_ignored_total{endpoint=\"auto_healing\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(received, ALERTS as u64, "{m}");
    assert_eq!(accepted, (INSTANCES * 3) as u64, "{m}");
    assert_eq!(
        accepted + ignored,
        received,
        "every alert accounted for:\n{m}"
    );
    assert_eq!(
        metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_healing\",reason=\"duplicate\"}"
        ),
        (ALERTS - INSTANCES * 3) as u64
    );
    // Memory: one remembered occurrence per distinct alert, nothing per duplicate.
    assert_eq!(metric(&m, "vnfm_alerts_remembered"), (INSTANCES * 3) as u64);
    assert_eq!(metric(&m, "vnfm_heal_windows_pending"), 0);
    server.shutdown().await.unwrap();
}

/// Moves the close of every heal window saved in the state file of `dir` to its opening: the
/// window's time passes while no server runs (virtual time: the test never waits for a
/// window, nor depends on how fast the machine restarts a server).
async fn close_saved_windows(dir: &std::path::Path) {
    use vnfm_cli::serve::{ALERT_DOCUMENT, ALERT_GENERATION_DOCUMENT, ALERT_JOURNAL_PREFIX};
    let store = vnfm_cli::store::SqliteStore::open(dir.join("state.sqlite")).unwrap();
    // A stopped server folded its journal into the snapshot.
    assert!(store
        .documents_with_prefix(ALERT_JOURNAL_PREFIX)
        .await
        .unwrap()
        .is_empty());
    let mut state = saved_alert_state(dir).await;
    assert!(!state.heal.pending.is_empty(), "no window to close");
    for p in &mut state.heal.pending {
        p.due = p.opened_at;
    }
    store
        .write_documents(
            vec![
                (
                    ALERT_DOCUMENT.to_owned(),
                    serde_json::to_string(&state).unwrap(),
                ),
                (ALERT_GENERATION_DOCUMENT.to_owned(), "0".to_owned()),
            ],
            None,
            vnfm_cli::store::Flush::Commit,
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_in_the_middle_of_a_heal_window_still_heals_once() {
    // Windows of an hour: the window stays open across the first restart, however slow the
    // machine; `close_saved_windows` closes it between the second and the third start.
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 3600)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let vnfc = servers(addr, &id).await.into_keys().next().unwrap();
    let body = webhook(&[heal_alert(&id, &vnfc, "fp-restart", "firing", false)]);
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
    assert_eq!(r.status, 204);
    server.shutdown().await.unwrap();

    let server = start(config(dir.path(), 3600)).await;
    let addr = server.local_addr();
    assert!(
        ops(addr, &id, "HEAL").await.is_empty(),
        "not before the window closes"
    );
    let m = metrics(addr).await;
    assert_eq!(metric(&m, "vnfm_heal_windows_pending"), 1, "{m}");
    // Alertmanager re-sends the same alert to the new process: still the same window.
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
    assert_eq!(r.status, 204);
    let m = metrics(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_healing\",reason=\"duplicate\"}"
        ),
        1,
        "the re-sent alert is a duplicate: {m}"
    );
    assert_eq!(
        metric(&m, "vnfm_alerts_accepted_total{endpoint=\"auto_healing\"}"),
        0,
        "{m}"
    );
    assert_eq!(metric(&m, "vnfm_heal_windows_pending"), 1, "{m}");
    server.shutdown().await.unwrap();

    // The window closes while no server runs; the next start heals, once.
    close_saved_windows(dir.path()).await;
    let server = start(config(dir.path(), 3600)).await;
    let addr = server.local_addr();
    let heal = eventually(20, "the heal", || async {
        ops(addr, &id, "HEAL")
            .await
            .into_iter()
            .find(|o| o["operationState"] == "COMPLETED")
    })
    .await;
    assert_eq!(
        heal["operationParams"]["vnfcInstanceId"],
        serde_json::json!([vnfc])
    );
    // Settled: no window left, no instance busy: no other heal runs or is about to start.
    let m = settled(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_lcm_operations_total{operation=\"HEAL\",state=\"STARTING\"}"
        ),
        1,
        "{m}"
    );
    assert_eq!(ops(addr, &id, "HEAL").await.len(), 1);
    server.shutdown().await.unwrap();

    // And a fourth start does not run it again: it starts with no window, and nothing runs.
    let server = start(config(dir.path(), 3600)).await;
    let addr = server.local_addr();
    let m = settled(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_lcm_operations_total{operation=\"HEAL\",state=\"STARTING\"}"
        ),
        0,
        "{m}"
    );
    assert_eq!(ops(addr, &id, "HEAL").await.len(), 1);
    server.shutdown().await.unwrap();
}

/// The alert state as saved in the state file right now (snapshot and journal, read through
/// a second connection while the server runs, as a crash would leave them).
async fn saved_alert_state(dir: &std::path::Path) -> vnfm_core::alert::AlertState {
    let store = vnfm_cli::store::SqliteStore::open(dir.join("state.sqlite")).unwrap();
    let plugin = config(dir, 3600).prometheus_plugin.plugin;
    vnfm_cli::serve::load_alert_handler(&store, &plugin)
        .await
        .unwrap()
        .snapshot()
}

/// Accepted alerts are saved before their 204, also when many arrive at once and share one
/// write (group commit): every alert answered is in the state file, with no shutdown between,
/// under either `[server] alert_fsync`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_accepted_alerts_are_all_saved_before_their_answers() {
    for fsync in [AlertFsync::Periodic, AlertFsync::Each] {
        accepted_alerts_saved_before_their_answers(fsync).await;
    }
}

async fn accepted_alerts_saved_before_their_answers(fsync: AlertFsync) {
    const N: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 3600);
    c.server.alert_fsync = fsync;
    let server = start(c).await;
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
    let saved = saved_alert_state(dir.path()).await;
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
}

/// When the state file refuses the write of an accepted alert, the answer is 503 (so that
/// Alertmanager sends it again), counted; the alert is kept, and saved once the file takes
/// writes again, before and across a restart. Alertmanager's retry is accepted again, not a
/// duplicate (issue 26 High 8: an alert that was not durably recorded is not remembered as
/// seen), and changes nothing in the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_answers_503_and_the_alert_is_saved_later() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let server = start(config(dir.path(), 3600)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let vnfc = servers(addr, &id).await.into_keys().next().unwrap();
    let raw = rusqlite::Connection::open(&state).unwrap();
    raw.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON documents WHEN NEW.name LIKE 'alert_%' \
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    )
    .unwrap();
    server.refuse_alert_journal_writes(true);
    let body = webhook(&[heal_alert(&id, &vnfc, "fp-refused", "firing", false)]);
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
    let p = r.problem(503);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("could not be written"),
        "{p}"
    );
    let m = metrics(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alert_requests_total{endpoint=\"auto_healing\",code=\"503\"}"
        ),
        1,
        "{m}"
    );
    assert_eq!(
        metric(&m, "vnfm_alerts_accepted_total{endpoint=\"auto_healing\"}"),
        1
    );
    assert!(saved_alert_state(dir.path()).await.heal.pending.is_empty());

    raw.execute_batch("DROP TRIGGER refuse").unwrap();
    server.refuse_alert_journal_writes(false);
    // Alertmanager's retry: accepted again (and saved now), the window unchanged.
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
    assert_eq!(r.status, 204);
    let m = metrics(addr).await;
    assert_eq!(
        metric(&m, "vnfm_alerts_accepted_total{endpoint=\"auto_healing\"}"),
        2,
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_healing\",reason=\"duplicate\"}"
        ),
        0,
        "{m}"
    );
    let d = dir.path().to_owned();
    let want = id.clone();
    eventually(10, "the refused alert saved", || {
        let d = d.clone();
        let want = want.clone();
        async move {
            let s = saved_alert_state(&d).await;
            s.heal
                .pending
                .iter()
                .any(|p| p.instance.as_str() == want && p.alerts.len() == 1)
                .then_some(())
        }
    })
    .await;
    server.shutdown().await.unwrap();
    let server = start(config(dir.path(), 3600)).await;
    let r = post_alert(
        server.local_addr(),
        "auto_healing",
        Some(BASIC_HEADER),
        &body,
    )
    .await;
    assert_eq!(r.status, 204);
    let m = metrics(server.local_addr()).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_healing\",reason=\"duplicate\"}"
        ),
        1,
        "known after the restart: {m}"
    );
    server.shutdown().await.unwrap();
}

/// Issue 26 High 8: on a full disk (here: the alert journal refuses its writes, the state file
/// the alert state's and the operation occurrences' inserts; the latter with an SQL error that
/// is not a constraint's, as SQLite's `database or disk is full` is not) an accepted heal alert is answered 503, its window
/// closes and its heal cannot start. The window is kept and tried again, the retried alert is
/// accepted again rather than answered `duplicate`, and once the disk takes writes again the
/// heal runs, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_does_not_lose_an_accepted_heal() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let vnfc = servers(addr, &id).await.into_keys().next().unwrap();
    let raw = rusqlite::Connection::open(&state).unwrap();
    raw.execute_batch(
        "CREATE TRIGGER full_documents BEFORE INSERT ON documents WHEN NEW.name LIKE 'alert_%' \
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END; \
         CREATE TRIGGER full_ops BEFORE INSERT ON vnf_lcm_op_occs \
         BEGIN SELECT abs(-9223372036854775807 - 1); END;",
    )
    .unwrap();
    server.refuse_alert_journal_writes(true);
    let body = webhook(&[heal_alert(&id, &vnfc, "fp-full", "firing", false)]);
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
    r.problem(503);
    // The window closes after a second; its heal cannot start (no occurrence can be stored).
    let healing = "vnfm_alert_actions_not_started_total{endpoint=\"auto_healing\"}";
    eventually(20, "the heal refused for the full disk", || async {
        (metric(&metrics(addr).await, healing) >= 1).then_some(())
    })
    .await;
    // Alertmanager's retry while the disk is still full (the window was just put back, due
    // again in a second): accepted again, not a duplicate, still not saved.
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
    r.problem(503);
    let m = metrics(addr).await;
    assert_eq!(
        metric(&m, "vnfm_alerts_accepted_total{endpoint=\"auto_healing\"}"),
        2,
        "{m}"
    );
    assert!(ops(addr, &id, "HEAL").await.is_empty());

    // Space again: the retry is answered 204 and the heal runs, once.
    raw.execute_batch("DROP TRIGGER full_documents; DROP TRIGGER full_ops;")
        .unwrap();
    server.refuse_alert_journal_writes(false);
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let heal = eventually(30, "the kept heal", || {
        let id = id.clone();
        async move { ops(addr, &id, "HEAL").await.pop() }
    })
    .await;
    let heal = wait_op(
        addr,
        &format!(
            "/vnflcm/v2/vnf_lcm_op_occs/{}",
            heal["id"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(heal["operationState"], "COMPLETED", "{heal}");
    let m = settled(addr).await;
    assert_eq!(ops(addr, &id, "HEAL").await.len(), 1, "one heal: {m}");
    server.shutdown().await.unwrap();
}

/// An alert whose write outlives `[server] request_timeout` (here: a scale alert, which
/// saves the whole alert state, waits for another program's write transaction on the state
/// file) is not answered 503 while it goes on (issue 14 row 8): the timeout bounds reads only,
/// and the webhook is answered with its outcome, 204, once the file is free and the alert
/// saved; the retry is not accepted again. (A heal alert does not wait for the state file: its
/// record goes to the alert journal beside it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_write_past_the_timeout_is_answered_with_its_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 3600);
    c.server.request_timeout = 1;
    c.prometheus_plugin.plugin.scale_cooldown = 3600;
    let server = start(c).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let vnfc = servers(addr, &id).await.into_keys().next().unwrap();
    let raw = rusqlite::Connection::open(dir.path().join("state.sqlite")).unwrap();
    raw.execute_batch("BEGIN IMMEDIATE").unwrap();
    // A heal alert is saved (in the journal) and answered while the file is held.
    let heal = webhook(&[heal_alert(&id, &vnfc, "fp-slow", "firing", false)]);
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &heal).await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let body = webhook(&[scale_alert(&id, "VDU1_scale", "SCALE_OUT", "fp-slow-scale")]);
    let sent = body.clone();
    let bearer = format!("Bearer {BEARER}");
    let auth = bearer.clone();
    let answer =
        tokio::spawn(async move { post_alert(addr, "auto_scaling", Some(&auth), &sent).await });
    // Accepted (in memory), its write waiting for the file.
    let m = metric_reaches(
        addr,
        "vnfm_alerts_accepted_total{endpoint=\"auto_scaling\"}",
        1,
    )
    .await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alert_requests_total{endpoint=\"auto_scaling\",code=\"503\"}"
        ),
        0,
        "{m}"
    );
    // Twice the timeout later, still waiting for its write: no 503.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!answer.is_finished(), "answered while its write waits");
    raw.execute_batch("ROLLBACK").unwrap();
    let r = answer.await.unwrap();
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let d = dir.path().to_owned();
    let s = saved_alert_state(&d).await;
    assert_eq!(s.scale.last.len(), 1, "saved before its 204: {s:?}");
    assert_eq!(s.heal.pending.len(), 1, "{s:?}");
    let r = post_alert(addr, "auto_scaling", Some(&bearer), &body).await;
    assert_eq!(r.status, 204);
    let m = metrics(addr).await;
    for (series, want) in [
        ("vnfm_alerts_accepted_total{endpoint=\"auto_scaling\"}", 1),
        (
            "vnfm_alert_requests_total{endpoint=\"auto_scaling\",code=\"204\"}",
            2,
        ),
        (
            "vnfm_alert_requests_total{endpoint=\"auto_scaling\",code=\"503\"}",
            0,
        ),
    ] {
        assert_eq!(metric(&m, series), want, "{series}: {m}");
    }
    server.shutdown().await.unwrap();
}

/// A change that needs no write before its answer (a resolved notification forgetting an
/// occurrence) still reaches the state file within a few seconds, without a shutdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_alert_state_changes_are_saved_soon_after() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 3600)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let vnfc = servers(addr, &id).await.into_keys().next().unwrap();
    let firing = webhook(&[heal_alert(&id, &vnfc, "fp-deferred", "firing", false)]);
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &firing).await;
    assert_eq!(r.status, 204);
    assert_eq!(saved_alert_state(dir.path()).await.heal.seen.len(), 1);
    let resolved = webhook(&[heal_alert(&id, &vnfc, "fp-deferred", "resolved", false)]);
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &resolved).await;
    assert_eq!(r.status, 204);
    let dir_path = dir.path().to_owned();
    eventually(10, "the forgotten occurrence saved", || {
        let d = dir_path.clone();
        async move {
            let s = saved_alert_state(&d).await;
            s.heal.seen.is_empty().then_some(())
        }
    })
    .await;
    server.shutdown().await.unwrap();
}

/// Issue 28 acceptance 4: a 204 means the alert is recorded. The `vnfm` binary is SIGKILLed
/// right after the last of 40 concurrent new alerts was answered 204, under either
/// `[server] alert_fsync`; the next start knows every one of them (Alertmanager's re-sends are
/// all duplicates) and keeps their window.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_alert_answered_204_survives_a_sigkill_right_after() {
    for fsync in ["periodic", "each"] {
        alerts_answered_survive_a_sigkill(fsync).await;
    }
}

async fn alerts_answered_survive_a_sigkill(fsync: &str) {
    const N: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("vnfm.toml");
    std::fs::write(
        &config,
        format!(
            "[state]\npath = {:?}\n[placement]\nreselect_zones = true\n\
             fallback_best_effort = true\n[server]\nlisten = \"127.0.0.1:0\"\n\
             alert_fsync = \"{fsync}\"\n[prometheus_plugin]\nauto_healing = true\n\
             timer_interval = 3600\nbasic_auth_user = \"{}\"\nbasic_auth_password = \"{}\"\n",
            dir.path().join("state.sqlite"),
            BASIC.0,
            BASIC.1
        ),
    )
    .unwrap();
    let server = ServeProcess::start(serve_command(&config, None));
    let addr = server.addr;
    let id = instantiated(addr).await;
    let vnfc = servers(addr, &id).await.into_keys().next().unwrap();
    let bodies: Vec<Vec<u8>> = (0..N)
        .map(|i| {
            webhook(&[heal_alert(
                &id,
                &vnfc,
                &format!("fp-kill-{i}"),
                "firing",
                false,
            )])
        })
        .collect();
    let posts: Vec<_> = bodies
        .iter()
        .cloned()
        .map(|body| {
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
    server.kill();

    let server = ServeProcess::start(serve_command(&config, None));
    let addr = server.addr;
    let m = metrics(addr).await;
    assert_eq!(metric(&m, "vnfm_heal_windows_pending"), 1, "{fsync}: {m}");
    assert_eq!(
        metric(&m, "vnfm_alerts_remembered"),
        N as u64,
        "{fsync}: {m}"
    );
    for body in &bodies {
        let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), body).await;
        assert_eq!(r.status, 204);
    }
    let m = metrics(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_healing\",reason=\"duplicate\"}"
        ),
        N as u64,
        "{fsync}: every alert known after the kill: {m}"
    );
    let (code, stderr) = server.stop();
    assert_eq!(code, Some(0), "{stderr}");
}
