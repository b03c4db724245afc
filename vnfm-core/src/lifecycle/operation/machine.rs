//! The coordinator: [`Operation`]'s state, its public API (getters, `handle_*`, `poll_*`),
//! the commits that start and end the occurrence, and the routing of events to the parts.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::actions::{OpAction, OpEvent, OperationStart};
use super::cnf_run::CnfRun;
use super::helpers::{chrono_of, internal_error, no_stack};
use super::hooks::Hooks;
use super::nfvo_grant::NfvoGrant;
use super::power::Power;
use super::progress::{Plan, Progress};
use super::stack_apply::StackApply;
use super::timers::{Timer, TimerTable};
use crate::driver::{DriverError, ListResources, MarkUnhealthy, Precondition, StoreBatch, Version};
use crate::grant::{Grant, GrantRequest};
use crate::id::{ServerId, VduId};
use crate::lcm::{LcmOperationStateType, Lease, VnfInstance, VnfLcmOpOcc};
use crate::lifecycle::failure::{chain, Failed, FailureKind};
use crate::lifecycle::hook::HookSpec;
use crate::lifecycle::plan::{self};
use crate::lifecycle::stack;
use crate::lifecycle::types::{LcmConfig, LcmError, OperationReport};
use crate::lifecycle::userdata::{Layout, VnfcSlot};
use crate::package::VnfPackage;
use crate::problem::ProblemDetails;
use crate::reselect::{History, Reselection};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Purpose {
    /// A stack apply of the reselection machine.
    Reselect,
    /// Updating the stack to the VNFCs that stay (scale-in, scale-out rollback).
    Restore,
}

#[derive(Debug)]
pub(super) enum Step {
    Start,
    /// The NFVO's grant is asked (the occurrence is `STARTING`).
    Grant(Box<NfvoGrant>),
    Processing,
    MarkList,
    Marking(VecDeque<MarkUnhealthy>),
    GrantZones,
    /// One stack apply (create or update) and the wait until the stack is no longer in
    /// progress; `purpose` says what its end feeds.
    Stack {
        run: StackApply,
        purpose: Purpose,
    },
    Settle {
        deadline: DateTime<Utc>,
    },
    ReselectZones,
    FailedServers,
    Hosts(BTreeMap<ServerId, Vec<String>>),
    CollectList,
    CollectServers(Vec<stack::Found>),
    /// The hooks of the plan's point run.
    Hooks(Hooks),
    DeleteSent,
    DeleteWait {
        deadline: DateTime<Utc>,
    },
    ResumeWait {
        deadline: DateTime<Utc>,
    },
    /// A CNF plan's run over its cluster.
    Cnf(CnfRun),
    /// `OPERATE`: the servers started or stopped.
    Power(Power),
    Final,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Inflight {
    Main,
    Renewal,
}

/// The placed part of an operation: the stack's VNFC slots, the layouts and the reselection
/// machine.
#[derive(Debug)]
pub(super) struct Placed {
    pub(super) layouts: BTreeMap<VduId, Layout>,
    pub(super) slots: Vec<VnfcSlot>,
    pub(super) m: Reselection,
    /// The machine is the operation's reselection (its history is saved in
    /// [`Progress::reselection`]), not the one-apply machine of a restore.
    pub(super) records: bool,
}

/// One LCM operation as a sans-IO machine (see the [module docs](super)).
#[derive(Debug)]
pub struct Operation {
    pub(super) cfg: LcmConfig,
    pub(super) pkg: Option<Arc<VnfPackage>>,
    pub(super) hooks: Vec<HookSpec>,
    pub(super) owner: String,
    pub(super) op: VnfLcmOpOcc,
    pub(super) occ_version: Option<Version>,
    pub(super) resume: bool,
    /// A new operation, or a resumed one stored `STARTING` only (not a rollback): it enters
    /// `STARTING`, asks the NFVO's grant if one grants, then `PROCESSING`.
    pub(super) unstarted: bool,
    /// The `PROCESSING` commit (of an unstarted operation) was made.
    pub(super) processing_stored: bool,
    pub(super) before: VnfInstance,
    pub(super) inst_version: Version,
    pub(super) progress: Progress,
    pub(super) grant: Option<Grant>,
    pub(super) step: Step,
    pub(super) next: Option<OpAction>,
    pub(super) inflight: Option<Inflight>,
    pub(super) now: DateTime<Utc>,
    pub(super) timers: TimerTable,
    pub(super) placed: Option<Placed>,
    pub(super) after: Option<VnfInstance>,
    pub(super) failure: Option<Failed>,
    pub(super) interrupt: Option<String>,
    /// Save the progress before the next action (a stack was just created: its id must be
    /// known to a rollback even if the process dies now).
    pub(super) checkpoint: bool,
    pub(super) end: Option<Result<OperationReport, LcmError>>,
    /// The main commit out, kept until it is answered: sent again if the store could not take
    /// it (`retry`).
    pub(super) commit_out: Option<StoreBatch>,
    /// A main commit waiting to be sent again (`retry`).
    pub(super) commit_retry: Option<super::backoff::PendingCommit>,
    /// Lease renewals failing in a row (`retry`).
    pub(super) renewal_retry: Option<super::backoff::Backoff>,
}

impl Operation {
    /// A machine for `start` under `cfg` at `now`; its first action is the commit that starts
    /// (or resumes) the occurrence.
    pub fn new(cfg: LcmConfig, start: OperationStart, now: DateTime<Utc>) -> Self {
        let unstarted = !start.resume
            || (start.op.value.operation_state == LcmOperationStateType::Starting
                && !start.progress.plan.is_rollback());
        let mut progress = start.progress;
        if progress.reselection.is_empty() && !start.op.value.attempts.is_empty() {
            // Saved by a vnfm that kept the attempts in the occurrence only.
            progress.reselection = History::from_attempts(start.op.value.attempts.clone());
        }
        let mut m = Self {
            cfg,
            pkg: start.package,
            hooks: start.hooks,
            owner: start.owner,
            occ_version: start.resume.then_some(start.op.version),
            op: start.op.value,
            resume: start.resume,
            unstarted,
            processing_stored: false,
            before: start.instance.value,
            inst_version: start.instance.version,
            progress,
            grant: None,
            step: Step::Start,
            next: None,
            inflight: None,
            now,
            timers: TimerTable::default(),
            placed: None,
            after: None,
            failure: None,
            interrupt: None,
            checkpoint: false,
            end: None,
            commit_out: None,
            commit_retry: None,
            renewal_retry: None,
        };
        m.begin();
        m
    }

