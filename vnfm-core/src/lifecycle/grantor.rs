//! vnfm as the NFVO of the SOL003 Grant interface: the decision on a [`GrantRequest`] that
//! another VNFM sends (`POST /grant/v1/grants` of `vnfm serve`).
//!
//! [`decide`] answers synchronously, with a [`Grant`] or a [`GrantRefusal`]:
//!
//! 1. **Limits** ([`check_limits`]): at most [`MAX_GRANT_RESOURCES`] entries in each of
//!    `addResources`, `tempResources`, `removeResources` and `updateResources`, at most
//!    [`MAX_PLACEMENT_CONSTRAINTS`] `placementConstraints` (and `vimConstraints`), at most
//!    [`MAX_CONSTRAINT_RESOURCES`] references in one constraint, at most
//!    [`MAX_RES_MGMT_REFERENCES`] distinct `RES_MGMT` references in all the constraints
//!    together (each is one lookup in the VIM). Beyond: [`GrantRefusal::TooMany`] naming the
//!    list and the limit.
//! 2. **References** of `placementConstraints`: a `GRANT` reference must name a resource
//!    definition of the request, a `RES_MGMT` reference a resource the NFVO can locate (the
//!    caller looks every [`res_mgmt_references`] up in its VIM and hands the zone and host of
//!    the ones it found as [`GrantorContext::located`]). Either unknown:
//!    [`GrantRefusal::Rejected`] (403) naming `placementConstraints[i].resource[j].resourceId`.
//! 3. **The request's own rules** ([`GrantRequest::validate`]: mandatory attributes, `_links`,
//!    constraints of two or more resources, a `vduId` on every `COMPUTE` resource to add):
//!    [`GrantRefusal::Invalid`] (422) naming the field.
//! 4. **The zones**: the local granter ([`super::granter::grant`], the same placement solver as
//!    vnfm's own operations) places every `COMPUTE` resource of `addResources` in a zone of the
//!    zone catalogue under the constraints (affinity / anti-affinity, scope `ZONE` or
//!    `NFVI_NODE`, hard unless `fallbackBestEffort`), capacity-aware by the selection
//!    configured. Each VNFC's demand is its VDU's virtual compute when the NFVO knows the VNFD
//!    ([`GrantorContext::flavour`], the package of `vnfdId`), else zero (the zones are then
//!    ranked by free capacity alone). `STORAGE` definitions follow the compute before them.
//!    A constraint member that is not placed here (a `GRANT` reference to a definition other
//!    than a `COMPUTE` of `addResources`) is left out of the constraint; a constraint left
//!    with fewer than two members constrains nothing and is dropped, both said in
//!    `additionalParams.ignoredPlacementConstraintMembers`. No placement (a hard constraint
//!    that cannot hold, capacity, no zone): [`GrantRefusal::Rejected`] naming the constraint
//!    (or `addResources` when no constraint is at fault).
//! 5. **The grant**: `zones[]` one `ZoneInfo` per zone used, `addResources[].zoneId` referring
//!    into it, `removeResources` acknowledged one `GrantInfo` each, `additionalParams` how the
//!    zones were chosen (`zoneSelection`), the relaxed constraints and how demand was counted
//!    (`vduDemand`), `_links.self` [`GrantorContext::self_href`] with the request's
//!    `vnfLcmOpOcc` and `vnfInstance`.
//!
//! The `vnfInstanceId`, the `vnfdId` and the `flavourId` are checked before, by
//! [`super::nfvo_instances::admit`] (the instances the NFVO learnt from its grants).

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Error;
use crate::grant::{
    ConstraintIdType, Grant, GrantRequest, GrantedLcmOperationType, Link, ResourceType,
};
use crate::id::{GrantId, HostId, VduId, ZoneId};
use crate::lcm::{InstantiatedVnfInfo, VnfInstance, VnfcResourceInfo};
use crate::package::Flavour;
use crate::placement::{PlacementError, Selection};
use crate::zone::ComputeZone;

use super::granter::{grant, GrantContext, GrantError};

/// The most entries of each resource list of a request (`addResources`, `tempResources`,
/// `removeResources`, `updateResources`).
pub const MAX_GRANT_RESOURCES: usize = 1_000;
/// The most `placementConstraints` (and the most `vimConstraints`) of a request.
pub const MAX_PLACEMENT_CONSTRAINTS: usize = 1_000;
/// The most resource references of one constraint.
pub const MAX_CONSTRAINT_RESOURCES: usize = 1_000;
/// The most distinct `RES_MGMT` references ([`res_mgmt_references`]) of a request, all its
/// `placementConstraints` together: the caller looks each up in its VIM (one request to Nova
/// each), so this bounds the work one grant request makes the NFVO do. The per-list limits
/// alone would let [`MAX_PLACEMENT_CONSTRAINTS`] × [`MAX_CONSTRAINT_RESOURCES`] (a million)
/// through.
pub const MAX_RES_MGMT_REFERENCES: usize = MAX_GRANT_RESOURCES;

