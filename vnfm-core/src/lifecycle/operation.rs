//! [`Operation`]: one LCM operation as a sans-IO state machine, in the shape of quinn-proto's
//! `Connection`.
//!
//! The machine never performs IO and never reads a clock. The caller feeds it events and the
//! time ([`Operation::handle_event`], [`Operation::handle_timeout`]), carries out the actions
//! it hands out ([`Operation::poll_action`]: commit to the store, create / update / show /
//! delete a stack, list its resources, mark servers unhealthy, show servers, list zones, run a
//! hook), sleeps until [`Operation::poll_timeout`] when it has nothing to do, and stops when
//! [`Operation::poll_end`] gives the result. [`super::Lifecycle`] is that loop over the
//! driver traits; a program with its own IO drives the machine the same way.
//!
//! # Contract
//! - At most one action is out at a time: after [`Operation::poll_action`] returns one, the
//!   next call returns `None` until the action's event was handled. Each action has exactly
//!   one event ([`OpAction`] says which).
//! - Time only moves through `now` arguments. The stack timeout, the poll interval, the wait
//!   for a failed stack's resources to settle and the lease renewals are timers: when
//!   [`Operation::poll_timeout`] returns `t`, call [`Operation::handle_timeout`] at `t` (or
//!   later).
//! - Every commit carries preconditions on the versions the machine read or wrote
//!   ([`crate::driver::Precondition`]): the start takes the instance (its version must not
//!   have moved since it was read) and every later commit checks that the occurrence is still
//!   the machine's. A commit refused with [`DriverError::Conflict`] means another process took
//!   the operation over (its lease had expired): the machine stops at once and writes nothing
//!   more.
//! - Each commit of the occurrence renews its [`Lease`] (`now` + the lease time) and saves the
//!   [`Progress`], so an interrupted operation can be retried, rolled back or failed from
//!   where it stopped. While the machine waits, a renewal commit goes out every third of the
//!   lease time.
//!
//! # Plans
//! Instantiate, scale-out, scale-in, heal, terminate, change flavour, change external
//! connectivity and the rollbacks are
//! [`Plan`]s of the same machine. The placed plans (instantiate, scale-out, heal, change
//! flavour: the new flavour's template) list the zones, grant (or take
//! the zones pinned, or the healed VNFCs' own), and hand the stack to the nested
//! [`Reselection`] machine; the others update the stack to the VNFCs that stay (a change of
//! external connectivity: all of them, with its links in `nfv.CP`), or delete it.
//! Then the servers are read back, the hooks of the plan's point run, and the occurrence ends
//! in one commit with the instance. The `Cnf*` plans (see [`super::cnf`]) do the same over a
//! Kubernetes cluster: list the nodes (preflight), apply the manifests, scale the workloads,
//! delete pods or objects, and poll the pods instead of the stack.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::cnf::{self, CnfResources, CnfWork};
use super::failure::{chain, Failed, FailureKind};
use super::grant::{slots_of, PlannedGrant};
use super::granter;
use super::groups;
use super::hook::{HookCall, HookPoint, HookSpec};
use super::keep::scale_in_keep;
use super::plan::{self, STACK_ID_KEY};
use super::stack;
use super::types::{LcmConfig, LcmError, OperationReport};
use super::userdata::{Layout, VnfcSlot};
use crate::driver::{
    ApplyObject, ClusterNode, CreateStack, DeletePod, DriverError, GrantAnswer, ListPods,
    ListResources, MarkUnhealthy, ObjectRef, Pod, Precondition, ScaleWorkload, ServerInfo, Stack,
    StackAction, StackResource, StoreBatch, UpdateStack, Version, Versioned,
};
use crate::grant::{ExtVirtualLinkData, Grant, GrantRequest, KeyValuePairs, VimConnectionInfo};
use crate::id::{GrantId, ServerId, StackId, VduId, ZoneId};
use crate::intent::realise::{GroupPolicy, GroupRule};
use crate::lcm::{
    HookOutcome, InstantiatedVnfInfo, InstantiationState, LcmOperationStateType, Lease,
    VnfInstance, VnfLcmOpOcc, VnfOperationalStateType, VnfcResourceInfo,
};
use crate::package::{Flavour, VnfPackage};
use crate::problem::ProblemDetails;
use crate::reselect::{
    top_level_resource, Action as ReselectAction, GiveUp, History, Outcome, ReselectConfig,
    Reselection, Unit,
};
use crate::zone::{ComputeZone, Resources};

/// What an operation does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Plan {
    /// Instantiate with a flavour: create the stack `stack_name`.
    #[serde(rename_all = "camelCase")]
    Instantiate {
        /// The flavour.
        flavour_id: String,
        /// The name of the stack to create.
        stack_name: String,
        /// `vnfConfigurableProperties` of the request, merged into the instance.
        #[serde(default)]
        configurable: Option<KeyValuePairs>,
        /// `instantiationLevelId` of the request (`None`: the default level).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        level: Option<String>,
    },
    /// Scale out: new VNFCs, granted, under reselection.
    #[serde(rename_all = "camelCase")]
    ScaleOut {
        /// The aspect.
        aspect_id: String,
        /// The scale level after.
        new_level: u32,
    },
    /// Scale in: the newest VNFCs of every VDU of the aspect go.
    #[serde(rename_all = "camelCase")]
    ScaleIn {
        /// The aspect.
        aspect_id: String,
        /// Steps.
        steps: u32,
        /// The scale level after.
        new_level: u32,
    },
    /// Scale to level of several aspects at once (see [`super::to_level`]): every VDU to its
    /// VNFC count at the new levels, granted (what it adds and what goes), one stack update,
    /// under reselection.
    #[serde(rename_all = "camelCase")]
    ScaleToLevel {
        /// The level after of every aspect that changes.
        levels: BTreeMap<String, u32>,
        /// `instantiationLevelId` of the request, when it named one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        level: Option<String>,
    },
    /// Heal VNFCs: mark their servers unhealthy, update the stack, in their zones first.
    #[serde(rename_all = "camelCase")]
    Heal {
        /// `cause` of the request.
        #[serde(default)]
        cause: Option<String>,
    },
    /// Delete the stack; the instance returns to `NOT_INSTANTIATED`.
    Terminate,
    /// `MODIFY_INFO`: a `VnfInfoModificationRequest` applied to the instance (see
    /// [`super::modify`]); no VIM action.
    #[serde(rename_all = "camelCase")]
    ModifyInfo {
        /// The request, checked ([`super::modify::check`]).
        patch: KeyValuePairs,
    },
    /// Roll a failed instantiate back: delete the stack it created.
    RollbackInstantiate,
    /// SOL003 "fail" of an instantiate that created a stack: the stack is deleted first (the
    /// occurrence is `ROLLING_BACK` meanwhile), then the occurrence ends `FAILED` with its
    /// error and the instance stays `NOT_INSTANTIATED`, with no stack behind it. When the
    /// stack cannot be deleted the occurrence returns to `FAILED_TEMP` (the instance records
    /// the stack), and the fail is refused.
    FailInstantiate,
    /// Roll a failed scale-out back: update the stack to the VNFCs before it.
    RollbackScaleOut,
    /// Roll a failed [`Plan::ScaleToLevel`] back: update the stack to the VNFCs before it
    /// (those it removed are created again) and read the servers back; every aspect is at its
    /// level before.
    RollbackScaleToLevel,
    /// Instantiate a CNF (see [`super::cnf`]): the preflight over the cluster's nodes, the
    /// manifests applied, the pods awaited.
    #[serde(rename_all = "camelCase")]
    CnfInstantiate {
        /// The flavour.
        flavour_id: String,
        /// `vnfConfigurableProperties` of the request, merged into the instance.
        #[serde(default)]
        configurable: Option<KeyValuePairs>,
        /// `instantiationLevelId` of the request (`None`: the default level).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        level: Option<String>,
    },
    /// Scale a CNF out or in: its workloads scaled to the replicas of [`Progress::cnf`].
    #[serde(rename_all = "camelCase")]
    CnfScale {
        /// The aspect.
        aspect_id: String,
        /// The scale level after.
        new_level: u32,
    },
    /// Heal a CNF's VNFCs: their pods deleted (grace 0), their controllers' new ones awaited.
    #[serde(rename_all = "camelCase")]
    CnfHeal {
        /// `cause` of the request.
        #[serde(default)]
        cause: Option<String>,
    },
    /// Terminate a CNF: its objects deleted.
    CnfTerminate,
    /// Roll a failed CNF instantiate back: delete the objects it applied.
    CnfRollbackInstantiate,
    /// `CHANGE_FLAVOUR` (see [`super::change_flavour`]): the VNFCs of the new flavour at the
    /// level, granted (what it adds and what goes), the stack updated with the new flavour's
    /// template, under reselection.
    #[serde(rename_all = "camelCase")]
    ChangeFlavour {
        /// The new flavour.
        flavour_id: String,
        /// `instantiationLevelId` of the request (`None`: the new flavour's default level).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        level: Option<String>,
    },
    /// Roll a failed change of flavour back: update the stack to the old flavour's template
    /// and the VNFCs before it.
    RollbackChangeFlavour,
    /// `CHANGE_EXT_CONN` (see [`super::change_ext_conn`]): the stack updated with the same
    /// template and VNFCs and the `nfv.CP` section of `links`; the instance then records them.
    #[serde(rename_all = "camelCase")]
    ChangeExtConn {
        /// The instance's external virtual links after the request (merged).
        links: Vec<ExtVirtualLinkData>,
        /// `vimConnectionInfo` of the request, merged into the instance's.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        vim_connection_info: BTreeMap<String, VimConnectionInfo>,
    },
    /// Roll a failed change of external connectivity back: update the stack to the links
    /// before it.
    RollbackChangeExtConn,
    /// `OPERATE`: start (`on`) or stop the instance's servers through the VIM (Nova
    /// `os-start` / `os-stop`), those not in the wanted state yet, and wait until each is
    /// `ACTIVE` / `SHUTOFF`; `vnfState` and every `vnfcState` then say it.
    #[serde(rename_all = "camelCase")]
    Operate {
        /// Start (true) or stop.
        on: bool,
        /// The instance's servers.
        servers: Vec<ServerId>,
    },
}

impl Plan {
    fn hook_point(&self) -> Option<HookPoint> {
        match self {
            Self::Instantiate { .. } => Some(HookPoint::InstantiateEnd),
            Self::ScaleOut { .. } | Self::ScaleIn { .. } | Self::ScaleToLevel { .. } => {
                Some(HookPoint::ScaleEnd)
            }
            Self::Heal { .. } => Some(HookPoint::HealEnd),
            Self::Terminate => Some(HookPoint::TerminateStart),
            Self::CnfInstantiate { .. } => Some(HookPoint::InstantiateEnd),
            Self::CnfScale { .. } => Some(HookPoint::ScaleEnd),
            Self::CnfHeal { .. } => Some(HookPoint::HealEnd),
            Self::CnfTerminate => Some(HookPoint::TerminateStart),
            Self::RollbackInstantiate
            | Self::FailInstantiate
            | Self::RollbackScaleOut
            | Self::RollbackScaleToLevel
            | Self::RollbackChangeFlavour
            | Self::ChangeFlavour { .. }
            | Self::ChangeExtConn { .. }
            | Self::RollbackChangeExtConn
            | Self::CnfRollbackInstantiate
            | Self::ModifyInfo { .. }
            | Self::Operate { .. } => None,
        }
    }

    /// A rollback, or the fail of an instantiate (which undoes the stack as a rollback does,
    /// `ROLLING_BACK` while it runs).
    fn is_rollback(&self) -> bool {
        matches!(
            self,
            Self::RollbackInstantiate
                | Self::FailInstantiate
                | Self::RollbackScaleOut
                | Self::RollbackScaleToLevel
                | Self::RollbackChangeFlavour
                | Self::RollbackChangeExtConn
                | Self::CnfRollbackInstantiate
        )
    }

    /// Whether the plan is a CNF's (its VDUs are Kubernetes workloads).
    pub fn is_cnf(&self) -> bool {
        matches!(
            self,
            Self::CnfInstantiate { .. }
                | Self::CnfScale { .. }
                | Self::CnfHeal { .. }
                | Self::CnfTerminate
                | Self::CnfRollbackInstantiate
        )
    }

    fn is_placed(&self) -> bool {
        matches!(
            self,
            Self::Instantiate { .. }
                | Self::ScaleOut { .. }
                | Self::ScaleToLevel { .. }
                | Self::Heal { .. }
                | Self::ChangeFlavour { .. }
        )
    }
}

