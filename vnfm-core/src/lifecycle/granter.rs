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
//!   `capacity-aware` (vnfm's default for the granter) ranks them by the free capacity the zone
//!   catalogue reports. When the catalogue reports no free capacity for any host (e.g. an
//!   OpenStack user that may not read the Placement API), `capacity-aware` falls back to
//!   `random`. The grant says which policy chose its zones, and why, in
//!   `additionalParams.zoneSelection` ([`ZONE_SELECTION`]).
//! - The grant lists one `ZoneInfo` per zone used (`id` = `zone-<n>`), and one `GrantInfo` per
//!   resource definition referring to it. Constraints relaxed under `fallbackBestEffort` are
//!   reported in `additionalParams.relaxedPlacementConstraints` (one sentence each), since
//!   SOL003's `Grant` has no attribute for it.
//! - [`draw_reservation`] then draws the new VNFCs granted into a reserved zone from a
//!   reservation of the Promise ledger and sets `GrantInfo.reservationId` on them.

use std::collections::BTreeMap;

use crate::constraint::{Constraint, ConstraintKind, Scope};
use crate::error::{Error, Location};
use crate::grant::{
    AffinityOrAntiAffinity, ConstraintIdType, ConstraintScope, Grant, GrantInfo, GrantRequest,
    Link, PlacementConstraint, ResourceType, ZoneInfo,
};
use crate::id::{GrantId, IdGen, VduId, ZoneId};
use chrono::{DateTime, Utc};

use crate::lcm::VnfInstance;
use crate::package::Flavour;
use crate::placement::{
    ExistingMember, Item, Placement, PlacementError, PlacementRequest, Selection,
};
use crate::reservation::{
    Allocation, AllocationRequest, Capacity, Ledger, LedgerError, Rejection, ReservationId,
};
use crate::zone::{ComputeZone, Resources};

/// The key of the grant's `additionalParams` that says how its zones were chosen:
/// `{"policy": "capacity-aware" | "random", "configured": <the configured policy>, "reason":
/// <why, when the policy is not the configured one>}`.
pub const ZONE_SELECTION: &str = "zoneSelection";

/// The policy the granter really uses for `configured` over `zones`, and why when it differs:
/// `capacity-aware` needs at least one available host whose free capacity is known.
pub fn effective_selection(
    configured: Selection,
    zones: &[ComputeZone],
) -> (Selection, Option<&'static str>) {
    let known = zones
        .iter()
        .flat_map(|z| z.hosts.iter().flatten())
        .any(|h| h.available && h.free.is_some());
    match configured {
        Selection::CapacityAware if !known => (
            Selection::Random,
            Some(
                "capacity unknown: the zone catalogue reports no free capacity for any host \
                 (an OpenStack user that may not read the Placement API sees none); zones \
                 chosen at random among the compliant ones, as the spec does",
            ),
        ),
        s => (s, None),
    }
}

fn selection_name(s: Selection) -> &'static str {
    match s {
        Selection::Random => "random",
        Selection::CapacityAware => "capacity-aware",
    }
}

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

