use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::json;

use super::*;
use crate::grant::{
    Grant, GrantRequest, GrantedLcmOperationType, ResourceDefinition, ResourceHandle,
};
use crate::lifecycle::grantor::{self, GrantorContext, Located};
use crate::package::VnfPackage;
use crate::placement::Selection;
use crate::reservation::{Capacity, PoolRequest, ReservationRequest};
use crate::zone::{ComputeHost, ComputeZone, Resources};

const VNFD: &str = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d";

fn t(h: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + h * 3600, 0).unwrap()
}

fn demo() -> VnfPackage {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/demo-vnf");
    crate::package::fs::load(&dir).unwrap()
}

fn request(op: GrantedLcmOperationType, op_occ: &str, n: usize) -> GrantRequest {
    let mut r = GrantRequest::new("inst-1", op_occ, VNFD, op)
        .with_link("vnfLcmOpOcc", "http://vnfm/op")
        .with_link("vnfInstance", "http://vnfm/inst-1");
    if op == GrantedLcmOperationType::Instantiate {
        r = r.with_flavour_id("default");
    }
    for i in 0..n {
        r = r.with_add_resource(
            ResourceDefinition::new(
                format!("{op_occ}-c{i}"),
                crate::grant::ResourceType::Compute,
                "VDU1",
            )
            .with_vdu_id("VDU1"),
        );
    }
    r
}

fn admission<'a>(
    registered: Option<&'a NfvoInstance>,
    package: Option<&'a VnfPackage>,
) -> Admission<'a> {
    Admission {
        registered,
        registered_count: usize::from(registered.is_some()),
        package,
        dst_package: None,
    }
}

fn registered(later_grants: u64) -> NfvoInstance {
    NfvoInstance {
        id: "inst-1".into(),
        vnfd_id: VNFD.into(),
        flavour_id: "default".into(),
        instantiated_by: "op-1".into(),
        last_op_occ: "op-1".into(),
        later_grants,
        draws: Vec::new(),
    }
}

fn refusal(r: Result<Admitted<'_>, GrantRefusal>) -> (u16, String, String) {
    let e = r.map(|_| ()).unwrap_err();
    (e.status(), e.field().to_owned(), e.to_string())
}

#[test]
fn an_unknown_vnfd_or_flavour_is_refused_naming_the_field_and_the_value() {
    let pkg = demo();
    let mut r = request(GrantedLcmOperationType::Instantiate, "op-1", 1);
    r.vnfd_id = "myVnF".into();
    let (status, field, text) = refusal(admit(&r, &admission(None, None)));
    assert_eq!((status, field.as_str()), (422, "vnfdId"));
    assert!(text.contains("\"myVnF\""), "{text}");

    let mut r = request(GrantedLcmOperationType::Instantiate, "op-1", 1);
    r.flavour_id = Some("string".into());
    let (status, field, text) = refusal(admit(&r, &admission(None, Some(&pkg))));
    assert_eq!((status, field.as_str()), (422, "flavourId"));
    assert!(
        text.contains("\"string\"") && text.contains("default"),
        "{text}"
    );
    r.flavour_id = None;
    let (status, field, _) = refusal(admit(&r, &admission(None, Some(&pkg))));
    assert_eq!((status, field.as_str()), (422, "flavourId"));

    r.flavour_id = Some("default".into());
    let a = admit(&r, &admission(None, Some(&pkg))).unwrap();
    assert_eq!(a.flavour.id, "default");

    // Ids the registry records are bounded.
    r.add_resources[0].id = "x".repeat(MAX_ID_BYTES + 1);
    let (status, field, text) = refusal(admit(&r, &admission(None, Some(&pkg))));
    assert_eq!((status, field.as_str()), (422, "addResources[0].id"));
    assert!(text.contains("257 bytes"), "{text}");
    r.vnf_instance_id = "i".repeat(MAX_ID_BYTES + 1).as_str().into();
    let (_, field, _) = refusal(admit(&r, &admission(None, Some(&pkg))));
    assert_eq!(field, "vnfInstanceId");
}