/// Where an operation stands, saved in the occurrence (`progress`) with every commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// What the operation does.
    pub plan: Plan,
    /// The grant request and its new VNFCs (placed plans).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned: Option<PlannedGrant>,
    /// Why the grant request could not be built (the operation then fails `INVALID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_error: Option<String>,
    /// The grant request of a plan that removes resources only (scale-in, terminate), built
    /// when an NFVO grants ([`super::NfvoGrants`]): asked of it, never of the local granter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removal: Option<GrantRequest>,
    /// Zones an NFVO pinned, per VNFC or VDU.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pinned: BTreeMap<String, ZoneId>,
    /// The id of the grant the local granter gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<GrantId>,
    /// The zone of every new VNFC once granted (a retry does not grant again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<BTreeMap<String, ZoneId>>,
    /// The stack, once it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_id: Option<StackId>,
    /// Heal: the servers were marked unhealthy.
    #[serde(default)]
    pub marked: bool,
    /// The zone of every reselection unit in the last stack apply.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub zones: BTreeMap<String, ZoneId>,
    /// What the reselection learned so far: every stack apply (attempt), the zones excluded
    /// and the reselections spent, across every run of the operation. A retry goes on with it
    /// (never applies an excluded zone again, never passes `max_reselections` in all), and the
    /// occurrence's `attempts` is its list.
    #[serde(default, skip_serializing_if = "History::is_empty")]
    pub reselection: History,
    /// The VNFCs read back once the stack reached its new state (a retry then only runs the
    /// hooks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnfcs: Option<Vec<VnfcResourceInfo>>,
    /// The stack was deleted (terminate: a retry only records the end).
    #[serde(default)]
    pub deleted: bool,
    /// A CNF plan's work: the instance's Kubernetes resources after it, what to apply or
    /// delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cnf: Option<CnfWork>,
    /// The policy of the server group of every `nfvi_node` rule (rule → policy): decided
    /// from the configuration when an instantiation first places its VNFCs, read from the
    /// instance by the other plans; `None` until then, and for an instance that records none
    /// (no group is added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_groups: Option<BTreeMap<String, GroupPolicy>>,
}

impl Progress {
    /// A plan that has not started.
    pub fn new(plan: Plan) -> Self {
        Self {
            plan,
            planned: None,
            planned_error: None,
            removal: None,
            pinned: BTreeMap::new(),
            grant_id: None,
            granted: None,
            stack_id: None,
            marked: false,
            zones: BTreeMap::new(),
            reselection: History::default(),
            vnfcs: None,
            deleted: false,
            cnf: None,
            server_groups: None,
        }
    }
}

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
    /// [`super::types::NfvoGrants`]).
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

/// What an [`Operation`] starts from.
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    /// A stack apply of the reselection machine.
    Reselect,
    /// Updating the stack to the VNFCs that stay (scale-in, scale-out rollback).
    Restore,
}

#[derive(Debug)]
enum Step {
    Start,
    /// A grant request or poll is out to the NFVO (the occurrence is `STARTING`).
    GrantAsked {
        deadline: DateTime<Utc>,
        location: Option<String>,
    },
    /// Waiting to ask the NFVO again: poll `location`, or send the request again.
    GrantWait {
        deadline: DateTime<Utc>,
        location: Option<String>,
        /// Why the last attempt failed, if it did.
        error: Option<String>,
    },
    Processing,
    MarkList,
    Marking(VecDeque<MarkUnhealthy>),
    GrantZones,
    Apply(Purpose),
    StackWait {
        deadline: DateTime<Utc>,
        purpose: Purpose,
    },
    Settle {
        deadline: DateTime<Utc>,
    },
    ReselectZones,
    FailedServers,
    Hosts(BTreeMap<ServerId, Vec<String>>),
    CollectList,
    CollectServers(Vec<stack::Found>),
    Hooks(VecDeque<String>),
    DeleteSent,
    DeleteWait {
        deadline: DateTime<Utc>,
    },
    ResumeWait {
        deadline: DateTime<Utc>,
    },
    CnfNodes,
    CnfApply,
    CnfScaling,
    CnfDeletingPods,
    CnfWait {
        deadline: DateTime<Utc>,
        /// Until when an `Unschedulable` verdict is provisional ([`cnf::VERDICT_SETTLE`]).
        settle_until: DateTime<Utc>,
    },
    CnfDeleting,
    PowerCheck,
    PowerSent(Vec<ServerId>),
    PowerWait {
        deadline: DateTime<Utc>,
        servers: Vec<ServerId>,
    },
    Final,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Inflight {
    Main,
    Renewal,
}

/// The placed part of an operation: the stack's VNFC slots, the layouts and the reselection
/// machine.
#[derive(Debug)]
struct Placed {
    layouts: BTreeMap<VduId, Layout>,
    slots: Vec<VnfcSlot>,
    m: Reselection,
    /// The machine is the operation's reselection (its history is saved in
    /// [`Progress::reselection`]), not the one-apply machine of a restore.
    records: bool,
}

/// One LCM operation as a sans-IO machine (see the [module docs](self)).
#[derive(Debug)]
pub struct Operation {
    cfg: LcmConfig,
    pkg: Option<Arc<VnfPackage>>,
    hooks: Vec<HookSpec>,
    owner: String,
    op: VnfLcmOpOcc,
    occ_version: Option<Version>,
    resume: bool,
    /// A new operation, or a resumed one stored `STARTING` only (not a rollback): it enters
    /// `STARTING`, asks the NFVO's grant if one grants, then `PROCESSING`.
    unstarted: bool,
    /// The `PROCESSING` commit (of an unstarted operation) was made.
    processing_stored: bool,
    before: VnfInstance,
    inst_version: Version,
    progress: Progress,
    grant: Option<Grant>,
    step: Step,
    next: Option<OpAction>,
    inflight: Option<Inflight>,
    now: DateTime<Utc>,
    timer: Option<DateTime<Utc>>,
    renew_at: Option<DateTime<Utc>>,
    placed: Option<Placed>,
    after: Option<VnfInstance>,
    failure: Option<Failed>,
    interrupt: Option<String>,
    /// Save the progress before the next action (a stack was just created: its id must be
    /// known to a rollback even if the process dies now).
    checkpoint: bool,
    end: Option<Result<OperationReport, LcmError>>,
}

impl Operation {
    /// A machine for `start` under `cfg` at `now`; its first action is the commit that starts
    /// (or resumes) the occurrence.
    pub fn new(cfg: LcmConfig, start: OperationStart, now: DateTime<Utc>) -> Self {
        let unstarted = !start.resume
            || (start.op.value.operation_state == LcmOperationStateType::Starting
                && !start.progress.plan.is_rollback());
        let mut progress = start.progress;
        if progress.reselection.is_empty() && !start.op.value.attempts.is_empty() {
            // Saved by a vnfm that kept the attempts in the occurrence only.
            progress.reselection = History::from_attempts(start.op.value.attempts.clone());
        }
        let mut m = Self {
            cfg,
            pkg: start.package,
            hooks: start.hooks,
            owner: start.owner,
            occ_version: start.resume.then_some(start.op.version),
            op: start.op.value,
            resume: start.resume,
            unstarted,
            processing_stored: false,
            before: start.instance.value,
            inst_version: start.instance.version,
            progress,
            grant: None,
            step: Step::Start,
            next: None,
            inflight: None,
            now,
            timer: None,
            renew_at: None,
            placed: None,
            after: None,
            failure: None,
            interrupt: None,
            checkpoint: false,
            end: None,
        };
        m.begin();
        m
    }

    /// The occurrence as the machine last wrote (or is about to write) it.
    pub fn op_occ(&self) -> &VnfLcmOpOcc {
        &self.op
    }

    /// Where the operation stands.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The next action, if one is due (see the contract in the [module docs](self)).
    pub fn poll_action(&mut self) -> Option<OpAction> {
        if self.inflight.is_some() || self.end.is_some() {
            return None;
        }
        if self.renewal_due() {
            self.inflight = Some(Inflight::Renewal);
            return Some(OpAction::Commit(self.renewal_batch()));
        }
        let a = self.next.take()?;
        self.inflight = Some(Inflight::Main);
        Some(a)
    }

    /// When the machine wants [`Operation::handle_timeout`] called, if it waits on time.
    pub fn poll_timeout(&self) -> Option<DateTime<Utc>> {
        if self.inflight.is_some() || self.next.is_some() || self.end.is_some() {
            return None;
        }
        match (self.timer, self.renew_at) {
            (Some(t), Some(r)) => Some(t.min(r)),
            (t, r) => t.or(r),
        }
    }

    /// The result, once the operation is over: the report of an occurrence that ended (it
    /// may have ended `FAILED_TEMP`), or why nothing more could be recorded.
    pub fn poll_end(&mut self) -> Option<Result<OperationReport, LcmError>> {
        self.end.take()
    }

    /// Whether the operation is over.
    pub fn is_done(&self) -> bool {
        matches!(self.step, Step::Done)
    }

    /// Time passed: fires the timer if it is due.
    pub fn handle_timeout(&mut self, now: DateTime<Utc>) {
        self.now = now;
        if self.inflight.is_some() || self.next.is_some() {
            return;
        }
        if self.timer.is_some_and(|t| t <= now) {
            self.timer = None;
            self.fire_timer();
        }
    }

    /// Asks the operation to stop: it ends `FAILED_TEMP` ("interrupted") with `reason` once
    /// the action out (if any) has its event; nothing more is sent to the VIM. A new
    /// operation whose occurrence is stored `STARTING` only (not `PROCESSING` yet) ends
    /// `ROLLED_BACK` instead, not run (SOL003 5.4.17.3.1).
    pub fn interrupt(&mut self, now: DateTime<Utc>, reason: &str) {
        self.now = now;
        if self.interrupt.is_some() || matches!(self.step, Step::Final | Step::Done) {
            return;
        }
        self.interrupt = Some(reason.to_owned());
        if self.inflight.is_none() {
            self.stop_for_interrupt();
        }
    }

    /// The result of the action out.
    pub fn handle_event(&mut self, event: OpEvent, now: DateTime<Utc>) {
        self.now = now;
        match self.inflight.take() {
            None => {}
            Some(Inflight::Renewal) => self.on_renewed(event),
            Some(Inflight::Main) => {
                self.dispatch(event);
                if self.interrupt.is_some() && self.end.is_none() {
                    self.stop_for_interrupt();
                }
            }
        }
    }

    // ---- start and end ------------------------------------------------------------------

    fn begin(&mut self) {
        if let Some(id) = plan::stack_of(&self.before) {
            self.progress.stack_id.get_or_insert(id);
        }
        let state = if self.unstarted {
            LcmOperationStateType::Starting
        } else if self.progress.plan.is_rollback() {
            LcmOperationStateType::RollingBack
        } else {
            self.op.error = None;
            LcmOperationStateType::Processing
        };
        self.op.enter(state, self.now);
        let mut batch = self.occ_batch().with_instance(self.before.clone());
        batch = batch.with_precondition(Precondition::InstanceAt {
            id: self.before.id.clone(),
            version: self.inst_version,
        });
        self.inst_version = self.inst_version.next();
        self.step = Step::Start;
        self.next = Some(OpAction::Commit(batch));
    }

    /// A batch putting the occurrence (lease renewed, progress saved), conditioned on its
    /// version.
    fn occ_batch(&mut self) -> StoreBatch {
        self.sync_reselection();
        let live = self.op.is_running();
        self.op.lease = live.then(|| Lease {
            owner: self.owner.clone(),
            expires: self.now + chrono_of(self.cfg.lease_time),
        });
        // Kept while the operation can go on (running, FAILED_TEMP); an ended one needs none.
        self.op.progress = (!self.op.is_terminal())
            .then(|| serde_json::to_value(&self.progress).ok())
            .flatten();
        let cond = match self.occ_version {
            Some(v) => Precondition::OpOccAt {
                id: self.op.id.clone(),
                version: v,
            },
            None => Precondition::OpOccAbsent {
                id: self.op.id.clone(),
            },
        };
        self.renew_at = live.then(|| self.now + chrono_of(self.cfg.lease_time / 3));
        StoreBatch::new()
            .with_op_occ(self.op.clone())
            .with_precondition(cond)
    }

    /// The reselection's history into the progress, and its attempts into the occurrence
    /// (`attempts` lists every attempt of every run of the operation).
    fn sync_reselection(&mut self) {
        if let Some(p) = self.placed.as_ref().filter(|p| p.records) {
            self.progress.reselection = p.m.history();
        }
        self.op
            .attempts
            .clone_from(&self.progress.reselection.attempts);
    }

    fn renewal_due(&self) -> bool {
        self.occ_version.is_some()
            && !matches!(self.step, Step::Start | Step::Final | Step::Done)
            && (self.checkpoint || self.renew_at.is_some_and(|r| r <= self.now))
    }

