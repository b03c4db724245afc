//! Unit tests of the ledger: policy limits, bad inputs, priority preemption, expiry, status
//! transitions, notifications, the Promise and Blazar pitfalls, persistence.

use chrono::{DateTime, Duration, Utc};

use crate::id::{IdGen, ZoneId};
use crate::reservation::*;
use crate::zone::{ComputeHost, ComputeZone, Resources};

fn t0() -> DateTime<Utc> {
    // 2024-01-01T00:00:00Z
    DateTime::from_timestamp(1_704_067_200, 0).unwrap()
}

fn h(n: i64) -> DateTime<Utc> {
    t0() + Duration::hours(n)
}

fn cores(n: u64) -> Capacity {
    Capacity::default().with(ResourceLine::Cores, n)
}

/// A ledger with one zone `AZ-1` of `n` cores from t0 on.
fn ledger(n: u64, policy: Policy) -> (Ledger, IdGen) {
    let mut ids = IdGen::seeded(42);
    let mut l = Ledger::new(policy);
    l.increase_capacity(PoolRequest::new("AZ-1", cores(n)), &mut ids, t0())
        .unwrap();
    (l, ids)
}

fn reserve(
    l: &mut Ledger,
    ids: &mut IdGen,
    n: u64,
    s: i64,
    e: i64,
) -> Result<Reservation, LedgerError> {
    l.create_reservation(
        ReservationRequest::new("AZ-1", cores(n)).with_window(h(s), h(e)),
        ids,
        t0(),
    )
    .map(|o| o.value)
}

fn invalid_text(e: LedgerError) -> String {
    match e {
        LedgerError::Invalid(e) => e.to_string(),
        other => panic!("expected an invalid-input error, got {other:?}"),
    }
}

fn available(l: &Ledger, s: i64, e: i64) -> i64 {
    l.capacity(&"AZ-1".into(), Window::new(h(s), h(e)))
        .unwrap()
        .available
        .cores
}

#[test]
fn promise_same_day_reservations_are_not_overbooked() {
    // Promise's reference code bucketed by day: two reservations on the same day that
    // overlap for one hour both passed. Here the overlap hour decides.
    let (mut l, mut ids) = ledger(10, Policy::default());
    reserve(&mut l, &mut ids, 8, 9, 12).unwrap();
    let err = reserve(&mut l, &mut ids, 8, 11, 14).unwrap_err();
    let LedgerError::DoesNotFit {
        requested,
        available: avail,
        line,
        ..
    } = err
    else {
        panic!("expected DoesNotFit, got {err:?}")
    };
    assert_eq!((line, requested, avail), (ResourceLine::Cores, 8, 2));
    // Back to back on the same day is fine: `end` is exclusive.
    reserve(&mut l, &mut ids, 8, 12, 14).unwrap();
    assert_eq!(available(&l, 0, 24), 2);
}

#[test]
fn blazar_whole_lease_peak_does_not_reject_what_fits() {
    // Blazar sums every lease overlapping the request's whole window (6 + 6 + 4 > 10) and
    // rejects; at every instant only 6 + 4 are held, so it fits.
    let (mut l, mut ids) = ledger(10, Policy::default());
    reserve(&mut l, &mut ids, 6, 0, 2).unwrap();
    reserve(&mut l, &mut ids, 6, 4, 6).unwrap();
    reserve(&mut l, &mut ids, 4, 0, 6).unwrap();
    assert_eq!(available(&l, 0, 6), 0);
    assert_eq!(available(&l, 2, 4), 6);
    // And the worst point is still enforced.
    assert!(matches!(
        reserve(&mut l, &mut ids, 1, 1, 5),
        Err(LedgerError::DoesNotFit { .. })
    ));
    reserve(&mut l, &mut ids, 6, 2, 4).unwrap();
}

#[test]
fn policy_violations_name_their_limit() {
    let policy = Policy {
        max_future_start_range: Some(7),
        max_future_end_range: Some(10),
        max_duration: 48,
        expiry: Some(120),
        ..Policy::default()
    };
    let (mut l, mut ids) = ledger(100, policy);
    let d = |n: i64| t0() + Duration::days(n);
    let mut err =
        |r: ReservationRequest| invalid_text(l.create_reservation(r, &mut ids, t0()).unwrap_err());
    let m = err(ReservationRequest::new("AZ-1", cores(1)).with_window(d(8), d(9)));
    assert!(
        m.contains("start: ") && m.contains("max-future-start-range is 7 days"),
        "{m}"
    );
    let m = err(
        ReservationRequest::new("AZ-1", cores(1)).with_window(d(9), d(9) + Duration::hours(40))
    );
    assert!(m.contains("start"), "{m}");
    let m = err(
        ReservationRequest::new("AZ-1", cores(1)).with_window(d(6), d(6) + Duration::hours(49))
    );
    assert!(m.contains("max-duration of 48 h"), "{m}");
    let m = err(ReservationRequest::new("AZ-1", cores(1))
        .with_window(d(7), d(7) + Duration::hours(48))
        .with_expiry(d(7) + Duration::hours(3)));
    assert!(
        m.contains("expiry: ") && m.contains("policy's expiry is 120 minutes"),
        "{m}"
    );
    // End range: start within 7 days, end beyond 10 days needs a duration > 48 h, so use
    // a tighter end range.
    l.set_policy(Policy {
        max_future_end_range: Some(2),
        ..l.policy().clone()
    });
    let m = invalid_text(
        l.create_reservation(
            ReservationRequest::new("AZ-1", cores(1)).with_window(d(1), d(1) + Duration::hours(25)),
            &mut ids,
            t0(),
        )
        .unwrap_err(),
    );
    assert!(
        m.contains("end: ") && m.contains("max-future-end-range is 2 days"),
        "{m}"
    );
    // The policy's expiry is the default expiry.
    let r = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(1)).with_window(d(1), d(1) + Duration::hours(5)),
            &mut ids,
            t0(),
        )
        .unwrap()
        .value;
    assert_eq!(r.expiry, Some(d(1) + Duration::minutes(120)));
}

