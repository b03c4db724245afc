//! Change flavour (SOL003 v3.3.1 5.4.7) on the simulated cloud with the two-flavour example
//! package (`small`: one VDU1; `large`: two VDU1 and one VDU2): the stack is updated with the
//! new flavour's template, Heat keeps VDU1-0's server, creates and deletes the rest; a failed
//! update is FAILED_TEMP, retried or rolled back; the refusals of SOL003.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::VirtualClock;
use vnfm_core::lcm::{
    CreateVnfRequest, InstantiateVnfRequest, LcmOperationStateType, LcmOperationType, VnfInstance,
};
use vnfm_core::lifecycle::change_flavour::ChangeVnfFlavourRequest;
use vnfm_core::lifecycle::{Drivers, LcmConfig, LcmError, Lifecycle, OperationOptions};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::placement::Selection;
use vnfm_core::sim::{FaultKind, FaultySim, Method, SimCloud};
use vnfm_core::store::MemoryStore;

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

const CLOUD: &str = "zones:
  AZ-1:
    hosts:
      compute-1: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
  AZ-2:
    hosts:
      compute-2: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
flavors:
  m1.tiny: {vcpus: 1, memory_mb: 512, disk_gb: 1}
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
images: [tiny]
";

struct Env {
    lcm: Lifecycle,
    sim: SimCloud,
    faulty: FaultySim,
    pkg: VnfPackage,
    _dir: tempfile::TempDir,
}

fn setup() -> Env {
    setup_in(CLOUD, Selection::CapacityAware)
}

fn setup_in(cloud_text: &str, grant_selection: Selection) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let cloud = dir.path().join("cloud.yaml");
    std::fs::write(&cloud, cloud_text).unwrap();
    let sim = SimCloud::new(CloudFile::load(&cloud).unwrap(), 1);
    let faulty = FaultySim::new(sim.clone());
    let clock = VirtualClock::new(
        chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc(),
    );
    let drivers = Drivers {
        stacks: Arc::new(faulty.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(MemoryStore::new()),
        clock: Arc::new(clock),
        cluster: None,
    };
    let mut config = LcmConfig::standard().unwrap();
    config.seed = 5;
    config.grant_selection = grant_selection;
    let pkg = fs::load(&examples().join("packages/flavours-vnf")).unwrap();
    Env {
        lcm: Lifecycle::new(drivers, config),
        sim,
        faulty,
        pkg,
        _dir: dir,
    }
}

