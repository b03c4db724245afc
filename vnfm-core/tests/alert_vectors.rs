//! Every Alertmanager capture (`shared/vectors/alertmanager/`) and every Tacker Prometheus-plugin
//! payload and scenario (`shared/vectors/tacker/prometheus/`) through `vnfm_core::alert`, each
//! with its expected decision. Where vnfm differs from Tacker on purpose the expectation is
//! ours and the reason is in the `alert` module docs.
#![cfg(feature = "vectors")]
// a test crate: helpers outside `#[test]` fns fail by panicking too
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use serde_json::{json, Value};
use vnfm_core::alert::{
    judge, Action, Alert, AlertHandler, AlertOutcome, AlertStatus, Decision, Endpoint, HealBatcher,
    PrometheusPluginConfig, ScaleCooldown, Webhook,
};
use vnfm_core::id::VnfInstanceId;
use vnfm_core::lcm::{
    InstantiatedVnfInfo, InstantiationState, ScaleInfo, ScaleType, VnfInstance,
    VnfOperationalStateType, VnfcInfo,
};
use vnfm_core::vectors::{read_vector, shared_vectors};

const M: &str = env!("CARGO_MANIFEST_DIR");

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 10, 16, 0).unwrap()
}

fn secs(s: i64) -> TimeDelta {
    TimeDelta::try_seconds(s).unwrap()
}

fn describe(o: &AlertOutcome) -> String {
    match &o.action {
        Action::HealQueued { instance, vnfc, .. } => format!("heal {instance} {vnfc}"),
        Action::Scale(j) => {
            assert_eq!(j.request.number_of_steps, Some(1), "one step");
            assert!(j.options().automatic, "isAutomaticInvocation");
            format!(
                "scale {} {} {}",
                j.instance,
                j.request.aspect_id,
                serde_json::to_value(j.request.type_)
                    .unwrap()
                    .as_str()
                    .unwrap()
            )
        }
        Action::Ignored(r) => format!("ignore {}", r.label()),
    }
}

fn all_on() -> PrometheusPluginConfig {
    PrometheusPluginConfig::default().with_all_enabled()
}

/// An instantiated instance with both flags on, the given `vnfcInfo` ids and, for the aspect,
/// (scale level, max level).
fn instance(id: &str, vnfcs: &[&str], aspect: Option<(&str, u32, u32)>) -> VnfInstance {
    let mut i = VnfInstance::new(id, "vnfd");
    i.instantiation_state = Some(InstantiationState::Instantiated);
    i.vnf_configurable_properties = json!({"isAutohealEnabled": true, "isAutoscaleEnabled": true})
        .as_object()
        .cloned();
    let scale = |level: u32, (a, _, _): (&str, u32, u32)| ScaleInfo {
        aspect_id: a.into(),
        vnfd_id: None,
        scale_level: level,
    };
    i.instantiated_vnf_info = Some(InstantiatedVnfInfo {
        vnfc_info: vnfcs
            .iter()
            .map(|v| VnfcInfo {
                id: (*v).into(),
                vdu_id: v.split('-').next().unwrap().into(),
                vnfc_resource_info_id: None,
                vnfc_state: VnfOperationalStateType::Started,
                vnfc_configurable_properties: None,
            })
            .collect(),
        scale_status: aspect.map(|a| scale(a.1, a)).into_iter().collect(),
        max_scale_levels: aspect.map(|a| scale(a.2, a)).into_iter().collect(),
        ..InstantiatedVnfInfo::default()
    });
    i
}

// ---------------------------------------------------------------------------------------------
// Alertmanager captures

const AM_VNF: &str = "4a4c2d44-8a52-4895-9a75-9d1c76c3e738";
const AM_CAMEL: &str = "9b0e2f5c-3d1a-4c6e-8f7a-1b2c3d4e5f60";
const AM_API: &str = "c0ffee00-1111-4222-8333-444455556666";

