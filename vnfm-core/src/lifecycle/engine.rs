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
//!    template and `nfv` parameter ([`super::userdata`]) and a Nova server group per
//!    `AffinityRule` / `AntiAffinityRule` at `nfvi_node` scope (a required anti-affinity group
//!    with more members than its zone has hosts is refused first), and the reselection machine
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
//! A VDU in the [`Layout::Group`](super::userdata::Layout::Group) layout (see [`super::userdata`]) is the member of one
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

//! # CNFs
//! A flavour whose VDUs are Kubernetes workloads of the package (no `BaseHOT`, manifests under
//! `Files/kubernetes/`) runs the `Cnf*` plans of the same machine through
//! [`Drivers::cluster`] instead of stacks: no grant, no zones; see [`super::cnf`]. The instance
//! records its Kubernetes resources in `metadata.cnf` instead of a stack id, and its VNFCs
//! are its pods.

//! # The loop
//! Each operation is an [`Operation`] machine (sans-IO); [`Lifecycle`] validates the request
//! (an invalid one starts nothing), builds the machine, and runs the loop that performs its
//! actions through the driver traits, feeds the results back and sleeps on the
//! [`Clock`](crate::driver::Clock) until the machine's next timer.
//!
//! # One operation per instance, and recovery
//! Starting takes the instance by a conditional commit (its version must not have moved since
//! it was read), so of two processes starting an operation on one instance at the same moment
//! exactly one runs; the other gets [`LcmError::Conflict`]. The running occurrence carries a
//! lease (owner and expiry, renewed while it runs). An occurrence whose lease expired (its
//! process was killed) or that was interrupted ([`Interrupt`]) can be retried
//! ([`Lifecycle::retry`]), rolled back ([`Lifecycle::rollback`]) or failed
//! ([`Lifecycle::fail`]); one whose lease is alive is left alone, whoever runs it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{json, Value};

use super::cnf::{self, CnfResources, CnfWork};
use super::events::LifecycleObserver;
use super::failure::Failed;
use super::grant::{self as grant_request, GrantOptions, PlannedGrant};
use super::groups;
use super::hook::{HookSpec, Interrupt, OperationHook};
use super::operation::{Operation, OperationStart, Plan, Progress};
use super::plan::{self, flavour_of, instantiated_with_stack};
use super::stack;
use crate::driver::{
    DriverError, GrantDriver, ListZones, Precondition, StoreBatch, Version, Versioned,
};
use crate::error::{Error, Location};
use crate::grant::{Grant, GrantRequest, Link};
use crate::id::{IdGen, OpOccId, VnfInstanceId};
use crate::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, InstantiationState, LcmOperationType,
    ScaleType, ScaleVnfRequest, TerminateVnfRequest, VnfInstance, VnfLcmOpOcc,
};
use crate::package::VnfPackage;

pub use super::failure::FailureKind;
pub use super::plan::STACK_ID_KEY;
pub use super::types::{
    Drivers, GrantOnly, LcmConfig, LcmError, NfvoGrants, OperationOptions, OperationReport,
};

/// What [`Lifecycle::grant_only`] answers: the grant, or the request with why it failed.
pub type GrantOnlyResult = Result<(PlannedGrant, Grant), (GrantRequest, FailureKind, String)>;

/// Runs LCM operations. Cheap to share behind an `Arc`; operations on different instances may
/// run concurrently.
#[derive(Debug)]
pub struct Lifecycle {
    pub(super) drivers: Drivers,
    pub(super) config: LcmConfig,
    pub(super) ids: Mutex<IdGen>,
    pub(super) hooks: Vec<Arc<dyn OperationHook>>,
    pub(super) owner: String,
    pub(super) grants: Option<Arc<dyn GrantDriver>>,
    pub(super) observers: Vec<Arc<dyn LifecycleObserver>>,
}

impl Lifecycle {
    /// A lifecycle over `drivers` with `config`; ids come from a generator seeded with
    /// `config.seed`.
    pub fn new(drivers: Drivers, config: LcmConfig) -> Self {
        let ids = Mutex::new(IdGen::seeded(config.seed ^ 0x05ee_d1d5));
        let owner = format!("vnfm:{}", std::process::id());
        Self {
            drivers,
            config,
            ids,
            hooks: Vec::new(),
            owner,
            grants: None,
            observers: Vec::new(),
        }
    }

