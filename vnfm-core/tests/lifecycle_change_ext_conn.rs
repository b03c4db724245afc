//! Change external VNF connectivity (SOL003 v3.3.1 5.4.11) on the simulated cloud with the demo
//! package (one external CP, `VDU1_CP1`): the stack is updated with the same template and VNFCs
//! and the merged links in `nfv.CP` (Tacker's StandardUserData convention), the servers are
//! kept, the instance records the links; a failed update is FAILED_TEMP, retried or rolled back
//! to the old links; the refusals of SOL003.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{StackDriver, VirtualClock};
use vnfm_core::grant::ExtVirtualLinkData;
use vnfm_core::id::StackId;
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, LcmOperationStateType,
    LcmOperationType, VnfInstance,
};
use vnfm_core::lifecycle::change_ext_conn::ChangeExtVnfConnectivityRequest;
use vnfm_core::lifecycle::{Drivers, LcmConfig, LcmError, Lifecycle, OperationOptions};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::sim::{FaultKind, FaultySim, Method, SimCloud};
use vnfm_core::store::{MemoryStore, Store};

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

struct Env {
    lcm: Lifecycle,
    sim: SimCloud,
    faulty: FaultySim,
    store: MemoryStore,
    pkg: VnfPackage,
    _dir: tempfile::TempDir,
}