/// The field a [`GrantRefusal::TooMany`] over [`MAX_RES_MGMT_REFERENCES`] names.
pub const RES_MGMT_REFERENCES_FIELD: &str =
    "placementConstraints[*].resource[*] (distinct RES_MGMT resourceIds)";

/// Where a resource that a `RES_MGMT` reference names runs, as the VIM says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// Its zone.
    pub zone: ZoneId,
    /// Its compute host, when the VIM shows it.
    pub host: Option<HostId>,
}

/// Everything [`decide`] needs besides the request.
#[derive(Clone, Debug)]
pub struct GrantorContext<'a> {
    /// The grant's id.
    pub grant_id: GrantId,
    /// The zone catalogue (with free capacity when known).
    pub zones: &'a [ComputeZone],
    /// The resources of `RES_MGMT` references that the VIM knows, by `resourceId`.
    pub located: &'a BTreeMap<String, Located>,
    /// The flavour of the request's VNFD when the NFVO has its package (the demand of each
    /// VDU); `None` counts every VNFC as zero.
    pub flavour: Option<&'a Flavour>,
    /// The zone selection policy.
    pub selection: Selection,
    /// The seed of random choices.
    pub seed: u64,
    /// The grant's `_links.self.href`.
    pub self_href: String,
}

/// Why a grant request is not granted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantRefusal {
    /// A list longer than its limit (HTTP 422).
    #[error("{field} has {count} entries; at most {max} are accepted")]
    TooMany {
        /// The list (`addResources`, `placementConstraints[2].resource`, ...).
        field: String,
        /// Its length.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The request breaks a rule of SOL003's data model (HTTP 422).
    #[error("{field}: {detail}")]
    Invalid {
        /// The field path.
        field: String,
        /// What is wrong and what was expected.
        detail: String,
    },
    /// The NFVO does not grant it (HTTP 403): a reference it cannot resolve, or no placement.
    #[error("{field}: {detail}")]
    Rejected {
        /// The field path.
        field: String,
        /// Why.
        detail: String,
    },
}

impl GrantRefusal {
    /// The HTTP status of the refusal: 422 for [`GrantRefusal::TooMany`] and
    /// [`GrantRefusal::Invalid`], 403 for [`GrantRefusal::Rejected`].
    pub fn status(&self) -> u16 {
        match self {
            GrantRefusal::TooMany { .. } | GrantRefusal::Invalid { .. } => 422,
            GrantRefusal::Rejected { .. } => 403,
        }
    }

    /// The field the refusal names.
    pub fn field(&self) -> &str {
        match self {
            GrantRefusal::TooMany { field, .. }
            | GrantRefusal::Invalid { field, .. }
            | GrantRefusal::Rejected { field, .. } => field,
        }
    }
}

/// Checks the request's lists against [`MAX_GRANT_RESOURCES`], [`MAX_PLACEMENT_CONSTRAINTS`]
/// and [`MAX_CONSTRAINT_RESOURCES`], and its distinct `RES_MGMT` references against
/// [`MAX_RES_MGMT_REFERENCES`] (the field [`RES_MGMT_REFERENCES_FIELD`]).
///
/// # Errors
/// [`GrantRefusal::TooMany`] naming the first list beyond its limit.
pub fn check_limits(request: &GrantRequest) -> Result<(), GrantRefusal> {
    let too_many = |field: String, count: usize, max: usize| {
        if count > max {
            Err(GrantRefusal::TooMany { field, count, max })
        } else {
            Ok(())
        }
    };
    for (name, list) in [
        ("addResources", &request.add_resources),
        ("tempResources", &request.temp_resources),
        ("removeResources", &request.remove_resources),
        ("updateResources", &request.update_resources),
    ] {
        too_many(name.to_owned(), list.len(), MAX_GRANT_RESOURCES)?;
    }
    too_many(
        "placementConstraints".into(),
        request.placement_constraints.len(),
        MAX_PLACEMENT_CONSTRAINTS,
    )?;
    too_many(
        "vimConstraints".into(),
        request.vim_constraints.len(),
        MAX_PLACEMENT_CONSTRAINTS,
    )?;
    for (i, c) in request.placement_constraints.iter().enumerate() {
        too_many(
            format!("placementConstraints[{i}].resource"),
            c.resource.len(),
            MAX_CONSTRAINT_RESOURCES,
        )?;
    }
    for (i, c) in request.vim_constraints.iter().enumerate() {
        too_many(
            format!("vimConstraints[{i}].resource"),
            c.resource.len(),
            MAX_CONSTRAINT_RESOURCES,
        )?;
    }
    // Counted over borrowed ids: at most the references checked above.
    let distinct: BTreeSet<&str> = request
        .placement_constraints
        .iter()
        .flat_map(|c| &c.resource)
        .filter(|r| r.id_type == ConstraintIdType::ResMgmt)
        .map(|r| r.resource_id.as_str())
        .collect();
    too_many(
        RES_MGMT_REFERENCES_FIELD.to_owned(),
        distinct.len(),
        MAX_RES_MGMT_REFERENCES,
    )
}