    fn renewal_batch(&mut self) -> StoreBatch {
        self.checkpoint = false;
        self.occ_batch()
    }

    fn on_renewed(&mut self, event: OpEvent) {
        match event {
            OpEvent::Committed(Ok(())) => {
                self.occ_version = self.occ_version.map(Version::next);
            }
            OpEvent::Committed(Err(e)) => self.lost(e),
            _ => self.internal("a lease renewal was answered by another event"),
        }
        if self.interrupt.is_some() && self.end.is_none() {
            self.stop_for_interrupt();
        }
    }

    fn on_commit(&mut self, r: Result<(), DriverError>) {
        if let Err(e) = r {
            if matches!(self.step, Step::Start) && self.unstarted {
                self.stop(Err(LcmError::from_start(e)));
            } else {
                self.lost(e);
            }
            return;
        }
        self.occ_version = Some(self.occ_version.map_or(Version(1), Version::next));
        match self.step {
            // Cancelled while the STARTING commit was out: `stop_for_interrupt` ends it.
            Step::Start if self.unstarted && self.interrupt.is_some() => {}
            Step::Start if self.unstarted => match self.nfvo_grant_request() {
                Some(req) => {
                    let deadline = self.now + chrono_of(self.grant_settings().1);
                    self.step = Step::GrantAsked {
                        deadline,
                        location: None,
                    };
                    self.next = Some(OpAction::RequestGrant(Box::new(req)));
                }
                None => self.enter_processing(),
            },
            Step::Start | Step::Processing => {
                self.processing_stored = true;
                self.proceed();
            }
            Step::Final => self.ended(),
            _ => self.internal("a commit answered out of turn"),
        }
    }

    /// The occurrence stored `STARTING` (and granted, if an NFVO grants) becomes `PROCESSING`.
    fn enter_processing(&mut self) {
        self.op.enter(LcmOperationStateType::Processing, self.now);
        let batch = self.occ_batch();
        self.step = Step::Processing;
        self.next = Some(OpAction::Commit(batch));
    }

    /// The grant request to send to the NFVO, when one grants ([`LcmConfig::nfvo_grants`])
    /// and the plan has a request.
    fn nfvo_grant_request(&self) -> Option<GrantRequest> {
        self.cfg.nfvo_grants?;
        if self.progress.plan.is_rollback() {
            return None;
        }
        self.progress
            .planned
            .as_ref()
            .map(|p| p.request.clone())
            .or_else(|| self.progress.removal.clone())
    }

    /// The poll interval and the timeout of NFVO grants.
    fn grant_settings(&self) -> (Duration, Duration) {
        self.cfg
            .nfvo_grants
            .map_or((Duration::from_secs(2), Duration::from_secs(300)), |g| {
                (g.poll_interval, g.timeout)
            })
    }

    /// What the NFVO answered (the occurrence is `STARTING`).
    fn on_grant(
        &mut self,
        deadline: DateTime<Utc>,
        location: Option<String>,
        r: Result<GrantAnswer, DriverError>,
    ) {
        match r {
            Ok(GrantAnswer::Granted(g)) => self.nfvo_granted(*g),
            Ok(GrantAnswer::Pending {
                location,
                retry_after,
            }) => self.wait_for_grant(deadline, Some(location), retry_after, None),
            Ok(GrantAnswer::Rejected(p)) => {
                let why = p.detail.clone();
                self.end_unstarted_for(&format!(
                    "the NFVO rejected the grant ({} {}): {why}",
                    p.status,
                    p.title.as_deref().unwrap_or("Forbidden")
                ));
            }
            Err(e @ (DriverError::Unavailable { .. } | DriverError::Other { .. })) => {
                self.wait_for_grant(deadline, location, None, Some(chain(&e)));
            }
            Err(e) => self.end_unstarted_for(&format!(
                "the NFVO's grant interface answered with an error: {}",
                chain(&e)
            )),
        }
    }

    /// Asks the NFVO again after the poll interval (or its `Retry-After`), unless the grant
    /// timeout has passed.
    fn wait_for_grant(
        &mut self,
        deadline: DateTime<Utc>,
        location: Option<String>,
        retry_after: Option<Duration>,
        error: Option<String>,
    ) {
        if self.now >= deadline {
            let (_, timeout) = self.grant_settings();
            let last = error.map_or_else(
                || "it was still deciding".to_owned(),
                |e| format!("the last attempt: {e}"),
            );
            return self.end_unstarted_for(&format!(
                "no grant from the NFVO within {} s of the request ({last})",
                timeout.as_secs()
            ));
        }
        let (interval, _) = self.grant_settings();
        let at = (self.now + chrono_of(retry_after.unwrap_or(interval))).min(deadline);
        self.step = Step::GrantWait {
            deadline,
            location,
            error,
        };
        self.timer = Some(at);
    }

    /// The NFVO granted: its zones are pinned, its id is the occurrence's grant, and the
    /// operation runs.
    fn nfvo_granted(&mut self, g: Grant) {
        let op = &self.op.id;
        if !g.vnf_lcm_op_occ_id.as_str().is_empty() && &g.vnf_lcm_op_occ_id != op {
            let other = g.vnf_lcm_op_occ_id.clone();
            return self.end_unstarted_for(&format!(
                "the NFVO's grant {} is for operation occurrence {other}, not {op}",
                g.id
            ));
        }
        if let Some(planned) = &self.progress.planned {
            for n in &planned.new_vnfcs {
                if let Some(z) = g.zone_of(&n.resource_id) {
                    self.progress.pinned.insert(n.slot.name(), z.clone());
                }
            }
        }
        if !g.id.as_str().is_empty() {
            self.progress.grant_id = Some(g.id.clone());
            self.op.grant_id = Some(g.id.clone());
        }
        self.grant = Some(g);
        self.enter_processing();
    }

    /// A commit failed after the start: another process took the operation over (a
    /// conflict), or the store failed. Nothing more is written.
    fn lost(&mut self, e: DriverError) {
        let err = if matches!(e, DriverError::Conflict { .. }) {
            LcmError::Conflict(format!(
                "operation {} was taken over by another process (its lease had expired): {}",
                self.op.id,
                chain(&e)
            ))
        } else {
            LcmError::Store(e)
        };
        self.stop(Err(err));
    }

    fn internal(&mut self, what: &str) {
        let f = Failed::new(
            FailureKind::Backend,
            "internal error",
            format!("operation machine: {what}"),
        );
        self.finish(Err(f));
    }

    fn stop(&mut self, end: Result<OperationReport, LcmError>) {
        self.step = Step::Done;
        self.next = None;
        self.timer = None;
        self.renew_at = None;
        self.end = Some(end);
    }

    fn stop_for_interrupt(&mut self) {
        let reason = self.interrupt.clone().unwrap_or_default();
        if self.occ_version.is_none() {
            self.stop(Err(LcmError::Interrupted(format!(
                "{reason} before operation {} was stored",
                self.op.id
            ))));
            return;
        }
        if matches!(self.step, Step::Final | Step::Done) {
            return;
        }
        if self.unstarted && !self.processing_stored {
            // Stored STARTING only (perhaps waiting for the NFVO's grant): nothing was sent to
            // the VIM.
            return self.end_unstarted(&reason);
        }
        let detail = format!(
            "interrupted ({reason}) while {}; `vnfm op retry {id}` continues it, `vnfm op \
             rollback {id}` undoes it, `vnfm op fail {id}` gives it up",
            self.doing(),
            id = self.op.id
        );
        self.finish(Err(Failed::new(
            FailureKind::Interrupted,
            "interrupted",
            detail,
        )));
    }

    /// SOL003 v3.3.1 clause 5.4.17.3.1 and figure 5.6.2.2-1: an operation cancelled in
    /// `STARTING` is not run and its occurrence becomes `ROLLED_BACK`. The instance is left
    /// as it is (nothing was sent to the VIM); the occurrence's `error` says why it ended.
    fn end_unstarted(&mut self, reason: &str) {
        let f = Failed::new(
            FailureKind::Interrupted,
            "interrupted",
            format!(
                "interrupted ({reason}) while STARTING: the operation was not run and the \
                 instance is unchanged (SOL003 5.4.17.3.1: ROLLED_BACK)"
            ),
        );
        self.end_not_run(f);
    }

    /// SOL003 figure 5.6.2.2-1: an operation whose grant the NFVO did not give ends
    /// `ROLLED_BACK` from `STARTING`, not run; `why` says what the NFVO answered.
    fn end_unstarted_for(&mut self, why: &str) {
        let f = Failed::new(
            FailureKind::Invalid,
            "grant not given",
            format!(
                "{why}; the operation was not run and the instance is unchanged (SOL003 \
                 figure 5.6.2.2-1: ROLLED_BACK from STARTING)"
            ),
        );
        self.end_not_run(f);
    }

    /// Ends an operation that never left `STARTING`: `ROLLED_BACK` with `f` as its error.
    fn end_not_run(&mut self, f: Failed) {
        self.timer = None;
        self.op.error = Some(f.problem());
        self.op.enter(LcmOperationStateType::RolledBack, self.now);
        self.failure = Some(f);
        let batch = self.occ_batch();
        self.step = Step::Final;
        self.next = Some(OpAction::Commit(batch));
    }

    fn doing(&self) -> &'static str {
        match self.step {
            Step::Start | Step::Processing => "starting",
            Step::GrantAsked { .. } | Step::GrantWait { .. } => "waiting for the NFVO's grant",
            Step::MarkList | Step::Marking(_) => "marking servers unhealthy",
            Step::GrantZones | Step::ReselectZones => "listing zones",
            Step::Apply(_) | Step::StackWait { .. } | Step::ResumeWait { .. } => {
                "waiting for the stack"
            }
            Step::Settle { .. } | Step::FailedServers | Step::Hosts(_) => "reading a failed stack",
            Step::CollectList | Step::CollectServers(_) => "reading the servers back",
            Step::Hooks(_) => "running hooks",
            Step::DeleteSent | Step::DeleteWait { .. } => "deleting the stack",
            Step::CnfNodes => "listing the cluster's nodes",
            Step::PowerCheck | Step::PowerSent(_) | Step::PowerWait { .. } => {
                "starting or stopping servers"
            }
            Step::CnfApply => "applying the Kubernetes objects",
            Step::CnfScaling => "scaling the workloads",
            Step::CnfDeletingPods => "deleting pods",
            Step::CnfWait { .. } => "waiting for the pods",
            Step::CnfDeleting => "deleting the Kubernetes objects",
            Step::Final | Step::Done => "ending",
        }
    }

    /// Ends the operation: the final commit of the occurrence (and the instance).
    fn finish(&mut self, result: Result<VnfInstance, Failed>) {
        self.timer = None;
        self.op.grant_id = self
            .grant
            .as_ref()
            .map(|g| g.id.clone())
            .or(self.op.grant_id.take());
        let rollback = self.progress.plan.is_rollback();
        let failing = self.progress.plan == Plan::FailInstantiate;
        let instance = match result {
            Ok(new) if failing => {
                // The stack is gone: the fail ends FAILED with the operation's own error.
                self.op.enter(LcmOperationStateType::Failed, self.now);
                Some(new)
            }
            Ok(new) => {
                let state = if rollback {
                    LcmOperationStateType::RolledBack
                } else {
                    LcmOperationStateType::Completed
                };
                self.op.error = None;
                self.op.enter(state, self.now);
                Some(new)
            }
            Err(f) => {
                self.op.error = Some(if failing {
                    let stack = self
                        .progress
                        .stack_id
                        .as_ref()
                        .map_or_else(String::new, |s| format!(" {s}"));
                    ProblemDetails::new(
                        422,
                        format!(
                            "the operation was not failed: its stack{stack} could not be                              deleted ({}); it stays FAILED_TEMP and the instance records the                              stack",
                            f.detail
                        ),
                    )
                    .with_title("fail refused")
                } else if rollback {
                    ProblemDetails::new(422, f.detail.clone()).with_title("rollback failed")
                } else {
                    f.problem()
                });
                self.op.enter(LcmOperationStateType::FailedTemp, self.now);
                let recorded = self.record_stack();
                self.failure = Some(f);
                recorded
            }
        };
        let mut batch = self.occ_batch();
        if let Some(inst) = instance {
            batch = batch
                .with_instance(inst.clone())
                .with_precondition(Precondition::InstanceAt {
                    id: inst.id.clone(),
                    version: self.inst_version,
                });
            self.after = Some(inst);
        }
        self.step = Step::Final;
        self.next = Some(OpAction::Commit(batch));
    }

