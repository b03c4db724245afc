//! [proptest](https://docs.rs/proptest) strategies for zones, clouds, constraints, placement
//! requests and VNF packages (feature `proptest`), so that users can property-test their own
//! placement policies and LCM code against the same generated inputs as vnfm's own tests.
//!
//! Every strategy draws only from proptest's runner, so a run is reproducible from its seed
//! (`PROPTEST_RNG_SEED`, or a [`proptest::test_runner::TestRunner`] built with
//! [`TestRunner::deterministic`](proptest::test_runner::TestRunner::deterministic)), and shrinks
//! towards fewer zones, hosts, items and rules.
//!
//! # What is generated
//! - [`cloud_file`]: a [`CloudFile`] with zones `az-0`, `az-1`, ... (some unavailable with
//!   `hosts: null`), hosts `az-<z>-c<h>` (some with nova-compute down), and flavors `f<i>`.
//!   Capacities are whole multiples of [`UNIT`] (1 vCPU, 2 GiB, 20 GiB), so that "how many fit"
//!   is the same on every dimension; a host may have no capacity at all, so some zones are too
//!   small for any flavor.
//! - [`compute_zones`]: the zone listing of such a cloud as the simulator reports it before
//!   anything runs ([`cloud_zones`]): free capacity known exactly on every host.
//! - [`constraint`] / [`constraints`]: affinity and anti-affinity at zone or host scope over a
//!   subset (at least two) of the member ids you give, best effort or not.
//! - [`placement_request`]: items `VDU<v>-<i>` with the demand of a flavor, over generated
//!   zones, with generated constraints over the items, either selection policy and a seed.
//! - [`package`]: the in-memory files of a small VNF package ([`GeneratedPackage`]): 1–3 VDUs
//!   whose flavors come from the cloud, `min`/`max`/initial instance counts, a `ScalingAspect`
//!   per VDU, `AffinityRule`/`AntiAffinityRule` policies at `zone` and `nfvi_node` scope over
//!   VDUs or a `PlacementGroup`, and a StandardUserData BaseHOT with one nested template per
//!   VDU whose server uses `availability_zone: {get_param: zone}` and
//!   `networks: [{allocate_network: none}]`. [`GeneratedPackage::package`] reads it with
//!   [`VnfPackage::from_files`]. A VDU is a target of one `nfvi_node` rule at most; those
//!   rules are honoured by the granter when it chooses zones and hosts, and by Nova: the
//!   generated BaseHOT has no server group, the lifecycle adds one per rule.
//! - [`cloud_and_package`]: a cloud and a package that uses its flavors.
//!
//! # Testing your own policy
//! A property over generated requests: "my policy never puts two VNFCs of the same VDU in one
//! zone, and only uses candidate zones".
//!
//! ```
//! use std::collections::BTreeSet;
//!
//! use proptest::prelude::*;
//! use vnfm_core::id::ZoneId;
//! use vnfm_core::placement::PlacementRequest;
//! use vnfm_core::strategy::{self, CloudShape};
//!
//! /// My policy: the VNFCs of each VDU round-robin over the candidate zones, or `None` when a
//! /// VDU has more VNFCs than there are candidate zones.
//! fn my_policy(req: &PlacementRequest) -> Option<Vec<(String, ZoneId)>> {
//!     let zones: Vec<&ZoneId> = req
//!         .zones
//!         .iter()
//!         .filter(|z| z.is_candidate() && !req.excluded.contains(&z.name))
//!         .map(|z| &z.name)
//!         .collect();
//!     let mut next = std::collections::BTreeMap::new();
//!     req.items
//!         .iter()
//!         .map(|item| {
//!             let n = next.entry(item.vdu_id.clone()).or_insert(0usize);
//!             let zone = zones.get(*n)?;
//!             *n += 1;
//!             Some((item.id.clone(), (*zone).clone()))
//!         })
//!         .collect()
//! }
//!
//! proptest! {
//!     #![proptest_config(ProptestConfig::with_cases(32))]
//!     // No `#[test]` here so that the doc example runs it from `main`; in a test file, put
//!     // `#[test]` in front of the `fn`.
//!     fn never_two_of_a_vdu_in_one_zone(
//!         req in strategy::placement_request(CloudShape::default(), 1..=6, 0..=2)
//!     ) {
//!         if let Some(placed) = my_policy(&req) {
//!             let mut seen = BTreeSet::new();
//!             for (id, zone) in &placed {
//!                 let item = req.items.iter().find(|i| &i.id == id).unwrap();
//!                 prop_assert!(seen.insert((item.vdu_id.clone(), zone.clone())),
//!                     "{id} shares {zone} with another VNFC of {}", item.vdu_id);
//!                 let z = req.zones.iter().find(|z| &z.name == zone).unwrap();
//!                 prop_assert!(z.is_candidate());
//!             }
//!         }
//!     }
//! }
//!
//! never_two_of_a_vdu_in_one_zone();
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::ops::RangeInclusive;

