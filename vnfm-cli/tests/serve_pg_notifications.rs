//! Several `vnfm serve` replicas on one PostgreSQL database deliver the SOL003 notifications
//! (issue 27, docs/replicas.md "Notifications and the ledger across replicas"): two servers
//! of this process on one test database, each with its own replica id, and a test NFVO that
//! records every notification it receives.
//!
//! - A subscription made through one replica gets the notifications of the operations run on
//!   the other; every notification arrives once (by its `id`) although both replicas poll the
//!   outbox; a deletion through one replica is seen by the other.
//! - A delivery claimed by a replica that died (a claim row left behind) holds its
//!   notifications until the claim expires; then a live replica delivers them, once each.
//!
//! Needs `VNFM_TEST_POSTGRES_URL`; without it each test records a skip of the suite
//! `postgres`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod pg_common;
mod serve_common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get as route_get;
use axum::Router;
use pg_common::{client, TestDb};
use serde_json::{json, Value};
use serve_common::*;
use vnfm_cli::config::{Config, Secret};

impl TestDb {
    /// The replica holding the delivery claim of `sub`.
    async fn holder(&self, sub: &str) -> Option<String> {
        client(&self.url)
            .await
            .query_opt(
                "SELECT holder FROM lcm_delivery_claims WHERE subscription = $1",
                &[&sub],
            )
            .await
            .unwrap()
            .map(|r| r.get(0))
    }
}

/// Replica `replica` on the database `url`, polling every 100 ms, claims of 5 s.
fn replica_config(dir: &Path, url: &str, replica: &str) -> Config {
    let mut c = config(dir, 1);
    c.state.path = None;
    c.state.url = Some(Secret::new(url));
    c.server.replica_id = Some(replica.to_owned());
    let n = &mut c.notifications;
    n.poll_interval_ms = 100;
    n.timeout = 2;
    n.claim_seconds = 5;
    n.retry_initial_ms = 20;
    n.retry_max_delay_ms = 100;
    c
}

/// The test NFVO: every notification body received, in order.
#[derive(Default)]
struct Nfvo {
    got: Mutex<Vec<Value>>,
}

