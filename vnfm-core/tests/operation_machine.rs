//! The [`Operation`] machine driven by hand, without a runtime: every test feeds
//! `handle_event` / `handle_timeout` with explicit times and reads `poll_action` /
//! `poll_timeout` / `poll_end`. The VIM answers come from the simulated cloud (its futures are
//! ready at once; a one-line executor polls them) or are written by the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{
    ComputeInventory, DriverError, GrantAnswer, ListZones, Stack, StackAction, StackDriver,
    StackState, StackStatus, Store, Version, Versioned, ZoneCatalog,
};
use vnfm_core::grant::{Grant, GrantRequest, ResourceType};
use vnfm_core::id::{IdGen, OpOccId, ZoneId};
use vnfm_core::lcm::{
    InstantiationState, LcmOperationStateType, LcmOperationType, VnfInstance, VnfLcmOpOcc,
};
use vnfm_core::lifecycle::grant::{self, GrantOptions};
use vnfm_core::lifecycle::{
    FailureKind, HookPoint, HookSpec, LcmConfig, LcmError, NfvoGrants, OpAction, OpEvent,
    Operation, OperationReport, OperationStart, Plan, Progress,
};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::problem::ProblemDetails;
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;

/// Polls a future that is ready at once (the simulator's and the memory store's are).
fn ready<T>(fut: impl Future<Output = T>) -> T {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1000 {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
    }
    panic!("the future was not ready");
}

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .to_utc()
}

fn secs(s: i64) -> TimeDelta {
    TimeDelta::seconds(s)
}

struct World {
    sim: SimCloud,
    store: MemoryStore,
    pkg: Arc<VnfPackage>,
    cfg: LcmConfig,
}

fn world(reselect: bool) -> World {
    let sim = SimCloud::new(
        CloudFile::load(examples().join("clouds/demo.yaml")).unwrap(),
        1,
    );
    let mut cfg = LcmConfig::standard().unwrap();
    cfg.reselect_zones = reselect;
    cfg.seed = 3;
    cfg.poll_interval = Duration::from_secs(2);
    cfg.stack_timeout = Duration::from_secs(60);
    cfg.lease_time = Duration::from_secs(30);
    let pkg = Arc::new(fs::load(&examples().join("packages/demo-vnf")).unwrap());
    World {
        sim,
        store: MemoryStore::new(),
        pkg,
        cfg,
    }
}

impl World {
    /// A stored NOT_INSTANTIATED instance and an instantiate machine for it at `t0`, pinning
    /// VDUs as given.
    fn instantiate(&self, pins: &[(&str, &str)], hooks: Vec<HookSpec>) -> Operation {
        let mut inst = VnfInstance::new("inst-1", self.pkg.descriptor_id.clone());
        inst.instantiation_state = Some(InstantiationState::NotInstantiated);
        ready(
            self.store
                .commit(vnfm_core::driver::StoreBatch::new().with_instance(inst.clone())),
        )
        .unwrap();
        let entry = ready(self.store.instance_entry(&inst.id)).unwrap();
        let op_id = OpOccId::from("op-1");
        let op = VnfLcmOpOcc::new(
            op_id.clone(),
            inst.id.clone(),
            LcmOperationType::Instantiate,
            t0(),
        );
        let mut progress = Progress::new(Plan::Instantiate {
            flavour_id: "default".into(),
            stack_name: "vnf-inst-1".into(),
            configurable: None,
            level: None,
        });
        let opts = GrantOptions {
            fallback_best_effort: false,
            vim_connection_id: Some("vim-0".into()),
            is_automatic_invocation: false,
        };
        let mut ids = IdGen::seeded(7);
        progress.planned =
            Some(grant::instantiate(&self.pkg, "default", &inst, &op_id, &opts, &mut ids).unwrap());
        progress.grant_id = Some("grant-1".into());
        progress.pinned = pins
            .iter()
            .map(|(k, z)| ((*k).to_owned(), ZoneId::from(*z)))
            .collect();
        let start = OperationStart {
            op: Versioned {
                value: op,
                version: Version(0),
            },
            resume: false,
            instance: entry,
            progress,
            package: Some(self.pkg.clone()),
            owner: "test:1".into(),
            hooks,
        };
        Operation::new(self.cfg.clone(), start, t0())
    }

    /// Carries out `a` against the simulator and the memory store.
    fn perform(&self, a: OpAction) -> OpEvent {
        match a {
            OpAction::Commit(b) => OpEvent::Committed(ready(self.store.commit(b))),
            OpAction::ListZones => OpEvent::Zones(ready(self.sim.list_zones(ListZones::default()))),
            OpAction::CreateStack(r) => OpEvent::StackCreated(ready(self.sim.create_stack(r))),
            OpAction::UpdateStack(r) => OpEvent::StackUpdated(ready(self.sim.update_stack(r))),
            OpAction::ShowStack(id) => OpEvent::Stack(ready(self.sim.show_stack(&id))),
            OpAction::DeleteStack(id) => OpEvent::StackDeleted(ready(self.sim.delete_stack(&id))),
            OpAction::ListResources(r) => OpEvent::Resources(ready(self.sim.list_resources(r))),
            OpAction::MarkUnhealthy(r) => OpEvent::Marked(ready(self.sim.mark_unhealthy(r))),
            OpAction::ShowServers(ids) => OpEvent::Servers(
                ids.into_iter()
                    .map(|id| {
                        let r = ready(self.sim.server(&id));
                        (id, r)
                    })
                    .collect(),
            ),
            OpAction::RunHook(_) => panic!("hooks are answered by the test"),
            other => panic!("unexpected action {other:?}"),
        }
    }

