//! The Heat side of an operation, as pure functions: the template and `nfv` parameter of a
//! stack apply, the layout of each VDU, the zone rules of VDUs under an AutoScalingGroup, the
//! reselection units and constraints, and reading the servers of a stack back into
//! `vnfcResourceInfo` (see the module docs of [`super::engine`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::failure::{chain, Failed, FailureKind};
use super::grant::{self as grant_request, PlannedGrant};
use super::granter;
use super::groups;
use super::userdata::{self, template_source, Layout, NfvValues, VnfcSlot};
use crate::constraint::Constraint;
use crate::driver::{Parameters, ServerInfo, Stack, StackAction, StackResource, TemplateBundle};
use crate::grant::{
    AffinityOrAntiAffinity, ConstraintIdType, ConstraintResourceRef, ConstraintScope, GrantRequest,
    PlacementConstraint, ResourceHandle,
};
use crate::grant::{ExtVirtualLinkData, Grant};
use crate::id::{GrantId, StackId, VduId, ZoneId};
use crate::intent::realise::GroupRule;
use crate::lcm::{VnfInstance, VnfcResourceInfo};
use crate::package::{Flavour, VnfPackage};
use crate::placement::Selection;
use crate::reselect::top_level_resource;
use crate::zone::ComputeZone;

/// True when the stack reached `*_COMPLETE` for the action asked. A `ROLLBACK_COMPLETE` (Heat
/// rolled a failed create or update back) is a failure, not a success.
pub(crate) fn succeeded(stack: &Stack) -> bool {
    stack.stack_status.is_complete() && stack.stack_status.action != StackAction::Rollback
}

