//! `vnfm serve` as the NFVO of the SOL003 Grant interface, through real sockets: another
//! VNFM's grant requests decided on the simulated demo cloud (four zones, AZ-1 too small for
//! the demo VNF's VDUs), stored, read back after a restart; bad bodies and refusals as
//! ProblemDetails naming the field; a GrantRequest with Tacker's scale-out constraint.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::collections::BTreeSet;
use std::net::SocketAddr;

use serde_json::{json, Value};
use serve_common::*;

const GRANTS: &str = "/grant/v1/grants";

fn auth() -> String {
    format!("Bearer {BEARER}")
}

async fn post_grant(addr: SocketAddr, body: &Value) -> Reply {
    post_raw(addr, &serde_json::to_vec(body).unwrap()).await
}

async fn post_raw(addr: SocketAddr, body: &[u8]) -> Reply {
    let a = auth();
    request(
        addr,
        "POST",
        GRANTS,
        &[("Content-Type", "application/json"), ("Authorization", &a)],
        body,
    )
    .await
}

async fn get_authed(addr: SocketAddr, path: &str) -> Reply {
    let a = auth();
    request(addr, "GET", path, &[("Authorization", &a)], b"").await
}

fn config(dir: &std::path::Path) -> vnfm_cli::config::Config {
    let mut c = serve_common::config(dir, 1);
    c.server.api_token = Some(vnfm_cli::config::Secret::new(BEARER));
    c
}

/// A GrantRequest for `n` new VNFCs of VDU1 (`c0`, `c1`, ...) of `vnfd`, with the given
/// constraints.
fn grant_request(vnfd: &str, n: usize, constraints: Value) -> Value {
    let add: Vec<Value> = (0..n)
        .map(|i| {
            json!({"id": format!("c{i}"), "type": "COMPUTE", "vduId": "VDU1",
                   "resourceTemplateId": "VDU1"})
        })
        .collect();
    json!({
        "vnfInstanceId": "other-vnfm-instance-1",
        "vnfLcmOpOccId": "other-vnfm-op-1",
        "vnfdId": vnfd,
        "flavourId": "default",
        "operation": "INSTANTIATE",
        "isAutomaticInvocation": false,
        "addResources": add,
        "placementConstraints": constraints,
        "_links": {
            "vnfLcmOpOcc": {"href": "http://other-vnfm/vnflcm/v2/vnf_lcm_op_occs/other-vnfm-op-1"},
            "vnfInstance": {"href": "http://other-vnfm/vnflcm/v2/vnf_instances/other-vnfm-instance-1"}
        }
    })
}

fn zone_anti_affinity(n: usize, best_effort: bool) -> Value {
    let refs: Vec<Value> = (0..n)
        .map(|i| json!({"idType": "GRANT", "resourceId": format!("c{i}")}))
        .collect();
    json!([{"affinityOrAntiAffinity": "ANTI_AFFINITY", "scope": "ZONE",
            "resource": refs, "fallbackBestEffort": best_effort}])
}