#[test]
fn operations_need_a_registered_instance_of_the_same_vnfd() {
    let pkg = demo();
    let scale = request(GrantedLcmOperationType::Scale, "op-2", 1);
    let (status, field, text) = refusal(admit(&scale, &admission(None, Some(&pkg))));
    assert_eq!((status, field.as_str()), (422, "vnfInstanceId"));
    assert!(text.contains("\"inst-1\""), "{text}");

    let reg = registered(0);
    // No flavourId on a scale (Tacker sends none): the instance's.
    let a = admit(&scale, &admission(Some(&reg), Some(&pkg))).unwrap();
    assert_eq!(a.flavour.id, "default");

    let mut other = reg.clone();
    other.vnfd_id = "another-vnfd".into();
    let (status, field, text) = refusal(admit(&scale, &admission(Some(&other), Some(&pkg))));
    assert_eq!((status, field.as_str()), (422, "vnfdId"));
    assert!(text.contains("another-vnfd"), "{text}");

    // A change of package names the new VNFD as dstVnfdId, which must be onboarded.
    let mut change = request(GrantedLcmOperationType::ChangeVnfpkg, "op-3", 0);
    let (_, field, _) = refusal(admit(&change, &admission(Some(&reg), Some(&pkg))));
    assert_eq!(field, "dstVnfdId");
    change.dst_vnfd_id = Some("new-vnfd".into());
    let (status, field, text) = refusal(admit(&change, &admission(Some(&reg), Some(&pkg))));
    assert_eq!((status, field.as_str()), (422, "dstVnfdId"));
    assert!(text.contains("new-vnfd"), "{text}");
    let mut a = admission(Some(&reg), Some(&pkg));
    a.dst_package = Some(&pkg);
    assert!(admit(&change, &a).is_ok());

    // Another flavour only through CHANGE_FLAVOUR.
    let mut heal = request(GrantedLcmOperationType::Heal, "op-4", 0);
    heal.flavour_id = Some("other".into());
    let mut reg2 = reg.clone();
    reg2.flavour_id = "other".into();
    let (_, field, _) = refusal(admit(&heal, &admission(Some(&reg), Some(&pkg))));
    assert_eq!(field, "flavourId", "no such flavour");
    heal.flavour_id = Some("default".into());
    let (_, field, text) = refusal(admit(&heal, &admission(Some(&reg2), Some(&pkg))));
    assert_eq!(field, "flavourId", "{text}");
    heal.operation = GrantedLcmOperationType::ChangeFlavour;
    assert!(admit(&heal, &admission(Some(&reg2), Some(&pkg))).is_ok());
}

#[test]
fn instantiate_registers_once_again_only_while_nothing_else_was_granted() {
    let pkg = demo();
    let inst = request(GrantedLcmOperationType::Instantiate, "op-9", 1);
    // Only its INSTANTIATE was granted (a failed instantiate instantiated again, a retry).
    assert!(admit(&inst, &admission(Some(&registered(0)), Some(&pkg))).is_ok());
    let (status, field, text) = refusal(admit(&inst, &admission(Some(&registered(2)), Some(&pkg))));
    assert_eq!((status, field.as_str()), (403, "vnfInstanceId"));
    assert!(text.contains("already instantiated"), "{text}");

    let mut full = admission(None, Some(&pkg));
    full.registered_count = MAX_NFVO_INSTANCES;
    let (status, field, text) = refusal(admit(&inst, &full));
    assert_eq!((status, field.as_str()), (403, "vnfInstanceId"));
    assert!(text.contains("10000"), "{text}");
    // The registered ones still get their other grants.
    let scale = request(GrantedLcmOperationType::Scale, "op-2", 1);
    let reg = registered(0);
    full.registered = Some(&reg);
    assert!(admit(&scale, &full).is_ok());
}