    /// A stack created by a failed instantiate is recorded, so that a rollback can delete it.
    fn record_stack(&self) -> Option<VnfInstance> {
        let id = self.progress.stack_id.as_ref()?;
        if plan::stack_of(&self.before).is_some() {
            return None;
        }
        let mut inst = self.before.clone();
        plan::set_stack_id(&mut inst, id);
        Some(inst)
    }

    fn ended(&mut self) {
        let instance = self.after.take().unwrap_or_else(|| self.before.clone());
        let report = OperationReport {
            op_occ: self.op.clone(),
            instance,
            grant: self.grant.clone(),
            failure: self.failure.as_ref().map(|f| f.kind),
        };
        self.stop(Ok(report));
    }

    fn fail(&mut self, f: Failed) {
        self.finish(Err(f));
    }

    fn fail_driver(&mut self, e: &DriverError) {
        self.fail(Failed::driver(e));
    }

    // ---- dispatch ----------------------------------------------------------------------

    fn dispatch(&mut self, event: OpEvent) {
        let step = std::mem::replace(&mut self.step, Step::Done);
        match (step, event) {
            (s @ (Step::Start | Step::Processing | Step::Final), OpEvent::Committed(r)) => {
                self.step = s;
                self.on_commit(r);
            }
            (Step::GrantAsked { deadline, location }, OpEvent::Grant(r)) => {
                self.on_grant(deadline, location, r);
            }
            (Step::MarkList, OpEvent::Resources(r)) => self.on_mark_list(r),
            (Step::Marking(todo), OpEvent::Marked(r)) => self.on_marked(todo, r),
            (Step::GrantZones, OpEvent::Zones(r)) => self.on_grant_zones(r),
            (Step::Apply(p), OpEvent::StackCreated(r)) => self.on_applied(p, r),
            (Step::Apply(p), OpEvent::StackUpdated(r)) => {
                let id = self.progress.stack_id.clone();
                self.on_applied(p, r.and_then(|()| id.ok_or_else(no_stack)));
            }
            (Step::StackWait { deadline, purpose }, OpEvent::Stack(r)) => {
                self.on_stack(deadline, purpose, r);
            }
            (Step::Settle { deadline }, OpEvent::Resources(r)) => self.on_settle(deadline, r),
            (Step::ReselectZones, OpEvent::Zones(r)) => self.on_reselect_zones(r),
            (Step::FailedServers, OpEvent::Servers(r)) => self.on_failed_servers(r),
            (Step::Hosts(units), OpEvent::Servers(r)) => self.on_hosts(&units, r),
            (Step::CollectList, OpEvent::Resources(r)) => self.on_collect_list(r),
            (Step::CollectServers(found), OpEvent::Servers(r)) => self.on_collected(found, r),
            (Step::Hooks(todo), OpEvent::Hook(r)) => self.on_hook(todo, r),
            (Step::DeleteSent, OpEvent::StackDeleted(r)) => self.on_delete_sent(r),
            (Step::DeleteWait { deadline }, OpEvent::Stack(r)) => self.on_delete_wait(deadline, r),
            (Step::ResumeWait { deadline }, OpEvent::Stack(r)) => self.on_resume_wait(deadline, r),
            (Step::PowerCheck, OpEvent::Servers(r)) => self.on_power_check(r),
            (Step::PowerSent(servers), OpEvent::PowerSet(r)) => self.on_power_set(servers, r),
            (Step::PowerWait { deadline, servers }, OpEvent::Servers(r)) => {
                self.on_power_wait(deadline, servers, r);
            }
            (Step::CnfNodes, OpEvent::Nodes(r)) => self.on_cnf_nodes(r),
            (Step::CnfApply, OpEvent::ObjectsApplied(r)) => self.on_cnf_applied(&r),
            (Step::CnfScaling, OpEvent::WorkloadsScaled(r)) => self.on_cnf_applied(&r),
            (Step::CnfDeletingPods, OpEvent::PodsDeleted(r)) => self.on_cnf_pods_deleted(&r),
            (
                Step::CnfWait {
                    deadline,
                    settle_until,
                },
                OpEvent::Pods(r),
            ) => self.on_cnf_pods(deadline, settle_until, r),
            (Step::CnfDeleting, OpEvent::ObjectsDeleted(r)) => self.on_cnf_deleted(&r),
            (step, event) => {
                let what = format!("event {event:?} does not answer step {step:?}");
                self.internal(&what);
            }
        }
    }

    fn fire_timer(&mut self) {
        if let Step::GrantWait {
            deadline,
            location,
            error,
        } = &self.step
        {
            let (deadline, location, error) = (*deadline, location.clone(), error.clone());
            if self.now >= deadline {
                return self.wait_for_grant(deadline, location, None, error);
            }
            let action = match &location {
                Some(l) => OpAction::PollGrant(l.clone()),
                None => match self.nfvo_grant_request() {
                    Some(req) => OpAction::RequestGrant(Box::new(req)),
                    None => return self.internal("a grant wait without a grant request"),
                },
            };
            self.step = Step::GrantAsked { deadline, location };
            self.next = Some(action);
            return;
        }
        if let Step::CnfWait { .. } = self.step {
            return self.cnf_list_pods();
        }
        if let Step::PowerWait { servers, .. } = &self.step {
            self.next = Some(OpAction::ShowServers(servers.clone()));
            return;
        }
        let Some(id) = self.progress.stack_id.clone() else {
            return self.internal("a timer without a stack");
        };
        self.next = Some(match self.step {
            Step::StackWait { .. } | Step::DeleteWait { .. } | Step::ResumeWait { .. } => {
                OpAction::ShowStack(id)
            }
            Step::Settle { .. } => OpAction::ListResources(ListResources::new(id, 5)),
            _ => return,
        });
    }

    // ---- the plans -----------------------------------------------------------------------

    fn proceed(&mut self) {
        if let Some(e) = self.progress.planned_error.clone() {
            return self.fail(Failed::new(FailureKind::Invalid, "invalid request", e));
        }
        if self.progress.vnfcs.is_some() || self.progress.deleted {
            // A retry after the stack reached its state: the hooks (or the end) only.
            return self.after_stack();
        }
        let updates = !matches!(
            self.progress.plan,
            Plan::Terminate
                | Plan::RollbackInstantiate
                | Plan::FailInstantiate
                | Plan::ModifyInfo { .. }
                | Plan::Operate { .. }
        );
        if let (true, true, Some(id)) = (self.resume, updates, self.progress.stack_id.clone()) {
            // The interrupted operation may have left the stack in progress: Heat refuses an
            // update then (409), so wait for it to settle first (seen against real Heat 27).
            self.step = Step::ResumeWait {
                deadline: self.now + chrono_of(self.cfg.stack_timeout),
            };
            self.next = Some(OpAction::ShowStack(id));
            return;
        }
        self.start_plan();
    }

    /// A resumed operation's stack before it goes on: once it is no longer in progress (or at
    /// the stack timeout), the plan starts; a stack that is gone is created again by an
    /// instantiate.
    fn on_resume_wait(&mut self, deadline: DateTime<Utc>, r: Result<Stack, DriverError>) {
        match r {
            Ok(s) if s.stack_status.is_in_progress() && self.now < deadline => {
                self.wait_until(deadline);
                self.step = Step::ResumeWait { deadline };
            }
            Ok(_) => self.start_plan(),
            Err(e) if e.is_not_found() => {
                if matches!(self.progress.plan, Plan::Instantiate { .. }) {
                    self.progress.stack_id = None;
                }
                self.start_plan();
            }
            Err(e) => self.fail_driver(&e),
        }
    }

    fn start_plan(&mut self) {
        match &self.progress.plan {
            p if p.is_cnf() => self.cnf_start(),
            Plan::Heal { .. } if !self.progress.marked => self.mark_list(),
            p if p.is_placed() => {
                self.step = Step::GrantZones;
                self.next = Some(OpAction::ListZones);
            }
            Plan::ScaleIn { .. }
            | Plan::RollbackScaleOut
            | Plan::RollbackScaleToLevel
            | Plan::RollbackChangeFlavour
            | Plan::RollbackChangeExtConn => {
                self.restore();
            }
            Plan::ChangeExtConn { .. } => {
                if let Err(f) = self.grant_unplaced() {
                    return self.fail(f);
                }
                self.restore();
            }
            Plan::Terminate => self.hooks_or(Self::delete_stack),
            Plan::ModifyInfo { patch } => {
                let patch = patch.clone();
                self.modify(&patch);
            }
            Plan::Operate { servers, .. } => {
                self.step = Step::PowerCheck;
                self.next = Some(OpAction::ShowServers(servers.clone()));
            }
            _ => self.delete_stack(),
        }
    }

    /// `OPERATE`: whether the plan starts, and the status a server has once it is done.
    fn power_target(&self) -> Option<(bool, &'static str)> {
        match &self.progress.plan {
            Plan::Operate { on: true, .. } => Some((true, "ACTIVE")),
            Plan::Operate { on: false, .. } => Some((false, "SHUTOFF")),
            _ => None,
        }
    }

    /// The servers not in the wanted state yet; a server in `ERROR`, or that cannot be shown,
    /// fails the operation.
    fn power_todo(
        &mut self,
        r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>,
    ) -> Option<Vec<ServerId>> {
        let Some((_, want)) = self.power_target() else {
            self.internal("a power step without an OPERATE plan");
            return None;
        };
        let mut todo = Vec::new();
        for (id, info) in r {
            match info {
                Ok(s) if s.status == want => {}
                Ok(s) if s.status == "ERROR" => {
                    self.fail(Failed::new(
                        FailureKind::StackFailed,
                        "server in ERROR",
                        format!("server {id} is in ERROR: it cannot be started or stopped"),
                    ));
                    return None;
                }
                Ok(_) => todo.push(id),
                Err(e) => {
                    self.fail_driver(&e);
                    return None;
                }
            }
        }
        Some(todo)
    }

    fn on_power_check(&mut self, r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>) {
        let Some(todo) = self.power_todo(r) else {
            return;
        };
        let Some((on, _)) = self.power_target() else {
            return;
        };
        if todo.is_empty() {
            return self.finish_operate();
        }
        self.next = Some(OpAction::SetPower {
            servers: todo.clone(),
            on,
        });
        self.step = Step::PowerSent(todo);
    }

    fn on_power_set(&mut self, servers: Vec<ServerId>, r: Vec<Result<(), DriverError>>) {
        if let Some(e) = r.into_iter().find_map(Result::err) {
            return self.fail_driver(&e);
        }
        let deadline = self.now + chrono_of(self.cfg.stack_timeout);
        self.step = Step::PowerWait { deadline, servers };
        self.wait_until(deadline);
    }

    fn on_power_wait(
        &mut self,
        deadline: DateTime<Utc>,
        servers: Vec<ServerId>,
        r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>,
    ) {
        let Some(todo) = self.power_todo(r) else {
            return;
        };
        if todo.is_empty() {
            return self.finish_operate();
        }
        if self.now >= deadline {
            let want = self.power_target().map_or("", |t| t.1);
            return self.fail(Failed::new(
                FailureKind::Backend,
                "VIM request timed out",
                format!(
                    "server(s) {} not {want} within {} s",
                    todo.iter()
                        .map(ServerId::as_str)
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.cfg.stack_timeout.as_secs()
                ),
            ));
        }
        let _ = servers;
        self.step = Step::PowerWait {
            deadline,
            servers: todo,
        };
        self.wait_until(deadline);
    }

    /// Every server is in the wanted state: `vnfState` and each `vnfcState` say it.
    fn finish_operate(&mut self) {
        let state = match self.power_target() {
            Some((true, _)) => VnfOperationalStateType::Started,
            _ => VnfOperationalStateType::Stopped,
        };
        let mut new = self.before.clone();
        if let Some(info) = new.instantiated_vnf_info.as_mut() {
            info.vnf_state = Some(state);
            for v in &mut info.vnfc_info {
                v.vnfc_state = state;
            }
        }
        self.finish(Ok(new));
    }

    /// `MODIFY_INFO`: the instance after the request, and `changedInfo`; ends at once.
    fn modify(&mut self, patch: &KeyValuePairs) {
        match super::modify::apply(&self.before, patch) {
            Ok((inst, changed)) => {
                self.op.changed_info = Some(serde_json::Value::Object(changed));
                self.finish(Ok(inst));
            }
            Err(e) => self.fail(Failed::new(
                FailureKind::Invalid,
                "invalid request",
                e.to_string(),
            )),
        }
    }

