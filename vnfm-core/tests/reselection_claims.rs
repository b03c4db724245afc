//! The claims of `benches/README.md` on AZ reselection, checked as a test over a few hundred
//! seeded scenarios (the bench runs 10,000 per regime in release; this runs 300 per regime in
//! debug), generated deterministically with the bench's generator and driven against the
//! simulator exactly as the bench does:
//!
//! - capacity-aware never needs more stack attempts than random on the same scenario (and never
//!   fails where random succeeds), with the grant's zones the same for both (reselection alone)
//!   and end to end (each policy also makes the grant), in both regimes;
//! - crowded regime, end to end: capacity-aware's mean attempts ≤ 0.5 × random's;
//! - crowded regime, reselection alone (same grant): the ratio of mean reselection rounds is
//!   printed, not asserted: it is borderline around 0.5 (0.49 over the bench's 10,000
//!   scenarios, 0.52 over the first 600 here), see `benches/README.md`.
#![cfg(feature = "proptest")]
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::json;
use vnfm_core::cloud::CloudFile;
use vnfm_core::constraint::{Constraint, Scope};
use vnfm_core::driver::{
    ComputeInventory, CreateStack, ListResources, ListZones, Parameters, StackDriver,
    TemplateBundle, UpdateStack, ZoneCatalog,
};
use vnfm_core::id::{StackId, ZoneId};
use vnfm_core::placement::{Item, PlacementRequest, Selection};
use vnfm_core::reselect::{
    Action, InsufficientResourcePattern, Outcome, ReselectConfig, Reselection, Unit,
};
use vnfm_core::sim::SimCloud;
use vnfm_core::strategy::{self, CloudShape};
use vnfm_core::zone::{ComputeZone, Resources};

/// Scenarios per regime.
const SCENARIOS: usize = 300;

/// Polls a future that never waits (the simulator's) to completion.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// One VNFC: its unit name (`VDU1-0`), flavor and demand.
#[derive(Clone, Debug)]
struct Vnfc {
    name: String,
    vdu: String,
    flavor: String,
    demand: Resources,
}

#[derive(Clone, Debug)]
struct Scenario {
    seed: u64,
    cloud: CloudFile,
    vnfcs: Vec<Vnfc>,
    constraints: Vec<Constraint>,
    /// The grant's zones (spec `random` policy).
    initial: BTreeMap<String, ZoneId>,
    /// The grant's zones under `capacity-aware` (the zone catalogue's free capacity known),
    /// `None` when that grant finds no placement.
    initial_capacity_aware: Option<BTreeMap<String, ZoneId>>,
    template: String,
}

/// The two cloud regimes measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Regime {
    /// 3-6 zones of 1-3 hosts of 0-6 units: most zones have room.
    Mixed,
    /// 8-12 zones of one host of 0-1 unit: about half the zones have no room at all and the
    /// others room for one VNFC, the case reselection exists for.
    Crowded,
}

fn shape(regime: Regime) -> CloudShape {
    match regime {
        Regime::Mixed => CloudShape::default()
            .with_zones(3..=6)
            .with_hosts_per_zone(1..=3)
            .with_host_units(0..=6)
            .with_flavors(1..=3, 1..=2),
        Regime::Crowded => CloudShape::default()
            .with_zones(8..=12)
            .with_hosts_per_zone(1..=1)
            .with_host_units(0..=1)
            .with_flavors(1..=2, 1..=1),
    }
}

