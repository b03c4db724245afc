//! The NFVO grant exchange of an operation an NFVO grants ([`LcmConfig::nfvo_grants`]): the
//! request sent, a `202 Accepted` polled at its location (after its `Retry-After`, else the
//! poll interval), a transient error asked again, until the grant, a refusal or the grant
//! timeout.
//!
//! [`NfvoGrant`] is a part of [`Operation`](super::Operation) with its own `handle_*` /
//! `poll_*`: the coordinator routes [`OpEvent::Grant`](super::OpEvent::Grant) and its timer to
//! it while the occurrence is `STARTING`, and reads the end from [`NfvoGrant::poll_end`].
//!
//! [`LcmConfig::nfvo_grants`]: crate::lifecycle::LcmConfig::nfvo_grants

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::actions::OpAction;
use super::helpers::chrono_of;
use crate::driver::{DriverError, GrantAnswer};
use crate::grant::{Grant, GrantRequest};
use crate::id::OpOccId;
use crate::lifecycle::failure::chain;

/// One grant exchange with the NFVO.
#[derive(Debug)]
pub(super) struct NfvoGrant {
    request: GrantRequest,
    /// The occurrence the grant must be for.
    op_occ: OpOccId,
    poll_interval: Duration,
    timeout: Duration,
    /// No grant after this: the exchange ends refused.
    deadline: DateTime<Utc>,
    /// Where the NFVO creates the grant (of its last `202`).
    location: Option<String>,
    /// Why the last attempt failed, if it did.
    error: Option<String>,
    next: Option<OpAction>,
    /// A request or poll is out: its answer comes to [`NfvoGrant::handle_answer`].
    asked: bool,
    /// When to ask again.
    wake: Option<DateTime<Utc>>,
    end: Option<Result<Grant, String>>,
}

