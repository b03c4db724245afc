//! [`Plan`] and [`Progress`]: what an operation does and how far it got, saved in the
//! occurrence (`progress`) as JSON with every commit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::grant::{ExtVirtualLinkData, GrantRequest, KeyValuePairs, VimConnectionInfo};
use crate::id::{GrantId, ServerId, StackId, ZoneId};
use crate::intent::realise::GroupPolicy;
use crate::lcm::VnfcResourceInfo;
use crate::lifecycle::cnf::CnfWork;
use crate::lifecycle::grant::PlannedGrant;
use crate::lifecycle::hook::HookPoint;
use crate::reselect::History;

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
    /// Scale to level of several aspects at once (see [`crate::lifecycle::to_level`]): every VDU to its
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
    /// [`crate::lifecycle::modify`]); no VIM action.
    #[serde(rename_all = "camelCase")]
    ModifyInfo {
        /// The request, checked ([`crate::lifecycle::modify::check`]).
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
    /// Instantiate a CNF (see [`crate::lifecycle::cnf`]): the preflight over the cluster's nodes, the
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
    /// `CHANGE_FLAVOUR` (see [`crate::lifecycle::change_flavour`]): the VNFCs of the new flavour at the
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
    /// `CHANGE_EXT_CONN` (see [`crate::lifecycle::change_ext_conn`]): the stack updated with the same
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
    pub(super) fn hook_point(&self) -> Option<HookPoint> {
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
    pub(super) fn is_rollback(&self) -> bool {
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

    pub(super) fn is_placed(&self) -> bool {
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
    /// when an NFVO grants ([`crate::lifecycle::NfvoGrants`]): asked of it, never of the local granter.
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
    /// How many times the occurrence was taken over from an owner that went away and resumed
    /// ([`crate::lifecycle::takeover::Takeover::Resume`]): counted against its limit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub takeovers: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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
            takeovers: 0,
        }
    }
}