    fn package(&self) -> Result<(Arc<VnfPackage>, String), Failed> {
        let pkg = self.pkg.clone().ok_or_else(|| {
            Failed::new(
                FailureKind::Invalid,
                "no package",
                "the operation needs the instance's package",
            )
        })?;
        let flavour_id = match &self.progress.plan {
            Plan::Instantiate { flavour_id, .. }
            | Plan::CnfInstantiate { flavour_id, .. }
            | Plan::ChangeFlavour { flavour_id, .. } => flavour_id.clone(),
            _ => self
                .before
                .instantiated_vnf_info
                .as_ref()
                .map(|i| i.flavour_id.clone())
                .unwrap_or_default(),
        };
        Ok((pkg, flavour_id))
    }

    fn with_flavour<T>(
        &self,
        f: impl FnOnce(&VnfPackage, &Flavour) -> Result<T, Failed>,
    ) -> Result<T, Failed> {
        let (pkg, flavour_id) = self.package()?;
        let flavour = plan::flavour_of(&pkg, &flavour_id)
            .map_err(|e| Failed::new(FailureKind::Invalid, "unknown flavour", e.to_string()))?;
        f(&pkg, flavour)
    }

    // heal: mark the servers unhealthy

    fn mark_list(&mut self) {
        let Some(id) = self.progress.stack_id.clone() else {
            return self.fail(no_stack_failed());
        };
        self.step = Step::MarkList;
        self.next = Some(OpAction::ListResources(ListResources::new(id, 5)));
    }

    fn on_mark_list(&mut self, r: Result<Vec<StackResource>, DriverError>) {
        let resources = match r {
            Ok(r) => r,
            Err(e) => return self.fail_driver(&e),
        };
        let Some(stack_id) = self.progress.stack_id.clone() else {
            return self.fail(no_stack_failed());
        };
        let (slots, servers) = self.healed();
        let cause = match &self.progress.plan {
            Plan::Heal { cause } => cause.clone(),
            _ => None,
        };
        let reason = cause.as_deref().unwrap_or("healed by vnfm");
        let todo: VecDeque<MarkUnhealthy> = resources
            .iter()
            .filter(|r| r.resource_type == "OS::Nova::Server")
            .filter(|r| {
                top_level_resource(&stack_id, r, &resources).is_some_and(|top| {
                    slots.contains(&top) || servers.contains(&r.physical_resource_id)
                })
            })
            .map(|r| MarkUnhealthy::new(r.stack_id.clone(), r.resource_name.clone(), reason))
            .collect();
        self.on_marked(todo, Ok(()));
    }

    /// The slots a heal re-creates and the server ids they have now.
    fn healed(&self) -> (BTreeSet<String>, BTreeSet<String>) {
        let slots: BTreeSet<String> = self
            .progress
            .planned
            .iter()
            .flat_map(|p| p.new_vnfcs.iter().map(|n| n.slot.name()))
            .collect();
        let servers = self
            .before
            .instantiated_vnf_info
            .iter()
            .flat_map(|i| i.vnfc_resource_info.iter())
            .filter(|v| {
                super::grant::existing_slot(v)
                    .ok()
                    .flatten()
                    .is_some_and(|s| slots.contains(&s.name()))
            })
            .map(|v| v.compute_resource.resource_id.clone())
            .filter(|id| !id.is_empty())
            .collect();
        (slots, servers)
    }

    fn on_marked(&mut self, mut todo: VecDeque<MarkUnhealthy>, r: Result<(), DriverError>) {
        if let Err(e) = r {
            return self.fail_driver(&e);
        }
        match todo.pop_front() {
            Some(m) => {
                self.step = Step::Marking(todo);
                self.next = Some(OpAction::MarkUnhealthy(m));
            }
            None => {
                self.progress.marked = true;
                self.step = Step::GrantZones;
                self.next = Some(OpAction::ListZones);
            }
        }
    }

    // placed plans: grant, then the reselection machine

    fn on_grant_zones(&mut self, r: Result<Vec<ComputeZone>, DriverError>) {
        let listing = match r {
            Ok(z) => z,
            Err(e) => return self.fail_driver(&e),
        };
        self.settle_group_policies();
        if let Some(f) = self.unknown_pinned_zone(&listing) {
            return self.fail(f);
        }
        match self.with_flavour(|pkg, flavour| self.place(pkg, flavour, listing)) {
            Ok((placed, granted, grant)) => {
                self.progress.granted = Some(granted);
                if grant.is_some() {
                    self.grant = grant;
                }
                self.placed = Some(placed);
                self.drive_reselection();
            }
            Err(f) => self.fail(f),
        }
    }

    /// A zone pinned (by `--zone`, or by the NFVO's grant) that the catalogue does not know:
    /// the stack would fail on it as on a full zone.
    fn unknown_pinned_zone(&self, listing: &[ComputeZone]) -> Option<Failed> {
        if self.progress.granted.is_some() {
            return None;
        }
        let (key, zone) = self
            .progress
            .pinned
            .iter()
            .find(|(_, z)| !listing.iter().any(|c| &c.name == *z))?;
        let known: Vec<&str> = listing.iter().map(|c| c.name.as_str()).collect();
        let by = match self.grant.as_ref() {
            Some(g) => format!("the NFVO's grant {}", g.id),
            None => "--zone".to_owned(),
        };
        Some(Failed::new(
            FailureKind::Invalid,
            "invalid request",
            format!(
                "{by} gives {key} zone {zone}, which is not in the zone catalogue; its zones \
                 are {}",
                known.join(", ")
            ),
        ))
    }

    /// Decides the policies of the rules' server groups once (see [`Progress::server_groups`]):
    /// an instantiation from the configuration, the other plans from the instance's record.
    fn settle_group_policies(&mut self) {
        if self.progress.server_groups.is_some() {
            return;
        }
        self.progress.server_groups = match self.progress.plan {
            // The new flavour's rules: decided from the configuration as an instantiation does.
            Plan::Instantiate { .. } | Plan::ChangeFlavour { .. } => self
                .with_flavour(|_, f| Ok(groups::policies(f, self.cfg.fallback_best_effort)))
                .ok(),
            _ => groups::recorded(&self.before),
        };
    }

    /// The server group of every rule whose policy the operation knows.
    fn group_rules(&self, flavour: &Flavour) -> Vec<GroupRule> {
        self.progress
            .server_groups
            .as_ref()
            .map(|p| groups::rules(flavour, p))
            .unwrap_or_default()
    }

    /// The VNFCs that stay, with their zones.
    fn existing(&self) -> Vec<(VnfcSlot, ZoneId)> {
        let Some(info) = self.before.instantiated_vnf_info.as_ref() else {
            return Vec::new();
        };
        if let Plan::ChangeFlavour { level, .. } = &self.progress.plan {
            // The VNFCs of the instance the new flavour keeps.
            let all = slots_of(info);
            return self
                .with_flavour(|_, f| Ok(super::change_flavour::kept(f, level.as_deref(), all)))
                .unwrap_or_default();
        }
        if let Plan::ScaleToLevel { levels, .. } = &self.progress.plan {
            // Of every VDU, its VNFCs up to its count at the new levels.
            let all = slots_of(info);
            return self
                .with_flavour(|_, f| {
                    super::to_level::vdu_counts(f, info, levels)
                        .map(|counts| super::to_level::kept(&counts, all))
                        .map_err(|e| {
                            Failed::new(FailureKind::Invalid, "invalid request", e.to_string())
                        })
                })
                .unwrap_or_default();
        }
        let (healed, _) = self.healed();
        slots_of(info)
            .into_iter()
            .filter(|(s, _)| {
                !matches!(self.progress.plan, Plan::Heal { .. }) || !healed.contains(&s.name())
            })
            .collect()
    }

    #[allow(clippy::type_complexity)]
    fn place(
        &self,
        pkg: &VnfPackage,
        flavour: &Flavour,
        listing: Vec<ComputeZone>,
    ) -> Result<(Placed, BTreeMap<String, ZoneId>, Option<Grant>), Failed> {
        let planned = self.progress.planned.clone().ok_or_else(|| {
            Failed::new(FailureKind::Invalid, "invalid request", "no grant request")
        })?;
        let layouts = stack::layouts(pkg, flavour)?;
        let groups = stack::group_resources(&layouts);
        let existing = self.existing();
        let group_zone = stack::group_zones(&groups, &existing);
        // The preflight of the rules' server groups, before the grant and once every VNFC has
        // its zone: no stack is created or updated for a required group that cannot be met.
        let host_groups = groups::effective(pkg, flavour, &self.group_rules(flavour))?;
        let members =
            |zones: Option<&BTreeMap<String, ZoneId>>| -> Vec<(VnfcSlot, Option<ZoneId>)> {
                let kept = existing.iter().map(|(s, z)| (s.clone(), Some(z.clone())));
                let new = planned.new_vnfcs.iter().map(|n| {
                    let zone = zones.and_then(|z| z.get(&n.slot.name())).cloned();
                    (n.slot.clone(), zone)
                });
                kept.chain(new).collect()
            };
        groups::check_hosts(flavour, &host_groups, &members(None), &listing)?;
        let (new_zones, grant) = match (&self.progress.granted, &self.progress.plan) {
            (Some(z), _) => (z.clone(), None),
            (None, Plan::Heal { .. }) => (self.heal_zones(&planned), None),
            (None, _) => {
                let (z, g) = self.grant(&planned, flavour, &groups, &group_zone, &listing)?;
                (z, Some(g))
            }
        };
        groups::check_hosts(flavour, &host_groups, &members(Some(&new_zones)), &listing)?;
        let units = UnitsInput {
            flavour,
            planned: &planned,
            groups: &groups,
            group_zone,
            existing: &existing,
            new_zones: &new_zones,
            resumed: &self.progress.zones,
        }
        .build()?;
        let constraints =
            stack::unit_constraints(&planned.request, &planned, &self.before, &groups);
        let mut slots: Vec<VnfcSlot> = existing.iter().map(|(s, _)| s.clone()).collect();
        slots.extend(planned.new_vnfcs.iter().map(|n| n.slot.clone()));
        slots.sort();
        let cfg = ReselectConfig {
            enabled: self.cfg.reselect_zones,
            pattern: self.cfg.pattern.clone(),
            max_reselections: self.cfg.max_reselections,
            selection: self.cfg.selection,
            seed: self.cfg.seed,
        };
        let m = Reselection::new(cfg, units, constraints)
            .with_zone_listing(listing)
            .resumed(self.progress.reselection.clone());
        let placed = Placed {
            layouts,
            slots,
            m,
            records: true,
        };
        Ok((placed, new_zones, grant))
    }

    /// The healed VNFCs start in the zone they are in, or the one the NFVO's grant gave.
    fn heal_zones(&self, planned: &PlannedGrant) -> BTreeMap<String, ZoneId> {
        let current: BTreeMap<String, ZoneId> = self
            .before
            .instantiated_vnf_info
            .as_ref()
            .map(slots_of)
            .unwrap_or_default()
            .into_iter()
            .map(|(s, z)| (s.name(), z))
            .collect();
        planned
            .new_vnfcs
            .iter()
            .filter_map(|n| {
                let name = n.slot.name();
                self.progress
                    .pinned
                    .get(&name)
                    .or_else(|| current.get(&name))
                    .map(|z| (name, z.clone()))
            })
            .collect()
    }

    /// Asks the local granter (or takes the pinned zones): the zone of every new VNFC.
    fn grant(
        &self,
        planned: &PlannedGrant,
        flavour: &Flavour,
        groups: &BTreeMap<VduId, String>,
        group_zone: &BTreeMap<VduId, ZoneId>,
        listing: &[ComputeZone],
    ) -> Result<(BTreeMap<String, ZoneId>, Grant), Failed> {
        let (_, answer) = stack::LocalGrant {
            planned,
            instance: &self.before,
            flavour,
            groups,
            group_zone,
            pinned: &self.progress.pinned,
            zones: listing,
            grant_id: self.progress.grant_id.clone().unwrap_or_default(),
            selection: self.cfg.grant_selection,
            seed: self.cfg.seed,
        }
        .grant();
        let g = answer?;
        let zones = planned
            .new_vnfcs
            .iter()
            .filter_map(|n| {
                g.zone_of(&n.resource_id)
                    .map(|z| (n.slot.name(), z.clone()))
            })
            .collect();
        Ok((zones, g))
    }

    fn drive_reselection(&mut self) {
        let Some(p) = self.placed.as_mut() else {
            return self.internal("reselection without a placement");
        };
        let Some(action) = p.m.poll_action() else {
            return self.reselection_over();
        };
        match action {
            ReselectAction::ApplyStack { zones } => self.apply(zones),
            ReselectAction::ListResources => match self.progress.stack_id.clone() {
                Some(id) => {
                    self.step = Step::Settle {
                        deadline: self.now + chrono_of(self.cfg.stack_timeout),
                    };
                    self.next = Some(OpAction::ListResources(ListResources::new(id, 5)));
                }
                None => self.reselection_over(),
            },
            ReselectAction::ListZones => {
                self.step = Step::ReselectZones;
                self.next = Some(OpAction::ListZones);
            }
            ReselectAction::LocateFailedServers { servers } => {
                self.step = Step::FailedServers;
                self.next = Some(OpAction::ShowServers(servers));
            }
            ReselectAction::LocateServers { servers } => {
                let mut by_server: BTreeMap<ServerId, Vec<String>> = BTreeMap::new();
                for (unit, server) in servers {
                    by_server.entry(server).or_default().push(unit);
                }
                let ids = by_server.keys().cloned().collect();
                self.step = Step::Hosts(by_server);
                self.next = Some(OpAction::ShowServers(ids));
            }
        }
    }

