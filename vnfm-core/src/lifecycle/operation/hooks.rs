//! The end-of-operation hooks of a plan's point ([`HookPoint`]): each hook configured for the
//! point that has not succeeded yet (a retry does not run a hook again that did), one at a
//! time, in their order; the first that fails ends the run.
//!
//! [`Hooks`] is a part of [`Operation`](super::Operation) with its own `handle_*` / `poll_*`:
//! the coordinator routes [`OpEvent::Hook`](super::OpEvent::Hook) to it, records each outcome
//! in the occurrence (`hooks`), and reads the end from [`Hooks::poll_end`].

use std::collections::{BTreeSet, VecDeque};

use super::actions::OpAction;
use crate::id::OpOccId;
use crate::lcm::{HookOutcome, VnfInstance};
use crate::lifecycle::failure::{Failed, FailureKind};
use crate::lifecycle::hook::{HookCall, HookPoint, HookSpec};

/// The hooks of one point still to run.
#[derive(Debug)]
pub(super) struct Hooks {
    point: HookPoint,
    todo: VecDeque<String>,
    /// The hook out (its [`OpAction::RunHook`] was handed out).
    running: Option<String>,
    end: Option<Result<(), Failed>>,
}

impl Hooks {
    /// The hooks of `specs` at `point`, but those `recorded` as succeeded there.
    pub(super) fn new(point: HookPoint, specs: &[HookSpec], recorded: &[HookOutcome]) -> Self {
        let done: BTreeSet<&str> = recorded
            .iter()
            .filter(|h| h.succeeded && h.point == point.as_str())
            .map(|h| h.name.as_str())
            .collect();
        let todo: VecDeque<String> = specs
            .iter()
            .filter(|h| h.points.contains(&point) && !done.contains(h.name.as_str()))
            .map(|h| h.name.clone())
            .collect();
        let end = todo.is_empty().then_some(Ok(()));
        Self {
            point,
            todo,
            running: None,
            end,
        }
    }

    /// The point the hooks run at.
    pub(super) fn point(&self) -> HookPoint {
        self.point
    }

    /// The next hook to run on `instance` ([`OpAction::RunHook`]); `None` while one runs.
    pub(super) fn poll_action(
        &mut self,
        op_occ_id: &OpOccId,
        instance: &VnfInstance,
    ) -> Option<OpAction> {
        if self.running.is_some() || self.end.is_some() {
            return None;
        }
        let name = self.todo.pop_front()?;
        self.running = Some(name.clone());
        Some(OpAction::RunHook(Box::new(HookCall {
            name,
            point: self.point,
            op_occ_id: op_occ_id.clone(),
            instance: instance.clone(),
        })))
    }

    /// What the hook out did (`Ok`) or why it failed: its outcome goes into `recorded`
    /// (replacing an earlier one of the hook at this point).
    pub(super) fn handle_result(
        &mut self,
        r: Result<String, String>,
        recorded: &mut Vec<HookOutcome>,
    ) {
        let Some(name) = self.running.take() else {
            return;
        };
        let point = self.point.as_str();
        recorded.retain(|h| !(h.name == name && h.point == point));
        recorded.push(HookOutcome {
            name: name.clone(),
            point: point.to_owned(),
            succeeded: r.is_ok(),
            detail: match &r {
                Ok(d) | Err(d) => d.clone(),
            },
        });
        if let Err(e) = r {
            // The hooks after it do not run.
            self.todo.clear();
            self.end = Some(Err(Failed::new(
                FailureKind::Hook,
                "hook failed",
                format!("hook {name} ({point}) failed: {e}"),
            )));
        } else if self.todo.is_empty() {
            self.end = Some(Ok(()));
        }
    }

