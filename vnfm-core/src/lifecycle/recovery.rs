//! Recovery of an operation that did not end: [`Lifecycle::retry`], [`Lifecycle::rollback`],
//! [`Lifecycle::fail`] (of an occurrence `FAILED_TEMP`, or running with an expired lease),
//! the checks of a cancel or a task, and [`Lifecycle::recover_interrupted`] at start-up.

use std::sync::Arc;

use serde_json::{json, Value};

use super::operation::{Operation, OperationStart, Plan, Progress};
use super::plan::{self};
use super::takeover::{self, saved_progress, Decision, Resumable, Sweep};
use super::task::OpTask;
use crate::driver::{DriverError, Precondition, StoreBatch, Versioned};
use crate::error::{Error, Location};
use crate::id::OpOccId;
use crate::lcm::{InstantiationState, LcmOperationStateType, LcmOperationType, VnfLcmOpOcc};
use crate::package::VnfPackage;
use crate::problem::ProblemDetails;

use super::engine::Lifecycle;
use super::failure::FailureKind;
use super::types::{LcmError, OperationOptions, OperationReport};

/// How long after a lease's expiry a running server's sweep waits before it takes the
/// occurrence over ([`Lifecycle::take_over_expired`]): longer than the owner needs to renew once
/// the store answers again (its failed commits are tried again at most a second apart).
pub const TAKEOVER_GRACE: chrono::TimeDelta = chrono::TimeDelta::seconds(5);

impl Lifecycle {
    /// The occurrence `op_id` if it takes `task` ([`super::task::check`]): for retry,
    /// rollback and fail, `FAILED_TEMP`, or running with an expired (or no) lease.
    pub(super) async fn recoverable(
        &self,
        op_id: &OpOccId,
        task: OpTask,
    ) -> Result<Versioned<VnfLcmOpOcc>, LcmError> {
        let entry = match self.drivers.store.op_occ_entry(op_id).await {
            Ok(o) => o,
            Err(e) if e.is_not_found() => {
                return Err(LcmError::Invalid(Error::invalid(
                    Location::default().with_field("vnfLcmOpOccId"),
                    format!("no operation occurrence {op_id}"),
                )))
            }
            Err(e) => return Err(LcmError::Store(e)),
        };
        let now = self.drivers.clock.now();
        super::task::check(task, &entry.value, &self.owner, now)
            .map_err(|r| LcmError::Conflict(r.detail))?;
        Ok(entry)
    }

    /// SOL003 "cancel": whether `op_id` may be cancelled by this lifecycle
    /// ([`super::task::check`]: running, under a live lease of this lifecycle's owner).
    /// Returns the occurrence; the caller then triggers the [`Interrupt`](super::Interrupt) it gave the
    /// operation, which stops at its next step boundary and ends `FAILED_TEMP` (`ROLLED_BACK`,
    /// not run, when it is still stored `STARTING`: [`super::Operation::interrupt`]).
    ///
    /// # Errors
    /// [`LcmError::Invalid`] for an unknown occurrence, [`LcmError::Conflict`] (naming its
    /// state) when it does not take a cancel, [`LcmError::Store`].
    pub async fn check_cancel(&self, op_id: &OpOccId) -> Result<VnfLcmOpOcc, LcmError> {
        Ok(self.recoverable(op_id, OpTask::Cancel).await?.value)
    }

    /// Whether `op_id` takes `task` now (nothing is changed): what `vnfm serve` asks before it
    /// answers 202 and runs the task in the background.
    ///
    /// # Errors
    /// As [`Lifecycle::check_cancel`].
    pub async fn check_task(&self, op_id: &OpOccId, task: OpTask) -> Result<VnfLcmOpOcc, LcmError> {
        Ok(self.recoverable(op_id, task).await?.value)
    }

    /// Declares interrupted (`FAILED_TEMP`, `failureKind: INTERRUPTED`) every occurrence that
    /// is running without a live lease: its owner went away (a stopped server, a killed
    /// command) and nobody will end it. One still `STARTING` (nothing sent to the VIM: it was
    /// waiting for an NFVO's grant, or had just been stored) ends `ROLLED_BACK` instead, not
    /// run. One whose lease is alive is left alone, whoever runs
    /// it; each is taken by a commit conditioned on its version, so when another process
    /// recovers one first, theirs stands. Under [`super::Takeover::Resume`] (`config().takeover`)
    /// those that can be resumed are not written but returned in [`Sweep::resumable`], for the
    /// caller to run ([`Lifecycle::resume_expired`]) once it is ready to (a server, once it
    /// serves).
    ///
    /// # Errors
    /// [`LcmError::Store`] when the store cannot be read or written.
    pub async fn recover_interrupted(&self) -> Result<Sweep, LcmError> {
        self.recover(false).await
    }

