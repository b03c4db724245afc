//! `Lifecycle::start`, the one way to start an operation: the reservation flow the core
//! decides (draw before the stack, run pinned, settle, give back) carried out through a
//! `ReservationBook`, a refusal that deletes the instance made for it, a reservation named on
//! an operation that adds nothing, and the `LifecycleEvent`s an observer is told.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{DriverError, ListZones, Store, VirtualClock, ZoneCatalog};
use vnfm_core::id::IdGen;
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, LcmOperationStateType, ScaleType,
    ScaleVnfRequest, TerminateVnfRequest, TerminationType,
};
use vnfm_core::lifecycle::{
    Drivers, LcmConfig, LcmError, Lifecycle, LifecycleEvent, LifecycleObserver, OpRequest,
    StartError, StartOptions,
};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::placement::Selection;
use vnfm_core::reservation::book::{BookError, LedgerChange, ReservationBook};
use vnfm_core::reservation::lcm::add_catalogue;
use vnfm_core::reservation::{Capacity, Ledger, ReservationRequest, ResourceLine};
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;

fn t(h: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap() + Duration::hours(h)
}

/// A ledger in memory at a time the test sets; counts its saves.
#[derive(Debug)]
struct Book {
    state: Mutex<(Ledger, IdGen, DateTime<Utc>, usize)>,
}

impl Book {
    fn at(&self, now: DateTime<Utc>) {
        self.state.lock().unwrap().2 = now;
    }
    fn live(&self) -> Vec<String> {
        let g = self.state.lock().unwrap();
        g.0.allocations()
            .filter(|a| a.is_live())
            .filter_map(|a| a.instance_ref.clone())
            .collect()
    }
    fn saves(&self) -> usize {
        self.state.lock().unwrap().3
    }
}

#[async_trait]
impl ReservationBook for Book {
    async fn apply(&self, change: LedgerChange<'_>) -> Result<(), BookError> {
        let mut g = self.state.lock().unwrap();
        let (ledger, ids, now, saves) = &mut *g;
        let r = change(ledger, ids, *now);
        if !matches!(r, Ok(false)) {
            *saves += 1;
        }
        r.map(|_| ()).map_err(BookError::Ledger)
    }
}

/// Every committed batch's occurrences (id, state), in order.
#[derive(Debug, Default)]
struct Seen(Mutex<Vec<Vec<(String, LcmOperationStateType)>>>);

#[async_trait]
impl LifecycleObserver for Seen {
    async fn event(&self, event: &LifecycleEvent<'_>) -> Result<(), DriverError> {
        let LifecycleEvent::Committed(batch) = event else {
            return Ok(());
        };
        self.0.lock().unwrap().push(
            batch
                .put_op_occs
                .iter()
                .map(|o| (o.id.to_string(), o.operation_state))
                .collect(),
        );
        Ok(())
    }
}

struct World {
    lcm: Lifecycle,
    store: MemoryStore,
    pkg: VnfPackage,
    book: Book,
    seen: Arc<Seen>,
}

/// The demo cloud and package, a ledger of its zones with reservation `rollout` in AZ-3
/// (room for four VNFCs, active over [t(1), t(9))).
async fn world() -> World {
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
    let seen = Arc::new(Seen::default());
    let lcm = Lifecycle::new(drivers, config).with_observer(seen.clone());
    let pkg = fs::load(&examples.join("packages/demo-vnf")).unwrap();
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
    let book = Book {
        state: Mutex::new((ledger, ids, t(0), 0)),
    };
    World {
        lcm,
        store,
        pkg,
        book,
        seen,
    }
}

fn reserved() -> Option<serde_json::Map<String, serde_json::Value>> {
    json!({"reservationId": "rollout"}).as_object().cloned()
}

