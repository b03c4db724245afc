//! Lifecycle operations (instantiate, scale, heal, terminate, retry, rollback, fail) carried
//! out through the driver traits: the IO side of the sans-IO decisions in
//! [`crate::placement`] and [`crate::reselect`].
//!
//! - [`grant`]: the SOL003 grant request of an operation, from the package and the instance.
//! - [`approval`]: an asynchronous grant of vnfm as an NFVO, waiting for an operator
//!   (pending, approved, rejected, expired), sans-IO.
//! - [`granter`]: the local granter (zones for the new VNFCs, by the placement solver).
//! - [`userdata`]: the Heat template and `nfv` parameter (Tacker's StandardUserData layout).
//! - [`operation`]: [`Operation`], one operation as a sans-IO machine (events and `now` in,
//!   actions out), with the [`reselect`](crate::reselect) machine nested in it.
//! - `groups`: the VNFD's `nfvi_node` rules as Nova server groups (their policies, the
//!   template, the host preflight).
//! - [`hook`]: end-of-operation hooks and interrupts.
//! - [`occupancy`]: which instances take no other operation now, and the events that free
//!   them (what an alert handler's heal windows wait on).
//! - [`engine`]: [`Lifecycle`]: validates a request, builds its machine and runs it through
//!   the drivers with the loop of `run` (a few dozen lines: actions out, events in, sleeps).
//! - `recovery`: [`Lifecycle::retry`], [`Lifecycle::rollback`], [`Lifecycle::fail`] and
//!   [`Lifecycle::recover_interrupted`]: an operation that did not end, continued, undone or
//!   given up.
//! - [`events`]: what the lifecycle tells an embedder ([`LifecycleObserver`]): every commit,
//!   in order (the CLI saves its simulated cloud on them).
//! - [`cnf`]: CNFs, whose VDUs are Kubernetes workloads of the package (Tacker v2's layout):
//!   the manifests, the preflight, the pods as VNFCs; the same machine runs them through
//!   [`Drivers::cluster`].
//! - [`to_level`]: scale to level: the aspect's scale steps that reach the requested level.
//! - [`change_flavour`]: change flavour (`CHANGE_FLAVOUR`) of a package with several
//!   flavours: the request, its checks, the VNFCs the new flavour keeps.
//! - [`change_ext_conn`]: change external connectivity (`CHANGE_EXT_CONN`): the request, its
//!   checks, how its links merge into the instance's.
//! - [`operate`]: start or stop an instance's servers (`OPERATE`): the request and its checks.
//! - [`start`]: [`Lifecycle::start`], the one way to start an operation ([`OpRequest`]),
//!   with the reservation flow (draw, run pinned, settle, give back) through a
//!   [`ReservationBook`](crate::reservation::book::ReservationBook).
//! - [`takeover`]: what is done with an operation whose owner went away (interrupted, or
//!   resumed where its progress says: `[state] takeover`).
//! - [`task`]: which task (retry, rollback, fail, cancel) an occurrence takes in which state.
//! - [`modify`]: `MODIFY_INFO` (`PATCH /vnf_instances/{id}`), validated, merged and recorded.

pub mod approval;
pub mod change_ext_conn;
pub mod change_flavour;
pub mod cnf;
pub mod engine;
pub mod events;
mod failure;
pub mod grant;
pub mod granter;
pub mod grantor;
mod groups;
pub mod hook;
mod keep;
pub mod modify;
pub mod nfvo_instances;
pub mod occupancy;
pub mod operate;
pub mod operation;
mod plan;
mod recovery;
mod run;
mod stack;
pub mod start;
pub mod takeover;
mod takeover_policy;
pub mod task;
pub mod to_level;
mod types;
pub mod userdata;

pub use engine::{FailureKind, GrantOnlyResult, Lifecycle, STACK_ID_KEY};
pub use events::{CommitTicket, LifecycleEvent, LifecycleObserver};
pub use groups::SERVER_GROUPS_KEY;
pub use hook::{HookCall, HookPoint, HookSpec, Interrupt, OperationHook};
pub use occupancy::{Occupancy, OperationEvent};
pub use operation::{OpAction, OpEvent, Operation, OperationStart, Plan, Progress};
pub use recovery::TAKEOVER_GRACE;
pub use start::{OpRequest, StartError, StartOptions, Started};
pub use takeover::{Resumable, Sweep, Takeover};
pub use task::{OpTask, TaskRefused};
pub use types::{
    Drivers, GrantOnly, LcmConfig, LcmError, NfvoGrants, OperationOptions, OperationReport,
};
