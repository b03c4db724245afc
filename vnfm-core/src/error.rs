//! The crate's error types: [`Error`] and the error vocabulary of the drivers,
//! [`DriverError`] (re-exported from [`crate::driver`]). This module depends on no other
//! module of the crate.

use std::path::PathBuf;

/// Result with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where in an input a problem was found: a file (or a built-in name), a field path and a
/// line when known. Displayed as `file:line: field`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// The file, or a name such as `<built-in demo cloud>`.
    pub file: Option<PathBuf>,
    /// 1-based line, when the parser knows it.
    pub line: Option<usize>,
    /// A field path such as `zones.AZ-1.hosts.compute-1.vcpus`.
    pub field: Option<String>,
}

impl Location {
    /// A location in `file`.
    pub fn file(file: impl Into<PathBuf>) -> Self {
        Self {
            file: Some(file.into()),
            ..Self::default()
        }
    }
    /// The same location with a line.
    pub fn with_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }
    /// The same location with a field path.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut wrote = false;
        if let Some(file) = &self.file {
            write!(f, "{}", file.display())?;
            wrote = true;
        }
        if let Some(line) = self.line {
            write!(f, "{}line {line}", if wrote { ":" } else { "" })?;
            wrote = true;
        }
        if let Some(field) = &self.field {
            write!(f, "{}{field}", if wrote { ": " } else { "" })?;
            wrote = true;
        }
        if !wrote {
            f.write_str("<input>")?;
        }
        Ok(())
    }
}

/// The error vocabulary every driver shares.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The named object does not exist.
    #[error("{driver}: not found: {what}")]
    NotFound {
        /// Which driver answered.
        driver: &'static str,
        /// What was looked for (kind and id).
        what: String,
    },
    /// An object with that name or id exists already.
    #[error("{driver}: already exists: {what}")]
    AlreadyExists {
        /// Which driver answered.
        driver: &'static str,
        /// What collided.
        what: String,
    },
    /// A quota of the backend would be exceeded.
    #[error("{driver}: quota exceeded: {message}")]
    QuotaExceeded {
        /// Which driver answered.
        driver: &'static str,
        /// The backend's message.
        message: String,
    },
    /// The object is in a state that does not allow the request (e.g. an operation in
    /// progress, a stale version).
    #[error("{driver}: conflict: {message}")]
    Conflict {
        /// Which driver answered.
        driver: &'static str,
        /// The backend's message.
        message: String,
    },
    /// The request was rejected as malformed or invalid by the backend (e.g. a template Heat
    /// cannot validate).
    #[error("{driver}: invalid request: {message}")]
    Invalid {
        /// Which driver answered.
        driver: &'static str,
        /// What was wrong.
        message: String,
    },
    /// No valid credentials.
    #[error("{driver}: unauthenticated: {message}")]
    Unauthenticated {
        /// Which driver answered.
        driver: &'static str,
        /// The backend's message.
        message: String,
    },
    /// Credentials are valid but not allowed to do this.
    #[error("{driver}: permission denied: {message}")]
    PermissionDenied {
        /// Which driver answered.
        driver: &'static str,
        /// The backend's message.
        message: String,
    },
    /// The backend cannot be reached or is overloaded; retrying later may succeed.
    #[error("{driver}: unavailable: {message}")]
    Unavailable {
        /// Which driver answered.
        driver: &'static str,
        /// What failed.
        message: String,
    },
    /// The driver does not implement this operation.
    #[error("{driver}: {operation} is not implemented")]
    NotImplemented {
        /// Which driver answered.
        driver: &'static str,
        /// The operation.
        operation: &'static str,
    },
    /// Anything else, with its cause.
    #[error("{driver}: {message}")]
    Other {
        /// Which driver answered.
        driver: &'static str,
        /// What was being done.
        message: String,
        /// The cause.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
}

impl DriverError {
    /// True when retrying the same request later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, DriverError::Unavailable { .. })
    }

    /// True for [`DriverError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, DriverError::NotFound { .. })
    }
}

/// Errors of `vnfm-core`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An input (cloud file, package, template, request) is invalid.
    #[error("{location}: {message}")]
    Invalid {
        /// Where.
        location: Location,
        /// What was wrong and what was expected.
        message: String,
    },
    /// An input could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A driver failed.
    #[error(transparent)]
    Driver(#[from] DriverError),
}

impl Error {
    /// An [`Error::Invalid`] at `location`.
    pub fn invalid(location: Location, message: impl Into<String>) -> Self {
        Error::Invalid {
            location,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_display() {
        let l = Location::file("cloud.yaml")
            .with_line(3)
            .with_field("zones.AZ-1");
        assert_eq!(l.to_string(), "cloud.yaml:line 3: zones.AZ-1");
        assert_eq!(Location::default().to_string(), "<input>");
        let e = Error::invalid(Location::file("x.yaml"), "expected a mapping");
        assert_eq!(e.to_string(), "x.yaml: expected a mapping");
    }
}