#[test]
fn default_max_duration_is_a_year() {
    let (mut l, mut ids) = ledger(100, Policy::default());
    assert_eq!(l.policy().max_duration, 8760);
    reserve(&mut l, &mut ids, 1, 0, 8760).unwrap();
    let m = invalid_text(reserve(&mut l, &mut ids, 1, 0, 8761).unwrap_err());
    assert!(m.contains("max-duration of 8760 h"), "{m}");
    // Without end nor expiry: start + max-duration.
    let r = l
        .create_reservation(ReservationRequest::new("AZ-1", cores(1)), &mut ids, t0())
        .unwrap()
        .value;
    assert_eq!(r.end, h(8760));
    assert_eq!(r.status, ReservationStatus::Active);
}

#[test]
fn bad_inputs_are_reported_with_field_and_value() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    let m = invalid_text(reserve(&mut l, &mut ids, 0, 1, 2).unwrap_err());
    assert!(m.starts_with("capacity: every amount is zero"), "{m}");
    let m = invalid_text(reserve(&mut l, &mut ids, 1, 2, 2).unwrap_err());
    assert!(
        m.starts_with("end: ") && m.contains("expected end > start"),
        "{m}"
    );
    let m = invalid_text(reserve(&mut l, &mut ids, 1, 3, 2).unwrap_err());
    assert!(m.contains("is not after start"), "{m}");
    let m = invalid_text(reserve(&mut l, &mut ids, MAX_AMOUNT + 1, 1, 2).unwrap_err());
    assert!(
        m.starts_with("capacity.cores: amount 1099511627777 is too large"),
        "{m}"
    );
    let m = invalid_text(
        l.create_reservation(
            ReservationRequest::new("AZ-9", cores(1)).with_window(h(1), h(2)),
            &mut ids,
            t0(),
        )
        .unwrap_err(),
    );
    assert_eq!(
        m,
        "zone: unknown zone AZ-9; expected a declared zone (AZ-1)"
    );
    let m = invalid_text(
        l.create_reservation(
            ReservationRequest::new("AZ-1", cores(1)).with_window(h(1), h(2)),
            &mut ids,
            h(1) + Duration::minutes(1),
        )
        .unwrap_err(),
    );
    assert!(
        m.starts_with("start: ") && m.contains("is before now"),
        "{m}"
    );
    let m = invalid_text(l.cancel_reservation(&"nope".into(), h(2)).unwrap_err());
    assert_eq!(
        m,
        "reservationId: unknown reservation nope; expected the id of an existing reservation"
    );
    let m = invalid_text(l.advance_to(h(1)).unwrap_err());
    assert!(
        m.starts_with("now: ") && m.contains("non-decreasing"),
        "{m}"
    );
    let m = invalid_text(
        l.update_reservation(&"nope".into(), ReservationUpdate::default(), h(2))
            .unwrap_err(),
    );
    assert!(m.contains("unknown reservation nope"), "{m}");
    let m = invalid_text(l.destroy_instance(&"a".into(), h(2)).unwrap_err());
    assert!(m.starts_with("allocationId: unknown allocation a"), "{m}");
    // A taken id.
    l.create_reservation(
        ReservationRequest::new("AZ-1", cores(1))
            .with_window(h(3), h(4))
            .with_id("mine"),
        &mut ids,
        h(2),
    )
    .unwrap();
    let m = invalid_text(
        l.create_reservation(
            ReservationRequest::new("AZ-1", cores(1))
                .with_window(h(3), h(4))
                .with_id("mine"),
            &mut ids,
            h(2),
        )
        .unwrap_err(),
    );
    assert_eq!(m, "id: reservation mine already exists; expected a new id");
    // Zero-amount allocation; allocation without zone nor reservation.
    let m = invalid_text(
        l.create_instance(
            AllocationRequest {
                zone: Some("AZ-1".into()),
                ..Default::default()
            },
            &mut ids,
            h(2),
        )
        .unwrap_err(),
    );
    assert!(m.starts_with("capacity: every amount is zero"), "{m}");
    let m = invalid_text(
        l.create_instance(
            AllocationRequest {
                capacity: cores(1),
                ..Default::default()
            },
            &mut ids,
            h(2),
        )
        .unwrap_err(),
    );
    assert!(m.contains("needs a zone"), "{m}");
    // Negative amounts cannot even be parsed.
    let e = serde_json::from_str::<ReservationRequest>(
        r#"{"zone": "AZ-1", "capacity": {"cores": -2}}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("invalid value: integer `-2`"), "{e}");
}

