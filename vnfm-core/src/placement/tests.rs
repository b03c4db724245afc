use std::collections::{BTreeMap, BTreeSet};
use std::error::Error as _;

use super::*;
use crate::constraint::Constraint;
use crate::zone::{ComputeHost, ComputeZone};

const SMALL: Resources = Resources::new(1, 1024, 10);

fn host(name: &str, free: Option<Resources>) -> ComputeHost {
    ComputeHost {
        name: name.into(),
        available: true,
        free,
    }
}

/// `n` zones `AZ-1..` with `h` hosts each (`AZ-1-c1`, ...), capacity `free` per host.
fn zones(n: usize, h: usize, free: Option<Resources>) -> Vec<ComputeZone> {
    (1..=n)
        .map(|z| ComputeZone {
            name: format!("AZ-{z}").into(),
            available: true,
            hosts: Some(
                (1..=h)
                    .map(|i| host(&format!("AZ-{z}-c{i}"), free))
                    .collect(),
            ),
        })
        .collect()
}

fn items(ids: &[&str]) -> Vec<Item> {
    ids.iter()
        .map(|id| Item::new(*id, id.split('-').next().unwrap_or("VDU"), SMALL))
        .collect()
}

fn zone_of<'p>(p: &'p Placement, id: &str) -> &'p str {
    p.assignment(id).unwrap().zone.as_str()
}

fn host_of<'p>(p: &'p Placement, id: &str) -> &'p str {
    p.assignment(id).unwrap().host.as_str()
}

#[test]
fn zone_anti_affinity_spreads_members_over_zones() {
    let ids = ["VDU1-0", "VDU1-1", "VDU1-2"];
    for seed in 0..20 {
        let p = PlacementRequest::new(zones(3, 2, None))
            .with_items(items(&ids))
            .with_constraints(vec![Constraint::anti_affinity("spread", Scope::Zone, ids)])
            .with_seed(seed)
            .place()
            .unwrap();
        let zs: BTreeSet<&str> = ids.iter().map(|i| zone_of(&p, i)).collect();
        assert_eq!(zs.len(), 3, "seed {seed}: {p:?}");
        assert!(p.relaxed.is_empty());
        assert_eq!(p.assignments.len(), 3);
        assert_eq!(p.assignments[1].id, "VDU1-1");
        assert_eq!(p.assignments[1].vdu_id.as_str(), "VDU1");
    }
}

#[test]
fn same_seed_same_result_and_seeds_vary_the_choice() {
    let ids = ["a-0", "a-1", "a-2", "a-3"];
    let req = PlacementRequest::new(zones(5, 4, None))
        .with_items(items(&ids))
        .with_constraints(vec![Constraint::anti_affinity("n", Scope::Host, ids)]);
    let mut seen = BTreeSet::new();
    for seed in 0..16 {
        let a = req.clone().with_seed(seed).place().unwrap();
        let b = req.clone().with_seed(seed).place().unwrap();
        assert_eq!(a, b);
        seen.insert(format!("{:?}", a.assignments));
    }
    assert!(seen.len() > 8, "random selection should vary with the seed");
}

#[test]
fn zone_affinity_keeps_members_in_one_zone() {
    let ids = ["VDU1-0", "VDU2-0", "VDU3-0"];
    for seed in 0..10 {
        let p = PlacementRequest::new(zones(4, 3, None))
            .with_items(items(&ids))
            .with_constraints(vec![Constraint::affinity("together", Scope::Zone, ids)])
            .with_seed(seed)
            .place()
            .unwrap();
        let zs: BTreeSet<&str> = ids.iter().map(|i| zone_of(&p, i)).collect();
        assert_eq!(zs.len(), 1, "{p:?}");
    }
}

