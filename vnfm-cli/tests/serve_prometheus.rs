//! `vnfm serve` against the real Prometheus 2.42 and Alertmanager 0.25 of Debian, started by
//! `scripts/prometheus-dev.sh start` (see that script for ports and routing). Runs only when
//! `VNFM_TEST_PROMETHEUS=1`; prints "skipping ..." otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::net::SocketAddr;
use std::path::PathBuf;

use serde_json::json;
use serve_common::*;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn loopback(port: &str) -> SocketAddr {
    format!("127.0.0.1:{port}").parse().unwrap()
}

async fn set_rules(dir: &std::path::Path, prom: SocketAddr, rules: &str) {
    std::fs::write(dir.join("rules.yml"), rules).unwrap();
    let r = request(prom, "POST", "/-/reload", &[], b"").await;
    assert_eq!(
        r.status,
        200,
        "reload: {}",
        String::from_utf8_lossy(&r.body)
    );
}

fn count(ops: &[serde_json::Value], state: &str) -> usize {
    ops.iter().filter(|o| o["operationState"] == state).count()
}

/// The sum of every series of `family` whose labels contain `needle`.
fn sum(text: &str, family: &str, needle: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) && l.contains(needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn am_metrics(am: SocketAddr) -> String {
    String::from_utf8(get(am, "/metrics").await.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_prometheus_and_alertmanager_heal_scale_resolve_and_refuse_bad_credentials() {
    if !vnfm_core::vectors::real_suite_enabled(
        "VNFM_TEST_PROMETHEUS",
        "real-prometheus",
        module_path!(),
        "set VNFM_TEST_PROMETHEUS=1 after scripts/prometheus-dev.sh start",
    ) {
        return;
    }
    let prom_dir = PathBuf::from(env_or(
        "VNFM_PROM_DIR",
        &format!("{}/vnfm-prometheus", env_or("TMPDIR", "/tmp")),
    ));
    let prom = loopback(&env_or("VNFM_PROM_PORT", "19090"));
    let am = loopback(&env_or("VNFM_AM_PORT", "19093"));
    let base = env_or("VNFM_WEBHOOK_BASE", "http://127.0.0.1:19890");
    let listen: SocketAddr = base.trim_start_matches("http://").parse().unwrap();

    let state = tempfile::tempdir().unwrap();
    let mut c = config(state.path(), 2);
    c.server.listen = listen;
    c.prometheus_plugin.plugin.scale_cooldown = 3600;
    let server = start(c).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let before = servers(addr, &id).await;
    let level = scale_level(addr, &id, "VDU1_scale").await;
    let mut names = before.keys();
    let (a, b) = (names.next().unwrap().clone(), names.next().unwrap().clone());

    // 1. A firing heal rule for VNFC `a` and a scale-out rule: one HEAL, one SCALE.
    set_rules(
        &prom_dir,
        prom,
        &[
            "groups:".to_owned(),
            "- name: vnfm".to_owned(),
            "  rules:".to_owned(),
            "  - alert: VnfcDown".to_owned(),
            "    expr: vector(1)".to_owned(),
            format!("    labels: {{receiver_type: tacker, function_type: auto_heal, vnf_instance_id: '{id}', vnfc_info_id: '{a}'}}"),
            "  - alert: VnfHighLoad".to_owned(),
            "    expr: vector(1)".to_owned(),
            format!("    labels: {{receiver_type: tacker, function_type: auto_scale, vnf_instance_id: '{id}', auto_scale_type: SCALE_OUT, aspect_id: VDU1_scale}}"),
        ]
        .join("\n"),
    )
    .await;
    eventually(90, "one HEAL and one SCALE completed", || async {
        let h = ops(addr, &id, "HEAL").await;
        let s = ops(addr, &id, "SCALE").await;
        (count(&h, "COMPLETED") == 1 && count(&s, "COMPLETED") == 1).then_some(())
    })
    .await;
    // Prometheus keeps re-sending the firing alerts to Alertmanager: still one of each. Wait
    // for two such re-sends of both alerts to reach Alertmanager, then until vnfm has answered
    // every webhook request Alertmanager made, and is settled (no window left, no instance
    // busy): whatever it was sent is then fully handled.
    let firing = |t: &str| sum(t, "alertmanager_alerts_received_total", "status=\"firing\"");
    let received0 = firing(&am_metrics(am).await);
    eventually(60, "the firing alerts re-sent to Alertmanager", || async {
        (firing(&am_metrics(am).await) >= received0 + 4.0).then_some(())
    })
    .await;
    eventually(
        60,
        "every webhook request of Alertmanager answered",
        || async {
            let sent = sum(
                &am_metrics(am).await,
                "alertmanager_notification_requests_total",
                "integration=\"webhook\"",
            );
            let answered = sum(
                &metrics(addr).await,
                "vnfm_alert_requests_total",
                "endpoint=",
            );
            (answered >= sent).then_some(())
        },
    )
    .await;
    let m = settled(addr).await;
    for e in ["auto_healing", "auto_scaling"] {
        let series = format!("vnfm_alerts_accepted_total{{endpoint=\"{e}\"}}");
        assert_eq!(metric(&m, &series), 1, "{series}:\n{m}");
    }
    let heals = ops(addr, &id, "HEAL").await;
    assert_eq!(heals.len(), 1, "{heals:?}");
    assert_eq!(heals[0]["isAutomaticInvocation"], true);
    assert_eq!(
        heals[0]["operationParams"]["vnfcInstanceId"],
        json!([a.clone()])
    );
    assert_eq!(ops(addr, &id, "SCALE").await.len(), 1);
    assert_eq!(scale_level(addr, &id, "VDU1_scale").await, level + 1);
    let after = servers(addr, &id).await;
    for (k, v) in &before {
        if *k == a {
            assert_ne!(after[k], *v, "{k} re-created");
        } else {
            assert_eq!(after[k], *v, "{k} untouched");
        }
    }
    assert_eq!(
        after.len(),
        before.len() + 1,
        "one VNFC added by the scale-out"
    );

    // 2. Resolved notifications: no operation.
    set_rules(&prom_dir, prom, "groups: []\n").await;
    eventually(60, "resolved notifications", || async {
        let m = metrics(addr).await;
        (metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_healing\",reason=\"resolved\"}",
        ) >= 1
            && metric(
                &m,
                "vnfm_alerts_ignored_total{endpoint=\"auto_scaling\",reason=\"resolved\"}",
            ) >= 1)
            .then_some(())
    })
    .await;
    assert_eq!(ops(addr, &id, "HEAL").await.len(), 1);
    assert_eq!(ops(addr, &id, "SCALE").await.len(), 1);

    // 3. Missing and wrong credentials: 401, nothing happens, Alertmanager retries.
    let m0 = metrics(addr).await;
    let am0 = am_metrics(am).await;
    let failed0 = sum(
        &am0,
        "alertmanager_notifications_failed_total",
        "integration=\"webhook\"",
    );
    let alerts = json!([
        {"labels": {"alertname": "VnfcDownNoAuth", "receiver_type": "tacker", "function_type": "auto_heal",
            "auth": "none", "vnf_instance_id": id, "vnfc_info_id": b}},
        {"labels": {"alertname": "VnfcDownWrongAuth", "receiver_type": "tacker", "function_type": "auto_heal",
            "auth": "wrong", "vnf_instance_id": id, "vnfc_info_id": b}},
        {"labels": {"alertname": "VnfHighLoadWrongAuth", "receiver_type": "tacker", "function_type": "auto_scale",
            "auth": "wrong", "vnf_instance_id": id, "auto_scale_type": "SCALE_OUT", "aspect_id": "VDU2_scale"}}
    ]);
    let r = post_json(am, "/api/v2/alerts", &alerts).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let heal401 = "vnfm_alert_requests_total{endpoint=\"auto_healing\",code=\"401\"}";
    let scale401 = "vnfm_alert_requests_total{endpoint=\"auto_scaling\",code=\"401\"}";
    eventually(60, "refused deliveries retried", || async {
        let m = metrics(addr).await;
        (metric(&m, heal401) >= metric(&m0, heal401) + 4
            && metric(&m, scale401) >= metric(&m0, scale401) + 2)
            .then_some(())
    })
    .await;
    let am1 = am_metrics(am).await;
    let failed1 = sum(
        &am1,
        "alertmanager_notifications_failed_total",
        "integration=\"webhook\"",
    );
    assert!(
        failed1 >= failed0 + 3.0,
        "alertmanager failures {failed0} -> {failed1}"
    );
    let m = metrics(addr).await;
    for e in ["auto_healing", "auto_scaling"] {
        let series = format!("vnfm_alerts_received_total{{endpoint=\"{e}\"}}");
        assert_eq!(metric(&m, &series), metric(&m0, &series), "{series}");
    }
    assert_eq!(ops(addr, &id, "HEAL").await.len(), 1);
    assert_eq!(ops(addr, &id, "SCALE").await.len(), 1);
    // Resolve the injected alerts so that Alertmanager stops retrying.
    let now = chrono::Utc::now().to_rfc3339();
    let resolved: Vec<serde_json::Value> = alerts
        .as_array()
        .unwrap()
        .iter()
        .map(|a| json!({"labels": a["labels"], "endsAt": now}))
        .collect();
    post_json(am, "/api/v2/alerts", &json!(resolved)).await;
    server.shutdown().await.unwrap();
}
