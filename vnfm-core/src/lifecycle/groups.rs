//! The VNFD's `AffinityRule` / `AntiAffinityRule` at `nfvi_node` scope as Nova server groups,
//! as pure functions: the policy of each rule, the groups written into the stack template
//! (with [`realise::server_groups`], the machinery of the HA intent), and the preflight that
//! refuses a required group the zones do not have the hosts for.
//!
//! # Policies
//! An `AntiAffinityRule` is an `anti-affinity` group, an `AffinityRule` an `affinity` group;
//! under `fallback_best_effort` (the configuration that makes every placement constraint of
//! the grant requests best effort: SOL001 has no such flag on a rule) they are
//! `soft-anti-affinity` and `soft-affinity`, which Nova honours as far as the hosts allow
//! instead of refusing the server. The policies are decided when the instance is
//! instantiated and recorded in it (`instantiatedVnfInfo.metadata.serverGroups`: rule →
//! policy); every later operation uses the record whatever the configuration says then,
//! because Heat replaces a group whose policy changed, and with it every server of the group.
//! An instance without the record (instantiated by a vnfm that did not add groups) gets no
//! group added, for the same reason.
//!
//! # The template
//! The servers of a rule's VDUs (a `PlacementGroup` target stands for its VDUs) join the group
//! the BaseHOT declares for them (Tacker's UserData way), left as written, or a group named
//! after the rule that vnfm adds (the TOSCA way; heat-translator drops `PlacementGroup`
//! targets, vnfm does not). See [`realise::server_groups`] for what agrees and what is
//! refused. The same groups are written into every template an operation sends, so an update
//! never removes one.
//!
//! # Preflight
//! Before any stack is created or updated, a required `anti-affinity` group (as the template
//! has it: a group the BaseHOT declares keeps its policy, required or soft, whatever the
//! configuration)
//! must have a host of its own for every member: the members granted to a zone may not
//! outnumber its available compute hosts (zones with none are left to Nova and reselection),
//! and before the grant the members that are not placed yet may not outnumber the hosts of
//! the candidate zones. A required `affinity` group's members must be in one zone. The
//! refusal names the rule and both numbers; the operation ends `FAILED_TEMP` with
//! [`FailureKind::Infeasible`] before any stack exists.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::failure::{chain, Failed, FailureKind};
use super::userdata::VnfcSlot;
use crate::driver::{Parameters, TemplateBundle};
use crate::error::{Error, Location};
use crate::id::ZoneId;
use crate::intent::realise::{self, Change, GroupPolicy, GroupRule, RealiseError, Realised};
use crate::lcm::{InstantiatedVnfInfo, VnfInstance};
use crate::package::{Flavour, PlacementRule, RuleKind, RuleScope, VnfPackage};
use crate::zone::ComputeZone;

/// The key of `instantiatedVnfInfo.metadata` that records the policy of every rule's group.
pub const SERVER_GROUPS_KEY: &str = "serverGroups";

/// The rules of `flavour` that are server groups: `nfvi_node` scope, at least one VDU.
fn group_rules(flavour: &Flavour) -> impl Iterator<Item = &PlacementRule> {
    flavour
        .rules
        .iter()
        .filter(|r| r.scope == RuleScope::NfviNode && !r.vdus.is_empty())
}

/// The policy of every server-group rule of `flavour`: soft under `best_effort`.
pub(crate) fn policies(flavour: &Flavour, best_effort: bool) -> BTreeMap<String, GroupPolicy> {
    group_rules(flavour)
        .map(|r| {
            let p = match r.kind {
                RuleKind::Affinity => GroupPolicy::Affinity,
                RuleKind::AntiAffinity => GroupPolicy::AntiAffinity,
            };
            (r.name.clone(), if best_effort { p.soft() } else { p })
        })
        .collect()
}

/// The policies `inst` records, `None` when it records none.
pub(crate) fn recorded(inst: &VnfInstance) -> Option<BTreeMap<String, GroupPolicy>> {
    let map = inst
        .instantiated_vnf_info
        .as_ref()?
        .metadata
        .as_ref()?
        .get(SERVER_GROUPS_KEY)?
        .as_object()?;
    Some(
        map.iter()
            .filter_map(|(rule, p)| Some((rule.clone(), GroupPolicy::parse(p.as_str()?)?)))
            .collect(),
    )
}

