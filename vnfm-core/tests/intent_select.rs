//! Intent-based cloud selection (`vnfm_core::intent`): the Casablanca design note's scoring
//! example, the seed's four cloud-agnostic intent examples (transcribed as fixtures under
//! `tests/fixtures/intent/`), invalid policies, and the filtering reasons.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use vnfm_core::error::Error;
use vnfm_core::id::{HostId, ZoneId};
use vnfm_core::intent::candidates::{CandidateFile, Capacities, GeoPoint};
use vnfm_core::intent::policy::{
    Comparison, Feature, Intent, Isolation, Objective, Policy, Term, Weights,
};
use vnfm_core::intent::select::{
    linked_inputs, select, select_each, Demand, DropReason, ResourceKind, Selection,
};
use vnfm_core::zone::{ComputeHost, ComputeZone, Resources};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/intent")
        .join(name)
}

fn customer() -> GeoPoint {
    GeoPoint::new(40.0, -75.0)
}

fn vg() -> Demand {
    Demand::new("vG", "m1.xlarge", 1).with_customer(customer())
}

fn zone(name: &str, hosts: &[(&str, u64)]) -> ComputeZone {
    ComputeZone {
        name: ZoneId::new(name),
        available: true,
        hosts: Some(
            hosts
                .iter()
                .map(|(h, vcpus)| ComputeHost {
                    name: HostId::new(*h),
                    available: true,
                    free: Some(Resources::new(*vcpus, 65536, 500)),
                })
                .collect(),
        ),
    }
}

/// Dallas has two hosts with 16 free vCPUs each.
fn roomy() -> Capacities {
    Capacities::new().with_zone_catalogue(
        "os-dallas",
        &[zone("AZ-1", &[("c1", 16)]), zone("AZ-2", &[("c2", 16)])],
    )
}

fn four_clouds() -> CandidateFile {
    CandidateFile::load(fixture("candidates_four_clouds.yaml")).unwrap()
}

fn order(s: &Selection) -> Vec<String> {
    s.ranking
        .iter()
        .map(|r| r.candidate.region.clone())
        .collect()
}

fn reasons<'a>(s: &'a Selection, owner: &str, region: &str) -> &'a [DropReason] {
    &s.dropped_of(owner, region)
        .unwrap_or_else(|| panic!("{owner}/{region} not dropped:\n{s}"))
        .reasons
}