    /// The same lifecycle with ids drawn from a generator also seeded with `salt`: a program
    /// that runs one operation per process (the CLI) passes a fresh salt each time so ids never
    /// repeat, while placement choices still depend on the configured seed only.
    pub fn with_id_salt(self, salt: u64) -> Self {
        let ids = Mutex::new(IdGen::seeded(self.config.seed ^ 0x05ee_d1d5 ^ salt));
        let owner = format!("vnfm:{}:{salt:x}", std::process::id());
        Self { ids, owner, ..self }
    }

    /// The same lifecycle naming its leases `owner` (e.g. `vnfm-serve:host:pid`).
    pub fn with_owner(self, owner: impl Into<String>) -> Self {
        Self {
            owner: owner.into(),
            ..self
        }
    }

    /// The same lifecycle with one more end-of-operation hook (they run in the order added).
    pub fn with_hook(mut self, hook: Arc<dyn OperationHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// The same lifecycle telling `observer` every [`LifecycleEvent`](super::events::LifecycleEvent)
    /// (they are told in the order added).
    pub fn with_observer(mut self, observer: Arc<dyn LifecycleObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// [`Lifecycle::with_observer`] on a lifecycle already built (e.g. a command that shows
    /// progress adds its printer).
    pub fn add_observer(&mut self, observer: Arc<dyn LifecycleObserver>) {
        self.observers.push(observer);
    }

    /// Commits `batch` and tells the observers ([`super::events`]).
    pub(super) async fn commit(&self, batch: StoreBatch) -> Result<(), DriverError> {
        super::events::commit(self.drivers.store.as_ref(), &self.observers, batch).await
    }

    /// The same lifecycle asking `nfvo` for its grants, as `settings` say (see
    /// [`NfvoGrants`]), instead of the local granter.
    pub fn with_grant_driver(mut self, nfvo: Arc<dyn GrantDriver>, settings: NfvoGrants) -> Self {
        self.grants = Some(nfvo);
        self.config.nfvo_grants = Some(settings);
        self
    }

    /// The drivers.
    pub fn drivers(&self) -> &Drivers {
        &self.drivers
    }

    /// The configuration.
    pub fn config(&self) -> &LcmConfig {
        &self.config
    }

    /// The owner named in the leases of this lifecycle's operations.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub(super) fn next_id(&self) -> String {
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_uuid()
    }

    pub(super) fn with_ids<T>(&self, f: impl FnOnce(&mut IdGen) -> T) -> T {
        let mut g = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut g)
    }

    pub(super) fn grant_options(&self, automatic: bool) -> GrantOptions {
        GrantOptions {
            fallback_best_effort: self.config.fallback_best_effort,
            vim_connection_id: Some(self.config.vim_connection_id.clone()),
            is_automatic_invocation: automatic,
        }
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
        self.commit(StoreBatch::new().with_instance(inst.clone()))
            .await
            .map_err(LcmError::Store)?;
        Ok(inst)
    }

    pub(super) async fn load(
        &self,
        id: &VnfInstanceId,
    ) -> Result<Versioned<VnfInstance>, LcmError> {
        match self.drivers.store.instance_entry(id).await {
            Ok(i) => Ok(i),
            Err(e) if e.is_not_found() => Err(LcmError::NotFound(id.clone())),
            Err(e) => Err(LcmError::Store(e)),
        }
    }

    /// No other operation may be unfinished on the instance.
    pub(super) async fn check_free(&self, inst: &VnfInstance) -> Result<(), LcmError> {
        let ops = self
            .drivers
            .store
            .op_occs(crate::driver::OpOccFilter::instance(inst.id.clone()))
            .await
            .map_err(LcmError::Store)?;
        let now = self.drivers.clock.now();
        let Some(r) = ops.iter().find(|o| !o.is_terminal()) else {
            return Ok(());
        };
        let hint = if r.is_running() && !r.is_alive(now) {
            format!(
                "; its owner is gone (lease expired): `vnfm op retry|rollback|fail {}`",
                r.id
            )
        } else {
            String::new()
        };
        Err(LcmError::Conflict(format!(
            "operation {} ({}) is {} on VNF instance {}; one LCM operation at a time (an \
             operation in FAILED_TEMP must be failed or rolled back first){hint}",
            r.id, r.operation, r.operation_state, inst.id
        )))
    }

    /// A new occurrence (not stored) of `operation` on `inst`.
    pub(super) fn new_op(
        &self,
        inst: &VnfInstance,
        operation: LcmOperationType,
        params: Value,
        automatic: bool,
    ) -> VnfLcmOpOcc {
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
        op
    }

