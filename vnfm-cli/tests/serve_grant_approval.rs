//! Asynchronous grants of `vnfm serve` as an NFVO (`[server.grants] approve`), through real
//! sockets on a virtual clock: a gated grant request of an OAuth 2.0 client marked
//! `asynchronous` is answered 202 and waits for an operator (`/admin/grants/...`); its `GET`
//! answers 202 with an empty body while it waits, 200 with the Grant once approved (placed at
//! approval), 403 ProblemDetails naming who rejected it and why, or its expiry; it survives a
//! restart; the waiting grants are bounded. Every other request is decided at once (201).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};
use serve_common::*;
use vnfm_cli::config::{Config, OAuth2Client, Secret};
use vnfm_core::driver::VirtualClock;
use vnfm_core::grant::GrantedLcmOperationType;

const GRANTS: &str = "/grant/v1/grants";
const KEY: &str = "a-signing-key-shared-by-replicas-0123456789";
const LIFETIME: u64 = 600;

fn config(dir: &std::path::Path, max_pending: usize) -> Config {
    let mut c = serve_common::config(dir, 1);
    c.server.api_token = Some(Secret::new(BEARER));
    c.server.oauth2.clients = vec![
        OAuth2Client {
            id: "nfvo-async".into(),
            secret: Some(Secret::new("async-secret")),
            tls_client_auth_subject_dn: None,
            asynchronous: true,
        },
        OAuth2Client {
            id: "tacker".into(),
            secret: Some(Secret::new("tacker-secret")),
            tls_client_auth_subject_dn: None,
            asynchronous: false,
        },
    ];
    c.server.oauth2.signing_key = Some(Secret::new(KEY));
    c.server.grants.approve = vec![GrantedLcmOperationType::Instantiate];
    c.server.grants.pending_lifetime = LIFETIME;
    c.server.grants.max_pending = max_pending;
    c
}

async fn start_on(c: Config, clock: &VirtualClock) -> vnfm_cli::serve::Server {
    vnfm_cli::serve::Server::start_with_clock(c, true, Arc::new(clock.clone()))
        .await
        .unwrap()
}

fn clock() -> VirtualClock {
    VirtualClock::new("2027-01-15T08:00:00Z".parse().unwrap())
}

async fn token_of(addr: SocketAddr, id: &str, secret: &str) -> String {
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
    );
    let r = request(
        addr,
        "POST",
        "/token",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Authorization", &basic),
        ],
        b"grant_type=client_credentials",
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    format!("Bearer {}", r.json()["access_token"].as_str().unwrap())
}

fn api_token() -> String {
    format!("Bearer {BEARER}")
}

/// A GrantRequest of `operation` for `n` new VNFCs of VDU1, apart by zone (hard) when
/// `apart`.
fn grant_request(operation: &str, n: usize, apart: bool) -> Value {
    let add: Vec<Value> = (0..n)
        .map(|i| {
            json!({"id": format!("c{i}"), "type": "COMPUTE", "vduId": "VDU1",
                   "resourceTemplateId": "VDU1"})
        })
        .collect();
    let constraints = if apart {
        let refs: Vec<Value> = (0..n)
            .map(|i| json!({"idType": "GRANT", "resourceId": format!("c{i}")}))
            .collect();
        json!([{"affinityOrAntiAffinity": "ANTI_AFFINITY", "scope": "ZONE",
                "resource": refs, "fallbackBestEffort": false}])
    } else {
        json!([])
    };
    json!({
        "vnfInstanceId": "other-vnfm-instance-1",
        "vnfLcmOpOccId": "other-vnfm-op-1",
        "vnfdId": DEMO_VNFD,
        "flavourId": "default",
        "operation": operation,
        "isAutomaticInvocation": false,
        "addResources": add,
        "placementConstraints": constraints,
        "_links": {
            "vnfLcmOpOcc": {"href": "http://other-vnfm/vnflcm/v2/vnf_lcm_op_occs/other-vnfm-op-1"},
            "vnfInstance": {"href": "http://other-vnfm/vnflcm/v2/vnf_instances/other-vnfm-instance-1"}
        }
    })
}

async fn post_grant(addr: SocketAddr, auth: &str, body: &Value) -> Reply {
    request(
        addr,
        "POST",
        GRANTS,
        &[
            ("Content-Type", "application/json"),
            ("Authorization", auth),
        ],
        &serde_json::to_vec(body).unwrap(),
    )
    .await
}

