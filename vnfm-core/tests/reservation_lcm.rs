//! Reservations through whole LCM operations on the simulated cloud: the grant of an instantiate
//! draws from a reservation (`reservation::lcm::draw_operation`), the operation runs pinned to
//! the granted zones, `settle` keeps what landed in the reservation's zone, a scale-out draws
//! more, and a scale-in and a terminate give back (`release_after`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{ListZones, VirtualClock, ZoneCatalog};
use vnfm_core::id::IdGen;
use vnfm_core::lcm::{
    CreateVnfRequest, InstantiateVnfRequest, ScaleType, ScaleVnfRequest, TerminateVnfRequest,
    TerminationType,
};
use vnfm_core::lifecycle::{Drivers, LcmConfig, Lifecycle, OperationOptions};
use vnfm_core::package::fs;
use vnfm_core::placement::Selection;
use vnfm_core::reservation::lcm::{
    add_catalogue, draw_operation, instantiate_draw, release_after, scale_draw, settle, vnfc_ids,
    vnfc_ref,
};
use vnfm_core::reservation::{Capacity, Ledger, ReservationRequest, ResourceLine};
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;

fn t(h: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap() + Duration::hours(h)
}

fn live_refs(l: &Ledger) -> Vec<String> {
    l.allocations()
        .filter(|a| a.is_live())
        .filter_map(|a| a.instance_ref.clone())
        .collect()
}

#[tokio::test]
async fn an_instance_draws_from_a_reservation_and_gives_everything_back() {
    let examples = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"));
    let sim = SimCloud::new(
        CloudFile::load(examples.join("clouds/demo.yaml")).unwrap(),
        1,
    );
    let store = MemoryStore::new();
    let drivers = Drivers {
        stacks: Arc::new(sim.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(store.clone()),
        clock: Arc::new(VirtualClock::new(t(0))),
        cluster: None,
    };
    let mut config = LcmConfig::standard().unwrap();
    config.seed = 3;
    config.grant_selection = Selection::CapacityAware;
    config.fallback_best_effort = true;
    let lcm = Lifecycle::new(drivers, config);
    let pkg = fs::load(&examples.join("packages/demo-vnf")).unwrap();

    // The ledger: the simulated cloud's zones, and a reservation in the largest zone (AZ-3)
    // with room for four VNFCs of VDU1, active from t(1).
    let zones = sim.list_zones(ListZones::default()).await.unwrap();
    let mut ledger = Ledger::default();
    let mut ids = IdGen::seeded(7);
    add_catalogue(&mut ledger, &mut ids, &zones, t(0)).unwrap();
    let mut req = ReservationRequest::new(
        "AZ-3",
        Capacity::compute(8, 16384, 4).with(ResourceLine::Size, 200),
    )
    .with_window(t(1), t(9));
    req.id = Some("rollout".into());
    ledger.create_reservation(req, &mut ids, t(0)).unwrap();

    let inst = lcm
        .create(&pkg, &CreateVnfRequest::new(pkg.descriptor_id.clone()))
        .await
        .unwrap();
    let mut request = InstantiateVnfRequest::new("default");
    request.additional_params = json!({"reservationId": "rollout"}).as_object().cloned();
    let (rid, op) = instantiate_draw(&request).unwrap().unwrap();

    // Before the reservation starts: refused, nothing drawn.
    ledger.advance_to(t(0)).unwrap();
    let granted = lcm
        .grant_only(&pkg, &inst, op.clone())
        .await
        .unwrap()
        .unwrap();
    let err = draw_operation(&mut ledger, &mut ids, &pkg, &inst, granted, &rid, t(0)).unwrap_err();
    assert!(err.to_string().contains("expected active"), "{err}");
    assert!(live_refs(&ledger).is_empty());

    // Active: the VNFCs granted into AZ-3 draw, one allocation each, named after the VNFC.
    let granted = lcm.grant_only(&pkg, &inst, op).await.unwrap().unwrap();
    let draw = draw_operation(&mut ledger, &mut ids, &pkg, &inst, granted, &rid, t(1)).unwrap();
    assert!(!draw.allocations.is_empty());
    assert!(draw
        .grant
        .add_resources
        .iter()
        .any(|g| g.reservation_id.as_deref() == Some("rollout")));
    let opts = OperationOptions {
        pinned: draw.pinned.clone(),
        automatic: false,
        ..OperationOptions::default()
    };
    let r = lcm
        .instantiate(&inst.id, &pkg, &request, &opts)
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let settled = settle(&mut ledger, draw, Some(&r), t(1)).unwrap();
    let in_az3: Vec<String> = r
        .instance
        .instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_resource_info.iter())
        .filter(|v| v.zone().is_some_and(|z| z.as_str() == "AZ-3"))
        .map(|v| vnfc_ref(inst.id.as_str(), &v.id))
        .collect();
    let kept: Vec<String> = settled
        .kept
        .iter()
        .filter_map(|a| a.instance_ref.clone())
        .collect();
    assert_eq!(kept, in_az3);
    assert!(settled.released.is_empty());
    assert_eq!(live_refs(&ledger), kept);

    // Scale out with the reservation: the new VNFC pinned into AZ-3 draws too.
    let before = r.instance.clone();
    let mut out = ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale");
    out.additional_params = json!({"reservationId": "rollout"}).as_object().cloned();
    let (rid, op) = scale_draw(&out).unwrap().unwrap();
    let granted = lcm.grant_only(&pkg, &before, op).await.unwrap().unwrap();
    let draw = draw_operation(&mut ledger, &mut ids, &pkg, &before, granted, &rid, t(2)).unwrap();
    let opts = OperationOptions {
        pinned: draw.pinned.clone(),
        automatic: false,
        ..OperationOptions::default()
    };
    let r = lcm.scale(&inst.id, &pkg, &out, &opts).await.unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let added = settle(&mut ledger, draw, Some(&r), t(2)).unwrap().kept;
    assert!(!added.is_empty());
    let after_out = live_refs(&ledger).len();
    assert_eq!(after_out, kept.len() + added.len());

    // Scale in gives back the allocations of the VNFCs it removed, no others.
    let before = r.instance.clone();
    let scale_in = ScaleVnfRequest::new(ScaleType::ScaleIn, "VDU1_scale");
    let r = lcm
        .scale(&inst.id, &pkg, &scale_in, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let released = release_after(&mut ledger, Some(&before), &r, t(3)).unwrap();
    let removed: Vec<String> = vnfc_ids(&before)
        .difference(&vnfc_ids(&r.instance))
        .map(|v| vnfc_ref(inst.id.as_str(), v))
        .collect();
    for a in &released {
        assert!(removed.contains(a.instance_ref.as_ref().unwrap()), "{a:?}");
    }
    assert_eq!(live_refs(&ledger).len(), after_out - released.len());

    // Terminate gives back the rest: the reservation is whole again.
    let term = TerminateVnfRequest {
        termination_type: TerminationType::Forceful,
        graceful_termination_timeout: None,
        additional_params: None,
    };
    let r = lcm
        .terminate(&inst.id, &term, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    release_after(&mut ledger, None, &r, t(4)).unwrap();
    assert!(live_refs(&ledger).is_empty());
    let res = ledger.reservation(&"rollout".into()).unwrap();
    assert!(res.allocated.is_zero(), "{res:?}");
}