#[test]
fn allocations_are_checked_against_the_reservation() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    let r = reserve(&mut l, &mut ids, 4, 1, 3).unwrap();
    let rej = |e: LedgerError| match e {
        LedgerError::Rejected(r) => r,
        other => panic!("expected a rejection, got {other:?}"),
    };
    // Not started yet.
    let e = rej(l.draw(&r.id, cores(1), &mut ids, t0()).unwrap_err());
    assert_eq!(
        e,
        Rejection::NotActive {
            id: r.id.clone(),
            status: ReservationStatus::Initialized
        }
    );
    // Unknown.
    let e = rej(l
        .draw(&"ghost".into(), cores(1), &mut ids, h(1))
        .unwrap_err());
    assert_eq!(e, Rejection::UnknownReservation("ghost".into()));
    // Active: draw 3 of 4, then 2 more is too much.
    let a = l.draw(&r.id, cores(3), &mut ids, h(1)).unwrap().value;
    let e = rej(l.draw(&r.id, cores(2), &mut ids, h(1)).unwrap_err());
    assert_eq!(
        e.to_string(),
        format!("reservation {} has 1 cores remaining, 2 requested", r.id)
    );
    assert_eq!(l.reservation(&r.id).unwrap().remaining, cores(1));
    // Drawing from a reservation does not change the zone's availability.
    assert_eq!(available(&l, 1, 3), 6);
    assert_eq!(
        l.capacity(&"AZ-1".into(), Window::new(h(1), h(3)))
            .unwrap()
            .usage
            .cores,
        3
    );
    // Destroy gives it back to the reservation.
    l.destroy_instance(&a.id, h(2)).unwrap();
    assert_eq!(l.reservation(&r.id).unwrap().remaining, cores(4));
    let m = invalid_text(l.destroy_instance(&a.id, h(2)).unwrap_err());
    assert!(m.contains("already ended"), "{m}");
    // Wrong zone.
    l.increase_capacity(PoolRequest::new("AZ-2", cores(1)), &mut ids, h(2))
        .unwrap();
    let e = rej(l
        .create_instance(
            AllocationRequest {
                reservation: Some(r.id.clone()),
                zone: Some("AZ-2".into()),
                capacity: cores(1),
                ..Default::default()
            },
            &mut ids,
            h(2),
        )
        .unwrap_err());
    assert!(matches!(e, Rejection::WrongZone { .. }), "{e:?}");
    // Expired.
    let e = rej(l.draw(&r.id, cores(1), &mut ids, h(3)).unwrap_err());
    assert_eq!(
        e,
        Rejection::NotActive {
            id: r.id.clone(),
            status: ReservationStatus::Expired
        }
    );
}

#[test]
fn unreserved_allocations_never_take_reserved_capacity() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    reserve(&mut l, &mut ids, 7, 5, 6).unwrap();
    let alloc = |l: &mut Ledger, ids: &mut IdGen, n: u64| {
        l.create_instance(
            AllocationRequest {
                zone: Some("AZ-1".into()),
                capacity: cores(n),
                ..Default::default()
            },
            ids,
            h(1),
        )
    };
    // An unreserved allocation lasts until destroyed, so the future reservation counts.
    let e = alloc(&mut l, &mut ids, 4).unwrap_err();
    assert_eq!(
        e.to_string(),
        "allocation rejected: zone AZ-1 has 3 cores unreserved from now on, 4 requested"
    );
    let a = alloc(&mut l, &mut ids, 3).unwrap().value;
    assert!(a.is_live());
    assert_eq!(available(&l, 1, 10), 0);
    l.destroy_instance(&a.id, h(2)).unwrap();
    assert_eq!(available(&l, 2, 10), 3);
    assert_eq!(available(&l, 6, 10), 10);
}

#[test]
fn preemption_takes_as_few_lower_priority_reservations_as_needed_and_notifies() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    let sub = l
        .subscribe(
            Some("http://nfvo/cb".into()),
            SubscriptionFilter::Reservation {
                zone: Some("AZ-1".into()),
                reservation: None,
                events: vec![EventKind::Preempted],
            },
            &mut ids,
        )
        .unwrap()
        .value;
    let low = |n: u64, s: i64, e: i64, p: Priority| {
        ReservationRequest::new("AZ-1", cores(n))
            .with_window(h(s), h(e))
            .with_priority(p)
    };
    let a = l
        .create_reservation(low(4, 2, 4, Priority::Low), &mut ids, t0())
        .unwrap()
        .value;
    let b = l
        .create_reservation(low(4, 2, 4, Priority::Normal), &mut ids, t0())
        .unwrap()
        .value;
    // Started reservations are never preempted.
    let c = l
        .create_reservation(low(2, 0, 4, Priority::Low), &mut ids, t0())
        .unwrap()
        .value;
    assert_eq!(c.status, ReservationStatus::Active);
    // Normal cannot preempt normal; low is preempted first.
    let o = l
        .create_reservation(low(3, 3, 5, Priority::Normal), &mut ids, h(1))
        .unwrap();
    let n = o.value;
    assert_eq!(o.events.len(), 1);
    assert_eq!(
        o.events[0],
        Event::ReservationPreempted {
            reservation_id: a.id.clone(),
            zone: "AZ-1".into(),
            by: n.id.clone(),
            at: h(1),
        }
    );
    assert_eq!(o.notifications.len(), 1);
    assert_eq!(o.notifications[0].subscription_id, sub.id);
    assert_eq!(
        o.notifications[0].callback_uri.as_deref(),
        Some("http://nfvo/cb")
    );
    let a = l.reservation(&a.id).unwrap();
    assert_eq!(a.status, ReservationStatus::Cancelled);
    assert_eq!(a.preempted_by.as_ref(), Some(&n.id));
    assert_eq!(
        l.reservation(&b.id).unwrap().status,
        ReservationStatus::Initialized
    );
    // Now b (normal, 4) and c (low, started, 2) hold 2..3: a high request for 5 cores
    // preempts b, the only candidate, and nothing else.
    let o = l
        .create_reservation(low(5, 2, 3, Priority::High), &mut ids, h(1))
        .unwrap();
    let preempted: Vec<_> = o.events.iter().filter_map(Event::reservation_id).collect();
    assert_eq!(preempted, vec![&b.id]);
    // With preemption off, the same situation is a plain rejection.
    let (mut l, mut ids) = ledger(
        10,
        Policy {
            preemption: false,
            ..Policy::default()
        },
    );
    l.create_reservation(low(10, 2, 4, Priority::Low), &mut ids, t0())
        .unwrap();
    assert!(matches!(
        l.create_reservation(low(1, 2, 4, Priority::High), &mut ids, t0()),
        Err(LedgerError::DoesNotFit { .. })
    ));
}

