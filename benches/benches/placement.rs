//! Placement solver throughput, each workload against a naive scan in the same group.
//!
//! - `placement_host_anti_affinity`: the Kubernetes scheduler_perf "SchedulingPodAntiAffinity"
//!   shape: zones of 50 hosts (ample capacity), one required host-scope anti-affinity group
//!   with `hosts / 5` existing and `2 * hosts / 5` new members (1,000 and 2,000 at 5,000 hosts).
//!   Run at 500, 5,000 and 50,000 hosts (10, 100, 1,000 zones).
//! - `placement_mixed`: 1,000 VNFCs over 100 zones of 20 hosts with zone and host affinity and
//!   anti-affinity groups (some best effort), host capacity known.
//!
//! Throughput is in placements (new items) per second. Inputs come from seeded generators.
//! See `benches/README.md`.

// Benchmark set-up may panic on a broken workload, like a test.
#![allow(clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vnfm_core::constraint::{Constraint, ConstraintKind, Scope};
use vnfm_core::placement::{ExistingMember, Item, PlacementRequest, Selection};
use vnfm_core::zone::{ComputeHost, ComputeZone, Resources};

const HOSTS_PER_ZONE: usize = 50;
const POD: Resources = Resources::new(1, 2048, 10);

fn catalogue(zones: usize, hosts_per_zone: usize, free: Resources) -> Vec<ComputeZone> {
    (0..zones)
        .map(|z| ComputeZone {
            name: format!("az-{z}").into(),
            available: true,
            hosts: Some(
                (0..hosts_per_zone)
                    .map(|h| ComputeHost {
                        name: format!("az-{z}-node-{h}").into(),
                        available: true,
                        free: Some(free),
                    })
                    .collect(),
            ),
        })
        .collect()
}

/// The scheduler_perf-shaped workload at `hosts` hosts.
fn host_anti_affinity(hosts: usize, seed: u64) -> PlacementRequest {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let zones = catalogue(
        hosts / HOSTS_PER_ZONE,
        HOSTS_PER_ZONE,
        Resources::new(64, 262_144, 2_000),
    );
    let mut all: Vec<(usize, usize)> = (0..zones.len())
        .flat_map(|z| (0..HOSTS_PER_ZONE).map(move |h| (z, h)))
        .collect();
    all.shuffle(&mut rng);
    let mut zones = zones;
    let existing: Vec<ExistingMember> = all
        .iter()
        .take(hosts / 5)
        .enumerate()
        .map(|(i, (z, h))| {
            // The existing pod already consumed capacity on its node.
            if let Some(host) = zones[*z].hosts.as_mut().and_then(|hs| hs.get_mut(*h)) {
                host.free = host.free.map(|f| f.saturating_sub(&POD));
            }
            ExistingMember::new(
                format!("existing-{i}"),
                format!("az-{z}"),
                format!("az-{z}-node-{h}"),
            )
        })
        .collect();
    let items: Vec<Item> = (0..2 * hosts / 5)
        .map(|i| Item::new(format!("pod-{i}"), "pod", POD))
        .collect();
    let members: Vec<String> = existing
        .iter()
        .map(|e| e.id.clone())
        .chain(items.iter().map(|i| i.id.clone()))
        .collect();
    PlacementRequest::new(zones)
        .with_items(items)
        .with_existing(existing)
        .with_constraints(vec![Constraint::anti_affinity(
            "pod-anti-affinity",
            Scope::Host,
            members,
        )])
        .with_seed(seed)
}

/// 1,000 VNFCs (100 VDUs x 10) over 100 zones of 20 hosts, mixed constraints.
fn mixed(seed: u64) -> PlacementRequest {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let zones = catalogue(100, 20, Resources::new(32, 131_072, 1_000));
    let mut items = Vec::new();
    let mut constraints = Vec::new();
    let id = |v: usize, j: usize| format!("VDU{v}-{j}");
    for v in 0..100 {
        let demand = Resources::new(rng.gen_range(1..=4), 4096, 20);
        for j in 0..10 {
            items.push(Item::new(id(v, j), format!("VDU{v}"), demand));
        }
        let all: Vec<String> = (0..10).map(|j| id(v, j)).collect();
        match v % 5 {
            0 => constraints.push(Constraint::anti_affinity(
                format!("VDU{v}-zones"),
                Scope::Zone,
                all,
            )),
            1 => constraints.push(Constraint::anti_affinity(
                format!("VDU{v}-hosts"),
                Scope::Host,
                all,
            )),
            2 => {
                for j in 0..10 {
                    constraints.push(Constraint::affinity(
                        format!("VDU{v}-with-VDU{}-{j}", v - 1),
                        Scope::Zone,
                        [id(v, j), id(v - 1, j)],
                    ));
                }
            }
            3 => {
                for j in 0..5 {
                    constraints.push(Constraint::affinity(
                        format!("VDU{v}-pair-{j}"),
                        Scope::Host,
                        [id(v, 2 * j), id(v, 2 * j + 1)],
                    ));
                }
                constraints.push(
                    Constraint::anti_affinity(
                        format!("VDU{v}-pairs-apart"),
                        Scope::Zone,
                        (0..5).map(|j| id(v, 2 * j)),
                    )
                    .with_fallback_best_effort(true),
                );
            }
            _ => {}
        }
    }
    PlacementRequest::new(zones)
        .with_items(items)
        .with_constraints(constraints)
        .with_seed(seed)
}

