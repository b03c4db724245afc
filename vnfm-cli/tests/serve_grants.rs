//! Grants asked of an NFVO (`[grant] nfvo`, SOL003 clause 9) by `vnfm serve`, through real
//! sockets: a test NFVO of the test's own (axum on 127.0.0.1) holds, grants or rejects each
//! grant request as the test says. The occurrence stays STARTING while the NFVO decides; its
//! zones are where the VNFCs go; a cancel in STARTING and a rejection end ROLLED_BACK, not run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get as route_get, post as route_post};
use axum::Router;
use serde_json::{json, Value};
use serve_common::*;
use vnfm_cli::config::Secret;
use vnfm_cli::serve::Server;

/// How the test NFVO answers the grant requests of an instance.
#[derive(Clone, Debug)]
enum Verdict {
    /// 202, and 202 to every poll until the test sets another verdict.
    Hold,
    /// 201 (or 200 to a poll): the VDUs' VNFCs in these zones, in order.
    Grant(Vec<(&'static str, &'static str)>),
    /// 403 with this detail.
    Reject(&'static str),
}

/// A request the NFVO saw: method and path, `Authorization`, `Version`.
type Seen = (String, Option<String>, Option<String>);

#[derive(Default)]
struct Nfvo {
    /// vnfInstanceId -> verdict (absent: Hold).
    verdicts: Mutex<BTreeMap<String, Verdict>>,
    /// grant number -> its request.
    requests: Mutex<Vec<Value>>,
    /// `Authorization` and `Version` of every request, and its path.
    seen: Mutex<Vec<Seen>>,
}

impl Nfvo {
    fn set(&self, instance: &str, v: Verdict) {
        self.verdicts.lock().unwrap().insert(instance.to_owned(), v);
    }

    fn polls(&self) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _, _)| p.starts_with("GET"))
            .count()
    }

    fn answer(&self, n: usize, polled: bool) -> Response {
        let req = self.requests.lock().unwrap()[n].clone();
        let instance = req["vnfInstanceId"].as_str().unwrap().to_owned();
        let verdict = self
            .verdicts
            .lock()
            .unwrap()
            .get(&instance)
            .cloned()
            .unwrap_or(Verdict::Hold);
        match verdict {
            Verdict::Hold => (
                StatusCode::ACCEPTED,
                [("Location", format!("/grant/v1/grants/g-{n}"))],
            )
                .into_response(),
            Verdict::Reject(detail) => (
                StatusCode::FORBIDDEN,
                [("Content-Type", "application/problem+json")],
                json!({"status": 403, "title": "Forbidden", "detail": detail}).to_string(),
            )
                .into_response(),
            Verdict::Grant(zones) => {
                let status = if polled {
                    StatusCode::OK
                } else {
                    StatusCode::CREATED
                };
                (status, axum::Json(grant(&req, n, &zones))).into_response()
            }
        }
    }
}

/// The grant of `req`: the i-th COMPUTE resource of a VDU in the i-th zone listed for it.
fn grant(req: &Value, n: usize, zones: &[(&str, &str)]) -> Value {
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let (mut infos, mut add) = (Vec::new(), Vec::new());
    for r in req["addResources"].as_array().into_iter().flatten() {
        if r["type"] != "COMPUTE" {
            continue;
        }
        let vdu = r["vduId"].as_str().unwrap();
        let i = used.entry(vdu.to_owned()).or_default();
        let Some((_, zone)) = zones.iter().filter(|(v, _)| *v == vdu).nth(*i) else {
            continue;
        };
        *i += 1;
        let zid = format!("zone-{}", infos.len());
        infos.push(json!({"id": zid, "zoneId": zone}));
        add.push(json!({"resourceDefinitionId": r["id"], "zoneId": zid}));
    }
    json!({
        "id": format!("nfvo-grant-{n}"),
        "vnfInstanceId": req["vnfInstanceId"],
        "vnfLcmOpOccId": req["vnfLcmOpOccId"],
        "zones": infos,
        "addResources": add,
        "_links": {
            "self": {"href": format!("http://nfvo/grant/v1/grants/g-{n}")},
            "vnfLcmOpOcc": {"href": "http://vnfm/op"},
            "vnfInstance": {"href": "http://vnfm/inst"}
        }
    })
}

fn seen(n: &Nfvo, what: String, h: &HeaderMap) {
    let header = |k: &str| h.get(k).map(|v| v.to_str().unwrap().to_owned());
    n.seen
        .lock()
        .unwrap()
        .push((what, header("authorization"), header("version")));
}

async fn create(State(n): State<Arc<Nfvo>>, h: HeaderMap, body: String) -> Response {
    seen(&n, "POST /grant/v1/grants".into(), &h);
    let req: Value = serde_json::from_str(&body).unwrap();
    let k = {
        let mut r = n.requests.lock().unwrap();
        r.push(req);
        r.len() - 1
    };
    n.answer(k, false)
}