    fn apply(&mut self, zones: BTreeMap<String, ZoneId>) {
        let slots = match &self.placed {
            Some(p) => p.slots.clone(),
            None => return self.internal("an apply without a placement"),
        };
        let unit_zones = zones.clone();
        let input = self.with_flavour(|pkg, flavour| {
            stack::heat_input(
                pkg,
                flavour,
                &slots,
                &zones,
                &self.group_rules(flavour),
                &self.links(),
            )
        });
        let (bundle, params) = match input {
            Ok(x) => x,
            Err(f) => return self.fail(f),
        };
        self.progress.zones = unit_zones;
        self.step = Step::Apply(Purpose::Reselect);
        self.next = Some(match self.progress.stack_id.clone() {
            Some(id) => OpAction::UpdateStack(UpdateStack {
                id,
                parameters: params,
                template: Some(bundle),
            }),
            None => OpAction::CreateStack(CreateStack::new(self.stack_name(), bundle, params)),
        });
    }

    /// The name of the stack the operation creates.
    fn stack_name(&self) -> String {
        match &self.progress.plan {
            Plan::Instantiate { stack_name, .. } => stack_name.clone(),
            _ => format!("vnf-{}", self.before.id),
        }
    }

    fn on_applied(&mut self, purpose: Purpose, r: Result<StackId, DriverError>) {
        match r {
            Ok(id) => {
                // Saved at once: the stack's id (a rollback or fail must know the stack even
                // if the process dies now) and the attempt that runs.
                self.checkpoint |= self.progress.stack_id.is_none() || purpose == Purpose::Reselect;
                self.progress.stack_id = Some(id.clone());
                self.step = Step::StackWait {
                    deadline: self.now + chrono_of(self.cfg.stack_timeout),
                    purpose,
                };
                self.next = Some(OpAction::ShowStack(id));
            }
            Err(e) => {
                if let Some(p) = self
                    .placed
                    .as_mut()
                    .filter(|_| purpose == Purpose::Reselect)
                {
                    // The attempt has an outcome: Heat refused it.
                    p.m.handle_apply_refused(&chain(&e));
                }
                if matches!(e, DriverError::AlreadyExists { .. }) {
                    return self.fail(Failed::new(
                        FailureKind::StackFailed,
                        "stack already exists",
                        format!(
                            "stack {} already exists in the VIM (a stack of that name that \
                             this operation did not create, e.g. one an earlier operation left): \
                             {}",
                            self.stack_name(),
                            chain(&e)
                        ),
                    ));
                }
                self.fail_driver(&e);
            }
        }
    }

    fn on_stack(
        &mut self,
        deadline: DateTime<Utc>,
        purpose: Purpose,
        r: Result<Stack, DriverError>,
    ) {
        let stack = match r {
            Ok(s) => s,
            Err(e) => return self.fail_driver(&e),
        };
        if stack.stack_status.is_in_progress() {
            if self.now >= deadline {
                return self.fail(Failed::new(
                    FailureKind::Backend,
                    "stack timed out",
                    format!(
                        "stack {} still {} after {}s",
                        stack.id,
                        stack.stack_status,
                        self.cfg.stack_timeout.as_secs()
                    ),
                ));
            }
            self.wait_until(deadline);
            self.step = Step::StackWait { deadline, purpose };
            return;
        }
        match purpose {
            Purpose::Reselect => {
                if let Some(p) = self.placed.as_mut() {
                    if stack::succeeded(&stack) {
                        p.m.handle_stack_succeeded();
                    } else if stack.stack_status.action == StackAction::Rollback {
                        p.m.handle_stack_rolled_back(&stack.stack_status_reason);
                    } else {
                        p.m.handle_stack_failed(&stack.stack_status_reason);
                    }
                }
                self.drive_reselection();
            }
            Purpose::Restore if stack::succeeded(&stack) => self.restored(),
            Purpose::Restore => self.fail(Failed::new(
                FailureKind::StackFailed,
                "stack update failed",
                stack.stack_status_reason,
            )),
        }
    }

    fn wait_until(&mut self, deadline: DateTime<Utc>) {
        self.timer = Some((self.now + chrono_of(self.cfg.poll_interval)).min(deadline));
    }

    fn on_settle(&mut self, deadline: DateTime<Utc>, r: Result<Vec<StackResource>, DriverError>) {
        let res = match r {
            Ok(r) => r,
            Err(e) => return self.fail_driver(&e),
        };
        if res.iter().any(|r| r.resource_status.is_in_progress()) && self.now < deadline {
            self.wait_until(deadline);
            self.step = Step::Settle { deadline };
            return;
        }
        if let (Some(p), Some(id)) = (self.placed.as_mut(), self.progress.stack_id.as_ref()) {
            p.m.handle_resources(id, &res);
        }
        self.drive_reselection();
    }

    fn on_reselect_zones(&mut self, r: Result<Vec<ComputeZone>, DriverError>) {
        match r {
            Ok(z) => {
                if let Some(p) = self.placed.as_mut() {
                    p.m.handle_zones(z);
                }
                self.drive_reselection();
            }
            Err(e) => self.fail_driver(&e),
        }
    }

    /// Where Nova put each failed server; a server it cannot show is charged to the zone asked
    /// for, by the reselection machine.
    fn on_failed_servers(&mut self, r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>) {
        let zones = r
            .into_iter()
            .map(|(id, s)| (id, s.ok().and_then(|s| s.zone)))
            .collect();
        if let Some(p) = self.placed.as_mut() {
            p.m.handle_failed_servers(zones);
        }
        self.drive_reselection();
    }

    /// Only the capacity estimate reads these hosts: a server the inventory cannot show is
    /// estimated instead, never a reason to fail the operation.
    fn on_hosts(
        &mut self,
        units: &BTreeMap<ServerId, Vec<String>>,
        r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>,
    ) {
        let mut hosts = BTreeMap::new();
        for (server, names) in units {
            let host = r
                .get(server)
                .and_then(|s| s.as_ref().ok())
                .and_then(|s| s.host.clone());
            for n in names {
                hosts.insert(n.clone(), host.clone());
            }
        }
        if let Some(p) = self.placed.as_mut() {
            p.m.handle_hosts(hosts);
        }
        self.drive_reselection();
    }

    fn reselection_over(&mut self) {
        let Some(p) = self.placed.as_ref() else {
            return self.internal("no reselection");
        };
        match p.m.outcome().cloned() {
            Some(Outcome::Succeeded) if self.progress.stack_id.is_some() => self.collect(),
            Some(Outcome::Succeeded) => self.fail(Failed::new(
                FailureKind::Backend,
                "no stack",
                "the stack was never created",
            )),
            Some(Outcome::GaveUp(g)) => {
                let f = give_up_failure(&g, p.m.excluded());
                self.fail(f);
            }
            None => self.fail(Failed::new(
                FailureKind::Backend,
                "unfinished",
                "reselection did not finish",
            )),
        }
    }

    // scale-in and scale-out rollback: update the stack to the VNFCs that stay

    fn restore(&mut self) {
        let keep = match self.kept() {
            Ok(k) => k,
            Err(f) => return self.fail(f),
        };
        let Some(id) = self.progress.stack_id.clone() else {
            return self.fail(no_stack_failed());
        };
        let zones: BTreeMap<String, ZoneId> =
            keep.iter().map(|(s, z)| (s.name(), z.clone())).collect();
        let slots: Vec<VnfcSlot> = keep.iter().map(|(s, _)| s.clone()).collect();
        self.settle_group_policies();
        let input = self.with_flavour(|pkg, flavour| {
            let layouts = stack::layouts(pkg, flavour)?;
            let rules = self.group_rules(flavour);
            stack::heat_input(pkg, flavour, &slots, &zones, &rules, &self.links())
                .map(|x| (x, layouts))
        });
        let ((bundle, params), layouts) = match input {
            Ok(x) => x,
            Err(f) => return self.fail(f),
        };
        let m = Reselection::new(restore_config(&self.cfg), Vec::new(), Vec::new());
        self.placed = Some(Placed {
            layouts,
            slots,
            m,
            records: false,
        });
        self.step = Step::Apply(Purpose::Restore);
        self.next = Some(OpAction::UpdateStack(UpdateStack {
            id,
            parameters: params,
            template: Some(bundle),
        }));
    }

    /// The VNFCs a scale-in keeps (the newest of every VDU the aspect scales go), or those
    /// before a scale-out that is rolled back.
    fn kept(&self) -> Result<Vec<(VnfcSlot, ZoneId)>, Failed> {
        let existing = self
            .before
            .instantiated_vnf_info
            .as_ref()
            .map(slots_of)
            .unwrap_or_default();
        match &self.progress.plan {
            Plan::ScaleIn {
                aspect_id, steps, ..
            } => self
                .with_flavour(|_, flavour| Ok(scale_in_keep(flavour, aspect_id, *steps, existing))),
            _ => Ok(existing),
        }
    }

    /// The external virtual links the stack is connected to by this operation: an
    /// instantiation's request's (`operationParams.extVirtualLinks`), a change of external
    /// connectivity's merged links, else the instance's (so that no update re-plugs a port).
    fn links(&self) -> Vec<ExtVirtualLinkData> {
        match &self.progress.plan {
            Plan::ChangeExtConn { links, .. } => links.clone(),
            Plan::Instantiate { .. } => self
                .op
                .operation_params
                .as_ref()
                .and_then(|p| p.get("extVirtualLinks"))
                .and_then(|l| serde_json::from_value(l.clone()).ok())
                .unwrap_or_default(),
            _ => super::change_ext_conn::links_of(&self.before),
        }
    }

    /// The grant of a plan that adds and removes no resource (`CHANGE_EXT_CONN`): the local
    /// granter's answer to the planned request, once (a retry keeps it).
    fn grant_unplaced(&mut self) -> Result<(), Failed> {
        if self.progress.granted.is_some() {
            return Ok(());
        }
        let Some(planned) = self.progress.planned.clone() else {
            return Ok(());
        };
        let grant = self.with_flavour(|_, flavour| {
            let none = BTreeMap::new();
            stack::LocalGrant {
                planned: &planned,
                instance: &self.before,
                flavour,
                groups: &BTreeMap::new(),
                group_zone: &BTreeMap::new(),
                pinned: &none,
                zones: &[],
                grant_id: self.progress.grant_id.clone().unwrap_or_default(),
                selection: self.cfg.grant_selection,
                seed: self.cfg.seed,
            }
            .grant()
            .1
        })?;
        self.progress.granted = Some(BTreeMap::new());
        self.grant = Some(grant);
        Ok(())
    }

    fn restored(&mut self) {
        match self.progress.plan {
            Plan::RollbackScaleOut | Plan::RollbackChangeFlavour | Plan::RollbackChangeExtConn => {
                self.progress.vnfcs = Some(Vec::new());
                let before = self.before.clone();
                self.finish(Ok(before));
            }
            _ => self.collect(),
        }
    }

    // read the servers back

    fn collect(&mut self) {
        let Some(id) = self.progress.stack_id.clone() else {
            return self.fail(no_stack_failed());
        };
        self.step = Step::CollectList;
        self.next = Some(OpAction::ListResources(ListResources::new(id, 5)));
    }

    fn on_collect_list(&mut self, r: Result<Vec<StackResource>, DriverError>) {
        let resources = match r {
            Ok(r) => r,
            Err(e) => return self.fail_driver(&e),
        };
        let (Some(p), Some(id)) = (self.placed.as_ref(), self.progress.stack_id.as_ref()) else {
            return self.internal("reading servers without a placement");
        };
        let prior = plan::prior_servers(&self.before);
        match stack::match_servers(id, &p.slots, &p.layouts, &prior, &resources) {
            Ok(found) => {
                let ids = found
                    .iter()
                    .map(|(_, s, _)| ServerId::from(s.clone()))
                    .collect();
                self.step = Step::CollectServers(found);
                self.next = Some(OpAction::ShowServers(ids));
            }
            Err(f) => self.fail(f),
        }
    }