fn am_store(camel_level: u32) -> BTreeMap<VnfInstanceId, VnfInstance> {
    [
        instance(
            AM_VNF,
            &[
                "VDU1-5fa1a4c6-0b1e-4b1f-9e4c-6f3d0c7e8a11",
                "VDU2-0d6a3f0e-7c2b-4d35-8f61-2b9e1a4c5d77",
            ],
            Some(("VDU1_aspect", 0, 2)),
        ),
        instance(
            AM_CAMEL,
            &["VDU1-7e3c2a10-4f5b-4a6d-9c8e-0a1b2c3d4e5f"],
            Some(("VDU1_aspect", camel_level, 2)),
        ),
        instance(
            AM_API,
            &[
                "VDU1-aaaaaaaa-0000-0000-0000-000000000001",
                "VDU2-aaaaaaaa-0000-0000-0000-000000000002",
            ],
            None,
        ),
        instance("11111111-2222-3333-4444-555555555555", &["VDU1-0"], None),
        instance("timed-1", &["VDU1-timed"], None),
    ]
    .into_iter()
    .map(|i| (i.id.clone(), i))
    .collect()
}

/// Each capture with the outcome of each of its alerts, posted alone to a fresh handler.
fn am_expected() -> BTreeMap<&'static str, Vec<String>> {
    let heal = |i: &str, v: &str| format!("heal {i} {v}");
    let f = |s: &str| s.to_owned();
    BTreeMap::from([
        (
            "api_heal_firing_camelcase",
            vec![heal(AM_CAMEL, "VDU1-7e3c2a10-4f5b-4a6d-9c8e-0a1b2c3d4e5f")],
        ),
        (
            "api_heal_firing_grouped_2",
            vec![
                heal(AM_API, "VDU1-aaaaaaaa-0000-0000-0000-000000000001"),
                heal(AM_API, "VDU2-aaaaaaaa-0000-0000-0000-000000000002"),
            ],
        ),
        (
            // top-level `firing`, but the first alert resolved: each alert's own status counts
            "api_heal_partial_resolved",
            vec![
                f("ignore resolved"),
                heal(AM_API, "VDU2-aaaaaaaa-0000-0000-0000-000000000002"),
            ],
        ),
        ("api_heal_resolved_camelcase", vec![f("ignore resolved")]),
        (
            "api_heal_truncated_max_alerts_1",
            vec![heal("11111111-2222-3333-4444-555555555555", "VDU1-0")],
        ),
        (
            "api_scale_in_firing_camelcase",
            vec![format!("scale {AM_CAMEL} VDU1_aspect SCALE_IN")],
        ),
        // posted to /alert/unrouted: judged as if posted to either endpoint
        ("api_unrouted_firing", vec![f("ignore receiver_type")]),
        (
            "prom_heal_firing",
            vec![heal(AM_VNF, "VDU1-5fa1a4c6-0b1e-4b1f-9e4c-6f3d0c7e8a11")],
        ),
        (
            "prom_heal_firing_grouped_2",
            vec![
                heal(AM_VNF, "VDU1-5fa1a4c6-0b1e-4b1f-9e4c-6f3d0c7e8a11"),
                heal(AM_VNF, "VDU2-0d6a3f0e-7c2b-4d35-8f61-2b9e1a4c5d77"),
            ],
        ),
        ("prom_heal_resolved_expr_false", vec![f("ignore resolved")]),
        (
            "prom_heal_resolved_grouped_2",
            vec![f("ignore resolved"), f("ignore resolved")],
        ),
        (
            "prom_scale_out_firing",
            vec![format!("scale {AM_VNF} VDU1_aspect SCALE_OUT")],
        ),
        ("prom_scale_out_resolved", vec![f("ignore resolved")]),
    ])
}

