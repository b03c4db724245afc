//! Reservations in LCM operations: what an instantiate or a scale-out draws from a reservation,
//! what it keeps once the operation ended, and what a scale-in or a terminate gives back. The
//! command line (`vnfm instantiate --reservation ID`) and `vnfm serve` (`additionalParams.`
//! [`RESERVATION_PARAM`]) both call these functions; they only load and save the ledger.
//!
//! Every function is sans-IO: it takes the ledger, the grant or the operation's report, and an
//! explicit `now` ([`effective_now`] derives it from a clock reading the caller took).
//!
//! - [`draw_operation`]: the new VNFCs that the operation's grant (from
//!   [`crate::lifecycle::Lifecycle::grant_only`]) places in the reservation's zone draw from it
//!   ([`crate::lifecycle::granter::draw_reservation`]: all or nothing, one allocation per VNFC,
//!   `instanceRef` `<vnfInstanceId>/<VNFC>`, see [`vnfc_ref`]); the [`Draw`] says which zone
//!   every new VNFC must be pinned to.
//! - [`settle`]: after the operation, keeps the allocations of the VNFCs that ended in the
//!   reservation's zone and destroys the others (all of them when the operation failed or did
//!   not start).
//! - [`release_after`]: a completed terminate gives back every allocation of the instance, any
//!   other completed operation those of the VNFCs it removed (a scale-in); a heal keeps them (a
//!   healed VNFC keeps its name).
//! - [`add_catalogue`] and [`providers`]: the capacity providers of the ledger.
//!
//! ```
//! use chrono::DateTime;
//! use vnfm_core::reservation::lcm::{effective_now, requested_reservation};
//! use vnfm_core::reservation::Ledger;
//!
//! let clock = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
//! assert_eq!(effective_now(&Ledger::default(), None, clock), clock);
//! let params = serde_json::json!({"reservationId": "rollout"});
//! let r = requested_reservation(params.as_object(), "InstantiateVnfRequest")?;
//! assert_eq!(r.unwrap().as_str(), "rollout");
//! # Ok::<(), vnfm_core::Error>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::{Allocation, Capacity, Ledger, LedgerError, Outcome, Pool, ReservationId};
use crate::error::{Error, Location};
use crate::grant::{Grant, KeyValuePairs};
use crate::id::{IdGen, VnfInstanceId, ZoneId};
use crate::lcm::{
    InstantiateVnfRequest, LcmOperationType, ScaleType, ScaleVnfRequest, VnfInstance,
};
use crate::lifecycle::grant::PlannedGrant;
use crate::lifecycle::{GrantOnly, OperationReport};
use crate::package::VnfPackage;
use crate::zone::ComputeZone;

/// The key of an LCM request's `additionalParams` naming the reservation its new VNFCs draw
/// from (the `--reservation` of `vnfm instantiate` and `vnfm scale`; the same name as SOL003's
/// `GrantInfo.reservationId`).
pub const RESERVATION_PARAM: &str = "reservationId";

/// The provider name (the pools' `source`) of the capacity taken from a VIM's zone catalogue
/// ([`add_catalogue`]); the ledger, which makes those pools, defines it.
pub use super::ledger::CATALOGUE_PROVIDER;

/// The provider name of pools declared without a source.
pub const DECLARED_PROVIDER: &str = "declared";

/// The lines a zone catalogue does not report, per zone: OpenStack's default project quotas
/// (Nova `instances` 10, Neutron `floatingip` 50, Cinder `volumes` 10 and `snapshots` 10).
pub const DEFAULT_QUOTA: Capacity = Capacity {
    cores: 0,
    ram: 0,
    instances: 10,
    addresses: 50,
    volumes: 10,
    size: 0,
    snapshots: 10,
};

/// The `now` of a ledger operation: `requested` when given (a script's `--now`), else the
/// `clock` reading, never before the ledger's last operation (the ledger needs a
/// non-decreasing `now`).
pub fn effective_now(
    ledger: &Ledger,
    requested: Option<DateTime<Utc>>,
    clock: DateTime<Utc>,
) -> DateTime<Utc> {
    match requested {
        Some(t) => t,
        None => ledger.now().map_or(clock, |l| l.max(clock)),
    }
}

// ----- providers ---------------------------------------------------------------------------

