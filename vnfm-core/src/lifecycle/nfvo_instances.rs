//! The instances vnfm knows as the NFVO of the SOL003 Grant interface: it learns another
//! VNFM's instances from the grants it answers ([`super::grantor`]), and refuses a grant
//! request about an instance or a package it does not know.
//!
//! Sans-IO: the caller (`vnfm serve`) reads the registered [`NfvoInstance`] of the request's
//! `vnfInstanceId` and the packages, calls [`admit`] before deciding, and after a grant
//! stores what [`after_grant`] says the registry becomes.
//!
//! # The rules ([`admit`])
//! - `vnfInstanceId`, `vnfLcmOpOccId` and every `addResources[].id` are at most
//!   [`MAX_ID_BYTES`] long (the registry records them), else 422 naming the field.
//! - `vnfdId` must be the VNFD of an onboarded package, else [`GrantRefusal::Invalid`] (422)
//!   naming `vnfdId` and the value (as SOL003's `CreateVnfRequest` answers 422 for an unknown
//!   `vnfdId`). A `CHANGE_VNFPKG` must also name an onboarded `dstVnfdId`.
//! - `flavourId`, when given, must be a flavour of that package (of the `dstVnfdId`'s for a
//!   `CHANGE_VNFPKG`), else 422 naming `flavourId`; an `INSTANTIATE` must give one.
//! - `INSTANTIATE` registers the instance. One already registered is refused (403, naming
//!   `vnfInstanceId`) once any other operation was granted on it: it is instantiated. An
//!   instance whose only grant is its `INSTANTIATE` may be instantiated again, the new grant
//!   replacing the old one: the NFVO does not see whether a granted operation completed, and
//!   Tacker, after a failed instantiate is rolled back or marked failed, instantiates the same
//!   instance again under a new `vnfLcmOpOccId` (its retry of an occurrence does not ask
//!   again). At most [`MAX_NFVO_INSTANCES`] are registered: one more is refused (403).
//! - Any other operation needs the instance registered, else 422 naming `vnfInstanceId`; its
//!   `vnfdId` must be the registered instance's (SOL003: "the vnfdId of the current VNF
//!   package"; a `CHANGE_VNFPKG` names the new one as `dstVnfdId`), else 422 naming `vnfdId`;
//!   a `flavourId` other than the instance's is refused naming `flavourId`, except on a
//!   `CHANGE_FLAVOUR` or a `CHANGE_VNFPKG`.
//!
//! # What a grant changes ([`after_grant`])
//! A granted `INSTANTIATE` registers the instance (its VNFD, flavour, the occurrence, what it
//! drew), a `TERMINATE` removes it, a `CHANGE_VNFPKG` sets its VNFD to `dstVnfdId`, a
//! `CHANGE_FLAVOUR` its flavour; every grant records its occurrence and the draws it made and
//! gave back.
//!
//! # The reservation ([`settle_reservation`])
//! A grant answered under a reservation of the Promise ledger draws from it: every `COMPUTE`
//! resource of the `addResources` of an `INSTANTIATE`, a `SCALE` or a `SCALE_TO_LEVEL`
//! ([`draws_for`]) granted into the reservation's zone draws its VDU's virtual compute
//! ([`super::granter::draw_reservation`], all or nothing), recorded per instance as an
//! [`InstanceDraw`]; a heal (or a change of package, of external connectivity) makes VNFCs
//! again in place of those it removes, which keep their draws. A scale-in gives back the
//! draws of the VNFCs it removes: Tacker (16.0.0,
//! `_make_res_def_for_remove_vnfcs`) names each removed VNFC with a new `id` of its own and
//! the server as `resource.resourceId`, never the `id` of the earlier grant's `addResources`,
//! so a removal is matched by its VDU and the zone its server runs in ([`released_by`]). A
//! `TERMINATE` gives back every draw of the instance; a repeated `INSTANTIATE` those of the
//! grant it replaces.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Location};
use crate::grant::{Grant, GrantRequest, GrantedLcmOperationType, ResourceType};
use crate::id::{IdGen, ZoneId};
use crate::package::{Flavour, VnfPackage};
use crate::reservation::{AllocationId, Ledger, LedgerError, ReservationId};

use super::grantor::{GrantRefusal, Located};

/// The most instances the NFVO registers; an `INSTANTIATE` of one more is refused.
pub const MAX_NFVO_INSTANCES: usize = 10_000;