/// The body bytes and the endpoint of a capture (None for a path that is not an endpoint),
/// after checking the headers describe that body as Alertmanager sent it.
fn am_capture(name: &str) -> Option<(Vec<u8>, Option<Endpoint>)> {
    let body = read_vector(M, &format!("alertmanager/{name}.body.json"))?;
    let headers: Value = serde_json::from_str(&read_vector(
        M,
        &format!("alertmanager/{name}.headers.json"),
    )?)
    .unwrap();
    assert_eq!(headers["method"], "POST", "{name}");
    let header = |h: &str| {
        headers["headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p[0] == h)
            .map(|p| p[1].as_str().unwrap().to_owned())
    };
    assert_eq!(
        header("Content-Type").as_deref(),
        Some("application/json"),
        "{name}"
    );
    assert_eq!(
        header("User-Agent").as_deref(),
        Some("Alertmanager/0.25.0"),
        "{name}"
    );
    assert_eq!(
        header("Content-Length").unwrap(),
        body.len().to_string(),
        "{name}: the body file holds the exact bytes"
    );
    let path = headers["path"].as_str().unwrap();
    Some((body.into_bytes(), Endpoint::from_path(path)))
}

#[test]
fn every_alertmanager_capture_has_its_decision() {
    let Some(dir) = shared_vectors(M, "alertmanager captures") else {
        return;
    };
    let names: BTreeSet<String> = std::fs::read_dir(dir.join("alertmanager"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".body.json").map(str::to_owned)
        })
        .collect();
    let expected = am_expected();
    assert_eq!(
        names,
        expected
            .keys()
            .map(|k| (*k).to_owned())
            .collect::<BTreeSet<_>>(),
        "every capture needs an expectation"
    );
    let store = am_store(1);
    for (name, want) in &expected {
        let (body, endpoint) = am_capture(name).unwrap();
        let webhook = Webhook::from_slice(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(webhook.version.as_deref(), Some("4"), "{name}");
        assert!(
            webhook.group_key.is_some() && webhook.receiver.is_some(),
            "{name}"
        );
        // a re-serialized body reads back the same
        assert_eq!(
            Webhook::from_slice(&webhook.to_vec().unwrap()).unwrap(),
            webhook,
            "{name}"
        );
        for a in &webhook.alerts {
            assert_eq!(
                a.ends_at.is_none(),
                a.is_firing(),
                "{name}: endsAt of a firing alert"
            );
            assert_eq!(a.fingerprint.len(), 16, "{name}");
        }
        let endpoints = match endpoint {
            Some(e) => vec![e],
            None => vec![Endpoint::AutoHealing, Endpoint::AutoScaling],
        };
        for e in endpoints {
            let mut h = AlertHandler::new(all_on());
            let got: Vec<String> = h
                .handle_webhook(e, &body, &store, t0())
                .unwrap_or_else(|p| panic!("{name}: {p}"))
                .iter()
                .map(describe)
                .collect();
            assert_eq!(&got, want, "{name} on {}", e.path());
        }
    }
}

#[test]
fn alertmanager_captures_in_sequence_batch_dedupe_and_cool_down() {
    let Some((grouped, _)) = am_capture("api_heal_firing_grouped_2") else {
        return;
    };
    let store = am_store(0);
    let mut h = AlertHandler::new(all_on());
    let run = |h: &mut AlertHandler, name: &str, at: DateTime<Utc>| -> Vec<String> {
        let (body, e) = am_capture(name).unwrap();
        h.handle_webhook(e.unwrap(), &body, &store, at)
            .unwrap()
            .iter()
            .map(describe)
            .collect()
    };

    // API-injected pair, then the re-POST that resolves the first: one heal of both
    assert_eq!(
        h.handle_webhook(Endpoint::AutoHealing, &grouped, &store, t0())
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        run(&mut h, "api_heal_partial_resolved", t0() + secs(2)),
        ["ignore resolved", "ignore duplicate"]
    );
    assert!(h.poll_due(t0() + secs(19)).is_empty());
    let jobs = h.poll_due(t0() + secs(20));
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].instance.as_str(), AM_API);
    assert_eq!(jobs[0].request().vnfc_instance_id.len(), 2);
    h.mark_idle(&jobs[0].instance);

    // Prometheus: one VNFC down, then a second joins the group 9 s later
    let t1 = t0() + secs(60);
    assert_eq!(run(&mut h, "prom_heal_firing", t1).len(), 1);
    assert_eq!(
        run(&mut h, "prom_heal_firing_grouped_2", t1 + secs(9)),
        [
            "ignore duplicate".to_owned(),
            format!("heal {AM_VNF} VDU2-0d6a3f0e-7c2b-4d35-8f61-2b9e1a4c5d77")
        ]
    );
    assert_eq!(
        h.poll_timeout(),
        Some(t1 + secs(20)),
        "the window is fixed by its first alert"
    );
    let jobs = h.poll_due(t1 + secs(20));
    assert_eq!(
        jobs[0].vnfcs,
        [
            "VDU1-5fa1a4c6-0b1e-4b1f-9e4c-6f3d0c7e8a11",
            "VDU2-0d6a3f0e-7c2b-4d35-8f61-2b9e1a4c5d77"
        ]
    );
    // the scale alert arrives while the heal runs: not started in parallel
    assert_eq!(
        run(&mut h, "prom_scale_out_firing", t1 + secs(21)),
        ["ignore operation_in_progress"]
    );
    h.mark_idle(&jobs[0].instance);
    // the resolve forgets both occurrences
    let before = h.heal_batcher().remembered();
    assert_eq!(
        run(&mut h, "prom_heal_resolved_grouped_2", t1 + secs(22)),
        ["ignore resolved", "ignore resolved"]
    );
    assert_eq!(h.heal_batcher().remembered(), before - 2);
    // Alertmanager's next re-send of the scale alert: scaled once, then cooled down
    assert_eq!(
        run(&mut h, "prom_scale_out_firing", t1 + secs(23)),
        [format!("scale {AM_VNF} VDU1_aspect SCALE_OUT")]
    );
    h.mark_idle(&VnfInstanceId::new(AM_VNF));
    assert_eq!(
        run(&mut h, "prom_scale_out_firing", t1 + secs(24)),
        ["ignore cooldown"]
    );
    // SCALE_IN of an aspect at level 0
    assert_eq!(
        run(&mut h, "api_scale_in_firing_camelcase", t1 + secs(25)),
        ["ignore min_scale_level"]
    );
    // the truncated request: 2 alerts were cut, the one sent is acted on
    let (body, _) = am_capture("api_heal_truncated_max_alerts_1").unwrap();
    assert_eq!(Webhook::from_slice(&body).unwrap().truncated_alerts, 2);
}