    fn on_collected(
        &mut self,
        found: Vec<stack::Found>,
        mut r: BTreeMap<ServerId, Result<ServerInfo, DriverError>>,
    ) {
        let mut vnfcs = Vec::new();
        for (slot, server, parent) in &found {
            match r.remove(&ServerId::from(server.clone())) {
                Some(Ok(info)) => vnfcs.push(stack::vnfc_resource(
                    slot,
                    parent,
                    &info,
                    &self.cfg.vim_connection_id,
                )),
                Some(Err(e)) => return self.fail_driver(&e),
                None => {
                    return self.internal(&format!("server {server} was not shown"));
                }
            }
        }
        self.progress.vnfcs = Some(vnfcs);
        self.after_stack();
    }

    /// After the stack reached its state: the hooks of the plan's point, then the end.
    fn after_stack(&mut self) {
        match self.progress.plan {
            Plan::CnfTerminate | Plan::CnfRollbackInstantiate if !self.progress.deleted => {
                self.cnf_delete();
            }
            Plan::CnfTerminate | Plan::CnfRollbackInstantiate => self.finish_deleted(),
            Plan::Terminate | Plan::RollbackInstantiate | Plan::FailInstantiate
                if !self.progress.deleted =>
            {
                self.delete_stack();
            }
            Plan::Terminate | Plan::RollbackInstantiate | Plan::FailInstantiate => {
                self.finish_deleted();
            }
            Plan::RollbackScaleOut | Plan::RollbackChangeFlavour | Plan::RollbackChangeExtConn => {
                let before = self.before.clone();
                self.finish(Ok(before));
            }
            _ => match self.new_instance() {
                Ok(inst) => {
                    self.after = Some(inst);
                    self.hooks_or(Self::finish_placed);
                }
                Err(f) => self.fail(f),
            },
        }
    }

    fn finish_placed(&mut self) {
        match self.after.take() {
            Some(inst) => self.finish(Ok(inst)),
            None => self.internal("no instance to record"),
        }
    }

    /// A new `instantiatedVnfInfo` of `flavour_id` at `level` (instantiate, change flavour):
    /// `metadata` (the server groups are recorded into it), then the VNFCs, the external links
    /// and the server groups this operation leaves.
    fn fresh_info(
        &self,
        flavour: &Flavour,
        flavour_id: &str,
        vnfcs: Vec<VnfcResourceInfo>,
        level: Option<&str>,
        metadata: Option<KeyValuePairs>,
    ) -> InstantiatedVnfInfo {
        let mut info = plan::instantiated_info(flavour, flavour_id, vnfcs, None);
        plan::set_level(&mut info, flavour, level);
        info.metadata = metadata;
        plan::set_links(&mut info, &self.links());
        if let Some(p) = &self.progress.server_groups {
            groups::record(&mut info, p);
        }
        info
    }

    /// The instance the operation leaves.
    fn new_instance(&self) -> Result<VnfInstance, Failed> {
        if self.progress.plan.is_cnf() {
            return self.cnf_instance();
        }
        let vnfcs = self.progress.vnfcs.clone().unwrap_or_default();
        let stack_id = self.progress.stack_id.clone().ok_or_else(no_stack_failed)?;
        let plan = self.progress.plan.clone();
        self.with_flavour(|_, flavour| {
            let before = &self.before;
            Ok(match &plan {
                Plan::Instantiate {
                    flavour_id,
                    configurable,
                    level,
                    ..
                } => {
                    let mut new = before.clone();
                    new.instantiation_state = Some(InstantiationState::Instantiated);
                    let level = level.as_deref();
                    let info = self.fresh_info(flavour, flavour_id, vnfcs, level, None);
                    new.instantiated_vnf_info = Some(info);
                    plan::set_stack_id(&mut new, &stack_id);
                    if let Some(p) = configurable {
                        let mut props = new.vnf_configurable_properties.take().unwrap_or_default();
                        props.extend(p.clone());
                        new.vnf_configurable_properties = Some(props);
                    }
                    new
                }
                Plan::ChangeFlavour { flavour_id, level } => {
                    let mut new = before.clone();
                    // The instance keeps its metadata and its external virtual links.
                    let metadata = before
                        .instantiated_vnf_info
                        .as_ref()
                        .and_then(|p| p.metadata.clone());
                    let level = level.as_deref();
                    let info = self.fresh_info(flavour, flavour_id, vnfcs, level, metadata);
                    new.instantiated_vnf_info = Some(info);
                    plan::set_stack_id(&mut new, &stack_id);
                    new
                }
                // The same instantiation on new VNFCs.
                other => restacked(other, before, flavour, vnfcs, &stack_id),
            })
        })
    }

    // hooks

    /// Runs the hooks of the plan's point that have not succeeded yet, then `then`.
    fn hooks_or(&mut self, then: fn(&mut Self)) {
        let Some(point) = self.progress.plan.hook_point() else {
            return then(self);
        };
        let done: BTreeSet<&str> = self
            .op
            .hooks
            .iter()
            .filter(|h| h.succeeded && h.point == point.as_str())
            .map(|h| h.name.as_str())
            .collect();
        let todo: VecDeque<String> = self
            .hooks
            .iter()
            .filter(|h| h.points.contains(&point) && !done.contains(h.name.as_str()))
            .map(|h| h.name.clone())
            .collect();
        self.next_hook(todo);
    }

    fn next_hook(&mut self, mut todo: VecDeque<String>) {
        let Some(point) = self.progress.plan.hook_point() else {
            return self.internal("hooks without a point");
        };
        let Some(name) = todo.pop_front() else {
            return match point {
                HookPoint::TerminateStart => self.delete_stack(),
                _ => self.finish_placed(),
            };
        };
        let instance = self.after.clone().unwrap_or_else(|| self.before.clone());
        self.next = Some(OpAction::RunHook(Box::new(HookCall {
            name: name.clone(),
            point,
            op_occ_id: self.op.id.clone(),
            instance,
        })));
        todo.push_front(name);
        self.step = Step::Hooks(todo);
    }

    fn on_hook(&mut self, mut todo: VecDeque<String>, r: Result<String, String>) {
        let name = todo.pop_front().unwrap_or_default();
        let point = self
            .progress
            .plan
            .hook_point()
            .map(HookPoint::as_str)
            .unwrap_or_default();
        let outcome = HookOutcome {
            name: name.clone(),
            point: point.to_owned(),
            succeeded: r.is_ok(),
            detail: match &r {
                Ok(d) | Err(d) => d.clone(),
            },
        };
        self.op
            .hooks
            .retain(|h| !(h.name == name && h.point == point));
        self.op.hooks.push(outcome);
        match r {
            Ok(_) => self.next_hook(todo),
            Err(e) => self.fail(Failed::new(
                FailureKind::Hook,
                "hook failed",
                format!("hook {name} ({point}) failed: {e}"),
            )),
        }
    }

    // terminate and instantiate rollback: delete the stack

    fn delete_stack(&mut self) {
        match self.progress.stack_id.clone() {
            Some(id) => {
                self.step = Step::DeleteSent;
                self.next = Some(OpAction::DeleteStack(id));
            }
            None if self.progress.plan.is_cnf() => self.cnf_delete(),
            None => {
                self.progress.deleted = true;
                self.finish_deleted();
            }
        }
    }

    fn on_delete_sent(&mut self, r: Result<(), DriverError>) {
        match r {
            Ok(()) => {
                let Some(id) = self.progress.stack_id.clone() else {
                    return self.internal("a delete without a stack");
                };
                self.step = Step::DeleteWait {
                    deadline: self.now + chrono_of(self.cfg.stack_timeout),
                };
                self.next = Some(OpAction::ShowStack(id));
            }
            Err(e) if e.is_not_found() => self.deleted(),
            Err(e) => self.fail_driver(&e),
        }
    }

    /// Polled like a create until Heat reports the stack gone (not found, or
    /// `DELETE_COMPLETE`): Heat answers the DELETE at once and works on afterwards.
    fn on_delete_wait(&mut self, deadline: DateTime<Utc>, r: Result<Stack, DriverError>) {
        let stack = match r {
            Ok(s) => s,
            Err(e) if e.is_not_found() => return self.deleted(),
            Err(e) => return self.fail_driver(&e),
        };
        let status = stack.stack_status;
        if status.is_in_progress() {
            if self.now >= deadline {
                return self.fail(Failed::new(
                    FailureKind::Backend,
                    "stack delete timed out",
                    format!(
                        "stack {} still {status} after {}s: {}",
                        stack.id,
                        self.cfg.stack_timeout.as_secs(),
                        stack.stack_status_reason
                    ),
                ));
            }
            self.wait_until(deadline);
            self.step = Step::DeleteWait { deadline };
            return;
        }
        if status.action == StackAction::Delete && status.is_complete() {
            return self.deleted();
        }
        self.fail(Failed::new(
            FailureKind::StackFailed,
            "stack delete failed",
            format!(
                "stack {} is {status}: {}",
                stack.id, stack.stack_status_reason
            ),
        ));
    }

    fn deleted(&mut self) {
        self.progress.deleted = true;
        self.finish_deleted();
    }

    fn finish_deleted(&mut self) {
        let mut new = self.before.clone();
        if matches!(self.progress.plan, Plan::Terminate | Plan::CnfTerminate) {
            new.instantiation_state = Some(InstantiationState::NotInstantiated);
            new.instantiated_vnf_info = None;
        }
        CnfResources::clear(&mut new);
        if let Some(m) = new.metadata.as_mut() {
            m.remove(STACK_ID_KEY);
        }
        self.progress.stack_id = None;
        self.finish(Ok(new));
    }
}

// ---- CNFs ------------------------------------------------------------------------------

impl Operation {
    fn cnf_work(&self) -> Result<CnfWork, Failed> {
        self.progress.cnf.clone().ok_or_else(|| {
            Failed::new(
                FailureKind::Invalid,
                "no Kubernetes resources",
                "the CNF operation knows no Kubernetes resources of the instance",
            )
        })
    }

    /// A CNF plan starts: the preflight (instantiate), a scale, pod deletions (heal), or the
    /// hooks and the deletions (terminate, rollback).
    fn cnf_start(&mut self) {
        let work = match self.cnf_work() {
            Ok(w) => w,
            Err(f) => return self.fail(f),
        };
        let ns = work.resources.namespace.clone();
        match &self.progress.plan {
            Plan::CnfInstantiate { .. } if !work.checked => {
                self.step = Step::CnfNodes;
                self.next = Some(OpAction::ListNodes);
            }
            Plan::CnfInstantiate { .. } => self.cnf_apply(&work),
            Plan::CnfScale { .. } => {
                let reqs = work
                    .resources
                    .workloads
                    .iter()
                    .map(|w| ScaleWorkload::of(w.kind, ns.clone(), w.name.clone(), w.replicas))
                    .collect();
                self.step = Step::CnfScaling;
                self.next = Some(OpAction::ScaleWorkloads(reqs));
            }
            Plan::CnfHeal { .. } => {
                // Grace 0: the pod object goes at once, even when its kubelet is gone.
                let reqs = work
                    .heal_pods
                    .iter()
                    .map(|p| DeletePod::new(ns.clone(), p.clone()).with_grace(0))
                    .collect();
                self.step = Step::CnfDeletingPods;
                self.next = Some(OpAction::DeletePods(reqs));
            }
            Plan::CnfTerminate => self.hooks_or(Self::cnf_delete),
            _ => self.cnf_delete(),
        }
    }

    fn note(&mut self, warning: String) {
        if !self.op.warnings.contains(&warning) {
            self.op.warnings.push(warning);
        }
    }

    fn on_cnf_nodes(&mut self, r: Result<Vec<ClusterNode>, DriverError>) {
        let nodes = match r {
            Ok(n) => n,
            Err(e) => return self.fail_driver(&e),
        };
        let mut work = match self.cnf_work() {
            Ok(w) => w,
            Err(f) => return self.fail(f),
        };
        let pf = cnf::preflight(
            &work.manifests,
            &work.resources.namespace,
            &nodes,
            &self.cfg.host_label,
            self.cfg.fallback_best_effort,
        );
        for w in pf.warnings {
            self.note(w);
        }
        if !pf.refused.is_empty() {
            return self.fail(Failed::new(
                FailureKind::Infeasible,
                "pod anti-affinity cannot be met",
                pf.refused.join("; "),
            ));
        }
        work.checked = true;
        self.progress.cnf = Some(work.clone());
        self.cnf_apply(&work);
    }

    fn cnf_apply(&mut self, work: &CnfWork) {
        let ns = &work.resources.namespace;
        let reqs = work
            .manifests
            .iter()
            .map(|m| ApplyObject::new(ns.clone(), m.clone()))
            .collect();
        self.step = Step::CnfApply;
        self.next = Some(OpAction::ApplyObjects(reqs));
    }

