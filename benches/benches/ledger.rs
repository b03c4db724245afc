//! Capacity ledger: admission check and window query against the naive interval scan, at
//! 10,000, 100,000 and 1,000,000 reservations over 100 zones.
//!
//! Reservations come from a seeded generator: a uniform zone, 1-8 cores, 1-16 GiB of RAM and
//! one instance, starting at a uniform minute of the next 365 days and lasting 1 hour to
//! 7 days. Each zone has 2,000 cores, 4,000,000 MiB and 10,000 instances, so almost every
//! reservation is admitted. Queries are 256 more requests of the same shape, cycled.
//!
//! - `ledger_admission`: `Ledger::check_reservation` (policy checks + the worst point of each
//!   requested line over the window) vs `NaiveLedger::fits` (one scan of every interval).
//! - `ledger_window_query`: `Ledger::capacity` (total / reserved / used / available of all
//!   seven lines at their worst instant) vs `NaiveLedger::min_available` of the three lines
//!   in use.
//!
//! The bytes per reservation of the ledger are printed to stderr. See `benches/README.md`.

// Benchmark set-up may panic on a broken workload, like a test.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use chrono::{DateTime, Utc};
use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vnfm_core::id::{IdGen, ZoneId};
use vnfm_core::reservation::oracle::{NaiveEntry, NaiveKind, NaiveLedger};
use vnfm_core::reservation::{
    Capacity, Ledger, LedgerError, PoolRequest, ReservationRequest, ResourceLine, Window,
};

const ZONES: usize = 100;
const SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_704_067_200, 0).expect("valid time")
}

fn zone(z: usize) -> ZoneId {
    ZoneId::new(format!("az-{z}"))
}

fn request(rng: &mut ChaCha8Rng) -> ReservationRequest {
    let z = rng.gen_range(0..ZONES);
    let start = t0() + chrono::Duration::minutes(rng.gen_range(1..365 * 24 * 60));
    let end = start + chrono::Duration::minutes(rng.gen_range(60..=7 * 24 * 60));
    let c = Capacity::compute(rng.gen_range(1..=8), rng.gen_range(1..=16) * 1024, 1);
    ReservationRequest::new(zone(z), c).with_window(start, end)
}

struct Workload {
    ledger: Ledger,
    naive: NaiveLedger,
    queries: Vec<ReservationRequest>,
}

fn workload(n: usize, seed: u64) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ids = IdGen::seeded(seed);
    let mut ledger = Ledger::default();
    let mut naive = NaiveLedger::new();
    let pool = Capacity::compute(2_000, 4_000_000, 10_000);
    for z in 0..ZONES {
        ledger
            .increase_capacity(PoolRequest::new(zone(z), pool), &mut ids, t0())
            .expect("pool");
        naive.push(NaiveEntry::new(zone(z), NaiveKind::Total, t0(), None, pool));
    }
    let mut rejected = 0usize;
    for _ in 0..n {
        let req = request(&mut rng);
        let (z, c, s, e) = (req.zone.clone(), req.capacity, req.start, req.end);
        match ledger.create_reservation(req, &mut ids, t0()) {
            Ok(_) => {
                naive.push(NaiveEntry::new(
                    z,
                    NaiveKind::Reserved,
                    s.expect("start"),
                    e,
                    c,
                ));
            }
            Err(LedgerError::DoesNotFit { .. }) => rejected += 1,
            Err(e) => panic!("{e}"),
        }
    }
    let mem = ledger.memory();
    eprintln!(
        "ledger: {n} requests, {} admitted, {rejected} rejected; {} bytes = {:.1} bytes per \
         reservation (records {:.1}, indexes {:.1}, timelines {:.1}, events {:.1})",
        ledger.len(),
        mem.total(),
        mem.total() as f64 / ledger.len() as f64,
        mem.reservations as f64 / ledger.len() as f64,
        mem.indexes as f64 / ledger.len() as f64,
        mem.timelines as f64 / ledger.len() as f64,
        mem.events as f64 / ledger.len() as f64,
    );
    let queries = (0..256).map(|_| request(&mut rng)).collect();
    Workload {
        ledger,
        naive,
        queries,
    }
}

fn bench_ledger(c: &mut Criterion) {
    let workloads: Vec<(usize, Workload)> = SIZES.iter().map(|n| (*n, workload(*n, 5))).collect();
    // The same answers, or the benchmark compares different things.
    for (_, w) in &workloads {
        for q in w.queries.iter().take(32) {
            let (s, e) = (q.start.expect("start"), q.end.expect("end"));
            let fits = w.naive.fits(&q.zone, &q.capacity, s, e);
            assert_eq!(w.ledger.check_reservation(q, t0()).is_ok(), fits);
            let r = w.ledger.capacity(&q.zone, Window::new(s, e)).expect("zone");
            assert_eq!(
                i128::from(r.available.cores),
                w.naive.min_available(&q.zone, ResourceLine::Cores, s, e)
            );
        }
    }

    let mut group = c.benchmark_group("ledger_admission");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(1));
    for (n, w) in &workloads {
        group.bench_with_input(BenchmarkId::new("ledger", n), w, |b, w| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) % w.queries.len();
                let q = &w.queries[i];
                black_box(w.ledger.check_reservation(q, t0()).is_ok())
            })
        });
        group.bench_with_input(BenchmarkId::new("naive_scan", n), w, |b, w| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) % w.queries.len();
                let q = &w.queries[i];
                let (s, e) = (q.start.expect("start"), q.end.expect("end"));
                black_box(w.naive.fits(&q.zone, &q.capacity, s, e))
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("ledger_window_query");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(1));
    for (n, w) in &workloads {
        group.bench_with_input(BenchmarkId::new("ledger", n), w, |b, w| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) % w.queries.len();
                let q = &w.queries[i];
                let win = Window::new(q.start.expect("start"), q.end.expect("end"));
                black_box(w.ledger.capacity(&q.zone, win).expect("zone"))
            })
        });
        group.bench_with_input(BenchmarkId::new("naive_scan", n), w, |b, w| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) % w.queries.len();
                let q = &w.queries[i];
                let (s, e) = (q.start.expect("start"), q.end.expect("end"));
                let lines = [
                    ResourceLine::Cores,
                    ResourceLine::Ram,
                    ResourceLine::Instances,
                ];
                black_box(lines.map(|l| w.naive.min_available(&q.zone, l, s, e)))
            })
        });
    }
    group.finish();
}

/// The group lives in a private module: `criterion_group!` makes an undocumented `pub fn`.
mod harness {
    use super::bench_ledger;

    criterion::criterion_group!(benches, bench_ledger);
}

criterion_main!(harness::benches);