    /// The occurrence as the machine last wrote (or is about to write) it.
    pub fn op_occ(&self) -> &VnfLcmOpOcc {
        &self.op
    }

    /// Where the operation stands.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The next action, if one is due (see the contract in the [module docs](super)).
    pub fn poll_action(&mut self) -> Option<OpAction> {
        if self.inflight.is_some() || self.end.is_some() {
            return None;
        }
        if self.renewal_due() {
            self.inflight = Some(Inflight::Renewal);
            return Some(OpAction::Commit(self.renewal_batch()));
        }
        let a = self.next.take()?;
        self.inflight = Some(Inflight::Main);
        self.commit_out = match &a {
            OpAction::Commit(b) => Some(b.clone()),
            _ => None,
        };
        Some(a)
    }

    /// When the machine wants [`Operation::handle_timeout`] called, if it waits on time.
    pub fn poll_timeout(&self) -> Option<DateTime<Utc>> {
        if self.inflight.is_some() || self.next.is_some() || self.end.is_some() {
            return None;
        }
        if self.commit_retry.is_some() {
            // Nothing else happens until the commit is stored.
            return self.timers.get(Timer::CommitRetry);
        }
        self.timers.next_timeout()
    }

    /// The result, once the operation is over: the report of an occurrence that ended (it
    /// may have ended `FAILED_TEMP`), or why nothing more could be recorded.
    pub fn poll_end(&mut self) -> Option<Result<OperationReport, LcmError>> {
        self.end.take()
    }

    /// Whether the operation is over.
    pub fn is_done(&self) -> bool {
        matches!(self.step, Step::Done)
    }

    /// Time passed: fires the timer if it is due.
    pub fn handle_timeout(&mut self, now: DateTime<Utc>) {
        self.now = now;
        if self.inflight.is_some() || self.next.is_some() {
            return;
        }
        if self.commit_retry.is_some() {
            if let Some(batch) = self.retry_due() {
                self.next = Some(OpAction::Commit(batch));
            }
            return;
        }
        if self.timers.is_expired(Timer::Step, now) {
            self.timers.stop(Timer::Step);
            self.fire_timer();
        }
    }

