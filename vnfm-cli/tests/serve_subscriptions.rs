//! SOL003 lifecycle change subscriptions and notifications through real sockets, with an
//! NFVO-like test client: a small HTTP server of the test's own that receives the
//! notifications (and answers the callback test, checks the credentials, serves an OAuth 2.0
//! token endpoint, and can be down).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get as route_get, post as route_post};
use axum::Router;
use serde_json::{json, Value};
use serve_common::*;

/// What the test NFVO received.
#[derive(Default)]
struct Nfvo {
    /// Every notification body, in arrival order.
    got: Mutex<Vec<Value>>,
    /// Answer 503 to notifications.
    down: AtomicBool,
    /// The `Authorization` header required on the callback, if any.
    auth: Mutex<Option<String>>,
    /// Token requests served.
    tokens: AtomicU64,
    /// Refused deliveries (down or bad credentials).
    refused: AtomicU64,
    /// Answer 404 to the occurrence notifications of this `operationState` (an NFVO that
    /// does not want them).
    refuse_state: Mutex<Option<String>>,
}

async fn callback_get(State(n): State<Arc<Nfvo>>, h: HeaderMap) -> StatusCode {
    if !authorized(&n, &h) {
        return StatusCode::UNAUTHORIZED;
    }
    StatusCode::NO_CONTENT
}

fn authorized(n: &Nfvo, h: &HeaderMap) -> bool {
    let want = n.auth.lock().unwrap().clone();
    want.is_none_or(|w| h.get("authorization").and_then(|v| v.to_str().ok()) == Some(&w))
}

async fn callback_post(State(n): State<Arc<Nfvo>>, h: HeaderMap, body: String) -> StatusCode {
    if n.down.load(Ordering::SeqCst) || !authorized(&n, &h) {
        n.refused.fetch_add(1, Ordering::SeqCst);
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let v: Value = serde_json::from_str(&body).unwrap();
    let refuse = n.refuse_state.lock().unwrap().clone();
    if refuse.is_some() && v["operationState"].as_str() == refuse.as_deref() {
        n.refused.fetch_add(1, Ordering::SeqCst);
        return StatusCode::NOT_FOUND;
    }
    n.got.lock().unwrap().push(v);
    StatusCode::NO_CONTENT
}

async fn token(State(n): State<Arc<Nfvo>>, h: HeaderMap, body: String) -> axum::Json<Value> {
    assert_eq!(body, "grant_type=client_credentials");
    // client "nfvo-client" / "s3cret"
    assert_eq!(
        h.get("authorization").unwrap().to_str().unwrap(),
        "Basic bmZ2by1jbGllbnQ6czNjcmV0"
    );
    n.tokens.fetch_add(1, Ordering::SeqCst);
    axum::Json(json!({"access_token": "tok-1", "token_type": "Bearer", "expires_in": 3600}))
}

/// Starts the test NFVO on `addr` (port 0: a free one); returns its address.
async fn nfvo_on(n: Arc<Nfvo>, addr: SocketAddr) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let app = Router::new()
        .route("/cb", route_get(callback_get).post(callback_post))
        .route("/cb/404", route_get(|| async { StatusCode::NOT_FOUND }))
        .route("/token", route_post(token))
        .with_state(n);
    let l = tokio::net::TcpListener::bind(addr).await.unwrap();
    let a = l.local_addr().unwrap();
    let h = tokio::spawn(async move {
        axum::serve(l, app).await.unwrap();
    });
    (a, h)
}

async fn nfvo() -> (Arc<Nfvo>, SocketAddr) {
    let n = Arc::new(Nfvo::default());
    let (a, _) = nfvo_on(n.clone(), "127.0.0.1:0".parse().unwrap()).await;
    (n, a)
}

fn short(n: &Value) -> String {
    match n["notificationType"].as_str().unwrap() {
        "VnfLcmOperationOccurrenceNotification" => format!(
            "{} {} {}",
            n["operation"].as_str().unwrap(),
            n["operationState"].as_str().unwrap(),
            n["notificationStatus"].as_str().unwrap()
        ),
        t => t.to_owned(),
    }
}

/// The notifications received, as short lines; asserts that no delivery id came twice.
fn received(n: &Nfvo) -> Vec<String> {
    let (once, repeated) = received_by_id(n);
    assert!(
        repeated.is_empty(),
        "a notification came twice: {repeated:?} in {:#?}",
        n.got.lock().unwrap()
    );
    once
}

/// The notifications received, as short lines, each delivery id taken once (as an NFVO takes
/// SOL003's notification `id`), and the notifications that came again (short line and id).
fn received_by_id(n: &Nfvo) -> (Vec<String>, Vec<(String, String)>) {
    let got = n.got.lock().unwrap().clone();
    let mut seen = std::collections::BTreeSet::new();
    let mut once = Vec::new();
    let mut repeated = Vec::new();
    for v in &got {
        let id = v["id"].as_str().unwrap();
        if seen.insert(id.to_owned()) {
            once.push(short(v));
        } else {
            repeated.push((short(v), id.to_owned()));
        }
    }
    (once, repeated)
}

