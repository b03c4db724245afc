//! Property-test your own placement policy with vnfm's exported proptest strategies
//! (`vnfm_core::strategy`, feature `proptest`), from a program rather than a `#[test]`.
//!
//! Two properties over generated placement requests (1–5 zones of 1–3 hosts, some zones or
//! hosts down, some too small; 1–6 VNFCs of 1–3 VDUs; 0–3 affinity / anti-affinity rules at
//! zone or host scope, best effort or not), checked by a rule checker written here:
//!
//! 1. **the solver keeps my rules**: whenever vnfm's solver answers, no two members of an
//!    anti-affinity rule share a zone (or host), affinity members share one, only candidate
//!    zones and available hosts are used, no host is over-filled; only best-effort rules may
//!    be broken, and only when the answer reports them relaxed;
//! 2. **my greedy policy never beats the solver**: a first-fit policy written here, whose
//!    answers the same checker validates; whenever it places every VNFC keeping every rule, the
//!    solver (which is complete) must place them too, relaxing nothing.
//!
//! The runner is deterministic (a fixed seed) and runs a bounded number of cases; a failure
//! prints the shrunk request and exits non-zero.
//!
//! ```sh
//! cargo run -p vnfm-examples --example policy_proptest
//! ```

use std::cell::Cell;
use std::collections::BTreeMap;
use std::error::Error;

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use vnfm_core::constraint::{ConstraintKind, Scope};
use vnfm_core::id::{HostId, ZoneId};
use vnfm_core::placement::PlacementRequest;
use vnfm_core::strategy::{self, CloudShape};
use vnfm_core::zone::Resources;

/// Cases per property.
const CASES: u32 = 256;

/// Where each VNFC goes: item id → (zone, host).
type Answer = BTreeMap<String, (ZoneId, HostId)>;

fn main() -> Result<(), Box<dyn Error>> {
    let requests = strategy::placement_request(CloudShape::default(), 1..=6, 0..=3);
    let config = Config {
        cases: CASES,
        // A program has no source file to save failing cases next to.
        failure_persistence: None,
        ..Config::default()
    };
    let runner = || {
        TestRunner::new_with_rng(
            config.clone(),
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        )
    };

    // 1. The solver keeps my rules.
    let (placed, relaxed, refused) = (Cell::new(0u32), Cell::new(0u32), Cell::new(0u32));
    let outcome = runner().run(&requests, |req| {
        match req.place() {
            Ok(p) => {
                placed.set(placed.get() + 1);
                if p.is_relaxed() {
                    relaxed.set(relaxed.get() + 1);
                }
                let answer: Answer = p
                    .assignments
                    .iter()
                    .map(|a| (a.id.clone(), (a.zone.clone(), a.host.clone())))
                    .collect();
                let allowed: Vec<&str> = p.relaxed.iter().map(|r| r.constraint.as_str()).collect();
                check(&req, &answer, &allowed).map_err(TestCaseError::fail)?;
            }
            Err(_) => refused.set(refused.get() + 1),
        }
        Ok(())
    });
    report("the solver keeps my rules", outcome)?;
    println!(
        "  solver placed {} request(s) ({} relaxing a best-effort rule), refused {}",
        placed.get(),
        relaxed.get(),
        refused.get()
    );

    // 2. My greedy policy never beats the solver.
    let (mine, both) = (Cell::new(0u32), Cell::new(0u32));
    let outcome = runner().run(&requests, |req| {
        let Some(answer) = first_fit(&req) else {
            return Ok(());
        };
        // My policy's answers must pass my own checker, with nothing relaxed.
        check(&req, &answer, &[]).map_err(|e| TestCaseError::fail(format!("first_fit: {e}")))?;
        mine.set(mine.get() + 1);
        match req.place() {
            Ok(p) if !p.is_relaxed() => both.set(both.get() + 1),
            Ok(p) => {
                let names: Vec<&str> = p.relaxed.iter().map(|r| r.constraint.as_str()).collect();
                return Err(TestCaseError::fail(format!(
                    "first_fit kept every rule but the solver relaxed {}",
                    names.join(", ")
                )));
            }
            Err(e) => {
                return Err(TestCaseError::fail(format!(
                    "first_fit placed every VNFC but the solver refused: {e}"
                )))
            }
        }
        Ok(())
    });
    report("my greedy policy never beats the solver", outcome)?;
    println!(
        "  first_fit placed {} request(s); the solver placed all {} without relaxing a rule",
        mine.get(),
        both.get()
    );
    Ok(())
}