// ---------------------------------------------------------------------------------------------
// Tacker's scenarios

fn tacker_json(rel: &str) -> Option<Value> {
    Some(serde_json::from_str(&read_vector(M, &format!("tacker/prometheus/{rel}"))?).unwrap())
}

enum Expect {
    /// The endpoint answers this ProblemDetails.
    Problem(u16, &'static str),
    /// Outcome per alert.
    Outcomes(&'static [&'static str]),
    /// No payload in the case (a Tacker-internal test).
    NoPayload,
}

/// Tacker's `alert_cases.json` endpoint scenarios mapped to vnfm's outcome.
fn tacker_expected(name: &str) -> Expect {
    use Expect::*;
    match name {
        "auto_healing_config_false" => Problem(404, "Auto healing API is not enabled."),
        "auto_healing_no_autoheal_enabled" => Outcomes(&["ignore autoheal_disabled"]),
        "auto_healing_is_autoheal_enabled" => Outcomes(&["heal vnf instance id vnfc info id"]),
        "auto_healing_multiple_continue" => Outcomes(&[
            "ignore resolved",
            "ignore function_type",
            "ignore unknown_vnfc",
        ]),
        "auto_healing_not_instantiated" => Outcomes(&["ignore not_instantiated"]),
        "auto_healing_instance_not_found (code path)" => Outcomes(&["ignore instance_not_found"]),
        "auto_healing_constructor_stub (common test)" => NoPayload,
        "auto_scaling_config_false" => Problem(404, "Auto scaling API is not enabled."),
        "auto_scaling_no_autoscale_enabled" => {
            Outcomes(&["ignore autoscale_disabled", "ignore function_type"])
        }
        "auto_scaling_is_autoscale_enabled" | "auto_scaling_set_callback_none" => Outcomes(&[
            "scale vnf instance id aspect SCALE_OUT",
            "ignore function_type",
        ]),
        // Tacker: 204, schema error swallowed; vnfm: 400 (module docs, difference 1)
        "auto_scaling_error_body" => Problem(
            400,
            "alerts: missing mandatory attribute `alerts`; expected an array of alerts",
        ),
        "auto_scaling_multiple_continue" => Outcomes(&[
            "ignore resolved",
            "ignore function_type",
            "ignore unknown_aspect",
        ]),
        "auto_scaling_not_instantiated" => {
            Outcomes(&["ignore not_instantiated", "ignore function_type"])
        }
        other => panic!("alert_cases.json has a new case {other:?}: give it an expectation"),
    }
}