async fn subscribe(addr: SocketAddr, body: &Value) -> Reply {
    post_json(addr, "/vnflcm/v2/subscriptions", body).await
}

/// What an instantiate, a heal, a terminate and a delete notify with the test filter.
fn flow(instantiate: &[&str], heal: &[&str], terminate: &[&str]) -> Vec<String> {
    let mut v = vec!["VnfIdentifierCreationNotification".to_owned()];
    for (op, states) in [
        ("INSTANTIATE", instantiate),
        ("HEAL", heal),
        ("TERMINATE", terminate),
    ] {
        for s in states {
            let status = if ["STARTING", "PROCESSING", "ROLLING_BACK"].contains(s) {
                "START"
            } else {
                "RESULT"
            };
            v.push(format!("{op} {s} {status}"));
        }
    }
    v.push("VnfIdentifierDeletionNotification".to_owned());
    v
}

const RUN: &[&str] = &["STARTING", "PROCESSING", "COMPLETED"];

/// The filter of the tests' NFVO: the demo package; no MODIFY_INFO.
fn filter() -> Value {
    json!({
        "vnfInstanceSubscriptionFilter": {"vnfdIds": [DEMO_VNFD]},
        "notificationTypes": ["VnfLcmOperationOccurrenceNotification",
            "VnfIdentifierCreationNotification", "VnfIdentifierDeletionNotification"],
        "operationTypes": ["INSTANTIATE", "HEAL", "TERMINATE"]
    })
}

/// Heals VNFC `vnfc` of `id` with an Alertmanager alert; waits for the heal to complete.
async fn heal_by_alert(addr: SocketAddr, id: &str, vnfc: &str) {
    let r = post_alert(
        addr,
        "auto_healing",
        Some(BASIC_HEADER),
        &webhook(&[heal_alert(id, vnfc, "f-sub", "firing", false)]),
    )
    .await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    eventually(30, "the heal", || async {
        ops(addr, id, "HEAL")
            .await
            .first()
            .filter(|o| o["operationState"] == "COMPLETED")
            .cloned()
    })
    .await;
}

async fn terminate_and_delete(addr: SocketAddr, id: &str) {
    let r = post_json(
        addr,
        &format!("/vnflcm/v2/vnf_instances/{id}/terminate"),
        &json!({"terminationType": "FORCEFUL"}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = wait_op(addr, r.header("location").unwrap()).await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    let r = request(
        addr,
        "DELETE",
        &format!("/vnflcm/v2/vnf_instances/{id}"),
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 204);
}

#[tokio::test]
async fn subscriptions_are_created_listed_deduplicated_and_deleted_and_bad_ones_named() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let (n, cb) = nfvo().await;
    let uri = format!("http://{cb}/cb");

    // Unknown members and values are named with their path.
    let p = subscribe(addr, &json!({"callbackUri": uri, "filter": {"vnfInstanceSubscriptionFilter": {"vnfdId": ["x"]}}}))
        .await
        .problem(400);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("filter.vnfInstanceSubscriptionFilter") && d.contains("vnfdId"),
        "{d}"
    );
    let p = subscribe(
        addr,
        &json!({"callbackUri": uri, "filter": {"operationStates": ["DONE"]}}),
    )
    .await
    .problem(400);
    assert!(p["detail"].as_str().unwrap().contains("DONE"), "{p}");
    let p = subscribe(
        addr,
        &json!({"callbackUri": uri, "authentication": {"authType": ["BASIC"]}}),
    )
    .await
    .problem(400);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("authentication.paramsBasic"),
        "{p}"
    );
    let p = subscribe(
        addr,
        &json!({"callbackUri": uri, "authentication": {"authType": ["TLS_CERT"]}}),
    )
    .await
    .problem(422);
    assert!(p["detail"].as_str().unwrap().contains("TLS_CERT"), "{p}");
    // The callback test: 204, or 422 naming the URI but not what it answered (the same
    // message for a 404, a 401 and a port nobody listens on).
    let bad = format!("http://{cb}/cb/404");
    let p = subscribe(addr, &json!({"callbackUri": bad}))
        .await
        .problem(422);
    let failed = p["detail"].as_str().unwrap().replace(&bad, "URI");
    assert!(failed.contains("the callback test failed"), "{failed}");
    *n.auth.lock().unwrap() = Some(BASIC_HEADER.to_owned());
    let p = subscribe(addr, &json!({"callbackUri": uri}))
        .await
        .problem(422);
    assert_eq!(p["detail"].as_str().unwrap().replace(&uri, "URI"), failed);
    let dead = "http://127.0.0.1:9/cb";
    let p = subscribe(addr, &json!({"callbackUri": dead}))
        .await
        .problem(422);
    assert_eq!(p["detail"].as_str().unwrap().replace(dead, "URI"), failed);

    // Created with the credentials the callback wants; answered without them.
    let body = json!({"callbackUri": uri, "filter": filter(), "authentication": {
        "authType": ["BASIC"], "paramsBasic": {"userName": BASIC.0, "password": BASIC.1}}});
    let r = subscribe(addr, &body).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let s = r.json();
    let id = s["id"].as_str().unwrap().to_owned();
    let href = format!("/vnflcm/v2/subscriptions/{id}");
    assert_eq!(r.header("location"), Some(href.as_str()));
    assert_eq!(s["_links"]["self"]["href"], href);
    assert_eq!(s["filter"], filter());
    assert!(s.get("authentication").is_none(), "{s}");
    assert!(!String::from_utf8_lossy(&r.body).contains(BASIC.1));
    // The same callback and filter again: 303 to the existing one.
    let r = subscribe(addr, &body).await;
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some(href.as_str()));
    let list = get(addr, "/vnflcm/v2/subscriptions").await.json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    // SOL013 filters and selectors on the list, as on the other lists
    let enc = |f: &str| {
        f.replace('(', "%28")
            .replace(')', "%29")
            .replace(',', "%2C")
    };
    let q = enc(&format!("(eq,callbackUri,{uri})"));
    let list = get(addr, &format!("/vnflcm/v2/subscriptions?filter={q}"))
        .await
        .json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let q = enc("(eq,callbackUri,http://elsewhere/)");
    let list = get(addr, &format!("/vnflcm/v2/subscriptions?filter={q}"))
        .await
        .json();
    assert!(list.as_array().unwrap().is_empty(), "{list}");
    let q = enc("(eq,nosuchAttribute,1)");
    get(addr, &format!("/vnflcm/v2/subscriptions?filter={q}"))
        .await
        .problem(400);
    get(addr, "/vnflcm/v2/subscriptions?bogus=1")
        .await
        .problem(400);
    assert_eq!(get(addr, &href).await.json()["callbackUri"], uri);
    assert_eq!(request(addr, "DELETE", &href, &[], b"").await.status, 204);
    get(addr, &href).await.problem(404);
    request(addr, "DELETE", &href, &[], b"").await.problem(404);
    server.shutdown().await.unwrap();
}