async fn get_grant(addr: SocketAddr, auth: &str, location: &str) -> Reply {
    request(addr, "GET", location, &[("Authorization", auth)], b"").await
}

/// `POST /admin/grants/{id}/{verb}` with the api_token.
async fn admin(addr: SocketAddr, id: &str, verb: &str, body: &Value) -> Reply {
    let a = api_token();
    request(
        addr,
        "POST",
        &format!("/admin/grants/{id}/{verb}"),
        &[("Content-Type", "application/json"), ("Authorization", &a)],
        &serde_json::to_vec(body).unwrap(),
    )
    .await
}

/// Posts a gated request as the asynchronous client: 202, `Location`, an empty body; returns
/// the grant's id and location.
async fn accepted(addr: SocketAddr, token: &str, body: &Value) -> (String, String) {
    let r = post_grant(addr, token, body).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    assert!(
        r.body.is_empty(),
        "a 202 has an empty body (SOL003 9.4.2.3.1)"
    );
    assert_eq!(r.header("version"), Some("1.4.0"));
    let location = r.header("location").unwrap().to_owned();
    let id = location.rsplit('/').next().unwrap().to_owned();
    assert_eq!(location, format!("{GRANTS}/{id}"));
    (id, location)
}

async fn assert_processing(addr: SocketAddr, auth: &str, location: &str) {
    let r = get_grant(addr, auth, location).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    assert!(
        r.body.is_empty(),
        "SOL003 9.4.3.3.2: the body of a 202 shall be empty"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_answers_202_for_a_gated_grant_of_an_asynchronous_client_and_201_for_others() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let server = start_on(config(dir.path(), 10), &clock).await;
    let addr = server.local_addr();
    let async_token = token_of(addr, "nfvo-async", "async-secret").await;
    let sync_token = token_of(addr, "tacker", "tacker-secret").await;

    let (_id, location) =
        accepted(addr, &async_token, &grant_request("INSTANTIATE", 2, false)).await;
    assert_processing(addr, &async_token, &location).await;
    // Any client of the Grant API reads it the same way.
    assert_processing(addr, &api_token(), &location).await;

    // A synchronous client (Tacker accepts only 201), the api_token, not gated (SCALE, of the
    // instance instantiated): 201.
    for (auth, op) in [
        (&sync_token, "INSTANTIATE"),
        (&api_token(), "INSTANTIATE"),
        (&async_token, "SCALE"),
    ] {
        let r = post_grant(addr, auth, &grant_request(op, 1, false)).await;
        assert_eq!(r.status, 201, "{op}: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["addResources"].as_array().unwrap().len(), 1);
    }

    // A request that breaks SOL003's rules is refused at once, not kept waiting: a COMPUTE
    // resource without vduId whose resourceTemplateId is no VDU of the package's flavour (a
    // missing vduId alone is Tacker's way: the resourceTemplateId is the VDU).
    let mut bad = grant_request("INSTANTIATE", 1, false);
    bad["addResources"][0]
        .as_object_mut()
        .unwrap()
        .remove("vduId");
    bad["vnfInstanceId"] = json!("other-vnfm-instance-2");
    bad["addResources"][0]["resourceTemplateId"] = json!("NO-SUCH-VDU");
    let p = post_grant(addr, &async_token, &bad).await.problem(422);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("addResources[0].vduId"),
        "{p}"
    );

    // The operator's listing: the one that waits.
    let a = api_token();
    let r = request(addr, "GET", "/admin/grants", &[("Authorization", &a)], b"").await;
    assert_eq!(r.status, 200);
    let listed = r.json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["operation"], "INSTANTIATE");
    assert_eq!(listed[0]["client"], "nfvo-async");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_places_the_grant_then_get_answers_200_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let server = start_on(config(dir.path(), 10), &clock).await;
    let addr = server.local_addr();
    let token = token_of(addr, "nfvo-async", "async-secret").await;
    let (id, location) = accepted(addr, &token, &grant_request("INSTANTIATE", 3, true)).await;

    // An OAuth client cannot approve its own grant: the admin routes take the api_token alone.
    let r = request(
        addr,
        "POST",
        &format!("/admin/grants/{id}/approve"),
        &[("Authorization", &token)],
        b"",
    )
    .await;
    r.problem(401);
    assert_processing(addr, &token, &location).await;

    clock.advance(Duration::from_secs(30));
    let r = admin(addr, &id, "approve", &json!({"by": "alice"})).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let record = r.json();
    assert_eq!(record["state"], "APPROVED", "{record}");
    assert_eq!(record["by"], "alice");

    let r = get_grant(addr, &token, &location).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let g = r.json();
    assert_eq!(g["id"], id.as_str());
    assert_eq!(g["_links"]["self"]["href"], location.as_str());
    assert_eq!(g["vnfLcmOpOccId"], "other-vnfm-op-1");
    // Placed at approval under the request's hard anti-affinity: three zones.
    let zones: std::collections::BTreeSet<&str> = g["addResources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["zoneId"].as_str().unwrap())
        .collect();
    assert_eq!(zones.len(), 3, "{g}");
    assert_eq!(record["grant"], g);

    // Decided: another approval or a rejection is refused, naming how it ended.
    let p = admin(addr, &id, "approve", &json!({})).await.problem(409);
    assert!(
        p["detail"].as_str().unwrap().contains("approved by alice"),
        "{p}"
    );
    admin(addr, &id, "reject", &json!({"reason": "too late"}))
        .await
        .problem(409);
    // A grant decided at once has nothing to approve; an unknown one is 404.
    let r = post_grant(addr, &api_token(), &grant_request("INSTANTIATE", 1, false)).await;
    let sync_id = r.json()["id"].as_str().unwrap().to_owned();
    admin(addr, &sync_id, "approve", &json!({}))
        .await
        .problem(409);
    admin(addr, "nfvo-grant-9999", "approve", &json!({}))
        .await
        .problem(404);
    server.shutdown().await.unwrap();
}

/// Issue 29 (acceptance 6): the instance and the package are checked when a grant that waits
/// is requested (an unknown vnfdId: 422, nothing kept) and again when it is approved (the
/// instance was instantiated meanwhile: the approval ends it rejected, naming vnfInstanceId).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_grant_is_checked_when_requested_and_again_when_approved() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let server = start_on(config(dir.path(), 10), &clock).await;
    let addr = server.local_addr();
    let token = token_of(addr, "nfvo-async", "async-secret").await;
    let mut unknown = grant_request("INSTANTIATE", 1, false);
    unknown["vnfdId"] = json!("myVnF");
    let p = post_grant(addr, &token, &unknown).await.problem(422);
    let d = p["detail"].as_str().unwrap();
    assert!(d.contains("vnfdId") && d.contains("\"myVnF\""), "{p}");
    let a = api_token();
    let r = request(addr, "GET", "/admin/grants", &[("Authorization", &a)], b"").await;
    assert_eq!(r.json(), json!([]), "nothing kept");

    let (id, location) = accepted(addr, &token, &grant_request("INSTANTIATE", 1, false)).await;
    // Meanwhile the instance is instantiated and scaled (granted at once).
    let r = post_grant(addr, &api_token(), &grant_request("INSTANTIATE", 1, false)).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let mut scale = grant_request("SCALE", 1, false);
    scale["vnfLcmOpOccId"] = json!("other-vnfm-op-2");
    let r = post_grant(addr, &api_token(), &scale).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let r = admin(addr, &id, "approve", &json!({"by": "alice"})).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["state"], "REJECTED");
    let p = get_grant(addr, &token, &location).await.problem(403);
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("vnfInstanceId") && detail.contains("already instantiated"),
        "{detail}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_answers_403_problem_details_naming_who_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let server = start_on(config(dir.path(), 10), &clock).await;
    let addr = server.local_addr();
    let token = token_of(addr, "nfvo-async", "async-secret").await;
    let (id, location) = accepted(addr, &token, &grant_request("INSTANTIATE", 1, false)).await;

    // A rejection says why.
    let p = admin(addr, &id, "reject", &json!({})).await.problem(422);
    assert!(p["detail"].as_str().unwrap().contains("reason"), "{p}");
    let long = "x".repeat(2000);
    let p = admin(addr, &id, "reject", &json!({"reason": long}))
        .await
        .problem(422);
    assert!(
        p["detail"].as_str().unwrap().contains("at most 1024"),
        "{p}"
    );
    let p = admin(addr, &id, "reject", &json!({"reson": "typo"}))
        .await
        .problem(400);
    assert!(p["detail"].as_str().unwrap().contains("reson"), "{p}");
    assert_processing(addr, &token, &location).await;

    let r = admin(
        addr,
        &id,
        "reject",
        &json!({"by": "bob", "reason": "the site is in a maintenance window"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let p = get_grant(addr, &token, &location).await.problem(403);
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("rejected by bob: the site is in a maintenance window"),
        "{detail}"
    );
    admin(addr, &id, "approve", &json!({})).await.problem(409);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_whose_placement_fails_is_rejected_with_the_placement_reason() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let server = start_on(config(dir.path(), 10), &clock).await;
    let addr = server.local_addr();
    let token = token_of(addr, "nfvo-async", "async-secret").await;
    // Five VNFCs apart by zone, no fallback: the demo cloud's four zones cannot hold them.
    let (id, location) = accepted(addr, &token, &grant_request("INSTANTIATE", 5, true)).await;
    let r = admin(addr, &id, "approve", &json!({"by": "alice"})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["state"], "REJECTED");
    let p = get_grant(addr, &token, &location).await.problem(403);
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("approved by alice, but not granted"),
        "{detail}"
    );
    assert!(detail.contains("placementConstraints[0]"), "{detail}");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_pending_grant_is_403_with_the_expiry_reason() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let server = start_on(config(dir.path(), 10), &clock).await;
    let addr = server.local_addr();
    let token = token_of(addr, "nfvo-async", "async-secret").await;
    let (id, location) = accepted(addr, &token, &grant_request("INSTANTIATE", 1, false)).await;

    clock.advance(Duration::from_secs(LIFETIME - 1));
    assert_processing(addr, &token, &location).await;
    clock.advance(Duration::from_secs(1));
    let p = get_grant(addr, &api_token(), &location).await.problem(403);
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("not approved by an operator within 600 s of the request"),
        "{detail}"
    );
    let p = admin(addr, &id, "approve", &json!({})).await.problem(409);
    assert!(p["detail"].as_str().unwrap().contains("expired"), "{p}");
    // The answer stays the same once the expiry is stored.
    let again = get_grant(addr, &api_token(), &location).await.problem(403);
    assert!(
        again["detail"].as_str().unwrap().contains("within 600 s"),
        "{again}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_grant_survives_a_restart_and_is_approved_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let server = start_on(config(dir.path(), 10), &clock).await;
    let addr = server.local_addr();
    let token = token_of(addr, "nfvo-async", "async-secret").await;
    let (id, location) = accepted(addr, &token, &grant_request("INSTANTIATE", 1, false)).await;
    server.shutdown().await.unwrap();

    let server = start_on(config(dir.path(), 10), &clock).await;
    let addr = server.local_addr();
    assert_processing(addr, &api_token(), &location).await;
    let r = admin(addr, &id, "approve", &json!({})).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["by"], "the operator");
    let r = get_grant(addr, &api_token(), &location).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["id"], id.as_str());
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_grants_are_bounded_by_max_pending() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let server = start_on(config(dir.path(), 2), &clock).await;
    let addr = server.local_addr();
    let token = token_of(addr, "nfvo-async", "async-secret").await;
    let body = grant_request("INSTANTIATE", 1, false);
    let (first, _) = accepted(addr, &token, &body).await;
    accepted(addr, &token, &body).await;

    let p = post_grant(addr, &token, &body).await.problem(503);
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("2 grants already wait for an operator"),
        "{detail}"
    );
    assert!(
        detail.contains("[server.grants] max_pending = 2"),
        "{detail}"
    );
    // Synchronous requests are not held back by the bound.
    let r = post_grant(addr, &api_token(), &body).await;
    assert_eq!(r.status, 201);

    // A decision frees a place.
    admin(addr, &first, "reject", &json!({"reason": "no"})).await;
    accepted(addr, &token, &body).await;
    post_grant(addr, &token, &body).await.problem(503);
    // So does the expiry.
    clock.advance(Duration::from_secs(LIFETIME));
    let token = token_of(addr, "nfvo-async", "async-secret").await;
    accepted(addr, &token, &body).await;
    accepted(addr, &token, &body).await;
    post_grant(addr, &token, &body).await.problem(503);
    server.shutdown().await.unwrap();
}
