//! [`Occupancy`]: which VNF instances take no other operation now, as a process sees it, and
//! the [`OperationEvent`]s that tell an alert handler when an instance is free again.
//!
//! Sans-IO: it is fed what the process claims, the occurrences it sees committed (its own, and
//! those of other processes it reads back from the store) and what it finds over, and hands
//! out events. The store enforces one operation per instance across processes (conditional
//! commits, see [`super::Lifecycle`]); this is the view a long-running process (`vnfm serve`)
//! keeps so that its heal windows wait while an instance is taken, and run once it is free.
//!
//! The rules (SOL003): an occurrence `STARTING`, `PROCESSING` or `ROLLING_BACK` takes its
//! instance; one in `FAILED_TEMP` still takes it (it is not over until it is retried to an end,
//! failed or rolled back); `COMPLETED`, `FAILED` and `ROLLED_BACK` end it.

use std::collections::BTreeMap;

use crate::id::{OpOccId, VnfInstanceId};
use crate::lcm::{LcmOperationStateType, VnfLcmOpOcc};

/// What takes an instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Occupant {
    /// A request of this process, before its occurrence is stored.
    Claimed,
    /// A running occurrence.
    Running(OpOccId),
    /// An occurrence that stopped without ending (`FAILED_TEMP`).
    Stopped(OpOccId),
}

/// What changed for an instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperationEvent {
    /// The instance is taken (it was free): an alert handler marks it busy.
    Taken {
        /// The instance.
        instance: VnfInstanceId,
    },
    /// The operation on the instance is over, or never started: the instance takes the next
    /// one (an alert handler marks it idle; a heal that waited for it is due).
    Ended {
        /// The instance.
        instance: VnfInstanceId,
        /// The occurrence that ended, if one was stored.
        op: Option<OpOccId>,
        /// Its final state, if one was stored.
        state: Option<LcmOperationStateType>,
    },
}

/// See the [module docs](self).
#[derive(Clone, Debug, Default)]
pub struct Occupancy {
    by_instance: BTreeMap<VnfInstanceId, Occupant>,
}

impl Occupancy {
    /// Nothing taken.
    pub fn new() -> Self {
        Self::default()
    }

    /// What takes `instance`, if anything.
    pub fn occupant(&self, instance: &VnfInstanceId) -> Option<&Occupant> {
        self.by_instance.get(instance)
    }

    /// Whether `instance` takes no other operation now.
    pub fn is_taken(&self, instance: &VnfInstanceId) -> bool {
        self.by_instance.contains_key(instance)
    }

    /// A request of this process takes `instance` before its occurrence exists.
    ///
    /// # Errors
    /// What takes it, when it is taken.
    pub fn claim(&mut self, instance: &VnfInstanceId) -> Result<OperationEvent, Occupant> {
        if let Some(o) = self.by_instance.get(instance) {
            return Err(o.clone());
        }
        self.by_instance.insert(instance.clone(), Occupant::Claimed);
        Ok(OperationEvent::Taken {
            instance: instance.clone(),
        })
    }

    /// An occurrence was committed (by this process, or read back from the store): what it
    /// changes for its instance.
    pub fn observe(&mut self, op: &VnfLcmOpOcc) -> Option<OperationEvent> {
        let instance = &op.vnf_instance_id;
        if op.is_terminal() {
            // Only the occurrence that takes the instance ends it (a late commit of an older
            // one, or of another process, does not free it).
            let ends = match self.by_instance.get(instance) {
                Some(Occupant::Running(id) | Occupant::Stopped(id)) => *id == op.id,
                Some(Occupant::Claimed) => true,
                None => false,
            };
            if !ends {
                return None;
            }
            self.by_instance.remove(instance);
            return Some(OperationEvent::Ended {
                instance: instance.clone(),
                op: Some(op.id.clone()),
                state: Some(op.operation_state),
            });
        }
        let occupant = if op.operation_state == LcmOperationStateType::FailedTemp {
            Occupant::Stopped(op.id.clone())
        } else {
            Occupant::Running(op.id.clone())
        };
        let was = self.by_instance.insert(instance.clone(), occupant);
        was.is_none().then(|| OperationEvent::Taken {
            instance: instance.clone(),
        })
    }

