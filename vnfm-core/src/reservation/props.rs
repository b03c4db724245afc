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
