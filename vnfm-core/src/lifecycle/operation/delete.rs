//! Terminate, instantiate rollback and fail: the stack deleted and awaited.

use chrono::{DateTime, Utc};

use super::actions::OpAction;
use super::helpers::chrono_of;
use super::machine::{Operation, Step};
use super::progress::Plan;
use crate::driver::{DriverError, Stack, StackAction};
use crate::lcm::InstantiationState;
use crate::lifecycle::cnf::CnfResources;
use crate::lifecycle::failure::{Failed, FailureKind};
use crate::lifecycle::plan::STACK_ID_KEY;

impl Operation {
    pub(super) fn delete_stack(&mut self) {
        match self.progress.stack_id.clone() {
            Some(id) => {
                self.step = Step::DeleteSent;
                self.next = Some(OpAction::DeleteStack(id));
            }
            None if self.progress.plan.is_cnf() => self.cnf_delete(),
            None => {
                self.progress.deleted = true;
                self.finish_deleted();
            }
        }
    }

    pub(super) fn on_delete_sent(&mut self, r: Result<(), DriverError>) {
        match r {
            Ok(()) => {
                let Some(id) = self.progress.stack_id.clone() else {
                    return self.internal("a delete without a stack");
                };
                self.step = Step::DeleteWait {
                    deadline: self.now + chrono_of(self.cfg.stack_timeout),
                };
                self.next = Some(OpAction::ShowStack(id));
            }
            Err(e) if e.is_not_found() => self.deleted(),
            Err(e) => self.fail_driver(&e),
        }
    }

    /// Polled like a create until Heat reports the stack gone (not found, or
    /// `DELETE_COMPLETE`): Heat answers the DELETE at once and works on afterwards.
    pub(super) fn on_delete_wait(
        &mut self,
        deadline: DateTime<Utc>,
        r: Result<Stack, DriverError>,
    ) {
        let stack = match r {
            Ok(s) => s,
            Err(e) if e.is_not_found() => return self.deleted(),
            Err(e) => return self.fail_driver(&e),
        };
        let status = stack.stack_status;
        if status.is_in_progress() {
            if self.now >= deadline {
                return self.fail(Failed::new(
                    FailureKind::Backend,
                    "stack delete timed out",
                    format!(
                        "stack {} still {status} after {}s: {}",
                        stack.id,
                        self.cfg.stack_timeout.as_secs(),
                        stack.stack_status_reason
                    ),
                ));
            }
            self.wait_until(deadline);
            self.step = Step::DeleteWait { deadline };
            return;
        }
        if status.action == StackAction::Delete && status.is_complete() {
            return self.deleted();
        }
        self.fail(Failed::new(
            FailureKind::StackFailed,
            "stack delete failed",
            format!(
                "stack {} is {status}: {}",
                stack.id, stack.stack_status_reason
            ),
        ));
    }

    pub(super) fn deleted(&mut self) {
        self.progress.deleted = true;
        self.finish_deleted();
    }

    pub(super) fn finish_deleted(&mut self) {
        let mut new = self.before.clone();
        if matches!(self.progress.plan, Plan::Terminate | Plan::CnfTerminate) {
            new.instantiation_state = Some(InstantiationState::NotInstantiated);
            new.instantiated_vnf_info = None;
        }
        CnfResources::clear(&mut new);
        if let Some(m) = new.metadata.as_mut() {
            m.remove(STACK_ID_KEY);
        }
        self.progress.stack_id = None;
        self.finish(Ok(new));
    }
}
