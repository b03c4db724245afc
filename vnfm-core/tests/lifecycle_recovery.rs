//! Recovery keeps what it learned (issue 25, acceptance 7), on the simulated cloud with the
//! `asg-vnf` package (VDU1: two m1.small workers under an AutoScalingGroup, one unit; VDU2: a
//! database in another zone) and four zones of which `az3` and `az4` cannot hold an m1.small:
//!
//! - a retry goes on with the reselection of the run before it: its attempts, its excluded
//!   zones (never applied again) and its reselections (counted against `max_reselections`
//!   across runs); the occurrence lists every attempt of every run;
//! - the attempts and the stack are in the store while the operation runs, so a process killed
//!   mid-operation (here: a store that stops answering after a given commit, which stops the
//!   machine exactly as a SIGKILL after that commit) leaves them for the rollback, the retry
//!   and the fail;
//! - a fail of an instantiate that created a stack deletes the stack (or is refused, naming
//!   it), so no stack is left behind an instance that does not know it;
//! - a stack name Heat says exists already (409) is a stack failure naming the stack, not an
//!   unreachable backend.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{
    DriverError, OpOccFilter, StackDriver, Store, StoreBatch, Versioned, VirtualClock,
};
use vnfm_core::id::{OpOccId, VnfInstanceId, ZoneId};
use vnfm_core::lcm::{
    CreateVnfRequest, InstantiateVnfRequest, InstantiationState, LcmOperationStateType,
    VnfInstance, VnfLcmOpOcc,
};
use vnfm_core::lifecycle::engine::STACK_ID_KEY;
use vnfm_core::lifecycle::{
    Drivers, FailureKind, LcmConfig, LcmError, Lifecycle, OperationOptions, Progress,
};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::reselect::AttemptOutcome;
use vnfm_core::sim::{FaultKind, FaultySim, Method, SimCloud, StackDeleteFault};
use vnfm_core::store::MemoryStore;

const GROUP: &str = "worker_group";

/// az1 and az2 hold anything; az3 and az4 an m1.tiny but no m1.small.
const CLOUD: &str = "
zones:
  az1:
    hosts:
      c1: {vcpus: 16, memory_mb: 32768, disk_gb: 320}
  az2:
    hosts:
      c2: {vcpus: 16, memory_mb: 32768, disk_gb: 320}
  az3:
    hosts:
      c3: {vcpus: 1, memory_mb: 1536, disk_gb: 16}
  az4:
    hosts:
      c4: {vcpus: 1, memory_mb: 1536, disk_gb: 16}
flavors:
  m1.tiny: {vcpus: 1, memory_mb: 512, disk_gb: 1}
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
  m1.medium: {vcpus: 2, memory_mb: 4096, disk_gb: 40}
images: [cirros]
";

/// The seed under which the first reselection out of az3 picks az4 (of az2 and az4: az1
/// holds the database), as on the real cloud of the issue.
const SEED: u64 = 5;

const LEASE: Duration = Duration::from_secs(30);

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

/// A [`MemoryStore`] that stops answering after `left` more commits (each later commit fails
/// and is not applied): the operation machine stops at that commit and writes nothing more,
/// which leaves the store as a SIGKILL right after the last commit that went through would.
#[derive(Debug, Clone)]
struct DyingStore {
    inner: MemoryStore,
    left: Arc<AtomicU32>,
}

#[async_trait]
impl Store for DyingStore {
    async fn commit(&self, batch: StoreBatch) -> Result<(), DriverError> {
        let ok = self
            .left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if !ok {
            return Err(DriverError::Unavailable {
                driver: "dying",
                message: "the process was killed".into(),
            });
        }
        self.inner.commit(batch).await
    }
    async fn instance(&self, id: &VnfInstanceId) -> Result<VnfInstance, DriverError> {
        self.inner.instance(id).await
    }
    async fn instance_entry(
        &self,
        id: &VnfInstanceId,
    ) -> Result<Versioned<VnfInstance>, DriverError> {
        self.inner.instance_entry(id).await
    }
    async fn op_occ_entry(&self, id: &OpOccId) -> Result<Versioned<VnfLcmOpOcc>, DriverError> {
        self.inner.op_occ_entry(id).await
    }
    async fn instances(&self) -> Result<Vec<VnfInstance>, DriverError> {
        self.inner.instances().await
    }
    async fn op_occ(&self, id: &OpOccId) -> Result<VnfLcmOpOcc, DriverError> {
        self.inner.op_occ(id).await
    }
    async fn op_occs(&self, filter: OpOccFilter) -> Result<Vec<VnfLcmOpOcc>, DriverError> {
        self.inner.op_occs(filter).await
    }
}