#[test]
fn tacker_endpoint_cases() {
    let (Some(cases), Some(bodies), Some(insts)) = (
        tacker_json("alert_cases.json"),
        tacker_json("unit_alert_bodies.json"),
        tacker_json("unit_vnf_instances.json"),
    ) else {
        return;
    };
    let mut checked = 0;
    for (section, endpoint) in [
        ("auto_healing", Endpoint::AutoHealing),
        ("auto_scaling", Endpoint::AutoScaling),
    ] {
        for case in cases[section].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let expect = tacker_expected(name);
            let Some(body) = case.get("body").and_then(Value::as_str) else {
                assert!(matches!(expect, Expect::NoPayload), "{name}");
                continue;
            };
            let mut config = PrometheusPluginConfig::default();
            for (k, v) in case["config"].as_object().unwrap() {
                match k.as_str() {
                    "auto_healing" => config.auto_healing = v.as_bool().unwrap(),
                    "auto_scaling" => config.auto_scaling = v.as_bool().unwrap(),
                    other => panic!("{name}: config {other}"),
                }
            }
            // Tacker's tests mock the instance lookup: whatever the id, this instance
            let inst: Option<VnfInstance> = case
                .get("instance")
                .and_then(Value::as_str)
                .map(|k| serde_json::from_value(insts[k].clone()).unwrap());
            let lookup = move |_: &VnfInstanceId| inst.clone();
            let bytes = serde_json::to_vec(&bodies[body]).unwrap();
            let mut h = AlertHandler::new(config);
            let got = h.handle_webhook(endpoint, &bytes, &lookup, t0());
            match expect {
                Expect::Problem(status, detail) => {
                    let p = got.unwrap_err();
                    assert_eq!((p.status, p.detail.as_str()), (status, detail), "{name}");
                    // Tacker answers 204 where vnfm answers 400 (module docs, difference 1)
                    let tacker = if status == 404 { 404 } else { 204 };
                    assert_eq!(case["expect_status"], tacker, "{name}");
                }
                Expect::Outcomes(want) => {
                    assert_eq!(case["expect_status"], 204, "{name}");
                    let got: Vec<String> = got
                        .unwrap_or_else(|p| panic!("{name}: {p}"))
                        .iter()
                        .map(describe)
                        .collect();
                    assert_eq!(got, want, "{name}");
                }
                Expect::NoPayload => panic!("{name} has a body"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 13);
}

#[test]
fn tacker_heal_fires_after_the_timer_and_not_instantiated_cancels_it() {
    let (Some(bodies), Some(insts)) = (
        tacker_json("unit_alert_bodies.json"),
        tacker_json("unit_vnf_instances.json"),
    ) else {
        return;
    };
    let inst = |k: &str| -> VnfInstance { serde_json::from_value(insts[k].clone()).unwrap() };
    let heal = serde_json::to_vec(&bodies["_body_heal"]).unwrap();
    let enabled = inst("_inst5");
    let mut h = AlertHandler::new(all_on());
    h.handle_webhook(
        Endpoint::AutoHealing,
        &heal,
        &|_: &VnfInstanceId| Some(enabled.clone()),
        t0(),
    )
    .unwrap();
    let jobs = h.poll_due(t0() + secs(20));
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].instance.as_str(), "vnf instance id");
    let req = serde_json::to_value(jobs[0].request()).unwrap();
    assert_eq!(req["vnfcInstanceId"], json!(["vnfc info id"]));
    assert!(jobs[0].options().automatic);

    // enqueue, then the instance is found NOT_INSTANTIATED: the pending heal is dropped
    let mut h = AlertHandler::new(all_on());
    let mut second = bodies["_body_heal"].clone();
    second["alerts"][0]["fingerprint"] = json!("another");
    h.handle_webhook(
        Endpoint::AutoHealing,
        &heal,
        &|_: &VnfInstanceId| Some(enabled.clone()),
        t0(),
    )
    .unwrap();
    let gone = inst("_inst1");
    let out = h
        .handle_webhook(
            Endpoint::AutoHealing,
            &serde_json::to_vec(&second).unwrap(),
            &|_: &VnfInstanceId| Some(gone.clone()),
            t0() + secs(1),
        )
        .unwrap();
    assert_eq!(describe(&out[0]), "ignore not_instantiated");
    assert!(h.poll_due(t0() + secs(60)).is_empty());
}