/// `[notifications] max_subscriptions`: the subscriptions are bounded; one beyond the bound is
/// refused with a 409 naming it, and a delete makes room again.
#[tokio::test]
async fn subscriptions_beyond_max_subscriptions_are_refused_until_one_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.notifications.max_subscriptions = 2;
    let server = start(c).await;
    let addr = server.local_addr();
    let (_n, cb) = nfvo().await;
    let uri = format!("http://{cb}/cb");
    // Three subscriptions that differ by their filter (the NFVO has one endpoint).
    let sub = |op: &str| json!({"callbackUri": uri, "filter": {"operationTypes": [op]}});
    let mut hrefs = Vec::new();
    for op in ["INSTANTIATE", "SCALE"] {
        let r = subscribe(addr, &sub(op)).await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        hrefs.push(r.header("location").unwrap().to_string());
    }
    let p = subscribe(addr, &sub("HEAL")).await.problem(409);
    let d = p["detail"].as_str().unwrap();
    assert!(d.contains("max_subscriptions = 2"), "{d}");
    assert_eq!(
        get(addr, "/vnflcm/v2/subscriptions")
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // A duplicate of an existing one is still answered 303, full or not.
    let r = subscribe(addr, &sub("INSTANTIATE")).await;
    assert_eq!(r.status, 303);
    let path = hrefs[0]
        .split_once("/vnflcm/")
        .map(|(_, p)| format!("/vnflcm/{p}"))
        .unwrap();
    assert_eq!(request(addr, "DELETE", &path, &[], b"").await.status, 204);
    let r = subscribe(addr, &sub("HEAL")).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_nfvo_gets_every_notification_of_a_reselecting_instantiate_a_heal_and_a_terminate_once_in_order(
) {
    // The random granter puts a VNFC in the demo cloud's full AZ-1 for some seed: the stack
    // fails there and the instantiate reselects. Each try has a server and an NFVO of its own.
    let mut found = None;
    for seed in 0..16 {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path(), 1);
        c.placement.selection = Some(vnfm_cli::config::SelectionKind::Random);
        c.placement.seed = seed;
        c.notifications.retry_initial_ms = 20;
        c.notifications.retry_max_delay_ms = 100;
        let server = start(c).await;
        let addr = server.local_addr();
        let (n, cb) = nfvo().await;
        *n.auth.lock().unwrap() = Some("Bearer tok-1".to_owned());
        let r = subscribe(
            addr,
            &json!({"callbackUri": format!("http://{cb}/cb"), "filter": filter(), "authentication": {
                "authType": ["OAUTH2_CLIENT_CREDENTIALS"], "paramsOauth2ClientCredentials": {
                "clientId": "nfvo-client", "clientPassword": "s3cret",
                "tokenEndpoint": format!("http://{cb}/token")}}}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let sub = r.json()["id"].as_str().unwrap().to_owned();
        // A filter that matches nothing of this flow gets nothing.
        let (other, cb2) = nfvo().await;
        let r = subscribe(
            addr,
            &json!({"callbackUri": format!("http://{cb2}/cb"),
                "filter": {"vnfInstanceSubscriptionFilter": {"vnfInstanceIds": ["not-this-one"]}}}),
        )
        .await;
        assert_eq!(r.status, 201);
        let (id, op) = create_and_instantiate(addr, DEMO_VNFD, "default").await;
        if op["operationState"] == "COMPLETED" && op["attempts"].as_array().unwrap().len() > 1 {
            found = Some((dir, server, n, other, sub, id));
            break;
        }
        server.shutdown().await.unwrap();
    }
    let (_dir, server, n, other, sub, id) = found.expect("a seed whose instantiate reselects");
    let addr = server.local_addr();
    // auto-heal on (a MODIFY_INFO, which the tests' filter leaves out)
    configure(addr, &id, json!({"isAutohealEnabled": true})).await;
    let vnfc = servers(addr, &id).await.keys().next().unwrap().clone();
    heal_by_alert(addr, &id, &vnfc).await;
    terminate_and_delete(addr, &id).await;

    let want = flow(RUN, RUN, RUN);
    let got = eventually(30, "every notification", || async {
        let g = received(&n);
        (g.len() >= want.len()).then_some(g)
    })
    .await;
    assert_eq!(got, want);
    let all = n.got.lock().unwrap().clone();
    for (i, v) in all.iter().enumerate() {
        assert_eq!(v["subscriptionId"], sub);
        assert_eq!(v["vnfInstanceId"], id.as_str());
        assert_eq!(
            v["_links"]["subscription"]["href"],
            format!("/vnflcm/v2/subscriptions/{sub}")
        );
        assert_eq!(
            v["_links"]["vnfInstance"]["href"],
            format!("/vnflcm/v2/vnf_instances/{id}")
        );
        if v["notificationType"] == "VnfLcmOperationOccurrenceNotification" {
            let op = v["vnfLcmOpOccId"].as_str().unwrap();
            assert_eq!(
                v["_links"]["vnfLcmOpOcc"]["href"],
                format!("/vnflcm/v2/vnf_lcm_op_occs/{op}")
            );
        }
        // A result lists the VNFCs the operation changed: the instantiate added every VNFC,
        // the heal re-created the alerted one, the terminate removed them all.
        let changes = |want: &str| -> Vec<String> {
            v["affectedVnfcs"]
                .as_array()
                .unwrap_or_else(|| panic!("no affectedVnfcs in {v}"))
                .iter()
                .map(|a| {
                    assert_eq!(a["changeType"], want, "{v}");
                    a["id"].as_str().unwrap().to_owned()
                })
                .collect()
        };
        if i == 3 {
            assert!(changes("ADDED").len() >= 3, "{v}");
        }
        if i == 6 {
            assert_eq!(changes("MODIFIED"), vec![vnfc.clone()], "{v}");
        }
        if i == 9 {
            assert!(changes("REMOVED").len() >= 3, "{v}");
        }
        if [1, 2, 4, 5, 7, 8].contains(&i) {
            assert!(v.get("affectedVnfcs").is_none(), "a START has none: {v}");
        }
        if i == 6 {
            assert_eq!(v["isAutomaticInvocation"], true, "{v}");
        }
    }
    assert_eq!(
        n.tokens.load(Ordering::SeqCst),
        2,
        "one token for the callback test, one fetched once and kept by the deliveries"
    );
    assert_eq!(n.refused.load(Ordering::SeqCst), 0);
    // Settled: nothing more comes (every operation is over and every delivery counted).
    let m = metric_reaches(
        addr,
        "vnfm_lcm_notifications_total{outcome=\"delivered\"}",
        want.len() as u64,
    )
    .await;
    assert_eq!(
        metric(&m, "vnfm_lcm_notifications_total{outcome=\"queued\"}"),
        want.len() as u64,
        "{m}"
    );
    assert_eq!(
        metric(&m, "vnfm_lcm_notifications_total{outcome=\"failed\"}"),
        0,
        "{m}"
    );
    assert_eq!(metric(&m, "vnfm_lcm_subscriptions"), 2, "{m}");
    assert!(other.got.lock().unwrap().is_empty());
    assert_eq!(received(&n), want);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_subscriber_that_is_down_gets_its_notifications_once_back_and_a_bound_drops_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.notifications.retry_initial_ms = 20;
    c.notifications.retry_max_delay_ms = 80;
    c.notifications.max_attempts = 1000;
    let server = start(c).await;
    let addr = server.local_addr();
    let (n, cb) = nfvo().await;
    let r = subscribe(
        addr,
        &json!({"callbackUri": format!("http://{cb}/cb"), "filter": filter()}),
    )
    .await;
    assert_eq!(r.status, 201);
    n.down.store(true, Ordering::SeqCst);
    let id = instantiated(addr).await;
    // Retried with back-off while down, nothing delivered.
    eventually(30, "retries", || async {
        let m = metrics(addr).await;
        (metric(&m, "vnfm_lcm_notifications_total{outcome=\"retried\"}") >= 3).then_some(())
    })
    .await;
    assert!(n.got.lock().unwrap().is_empty());
    n.down.store(false, Ordering::SeqCst);
    let mut want: Vec<String> = flow(RUN, &[], &[])[..4].to_vec();
    let mut got = eventually(
        30,
        "the notifications after the subscriber came back",
        || async {
            let g = received(&n);
            (g.len() >= want.len()).then_some(g)
        },
    )
    .await;
    // Each one it refused (503) was retried on its own back-off: all of them, each once, in
    // the order their retries came (docs/serve.md: order is kept for first attempts).
    got.sort();
    want.sort();
    assert_eq!(got, want);
    metric_reaches(
        addr,
        "vnfm_lcm_notifications_total{outcome=\"delivered\"}",
        4,
    )
    .await;
    server.shutdown().await.unwrap();

    // max_attempts = 2: a subscriber down for good loses them, counted and logged, and the
    // outbox does not grow.
    let mut c = config(dir.path(), 1);
    c.notifications.retry_initial_ms = 10;
    c.notifications.retry_max_delay_ms = 10;
    c.notifications.max_attempts = 2;
    let server = start(c).await;
    let addr = server.local_addr();
    n.down.store(true, Ordering::SeqCst);
    terminate_and_delete(addr, &id).await;
    // TERMINATE is 3 states, and the deletion.
    let m = metric_reaches(addr, "vnfm_lcm_notifications_total{outcome=\"failed\"}", 4).await;
    assert_eq!(
        metric(&m, "vnfm_lcm_notifications_total{outcome=\"retried\"}"),
        4,
        "{m}"
    );
    assert_eq!(
        metric(&m, "vnfm_lcm_notifications_total{outcome=\"delivered\"}"),
        0,
        "{m}"
    );
    assert_eq!(received(&n).len(), 4, "nothing more arrived");
    server.shutdown().await.unwrap();
    let store = vnfm_cli::store::SqliteStore::open(dir.path().join("state.sqlite")).unwrap();
    assert!(store
        .documents_with_prefix("lcm_outbox:")
        .await
        .unwrap()
        .is_empty());
}

/// `vnfm serve` as a process on the state file of `dir`; returns it and its address.
#[cfg(unix)]
fn serve_process(dir: &std::path::Path) -> (ServeProcess, SocketAddr) {
    let config = dir.join("vnfm.toml");
    std::fs::write(
        &config,
        format!(
            "[placement]\nreselect_zones = true\nfallback_best_effort = true\n\
             [prometheus_plugin]\nauto_healing = true\ntimer_interval = 1\n\
             basic_auth_user = \"{}\"\nbasic_auth_password = \"{}\"\n\
             [notifications]\nretry_initial_ms = 20\nretry_max_delay_ms = 100\n\
             allow = [\"127.0.0.0/8\"]\n",
            BASIC.0, BASIC.1
        ),
    )
    .unwrap();
    let mut cmd = serve_command(&config, None);
    cmd.args(["--listen", "127.0.0.1:0", "--state"])
        .arg(dir.join("state.sqlite"));
    let server = ServeProcess::start(cmd);
    let addr = server.addr;
    (server, addr)
}

/// Issue 16, acceptance 2: `vnfm serve` killed (SIGKILL) with an instantiate's notifications
/// in its outbox (the NFVO down), and again right after a heal: after each restart the NFVO
/// gets every notification, in order, none lost and none made twice. Delivery is at least once
/// (docs/serve.md, "Guarantees"): a notification the NFVO accepted just before a kill, before
/// vnfm removed it from the outbox, comes again with the same `id`, which tells the NFVO it is
/// the same one. Deliveries go one at a time, so that can be the one delivery on its way at
/// each kill: at the first, one of the instantiate's notifications the NFVO was refusing (each
/// is set aside on its own back-off since issue 26, so it may be any of them; a request the
/// NFVO handles after it came back up, from a server already gone); at the second, one of the
/// heal's. The test allows exactly these, each once.
#[cfg(unix)]
#[tokio::test]
async fn notifications_are_neither_lost_nor_repeated_under_another_id_when_vnfm_serve_is_killed_and_restarted(
) {
    let dir = tempfile::tempdir().unwrap();
    let (n, cb) = nfvo().await;
    let (child, addr) = serve_process(dir.path());
    let r = subscribe(
        addr,
        &json!({"callbackUri": format!("http://{cb}/cb"), "filter": filter()}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    // The NFVO is down: the instantiate's notifications wait in the outbox when vnfm serve
    // is killed.
    n.down.store(true, Ordering::SeqCst);
    let id = instantiated(addr).await;
    eventually(30, "a refused delivery", || async {
        (n.refused.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    child.kill(); // SIGKILL
    assert!(n.got.lock().unwrap().is_empty());

    n.down.store(false, Ordering::SeqCst);
    let (child, addr) = serve_process(dir.path());
    let first = flow(RUN, &[], &[])[..4].to_vec();
    let got = eventually(
        30,
        "the instantiate's notifications after the restart",
        || async {
            let (g, _) = received_by_id(&n);
            (g.len() >= first.len()).then_some(g)
        },
    )
    .await;
    // The NFVO refused them (503) one by one, each set aside (docs/serve.md, "Order"): the one
    // on its way at the kill, which the NFVO took once up, may be any of them and come first.
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(got), sorted(first.clone()));
    let vnfc = servers(addr, &id).await.keys().next().unwrap().clone();
    heal_by_alert(addr, &id, &vnfc).await;
    // Killed again right after the heal: its notifications are delivered or in the outbox, or
    // one is on its way (see above).
    child.kill();
    let (child, addr) = serve_process(dir.path());
    terminate_and_delete(addr, &id).await;
    let want = flow(RUN, RUN, RUN);
    let got = eventually(30, "every notification", || async {
        let (g, _) = received_by_id(&n);
        (g.len() >= want.len()).then_some(g)
    })
    .await;
    assert_eq!(sorted(got[..4].to_vec()), sorted(first));
    assert_eq!(got[4..], want[4..]);
    let (_, repeated) = received_by_id(&n);
    let at_first_kill = repeated
        .iter()
        .filter(|(s, _)| s == "VnfIdentifierCreationNotification" || s.starts_with("INSTANTIATE "))
        .count();
    let at_second_kill = repeated
        .iter()
        .filter(|(s, _)| s.starts_with("HEAL "))
        .count();
    assert!(
        at_first_kill <= 1
            && at_second_kill <= 1
            && at_first_kill + at_second_kill == repeated.len(),
        "only the delivery on its way at each kill may come again, once: {repeated:?}"
    );
    metric_reaches(addr, "vnfm_lcm_notifications_total{outcome=\"queued\"}", 4).await;
    let store = vnfm_cli::store::SqliteStore::open(dir.path().join("state.sqlite")).unwrap();
    eventually(30, "an empty outbox", || async {
        store
            .documents_with_prefix("lcm_outbox:")
            .await
            .unwrap()
            .is_empty()
            .then_some(())
    })
    .await;
    assert_eq!(received_by_id(&n), (got, repeated), "nothing more arrived");
    child.kill();
}

/// Issue 26 (High 5): LCM subscriptions were capped by count, not size (50 subscriptions with a
/// 1 MB `vnfInstanceIds` filter each held 184 MB, and every `GET /subscriptions` copied them
/// all). A subscription beyond a size bound is now refused with a 422 naming the member and the
/// `[notifications]` key; the list pages through the subscriptions without copying them.
#[tokio::test]
async fn subscriptions_capped_by_count_not_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.server.page_size = 2;
    let server = start(c).await;
    let addr = server.local_addr();
    let (_n, cb) = nfvo().await;
    let uri = format!("http://{cb}/cb");
    let ids = |n: usize| -> Vec<String> { (0..n).map(|i| format!("inst-{i}")).collect() };

    // 300 instance ids: more than max_filter_values (256).
    let p = subscribe(
        addr,
        &json!({"callbackUri": uri,
            "filter": {"vnfInstanceSubscriptionFilter": {"vnfInstanceIds": ids(300)}}}),
    )
    .await
    .problem(422);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("filter.vnfInstanceSubscriptionFilter.vnfInstanceIds")
            && d.contains("300 values")
            && d.contains("[notifications] max_filter_values = 256"),
        "{d}"
    );
    // One long name: more than max_value_length (2048).
    let p = subscribe(
        addr,
        &json!({"callbackUri": uri,
            "filter": {"vnfInstanceSubscriptionFilter": {"vnfInstanceNames": ["n".repeat(5000)]}}}),
    )
    .await
    .problem(422);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("filter.vnfInstanceSubscriptionFilter.vnfInstanceNames[0]")
            && d.contains("[notifications] max_value_length = 2048"),
        "{d}"
    );
    // Every list and string within its bound, the whole beyond max_subscription_bytes.
    let long = |p: &str| -> Vec<String> {
        (0..250)
            .map(|i| format!("{p}-{i}-{}", "x".repeat(100)))
            .collect()
    };
    let p = subscribe(
        addr,
        &json!({"callbackUri": uri, "filter": {"vnfInstanceSubscriptionFilter": {
            "vnfInstanceIds": long("i"), "vnfdIds": long("d")}}}),
    )
    .await
    .problem(422);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("[notifications] max_subscription_bytes = 32768"),
        "{d}"
    );
    // Nothing was kept of the refused ones.
    assert!(get(addr, "/vnflcm/v2/subscriptions")
        .await
        .json()
        .as_array()
        .unwrap()
        .is_empty());

    // Five within the bounds (256 ids each), listed page by page (page_size 2), filtered.
    let mut made = Vec::new();
    for k in 0..5 {
        let r = subscribe(
            addr,
            &json!({"callbackUri": uri, "filter": {"vnfInstanceSubscriptionFilter": {
                "vnfInstanceIds": ids(256), "vnfInstanceNames": [format!("sub-{k}")]}}}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        made.push(r.json()["id"].as_str().unwrap().to_owned());
    }
    made.sort();
    let mut seen = Vec::new();
    let mut path = "/vnflcm/v2/subscriptions?fields=filter".to_owned();
    loop {
        let r = get(addr, &path).await;
        assert_eq!(r.status, 200);
        let page = r.json();
        let page = page.as_array().unwrap();
        assert!(page.len() <= 2, "{page:?}");
        for s in page {
            assert_eq!(
                s["filter"]["vnfInstanceSubscriptionFilter"]["vnfInstanceIds"]
                    .as_array()
                    .unwrap()
                    .len(),
                256
            );
            seen.push(s["id"].as_str().unwrap().to_owned());
        }
        match r.header("link") {
            Some(l) => {
                path = l
                    .trim_start_matches('<')
                    .split_once('>')
                    .unwrap()
                    .0
                    .to_owned();
            }
            None => break,
        }
    }
    assert_eq!(seen, made);
    let q = "(eq,filter/vnfInstanceSubscriptionFilter/vnfInstanceNames,sub-3)"
        .replace('(', "%28")
        .replace(')', "%29")
        .replace(',', "%2C");
    let list = get(addr, &format!("/vnflcm/v2/subscriptions?filter={q}"))
        .await
        .json();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["id"], made[3].as_str());
    server.shutdown().await.unwrap();
}

/// Issue 26 (SOL003): one notification the NFVO answered 404 (or 5xx) held back every later
/// one of the subscription for its whole retry schedule (the ETSI harness hid it with filters).
/// Now only that notification waits: here the NFVO refuses every STARTING, retried only after a
/// minute, and gets the rest of the instantiate and of a modification at once.
#[tokio::test]
async fn one_refused_notification_holds_back_every_later_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.notifications.retry_initial_ms = 60_000;
    c.notifications.retry_max_delay_ms = 60_000;
    let server = start(c).await;
    let addr = server.local_addr();
    let (n, cb) = nfvo().await;
    *n.refuse_state.lock().unwrap() = Some("STARTING".into());
    let r = subscribe(addr, &json!({"callbackUri": format!("http://{cb}/cb")})).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let id = instantiated(addr).await;
    let want = [
        "VnfIdentifierCreationNotification",
        "INSTANTIATE PROCESSING START",
        "INSTANTIATE COMPLETED RESULT",
        "MODIFY_INFO PROCESSING START",
        "MODIFY_INFO COMPLETED RESULT",
    ];
    let got = eventually(20, "the notifications after the refused ones", || async {
        let g = received(&n);
        (g.len() >= want.len()).then_some(g)
    })
    .await;
    // Their first attempts go in commit order.
    assert_eq!(got, want);
    assert_eq!(n.refused.load(Ordering::SeqCst), 2, "each STARTING once");
    let m = metric_reaches(
        addr,
        "vnfm_lcm_notifications_total{outcome=\"delivered\"}",
        5,
    )
    .await;
    assert_eq!(
        metric(&m, "vnfm_lcm_notifications_total{outcome=\"retried\"}"),
        2,
        "{m}"
    );
    assert_eq!(metric(&m, "vnfm_lcm_outbox_notifications"), 2, "{m}");
    // Still refused, they stay queued on their own back-off; the next operation is not held.
    terminate_and_delete(addr, &id).await;
    let got = eventually(20, "the terminate's notifications", || async {
        let g = received(&n);
        (g.len() >= want.len() + 3).then_some(g)
    })
    .await;
    assert_eq!(
        got[want.len()..],
        [
            "TERMINATE PROCESSING START",
            "TERMINATE COMPLETED RESULT",
            "VnfIdentifierDeletionNotification"
        ]
    );
    server.shutdown().await.unwrap();
}

/// Issue 26 (Medium): a down subscriber's outbox grew without bound (300 state changes, 294
/// queued; the worker read the whole queue at once). Now `[notifications] max_outbox_entries`
/// bounds it: the oldest go as new ones come, counted by reason, and the subscriber, back,
/// gets the newest.
#[tokio::test]
async fn a_down_subscribers_outbox_grows_without_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.notifications.retry_initial_ms = 50;
    c.notifications.retry_max_delay_ms = 200;
    c.notifications.max_attempts = 10_000;
    c.notifications.max_outbox_entries = 5;
    let server = start(c).await;
    let addr = server.local_addr();
    let (n, cb) = nfvo().await;
    let r = subscribe(addr, &json!({"callbackUri": format!("http://{cb}/cb")})).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    n.down.store(true, Ordering::SeqCst);
    // 1 creation + 3 instantiate + 3 modifications x 3 states = 13 notifications.
    let id = instantiated(addr).await;
    for k in 0..2 {
        configure(addr, &id, json!({"k": k})).await;
    }
    let m = metric_reaches(
        addr,
        "vnfm_lcm_notifications_dropped_total{reason=\"outbox_full\"}",
        8,
    )
    .await;
    assert_eq!(metric(&m, "vnfm_lcm_outbox_notifications"), 5, "{m}");
    assert_eq!(
        metric(&m, "vnfm_lcm_notifications_total{outcome=\"queued\"}"),
        13,
        "{m}"
    );
    let store = vnfm_cli::store::SqliteStore::open(dir.path().join("state.sqlite")).unwrap();
    assert_eq!(
        store
            .documents_with_prefix("lcm_outbox:")
            .await
            .unwrap()
            .len(),
        5
    );
    n.down.store(false, Ordering::SeqCst);
    let got = eventually(20, "the newest notifications", || async {
        let g = received(&n);
        (g.len() >= 5).then_some(g)
    })
    .await;
    let mut got = got;
    got.sort();
    let mut want = vec![
        "MODIFY_INFO PROCESSING START",
        "MODIFY_INFO COMPLETED RESULT",
        "MODIFY_INFO STARTING START",
        "MODIFY_INFO PROCESSING START",
        "MODIFY_INFO COMPLETED RESULT",
    ];
    want.sort();
    assert_eq!(got, want);
    let m = metric_reaches(
        addr,
        "vnfm_lcm_notifications_total{outcome=\"delivered\"}",
        5,
    )
    .await;
    assert_eq!(metric(&m, "vnfm_lcm_outbox_notifications"), 0, "{m}");
    assert_eq!(metric(&m, "vnfm_lcm_outbox_bytes"), 0, "{m}");
    server.shutdown().await.unwrap();
}

/// Issue 26 (Low): with 1,000 subscribers a terminate took 4 s instead of 0.1 s. The delivery
/// workers read and removed their notifications on the store's one connection, a call per
/// read and a transaction per delivered notification, thousands for one state change; each
/// call held a thread of the blocking pool while it waited for the connection. The terminate's
/// commits queued behind them, and so did a request's read, holding the gate a commit needs.
/// Now the workers have a connection of their own, a connection takes one thread of the pool
/// at a time, and the removals of every worker are grouped into few transactions.
///
/// Asserted on what the operation's connection (`main`) does, not on time: with a thousand
/// subscribers the terminate makes the same write transactions there as without any (each
/// state change writes its thousand notifications in its own one commit), and none of the
/// deliveries' reads and removals (at least one read per delivered notification). The times
/// are printed for information.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminate_with_a_thousand_subscribers_waits_for_none_of_their_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.notifications.max_subscriptions = 2000;
    let server = start(c).await;
    let addr = server.local_addr();
    let (n, cb) = nfvo().await;
    // What each connection did since `before`.
    let calls = |before: &str, after: &str, connection: &str, kind: &str| {
        let series =
            format!("vnfm_state_calls_total{{connection=\"{connection}\",kind=\"{kind}\"}}");
        metric(after, &series) - metric(before, &series)
    };
    // The metrics once no operation runs (its last write, the simulated cloud, is done): a
    // gauge, waited for until it is 0 (an operation's COMPLETED is visible before its task
    // has made that last write).
    let idle = || {
        eventually(30, "no operation running", move || async move {
            let m = metrics(addr).await;
            (metric(&m, "vnfm_lcm_operations_running") == 0).then_some(m)
        })
    };
    // A terminate: its time, and the metrics before and after it.
    let terminate = |id: String| async move {
        let before = idle().await;
        let t = std::time::Instant::now();
        let r = post_json(
            addr,
            &format!("/vnflcm/v2/vnf_instances/{id}/terminate"),
            &json!({"terminationType": "FORCEFUL"}),
        )
        .await;
        assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
        let op = wait_op(addr, r.header("location").unwrap()).await;
        assert_eq!(op["operationState"], "COMPLETED", "{op}");
        (t.elapsed(), before)
    };
    let id = instantiated(addr).await;
    let (alone, before) = terminate(id).await;
    let after = idle().await;
    let writes_alone = calls(&before, &after, "main", "write");
    // STARTING, PROCESSING, COMPLETED at least: the series counts.
    assert!(writes_alone >= 3, "{after}");

    let id = instantiated(addr).await;
    const SUBS: u64 = 1000;
    for k in 0..SUBS {
        let r = subscribe(
            addr,
            &json!({"callbackUri": format!("http://{cb}/cb?k={k}"),
                "filter": {"operationTypes": ["TERMINATE"]}}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    let (crowded, before) = terminate(id).await;
    eventually(60, "every notification", || async {
        (n.got.lock().unwrap().len() as u64 >= 3 * SUBS).then_some(())
    })
    .await;
    metric_reaches(
        addr,
        "vnfm_lcm_notifications_total{outcome=\"delivered\"}",
        3 * SUBS,
    )
    .await;
    metric_reaches(addr, "vnfm_lcm_outbox_notifications", 0).await;
    let after = idle().await;
    let main = (
        calls(&before, &after, "main", "read"),
        calls(&before, &after, "main", "write"),
    );
    let deliveries = (
        calls(&before, &after, "notifications", "read"),
        calls(&before, &after, "notifications", "write"),
    );
    eprintln!(
        "terminate: {alone:?} alone, {crowded:?} with {SUBS} subscribers (for information); \
         state calls (reads, writes): main {main:?} ({writes_alone} writes alone), \
         notifications {deliveries:?} for {} notifications",
        3 * SUBS
    );
    assert_eq!(
        main.1, writes_alone,
        "the terminate's write transactions with {SUBS} subscribers, without any"
    );
    assert!(
        main.0 < SUBS,
        "{} reads on the operations' connection: the deliveries' reads are there",
        main.0
    );
    assert!(
        deliveries.0 >= SUBS && deliveries.1 >= 1,
        "the deliveries read and removed on their own connection: {deliveries:?}"
    );
    server.shutdown().await.unwrap();
}