/// The most draws recorded for one instance (its VNFCs in the reservation's zone); a grant
/// that would record more is refused.
pub const MAX_INSTANCE_DRAWS: usize = 10_000;

/// The longest `vnfInstanceId`, `vnfLcmOpOccId` and `addResources[].id` the registry records,
/// in bytes (Tacker's are 36-character UUIDs); longer is refused naming the field.
pub const MAX_ID_BYTES: usize = 256;

/// The key of a `GrantRequest`'s `additionalParams` naming the reservation its new VNFCs draw
/// from (SOL003's `GrantInfo.reservationId`).
pub use crate::reservation::lcm::RESERVATION_PARAM;

/// An instance of another VNFM, as the NFVO learnt it from the grants it answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NfvoInstance {
    /// `vnfInstanceId`.
    pub id: String,
    /// The VNFD of its current package.
    pub vnfd_id: String,
    /// Its deployment flavour.
    pub flavour_id: String,
    /// The `vnfLcmOpOccId` of the `INSTANTIATE` that registered it.
    pub instantiated_by: String,
    /// The `vnfLcmOpOccId` of the last grant about it.
    pub last_op_occ: String,
    /// How many grants about it were answered since its `INSTANTIATE` (that one excluded).
    pub later_grants: u64,
    /// What its VNFCs drew from the Promise ledger and still hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub draws: Vec<InstanceDraw>,
}

/// What one `COMPUTE` resource granted to an instance drew from a reservation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceDraw {
    /// The `addResources[].id` of the grant request.
    pub resource_id: String,
    /// The VDU of the VNFC.
    pub vdu_id: String,
    /// The zone it was granted.
    pub zone: ZoneId,
    /// The reservation drawn from.
    pub reservation: ReservationId,
    /// The allocation of the ledger.
    pub allocation: AllocationId,
}

/// What [`admit`] needs besides the request.
#[derive(Clone, Copy, Debug)]
pub struct Admission<'a> {
    /// The registered instance of the request's `vnfInstanceId`, if any.
    pub registered: Option<&'a NfvoInstance>,
    /// How many instances are registered.
    pub registered_count: usize,
    /// The package of the request's `vnfdId`, when onboarded.
    pub package: Option<&'a VnfPackage>,
    /// The package of the request's `dstVnfdId`, when given and onboarded.
    pub dst_package: Option<&'a VnfPackage>,
}

/// What [`admit`] found: the flavour the decision counts the VNFCs' demand by.
#[derive(Clone, Copy, Debug)]
pub struct Admitted<'a> {
    /// The flavour of the package the added VNFCs belong to.
    pub flavour: &'a Flavour,
}

fn invalid(field: &str, detail: String) -> GrantRefusal {
    GrantRefusal::Invalid {
        field: field.to_owned(),
        detail,
    }
}

fn rejected(field: &str, detail: String) -> GrantRefusal {
    GrantRefusal::Rejected {
        field: field.to_owned(),
        detail,
    }
}

fn unknown_vnfd(field: &str, id: &str) -> GrantRefusal {
    invalid(
        field,
        format!(
            "{id:?} is the VNFD of no package onboarded in this NFVO; expected the vnfdId of one \
             of its packages (GET /vnfpkgm/v2/onboarded_vnf_packages/{{vnfdId}}, [packages] dir)"
        ),
    )
}

