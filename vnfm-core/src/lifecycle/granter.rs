//! The local granter: answers a SOL003 [`GrantRequest`] with a [`Grant`] that names a zone for
//! every new compute resource, using the placement solver.
//!
//! - Every `COMPUTE` resource definition of `addResources` is an item to place; its demand is
//!   the VDU's virtual compute from the VNFD (vCPUs, memory, the sum of its local storages).
//!   `STORAGE` definitions of a VNFC get the zone of its compute resource.
//! - Every `placementConstraints` entry becomes a solver constraint: `GRANT` references name
//!   the items, `RES_MGMT` references name existing VNFCs (`computeResource.resourceId`),
//!   which never move; their zone and host come from the instance's `vnfcResourceInfo`
//!   (`zoneId` or `metadata.zone`, `metadata.host`). `fallbackBestEffort` is kept.
//! - Pinned zones (`--zone VDU1-0=AZ-1` or `--zone VDU1=AZ-1`: zones an NFVO granted) are
//!   taken as given, for one VNFC or for every new VNFC of a VDU: the NFVO decided, so they
//!   are not checked against the constraints; the other VNFCs are placed around them (a pinned
//!   VNFC counts like an existing one).
//! - Selection `random` (the spec) chooses among compliant zones whatever their free capacity;
//!   `capacity-aware` ranks them by the free capacity the zone catalogue reports.
//! - The grant lists one `ZoneInfo` per zone used (`id` = `zone-<n>`), and one `GrantInfo` per
//!   resource definition referring to it. Constraints relaxed under `fallbackBestEffort` are
//!   reported in `additionalParams.relaxedPlacementConstraints` (one sentence each), since
//!   SOL003's `Grant` has no attribute for it.

use std::collections::BTreeMap;

use crate::constraint::{Constraint, ConstraintKind, Scope};
use crate::error::{Error, Location};
use crate::grant::{
    AffinityOrAntiAffinity, ConstraintIdType, ConstraintScope, Grant, GrantInfo, GrantRequest,
    Link, ResourceType, ZoneInfo,
};
use crate::id::{GrantId, VduId, ZoneId};

use crate::lcm::VnfInstance;
use crate::package::Flavour;
use crate::placement::{
    ExistingMember, Item, Placement, PlacementError, PlacementRequest, Selection,
};
use crate::zone::{ComputeZone, Resources};

/// Everything the local granter needs besides the request.
#[derive(Clone, Debug)]
pub struct GrantContext<'a> {
    /// The grant's id.
    pub grant_id: GrantId,
    /// The flavour (for VDU demands).
    pub flavour: &'a Flavour,
    /// The instance (for existing VNFCs referenced by `RES_MGMT`).
    pub instance: &'a VnfInstance,
    /// The zone catalogue.
    pub zones: &'a [ComputeZone],
    /// Zones pinned per VNFC name (`VDU1-0`) or per VDU id (`VDU1`: all its new VNFCs).
    pub pinned: &'a BTreeMap<String, ZoneId>,
    /// The VNFC name of each new COMPUTE resource definition id (for `pinned`).
    pub vnfc_names: &'a BTreeMap<String, String>,
    /// Selection policy.
    pub selection: Selection,
    /// Seed.
    pub seed: u64,
}

