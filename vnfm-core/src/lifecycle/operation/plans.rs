//! How each plan starts once the occurrence is `PROCESSING` (or `ROLLING_BACK`): the resume
//! wait, `MODIFY_INFO`, `OPERATE` (power), a CNF plan's run, and the package and flavour every
//! plan reads.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::actions::OpAction;
use super::cnf_run::{CnfEnd, CnfRun, Task};
use super::helpers::chrono_of;
use super::machine::{Operation, Step};
use super::power::Power;
use super::progress::Plan;
use super::timers::Timer;
use crate::driver::{DriverError, Stack};
use crate::grant::KeyValuePairs;
use crate::lcm::VnfOperationalStateType;
use crate::lifecycle::cnf::{CnfResources, CnfWork};
use crate::lifecycle::failure::{Failed, FailureKind};
use crate::lifecycle::plan::{self};
use crate::package::{Flavour, VnfPackage};

impl Operation {
    pub(super) fn proceed(&mut self) {
        if let Some(e) = self.progress.planned_error.clone() {
            return self.fail(Failed::new(FailureKind::Invalid, "invalid request", e));
        }
        if self.progress.vnfcs.is_some() || self.progress.deleted {
            // A retry after the stack reached its state: the hooks (or the end) only.
            return self.after_stack();
        }
        let updates = !matches!(
            self.progress.plan,
            Plan::Terminate
                | Plan::RollbackInstantiate
                | Plan::FailInstantiate
                | Plan::ModifyInfo { .. }
                | Plan::Operate { .. }
        );
        let instantiate = matches!(self.progress.plan, Plan::Instantiate { .. });
        if self.resume && instantiate && self.progress.stack_id.is_none() {
            // Its owner may have died after it sent the create and before it saved the
            // stack's id: a create now would be refused (the name is taken). The stack is
            // looked up by its name first (Heat finds a stack by name as by id) and, when it
            // exists, taken as this operation's: it is awaited and updated, not created.
            self.step = Step::ResumeWait {
                deadline: self.now + chrono_of(self.cfg.stack_timeout),
            };
            self.next = Some(OpAction::ShowStack(crate::id::StackId::new(
                self.stack_name(),
            )));
            return;
        }
        if let (true, true, Some(id)) = (self.resume, updates, self.progress.stack_id.clone()) {
            // The interrupted operation may have left the stack in progress: Heat refuses an
            // update then (409), so wait for it to settle first (seen against real Heat 27).
            self.step = Step::ResumeWait {
                deadline: self.now + chrono_of(self.cfg.stack_timeout),
            };
            self.next = Some(OpAction::ShowStack(id));
            return;
        }
        self.start_plan();
    }

    /// A resumed operation's stack before it goes on: once it is no longer in progress (or at
    /// the stack timeout), the plan starts; a stack that is gone is created again by an
    /// instantiate.
    pub(super) fn on_resume_wait(
        &mut self,
        deadline: DateTime<Utc>,
        r: Result<Stack, DriverError>,
    ) {
        if let Ok(s) = &r {
            if self.progress.stack_id.is_none() {
                // Found by its name (see `proceed`): this operation's, saved at once.
                self.progress.stack_id = Some(s.id.clone());
                self.checkpoint = true;
            }
        }
        match r {
            Ok(s) if s.stack_status.is_in_progress() && self.now < deadline => {
                self.wait_until(deadline);
                self.step = Step::ResumeWait { deadline };
            }
            Ok(_) => self.start_plan(),
            Err(e) if e.is_not_found() => {
                if matches!(self.progress.plan, Plan::Instantiate { .. }) {
                    self.progress.stack_id = None;
                }
                self.start_plan();
            }
            Err(e) => self.fail_driver(&e),
        }
    }

    pub(super) fn start_plan(&mut self) {
        match &self.progress.plan {
            p if p.is_cnf() => self.cnf_start(),
            Plan::Heal { .. } if !self.progress.marked => self.mark_list(),
            p if p.is_placed() => {
                self.step = Step::GrantZones;
                self.next = Some(OpAction::ListZones);
            }
            Plan::ScaleIn { .. }
            | Plan::RollbackScaleOut
            | Plan::RollbackScaleToLevel
            | Plan::RollbackChangeFlavour
            | Plan::RollbackChangeExtConn => {
                self.restore();
            }
            Plan::ChangeExtConn { .. } => {
                if let Err(f) = self.grant_unplaced() {
                    return self.fail(f);
                }
                self.restore();
            }
            Plan::Terminate => self.hooks_or(Self::delete_stack),
            Plan::ModifyInfo { patch } => {
                let patch = patch.clone();
                self.modify(&patch);
            }
            Plan::Operate { on, servers } => {
                let (timeout, poll) = (self.cfg.stack_timeout, self.cfg.poll_interval);
                let p = Power::new(*on, servers.clone(), timeout, poll);
                self.drive_power(p);
            }
            _ => self.delete_stack(),
        }
    }

