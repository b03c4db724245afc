//! The CNF run: the preflight over the cluster's nodes, the manifests applied, the
//! workloads scaled, pods or objects deleted, the pods awaited.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::actions::OpAction;
use super::helpers::chrono_of;
use super::machine::{Operation, Step};
use super::progress::Plan;
use crate::driver::{
    ApplyObject, ClusterNode, DeletePod, DriverError, ListPods, ObjectRef, Pod, ScaleWorkload,
};
use crate::lcm::{InstantiationState, VnfInstance};
use crate::lifecycle::cnf::{self, CnfWork};
use crate::lifecycle::failure::{Failed, FailureKind};
use crate::lifecycle::plan::{self};

impl Operation {
    pub(super) fn cnf_work(&self) -> Result<CnfWork, Failed> {
        self.progress.cnf.clone().ok_or_else(|| {
            Failed::new(
                FailureKind::Invalid,
                "no Kubernetes resources",
                "the CNF operation knows no Kubernetes resources of the instance",
            )
        })
    }

    /// A CNF plan starts: the preflight (instantiate), a scale, pod deletions (heal), or the
    /// hooks and the deletions (terminate, rollback).
    pub(super) fn cnf_start(&mut self) {
        let work = match self.cnf_work() {
            Ok(w) => w,
            Err(f) => return self.fail(f),
        };
        let ns = work.resources.namespace.clone();
        match &self.progress.plan {
            Plan::CnfInstantiate { .. } if !work.checked => {
                self.step = Step::CnfNodes;
                self.next = Some(OpAction::ListNodes);
            }
            Plan::CnfInstantiate { .. } => self.cnf_apply(&work),
            Plan::CnfScale { .. } => {
                let reqs = work
                    .resources
                    .workloads
                    .iter()
                    .map(|w| ScaleWorkload::of(w.kind, ns.clone(), w.name.clone(), w.replicas))
                    .collect();
                self.step = Step::CnfScaling;
                self.next = Some(OpAction::ScaleWorkloads(reqs));
            }
            Plan::CnfHeal { .. } => {
                // Grace 0: the pod object goes at once, even when its kubelet is gone.
                let reqs = work
                    .heal_pods
                    .iter()
                    .map(|p| DeletePod::new(ns.clone(), p.clone()).with_grace(0))
                    .collect();
                self.step = Step::CnfDeletingPods;
                self.next = Some(OpAction::DeletePods(reqs));
            }
            Plan::CnfTerminate => self.hooks_or(Self::cnf_delete),
            _ => self.cnf_delete(),
        }
    }

    pub(super) fn note(&mut self, warning: String) {
        if !self.op.warnings.contains(&warning) {
            self.op.warnings.push(warning);
        }
    }

    pub(super) fn on_cnf_nodes(&mut self, r: Result<Vec<ClusterNode>, DriverError>) {
        let nodes = match r {
            Ok(n) => n,
            Err(e) => return self.fail_driver(&e),
        };
        let mut work = match self.cnf_work() {
            Ok(w) => w,
            Err(f) => return self.fail(f),
        };
        let pf = cnf::preflight(
            &work.manifests,
            &work.resources.namespace,
            &nodes,
            &self.cfg.host_label,
            self.cfg.fallback_best_effort,
        );
        for w in pf.warnings {
            self.note(w);
        }
        if !pf.refused.is_empty() {
            return self.fail(Failed::new(
                FailureKind::Infeasible,
                "pod anti-affinity cannot be met",
                pf.refused.join("; "),
            ));
        }
        work.checked = true;
        self.progress.cnf = Some(work.clone());
        self.cnf_apply(&work);
    }

    pub(super) fn cnf_apply(&mut self, work: &CnfWork) {
        let ns = &work.resources.namespace;
        let reqs = work
            .manifests
            .iter()
            .map(|m| ApplyObject::new(ns.clone(), m.clone()))
            .collect();
        self.step = Step::CnfApply;
        self.next = Some(OpAction::ApplyObjects(reqs));
    }

    /// Objects applied, or workloads scaled: the pods are awaited.
    pub(super) fn on_cnf_applied(&mut self, r: &[Result<(), DriverError>]) {
        if let Some(e) = r.iter().find_map(|r| r.as_ref().err()) {
            return self.fail_driver(e);
        }
        self.cnf_wait(self.now);
    }