#[test]
fn host_affinity_shares_a_host_and_host_anti_affinity_may_share_a_zone() {
    let p = PlacementRequest::new(zones(3, 3, None))
        .with_items(items(&["a-0", "a-1", "b-0"]))
        .with_constraints(vec![Constraint::affinity(
            "pair",
            Scope::Host,
            ["a-0", "a-1"],
        )])
        .with_seed(3)
        .place()
        .unwrap();
    assert_eq!(host_of(&p, "a-0"), host_of(&p, "a-1"));
    assert_eq!(zone_of(&p, "a-0"), zone_of(&p, "a-1"));

    // One zone, three hosts: host anti-affinity is met inside the zone.
    let ids = ["x-0", "x-1", "x-2"];
    let p = PlacementRequest::new(zones(1, 3, None))
        .with_items(items(&ids))
        .with_constraints(vec![Constraint::anti_affinity("hosts", Scope::Host, ids)])
        .place()
        .unwrap();
    let hs: BTreeSet<&str> = ids.iter().map(|i| host_of(&p, i)).collect();
    assert_eq!(hs.len(), 3);
    assert!(p.relaxed.is_empty());
}

#[test]
fn affinity_with_an_existing_member_pins_to_its_zone_and_host() {
    let existing = vec![ExistingMember::new("old-0", "AZ-3", "AZ-3-c2")];
    for seed in 0..5 {
        let p = PlacementRequest::new(zones(4, 3, None))
            .with_items(items(&["new-0", "new-1"]))
            .with_existing(existing.clone())
            .with_constraints(vec![
                Constraint::affinity("z", Scope::Zone, ["old-0", "new-0"]),
                Constraint::affinity("h", Scope::Host, ["old-0", "new-1"]),
            ])
            .with_seed(seed)
            .place()
            .unwrap();
        assert_eq!(zone_of(&p, "new-0"), "AZ-3");
        assert_eq!(host_of(&p, "new-1"), "AZ-3-c2");
        assert_eq!(
            p.assignments.len(),
            2,
            "existing members are not reassigned"
        );
    }
}

#[test]
fn anti_affinity_avoids_existing_members() {
    let existing = vec![
        ExistingMember::new("old-0", "AZ-1", "AZ-1-c1"),
        ExistingMember::new("old-1", "AZ-2", "AZ-2-c1"),
    ];
    for seed in 0..10 {
        let p = PlacementRequest::new(zones(3, 2, None))
            .with_items(items(&["new-0"]))
            .with_existing(existing.clone())
            .with_constraints(vec![Constraint::anti_affinity(
                "spread",
                Scope::Zone,
                ["old-0", "old-1", "new-0"],
            )])
            .with_seed(seed)
            .place()
            .unwrap();
        assert_eq!(zone_of(&p, "new-0"), "AZ-3");
    }
}

#[test]
fn excluded_and_unavailable_zones_and_hosts_are_never_chosen() {
    let mut zs = zones(4, 2, None);
    zs[1].available = false;
    zs[2].hosts.as_mut().unwrap()[0].available = false;
    let ids: Vec<String> = (0..12).map(|i| format!("v-{i}")).collect();
    for seed in 0..10 {
        let p = PlacementRequest::new(zs.clone())
            .with_items(ids.iter().map(|i| Item::new(i, "v", SMALL)).collect())
            .with_excluded([ZoneId::new("AZ-4")])
            .with_seed(seed)
            .place()
            .unwrap();
        for a in &p.assignments {
            assert!(
                a.zone.as_str() == "AZ-1" || a.zone.as_str() == "AZ-3",
                "{a:?}"
            );
            assert_ne!(a.host.as_str(), "AZ-3-c1");
        }
    }
}

#[test]
fn no_candidate_zone_is_its_own_error() {
    let err = PlacementRequest::new(zones(2, 1, None))
        .with_items(items(&["a-0"]))
        .with_excluded([ZoneId::new("AZ-1"), ZoneId::new("AZ-2")])
        .place()
        .unwrap_err();
    assert!(matches!(
        err,
        PlacementError::NoCandidateZone {
            listed: 2,
            excluded: 2
        }
    ));
    assert!(err.is_capacity());
    assert_eq!(
        err.to_string(),
        "no candidate zone: 2 zone(s) listed, 2 excluded, none available with an available \
         compute host"
    );
}

