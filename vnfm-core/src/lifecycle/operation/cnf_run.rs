//! The CNF run: the preflight over the cluster's nodes, the manifests applied, the
//! workloads scaled, pods or objects deleted, the pods awaited.
//!
//! [`CnfRun`] is a part of [`Operation`](super::Operation) with its own `handle_*` / `poll_*`:
//! the coordinator creates it when a `Cnf*` plan starts (a CNF terminate: once the hooks of
//! `terminate_start` succeeded), routes [`OpEvent::Nodes`](super::OpEvent::Nodes),
//! [`OpEvent::ObjectsApplied`](super::OpEvent::ObjectsApplied),
//! [`OpEvent::WorkloadsScaled`](super::OpEvent::WorkloadsScaled),
//! [`OpEvent::PodsDeleted`](super::OpEvent::PodsDeleted), [`OpEvent::Pods`](super::OpEvent::Pods),
//! [`OpEvent::ObjectsDeleted`](super::OpEvent::ObjectsDeleted) and its timer to it, notes its
//! warnings ([`CnfRun::poll_warnings`]), saves its work once the preflight passed
//! ([`CnfRun::poll_saved`]) and reads the end from [`CnfRun::poll_end`]. [`instance`] is the
//! CNF instance an operation leaves, from the VNFCs the run ended with.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::actions::OpAction;
use super::helpers::{chrono_of, internal_error};
use super::progress::Plan;
use crate::driver::{
    ApplyObject, ClusterNode, DeletePod, DriverError, ListPods, Pod, ScaleWorkload,
};
use crate::lcm::{InstantiationState, VnfInstance, VnfcResourceInfo};
use crate::lifecycle::cnf::{self, CnfWork};
use crate::lifecycle::failure::{Failed, FailureKind};
use crate::lifecycle::plan::{self};
use crate::lifecycle::types::LcmConfig;
use crate::package::Flavour;

/// What a run does (from the operation's plan).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Task {
    /// Instantiate: the preflight over the cluster's nodes (unless the work was checked
    /// already), the manifests applied, the pods awaited.
    Deploy,
    /// Scale: each workload scaled to its replicas, the pods awaited.
    Scale,
    /// Heal: the healed pods deleted (grace 0), their replacements awaited.
    Heal,
    /// Terminate, instantiate rollback: the objects deleted, in the reverse order of their
    /// apply.
    Delete,
}

/// How a run ended well.
#[derive(Debug, PartialEq)]
pub(super) enum CnfEnd {
    /// Every workload lists its replicas: the VNFCs, one per pod.
    Ready(Vec<VnfcResourceInfo>),
    /// The objects are deleted (or were gone).
    Deleted,
}

/// What the part waits for.
#[derive(Debug)]
enum Phase {
    /// The cluster's nodes are listed (the preflight).
    Nodes,
    /// The manifests are applied.
    Apply,
    /// The workloads are scaled.
    Scaling,
    /// The healed pods are deleted.
    DeletingPods,
    /// The pods are listed until they are ready, or `deadline`.
    Wait {
        deadline: DateTime<Utc>,
        /// Until when an `Unschedulable` verdict is provisional ([`cnf::VERDICT_SETTLE`]).
        settle_until: DateTime<Utc>,
    },
    /// The objects are deleted.
    Deleting,
}

/// What the run reads of the [`LcmConfig`].
#[derive(Debug)]
struct Settings {
    /// How long the pods have to be ready (the stack timeout).
    timeout: Duration,
    poll_interval: Duration,
    /// The node label of a compute host (the preflight's anti-affinity key).
    host_label: String,
    /// `fallbackBestEffort`: an anti-affinity the nodes cannot meet is reported, not refused.
    best_effort: bool,
    /// The VIM connection of the VNFCs' resource handles.
    vim_connection_id: String,
}

/// A CNF plan's run over its cluster: see the [module docs](self).
#[derive(Debug)]
pub(super) struct CnfRun {
    work: CnfWork,
    settings: Settings,
    phase: Phase,
    next: Option<OpAction>,
    wake: Option<DateTime<Utc>>,
    warnings: Vec<String>,
    /// The work changed (the preflight passed) and was not handed out yet.
    unsaved: bool,
    end: Option<Result<CnfEnd, Failed>>,
}