/// The zone name granted to each resource definition: `addResources[].zoneId` through
/// `zones[]`.
fn granted_zones(g: &Value) -> Vec<String> {
    let zones = g["zones"].as_array().unwrap();
    g["addResources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let zid = a["zoneId"].as_str().unwrap();
            let z = zones.iter().find(|z| z["id"] == zid).unwrap_or_else(|| {
                panic!("addResources zoneId {zid} refers to no zones[] entry: {g}")
            });
            z["zoneId"].as_str().unwrap().to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_is_decided_stored_read_back_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path())).await;
    let addr = server.local_addr();

    // ETSI's own request (no resources): granted, with the request's links.
    let body = grant_request(DEMO_VNFD, 0, json!([]));
    let r = post_json(addr, GRANTS, &body).await;
    let p = r.problem(401);
    assert!(p["detail"].as_str().unwrap().contains("Grant API"), "{p}");
    assert!(r.header("www-authenticate").is_some());

    let r = post_grant(addr, &body).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("version"), Some("1.4.0"));
    let g = r.json();
    let id = g["id"].as_str().unwrap().to_owned();
    let location = r.header("location").unwrap().to_owned();
    assert_eq!(location, format!("{GRANTS}/{id}"));
    assert_eq!(g["vnfInstanceId"], "other-vnfm-instance-1");
    assert_eq!(g["vnfLcmOpOccId"], "other-vnfm-op-1");
    assert_eq!(g["_links"]["self"]["href"], location);
    assert_eq!(
        g["_links"]["vnfLcmOpOcc"]["href"],
        "http://other-vnfm/vnflcm/v2/vnf_lcm_op_occs/other-vnfm-op-1"
    );

    let r = get_authed(addr, &location).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), g);
    get(addr, &location).await.problem(401);

    // The api_versions resources are open, as the LCM API's.
    for path in ["/grant/api_versions", "/grant/v1/api_versions"] {
        let r = get(addr, path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("version"), Some("1.4.0"));
        assert_eq!(r.json()["uriPrefix"], "/grant/v1");
        assert_eq!(r.json()["apiVersions"][0]["version"], "1.4.0");
    }

    // Other methods: 405 with Allow, as a ProblemDetails.
    let a = auth();
    for (method, path, allow) in [
        ("GET", GRANTS.to_owned(), "POST"),
        ("PUT", GRANTS.to_owned(), "POST"),
        ("DELETE", location.clone(), "GET"),
        ("PATCH", location.clone(), "GET"),
        ("POST", "/grant/v1/api_versions".to_owned(), "GET"),
    ] {
        let r = request(addr, method, &path, &[("Authorization", &a)], b"").await;
        r.problem(405);
        let allowed = r.header("allow").unwrap_or_default();
        assert!(
            allowed.contains(allow),
            "{method} {path}: Allow {allowed:?}"
        );
    }
    let p = get_authed(addr, &format!("{GRANTS}/nfvo-grant-999"))
        .await
        .problem(404);
    assert!(
        p["detail"].as_str().unwrap().contains("nfvo-grant-999"),
        "{p}"
    );
    get_authed(addr, &format!("{GRANTS}/nfvo-grant-01"))
        .await
        .problem(404);

    server.shutdown().await.unwrap();
    let server = start(config(dir.path())).await;
    let addr = server.local_addr();
    let r = get_authed(addr, &location).await;
    assert_eq!(r.status, 200, "the grant survives a restart");
    assert_eq!(r.json(), g);
    // Numbers go on after a restart: a new grant is a new id.
    let r = post_grant(addr, &body).await;
    assert_eq!(r.status, 201);
    assert_ne!(r.json()["id"], g["id"]);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zones_come_from_the_catalogue_under_the_requests_constraints() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path())).await;
    let addr = server.local_addr();

    // The demo VNFD is known: VDU1 needs 2 GiB, which AZ-1's hosts have not. Three VNFCs
    // apart by zone: AZ-2, AZ-3, AZ-4.
    let r = post_grant(
        addr,
        &grant_request(DEMO_VNFD, 3, zone_anti_affinity(3, false)),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let g = r.json();
    let zones: BTreeSet<String> = granted_zones(&g).into_iter().collect();
    assert_eq!(
        zones,
        ["AZ-2", "AZ-3", "AZ-4"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    assert!(g["additionalParams"]["vduDemand"]
        .as_str()
        .unwrap()
        .contains("virtual compute"));

    // A fourth cannot be apart from the three: refused, naming the constraint.
    let r = post_grant(
        addr,
        &grant_request(DEMO_VNFD, 4, zone_anti_affinity(4, false)),
    )
    .await;
    let p = r.problem(403);
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("placementConstraints[0]"), "{p}");
    // Best effort: granted, the relaxation said.
    let r = post_grant(
        addr,
        &grant_request(DEMO_VNFD, 4, zone_anti_affinity(4, true)),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert!(r.json()["additionalParams"]["relaxedPlacementConstraints"].is_array());

    // Removals are acknowledged.
    let mut body = grant_request(DEMO_VNFD, 0, json!([]));
    body["operation"] = json!("TERMINATE");
    body["removeResources"] = json!([{"id": "gone-1", "type": "COMPUTE",
        "resourceTemplateId": "VDU1", "resource": {"resourceId": "server-x"}}]);
    let r = post_grant(addr, &body).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["removeResources"][0]["resourceDefinitionId"],
        "gone-1"
    );

    // An unknown GRANT reference: refused, naming the field and the value.
    let constraints = json!([{"affinityOrAntiAffinity": "AFFINITY", "scope": "NFVI_NODE",
        "resource": [{"idType": "GRANT", "resourceId": "c0"},
                     {"idType": "GRANT", "resourceId": "c9"}]}]);
    let r = post_grant(addr, &grant_request(DEMO_VNFD, 1, constraints)).await;
    let p = r.problem(403);
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("placementConstraints[0].resource[1].resourceId") && detail.contains("c9"),
        "{p}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_problem_details_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.server.body_limit = 2 * 1024 * 1024;
    let server = start(c).await;
    let addr = server.local_addr();

    let mut body = grant_request(DEMO_VNFD, 1, json!([]));
    body.as_object_mut().unwrap().remove("vnfLcmOpOccId");
    let p = post_grant(addr, &body).await.problem(400);
    assert!(
        p["detail"].as_str().unwrap().contains("vnfLcmOpOccId"),
        "{p}"
    );

    let mut body = grant_request(DEMO_VNFD, 1, json!([]));
    body["operation"] = json!("EXPLODE");
    let p = post_grant(addr, &body).await.problem(400);
    let d = p["detail"].as_str().unwrap();
    assert!(d.contains("operation") && d.contains("EXPLODE"), "{p}");

    let mut body = grant_request(DEMO_VNFD, 1, json!([]));
    body["addResources"][0]["type"] = json!("GPU");
    let p = post_grant(addr, &body).await.problem(400);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("addResources[0].type") && d.contains("GPU"),
        "{p}"
    );

    let p = post_raw(addr, b"{not json").await.problem(400);
    assert!(
        p["detail"].as_str().unwrap().contains("GrantRequest"),
        "{p}"
    );

    // 10,000 resources to add: over the documented limit (1,000), refused before any work.
    let p = post_grant(addr, &grant_request(DEMO_VNFD, 10_000, json!([])))
        .await
        .problem(422);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("addResources has 10000 entries") && d.contains("at most 1000"),
        "{p}"
    );

    // A COMPUTE resource without vduId is the VDU its resourceTemplateId names (as Tacker
    // 16.0.0 sends it); one naming no VDU of the package's flavour is refused naming vduId.
    let mut body = grant_request(DEMO_VNFD, 1, json!([]));
    body["addResources"][0]
        .as_object_mut()
        .unwrap()
        .remove("vduId");
    let r = post_grant(addr, &body).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    body["addResources"][0]["resourceTemplateId"] = json!("VDU9");
    let p = post_grant(addr, &body).await.problem(422);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("addResources[0].vduId") && d.contains("VDU9"),
        "{p}"
    );

    // A body over [server] body_limit.
    let big = vec![b' '; 2 * 1024 * 1024 + 1];
    post_raw(addr, &big).await.problem(413);
    server.shutdown().await.unwrap();
}

