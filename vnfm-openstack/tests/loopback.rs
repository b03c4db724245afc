//! Mapping tests: the adapter against a loopback server replaying the recorded payloads of
//! `../shared/vectors/openstack/` (real Keystone 30 / Nova 34 / Heat 27 captures and the
//! projects' official samples). Each test skips when the vectors are absent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mock;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use vnfm_core::driver::{
    ComputeInventory, CreateStack, DriverError, ListResources, ListZones, MarkUnhealthy,
    Parameters, StackDriver, TemplateBundle, UpdateStack, ZoneCatalog,
};
use vnfm_core::id::{ServerId, StackId};
use vnfm_openstack::{
    CloudConfig, Credentials, EndpointSource, Error, ListEvents, OpenStack, RetryPolicy, Scope,
    Secret, UserRef,
};

use mock::{Mock, Reply};

const PROJECT: &str = "79af956a3f3b4af4b3028d0e610bab10";
const STACK: &str = "f00db8c3-2eed-4b7b-a809-bc8ea87811f6";
const NESTED: &str = "d786e696-d1de-4f2e-96eb-aacf87c29319";

fn vector(rel: &str) -> Option<String> {
    vnfm_core::vectors::read_vector(env!("CARGO_MANIFEST_DIR"), &format!("openstack/{rel}"))
}

fn tacker(rel: &str) -> Option<String> {
    vnfm_core::vectors::read_vector(env!("CARGO_MANIFEST_DIR"), &format!("tacker/{rel}"))
}

/// A captured payload with the real services' URLs pointed at the mock.
fn rewritten(mock: &Mock, rel: &str) -> Option<String> {
    let s = vector(rel)?;
    Some(
        s.replace("http://127.0.0.1:35357", &format!("{}/identity", mock.url))
            .replace("http://127.0.0.1:8774", &format!("{}/nova", mock.url))
            .replace("http://127.0.0.1:8004", &format!("{}/heat", mock.url))
            .replace("http://127.0.0.1:8778", &format!("{}/placement", mock.url)),
    )
}

fn in_one_hour() -> String {
    (chrono::Utc::now() + chrono::Duration::hours(1))
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// The captured 201 of `POST /v3/auth/tokens`, catalog pointed at the mock, issued now.
fn auth_reply(mock: &Mock, token: &str, expires_at: &str) -> Option<Reply> {
    let now = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    auth_reply_issued(mock, token, &now, expires_at)
}

/// The captured 201 of `POST /v3/auth/tokens`, catalog pointed at the mock, with Keystone's
/// `issued_at` and `expires_at`.
fn auth_reply_issued(mock: &Mock, token: &str, issued_at: &str, expires_at: &str) -> Option<Reply> {
    let body = rewritten(
        mock,
        "keystone/captured-keystone-30.0.0/auth-token-project-scoped-response.json",
    )?;
    let mut v: Value = serde_json::from_str(&body).unwrap();
    v["token"]["issued_at"] = Value::from(issued_at);
    v["token"]["expires_at"] = Value::from(expires_at);
    Some(Reply::json(201, v.to_string()).with_header("X-Subject-Token", token))
}

/// Without retries of transient failures: each test queues the replies it expects
/// (`transient_failures_are_retried` has its own policy).
fn config(mock: &Mock) -> CloudConfig {
    CloudConfig::password(
        format!("{}/identity/v3", mock.url),
        "admin",
        "pw-XYZZY",
        "admin",
        "Default",
    )
    .with_retry(RetryPolicy::none())
}

/// [`config`] without the free capacity of hosts: for the tests of something else (tokens,
/// retries, zone parsing) that list zones with hosts, whose catalog names Placement.
fn config_without_capacity(mock: &Mock) -> CloudConfig {
    config(mock).with_free_capacity(false)
}

/// A mock with an authentication queued, and the session.
fn session(cfg: impl FnOnce(&Mock) -> CloudConfig) -> Option<(Mock, OpenStack)> {
    let mock = Mock::start();
    mock.push(auth_reply(&mock, "tok-XYZZY-1", &in_one_hour())?);
    let cloud = OpenStack::new(cfg(&mock)).unwrap();
    Some((mock, cloud))
}

fn zone_names(zones: &[vnfm_core::zone::ComputeZone]) -> Vec<&str> {
    zones.iter().map(|z| z.name.as_str()).collect()
}

// ------------------------------------------------------------------------------- keystone

#[tokio::test]
async fn password_auth_then_token_and_catalog_are_used() {
    let Some((mock, cloud)) = session(config_without_capacity) else {
        return;
    };
    let detail =
        vector("nova/captured-nova-34.0.0/availability-zone-detail-resp.v2.1.json").unwrap();
    mock.push(Reply::json(200, detail.clone()));
    mock.push(Reply::json(200, detail));
    let nova = cloud.nova();
    let zones = nova.list_zones(ListZones::default()).await.unwrap();
    assert_eq!(zone_names(&zones), ["az1", "nova"]);
    let again = nova.list_zones(ListZones::default()).await.unwrap();
    assert_eq!(again, zones);

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3, "{reqs:#?}");
    assert_eq!(cloud.request_count(), 3);
    assert_eq!(cloud.auth_count(), 1, "the token is reused");
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path(), "/identity/v3/auth/tokens");
    let sent = reqs[0].json();
    let mut want: Value = serde_json::from_str(
        &vector("keystone/captured-keystone-30.0.0/auth-token-project-scoped-request.json")
            .unwrap(),
    )
    .unwrap();
    want["auth"]["identity"]["password"]["user"]["password"] = Value::from("pw-XYZZY");
    assert_eq!(sent, want);
    for r in &reqs[1..] {
        assert_eq!(r.method, "GET");
        assert_eq!(r.path(), "/nova/v2.1/os-availability-zone/detail");
        assert_eq!(r.header("x-auth-token"), Some("tok-XYZZY-1"));
        assert_eq!(r.header("x-openstack-nova-api-version"), Some("2.79"));
        assert_eq!(r.header("accept"), Some("application/json"));
    }
}

