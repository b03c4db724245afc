//! Why an operation failed: the kind (for exit codes and metrics) and the ProblemDetails an
//! occurrence in `FAILED_TEMP` carries.

use serde_json::json;

use crate::driver::DriverError;
use crate::problem::ProblemDetails;

/// Why an operation failed (for exit codes and metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FailureKind {
    /// The placement constraints cannot be met.
    Infeasible,
    /// No zone or host has room (including: no zone left to reselect).
    CapacityExhausted,
    /// The stack failed for another reason.
    StackFailed,
    /// A backend could not be reached or refused the credentials.
    Backend,
    /// The request does not fit the package or the instance.
    Invalid,
    /// The operation was interrupted (a signal, or its owner went away and its lease expired)
    /// and can be retried, rolled back or failed.
    Interrupted,
    /// An end-of-operation hook failed.
    Hook,
}

/// A failure inside a started operation.
#[derive(Clone, Debug)]
pub(crate) struct Failed {
    pub kind: FailureKind,
    pub title: &'static str,
    pub detail: String,
}

impl Failed {
    pub fn new(kind: FailureKind, title: &'static str, detail: impl Into<String>) -> Self {
        Self {
            kind,
            title,
            detail: detail.into(),
        }
    }

    pub fn driver(e: &DriverError) -> Self {
        let kind = match e {
            // Heat refused the template or its parameters (HTTP 400): the package's fault.
            DriverError::Invalid { .. } => FailureKind::Invalid,
            DriverError::NotFound { .. } => FailureKind::StackFailed,
            DriverError::QuotaExceeded { .. } => FailureKind::CapacityExhausted,
            // The VIM answered and refused: a name taken (Heat's 409 "already exists") or a
            // state that does not take the request. Not an unreachable backend.
            DriverError::AlreadyExists { .. } | DriverError::Conflict { .. } => {
                FailureKind::StackFailed
            }
            _ => FailureKind::Backend,
        };
        Self::new(kind, "VIM request failed", chain(e))
    }

    /// The ProblemDetails of the occurrence.
    pub fn problem(&self) -> ProblemDetails {
        ProblemDetails::new(422, self.detail.clone())
            .with_title(self.title)
            .with_extension("failureKind", json!(self.kind))
    }
}

/// `e` and its sources, joined by `: `.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
