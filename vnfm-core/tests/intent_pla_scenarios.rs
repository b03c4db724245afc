//! OSM PLA's MiniZinc scenarios (`shared/vectors/osm/pla_mzn_scenarios.extracted.json`, 24 from
//! `test_mznmodels.py` and 2 from `test_mznPlacementConductor.py`), read at test time and
//! solved by `intent::links` from PLA's own `ns_placement_data`.
//!
//! Each satisfiable scenario must give exactly PLA's `expected_placement` (4 have tied optima:
//! the lexicographic tie-break must pick PLA's answer) at the vectors' `derived_check` minimum
//! cost, and the exhaustive oracle must agree. Each unsatisfiable one (`[{}]` upstream) must be
//! refused naming a blocking VLD, which the test checks really is blocking.
#![cfg(feature = "vectors")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use vnfm_core::intent::links::{Price, Problem, Unsatisfiable};
use vnfm_core::vectors;

const FILE: &str = "osm/pla_mzn_scenarios.extracted.json";

fn cases() -> Option<Vec<Value>> {
    let text = vectors::read_vector(env!("CARGO_MANIFEST_DIR"), FILE)?;
    let doc: Value = serde_json::from_str(&text).expect("the scenarios file is JSON");
    Some(doc["cases"].as_array().expect("cases").clone())
}

fn is_unsat(expected: &Value) -> bool {
    expected
        .as_array()
        .is_some_and(|a| a.len() == 1 && a[0].as_object().is_some_and(|o| o.is_empty()))
}

/// Whether VLD `k` of PLA's data has no pair of VIMs allowed by the pins (prices are full in
/// these vectors) that meets its bounds: checked straight on the JSON, not through the model.
fn vld_blocked_alone(data: &Value, k: usize) -> bool {
    let vims: Vec<&str> = data["vim_accounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let vld = &data["vld_desc"][k];
    let allowed = |member: &Value| -> Vec<usize> {
        let d = data["ns_desc"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| &d["vnf_id"] == member)
            .unwrap();
        match d.get("vim_account").and_then(Value::as_str) {
            Some(pin) => vec![vims.iter().position(|v| *v == pin).unwrap()],
            None => (0..vims.len()).collect(),
        }
    };
    let (a, b) = (allowed(&vld["cp_refs"][0]), allowed(&vld["cp_refs"][1]));
    !a.iter().any(|&i| {
        b.iter().any(|&j| {
            let ok = |key: &str, m: &str| {
                vld.get(key)
                    .is_none_or(|bound| data[m][i][j].as_u64().unwrap() <= bound.as_u64().unwrap())
            };
            ok("latency", "trp_link_latency") && ok("jitter", "trp_link_jitter")
        })
    })
}

#[test]
fn pla_scenarios_give_plas_answers() {
    let Some(cases) = cases() else { return };
    assert_eq!(cases.len(), 26, "the file holds 26 scenarios");
    let (mut sat, mut unsat, mut tied) = (0, 0, 0);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let data = &case["ns_placement_data"];
        let problem = Problem::from_pla_json(data).unwrap_or_else(|e| panic!("{name}: {e}"));
        let solution = problem.solve();
        let oracle = problem.solve_exhaustive();
        let expected = &case["expected_placement"];
        let check = &case["derived_check"];
        if is_unsat(expected) {
            unsat += 1;
            assert_eq!(check["satisfiable"], false, "{name}");
            assert_eq!(oracle, None, "{name}: the oracle finds a placement");
            let why = solution.outcome.expect_err(name);
            eprintln!("{name}: refused: {why}");
            match &why {
                Unsatisfiable::Link { vld, from, to, .. } => {
                    assert!(
                        vld_blocked_alone(data, *vld),
                        "{name}: vld {vld} is not blocking alone"
                    );
                    assert_eq!(
                        data["vld_desc"][*vld]["cp_refs"][0].as_str(),
                        Some(from.as_str()),
                        "{name}"
                    );
                    assert_eq!(
                        data["vld_desc"][*vld]["cp_refs"][1].as_str(),
                        Some(to.as_str()),
                        "{name}"
                    );
                }
                Unsatisfiable::Conflict { vlds, .. } => {
                    assert!(!vlds.is_empty(), "{name}: a conflict without a vld: {why}");
                    assert!(vlds.iter().all(|&k| !vld_blocked_alone(data, k)), "{name}");
                }
                other => panic!("{name}: refused without naming a link: {other}"),
            }
        } else {
            sat += 1;
            let placement = solution
                .outcome
                .unwrap_or_else(|e| panic!("{name}: refused: {e}"));
            assert_eq!(
                &problem.to_pla_placement(&placement),
                expected,
                "{name}: not PLA's placement"
            );
            let min = check["min_total_cost"].as_u64().unwrap();
            assert_eq!(
                placement.cost,
                Price::from_units(min).unwrap(),
                "{name}: not the minimum cost"
            );
            assert_eq!(
                problem.cost_of(&placement.vims),
                Some(placement.cost),
                "{name}"
            );
            assert_eq!(
                oracle.as_ref(),
                Some(&placement),
                "{name}: the oracle disagrees"
            );
            let vims = &problem.request().vims;
            let as_map: serde_json::Map<String, Value> = problem
                .request()
                .vnfs
                .iter()
                .zip(&placement.vims)
                .map(|(v, &i)| (v.id.clone(), Value::String(vims[i].clone())))
                .collect();
            let optima = check["optimal_assignments"].as_array().unwrap();
            assert!(
                optima.contains(&Value::Object(as_map)),
                "{name}: not among the optima"
            );
            if check["optimum_unique"] == false {
                tied += 1;
            }
        }
        eprintln!("{name}: {} nodes", solution.stats.nodes);
    }
    assert_eq!(
        (sat, unsat, tied),
        (20, 6, 4),
        "(satisfiable, unsatisfiable, tied)"
    );
}

#[test]
fn pla_missing_link_is_a_number_when_loaded_from_pla() {
    // PLA's 32767 is a link like any other once loaded: a bound of 32767 accepts it.
    let Some(cases) = cases() else { return };
    let mut data = cases[6]["ns_placement_data"].clone(); // scenario1_subtestcase7, unsatisfiable
    for vld in data["vld_desc"].as_array_mut().unwrap() {
        vld["latency"] = 32767.into();
        vld["jitter"] = 32767.into();
    }
    let problem = Problem::from_pla_json(&data).unwrap();
    let placement = problem.solve().outcome.unwrap();
    // Pinned to vims 1, 3 and 7; link prices 10 (1-3) and 32767 (3-7, missing).
    assert_eq!(placement.vims, vec![1, 3, 7]);
    assert_eq!(
        placement.cost,
        Price::from_units(10 + 30 + 150 + 10 + 32767).unwrap()
    );
}