#[test]
fn preemption_that_cannot_help_changes_nothing() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    let a = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(3))
                .with_window(h(2), h(4))
                .with_priority(Priority::Low),
            &mut ids,
            t0(),
        )
        .unwrap()
        .value;
    l.create_reservation(
        ReservationRequest::new("AZ-1", cores(6))
            .with_window(h(2), h(4))
            .with_priority(Priority::High),
        &mut ids,
        t0(),
    )
    .unwrap();
    let e = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(5))
                .with_window(h(2), h(4))
                .with_priority(Priority::High),
            &mut ids,
            t0(),
        )
        .unwrap_err();
    assert!(matches!(e, LedgerError::DoesNotFit { .. }));
    assert_eq!(
        l.reservation(&a.id).unwrap().status,
        ReservationStatus::Initialized
    );
    assert_eq!(available(&l, 2, 4), 1);
}

#[test]
fn status_transitions_follow_advance_to() {
    let policy = Policy {
        expiring_soon: 30,
        ..Policy::default()
    };
    let (mut l, mut ids) = ledger(10, policy);
    let sub = l
        .subscribe(
            None,
            SubscriptionFilter::Reservation {
                zone: None,
                reservation: None,
                events: vec![],
            },
            &mut ids,
        )
        .unwrap()
        .value;
    let r = reserve(&mut l, &mut ids, 4, 1, 3).unwrap();
    assert_eq!(r.status, ReservationStatus::Initialized);
    assert!(!r.active);
    let o = l.advance_to(h(1)).unwrap();
    assert_eq!(
        o.events,
        vec![Event::ReservationStarted {
            reservation_id: r.id.clone(),
            zone: "AZ-1".into(),
            at: h(1)
        }]
    );
    assert_eq!(o.notifications[0].subscription_id, sub.id);
    let r1 = l.reservation(&r.id).unwrap();
    assert!(r1.active);
    assert_eq!(r1.remaining, cores(4));
    let a = l.draw(&r.id, cores(1), &mut ids, h(2)).unwrap().value;
    // Jump past the end at once: expiring-soon then expired, in order, at their times.
    let o = l.advance_to(h(5)).unwrap();
    assert_eq!(
        o.events,
        vec![
            Event::ReservationExpiringSoon {
                reservation_id: r.id.clone(),
                zone: "AZ-1".into(),
                end: h(3),
                at: h(3) - Duration::minutes(30),
            },
            Event::ReservationExpired {
                reservation_id: r.id.clone(),
                zone: "AZ-1".into(),
                closed_allocations: vec![a.id.clone()],
                at: h(3),
            },
        ]
    );
    assert_eq!(o.notifications.len(), 2);
    let r2 = l.reservation(&r.id).unwrap();
    assert_eq!(r2.status, ReservationStatus::Expired);
    assert_eq!(r2.remaining, Capacity::default());
    assert_eq!(l.allocation(&a.id).unwrap().end, Some(h(3)));
    // Nothing more happens.
    assert!(l.advance_to(h(100)).unwrap().events.is_empty());
    // Cancel: an initialized one goes away entirely.
    let c = reserve(&mut l, &mut ids, 10, 200, 300);
    assert!(c.is_err(), "a request at t0 is before the ledger's now");
    let c = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(10)).with_window(h(200), h(300)),
            &mut ids,
            h(100),
        )
        .unwrap()
        .value;
    assert_eq!(available(&l, 200, 300), 0);
    let o = l.cancel_reservation(&c.id, h(101)).unwrap();
    assert_eq!(o.value.status, ReservationStatus::Cancelled);
    assert!(matches!(o.events[0], Event::ReservationCancelled { .. }));
    assert_eq!(available(&l, 200, 300), 10);
    let m = invalid_text(l.cancel_reservation(&c.id, h(101)).unwrap_err());
    assert!(
        m.contains("is cancelled; expected an initialized or active"),
        "{m}"
    );
}