#[test]
fn host_capacity_bounds_placement() {
    // Each host takes two SMALL items.
    let free = Some(Resources::new(2, 4096, 100));
    let ids: Vec<String> = (0..8).map(|i| format!("v-{i}")).collect();
    let p = PlacementRequest::new(zones(2, 2, free))
        .with_items(ids.iter().map(|i| Item::new(i, "v", SMALL)).collect())
        .place()
        .unwrap();
    let mut per_host: BTreeMap<&str, usize> = BTreeMap::new();
    for a in &p.assignments {
        *per_host.entry(a.host.as_str()).or_default() += 1;
    }
    assert_eq!(per_host.len(), 4);
    assert!(per_host.values().all(|n| *n == 2), "{per_host:?}");

    // One more does not fit: capacity, not constraints.
    let err = PlacementRequest::new(zones(2, 2, free))
        .with_items(
            (0..9)
                .map(|i| Item::new(format!("v-{i}"), "v", SMALL))
                .collect(),
        )
        .place()
        .unwrap_err();
    assert!(err.is_capacity(), "{err}");
    assert!(!err.is_infeasible());
    let msg = err.to_string();
    assert!(
        msg.starts_with("capacity exhausted: 9 items demanding 9 vCPU"),
        "{msg}"
    );

    // An item bigger than any host.
    let err = PlacementRequest::new(zones(2, 2, free))
        .with_items(vec![Item::new("big-0", "big", Resources::new(3, 1, 1))])
        .place()
        .unwrap_err();
    match err {
        PlacementError::CapacityExhausted { items, detail } => {
            assert_eq!(items, vec!["big-0".to_owned()]);
            assert_eq!(detail, "no candidate host has room for big-0");
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn unknown_host_capacity_is_not_a_bound() {
    let ids: Vec<String> = (0..50).map(|i| format!("v-{i}")).collect();
    let p = PlacementRequest::new(zones(1, 1, None))
        .with_items(ids.iter().map(|i| Item::new(i, "v", SMALL)).collect())
        .place()
        .unwrap();
    assert!(p.assignments.iter().all(|a| a.host.as_str() == "AZ-1-c1"));
}

#[test]
fn hard_anti_affinity_beyond_the_zones_is_infeasible_and_named() {
    let ids = ["VDU1-0", "VDU1-1", "VDU1-2"];
    let err = PlacementRequest::new(zones(2, 2, None))
        .with_items(items(&ids))
        .with_constraints(vec![
            Constraint::anti_affinity("spread", Scope::Zone, ids),
            Constraint::affinity("other", Scope::Host, ["VDU1-0"]),
        ])
        .place()
        .unwrap_err();
    assert!(err.is_infeasible());
    assert!(!err.is_capacity());
    assert_eq!(
        err.to_string(),
        "placement infeasible: constraint \"spread\" cannot be met for VDU1-0, VDU1-1 and \
         VDU1-2: 3 members need distinct zones but only 2 candidate zones remain"
    );
}

#[test]
fn best_effort_anti_affinity_is_relaxed_and_reported() {
    let ids = ["VDU1-0", "VDU1-1", "VDU1-2"];
    for seed in 0..10 {
        let p = PlacementRequest::new(zones(2, 2, None))
            .with_items(items(&ids))
            .with_constraints(vec![Constraint::anti_affinity("spread", Scope::Zone, ids)
                .with_fallback_best_effort(true)])
            .with_seed(seed)
            .place()
            .unwrap();
        // Relaxed as little as possible: two zones used, one shared pair.
        let zs: BTreeSet<&str> = ids.iter().map(|i| zone_of(&p, i)).collect();
        assert_eq!(zs.len(), 2);
        assert!(p.is_relaxed());
        let r = &p.relaxed[0];
        assert_eq!(r.constraint, "spread");
        assert_eq!(r.violations.len(), 1);
        assert_eq!(r.violations[0].members.len(), 2);
        let msg = r.to_string();
        assert!(
            msg.starts_with("anti-affinity \"spread\" at zone scope: VDU1-"),
            "{msg}"
        );
        assert!(
            msg.ends_with("because only 2 candidate zones remain for 3 members"),
            "{msg}"
        );
        let shared = &r.violations[0];
        for m in &shared.members {
            assert_eq!(zone_of(&p, m), shared.domain);
        }
    }
}

#[test]
fn one_candidate_zone_message() {
    let p = PlacementRequest::new(zones(1, 1, None))
        .with_items(items(&["VDU1-0", "VDU2-0"]))
        .with_constraints(vec![Constraint::anti_affinity(
            "X",
            Scope::Zone,
            ["VDU1-0", "VDU2-0"],
        )
        .with_fallback_best_effort(true)])
        .place()
        .unwrap();
    assert_eq!(
        p.relaxed[0].to_string(),
        "anti-affinity \"X\" at zone scope: VDU1-0 and VDU2-0 share AZ-1 because only 1 \
         candidate zone remains for 2 members"
    );
}

#[test]
fn only_the_constraints_that_must_be_relaxed_are() {
    // "wide" cannot hold (3 members, 2 zones); "pair" can, and must not be reported.
    let p = PlacementRequest::new(zones(2, 3, None))
        .with_items(items(&["a-0", "a-1", "a-2", "b-0", "b-1"]))
        .with_constraints(vec![
            Constraint::anti_affinity("pair", Scope::Zone, ["b-0", "b-1"])
                .with_fallback_best_effort(true),
            Constraint::anti_affinity("wide", Scope::Zone, ["a-0", "a-1", "a-2"])
                .with_fallback_best_effort(true),
        ])
        .with_seed(11)
        .place()
        .unwrap();
    assert_ne!(zone_of(&p, "b-0"), zone_of(&p, "b-1"));
    let names: Vec<&str> = p.relaxed.iter().map(|r| r.constraint.as_str()).collect();
    assert_eq!(names, vec!["wide"]);
}

#[test]
fn best_effort_affinity_is_split_when_no_host_holds_the_group() {
    // Each host holds one item; affinity at host scope cannot hold.
    let free = Some(Resources::new(1, 1024, 10));
    let base = PlacementRequest::new(zones(1, 2, free)).with_items(items(&["a-0", "a-1"]));
    let err = base
        .clone()
        .with_constraints(vec![Constraint::affinity(
            "tight",
            Scope::Host,
            ["a-0", "a-1"],
        )])
        .place()
        .unwrap_err();
    assert!(err.is_infeasible(), "{err}");
    assert!(err.to_string().contains("constraint \"tight\""), "{err}");

    let p = base
        .with_constraints(vec![Constraint::affinity(
            "tight",
            Scope::Host,
            ["a-0", "a-1"],
        )
        .with_fallback_best_effort(true)])
        .place()
        .unwrap();
    assert_ne!(host_of(&p, "a-0"), host_of(&p, "a-1"));
    let r = &p.relaxed[0];
    assert_eq!(r.kind, ConstraintKind::Affinity);
    assert_eq!(r.violations.len(), 2);
    assert!(
        r.to_string()
            .starts_with("affinity \"tight\" at host scope: split over AZ-1-c"),
        "{r}"
    );
}

#[test]
fn conflict_explanation_is_minimal() {
    let err = PlacementRequest::new(zones(3, 2, None))
        .with_items(items(&["a-0", "a-1", "b-0", "b-1", "c-0"]))
        .with_constraints(vec![
            Constraint::anti_affinity("unrelated", Scope::Zone, ["b-0", "b-1"]),
            Constraint::anti_affinity("apart", Scope::Zone, ["a-0", "a-1"]),
            Constraint::affinity("together", Scope::Host, ["a-0", "a-1", "c-0"]),
        ])
        .place()
        .unwrap_err();
    match &err {
        PlacementError::Infeasible {
            constraints,
            resources,
            ..
        } => {
            assert_eq!(
                constraints,
                &vec!["apart".to_owned(), "together".to_owned()]
            );
            assert_eq!(resources, &vec!["a-0", "a-1", "c-0"]);
        }
        other => panic!("unexpected {other}"),
    }
    assert!(err
        .to_string()
        .starts_with("placement infeasible: constraints \"apart\" and \"together\" cannot be met"));
}

#[test]
fn hard_constraints_stay_hard_while_best_effort_ones_relax() {
    // "keep" (hard) separates x-0 and x-1; "soft" (best effort) wants 3 apart in 2 zones.
    for seed in 0..10 {
        let p = PlacementRequest::new(zones(2, 2, None))
            .with_items(items(&["x-0", "x-1", "y-0", "y-1", "y-2"]))
            .with_constraints(vec![
                Constraint::anti_affinity("keep", Scope::Zone, ["x-0", "x-1"]),
                Constraint::anti_affinity("soft", Scope::Zone, ["y-0", "y-1", "y-2"])
                    .with_fallback_best_effort(true),
            ])
            .with_seed(seed)
            .place()
            .unwrap();
        assert_ne!(zone_of(&p, "x-0"), zone_of(&p, "x-1"));
        assert_eq!(p.relaxed.len(), 1);
        assert_eq!(p.relaxed[0].constraint, "soft");
    }
}

#[test]
fn existing_members_violating_a_hard_rule_make_it_infeasible() {
    let err = PlacementRequest::new(zones(2, 2, None))
        .with_items(items(&["n-0"]))
        .with_existing(vec![
            ExistingMember::new("o-0", "AZ-1", "AZ-1-c1"),
            ExistingMember::new("o-1", "AZ-1", "AZ-1-c1"),
        ])
        .with_constraints(vec![Constraint::anti_affinity(
            "h",
            Scope::Host,
            ["o-0", "o-1", "n-0"],
        )])
        .place()
        .unwrap_err();
    assert!(err.is_infeasible(), "{err}");

    // With fallback the violation is reported; the new member still avoids them.
    let p = PlacementRequest::new(zones(2, 2, None))
        .with_items(items(&["n-0"]))
        .with_existing(vec![
            ExistingMember::new("o-0", "AZ-1", "AZ-1-c1"),
            ExistingMember::new("o-1", "AZ-1", "AZ-1-c1"),
        ])
        .with_constraints(vec![Constraint::anti_affinity(
            "h",
            Scope::Host,
            ["o-0", "o-1", "n-0"],
        )
        .with_fallback_best_effort(true)])
        .place()
        .unwrap();
    assert_ne!(host_of(&p, "n-0"), "AZ-1-c1");
    assert_eq!(p.relaxed[0].violations[0].members, vec!["o-0", "o-1"]);
}

#[test]
fn pinned_items_go_to_their_zone() {
    let p = PlacementRequest::new(zones(3, 1, None))
        .with_items(vec![
            Item::new("a-0", "a", SMALL).with_zone("AZ-2"),
            Item::new("a-1", "a", SMALL),
        ])
        .with_constraints(vec![Constraint::anti_affinity(
            "n",
            Scope::Zone,
            ["a-0", "a-1"],
        )])
        .place()
        .unwrap();
    assert_eq!(zone_of(&p, "a-0"), "AZ-2");
    assert_ne!(zone_of(&p, "a-1"), "AZ-2");

    let err = PlacementRequest::new(zones(3, 1, None))
        .with_items(vec![Item::new("a-0", "a", SMALL).with_zone("AZ-2")])
        .with_excluded([ZoneId::new("AZ-2")])
        .place()
        .unwrap_err();
    assert!(err.is_infeasible());
    assert!(
        err.to_string()
            .ends_with("item \"a-0\" is pinned to zone \"AZ-2\", which is excluded"),
        "{err}"
    );
}

#[test]
fn capacity_aware_is_worst_fit_with_stable_ties() {
    let mut zs = zones(3, 2, Some(Resources::new(4, 8192, 100)));
    // AZ-2 has the most free capacity; in it, c2 is the roomier host.
    zs[1].hosts.as_mut().unwrap()[1].free = Some(Resources::new(16, 8192, 100));
    let p = PlacementRequest::new(zs.clone())
        .with_items(items(&["a-0"]))
        .with_selection(Selection::CapacityAware)
        .place()
        .unwrap();
    assert_eq!(host_of(&p, "a-0"), "AZ-2-c2");

    // Equal zones: the first listed wins, then placements spread (worst fit).
    let p = PlacementRequest::new(zones(3, 2, Some(Resources::new(4, 8192, 100))))
        .with_items(items(&["a-0", "a-1", "a-2", "a-3"]))
        .with_selection(Selection::CapacityAware)
        .place()
        .unwrap();
    let hosts: Vec<&str> = p.assignments.iter().map(|a| a.host.as_str()).collect();
    assert_eq!(hosts, vec!["AZ-1-c1", "AZ-2-c1", "AZ-3-c1", "AZ-1-c2"]);
}

#[test]
fn capacity_aware_backtracks_when_greedy_fails() {
    // Worst fit would put "g" (affinity pair, 2 vCPU each) on the big zone's big host... the
    // anti-affinity forces the search to reconsider.
    let zs = vec![
        ComputeZone {
            name: "AZ-1".into(),
            available: true,
            hosts: Some(vec![host("big", Some(Resources::new(8, 100_000, 1000)))]),
        },
        ComputeZone {
            name: "AZ-2".into(),
            available: true,
            hosts: Some(vec![host("small", Some(Resources::new(2, 100_000, 1000)))]),
        },
    ];
    let demand = Resources::new(2, 1, 1);
    let p = PlacementRequest::new(zs)
        .with_items(vec![
            Item::new("p-0", "p", demand),
            Item::new("p-1", "p", demand),
            Item::new("q-0", "q", demand),
        ])
        .with_constraints(vec![
            Constraint::anti_affinity("apart", Scope::Zone, ["p-0", "q-0"]),
            Constraint::affinity("pair", Scope::Zone, ["p-0", "p-1"]),
        ])
        .with_selection(Selection::CapacityAware)
        .place()
        .unwrap();
    assert_eq!(zone_of(&p, "p-0"), "AZ-1");
    assert_eq!(zone_of(&p, "p-1"), "AZ-1");
    assert_eq!(zone_of(&p, "q-0"), "AZ-2");
}

#[test]
fn invalid_requests_name_the_field() {
    let source = |e: PlacementError| {
        assert!(matches!(e, PlacementError::Invalid(_)));
        assert_eq!(e.to_string(), "invalid placement request");
        e.source().unwrap().to_string()
    };
    let dup = PlacementRequest::new(zones(1, 1, None))
        .with_items(items(&["a-0", "a-0"]))
        .place()
        .unwrap_err();
    assert_eq!(
        source(dup),
        "items[1].id: duplicate resource id \"a-0\": expected unique ids"
    );
    let unknown = PlacementRequest::new(zones(1, 1, None))
        .with_items(items(&["a-0"]))
        .with_constraints(vec![Constraint::affinity("c", Scope::Zone, ["a-0", "zz"])])
        .place()
        .unwrap_err();
    assert_eq!(
        source(unknown),
        "constraints[0].members[1]: unknown member \"zz\" in constraint \"c\": expected the id \
         of an item or of an existing member"
    );
    let mut zs = zones(2, 1, None);
    zs[1].name = "AZ-1".into();
    let dz = PlacementRequest::new(zs).place().unwrap_err();
    assert!(source(dz).starts_with("zones[1].name: duplicate zone \"AZ-1\""));
    let moved = PlacementRequest::new(zones(2, 1, None))
        .with_existing(vec![ExistingMember::new("o", "AZ-2", "AZ-1-c1")])
        .place()
        .unwrap_err();
    assert!(source(moved).starts_with("existing[0].host: existing member \"o\" is on host"));
    let twice = PlacementRequest::new(zones(1, 1, None))
        .with_items(items(&["a-0"]))
        .with_constraints(vec![
            Constraint::affinity("c", Scope::Zone, ["a-0"]),
            Constraint::affinity("c", Scope::Host, ["a-0"]),
        ])
        .place()
        .unwrap_err();
    assert!(source(twice).starts_with("constraints[1].name: duplicate constraint name \"c\""));
}

#[test]
fn step_limit_gives_up_with_its_own_error() {
    let ids: Vec<String> = (0..10).map(|i| format!("v-{i}")).collect();
    let err = PlacementRequest::new(zones(2, 2, None))
        .with_items(ids.iter().map(|i| Item::new(i, "v", SMALL)).collect())
        .with_step_limit(3)
        .place()
        .unwrap_err();
    assert!(
        matches!(err, PlacementError::SearchLimit { steps: 3 }),
        "{err}"
    );
}

#[test]
fn results_serialize_in_camel_case() {
    let p = PlacementRequest::new(zones(1, 1, None))
        .with_items(items(&["VDU1-0", "VDU2-0"]))
        .with_constraints(vec![Constraint::anti_affinity(
            "X",
            Scope::Zone,
            ["VDU1-0", "VDU2-0"],
        )
        .with_fallback_best_effort(true)])
        .place()
        .unwrap();
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["assignments"][0]["vduId"], "VDU1");
    assert_eq!(json["assignments"][0]["zone"], "AZ-1");
    assert_eq!(json["relaxed"][0]["kind"], "ANTI_AFFINITY");
    assert_eq!(json["relaxed"][0]["violations"][0]["domain"], "AZ-1");
    let back: Placement = serde_json::from_value(json).unwrap();
    assert_eq!(back, p);
    let req: PlacementRequest =
        serde_json::from_str(r#"{"zones":[],"selection":"CAPACITY_AWARE","excluded":["AZ-9"]}"#)
            .unwrap();
    assert_eq!(req.selection, Selection::CapacityAware);
    assert_eq!(req.step_limit, DEFAULT_STEP_LIMIT);
}

#[test]
fn large_host_anti_affinity_group_with_existing_members() {
    // The scheduler_perf shape at small scale: 20 zones x 10 hosts, 50 existing + 100 new.
    let zs = zones(20, 10, Some(Resources::new(64, 262_144, 2000)));
    let all_hosts: Vec<(String, String)> = zs
        .iter()
        .flat_map(|z| {
            z.hosts
                .iter()
                .flatten()
                .map(|h| (z.name.to_string(), h.name.to_string()))
        })
        .collect();
    let existing: Vec<ExistingMember> = (0..50)
        .map(|i| {
            let (z, h) = &all_hosts[i * 4];
            ExistingMember::new(format!("old-{i}"), z.as_str(), h.as_str())
        })
        .collect();
    let new: Vec<Item> = (0..100)
        .map(|i| Item::new(format!("new-{i}"), "pod", SMALL))
        .collect();
    let members: Vec<String> = existing
        .iter()
        .map(|e| e.id.clone())
        .chain(new.iter().map(|i| i.id.clone()))
        .collect();
    for selection in [Selection::Random, Selection::CapacityAware] {
        let p = PlacementRequest::new(zs.clone())
            .with_items(new.clone())
            .with_existing(existing.clone())
            .with_constraints(vec![Constraint::anti_affinity(
                "pods",
                Scope::Host,
                members.clone(),
            )])
            .with_selection(selection)
            .with_seed(42)
            .place()
            .unwrap();
        let mut used: BTreeSet<&str> = existing.iter().map(|e| e.host.as_str()).collect();
        for a in &p.assignments {
            assert!(
                used.insert(a.host.as_str()),
                "{selection:?}: {a:?} shares a host"
            );
        }
    }
}
