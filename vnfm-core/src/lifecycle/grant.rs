//! Building the SOL003 [`GrantRequest`] of an operation from the VNF package and the VNF
//! instance, the way Tacker's v2 VNFM builds it (`vnflcm_driver_v2.py`), as pure functions.
//!
//! [`instantiate`], [`scale_out`] and [`heal`] return a [`PlannedGrant`]: the request, which
//! passes [`GrantRequest::validate`], and the new VNFCs it asks for, each with its
//! [`VnfcSlot`] (`<VDU>-<index>`, the name of its stack resource) and the ids of its resource
//! definitions, so that the caller can find the zone the grant gives each VNFC.
//! Resource definition ids come from the caller's [`IdGen`]: a `COMPUTE` definition has a fresh
//! UUID-shaped id, and the `STORAGE` definitions of the same VNFC are named
//! `<storage id>-<compute id>` (as Tacker names them).
//!
//! # Resources
//! - **Instantiate**: for every VDU of the flavour, `n` VNFCs at indexes `0..n`, where `n` is
//!   [`Flavour::initial_instances`] (the `VduInitialDelta`, else the count at the default
//!   instantiation level), else the VDU's `min_number_of_instances`. Each VNFC is one `COMPUTE`
//!   definition (`resourceTemplateId` and `vduId` the VDU id) followed by one `STORAGE`
//!   definition per virtual storage of the VDU (`resourceTemplateId` the storage id, `vduId`
//!   the VDU id), all in `addResources`.
//! - **Scale out**: `steps × delta` new VNFCs for every VDU the aspect scales
//!   ([`Flavour::aspect_delta`]), built like those of instantiate. Their indexes continue after
//!   the instance's existing VNFCs of the VDU: the first one is the largest existing index plus
//!   one; VNFCs whose index is unknown are counted, so the first new index is never below the
//!   number of existing VNFCs of the VDU.
//! - **Heal**: a healed VNFC is re-created in its slot (same VDU, same index). As SOL003
//!   (clause 9.5.2.2, `removeResources` / `addResources`) and Tacker's heal grant do it, the
//!   existing compute resource is listed in `removeResources` (a `COMPUTE` definition whose
//!   `resource` is the VNFC's `computeResource`) and its re-creation in `addResources` (a
//!   `COMPUTE` definition without `resource`). Storages are kept: a heal grant lists no
//!   `STORAGE` definition and the [`NewVnfc::storages`] of a healed VNFC is empty.
//!
//! Link ports and virtual links are not part of the grants built here.
//!
//! # Existing VNFCs
//! The existing VNFCs are the `instantiatedVnfInfo.vnfcResourceInfo` entries of the instance.
//! The index of one is read from its `metadata`:
//! - [`VDU_IDX_KEY`] (`vdu_idx`): a non-negative integer, or a string of digits, as Tacker's
//!   `StandardUserData` records it; any other value is an error naming the field;
//! - else [`RESOURCE_NAME_KEY`] (`parent_resource_name`): the name of its resource in the top
//!   stack, used when it has the form `<vduId>-<index>`; other names are ignored.
//!
//! A VNFC with neither has no known index: scale-out counts it (see above), and healing it is an
//! error.
//!
//! # Placement constraints
//! One [`PlacementConstraint`] per affinity or anti-affinity rule of the flavour, in document
//! order, with the rule's kind and scope (`zone` → `ZONE`, `zone_group` → `ZONE_GROUP`,
//! `nfvi_pop` → `NFVI_POP`, `nfvi_node` → `NFVI_NODE`, `cis_node` → `CIS_NODE`) and
//! `fallbackBestEffort` from [`GrantOptions::fallback_best_effort`]. Its resources are a `GRANT`
//! reference to every new `COMPUTE` definition of the rule's VDUs (in `addResources` order),
//! then a `RES_MGMT` reference to every existing VNFC of those VDUs (in `vnfcResourceInfo`
//! order; for heal, the VNFCs that are not healed): `resourceId` is its
//! `computeResource.resourceId`, `vimConnectionId` its `computeResource.vimConnectionId`, else
//! [`GrantOptions::vim_connection_id`]. As in Tacker, a rule is skipped when it references no
//! new resource (a constraint among existing resources only has nothing to place) or fewer than
//! two resources in all; skipping one rule never drops the others (Tacker's loop stops at the
//! first skipped rule; this one does not).

use crate::error::{Error, Location};
use crate::grant::{
    AffinityOrAntiAffinity, ConstraintResourceRef, ConstraintScope, GrantRequest,
    GrantedLcmOperationType, PlacementConstraint, ResourceDefinition, ResourceHandle, ResourceType,
};
use crate::id::{IdGen, OpOccId, VnfInstanceId, ZoneId};
use crate::lcm::{InstantiatedVnfInfo, VnfInstance, VnfcResourceInfo};
use crate::lifecycle::userdata::{rm_idx, VnfcSlot};
use crate::package::{list_or_none, Flavour, RuleKind, RuleScope, VnfPackage};
use crate::Result;

/// The `vnfcResourceInfo[].metadata` key holding the VNFC's index (Tacker's `vdu_idx`).
pub const VDU_IDX_KEY: &str = "vdu_idx";

/// The `vnfcResourceInfo[].metadata` key holding the name of the VNFC's resource in the top
/// stack (`VDU1-0`), read when [`VDU_IDX_KEY`] is absent.
pub const RESOURCE_NAME_KEY: &str = "parent_resource_name";

/// Options of the grant requests built here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GrantOptions {
    /// `fallbackBestEffort` of every placement constraint.
    pub fallback_best_effort: bool,
    /// The VIM connection of existing resources whose `computeResource` has no
    /// `vimConnectionId`: used in `RES_MGMT` references and in the `resource` of removed
    /// resources.
    pub vim_connection_id: Option<String>,
    /// `isAutomaticInvocation`: whether the operation was triggered automatically (auto-heal,
    /// auto-scale).
    pub is_automatic_invocation: bool,
}

/// One VNFC the grant request asks to create.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewVnfc {
    /// Its slot: VDU and index.
    pub slot: VnfcSlot,
    /// The id of its `COMPUTE` resource definition in `addResources`.
    pub resource_id: String,
    /// The ids of its `STORAGE` resource definitions in `addResources`, in the VDU's order.
    pub storages: Vec<String>,
}

/// A grant request and the new VNFCs it asks for.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedGrant {
    /// The request; it passes [`GrantRequest::validate`].
    pub request: GrantRequest,
    /// The VNFCs to create, in `addResources` order.
    pub new_vnfcs: Vec<NewVnfc>,
}

/// The `href` of the operation occurrence `id`: `/vnflcm/v2/vnf_lcm_op_occs/{id}`.
pub fn lcm_op_occ_href(id: &OpOccId) -> String {
    format!("/vnflcm/v2/vnf_lcm_op_occs/{id}")
}

/// The `href` of the VNF instance `id`: `/vnflcm/v2/vnf_instances/{id}`.
pub fn vnf_instance_href(id: &VnfInstanceId) -> String {
    format!("/vnflcm/v2/vnf_instances/{id}")
}

/// The slot of an existing VNFC, read from its `metadata` (see the module docs); `None` when
/// the metadata gives no index.
///
/// # Errors
/// [`Error::Invalid`] at `metadata.vdu_idx` when that value is not a non-negative integer that
/// fits in 32 bits.
pub fn existing_slot(vnfc: &VnfcResourceInfo) -> Result<Option<VnfcSlot>> {
    Ok(slot_index(vnfc, "")?.map(|i| VnfcSlot::new(vnfc.vdu_id.clone(), i)))
}

/// The slots of the instance's VNFCs with their zones.
pub(crate) fn slots_of(info: &InstantiatedVnfInfo) -> Vec<(VnfcSlot, ZoneId)> {
    info.vnfc_resource_info
        .iter()
        .filter_map(|v| {
            let slot = existing_slot(v).ok().flatten()?;
            Some((slot, v.zone()?))
        })
        .collect()
}

/// The grant request of instantiating `inst` with the flavour `flavour_id` of `pkg` (see the
/// module docs).
///
/// # Errors
/// [`Error::Invalid`] when the package has no flavour `flavour_id`, when the instance is
/// already instantiated, or when its `vnfdId` is not the package's `descriptor_id`.
pub fn instantiate(
    pkg: &VnfPackage,
    flavour_id: &str,
    inst: &VnfInstance,
    op_occ_id: &OpOccId,
    opts: &GrantOptions,
    ids: &mut IdGen,
) -> Result<PlannedGrant> {
    instantiate_at_level(pkg, flavour_id, None, inst, op_occ_id, opts, ids)
}