    /// Asks the operation to stop: it ends `FAILED_TEMP` ("interrupted") with `reason` once
    /// the action out (if any) has its event; nothing more is sent to the VIM. A new
    /// operation whose occurrence is stored `STARTING` only (not `PROCESSING` yet) ends
    /// `ROLLED_BACK` instead, not run (SOL003 5.4.17.3.1).
    pub fn interrupt(&mut self, now: DateTime<Utc>, reason: &str) {
        self.now = now;
        if self.interrupt.is_some() || matches!(self.step, Step::Final | Step::Done) {
            return;
        }
        self.interrupt = Some(reason.to_owned());
        if self.inflight.is_none() {
            // A commit waiting to be tried again is replaced by the interrupted one.
            self.commit_retry = None;
            self.timers.stop(Timer::CommitRetry);
            self.stop_for_interrupt();
        }
    }

    /// The result of the action out.
    pub fn handle_event(&mut self, event: OpEvent, now: DateTime<Utc>) {
        self.now = now;
        match self.inflight.take() {
            None => {}
            Some(Inflight::Renewal) => self.on_renewed(event),
            Some(Inflight::Main) => {
                self.dispatch(event);
                if self.interrupt.is_some() && self.end.is_none() {
                    self.stop_for_interrupt();
                }
            }
        }
    }

    // ---- start and end ------------------------------------------------------------------

    pub(super) fn begin(&mut self) {
        if let Some(id) = plan::stack_of(&self.before) {
            self.progress.stack_id.get_or_insert(id);
        }
        let state = if self.unstarted {
            LcmOperationStateType::Starting
        } else if self.progress.plan.is_rollback() {
            LcmOperationStateType::RollingBack
        } else {
            self.op.error = None;
            LcmOperationStateType::Processing
        };
        // A running occurrence taken over from an owner that went away stays in its state
        // (`stateEnteredTime` kept): no state change, no second notification of it.
        if state != self.op.operation_state || !self.resume {
            self.op.enter(state, self.now);
        }
        let mut batch = self.occ_batch().with_instance(self.before.clone());
        batch = batch.with_precondition(Precondition::InstanceAt {
            id: self.before.id.clone(),
            version: self.inst_version,
        });
        self.inst_version = self.inst_version.next();
        self.step = Step::Start;
        self.next = Some(OpAction::Commit(batch));
    }

    /// A batch putting the occurrence (lease renewed, progress saved), conditioned on its
    /// version.
    pub(super) fn occ_batch(&mut self) -> StoreBatch {
        self.sync_reselection();
        let live = self.op.is_running();
        self.op.lease = live.then(|| Lease {
            owner: self.owner.clone(),
            expires: self.now + chrono_of(self.cfg.lease_time),
        });
        // Kept while the operation can go on (running, FAILED_TEMP); an ended one needs none.
        self.op.progress = (!self.op.is_terminal())
            .then(|| serde_json::to_value(&self.progress).ok())
            .flatten();
        let cond = match self.occ_version {
            Some(v) => Precondition::OpOccAt {
                id: self.op.id.clone(),
                version: v,
            },
            None => Precondition::OpOccAbsent {
                id: self.op.id.clone(),
            },
        };
        let renew_at = live.then(|| self.now + chrono_of(self.cfg.lease_time / 3));
        self.timers.put(Timer::LeaseRenewal, renew_at);
        StoreBatch::new()
            .with_op_occ(self.op.clone())
            .with_precondition(cond)
    }

    /// The reselection's history into the progress, and its attempts into the occurrence
    /// (`attempts` lists every attempt of every run of the operation).
    pub(super) fn sync_reselection(&mut self) {
        if let Some(p) = self.placed.as_ref().filter(|p| p.records) {
            self.progress.reselection = p.m.history();
        }
        self.op
            .attempts
            .clone_from(&self.progress.reselection.attempts);
    }

    pub(super) fn renewal_due(&self) -> bool {
        self.commit_retry.is_none()
            && self.occ_version.is_some()
            && !matches!(self.step, Step::Start | Step::Final | Step::Done)
            && (self.checkpoint || self.timers.is_expired(Timer::LeaseRenewal, self.now))
    }

