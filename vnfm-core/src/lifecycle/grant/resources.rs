//! What every grant request is built from: the flavour and the instantiated info read, the
//! base request, new and existing VNFCs and their slots, the placement constraints.

use crate::error::{Error, Location};
use crate::grant::{
    AffinityOrAntiAffinity, ConstraintResourceRef, ConstraintScope, GrantRequest,
    GrantedLcmOperationType, PlacementConstraint, ResourceDefinition, ResourceHandle, ResourceType,
};
use crate::id::{IdGen, OpOccId, ZoneId};
use crate::lcm::{InstantiatedVnfInfo, VnfInstance, VnfcResourceInfo};
use crate::lifecycle::userdata::{rm_idx, VnfcSlot};
use crate::package::{list_or_none, Flavour, RuleKind, RuleScope, VnfPackage};
use crate::Result;

use super::types::*;

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

/// The flavour `id` of `pkg`; `field` names where the id came from.
pub(super) fn flavour<'a>(pkg: &'a VnfPackage, id: &str, field: &str) -> Result<&'a Flavour> {
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
pub(super) fn instantiated(inst: &VnfInstance) -> Result<&InstantiatedVnfInfo> {
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
pub(super) fn base_request(
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
pub(super) fn add_new_vnfc(
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
pub(super) fn existing_vnfcs(info: &InstantiatedVnfInfo) -> Vec<(String, &VnfcResourceInfo)> {
    info.vnfc_resource_info
        .iter()
        .enumerate()
        .map(|(i, v)| (format!("instantiatedVnfInfo.vnfcResourceInfo[{i}]"), v))
        .collect()
}

/// The index of an existing VNFC (see the module docs); `at` is its field path.
pub(super) fn slot_index(vnfc: &VnfcResourceInfo, at: &str) -> Result<Option<u32>> {
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
pub(super) fn existing_handle(
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
pub(super) fn select_healed(info: &InstantiatedVnfInfo, vnfc_ids: &[String]) -> Result<Vec<usize>> {
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
pub(super) fn constraints(
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

pub(super) fn kind(k: RuleKind) -> AffinityOrAntiAffinity {
    match k {
        RuleKind::Affinity => AffinityOrAntiAffinity::Affinity,
        RuleKind::AntiAffinity => AffinityOrAntiAffinity::AntiAffinity,
    }
}

pub(super) fn scope(s: RuleScope) -> ConstraintScope {
    match s {
        RuleScope::Zone => ConstraintScope::Zone,
        RuleScope::ZoneGroup => ConstraintScope::ZoneGroup,
        RuleScope::NfviPop => ConstraintScope::NfviPop,
        RuleScope::NfviNode => ConstraintScope::NfviNode,
        RuleScope::CisNode => ConstraintScope::CisNode,
    }
}

/// Validates the request and wraps it.
pub(super) fn finish(request: GrantRequest, new_vnfcs: Vec<NewVnfc>) -> Result<PlannedGrant> {
    request.validate()?;
    Ok(PlannedGrant { request, new_vnfcs })
}