impl CnfRun {
    /// The run of `task` over `work` under `cfg`; its first action lists the nodes
    /// (an unchecked deploy), applies the manifests, scales the workloads, deletes the healed
    /// pods or deletes the objects.
    pub(super) fn new(work: CnfWork, task: Task, cfg: &LcmConfig) -> Self {
        let mut run = Self {
            work,
            settings: Settings {
                timeout: cfg.stack_timeout,
                poll_interval: cfg.poll_interval,
                host_label: cfg.host_label.clone(),
                best_effort: cfg.fallback_best_effort,
                vim_connection_id: cfg.vim_connection_id.clone(),
            },
            phase: Phase::Nodes,
            next: None,
            wake: None,
            warnings: Vec::new(),
            unsaved: false,
            end: None,
        };
        let ns = run.work.resources.namespace.clone();
        match task {
            Task::Deploy if !run.work.checked => run.next = Some(OpAction::ListNodes),
            Task::Deploy => run.apply(),
            Task::Scale => {
                let reqs = run
                    .work
                    .resources
                    .workloads
                    .iter()
                    .map(|w| ScaleWorkload::of(w.kind, ns.clone(), w.name.clone(), w.replicas))
                    .collect();
                run.phase = Phase::Scaling;
                run.next = Some(OpAction::ScaleWorkloads(reqs));
            }
            Task::Heal => {
                // Grace 0: the pod object goes at once, even when its kubelet is gone.
                let reqs = run
                    .work
                    .heal_pods
                    .iter()
                    .map(|p| DeletePod::new(ns.clone(), p.clone()).with_grace(0))
                    .collect();
                run.phase = Phase::DeletingPods;
                run.next = Some(OpAction::DeletePods(reqs));
            }
            Task::Delete => {
                let objects = run.work.resources.objects.iter().rev().cloned().collect();
                run.phase = Phase::Deleting;
                run.next = Some(OpAction::DeleteObjects(objects));
            }
        }
        run
    }

    /// The next action ([`OpAction::ListNodes`], [`OpAction::ApplyObjects`],
    /// [`OpAction::ScaleWorkloads`], [`OpAction::DeletePods`], [`OpAction::ListPods`],
    /// [`OpAction::DeleteObjects`]).
    pub(super) fn poll_action(&mut self) -> Option<OpAction> {
        self.next.take()
    }

    /// When to call [`CnfRun::handle_timeout`], while it waits for the pods.
    pub(super) fn poll_timeout(&self) -> Option<DateTime<Utc>> {
        self.wake
    }

    /// The VNFCs (the pods ready) or the objects deleted, or why not, once it is over.
    pub(super) fn poll_end(&mut self) -> Option<Result<CnfEnd, Failed>> {
        self.end.take()
    }

    /// The warnings found since the last call (the preflight's, the pods left pending), for
    /// the occurrence.
    pub(super) fn poll_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// The work, once, after it changed (the preflight passed: `checked`), to be saved in the
    /// progress.
    pub(super) fn poll_saved(&mut self) -> Option<CnfWork> {
        std::mem::take(&mut self.unsaved).then(|| self.work.clone())
    }

