//! `vnfm serve`: the OPNFV Promise API over HTTP (pools, capacity, reservations with
//! counter-offers, allocations, subscriptions) and the delivery of notifications to callback
//! URIs, in process on 127.0.0.1:0 over a temporary state file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::net::SocketAddr;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};
use serve_common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use vnfm_cli::config::Secret;

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

async fn send(addr: SocketAddr, method: &str, path: &str, body: &Value) -> Reply {
    request(
        addr,
        method,
        path,
        &[("Content-Type", "application/json")],
        &serde_json::to_vec(body).unwrap(),
    )
    .await
}

/// Declares 16 cores, 64 GiB and 8 instances in zone `AZ-P` from now on.
async fn pool(addr: SocketAddr) {
    let r = post_json(
        addr,
        "/promise/v1/pools",
        &json!({"zone": "AZ-P", "capacity": {"cores": 16, "ram": 65536, "instances": 8}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["zone"], "AZ-P");
}

/// A callback receiver: answers `fail_first` requests 500, then 204; sends every body it
/// accepted (and the rejected ones, flagged) on the channel.
async fn receiver(fail_first: usize) -> (String, mpsc::UnboundedReceiver<(bool, Value)>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}/promise/notify", l.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut seen = 0usize;
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            let body = loop {
                let n = s.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    break None;
                }
                raw.extend_from_slice(&buf[..n]);
                if let Some(p) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&raw[..p]).to_lowercase();
                    assert!(head.starts_with("post /promise/notify http/1.1"), "{head}");
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map(|v| v.trim().parse().unwrap())
                        .unwrap();
                    if raw.len() >= p + 4 + len {
                        break Some(raw[p + 4..p + 4 + len].to_vec());
                    }
                }
            };
            let Some(body) = body else { continue };
            seen += 1;
            let ok = seen > fail_first;
            let answer: &[u8] = if ok {
                b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
            } else {
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            };
            let _ = s.write_all(answer).await;
            let _ = tx.send((ok, serde_json::from_slice(&body).unwrap()));
        }
    });
    (uri, rx)
}

