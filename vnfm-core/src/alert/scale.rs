//! Auto-scale cooldown, sans-IO: a [`super::Decision::Scale`] in through
//! [`ScaleCooldown::admit`] (with `now`), a [`ScaleJob`] or an [`IgnoreReason::Cooldown`] out.
//!
//! Per (instance, aspect), whatever the direction: after a scale was admitted, every other
//! scale of the same (instance, aspect) within `scale_cooldown` seconds is ignored, so that
//! the new VNFC can boot and the monitored load settle before the next step (and a flapping
//! alert pair cannot scale out and in back to back). Each admitted scale is exactly one step
//! and automatic (`isAutomaticInvocation: true`). Memory holds only the (instance, aspect)
//! pairs still cooling down: older entries are dropped on every call.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::id::VnfInstanceId;
use crate::lcm::{ScaleType, ScaleVnfRequest};
use crate::lifecycle::OperationOptions;

use super::judge::IgnoreReason;

/// One auto-scale to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleJob {
    /// The VNF instance.
    pub instance: VnfInstanceId,
    /// The SOL003 request: `type`, `aspectId`, one step.
    pub request: ScaleVnfRequest,
}

impl ScaleJob {
    /// The operation options: `isAutomaticInvocation` true.
    pub fn options(&self) -> OperationOptions {
        OperationOptions {
            automatic: true,
            ..OperationOptions::default()
        }
    }
}

/// A scale that was admitted, remembered until its cooldown ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastScale {
    /// The VNF instance.
    pub instance: VnfInstanceId,
    /// The aspect.
    pub aspect: String,
    /// When it was admitted.
    pub at: DateTime<Utc>,
}

/// The persistent state of a [`ScaleCooldown`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleCooldownState {
    /// Scales still cooling down.
    pub last: Vec<LastScale>,
}

/// The cooldown of auto-scale per (instance, aspect); see the module docs.
#[derive(Clone, Debug)]
pub struct ScaleCooldown {
    cooldown: TimeDelta,
    last: BTreeMap<(VnfInstanceId, String), DateTime<Utc>>,
}

impl ScaleCooldown {
    /// A cooldown of `cooldown_secs` seconds (0: none).
    pub fn new(cooldown_secs: u64) -> Self {
        Self {
            cooldown: i64::try_from(cooldown_secs)
                .ok()
                .and_then(TimeDelta::try_seconds)
                .unwrap_or(TimeDelta::MAX),
            last: BTreeMap::new(),
        }
    }

    /// Admits a scale of `aspect` of `instance` at `now`: the one-step job to run (and the
    /// cooldown starts), or [`IgnoreReason::Cooldown`] with the seconds left.
    ///
    /// # Errors
    /// [`IgnoreReason::Cooldown`] within the cooldown of the last admitted scale.
    pub fn admit(
        &mut self,
        instance: &VnfInstanceId,
        aspect: &str,
        type_: ScaleType,
        now: DateTime<Utc>,
    ) -> Result<ScaleJob, IgnoreReason> {
        self.expire(now);
        let key = (instance.clone(), aspect.to_owned());
        if let Some(at) = self.last.get(&key) {
            let ends = at
                .checked_add_signed(self.cooldown)
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            let left = ends.signed_duration_since(now);
            // round up: 0.2 s left is reported as 1 s, never as 0
            let remaining_secs =
                u64::try_from(left.num_seconds()).unwrap_or(0) + u64::from(left.subsec_nanos() > 0);
            return Err(IgnoreReason::Cooldown {
                instance: instance.clone(),
                aspect: aspect.to_owned(),
                remaining_secs,
            });
        }
        self.last.insert(key, now);
        Ok(ScaleJob {
            instance: instance.clone(),
            request: ScaleVnfRequest::new(type_, aspect).with_number_of_steps(1),
        })
    }

    /// Ends the cooldown of `aspect` of `instance` (e.g. the admitted scale could not start);
    /// returns whether one was running.
    pub fn reset(&mut self, instance: &VnfInstanceId, aspect: &str) -> bool {
        self.last
            .remove(&(instance.clone(), aspect.to_owned()))
            .is_some()
    }

    /// How many (instance, aspect) pairs are remembered.
    pub fn remembered(&self) -> usize {
        self.last.len()
    }