#[tokio::test]
async fn official_sample_bodies_for_ids() {
    let Some(want) = vector("keystone/auth-password-project-id-request.json") else {
        return;
    };
    let want: Value = serde_json::from_str(&want).unwrap();
    let mock = Mock::start();
    mock.push(auth_reply(&mock, "t", &in_one_hour()).unwrap());
    let creds = Credentials::Password {
        user: UserRef::Id("ee4dfb6e5540447cb3741905149d9b6e".into()),
        password: Secret::new("devstacker"),
        scope: Some(Scope::ProjectId("a6944d763bf64ee6a275f1263fae0352".into())),
    };
    let cloud = OpenStack::new(CloudConfig::new(format!("{}/identity", mock.url), creds)).unwrap();
    let info = cloud.token(false).await.unwrap();
    assert_eq!(info.project_id.as_deref(), Some(PROJECT));
    assert_eq!(mock.requests()[0].path(), "/identity/v3/auth/tokens");
    assert_eq!(mock.requests()[0].json(), want);
}

#[tokio::test]
async fn application_credential_body() {
    let mock = Mock::start();
    let Some(auth) = auth_reply(&mock, "t", &in_one_hour()) else {
        return;
    };
    mock.push(auth);
    let creds = Credentials::ApplicationCredential {
        id: Some("ac-1".into()),
        name: None,
        user: None,
        secret: Secret::new("s-XYZZY"),
    };
    let cloud =
        OpenStack::new(CloudConfig::new(format!("{}/identity/v3", mock.url), creds)).unwrap();
    cloud.token(false).await.unwrap();
    assert_eq!(
        mock.requests()[0].json(),
        json!({"auth": {"identity": {"methods": ["application_credential"],
               "application_credential": {"id": "ac-1", "secret": "s-XYZZY"}}}})
    );
    assert!(!format!("{cloud:?}").contains("XYZZY"), "{cloud:?}");
}

