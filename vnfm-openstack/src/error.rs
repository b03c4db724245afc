//! The crate's error type and its mapping onto [`DriverError`].

use vnfm_core::driver::DriverError;
use vnfm_core::error::{Error as CoreError, Location};

/// Result with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of the OpenStack adapter.
///
/// Driver methods return [`DriverError`]; `From<Error>` maps HTTP statuses onto its kinds
/// (404 `NotFound`, 409 `Conflict` or `AlreadyExists`, 400 `Invalid`, 401
/// `Unauthenticated`, 403 `PermissionDenied` or `QuotaExceeded`, 413 `QuotaExceeded`, 429
/// and 5xx `Unavailable`), keeping the status, the request and the service's message in the
/// message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid or incomplete.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// The service answered with an error status.
    #[error("{method} {url}: HTTP {status}: {message}")]
    Http {
        /// `keystone`, `nova`, `placement` or `heat`.
        service: &'static str,
        /// The request method.
        method: String,
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The service's error type (Heat `error.type`, Nova's top-level key), if any.
        error_type: Option<String>,
        /// The service's message (or the start of the body).
        message: String,
    },
    /// The request did not get an answer (connection refused, timeout, TLS).
    #[error("{method} {url}: no answer")]
    Transport {
        /// `keystone`, `nova`, `placement` or `heat`.
        service: &'static str,
        /// The request method.
        method: String,
        /// The request URL.
        url: String,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// The service answered something the adapter cannot read.
    #[error("{method} {url}: unexpected answer: {what}")]
    Decode {
        /// `keystone`, `nova`, `placement` or `heat`.
        service: &'static str,
        /// The request method.
        method: String,
        /// The request URL.
        url: String,
        /// What was expected and what came.
        what: String,
        /// The JSON error, if any.
        #[source]
        source: Option<serde_json::Error>,
    },
    /// The catalog has no endpoint for a service.
    #[error("no {interface} endpoint of service type {service_type:?}{region} in {source_name}")]
    NoEndpoint {
        /// The service type (`compute`, `orchestration`).
        service_type: String,
        /// The interface looked for.
        interface: &'static str,
        /// ` in region R` or empty.
        region: String,
        /// `the token catalog` or `GET /v3/endpoints`.
        source_name: &'static str,
    },
}

impl Error {
    /// A configuration error at `location`.
    pub fn config(location: Location, message: impl Into<String>) -> Self {
        Error::Core(CoreError::invalid(location, message))
    }

    /// The HTTP status, for [`Error::Http`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    fn service(&self) -> &'static str {
        match self {
            Error::Http { service, .. }
            | Error::Transport { service, .. }
            | Error::Decode { service, .. } => service,
            Error::Core(_) | Error::NoEndpoint { .. } => "openstack",
        }
    }
}

impl From<Error> for DriverError {
    fn from(e: Error) -> Self {
        let driver = e.service();
        match &e {
            Error::Http {
                status,
                error_type,
                message,
                ..
            } => {
                let text = e.to_string();
                let quota = message.to_ascii_lowercase().contains("quota");
                let exists = error_type.as_deref() == Some("StackExists")
                    || message.to_ascii_lowercase().contains("already exists");
                match *status {
                    404 => DriverError::NotFound { driver, what: text },
                    409 if exists => DriverError::AlreadyExists { driver, what: text },
                    409 => DriverError::Conflict {
                        driver,
                        message: text,
                    },
                    400 | 422 => DriverError::Invalid {
                        driver,
                        message: text,
                    },
                    401 => DriverError::Unauthenticated {
                        driver,
                        message: text,
                    },
                    403 if quota => DriverError::QuotaExceeded {
                        driver,
                        message: text,
                    },
                    403 => DriverError::PermissionDenied {
                        driver,
                        message: text,
                    },
                    413 => DriverError::QuotaExceeded {
                        driver,
                        message: text,
                    },
                    429 | 500..=599 => DriverError::Unavailable {
                        driver,
                        message: text,
                    },
                    _ => DriverError::Other {
                        driver,
                        message: "unexpected HTTP status".to_owned(),
                        source: Some(Box::new(e)),
                    },
                }
            }
            Error::Transport { .. } => DriverError::Unavailable {
                driver,
                message: chain(&e),
            },
            Error::Core(_) | Error::Decode { .. } | Error::NoEndpoint { .. } => {
                DriverError::Other {
                    driver,
                    message: "request failed".to_owned(),
                    source: Some(Box::new(e)),
                }
            }
        }
    }
}

/// `e: cause: cause`, for messages that must carry the cause as text.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, error_type: Option<&str>, message: &str) -> DriverError {
        Error::Http {
            service: "heat",
            method: "POST".into(),
            url: "http://h/v1/p/stacks".into(),
            status,
            error_type: error_type.map(str::to_owned),
            message: message.into(),
        }
        .into()
    }

    #[test]
    fn statuses_map_onto_kinds_and_keep_the_message() {
        let e = http(
            404,
            Some("EntityNotFound"),
            "The Stack (x) could not be found.",
        );
        assert!(e.is_not_found());
        assert!(e.to_string().contains("HTTP 404"), "{e}");
        assert!(e.to_string().contains("The Stack (x)"), "{e}");
        assert!(matches!(
            http(409, Some("StackExists"), "The Stack (a) already exists."),
            DriverError::AlreadyExists { .. }
        ));
        assert!(matches!(
            http(409, None, "Stack in progress"),
            DriverError::Conflict { .. }
        ));
        assert!(matches!(
            http(400, None, "bad"),
            DriverError::Invalid { .. }
        ));
        assert!(matches!(
            http(401, None, "auth"),
            DriverError::Unauthenticated { .. }
        ));
        assert!(matches!(
            http(403, None, "Quota exceeded for cores"),
            DriverError::QuotaExceeded { .. }
        ));
        assert!(matches!(
            http(403, None, "Policy doesn't allow"),
            DriverError::PermissionDenied { .. }
        ));
        assert!(matches!(
            http(413, None, "over"),
            DriverError::QuotaExceeded { .. }
        ));
        assert!(http(503, None, "down").is_retryable());
        let other = http(418, None, "teapot");
        assert!(matches!(other, DriverError::Other { .. }));
        let src = std::error::Error::source(&other).unwrap().to_string();
        assert!(src.contains("HTTP 418: teapot"), "{src}");
    }
}
