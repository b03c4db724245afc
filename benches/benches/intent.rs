//! Linked placement (`vnfm_core::intent::links`, OSM PLA's model) against MiniZinc with Gecode,
//! and against the exhaustive oracle, in the same run.
//!
//! 1. PLA's 26 scenarios (`shared/vectors/osm/pla_mzn_scenarios.extracted.json`): each solved
//!    by `minizinc --solver gecode benches/minizinc/pla.mzn <scenario>.dzn` as a subprocess (as
//!    PLA runs MiniZinc, once per request) and by `Problem::solve`; the bench asserts that both
//!    find the same optimum cost (or both find none) and prints the total time of each over the
//!    26. MiniZinc's half is skipped, with a message, when `minizinc` is not installed
//!    (`apt-get install -y minizinc` brings MiniZinc 2.6 and Gecode 6.2).
//! 2. Generated instances of 20 VNFs x 50 VIMs in 4 regions (seeded), solved exactly: time and
//!    search nodes printed; the first is also solved by MiniZinc (when present) and the costs
//!    asserted equal.
//! 3. Generated instances of 6 VNFs x 8 VIMs: branch and bound against `solve_exhaustive`
//!    (asserted equal).
//! 4. Issue 28's family (`vnfm_benches::links_family`): 10 x 20, 20 x 50 and 30 x 100 (10 seeds
//!    each) and 40 x 200 dense (3 seeds), solved with a 10 s CPU limit each: the answer, whether
//!    it is proven, the bound, the gap, nodes and CPU time printed, with the median and worst
//!    CPU time per size; MiniZinc + Gecode (when present) on the first 3 seeds of each size with
//!    a 10 s limit, its best cost printed beside vnfm's (and asserted never below a cost vnfm
//!    proved optimal). `INTENT_FAMILY_SEEDS` changes the number of seeds.
//!
//! See `benches/README.md`.

// Benchmark set-up may panic on a broken workload, like a test.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{criterion_main, Criterion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use vnfm_benches::links_family::{self, Shape};
use vnfm_core::intent::links::{Link, LinksRequest, Price, Problem, Vld, Vnf};

/// The MiniZinc model, written for this bench from PLA's formulation.
fn model_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("minizinc")
        .join("pla.mzn")
}

fn minizinc_present() -> bool {
    Command::new("minizinc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn units(p: Price) -> i64 {
    assert_eq!(
        p.micros() % Price::SCALE,
        0,
        "the MiniZinc data takes whole prices"
    );
    i64::try_from(p.micros() / Price::SCALE).unwrap()
}

/// The `.dzn` data of a problem for `pla.mzn`: absent prices -1, absent links (and unknown
/// characteristics) 32767 as PLA writes them, unbounded -1.
fn dzn(problem: &Problem) -> String {
    let r = problem.request();
    let (n, m) = (r.vnfs.len(), r.vims.len());
    let mut s = String::new();
    writeln!(s, "n_vims = {m}; n_vnfs = {n}; n_vlds = {};", r.vlds.len()).unwrap();
    let rows = |f: &dyn Fn(usize, usize) -> i64, rows: usize| {
        let mut out = String::from("[|");
        for i in 0..rows {
            let row: Vec<String> = (0..m).map(|j| f(i, j).to_string()).collect();
            write!(out, " {} |", row.join(", ")).unwrap();
        }
        out.push(']');
        out
    };
    let price = |v: usize, i: usize| r.vnfs[v].prices[i].map_or(-1, units);
    writeln!(s, "vnf_price = {};", rows(&price, n)).unwrap();
    let pins: Vec<String> = problem
        .pins()
        .iter()
        .map(|p| p.map_or(0, |i| i + 1).to_string())
        .collect();
    writeln!(s, "pin = [{}];", pins.join(", ")).unwrap();
    let link = |i: usize, j: usize| {
        if i == j {
            Some(Link::ZERO)
        } else {
            r.links[i][j]
        }
    };
    let miss = 32767;
    let lp = |i: usize, j: usize| link(i, j).map_or(miss, |l| units(l.price));
    let ll = |i: usize, j: usize| {
        link(i, j)
            .and_then(|l| l.latency)
            .map_or(miss, |x| x as i64)
    };
    let lj = |i: usize, j: usize| link(i, j).and_then(|l| l.jitter).map_or(miss, |x| x as i64);
    writeln!(s, "link_price = {};", rows(&lp, m)).unwrap();
    writeln!(s, "link_latency = {};", rows(&ll, m)).unwrap();
    writeln!(s, "link_jitter = {};", rows(&lj, m)).unwrap();
    let list = |f: &dyn Fn(usize) -> i64| {
        let items: Vec<String> = (0..r.vlds.len()).map(|e| f(e).to_string()).collect();
        format!("[{}]", items.join(", "))
    };
    let ends = problem.vld_ends();
    writeln!(s, "vld_from = {};", list(&|e| ends[e].0 as i64 + 1)).unwrap();
    writeln!(s, "vld_to = {};", list(&|e| ends[e].1 as i64 + 1)).unwrap();
    writeln!(
        s,
        "max_latency = {};",
        list(&|e| r.vlds[e].max_latency.map_or(-1, |x| x as i64))
    )
    .unwrap();
    writeln!(
        s,
        "max_jitter = {};",
        list(&|e| r.vlds[e].max_jitter.map_or(-1, |x| x as i64))
    )
    .unwrap();
    s
}

/// Runs MiniZinc with Gecode on `data` with a time limit, printing intermediate solutions: the
/// last cost found, whether it was proven optimal, and the wall time.
fn minizinc_limited(
    dir: &Path,
    name: &str,
    data: &str,
    limit: Duration,
) -> (Option<i64>, bool, Duration) {
    let path = dir.join(format!("{name}.dzn"));
    std::fs::write(&path, data).unwrap();
    let t = Instant::now();
    let out = Command::new("minizinc")
        .args([
            "--solver",
            "gecode",
            "--intermediate-solutions",
            "--time-limit",
        ])
        .arg(limit.as_millis().to_string())
        .arg(model_path())
        .arg(&path)
        .output()
        .expect("run minizinc");
    let took = t.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    let cost = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("cost="))
        .map(|c| c.trim().parse().unwrap());
    (cost, text.contains("=========="), took)
}

