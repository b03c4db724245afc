//! The crate's error type.

use std::path::PathBuf;

use crate::driver::DriverError;

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