async fn nfvo() -> (Arc<Nfvo>, SocketAddr) {
    let n = Arc::new(Nfvo::default());
    let app = Router::new()
        .route(
            "/cb",
            route_get(|| async { StatusCode::NO_CONTENT }).post(
                |State(n): State<Arc<Nfvo>>, body: String| async move {
                    n.got
                        .lock()
                        .unwrap()
                        .push(serde_json::from_str(&body).unwrap());
                    StatusCode::NO_CONTENT
                },
            ),
        )
        .with_state(n.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (n, a)
}

/// What the NFVO received, per instance: the short lines of its notifications (in arrival
/// order); asserts that no notification `id` came twice.
fn by_instance(n: &Nfvo) -> BTreeMap<String, Vec<String>> {
    let got = n.got.lock().unwrap().clone();
    let mut ids = std::collections::BTreeSet::new();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in &got {
        let id = v["id"].as_str().unwrap();
        assert!(
            ids.insert(id.to_owned()),
            "notification {id} came twice: {got:#?}"
        );
        let line = match v["notificationType"].as_str().unwrap() {
            "VnfLcmOperationOccurrenceNotification" => format!(
                "{} {}",
                v["operation"].as_str().unwrap(),
                v["operationState"].as_str().unwrap()
            ),
            t => t.to_owned(),
        };
        out.entry(v["vnfInstanceId"].as_str().unwrap().to_owned())
            .or_default()
            .push(line);
    }
    out
}

/// The notifications of a create and an instantiate, in order.
fn created_and_instantiated() -> Vec<String> {
    [
        "VnfIdentifierCreationNotification",
        "INSTANTIATE STARTING",
        "INSTANTIATE PROCESSING",
        "INSTANTIATE COMPLETED",
    ]
    .map(str::to_owned)
    .to_vec()
}

async fn subscribe(addr: SocketAddr, cb: SocketAddr) -> String {
    let r = post_json(
        addr,
        "/vnflcm/v2/subscriptions",
        &json!({
            "callbackUri": format!("http://{cb}/cb"),
            "filter": {
                "notificationTypes": ["VnfLcmOperationOccurrenceNotification",
                    "VnfIdentifierCreationNotification"],
                "operationTypes": ["INSTANTIATE"]
            }
        }),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()["id"].as_str().unwrap().to_owned()
}

const OUTBOX_ROWS: &str = "SELECT count(*) FROM documents WHERE name LIKE 'lcm\\_outbox:%'";

/// A subscription made through replica 1 gets the notifications of an instantiate run on
/// replica 2 and of one run on replica 1, each once although both replicas poll the outbox
/// and may claim its delivery; the outbox is emptied. Replica 2 answers the subscription, and
/// once deleted through replica 2, replica 1 no longer has it nor writes for it.
#[tokio::test]
async fn two_replicas_deliver_each_notification_once_to_a_subscription_made_on_either() {
    let Some(db) = TestDb::create("two_replicas_notify").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (n, cb) = nfvo().await;
    let r1 = start(replica_config(dir.path(), &db.url, "r1")).await;
    let r2 = start(replica_config(dir.path(), &db.url, "r2")).await;
    let (a1, a2) = (r1.local_addr(), r2.local_addr());
    let sub = subscribe(a1, cb).await;
    // Replica 2 knows it at once (its stamp changed).
    let r = get(a2, &format!("/vnflcm/v2/subscriptions/{sub}")).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    let (on2, _) = create_and_instantiate(a2, DEMO_VNFD, "default").await;
    let (on1, _) = create_and_instantiate(a1, DEMO_VNFD, "default").await;
    let got = eventually(30, "both instances' notifications", || async {
        let got = by_instance(&n);
        (got.get(&on1).map_or(0, Vec::len) >= 4 && got.get(&on2).map_or(0, Vec::len) >= 4)
            .then_some(got)
    })
    .await;
    // In order per instance (one replica at a time delivers a subscription's outbox).
    assert_eq!(got[&on2], created_and_instantiated(), "{got:#?}");
    assert_eq!(got[&on1], created_and_instantiated(), "{got:#?}");
    eventually(30, "an empty outbox", || async {
        (db.count(OUTBOX_ROWS).await == 0).then_some(())
    })
    .await;
    let queued = |text: &str| metric(text, "vnfm_lcm_notifications_total{outcome=\"queued\"}");
    let delivered =
        |text: &str| metric(text, "vnfm_lcm_notifications_total{outcome=\"delivered\"}");
    let (m1, m2) = (metrics(a1).await, metrics(a2).await);
    assert_eq!(queued(&m1) + queued(&m2), 8, "{m1}\n{m2}");
    assert_eq!(delivered(&m1) + delivered(&m2), 8, "{m1}\n{m2}");

    // Deleted through replica 2: replica 1 no longer has it, nor writes for it.
    let r = request(
        a2,
        "DELETE",
        &format!("/vnflcm/v2/subscriptions/{sub}"),
        &[],
        &[],
    )
    .await;
    assert_eq!(r.status, 204);
    assert_eq!(
        get(a1, &format!("/vnflcm/v2/subscriptions/{sub}"))
            .await
            .status,
        404
    );
    let before = n.got.lock().unwrap().len();
    create_and_instantiate(a1, DEMO_VNFD, "default").await;
    assert_eq!(db.count(OUTBOX_ROWS).await, 0);
    assert_eq!(n.got.lock().unwrap().len(), before);
    assert_eq!(db.holder(&sub).await, None, "the claim went with it");
    r1.shutdown().await.unwrap();
    r2.shutdown().await.unwrap();
    db.drop_now().await;
}

/// A replica that died while it held a subscription's delivery leaves its claim row: the
/// notifications wait in the outbox while the claim runs, and once it expired, a live replica
/// takes the claim and delivers every one of them, once.
#[tokio::test]
async fn a_claim_left_by_a_dead_replica_passes_to_a_live_one_once_it_expires() {
    let Some(db) = TestDb::create("dead_claim").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (n, cb) = nfvo().await;
    let r1 = start(replica_config(dir.path(), &db.url, "r1")).await;
    let r2 = start(replica_config(dir.path(), &db.url, "r2")).await;
    let (a1, a2) = (r1.local_addr(), r2.local_addr());
    let sub = subscribe(a1, cb).await;
    db.execute(&format!(
        "INSERT INTO lcm_delivery_claims (subscription, holder, until)
         VALUES ('{sub}', 'r0/1-1', now() + interval '1 hour')"
    ))
    .await;
    let (id, _) = create_and_instantiate(a2, DEMO_VNFD, "default").await;
    // Written, and held by the dead replica's claim: several polls of both replicas pass.
    eventually(30, "the outbox entries", || async {
        (db.count(OUTBOX_ROWS).await == 4).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    assert!(n.got.lock().unwrap().is_empty());
    assert_eq!(db.holder(&sub).await.as_deref(), Some("r0/1-1"));

    // The claim expires: a live replica takes it and delivers them all, once each, in order.
    db.execute(&format!(
        "UPDATE lcm_delivery_claims SET until = now() - interval '1 second'
         WHERE subscription = '{sub}'"
    ))
    .await;
    let got = eventually(30, "the notifications", || async {
        let got = by_instance(&n);
        (got.get(&id).map_or(0, Vec::len) >= 4).then_some(got)
    })
    .await;
    assert_eq!(got[&id], created_and_instantiated());
    eventually(30, "an empty outbox", || async {
        (db.count(OUTBOX_ROWS).await == 0).then_some(())
    })
    .await;
    let holder = db.holder(&sub).await.unwrap();
    assert!(
        holder.starts_with("r1/") || holder.starts_with("r2/"),
        "{holder}"
    );
    // A stop gives the claim back.
    r1.shutdown().await.unwrap();
    r2.shutdown().await.unwrap();
    assert_eq!(db.holder(&sub).await, None);
    db.drop_now().await;
}

/// Promise ledger changes made at once through two replicas (subscriptions of the Promise API)
/// all land: each change runs on the ledger as stored, with its row locked, instead of on a
/// replica's copy written whole over the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promise_changes_through_two_replicas_at_once_all_land() {
    let Some(db) = TestDb::create("two_replicas_ledger").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let r1 = start(replica_config(dir.path(), &db.url, "r1")).await;
    let r2 = start(replica_config(dir.path(), &db.url, "r2")).await;
    let mut tasks = Vec::new();
    for (r, addr) in [(1, r1.local_addr()), (2, r2.local_addr())] {
        tasks.push(tokio::spawn(async move {
            for i in 0..10 {
                let r = post_json(
                    addr,
                    "/promise/v1/subscriptions",
                    &json!({"callbackUri": format!("http://127.0.0.1:9/r{r}/{i}"),
                            "filter": {"type": "reservation"}}),
                )
                .await;
                assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for addr in [r1.local_addr(), r2.local_addr()] {
        let all = get(addr, "/promise/v1/subscriptions").await.json();
        let mut ids: Vec<&str> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 20, "{all:#}");
    }
    r1.shutdown().await.unwrap();
    r2.shutdown().await.unwrap();
    db.drop_now().await;
}

/// The Promise notifications are written with the ledger change that made them (a durable
/// queue) and delivered by the replica that claims the queue: reservations created through
/// replica 2 and cancelled through replica 1 (a subscription made through replica 1) give one
/// `reservationCancelled` each, once, and the queue is emptied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promise_notifications_are_queued_with_their_change_and_delivered_once() {
    let Some(db) = TestDb::create("two_replicas_promise_notify").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (n, cb) = nfvo().await;
    let r1 = start(replica_config(dir.path(), &db.url, "r1")).await;
    let r2 = start(replica_config(dir.path(), &db.url, "r2")).await;
    let (a1, a2) = (r1.local_addr(), r2.local_addr());
    let r = post_json(
        a1,
        "/promise/v1/pools",
        &json!({"zone": "AZ-P", "capacity": {"cores": 16, "ram": 65536, "instances": 8}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let r = post_json(
        a1,
        "/promise/v1/subscriptions",
        &json!({"callbackUri": format!("http://{cb}/cb"),
                "filter": {"type": "reservation", "events": ["cancelled"]}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let start_at = chrono::Utc::now() + chrono::Duration::hours(1);
    let ts =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let r = post_json(
            a2,
            "/promise/v1/reservations",
            &json!({"zone": "AZ-P", "capacity": {"cores": 2},
                    "start": ts(start_at), "end": ts(start_at + chrono::Duration::hours(1))}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        ids.push(r.json()["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        let r = request(
            a1,
            "DELETE",
            &format!("/promise/v1/reservations/{id}"),
            &[],
            b"",
        )
        .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let got = eventually(30, "three cancellations", || async {
        let got = n.got.lock().unwrap().clone();
        (got.len() >= 3).then_some(got)
    })
    .await;
    let mut cancelled: Vec<&str> = got
        .iter()
        .map(|v| {
            assert_eq!(v["event"]["event"], "reservationCancelled", "{v}");
            v["event"]["reservationId"].as_str().unwrap()
        })
        .collect();
    cancelled.sort_unstable();
    let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(cancelled, want, "each once: {got:#?}");
    eventually(30, "an empty Promise queue", || async {
        let left = db
            .count("SELECT count(*) FROM documents WHERE name LIKE 'promise\\_outbox:%'")
            .await;
        (left == 0).then_some(())
    })
    .await;
    r1.shutdown().await.unwrap();
    r2.shutdown().await.unwrap();
    assert_eq!(n.got.lock().unwrap().len(), 3, "nothing more arrived");
    db.drop_now().await;
}