#[test]
fn the_registry_follows_the_grants() {
    let none = BTreeSet::new();
    let inst = request(GrantedLcmOperationType::Instantiate, "op-1", 1);
    let RegistryChange::Put(reg) = after_grant(&inst, None, "default", Vec::new(), &none) else {
        panic!()
    };
    assert_eq!(reg, registered(0));
    let scale = request(GrantedLcmOperationType::Scale, "op-2", 1);
    let RegistryChange::Put(next) = after_grant(&scale, Some(&reg), "default", Vec::new(), &none)
    else {
        panic!()
    };
    assert_eq!((next.later_grants, next.last_op_occ.as_str()), (1, "op-2"));
    assert_eq!(next.instantiated_by, "op-1");
    let mut change = request(GrantedLcmOperationType::ChangeVnfpkg, "op-3", 0);
    change.dst_vnfd_id = Some("new-vnfd".into());
    let RegistryChange::Put(changed) =
        after_grant(&change, Some(&next), "default", Vec::new(), &none)
    else {
        panic!()
    };
    assert_eq!(changed.vnfd_id, "new-vnfd");
    let term = request(GrantedLcmOperationType::Terminate, "op-4", 0);
    assert_eq!(
        after_grant(&term, Some(&changed), "default", Vec::new(), &none),
        RegistryChange::Remove
    );
    let json = serde_json::to_value(&changed).unwrap();
    assert_eq!(json["vnfdId"], "new-vnfd");
    assert_eq!(
        serde_json::from_value::<NfvoInstance>(json).unwrap(),
        changed
    );
}

// ----- the reservation ---------------------------------------------------------------------

fn zone(name: &str, vcpus: u64) -> ComputeZone {
    ComputeZone {
        name: name.into(),
        available: true,
        hosts: Some(vec![ComputeHost {
            name: format!("{name}-h").into(),
            available: true,
            free: Some(Resources::new(vcpus, 262_144, 10_000)),
        }]),
    }
}

fn sized(c: Capacity) -> Capacity {
    Capacity { size: 10_000, ..c }
}

/// A ledger of 64 cores in AZ-1 and AZ-2 and reservation `r-1` in AZ-1 for four instances.
fn ledger() -> (Ledger, IdGen) {
    let mut ids = IdGen::seeded(3);
    let mut l = Ledger::default();
    for z in ["AZ-1", "AZ-2"] {
        l.increase_capacity(
            PoolRequest::new(z, sized(Capacity::compute(64, 262_144, 100))),
            &mut ids,
            t(0),
        )
        .unwrap();
    }
    let mut req = ReservationRequest::new("AZ-1", sized(Capacity::compute(32, 65_536, 4)));
    req.id = Some("r-1".into());
    l.create_reservation(req, &mut ids, t(0)).unwrap();
    (l, ids)
}

/// The grant of `r` on the zones (AZ-1 has the most free capacity unless `elsewhere`).
fn granted(r: &GrantRequest, elsewhere: bool) -> Grant {
    let zones = if elsewhere {
        vec![zone("AZ-1", 8), zone("AZ-2", 64)]
    } else {
        vec![zone("AZ-1", 64), zone("AZ-2", 8)]
    };
    let pkg = demo();
    let located = BTreeMap::new();
    grantor::decide(
        r,
        &GrantorContext {
            grant_id: "g".into(),
            zones: &zones,
            located: &located,
            flavour: pkg.flavour("default"),
            selection: Selection::CapacityAware,
            seed: 1,
            self_href: "/g".into(),
        },
    )
    .unwrap()
}

fn reserved_instances(l: &Ledger) -> u64 {
    l.reservation(&"r-1".into()).unwrap().allocated.instances
}

#[allow(clippy::too_many_arguments)]
fn settle(
    l: &mut Ledger,
    ids: &mut IdGen,
    g: &mut Grant,
    r: &GrantRequest,
    reg: Option<&NfvoInstance>,
    release: &BTreeSet<AllocationId>,
    at: i64,
) -> Result<Settlement, GrantRefusal> {
    settle_in("r-1", l, ids, g, r, reg, release, at)
}

/// [`settle_reservation`] under reservation `res` at `t(at)`.
#[allow(clippy::too_many_arguments)]
fn settle_in(
    res: &str,
    l: &mut Ledger,
    ids: &mut IdGen,
    g: &mut Grant,
    r: &GrantRequest,
    reg: Option<&NfvoInstance>,
    release: &BTreeSet<AllocationId>,
    at: i64,
) -> Result<Settlement, GrantRefusal> {
    let pkg = demo();
    let res = ReservationId::new(res);
    settle_reservation(
        l,
        ids,
        g,
        r,
        pkg.flavour("default").unwrap(),
        Some(&res),
        reg,
        release,
        t(at),
    )
}

