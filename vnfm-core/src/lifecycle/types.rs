//! The vocabulary of a lifecycle operation, below both the machine ([`super::operation`] and
//! the files it runs: plans, stacks, CNFs, the checks of each request) and the async shell
//! ([`super::engine`], with the loop of `run`): the drivers an operation runs through
//! ([`Drivers`]), its settings ([`LcmConfig`], [`NfvoGrants`]) and options
//! ([`OperationOptions`]), what a grant-only call grants ([`GrantOnly`]), what an operation
//! that started reports ([`OperationReport`]), and why one could not start ([`LcmError`]).
//!
//! A leaf of the lifecycle: of its files it names only [`super::failure`] and [`super::hook`],
//! which name none. Every type is re-exported from [`super`] and, as before, from
//! [`super::engine`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::failure::FailureKind;
use super::hook::Interrupt;
use crate::driver::{
    Clock, ClusterDriver, ComputeInventory, DriverError, StackDriver, Store, ZoneCatalog,
};
use crate::error::Error;
use crate::grant::Grant;
use crate::id::{VnfInstanceId, ZoneId};
use crate::lcm::{LcmOperationStateType, VnfInstance, VnfLcmOpOcc};
use crate::placement::Selection;
use crate::reselect::InsufficientResourcePattern;

/// The drivers an operation uses.
#[derive(Clone, Debug)]
pub struct Drivers {
    /// Stacks (Heat).
    pub stacks: Arc<dyn StackDriver>,
    /// Zones (Nova).
    pub zones: Arc<dyn ZoneCatalog>,
    /// Servers (Nova).
    pub compute: Arc<dyn ComputeInventory>,
    /// Instances and operation occurrences.
    pub store: Arc<dyn Store>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The container cluster (Kubernetes) of CNF instances, if any; an operation on a CNF
    /// without one does not start.
    pub cluster: Option<Arc<dyn ClusterDriver>>,
}

/// Placement and retry settings (`[placement]` of `vnfm.toml`), and stack polling.
#[derive(Clone, Debug)]
pub struct LcmConfig {
    /// `fallbackBestEffort` of the placement constraints of every grant request.
    pub fallback_best_effort: bool,
    /// Reselect zones after an insufficient-resource failure.
    pub reselect_zones: bool,
    /// The insufficient-resource pattern.
    pub pattern: InsufficientResourcePattern,
    /// Stack updates allowed after the first attempt; `None` = no limit.
    pub max_reselections: Option<u32>,
    /// Same-zone stack applies allowed per operation after Nova's server-group race
    /// ([`crate::reselect::is_group_policy_race`]); default 2.
    pub group_race_retries: u32,
    /// Zone selection policy of reselection (default `random`, the spec's).
    pub selection: Selection,
    /// Zone selection policy of the local granter (default `capacity-aware`: the compliant
    /// zones with the most free capacity the zone catalogue reports; where it reports none,
    /// the granter falls back to `random` and says so in the grant, see
    /// [`super::granter::ZONE_SELECTION`]).
    pub grant_selection: Selection,
    /// Seed of every random choice and id.
    pub seed: u64,
    /// The VIM connection id recorded on resources.
    pub vim_connection_id: String,
    /// Time between two polls of a stack in progress.
    pub poll_interval: Duration,
    /// Give up waiting for a stack after this long (Tacker's default: 20 minutes).
    pub stack_timeout: Duration,
    /// How long a running operation's lease lasts without renewal (renewed every third of
    /// it). Another process may declare an operation whose lease expired interrupted.
    pub lease_time: Duration,
    /// What a running server does with an operation whose owner went away (its lease expired):
    /// interrupt it (the default) or resume it ([`crate::lifecycle::takeover`]).
    pub takeover: super::takeover_policy::Takeover,
    /// The node label key naming a node's compute host: a CNF's required pod anti-affinity on
    /// it is checked against its distinct values (see [`super::cnf`]).
    pub host_label: String,
    /// The namespace of a CNF instance whose request names none (`additionalParams.namespace`).
    pub cnf_namespace: String,
    /// Ask an NFVO for the grants (`None`, the default: the local granter grants). See
    /// [`NfvoGrants`].
    pub nfvo_grants: Option<NfvoGrants>,
}

