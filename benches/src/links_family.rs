//! The linked-VNF family of issue 28 (OSM PLA's model, `vnfm_core::intent::links`): seeded
//! instances of `n` VNFs x `m` VIMs, shared by the `intent` bench, the `links_family` example
//! and the claims test (`benches/tests/links_family_claims.rs`).
//!
//! An instance:
//! - VIM links: each unordered pair of VIMs is linked with probability `link_density` (0.6 for
//!   the family, 0.9 for the "dense" 40 x 200), the same link both ways: latency 5-150, jitter
//!   1-40, price 20-200 units, all uniform (links cost as much as VNFs, so that co-location,
//!   free, competes with the cheapest VIMs);
//! - VNF prices 10-200 units, uniform, 10 % of them missing (the VNF cannot go there);
//! - VLDs: a chain `vnf-0 -> vnf-1 -> ...` plus `extra_vlds` random pairs of distinct VNFs, each
//!   with a latency bound of 60-200 and a jitter bound of 10-50 (so a VLD can use from a quarter
//!   to all of the linked pairs, plus co-location, which is free and always meets the bounds);
//! - `pins` VNFs pinned to one of their priced VIMs.
//!
//! Every instance is satisfiable by construction: a hidden placement is drawn first (each VNF on
//! a random VIM where it is priced, the pins on it), and each VLD whose link on that placement
//! is absent or too slow gets one (a link or co-location is drawn within its bounds, the pair
//! linked both ways).

// Workload set-up may panic on a broken workload, like a test.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    clippy::needless_range_loop
)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vnfm_core::intent::links::{Link, LinksRequest, Price, Problem, Vld, Vnf};

/// The shape of a generated instance.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// VNFs.
    pub n: usize,
    /// VIMs.
    pub m: usize,
    /// The probability that a pair of VIMs is linked.
    pub link_density: f64,
    /// VLDs beyond the chain.
    pub extra_vlds: usize,
    /// Pinned VNFs.
    pub pins: usize,
}

impl Shape {
    /// The family's shape for `n` x `m`: link density 0.6, `n / 2` extra VLDs, 3 pins.
    pub fn family(n: usize, m: usize) -> Self {
        Shape {
            n,
            m,
            link_density: 0.6,
            extra_vlds: n / 2,
            pins: 3,
        }
    }

    /// The dense shape: link density 0.9 and `n` extra VLDs, 3 pins.
    pub fn dense(n: usize, m: usize) -> Self {
        Shape {
            n,
            m,
            link_density: 0.9,
            extra_vlds: n,
            pins: 3,
        }
    }
}

/// The seeded instance of `shape`.
pub fn request(shape: Shape, seed: u64) -> LinksRequest {
    let Shape {
        n,
        m,
        link_density,
        extra_vlds,
        pins,
    } = shape;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut links = vec![vec![None; m]; m];
    for i in 0..m {
        for j in i + 1..m {
            if !rng.gen_bool(link_density) {
                continue;
            }
            let link = Link::new(
                Price::from_units(rng.gen_range(20..=200)).unwrap(),
                rng.gen_range(5..=150),
                rng.gen_range(1..=40),
            );
            links[i][j] = Some(link);
            links[j][i] = Some(link);
        }
    }
    let vnfs: Vec<Vnf> = (0..n)
        .map(|k| Vnf {
            id: format!("vnf-{k}"),
            prices: (0..m)
                .map(|_| {
                    (!rng.gen_bool(0.1))
                        .then(|| Price::from_units(rng.gen_range(10..=200)).unwrap())
                })
                .collect(),
            pin: None,
        })
        .collect();
    let mut req = LinksRequest {
        vims: (0..m).map(|i| format!("vim-{i}")).collect(),
        vnfs,
        links,
        vlds: Vec::new(),
    };
    // The hidden placement.
    let hidden: Vec<usize> = (0..n)
        .map(|v| {
            let priced: Vec<usize> = (0..m)
                .filter(|&i| req.vnfs[v].prices[i].is_some())
                .collect();
            if priced.is_empty() {
                let i = rng.gen_range(0..m);
                req.vnfs[v].prices[i] = Some(Price::from_units(rng.gen_range(10..=200)).unwrap());
                i
            } else {
                priced[rng.gen_range(0..priced.len())]
            }
        })
        .collect();
    for _ in 0..pins.min(n) {
        let v = rng.gen_range(0..n);
        req.vnfs[v].pin = Some(format!("vim-{}", hidden[v]));
    }
    let mut pairs: Vec<(usize, usize)> = (1..n).map(|k| (k - 1, k)).collect();
    if n > 1 {
        for _ in 0..extra_vlds {
            let a = rng.gen_range(0..n);
            let b = (a + rng.gen_range(1..n)) % n;
            pairs.push((a, b));
        }
    }
    for (a, b) in pairs {
        let max_latency = rng.gen_range(60..=200);
        let max_jitter = rng.gen_range(10..=50);
        let (i, j) = (hidden[a], hidden[b]);
        let fits = |l: &Link| {
            l.latency.is_some_and(|x| x <= max_latency) && l.jitter.is_some_and(|x| x <= max_jitter)
        };
        if i != j && !req.links[i][j].as_ref().is_some_and(fits) {
            let link = Link::new(
                Price::from_units(rng.gen_range(20..=200)).unwrap(),
                rng.gen_range(5..=max_latency),
                rng.gen_range(1..=max_jitter),
            );
            req.links[i][j] = Some(link);
            req.links[j][i] = Some(link);
        }
        req.vlds.push(Vld {
            from: format!("vnf-{a}"),
            to: format!("vnf-{b}"),
            max_latency: Some(max_latency),
            max_jitter: Some(max_jitter),
        });
    }
    req
}

/// [`request`], validated.
pub fn problem(shape: Shape, seed: u64) -> Problem {
    request(shape, seed).validate().unwrap()
}

/// The CPU time this thread has used, in seconds: the first field of
/// `/proc/thread-self/schedstat` (nanoseconds on a CPU); `None` where it cannot be read.
pub fn thread_cpu() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// Solves `p` with a CPU time limit of `seconds` (no node limit): the solution and the CPU
/// seconds it took (wall-clock seconds where the thread's CPU time cannot be read).
pub fn solve_timed(p: &Problem, seconds: f64) -> (vnfm_core::intent::links::Solution, f64) {
    use vnfm_core::intent::links::{Progress, SolveOptions};
    let wall = std::time::Instant::now();
    let cpu0 = thread_cpu();
    let spent = || match (cpu0, thread_cpu()) {
        (Some(a), Some(b)) => b - a,
        _ => wall.elapsed().as_secs_f64(),
    };
    let stop = |_: &Progress| spent() >= seconds;
    let sol = p.solve_with(&SolveOptions {
        node_limit: u64::MAX,
        work_limit: u64::MAX,
        should_stop: Some(&stop),
    });
    (sol, spent())
}

/// One line: the cost and whether it is proven, or the bound and gap, or why there is none.
pub fn describe(sol: &vnfm_core::intent::links::Solution) -> String {
    match (&sol.outcome, sol.optimal) {
        (Ok(pl), true) => format!("cost {} proven optimal", pl.cost),
        (Ok(pl), false) => format!(
            "cost {} not proven, lower bound {}, gap {:.2} %",
            pl.cost,
            sol.lower_bound.map_or("-".into(), |b| b.to_string()),
            sol.gap_percent().unwrap_or(100.0)
        ),
        (Err(e), _) => format!("no placement: {e}"),
    }
}
