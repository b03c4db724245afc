//! Property tests of the ledger against the naive oracle (a list of intervals, scanned).

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;

use super::oracle::{NaiveEntry, NaiveKind, NaiveLedger};
use super::*;
use crate::id::{IdGen, ZoneId};

const ZONES: [&str; 2] = ["A", "B"];
const LINES_USED: [ResourceLine; 2] = [ResourceLine::Cores, ResourceLine::Ram];

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_704_067_200, 0).unwrap()
}

fn m(n: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(n)
}

#[derive(Clone, Debug)]
enum Op {
    Pool {
        zone: usize,
        cores: u64,
        ram: u64,
        s: i64,
        len: Option<i64>,
    },
    Reserve {
        zone: usize,
        cores: u64,
        ram: u64,
        s: i64,
        len: i64,
    },
    Cancel(usize),
    Alloc {
        zone: usize,
        cores: u64,
    },
    Destroy(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..2usize, 0..6u64, 0..6u64, 0..60i64, proptest::option::of(1..40i64))
            .prop_map(|(zone, cores, ram, s, len)| Op::Pool { zone, cores: cores + 1, ram, s, len }),
        6 => (0..2usize, 0..6u64, 0..6u64, 0..60i64, 1..30i64)
            .prop_map(|(zone, cores, ram, s, len)| Op::Reserve { zone, cores, ram, s, len }),
        2 => (0..64usize).prop_map(Op::Cancel),
        1 => (0..2usize, 1..4u64).prop_map(|(zone, cores)| Op::Alloc { zone, cores }),
        1 => (0..64usize).prop_map(Op::Destroy),
    ]
}

fn capacity(cores: u64, ram: u64) -> Capacity {
    Capacity::default()
        .with(ResourceLine::Cores, cores)
        .with(ResourceLine::Ram, ram)
}

/// A ledger and its oracle, driven by the same operations (all at `now = t0`).
struct Pair {
    ledger: Ledger,
    oracle: NaiveLedger,
    ids: IdGen,
    /// Accepted reservations: id and oracle index.
    reservations: Vec<(ReservationId, usize)>,
    allocations: Vec<(AllocationId, usize)>,
}

