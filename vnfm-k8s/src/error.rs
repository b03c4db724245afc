//! The crate's error type and its mapping onto [`DriverError`].

use vnfm_core::driver::DriverError;

/// The `driver` name every [`DriverError`] of this crate carries.
pub(crate) const DRIVER: &str = "kubernetes";

/// Result with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of the Kubernetes adapter.
///
/// Driver methods return [`DriverError`]; `From<Error>` maps the API server's answers onto
/// its kinds, keeping the call, the HTTP status, the Status `reason` and the Status
/// `message` in the message:
///
/// | API server | [`DriverError`] |
/// |---|---|
/// | 400 `BadRequest`, 405, 406, 413, 415 `UnsupportedMediaType`, 422 `Invalid` | `Invalid` |
/// | 401 `Unauthorized` | `Unauthenticated` |
/// | 403 `Forbidden` | `PermissionDenied` |
/// | 404 `NotFound` | `NotFound` |
/// | 409 `AlreadyExists` | `AlreadyExists` |
/// | 409 `Conflict`, 410 `Gone` (also as a watch's `ERROR` event) | `Conflict` |
/// | 429 with a `DisruptionBudget` cause (an eviction a PodDisruptionBudget refuses) | `Conflict` |
/// | other 429 (API priority and fairness), 5xx, `Timeout`, `ServerTimeout` | `Unavailable` |
/// | no answer (connection refused, timeout, TLS handshake) | `Unavailable`, naming the server URL |
/// | credentials that cannot be loaded (token file, exec plugin) | `Unauthenticated` |
///
/// Anything else (an answer the adapter cannot read, a configuration error) is
/// [`DriverError::Other`] with this error as its source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The API server answered with an error Status.
    #[error("{call}: HTTP {code} {reason}: {message}")]
    Api {
        /// What was asked (`label node worker-1`).
        call: String,
        /// The HTTP status (the Status `code`).
        code: u16,
        /// The Status `reason` (`NotFound`, `Invalid`, ...), possibly empty.
        reason: String,
        /// The Status `message`.
        message: String,
        /// The `reason`s of `details.causes` (e.g. `DisruptionBudget`, `FieldValueInvalid`).
        causes: Vec<String>,
    },
    /// The API server could not be reached, or did not answer in time.
    #[error("{call}: cannot reach the Kubernetes API server at {server}")]
    Unreachable {
        /// What was asked.
        call: String,
        /// The server URL, or a description when the client was built by the caller.
        server: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The client's credentials could not be loaded or refreshed.
    #[error("{call}: credentials for {server}")]
    Credentials {
        /// What was asked.
        call: String,
        /// The server URL, or a description.
        server: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Any other failure of the client (an answer that cannot be read, a request that cannot be
    /// built).
    #[error("{call}")]
    Client {
        /// What was asked.
        call: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A manifest or request the adapter cannot send (no `kind`, no `metadata.name`, a kind
    /// the API server does not serve).
    #[error("{0}")]
    Request(String),
    /// A kubeconfig or in-cluster configuration that cannot be loaded.
    #[error("{what}")]
    Config {
        /// Which configuration (`kubeconfig /path`, `in-cluster configuration`).
        what: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl Error {
    /// Maps an error of the kube client for the call `call` to `server`.
    pub(crate) fn from_kube(call: impl Into<String>, server: &str, e: kube::Error) -> Self {
        let call = call.into();
        match e {
            kube::Error::Api(status) => {
                let causes = status
                    .details
                    .as_ref()
                    .map(|d| d.causes.iter().map(|c| c.reason.clone()).collect())
                    .unwrap_or_default();
                Error::Api {
                    call,
                    code: status.code,
                    reason: status.reason,
                    message: status.message,
                    causes,
                }
            }
            kube::Error::HyperError(_) | kube::Error::Service(_) => Error::Unreachable {
                call,
                server: server.to_owned(),
                source: e,
            },
            kube::Error::Auth(_) => Error::Credentials {
                call,
                server: server.to_owned(),
                source: e,
            },
            other => Error::Client {
                call,
                source: other,
            },
        }
    }

    /// The HTTP status of an [`Error::Api`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// The text of `e` and of its sources, joined by `: `.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

impl From<Error> for DriverError {
    fn from(e: Error) -> Self {
        let driver = DRIVER;
        match &e {
            Error::Api {
                code,
                reason,
                causes,
                ..
            } => {
                let message = e.to_string();
                match (*code, reason.as_str()) {
                    (404, _) | (_, "NotFound") => DriverError::NotFound {
                        driver,
                        what: message,
                    },
                    (409, "AlreadyExists") | (_, "AlreadyExists") => DriverError::AlreadyExists {
                        driver,
                        what: message,
                    },
                    (409 | 410, _) | (_, "Conflict" | "Gone" | "Expired") => {
                        DriverError::Conflict { driver, message }
                    }
                    (429, _) if causes.iter().any(|c| c == "DisruptionBudget") => {
                        DriverError::Conflict { driver, message }
                    }
                    (401, _) | (_, "Unauthorized") => {
                        DriverError::Unauthenticated { driver, message }
                    }
                    (403, _) | (_, "Forbidden") => {
                        DriverError::PermissionDenied { driver, message }
                    }
                    (400 | 405 | 406 | 413 | 415 | 422, _)
                    | (
                        _,
                        "BadRequest"
                        | "Invalid"
                        | "MethodNotAllowed"
                        | "NotAcceptable"
                        | "RequestEntityTooLarge"
                        | "UnsupportedMediaType",
                    ) => DriverError::Invalid { driver, message },
                    (429 | 500..=599, _)
                    | (
                        _,
                        "TooManyRequests" | "Timeout" | "ServerTimeout" | "ServiceUnavailable"
                        | "InternalError",
                    ) => DriverError::Unavailable { driver, message },
                    _ => DriverError::Other {
                        driver,
                        message,
                        source: None,
                    },
                }
            }
            Error::Unreachable { .. } => DriverError::Unavailable {
                driver,
                message: chain(&e),
            },
            Error::Credentials { .. } => DriverError::Unauthenticated {
                driver,
                message: chain(&e),
            },
            Error::Request(message) => DriverError::Invalid {
                driver,
                message: message.clone(),
            },
            Error::Client { .. } | Error::Config { .. } => DriverError::Other {
                driver,
                message: e.to_string(),
                source: Some(Box::new(e)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn api(code: u16, reason: &str, causes: &[&str]) -> DriverError {
        Error::Api {
            call: "do it".to_owned(),
            code,
            reason: reason.to_owned(),
            message: "the server's words".to_owned(),
            causes: causes.iter().map(|c| (*c).to_owned()).collect(),
        }
        .into()
    }

    #[test]
    fn statuses_map_to_kinds_keeping_the_message() {
        let cases: [(u16, &str, &[&str], &str); 14] = [
            (404, "NotFound", &[], "NotFound"),
            (409, "AlreadyExists", &[], "AlreadyExists"),
            (409, "Conflict", &[], "Conflict"),
            (410, "Expired", &[], "Conflict"),
            (429, "TooManyRequests", &["DisruptionBudget"], "Conflict"),
            (429, "TooManyRequests", &[], "Unavailable"),
            (401, "Unauthorized", &[], "Unauthenticated"),
            (403, "Forbidden", &[], "PermissionDenied"),
            (400, "BadRequest", &[], "Invalid"),
            (415, "UnsupportedMediaType", &[], "Invalid"),
            (422, "Invalid", &["FieldValueInvalid"], "Invalid"),
            (500, "InternalError", &[], "Unavailable"),
            (504, "Timeout", &[], "Unavailable"),
            (0, "Gone", &[], "Conflict"),
        ];
        for (code, reason, causes, want) in cases {
            let e = api(code, reason, causes);
            let got = format!("{e:?}");
            assert!(
                got.starts_with(want),
                "{code} {reason} {causes:?}: {got}, expected {want}"
            );
            assert!(e.to_string().contains("the server's words"), "{code}: {e}");
            assert!(
                e.to_string().contains(&format!("HTTP {code} {reason}")),
                "{e}"
            );
        }
        assert!(api(503, "", &[]).is_retryable());
        assert!(api(404, "", &[]).is_not_found());
        assert!(matches!(api(418, "", &[]), DriverError::Other { .. }));
    }

    #[test]
    fn a_bad_manifest_is_invalid() {
        let e: DriverError = Error::Request("no kind".to_owned()).into();
        assert!(matches!(e, DriverError::Invalid { ref message, .. } if message == "no kind"));
    }
}