async fn next(rx: &mut mpsc::UnboundedReceiver<(bool, Value)>, what: &str) -> (bool, Value) {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap_or_else(|_| panic!("no notification within 10 s: {what}"))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_capacity_reservations_counter_offers_and_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    pool(addr).await;
    assert_eq!(get(addr, "/promise/v1/zones").await.json(), json!(["AZ-P"]));
    assert_eq!(
        get(addr, "/promise/v1/pools").await.json()[0]["capacity"]["cores"],
        16
    );
    let cap = get(addr, "/promise/v1/capacity?zone=AZ-P").await;
    assert_eq!(cap.status, 200);
    assert_eq!(cap.json()[0]["available"]["cores"], 16);

    // A reservation for future use, then one that overlaps it and does not fit.
    let now = Utc::now();
    let (s1, e1) = (
        now + chrono::Duration::hours(1),
        now + chrono::Duration::hours(3),
    );
    let r = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"zone": "AZ-P", "capacity": {"cores": 12, "ram": 4096, "instances": 2},
                "start": ts(s1), "end": ts(e1)}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let loc = r.header("location").unwrap().to_owned();
    let res = r.json();
    let id = res["id"].as_str().unwrap().to_owned();
    assert_eq!(loc, format!("/promise/v1/reservations/{id}"));
    assert_eq!(res["status"], "initialized");
    assert_eq!(get(addr, &loc).await.json()["capacity"]["cores"], 12);

    let r = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"zone": "AZ-P", "capacity": {"cores": 8, "ram": 4096, "instances": 1},
                "start": ts(now + chrono::Duration::hours(2)),
                "end": ts(now + chrono::Duration::hours(4))}),
    )
    .await;
    let p = r.problem(409);
    assert!(
        p["detail"].as_str().unwrap().contains("does not fit"),
        "{p}"
    );
    assert_eq!(p["counterOffer"]["largest"]["cores"], 4, "{p}");
    assert_eq!(
        p["counterOffer"]["earliest"]["start"]
            .as_str()
            .map(|s| DateTime::parse_from_rfc3339(s).unwrap()),
        Some(DateTime::parse_from_rfc3339(res["end"].as_str().unwrap()).unwrap()),
        "{p}"
    );

    // The window's worst point, and how many of a flavour fit in it.
    let w = format!("zone=AZ-P&start={}&end={}", ts(s1), ts(e1));
    let cap = get(addr, &format!("/promise/v1/capacity?{w}")).await.json();
    assert_eq!(cap[0]["reserved"]["cores"], 12, "{cap}");
    assert_eq!(cap[0]["available"]["cores"], 4, "{cap}");
    let fit = get(
        addr,
        &format!("/promise/v1/capacity/fit?cores=2&ram=1024&{w}"),
    )
    .await
    .json();
    assert_eq!(fit, json!([{"zone": "AZ-P", "count": 2}]));
    let tl = get(addr, &format!("/promise/v1/capacity/utilization?{w}"))
        .await
        .json();
    assert_eq!(tl[0]["reserved"]["cores"], 12, "{tl}");

    // Queries: by zone and window, over GET and POST.
    let q = get(addr, "/promise/v1/reservations?zone=AZ-P&utilization=true")
        .await
        .json();
    assert_eq!(q["reservations"].as_array().unwrap().len(), 1, "{q}");
    assert!(q["utilization"].is_array(), "{q}");
    let later = ts(now + chrono::Duration::hours(5));
    let q = get(
        addr,
        &format!("/promise/v1/reservations?start={later}&scope=exclusive"),
    )
    .await
    .json();
    assert_eq!(q["reservations"], json!([]), "{q}");
    let q = post_json(
        addr,
        "/promise/v1/reservations/query",
        &json!({"zone": "AZ-P", "without": [id]}),
    )
    .await
    .json();
    assert_eq!(q["reservations"], json!([]), "{q}");

    // Update, then cancel; a cancelled reservation cannot be cancelled again.
    let r = send(addr, "PATCH", &loc, &json!({"capacity": {"cores": 6}})).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["capacity"]["cores"], 6);
    let r = request(addr, "DELETE", &loc, &[], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "cancelled");
    request(addr, "DELETE", &loc, &[], b"").await.problem(422);

    // Allocations against unreserved capacity: create, show, destroy; a rejection says why.
    let r = post_json(
        addr,
        "/promise/v1/allocations",
        &json!({"zone": "AZ-P", "capacity": {"cores": 10}, "instanceRef": "server-1"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let aloc = r.header("location").unwrap().to_owned();
    assert_eq!(get(addr, &aloc).await.json()["instanceRef"], "server-1");
    let p = post_json(
        addr,
        "/promise/v1/allocations",
        &json!({"zone": "AZ-P", "capacity": {"cores": 10}}),
    )
    .await
    .problem(409);
    assert!(p["detail"].as_str().unwrap().contains("cores"), "{p}");
    let r = request(addr, "DELETE", &aloc, &[], b"").await;
    assert_eq!(r.status, 200);
    assert!(r.json()["end"].is_string());
    request(addr, "DELETE", &aloc, &[], b"").await.problem(422);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_problem_details_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    pool(addr).await;
    let p = request(addr, "POST", "/promise/v1/reservations", &[], b"{not json")
        .await
        .problem(400);
    assert!(
        p["detail"].as_str().unwrap().contains("ReservationRequest"),
        "{p}"
    );
    let p = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"zone": "AZ-X", "capacity": {"cores": 1}}),
    )
    .await
    .problem(422);
    assert!(p["detail"].as_str().unwrap().contains("AZ-X"), "{p}");
    let p = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"zone": "AZ-P", "capacity": {"cores": 0}}),
    )
    .await
    .problem(422);
    assert!(p["detail"].as_str().unwrap().contains("capacity"), "{p}");
    let p = get(addr, "/promise/v1/capacity?start=tomorrow")
        .await
        .problem(400);
    assert!(p["detail"].as_str().unwrap().contains("start"), "{p}");
    let p = get(addr, "/promise/v1/capacity?zone=AZ-P&colour=red")
        .await
        .problem(400);
    assert!(p["detail"].as_str().unwrap().contains("colour"), "{p}");
    get(addr, "/promise/v1/capacity/utilization")
        .await
        .problem(400);
    get(addr, "/promise/v1/capacity?zone=AZ-X")
        .await
        .problem(422);
    get(addr, "/promise/v1/reservations/nope")
        .await
        .problem(404);
    get(addr, "/promise/v1/allocations/nope").await.problem(404);
    request(addr, "DELETE", "/promise/v1/subscriptions/nope", &[], b"")
        .await
        .problem(404);
    let p = post_json(
        addr,
        "/promise/v1/subscriptions",
        &json!({"callbackUri": "https://example.org/cb",
                "filter": {"type": "reservation", "zone": "AZ-P"}}),
    )
    .await
    .problem(422);
    assert!(p["detail"].as_str().unwrap().contains("callbackUri"), "{p}");
    // A decrease that would take reserved capacity is refused without force.
    let r = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"zone": "AZ-P", "capacity": {"cores": 12}}),
    )
    .await;
    assert_eq!(r.status, 201);
    post_json(
        addr,
        "/promise/v1/pools/decrease",
        &json!({"zone": "AZ-P", "capacity": {"cores": 8}}),
    )
    .await
    .problem(409);
    server.shutdown().await.unwrap();

    // With an API token, the Promise API requires it.
    let mut c = config(dir.path(), 1);
    c.server.api_token = Some(Secret::new(BEARER));
    let server = start(c).await;
    let addr = server.local_addr();
    get(addr, "/promise/v1/zones").await.problem(401);
    let auth = format!("Bearer {BEARER}");
    let r = request(
        addr,
        "GET",
        "/promise/v1/zones",
        &[("Authorization", &auth)],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    pool(addr).await;
    let r = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"zone": "AZ-P", "capacity": {"cores": 12}, "priority": "high"}),
    )
    .await;
    assert_eq!(r.status, 201);
    let loc = r.header("location").unwrap().to_owned();
    let policy = send(
        addr,
        "PUT",
        "/promise/v1/policy",
        &json!({"maxDuration": 48}),
    )
    .await;
    assert_eq!(policy.status, 200);
    // issue 14 row 12: neither a list nor unknown fields replace the policy
    for bad in [
        json!([]),
        json!({"bogus": 1}),
        json!({"maxDuration": 1, "maxDurationn": 2}),
    ] {
        let r = send(addr, "PUT", "/promise/v1/policy", &bad).await;
        assert_eq!(r.status, 400, "{bad}");
        let p = r.json();
        assert!(p["detail"].as_str().unwrap().contains("Policy"), "{p}");
    }
    assert_eq!(
        get(addr, "/promise/v1/policy").await.json()["maxDuration"],
        48
    );
    server.shutdown().await.unwrap();

    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let r = get(addr, &loc).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "active");
    assert_eq!(r.json()["priority"], "high");
    assert_eq!(
        get(addr, "/promise/v1/policy").await.json()["maxDuration"],
        48
    );
    let cap = get(addr, "/promise/v1/capacity?zone=AZ-P").await.json();
    assert_eq!(cap[0]["available"]["cores"], 4, "{cap}");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_reach_the_callbacks() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    pool(addr).await;
    let (uri, mut rx) = receiver(0).await;

    let r = post_json(
        addr,
        "/promise/v1/subscriptions",
        &json!({"callbackUri": uri, "filter": {"type": "reservation", "zone": "AZ-P"}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let sub = r.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        get(addr, &format!("/promise/v1/subscriptions/{sub}"))
            .await
            .json()["callbackUri"],
        uri
    );
    let r = post_json(
        addr,
        "/promise/v1/subscriptions",
        &json!({"callbackUri": uri,
                "filter": {"type": "capacity", "zone": "AZ-P", "line": "cores",
                           "op": "lt", "value": 5}}),
    )
    .await;
    assert_eq!(r.status, 201);
    let threshold = r.json()["id"].as_str().unwrap().to_owned();

    // A reservation starting in a second: the ticker starts it and says so.
    let start_at = Utc::now() + chrono::Duration::seconds(1);
    let r = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"zone": "AZ-P", "capacity": {"cores": 12},
                "start": ts(start_at), "end": ts(start_at + chrono::Duration::hours(3))}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let id = r.json()["id"].as_str().unwrap().to_owned();
    let mut got = Vec::new();
    while got.len() < 2 {
        let (ok, n) = next(&mut rx, "reservationStarted and the threshold").await;
        assert!(ok);
        got.push(n);
    }
    let started = got
        .iter()
        .find(|n| n["event"]["event"] == "reservationStarted")
        .unwrap_or_else(|| panic!("{got:?}"));
    assert_eq!(started["subscriptionId"], sub);
    assert_eq!(started["callbackUri"], uri);
    assert_eq!(started["event"]["reservationId"], id);
    let crossed = got
        .iter()
        .find(|n| n["event"]["event"] == "capacityThreshold")
        .unwrap_or_else(|| panic!("{got:?}"));
    assert_eq!(crossed["subscriptionId"], threshold);
    assert_eq!(crossed["event"]["available"], 4);
    assert_eq!(
        get(addr, &format!("/promise/v1/reservations/{id}"))
            .await
            .json()["status"],
        "active"
    );

    // A cancel, after unsubscribing from the threshold: only the reservation event.
    let r = request(
        addr,
        "DELETE",
        &format!("/promise/v1/subscriptions/{threshold}"),
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 204);
    let r = request(
        addr,
        "DELETE",
        &format!("/promise/v1/reservations/{id}"),
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    let (_, n) = next(&mut rx, "reservationCancelled").await;
    assert_eq!(n["event"]["event"], "reservationCancelled", "{n}");
    assert_eq!(n["event"]["reservationId"], id);
    // The cancel queued its notifications before its answer. Two more ticks end after this
    // look: the second one started after it, so whatever the ledger had to say since is
    // queued by then. Once the queue is empty, every notification is counted.
    let ticks = metric(&metrics(addr).await, "vnfm_promise_ticks_total");
    metric_reaches(addr, "vnfm_promise_ticks_total", ticks + 2).await;
    let m = metric_reaches(addr, "vnfm_promise_notifications_queued", 0).await;
    assert_eq!(
        metric(&m, "vnfm_promise_notifications_delivered_total"),
        3,
        "reservationStarted, capacityThreshold and reservationCancelled only: {m}"
    );
    assert_eq!(
        metric(&m, "vnfm_promise_notifications_failed_total"),
        0,
        "{m}"
    );
    assert!(rx.try_recv().is_err(), "nothing else is delivered");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_callback_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    pool(addr).await;
    let (uri, mut rx) = receiver(2).await;
    let r = post_json(
        addr,
        "/promise/v1/subscriptions",
        &json!({"callbackUri": uri, "filter": {"type": "reservation",
                                                "events": ["cancelled"]}}),
    )
    .await;
    assert_eq!(r.status, 201);
    let r = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"zone": "AZ-P", "capacity": {"cores": 1}}),
    )
    .await;
    let loc = r.header("location").unwrap().to_owned();
    assert_eq!(request(addr, "DELETE", &loc, &[], b"").await.status, 200);
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(next(&mut rx, "three attempts").await);
    }
    assert_eq!(
        seen.iter().map(|(ok, _)| *ok).collect::<Vec<_>>(),
        [false, false, true]
    );
    assert!(
        seen.iter().all(|(_, n)| n == &seen[0].1),
        "the same notification"
    );
    assert_eq!(seen[0].1["event"]["event"], "reservationCancelled");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_counted_in_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    pool(addr).await;
    let (uri, mut rx) = receiver(0).await;
    // A callback nobody listens on any more.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}/gone", l.local_addr().unwrap())
    };
    for cb in [&uri, &dead] {
        let r = post_json(
            addr,
            "/promise/v1/subscriptions",
            &json!({"callbackUri": cb,
                    "filter": {"type": "reservation", "events": ["cancelled"]}}),
        )
        .await;
        assert_eq!(r.status, 201);
    }
    let r = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"zone": "AZ-P", "capacity": {"cores": 1}}),
    )
    .await;
    let loc = r.header("location").unwrap().to_owned();
    assert_eq!(request(addr, "DELETE", &loc, &[], b"").await.status, 200);
    let (ok, n) = next(&mut rx, "reservationCancelled").await;
    assert!(ok);
    assert_eq!(n["event"]["event"], "reservationCancelled");
    let text = eventually(15, "the dead callback given up", || async {
        let t = metrics(addr).await;
        (metric(&t, "vnfm_promise_notifications_failed_total") == 1).then_some(t)
    })
    .await;
    assert_eq!(
        metric(&text, "vnfm_promise_notifications_delivered_total"),
        1
    );
    assert_eq!(metric(&text, "vnfm_promise_notifications_queued"), 0);
    assert_eq!(metric(&text, "vnfm_promise_reservations"), 1);
    assert_eq!(metric(&text, "vnfm_promise_subscriptions"), 2);
    assert!(text.contains("# TYPE vnfm_promise_notifications_failed_total counter"));
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_callback_delays_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    pool(addr).await;
    // Accepts connections and never answers: every attempt waits for its timeout.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_uri = format!("http://{}/silent", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            open.push(s);
        }
    });
    let (uri, mut rx) = receiver(0).await;
    for cb in [&silent_uri, &uri] {
        let r = post_json(
            addr,
            "/promise/v1/subscriptions",
            &json!({"callbackUri": cb,
                    "filter": {"type": "reservation", "events": ["cancelled"]}}),
        )
        .await;
        assert_eq!(r.status, 201);
    }
    for _ in 0..2 {
        let r = post_json(
            addr,
            "/promise/v1/reservations",
            &json!({"zone": "AZ-P", "capacity": {"cores": 1}}),
        )
        .await;
        let loc = r.header("location").unwrap().to_owned();
        assert_eq!(request(addr, "DELETE", &loc, &[], b"").await.status, 200);
    }
    // Both arrive while the silent callback still has both of its notifications: neither
    // delivered nor given up (that takes 3 attempts of 5 s each). Had the silent callback's
    // attempts gone first, the first one would be given up before anything arrived here.
    for _ in 0..2 {
        let (ok, n) = next(&mut rx, "reservationCancelled").await;
        assert!(ok);
        assert_eq!(n["event"]["event"], "reservationCancelled");
    }
    let m = metric_reaches(addr, "vnfm_promise_notifications_delivered_total", 2).await;
    assert_eq!(
        metric(&m, "vnfm_promise_notifications_failed_total"),
        0,
        "{m}"
    );
    assert_eq!(metric(&m, "vnfm_promise_notifications_queued"), 2, "{m}");
    held.abort();
    server.shutdown().await.unwrap();
}

