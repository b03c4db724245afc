//! Hardware-aware affinity for container clusters whose nodes are VMs: which compute host
//! each node runs on, the node labels that let pod anti-affinity spread over hardware, and
//! checks that it does.
//!
//! The decisions are pure (`hosts`, `labels`, `verify`, `workload`): node, server and pod
//! lists in, label patches, reports and evictions out. `run` is the async shell around them:
//! it reads and writes through the drivers ([`crate::driver::ClusterDriver`],
//! [`crate::driver::ComputeInventory`]) and decides nothing; the CLI wires.

pub mod hosts;
pub mod labels;
pub mod run;
pub mod verify;
pub mod workload;

pub use hosts::{HostSource, MatchError, MatchedBy};
pub use labels::{plan_labels, LabelConfig, LabelError, LabelPlan, DEFAULT_HOST_LABEL, ZONE_LABEL};
pub use run::{
    label_workers, reconcile, servers_of, verify_cluster, ClusterError, HostLabelHook, Labelled,
    Reconciled,
};
pub use verify::{evictions, verify, Eviction, VerifyReport};
pub use workload::{
    AffinityTerm, LabelSelector, Requirement, SpreadConstraint, Workload, WorkloadError,
};