    pub(super) fn hook_specs(&self) -> Vec<HookSpec> {
        self.hooks
            .iter()
            .map(|h| HookSpec {
                name: h.name().to_owned(),
                points: h.points().to_vec(),
            })
            .collect()
    }

    /// Starts a new occurrence of `progress` and runs it.
    pub(super) async fn run_new(
        &self,
        inst: Versioned<VnfInstance>,
        op: VnfLcmOpOcc,
        progress: Progress,
        pkg: Option<&VnfPackage>,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        self.run_new_listed(inst, op, progress, pkg, opts, None)
            .await
    }

    /// [`Self::run_new`] with the zone catalogue as listed a moment before the operation (for
    /// a check of the request), which the operation uses instead of listing it again.
    pub(super) async fn run_new_listed(
        &self,
        inst: Versioned<VnfInstance>,
        op: VnfLcmOpOcc,
        progress: Progress,
        pkg: Option<&VnfPackage>,
        opts: &OperationOptions,
        zones: Option<Vec<crate::zone::ComputeZone>>,
    ) -> Result<OperationReport, LcmError> {
        let start = OperationStart {
            op: Versioned {
                value: op,
                version: Version(0),
            },
            resume: false,
            instance: inst,
            progress,
            package: pkg.map(|p| Arc::new(p.clone())),
            owner: self.owner.clone(),
            hooks: self.hook_specs(),
        };
        let m = Operation::new(self.config.clone(), start, self.drivers.clock.now());
        super::run::drive(
            &self.drivers,
            &self.hooks,
            self.grants.as_ref(),
            &self.observers,
            m,
            opts.interrupt.as_ref(),
            zones,
        )
        .await
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
    ) -> Result<GrantOnlyResult, LcmError> {
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
        let layouts = match stack::layouts(pkg, flavour) {
            Ok(l) => l,
            Err(f) => return Ok(Err((planned.request, f.kind, f.detail))),
        };
        let groups = stack::group_resources(&layouts);
        let existing = inst
            .instantiated_vnf_info
            .as_ref()
            .map(grant_request::slots_of)
            .unwrap_or_default();
        let group_zone = stack::group_zones(&groups, &existing);
        let (granted, answer) = stack::LocalGrant {
            planned: &planned,
            instance: inst,
            flavour,
            groups: &groups,
            group_zone: &group_zone,
            pinned: &BTreeMap::new(),
            zones: &zones,
            grant_id: self.next_id().into(),
            selection: self.config.grant_selection,
            seed: self.config.seed,
        }
        .grant();
        Ok(match answer {
            Ok(g) => Ok((granted, g)),
            Err(f) => Err((granted.request, f.kind, f.detail)),
        })
    }

    /// Instantiates `id` with `req.flavourId` of `pkg`.
    ///
    /// # Errors
    /// [`LcmError`] when the operation cannot start (unknown or instantiated instance, another
    /// operation running, unknown flavour or level, server groups of the VNFD's `nfvi_node`
    /// rules that the BaseHOT contradicts, store failure). Failures after the start are
    /// reported in the returned occurrence.
    pub async fn instantiate(
        &self,
        id: &VnfInstanceId,
        pkg: &VnfPackage,
        req: &InstantiateVnfRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let inst = self.load(id).await?;
        if inst.value.is_instantiated() {
            return Err(LcmError::Conflict(format!(
                "VNF instance {id} is already INSTANTIATED"
            )));
        }
        let flavour = flavour_of(pkg, &req.flavour_id)?;
        plan::check_pinned(flavour, &opts.pinned)?;
        let level = req.instantiation_level_id.as_deref();
        grant_request::check_level(flavour, level)?;
        if pkg.is_cnf(&req.flavour_id) {
            return self.instantiate_cnf(inst, pkg, req, opts).await;
        }
        let policies = groups::policies(flavour, self.config.fallback_best_effort);
        groups::check_package(pkg, flavour, &policies)?;
        self.check_free(&inst.value).await?;
        let op = self.new_op(
            &inst.value,
            LcmOperationType::Instantiate,
            json!(req),
            opts.automatic,
        );
        let mut progress = Progress::new(Plan::Instantiate {
            flavour_id: req.flavour_id.clone(),
            stack_name: format!("vnf-{}", inst.value.id),
            configurable: req.vnf_configurable_properties.clone(),
            level: req.instantiation_level_id.clone(),
        });
        let gopts = self.grant_options(opts.automatic);
        self.plan_grant(&mut progress, opts, |ids| {
            grant_request::instantiate_at_level(
                pkg,
                &req.flavour_id,
                level,
                &inst.value,
                &op.id,
                &gopts,
                ids,
            )
        });
        if !opts.pinned.is_empty() {
            // A pin that matches no new VNFC, or names a zone the catalogue does not know,
            // starts nothing (it would be ignored, or fail the stack as a full zone would).
            if let Some(planned) = &progress.planned {
                plan::check_pinned_vnfcs(flavour, planned, &opts.pinned)?;
            }
            // A catalogue that does not answer now leaves the check to the operation; one that
            // does is the operation's listing too (one listing per operation).
            if let Ok(zones) = self.drivers.zones.list_zones(ListZones::default()).await {
                plan::check_pinned_zones(&zones, &opts.pinned)?;
                return self
                    .run_new_listed(inst, op, progress, Some(pkg), opts, Some(zones))
                    .await;
            }
        }
        self.run_new(inst, op, progress, Some(pkg), opts).await
    }