/// Runs MiniZinc with Gecode on `data`: `Some(cost)`, `None` when unsatisfiable, and the time
/// the subprocess took (compiling the model included, as for PLA).
fn minizinc(dir: &Path, name: &str, data: &str) -> (Option<i64>, Duration) {
    let path = dir.join(format!("{name}.dzn"));
    std::fs::write(&path, data).unwrap();
    let t = Instant::now();
    let out = Command::new("minizinc")
        .args(["--solver", "gecode"])
        .arg(model_path())
        .arg(&path)
        .output()
        .expect("run minizinc");
    let took = t.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("=====UNSATISFIABLE=====") {
        return (None, took);
    }
    assert!(
        text.contains("=========="),
        "{name}: minizinc did not prove an optimum:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cost = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("cost="))
        .unwrap_or_else(|| panic!("{name}: no cost in minizinc's output:\n{text}"));
    (Some(cost.trim().parse().unwrap()), took)
}

fn scenarios() -> Option<Vec<(String, Problem)>> {
    let text = vnfm_core::vectors::read_vector(
        env!("CARGO_MANIFEST_DIR"),
        "osm/pla_mzn_scenarios.extracted.json",
    )?;
    let doc: Value = serde_json::from_str(&text).unwrap();
    Some(
        doc["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let name = c["name"].as_str().unwrap().to_owned();
                let p = Problem::from_pla_json(&c["ns_placement_data"]).unwrap();
                (name, p)
            })
            .collect(),
    )
}