#[tokio::test]
async fn catalog_gives_project_substituted_endpoints_by_interface_and_region() {
    let Some((mock, cloud)) = session(|m| config(m).with_region("RegionOne")) else {
        return;
    };
    assert_eq!(
        cloud.endpoint("orchestration").await.unwrap(),
        format!("{}/heat/v1/{PROJECT}", mock.url)
    );
    assert_eq!(
        cloud.endpoint("compute").await.unwrap(),
        format!("{}/nova/v2.1", mock.url)
    );
    assert_eq!(mock.requests().len(), 1);

    let mock = Mock::start();
    mock.push(auth_reply(&mock, "t", &in_one_hour()).unwrap());
    let cloud = OpenStack::new(config(&mock).with_region("RegionTwo")).unwrap();
    let e = cloud.endpoint("compute").await.unwrap_err();
    assert!(matches!(e, Error::NoEndpoint { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "no public endpoint of service type \"compute\" in region RegionTwo in the token catalog"
    );
}

#[tokio::test]
async fn endpoints_api_filters_by_interface_and_region_and_substitutes() {
    let Some((mock, cloud)) = session(|m| {
        config(m)
            .with_region("RegionOne")
            .with_endpoint_source(EndpointSource::EndpointsApi)
    }) else {
        return;
    };
    mock.push(Reply::json(
        200,
        rewritten(
            &mock,
            "keystone/captured-keystone-30.0.0/services-list-response.json",
        )
        .unwrap(),
    ));
    mock.push(Reply::json(
        200,
        rewritten(
            &mock,
            "keystone/captured-keystone-30.0.0/endpoints-list-filtered-response.json",
        )
        .unwrap(),
    ));
    assert_eq!(
        cloud.endpoint("orchestration").await.unwrap(),
        format!("{}/heat/v1/{PROJECT}", mock.url)
    );
    let reqs = mock.requests();
    assert_eq!(reqs[1].target, "/identity/v3/services");
    assert_eq!(
        reqs[2].target,
        "/identity/v3/endpoints?interface=public&service_id=f1d038b25db947059e5820f10aa37701&region_id=RegionOne"
    );
    assert_eq!(reqs[2].header("x-auth-token"), Some("tok-XYZZY-1"));

    // the raw listings are available too
    mock.push(Reply::json(
        200,
        rewritten(
            &mock,
            "keystone/captured-keystone-30.0.0/endpoints-list-response.json",
        )
        .unwrap(),
    ));
    let all = cloud
        .list_endpoints(vnfm_openstack::EndpointFilter::all())
        .await
        .unwrap();
    assert_eq!(all.len(), 12);
    assert!(all.iter().any(|e| e.url.ends_with("/v1/%(project_id)s")));
}

#[tokio::test]
async fn official_endpoint_and_service_samples_parse() {
    let (Some(eps), Some(svcs)) = (
        vector("keystone/endpoints-list-response.json"),
        vector("keystone/services-list-response.json"),
    ) else {
        return;
    };
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    mock.push(Reply::json(200, svcs));
    mock.push(Reply::json(200, eps));
    let services = cloud.list_services().await.unwrap();
    assert!(services.iter().any(|s| s.service_type == "compute"));
    let endpoints = cloud
        .list_endpoints(vnfm_openstack::EndpointFilter::all().with_interface("admin"))
        .await
        .unwrap();
    assert!(!endpoints.is_empty());
    assert_eq!(
        mock.requests()[2].target,
        "/identity/v3/endpoints?interface=admin"
    );
}

#[tokio::test]
async fn token_renewed_on_401_and_request_retried_once() {
    let Some((mock, cloud)) = session(config_without_capacity) else {
        return;
    };
    let unauthorized =
        vector("keystone/captured-keystone-30.0.0/unauthorized-response.json").unwrap();
    mock.push(Reply::json(401, unauthorized.clone()));
    mock.push(auth_reply(&mock, "tok-XYZZY-2", &in_one_hour()).unwrap());
    mock.push(Reply::json(
        200,
        vector("nova/captured-nova-34.0.0/availability-zone-detail-resp.v2.1.json").unwrap(),
    ));
    let zones = cloud.nova().list_zones(ListZones::default()).await.unwrap();
    assert_eq!(zones.len(), 2);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4);
    assert_eq!(
        (reqs[1].answered, reqs[1].header("x-auth-token")),
        (401, Some("tok-XYZZY-1"))
    );
    assert_eq!(reqs[2].path(), "/identity/v3/auth/tokens");
    assert_eq!(reqs[3].header("x-auth-token"), Some("tok-XYZZY-2"));
    assert_eq!(cloud.auth_count(), 2);

    // a second 401 right after a fresh token is an error, not a loop
    mock.push(Reply::json(401, unauthorized.clone()));
    mock.push(auth_reply(&mock, "tok-XYZZY-3", &in_one_hour()).unwrap());
    mock.push(Reply::json(401, unauthorized));
    let e = cloud
        .nova()
        .list_zones(ListZones::default())
        .await
        .unwrap_err();
    assert!(matches!(e, DriverError::Unauthenticated { .. }), "{e}");
    assert!(e.to_string().contains("requires authentication"), "{e}");
    assert_eq!(mock.requests().len(), 7);
}

#[tokio::test]
async fn token_close_to_expiry_is_renewed_before_use() {
    let mock = Mock::start();
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(30)).to_rfc3339();
    let Some(first) = auth_reply(&mock, "tok-old", &soon) else {
        return;
    };
    let detail =
        vector("nova/captured-nova-34.0.0/availability-zone-detail-resp.v2.1.json").unwrap();
    mock.push(first);
    mock.push(Reply::json(200, detail.clone()));
    mock.push(auth_reply(&mock, "tok-new", &in_one_hour()).unwrap());
    mock.push(Reply::json(200, detail.clone()));
    mock.push(Reply::json(200, detail));
    let cloud = OpenStack::new(config_without_capacity(&mock)).unwrap();
    let nova = cloud.nova();
    for _ in 0..3 {
        nova.list_zones(ListZones::default()).await.unwrap();
    }
    let reqs = mock.requests();
    let used: Vec<&str> = reqs
        .iter()
        .filter_map(|r| r.header("x-auth-token"))
        .collect();
    assert_eq!(used, ["tok-old", "tok-new", "tok-new"]);
    assert_eq!(cloud.auth_count(), 2);
}

/// Keystone's clock is not this host's: a token issued and expiring on a Keystone clock three
/// hours behind (so "expired" by this host's clock) is still good for its hour, and used
/// without authenticating again; a host clock that is wrong does not renew it at every request.
#[tokio::test]
async fn token_lifetime_is_keystones_not_this_hosts_clock() {
    let mock = Mock::start();
    let at = |h: i64| {
        (chrono::Utc::now() + chrono::Duration::hours(h))
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string()
    };
    let Some(first) = auth_reply_issued(&mock, "tok-behind", &at(-3), &at(-2)) else {
        return;
    };
    let detail =
        vector("nova/captured-nova-34.0.0/availability-zone-detail-resp.v2.1.json").unwrap();
    mock.push(first);
    for _ in 0..3 {
        mock.push(Reply::json(200, detail.clone()));
    }
    let cloud = OpenStack::new(config_without_capacity(&mock)).unwrap();
    let nova = cloud.nova();
    for _ in 0..3 {
        nova.list_zones(ListZones::default()).await.unwrap();
    }
    let reqs = mock.requests();
    let used: Vec<&str> = reqs
        .iter()
        .filter_map(|r| r.header("x-auth-token"))
        .collect();
    assert_eq!(used, ["tok-behind", "tok-behind", "tok-behind"]);
    assert_eq!(cloud.auth_count(), 1);
}