impl NfvoGrant {
    /// Asks the NFVO for `request` at `now`; `(poll_interval, timeout)` are the settings of
    /// the NFVO's grants.
    pub(super) fn new(
        request: GrantRequest,
        op_occ: OpOccId,
        (poll_interval, timeout): (Duration, Duration),
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            next: Some(OpAction::RequestGrant(Box::new(request.clone()))),
            request,
            op_occ,
            poll_interval,
            timeout,
            deadline: now + chrono_of(timeout),
            location: None,
            error: None,
            asked: false,
            wake: None,
            end: None,
        }
    }

    /// The request or poll to send ([`OpAction::RequestGrant`], [`OpAction::PollGrant`]).
    pub(super) fn poll_action(&mut self) -> Option<OpAction> {
        let a = self.next.take()?;
        self.asked = true;
        Some(a)
    }

    /// When to call [`NfvoGrant::handle_timeout`], while it waits to ask again.
    pub(super) fn poll_timeout(&self) -> Option<DateTime<Utc>> {
        self.wake
    }

    /// The grant, or why there is none (the operation then ends not run), once decided.
    pub(super) fn poll_end(&mut self) -> Option<Result<Grant, String>> {
        self.end.take()
    }

    /// What the NFVO answered the request or poll out.
    pub(super) fn handle_answer(
        &mut self,
        r: Result<GrantAnswer, DriverError>,
        now: DateTime<Utc>,
    ) {
        if !std::mem::take(&mut self.asked) || self.end.is_some() {
            return;
        }
        match r {
            Ok(GrantAnswer::Granted(g)) => self.granted(*g),
            Ok(GrantAnswer::Pending {
                location,
                retry_after,
            }) => {
                self.location = Some(location);
                self.wait(now, retry_after, None);
            }
            Ok(GrantAnswer::Rejected(p)) => {
                let why = p.detail.clone();
                self.end = Some(Err(format!(
                    "the NFVO rejected the grant ({} {}): {why}",
                    p.status,
                    p.title.as_deref().unwrap_or("Forbidden")
                )));
            }
            Err(e @ (DriverError::Unavailable { .. } | DriverError::Other { .. })) => {
                self.wait(now, None, Some(chain(&e)));
            }
            Err(e) => {
                self.end = Some(Err(format!(
                    "the NFVO's grant interface answered with an error: {}",
                    chain(&e)
                )));
            }
        }
    }

    /// Time passed: asks again once the wait is over (polls the location, or sends the
    /// request again when the NFVO gave none), or ends at the grant timeout.
    pub(super) fn handle_timeout(&mut self, now: DateTime<Utc>) {
        if self.wake.is_none_or(|t| t > now) {
            return;
        }
        self.wake = None;
        if now >= self.deadline {
            let error = self.error.take();
            return self.wait(now, None, error);
        }
        self.next = Some(match &self.location {
            Some(l) => OpAction::PollGrant(l.clone()),
            None => OpAction::RequestGrant(Box::new(self.request.clone())),
        });
    }

    /// The grant must be for this operation's occurrence (an empty id is taken as this one's).
    fn granted(&mut self, g: Grant) {
        let op = &self.op_occ;
        if !g.vnf_lcm_op_occ_id.as_str().is_empty() && &g.vnf_lcm_op_occ_id != op {
            let other = &g.vnf_lcm_op_occ_id;
            self.end = Some(Err(format!(
                "the NFVO's grant {} is for operation occurrence {other}, not {op}",
                g.id
            )));
            return;
        }
        self.end = Some(Ok(g));
    }

    /// Asks again after the poll interval (or `retry_after`), never after the deadline;
    /// ends when the deadline has passed.
    fn wait(&mut self, now: DateTime<Utc>, retry_after: Option<Duration>, error: Option<String>) {
        if now >= self.deadline {
            let last = error.map_or_else(
                || "it was still deciding".to_owned(),
                |e| format!("the last attempt: {e}"),
            );
            self.end = Some(Err(format!(
                "no grant from the NFVO within {} s of the request ({last})",
                self.timeout.as_secs()
            )));
            return;
        }
        self.error = error;
        let at = now + chrono_of(retry_after.unwrap_or(self.poll_interval));
        self.wake = Some(at.min(self.deadline));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use chrono::TimeZone;

    use super::*;
    use crate::grant::GrantedLcmOperationType;
    use crate::problem::ProblemDetails;

    const INTERVAL: Duration = Duration::from_secs(2);
    const TIMEOUT: Duration = Duration::from_secs(60);

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    fn request() -> GrantRequest {
        GrantRequest::new(
            "inst-1",
            "op-1",
            "vnfd-1",
            GrantedLcmOperationType::Instantiate,
        )
    }

    fn exchange() -> NfvoGrant {
        NfvoGrant::new(request(), OpOccId::new("op-1"), (INTERVAL, TIMEOUT), t(0))
    }

    fn grant(id: &str, op: &str) -> GrantAnswer {
        let mut g = Grant::for_request(id, &request());
        g.vnf_lcm_op_occ_id = OpOccId::new(op);
        GrantAnswer::Granted(Box::new(g))
    }

    fn pending(location: &str, retry_after: Option<u64>) -> GrantAnswer {
        GrantAnswer::Pending {
            location: location.to_owned(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    fn unavailable() -> DriverError {
        DriverError::Unavailable {
            driver: "nfvo",
            message: "503".into(),
        }
    }

    fn refusal(g: &mut NfvoGrant) -> String {
        match g.poll_end() {
            Some(Err(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn sends_the_request_once_and_ends_with_the_grant() {
        let mut g = exchange();
        assert_eq!(
            g.poll_action(),
            Some(OpAction::RequestGrant(Box::new(request())))
        );
        assert_eq!(g.poll_action(), None, "one request out at a time");
        assert_eq!(g.poll_timeout(), None);
        assert!(g.poll_end().is_none());
        g.handle_answer(Ok(grant("g-1", "op-1")), t(1));
        let granted = g.poll_end().unwrap().unwrap();
        assert_eq!(granted.id.as_str(), "g-1");
        assert_eq!(g.poll_action(), None);
    }

    #[test]
    fn a_202_is_polled_at_its_location_after_retry_after_then_the_interval() {
        let mut g = exchange();
        g.poll_action().unwrap();
        g.handle_answer(Ok(pending("/grants/7", Some(5))), t(1));
        assert_eq!(g.poll_action(), None, "nothing before the wait is over");
        assert_eq!(g.poll_timeout(), Some(t(6)), "Retry-After: 5 s");
        g.handle_timeout(t(5));
        assert_eq!(g.poll_action(), None, "too early");
        g.handle_timeout(t(6));
        assert_eq!(g.poll_timeout(), None);
        assert_eq!(
            g.poll_action(),
            Some(OpAction::PollGrant("/grants/7".into()))
        );
        // Still deciding, no Retry-After: the poll interval.
        g.handle_answer(Ok(pending("/grants/7", None)), t(7));
        assert_eq!(g.poll_timeout(), Some(t(9)));
        g.handle_timeout(t(9));
        assert_eq!(
            g.poll_action(),
            Some(OpAction::PollGrant("/grants/7".into()))
        );
        g.handle_answer(Ok(grant("g-7", "")), t(10));
        assert_eq!(g.poll_end().unwrap().unwrap().id.as_str(), "g-7");
    }

    #[test]
    fn a_transient_error_sends_the_request_again() {
        let mut g = exchange();
        g.poll_action().unwrap();
        g.handle_answer(Err(unavailable()), t(1));
        assert!(g.poll_end().is_none(), "a 503 is asked again");
        assert_eq!(g.poll_timeout(), Some(t(3)));
        g.handle_timeout(t(3));
        assert_eq!(
            g.poll_action(),
            Some(OpAction::RequestGrant(Box::new(request()))),
            "no location yet: the request again"
        );
    }

    #[test]
    fn the_timeout_ends_it_naming_the_last_error() {
        let mut g = exchange();
        g.poll_action().unwrap();
        g.handle_answer(Err(unavailable()), t(59));
        assert_eq!(
            g.poll_timeout(),
            Some(t(60)),
            "the wait stops at the deadline"
        );
        g.handle_timeout(t(60));
        assert_eq!(g.poll_action(), None, "nothing is sent after the deadline");
        let why = refusal(&mut g);
        assert!(
            why.starts_with("no grant from the NFVO within 60 s"),
            "{why}"
        );
        assert!(
            why.contains("the last attempt: nfvo: unavailable: 503"),
            "{why}"
        );
    }

    #[test]
    fn a_202_after_the_deadline_ends_it_still_deciding() {
        let mut g = exchange();
        g.poll_action().unwrap();
        g.handle_answer(Ok(pending("/grants/7", Some(1))), t(61));
        let why = refusal(&mut g);
        assert!(why.contains("within 60 s"), "{why}");
        assert!(why.contains("it was still deciding"), "{why}");
    }

    #[test]
    fn a_rejection_or_a_grant_for_another_occurrence_is_a_refusal() {
        let mut g = exchange();
        g.poll_action().unwrap();
        let p = ProblemDetails::new(403, "no capacity in the region").with_title("Forbidden");
        g.handle_answer(Ok(GrantAnswer::Rejected(p)), t(1));
        let why = refusal(&mut g);
        assert_eq!(
            why,
            "the NFVO rejected the grant (403 Forbidden): no capacity in the region"
        );

        let mut g = exchange();
        g.poll_action().unwrap();
        g.handle_answer(Ok(grant("g-9", "op-2")), t(1));
        let why = refusal(&mut g);
        assert!(
            why.contains("grant g-9 is for operation occurrence op-2, not op-1"),
            "{why}"
        );
    }

    #[test]
    fn a_permanent_error_is_a_refusal_at_once() {
        let mut g = exchange();
        g.poll_action().unwrap();
        let e = DriverError::PermissionDenied {
            driver: "nfvo",
            message: "bad token".into(),
        };
        g.handle_answer(Err(e), t(1));
        let why = refusal(&mut g);
        assert!(
            why.starts_with("the NFVO's grant interface answered with an error"),
            "{why}"
        );
        assert_eq!(g.poll_timeout(), None);
    }

    #[test]
    fn an_answer_nobody_asked_for_is_ignored() {
        let mut g = exchange();
        g.handle_answer(Ok(grant("g-1", "op-1")), t(1));
        assert!(g.poll_end().is_none());
        assert!(g.poll_action().is_some());
    }
}