/// A capacity provider: the pools of one `source`, and the zones they give capacity to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provider {
    /// Its name (the pools' `source`; [`DECLARED_PROVIDER`] for pools without one).
    pub name: String,
    /// The zones it gives (or takes) capacity in, sorted.
    pub zones: Vec<ZoneId>,
    /// How many pools it has.
    pub pools: usize,
}

/// The providers of the ledger's pools, by name.
pub fn providers(ledger: &Ledger) -> Vec<Provider> {
    let mut by_name: BTreeMap<String, (Vec<ZoneId>, usize)> = BTreeMap::new();
    for p in ledger.pools() {
        let name = p.source.clone().unwrap_or_else(|| DECLARED_PROVIDER.into());
        let e = by_name.entry(name).or_default();
        if !e.0.contains(&p.zone) {
            e.0.push(p.zone.clone());
        }
        e.1 += 1;
    }
    by_name
        .into_iter()
        .map(|(name, (mut zones, pools))| {
            zones.sort();
            Provider { name, zones, pools }
        })
        .collect()
}

/// Registers a VIM's zone catalogue as the provider [`CATALOGUE_PROVIDER`] from `now` on: the
/// free vCPUs, memory and disk of each available zone's available hosts, and [`DEFAULT_QUOTA`]
/// on the other lines ([`Ledger::add_catalogue`]).
///
/// # Errors
/// [`LedgerError::Invalid`] naming the provider and its zones when the catalogue is already
/// registered (registering it twice would count its capacity twice); the ledger's refusal
/// otherwise.
pub fn add_catalogue(
    ledger: &mut Ledger,
    ids: &mut IdGen,
    zones: &[ComputeZone],
    now: DateTime<Utc>,
) -> Result<Outcome<Vec<Pool>>, LedgerError> {
    if let Some(p) = providers(ledger)
        .into_iter()
        .find(|p| p.name == CATALOGUE_PROVIDER)
    {
        let zones: Vec<&str> = p.zones.iter().map(ZoneId::as_str).collect();
        return Err(LedgerError::Invalid(Error::invalid(
            Location::default().with_field("provider"),
            format!(
                "provider {CATALOGUE_PROVIDER:?} (the VIM's zones {}) is already registered; \
                 change its capacity by increasing or decreasing capacity instead",
                zones.join(", ")
            ),
        )));
    }
    ledger.add_catalogue(zones, DEFAULT_QUOTA, ids, now)
}

// ----- the reservation an operation names --------------------------------------------------

/// The reservation named by `additionalParams.`[`RESERVATION_PARAM`] of a request (`request`
/// names it in errors, e.g. `InstantiateVnfRequest`), `None` when absent or `null`.
///
/// # Errors
/// [`Error::Invalid`] naming `<request>.additionalParams.reservationId` when it is not a
/// non-empty string.
pub fn requested_reservation(
    params: Option<&KeyValuePairs>,
    request: &str,
) -> Result<Option<ReservationId>, Error> {
    match params.and_then(|p| p.get(RESERVATION_PARAM)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(ReservationId::new(s.trim()))),
        Some(v) => Err(Error::invalid(
            Location::default()
                .with_field(format!("{request}.additionalParams.{RESERVATION_PARAM}")),
            format!("is {v}; expected the id of a reservation of the Promise ledger"),
        )),
    }
}

/// The reservation an instantiate draws from, and what to grant for it.
///
/// # Errors
/// As [`requested_reservation`].
pub fn instantiate_draw(
    req: &InstantiateVnfRequest,
) -> Result<Option<(ReservationId, GrantOnly)>, Error> {
    Ok(
        requested_reservation(req.additional_params.as_ref(), "InstantiateVnfRequest")?.map(|r| {
            (
                r,
                GrantOnly::Instantiate {
                    flavour_id: req.flavour_id.clone(),
                },
            )
        }),
    )
}

