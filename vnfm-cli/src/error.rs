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
    /// The state file could not be opened or used: exit 2 when the file is the caller's to
    /// fix (a path where it cannot be created, not a vnfm state database, a newer schema, a
    /// corrupt document), 5 when another writer held it too long, 1 when reading or writing it
    /// failed (IO error, disk full).
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
    /// The state database (`[state] url`, PostgreSQL) cannot be used; exit codes as for
    /// [`CliError::State`] (5 when the server cannot be reached or refuses the credentials).
    #[error("state database {url}: {message}")]
    StateDb {
        /// The database's URL, without its password.
        url: String,
        /// What was wrong.
        message: String,
        /// The cause.
        #[source]
        source: Option<DriverError>,
    },
    /// Writing the output failed.
    #[error("cannot write the output")]
    Output(#[source] std::io::Error),
    /// An LCM operation could not start.
    #[error(transparent)]
    Lcm(#[from] vnfm_core::lifecycle::LcmError),
    /// An LCM operation started and failed (its occurrence, printed on stdout, says why).
    #[error("operation {op_occ} ended {state}: {detail}")]
    Operation {
        /// The occurrence id.
        op_occ: String,
        /// Its final state.
        state: String,
        /// Why it failed.
        kind: vnfm_core::lifecycle::FailureKind,
        /// The ProblemDetails detail.
        detail: String,
    },
    /// The reservation ledger refused a request (a counter-offer, when there is one, was
    /// printed on stdout).
    #[error(transparent)]
    Promise(#[from] vnfm_core::reservation::LedgerError),
    /// A deployment intent that no candidate region can serve (exit 3), or that the chosen
    /// region cannot realise.
    #[error("{detail}")]
    Intent {
        /// Why.
        detail: String,
        /// A valid "no" (exit 3), rather than a bad input (exit 2).
        infeasible: bool,
    },
    /// A cluster check or change did not complete.
    #[error(transparent)]
    Cluster(#[from] vnfm_core::cluster::ClusterError),
    /// `vnfm cluster verify` found a violation (the report was printed on stdout).
    #[error("{0}")]
    Violation(String),
    /// The local granter gave no grant.
    #[error("no grant: {detail}")]
    Grant {
        /// Why.
        kind: vnfm_core::lifecycle::FailureKind,
        /// Details.
        detail: String,
    },
}

impl CliError {
    /// The exit code for this error (see [`crate::exit`]).
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) | CliError::Config { .. } => exit::USAGE,
            CliError::State { source, .. } | CliError::StateDb { source, .. } => {
                state_exit_code(source.as_ref())
            }
            CliError::Core(e) => core_exit_code(e),
            CliError::Driver(e) => driver_exit_code(e),
            CliError::Output(_) => exit::INTERNAL,
            // Not found, a conflict with the instance's state, an invalid request, or an
            // unusable state file: all are the caller's to fix.
            CliError::Lcm(_) => exit::USAGE,
            CliError::Operation { kind, .. } | CliError::Grant { kind, .. } => {
                failure_exit_code(*kind)
            }
            CliError::Promise(e) => ledger_exit_code(e),
            CliError::Cluster(vnfm_core::cluster::ClusterError::Driver { source, .. }) => {
                driver_exit_code(source)
            }
            // nodes that match no server, or a bad label key: the caller's to fix
            CliError::Cluster(_) => exit::USAGE,
            CliError::Violation(_) => exit::VIOLATION,
            CliError::Intent { infeasible, .. } => {
                if *infeasible {
                    exit::INFEASIBLE
                } else {
                    exit::USAGE
                }
            }
        }
    }
}

