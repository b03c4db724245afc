//! What the machine hands out ([`OpAction`]), what comes back ([`OpEvent`]) and what it
//! starts from ([`OperationStart`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::progress::Progress;
use crate::driver::{
    ApplyObject, ClusterNode, CreateStack, DeletePod, DriverError, GrantAnswer, ListPods,
    ListResources, MarkUnhealthy, ObjectRef, Pod, ScaleWorkload, ServerInfo, Stack, StackResource,
    StoreBatch, UpdateStack, Versioned,
};
use crate::grant::GrantRequest;
use crate::id::{ServerId, StackId};
use crate::lcm::{VnfInstance, VnfLcmOpOcc};
use crate::lifecycle::hook::{HookCall, HookSpec};
use crate::package::VnfPackage;
use crate::zone::ComputeZone;

/// One action for the caller to carry out; its result goes back as the [`OpEvent`] named.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum OpAction {
    /// Commit this batch to the store → [`OpEvent::Committed`].
    Commit(StoreBatch),
    /// List the zone catalogue → [`OpEvent::Zones`].
    ListZones,
    /// Create a stack → [`OpEvent::StackCreated`].
    CreateStack(CreateStack),
    /// Update a stack → [`OpEvent::StackUpdated`].
    UpdateStack(UpdateStack),
    /// Show a stack → [`OpEvent::Stack`].
    ShowStack(StackId),
    /// Delete a stack → [`OpEvent::StackDeleted`].
    DeleteStack(StackId),
    /// List a stack's resources → [`OpEvent::Resources`].
    ListResources(ListResources),
    /// Mark a resource unhealthy → [`OpEvent::Marked`].
    MarkUnhealthy(MarkUnhealthy),
    /// Show each server → [`OpEvent::Servers`] (one answer per server).
    ShowServers(Vec<ServerId>),
    /// Run an end-of-operation hook → [`OpEvent::Hook`].
    RunHook(Box<HookCall>),
    /// List the cluster's nodes → [`OpEvent::Nodes`].
    ListNodes,
    /// Apply each object, in order → [`OpEvent::ObjectsApplied`] (one answer per object).
    ApplyObjects(Vec<ApplyObject>),
    /// Scale each workload → [`OpEvent::WorkloadsScaled`] (one answer per workload).
    ScaleWorkloads(Vec<ScaleWorkload>),
    /// List pods → [`OpEvent::Pods`].
    ListPods(ListPods),
    /// Delete each pod → [`OpEvent::PodsDeleted`] (one answer per pod).
    DeletePods(Vec<DeletePod>),
    /// Delete each object → [`OpEvent::ObjectsDeleted`] (one answer per object).
    DeleteObjects(Vec<ObjectRef>),
    /// Start (`on`) or stop each server → [`OpEvent::PowerSet`] (one answer per server).
    SetPower {
        /// The servers.
        servers: Vec<ServerId>,
        /// Start (true) or stop.
        on: bool,
    },
    /// Send the grant request to the NFVO → [`OpEvent::Grant`] (see
    /// [`crate::lifecycle::types::NfvoGrants`]).
    RequestGrant(Box<GrantRequest>),
    /// Read the grant the NFVO is creating at this location → [`OpEvent::Grant`].
    PollGrant(String),
}

/// The result of an [`OpAction`].
#[derive(Debug)]
#[non_exhaustive]
pub enum OpEvent {
    /// Of [`OpAction::Commit`].
    Committed(Result<(), DriverError>),
    /// Of [`OpAction::ListZones`].
    Zones(Result<Vec<ComputeZone>, DriverError>),
    /// Of [`OpAction::CreateStack`].
    StackCreated(Result<StackId, DriverError>),
    /// Of [`OpAction::UpdateStack`].
    StackUpdated(Result<(), DriverError>),
    /// Of [`OpAction::ShowStack`].
    Stack(Result<Stack, DriverError>),
    /// Of [`OpAction::DeleteStack`].
    StackDeleted(Result<(), DriverError>),
    /// Of [`OpAction::ListResources`].
    Resources(Result<Vec<StackResource>, DriverError>),
    /// Of [`OpAction::MarkUnhealthy`].
    Marked(Result<(), DriverError>),
    /// Of [`OpAction::ShowServers`].
    Servers(BTreeMap<ServerId, Result<ServerInfo, DriverError>>),
    /// Of [`OpAction::RunHook`]: what it did, or why it failed.
    Hook(Result<String, String>),
    /// Of [`OpAction::ListNodes`].
    Nodes(Result<Vec<ClusterNode>, DriverError>),
    /// Of [`OpAction::ApplyObjects`], in the order asked.
    ObjectsApplied(Vec<Result<(), DriverError>>),
    /// Of [`OpAction::ScaleWorkloads`], in the order asked.
    WorkloadsScaled(Vec<Result<(), DriverError>>),
    /// Of [`OpAction::ListPods`].
    Pods(Result<Vec<Pod>, DriverError>),
    /// Of [`OpAction::DeletePods`], in the order asked.
    PodsDeleted(Vec<Result<(), DriverError>>),
    /// Of [`OpAction::DeleteObjects`], in the order asked.
    ObjectsDeleted(Vec<Result<(), DriverError>>),
    /// Of [`OpAction::SetPower`], in the order asked.
    PowerSet(Vec<Result<(), DriverError>>),
    /// Of [`OpAction::RequestGrant`] and [`OpAction::PollGrant`].
    Grant(Result<GrantAnswer, DriverError>),
}

/// What an [`Operation`](super::Operation) starts from.
#[derive(Clone, Debug)]
pub struct OperationStart {
    /// The occurrence: new (`STARTING`, not stored yet) or, to resume, as stored.
    pub op: Versioned<VnfLcmOpOcc>,
    /// Resume a stored occurrence (`FAILED_TEMP`, or one whose lease expired) instead of
    /// starting a new one.
    pub resume: bool,
    /// The instance as read.
    pub instance: Versioned<VnfInstance>,
    /// What to do and how far it got.
    pub progress: Progress,
    /// The package (every plan but terminate and an instantiate rollback needs it).
    pub package: Option<Arc<VnfPackage>>,
    /// The lease owner (`<program>:<host>:<pid>:<nonce>`).
    pub owner: String,
    /// The hooks, in the order they run.
    pub hooks: Vec<HookSpec>,
}