/// Whether the NFVO takes `request` (see the module docs), and the flavour its decision
/// counts by.
///
/// # Errors
/// [`GrantRefusal::Invalid`] (422) or [`GrantRefusal::Rejected`] (403) naming the field and
/// the value.
pub fn admit<'a>(request: &GrantRequest, a: &Admission<'a>) -> Result<Admitted<'a>, GrantRefusal> {
    check_id_lengths(request)?;
    let Some(package) = a.package else {
        return Err(unknown_vnfd("vnfdId", &request.vnfd_id));
    };
    let op = request.operation;
    let target = if op == GrantedLcmOperationType::ChangeVnfpkg {
        let Some(dst) = request.dst_vnfd_id.as_deref() else {
            return Err(invalid(
                "dstVnfdId",
                "is missing; a CHANGE_VNFPKG grant request names the VNFD of the package it \
                 changes to"
                    .into(),
            ));
        };
        a.dst_package
            .ok_or_else(|| unknown_vnfd("dstVnfdId", dst))?
    } else {
        package
    };
    let instance = request.vnf_instance_id.as_str();
    check_instance(request, a)?;
    let flavour_id = match (request.flavour_id.as_deref(), a.registered) {
        (Some(f), _) => f.to_owned(),
        (None, Some(r)) if op != GrantedLcmOperationType::Instantiate => r.flavour_id.clone(),
        (None, _) => {
            return Err(invalid(
                "flavourId",
                format!(
                    "is missing; an INSTANTIATE grant request names the deployment flavour of \
                     VNFD {} (one of: {})",
                    request.vnfd_id,
                    flavours(target)
                ),
            ))
        }
    };
    let flavour = target.flavour(&flavour_id).ok_or_else(|| {
        invalid(
            "flavourId",
            format!(
                "{flavour_id:?} is no deployment flavour of VNFD {}; expected one of: {}",
                target.descriptor_id,
                flavours(target)
            ),
        )
    })?;
    if let Some(r) = a.registered {
        let changes_flavour = matches!(
            op,
            GrantedLcmOperationType::Instantiate
                | GrantedLcmOperationType::ChangeFlavour
                | GrantedLcmOperationType::ChangeVnfpkg
        );
        if !changes_flavour && flavour_id != r.flavour_id {
            return Err(invalid(
                "flavourId",
                format!(
                    "{flavour_id:?} is not the flavour of instance {instance:?}, which is {:?}; \
                     only a CHANGE_FLAVOUR or a CHANGE_VNFPKG changes it",
                    r.flavour_id
                ),
            ));
        }
    }
    Ok(Admitted { flavour })
}

fn check_id_lengths(request: &GrantRequest) -> Result<(), GrantRefusal> {
    let ids = [
        ("vnfInstanceId".to_owned(), request.vnf_instance_id.as_str()),
        (
            "vnfLcmOpOccId".to_owned(),
            request.vnf_lcm_op_occ_id.as_str(),
        ),
    ]
    .into_iter()
    .chain(
        request
            .add_resources
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("addResources[{i}].id"), r.id.as_str())),
    );
    for (field, id) in ids {
        if id.len() > MAX_ID_BYTES {
            return Err(invalid(
                &field,
                format!(
                    "has {} bytes; this NFVO records ids of at most {MAX_ID_BYTES}",
                    id.len()
                ),
            ));
        }
    }
    Ok(())
}

/// The rules of [`admit`] on the instance: registered or not, instantiated, its VNFD.
fn check_instance(request: &GrantRequest, a: &Admission<'_>) -> Result<(), GrantRefusal> {
    let instance = request.vnf_instance_id.as_str();
    match (request.operation, a.registered) {
        (GrantedLcmOperationType::Instantiate, Some(r)) if r.later_grants > 0 => Err(rejected(
            "vnfInstanceId",
            format!(
                "instance {instance:?} is already instantiated (granted INSTANTIATE in \
                     {}, then {} more grants, the last in {}); terminate it first",
                r.instantiated_by, r.later_grants, r.last_op_occ
            ),
        )),
        (GrantedLcmOperationType::Instantiate, Some(_)) => Ok(()),
        (GrantedLcmOperationType::Instantiate, None) => {
            if a.registered_count >= MAX_NFVO_INSTANCES {
                return Err(rejected(
                    "vnfInstanceId",
                    format!(
                        "this NFVO already knows {} instances, the most it keeps \
                         ({MAX_NFVO_INSTANCES}); instance {instance:?} is not granted: \
                         terminate some first",
                        a.registered_count
                    ),
                ));
            }
            Ok(())
        }
        (_, None) => Err(invalid(
            "vnfInstanceId",
            format!(
                "{instance:?} is no instance this NFVO granted an INSTANTIATE to (or it was \
                 terminated); expected the id of an instantiated VNF instance"
            ),
        )),
        (_, Some(r)) if r.vnfd_id != request.vnfd_id => Err(invalid(
            "vnfdId",
            format!(
                "{:?} is not the VNFD of instance {instance:?}, which is {:?}; expected the \
                 vnfdId of its current package (a CHANGE_VNFPKG names the new one as \
                 dstVnfdId)",
                request.vnfd_id, r.vnfd_id
            ),
        )),
        (_, Some(_)) => Ok(()),
    }
}

fn flavours(p: &VnfPackage) -> String {
    let names: Vec<&str> = p.flavours.keys().map(String::as_str).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// What the registry entry of the request's instance becomes after a grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistryChange {
    /// Store this entry (new or changed).
    Put(NfvoInstance),
    /// Remove the entry (a `TERMINATE`).
    Remove,
}