/// The naive scan: for each item, look at every member placed so far and at every host,
/// check every constraint of the item against every member, and pick a random host among
/// those that pass. No backtracking, no index.
fn naive(req: &PlacementRequest, seed: u64) -> Option<Vec<usize>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let hosts: Vec<(&str, &str, Option<Resources>)> = req
        .zones
        .iter()
        .filter(|z| z.is_candidate() && !req.excluded.contains(&z.name))
        .flat_map(|z| {
            z.hosts
                .iter()
                .flatten()
                .filter(|h| h.available)
                .map(move |h| (z.name.as_str(), h.name.as_str(), h.free))
        })
        .collect();
    let mut free: Vec<Option<Resources>> = hosts.iter().map(|h| h.2).collect();
    // (member id, zone, host) of everything placed.
    let mut placed: Vec<(&str, &str, &str)> = req
        .existing
        .iter()
        .map(|e| (e.id.as_str(), e.zone.as_str(), e.host.as_str()))
        .collect();
    let mut out = Vec::with_capacity(req.items.len());
    let mut eligible = Vec::new();
    for item in &req.items {
        let mine: Vec<&Constraint> = req
            .constraints
            .iter()
            .filter(|c| c.members.contains(&item.id))
            .collect();
        // Members of my constraints placed so far, by scanning every placed member.
        let mut related: Vec<(&Constraint, HashSet<&str>)> = Vec::with_capacity(mine.len());
        for c in &mine {
            let members: HashSet<&str> = c.members.iter().map(String::as_str).collect();
            let domains: HashSet<&str> = placed
                .iter()
                .filter(|(id, _, _)| members.contains(id))
                .map(|(_, z, h)| if c.scope == Scope::Zone { *z } else { *h })
                .collect();
            related.push((c, domains));
        }
        eligible.clear();
        for (k, (zone, host, _)) in hosts.iter().enumerate() {
            if free[k].is_some_and(|f| !f.fits(&item.demand)) {
                continue;
            }
            let ok = related.iter().all(|(c, domains)| {
                let d = if c.scope == Scope::Zone { zone } else { host };
                match c.kind {
                    ConstraintKind::AntiAffinity => c.fallback_best_effort || !domains.contains(d),
                    ConstraintKind::Affinity => domains.is_empty() || domains.contains(d),
                }
            });
            if ok {
                eligible.push(k);
            }
        }
        let k = *eligible.get(rng.gen_range(0..eligible.len().max(1)))?;
        if let Some(f) = free[k].as_mut() {
            *f = f.saturating_sub(&item.demand);
        }
        placed.push((item.id.as_str(), hosts[k].0, hosts[k].1));
        out.push(k);
    }
    Some(out)
}

/// Checks once, outside the timing, that the solver's answer honours the anti-affinity group.
fn assert_distinct_hosts(req: &PlacementRequest) {
    let p = req.place().expect("workload is feasible");
    let mut used: HashMap<&str, &str> = req
        .existing
        .iter()
        .map(|e| (e.host.as_str(), e.id.as_str()))
        .collect();
    for a in &p.assignments {
        assert!(
            used.insert(a.host.as_str(), a.id.as_str()).is_none(),
            "{} shares {}",
            a.id,
            a.host
        );
    }
}

fn bench_host_anti_affinity(c: &mut Criterion) {
    let mut group = c.benchmark_group("placement_host_anti_affinity");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for hosts in [500usize, 5_000, 50_000] {
        let req = host_anti_affinity(hosts, 7);
        assert_distinct_hosts(&req);
        group.throughput(Throughput::Elements(req.items.len() as u64));
        for (name, selection) in [
            ("solver_random", Selection::Random),
            ("solver_capacity_aware", Selection::CapacityAware),
        ] {
            let req = req.clone().with_selection(selection);
            group.bench_with_input(BenchmarkId::new(name, hosts), &req, |b, req| {
                b.iter(|| black_box(req.place().expect("feasible")))
            });
        }
        // The naive scan is quadratic: at 50,000 hosts one run takes minutes.
        if hosts <= 5_000 {
            assert!(naive(&req, 7).is_some());
            group.bench_with_input(BenchmarkId::new("naive_scan", hosts), &req, |b, req| {
                b.iter(|| black_box(naive(req, 7)))
            });
        }
    }
    group.finish();
}

fn bench_mixed(c: &mut Criterion) {
    let mut group = c.benchmark_group("placement_mixed");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let req = mixed(11);
    group.throughput(Throughput::Elements(req.items.len() as u64));
    for (name, selection) in [
        ("solver_random", Selection::Random),
        ("solver_capacity_aware", Selection::CapacityAware),
    ] {
        let req = req.clone().with_selection(selection);
        let p = req.place().expect("mixed workload is feasible");
        assert!(!p.is_relaxed(), "{:?}", p.relaxed);
        group.bench_with_input(BenchmarkId::new(name, 1_000), &req, |b, req| {
            b.iter(|| black_box(req.place().expect("feasible")))
        });
    }
    group.bench_with_input(BenchmarkId::new("naive_scan", 1_000), &req, |b, req| {
        b.iter(|| black_box(naive(req, 11)))
    });
    group.finish();
}

/// The group lives in a private module: `criterion_group!` makes an undocumented `pub fn`.
mod harness {
    use super::{bench_host_anti_affinity, bench_mixed};

    criterion::criterion_group!(benches, bench_host_anti_affinity, bench_mixed);
}

criterion_main!(harness::benches);
