//! The AZ reselection workload shared by the `reselection` bench and the claims test
//! (`benches/tests/reselection_claims.rs`): seeded scenarios from `vnfm_core::strategy` and one
//! run of the `Reselection` machine against a fresh `SimCloud`. See `benches/benches/reselection.rs`
//! for what a scenario is.

// Workload set-up may panic on a broken workload, like a test.
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

/// Polls a future that never waits (the simulator's) to completion.
pub fn block_on<F: Future>(f: F) -> F::Output {
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
pub struct Vnfc {
    /// The unit name (`VDU1-0`).
    pub name: String,
    /// Its VDU.
    pub vdu: String,
    /// Its flavor.
    pub flavor: String,
    /// What it needs.
    pub demand: Resources,
}

/// One seeded scenario: a cloud, a VNF, its constraints and its grants.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The seed it was generated from.
    pub seed: u64,
    /// The simulated cloud.
    pub cloud: CloudFile,
    /// The VNF's VNFCs.
    pub vnfcs: Vec<Vnfc>,
    /// The generated constraints over the VNFCs.
    pub constraints: Vec<Constraint>,
    /// The grant's zones (spec `random` policy).
    pub initial: BTreeMap<String, ZoneId>,
    /// The grant's zones under `capacity-aware` (the zone catalogue's free capacity known),
    /// `None` when that grant finds no placement.
    pub initial_capacity_aware: Option<BTreeMap<String, ZoneId>>,
    /// The stack template (one server per VNFC).
    pub template: String,
}

/// The two cloud regimes measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Regime {
    /// 3-6 zones of 1-3 hosts of 0-6 units: most zones have room.
    Mixed,
    /// 8-12 zones of one host of 0-1 unit: about half the zones have no room at all and the
    /// others room for one VNFC, the case reselection exists for.
    Crowded,
}

/// The cloud shape of `regime`.
pub fn shape(regime: Regime) -> CloudShape {
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
pub fn scenario(seed: u64, regime: Regime) -> Option<Scenario> {
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

/// The stack parameter holding the zone of `unit`.
pub fn param(unit: &str) -> String {
    format!("zone_{}", unit.replace('-', "_"))
}

/// One top-level server per VNFC, its zone from a parameter.
pub fn template(vnfcs: &[Vnfc]) -> String {
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
pub struct Run {
    /// Stack attempts made.
    pub attempts: usize,
    /// Whether the last one succeeded.
    pub succeeded: bool,
    /// Every attempt's zones and failed units.
    pub trace: Vec<(BTreeMap<String, ZoneId>, Vec<String>)>,
}

/// Runs the reselection machine with `selection` against a fresh simulator of the scenario,
/// from the spec's random grant.
pub fn run(s: &Scenario, selection: Selection, pattern: &InsufficientResourcePattern) -> Run {
    run_from(s, &s.initial, selection, pattern)
}

/// Runs the reselection machine with `selection` from the grant's zones `initial`.
pub fn run_from(
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
        race_retries: 0,
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

/// The first `n` scenarios of `regime` (seeds in order, skipping those the generator refuses).
pub fn scenarios(regime: Regime, n: usize) -> Vec<Scenario> {
    let mut out = Vec::with_capacity(n);
    let mut seed = 0u64;
    while out.len() < n {
        if let Some(s) = scenario(seed, regime) {
            out.push(s);
        }
        seed += 1;
    }
    out
}
