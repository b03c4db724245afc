//! Exit codes of `vnfm`, listed in `--help`.

/// Success.
pub const OK: i32 = 0;
/// An unexpected internal failure (a bug, an IO error writing the output or the state file),
/// or an LCM operation that failed for a reason other than placement, capacity or the backend (e.g. the
/// stack failed validation): its occurrence says why.
pub const INTERNAL: i32 = 1;
/// Bad usage, configuration or input (file, field or value), including a corrupt state file.
pub const USAGE: i32 = 2;
/// The placement is infeasible: the constraints cannot be met, or no candidate region serves
/// a deployment intent (a valid "no").
pub const INFEASIBLE: i32 = 3;
/// Capacity is exhausted: no zone, host or reservation has room.
pub const CAPACITY: i32 = 4;
/// The backend is unreachable or rejected the credentials, or the state file stayed locked by
/// another writer.
pub const BACKEND: i32 = 5;

/// `vnfm cluster verify` found a violation: two pods of a required anti-affinity group (or a
/// required spread over its maxSkew) on one physical host, or a node label naming another host
/// than the node's.
pub const VIOLATION: i32 = 6;

/// The operation was interrupted (SIGINT or SIGTERM): its occurrence is `FAILED_TEMP` and can
/// be retried, rolled back or failed (`vnfm op retry|rollback|fail`).
pub const INTERRUPTED: i32 = 130;

/// The EXIT STATUS section of `--help`.
pub const HELP: &str = "\
EXIT STATUS:
  0  success
  1  internal error (including a state file that cannot be read or written: IO error, disk
     full), or an operation that failed for another reason (e.g. a stack that failed
     validation); the operation occurrence printed on stdout says why
  2  usage, configuration or input error (bad flag, file, field or value; corrupt state file;
     unknown instance; an operation not allowed in the instance's state)
  3  infeasible placement: the placement constraints cannot be met, or no candidate region
     serves the deployment intent (vnfm select, --intent)
  4  capacity exhausted: no zone, host or reservation has room, or no zone left to reselect
  5  backend unreachable, or authentication / authorization failed, or the state file stayed
     locked by another writer
  6  vnfm cluster verify found a violation: pods of one required anti-affinity or spread group
     on one physical host, or a node label naming another host than the node's
  130  interrupted (SIGINT, SIGTERM): the operation is FAILED_TEMP; `vnfm op retry|rollback|
     fail OP_ID` continues, undoes or gives it up
  A closed output pipe (e.g. `vnfm ... | head`) exits 0.";
