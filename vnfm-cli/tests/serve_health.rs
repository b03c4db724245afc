//! `GET /healthz` of `vnfm serve` (issue 27: the readiness and liveness probe of the Kubernetes
//! manifests in `deploy/kubernetes/`), through a real socket on 127.0.0.1: 200 while the state
//! store answers a read, a 503 ProblemDetails naming the store's failure while it does not,
//! 200 again once it does, open without the API token; and bounded by `[server]
//! request_timeout` when the store's connection is held.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use serde_json::json;
use serve_common::*;
use vnfm_cli::config::Secret;

/// 200 `{"status":"ok"}` on a good state file, without credentials although the LCM API
/// requires a token; 503 with a ProblemDetails naming the store and the table once the state
/// file's `documents` table cannot be read (renamed away by another program); 200 again once
/// it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_follows_the_state_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 3600);
    c.server.api_token = Some(Secret::new("probe-has-no-token"));
    let server = start(c).await;
    let addr = server.local_addr();

    let r = get(addr, "/healthz").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    assert_eq!(r.json(), json!({"status": "ok"}));
    // The LCM API next to it does require the token: the probe is open on purpose.
    assert_eq!(get(addr, "/vnflcm/v2/vnf_instances").await.status, 401);

    // Another program breaks the state file under the running server.
    let raw = rusqlite::Connection::open(dir.path().join("state.sqlite")).unwrap();
    raw.execute_batch("ALTER TABLE documents RENAME TO documents_away")
        .unwrap();
    let p = get(addr, "/healthz").await.problem(503);
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("the state store failed")
            && detail.contains("state.sqlite")
            && detail.contains("no such table: documents"),
        "{p}"
    );

    raw.execute_batch("ALTER TABLE documents_away RENAME TO documents")
        .unwrap();
    let r = get(addr, "/healthz").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json(), json!({"status": "ok"}));
    server.shutdown().await.unwrap();
}

/// A store that does not answer in time (its connection held by a write waiting for another
/// program's write transaction) fails the probe at `[server] request_timeout` with a 503
/// ProblemDetails, instead of leaving the probe hanging; once the file is free, 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_is_bounded_by_the_request_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 3600);
    c.server.request_timeout = 1;
    let server = start(c).await;
    let addr = server.local_addr();
    assert_eq!(get(addr, "/healthz").await.status, 200);

    let raw = rusqlite::Connection::open(dir.path().join("state.sqlite")).unwrap();
    raw.execute_batch("BEGIN IMMEDIATE").unwrap();
    let create = tokio::spawn(async move {
        post_json(
            addr,
            "/vnflcm/v2/vnf_instances",
            &json!({"vnfdId": DEMO_VNFD}),
        )
        .await
    });
    // Once the create holds the state file's connection (waiting for the lock), the probe
    // waits behind it and is cut at the timeout.
    let started = std::time::Instant::now();
    let p = eventually(15, "the probe cut by the timeout", || async {
        let r = get(addr, "/healthz").await;
        (r.status == 503).then_some(r)
    })
    .await
    .problem(503);
    assert!(started.elapsed() < std::time::Duration::from_secs(14));
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("longer than 1 s ([server] request_timeout)"),
        "{p}"
    );
    raw.execute_batch("COMMIT").unwrap();
    assert_eq!(create.await.unwrap().status, 201);
    let r = get(addr, "/healthz").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    server.shutdown().await.unwrap();
}