/// The registry entry after `request` was granted (see the module docs): `registered` is the
/// entry before, `flavour_id` the flavour [`admit`] took, `drawn` the draws the grant made,
/// `released` the allocations it gave back.
pub fn after_grant(
    request: &GrantRequest,
    registered: Option<&NfvoInstance>,
    flavour_id: &str,
    drawn: Vec<InstanceDraw>,
    released: &BTreeSet<AllocationId>,
) -> RegistryChange {
    let op_occ = request.vnf_lcm_op_occ_id.as_str().to_owned();
    match (request.operation, registered) {
        (GrantedLcmOperationType::Terminate, _) => RegistryChange::Remove,
        (GrantedLcmOperationType::Instantiate, _) | (_, None) => {
            RegistryChange::Put(NfvoInstance {
                id: request.vnf_instance_id.as_str().to_owned(),
                vnfd_id: request.vnfd_id.clone(),
                flavour_id: flavour_id.to_owned(),
                instantiated_by: op_occ.clone(),
                last_op_occ: op_occ,
                later_grants: 0,
                draws: drawn,
            })
        }
        (op, Some(r)) => {
            let mut next = r.clone();
            if op == GrantedLcmOperationType::ChangeVnfpkg {
                if let Some(dst) = &request.dst_vnfd_id {
                    next.vnfd_id.clone_from(dst);
                }
            }
            flavour_id.clone_into(&mut next.flavour_id);
            next.last_op_occ = op_occ;
            next.later_grants = next.later_grants.saturating_add(1);
            next.draws.retain(|d| !released.contains(&d.allocation));
            next.draws.extend(drawn);
            RegistryChange::Put(next)
        }
    }
}

/// The servers a `SCALE` (or `SCALE_TO_LEVEL`) request removes (`resource.resourceId` of each `COMPUTE` entry of
/// `removeResources`, at most `grantor::MAX_GRANT_RESOURCES`), when `registered` holds draws
/// to give back: the caller locates them in its VIM into the `located` of [`released_by`].
pub fn scaled_in_references(
    request: &GrantRequest,
    registered: Option<&NfvoInstance>,
) -> BTreeSet<String> {
    if !gives_back_for(request.operation) || registered.is_none_or(|r| r.draws.is_empty()) {
        return BTreeSet::new();
    }
    super::grantor::removed_servers(request)
}

/// The draws of `registered` a granted `request` gives back: all of them for a `TERMINATE`
/// and for an `INSTANTIATE` that replaces an earlier one; for a `SCALE` or a
/// `SCALE_TO_LEVEL`, one per `COMPUTE`
/// entry of `removeResources`, matched by VDU (`vduId`, else `resourceTemplateId`) and the
/// zone its server runs in (`located`, by `resource.resourceId`), the newest draw first; a
/// server not located is matched by VDU alone, and a removal with no draw of its VDU in its
/// zone gives nothing back (that VNFC drew nothing). Nothing for any other operation (a heal
/// keeps its draws: the VNFC is re-created in its zone).
pub fn released_by(
    request: &GrantRequest,
    registered: Option<&NfvoInstance>,
    located: &BTreeMap<String, Located>,
) -> BTreeSet<AllocationId> {
    let Some(r) = registered else {
        return BTreeSet::new();
    };
    match request.operation {
        GrantedLcmOperationType::Terminate | GrantedLcmOperationType::Instantiate => {
            r.draws.iter().map(|d| d.allocation.clone()).collect()
        }
        op if gives_back_for(op) => {
            let mut out = BTreeSet::new();
            for rm in request
                .remove_resources
                .iter()
                .filter(|x| x.type_ == ResourceType::Compute)
            {
                let vdu = rm
                    .vdu_id
                    .as_ref()
                    .map_or(rm.resource_template_id.as_str(), |v| v.as_str());
                let zone = rm
                    .resource
                    .as_ref()
                    .and_then(|h| located.get(&h.resource_id))
                    .map(|l| &l.zone);
                let found = r.draws.iter().rev().find(|d| {
                    !out.contains(&d.allocation)
                        && d.vdu_id == vdu
                        && zone.is_none_or(|z| *z == d.zone)
                });
                if let Some(d) = found {
                    out.insert(d.allocation.clone());
                }
            }
            out
        }
        _ => BTreeSet::new(),
    }
}

