//! The log of `vnfm serve` (issue 27, "Logs an operator can follow across replicas"), read
//! from the stderr of the real binary: the JSON format is one object per line with the replica
//! id on every line and, on a request's line, its request id, method, path (never the query),
//! status and latency; a client's sane `X-Request-Id` is kept and echoed, a hostile one
//! replaced; an LCM operation's lines carry its instance id and its operation id; at debug
//! level no secret of the configuration or of a request reaches the log; every `/metrics`
//! series carries the replica label.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{json, Value};
use serve_common::*;

const API_TOKEN: &str = "api-token-SECRET-7c1d";
const CLIENT_SECRET: &str = "oauth-client-SECRET-52ab";
const SIGNING_KEY: &str = "signing-key-SECRET-0123456789abcdef0123456789";
const ALERT_TOKEN: &str = "alert-token-SECRET-9e4f";

/// `vnfm.toml` in `dir`: the state file there, `[server]` on a free port with `server` keys
/// after it, then `rest`.
fn write_config(dir: &Path, server: &str, rest: &str) -> PathBuf {
    let config = dir.join("vnfm.toml");
    std::fs::write(
        &config,
        format!(
            "[state]\npath = {:?}\n[server]\nlisten = \"127.0.0.1:0\"\n{server}\n{rest}",
            dir.join("state.sqlite")
        ),
    )
    .unwrap();
    config
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> Reply {
    let mut h = vec![("Content-Type", "application/json")];
    h.extend_from_slice(headers);
    let body = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body).unwrap()
    };
    request(addr, method, path, &h, &body).await
}

/// Every line of `log` as JSON; panics on a line that is not an object.
fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"));
            assert!(v.is_object(), "{l}");
            v
        })
        .collect()
}