/// The `resourceId` of every `RES_MGMT` reference of the request's `placementConstraints`:
/// the resources the caller locates in its VIM before [`decide`].
pub fn res_mgmt_references(request: &GrantRequest) -> BTreeSet<String> {
    request
        .placement_constraints
        .iter()
        .flat_map(|c| &c.resource)
        .filter(|r| r.id_type == ConstraintIdType::ResMgmt)
        .map(|r| r.resource_id.clone())
        .collect()
}

/// The checks of [`decide`] that need no VIM: [`check_limits`], the request's own rules
/// (`GrantRequest::validate`), and the VDU of every `COMPUTE` resource to add (its `vduId`,
/// else the VDU its `resourceTemplateId` names, which must be one of `flavour` when the
/// package is known). An NFVO that decides later (an asynchronous grant,
/// [`super::approval`]) refuses a request that fails them at once rather than keeping it.
///
/// # Errors
/// [`GrantRefusal::TooMany`] or [`GrantRefusal::Invalid`] naming the field.
pub fn check_request(
    request: &GrantRequest,
    flavour: Option<&Flavour>,
) -> Result<(), GrantRefusal> {
    check_limits(request)?;
    check_rules(request)?;
    with_vdu_ids(request, flavour).map(|_| ())
}

fn check_rules(request: &GrantRequest) -> Result<(), GrantRefusal> {
    request.validate().map_err(invalid)
}

/// Decides `request` (see the module docs).
///
/// # Errors
/// A [`GrantRefusal`] naming the field at fault.
pub fn decide(request: &GrantRequest, ctx: &GrantorContext<'_>) -> Result<Grant, GrantRefusal> {
    check_limits(request)?;
    check_references(request, ctx)?;
    check_rules(request)?;
    let request = &with_vdu_ids(request, ctx.flavour)?;
    let (placed_request, ignored) = placed_only(request);
    let instance = located_instance(request, ctx.located);
    let empty = Flavour::empty(request.flavour_id.clone().unwrap_or_default());
    let flavour = ctx.flavour.unwrap_or(&empty);
    let (pins, names) = healed_in_place(request, ctx.located);
    let gctx = GrantContext {
        grant_id: ctx.grant_id.clone(),
        flavour,
        instance: &instance,
        zones: ctx.zones,
        pinned: &pins,
        vnfc_names: &names,
        selection: ctx.selection,
        seed: ctx.seed,
    };
    let (mut g, _) = grant(&placed_request, &gctx).map_err(|e| refusal(request, e))?;
    g.links
        .insert("self".into(), Link::new(ctx.self_href.clone()));
    let params = g.additional_params.get_or_insert_with(Default::default);
    params.insert(
        "vduDemand".into(),
        match ctx.flavour {
            Some(f) => format!(
                "the virtual compute of each VDU in the VNFD {} (flavour {})",
                request.vnfd_id, f.id
            ),
            None => format!(
                "unknown: this NFVO has no package of VNFD {}; every VNFC counted as zero, the \
                 zones ranked by their free capacity alone",
                request.vnfd_id
            ),
        }
        .into(),
    );
    if !ignored.is_empty() {
        params.insert(
            "ignoredPlacementConstraintMembers".into(),
            ignored.into_iter().map(serde_json::Value::String).collect(),
        );
    }
    Ok(g)
}

/// The request with a `vduId` on every `COMPUTE` resource to add: one without is the VDU its
/// `resourceTemplateId` names. In a SOL001 VNFD the virtual compute descriptor of a VDU is
/// the `tosca.nodes.nfv.Vdu.Compute` node itself, so the template id of a VNFC's compute is
/// its VDU's id; Tacker (16.0.0) sends its COMPUTE resources that way, `resourceTemplateId`
/// alone. When the package of the request is known (`flavour`), the VDU must be one of the
/// flavour's, else [`GrantRefusal::Invalid`] naming `addResources[i].vduId`.
///
/// # Errors
/// That [`GrantRefusal::Invalid`].
pub fn with_vdu_ids(
    request: &GrantRequest,
    flavour: Option<&Flavour>,
) -> Result<GrantRequest, GrantRefusal> {
    let mut out = request.clone();
    for (i, r) in out.add_resources.iter_mut().enumerate() {
        if r.type_ != ResourceType::Compute || r.vdu_id.is_some() {
            continue;
        }
        let vdu = VduId::from(r.resource_template_id.as_str());
        if let Some(f) = flavour.filter(|f| f.vdu(&vdu).is_none()) {
            return Err(GrantRefusal::Invalid {
                field: format!("addResources[{i}].vduId"),
                detail: format!(
                    "COMPUTE resource {:?} has no vduId and its resourceTemplateId {:?} is no \
                     VDU of flavour {} of VNFD {}; expected the VDU it is a VNFC of",
                    r.id, r.resource_template_id, f.id, request.vnfd_id
                ),
            });
        }
        r.vdu_id = Some(vdu);
    }
    Ok(out)
}