    /// Every hook succeeded, or the failure of the one that did not.
    pub(super) fn poll_end(&mut self) -> Option<Result<(), Failed>> {
        self.end.take()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn spec(name: &str, points: &[HookPoint]) -> HookSpec {
        HookSpec {
            name: name.to_owned(),
            points: points.to_vec(),
        }
    }

    fn outcome(name: &str, point: &str, succeeded: bool) -> HookOutcome {
        HookOutcome {
            name: name.to_owned(),
            point: point.to_owned(),
            succeeded,
            detail: String::new(),
        }
    }

    fn ran(h: &mut Hooks) -> Option<String> {
        let op = OpOccId::new("op-1");
        let inst = VnfInstance::new("inst-1", "vnfd-1");
        match h.poll_action(&op, &inst)? {
            OpAction::RunHook(call) => {
                assert_eq!(call.op_occ_id, op);
                assert_eq!(call.instance, inst);
                assert_eq!(call.point, h.point());
                Some(call.name)
            }
            other => panic!("not a hook: {other:?}"),
        }
    }

    #[test]
    fn runs_the_point_s_hooks_in_order_one_at_a_time_skipping_those_that_succeeded() {
        let specs = [
            spec("dns", &[HookPoint::ScaleEnd, HookPoint::InstantiateEnd]),
            spec("lb", &[HookPoint::ScaleEnd]),
            spec("cmdb", &[HookPoint::ScaleEnd]),
            spec("label", &[HookPoint::HealEnd]),
        ];
        let mut recorded = vec![
            outcome("dns", "scale_end", true),
            outcome("lb", "scale_end", false),
            outcome("cmdb", "instantiate_end", true),
        ];
        let mut h = Hooks::new(HookPoint::ScaleEnd, &specs, &recorded);
        assert!(h.poll_end().is_none());
        assert_eq!(ran(&mut h).as_deref(), Some("lb"));
        assert_eq!(ran(&mut h), None, "one hook at a time");
        h.handle_result(Ok("lb updated".into()), &mut recorded);
        assert!(h.poll_end().is_none(), "cmdb is still to run");
        assert_eq!(ran(&mut h).as_deref(), Some("cmdb"));
        h.handle_result(Ok("recorded".into()), &mut recorded);
        assert!(matches!(h.poll_end(), Some(Ok(()))));
        assert_eq!(ran(&mut h), None);
        // The failed lb outcome was replaced; cmdb at instantiate_end is kept.
        let lb: Vec<_> = recorded.iter().filter(|o| o.name == "lb").collect();
        assert_eq!(lb.len(), 1);
        assert!(lb[0].succeeded);
        assert_eq!(lb[0].detail, "lb updated");
        assert_eq!(recorded.len(), 4);
    }

    #[test]
    fn the_first_failure_ends_it_and_is_recorded() {
        let specs = [
            spec("a", &[HookPoint::HealEnd]),
            spec("b", &[HookPoint::HealEnd]),
        ];
        let mut recorded = Vec::new();
        let mut h = Hooks::new(HookPoint::HealEnd, &specs, &recorded);
        assert_eq!(ran(&mut h).as_deref(), Some("a"));
        h.handle_result(Err("boom".into()), &mut recorded);
        let f = match h.poll_end() {
            Some(Err(f)) => f,
            other => panic!("expected a failure, got {other:?}"),
        };
        assert_eq!(f.kind, FailureKind::Hook);
        assert_eq!(f.detail, "hook a (heal_end) failed: boom");
        assert_eq!(ran(&mut h), None, "b does not run");
        assert_eq!(
            recorded,
            vec![HookOutcome {
                detail: "boom".into(),
                ..outcome("a", "heal_end", false)
            }]
        );
    }

    #[test]
    fn no_hook_at_the_point_ends_at_once() {
        let specs = [spec("a", &[HookPoint::HealEnd])];
        let mut h = Hooks::new(HookPoint::TerminateStart, &specs, &[]);
        assert!(matches!(h.poll_end(), Some(Ok(()))));
        assert_eq!(ran(&mut h), None);
    }
}