#[tokio::test]
async fn start_draws_runs_pinned_settles_and_gives_back() {
    let w = world().await;
    let inst = w
        .lcm
        .create(&w.pkg, &CreateVnfRequest::new(w.pkg.descriptor_id.clone()))
        .await
        .unwrap();
    let opts = StartOptions {
        book: Some(&w.book),
        ..StartOptions::default()
    };
    w.book.at(t(1));
    let mut req = InstantiateVnfRequest::new("default");
    req.additional_params = reserved();
    let s = w
        .lcm
        .start(
            &inst.id,
            OpRequest::Instantiate(Box::new(req)),
            Some(&w.pkg),
            &opts,
        )
        .await
        .unwrap();
    assert!(s.report.is_completed(), "{:?}", s.report.op_occ.error);
    assert!(s.ledger_failure.is_none());
    // Kept: exactly the VNFCs that landed in the reservation's zone.
    let in_az3: Vec<String> = s
        .report
        .instance
        .instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_resource_info.iter())
        .filter(|v| v.zone().is_some_and(|z| z.as_str() == "AZ-3"))
        .map(|v| format!("{}/{}", inst.id, v.id))
        .collect();
    assert!(!in_az3.is_empty());
    let kept: Vec<String> = s
        .kept
        .iter()
        .filter_map(|a| a.instance_ref.clone())
        .collect();
    assert_eq!(kept, in_az3);
    assert_eq!(w.book.live(), kept);
    // The draw was saved before the operation, the settlement after it.
    assert_eq!(w.book.saves(), 2);

    // A scale-out draws more; a scale-in gives back what it removed.
    w.book.at(t(2));
    let mut out = ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale");
    out.additional_params = reserved();
    let s = w
        .lcm
        .start(&inst.id, OpRequest::Scale(out), Some(&w.pkg), &opts)
        .await
        .unwrap();
    assert!(s.report.is_completed(), "{:?}", s.report.op_occ.error);
    assert!(!s.kept.is_empty());
    let after_out = w.book.live().len();
    assert_eq!(after_out, kept.len() + s.kept.len());
    w.book.at(t(3));
    let scale_in = ScaleVnfRequest::new(ScaleType::ScaleIn, "VDU1_scale");
    let s = w
        .lcm
        .start(&inst.id, OpRequest::Scale(scale_in), Some(&w.pkg), &opts)
        .await
        .unwrap();
    assert!(s.report.is_completed(), "{:?}", s.report.op_occ.error);
    assert_eq!(w.book.live().len(), after_out - s.released.len());

    // A terminate gives back the rest.
    w.book.at(t(4));
    let term = TerminateVnfRequest {
        termination_type: TerminationType::Forceful,
        graceful_termination_timeout: None,
        additional_params: None,
    };
    let s = w
        .lcm
        .start(&inst.id, OpRequest::Terminate(term), None, &opts)
        .await
        .unwrap();
    assert!(s.report.is_completed(), "{:?}", s.report.op_occ.error);
    assert!(w.book.live().is_empty());

    // The observer saw every commit: the create, then each operation from STARTING to its
    // end, in order.
    let seen = w.seen.0.lock().unwrap().clone();
    assert!(
        seen[0].is_empty(),
        "the create commits no occurrence: {seen:?}"
    );
    let ends: Vec<&LcmOperationStateType> = seen
        .iter()
        .flatten()
        .map(|(_, s)| s)
        .filter(|s| **s == LcmOperationStateType::Completed)
        .collect();
    assert_eq!(ends.len(), 4, "{seen:?}");
    let firsts: Vec<&LcmOperationStateType> = seen
        .iter()
        .skip(1)
        .filter_map(|b| b.first().map(|(_, s)| s))
        .collect();
    assert_eq!(firsts[0], &LcmOperationStateType::Starting, "{seen:?}");
    assert_eq!(firsts.last(), Some(&&LcmOperationStateType::Completed));
}

#[tokio::test]
async fn a_refused_draw_deletes_the_instance_made_for_it_and_runs_nothing() {
    let w = world().await;
    let inst = w
        .lcm
        .create(&w.pkg, &CreateVnfRequest::new(w.pkg.descriptor_id.clone()))
        .await
        .unwrap();
    // Before the reservation is active: refused by the ledger.
    w.book.at(t(0));
    let mut req = InstantiateVnfRequest::new("default");
    req.additional_params = reserved();
    let opts = StartOptions {
        book: Some(&w.book),
        delete_on_refusal: true,
        ..StartOptions::default()
    };
    let err = w
        .lcm
        .start(
            &inst.id,
            OpRequest::Instantiate(Box::new(req)),
            Some(&w.pkg),
            &opts,
        )
        .await
        .unwrap_err();
    match &err {
        StartError::Draw {
            reservation,
            error: BookError::Ledger(e),
        } => {
            assert_eq!(reservation.as_str(), "rollout");
            assert!(e.to_string().contains("expected active"), "{e}");
        }
        other => panic!("expected a ledger refusal, got {other:?}"),
    }
    assert!(w.book.live().is_empty());
    assert!(w.store.instance(&inst.id).await.unwrap_err().is_not_found());
    assert!(w
        .store
        .op_occs(Default::default())
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_reservation_on_a_heal_or_without_a_book_is_refused_before_anything_runs() {
    let w = world().await;
    let inst = w
        .lcm
        .create(&w.pkg, &CreateVnfRequest::new(w.pkg.descriptor_id.clone()))
        .await
        .unwrap();
    let heal = HealVnfRequest {
        additional_params: reserved(),
        ..HealVnfRequest::default()
    };
    let opts = StartOptions {
        book: Some(&w.book),
        ..StartOptions::default()
    };
    let err = w
        .lcm
        .start(&inst.id, OpRequest::Heal(heal), Some(&w.pkg), &opts)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StartError::Lcm(LcmError::Invalid(_)))
            && err
                .to_string()
                .contains("HealVnfRequest.additionalParams.reservationId"),
        "{err}"
    );
    // No book: a reservation cannot be drawn, and the instance stays as it was.
    w.book.at(t(1));
    let mut req = InstantiateVnfRequest::new("default");
    req.additional_params = reserved();
    let err = w
        .lcm
        .start(
            &inst.id,
            OpRequest::Instantiate(Box::new(req)),
            Some(&w.pkg),
            &StartOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StartError::Draw {
                error: BookError::NoLedger,
                ..
            }
        ),
        "{err}"
    );
    assert!(w.store.instance(&inst.id).await.is_ok());
    assert!(w
        .store
        .op_occs(Default::default())
        .await
        .unwrap()
        .is_empty());
}