/// The scenario of `seed`, or `None` when the spec's random grant finds no placement.
fn scenario(seed: u64, regime: Regime) -> Option<Scenario> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    let vnf = strategy::cloud_file(shape(regime)).prop_flat_map(|cloud| {
        let flavors: Vec<String> = cloud.flavors.keys().cloned().collect();
        (
            proptest::strategy::Just(cloud),
            proptest::collection::vec((proptest::sample::select(flavors), 1usize..=3), 1..=3),
        )
    });
    let (cloud, vdus) = vnf.new_tree(&mut runner).ok()?.current();
    let vnfcs: Vec<Vnfc> = vdus
        .iter()
        .enumerate()
        .flat_map(|(v, (flavor, n))| {
            let demand = cloud.flavor(flavor).unwrap_or_default();
            (0..*n).map(move |i| Vnfc {
                name: format!("VDU{}-{i}", v + 1),
                vdu: format!("VDU{}", v + 1),
                flavor: flavor.clone(),
                demand,
            })
        })
        .collect();
    let ids: Vec<String> = vnfcs.iter().map(|v| v.name.clone()).collect();
    let constraints = strategy::constraints(ids, 0..=2)
        .new_tree(&mut runner)
        .ok()?
        .current();
    let items: Vec<Item> = vnfcs
        .iter()
        .map(|v| Item::new(v.name.clone(), v.vdu.clone(), v.demand))
        .collect();
    let grant = |listing: Vec<ComputeZone>, selection: Selection, constraints: Vec<Constraint>| {
        PlacementRequest::new(listing)
            .with_items(items.clone())
            .with_constraints(constraints)
            .with_selection(selection)
            .with_seed(seed)
            .place()
            .ok()
            .map(|g| {
                g.assignments
                    .into_iter()
                    .map(|a| (a.id, a.zone))
                    .collect::<BTreeMap<_, _>>()
            })
    };
    let zones = strategy::cloud_zones(&cloud);
    let initial = grant(
        zones
            .iter()
            .cloned()
            .map(ComputeZone::without_capacity)
            .collect(),
        Selection::Random,
        constraints.clone(),
    )?;
    // The zone-scope constraints only: the bench's stack has no server group, so host scope is
    // realised by neither run (the machine keeps the zone-scope ones too); a capacity-aware
    // grant that honoured a host affinity no host can hold would refuse scenarios that the
    // random run "solves" by ignoring it.
    let zone_scope: Vec<Constraint> = constraints
        .iter()
        .filter(|c| c.scope == Scope::Zone)
        .cloned()
        .collect();
    let initial_capacity_aware = grant(zones, Selection::CapacityAware, zone_scope);
    let template = template(&vnfcs);
    Some(Scenario {
        seed,
        cloud,
        vnfcs,
        constraints,
        initial,
        initial_capacity_aware,
        template,
    })
}

fn param(unit: &str) -> String {
    format!("zone_{}", unit.replace('-', "_"))
}

/// One top-level server per VNFC, its zone from a parameter.
fn template(vnfcs: &[Vnfc]) -> String {
    let mut t = String::from("heat_template_version: 2013-05-23\nparameters:\n");
    for v in vnfcs {
        t.push_str(&format!("  {}:\n    type: string\n", param(&v.name)));
    }
    t.push_str("resources:\n");
    for v in vnfcs {
        t.push_str(&format!(
            "  {n}:\n    type: OS::Nova::Server\n    properties:\n      name: {n}\n      \
             flavor: {f}\n      image: cirros\n      availability_zone: {{get_param: {p}}}\n      \
             networks:\n        - allocate_network: none\n",
            n = v.name,
            f = v.flavor,
            p = param(&v.name)
        ));
    }
    t
}

/// What one policy did on one scenario.
#[derive(Clone, Debug)]
struct Run {
    attempts: usize,
    succeeded: bool,
    trace: Vec<(BTreeMap<String, ZoneId>, Vec<String>)>,
}

/// Runs the reselection machine with `selection` against a fresh simulator of the scenario,
/// from the spec's random grant.
fn run(s: &Scenario, selection: Selection, pattern: &InsufficientResourcePattern) -> Run {
    run_from(s, &s.initial, selection, pattern)
}