/// The reservation a scale-out draws from, and what to grant for it.
///
/// # Errors
/// As [`requested_reservation`]; also [`Error::Invalid`] for a scale-in naming one: a scale-in
/// gives the allocations of the VNFCs it removes back by itself ([`release_after`]).
pub fn scale_draw(req: &ScaleVnfRequest) -> Result<Option<(ReservationId, GrantOnly)>, Error> {
    let Some(r) = requested_reservation(req.additional_params.as_ref(), "ScaleVnfRequest")? else {
        return Ok(None);
    };
    match req.type_ {
        ScaleType::ScaleOut => Ok(Some((
            r,
            GrantOnly::ScaleOut {
                aspect_id: req.aspect_id.clone(),
                steps: req.steps(),
            },
        ))),
        ScaleType::ScaleIn => Err(Error::invalid(
            Location::default().with_field(format!(
                "ScaleVnfRequest.additionalParams.{RESERVATION_PARAM}"
            )),
            format!(
                "reservation {r} is named on a SCALE_IN; a reservation gives the VNFCs a scale \
                 out adds, and a scale in gives the allocations of the VNFCs it removes back by \
                 itself"
            ),
        )),
    }
}

/// Refuses a reservation named on an operation that draws nothing (heal, terminate: `request`
/// names it in the error).
///
/// # Errors
/// [`Error::Invalid`] naming `<request>.additionalParams.reservationId` when one is named.
pub fn no_reservation(params: Option<&KeyValuePairs>, request: &str) -> Result<(), Error> {
    match requested_reservation(params, request)? {
        None => Ok(()),
        Some(r) => Err(Error::invalid(
            Location::default()
                .with_field(format!("{request}.additionalParams.{RESERVATION_PARAM}")),
            format!(
                "reservation {r} is named on an operation that adds no VNFC; only an \
                 instantiate and a scale out draw from a reservation (a heal keeps the \
                 allocations, a terminate gives them back)"
            ),
        )),
    }
}

// ----- draw, settle, release ---------------------------------------------------------------

/// The `instanceRef` of the allocation of VNFC `vnfc` of instance `instance`.
pub fn vnfc_ref(instance: &str, vnfc: &str) -> String {
    format!("{instance}/{vnfc}")
}

/// The VNFC ids (`vnfcResourceInfo[].id`) of an instance.
pub fn vnfc_ids(inst: &VnfInstance) -> BTreeSet<String> {
    inst.instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_resource_info.iter())
        .map(|v| v.id.clone())
        .collect()
}

/// What an instantiate or a scale-out drew from a reservation before touching the stack.
#[derive(Clone, Debug, PartialEq)]
pub struct Draw {
    /// The reservation drawn from.
    pub reservation: ReservationId,
    /// The allocations, one per new VNFC placed in the reservation's zone.
    pub allocations: Vec<Allocation>,
    /// The zone of every new VNFC in the grant, by VNFC name: the operation's pins.
    pub pinned: BTreeMap<String, ZoneId>,
    /// The grant, with `reservationId` on the resources drawn.
    pub grant: Grant,
    /// The time of the draw.
    pub at: DateTime<Utc>,
}

/// Draws the new VNFCs of an operation's grant placed in the zone of `reservation` from it
/// (see the module docs). `granted` is what
/// [`crate::lifecycle::Lifecycle::grant_only`] answered for `inst` and `pkg`. The allocations
/// name the VNFC (`<instance>/<VNFC>`) rather than the grant's resource definition, which the
/// operation's own grant does not reuse.
///
/// # Errors
/// [`LedgerError::Rejected`] when the reservation does not exist, is not active, or has not
/// enough left; [`LedgerError::Invalid`] when the grant places no new VNFC in its zone or
/// names a flavour the package does not have. A refusal draws nothing.
pub fn draw_operation(
    ledger: &mut Ledger,
    ids: &mut IdGen,
    pkg: &VnfPackage,
    inst: &VnfInstance,
    granted: (PlannedGrant, Grant),
    reservation: &ReservationId,
    now: DateTime<Utc>,
) -> Result<Draw, LedgerError> {
    let (planned, mut grant) = granted;
    let names: BTreeMap<&str, String> = planned
        .new_vnfcs
        .iter()
        .map(|n| (n.resource_id.as_str(), n.slot.name()))
        .collect();
    let pinned: BTreeMap<String, ZoneId> = names
        .iter()
        .filter_map(|(rid, name)| grant.zone_of(rid).map(|z| (name.clone(), z.clone())))
        .collect();
    let rename = |rid: &str| {
        names
            .get(rid)
            .map_or_else(|| rid.to_owned(), |n| vnfc_ref(inst.id.as_str(), n))
    };
    let mut request = planned.request;
    for r in &mut request.add_resources {
        r.id = rename(&r.id);
    }
    for g in &mut grant.add_resources {
        g.resource_definition_id = rename(&g.resource_definition_id);
    }
    let flavour_id = request.flavour_id.clone().unwrap_or_default();
    let flavour = pkg.flavour(&flavour_id).ok_or_else(|| {
        LedgerError::Invalid(Error::invalid(
            Location::default().with_field("flavourId"),
            format!(
                "the grant request names flavour {flavour_id:?}, not one of package {}",
                pkg.descriptor_id
            ),
        ))
    })?;
    let allocations = crate::lifecycle::granter::draw_reservation(
        &mut grant,
        &request,
        flavour,
        reservation,
        ledger,
        ids,
        now,
    )?;
    Ok(Draw {
        reservation: reservation.clone(),
        allocations,
        pinned,
        grant,
        at: now,
    })
}