    /// [`Lifecycle::recover_interrupted`] for a program that keeps running (a server's
    /// periodic sweep): the occurrences whose lease this lifecycle holds are left alone (it
    /// runs them and renews their leases), also when a lease lapsed while a call hung; another
    /// owner's lease counts as expired only [`TAKEOVER_GRACE`] after its expiry.
    ///
    /// # Errors
    /// As [`Lifecycle::recover_interrupted`].
    pub async fn take_over_expired(&self) -> Result<Sweep, LcmError> {
        self.recover(true).await
    }

    /// The running occurrences without a live lease, each decided by [`takeover::decide`]
    /// under the configured policy; with `skip_own`, not those whose lease names this
    /// lifecycle's owner.
    async fn recover(&self, skip_own: bool) -> Result<Sweep, LcmError> {
        let now = self.drivers.clock.now();
        // While another process runs (the sweep of a server), a lease counts as expired only
        // `TAKEOVER_GRACE` after its expiry: after the store was unreachable for everyone, an
        // owner that is alive renews within a second or so of its return (its commits are
        // tried again), before its occurrences are taken from it.
        let seen_at = if skip_own {
            now.checked_sub_signed(TAKEOVER_GRACE).unwrap_or(now)
        } else {
            now
        };
        let ops = self
            .drivers
            .store
            .op_occs(crate::driver::OpOccFilter::all())
            .await
            .map_err(LcmError::Store)?;
        let mut out = Sweep::default();
        let own =
            |o: &&VnfLcmOpOcc| skip_own && o.lease.as_ref().is_some_and(|l| l.owner == self.owner);
        for op in ops
            .iter()
            .filter(|o| o.is_running() && !o.is_alive(seen_at))
            .filter(|o| !own(o))
        {
            let entry = match self.drivers.store.op_occ_entry(&op.id).await {
                Ok(e) => e,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(LcmError::Store(e)),
            };
            let graced = now.checked_sub_signed(TAKEOVER_GRACE).unwrap_or(now);
            let why = match takeover::decide(&entry.value, self.config.takeover) {
                // At start-up too, a resume waits for the grace (a server restarted while the
                // database was down must not run what live owners are about to renew): the
                // sweep takes it then.
                Decision::Resume { .. } if entry.value.is_alive(graced) => continue,
                Decision::Resume { .. } => {
                    out.resumable.push(Resumable {
                        op: entry.value.id.clone(),
                        instance: entry.value.vnf_instance_id.clone(),
                    });
                    continue;
                }
                Decision::Interrupt { why } => why,
                Decision::RollBack => None,
            };
            if let Some(id) = self.declare_interrupted(entry, why.as_deref()).await? {
                out.interrupted.push(id);
            }
        }
        Ok(out)
    }

    /// Declares interrupted the occurrence `op_id` when it is running without a live lease
    /// (its owner went away): `FAILED_TEMP`, `failureKind: INTERRUPTED` (`ROLLED_BACK`, not run,
    /// from `STARTING`), by one commit conditioned on its version. What a server does with an
    /// occurrence it was to resume but could not start (its package is gone). Returns whether
    /// this call declared it (`false`: it is not running without a live lease, or another
    /// process took it first).
    ///
    /// # Errors
    /// [`LcmError::Store`] when the store cannot be read or written.
    pub async fn interrupt_expired(&self, op_id: &OpOccId, why: &str) -> Result<bool, LcmError> {
        let entry = match self.drivers.store.op_occ_entry(op_id).await {
            Ok(e) => e,
            Err(e) if e.is_not_found() => return Ok(false),
            Err(e) => return Err(LcmError::Store(e)),
        };
        let now = self.drivers.clock.now();
        if !entry.value.is_running() || entry.value.is_alive(now) {
            return Ok(false);
        }
        Ok(self.declare_interrupted(entry, Some(why)).await?.is_some())
    }