/// Runs the reselection machine with `selection` from the grant's zones `initial`.
fn run_from(
    s: &Scenario,
    initial: &BTreeMap<String, ZoneId>,
    selection: Selection,
    pattern: &InsufficientResourcePattern,
) -> Run {
    let sim = SimCloud::new(s.cloud.clone(), s.seed);
    let listing = block_on(sim.list_zones(ListZones::default())).expect("list zones");
    let units: Vec<Unit> = s
        .vnfcs
        .iter()
        .map(|v| {
            Unit::new(
                v.name.clone(),
                v.vdu.clone(),
                initial[&v.name].clone(),
                true,
                v.demand,
            )
        })
        .collect();
    let config = ReselectConfig {
        enabled: true,
        pattern: pattern.clone(),
        max_reselections: None,
        selection,
        seed: s.seed,
    };
    let mut m = Reselection::new(config, units, s.constraints.clone()).with_zone_listing(listing);
    let mut stack: Option<StackId> = None;
    while let Some(action) = m.poll_action() {
        match action {
            Action::ApplyStack { zones } => {
                let mut params = Parameters::new();
                for (unit, zone) in &zones {
                    params.insert(param(unit), json!(zone));
                }
                let id = match &stack {
                    None => {
                        let bundle = TemplateBundle {
                            template: s.template.clone(),
                            files: BTreeMap::new(),
                        };
                        let id =
                            block_on(sim.create_stack(CreateStack::new("vnf", bundle, params)))
                                .expect("create stack");
                        stack = Some(id.clone());
                        id
                    }
                    Some(id) => {
                        block_on(sim.update_stack(UpdateStack::parameters(id.clone(), params)))
                            .expect("update stack");
                        id.clone()
                    }
                };
                let st = block_on(sim.show_stack(&id)).expect("show stack");
                if st.stack_status.is_complete() {
                    m.handle_stack_succeeded();
                } else {
                    m.handle_stack_failed(&st.stack_status_reason);
                }
            }
            Action::ListResources => {
                let id = stack.clone().expect("a stack before resources");
                let res = block_on(sim.list_resources(ListResources::new(id.clone(), 5)))
                    .expect("list resources");
                m.handle_resources(&id, &res);
            }
            Action::ListZones => {
                let z = block_on(sim.list_zones(ListZones::default())).expect("list zones");
                m.handle_zones(z);
            }
            Action::LocateFailedServers { servers } => {
                let zones = servers
                    .into_iter()
                    .map(|s| {
                        let z = block_on(sim.server(&s)).ok().and_then(|i| i.zone);
                        (s, z)
                    })
                    .collect();
                m.handle_failed_servers(zones);
            }
            Action::LocateServers { servers } => {
                let hosts = servers
                    .into_iter()
                    .map(|(u, s)| (u, block_on(sim.server(&s)).ok().and_then(|s| s.host)))
                    .collect();
                m.handle_hosts(hosts);
            }
        }
    }
    Run {
        attempts: m.attempts().len(),
        succeeded: matches!(m.outcome(), Some(Outcome::Succeeded)),
        trace: m
            .attempts()
            .iter()
            .map(|a| (a.zones.clone(), a.failed_units.clone()))
            .collect(),
    }
}

fn scenarios(regime: Regime) -> Vec<Scenario> {
    let mut out = Vec::with_capacity(SCENARIOS);
    let mut seed = 0u64;
    while out.len() < SCENARIOS {
        if let Some(s) = scenario(seed, regime) {
            out.push(s);
        }
        seed += 1;
    }
    out
}

/// Attempts of each policy on every scenario: (random, capacity-aware) with the same grant,
/// and (random, capacity-aware) end to end.
struct Tally {
    /// Scenarios where capacity-aware needs more attempts or fails where random succeeds.
    worse: Vec<String>,
    both: usize,
    sum_r: usize,
    sum_c: usize,
}

impl Tally {
    fn new() -> Self {
        Tally {
            worse: Vec::new(),
            both: 0,
            sum_r: 0,
            sum_c: 0,
        }
    }