    /// Builds the grant request of a placed plan into `progress` (its error fails the
    /// operation after it started, as `INVALID`), and draws the grant's id.
    pub(super) fn plan_grant(
        &self,
        progress: &mut Progress,
        opts: &OperationOptions,
        build: impl FnOnce(&mut IdGen) -> Result<PlannedGrant, Error>,
    ) {
        match self.with_ids(build) {
            Ok(p) => progress.planned = Some(p),
            Err(e) => progress.planned_error = Some(super::failure::chain(&e)),
        }
        progress.pinned = opts.pinned.clone();
        if progress.planned.is_some() && !matches!(progress.plan, Plan::Heal { .. }) {
            progress.grant_id = Some(self.next_id().into());
        }
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
        let recorded = (LcmOperationType::Scale, json!(req));
        self.scale_as(id, pkg, req, opts, recorded).await
    }

    /// SOL003 "scale to level": the core decides from the request and the instance what
    /// changes ([`super::to_level::decide`]). One aspect: its scale steps, run as
    /// [`Lifecycle::scale`] does. Several: one operation ([`Plan::ScaleToLevel`]) that takes
    /// every VDU to its VNFC count at the new levels with one grant and one stack update, and
    /// records the level of each aspect; a rollback restores the VNFCs (and levels) before.
    /// The occurrence is a `SCALE_TO_LEVEL` with the request as its `operationParams`.
    ///
    /// # Errors
    /// As [`Lifecycle::scale`]; [`LcmError::Invalid`] for a request that names an unknown
    /// level or aspect, a level out of range, levels that take a VDU beyond its
    /// `max_number_of_instances`, or changes no aspect; several aspects of a CNF.
    pub async fn scale_to_level(
        &self,
        id: &VnfInstanceId,
        pkg: &VnfPackage,
        req: &super::to_level::ScaleVnfToLevelRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let inst = self.load(id).await?;
        let info = plan::instantiated(&inst.value, None)?;
        let flavour = flavour_of(pkg, &info.flavour_id)?;
        let recorded = (LcmOperationType::ScaleToLevel, json!(req));
        match super::to_level::decide(flavour, info, req).map_err(LcmError::Invalid)? {
            super::to_level::ToLevel::One(step) => {
                self.scale_as(id, pkg, &step, opts, recorded).await
            }
            super::to_level::ToLevel::Many(levels) => {
                self.scale_to_levels(inst, pkg, req, levels, opts).await
            }
        }
    }

    /// A scale to level that changes several aspects: see [`Lifecycle::scale_to_level`].
    pub(super) async fn scale_to_levels(
        &self,
        inst: Versioned<VnfInstance>,
        pkg: &VnfPackage,
        req: &super::to_level::ScaleVnfToLevelRequest,
        levels: BTreeMap<String, u32>,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        if CnfResources::of(&inst.value).is_some() {
            return Err(LcmError::Invalid(Error::invalid(
                Location::default().with_field("instantiationLevelId"),
                format!(
                    "VNF instance {} is a CNF: vnfm scales one aspect of a CNF per operation \
                     (send one scale_to_level with scaleInfo per aspect)",
                    inst.value.id
                ),
            )));
        }
        let (info, _) = instantiated_with_stack(&inst.value)?;
        let flavour = flavour_of(pkg, &info.flavour_id)?;
        let counts =
            super::to_level::vdu_counts(flavour, info, &levels).map_err(LcmError::Invalid)?;
        self.check_free(&inst.value).await?;
        let op = self.new_op(
            &inst.value,
            LcmOperationType::ScaleToLevel,
            json!(req),
            opts.automatic,
        );
        let level = req.instantiation_level_id.clone();
        let mut progress = Progress::new(Plan::ScaleToLevel {
            levels,
            level: level.clone(),
        });
        let gopts = self.grant_options(opts.automatic);
        self.plan_grant(&mut progress, opts, |ids| {
            grant_request::scale_to_level(
                pkg,
                &inst.value,
                &counts,
                level.as_deref(),
                &op.id,
                &gopts,
                ids,
            )
        });
        self.run_new(inst, op, progress, Some(pkg), opts).await
    }