struct World {
    sim: FaultySim,
    store: MemoryStore,
    clock: Arc<VirtualClock>,
    pkg: VnfPackage,
}

impl World {
    fn new() -> Self {
        let cloud = CloudFile::from_yaml("recovery cloud", CLOUD).unwrap();
        let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        Self {
            sim: FaultySim::new(SimCloud::new(cloud, 1)),
            store: MemoryStore::new(),
            clock: Arc::new(VirtualClock::new(start)),
            pkg: fs::load(&examples().join("packages/asg-vnf")).unwrap(),
        }
    }

    /// A lifecycle with reselection on, at most `max` reselections, over `store`.
    fn lcm_over(&self, max: u32, store: Arc<dyn Store>) -> Lifecycle {
        self.lcm_seeded(max, store, SEED)
    }

    /// As [`World::lcm_over`] with another seed (its ids differ from the other lifecycles').
    fn lcm_seeded(&self, max: u32, store: Arc<dyn Store>, seed: u64) -> Lifecycle {
        let drivers = Drivers {
            stacks: Arc::new(self.sim.clone()),
            zones: Arc::new(self.sim.clone()),
            compute: Arc::new(self.sim.clone()),
            store,
            clock: self.clock.clone(),
            cluster: None,
        };
        let mut config = LcmConfig::standard().unwrap();
        config.reselect_zones = true;
        config.max_reselections = Some(max);
        config.seed = seed;
        config.lease_time = LEASE;
        Lifecycle::new(drivers, config)
    }

    fn lcm(&self, max: u32) -> Lifecycle {
        self.lcm_over(max, Arc::new(self.store.clone()))
    }

    /// A lifecycle whose process "dies" after `commits` more commits.
    fn dying(&self, max: u32, commits: u32) -> Lifecycle {
        let store = DyingStore {
            inner: self.store.clone(),
            left: Arc::new(AtomicU32::new(commits)),
        };
        self.lcm_over(max, Arc::new(store))
    }

    async fn created(&self) -> VnfInstance {
        let req: CreateVnfRequest =
            serde_json::from_value(serde_json::json!({"vnfdId": self.pkg.descriptor_id})).unwrap();
        self.lcm(1).create(&self.pkg, &req).await.unwrap()
    }

    async fn only_op(&self) -> VnfLcmOpOcc {
        let ops = self.store.op_occs(OpOccFilter::all()).await.unwrap();
        assert_eq!(ops.len(), 1, "{ops:#?}");
        ops[0].clone()
    }

    /// Past the lease of the killed run.
    fn expire(&self) {
        self.clock.advance(LEASE * 2);
    }

    /// Top-level stacks that are not deleted, and servers.
    fn leftovers(&self) -> (usize, usize) {
        let snap: serde_json::Value =
            serde_json::from_str(&self.sim.sim().snapshot().unwrap()).unwrap();
        let stacks = snap["stacks"]
            .as_object()
            .unwrap()
            .values()
            .filter(|s| s["parent"].is_null() && s["status"] != "DELETE_COMPLETE")
            .count();
        (stacks, snap["servers"].as_object().unwrap().len())
    }
}

/// The workers pinned to az3 (too small), the database to az1.
fn pinned() -> OperationOptions {
    OperationOptions {
        pinned: [("VDU1", "az3"), ("VDU2", "az1")]
            .iter()
            .map(|(k, z)| ((*k).to_owned(), ZoneId::from(*z)))
            .collect(),
        ..OperationOptions::default()
    }
}

fn group_zones(op: &VnfLcmOpOcc) -> Vec<String> {
    op.attempts
        .iter()
        .map(|a| a.zones[GROUP].to_string())
        .collect()
}

