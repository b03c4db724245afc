//! `vnfm serve` against slow clients and slow writes, through real sockets on 127.0.0.1 (issue
//! 14 row 8): writes that outlive `[server] request_timeout`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::time::Duration;

use serde_json::json;
use serve_common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// ---- row 8: the request timeout never answers 503 for a write that goes on ----

/// A create whose write waits for another program's write transaction on the state file
/// longer than `request_timeout` is not answered 503 while it goes on: it is answered 201 once
/// written, and only one instance exists (a client that retried a 503 made a second one).
/// Meanwhile a read that waits as long is answered 503, having changed nothing; a write whose
/// body does not arrive in time is 408, and nothing is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_create_is_answered_with_its_outcome_and_a_slow_read_503() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 3600);
    c.server.request_timeout = 1;
    let server = start(c).await;
    let addr = server.local_addr();
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
    // Once the create holds the state file's connection (waiting for the lock), a read waits
    // behind it and is cut at the timeout.
    let p = eventually(15, "a read cut by the timeout", || async {
        let r = get(addr, "/vnflcm/v2/vnf_instances").await;
        (r.status == 503).then_some(r)
    })
    .await
    .problem(503);
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("longer than 1 s ([server] request_timeout)")
            && detail.contains("changed nothing"),
        "{p}"
    );
    assert!(!create.is_finished(), "the create answered while it waits");
    // A write whose body stops half-way: 408 at the timeout, nothing done.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(
        b"POST /vnflcm/v2/vnf_instances HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
          Content-Length: 100\r\n\r\n{\"vnfdId\": ",
    )
    .await
    .unwrap();
    let mut raw_reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(15), async {
        let mut buf = [0u8; 4096];
        while !raw_reply.windows(4).any(|w| w == b"\r\n\r\n") || !raw_reply.ends_with(b"}") {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed without an answer");
            raw_reply.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("an answer to the stalled body");
    let p = parse_reply(&raw_reply).problem(408);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("did not arrive within 1 s ([server] request_timeout); nothing was done"),
        "{p}"
    );
    raw.execute_batch("ROLLBACK").unwrap();
    let r = create.await.unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let list = get(addr, "/vnflcm/v2/vnf_instances").await.json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    server.shutdown().await.unwrap();
}