    /// Runs `m` at time `now` until it waits, ends or asks for a hook; returns the hook call
    /// asked for, if any.
    fn run(&self, m: &mut Operation, now: DateTime<Utc>) -> Option<OpAction> {
        while let Some(a) = m.poll_action() {
            if matches!(a, OpAction::RunHook(_)) {
                return Some(a);
            }
            let ev = self.perform(a);
            m.handle_event(ev, now);
        }
        None
    }
}

fn in_progress(name: &str) -> Stack {
    Stack {
        id: "stack-1".into(),
        stack_name: name.into(),
        stack_status: StackStatus::new(StackAction::Create, StackState::InProgress),
        stack_status_reason: "Stack CREATE started".into(),
        parameters: BTreeMap::new().into_iter().collect(),
        outputs: Vec::new(),
    }
}

fn ended(m: &mut Operation) -> OperationReport {
    match m.poll_end() {
        Some(Ok(r)) => r,
        Some(Err(e)) => panic!("the operation could not record its end: {e}"),
        None => panic!("the operation has not ended"),
    }
}

#[test]
fn a_stack_that_never_settles_times_out_at_exactly_the_stack_timeout() {
    let w = world(false);
    let mut m = w.instantiate(&[], Vec::new());
    // STARTING, PROCESSING, zones.
    for _ in 0..3 {
        let a = m.poll_action().unwrap();
        let ev = w.perform(a);
        m.handle_event(ev, t0());
    }
    let Some(OpAction::CreateStack(req)) = m.poll_action() else {
        panic!("expected the stack create");
    };
    assert_eq!(req.name, "vnf-inst-1");
    m.handle_event(OpEvent::StackCreated(Ok("stack-1".into())), t0());
    // The new stack's id is saved at once (a rollback must find it even if we die now).
    let Some(OpAction::Commit(b)) = m.poll_action() else {
        panic!("expected a checkpoint commit");
    };
    let saved = b.put_op_occs[0].progress.clone().unwrap();
    assert_eq!(saved["stackId"], "stack-1");
    m.handle_event(OpEvent::Committed(ready(w.store.commit(b))), t0());
    // Heat never finishes: the machine polls every 2 s (renewing its lease every 10 s) and
    // gives up at t0 + 60 s exactly.
    let mut now = t0();
    let mut shows = 0;
    let mut renewals = 0;
    loop {
        match m.poll_action() {
            Some(OpAction::ShowStack(id)) => {
                assert_eq!(id.as_str(), "stack-1");
                shows += 1;
                m.handle_event(OpEvent::Stack(Ok(in_progress("vnf-inst-1"))), now);
            }
            Some(OpAction::Commit(b)) if b.put_op_occs[0].is_running() => {
                renewals += 1;
                let lease = b.put_op_occs[0].lease.clone().unwrap();
                assert_eq!(lease.expires, now + secs(30), "the lease runs from now");
                m.handle_event(OpEvent::Committed(ready(w.store.commit(b))), now);
            }
            Some(OpAction::Commit(b)) => {
                let op = &b.put_op_occs[0];
                assert_eq!(op.operation_state, LcmOperationStateType::FailedTemp);
                assert_eq!(op.state_entered_time, t0() + secs(60));
                let err = op.error.as_ref().unwrap();
                assert_eq!(err.title.as_deref(), Some("stack timed out"));
                assert!(err.detail.contains("after 60s"), "{}", err.detail);
                assert!(op.lease.is_none(), "a stopped operation holds no lease");
                m.handle_event(OpEvent::Committed(ready(w.store.commit(b))), now);
                break;
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => {
                let t = m.poll_timeout().expect("a waiting machine has a timer");
                assert!(t > now && t - now <= secs(2), "next wake {t} from {now}");
                now = t;
                m.handle_timeout(now);
            }
        }
    }
    assert_eq!(shows, 31, "a read at t0 and every 2 s up to t0 + 60 s");
    assert_eq!(renewals, 6, "a renewal every 10 s (a third of the lease)");
    let r = ended(&mut m);
    assert_eq!(r.failure, Some(FailureKind::Backend));
    // The failed instantiate's stack is recorded on the instance, for the rollback.
    let inst = ready(w.store.instance(&"inst-1".into())).unwrap();
    assert_eq!(inst.metadata.unwrap()["stackId"], "stack-1");
}

#[test]
fn a_failed_stack_is_read_once_its_resources_settle_then_reselection_moves_the_vnfc() {
    // VDU1-0 pinned to AZ-1, which is too small: Heat fails, the resources are read once none
    // is in progress, the failed server is located, and the next apply moves VDU1-0.
    let w = world(true);
    let mut m = w.instantiate(&[("VDU1-0", "AZ-1")], Vec::new());
    let mut now = t0();
    let mut lists_in_progress = 0;
    let mut applies = Vec::new();
    loop {
        let Some(a) = m.poll_action() else {
            if let Some(t) = m.poll_timeout() {
                now = t;
                m.handle_timeout(now);
                continue;
            }
            break;
        };
        let ev = match a {
            OpAction::ListResources(r) if lists_in_progress < 2 && applies.len() == 1 => {
                // The first two reads: a sibling nested stack still in progress.
                let mut res = ready(w.sim.list_resources(r)).unwrap();
                res[0].resource_status =
                    StackStatus::new(StackAction::Create, StackState::InProgress);
                lists_in_progress += 1;
                OpEvent::Resources(Ok(res))
            }
            OpAction::CreateStack(ref r) => {
                applies.push((
                    now,
                    r.parameters["nfv"]["VDU"]["VDU1-0"]["locationConstraints"].clone(),
                ));
                w.perform(a)
            }
            OpAction::UpdateStack(ref r) => {
                applies.push((
                    now,
                    r.parameters["nfv"]["VDU"]["VDU1-0"]["locationConstraints"].clone(),
                ));
                w.perform(a)
            }
            a => w.perform(a),
        };
        m.handle_event(ev, now);
    }
    let r = ended(&mut m);
    assert_eq!(
        r.op_occ.operation_state,
        LcmOperationStateType::Completed,
        "{:?}",
        r.op_occ.error
    );
    assert_eq!(
        lists_in_progress, 2,
        "the machine re-read while resources were in progress"
    );
    assert_eq!(applies.len(), 2, "one reselection round: {applies:?}");
    assert_eq!(applies[0].1, "AZ-1");
    assert_ne!(applies[1].1, "AZ-1", "VDU1-0 moved out of the full zone");
    assert_eq!(
        applies[1].0,
        t0() + secs(4),
        "the second apply waited two poll intervals for the resources to settle"
    );
    assert_eq!(r.op_occ.attempts.len(), 2);
    assert_eq!(
        r.op_occ.attempts[0].failed_zones,
        vec![ZoneId::from("AZ-1")]
    );
    let inst = ready(w.store.instance(&"inst-1".into())).unwrap();
    assert!(inst.is_instantiated());
}

#[test]
fn a_failing_hook_ends_failed_temp_and_retry_runs_only_the_hook() {
    let w = world(false);
    let hooks = vec![HookSpec {
        name: "label-nodes".into(),
        points: vec![HookPoint::InstantiateEnd],
    }];
    let mut m = w.instantiate(&[], hooks.clone());
    let Some(OpAction::RunHook(call)) = w.run(&mut m, t0()) else {
        panic!("expected the hook");
    };
    assert_eq!(call.point, HookPoint::InstantiateEnd);
    assert!(
        call.instance.is_instantiated(),
        "the hook sees the new instance"
    );
    m.handle_event(OpEvent::Hook(Err("the API server said 403".into())), t0());
    assert!(w.run(&mut m, t0()).is_none());
    let r = ended(&mut m);
    assert_eq!(r.failure, Some(FailureKind::Hook));
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert!(!r.op_occ.hooks[0].succeeded);
    assert!(r.op_occ.error.unwrap().detail.contains("403"));
    // The instance did not change: the stack is recorded, nothing else.
    let inst = ready(w.store.instance_entry(&"inst-1".into())).unwrap();
    assert!(!inst.value.is_instantiated());
    // Retry from the stored occurrence: PROCESSING, then the hook only (no stack action).
    let op = ready(w.store.op_occ_entry(&"op-1".into())).unwrap();
    let progress: Progress = serde_json::from_value(op.value.progress.clone().unwrap()).unwrap();
    assert!(progress.vnfcs.is_some(), "the servers read back were saved");
    let start = OperationStart {
        op,
        resume: true,
        instance: inst,
        progress,
        package: Some(w.pkg.clone()),
        owner: "test:2".into(),
        hooks,
    };
    let later = t0() + secs(300);
    let mut m = Operation::new(w.cfg.clone(), start, later);
    let Some(OpAction::Commit(b)) = m.poll_action() else {
        panic!("expected the resume commit");
    };
    assert_eq!(
        b.put_op_occs[0].operation_state,
        LcmOperationStateType::Processing
    );
    assert!(b.put_op_occs[0].error.is_none());
    m.handle_event(OpEvent::Committed(ready(w.store.commit(b))), later);
    let Some(OpAction::RunHook(_)) = m.poll_action() else {
        panic!("a retry after the stack was done runs the hook at once");
    };
    m.handle_event(OpEvent::Hook(Ok("labelled 3 nodes".into())), later);
    assert!(w.run(&mut m, later).is_none());
    let r = ended(&mut m);
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert!(r.op_occ.hooks[0].succeeded);
    assert!(r.instance.is_instantiated());
    assert!(
        r.op_occ.progress.is_none(),
        "an ended occurrence keeps no progress"
    );
}

#[test]
fn an_interrupt_ends_the_operation_failed_temp_after_the_step_out() {
    let w = world(false);
    let mut m = w.instantiate(&[], Vec::new());
    for _ in 0..3 {
        let a = m.poll_action().unwrap();
        let ev = w.perform(a);
        m.handle_event(ev, t0());
    }
    let a = m.poll_action().unwrap();
    assert!(matches!(a, OpAction::CreateStack(_)));
    // SIGINT while the create is out: the machine waits for its answer, records the stack
    // and stops.
    m.interrupt(t0(), "SIGINT");
    assert!(
        m.poll_action().is_none(),
        "nothing more while an action is out"
    );
    let ev = w.perform(a);
    m.handle_event(ev, t0());
    let Some(OpAction::Commit(b)) = m.poll_action() else {
        panic!("expected the final commit");
    };
    let op = &b.put_op_occs[0];
    assert_eq!(op.operation_state, LcmOperationStateType::FailedTemp);
    let err = op.error.as_ref().unwrap();
    assert_eq!(err.title.as_deref(), Some("interrupted"));
    assert!(err.detail.contains("vnfm op retry op-1"), "{}", err.detail);
    m.handle_event(OpEvent::Committed(ready(w.store.commit(b))), t0());
    assert_eq!(ended(&mut m).failure, Some(FailureKind::Interrupted));
}

/// SOL003 v3.3.1 5.4.17.3.1 / figure 5.6.2.2-1: an operation cancelled while its occurrence
/// is stored STARTING (the PROCESSING commit not made yet) is not run and ends ROLLED_BACK,
/// the instance unchanged and nothing sent to the VIM; whether the cancel comes while the
/// STARTING commit is out or just after it.
#[test]
fn a_cancel_in_starting_ends_rolled_back_without_running() {
    for while_out in [true, false] {
        let w = world(false);
        let mut m = w.instantiate(&[], Vec::new());
        let Some(OpAction::Commit(start)) = m.poll_action() else {
            panic!("expected the start commit");
        };
        assert_eq!(
            start.put_op_occs[0].operation_state,
            LcmOperationStateType::Starting
        );
        if while_out {
            m.interrupt(t0(), "cancelled (GRACEFUL) by POST .../cancel");
        }
        m.handle_event(OpEvent::Committed(ready(w.store.commit(start))), t0());
        if !while_out {
            m.interrupt(t0(), "cancelled (GRACEFUL) by POST .../cancel");
        }
        let Some(OpAction::Commit(b)) = m.poll_action() else {
            panic!("expected the final commit, not the PROCESSING one");
        };
        let op = &b.put_op_occs[0];
        assert_eq!(op.operation_state, LcmOperationStateType::RolledBack);
        assert!(op.lease.is_none() && op.progress.is_none(), "{op:?}");
        let err = op.error.as_ref().unwrap();
        assert!(err.detail.contains("while STARTING"), "{}", err.detail);
        assert!(
            err.detail.contains("cancelled (GRACEFUL)"),
            "{}",
            err.detail
        );
        assert!(b.put_instances.is_empty(), "the instance is left as it is");
        m.handle_event(OpEvent::Committed(ready(w.store.commit(b))), t0());
        assert!(m.poll_action().is_none());
        let r = ended(&mut m);
        assert_eq!(r.op_occ.operation_state, LcmOperationStateType::RolledBack);
        assert_eq!(r.failure, Some(FailureKind::Interrupted));
        assert!(!r.instance.is_instantiated());
        let stored = ready(w.store.op_occ_entry(&"op-1".into())).unwrap();
        assert_eq!(
            stored.value.operation_state,
            LcmOperationStateType::RolledBack
        );
        assert!(w.sim.server_ids().is_empty(), "nothing was sent to the VIM");
    }
}

/// Once the occurrence is stored PROCESSING, a cancel ends it FAILED_TEMP, even before the
/// first VIM call.
#[test]
fn a_cancel_once_processing_ends_failed_temp() {
    let w = world(false);
    let mut m = w.instantiate(&[], Vec::new());
    for _ in 0..2 {
        let a = m.poll_action().unwrap();
        assert!(matches!(a, OpAction::Commit(_)), "{a:?}");
        let ev = w.perform(a);
        m.handle_event(ev, t0());
    }
    m.interrupt(t0(), "cancelled (GRACEFUL) by POST .../cancel");
    let Some(OpAction::Commit(b)) = m.poll_action() else {
        panic!("expected the final commit");
    };
    assert_eq!(
        b.put_op_occs[0].operation_state,
        LcmOperationStateType::FailedTemp
    );
}

#[test]
fn a_lost_lease_stops_the_machine_without_writing() {
    let w = world(false);
    let mut m = w.instantiate(&[], Vec::new());
    for _ in 0..4 {
        let a = m.poll_action().unwrap();
        let ev = w.perform(a);
        m.handle_event(ev, t0());
    }
    // The checkpoint after the create: another process declared the operation interrupted
    // meanwhile, so the commit conflicts.
    let Some(OpAction::Commit(_)) = m.poll_action() else {
        panic!("expected the checkpoint");
    };
    m.handle_event(
        OpEvent::Committed(Err(DriverError::Conflict {
            driver: "memory",
            message: "operation occurrence op-1 changed since it was read".into(),
        })),
        t0(),
    );
    assert!(m.poll_action().is_none());
    match m.poll_end() {
        Some(Err(LcmError::Conflict(msg))) => assert!(msg.contains("taken over"), "{msg}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn a_start_that_loses_the_race_for_the_instance_is_a_conflict() {
    let w = world(false);
    let mut m = w.instantiate(&[], Vec::new());
    // Another writer changes the instance between the read and the start commit.
    let inst = ready(w.store.instance(&"inst-1".into())).unwrap();
    ready(
        w.store
            .commit(vnfm_core::driver::StoreBatch::new().with_instance(inst)),
    )
    .unwrap();
    let a = m.poll_action().unwrap();
    let ev = w.perform(a);
    m.handle_event(ev, t0());
    match m.poll_end() {
        Some(Err(LcmError::Conflict(msg))) => {
            assert!(msg.contains("another operation started"), "{msg}");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(ready(w.store.op_occ(&"op-1".into()))
        .unwrap_err()
        .is_not_found());
}

// ---- grants asked of an NFVO (LcmConfig::nfvo_grants) -------------------------------------

fn nfvo_world() -> World {
    let mut w = world(false);
    w.cfg.nfvo_grants = Some(NfvoGrants {
        poll_interval: Duration::from_secs(2),
        timeout: Duration::from_secs(60),
    });
    w
}

/// The NFVO's grant of `req`: every COMPUTE resource in the zone `zones` gives its VDU.
fn nfvo_grant(req: &GrantRequest, id: &str, zones: &[(&str, &str)]) -> Grant {
    let mut infos = Vec::new();
    let mut add = Vec::new();
    let mut next = BTreeMap::new();
    for r in &req.add_resources {
        let Some(vdu) = r.vdu_id.as_ref() else {
            continue;
        };
        if !matches!(r.type_, ResourceType::Compute) {
            continue;
        }
        // The i-th VNFC of a VDU goes to the i-th zone listed for it.
        let i: &mut usize = next.entry(vdu.as_str().to_owned()).or_default();
        let Some((_, zone)) = zones.iter().filter(|(v, _)| *v == vdu.as_str()).nth(*i) else {
            continue;
        };
        *i += 1;
        let zid = format!("z-{}", infos.len());
        infos.push(serde_json::json!({"id": zid, "zoneId": zone}));
        add.push(serde_json::json!({"resourceDefinitionId": r.id, "zoneId": zid}));
    }
    serde_json::from_value(serde_json::json!({
        "id": id,
        "vnfInstanceId": req.vnf_instance_id,
        "vnfLcmOpOccId": req.vnf_lcm_op_occ_id,
        "zones": infos,
        "addResources": add,
        "_links": {
            "self": {"href": format!("http://nfvo/grant/v1/grants/{id}")},
            "vnfLcmOpOcc": {"href": "http://vnfm/vnflcm/v1/vnf_lcm_op_occs/op-1"},
            "vnfInstance": {"href": "http://vnfm/vnflcm/v1/vnf_instances/inst-1"}
        }
    }))
    .unwrap()
}

/// The start commit, then the grant request: returns the request.
fn to_grant_request(w: &World, m: &mut Operation) -> GrantRequest {
    let Some(OpAction::Commit(start)) = m.poll_action() else {
        panic!("expected the start commit");
    };
    assert_eq!(
        start.put_op_occs[0].operation_state,
        LcmOperationStateType::Starting
    );
    m.handle_event(OpEvent::Committed(ready(w.store.commit(start))), t0());
    match m.poll_action() {
        Some(OpAction::RequestGrant(req)) => *req,
        other => panic!("expected the grant request while STARTING, got {other:?}"),
    }
}

fn stored_state(w: &World) -> LcmOperationStateType {
    ready(w.store.op_occ_entry(&"op-1".into()))
        .unwrap()
        .value
        .operation_state
}

/// Runs `m` from `now` to its end against the simulator, answering timers and renewals.
fn run_to_end(w: &World, m: &mut Operation, mut now: DateTime<Utc>) -> OperationReport {
    for _ in 0..10_000 {
        if let Some(a) = m.poll_action() {
            let ev = w.perform(a);
            m.handle_event(ev, now);
            continue;
        }
        if let Some(end) = m.poll_end() {
            return end.unwrap();
        }
        now = m.poll_timeout().expect("a waiting machine has a timer");
        m.handle_timeout(now);
    }
    panic!("the operation did not end");
}

fn pending(location: &str, retry_after: Option<u64>) -> OpEvent {
    OpEvent::Grant(Ok(GrantAnswer::Pending {
        location: location.into(),
        retry_after: retry_after.map(Duration::from_secs),
    }))
}

/// SOL003 clause 9 with 5.6.2.2: the occurrence stays STARTING while the NFVO decides (202,
/// polled at its Location every poll interval, or after its Retry-After); the zones the grant
/// gives are where the VNFCs go, and its id is the occurrence's grantId.
#[test]
fn an_nfvo_grant_is_awaited_in_starting_and_its_zones_are_where_the_vnfcs_go() {
    let w = nfvo_world();
    let mut m = w.instantiate(&[], Vec::new());
    let req = to_grant_request(&w, &mut m);
    assert_eq!(req.vnf_lcm_op_occ_id.as_str(), "op-1");
    assert_eq!(req.add_resources.len(), 5, "3 COMPUTE, 2 STORAGE: {req:?}");
    m.handle_event(pending("http://nfvo/grant/v1/grants/g-9", None), t0());
    assert!(
        m.poll_action().is_none(),
        "nothing before the poll interval"
    );
    assert_eq!(m.poll_timeout(), Some(t0() + secs(2)));
    assert_eq!(stored_state(&w), LcmOperationStateType::Starting);
    m.handle_timeout(t0() + secs(2));
    match m.poll_action() {
        Some(OpAction::PollGrant(l)) => assert_eq!(l, "http://nfvo/grant/v1/grants/g-9"),
        other => panic!("expected a poll, got {other:?}"),
    }
    m.handle_event(
        pending("http://nfvo/grant/v1/grants/g-9", Some(5)),
        t0() + secs(2),
    );
    assert_eq!(
        m.poll_timeout(),
        Some(t0() + secs(7)),
        "the NFVO's Retry-After"
    );
    m.handle_timeout(t0() + secs(7));
    assert!(matches!(m.poll_action(), Some(OpAction::PollGrant(_))));
    let g = nfvo_grant(
        &req,
        "nfvo-grant-1",
        &[("VDU1", "AZ-3"), ("VDU1", "AZ-4"), ("VDU2", "AZ-2")],
    );
    m.handle_event(
        OpEvent::Grant(Ok(GrantAnswer::Granted(Box::new(g)))),
        t0() + secs(7),
    );
    let Some(OpAction::Commit(b)) = m.poll_action() else {
        panic!("expected the PROCESSING commit");
    };
    assert_eq!(
        b.put_op_occs[0].operation_state,
        LcmOperationStateType::Processing
    );
    m.handle_event(OpEvent::Committed(ready(w.store.commit(b))), t0() + secs(7));
    let r = run_to_end(&w, &mut m, t0() + secs(7));
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::Completed);
    assert_eq!(r.op_occ.grant_id.as_ref().unwrap().as_str(), "nfvo-grant-1");
    let mut zones: Vec<(String, String)> = r
        .instance
        .instantiated_vnf_info
        .as_ref()
        .unwrap()
        .vnfc_resource_info
        .iter()
        .map(|v| {
            (
                v.vdu_id.as_str().to_owned(),
                v.zone_id.as_ref().unwrap().as_str().to_owned(),
            )
        })
        .collect();
    zones.sort();
    assert_eq!(
        zones,
        [("VDU1", "AZ-3"), ("VDU1", "AZ-4"), ("VDU2", "AZ-2")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .to_vec()
    );
}

/// SOL003 figure 5.6.2.2-1: a grant the NFVO rejects (403) ends the occurrence ROLLED_BACK from
/// STARTING, with the NFVO's detail, and nothing is sent to the VIM.
#[test]
fn a_grant_the_nfvo_rejects_ends_rolled_back_unrun() {
    let w = nfvo_world();
    let mut m = w.instantiate(&[], Vec::new());
    to_grant_request(&w, &mut m);
    let p = ProblemDetails::new(403, "no capacity left in region R1").with_title("Forbidden");
    m.handle_event(OpEvent::Grant(Ok(GrantAnswer::Rejected(p))), t0());
    let Some(OpAction::Commit(b)) = m.poll_action() else {
        panic!("expected the final commit");
    };
    let op = &b.put_op_occs[0];
    assert_eq!(op.operation_state, LcmOperationStateType::RolledBack);
    let err = op.error.as_ref().unwrap();
    assert_eq!(err.title.as_deref(), Some("grant not given"));
    assert!(
        err.detail
            .contains("the NFVO rejected the grant (403 Forbidden): no capacity left"),
        "{}",
        err.detail
    );
    m.handle_event(OpEvent::Committed(ready(w.store.commit(b))), t0());
    let r = ended(&mut m);
    assert_eq!(r.failure, Some(FailureKind::Invalid));
    assert!(!r.instance.is_instantiated());
    assert!(w.sim.server_ids().is_empty(), "nothing was sent to the VIM");
}

/// A cancel while the NFVO decides needs no answer from it: the occurrence ends ROLLED_BACK at
/// once (SOL003 5.4.17.3.1), even after lease renewals bumped its version.
#[test]
fn a_cancel_while_the_nfvo_decides_ends_rolled_back_at_once() {
    let w = nfvo_world();
    let mut m = w.instantiate(&[], Vec::new());
    to_grant_request(&w, &mut m);
    m.handle_event(pending("http://nfvo/g/1", Some(30)), t0());
    // The lease (30 s) is renewed every 10 s while STARTING.
    m.handle_timeout(t0() + secs(10));
    let Some(OpAction::Commit(renewal)) = m.poll_action() else {
        panic!("expected a lease renewal");
    };
    assert_eq!(
        renewal.put_op_occs[0].operation_state,
        LcmOperationStateType::Starting
    );
    m.handle_event(
        OpEvent::Committed(ready(w.store.commit(renewal))),
        t0() + secs(10),
    );
    m.interrupt(t0() + secs(12), "cancelled (GRACEFUL) by POST .../cancel");
    let Some(OpAction::Commit(b)) = m.poll_action() else {
        panic!("expected the final commit at once");
    };
    let op = &b.put_op_occs[0];
    assert_eq!(op.operation_state, LcmOperationStateType::RolledBack);
    assert!(op.error.as_ref().unwrap().detail.contains("while STARTING"));
    m.handle_event(
        OpEvent::Committed(ready(w.store.commit(b))),
        t0() + secs(12),
    );
    assert_eq!(ended(&mut m).failure, Some(FailureKind::Interrupted));
    assert_eq!(stored_state(&w), LcmOperationStateType::RolledBack);
}

/// An NFVO that cannot be reached is asked again every poll interval, the same request, until
/// the grant timeout; then the occurrence ends ROLLED_BACK saying so. An error answer that is
/// no 5xx is not asked again.
#[test]
fn an_unreachable_nfvo_is_asked_again_until_the_grant_timeout() {
    let w = nfvo_world();
    let mut m = w.instantiate(&[], Vec::new());
    let first = to_grant_request(&w, &mut m);
    let down = || {
        OpEvent::Grant(Err(DriverError::Unavailable {
            driver: "nfvo",
            message: "POST http://nfvo/grant/v1/grants: connection refused".into(),
        }))
    };
    let mut now = t0();
    m.handle_event(down(), now);
    let mut requests = 1;
    let end = loop {
        match m.poll_action() {
            Some(OpAction::RequestGrant(req)) => {
                assert_eq!(*req, first, "the same request again");
                requests += 1;
                m.handle_event(down(), now);
            }
            Some(OpAction::Commit(b)) if b.put_op_occs[0].is_running() => {
                m.handle_event(OpEvent::Committed(ready(w.store.commit(b))), now);
            }
            Some(OpAction::Commit(b)) => break b,
            Some(other) => panic!("unexpected {other:?}"),
            None => {
                now = m.poll_timeout().unwrap();
                m.handle_timeout(now);
            }
        }
    };
    assert_eq!(requests, 30, "at t0 and every 2 s before t0 + 60 s");
    let op = &end.put_op_occs[0];
    assert_eq!(op.operation_state, LcmOperationStateType::RolledBack);
    assert_eq!(op.state_entered_time, t0() + secs(60));
    let detail = &op.error.as_ref().unwrap().detail;
    assert!(
        detail.contains("no grant from the NFVO within 60 s") && detail.contains("refused"),
        "{detail}"
    );

    let w = nfvo_world();
    let mut m = w.instantiate(&[], Vec::new());
    to_grant_request(&w, &mut m);
    m.handle_event(
        OpEvent::Grant(Err(DriverError::Invalid {
            driver: "nfvo",
            message: "400 Bad Request: addResources[0].type: unknown".into(),
        })),
        t0(),
    );
    let Some(OpAction::Commit(b)) = m.poll_action() else {
        panic!("expected the final commit");
    };
    assert_eq!(
        b.put_op_occs[0].operation_state,
        LcmOperationStateType::RolledBack
    );
    assert!(b.put_op_occs[0]
        .error
        .as_ref()
        .unwrap()
        .detail
        .contains("addResources[0].type: unknown"));
}

/// A grant for another occurrence is refused; a zone the catalogue does not know fails the
/// operation (INVALID) before any stack is created, naming the grant, the VNFC and the zone.
#[test]
fn a_grant_for_another_occurrence_or_an_unknown_zone_is_refused() {
    let w = nfvo_world();
    let mut m = w.instantiate(&[], Vec::new());
    let mut req = to_grant_request(&w, &mut m);
    req.vnf_lcm_op_occ_id = "op-2".into();
    let g = nfvo_grant(&req, "g-other", &[]);
    m.handle_event(OpEvent::Grant(Ok(GrantAnswer::Granted(Box::new(g)))), t0());
    let Some(OpAction::Commit(b)) = m.poll_action() else {
        panic!("expected the final commit");
    };
    assert_eq!(
        b.put_op_occs[0].operation_state,
        LcmOperationStateType::RolledBack
    );
    let detail = &b.put_op_occs[0].error.as_ref().unwrap().detail;
    assert!(
        detail.contains("is for operation occurrence op-2, not op-1"),
        "{detail}"
    );

    let w = nfvo_world();
    let mut m = w.instantiate(&[], Vec::new());
    let req = to_grant_request(&w, &mut m);
    let g = nfvo_grant(&req, "g-9", &[("VDU1", "AZ-9")]);
    m.handle_event(OpEvent::Grant(Ok(GrantAnswer::Granted(Box::new(g)))), t0());
    let r = run_to_end(&w, &mut m, t0());
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::Invalid));
    let detail = &r.op_occ.error.as_ref().unwrap().detail;
    assert!(
        detail.contains("the NFVO's grant g-9 gives VDU1-0 zone AZ-9"),
        "{detail}"
    );
    assert!(w.sim.server_ids().is_empty(), "no stack was created");
}

fn unavailable() -> DriverError {
    DriverError::Unavailable {
        driver: "postgres",
        message: "cannot reach the PostgreSQL server (restarting)".into(),
    }
}

#[test]
fn a_commit_the_store_cannot_take_is_sent_again_until_it_is_stored() {
    let w = world(false);
    let mut m = w.instantiate(&[], Vec::new());
    let a = m.poll_action().unwrap();
    let ev = w.perform(a);
    m.handle_event(ev, t0());
    let Some(OpAction::Commit(processing)) = m.poll_action() else {
        panic!("expected the PROCESSING commit");
    };
    // The database restarts: the commit fails, and fails again a moment later.
    m.handle_event(OpEvent::Committed(Err(unavailable())), t0());
    assert!(m.poll_action().is_none(), "nothing else happens meanwhile");
    assert!(m.poll_end().is_none(), "the operation is not given up");
    let first = m.poll_timeout().expect("a retry is timed");
    assert_eq!(first, t0() + TimeDelta::milliseconds(250));
    m.handle_timeout(first);
    let Some(OpAction::Commit(again)) = m.poll_action() else {
        panic!("expected the same commit again");
    };
    m.handle_event(OpEvent::Committed(Err(unavailable())), first);
    let second = m.poll_timeout().expect("a retry is timed");
    assert_eq!(
        second,
        first + TimeDelta::milliseconds(500),
        "the wait grows"
    );
    m.handle_timeout(second);
    let Some(OpAction::Commit(last)) = m.poll_action() else {
        panic!("expected the same commit again");
    };
    for b in [&again, &last] {
        assert_eq!(
            b.put_op_occs[0].operation_state,
            LcmOperationStateType::Processing
        );
        assert_eq!(
            b.preconditions, processing.preconditions,
            "the same condition"
        );
    }
    assert_eq!(
        last.put_op_occs[0].lease.as_ref().unwrap().expires,
        second + secs(30),
        "the lease in it runs from the new try"
    );
    // The database is back: the commit is stored and the operation goes on.
    m.handle_event(OpEvent::Committed(ready(w.store.commit(last))), second);
    assert!(matches!(m.poll_action(), Some(OpAction::ListZones)));
    let stored = ready(w.store.op_occ(&"op-1".into())).unwrap();
    assert_eq!(stored.operation_state, LcmOperationStateType::Processing);
}

#[test]
fn commits_failing_for_ten_minutes_give_the_operation_up() {
    let w = world(false);
    let mut m = w.instantiate(&[], Vec::new());
    let a = m.poll_action().unwrap();
    let ev = w.perform(a);
    m.handle_event(ev, t0());
    let mut now = t0();
    let mut tries = 0;
    loop {
        match m.poll_action() {
            Some(OpAction::Commit(_)) => {
                tries += 1;
                m.handle_event(OpEvent::Committed(Err(unavailable())), now);
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => match m.poll_timeout() {
                Some(t) => {
                    now = t;
                    m.handle_timeout(now);
                }
                None => break,
            },
        }
    }
    assert!(
        now - t0() >= TimeDelta::minutes(10),
        "tried for ten minutes ({now})"
    );
    assert!(
        tries > 500 && tries < 700,
        "about one try a second: {tries}"
    );
    match m.poll_end() {
        Some(Err(LcmError::Store(e))) => assert!(e.to_string().contains("restarting"), "{e}"),
        other => panic!("expected the store's error, got {other:?}"),
    }
}

#[test]
fn a_lease_renewal_the_store_cannot_take_is_tried_again() {
    let w = world(false);
    let mut m = w.instantiate(&[], Vec::new());
    for _ in 0..4 {
        let a = m.poll_action().unwrap();
        let ev = w.perform(a);
        m.handle_event(ev, t0());
    }
    // The checkpoint after the stack create is a renewal: it fails, and is tried again.
    let Some(OpAction::Commit(checkpoint)) = m.poll_action() else {
        panic!("expected the checkpoint");
    };
    let stack = checkpoint.put_op_occs[0].progress.as_ref().unwrap()["stackId"].clone();
    assert!(stack.is_string(), "{stack}");
    m.handle_event(OpEvent::Committed(Err(unavailable())), t0());
    assert!(m.poll_end().is_none(), "not lost");
    // It goes on, and ends as if the renewal had been stored.
    let mut now = t0();
    loop {
        match m.poll_action() {
            Some(a) => {
                let ev = w.perform(a);
                m.handle_event(ev, now);
            }
            None => match m.poll_timeout() {
                Some(t) => {
                    now = t;
                    m.handle_timeout(now);
                }
                None => break,
            },
        }
    }
    let r = ended(&mut m);
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::Completed);
    let stored = ready(w.store.op_occ(&"op-1".into())).unwrap();
    assert_eq!(stored.operation_state, LcmOperationStateType::Completed);
}