    /// Ends `entry` (running, its owner gone) `FAILED_TEMP` interrupted, or `ROLLED_BACK` from
    /// `STARTING`, conditioned on its version; `why` is added to its error's detail. `None`
    /// when another process changed it first.
    async fn declare_interrupted(
        &self,
        entry: Versioned<VnfLcmOpOcc>,
        why: Option<&str>,
    ) -> Result<Option<OpOccId>, LcmError> {
        let now = self.drivers.clock.now();
        let mut op = entry.value;
        let mut problem = interrupted_problem(&op);
        if let Some(why) = why {
            problem.detail = format!("{}; not resumed: {why}", problem.detail);
        }
        op.error = Some(problem);
        // Stored STARTING only (e.g. waiting for an NFVO's grant): nothing was sent to the
        // VIM, so it ends as a cancel in STARTING does (SOL003 5.4.17.3.1), not run.
        let state = if op.operation_state == LcmOperationStateType::Starting {
            op.progress = None;
            LcmOperationStateType::RolledBack
        } else {
            LcmOperationStateType::FailedTemp
        };
        op.enter(state, now);
        op.lease = None;
        let id = op.id.clone();
        let batch = StoreBatch::new()
            .with_op_occ(op)
            .with_precondition(Precondition::OpOccAt {
                id: id.clone(),
                version: entry.version,
            });
        match self.commit(batch).await {
            Ok(()) => Ok(Some(id)),
            Err(DriverError::Conflict { .. }) => Ok(None),
            Err(e) => Err(LcmError::Store(e)),
        }
    }

    /// Resumes `op_id`, an occurrence running without a live lease (its owner went away) that
    /// a sweep left to resume ([`Sweep::resumable`]): it runs on from its saved progress as a
    /// retry does, staying `PROCESSING` (or `ROLLING_BACK`), its take-over counted in the
    /// progress. Its first commit is conditioned on the version read, so of two processes
    /// that resume it one runs it and the other gets a conflict; so does an owner that
    /// renewed its lease after all.
    ///
    /// # Errors
    /// [`LcmError::Conflict`] when it is no longer running without a live lease, another
    /// process took it, or [`takeover::decide`] no longer resumes it (it is then left for
    /// [`Lifecycle::interrupt_expired`]); the errors of a retry.
    pub async fn resume_expired(
        &self,
        op_id: &OpOccId,
        pkg: &VnfPackage,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let entry = self.recoverable(op_id, OpTask::Retry).await?;
        if !entry.value.is_running() {
            return Err(LcmError::Conflict(format!(
                "operation {op_id} is {}: only a running operation whose owner went away is \
                 resumed",
                entry.value.operation_state
            )));
        }
        match takeover::decide(&entry.value, self.config.takeover) {
            Decision::Resume { progress } => self.resume(entry, *progress, Some(pkg), opts).await,
            Decision::Interrupt { why } => Err(LcmError::Conflict(format!(
                "operation {op_id} is not resumed: {}",
                why.unwrap_or_else(|| "the take-over policy interrupts".to_owned())
            ))),
            Decision::RollBack => Err(LcmError::Conflict(format!(
                "operation {op_id} is STARTING: it is rolled back, not resumed"
            ))),
        }
    }

    /// SOL003 "fail": an occurrence in `FAILED_TEMP` (or whose owner is gone) becomes
    /// `FAILED` (terminal); the instance stays as it is, and other operations may run again.
    ///
    /// An instantiate that created a stack (its saved progress knows the stack even when its
    /// process was killed, or the `NOT_INSTANTIATED` instance records it) must not leave that
    /// stack behind an instance that no longer knows it: its stack is deleted first
    /// ([`Plan::FailInstantiate`], `ROLLING_BACK` meanwhile), then the occurrence is `FAILED`.
    ///
    /// # Errors
    /// [`LcmError::Conflict`] when the occurrence is neither, or another process got there
    /// first, or when the stack of an instantiate could not be deleted: the fail is refused
    /// (the error names the stack), the occurrence stays `FAILED_TEMP` and the instance
    /// records the stack.
    pub async fn fail(&self, op_id: &OpOccId) -> Result<VnfLcmOpOcc, LcmError> {
        self.fail_with(op_id, &OperationOptions::default()).await
    }