#[test]
fn expiry_releases_unallocated_capacity() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    // Immediate use: no start, valid until expiry.
    let r = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(6)).with_expiry(h(2)),
            &mut ids,
            t0(),
        )
        .unwrap();
    assert!(matches!(r.events[0], Event::ReservationStarted { .. }));
    let r = r.value;
    assert_eq!(
        (r.start, r.end, r.status),
        (t0(), h(2), ReservationStatus::Active)
    );
    // Future use with an expiry before the end.
    let f = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(4))
                .with_window(h(1), h(10))
                .with_expiry(h(3)),
            &mut ids,
            t0(),
        )
        .unwrap()
        .value;
    assert_eq!(available(&l, 4, 10), 6);
    let a = l.draw(&f.id, cores(1), &mut ids, h(2)).unwrap().value;
    let o = l.advance_to(h(3)).unwrap();
    let released: Vec<_> = o
        .events
        .iter()
        .filter_map(|e| match e {
            Event::UnallocatedReleased {
                reservation_id,
                released,
                at,
                ..
            } => Some((reservation_id.clone(), *released, *at)),
            _ => None,
        })
        .collect();
    assert_eq!(released, vec![(f.id.clone(), cores(3), h(3))]);
    // Only the allocated core is still held.
    assert_eq!(available(&l, 3, 10), 9);
    let fr = l.reservation(&f.id).unwrap();
    assert!(fr.released);
    assert_eq!(fr.remaining, Capacity::default());
    let e = l.draw(&f.id, cores(1), &mut ids, h(3)).unwrap_err();
    assert!(
        matches!(e, LedgerError::Rejected(Rejection::Released { .. })),
        "{e:?}"
    );
    // Destroying the allocation after the release gives its core to the zone.
    l.destroy_instance(&a.id, h(4)).unwrap();
    assert_eq!(available(&l, 4, 10), 10);
    assert_eq!(available(&l, 3, 10), 9);
}

#[test]
fn counter_offer_gives_the_largest_amount_and_the_earliest_window() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    reserve(&mut l, &mut ids, 7, 2, 5).unwrap();
    reserve(&mut l, &mut ids, 9, 6, 7).unwrap();
    let e = reserve(&mut l, &mut ids, 5, 1, 3).unwrap_err();
    let LedgerError::DoesNotFit { offer, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(offer.largest, cores(3));
    // 2 h of 5 cores: [5, 6) is free but too short, [6, 7) is taken, so from 7.
    assert_eq!(offer.earliest, Some(Window::new(h(7), h(9))));
    // A one-hour request fits in the gap.
    let e = reserve(&mut l, &mut ids, 5, 2, 3).unwrap_err();
    let LedgerError::DoesNotFit { offer, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(offer.earliest, Some(Window::new(h(5), h(6))));
    // More than the zone ever has: no window.
    let e = reserve(&mut l, &mut ids, 11, 2, 3).unwrap_err();
    let LedgerError::DoesNotFit { offer, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(offer.earliest, None);
    assert_eq!(offer.largest, cores(3));
    // The policy bounds the search.
    l.set_policy(Policy {
        max_future_start_range: Some(0),
        ..Policy::default()
    });
    let e = l
        .check_reservation(
            &ReservationRequest::new("AZ-1", cores(5)).with_window(t0(), h(3)),
            t0(),
        )
        .unwrap_err();
    let LedgerError::DoesNotFit { offer, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(offer.earliest, None);
}

#[test]
fn capacity_threshold_notifies_once_per_crossing() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    let o = l
        .subscribe(
            Some("http://x".into()),
            SubscriptionFilter::Capacity {
                zone: "AZ-1".into(),
                line: ResourceLine::Cores,
                op: Comparison::Lt,
                value: 5,
            },
            &mut ids,
        )
        .unwrap();
    assert!(o.notifications.is_empty());
    let r = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(6)).with_expiry(h(1)),
            &mut ids,
            t0(),
        )
        .unwrap();
    assert_eq!(r.notifications.len(), 1);
    let Event::CapacityThreshold { available, .. } = &r.notifications[0].event else {
        panic!("{:?}", r.notifications)
    };
    assert_eq!(*available, 4);
    // Still below: no repeat.
    let o = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(1)).with_expiry(h(2)),
            &mut ids,
            t0(),
        )
        .unwrap();
    assert!(o.notifications.is_empty());
    // Back above at the first expiry, then below again.
    assert!(l.advance_to(h(1)).unwrap().notifications.is_empty());
    let o = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(6)).with_expiry(h(2)),
            &mut ids,
            h(1),
        )
        .unwrap();
    assert_eq!(o.notifications.len(), 1);
    let id = l.subscriptions()[0].id.clone();
    l.unsubscribe(&id).unwrap();
    assert!(l.unsubscribe(&id).is_err());
}

