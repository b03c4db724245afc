//! Tacker's AZ-reselection vectors (`shared/vectors/tacker/az_reselection/`), read at test time,
//! each applicable case turned into a test of OUR behaviour.
//!
//! Tacker's configuration maps onto ours as follows (see `docs/tacker-differences.md`):
//! `placement_fallback_best_effort = true` ⇒ `reselect_zones = true` and every placement
//! constraint `fallbackBestEffort = true`; `placement_az_select_retry: 0` ⇒ no limit, `N` ⇒
//! `max_reselections = N`; `placement_az_resource_error` ⇒ `insufficient_resource_pattern`,
//! anchored at the start as Python's `re.match` applies it. Tacker's "Heat update calls" are our
//! attempts after the first one.
//!
//! Cases covered elsewhere, and only referenced here:
//! - `stack_status_reasons.json`: `reselect::failure::tests::tacker_stack_status_reason_vectors`
//!   (our default pattern and path parser on every reason, the greedy-regex UUID case included);
//! - `reselection_cases.json` `grant_placement_constraints`:
//!   `lifecycle::grant::tests::tacker_instantiate_placement_constraints` and
//!   `tacker_scale_out_placement_constraints`;
//! - hard-coded transcriptions of the `unit` cases in `reselect/tests.rs` (`disabled_gives_up_at_once`,
//!   `other_failure_is_not_reselected`, `every_zone_tried_once_then_no_candidates`,
//!   `retry_limit_counts_updates_only`, `tacker_check_zone_value_scenario`,
//!   `tacker_doc_instantiate_example`); the tests below drive the same machine from the
//!   vectors' own data instead.
//!
//! Not applicable to `vnfm-core`: the `unit` case `nova_client_tls` (TLS options of the Nova
//! client, an adapter concern) and the `functional` flow (a devstack job).
#![cfg(feature = "vectors")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;
use serde_json::{json, Value};

use vnfm_core::constraint::{Constraint, Scope};
use vnfm_core::driver::{Stack, StackResource, StackStatus};
use vnfm_core::error::Location;
use vnfm_core::id::{IdGen, OpOccId, StackId, ZoneId};
use vnfm_core::lcm::VnfInstance;
use vnfm_core::lifecycle::grant::{self, GrantOptions};
use vnfm_core::lifecycle::userdata::rm_idx;
use vnfm_core::lifecycle::LcmConfig;
use vnfm_core::package::VnfPackage;
use vnfm_core::placement::Selection;
use vnfm_core::reselect::{
    failed_path_from_reason, Action, GiveUp, InsufficientResourcePattern, Outcome, ReselectConfig,
    Reselection, Unit, DEFAULT_INSUFFICIENT_RESOURCE_PATTERN,
};
use vnfm_core::vectors::{read_vector, shared_vectors};
use vnfm_core::zone::{ComputeHost, ComputeZone, Resources};

const DIR: &str = "tacker/az_reselection";
const SMALL: Resources = Resources::new(1, 512, 1);

// ---------------------------------------------------------------------------------------------
// vector access

/// A JSON vector below `tacker/az_reselection/`; `None` (after a `skipping` line) when the
/// shared folder is absent.
fn vector(rel: &str) -> Option<Value> {
    let text = read_vector(env!("CARGO_MANIFEST_DIR"), &format!("{DIR}/{rel}"))?;
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}")))
}

/// The `unit` case of `reselection_cases.json` whose name starts with `name`.
fn unit_case(name: &str) -> Option<Value> {
    let doc = vector("reselection_cases.json")?;
    let case = doc["unit"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("no unit case {name}"))
        .clone();
    Some(case)
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| s(x).to_owned())
        .collect()
}