/// What [`settle`] kept and gave back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settled {
    /// The allocations of the VNFCs in the reservation's zone after the operation.
    pub kept: Vec<Allocation>,
    /// The allocations destroyed (the operation failed, or moved the VNFC elsewhere).
    pub released: Vec<Allocation>,
}

/// After the operation a [`Draw`] was for (`report`: `None` when it did not start): keeps the
/// allocations of the VNFCs that are in the reservation's zone, destroys the others at `now`
/// (all of them when the operation failed or did not start).
///
/// # Errors
/// The ledger's refusal to destroy an allocation (a `now` before its last operation).
pub fn settle(
    ledger: &mut Ledger,
    draw: Draw,
    report: Option<&OperationReport>,
    now: DateTime<Utc>,
) -> Result<Settled, LedgerError> {
    let placed: BTreeMap<String, Option<ZoneId>> = report
        .filter(|r| r.failure.is_none())
        .map(|r| {
            r.instance
                .instantiated_vnf_info
                .iter()
                .flat_map(|i| i.vnfc_resource_info.iter())
                .map(|v| (vnfc_ref(r.instance.id.as_str(), &v.id), v.zone()))
                .collect()
        })
        .unwrap_or_default();
    let mut out = Settled::default();
    for a in draw.allocations {
        let here = a
            .instance_ref
            .as_ref()
            .and_then(|r| placed.get(r))
            .is_some_and(|z| z.as_ref() == Some(&a.zone));
        if here {
            out.kept.push(a);
        } else {
            out.released
                .push(ledger.destroy_instance(&a.id, now)?.value);
        }
    }
    Ok(out)
}

/// Destroys at `now` the live allocations of the VNFCs `vnfcs` of `instance` (every VNFC of it
/// when `None`); returns them. Nothing happens when there are none.
///
/// # Errors
/// The ledger's refusal to destroy an allocation (a `now` before its last operation).
pub fn release_vnfcs(
    ledger: &mut Ledger,
    instance: &VnfInstanceId,
    vnfcs: Option<&BTreeSet<String>>,
    now: DateTime<Utc>,
) -> Result<Vec<Allocation>, LedgerError> {
    let prefix = vnfc_ref(instance.as_str(), "");
    let mine: Vec<_> = ledger
        .allocations()
        .filter(|a| a.is_live())
        .filter(|a| {
            a.instance_ref
                .as_deref()
                .and_then(|r| r.strip_prefix(prefix.as_str()))
                .is_some_and(|v| vnfcs.is_none_or(|set| set.contains(v)))
        })
        .map(|a| a.id.clone())
        .collect();
    let mut released = Vec::with_capacity(mine.len());
    for id in mine {
        released.push(ledger.destroy_instance(&id, now)?.value);
    }
    Ok(released)
}