    /// An occurrence that is not over, found in the store (e.g. another program's
    /// `FAILED_TEMP`), takes its instance.
    pub fn hold(&mut self, op: &VnfLcmOpOcc) -> Option<OperationEvent> {
        if op.is_terminal() {
            return None;
        }
        self.observe(op)
    }

    /// Frees `instance` whatever took it (a request that did not start, an instance gone, a
    /// heal with nothing left to do).
    pub fn release(&mut self, instance: &VnfInstanceId) -> Option<OperationEvent> {
        self.by_instance
            .remove(instance)
            .map(|_| OperationEvent::Ended {
                instance: instance.clone(),
                op: None,
                state: None,
            })
    }

    /// The stopped occurrences (`FAILED_TEMP`) that take an instance: another process may end
    /// them (`vnfm op fail`, `rollback`, `retry`); read them back and [`Occupancy::observe`]
    /// them, or [`Occupancy::gone`] when they no longer exist.
    pub fn stopped(&self) -> Vec<(VnfInstanceId, OpOccId)> {
        self.by_instance
            .iter()
            .filter_map(|(i, o)| match o {
                Occupant::Stopped(op) => Some((i.clone(), op.clone())),
                _ => None,
            })
            .collect()
    }

    /// The occurrence `op` that took `instance` no longer exists (its instance was deleted).
    pub fn gone(&mut self, instance: &VnfInstanceId, op: &OpOccId) -> Option<OperationEvent> {
        let held = matches!(
            self.by_instance.get(instance),
            Some(Occupant::Running(id) | Occupant::Stopped(id)) if id == op
        );
        if !held {
            return None;
        }
        self.by_instance.remove(instance);
        Some(OperationEvent::Ended {
            instance: instance.clone(),
            op: Some(op.clone()),
            state: None,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::lcm::LcmOperationType;

    fn op(id: &str, inst: &str, state: LcmOperationStateType) -> VnfLcmOpOcc {
        let mut o = VnfLcmOpOcc::new(
            id,
            inst,
            LcmOperationType::Heal,
            chrono::DateTime::UNIX_EPOCH,
        );
        o.enter(state, chrono::DateTime::UNIX_EPOCH);
        o
    }

    #[test]
    fn an_operation_takes_its_instance_until_it_ends_and_failed_temp_is_not_an_end() {
        use LcmOperationStateType as S;
        let mut o = Occupancy::new();
        let i = VnfInstanceId::from("i");
        assert!(o.claim(&i).is_ok());
        assert_eq!(o.claim(&i), Err(Occupant::Claimed), "one at a time");
        assert_eq!(o.observe(&op("a", "i", S::Starting)), None, "still taken");
        assert_eq!(o.occupant(&i), Some(&Occupant::Running("a".into())));
        assert_eq!(o.observe(&op("a", "i", S::FailedTemp)), None);
        assert_eq!(o.stopped(), vec![(i.clone(), OpOccId::from("a"))]);
        // A late terminal commit of another occurrence does not free it.
        assert_eq!(o.observe(&op("z", "i", S::Completed)), None);
        assert!(o.is_taken(&i));
        assert_eq!(
            o.observe(&op("a", "i", S::Failed)),
            Some(OperationEvent::Ended {
                instance: i.clone(),
                op: Some("a".into()),
                state: Some(S::Failed)
            })
        );
        assert!(!o.is_taken(&i));
    }

    #[test]
    fn another_programs_occurrence_takes_the_instance_and_its_end_or_removal_frees_it() {
        use LcmOperationStateType as S;
        let mut o = Occupancy::new();
        let i = VnfInstanceId::from("i");
        assert_eq!(
            o.hold(&op("b", "i", S::FailedTemp)),
            Some(OperationEvent::Taken {
                instance: i.clone()
            })
        );
        assert_eq!(o.hold(&op("c", "i", S::Completed)), None);
        assert!(o.claim(&i).is_err());
        assert_eq!(o.gone(&i, &"x".into()), None);
        assert!(o.gone(&i, &"b".into()).is_some());
        assert!(o.claim(&i).is_ok());
        assert!(
            o.release(&i).is_some(),
            "a request that did not start frees it"
        );
    }
}
