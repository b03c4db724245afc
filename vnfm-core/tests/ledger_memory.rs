//! The memory a reservation really costs, measured with a counting global allocator (live heap
//! bytes), against the ledger's own estimate `Ledger::memory()` and against the bound that
//! `benches/README.md` and the `reservation` module docs claim.
//!
//! One test in this binary, so that no other test allocates while it measures (the harness's
//! main thread only waits for it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::System;

use chrono::{DateTime, Duration, Utc};
use rand::{Rng, SeedableRng};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use vnfm_core::id::IdGen;
use vnfm_core::reservation::{Capacity, Ledger, PoolRequest, ReservationRequest};

/// `System`, counting what is allocated and freed (the `unsafe` of a `GlobalAlloc` lives in
/// `stats_alloc`: this workspace forbids unsafe code).
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes live now that were allocated since `region` began.
fn live(region: &Region<'_, System>) -> isize {
    let s = region.change();
    s.bytes_allocated as isize - s.bytes_deallocated as isize + s.bytes_reallocated
}

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_704_067_200, 0).unwrap()
}

/// The documented bound (`benches/README.md`, module docs of `reservation`): heap bytes per
/// reservation at scale, fixed costs excluded. The docs used to claim 256 from
/// `Ledger::memory()`; measured here it is 486 to 512 depending on the range (see the README),
/// and the bound leaves about 10 % for allocator and layout changes.
const BOUND: usize = 560;
/// The range `Ledger::memory()` / measured heap must stay in. The estimate undercounts: it
/// measured 0.52-0.54 of the real heap (the README says so); the range keeps it from drifting
/// further, in either direction, until it is made exact.
const ESTIMATE_RANGE: std::ops::RangeInclusive<f64> = 0.45..=1.15;

/// The bench's workload shape: 3 zones, reservations of 1-8 cores and 1-16 GiB (3 lines), a
/// uniform start in the next year, 1 hour to 7 days long.
fn add(l: &mut Ledger, ids: &mut IdGen, rng: &mut rand_chacha::ChaCha8Rng, n: usize) {
    for _ in 0..n {
        let s = t0() + Duration::minutes(rng.gen_range(1..365 * 24 * 60));
        let e = s + Duration::minutes(rng.gen_range(60..7 * 24 * 60));
        let c = Capacity::compute(rng.gen_range(1..=8), rng.gen_range(1..=16) * 1024, 1);
        let r = l
            .create_reservation(
                ReservationRequest::new(format!("az-{}", rng.gen_range(0..3)), c).with_window(s, e),
                ids,
                t0(),
            )
            .unwrap();
        drop(r);
    }
}

#[test]
fn measured_memory_per_reservation() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
    let mut ids = IdGen::seeded(8);
    let region = Region::new(GLOBAL);
    let empty = live(&region);
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
    let base = live(&region);
    let base_estimate = l.memory().total();
    let mut rows = Vec::new();
    // 8,192 and 16,384 reservations (exact vector capacities) for the marginal cost without
    // the fixed costs, and 10,000 (the README's first row) in between. (Up to 32,768 the
    // marginal cost measured 486 B; kept smaller here for the debug test time.)
    for target in [8_192usize, 10_000, 16_384] {
        let more = target - l.len();
        add(&mut l, &mut ids, &mut rng, more);
        let heap = (live(&region) - empty) as usize;
        let estimate = l.memory().total();
        rows.push((target, heap, estimate));
        println!(
            "{target} reservations: heap {heap} B ({:.1} B/reservation), memory() {estimate} B \
             ({:.1} B/reservation), memory()/heap {:.3}",
            (heap - (base - empty) as usize) as f64 / target as f64,
            (estimate - base_estimate) as f64 / target as f64,
            estimate as f64 / heap as f64
        );
    }
    for (n, heap, estimate) in &rows {
        let ratio = *estimate as f64 / *heap as f64;
        assert!(
            ESTIMATE_RANGE.contains(&ratio),
            "at {n} reservations memory() says {estimate} B, the heap holds {heap} B \
             ({ratio:.3}): not within {ESTIMATE_RANGE:?}"
        );
    }
    let (_, heap_a, _) = rows[0];
    let (_, heap_b, _) = rows[2];
    let marginal = (heap_b - heap_a) / 8_192;
    println!("marginal from 8,192 to 16,384: {marginal} B/reservation (bound {BOUND})");
    assert!(
        marginal <= BOUND,
        "{marginal} B per reservation measured, over the documented {BOUND}"
    );
    drop(l);
}