/// Why no grant was given.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    /// The request or the context is malformed.
    #[error("invalid grant request")]
    Invalid(#[source] Error),
    /// The solver found no placement.
    #[error("no placement for the grant request")]
    Placement(#[source] PlacementError),
}

impl GrantError {
    /// True when the constraints cannot be met (exit code 3).
    pub fn is_infeasible(&self) -> bool {
        matches!(self, GrantError::Placement(e) if e.is_infeasible())
    }
    /// True when capacity is exhausted (exit code 4).
    pub fn is_capacity(&self) -> bool {
        matches!(self, GrantError::Placement(e) if e.is_capacity())
    }
}

/// The demand of one VNFC of `vdu` from the VNFD's virtual compute (zero when not declared).
pub fn vdu_demand(flavour: &Flavour, vdu: &VduId) -> Resources {
    flavour
        .vdu(vdu)
        .and_then(|v| v.virtual_compute.as_ref())
        .map(|c| {
            Resources::new(
                u64::from(c.num_virtual_cpu),
                c.virtual_mem_size_mib,
                c.virtual_local_storage_gib.iter().sum(),
            )
        })
        .unwrap_or_default()
}

/// Answers `request` (see the module docs). Returns the grant and the solver's placement.
///
/// # Errors
/// [`GrantError::Invalid`] for a malformed request (a COMPUTE definition without a VDU, a
/// `RES_MGMT` reference to an unknown VNFC); [`GrantError::Placement`] when no placement exists
/// (constraints, capacity, no candidate zone).
pub fn grant(
    request: &GrantRequest,
    ctx: &GrantContext<'_>,
) -> Result<(Grant, Placement), GrantError> {
    let invalid = |field: String, msg: String| {
        GrantError::Invalid(Error::invalid(Location::default().with_field(field), msg))
    };
    let mut items = Vec::new();
    let mut pinned_members: Vec<ExistingMember> = Vec::new();
    let mut pinned_assignments: Vec<(String, ZoneId)> = Vec::new();
    for (i, r) in request.add_resources.iter().enumerate() {
        if r.type_ != ResourceType::Compute {
            continue;
        }
        let vdu = r.vdu_id.clone().ok_or_else(|| {
            invalid(
                format!("addResources[{i}].vduId"),
                format!("COMPUTE resource {} has no vduId", r.id),
            )
        })?;
        let pin = ctx
            .vnfc_names
            .get(&r.id)
            .and_then(|n| ctx.pinned.get(n))
            .or_else(|| ctx.pinned.get(vdu.as_str()));
        match pin {
            Some(z) => {
                pinned_members.push(ExistingMember::new(
                    r.id.clone(),
                    z.clone(),
                    format!("{}@{z}", r.id),
                ));
                pinned_assignments.push((r.id.clone(), z.clone()));
            }
            None => items.push(Item::new(
                r.id.clone(),
                vdu.clone(),
                vdu_demand(ctx.flavour, &vdu),
            )),
        }
    }
    let vnfcs = ctx
        .instance
        .instantiated_vnf_info
        .as_ref()
        .map(|i| i.vnfc_resource_info.as_slice())
        .unwrap_or_default();
    let mut existing: BTreeMap<String, ExistingMember> = BTreeMap::new();
    let mut constraints = Vec::new();
    for (ci, pc) in request.placement_constraints.iter().enumerate() {
        let mut members = Vec::new();
        for (ri, r) in pc.resource.iter().enumerate() {
            if r.id_type == ConstraintIdType::ResMgmt && !existing.contains_key(&r.resource_id) {
                let v = vnfcs
                    .iter()
                    .find(|v| v.compute_resource.resource_id == r.resource_id)
                    .ok_or_else(|| {
                        invalid(
                            format!("placementConstraints[{ci}].resource[{ri}].resourceId"),
                            format!(
                                "RES_MGMT resource {} is no VNFC of the instance",
                                r.resource_id
                            ),
                        )
                    })?;
                let zone = v.zone().ok_or_else(|| {
                    invalid(
                        format!("placementConstraints[{ci}].resource[{ri}].resourceId"),
                        format!("existing VNFC {} has no known zone", v.id),
                    )
                })?;
                let host = v
                    .metadata
                    .as_ref()
                    .and_then(|m| m.get("host"))
                    .and_then(|h| h.as_str())
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{}@{zone}", r.resource_id));
                existing.insert(
                    r.resource_id.clone(),
                    ExistingMember::new(r.resource_id.clone(), zone, host),
                );
            }
            members.push(r.resource_id.clone());
        }
        let kind = match pc.affinity_or_anti_affinity {
            AffinityOrAntiAffinity::Affinity => ConstraintKind::Affinity,
            AffinityOrAntiAffinity::AntiAffinity => ConstraintKind::AntiAffinity,
        };
        let scope = match pc.scope {
            ConstraintScope::Zone | ConstraintScope::ZoneGroup | ConstraintScope::NfviPop => {
                Scope::Zone
            }
            ConstraintScope::NfviNode | ConstraintScope::CisNode => Scope::Host,
        };
        constraints.push(
            Constraint::new(format!("placementConstraints[{ci}]"), kind, scope, members)
                .with_fallback_best_effort(pc.is_fallback_best_effort()),
        );
    }
    let zones: Vec<ComputeZone> = match ctx.selection {
        Selection::CapacityAware => ctx.zones.to_vec(),
        Selection::Random => ctx
            .zones
            .iter()
            .cloned()
            .map(ComputeZone::without_capacity)
            .collect(),
    };
    let mut existing: Vec<ExistingMember> = existing.into_values().collect();
    existing.extend(pinned_members);
    let placement = PlacementRequest::new(zones)
        .with_items(items)
        .with_existing(existing)
        .with_constraints(constraints)
        .with_selection(ctx.selection)
        .with_seed(ctx.seed)
        .place()
        .map_err(GrantError::Placement)?;

    let mut g = Grant::for_request(ctx.grant_id.clone(), request);
    let mut zone_ids: BTreeMap<ZoneId, String> = BTreeMap::new();
    let mut compute_zone: BTreeMap<&str, String> = BTreeMap::new();
    let placed = placement
        .assignments
        .iter()
        .map(|a| (a.id.as_str(), &a.zone))
        .chain(pinned_assignments.iter().map(|(id, z)| (id.as_str(), z)));
    for (id, zone) in placed {
        let n = zone_ids.len();
        let zid = zone_ids
            .entry(zone.clone())
            .or_insert_with(|| format!("zone-{n}"))
            .clone();
        compute_zone.insert(id, zid);
    }
    g.zones = zone_ids
        .iter()
        .map(|(zone, id)| ZoneInfo {
            id: id.clone(),
            zone_id: zone.clone(),
            vim_connection_id: None,
            resource_provider_id: None,
        })
        .collect();
    g.zones.sort_by(|a, b| a.id.cmp(&b.id));
    // Storage definitions follow their VNFC's compute: the compute definition of the same VDU
    // that precedes them in addResources.
    let mut last_compute: Option<String> = None;
    for r in &request.add_resources {
        let zone = match r.type_ {
            ResourceType::Compute => {
                last_compute = compute_zone.get(r.id.as_str()).cloned();
                last_compute.clone()
            }
            ResourceType::Storage => last_compute.clone(),
            _ => None,
        };
        let mut info = GrantInfo::new(r.id.clone());
        if let Some(z) = zone {
            info = info.with_zone_id(z);
        }
        g.add_resources.push(info);
    }
    g.remove_resources = request
        .remove_resources
        .iter()
        .map(|r| GrantInfo::new(r.id.clone()))
        .collect();
    if placement.is_relaxed() {
        let mut params = crate::grant::KeyValuePairs::new();
        params.insert(
            "relaxedPlacementConstraints".into(),
            placement
                .relaxed
                .iter()
                .map(|r| serde_json::Value::String(r.to_string()))
                .collect(),
        );
        g.additional_params = Some(params);
    }
    g.links.insert(
        "self".into(),
        Link::new(format!("/grant/v2/grants/{}", g.id)),
    );
    for (k, v) in &request.links {
        g.links.insert(k.clone(), v.clone());
    }
    Ok((g, placement))
}