async fn instantiated(env: &Env, flavour: &str) -> VnfInstance {
    let req: CreateVnfRequest =
        serde_json::from_value(json!({"vnfdId": env.pkg.descriptor_id})).unwrap();
    let inst = env.lcm.create(&env.pkg, &req).await.unwrap();
    let r = env
        .lcm
        .instantiate(
            &inst.id,
            &env.pkg,
            &InstantiateVnfRequest::new(flavour),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    r.instance
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

fn flavour_of(inst: &VnfInstance) -> &str {
    &inst.instantiated_vnf_info.as_ref().unwrap().flavour_id
}

fn level_of(inst: &VnfInstance, aspect: &str) -> Option<u32> {
    inst.instantiated_vnf_info
        .as_ref()
        .unwrap()
        .scale_level(aspect)
}

fn servers(sim: &SimCloud) -> Vec<String> {
    let mut v: Vec<String> = sim
        .server_ids()
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn change_flavour_updates_the_stack_keeping_what_heat_keeps() {
    let env = setup();
    let inst = instantiated(&env, "small").await;
    let small = vnfcs(&inst);
    assert_eq!(small.keys().collect::<Vec<_>>(), ["VDU1-0"]);
    // small -> large: VDU1-0 stays (same server), VDU1-1 and VDU2-0 are new.
    let r = env
        .lcm
        .change_flavour(
            &inst.id,
            &env.pkg,
            &ChangeVnfFlavourRequest::new("large"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(r.op_occ.operation, LcmOperationType::ChangeFlavour);
    assert_eq!(
        r.op_occ.operation_params.as_ref().unwrap()["newFlavourId"],
        "large"
    );
    let grant = r.grant.as_ref().expect("a grant");
    assert_eq!(grant.add_resources.len(), 2, "{grant:?}");
    let large = vnfcs(&r.instance);
    assert_eq!(
        large.keys().collect::<Vec<_>>(),
        ["VDU1-0", "VDU1-1", "VDU2-0"]
    );
    assert_eq!(
        large["VDU1-0"], small["VDU1-0"],
        "Heat keeps VDU1-0's server"
    );
    assert_eq!(flavour_of(&r.instance), "large");
    assert_eq!(level_of(&r.instance, "VDU1_scale"), Some(0));
    assert_eq!(servers(&env.sim).len(), 3);
    let info = r.instance.instantiated_vnf_info.as_ref().unwrap();
    assert_eq!(info.vnfc_info.len(), 3);
    assert_eq!(
        info.max_scale_levels
            .iter()
            .map(|s| (s.aspect_id.as_str(), s.scale_level))
            .collect::<Vec<_>>(),
        [("VDU1_scale", 1)]
    );

    // large -> small: VDU2-0 and VDU1-1 go; VDU1-0 keeps its server.
    let r = env
        .lcm
        .change_flavour(
            &inst.id,
            &env.pkg,
            &ChangeVnfFlavourRequest::new("small"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(flavour_of(&r.instance), "small");
    let grant = r.grant.as_ref().expect("a grant");
    assert!(grant.add_resources.is_empty(), "{grant:?}");
    assert_eq!(vnfcs(&r.instance), small);
    assert_eq!(servers(&env.sim), vec![small["VDU1-0"].clone()]);

    // small -> large at level peak: three VDU1, VDU1_scale at 1.
    let r = env
        .lcm
        .change_flavour(
            &inst.id,
            &env.pkg,
            &ChangeVnfFlavourRequest::new("large").at_level("peak"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(
        vnfcs(&r.instance).keys().collect::<Vec<_>>(),
        ["VDU1-0", "VDU1-1", "VDU1-2", "VDU2-0"]
    );
    assert_eq!(level_of(&r.instance, "VDU1_scale"), Some(1));
    assert_eq!(servers(&env.sim).len(), 4);
}

#[tokio::test]
async fn a_failed_change_is_failed_temp_then_retried_or_rolled_back() {
    let env = setup();
    let inst = instantiated(&env, "small").await;
    let small = vnfcs(&inst);
    // Heat refuses the update: FAILED_TEMP with its reason, the instance unchanged.
    env.faulty
        .fail_next(Method::UpdateStack, 1, FaultKind::Invalid);
    let r = env
        .lcm
        .change_flavour(
            &inst.id,
            &env.pkg,
            &ChangeVnfFlavourRequest::new("large"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    let detail = &r.op_occ.error.as_ref().unwrap().detail;
    assert!(detail.contains("injected fault"), "{detail}");
    assert_eq!(flavour_of(&r.instance), "small");
    // Retry: the update goes through.
    let r = env
        .lcm
        .retry(&r.op_occ.id, &env.pkg, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(flavour_of(&r.instance), "large");
    let large = vnfcs(&r.instance);
    assert_eq!(large.len(), 3);
    assert_eq!(large["VDU1-0"], small["VDU1-0"]);

    // A change back to small whose update fails half-way (after Heat took it) is rolled back:
    // the stack is updated back to large's template, the instance stays large.
    env.faulty
        .fail_next(Method::UpdateStack, 1, FaultKind::Unavailable);
    let f = env
        .lcm
        .change_flavour(
            &inst.id,
            &env.pkg,
            &ChangeVnfFlavourRequest::new("small"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(f.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    // One operation at a time: another change waits for this one to end.
    let busy = env
        .lcm
        .change_flavour(
            &inst.id,
            &env.pkg,
            &ChangeVnfFlavourRequest::new("small"),
            &OperationOptions::default(),
        )
        .await;
    assert!(matches!(busy, Err(LcmError::Conflict(_))), "{busy:?}");
    let rb = env.lcm.rollback(&f.op_occ.id, &env.pkg).await.unwrap();
    assert_eq!(
        rb.op_occ.operation_state,
        LcmOperationStateType::RolledBack,
        "{:?}",
        rb.op_occ.error
    );
    assert_eq!(flavour_of(&rb.instance), "large");
    assert_eq!(vnfcs(&rb.instance), large);
    let mut want: Vec<String> = large.values().cloned().collect();
    want.sort();
    assert_eq!(servers(&env.sim), want);
}

#[tokio::test]
async fn a_rollback_after_heat_applied_the_new_flavour_restores_the_old() {
    let env = setup();
    let inst = instantiated(&env, "small").await;
    let small = vnfcs(&inst);
    // Heat applies the update (the large stack exists) but reading the servers back fails:
    // FAILED_TEMP; the rollback updates the stack back to small's template.
    env.faulty
        .fail_next(Method::ListResources, 1, FaultKind::Unavailable);
    let r = env
        .lcm
        .change_flavour(
            &inst.id,
            &env.pkg,
            &ChangeVnfFlavourRequest::new("large"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(servers(&env.sim).len(), 3, "the large stack was applied");
    let rb = env.lcm.rollback(&r.op_occ.id, &env.pkg).await.unwrap();
    assert_eq!(
        rb.op_occ.operation_state,
        LcmOperationStateType::RolledBack,
        "{:?}",
        rb.op_occ.error
    );
    assert_eq!(flavour_of(&rb.instance), "small");
    assert_eq!(vnfcs(&rb.instance), small);
    assert_eq!(servers(&env.sim), vec![small["VDU1-0"].clone()]);
}

#[tokio::test]
async fn change_flavour_refusals() {
    let env = setup();
    let req: CreateVnfRequest =
        serde_json::from_value(json!({"vnfdId": env.pkg.descriptor_id})).unwrap();
    let idle = env.lcm.create(&env.pkg, &req).await.unwrap();
    let opts = OperationOptions::default();
    let run = |id: vnfm_core::id::VnfInstanceId, req: ChangeVnfFlavourRequest| {
        let lcm = &env.lcm;
        let pkg = &env.pkg;
        let opts = &opts;
        async move { lcm.change_flavour(&id, pkg, &req, opts).await }
    };
    // Not instantiated: 409.
    let e = run(idle.id.clone(), ChangeVnfFlavourRequest::new("large"))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, LcmError::Conflict(m) if m.contains("NOT_INSTANTIATED")),
        "{e:?}"
    );
    let inst = instantiated(&env, "small").await;
    // The same flavour: 409.
    let e = run(inst.id.clone(), ChangeVnfFlavourRequest::new("small"))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, LcmError::Conflict(m) if m.contains("already")),
        "{e:?}"
    );
    // An unknown flavour: 422 naming the package's.
    let e = run(inst.id.clone(), ChangeVnfFlavourRequest::new("huge"))
        .await
        .unwrap_err();
    let m = e.to_string();
    assert!(
        matches!(e, LcmError::Invalid(_)) && m.contains("large, small"),
        "{m}"
    );
    // An unknown level of the new flavour: 422 naming its levels.
    let e = run(
        inst.id.clone(),
        ChangeVnfFlavourRequest::new("large").at_level("max"),
    )
    .await
    .unwrap_err();
    let m = e.to_string();
    assert!(
        matches!(e, LcmError::Invalid(_)) && m.contains("base, peak"),
        "{m}"
    );
    // extVirtualLinks: 422 naming it.
    let mut with_links = ChangeVnfFlavourRequest::new("large");
    with_links.ext_virtual_links = Some(json!([{"id": "x"}]));
    let e = run(inst.id.clone(), with_links).await.unwrap_err();
    let m = e.to_string();
    assert!(
        matches!(e, LcmError::Invalid(_)) && m.contains("extVirtualLinks"),
        "{m}"
    );
    // Nothing started: the instance is still small with its one VNFC.
    assert_eq!(servers(&env.sim).len(), 1);

    // A package with one flavour: 409 naming it.
    let demo = fs::load(&examples().join("packages/demo-vnf")).unwrap();
    let mut other = inst.clone();
    other.vnfd_id = demo.descriptor_id.clone();
    let e = vnfm_core::lifecycle::change_flavour::check(
        &demo,
        &other,
        &ChangeVnfFlavourRequest::new("large"),
    )
    .unwrap_err();
    assert!(
        matches!(&e, LcmError::Conflict(m) if m.contains("one deployment flavour (default)")),
        "{e:?}"
    );
}

/// One host with room for one m1.small and one m1.tiny: `large` (two VDU1) does not fit. The
/// capacity-aware granter refuses the grant before any stack update; a `random` granter grants
/// and Heat fails the update (UPDATE_FAILED, Nova's "No valid host"). Either way FAILED_TEMP
/// with the reason; the rollback updates the stack back to `small`'s template and VNFC.
#[tokio::test]
async fn a_change_that_does_not_fit_is_failed_temp_and_rolled_back() {
    for (selection, reason) in [
        (Selection::CapacityAware, "capacity exhausted"),
        (Selection::Random, "No valid host"),
    ] {
        does_not_fit(selection, reason).await;
    }
}

async fn does_not_fit(selection: Selection, reason: &str) {
    let env = setup_in(
        "zones:
  AZ-1:
    hosts:
      compute-1: {vcpus: 4, memory_mb: 3072, disk_gb: 160}
flavors:
  m1.tiny: {vcpus: 1, memory_mb: 512, disk_gb: 1}
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
images: [tiny]
",
        selection,
    );
    let inst = instantiated(&env, "small").await;
    let small = vnfcs(&inst);
    let r = env
        .lcm
        .change_flavour(
            &inst.id,
            &env.pkg,
            &ChangeVnfFlavourRequest::new("large"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    let detail = &r.op_occ.error.as_ref().unwrap().detail;
    assert!(detail.contains(reason), "{selection:?}: {detail}");
    assert_eq!(flavour_of(&r.instance), "small");
    let rb = env.lcm.rollback(&r.op_occ.id, &env.pkg).await.unwrap();
    assert_eq!(
        rb.op_occ.operation_state,
        LcmOperationStateType::RolledBack,
        "{:?}",
        rb.op_occ.error
    );
    assert_eq!(flavour_of(&rb.instance), "small");
    assert_eq!(vnfcs(&rb.instance), small);
    assert_eq!(servers(&env.sim), vec![small["VDU1-0"].clone()]);
}