fn zset<I: IntoIterator<Item = S>, S: AsRef<str>>(names: I) -> BTreeSet<ZoneId> {
    names
        .into_iter()
        .map(|n| ZoneId::from(n.as_ref()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// mapping Tacker's data onto ours

/// Tacker's `[v2_vnfm]` options as our reselection config (see the module docs).
fn tacker_config(cfg: &Value, seed: u64) -> ReselectConfig {
    let enabled = cfg["placement_fallback_best_effort"]
        .as_bool()
        .unwrap_or(false);
    let pattern = match cfg["placement_az_resource_error"].as_str() {
        Some(p) => InsufficientResourcePattern::new(
            &format!("^(?:{p})"),
            Location::default().with_field("placement_az_resource_error"),
        )
        .unwrap(),
        None => InsufficientResourcePattern::standard().unwrap(),
    };
    let max_reselections = match cfg["placement_az_select_retry"].as_u64() {
        None | Some(0) => None,
        Some(n) => Some(u32::try_from(n).unwrap()),
    };
    ReselectConfig {
        enabled,
        pattern,
        max_reselections,
        selection: Selection::Random,
        seed,
        race_retries: 0,
    }
}

/// The VNFCs of a Tacker `nfv.VDU` dict that carry a zone: `(name, zone)`. Entries without
/// `computeFlavourId` are storages; entries without `locationConstraints` have no zone (our
/// granter gives every new VNFC one, so they have no counterpart here).
fn zoned_vnfcs(vdu: &Value) -> Vec<(String, String)> {
    vdu.as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| v.get("computeFlavourId").is_some())
        .filter_map(|(k, v)| {
            v.get("locationConstraints")
                .map(|z| (k.clone(), s(z).to_owned()))
        })
        .collect()
}

/// Units for a `fields` file (`parameters.nfv.VDU`): those named in `movable` are new.
fn units_from_fields(fields: &Value, movable: &[String]) -> Vec<Unit> {
    units_from_vdu_dict(&fields["parameters"]["nfv"]["VDU"], movable)
}

fn units_from_vdu_dict(vdu: &Value, movable: &[String]) -> Vec<Unit> {
    zoned_vnfcs(vdu)
        .into_iter()
        .map(|(name, zone)| {
            let vdu = rm_idx(&name).to_owned();
            let is_new = movable.contains(&name);
            Unit::new(name, vdu, zone, is_new, SMALL)
        })
        .collect()
}

/// A Tacker anti-affinity rule (`[[targets...], "zone"]`) the way our grant builder emits it: one
/// SOL003 constraint over every VNFC of the target VDUs, pairwise (every two apart).
fn our_rule(rule: &Value, units: &[Unit], best_effort: bool) -> Constraint {
    let targets = strings(&rule[0]);
    assert_eq!(s(&rule[1]), "zone");
    let members: Vec<String> = units
        .iter()
        .filter(|u| targets.iter().any(|t| t == u.vdu.as_str()))
        .map(|u| u.name.clone())
        .collect();
    Constraint::anti_affinity(format!("anti{targets:?}"), Scope::Zone, members)
        .with_fallback_best_effort(best_effort)
}

/// The same rule under Tacker's reading (`_get_exclude_zone`): with several targets, a VNFC must
/// avoid the zones of the *other* targets' VNFCs only; with one target, the other VNFCs of that
/// VDU. Expressed in our model as one pairwise constraint per pair it separates.
fn tacker_rule(rule: &Value, units: &[Unit], best_effort: bool) -> Vec<Constraint> {
    let targets = strings(&rule[0]);
    let of = |u: &Unit| targets.iter().position(|t| t == u.vdu.as_str());
    let mut out = Vec::new();
    for (i, a) in units.iter().enumerate() {
        for b in units.iter().skip(i + 1) {
            let (Some(x), Some(y)) = (of(a), of(b)) else {
                continue;
            };
            if targets.len() == 1 || x != y {
                out.push(
                    Constraint::anti_affinity(
                        format!("tacker-anti({},{})", a.name, b.name),
                        Scope::Zone,
                        [a.name.clone(), b.name.clone()],
                    )
                    .with_fallback_best_effort(best_effort),
                );
            }
        }
    }
    out
}

fn zone(name: &str) -> ComputeZone {
    ComputeZone {
        name: name.into(),
        available: true,
        hosts: Some(vec![ComputeHost {
            name: format!("{name}-host").into(),
            available: true,
            free: None,
        }]),
    }
}

fn zones(names: &[String]) -> Vec<ComputeZone> {
    names.iter().map(|n| zone(n)).collect()
}

/// A Nova `GET /os-availability-zone/detail` body mapped onto the zone catalogue's contract
/// (`ZoneCatalog`): zones whose hosts run no `nova-compute` are left out; `hosts: null` gives
/// `hosts: None`; a host is available when its `nova-compute` is `available` and `active`.
fn zones_from_nova(body: &Value) -> Vec<ComputeZone> {
    let mut out = Vec::new();
    for z in body["availabilityZoneInfo"].as_array().unwrap() {
        let name = s(&z["zoneName"]);
        let available = z["zoneState"]["available"].as_bool().unwrap_or(false);
        let hosts = match &z["hosts"] {
            Value::Null => None,
            Value::Object(hosts) => {
                let compute: Vec<ComputeHost> = hosts
                    .iter()
                    .filter_map(|(h, services)| {
                        let svc = services.get("nova-compute")?;
                        let flag = |k: &str| svc[k].as_bool().unwrap_or(false);
                        Some(ComputeHost {
                            name: h.as_str().into(),
                            available: flag("available") && flag("active"),
                            free: None,
                        })
                    })
                    .collect();
                if compute.is_empty() {
                    continue;
                }
                Some(compute)
            }
            other => panic!("zone {name}: hosts is {other}"),
        };
        out.push(ComputeZone {
            name: name.into(),
            available,
            hosts,
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------
// a scripted cloud

/// One stack apply's result: `Ok` or the failure reason and the units whose servers failed.
type ApplyResult = Result<(), (String, Vec<String>)>;

#[derive(Debug, Default)]
struct Trace {
    applies: Vec<BTreeMap<String, ZoneId>>,
    resource_listings: usize,
    zone_listings: usize,
}

impl Trace {
    /// Tacker's Heat update calls: the applies after the first.
    fn updates(&self) -> usize {
        self.applies.len().saturating_sub(1)
    }
}

/// The stack's resources (depth 2) after an apply: one nested stack per unit with one server,
/// failed for the units in `failed`.
fn listing(zones: &BTreeMap<String, ZoneId>, failed: &[String]) -> Vec<StackResource> {
    let status = |f: bool| -> StackStatus {
        if f {
            "CREATE_FAILED"
        } else {
            "CREATE_COMPLETE"
        }
        .parse()
        .unwrap()
    };
    let mut out = Vec::new();
    for name in zones.keys() {
        let f = failed.contains(name);
        out.push(StackResource {
            resource_name: name.clone(),
            physical_resource_id: format!("nested-{name}"),
            resource_type: "VDU.yaml".into(),
            resource_status: status(f),
            resource_status_reason: String::new(),
            parent_resource: None,
            stack_id: "root".into(),
            nested_stack_id: Some(format!("nested-{name}").into()),
        });
        out.push(StackResource {
            resource_name: rm_idx(name).to_owned(),
            physical_resource_id: format!("srv-{name}"),
            resource_type: "OS::Nova::Server".into(),
            resource_status: status(f),
            resource_status_reason: String::new(),
            parent_resource: Some(name.clone()),
            stack_id: format!("nested-{name}").into(),
            nested_stack_id: None,
        });
    }
    out
}

/// Runs `m` to the end (or until `max_applies` applies were made): apply `i` (0 = the first)
/// ends as `apply(i, zones)` says; resources are listed from that; zones from `nova`.
fn drive(
    m: &mut Reselection,
    nova: &[ComputeZone],
    max_applies: usize,
    mut apply: impl FnMut(usize, &BTreeMap<String, ZoneId>) -> ApplyResult,
) -> Trace {
    let mut t = Trace::default();
    let mut failed = Vec::new();
    for _ in 0..1000 {
        let Some(a) = m.poll_action() else { break };
        match a {
            Action::ApplyStack { zones } => {
                if t.applies.len() == max_applies {
                    break;
                }
                let r = apply(t.applies.len(), &zones);
                t.applies.push(zones);
                match r {
                    Ok(()) => m.handle_stack_succeeded(),
                    Err((reason, units)) => {
                        failed = units;
                        m.handle_stack_failed(&reason);
                    }
                }
            }
            Action::ListResources => {
                t.resource_listings += 1;
                let last = t.applies.last().cloned().unwrap_or_default();
                m.handle_resources(&StackId::from("root"), &listing(&last, &failed));
            }
            Action::ListZones => {
                t.zone_listings += 1;
                m.handle_zones(nova.to_vec());
            }
            Action::LocateFailedServers { servers } => {
                // Nova: a failed server `srv-<unit>` is in the zone its unit was applied in.
                let last = t.applies.last().cloned().unwrap_or_default();
                let zones = servers
                    .into_iter()
                    .map(|s| {
                        let z = s
                            .as_str()
                            .strip_prefix("srv-")
                            .and_then(|u| last.get(u).cloned());
                        (s, z)
                    })
                    .collect();
                m.handle_failed_servers(zones);
            }
            Action::LocateServers { servers } => {
                m.handle_hosts(servers.into_keys().map(|u| (u, None)).collect());
            }
        }
    }
    t
}

/// The unit a Heat reason names (the first segment of its resource path).
fn named_unit(reason: &str) -> Vec<String> {
    failed_path_from_reason(reason)
        .and_then(|p| p.into_iter().next())
        .into_iter()
        .collect()
}

/// A script replaying `first` then `then` (each `"fail: <reason>"` or `"success"`), the
/// failures naming their unit.
fn replay(
    first: &str,
    then: Vec<String>,
) -> impl FnMut(usize, &BTreeMap<String, ZoneId>) -> ApplyResult {
    let first = first.to_owned();
    move |i, _| {
        let step = if i == 0 {
            format!("fail: {first}")
        } else {
            then.get(i - 1)
                .cloned()
                .unwrap_or_else(|| panic!("apply {i} not scripted"))
        };
        match step.strip_prefix("fail: ") {
            Some(reason) => Err((reason.to_owned(), named_unit(reason))),
            None => {
                assert_eq!(step, "success");
                Ok(())
            }
        }
    }
}

fn gave_up(m: &Reselection) -> &GiveUp {
    match m.outcome() {
        Some(Outcome::GaveUp(g)) => g,
        o => panic!("expected a give-up, got {o:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// reselection_cases.json: unit

/// `update_stack_retry_fallback_best_effort_false`: reselection off ⇒ the original error, no
/// update, no Nova call. Tacker does not even look at the text; we still read it, so that the
/// error says "a zone ran out of resources and zone reselection is disabled".
#[test]
fn unit_fallback_best_effort_false() {
    let Some(c) = unit_case("update_stack_retry_fallback_best_effort_false") else {
        return;
    };
    let cfg = tacker_config(&c["config"], 1);
    assert!(!cfg.enabled);
    let initial = s(&c["initial_error"]);
    let mut m = Reselection::new(
        cfg,
        vec![Unit::new("VDU1-0", "VDU1", "az-1", true, SMALL)],
        vec![],
    );
    let t = drive(
        &mut m,
        &zones(&["az-1".into(), "az-2".into()]),
        10,
        replay(initial, vec![]),
    );
    assert_eq!(
        t.updates(),
        c["expect"]["heat_update_calls"].as_u64().unwrap() as usize
    );
    assert_eq!(
        t.zone_listings,
        c["expect"]["nova_calls"].as_u64().unwrap() as usize
    );
    assert_eq!(t.resource_listings, 0);
    match gave_up(&m) {
        GiveUp::ReselectionDisabled { reason } => assert_eq!(reason, initial, "same detail"),
        g => panic!("{g:?}"),
    }
}

/// `update_stack_retry_other_detail`: not an insufficient-resource error ⇒ the original error.
#[test]
fn unit_other_detail() {
    let Some(c) = unit_case("update_stack_retry_other_detail") else {
        return;
    };
    let Some(fields) = vector(s(&c["fields"])) else {
        return;
    };
    let cfg = tacker_config(&c["config"], 1);
    assert!(cfg.enabled);
    let units = units_from_fields(&fields, &["VDU1-0".to_owned()]);
    let initial = s(&c["initial_error"]);
    let mut m = Reselection::new(cfg, units, vec![]);
    let t = drive(
        &mut m,
        &zones(&["az-1".into(), "az-2".into()]),
        10,
        replay(initial, vec![]),
    );
    assert_eq!(
        t.updates(),
        c["expect"]["heat_update_calls"].as_u64().unwrap() as usize
    );
    // Unlike Tacker, the listing is read once: a failed resource's own reason could have
    // been a capacity failure (none is here).
    assert_eq!((t.zone_listings, t.resource_listings), (0, 1));
    match gave_up(&m) {
        GiveUp::NotACapacityError { reason } => assert_eq!(reason, initial),
        g => panic!("{g:?}"),
    }
}

/// `update_stack_retry_not_match_vdu_id`: a custom pattern that matches a reason naming no
/// `resources.<unit>`. As in Tacker, no update. Unlike Tacker we then read the stack's resource
/// list; here it names no failed server either (the vector gives none), so we give up with
/// "cannot tell which VNFC failed".
#[test]
fn unit_not_match_vdu_id() {
    let Some(c) = unit_case("update_stack_retry_not_match_vdu_id") else {
        return;
    };
    let Some(fields) = vector(s(&c["fields"])) else {
        return;
    };
    let cfg = tacker_config(&c["config"], 1);
    let initial = s(&c["initial_error"]);
    assert!(cfg.pattern.is_match(initial), "the custom pattern matches");
    assert!(failed_path_from_reason(initial).is_none());
    let units = units_from_fields(&fields, &["VDU1-0".to_owned()]);
    let mut m = Reselection::new(cfg.clone(), units.clone(), vec![]);
    let t = drive(
        &mut m,
        &zones(&["az-1".into(), "az-2".into()]),
        10,
        |_, _| Err((initial.to_owned(), vec![])),
    );
    assert_eq!(
        t.updates(),
        c["expect"]["heat_update_calls"].as_u64().unwrap() as usize
    );
    match gave_up(&m) {
        GiveUp::UnknownFailedUnit { reason } => assert_eq!(reason, initial),
        g => panic!("{g:?}"),
    }

    // Our difference: when Heat's resource list does show VDU1-0's server failed, we reselect
    // even though the text names no resource.
    let mut m = Reselection::new(cfg, units, vec![]);
    let t = drive(
        &mut m,
        &zones(&["az-1".into(), "az-2".into()]),
        10,
        |i, _| {
            if i == 0 {
                Err((initial.to_owned(), vec!["VDU1-0".to_owned()]))
            } else {
                Ok(())
            }
        },
    );
    assert_eq!(m.outcome(), Some(&Outcome::Succeeded));
    assert_eq!(t.updates(), 1);
    assert_eq!(t.applies[1]["VDU1-0"], ZoneId::from("az-2"));
}

/// Shared body of the two retry-out cases: every apply fails, naming VDU1-0.
fn retry_out(case: &str) -> Option<(Value, Reselection, Trace)> {
    let c = unit_case(case)?;
    let fields = vector(s(&c["fields"]))?;
    assert!(
        c["inst"]["instantiatedVnfInfo"].is_null(),
        "an instantiation"
    );
    let cfg = tacker_config(&c["config"], 11);
    let units = units_from_fields(&fields, &strings(&c["vdu_ids"]));
    assert!(units.iter().all(|u| u.movable));
    let nova = zones(&strings(&c["nova_zones"]));
    let every = vec![format!("fail: {}", s(&c["every_update_fails_with"])); 100];
    let mut m = Reselection::new(cfg, units, vec![]);
    let t = drive(&mut m, &nova, 100, replay(s(&c["initial_error"]), every));
    Some((c, m, t))
}

/// `update_stack_retry_retry_out_no_zone`: retry limit 10 > zones: each other zone tried once
/// (updates = zones − 1), then "no availability zone left". The zones are listed once.
#[test]
fn unit_retry_out_no_zone() {
    let Some((c, m, t)) = retry_out("update_stack_retry_retry_out_no_zone") else {
        return;
    };
    let nova = strings(&c["nova_zones"]);
    assert_eq!(
        t.updates(),
        c["expect"]["heat_update_calls"].as_u64().unwrap() as usize
    );
    assert_eq!(t.updates(), nova.len() - 1);
    assert_eq!(t.zone_listings, 1);
    let tried: Vec<&ZoneId> = t.applies.iter().map(|z| &z["VDU1-0"]).collect();
    assert_eq!(tried[0], &ZoneId::from("az-1"));
    assert_eq!(
        zset(nova.iter()),
        tried.iter().map(|z| (*z).clone()).collect::<BTreeSet<_>>()
    );
    assert_eq!(tried.len(), nova.len(), "each zone exactly once: {tried:?}");
    match gave_up(&m) {
        GiveUp::NoCandidates { tried, reason } => {
            assert_eq!(zset(&nova), tried.iter().cloned().collect());
            assert_eq!(reason, s(&c["every_update_fails_with"]), "the last error");
        }
        g => panic!("{g:?}"),
    }
}

/// `update_stack_retry_retry_out_retry_limit`: limit 3 with 5 zones ⇒ exactly 3 updates (the
/// initial create is not counted), then "reached the retry count limit".
#[test]
fn unit_retry_out_retry_limit() {
    let Some((c, m, t)) = retry_out("update_stack_retry_retry_out_retry_limit") else {
        return;
    };
    let limit = c["config"]["placement_az_select_retry"].as_u64().unwrap();
    assert_eq!(t.updates() as u64, limit);
    assert_eq!(
        t.updates(),
        c["expect"]["heat_update_calls"].as_u64().unwrap() as usize
    );
    let tried: BTreeSet<&ZoneId> = t.applies.iter().map(|z| &z["VDU1-0"]).collect();
    assert_eq!(tried.len(), t.applies.len(), "no zone tried twice");
    match gave_up(&m) {
        GiveUp::RetryLimit { limit: l, reason } => {
            assert_eq!(u64::from(*l), limit);
            assert_eq!(reason, s(&c["every_update_fails_with"]));
        }
        g => panic!("{g:?}"),
    }
}

/// The data of `update_stack_retry_check_zone_value`: config, units, the rule, zones, script.
struct CheckZoneValue {
    case: Value,
    cfg: ReselectConfig,
    units: Vec<Unit>,
    nova: Vec<ComputeZone>,
}

fn check_zone_value() -> Option<CheckZoneValue> {
    let case = unit_case("update_stack_retry_check_zone_value")?;
    let fields = vector(s(&case["fields"]))?;
    let inst = vector(s(&case["inst"]))?;
    let cfg = tacker_config(&case["config"], 5);
    assert!(
        cfg.enabled && cfg.max_reselections.is_none(),
        "retry 0 = no limit"
    );
    let vdu_ids = strings(&case["vdu_ids"]);
    let units = units_from_fields(&fields, &vdu_ids);
    // The existing VNFCs' zones are those of the instance's vnfcResourceInfo (metadata.zone).
    for v in inst["vnfcResourceInfo"].as_array().unwrap() {
        let vdu = s(&v["vduId"]);
        let z = ZoneId::from(s(&v["metadata"]["zone"]));
        for u in units.iter().filter(|u| !u.movable && u.vdu.as_str() == vdu) {
            assert_eq!(u.zone, z, "{}", u.name);
        }
    }
    let nova = zones(&strings(&case["nova_zones"]));
    Some(CheckZoneValue {
        case,
        cfg,
        units,
        nova,
    })
}

fn run_check_zone_value(d: &CheckZoneValue, constraints: Vec<Constraint>) -> (Reselection, Trace) {
    let then = strings(&d.case["update_results"]);
    let mut m = Reselection::new(d.cfg.clone(), d.units.clone(), constraints);
    let t = drive(
        &mut m,
        &d.nova,
        10,
        replay(s(&d.case["initial_error"]), then),
    );
    (m, t)
}

/// `update_stack_retry_check_zone_value` under OUR semantics: the rule over VDU1 and VDU2 is a
/// SOL003 anti-affinity constraint, pairwise over all its VNFCs, so the new VDU1-1 and VDU1-2
/// must also be apart (Tacker moves them together). What we share with Tacker: 3 updates, the
/// existing VDU1-0 and VDU2-0 never move, az-2 (anti-affine VDU2) is avoided while a compliant
/// zone is left, the failed zone is never tried again, and the last update breaks the rule
/// (reported as relaxed).
#[test]
fn unit_check_zone_value_ours() {
    let Some(d) = check_zone_value() else {
        return;
    };
    let rule = our_rule(&d.case["anti_rules"][0], &d.units, d.cfg.enabled);
    let (m, t) = run_check_zone_value(&d, vec![rule]);
    let expect = &d.case["expect"];
    assert_eq!(m.outcome(), Some(&Outcome::Succeeded));
    assert_eq!(
        t.updates(),
        expect["heat_update_calls"].as_u64().unwrap() as usize
    );
    let per_call = expect["per_call"].as_array().unwrap();
    let a = m.attempts();
    for at in a {
        assert_eq!(at.zones["VDU1-0"], ZoneId::from(s(&per_call[0]["VDU1-0"])));
        assert_eq!(at.zones["VDU2-0"], ZoneId::from("az-2"));
    }
    // call 1: both new VNFCs out of az-1 and az-2, each in one of Tacker's zones, and apart.
    let call1 = &a[1].zones;
    let allowed = zset(strings(&per_call[0]["VDU1-1 in"]));
    assert!(
        allowed.contains(&call1["VDU1-1"]) && allowed.contains(&call1["VDU1-2"]),
        "{call1:?}"
    );
    assert_ne!(
        call1["VDU1-1"], call1["VDU1-2"],
        "pairwise: VDU1-1 and VDU1-2 apart"
    );
    assert!(a[1].relaxed.is_empty());
    // call 2: VDU1-1 left its failed zone; no compliant zone is left, so the rule is relaxed.
    assert_ne!(a[2].zones["VDU1-1"], call1["VDU1-1"]);
    assert!(!a[2].relaxed.is_empty(), "{:?}", a[2]);
    // No unit ever moved into a zone excluded before.
    let mut excluded = BTreeSet::new();
    for w in a.windows(2) {
        excluded.extend(w[0].failed_zones.iter().cloned());
        for (n, z) in &w[1].zones {
            if w[0].zones[n] != *z {
                assert!(!excluded.contains(z), "{n} moved into excluded {z}");
            }
        }
    }
    assert!(
        !a[3].relaxed.is_empty(),
        "the rule stays broken: {:?}",
        a[3]
    );
}

/// The same case with the rule read Tacker's way (VDU1 VNFCs apart from VDU2 VNFCs only): our
/// machine then reproduces Tacker's zones call by call — az-3/az-4 first, then the other one,
/// then az-2 with the rule broken — except that Tacker moves the VNFCs of a failed zone as one
/// block, while we place each one on its own (`VDU1-1 == VDU1-2` is not checked).
#[test]
fn unit_check_zone_value_tacker_reading() {
    let Some(d) = check_zone_value() else {
        return;
    };
    for seed in 0..16 {
        let mut d2 = CheckZoneValue {
            case: d.case.clone(),
            cfg: d.cfg.clone(),
            units: d.units.clone(),
            nova: d.nova.clone(),
        };
        d2.cfg.seed = seed;
        let rules = tacker_rule(&d.case["anti_rules"][0], &d.units, d.cfg.enabled);
        let (m, t) = run_check_zone_value(&d2, rules);
        assert_eq!(m.outcome(), Some(&Outcome::Succeeded));
        let per_call = d.case["expect"]["per_call"].as_array().unwrap();
        assert_eq!(t.updates(), per_call.len());
        let a = m.attempts();
        let az34 = zset(strings(&per_call[0]["VDU1-1 in"]));
        for (k, call) in per_call.iter().enumerate() {
            let z = &a[k + 1].zones;
            assert_eq!(z["VDU1-0"], ZoneId::from(s(&call["VDU1-0"])));
            if let Some(only) = call.get("VDU1-1").and_then(Value::as_str) {
                assert_eq!(z["VDU1-1"], ZoneId::from(only), "seed {seed} call {k}");
                assert!(
                    !a[k + 1].relaxed.is_empty(),
                    "anti-affinity violated, reported"
                );
            } else {
                let allowed = zset(strings(&call["VDU1-1 in"]));
                assert!(
                    allowed.contains(&z["VDU1-1"]),
                    "seed {seed} call {k}: {z:?}"
                );
                assert!(az34.contains(&z["VDU1-2"]), "seed {seed} call {k}: {z:?}");
                assert!(a[k + 1].relaxed.is_empty());
            }
            if call["VDU1-1 != call1.VDU1-1"].as_bool() == Some(true) {
                assert_ne!(z["VDU1-1"], a[1].zones["VDU1-1"]);
            }
        }
    }
}

/// The zones the machine's first reselection of `failed` can choose, over `seeds`: everything in
/// `nova` minus what it excludes.
fn first_choices(
    units: &[Unit],
    constraints: &[Constraint],
    nova: &[ComputeZone],
    failed: &str,
) -> BTreeSet<ZoneId> {
    let mut chosen = BTreeSet::new();
    for seed in 0..64 {
        let cfg = tacker_config(&json!({"placement_fallback_best_effort": true}), seed);
        let mut m = Reselection::new(cfg, units.to_vec(), constraints.to_vec());
        let vdu = rm_idx(failed);
        let reason = format!("Resource CREATE failed: ResourceInError: resources.{failed}.resources.{vdu}: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\"");
        let t = drive(&mut m, nova, 2, |_, _| {
            Err((reason.clone(), vec![failed.to_owned()]))
        });
        assert_eq!(t.applies.len(), 2, "one reselection: {:?}", m.outcome());
        assert!(m.attempts()[1].relaxed.is_empty());
        chosen.insert(t.applies[1][failed].clone());
    }
    chosen
}

/// `get_exclude_zone`: which zones a reselected VDU1-1 must avoid. Tacker's function is not a
/// unit of ours; we check the zones our machine can choose (over 64 seeds, in a listing with two
/// spare zones az-5 and az-6 besides those the case names). Single-target rule: the same as
/// Tacker. Two-target rule: under Tacker's reading exactly Tacker's answer; under ours (pairwise)
/// the other VDU1 VNFCs' zones too.
#[test]
fn unit_get_exclude_zone() {
    let Some(c) = unit_case("get_exclude_zone") else {
        return;
    };
    let Some(vdu_dict) = vector(s(&c["vdu_dict"])) else {
        return;
    };
    let Some(inst) = vector(s(&c["inst"])) else {
        return;
    };
    let units = units_from_vdu_dict(&vdu_dict, &strings(&c["vdu_ids"]));
    for v in inst["vnfcResourceInfo"].as_array().unwrap() {
        let vdu = s(&v["vduId"]);
        assert!(units.iter().any(|u| !u.movable
            && u.vdu.as_str() == vdu
            && u.zone.as_str() == s(&v["metadata"]["zone"])));
    }
    let failed = s(&c["failed_vdu_id"]);
    let failed_zone = units
        .iter()
        .find(|u| u.name == failed)
        .unwrap()
        .zone
        .clone();
    let mut names: BTreeSet<String> = units.iter().map(|u| u.zone.to_string()).collect();
    names.extend(["az-5".to_owned(), "az-6".to_owned()]);
    let names: Vec<String> = names.into_iter().collect();
    let nova = zones(&names);
    let all = zset(&names);
    for check in c["checks"].as_array().unwrap() {
        let rule = &check["anti_rules"][0];
        let mut tacker_excluded = zset(strings(&check["expect_exclude_zones"]));
        tacker_excluded.insert(failed_zone.clone());
        let tacker_allowed: BTreeSet<ZoneId> = all.difference(&tacker_excluded).cloned().collect();
        let tacker = first_choices(&units, &tacker_rule(rule, &units, true), &nova, failed);
        assert_eq!(tacker, tacker_allowed, "Tacker's reading of {rule}");
        let ours = first_choices(&units, &[our_rule(rule, &units, true)], &nova, failed);
        if strings(&rule[0]).len() == 1 {
            assert_eq!(ours, tacker_allowed, "single target: same as Tacker");
        } else {
            // pairwise: every zone of a VDU1 or VDU2 VNFC is avoided
            let used: BTreeSet<ZoneId> = units.iter().map(|u| u.zone.clone()).collect();
            let expect: BTreeSet<ZoneId> = all.difference(&used).cloned().collect();
            assert_eq!(ours, expect, "our reading of {rule}");
            assert!(ours.is_subset(&tacker_allowed));
        }
    }
}

// --- get_additional_vdu_id: the grant builder names the new VNFCs ------------------------------

const TWO_VDUS: &str = r#"
tosca_definitions_version: tosca_simple_yaml_1_2
imports:
  - etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
node_types:
  sample.VNF:
    derived_from: tosca.nodes.nfv.VNF
topology_template:
  substitution_mappings:
    node_type: sample.VNF
    properties:
      flavour_id: simple
  node_templates:
    VNF:
      type: sample.VNF
      properties:
        descriptor_id: two-vdus
    VDU1:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: VDU1
        vdu_profile: {min_number_of_instances: 1, max_number_of_instances: 3}
    VDU2:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: VDU2
        vdu_profile: {min_number_of_instances: 1, max_number_of_instances: 1}
"#;

/// The types file the sample6 VNFD imports (not in the vectors): the VNF node type with its
/// descriptor id.
const SAMPLE6_TYPES: &str = r#"
tosca_definitions_version: tosca_simple_yaml_1_2
imports:
  - etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
node_types:
  company.provider.VNF:
    derived_from: tosca.nodes.nfv.VNF
    properties:
      descriptor_id:
        type: string
        default: sample6-vnfd
      flavour_id:
        type: string
        default: simple
"#;

fn package(files: &[(&str, String)]) -> VnfPackage {
    let files: BTreeMap<String, Vec<u8>> = files
        .iter()
        .map(|(n, t)| ((*n).to_owned(), t.clone().into_bytes()))
        .collect();
    VnfPackage::from_files("tacker-vectors", files).unwrap()
}

/// `get_additional_vdu_id`: the new VNFCs' names. Instantiate: `VDU1-0`, `VDU2-0` (our grants
/// carry no LINKPORT, so the `LINKPORT` add resource has no counterpart). Scale out by two VDU1
/// on the instance of `instantiated_vnfinfo_update_retry.json` (one VDU1 VNFC, no index):
/// `VDU1-1`, `VDU1-2`, the new indexes starting at the current count.
#[test]
fn unit_get_additional_vdu_id() {
    let Some(c) = unit_case("get_additional_vdu_id") else {
        return;
    };
    let op = OpOccId::new("op-1");
    let opts = GrantOptions::default();
    for check in c["checks"].as_array().unwrap() {
        let expect = strings(&check["expect"]);
        let computes: Vec<String> = check["add_resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| s(&r[0]) == "COMPUTE")
            .map(|r| s(&r[1]).to_owned())
            .collect();
        let got: Vec<String> = if check.get("inst").is_none() {
            assert_eq!(check["inst_vnfc_count"], json!({}));
            let pkg = package(&[("Definitions/two.yaml", TWO_VDUS.to_owned())]);
            let inst = VnfInstance::new("inst-1", "two-vdus");
            let p = grant::instantiate(&pkg, "simple", &inst, &op, &opts, &mut IdGen::seeded(1))
                .unwrap();
            let vdus: Vec<&str> = p.new_vnfcs.iter().map(|n| n.slot.vdu.as_str()).collect();
            assert_eq!(vdus, computes);
            p.new_vnfcs.iter().map(|n| n.slot.name()).collect()
        } else {
            let Some(vnfd) = read_vector(
                env!("CARGO_MANIFEST_DIR"),
                &format!("{DIR}/vnfd/v2_sample6_df_simple.yaml"),
            ) else {
                return;
            };
            let Some(info) = vector(s(&check["inst"])) else {
                return;
            };
            let pkg = package(&[
                ("Definitions/v2_sample6_df_simple.yaml", vnfd),
                (
                    "Definitions/v2_sample6_types.yaml",
                    SAMPLE6_TYPES.to_owned(),
                ),
            ]);
            // Tacker's instance dict with the fields SOL003 requires filled in.
            let vnfcs: Vec<Value> = info["vnfcResourceInfo"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let mut v = v.clone();
                    v["id"] = json!(format!("vnfc-{i}"));
                    v["computeResource"] = json!({"resourceId": format!("res-{i}")});
                    v
                })
                .collect();
            let inst: VnfInstance = serde_json::from_value(json!({
                "id": "inst-1",
                "vnfdId": pkg.descriptor_id,
                "instantiationState": "INSTANTIATED",
                "instantiatedVnfInfo": {
                    "flavourId": "simple",
                    "vnfState": "STARTED",
                    "scaleStatus": [{"aspectId": "VDU1_scale", "scaleLevel": 0}],
                    "vnfcResourceInfo": vnfcs
                }
            }))
            .unwrap();
            assert!(computes.iter().all(|v| v == "VDU1"));
            let steps = u32::try_from(computes.len()).unwrap();
            let p = grant::scale_out(
                &pkg,
                &inst,
                "VDU1_scale",
                steps,
                &op,
                &opts,
                &mut IdGen::seeded(1),
            )
            .unwrap();
            p.new_vnfcs.iter().map(|n| n.slot.name()).collect()
        };
        assert_eq!(got, expect, "{check}");
    }
}

// ---------------------------------------------------------------------------------------------
// reselection_cases.json: doc_examples

/// Units and the doc's policies: VDU1 VNFCs in zone affinity; VDU2 VNFCs anti-affine with each
/// other and with VDU1 — in our pairwise model one constraint per VDU1 VNFC (all VDU2 VNFCs
/// plus that one), since a single rule over VDU1 and VDU2 would also split the VDU1 VNFCs. All
/// best effort (`placement_fallback_best_effort = true`).
fn doc_constraints(units: &[Unit]) -> Vec<Constraint> {
    let of = |vdu: &str| -> Vec<String> {
        units
            .iter()
            .filter(|u| u.vdu.as_str() == vdu)
            .map(|u| u.name.clone())
            .collect()
    };
    let (vdu1, vdu2) = (of("VDU1"), of("VDU2"));
    let mut out = vec![
        Constraint::affinity("VDU1 affinity", Scope::Zone, vdu1.clone())
            .with_fallback_best_effort(true),
    ];
    for v in &vdu1 {
        let mut members = vdu2.clone();
        members.push(v.clone());
        out.push(
            Constraint::anti_affinity(format!("VDU2 anti-affinity with {v}"), Scope::Zone, members)
                .with_fallback_best_effort(true),
        );
    }
    out
}

/// The VNFCs the operation creates: all for instantiate, the healed ones, or the ones a scale
/// out adds (those above the first `before` entries of their VDU that the case's title names).
fn doc_movable(op: &str, before: &BTreeMap<String, String>) -> BTreeSet<String> {
    if op == "instantiate" {
        return before.keys().cloned().collect();
    }
    let re = Regex::new(r"VDU\d-\d").unwrap();
    let named: BTreeSet<String> = re.find_iter(op).map(|m| m.as_str().to_owned()).collect();
    if op.starts_with("heal") {
        return named;
    }
    // "scale out VDU1 (+VDU1-2, VDU1-3)"
    assert!(op.starts_with("scale out"), "{op}");
    named
}

/// Every `doc_examples` case of `placement_error_handling.rst`, driven through the machine:
/// zones in `insufficient` reject the new servers (the first time only the `failed` one, when the
/// case names it). After the run, each step's `reselect` VNFCs are in none of its `not_in`
/// zones — where a step's `not_in` lists an earlier step's `example` zone, the zone that step
/// really chose stands in for it — and share a zone when `same_zone`. Tacker reselects one
/// failed VNFC per round; we reselect every failed one in the same round, so the steps may be
/// one attempt.
#[test]
fn doc_examples() {
    let Some(doc) = vector("reselection_cases.json") else {
        return;
    };
    let ex = &doc["doc_examples"];
    let all = strings(&ex["zones"]);
    let nova = zones(&all);
    for case in ex["cases"].as_array().unwrap() {
        let op = s(&case["op"]);
        let before: BTreeMap<String, String> = case["before"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), s(v).to_owned()))
            .collect();
        let movable = doc_movable(op, &before);
        assert!(
            !movable.is_empty() && movable.iter().all(|m| before.contains_key(m)),
            "{op}"
        );
        let units: Vec<Unit> = before
            .iter()
            .map(|(n, z)| Unit::new(n.clone(), rm_idx(n), z.clone(), movable.contains(n), SMALL))
            .collect();
        let insufficient = zset(strings(&case["insufficient"]));
        let first_failed = case["failed"].as_str().map(str::to_owned);
        let cfg = tacker_config(&json!({"placement_fallback_best_effort": true}), 3);
        let constraints = doc_constraints(&units);
        let mut m = Reselection::new(cfg, units, constraints.clone());
        let t = drive(&mut m, &nova, 20, |i, zones| {
            let failed: Vec<String> = match (&first_failed, i) {
                (Some(f), 0) => vec![f.clone()],
                _ => zones
                    .iter()
                    .filter(|(n, z)| movable.contains(*n) && insufficient.contains(*z))
                    .map(|(n, _)| n.clone())
                    .collect(),
            };
            let Some(first) = failed.first() else {
                return Ok(());
            };
            let vdu = rm_idx(first);
            let reason = if i == 0 && op == "instantiate" {
                format!("Resource CREATE failed: ResourceInError: resources.{first}.resources.{vdu}: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\"")
            } else {
                format!("Resource UPDATE failed: resources.{first}: Resource CREATE failed: ResourceInError: resources.{vdu}: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\"")
            };
            Err((reason, failed))
        });
        assert_eq!(
            m.outcome(),
            Some(&Outcome::Succeeded),
            "{op}: {:?}",
            m.attempts()
        );
        let last = t.applies.last().unwrap();
        for (n, z) in &before {
            if !movable.contains(n) {
                assert_eq!(
                    last[n].as_str(),
                    z,
                    "{op}: {n} is not part of the operation"
                );
            }
        }
        let mut chosen: BTreeMap<String, ZoneId> = BTreeMap::new();
        for step in case["steps"].as_array().unwrap() {
            let re = strings(&step["reselect"]);
            let not_in: BTreeSet<ZoneId> = strings(&step["not_in"])
                .iter()
                .map(|z| {
                    chosen
                        .get(z)
                        .cloned()
                        .unwrap_or_else(|| ZoneId::from(z.as_str()))
                })
                .collect();
            for u in &re {
                assert!(
                    !not_in.contains(&last[u]),
                    "{op}: {u} in {} (not in {not_in:?})",
                    last[u]
                );
            }
            if step["same_zone"].as_bool() == Some(true) {
                assert!(re.iter().all(|u| last[u] == last[&re[0]]), "{op}: {last:?}");
            }
            chosen.insert(s(&step["example"]).to_owned(), last[&re[0]].clone());
        }
        // A rule is reported relaxed exactly when the final zones break it; the doc's notes
        // that say a rule breaks are such cases.
        let broken: Vec<&Constraint> = constraints
            .iter()
            .filter(|c| {
                let domains: Vec<&ZoneId> = c.members.iter().map(|n| &last[n]).collect();
                !c.is_met_by(&domains)
            })
            .collect();
        let relaxed: Vec<&String> = m.attempts().iter().flat_map(|a| &a.relaxed).collect();
        assert_eq!(
            relaxed.is_empty(),
            broken.is_empty(),
            "{op}: {relaxed:?} {broken:?}"
        );
        for c in &broken {
            assert!(
                relaxed.iter().any(|r| r.contains(&c.name)),
                "{op}: {} unreported",
                c.name
            );
        }
        let says_breaks = case["steps"].as_array().unwrap().iter().any(|st| {
            st.get("note")
                .is_some_and(|n| s(n).contains("violated") || s(n).contains("may break"))
        });
        if says_breaks {
            assert!(!broken.is_empty(), "{op}: the doc says a rule breaks");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// nova/az_parse_cases.json

/// Every `az_parse_cases` response, mapped to our zones: `is_candidate` selects exactly
/// `expected_candidates`; `hosts: null` is listed, not a candidate, and does not crash.
#[test]
fn nova_az_parse_cases() {
    let Some(doc) = vector("nova/az_parse_cases.json") else {
        return;
    };
    for case in doc["cases"].as_array().unwrap() {
        let file = s(&case["response"]);
        let Some(body) = vector(&format!("nova/{file}")) else {
            return;
        };
        let listed = zones_from_nova(&body);
        let candidates: BTreeSet<ZoneId> = listed
            .iter()
            .filter(|z| z.is_candidate())
            .map(|z| z.name.clone())
            .collect();
        assert_eq!(
            candidates,
            zset(strings(&case["expected_candidates"])),
            "{file}"
        );
        if let Some(t) = case["tacker_candidates"].as_array() {
            assert_eq!(
                candidates,
                t.iter().map(|z| ZoneId::from(s(z))).collect(),
                "{file}"
            );
        }
        assert!(
            listed.iter().all(|z| z.name.as_str() != "internal"),
            "{file}"
        );
        for z in listed.iter().filter(|z| z.hosts.is_none()) {
            assert!(!z.is_candidate(), "{file}: {} has hosts: null", z.name);
        }
    }
    // The multi-AZ listing drives a reselection without crashing on `hosts: null`: from az-1,
    // the machine can only go to nova or az-2.
    let Some(body) = vector("nova/os-availability-zone-detail.multi-az.synthesized.json") else {
        return;
    };
    let listed = zones_from_nova(&body);
    assert!(listed.iter().any(|z| z.hosts.is_none()));
    let mut seen = BTreeSet::new();
    for seed in 0..32 {
        let cfg = tacker_config(&json!({"placement_fallback_best_effort": true}), seed);
        let mut m = Reselection::new(
            cfg,
            vec![Unit::new("VDU1-0", "VDU1", "az-1", true, SMALL)],
            vec![],
        );
        let reason = "Resource CREATE failed: ResourceInError: resources.VDU1-0.resources.VDU1: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\"";
        let t = drive(&mut m, &listed, 2, |_, _| {
            Err((reason.to_owned(), vec!["VDU1-0".to_owned()]))
        });
        seen.insert(t.applies[1]["VDU1-0"].clone());
    }
    assert_eq!(seen, zset(["nova", "az-2"]));
}

/// The non-admin fallback (`GET /os-availability-zone`, `hosts: null` for every zone): under
/// our candidate rule no zone is a candidate, so reselection gives up with "no availability
/// zone left". We pin that: the zone catalogue needs the admin-only `/detail`.
#[test]
fn nova_non_admin_listing_has_no_candidates() {
    let Some(doc) = vector("nova/az_parse_cases.json") else {
        return;
    };
    let body = &doc["non_admin_fallback"]["response_shape"];
    let listed = zones_from_nova(body);
    assert!(!listed.is_empty());
    assert!(listed
        .iter()
        .all(|z| z.available && z.hosts.is_none() && !z.is_candidate()));
    let cfg = tacker_config(&json!({"placement_fallback_best_effort": true}), 1);
    let mut m = Reselection::new(
        cfg,
        vec![Unit::new("VDU1-0", "VDU1", "nova", true, SMALL)],
        vec![],
    );
    let reason = "Resource CREATE failed: ResourceInError: resources.VDU1-0.resources.VDU1: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\"";
    drive(&mut m, &listed, 5, |_, _| {
        Err((reason.to_owned(), vec!["VDU1-0".to_owned()]))
    });
    assert!(matches!(gave_up(&m), GiveUp::NoCandidates { .. }));
}

// ---------------------------------------------------------------------------------------------
// heat/*.synthesized.json

fn stack(file: &str) -> Option<Stack> {
    let v = vector(&format!("heat/{file}"))?;
    Some(serde_json::from_value(v["stack"].clone()).unwrap_or_else(|e| panic!("{file}: {e}")))
}

/// Each show-stack vector: is its `stack_status_reason` a capacity error under our default
/// pattern, and which unit does it name?
#[test]
fn heat_show_stack_reasons() {
    let pat = InsufficientResourcePattern::standard().unwrap();
    // (file, capacity error, failed unit)
    let table: [(&str, bool, Option<&str>); 5] = [
        (
            "show-stack.create-failed.no-valid-host.synthesized.json",
            true,
            Some("VDU1-0"),
        ),
        (
            "show-stack.create-failed.exhausted-hosts.synthesized.json",
            true,
            Some("VDU1-0"),
        ),
        (
            "show-stack.update-failed.no-valid-host.synthesized.json",
            true,
            Some("VDU1-0"),
        ),
        (
            "show-stack.create-failed.other.synthesized.json",
            false,
            None,
        ),
        ("show-stack.rollback-complete.synthesized.json", false, None),
    ];
    let Some(dir) = shared_vectors(env!("CARGO_MANIFEST_DIR"), "heat show-stack vectors") else {
        return;
    };
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir.join(DIR).join("heat"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("show-stack."))
        .collect();
    assert_eq!(
        on_disk,
        table.iter().map(|t| t.0.to_owned()).collect(),
        "every vector has a row"
    );
    for (file, capacity, unit) in table {
        let st = stack(file).unwrap();
        let reason = &st.stack_status_reason;
        assert_eq!(pat.is_match(reason), capacity, "{file}");
        assert_eq!(
            failed_path_from_reason(reason)
                .and_then(|p| p.into_iter().next())
                .as_deref(),
            unit,
            "{file}"
        );
        if capacity {
            assert!(st.stack_status.is_failed(), "{file}");
            // The machine takes it as a capacity failure and asks for the resources.
            let cfg = tacker_config(&json!({"placement_fallback_best_effort": true}), 1);
            let mut m = Reselection::new(
                cfg,
                vec![Unit::new("VDU1-0", "VDU1", "az-1", true, SMALL)],
                vec![],
            );
            assert!(matches!(m.poll_action(), Some(Action::ApplyStack { .. })));
            m.handle_stack_failed(reason);
            assert_eq!(m.poll_action(), Some(Action::ListResources), "{file}");
        }
    }
}

/// ROLLBACK_COMPLETE: with `enable_rollback_stack = true`, Tacker reads the reason from the
/// latest `*_FAILED` event (a capacity error naming VDU1-0); the stack's own reason says only
/// "Stack rollback completed.". We create stacks with rollback disabled, so a failed create
/// stays `CREATE_FAILED` with Heat's reason on the stack itself; a rolled-back stack's reason is
/// not a capacity error for us and ends the operation without reselection.
#[test]
fn heat_rollback_complete_and_events() {
    let Some(st) = stack("show-stack.rollback-complete.synthesized.json") else {
        return;
    };
    let Some(ev) = vector("heat/list-events.stack-failed.synthesized.json") else {
        return;
    };
    assert_eq!(st.stack_status.to_string(), "ROLLBACK_COMPLETE");
    // Tacker's way: the latest FAILED event of the stack.
    let latest = ev["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| s(&e["resource_status"]).ends_with("_FAILED"))
        .max_by_key(|e| s(&e["event_time"]).to_owned())
        .unwrap();
    let reason = s(&latest["resource_status_reason"]);
    let pat = InsufficientResourcePattern::standard().unwrap();
    assert!(pat.is_match(reason));
    assert_eq!(named_unit(reason), ["VDU1-0"]);
    // Ours: rollback disabled on create; the stack's own reason is no capacity error.
    let create = vnfm_core::driver::CreateStack::new("vnf", Default::default(), Default::default());
    assert!(create.disable_rollback);
    assert!(!pat.is_match(&st.stack_status_reason));
    let cfg = tacker_config(&json!({"placement_fallback_best_effort": true}), 1);
    let mut m = Reselection::new(
        cfg,
        vec![Unit::new("VDU1-0", "VDU1", "az-1", true, SMALL)],
        vec![],
    );
    m.poll_action();
    m.handle_stack_rolled_back(&st.stack_status_reason);
    assert!(matches!(gave_up(&m), GiveUp::NotACapacityError { .. }));
}

// ---------------------------------------------------------------------------------------------
// config_defaults.json

/// Every capacity failure among the vectors (reasons Tacker's default matches and that name a
/// Nova scheduling fault), and the non-capacity ones.
fn vector_reasons() -> Option<(Vec<String>, Vec<String>)> {
    let reasons = vector("stack_status_reasons.json")?;
    let mut capacity = Vec::new();
    let mut other = Vec::new();
    for r in reasons.as_array().unwrap() {
        let text = s(&r["stack_status_reason"]).to_owned();
        if r["default_regex_matches"].as_bool().unwrap() {
            capacity.push(text);
        } else {
            other.push(text);
        }
    }
    let doc = vector("reselection_cases.json")?;
    for c in doc["unit"].as_array().unwrap() {
        for k in ["initial_error", "every_update_fails_with"] {
            if let Some(t) = c[k].as_str() {
                if c["name"].as_str().unwrap().contains("other_detail")
                    || c["name"].as_str().unwrap().contains("not_match")
                {
                    other.push(t.to_owned());
                } else {
                    capacity.push(t.to_owned());
                }
            }
        }
        for step in c["update_results"].as_array().into_iter().flatten() {
            if let Some(t) = s(step).strip_prefix("fail: ") {
                capacity.push(t.to_owned());
            }
        }
    }
    for f in [
        "show-stack.create-failed.no-valid-host.synthesized.json",
        "show-stack.create-failed.exhausted-hosts.synthesized.json",
        "show-stack.update-failed.no-valid-host.synthesized.json",
    ] {
        capacity.push(stack(f)?.stack_status_reason);
    }
    for f in [
        "show-stack.create-failed.other.synthesized.json",
        "show-stack.rollback-complete.synthesized.json",
    ] {
        other.push(stack(f)?.stack_status_reason);
    }
    let ev = vector("heat/list-events.stack-failed.synthesized.json")?;
    for e in ev["events"].as_array().unwrap() {
        capacity.push(s(&e["resource_status_reason"]).to_owned());
    }
    Some((capacity, other))
}

/// Our defaults against Tacker's `[v2_vnfm]` defaults.
#[test]
fn config_defaults() {
    let Some(doc) = vector("config_defaults.json") else {
        return;
    };
    let t = &doc["v2_vnfm"];
    let ours = LcmConfig::standard().unwrap();
    // placement_fallback_best_effort = false: no best effort, no reselection.
    assert_eq!(t["placement_fallback_best_effort"]["default"], json!(false));
    assert!(!ours.fallback_best_effort && !ours.reselect_zones);
    // placement_az_select_retry = 0: unlimited (bounded by the candidate zones).
    assert_eq!(t["placement_az_select_retry"]["default"], json!(0));
    assert_eq!(ours.max_reselections, None);
    let defaults = Value::Object(
        t.as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v["default"].clone()))
            .collect(),
    );
    let mapped = tacker_config(&defaults, 0);
    assert_eq!(
        (mapped.enabled, mapped.max_reselections),
        (ours.reselect_zones, ours.max_reselections)
    );
    // openstack_vim_stack_create_timeout = 20 (minutes).
    let minutes = t["openstack_vim_stack_create_timeout"]["default"]
        .as_u64()
        .unwrap();
    assert_eq!(ours.stack_timeout.as_secs(), minutes * 60);
    // enable_rollback_stack = false: ours is always off (stacks are created with
    // disable_rollback = true).
    assert_eq!(t["enable_rollback_stack"]["default"], json!(false));
    assert_eq!(ours.pattern.as_str(), DEFAULT_INSUFFICIENT_RESOURCE_PATTERN);
}

/// Our default pattern matches every capacity failure among the vectors that Tacker's default
/// matches, and rejects the non-capacity ones. It is narrower than Tacker's on one point: it
/// requires Nova's scheduling fault text, so a `ResourceInError` with another fault is not
/// reselected (Tacker's matches any `ResourceInError`).
#[test]
fn default_pattern_against_tackers() {
    let Some(doc) = vector("config_defaults.json") else {
        return;
    };
    let Some((capacity, other)) = vector_reasons() else {
        return;
    };
    let tacker_src = s(&doc["v2_vnfm"]["placement_az_resource_error"]["default"]);
    // Python's re.match: anchored at the start only.
    let tacker = Regex::new(&format!("^(?:{tacker_src})")).unwrap();
    let ours = InsufficientResourcePattern::standard().unwrap();
    assert!(capacity.len() >= 10, "{capacity:?}");
    for r in &capacity {
        assert!(tacker.is_match(r), "Tacker's default matches {r}");
        assert!(ours.is_match(r), "ours matches {r}");
    }
    for r in &other {
        assert!(!tacker.is_match(r), "Tacker's default rejects {r}");
        assert!(!ours.is_match(r), "ours rejects {r}");
    }
    // The one difference, on a fault that is not a scheduling failure.
    let not_scheduling = "Resource CREATE failed: ResourceInError: resources.VDU1-0.resources.VDU1: Went to status ERROR due to \"Message: Build of instance aborted: Volume attach failed, Code: 500\"";
    assert!(tacker.is_match(not_scheduling));
    assert!(!ours.is_match(not_scheduling));
}

/// Tacker's hard-coded VDU-id regex (`resources\.((.*)-([0-9]+))`, `re.search`, group 1) is
/// greedy: on every capacity reason among the vectors it yields what `stack_status_reasons.json`
/// records as `tacker_extracted_vdu_id`, garbage in the instance-UUID case; our path parser
/// yields the intended id everywhere.
#[test]
fn vdu_id_extraction_against_tackers() {
    let Some(doc) = vector("config_defaults.json") else {
        return;
    };
    let Some(reasons) = vector("stack_status_reasons.json") else {
        return;
    };
    let re = Regex::new(s(&doc["vdu_id_extraction_regex"]["value"])).unwrap();
    let indexed = Regex::new(r"-[0-9]+$").unwrap();
    let mut differ = 0;
    for r in reasons.as_array().unwrap() {
        let text = s(&r["stack_status_reason"]);
        if !r["default_regex_matches"].as_bool().unwrap() {
            continue;
        }
        let tacker = re.captures(text).map(|c| c[1].to_owned());
        assert_eq!(
            tacker.as_deref(),
            r["tacker_extracted_vdu_id"].as_str(),
            "{text}"
        );
        let ours = named_unit(text);
        match r["intended_vdu_id"].as_str() {
            Some(id) => {
                assert_eq!(ours, [id], "{text}");
                differ += usize::from(tacker.as_deref() != Some(id));
            }
            // a bare VDU name: no `<vdu>-<index>` unit, nothing to reselect
            None => assert!(ours.iter().all(|u| !indexed.is_match(u))),
        }
    }
    assert_eq!(differ, 1, "only the instance-UUID case differs");
}

// ---------------------------------------------------------------------------------------------
// ROLLBACK_COMPLETE through the lifecycle loop

/// A Heat that rolls a failed stack back, as Tacker's `enable_rollback_stack = true` asks (and
/// as a stack created outside vnfm may be set up): the simulator's stacks, with every
/// `*_FAILED` stack reported as `ROLLBACK_COMPLETE`, "Stack rollback completed." — the shape of
/// `heat/show-stack.rollback-complete.synthesized.json`.
#[derive(Debug)]
struct RollingBack(vnfm_core::sim::SimCloud);

#[async_trait::async_trait]
impl vnfm_core::driver::StackDriver for RollingBack {
    async fn create_stack(
        &self,
        req: vnfm_core::driver::CreateStack,
    ) -> Result<StackId, vnfm_core::driver::DriverError> {
        self.0.create_stack(req).await
    }
    async fn update_stack(
        &self,
        req: vnfm_core::driver::UpdateStack,
    ) -> Result<(), vnfm_core::driver::DriverError> {
        self.0.update_stack(req).await
    }
    async fn show_stack(&self, id: &StackId) -> Result<Stack, vnfm_core::driver::DriverError> {
        let mut st = self.0.show_stack(id).await?;
        if st.stack_status.is_failed() {
            st.stack_status = "ROLLBACK_COMPLETE".parse().unwrap();
            st.stack_status_reason = "Stack rollback completed.".into();
        }
        Ok(st)
    }
    async fn delete_stack(&self, id: &StackId) -> Result<(), vnfm_core::driver::DriverError> {
        self.0.delete_stack(id).await
    }
    async fn list_resources(
        &self,
        req: vnfm_core::driver::ListResources,
    ) -> Result<Vec<StackResource>, vnfm_core::driver::DriverError> {
        self.0.list_resources(req).await
    }
    async fn mark_unhealthy(
        &self,
        req: vnfm_core::driver::MarkUnhealthy,
    ) -> Result<(), vnfm_core::driver::DriverError> {
        self.0.mark_unhealthy(req).await
    }
}

/// A stack that ends `ROLLBACK_COMPLETE` failed: the attempt must be recorded as failed and the
/// operation must fail as a stack failure that is no capacity error (we do not read events).
/// The lifecycle loop instead takes every `*_COMPLETE` status, `ROLLBACK_COMPLETE` included, for
/// success (`Lifecycle::run_placed` in `lifecycle/engine.rs`: `stack_status.is_complete()` ⇒
/// `handle_stack_succeeded`): the attempt is recorded as succeeded, no reselection happens, and
/// the operation ends `COMPLETED` with VDU1-0 recorded `STARTED` in AZ-1 although its server
/// never got a host.
#[tokio::test]
async fn rollback_complete_is_a_failed_attempt() {
    use std::path::Path;
    use std::sync::Arc;
    use vnfm_core::driver::VirtualClock;
    use vnfm_core::lcm::{CreateVnfRequest, InstantiateVnfRequest};
    use vnfm_core::lifecycle::{Drivers, FailureKind, Lifecycle, OperationOptions};
    use vnfm_core::reselect::AttemptOutcome;

    let examples = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"));
    let cloud = vnfm_core::cloud::CloudFile::load(examples.join("clouds/demo.yaml")).unwrap();
    let sim = vnfm_core::sim::SimCloud::new(cloud, 1);
    let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let drivers = Drivers {
        stacks: Arc::new(RollingBack(sim.clone())),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(vnfm_core::store::MemoryStore::new()),
        clock: Arc::new(VirtualClock::new(start)),
        cluster: None,
    };
    let mut config = LcmConfig::standard().unwrap();
    config.reselect_zones = true;
    config.seed = 3;
    let lcm = Lifecycle::new(drivers, config);
    let pkg = vnfm_core::package::fs::load(&examples.join("packages/demo-vnf")).unwrap();
    let req: CreateVnfRequest =
        serde_json::from_value(json!({"vnfdId": pkg.descriptor_id})).unwrap();
    let inst = lcm.create(&pkg, &req).await.unwrap();
    // AZ-1 cannot hold VDU1's flavour: the create fails, and this Heat rolls it back.
    let opts = OperationOptions {
        pinned: [("VDU1-0".to_owned(), ZoneId::from("AZ-1"))]
            .into_iter()
            .collect(),
        automatic: false,
        ..OperationOptions::default()
    };
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &opts,
        )
        .await
        .unwrap();
    assert!(!r.is_completed());
    let first = &r.op_occ.attempts[0];
    assert_eq!(first.outcome, Some(AttemptOutcome::Failed), "{first:?}");
    assert_eq!(
        first.status_reason.as_deref(),
        Some("Stack rollback completed.")
    );
    assert_eq!(r.failure, Some(FailureKind::StackFailed));
}