#[test]
fn forced_decrease_notifies_the_reservations_that_lose_capacity() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    let hi = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(5))
                .with_window(h(1), h(3))
                .with_priority(Priority::High),
            &mut ids,
            t0(),
        )
        .unwrap()
        .value;
    let lo = l
        .create_reservation(
            ReservationRequest::new("AZ-1", cores(4))
                .with_window(h(1), h(3))
                .with_priority(Priority::Low),
            &mut ids,
            t0(),
        )
        .unwrap()
        .value;
    let dec = PoolRequest::new("AZ-1", cores(3)).with_window(h(2), Some(h(4)));
    let e = l
        .decrease_capacity(dec.clone(), &mut ids, t0())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "decreasing cores in zone AZ-1 would leave it short by 2; set force to accept the loss"
    );
    assert_eq!(available(&l, 0, 10), 1);
    let o = l
        .decrease_capacity(dec.with_force(true), &mut ids, t0())
        .unwrap();
    assert!(o.value.decrease);
    assert_eq!(
        o.events,
        vec![Event::CapacityLost {
            reservation_id: lo.id,
            zone: "AZ-1".into(),
            line: ResourceLine::Cores,
            shortfall: 2,
            at: t0(),
        }]
    );
    assert_ne!(o.events[0].reservation_id(), Some(&hi.id));
    assert_eq!(available(&l, 2, 3), -2);
    assert_eq!(available(&l, 3, 4), 7);
    // Decreasing an unknown zone is an error.
    assert!(l
        .decrease_capacity(PoolRequest::new("AZ-7", cores(1)), &mut ids, t0())
        .is_err());
}

#[test]
fn capacity_reports_fits_and_utilization() {
    let (mut l, mut ids) = ledger(16, Policy::default());
    l.increase_capacity(
        PoolRequest::new("AZ-1", Capacity::compute(0, 32768, 10)).with_window(t0(), Some(h(10))),
        &mut ids,
        t0(),
    )
    .unwrap();
    l.create_reservation(
        ReservationRequest::new("AZ-1", Capacity::compute(4, 8192, 2)).with_window(h(1), h(2)),
        &mut ids,
        t0(),
    )
    .unwrap();
    let z = ZoneId::from("AZ-1");
    let w = Window::new(t0(), h(5));
    let r = l.capacity(&z, w).unwrap();
    assert_eq!(
        (r.total.cores, r.reserved.cores, r.available.cores),
        (16, 4, 12)
    );
    assert_eq!((r.total.ram, r.available.ram), (32768, 24576));
    // Total drops to zero ram after h(10): the worst point of a longer window sees it.
    let r = l.capacity(&z, Window::from(t0())).unwrap();
    assert_eq!(r.total.ram, 0);
    let flavour = Capacity::compute(2, 4096, 1);
    assert_eq!(l.fit_count(&z, &flavour, w).unwrap(), 6);
    assert_eq!(
        l.fit_count(&z, &flavour, Window::new(h(2), h(5))).unwrap(),
        8
    );
    assert_eq!(
        l.fit_count(&z, &flavour, Window::new(h(2), h(11))).unwrap(),
        0
    );
    let fits = l.fit_counts(&flavour, w).unwrap();
    assert_eq!(
        fits,
        vec![ZoneFit {
            zone: z.clone(),
            count: 6
        }]
    );
    assert!(l.fit_count(&z, &Capacity::default(), w).is_err());
    assert!(l.capacity(&z, Window::new(h(2), h(2))).is_err());
    let u = l.utilization(&z, w).unwrap();
    let points: Vec<_> = u.iter().map(|p| (p.timestamp, p.available.cores)).collect();
    assert_eq!(points, vec![(t0(), 16), (h(1), 12), (h(2), 16)]);
}