/// Records `policies` in `info`.
pub(crate) fn record(info: &mut InstantiatedVnfInfo, policies: &BTreeMap<String, GroupPolicy>) {
    let map: Map<String, Value> = policies
        .iter()
        .map(|(rule, p)| (rule.clone(), Value::from(p.as_str())))
        .collect();
    info.metadata
        .get_or_insert_with(Default::default)
        .insert(SERVER_GROUPS_KEY.into(), Value::Object(map));
}

/// The group of every server-group rule of `flavour` that `policies` names, in VNFD order.
pub(crate) fn rules(flavour: &Flavour, policies: &BTreeMap<String, GroupPolicy>) -> Vec<GroupRule> {
    group_rules(flavour)
        .filter_map(|r| {
            Some(GroupRule {
                rule: r.name.clone(),
                vdus: r.vdus.clone(),
                policy: *policies.get(&r.name)?,
            })
        })
        .collect()
}

/// `bundle` and `parameters` with the groups of `rules` (unchanged when there are none).
pub(crate) fn realise(
    source: &str,
    bundle: &TemplateBundle,
    parameters: &Parameters,
    rules: &[GroupRule],
) -> Result<Realised, RealiseError> {
    if rules.is_empty() {
        return Ok(Realised {
            template: bundle.clone(),
            parameters: parameters.clone(),
            changes: Vec::new(),
            diff: String::new(),
        });
    }
    realise::server_groups(source, bundle, parameters, rules)
}

/// The failure of an operation whose rules cannot be written into the template.
pub(crate) fn template_failure(e: &RealiseError) -> Failed {
    Failed::new(
        FailureKind::Invalid,
        "cannot build the stack template",
        chain(e),
    )
}

/// The policy of every rule's group as the package's BaseHOT has it with the groups of
/// `rules` (a group the BaseHOT declares keeps its own: required or soft as written).
///
/// # Errors
/// The package has no BaseHOT for the flavour, or the rules cannot be written into it.
pub(crate) fn effective(
    pkg: &VnfPackage,
    flavour: &Flavour,
    rules: &[GroupRule],
) -> Result<BTreeMap<String, GroupPolicy>, Failed> {
    if rules.is_empty() {
        return Ok(BTreeMap::new());
    }
    let base = pkg
        .base_hot(&flavour.id)
        .map_err(|e| Failed::new(FailureKind::Invalid, "package has no BaseHOT", chain(&e)))?;
    let source = super::userdata::template_source(pkg, flavour);
    let out =
        realise(&source, base, &Parameters::new(), rules).map_err(|e| template_failure(&e))?;
    Ok(out
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::RuleGroupAdded { rule, policy, .. }
            | Change::RuleGroupReused { rule, policy, .. } => Some((rule.clone(), *policy)),
            _ => None,
        })
        .collect())
}

/// Before an instantiation starts: the groups of `policies` must fit the package's BaseHOT
/// (nothing to check without a BaseHOT: the operation fails on it as before).
///
/// # Errors
/// [`Error::Invalid`] naming the package, the rule, the template and why the groups do not
/// fit.
pub(crate) fn check_package(
    pkg: &VnfPackage,
    flavour: &Flavour,
    policies: &BTreeMap<String, GroupPolicy>,
) -> Result<(), Error> {
    let rules = rules(flavour, policies);
    let Ok(base) = pkg.base_hot(&flavour.id) else {
        return Ok(());
    };
    let source = format!("BaseHOT/{}", flavour.id);
    match realise(&source, base, &Parameters::new(), &rules) {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::invalid(Location::file(&pkg.source), chain(&e))),
    }
}

/// `rule (AntiAffinityRule, nfvi_node) over PlacementGroup g (VDU v)`.
fn rule_text(rule: &PlacementRule, flavour: &Flavour) -> String {
    let kind = match rule.kind {
        RuleKind::Affinity => "AffinityRule",
        RuleKind::AntiAffinity => "AntiAffinityRule",
    };
    let vdus = |vdus: Vec<&str>| match vdus.as_slice() {
        [one] => format!("VDU {one}"),
        many => format!("VDUs {}", many.join(", ")),
    };
    let targets: Vec<String> = rule
        .targets
        .iter()
        .map(|t| match flavour.placement_groups.get(t) {
            Some(g) => format!(
                "PlacementGroup {t} ({})",
                vdus(
                    g.members
                        .iter()
                        .filter(|m| rule.vdus.iter().any(|v| v.as_str() == m.as_str()))
                        .map(String::as_str)
                        .collect()
                )
            ),
            None => vdus(vec![t.as_str()]),
        })
        .collect();
    format!(
        "rule {} ({kind}, {}) over {}",
        rule.name,
        rule.scope.as_str(),
        targets.join(", ")
    )
}