#[tokio::test]
async fn bad_password_is_unauthenticated_and_unreachable_is_unavailable() {
    let mock = Mock::start();
    let Some(body) = vector("keystone/captured-keystone-30.0.0/auth-bad-password-response.json")
    else {
        return;
    };
    mock.push(Reply::json(401, body));
    let cloud = OpenStack::new(config(&mock)).unwrap();
    let e = cloud
        .nova()
        .list_zones(ListZones::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            DriverError::Unauthenticated {
                driver: "keystone",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("HTTP 401"), "{e}");
    assert_eq!(mock.requests().len(), 1, "authentication is not retried");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let cloud = OpenStack::new(
        CloudConfig::password(format!("http://{addr}/v3"), "u", "p", "p", "Default").with_retry(
            RetryPolicy::new(2, Duration::from_millis(1), Duration::from_millis(1)),
        ),
    )
    .unwrap();
    let e = cloud
        .heat()
        .show_stack(&StackId::new(STACK))
        .await
        .unwrap_err();
    assert!(e.is_retryable(), "{e:?}");
    // the token request was tried three times (Keystone restarting), then given up
    assert_eq!(cloud.retry_count(), 2);
}

/// A service that answers 503 for a while (restarting, or keystonemiddleware unable to reach
/// Keystone): a GET is sent again after the policy's waits and succeeds; a POST (a stack
/// create, which may have taken effect) is never resent; beyond the policy's retries the 503
/// is the error.
#[tokio::test]
async fn transient_failures_are_retried() {
    let Some((mock, cloud)) = session(|m| {
        config_without_capacity(m).with_retry(RetryPolicy::new(
            2,
            Duration::from_millis(1),
            Duration::from_millis(5),
        ))
    }) else {
        return;
    };
    let server = vector("nova/captured-nova-34.0.0/server-show-active-admin.v2.104.json").unwrap();
    mock.push(Reply::json(503, "<html>Service Unavailable</html>"));
    mock.push(Reply::json(502, "Bad Gateway"));
    mock.push(Reply::json(200, server));
    let s = cloud.nova().server(&ServerId::new("s1")).await;
    assert!(s.is_ok(), "{s:?}");
    assert_eq!(cloud.retry_count(), 2);
    let gets = mock
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path().contains("/servers/s1"))
        .count();
    assert_eq!(gets, 3);

    // three 503s: two retries, then the error
    for _ in 0..3 {
        mock.push(Reply::json(503, "<html>Service Unavailable</html>"));
    }
    let e = cloud.nova().server(&ServerId::new("s2")).await.unwrap_err();
    assert!(e.is_retryable() && e.to_string().contains("503"), "{e}");
    assert_eq!(cloud.retry_count(), 4);

    // a POST is not resent
    mock.push(Reply::json(503, "<html>Service Unavailable</html>"));
    let e = cloud
        .heat()
        .create_stack(CreateStack::new(
            "vnf1",
            TemplateBundle::default(),
            Parameters::new(),
        ))
        .await
        .unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert_eq!(cloud.retry_count(), 4, "no retry of a POST");
    let posts = mock
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path().contains("/stacks"))
        .count();
    assert_eq!(posts, 1);
}

// ------------------------------------------------------------------------------- nova

#[tokio::test]
async fn tacker_multi_az_over_http() {
    let Some(body) =
        tacker("az_reselection/nova/os-availability-zone-detail.multi-az.synthesized.json")
    else {
        return;
    };
    let Some((mock, cloud)) = session(config_without_capacity) else {
        return;
    };
    mock.push(Reply::json(200, body));
    let zones = cloud.nova().list_zones(ListZones::default()).await.unwrap();
    assert_eq!(zone_names(&zones), ["nova", "az-1", "az-2", "az-4"]);
    assert_eq!(zones[3].hosts, None);
    let candidates: Vec<&str> = zones
        .iter()
        .filter(|z| z.is_candidate())
        .map(|z| z.name.as_str())
        .collect();
    assert_eq!(candidates, ["nova", "az-1", "az-2"]);
    assert!(cloud.warnings().is_empty());
}

#[tokio::test]
async fn official_az_sample_leaves_internal_out() {
    let Some(body) = vector("nova/availability-zone-detail-resp.v2.1.json") else {
        return;
    };
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    mock.push(Reply::json(200, body));
    let zones = cloud.nova().list_zones(ListZones::default()).await.unwrap();
    assert_eq!(zone_names(&zones), ["nova"]);
    let hosts = zones[0].hosts.as_ref().unwrap();
    assert_eq!(hosts[0].name.as_str(), "compute");
    assert!(hosts[0].available && hosts[0].free.is_none());
}

#[tokio::test]
async fn forbidden_detail_falls_back_to_the_plain_list_and_says_so() {
    let Some(list) = vector("nova/captured-nova-34.0.0/availability-zone-list-resp.v2.1.json")
    else {
        return;
    };
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    mock.push(Reply::json(
        403,
        r#"{"forbidden": {"code": 403, "message": "Policy doesn't allow os_compute_api:os-availability-zone:detail to be performed."}}"#,
    ));
    mock.push(Reply::json(200, list));
    let zones = cloud.nova().list_zones(ListZones::default()).await.unwrap();
    assert_eq!(zone_names(&zones), ["az1", "nova"]);
    assert!(zones.iter().all(|z| z.hosts.is_none() && !z.is_candidate()));
    let reqs = mock.requests();
    assert_eq!(reqs[1].path(), "/nova/v2.1/os-availability-zone/detail");
    assert_eq!(reqs[2].path(), "/nova/v2.1/os-availability-zone");
    let w = cloud.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("forbidden") && w[0].contains("Policy doesn't allow"),
        "{w:?}"
    );
}