    fn add(&mut self, seed: u64, what: &str, r: &Run, c: Option<&Run>) {
        let c_ok = c.filter(|c| c.succeeded);
        match (r.succeeded, c_ok) {
            (true, Some(c)) => {
                self.both += 1;
                self.sum_r += r.attempts;
                self.sum_c += c.attempts;
                if c.attempts > r.attempts {
                    self.worse.push(format!(
                        "{what} seed {seed}: random {} attempts, capacity-aware {}: {:?}",
                        r.attempts, c.attempts, c.trace
                    ));
                }
            }
            (true, None) => self.worse.push(format!(
                "{what} seed {seed}: random succeeds in {}, capacity-aware fails",
                r.attempts
            )),
            _ => {}
        }
    }

    fn mean_r(&self) -> f64 {
        self.sum_r as f64 / self.both.max(1) as f64
    }

    fn mean_c(&self) -> f64 {
        self.sum_c as f64 / self.both.max(1) as f64
    }
}

fn check(regime: Regime) {
    let pattern = InsufficientResourcePattern::standard().unwrap();
    let all = scenarios(regime);
    let mut same_grant = Tally::new();
    let mut end_to_end = Tally::new();
    // Reselection rounds (attempts - 1) over the scenarios both solve after the grant failed.
    let (mut resel, mut rounds_r, mut rounds_c) = (0usize, 0usize, 0usize);
    for s in &all {
        let r = run(s, Selection::Random, &pattern);
        let c = run(s, Selection::CapacityAware, &pattern);
        same_grant.add(s.seed, "same grant", &r, Some(&c));
        if r.succeeded && c.succeeded && r.attempts > 1 {
            resel += 1;
            rounds_r += r.attempts - 1;
            rounds_c += c.attempts - 1;
        }
        let e = s
            .initial_capacity_aware
            .as_ref()
            .map(|i| run_from(s, i, Selection::CapacityAware, &pattern));
        end_to_end.add(s.seed, "end to end", &r, e.as_ref());
    }
    let rr = rounds_r as f64 / resel.max(1) as f64;
    let rc = rounds_c as f64 / resel.max(1) as f64;
    println!(
        "{regime:?}, {} scenarios: same grant, mean attempts (of {} both solve) random {:.3}, \
         capacity-aware {:.3} ({:.2}); rounds after a failed grant (of {resel}) random {rr:.3}, \
         capacity-aware {rc:.3}; end to end (of {}) random {:.3}, capacity-aware {:.3} ({:.2})",
        all.len(),
        same_grant.both,
        same_grant.mean_r(),
        same_grant.mean_c(),
        same_grant.mean_c() / same_grant.mean_r(),
        end_to_end.both,
        end_to_end.mean_r(),
        end_to_end.mean_c(),
        end_to_end.mean_c() / end_to_end.mean_r(),
    );
    assert!(
        same_grant.worse.is_empty() && end_to_end.worse.is_empty(),
        "capacity-aware worse than random on {} scenarios:\n{}",
        same_grant.worse.len() + end_to_end.worse.len(),
        same_grant
            .worse
            .iter()
            .chain(&end_to_end.worse)
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The scenarios exercise what they claim to: enough of them both solve, and reselect.
    assert!(
        end_to_end.both >= SCENARIOS / 5,
        "{} both solve",
        end_to_end.both
    );
    assert!(resel >= SCENARIOS / 20, "{resel} reselect");
    if regime == Regime::Crowded {
        assert!(
            end_to_end.mean_c() <= 0.5 * end_to_end.mean_r(),
            "crowded, end to end: capacity-aware {:.3} attempts, random {:.3}: not at most half",
            end_to_end.mean_c(),
            end_to_end.mean_r()
        );
        // Reselection alone, in rounds: borderline (0.49 over the bench's 10,000 scenarios,
        // 0.52 over this test's first 600, 0.55 over its first 150), so not a claim a test can
        // hold; reported, and the README says so.
        println!(
            "crowded, same grant: capacity-aware / random reselection rounds {:.2} (not asserted)",
            rc / rr
        );
    }
}

#[test]
fn capacity_aware_claims_hold_on_the_crowded_regime() {
    check(Regime::Crowded);
}

#[test]
fn capacity_aware_is_never_worse_on_the_mixed_regime() {
    check(Regime::Mixed);
}