/// The solver's form of the grant request's `placementConstraints[index]` over `members`
/// (ids of items or existing members): kind and `fallbackBestEffort` kept, SOL003 scopes mapped
/// as [`crate::constraint`] documents (`ZONE`, `ZONE_GROUP`, `NFVI_POP` → zone; `NFVI_NODE`,
/// `CIS_NODE` → host).
pub fn solver_constraint(
    index: usize,
    pc: &PlacementConstraint,
    members: Vec<String>,
) -> Constraint {
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
    Constraint::new(
        format!("placementConstraints[{index}]"),
        kind,
        scope,
        members,
    )
    .with_fallback_best_effort(pc.is_fallback_best_effort())
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
    let compute = compute_items(request, ctx)?;
    let (existing, constraints) = constraint_members(request, ctx)?;
    let (selection, fallback) = effective_selection(ctx.selection, ctx.zones);
    let mut existing: Vec<ExistingMember> = existing.into_values().collect();
    existing.extend(compute.pinned_members);
    let request_for = |zones: Vec<ComputeZone>| {
        PlacementRequest::new(zones)
            .with_items(compute.items.clone())
            .with_existing(existing.clone())
            .with_constraints(constraints.clone())
            .with_selection(selection)
            .with_seed(ctx.seed)
    };
    let without_capacity = || -> Vec<ComputeZone> {
        ctx.zones
            .iter()
            .cloned()
            .map(ComputeZone::without_capacity)
            .collect()
    };
    let zones: Vec<ComputeZone> = match selection {
        Selection::CapacityAware => ctx.zones.to_vec(),
        Selection::Random => without_capacity(),
    };
    let placement = match request_for(zones).place() {
        Ok(p) => p,
        // Constraints that hold when capacity is ignored are blocked by capacity: a capacity
        // error (exit 4), not an infeasible request (exit 3).
        Err(e @ PlacementError::Infeasible { .. })
            if selection == Selection::CapacityAware
                && request_for(without_capacity()).place().is_ok() =>
        {
            return Err(GrantError::Placement(PlacementError::CapacityExhausted {
                items: Vec::new(),
                detail: format!(
                    "{e}; the constraints can be met, but not with the free capacity the zone \
                     catalogue reports"
                ),
            }));
        }
        Err(e) => return Err(GrantError::Placement(e)),
    };
    let mut g = Grant::for_request(ctx.grant_id.clone(), request);
    fill_zones(&mut g, request, &placement, &compute.pinned_assignments);
    g.additional_params = Some(grant_params(selection, ctx.selection, fallback, &placement));
    g.links.insert(
        "self".into(),
        Link::new(format!("/grant/v2/grants/{}", g.id)),
    );
    for (k, v) in &request.links {
        g.links.insert(k.clone(), v.clone());
    }
    Ok((g, placement))
}

/// The new COMPUTE resources of a grant request: the ones to place, and the pinned ones (as
/// existing members of their zone, and their assignments).
struct ComputeItems {
    items: Vec<Item>,
    pinned_members: Vec<ExistingMember>,
    pinned_assignments: Vec<(String, ZoneId)>,
}

fn invalid(field: String, msg: String) -> GrantError {
    GrantError::Invalid(Error::invalid(Location::default().with_field(field), msg))
}

fn compute_items(
    request: &GrantRequest,
    ctx: &GrantContext<'_>,
) -> Result<ComputeItems, GrantError> {
    let mut out = ComputeItems {
        items: Vec::new(),
        pinned_members: Vec::new(),
        pinned_assignments: Vec::new(),
    };
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
                out.pinned_members.push(ExistingMember::new(
                    r.id.clone(),
                    z.clone(),
                    format!("{}@{z}", r.id),
                ));
                out.pinned_assignments.push((r.id.clone(), z.clone()));
            }
            None => out.items.push(Item::new(
                r.id.clone(),
                vdu.clone(),
                vdu_demand(ctx.flavour, &vdu),
            )),
        }
    }
    Ok(out)
}

