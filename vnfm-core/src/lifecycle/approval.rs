//! Asynchronous grants of vnfm as an NFVO: a grant request that waits for an operator, as a
//! small sans-IO state (events and `now` in, the answer out).
//!
//! `vnfm serve` answers a grant request whose operation the operator gates (`[server.grants]
//! approve`) from a client that accepts asynchronous answers with `202 Accepted` (SOL003
//! clause 9.4.2.3.1) and keeps a [`PendingGrant`]. Its [`answer`](PendingGrant::answer) is
//! what `GET /grant/v1/grants/{grantId}` says (clause 9.4.3.3.2):
//!
//! | state | answer |
//! |---|---|
//! | [`ApprovalState::Pending`], before its deadline | [`GrantAnswer::Processing`] (202, empty body) |
//! | [`ApprovalState::Pending`], at or after its deadline | [`GrantAnswer::Rejected`] (403): not approved in time |
//! | [`ApprovalState::Approved`] | [`GrantAnswer::Granted`] (200 with the `Grant`) |
//! | [`ApprovalState::Rejected`] | [`GrantAnswer::Rejected`] (403 naming who and why) |
//!
//! The events: [`handle_approve`](PendingGrant::handle_approve) with the decision the caller
//! made at that moment with [`super::grantor::decide`] (so the placement is made when the
//! operator approves, on the zones as they are then; a decision that refuses rejects the
//! grant with its reason), [`handle_reject`](PendingGrant::handle_reject), and
//! [`handle_timeout`](PendingGrant::handle_timeout) at [`poll_timeout`](PendingGrant::poll_timeout).
//! A pending grant whose deadline has passed is expired whether or not `handle_timeout` was
//! called: [`answer`](PendingGrant::answer) and the other events read `now`. Nothing here
//! reads a clock.
//!
//! The state is serde (camelCase), so the caller keeps it in its store as it is.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::grant::{Grant, GrantRequest, GrantedLcmOperationType};

use super::grantor::GrantRefusal;

/// The longest `reason` of an operator's rejection, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;
/// The longest name of who approves or rejects, in bytes.
pub const MAX_ACTOR_BYTES: usize = 256;

/// Whether a grant request waits for an operator: its `operation` is one the operator gates
/// (`approve`, `[server.grants] approve`) **and** its client accepts an asynchronous answer
/// (`client_is_asynchronous`: an OAuth 2.0 client marked `asynchronous`; false for a request
/// without such a client). Every other request is decided at once.
pub fn waits(
    operation: GrantedLcmOperationType,
    approve: &[GrantedLcmOperationType],
    client_is_asynchronous: bool,
) -> bool {
    client_is_asynchronous && approve.contains(&operation)
}

/// A grant request that waits for an operator's decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingGrant {
    /// The grant's id (the `Location` of the 202).
    pub id: String,
    /// The request, as it came.
    pub request: GrantRequest,
    /// Who sent it (the OAuth 2.0 client), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// When it came.
    pub created: DateTime<Utc>,
    /// When it expires if no one decided.
    pub deadline: DateTime<Utc>,
    /// Where it is (flattened: `state` names it, `by`, `at`, `grant` or `reason` beside).
    #[serde(flatten)]
    pub state: ApprovalState,
}

/// Where a [`PendingGrant`] is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ApprovalState {
    /// Waiting for an operator (or for its deadline).
    Pending,
    /// Approved and granted.
    Approved {
        /// Who approved it.
        by: String,
        /// When.
        at: DateTime<Utc>,
        /// The grant decided at that moment.
        grant: Box<Grant>,
    },
    /// Not granted.
    Rejected {
        /// Who rejected it (an operator, `vnfm` for an expiry or a placement that failed).
        by: String,
        /// When.
        at: DateTime<Utc>,
        /// Why, as the 403 says it.
        reason: String,
    },
}

impl ApprovalState {
    /// `PENDING`, `APPROVED` or `REJECTED`.
    pub fn name(&self) -> &'static str {
        match self {
            ApprovalState::Pending => "PENDING",
            ApprovalState::Approved { .. } => "APPROVED",
            ApprovalState::Rejected { .. } => "REJECTED",
        }
    }
}

