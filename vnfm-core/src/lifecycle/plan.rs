//! Preparing an operation, as pure functions: the checks a request must pass before an
//! occurrence exists (SOL003: an invalid request starts nothing), and the instance before and
//! after (its VNFC slots and zones, the `instantiatedVnfInfo` an operation leaves).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::grant as grant_request;
use super::types::LcmError;
use super::userdata::{self, VnfcSlot};
use crate::error::{Error, Location};
use crate::grant::ExtVirtualLinkData;
use crate::id::{StackId, VduId, ZoneId};
use crate::lcm::{
    ExtVirtualLinkInfo, InstantiatedVnfInfo, ScaleInfo, ScaleType, ScaleVnfRequest, VnfExtCpInfo,
    VnfInstance, VnfOperationalStateType, VnfcInfo, VnfcResourceInfo,
};
use crate::package::{Flavour, VnfPackage};

/// The instance metadata key of the stack id.
pub const STACK_ID_KEY: &str = "stackId";

pub(crate) fn stack_of(inst: &VnfInstance) -> Option<StackId> {
    inst.metadata
        .as_ref()
        .and_then(|m| m.get(STACK_ID_KEY))
        .and_then(Value::as_str)
        .map(StackId::from)
}

pub(crate) fn set_stack_id(inst: &mut VnfInstance, id: &StackId) {
    inst.metadata
        .get_or_insert_with(Default::default)
        .insert(STACK_ID_KEY.into(), json!(id));
}

pub(crate) fn flavour_of<'a>(pkg: &'a VnfPackage, id: &str) -> Result<&'a Flavour, LcmError> {
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

pub(crate) fn list<'a, I: Iterator<Item = &'a String>>(it: I) -> String {
    let v: Vec<&str> = it.map(String::as_str).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

pub(crate) fn check_pinned(
    flavour: &Flavour,
    pinned: &BTreeMap<String, ZoneId>,
) -> Result<(), LcmError> {
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

/// Every pin that names a VNFC (not a VDU) must name one the operation creates, as spelt
/// there (`VDU1-0`, not `VDU1-00` or `VDU1-99`): a pin that matches nothing would be ignored.
pub(crate) fn check_pinned_vnfcs(
    flavour: &Flavour,
    planned: &grant_request::PlannedGrant,
    pinned: &BTreeMap<String, ZoneId>,
) -> Result<(), LcmError> {
    let new: BTreeSet<String> = planned.new_vnfcs.iter().map(|n| n.slot.name()).collect();
    for (key, zone) in pinned {
        if flavour.vdu(&VduId::from(key.as_str())).is_some() || new.contains(key) {
            continue;
        }
        return Err(LcmError::Invalid(Error::invalid(
            Location::default().with_field("zone"),
            format!(
                "--zone {key}={zone} names VNFC {key}, which this operation does not create; it \
                 creates {} (or pin a VDU, e.g. {}={zone}, for all its new VNFCs)",
                list(new.iter()),
                userdata::rm_idx(key)
            ),
        )));
    }
    Ok(())
}

/// Every pinned zone must be one the zone catalogue lists (available or not): a zone it does
/// not know would fail the stack as if a zone were full.
pub(crate) fn check_pinned_zones(
    zones: &[crate::zone::ComputeZone],
    pinned: &BTreeMap<String, ZoneId>,
) -> Result<(), LcmError> {
    let known: BTreeSet<&ZoneId> = zones.iter().map(|z| &z.name).collect();
    for (key, zone) in pinned {
        if known.contains(zone) {
            continue;
        }
        return Err(LcmError::Invalid(Error::invalid(
            Location::default().with_field("zone"),
            format!(
                "--zone {key}={zone}: zone {zone} is not in the zone catalogue; its zones are {}",
                list(
                    known
                        .iter()
                        .map(|z| z.as_str().to_owned())
                        .collect::<Vec<_>>()
                        .iter()
                )
            ),
        )));
    }
    Ok(())
}

/// The instance's `instantiatedVnfInfo`, or a conflict when it is not instantiated; `why`
/// (e.g. "changes flavour") ends the message: "only an instantiated instance {why}".
pub(crate) fn instantiated<'a>(
    inst: &'a VnfInstance,
    why: Option<&str>,
) -> Result<&'a InstantiatedVnfInfo, LcmError> {
    inst.instantiated_vnf_info
        .as_ref()
        .filter(|_| inst.is_instantiated())
        .ok_or_else(|| {
            let why = why
                .map(|w| format!(": only an instantiated instance {w}"))
                .unwrap_or_default();
            LcmError::Conflict(format!("VNF instance {} is NOT_INSTANTIATED{why}", inst.id))
        })
}