fn outcomes(op: &VnfLcmOpOcc) -> Vec<Option<AttemptOutcome>> {
    op.attempts.iter().map(|a| a.outcome).collect()
}

fn saved(op: &VnfLcmOpOcc) -> Progress {
    serde_json::from_value(op.progress.clone().expect("a saved progress")).unwrap()
}

fn stack_recorded(inst: &VnfInstance) -> Option<String> {
    inst.metadata
        .as_ref()
        .and_then(|m| m.get(STACK_ID_KEY))
        .and_then(|v| v.as_str())
        .map(str::to_owned)
}

#[tokio::test]
async fn a_retry_goes_on_with_the_attempts_exclusions_and_budget_of_the_run_before() {
    let w = World::new();
    let inst = w.created().await;
    let req = InstantiateVnfRequest::new("default");
    let r = w
        .lcm(1)
        .instantiate(&inst.id, &w.pkg, &req, &pinned())
        .await
        .unwrap();
    let op = r.op_occ;
    assert_eq!(op.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::CapacityExhausted));
    assert_eq!(
        group_zones(&op),
        ["az3", "az4"],
        "seed {SEED}: the first reselection went to az4"
    );
    let detail = &op.error.as_ref().unwrap().detail;
    assert!(detail.contains("az3, az4"), "{detail}");
    let progress = saved(&op);
    assert_eq!(progress.reselection.reselections, 1);
    assert_eq!(
        progress.reselection.excluded,
        ["az3", "az4"].map(ZoneId::from).into_iter().collect()
    );

    // A retry under the same limit: the one reselection is spent, and the workers stand in an
    // excluded zone: it gives up at once, applying nothing.
    let updates = w.sim.calls(Method::UpdateStack);
    let r = w.lcm(1).retry(&op.id, &w.pkg, &pinned()).await.unwrap();
    let op = r.op_occ;
    assert_eq!(op.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::CapacityExhausted));
    let detail = &op.error.as_ref().unwrap().detail;
    assert!(detail.contains("reselection limit of 1"), "{detail}");
    assert!(detail.contains("az3, az4"), "{detail}");
    assert_eq!(w.sim.calls(Method::UpdateStack), updates, "no stack update");
    assert_eq!(group_zones(&op), ["az3", "az4"], "{:#?}", op.attempts);

    // A retry with one more reselection: the workers go to az2, the only zone left (never
    // az3 or az4 again), and the occurrence lists the three attempts of the three runs.
    let r = w.lcm(2).retry(&op.id, &w.pkg, &pinned()).await.unwrap();
    let op = r.op_occ;
    assert_eq!(
        op.operation_state,
        LcmOperationStateType::Completed,
        "{:?}",
        op.error
    );
    assert_eq!(
        group_zones(&op),
        ["az3", "az4", "az2"],
        "{:#?}",
        op.attempts
    );
    assert_eq!(
        outcomes(&op),
        [
            Some(AttemptOutcome::Failed),
            Some(AttemptOutcome::Failed),
            Some(AttemptOutcome::Succeeded)
        ]
    );
    assert_eq!(op.attempts[0].failed_zones, [ZoneId::from("az3")]);
    assert_eq!(op.attempts[1].failed_zones, [ZoneId::from("az4")]);
    assert_eq!(w.leftovers(), (1, 3));
}

/// Instantiate killed right after the checkpoint of the second apply (the update to az4):
/// commits STARTING, PROCESSING, the create's checkpoint, the update's checkpoint.
async fn killed_after_the_update(w: &World) -> VnfLcmOpOcc {
    let inst = w.created().await;
    let req = InstantiateVnfRequest::new("default");
    let e = w
        .dying(1, 4)
        .instantiate(&inst.id, &w.pkg, &req, &pinned())
        .await
        .unwrap_err();
    assert!(matches!(e, LcmError::Store(_)), "{e}");
    let op = w.only_op().await;
    assert_eq!(op.operation_state, LcmOperationStateType::Processing);
    // Both attempts are in the store while it runs: az3 failed, az4 still running.
    assert_eq!(group_zones(&op), ["az3", "az4"], "{:#?}", op.attempts);
    assert_eq!(outcomes(&op), [Some(AttemptOutcome::Failed), None]);
    let progress = saved(&op);
    assert!(progress.stack_id.is_some());
    assert_eq!(progress.reselection.attempts, op.attempts);
    assert_eq!(
        progress.reselection.excluded,
        [ZoneId::from("az3")].into_iter().collect()
    );
    assert_eq!(progress.reselection.reselections, 1);
    w.expire();
    op
}