/// As [`instantiate`], at the instantiation level `level` of the flavour (SOL003
/// `instantiationLevelId`; `None`: the default level): each VDU gets its
/// `VduInstantiationLevels` count at that level, and the request names the level.
///
/// # Errors
/// As [`instantiate`]; also a level the flavour does not define.
pub fn instantiate_at_level(
    pkg: &VnfPackage,
    flavour_id: &str,
    level: Option<&str>,
    inst: &VnfInstance,
    op_occ_id: &OpOccId,
    opts: &GrantOptions,
    ids: &mut IdGen,
) -> Result<PlannedGrant> {
    let flavour = flavour(pkg, flavour_id, "flavourId")?;
    check_level(flavour, level)?;
    if inst.is_instantiated() {
        return Err(Error::invalid(
            Location::default().with_field("instantiationState"),
            format!(
                "VNF instance `{}` is already INSTANTIATED; expected a NOT_INSTANTIATED instance \
                 to instantiate",
                inst.id
            ),
        ));
    }
    let mut request = base_request(
        pkg,
        inst,
        flavour_id,
        op_occ_id,
        GrantedLcmOperationType::Instantiate,
        opts,
    )?;
    request.instantiation_level_id = level.map(str::to_owned);
    let mut new_vnfcs = Vec::new();
    for vdu in flavour.vdus.values() {
        let count = flavour
            .instances_at_level(&vdu.id, level)
            .unwrap_or(vdu.min_instances);
        for index in 0..count {
            let slot = VnfcSlot::new(vdu.id.clone(), index);
            new_vnfcs.push(add_new_vnfc(&mut request, slot, &vdu.storages, ids));
        }
    }
    request.placement_constraints = constraints(flavour, &new_vnfcs, &[], opts)?;
    finish(request, new_vnfcs)
}

/// The grant request of changing the flavour of `inst` to `flavour_id` of `pkg` at the level
/// `level` (`None`: the default level), see [`super::change_flavour`]: the VNFCs of the
/// instance the new flavour keeps (lowest index first, up to each VDU's count at the level)
/// stay; `addResources` has the VNFCs still missing (in free indices), `removeResources` the
/// VNFCs of VDUs the new flavour does not have or beyond its count.
///
/// # Errors
/// [`Error::Invalid`] when the instance is not instantiated, the package has no flavour
/// `flavour_id` or it has no level `level`, the instance is not of the package, or an
/// existing VNFC has an invalid index or (when removed or referenced) no
/// `computeResource.resourceId`.
pub fn change_flavour(
    pkg: &VnfPackage,
    flavour_id: &str,
    level: Option<&str>,
    inst: &VnfInstance,
    op_occ_id: &OpOccId,
    opts: &GrantOptions,
    ids: &mut IdGen,
) -> Result<PlannedGrant> {
    let info = instantiated(inst)?;
    let flavour = flavour(pkg, flavour_id, "newFlavourId")?;
    check_level(flavour, level)?;
    let mut request = base_request(
        pkg,
        inst,
        flavour_id,
        op_occ_id,
        GrantedLcmOperationType::ChangeFlavour,
        opts,
    )?;
    request.instantiation_level_id = level.map(str::to_owned);
    resize(request, info, flavour, opts, ids, &|vdu| {
        super::keep::wanted(flavour, vdu, level)
    })
}

/// The grant request of a scale to level that changes several aspects (see
/// [`super::to_level`]): `SCALE_TO_LEVEL` of the instance's flavour; `counts` is the VNFC count
/// of every VDU at the new levels ([`super::to_level::vdu_counts`]). Of each VDU the VNFCs with
/// the lowest indices up to its count stay; `addResources` has the VNFCs still missing (in free
/// indices), `removeResources` those beyond the count (the newest). `level` is the request's
/// `instantiationLevelId`, if it named one.
///
/// # Errors
/// As [`change_flavour`].
pub fn scale_to_level(
    pkg: &VnfPackage,
    inst: &VnfInstance,
    counts: &std::collections::BTreeMap<crate::id::VduId, u32>,
    level: Option<&str>,
    op_occ_id: &OpOccId,
    opts: &GrantOptions,
    ids: &mut IdGen,
) -> Result<PlannedGrant> {
    let info = instantiated(inst)?;
    let flavour = flavour(pkg, &info.flavour_id, "instantiatedVnfInfo.flavourId")?;
    let mut request = base_request(
        pkg,
        inst,
        &flavour.id,
        op_occ_id,
        GrantedLcmOperationType::ScaleToLevel,
        opts,
    )?;
    request.instantiation_level_id = level.map(str::to_owned);
    resize(request, info, flavour, opts, ids, &|vdu| {
        counts.get(vdu).copied().unwrap_or(0)
    })
}

/// `request` with the VNFCs that take every VDU of `flavour` to `count(vdu)` VNFCs: of each
/// VDU, the existing VNFCs with the lowest indices up to the count stay, the others are in
/// `removeResources`, and the missing ones in `addResources` (in free indices).
fn resize(
    mut request: GrantRequest,
    info: &InstantiatedVnfInfo,
    flavour: &Flavour,
    opts: &GrantOptions,
    ids: &mut IdGen,
    count: &dyn Fn(&crate::id::VduId) -> u32,
) -> Result<PlannedGrant> {
    let existing = existing_vnfcs(info);
    let mut slots = Vec::new();
    for (at, vnfc) in &existing {
        if let Some(i) = slot_index(vnfc, at)? {
            slots.push((vnfc.vdu_id.clone(), i));
        }
    }
    let keep = super::keep::keep_map(count, slots);
    let kept_of = |vdu: &crate::id::VduId| keep.get(vdu).cloned().unwrap_or_default();
    let mut kept: Vec<(String, &VnfcResourceInfo)> = Vec::new();
    for (at, vnfc) in &existing {
        let index = slot_index(vnfc, at)?;
        if index.is_some_and(|i| kept_of(&vnfc.vdu_id).contains(&i)) {
            kept.push((at.clone(), *vnfc));
            continue;
        }
        let handle = existing_handle(vnfc, at, opts)?;
        request.remove_resources.push(
            ResourceDefinition::new(ids.next_uuid(), ResourceType::Compute, vnfc.vdu_id.as_str())
                .with_vdu_id(vnfc.vdu_id.clone())
                .with_resource(handle),
        );
    }
    let mut new_vnfcs = Vec::new();
    for vdu in flavour.vdus.values() {
        let count = count(&vdu.id);
        let used = kept_of(&vdu.id);
        let mut index = 0u32;
        let mut have = used.len() as u64;
        while have < u64::from(count) {
            if !used.contains(&index) {
                let slot = VnfcSlot::new(vdu.id.clone(), index);
                new_vnfcs.push(add_new_vnfc(&mut request, slot, &vdu.storages, ids));
                have += 1;
            }
            index = index.saturating_add(1);
        }
    }
    request.placement_constraints = constraints(flavour, &new_vnfcs, &kept, opts)?;
    finish(request, new_vnfcs)
}

/// The grant request of changing the external connectivity of `inst` (see
/// [`super::change_ext_conn`]): `CHANGE_EXT_CONN` of the instance's flavour, adding and
/// removing no resource (the VNFCs stay; their ports are re-plugged by the stack update).
///
/// # Errors
/// [`Error::Invalid`] when the instance is not instantiated, the package has not its flavour,
/// or the instance is not of the package.
pub fn change_ext_conn(
    pkg: &VnfPackage,
    inst: &VnfInstance,
    op_occ_id: &OpOccId,
    opts: &GrantOptions,
) -> Result<PlannedGrant> {
    let info = instantiated(inst)?;
    flavour(pkg, &info.flavour_id, "instantiatedVnfInfo.flavourId")?;
    let request = base_request(
        pkg,
        inst,
        &info.flavour_id,
        op_occ_id,
        GrantedLcmOperationType::ChangeExtConn,
        opts,
    )?;
    finish(request, Vec::new())
}

/// `level` must be one of the flavour's instantiation levels.
pub(crate) fn check_level(flavour: &Flavour, level: Option<&str>) -> Result<()> {
    let Some(level) = level else {
        return Ok(());
    };
    let known = flavour
        .instantiation_levels
        .as_ref()
        .is_some_and(|l| l.levels.contains_key(level));
    if known {
        return Ok(());
    }
    Err(Error::invalid(
        Location::default().with_field("instantiationLevelId"),
        format!(
            "flavour `{}` has no instantiation level `{level}`; expected one of {}",
            flavour.id,
            list_or_none(
                flavour
                    .instantiation_levels
                    .iter()
                    .flat_map(|l| l.levels.keys())
            )
        ),
    ))
}