/// The exit code of a state file that could not be used, from the store's error (`None`: the
/// CLI found the file unusable itself, e.g. its folder cannot be created).
fn state_exit_code(source: Option<&DriverError>) -> i32 {
    use rusqlite::ErrorCode as C;
    let Some(e) = source else {
        return exit::USAGE;
    };
    match e {
        // Not a vnfm state database, a newer schema: the store says so without a cause.
        DriverError::Other { source: None, .. } => exit::USAGE,
        DriverError::Other {
            source: Some(cause),
            ..
        } => {
            if let Some(sql) = cause.downcast_ref::<rusqlite::Error>() {
                match sql.sqlite_error_code() {
                    // The path or the file is the caller's to fix.
                    Some(
                        C::CannotOpen
                        | C::NotADatabase
                        | C::DatabaseCorrupt
                        | C::ReadOnly
                        | C::PermissionDenied,
                    ) => exit::USAGE,
                    // IO errors, a full disk, and anything else SQLite reports: the store
                    // failed, not the input.
                    _ => exit::INTERNAL,
                }
            } else if cause.is::<serde_json::Error>() {
                // A stored document that does not decode: a corrupt state file.
                exit::USAGE
            } else {
                exit::INTERNAL
            }
        }
        // Locked by another writer past the busy timeout (5), or what the driver says.
        other => driver_exit_code(other),
    }
}

/// The exit code of a refusal of the reservation ledger: 4 when capacity (of a zone or of a
/// reservation) is short, 2 for a bad request (unknown reservation, not active, a policy
/// limit, ...).
pub fn ledger_exit_code(e: &vnfm_core::reservation::LedgerError) -> i32 {
    use vnfm_core::reservation::{LedgerError as L, Rejection as R};
    match e {
        L::Invalid(e) => core_exit_code(e),
        L::DoesNotFit { .. } | L::CapacityInUse { .. } => exit::CAPACITY,
        L::Rejected(R::InsufficientCapacity { .. } | R::InsufficientRemaining { .. }) => {
            exit::CAPACITY
        }
        L::Rejected(_) => exit::USAGE,
        _ => exit::INTERNAL,
    }
}

/// The exit code of an operation that failed for `kind`.
pub fn failure_exit_code(kind: vnfm_core::lifecycle::FailureKind) -> i32 {
    use vnfm_core::lifecycle::FailureKind as K;
    match kind {
        K::Infeasible => exit::INFEASIBLE,
        K::CapacityExhausted => exit::CAPACITY,
        K::Backend => exit::BACKEND,
        K::Invalid => exit::USAGE,
        K::StackFailed | K::Hook => exit::INTERNAL,
        K::Interrupted => exit::INTERRUPTED,
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
        // A row of the state file that does not decode: a corrupt state file, the caller's
        // to fix (the message names the table, the row and the field).
        DriverError::Other {
            driver: "sqlite",
            source: Some(cause),
            ..
        } if cause.is::<serde_json::Error>() => exit::USAGE,
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

    fn state(source: Option<DriverError>) -> i32 {
        CliError::State {
            path: "s.sqlite".into(),
            message: "x".into(),
            source,
        }
        .exit_code()
    }

    fn sql(code: rusqlite::ffi::ErrorCode) -> DriverError {
        let e = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error {
                code,
                extended_code: 0,
            },
            None,
        );
        DriverError::Other {
            driver: "sqlite",
            message: "x".into(),
            source: Some(Box::new(e)),
        }
    }

    #[test]
    fn a_failing_state_file_is_1_or_5_an_unusable_one_2() {
        use rusqlite::ffi::ErrorCode as C;
        // The caller's to fix: no folder, not a vnfm database, a newer schema, corrupt.
        assert_eq!(state(None), 2);
        let not_vnfm = DriverError::Other {
            driver: "sqlite",
            message: "not a vnfm state database".into(),
            source: None,
        };
        assert_eq!(state(Some(not_vnfm)), 2);
        assert_eq!(state(Some(sql(C::NotADatabase))), 2);
        assert_eq!(state(Some(sql(C::CannotOpen))), 2);
        let json = serde_json::from_str::<u8>("x").unwrap_err();
        let corrupt = DriverError::Other {
            driver: "sqlite",
            message: "x".into(),
            source: Some(Box::new(json)),
        };
        assert_eq!(state(Some(corrupt)), 2);
        // The store failed: IO, a full disk (1); locked by another writer (5).
        assert_eq!(state(Some(sql(C::SystemIoFailure))), 1);
        assert_eq!(state(Some(sql(C::DiskFull))), 1);
        let busy = DriverError::Unavailable {
            driver: "sqlite",
            message: "locked".into(),
        };
        assert_eq!(state(Some(busy)), 5);
    }
}
