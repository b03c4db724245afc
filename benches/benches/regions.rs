//! Intent-based region choice at operator scale (`vnfm_core::intent::deploy::choose_region`):
//! a candidate file of 100,000 regions (the example owners, regions generated), the demo
//! package's two VDUs.
//!
//! - `select_one_vdu`: the baseline, one VDU's selection over every region (filter, rank);
//! - `choose_region`: both VDUs' selections, then one region for the whole VNF (each region
//!   looked up in each selection, the summed demand checked against the region's capacity);
//! - `parse_candidates`: reading and checking the candidate file (YAML) itself.
//!
//! `choose_region` costs about twice the baseline (two selections) when the choice itself is
//! linear; it was quadratic until 2026-11-28. See `benches/README.md`.

// Benchmark set-up may panic on a broken workload, like a test.
// criterion_group! defines an undocumented function.
#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use vnfm_core::intent::candidates::{CandidateFile, Capacities, GeoPoint};
use vnfm_core::intent::deploy::{choose_region, package_demands};
use vnfm_core::intent::policy::Policy;
use vnfm_core::intent::select::select;
use vnfm_core::package::fs;

const PAIRS: usize = 50_000; // two regions each: 100,000 candidates

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

/// The example candidates' owners and `2 × copies` generated regions (as the test
/// `one_hundred_thousand_regions_are_chosen_from_in_linear_time` of vnfm-core builds them).
fn many_regions(copies: usize) -> String {
    let text = std::fs::read_to_string(examples().join("intent/candidates.yaml")).unwrap();
    let owners = text.split("regions:").next().unwrap();
    let mut out = String::with_capacity(copies * 250);
    out.push_str(owners);
    out.push_str("regions:\n");
    for i in 0..copies {
        let lon = -75.0 + (i % 1000) as f64 * 0.001;
        out.push_str(&format!(
            "  - {{id: lab-{i}, owner: lab, location: {{lat: 40.5, lon: {lon}}}, hosts: 4, \
             capacity: {{declared: {{vcpus: {}, memory_mb: 65536, disk_gb: 1000}}}}}}\n  \
             - {{id: azure-{i}, owner: azure, location: {{lat: 38.9, lon: {lon}}}, \
             capacity: public}}\n",
            3 + i % 5
        ));
    }
    out
}

fn regions(c: &mut Criterion) {
    let text = many_regions(PAIRS);
    let cands = CandidateFile::from_text("many.yaml", &text).unwrap();
    let pkg = fs::load(&examples().join("packages/demo-vnf")).unwrap();
    let policy = Policy::load(examples().join("intent/policy-ha.json")).unwrap();
    let demands =
        package_demands(&pkg, "default", &policy, Some(GeoPoint::new(40.0, -75.0))).unwrap();
    let caps = Capacities::new();
    let mut g = c.benchmark_group("regions_100000");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    g.bench_function("select_one_vdu", |b| {
        b.iter(|| black_box(select(&policy, &cands, &demands[0], &caps).unwrap()))
    });
    g.bench_function("choose_region", |b| {
        b.iter(|| black_box(choose_region(&policy, &cands, &demands, &caps).unwrap()))
    });
    g.bench_function("parse_candidates", |b| {
        b.iter(|| black_box(CandidateFile::from_text("many.yaml", &text).unwrap()))
    });
    // The same file as JSON, and the baseline: serde_json reading it into a generic value
    // (what any reader of the file pays before it checks anything).
    let json = serde_json::to_string(
        &vnfm_core::input::parse_yaml::<vnfm_core::input::UniqueKeys>("many.yaml", &text)
            .unwrap()
            .0,
    )
    .unwrap();
    g.bench_function("parse_candidates_json", |b| {
        b.iter(|| black_box(CandidateFile::from_text("many.json", &json).unwrap()))
    });
    g.bench_function("serde_json_value_baseline", |b| {
        b.iter(|| black_box(serde_json::from_str::<serde_json::Value>(&json).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, regions);
criterion_main!(benches);