/// The grant request of scaling `inst` out by `steps` steps of the aspect `aspect_id` (see the
/// module docs).
///
/// # Errors
/// [`Error::Invalid`] when the instance is not instantiated, its flavour is not in the package
/// or its `vnfdId` is not the package's, the aspect is not an aspect of the flavour or scales no
/// VDU, `steps` is 0, the aspect's scale level plus `steps` exceeds its `max_scale_level`, a VDU
/// would exceed its `max_number_of_instances`, or an existing VNFC has an invalid index or (when
/// a constraint references it) no `computeResource.resourceId`.
pub fn scale_out(
    pkg: &VnfPackage,
    inst: &VnfInstance,
    aspect_id: &str,
    steps: u32,
    op_occ_id: &OpOccId,
    opts: &GrantOptions,
    ids: &mut IdGen,
) -> Result<PlannedGrant> {
    let info = instantiated(inst)?;
    let flavour = flavour(pkg, &info.flavour_id, "instantiatedVnfInfo.flavourId")?;
    check_scale_out(flavour, info, aspect_id, steps)?;
    let mut request = base_request(
        pkg,
        inst,
        &flavour.id,
        op_occ_id,
        GrantedLcmOperationType::Scale,
        opts,
    )?;
    let existing = existing_vnfcs(info);
    let mut new_vnfcs = Vec::new();
    for vdu in flavour.vdus.values() {
        let Some(delta) = flavour.aspect_delta(aspect_id, &vdu.id) else {
            continue;
        };
        let added = u64::from(delta) * u64::from(steps);
        for slot in new_slots(vdu, &existing, aspect_id, steps, added)? {
            new_vnfcs.push(add_new_vnfc(&mut request, slot, &vdu.storages, ids));
        }
    }
    if new_vnfcs.is_empty() {
        return Err(Error::invalid(
            Location::default().with_field("aspectId"),
            format!(
                "scaling aspect `{aspect_id}` of flavour `{}` scales no VDU: no \
                 VduScalingAspectDeltas of that aspect targets a VDU; expected at least one",
                flavour.id
            ),
        ));
    }
    request.placement_constraints = constraints(flavour, &new_vnfcs, &existing, opts)?;
    finish(request, new_vnfcs)
}

/// The aspect exists, the steps are at least one and stay within its `max_scale_level`.
fn check_scale_out(
    flavour: &Flavour,
    info: &InstantiatedVnfInfo,
    aspect_id: &str,
    steps: u32,
) -> Result<()> {
    let aspect = flavour.scaling_aspects.get(aspect_id).ok_or_else(|| {
        Error::invalid(
            Location::default().with_field("aspectId"),
            format!(
                "unknown scaling aspect `{aspect_id}` of flavour `{}`; expected one of {}",
                flavour.id,
                list_or_none(flavour.scaling_aspects.keys())
            ),
        )
    })?;
    if steps == 0 {
        return Err(Error::invalid(
            Location::default().with_field("numberOfSteps"),
            "scale out by 0 steps; expected at least 1",
        ));
    }
    let level = info.scale_level(aspect_id).unwrap_or(0);
    let target = u64::from(level) + u64::from(steps);
    if target > u64::from(aspect.max_scale_level) {
        return Err(Error::invalid(
            Location::default().with_field("numberOfSteps"),
            format!(
                "scaling aspect `{aspect_id}` out by {steps} step(s) from scale level {level} \
                 would reach level {target}; expected at most its max_scale_level {}",
                aspect.max_scale_level
            ),
        ));
    }
    Ok(())
}

/// The slots of the `added` new VNFCs of `vdu`: after the highest index in use, within the
/// VDU's `max_number_of_instances`.
fn new_slots(
    vdu: &crate::package::Vdu,
    existing: &[(String, &VnfcResourceInfo)],
    aspect_id: &str,
    steps: u32,
    added: u64,
) -> Result<Vec<VnfcSlot>> {
    let mut out = Vec::new();
    {
        let mut count = 0u64;
        let mut next = 0u64;
        for (at, vnfc) in existing.iter().filter(|(_, v)| v.vdu_id == vdu.id) {
            count += 1;
            if let Some(i) = slot_index(vnfc, at)? {
                next = next.max(u64::from(i) + 1);
            }
        }
        if count + added > u64::from(vdu.max_instances) {
            return Err(Error::invalid(
                Location::default().with_field("numberOfSteps"),
                format!(
                    "scaling aspect `{aspect_id}` out by {steps} step(s) would give VDU {} {} \
                     instance(s) ({count} existing + {added} new); expected at most its \
                     max_number_of_instances {}",
                    vdu.id,
                    count + added,
                    vdu.max_instances
                ),
            ));
        }
        let first = next.max(count);
        for index in first..first + added {
            let index = u32::try_from(index).map_err(|_| {
                Error::invalid(
                    Location::default().with_field("instantiatedVnfInfo.vnfcResourceInfo"),
                    format!(
                        "the next VNFC index of VDU {} would be {index}; expected at most {}",
                        vdu.id,
                        u32::MAX
                    ),
                )
            })?;
            out.push(VnfcSlot::new(vdu.id.clone(), index));
        }
    }
    Ok(out)
}

/// The grant request of healing the VNFCs `vnfc_ids` of `inst` (see the module docs). A VNFC is
/// named by the `id` of its `vnfcResourceInfo` entry or of its `vnfcInfo` entry (resolved
/// through `vnfcResourceInfoId`); an empty `vnfc_ids` heals every VNFC of the instance, as a
/// SOL003 `HealVnfRequest` without `vnfcInstanceId` does.
///
/// # Errors
/// [`Error::Invalid`] when the instance is not instantiated, its flavour is not in the package
/// or its `vnfdId` is not the package's, a VNFC id is unknown (the message lists the known ones)
/// or listed twice, a healed VNFC has no known index or a VDU that is not in the flavour, or an
/// existing VNFC the request references has no `computeResource.resourceId`.
pub fn heal(
    pkg: &VnfPackage,
    inst: &VnfInstance,
    vnfc_ids: &[String],
    op_occ_id: &OpOccId,
    opts: &GrantOptions,
    ids: &mut IdGen,
) -> Result<PlannedGrant> {
    let info = instantiated(inst)?;
    let flavour = flavour(pkg, &info.flavour_id, "instantiatedVnfInfo.flavourId")?;
    let healed = select_healed(info, vnfc_ids)?;
    let mut request = base_request(
        pkg,
        inst,
        &flavour.id,
        op_occ_id,
        GrantedLcmOperationType::Heal,
        opts,
    )?;
    let existing = existing_vnfcs(info);
    let mut new_vnfcs = Vec::new();
    for &pos in &healed {
        let Some((at, vnfc)) = existing.get(pos) else {
            continue;
        };
        if flavour.vdu(&vnfc.vdu_id).is_none() {
            return Err(Error::invalid(
                Location::default().with_field(format!("{at}.vduId")),
                format!(
                    "VNFC `{}` is of VDU `{}` which flavour `{}` does not have; expected one of {}",
                    vnfc.id,
                    vnfc.vdu_id,
                    flavour.id,
                    list_or_none(flavour.vdus.keys().map(|v| &v.0))
                ),
            ));
        }
        let index = slot_index(vnfc, at)?.ok_or_else(|| {
            Error::invalid(
                Location::default().with_field(format!("{at}.metadata")),
                format!(
                    "VNFC `{}` of VDU {} has no index: expected metadata.{VDU_IDX_KEY} or \
                     metadata.{RESOURCE_NAME_KEY} `{}-<index>` to re-create it in its slot",
                    vnfc.id, vnfc.vdu_id, vnfc.vdu_id
                ),
            )
        })?;
        let handle = existing_handle(vnfc, at, opts)?;
        request.remove_resources.push(
            ResourceDefinition::new(ids.next_uuid(), ResourceType::Compute, vnfc.vdu_id.as_str())
                .with_vdu_id(vnfc.vdu_id.clone())
                .with_resource(handle),
        );
        let slot = VnfcSlot::new(vnfc.vdu_id.clone(), index);
        new_vnfcs.push(add_new_vnfc(&mut request, slot, &[], ids));
    }
    let kept: Vec<(String, &VnfcResourceInfo)> = existing
        .into_iter()
        .enumerate()
        .filter(|(pos, _)| !healed.contains(pos))
        .map(|(_, e)| e)
        .collect();
    request.placement_constraints = constraints(flavour, &new_vnfcs, &kept, opts)?;
    finish(request, new_vnfcs)
}

/// The grant request of a scale-in (asked of an NFVO only, [`super::NfvoGrants`]; the local
/// granter has nothing to decide): `removeResources` names the `COMPUTE` resource of every VNFC
/// the scale-in removes, the newest `delta × steps` of each VDU of the aspect (as the operation
/// removes them).
///
/// # Errors
/// As [`heal`]: an instance that is not instantiated, a flavour not in the package, a removed
/// VNFC without `computeResource.resourceId`; or a request that fails
/// [`GrantRequest::validate`].
pub fn scale_in(
    pkg: &VnfPackage,
    inst: &VnfInstance,
    aspect_id: &str,
    steps: u32,
    op_occ_id: &OpOccId,
    opts: &GrantOptions,
    ids: &mut IdGen,
) -> Result<GrantRequest> {
    let info = instantiated(inst)?;
    let flavour = flavour(pkg, &info.flavour_id, "instantiatedVnfInfo.flavourId")?;
    let mut request = base_request(
        pkg,
        inst,
        &flavour.id,
        op_occ_id,
        GrantedLcmOperationType::Scale,
        opts,
    )?;
    let all = slots_of(info);
    let kept: std::collections::BTreeSet<String> =
        super::keep::scale_in_keep(flavour, aspect_id, steps, all.clone())
            .into_iter()
            .map(|(s, _)| s.name())
            .collect();
    let removed: std::collections::BTreeSet<String> = all
        .into_iter()
        .map(|(s, _)| s.name())
        .filter(|n| !kept.contains(n))
        .collect();
    remove_vnfcs(&mut request, info, Some(&removed), opts, ids)?;
    request.validate()?;
    Ok(request)
}