/// The reservation a grant request draws from: its `additionalParams.reservationId`, else
/// `configured` (`[server.grants] reservation`).
///
/// # Errors
/// [`GrantRefusal::Invalid`] naming `additionalParams.reservationId` when it is not a
/// non-empty string.
pub fn requested_reservation(
    request: &GrantRequest,
    configured: Option<&str>,
) -> Result<Option<ReservationId>, GrantRefusal> {
    match crate::reservation::lcm::requested_reservation(
        request.additional_params.as_ref(),
        "GrantRequest",
    ) {
        Ok(Some(r)) => Ok(Some(r)),
        Ok(None) => Ok(configured.map(ReservationId::new)),
        Err(e) => Err(invalid(
            &format!("additionalParams.{RESERVATION_PARAM}"),
            e.to_string(),
        )),
    }
}

/// What [`settle_reservation`] did to the ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settlement {
    /// The draws made, one per `COMPUTE` resource granted into the reservation's zone.
    pub drawn: Vec<InstanceDraw>,
    /// The allocations given back.
    pub released: BTreeSet<AllocationId>,
}

impl Settlement {
    /// Whether the ledger changed.
    pub fn changed(&self) -> bool {
        !self.drawn.is_empty() || !self.released.is_empty()
    }
}

/// Applies a grant to the ledger at `now`: gives back `release` ([`released_by`]) and, with a
/// `reservation`, draws every `COMPUTE` resource of `grant` placed in its zone (`request` with
/// a `vduId` on each, `flavour` their VDUs), tagging them with `reservationId` in the grant.
/// All or nothing: a refusal leaves the ledger and the grant as they were. A reservation in a
/// zone the grant places nothing in draws nothing, and a grant that adds no `COMPUTE`
/// resource does not look at the reservation (a terminate gives back even when the
/// reservation is gone).
///
/// # Errors
/// [`GrantRefusal::Rejected`] (403) naming `additionalParams.reservationId` when the
/// reservation is unknown, not active or has not enough left (the ledger's reason), or when
/// the instance would record more than [`MAX_INSTANCE_DRAWS`] draws;
/// [`GrantRefusal::Invalid`] (422) for a ledger that refuses the inputs.
#[allow(clippy::too_many_arguments)]
pub fn settle_reservation(
    ledger: &mut Ledger,
    ids: &mut IdGen,
    grant: &mut Grant,
    request: &GrantRequest,
    flavour: &Flavour,
    reservation: Option<&ReservationId>,
    registered: Option<&NfvoInstance>,
    release: &BTreeSet<AllocationId>,
    now: DateTime<Utc>,
) -> Result<Settlement, GrantRefusal> {
    let field = format!("additionalParams.{RESERVATION_PARAM}");
    if release.is_empty() && reservation.is_none() {
        return Ok(Settlement::default());
    }
    let mut trial = ledger.clone();
    let mut trial_ids = ids.clone();
    let mut out = Settlement::default();
    for a in release {
        if trial.allocation(a).is_some_and(|x| x.is_live()) {
            trial
                .destroy_instance(a, now)
                .map_err(|e| ledger_refusal(&field, e))?;
            out.released.insert(a.clone());
        }
    }
    let adds = draws_for(request.operation)
        && request
            .add_resources
            .iter()
            .any(|r| r.type_ == ResourceType::Compute);
    // A grant that adds no VNFC (a scale-in, a terminate) or re-creates them (a heal) draws
    // nothing, whatever the reservation's state.
    if let Some(res) = reservation.filter(|_| adds) {
        // An unknown reservation is drawn from, so that the ledger says why it is refused.
        if places_in_zone(&trial, grant, res).unwrap_or(true) {
            out.drawn = draw(
                &mut trial,
                &mut trial_ids,
                grant,
                request,
                flavour,
                res,
                now,
            )
            .map_err(|e| ledger_refusal(&field, e))?;
        }
    }
    let kept = registered.map_or(0, |r| {
        r.draws
            .iter()
            .filter(|d| !out.released.contains(&d.allocation))
            .count()
    });
    if kept + out.drawn.len() > MAX_INSTANCE_DRAWS {
        return Err(rejected(
            &field,
            format!(
                "instance {} would hold {} draws of reservations, the most this NFVO records \
                 per instance is {MAX_INSTANCE_DRAWS}",
                request.vnf_instance_id,
                kept + out.drawn.len()
            ),
        ));
    }
    if out.changed() {
        *ledger = trial;
        *ids = trial_ids;
    } else {
        // Nothing drawn: the grant keeps no reservationId.
        for g in &mut grant.add_resources {
            g.reservation_id = None;
        }
    }
    Ok(out)
}