/// The servers a `HEAL` request replaces: the `resource.resourceId` of each `COMPUTE` entry
/// of `removeResources` (at most [`MAX_GRANT_RESOURCES`]). The caller locates them in its VIM
/// with the [`res_mgmt_references`], into [`GrantorContext::located`].
pub fn healed_references(request: &GrantRequest) -> BTreeSet<String> {
    if request.operation != GrantedLcmOperationType::Heal {
        return BTreeSet::new();
    }
    removed_servers(request)
}

/// The VIM resource ids (`resource.resourceId`) of the `COMPUTE` entries of `removeResources`
/// (at most [`MAX_GRANT_RESOURCES`]): the servers a heal replaces or a scale-in removes.
pub fn removed_servers(request: &GrantRequest) -> BTreeSet<String> {
    request
        .remove_resources
        .iter()
        .filter(|r| r.type_ == ResourceType::Compute)
        .filter_map(|r| r.resource.as_ref())
        .map(|h| h.resource_id.clone())
        .collect()
}

/// A `HEAL` re-creates each VNFC where it runs: the n-th `COMPUTE` resource to add of a VDU
/// replaces the n-th `COMPUTE` resource removed of that VDU, and is pinned to the zone the VIM
/// shows that server in (`located`; one it does not show is placed as any new VNFC). Tacker
/// (16.0.0, StandardUserData) re-creates a healed VNFC in its old zone whatever the grant
/// says, and a heal restores a VNFC rather than moves it. Returns the granter's pins and the
/// names they are keyed by (each new resource's own id).
fn healed_in_place(
    request: &GrantRequest,
    located: &BTreeMap<String, Located>,
) -> (BTreeMap<String, ZoneId>, BTreeMap<String, String>) {
    let mut pins = BTreeMap::new();
    let mut names = BTreeMap::new();
    if request.operation != GrantedLcmOperationType::Heal {
        return (pins, names);
    }
    let vdu_of = |r: &crate::grant::ResourceDefinition| {
        r.vdu_id
            .as_ref()
            .map_or(r.resource_template_id.clone(), |v| v.as_str().to_owned())
    };
    let mut removed: BTreeMap<String, Vec<Option<&Located>>> = BTreeMap::new();
    for r in request
        .remove_resources
        .iter()
        .filter(|r| r.type_ == ResourceType::Compute)
    {
        let at = r
            .resource
            .as_ref()
            .and_then(|h| located.get(&h.resource_id));
        removed.entry(vdu_of(r)).or_default().push(at);
    }
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    for r in request
        .add_resources
        .iter()
        .filter(|r| r.type_ == ResourceType::Compute)
    {
        let vdu = vdu_of(r);
        let n = taken.entry(vdu.clone()).or_default();
        let at = removed.get(&vdu).and_then(|v| v.get(*n)).copied().flatten();
        *n += 1;
        if let Some(at) = at {
            pins.insert(r.id.clone(), at.zone.clone());
            names.insert(r.id.clone(), r.id.clone());
        }
    }
    (pins, names)
}