/// The grant request of a terminate (asked of an NFVO only): `removeResources` names the
/// `COMPUTE` resource of every VNFC of the instance. No package is needed.
///
/// # Errors
/// An instance that is not instantiated, a VNFC without `computeResource.resourceId`, or a
/// request that fails [`GrantRequest::validate`].
pub fn terminate(
    inst: &VnfInstance,
    op_occ_id: &OpOccId,
    opts: &GrantOptions,
    ids: &mut IdGen,
) -> Result<GrantRequest> {
    let info = instantiated(inst)?;
    let mut request = GrantRequest::new(
        inst.id.clone(),
        op_occ_id.clone(),
        inst.vnfd_id.clone(),
        GrantedLcmOperationType::Terminate,
    )
    .with_flavour_id(&info.flavour_id)
    .with_link("vnfLcmOpOcc", lcm_op_occ_href(op_occ_id))
    .with_link("vnfInstance", vnf_instance_href(&inst.id));
    request.is_automatic_invocation = opts.is_automatic_invocation;
    remove_vnfcs(&mut request, info, None, opts, ids)?;
    request.validate()?;
    Ok(request)
}

/// Adds a `COMPUTE` definition to `removeResources` for every VNFC of `info` whose slot name
/// `only` holds (every VNFC when `None`), with its resource handle.
fn remove_vnfcs(
    request: &mut GrantRequest,
    info: &InstantiatedVnfInfo,
    only: Option<&std::collections::BTreeSet<String>>,
    opts: &GrantOptions,
    ids: &mut IdGen,
) -> Result<()> {
    for (at, vnfc) in existing_vnfcs(info) {
        if let Some(only) = only {
            let name = slot_index(vnfc, &at)?.map(|i| VnfcSlot::new(vnfc.vdu_id.clone(), i).name());
            if !name.is_some_and(|n| only.contains(&n)) {
                continue;
            }
        }
        let handle = existing_handle(vnfc, &at, opts)?;
        request.remove_resources.push(
            ResourceDefinition::new(ids.next_uuid(), ResourceType::Compute, vnfc.vdu_id.as_str())
                .with_vdu_id(vnfc.vdu_id.clone())
                .with_resource(handle),
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// helpers

/// The flavour `id` of `pkg`; `field` names where the id came from.
fn flavour<'a>(pkg: &'a VnfPackage, id: &str, field: &str) -> Result<&'a Flavour> {
    pkg.flavour(id).ok_or_else(|| {
        Error::invalid(
            Location::default().with_field(field),
            format!(
                "no deployment flavour `{id}` in package {}; expected one of {}",
                pkg.source,
                list_or_none(pkg.flavours.keys())
            ),
        )
    })
}

/// The `instantiatedVnfInfo` of `inst`, or an error saying it is not instantiated.
fn instantiated(inst: &VnfInstance) -> Result<&InstantiatedVnfInfo> {
    inst.instantiated_vnf_info.as_ref().ok_or_else(|| {
        Error::invalid(
            Location::default().with_field("instantiatedVnfInfo"),
            format!(
                "VNF instance `{}` has no instantiatedVnfInfo; expected an instantiated VNF",
                inst.id
            ),
        )
    })
}

/// The common part of every request: identifiers, operation, flavour and links.
fn base_request(
    pkg: &VnfPackage,
    inst: &VnfInstance,
    flavour_id: &str,
    op_occ_id: &OpOccId,
    operation: GrantedLcmOperationType,
    opts: &GrantOptions,
) -> Result<GrantRequest> {
    let vnfd_id = if inst.vnfd_id.is_empty() {
        pkg.descriptor_id.clone()
    } else if inst.vnfd_id == pkg.descriptor_id {
        inst.vnfd_id.clone()
    } else {
        return Err(Error::invalid(
            Location::default().with_field("vnfdId"),
            format!(
                "VNF instance `{}` is of VNFD `{}` but package {} is VNFD `{}`; expected the \
                 instance's own package",
                inst.id, inst.vnfd_id, pkg.source, pkg.descriptor_id
            ),
        ));
    };
    let mut request = GrantRequest::new(inst.id.clone(), op_occ_id.clone(), vnfd_id, operation)
        .with_flavour_id(flavour_id)
        .with_link("vnfLcmOpOcc", lcm_op_occ_href(op_occ_id))
        .with_link("vnfInstance", vnf_instance_href(&inst.id));
    request.is_automatic_invocation = opts.is_automatic_invocation;
    Ok(request)
}

/// Adds the `COMPUTE` definition of a new VNFC in `slot` and one `STORAGE` definition per
/// storage to `addResources`.
fn add_new_vnfc(
    request: &mut GrantRequest,
    slot: VnfcSlot,
    storages: &[String],
    ids: &mut IdGen,
) -> NewVnfc {
    let resource_id = ids.next_uuid();
    request.add_resources.push(
        ResourceDefinition::new(&resource_id, ResourceType::Compute, slot.vdu.as_str())
            .with_vdu_id(slot.vdu.clone()),
    );
    let mut storage_ids = Vec::with_capacity(storages.len());
    for storage in storages {
        let id = format!("{storage}-{resource_id}");
        request.add_resources.push(
            ResourceDefinition::new(&id, ResourceType::Storage, storage)
                .with_vdu_id(slot.vdu.clone()),
        );
        storage_ids.push(id);
    }
    NewVnfc {
        slot,
        resource_id,
        storages: storage_ids,
    }
}

/// The existing VNFCs with their field paths, in `vnfcResourceInfo` order.
fn existing_vnfcs(info: &InstantiatedVnfInfo) -> Vec<(String, &VnfcResourceInfo)> {
    info.vnfc_resource_info
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("instantiatedVnfInfo.vnfcResourceInfo[{i}]"), v))
        .collect()
}

/// The index of an existing VNFC (see the module docs); `at` is its field path.
fn slot_index(vnfc: &VnfcResourceInfo, at: &str) -> Result<Option<u32>> {
    let Some(meta) = vnfc.metadata.as_ref() else {
        return Ok(None);
    };
    if let Some(value) = meta.get(VDU_IDX_KEY) {
        let index = match value {
            serde_json::Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
            serde_json::Value::String(s)
                if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) =>
            {
                s.parse::<u32>().ok()
            }
            _ => None,
        };
        let field = if at.is_empty() {
            format!("metadata.{VDU_IDX_KEY}")
        } else {
            format!("{at}.metadata.{VDU_IDX_KEY}")
        };
        return index.map(Some).ok_or_else(|| {
            Error::invalid(
                Location::default().with_field(field),
                format!(
                    "VNFC `{}` has the index {value}; expected a non-negative integer of at most \
                     {}",
                    vnfc.id,
                    u32::MAX
                ),
            )
        });
    }
    let name = meta
        .get(RESOURCE_NAME_KEY)
        .and_then(serde_json::Value::as_str);
    Ok(name.and_then(|name| {
        let base = rm_idx(name);
        if base != vnfc.vdu_id.as_str() {
            return None;
        }
        name.strip_prefix(base)?.strip_prefix('-')?.parse().ok()
    }))
}

/// The `computeResource` of an existing VNFC, with the default VIM connection filled in.
fn existing_handle(
    vnfc: &VnfcResourceInfo,
    at: &str,
    opts: &GrantOptions,
) -> Result<ResourceHandle> {
    if vnfc.compute_resource.resource_id.is_empty() {
        return Err(Error::invalid(
            Location::default().with_field(format!("{at}.computeResource.resourceId")),
            format!(
                "existing VNFC `{}` of VDU {} has no computeResource.resourceId; expected the \
                 VIM id of its compute resource",
                vnfc.id, vnfc.vdu_id
            ),
        ));
    }
    let mut handle = vnfc.compute_resource.clone();
    if handle.vim_connection_id.is_none() {
        handle.vim_connection_id = opts.vim_connection_id.clone();
    }
    Ok(handle)
}