#[test]
fn tacker_heal_aggregation_cases() {
    let Some(cases) = tacker_json("alert_cases.json") else {
        return;
    };
    let id = VnfInstanceId::new("test_id");
    let mut n = 0;
    for case in cases["heal_aggregation"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let key = |fp: &str| vnfm_core::alert::AlertKey {
            fingerprint: fp.into(),
            starts_at: t0(),
        };
        match name {
            "conductor_vnfm_auto_heal_queue" => {
                let window = case["config"]["timer_interval"].as_i64().unwrap();
                let mut b = HealBatcher::new(window as u64, 3600, 100);
                let want: Vec<String> =
                    serde_json::from_value(case["expect"]["queue['test_id']"].clone()).unwrap();
                for v in &want {
                    b.handle_alert(&id, v, &key(v), t0());
                }
                assert_eq!(b.pending(&id).unwrap().vnfcs, want, "{name}");
                let jobs = b.poll_due(t0() + secs(window));
                assert_eq!(jobs[0].vnfcs, want, "{name}");
                assert!(b.pending(&id).is_none(), "{name}: no timer left");
                assert!(
                    b.cancel(&VnfInstanceId::new("invalid_id")).is_none(),
                    "{name}"
                );
            }
            "timer" | "timer_cancel" => {
                let window = case["timer_seconds"].as_i64().unwrap();
                let adds: Vec<String> = serde_json::from_value(case["adds"].clone()).unwrap();
                let mut b = HealBatcher::new(window as u64, 3600, 100);
                for v in &adds {
                    b.handle_alert(&id, v, &key(v), t0());
                }
                if case["cancel"] == true {
                    b.cancel(&id);
                }
                let jobs = b.poll_due(t0() + secs(2));
                match case["expect_after_2s"].get("handler_called_with") {
                    Some(w) => assert_eq!(json!(jobs[0].vnfcs), w[1], "{name}"),
                    None => assert!(jobs.is_empty(), "{name}"),
                }
            }
            "timer_destructor" => {
                // cancel / expire / add after cancel are no-ops, never an error
                let mut b = HealBatcher::new(1, 3600, 100);
                assert!(b.cancel(&id).is_none());
                assert!(b.poll_due(t0() + secs(5)).is_empty());
                b.handle_alert(&id, "4", &key("4"), t0());
                assert!(b.cancel(&id).is_some());
                assert!(b.poll_due(t0() + secs(5)).is_empty());
            }
            "timer_expired_triggers_heal" => {
                let mut b = HealBatcher::new(1, 3600, 100);
                b.handle_alert(&id, "a", &key("a"), t0());
                let job = &b.poll_due(t0() + secs(1))[0];
                assert_eq!(job.request().vnfc_instance_id, ["a"]);
                assert!(job.options().automatic);
            }
            "trigger_scale" => {
                let req = &case["scale_req"];
                let mut c = ScaleCooldown::new(300);
                let job = c
                    .admit(
                        &id,
                        req["aspectId"].as_str().unwrap(),
                        ScaleType::ScaleOut,
                        t0(),
                    )
                    .unwrap();
                let mut got = serde_json::to_value(&job.request).unwrap();
                assert_eq!(
                    got.as_object_mut().unwrap().remove("numberOfSteps"),
                    Some(json!(1))
                );
                assert_eq!(&got, req, "{name}: at once, no aggregation");
            }
            other => panic!("new heal_aggregation case {other:?}"),
        }
        n += 1;
    }
    assert_eq!(n, 6);
}

