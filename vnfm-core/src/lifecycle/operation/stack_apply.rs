//! One stack apply: the stack created or updated, then shown every poll interval until it
//! is no longer in progress, or the stack timeout.
//!
//! [`StackApply`] is a part of [`Operation`](super::Operation) with its own `handle_*` /
//! `poll_*`: the coordinator creates one for every apply of the reselection machine
//! ([`crate::reselect::Action::ApplyStack`]) and for the restore of the VNFCs that stay, routes
//! [`OpEvent::StackCreated`](super::OpEvent::StackCreated),
//! [`OpEvent::StackUpdated`](super::OpEvent::StackUpdated),
//! [`OpEvent::Stack`](super::OpEvent::Stack) and its timer to it, saves the stack's id it hands
//! out ([`StackApply::poll_saved`]) and reads its end from [`StackApply::poll_end`].

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::actions::OpAction;
use super::helpers::{chrono_of, internal_error};
use crate::driver::{CreateStack, DriverError, Stack, StackAction, UpdateStack};
use crate::id::StackId;
use crate::lifecycle::failure::{Failed, FailureKind};
use crate::lifecycle::stack;

/// How a stack apply ended.
#[derive(Debug)]
pub(super) enum StackEnd {
    /// The stack reached `*_COMPLETE` (not a rollback's).
    Complete,
    /// The stack failed, with Heat's reason.
    Failed(String),
    /// Heat rolled the stack back, with its reason.
    RolledBack(String),
    /// Heat refused the create or update.
    Refused(DriverError),
    /// The stack was still in progress at the stack timeout; the failure names the timeout.
    TimedOut(Failed),
    /// The stack could not be shown, or an event came out of turn.
    Error(Failed),
}

/// What the part waits for.
#[derive(Debug)]
enum Phase {
    /// The create or update is out (or about to be).
    Applying,
    /// The stack is shown until it is no longer in progress, or until `deadline`.
    Waiting {
        id: StackId,
        deadline: DateTime<Utc>,
    },
}

/// The apply of one stack, and the wait until it is no longer in progress.
#[derive(Debug)]
pub(super) struct StackApply {
    /// How long the stack has to leave `*_IN_PROGRESS` once accepted.
    timeout: Duration,
    poll_interval: Duration,
    phase: Phase,
    next: Option<OpAction>,
    wake: Option<DateTime<Utc>>,
    saved: Option<StackId>,
    end: Option<StackEnd>,
}

impl StackApply {
    /// A stack created by `create`; the first action sends it.
    pub(super) fn create(create: CreateStack, timeout: Duration, poll_interval: Duration) -> Self {
        Self::new(OpAction::CreateStack(create), timeout, poll_interval)
    }

    /// A stack updated by `update`; the first action sends it.
    pub(super) fn update(update: UpdateStack, timeout: Duration, poll_interval: Duration) -> Self {
        Self::new(OpAction::UpdateStack(update), timeout, poll_interval)
    }

    fn new(apply: OpAction, timeout: Duration, poll_interval: Duration) -> Self {
        Self {
            timeout,
            poll_interval,
            phase: Phase::Applying,
            next: Some(apply),
            wake: None,
            saved: None,
            end: None,
        }
    }

    /// The next action ([`OpAction::CreateStack`], [`OpAction::UpdateStack`],
    /// [`OpAction::ShowStack`]).
    pub(super) fn poll_action(&mut self) -> Option<OpAction> {
        self.next.take()
    }

    /// When to call [`StackApply::handle_timeout`], while it waits for the stack.
    pub(super) fn poll_timeout(&self) -> Option<DateTime<Utc>> {
        self.wake
    }

    /// The id of the stack Heat accepted, once: the coordinator saves it at once (a rollback
    /// must know the stack even if the process dies now).
    pub(super) fn poll_saved(&mut self) -> Option<StackId> {
        self.saved.take()
    }

    /// How the apply ended, once it is over.
    pub(super) fn poll_end(&mut self) -> Option<StackEnd> {
        self.end.take()
    }

    /// The create or update answered: accepted, the stack is shown until the stack timeout
    /// from `now`; refused, it ends.
    pub(super) fn handle_applied(&mut self, r: Result<StackId, DriverError>, now: DateTime<Utc>) {
        if !matches!(self.phase, Phase::Applying) {
            return self.out_of_turn("a stack apply answered while its stack is awaited");
        }
        match r {
            Ok(id) => {
                self.saved = Some(id.clone());
                self.next = Some(OpAction::ShowStack(id.clone()));
                self.phase = Phase::Waiting {
                    id,
                    deadline: now + chrono_of(self.timeout),
                };
            }
            Err(e) => self.end = Some(StackEnd::Refused(e)),
        }
    }