    /// [`Lifecycle::fail`] with options (an [`Interrupt`](super::Interrupt) that stops the stack's deletion).
    ///
    /// # Errors
    /// As [`Lifecycle::fail`].
    pub async fn fail_with(
        &self,
        op_id: &OpOccId,
        opts: &OperationOptions,
    ) -> Result<VnfLcmOpOcc, LcmError> {
        let mut entry = self.recoverable(op_id, OpTask::Fail).await?;
        if let Some(progress) = self.stack_to_remove(&entry.value).await? {
            if entry.value.error.is_none() {
                // Its owner went away: FAILED says so, as below.
                entry.value.error = Some(interrupted_problem(&entry.value));
            }
            let stack = progress.stack_id.clone().unwrap_or_default();
            let report = self.resume(entry, progress, None, opts).await?;
            let op = report.op_occ;
            if op.operation_state == LcmOperationStateType::Failed {
                return Ok(op);
            }
            let why = op.error.as_ref().map_or("", |e| e.detail.as_str());
            return Err(LcmError::Conflict(format!(
                "operation {} was not failed: its stack {stack} exists and could not be \
                 deleted, and failing the instantiate would leave it behind an instance that \
                 does not know it ({why}); the operation stays FAILED_TEMP: fail it again, roll \
                 it back, or retry it",
                op.id
            )));
        }
        let mut op = entry.value;
        let now = self.drivers.clock.now();
        if op.error.is_none() {
            op.error = Some(interrupted_problem(&op));
        }
        op.enter(LcmOperationStateType::Failed, now);
        op.lease = None;
        self.commit(StoreBatch::new().with_op_occ(op.clone()).with_precondition(
            Precondition::OpOccAt {
                id: op.id.clone(),
                version: entry.version,
            },
        ))
        .await
        .map_err(LcmError::from_start)?;
        Ok(op)
    }

    /// The progress of the fail of `op` when it is an instantiate (not of a CNF) that created a
    /// stack: the stack its saved progress knows, or the one its `NOT_INSTANTIATED` instance
    /// records (a `FAILED_TEMP` instantiate records the stack it created).
    pub(super) async fn stack_to_remove(
        &self,
        op: &VnfLcmOpOcc,
    ) -> Result<Option<Progress>, LcmError> {
        if op.operation != LcmOperationType::Instantiate {
            return Ok(None);
        }
        let saved = saved_progress(op);
        if saved.as_ref().is_some_and(|p| p.plan.is_cnf()) {
            return Ok(None);
        }
        let inst = self.load(&op.vnf_instance_id).await?.value;
        let recorded = (inst.instantiation_state != Some(InstantiationState::Instantiated))
            .then(|| plan::stack_of(&inst))
            .flatten();
        let Some(stack) = saved.as_ref().and_then(|p| p.stack_id.clone()).or(recorded) else {
            return Ok(None);
        };
        let mut progress = saved.unwrap_or_else(|| Progress::new(Plan::FailInstantiate));
        progress.plan = Plan::FailInstantiate;
        progress.stack_id = Some(stack);
        progress.vnfcs = None;
        progress.deleted = false;
        Ok(Some(progress))
    }

    /// SOL003 "rollback" of an instantiate, scale-out or change flavour in `FAILED_TEMP` (or
    /// whose owner is gone): an instantiate's stack is deleted; a scale-out's stack is updated
    /// back to the instance's VNFCs before the operation, a change flavour's to the old
    /// flavour's template with those VNFCs. The occurrence goes `ROLLING_BACK` then
    /// `ROLLED_BACK`, or back to `FAILED_TEMP` with the error when the rollback itself fails.
    ///
    /// # Errors
    /// [`LcmError::Conflict`] when the occurrence is not recoverable or is of another
    /// operation (heal and scale-in cannot be rolled back).
    pub async fn rollback(
        &self,
        op_id: &OpOccId,
        pkg: &VnfPackage,
    ) -> Result<OperationReport, LcmError> {
        self.rollback_with(op_id, pkg, &OperationOptions::default())
            .await
    }