/// Whether the new VNFCs of `operation` draw from a reservation: those of an `INSTANTIATE`, a
/// `SCALE` or a `SCALE_TO_LEVEL`. A `HEAL`, a `CHANGE_VNFPKG` or a `CHANGE_EXT_CONN` makes
/// VNFCs again in place of those it removes, which keep their draws.
pub fn draws_for(operation: GrantedLcmOperationType) -> bool {
    matches!(
        operation,
        GrantedLcmOperationType::Instantiate
            | GrantedLcmOperationType::Scale
            | GrantedLcmOperationType::ScaleToLevel
    )
}

/// Whether the removals of `operation` give back draws: those of a `SCALE` or a
/// `SCALE_TO_LEVEL` (a scale-in).
fn gives_back_for(operation: GrantedLcmOperationType) -> bool {
    matches!(
        operation,
        GrantedLcmOperationType::Scale | GrantedLcmOperationType::ScaleToLevel
    )
}

/// Whether `grant` places a resource in the zone of `reservation`; `None` when the ledger has
/// no such reservation.
fn places_in_zone(ledger: &Ledger, grant: &Grant, reservation: &ReservationId) -> Option<bool> {
    let zone = ledger.reservation(reservation)?.zone;
    let ids: BTreeSet<&str> = grant
        .zones
        .iter()
        .filter(|i| i.zone_id == zone)
        .map(|i| i.id.as_str())
        .collect();
    Some(
        grant
            .add_resources
            .iter()
            .any(|g| g.zone_id.as_deref().is_some_and(|i| ids.contains(i))),
    )
}

/// Draws the `COMPUTE` resources of `grant` in the reservation's zone; the allocations'
/// `instanceRef` is `<vnfInstanceId>/<addResources id>`.
fn draw(
    ledger: &mut Ledger,
    ids: &mut IdGen,
    grant: &mut Grant,
    request: &GrantRequest,
    flavour: &Flavour,
    reservation: &ReservationId,
    now: DateTime<Utc>,
) -> Result<Vec<InstanceDraw>, LedgerError> {
    let instance = request.vnf_instance_id.as_str();
    let named = |rid: &str| crate::reservation::lcm::vnfc_ref(instance, rid);
    let mut req = request.clone();
    let mut g = grant.clone();
    for r in &mut req.add_resources {
        r.id = named(&r.id);
    }
    for a in &mut g.add_resources {
        a.resource_definition_id = named(&a.resource_definition_id);
    }
    let allocations =
        super::granter::draw_reservation(&mut g, &req, flavour, reservation, ledger, ids, now)?;
    for (mine, tagged) in grant.add_resources.iter_mut().zip(&g.add_resources) {
        mine.reservation_id.clone_from(&tagged.reservation_id);
    }
    let by_ref: BTreeMap<String, &crate::grant::ResourceDefinition> = req
        .add_resources
        .iter()
        .zip(&request.add_resources)
        .map(|(renamed, r)| (renamed.id.clone(), r))
        .collect();
    allocations
        .into_iter()
        .map(|a| {
            let r = a
                .instance_ref
                .as_ref()
                .and_then(|x| by_ref.get(x))
                .ok_or_else(|| {
                    LedgerError::Invalid(Error::invalid(
                        Location::default().with_field("addResources"),
                        format!("allocation {} names no resource of the request", a.id),
                    ))
                })?;
            Ok(InstanceDraw {
                resource_id: r.id.clone(),
                vdu_id: r
                    .vdu_id
                    .as_ref()
                    .map_or(r.resource_template_id.clone(), |v| v.as_str().to_owned()),
                zone: a.zone.clone(),
                reservation: reservation.clone(),
                allocation: a.id,
            })
        })
        .collect()
}

fn ledger_refusal(field: &str, e: LedgerError) -> GrantRefusal {
    match e {
        LedgerError::Invalid(e) => invalid(field, e.to_string()),
        other => rejected(
            field,
            format!("the Promise ledger refuses the draw, nothing was drawn: {other}"),
        ),
    }
}

#[cfg(test)]
mod tests;