/// Seeded instance: VIMs scattered over 4 regions of a 1000 x 1000 plane (latency = distance /
/// 10, jitter = latency / 8 + 0-2, link price = latency / 5 + 1, 15 % of inter-region links
/// absent), VNF prices 10-200 with 10 % missing, VLDs along a chain plus `extra` random ones
/// with latency bounds of 5-60 and, on half of them, jitter bounds of 1-8; two VNFs pinned.
fn generated(n: usize, m: usize, extra: usize, seed: u64) -> Problem {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let centres: Vec<(f64, f64)> = (0..4)
        .map(|_| (rng.gen_range(0.0..1000.0), rng.gen_range(0.0..1000.0)))
        .collect();
    let sites: Vec<(usize, f64, f64)> = (0..m)
        .map(|_| {
            let r = rng.gen_range(0..4);
            let (cx, cy) = centres[r];
            (
                r,
                cx + rng.gen_range(-80.0..80.0),
                cy + rng.gen_range(-80.0..80.0),
            )
        })
        .collect();
    let mut links = vec![vec![None; m]; m];
    for i in 0..m {
        for j in i + 1..m {
            if sites[i].0 != sites[j].0 && rng.gen_bool(0.15) {
                continue;
            }
            let d = ((sites[i].1 - sites[j].1).powi(2) + (sites[i].2 - sites[j].2).powi(2)).sqrt();
            let lat = (d / 10.0) as u64 + 1;
            let link = Link::new(
                Price::from_units(lat / 5 + 1).unwrap(),
                lat,
                lat / 8 + rng.gen_range(0..3),
            );
            links[i][j] = Some(link);
            links[j][i] = Some(link);
        }
    }
    let vims: Vec<String> = (0..m).map(|i| format!("vim-{i}")).collect();
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
        vims,
        vnfs,
        links,
        vlds: Vec::new(),
    };
    for _ in 0..2 {
        let v = rng.gen_range(0..n);
        let priced: Vec<usize> = (0..m)
            .filter(|&i| req.vnfs[v].prices[i].is_some())
            .collect();
        req.vnfs[v].pin = Some(format!("vim-{}", priced[rng.gen_range(0..priced.len())]));
    }
    let mut pairs: Vec<(usize, usize)> = (1..n).map(|k| (k - 1, k)).collect();
    for _ in 0..extra {
        let a = rng.gen_range(0..n);
        let b = (a + rng.gen_range(1..n)) % n;
        pairs.push((a, b));
    }
    for (a, b) in pairs {
        req.vlds.push(Vld {
            from: format!("vnf-{a}"),
            to: format!("vnf-{b}"),
            max_latency: Some(rng.gen_range(5..=60)),
            max_jitter: rng.gen_bool(0.5).then(|| rng.gen_range(1..=8)),
        });
    }
    req.validate().unwrap()
}

fn bench_intent(c: &mut Criterion) {
    let mzn = minizinc_present();
    if !mzn {
        eprintln!("skipping the MiniZinc half: `minizinc` not found (install it with `apt-get install -y minizinc`, MiniZinc 2.6 with Gecode 6.2)");
    }
    let dir = tempfile::tempdir().unwrap();

    // 1. PLA's scenarios.
    if let Some(cases) = scenarios() {
        assert_eq!(cases.len(), 26);
        if mzn {
            let mut total = Duration::ZERO;
            for (name, p) in &cases {
                let ours = p.solve().outcome.ok().map(|pl| units(pl.cost));
                let (theirs, took) = minizinc(dir.path(), name, &dzn(p));
                assert_eq!(
                    ours, theirs,
                    "{name}: vnfm and MiniZinc disagree on the optimum"
                );
                total += took;
            }
            let t = Instant::now();
            let rounds = 1000u32;
            for _ in 0..rounds {
                for (_, p) in &cases {
                    black_box(p.solve());
                }
            }
            let ours = t.elapsed() / rounds;
            eprintln!(
                "pla scenarios: same optimum on all 26; minizinc+gecode {:.3} s in total, vnfm {:.1} us in total ({:.0}x faster)",
                total.as_secs_f64(),
                ours.as_secs_f64() * 1e6,
                total.as_secs_f64() / ours.as_secs_f64()
            );
        }
        let mut g = c.benchmark_group("intent_pla_scenarios");
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        g.bench_function("vnfm_all_26", |b| {
            b.iter(|| {
                for (_, p) in &cases {
                    black_box(p.solve());
                }
            })
        });
        g.bench_function("exhaustive_all_26", |b| {
            b.iter(|| {
                for (_, p) in &cases {
                    black_box(p.solve_exhaustive());
                }
            })
        });
        if mzn {
            // One scenario only: a subprocess per iteration.
            let (name, p) = &cases[0];
            let data = dzn(p);
            g.bench_function("minizinc_gecode_one", |b| {
                b.iter(|| black_box(minizinc(dir.path(), name, &data)))
            });
        }
        g.finish();
    }

    // 2. 20 x 50 with links.
    let big: Vec<Problem> = (0..5).map(|s| generated(20, 50, 6, 100 + s)).collect();
    for (s, p) in big.iter().enumerate() {
        let t = Instant::now();
        let sol = p.solve();
        let took = t.elapsed();
        let cost = sol
            .outcome
            .as_ref()
            .map(|pl| pl.cost.to_string())
            .unwrap_or_else(|e| format!("unsatisfiable: {e}"));
        eprintln!(
            "20x50 seed {}: cost {cost}, {} nodes, {} pruned by the bound, {} wipe-outs, {:.2} ms",
            100 + s,
            sol.stats.nodes,
            sol.stats.pruned_by_bound,
            sol.stats.wipeouts,
            took.as_secs_f64() * 1e3
        );
        if mzn && s == 0 {
            let (theirs, took) = minizinc(dir.path(), "big", &dzn(p));
            assert_eq!(
                sol.outcome.ok().map(|pl| units(pl.cost)),
                theirs,
                "20x50: vnfm and MiniZinc disagree"
            );
            eprintln!(
                "20x50 seed 100: minizinc+gecode agrees, {:.3} s",
                took.as_secs_f64()
            );
        }
    }
    let mut g = c.benchmark_group("intent_20x50");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    g.bench_function("vnfm_5_instances", |b| {
        b.iter(|| {
            for p in &big {
                black_box(p.solve());
            }
        })
    });
    g.finish();

    // 3. 6 x 8 against the oracle.
    let small: Vec<Problem> = (0..20).map(|s| generated(6, 8, 3, 500 + s)).collect();
    for p in &small {
        assert_eq!(
            p.solve().outcome.ok(),
            p.solve_exhaustive(),
            "6x8: branch and bound differs from the oracle"
        );
    }
    let mut g = c.benchmark_group("intent_6x8");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    g.bench_function("vnfm_20_instances", |b| {
        b.iter(|| {
            for p in &small {
                black_box(p.solve());
            }
        })
    });
    g.bench_function("exhaustive_20_instances", |b| {
        b.iter(|| {
            for p in &small {
                black_box(p.solve_exhaustive());
            }
        })
    });
    g.finish();

    // 4. Issue 28's family, with a 10 s CPU limit per instance.
    family(mzn, dir.path());
}

