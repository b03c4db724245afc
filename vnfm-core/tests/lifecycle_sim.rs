//! End to end on the simulated cloud: the demo package through instantiate (with a zone that
//! is out of resources and the reselection that saves the deployment), scale out, heal, scale
//! in and terminate, checking the stored instance and operation occurrences at each step.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{Clock, ComputeInventory, OpOccFilter, Store, VirtualClock};
use vnfm_core::id::ZoneId;
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, LcmOperationStateType, ScaleType,
    ScaleVnfRequest, TerminateVnfRequest, VnfInstance,
};
use vnfm_core::lifecycle::{Drivers, FailureKind, LcmConfig, Lifecycle, OperationOptions};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::placement::Selection;
use vnfm_core::reselect::AttemptOutcome;
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

/// The simulated demo cloud, seed 1.
fn demo_sim() -> SimCloud {
    SimCloud::new(
        CloudFile::load(examples().join("clouds/demo.yaml")).unwrap(),
        1,
    )
}

fn setup(reselect: bool, selection: Selection) -> (Lifecycle, SimCloud, VnfPackage, MemoryStore) {
    setup_with(reselect, selection, false)
}

fn setup_with(
    reselect: bool,
    selection: Selection,
    best_effort: bool,
) -> (Lifecycle, SimCloud, VnfPackage, MemoryStore) {
    let sim = demo_sim();
    let (lcm, pkg, store, _) = setup_over(&sim, Arc::new(sim.clone()), reselect, |c| {
        c.fallback_best_effort = best_effort;
        c.selection = selection;
        c.grant_selection = selection;
    });
    (lcm, sim, pkg, store)
}

/// The lifecycle over `sim`, with `stacks` as its stack driver (the simulator, or a wrapper of
/// it), seed 3, the demo package; `tune` adjusts the configuration.
fn setup_over(
    sim: &SimCloud,
    stacks: Arc<dyn vnfm_core::driver::StackDriver>,
    reselect: bool,
    tune: impl FnOnce(&mut LcmConfig),
) -> (Lifecycle, VnfPackage, MemoryStore, VirtualClock) {
    let store = MemoryStore::new();
    let clock = VirtualClock::new(start());
    let drivers = Drivers {
        stacks,
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(store.clone()),
        clock: Arc::new(clock.clone()),
        cluster: None,
    };
    let mut config = LcmConfig::standard().unwrap();
    config.reselect_zones = reselect;
    config.seed = 3;
    tune(&mut config);
    let pkg = fs::load(&examples().join("packages/demo-vnf")).unwrap();
    (Lifecycle::new(drivers, config), pkg, store, clock)
}

fn start() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .to_utc()
}

async fn created(lcm: &Lifecycle, pkg: &VnfPackage) -> VnfInstance {
    let mut req: CreateVnfRequest =
        serde_json::from_value(serde_json::json!({"vnfdId": pkg.descriptor_id})).unwrap();
    req.vnf_instance_name = Some("demo".into());
    lcm.create(pkg, &req).await.unwrap()
}

fn zones_of(inst: &VnfInstance) -> BTreeMap<String, ZoneId> {
    inst.instantiated_vnf_info
        .as_ref()
        .unwrap()
        .vnfc_resource_info
        .iter()
        .map(|v| (v.id.clone(), v.zone_id.clone().unwrap()))
        .collect()
}

fn pin(vdu: &str, zone: &str) -> OperationOptions {
    OperationOptions {
        pinned: [(vdu.to_owned(), ZoneId::from(zone))].into_iter().collect(),
        automatic: false,
        ..OperationOptions::default()
    }
}

#[tokio::test]
async fn instantiate_reselects_out_of_a_full_zone() {
    let (lcm, sim, pkg, store) = setup(true, Selection::Random);
    let inst = created(&lcm, &pkg).await;
    // The NFVO grants VDU1 into AZ-1, which cannot hold an m1.small.
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &pin("VDU1-0", "AZ-1"),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let attempts = &r.op_occ.attempts;
    assert!(attempts.len() >= 2, "{attempts:?}");
    assert_eq!(attempts[0].outcome, Some(AttemptOutcome::Failed));
    assert!(attempts[0]
        .status_reason
        .as_deref()
        .unwrap()
        .contains("No valid host was found"));
    assert_eq!(attempts[0].failed_zones, vec![ZoneId::from("AZ-1")]);
    assert_eq!(
        attempts.last().unwrap().outcome,
        Some(AttemptOutcome::Succeeded)
    );
    // Every VNFC in a zone of its own (zone anti-affinity over VDU1 and VDU2), none in AZ-1.
    let zones = zones_of(&r.instance);
    assert_eq!(zones.len(), 3, "{zones:?}");
    let distinct: BTreeSet<_> = zones.values().collect();
    assert_eq!(distinct.len(), 3);
    assert!(!distinct.contains(&ZoneId::from("AZ-1")));
    // What Nova says matches what the instance records.
    for v in &r
        .instance
        .instantiated_vnf_info
        .as_ref()
        .unwrap()
        .vnfc_resource_info
    {
        let s = sim
            .server(&v.compute_resource.resource_id.clone().into())
            .await
            .unwrap();
        assert_eq!(s.status, "ACTIVE");
        assert_eq!(s.zone.as_ref(), v.zone_id.as_ref());
        let host = v.metadata.as_ref().unwrap()["host"].as_str().unwrap();
        assert_eq!(s.host.as_ref().unwrap().as_str(), host);
    }
    // Stored: instance INSTANTIATED, op COMPLETED with the trace.
    let stored = store.instance(&inst.id).await.unwrap();
    assert!(stored.is_instantiated());
    let ops = store
        .op_occs(OpOccFilter::instance(inst.id.clone()))
        .await
        .unwrap();
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].operation_state, LcmOperationStateType::Completed);
    assert_eq!(ops[0].attempts, *attempts);
}