    /// A scale recorded as `recorded` (the occurrence's operation and parameters).
    pub(super) async fn scale_as(
        &self,
        id: &VnfInstanceId,
        pkg: &VnfPackage,
        req: &ScaleVnfRequest,
        opts: &OperationOptions,
        recorded: (LcmOperationType, Value),
    ) -> Result<OperationReport, LcmError> {
        // An invalid request starts no operation (SOL003: 400/422, no occurrence).
        req.validate().map_err(LcmError::Invalid)?;
        let inst = self.load(id).await?;
        if let Some(res) = CnfResources::of(&inst.value) {
            return self.scale_cnf(inst, res, pkg, req, opts, recorded).await;
        }
        let (info, _) = instantiated_with_stack(&inst.value)?;
        let flavour = flavour_of(pkg, &info.flavour_id)?;
        let steps = req.number_of_steps.unwrap_or(1);
        let new_level = plan::check_scale(flavour, info, req)?;
        self.check_free(&inst.value).await?;
        let op = self.new_op(&inst.value, recorded.0, recorded.1, opts.automatic);
        let aspect_id = req.aspect_id.clone();
        let mut progress = match req.type_ {
            ScaleType::ScaleOut => Progress::new(Plan::ScaleOut {
                aspect_id: aspect_id.clone(),
                new_level,
            }),
            ScaleType::ScaleIn => Progress::new(Plan::ScaleIn {
                aspect_id: aspect_id.clone(),
                steps,
                new_level,
            }),
        };
        let gopts = self.grant_options(opts.automatic);
        if req.type_ == ScaleType::ScaleOut {
            self.plan_grant(&mut progress, opts, |ids| {
                grant_request::scale_out(pkg, &inst.value, &aspect_id, steps, &op.id, &gopts, ids)
            });
        } else if self.config.nfvo_grants.is_some() {
            progress.removal = Some(self.with_ids(|ids| {
                grant_request::scale_in(pkg, &inst.value, &aspect_id, steps, &op.id, &gopts, ids)
            })?);
        }
        self.run_new(inst, op, progress, Some(pkg), opts).await
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
        if let Some(res) = CnfResources::of(&inst.value) {
            return self.heal_cnf(inst, res, pkg, req, opts).await;
        }
        let (info, _) = instantiated_with_stack(&inst.value)?;
        flavour_of(pkg, &info.flavour_id)?;
        let targets: Vec<String> = if req.vnfc_instance_id.is_empty() {
            info.vnfc_info.iter().map(|v| v.id.clone()).collect()
        } else {
            req.vnfc_instance_id.clone()
        };
        plan::check_heal_targets(info, &req.vnfc_instance_id)?;
        self.check_free(&inst.value).await?;
        let op = self.new_op(
            &inst.value,
            LcmOperationType::Heal,
            json!(req),
            opts.automatic,
        );
        let mut progress = Progress::new(Plan::Heal {
            cause: req.cause.clone(),
        });
        let gopts = self.grant_options(opts.automatic);
        self.plan_grant(&mut progress, opts, |ids| {
            grant_request::heal(pkg, &inst.value, &targets, &op.id, &gopts, ids)
        });
        self.run_new(inst, op, progress, Some(pkg), opts).await
    }

