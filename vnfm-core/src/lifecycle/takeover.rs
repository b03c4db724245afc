//! What a process does with an operation occurrence whose owner went away (its lease expired:
//! a killed command, a replica that died): the policy ([`Takeover`]) and the decision for one
//! occurrence ([`decide`]). Pure: the occurrence and the policy in, a [`Decision`] out; the
//! [`super::Lifecycle`] carries it out ([`super::Lifecycle::take_over_expired`],
//! [`super::Lifecycle::resume_expired`]).
//!
//! - [`Takeover::Interrupt`] (the default, as SOL003 expects the NFVO to decide): the
//!   occurrence ends `FAILED_TEMP` with `failureKind: INTERRUPTED`, for the NFVO or an operator
//!   to retry, roll back or fail.
//! - [`Takeover::Resume`]: the occurrence is run on where its saved progress says, as a retry
//!   would (the grant it got is kept, a stack it created is updated or deleted rather than made
//!   again), by the process that takes it. It stays `PROCESSING` (or `ROLLING_BACK`) and ends
//!   as the operation ends. Each take-over is counted in the progress; past `limit` (an
//!   operation that kills whoever runs it must not go round the replicas for ever), and for an
//!   occurrence that saved no progress, it is interrupted instead.
//!
//! Either way an occurrence still stored `STARTING` (nothing was sent to the VIM: it waited
//! for an NFVO's grant, or had just been stored) ends `ROLLED_BACK`, not run, as a cancel in
//! `STARTING` does (SOL003 v3.3.1 5.4.17.3.1): the grant exchange belonged to the process that
//! died, and the NFVO may ask again.

use crate::id::{OpOccId, VnfInstanceId};
use crate::lcm::{LcmOperationStateType, VnfLcmOpOcc};
use crate::problem::ProblemDetails;

use super::operation::Progress;

pub use super::takeover_policy::{Takeover, DEFAULT_RESUME_LIMIT};

/// The decision for one occurrence whose owner went away.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// It ends `FAILED_TEMP`, `failureKind: INTERRUPTED`; `why` is said in its error when it
    /// was not the policy but the occurrence that ruled out a resume.
    Interrupt {
        /// Why it is not resumed under [`Takeover::Resume`] (`None` under
        /// [`Takeover::Interrupt`]).
        why: Option<String>,
    },
    /// Stored `STARTING` only: it ends `ROLLED_BACK`, not run.
    RollBack,
    /// Run on from `progress` (its take-overs already counted).
    Resume {
        /// The saved progress, with [`Progress::takeovers`] one more.
        progress: Box<Progress>,
    },
}

/// An occurrence a sweep left to be resumed ([`Decision::Resume`]): the caller runs
/// [`super::Lifecycle::resume_expired`] on it (as a task of its own, since it runs as long as
/// the operation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumable {
    /// The occurrence.
    pub op: OpOccId,
    /// Its instance.
    pub instance: VnfInstanceId,
}

/// What a sweep over the occurrences whose owner went away did, or leaves to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Declared interrupted (`FAILED_TEMP`), or `ROLLED_BACK` from `STARTING`, by this sweep.
    pub interrupted: Vec<OpOccId>,
    /// To be resumed by the caller ([`Takeover::Resume`]); nothing was written for them yet.
    pub resumable: Vec<Resumable>,
}

/// The progress an occurrence saved, if any (and readable).
pub(super) fn saved_progress(op: &VnfLcmOpOcc) -> Option<Progress> {
    op.progress
        .clone()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// What `policy` does with `op`, a running occurrence whose owner went away.
pub fn decide(op: &VnfLcmOpOcc, policy: Takeover) -> Decision {
    if op.operation_state == LcmOperationStateType::Starting {
        return Decision::RollBack;
    }
    let Takeover::Resume { limit } = policy else {
        return Decision::Interrupt { why: None };
    };
    let Some(mut progress) = saved_progress(op) else {
        return Decision::Interrupt {
            why: Some("it saved no progress to resume from (started by an older vnfm)".to_owned()),
        };
    };
    if progress.takeovers >= limit {
        return Decision::Interrupt {
            why: Some(format!(
                "it was taken over {} times already, the limit (`[state] resume_limit`)",
                progress.takeovers
            )),
        };
    }
    progress.takeovers += 1;
    Decision::Resume {
        progress: Box::new(progress),
    }
}

/// How many starts of one take-over may fail for want of the store or the VIM (a 5xx) before
/// the occurrence is interrupted instead ([`after_failed_start`]): so that one that can never
/// be started (an instance that does not decode) is not left running with nobody behind it.
pub const START_FAILURES: u32 = 3;

/// What is done after the start of a take-over ([`super::Lifecycle::resume_expired`], and what
/// the server does before it) was refused or failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailedStart {
    /// Another process took it first, or its owner renewed its lease after all (409): theirs.
    LeftToOthers,
    /// The store or the VIM failed (5xx): the next sweep tries again; `failed` starts of it
    /// failed so far.
    TryAgain {
        /// Failed starts so far, this one included.
        failed: u32,
    },
    /// Declare it interrupted ([`super::Lifecycle::interrupt_expired`]) with this reason: a
    /// refusal that would come again at every sweep (its package or instance is gone, the
    /// limit of take-overs), or [`START_FAILURES`] failed starts.
    Interrupt(String),
}