/// The NFVO granted VDU1-0 into AZ-2, which then lost every nova-compute: Nova's API refuses
/// the server with "The requested availability zone is not available" (HTTP 400), as real Nova
/// 34 does when every host of the zone is disabled. That is a zone failure like a full zone:
/// it is reselected, and AZ-2 is never chosen again.
#[tokio::test]
async fn instantiate_reselects_out_of_a_zone_that_became_unavailable() {
    // Best effort: with AZ-2 gone only AZ-3 and AZ-4 hold the demo's m1.small and m1.medium
    // VNFCs, so the zone anti-affinity over the three cannot hold.
    let (lcm, sim, pkg, _) = setup_with(true, Selection::Random, true);
    let inst = created(&lcm, &pkg).await;
    sim.set_zone_available("AZ-2", false).unwrap();
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &pin("VDU1-0", "AZ-2"),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let attempts = &r.op_occ.attempts;
    assert!(attempts.len() >= 2, "{attempts:?}");
    let first = attempts[0].status_reason.as_deref().unwrap();
    assert!(
        first.contains("The requested availability zone is not available (HTTP 400)"),
        "{first}"
    );
    // (The local granter may also have put a VNFC into the small AZ-1: both fail in one round.)
    assert!(
        attempts[0].failed_zones.contains(&ZoneId::from("AZ-2")),
        "{attempts:?}"
    );
    for a in &attempts[1..] {
        assert!(
            !a.zones.values().any(|z| z.as_str() == "AZ-2"),
            "AZ-2 chosen again: {attempts:?}"
        );
    }
    let zones = zones_of(&r.instance);
    assert_eq!(zones.len(), 3, "{zones:?}");
    assert!(!zones.values().any(|z| z.as_str() == "AZ-2"), "{zones:?}");
}

#[tokio::test]
async fn without_reselection_the_full_zone_fails_the_operation() {
    let (lcm, _sim, pkg, store) = setup(false, Selection::Random);
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &pin("VDU1-0", "AZ-1"),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::CapacityExhausted));
    let err = r.op_occ.error.as_ref().unwrap();
    assert!(
        err.detail.contains("No valid host was found"),
        "{}",
        err.detail
    );
    assert_eq!(r.op_occ.attempts.len(), 1);
    assert!(!store.instance(&inst.id).await.unwrap().is_instantiated());
}

#[tokio::test]
async fn a_non_capacity_failure_is_not_reselected() {
    let (lcm, sim, pkg, _store) = setup(true, Selection::Random);
    // The cloud loses the flavor VDU2 needs: Heat fails validation, not scheduling.
    let mut cloud = sim.cloud();
    cloud.flavors.remove("m1.medium");
    let sim2 = SimCloud::new(cloud, 1);
    let drivers = Drivers {
        stacks: Arc::new(sim2.clone()),
        zones: Arc::new(sim2.clone()),
        compute: Arc::new(sim2.clone()),
        ..lcm.drivers().clone()
    };
    let lcm = Lifecycle::new(drivers, lcm.config().clone());
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::StackFailed));
    assert_eq!(r.op_occ.attempts.len(), 1);
    assert!(r
        .op_occ
        .error
        .as_ref()
        .unwrap()
        .detail
        .contains("m1.medium"));
}