/// The available compute hosts of `zone`, when it is listed and available.
fn hosts(zone: &ComputeZone) -> usize {
    if !zone.available {
        return 0;
    }
    zone.hosts.iter().flatten().filter(|h| h.available).count()
}

/// The preflight (see the [module docs](self)): `groups` are the rules' groups with their
/// policies as the template has them; `members` every VNFC the stack will have, with its zone
/// when known; `zones` the zone listing.
///
/// # Errors
/// [`FailureKind::Infeasible`] naming the rule, the servers and the hosts.
pub(crate) fn check_hosts(
    flavour: &Flavour,
    groups: &BTreeMap<String, GroupPolicy>,
    members: &[(VnfcSlot, Option<ZoneId>)],
    zones: &[ComputeZone],
) -> Result<(), Failed> {
    let listed: BTreeMap<&ZoneId, usize> = zones.iter().map(|z| (&z.name, hosts(z))).collect();
    for rule in group_rules(flavour) {
        let Some(policy) = groups.get(&rule.name).filter(|p| !p.is_soft()) else {
            continue;
        };
        let of_rule: Vec<&Option<ZoneId>> = members
            .iter()
            .filter(|(s, _)| rule.vdus.contains(&s.vdu))
            .map(|(_, z)| z)
            .collect();
        let why = if policy.is_anti() {
            too_few_hosts(&of_rule, &listed).or_else(|| too_few_candidate_hosts(&of_rule, zones))
        } else {
            split_affinity(&of_rule)
        };
        if let Some(why) = why {
            return Err(Failed::new(
                FailureKind::Infeasible,
                "too few hosts",
                format!("{}: {why}", rule_text(rule, flavour)),
            ));
        }
    }
    Ok(())
}

/// How many of the members of a rule (`of_rule`, their zones when known) are in each zone.
fn per_zone<'z>(of_rule: &[&'z Option<ZoneId>]) -> BTreeMap<&'z ZoneId, usize> {
    let mut per_zone: BTreeMap<&ZoneId, usize> = BTreeMap::new();
    for z in of_rule.iter().copied().flatten() {
        *per_zone.entry(z).or_default() += 1;
    }
    per_zone
}

/// Why the members of an affinity rule cannot share one host, if they cannot: they are in
/// several zones.
fn split_affinity(of_rule: &[&Option<ZoneId>]) -> Option<String> {
    let total = of_rule.len();
    let per_zone = per_zone(of_rule);
    if per_zone.len() > 1 {
        let names: Vec<&str> = per_zone.keys().map(|z| z.as_str()).collect();
        return Some(format!(
            "its {total} servers must share one host, but they are in zones {}",
            names.join(", ")
        ));
    }
    None
}

/// Why the members of an anti-affinity rule placed in a zone do not fit there, if they do not:
/// more of them than the zone has hosts (`listed`: hosts per zone).
fn too_few_hosts(of_rule: &[&Option<ZoneId>], listed: &BTreeMap<&ZoneId, usize>) -> Option<String> {
    let total = of_rule.len();
    for (zone, n) in &per_zone(of_rule) {
        let h = listed.get(zone).copied().unwrap_or(0);
        if h == 0 || *n <= h {
            continue;
        }
        let servers = if *n == total {
            format!("{n} servers need {n} distinct hosts")
        } else {
            format!("{n} of its {total} servers are in zone {zone} and need {n} distinct hosts")
        };
        return Some(format!("{servers}, zone {zone} has {h}"));
    }
    None
}

