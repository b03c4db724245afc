//! How the simulator fails: the driver name and the `not found` of the errors it returns,
//! Heat's resource failures and the status a stack action ends in, and the faults a test plans
//! for the next server builds ([`BuildFault`]) and stack deletes ([`StackDeleteFault`]).

use crate::driver::{DriverError, StackAction, StackState, StackStatus};

/// The driver name of every error the simulator returns.
pub(crate) const DRIVER: &str = "sim";

/// The simulator's [`DriverError::NotFound`] for the `kind` (`zone`, `host`, `server`, ...)
/// named `what`.
pub(crate) fn not_found(kind: &str, what: &str) -> DriverError {
    DriverError::NotFound {
        driver: DRIVER,
        what: format!("{kind} {what}"),
    }
}

/// Parses a Heat status the simulator produced (always valid).
pub(crate) fn status(action: StackAction, ok: bool) -> StackStatus {
    StackStatus::new(
        action,
        if ok {
            StackState::Complete
        } else {
            StackState::Failed
        },
    )
}

/// The outcome of a server build that Heat turns into a resource failure.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Failure {
    /// The exception type Heat prefixes (`ResourceInError`, `BadRequest`, ...), if any.
    pub(super) kind: Option<String>,
    /// Path components such as `["resources", "vdus", "resources", "0"]`.
    pub(super) path: Vec<String>,
    /// The message.
    pub(super) message: String,
}

impl Failure {
    /// A failure of `kind` at `path` with `message`.
    pub(super) fn new(kind: Option<&str>, path: Vec<String>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.map(str::to_owned),
            path,
            message: message.into(),
        }
    }
}

/// Heat's `ResourceFailure` built from the status reason of a resource's nested stack
/// (`heat/common/exception.py`): when the reason holds `Resource <ACTION> failed: ` for the
/// resource's own action, it is split on `:` and re-joined as `<error>: <path>: <message>`
/// with `resources.<name>` in front of the path, otherwise the reason is kept whole behind
/// `resources.<name>: `. This is what glues an autoscaling group's update failure into
/// `resources.3anlrib6cpvf: resources.VDU1_scale_group.Resource CREATE failed: ...`.
pub(crate) fn resource_failure(reason: &str, resource: &str, action: StackAction) -> Failure {
    let mut path = vec!["resources".to_owned(), resource.to_owned()];
    let marker = format!("Resource {} failed: ", action.as_str());
    if !reason.contains(&marker) {
        return Failure::new(None, path, reason);
    }
    let parsed: Vec<&str> = reason.split(':').map(str::trim).collect();
    if parsed.len() < 4 {
        return Failure::new(None, path, reason);
    }
    path.extend(parsed[2].split('.').map(str::to_owned));
    let error = Some(parsed[1]).filter(|e| !e.is_empty());
    Failure::new(error, path, parsed[3..].join(": "))
}

/// Heat's path format: `resources.vdus.resources[0]` (numeric names as indices).
pub(super) fn format_path(path: &[String]) -> String {
    let mut out = String::new();
    for (i, p) in path.iter().enumerate() {
        if i == 0 {
            out.push_str(p);
        } else if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{p}]"));
        } else {
            out.push('.');
            out.push_str(p);
        }
    }
    out
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(k) = &self.kind {
            write!(f, "{k}: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", format_path(&self.path))?;
        }
        f.write_str(&self.message)
    }
}

/// How the next server builds fail (the request itself is accepted by Heat).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum BuildFault {
    /// Nova's reschedule limit: the server goes to ERROR with
    /// `Exceeded maximum number of retries. Exhausted all hosts available for retrying build
    /// failures for instance <uuid>.` (code 500).
    RetriesExhausted,
    /// The server goes to ERROR with this fault.
    Fault {
        /// Nova fault code.
        code: u16,
        /// Nova fault message.
        message: String,
    },
    /// Nova's API rejects the request (HTTP 400) with this message, e.g.
    /// `Image 3b2a... could not be found.`: the resource fails with
    /// `BadRequest: resources.<name>: <message> (HTTP 400) (Request-ID: req-...)`, a failure
    /// that is not about capacity.
    Rejected {
        /// The API's message.
        message: String,
    },
}

/// How the next stack deletes go (the `delete_stack` call itself is accepted).
///
/// Without a planned fault a delete shows `DELETE_IN_PROGRESS` (`Stack DELETE started`) to
/// the first [`StackDriver::show_stack`] of the stack and is gone (`NotFound`) at the next one;
/// the stack's servers keep their capacity until then.
///
/// [`StackDriver::show_stack`]: crate::driver::StackDriver::show_stack
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum StackDeleteFault {
    /// The stack shows `DELETE_IN_PROGRESS` to the next `shows` calls of `show_stack`, and
    /// is gone at the one after (`shows: 0`: gone at the first).
    Slow {
        /// How many `show_stack` calls still see the delete in progress.
        shows: u32,
    },
    /// After one `show_stack` that sees `DELETE_IN_PROGRESS`, the delete ends `DELETE_FAILED`
    /// and the stack stays, with every resource and server; a later `delete_stack` starts
    /// over (and can succeed). The first server of the stack (listing order, nested stacks
    /// included) is the one Nova failed to delete, with the text of Heat's Nova client
    /// plugin: `Resource DELETE failed: ResourceInError: resources.VDU1: Went to status
    /// ERROR due to "Server <name> delete failed: (500) <message>"` (path and nesting as
    /// Heat builds them). No Heat capture of a failed delete exists: the wording comes from
    /// Heat 27's code, not from a capture.
    Failed {
        /// Nova's fault message for the server that could not be deleted.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_paths_format_like_heat() {
        let f = Failure::new(
            Some("ResourceInError"),
            vec!["resources".into(), "0".into()],
            "m",
        );
        assert_eq!(f.to_string(), "ResourceInError: resources[0]: m");
        assert_eq!(
            resource_failure(
                &format!("Resource CREATE failed: {f}"),
                "vdus",
                StackAction::Create
            )
            .to_string(),
            "ResourceInError: resources.vdus.resources[0]: m"
        );
        // the reason of an autoscaling group whose member failed in an update (captured)
        let nested = "Resource UPDATE failed: resources.3anlrib6cpvf: Resource CREATE failed: ResourceInError: resources.VDU1: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\"";
        assert_eq!(
            resource_failure(nested, "VDU1_scale_group", StackAction::Update).to_string(),
            "resources.3anlrib6cpvf: resources.VDU1_scale_group.Resource CREATE failed: ResourceInError: resources.VDU1: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\""
        );
        // another action's failure is kept whole behind the resource's path
        assert_eq!(
            resource_failure("Resource CREATE failed: x: y", "vdus", StackAction::Update)
                .to_string(),
            "resources.vdus: Resource CREATE failed: x: y"
        );
        let g = Failure::new(None, vec!["resources".into(), "VDU1-0".into()], "x");
        assert_eq!(g.to_string(), "resources.VDU1-0: x");
    }
}