/// A scale-in grant request removing `(resource id, server)`s of VDU1, as Tacker names them.
fn scale_in(removed: &[(&str, &str)]) -> GrantRequest {
    let mut r = request(GrantedLcmOperationType::Scale, "op-3", 0);
    for (rid, server) in removed {
        r.remove_resources.push(
            ResourceDefinition::new(*rid, crate::grant::ResourceType::Compute, "VDU1")
                .with_resource(ResourceHandle::new(*server)),
        );
    }
    r
}

#[test]
fn grants_draw_scale_in_gives_back_by_vdu_and_zone_and_terminate_gives_back_everything() {
    let (mut l, mut ids) = ledger();
    let none = BTreeSet::new();
    let inst = request(GrantedLcmOperationType::Instantiate, "op-1", 2);
    let mut g = granted(&inst, false);
    let s = settle(&mut l, &mut ids, &mut g, &inst, None, &none, 1).unwrap();
    assert_eq!(s.drawn.len(), 2);
    assert_eq!(reserved_instances(&l), 2);
    assert!(g
        .add_resources
        .iter()
        .all(|a| a.reservation_id.as_deref() == Some("r-1")));
    assert_eq!(s.drawn[0].resource_id, "op-1-c0");
    assert_eq!(s.drawn[0].zone.as_str(), "AZ-1");
    let RegistryChange::Put(reg) = after_grant(&inst, None, "default", s.drawn, &s.released) else {
        panic!()
    };

    // A scale-in of two servers, ids of Tacker's own (new UUIDs): one in AZ-1 (drew), one in
    // AZ-2 (drew nothing). One allocation goes back.
    let scale_in = scale_in(&[("u-1", "srv-a"), ("u-2", "srv-b")]);
    assert_eq!(scaled_in_references(&scale_in, Some(&reg)).len(), 2);
    assert!(
        scaled_in_references(&scale_in, Some(&registered(0))).is_empty(),
        "no draws"
    );
    let located: BTreeMap<String, Located> = [("srv-a", "AZ-1"), ("srv-b", "AZ-2")]
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
    let release = released_by(&scale_in, Some(&reg), &located);
    assert_eq!(release.len(), 1);
    assert_eq!(
        release.first(),
        Some(&reg.draws[1].allocation),
        "the newest first"
    );
    let mut g = granted(&scale_in, false);
    let s = settle(&mut l, &mut ids, &mut g, &scale_in, Some(&reg), &release, 3).unwrap();
    assert_eq!(s.released.len(), 1);
    assert_eq!(reserved_instances(&l), 1);
    let RegistryChange::Put(reg) =
        after_grant(&scale_in, Some(&reg), "default", s.drawn, &s.released)
    else {
        panic!()
    };
    assert_eq!(reg.draws.len(), 1);

    // Terminate: everything back, the reservation as it started; it adds nothing, so a
    // reservation the ledger does not have does not stop it.
    let term = request(GrantedLcmOperationType::Terminate, "op-4", 0);
    let release = released_by(&term, Some(&reg), &BTreeMap::new());
    let mut g = granted(&term, false);
    let s = settle_in(
        "gone",
        &mut l,
        &mut ids,
        &mut g,
        &term,
        Some(&reg),
        &release,
        4,
    )
    .unwrap();
    assert_eq!(s.released.len(), 1);
    assert!(l.reservation(&"r-1".into()).unwrap().allocated.is_zero());
}