/// The positions (in `vnfcResourceInfo`) of the VNFCs to heal, in the order asked.
fn select_healed(info: &InstantiatedVnfInfo, vnfc_ids: &[String]) -> Result<Vec<usize>> {
    let all = &info.vnfc_resource_info;
    if vnfc_ids.is_empty() {
        if all.is_empty() {
            return Err(Error::invalid(
                Location::default().with_field("instantiatedVnfInfo.vnfcResourceInfo"),
                "the VNF instance has no VNFC to heal; expected at least one vnfcResourceInfo",
            ));
        }
        return Ok((0..all.len()).collect());
    }
    let mut out: Vec<usize> = Vec::with_capacity(vnfc_ids.len());
    for (k, id) in vnfc_ids.iter().enumerate() {
        let field = || Location::default().with_field(format!("vnfcInstanceId[{k}]"));
        let pos = match all.iter().position(|v| &v.id == id) {
            Some(pos) => pos,
            None => {
                let Some(info_entry) = info.vnfc_info.iter().find(|c| &c.id == id) else {
                    let mut known: Vec<&String> = all.iter().map(|v| &v.id).collect();
                    for c in &info.vnfc_info {
                        if !known.contains(&&c.id) {
                            known.push(&c.id);
                        }
                    }
                    return Err(Error::invalid(
                        field(),
                        format!(
                            "unknown VNFC `{id}`; expected one of the instance's VNFCs: {}",
                            list_or_none(known)
                        ),
                    ));
                };
                let res_id = info_entry.vnfc_resource_info_id.as_deref().unwrap_or("");
                all.iter().position(|v| v.id == res_id).ok_or_else(|| {
                    Error::invalid(
                        field(),
                        format!(
                            "VNFC `{id}` (vnfcInfo) names vnfcResourceInfo `{res_id}`, which the \
                             instance does not have; expected one of {}",
                            list_or_none(all.iter().map(|v| &v.id))
                        ),
                    )
                })?
            }
        };
        if out.contains(&pos) {
            return Err(Error::invalid(
                field(),
                format!(
                    "VNFC `{id}` is listed twice (as vnfcResourceInfo `{}`); expected each VNFC \
                     once",
                    all.get(pos).map(|v| v.id.as_str()).unwrap_or_default()
                ),
            ));
        }
        out.push(pos);
    }
    Ok(out)
}

/// The placement constraints of the flavour's rules over the new VNFCs and the existing ones
/// (see the module docs).
fn constraints(
    flavour: &Flavour,
    new_vnfcs: &[NewVnfc],
    existing: &[(String, &VnfcResourceInfo)],
    opts: &GrantOptions,
) -> Result<Vec<PlacementConstraint>> {
    let mut out = Vec::new();
    for rule in &flavour.rules {
        let mut refs: Vec<ConstraintResourceRef> = new_vnfcs
            .iter()
            .filter(|n| rule.vdus.contains(&n.slot.vdu))
            .map(|n| ConstraintResourceRef::grant(&n.resource_id))
            .collect();
        if refs.is_empty() {
            continue;
        }
        for (at, vnfc) in existing
            .iter()
            .filter(|(_, v)| rule.vdus.contains(&v.vdu_id))
        {
            let handle = existing_handle(vnfc, at, opts)?;
            let mut r = ConstraintResourceRef::res_mgmt(handle.resource_id);
            r.vim_connection_id = handle.vim_connection_id;
            refs.push(r);
        }
        if refs.len() < 2 {
            continue;
        }
        out.push(
            PlacementConstraint::new(kind(rule.kind), scope(rule.scope), refs)
                .with_fallback_best_effort(opts.fallback_best_effort),
        );
    }
    Ok(out)
}

fn kind(k: RuleKind) -> AffinityOrAntiAffinity {
    match k {
        RuleKind::Affinity => AffinityOrAntiAffinity::Affinity,
        RuleKind::AntiAffinity => AffinityOrAntiAffinity::AntiAffinity,
    }
}

fn scope(s: RuleScope) -> ConstraintScope {
    match s {
        RuleScope::Zone => ConstraintScope::Zone,
        RuleScope::ZoneGroup => ConstraintScope::ZoneGroup,
        RuleScope::NfviPop => ConstraintScope::NfviPop,
        RuleScope::NfviNode => ConstraintScope::NfviNode,
        RuleScope::CisNode => ConstraintScope::CisNode,
    }
}