use proptest::prelude::*;

use crate::cloud::{CloudFile, FlavorSpec, HostSpec, ZoneSpec};
use crate::constraint::{Constraint, ConstraintKind, Scope};
use crate::id::{VduId, ZoneId};
use crate::package::VnfPackage;
use crate::placement::{Item, PlacementRequest, Selection};
use crate::zone::{ComputeHost, ComputeZone, Resources};

/// The capacity unit of generated hosts and flavors: 1 vCPU, 2048 MiB, 20 GiB.
pub const UNIT: Resources = Resources::new(1, 2048, 20);

/// `n` units.
pub fn units(n: u64) -> Resources {
    Resources::new(
        UNIT.vcpus.saturating_mul(n),
        UNIT.memory_mb.saturating_mul(n),
        UNIT.disk_gb.saturating_mul(n),
    )
}

/// The name of generated zone `i`: `az-<i>`.
pub fn zone_name(i: usize) -> ZoneId {
    ZoneId::new(format!("az-{i}"))
}

/// The shape of generated clouds and zone listings.
#[derive(Clone, Debug, PartialEq)]
pub struct CloudShape {
    /// Number of zones (default `1..=5`).
    pub zones: RangeInclusive<usize>,
    /// Hosts per zone (default `1..=3`).
    pub hosts_per_zone: RangeInclusive<usize>,
    /// Capacity of a host in [`UNIT`]s (default `0..=8`; 0 makes a host that fits nothing).
    pub host_units: RangeInclusive<u64>,
    /// Number of flavors (default `1..=3`; at least one is always generated).
    pub flavors: RangeInclusive<usize>,
    /// Size of a flavor in [`UNIT`]s (default `1..=3`; at least 1).
    pub flavor_units: RangeInclusive<u64>,
    /// Probability that a zone is unavailable (`hosts: null`), and, separately, that a host's
    /// nova-compute is down (default 0.1). 0 gives only available zones and hosts.
    pub down_probability: f64,
}

impl Default for CloudShape {
    fn default() -> Self {
        Self {
            zones: 1..=5,
            hosts_per_zone: 1..=3,
            host_units: 0..=8,
            flavors: 1..=3,
            flavor_units: 1..=3,
            down_probability: 0.1,
        }
    }
}

impl CloudShape {
    /// The same shape with this many zones.
    pub fn with_zones(mut self, zones: RangeInclusive<usize>) -> Self {
        self.zones = zones;
        self
    }

    /// The same shape with this many hosts per zone.
    pub fn with_hosts_per_zone(mut self, hosts: RangeInclusive<usize>) -> Self {
        self.hosts_per_zone = hosts;
        self
    }

    /// The same shape with hosts of this many units.
    pub fn with_host_units(mut self, units: RangeInclusive<u64>) -> Self {
        self.host_units = units;
        self
    }

    /// The same shape with this many flavors of this many units.
    pub fn with_flavors(
        mut self,
        flavors: RangeInclusive<usize>,
        units: RangeInclusive<u64>,
    ) -> Self {
        self.flavors = flavors;
        self.flavor_units = units;
        self
    }

    /// The same shape with this probability of unavailable zones and hosts.
    pub fn with_down_probability(mut self, p: f64) -> Self {
        self.down_probability = p;
        self
    }
}

/// A range with its start raised to at least `min` (and its end to at least its start).
fn at_least<T: Copy + Ord>(r: &RangeInclusive<T>, min: T) -> RangeInclusive<T> {
    let start = (*r.start()).max(min);
    start..=(*r.end()).max(start)
}

/// A probability clamped into `0.0..=1.0` (NaN counts as 0).
fn probability(p: f64) -> f64 {
    if p.is_nan() {
        0.0
    } else {
        p.clamp(0.0, 1.0)
    }
}