/// Tacker's scale-out GrantRequest constraint (`reselection_cases.json`,
/// `grant_placement_constraints.scale_out`, from Tacker's `test_vnflcm_driver_v2.py`): as
/// Tacker sends it, its `RES_MGMT` references name servers this NFVO's VIM does not have
/// (refused, naming the first); with them naming the servers of an instance on the demo cloud,
/// granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tackers_scale_out_grant_request() {
    let Some(text) = vnfm_core::vectors::read_vector(
        env!("CARGO_MANIFEST_DIR"),
        "tacker/az_reselection/reselection_cases.json",
    ) else {
        return;
    };
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut constraint = doc["grant_placement_constraints"]["scale_out"]["expect"][0].clone();
    assert_eq!(
        constraint["resource"][0]["resourceId"],
        "<new VDU1 res def id>"
    );
    constraint["resource"][0]["resourceId"] = json!("c0");
    let mut body = grant_request(DEMO_VNFD, 1, json!([constraint.clone()]));
    body["operation"] = json!("SCALE");

    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path())).await;
    let addr = server.local_addr();
    // The instance is one this NFVO granted an INSTANTIATE to.
    let r = post_grant(addr, &grant_request(DEMO_VNFD, 0, json!([]))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let p = post_grant(addr, &body).await.problem(403);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("placementConstraints[0].resource[1].resourceId") && d.contains("res_id_VDU2"),
        "{p}"
    );

    // The same with the servers of a demo instance (VDU1 x2, VDU2 x1), each by its VIM id.
    let a = auth();
    let r = request(
        addr,
        "POST",
        "/vnflcm/v2/vnf_instances",
        &[("Content-Type", "application/json"), ("Authorization", &a)],
        &serde_json::to_vec(&json!({"vnfdId": DEMO_VNFD})).unwrap(),
    )
    .await;
    assert_eq!(r.status, 201);
    let inst = r.json()["id"].as_str().unwrap().to_owned();
    let r = request(
        addr,
        "POST",
        &format!("/vnflcm/v2/vnf_instances/{inst}/instantiate"),
        &[("Content-Type", "application/json"), ("Authorization", &a)],
        &serde_json::to_vec(&json!({"flavourId": "default"})).unwrap(),
    )
    .await;
    assert_eq!(r.status, 202);
    let loc = r.header("location").unwrap().to_owned();
    let op = eventually(30, "the instantiate", || async {
        let op = get_authed(addr, &loc).await.json();
        (op["operationState"] == "COMPLETED").then_some(op)
    })
    .await;
    assert_eq!(op["operationState"], "COMPLETED");
    let inst = get_authed(addr, &format!("/vnflcm/v2/vnf_instances/{inst}"))
        .await
        .json();
    let vnfcs = inst["instantiatedVnfInfo"]["vnfcResourceInfo"]
        .as_array()
        .unwrap();
    let server_of = |vdu: &str, n: usize| -> String {
        vnfcs.iter().filter(|v| v["vduId"] == vdu).nth(n).unwrap()["computeResource"]["resourceId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let mut refs = constraint["resource"].as_array().unwrap().clone();
    // Tacker's res_id_VDU2, res_id_VDU1_1, res_id_VDU1_2 (the demo has no third VDU1).
    refs[1]["resourceId"] = json!(server_of("VDU2", 0));
    refs[2]["resourceId"] = json!(server_of("VDU1", 0));
    refs[3]["resourceId"] = json!(server_of("VDU1", 1));
    refs.truncate(4);
    // NFVI_NODE in Tacker's; ZONE here, so that the grant shows the existing VNFCs counted:
    // the three are in three zones, the new one goes to the fourth that fits (none left, so
    // the hard constraint refuses it), and NFVI_NODE grants it.
    constraint["resource"] = json!(refs);
    let mut body = grant_request(DEMO_VNFD, 1, json!([constraint.clone()]));
    body["operation"] = json!("SCALE");
    let r = post_grant(addr, &body).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let g = r.json();
    assert_eq!(granted_zones(&g).len(), 1);
    assert!(
        g["additionalParams"]["ignoredPlacementConstraintMembers"].is_null(),
        "{g}"
    );
    let used: BTreeSet<String> = vnfcs
        .iter()
        .map(|v| {
            v["zoneId"]
                .as_str()
                .or(v["metadata"]["zone"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect();
    constraint["scope"] = json!("ZONE");
    let mut body = grant_request(DEMO_VNFD, 1, json!([constraint]));
    body["operation"] = json!("SCALE");
    let r = post_grant(addr, &body).await;
    if used.len() == 3 {
        // Three zones taken, AZ-1 too small for VDU1: nowhere apart.
        let p = r.problem(403);
        assert!(
            p["detail"]
                .as_str()
                .unwrap()
                .contains("placementConstraints[0]"),
            "{p}"
        );
    } else {
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let z = granted_zones(&r.json());
        assert!(!used.contains(&z[0]), "{z:?} is one of {used:?}");
    }
    server.shutdown().await.unwrap();
}

/// Review finding: each distinct `RES_MGMT` reference is one lookup in the VIM (Nova), and the
/// per-list limits (1,000 constraints of 1,000 references) would let a million through. Two
/// constraints of 501 distinct references each (each constraint within its own limit): refused
/// before any lookup, 422 naming `placementConstraints` with the count and the limit, no grant
/// stored. Without the cap, the lookups run and the first unknown server is refused (403).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn res_mgmt_references_are_capped_over_all_constraints() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path())).await;
    let addr = server.local_addr();
    let constraint = |from: usize| {
        let mut refs = vec![json!({"idType": "GRANT", "resourceId": "c0"})];
        refs.extend(
            (from..from + 501)
                .map(|i| json!({"idType": "RES_MGMT", "resourceId": format!("server-{i}")})),
        );
        json!({"affinityOrAntiAffinity": "ANTI_AFFINITY", "scope": "NFVI_NODE",
               "resource": refs, "fallbackBestEffort": true})
    };
    let body = grant_request(DEMO_VNFD, 1, json!([constraint(0), constraint(501)]));
    let p = post_grant(addr, &body).await.problem(422);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("placementConstraints") && d.contains("1002") && d.contains("at most 1000"),
        "{p}"
    );
    // Nothing stored: the counter did not move (the next grant is the first).
    let r = post_grant(addr, &grant_request(DEMO_VNFD, 0, json!([]))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["id"], "nfvo-grant-1");
    // The same references repeated in both constraints count once: within the cap, looked up,
    // and refused for the first unknown server.
    let body = grant_request(DEMO_VNFD, 1, json!([constraint(0), constraint(0)]));
    let p = post_grant(addr, &body).await.problem(403);
    assert!(
        p["detail"].as_str().unwrap().contains("RES_MGMT reference"),
        "{p}"
    );
    server.shutdown().await.unwrap();
}

async fn post_authed(addr: SocketAddr, path: &str, body: &Value) -> Reply {
    let a = auth();
    request(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json"), ("Authorization", &a)],
        &serde_json::to_vec(body).unwrap(),
    )
    .await
}

/// `grant_request` of `operation` for instance `inst` in occurrence `op`.
fn grant_of(inst: &str, op: &str, operation: &str, n: usize, constraints: Value) -> Value {
    let mut body = grant_request(DEMO_VNFD, n, constraints);
    body["vnfInstanceId"] = json!(inst);
    body["vnfLcmOpOccId"] = json!(op);
    body["operation"] = json!(operation);
    if operation != "INSTANTIATE" {
        body.as_object_mut().unwrap().remove("flavourId");
    }
    for (i, a) in body["addResources"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        a["id"] = json!(format!("{op}-c{i}"));
    }
    if let Some(c) = body["placementConstraints"].as_array_mut() {
        for c in c {
            for r in c["resource"].as_array_mut().unwrap() {
                let id = r["resourceId"].as_str().unwrap().to_owned();
                r["resourceId"] = json!(format!("{op}-{id}"));
            }
        }
    }
    body
}

/// Issue 29, acceptance 6: a GrantRequest naming an unknown vnfdId, flavourId or
/// vnfInstanceId is refused with a ProblemDetails naming the field and the value, nothing is
/// stored, and the server answers afterwards; the registry of instances follows the grants
/// (INSTANTIATE registers, TERMINATE forgets, an INSTANTIATE of an instance that was scaled
/// is refused) and survives a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_packages_flavours_and_instances_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path())).await;
    let addr = server.local_addr();

    let mut body = grant_of("i-1", "op-1", "INSTANTIATE", 1, json!([]));
    body["vnfdId"] = json!("myVnF");
    let p = post_grant(addr, &body).await.problem(422);
    let d = p["detail"].as_str().unwrap();
    assert!(d.contains("vnfdId: \"myVnF\""), "{p}");

    let mut body = grant_of("i-1", "op-1", "INSTANTIATE", 1, json!([]));
    body["flavourId"] = json!("string");
    let p = post_grant(addr, &body).await.problem(422);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("flavourId: \"string\"") && d.contains("default"),
        "{p}"
    );

    let p = post_grant(addr, &grant_of("i-1", "op-2", "SCALE", 1, json!([])))
        .await
        .problem(422);
    let d = p["detail"].as_str().unwrap();
    assert!(d.contains("vnfInstanceId: \"i-1\""), "{p}");
    let p = post_grant(addr, &grant_of("i-1", "op-2", "TERMINATE", 0, json!([])))
        .await
        .problem(422);
    assert!(
        p["detail"].as_str().unwrap().contains("vnfInstanceId"),
        "{p}"
    );

    // A 10 MB body: 413 ([server] body_limit, 2 MiB here), nothing read further.
    let big = vec![b' '; 10 * 1024 * 1024];
    post_raw(addr, &big).await.problem(413);

    // Nothing was stored: the first grant is nfvo-grant-1.
    let r = post_grant(addr, &grant_of("i-1", "op-1", "INSTANTIATE", 1, json!([]))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["id"], "nfvo-grant-1");
    // Instantiated again before anything else (Tacker after a failed instantiate): taken.
    let r = post_grant(addr, &grant_of("i-1", "op-1b", "INSTANTIATE", 1, json!([]))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    // Another VNFD than the instance's.
    let mut body = grant_of("i-1", "op-2", "SCALE", 1, json!([]));
    body["vnfdId"] = json!("another-vnfd");
    let p = post_grant(addr, &body).await.problem(422);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("vnfdId: \"another-vnfd\""),
        "{p}"
    );
    let r = post_grant(addr, &grant_of("i-1", "op-2", "SCALE", 1, json!([]))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));

    // The registry survives a restart: instantiated, so not again.
    server.shutdown().await.unwrap();
    let server = start(config(dir.path())).await;
    let addr = server.local_addr();
    let p = post_grant(addr, &grant_of("i-1", "op-3", "INSTANTIATE", 1, json!([])))
        .await
        .problem(403);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("vnfInstanceId") && d.contains("already instantiated"),
        "{p}"
    );
    let r = post_grant(addr, &grant_of("i-1", "op-4", "TERMINATE", 0, json!([]))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    // Terminated: forgotten.
    post_grant(addr, &grant_of("i-1", "op-5", "SCALE", 1, json!([])))
        .await
        .problem(422);
    let r = post_grant(addr, &grant_of("i-1", "op-6", "INSTANTIATE", 1, json!([]))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let last: u64 = r.json()["id"]
        .as_str()
        .unwrap()
        .trim_start_matches("nfvo-grant-")
        .parse()
        .unwrap();

    // A constraint naming a resource that is not there: refused naming it, no grant stored
    // (its number is skipped: GET answers 404), the instance as it was, the server answers.
    let unknown = json!([{"affinityOrAntiAffinity": "ANTI_AFFINITY", "scope": "ZONE",
        "resource": [{"idType": "GRANT", "resourceId": "c0"},
                     {"idType": "RES_MGMT", "resourceId": "no-such-server"}]}]);
    let p = post_grant(addr, &grant_of("i-1", "op-7", "SCALE", 1, unknown))
        .await
        .problem(403);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("placementConstraints[0].resource[1].resourceId")
            && d.contains("no-such-server"),
        "{p}"
    );
    get_authed(addr, &format!("{GRANTS}/nfvo-grant-{}", last + 1))
        .await
        .problem(404);
    let r = post_grant(addr, &grant_of("i-1", "op-8", "SCALE", 1, json!([]))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    server.shutdown().await.unwrap();
}

/// The reservation's allocated instances, from `GET /promise/v1/reservations/{id}`.
async fn reserved(addr: SocketAddr, id: &str) -> u64 {
    let r = get_authed(addr, &format!("/promise/v1/reservations/{id}")).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()["allocated"]["instances"].as_u64().unwrap_or(0)
}

/// The resources of a grant tagged with the reservation.
fn drawn_in(g: &Value) -> usize {
    g["addResources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["reservationId"] == "nfvo-res")
        .count()
}

/// Issue 29, acceptance 1: the grants answered to another VNFM draw from the reservation of
/// `[server.grants] reservation` (the COMPUTE resources granted into its zone), a draw that
/// does not fit is refused with nothing stored, a scale-in's removeResources (Tacker's own
/// ids, a server this VIM does not show) give back the instance's newest draw of their VDU,
/// and a terminate gives back the rest: the ledger is back to its start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_draw_from_the_reservation_and_give_back_on_scale_in_and_terminate() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.server.grants.reservation = Some("nfvo-res".into());
    let server = start(c).await;
    let addr = server.local_addr();
    // AZ-3 has the most free capacity of the demo cloud: capacity-aware grants go there.
    let zone = "AZ-3";

    // The reservation does not exist yet: refused naming it, nothing stored.
    let p = post_grant(addr, &grant_of("i-1", "op-1", "INSTANTIATE", 2, json!([])))
        .await
        .problem(403);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("additionalParams.reservationId") && d.contains("nfvo-res"),
        "{p}"
    );
    let r = post_authed(
        addr,
        "/promise/v1/pools",
        &json!({"zone": zone, "capacity": {"cores": 64, "ram": 262144, "instances": 100,
                "size": 10000}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    // Room for two VNFCs of VDU1 (one instance each).
    let r = post_authed(
        addr,
        "/promise/v1/reservations",
        &json!({"id": "nfvo-res", "zone": zone, "capacity": {"cores": 16, "ram": 65536,
                "instances": 2, "size": 1000}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(reserved(addr, "nfvo-res").await, 0);

    // Instantiate: both VNFCs, granted into the reservation's zone, draw.
    let r = post_grant(addr, &grant_of("i-1", "op-1", "INSTANTIATE", 2, json!([]))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let g = r.json();
    assert_eq!(granted_zones(&g), [zone, zone]);
    assert_eq!(drawn_in(&g), 2, "{g}");
    assert_eq!(reserved(addr, "nfvo-res").await, 2);
    let first = g["id"].as_str().unwrap().to_owned();

    // A scale-out into the full reservation: refused, nothing drawn or stored.
    let p = post_grant(addr, &grant_of("i-1", "op-2", "SCALE", 1, json!([])))
        .await
        .problem(403);
    let d = p["detail"].as_str().unwrap();
    assert!(
        d.contains("additionalParams.reservationId") && d.contains("nothing was drawn"),
        "{p}"
    );
    assert_eq!(reserved(addr, "nfvo-res").await, 2);

    // A scale-in of one VNFC (Tacker's removeResources: a new id, the server by its VIM id,
    // which this VIM does not show): the newest draw of VDU1 goes back.
    let mut scale_in = grant_of("i-1", "op-3", "SCALE", 0, json!([]));
    scale_in["removeResources"] = json!([{"id": "9b1e0d2c-tacker-uuid", "type": "COMPUTE",
        "resourceTemplateId": "VDU1", "resource": {"resourceId": "server-of-another-vim"}}]);
    let r = post_grant(addr, &scale_in).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(reserved(addr, "nfvo-res").await, 1);
    // Room again: the scale-out draws.
    let r = post_grant(addr, &grant_of("i-1", "op-4", "SCALE", 1, json!([]))).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(drawn_in(&r.json()), 1);
    assert_eq!(reserved(addr, "nfvo-res").await, 2);

    // The terminate gives back the rest: the ledger as it started.
    let mut term = grant_of("i-1", "op-5", "TERMINATE", 0, json!([]));
    term["removeResources"] = json!([{"id": "another-uuid", "type": "COMPUTE",
        "resourceTemplateId": "VDU1", "resource": {"resourceId": "server-2"}}]);
    let r = post_grant(addr, &term).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(reserved(addr, "nfvo-res").await, 0);
    let r = get_authed(addr, &format!("{GRANTS}/{first}")).await;
    assert_eq!(drawn_in(&r.json()), 2, "the grant as it was answered");
    server.shutdown().await.unwrap();
}