#[tokio::test]
async fn server_show_admin_non_admin_and_error() {
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    let nova = cloud.nova();
    mock.push(Reply::json(
        200,
        vector("nova/captured-nova-34.0.0/server-show-active-admin.v2.104.json").unwrap(),
    ));
    let sid = ServerId::new("62d08775-ab1c-4803-908c-61dea3c11170");
    let s = nova.show_server(&sid).await.unwrap();
    assert_eq!(s.host.as_ref().map(|h| h.as_str()), Some("c1"));
    assert_eq!(
        s.host_id,
        "b8ea8860ef40bb50eaee45fe942aa18fd4bf62cf01d966791a24f047"
    );
    assert_eq!(s.hypervisor_hostname.as_deref(), Some("c1"));
    let info = s.to_info();
    assert_eq!(info.id, sid);
    assert_eq!(info.status, "ACTIVE");
    assert_eq!(info.zone.as_ref().map(|z| z.as_str()), Some("az1"));
    assert_eq!(info.flavor.as_ref().map(|f| f.as_str()), Some("m1.tiny"));
    assert_eq!(info.server_groups, ["b1d9abe1-431d-4fc4-8fed-f315a289a2e5"]);
    assert_eq!(info.fault, None);
    assert_eq!(
        mock.requests()[1].path(),
        "/nova/v2.1/servers/62d08775-ab1c-4803-908c-61dea3c11170"
    );

    mock.push(Reply::json(
        200,
        vector("nova/server-get-resp.v2.100.json").unwrap(),
    ));
    let s = nova.server(&ServerId::new("x")).await.unwrap();
    assert_eq!(s.host, None, "non-admin view has no host");
    assert_eq!(s.zone.as_ref().map(|z| z.as_str()), Some("us-west"));

    mock.push(Reply::json(
        200,
        vector("nova/captured-nova-34.0.0/server-show-error-novalidhost-antiaffinity-admin.v2.104.json")
            .unwrap(),
    ));
    let s = nova.server(&ServerId::new("y")).await.unwrap();
    assert_eq!((s.status.as_str(), s.host.as_ref()), ("ERROR", None));
    let fault = s.fault.unwrap();
    assert_eq!(fault.code, 500);
    assert_eq!(
        fault.message,
        "No valid host was found. There are not enough hosts available."
    );

    mock.push(Reply::json(
        200,
        vector("nova/captured-nova-34.0.0/server-show-error-novalidhost-admin.v2.1.json").unwrap(),
    ));
    let s = nova.show_server(&ServerId::new("z")).await.unwrap();
    assert_eq!((s.flavor_name, s.flavor_id.as_deref()), (None, Some("1")));
}