#[test]
fn tacker_functional_payloads() {
    let (Some(heal), Some(scale)) = (
        read_vector(M, "tacker/prometheus/functional/auto_healing_alert.json"),
        read_vector(M, "tacker/prometheus/functional/auto_scaling_alert.json"),
    ) else {
        return;
    };
    let inst_id = "8f7e6d5c-0000-4000-8000-000000000001";
    let vnfcs = ["VDU1-11111111", "VDU2-22222222"];
    let store: BTreeMap<_, _> = [instance(inst_id, &vnfcs, Some(("VDU1_scale", 0, 2)))]
        .into_iter()
        .map(|i| (i.id.clone(), i))
        .collect();
    let fill = |text: &str, vnfc: &str| {
        text.replace("{{inst_id}}", inst_id)
            .replace("{{vnfc_info_id}}", vnfc)
            .into_bytes()
    };
    // two alerts back to back (same fingerprint and startsAt in Tacker's template): ONE heal
    // of both VNFCs
    let mut h = AlertHandler::new(all_on());
    for v in vnfcs {
        let out = h
            .handle_webhook(Endpoint::AutoHealing, &fill(&heal, v), &store, t0())
            .unwrap();
        assert_eq!(describe(&out[0]), format!("heal {inst_id} {v}"));
    }
    let jobs = h.poll_due(t0() + secs(20));
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].vnfcs, vnfcs);

    // SCALE_OUT, then the same alert with SCALE_IN: Tacker runs both; vnfm's default cooldown
    // (300 s) ignores the second, and with scale_cooldown = 0 runs it (module docs, 5)
    let scale_in = scale.replace("SCALE_OUT", "SCALE_IN");
    for (cooldown, second) in [(300, "ignore cooldown"), (0, "scale_in")] {
        let mut config = all_on();
        config.scale_cooldown = cooldown;
        let mut h = AlertHandler::new(config);
        let out = h
            .handle_webhook(Endpoint::AutoScaling, &fill(&scale, ""), &store, t0())
            .unwrap();
        assert_eq!(
            describe(&out[0]),
            format!("scale {inst_id} VDU1_scale SCALE_OUT")
        );
        h.mark_idle(&VnfInstanceId::new(inst_id));
        // the scale-out completed: level 1
        let mut after = store.clone();
        let info = after
            .values_mut()
            .next()
            .unwrap()
            .instantiated_vnf_info
            .as_mut()
            .unwrap();
        info.scale_status[0].scale_level = 1;
        let out = h
            .handle_webhook(
                Endpoint::AutoScaling,
                &fill(&scale_in, ""),
                &after,
                t0() + secs(3),
            )
            .unwrap();
        let want = if second == "scale_in" {
            format!("scale {inst_id} VDU1_scale SCALE_IN")
        } else {
            second.to_owned()
        };
        assert_eq!(describe(&out[0]), want, "cooldown {cooldown}");
    }
}

#[test]
fn tacker_api_ref_and_other_function_bodies() {
    let Some(_) = shared_vectors(M, "tacker api_ref bodies") else {
        return;
    };
    let inst_id = "503e635e-dcd8-4fae-9939-279af4c528b1";
    let store: BTreeMap<_, _> = [instance(
        inst_id,
        &["VDU1-85adebfa-d71c-49ab-9d39-d8dd7e393541"],
        Some(("VDU1", 0, 3)),
    )]
    .into_iter()
    .map(|i| (i.id.clone(), i))
    .collect();
    let cases: [(&str, [&str; 2]); 5] = [
        (
            "alert_auto_heal",
            [
                "heal 503e635e-dcd8-4fae-9939-279af4c528b1 VDU1-85adebfa-d71c-49ab-9d39-d8dd7e393541",
                "ignore function_type",
            ],
        ),
        (
            "alert_auto_scale",
            [
                "ignore function_type",
                "scale 503e635e-dcd8-4fae-9939-279af4c528b1 VDU1 SCALE_OUT",
            ],
        ),
        ("alert_fm", ["ignore function_type", "ignore function_type"]),
        ("alert_pm", ["ignore function_type", "ignore function_type"]),
        ("alert_pm_threshold", ["ignore function_type", "ignore function_type"]),
    ];
    for (name, want) in cases {
        let body = read_vector(M, &format!("tacker/prometheus/api_ref/{name}.json")).unwrap();
        let w = Webhook::from_slice(body.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (w.version.as_deref(), w.alerts.len()),
            (None, 1),
            "{name}: minimal body"
        );
        for (e, want) in [Endpoint::AutoHealing, Endpoint::AutoScaling]
            .into_iter()
            .zip(want)
        {
            let mut h = AlertHandler::new(all_on());
            let out = h.handle_webhook(e, body.as_bytes(), &store, t0()).unwrap();
            assert_eq!(describe(&out[0]), want, "{name} on {}", e.path());
        }
    }
    // the FM bodies of the unit tests, and the empty base body
    let bodies = tacker_json("unit_alert_bodies.json").unwrap();
    for name in [
        "_body_fm1",
        "_body_fm2",
        "_body_fm3",
        "_body_fm4",
        "_body_base",
    ] {
        let bytes = serde_json::to_vec(&bodies[name]).unwrap();
        for e in [Endpoint::AutoHealing, Endpoint::AutoScaling] {
            let out = AlertHandler::new(all_on())
                .handle_webhook(e, &bytes, &store, t0())
                .unwrap();
            assert_eq!(out.len(), bodies[name]["alerts"].as_array().unwrap().len());
            for o in &out {
                let d = describe(o);
                assert!(
                    d == "ignore function_type" || d == "ignore resolved",
                    "{name}: {d}"
                );
            }
        }
    }
}