fn field_of(e: &Error) -> String {
    match e {
        Error::Invalid { location, .. } => location.field.clone().unwrap_or_default(),
        other => panic!("not an invalid-input error: {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// 1. The design note's example: wd = 1, wc = 2; $100/100 km, $150/80 km, $50/190 km.

/// Candidates at the given (cost, distance) from a customer at (0, 0): regions on the
/// meridian, at the latitude whose great-circle distance is `km`.
fn note_candidates(points: &[(&str, f64, f64)]) -> CandidateFile {
    let mut y = String::from("owners:\n");
    for (name, cost, _) in points {
        y += &format!(
            "  - {{name: {name:?}, cloud_type: OpenStack, cost: {{fixed: {cost}}}, flavours: [{{name: f, vcpus: 1, memory_mb: 1024, disk_gb: 1}}]}}\n"
        );
    }
    y += "regions:\n";
    for (name, _, km) in points {
        let lat = (km / GeoPoint::EARTH_RADIUS_KM).to_degrees();
        y += &format!(
            "  - {{id: {name:?}, owner: {name:?}, location: {{lat: {lat}, lon: 0}}, capacity: public}}\n"
        );
    }
    CandidateFile::from_text("<design note example>", &y).unwrap()
}

fn note_policy(objective: &str) -> Policy {
    Policy::from_text(
        "<design note policy>",
        &format!(r#"{{"cloud-cost-evaluation": "TRUE", "objective": {objective}}}"#),
    )
    .unwrap()
}

fn note_demand() -> Demand {
    Demand::new("vG", "f", 1).with_customer(GeoPoint::new(0.0, 0.0))
}

const NOTE: [(&str, f64, f64); 3] = [
    ("Candidate 1", 100.0, 100.0),
    ("Candidate 2", 150.0, 80.0),
    ("Candidate 3", 50.0, 190.0),
];

fn value_of(s: &Selection, owner: &str) -> f64 {
    s.ranking
        .iter()
        .find(|r| r.candidate.owner == owner)
        .unwrap()
        .value
}

#[test]
fn design_note_weighted_picks_candidate_3_with_290() {
    let c = note_candidates(&NOTE);
    let p = note_policy(r#"{"mode": "weighted", "weights": {"wd": 1, "wc": 2}}"#);
    let s = select(&p, &c, &note_demand(), &Capacities::new()).unwrap();
    for (name, want) in [
        ("Candidate 1", 300.0),
        ("Candidate 2", 380.0),
        ("Candidate 3", 290.0),
    ] {
        let got = value_of(&s, name);
        assert!((got - want).abs() < 1e-6, "{name}: {got} != {want}");
    }
    let best = s.chosen().unwrap();
    assert_eq!(best.candidate.owner, "Candidate 3");
    let parts: Vec<(Term, f64, f64)> = best
        .contributions
        .iter()
        .map(|c| (c.term, c.weight, c.value))
        .collect();
    assert_eq!(parts[0].0, Term::Distance);
    assert!((parts[0].2 - 190.0).abs() < 1e-6 && parts[0].1 == 1.0);
    assert_eq!(
        (parts[1].0, parts[1].1, parts[1].2),
        (Term::Cost, 2.0, 100.0)
    );
    assert_eq!(order(&s), vec!["Candidate 3", "Candidate 1", "Candidate 2"]);
    let text = s.to_string();
    assert!(text.contains("chosen: Candidate 3/Candidate 3"), "{text}");
    assert!(
        text.contains("1. Candidate 3/Candidate 3 (OpenStack, f): value 290 = 1 × distance 190 km + 2 × cost 50"),
        "{text}"
    );
    // serializable for --json
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["chosen"]["owner"], "Candidate 3");
    assert_eq!(json["objective"]["mode"], "weighted");
}

#[test]
fn design_note_has_casablanca_picks_candidate_1() {
    let c = note_candidates(&NOTE);
    let p = note_policy(r#"{"mode": "has-casablanca", "weights": {"wd": 1}}"#);
    assert_eq!(
        p.weights,
        Weights {
            distance: 1.0,
            cost: 1.0
        }
    );
    let s = select(&p, &c, &note_demand(), &Capacities::new()).unwrap();
    for (name, want) in [
        ("Candidate 1", 200.0),
        ("Candidate 2", 230.0),
        ("Candidate 3", 240.0),
    ] {
        assert!((value_of(&s, name) - want).abs() < 1e-6, "{name}");
    }
    assert_eq!(s.chosen.as_ref().unwrap().owner, "Candidate 1");
}

#[test]
fn design_note_lexicographic_and_pareto() {
    let c = note_candidates(&NOTE);
    let by_cost = note_policy(r#"{"mode": "lexicographic", "order": ["cost", "distance"]}"#);
    let s = select(&by_cost, &c, &note_demand(), &Capacities::new()).unwrap();
    assert_eq!(order(&s), vec!["Candidate 3", "Candidate 1", "Candidate 2"]);
    let by_distance = note_policy(r#"{"mode": "lexicographic", "order": ["distance", "cost"]}"#);
    let s = select(&by_distance, &c, &note_demand(), &Capacities::new()).unwrap();
    assert_eq!(order(&s), vec!["Candidate 2", "Candidate 1", "Candidate 3"]);
    assert_eq!(
        s.objective,
        Objective::Lexicographic {
            order: vec![Term::Distance, Term::Cost]
        }
    );
    // no candidate of the note dominates another; a fourth one at $200/200 km is dominated
    let mut four = NOTE.to_vec();
    four.push(("Candidate 4", 200.0, 200.0));
    let c4 = note_candidates(&four);
    let p = note_policy(r#"{"mode": "weighted", "weights": {"wd": 1, "wc": 2}}"#);
    let s = select(&p, &c4, &note_demand(), &Capacities::new()).unwrap();
    let mut front: Vec<(String, f64, f64)> = s
        .pareto()
        .iter()
        .map(|r| {
            (
                r.candidate.owner.clone(),
                r.terms.cost.unwrap(),
                r.terms.distance_km.unwrap().round(),
            )
        })
        .collect();
    front.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        front,
        vec![
            ("Candidate 1".to_owned(), 100.0, 100.0),
            ("Candidate 2".to_owned(), 150.0, 80.0),
            ("Candidate 3".to_owned(), 50.0, 190.0),
        ]
    );
}

#[test]
fn ties_go_to_candidate_order() {
    let c = note_candidates(&[("A", 10.0, 50.0), ("B", 10.0, 50.0)]);
    let p = note_policy(r#"{"mode": "weighted"}"#);
    let s = select(&p, &c, &note_demand(), &Capacities::new()).unwrap();
    assert_eq!(order(&s), vec!["A", "B"]);
}

/// The same example read from the shared vectors' derived file (skips when absent).
#[cfg(feature = "vectors")]
#[test]
fn design_note_from_the_derived_vector() {
    let Some(text) = vnfm_core::vectors::read_vector(
        env!("CARGO_MANIFEST_DIR"),
        "onap/derived/casablanca_scoring_example.derived.json",
    ) else {
        return;
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let wd = v["weights"]["wd"].as_f64().unwrap();
    let wc = v["weights"]["wc"].as_f64().unwrap();
    let cands = v["candidates"].as_array().unwrap();
    let points: Vec<(String, f64, f64)> = cands
        .iter()
        .map(|c| {
            (
                c["candidate"].as_str().unwrap().to_owned(),
                c["cost_usd"].as_f64().unwrap(),
                c["distance_km"].as_f64().unwrap(),
            )
        })
        .collect();
    let refs: Vec<(&str, f64, f64)> = points
        .iter()
        .map(|(n, c, d)| (n.as_str(), *c, *d))
        .collect();
    let file = note_candidates(&refs);
    for (mode, value_key, winner_key) in [
        (
            format!(r#"{{"mode": "weighted", "weights": {{"wd": {wd}, "wc": {wc}}}}}"#),
            "design_note_value_wd1_wc2",
            "design_note_value_wd1_wc2",
        ),
        (
            r#"{"mode": "has-casablanca", "weights": {"wd": 1}}"#.to_owned(),
            "has_casablanca_distance_between_weight1",
            "has_casablanca_distance_between_weight1",
        ),
    ] {
        let s = select(
            &note_policy(&mode),
            &file,
            &note_demand(),
            &Capacities::new(),
        )
        .unwrap();
        for c in cands {
            let name = c["candidate"].as_str().unwrap();
            let want = c[value_key].as_f64().unwrap();
            assert!((value_of(&s, name) - want).abs() < 1e-6, "{mode}: {name}");
        }
        assert_eq!(
            s.chosen.as_ref().unwrap().owner,
            v["winner"][winner_key].as_str().unwrap(),
            "{mode}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// 2. The seed's four intent examples on four cloud types.

#[test]
fn example1_burstable_on_vmware_vio() {
    let p = Policy::load(fixture("example1_burstable_vio.json")).unwrap();
    assert_eq!(p.resources, vec!["vG"]);
    assert_eq!(
        p.intents[0].intents,
        vec![Intent::Isolation {
            isolation: Isolation::Burstable { percent: 25 }
        }]
    );
    let s = select(&p, &four_clouds(), &vg(), &roomy()).unwrap();
    assert_eq!(order(&s), vec!["vio-east"]);
    let best = s.chosen().unwrap();
    let variant = best.oversubscription.as_ref().unwrap();
    assert_eq!((variant.percent, variant.max_vcpus), (25, 20));
    for (owner, region) in [
        ("openstack", "os-dallas"),
        ("k8s", "k8s-edge"),
        ("azure", "azure-west"),
    ] {
        let r = reasons(&s, owner, region);
        assert!(
            matches!(&r[0], DropReason::CloudType { named, .. } if named.len() == 1),
            "{r:?}"
        );
    }
    assert_eq!(
        reasons(&s, "k8s", "k8s-edge")[0].to_string(),
        "owner k8s is Kubernetes; the policy states intents for VMware VIO only"
    );
}

#[test]
fn example2_guaranteed_anywhere_with_room() {
    let p = Policy::load(fixture("example2_guaranteed.json")).unwrap();
    let s = select(&p, &four_clouds(), &vg(), &roomy()).unwrap();
    // cost does not count: nearest first
    assert_eq!(order(&s), vec!["vio-east", "os-dallas", "azure-west"]);
    assert!(s.ranking.iter().all(|r| r.terms.cost.is_none()));
    let r = reasons(&s, "k8s", "k8s-edge");
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].to_string(),
        "region k8s-edge: 12 vCPU free < 16 needed (declared)"
    );
}

#[test]
fn example3_ha_on_openstack_and_azure() {
    let p = Policy::load(fixture("example3_ha.yaml")).unwrap();
    assert_eq!(p.intents[0].intents, vec![Intent::HighAvailability]);
    let s = select(&p, &four_clouds(), &vg(), &roomy()).unwrap();
    assert_eq!(order(&s), vec!["os-dallas", "azure-west"]);
    assert!(matches!(
        reasons(&s, "vio", "vio-east")[0],
        DropReason::CloudType { .. }
    ));
    // one host in the catalogue is not enough for HA
    let one_host =
        Capacities::new().with_zone_catalogue("os-dallas", &[zone("AZ-1", &[("c1", 32)])]);
    let s = select(&p, &four_clouds(), &vg(), &one_host).unwrap();
    assert_eq!(order(&s), vec!["azure-west"]);
    assert_eq!(
        reasons(&s, "openstack", "os-dallas"),
        &[DropReason::TooFewHosts {
            region: "os-dallas".to_owned(),
            hosts: 1,
            needed: 2
        }]
    );
}

#[test]
fn example4_burstable_with_cost_and_distance() {
    let p = Policy::load(fixture("example4_cost.json")).unwrap();
    assert!(p.cost_evaluation.enabled && p.cost_evaluation.feature_groups);
    assert_eq!(p.distance.unwrap().operator, Comparison::Lt);
    let s = select(&p, &four_clouds(), &vg(), &roomy()).unwrap();
    assert_eq!(order(&s), vec!["vio-east"]);
    let best = s.chosen().unwrap();
    assert_eq!(best.terms.cost, Some(100.0));
    let d = best.terms.distance_km.unwrap();
    assert!((best.value - (d + 200.0)).abs() < 1e-9);
    let os = reasons(&s, "openstack", "os-dallas");
    assert_eq!(
        os[0],
        DropReason::Unsupported {
            owner: "openstack".to_owned(),
            feature: Feature::BurstableQos
        }
    );
    assert_eq!(
        os[0].to_string(),
        "owner openstack does not support Burstable QoS"
    );
    assert_eq!(os.len(), 2, "{os:?}");
    assert!(matches!(os[1], DropReason::Distance { .. }), "{os:?}");
    let k8s = reasons(&s, "k8s", "k8s-edge");
    assert_eq!(
        k8s[0].to_string(),
        "region k8s-edge: flavour m1.xlarge has no 25% over-subscription variant (offered: 50%)"
    );
    assert!(matches!(
        k8s[1],
        DropReason::Capacity {
            resource: ResourceKind::Vcpus,
            free: 12,
            needed: 16,
            ..
        }
    ));
}

#[test]
fn feature_group_discount_prices_azure_ha() {
    let p = Policy::from_text(
        "p.json",
        r#"{"cloud-cost-evaluation": "TRUE", "objective": {"mode": "lexicographic", "order": ["cost"]},
            "cloudDeploymentIntentList": [{"intentProperties": [{"deploymentIntent": "Infrastructure High Availability (HA) for VNF"}]}]}"#,
    )
    .unwrap();
    let s = select(
        &p,
        &four_clouds(),
        &Demand::new("vG", "m1.xlarge", 2),
        &roomy(),
    )
    .unwrap();
    let azure = s
        .ranking
        .iter()
        .find(|r| r.candidate.owner == "azure")
        .unwrap();
    assert!((azure.terms.cost.unwrap() - 144.0).abs() < 1e-9); // 2 × 80 × 0.9
    assert_eq!(s.chosen.as_ref().unwrap().owner, "openstack"); // 2 × 60
}

// ---------------------------------------------------------------------------------------
// Invalid policies name the field.

fn policy_err(text: &str) -> Error {
    Policy::from_text("bad.json", text).unwrap_err()
}

fn isolation(value: &str, percent: &str, op: &str) -> String {
    format!(
        r#"{{"content": {{"allowedOversubscriptionPercentages": [25], "cloudDeploymentIntentList": [{{"intentProperties": [{{"deploymentIntent": "Infrastructure Resource Isolation for VNF", "intent-attributes": [
            {{"intent-attribute-key": "Infrastructure Resource Isolation for VNF", "intent-attribute-value": "{value}", "operator": "{op}"}},
            {{"intent-attribute-key": "Burstable QoS Oversubscription Percentage", "intent-attribute-value": "{percent}", "operator": "="}}]}}]}}]}}}}"#
    )
}

