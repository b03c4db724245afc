//! Every error answer of `vnfm serve` is a SOL013 ProblemDetails (issue 14 rows 12 and 13):
//! axum's rejections and fallbacks (404, 405 with `Allow`, a path parameter that is not
//! UTF-8), hyper's own answers (400, 414, 431), bodies of another media type or encoding
//! (415), and a 400 of a malformed body gives its position once. Over a real socket.

// a test crate: helpers outside `#[test]` fns fail by panicking too
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::net::SocketAddr;

use serde_json::json;
use serve_common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `raw` as is on a fresh connection and reads the answer.
async fn raw(addr: SocketAddr, raw: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(raw).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    parse_reply(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_and_protocol_errors_are_problem_details() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();

    // 404 of an unknown path; 405 of a known path with another method, with `Allow`.
    get(addr, "/nowhere").await.problem(404);
    let r = request(addr, "PUT", "/vnflcm/v2/vnf_instances", &[], b"").await;
    let p = r.problem(405);
    let allow = r.header("allow").unwrap();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("PUT is not allowed on /vnflcm/v2/vnf_instances"),
        "{p}"
    );
    let r = request(addr, "DELETE", "/metrics", &[], b"").await;
    r.problem(405);
    assert!(r.header("allow").unwrap().contains("GET"));

    // A path parameter whose percent-encoding is not UTF-8 (axum's rejection).
    let p = get(addr, "/vnflcm/v2/vnf_instances/%FF%FE")
        .await
        .problem(400);
    assert!(p["detail"].as_str().unwrap().contains("UTF-8"), "{p}");
    // Raw bytes outside ASCII in the request target: hyper refuses the request line.
    let p = raw(
        addr,
        b"GET /vnflcm/v2/vnf_instances/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await
    .problem(400);
    assert!(
        p["detail"].as_str().unwrap().contains("percent-encoded"),
        "{p}"
    );
    // A request line hyper cannot parse at all.
    raw(addr, b"GET\x01 / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .problem(400);

    // 414: a request target longer than hyper takes.
    let long = format!("/vnflcm/v2/vnf_instances/{}", "a".repeat(70_000));
    let p = raw(
        addr,
        format!("GET {long} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .problem(414);
    assert!(p["detail"].as_str().unwrap().contains("65534"), "{p}");
    // 431: more headers than hyper takes.
    let mut head = String::from("GET /metrics HTTP/1.1\r\nHost: x\r\n");
    for i in 0..120 {
        head.push_str(&format!("X-Filler-{i}: {i}\r\n"));
    }
    head.push_str("\r\n");
    raw(addr, head.as_bytes()).await.problem(431);

    // The server still serves after all that.
    assert_eq!(get(addr, "/metrics").await.status, 200);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_must_be_json_and_not_encoded() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let body = serde_json::to_vec(&json!({"vnfdId": DEMO_VNFD})).unwrap();
    let create = |ct: &'static str| {
        let body = body.clone();
        async move {
            request(
                addr,
                "POST",
                "/vnflcm/v2/vnf_instances",
                &[("Content-Type", ct)],
                &body,
            )
            .await
        }
    };
    for refused in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/jsonx",
        "json",
    ] {
        let p = create(refused).await.problem(415);
        let d = p["detail"].as_str().unwrap();
        assert!(
            d.contains(&format!("Content-Type {refused:?}")) && d.contains("application/json"),
            "{d}"
        );
    }
    for accepted in [
        "application/json",
        "Application/JSON; charset=UTF-8",
        "application/vnd.example+json",
    ] {
        let r = create(accepted).await;
        assert_eq!(
            r.status,
            201,
            "{accepted}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    // No Content-Type at all: read as JSON.
    let r = request(addr, "POST", "/vnflcm/v2/vnf_instances", &[], &body).await;
    assert_eq!(r.status, 201);
    let id = r.json()["id"].as_str().unwrap().to_owned();

    // Any Content-Encoding but identity is 415, with Accept-Encoding: identity.
    for encoding in ["gzip", "GZIP", "identity, br"] {
        let r = request(
            addr,
            "POST",
            "/vnflcm/v2/vnf_instances",
            &[
                ("Content-Type", "application/json"),
                ("Content-Encoding", encoding),
            ],
            &body,
        )
        .await;
        let p = r.problem(415);
        assert!(
            p["detail"].as_str().unwrap().contains("Content-Encoding"),
            "{p}"
        );
        assert_eq!(r.header("accept-encoding"), Some("identity"));
    }
    let r = request(
        addr,
        "POST",
        "/vnflcm/v2/vnf_instances",
        &[("Content-Encoding", "identity")],
        &body,
    )
    .await;
    assert_eq!(r.status, 201);

    // PATCH takes merge-patch+json with parameters, and refuses text.
    let path = format!("/vnflcm/v2/vnf_instances/{id}");
    let r = request(
        addr,
        "PATCH",
        &path,
        &[(
            "Content-Type",
            "application/merge-patch+json; charset=utf-8",
        )],
        br#"{"vnfInstanceName": "renamed"}"#,
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    request(
        addr,
        "PATCH",
        &path,
        &[("Content-Type", "text/plain")],
        br#"{"vnfInstanceName": "x"}"#,
    )
    .await
    .problem(415);

    // A route that reads no body does not look at its media type.
    request(
        addr,
        "POST",
        "/vnflcm/v2/vnf_lcm_op_occs/nope/fail",
        &[("Content-Type", "text/plain")],
        b"",
    )
    .await
    .problem(404);

    // The alert endpoints: credentials first, then the media type; the 415 is counted.
    let hook = webhook(&[]);
    let r = request(
        addr,
        "POST",
        "/alert/auto_healing",
        &[("Content-Type", "text/plain")],
        &hook,
    )
    .await;
    r.problem(401);
    let r = request(
        addr,
        "POST",
        "/alert/auto_healing",
        &[
            ("Content-Type", "text/plain"),
            ("Authorization", BASIC_HEADER),
        ],
        &hook,
    )
    .await;
    r.problem(415);
    let m = metrics(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alert_requests_total{endpoint=\"auto_healing\",code=\"415\"}"
        ),
        1,
        "{m}"
    );
    // The Promise API too.
    request(
        addr,
        "POST",
        "/promise/v1/reservations",
        &[("Content-Type", "text/yaml")],
        b"zone: AZ-1",
    )
    .await
    .problem(415);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_body_names_its_position_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let r = request(
        addr,
        "POST",
        "/vnflcm/v2/vnf_instances",
        &[("Content-Type", "application/json")],
        b"{\n  \"vnfdId\": }",
    )
    .await;
    let p = r.problem(400);
    let d = p["detail"].as_str().unwrap();
    assert_eq!(d.matches("line").count(), 1, "{d}");
    assert!(d.contains("(line 2, column 13)"), "{d}");
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), b"{\"alerts\": [}").await;
    let p = r.problem(400);
    let d = p["detail"].as_str().unwrap();
    assert_eq!(d.matches("line").count(), 1, "{d}");
    server.shutdown().await.unwrap();
}
