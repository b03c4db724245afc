//! The CLI's error type and its mapping onto exit codes.

use std::path::PathBuf;

use vnfm_core::driver::DriverError;

use crate::exit;

/// Everything that can make `vnfm` fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// Bad usage: a flag or argument that makes no sense here.
    #[error("{0}")]
    Usage(String),
    /// The configuration file is unreadable or invalid.
    #[error("configuration {}: {message}", file.display())]
    Config {
        /// The file.
        file: PathBuf,
        /// What was wrong.
        message: String,
        /// The IO error, when the file could not be read.
        #[source]
        source: Option<std::io::Error>,
    },
    /// An input (cloud file, package, request) is invalid, or a core operation failed.
    #[error(transparent)]
    Core(#[from] vnfm_core::Error),
    /// A driver failed.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// The state file could not be opened or used.
    #[error("state file {}: {message}", path.display())]
    State {
        /// The state file.
        path: PathBuf,
        /// What was wrong.
        message: String,
        /// The cause.
        #[source]
        source: Option<DriverError>,
    },
    /// Writing the output failed.
    #[error("cannot write the output")]
    Output(#[source] std::io::Error),
}

impl CliError {
    /// The exit code for this error (see [`crate::exit`]).
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) | CliError::Config { .. } | CliError::State { .. } => exit::USAGE,
            CliError::Core(e) => core_exit_code(e),
            CliError::Driver(e) => driver_exit_code(e),
            CliError::Output(_) => exit::INTERNAL,
        }
    }
}

fn core_exit_code(e: &vnfm_core::Error) -> i32 {
    match e {
        vnfm_core::Error::Invalid { .. } | vnfm_core::Error::Io { .. } => exit::USAGE,
        vnfm_core::Error::Driver(d) => driver_exit_code(d),
        _ => exit::INTERNAL,
    }
}

fn driver_exit_code(e: &DriverError) -> i32 {
    match e {
        DriverError::Unavailable { .. }
        | DriverError::Unauthenticated { .. }
        | DriverError::PermissionDenied { .. } => exit::BACKEND,
        DriverError::QuotaExceeded { .. } => exit::CAPACITY,
        DriverError::Invalid { .. } | DriverError::NotFound { .. } => exit::USAGE,
        _ => exit::INTERNAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(CliError::Usage("x".into()).exit_code(), 2);
        let unavailable = DriverError::Unavailable {
            driver: "heat",
            message: "connection refused".into(),
        };
        assert_eq!(CliError::Driver(unavailable).exit_code(), 5);
        let quota = DriverError::QuotaExceeded {
            driver: "nova",
            message: "cores".into(),
        };
        assert_eq!(
            CliError::Core(vnfm_core::Error::Driver(quota)).exit_code(),
            4
        );
    }
}