#[tokio::test]
async fn scale_heal_and_terminate_keep_existing_vnfcs() {
    // Four VNFCs under zone anti-affinity need four zones with room; the demo cloud has three,
    // so the constraint is best effort and the scale-out reports it relaxed.
    let (lcm, sim, pkg, store) = setup_with(true, Selection::CapacityAware, true);
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(
        r.op_occ.attempts.len(),
        1,
        "capacity-aware never picks the small zone"
    );
    let before = r.instance.instantiated_vnf_info.clone().unwrap();
    let server_of = |i: &VnfInstance, id: &str| {
        i.instantiated_vnf_info
            .as_ref()
            .unwrap()
            .vnfc_resource_info
            .iter()
            .find(|v| v.id == id)
            .map(|v| v.compute_resource.resource_id.clone())
    };

    // Scale out VDU1 by one: VDU1-2 is added; existing servers keep their ids.
    let r = lcm
        .scale(
            &inst.id,
            &pkg,
            &ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let info = r.instance.instantiated_vnf_info.clone().unwrap();
    assert_eq!(info.vnfc_resource_info.len(), 4);
    assert_eq!(info.scale_level("VDU1_scale"), Some(1));
    for v in &before.vnfc_resource_info {
        assert_eq!(
            server_of(&r.instance, &v.id),
            Some(v.compute_resource.resource_id.clone()),
            "{} moved",
            v.id
        );
    }
    let zones = zones_of(&r.instance);
    assert!(!zones.values().any(|z| z.as_str() == "AZ-1"), "{zones:?}");
    let relaxed = r
        .grant
        .as_ref()
        .unwrap()
        .additional_params
        .as_ref()
        .unwrap()["relaxedPlacementConstraints"]
        .as_array()
        .unwrap();
    assert_eq!(relaxed.len(), 1, "{relaxed:?}");
    assert!(
        relaxed[0].as_str().unwrap().contains("anti-affinity"),
        "{relaxed:?}"
    );

    // Heal VDU1-0: re-created (new server id), the others untouched.
    let healed_before = server_of(&r.instance, "VDU1-0").unwrap();
    let r2 = lcm
        .heal(
            &inst.id,
            &pkg,
            &serde_json::from_value::<HealVnfRequest>(
                serde_json::json!({"vnfcInstanceId": ["VDU1-0"]}),
            )
            .unwrap(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r2.is_completed(), "{:?}", r2.op_occ.error);
    assert_ne!(server_of(&r2.instance, "VDU1-0").unwrap(), healed_before);
    for id in ["VDU1-1", "VDU1-2", "VDU2-0"] {
        assert_eq!(
            server_of(&r2.instance, id),
            server_of(&r.instance, id),
            "{id} changed on heal"
        );
    }

    // Scale in: VDU1-2 goes away.
    let r3 = lcm
        .scale(
            &inst.id,
            &pkg,
            &ScaleVnfRequest::new(ScaleType::ScaleIn, "VDU1_scale"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r3.is_completed(), "{:?}", r3.op_occ.error);
    let ids: Vec<String> = zones_of(&r3.instance).into_keys().collect();
    assert_eq!(ids, ["VDU1-0", "VDU1-1", "VDU2-0"]);
    // Scaling in again below level 0 is refused before anything starts.
    assert!(lcm
        .scale(
            &inst.id,
            &pkg,
            &ScaleVnfRequest::new(ScaleType::ScaleIn, "VDU1_scale"),
            &OperationOptions::default()
        )
        .await
        .is_err());

    // Terminate: the stack and its servers are gone.
    let r4 = lcm
        .terminate(
            &inst.id,
            &serde_json::from_value::<TerminateVnfRequest>(
                serde_json::json!({"terminationType": "FORCEFUL"}),
            )
            .unwrap(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r4.is_completed());
    assert!(!r4.instance.is_instantiated());
    assert!(sim.server_ids().is_empty());
    let ops = store
        .op_occs(OpOccFilter::instance(inst.id.clone()))
        .await
        .unwrap();
    assert_eq!(ops.len(), 5);
    assert!(ops
        .iter()
        .all(|o| o.operation_state == LcmOperationStateType::Completed));
    lcm.delete(&inst.id).await.unwrap();
    assert!(store.instance(&inst.id).await.is_err());
}

#[tokio::test]
async fn one_operation_at_a_time_and_state_checks() {
    let (lcm, _sim, pkg, _store) = setup(true, Selection::Random);
    let inst = created(&lcm, &pkg).await;
    // Not instantiated: scale, heal and terminate are conflicts.
    assert!(lcm
        .scale(
            &inst.id,
            &pkg,
            &ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale"),
            &OperationOptions::default()
        )
        .await
        .is_err());
    // Unknown flavour and pinned VDU are invalid.
    assert!(lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("gold"),
            &OperationOptions::default()
        )
        .await
        .is_err());
    assert!(lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &pin("VDU9", "AZ-2")
        )
        .await
        .is_err());
}

#[tokio::test]
async fn same_seed_same_trace() {
    let run = || async {
        let (lcm, _sim, pkg, _store) = setup(true, Selection::Random);
        let inst = created(&lcm, &pkg).await;
        let r = lcm
            .instantiate(
                &inst.id,
                &pkg,
                &InstantiateVnfRequest::new("default"),
                &pin("VDU1-0", "AZ-1"),
            )
            .await
            .unwrap();
        (r.op_occ.attempts, zones_of(&r.instance))
    };
    assert_eq!(run().await, run().await);
}

/// The CLI keeps the simulator between runs: a restored snapshot is the same cloud, and an
/// operation continues on it exactly as it would have on the original.
#[tokio::test]
async fn the_simulator_survives_a_snapshot_round_trip() {
    use vnfm_core::driver::{ListZones, ZoneCatalog};
    let (lcm, sim, pkg, store) = setup(true, Selection::Random);
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &pin("VDU1-0", "AZ-1"),
        )
        .await
        .unwrap();
    assert!(r.is_completed());
    let snap = sim.snapshot().unwrap();
    let restored = SimCloud::restore(&snap).unwrap();
    assert_eq!(restored.snapshot().unwrap(), snap);
    assert_eq!(restored.server_ids(), sim.server_ids());
    assert_eq!(
        restored.list_zones(ListZones::default()).await.unwrap(),
        sim.list_zones(ListZones::default()).await.unwrap()
    );
    // Scale out on the restored cloud (sharing the store) works like on the original.
    let drivers = Drivers {
        stacks: Arc::new(restored.clone()),
        zones: Arc::new(restored.clone()),
        compute: Arc::new(restored.clone()),
        store: Arc::new(store.clone()),
        clock: lcm.drivers().clock.clone(),
        cluster: None,
    };
    // A fourth VNFC needs AZ-1 (too small) or best effort on the zone anti-affinity.
    let mut config = lcm.config().clone();
    config.fallback_best_effort = true;
    let lcm2 = Lifecycle::new(drivers, config);
    let r2 = lcm2
        .scale(
            &inst.id,
            &pkg,
            &ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r2.is_completed(), "{:?}", r2.op_occ.error);
    // The restored cloud knows the stack: the update kept the existing VNFC where it was ...
    assert_eq!(
        r2.op_occ.attempts[0].zones["VDU1-0"],
        zones_of(&r.instance)["VDU1-0"]
    );
    // ... and the two clouds are independent copies.
    assert_eq!(sim.server_ids().len(), 3);
    assert!(SimCloud::restore("{\"not\": \"a state\"}").is_err());
}

/// SOL003 error handling: an operation in FAILED_TEMP blocks others until it is failed or
/// rolled back; rolling back an instantiate deletes its stack, rolling back a scale-out
/// removes the VNFCs it added.
#[tokio::test]
async fn failed_temp_is_failed_or_rolled_back() {
    let (lcm, sim, pkg, store) = setup(false, Selection::Random);
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &pin("VDU1-0", "AZ-1"),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert!(
        !sim.server_ids().is_empty(),
        "the failed stack keeps what it created"
    );
    // Blocked until handled.
    let blocked = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(blocked.to_string().contains("FAILED_TEMP"), "{blocked}");
    // Roll back: the stack goes, the instance is NOT_INSTANTIATED, the occurrence ROLLED_BACK.
    let rb = lcm.rollback(&r.op_occ.id, &pkg).await.unwrap();
    assert_eq!(rb.op_occ.operation_state, LcmOperationStateType::RolledBack);
    assert!(sim.server_ids().is_empty());
    assert!(!store.instance(&inst.id).await.unwrap().is_instantiated());
    // A second rollback or fail is refused: the occurrence is terminal.
    assert!(lcm.rollback(&r.op_occ.id, &pkg).await.is_err());
    assert!(lcm.fail(&r.op_occ.id).await.is_err());
    // Now it instantiates (no pin into the full zone).
    let ok = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(ok.is_completed(), "{:?}", ok.op_occ.error);
    // A scale-out that fails (no fourth zone, no best effort) ...
    let before = sim.server_ids();
    let so = lcm
        .scale(
            &inst.id,
            &pkg,
            &ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        so.op_occ.operation_state,
        LcmOperationStateType::FailedTemp,
        "{:?}",
        so.op_occ
    );
    // ... is rolled back: the servers are those from before.
    let rb = lcm.rollback(&so.op_occ.id, &pkg).await.unwrap();
    assert_eq!(
        rb.op_occ.operation_state,
        LcmOperationStateType::RolledBack,
        "{:?}",
        rb.op_occ.error
    );
    assert_eq!(sim.server_ids(), before);
    // Another failing scale-out is failed: FAILED, and the instance can be terminated.
    let so = lcm
        .scale(
            &inst.id,
            &pkg,
            &ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    let failed = lcm.fail(&so.op_occ.id).await.unwrap();
    assert_eq!(failed.operation_state, LcmOperationStateType::Failed);
    let t = lcm
        .terminate(
            &inst.id,
            &serde_json::from_value::<TerminateVnfRequest>(
                serde_json::json!({"terminationType": "FORCEFUL"}),
            )
            .unwrap(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(t.is_completed());
    assert!(sim.server_ids().is_empty());
}

/// The simulator, except that its resource listing shows one resource still in progress for
/// the first `busy` listings (Heat failing a stack while a sibling nested stack is still being
/// created).
#[derive(Clone, Debug)]
struct Unsettled {
    sim: SimCloud,
    busy: Arc<std::sync::atomic::AtomicUsize>,
    listings: Arc<std::sync::atomic::AtomicUsize>,
    /// The next stack create is made, but its answer lost (an error, as when the process
    /// that sent it died).
    lose_create: Arc<std::sync::atomic::AtomicBool>,
}

#[async_trait::async_trait]
impl vnfm_core::driver::StackDriver for Unsettled {
    async fn create_stack(
        &self,
        req: vnfm_core::driver::CreateStack,
    ) -> Result<vnfm_core::id::StackId, vnfm_core::driver::DriverError> {
        let id = self.sim.create_stack(req).await?;
        if self
            .lose_create
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(vnfm_core::driver::DriverError::Unavailable {
                driver: "test",
                message: "the answer to the create was lost".into(),
            });
        }
        Ok(id)
    }
    async fn update_stack(
        &self,
        req: vnfm_core::driver::UpdateStack,
    ) -> Result<(), vnfm_core::driver::DriverError> {
        self.sim.update_stack(req).await
    }
    async fn show_stack(
        &self,
        id: &vnfm_core::id::StackId,
    ) -> Result<vnfm_core::driver::Stack, vnfm_core::driver::DriverError> {
        self.sim.show_stack(id).await
    }
    async fn delete_stack(
        &self,
        id: &vnfm_core::id::StackId,
    ) -> Result<(), vnfm_core::driver::DriverError> {
        self.sim.delete_stack(id).await
    }
    async fn list_resources(
        &self,
        req: vnfm_core::driver::ListResources,
    ) -> Result<Vec<vnfm_core::driver::StackResource>, vnfm_core::driver::DriverError> {
        use std::sync::atomic::Ordering;
        self.listings.fetch_add(1, Ordering::SeqCst);
        let mut res = self.sim.list_resources(req).await?;
        let still_busy = self
            .busy
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| b.checked_sub(1))
            .is_ok();
        if still_busy {
            if let Some(r) = res
                .iter_mut()
                .find(|r| r.resource_status.state != vnfm_core::driver::StackState::Failed)
            {
                r.resource_status.state = vnfm_core::driver::StackState::InProgress;
            }
        }
        Ok(res)
    }
    async fn mark_unhealthy(
        &self,
        req: vnfm_core::driver::MarkUnhealthy,
    ) -> Result<(), vnfm_core::driver::DriverError> {
        self.sim.mark_unhealthy(req).await
    }
}

/// After a failed attempt, the next stack update waits until no resource of the failed stack
/// is in progress (Heat cancels, and fails, an update sent while a nested stack is still being
/// created).
#[tokio::test]
async fn reselection_waits_for_the_failed_stack_to_settle() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let sim = demo_sim();
    let stacks = Unsettled {
        sim: sim.clone(),
        busy: Arc::new(AtomicUsize::new(3)),
        listings: Arc::new(AtomicUsize::new(0)),
        lose_create: Arc::default(),
    };
    let (lcm, pkg, _, clock) = setup_over(&sim, Arc::new(stacks.clone()), true, |_| {});
    let poll = LcmConfig::standard().unwrap().poll_interval;
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &pin("VDU1-0", "AZ-1"),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let failed = r
        .op_occ
        .attempts
        .iter()
        .filter(|a| a.outcome == Some(AttemptOutcome::Failed))
        .count();
    assert!(failed >= 1);
    // Three listings found a resource in progress and were asked again, one poll interval
    // apart, before the listing the reselection used; then one lists the servers at the end.
    assert_eq!(
        stacks.listings.load(Ordering::SeqCst),
        failed + 3 + 1,
        "{:?}",
        r.op_occ.attempts
    );
    assert!(Clock::now(&clock) - start() >= chrono::Duration::from_std(poll * 3).unwrap());
}

/// Issue 10, acceptance 4 (simulator part): terminate and rollback end only once the stack is
/// gone; a delete that Heat fails ends the operation FAILED_TEMP naming Heat's reason, and a
/// later terminate (after failing the occurrence) succeeds.
#[tokio::test]
async fn stack_deletes_are_awaited_and_a_failed_delete_is_failed_temp() {
    use vnfm_core::driver::StackDriver;
    use vnfm_core::lifecycle::engine::STACK_ID_KEY;
    use vnfm_core::sim::{FaultySim, StackDeleteFault};
    let sim = demo_sim();
    let faulty = FaultySim::new(sim.clone());
    let (lcm, pkg, _store, _clock) = setup_over(&sim, Arc::new(faulty.clone()), false, |_| {});
    let stack_of = |inst: &VnfInstance| -> vnfm_core::id::StackId {
        inst.metadata.as_ref().unwrap()[STACK_ID_KEY]
            .as_str()
            .unwrap()
            .into()
    };

    // Terminate with a slow delete: COMPLETED only once the stack is gone.
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let stack = stack_of(&r.instance);
    let servers = sim.server_ids().len();
    assert_eq!(servers, 3);
    faulty.fail_next_stack_deletes(1, StackDeleteFault::Slow { shows: 4 });
    let t = lcm
        .terminate(
            &inst.id,
            &serde_json::from_value::<TerminateVnfRequest>(
                serde_json::json!({"terminationType": "FORCEFUL"}),
            )
            .unwrap(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(t.is_completed(), "{:?}", t.op_occ.error);
    let shown = faulty.show_stack(&stack).await;
    assert!(
        shown.as_ref().is_err_and(|e| e.is_not_found()),
        "terminate returned before the stack was gone: {shown:?}"
    );
    assert!(sim.server_ids().is_empty());

    // A delete that fails: FAILED_TEMP with Heat's reason; the instance stays instantiated.
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    faulty.fail_next_stack_deletes(
        1,
        StackDeleteFault::Failed {
            message: "compute host unreachable".into(),
        },
    );
    let t = lcm
        .terminate(
            &inst.id,
            &serde_json::from_value::<TerminateVnfRequest>(
                serde_json::json!({"terminationType": "FORCEFUL"}),
            )
            .unwrap(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(t.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    let err = t.op_occ.error.as_ref().unwrap();
    assert_eq!(err.title.as_deref(), Some("stack delete failed"));
    assert!(
        err.detail.contains("DELETE_FAILED") && err.detail.contains("compute host unreachable"),
        "{err:?}"
    );
    assert_eq!(t.failure, Some(FailureKind::StackFailed));
    assert!(t.instance.is_instantiated());
    lcm.fail(&t.op_occ.id).await.unwrap();
    let t = lcm
        .terminate(
            &inst.id,
            &serde_json::from_value::<TerminateVnfRequest>(
                serde_json::json!({"terminationType": "FORCEFUL"}),
            )
            .unwrap(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(t.is_completed(), "{:?}", t.op_occ.error);
    assert!(sim.server_ids().is_empty());

    // Rollback of a failed instantiate: ROLLED_BACK only once the stack is gone.
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &pin("VDU1-0", "AZ-1"),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    let stack = stack_of(&r.instance);
    let servers = sim.server_ids();
    assert!(
        !servers.is_empty(),
        "the failed stack keeps what it created"
    );
    // A rollback whose delete fails (SOL003 5.4.15, the ETSI suite's "Rollback VNF LCM
    // Operation - Unsuccessful", which the conformance harness cannot set up over `vnfm
    // serve`): the same occurrence is FAILED_TEMP again, saying why; the stack stays.
    faulty.fail_next_stack_deletes(
        1,
        StackDeleteFault::Failed {
            message: "compute host unreachable".into(),
        },
    );
    let rb = lcm.rollback(&r.op_occ.id, &pkg).await.unwrap();
    assert_eq!(rb.op_occ.id, r.op_occ.id);
    assert_eq!(
        rb.op_occ.operation_state,
        LcmOperationStateType::FailedTemp,
        "{:?}",
        rb.op_occ
    );
    let err = rb.op_occ.error.as_ref().unwrap();
    assert!(
        err.detail.contains("DELETE_FAILED") && err.detail.contains("compute host unreachable"),
        "{err:?}"
    );
    assert_eq!(sim.server_ids(), servers);
    assert!(faulty.show_stack(&stack).await.is_ok());
    // Rolled back again once the cause is gone, with a slow delete: ROLLED_BACK only once the
    // stack is gone.
    faulty.fail_next_stack_deletes(1, StackDeleteFault::Slow { shows: 2 });
    let rb = lcm.rollback(&r.op_occ.id, &pkg).await.unwrap();
    assert_eq!(
        rb.op_occ.operation_state,
        LcmOperationStateType::RolledBack,
        "{:?}",
        rb.op_occ.error
    );
    assert!(faulty
        .show_stack(&stack)
        .await
        .is_err_and(|e| e.is_not_found()));
    assert!(sim.server_ids().is_empty());
}

/// A create that Heat refuses (HTTP 400) is an attempt with an outcome.
#[tokio::test]
async fn a_refused_create_is_an_attempt_with_an_outcome() {
    use vnfm_core::sim::{FaultKind, FaultySim, Method};
    let sim = demo_sim();
    let faulty = FaultySim::new(sim.clone());
    let (lcm, pkg, _store, _clock) = setup_over(&sim, Arc::new(faulty.clone()), true, |_| {});
    faulty.fail_next(Method::CreateStack, 1, FaultKind::Invalid);
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.op_occ.attempts.len(), 1);
    assert_eq!(r.op_occ.attempts[0].outcome, Some(AttemptOutcome::Refused));
    assert!(r.op_occ.attempts[0]
        .status_reason
        .as_deref()
        .is_some_and(|s| s.contains("injected fault")));
    assert_eq!(r.failure, Some(FailureKind::Invalid));
}

/// The rows and servers a simulated cloud holds, read from its snapshot: (stacks, resource
/// rows including the older rows kept beside a replaced one, servers).
fn records(sim: &SimCloud) -> (usize, usize, usize) {
    fn rows(r: &serde_json::Value) -> usize {
        1 + r["older"]
            .as_array()
            .map_or(0, |o| o.iter().map(rows).sum::<usize>())
    }
    let snap: serde_json::Value = serde_json::from_str(&sim.snapshot().unwrap()).unwrap();
    let stacks = snap["stacks"].as_object().unwrap();
    let res = stacks
        .values()
        .flat_map(|s| s["resources"].as_array().unwrap().iter())
        .map(rows)
        .sum();
    (
        stacks.len(),
        res,
        snap["servers"].as_object().unwrap().len(),
    )
}

/// Heals of every VNFC, again and again, the way `vnfm serve` heals on alerts (the storm test
/// heals 100 instances): each completes at its first attempt, and the simulated cloud neither
/// keeps the replaced servers and rows nor grows its snapshot. The zones have two hosts each:
/// a server is replaced as Heat's convergence engine does, its original kept until the
/// replacement is up, so VDU1's host anti-affinity group needs a second host in the zone
/// (with one host per zone the first attempt fails and half the storm's heals ran out of
/// zones).
#[tokio::test]
async fn repeated_heals_complete_at_once_and_keep_the_state_bounded() {
    let hosts: String = (1..=4)
        .map(|z| {
            format!(
                "  AZ-{z}:\n    hosts:\n      c{z}a: {{vcpus: 64, memory_mb: 131072, disk_gb: 1280}}\n      \
                 c{z}b: {{vcpus: 64, memory_mb: 131072, disk_gb: 1280}}\n"
            )
        })
        .collect();
    let cloud = format!(
        "zones:\n{hosts}flavors:\n  m1.tiny: {{vcpus: 1, memory_mb: 512, disk_gb: 1}}\n  \
         m1.small: {{vcpus: 1, memory_mb: 2048, disk_gb: 20}}\n  \
         m1.medium: {{vcpus: 2, memory_mb: 4096, disk_gb: 40}}\n  \
         m1.large: {{vcpus: 4, memory_mb: 8192, disk_gb: 80}}\n\
         images: [cirros, demo-frontend-image, demo-backend-image]\n"
    );
    let sim = SimCloud::new(CloudFile::from_yaml("two-hosts", &cloud).unwrap(), 1);
    let (lcm, pkg, _store, _clock) = setup_over(&sim, Arc::new(sim.clone()), true, |c| {
        c.fallback_best_effort = true;
    });
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let vnfcs: Vec<String> = r
        .instance
        .instantiated_vnf_info
        .as_ref()
        .unwrap()
        .vnfc_resource_info
        .iter()
        .map(|v| v.id.clone())
        .collect();
    let first = records(&sim);
    assert_eq!(first.2, vnfcs.len(), "{first:?}");
    let mut sizes = Vec::new();
    for round in 0..6 {
        let r = lcm
            .heal(
                &inst.id,
                &pkg,
                &serde_json::from_value::<HealVnfRequest>(
                    serde_json::json!({ "vnfcInstanceId": vnfcs }),
                )
                .unwrap(),
                &OperationOptions::default(),
            )
            .await
            .unwrap();
        assert!(r.is_completed(), "round {round}: {:?}", r.op_occ.error);
        assert_eq!(r.op_occ.attempts.len(), 1, "round {round}: reselected");
        assert_eq!(records(&sim), first, "round {round}: records kept");
        sizes.push(sim.snapshot().unwrap().len());
    }
    // ids and names keep their lengths; only counters (the virtual clock) grow a digit
    let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
    assert!(max - min < 64, "the snapshot grows with heals: {sizes:?}");
}

/// `recover_interrupted` declares FAILED_TEMP the running occurrences whose lease expired (or
/// that have none), leaves the one whose lease is alive, and a retry then completes one.
#[tokio::test]
async fn recover_interrupted_takes_only_expired_leases() {
    use vnfm_core::driver::StoreBatch;
    use vnfm_core::lcm::{LcmOperationType, Lease, VnfLcmOpOcc};
    let (lcm, _sim, pkg, store) = setup(false, Selection::Random);
    let now = lcm.drivers().clock.now();
    let mut batch = StoreBatch::new();
    let mut ids = Vec::new();
    for (i, lease) in [
        Some(now - chrono::TimeDelta::seconds(1)),
        None,
        Some(now + chrono::TimeDelta::seconds(30)),
    ]
    .into_iter()
    .enumerate()
    {
        let inst = created(&lcm, &pkg).await;
        let mut op = VnfLcmOpOcc::new(
            format!("op-{i}"),
            inst.id.clone(),
            LcmOperationType::Instantiate,
            now,
        );
        op.enter(LcmOperationStateType::Processing, now);
        op.lease = lease.map(|expires| Lease {
            owner: "gone:1".into(),
            expires,
        });
        ids.push(op.id.clone());
        batch = batch.with_op_occ(op);
    }
    store.commit(batch).await.unwrap();
    let taken = lcm.recover_interrupted().await.unwrap();
    assert!(taken.resumable.is_empty(), "interrupt is the default");
    assert_eq!(
        taken.interrupted,
        ids[..2].to_vec(),
        "the expired and the lease-less one"
    );
    for (i, id) in ids.iter().enumerate() {
        let op = store.op_occ(id).await.unwrap();
        let want = if i < 2 {
            LcmOperationStateType::FailedTemp
        } else {
            LcmOperationStateType::Processing
        };
        assert_eq!(op.operation_state, want, "{id}");
        if i < 2 {
            let err = op.error.unwrap();
            assert_eq!(err.title.as_deref(), Some("interrupted"));
            assert!(err.detail.contains("went away"), "{}", err.detail);
        }
    }
    // Nothing more to take the second time.
    assert_eq!(lcm.recover_interrupted().await.unwrap(), Default::default());

    // One stored STARTING only (its owner died waiting for an NFVO's grant): nothing was sent
    // to the VIM, so it ends ROLLED_BACK, not run (SOL003 5.4.17.3.1), not FAILED_TEMP.
    let inst = created(&lcm, &pkg).await;
    let mut op = VnfLcmOpOcc::new(
        "op-starting",
        inst.id.clone(),
        LcmOperationType::Instantiate,
        now,
    );
    op.lease = Some(Lease {
        owner: "gone:1".into(),
        expires: now - chrono::TimeDelta::seconds(1),
    });
    op.progress = Some(serde_json::json!({"plan": {"kind": "terminate"}}));
    store
        .commit(StoreBatch::new().with_op_occ(op))
        .await
        .unwrap();
    let taken = lcm.recover_interrupted().await.unwrap();
    assert_eq!(
        taken.interrupted,
        vec![vnfm_core::id::OpOccId::from("op-starting")]
    );
    let op = store.op_occ(&"op-starting".into()).await.unwrap();
    assert_eq!(op.operation_state, LcmOperationStateType::RolledBack);
    assert!(op.lease.is_none() && op.progress.is_none(), "{op:?}");
    let err = op.error.unwrap();
    assert!(err.detail.contains("was STARTING"), "{}", err.detail);
}

/// `[state] takeover = "resume"` (issue 27): a terminate whose owner died after it was stored
/// `PROCESSING` is left by the sweep for the caller to resume (nothing written), then run on
/// from its saved progress by whichever lifecycle resumes it first (the other gets a conflict):
/// it completes, its take-over counted; past the limit the next one is interrupted instead.
#[tokio::test]
async fn an_operation_whose_owner_went_away_is_resumed_under_the_resume_policy() {
    use vnfm_core::driver::StoreBatch;
    use vnfm_core::lcm::{LcmOperationType, Lease, VnfLcmOpOcc};
    use vnfm_core::lifecycle::{LcmError, Progress, Takeover};
    let sim = demo_sim();
    let resume = |c: &mut LcmConfig| c.takeover = Takeover::Resume { limit: 1 };
    let (lcm, pkg, store, clock) = setup_over(&sim, Arc::new(sim.clone()), false, resume);
    let inst = created(&lcm, &pkg).await;
    let done = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(done.is_completed(), "{:?}", done.op_occ.error);
    assert!(!sim.server_ids().is_empty());

    // A terminate stored PROCESSING by an owner that died at once: its progress is the plan
    // only, as a terminate saves it when it starts.
    let now = lcm.drivers().clock.now();
    let dead = |id: &str, takeovers: u32| {
        let mut op = VnfLcmOpOcc::new(id, inst.id.clone(), LcmOperationType::Terminate, now);
        op.enter(LcmOperationStateType::Processing, now);
        op.operation_params = Some(serde_json::json!({"terminationType": "FORCEFUL"}));
        let mut p = Progress::new(vnfm_core::lifecycle::Plan::Terminate);
        p.takeovers = takeovers;
        op.progress = Some(serde_json::to_value(p).unwrap());
        op.lease = Some(Lease {
            owner: "vnfm:died:1".into(),
            expires: now - chrono::TimeDelta::seconds(60),
        });
        op
    };
    store
        .commit(StoreBatch::new().with_op_occ(dead("op-dead", 0)))
        .await
        .unwrap();
    let sweep = lcm.take_over_expired().await.unwrap();
    assert!(sweep.interrupted.is_empty(), "{sweep:?}");
    assert_eq!(sweep.resumable.len(), 1, "{sweep:?}");
    assert_eq!(sweep.resumable[0].instance, inst.id);
    let id = sweep.resumable[0].op.clone();
    let untouched = store.op_occ(&id).await.unwrap();
    assert_eq!(untouched.operation_state, LcmOperationStateType::Processing);

    // Two lifecycles (two replicas) resume it at once: one runs it, the other is refused.
    let other = Lifecycle::new(lcm.drivers().clone(), lcm.config().clone()).with_owner("vnfm:b:2");
    let opts = OperationOptions::default();
    let (a, b) = tokio::join!(
        lcm.resume_expired(&id, &pkg, &opts),
        other.resume_expired(&id, &pkg, &opts)
    );
    let (won, lost) = match (a, b) {
        (Ok(r), Err(e)) | (Err(e), Ok(r)) => (r, e),
        (a, b) => panic!("not exactly one resumed: {a:?} / {b:?}"),
    };
    assert!(matches!(lost, LcmError::Conflict(_)), "{lost}");
    assert!(won.is_completed(), "{:?}", won.op_occ.error);
    assert!(sim.server_ids().is_empty(), "the stack is deleted");
    assert!(!store.instance(&inst.id).await.unwrap().is_instantiated());
    let op = store.op_occ(&id).await.unwrap();
    assert_eq!(op.operation_state, LcmOperationStateType::Completed);
    assert!(op.lease.is_none() && op.error.is_none(), "{op:?}");

    // Resumed once already (the limit): interrupted, saying why.
    store
        .commit(StoreBatch::new().with_op_occ(dead("op-dead-again", 1)))
        .await
        .unwrap();
    clock.advance(std::time::Duration::from_secs(1));
    let sweep = lcm.take_over_expired().await.unwrap();
    assert!(sweep.resumable.is_empty(), "{sweep:?}");
    assert_eq!(sweep.interrupted, vec!["op-dead-again".into()]);
    let op = store.op_occ(&"op-dead-again".into()).await.unwrap();
    assert_eq!(op.operation_state, LcmOperationStateType::FailedTemp);
    let detail = op.error.unwrap().detail;
    assert!(detail.contains("taken over 1 times"), "{detail}");
    let refused = lcm
        .resume_expired(&"op-dead-again".into(), &pkg, &opts)
        .await
        .unwrap_err();
    assert!(matches!(refused, LcmError::Conflict(_)), "{refused}");
}

/// An instantiate whose stack create was made but whose answer was lost (its process died
/// before it saved the stack's id) is continued by a retry or a take-over with the stack it
/// made, found by its name: not created again (Heat would refuse the name), updated.
#[tokio::test]
async fn a_resumed_instantiate_finds_the_stack_its_lost_create_made() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let sim = demo_sim();
    let stacks = Unsettled {
        sim: sim.clone(),
        busy: Arc::new(AtomicUsize::new(0)),
        listings: Arc::new(AtomicUsize::new(0)),
        lose_create: Arc::new(AtomicBool::new(true)),
    };
    let (lcm, pkg, store, _) = setup_over(&sim, Arc::new(stacks.clone()), false, |_| {});
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert!(
        !stacks.lose_create.load(Ordering::SeqCst),
        "the create was sent"
    );
    let servers = sim.server_ids();
    assert!(!servers.is_empty(), "the lost create made its stack");
    let saved = store.op_occ(&r.op_occ.id).await.unwrap();
    let progress: vnfm_core::lifecycle::Progress =
        serde_json::from_value(saved.progress.unwrap()).unwrap();
    assert!(progress.stack_id.is_none(), "{progress:?}");

    let done = lcm
        .retry(&r.op_occ.id, &pkg, &OperationOptions::default())
        .await
        .unwrap();
    assert!(done.is_completed(), "{:?}", done.op_occ.error);
    assert_eq!(
        sim.server_ids(),
        servers,
        "no second stack, the same servers"
    );
    let inst = store.instance(&inst.id).await.unwrap();
    assert!(inst.is_instantiated());
}

/// `instantiationLevelId` (issue 14 row 6): an unknown level starts nothing; a level of the
/// flavour decides the VNFC counts and the scale levels.
#[tokio::test]
async fn instantiation_level_is_read_and_an_unknown_one_starts_nothing() {
    let (lcm, _sim, pkg, store) = setup(true, Selection::Random);
    let inst = created(&lcm, &pkg).await;
    let mut req = InstantiateVnfRequest::new("default");
    req.instantiation_level_id = Some("huge".into());
    let err = lcm
        .instantiate(&inst.id, &pkg, &req, &OperationOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no instantiation level `huge`"), "{err}");
    assert!(store
        .op_occs(OpOccFilter::instance(inst.id.clone()))
        .await
        .unwrap()
        .is_empty());
    req.instantiation_level_id = Some("small".into());
    let r = lcm
        .instantiate(&inst.id, &pkg, &req, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let info = r.instance.instantiated_vnf_info.unwrap();
    assert_eq!(info.vnfc_resource_info.len(), 3);
    assert!(info.scale_status.iter().all(|s| s.scale_level == 0));
}

/// The `large` level of the demo flavour: four front ends and two back ends, `VDU1_scale` at
/// level 2 (best effort: six VNFCs cannot each have a zone of their own in four zones).
#[tokio::test]
async fn instantiation_at_the_large_level_sets_counts_and_scale_levels() {
    let (lcm, _sim, pkg, _store) = setup_with(true, Selection::Random, true);
    let inst = created(&lcm, &pkg).await;
    let mut req = InstantiateVnfRequest::new("default");
    req.instantiation_level_id = Some("large".into());
    let r = lcm
        .instantiate(&inst.id, &pkg, &req, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let info = r.instance.instantiated_vnf_info.unwrap();
    let per_vdu = |vdu: &str| {
        info.vnfc_resource_info
            .iter()
            .filter(|v| v.vdu_id.as_str() == vdu)
            .count()
    };
    assert_eq!((per_vdu("VDU1"), per_vdu("VDU2")), (4, 2));
    assert_eq!(info.scale_level("VDU1_scale"), Some(2));
}

/// MODIFY_INFO is a plan of the operation machine: STARTING, PROCESSING, COMPLETED with
/// `changedInfo`; a bad request starts nothing; an occurrence not over (FAILED_TEMP) holds
/// the instance.
#[tokio::test]
async fn modify_info_is_an_operation_like_the_others() {
    use serde_json::json;
    use vnfm_core::lcm::{LcmOperationType, VnfLcmOpOcc};
    let (lcm, _sim, pkg, store) = setup(false, Selection::Random);
    let inst = created(&lcm, &pkg).await;
    let kv = |v: serde_json::Value| v.as_object().cloned().unwrap();
    let patch = kv(json!({"vnfInstanceName": "edge", "metadata": {"tier": "gold"}}));
    let r = lcm
        .modify_info(&inst.id, &patch, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(r.op_occ.operation, LcmOperationType::ModifyInfo);
    assert_eq!(
        r.op_occ.changed_info,
        Some(serde_json::Value::Object(patch.clone()))
    );
    assert!(r.op_occ.validate().is_ok(), "{:?}", r.op_occ.validate());
    let stored = store.instance(&inst.id).await.unwrap();
    assert_eq!(stored.vnf_instance_name.as_deref(), Some("edge"));
    assert_eq!(stored.metadata.unwrap()["tier"], "gold");

    let err = lcm
        .modify_info(&inst.id, &kv(json!({"x": 1})), &OperationOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("x cannot be modified"), "{err}");
    let err = lcm
        .modify_info(&"nope".into(), &patch, &OperationOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, vnfm_core::lifecycle::LcmError::NotFound(_)),
        "{err}"
    );

    let now = lcm.drivers().clock.now();
    let mut held = VnfLcmOpOcc::new("op-held", inst.id.clone(), LcmOperationType::Scale, now);
    held.enter(LcmOperationStateType::FailedTemp, now);
    store
        .commit(vnfm_core::driver::StoreBatch::new().with_op_occ(held))
        .await
        .unwrap();
    let err = lcm
        .modify_info(&inst.id, &patch, &OperationOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("op-held") && err.contains("FAILED_TEMP"),
        "{err}"
    );
    let ops = store
        .op_occs(OpOccFilter::instance(inst.id.clone()))
        .await
        .unwrap();
    assert_eq!(
        ops.len(),
        2,
        "the refused ones left no occurrence: {ops:#?}"
    );
}

#[tokio::test]
async fn a_pinned_instantiate_lists_the_zones_once() {
    // The pins are checked against the catalogue before the operation starts; the operation
    // takes that listing instead of asking again (real Nova + Placement: one listing per
    // operation, checked by the real scenarios).
    let sim = demo_sim();
    let zones = vnfm_core::sim::FaultySim::new(sim.clone());
    let store = MemoryStore::new();
    let drivers = Drivers {
        stacks: Arc::new(sim.clone()),
        zones: Arc::new(zones.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(store.clone()),
        clock: Arc::new(VirtualClock::new(start())),
        cluster: None,
    };
    let mut config = LcmConfig::standard().unwrap();
    config.seed = 3;
    let lcm = Lifecycle::new(drivers, config);
    let pkg = fs::load(&examples().join("packages/demo-vnf")).unwrap();
    let inst = created(&lcm, &pkg).await;
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &pin("VDU1-0", "AZ-2"),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(zones.calls(vnfm_core::sim::Method::ListZones), 1);
}