fn family(mzn: bool, dir: &Path) {
    let seeds: u64 = std::env::var("INTENT_FAMILY_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let limit = 10.0;
    let sizes = [
        ("10x20", Shape::family(10, 20), seeds),
        ("20x50", Shape::family(20, 50), seeds),
        ("30x100", Shape::family(30, 100), seeds),
        ("40x200 dense", Shape::dense(40, 200), seeds.min(3)),
    ];
    for (label, shape, count) in sizes {
        let mut cpu = Vec::new();
        let mut proven = 0;
        let mut worst_gap: f64 = 0.0;
        for seed in 1..=count {
            let p = links_family::problem(shape, seed);
            let (sol, secs) = links_family::solve_timed(&p, limit);
            eprintln!(
                "family {label} seed {seed}: {}, {} nodes, {secs:.3} s CPU",
                links_family::describe(&sol),
                sol.stats.nodes
            );
            cpu.push(secs);
            if sol.optimal {
                proven += 1;
            }
            worst_gap = worst_gap.max(sol.gap_percent().unwrap_or(0.0));
            if mzn && seed <= 3 {
                let (theirs, their_proof, took) = minizinc_limited(
                    dir,
                    &format!("family-{seed}"),
                    &dzn(&p),
                    Duration::from_secs_f64(limit),
                );
                let ours = sol.outcome.as_ref().ok().map(|pl| units(pl.cost));
                if let (true, Some(o), Some(t)) = (sol.optimal, ours, theirs) {
                    assert!(
                        t >= o,
                        "{label} seed {seed}: MiniZinc found {t} below vnfm's proven {o}"
                    );
                }
                eprintln!(
                    "family {label} seed {seed}: minizinc+gecode {} ({}), {:.1} s wall",
                    theirs.map_or("no solution".into(), |c| format!("cost {c}")),
                    if their_proof { "proven" } else { "not proven" },
                    took.as_secs_f64()
                );
            }
        }
        cpu.sort_by(f64::total_cmp);
        eprintln!(
            "family {label}: {proven}/{count} proven optimal, worst gap {worst_gap:.2} %, CPU median {:.3} s, worst {:.3} s",
            cpu[cpu.len() / 2],
            cpu[cpu.len() - 1]
        );
    }
}

/// The group lives in a private module: `criterion_group!` makes an undocumented `pub fn`.
mod harness {
    use super::bench_intent;
    criterion::criterion_group!(benches, bench_intent);
}

criterion_main!(harness::benches);