/// What `GET` of the grant answers at a moment.
#[derive(Clone, Debug, PartialEq)]
pub enum GrantAnswer<'a> {
    /// Still deciding (202, empty body).
    Processing,
    /// Granted (200 with the grant).
    Granted(&'a Grant),
    /// Not granted (403), and why (naming who).
    Rejected(String),
}

/// Why an event was refused (the caller answers 409 or 422 with it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The grant is no longer pending: someone decided, or its deadline passed.
    #[error("grant {id} is {state}, not PENDING: {detail}")]
    NotPending {
        /// The grant.
        id: String,
        /// `APPROVED` or `REJECTED`.
        state: &'static str,
        /// How it ended.
        detail: String,
    },
    /// A bad argument (an empty or too long reason or name).
    #[error("{field}: {detail}")]
    Invalid {
        /// `reason` or `by`.
        field: &'static str,
        /// What is wrong and what is expected.
        detail: String,
    },
}

fn check_text(
    field: &'static str,
    value: &str,
    max: usize,
    required: bool,
) -> Result<(), ApprovalError> {
    if required && value.trim().is_empty() {
        return Err(ApprovalError::Invalid {
            field,
            detail: "is empty; expected a few words".into(),
        });
    }
    if value.len() > max {
        return Err(ApprovalError::Invalid {
            field,
            detail: format!("has {} bytes; at most {max} are accepted", value.len()),
        });
    }
    if value.chars().any(char::is_control) {
        return Err(ApprovalError::Invalid {
            field,
            detail: "has control characters; expected one line of text".into(),
        });
    }
    Ok(())
}

impl PendingGrant {
    /// A new pending grant `id` of `request`, received at `now`, expiring `lifetime` later
    /// (a deadline beyond the calendar is the calendar's end).
    pub fn new(
        id: impl Into<String>,
        request: GrantRequest,
        client: Option<String>,
        now: DateTime<Utc>,
        lifetime: std::time::Duration,
    ) -> Self {
        let deadline = chrono::Duration::from_std(lifetime)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        Self {
            id: id.into(),
            request,
            client,
            created: now,
            deadline,
            state: ApprovalState::Pending,
        }
    }

    /// Whether it still waits for an operator at `now` (pending, before its deadline).
    pub fn is_pending(&self, now: DateTime<Utc>) -> bool {
        matches!(self.state, ApprovalState::Pending) && now < self.deadline
    }

    /// When [`handle_timeout`](Self::handle_timeout) should be called: the deadline while
    /// pending, `None` once decided.
    pub fn poll_timeout(&self) -> Option<DateTime<Utc>> {
        matches!(self.state, ApprovalState::Pending).then_some(self.deadline)
    }