/// Why the members of an anti-affinity rule not placed yet do not fit, if they do not: with
/// the members in candidate zones, they need that many hosts there.
fn too_few_candidate_hosts(of_rule: &[&Option<ZoneId>], zones: &[ComputeZone]) -> Option<String> {
    if !of_rule.iter().any(|z| z.is_none()) {
        return None;
    }
    let candidates: Vec<(&ZoneId, usize)> = zones
        .iter()
        .filter(|z| z.is_candidate())
        .map(|z| (&z.name, hosts(z)))
        .collect();
    let cand: BTreeSet<&ZoneId> = candidates.iter().map(|(z, _)| *z).collect();
    let n = of_rule
        .iter()
        .filter(|z| z.as_ref().is_none_or(|z| cand.contains(z)))
        .count();
    let h: usize = candidates.iter().map(|(_, h)| h).sum();
    if candidates.is_empty() || n <= h {
        return None;
    }
    let where_ = match candidates.as_slice() {
        [(z, h)] => format!("zone {z} has {h}"),
        many => format!(
            "the zones have {h} together ({})",
            many.iter()
                .map(|(z, h)| format!("{z}: {h}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Some(format!("{n} servers need {n} distinct hosts, {where_}"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_yaml::Value as Yaml;

    use super::*;
    use crate::id::{HostId, VduId};
    use crate::lifecycle::stack;
    use crate::zone::ComputeHost;

    fn cluster() -> VnfPackage {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/k8s-cluster-vnf");
        crate::package::fs::load(&dir).unwrap()
    }

    fn yaml(text: &str) -> Yaml {
        serde_yaml::from_str(text).unwrap()
    }

    fn at<'v>(v: &'v Yaml, path: &[&str]) -> &'v Yaml {
        path.iter()
            .try_fold(v, |v, k| v.get(k))
            .unwrap_or_else(|| panic!("no {path:?}"))
    }

    fn zone(name: &str, hosts: usize) -> ComputeZone {
        ComputeZone {
            name: ZoneId::new(name),
            available: true,
            hosts: Some(
                (0..hosts)
                    .map(|i| ComputeHost {
                        name: HostId::new(format!("{name}-h{i}")),
                        available: true,
                        free: None,
                    })
                    .collect(),
            ),
        }
    }

    fn workers(zones: &[Option<&str>]) -> Vec<(VnfcSlot, Option<ZoneId>)> {
        zones
            .iter()
            .enumerate()
            .map(|(i, z)| {
                let i = u32::try_from(i).unwrap();
                (VnfcSlot::new("workerNode", i), z.map(ZoneId::new))
            })
            .chain([(VnfcSlot::new("masterNode", 0), Some(ZoneId::new("AZ-1")))])
            .collect()
    }

    #[test]
    fn a_placement_group_target_is_its_vdus_and_best_effort_makes_the_group_soft() {
        let pkg = cluster();
        let f = pkg.flavour("default").unwrap();
        let hard = policies(f, false);
        assert_eq!(
            hard,
            [("workers_apart".to_owned(), GroupPolicy::AntiAffinity)].into()
        );
        assert_eq!(
            policies(f, true)["workers_apart"],
            GroupPolicy::SoftAntiAffinity
        );
        assert_eq!(
            rules(f, &hard),
            vec![GroupRule {
                rule: "workers_apart".into(),
                vdus: vec![VduId::new("workerNode")],
                policy: GroupPolicy::AntiAffinity,
            }]
        );
        // a rule the record does not name gets no group
        assert!(rules(f, &BTreeMap::new()).is_empty());

        let mut info = InstantiatedVnfInfo::default();
        record(&mut info, &policies(f, true));
        assert_eq!(
            info.metadata.as_ref().unwrap()[SERVER_GROUPS_KEY],
            serde_json::json!({"workers_apart": "soft-anti-affinity"})
        );
        let mut inst = VnfInstance::new("i", "d");
        assert_eq!(recorded(&inst), None);
        inst.instantiated_vnf_info = Some(info);
        assert_eq!(recorded(&inst), Some(policies(f, true)));
    }

    #[test]
    fn the_stack_template_gets_the_group_and_every_worker_the_hint() {
        let pkg = cluster();
        let f = pkg.flavour("default").unwrap();
        let slots: Vec<VnfcSlot> = (0..3)
            .map(|i| VnfcSlot::new("workerNode", i))
            .chain([VnfcSlot::new("masterNode", 0)])
            .collect();
        let zones = slots
            .iter()
            .map(|s| (s.name(), ZoneId::new("AZ-1")))
            .collect();
        let rules = rules(f, &policies(f, false));
        let (bundle, params) = stack::heat_input(&pkg, f, &slots, &zones, &rules, &[]).unwrap();
        let top = yaml(&bundle.template);
        assert_eq!(
            at(&top, &["resources", "workers_apart", "type"]).as_str(),
            Some("OS::Nova::ServerGroup")
        );
        assert_eq!(
            at(
                &top,
                &["resources", "workers_apart", "properties", "policies"]
            ),
            &yaml("[anti-affinity]")
        );
        // the AutoScalingGroup passes the group to its member template ...
        let member = ["resources", "worker_instance", "properties", "resource"];
        assert_eq!(
            at(
                &top,
                &[&member[..], &["properties", "server_group"]].concat()
            ),
            &yaml("{get_resource: workers_apart}")
        );
        // ... whose server reads it (under both keys of the nested file)
        for key in ["worker.yaml", "nested/worker.yaml"] {
            let worker = yaml(&bundle.files[key]);
            assert_eq!(
                at(
                    &worker,
                    &[
                        "resources",
                        "workerNode",
                        "properties",
                        "scheduler_hints",
                        "group"
                    ]
                ),
                &yaml("{get_param: server_group}"),
                "{key}"
            );
        }
        // the master is in no group; the nfv parameter is untouched
        assert!(at(&top, &["resources", "masterNode-0", "properties"])
            .get("server_group")
            .is_none());
        assert!(!bundle.files["master.yaml"].contains("scheduler_hints"));
        assert_eq!(params["nfv"]["VDU"]["workerNode"]["desired_capacity"], 3);

        // without a VNFC, a VDU of the per-VNFC layout has no server: its rule adds nothing
        let master_rule = [GroupRule {
            rule: "alone".into(),
            vdus: vec![VduId::new("masterNode")],
            policy: GroupPolicy::Affinity,
        }];
        let (bundle, _) =
            stack::heat_input(&pkg, f, &slots[..3], &zones, &master_rule, &[]).unwrap();
        assert!(!bundle.template.contains("alone"));
    }

    #[test]
    fn the_preflight_names_the_rule_the_servers_and_the_hosts() {
        let pkg = cluster();
        let f = pkg.flavour("default").unwrap();
        let hard = policies(f, false);
        let rule = "rule workers_apart (AntiAffinityRule, nfvi_node) over PlacementGroup \
                    workers (VDU workerNode)";
        let err = |groups: &BTreeMap<String, GroupPolicy>,
                   members: &[(VnfcSlot, Option<ZoneId>)],
                   zones: &[ComputeZone]| {
            let e = check_hosts(f, groups, members, zones).unwrap_err();
            assert_eq!(e.kind, FailureKind::Infeasible);
            e.detail
        };
        let one = [zone("AZ-1", 3)];
        // not granted yet: four workers, three hosts in the only zone
        assert_eq!(
            err(&hard, &workers(&[None; 4]), &one),
            format!("{rule}: 4 servers need 4 distinct hosts, zone AZ-1 has 3")
        );
        // granted, or a scale-out next to three placed workers
        assert_eq!(
            err(&hard, &workers(&[Some("AZ-1"); 4]), &one),
            format!("{rule}: 4 servers need 4 distinct hosts, zone AZ-1 has 3")
        );
        let scale_out = workers(&[Some("AZ-1"), Some("AZ-1"), Some("AZ-1"), None]);
        assert_eq!(
            err(&hard, &scale_out, &one),
            format!("{rule}: 4 servers need 4 distinct hosts, zone AZ-1 has 3")
        );
        // three fit; the master is not a member
        assert!(check_hosts(f, &hard, &workers(&[Some("AZ-1"); 3]), &one).is_ok());
        // soft: nothing to check
        assert!(check_hosts(f, &policies(f, true), &workers(&[None; 4]), &one).is_ok());

        // several zones: the hosts together before the grant, each zone after it
        let two = [zone("AZ-1", 2), zone("AZ-2", 1), zone("AZ-3", 0)];
        assert_eq!(
            err(&hard, &workers(&[None; 4]), &two),
            format!(
                "{rule}: 4 servers need 4 distinct hosts, the zones have 3 together (AZ-1: 2, \
                 AZ-2: 1)"
            )
        );
        assert!(check_hosts(f, &hard, &workers(&[None; 3]), &two).is_ok());
        assert_eq!(
            err(&hard, &workers(&[Some("AZ-1"); 3]), &two),
            format!("{rule}: 3 servers need 3 distinct hosts, zone AZ-1 has 2")
        );
        assert_eq!(
            err(
                &hard,
                &workers(&[Some("AZ-2"), Some("AZ-2"), Some("AZ-1")]),
                &two
            ),
            format!(
                "{rule}: 2 of its 3 servers are in zone AZ-2 and need 2 distinct hosts, zone \
                 AZ-2 has 1"
            )
        );
        // a zone without an available host is Nova's and reselection's to deal with
        assert!(check_hosts(f, &hard, &workers(&[Some("AZ-3"); 2]), &two).is_ok());

        // a required affinity group: one zone
        let near: BTreeMap<String, GroupPolicy> =
            [("workers_apart".to_owned(), GroupPolicy::Affinity)].into();
        assert!(check_hosts(f, &near, &workers(&[Some("AZ-1"); 4]), &one).is_ok());
        assert_eq!(
            err(&near, &workers(&[Some("AZ-1"), Some("AZ-2"), None]), &two),
            format!("{rule}: its 3 servers must share one host, but they are in zones AZ-1, AZ-2")
        );
    }
}
