//! Small shared helpers of the operation machine's files.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::driver::DriverError;
use crate::id::ZoneId;
use crate::lifecycle::failure::{Failed, FailureKind};
use crate::lifecycle::plan::STACK_ID_KEY;
use crate::lifecycle::types::LcmConfig;
use crate::reselect::{GiveUp, ReselectConfig};

pub(super) fn restore_config(cfg: &LcmConfig) -> ReselectConfig {
    ReselectConfig {
        enabled: false,
        pattern: cfg.pattern.clone(),
        max_reselections: Some(0),
        selection: cfg.selection,
        seed: cfg.seed,
        race_retries: cfg.group_race_retries,
    }
}

pub(super) fn give_up_failure(g: &GiveUp, excluded: &BTreeSet<ZoneId>) -> Failed {
    let kind = match g {
        // A fixed unit fails only with an insufficient-resource error (the pattern matched),
        // e.g. a scale-out of a VDU under an AutoScalingGroup.
        GiveUp::NoCandidates { .. }
        | GiveUp::NoRoom { .. }
        | GiveUp::RetryLimit { .. }
        | GiveUp::ReselectionDisabled { .. }
        | GiveUp::FixedUnitFailed { .. } => FailureKind::CapacityExhausted,
        GiveUp::Infeasible { .. } => FailureKind::Infeasible,
        GiveUp::Refused { .. } => FailureKind::Invalid,
        _ => FailureKind::StackFailed,
    };
    let tried: Vec<String> = excluded.iter().map(ToString::to_string).collect();
    let detail = if tried.is_empty() {
        g.to_string()
    } else {
        format!("{g} (zones tried and excluded: {})", tried.join(", "))
    };
    Failed::new(kind, "stack operation failed", detail)
}

pub(super) fn no_stack() -> DriverError {
    DriverError::Other {
        driver: "lifecycle",
        message: "the operation has no stack".into(),
        source: None,
    }
}

pub(super) fn no_stack_failed() -> Failed {
    Failed::new(
        FailureKind::Invalid,
        "no stack",
        format!("the VNF instance records no stack id (metadata.{STACK_ID_KEY})"),
    )
}

/// The failure of an operation whose machine met an event out of turn (`what` says which): a
/// bug of the machine, never of the cloud, reported as a backend error rather than a panic.
pub(super) fn internal_error(what: &str) -> Failed {
    Failed::new(
        FailureKind::Backend,
        "internal error",
        format!("operation machine: {what}"),
    )
}

pub(super) fn chrono_of(d: Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(d).unwrap_or(chrono::TimeDelta::MAX)
}
