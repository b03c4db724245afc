//! `intent::links`: branch and bound against the exhaustive oracle on generated instances of up
//! to 6 VNFs x 8 VIMs with random link bounds, missing prices, absent links (and links with an
//! unknown latency or jitter), pins and VLDs: same satisfiability, same cost, same tie-broken
//! placement. Prices are drawn from a small range so that ties are common.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use vnfm_core::intent::links::{
    Link, LinksRequest, Price, Progress, SolveOptions, Unsatisfiable, Vld, Vnf,
};

fn opt<T: std::fmt::Debug + Clone + 'static>(
    none_weight: u32,
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    prop_oneof![none_weight => Just(None), 10 => s.prop_map(Some)].boxed()
}

fn price(max: u64) -> impl Strategy<Value = Price> {
    // Half-units too: decimals must sum exactly.
    (0..=max * 2).prop_map(|h| Price::from_micros(h * Price::SCALE / 2))
}

/// Instances of up to 6 VNFs x 8 VIMs; `pin_none` and `link_none` weigh "no pin" and "no link"
/// against 10 for "some"; up to `n + extra_vlds` VLDs.
fn request_with(
    pin_none: u32,
    link_none: u32,
    extra_vlds: usize,
) -> impl Strategy<Value = LinksRequest> {
    (1usize..=6, 1usize..=8)
        .prop_flat_map(move |(n, m)| {
            let vnfs = proptest::collection::vec(
                (
                    proptest::collection::vec(opt(2, price(10)), m),
                    opt(pin_none, 0..m),
                ),
                n,
            );
            let link = (price(5), opt(1, 0u64..100), opt(1, 0u64..20)).prop_map(
                |(price, latency, jitter)| Link {
                    price,
                    latency,
                    jitter,
                },
            );
            let links =
                proptest::collection::vec(proptest::collection::vec(opt(link_none, link), m), m);
            let vld = (0..n, 0..n, opt(3, 0u64..100), opt(3, 0u64..20));
            let vlds = proptest::collection::vec(vld, 0..=n + extra_vlds);
            (Just(m), vnfs, links, vlds)
        })
        .prop_map(|(m, vnfs, mut links, vlds)| {
            for (i, row) in links.iter_mut().enumerate() {
                row[i] = None;
            }
            LinksRequest {
                vims: (0..m).map(|i| format!("vim-{i}")).collect(),
                vnfs: vnfs
                    .into_iter()
                    .enumerate()
                    .map(|(k, (prices, pin))| Vnf {
                        id: format!("vnf-{k}"),
                        prices,
                        pin: pin.map(|p| format!("vim-{p}")),
                    })
                    .collect(),
                links,
                vlds: vlds
                    .into_iter()
                    .map(|(a, b, max_latency, max_jitter)| Vld {
                        from: format!("vnf-{a}"),
                        to: format!("vnf-{b}"),
                        max_latency,
                        max_jitter,
                    })
                    .collect(),
            }
        })
}

fn request() -> impl Strategy<Value = LinksRequest> {
    request_with(8, 2, 2)
}