/// Generated clouds of `shape`: see the [module docs](self).
pub fn cloud_file(shape: CloudShape) -> impl Strategy<Value = CloudFile> {
    let down = probability(shape.down_probability);
    let host = (shape.host_units.clone(), prop::bool::weighted(down));
    let zone = (
        prop::bool::weighted(down),
        prop::collection::vec(host, shape.hosts_per_zone.clone()),
    );
    let zones = prop::collection::vec(zone, shape.zones.clone());
    let flavors = prop::collection::vec(
        at_least(&shape.flavor_units, 1),
        at_least(&shape.flavors, 1),
    );
    (zones, flavors).prop_map(|(zones, flavors)| {
        let zones = zones
            .into_iter()
            .enumerate()
            .map(|(z, (zone_down, hosts))| {
                let name = zone_name(z).0;
                let spec = if zone_down {
                    ZoneSpec {
                        available: false,
                        hosts: None,
                    }
                } else {
                    let hosts = hosts
                        .into_iter()
                        .enumerate()
                        .map(|(h, (n, host_down))| {
                            let mut spec = HostSpec::new(units(n));
                            spec.available = !host_down;
                            (format!("{name}-c{h}"), spec)
                        })
                        .collect();
                    ZoneSpec {
                        available: true,
                        hosts: Some(hosts),
                    }
                };
                (name, spec)
            })
            .collect();
        let flavors = flavors
            .into_iter()
            .enumerate()
            .map(|(i, n)| (format!("f{i}"), FlavorSpec::new(units(n))))
            .collect();
        CloudFile {
            zones,
            flavors,
            images: None,
            cluster: None,
            stack_create_shows: 0,
        }
    })
}

/// The zone listing of `cloud` as the simulator reports it while no server runs: every host's
/// free capacity is its capacity.
pub fn cloud_zones(cloud: &CloudFile) -> Vec<ComputeZone> {
    cloud
        .zones
        .iter()
        .map(|(name, z)| ComputeZone {
            name: ZoneId::new(name.clone()),
            available: z.available,
            hosts: z.hosts.as_ref().map(|hosts| {
                hosts
                    .iter()
                    .map(|(h, spec)| ComputeHost {
                        name: h.as_str().into(),
                        available: spec.available,
                        free: Some(spec.capacity()),
                    })
                    .collect()
            }),
        })
        .collect()
}

/// Generated zone listings of `shape`: the [`cloud_zones`] of a [`cloud_file`].
pub fn compute_zones(shape: CloudShape) -> impl Strategy<Value = Vec<ComputeZone>> {
    cloud_file(shape).prop_map(|c| cloud_zones(&c))
}

/// Either constraint kind.
pub fn constraint_kind() -> impl Strategy<Value = ConstraintKind> {
    prop_oneof![
        Just(ConstraintKind::Affinity),
        Just(ConstraintKind::AntiAffinity)
    ]
}

/// Either scope.
pub fn scope() -> impl Strategy<Value = Scope> {
    prop_oneof![Just(Scope::Zone), Just(Scope::Host)]
}

/// One constraint named `name` over a subset of `members` (at least two when there are two,
/// in the order given), of either kind and scope, best effort or not.
pub fn constraint(name: String, members: Vec<String>) -> impl Strategy<Value = Constraint> {
    let n = members.len();
    let size = n.min(2)..=n;
    (
        prop::sample::subsequence(members, size),
        constraint_kind(),
        scope(),
        any::<bool>(),
    )
        .prop_map(move |(members, kind, scope, fallback)| {
            Constraint::new(name.clone(), kind, scope, members).with_fallback_best_effort(fallback)
        })
}

/// `count` constraints named `c0`, `c1`, ... over subsets of `members` (see [`constraint`]).
/// None when `members` has fewer than two ids.
pub fn constraints(
    members: Vec<String>,
    count: RangeInclusive<usize>,
) -> impl Strategy<Value = Vec<Constraint>> {
    let usable = members.len() >= 2;
    count.prop_flat_map(move |n| {
        let n = if usable { n } else { 0 };
        (0..n)
            .map(|i| constraint(format!("c{i}"), members.clone()))
            .collect::<Vec<_>>()
    })
}

/// Either selection policy.
pub fn selection() -> impl Strategy<Value = Selection> {
    prop_oneof![Just(Selection::Random), Just(Selection::CapacityAware)]
}

