//! Property tests of the solver against an independent checker and a brute-force oracle.

use std::collections::BTreeMap;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::constraint::Constraint;
use crate::zone::{ComputeHost, ComputeZone};

/// Member id to (zone, host).
type Places = BTreeMap<String, (String, String)>;

/// A small random instance: ≤ 4 zones of ≤ 2 hosts, ≤ 6 items, ≤ 2 existing members,
/// ≤ 3 constraints, some zones excluded or down, capacity known on most hosts.
fn instance(seed: u64, fallback: bool) -> PlacementRequest {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nz = rng.gen_range(1..=4);
    let mut zones = Vec::new();
    for z in 0..nz {
        let nh = rng.gen_range(1..=2);
        let hosts = (0..nh)
            .map(|h| ComputeHost {
                name: format!("z{z}h{h}").into(),
                available: rng.gen_bool(0.9),
                free: rng
                    .gen_bool(0.85)
                    .then(|| Resources::new(rng.gen_range(0..=6), 1 << 20, 1 << 20)),
            })
            .collect();
        zones.push(ComputeZone {
            name: format!("AZ-{z}").into(),
            available: rng.gen_bool(0.9),
            hosts: Some(hosts),
        });
    }
    let excluded: Vec<ZoneId> = zones
        .iter()
        .filter(|_| rng.gen_bool(0.15))
        .map(|z| z.name.clone())
        .collect();
    let ni = rng.gen_range(1..=6);
    let items: Vec<Item> = (0..ni)
        .map(|i| {
            let item = Item::new(
                format!("i{i}"),
                "VDU",
                Resources::new(rng.gen_range(1..=2), 1, 1),
            );
            if rng.gen_bool(0.1) {
                item.with_zone(format!("AZ-{}", rng.gen_range(0..nz)))
            } else {
                item
            }
        })
        .collect();
    let ne = rng.gen_range(0..=2);
    let existing: Vec<ExistingMember> = (0..ne)
        .map(|e| {
            let z = rng.gen_range(0..nz);
            let hosts = zones[z].hosts.as_ref().map_or(0, Vec::len);
            let h = rng.gen_range(0..hosts.max(1));
            ExistingMember::new(format!("e{e}"), format!("AZ-{z}"), format!("z{z}h{h}"))
        })
        .collect();
    let ids: Vec<String> = items
        .iter()
        .map(|i| i.id.clone())
        .chain(existing.iter().map(|e| e.id.clone()))
        .collect();
    let nc = rng.gen_range(0..=3);
    let constraints = (0..nc)
        .map(|c| {
            let size = rng.gen_range(2..=3.min(ids.len()).max(2));
            let mut members: Vec<String> = Vec::new();
            while members.len() < size.min(ids.len()) {
                let m = ids[rng.gen_range(0..ids.len())].clone();
                if !members.contains(&m) {
                    members.push(m);
                }
            }
            let scope = if rng.gen_bool(0.5) {
                Scope::Zone
            } else {
                Scope::Host
            };
            let kind = if rng.gen_bool(0.4) {
                ConstraintKind::Affinity
            } else {
                ConstraintKind::AntiAffinity
            };
            Constraint::new(format!("c{c}"), kind, scope, members)
                .with_fallback_best_effort(fallback && rng.gen_bool(0.7))
        })
        .collect();
    PlacementRequest::new(zones)
        .with_items(items)
        .with_existing(existing)
        .with_constraints(constraints)
        .with_excluded(excluded)
        .with_selection(if rng.gen_bool(0.5) {
            Selection::Random
        } else {
            Selection::CapacityAware
        })
        .with_seed(rng.gen())
}

/// (zone, host) of every member, items from `p`.
fn places(req: &PlacementRequest, p: &Placement) -> Places {
    let mut out = Places::new();
    for e in &req.existing {
        out.insert(e.id.clone(), (e.zone.to_string(), e.host.to_string()));
    }
    for a in &p.assignments {
        out.insert(a.id.clone(), (a.zone.to_string(), a.host.to_string()));
    }
    out
}