    /// Objects applied, or workloads scaled: the pods are awaited.
    fn on_cnf_applied(&mut self, r: &[Result<(), DriverError>]) {
        if let Some(e) = r.iter().find_map(|r| r.as_ref().err()) {
            return self.fail_driver(e);
        }
        self.cnf_wait(self.now);
    }

    /// Pods deleted (one already gone is deleted): their replacements are awaited.
    fn on_cnf_pods_deleted(&mut self, r: &[Result<(), DriverError>]) {
        if let Some(e) = r
            .iter()
            .find_map(|r| r.as_ref().err().filter(|e| !e.is_not_found()))
        {
            return self.fail_driver(e);
        }
        self.cnf_wait(self.now + chrono_of(cnf::VERDICT_SETTLE));
    }

    /// `settle_until`: until when an `Unschedulable` verdict is provisional (now: none).
    fn cnf_wait(&mut self, settle_until: DateTime<Utc>) {
        self.step = Step::CnfWait {
            deadline: self.now + chrono_of(self.cfg.stack_timeout),
            settle_until,
        };
        self.cnf_list_pods();
    }

    fn cnf_list_pods(&mut self) {
        let ns = self
            .progress
            .cnf
            .as_ref()
            .map(|w| w.resources.namespace.clone())
            .unwrap_or_default();
        self.next = Some(OpAction::ListPods(ListPods::selected(ns, BTreeMap::new())));
    }

    /// Polled until every workload lists its replicas (bound or pending: a pod the scheduler
    /// cannot place is reported, not a failure), the healed pods gone.
    /// A verdict is final only [`cnf::VERDICT_SETTLE`] after a pod was last seen terminating.
    fn on_cnf_pods(
        &mut self,
        deadline: DateTime<Utc>,
        mut settle_until: DateTime<Utc>,
        r: Result<Vec<Pod>, DriverError>,
    ) {
        let pods = match r {
            Ok(p) => p,
            Err(e) => return self.fail_driver(&e),
        };
        let work = match self.cnf_work() {
            Ok(w) => w,
            Err(f) => return self.fail(f),
        };
        if cnf::terminating(&work.resources, &pods, &work.heal_pods) {
            settle_until = settle_until.max(self.now + chrono_of(cnf::VERDICT_SETTLE));
        }
        let last = self.now >= deadline;
        let verdicts_final = self.now >= settle_until || last;
        match cnf::ready(&work.resources, &pods, &work.heal_pods, verdicts_final) {
            Ok(()) => {
                let (vnfcs, notes) = cnf::vnfcs(
                    &work.resources,
                    &pods,
                    &work.heal_pods,
                    &self.cfg.vim_connection_id,
                );
                for n in notes {
                    self.note(n);
                }
                self.progress.vnfcs = Some(vnfcs);
                self.after_stack();
            }
            Err(missing) if last => self.fail(Failed::new(
                FailureKind::Backend,
                "pods timed out",
                format!("after {}s: {missing}", self.cfg.stack_timeout.as_secs()),
            )),
            Err(_) => {
                self.wait_until(deadline);
                self.step = Step::CnfWait {
                    deadline,
                    settle_until,
                };
            }
        }
    }

    /// Terminate and rollback: the objects deleted, in the reverse order of their apply
    /// (their pods go with them, in the background).
    fn cnf_delete(&mut self) {
        let objects: Vec<ObjectRef> = self
            .progress
            .cnf
            .as_ref()
            .map(|w| w.resources.objects.iter().rev().cloned().collect())
            .unwrap_or_default();
        self.step = Step::CnfDeleting;
        self.next = Some(OpAction::DeleteObjects(objects));
    }

    /// An object already gone is deleted.
    fn on_cnf_deleted(&mut self, r: &[Result<(), DriverError>]) {
        if let Some(e) = r
            .iter()
            .find_map(|r| r.as_ref().err().filter(|e| !e.is_not_found()))
        {
            return self.fail_driver(e);
        }
        self.progress.deleted = true;
        self.finish_deleted();
    }

    /// The CNF instance the operation leaves: its VNFCs (pods) and resources.
    fn cnf_instance(&self) -> Result<VnfInstance, Failed> {
        let vnfcs = self.progress.vnfcs.clone().unwrap_or_default();
        let work = self.cnf_work()?;
        let plan = self.progress.plan.clone();
        self.with_flavour(|_, flavour| {
            let mut new = self.before.clone();
            match &plan {
                Plan::CnfInstantiate {
                    flavour_id,
                    configurable,
                    level,
                } => {
                    new.instantiation_state = Some(InstantiationState::Instantiated);
                    let mut info = plan::instantiated_info(flavour, flavour_id, vnfcs, None);
                    plan::set_level(&mut info, flavour, level.as_deref());
                    new.instantiated_vnf_info = Some(info);
                    if let Some(p) = configurable {
                        let mut props = new.vnf_configurable_properties.take().unwrap_or_default();
                        props.extend(p.clone());
                        new.vnf_configurable_properties = Some(props);
                    }
                }
                _ => {
                    let prev = self.before.instantiated_vnf_info.as_ref();
                    let mut info = plan::instantiated_info(flavour, &flavour.id, vnfcs, prev);
                    if let Plan::CnfScale {
                        aspect_id,
                        new_level,
                    } = &plan
                    {
                        for s in info
                            .scale_status
                            .iter_mut()
                            .filter(|s| &s.aspect_id == aspect_id)
                        {
                            s.scale_level = *new_level;
                        }
                    }
                    new.instantiated_vnf_info = Some(info);
                }
            }
            work.resources.set(&mut new);
            Ok(new)
        })
    }
}

/// The instance after an operation that keeps its instantiation and changes its VNFCs (scale,
/// scale to level, change of external connectivity, heal, ...): `before` with `vnfcs` on the
/// stack `stack_id`, and what the plan changes besides.
fn restacked(
    done: &Plan,
    before: &VnfInstance,
    flavour: &Flavour,
    vnfcs: Vec<VnfcResourceInfo>,
    stack_id: &StackId,
) -> VnfInstance {
    match done {
        Plan::ScaleOut {
            aspect_id,
            new_level,
        }
        | Plan::ScaleIn {
            aspect_id,
            new_level,
            ..
        } => plan::with_vnfcs(
            before,
            flavour,
            vnfcs,
            stack_id,
            Some((aspect_id, *new_level)),
        ),
        Plan::ScaleToLevel { levels, .. } => {
            let mut new = plan::with_vnfcs(before, flavour, vnfcs, stack_id, None);
            if let Some(info) = new.instantiated_vnf_info.as_mut() {
                for s in &mut info.scale_status {
                    if let Some(l) = levels.get(&s.aspect_id) {
                        s.scale_level = *l;
                    }
                }
            }
            new
        }
        Plan::ChangeExtConn {
            links,
            vim_connection_info,
        } => {
            let mut new = plan::with_vnfcs(before, flavour, vnfcs, stack_id, None);
            if let Some(info) = new.instantiated_vnf_info.as_mut() {
                plan::set_links(info, links);
            }
            new.vim_connection_info.extend(
                vim_connection_info
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            new
        }
        _ => plan::with_vnfcs(before, flavour, vnfcs, stack_id, None),
    }
}

/// What the reselection units are built from.
struct UnitsInput<'a> {
    flavour: &'a Flavour,
    planned: &'a PlannedGrant,
    groups: &'a BTreeMap<VduId, String>,
    group_zone: BTreeMap<VduId, ZoneId>,
    existing: &'a [(VnfcSlot, ZoneId)],
    new_zones: &'a BTreeMap<String, ZoneId>,
    /// The unit zones of the last apply of a resumed operation.
    resumed: &'a BTreeMap<String, ZoneId>,
}

impl UnitsInput<'_> {
    /// One unit per new VNFC (movable) and per VNFC that stays (fixed); the VNFCs of a VDU
    /// under an AutoScalingGroup are one unit named after the group, movable only when the
    /// VDU had no VNFC (see the module docs of [`super::engine`]).
    fn build(mut self) -> Result<Vec<Unit>, Failed> {
        let fixed_groups: BTreeSet<VduId> = self.group_zone.keys().cloned().collect();
        // Forced affinity: a group without VNFCs takes the zone of its first new VNFC.
        let mut new_sorted: Vec<&VnfcSlot> =
            self.planned.new_vnfcs.iter().map(|n| &n.slot).collect();
        new_sorted.sort();
        for slot in new_sorted {
            if self.groups.contains_key(&slot.vdu) && !self.group_zone.contains_key(&slot.vdu) {
                if let Some(z) = self.new_zones.get(&slot.name()) {
                    self.group_zone.insert(slot.vdu.clone(), z.clone());
                }
            }
        }
        let mut units: Vec<Unit> = Vec::new();
        let mut group_demand: BTreeMap<VduId, Resources> = BTreeMap::new();
        for n in &self.planned.new_vnfcs {
            let demand = granter::vdu_demand(self.flavour, &n.slot.vdu);
            if self.groups.contains_key(&n.slot.vdu) {
                let d = group_demand.entry(n.slot.vdu.clone()).or_default();
                *d = d.saturating_add(&demand);
                continue;
            }
            let zone = self.new_zones.get(&n.slot.name()).cloned().ok_or_else(|| {
                Failed::new(
                    FailureKind::Invalid,
                    "grant incomplete",
                    format!("no zone granted to VNFC {}", n.slot.name()),
                )
            })?;
            units.push(self.unit(n.slot.name(), &n.slot.vdu, zone, true, demand));
        }
        for (s, z) in self.existing {
            let demand = granter::vdu_demand(self.flavour, &s.vdu);
            if self.groups.contains_key(&s.vdu) {
                let d = group_demand.entry(s.vdu.clone()).or_default();
                *d = d.saturating_add(&demand);
                continue;
            }
            units.push(Unit::new(s.name(), s.vdu.clone(), z.clone(), false, demand));
        }
        for (vdu, demand) in group_demand {
            let Some(resource) = self.groups.get(&vdu) else {
                continue;
            };
            let zone = self.group_zone.get(&vdu).cloned().ok_or_else(|| {
                Failed::new(
                    FailureKind::Invalid,
                    "grant incomplete",
                    format!(
                        "no zone granted to the VNFCs of VDU {vdu} (AutoScalingGroup {resource})"
                    ),
                )
            })?;
            let movable = !fixed_groups.contains(&vdu);
            units.push(self.unit(resource.clone(), &vdu, zone, movable, demand));
        }
        Ok(units)
    }

    /// A unit; a movable one of a resumed operation starts in the zone of its last apply.
    fn unit(
        &self,
        name: String,
        vdu: &VduId,
        zone: ZoneId,
        movable: bool,
        demand: Resources,
    ) -> Unit {
        let zone = if movable {
            self.resumed.get(&name).cloned().unwrap_or(zone)
        } else {
            zone
        };
        Unit::new(name, vdu.clone(), zone, movable, demand)
    }
}

fn restore_config(cfg: &LcmConfig) -> ReselectConfig {
    ReselectConfig {
        enabled: false,
        pattern: cfg.pattern.clone(),
        max_reselections: Some(0),
        selection: cfg.selection,
        seed: cfg.seed,
    }
}

fn give_up_failure(g: &GiveUp, excluded: &BTreeSet<ZoneId>) -> Failed {
    let kind = match g {
        // A fixed unit fails only with an insufficient-resource error (the pattern matched),
        // e.g. a scale-out of a VDU under an AutoScalingGroup.
        GiveUp::NoCandidates { .. }
        | GiveUp::NoRoom { .. }
        | GiveUp::RetryLimit { .. }
        | GiveUp::ReselectionDisabled { .. }
        | GiveUp::FixedUnitFailed { .. } => FailureKind::CapacityExhausted,
        GiveUp::Infeasible { .. } => FailureKind::Infeasible,
        GiveUp::Refused { .. } => FailureKind::Invalid,
        _ => FailureKind::StackFailed,
    };
    let tried: Vec<String> = excluded.iter().map(ToString::to_string).collect();
    let detail = if tried.is_empty() {
        g.to_string()
    } else {
        format!("{g} (zones tried and excluded: {})", tried.join(", "))
    };
    Failed::new(kind, "stack operation failed", detail)
}

fn no_stack() -> DriverError {
    DriverError::Other {
        driver: "lifecycle",
        message: "the operation has no stack".into(),
        source: None,
    }
}

fn no_stack_failed() -> Failed {
    Failed::new(
        FailureKind::Invalid,
        "no stack",
        format!("the VNF instance records no stack id (metadata.{STACK_ID_KEY})"),
    )
}

fn chrono_of(d: Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(d).unwrap_or(chrono::TimeDelta::MAX)
}