    pub(super) fn renewal_batch(&mut self) -> StoreBatch {
        self.checkpoint = false;
        self.occ_batch()
    }

    pub(super) fn on_renewed(&mut self, event: OpEvent) {
        match event {
            OpEvent::Committed(Ok(())) => {
                self.occ_version = self.occ_version.map(Version::next);
                self.renewal_retry = None;
            }
            OpEvent::Committed(Err(e)) => {
                if !self.retry_renewal(&e) {
                    self.lost(e);
                }
            }
            _ => self.internal("a lease renewal was answered by another event"),
        }
        if self.interrupt.is_some() && self.end.is_none() {
            self.stop_for_interrupt();
        }
    }

    pub(super) fn on_commit(&mut self, r: Result<(), DriverError>) {
        if let Err(e) = r {
            if matches!(self.step, Step::Start) && self.unstarted {
                self.stop(Err(LcmError::from_start(e)));
            } else if !self.retry_commit(&e) {
                self.lost(e);
            }
            return;
        }
        self.commit_out = None;
        self.commit_retry = None;
        // The store takes writes: a later failed renewal starts its own count.
        self.renewal_retry = None;
        self.occ_version = Some(self.occ_version.map_or(Version(1), Version::next));
        match self.step {
            // Cancelled while the STARTING commit was out: `stop_for_interrupt` ends it.
            Step::Start if self.unstarted && self.interrupt.is_some() => {}
            Step::Start if self.unstarted => match self.nfvo_grant_request() {
                Some(req) => {
                    let g =
                        NfvoGrant::new(req, self.op.id.clone(), self.grant_settings(), self.now);
                    self.drive_grant(Box::new(g));
                }
                None => self.enter_processing(),
            },
            Step::Start | Step::Processing => {
                self.processing_stored = true;
                self.proceed();
            }
            Step::Final => self.ended(),
            _ => self.internal("a commit answered out of turn"),
        }
    }

    /// The occurrence stored `STARTING` (and granted, if an NFVO grants) becomes `PROCESSING`.
    pub(super) fn enter_processing(&mut self) {
        self.op.enter(LcmOperationStateType::Processing, self.now);
        let batch = self.occ_batch();
        self.step = Step::Processing;
        self.next = Some(OpAction::Commit(batch));
    }

    /// The grant request to send to the NFVO, when one grants ([`LcmConfig::nfvo_grants`])
    /// and the plan has a request.
    pub(super) fn nfvo_grant_request(&self) -> Option<GrantRequest> {
        self.cfg.nfvo_grants?;
        if self.progress.plan.is_rollback() {
            return None;
        }
        self.progress
            .planned
            .as_ref()
            .map(|p| p.request.clone())
            .or_else(|| self.progress.removal.clone())
    }

    /// The poll interval and the timeout of NFVO grants.
    pub(super) fn grant_settings(&self) -> (Duration, Duration) {
        self.cfg
            .nfvo_grants
            .map_or((Duration::from_secs(2), Duration::from_secs(300)), |g| {
                (g.poll_interval, g.timeout)
            })
    }

    /// Hands the grant exchange's action and timer out, or goes on once it ended: granted,
    /// the operation runs; refused, it ends not run.
    pub(super) fn drive_grant(&mut self, mut g: Box<NfvoGrant>) {
        match g.poll_end() {
            Some(Ok(grant)) => self.nfvo_granted(grant),
            Some(Err(why)) => self.end_unstarted_for(&why),
            None => {
                self.next = g.poll_action();
                self.timers.put(Timer::Step, g.poll_timeout());
                self.step = Step::Grant(g);
            }
        }
    }

    /// The NFVO granted: its zones are pinned, its id is the occurrence's grant, and the
    /// operation runs.
    pub(super) fn nfvo_granted(&mut self, g: Grant) {
        if let Some(planned) = &self.progress.planned {
            for n in &planned.new_vnfcs {
                if let Some(z) = g.zone_of(&n.resource_id) {
                    self.progress.pinned.insert(n.slot.name(), z.clone());
                }
            }
        }
        if !g.id.as_str().is_empty() {
            self.progress.grant_id = Some(g.id.clone());
            self.op.grant_id = Some(g.id.clone());
        }
        self.grant = Some(g);
        self.enter_processing();
    }

