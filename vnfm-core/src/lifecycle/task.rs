//! The SOL003 tasks on an operation occurrence (v3.3.1 5.4.14–5.4.17): which task an
//! occurrence takes in which state. Pure: the occurrence and `now` in, a decision out; the
//! [`super::Lifecycle`] carries the allowed ones out, and `vnfm serve` answers the refusals
//! with 409.
//!
//! - `retry`, `rollback`, `fail`: an occurrence in `FAILED_TEMP`, or one that is running but
//!   whose owner went away (its lease expired: nobody will end it; vnfm's extension of the
//!   rule, the same occurrence [`super::Lifecycle::recover_interrupted`] declares interrupted).
//! - `cancel`: an occurrence `STARTING`, `PROCESSING` or `ROLLING_BACK` whose owner is alive
//!   and is the caller (only the process that runs an operation can stop it: it stops at the
//!   next step boundary, a VIM call in flight completes, and the occurrence ends
//!   `FAILED_TEMP`; one still stored `STARTING` is not run and ends `ROLLED_BACK`, SOL003
//!   v3.3.1 5.4.17.3.1 and figure 5.6.2.2-1, see [`super::Operation::interrupt`]). One whose
//!   owner went away is refused: it is retried, rolled back or failed instead.

use chrono::{DateTime, Utc};

use crate::lcm::{LcmOperationStateType, VnfLcmOpOcc};

/// A task on an operation occurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpTask {
    /// `POST .../retry`
    Retry,
    /// `POST .../rollback`
    Rollback,
    /// `POST .../fail`
    Fail,
    /// `POST .../cancel`
    Cancel,
}

impl OpTask {
    /// The task's name as in its URI (`retry`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Rollback => "rollback",
            Self::Fail => "fail",
            Self::Cancel => "cancel",
        }
    }
}

/// Why a task is refused: the occurrence's state does not take it (SOL003: 409 Conflict).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct TaskRefused {
    /// The task.
    pub task: OpTask,
    /// The occurrence's state.
    pub state: LcmOperationStateType,
    /// Why, naming the occurrence, its state and the states the task takes.
    pub detail: String,
}

/// Whether `op` takes `task` at `now`; `caller` is the lease owner of the process asking
/// (only it can cancel what it runs).
///
/// # Errors
/// [`TaskRefused`] naming the state and the states the task takes.
pub fn check(
    task: OpTask,
    op: &VnfLcmOpOcc,
    caller: &str,
    now: DateTime<Utc>,
) -> Result<(), TaskRefused> {
    let state = op.operation_state;
    let refuse = |detail: String| {
        Err(TaskRefused {
            task,
            state,
            detail,
        })
    };
    match task {
        OpTask::Retry | OpTask::Rollback | OpTask::Fail => {
            if state == LcmOperationStateType::FailedTemp || (op.is_running() && !op.is_alive(now))
            {
                return Ok(());
            }
            let owner = match &op.lease {
                Some(l) if op.is_running() => {
                    format!(" and alive (lease of {} until {})", l.owner, l.expires)
                }
                _ => String::new(),
            };
            refuse(format!(
                "operation {} is {state}{owner}: only an operation in FAILED_TEMP (or one whose \
                 owner is gone) can be {}",
                op.id,
                match task {
                    OpTask::Retry => "retried",
                    OpTask::Rollback => "rolled back",
                    _ => "failed",
                }
            ))
        }
        OpTask::Cancel => {
            if !op.is_running() {
                return refuse(format!(
                    "operation {} is {state}: only an operation STARTING, PROCESSING or \
                     ROLLING_BACK can be cancelled",
                    op.id
                ));
            }
            match &op.lease {
                Some(l) if !l.is_expired(now) && l.owner == caller => Ok(()),
                Some(l) if !l.is_expired(now) => refuse(format!(
                    "operation {} is {state} and run by {} (lease until {}), not by this \
                     process: only the process that runs an operation can cancel it",
                    op.id, l.owner, l.expires
                )),
                _ => refuse(format!(
                    "operation {} is {state} but its owner is gone (no live lease): nothing runs \
                     it to cancel; retry, roll back or fail it",
                    op.id
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::id::{OpOccId, VnfInstanceId};
    use crate::lcm::{LcmOperationType, Lease};
    use chrono::TimeZone;

    fn op(state: LcmOperationStateType, lease: Option<(&str, i64)>) -> VnfLcmOpOcc {
        let t0 = Utc.timestamp_opt(1_800_000_000, 0).unwrap();
        let mut o = VnfLcmOpOcc::new(
            OpOccId::new("op-1"),
            VnfInstanceId::new("i-1"),
            LcmOperationType::Instantiate,
            t0,
        );
        o.operation_state = state;
        o.lease = lease.map(|(owner, secs)| Lease {
            owner: owner.into(),
            expires: t0 + chrono::Duration::seconds(secs),
        });
        o
    }

    fn now() -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_010, 0).unwrap()
    }

    #[test]
    fn retry_rollback_fail_take_failed_temp_and_orphans_only() {
        use LcmOperationStateType as S;
        for task in [OpTask::Retry, OpTask::Rollback, OpTask::Fail] {
            assert!(check(task, &op(S::FailedTemp, None), "me", now()).is_ok());
            // Running, lease expired: its owner is gone.
            assert!(check(task, &op(S::Processing, Some(("x", 5))), "me", now()).is_ok());
            for s in [
                S::Starting,
                S::Processing,
                S::RollingBack,
                S::Completed,
                S::Failed,
                S::RolledBack,
            ] {
                let e = check(task, &op(s, Some(("me", 60))), "me", now()).unwrap_err();
                assert_eq!(e.state, s);
                assert!(e.detail.contains(&s.to_string()), "{}", e.detail);
                assert!(e.detail.contains("FAILED_TEMP"), "{}", e.detail);
            }
        }
    }

    #[test]
    fn cancel_takes_a_running_operation_of_the_caller_only() {
        use LcmOperationStateType as S;
        for s in [S::Starting, S::Processing, S::RollingBack] {
            assert!(check(OpTask::Cancel, &op(s, Some(("me", 60))), "me", now()).is_ok());
            let e = check(OpTask::Cancel, &op(s, Some(("other", 60))), "me", now()).unwrap_err();
            assert!(e.detail.contains("other"), "{}", e.detail);
            let e = check(OpTask::Cancel, &op(s, Some(("me", 5))), "me", now()).unwrap_err();
            assert!(e.detail.contains("owner is gone"), "{}", e.detail);
        }
        for s in [S::FailedTemp, S::Completed, S::Failed, S::RolledBack] {
            let e = check(OpTask::Cancel, &op(s, None), "me", now()).unwrap_err();
            assert!(e.detail.contains(&s.to_string()), "{}", e.detail);
            assert!(e.detail.contains("PROCESSING"), "{}", e.detail);
        }
    }
}