    /// Hands the power part's action and timer out, or ends the operation once it is over.
    pub(super) fn drive_power(&mut self, mut p: Power) {
        match p.poll_end() {
            Some(Ok(())) => self.finish_operate(),
            Some(Err(f)) => self.fail(f),
            None => {
                self.next = p.poll_action();
                self.timers.put(Timer::Step, p.poll_timeout());
                self.step = Step::Power(p);
            }
        }
    }

    /// The CNF plan's work, saved in the progress.
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
        let task = match &self.progress.plan {
            Plan::CnfInstantiate { .. } => Task::Deploy,
            Plan::CnfScale { .. } => Task::Scale,
            Plan::CnfHeal { .. } => Task::Heal,
            Plan::CnfTerminate => return self.hooks_or(Self::cnf_delete),
            _ => Task::Delete,
        };
        self.drive_cnf(CnfRun::new(work, task, &self.cfg));
    }

    /// Terminate and rollback: the objects deleted, in the reverse order of their apply
    /// (their pods go with them, in the background); none when the operation knows none.
    pub(super) fn cnf_delete(&mut self) {
        let work = self.progress.cnf.clone().unwrap_or_else(|| {
            CnfWork::of(CnfResources {
                namespace: String::new(),
                objects: Vec::new(),
                workloads: Vec::new(),
            })
        });
        self.drive_cnf(CnfRun::new(work, Task::Delete, &self.cfg));
    }

    /// Notes the CNF run's warnings and saves its work, hands its action and timer out, or
    /// goes on once it ended: the pods ready, the hooks (or the end); the objects deleted,
    /// the end.
    pub(super) fn drive_cnf(&mut self, mut c: CnfRun) {
        for w in c.poll_warnings() {
            self.note(w);
        }
        if let Some(work) = c.poll_saved() {
            self.progress.cnf = Some(work);
        }
        match c.poll_end() {
            Some(Ok(CnfEnd::Ready(vnfcs))) => {
                self.progress.vnfcs = Some(vnfcs);
                self.after_stack();
            }
            Some(Ok(CnfEnd::Deleted)) => {
                self.progress.deleted = true;
                self.finish_deleted();
            }
            Some(Err(f)) => self.fail(f),
            None => {
                self.next = c.poll_action();
                self.timers.put(Timer::Step, c.poll_timeout());
                self.step = Step::Cnf(c);
            }
        }
    }

    /// A warning for the occurrence (once).
    pub(super) fn note(&mut self, warning: String) {
        if !self.op.warnings.contains(&warning) {
            self.op.warnings.push(warning);
        }
    }

    /// Every server is in the wanted state: `vnfState` and each `vnfcState` say it.
    pub(super) fn finish_operate(&mut self) {
        let state = match self.progress.plan {
            Plan::Operate { on: true, .. } => VnfOperationalStateType::Started,
            _ => VnfOperationalStateType::Stopped,
        };
        let mut new = self.before.clone();
        if let Some(info) = new.instantiated_vnf_info.as_mut() {
            info.vnf_state = Some(state);
            for v in &mut info.vnfc_info {
                v.vnfc_state = state;
            }
        }
        self.finish(Ok(new));
    }

    /// `MODIFY_INFO`: the instance after the request, and `changedInfo`; ends at once.
    pub(super) fn modify(&mut self, patch: &KeyValuePairs) {
        match crate::lifecycle::modify::apply(&self.before, patch) {
            Ok((inst, changed)) => {
                self.op.changed_info = Some(serde_json::Value::Object(changed));
                self.finish(Ok(inst));
            }
            Err(e) => self.fail(Failed::new(
                FailureKind::Invalid,
                "invalid request",
                e.to_string(),
            )),
        }
    }

    pub(super) fn package(&self) -> Result<(Arc<VnfPackage>, String), Failed> {
        let pkg = self.pkg.clone().ok_or_else(|| {
            Failed::new(
                FailureKind::Invalid,
                "no package",
                "the operation needs the instance's package",
            )
        })?;
        let flavour_id = match &self.progress.plan {
            Plan::Instantiate { flavour_id, .. }
            | Plan::CnfInstantiate { flavour_id, .. }
            | Plan::ChangeFlavour { flavour_id, .. } => flavour_id.clone(),
            _ => self
                .before
                .instantiated_vnf_info
                .as_ref()
                .map(|i| i.flavour_id.clone())
                .unwrap_or_default(),
        };
        Ok((pkg, flavour_id))
    }

    pub(super) fn with_flavour<T>(
        &self,
        f: impl FnOnce(&VnfPackage, &Flavour) -> Result<T, Failed>,
    ) -> Result<T, Failed> {
        let (pkg, flavour_id) = self.package()?;
        let flavour = plan::flavour_of(&pkg, &flavour_id)
            .map_err(|e| Failed::new(FailureKind::Invalid, "unknown flavour", e.to_string()))?;
        f(&pkg, flavour)
    }
}