#[test]
fn tacker_doc_alert_rules_and_routes() {
    let (Some(heal_rule), Some(scale_rule), Some(routes)) = (
        tacker_json("doc_examples/alert_rule_auto_heal.json"),
        tacker_json("doc_examples/alert_rule_auto_scale.json"),
        read_vector(M, "tacker/prometheus/doc_examples/alertmanager.yml"),
    ) else {
        return;
    };
    // an alert raised by each documented rule is acted on by its endpoint
    let alert_of = |rule: &Value| Alert {
        status: AlertStatus::Firing,
        labels: serde_json::from_value(rule["groups"][0]["rules"][0]["labels"].clone()).unwrap(),
        annotations: serde_json::Map::new(),
        starts_at: t0(),
        ends_at: None,
        generator_url: String::new(),
        fingerprint: "0000000000000001".into(),
    };
    let store: BTreeMap<_, _> = [
        instance(
            "c44e89ad-6743-4b80-8df8-fe4aa4d83f44",
            &["VDU1-curry-probe-test001-798d577c96-dc5rh"],
            None,
        ),
        instance(
            "fa82d5bf-c6c1-4ece-bf16-9cf9325a171a",
            &[],
            Some(("vdu1_aspect", 0, 1)),
        ),
    ]
    .into_iter()
    .map(|i| (i.id.clone(), i))
    .collect();
    assert_eq!(
        judge(
            &alert_of(&heal_rule),
            Endpoint::AutoHealing,
            &all_on(),
            &store
        ),
        Decision::Heal {
            instance: "c44e89ad-6743-4b80-8df8-fe4aa4d83f44".into(),
            vnfc: "VDU1-curry-probe-test001-798d577c96-dc5rh".into()
        }
    );
    assert_eq!(
        judge(
            &alert_of(&scale_rule),
            Endpoint::AutoScaling,
            &all_on(),
            &store
        ),
        Decision::Scale {
            instance: "fa82d5bf-c6c1-4ece-bf16-9cf9325a171a".into(),
            aspect: "vdu1_aspect".into(),
            type_: ScaleType::ScaleOut
        }
    );
    // the documented Alertmanager routes send each function_type to our endpoint's path
    let doc: serde_yaml::Value = serde_yaml::from_str(&routes).unwrap();
    for e in [Endpoint::AutoHealing, Endpoint::AutoScaling] {
        let route = doc["route"]["routes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|r| {
                r["matchers"][0].as_str().unwrap()
                    == format!("function_type = {}", e.function_type())
            })
            .unwrap();
        let receiver = doc["receivers"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|r| r["name"] == route["receiver"])
            .unwrap();
        let url = receiver["webhook_configs"][0]["url"].as_str().unwrap();
        assert!(url.ends_with(e.path()), "{url}");
    }
}
