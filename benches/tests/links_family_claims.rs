//! What benches/README.md claims of the linked-VNF family (`vnfm_benches::links_family`),
//! checked by counting work, not time: the 20 x 50 instances are proven optimal within a node
//! budget, and answers stopped by a limit bracket the optimum (lower bound <= optimum <= cost).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use vnfm_benches::links_family::{problem, Shape};
use vnfm_core::intent::links::{SolveOptions, Unsatisfiable};

fn nodes(node_limit: u64) -> SolveOptions<'static> {
    SolveOptions {
        node_limit,
        work_limit: u64::MAX,
        should_stop: None,
    }
}

#[test]
fn family_20x50_instances_are_proven_optimal_within_a_node_budget() {
    for seed in 1..=10 {
        let p = problem(Shape::family(20, 50), seed);
        let sol = p.solve_with(&nodes(2_000));
        let placement = sol.outcome.as_ref().unwrap();
        assert!(
            sol.optimal,
            "seed {seed}: not proven within 2,000 nodes ({} nodes, bound {:?}, cost {})",
            sol.stats.nodes, sol.lower_bound, placement.cost
        );
        assert_eq!(sol.lower_bound, Some(placement.cost), "seed {seed}");
        assert_eq!(
            p.cost_of(&placement.vims),
            Some(placement.cost),
            "seed {seed}"
        );
    }
}

#[test]
fn anytime_answers_on_small_family_instances_bracket_the_optimum() {
    let mut stopped = 0;
    for seed in 1..=30 {
        let mut shape = Shape::family(5, 6);
        shape.extra_vlds = (seed % 4) as usize;
        let p = problem(shape, seed);
        let optimum = p.solve_exhaustive().expect("the family is satisfiable");
        for limit in [0, 1, 2, 3, 5, 8, 13, 1_000] {
            let sol = p.solve_with(&nodes(limit));
            match &sol.outcome {
                Ok(pl) => {
                    let bound = sol.lower_bound.unwrap();
                    assert!(bound <= optimum.cost, "seed {seed} limit {limit}");
                    assert!(optimum.cost <= pl.cost, "seed {seed} limit {limit}");
                    assert_eq!(p.cost_of(&pl.vims), Some(pl.cost));
                    if sol.optimal {
                        assert_eq!(pl, &optimum, "seed {seed} limit {limit}");
                    } else {
                        stopped += 1;
                    }
                }
                Err(Unsatisfiable::LimitReached { .. }) => assert!(!sol.optimal),
                Err(e) => panic!("seed {seed} limit {limit}: {e}"),
            }
        }
    }
    // The limits did stop some searches after a placement was found.
    assert!(stopped > 0);
}

#[test]
fn a_30x100_answer_stopped_early_brackets_the_proven_optimum() {
    let p = problem(Shape::family(30, 100), 1);
    let full = p.solve_with(&nodes(20_000));
    assert!(full.optimal);
    let optimum = full.outcome.unwrap().cost;
    let early = p.solve_with(&nodes(40));
    let pl = early.outcome.as_ref().unwrap();
    assert!(!early.optimal);
    let bound = early.lower_bound.unwrap();
    assert!(bound <= optimum && optimum <= pl.cost);
}