    /// The stack shown: still in progress, it is shown again after the poll interval (or
    /// ends at the deadline); else it ends as Heat says.
    pub(super) fn handle_stack(&mut self, r: Result<Stack, DriverError>, now: DateTime<Utc>) {
        let Phase::Waiting { deadline, .. } = &self.phase else {
            return self.out_of_turn("a stack shown before its apply answered");
        };
        let deadline = *deadline;
        let stack = match r {
            Ok(s) => s,
            Err(e) => return self.end = Some(StackEnd::Error(Failed::driver(&e))),
        };
        if stack.stack_status.is_in_progress() {
            if now >= deadline {
                self.end = Some(StackEnd::TimedOut(Failed::new(
                    FailureKind::Backend,
                    "stack timed out",
                    format!(
                        "stack {} still {} after {}s",
                        stack.id,
                        stack.stack_status,
                        self.timeout.as_secs()
                    ),
                )));
            } else {
                self.wake = Some((now + chrono_of(self.poll_interval)).min(deadline));
            }
            return;
        }
        self.end = Some(if stack::succeeded(&stack) {
            StackEnd::Complete
        } else if stack.stack_status.action == StackAction::Rollback {
            StackEnd::RolledBack(stack.stack_status_reason)
        } else {
            StackEnd::Failed(stack.stack_status_reason)
        });
    }

    /// Time passed: the stack is shown again once the poll interval is over.
    pub(super) fn handle_timeout(&mut self, now: DateTime<Utc>) {
        if self.wake.is_none_or(|t| t > now) {
            return;
        }
        self.wake = None;
        if let Phase::Waiting { id, .. } = &self.phase {
            self.next = Some(OpAction::ShowStack(id.clone()));
        }
    }