/// A `GRANT` reference to a definition the request does not have, or a `RES_MGMT` reference
/// the VIM does not know: rejected.
fn check_references(request: &GrantRequest, ctx: &GrantorContext<'_>) -> Result<(), GrantRefusal> {
    let defined: BTreeSet<&str> = request
        .resource_definitions()
        .map(|d| d.id.as_str())
        .collect();
    for (ci, c) in request.placement_constraints.iter().enumerate() {
        for (ri, r) in c.resource.iter().enumerate() {
            let field = format!("placementConstraints[{ci}].resource[{ri}].resourceId");
            match r.id_type {
                ConstraintIdType::Grant if !defined.contains(r.resource_id.as_str()) => {
                    return Err(GrantRefusal::Rejected {
                        field,
                        detail: format!(
                            "GRANT reference {:?} names no resource definition of this grant \
                             request; expected the id of an entry of addResources, \
                             tempResources, removeResources or updateResources",
                            r.resource_id
                        ),
                    });
                }
                ConstraintIdType::ResMgmt if !ctx.located.contains_key(&r.resource_id) => {
                    return Err(GrantRefusal::Rejected {
                        field,
                        detail: format!(
                            "RES_MGMT reference {:?} is no resource this NFVO's VIM knows, so \
                             where it runs cannot be told; expected the VIM id of an existing \
                             server",
                            r.resource_id
                        ),
                    });
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The request with its constraints reduced to the members the solver places or knows (new
/// `COMPUTE` resources, located `RES_MGMT` resources), constraints of fewer than two members
/// dropped; and one sentence per member or constraint left out.
fn placed_only(request: &GrantRequest) -> (GrantRequest, Vec<String>) {
    let compute: BTreeSet<&str> = request
        .add_resources
        .iter()
        .filter(|r| r.type_ == ResourceType::Compute)
        .map(|r| r.id.as_str())
        .collect();
    let mut out = request.clone();
    let mut ignored = Vec::new();
    out.placement_constraints.clear();
    for (ci, c) in request.placement_constraints.iter().enumerate() {
        let mut kept = c.clone();
        kept.resource.clear();
        for (ri, r) in c.resource.iter().enumerate() {
            if r.id_type == ConstraintIdType::Grant && !compute.contains(r.resource_id.as_str()) {
                ignored.push(format!(
                    "placementConstraints[{ci}].resource[{ri}]: {:?} is no COMPUTE resource of \
                     addResources, which is all this grant places",
                    r.resource_id
                ));
            } else {
                kept.resource.push(r.clone());
            }
        }
        if kept.resource.len() < 2 {
            ignored.push(format!(
                "placementConstraints[{ci}]: fewer than two members are placed or known, so it \
                 constrains nothing"
            ));
        } else {
            out.placement_constraints.push(kept);
        }
    }
    (out, ignored)
}

/// An instance whose VNFCs are the located resources the request's `RES_MGMT` references
/// name: what the local granter reads their zone and host from.
fn located_instance(request: &GrantRequest, located: &BTreeMap<String, Located>) -> VnfInstance {
    let vnfcs = res_mgmt_references(request)
        .into_iter()
        .filter_map(|id| {
            let at = located.get(&id)?;
            let mut metadata = crate::grant::KeyValuePairs::new();
            if let Some(h) = &at.host {
                metadata.insert("host".into(), h.as_str().into());
            }
            Some(VnfcResourceInfo {
                id: id.clone(),
                compute_resource: crate::grant::ResourceHandle::new(id),
                zone_id: Some(at.zone.clone()),
                metadata: (!metadata.is_empty()).then_some(metadata),
                ..VnfcResourceInfo::default()
            })
        })
        .collect();
    VnfInstance {
        instantiated_vnf_info: Some(InstantiatedVnfInfo {
            vnfc_resource_info: vnfcs,
            ..InstantiatedVnfInfo::default()
        }),
        ..VnfInstance::default()
    }
}

fn invalid(e: Error) -> GrantRefusal {
    match e {
        Error::Invalid { location, message } => GrantRefusal::Invalid {
            field: location.field.unwrap_or_else(|| "(request)".into()),
            detail: message,
        },
        other => GrantRefusal::Invalid {
            field: "(request)".into(),
            detail: other.to_string(),
        },
    }
}

fn refusal(request: &GrantRequest, e: GrantError) -> GrantRefusal {
    match e {
        GrantError::Invalid(e) => invalid(e),
        GrantError::Placement(p) => {
            let field = match &p {
                PlacementError::Infeasible { constraints, .. } if !constraints.is_empty() => {
                    constraints.join(", ")
                }
                _ if request.placement_constraints.is_empty() => "addResources".into(),
                PlacementError::CapacityExhausted { .. }
                | PlacementError::NoCandidateZone { .. } => "addResources".into(),
                _ => "placementConstraints".into(),
            };
            GrantRefusal::Rejected {
                field,
                detail: format!("no placement: {p}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::{
        AffinityOrAntiAffinity, ConstraintResourceRef, ConstraintScope, GrantedLcmOperationType,
        PlacementConstraint, ResourceDefinition,
    };
    use crate::zone::{ComputeHost, Resources};

    fn zone(name: &str, hosts: usize, free_vcpus: u64) -> ComputeZone {
        ComputeZone {
            name: name.into(),
            available: true,
            hosts: Some(
                (0..hosts)
                    .map(|i| ComputeHost {
                        name: format!("{name}-h{i}").into(),
                        available: true,
                        free: Some(Resources::new(free_vcpus, 65536, 1000)),
                    })
                    .collect(),
            ),
        }
    }

    fn zones() -> Vec<ComputeZone> {
        vec![zone("AZ-1", 2, 8), zone("AZ-2", 2, 32)]
    }

    fn compute(id: &str) -> ResourceDefinition {
        ResourceDefinition::new(id, ResourceType::Compute, "VDU1").with_vdu_id("VDU1")
    }

    fn request(n: usize) -> GrantRequest {
        let mut r = GrantRequest::new(
            "inst-x",
            "op-x",
            "vnfd-x",
            GrantedLcmOperationType::Instantiate,
        )
        .with_link("vnfLcmOpOcc", "http://vnfm/op-x")
        .with_link("vnfInstance", "http://vnfm/inst-x");
        for i in 0..n {
            r = r.with_add_resource(compute(&format!("c{i}")));
        }
        r
    }

    fn refs(ids: &[&str]) -> Vec<ConstraintResourceRef> {
        ids.iter()
            .map(|i| ConstraintResourceRef::grant(*i))
            .collect()
    }

    fn anti(scope: ConstraintScope, ids: &[&str], best_effort: bool) -> PlacementConstraint {
        PlacementConstraint::new(AffinityOrAntiAffinity::AntiAffinity, scope, refs(ids))
            .with_fallback_best_effort(best_effort)
    }

    fn decide_with(
        r: &GrantRequest,
        zones: &[ComputeZone],
        located: &BTreeMap<String, Located>,
    ) -> Result<Grant, GrantRefusal> {
        decide(
            r,
            &GrantorContext {
                grant_id: "g-1".into(),
                zones,
                located,
                flavour: None,
                selection: Selection::CapacityAware,
                seed: 7,
                self_href: "/grant/v1/grants/g-1".into(),
            },
        )
    }

    fn zone_of(g: &Grant, id: &str) -> String {
        g.zone_of(id)
            .map(|z| z.as_str().to_owned())
            .unwrap_or_default()
    }

    #[test]
    fn every_compute_resource_gets_a_zone_of_the_catalogue_and_removals_are_acknowledged() {
        let mut r = request(2);
        r.remove_resources.push(
            ResourceDefinition::new("old-1", ResourceType::Compute, "VDU1")
                .with_resource(crate::grant::ResourceHandle::new("server-9")),
        );
        let g = decide_with(&r, &zones(), &BTreeMap::new()).unwrap();
        assert_eq!(g.id.as_str(), "g-1");
        assert_eq!(g.vnf_lcm_op_occ_id.as_str(), "op-x");
        for c in ["c0", "c1"] {
            assert!(["AZ-1", "AZ-2"].contains(&zone_of(&g, c).as_str()), "{g:?}");
        }
        // Capacity-aware: the zone with the most free capacity.
        assert_eq!(zone_of(&g, "c0"), "AZ-2");
        assert_eq!(g.remove_resources.len(), 1);
        assert_eq!(g.remove_resources[0].resource_definition_id, "old-1");
        assert_eq!(g.links["self"].href, "/grant/v1/grants/g-1");
        assert_eq!(g.links["vnfInstance"].href, "http://vnfm/inst-x");
        g.validate().unwrap();
        let demand = &g.additional_params.as_ref().unwrap()["vduDemand"];
        assert!(demand.as_str().unwrap().contains("vnfd-x"), "{demand}");
    }

    #[test]
    fn zone_anti_affinity_spreads_and_node_anti_affinity_may_share_a_zone() {
        let r =
            request(2).with_placement_constraint(anti(ConstraintScope::Zone, &["c0", "c1"], false));
        let g = decide_with(&r, &zones(), &BTreeMap::new()).unwrap();
        assert_ne!(zone_of(&g, "c0"), zone_of(&g, "c1"));
        // Two hosts per zone: NFVI_NODE anti-affinity of two fits in the best zone.
        let r = request(2).with_placement_constraint(anti(
            ConstraintScope::NfviNode,
            &["c0", "c1"],
            false,
        ));
        let g = decide_with(&r, &zones(), &BTreeMap::new()).unwrap();
        assert_eq!(zone_of(&g, "c0"), "AZ-2");
        assert_eq!(zone_of(&g, "c1"), "AZ-2");
    }

    #[test]
    fn an_unsatisfiable_hard_constraint_is_rejected_naming_it_and_best_effort_relaxes_it() {
        let ids = ["c0", "c1", "c2"];
        let r = request(3).with_placement_constraint(anti(ConstraintScope::Zone, &ids, false));
        let e = decide_with(&r, &zones(), &BTreeMap::new()).unwrap_err();
        assert_eq!(e.status(), 403);
        assert_eq!(e.field(), "placementConstraints[0]", "{e}");
        assert!(e.to_string().contains("no placement"), "{e}");
        let r = request(3).with_placement_constraint(anti(ConstraintScope::Zone, &ids, true));
        let g = decide_with(&r, &zones(), &BTreeMap::new()).unwrap();
        assert_eq!(g.add_resources.len(), 3);
        let params = g.additional_params.unwrap();
        assert!(
            params.contains_key("relaxedPlacementConstraints"),
            "{params:?}"
        );
    }

    #[test]
    fn unknown_references_are_rejected_naming_the_field() {
        let r = request(2).with_placement_constraint(anti(
            ConstraintScope::Zone,
            &["c0", "nope"],
            true,
        ));
        let e = decide_with(&r, &zones(), &BTreeMap::new()).unwrap_err();
        assert_eq!(e.status(), 403);
        assert_eq!(e.field(), "placementConstraints[0].resource[1].resourceId");
        assert!(e.to_string().contains("\"nope\""), "{e}");
        let mut c = anti(ConstraintScope::Zone, &["c0"], false);
        c.resource.push(ConstraintResourceRef::res_mgmt("server-1"));
        let r = request(1).with_placement_constraint(c);
        let e = decide_with(&r, &zones(), &BTreeMap::new()).unwrap_err();
        assert_eq!(e.field(), "placementConstraints[0].resource[1].resourceId");
        assert!(e.to_string().contains("server-1"), "{e}");
    }

    #[test]
    fn a_located_existing_resource_is_kept_apart_from_under_anti_affinity() {
        let mut c = anti(ConstraintScope::Zone, &["c0"], false);
        c.resource.push(ConstraintResourceRef::res_mgmt("server-1"));
        let r = request(1).with_placement_constraint(c);
        assert_eq!(
            res_mgmt_references(&r).into_iter().collect::<Vec<_>>(),
            vec!["server-1".to_owned()]
        );
        let located: BTreeMap<String, Located> = [(
            "server-1".to_owned(),
            Located {
                zone: "AZ-2".into(),
                host: Some("AZ-2-h0".into()),
            },
        )]
        .into_iter()
        .collect();
        let g = decide_with(&r, &zones(), &located).unwrap();
        // AZ-2 has more free capacity, but server-1 runs there.
        assert_eq!(zone_of(&g, "c0"), "AZ-1");
    }

    #[test]
    fn limits_and_invalid_requests_are_422_naming_the_field() {
        let r = request(MAX_GRANT_RESOURCES + 1);
        let e = decide_with(&r, &zones(), &BTreeMap::new()).unwrap_err();
        assert_eq!(e.status(), 422);
        assert_eq!(
            e,
            GrantRefusal::TooMany {
                field: "addResources".into(),
                count: MAX_GRANT_RESOURCES + 1,
                max: MAX_GRANT_RESOURCES
            }
        );
        let mut r = request(1);
        r.links.remove("vnfInstance");
        let e = decide_with(&r, &zones(), &BTreeMap::new()).unwrap_err();
        assert_eq!(e.status(), 422);
        assert!(e.to_string().contains("vnfInstance"), "{e}");
    }

    #[test]
    fn distinct_res_mgmt_references_are_capped_over_all_constraints() {
        // Two constraints, each within MAX_CONSTRAINT_RESOURCES, together one reference over
        // the cap; a reference repeated in both counts once.
        let half = MAX_RES_MGMT_REFERENCES / 2 + 1;
        let constraint = |from: usize| {
            let mut c = anti(ConstraintScope::Zone, &["c0"], true);
            c.resource.extend(
                (from..from + half).map(|i| ConstraintResourceRef::res_mgmt(format!("s{i}"))),
            );
            c
        };
        let over = request(1)
            .with_placement_constraint(constraint(0))
            .with_placement_constraint(constraint(half));
        let total = 2 * half;
        assert!(total > MAX_RES_MGMT_REFERENCES);
        assert_eq!(
            check_limits(&over),
            Err(GrantRefusal::TooMany {
                field: RES_MGMT_REFERENCES_FIELD.into(),
                count: total,
                max: MAX_RES_MGMT_REFERENCES
            })
        );
        let e = decide_with(&over, &zones(), &BTreeMap::new()).unwrap_err();
        assert_eq!(e.status(), 422);
        assert!(e.field().starts_with("placementConstraints"), "{e}");
        // The same references twice over: within the cap.
        let repeated = request(1)
            .with_placement_constraint(constraint(0))
            .with_placement_constraint(constraint(0));
        assert_eq!(check_limits(&repeated), Ok(()));
        assert_eq!(res_mgmt_references(&repeated).len(), half);
    }

    #[test]
    fn members_not_placed_here_are_left_out_and_said() {
        let mut r = request(1);
        r.remove_resources.push(ResourceDefinition::new(
            "gone",
            ResourceType::Compute,
            "VDU1",
        ));
        let r = r.with_placement_constraint(anti(ConstraintScope::Zone, &["c0", "gone"], false));
        let g = decide_with(&r, &zones(), &BTreeMap::new()).unwrap();
        let params = g.additional_params.unwrap();
        let ignored = params["ignoredPlacementConstraintMembers"]
            .as_array()
            .unwrap();
        assert_eq!(ignored.len(), 2, "{ignored:?}");
        assert!(ignored[0].as_str().unwrap().contains("\"gone\""));
    }

    #[test]
    fn no_zone_at_all_is_rejected_on_add_resources() {
        let e = decide_with(&request(1), &[], &BTreeMap::new()).unwrap_err();
        assert_eq!((e.status(), e.field()), (403, "addResources"));
        // Nothing to add needs no zone.
        let g = decide_with(&request(0), &[], &BTreeMap::new()).unwrap();
        assert!(g.zones.is_empty());
    }

    /// Tacker 16.0.0 sends a COMPUTE resource with `resourceTemplateId` (the VDU) and no
    /// `vduId`: it was refused 422, so no Tacker instantiate could be granted.
    #[test]
    fn a_compute_resource_without_vdu_id_is_the_vdu_its_resource_template_id_names() {
        let mut r = request(2);
        for a in &mut r.add_resources {
            a.vdu_id = None;
        }
        r.placement_constraints
            .push(anti(ConstraintScope::Zone, &["c0", "c1"], false));
        let g = decide_with(&r, &zones(), &BTreeMap::new()).unwrap();
        assert_eq!(g.add_resources.len(), 2);
        assert_ne!(zone_of(&g, "c0"), zone_of(&g, "c1"));

        // With the package known, the template must name one of the flavour's VDUs.
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/demo-vnf");
        let package = crate::package::fs::load(&dir).unwrap();
        let flavour = package.flavour("default").unwrap().clone();
        let mut r = request(1);
        r.add_resources[0].vdu_id = None;
        r.add_resources[0].resource_template_id = "VDU9".into();
        let located = BTreeMap::new();
        let ctx = GrantorContext {
            grant_id: "g-2".into(),
            zones: &zones(),
            located: &located,
            flavour: Some(&flavour),
            selection: Selection::CapacityAware,
            seed: 7,
            self_href: "/grant/v1/grants/g-2".into(),
        };
        let e = decide(&r, &ctx).unwrap_err();
        assert_eq!((e.status(), e.field()), (422, "addResources[0].vduId"));
        assert!(e.to_string().contains("VDU9"), "{e}");
        r.add_resources[0].resource_template_id = "VDU1".into();
        let g = decide(&r, &ctx).unwrap();
        assert_eq!(g.add_resources.len(), 1);
    }

    /// Tacker re-creates a healed VNFC in the zone it ran in, whatever the grant says: the
    /// heal grant placed it by free capacity (another zone), so the grant and the cloud
    /// disagreed after every heal.
    #[test]
    fn a_healed_vnfc_is_granted_the_zone_its_removed_server_runs_in() {
        let mut r = GrantRequest::new("inst-x", "op-h", "vnfd-x", GrantedLcmOperationType::Heal)
            .with_link("vnfLcmOpOcc", "http://vnfm/op-h")
            .with_link("vnfInstance", "http://vnfm/inst-x");
        for (old, new) in [("old-0", "new-0"), ("old-1", "new-1")] {
            r.remove_resources.push(
                ResourceDefinition::new(old, ResourceType::Compute, "VDU1")
                    .with_resource(crate::grant::ResourceHandle::new(format!("server-{old}"))),
            );
            r.add_resources
                .push(ResourceDefinition::new(new, ResourceType::Compute, "VDU1"));
        }
        assert_eq!(
            healed_references(&r),
            ["server-old-0", "server-old-1"]
                .map(String::from)
                .into_iter()
                .collect()
        );
        // AZ-2 has the most free capacity: without the removed servers' zones, both go there.
        let unlocated = decide_with(&r, &zones(), &BTreeMap::new()).unwrap();
        assert_eq!(zone_of(&unlocated, "new-0"), "AZ-2");
        let located: BTreeMap<String, Located> =
            [("server-old-0", "AZ-1"), ("server-old-1", "AZ-2")]
                .into_iter()
                .map(|(s, z)| {
                    (
                        s.to_owned(),
                        Located {
                            zone: z.into(),
                            host: None,
                        },
                    )
                })
                .collect();
        let g = decide_with(&r, &zones(), &located).unwrap();
        assert_eq!(zone_of(&g, "new-0"), "AZ-1");
        assert_eq!(zone_of(&g, "new-1"), "AZ-2");
        assert_eq!(g.remove_resources.len(), 2);
        // Another operation's removals pin nothing.
        r.operation = GrantedLcmOperationType::Scale;
        assert!(healed_references(&r).is_empty());
        let g = decide_with(&r, &zones(), &located).unwrap();
        assert_eq!(zone_of(&g, "new-0"), "AZ-2");
    }
}