    /// What the run is doing, for an interrupted operation's error.
    pub(super) fn doing(&self) -> &'static str {
        match self.phase {
            Phase::Nodes => "listing the cluster's nodes",
            Phase::Apply => "applying the Kubernetes objects",
            Phase::Scaling => "scaling the workloads",
            Phase::DeletingPods => "deleting pods",
            Phase::Wait { .. } => "waiting for the pods",
            Phase::Deleting => "deleting the Kubernetes objects",
        }
    }

    /// The cluster's nodes listed: the preflight's warnings are noted; an anti-affinity the
    /// nodes cannot meet ends it (`Infeasible`), else the manifests are applied.
    pub(super) fn handle_nodes(&mut self, r: Result<Vec<ClusterNode>, DriverError>) {
        if !matches!(self.phase, Phase::Nodes) {
            return self.out_of_turn("nodes listed that were not asked");
        }
        let nodes = match r {
            Ok(n) => n,
            Err(e) => return self.fail(Failed::driver(&e)),
        };
        let pf = cnf::preflight(
            &self.work.manifests,
            &self.work.resources.namespace,
            &nodes,
            &self.settings.host_label,
            self.settings.best_effort,
        );
        self.warnings.extend(pf.warnings);
        if !pf.refused.is_empty() {
            return self.fail(Failed::new(
                FailureKind::Infeasible,
                "pod anti-affinity cannot be met",
                pf.refused.join("; "),
            ));
        }
        self.work.checked = true;
        self.unsaved = true;
        self.apply();
    }

    /// The objects applied: the pods are awaited (the first error ends it).
    pub(super) fn handle_applied(&mut self, r: &[Result<(), DriverError>], now: DateTime<Utc>) {
        if !matches!(self.phase, Phase::Apply) {
            return self.out_of_turn("objects applied that were not asked");
        }
        self.after_change(r, now);
    }

    /// The workloads scaled: the pods are awaited (the first error ends it).
    pub(super) fn handle_scaled(&mut self, r: &[Result<(), DriverError>], now: DateTime<Utc>) {
        if !matches!(self.phase, Phase::Scaling) {
            return self.out_of_turn("workloads scaled that were not asked");
        }
        self.after_change(r, now);
    }

    /// Pods deleted (one already gone is deleted): their replacements are awaited, the
    /// scheduler's verdicts provisional for [`cnf::VERDICT_SETTLE`].
    pub(super) fn handle_pods_deleted(
        &mut self,
        r: &[Result<(), DriverError>],
        now: DateTime<Utc>,
    ) {
        if !matches!(self.phase, Phase::DeletingPods) {
            return self.out_of_turn("pods deleted that were not asked");
        }
        if let Some(e) = first_error(r) {
            return self.fail(Failed::driver(e));
        }
        self.wait(now, now + chrono_of(cnf::VERDICT_SETTLE));
    }

    /// Polled until every workload lists its replicas (bound or pending: a pod the scheduler
    /// cannot place is reported, not a failure), the healed pods gone; at the deadline, what
    /// is missing ends it. A verdict is final only [`cnf::VERDICT_SETTLE`] after a pod was
    /// last seen terminating.
    pub(super) fn handle_pods(&mut self, r: Result<Vec<Pod>, DriverError>, now: DateTime<Utc>) {
        let Phase::Wait {
            deadline,
            mut settle_until,
        } = self.phase
        else {
            return self.out_of_turn("pods listed that were not asked");
        };
        let pods = match r {
            Ok(p) => p,
            Err(e) => return self.fail(Failed::driver(&e)),
        };
        let (res, healed) = (&self.work.resources, &self.work.heal_pods);
        if cnf::terminating(res, &pods, healed) {
            settle_until = settle_until.max(now + chrono_of(cnf::VERDICT_SETTLE));
        }
        let last = now >= deadline;
        let verdicts_final = now >= settle_until || last;
        match cnf::ready(res, &pods, healed, verdicts_final) {
            Ok(()) => {
                let vim = &self.settings.vim_connection_id;
                let (vnfcs, notes) = cnf::vnfcs(res, &pods, healed, vim);
                self.warnings.extend(notes);
                self.end = Some(Ok(CnfEnd::Ready(vnfcs)));
            }
            Err(missing) if last => self.fail(Failed::new(
                FailureKind::Backend,
                "pods timed out",
                format!("after {}s: {missing}", self.settings.timeout.as_secs()),
            )),
            Err(_) => {
                self.wake = Some((now + chrono_of(self.settings.poll_interval)).min(deadline));
                self.phase = Phase::Wait {
                    deadline,
                    settle_until,
                };
            }
        }
    }

    /// The objects deleted (one already gone is deleted): it is over.
    pub(super) fn handle_deleted(&mut self, r: &[Result<(), DriverError>]) {
        if !matches!(self.phase, Phase::Deleting) {
            return self.out_of_turn("objects deleted that were not asked");
        }
        if let Some(e) = first_error(r) {
            return self.fail(Failed::driver(e));
        }
        self.end = Some(Ok(CnfEnd::Deleted));
    }

    /// Time passed: the pods are listed again once the poll interval is over.
    pub(super) fn handle_timeout(&mut self, now: DateTime<Utc>) {
        if self.wake.is_none_or(|t| t > now) {
            return;
        }
        self.wake = None;
        if matches!(self.phase, Phase::Wait { .. }) {
            self.list_pods();
        }
    }

    fn apply(&mut self) {
        let ns = &self.work.resources.namespace;
        let reqs = self
            .work
            .manifests
            .iter()
            .map(|m| ApplyObject::new(ns.clone(), m.clone()))
            .collect();
        self.phase = Phase::Apply;
        self.next = Some(OpAction::ApplyObjects(reqs));
    }

    /// Objects applied or workloads scaled: the first error ends it, else the pods are awaited.
    fn after_change(&mut self, r: &[Result<(), DriverError>], now: DateTime<Utc>) {
        if let Some(e) = r.iter().find_map(|r| r.as_ref().err()) {
            return self.fail(Failed::driver(e));
        }
        self.wait(now, now);
    }

    /// The pods awaited until the timeout; `settle_until`: until when an `Unschedulable`
    /// verdict is provisional.
    fn wait(&mut self, now: DateTime<Utc>, settle_until: DateTime<Utc>) {
        self.phase = Phase::Wait {
            deadline: now + chrono_of(self.settings.timeout),
            settle_until,
        };
        self.list_pods();
    }

    fn list_pods(&mut self) {
        let ns = self.work.resources.namespace.clone();
        self.next = Some(OpAction::ListPods(ListPods::selected(ns, BTreeMap::new())));
    }

    fn fail(&mut self, f: Failed) {
        self.end = Some(Err(f));
    }

    fn out_of_turn(&mut self, what: &str) {
        self.fail(internal_error(what));
    }
}