/// Prints the outcome of one property; a failure becomes the program's error.
fn report(
    name: &str,
    outcome: Result<(), proptest::test_runner::TestError<PlacementRequest>>,
) -> Result<(), Box<dyn Error>> {
    match outcome {
        Ok(()) => {
            println!("property \"{name}\": {CASES}/{CASES} cases passed");
            Ok(())
        }
        Err(e) => {
            println!("property \"{name}\" FAILED: {e}");
            Err(format!("property \"{name}\" failed").into())
        }
    }
}

/// My rules, checked on `answer`: every item placed on an available host of a candidate,
/// non-excluded zone; no host over its free capacity; every constraint met unless its name is
/// in `relaxed` and it is best effort.
fn check(req: &PlacementRequest, answer: &Answer, relaxed: &[&str]) -> Result<(), String> {
    let mut used: BTreeMap<&HostId, Resources> = BTreeMap::new();
    for item in &req.items {
        let (zone, host) = answer
            .get(&item.id)
            .ok_or_else(|| format!("{} is not placed", item.id))?;
        let z = req
            .zones
            .iter()
            .find(|z| &z.name == zone)
            .filter(|z| z.is_candidate() && !req.excluded.contains(&z.name))
            .ok_or_else(|| format!("{} is in {zone}, not a candidate zone", item.id))?;
        let h = z
            .hosts
            .iter()
            .flatten()
            .find(|h| &h.name == host && h.available)
            .ok_or_else(|| format!("{} is on {host}, not an available host of {zone}", item.id))?;
        let total = used.entry(&h.name).or_default();
        *total = total.saturating_add(&item.demand);
        if let Some(free) = h.free {
            if !free.fits(total) {
                return Err(format!("{host} is over-filled ({total:?} > {free:?})"));
            }
        }
    }
    for c in &req.constraints {
        let domains: Vec<String> = c
            .members
            .iter()
            .filter_map(|m| answer.get(m))
            .map(|(zone, host)| match c.scope {
                Scope::Zone => zone.to_string(),
                Scope::Host => host.to_string(),
            })
            .collect();
        if !c.is_met_by(&domains) {
            if !c.fallback_best_effort {
                return Err(format!("hard {c} is broken: {domains:?}"));
            }
            if !relaxed.contains(&c.name.as_str()) {
                return Err(format!(
                    "{c} is broken but not reported relaxed: {domains:?}"
                ));
            }
        }
    }
    Ok(())
}

/// My policy: each VNFC in turn on the first available host (zones and hosts in catalogue
/// order) with room that keeps every rule, best-effort ones too, with the VNFCs placed so far.
/// `None` when some VNFC has no such host (no backtracking).
fn first_fit(req: &PlacementRequest) -> Option<Answer> {
    let mut answer = Answer::new();
    let mut used: BTreeMap<HostId, Resources> = BTreeMap::new();
    for item in &req.items {
        let zones = req
            .zones
            .iter()
            .filter(|z| z.is_candidate() && !req.excluded.contains(&z.name));
        let spot = zones
            .flat_map(|z| {
                z.hosts
                    .iter()
                    .flatten()
                    .filter(|h| h.available)
                    .map(move |h| (z, h))
            })
            .find(|(z, h)| {
                let after = used
                    .get(&h.name)
                    .copied()
                    .unwrap_or_default()
                    .saturating_add(&item.demand);
                let room = h.free.is_none_or(|free| free.fits(&after));
                room && req
                    .constraints
                    .iter()
                    .filter(|c| c.members.contains(&item.id))
                    .all(|c| {
                        c.members
                            .iter()
                            .filter_map(|m| answer.get(m))
                            .all(|(zone, host)| {
                                let same = match c.scope {
                                    Scope::Zone => zone == &z.name,
                                    Scope::Host => host == &h.name,
                                };
                                same == (c.kind == ConstraintKind::Affinity)
                            })
                    })
            });
        let (z, h) = spot?;
        let total = used.entry(h.name.clone()).or_default();
        *total = total.saturating_add(&item.demand);
        answer.insert(item.id.clone(), (z.name.clone(), h.name.clone()));
    }
    Some(answer)
}