/// Placement requests: zones of `shape`, `items` items named `VDU<v>-<i>` (1–3 VDUs) each
/// demanding the flavor of its VDU (one of the cloud's flavors), `constraints` constraints over
/// the item ids, either selection policy and any seed. Nothing is excluded or already placed.
pub fn placement_request(
    shape: CloudShape,
    items: RangeInclusive<usize>,
    constraints_count: RangeInclusive<usize>,
) -> impl Strategy<Value = PlacementRequest> {
    (cloud_file(shape), items, 1usize..=3)
        .prop_flat_map(move |(cloud, n_items, n_vdus)| {
            let flavors: Vec<Resources> =
                cloud.flavors.values().map(FlavorSpec::resources).collect();
            let zones = cloud_zones(&cloud);
            let vdu_flavor = prop::collection::vec(0..flavors.len().max(1), n_vdus);
            let vdu_of_item = prop::collection::vec(0..n_vdus, n_items);
            (Just(zones), Just(flavors), vdu_flavor, vdu_of_item)
        })
        .prop_flat_map(move |(zones, flavors, vdu_flavor, vdu_of_item)| {
            let mut counts = vec![0usize; vdu_flavor.len()];
            let items: Vec<Item> = vdu_of_item
                .iter()
                .map(|v| {
                    let i = counts.get(*v).copied().unwrap_or_default();
                    if let Some(c) = counts.get_mut(*v) {
                        *c += 1;
                    }
                    let demand = vdu_flavor
                        .get(*v)
                        .and_then(|f| flavors.get(*f))
                        .copied()
                        .unwrap_or(UNIT);
                    let vdu = format!("VDU{}", v + 1);
                    Item::new(format!("{vdu}-{i}"), vdu, demand)
                })
                .collect();
            let ids: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
            (
                Just(zones),
                Just(items),
                constraints(ids, constraints_count.clone()),
                selection(),
                any::<u64>(),
            )
        })
        .prop_map(|(zones, items, constraints, selection, seed)| {
            PlacementRequest::new(zones)
                .with_items(items)
                .with_constraints(constraints)
                .with_selection(selection)
                .with_seed(seed)
        })
}

/// The shape of generated packages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageShape {
    /// Number of VDUs (default `1..=3`).
    pub vdus: RangeInclusive<usize>,
    /// `min_number_of_instances` of a VDU (default `1..=2`); the initial count is `min` or
    /// `min + 1` (at least 1) and `max_number_of_instances` is 1 or 2 above the initial count.
    pub min_instances: RangeInclusive<u32>,
    /// Number of affinity / anti-affinity rules (default `0..=3`).
    pub rules: RangeInclusive<usize>,
}

impl Default for PackageShape {
    fn default() -> Self {
        Self {
            vdus: 1..=3,
            min_instances: 1..=2,
            rules: 0..=3,
        }
    }
}

/// One VDU of a [`GeneratedPackage`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedVdu {
    /// `VDU1`, `VDU2`, ...
    pub id: VduId,
    /// The cloud flavor it uses.
    pub flavor: String,
    /// What one VNFC needs (the flavor's resources, also its VNFD `virtual_compute`).
    pub demand: Resources,
    /// `min_number_of_instances`.
    pub min_instances: u32,
    /// `max_number_of_instances`.
    pub max_instances: u32,
    /// `VduInitialDelta`: VNFCs created by instantiate.
    pub initial_instances: u32,
    /// Its scaling aspect (`VDU1_scale`, one VNFC per step, up to `max_instances`).
    pub aspect: String,
}

/// One affinity or anti-affinity rule of a [`GeneratedPackage`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedRule {
    /// Policy name (`rule0`, ...).
    pub name: String,
    /// Affinity or anti-affinity.
    pub kind: ConstraintKind,
    /// Zone (`zone`) or host (`nfvi_node`).
    pub scope: Scope,
    /// The VDUs it is about.
    pub vdus: Vec<VduId>,
    /// True when its target is the placement group `group0` (whose members are `vdus`) rather
    /// than the VDUs themselves.
    pub via_group: bool,
}

/// The files of a generated VNF package and what they describe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedPackage {
    /// Files by path relative to the package root.
    pub files: BTreeMap<String, Vec<u8>>,
    /// `descriptor_id`.
    pub descriptor_id: String,
    /// The one deployment flavour, `default`.
    pub flavour_id: String,
    /// The VDUs, in order.
    pub vdus: Vec<GeneratedVdu>,
    /// The rules, in document order.
    pub rules: Vec<GeneratedRule>,
}

impl GeneratedPackage {
    /// The package read from [`GeneratedPackage::files`] with [`VnfPackage::from_files`]
    /// (source name `generated`).
    ///
    /// # Errors
    /// As [`VnfPackage::from_files`]; a generated package always reads.
    pub fn package(&self) -> crate::Result<VnfPackage> {
        VnfPackage::from_files("generated", self.files.clone())
    }