    fn expiry_reason(&self) -> String {
        format!(
            "not approved by an operator within {} s of the request (it expired at {}); ask \
             again",
            (self.deadline - self.created).num_seconds(),
            self.deadline
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    }

    /// Ends a pending grant whose deadline is at or before `now` as rejected (by `vnfm`,
    /// naming the expiry); nothing otherwise. Returns whether it changed.
    pub fn handle_timeout(&mut self, now: DateTime<Utc>) -> bool {
        if matches!(self.state, ApprovalState::Pending) && now >= self.deadline {
            self.state = ApprovalState::Rejected {
                by: "vnfm".into(),
                at: self.deadline,
                reason: self.expiry_reason(),
            };
            return true;
        }
        false
    }

    fn still_pending(&mut self, now: DateTime<Utc>) -> Result<(), ApprovalError> {
        self.handle_timeout(now);
        let detail = match &self.state {
            ApprovalState::Pending => return Ok(()),
            ApprovalState::Approved { by, at, .. } => format!("approved by {by} at {at}"),
            ApprovalState::Rejected { by, at, reason } => {
                format!("rejected by {by} at {at}: {reason}")
            }
        };
        Err(ApprovalError::NotPending {
            id: self.id.clone(),
            state: self.state.name(),
            detail,
        })
    }

    /// Checks that an approval by `by` at `now` would be taken, before the caller gathers the
    /// decision's inputs.
    ///
    /// # Errors
    /// As [`handle_approve`](Self::handle_approve), except for the decision.
    pub fn check_approve(&self, by: &str, now: DateTime<Utc>) -> Result<(), ApprovalError> {
        check_text("by", by, MAX_ACTOR_BYTES, true)?;
        self.clone().still_pending(now)
    }

    /// The operator `by` approves at `now`; `decision` is [`super::grantor::decide`]'s answer
    /// to the request, made now. A grant ends it approved; a refusal ends it rejected, the
    /// reason saying it was approved and why it could not be placed.
    ///
    /// # Errors
    /// [`ApprovalError::NotPending`] when it was decided or expired (it does not change,
    /// except that an expired one becomes rejected); [`ApprovalError::Invalid`] for an empty
    /// or too long `by`.
    pub fn handle_approve(
        &mut self,
        by: &str,
        now: DateTime<Utc>,
        decision: Result<Grant, GrantRefusal>,
    ) -> Result<(), ApprovalError> {
        check_text("by", by, MAX_ACTOR_BYTES, true)?;
        self.still_pending(now)?;
        self.state = match decision {
            Ok(grant) => ApprovalState::Approved {
                by: by.to_owned(),
                at: now,
                grant: Box::new(grant),
            },
            Err(e) => ApprovalState::Rejected {
                by: "vnfm".into(),
                at: now,
                reason: format!("approved by {by}, but not granted: {e}"),
            },
        };
        Ok(())
    }

    /// The operator `by` rejects at `now`, saying `reason`.
    ///
    /// # Errors
    /// [`ApprovalError::NotPending`] when it was decided or expired;
    /// [`ApprovalError::Invalid`] for an empty or too long `reason` or `by` (at most
    /// [`MAX_REASON_BYTES`] and [`MAX_ACTOR_BYTES`], one line).
    pub fn handle_reject(
        &mut self,
        by: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<(), ApprovalError> {
        check_text("by", by, MAX_ACTOR_BYTES, true)?;
        check_text("reason", reason, MAX_REASON_BYTES, true)?;
        self.still_pending(now)?;
        self.state = ApprovalState::Rejected {
            by: by.to_owned(),
            at: now,
            reason: reason.trim().to_owned(),
        };
        Ok(())
    }

    /// What `GET` of the grant answers at `now`.
    pub fn answer(&self, now: DateTime<Utc>) -> GrantAnswer<'_> {
        match &self.state {
            ApprovalState::Pending if now < self.deadline => GrantAnswer::Processing,
            ApprovalState::Pending => GrantAnswer::Rejected(format!(
                "grant {} was rejected: {}",
                self.id,
                self.expiry_reason()
            )),
            ApprovalState::Approved { grant, .. } => GrantAnswer::Granted(grant),
            ApprovalState::Rejected { by, reason, .. } => {
                GrantAnswer::Rejected(format!("grant {} was rejected by {by}: {reason}", self.id))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::GrantedLcmOperationType;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0).single().unwrap()
    }

    fn request() -> GrantRequest {
        serde_json::from_value(serde_json::json!({
            "vnfInstanceId": "i1", "vnfLcmOpOccId": "o1", "vnfdId": "d1",
            "operation": "INSTANTIATE", "isAutomaticInvocation": false,
            "_links": {"vnfLcmOpOcc": {"href": "/o1"}, "vnfInstance": {"href": "/i1"}}
        }))
        .unwrap()
    }

    fn grant() -> Grant {
        Grant {
            id: "g-1".into(),
            ..Grant::default()
        }
    }

    fn pending() -> PendingGrant {
        PendingGrant::new(
            "g-1",
            request(),
            Some("tacker".into()),
            t(0),
            std::time::Duration::from_secs(60),
        )
    }

    #[test]
    fn a_request_waits_only_for_a_gated_operation_of_an_asynchronous_client() {
        use GrantedLcmOperationType::{Instantiate, Scale, Terminate};
        let gated = [Instantiate, Scale];
        assert!(waits(Instantiate, &gated, true));
        assert!(waits(Scale, &gated, true));
        assert!(!waits(Terminate, &gated, true), "not gated");
        assert!(!waits(Instantiate, &gated, false), "a synchronous client");
        assert!(!waits(Instantiate, &[], true), "nothing gated");
    }

    #[test]
    fn pending_answers_processing_until_its_deadline_then_rejected_naming_the_expiry() {
        let p = pending();
        assert_eq!(p.request.operation, GrantedLcmOperationType::Instantiate);
        assert_eq!(p.answer(t(59)), GrantAnswer::Processing);
        assert!(p.is_pending(t(59)));
        assert_eq!(p.poll_timeout(), Some(t(60)));
        let GrantAnswer::Rejected(why) = p.answer(t(60)) else {
            panic!("expired must be rejected");
        };
        assert!(
            why.contains("not approved by an operator within 60 s"),
            "{why}"
        );
        assert!(!p.is_pending(t(60)));
    }

    #[test]
    fn approve_takes_the_decision_made_then() {
        let mut p = pending();
        p.handle_approve("alice", t(10), Ok(grant())).unwrap();
        assert_eq!(p.answer(t(10)), GrantAnswer::Granted(&grant()));
        // Decided: the deadline no longer matters.
        assert_eq!(p.answer(t(1000)), GrantAnswer::Granted(&grant()));
        assert_eq!(p.poll_timeout(), None);
        assert!(!p.handle_timeout(t(1000)));
    }

    #[test]
    fn approve_whose_placement_fails_is_rejected_with_the_placement_reason() {
        let mut p = pending();
        let refusal = GrantRefusal::Rejected {
            field: "addResources".into(),
            detail: "no zone has room".into(),
        };
        p.handle_approve("alice", t(10), Err(refusal)).unwrap();
        let GrantAnswer::Rejected(why) = p.answer(t(10)) else {
            panic!()
        };
        assert!(
            why.contains("approved by alice, but not granted: addResources: no zone has room"),
            "{why}"
        );
    }

    #[test]
    fn reject_names_who_and_why() {
        let mut p = pending();
        p.handle_reject("bob", "maintenance window", t(5)).unwrap();
        assert_eq!(
            p.answer(t(5)),
            GrantAnswer::Rejected("grant g-1 was rejected by bob: maintenance window".into())
        );
    }

    #[test]
    fn decided_or_expired_grants_refuse_further_events() {
        let mut p = pending();
        p.handle_reject("bob", "no", t(5)).unwrap();
        let e = p.handle_approve("alice", t(6), Ok(grant())).unwrap_err();
        assert!(
            matches!(
                e,
                ApprovalError::NotPending {
                    state: "REJECTED",
                    ..
                }
            ),
            "{e}"
        );
        let mut p = pending();
        let e = p.handle_approve("alice", t(60), Ok(grant())).unwrap_err();
        assert!(
            e.to_string()
                .contains("not approved by an operator within 60 s"),
            "{e}"
        );
        assert_eq!(p.state.name(), "REJECTED");
        assert!(pending().check_approve("alice", t(60)).is_err());
        assert!(pending().check_approve("alice", t(59)).is_ok());
    }

    #[test]
    fn timeout_rejects_once_at_the_deadline() {
        let mut p = pending();
        assert!(!p.handle_timeout(t(59)));
        assert!(p.handle_timeout(t(60)));
        assert!(!p.handle_timeout(t(61)));
        assert!(
            matches!(p.state, ApprovalState::Rejected { ref by, at, .. } if by == "vnfm" && at == t(60))
        );
    }

    #[test]
    fn reasons_and_names_are_bounded_and_required() {
        let mut p = pending();
        let e = p.handle_reject("bob", " ", t(1)).unwrap_err();
        assert!(
            matches!(
                e,
                ApprovalError::Invalid {
                    field: "reason",
                    ..
                }
            ),
            "{e}"
        );
        let long = "x".repeat(MAX_REASON_BYTES + 1);
        let e = p.handle_reject("bob", &long, t(1)).unwrap_err();
        assert!(e.to_string().contains("at most 1024"), "{e}");
        let e = p.handle_reject("bob", "a\nb", t(1)).unwrap_err();
        assert!(e.to_string().contains("control characters"), "{e}");
        let e = p.handle_approve("", t(1), Ok(grant())).unwrap_err();
        assert!(
            matches!(e, ApprovalError::Invalid { field: "by", .. }),
            "{e}"
        );
        assert!(p.is_pending(t(1)));
    }

    #[test]
    fn the_state_round_trips_through_json() {
        let mut p = pending();
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains("\"state\":\"PENDING\""), "{json}");
        assert_eq!(serde_json::from_str::<PendingGrant>(&json).unwrap(), p);
        p.handle_approve("alice", t(1), Ok(grant())).unwrap();
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<PendingGrant>(&json).unwrap(), p);
    }
}