/// What follows a start of a take-over answered `problem`, after `earlier` failed starts of it
/// (5xx).
pub fn after_failed_start(problem: &ProblemDetails, earlier: u32) -> FailedStart {
    match problem.status {
        409 => FailedStart::LeftToOthers,
        s if s >= 500 => {
            let failed = earlier.saturating_add(1);
            if failed < START_FAILURES {
                FailedStart::TryAgain { failed }
            } else {
                FailedStart::Interrupt(format!(
                    "its start failed {failed} times: {}",
                    problem.detail
                ))
            }
        }
        _ => FailedStart::Interrupt(format!("it could not be started: {}", problem.detail)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::lcm::LcmOperationType;
    use crate::lifecycle::operation::Plan;
    use chrono::TimeZone;

    fn op(state: LcmOperationStateType, progress: Option<Progress>) -> VnfLcmOpOcc {
        let t0 = chrono::Utc.timestamp_opt(1_800_000_000, 0).unwrap();
        let mut o = VnfLcmOpOcc::new(
            OpOccId::new("op-1"),
            VnfInstanceId::new("i-1"),
            LcmOperationType::Terminate,
            t0,
        );
        o.operation_state = state;
        o.progress = progress.map(|p| serde_json::to_value(p).unwrap());
        o
    }

    const RESUME: Takeover = Takeover::Resume { limit: 2 };

    #[test]
    fn interrupt_is_the_default_and_never_resumes() {
        assert_eq!(Takeover::default(), Takeover::Interrupt);
        let o = op(
            LcmOperationStateType::Processing,
            Some(Progress::new(Plan::Terminate)),
        );
        assert_eq!(
            decide(&o, Takeover::Interrupt),
            Decision::Interrupt { why: None }
        );
    }

    #[test]
    fn starting_is_rolled_back_under_either_policy() {
        let o = op(
            LcmOperationStateType::Starting,
            Some(Progress::new(Plan::Terminate)),
        );
        assert_eq!(decide(&o, Takeover::Interrupt), Decision::RollBack);
        assert_eq!(decide(&o, RESUME), Decision::RollBack);
    }

    #[test]
    fn resume_counts_each_takeover_and_stops_at_the_limit() {
        let mut p = Progress::new(Plan::Terminate);
        for n in 1..=2 {
            let o = op(LcmOperationStateType::Processing, Some(p.clone()));
            let Decision::Resume { progress } = decide(&o, RESUME) else {
                panic!("take-over {n} not resumed");
            };
            assert_eq!(progress.takeovers, n);
            assert_eq!(progress.plan, Plan::Terminate);
            p = *progress;
        }
        let o = op(LcmOperationStateType::RollingBack, Some(p));
        let Decision::Interrupt { why: Some(why) } = decide(&o, RESUME) else {
            panic!("resumed past the limit");
        };
        assert!(
            why.contains("2 times") && why.contains("resume_limit"),
            "{why}"
        );
    }

    #[test]
    fn no_readable_progress_is_interrupted_saying_so() {
        let o = op(LcmOperationStateType::Processing, None);
        let Decision::Interrupt { why: Some(why) } = decide(&o, RESUME) else {
            panic!("resumed without progress");
        };
        assert!(why.contains("no progress"), "{why}");
        let mut o = op(LcmOperationStateType::Processing, None);
        o.progress = Some(serde_json::json!({"plan": "not a plan"}));
        assert!(matches!(
            decide(&o, RESUME),
            Decision::Interrupt { why: Some(_) }
        ));
    }

    #[test]
    fn a_failed_start_is_left_tried_again_or_interrupted() {
        let p = |status| ProblemDetails::new(status, "why");
        assert_eq!(after_failed_start(&p(409), 0), FailedStart::LeftToOthers);
        assert_eq!(
            after_failed_start(&p(503), 0),
            FailedStart::TryAgain { failed: 1 }
        );
        assert_eq!(
            after_failed_start(&p(500), START_FAILURES - 2),
            FailedStart::TryAgain {
                failed: START_FAILURES - 1
            }
        );
        let FailedStart::Interrupt(why) = after_failed_start(&p(503), START_FAILURES - 1) else {
            panic!("tried again past the limit");
        };
        assert!(why.contains("failed 3 times: why"), "{why}");
        let FailedStart::Interrupt(why) = after_failed_start(&p(404), 0) else {
            panic!("a refusal that comes again is tried again");
        };
        assert!(why.contains("could not be started: why"), "{why}");
    }
}