#[test]
fn a_draw_that_does_not_fit_is_refused_and_changes_nothing() {
    let (mut l, mut ids) = ledger();
    let none = BTreeSet::new();
    let inst = request(GrantedLcmOperationType::Instantiate, "op-1", 3);
    let mut g = granted(&inst, false);
    let s = settle(&mut l, &mut ids, &mut g, &inst, None, &none, 1).unwrap();
    let RegistryChange::Put(reg) = after_grant(&inst, None, "default", s.drawn, &s.released) else {
        panic!()
    };
    assert_eq!(reserved_instances(&l), 3);
    // Two more than the four reserved: refused, nothing drawn.
    let out = request(GrantedLcmOperationType::Scale, "op-2", 2);
    let mut g = granted(&out, false);
    let before = g.clone();
    let e = settle(&mut l, &mut ids, &mut g, &out, Some(&reg), &none, 2).unwrap_err();
    assert_eq!(
        (e.status(), e.field()),
        (403, "additionalParams.reservationId")
    );
    assert!(e.to_string().contains("nothing was drawn"), "{e}");
    assert_eq!(g, before);
    assert_eq!(reserved_instances(&l), 3);
    // An INSTANTIATE again gives back what the one it replaces drew, then draws: all or
    // nothing together.
    let again = request(GrantedLcmOperationType::Instantiate, "op-5", 4);
    let release = released_by(&again, Some(&reg), &BTreeMap::new());
    assert_eq!(release.len(), 3);
    let mut g = granted(&again, false);
    let s = settle(&mut l, &mut ids, &mut g, &again, Some(&reg), &release, 3).unwrap();
    assert_eq!((s.released.len(), s.drawn.len()), (3, 4));
    assert_eq!(reserved_instances(&l), 4);
    // An unknown reservation: refused naming the field.
    let mut g = granted(&inst, false);
    let e = settle_reservation(
        &mut l,
        &mut ids,
        &mut g,
        &inst,
        demo().flavour("default").unwrap(),
        Some(&ReservationId::new("nope")),
        None,
        &none,
        t(4),
    )
    .unwrap_err();
    assert_eq!(e.status(), 403);
    assert!(e.to_string().contains("nope"), "{e}");
}

#[test]
fn the_reservation_comes_from_the_request_else_the_setting() {
    let mut r = request(GrantedLcmOperationType::Instantiate, "op-1", 0);
    assert_eq!(requested_reservation(&r, None).unwrap(), None);
    assert_eq!(
        requested_reservation(&r, Some("cfg"))
            .unwrap()
            .unwrap()
            .as_str(),
        "cfg"
    );
    r.additional_params = json!({"reservationId": "mine"}).as_object().cloned();
    assert_eq!(
        requested_reservation(&r, Some("cfg"))
            .unwrap()
            .unwrap()
            .as_str(),
        "mine"
    );
    r.additional_params = json!({"reservationId": 7}).as_object().cloned();
    let e = requested_reservation(&r, Some("cfg")).unwrap_err();
    assert_eq!(
        (e.status(), e.field()),
        (422, "additionalParams.reservationId")
    );
}

#[test]
fn a_grant_placed_outside_the_reservations_zone_draws_nothing() {
    let (mut l, mut ids) = ledger();
    let none = BTreeSet::new();
    let reg = registered(0);
    let out = request(GrantedLcmOperationType::Scale, "op-2", 1);
    let mut g = granted(&out, true);
    let s = settle(&mut l, &mut ids, &mut g, &out, Some(&reg), &none, 2).unwrap();
    assert!(!s.changed());
    assert!(g.add_resources[0].reservation_id.is_none());
    assert_eq!(reserved_instances(&l), 0);
}

#[test]
fn a_heal_draws_nothing_and_keeps_the_draws() {
    let (mut l, mut ids) = ledger();
    let none = BTreeSet::new();
    let inst = request(GrantedLcmOperationType::Instantiate, "op-1", 1);
    let mut g = granted(&inst, false);
    let s = settle(&mut l, &mut ids, &mut g, &inst, None, &none, 1).unwrap();
    let RegistryChange::Put(reg) = after_grant(&inst, None, "default", s.drawn, &s.released) else {
        panic!()
    };
    // Tacker's heal: the VNFC removed and made again (a new COMPUTE resource of its VDU).
    let mut heal = scale_in(&[("u-1", "srv-a")]);
    heal.operation = GrantedLcmOperationType::Heal;
    heal.add_resources = request(GrantedLcmOperationType::Heal, "op-2", 1).add_resources;
    assert!(scaled_in_references(&heal, Some(&reg)).is_empty());
    let release = released_by(&heal, Some(&reg), &BTreeMap::new());
    assert!(release.is_empty());
    let mut g = granted(&heal, false);
    let s = settle(&mut l, &mut ids, &mut g, &heal, Some(&reg), &release, 2).unwrap();
    assert!(!s.changed());
    assert_eq!(reserved_instances(&l), 1);
    assert!(!draws_for(GrantedLcmOperationType::Heal));
    assert!(draws_for(GrantedLcmOperationType::ScaleToLevel));
}