async fn poll(State(n): State<Arc<Nfvo>>, Path(id): Path<String>, h: HeaderMap) -> Response {
    seen(&n, format!("GET /grant/v1/grants/{id}"), &h);
    let k: usize = id.trim_start_matches("g-").parse().unwrap();
    n.answer(k, true)
}

async fn nfvo() -> (Arc<Nfvo>, SocketAddr) {
    let n = Arc::new(Nfvo::default());
    let app = Router::new()
        .route("/grant/v1/grants", route_post(create))
        .route("/grant/v1/grants/{id}", route_get(poll))
        .with_state(n.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(l, app).await.unwrap();
    });
    (n, a)
}

async fn server_granted_by(nfvo: SocketAddr, dir: &std::path::Path) -> Server {
    let mut c = config(dir, 1);
    c.grant.nfvo = Some(format!("http://{nfvo}/grant/v1"));
    c.grant.bearer_token = Some(Secret::new("nfvo-token"));
    c.grant.poll_interval = 1;
    c.grant.timeout = 120;
    start(c).await
}

async fn create_instance(addr: SocketAddr) -> String {
    let r = post_json(
        addr,
        "/vnflcm/v2/vnf_instances",
        &json!({"vnfdId": DEMO_VNFD}),
    )
    .await;
    assert_eq!(r.status, 201);
    r.json()["id"].as_str().unwrap().to_owned()
}