/// The allocations an operation that ended gives back, destroyed at `now`: after a completed
/// `TERMINATE` every one of the instance, after another completed operation those of the VNFCs
/// of `before` (the instance before it) that it removed (a scale-in); nothing after a failure.
///
/// # Errors
/// As [`release_vnfcs`].
pub fn release_after(
    ledger: &mut Ledger,
    before: Option<&VnfInstance>,
    report: &OperationReport,
    now: DateTime<Utc>,
) -> Result<Vec<Allocation>, LedgerError> {
    if report.failure.is_some() {
        return Ok(Vec::new());
    }
    let id = &report.instance.id;
    if report.op_occ.operation == LcmOperationType::Terminate {
        return release_vnfcs(ledger, id, None, now);
    }
    let Some(before) = before else {
        return Ok(Vec::new());
    };
    let removed: BTreeSet<String> = vnfc_ids(before)
        .difference(&vnfc_ids(&report.instance))
        .cloned()
        .collect();
    if removed.is_empty() {
        return Ok(Vec::new());
    }
    release_vnfcs(ledger, id, Some(&removed), now)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::lcm::{LcmOperationStateType, VnfLcmOpOcc};
    use crate::lifecycle::FailureKind;
    use crate::reservation::{AllocationRequest, PoolRequest, ReservationRequest};
    use crate::zone::{ComputeHost, Resources};

    fn t(h: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + h * 3600, 0).unwrap()
    }

    fn catalogue() -> Vec<ComputeZone> {
        vec![ComputeZone {
            name: "AZ-1".into(),
            available: true,
            hosts: Some(vec![ComputeHost {
                name: "h1".into(),
                available: true,
                free: Some(Resources::new(8, 16384, 100)),
            }]),
        }]
    }

    /// A ledger with 16 cores in AZ-1 and AZ-2 and an active reservation `r-1` of 8 cores in
    /// AZ-1 from t(0).
    fn ledger() -> (Ledger, IdGen) {
        let mut ids = IdGen::seeded(1);
        let mut l = Ledger::default();
        for z in ["AZ-1", "AZ-2"] {
            l.increase_capacity(
                PoolRequest::new(z, Capacity::compute(16, 65536, 10)),
                &mut ids,
                t(0),
            )
            .unwrap();
        }
        let mut req = ReservationRequest::new("AZ-1", Capacity::compute(8, 16384, 4));
        req.id = Some("r-1".into());
        l.create_reservation(req, &mut ids, t(0)).unwrap();
        (l, ids)
    }

    fn allocate(l: &mut Ledger, ids: &mut IdGen, instance_ref: &str) -> Allocation {
        l.create_instance(
            AllocationRequest {
                reservation: Some("r-1".into()),
                capacity: Capacity::compute(1, 1024, 1),
                instance_ref: Some(instance_ref.into()),
                ..Default::default()
            },
            ids,
            t(1),
        )
        .unwrap()
        .value
    }

    /// An instance `id` with VNFCs `(vnfc id, zone)`.
    fn instance(id: &str, vnfcs: &[(&str, &str)]) -> VnfInstance {
        let rs: Vec<Value> = vnfcs
            .iter()
            .map(|(v, z)| {
                json!({"id": v, "vduId": "VDU1", "zoneId": z, "computeResource":
                    {"resourceId": format!("srv-{v}"), "vimLevelResourceType": "OS::Nova::Server"}})
            })
            .collect();
        serde_json::from_value(json!({
            "id": id, "vdnfdId": "d", "vnfdId": "d", "vnfProvider": "p", "vnfProductName": "n",
            "vnfSoftwareVersion": "1", "vnfdVersion": "1", "instantiationState": "INSTANTIATED",
            "instantiatedVnfInfo": {"flavourId": "default", "vnfState": "STARTED",
                "vnfcResourceInfo": rs},
        }))
        .unwrap()
    }

    fn report(
        op: LcmOperationType,
        inst: VnfInstance,
        failure: Option<FailureKind>,
    ) -> OperationReport {
        let mut op_occ = VnfLcmOpOcc::new("op-1", inst.id.clone(), op, t(2));
        op_occ.enter(
            if failure.is_some() {
                LcmOperationStateType::FailedTemp
            } else {
                LcmOperationStateType::Completed
            },
            t(2),
        );
        OperationReport {
            op_occ,
            instance: inst,
            grant: None,
            failure,
        }
    }

    fn live(l: &Ledger) -> Vec<String> {
        l.allocations()
            .filter(|a| a.is_live())
            .filter_map(|a| a.instance_ref.clone())
            .collect()
    }

    #[test]
    fn effective_now_is_the_requested_time_else_the_clock_never_before_the_ledger() {
        let (l, _) = ledger();
        assert_eq!(l.now(), Some(t(0)));
        assert_eq!(effective_now(&l, Some(t(5)), t(1)), t(5));
        assert_eq!(effective_now(&l, None, t(1)), t(1));
        // A clock behind the ledger (another writer's later `--now`): the ledger's time.
        assert_eq!(effective_now(&l, None, t(-3)), t(0));
        assert_eq!(effective_now(&Ledger::default(), None, t(-3)), t(-3));
    }

    #[test]
    fn the_catalogue_is_a_provider_registered_once() {
        let mut l = Ledger::default();
        let mut ids = IdGen::seeded(1);
        let o = add_catalogue(&mut l, &mut ids, &catalogue(), t(0)).unwrap();
        assert_eq!(o.value.len(), 1);
        assert_eq!(o.value[0].capacity.instances, DEFAULT_QUOTA.instances);
        assert_eq!(o.value[0].capacity.cores, 8);
        l.increase_capacity(
            PoolRequest::new("AZ-1", Capacity::compute(2, 0, 0)),
            &mut ids,
            t(0),
        )
        .unwrap();
        assert_eq!(
            providers(&l),
            vec![
                Provider {
                    name: DECLARED_PROVIDER.into(),
                    zones: vec!["AZ-1".into()],
                    pools: 1
                },
                Provider {
                    name: CATALOGUE_PROVIDER.into(),
                    zones: vec!["AZ-1".into()],
                    pools: 1
                },
            ]
        );
        let err = add_catalogue(&mut l, &mut ids, &catalogue(), t(1)).unwrap_err();
        assert!(matches!(err, LedgerError::Invalid(_)), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("already registered") && msg.contains("AZ-1"),
            "{msg}"
        );
        assert_eq!(l.pools().len(), 2, "nothing added twice");
    }

    #[test]
    fn the_reservation_param_is_a_string_on_an_instantiate_or_a_scale_out() {
        let p = |v: Value| v.as_object().cloned();
        assert_eq!(requested_reservation(None, "X").unwrap(), None);
        assert_eq!(
            requested_reservation(p(json!({"reservationId": null})).as_ref(), "X").unwrap(),
            None
        );
        for bad in [json!(3), json!(""), json!({"id": "r"})] {
            let err = requested_reservation(
                p(json!({ "reservationId": bad })).as_ref(),
                "InstantiateVnfRequest",
            )
            .unwrap_err()
            .to_string();
            assert!(
                err.contains("InstantiateVnfRequest.additionalParams.reservationId"),
                "{err}"
            );
        }
        let mut inst = InstantiateVnfRequest::new("default");
        assert!(instantiate_draw(&inst).unwrap().is_none());
        inst.additional_params = p(json!({"reservationId": "r-1", "other": 1}));
        let (r, op) = instantiate_draw(&inst).unwrap().unwrap();
        assert_eq!(r.as_str(), "r-1");
        assert!(matches!(op, GrantOnly::Instantiate { flavour_id } if flavour_id == "default"));

        let mut out = ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale");
        out.number_of_steps = Some(2);
        out.additional_params = p(json!({"reservationId": "r-1"}));
        let (_, op) = scale_draw(&out).unwrap().unwrap();
        assert!(matches!(op, GrantOnly::ScaleOut { steps: 2, .. }));
        let mut scale_in = out.clone();
        scale_in.type_ = ScaleType::ScaleIn;
        let err = scale_draw(&scale_in).unwrap_err().to_string();
        assert!(err.contains("SCALE_IN") && err.contains("r-1"), "{err}");
        scale_in.additional_params = None;
        assert!(scale_draw(&scale_in).unwrap().is_none());

        let err = no_reservation(
            p(json!({"reservationId": "r-1"})).as_ref(),
            "HealVnfRequest",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("HealVnfRequest.additionalParams.reservationId"),
            "{err}"
        );
        assert!(no_reservation(p(json!({"all": true})).as_ref(), "HealVnfRequest").is_ok());
    }

    #[test]
    fn release_gives_back_the_named_vnfcs_of_that_instance_only() {
        let (mut l, mut ids) = ledger();
        for r in ["i-1/VDU1-0", "i-1/VDU1-1", "i-10/VDU1-0", "i-2/VDU1-1"] {
            allocate(&mut l, &mut ids, r);
        }
        let one: BTreeSet<String> = ["VDU1-1".to_owned()].into();
        let r = release_vnfcs(&mut l, &"i-1".into(), Some(&one), t(2)).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].instance_ref.as_deref(), Some("i-1/VDU1-1"));
        assert_eq!(r[0].end, Some(t(2)));
        assert_eq!(live(&l), ["i-1/VDU1-0", "i-10/VDU1-0", "i-2/VDU1-1"]);
        // Again: nothing left to give back.
        assert!(release_vnfcs(&mut l, &"i-1".into(), Some(&one), t(2))
            .unwrap()
            .is_empty());
        let r = release_vnfcs(&mut l, &"i-1".into(), None, t(3)).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(live(&l), ["i-10/VDU1-0", "i-2/VDU1-1"]);
        let res = l.reservation(&"r-1".into()).unwrap();
        assert_eq!(res.allocated.cores, 2);
    }

    #[test]
    fn after_an_operation_a_scale_in_gives_back_what_it_removed_and_a_terminate_everything() {
        let (mut l, mut ids) = ledger();
        for r in ["i-1/VDU1-0", "i-1/VDU1-1", "i-1/VDU1-2"] {
            allocate(&mut l, &mut ids, r);
        }
        let before = instance(
            "i-1",
            &[("VDU1-0", "AZ-1"), ("VDU1-1", "AZ-1"), ("VDU1-2", "AZ-1")],
        );
        let after = instance("i-1", &[("VDU1-0", "AZ-1"), ("VDU1-1", "AZ-1")]);
        // A failed scale-in gives nothing back.
        let failed = report(
            LcmOperationType::Scale,
            after.clone(),
            Some(FailureKind::StackFailed),
        );
        assert!(release_after(&mut l, Some(&before), &failed, t(2))
            .unwrap()
            .is_empty());
        // A heal (same VNFCs) neither.
        let heal = report(LcmOperationType::Heal, before.clone(), None);
        assert!(release_after(&mut l, Some(&before), &heal, t(2))
            .unwrap()
            .is_empty());
        let scale_in = report(LcmOperationType::Scale, after.clone(), None);
        let r = release_after(&mut l, Some(&before), &scale_in, t(2)).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].instance_ref.as_deref(), Some("i-1/VDU1-2"));
        // A terminate gives back the rest, without knowing the instance before.
        let mut gone = after.clone();
        gone.instantiated_vnf_info = None;
        let term = report(LcmOperationType::Terminate, gone, None);
        let r = release_after(&mut l, None, &term, t(3)).unwrap();
        assert_eq!(r.len(), 2);
        assert!(live(&l).is_empty());
        assert!(l.reservation(&"r-1".into()).unwrap().allocated.is_zero());
    }

    #[test]
    fn settle_keeps_the_vnfcs_in_the_zone_and_gives_back_the_rest() {
        let (mut l, mut ids) = ledger();
        let draw = Draw {
            reservation: "r-1".into(),
            allocations: vec![
                allocate(&mut l, &mut ids, "i-1/VDU1-0"),
                allocate(&mut l, &mut ids, "i-1/VDU1-1"),
            ],
            pinned: BTreeMap::new(),
            grant: Grant::default(),
            at: t(1),
        };
        // VDU1-1 was moved to AZ-2 by reselection.
        let done = report(
            LcmOperationType::Instantiate,
            instance("i-1", &[("VDU1-0", "AZ-1"), ("VDU1-1", "AZ-2")]),
            None,
        );
        let s = settle(&mut l, draw.clone(), Some(&done), t(2)).unwrap();
        assert_eq!(s.kept.len(), 1);
        assert_eq!(s.kept[0].instance_ref.as_deref(), Some("i-1/VDU1-0"));
        assert_eq!(s.released.len(), 1);
        assert_eq!(s.released[0].instance_ref.as_deref(), Some("i-1/VDU1-1"));
        assert_eq!(live(&l), ["i-1/VDU1-0"]);

        // An operation that did not start, or failed: everything goes back.
        let (mut l, mut ids) = ledger();
        let mut draw = draw;
        draw.allocations = vec![allocate(&mut l, &mut ids, "i-1/VDU1-0")];
        let failed = report(
            LcmOperationType::Instantiate,
            instance("i-1", &[("VDU1-0", "AZ-1")]),
            Some(FailureKind::StackFailed),
        );
        let s = settle(&mut l, draw.clone(), Some(&failed), t(2)).unwrap();
        assert!(s.kept.is_empty());
        assert_eq!(s.released.len(), 1);
        assert!(live(&l).is_empty());
    }
}