#[test]
fn invalid_policies_name_field_value_and_expectation() {
    // a set of the wrong type
    let e = policy_err(
        r#"{"content": {"cloudDeploymentIntentList": [{"Cloud Type (Cloud Provider)": 5, "intentProperties": []}]}}"#,
    );
    assert_eq!(
        field_of(&e),
        "content.cloudDeploymentIntentList[0].Cloud Type (Cloud Provider)"
    );
    assert!(
        e.to_string()
            .contains("value 5: expected a list of strings (or a single string)"),
        "{e}"
    );
    let e = policy_err(r#"{"content": {"resources": {"vG": 1}}}"#);
    assert_eq!(field_of(&e), "content.resources");
    // an unknown intent
    let e = policy_err(
        r#"{"content": {"cloudDeploymentIntentList": [{"intentProperties": [{"deploymentIntent": "Infrastructure Teleportation"}]}]}}"#,
    );
    assert_eq!(
        field_of(&e),
        "content.cloudDeploymentIntentList[0].intentProperties[0].deploymentIntent"
    );
    assert!(
        e.to_string()
            .contains("unknown intent \"Infrastructure Teleportation\""),
        "{e}"
    );
    // a percentage that is not allowed
    let e = policy_err(&isolation("Burstable QoS", "30", "="));
    assert_eq!(
        field_of(&e),
        "content.cloudDeploymentIntentList[0].intentProperties[0].intent-attributes[1].intent-attribute-value"
    );
    assert!(
        e.to_string()
            .contains("percentage 30 is not allowed: expected one of 25"),
        "{e}"
    );
    assert!(Policy::from_text("ok.json", &isolation("Burstable QoS", "25", "=")).is_ok());
    // a bad operator
    let e = policy_err(&isolation("Burstable QoS", "25", ">="));
    assert_eq!(
        field_of(&e),
        "content.cloudDeploymentIntentList[0].intentProperties[0].intent-attributes[0].operator"
    );
    assert!(
        e.to_string().contains("value \">=\": expected \"=\""),
        "{e}"
    );
    // an unknown QoS value, an unknown key, a bad distance operator
    let e = policy_err(&isolation("Platinum QoS", "25", "="));
    assert!(
        e.to_string()
            .contains("expected \"Guaranteed QoS\" or \"Burstable QoS\""),
        "{e}"
    );
    let e = policy_err(r#"{"content": {"cloudOwnr": "All"}}"#);
    assert_eq!(field_of(&e), "content.cloudOwnr");
    let e = policy_err(r#"{"distance": {"value": "1500", "operator": "~", "unit": "km"}}"#);
    assert_eq!(field_of(&e), "distance.operator");
    assert!(
        e.to_string()
            .starts_with("bad.json: distance.operator: value \"~\""),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------
// 3. Filtering reasons: capability, capacity (declared, zone catalogue, public), distance.

#[test]
fn filtering_reasons_are_typed_and_readable() {
    let p = Policy::from_text(
        "p.json",
        r#"{"distance": {"value": "1500", "operator": "<", "unit": "km"},
            "cloudDeploymentIntentList": [{"intentProperties": [{"deploymentIntent": "Infrastructure High Availability (HA) for VNF"}]}]}"#,
    )
    .unwrap();
    // 4 instances: 64 vCPUs; the catalogue has 8 + 8 free in Dallas
    let tight = Capacities::new().with_zone_catalogue(
        "os-dallas",
        &[zone("AZ-1", &[("c1", 8)]), zone("AZ-2", &[("c2", 8)])],
    );
    let demand = Demand::new("vG", "m1.xlarge", 4).with_customer(customer());
    let s = select(&p, &four_clouds(), &demand, &tight).unwrap();
    assert_eq!(order(&s), vec!["vio-east"]);

    // capability: Kubernetes owner lacks HA; declared capacity 12 < 64
    let k8s = reasons(&s, "k8s", "k8s-edge");
    assert_eq!(
        k8s[0],
        DropReason::Unsupported {
            owner: "k8s".to_owned(),
            feature: Feature::HighAvailability
        }
    );
    assert_eq!(k8s[0].to_string(), "owner k8s does not support HA");
    assert_eq!(
        k8s[1],
        DropReason::Capacity {
            region: "k8s-edge".to_owned(),
            resource: ResourceKind::Vcpus,
            free: 12,
            needed: 64,
            source: "declared".to_owned()
        }
    );
    // zone catalogue: 16 < 64, and 2 hosts < 4 needed for HA
    let os = reasons(&s, "openstack", "os-dallas");
    assert!(
        os.contains(&DropReason::TooFewHosts {
            region: "os-dallas".to_owned(),
            hosts: 2,
            needed: 4
        }),
        "{os:?}"
    );
    assert!(
        os.iter().any(|r| r.to_string() == "region os-dallas: 16 vCPU free < 64 needed (zone catalogue)"),
        "{os:?}"
    );
    // distance
    let d = os.iter().find_map(|r| match r {
        DropReason::Distance { km, bound, .. } => Some((*km, *bound)),
        _ => None,
    });
    let (km, bound) = d.unwrap();
    assert!(km > 1500.0 && bound.km == 1500.0 && bound.operator == Comparison::Lt);
    // public: always passes capacity, so San Francisco is dropped for distance only
    let az = reasons(&s, "azure", "azure-west");
    assert_eq!(az.len(), 1, "{az:?}");
    let DropReason::Distance { km, .. } = &az[0] else {
        panic!("{az:?}")
    };
    let line = az[0].to_string();
    assert!(line.starts_with("region azure-west: distance "), "{line}");
    assert!(line.ends_with(" km > 1500 km (bound < 1500 km)"), "{line}");
    assert!(*km > 3000.0, "{km}");
    // the human report lists every reason
    let text = s.to_string();
    assert!(
        text.contains("dropped:") && text.contains("owner k8s does not support HA"),
        "{text}"
    );

    // unknown capacity is a reason too
    let s = select(&p, &four_clouds(), &demand, &Capacities::new()).unwrap();
    assert!(reasons(&s, "openstack", "os-dallas").iter().any(
        |r| r.to_string() == "region os-dallas: free capacity unknown: no zone catalogue given"
    ));
}

#[test]
fn reservation_pool_capacity_comes_from_the_caller() {
    let c = CandidateFile::from_text(
        "c.yaml",
        "owners: [{name: o, cloud_type: OpenStack, flavours: [{name: f, vcpus: 4, memory_mb: 4096, disk_gb: 10}]}]\nregions: [{id: R, owner: o, location: {lat: 0, lon: 0}, capacity: {reservation: pool-1}}]\n",
    )
    .unwrap();
    let p = Policy::from_text("p.json", r#"{"objective": {"weights": {"wd": 0}}}"#).unwrap();
    let d = Demand::new("x", "f", 2);
    let s = select(
        &p,
        &c,
        &d,
        &Capacities::new().with_pool_free("pool-1", Resources::new(6, 1 << 20, 100)),
    )
    .unwrap();
    assert_eq!(
        reasons(&s, "o", "R")[0].to_string(),
        "region R: 6 vCPU free < 8 needed (reservation pool pool-1)"
    );
    let s = select(
        &p,
        &c,
        &d,
        &Capacities::new().with_pool_free("pool-1", Resources::new(8, 8192, 20)),
    )
    .unwrap();
    assert_eq!(order(&s), vec!["R"]);
}

#[test]
fn demand_errors_and_the_linked_solver_inputs() {
    let p = Policy::load(fixture("example2_guaranteed.json")).unwrap();
    let e = select(
        &p,
        &four_clouds(),
        &Demand::new("vG", "m1.xlarge", 1),
        &roomy(),
    )
    .unwrap_err();
    assert_eq!(field_of(&e), "demand.customer");
    let e = select(
        &p,
        &four_clouds(),
        &Demand::new("vFW", "m1.xlarge", 1).with_customer(customer()),
        &roomy(),
    )
    .unwrap_err();
    assert_eq!(field_of(&e), "demand.vnfc");
    let all = select_each(&p, &four_clouds(), &[vg(), vg()], &roomy()).unwrap();
    let inputs = linked_inputs(&all);
    assert_eq!(inputs.len(), 2);
    assert_eq!(inputs[0].vnfc, "vG");
    assert_eq!(inputs[0].options.len(), 3);
    assert_eq!(inputs[0].options[0].vim.region, "vio-east");
    assert_eq!(inputs[0].options[0].price, all[0].ranking[0].value);
}