    /// A commit failed after the start: another process took the operation over (a
    /// conflict), or the store failed. Nothing more is written.
    pub(super) fn lost(&mut self, e: DriverError) {
        let err = if matches!(e, DriverError::Conflict { .. }) {
            LcmError::Conflict(format!(
                "operation {} was taken over by another process (its lease had expired): {}",
                self.op.id,
                chain(&e)
            ))
        } else {
            LcmError::Store(e)
        };
        self.stop(Err(err));
    }

    pub(super) fn internal(&mut self, what: &str) {
        self.finish(Err(internal_error(what)));
    }

    pub(super) fn stop(&mut self, end: Result<OperationReport, LcmError>) {
        self.step = Step::Done;
        self.next = None;
        self.timers.stop_all();
        self.end = Some(end);
    }

    pub(super) fn stop_for_interrupt(&mut self) {
        let reason = self.interrupt.clone().unwrap_or_default();
        if self.occ_version.is_none() {
            self.stop(Err(LcmError::Interrupted(format!(
                "{reason} before operation {} was stored",
                self.op.id
            ))));
            return;
        }
        if matches!(self.step, Step::Final | Step::Done) {
            return;
        }
        if self.unstarted && !self.processing_stored {
            // Stored STARTING only (perhaps waiting for the NFVO's grant): nothing was sent to
            // the VIM.
            return self.end_unstarted(&reason);
        }
        let detail = format!(
            "interrupted ({reason}) while {}; `vnfm op retry {id}` continues it, `vnfm op \
             rollback {id}` undoes it, `vnfm op fail {id}` gives it up",
            self.doing(),
            id = self.op.id
        );
        self.finish(Err(Failed::new(
            FailureKind::Interrupted,
            "interrupted",
            detail,
        )));
    }

    /// SOL003 v3.3.1 clause 5.4.17.3.1 and figure 5.6.2.2-1: an operation cancelled in
    /// `STARTING` is not run and its occurrence becomes `ROLLED_BACK`. The instance is left
    /// as it is (nothing was sent to the VIM); the occurrence's `error` says why it ended.
    pub(super) fn end_unstarted(&mut self, reason: &str) {
        let f = Failed::new(
            FailureKind::Interrupted,
            "interrupted",
            format!(
                "interrupted ({reason}) while STARTING: the operation was not run and the \
                 instance is unchanged (SOL003 5.4.17.3.1: ROLLED_BACK)"
            ),
        );
        self.end_not_run(f);
    }

    /// SOL003 figure 5.6.2.2-1: an operation whose grant the NFVO did not give ends
    /// `ROLLED_BACK` from `STARTING`, not run; `why` says what the NFVO answered.
    pub(super) fn end_unstarted_for(&mut self, why: &str) {
        let f = Failed::new(
            FailureKind::Invalid,
            "grant not given",
            format!(
                "{why}; the operation was not run and the instance is unchanged (SOL003 \
                 figure 5.6.2.2-1: ROLLED_BACK from STARTING)"
            ),
        );
        self.end_not_run(f);
    }

    /// Ends an operation that never left `STARTING`: `ROLLED_BACK` with `f` as its error.
    pub(super) fn end_not_run(&mut self, f: Failed) {
        self.timers.stop(Timer::Step);
        self.op.error = Some(f.problem());
        self.op.enter(LcmOperationStateType::RolledBack, self.now);
        self.failure = Some(f);
        let batch = self.occ_batch();
        self.step = Step::Final;
        self.next = Some(OpAction::Commit(batch));
    }

    pub(super) fn doing(&self) -> &'static str {
        match &self.step {
            Step::Start | Step::Processing => "starting",
            Step::Grant(_) => "waiting for the NFVO's grant",
            Step::MarkList | Step::Marking(_) => "marking servers unhealthy",
            Step::GrantZones | Step::ReselectZones => "listing zones",
            Step::Stack { .. } | Step::ResumeWait { .. } => "waiting for the stack",
            Step::Settle { .. } | Step::FailedServers | Step::Hosts(_) => "reading a failed stack",
            Step::CollectList | Step::CollectServers(_) => "reading the servers back",
            Step::Hooks(_) => "running hooks",
            Step::DeleteSent | Step::DeleteWait { .. } => "deleting the stack",
            Step::Power(_) => "starting or stopping servers",
            Step::Cnf(c) => c.doing(),
            Step::Final | Step::Done => "ending",
        }
    }