#[test]
fn queries_by_zone_window_scope_without_and_elements() {
    let (mut l, mut ids) = ledger(100, Policy::default());
    l.increase_capacity(PoolRequest::new("AZ-2", cores(100)), &mut ids, t0())
        .unwrap();
    let mk = |l: &mut Ledger, ids: &mut IdGen, z: &str, s: i64, e: i64, el: &[&str]| {
        l.create_reservation(
            ReservationRequest::new(z, cores(1))
                .with_window(h(s), h(e))
                .with_elements(el.iter().map(|s| s.to_string()).collect()),
            ids,
            t0(),
        )
        .unwrap()
        .value
        .id
    };
    let a = mk(&mut l, &mut ids, "AZ-1", 1, 3, &["img-1", "net-1"]);
    let b = mk(&mut l, &mut ids, "AZ-1", 2, 10, &["img-1"]);
    let c = mk(&mut l, &mut ids, "AZ-2", 4, 5, &[]);
    let d = mk(&mut l, &mut ids, "AZ-1", 0, 20, &["net-1"]);
    let ids_of = |q: ReservationQuery| -> Vec<ReservationId> {
        l.query_reservations(&q)
            .unwrap()
            .reservations
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    let win = |s: i64, e: i64, scope: Scope| QueryWindow {
        start: h(s),
        end: Some(h(e)),
        scope,
    };
    assert_eq!(
        ids_of(ReservationQuery {
            zone: Some("AZ-1".into()),
            ..Default::default()
        }),
        vec![d.clone(), a.clone(), b.clone()]
    );
    // Inclusive: overlapping, including the one spanning the window.
    assert_eq!(
        ids_of(ReservationQuery {
            window: Some(win(3, 5, Scope::Inclusive)),
            ..Default::default()
        }),
        vec![d.clone(), b.clone(), c.clone()]
    );
    assert_eq!(
        ids_of(ReservationQuery {
            window: Some(win(1, 5, Scope::Exclusive)),
            ..Default::default()
        }),
        vec![a.clone(), c.clone()]
    );
    assert_eq!(
        ids_of(ReservationQuery {
            without: vec![d.clone(), c.clone()],
            ..Default::default()
        }),
        vec![a.clone(), b.clone()]
    );
    assert_eq!(
        ids_of(ReservationQuery {
            elements: ElementsFilter {
                some: vec!["net-1".into(), "nope".into()],
                every: vec![]
            },
            ..Default::default()
        }),
        vec![d.clone(), a.clone()]
    );
    assert_eq!(
        ids_of(ReservationQuery {
            elements: ElementsFilter {
                some: vec![],
                every: vec!["img-1".into(), "net-1".into()]
            },
            ..Default::default()
        }),
        vec![a.clone()]
    );
    let r = l
        .query_reservations(&ReservationQuery {
            zone: Some("AZ-1".into()),
            window: Some(win(0, 4, Scope::Inclusive)),
            show_utilization: true,
            ..Default::default()
        })
        .unwrap();
    let u: Vec<_> = r
        .utilization
        .unwrap()
        .iter()
        .map(|p| (p.timestamp, p.count, p.capacity.cores))
        .collect();
    assert_eq!(
        u,
        vec![
            (h(0), 1, 1),
            (h(1), 2, 2),
            (h(2), 3, 3),
            (h(3), 2, 2),
            (h(4), 0, 0)
        ]
    );
    assert!(l
        .query_reservations(&ReservationQuery {
            zone: Some("nope".into()),
            ..Default::default()
        })
        .is_err());
}

#[test]
fn update_moves_and_resizes_or_changes_nothing() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    let a = reserve(&mut l, &mut ids, 6, 1, 3).unwrap();
    reserve(&mut l, &mut ids, 4, 1, 3).unwrap();
    reserve(&mut l, &mut ids, 8, 5, 6).unwrap();
    // Its own hold does not count against it: growing within the window's slack fails,
    // moving to a free window works.
    let e = l
        .update_reservation(
            &a.id,
            ReservationUpdate {
                capacity: Some(cores(7)),
                ..Default::default()
            },
            t0(),
        )
        .unwrap_err();
    assert!(matches!(e, LedgerError::DoesNotFit { .. }));
    assert_eq!(l.reservation(&a.id).unwrap(), a);
    let o = l
        .update_reservation(
            &a.id,
            ReservationUpdate {
                start: Some(h(3)),
                end: Some(h(5)),
                elements: Some(vec!["img".into()]),
                ..Default::default()
            },
            t0(),
        )
        .unwrap();
    assert_eq!((o.value.start, o.value.end), (h(3), h(5)));
    assert_eq!(o.value.elements, vec!["img".to_string()]);
    assert_eq!(available(&l, 1, 3), 6);
    assert_eq!(available(&l, 3, 5), 4);
    // Once active its start is fixed; with an allocation it cannot shrink below it.
    l.advance_to(h(3)).unwrap();
    let m = invalid_text(
        l.update_reservation(
            &a.id,
            ReservationUpdate {
                start: Some(h(4)),
                ..Default::default()
            },
            h(3),
        )
        .unwrap_err(),
    );
    assert!(m.contains("is active; its start"), "{m}");
    l.draw(&a.id, cores(5), &mut ids, h(3)).unwrap();
    let m = invalid_text(
        l.update_reservation(
            &a.id,
            ReservationUpdate {
                capacity: Some(cores(4)),
                ..Default::default()
            },
            h(3),
        )
        .unwrap_err(),
    );
    assert!(m.contains("at least that large"), "{m}");
    let m = invalid_text(l.cancel_reservation(&a.id, h(3)).unwrap_err());
    assert!(m.contains("live allocation(s)"), "{m}");
    // Extending the end works while the zone has room.
    let o = l
        .update_reservation(
            &a.id,
            ReservationUpdate {
                end: Some(h(8)),
                ..Default::default()
            },
            h(3),
        )
        .unwrap_err();
    assert!(
        matches!(o, LedgerError::DoesNotFit { .. }),
        "8 cores at 5..6 leave 2"
    );
}

#[test]
fn grants_draw_from_a_named_reservation() {
    let (mut l, mut ids) = ledger(10, Policy::default());
    l.increase_capacity(
        PoolRequest::new("AZ-1", Capacity::compute(0, 65536, 10)),
        &mut ids,
        t0(),
    )
    .unwrap();
    let r = l
        .create_reservation(
            ReservationRequest::new("AZ-1", Capacity::compute(4, 8192, 2))
                .with_id("resv-grant-1")
                .with_expiry(h(1)),
            &mut ids,
            t0(),
        )
        .unwrap()
        .value;
    assert_eq!(r.id.as_str(), "resv-grant-1");
    let vdu = Capacity::compute(2, 4096, 1);
    l.check_draw(&r.id, &vdu, t0()).unwrap();
    l.draw(&r.id, vdu, &mut ids, t0()).unwrap();
    l.draw(&r.id, vdu, &mut ids, t0()).unwrap();
    let e = l.check_draw(&r.id, &vdu, t0()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "allocation rejected: reservation resv-grant-1 has 0 cores remaining, 2 requested"
    );
    // Past its expiry (== end for immediate use) the check says so even before the
    // ledger is advanced.
    let e = l
        .check_draw(&r.id, &Capacity::compute(0, 1, 0), h(1))
        .unwrap_err();
    assert!(e.to_string().contains("is expired, expected active"), "{e}");
}

