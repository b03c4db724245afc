//! `scale_to_level`, `change_flavour` and `change_ext_conn` over a real socket (SOL003 v3.3.1
//! 5.4.6, 5.4.7, 5.4.11; issue 16), on the simulated cloud with the demo package (one
//! flavour; aspects VDU1_scale 0..=2 and VDU2_scale 0..=1; levels small and large; one
//! external CP, VDU1_CP1) and, for
//! change flavour, `examples/packages/flavours-vnf` (flavours small and large).
//! Cost: about 4 s.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::net::SocketAddr;

use serde_json::{json, Value};
use serve_common::*;

fn path(id: &str, op: &str) -> String {
    format!("/vnflcm/v2/vnf_instances/{id}/{op}")
}

/// A 4xx ProblemDetails whose detail contains every one of `words`.
fn refused(r: &Reply, status: u16, words: &[&str]) -> Value {
    let p = r.problem(status);
    let d = p["detail"].as_str().unwrap();
    for w in words {
        assert!(d.contains(w), "{status} not saying {w:?}: {p}");
    }
    p
}

async fn not_instantiated(addr: SocketAddr) -> String {
    let r = post_json(
        addr,
        "/vnflcm/v2/vnf_instances",
        &json!({"vnfdId": DEMO_VNFD}),
    )
    .await;
    assert_eq!(r.status, 201);
    r.json()["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_to_level_runs_every_aspect_it_changes_and_refuses_what_it_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let to_level = |body: Value| {
        let id = id.clone();
        async move { post_json(addr, &path(&id, "scale_to_level"), &body).await }
    };

    // Out to level 2, then in to 1: each one SCALE_TO_LEVEL occurrence.
    for level in [2, 1] {
        let r =
            to_level(json!({"scaleInfo": [{"aspectId": "VDU1_scale", "scaleLevel": level}]})).await;
        assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
        let op = wait_op(addr, r.header("location").unwrap()).await;
        assert_eq!(op["operationState"], "COMPLETED", "{op}");
        assert_eq!(op["operation"], "SCALE_TO_LEVEL", "{op}");
        assert_eq!(
            op["operationParams"]["scaleInfo"][0]["scaleLevel"], level,
            "{op}"
        );
        assert_eq!(scale_level(addr, &id, "VDU1_scale").await, level);
        assert_eq!(servers(addr, &id).await.len(), 3 + level as usize);
    }

    // Level "large" changes both aspects (issue 26: it was refused, "one aspect per
    // operation"): one SCALE_TO_LEVEL takes VDU1 to 4 VNFCs and VDU2 to 2.
    for (level, vdu1, vdu2, vnfcs) in [("large", 2, 1, 6), ("small", 0, 0, 3), ("large", 2, 1, 6)] {
        let r = to_level(json!({"instantiationLevelId": level})).await;
        assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
        let op = wait_op(addr, r.header("location").unwrap()).await;
        assert_eq!(op["operationState"], "COMPLETED", "{op}");
        assert_eq!(op["operation"], "SCALE_TO_LEVEL", "{op}");
        assert_eq!(op["operationParams"]["instantiationLevelId"], level, "{op}");
        assert_eq!(scale_level(addr, &id, "VDU1_scale").await, vdu1);
        assert_eq!(scale_level(addr, &id, "VDU2_scale").await, vdu2);
        assert_eq!(servers(addr, &id).await.len(), vnfcs);
    }
    // Nothing to change.
    let r = to_level(json!({"scaleInfo": [{"aspectId": "VDU1_scale", "scaleLevel": 2}]})).await;
    refused(&r, 422, &["already"]);
    // Out of range, unknown aspect or level, both or neither selector.
    let r = to_level(json!({"scaleInfo": [{"aspectId": "VDU1_scale", "scaleLevel": 3}]})).await;
    refused(&r, 422, &["maximum 2"]);
    let r = to_level(json!({"scaleInfo": [{"aspectId": "nope", "scaleLevel": 1}]})).await;
    refused(&r, 422, &["\"nope\"", "VDU1_scale"]);
    let r = to_level(json!({"instantiationLevelId": "huge"})).await;
    refused(&r, 422, &["\"huge\"", "large", "small"]);
    let r = to_level(json!({"instantiationLevelId": "large", "scaleInfo": []})).await;
    refused(&r, 422, &["exactly one"]);
    let r = to_level(json!({})).await;
    refused(&r, 422, &["exactly one"]);
    // Not a ScaleVnfToLevelRequest.
    let r = to_level(json!({"level": 1})).await;
    refused(&r, 400, &["ScaleVnfToLevelRequest"]);
    // Nothing of that was run: the level is still 2, and one instance took the next request.
    assert_eq!(scale_level(addr, &id, "VDU1_scale").await, 2);
    assert_eq!(ops(addr, &id, "SCALE_TO_LEVEL").await.len(), 5);

    // Unknown instance, NOT_INSTANTIATED instance.
    let body = json!({"scaleInfo": [{"aspectId": "VDU1_scale", "scaleLevel": 1}]});
    let r = post_json(addr, &path("nope", "scale_to_level"), &body).await;
    refused(&r, 404, &["nope"]);
    let other = not_instantiated(addr).await;
    let r = post_json(addr, &path(&other, "scale_to_level"), &body).await;
    refused(&r, 409, &["NOT_INSTANTIATED"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_flavour_of_one_flavour_says_why_it_is_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let idle = not_instantiated(addr).await;

    // The demo package has one flavour.
    let body = json!({"newFlavourId": "other"});
    let r = post_json(addr, &path(&id, "change_flavour"), &body).await;
    refused(&r, 409, &["one deployment flavour", "default"]);
    let r = post_json(addr, &path(&idle, "change_flavour"), &body).await;
    refused(&r, 409, &["NOT_INSTANTIATED"]);
    let r = post_json(addr, &path("nope", "change_flavour"), &body).await;
    refused(&r, 404, &["nope"]);
    let r = post_json(
        addr,
        &path(&id, "change_flavour"),
        &json!({"flavourId": "x"}),
    )
    .await;
    refused(&r, 400, &["newFlavourId"]);

    // Nothing ran.
    assert!(ops(addr, &id, "CHANGE_FLAVOUR").await.is_empty());
}

/// The instance's `extVirtualLinkInfo` as (id, network, CPDs).
async fn ext_links(addr: SocketAddr, id: &str) -> Vec<(String, String, Vec<String>)> {
    let v = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    v["instantiatedVnfInfo"]["extVirtualLinkInfo"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|l| {
            (
                l["id"].as_str().unwrap().to_owned(),
                l["resourceHandle"]["resourceId"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                l["currentVnfExtCpData"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["cpdId"].as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_ext_conn_runs_in_the_background_and_refuses_naming_field_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let idle = not_instantiated(addr).await;
    let before = servers(addr, &id).await;
    assert!(ext_links(addr, &id).await.is_empty());
    let body = |link: &str, net: &str| {
        json!({"extVirtualLinks": [{
            "id": link, "resourceId": net,
            "extCps": [{"cpdId": "VDU1_CP1", "cpConfig": {"VDU1_CP1_1": {
                "cpProtocolData": [{"layerProtocol": "IP_OVER_ETHERNET",
                    "ipOverEthernet": {"ipAddresses": [{"type": "IPV4", "numDynamicAddresses": 1}]}}]
            }}}]
        }], "additionalParams": {"note": "move VDU1_CP1"}})
    };

    // 202 with the occurrence; CHANGE_EXT_CONN completes; the servers are kept.
    for (link, net) in [("ext1", "net-a"), ("ext2", "net-b")] {
        let r = post_json(addr, &path(&id, "change_ext_conn"), &body(link, net)).await;
        assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
        let op = wait_op(addr, r.header("location").unwrap()).await;
        assert_eq!(op["operationState"], "COMPLETED", "{op}");
        assert_eq!(op["operation"], "CHANGE_EXT_CONN", "{op}");
        assert_eq!(
            op["operationParams"]["extVirtualLinks"][0]["id"], link,
            "{op}"
        );
        assert!(op["grantId"].is_string(), "{op}");
        // ext1 then ext2 takes VDU1_CP1: ext1, left without CPs, goes.
        assert_eq!(
            ext_links(addr, &id).await,
            [(link.to_owned(), net.to_owned(), vec!["VDU1_CP1".to_owned()])]
        );
        assert_eq!(servers(addr, &id).await, before);
    }
    let v = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    assert_eq!(
        v["instantiatedVnfInfo"]["extCpInfo"][0]["cpConfigId"], "VDU1_CP1_1",
        "{v}"
    );
    assert_eq!(
        v["_links"]["changeExtConn"]["href"],
        format!("/vnflcm/v2/vnf_instances/{id}/change_ext_conn")
    );

    // Refusals, naming the field and the value.
    let post = |body: Value| {
        let id = id.clone();
        async move { post_json(addr, &path(&id, "change_ext_conn"), &body).await }
    };
    let mut b = body("ext3", "net-c");
    b["extVirtualLinks"][0]["extCps"][0]["cpdId"] = json!("VDU2_CP1");
    refused(
        &post(b).await,
        422,
        &[
            "extVirtualLinks[0].extCps[0].cpdId",
            "\"VDU2_CP1\"",
            "VDU1_CP1",
        ],
    );
    let r = post(json!({"extVirtualLinks": [{"id": "ext3", "extCps": []}]})).await;
    refused(&r, 422, &["extVirtualLinks[0].resourceId"]);
    let r = post(json!({"extVirtualLinks": [{"id": "ext3", "resourceId": "n",
        "extCps": [{"cpdId": "VDU1_CP1", "cpConfig": [{"cpProtocolData": []}]}]}]}))
    .await;
    refused(&r, 422, &["extCps[0].cpConfig", "v3.3.1", "map"]);
    let r = post(json!({"extVirtualLinks": []})).await;
    refused(&r, 422, &["extVirtualLinks", "at least 1"]);
    let r = post(json!({})).await;
    refused(&r, 422, &["extVirtualLinks", "at least 1"]);
    let r = post(json!({"extVirtualLinks": [], "vnfcInfo": []})).await;
    refused(&r, 400, &["ChangeExtVnfConnectivityRequest", "vnfcInfo"]);
    let r = post_json(addr, &path(&idle, "change_ext_conn"), &body("e", "n")).await;
    refused(&r, 409, &["NOT_INSTANTIATED"]);
    let r = post_json(addr, &path("nope", "change_ext_conn"), &body("e", "n")).await;
    refused(&r, 404, &["nope"]);
    // Nothing of that ran: two occurrences, the instance on ext2.
    assert_eq!(ops(addr, &id, "CHANGE_EXT_CONN").await.len(), 2);
    assert_eq!(ext_links(addr, &id).await[0].0, "ext2");
}

/// `operate`: STOPPED then STARTED through the simulated VIM (servers SHUTOFF / ACTIVE);
/// `vnfState` and every `vnfcState` follow; the state rules and bad requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operate_stops_and_starts_the_servers() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let idle = not_instantiated(addr).await;
    let operate = |body: Value| {
        let id = id.clone();
        async move { post_json(addr, &path(&id, "operate"), &body).await }
    };
    for (to, extra) in [
        (
            "STOPPED",
            json!({"stopType": "GRACEFUL", "gracefulStopTimeout": 10}),
        ),
        ("STARTED", json!({})),
    ] {
        let mut body = extra.clone();
        body["changeStateTo"] = json!(to);
        let r = operate(body).await;
        assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
        let op = wait_op(addr, r.header("location").unwrap()).await;
        assert_eq!(op["operationState"], "COMPLETED", "{op}");
        assert_eq!(op["operation"], "OPERATE", "{op}");
        let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
            .await
            .json();
        let info = &inst["instantiatedVnfInfo"];
        assert_eq!(info["vnfState"], to, "{inst}");
        let vnfcs = info["vnfcInfo"].as_array().unwrap();
        assert_eq!(vnfcs.len(), 3);
        assert!(vnfcs.iter().all(|v| v["vnfcState"] == to), "{inst}");
        // Already there: 409 naming the state.
        let r = operate(json!({ "changeStateTo": to })).await;
        refused(&r, 409, &[to, "already"]);
    }
    let r = operate(json!({"changeStateTo": "STARTED", "stopType": "FORCEFUL"})).await;
    refused(&r, 422, &["STOPPED only"]);
    let r = operate(json!({"changeStateTo": "STOPPED", "vnfcInstanceId": ["x"]})).await;
    refused(&r, 422, &["whole instance"]);
    let r = operate(json!({"changeStateTo": "PAUSED"})).await;
    refused(&r, 400, &["OperateVnfRequest"]);
    let r = post_json(
        addr,
        &path(&idle, "operate"),
        &json!({"changeStateTo": "STOPPED"}),
    )
    .await;
    refused(&r, 409, &["NOT_INSTANTIATED"]);
    let r = post_json(
        addr,
        &path("nope", "operate"),
        &json!({"changeStateTo": "STOPPED"}),
    )
    .await;
    refused(&r, 404, &["nope"]);
    assert_eq!(ops(addr, &id, "OPERATE").await.len(), 2);
}

/// `examples/packages/flavours-vnf` copied to `dst`.
fn copy_dir(src: &std::path::Path, dst: &std::path::Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let to = dst.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &to);
        } else {
            std::fs::copy(&p, &to).unwrap();
        }
    }
}

/// The vnfdId of `examples/packages/flavours-vnf`.
const FLAVOURS_VNFD: &str = "5c0e7a3d-2f14-4b8e-a6d9-8e1b3c7f0a42";

/// `change_flavour` of a package with two flavours: small -> large (202, a CHANGE_FLAVOUR
/// occurrence that completes; VDU1-0 keeps its server, VDU1-1 and VDU2-0 are new, flavourId
/// and scaleStatus are large's), then the refusals (same flavour, unknown flavour, unknown
/// level, extVirtualLinks, not a ChangeVnfFlavourRequest), then back to small.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_flavour_runs_on_a_package_with_two_flavours() {
    let dir = tempfile::tempdir().unwrap();
    let pkgs = dir.path().join("packages");
    copy_dir(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/flavours-vnf"),
        &pkgs.join("flavours-vnf"),
    );
    // The demo cloud with the image of the package (`tiny`, as the OpenStack test cloud has).
    let demo = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/clouds/demo.yaml"),
    )
    .unwrap();
    let cloud = dir.path().join("cloud.yaml");
    std::fs::write(
        &cloud,
        demo.replace("images: [cirros,", "images: [tiny, cirros,"),
    )
    .unwrap();
    let mut c = config(dir.path(), 1);
    c.packages.dir = Some(pkgs);
    c.vim.cloud = Some(cloud);
    let server = start(c).await;
    let addr = server.local_addr();
    let (id, op) = create_and_instantiate(addr, FLAVOURS_VNFD, "small").await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    let small = servers(addr, &id).await;
    assert_eq!(small.keys().collect::<Vec<_>>(), ["VDU1-0"]);
    let change = |body: Value| {
        let id = id.clone();
        async move { post_json(addr, &path(&id, "change_flavour"), &body).await }
    };

    let r = change(json!({"newFlavourId": "large", "additionalParams": {"why": "test"}})).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = wait_op(addr, r.header("location").unwrap()).await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    assert_eq!(op["operation"], "CHANGE_FLAVOUR", "{op}");
    assert_eq!(op["operationParams"]["newFlavourId"], "large", "{op}");
    let large = servers(addr, &id).await;
    assert_eq!(
        large.keys().collect::<Vec<_>>(),
        ["VDU1-0", "VDU1-1", "VDU2-0"]
    );
    assert_eq!(large["VDU1-0"], small["VDU1-0"]);
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    assert_eq!(inst["instantiatedVnfInfo"]["flavourId"], "large", "{inst}");
    assert_eq!(scale_level(addr, &id, "VDU1_scale").await, 0);

    let r = change(json!({"newFlavourId": "large"})).await;
    refused(&r, 409, &["already"]);
    let r = change(json!({"newFlavourId": "huge"})).await;
    refused(&r, 422, &["\"huge\"", "large, small"]);
    let r = change(json!({"newFlavourId": "small", "instantiationLevelId": "max"})).await;
    refused(&r, 422, &["max"]);
    let r = change(json!({"newFlavourId": "small", "extVirtualLinks": [{"id": "x"}]})).await;
    refused(&r, 422, &["extVirtualLinks"]);
    let r = change(json!({"flavourId": "small"})).await;
    refused(&r, 400, &["ChangeVnfFlavourRequest"]);
    assert_eq!(ops(addr, &id, "CHANGE_FLAVOUR").await.len(), 1);

    let r = change(json!({"newFlavourId": "small"})).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = wait_op(addr, r.header("location").unwrap()).await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    assert_eq!(servers(addr, &id).await, small);
}