fn is_met(c: &Constraint, places: &Places) -> bool {
    let domains: Vec<&str> = c
        .members
        .iter()
        .map(|m| {
            let (z, h) = &places[m];
            match c.scope {
                Scope::Zone => z.as_str(),
                Scope::Host => h.as_str(),
            }
        })
        .collect();
    c.is_met_by(&domains)
}

/// Checks every invariant of a successful placement; returns a description of the first
/// broken one.
fn check(req: &PlacementRequest, p: &Placement) -> Result<(), String> {
    if p.assignments.len() != req.items.len() {
        return Err("one assignment per item".into());
    }
    let mut used: BTreeMap<&str, u64> = BTreeMap::new();
    for (item, a) in req.items.iter().zip(&p.assignments) {
        if a.id != item.id {
            return Err(format!("assignment order: {a:?}"));
        }
        if req.excluded.contains(&a.zone) {
            return Err(format!("{a:?} is in an excluded zone"));
        }
        let zone = req
            .zones
            .iter()
            .find(|z| z.name == a.zone)
            .ok_or(format!("{a:?}: unknown zone"))?;
        if !zone.is_candidate() {
            return Err(format!("{a:?}: zone is not a candidate"));
        }
        let host = zone
            .hosts
            .iter()
            .flatten()
            .find(|h| h.name == a.host)
            .ok_or(format!("{a:?}: host not in its zone"))?;
        if !host.available {
            return Err(format!("{a:?}: host unavailable"));
        }
        if item.zone.as_ref().is_some_and(|z| *z != a.zone) {
            return Err(format!("{a:?}: pin ignored"));
        }
        let u = used.entry(a.host.as_str()).or_default();
        *u += item.demand.vcpus;
        if host.free.is_some_and(|f| *u > f.vcpus) {
            return Err(format!("{a:?}: host over-committed"));
        }
    }
    let places = places(req, p);
    for c in &req.constraints {
        let relaxed = p.relaxed.iter().find(|r| r.constraint == c.name);
        match (is_met(c, &places), relaxed) {
            (true, None) => {}
            (true, Some(_)) => return Err(format!("{} reported relaxed but is met", c.name)),
            (false, None) => return Err(format!("{} broken but not reported", c.name)),
            (false, Some(r)) => {
                if !c.fallback_best_effort {
                    return Err(format!("{} relaxed without fallback", c.name));
                }
                for v in &r.violations {
                    for m in &v.members {
                        let (z, h) = &places[m];
                        let d = if c.scope == Scope::Zone { z } else { h };
                        if *d != v.domain {
                            return Err(format!("{}: violation {v:?} misreports {m}", c.name));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Brute force: does an assignment of items to candidate hosts exist that meets every
/// constraint of `req` (when `with_constraints`), every pin and every capacity?
fn oracle(req: &PlacementRequest, with_constraints: bool) -> bool {
    let hosts: Vec<(&ComputeZone, &ComputeHost)> = req
        .zones
        .iter()
        .filter(|z| z.is_candidate() && !req.excluded.contains(&z.name))
        .flat_map(|z| z.hosts.iter().flatten().map(move |h| (z, h)))
        .filter(|(_, h)| h.available)
        .collect();
    let mut place: Places = req
        .existing
        .iter()
        .map(|e| (e.id.clone(), (e.zone.to_string(), e.host.to_string())))
        .collect();
    let mut used = vec![0u64; hosts.len()];
    let constraints: &[Constraint] = if with_constraints {
        &req.constraints
    } else {
        &[]
    };
    // Pairwise check of the placed members of every constraint.
    let consistent = |place: &Places| {
        constraints.iter().all(|c| {
            let ds: Vec<&str> = c
                .members
                .iter()
                .filter_map(|m| place.get(m))
                .map(|(z, h)| if c.scope == Scope::Zone { z } else { h }.as_str())
                .collect();
            c.is_met_by(&ds)
        })
    };
    fn go(
        i: usize,
        req: &PlacementRequest,
        hosts: &[(&ComputeZone, &ComputeHost)],
        used: &mut [u64],
        place: &mut Places,
        consistent: &dyn Fn(&Places) -> bool,
    ) -> bool {
        if !consistent(place) {
            return false;
        }
        let Some(item) = req.items.get(i) else {
            return true;
        };
        for (k, (z, h)) in hosts.iter().enumerate() {
            if item.zone.as_ref().is_some_and(|p| *p != z.name) {
                continue;
            }
            if h.free
                .is_some_and(|f| used[k] + item.demand.vcpus > f.vcpus)
            {
                continue;
            }
            used[k] += item.demand.vcpus;
            place.insert(item.id.clone(), (z.name.to_string(), h.name.to_string()));
            let ok = go(i + 1, req, hosts, used, place, consistent);
            place.remove(&item.id);
            used[k] -= item.demand.vcpus;
            if ok {
                return true;
            }
        }
        false
    }
    go(0, req, &hosts, &mut used, &mut place, &consistent)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Every successful placement honours every non-relaxed constraint, reports the relaxed
    /// ones accurately, never uses an excluded zone or over-commits a host, and is the same
    /// for the same seed.
    #[test]
    fn placements_honour_constraints(seed in any::<u64>()) {
        let req = instance(seed, true);
        let first = req.place();
        let again = req.place();
        match (&first, &again) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(a, b);
                if let Err(e) = check(&req, a) {
                    return Err(TestCaseError::fail(format!("{e}\n{req:#?}\n{a:#?}")));
                }
                // Relaxation only when no fully compliant placement exists.
                if a.is_relaxed() {
                    prop_assert!(!oracle(&req, true), "relaxed although compliant exists");
                }
            }
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            _ => prop_assert!(false, "same seed, different outcome"),
        }
    }

    /// Completeness against the brute-force oracle: a compliant placement is found whenever
    /// one exists, and the error kind says whether capacity or the constraints are at fault.
    #[test]
    fn complete_against_brute_force(seed in any::<u64>()) {
        let req = instance(seed, false);
        let exists = oracle(&req, true);
        let result = req.place();
        match &result {
            Ok(p) => {
                prop_assert!(exists, "solver found what the oracle says is impossible");
                prop_assert!(p.relaxed.is_empty());
                if let Err(e) = check(&req, p) {
                    return Err(TestCaseError::fail(format!("{e}\n{req:#?}\n{p:#?}")));
                }
            }
            Err(e) => {
                prop_assert!(!exists, "missed a compliant placement: {e}\n{req:#?}");
                let fits = oracle(&req, false);
                let pinned_away = req.items.iter().any(|i| {
                    i.zone.as_ref().is_some_and(|z| {
                        req.excluded.contains(z)
                            || !req.zones.iter().any(|c| c.name == *z && c.is_candidate())
                    })
                });
                let no_zone = !req
                    .zones
                    .iter()
                    .any(|z| z.is_candidate() && !req.excluded.contains(&z.name));
                if no_zone {
                    prop_assert!(e.is_capacity(), "no candidate zone, got {e}");
                } else if pinned_away {
                    prop_assert!(e.is_infeasible(), "{e}");
                } else if fits {
                    prop_assert!(e.is_infeasible(), "constraints at fault, got {e}");
                } else {
                    prop_assert!(e.is_capacity(), "capacity at fault, got {e}");
                }
            }
        }
    }

    /// The capacity-aware policy is complete too, including with best-effort constraints
    /// present: nothing is relaxed when a compliant placement exists.
    #[test]
    fn capacity_aware_never_relaxes_needlessly(seed in any::<u64>()) {
        let req = instance(seed, true).with_selection(Selection::CapacityAware);
        if let Ok(p) = req.place() {
            if let Err(e) = check(&req, &p) {
                return Err(TestCaseError::fail(format!("{e}\n{req:#?}\n{p:#?}")));
            }
            prop_assert_eq!(p.is_relaxed(), !oracle(&req, true));
        }
    }
}
