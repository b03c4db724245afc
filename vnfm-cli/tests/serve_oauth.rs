//! The OAuth 2.0 client-credentials token endpoint of `vnfm serve` (`POST /token`, RFC 6749
//! section 4.4, HTTP Basic client authentication as Tacker's `use_client_secret_basic =
//! True`), through real sockets on a virtual clock: a token works on the Grant API beside the
//! static `api_token`; a missing, expired, forged or other client's token is a 401
//! ProblemDetails naming the cause; the token request's own errors are RFC 6749 section 5.2's.
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

const GRANTS: &str = "/grant/v1/grants";
const KEY: &str = "a-signing-key-shared-by-replicas-0123456789";

fn client(id: &str, secret: &str) -> OAuth2Client {
    OAuth2Client {
        id: id.into(),
        secret: Some(Secret::new(secret)),
        tls_client_auth_subject_dn: None,
        asynchronous: false,
    }
}

fn config(dir: &std::path::Path, clients: Vec<OAuth2Client>) -> Config {
    let mut c = serve_common::config(dir, 1);
    c.server.api_token = Some(Secret::new(BEARER));
    c.server.oauth2.clients = clients;
    c.server.oauth2.token_lifetime = 600;
    c.server.oauth2.signing_key = Some(Secret::new(KEY));
    c
}

async fn start_on(c: Config, clock: &VirtualClock) -> vnfm_cli::serve::Server {
    vnfm_cli::serve::Server::start_with_clock(c, true, Arc::new(clock.clone()))
        .await
        .unwrap()
}

/// A server on a virtual clock with the one client `tacker` / `tacker-secret`, its folder and
/// its clock.
async fn with_tacker() -> (tempfile::TempDir, VirtualClock, vnfm_cli::serve::Server) {
    let dir = tempfile::tempdir().unwrap();
    let clock = VirtualClock::new("2027-01-15T08:00:00Z".parse().unwrap());
    let c = config(dir.path(), vec![client("tacker", "tacker-secret")]);
    let server = start_on(c, &clock).await;
    (dir, clock, server)
}

fn basic(id: &str, secret: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
    )
}

async fn token_request(addr: SocketAddr, auth: Option<&str>, ct: &str, body: &str) -> Reply {
    let mut h = vec![("Content-Type", ct)];
    if let Some(a) = auth {
        h.push(("Authorization", a));
    }
    request(addr, "POST", "/token", &h, body.as_bytes()).await
}