async fn instantiate(addr: SocketAddr, id: &str) -> String {
    let r = post_json(
        addr,
        &format!("/vnflcm/v2/vnf_instances/{id}/instantiate"),
        &json!({"flavourId": "default"}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    r.header("location").unwrap().to_owned()
}

async fn state_of(addr: SocketAddr, loc: &str) -> String {
    get(addr, loc).await.json()["operationState"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instantiate_waits_starting_for_the_nfvo_then_runs_in_the_zones_it_grants() {
    let dir = tempfile::tempdir().unwrap();
    let (n, nfvo_addr) = nfvo().await;
    let server = server_granted_by(nfvo_addr, dir.path()).await;
    let addr = server.local_addr();
    let id = create_instance(addr).await;
    let loc = instantiate(addr, &id).await;

    // The NFVO holds the grant: the occurrence stays STARTING while vnfm polls.
    eventually(30, "two polls of the held grant", || async {
        (n.polls() >= 2).then_some(())
    })
    .await;
    assert_eq!(state_of(addr, &loc).await, "STARTING");
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    assert_eq!(inst["instantiationState"], "NOT_INSTANTIATED");
    let op = get(addr, &loc).await.json();
    {
        let reqs = n.requests.lock().unwrap();
        assert_eq!(reqs.len(), 1, "one request, then polls");
        assert_eq!(reqs[0]["vnfLcmOpOccId"], op["id"]);
        assert_eq!(reqs[0]["vnfInstanceId"], id.as_str());
        assert_eq!(reqs[0]["operation"], "INSTANTIATE");
        assert_eq!(reqs[0]["flavourId"], "default");
        for (what, auth, version) in n.seen.lock().unwrap().iter() {
            assert_eq!(auth.as_deref(), Some("Bearer nfvo-token"), "{what}");
            assert_eq!(version.as_deref(), Some("1.4.0"), "{what}");
        }
    }

    // The NFVO grants AZ-3 and AZ-4 for VDU1, AZ-2 for VDU2: the VNFCs go there.
    n.set(
        &id,
        Verdict::Grant(vec![("VDU1", "AZ-3"), ("VDU1", "AZ-4"), ("VDU2", "AZ-2")]),
    );
    let op = wait_op(addr, &loc).await;
    assert_eq!(op["operationState"], "COMPLETED", "{op:#}");
    assert_eq!(op["grantId"], "nfvo-grant-0");
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    let mut zones: Vec<(String, String)> = inst["instantiatedVnfInfo"]["vnfcResourceInfo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["vduId"].as_str().unwrap().to_owned(),
                v["zoneId"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    zones.sort();
    let want: Vec<(String, String)> = [("VDU1", "AZ-3"), ("VDU1", "AZ-4"), ("VDU2", "AZ-2")]
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    assert_eq!(zones, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_while_the_nfvo_decides_and_a_rejected_grant_end_rolled_back_unrun() {
    let dir = tempfile::tempdir().unwrap();
    let (n, nfvo_addr) = nfvo().await;
    let server = server_granted_by(nfvo_addr, dir.path()).await;
    let addr = server.local_addr();

    // Cancel in STARTING (SOL003 5.4.17.3.1): 202, then ROLLED_BACK, the instance unchanged.
    let id = create_instance(addr).await;
    let loc = instantiate(addr, &id).await;
    eventually(30, "a poll of the held grant", || async {
        (n.polls() >= 1).then_some(())
    })
    .await;
    assert_eq!(state_of(addr, &loc).await, "STARTING");
    let r = post_json(
        addr,
        &format!("{loc}/cancel"),
        &json!({"cancelMode": "GRACEFUL"}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = wait_op(addr, &loc).await;
    assert_eq!(op["operationState"], "ROLLED_BACK", "{op:#}");
    assert!(
        op["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("while STARTING"),
        "{op:#}"
    );
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    assert_eq!(inst["instantiationState"], "NOT_INSTANTIATED");

    // The NFVO rejects (403): ROLLED_BACK with its detail; the instance can be instantiated
    // again once the NFVO grants.
    n.set(&id, Verdict::Reject("no capacity left in region R1"));
    let loc = instantiate(addr, &id).await;
    let op = wait_op(addr, &loc).await;
    assert_eq!(op["operationState"], "ROLLED_BACK", "{op:#}");
    let detail = op["error"]["detail"].as_str().unwrap();
    assert!(
        detail
            .contains("the NFVO rejected the grant (403 Forbidden): no capacity left in region R1"),
        "{detail}"
    );
    n.set(
        &id,
        Verdict::Grant(vec![("VDU1", "AZ-2"), ("VDU1", "AZ-3"), ("VDU2", "AZ-4")]),
    );
    let loc = instantiate(addr, &id).await;
    let op = wait_op(addr, &loc).await;
    assert_eq!(op["operationState"], "COMPLETED", "{op:#}");
}

/// The grant client alone against answers an NFVO should not give, or gives when in trouble:
/// each maps to the driver error the core's contract names (5xx and unreachable are
/// Unavailable, so asked again; the others are not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grant_client_maps_every_answer_as_its_contract_says() {
    use vnfm_cli::config::{NfvoAuth, NfvoSettings};
    use vnfm_cli::nfvo::{NfvoGrantClient, MAX_BODY};
    use vnfm_core::driver::{DriverError, GrantAnswer, GrantDriver};

    async fn case(Path(name): Path<String>) -> Response {
        match name.as_str() {
            "busy" => (StatusCode::SERVICE_UNAVAILABLE, "try later").into_response(),
            "nolocation" => StatusCode::ACCEPTED.into_response(),
            "relative" => (
                StatusCode::ACCEPTED,
                [("Location", "g-7"), ("Retry-After", "9")],
            )
                .into_response(),
            "garbage" => (StatusCode::CREATED, "{\"id\": 5}").into_response(),
            "huge" => (StatusCode::CREATED, vec![b' '; MAX_BODY + 1]).into_response(),
            "auth" => StatusCode::UNAUTHORIZED.into_response(),
            "bad" => (
                StatusCode::UNPROCESSABLE_ENTITY,
                axum::Json(json!({"status": 422, "detail": "addResources[2]: unknown VDU"})),
            )
                .into_response(),
            _ => StatusCode::NOT_FOUND.into_response(),
        }
    }
    let app = Router::new().route("/{name}/grant/v1/grants", route_post(case));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(l, app).await.unwrap();
    });
    let client = |root: String| {
        NfvoGrantClient::new(&NfvoSettings {
            url: root.parse().unwrap(),
            auth: NfvoAuth::None,
            poll_interval: std::time::Duration::from_secs(1),
            timeout: std::time::Duration::from_secs(10),
            request_timeout: std::time::Duration::from_secs(5),
        })
        .unwrap()
    };
    let req: vnfm_core::grant::GrantRequest = serde_json::from_value(json!({
        "vnfInstanceId": "i-1", "vnfLcmOpOccId": "o-1", "vnfdId": "d-1",
        "operation": "INSTANTIATE", "isAutomaticInvocation": false,
        "_links": {"vnfLcmOpOcc": {"href": "/o"}, "vnfInstance": {"href": "/i"}}
    }))
    .unwrap();
    let ask = |name: &str| {
        let c = client(format!("http://{a}/{name}/grant/v1"));
        let req = req.clone();
        async move { c.request_grant(&req).await }
    };
    let e = ask("busy").await.unwrap_err();
    assert!(
        matches!(&e, DriverError::Unavailable { message, .. } if message.contains("503") && message.contains("try later")),
        "{e:?}"
    );
    let e = ask("nolocation").await.unwrap_err();
    assert!(e.to_string().contains("202 without a Location"), "{e}");
    match ask("relative").await.unwrap() {
        GrantAnswer::Pending {
            location,
            retry_after,
        } => {
            assert_eq!(location, format!("http://{a}/relative/grant/v1/g-7"));
            assert_eq!(retry_after, Some(std::time::Duration::from_secs(9)));
        }
        other => panic!("{other:?}"),
    }
    let e = ask("garbage").await.unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid { message, .. } if message.contains("no Grant")),
        "{e:?}"
    );
    let e = ask("huge").await.unwrap_err();
    assert!(e.to_string().contains("more than 1048576 bytes"), "{e}");
    assert!(matches!(
        ask("auth").await.unwrap_err(),
        DriverError::Unauthenticated { .. }
    ));
    let e = ask("bad").await.unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid { message, .. } if message.contains("422") && message.contains("unknown VDU")),
        "{e:?}"
    );
    // Nobody listening: Unavailable.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let e = client(format!("http://127.0.0.1:{port}/grant/v1"))
        .request_grant(&req)
        .await
        .unwrap_err();
    assert!(matches!(e, DriverError::Unavailable { .. }), "{e:?}");
}

async fn scale(addr: SocketAddr, id: &str, kind: &str) -> Value {
    let r = post_json(
        addr,
        &format!("/vnflcm/v2/vnf_instances/{id}/scale"),
        &json!({"type": kind, "aspectId": "VDU1_scale"}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    wait_op(addr, r.header("location").unwrap()).await
}

/// SOL003 grants scale-in and terminate too (`removeResources`): with an NFVO they are asked,
/// each naming the VNFCs that go by their VIM resource; a rejected terminate leaves the
/// instance as it was (ROLLED_BACK), a granted one runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_in_and_terminate_ask_the_nfvo_with_the_resources_they_remove() {
    let dir = tempfile::tempdir().unwrap();
    let (n, nfvo_addr) = nfvo().await;
    let server = server_granted_by(nfvo_addr, dir.path()).await;
    let addr = server.local_addr();
    let id = create_instance(addr).await;
    n.set(
        &id,
        Verdict::Grant(vec![("VDU1", "AZ-2"), ("VDU1", "AZ-3"), ("VDU2", "AZ-4")]),
    );
    let loc = instantiate(addr, &id).await;
    assert_eq!(wait_op(addr, &loc).await["operationState"], "COMPLETED");
    // Scale out: the NFVO gives the new VNFC no zone, vnfm places it.
    let op = scale(addr, &id, "SCALE_OUT").await;
    assert_eq!(op["operationState"], "COMPLETED", "{op:#}");
    let before = servers(addr, &id).await;
    assert_eq!(before.len(), 4, "{before:?}");
    let newest = before
        .iter()
        .find(|(vnfc, _)| vnfc.ends_with("VDU1-2"))
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("no VNFC VDU1-2 in {before:?}"));

    // Scale in: asked, removing the newest VDU1 VNFC by its server id.
    let op = scale(addr, &id, "SCALE_IN").await;
    assert_eq!(op["operationState"], "COMPLETED", "{op:#}");
    let last = n.requests.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last["operation"], "SCALE", "{last:#}");
    assert_eq!(last["vnfLcmOpOccId"], op["id"]);
    let removed = last["removeResources"].as_array().unwrap();
    assert_eq!(removed.len(), 1, "{last:#}");
    assert_eq!(removed[0]["type"], "COMPUTE");
    assert_eq!(removed[0]["vduId"], "VDU1");
    assert_eq!(removed[0]["resource"]["resourceId"], newest.as_str());
    assert_eq!(
        op["grantId"],
        format!("nfvo-grant-{}", n.requests.lock().unwrap().len() - 1)
    );

    // Terminate, rejected: ROLLED_BACK, the instance still INSTANTIATED with its servers.
    n.set(&id, Verdict::Reject("terminations are frozen"));
    let terminate = || async {
        let r = post_json(
            addr,
            &format!("/vnflcm/v2/vnf_instances/{id}/terminate"),
            &json!({"terminationType": "FORCEFUL"}),
        )
        .await;
        assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
        wait_op(addr, r.header("location").unwrap()).await
    };
    let op = terminate().await;
    assert_eq!(op["operationState"], "ROLLED_BACK", "{op:#}");
    assert!(op["error"]["detail"]
        .as_str()
        .unwrap()
        .contains("terminations are frozen"));
    let last = n.requests.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last["operation"], "TERMINATE");
    assert_eq!(
        last["removeResources"].as_array().unwrap().len(),
        3,
        "{last:#}"
    );
    assert_eq!(servers(addr, &id).await.len(), 3, "nothing was deleted");

    // Granted: terminated.
    n.set(&id, Verdict::Grant(Vec::new()));
    let op = terminate().await;
    assert_eq!(op["operationState"], "COMPLETED", "{op:#}");
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    assert_eq!(inst["instantiationState"], "NOT_INSTANTIATED");
}
