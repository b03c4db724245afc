//! Scale to level of several aspects at once on the simulated cloud (issue 26: SOL003 5.4.6
//! lets a `ScaleVnfToLevelRequest` change every aspect an instantiation level names; vnfm
//! answered 422 "one aspect per operation"). The demo package's level `large` takes VDU1_scale
//! to 2 and VDU2_scale to 1: one occurrence, one grant, one stack update, the level of each
//! aspect recorded, and a rollback that restores every aspect.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{
    CreateStack, DriverError, ListResources, MarkUnhealthy, OpOccFilter, Stack, StackDriver,
    StackResource, Store, UpdateStack, VirtualClock,
};
use vnfm_core::id::StackId;
use vnfm_core::lcm::{
    CreateVnfRequest, InstantiateVnfRequest, LcmOperationStateType, LcmOperationType, VnfInstance,
};
use vnfm_core::lifecycle::to_level::ScaleVnfToLevelRequest;
use vnfm_core::lifecycle::{Drivers, LcmConfig, Lifecycle, OperationOptions};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::placement::Selection;
use vnfm_core::sim::{BuildFault, FaultySim, SimCloud};
use vnfm_core::store::MemoryStore;

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

/// The simulator (with its fault injection), counting its stack updates.
#[derive(Clone, Debug)]
struct Counting {
    sim: FaultySim,
    updates: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl StackDriver for Counting {
    async fn create_stack(&self, req: CreateStack) -> Result<StackId, DriverError> {
        self.sim.create_stack(req).await
    }
    async fn update_stack(&self, req: UpdateStack) -> Result<(), DriverError> {
        self.updates.fetch_add(1, Ordering::SeqCst);
        self.sim.update_stack(req).await
    }
    async fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError> {
        self.sim.show_stack(id).await
    }
    async fn delete_stack(&self, id: &StackId) -> Result<(), DriverError> {
        self.sim.delete_stack(id).await
    }
    async fn list_resources(&self, req: ListResources) -> Result<Vec<StackResource>, DriverError> {
        self.sim.list_resources(req).await
    }
    async fn mark_unhealthy(&self, req: MarkUnhealthy) -> Result<(), DriverError> {
        self.sim.mark_unhealthy(req).await
    }
}

struct Setup {
    lcm: Lifecycle,
    sim: SimCloud,
    faults: FaultySim,
    pkg: VnfPackage,
    store: MemoryStore,
    updates: Arc<AtomicUsize>,
}

/// The demo package on the demo cloud; `best_effort`: the zone anti-affinity of VDU1 may be
/// relaxed (the demo cloud has three zones, one full: without it VDU1 cannot grow).
fn setup(best_effort: bool) -> Setup {
    let sim = SimCloud::new(
        CloudFile::load(examples().join("clouds/demo.yaml")).unwrap(),
        1,
    );
    let updates = Arc::new(AtomicUsize::new(0));
    let faults = FaultySim::new(sim.clone());
    let store = MemoryStore::new();
    let clock = VirtualClock::new(
        chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc(),
    );
    let drivers = Drivers {
        stacks: Arc::new(Counting {
            sim: faults.clone(),
            updates: updates.clone(),
        }),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(store.clone()),
        clock: Arc::new(clock),
        cluster: None,
    };
    let mut config = LcmConfig::standard().unwrap();
    config.reselect_zones = true;
    config.seed = 3;
    config.fallback_best_effort = best_effort;
    config.selection = Selection::CapacityAware;
    config.grant_selection = Selection::CapacityAware;
    let pkg = fs::load(&examples().join("packages/demo-vnf")).unwrap();
    Setup {
        lcm: Lifecycle::new(drivers, config),
        sim,
        faults,
        pkg,
        store,
        updates,
    }
}

async fn instantiated(s: &Setup) -> VnfInstance {
    let req: CreateVnfRequest =
        serde_json::from_value(serde_json::json!({"vnfdId": s.pkg.descriptor_id})).unwrap();
    let inst = s.lcm.create(&s.pkg, &req).await.unwrap();
    let r = s
        .lcm
        .instantiate(
            &inst.id,
            &s.pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    r.instance
}

fn to_level(v: serde_json::Value) -> ScaleVnfToLevelRequest {
    serde_json::from_value(v).unwrap()
}

/// VNFC id -> server id.
fn servers(i: &VnfInstance) -> BTreeMap<String, String> {
    i.instantiated_vnf_info
        .as_ref()
        .unwrap()
        .vnfc_resource_info
        .iter()
        .map(|v| (v.id.clone(), v.compute_resource.resource_id.clone()))
        .collect()
}

fn levels(i: &VnfInstance) -> (Option<u32>, Option<u32>) {
    let info = i.instantiated_vnf_info.as_ref().unwrap();
    (
        info.scale_level("VDU1_scale"),
        info.scale_level("VDU2_scale"),
    )
}

#[tokio::test]
async fn a_level_of_two_aspects_is_scaled_in_one_operation() {
    let s = setup(true);
    let inst = instantiated(&s).await;
    let before = servers(&inst);
    assert_eq!(before.len(), 3);
    let updates = s.updates.load(Ordering::SeqCst);

    // small -> large: VDU1_scale 0 -> 2, VDU2_scale 0 -> 1.
    let r = s
        .lcm
        .scale_to_level(
            &inst.id,
            &s.pkg,
            &to_level(serde_json::json!({"instantiationLevelId": "large"})),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(r.op_occ.operation, LcmOperationType::ScaleToLevel);
    assert_eq!(levels(&r.instance), (Some(2), Some(1)));
    let after = servers(&r.instance);
    let ids: BTreeSet<&str> = after.keys().map(String::as_str).collect();
    assert_eq!(
        ids,
        BTreeSet::from(["VDU1-0", "VDU1-1", "VDU1-2", "VDU1-3", "VDU2-0", "VDU2-1"])
    );
    for (vnfc, server) in &before {
        assert_eq!(after.get(vnfc), Some(server), "{vnfc} kept its server");
    }
    assert_eq!(s.sim.server_ids().len(), 6);
    // One stack update for both aspects (no reselection was needed).
    assert_eq!(r.op_occ.attempts.len(), 1, "{:?}", r.op_occ.attempts);
    assert_eq!(s.updates.load(Ordering::SeqCst), updates + 1);
    // One grant, SCALE_TO_LEVEL, of the three new VNFCs.
    // One grant for the three new VNFCs (each with its zone).
    let g = r.grant.as_ref().unwrap();
    assert!(!g.add_resources.is_empty(), "{g:?}");
    assert_eq!(
        r.op_occ.operation_params.as_ref().unwrap()["instantiationLevelId"],
        "large"
    );

    // large -> small by scaleInfo: both aspects in; the newest VNFCs go.
    let r = s
        .lcm
        .scale_to_level(
            &inst.id,
            &s.pkg,
            &to_level(serde_json::json!({"scaleInfo": [
                {"aspectId": "VDU1_scale", "scaleLevel": 0},
                {"aspectId": "VDU2_scale", "scaleLevel": 0}]})),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(levels(&r.instance), (Some(0), Some(0)));
    assert_eq!(servers(&r.instance), before);
    assert_eq!(s.sim.server_ids().len(), 3);

    // One aspect out and one in, in one operation.
    let r = s
        .lcm
        .scale_to_level(
            &inst.id,
            &s.pkg,
            &to_level(serde_json::json!({"scaleInfo": [
                {"aspectId": "VDU1_scale", "scaleLevel": 1},
                {"aspectId": "VDU2_scale", "scaleLevel": 1}]})),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let r = s
        .lcm
        .scale_to_level(
            &inst.id,
            &s.pkg,
            &to_level(serde_json::json!({"scaleInfo": [
                {"aspectId": "VDU1_scale", "scaleLevel": 2},
                {"aspectId": "VDU2_scale", "scaleLevel": 0}]})),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(levels(&r.instance), (Some(2), Some(0)));
    let ids: BTreeSet<String> = servers(&r.instance).into_keys().collect();
    assert_eq!(
        ids,
        ["VDU1-0", "VDU1-1", "VDU1-2", "VDU1-3", "VDU2-0"]
            .map(String::from)
            .into()
    );
    let ops = s
        .store
        .op_occs(OpOccFilter::instance(inst.id.clone()))
        .await
        .unwrap();
    assert_eq!(
        ops.iter()
            .filter(|o| o.operation == LcmOperationType::ScaleToLevel)
            .count(),
        4
    );
}

#[tokio::test]
async fn a_failed_level_of_two_aspects_rolls_every_aspect_back() {
    // A new VDU1 server fails to build (Nova fault, not capacity: no reselection): VDU2_scale
    // 1 -> 0 and VDU1_scale 0 -> 2 in one operation fails.
    let s = setup(true);
    let inst = instantiated(&s).await;
    let r = s
        .lcm
        .scale_to_level(
            &inst.id,
            &s.pkg,
            &to_level(serde_json::json!({"scaleInfo": [
                {"aspectId": "VDU2_scale", "scaleLevel": 1}]})),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let before = r.instance.clone();
    assert_eq!(levels(&before), (Some(0), Some(1)));
    assert_eq!(servers(&before).len(), 4);
    s.faults.fail_next_builds(
        1,
        BuildFault::Fault {
            code: 500,
            message: "injected".into(),
        },
    );

    let r = s
        .lcm
        .scale_to_level(
            &inst.id,
            &s.pkg,
            &to_level(serde_json::json!({"scaleInfo": [
                {"aspectId": "VDU1_scale", "scaleLevel": 2},
                {"aspectId": "VDU2_scale", "scaleLevel": 0}]})),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        r.op_occ.operation_state,
        LcmOperationStateType::FailedTemp,
        "{:?}",
        r.op_occ
    );
    let rb = s.lcm.rollback(&r.op_occ.id, &s.pkg).await.unwrap();
    assert_eq!(
        rb.op_occ.operation_state,
        LcmOperationStateType::RolledBack,
        "{:?}",
        rb.op_occ.error
    );
    let now = s.store.instance(&inst.id).await.unwrap();
    assert_eq!(levels(&now), (Some(0), Some(1)), "every aspect as before");
    let restored = servers(&now);
    assert_eq!(
        restored.keys().collect::<Vec<_>>(),
        servers(&before).keys().collect::<Vec<_>>()
    );
    // Every VNFC the instance records is a server of the cloud (one the failed update removed
    // was created again and read back).
    let cloud: BTreeSet<String> = s
        .sim
        .server_ids()
        .into_iter()
        .map(|i| i.as_str().to_owned())
        .collect();
    for (vnfc, server) in &restored {
        assert!(cloud.contains(server), "{vnfc}: {server} not in {cloud:?}");
    }
    assert_eq!(cloud.len(), 4, "{cloud:?}");
}

#[tokio::test]
async fn levels_beyond_a_vdus_maximum_or_unchanged_start_nothing() {
    let s = setup(true);
    let inst = instantiated(&s).await;
    let e = s
        .lcm
        .scale_to_level(
            &inst.id,
            &s.pkg,
            &to_level(serde_json::json!({"instantiationLevelId": "small"})),
            &OperationOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("already"), "{e}");
    let ops = s
        .store
        .op_occs(OpOccFilter::instance(inst.id.clone()))
        .await
        .unwrap();
    assert_eq!(ops.len(), 1, "only the instantiate");
}
