//! The lifecycle loop: carries out instantiate, scale, heal and terminate through the driver
//! traits, taking every decision from the pure parts of the core (grant requests, the local
//! granter, the reselection machine) and recording the outcome in the store.
//!
//! # One operation
//! 1. The instance is loaded; an operation already running on it is a conflict (one LCM
//!    operation at a time per instance). An occurrence is stored `STARTING`, then `PROCESSING`.
//! 2. The grant request is built ([`super::grant`]) and granted by the local granter
//!    ([`super::granter`]) over one listing of the zone catalogue, or from the zones an NFVO
//!    pinned.
//! 3. The stack is created (instantiate) or updated (scale, heal) with the StandardUserData
//!    template and `nfv` parameter ([`super::userdata`]), and the reselection machine
//!    ([`crate::reselect`]) drives retries in other zones after insufficient-resource failures.
//!    The zone listing of step 2 is reused: one listing per operation.
//! 4. On success the servers are read back (host and zone per VNFC) and the instance and the
//!    occurrence (`COMPLETED`, with the attempts) are stored in one batch. On failure the
//!    occurrence ends `FAILED_TEMP` with a ProblemDetails naming the reason and the zones
//!    tried; the instance keeps its previous state.
//!
//! # Instance bookkeeping
//! Each VNFC is one top-level stack resource `<VDU>-<index>` (its *slot*). Its
//! `vnfcResourceInfo` and `vnfcInfo` use the slot name as `id`, so ids are stable across heal
//! and reselection; `computeResource.resourceId` is the server id. `metadata` holds
//! `vdu_idx`, `parent_resource_name` (the slot), `zone`, `host` and `server_name`. The stack id
//! is kept in the instance's `metadata.stackId`.
//!
//! # VDUs under an AutoScalingGroup
//! A VDU in the [`Layout::Group`] layout (see [`super::userdata`]) is the member of one
//! `OS::Heat::AutoScalingGroup` resource of the top template:
//!
//! - **One zone per VDU** (the spec's forced affinity): the grant request the local granter
//!   answers gets a zone-scope affinity over the VDU's new VNFCs (its zone anti-affinity rules
//!   keep one representative of the VDU, so they separate the group from the other members
//!   instead of its own VNFCs from each other), and pinned zones (`--zone`) of its VNFCs are
//!   reduced to the zone of its first one. When the VDU already has VNFCs (scale-out, heal of
//!   some members) every new VNFC is pinned to their zone. Whatever the grant says, every
//!   VNFC of the VDU gets the zone of the group.
//! - **One reselection unit** named after the ASG resource (the name Heat reports in failure
//!   paths); its demand is the sum of its VNFCs and its zone the group's. On instantiate (and
//!   on a heal of every member) it is movable: reselection moves the whole group. When the VDU
//!   already has VNFCs it is **not** movable: changing the group's zone parameter would
//!   replace every member, and VNFCs that exist never move. A capacity failure there ends the
//!   operation in `FAILED_TEMP` (`CapacityExhausted`) without reselection.
//! - **Bookkeeping**: the servers under the ASG resource (nested listing, mapped to the top
//!   resource) become `vnfcResourceInfo` entries `<VDU>-<k>`: a server the instance already
//!   knows (same server id) keeps its entry, and new servers take the VNFC slots of the
//!   operation in increasing index, in listing order (the order Heat created the members).
//!   `metadata.parent_resource_name` is the ASG resource; `vdu_idx` the index. Scale-out
//!   raises `desired_capacity`, scale-in lowers it (Heat chooses which members go; the entries
//!   of the servers still there are kept), heal marks the member's server unhealthy and
//!   updates the stack.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};

use super::grant::{self as grant_request, GrantOptions, PlannedGrant};
use super::granter::{self, GrantContext};
use super::userdata::{self, Layout, NfvValues, VnfcSlot};
use crate::constraint::Constraint;
use crate::driver::{
    Clock, ComputeInventory, CreateStack, DriverError, ListResources, ListZones, MarkUnhealthy,
    OpOccFilter, Parameters, StackAction, StackDriver, StackResource, Store, StoreBatch,
    TemplateBundle, UpdateStack, ZoneCatalog,
};
use crate::error::{Error, Location};
use crate::grant::{
    AffinityOrAntiAffinity, ConstraintIdType, ConstraintResourceRef, ConstraintScope, Grant,
    GrantRequest, Link, PlacementConstraint, ResourceHandle,
};
use crate::id::{IdGen, OpOccId, StackId, VduId, VnfInstanceId, ZoneId};
use crate::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, InstantiatedVnfInfo,
    InstantiationState, LcmOperationStateType, LcmOperationType, ScaleInfo, ScaleType,
    ScaleVnfRequest, TerminateVnfRequest, VnfInstance, VnfLcmOpOcc, VnfOperationalStateType,
    VnfcInfo, VnfcResourceInfo,
};
use crate::package::{Flavour, VnfPackage};
use crate::placement::Selection;
use crate::problem::ProblemDetails;
use crate::reselect::{
    top_level_resource, Action, GiveUp, InsufficientResourcePattern, Outcome, ReselectConfig,
    Reselection, Unit,
};
use crate::zone::{ComputeZone, Resources};

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
    /// Zone selection policy of reselection (default `random`, the spec's).
    pub selection: Selection,
    /// Zone selection policy of the local granter (default `capacity-aware`: the compliant
    /// zones with the most free capacity the zone catalogue reports; where it reports none,
    /// the granter falls back to `random` and says so in the grant, see
    /// [`granter::ZONE_SELECTION`]).
    pub grant_selection: Selection,
    /// Seed of every random choice and id.
    pub seed: u64,
    /// The VIM connection id recorded on resources.
    pub vim_connection_id: String,
    /// Time between two polls of a stack in progress.
    pub poll_interval: Duration,
    /// Give up waiting for a stack after this long (Tacker's default: 20 minutes).
    pub stack_timeout: Duration,
}