async fn token_of(addr: SocketAddr, id: &str, secret: &str) -> String {
    let r = token_request(
        addr,
        Some(&basic(id, secret)),
        "application/x-www-form-urlencoded",
        "grant_type=client_credentials",
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()["access_token"].as_str().unwrap().to_owned()
}

/// An RFC 6749 section 5.2 error of `status` and `error`, with no secret in it.
fn oauth_error(r: &Reply, status: u16, error: &str) -> Value {
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let v = r.json();
    assert_eq!(v["error"], error, "{v}");
    assert!(v["error_description"].is_string(), "{v}");
    let text = String::from_utf8_lossy(&r.body);
    assert!(
        !text.contains("tacker-secret") && !text.contains("wrong-secret"),
        "{text}"
    );
    v
}

fn grant_request() -> Value {
    json!({
        "vnfInstanceId": "tacker-instance-1", "vnfLcmOpOccId": "tacker-op-1",
        "vnfdId": DEMO_VNFD, "flavourId": "default", "operation": "INSTANTIATE",
        "isAutomaticInvocation": false,
        "_links": {"vnfLcmOpOcc": {"href": "http://tacker/op"},
                   "vnfInstance": {"href": "http://tacker/inst"}}
    })
}

async fn post_grant(addr: SocketAddr, auth: Option<&str>) -> Reply {
    let mut h = vec![("Content-Type", "application/json"), ("Version", "1.4.0")];
    if let Some(a) = auth {
        h.push(("Authorization", a));
    }
    let body = serde_json::to_vec(&grant_request()).unwrap();
    request(addr, "POST", GRANTS, &h, &body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_issued_to_a_client_and_accepted_on_the_grant_api_until_it_expires() {
    let (_dir, clock, server) = with_tacker().await;
    let addr = server.local_addr();

    let r = token_request(
        addr,
        Some(&basic("tacker", "tacker-secret")),
        "application/x-www-form-urlencoded",
        "grant_type=client_credentials&scope=",
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let t = r.json();
    assert_eq!(t["token_type"], "Bearer");
    assert_eq!(t["expires_in"], 600);
    let token = t["access_token"].as_str().unwrap().to_owned();
    assert!(!token.contains("tacker-secret"));

    // The token and the static api_token both work on the Grant API.
    let bearer = format!("Bearer {token}");
    let r = post_grant(addr, Some(&bearer)).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let location = r.header("location").unwrap().to_owned();
    let r = request(addr, "GET", &location, &[("Authorization", &bearer)], b"").await;
    assert_eq!(r.status, 200);
    let r = post_grant(addr, Some(&format!("Bearer {BEARER}"))).await;
    assert_eq!(r.status, 201);

    // Missing: 401 naming both ways in.
    let r = post_grant(addr, None).await;
    let p = r.problem(401);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("the Grant API requires") && d.contains("POST /token"),
        "{p}"
    );
    assert!(r.header("www-authenticate").unwrap().starts_with("Bearer"));

    // Forged: the signature of another token, or one character changed.
    let (signed, tag) = token.rsplit_once('.').unwrap();
    let mut altered = tag.as_bytes().to_vec();
    altered[0] = if altered[0] == b'A' { b'B' } else { b'A' };
    let forged = format!("Bearer {signed}.{}", String::from_utf8(altered).unwrap());
    let r = post_grant(addr, Some(&forged)).await;
    let p = r.problem(401);
    assert!(p["detail"].as_str().unwrap().contains("signature"), "{p}");
    assert!(!p["detail"].as_str().unwrap().contains(signed), "{p}");
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains("invalid_token"));

    // The token does not open the LCM API: that takes the api_token alone.
    let r = request(
        addr,
        "GET",
        "/vnflcm/v2/vnf_instances",
        &[("Authorization", &bearer)],
        b"",
    )
    .await;
    r.problem(401);

    // Expired on the server's clock: 599 s still valid, 600 s not.
    clock.advance(Duration::from_secs(599));
    assert_eq!(post_grant(addr, Some(&bearer)).await.status, 201);
    clock.advance(Duration::from_secs(1));
    let p = post_grant(addr, Some(&bearer)).await.problem(401);
    assert!(p["detail"].as_str().unwrap().contains("expired"), "{p}");
    // A new token works again; the refused requests (missing, forged, expired) stored no
    // grant: this is the fourth.
    let fresh = token_of(addr, "tacker", "tacker-secret").await;
    let r = post_grant(addr, Some(&format!("Bearer {fresh}"))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["id"], "nfvo-grant-4");

    // A token signed with the shared key for a client this server does not have (a replica
    // with one more client issued it): refused, naming the cause.
    let dir2 = tempfile::tempdir().unwrap();
    let other = start_on(
        config(
            dir2.path(),
            vec![
                client("tacker", "tacker-secret"),
                client("other", "o-secret"),
            ],
        ),
        &clock,
    )
    .await;
    let from_replica = token_of(other.local_addr(), "tacker", "tacker-secret").await;
    assert_eq!(
        post_grant(addr, Some(&format!("Bearer {from_replica}")))
            .await
            .status,
        201,
        "replicas sharing the signing key accept each other's tokens"
    );
    let others = token_of(other.local_addr(), "other", "o-secret").await;
    let p = post_grant(addr, Some(&format!("Bearer {others}")))
        .await
        .problem(401);
    assert!(p["detail"].as_str().unwrap().contains("client"), "{p}");
    other.shutdown().await.unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_requests_that_fail_are_rfc_6749_errors() {
    let (_dir, clock, server) = with_tacker().await;
    let addr = server.local_addr();
    let form = "application/x-www-form-urlencoded";
    let good = basic("tacker", "tacker-secret");

    // Client authentication: a wrong secret, an unknown client, no Basic at all, the client's
    // credentials in the body instead: invalid_client, 401, WWW-Authenticate: Basic.
    for auth in [
        Some(basic("tacker", "wrong-secret")),
        Some(basic("nobody", "tacker-secret")),
        Some(format!("Bearer {BEARER}")),
        None,
    ] {
        let r = token_request(
            addr,
            auth.as_deref(),
            form,
            "grant_type=client_credentials&client_id=tacker&client_secret=tacker-secret",
        )
        .await;
        oauth_error(&r, 401, "invalid_client");
        assert!(r.header("www-authenticate").unwrap().starts_with("Basic"));
    }
    // The grant type.
    let r = token_request(addr, Some(&good), form, "grant_type=password").await;
    let v = oauth_error(&r, 400, "unsupported_grant_type");
    assert!(
        v["error_description"]
            .as_str()
            .unwrap()
            .contains("client_credentials"),
        "{v}"
    );
    oauth_error(
        &token_request(addr, Some(&good), form, "scope=x").await,
        400,
        "invalid_request",
    );
    oauth_error(
        &token_request(
            addr,
            Some(&good),
            form,
            "grant_type=client_credentials&grant_type=client_credentials",
        )
        .await,
        400,
        "invalid_request",
    );
    // No Content-Type: read as the form it is.
    let r = request(
        addr,
        "POST",
        "/token",
        &[("Authorization", &good)],
        b"grant_type=client_credentials",
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    // Not a form.
    oauth_error(
        &token_request(
            addr,
            Some(&good),
            "application/json",
            r#"{"grant_type":"client_credentials"}"#,
        )
        .await,
        400,
        "invalid_request",
    );
    server.shutdown().await.unwrap();

    // Without clients there is no token endpoint, and the Grant API is as before.
    let dir = tempfile::tempdir().unwrap();
    let server = start_on(config(dir.path(), vec![]), &clock).await;
    let addr = server.local_addr();
    let r = token_request(addr, Some(&good), form, "grant_type=client_credentials").await;
    let p = r.problem(404);
    assert!(
        p["detail"].as_str().unwrap().contains("[server.oauth2]"),
        "{p}"
    );
    let p = post_grant(addr, None).await.problem(401);
    assert_eq!(
        p["detail"],
        "the Grant API requires Authorization: Bearer <[server] api_token> \
         (or X-Auth-Token: <[server] api_token>)"
    );
    server.shutdown().await.unwrap();
}