pub(crate) fn instantiated_with_stack(
    inst: &VnfInstance,
) -> Result<(&InstantiatedVnfInfo, StackId), LcmError> {
    let info = instantiated(inst, None)?;
    let stack = stack_of(inst).ok_or_else(|| {
        LcmError::Invalid(Error::invalid(
            Location::default().with_field(format!("metadata.{STACK_ID_KEY}")),
            format!("VNF instance {} records no stack id", inst.id),
        ))
    })?;
    Ok((info, stack))
}

/// A scale-out of `steps` steps of `aspect` must leave every VDU it scales within the VDU's
/// `max_number_of_instances` (the loader accepts levels × deltas beyond it).
pub(crate) fn check_vdu_maximum(
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
pub(crate) fn check_heal_targets(
    info: &InstantiatedVnfInfo,
    named: &[String],
) -> Result<(), LcmError> {
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

/// `extCpInfo` (SOL003 5.5.3.25, 1..N): the external CPs of the flavour (the connection points
/// its `substitution_mappings` map to external virtual links), one per VNFC of the VDU the CP
/// binds to (`{cpd}-{vnfc id}`), or one (`{cpd}`) when the CP binds no VNFC. Without a
/// `cpConfig` of the request to refer to, each CP's `cpConfigId` is its own id; an IP CP
/// (`layer_protocols` ipv4, ipv6 or ethernet) has `cpProtocolInfo` `IP_OVER_ETHERNET`.
pub(crate) fn ext_cp_info(flavour: &Flavour, vnfcs: &[VnfcResourceInfo]) -> Vec<VnfExtCpInfo> {
    let cpds: BTreeSet<&String> = flavour.external_links.values().collect();
    let mut out = Vec::new();
    for cpd in cpds {
        let cp = flavour.connection_points.get(cpd);
        let vdu = cp.and_then(|c| c.vdu.as_ref());
        // SOL003 CpProtocolInfo: an IP CP of the VNFD (layer_protocols ipv4 / ipv6) carries IP
        // over Ethernet.
        let ip = cp.is_some_and(|c| {
            c.layer_protocols
                .iter()
                .any(|l| l == "ipv4" || l == "ipv6" || l == "ethernet")
        });
        let protocols: Vec<serde_json::Value> = if ip {
            vec![json!({"layerProtocol": "IP_OVER_ETHERNET"})]
        } else {
            Vec::new()
        };
        let ids: Vec<String> = match vdu {
            Some(vdu) => vnfcs
                .iter()
                .filter(|v| &v.vdu_id == vdu)
                .map(|v| format!("{cpd}-{}", v.id))
                .collect(),
            None => Vec::new(),
        };
        let ids = if ids.is_empty() {
            vec![cpd.clone()]
        } else {
            ids
        };
        out.extend(ids.into_iter().map(|id| VnfExtCpInfo {
            cpd_id: cpd.clone(),
            cp_config_id: id.clone(),
            id,
            vnfd_id: None,
            cp_protocol_info: protocols.clone(),
            ext_link_port_id: None,
            metadata: None,
            associated_vnfc_cp_id: None,
            associated_vip_cp_id: None,
            associated_vnf_virtual_link_id: None,
        }));
    }
    out
}

pub(crate) fn instantiated_info(
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
    let mut info = InstantiatedVnfInfo {
        flavour_id: flavour_id.to_owned(),
        vnf_state: Some(VnfOperationalStateType::Started),
        scale_status,
        max_scale_levels,
        ext_cp_info: ext_cp_info(flavour, &vnfcs),
        vnfc_resource_info: vnfcs,
        vnfc_info,
        metadata: previous.and_then(|p| p.metadata.clone()),
        ..InstantiatedVnfInfo::default()
    };
    if let Some(p) = previous {
        let links: Vec<ExtVirtualLinkData> = p
            .ext_virtual_link_info
            .iter()
            .map(ExtVirtualLinkInfo::to_data)
            .collect();
        set_links(&mut info, &links);
    }
    info
}

/// Records `links` as the instance's `extVirtualLinkInfo`, and refers each `extCpInfo` of a
/// linked CPD to the `cpConfig` it takes: the n-th CP instance of the CPD (in `extCpInfo`
/// order) takes the n-th `cpConfig` key (in key order); instances beyond keep their own id
/// (see [`super::change_ext_conn`]).
pub(crate) fn set_links(info: &mut InstantiatedVnfInfo, links: &[ExtVirtualLinkData]) {
    info.ext_virtual_link_info = links.iter().map(ExtVirtualLinkInfo::of).collect();
    let mut configs: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for cp in links.iter().flat_map(|l| l.ext_cps.iter()) {
        configs.insert(cp.cpd_id.as_str(), cp.cp_config.keys().collect());
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for cp in &mut info.ext_cp_info {
        let n = seen.entry(cp.cpd_id.clone()).or_default();
        if let Some(key) = configs.get(cp.cpd_id.as_str()).and_then(|k| k.get(*n)) {
            cp.cp_config_id = (*key).clone();
        }
        *n += 1;
    }
}

pub(crate) fn with_vnfcs(
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
pub(crate) fn prior_servers(inst: &VnfInstance) -> BTreeMap<String, VnfcSlot> {
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

/// The scale level `req` leads to: the aspect must exist, the level stay within
/// `0..=max_scale_level`, and a scale-out must leave every VDU within its
/// `max_number_of_instances`.
pub(crate) fn check_scale(
    flavour: &Flavour,
    info: &InstantiatedVnfInfo,
    req: &ScaleVnfRequest,
) -> Result<u32, LcmError> {
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
        ScaleType::ScaleOut => level
            .checked_add(steps)
            .filter(|l| *l <= aspect.max_scale_level),
        ScaleType::ScaleIn => level.checked_sub(steps),
    }
    .ok_or_else(|| {
        LcmError::Invalid(Error::invalid(
            Location::default().with_field("numberOfSteps"),
            format!(
                "aspect {} is at scale level {level} of 0..={}; {:?} by {steps} step(s) leaves \
                 that range",
                req.aspect_id, aspect.max_scale_level, req.type_
            ),
        ))
    })?;
    if req.type_ == ScaleType::ScaleOut {
        check_vdu_maximum(flavour, info, &req.aspect_id, steps)?;
    }
    Ok(new_level)
}

/// The scale level of every aspect at instantiation `level` (`None`: the flavour's default
/// level), from the level's `scale_info`; aspects it does not name stay at 0.
pub(crate) fn set_level(info: &mut InstantiatedVnfInfo, flavour: &Flavour, level: Option<&str>) {
    let Some(levels) = flavour.instantiation_levels.as_ref() else {
        return;
    };
    let Some(at) = level
        .or(levels.default_level.as_deref())
        .and_then(|l| levels.levels.get(l))
    else {
        return;
    };
    for s in &mut info.scale_status {
        if let Some(l) = at.scale_info.get(&s.aspect_id) {
            s.scale_level = *l;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vnfc(id: &str, vdu: &str) -> VnfcResourceInfo {
        serde_json::from_value(json!({
            "id": id, "vduId": vdu,
            "computeResource": {"resourceId": format!("server-{id}")},
        }))
        .unwrap()
    }

    #[test]
    fn ext_cp_info_has_a_cp_per_vnfc_of_each_external_cpd() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/demo-vnf");
        let pkg = crate::package::fs::load(&root).unwrap();
        let flavour = pkg.flavour("default").unwrap();
        // The demo maps VDU1_CP1 (bound to VDU1) to its external virtual link.
        let vnfcs = [vnfc("a", "VDU1"), vnfc("b", "VDU1"), vnfc("c", "VDU2")];
        let cps = ext_cp_info(flavour, &vnfcs);
        let ids: Vec<(&str, &str)> = cps
            .iter()
            .map(|c| (c.id.as_str(), c.cpd_id.as_str()))
            .collect();
        assert_eq!(
            ids,
            [("VDU1_CP1-a", "VDU1_CP1"), ("VDU1_CP1-b", "VDU1_CP1")]
        );
        assert_eq!(
            cps[0].cp_protocol_info,
            [json!({"layerProtocol": "IP_OVER_ETHERNET"})]
        );
        // Without VNFCs of the VDU yet: the CP itself.
        let cps = ext_cp_info(flavour, &[]);
        assert_eq!(cps.len(), 1);
        assert_eq!(cps[0].id, "VDU1_CP1");
        let info = instantiated_info(flavour, "default", vnfcs.to_vec(), None);
        info.validate().unwrap();
    }
}