#[tokio::test]
async fn a_killed_run_leaves_its_attempts_to_the_rollback() {
    let w = World::new();
    let op = killed_after_the_update(&w).await;
    let r = w.lcm(1).rollback(&op.id, &w.pkg).await.unwrap();
    let op = r.op_occ;
    assert_eq!(op.operation_state, LcmOperationStateType::RolledBack);
    assert_eq!(group_zones(&op), ["az3", "az4"], "{:#?}", op.attempts);
    assert_eq!(op.attempts[0].outcome, Some(AttemptOutcome::Failed));
    assert_eq!(w.leftovers(), (0, 0));
}

#[tokio::test]
async fn a_killed_run_is_retried_within_its_budget_and_its_attempt_applied_again() {
    let w = World::new();
    let op = killed_after_the_update(&w).await;
    // The interrupted attempt (az4) is applied again, as the same attempt: it fails, and the
    // one reselection is spent (by the killed run).
    let r = w.lcm(1).retry(&op.id, &w.pkg, &pinned()).await.unwrap();
    let op = r.op_occ;
    assert_eq!(op.operation_state, LcmOperationStateType::FailedTemp);
    let detail = &op.error.as_ref().unwrap().detail;
    assert!(detail.contains("reselection limit of 1"), "{detail}");
    assert_eq!(group_zones(&op), ["az3", "az4"], "{:#?}", op.attempts);
    assert_eq!(
        outcomes(&op),
        [Some(AttemptOutcome::Failed), Some(AttemptOutcome::Failed)]
    );
    assert_eq!(saved(&op).reselection.reselections, 1);
}

/// Instantiate (workers in az1, database in az2: it succeeds) killed right after the create's
/// checkpoint: the stack exists, the instance does not record it.
async fn killed_after_the_create(w: &World) -> (VnfInstance, VnfLcmOpOcc) {
    let inst = w.created().await;
    let opts = OperationOptions {
        pinned: [("VDU1", "az1"), ("VDU2", "az2")]
            .iter()
            .map(|(k, z)| ((*k).to_owned(), ZoneId::from(*z)))
            .collect(),
        ..OperationOptions::default()
    };
    let req = InstantiateVnfRequest::new("default");
    let e = w
        .dying(1, 3)
        .instantiate(&inst.id, &w.pkg, &req, &opts)
        .await
        .unwrap_err();
    assert!(matches!(e, LcmError::Store(_)), "{e}");
    let op = w.only_op().await;
    assert_eq!(op.operation_state, LcmOperationStateType::Processing);
    assert!(saved(&op).stack_id.is_some());
    assert_eq!(w.leftovers(), (1, 3));
    let inst = w.store.instance(&inst.id).await.unwrap();
    assert_eq!(stack_recorded(&inst), None);
    w.expire();
    (inst, op)
}

#[tokio::test]
async fn failing_a_killed_instantiate_deletes_its_stack_then_the_instance_instantiates_again() {
    let w = World::new();
    let (inst, op) = killed_after_the_create(&w).await;
    let stack = saved(&op).stack_id.unwrap();
    let failed = w.lcm(1).fail(&op.id).await.unwrap();
    assert_eq!(failed.operation_state, LcmOperationStateType::Failed);
    assert!(failed.error.is_some(), "FAILED keeps why it failed");
    assert!(failed.lease.is_none());
    assert_eq!(w.leftovers(), (0, 0), "the stack and its servers are gone");
    let e = w.sim.show_stack(&stack).await;
    assert!(
        e.is_err() || e.unwrap().stack_status.to_string() == "DELETE_COMPLETE",
        "stack {stack}"
    );
    let after = w.store.instance(&inst.id).await.unwrap();
    assert_eq!(
        after.instantiation_state,
        Some(InstantiationState::NotInstantiated)
    );
    assert_eq!(stack_recorded(&after), None);
    // The instance is free and its stack name too.
    let r = w
        .lcm_seeded(1, Arc::new(w.store.clone()), 99)
        .instantiate(
            &inst.id,
            &w.pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        r.op_occ.operation_state,
        LcmOperationStateType::Completed,
        "{:?}",
        r.op_occ.error
    );
}