impl LcmConfig {
    /// The defaults: no best effort, no reselection, the default pattern, no limit, a
    /// `capacity-aware` granter and `random` reselection, seed 0, VIM connection `vim-0`,
    /// polling every 2 s for at most 20 minutes.
    ///
    /// # Errors
    /// None in practice (the default pattern compiles).
    pub fn standard() -> Result<Self, Error> {
        Ok(Self {
            fallback_best_effort: false,
            reselect_zones: false,
            pattern: InsufficientResourcePattern::standard()?,
            max_reselections: None,
            selection: Selection::Random,
            grant_selection: Selection::CapacityAware,
            seed: 0,
            vim_connection_id: "vim-0".into(),
            poll_interval: Duration::from_secs(2),
            stack_timeout: Duration::from_secs(20 * 60),
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
}

/// Why an operation failed (for exit codes and metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FailureKind {
    /// The placement constraints cannot be met.
    Infeasible,
    /// No zone or host has room (including: no zone left to reselect).
    CapacityExhausted,
    /// The stack failed for another reason.
    StackFailed,
    /// A backend could not be reached or refused the credentials.
    Backend,
    /// The request does not fit the package or the instance.
    Invalid,
}

/// The result of an operation that started.
#[derive(Clone, Debug)]
pub struct OperationReport {
    /// The occurrence, `COMPLETED` or `FAILED_TEMP`.
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

/// Why an operation could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LcmError {
    /// The instance does not exist.
    #[error("VNF instance {0} not found")]
    NotFound(VnfInstanceId),
    /// The instance is not in a state that allows the operation, or another operation runs.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The request is invalid for this package or instance.
    #[error(transparent)]
    Invalid(#[from] Error),
    /// The store failed.
    #[error("the state store failed")]
    Store(#[source] DriverError),
}

/// A failure inside a started operation.
struct Failed {
    kind: FailureKind,
    title: &'static str,
    detail: String,
    attempts: Vec<crate::reselect::Attempt>,
    /// The stack the operation created, if it got that far (kept so a rollback can delete it).
    stack_id: Option<StackId>,
}

impl Failed {
    fn new(kind: FailureKind, title: &'static str, detail: impl Into<String>) -> Self {
        Self {
            kind,
            title,
            detail: detail.into(),
            attempts: Vec::new(),
            stack_id: None,
        }
    }

    fn driver(e: &DriverError) -> Self {
        let kind = match e {
            // Heat refused the template or its parameters (HTTP 400): the package's fault.
            DriverError::Invalid { .. } => FailureKind::Invalid,
            DriverError::NotFound { .. } => FailureKind::StackFailed,
            DriverError::QuotaExceeded { .. } => FailureKind::CapacityExhausted,
            _ => FailureKind::Backend,
        };
        Self::new(kind, "VIM request failed", chain(e))
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Where the stack stands.
enum StackTarget {
    Create(String),
    Existing(StackId),
}

/// Runs LCM operations. Cheap to share behind an `Arc`; operations on different instances may
/// run concurrently.
#[derive(Debug)]
pub struct Lifecycle {
    drivers: Drivers,
    config: LcmConfig,
    ids: Mutex<IdGen>,
}

impl Lifecycle {
    /// A lifecycle over `drivers` with `config`; ids come from a generator seeded with
    /// `config.seed`.
    pub fn new(drivers: Drivers, config: LcmConfig) -> Self {
        let ids = Mutex::new(IdGen::seeded(config.seed ^ 0x05ee_d1d5));
        Self {
            drivers,
            config,
            ids,
        }
    }

    /// The same lifecycle with ids drawn from a generator also seeded with `salt`: a program
    /// that runs one operation per process (the CLI) passes a fresh salt each time so ids never
    /// repeat, while placement choices still depend on the configured seed only.
    pub fn with_id_salt(self, salt: u64) -> Self {
        let ids = Mutex::new(IdGen::seeded(self.config.seed ^ 0x05ee_d1d5 ^ salt));
        Self { ids, ..self }
    }

    /// The drivers.
    pub fn drivers(&self) -> &Drivers {
        &self.drivers
    }

    /// The configuration.
    pub fn config(&self) -> &LcmConfig {
        &self.config
    }

    fn next_id(&self) -> String {
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_uuid()
    }

    fn with_ids<T>(&self, f: impl FnOnce(&mut IdGen) -> T) -> T {
        let mut g = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut g)
    }

    /// Creates a VNF instance (`NOT_INSTANTIATED`) of `pkg`.
    ///
    /// # Errors
    /// [`LcmError::Invalid`] when `req.vnfdId` is not the package's; [`LcmError::Store`].
    pub async fn create(
        &self,
        pkg: &VnfPackage,
        req: &CreateVnfRequest,
    ) -> Result<VnfInstance, LcmError> {
        if req.vnfd_id != pkg.descriptor_id {
            return Err(LcmError::Invalid(Error::invalid(
                Location::default().with_field("vnfdId"),
                format!(
                    "vnfdId {:?} is not the package's descriptor_id {:?}",
                    req.vnfd_id, pkg.descriptor_id
                ),
            )));
        }
        let mut inst = VnfInstance::new(self.next_id(), pkg.descriptor_id.clone());
        inst.vnf_instance_name = req.vnf_instance_name.clone();
        inst.vnf_instance_description = req.vnf_instance_description.clone();
        inst.vnf_provider = pkg.provider.clone().unwrap_or_default();
        inst.vnf_product_name = pkg.product_name.clone().unwrap_or_default();
        inst.vnf_software_version = pkg.software_version.clone().unwrap_or_default();
        inst.vnfd_version = pkg.descriptor_version.clone().unwrap_or_default();
        inst.metadata = req.metadata.clone();
        inst.instantiation_state = Some(InstantiationState::NotInstantiated);
        inst.links.insert(
            "self".into(),
            Link::new(grant_request::vnf_instance_href(&inst.id)),
        );
        self.drivers
            .store
            .commit(StoreBatch::new().with_instance(inst.clone()))
            .await
            .map_err(LcmError::Store)?;
        Ok(inst)
    }

    async fn load(&self, id: &VnfInstanceId) -> Result<VnfInstance, LcmError> {
        match self.drivers.store.instance(id).await {
            Ok(i) => Ok(i),
            Err(e) if e.is_not_found() => Err(LcmError::NotFound(id.clone())),
            Err(e) => Err(LcmError::Store(e)),
        }
    }

    async fn start(
        &self,
        inst: &VnfInstance,
        operation: LcmOperationType,
        params: Value,
        automatic: bool,
    ) -> Result<VnfLcmOpOcc, LcmError> {
        let running = self
            .drivers
            .store
            .op_occs(OpOccFilter::instance(inst.id.clone()))
            .await
            .map_err(LcmError::Store)?;
        if let Some(r) = running.iter().find(|o| !o.is_terminal()) {
            return Err(LcmError::Conflict(format!(
                "operation {} ({}) is {} on VNF instance {}; one LCM operation at a time (an \
                 operation in FAILED_TEMP must be failed or rolled back first)",
                r.id, r.operation, r.operation_state, inst.id
            )));
        }
        let now = self.drivers.clock.now();
        let mut op = VnfLcmOpOcc::new(self.next_id(), inst.id.clone(), operation, now)
            .with_automatic_invocation(automatic)
            .with_operation_params(params);
        op.links.insert(
            "self".into(),
            Link::new(grant_request::lcm_op_occ_href(&op.id)),
        );
        op.links.insert(
            "vnfInstance".into(),
            Link::new(grant_request::vnf_instance_href(&inst.id)),
        );
        self.drivers
            .store
            .commit(StoreBatch::new().with_op_occ(op.clone()))
            .await
            .map_err(LcmError::Store)?;
        op.enter(LcmOperationStateType::Processing, self.drivers.clock.now());
        self.drivers
            .store
            .commit(StoreBatch::new().with_op_occ(op.clone()))
            .await
            .map_err(LcmError::Store)?;
        Ok(op)
    }

    async fn finish(
        &self,
        mut op: VnfLcmOpOcc,
        instance: VnfInstance,
        grant: Option<Grant>,
        result: Result<(VnfInstance, Vec<crate::reselect::Attempt>), Failed>,
    ) -> Result<OperationReport, LcmError> {
        let now = self.drivers.clock.now();
        let (instance, failure, batch) = match result {
            Ok((new_instance, attempts)) => {
                op.attempts = attempts;
                op.enter(LcmOperationStateType::Completed, now);
                let batch = StoreBatch::new()
                    .with_instance(new_instance.clone())
                    .with_op_occ(op.clone());
                (new_instance, None, batch)
            }
            Err(f) => {
                op.attempts = f.attempts;
                op.error = Some(
                    ProblemDetails::new(422, f.detail)
                        .with_title(f.title)
                        .with_extension("failureKind", json!(f.kind)),
                );
                op.enter(LcmOperationStateType::FailedTemp, now);
                let mut batch = StoreBatch::new().with_op_occ(op.clone());
                let mut instance = instance;
                // A stack created by a failed instantiate is recorded, so that a rollback can
                // delete it.
                if let Some(id) = f.stack_id.filter(|_| stack_of(&instance).is_none()) {
                    set_stack_id(&mut instance, &id);
                    batch = batch.with_instance(instance.clone());
                }
                (instance, Some(f.kind), batch)
            }
        };
        self.drivers
            .store
            .commit(batch)
            .await
            .map_err(LcmError::Store)?;
        Ok(OperationReport {
            op_occ: op,
            instance,
            grant,
            failure,
        })
    }

    fn grant_options(&self, automatic: bool) -> GrantOptions {
        GrantOptions {
            fallback_best_effort: self.config.fallback_best_effort,
            vim_connection_id: Some(self.config.vim_connection_id.clone()),
            is_automatic_invocation: automatic,
        }
    }

    /// Asks the local granter (or takes the pinned zones), given the zone listing.
    fn grant(
        &self,
        planned: &PlannedGrant,
        flavour: &Flavour,
        inst: &VnfInstance,
        zones: &[ComputeZone],
        pinned: &BTreeMap<String, ZoneId>,
    ) -> Result<Grant, Failed> {
        let vnfc_names: BTreeMap<String, String> = planned
            .new_vnfcs
            .iter()
            .map(|n| (n.resource_id.clone(), n.slot.name()))
            .collect();
        let ctx = GrantContext {
            vnfc_names: &vnfc_names,
            grant_id: self.next_id().into(),
            flavour,
            instance: inst,
            zones,
            pinned,
            selection: self.config.grant_selection,
            seed: self.config.seed,
        };
        granter::grant(&planned.request, &ctx)
            .map(|(g, _)| g)
            .map_err(|e| {
                let kind = if e.is_infeasible() {
                    FailureKind::Infeasible
                } else if e.is_capacity() {
                    FailureKind::CapacityExhausted
                } else {
                    FailureKind::Invalid
                };
                let title = match kind {
                    FailureKind::Infeasible => "placement infeasible",
                    FailureKind::CapacityExhausted => "capacity exhausted",
                    _ => "invalid grant request",
                };
                Failed::new(kind, title, chain(&e))
            })
    }

    /// Only grants: builds the instantiate (or scale-out) grant request of `inst` and answers
    /// it with the local granter, without touching any stack or the store. VDUs under an
    /// AutoScalingGroup get one zone each, as in an operation (see the module docs); the
    /// request returned is the one granted, with the VNFC slot of each new compute resource
    /// ([`PlannedGrant::new_vnfcs`]), so a caller can pin the operation to the granted zones.
    ///
    /// # Errors
    /// [`LcmError::Invalid`] for a request that does not fit; the granter's failure is returned
    /// as `Ok(Err(..))` with its kind.
    pub async fn grant_only(
        &self,
        pkg: &VnfPackage,
        inst: &VnfInstance,
        request: GrantOnly,
    ) -> Result<Result<(PlannedGrant, Grant), (GrantRequest, FailureKind, String)>, LcmError> {
        let op_id: OpOccId = self.next_id().into();
        let opts = self.grant_options(false);
        let planned = match &request {
            GrantOnly::Instantiate { flavour_id } => self.with_ids(|ids| {
                grant_request::instantiate(pkg, flavour_id, inst, &op_id, &opts, ids)
            })?,
            GrantOnly::ScaleOut { aspect_id, steps } => self.with_ids(|ids| {
                grant_request::scale_out(pkg, inst, aspect_id, *steps, &op_id, &opts, ids)
            })?,
        };
        let flavour_id = planned.request.flavour_id.clone().unwrap_or_default();
        let flavour = flavour_of(pkg, &flavour_id)?;
        let zones = match self.drivers.zones.list_zones(ListZones::default()).await {
            Ok(z) => z,
            Err(e) => {
                let f = Failed::driver(&e);
                return Ok(Err((planned.request, f.kind, f.detail)));
            }
        };
        let layouts = match self.layouts(pkg, flavour) {
            Ok(l) => l,
            Err(f) => return Ok(Err((planned.request, f.kind, f.detail))),
        };
        let groups = group_resources(&layouts);
        let existing = inst
            .instantiated_vnf_info
            .as_ref()
            .map(slots_of)
            .unwrap_or_default();
        let (granted, pinned) = group_grant(
            &planned,
            inst,
            &groups,
            &group_zones(&groups, &existing),
            &BTreeMap::new(),
        );
        match self.grant(&granted, flavour, inst, &zones, &pinned) {
            Ok(g) => Ok(Ok((granted, g))),
            Err(f) => Ok(Err((granted.request, f.kind, f.detail))),
        }
    }

    /// Instantiates `id` with `req.flavourId` of `pkg`.
    ///
    /// # Errors
    /// [`LcmError`] when the operation cannot start (unknown or instantiated instance, another
    /// operation running, unknown flavour, store failure). Failures after the start are
    /// reported in the returned occurrence.
    pub async fn instantiate(
        &self,
        id: &VnfInstanceId,
        pkg: &VnfPackage,
        req: &InstantiateVnfRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let inst = self.load(id).await?;
        if inst.is_instantiated() {
            return Err(LcmError::Conflict(format!(
                "VNF instance {id} is already INSTANTIATED"
            )));
        }
        let flavour = flavour_of(pkg, &req.flavour_id)?;
        check_pinned(flavour, &opts.pinned)?;
        let op = self
            .start(
                &inst,
                LcmOperationType::Instantiate,
                json!(req),
                opts.automatic,
            )
            .await?;
        let gopts = self.grant_options(opts.automatic);
        let planned = self
            .with_ids(|ids| {
                grant_request::instantiate(pkg, &req.flavour_id, &inst, &op.id, &gopts, ids)
            })
            .map_err(|e| Failed::new(FailureKind::Invalid, "invalid request", chain(&e)));
        let mut grant_out = None;
        let result = match planned {
            Err(f) => Err(f),
            Ok(planned) => {
                let r = self
                    .run_placed(
                        &inst,
                        pkg,
                        flavour,
                        &planned,
                        opts,
                        StackTarget::Create(format!("vnf-{}", inst.id)),
                        Vec::new(),
                        &mut grant_out,
                        None,
                    )
                    .await;
                r.map(|(vnfcs, stack_id, attempts)| {
                    let mut new = inst.clone();
                    new.instantiation_state = Some(InstantiationState::Instantiated);
                    new.instantiated_vnf_info =
                        Some(instantiated_info(flavour, &req.flavour_id, vnfcs, None));
                    set_stack_id(&mut new, &stack_id);
                    if let Some(p) = &req.vnf_configurable_properties {
                        let mut props = new.vnf_configurable_properties.take().unwrap_or_default();
                        props.extend(p.clone());
                        new.vnf_configurable_properties = Some(props);
                    }
                    (new, attempts)
                })
            }
        };
        let mut op = op;
        op.grant_id = grant_out.as_ref().map(|g| g.id.clone());
        self.finish(op, inst, grant_out, result).await
    }

    /// Scales `id` out or in by `req.numberOfSteps` (default 1) of `req.aspectId`.
    /// Reselection applies to scale-out only (as Tacker's).
    ///
    /// # Errors
    /// As [`Lifecycle::instantiate`]; also a scale level out of range.
    pub async fn scale(
        &self,
        id: &VnfInstanceId,
        pkg: &VnfPackage,
        req: &ScaleVnfRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        // An invalid request starts no operation (SOL003: 400/422, no occurrence).
        req.validate().map_err(LcmError::Invalid)?;
        let inst = self.load(id).await?;
        let (info, stack_id) = instantiated_with_stack(&inst)?;
        let flavour = flavour_of(pkg, &info.flavour_id)?;
        let aspect = flavour.scaling_aspects.get(&req.aspect_id).ok_or_else(|| {
            LcmError::Invalid(Error::invalid(
                Location::default().with_field("aspectId"),
                format!(
                    "unknown scaling aspect {:?}; the flavour has {}",
                    req.aspect_id,
                    list(flavour.scaling_aspects.keys())
                ),
            ))
        })?;
        let steps = req.number_of_steps.unwrap_or(1);
        let level = info.scale_level(&req.aspect_id).unwrap_or(0);
        let new_level = match req.type_ {
            ScaleType::ScaleOut => level.checked_add(steps).filter(|l| *l <= aspect.max_scale_level),
            ScaleType::ScaleIn => level.checked_sub(steps),
        }
        .ok_or_else(|| {
            LcmError::Invalid(Error::invalid(
                Location::default().with_field("numberOfSteps"),
                format!(
                    "aspect {} is at scale level {level} of 0..={}; {:?} by {steps} step(s) leaves that range",
                    req.aspect_id, aspect.max_scale_level, req.type_
                ),
            ))
        })?;
        if req.type_ == ScaleType::ScaleOut {
            check_vdu_maximum(flavour, info, &req.aspect_id, steps)?;
        }
        let op = self
            .start(&inst, LcmOperationType::Scale, json!(req), opts.automatic)
            .await?;
        let existing = slots_of(info);
        let mut grant_out = None;
        let result = match req.type_ {
            ScaleType::ScaleOut => {
                let gopts = self.grant_options(opts.automatic);
                match self.with_ids(|ids| {
                    grant_request::scale_out(pkg, &inst, &req.aspect_id, steps, &op.id, &gopts, ids)
                }) {
                    Err(e) => Err(Failed::new(
                        FailureKind::Invalid,
                        "invalid request",
                        chain(&e),
                    )),
                    Ok(planned) => self
                        .run_placed(
                            &inst,
                            pkg,
                            flavour,
                            &planned,
                            opts,
                            StackTarget::Existing(stack_id.clone()),
                            existing,
                            &mut grant_out,
                            None,
                        )
                        .await
                        .map(|(vnfcs, sid, attempts)| {
                            (
                                with_vnfcs(
                                    &inst,
                                    flavour,
                                    vnfcs,
                                    &sid,
                                    Some((&req.aspect_id, new_level)),
                                ),
                                attempts,
                            )
                        }),
                }
            }
            ScaleType::ScaleIn => self
                .scale_in(
                    pkg,
                    flavour,
                    &req.aspect_id,
                    steps,
                    &stack_id,
                    existing,
                    &prior_servers(&inst),
                )
                .await
                .map(|vnfcs| {
                    (
                        with_vnfcs(
                            &inst,
                            flavour,
                            vnfcs,
                            &stack_id,
                            Some((&req.aspect_id, new_level)),
                        ),
                        Vec::new(),
                    )
                }),
        };
        let mut op = op;
        op.grant_id = grant_out.as_ref().map(|g| g.id.clone());
        self.finish(op, inst, grant_out, result).await
    }

    /// Heals the VNFCs `req.vnfcInstanceId` of `id` (all of them when empty): each is marked
    /// unhealthy and re-created by a stack update, in its zone; if that zone is out of
    /// resources, reselection moves it.
    ///
    /// # Errors
    /// As [`Lifecycle::instantiate`]; also an unknown VNFC id.
    pub async fn heal(
        &self,
        id: &VnfInstanceId,
        pkg: &VnfPackage,
        req: &HealVnfRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let inst = self.load(id).await?;
        let (info, stack_id) = instantiated_with_stack(&inst)?;
        let flavour = flavour_of(pkg, &info.flavour_id)?;
        let targets: Vec<String> = if req.vnfc_instance_id.is_empty() {
            info.vnfc_info.iter().map(|v| v.id.clone()).collect()
        } else {
            req.vnfc_instance_id.clone()
        };
        check_heal_targets(info, &req.vnfc_instance_id)?;
        let op = self
            .start(&inst, LcmOperationType::Heal, json!(req), opts.automatic)
            .await?;
        let gopts = self.grant_options(opts.automatic);
        let mut grant_out = None;
        let result = match self
            .with_ids(|ids| grant_request::heal(pkg, &inst, &targets, &op.id, &gopts, ids))
        {
            Err(e) => Err(Failed::new(
                FailureKind::Invalid,
                "invalid request",
                chain(&e),
            )),
            Ok(planned) => {
                let healed: BTreeSet<String> =
                    planned.new_vnfcs.iter().map(|n| n.slot.name()).collect();
                let existing: Vec<(VnfcSlot, ZoneId)> = slots_of(info)
                    .into_iter()
                    .filter(|(s, _)| !healed.contains(&s.name()))
                    .collect();
                // The healed VNFCs start in the zone they are in.
                let current: BTreeMap<String, ZoneId> = slots_of(info)
                    .into_iter()
                    .map(|(s, z)| (s.name(), z))
                    .collect();
                let heal_zones: BTreeMap<String, ZoneId> = planned
                    .new_vnfcs
                    .iter()
                    .filter_map(|n| {
                        current
                            .get(&n.slot.name())
                            .map(|z| (n.slot.name(), z.clone()))
                    })
                    .collect();
                let healed_servers: BTreeSet<String> = info
                    .vnfc_resource_info
                    .iter()
                    .filter(|v| {
                        grant_request::existing_slot(v)
                            .ok()
                            .flatten()
                            .is_some_and(|s| healed.contains(&s.name()))
                    })
                    .map(|v| v.compute_resource.resource_id.clone())
                    .filter(|id| !id.is_empty())
                    .collect();
                let mark = self
                    .mark_unhealthy(&stack_id, &healed, &healed_servers, req.cause.as_deref())
                    .await;
                match mark {
                    Err(f) => Err(f),
                    Ok(()) => self
                        .run_placed(
                            &inst,
                            pkg,
                            flavour,
                            &planned,
                            opts,
                            StackTarget::Existing(stack_id.clone()),
                            existing,
                            &mut grant_out,
                            Some(heal_zones),
                        )
                        .await
                        .map(|(vnfcs, sid, attempts)| {
                            (with_vnfcs(&inst, flavour, vnfcs, &sid, None), attempts)
                        }),
                }
            }
        };
        let mut op = op;
        op.grant_id = grant_out.as_ref().map(|g| g.id.clone());
        self.finish(op, inst, grant_out, result).await
    }

    /// Terminates `id`: deletes its stack and returns it to `NOT_INSTANTIATED`.
    ///
    /// # Errors
    /// As [`Lifecycle::instantiate`].
    pub async fn terminate(
        &self,
        id: &VnfInstanceId,
        req: &TerminateVnfRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let inst = self.load(id).await?;
        let (_, stack_id) = instantiated_with_stack(&inst)?;
        let op = self
            .start(
                &inst,
                LcmOperationType::Terminate,
                json!(req),
                opts.automatic,
            )
            .await?;
        let result = self.delete_stack(&stack_id).await.map(|()| {
            let mut new = inst.clone();
            new.instantiation_state = Some(InstantiationState::NotInstantiated);
            new.instantiated_vnf_info = None;
            if let Some(m) = new.metadata.as_mut() {
                m.remove(STACK_ID_KEY);
            }
            (new, Vec::new())
        });
        self.finish(op, inst, None, result).await
    }

    async fn load_op(&self, id: &OpOccId) -> Result<VnfLcmOpOcc, LcmError> {
        match self.drivers.store.op_occ(id).await {
            Ok(o) => Ok(o),
            Err(e) if e.is_not_found() => Err(LcmError::Invalid(Error::invalid(
                Location::default().with_field("vnfLcmOpOccId"),
                format!("no operation occurrence {id}"),
            ))),
            Err(e) => Err(LcmError::Store(e)),
        }
    }

    fn require_failed_temp(op: &VnfLcmOpOcc) -> Result<(), LcmError> {
        if op.operation_state == LcmOperationStateType::FailedTemp {
            Ok(())
        } else {
            Err(LcmError::Conflict(format!(
                "operation {} is {}; only an operation in FAILED_TEMP can be failed or rolled back",
                op.id, op.operation_state
            )))
        }
    }

    /// SOL003 "fail": an occurrence in `FAILED_TEMP` becomes `FAILED` (terminal); the instance
    /// stays as it is, and other operations may run again.
    ///
    /// # Errors
    /// [`LcmError::Conflict`] when the occurrence is not `FAILED_TEMP`.
    pub async fn fail(&self, op_id: &OpOccId) -> Result<VnfLcmOpOcc, LcmError> {
        let mut op = self.load_op(op_id).await?;
        Self::require_failed_temp(&op)?;
        op.enter(LcmOperationStateType::Failed, self.drivers.clock.now());
        self.drivers
            .store
            .commit(StoreBatch::new().with_op_occ(op.clone()))
            .await
            .map_err(LcmError::Store)?;
        Ok(op)
    }

    /// SOL003 "rollback" of an instantiate or scale-out in `FAILED_TEMP`: an instantiate's
    /// stack is deleted; a scale-out's stack is updated back to the instance's VNFCs before the
    /// operation. The occurrence goes `ROLLING_BACK` then `ROLLED_BACK`, or back to
    /// `FAILED_TEMP` with the error when the rollback itself fails.
    ///
    /// # Errors
    /// [`LcmError::Conflict`] when the occurrence is not `FAILED_TEMP` or is of another
    /// operation (heal and scale-in cannot be rolled back).
    pub async fn rollback(
        &self,
        op_id: &OpOccId,
        pkg: &VnfPackage,
    ) -> Result<OperationReport, LcmError> {
        let mut op = self.load_op(op_id).await?;
        Self::require_failed_temp(&op)?;
        let inst = self.load(&op.vnf_instance_id).await?;
        let is_scale_out = op.operation == LcmOperationType::Scale
            && op
                .operation_params
                .as_ref()
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str)
                == Some("SCALE_OUT");
        if op.operation != LcmOperationType::Instantiate && !is_scale_out {
            return Err(LcmError::Conflict(format!(
                "operation {} is a {}: only instantiate and scale-out can be rolled back",
                op.id, op.operation
            )));
        }
        op.enter(LcmOperationStateType::RollingBack, self.drivers.clock.now());
        self.drivers
            .store
            .commit(StoreBatch::new().with_op_occ(op.clone()))
            .await
            .map_err(LcmError::Store)?;
        let result: Result<VnfInstance, Failed> = if op.operation == LcmOperationType::Instantiate {
            match stack_of(&inst) {
                None => Ok(inst.clone()),
                Some(stack_id) => self.delete_stack(&stack_id).await.map(|()| {
                    let mut new = inst.clone();
                    if let Some(m) = new.metadata.as_mut() {
                        m.remove(STACK_ID_KEY);
                    }
                    new
                }),
            }
        } else {
            let (info, stack_id) = instantiated_with_stack(&inst)?;
            let flavour = flavour_of(pkg, &info.flavour_id)?;
            let before = slots_of(info);
            let zones: BTreeMap<String, ZoneId> =
                before.iter().map(|(s, z)| (s.name(), z.clone())).collect();
            let slots: Vec<VnfcSlot> = before.iter().map(|(s, _)| s.clone()).collect();
            self.restore_stack(pkg, flavour, &slots, &zones, &stack_id)
                .await
                .map(|()| inst.clone())
        };
        let now = self.drivers.clock.now();
        let (instance, failure, batch) = match result {
            Ok(new) => {
                op.enter(LcmOperationStateType::RolledBack, now);
                let batch = StoreBatch::new()
                    .with_instance(new.clone())
                    .with_op_occ(op.clone());
                (new, None, batch)
            }
            Err(f) => {
                op.error = Some(ProblemDetails::new(422, f.detail).with_title("rollback failed"));
                op.enter(LcmOperationStateType::FailedTemp, now);
                (
                    inst,
                    Some(f.kind),
                    StoreBatch::new().with_op_occ(op.clone()),
                )
            }
        };
        self.drivers
            .store
            .commit(batch)
            .await
            .map_err(LcmError::Store)?;
        Ok(OperationReport {
            op_occ: op,
            instance,
            grant: None,
            failure,
        })
    }

    /// Updates the stack to exactly `slots` in `zones`.
    async fn restore_stack(
        &self,
        pkg: &VnfPackage,
        flavour: &Flavour,
        slots: &[VnfcSlot],
        zones: &BTreeMap<String, ZoneId>,
        stack_id: &StackId,
    ) -> Result<(), Failed> {
        let (bundle, params) = self.heat_input(pkg, flavour, slots, zones)?;
        self.drivers
            .stacks
            .update_stack(UpdateStack {
                id: stack_id.clone(),
                parameters: params,
                template: Some(bundle),
            })
            .await
            .map_err(|e| Failed::driver(&e))?;
        let st = self.wait(stack_id).await?;
        if succeeded(&st) {
            Ok(())
        } else {
            Err(Failed::new(
                FailureKind::StackFailed,
                "stack update failed",
                st.stack_status_reason,
            ))
        }
    }

    /// Deletes a `NOT_INSTANTIATED` instance and its operation occurrences.
    ///
    /// # Errors
    /// [`LcmError::NotFound`], [`LcmError::Conflict`] when instantiated, [`LcmError::Store`].
    pub async fn delete(&self, id: &VnfInstanceId) -> Result<(), LcmError> {
        let inst = self.load(id).await?;
        if inst.is_instantiated() {
            return Err(LcmError::Conflict(format!(
                "VNF instance {id} is INSTANTIATED; terminate it first"
            )));
        }
        self.drivers
            .store
            .commit(StoreBatch::new().with_deleted_instance(id.clone()))
            .await
            .map_err(LcmError::Store)
    }

    /// Marks unhealthy every server under a top-level resource of `slots` (per-VNFC layout)
    /// or whose id is in `servers` (members of an AutoScalingGroup).
    async fn mark_unhealthy(
        &self,
        stack_id: &StackId,
        slots: &BTreeSet<String>,
        servers: &BTreeSet<String>,
        cause: Option<&str>,
    ) -> Result<(), Failed> {
        let resources = self
            .drivers
            .stacks
            .list_resources(ListResources::new(stack_id.clone(), 5))
            .await
            .map_err(|e| Failed::driver(&e))?;
        for r in resources
            .iter()
            .filter(|r| r.resource_type == "OS::Nova::Server")
        {
            let Some(top) = top_level_resource(stack_id, r, &resources) else {
                continue;
            };
            if slots.contains(&top) || servers.contains(&r.physical_resource_id) {
                let reason = cause.unwrap_or("healed by vnfm");
                self.drivers
                    .stacks
                    .mark_unhealthy(MarkUnhealthy::new(
                        r.stack_id.clone(),
                        r.resource_name.clone(),
                        reason,
                    ))
                    .await
                    .map_err(|e| Failed::driver(&e))?;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn scale_in(
        &self,
        pkg: &VnfPackage,
        flavour: &Flavour,
        aspect: &str,
        steps: u32,
        stack_id: &StackId,
        existing: Vec<(VnfcSlot, ZoneId)>,
        prior: &BTreeMap<String, VnfcSlot>,
    ) -> Result<Vec<VnfcResourceInfo>, Failed> {
        // Remove the newest VNFCs (highest index) of every VDU the aspect scales.
        let mut keep = existing;
        for vdu in flavour.vdus.keys() {
            let Some(delta) = flavour.aspect_delta(aspect, vdu) else {
                continue;
            };
            let remove = usize::try_from(delta.saturating_mul(steps)).unwrap_or(usize::MAX);
            let mut of_vdu: Vec<u32> = keep
                .iter()
                .filter(|(s, _)| &s.vdu == vdu)
                .map(|(s, _)| s.index)
                .collect();
            of_vdu.sort_unstable();
            let cut: BTreeSet<u32> = of_vdu.iter().rev().take(remove).copied().collect();
            keep.retain(|(s, _)| &s.vdu != vdu || !cut.contains(&s.index));
        }
        let zones: BTreeMap<String, ZoneId> =
            keep.iter().map(|(s, z)| (s.name(), z.clone())).collect();
        let slots: Vec<VnfcSlot> = keep.iter().map(|(s, _)| s.clone()).collect();
        self.restore_stack(pkg, flavour, &slots, &zones, stack_id)
            .await?;
        let layouts = self.layouts(pkg, flavour)?;
        self.collect(stack_id, &slots, &layouts, prior).await
    }

    fn heat_input(
        &self,
        pkg: &VnfPackage,
        flavour: &Flavour,
        slots: &[VnfcSlot],
        zones: &BTreeMap<String, ZoneId>,
    ) -> Result<(TemplateBundle, Parameters), Failed> {
        let base = pkg
            .base_hot(&flavour.id)
            .map_err(|e| Failed::new(FailureKind::Invalid, "package has no BaseHOT", chain(&e)))?;
        let vdus: Vec<VduId> = flavour.vdus.keys().cloned().collect();
        let mut values = NfvValues {
            zones: zones.clone(),
            ..NfvValues::default()
        };
        for v in flavour.vdus.values() {
            if let Some(f) = &v.flavor {
                values.flavors.insert(v.id.to_string(), f.to_string());
            }
            if let Some(img) = &v.image {
                values.images.insert(v.id.to_string(), img.clone());
            }
        }
        for s in flavour.storages.values() {
            if let Some(img) = &s.image {
                values.images.insert(s.id.clone(), img.clone());
            }
        }
        let input = userdata::build(
            &format!("{}: BaseHOT/{}", pkg.source, flavour.id),
            &base.template,
            &vdus,
            slots,
            &values,
        )
        .map_err(|e| {
            Failed::new(
                FailureKind::Invalid,
                "cannot build the stack template",
                chain(&e),
            )
        })?;
        let bundle = TemplateBundle {
            template: input.template,
            files: base.files.clone(),
        };
        let mut params = Parameters::new();
        params.insert("nfv".into(), input.nfv);
        Ok((bundle, params))
    }

    /// Reads with `read` every `poll_interval` until `done` holds of the answer, or until
    /// `stack_timeout` has passed; returns the last answer and whether `done` held.
    async fn poll_until<T, F, Fut>(
        &self,
        mut read: F,
        done: impl Fn(&T) -> bool,
    ) -> Result<(T, bool), Failed>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, crate::driver::DriverError>>,
    {
        let mut waited = Duration::ZERO;
        loop {
            let answer = read().await.map_err(|e| Failed::driver(&e))?;
            if done(&answer) {
                return Ok((answer, true));
            }
            if waited >= self.config.stack_timeout {
                return Ok((answer, false));
            }
            self.drivers.clock.sleep(self.config.poll_interval).await;
            waited += self.config.poll_interval;
        }
    }

    /// The stack `id` once it is no longer in progress; a failure after `stack_timeout`.
    async fn wait(&self, id: &StackId) -> Result<crate::driver::Stack, Failed> {
        let (s, settled) = self
            .poll_until(
                || self.drivers.stacks.show_stack(id),
                |s| !s.stack_status.is_in_progress(),
            )
            .await?;
        if settled {
            return Ok(s);
        }
        Err(Failed::new(
            FailureKind::Backend,
            "stack timed out",
            format!(
                "stack {id} still {} after {}s",
                s.stack_status,
                self.config.stack_timeout.as_secs()
            ),
        ))
    }

    /// Deletes the stack `id` and waits until it is gone (`show_stack` answers not found, or
    /// `DELETE_COMPLETE`), polled like a create: the operation ends only once Heat has really
    /// deleted the servers (Heat answers the DELETE at once and works on afterwards). A stack
    /// already unknown is gone. `DELETE_FAILED` ends the operation with Heat's reason; a
    /// delete still in progress after `stack_timeout`, with a timeout naming it.
    async fn delete_stack(&self, id: &StackId) -> Result<(), Failed> {
        match self.drivers.stacks.delete_stack(id).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(Failed::driver(&e)),
        }
        let (last, gone) = self
            .poll_until(
                || async {
                    match self.drivers.stacks.show_stack(id).await {
                        Ok(s) => Ok(Some(s)),
                        Err(e) if e.is_not_found() => Ok(None),
                        Err(e) => Err(e),
                    }
                },
                |s: &Option<crate::driver::Stack>| {
                    s.as_ref().is_none_or(|s| !s.stack_status.is_in_progress())
                },
            )
            .await?;
        let Some(stack) = last else {
            return Ok(());
        };
        let status = stack.stack_status;
        if status.action == StackAction::Delete && status.is_complete() {
            return Ok(());
        }
        if !gone {
            return Err(Failed::new(
                FailureKind::Backend,
                "stack delete timed out",
                format!(
                    "stack {id} still {status} after {}s: {}",
                    self.config.stack_timeout.as_secs(),
                    stack.stack_status_reason
                ),
            ));
        }
        Err(Failed::new(
            FailureKind::StackFailed,
            "stack delete failed",
            format!("stack {id} is {status}: {}", stack.stack_status_reason),
        ))
    }

    /// The resources of the failed stack `id` (nested ones included) once none of them is in
    /// progress, polled like the stack (at most `stack_timeout`, then as they are). Heat fails
    /// a stack as soon as one resource fails, while sibling nested stacks may still be being
    /// created; an update sent then makes Heat cancel them and fail the update itself
    /// ("Resource UPDATE failed: resources.VDU2-0: Stack UPDATE cancelled", seen against real
    /// Heat 27). Waiting also shows every server that failed, not only the first.
    async fn settled_resources(
        &self,
        id: &StackId,
    ) -> Result<Vec<crate::driver::StackResource>, Failed> {
        let (res, _settled) = self
            .poll_until(
                || {
                    self.drivers
                        .stacks
                        .list_resources(ListResources::new(id.clone(), 5))
                },
                |res: &Vec<crate::driver::StackResource>| {
                    !res.iter().any(|r| r.resource_status.is_in_progress())
                },
            )
            .await?;
        Ok(res)
    }

    /// Grants (unless `heal_zones` gives the starting zones), then drives the stack through
    /// the reselection machine. `existing` are the VNFCs that stay, with their zones.
    #[allow(clippy::too_many_arguments)]
    async fn run_placed(
        &self,
        inst: &VnfInstance,
        pkg: &VnfPackage,
        flavour: &Flavour,
        planned: &PlannedGrant,
        opts: &OperationOptions,
        mut target: StackTarget,
        existing: Vec<(VnfcSlot, ZoneId)>,
        grant_out: &mut Option<Grant>,
        heal_zones: Option<BTreeMap<String, ZoneId>>,
    ) -> Result<
        (
            Vec<VnfcResourceInfo>,
            StackId,
            Vec<crate::reselect::Attempt>,
        ),
        Failed,
    > {
        let listing = self
            .drivers
            .zones
            .list_zones(ListZones::default())
            .await
            .map_err(|e| Failed::driver(&e))?;
        let layouts = self.layouts(pkg, flavour)?;
        let groups = group_resources(&layouts);
        // The zone of the VNFCs a group VDU already has: they never move.
        let mut group_zone = group_zones(&groups, &existing);
        let fixed_groups: BTreeSet<VduId> = group_zone.keys().cloned().collect();
        let new_zones: BTreeMap<String, ZoneId> = match heal_zones {
            Some(z) => z,
            None => {
                let (granted, pinned) =
                    group_grant(planned, inst, &groups, &group_zone, &opts.pinned);
                let g = self.grant(&granted, flavour, inst, &listing, &pinned)?;
                let zones = planned
                    .new_vnfcs
                    .iter()
                    .filter_map(|n| {
                        g.zone_of(&n.resource_id)
                            .map(|z| (n.slot.name(), z.clone()))
                    })
                    .collect();
                *grant_out = Some(g);
                zones
            }
        };
        // Forced affinity: a group without VNFCs takes the zone of its first new VNFC.
        let mut new_sorted: Vec<&VnfcSlot> = planned.new_vnfcs.iter().map(|n| &n.slot).collect();
        new_sorted.sort();
        for slot in new_sorted {
            if groups.contains_key(&slot.vdu) && !group_zone.contains_key(&slot.vdu) {
                if let Some(z) = new_zones.get(&slot.name()) {
                    group_zone.insert(slot.vdu.clone(), z.clone());
                }
            }
        }
        let mut units: Vec<Unit> = Vec::new();
        let mut group_demand: BTreeMap<VduId, Resources> = BTreeMap::new();
        for n in &planned.new_vnfcs {
            let demand = granter::vdu_demand(flavour, &n.slot.vdu);
            if groups.contains_key(&n.slot.vdu) {
                let d = group_demand.entry(n.slot.vdu.clone()).or_default();
                *d = d.saturating_add(&demand);
                continue;
            }
            let zone = new_zones.get(&n.slot.name()).cloned().ok_or_else(|| {
                Failed::new(
                    FailureKind::Invalid,
                    "grant incomplete",
                    format!("no zone granted to VNFC {}", n.slot.name()),
                )
            })?;
            units.push(Unit::new(
                n.slot.name(),
                n.slot.vdu.clone(),
                zone,
                true,
                demand,
            ));
        }
        for (s, z) in &existing {
            let demand = granter::vdu_demand(flavour, &s.vdu);
            if groups.contains_key(&s.vdu) {
                let d = group_demand.entry(s.vdu.clone()).or_default();
                *d = d.saturating_add(&demand);
                continue;
            }
            units.push(Unit::new(s.name(), s.vdu.clone(), z.clone(), false, demand));
        }
        for (vdu, demand) in group_demand {
            let Some(resource) = groups.get(&vdu) else {
                continue;
            };
            let zone = group_zone.get(&vdu).cloned().ok_or_else(|| {
                Failed::new(
                    FailureKind::Invalid,
                    "grant incomplete",
                    format!(
                        "no zone granted to the VNFCs of VDU {vdu} (AutoScalingGroup {resource})"
                    ),
                )
            })?;
            units.push(Unit::new(
                resource.clone(),
                vdu.clone(),
                zone,
                !fixed_groups.contains(&vdu),
                demand,
            ));
        }
        let constraints = unit_constraints(&planned.request, planned, inst, &groups);
        let mut slots: Vec<VnfcSlot> = existing.iter().map(|(s, _)| s.clone()).collect();
        slots.extend(planned.new_vnfcs.iter().map(|n| n.slot.clone()));
        slots.sort();
        let cfg = ReselectConfig {
            enabled: self.config.reselect_zones,
            pattern: self.config.pattern.clone(),
            max_reselections: self.config.max_reselections,
            selection: self.config.selection,
            seed: self.config.seed,
        };
        let mut m = Reselection::new(cfg, units, constraints).with_zone_listing(listing);
        let fail = |m: &Reselection, target: &StackTarget, f: Failed| Failed {
            attempts: m.attempts().to_vec(),
            stack_id: match target {
                StackTarget::Existing(id) => Some(id.clone()),
                StackTarget::Create(_) => None,
            },
            ..f
        };
        while let Some(action) = m.poll_action() {
            match action {
                Action::ApplyStack { zones } => {
                    let (bundle, params) = self
                        .heat_input(pkg, flavour, &slots, &zones)
                        .map_err(|f| fail(&m, &target, f))?;
                    let applied = match &target {
                        StackTarget::Create(name) => self
                            .drivers
                            .stacks
                            .create_stack(CreateStack::new(name.clone(), bundle, params))
                            .await
                            .inspect(|id| target = StackTarget::Existing(id.clone())),
                        StackTarget::Existing(id) => self
                            .drivers
                            .stacks
                            .update_stack(UpdateStack {
                                id: id.clone(),
                                parameters: params,
                                template: Some(bundle),
                            })
                            .await
                            .map(|()| id.clone()),
                    };
                    let id = match applied {
                        Ok(id) => id,
                        Err(e) => {
                            // The attempt has an outcome: Heat refused it.
                            m.handle_apply_refused(&chain(&e));
                            return Err(fail(&m, &target, Failed::driver(&e)));
                        }
                    };
                    let stack = self.wait(&id).await.map_err(|f| fail(&m, &target, f))?;
                    if succeeded(&stack) {
                        m.handle_stack_succeeded();
                    } else if stack.stack_status.action == StackAction::Rollback {
                        m.handle_stack_rolled_back(&stack.stack_status_reason);
                    } else {
                        m.handle_stack_failed(&stack.stack_status_reason);
                    }
                }
                Action::ListResources => {
                    let StackTarget::Existing(id) = &target else {
                        break;
                    };
                    let res = self
                        .settled_resources(id)
                        .await
                        .map_err(|e| fail(&m, &target, e))?;
                    m.handle_resources(id, &res);
                }
                Action::ListZones => {
                    let z = self
                        .drivers
                        .zones
                        .list_zones(ListZones::default())
                        .await
                        .map_err(|e| fail(&m, &target, Failed::driver(&e)))?;
                    m.handle_zones(z);
                }
                Action::LocateFailedServers { servers } => {
                    // Where Nova put each failed server (`OS-EXT-AZ:availability_zone`); a
                    // server it cannot show is charged to the zone asked for, by the machine.
                    let mut zones = BTreeMap::new();
                    for server in servers {
                        let zone = self
                            .drivers
                            .compute
                            .server(&server)
                            .await
                            .ok()
                            .and_then(|s| s.zone);
                        zones.insert(server, zone);
                    }
                    m.handle_failed_servers(zones);
                }
                Action::LocateServers { servers } => {
                    // Only the capacity estimate reads these hosts: a server the inventory
                    // cannot show is estimated instead, never a reason to fail the operation.
                    let mut hosts = BTreeMap::new();
                    for (unit, server) in servers {
                        let host = self
                            .drivers
                            .compute
                            .server(&server)
                            .await
                            .ok()
                            .and_then(|s| s.host);
                        hosts.insert(unit, host);
                    }
                    m.handle_hosts(hosts);
                }
            }
        }
        let StackTarget::Existing(stack_id) = &target else {
            return Err(fail(
                &m,
                &target,
                Failed::new(
                    FailureKind::Backend,
                    "no stack",
                    "the stack was never created",
                ),
            ));
        };
        match m.outcome() {
            Some(Outcome::Succeeded) => {
                let vnfcs = self
                    .collect(stack_id, &slots, &layouts, &prior_servers(inst))
                    .await
                    .map_err(|f| fail(&m, &target, f))?;
                Ok((vnfcs, stack_id.clone(), m.attempts().to_vec()))
            }
            Some(Outcome::GaveUp(g)) => {
                let kind = match g {
                    // A fixed unit fails only with an insufficient-resource error (the pattern
                    // matched), e.g. a scale-out of a VDU under an AutoScalingGroup.
                    GiveUp::NoCandidates { .. }
                    | GiveUp::NoRoom { .. }
                    | GiveUp::RetryLimit { .. }
                    | GiveUp::ReselectionDisabled { .. }
                    | GiveUp::FixedUnitFailed { .. } => FailureKind::CapacityExhausted,
                    GiveUp::Infeasible { .. } => FailureKind::Infeasible,
                    GiveUp::Refused { .. } => FailureKind::Invalid,
                    _ => FailureKind::StackFailed,
                };
                let tried: Vec<String> = m.excluded().iter().map(ToString::to_string).collect();
                let detail = if tried.is_empty() {
                    g.to_string()
                } else {
                    format!("{g} (zones tried and excluded: {})", tried.join(", "))
                };
                Err(fail(
                    &m,
                    &target,
                    Failed::new(kind, "stack operation failed", detail),
                ))
            }
            None => Err(fail(
                &m,
                &target,
                Failed::new(
                    FailureKind::Backend,
                    "unfinished",
                    "reselection did not finish",
                ),
            )),
        }
    }

    /// Reads the servers back: one `VnfcResourceInfo` per slot. A slot of a VDU in the
    /// per-VNFC layout is found by its top-level resource; the slots of a VDU in the group
    /// layout are matched to the servers under its AutoScalingGroup (see the module docs):
    /// `prior` maps the server ids the instance knew to their slots.
    async fn collect(
        &self,
        stack_id: &StackId,
        slots: &[VnfcSlot],
        layouts: &BTreeMap<VduId, Layout>,
        prior: &BTreeMap<String, VnfcSlot>,
    ) -> Result<Vec<VnfcResourceInfo>, Failed> {
        let resources = self
            .drivers
            .stacks
            .list_resources(ListResources::new(stack_id.clone(), 5))
            .await
            .map_err(|e| Failed::driver(&e))?;
        let servers_under = |name: &str| -> Vec<&StackResource> {
            resources
                .iter()
                .filter(|r| {
                    r.resource_type == "OS::Nova::Server"
                        && top_level_resource(stack_id, r, &resources).as_deref() == Some(name)
                })
                .collect()
        };
        // (slot, server id, top-level resource)
        let mut found: Vec<(VnfcSlot, String, String)> = Vec::new();
        for slot in slots {
            if layouts.get(&slot.vdu).is_some_and(Layout::is_group) {
                continue;
            }
            let name = slot.name();
            let Some(server) = servers_under(&name).into_iter().next() else {
                return Err(Failed::new(
                    FailureKind::StackFailed,
                    "server not found",
                    format!("stack {stack_id} has no OS::Nova::Server under resource {name}"),
                ));
            };
            found.push((slot.clone(), server.physical_resource_id.clone(), name));
        }
        for (vdu, layout) in layouts {
            let Some(resource) = layout.group_resource() else {
                continue;
            };
            let wanted: Vec<&VnfcSlot> = slots.iter().filter(|s| &s.vdu == vdu).collect();
            let servers = servers_under(resource);
            if servers.len() != wanted.len() {
                return Err(Failed::new(
                    FailureKind::StackFailed,
                    "servers not found",
                    format!(
                        "stack {stack_id} has {} OS::Nova::Server under AutoScalingGroup \
                         {resource}; expected {} (the VNFCs of VDU {vdu})",
                        servers.len(),
                        wanted.len()
                    ),
                ));
            }
            let known: Vec<Option<&VnfcSlot>> = servers
                .iter()
                .map(|r| prior.get(&r.physical_resource_id).filter(|s| &s.vdu == vdu))
                .collect();
            let claimed: BTreeSet<&VnfcSlot> = known.iter().flatten().copied().collect();
            let mut free = wanted.into_iter().filter(|s| !claimed.contains(s));
            for (server, known) in servers.iter().zip(known) {
                let slot = match known {
                    Some(s) => s.clone(),
                    None => free.next().cloned().ok_or_else(|| {
                        Failed::new(
                            FailureKind::StackFailed,
                            "unexpected server",
                            format!(
                                "server {} under AutoScalingGroup {resource} of stack \
                                 {stack_id} matches no VNFC of VDU {vdu}",
                                server.physical_resource_id
                            ),
                        )
                    })?,
                };
                found.push((
                    slot,
                    server.physical_resource_id.clone(),
                    resource.to_owned(),
                ));
            }
        }
        found.sort();
        let mut out = Vec::new();
        for (slot, server_id, parent) in found {
            let info = self
                .drivers
                .compute
                .server(&server_id.into())
                .await
                .map_err(|e| Failed::driver(&e))?;
            let mut md = crate::grant::KeyValuePairs::new();
            md.insert(grant_request::VDU_IDX_KEY.into(), json!(slot.index));
            md.insert(grant_request::RESOURCE_NAME_KEY.into(), json!(parent));
            if let Some(z) = &info.zone {
                md.insert("zone".into(), json!(z));
            }
            if let Some(h) = &info.host {
                md.insert("host".into(), json!(h));
            }
            md.insert("server_name".into(), json!(info.name));
            out.push(VnfcResourceInfo {
                id: slot.name(),
                vdu_id: slot.vdu.clone(),
                compute_resource: ResourceHandle::new(info.id.to_string())
                    .with_vim_connection_id(self.config.vim_connection_id.clone())
                    .with_vim_level_resource_type("OS::Nova::Server"),
                zone_id: info.zone.clone(),
                metadata: Some(md),
                ..VnfcResourceInfo::default()
            });
        }
        Ok(out)
    }

    /// The layout of every VDU of `flavour` in its BaseHOT top template.
    fn layouts(
        &self,
        pkg: &VnfPackage,
        flavour: &Flavour,
    ) -> Result<BTreeMap<VduId, Layout>, Failed> {
        let base = pkg
            .base_hot(&flavour.id)
            .map_err(|e| Failed::new(FailureKind::Invalid, "package has no BaseHOT", chain(&e)))?;
        let vdus: Vec<VduId> = flavour.vdus.keys().cloned().collect();
        userdata::layouts(
            &format!("{}: BaseHOT/{}", pkg.source, flavour.id),
            &base.template,
            &vdus,
        )
        .map_err(|e| {
            Failed::new(
                FailureKind::Invalid,
                "cannot build the stack template",
                chain(&e),
            )
        })
    }
}

/// True when the stack reached `*_COMPLETE` for the action asked. A `ROLLBACK_COMPLETE` (Heat
/// rolled a failed create or update back) is a failure, not a success.
fn succeeded(stack: &crate::driver::Stack) -> bool {
    stack.stack_status.is_complete()
        && stack.stack_status.action != crate::driver::StackAction::Rollback
}

/// What [`Lifecycle::grant_only`] grants.
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

/// The instance metadata key of the stack id.
pub const STACK_ID_KEY: &str = "stackId";

fn stack_of(inst: &VnfInstance) -> Option<StackId> {
    inst.metadata
        .as_ref()
        .and_then(|m| m.get(STACK_ID_KEY))
        .and_then(Value::as_str)
        .map(StackId::from)
}

fn set_stack_id(inst: &mut VnfInstance, id: &StackId) {
    inst.metadata
        .get_or_insert_with(Default::default)
        .insert(STACK_ID_KEY.into(), json!(id));
}

fn flavour_of<'a>(pkg: &'a VnfPackage, id: &str) -> Result<&'a Flavour, LcmError> {
    pkg.flavour(id).ok_or_else(|| {
        LcmError::Invalid(Error::invalid(
            Location::default().with_field("flavourId"),
            format!(
                "package {} has no flavour {id:?}; it has {}",
                pkg.source,
                list(pkg.flavours.keys())
            ),
        ))
    })
}

fn list<'a, I: Iterator<Item = &'a String>>(it: I) -> String {
    let v: Vec<&str> = it.map(String::as_str).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn check_pinned(flavour: &Flavour, pinned: &BTreeMap<String, ZoneId>) -> Result<(), LcmError> {
    for key in pinned.keys() {
        let vdu = VduId::from(userdata::rm_idx(key));
        if flavour.vdu(&vdu).is_none() {
            return Err(LcmError::Invalid(Error::invalid(
                Location::default().with_field("zone"),
                format!(
                    "--zone names {key}, which is no VDU or VNFC of flavour {}; its VDUs are {}",
                    flavour.id,
                    flavour
                        .vdus
                        .keys()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )));
        }
    }
    Ok(())
}

fn instantiated_with_stack(
    inst: &VnfInstance,
) -> Result<(&InstantiatedVnfInfo, StackId), LcmError> {
    let info = inst
        .instantiated_vnf_info
        .as_ref()
        .filter(|_| inst.is_instantiated())
        .ok_or_else(|| {
            LcmError::Conflict(format!("VNF instance {} is NOT_INSTANTIATED", inst.id))
        })?;
    let stack = stack_of(inst).ok_or_else(|| {
        LcmError::Invalid(Error::invalid(
            Location::default().with_field(format!("metadata.{STACK_ID_KEY}")),
            format!("VNF instance {} records no stack id", inst.id),
        ))
    })?;
    Ok((info, stack))
}

/// The slots of the instance's VNFCs with their zones.
/// A scale-out of `steps` steps of `aspect` must leave every VDU it scales within the VDU's
/// `max_number_of_instances` (the loader accepts levels × deltas beyond it).
fn check_vdu_maximum(
    flavour: &Flavour,
    info: &InstantiatedVnfInfo,
    aspect: &str,
    steps: u32,
) -> Result<(), LcmError> {
    for (id, vdu) in &flavour.vdus {
        let Some(delta) = flavour.aspect_delta(aspect, id) else {
            continue;
        };
        let now = info
            .vnfc_resource_info
            .iter()
            .filter(|v| v.vdu_id.as_str() == id.as_str())
            .count() as u64;
        let after = now.saturating_add(u64::from(delta).saturating_mul(u64::from(steps)));
        if after > u64::from(vdu.max_instances) {
            return Err(LcmError::Invalid(Error::invalid(
                Location::default().with_field("numberOfSteps"),
                format!(
                    "{steps} step(s) of aspect {aspect} take VDU {id} from {now} to {after} \
                     instances; its max_number_of_instances is {}",
                    vdu.max_instances
                ),
            )));
        }
    }
    Ok(())
}

/// The VNFCs a heal names must be VNFCs of the instance, each once.
fn check_heal_targets(info: &InstantiatedVnfInfo, named: &[String]) -> Result<(), LcmError> {
    let mut seen = BTreeSet::new();
    for (i, v) in named.iter().enumerate() {
        let at = || Location::default().with_field(format!("vnfcInstanceId[{i}]"));
        if !info.vnfc_info.iter().any(|c| &c.id == v) {
            return Err(LcmError::Invalid(Error::invalid(
                at(),
                format!(
                    "{v:?} is not a VNFC of the instance; expected one of {}",
                    list(info.vnfc_info.iter().map(|c| &c.id))
                ),
            )));
        }
        if !seen.insert(v) {
            return Err(LcmError::Invalid(Error::invalid(
                at(),
                format!("{v:?} is named twice; expected each VNFC once"),
            )));
        }
    }
    Ok(())
}

fn slots_of(info: &InstantiatedVnfInfo) -> Vec<(VnfcSlot, ZoneId)> {
    info.vnfc_resource_info
        .iter()
        .filter_map(|v| {
            let slot = grant_request::existing_slot(v).ok().flatten()?;
            Some((slot, v.zone()?))
        })
        .collect()
}

fn instantiated_info(
    flavour: &Flavour,
    flavour_id: &str,
    vnfcs: Vec<VnfcResourceInfo>,
    previous: Option<&InstantiatedVnfInfo>,
) -> InstantiatedVnfInfo {
    let scale_status = flavour
        .scaling_aspects
        .keys()
        .map(|a| ScaleInfo {
            aspect_id: a.clone(),
            vnfd_id: None,
            scale_level: previous.and_then(|p| p.scale_level(a)).unwrap_or(0),
        })
        .collect();
    let max_scale_levels = flavour
        .scaling_aspects
        .values()
        .map(|a| ScaleInfo {
            aspect_id: a.id.clone(),
            vnfd_id: None,
            scale_level: a.max_scale_level,
        })
        .collect();
    let vnfc_info = vnfcs
        .iter()
        .map(|v| VnfcInfo {
            id: v.id.clone(),
            vdu_id: v.vdu_id.clone(),
            vnfc_resource_info_id: Some(v.id.clone()),
            vnfc_state: VnfOperationalStateType::Started,
            vnfc_configurable_properties: None,
        })
        .collect();
    InstantiatedVnfInfo {
        flavour_id: flavour_id.to_owned(),
        vnf_state: Some(VnfOperationalStateType::Started),
        scale_status,
        max_scale_levels,
        vnfc_resource_info: vnfcs,
        vnfc_info,
        metadata: previous.and_then(|p| p.metadata.clone()),
        ..InstantiatedVnfInfo::default()
    }
}

fn with_vnfcs(
    inst: &VnfInstance,
    flavour: &Flavour,
    vnfcs: Vec<VnfcResourceInfo>,
    stack_id: &StackId,
    level: Option<(&String, u32)>,
) -> VnfInstance {
    let mut new = inst.clone();
    let prev = inst.instantiated_vnf_info.as_ref();
    let mut info = instantiated_info(flavour, &flavour.id, vnfcs, prev);
    if let Some((aspect, l)) = level {
        for s in info
            .scale_status
            .iter_mut()
            .filter(|s| &s.aspect_id == aspect)
        {
            s.scale_level = l;
        }
    }
    new.instantiated_vnf_info = Some(info);
    set_stack_id(&mut new, stack_id);
    new
}

/// The server id of every VNFC of the instance with a known slot.
fn prior_servers(inst: &VnfInstance) -> BTreeMap<String, VnfcSlot> {
    inst.instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_resource_info.iter())
        .filter(|v| !v.compute_resource.resource_id.is_empty())
        .filter_map(|v| {
            let slot = grant_request::existing_slot(v).ok().flatten()?;
            Some((v.compute_resource.resource_id.clone(), slot))
        })
        .collect()
}

/// The AutoScalingGroup resource of every VDU in the group layout.
fn group_resources(layouts: &BTreeMap<VduId, Layout>) -> BTreeMap<VduId, String> {
    layouts
        .iter()
        .filter_map(|(v, l)| l.group_resource().map(|r| (v.clone(), r.to_owned())))
        .collect()
}

/// The zone of the existing VNFCs of every group VDU that has some (its first one's).
fn group_zones(
    groups: &BTreeMap<VduId, String>,
    existing: &[(VnfcSlot, ZoneId)],
) -> BTreeMap<VduId, ZoneId> {
    let mut out = BTreeMap::new();
    let mut sorted: Vec<&(VnfcSlot, ZoneId)> = existing.iter().collect();
    sorted.sort();
    for (s, z) in sorted {
        if groups.contains_key(&s.vdu) {
            out.entry(s.vdu.clone()).or_insert_with(|| z.clone());
        }
    }
    out
}

fn is_zone_scope(scope: ConstraintScope) -> bool {
    matches!(
        scope,
        ConstraintScope::Zone | ConstraintScope::ZoneGroup | ConstraintScope::NfviPop
    )
}

/// The grant request and pinned zones the local granter answers when VDUs are in the group
/// layout (`groups`: VDU → AutoScalingGroup resource; `group_zone`: the zone of the group
/// VDUs that already have VNFCs): see "VDUs under an AutoScalingGroup" in the module docs.
fn group_grant(
    planned: &PlannedGrant,
    inst: &VnfInstance,
    groups: &BTreeMap<VduId, String>,
    group_zone: &BTreeMap<VduId, ZoneId>,
    pinned: &BTreeMap<String, ZoneId>,
) -> (PlannedGrant, BTreeMap<String, ZoneId>) {
    let mut planned = planned.clone();
    let mut pinned = pinned.clone();
    if groups.is_empty() {
        return (planned, pinned);
    }
    let mut vdu_of: BTreeMap<(bool, String), VduId> = planned
        .new_vnfcs
        .iter()
        .map(|n| ((true, n.resource_id.clone()), n.slot.vdu.clone()))
        .collect();
    for v in inst
        .instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_resource_info.iter())
    {
        vdu_of.insert(
            (false, v.compute_resource.resource_id.clone()),
            v.vdu_id.clone(),
        );
    }
    // Zone anti-affinity keeps one representative per group VDU (key: is GRANT, resource id).
    let mut constraints = Vec::new();
    for mut pc in std::mem::take(&mut planned.request.placement_constraints) {
        if !pc.is_affinity() && is_zone_scope(pc.scope) {
            let mut seen = BTreeSet::new();
            pc.resource.retain(|r| {
                match vdu_of.get(&(r.id_type == ConstraintIdType::Grant, r.resource_id.clone())) {
                    Some(vdu) if groups.contains_key(vdu) => seen.insert(vdu.clone()),
                    _ => true,
                }
            });
            if pc.resource.len() < 2 {
                continue;
            }
        }
        constraints.push(pc);
    }
    for vdu in groups.keys() {
        let mut new: Vec<&super::grant::NewVnfc> = planned
            .new_vnfcs
            .iter()
            .filter(|n| &n.slot.vdu == vdu)
            .collect();
        if new.is_empty() {
            continue;
        }
        new.sort_by(|a, b| a.slot.cmp(&b.slot));
        let zone = group_zone.get(vdu).cloned().or_else(|| {
            new.iter()
                .find_map(|n| pinned.get(&n.slot.name()).cloned())
                .or_else(|| pinned.get(vdu.as_str()).cloned())
        });
        for n in &new {
            pinned.remove(&n.slot.name());
        }
        match zone {
            Some(z) => {
                pinned.insert(vdu.to_string(), z);
            }
            None if new.len() >= 2 => constraints.push(
                PlacementConstraint::new(
                    AffinityOrAntiAffinity::Affinity,
                    ConstraintScope::Zone,
                    new.iter()
                        .map(|n| ConstraintResourceRef::grant(n.resource_id.clone()))
                        .collect(),
                )
                .with_fallback_best_effort(false),
            ),
            None => {}
        }
    }
    planned.request.placement_constraints = constraints;
    (planned, pinned)
}

/// The grant request's placement constraints over stack units (slot names, or the
/// AutoScalingGroup resource for the VNFCs of a VDU in `groups`): `GRANT` references through
/// the planned new VNFCs, `RES_MGMT` references through the instance's VNFCs. Members are
/// listed once; a constraint left with fewer than two units constrains nothing and is dropped.
fn unit_constraints(
    request: &GrantRequest,
    planned: &PlannedGrant,
    inst: &VnfInstance,
    groups: &BTreeMap<VduId, String>,
) -> Vec<Constraint> {
    let unit = |vdu: &VduId, name: String| groups.get(vdu).cloned().unwrap_or(name);
    let by_def: BTreeMap<&str, String> = planned
        .new_vnfcs
        .iter()
        .map(|n| (n.resource_id.as_str(), unit(&n.slot.vdu, n.slot.name())))
        .collect();
    let by_res: BTreeMap<String, String> = inst
        .instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_resource_info.iter())
        .map(|v| {
            (
                v.compute_resource.resource_id.clone(),
                unit(&v.vdu_id, v.id.clone()),
            )
        })
        .collect();
    request
        .placement_constraints
        .iter()
        .enumerate()
        .filter_map(|(i, pc)| {
            let mut members: Vec<String> = Vec::new();
            for m in pc.resource.iter().filter_map(|r| match r.id_type {
                ConstraintIdType::Grant => by_def.get(r.resource_id.as_str()).cloned(),
                ConstraintIdType::ResMgmt => by_res.get(&r.resource_id).cloned(),
            }) {
                if !members.contains(&m) {
                    members.push(m);
                }
            }
            if members.len() < 2 && !groups.is_empty() {
                return None;
            }
            Some(granter::solver_constraint(i, pc, members))
        })
        .collect()
}