/// The first error of a deletion that is not "not found" (one already gone is deleted).
fn first_error(r: &[Result<(), DriverError>]) -> Option<&DriverError> {
    r.iter()
        .find_map(|r| r.as_ref().err().filter(|e| !e.is_not_found()))
}

/// The CNF instance an operation of `plan` leaves: `before` with `vnfcs` (its pods) and
/// `work`'s resources, over `flavour` (an instantiate: instantiated with the plan's flavour,
/// level and configurable properties; a scale: the aspect at its new level).
pub(super) fn instance(
    before: &VnfInstance,
    plan: &Plan,
    flavour: &Flavour,
    vnfcs: Vec<VnfcResourceInfo>,
    work: &CnfWork,
) -> VnfInstance {
    let mut new = before.clone();
    match plan {
        Plan::CnfInstantiate {
            flavour_id,
            configurable,
            level,
        } => {
            new.instantiation_state = Some(InstantiationState::Instantiated);
            let mut info = plan::instantiated_info(flavour, flavour_id, vnfcs, None);
            plan::set_level(&mut info, flavour, level.as_deref());
            new.instantiated_vnf_info = Some(info);
            if let Some(p) = configurable {
                let mut props = new.vnf_configurable_properties.take().unwrap_or_default();
                props.extend(p.clone());
                new.vnf_configurable_properties = Some(props);
            }
        }
        _ => {
            let prev = before.instantiated_vnf_info.as_ref();
            let mut info = plan::instantiated_info(flavour, &flavour.id, vnfcs, prev);
            if let Plan::CnfScale {
                aspect_id,
                new_level,
            } = plan
            {
                for s in info
                    .scale_status
                    .iter_mut()
                    .filter(|s| &s.aspect_id == aspect_id)
                {
                    s.scale_level = *new_level;
                }
            }
            new.instantiated_vnf_info = Some(info);
        }
    }
    work.resources.set(&mut new);
    new
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use chrono::TimeZone;
    use serde_json::Value;

    use super::*;
    use crate::cluster::LabelSelector;
    use crate::driver::{
        ApplyWorkload, ObjectRef, PodAntiAffinity, PodScheduled, ScaleWorkload, WorkloadKind,
    };
    use crate::id::{NodeName, VduId};
    use crate::lifecycle::cnf::{CnfResources, CnfWorkload};

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    /// A stack timeout of 60 s, a poll interval of 5 s, host label `h`.
    fn cfg(best_effort: bool) -> LcmConfig {
        let mut c = LcmConfig::standard().unwrap();
        c.stack_timeout = Duration::from_secs(60);
        c.poll_interval = Duration::from_secs(5);
        c.host_label = "h".into();
        c.fallback_best_effort = best_effort;
        c.vim_connection_id = "vim-k".into();
        c
    }

    /// The Deployment `vdu1` of `replicas` pods, spread over `h` (required).
    fn manifest(replicas: u32) -> Value {
        let mut w = ApplyWorkload::new("ns", "vdu1", replicas);
        w.anti_affinity = Some(PodAntiAffinity {
            topology_key: "h".into(),
            required: true,
        });
        w.to_object().object
    }

    /// The work of `vdu1` at `replicas`, with a Service and the Deployment as objects.
    fn work(replicas: u32, checked: bool) -> CnfWork {
        let selector = LabelSelector::labels(BTreeMap::from([("app".into(), "vdu1".into())]));
        let resources = CnfResources {
            namespace: "ns".into(),
            objects: vec![
                ObjectRef::new("v1", "Service", "ns", "svc"),
                ObjectRef::new("apps/v1", "Deployment", "ns", "vdu1"),
            ],
            workloads: vec![CnfWorkload {
                vdu: VduId::new("VDU1"),
                kind: WorkloadKind::Deployment,
                name: "vdu1".into(),
                selector,
                replicas,
            }],
        };
        CnfWork {
            manifests: vec![manifest(replicas)],
            checked,
            ..CnfWork::of(resources)
        }
    }

    fn node(name: &str, host: &str) -> ClusterNode {
        ClusterNode {
            name: NodeName::new(name),
            labels: BTreeMap::from([("h".into(), host.into())]),
            ..ClusterNode::default()
        }
    }

    /// A pod of `vdu1`: bound to `node`, or pending with the scheduler's `verdict`.
    fn pod(name: &str, node: Option<&str>, verdict: Option<&str>) -> Pod {
        Pod {
            namespace: "ns".into(),
            name: name.into(),
            labels: BTreeMap::from([("app".into(), "vdu1".into())]),
            node: node.map(NodeName::new),
            phase: if node.is_some() { "Running" } else { "Pending" }.into(),
            scheduled: verdict.map(|m| PodScheduled {
                status: false,
                reason: Some("Unschedulable".into()),
                message: Some(m.into()),
            }),
            deleting: false,
        }
    }

    fn list_pods() -> OpAction {
        OpAction::ListPods(ListPods::selected("ns", BTreeMap::new()))
    }

    fn gone() -> DriverError {
        DriverError::NotFound {
            driver: "k8s",
            what: "pod a".into(),
        }
    }

    fn down() -> DriverError {
        DriverError::Unavailable {
            driver: "k8s",
            message: "down".into(),
        }
    }

    fn failure(c: &mut CnfRun) -> Failed {
        match c.poll_end() {
            Some(Err(f)) => f,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    fn ready(c: &mut CnfRun) -> Vec<VnfcResourceInfo> {
        match c.poll_end() {
            Some(Ok(CnfEnd::Ready(v))) => v,
            other => panic!("expected the pods ready, got {other:?}"),
        }
    }

    #[test]
    fn deploy_checks_the_nodes_applies_and_waits_for_the_pods() {
        let mut c = CnfRun::new(work(2, false), Task::Deploy, &cfg(false));
        assert_eq!(c.doing(), "listing the cluster's nodes");
        assert_eq!(c.poll_action(), Some(OpAction::ListNodes));
        assert_eq!(c.poll_action(), None, "one action at a time");
        assert!(
            c.poll_saved().is_none(),
            "nothing to save before the preflight"
        );

        c.handle_nodes(Ok(vec![node("n1", "h1"), node("n2", "h2")]));
        assert!(c.poll_warnings().is_empty());
        let saved = c.poll_saved().expect("the checked work is saved");
        assert!(saved.checked);
        assert!(c.poll_saved().is_none(), "saved once");
        assert_eq!(
            c.poll_action(),
            Some(OpAction::ApplyObjects(vec![ApplyObject::new(
                "ns",
                manifest(2)
            )]))
        );
        assert_eq!(c.doing(), "applying the Kubernetes objects");

        c.handle_applied(&[Ok(())], t(0));
        assert_eq!(c.poll_action(), Some(list_pods()));
        assert_eq!(c.doing(), "waiting for the pods");
        c.handle_pods(Ok(vec![pod("a", Some("n1"), None)]), t(1));
        assert!(c.poll_end().is_none(), "one pod of two");
        assert_eq!(c.poll_action(), None);
        assert_eq!(c.poll_timeout(), Some(t(6)));
        c.handle_timeout(t(6));
        assert_eq!(c.poll_action(), Some(list_pods()));
        assert_eq!(c.poll_timeout(), None);

        let pods = vec![pod("b", Some("n2"), None), pod("a", Some("n1"), None)];
        c.handle_pods(Ok(pods), t(6));
        let vnfcs = ready(&mut c);
        let ids: Vec<&str> = vnfcs.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(vnfcs[0].vdu_id, VduId::new("VDU1"));
        assert_eq!(
            vnfcs[0].compute_resource.vim_connection_id.as_deref(),
            Some("vim-k")
        );
        assert!(c.poll_warnings().is_empty(), "every pod bound");
    }

    #[test]
    fn a_checked_deploy_applies_at_once_and_reports_a_pod_left_pending() {
        let mut c = CnfRun::new(work(1, true), Task::Deploy, &cfg(false));
        assert!(matches!(c.poll_action(), Some(OpAction::ApplyObjects(_))));
        assert!(c.poll_saved().is_none());
        c.handle_applied(&[Ok(())], t(0));
        c.poll_action().unwrap();
        // Nothing was deleted: the scheduler's verdict is final at once.
        let full = "0/3 nodes are available";
        c.handle_pods(Ok(vec![pod("a", None, Some(full))]), t(1));
        assert_eq!(ready(&mut c).len(), 1, "a pending pod is a VNFC");
        assert_eq!(
            c.poll_warnings(),
            [format!(
                "pod a of Deployment vdu1 is Pending: Unschedulable: {full}"
            )]
        );
    }

    #[test]
    fn the_preflight_refuses_what_the_nodes_cannot_hold_unless_best_effort() {
        let nodes = || Ok(vec![node("n1", "h1"), node("n2", "h2")]);
        let mut c = CnfRun::new(work(3, false), Task::Deploy, &cfg(false));
        c.poll_action().unwrap();
        c.handle_nodes(nodes());
        let f = failure(&mut c);
        assert_eq!(f.kind, FailureKind::Infeasible);
        assert!(
            f.detail.contains("vdu1 asks for 3 replicas"),
            "{}",
            f.detail
        );
        assert!(
            f.detail.contains("at most 2 can be scheduled"),
            "{}",
            f.detail
        );
        assert!(c.poll_saved().is_none(), "not checked");
        assert_eq!(c.poll_action(), None, "nothing applied");

        let mut c = CnfRun::new(work(3, false), Task::Deploy, &cfg(true));
        c.poll_action().unwrap();
        c.handle_nodes(nodes());
        assert!(c.poll_end().is_none());
        let w = c.poll_warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("allowed by fallbackBestEffort"), "{}", w[0]);
        assert!(matches!(c.poll_action(), Some(OpAction::ApplyObjects(_))));
    }

    #[test]
    fn nodes_that_cannot_be_listed_end_it() {
        let mut c = CnfRun::new(work(2, false), Task::Deploy, &cfg(false));
        c.poll_action().unwrap();
        c.handle_nodes(Err(down()));
        let f = failure(&mut c);
        assert_eq!(f.kind, FailureKind::Backend);
        assert!(f.detail.contains("down"), "{}", f.detail);
    }

    #[test]
    fn an_apply_or_scale_error_ends_it() {
        let mut c = CnfRun::new(work(2, true), Task::Deploy, &cfg(false));
        c.poll_action().unwrap();
        let refused = DriverError::Invalid {
            driver: "k8s",
            message: "spec.replicas: bad".into(),
        };
        c.handle_applied(&[Ok(()), Err(refused)], t(0));
        let f = failure(&mut c);
        assert_eq!(f.kind, FailureKind::Invalid);
        assert!(f.detail.contains("spec.replicas: bad"), "{}", f.detail);
        assert_eq!(c.poll_action(), None, "no pods listed");
        assert_eq!(c.poll_timeout(), None);

        let mut c = CnfRun::new(work(4, true), Task::Scale, &cfg(false));
        assert_eq!(c.doing(), "scaling the workloads");
        assert_eq!(
            c.poll_action(),
            Some(OpAction::ScaleWorkloads(vec![ScaleWorkload::of(
                WorkloadKind::Deployment,
                "ns",
                "vdu1",
                4
            )]))
        );
        c.handle_scaled(&[Err(gone())], t(0));
        assert_eq!(failure(&mut c).kind, FailureKind::StackFailed);
    }

    #[test]
    fn pods_not_ready_at_the_deadline_end_it_naming_the_pod() {
        let mut c = CnfRun::new(work(2, true), Task::Scale, &cfg(false));
        c.poll_action().unwrap();
        c.handle_scaled(&[Ok(())], t(0));
        assert_eq!(c.poll_action(), Some(list_pods()));
        let pods = || Ok(vec![pod("a", Some("n1"), None), pod("b", None, None)]);
        // The last poll before the deadline is capped at it.
        c.handle_pods(pods(), t(58));
        assert!(c.poll_end().is_none());
        assert_eq!(c.poll_timeout(), Some(t(60)));
        c.handle_timeout(t(60));
        assert_eq!(c.poll_action(), Some(list_pods()));
        c.handle_pods(pods(), t(60));
        let f = failure(&mut c);
        assert_eq!(f.kind, FailureKind::Backend);
        assert_eq!(f.title, "pods timed out");
        assert_eq!(
            f.detail,
            "after 60s: Deployment vdu1: the scheduler has not placed b yet"
        );
    }

    #[test]
    fn pods_that_cannot_be_listed_end_it() {
        let mut c = CnfRun::new(work(2, true), Task::Scale, &cfg(false));
        c.poll_action().unwrap();
        c.handle_scaled(&[Ok(())], t(0));
        c.poll_action().unwrap();
        c.handle_pods(Err(down()), t(1));
        assert_eq!(failure(&mut c).kind, FailureKind::Backend);
    }

    #[test]
    fn heal_deletes_the_pods_and_waits_until_the_verdicts_settle() {
        let mut w = work(2, true);
        w.heal_pods = vec!["a".into()];
        let mut k = cfg(false);
        k.poll_interval = Duration::from_secs(2);
        let mut c = CnfRun::new(w, Task::Heal, &k);
        assert_eq!(c.doing(), "deleting pods");
        assert_eq!(
            c.poll_action(),
            Some(OpAction::DeletePods(vec![
                DeletePod::new("ns", "a").with_grace(0)
            ]))
        );
        // A pod already gone is deleted.
        c.handle_pods_deleted(&[Err(gone())], t(0));
        assert!(c.poll_end().is_none());
        assert_eq!(c.poll_action(), Some(list_pods()));

        let full = "0/3 nodes are available";
        let settled = || vec![pod("b", None, Some(full)), pod("c", Some("n2"), None)];
        // Verdicts are provisional for 5 s after the deletion ...
        c.handle_pods(Ok(settled()), t(0));
        assert!(c.poll_end().is_none(), "a verdict just after the deletion");
        assert_eq!(c.poll_timeout(), Some(t(2)));
        c.handle_timeout(t(2));
        assert_eq!(c.poll_action(), Some(list_pods()));
        // ... and for 5 s after the healed pod was last seen terminating.
        let mut terminating = pod("a", Some("n1"), None);
        terminating.deleting = true;
        let mut pods = settled();
        pods.push(terminating);
        c.handle_pods(Ok(pods), t(4));
        assert!(c.poll_end().is_none());
        assert_eq!(c.poll_timeout(), Some(t(6)));
        c.handle_timeout(t(6));
        c.poll_action().unwrap();
        c.handle_pods(Ok(settled()), t(6));
        assert!(c.poll_end().is_none(), "a terminating pod seen 2 s ago");
        assert_eq!(c.poll_timeout(), Some(t(8)));
        c.handle_timeout(t(9));
        assert_eq!(c.poll_action(), Some(list_pods()));

        c.handle_pods(Ok(settled()), t(9));
        let ids: Vec<String> = ready(&mut c).into_iter().map(|v| v.id).collect();
        assert_eq!(ids, ["b", "c"], "the pending pod is a VNFC, reported");
        assert_eq!(
            c.poll_warnings(),
            [format!(
                "pod b of Deployment vdu1 is Pending: Unschedulable: {full}"
            )]
        );
    }

    #[test]
    fn a_pod_deletion_refused_ends_it() {
        let mut w = work(2, true);
        w.heal_pods = vec!["a".into(), "b".into()];
        let mut c = CnfRun::new(w, Task::Heal, &cfg(false));
        c.poll_action().unwrap();
        c.handle_pods_deleted(&[Err(gone()), Err(down())], t(0));
        let f = failure(&mut c);
        assert_eq!(f.kind, FailureKind::Backend);
        assert!(f.detail.contains("down"), "{}", f.detail);
    }

    #[test]
    fn delete_removes_the_objects_in_reverse_order() {
        let mut c = CnfRun::new(work(2, true), Task::Delete, &cfg(false));
        assert_eq!(c.doing(), "deleting the Kubernetes objects");
        assert_eq!(
            c.poll_action(),
            Some(OpAction::DeleteObjects(vec![
                ObjectRef::new("apps/v1", "Deployment", "ns", "vdu1"),
                ObjectRef::new("v1", "Service", "ns", "svc"),
            ]))
        );
        c.handle_deleted(&[Ok(()), Err(gone())]);
        assert!(matches!(c.poll_end(), Some(Ok(CnfEnd::Deleted))));

        let mut c = CnfRun::new(work(2, true), Task::Delete, &cfg(false));
        c.poll_action().unwrap();
        c.handle_deleted(&[Err(down()), Ok(())]);
        assert_eq!(failure(&mut c).kind, FailureKind::Backend);
    }

    #[test]
    fn the_timer_lists_the_pods_only_once_due_and_while_waiting() {
        let mut c = CnfRun::new(work(1, true), Task::Deploy, &cfg(false));
        c.poll_action().unwrap();
        c.handle_timeout(t(100));
        assert_eq!(c.poll_action(), None, "no wait yet");
        assert_eq!(c.poll_timeout(), None);
        c.handle_applied(&[Ok(())], t(0));
        c.poll_action().unwrap();
        c.handle_pods(Ok(Vec::new()), t(3));
        assert_eq!(c.poll_timeout(), Some(t(8)));
        c.handle_timeout(t(7));
        assert_eq!(c.poll_action(), None, "too early");
        assert_eq!(c.poll_timeout(), Some(t(8)));
        c.handle_timeout(t(9));
        assert_eq!(c.poll_action(), Some(list_pods()), "late is due");
        assert_eq!(c.poll_timeout(), None);
        c.handle_pods(Ok(vec![pod("a", Some("n1"), None)]), t(9));
        assert_eq!(ready(&mut c).len(), 1);
    }

    #[test]
    fn an_event_out_of_turn_ends_it() {
        let mut c = CnfRun::new(work(1, true), Task::Delete, &cfg(false));
        c.poll_action().unwrap();
        c.handle_pods(Ok(Vec::new()), t(0));
        let f = failure(&mut c);
        assert_eq!(f.title, "internal error");
        assert!(
            f.detail.contains("pods listed that were not asked"),
            "{}",
            f.detail
        );
    }
}
