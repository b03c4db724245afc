//! Progress lines of an operation as it runs, from the lifecycle's events: each commit of the
//! occurrence says what changed since the one before (the state entered, a stack attempt
//! started with its zones, an attempt ended and the zones it excluded). The CLI prints them on
//! a terminal ([`crate::output::Output::progress`]); nothing is printed with `--json` or
//! `--quiet` or when stderr is not a terminal.

use std::sync::Mutex;

use vnfm_core::driver::DriverError;
use vnfm_core::lcm::{Attempt, AttemptOutcome, VnfLcmOpOcc};
use vnfm_core::lifecycle::{CommitTicket, LifecycleEvent, LifecycleObserver};

use super::lcm::sol;
use crate::output::Output;

/// What changed between two commits of one occurrence (`before` is `None` for its first), as
/// lines for people.
pub fn lines(before: Option<&VnfLcmOpOcc>, now: &VnfLcmOpOcc) -> Vec<String> {
    let mut out = Vec::new();
    let state = before
        .is_none_or(|b| b.operation_state != now.operation_state)
        .then(|| {
            format!(
                "operation {} ({}): {}",
                now.id,
                sol(&now.operation),
                sol(&now.operation_state)
            )
        });
    // A state that runs on comes before what its attempts did; an end after them.
    let (first, last) = match now.is_running() {
        true => (state, None),
        false => (None, state),
    };
    out.extend(first);
    let seen = before.map_or(&[][..], |b| b.attempts.as_slice());
    for (n, a) in now.attempts.iter().enumerate() {
        match seen.get(n) {
            None => {
                out.push(started(n, a));
                if a.outcome.is_some() {
                    out.push(ended(n, a));
                }
            }
            Some(was) if was.outcome.is_none() && a.outcome.is_some() => out.push(ended(n, a)),
            Some(_) => {}
        }
    }
    out.extend(last);
    out
}

fn started(n: usize, a: &Attempt) -> String {
    let zones: Vec<String> = a.zones.iter().map(|(u, z)| format!("{u} -> {z}")).collect();
    let mut line = format!("  attempt {}: {}", n + 1, zones.join(", "));
    if !a.relaxed.is_empty() {
        line.push_str(&format!(" (relaxed: {})", a.relaxed.join("; ")));
    }
    line
}

fn ended(n: usize, a: &Attempt) -> String {
    let how = match a.outcome {
        Some(AttemptOutcome::Succeeded) => "stack complete".to_owned(),
        Some(AttemptOutcome::Failed) => "stack failed".to_owned(),
        Some(AttemptOutcome::Refused) => "refused by the VIM".to_owned(),
        None => "running".to_owned(),
    };
    let mut line = format!("  attempt {}: {how}", n + 1);
    if let Some(r) = &a.status_reason {
        line.push_str(&format!(": {r}"));
    }
    if !a.failed_zones.is_empty() {
        let z: Vec<&str> = a.failed_zones.iter().map(|z| z.as_str()).collect();
        line.push_str(&format!("; zones excluded: {}", z.join(", ")));
    }
    line
}

/// Prints [`lines`] for every occurrence a commit carries, through [`Output::progress`].
#[derive(Debug)]
pub struct ProgressLines {
    out: Output,
    last: Mutex<Vec<VnfLcmOpOcc>>,
}

impl ProgressLines {
    /// Lines through `out` (shown only where it shows progress).
    pub fn new(out: Output) -> Self {
        Self {
            out,
            last: Mutex::default(),
        }
    }
}

#[async_trait::async_trait]
impl LifecycleObserver for ProgressLines {
    async fn event(&self, event: &LifecycleEvent<'_>, _: CommitTicket) -> Result<(), DriverError> {
        let LifecycleEvent::Committed(batch) = event else {
            return Ok(());
        };
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for op in &batch.put_op_occs {
            let before = last.iter().position(|o| o.id == op.id);
            for line in lines(before.map(|i| &last[i]), op) {
                self.out.progress(&line);
            }
            match before {
                Some(i) => last[i] = op.clone(),
                None => last.push(op.clone()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn op(state: &str, attempts: serde_json::Value) -> VnfLcmOpOcc {
        serde_json::from_value(json!({
            "id": "op-1", "operationState": state, "stateEnteredTime": "2026-11-28T20:00:00Z",
            "startTime": "2026-11-28T20:00:00Z", "vnfInstanceId": "vnf-1",
            "operation": "INSTANTIATE", "isAutomaticInvocation": false,
            "isCancelPending": false, "attempts": attempts,
            "_links": {"self": {"href": "x"}, "vnfInstance": {"href": "y"}}
        }))
        .unwrap()
    }

    #[test]
    fn each_commit_says_the_state_entered_and_the_attempts_started_and_ended() {
        let first = op("STARTING", json!([]));
        assert_eq!(
            lines(None, &first),
            ["operation op-1 (INSTANTIATE): STARTING"]
        );
        let running = op(
            "PROCESSING",
            json!([{"zones": {"VDU1-0": "AZ-1"}, "outcome": null}]),
        );
        assert_eq!(
            lines(Some(&first), &running),
            [
                "operation op-1 (INSTANTIATE): PROCESSING",
                "  attempt 1: VDU1-0 -> AZ-1"
            ]
        );
        // The first attempt failed and a second one started, seen in one commit.
        let moved = op(
            "PROCESSING",
            json!([
                {"zones": {"VDU1-0": "AZ-1"}, "outcome": "failed",
                 "statusReason": "No valid host was found", "failedZones": ["AZ-1"]},
                {"zones": {"VDU1-0": "AZ-2"}, "outcome": null,
                 "relaxed": ["anti-affinity of VDU1 at zone"]}
            ]),
        );
        assert_eq!(
            lines(Some(&running), &moved),
            [
                "  attempt 1: stack failed: No valid host was found; zones excluded: AZ-1",
                "  attempt 2: VDU1-0 -> AZ-2 (relaxed: anti-affinity of VDU1 at zone)"
            ]
        );
        // A lease renewal changes nothing a person needs to see.
        assert!(lines(Some(&moved), &moved).is_empty());
        // The end comes after what its last attempt did.
        let done = op(
            "COMPLETED",
            json!([
                {"zones": {"VDU1-0": "AZ-1"}, "outcome": "failed", "failedZones": ["AZ-1"]},
                {"zones": {"VDU1-0": "AZ-2"}, "outcome": "succeeded"}
            ]),
        );
        assert_eq!(
            lines(Some(&moved), &done),
            [
                "  attempt 2: stack complete",
                "operation op-1 (INSTANTIATE): COMPLETED"
            ]
        );
    }
}