fn requests<'a>(lines: &'a [Value], id: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["message"] == "request" && l["request_id"] == id)
        .collect()
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_carry_the_replica_and_each_requests_id_method_path_status_and_latency() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "log_format = \"json\"\nreplica_id = \"from-config\"\napi_token = \"{API_TOKEN}\""
        ),
        "",
    );
    let mut cmd = serve_command(&config, None);
    // The environment names the replica over the file.
    cmd.env("VNFM_REPLICA_ID", "replica-a");
    let server = ServeProcess::start(cmd);
    let addr = server.addr;
    let auth = bearer(API_TOKEN);

    // A sane id is kept and echoed; the query string is not logged.
    let r = send(
        addr,
        "GET",
        "/vnflcm/v2/vnf_instances?filter=(eq,vnfInstanceName,query-SECRET)",
        &[("Authorization", &auth), ("X-Request-Id", "client-req-1")],
        &Value::Null,
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("x-request-id"), Some("client-req-1"));

    // Without one, the server makes one and echoes it.
    let r = send(
        addr,
        "POST",
        "/vnflcm/v2/vnf_instances",
        &[("Authorization", &auth)],
        &json!({"vnfdId": DEMO_VNFD}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let made = r.header("x-request-id").unwrap().to_owned();
    assert!(
        made.len() == 16 && made.bytes().all(|b| b.is_ascii_hexdigit()),
        "{made}"
    );

    // A 401 is logged too, with its status.
    let r = send(
        addr,
        "GET",
        "/vnflcm/v2/vnf_instances",
        &[("X-Request-Id", "client-req-401")],
        &Value::Null,
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("x-request-id"), Some("client-req-401"));

    let (status, log) = server.stop();
    assert_eq!(status, Some(0), "{log}");
    let lines = json_lines(&log);
    assert!(!lines.is_empty());
    for l in &lines {
        assert_eq!(l["replica"], "replica-a", "{l}");
        assert!(l["timestamp"].is_string() && l["level"].is_string(), "{l}");
        assert!(l["message"].is_string(), "{l}");
    }
    let got = requests(&lines, "client-req-1");
    assert_eq!(got.len(), 1, "{log}");
    let l = got[0];
    assert_eq!(l["level"], "INFO");
    assert_eq!(l["method"], "GET");
    assert_eq!(l["path"], "/vnflcm/v2/vnf_instances");
    assert_eq!(l["status"], 200);
    assert!(l["latency_ms"].as_f64().unwrap() >= 0.0, "{l}");
    let got = requests(&lines, &made);
    assert_eq!(got.len(), 1, "{log}");
    assert_eq!(got[0]["method"], "POST");
    assert_eq!(got[0]["status"], 201);
    let got = requests(&lines, "client-req-401");
    assert_eq!(got.len(), 1, "{log}");
    assert_eq!(got[0]["status"], 401);
    assert!(!log.contains("query-SECRET"), "{log}");
    assert!(!log.contains(API_TOKEN), "{log}");
    assert!(lines.iter().any(|l| l["message"] == "stopping"), "{log}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_request_id_is_replaced_and_never_logged() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "log_format = \"json\"", "");
    let server = ServeProcess::start(serve_command(&config, None));
    let addr = server.addr;
    let huge = "h".repeat(8 * 1024);
    let hostile = [huge.as_str(), "two words", "tab\there", "obs-text-é"];
    let mut made = Vec::new();
    for h in hostile {
        let r = send(
            addr,
            "GET",
            "/vnflcm/v2/vnf_instances",
            &[("X-Request-Id", h)],
            &Value::Null,
        )
        .await;
        assert_eq!(r.status, 200, "{h:?}");
        let id = r.header("x-request-id").unwrap().to_owned();
        assert!(
            id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{h:?} -> {id:?}"
        );
        made.push(id);
    }
    // Printable and short: kept, its quotes escaped in the JSON line.
    let forged = r#"forged","replica":"other"#;
    let r = send(
        addr,
        "GET",
        "/vnflcm/v2/vnf_instances",
        &[("X-Request-Id", forged)],
        &Value::Null,
    )
    .await;
    assert_eq!(r.header("x-request-id"), Some(forged));
    let (_, log) = server.stop();
    let lines = json_lines(&log);
    assert!(!log.contains("hhhhhhhhhhhhhhhh"), "the huge id is logged");
    assert!(
        !log.contains("two words") && !log.contains("obs-text"),
        "{log}"
    );
    for id in &made {
        assert_eq!(requests(&lines, id).len(), 1, "{id}: {log}");
    }
    assert_eq!(requests(&lines, forged).len(), 1, "{log}");
    assert!(lines.iter().all(|l| l["replica"] != "other"), "{log}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operations_lines_carry_its_instance_and_operation_ids() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "log_format = \"json\"\nreplica_id = \"replica-op\"",
        "",
    );
    let server = ServeProcess::start(serve_command(&config, None));
    let (instance, op) = create_and_instantiate(server.addr, DEMO_VNFD, "default").await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    let op_id = op["id"].as_str().unwrap().to_owned();
    let (_, log) = server.stop();
    let lines = json_lines(&log);
    let of_op: Vec<&Value> = lines
        .iter()
        .filter(|l| l["operation_id"] == op_id.as_str())
        .collect();
    for l in &of_op {
        assert_eq!(l["instance_id"], instance.as_str(), "{l}");
        assert_eq!(l["replica"], "replica-op", "{l}");
    }
    let states: Vec<&str> = of_op.iter().filter_map(|l| l["state"].as_str()).collect();
    assert!(
        states.contains(&"STARTING") && states.contains(&"COMPLETED"),
        "{states:?}\n{log}"
    );
    assert!(of_op
        .iter()
        .all(|l| l["operation"].is_null() || l["operation"] == "INSTANTIATE"));
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_the_log_at_debug_level() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "api_token = \"{API_TOKEN}\"\nreplica_id = \"replica-s\"\n\
             [server.oauth2]\nsigning_key = \"{SIGNING_KEY}\"\n\
             [[server.oauth2.clients]]\nid = \"tacker\"\nsecret = \"{CLIENT_SECRET}\""
        ),
        &format!("[prometheus_plugin]\nauto_healing = true\nbearer_token = \"{ALERT_TOKEN}\""),
    );
    let mut cmd = serve_command(&config, None);
    cmd.env("VNFM_LOG", "debug");
    let server = ServeProcess::start(cmd);
    let addr = server.addr;
    let auth = bearer(API_TOKEN);

    // The LCM API with the token, and with a wrong one.
    let r = send(
        addr,
        "POST",
        "/vnflcm/v2/vnf_instances",
        &[("Authorization", &auth)],
        &json!({"vnfdId": DEMO_VNFD}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let id = r.json()["id"].as_str().unwrap().to_owned();
    let r = send(
        addr,
        "POST",
        &format!("/vnflcm/v2/vnf_instances/{id}/instantiate"),
        &[("Authorization", &auth)],
        &json!({"flavourId": "default"}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let location = r.header("location").unwrap().to_owned();
    eventually(30, "the instantiate ends", || {
        let auth = auth.clone();
        let location = location.clone();
        async move {
            let op = send(
                addr,
                "GET",
                &location,
                &[("Authorization", &auth)],
                &Value::Null,
            )
            .await
            .json();
            (op["operationState"] == "COMPLETED").then_some(())
        }
    })
    .await;
    let wrong = bearer("wrong-token-SECRET-31d0");
    let r = send(
        addr,
        "GET",
        "/vnflcm/v2/vnf_instances",
        &[("Authorization", &wrong)],
        &Value::Null,
    )
    .await;
    assert_eq!(r.status, 401);

    // An OAuth token, then the Grant API with it.
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("tacker:{CLIENT_SECRET}"))
    );
    let r = request(
        addr,
        "POST",
        "/token",
        &[
            ("Authorization", &basic),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        b"grant_type=client_credentials",
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let access = r.json()["access_token"].as_str().unwrap().to_owned();
    let r = send(
        addr,
        "GET",
        "/grant/v1/grants/no-such-grant",
        &[("Authorization", &bearer(&access))],
        &Value::Null,
    )
    .await;
    assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));

    // An alert with its bearer token.
    let r = post_alert(
        addr,
        "auto_healing",
        Some(&bearer(ALERT_TOKEN)),
        &webhook(&[heal_alert(&id, "VDU1-0", "f-secret-test", "firing", false)]),
    )
    .await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));

    let (status, log) = server.stop();
    assert_eq!(status, Some(0), "{log}");
    // Debug is on: the alert's request is logged at debug.
    assert!(
        log.lines()
            .any(|l| l.starts_with("vnfm serve: debug: request") && l.contains("/alert/")),
        "{log}"
    );
    let encoded_client =
        base64::engine::general_purpose::STANDARD.encode(format!("tacker:{CLIENT_SECRET}"));
    for secret in [
        API_TOKEN,
        "wrong-token-SECRET",
        CLIENT_SECRET,
        encoded_client.as_str(),
        SIGNING_KEY,
        ALERT_TOKEN,
        access.as_str(),
        "SECRET",
    ] {
        assert!(!log.contains(secret), "{secret:?} in the log:\n{log}");
    }
    // The text format: every line is the server's, with the replica id at its end.
    for l in log.lines() {
        assert!(
            l.starts_with("vnfm serve: ") && l.ends_with(" replica=replica-s"),
            "{l}"
        );
    }
}

#[tokio::test]
async fn every_metrics_series_carries_the_replica_label() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 3600);
    c.server.replica_id = Some("replica-m".into());
    let server = start(c).await;
    let r = get(server.local_addr(), "/metrics").await;
    assert_eq!(r.status, 200);
    let text = String::from_utf8(r.body).unwrap();
    let samples: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert!(samples.len() > 10, "{text}");
    for l in samples {
        let name_end = l.find(['{', ' ']).unwrap();
        assert!(
            l[name_end..].starts_with("{replica=\"replica-m\""),
            "a series without the replica label: {l}"
        );
    }
    // The helper the other tests read metrics with sees them without it.
    let bare = without_replica(&text);
    assert!(!bare.contains("replica="), "{bare}");
    assert_eq!(bare.lines().count(), text.lines().count());
    server.shutdown().await.unwrap();
}