    fn out_of_turn(&mut self, what: &str) {
        self.end = Some(StackEnd::Error(internal_error(what)));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use chrono::TimeZone;

    use super::*;
    use crate::driver::{StackState, TemplateBundle};

    const TIMEOUT: Duration = Duration::from_secs(60);
    const POLL: Duration = Duration::from_secs(25);

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    fn id() -> StackId {
        StackId::from("s-1")
    }

    fn created() -> StackApply {
        let create = CreateStack::new("vnf-a", TemplateBundle::default(), Default::default());
        StackApply::create(create, TIMEOUT, POLL)
    }

    fn updated() -> StackApply {
        let update = UpdateStack {
            id: id(),
            parameters: Default::default(),
            template: Some(TemplateBundle::default()),
        };
        StackApply::update(update, TIMEOUT, POLL)
    }

    fn stack(action: StackAction, state: StackState, reason: &str) -> Stack {
        Stack {
            id: id(),
            stack_name: "vnf-a".to_owned(),
            stack_status: crate::driver::StackStatus::new(action, state),
            stack_status_reason: reason.to_owned(),
            parameters: Default::default(),
            outputs: Vec::new(),
        }
    }

    fn in_progress() -> Stack {
        stack(StackAction::Create, StackState::InProgress, "")
    }

    /// The apply sent and accepted at `t(0)`: the stack is shown next.
    fn accepted(mut s: StackApply) -> StackApply {
        assert!(s.poll_action().is_some());
        s.handle_applied(Ok(id()), t(0));
        assert!(matches!(s.poll_action(), Some(OpAction::ShowStack(i)) if i == id()));
        s
    }

    fn failure(end: Option<StackEnd>) -> Failed {
        match end {
            Some(StackEnd::TimedOut(f) | StackEnd::Error(f)) => f,
            other => panic!("not a failure: {other:?}"),
        }
    }

    #[test]
    fn a_create_accepted_is_polled_while_in_progress_until_complete() {
        let mut s = created();
        assert!(matches!(s.poll_action(), Some(OpAction::CreateStack(c)) if c.name == "vnf-a"));
        assert!(s.poll_action().is_none());
        assert_eq!(s.poll_timeout(), None);
        s.handle_applied(Ok(id()), t(0));
        // The id is handed out once, to be saved at once.
        assert_eq!(s.poll_saved(), Some(id()));
        assert_eq!(s.poll_saved(), None);
        assert!(matches!(s.poll_action(), Some(OpAction::ShowStack(i)) if i == id()));
        assert!(s.poll_end().is_none());
        s.handle_stack(Ok(in_progress()), t(1));
        assert!(s.poll_end().is_none());
        assert!(s.poll_action().is_none());
        assert_eq!(s.poll_timeout(), Some(t(26)));
        s.handle_timeout(t(25));
        assert!(s.poll_action().is_none());
        s.handle_timeout(t(26));
        assert_eq!(s.poll_timeout(), None);
        assert!(matches!(s.poll_action(), Some(OpAction::ShowStack(i)) if i == id()));
        let done = stack(StackAction::Create, StackState::Complete, "done");
        s.handle_stack(Ok(done), t(27));
        assert!(matches!(s.poll_end(), Some(StackEnd::Complete)));
        assert!(s.poll_action().is_none());
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn an_update_that_fails_ends_with_heats_reason() {
        let mut s = updated();
        assert!(matches!(s.poll_action(), Some(OpAction::UpdateStack(u)) if u.id == id()));
        s.handle_applied(Ok(id()), t(0));
        assert_eq!(s.poll_saved(), Some(id()));
        assert!(s.poll_action().is_some());
        let failed = stack(
            StackAction::Update,
            StackState::Failed,
            "No valid host was found",
        );
        s.handle_stack(Ok(failed), t(3));
        match s.poll_end() {
            Some(StackEnd::Failed(reason)) => assert_eq!(reason, "No valid host was found"),
            other => panic!("not failed: {other:?}"),
        }
    }

    #[test]
    fn a_stack_heat_rolled_back_ends_rolled_back_with_its_reason() {
        let mut s = accepted(created());
        let back = stack(
            StackAction::Rollback,
            StackState::Complete,
            "quota exceeded",
        );
        s.handle_stack(Ok(back), t(3));
        match s.poll_end() {
            Some(StackEnd::RolledBack(reason)) => assert_eq!(reason, "quota exceeded"),
            other => panic!("not rolled back: {other:?}"),
        }
    }

    #[test]
    fn an_apply_heat_refuses_ends_refused_with_nothing_saved() {
        let mut s = created();
        assert!(s.poll_action().is_some());
        let e = DriverError::AlreadyExists {
            driver: "heat",
            what: "stack vnf-a".to_owned(),
        };
        s.handle_applied(Err(e), t(0));
        assert_eq!(s.poll_saved(), None);
        assert!(s.poll_action().is_none());
        assert!(matches!(
            s.poll_end(),
            Some(StackEnd::Refused(DriverError::AlreadyExists { .. }))
        ));
    }

    #[test]
    fn a_stack_that_cannot_be_shown_ends_with_the_drivers_error() {
        let mut s = accepted(created());
        let e = DriverError::Unavailable {
            driver: "heat",
            message: "503 from heat-api".to_owned(),
        };
        s.handle_stack(Err(e), t(1));
        let f = failure(s.poll_end());
        assert!(f.detail.contains("503 from heat-api"), "{f:?}");
    }

    #[test]
    fn the_stack_timeout_wakes_at_the_deadline_and_ends_naming_the_timeout() {
        let mut s = accepted(created());
        s.handle_stack(Ok(in_progress()), t(50));
        // The poll interval would wake it at 75 s: the deadline (60 s) comes first.
        assert_eq!(s.poll_timeout(), Some(t(60)));
        s.handle_timeout(t(59));
        assert!(s.poll_action().is_none());
        assert_eq!(s.poll_timeout(), Some(t(60)));
        s.handle_timeout(t(60));
        assert!(matches!(s.poll_action(), Some(OpAction::ShowStack(_))));
        // Still in progress at the deadline: over.
        s.handle_stack(Ok(in_progress()), t(60));
        assert!(s.poll_action().is_none());
        assert_eq!(s.poll_timeout(), None);
        match s.poll_end() {
            Some(StackEnd::TimedOut(f)) => {
                assert_eq!(f.kind, FailureKind::Backend);
                assert_eq!(f.title, "stack timed out");
                assert_eq!(f.detail, "stack s-1 still CREATE_IN_PROGRESS after 60s");
            }
            other => panic!("not timed out: {other:?}"),
        }
    }

    #[test]
    fn a_stack_done_when_shown_after_the_deadline_is_not_timed_out() {
        let mut s = accepted(created());
        s.handle_stack(Ok(in_progress()), t(59));
        assert_eq!(s.poll_timeout(), Some(t(60)));
        // Woken after the deadline: the stack is shown once more, not given up unseen.
        s.handle_timeout(t(70));
        assert!(matches!(s.poll_action(), Some(OpAction::ShowStack(_))));
        assert!(s.poll_end().is_none());
        let done = stack(StackAction::Create, StackState::Complete, "");
        s.handle_stack(Ok(done), t(70));
        assert!(matches!(s.poll_end(), Some(StackEnd::Complete)));
    }

    #[test]
    fn events_out_of_turn_end_it_with_an_internal_error() {
        // A stack shown before the apply answered.
        let mut s = created();
        assert!(s.poll_action().is_some());
        s.handle_stack(Ok(in_progress()), t(0));
        let f = failure(s.poll_end());
        assert_eq!(f.title, "internal error");
        assert!(f.detail.contains("before its apply answered"), "{f:?}");
        // An apply answered twice.
        let mut s = accepted(created());
        assert_eq!(s.poll_saved(), Some(id()));
        s.handle_applied(Ok(StackId::from("s-2")), t(1));
        assert_eq!(s.poll_saved(), None);
        let f = failure(s.poll_end());
        assert_eq!(f.title, "internal error");
        // A timeout with no wait running does nothing.
        let mut s = created();
        s.handle_timeout(t(100));
        assert!(matches!(s.poll_action(), Some(OpAction::CreateStack(_))));
        assert!(s.poll_end().is_none());
    }
}