    /// Terminates `id`: runs the `terminate_start` hooks, deletes its stack and returns it to
    /// `NOT_INSTANTIATED`.
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
        let cnf = CnfResources::of(&inst.value);
        if cnf.is_some() {
            plan::instantiated(&inst.value, None)?;
            self.need_cluster(&format!("VNF instance {id}"))?;
        } else {
            instantiated_with_stack(&inst.value)?;
        }
        self.check_free(&inst.value).await?;
        let op = self.new_op(
            &inst.value,
            LcmOperationType::Terminate,
            json!(req),
            opts.automatic,
        );
        let progress = match cnf {
            Some(resources) => {
                let mut p = Progress::new(Plan::CnfTerminate);
                p.cnf = Some(CnfWork::of(resources));
                p
            }
            None => {
                let mut p = Progress::new(Plan::Terminate);
                if self.config.nfvo_grants.is_some() {
                    let gopts = self.grant_options(opts.automatic);
                    p.removal = Some(self.with_ids(|ids| {
                        grant_request::terminate(&inst.value, &op.id, &gopts, ids)
                    })?);
                }
                p
            }
        };
        self.run_new(inst, op, progress, None, opts).await
    }

    // ---- CNFs ---------------------------------------------------------------------------

    /// A CNF operation needs the cluster driver.
    pub(super) fn need_cluster(&self, what: &str) -> Result<(), LcmError> {
        if self.drivers.cluster.is_some() {
            return Ok(());
        }
        Err(LcmError::Invalid(Error::invalid(
            Location::default().with_field("vimConnectionInfo"),
            format!(
                "{what} is a CNF (its VDUs are Kubernetes objects of the package) and vnfm has \
                 no Kubernetes cluster: give one (a kubeconfig in [cluster] of vnfm.toml, or a \
                 simulated cloud file with a cluster section)"
            ),
        )))
    }

    /// Instantiates a CNF: see [`super::cnf`].
    pub(super) async fn instantiate_cnf(
        &self,
        inst: Versioned<VnfInstance>,
        pkg: &VnfPackage,
        req: &InstantiateVnfRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        self.need_cluster(&format!(
            "flavour {} of package {}",
            req.flavour_id, pkg.source
        ))?;
        if !opts.pinned.is_empty() {
            return Err(LcmError::Invalid(Error::invalid(
                Location::default().with_field("zone"),
                "zones (--zone) do not apply to a CNF: its pods go where the cluster's \
                 scheduler puts them",
            )));
        }
        let flavour = flavour_of(pkg, &req.flavour_id)?;
        let work = cnf::plan_instantiate(pkg, flavour, req, &self.config.cnf_namespace)?;
        self.check_free(&inst.value).await?;
        let op = self.new_op(
            &inst.value,
            LcmOperationType::Instantiate,
            json!(req),
            opts.automatic,
        );
        let mut progress = Progress::new(Plan::CnfInstantiate {
            flavour_id: req.flavour_id.clone(),
            configurable: req.vnf_configurable_properties.clone(),
            level: req.instantiation_level_id.clone(),
        });
        progress.cnf = Some(work);
        self.run_new(inst, op, progress, Some(pkg), opts).await
    }

    /// Scales a CNF: its workloads get the replicas of the new level.
    pub(super) async fn scale_cnf(
        &self,
        inst: Versioned<VnfInstance>,
        res: CnfResources,
        pkg: &VnfPackage,
        req: &ScaleVnfRequest,
        opts: &OperationOptions,
        recorded: (LcmOperationType, Value),
    ) -> Result<OperationReport, LcmError> {
        let info = plan::instantiated(&inst.value, None)?;
        self.need_cluster(&format!("VNF instance {}", inst.value.id))?;
        let flavour = flavour_of(pkg, &info.flavour_id)?;
        let new_level = plan::check_scale(flavour, info, req)?;
        let steps = req.number_of_steps.unwrap_or(1);
        let out = req.type_ == ScaleType::ScaleOut;
        let resources = cnf::scaled(flavour, &res, &req.aspect_id, steps, out);
        self.check_free(&inst.value).await?;
        let op = self.new_op(&inst.value, recorded.0, recorded.1, opts.automatic);
        let mut progress = Progress::new(Plan::CnfScale {
            aspect_id: req.aspect_id.clone(),
            new_level,
        });
        progress.cnf = Some(CnfWork::of(resources));
        self.run_new(inst, op, progress, Some(pkg), opts).await
    }

    /// Heals a CNF's VNFCs: their pods are deleted and their controllers' new ones awaited.
    pub(super) async fn heal_cnf(
        &self,
        inst: Versioned<VnfInstance>,
        res: CnfResources,
        pkg: &VnfPackage,
        req: &HealVnfRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let info = plan::instantiated(&inst.value, None)?;
        self.need_cluster(&format!("VNF instance {}", inst.value.id))?;
        flavour_of(pkg, &info.flavour_id)?;
        plan::check_heal_targets(info, &req.vnfc_instance_id)?;
        let targets: Vec<String> = if req.vnfc_instance_id.is_empty() {
            info.vnfc_info.iter().map(|v| v.id.clone()).collect()
        } else {
            req.vnfc_instance_id.clone()
        };
        self.check_free(&inst.value).await?;
        let op = self.new_op(
            &inst.value,
            LcmOperationType::Heal,
            json!(req),
            opts.automatic,
        );
        let mut progress = Progress::new(Plan::CnfHeal {
            cause: req.cause.clone(),
        });
        let mut work = CnfWork::of(res);
        work.heal_pods = targets;
        progress.cnf = Some(work);
        self.run_new(inst, op, progress, Some(pkg), opts).await
    }

    /// `MODIFY_INFO` of `id` with `patch` (a `VnfInfoModificationRequest`, see
    /// [`super::modify`]): a plan of the same machine as the other operations, so it takes the
    /// instance the same way (one operation at a time, conditional commits) and its occurrence
    /// (`changedInfo`: the members the request changed) goes `STARTING`, `PROCESSING`,
    /// `COMPLETED`.
    ///
    /// # Errors
    /// [`LcmError::Invalid`] for a request [`super::modify::check`] refuses (nothing starts);
    /// as [`Lifecycle::instantiate`] otherwise.
    pub async fn modify_info(
        &self,
        id: &VnfInstanceId,
        patch: &crate::grant::KeyValuePairs,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        super::modify::check(patch).map_err(|e| {
            LcmError::Invalid(Error::invalid(
                Location::default().with_field("VnfInfoModificationRequest"),
                e.to_string(),
            ))
        })?;
        let inst = self.load(id).await?;
        self.check_free(&inst.value).await?;
        let params = Value::Object(patch.clone());
        let op = self.new_op(
            &inst.value,
            LcmOperationType::ModifyInfo,
            params,
            opts.automatic,
        );
        let progress = Progress::new(Plan::ModifyInfo {
            patch: patch.clone(),
        });
        self.run_new(inst, op, progress, None, opts).await
    }

    /// SOL003 "operate": starts or stops every server of `id` through the VIM
    /// ([`crate::driver::ComputeInventory::start_server`] / `stop_server`), those not in the
    /// wanted state yet, and waits until each is `ACTIVE` / `SHUTOFF` (polling as for a
    /// stack, within the stack timeout); `vnfState` and every `vnfcState` then say it. A plan
    /// of the operation machine ([`Plan::Operate`]), so it takes the instance, can be
    /// cancelled, retried and failed like any operation.
    ///
    /// # Errors
    /// What [`super::operate::plan`] refuses; as [`Lifecycle::instantiate`] otherwise.
    pub async fn operate(
        &self,
        id: &VnfInstanceId,
        req: &super::operate::OperateVnfRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let inst = self.load(id).await?;
        let (on, servers) = super::operate::plan(&inst.value, req)?;
        self.check_free(&inst.value).await?;
        let op = self.new_op(
            &inst.value,
            LcmOperationType::Operate,
            json!(req),
            opts.automatic,
        );
        let progress = Progress::new(Plan::Operate { on, servers });
        self.run_new(inst, op, progress, None, opts).await
    }

    /// SOL003 "change flavour" of `id` to `req.newFlavourId` of `pkg` (see
    /// [`super::change_flavour`]): the VNFCs the new flavour wants at the level are granted
    /// (`CHANGE_FLAVOUR`: what it adds, what goes) and the instance's stack is updated with the
    /// new flavour's template and parameters; Heat keeps what does not change. A placed plan of
    /// the operation machine ([`Plan::ChangeFlavour`]): retried, rolled back (the stack updated
    /// back to the old flavour), failed and cancelled as the others are. The occurrence is a
    /// `CHANGE_FLAVOUR` with the request as its `operationParams`.
    ///
    /// # Errors
    /// What [`super::change_flavour::check`] refuses; server groups of the new flavour's
    /// `nfvi_node` rules that its BaseHOT contradicts; as [`Lifecycle::instantiate`] otherwise.
    pub async fn change_flavour(
        &self,
        id: &VnfInstanceId,
        pkg: &VnfPackage,
        req: &super::change_flavour::ChangeVnfFlavourRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let inst = self.load(id).await?;
        super::change_flavour::check(pkg, &inst.value, req)?;
        instantiated_with_stack(&inst.value)?;
        let flavour = flavour_of(pkg, &req.new_flavour_id)?;
        plan::check_pinned(flavour, &opts.pinned)?;
        let policies = groups::policies(flavour, self.config.fallback_best_effort);
        groups::check_package(pkg, flavour, &policies)?;
        self.check_free(&inst.value).await?;
        let op = self.new_op(
            &inst.value,
            LcmOperationType::ChangeFlavour,
            json!(req),
            opts.automatic,
        );
        let level = req.instantiation_level_id.clone();
        let mut progress = Progress::new(Plan::ChangeFlavour {
            flavour_id: req.new_flavour_id.clone(),
            level: level.clone(),
        });
        let gopts = self.grant_options(opts.automatic);
        self.plan_grant(&mut progress, opts, |ids| {
            grant_request::change_flavour(
                pkg,
                &req.new_flavour_id,
                level.as_deref(),
                &inst.value,
                &op.id,
                &gopts,
                ids,
            )
        });
        if let Some(planned) = progress
            .planned
            .as_ref()
            .filter(|_| !opts.pinned.is_empty())
        {
            plan::check_pinned_vnfcs(flavour, planned, &opts.pinned)?;
        }
        self.run_new(inst, op, progress, Some(pkg), opts).await
    }

    /// SOL003 "change external VNF connectivity" of `id` (see [`super::change_ext_conn`]): the
    /// request's links merged into the instance's, granted (`CHANGE_EXT_CONN`, no resource
    /// added or removed), and the instance's stack updated with the same template and VNFCs
    /// and the merged links in `nfv.CP`; Heat re-plugs the ports the BaseHOT builds from them
    /// and keeps the servers. A plan of the operation machine ([`Plan::ChangeExtConn`]):
    /// retried, rolled back (the stack updated back to the old links), failed and cancelled as
    /// the others are. The occurrence is a `CHANGE_EXT_CONN` with the request as its
    /// `operationParams`.
    ///
    /// # Errors
    /// What [`super::change_ext_conn::check`] refuses; an instance that records no stack; as
    /// [`Lifecycle::instantiate`] otherwise.
    pub async fn change_ext_conn(
        &self,
        id: &VnfInstanceId,
        pkg: &VnfPackage,
        req: &super::change_ext_conn::ChangeExtVnfConnectivityRequest,
        opts: &OperationOptions,
    ) -> Result<OperationReport, LcmError> {
        let inst = self.load(id).await?;
        super::change_ext_conn::check(pkg, &inst.value, req, &self.config.vim_connection_id)?;
        instantiated_with_stack(&inst.value)?;
        self.check_free(&inst.value).await?;
        let op = self.new_op(
            &inst.value,
            LcmOperationType::ChangeExtConn,
            json!(req),
            opts.automatic,
        );
        let links = super::change_ext_conn::merge(
            &super::change_ext_conn::links_of(&inst.value),
            &req.ext_virtual_links,
        );
        let mut progress = Progress::new(Plan::ChangeExtConn {
            links,
            vim_connection_info: req.vim_connection_info.clone(),
        });
        let gopts = self.grant_options(opts.automatic);
        self.plan_grant(&mut progress, opts, |_| {
            grant_request::change_ext_conn(pkg, &inst.value, &op.id, &gopts)
        });
        self.run_new(inst, op, progress, Some(pkg), opts).await
    }

    /// Deletes a `NOT_INSTANTIATED` instance and its operation occurrences.
    ///
    /// # Errors
    /// [`LcmError::NotFound`], [`LcmError::Conflict`] when instantiated or an operation is
    /// unfinished, [`LcmError::Store`].
    pub async fn delete(&self, id: &VnfInstanceId) -> Result<(), LcmError> {
        let inst = self.load(id).await?;
        if inst.value.is_instantiated() {
            return Err(LcmError::Conflict(format!(
                "VNF instance {id} is INSTANTIATED; terminate it first"
            )));
        }
        self.check_free(&inst.value).await?;
        self.commit(
            StoreBatch::new()
                .with_deleted_instance(id.clone())
                .with_precondition(Precondition::InstanceAt {
                    id: id.clone(),
                    version: inst.version,
                }),
        )
        .await
        .map_err(LcmError::from_start)
    }

    /// Runs `m` to its end through the drivers (see [`super::run`]).
    pub(super) async fn drive(
        &self,
        m: Operation,
        interrupt: Option<&Interrupt>,
    ) -> Result<OperationReport, LcmError> {
        super::run::drive(
            &self.drivers,
            &self.hooks,
            self.grants.as_ref(),
            &self.observers,
            m,
            interrupt,
            None,
        )
        .await
    }
}