#[tokio::test]
async fn a_fail_that_cannot_delete_the_stack_is_refused_naming_it_and_the_stack_stays_known() {
    let w = World::new();
    let (inst, op) = killed_after_the_create(&w).await;
    let stack = saved(&op).stack_id.unwrap();
    w.sim.fail_next_stack_deletes(
        1,
        StackDeleteFault::Failed {
            message: "compute host gone".into(),
        },
    );
    let e = w.lcm(1).fail(&op.id).await.unwrap_err();
    let LcmError::Conflict(msg) = &e else {
        panic!("{e}");
    };
    assert!(msg.contains(stack.as_str()), "{msg}");
    assert!(msg.contains("not failed"), "{msg}");
    let now = w.only_op().await;
    assert_eq!(now.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(
        now.error.as_ref().unwrap().title.as_deref(),
        Some("fail refused")
    );
    let after = w.store.instance(&inst.id).await.unwrap();
    assert_eq!(
        stack_recorded(&after).as_deref(),
        Some(stack.as_str()),
        "the instance records the stack"
    );
    assert_eq!(w.leftovers().0, 1);
    // Failed again once the delete works.
    let failed = w.lcm(1).fail(&op.id).await.unwrap();
    assert_eq!(failed.operation_state, LcmOperationStateType::Failed);
    assert_eq!(w.leftovers(), (0, 0));
    let after = w.store.instance(&inst.id).await.unwrap();
    assert_eq!(stack_recorded(&after), None);
}

#[tokio::test]
async fn a_failed_instantiate_that_recorded_its_stack_is_failed_without_leaving_it() {
    // Not killed: the stack failed (az3, no reselection left), the occurrence is FAILED_TEMP
    // and the instance records the stack; the fail deletes it.
    let w = World::new();
    let inst = w.created().await;
    let r = w
        .lcm(0)
        .instantiate(
            &inst.id,
            &w.pkg,
            &InstantiateVnfRequest::new("default"),
            &pinned(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert!(stack_recorded(&r.instance).is_some());
    let failed = w.lcm(0).fail(&r.op_occ.id).await.unwrap();
    assert_eq!(failed.operation_state, LcmOperationStateType::Failed);
    assert_eq!(group_zones(&failed), ["az3"], "the attempt stays listed");
    assert_eq!(w.leftovers(), (0, 0));
    let after = w.store.instance(&inst.id).await.unwrap();
    assert_eq!(stack_recorded(&after), None);
}

#[tokio::test]
async fn a_stack_name_that_exists_already_is_a_stack_failure_naming_the_stack() {
    let w = World::new();
    let inst = w.created().await;
    w.sim
        .fail_next(Method::CreateStack, 1, FaultKind::AlreadyExists);
    let r = w
        .lcm(1)
        .instantiate(
            &inst.id,
            &w.pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::StackFailed));
    let err = r.op_occ.error.unwrap();
    let name = format!("vnf-{}", inst.id);
    assert!(err.detail.contains(&name), "{}", err.detail);
    assert!(err.detail.contains("already exists"), "{}", err.detail);
    assert_eq!(err.title.as_deref(), Some("stack already exists"));
}

#[test]
fn a_progress_saved_without_the_reselection_history_still_loads() {
    // As a vnfm before the history saved it: the last zones only.
    let old = serde_json::json!({
        "plan": {"kind": "instantiate", "flavourId": "default", "stackName": "vnf-1"},
        "stackId": "stack-1",
        "zones": {"worker_group": "az4"},
    });
    let p: Progress = serde_json::from_value(old).unwrap();
    assert!(p.reselection.is_empty());
    assert_eq!(p.stack_id.unwrap().as_str(), "stack-1");
    // And an empty history is not written.
    let back = serde_json::to_value(Progress::new(p.plan)).unwrap();
    assert!(back.get("reselection").is_none(), "{back}");
}