/// The solver's constraints of the request, and the instance's VNFCs they name (`RES_MGMT`)
/// as existing members with their zone and host.
#[allow(clippy::type_complexity)]
fn constraint_members(
    request: &GrantRequest,
    ctx: &GrantContext<'_>,
) -> Result<(BTreeMap<String, ExistingMember>, Vec<Constraint>), GrantError> {
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
                let field = format!("placementConstraints[{ci}].resource[{ri}].resourceId");
                let v = vnfcs
                    .iter()
                    .find(|v| v.compute_resource.resource_id == r.resource_id)
                    .ok_or_else(|| {
                        invalid(
                            field.clone(),
                            format!(
                                "RES_MGMT resource {} is no VNFC of the instance",
                                r.resource_id
                            ),
                        )
                    })?;
                let zone = v.zone().ok_or_else(|| {
                    invalid(
                        field.clone(),
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
        constraints.push(solver_constraint(ci, pc, members));
    }
    Ok((existing, constraints))
}

/// The grant's `zones` and `addResources` / `removeResources`: each new compute resource in the
/// zone it was placed (or pinned) in, each storage resource with the compute before it.
fn fill_zones(
    g: &mut Grant,
    request: &GrantRequest,
    placement: &Placement,
    pinned: &[(String, ZoneId)],
) {
    let mut zone_ids: BTreeMap<ZoneId, String> = BTreeMap::new();
    let mut compute_zone: BTreeMap<&str, String> = BTreeMap::new();
    let placed = placement
        .assignments
        .iter()
        .map(|a| (a.id.as_str(), &a.zone))
        .chain(pinned.iter().map(|(id, z)| (id.as_str(), z)));
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
}

/// The grant's `additionalParams`: how zones were selected, and the constraints relaxed.
fn grant_params(
    selection: Selection,
    configured: Selection,
    fallback: Option<&'static str>,
    placement: &Placement,
) -> crate::grant::KeyValuePairs {
    let mut params = crate::grant::KeyValuePairs::new();
    let mut how = serde_json::Map::new();
    how.insert("policy".into(), selection_name(selection).into());
    how.insert("configured".into(), selection_name(configured).into());
    if let Some(why) = fallback {
        how.insert("reason".into(), why.into());
    }
    params.insert(ZONE_SELECTION.into(), serde_json::Value::Object(how));
    if placement.is_relaxed() {
        params.insert(
            "relaxedPlacementConstraints".into(),
            placement
                .relaxed
                .iter()
                .map(|r| serde_json::Value::String(r.to_string()))
                .collect(),
        );
    }
    params
}

/// The capacity one VNFC of `vdu` takes in the reservation ledger: its vCPUs (`cores`),
/// memory (`ram`, MiB), local disk (`size`, GiB) and one `instances`.
pub fn vdu_capacity(flavour: &Flavour, vdu: &VduId) -> Capacity {
    let d = vdu_demand(flavour, vdu);
    Capacity {
        cores: d.vcpus,
        ram: d.memory_mb,
        instances: 1,
        size: d.disk_gb,
        ..Capacity::default()
    }
}

/// What a reservation in `zone` covers of `grant` (answering `request`): the draws, (resource
/// definition id, [`vdu_capacity`]) of each `COMPUTE` resource granted into the zone, and the
/// ids to tag with the reservation, those and the `STORAGE` definitions that follow them in
/// the zone.
fn draws_in_zone(
    grant: &Grant,
    request: &GrantRequest,
    flavour: &Flavour,
    zone: &ZoneId,
) -> (Vec<(String, Capacity)>, Vec<String>) {
    let zone_info: Vec<&str> = grant
        .zones
        .iter()
        .filter(|z| z.zone_id == *zone)
        .map(|z| z.id.as_str())
        .collect();
    let mut draws: Vec<(String, Capacity)> = Vec::new();
    let mut tagged: Vec<String> = Vec::new();
    let mut drawing = false;
    for r in &request.add_resources {
        let in_zone = grant
            .add_resources
            .iter()
            .find(|g| g.resource_definition_id == r.id)
            .and_then(|g| g.zone_id.as_deref())
            .is_some_and(|z| zone_info.contains(&z));
        match r.type_ {
            ResourceType::Compute => {
                drawing = in_zone;
                if let (true, Some(vdu)) = (in_zone, &r.vdu_id) {
                    draws.push((r.id.clone(), vdu_capacity(flavour, vdu)));
                    tagged.push(r.id.clone());
                }
            }
            ResourceType::Storage if drawing && in_zone => tagged.push(r.id.clone()),
            _ => {}
        }
    }
    (draws, tagged)
}

/// Draws the new VNFCs of `grant` from reservation `reservation` of `ledger` (SOL003
/// `GrantInfo.reservationId`): every `COMPUTE` resource granted into the reservation's zone
/// draws [`vdu_capacity`] of its VDU (one allocation each, `instanceRef` the resource
/// definition id) and gets `reservationId` in the grant, and so do the `STORAGE` definitions
/// that follow it. All or nothing: the sum is checked first, so a refusal draws nothing.
///
/// # Errors
/// [`LedgerError::Rejected`] when the reservation does not exist, is not active, was released
/// or has not enough left (saying which line and how much); [`LedgerError::Invalid`] naming
/// the reservation, its zone and the grant's zones when no new VNFC was granted into it.
pub fn draw_reservation(
    grant: &mut Grant,
    request: &GrantRequest,
    flavour: &Flavour,
    reservation: &ReservationId,
    ledger: &mut Ledger,
    ids: &mut IdGen,
    now: DateTime<Utc>,
) -> Result<Vec<Allocation>, LedgerError> {
    let zone = ledger
        .reservation(reservation)
        .map(|r| r.zone)
        .ok_or_else(|| LedgerError::Rejected(Rejection::UnknownReservation(reservation.clone())))?;
    let (draws, tagged) = draws_in_zone(grant, request, flavour, &zone);
    if draws.is_empty() {
        let zones: Vec<String> = grant.zones.iter().map(|z| z.zone_id.to_string()).collect();
        return Err(LedgerError::Invalid(Error::invalid(
            Location::default().with_field("reservationId"),
            format!(
                "reservation {reservation} is in zone {zone} but the grant places no new VNFC \
                 there (zones: {}); expected a reservation in a granted zone",
                if zones.is_empty() {
                    "none".to_owned()
                } else {
                    zones.join(", ")
                }
            ),
        )));
    }
    let total = draws
        .iter()
        .fold(Capacity::default(), |acc, (_, c)| acc.saturating_add(c));
    ledger.check_draw(reservation, &total, now)?;
    let mut allocations = Vec::new();
    for (id, capacity) in draws {
        let a = ledger.create_instance(
            AllocationRequest {
                reservation: Some(reservation.clone()),
                capacity,
                instance_ref: Some(id),
                ..Default::default()
            },
            ids,
            now,
        )?;
        allocations.push(a.value);
    }
    for g in &mut grant.add_resources {
        if tagged.contains(&g.resource_definition_id) {
            g.reservation_id = Some(reservation.to_string());
        }
    }
    Ok(allocations)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::lifecycle::grant::{instantiate, GrantOptions};
    use crate::package::VnfPackage;
    use crate::reservation::{PoolRequest, ReservationRequest};
    use crate::zone::ComputeHost;

    fn t(h: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + h * 3600, 0).unwrap()
    }

    fn zone(name: &str) -> ComputeZone {
        ComputeZone {
            name: name.into(),
            available: true,
            hosts: Some(vec![ComputeHost {
                name: format!("{name}-h").into(),
                available: true,
                free: Some(Resources::new(64, 131072, 1000)),
            }]),
        }
    }

    /// The demo package's grant with VDU1 pinned into AZ-2 and VDU2 into AZ-3.
    fn granted() -> (VnfPackage, GrantRequest, Grant) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/demo-vnf");
        let pkg = crate::package::fs::load(&dir).unwrap();
        let mut inst = VnfInstance::new("inst-1", pkg.descriptor_id.clone());
        inst.instantiation_state = Some(crate::lcm::InstantiationState::NotInstantiated);
        let mut ids = IdGen::seeded(1);
        let planned = instantiate(
            &pkg,
            "default",
            &inst,
            &"op-1".into(),
            // Best effort: VDU1's two VNFCs share the zone they are pinned to.
            &GrantOptions {
                fallback_best_effort: true,
                ..GrantOptions::default()
            },
            &mut ids,
        )
        .unwrap();
        let pinned: BTreeMap<String, ZoneId> = [
            ("VDU1".to_owned(), ZoneId::from("AZ-2")),
            ("VDU2".to_owned(), ZoneId::from("AZ-3")),
        ]
        .into_iter()
        .collect();
        let zones = vec![zone("AZ-2"), zone("AZ-3")];
        let flavour = pkg.flavour("default").unwrap();
        let ctx = GrantContext {
            grant_id: "g-1".into(),
            flavour,
            instance: &inst,
            zones: &zones,
            pinned: &pinned,
            vnfc_names: &BTreeMap::new(),
            selection: Selection::Random,
            seed: 1,
        };
        let (g, _) = grant(&planned.request, &ctx).unwrap();
        (pkg.clone(), planned.request, g)
    }

    fn ledger(cores: u64) -> (Ledger, IdGen, ReservationId) {
        let mut ids = IdGen::seeded(2);
        let mut l = Ledger::default();
        for z in ["AZ-2", "AZ-3"] {
            l.increase_capacity(
                PoolRequest::new(
                    z,
                    Capacity::compute(32, 65536, 10)
                        .with(crate::reservation::ResourceLine::Size, 500),
                ),
                &mut ids,
                t(0),
            )
            .unwrap();
        }
        let r = l
            .create_reservation(
                ReservationRequest::new(
                    "AZ-2",
                    Capacity::compute(cores, 16384, 4)
                        .with(crate::reservation::ResourceLine::Size, 200),
                )
                .with_window(t(1), t(5)),
                &mut ids,
                t(0),
            )
            .unwrap()
            .value;
        (l, ids, r.id)
    }

    #[test]
    fn vnfcs_in_the_reserved_zone_draw_and_carry_the_reservation_id() {
        let (pkg, req, mut g) = granted();
        let flavour = pkg.flavour("default").unwrap();
        let (mut l, mut ids, rid) = ledger(8);
        let allocs = draw_reservation(&mut g, &req, flavour, &rid, &mut l, &mut ids, t(1)).unwrap();
        let vdu1: Vec<&str> = req
            .add_resources
            .iter()
            .filter(|r| r.type_ == ResourceType::Compute && r.vdu_id == Some("VDU1".into()))
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(vdu1.len(), 2);
        assert_eq!(allocs.len(), 2);
        let one = vdu_capacity(flavour, &"VDU1".into());
        assert!(one.cores > 0 && one.ram > 0 && one.instances == 1);
        for a in &allocs {
            assert_eq!(a.capacity, one);
            assert!(vdu1.contains(&a.instance_ref.as_deref().unwrap()));
        }
        for info in &g.add_resources {
            let is_vdu1 = vdu1.contains(&info.resource_definition_id.as_str());
            let compute = req
                .add_resources
                .iter()
                .any(|r| r.id == info.resource_definition_id && r.type_ == ResourceType::Compute);
            if compute {
                assert_eq!(
                    info.reservation_id.is_some(),
                    is_vdu1,
                    "{}",
                    info.resource_definition_id
                );
            }
        }
        let r = l.reservation(&rid).unwrap();
        assert_eq!(r.allocated.cores, 2 * one.cores);
        assert_eq!(r.remaining.instances, 2);
    }

    #[test]
    fn a_reservation_too_small_draws_nothing() {
        let (pkg, req, mut g) = granted();
        let flavour = pkg.flavour("default").unwrap();
        let one = vdu_capacity(flavour, &"VDU1".into());
        // Room for one VNFC of VDU1, not two.
        let (mut l, mut ids, rid) = ledger(one.cores);
        let before = g.clone();
        let err =
            draw_reservation(&mut g, &req, flavour, &rid, &mut l, &mut ids, t(1)).unwrap_err();
        assert!(
            matches!(
                err,
                LedgerError::Rejected(Rejection::InsufficientRemaining { .. })
            ),
            "{err}"
        );
        assert_eq!(g, before);
        assert!(l.reservation(&rid).unwrap().allocated.is_zero());
    }

    #[test]
    fn refusals_name_the_reservation() {
        let (pkg, req, mut g) = granted();
        let flavour = pkg.flavour("default").unwrap();
        let (mut l, mut ids, rid) = ledger(8);
        // Before its start.
        let err =
            draw_reservation(&mut g, &req, flavour, &rid, &mut l, &mut ids, t(0)).unwrap_err();
        assert!(
            err.to_string().contains("is initialized, expected active"),
            "{err}"
        );
        // Unknown.
        let err = draw_reservation(
            &mut g,
            &req,
            flavour,
            &"nope".into(),
            &mut l,
            &mut ids,
            t(1),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("reservation nope does not exist"),
            "{err}"
        );
        // In a zone the grant does not use.
        let other = l
            .create_reservation(
                ReservationRequest::new("AZ-9", Capacity::compute(1, 1, 1)),
                &mut ids,
                t(1),
            )
            .map(|o| o.value.id);
        assert!(other.is_err(), "AZ-9 is not a zone of the ledger");
        l.add_zone("AZ-9");
        l.increase_capacity(
            PoolRequest::new("AZ-9", Capacity::compute(4, 4096, 2)),
            &mut ids,
            t(1),
        )
        .unwrap();
        let far = l
            .create_reservation(
                ReservationRequest::new("AZ-9", Capacity::compute(1, 1, 1)).with_expiry(t(3)),
                &mut ids,
                t(1),
            )
            .unwrap()
            .value
            .id;
        let err =
            draw_reservation(&mut g, &req, flavour, &far, &mut l, &mut ids, t(1)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("zone AZ-9") && msg.contains("AZ-2"), "{msg}");
    }
}