    /// [`Lifecycle::rollback`] with options (an [`Interrupt`](super::Interrupt) that cancels it).
    ///
    /// # Errors
    /// As [`Lifecycle::rollback`].
    pub async fn rollback_with(
        &self,
        op_id: &OpOccId,
        pkg: &VnfPackage,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let entry = self.recoverable(op_id, OpTask::Rollback).await?;
        let op = &entry.value;
        let is_scale_out = op.operation == LcmOperationType::Scale
            && op
                .operation_params
                .as_ref()
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str)
                == Some("SCALE_OUT");
        let saved_cnf = saved_progress(op).is_some_and(|p| p.plan.is_cnf());
        let saved_plan = saved_progress(op).map(|p| p.plan);
        let plan = match op.operation {
            LcmOperationType::Instantiate if saved_cnf => Plan::CnfRollbackInstantiate,
            _ if saved_cnf => {
                return Err(LcmError::Conflict(format!(
                    "operation {} is a CNF {}: only a CNF instantiate can be rolled back (scale \
                     a CNF in, or fail the operation)",
                    op.id, op.operation
                )))
            }
            LcmOperationType::Instantiate => Plan::RollbackInstantiate,
            LcmOperationType::ChangeFlavour => Plan::RollbackChangeFlavour,
            LcmOperationType::ChangeExtConn => Plan::RollbackChangeExtConn,
            _ if is_scale_out => Plan::RollbackScaleOut,
            LcmOperationType::ScaleToLevel => match saved_plan {
                Some(Plan::ScaleToLevel { .. }) => Plan::RollbackScaleToLevel,
                Some(Plan::ScaleOut { .. }) => Plan::RollbackScaleOut,
                _ => {
                    return Err(LcmError::Conflict(format!(
                        "operation {} is a SCALE_TO_LEVEL that scales in only: a scale-in \
                         cannot be rolled back (retry or fail it)",
                        op.id
                    )))
                }
            },
            _ => {
                return Err(LcmError::Conflict(format!(
                    "operation {} is a {}: only instantiate, scale-out, scale to level, change \
                     flavour and change external connectivity can be rolled back",
                    op.id, op.operation
                )))
            }
        };
        let mut progress = saved_progress(op).unwrap_or_else(|| Progress::new(plan.clone()));
        if plan == Plan::RollbackChangeFlavour {
            // The old flavour's server groups, as the instance records them.
            progress.server_groups = None;
        }
        progress.plan = plan;
        progress.vnfcs = None;
        progress.deleted = false;
        self.resume(entry, progress, Some(pkg), opts).await
    }

    /// SOL003 "retry" of an occurrence in `FAILED_TEMP` (or whose owner is gone): the
    /// operation continues from where it stopped: the grant it got is kept, a stack it created
    /// is updated instead of created again, servers already marked unhealthy are not marked
    /// again, and when the stack had reached its state only the hooks run.
    ///
    /// # Errors
    /// [`LcmError::Conflict`] when the occurrence is not recoverable or was started by a
    /// vnfm that did not save its progress.
    pub async fn retry(
        &self,
        op_id: &OpOccId,
        pkg: &VnfPackage,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let entry = self.recoverable(op_id, OpTask::Retry).await?;
        let progress = saved_progress(&entry.value).ok_or_else(|| {
            LcmError::Conflict(format!(
                "operation {} saved no progress (started by an older vnfm): it can be rolled \
                 back or failed, not retried",
                entry.value.id
            ))
        })?;
        if progress.plan == Plan::FailInstantiate {
            return Err(LcmError::Conflict(format!(
                "operation {} was being failed (its stack deleted) when it stopped: fail it \
                 again or roll it back, it is not retried",
                entry.value.id
            )));
        }
        self.resume(entry, progress, Some(pkg), opts).await
    }

    pub(super) async fn resume(
        &self,
        entry: Versioned<VnfLcmOpOcc>,
        progress: Progress,
        pkg: Option<&VnfPackage>,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let inst = self.load(&entry.value.vnf_instance_id).await?;
        let start = OperationStart {
            op: entry,
            resume: true,
            instance: inst,
            progress,
            package: pkg.map(|p| Arc::new(p.clone())),
            owner: self.owner.clone(),
            hooks: self.hook_specs(),
        };
        let m = Operation::new(self.config.clone(), start, self.drivers.clock.now());
        self.drive(m, opts.interrupt.as_ref()).await
    }
}

/// The error of an occurrence whose owner went away without ending it.
pub(super) fn interrupted_problem(op: &VnfLcmOpOcc) -> ProblemDetails {
    let detail = match &op.lease {
        Some(l) => format!(
            "operation {} was {} when its owner {} went away (lease expired {})",
            op.id, op.operation_state, l.owner, l.expires
        ),
        None => format!(
            "operation {} was {} when its owner went away",
            op.id, op.operation_state
        ),
    };
    ProblemDetails::new(422, detail)
        .with_title("interrupted")
        .with_extension("failureKind", json!(FailureKind::Interrupted))
}