/// The lifecycle over the demo cloud with the demo package; `cp_in_template` makes a copy of
/// the package whose BaseHOT reads `[nfv, CP, VDU1_CP1, network]` in VDU1's resource (as
/// Tacker's samples pass a port's network to the nested template).
fn setup(cp_in_template: bool) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let src = examples().join("packages/demo-vnf");
    let pkg_dir = if cp_in_template {
        let dst = dir.path().join("demo-vnf");
        copy_dir(&src, &dst);
        let top = dst.join("BaseHOT/default/demo.yaml");
        let text = std::fs::read_to_string(&top).unwrap();
        let text = text.replacen(
            "      server_group: { get_resource: VDU1_host_spread }",
            "      server_group: { get_resource: VDU1_host_spread }\n      \
             net1: { get_param: [ nfv, CP, VDU1_CP1, network ] }",
            1,
        );
        std::fs::write(&top, text).unwrap();
        let nested = dst.join("BaseHOT/default/nested/VDU1.yaml");
        let text = std::fs::read_to_string(&nested).unwrap();
        let text = text.replacen(
            "  server_group:\n    type: string\n",
            "  server_group:\n    type: string\n  net1:\n    type: string\n    default: \"\"\n",
            1,
        );
        std::fs::write(&nested, text).unwrap();
        dst
    } else {
        src
    };
    let sim = SimCloud::new(
        CloudFile::load(examples().join("clouds/demo.yaml")).unwrap(),
        1,
    );
    let faulty = FaultySim::new(sim.clone());
    let clock = VirtualClock::new(
        chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc(),
    );
    let store = MemoryStore::new();
    let drivers = Drivers {
        stacks: Arc::new(faulty.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(store.clone()),
        clock: Arc::new(clock),
        cluster: None,
    };
    let mut config = LcmConfig::standard().unwrap();
    config.seed = 3;
    let pkg = fs::load(&pkg_dir).unwrap();
    Env {
        lcm: Lifecycle::new(drivers, config),
        sim,
        faulty,
        store,
        pkg,
        _dir: dir,
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

fn link(id: &str, net: &str, cp_config: Value) -> ExtVirtualLinkData {
    serde_json::from_value(json!({
        "id": id,
        "resourceId": net,
        "extCps": [{"cpdId": "VDU1_CP1", "cpConfig": cp_config}]
    }))
    .unwrap()
}

fn ip(config: &str, address: &str, subnet: &str) -> Value {
    json!({config: {"cpProtocolData": [{
        "layerProtocol": "IP_OVER_ETHERNET",
        "ipOverEthernet": {"ipAddresses": [
            {"type": "IPV4", "fixedAddresses": [address], "subnetId": subnet}
        ]}
    }]}})
}

async fn instantiated(env: &Env, links: Vec<ExtVirtualLinkData>) -> VnfInstance {
    let req: CreateVnfRequest =
        serde_json::from_value(json!({"vnfdId": env.pkg.descriptor_id})).unwrap();
    let inst = env.lcm.create(&env.pkg, &req).await.unwrap();
    let mut req = InstantiateVnfRequest::new("default");
    req.ext_virtual_links = links;
    let r = env
        .lcm
        .instantiate(&inst.id, &env.pkg, &req, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    r.instance
}

async fn change(
    env: &Env,
    inst: &VnfInstance,
    links: Vec<ExtVirtualLinkData>,
) -> Result<vnfm_core::lifecycle::OperationReport, LcmError> {
    env.lcm
        .change_ext_conn(
            &inst.id,
            &env.pkg,
            &ChangeExtVnfConnectivityRequest::new(links),
            &OperationOptions::default(),
        )
        .await
}

/// The `nfv` parameter of the instance's stack (shown as JSON text, as real Heat shows a
/// `json` parameter).
async fn nfv(env: &Env, inst: &VnfInstance) -> Value {
    let id = inst.metadata.as_ref().unwrap()["stackId"].as_str().unwrap();
    let stack = env.sim.show_stack(&StackId::from(id)).await.unwrap();
    let text = stack.parameters["nfv"]
        .as_str()
        .expect("nfv shown as JSON text");
    serde_json::from_str(text).unwrap()
}

/// The instance's links as (id, network, CPDs).
fn links(inst: &VnfInstance) -> Vec<(String, String, Vec<String>)> {
    inst.instantiated_vnf_info
        .as_ref()
        .unwrap()
        .ext_virtual_link_info
        .iter()
        .map(|l| {
            (
                l.id.clone(),
                l.resource_handle.resource_id.clone(),
                l.current_vnf_ext_cp_data
                    .iter()
                    .map(|c| c.cpd_id.clone())
                    .collect(),
            )
        })
        .collect()
}

fn l(id: &str, net: &str) -> (String, String, Vec<String>) {
    (id.into(), net.into(), vec!["VDU1_CP1".into()])
}

/// VNFC id → server id.
fn vnfcs(inst: &VnfInstance) -> BTreeMap<String, String> {
    inst.instantiated_vnf_info
        .as_ref()
        .unwrap()
        .vnfc_resource_info
        .iter()
        .map(|v| (v.id.clone(), v.compute_resource.resource_id.clone()))
        .collect()
}

fn cp_configs(inst: &VnfInstance) -> Vec<String> {
    inst.instantiated_vnf_info
        .as_ref()
        .unwrap()
        .ext_cp_info
        .iter()
        .map(|c| c.cp_config_id.clone())
        .collect()
}

#[tokio::test]
async fn change_ext_conn_updates_the_stack_keeps_the_servers_and_records_the_links() {
    let env = setup(false);
    let inst = instantiated(
        &env,
        vec![link("ext1", "net-a", ip("c1", "10.0.0.5", "sub-a"))],
    )
    .await;
    // Instantiate records the request's link and passes it as nfv.CP.
    assert_eq!(links(&inst), [l("ext1", "net-a")]);
    // Two VDU1 VNFCs: the first CP instance takes the one cpConfig, the second keeps its id.
    assert_eq!(cp_configs(&inst), ["c1", "VDU1_CP1-VDU1-1"]);
    let p = nfv(&env, &inst).await;
    assert_eq!(p["CP"]["VDU1_CP1"]["network"], "net-a", "{p}");
    assert_eq!(
        p["CP"]["VDU1_CP1"]["fixed_ips"],
        json!([{"ip_address": "10.0.0.5", "subnet": "sub-a"}])
    );
    let before = vnfcs(&inst);

    // A new link ext2 takes VDU1_CP1: ext1 is left without CPs and goes.
    let r = change(&env, &inst, vec![link("ext2", "net-b", json!({"c2": {}}))])
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(r.op_occ.operation, LcmOperationType::ChangeExtConn);
    assert_eq!(
        r.op_occ.operation_params.as_ref().unwrap()["extVirtualLinks"][0]["id"],
        "ext2"
    );
    let grant = r.grant.as_ref().expect("a grant");
    assert!(grant.add_resources.is_empty() && grant.remove_resources.is_empty());
    assert_eq!(r.op_occ.grant_id.as_ref(), Some(&grant.id));
    assert_eq!(links(&r.instance), [l("ext2", "net-b")]);
    assert_eq!(cp_configs(&r.instance), ["c2", "VDU1_CP1-VDU1-1"]);
    assert_eq!(vnfcs(&r.instance), before, "the servers are kept");
    let p = nfv(&env, &r.instance).await;
    assert_eq!(p["CP"]["VDU1_CP1"]["network"], "net-b", "{p}");
    assert!(p["CP"]["VDU1_CP1"].get("fixed_ips").is_none(), "{p}");
    // The VDU section is what it was: same VNFCs, same zones.
    assert_eq!(p["VDU"], nfv(&env, &inst).await["VDU"]);

    // A later heal of VDU1-1 (a stack update) passes the instance's links: no port goes back
    // to the old network.
    let heal: HealVnfRequest =
        serde_json::from_value(json!({"vnfcInstanceId": ["VDU1-1"]})).unwrap();
    let r = env
        .lcm
        .heal(&inst.id, &env.pkg, &heal, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_ne!(vnfcs(&r.instance)["VDU1-1"], before["VDU1-1"], "healed");
    assert_eq!(links(&r.instance), [l("ext2", "net-b")]);
    assert_eq!(cp_configs(&r.instance), ["c2", "VDU1_CP1-VDU1-1"]);
    assert_eq!(
        nfv(&env, &r.instance).await["CP"]["VDU1_CP1"]["network"],
        "net-b"
    );
}

#[tokio::test]
async fn a_template_reading_nfv_cp_gets_each_vnfc_s_network() {
    let env = setup(true);
    let inst = instantiated(&env, vec![link("ext1", "net-a", json!({}))]).await;
    let p = nfv(&env, &inst).await;
    // VDU1's resource is copied per VNFC, its get_param indexed: VDU1_CP1-0, VDU1_CP1-1.
    assert_eq!(p["CP"]["VDU1_CP1-0"]["network"], "net-a", "{p}");
    assert_eq!(p["CP"]["VDU1_CP1-1"]["network"], "net-a", "{p}");
    let r = change(&env, &inst, vec![link("ext1", "net-b", json!({}))])
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(vnfcs(&r.instance), vnfcs(&inst));
    let p = nfv(&env, &r.instance).await;
    assert_eq!(p["CP"]["VDU1_CP1-0"]["network"], "net-b", "{p}");
    assert_eq!(p["CP"]["VDU1_CP1-1"]["network"], "net-b", "{p}");
    assert_eq!(links(&r.instance), [l("ext1", "net-b")]);
}

#[tokio::test]
async fn a_failed_update_is_failed_temp_then_retried_or_rolled_back_to_the_old_links() {
    let env = setup(false);
    let inst = instantiated(&env, vec![link("ext1", "net-a", json!({}))]).await;
    env.faulty
        .fail_next(Method::UpdateStack, 1, FaultKind::Invalid);
    let r = change(&env, &inst, vec![link("ext1", "net-b", json!({}))])
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    let detail = &r.op_occ.error.as_ref().unwrap().detail;
    assert!(detail.contains("injected fault"), "{detail}");
    assert_eq!(links(&r.instance), [l("ext1", "net-a")]);
    // One operation at a time.
    let busy = change(&env, &inst, vec![link("ext1", "net-c", json!({}))]).await;
    assert!(matches!(busy, Err(LcmError::Conflict(_))), "{busy:?}");
    // Retry: the update goes through.
    let r = env
        .lcm
        .retry(&r.op_occ.id, &env.pkg, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(links(&r.instance), [l("ext1", "net-b")]);
    assert_eq!(
        nfv(&env, &r.instance).await["CP"]["VDU1_CP1"]["network"],
        "net-b"
    );

    // Heat applies the next change (net-c) but reading the servers back fails: FAILED_TEMP;
    // the rollback updates the stack back to net-b and the instance keeps it.
    env.faulty
        .fail_next(Method::ListResources, 1, FaultKind::Unavailable);
    let f = change(&env, &inst, vec![link("ext1", "net-c", json!({}))])
        .await
        .unwrap();
    assert_eq!(f.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(nfv(&env, &inst).await["CP"]["VDU1_CP1"]["network"], "net-c");
    let rb = env.lcm.rollback(&f.op_occ.id, &env.pkg).await.unwrap();
    assert_eq!(
        rb.op_occ.operation_state,
        LcmOperationStateType::RolledBack,
        "{:?}",
        rb.op_occ.error
    );
    assert_eq!(links(&rb.instance), [l("ext1", "net-b")]);
    assert_eq!(
        nfv(&env, &rb.instance).await["CP"]["VDU1_CP1"]["network"],
        "net-b"
    );
    assert_eq!(vnfcs(&rb.instance), vnfcs(&inst));
}

#[tokio::test]
async fn change_ext_conn_refusals_name_the_field_and_the_value() {
    let env = setup(false);
    let req: CreateVnfRequest =
        serde_json::from_value(json!({"vnfdId": env.pkg.descriptor_id})).unwrap();
    let idle = env.lcm.create(&env.pkg, &req).await.unwrap();
    let e = change(&env, &idle, vec![link("ext1", "net-a", json!({}))])
        .await
        .unwrap_err();
    assert!(
        matches!(&e, LcmError::Conflict(m) if m.contains("NOT_INSTANTIATED")),
        "{e:?}"
    );
    let inst = instantiated(&env, vec![]).await;
    let invalid = |e: LcmError, want: &[&str]| {
        let m = e.to_string();
        assert!(matches!(e, LcmError::Invalid(_)), "{m}");
        for w in want {
            assert!(m.contains(w), "{m:?} lacks {w:?}");
        }
    };
    invalid(
        change(&env, &inst, vec![]).await.unwrap_err(),
        &["extVirtualLinks", "at least 1"],
    );
    let mut unknown = link("ext1", "net-a", json!({}));
    unknown.ext_cps[0].cpd_id = "VDU9_CP1".into();
    invalid(
        change(&env, &inst, vec![unknown]).await.unwrap_err(),
        &[
            "extVirtualLinks[0].extCps[0].cpdId",
            "\"VDU9_CP1\"",
            "VDU1_CP1",
        ],
    );
    invalid(
        change(
            &env,
            &inst,
            vec![
                link("ext1", "net-a", json!({})),
                link("ext2", "net-b", json!({})),
            ],
        )
        .await
        .unwrap_err(),
        &[
            "extVirtualLinks[1].extCps[0].cpdId",
            "also extVirtualLinks[0]",
        ],
    );
    let mut twice = link("ext1", "net-b", json!({}));
    twice.ext_cps.clear();
    invalid(
        change(&env, &inst, vec![link("ext1", "net-a", json!({})), twice])
            .await
            .unwrap_err(),
        &["extVirtualLinks[1].id", "\"ext1\""],
    );
    let mut no_net = link("ext1", "", json!({}));
    no_net.resource_id.clear();
    invalid(
        change(&env, &inst, vec![no_net]).await.unwrap_err(),
        &["extVirtualLinks[0].resourceId"],
    );
    let mut no_cps = link("ext1", "net-a", json!({}));
    no_cps.ext_cps.clear();
    invalid(
        change(&env, &inst, vec![no_cps]).await.unwrap_err(),
        &["extVirtualLinks[0].extCps"],
    );
    let mut vim = link("ext1", "net-a", json!({}));
    vim.vim_connection_id = Some("vim-9".into());
    invalid(
        change(&env, &inst, vec![vim]).await.unwrap_err(),
        &["extVirtualLinks[0].vimConnectionId", "\"vim-9\"", "vim-0"],
    );
    // Nothing started: the instance has no link and no CHANGE_EXT_CONN occurrence.
    let now = env.store.instance(&inst.id).await.unwrap();
    assert!(links(&now).is_empty());
}