/// Validates the request and wraps it.
fn finish(request: GrantRequest, new_vnfcs: Vec<NewVnfc>) -> Result<PlannedGrant> {
    request.validate()?;
    Ok(PlannedGrant { request, new_vnfcs })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use serde_json::{json, Value};

    use super::*;
    use crate::vectors::read_vector;

    fn demo() -> VnfPackage {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/demo-vnf");
        crate::package::fs::load(&dir).unwrap()
    }

    fn op() -> OpOccId {
        OpOccId::new("op-1")
    }

    fn links() -> Value {
        json!({
            "vnfLcmOpOcc": {"href": "/vnflcm/v2/vnf_lcm_op_occs/op-1"},
            "vnfInstance": {"href": "/vnflcm/v2/vnf_instances/inst-1"}
        })
    }

    fn compute(id: &str, vdu: &str) -> Value {
        json!({"id": id, "type": "COMPUTE", "vduId": vdu, "resourceTemplateId": vdu})
    }

    fn storage(name: &str, compute_id: &str, vdu: &str) -> Value {
        json!({"id": format!("{name}-{compute_id}"), "type": "STORAGE", "vduId": vdu,
               "resourceTemplateId": name})
    }

    fn grant_ref(id: &str) -> Value {
        json!({"idType": "GRANT", "resourceId": id})
    }

    fn mgmt_ref(id: &str, vim: &str) -> Value {
        json!({"idType": "RES_MGMT", "resourceId": id, "vimConnectionId": vim})
    }

    fn anti(scope: &str, refs: Vec<Value>, fallback: bool) -> Value {
        json!({"affinityOrAntiAffinity": "ANTI_AFFINITY", "scope": scope, "resource": refs,
               "fallbackBestEffort": fallback})
    }

    /// The next `n` ids of a generator seeded like the one handed to the function under test.
    fn uuids(seed: u64, n: usize) -> Vec<String> {
        let mut g = IdGen::seeded(seed);
        (0..n).map(|_| g.next_uuid()).collect()
    }

    fn slots(p: &PlannedGrant) -> Vec<String> {
        p.new_vnfcs.iter().map(|n| n.slot.name()).collect()
    }

    fn opts() -> GrantOptions {
        GrantOptions {
            fallback_best_effort: true,
            vim_connection_id: Some("default-vim".into()),
            is_automatic_invocation: false,
        }
    }

    /// An instantiated demo instance: VDU1-0 (vdu_idx 0, vim1), VDU2-0 (vdu_idx "0", no VIM
    /// connection), VDU1-1 (index from its stack resource name, vim1).
    fn demo_instance(vnfd_id: &str, vdu1_level: u32) -> VnfInstance {
        serde_json::from_value(json!({
            "id": "inst-1",
            "vnfdId": vnfd_id,
            "instantiationState": "INSTANTIATED",
            "instantiatedVnfInfo": {
                "flavourId": "default",
                "vnfState": "STARTED",
                "scaleStatus": [
                    {"aspectId": "VDU1_scale", "scaleLevel": vdu1_level},
                    {"aspectId": "VDU2_scale", "scaleLevel": 0}
                ],
                "vnfcResourceInfo": [
                    {"id": "rsc-vdu1-0", "vduId": "VDU1",
                     "computeResource": {"resourceId": "srv-vdu1-0", "vimConnectionId": "vim1"},
                     "metadata": {"vdu_idx": 0}},
                    {"id": "rsc-vdu2-0", "vduId": "VDU2",
                     "computeResource": {"resourceId": "srv-vdu2-0"},
                     "metadata": {"vdu_idx": "0"}},
                    {"id": "rsc-vdu1-1", "vduId": "VDU1",
                     "computeResource": {"resourceId": "srv-vdu1-1", "vimConnectionId": "vim1"},
                     "metadata": {"parent_resource_name": "VDU1-1"}}
                ],
                "vnfcInfo": [
                    {"id": "vnfc-vdu2-0", "vduId": "VDU2", "vnfcResourceInfoId": "rsc-vdu2-0",
                     "vnfcState": "STARTED"}
                ]
            }
        }))
        .unwrap()
    }

    #[test]
    fn instantiate_demo_package() {
        let pkg = demo();
        let inst = VnfInstance::new("inst-1", pkg.descriptor_id.clone());
        let p = instantiate(
            &pkg,
            "default",
            &inst,
            &op(),
            &opts(),
            &mut IdGen::seeded(1),
        )
        .unwrap();
        let [a, b, c] = <[String; 3]>::try_from(uuids(1, 3)).unwrap();
        let expect = json!({
            "vnfInstanceId": "inst-1",
            "vnfLcmOpOccId": "op-1",
            "vnfdId": pkg.descriptor_id,
            "flavourId": "default",
            "operation": "INSTANTIATE",
            "isAutomaticInvocation": false,
            "addResources": [
                compute(&a, "VDU1"), storage("VDU1-BootVolume", &a, "VDU1"),
                compute(&b, "VDU1"), storage("VDU1-BootVolume", &b, "VDU1"),
                compute(&c, "VDU2")
            ],
            "placementConstraints": [
                anti("ZONE", vec![grant_ref(&a), grant_ref(&b), grant_ref(&c)], true),
                anti("NFVI_NODE", vec![grant_ref(&a), grant_ref(&b)], true)
            ],
            "_links": links()
        });
        assert_eq!(serde_json::to_value(&p.request).unwrap(), expect);
        assert_eq!(slots(&p), ["VDU1-0", "VDU1-1", "VDU2-0"]);
        assert_eq!(p.new_vnfcs[0].resource_id, a);
        assert_eq!(p.new_vnfcs[0].storages, [format!("VDU1-BootVolume-{a}")]);
        assert!(p.new_vnfcs[2].storages.is_empty());
        assert!(p.request.validate().is_ok());
    }

    #[test]
    fn instantiate_at_a_level_takes_its_counts_and_names_it_and_an_unknown_level_is_refused() {
        let pkg = demo();
        let inst = VnfInstance::new("inst-1", pkg.descriptor_id.clone());
        let at = |level| {
            instantiate_at_level(
                &pkg,
                "default",
                level,
                &inst,
                &op(),
                &opts(),
                &mut IdGen::seeded(1),
            )
        };
        let large = at(Some("large")).unwrap();
        assert_eq!(
            slots(&large),
            ["VDU1-0", "VDU1-1", "VDU1-2", "VDU1-3", "VDU2-0", "VDU2-1"]
        );
        assert_eq!(
            large.request.instantiation_level_id.as_deref(),
            Some("large")
        );
        assert_eq!(slots(&at(None).unwrap()), ["VDU1-0", "VDU1-1", "VDU2-0"]);
        let e = at(Some("huge")).unwrap_err().to_string();
        assert!(
            e.contains("instantiationLevelId")
                && e.contains("no instantiation level `huge`")
                && e.contains("large, small"),
            "{e}"
        );
    }

    #[test]
    fn instantiate_options_reach_the_request() {
        let pkg = demo();
        let inst = VnfInstance::new("inst-1", "");
        let o = GrantOptions {
            fallback_best_effort: false,
            vim_connection_id: None,
            is_automatic_invocation: true,
        };
        let p = instantiate(&pkg, "default", &inst, &op(), &o, &mut IdGen::seeded(1)).unwrap();
        // an instance without vnfdId takes the package's
        assert_eq!(p.request.vnfd_id, pkg.descriptor_id);
        assert!(p.request.is_automatic_invocation);
        assert!(p
            .request
            .placement_constraints
            .iter()
            .all(|c| c.fallback_best_effort == Some(false)));
    }

    #[test]
    fn scale_out_demo_package() {
        let pkg = demo();
        let inst = demo_instance(&pkg.descriptor_id, 0);
        let p = scale_out(
            &pkg,
            &inst,
            "VDU1_scale",
            2,
            &op(),
            &opts(),
            &mut IdGen::seeded(2),
        )
        .unwrap();
        let [d, e] = <[String; 2]>::try_from(uuids(2, 2)).unwrap();
        let expect = json!({
            "vnfInstanceId": "inst-1",
            "vnfLcmOpOccId": "op-1",
            "vnfdId": pkg.descriptor_id,
            "flavourId": "default",
            "operation": "SCALE",
            "isAutomaticInvocation": false,
            "addResources": [
                compute(&d, "VDU1"), storage("VDU1-BootVolume", &d, "VDU1"),
                compute(&e, "VDU1"), storage("VDU1-BootVolume", &e, "VDU1")
            ],
            "placementConstraints": [
                anti("ZONE", vec![
                    grant_ref(&d), grant_ref(&e),
                    mgmt_ref("srv-vdu1-0", "vim1"),
                    mgmt_ref("srv-vdu2-0", "default-vim"),
                    mgmt_ref("srv-vdu1-1", "vim1"),
                ], true),
                anti("NFVI_NODE", vec![
                    grant_ref(&d), grant_ref(&e),
                    mgmt_ref("srv-vdu1-0", "vim1"),
                    mgmt_ref("srv-vdu1-1", "vim1"),
                ], true)
            ],
            "_links": links()
        });
        assert_eq!(serde_json::to_value(&p.request).unwrap(), expect);
        // indexes continue after VDU1-0 (vdu_idx) and VDU1-1 (stack resource name)
        assert_eq!(slots(&p), ["VDU1-2", "VDU1-3"]);
    }

    #[test]
    fn scale_out_indexes_follow_the_largest_existing_one() {
        let pkg = demo();
        let mut inst = demo_instance(&pkg.descriptor_id, 0);
        let info = inst.instantiated_vnf_info.as_mut().unwrap();
        // VDU1 at index 0 and 5 (a gap): the next one is 6
        info.vnfc_resource_info[2].metadata = Some(
            json!({"vdu_idx": 5, "parent_resource_name": "VDU1-1"})
                .as_object()
                .unwrap()
                .clone(),
        );
        let p = scale_out(
            &pkg,
            &inst,
            "VDU1_scale",
            1,
            &op(),
            &opts(),
            &mut IdGen::seeded(3),
        )
        .unwrap();
        assert_eq!(slots(&p), ["VDU1-6"]);

        // VNFCs with no index are counted: two unknown VDU1 VNFCs → the next index is 2
        let info = inst.instantiated_vnf_info.as_mut().unwrap();
        for v in &mut info.vnfc_resource_info {
            v.metadata = None;
        }
        let p = scale_out(
            &pkg,
            &inst,
            "VDU1_scale",
            1,
            &op(),
            &opts(),
            &mut IdGen::seeded(3),
        )
        .unwrap();
        assert_eq!(slots(&p), ["VDU1-2"]);

        // a stack resource name of another shape gives no index
        let info = inst.instantiated_vnf_info.as_mut().unwrap();
        info.vnfc_resource_info[0].metadata = Some(
            json!({"parent_resource_name": "abcdef-9"})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(existing_slot(&info.vnfc_resource_info[0]).unwrap(), None);
        assert_eq!(
            existing_slot(
                &demo_instance("", 0)
                    .instantiated_vnf_info
                    .unwrap()
                    .vnfc_resource_info[2]
            )
            .unwrap(),
            Some(VnfcSlot::new("VDU1", 1))
        );
    }

    #[test]
    fn scale_out_errors() {
        let pkg = demo();
        let inst = demo_instance(&pkg.descriptor_id, 0);
        let e = |aspect: &str, steps: u32, inst: &VnfInstance| {
            scale_out(
                &pkg,
                inst,
                aspect,
                steps,
                &op(),
                &opts(),
                &mut IdGen::seeded(1),
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            e("VDU3_scale", 1, &inst),
            "aspectId: unknown scaling aspect `VDU3_scale` of flavour `default`; expected one \
             of VDU1_scale, VDU2_scale"
        );
        assert_eq!(
            e("VDU1_scale", 3, &inst),
            "numberOfSteps: scaling aspect `VDU1_scale` out by 3 step(s) from scale level 0 \
             would reach level 3; expected at most its max_scale_level 2"
        );
        let at_one = demo_instance(&pkg.descriptor_id, 1);
        assert!(e("VDU1_scale", 2, &at_one).contains("from scale level 1 would reach level 3"));
        assert!(e("VDU1_scale", 0, &inst).starts_with("numberOfSteps: scale out by 0 steps"));

        // more VNFCs than max_number_of_instances (4): 3 existing VDU1 + 2
        let mut crowded = demo_instance(&pkg.descriptor_id, 0);
        let info = crowded.instantiated_vnf_info.as_mut().unwrap();
        let mut extra = info.vnfc_resource_info[0].clone();
        extra.id = "rsc-vdu1-2".into();
        extra.metadata = Some(json!({"vdu_idx": 2}).as_object().unwrap().clone());
        info.vnfc_resource_info.push(extra);
        assert_eq!(
            e("VDU1_scale", 2, &crowded),
            "numberOfSteps: scaling aspect `VDU1_scale` out by 2 step(s) would give VDU VDU1 5 \
             instance(s) (3 existing + 2 new); expected at most its max_number_of_instances 4"
        );

        // a bad index is named with its field path
        let mut bad = demo_instance(&pkg.descriptor_id, 0);
        bad.instantiated_vnf_info
            .as_mut()
            .unwrap()
            .vnfc_resource_info[0]
            .metadata = Some(json!({"vdu_idx": -1}).as_object().unwrap().clone());
        assert_eq!(
            e("VDU1_scale", 1, &bad),
            "instantiatedVnfInfo.vnfcResourceInfo[0].metadata.vdu_idx: VNFC `rsc-vdu1-0` has \
             the index -1; expected a non-negative integer of at most 4294967295"
        );

        // not instantiated
        let fresh = VnfInstance::new("inst-1", pkg.descriptor_id.clone());
        assert_eq!(
            e("VDU1_scale", 1, &fresh),
            "instantiatedVnfInfo: VNF instance `inst-1` has no instantiatedVnfInfo; expected an \
             instantiated VNF"
        );

        // an existing VNFC without a VIM resource id cannot be referenced
        let mut anon = demo_instance(&pkg.descriptor_id, 0);
        anon.instantiated_vnf_info
            .as_mut()
            .unwrap()
            .vnfc_resource_info[1]
            .compute_resource
            .resource_id
            .clear();
        assert!(e("VDU1_scale", 1, &anon).starts_with(
            "instantiatedVnfInfo.vnfcResourceInfo[1].computeResource.resourceId: existing VNFC \
             `rsc-vdu2-0` of VDU VDU2 has no computeResource.resourceId"
        ));

        // another package's instance
        let other = demo_instance("other-vnfd", 0);
        assert!(e("VDU1_scale", 1, &other)
            .starts_with("vnfdId: VNF instance `inst-1` is of VNFD `other-vnfd` but package "));
    }

    #[test]
    fn heal_demo_package() {
        let pkg = demo();
        let inst = demo_instance(&pkg.descriptor_id, 0);
        // one by its vnfcResourceInfo id, one by its vnfcInfo id
        let ids = ["rsc-vdu1-1".to_owned(), "vnfc-vdu2-0".to_owned()];
        let mut o = opts();
        o.is_automatic_invocation = true;
        let p = heal(&pkg, &inst, &ids, &op(), &o, &mut IdGen::seeded(4)).unwrap();
        let [r1, n1, r2, n2] = <[String; 4]>::try_from(uuids(4, 4)).unwrap();
        let expect = json!({
            "vnfInstanceId": "inst-1",
            "vnfLcmOpOccId": "op-1",
            "vnfdId": pkg.descriptor_id,
            "flavourId": "default",
            "operation": "HEAL",
            "isAutomaticInvocation": true,
            "addResources": [compute(&n1, "VDU1"), compute(&n2, "VDU2")],
            "removeResources": [
                {"id": r1, "type": "COMPUTE", "vduId": "VDU1", "resourceTemplateId": "VDU1",
                 "resource": {"resourceId": "srv-vdu1-1", "vimConnectionId": "vim1"}},
                {"id": r2, "type": "COMPUTE", "vduId": "VDU2", "resourceTemplateId": "VDU2",
                 "resource": {"resourceId": "srv-vdu2-0", "vimConnectionId": "default-vim"}}
            ],
            "placementConstraints": [
                anti("ZONE", vec![grant_ref(&n1), grant_ref(&n2),
                                  mgmt_ref("srv-vdu1-0", "vim1")], true),
                anti("NFVI_NODE", vec![grant_ref(&n1), mgmt_ref("srv-vdu1-0", "vim1")], true)
            ],
            "_links": links()
        });
        assert_eq!(serde_json::to_value(&p.request).unwrap(), expect);
        assert_eq!(slots(&p), ["VDU1-1", "VDU2-0"]);
        assert!(p.new_vnfcs.iter().all(|n| n.storages.is_empty()));

        // no id: every VNFC, so no existing resource is left to reference
        let p = heal(&pkg, &inst, &[], &op(), &opts(), &mut IdGen::seeded(4)).unwrap();
        assert_eq!(slots(&p), ["VDU1-0", "VDU2-0", "VDU1-1"]);
        assert_eq!(p.request.remove_resources.len(), 3);
        let c = &p.request.placement_constraints;
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].resource.len(), 3);
        assert!(c
            .iter()
            .flat_map(|c| &c.resource)
            .all(|r| r.id_type == crate::grant::ConstraintIdType::Grant));
    }

    #[test]
    fn heal_errors() {
        let pkg = demo();
        let inst = demo_instance(&pkg.descriptor_id, 0);
        let e = |ids: &[&str], inst: &VnfInstance| {
            let ids: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
            heal(&pkg, inst, &ids, &op(), &opts(), &mut IdGen::seeded(1))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e(&["rsc-vdu1-0", "ghost"], &inst),
            "vnfcInstanceId[1]: unknown VNFC `ghost`; expected one of the instance's VNFCs: \
             rsc-vdu1-0, rsc-vdu2-0, rsc-vdu1-1, vnfc-vdu2-0"
        );
        assert_eq!(
            e(&["rsc-vdu2-0", "vnfc-vdu2-0"], &inst),
            "vnfcInstanceId[1]: VNFC `vnfc-vdu2-0` is listed twice (as vnfcResourceInfo \
             `rsc-vdu2-0`); expected each VNFC once"
        );
        let mut no_idx = inst.clone();
        no_idx
            .instantiated_vnf_info
            .as_mut()
            .unwrap()
            .vnfc_resource_info[0]
            .metadata = None;
        assert_eq!(
            e(&["rsc-vdu1-0"], &no_idx),
            "instantiatedVnfInfo.vnfcResourceInfo[0].metadata: VNFC `rsc-vdu1-0` of VDU VDU1 \
             has no index: expected metadata.vdu_idx or metadata.parent_resource_name \
             `VDU1-<index>` to re-create it in its slot"
        );
        let mut stray = inst.clone();
        stray
            .instantiated_vnf_info
            .as_mut()
            .unwrap()
            .vnfc_resource_info[0]
            .vdu_id = "VDU9".into();
        assert_eq!(
            e(&["rsc-vdu1-0"], &stray),
            "instantiatedVnfInfo.vnfcResourceInfo[0].vduId: VNFC `rsc-vdu1-0` is of VDU `VDU9` \
             which flavour `default` does not have; expected one of VDU1, VDU2"
        );
        let mut empty = inst.clone();
        empty
            .instantiated_vnf_info
            .as_mut()
            .unwrap()
            .vnfc_resource_info
            .clear();
        assert!(e(&[], &empty).contains("the VNF instance has no VNFC to heal"));
    }

    /// Change flavour large -> small of `flavours-vnf`: VDU1-0 is kept, VDU1-1 (beyond small's
    /// one VDU1) and VDU2-0 (no VDU2 in small) are removed, nothing is added; small -> large
    /// from VDU1-2 alone adds VDU1-0 (the free index) and VDU2-0.
    #[test]
    fn change_flavour_keeps_removes_and_adds() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/flavours-vnf");
        let pkg = crate::package::fs::load(&dir).unwrap();
        let mut inst = demo_instance(&pkg.descriptor_id, 0);
        inst.instantiated_vnf_info.as_mut().unwrap().flavour_id = "large".into();
        let mut ids = IdGen::seeded(7);
        let p = change_flavour(&pkg, "small", None, &inst, &op(), &opts(), &mut ids).unwrap();
        assert_eq!(p.request.operation, GrantedLcmOperationType::ChangeFlavour);
        assert_eq!(p.request.flavour_id.as_deref(), Some("small"));
        assert!(p.new_vnfcs.is_empty(), "{:?}", p.new_vnfcs);
        let removed: Vec<&str> = p
            .request
            .remove_resources
            .iter()
            .map(|r| r.resource.as_ref().unwrap().resource_id.as_str())
            .collect();
        assert_eq!(removed, ["srv-vdu2-0", "srv-vdu1-1"]);

        let mut one: VnfInstance = demo_instance(&pkg.descriptor_id, 0);
        let info = one.instantiated_vnf_info.as_mut().unwrap();
        info.flavour_id = "small".into();
        info.vnfc_resource_info.retain(|v| v.id == "rsc-vdu1-1");
        info.vnfc_info.clear();
        let p = change_flavour(&pkg, "large", None, &one, &op(), &opts(), &mut ids).unwrap();
        assert_eq!(slots(&p), ["VDU1-0", "VDU2-0"]);
        assert!(p.request.remove_resources.is_empty());
        let p =
            change_flavour(&pkg, "large", Some("peak"), &one, &op(), &opts(), &mut ids).unwrap();
        assert_eq!(slots(&p), ["VDU1-0", "VDU1-2", "VDU2-0"]);
        assert_eq!(p.request.instantiation_level_id.as_deref(), Some("peak"));
        let e = change_flavour(&pkg, "huge", None, &one, &op(), &opts(), &mut ids).unwrap_err();
        assert!(e.to_string().contains("newFlavourId"), "{e}");
    }

    #[test]
    fn unknown_flavour_is_named() {
        let pkg = demo();
        let inst = VnfInstance::new("inst-1", pkg.descriptor_id.clone());
        let e = instantiate(&pkg, "gold", &inst, &op(), &opts(), &mut IdGen::seeded(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("flavourId: no deployment flavour `gold` in package "),
            "{e}"
        );
        assert!(e.ends_with("; expected one of default"), "{e}");

        let mut inst = demo_instance(&pkg.descriptor_id, 0);
        inst.instantiated_vnf_info.as_mut().unwrap().flavour_id = "gold".into();
        let e = heal(&pkg, &inst, &[], &op(), &opts(), &mut IdGen::seeded(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("instantiatedVnfInfo.flavourId: no deployment flavour `gold`"),
            "{e}"
        );

        let done = demo_instance(&pkg.descriptor_id, 0);
        let e = instantiate(
            &pkg,
            "default",
            &done,
            &op(),
            &opts(),
            &mut IdGen::seeded(1),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("instantiationState: VNF instance `inst-1` is already INSTANTIATED"),
            "{e}"
        );
    }

    #[test]
    fn rule_scopes_and_kinds_map_to_sol003() {
        for (s, expect) in [
            ("zone", "ZONE"),
            ("zone_group", "ZONE_GROUP"),
            ("nfvi_pop", "NFVI_POP"),
            ("nfvi_node", "NFVI_NODE"),
            ("cis_node", "CIS_NODE"),
        ] {
            let mapped = scope(RuleScope::parse(s).unwrap());
            assert_eq!(serde_json::to_value(mapped).unwrap(), expect);
        }
        assert_eq!(kind(RuleKind::Affinity), AffinityOrAntiAffinity::Affinity);
        assert_eq!(
            kind(RuleKind::AntiAffinity),
            AffinityOrAntiAffinity::AntiAffinity
        );
    }

    // -----------------------------------------------------------------------------------------
    // a small in-memory package in the shape of Tacker's sample1, with extra rules

    const VNFD: &str = r#"
tosca_definitions_version: tosca_simple_yaml_1_2
imports:
  - etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
node_types:
  sample.VNF:
    derived_from: tosca.nodes.nfv.VNF
topology_template:
  substitution_mappings:
    node_type: sample.VNF
    properties:
      flavour_id: simple
  node_templates:
    VNF:
      type: sample.VNF
      properties:
        descriptor_id: sample-vnfd
    VDU1:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: VDU1
        vdu_profile:
          min_number_of_instances: 1
          max_number_of_instances: 5
    VDU2:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: VDU2
        vdu_profile:
          min_number_of_instances: 1
          max_number_of_instances: 1
    VDU3:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: VDU3
        vdu_profile:
          min_number_of_instances: 0
          max_number_of_instances: 2
  policies:
    - lonely:
        type: tosca.policies.nfv.AffinityRule
        targets: [ VDU3 ]
        properties:
          scope: zone
    - policy_antiaffinity_vdu:
        type: tosca.policies.nfv.AntiAffinityRule
        targets: [ VDU1, VDU2 ]
        properties:
          scope: nfvi_node
    - single:
        type: tosca.policies.nfv.AffinityRule
        targets: [ VDU2 ]
        properties:
          scope: zone_group
    - scaling_aspects:
        type: tosca.policies.nfv.ScalingAspects
        properties:
          aspects:
            VDU1_scale:
              name: VDU1_scale
              max_scale_level: 2
              step_deltas: [ delta_1 ]
            empty_scale:
              name: empty_scale
              max_scale_level: 2
              step_deltas: [ delta_1 ]
    - VDU1_initial_delta:
        type: tosca.policies.nfv.VduInitialDelta
        properties:
          initial_delta:
            number_of_instances: 3
        targets: [ VDU1 ]
    - VDU1_scaling_aspect_deltas:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties:
          aspect: VDU1_scale
          deltas:
            delta_1:
              number_of_instances: 1
        targets: [ VDU1 ]
"#;

    fn sample() -> VnfPackage {
        let files: BTreeMap<String, Vec<u8>> = [(
            "Definitions/sample.yaml".to_owned(),
            VNFD.as_bytes().to_vec(),
        )]
        .into();
        VnfPackage::from_files("sample", files).unwrap()
    }

    fn tacker_case(name: &str) -> Option<Value> {
        let text = read_vector(
            env!("CARGO_MANIFEST_DIR"),
            "tacker/az_reselection/reselection_cases.json",
        )?;
        let doc: Value = serde_json::from_str(&text).unwrap();
        Some(doc["grant_placement_constraints"][name].clone())
    }

    #[test]
    fn tacker_instantiate_placement_constraints() {
        let pkg = sample();
        let inst = VnfInstance::new("inst-1", "sample-vnfd");
        let o = GrantOptions::default();
        let p = instantiate(&pkg, "simple", &inst, &op(), &o, &mut IdGen::seeded(9)).unwrap();
        // VDU1 × 3 (initial delta), VDU2 × 1 (min), VDU3 × 0 (min)
        assert_eq!(slots(&p), ["VDU1-0", "VDU1-1", "VDU1-2", "VDU2-0"]);
        // `lonely` (no VDU3 resource) and `single` (one resource) are skipped; the rule between
        // them is kept
        let got = serde_json::to_value(&p.request.placement_constraints).unwrap();
        let refs: Vec<Value> = p
            .new_vnfcs
            .iter()
            .map(|n| grant_ref(&n.resource_id))
            .collect();
        assert_eq!(got, json!([anti("NFVI_NODE", refs, false)]));

        let Some(case) = tacker_case("instantiate") else {
            return;
        };
        let add = case["add_compute"].as_object().unwrap();
        for (vdu, n) in add {
            let count = p
                .new_vnfcs
                .iter()
                .filter(|v| v.slot.vdu.as_str() == vdu)
                .count();
            assert_eq!(count as u64, n.as_u64().unwrap(), "{vdu}");
        }
        let expect = &case["expect"][0];
        let c = &got[0];
        for k in ["affinityOrAntiAffinity", "scope", "fallbackBestEffort"] {
            assert_eq!(c[k], expect[k], "{k}");
        }
        let total: u64 = add.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(c["resource"].as_array().unwrap().len() as u64, total);
        let compute_ids: Vec<&str> = p
            .request
            .add_resources
            .iter()
            .filter(|r| r.type_ == ResourceType::Compute)
            .map(|r| r.id.as_str())
            .collect();
        for r in c["resource"].as_array().unwrap() {
            assert_eq!(r["idType"], "GRANT");
            assert!(compute_ids.contains(&r["resourceId"].as_str().unwrap()));
        }
    }

    fn tacker_scale_instance() -> VnfInstance {
        let vnfc = |id: &str, vdu: &str, idx: u32| {
            json!({"id": id, "vduId": vdu,
                   "computeResource": {"resourceId": format!("res_id_{id}"),
                                       "vimConnectionId": "vim1"},
                   "metadata": {"vdu_idx": idx}})
        };
        serde_json::from_value(json!({
            "id": "inst-1",
            "vnfdId": "sample-vnfd",
            "instantiationState": "INSTANTIATED",
            "instantiatedVnfInfo": {
                "flavourId": "simple",
                "vnfState": "STARTED",
                "scaleStatus": [{"aspectId": "VDU1_scale", "scaleLevel": 1}],
                "vnfcResourceInfo": [
                    vnfc("VDU2", "VDU2", 0),
                    vnfc("VDU1_1", "VDU1", 0),
                    vnfc("VDU1_2", "VDU1", 1),
                    vnfc("VDU1_3", "VDU1", 2)
                ]
            }
        }))
        .unwrap()
    }

    #[test]
    fn tacker_scale_out_placement_constraints() {
        let pkg = sample();
        let inst = tacker_scale_instance();
        let o = GrantOptions::default();
        let p = scale_out(
            &pkg,
            &inst,
            "VDU1_scale",
            1,
            &op(),
            &o,
            &mut IdGen::seeded(5),
        )
        .unwrap();
        assert_eq!(slots(&p), ["VDU1-3"]);
        let new_id = &p.new_vnfcs[0].resource_id;
        let got = serde_json::to_value(&p.request.placement_constraints).unwrap();
        let mut expect = json!([anti(
            "NFVI_NODE",
            vec![
                grant_ref(new_id),
                mgmt_ref("res_id_VDU2", "vim1"),
                mgmt_ref("res_id_VDU1_1", "vim1"),
                mgmt_ref("res_id_VDU1_2", "vim1"),
                mgmt_ref("res_id_VDU1_3", "vim1"),
            ],
            false
        )]);
        assert_eq!(got, expect);

        let Some(case) = tacker_case("scale_out") else {
            return;
        };
        assert_eq!(case["add_compute"], json!({"VDU1": 1}));
        expect = case["expect"].clone();
        expect[0]["resource"][0]["resourceId"] = json!(new_id);
        assert_eq!(got, expect);
    }

    #[test]
    fn aspect_without_vdus_is_an_error() {
        let pkg = sample();
        let inst = tacker_scale_instance();
        let e = scale_out(
            &pkg,
            &inst,
            "empty_scale",
            1,
            &op(),
            &opts(),
            &mut IdGen::seeded(1),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(
                "aspectId: scaling aspect `empty_scale` of flavour `simple` scales no VDU"
            ),
            "{e}"
        );
    }
}