#[test]
fn zones_come_from_the_catalogue() {
    let host = |n: &str, free: Option<Resources>| ComputeHost {
        name: n.into(),
        available: true,
        free,
    };
    let zones = vec![
        ComputeZone {
            name: "AZ-1".into(),
            available: true,
            hosts: Some(vec![
                host("c1", Some(Resources::new(8, 16384, 100))),
                host("c2", Some(Resources::new(4, 8192, 50))),
            ]),
        },
        ComputeZone {
            name: "AZ-2".into(),
            available: true,
            hosts: Some(vec![host("c3", None)]),
        },
    ];
    let mut l = Ledger::default();
    let mut ids = IdGen::seeded(1);
    let quota = Capacity::default()
        .with(ResourceLine::Instances, 20)
        .with(ResourceLine::Addresses, 50);
    let o = l.add_catalogue(&zones, quota, &mut ids, t0()).unwrap();
    assert_eq!(o.value.len(), 1);
    assert_eq!(o.value[0].capacity.cores, 12);
    let r = l.capacity(&"AZ-1".into(), Window::from(t0())).unwrap();
    assert_eq!(
        (
            r.total.cores,
            r.total.ram,
            r.total.size,
            r.total.instances,
            r.total.addresses
        ),
        (12, 24576, 150, 20, 50)
    );
    // AZ-2 reports no free capacity: it is known, with nothing in it.
    assert_eq!(l.zones().len(), 1);
}

#[test]
fn snapshot_restores_everything() {
    let (mut l, mut ids) = ledger(
        20,
        Policy {
            expiry: Some(600),
            ..Policy::default()
        },
    );
    let a = reserve(&mut l, &mut ids, 5, 1, 12).unwrap();
    let b = reserve(&mut l, &mut ids, 3, 2, 4).unwrap();
    l.subscribe(
        None,
        SubscriptionFilter::Reservation {
            zone: None,
            reservation: Some(b.id.clone()),
            events: vec![],
        },
        &mut ids,
    )
    .unwrap();
    l.advance_to(h(2)).unwrap();
    let x = l.draw(&a.id, cores(2), &mut ids, h(2)).unwrap().value;
    l.create_instance(
        AllocationRequest {
            zone: Some("AZ-1".into()),
            capacity: cores(1),
            ..Default::default()
        },
        &mut ids,
        h(2),
    )
    .unwrap();
    l.advance_to(h(11)).unwrap(); // a released at h(11)
    let snap = l.snapshot();
    let json = serde_json::to_string(&snap).unwrap();
    let back: LedgerSnapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, snap);
    let mut r = Ledger::restore(back).unwrap();
    assert_eq!(r.snapshot(), snap);
    for (s, e) in [(0, 1), (1, 2), (2, 4), (4, 11), (11, 12), (12, 100)] {
        let w = Window::new(h(s), h(e));
        assert_eq!(
            r.capacity(&"AZ-1".into(), w).unwrap(),
            l.capacity(&"AZ-1".into(), w).unwrap()
        );
    }
    assert_eq!(r.memory().timelines, l.memory().timelines);
    // Both go on identically.
    let o1 = l.destroy_instance(&x.id, h(11)).unwrap();
    let o2 = r.destroy_instance(&x.id, h(11)).unwrap();
    assert_eq!(o1, o2);
    assert_eq!(l.advance_to(h(13)).unwrap(), r.advance_to(h(13)).unwrap());
    assert_eq!(r.snapshot(), l.snapshot());
    // A snapshot naming an unknown zone is refused, with the entry named.
    let mut bad = snap.clone();
    bad.reservations[0].zone = "AZ-9".into();
    let m = invalid_text(Ledger::restore(bad).unwrap_err());
    assert!(
        m.starts_with("reservations[0].zone: unknown zone AZ-9"),
        "{m}"
    );
}

#[test]
fn a_reservation_costs_at_most_256_bytes() {
    // The marginal cost from 16,384 to 32,768 reservations (both exact vector capacities),
    // so that the fixed costs of zones and queue buckets do not count.
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
    let mut ids = IdGen::seeded(8);
    let mut l = Ledger::default();
    for z in 0..3 {
        l.increase_capacity(
            PoolRequest::new(
                format!("az-{z}"),
                Capacity::compute(1 << 30, 1 << 30, 1 << 30),
            ),
            &mut ids,
            t0(),
        )
        .unwrap();
    }
    let mut add = |l: &mut Ledger, n: usize| {
        for _ in 0..n {
            let s = t0() + Duration::minutes(rng.gen_range(1..365 * 24 * 60));
            let e = s + Duration::minutes(rng.gen_range(60..7 * 24 * 60));
            let c = Capacity::compute(rng.gen_range(1..8), rng.gen_range(1..16) * 1024, 1);
            l.create_reservation(
                ReservationRequest::new(format!("az-{}", rng.gen_range(0..3)), c).with_window(s, e),
                &mut ids,
                t0(),
            )
            .unwrap();
        }
    };
    add(&mut l, 16_384);
    let before = l.memory();
    add(&mut l, 16_384);
    let after = l.memory();
    let per = (after.total() - before.total()) / 16_384;
    assert!(
        per <= 256,
        "{per} bytes per reservation: {before:?} -> {after:?}"
    );
}