    /// Pods deleted (one already gone is deleted): their replacements are awaited.
    pub(super) fn on_cnf_pods_deleted(&mut self, r: &[Result<(), DriverError>]) {
        if let Some(e) = r
            .iter()
            .find_map(|r| r.as_ref().err().filter(|e| !e.is_not_found()))
        {
            return self.fail_driver(e);
        }
        self.cnf_wait(self.now + chrono_of(cnf::VERDICT_SETTLE));
    }

    /// `settle_until`: until when an `Unschedulable` verdict is provisional (now: none).
    pub(super) fn cnf_wait(&mut self, settle_until: DateTime<Utc>) {
        self.step = Step::CnfWait {
            deadline: self.now + chrono_of(self.cfg.stack_timeout),
            settle_until,
        };
        self.cnf_list_pods();
    }

    pub(super) fn cnf_list_pods(&mut self) {
        let ns = self
            .progress
            .cnf
            .as_ref()
            .map(|w| w.resources.namespace.clone())
            .unwrap_or_default();
        self.next = Some(OpAction::ListPods(ListPods::selected(ns, BTreeMap::new())));
    }

    /// Polled until every workload lists its replicas (bound or pending: a pod the scheduler
    /// cannot place is reported, not a failure), the healed pods gone.
    /// A verdict is final only [`cnf::VERDICT_SETTLE`] after a pod was last seen terminating.
    pub(super) fn on_cnf_pods(
        &mut self,
        deadline: DateTime<Utc>,
        mut settle_until: DateTime<Utc>,
        r: Result<Vec<Pod>, DriverError>,
    ) {
        let pods = match r {
            Ok(p) => p,
            Err(e) => return self.fail_driver(&e),
        };
        let work = match self.cnf_work() {
            Ok(w) => w,
            Err(f) => return self.fail(f),
        };
        if cnf::terminating(&work.resources, &pods, &work.heal_pods) {
            settle_until = settle_until.max(self.now + chrono_of(cnf::VERDICT_SETTLE));
        }
        let last = self.now >= deadline;
        let verdicts_final = self.now >= settle_until || last;
        match cnf::ready(&work.resources, &pods, &work.heal_pods, verdicts_final) {
            Ok(()) => {
                let (vnfcs, notes) = cnf::vnfcs(
                    &work.resources,
                    &pods,
                    &work.heal_pods,
                    &self.cfg.vim_connection_id,
                );
                for n in notes {
                    self.note(n);
                }
                self.progress.vnfcs = Some(vnfcs);
                self.after_stack();
            }
            Err(missing) if last => self.fail(Failed::new(
                FailureKind::Backend,
                "pods timed out",
                format!("after {}s: {missing}", self.cfg.stack_timeout.as_secs()),
            )),
            Err(_) => {
                self.wait_until(deadline);
                self.step = Step::CnfWait {
                    deadline,
                    settle_until,
                };
            }
        }
    }

    /// Terminate and rollback: the objects deleted, in the reverse order of their apply
    /// (their pods go with them, in the background).
    pub(super) fn cnf_delete(&mut self) {
        let objects: Vec<ObjectRef> = self
            .progress
            .cnf
            .as_ref()
            .map(|w| w.resources.objects.iter().rev().cloned().collect())
            .unwrap_or_default();
        self.step = Step::CnfDeleting;
        self.next = Some(OpAction::DeleteObjects(objects));
    }

    /// An object already gone is deleted.
    pub(super) fn on_cnf_deleted(&mut self, r: &[Result<(), DriverError>]) {
        if let Some(e) = r
            .iter()
            .find_map(|r| r.as_ref().err().filter(|e| !e.is_not_found()))
        {
            return self.fail_driver(e);
        }
        self.progress.deleted = true;
        self.finish_deleted();
    }

    /// The CNF instance the operation leaves: its VNFCs (pods) and resources.
    pub(super) fn cnf_instance(&self) -> Result<VnfInstance, Failed> {
        let vnfcs = self.progress.vnfcs.clone().unwrap_or_default();
        let work = self.cnf_work()?;
        let plan = self.progress.plan.clone();
        self.with_flavour(|_, flavour| {
            let mut new = self.before.clone();
            match &plan {
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
                    let prev = self.before.instantiated_vnf_info.as_ref();
                    let mut info = plan::instantiated_info(flavour, &flavour.id, vnfcs, prev);
                    if let Plan::CnfScale {
                        aspect_id,
                        new_level,
                    } = &plan
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
            Ok(new)
        })
    }
}