    /// Ends the operation: the final commit of the occurrence (and the instance).
    pub(super) fn finish(&mut self, result: Result<VnfInstance, Failed>) {
        self.timers.stop(Timer::Step);
        self.op.grant_id = self
            .grant
            .as_ref()
            .map(|g| g.id.clone())
            .or(self.op.grant_id.take());
        let rollback = self.progress.plan.is_rollback();
        let failing = self.progress.plan == Plan::FailInstantiate;
        let instance = match result {
            Ok(new) if failing => {
                // The stack is gone: the fail ends FAILED with the operation's own error.
                self.op.enter(LcmOperationStateType::Failed, self.now);
                Some(new)
            }
            Ok(new) => {
                let state = if rollback {
                    LcmOperationStateType::RolledBack
                } else {
                    LcmOperationStateType::Completed
                };
                self.op.error = None;
                self.op.enter(state, self.now);
                Some(new)
            }
            Err(f) => {
                self.op.error = Some(if failing {
                    let stack = self
                        .progress
                        .stack_id
                        .as_ref()
                        .map_or_else(String::new, |s| format!(" {s}"));
                    ProblemDetails::new(
                        422,
                        format!(
                            "the operation was not failed: its stack{stack} could not be                              deleted ({}); it stays FAILED_TEMP and the instance records the                              stack",
                            f.detail
                        ),
                    )
                    .with_title("fail refused")
                } else if rollback {
                    ProblemDetails::new(422, f.detail.clone()).with_title("rollback failed")
                } else {
                    f.problem()
                });
                self.op.enter(LcmOperationStateType::FailedTemp, self.now);
                let recorded = self.record_stack();
                self.failure = Some(f);
                recorded
            }
        };
        let mut batch = self.occ_batch();
        if let Some(inst) = instance {
            batch = batch
                .with_instance(inst.clone())
                .with_precondition(Precondition::InstanceAt {
                    id: inst.id.clone(),
                    version: self.inst_version,
                });
            self.after = Some(inst);
        }
        self.step = Step::Final;
        self.next = Some(OpAction::Commit(batch));
    }

    /// A stack created by a failed instantiate is recorded, so that a rollback can delete it.
    pub(super) fn record_stack(&self) -> Option<VnfInstance> {
        let id = self.progress.stack_id.as_ref()?;
        if plan::stack_of(&self.before).is_some() {
            return None;
        }
        let mut inst = self.before.clone();
        plan::set_stack_id(&mut inst, id);
        Some(inst)
    }

    pub(super) fn ended(&mut self) {
        let instance = self.after.take().unwrap_or_else(|| self.before.clone());
        let report = OperationReport {
            op_occ: self.op.clone(),
            instance,
            grant: self.grant.clone(),
            failure: self.failure.as_ref().map(|f| f.kind),
        };
        self.stop(Ok(report));
    }

    pub(super) fn fail(&mut self, f: Failed) {
        self.finish(Err(f));
    }

    pub(super) fn fail_driver(&mut self, e: &DriverError) {
        self.fail(Failed::driver(e));
    }

    // ---- dispatch ----------------------------------------------------------------------

