//! The grant request of each operation: instantiate (at a level), change flavour, scale to
//! level, change of external connectivity, scale out, heal, scale in, terminate.

use crate::error::{Error, Location};
use crate::grant::{GrantRequest, GrantedLcmOperationType, ResourceDefinition, ResourceType};
use crate::id::{IdGen, OpOccId};
use crate::lcm::{InstantiatedVnfInfo, VnfInstance, VnfcResourceInfo};
use crate::lifecycle::userdata::VnfcSlot;
use crate::package::{list_or_none, Flavour, VnfPackage};
use crate::Result;

use super::resources::*;
use super::types::*;

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
/// `level` (`None`: the default level), see [`crate::lifecycle::change_flavour`]: the VNFCs of the
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
        crate::lifecycle::keep::wanted(flavour, vdu, level)
    })
}

/// The grant request of a scale to level that changes several aspects (see
/// [`crate::lifecycle::to_level`]): `SCALE_TO_LEVEL` of the instance's flavour; `counts` is the VNFC count
/// of every VDU at the new levels ([`crate::lifecycle::to_level::vdu_counts`]). Of each VDU the VNFCs with
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
pub(super) fn resize(
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
    let keep = crate::lifecycle::keep::keep_map(count, slots);
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
/// [`crate::lifecycle::change_ext_conn`]): `CHANGE_EXT_CONN` of the instance's flavour, adding and
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
pub(super) fn check_scale_out(
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
pub(super) fn new_slots(
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

/// The grant request of a scale-in (asked of an NFVO only, [`crate::lifecycle::NfvoGrants`]; the local
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
        crate::lifecycle::keep::scale_in_keep(flavour, aspect_id, steps, all.clone())
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
pub(super) fn remove_vnfcs(
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