#[tokio::test]
async fn nova_errors_keep_status_and_message() {
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    mock.push(Reply::json(
        404,
        r#"{"itemNotFound": {"code": 404, "message": "Instance nosuch could not be found."}}"#,
    ));
    let e = cloud
        .nova()
        .server(&ServerId::new("nosuch"))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert!(
        e.to_string()
            .contains("HTTP 404: Instance nosuch could not be found."),
        "{e}"
    );
    mock.push(Reply::json(
        403,
        vector("nova/captured-nova-34.0.0/server-create-quota-exceeded-403.v2.104.json").unwrap(),
    ));
    let e = cloud.nova().server(&ServerId::new("q")).await.unwrap_err();
    assert!(
        matches!(e, DriverError::QuotaExceeded { driver: "nova", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("Quota exceeded for cores"), "{e}");
    mock.push(Reply::json(503, "<html>Service Unavailable</html>"));
    let e = cloud.nova().server(&ServerId::new("u")).await.unwrap_err();
    assert!(
        e.is_retryable() && e.to_string().contains("Service Unavailable"),
        "{e}"
    );
}

#[tokio::test]
async fn server_groups_both_forms() {
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    mock.push(Reply::json(
        200,
        vector("nova/captured-nova-34.0.0/server-groups-get-resp.v2.104.json").unwrap(),
    ));
    let g = cloud
        .nova()
        .server_group("b1d9abe1-431d-4fc4-8fed-f315a289a2e5")
        .await
        .unwrap();
    assert_eq!(
        (g.name.as_str(), g.policy.as_str()),
        ("vnf-aa", "anti-affinity")
    );
    assert_eq!(g.members.len(), 2);
    mock.push(Reply::json(
        200,
        vector("nova/server-groups-list-resp.v2.1.json").unwrap(),
    ));
    let gs = cloud.nova().server_groups().await.unwrap();
    assert_eq!(gs[0].policy, "anti-affinity");
    assert_eq!(mock.requests()[2].path(), "/nova/v2.1/os-server-groups");
}

// ------------------------------------------------------------------------------- heat

/// The path of the Heat endpoint of the rewritten catalog.
fn heat_base(_mock: &Mock) -> String {
    format!("/heat/v1/{PROJECT}")
}

#[tokio::test]
async fn create_then_show_uses_the_name_it_created() {
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    let heat = cloud.heat();
    mock.push(Reply::json(
        201,
        rewritten(
            &mock,
            "heat/captured-heat-27.0.1/stack-create-response-201.json",
        )
        .unwrap(),
    ));
    mock.push(Reply::json(
        200,
        rewritten(
            &mock,
            "heat/captured-heat-27.0.1/stack-show-create-failed-novalidhost.json",
        )
        .unwrap(),
    ));
    let mut params = Parameters::new();
    params.insert("az".into(), Value::from("az1"));
    params.insert("count".into(), Value::from(2));
    let template = TemplateBundle {
        template: "heat_template_version: 2018-08-31\n".into(),
        files: [("nested.yaml".to_owned(), "x".to_owned())].into(),
    };
    let id = heat
        .create_stack(CreateStack::new("vnf1", template, params))
        .await
        .unwrap();
    assert_eq!(id.as_str(), STACK);
    let stack = heat.show_stack(&id).await.unwrap();
    assert_eq!(stack.stack_status.to_string(), "CREATE_FAILED");
    assert!(stack
        .stack_status_reason
        .starts_with("Resource CREATE failed: ResourceInError: resources.vdus.resources[0]"));
    assert_eq!(stack.parameters["count"], Value::from("2"));
    assert_eq!(stack.outputs[0].output_value, json!([null, "c1"]));
    assert_eq!(
        vnfm_openstack::heat::user_parameters(&stack)
            .keys()
            .collect::<Vec<_>>(),
        ["az", "count"]
    );

    let reqs = mock.requests();
    assert_eq!(
        reqs.len(),
        3,
        "no lookup: the name is known from the create"
    );
    let base = heat_base(&mock);
    assert_eq!(
        (reqs[1].method.as_str(), reqs[1].path()),
        ("POST", format!("{base}/stacks").as_str())
    );
    assert_eq!(
        reqs[1].json(),
        json!({"stack_name": "vnf1", "template": "heat_template_version: 2018-08-31\n",
               "files": {"nested.yaml": "x"}, "parameters": {"az": "az1", "count": 2},
               "disable_rollback": true})
    );
    assert_eq!(reqs[2].path(), format!("{base}/stacks/vnf1/{STACK}"));
    assert!(reqs
        .iter()
        .all(|r| r.header("accept") == Some("application/json")));
}

#[tokio::test]
async fn unknown_id_is_looked_up_through_the_302() {
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    let location = format!("{}/heat/v1/{PROJECT}/stacks/vnf1/{STACK}", mock.url);
    mock.push(
        Reply::json(
            302,
            vector("heat/captured-heat-27.0.1/stack-find-response-302.json").unwrap(),
        )
        .with_header("Location", &location),
    );
    mock.push(Reply::json(
        200,
        rewritten(
            &mock,
            "heat/captured-heat-27.0.1/stack-show-update-complete.json",
        )
        .unwrap(),
    ));
    let stack = cloud.heat().show_stack(&StackId::new(STACK)).await.unwrap();
    assert_eq!(stack.stack_status.to_string(), "UPDATE_COMPLETE");
    assert_eq!(stack.outputs[0].output_value, json!(["c2"]));
    let reqs = mock.requests();
    let base = heat_base(&mock);
    assert_eq!(reqs[1].path(), format!("{base}/stacks/{STACK}"));
    assert_eq!(reqs[2].path(), format!("{base}/stacks/vnf1/{STACK}"));
}

#[tokio::test]
async fn not_found_bodies_and_delete_complete_are_not_found() {
    let Some(nf) = vector("heat/captured-heat-27.0.1/stack-show-not-found-404.json") else {
        return;
    };
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    let heat = cloud.heat();
    mock.push(Reply::json(404, nf.clone()));
    let e = heat.show_stack(&StackId::new("nosuch")).await.unwrap_err();
    assert!(
        matches!(e, DriverError::NotFound { driver: "heat", .. }),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("The Stack (nosuch) could not be found."),
        "{e}"
    );
    for _ in 0..4 {
        mock.push(Reply::json(404, nf.clone()));
    }
    let id = StackId::new("nosuch");
    assert!(heat.delete_stack(&id).await.unwrap_err().is_not_found());
    assert!(heat
        .update_stack(UpdateStack::parameters(id.clone(), Parameters::new()))
        .await
        .unwrap_err()
        .is_not_found());
    assert!(heat
        .list_resources(ListResources::new(id.clone(), 0))
        .await
        .unwrap_err()
        .is_not_found());
    assert!(heat
        .mark_unhealthy(MarkUnhealthy::new(id, "server", "r"))
        .await
        .unwrap_err()
        .is_not_found());

    // delete, then Heat still shows the stack as DELETE_COMPLETE: the contract says NotFound
    let location = format!("{}/heat/v1/{PROJECT}/stacks/vnf1/{STACK}", mock.url);
    mock.push(Reply::empty(302).with_header("Location", &location));
    mock.push(Reply::empty(204));
    let mut gone: Value = serde_json::from_str(
        &vector("heat/captured-heat-27.0.1/stack-show-update-complete.json").unwrap(),
    )
    .unwrap();
    gone["stack"]["stack_status"] = Value::from("DELETE_COMPLETE");
    mock.push(Reply::json(200, gone.to_string()));
    let id = StackId::new(STACK);
    heat.delete_stack(&id).await.unwrap();
    let e = heat.show_stack(&id).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
    let reqs = mock.requests();
    let n = reqs.len();
    assert_eq!(reqs[n - 2].method, "DELETE");
    // Heat lists a deleted stack's resources as empty: the adapter checks the status
    mock.push(Reply::json(200, r#"{"resources": []}"#));
    mock.push(Reply::json(200, gone.to_string()));
    let e = heat
        .list_resources(ListResources::new(id, 0))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert_eq!(mock.pending(), 0);
    assert_eq!(
        reqs[n - 2].path(),
        format!("{}/stacks/vnf1/{STACK}", heat_base(&mock))
    );
}

/// A GET whose keep-alive connection the server closed is sent once more, on a new connection.
#[tokio::test]
async fn a_get_on_a_connection_closed_by_the_server_is_sent_again() {
    let Some((mock, cloud)) = session(config_without_capacity) else {
        return;
    };
    let detail =
        vector("nova/captured-nova-34.0.0/availability-zone-detail-resp.v2.1.json").unwrap();
    mock.push(Reply::hang_up());
    mock.push(Reply::json(200, detail));
    let zones = cloud.nova().list_zones(ListZones::default()).await.unwrap();
    assert_eq!(zone_names(&zones), ["az1", "nova"]);
    let reqs = mock.requests();
    let gets: Vec<_> = reqs.iter().filter(|r| r.method == "GET").collect();
    assert_eq!(gets.len(), 2, "{reqs:#?}");
    assert_eq!(gets[0].answered, 0);
    assert_eq!(gets[1].answered, 200);
    assert_eq!(gets[0].target, gets[1].target);
}

/// A POST is never sent twice: the server may have acted on it before the connection broke.
#[tokio::test]
async fn a_post_on_a_broken_connection_is_not_sent_again() {
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    mock.push(Reply::hang_up());
    let e = cloud
        .heat()
        .create_stack(CreateStack::new(
            "vnf1",
            TemplateBundle::default(),
            Parameters::new(),
        ))
        .await
        .unwrap_err();
    assert!(matches!(e, DriverError::Unavailable { .. }), "{e:?}");
    let posts = mock
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path().contains("/stacks"))
        .count();
    assert_eq!(posts, 1);
    assert_eq!(mock.pending(), 0);
}

#[tokio::test]
async fn duplicate_and_invalid_map_onto_kinds() {
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    mock.push(Reply::json(
        409,
        r#"{"code": 409, "title": "Conflict", "explanation": "There was a conflict when trying to complete your request.", "error": {"type": "StackExists", "traceback": null, "message": "The Stack (vnf1) already exists."}}"#,
    ));
    let e = cloud
        .heat()
        .create_stack(CreateStack::new(
            "vnf1",
            TemplateBundle::default(),
            Parameters::new(),
        ))
        .await
        .unwrap_err();
    assert!(matches!(e, DriverError::AlreadyExists { .. }), "{e}");
    mock.push(Reply::json(
        400,
        r#"{"code": 400, "title": "Bad Request", "explanation": "The server could not comply with the request since it is either malformed or otherwise incorrect.", "error": {"type": "HTTPBadRequest", "traceback": null, "message": "The template is not a JSON object or YAML mapping."}}"#,
    ));
    let e = cloud
        .heat()
        .create_stack(CreateStack::new(
            "vnf1",
            TemplateBundle::default(),
            Parameters::new(),
        ))
        .await
        .unwrap_err();
    assert!(matches!(e, DriverError::Invalid { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("HTTP 400: The template is not a JSON object"),
        "{e}"
    );
}

#[tokio::test]
async fn update_is_a_patch_with_accept_json() {
    let Some(html) =
        vector("heat/captured-heat-27.0.1/stack-update-patch-response-202-no-accept-header.html")
    else {
        return;
    };
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    let location = format!("{}/heat/v1/{PROJECT}/stacks/vnf1/{STACK}", mock.url);
    mock.push(Reply::empty(302).with_header("Location", &location));
    mock.push(
        Reply::json(
            202,
            vector("heat/captured-heat-27.0.1/stack-update-patch-response-202.json").unwrap(),
        )
        .html_without_accept(html),
    );
    let mut params = Parameters::new();
    params.insert("count".into(), Value::from(1));
    params.insert("az".into(), Value::from("nova"));
    cloud
        .heat()
        .update_stack(UpdateStack::parameters(StackId::new(STACK), params))
        .await
        .unwrap();
    let reqs = mock.requests();
    let patch = &reqs[2];
    assert_eq!(patch.method, "PATCH");
    assert_eq!(
        patch.path(),
        format!("{}/stacks/vnf1/{STACK}", heat_base(&mock))
    );
    assert_eq!(patch.header("accept"), Some("application/json"));
    assert_eq!(patch.header("content-type"), Some("application/json"));
    let want: Value = serde_json::from_str(
        &vector("heat/captured-heat-27.0.1/stack-update-patch-request-2.json").unwrap(),
    )
    .unwrap();
    assert_eq!(patch.json(), want);
}

#[tokio::test]
async fn nested_resources_are_ordered_and_linked() {
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    let location = format!("{}/heat/v1/{PROJECT}/stacks/vnf1/{STACK}", mock.url);
    mock.push(Reply::empty(302).with_header("Location", &location));
    mock.push(Reply::json(
        200,
        rewritten(
            &mock,
            "heat/captured-heat-27.0.1/resources-list-nested-depth-2-create-failed.json",
        )
        .unwrap(),
    ));
    let list = cloud
        .heat()
        .list_resources(ListResources::new(StackId::new(STACK), 2))
        .await
        .unwrap();
    let reqs = mock.requests();
    assert_eq!(
        reqs[2].target,
        format!(
            "{}/stacks/vnf1/{STACK}/resources?nested_depth=2",
            heat_base(&mock)
        )
    );
    let top: Vec<&str> = list
        .iter()
        .take_while(|r| r.stack_id.as_str() == STACK)
        .map(|r| r.resource_name.as_str())
        .collect();
    assert_eq!(top.len(), 2, "{list:#?}");
    assert!(top.contains(&"vdus") && top.contains(&"grp"));
    let vdus = list.iter().find(|r| r.resource_name == "vdus").unwrap();
    assert_eq!(
        vdus.nested_stack_id.as_ref().map(|s| s.as_str()),
        Some(NESTED)
    );
    assert_eq!(vdus.resource_status.to_string(), "CREATE_FAILED");
    let nested: Vec<_> = list.iter().skip(2).collect();
    assert!(!nested.is_empty());
    for r in &nested {
        assert_eq!(r.stack_id.as_str(), NESTED);
        assert_eq!(r.parent_resource.as_deref(), Some("vdus"));
        assert_eq!(r.resource_type, "OS::Nova::Server");
    }
    assert!(nested
        .iter()
        .any(|r| r.resource_status_reason.contains("No valid host was found")));

    // the nested stack's name was learnt from the links: no lookup for it
    mock.push(Reply::json(200, "{}"));
    cloud
        .heat()
        .mark_unhealthy(MarkUnhealthy::new(
            StackId::new(NESTED),
            "0",
            "vnfm: heal 0",
        ))
        .await
        .unwrap();
    let reqs = mock.requests();
    let last = reqs.last().unwrap();
    assert_eq!(last.method, "PATCH");
    assert_eq!(
        last.path(),
        format!(
            "{}/stacks/vnf1-vdus-oz7cgo5vs47h/{NESTED}/resources/0",
            heat_base(&mock)
        )
    );
    assert_eq!(
        last.json(),
        json!({"mark_unhealthy": true, "resource_status_reason": "vnfm: heal 0"})
    );
}

#[tokio::test]
async fn official_resource_list_and_events() {
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    let heat = cloud.heat();
    let location = format!("{}/heat/v1/{PROJECT}/stacks/vnf1/{STACK}", mock.url);
    mock.push(Reply::empty(302).with_header("Location", &location));
    mock.push(Reply::json(
        200,
        vector("heat/resources-list-response.json").unwrap(),
    ));
    let list = heat
        .list_resources(ListResources::new(StackId::new(STACK), 0))
        .await
        .unwrap();
    assert_eq!(list.len(), 1);
    assert!(!mock.requests()[2].target.contains("nested_depth"));

    mock.push(Reply::json(
        200,
        rewritten(
            &mock,
            "heat/captured-heat-27.0.1/events-list-nested-depth-2-create-failed.json",
        )
        .unwrap(),
    ));
    let events = heat
        .events(ListEvents::new(StackId::new(STACK), 2))
        .await
        .unwrap();
    assert_eq!(events[0].resource_status, "CREATE_IN_PROGRESS");
    assert_eq!(events[0].resource_status_reason, "Stack CREATE started");
    assert_eq!(events[0].stack_id.as_ref().map(|s| s.as_str()), Some(STACK));
    assert!(events.iter().any(|e| e.resource_status == "CREATE_FAILED"));
    let last = mock.requests().pop().unwrap();
    assert_eq!(
        last.target,
        format!(
            "{}/stacks/vnf1/{STACK}/events?sort_dir=asc&nested_depth=2",
            heat_base(&mock)
        )
    );
}

#[tokio::test]
async fn adapters_are_shareable_trait_objects_without_secrets_in_debug() {
    let mock = Mock::start();
    let cloud = OpenStack::new(config(&mock)).unwrap();
    let stacks: Arc<dyn StackDriver> = Arc::new(cloud.heat());
    let zones: Arc<dyn ZoneCatalog> = Arc::new(cloud.nova());
    let compute: Arc<dyn ComputeInventory> = Arc::new(cloud.nova().clone());
    for shown in [
        format!("{stacks:?}"),
        format!("{zones:?}"),
        format!("{compute:?}"),
        format!("{cloud:?}"),
    ] {
        assert!(!shown.contains("XYZZY"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}

/// Operate (issue 16): `os-start` / `os-stop` are `POST /servers/{id}/action` with the action
/// as the body's only key, answered 202 (no body); Nova's 409 for a server in the wrong state
/// is a conflict with Nova's message.
#[tokio::test]
async fn server_start_and_stop_are_nova_actions() {
    let Some((mock, cloud)) = session(config) else {
        return;
    };
    let nova = cloud.nova();
    let sid = ServerId::new("62d08775-ab1c-4803-908c-61dea3c11170");
    mock.push(Reply::empty(202));
    nova.stop_server(&sid).await.unwrap();
    mock.push(Reply::empty(202));
    nova.start_server(&sid).await.unwrap();
    let reqs = mock.requests();
    for (r, action) in reqs[1..].iter().zip(["os-stop", "os-start"]) {
        assert_eq!(r.method, "POST", "{r:?}");
        assert_eq!(
            r.path(),
            "/nova/v2.1/servers/62d08775-ab1c-4803-908c-61dea3c11170/action"
        );
        assert_eq!(r.json(), json!({ action: null }));
    }
    mock.push(Reply::json(
        409,
        r#"{"conflictingRequest": {"code": 409, "message": "Cannot 'start' instance 62d08775-ab1c-4803-908c-61dea3c11170 while it is in vm_state active"}}"#,
    ));
    let e = nova.start_server(&sid).await.unwrap_err();
    assert!(matches!(e, DriverError::Conflict { .. }), "{e}");
    assert!(e.to_string().contains("vm_state active"), "{e}");
}