    pub(super) fn dispatch(&mut self, event: OpEvent) {
        let step = std::mem::replace(&mut self.step, Step::Done);
        match (step, event) {
            (s @ (Step::Start | Step::Processing | Step::Final), OpEvent::Committed(r)) => {
                self.step = s;
                self.on_commit(r);
            }
            (Step::Grant(mut g), OpEvent::Grant(r)) => {
                g.handle_answer(r, self.now);
                self.drive_grant(g);
            }
            (Step::MarkList, OpEvent::Resources(r)) => self.on_mark_list(r),
            (Step::Marking(todo), OpEvent::Marked(r)) => self.on_marked(todo, r),
            (Step::GrantZones, OpEvent::Zones(r)) => self.on_grant_zones(r),
            (Step::Stack { mut run, purpose }, OpEvent::StackCreated(r)) => {
                run.handle_applied(r, self.now);
                self.drive_stack(run, purpose);
            }
            (Step::Stack { mut run, purpose }, OpEvent::StackUpdated(r)) => {
                let id = self.progress.stack_id.clone();
                run.handle_applied(r.and_then(|()| id.ok_or_else(no_stack)), self.now);
                self.drive_stack(run, purpose);
            }
            (Step::Stack { mut run, purpose }, OpEvent::Stack(r)) => {
                run.handle_stack(r, self.now);
                self.drive_stack(run, purpose);
            }
            (Step::Settle { deadline }, OpEvent::Resources(r)) => self.on_settle(deadline, r),
            (Step::ReselectZones, OpEvent::Zones(r)) => self.on_reselect_zones(r),
            (Step::FailedServers, OpEvent::Servers(r)) => self.on_failed_servers(r),
            (Step::Hosts(units), OpEvent::Servers(r)) => self.on_hosts(&units, r),
            (Step::CollectList, OpEvent::Resources(r)) => self.on_collect_list(r),
            (Step::CollectServers(found), OpEvent::Servers(r)) => self.on_collected(found, r),
            (Step::Hooks(mut h), OpEvent::Hook(r)) => {
                h.handle_result(r, &mut self.op.hooks);
                self.drive_hooks(h);
            }
            (Step::DeleteSent, OpEvent::StackDeleted(r)) => self.on_delete_sent(r),
            (Step::DeleteWait { deadline }, OpEvent::Stack(r)) => self.on_delete_wait(deadline, r),
            (Step::ResumeWait { deadline }, OpEvent::Stack(r)) => self.on_resume_wait(deadline, r),
            (Step::Power(mut p), OpEvent::Servers(r)) => {
                p.handle_servers(r, self.now);
                self.drive_power(p);
            }
            (Step::Power(mut p), OpEvent::PowerSet(r)) => {
                p.handle_power_set(r, self.now);
                self.drive_power(p);
            }
            (Step::Cnf(mut c), OpEvent::Nodes(r)) => {
                c.handle_nodes(r);
                self.drive_cnf(c);
            }
            (Step::Cnf(mut c), OpEvent::ObjectsApplied(r)) => {
                c.handle_applied(&r, self.now);
                self.drive_cnf(c);
            }
            (Step::Cnf(mut c), OpEvent::WorkloadsScaled(r)) => {
                c.handle_scaled(&r, self.now);
                self.drive_cnf(c);
            }
            (Step::Cnf(mut c), OpEvent::PodsDeleted(r)) => {
                c.handle_pods_deleted(&r, self.now);
                self.drive_cnf(c);
            }
            (Step::Cnf(mut c), OpEvent::Pods(r)) => {
                c.handle_pods(r, self.now);
                self.drive_cnf(c);
            }
            (Step::Cnf(mut c), OpEvent::ObjectsDeleted(r)) => {
                c.handle_deleted(&r);
                self.drive_cnf(c);
            }
            (step, event) => {
                let what = format!("event {event:?} does not answer step {step:?}");
                self.internal(&what);
            }
        }
    }

    /// The step's timer fired: a part's goes to it, a stack wait asks again.
    pub(super) fn fire_timer(&mut self) {
        match std::mem::replace(&mut self.step, Step::Done) {
            Step::Grant(mut g) => {
                g.handle_timeout(self.now);
                self.drive_grant(g);
            }
            Step::Power(mut p) => {
                p.handle_timeout(self.now);
                self.drive_power(p);
            }
            Step::Cnf(mut c) => {
                c.handle_timeout(self.now);
                self.drive_cnf(c);
            }
            Step::Stack { mut run, purpose } => {
                run.handle_timeout(self.now);
                self.drive_stack(run, purpose);
            }
            step => {
                self.step = step;
                self.fire_stack_timer();
            }
        }
    }

    /// A stack wait's timer (a resume or a delete): the stack shown again, or its resources
    /// listed (settle).
    fn fire_stack_timer(&mut self) {
        let Some(id) = self.progress.stack_id.clone() else {
            return self.internal("a timer without a stack");
        };
        self.next = Some(match self.step {
            Step::DeleteWait { .. } | Step::ResumeWait { .. } => OpAction::ShowStack(id),
            Step::Settle { .. } => OpAction::ListResources(ListResources::new(id, 5)),
            _ => return,
        });
    }
}