/// Conflicts between constraints: every price and link present, half the VNFs pinned, many
/// VLDs with tight latency bounds (each usually satisfiable alone, not all together).
fn conflicting() -> impl Strategy<Value = LinksRequest> {
    (2usize..=6, 2usize..=6)
        .prop_flat_map(|(n, m)| {
            let vnfs = proptest::collection::vec(
                (
                    proptest::collection::vec(price(10).prop_map(Some), m),
                    opt(10, 0..m),
                ),
                n,
            );
            let link =
                (price(5), 0u64..100, 0u64..20).prop_map(|(p, l, j)| Some(Link::new(p, l, j)));
            let links = proptest::collection::vec(proptest::collection::vec(link, m), m);
            let vlds = proptest::collection::vec((0..n, 0..n, 0u64..40), n..=2 * n);
            (Just(m), vnfs, links, vlds)
        })
        .prop_map(|(m, vnfs, mut links, vlds)| {
            for (i, row) in links.iter_mut().enumerate() {
                row[i] = None;
            }
            LinksRequest {
                vims: (0..m).map(|i| format!("vim-{i}")).collect(),
                vnfs: vnfs
                    .into_iter()
                    .enumerate()
                    .map(|(k, (prices, pin))| Vnf {
                        id: format!("vnf-{k}"),
                        prices,
                        pin: pin.map(|p| format!("vim-{p}")),
                    })
                    .collect(),
                links,
                vlds: vlds
                    .into_iter()
                    .map(|(a, b, l)| Vld {
                        from: format!("vnf-{a}"),
                        to: format!("vnf-{b}"),
                        max_latency: Some(l),
                        max_jitter: None,
                    })
                    .collect(),
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn branch_and_bound_equals_exhaustive_search(req in request()) {
        let problem = req.validate().unwrap();
        let solution = problem.solve();
        let oracle = problem.solve_exhaustive();
        match (&solution.outcome, &oracle) {
            (Ok(p), Some(o)) => {
                prop_assert_eq!(p, o);
                prop_assert_eq!(problem.cost_of(&p.vims), Some(p.cost));
            }
            (Err(why), None) => {
                // A named conflict must really be one: each member is necessary.
                if let Unsatisfiable::Conflict { vlds, pins, .. } = why {
                    prop_assert!(!vlds.is_empty() || !pins.is_empty());
                }
            }
            (got, want) => prop_assert!(false, "solve {:?}, exhaustive {:?}", got, want),
        }
    }

    #[test]
    fn branch_and_bound_equals_exhaustive_search_under_conflicts(req in conflicting()) {
        let problem = req.validate().unwrap();
        prop_assert_eq!(problem.solve().outcome.ok(), problem.solve_exhaustive());
    }

    #[test]
    fn a_named_conflict_is_minimal(req in conflicting()) {
        let problem = req.clone().validate().unwrap();
        if let Err(Unsatisfiable::Conflict { vlds, pins, .. }) = problem.solve().outcome {
            // Keep only the conflict's constraints: still unsatisfiable; drop any one: satisfiable.
            let restrict = |drop: Option<usize>| {
                let mut r = req.clone();
                let keep: Vec<usize> = vlds.iter().copied().enumerate().filter(|&(k, _)| drop != Some(k)).map(|(_, e)| e).collect();
                r.vlds = keep.iter().map(|&e| req.vlds[e].clone()).collect();
                for (v, vnf) in r.vnfs.iter_mut().enumerate() {
                    let pos = pins.iter().position(|&p| p == v);
                    if pos.is_none() || drop == pos.map(|p| p + vlds.len()) {
                        vnf.pin = None;
                    }
                }
                r.validate().unwrap().solve_exhaustive()
            };
            prop_assert_eq!(restrict(None), None);
            for k in 0..vlds.len() + pins.len() {
                prop_assert!(restrict(Some(k)).is_some(), "member {} is not necessary", k);
            }
        }
    }
}

/// `req` with one more VNF, alone and priced 2^57 micro-units: its totals are too large for the
/// dual bound's integers, so the search uses the plain bound.
fn with_huge_prices(mut req: LinksRequest) -> LinksRequest {
    let m = req.vims.len();
    let mut prices = vec![None; m];
    prices[m - 1] = Some(Price::from_micros(1 << 57));
    req.vnfs.push(Vnf {
        id: "huge".into(),
        prices,
        pin: None,
    });
    req
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_plain_bound_for_huge_prices_equals_exhaustive_search(req in request()) {
        let problem = with_huge_prices(req).validate().unwrap();
        prop_assert_eq!(problem.solve().outcome.ok(), problem.solve_exhaustive());
    }

    /// Stopped at a node limit (or by the checker), the answer is a real placement whose cost
    /// is at least the optimum, and the lower bound at most the optimum; when it says optimal,
    /// it is the oracle's placement.
    #[test]
    fn anytime_answers_bracket_the_optimum(
        req in request_with(8, 2, 4),
        node_limit in 0u64..60,
        stop_after in proptest::option::of(0u32..6),
    ) {
        let problem = req.validate().unwrap();
        let asked = std::cell::Cell::new(0u32);
        let stop = |_: &Progress| {
            asked.set(asked.get() + 1);
            stop_after.is_some_and(|k| asked.get() > k)
        };
        let sol = problem.solve_with(&SolveOptions { node_limit, should_stop: Some(&stop), ..SolveOptions::default() });
        let oracle = problem.solve_exhaustive();
        match (&sol.outcome, &oracle) {
            (Ok(p), Some(o)) => {
                prop_assert_eq!(problem.cost_of(&p.vims), Some(p.cost));
                let lb = sol.lower_bound.unwrap();
                prop_assert!(lb <= o.cost, "bound {} above the optimum {}", lb, o.cost);
                prop_assert!(o.cost <= p.cost);
                if sol.optimal {
                    prop_assert_eq!(p, o);
                    prop_assert_eq!(lb, p.cost);
                    prop_assert_eq!(sol.gap_percent(), Some(0.0));
                }
            }
            (Err(Unsatisfiable::LimitReached { .. }), _) => prop_assert!(!sol.optimal),
            (Err(_), None) => prop_assert!(sol.optimal),
            (got, want) => prop_assert!(false, "solve {:?}, exhaustive {:?}", got, want),
        }
    }

    /// With limits too small for the deletion filter's searches, a named conflict still
    /// conflicts (members whose check stopped are kept).
    #[test]
    fn a_conflict_named_under_limits_still_conflicts(req in conflicting(), node_limit in 0u64..30) {
        let problem = req.clone().validate().unwrap();
        let sol = problem.solve_with(&SolveOptions { node_limit, ..SolveOptions::default() });
        if let Err(Unsatisfiable::Conflict { vlds, pins, .. }) = sol.outcome {
            prop_assert!(sol.optimal);
            let mut r = req.clone();
            r.vlds = vlds.iter().map(|&e| req.vlds[e].clone()).collect();
            for (v, vnf) in r.vnfs.iter_mut().enumerate() {
                if !pins.contains(&v) {
                    vnf.pin = None;
                }
            }
            prop_assert_eq!(r.validate().unwrap().solve_exhaustive(), None);
        }
    }
}

#[test]
fn the_generators_cover_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut placed, mut link, mut conflict) = (0, 0, 0);
    for k in 0..400 {
        let req = if k % 2 == 0 {
            request().new_tree(&mut runner).unwrap().current()
        } else {
            conflicting().new_tree(&mut runner).unwrap().current()
        };
        match req.validate().unwrap().solve().outcome {
            Ok(_) => placed += 1,
            Err(Unsatisfiable::Conflict { .. }) => conflict += 1,
            Err(Unsatisfiable::Link { .. }) => link += 1,
            Err(_) => {}
        }
    }
    eprintln!("placed {placed}, blocked by a link {link}, conflicts {conflict} (of 400)");
    assert!(
        placed > 40 && link > 40 && conflict > 15,
        "placed {placed}, link {link}, conflict {conflict}"
    );
}