/// The template bundle and `nfv` parameter that make the stack exactly `slots` in `zones`,
/// with the server groups of `rules` (see [`super::groups`]; a VDU with no VNFC and no
/// AutoScalingGroup has no server to join one), connected to the external virtual links
/// `links` (`nfv.CP`, see [`super::change_ext_conn`]).
pub(crate) fn heat_input(
    pkg: &VnfPackage,
    flavour: &Flavour,
    slots: &[VnfcSlot],
    zones: &BTreeMap<String, ZoneId>,
    rules: &[GroupRule],
    links: &[ExtVirtualLinkData],
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
    let cps = cp_values(links);
    for (cpd, (network, ips)) in &cps {
        values.networks.insert(cpd.clone(), network.clone());
        if !ips.is_empty() {
            values.fixed_ips.insert(cpd.clone(), ips.clone());
        }
    }
    let source = template_source(pkg, flavour);
    let mut input =
        userdata::build(&source, &base.template, &vdus, slots, &values).map_err(|e| {
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
    add_cp_section(&mut input.nfv, &cps);
    let mut params = Parameters::new();
    params.insert("nfv".into(), input.nfv);
    let has_servers = |v: &VduId| {
        input.layouts.get(v).is_some_and(Layout::is_group) || slots.iter().any(|s| &s.vdu == v)
    };
    let rules: Vec<GroupRule> = rules
        .iter()
        .cloned()
        .map(|mut r| {
            r.vdus.retain(|v| has_servers(v));
            r
        })
        .filter(|r| !r.vdus.is_empty())
        .collect();
    let out = groups::realise(&source, &bundle, &params, &rules)
        .map_err(|e| groups::template_failure(&e))?;
    Ok((out.template, out.parameters))
}

/// Per external CPD on a link: the link's network (`resourceId`) and the CP's fixed IPs
/// (Tacker's `fixed_ips`: per `cpConfig` entry in key order, per `cpProtocolData` of
/// `IP_OVER_ETHERNET`, per `ipOverEthernet.ipAddresses[]` entry: `fixedAddresses[0]` as
/// `ip_address` and `subnetId` as `subnet`, each when given).
fn cp_values(links: &[ExtVirtualLinkData]) -> BTreeMap<String, (String, Vec<serde_json::Value>)> {
    let mut out = BTreeMap::new();
    for l in links {
        for cp in &l.ext_cps {
            let mut ips = Vec::new();
            let protocols = cp
                .cp_config
                .values()
                .filter_map(|c| {
                    c.get("cpProtocolData")
                        .and_then(serde_json::Value::as_array)
                })
                .flatten()
                .filter(|p| {
                    p.get("layerProtocol").and_then(serde_json::Value::as_str)
                        == Some("IP_OVER_ETHERNET")
                });
            for p in protocols {
                let addresses = p
                    .pointer("/ipOverEthernet/ipAddresses")
                    .and_then(serde_json::Value::as_array);
                for a in addresses.into_iter().flatten() {
                    let mut ip = serde_json::Map::new();
                    if let Some(fixed) = a.pointer("/fixedAddresses/0") {
                        ip.insert("ip_address".into(), fixed.clone());
                    }
                    if let Some(subnet) = a.get("subnetId") {
                        ip.insert("subnet".into(), subnet.clone());
                    }
                    if !ip.is_empty() {
                        ips.push(serde_json::Value::Object(ip));
                    }
                }
            }
            out.insert(cp.cpd_id.clone(), (l.resource_id.clone(), ips));
        }
    }
    out
}

/// `nfv.CP.<cpdId>` = `{network, fixed_ips}` for every linked CP the template's own paths did
/// not name (the section a BaseHOT reads as `[nfv, CP, <cpdId>, network]` outside a VDU's
/// resource; Heat ignores what no template reads).
fn add_cp_section(
    nfv: &mut serde_json::Value,
    cps: &BTreeMap<String, (String, Vec<serde_json::Value>)>,
) {
    if cps.is_empty() {
        return;
    }
    let Some(nfv) = nfv.as_object_mut() else {
        return;
    };
    let section = nfv
        .entry("CP")
        .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    let Some(section) = section.as_object_mut() else {
        return;
    };
    for (cpd, (network, ips)) in cps {
        let entry = section
            .entry(cpd.clone())
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        let Some(entry) = entry.as_object_mut() else {
            continue;
        };
        entry.insert("network".into(), json!(network));
        if !ips.is_empty() {
            entry.insert("fixed_ips".into(), json!(ips));
        }
    }
}

/// The layout of every VDU of `flavour` in its BaseHOT top template.
pub(crate) fn layouts(
    pkg: &VnfPackage,
    flavour: &Flavour,
) -> Result<BTreeMap<VduId, Layout>, Failed> {
    let base = pkg
        .base_hot(&flavour.id)
        .map_err(|e| Failed::new(FailureKind::Invalid, "package has no BaseHOT", chain(&e)))?;
    let vdus: Vec<VduId> = flavour.vdus.keys().cloned().collect();
    userdata::layouts(&template_source(pkg, flavour), &base.template, &vdus).map_err(|e| {
        Failed::new(
            FailureKind::Invalid,
            "cannot build the stack template",
            chain(&e),
        )
    })
}

/// One server found for a slot: (slot, server id, top-level resource).
pub(crate) type Found = (VnfcSlot, String, String);

/// The server of every slot in `resources` (the stack's resources, nested ones included): a
/// slot of a VDU in the per-VNFC layout is found by its top-level resource; the slots of a VDU
/// in the group layout are matched to the servers under its AutoScalingGroup: `prior` maps
/// the server ids the instance knew to their slots, new servers take the free slots in
/// increasing index, in listing order.
pub(crate) fn match_servers(
    stack_id: &StackId,
    slots: &[VnfcSlot],
    layouts: &BTreeMap<VduId, Layout>,
    prior: &BTreeMap<String, VnfcSlot>,
    resources: &[StackResource],
) -> Result<Vec<Found>, Failed> {
    let servers_under = |name: &str| -> Vec<&StackResource> {
        resources
            .iter()
            .filter(|r| {
                r.resource_type == "OS::Nova::Server"
                    && top_level_resource(stack_id, r, resources).as_deref() == Some(name)
            })
            .collect()
    };
    let mut found: Vec<Found> = Vec::new();
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
        found.extend(match_group(
            stack_id, vdu, resource, &wanted, &servers, prior,
        )?);
    }
    found.sort();
    Ok(found)
}

fn match_group(
    stack_id: &StackId,
    vdu: &VduId,
    resource: &str,
    wanted: &[&VnfcSlot],
    servers: &[&StackResource],
    prior: &BTreeMap<String, VnfcSlot>,
) -> Result<Vec<Found>, Failed> {
    if servers.len() != wanted.len() {
        return Err(Failed::new(
            FailureKind::StackFailed,
            "servers not found",
            format!(
                "stack {stack_id} has {} OS::Nova::Server under AutoScalingGroup                  {resource}; expected {} (the VNFCs of VDU {vdu})",
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
    let mut free = wanted.iter().copied().filter(|s| !claimed.contains(s));
    let mut out = Vec::new();
    for (server, known) in servers.iter().zip(known) {
        let slot = match known {
            Some(s) => s.clone(),
            None => free.next().cloned().ok_or_else(|| {
                Failed::new(
                    FailureKind::StackFailed,
                    "unexpected server",
                    format!(
                        "server {} under AutoScalingGroup {resource} of stack {stack_id}                          matches no VNFC of VDU {vdu}",
                        server.physical_resource_id
                    ),
                )
            })?,
        };
        out.push((
            slot,
            server.physical_resource_id.clone(),
            resource.to_owned(),
        ));
    }
    Ok(out)
}

/// The `vnfcResourceInfo` of one VNFC: its slot, its server as Nova shows it, and the
/// top-level resource it is under.
pub(crate) fn vnfc_resource(
    slot: &VnfcSlot,
    parent: &str,
    info: &ServerInfo,
    vim_connection_id: &str,
) -> VnfcResourceInfo {
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
    VnfcResourceInfo {
        id: slot.name(),
        vdu_id: slot.vdu.clone(),
        compute_resource: ResourceHandle::new(info.id.to_string())
            .with_vim_connection_id(vim_connection_id.to_owned())
            .with_vim_level_resource_type("OS::Nova::Server"),
        zone_id: info.zone.clone(),
        metadata: Some(md),
        ..VnfcResourceInfo::default()
    }
}

/// The AutoScalingGroup resource of every VDU in the group layout.
pub(crate) fn group_resources(layouts: &BTreeMap<VduId, Layout>) -> BTreeMap<VduId, String> {
    layouts
        .iter()
        .filter_map(|(v, l)| l.group_resource().map(|r| (v.clone(), r.to_owned())))
        .collect()
}

/// The zone of the existing VNFCs of every group VDU that has some (its first one's).
pub(crate) fn group_zones(
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

/// The VDU of every compute resource a grant's constraints can name, by (is a `GRANT` id,
/// resource id): the new VNFCs of `planned` and the instance's VNFCs.
fn vdu_by_resource(planned: &PlannedGrant, inst: &VnfInstance) -> BTreeMap<(bool, String), VduId> {
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
    vdu_of
}

/// `constraints` with zone anti-affinity keeping one representative per group VDU
/// (`groups`; `vdu_of` as [`vdu_by_resource`] gives it); a zone anti-affinity left with fewer
/// than two resources goes.
fn one_per_group(
    constraints: Vec<PlacementConstraint>,
    vdu_of: &BTreeMap<(bool, String), VduId>,
    groups: &BTreeMap<VduId, String>,
) -> Vec<PlacementConstraint> {
    let mut out = Vec::new();
    for mut pc in constraints {
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
        out.push(pc);
    }
    out
}

/// The grant request and pinned zones the local granter answers when VDUs are in the group
/// layout (`groups`: VDU → AutoScalingGroup resource; `group_zone`: the zone of the group
/// VDUs that already have VNFCs): see "VDUs under an AutoScalingGroup" in the module docs.
pub(crate) fn group_grant(
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
    let vdu_of = vdu_by_resource(&planned, inst);
    let mut constraints = one_per_group(
        std::mem::take(&mut planned.request.placement_constraints),
        &vdu_of,
        groups,
    );
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
pub(crate) fn unit_constraints(
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

/// What the local granter answers the new VNFCs of an operation from.
pub(crate) struct LocalGrant<'a> {
    /// The grant request and its new VNFCs.
    pub planned: &'a PlannedGrant,
    /// The instance before the operation.
    pub instance: &'a VnfInstance,
    /// Its flavour.
    pub flavour: &'a Flavour,
    /// VDU → AutoScalingGroup resource, for VDUs in the group layout.
    pub groups: &'a BTreeMap<VduId, String>,
    /// The zone of the group VDUs that already have VNFCs.
    pub group_zone: &'a BTreeMap<VduId, ZoneId>,
    /// Zones an NFVO pinned.
    pub pinned: &'a BTreeMap<String, ZoneId>,
    /// The zone listing.
    pub zones: &'a [ComputeZone],
    /// The grant's id.
    pub grant_id: GrantId,
    /// The granter's zone selection.
    pub selection: Selection,
    /// Its seed.
    pub seed: u64,
}

impl LocalGrant<'_> {
    /// The request as granted (VDUs under an AutoScalingGroup get one zone each, see
    /// [`group_grant`]) and the local granter's answer to it.
    pub(crate) fn grant(self) -> (PlannedGrant, Result<Grant, Failed>) {
        let (granted, pinned) = group_grant(
            self.planned,
            self.instance,
            self.groups,
            self.group_zone,
            self.pinned,
        );
        let vnfc_names: BTreeMap<String, String> = granted
            .new_vnfcs
            .iter()
            .map(|n| (n.resource_id.clone(), n.slot.name()))
            .collect();
        let ctx = granter::GrantContext {
            vnfc_names: &vnfc_names,
            grant_id: self.grant_id,
            flavour: self.flavour,
            instance: self.instance,
            zones: self.zones,
            pinned: &pinned,
            selection: self.selection,
            seed: self.seed,
        };
        let answer = granter::grant(&granted.request, &ctx)
            .map(|(g, _)| g)
            .map_err(|e| grant_failure(&e));
        (granted, answer)
    }
}

/// The failure of a grant the local granter refused.
pub(crate) fn grant_failure(e: &granter::GrantError) -> Failed {
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
    Failed::new(kind, title, chain(e))
}