    /// The state, to persist.
    pub fn snapshot(&self) -> ScaleCooldownState {
        ScaleCooldownState {
            last: self
                .last
                .iter()
                .map(|((instance, aspect), at)| LastScale {
                    instance: instance.clone(),
                    aspect: aspect.clone(),
                    at: *at,
                })
                .collect(),
        }
    }

    /// Replaces the state with `state`.
    pub fn restore(&mut self, state: ScaleCooldownState) {
        self.last = state
            .last
            .into_iter()
            .map(|l| ((l.instance, l.aspect), l.at))
            .collect();
    }

    fn expire(&mut self, now: DateTime<Utc>) {
        let cooldown = self.cooldown;
        self.last.retain(|_, at| {
            at.checked_add_signed(cooldown)
                .is_none_or(|ends| ends > now)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(ms: i64) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(1_800_000_000_000 + ms).unwrap()
    }

    #[test]
    fn one_step_then_cooldown_per_instance_and_aspect() {
        let mut c = ScaleCooldown::new(300);
        let i = VnfInstanceId::new("i");
        let job = c.admit(&i, "A", ScaleType::ScaleOut, t(0)).unwrap();
        assert_eq!(job.instance, i);
        assert_eq!(job.request.type_, ScaleType::ScaleOut);
        assert_eq!(job.request.aspect_id, "A");
        assert_eq!(job.request.number_of_steps, Some(1));
        assert!(job.options().automatic);
        assert_eq!(
            serde_json::to_value(&job.request).unwrap(),
            serde_json::json!({"type": "SCALE_OUT", "aspectId": "A", "numberOfSteps": 1})
        );

        // a repeat within the cooldown, either direction, is ignored with the time left
        let r = c
            .admit(&i, "A", ScaleType::ScaleIn, t(100_000))
            .unwrap_err();
        assert_eq!(
            r,
            IgnoreReason::Cooldown {
                instance: i.clone(),
                aspect: "A".into(),
                remaining_secs: 200
            }
        );
        let r = c
            .admit(&i, "A", ScaleType::ScaleOut, t(299_800))
            .unwrap_err();
        assert!(
            matches!(
                r,
                IgnoreReason::Cooldown {
                    remaining_secs: 1,
                    ..
                }
            ),
            "{r:?}"
        );
        // another aspect or instance is independent
        assert!(c.admit(&i, "B", ScaleType::ScaleOut, t(1)).is_ok());
        assert!(c
            .admit(&VnfInstanceId::new("j"), "A", ScaleType::ScaleOut, t(1))
            .is_ok());
        // after the cooldown, the next one is admitted and starts a new cooldown
        assert!(c.admit(&i, "A", ScaleType::ScaleOut, t(300_000)).is_ok());
        assert!(c.admit(&i, "A", ScaleType::ScaleOut, t(300_001)).is_err());
        // memory only holds what is cooling down
        assert_eq!(
            c.remembered(),
            1,
            "(i, B) and (j, A) cooled down at 300.001 s"
        );
        let _ = c.admit(&i, "C", ScaleType::ScaleIn, t(10_000_000));
        assert_eq!(c.remembered(), 1);
    }

    #[test]
    fn reset_and_no_cooldown() {
        let mut c = ScaleCooldown::new(60);
        let i = VnfInstanceId::new("i");
        c.admit(&i, "A", ScaleType::ScaleOut, t(0)).unwrap();
        assert!(c.reset(&i, "A"));
        assert!(!c.reset(&i, "A"));
        assert!(c.admit(&i, "A", ScaleType::ScaleOut, t(1)).is_ok());
        let mut none = ScaleCooldown::new(0);
        assert!(none.admit(&i, "A", ScaleType::ScaleOut, t(0)).is_ok());
        assert!(none.admit(&i, "A", ScaleType::ScaleOut, t(0)).is_ok());
    }

    #[test]
    fn cooldowns_survive_a_restart() {
        let mut c = ScaleCooldown::new(60);
        let i = VnfInstanceId::new("i");
        c.admit(&i, "A", ScaleType::ScaleOut, t(0)).unwrap();
        let json = serde_json::to_string(&c.snapshot()).unwrap();
        let mut after = ScaleCooldown::new(60);
        after.restore(serde_json::from_str(&json).unwrap());
        assert_eq!(after.snapshot(), c.snapshot());
        assert!(after
            .admit(&i, "A", ScaleType::ScaleOut, t(30_000))
            .is_err());
        assert!(after.admit(&i, "A", ScaleType::ScaleOut, t(60_000)).is_ok());
    }
}