/// Grants asked of an NFVO over its SOL003 Grant interface ([`crate::driver::GrantDriver`],
/// set with [`Lifecycle::with_grant_driver`](super::Lifecycle::with_grant_driver)) instead of the local granter.
///
/// - Which operations ask: instantiate, scale-out, heal, change flavour and change external
///   connectivity (their placed grant request), scale-in and terminate (a request whose
///   `removeResources` names the servers that go); new ones only (a retry does not ask
///   again). Operate, modify and CNF operations are not asked.
/// - When: right after the occurrence is stored `STARTING` (and its start notified); it stays
///   `STARTING` until the NFVO answers. A `202` is polled at its `Location` every
///   `poll_interval` (or after the NFVO's `Retry-After`); an NFVO that cannot be reached or
///   answers `5xx` is asked again at the same pace.
/// - A grant: the zone it gives each new VNFC (`addResources[].zoneId`) is taken as pinned
///   (the local granter places only those it leaves without a zone, around them, and must
///   find every zone in the catalogue); its `id` is the occurrence's `grantId`. Then
///   `PROCESSING`.
/// - `ROLLED_BACK`, not run (SOL003 figure 5.6.2.2-1): a `403` (the NFVO's detail is the
///   occurrence's `error`), another error answer, no grant within `timeout`, or a cancel
///   while `STARTING`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfvoGrants {
    /// Time between two polls of a grant the NFVO is still deciding (or two attempts to reach
    /// it).
    pub poll_interval: Duration,
    /// Give up (the operation ends `ROLLED_BACK`) when no grant came within this long of the
    /// request.
    pub timeout: Duration,
}

impl LcmConfig {
    /// The defaults: no best effort, no reselection, the default pattern, no limit, two
    /// same-zone applies after Nova's server-group race, a `capacity-aware` granter and `random` reselection, seed 0, VIM connection `vim-0`,
    /// polling every 2 s for at most 20 minutes, leases of 60 s, CNFs in namespace `default`
    /// with the host label [`crate::cluster::DEFAULT_HOST_LABEL`], grants from the local
    /// granter.
    ///
    /// # Errors
    /// None in practice (the default pattern compiles).
    pub fn standard() -> Result<Self, Error> {
        Ok(Self {
            fallback_best_effort: false,
            reselect_zones: false,
            pattern: InsufficientResourcePattern::standard()?,
            max_reselections: None,
            group_race_retries: 2,
            selection: Selection::Random,
            grant_selection: Selection::CapacityAware,
            seed: 0,
            vim_connection_id: "vim-0".into(),
            poll_interval: Duration::from_secs(2),
            stack_timeout: Duration::from_secs(20 * 60),
            lease_time: Duration::from_secs(60),
            takeover: super::takeover_policy::Takeover::Interrupt,
            host_label: crate::cluster::DEFAULT_HOST_LABEL.to_owned(),
            cnf_namespace: "default".to_owned(),
            nfvo_grants: None,
        })
    }
}

/// Per-operation options.
#[derive(Clone, Debug, Default)]
pub struct OperationOptions {
    /// Zones an NFVO granted, per VNFC name (`VDU1-0`) or per VDU id (`VDU1`, every new VNFC
    /// of it): taken as given instead of asking the local granter for them; reselection starts
    /// from them.
    pub pinned: BTreeMap<String, ZoneId>,
    /// `isAutomaticInvocation` (auto-heal, auto-scale).
    pub automatic: bool,
    /// Stops the operation (`FAILED_TEMP`, "interrupted") when triggered.
    pub interrupt: Option<Interrupt>,
}

/// The result of an operation that started.
#[derive(Clone, Debug)]
pub struct OperationReport {
    /// The occurrence, `COMPLETED` or `FAILED_TEMP` (`ROLLED_BACK` for a rollback).
    pub op_occ: VnfLcmOpOcc,
    /// The instance after the operation.
    pub instance: VnfInstance,
    /// The grant, when one was given.
    pub grant: Option<Grant>,
    /// Why it failed, when it did.
    pub failure: Option<FailureKind>,
}

impl OperationReport {
    /// True when the occurrence is `COMPLETED`.
    pub fn is_completed(&self) -> bool {
        self.op_occ.operation_state == LcmOperationStateType::Completed
    }
}

/// Why an operation could not start, or could not record its end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LcmError {
    /// The instance does not exist.
    #[error("VNF instance {0} not found")]
    NotFound(VnfInstanceId),
    /// The instance is not in a state that allows the operation, or another operation runs
    /// (or took this one over).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The request is invalid for this package or instance.
    #[error(transparent)]
    Invalid(#[from] Error),
    /// The store failed.
    #[error("the state store failed")]
    Store(#[source] DriverError),
    /// The operation was interrupted before anything was stored.
    #[error("interrupted: {0}")]
    Interrupted(String),
}

impl LcmError {
    /// The error of a failed start commit: a conflict is another process that started an
    /// operation on the instance (or changed it) at the same moment.
    pub(crate) fn from_start(e: DriverError) -> Self {
        match e {
            DriverError::Conflict { message, .. } => Self::Conflict(format!(
                "another operation started on the instance at the same moment (one LCM \
                 operation at a time): {message}"
            )),
            e => Self::Store(e),
        }
    }
}

/// What [`Lifecycle::grant_only`](super::Lifecycle::grant_only) grants.
#[derive(Clone, Debug)]
pub enum GrantOnly {
    /// An instantiation with this flavour.
    Instantiate {
        /// The flavour.
        flavour_id: String,
    },
    /// A scale-out.
    ScaleOut {
        /// The aspect.
        aspect_id: String,
        /// Steps.
        steps: u32,
    },
}