impl Pair {
    fn new(initial: &[(u64, u64)]) -> Pair {
        let mut p = Pair {
            ledger: Ledger::default(),
            oracle: NaiveLedger::new(),
            ids: IdGen::seeded(9),
            reservations: Vec::new(),
            allocations: Vec::new(),
        };
        for (z, (c, r)) in ZONES.iter().zip(initial) {
            p.ledger.add_zone(*z);
            if *c == 0 && *r == 0 {
                continue;
            }
            p.apply(&Op::Pool {
                zone: ZONES.iter().position(|x| x == z).unwrap(),
                cores: *c,
                ram: *r,
                s: 0,
                len: None,
            });
        }
        p
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Pool {
                zone,
                cores,
                ram,
                s,
                len,
            } => {
                let c = capacity(cores, ram);
                let end = len.map(|l| m(s + l));
                self.ledger
                    .increase_capacity(
                        PoolRequest::new(ZONES[zone], c).with_window(m(s), end),
                        &mut self.ids,
                        t0(),
                    )
                    .unwrap();
                self.oracle
                    .push(NaiveEntry::new(ZONES[zone], NaiveKind::Total, m(s), end, c));
            }
            Op::Reserve {
                zone,
                cores,
                ram,
                s,
                len,
            } => {
                let c = capacity(cores, ram);
                let req = ReservationRequest::new(ZONES[zone], c).with_window(m(s), m(s + len));
                let fits = self
                    .oracle
                    .fits(&ZoneId::from(ZONES[zone]), &c, m(s), m(s + len));
                match self.ledger.create_reservation(req, &mut self.ids, t0()) {
                    Ok(o) => {
                        assert!(fits, "the ledger admitted what the oracle rejects: {op:?}");
                        let i = self.oracle.push(NaiveEntry::new(
                            ZONES[zone],
                            NaiveKind::Reserved,
                            m(s),
                            Some(m(s + len)),
                            c,
                        ));
                        self.reservations.push((o.value.id, i));
                    }
                    Err(LedgerError::DoesNotFit { .. }) => {
                        assert!(!fits, "the ledger rejected what fits: {op:?}");
                    }
                    Err(LedgerError::Invalid(e)) => {
                        assert!(c.is_zero(), "unexpected invalid {e} for {op:?}");
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            Op::Cancel(k) => {
                if self.reservations.is_empty() {
                    return;
                }
                let (id, i) = self.reservations.remove(k % self.reservations.len());
                self.ledger.cancel_reservation(&id, t0()).unwrap();
                // Cancelled at t0: a hold that started at t0 ends at t0, i.e. vanishes.
                self.oracle.remove(i);
            }
            Op::Alloc { zone, cores } => {
                let c = capacity(cores, 0);
                let z = ZoneId::from(ZONES[zone]);
                let fits = self.oracle.min_available_ms(
                    &z,
                    ResourceLine::Cores,
                    t0().timestamp_millis(),
                    i64::MAX,
                ) >= i128::from(cores);
                let r = self.ledger.create_instance(
                    AllocationRequest {
                        zone: Some(z),
                        capacity: c,
                        ..Default::default()
                    },
                    &mut self.ids,
                    t0(),
                );
                match r {
                    Ok(o) => {
                        assert!(fits, "allocation admitted beyond capacity: {op:?}");
                        let i = self.oracle.push(NaiveEntry::new(
                            ZONES[zone],
                            NaiveKind::Used,
                            t0(),
                            None,
                            c,
                        ));
                        self.allocations.push((o.value.id, i));
                    }
                    Err(LedgerError::Rejected(_)) => {
                        assert!(!fits, "allocation that fits rejected")
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            Op::Destroy(k) => {
                if self.allocations.is_empty() {
                    return;
                }
                let (id, i) = self.allocations.remove(k % self.allocations.len());
                self.ledger.destroy_instance(&id, t0()).unwrap();
                self.oracle.remove(i);
            }
        }
    }

    /// No instant of any line of any zone is over-committed.
    fn assert_never_overcommitted(&self) {
        for z in ZONES {
            let z = ZoneId::from(z);
            for t in self.oracle.breakpoints(&z) {
                for l in LINES_USED {
                    assert!(
                        self.oracle.available_at_ms(&z, l, t) >= 0,
                        "{z} {l} over-committed at {t}"
                    );
                }
            }
        }
    }

    fn assert_windows_match(&self, windows: &[(i64, i64)]) {
        for z in ZONES {
            let zid = ZoneId::from(z);
            for (s, len) in windows {
                let (s, e) = (m(*s), m(s + len));
                let report = self.ledger.capacity(&zid, Window::new(s, e)).unwrap();
                for l in LINES_USED {
                    assert_eq!(
                        i128::from(report.available.get(l)),
                        self.oracle.min_available(&zid, l, s, e),
                        "{z} {l} over [{s}, {e})"
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Admission agrees with the oracle at every step, nothing is ever over-committed, window
    /// queries equal the oracle, a snapshot restores the same answers, and cancelling and
    /// destroying everything leaves exactly the pools.
    #[test]
    fn ledger_matches_the_oracle(
        initial in proptest::collection::vec((0..12u64, 0..12u64), 2),
        ops in proptest::collection::vec(op(), 1..60),
        windows in proptest::collection::vec((-5..90i64, 1..50i64), 1..8),
    ) {
        let mut p = Pair::new(&initial);
        for op in &ops {
            p.apply(op);
            p.assert_never_overcommitted();
        }
        p.assert_windows_match(&windows);
        let restored = Ledger::restore(p.ledger.snapshot()).unwrap();
        for z in ZONES {
            for (s, len) in &windows {
                let w = Window::new(m(*s), m(s + len));
                prop_assert_eq!(
                    restored.capacity(&z.into(), w).unwrap(),
                    p.ledger.capacity(&z.into(), w).unwrap()
                );
            }
        }
        while !p.reservations.is_empty() {
            p.apply(&Op::Cancel(0));
        }
        while !p.allocations.is_empty() {
            p.apply(&Op::Destroy(0));
        }
        p.assert_windows_match(&windows);
        for z in ZONES {
            for (s, len) in &windows {
                let r = p.ledger.capacity(&z.into(), Window::new(m(*s), m(s + len))).unwrap();
                prop_assert_eq!(r.reserved, SignedCapacity::default());
                prop_assert_eq!(r.usage, SignedCapacity::default());
            }
        }
    }

    /// Reservations that all fit together give the same ledger in any order.
    #[test]
    fn order_of_independent_operations_does_not_matter(
        reqs in proptest::collection::vec((0..2usize, 1..6u64, 0..6u64, 0..60i64, 1..30i64), 1..25),
        seed in any::<u64>(),
    ) {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let total: u64 = reqs.iter().map(|r| r.1 + r.2).sum();
        let build = |order: &[usize]| {
            let mut l = Ledger::default();
            let mut ids = IdGen::seeded(1);
            for z in ZONES {
                l.increase_capacity(PoolRequest::new(z, capacity(total, total)), &mut ids, t0()).unwrap();
            }
            for i in order {
                let (zone, cores, ram, s, len) = reqs[*i];
                l.create_reservation(
                    ReservationRequest::new(ZONES[zone], capacity(cores, ram))
                        .with_window(m(s), m(s + len))
                        .with_id(format!("r{i}")),
                    &mut ids,
                    t0(),
                )
                .unwrap();
            }
            l
        };
        let forward: Vec<usize> = (0..reqs.len()).collect();
        let mut shuffled = forward.clone();
        shuffled.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
        let (a, b) = (build(&forward), build(&shuffled));
        for z in ZONES {
            let w = Window::new(t0(), m(100));
            prop_assert_eq!(a.utilization(&z.into(), w).unwrap(), b.utilization(&z.into(), w).unwrap());
        }
        let q = ReservationQuery::default();
        prop_assert_eq!(a.query_reservations(&q).unwrap(), b.query_reservations(&q).unwrap());
    }

    /// A counter-offer's amount fits and one more unit does not; its window fits and no
    /// earlier one does.
    #[test]
    fn counter_offers_are_exact(
        initial in proptest::collection::vec((1..12u64, 1..12u64), 2),
        ops in proptest::collection::vec(op(), 1..40),
        (zone, cores, ram, s, len) in (0..2usize, 0..14u64, 0..14u64, 0..60i64, 1..30i64),
    ) {
        let mut p = Pair::new(&initial);
        for op in &ops {
            p.apply(op);
        }
        let c = capacity(cores, ram);
        prop_assume!(!c.is_zero());
        let zid = ZoneId::from(ZONES[zone]);
        let req = ReservationRequest::new(ZONES[zone], c).with_window(m(s), m(s + len));
        match p.ledger.check_reservation(&req, t0()) {
            Ok(()) => prop_assert!(p.oracle.fits(&zid, &c, m(s), m(s + len))),
            Err(LedgerError::DoesNotFit { offer, .. }) => {
                prop_assert!(!p.oracle.fits(&zid, &c, m(s), m(s + len)));
                for (l, _) in c.lines() {
                    let largest = offer.largest.get(l);
                    let min = p.oracle.min_available(&zid, l, m(s), m(s + len));
                    prop_assert!(i128::from(largest) <= min.max(0));
                    prop_assert!(i128::from(largest + 1) > min);
                }
                let fits_at = |t: i64| {
                    p.oracle.fits(
                        &zid,
                        &c,
                        DateTime::from_timestamp_millis(t).unwrap(),
                        DateTime::from_timestamp_millis(t + len * 60_000).unwrap(),
                    )
                };
                let start = m(s).timestamp_millis();
                let mut candidates: Vec<i64> = p
                    .oracle
                    .breakpoints(&zid)
                    .into_iter()
                    .filter(|t| *t > start)
                    .collect();
                candidates.insert(0, start);
                match offer.earliest {
                    Some(w) => {
                        let ws = w.start.timestamp_millis();
                        prop_assert!(ws >= start);
                        prop_assert_eq!(w.end.unwrap() - w.start, Duration::minutes(len));
                        prop_assert!(fits_at(ws));
                        for t in candidates.into_iter().filter(|t| *t < ws) {
                            prop_assert!(!fits_at(t), "an earlier window at {} fits", t);
                        }
                    }
                    None => {
                        for t in candidates {
                            prop_assert!(!fits_at(t), "a window at {} fits", t);
                        }
                    }
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// With time moving: expiry, priority preemption and capacity decrease
// ---------------------------------------------------------------------------------------------

/// An operation at the current time of a timed run.
#[derive(Clone, Debug)]
enum TOp {
    /// Move time forward by this many minutes.
    Advance(i64),
    /// A reservation starting `s` minutes from now, `len` long, its unallocated capacity
    /// released `expiry` minutes after its start (when inside the window).
    Reserve {
        zone: usize,
        cores: u64,
        ram: u64,
        s: i64,
        len: i64,
        expiry: Option<i64>,
        priority: Priority,
    },
    Cancel(usize),
    /// Draw cores from a reservation.
    Draw(usize, u64),
    Destroy(usize),
    /// Remove cores and RAM from `s` minutes from now for `len` minutes (forever: `None`).
    Decrease {
        zone: usize,
        cores: u64,
        ram: u64,
        s: i64,
        len: Option<i64>,
        force: bool,
    },
}

fn priority() -> impl Strategy<Value = Priority> {
    prop_oneof![
        Just(Priority::Low),
        Just(Priority::Normal),
        Just(Priority::High)
    ]
}

fn timed_op() -> impl Strategy<Value = TOp> {
    prop_oneof![
        3 => (0..25i64).prop_map(TOp::Advance),
        6 => (0..2usize, 0..6u64, 0..6u64, 0..40i64, 1..30i64, proptest::option::of(1..30i64), priority())
            .prop_map(|(zone, cores, ram, s, len, expiry, priority)| TOp::Reserve {
                zone, cores, ram, s, len, expiry, priority
            }),
        1 => (0..64usize).prop_map(TOp::Cancel),
        3 => (0..64usize, 1..4u64).prop_map(|(k, c)| TOp::Draw(k, c)),
        1 => (0..64usize).prop_map(TOp::Destroy),
        1 => (0..2usize, 0..4u64, 0..4u64, 0..40i64, proptest::option::of(1..40i64), any::<bool>())
            .prop_map(|(zone, cores, ram, s, len, force)| TOp::Decrease { zone, cores, ram, s, len, force }),
    ]
}

/// The naive model of a reservation, from the module docs: it holds its amounts over
/// `[start, end)`, ended early by a cancellation; once `expiry` has passed while it was live,
/// only what is allocated stays held (from `expiry` until each allocation is destroyed or the
/// reservation ends). Draws do not change what is available (they use the hold).
#[derive(Clone, Debug)]
struct NaiveReservation {
    id: ReservationId,
    zone: usize,
    amounts: Capacity,
    start: i64,
    end: i64,
    /// `i64::MAX`: never before `end`.
    expiry: i64,
    priority: Priority,
    /// Cancelled or preempted at.
    cancelled: Option<i64>,
    preempted: bool,
    /// Allocations drawn: id, cores, start, end (`i64::MAX` while live).
    allocs: Vec<(AllocationId, u64, i64, i64)>,
}

impl NaiveReservation {
    fn stop(&self) -> i64 {
        self.cancelled.map_or(self.end, |c| c.min(self.end))
    }

    /// Whether its unallocated capacity was released by `now`.
    fn released(&self, now: i64) -> bool {
        self.expiry < self.end
            && self.expiry <= now
            && self.cancelled.is_none_or(|c| c >= self.expiry)
    }

    fn status(&self, now: i64) -> ReservationStatus {
        if self.cancelled.is_some() {
            ReservationStatus::Cancelled
        } else if now < self.start {
            ReservationStatus::Initialized
        } else if now < self.end {
            ReservationStatus::Active
        } else {
            ReservationStatus::Expired
        }
    }

    fn allocated(&self) -> u64 {
        self.allocs
            .iter()
            .filter(|a| a.3 == i64::MAX)
            .map(|a| a.1)
            .sum()
    }

    /// Its intervals at `now`.
    fn entries(&self, now: i64) -> Vec<NaiveEntry> {
        let zone = ZoneId::from(ZONES[self.zone]);
        let entry = |s: i64, e: i64, amounts: Capacity| NaiveEntry {
            zone: zone.clone(),
            kind: NaiveKind::Reserved,
            start: s,
            end: e,
            amounts,
        };
        let stop = self.stop();
        if stop <= self.start {
            // Cancelled before it started: it never held anything.
            return Vec::new();
        }
        if self.released(now) {
            let mut v = vec![entry(self.start, self.expiry, self.amounts)];
            for (_, cores, _, end) in &self.allocs {
                v.push(entry(self.expiry, (*end).min(stop), capacity(*cores, 0)));
            }
            v
        } else {
            vec![entry(self.start, stop, self.amounts)]
        }
    }
}

/// A ledger and the naive model, driven through time.
struct Timed {
    ledger: Ledger,
    ids: IdGen,
    now: i64,
    /// Pools and losses (intervals).
    fixed: Vec<NaiveEntry>,
    reservations: Vec<NaiveReservation>,
}

fn ms_of(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn at(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap()
}

impl Timed {
    fn new(initial: &[(u64, u64)]) -> Timed {
        let mut t = Timed {
            ledger: Ledger::default(),
            ids: IdGen::seeded(3),
            now: ms_of(t0()),
            fixed: Vec::new(),
            reservations: Vec::new(),
        };
        for (z, (c, r)) in ZONES.iter().zip(initial) {
            t.ledger.add_zone(*z);
            let cap = capacity(*c + 1, *r + 1);
            t.ledger
                .increase_capacity(PoolRequest::new(*z, cap), &mut t.ids, t0())
                .unwrap();
            t.fixed
                .push(NaiveEntry::new(*z, NaiveKind::Total, t0(), None, cap));
        }
        t
    }

    /// The naive ledger at the current time.
    fn naive(&self) -> NaiveLedger {
        self.naive_without(None)
    }

    fn naive_without(&self, skip: Option<&[usize]>) -> NaiveLedger {
        let mut o = NaiveLedger::new();
        for e in &self.fixed {
            o.push(e.clone());
        }
        for (i, r) in self.reservations.iter().enumerate() {
            if skip.is_some_and(|s| s.contains(&i)) {
                continue;
            }
            for e in r.entries(self.now) {
                o.push(e);
            }
        }
        o
    }

    fn fits(o: &NaiveLedger, zone: usize, c: &Capacity, s: i64, e: i64) -> bool {
        let z = ZoneId::from(ZONES[zone]);
        c.lines()
            .all(|(l, a)| o.min_available_ms(&z, l, s, e) >= i128::from(a))
    }

    /// Live reservations with a live allocation drawn: the ones a cancel refuses.
    fn live(&self) -> Vec<usize> {
        (0..self.reservations.len())
            .filter(|i| {
                matches!(
                    self.reservations[*i].status(self.now),
                    ReservationStatus::Initialized | ReservationStatus::Active
                )
            })
            .collect()
    }

    fn apply(&mut self, op: &TOp) -> Result<(), TestCaseError> {
        let now = at(self.now);
        match *op {
            TOp::Advance(d) => {
                self.now += d * 60_000;
                self.ledger.advance_to(at(self.now)).unwrap();
            }
            TOp::Reserve {
                zone,
                cores,
                ram,
                s,
                len,
                expiry,
                priority,
            } => {
                let c = capacity(cores, ram);
                let start = self.now + s * 60_000;
                let end = start + len * 60_000;
                let mut req = ReservationRequest::new(ZONES[zone], c)
                    .with_window(at(start), at(end))
                    .with_priority(priority);
                let x = expiry.map(|x| start + x * 60_000).filter(|x| *x < end);
                if let Some(x) = x {
                    req = req.with_expiry(at(x));
                }
                // The oracle: it fits, or removing lower-priority reservations of the zone
                // that have not started and overlap it (lowest priority, then latest start,
                // then latest made, first) until it fits makes room; the removed ones that
                // still fit beside it are kept.
                let o = self.naive();
                let mut preempt: Option<Vec<usize>> = None;
                let fits = Self::fits(&o, zone, &c, start, end);
                if !fits {
                    let mut cands: Vec<usize> = (0..self.reservations.len())
                        .filter(|i| {
                            let r = &self.reservations[*i];
                            r.zone == zone
                                && r.status(self.now) == ReservationStatus::Initialized
                                && r.start > self.now
                                && r.priority < priority
                                && r.start < end
                                && start < r.end
                                && c.lines().any(|(l, _)| r.amounts.get(l) > 0)
                        })
                        .collect();
                    cands.sort_by_key(|i| {
                        let r = &self.reservations[*i];
                        (
                            r.priority,
                            std::cmp::Reverse(r.start),
                            std::cmp::Reverse(*i),
                        )
                    });
                    let mut removed = Vec::new();
                    for i in cands {
                        removed.push(i);
                        if Self::fits(&self.naive_without(Some(&removed)), zone, &c, start, end) {
                            preempt = Some(removed.clone());
                            break;
                        }
                    }
                    if let Some(removed) = preempt.as_mut() {
                        // Keep back, latest removed first, each that fits beside the new one.
                        let mut gone = removed.clone();
                        for i in removed.clone().into_iter().rev() {
                            let mut o = self.naive_without(Some(&gone));
                            o.push(NaiveEntry {
                                zone: ZoneId::from(ZONES[zone]),
                                kind: NaiveKind::Reserved,
                                start,
                                end,
                                amounts: c,
                            });
                            let r = &self.reservations[i];
                            if Self::fits(&o, r.zone, &r.amounts, r.start, r.end) {
                                gone.retain(|x| *x != i);
                            }
                        }
                        *removed = gone;
                    }
                }
                match self.ledger.create_reservation(req, &mut self.ids, now) {
                    Ok(out) => {
                        let expected = preempt.clone().unwrap_or_default();
                        prop_assert!(
                            fits || preempt.is_some(),
                            "the ledger admitted what does not fit even with preemption: {op:?}"
                        );
                        let mut preempted: Vec<ReservationId> = out
                            .events
                            .iter()
                            .filter_map(|e| match e {
                                Event::ReservationPreempted { reservation_id, .. } => {
                                    Some(reservation_id.clone())
                                }
                                _ => None,
                            })
                            .collect();
                        preempted.sort();
                        let mut want: Vec<ReservationId> = expected
                            .iter()
                            .map(|i| self.reservations[*i].id.clone())
                            .collect();
                        want.sort();
                        prop_assert_eq!(preempted, want, "preempted by {:?}", op);
                        for i in expected {
                            self.reservations[i].cancelled = Some(self.now);
                            self.reservations[i].preempted = true;
                        }
                        self.reservations.push(NaiveReservation {
                            id: out.value.id,
                            zone,
                            amounts: c,
                            start,
                            end,
                            expiry: x.unwrap_or(i64::MAX),
                            priority,
                            cancelled: None,
                            preempted: false,
                            allocs: Vec::new(),
                        });
                    }
                    Err(LedgerError::DoesNotFit { .. }) => {
                        prop_assert!(
                            !fits && preempt.is_none(),
                            "the ledger rejected what fits (preempting {:?}): {:?}",
                            preempt,
                            op
                        );
                    }
                    Err(LedgerError::Invalid(e)) => {
                        prop_assert!(c.is_zero(), "unexpected invalid {} for {:?}", e, op);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            TOp::Cancel(k) => {
                let live = self.live();
                if live.is_empty() {
                    return Ok(());
                }
                let i = live[k % live.len()];
                let has_allocs = self.reservations[i].allocated() > 0;
                let id = self.reservations[i].id.clone();
                match self.ledger.cancel_reservation(&id, now) {
                    Ok(_) => {
                        prop_assert!(!has_allocs, "cancelled with live allocations");
                        self.reservations[i].cancelled = Some(self.now);
                    }
                    Err(LedgerError::Invalid(_)) => {
                        prop_assert!(has_allocs, "cancel refused without live allocations")
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            TOp::Draw(k, cores) => {
                if self.reservations.is_empty() {
                    return Ok(());
                }
                let i = k % self.reservations.len();
                let r = &self.reservations[i];
                let ok = r.status(self.now) == ReservationStatus::Active
                    && !r.released(self.now)
                    && r.expiry > self.now
                    && r.allocated() + cores <= r.amounts.cores;
                let id = r.id.clone();
                match self
                    .ledger
                    .draw(&id, capacity(cores, 0), &mut self.ids, now)
                {
                    Ok(out) => {
                        prop_assert!(ok, "drew {} from {:?} at {}", cores, r, self.now);
                        self.reservations[i]
                            .allocs
                            .push((out.value.id, cores, self.now, i64::MAX));
                    }
                    Err(LedgerError::Rejected(why)) => {
                        prop_assert!(
                            !ok,
                            "draw of {} from {:?} at {} rejected: {:?}",
                            cores,
                            r,
                            self.now,
                            why
                        )
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            TOp::Destroy(k) => {
                let live: Vec<(usize, usize)> = self
                    .reservations
                    .iter()
                    .enumerate()
                    // A reservation's end closes its live allocations (module docs).
                    .filter(|(_, r)| r.end > self.now)
                    .flat_map(|(i, r)| {
                        r.allocs
                            .iter()
                            .enumerate()
                            .filter(|(_, a)| a.3 == i64::MAX)
                            .map(move |(j, _)| (i, j))
                    })
                    .collect();
                if live.is_empty() {
                    return Ok(());
                }
                let (i, j) = live[k % live.len()];
                let id = self.reservations[i].allocs[j].0.clone();
                self.ledger.destroy_instance(&id, now).unwrap();
                self.reservations[i].allocs[j].3 = self.now;
            }
            TOp::Decrease {
                zone,
                cores,
                ram,
                s,
                len,
                force,
            } => {
                let c = capacity(cores, ram);
                let start = self.now + s * 60_000;
                let end = len.map(|l| start + l * 60_000);
                let loss = NaiveEntry::new(ZONES[zone], NaiveKind::Loss, at(start), end.map(at), c);
                let mut o = self.naive();
                o.push(loss.clone());
                let z = ZoneId::from(ZONES[zone]);
                let short = c
                    .lines()
                    .any(|(l, _)| o.min_available_ms(&z, l, start, end.unwrap_or(i64::MAX)) < 0);
                let req = PoolRequest::new(ZONES[zone], c)
                    .with_window(at(start), end.map(at))
                    .with_force(force);
                match self.ledger.decrease_capacity(req, &mut self.ids, now) {
                    Ok(out) => {
                        prop_assert!(
                            !short || force,
                            "a decrease leaving the zone short accepted without force"
                        );
                        let lost = out
                            .events
                            .iter()
                            .any(|e| matches!(e, Event::CapacityLost { .. }));
                        prop_assert!(
                            !lost || short,
                            "CapacityLost events without a shortfall: {:?}",
                            op
                        );
                        self.fixed.push(loss);
                    }
                    Err(LedgerError::CapacityInUse { .. }) => {
                        prop_assert!(short && !force, "a decrease that fits refused: {:?}", op)
                    }
                    Err(LedgerError::Invalid(e)) => {
                        prop_assert!(c.is_zero(), "unexpected invalid {} for {:?}", e, op);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        Ok(())
    }

    /// Window queries equal the naive model's from a little before now on, and every
    /// reservation's status and release match.
    fn check(&self, windows: &[(i64, i64)]) -> Result<(), TestCaseError> {
        let o = self.naive();
        for z in ZONES {
            let zid = ZoneId::from(z);
            for (s, len) in windows {
                let s = self.now + s * 60_000;
                let e = s + len * 60_000;
                let report = self
                    .ledger
                    .capacity(&zid, Window::new(at(s), at(e)))
                    .unwrap();
                for l in LINES_USED {
                    prop_assert_eq!(
                        i128::from(report.available.get(l)),
                        o.min_available_ms(&zid, l, s, e),
                        "{} {} over [{}, {}) at now {}",
                        z,
                        l,
                        s,
                        e,
                        self.now
                    );
                }
            }
        }
        for r in &self.reservations {
            let v = self.ledger.reservation(&r.id).unwrap();
            prop_assert_eq!(
                v.status,
                r.status(self.now),
                "status of {:?} at {}",
                r,
                self.now
            );
            prop_assert_eq!(
                v.released,
                r.released(self.now),
                "released of {:?} at {}",
                r,
                self.now
            );
            prop_assert_eq!(v.preempted_by.is_some(), r.preempted);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// With time moving: reservations start, release their unallocated capacity at expiry
    /// and end; higher priorities preempt; capacity decreases are refused or forced; at every
    /// step admissions, preemptions, draws, decreases, window queries, statuses and releases
    /// agree with the naive model.
    #[test]
    fn ledger_matches_the_naive_model_through_time(
        initial in proptest::collection::vec((0..10u64, 0..10u64), 2),
        ops in proptest::collection::vec(timed_op(), 1..50),
        windows in proptest::collection::vec((-5..60i64, 1..40i64), 1..5),
    ) {
        let mut t = Timed::new(&initial);
        for op in &ops {
            t.apply(op)?;
            t.check(&windows)?;
        }
    }
}