    /// The VDU `id`.
    pub fn vdu(&self, id: &str) -> Option<&GeneratedVdu> {
        self.vdus.iter().find(|v| v.id.as_str() == id)
    }
}

/// Packages of `shape` whose VDUs use the flavors of `cloud` (a flavor `f0` of one [`UNIT`]
/// when the cloud has none): see the [module docs](self).
pub fn package(cloud: &CloudFile, shape: PackageShape) -> impl Strategy<Value = GeneratedPackage> {
    let mut flavors: Vec<(String, Resources)> = cloud
        .flavors
        .iter()
        .map(|(n, f)| (n.clone(), f.resources()))
        .collect();
    if flavors.is_empty() {
        flavors.push(("f0".to_owned(), UNIT));
    }
    let min = at_least(&shape.vdus, 1);
    let vdu = (
        prop::sample::select(flavors),
        shape.min_instances.clone(),
        0u32..=1,
        1u32..=2,
    );
    let rules = shape.rules.clone();
    prop::collection::vec(vdu, min)
        .prop_flat_map(move |vdus| {
            let n = vdus.len();
            let rule = (
                constraint_kind(),
                scope(),
                prop::sample::subsequence((0..n).collect::<Vec<_>>(), 1..=n),
                any::<bool>(),
            );
            (
                Just(vdus),
                prop::collection::vec(rule, rules.clone()),
                prop::sample::subsequence((0..n).collect::<Vec<_>>(), 1..=n),
            )
        })
        .prop_map(|(vdus, rules, group)| {
            let vdus: Vec<GeneratedVdu> = vdus
                .into_iter()
                .enumerate()
                .map(|(i, ((flavor, demand), min, extra, headroom))| {
                    let initial = (min + extra).max(1);
                    let id = VduId::new(format!("VDU{}", i + 1));
                    GeneratedVdu {
                        aspect: format!("{id}_scale"),
                        id,
                        flavor,
                        demand,
                        min_instances: min,
                        max_instances: initial + headroom,
                        initial_instances: initial,
                    }
                })
                .collect();
            let vdu_ids = |ix: &[usize]| -> Vec<VduId> {
                ix.iter()
                    .filter_map(|i| vdus.get(*i).map(|v| v.id.clone()))
                    .collect()
            };
            let group_members = vdu_ids(&group);
            // A VDU is a target of one `nfvi_node` rule at most (one Nova server group each):
            // a later rule that shares a VDU with an earlier one is left out.
            let mut in_host_rule = BTreeSet::new();
            let rules: Vec<GeneratedRule> = rules
                .into_iter()
                .enumerate()
                .map(|(i, (kind, scope, targets, via_group))| GeneratedRule {
                    name: format!("rule{i}"),
                    kind,
                    scope,
                    vdus: if via_group {
                        group_members.clone()
                    } else {
                        vdu_ids(&targets)
                    },
                    via_group,
                })
                .filter(|r| {
                    r.scope != Scope::Host
                        || (!r.vdus.iter().any(|v| in_host_rule.contains(v))
                            && r.vdus.iter().all(|v| in_host_rule.insert(v.clone())))
                })
                .collect();
            let files = package_files(&vdus, &rules, &group_members);
            GeneratedPackage {
                files,
                descriptor_id: DESCRIPTOR_ID.to_owned(),
                flavour_id: "default".to_owned(),
                vdus,
                rules,
            }
        })
}

/// A cloud of `cloud` and a package of `pkg` that uses its flavors.
pub fn cloud_and_package(
    cloud: CloudShape,
    pkg: PackageShape,
) -> impl Strategy<Value = (CloudFile, GeneratedPackage)> {
    cloud_file(cloud).prop_flat_map(move |c| {
        let p = package(&c, pkg.clone());
        (Just(c), p)
    })
}

const DESCRIPTOR_ID: &str = "b1bb0ce7-ebca-4fa7-95ed-4840d70a1177";

const META: &str = "TOSCA-Meta-File-Version: 1.0\nCSAR-Version: 1.1\nCreated-by: vnfm strategy\n\
Entry-Definitions: Definitions/generated_top.vnfd.yaml\n";

const TOP: &str = "tosca_definitions_version: tosca_simple_yaml_1_2
description: generated VNF (top-level descriptor)
imports:
  - etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
  - generated_types.yaml
  - generated_df_default.yaml
topology_template:
  inputs:
    selected_flavour:
      type: string
  node_templates:
    VNF:
      type: vnfm.generated.VNF
      properties:
        flavour_id: { get_input: selected_flavour }
        descriptor_version: '1.0'
        provider: vnfm project
        product_name: generated VNF
        software_version: '1.0'
        vnfm_info: [ vnfm ]