/// Runs the `vnfm` binary over the state file of `dir`.
fn cli(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.arg("--state").arg(dir.join("state.sqlite")).args(args);
    for var in [
        "VNFM_CONFIG",
        "VNFM_STATE",
        "VNFM_VIM",
        "VNFM_SIM_SEED",
        "VNFM_ID_SALT",
        "VNFM_PACKAGES_DIR",
        "VNFM_CLOUD",
    ] {
        cmd.env_remove(var);
    }
    cmd.output().expect("vnfm runs")
}

fn cli_json(dir: &std::path::Path, args: &[&str]) -> Value {
    let out = cli(dir, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_and_the_server_share_one_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    assert_eq!(get(addr, "/promise/v1/zones").await.json(), json!([]));

    // While the server runs, the command line registers the simulated cloud and reserves.
    let expiry = ts(Utc::now() + chrono::Duration::hours(2));
    let d = dir.path();
    cli_json(d, &["--json", "provider", "add"]);
    let v = cli_json(
        d,
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
    // The server sees both on its next request.
    assert_eq!(
        get(addr, "/promise/v1/zones").await.json(),
        json!(["AZ-1", "AZ-2", "AZ-3", "AZ-4"])
    );
    let r = get(addr, "/promise/v1/reservations/from-cli").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["capacity"]["cores"], 3);
    let q = get(addr, "/promise/v1/reservations?zone=AZ-2").await.json();
    assert_eq!(q["reservations"][0]["id"], "from-cli");

    // And the other way round: a reservation made over HTTP is the command line's too.
    let r = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"id": "from-server", "zone": "AZ-3", "capacity": {"cores": 2},
                "expiry": expiry}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let v = cli_json(d, &["--json", "reservation", "show", "from-server"]);
    assert_eq!(v["reservation"]["zone"], "AZ-3");
    let v = cli_json(d, &["--json", "reservation", "query"]);
    let ids: Vec<&str> = v["reservations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{v}");
    assert!(ids.contains(&"from-cli") && ids.contains(&"from-server"));
    // A cancel on the command line shows on the server.
    cli_json(d, &["--json", "reservation", "cancel", "from-server"]);
    let r = get(addr, "/promise/v1/reservations/from-server").await;
    assert_eq!(r.json()["status"], "cancelled");
    server.shutdown().await.unwrap();

    // One document in the state file.
    let store = vnfm_cli::store::SqliteStore::open(d.join("state.sqlite")).unwrap();
    assert!(store
        .document(vnfm_cli::promise::PROMISE_DOCUMENT)
        .await
        .unwrap()
        .is_some());
    assert!(store.document("promise_ledger").await.unwrap().is_none());
    let v = cli_json(d, &["--json", "reservation", "show", "from-server"]);
    assert_eq!(v["reservation"]["status"], "cancelled");
}