";

fn types_yaml() -> String {
    format!(
        "tosca_definitions_version: tosca_simple_yaml_1_2
description: node type of the generated VNF
imports:
  - etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
node_types:
  vnfm.generated.VNF:
    derived_from: tosca.nodes.nfv.VNF
    properties:
      descriptor_id:
        type: string
        constraints: [ valid_values: [ {DESCRIPTOR_ID} ] ]
        default: {DESCRIPTOR_ID}
      flavour_id:
        type: string
        constraints: [ valid_values: [ default ] ]
        default: default
    interfaces:
      Vnflcm:
        type: tosca.interfaces.nfv.Vnflcm
"
    )
}

/// Appends one line per entry of `lines` at `indent` spaces.
fn lines(out: &mut String, indent: usize, lines: &[&str]) {
    for l in lines {
        let _ = writeln!(out, "{:indent$}{l}", "");
    }
}

fn df_yaml(vdus: &[GeneratedVdu], rules: &[GeneratedRule], group: &[VduId]) -> String {
    let mut s = String::from(
        "tosca_definitions_version: tosca_simple_yaml_1_2
description: deployment flavour default of the generated VNF
imports:
  - etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
  - generated_types.yaml
topology_template:
  substitution_mappings:
    node_type: vnfm.generated.VNF
    properties:
      flavour_id: default
  node_templates:
    VNF:
      type: vnfm.generated.VNF
      properties:
        flavour_description: generated
",
    );
    for v in vdus {
        let id = &v.id;
        let _ = write!(
            s,
            "    {id}:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: {id}
        vdu_profile:
          min_number_of_instances: {min}
          max_number_of_instances: {max}
        sw_image_data:
          name: image-{id}
          version: '1.0'
          checksum:
            algorithm: sha-256
            hash: 0000000000000000000000000000000000000000000000000000000000000000
          container_format: bare
          disk_format: qcow2
          min_disk: 1 GiB
          size: 1 GiB
      capabilities:
        virtual_compute:
          properties:
            requested_additional_capabilities:
              flavor:
                requested_additional_capability_name: {flavor}
                support_mandatory: true
                target_performance_parameters:
                  entry_schema: string
            virtual_memory:
              virtual_mem_size: {mem} MiB
            virtual_cpu:
              num_virtual_cpu: {cpu}
            virtual_local_storage:
              - size_of_storage: {disk} GiB
",
            min = v.min_instances,
            max = v.max_instances,
            flavor = v.flavor,
            mem = v.demand.memory_mb,
            cpu = v.demand.vcpus,
            disk = v.demand.disk_gb,
        );
    }
    if !group.is_empty() && rules.iter().any(|r| r.via_group) {
        lines(&mut s, 2, &["groups:", "  group0:"]);
        lines(&mut s, 6, &["type: tosca.groups.nfv.PlacementGroup"]);
        let members: Vec<&str> = group.iter().map(VduId::as_str).collect();
        let _ = writeln!(s, "      members: [ {} ]", members.join(", "));
    }
    s.push_str("  policies:\n");
    for r in rules {
        let ty = match r.kind {
            ConstraintKind::Affinity => "AffinityRule",
            ConstraintKind::AntiAffinity => "AntiAffinityRule",
        };
        let scope = match r.scope {
            Scope::Zone => "zone",
            Scope::Host => "nfvi_node",
        };
        let targets = if r.via_group {
            "group0".to_owned()
        } else {
            r.vdus
                .iter()
                .map(VduId::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = write!(
            s,
            "    - {name}:
        type: tosca.policies.nfv.{ty}
        targets: [ {targets} ]
        properties:
          scope: {scope}
",
            name = r.name
        );
    }
    s.push_str(
        "    - scaling_aspects:
        type: tosca.policies.nfv.ScalingAspects
        properties:
          aspects:
",
    );
    for v in vdus {
        let _ = write!(
            s,
            "            {a}:
              name: {a}
              max_scale_level: {lvl}
              step_deltas: [ delta_1 ]
",
            a = v.aspect,
            lvl = v.max_instances.saturating_sub(v.initial_instances)
        );
    }
    for v in vdus {
        let _ = write!(
            s,
            "    - {id}_initial_delta:
        type: tosca.policies.nfv.VduInitialDelta
        properties:
          initial_delta:
            number_of_instances: {n}
        targets: [ {id} ]
    - {id}_scaling_aspect_deltas:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties:
          aspect: {a}
          deltas:
            delta_1:
              number_of_instances: 1
        targets: [ {id} ]
",
            id = v.id,
            n = v.initial_instances,
            a = v.aspect
        );
    }
    s
}

fn base_hot(vdus: &[GeneratedVdu]) -> String {
    let mut s = String::from(
        "heat_template_version: 2013-05-23
description: generated VNF, flavour default (StandardUserData style)
parameters:
  nfv:
    type: json
resources:
",
    );
    for v in vdus {
        let id = &v.id;
        let _ = write!(
            s,
            "  {id}:
    type: {id}.yaml
    properties:
      flavor: {{ get_param: [ nfv, VDU, {id}, computeFlavourId ] }}
      image: {{ get_param: [ nfv, VDU, {id}, vcImageId ] }}
      zone: {{ get_param: [ nfv, VDU, {id}, locationConstraints ] }}
"
        );
    }
    s.push_str("outputs: {}\n");
    s
}

fn nested_hot(id: &VduId) -> String {
    format!(
        "heat_template_version: 2013-05-23
description: {id} of the generated VNF
parameters:
  flavor:
    type: string
  image:
    type: string
  zone:
    type: string
resources:
  {id}:
    type: OS::Nova::Server
    properties:
      name: {id}
      flavor: {{ get_param: flavor }}
      image: {{ get_param: image }}
      availability_zone: {{ get_param: zone }}
      networks:
        - allocate_network: none
"
    )
}

fn package_files(
    vdus: &[GeneratedVdu],
    rules: &[GeneratedRule],
    group: &[VduId],
) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut put = |path: String, text: String| {
        files.insert(path, text.into_bytes());
    };
    put("TOSCA-Metadata/TOSCA.meta".into(), META.to_owned());
    put("Definitions/generated_top.vnfd.yaml".into(), TOP.to_owned());
    put("Definitions/generated_types.yaml".into(), types_yaml());
    put(
        "Definitions/generated_df_default.yaml".into(),
        df_yaml(vdus, rules, group),
    );
    put("BaseHOT/default/generated.yaml".into(), base_hot(vdus));
    for v in vdus {
        put(
            format!("BaseHOT/default/nested/{}.yaml", v.id),
            nested_hot(&v.id),
        );
    }
    files
}

#[cfg(test)]
mod tests {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};

    use super::*;
    use crate::package::{RuleKind, RuleScope};

    fn sample<S: Strategy>(s: S, seed_cases: usize) -> Vec<S::Value> {
        let mut runner = TestRunner::deterministic();
        (0..seed_cases)
            .map(|_| s.new_tree(&mut runner).unwrap().current())
            .collect()
    }

    proptest! {
        #![proptest_config(Config::with_cases(64))]

        #[test]
        fn clouds_are_valid_and_round_trip(cloud in cloud_file(CloudShape::default())) {
            let text = cloud.to_yaml().unwrap();
            let back = CloudFile::from_yaml("generated", &text).unwrap();
            prop_assert_eq!(&back, &cloud);
            prop_assert!((1..=5).contains(&cloud.zones.len()));
            prop_assert!(!cloud.flavors.is_empty());
            for z in cloud.zones.values() {
                for h in z.hosts.iter().flat_map(|h| h.values()) {
                    let c = h.capacity();
                    prop_assert_eq!(units(c.vcpus), c, "capacity in whole units");
                }
            }
        }

        #[test]
        fn listings_match_the_simulator(cloud in cloud_file(CloudShape::default())) {
            use crate::driver::{ListZones, ZoneCatalog};
            let sim = crate::sim::SimCloud::new(cloud.clone(), 1);
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let listed = rt.block_on(sim.list_zones(ListZones::default())).unwrap();
            prop_assert_eq!(listed, cloud_zones(&cloud));
        }

        #[test]
        fn constraints_name_given_members(
            cs in constraints(vec!["a".into(), "b".into(), "c".into()], 0..=4)
        ) {
            prop_assert!(cs.len() <= 4);
            for (i, c) in cs.iter().enumerate() {
                prop_assert_eq!(&c.name, &format!("c{i}"));
                prop_assert!(c.members.len() >= 2);
                prop_assert!(c.members.iter().all(|m| ["a", "b", "c"].contains(&m.as_str())));
            }
        }

        #[test]
        fn placement_requests_are_well_formed(
            req in placement_request(CloudShape::default(), 1..=6, 0..=3)
        ) {
            prop_assert!((1..=6).contains(&req.items.len()));
            for c in &req.constraints {
                for m in &c.members {
                    prop_assert!(req.items.iter().any(|i| &i.id == m));
                }
            }
            // The solver accepts every generated request as valid.
            if let Err(crate::placement::PlacementError::Invalid(e)) = req.place() {
                prop_assert!(false, "invalid request: {e}");
            }
        }

        #[test]
        fn packages_read_back_as_described(
            (cloud, generated) in cloud_and_package(CloudShape::default(), PackageShape::default())
        ) {
            let pkg = generated.package().unwrap();
            prop_assert_eq!(&pkg.descriptor_id, &generated.descriptor_id);
            let flavour = pkg.flavour("default").unwrap();
            prop_assert_eq!(flavour.vdus.len(), generated.vdus.len());
            for v in &generated.vdus {
                let vdu = flavour.vdu(&v.id).unwrap();
                prop_assert_eq!(vdu.flavor.as_ref().map(|f| f.as_str()), Some(v.flavor.as_str()));
                prop_assert_eq!(cloud.flavor(&v.flavor), Some(v.demand));
                prop_assert_eq!(crate::lifecycle::granter::vdu_demand(flavour, &v.id), v.demand);
                prop_assert_eq!(vdu.min_instances, v.min_instances);
                prop_assert_eq!(vdu.max_instances, v.max_instances);
                prop_assert_eq!(flavour.initial_instances(&v.id), Some(v.initial_instances));
                prop_assert_eq!(flavour.aspect_delta(&v.aspect, &v.id), Some(1));
                prop_assert!(v.min_instances <= v.initial_instances);
                prop_assert!(v.initial_instances < v.max_instances);
            }
            prop_assert_eq!(flavour.rules.len(), generated.rules.len());
            for (r, g) in flavour.rules.iter().zip(&generated.rules) {
                prop_assert_eq!(&r.name, &g.name);
                prop_assert_eq!(&r.vdus, &g.vdus);
                let kind = match g.kind {
                    ConstraintKind::Affinity => RuleKind::Affinity,
                    ConstraintKind::AntiAffinity => RuleKind::AntiAffinity,
                };
                prop_assert_eq!(r.kind, kind);
                let scope = match g.scope {
                    Scope::Zone => RuleScope::Zone,
                    Scope::Host => RuleScope::NfviNode,
                };
                prop_assert_eq!(r.scope, scope);
            }
            let hot = pkg.base_hot("default").unwrap();
            for v in &generated.vdus {
                let nested = hot.files.get(&format!("{}.yaml", v.id)).unwrap();
                prop_assert!(nested.contains("availability_zone: { get_param: zone }"), "{}", nested);
                prop_assert!(nested.contains("allocate_network: none"));
            }
        }
    }

    #[test]
    fn same_runner_seed_same_values() {
        let a = sample(
            cloud_and_package(CloudShape::default(), PackageShape::default()),
            8,
        );
        let b = sample(
            cloud_and_package(CloudShape::default(), PackageShape::default()),
            8,
        );
        assert_eq!(a, b);
        // and the values vary
        assert!(a.windows(2).any(|w| w[0] != w[1]));
    }

    #[test]
    fn shapes_bound_what_is_generated() {
        let shape = CloudShape::default()
            .with_zones(3..=3)
            .with_hosts_per_zone(2..=2)
            .with_host_units(4..=4)
            .with_flavors(0..=0, 0..=0)
            .with_down_probability(0.0);
        for cloud in sample(cloud_file(shape), 16) {
            let zones = cloud_zones(&cloud);
            assert_eq!(zones.len(), 3);
            assert!(zones.iter().all(ComputeZone::is_candidate));
            assert!(zones.iter().all(|z| z.free() == Some(units(8))));
            // at least one flavor of at least one unit, whatever the shape says
            assert_eq!(cloud.flavors.len(), 1);
            assert_eq!(cloud.flavor("f0"), Some(UNIT));
        }
        assert_eq!(zone_name(2).as_str(), "az-2");
        assert_eq!(probability(f64::NAN), 0.0);
        assert_eq!(probability(2.0), 1.0);
    }

    #[test]
    fn a_cloud_without_flavors_gets_a_default_one() {
        let cloud = CloudFile::default();
        let pkgs = sample(package(&cloud, PackageShape::default()), 4);
        for p in pkgs {
            assert!(p.vdus.iter().all(|v| v.flavor == "f0" && v.demand == UNIT));
            p.package().unwrap();
        }
    }
}
