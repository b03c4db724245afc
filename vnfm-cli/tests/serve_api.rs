//! `vnfm serve` over HTTP, in process on 127.0.0.1:0 over a temporary state file: the LCM API,
//! the alert endpoints' status codes and ProblemDetails, and auto-heal / auto-scale end to end
//! on the simulated cloud.

// a test crate: helpers outside `#[test]` fns fail by panicking too
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use serde_json::{json, Value};
use serve_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lcm_api_create_instantiate_patch_terminate_delete() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}")).await;
    assert_eq!(inst.status, 200);
    assert_eq!(inst.header("content-type"), Some("application/json"));
    let inst = inst.json();
    assert_eq!(inst["instantiationState"], "INSTANTIATED");
    assert_eq!(inst["vnfConfigurableProperties"]["isAutohealEnabled"], true);
    assert_eq!(
        inst["_links"]["self"]["href"],
        format!("/vnflcm/v2/vnf_instances/{id}")
    );
    let list = get(addr, "/vnflcm/v2/vnf_instances").await.json();
    assert_eq!(list.as_array().unwrap().len(), 1);

    // 409: already instantiated; delete of an instantiated instance.
    let r = post_json(
        addr,
        &format!("/vnflcm/v2/vnf_instances/{id}/instantiate"),
        &json!({"flavourId": "default"}),
    )
    .await;
    assert!(r.problem(409)["detail"]
        .as_str()
        .unwrap()
        .contains("INSTANTIATED"));
    let r = request(
        addr,
        "DELETE",
        &format!("/vnflcm/v2/vnf_instances/{id}"),
        &[],
        b"",
    )
    .await;
    r.problem(409);
    // 404s and 400s.
    get(addr, "/vnflcm/v2/vnf_instances/nope")
        .await
        .problem(404);
    get(addr, "/vnflcm/v2/vnf_lcm_op_occs/nope")
        .await
        .problem(404);
    get(addr, "/nowhere").await.problem(404);
    let r = post_json(addr, "/vnflcm/v2/vnf_instances", &json!({"vnfd": 1})).await;
    assert!(r.problem(400)["detail"]
        .as_str()
        .unwrap()
        .contains("vnfdId"));
    let r = post_json(
        addr,
        "/vnflcm/v2/vnf_instances",
        &json!({"vnfdId": "unknown-vnfd"}),
    )
    .await;
    assert!(r.problem(422)["detail"]
        .as_str()
        .unwrap()
        .contains("unknown-vnfd"));
    let r = request(
        addr,
        "PATCH",
        &format!("/vnflcm/v2/vnf_instances/{id}"),
        &[],
        br#"{"flavourId": "x"}"#,
    )
    .await;
    r.problem(422);
    // A member of the wrong type is 400, naming it; a good PATCH records what changed.
    let patch = |body: &'static [u8]| {
        let path = format!("/vnflcm/v2/vnf_instances/{id}");
        async move { request(addr, "PATCH", &path, &[], body).await }
    };
    let r = patch(br#"{"metadata": [1]}"#).await;
    assert!(r.problem(400)["detail"]
        .as_str()
        .unwrap()
        .contains("VnfInfoModificationRequest.metadata is [1]"));
    let r = patch(br#"{"vnfInstanceName": "edge", "metadata": {"tier": "gold"}}"#).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = get(addr, r.header("location").unwrap()).await.json();
    assert_eq!(op["operation"], "MODIFY_INFO");
    assert_eq!(op["operationState"], "COMPLETED");
    assert_eq!(op["changedInfo"]["metadata"]["tier"], "gold", "{op}");
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    assert_eq!(inst["vnfInstanceName"], "edge");
    assert_eq!(inst["metadata"]["tier"], "gold");

    // Terminate, then delete.
    let r = post_json(
        addr,
        &format!("/vnflcm/v2/vnf_instances/{id}/terminate"),
        &json!({"terminationType": "FORCEFUL"}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = wait_op(addr, r.header("location").unwrap()).await;
    assert_eq!(op["operation"], "TERMINATE");
    assert_eq!(op["operationState"], "COMPLETED");
    let r = request(
        addr,
        "DELETE",
        &format!("/vnflcm/v2/vnf_instances/{id}"),
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 204);
    get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .problem(404);
    let m = metrics(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_lcm_operations_total{operation=\"INSTANTIATE\",state=\"COMPLETED\"}"
        ),
        1,
        "{m}"
    );
    // states entered, not commits: the instantiate saves its progress while PROCESSING
    assert_eq!(
        metric(
            &m,
            "vnfm_lcm_operations_total{operation=\"INSTANTIATE\",state=\"PROCESSING\"}"
        ),
        1,
        "{m}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_endpoints_answer_204_400_401_404_413_with_problem_details() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.server.body_limit = 4096;
    let server = start(c).await;
    let addr = server.local_addr();
    let body = webhook(&[heal_alert(
        "no-such-instance",
        "VDU1-0",
        "f0",
        "firing",
        false,
    )]);
    // 401: none, wrong, the other endpoint's scheme is fine (either credential is accepted).
    let r = post_alert(addr, "auto_healing", None, &body).await;
    r.problem(401);
    assert!(r.header("www-authenticate").is_some());
    post_alert(addr, "auto_healing", Some("Basic dm5mbTp3cm9uZw=="), &body)
        .await
        .problem(401);
    post_alert(addr, "auto_scaling", Some("Bearer wrong"), &body)
        .await
        .problem(401);
    // 400: not a webhook.
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), b"{\"alerts\": 3}").await;
    r.problem(400);
    post_alert(addr, "auto_healing", Some(BASIC_HEADER), b"not json")
        .await
        .problem(400);
    // 413: too large.
    let big = webhook(
        &(0..40)
            .map(|i| heal_alert("x", "VDU1-0", &format!("f{i}"), "firing", false))
            .collect::<Vec<_>>(),
    );
    assert!(big.len() > 4096);
    post_alert(addr, "auto_healing", Some(BASIC_HEADER), &big)
        .await
        .problem(413);
    // 204: a valid webhook, its alert ignored (unknown instance) and counted.
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let r = post_alert(
        addr,
        "auto_scaling",
        Some(&format!("Bearer {BEARER}")),
        &webhook(&[]),
    )
    .await;
    assert_eq!(r.status, 204);
    let m = metrics(addr).await;
    for (series, n) in [
        ("vnfm_alerts_received_total{endpoint=\"auto_healing\"}", 1),
        (
            "vnfm_alerts_ignored_total{endpoint=\"auto_healing\",reason=\"instance_not_found\"}",
            1,
        ),
        (
            "vnfm_alert_requests_total{endpoint=\"auto_healing\",code=\"401\"}",
            2,
        ),
        (
            "vnfm_alert_requests_total{endpoint=\"auto_healing\",code=\"400\"}",
            2,
        ),
        (
            "vnfm_alert_requests_total{endpoint=\"auto_healing\",code=\"413\"}",
            1,
        ),
        (
            "vnfm_alert_requests_total{endpoint=\"auto_healing\",code=\"204\"}",
            1,
        ),
        (
            "vnfm_alert_requests_total{endpoint=\"auto_scaling\",code=\"204\"}",
            1,
        ),
    ] {
        assert_eq!(metric(&m, series), n, "{series} in\n{m}");
    }
    server.shutdown().await.unwrap();

    // 404 when the endpoints are off (the default), before any credential check.
    let mut c = config(dir.path(), 1);
    c.prometheus_plugin.plugin.auto_healing = false;
    c.prometheus_plugin.plugin.auto_scaling = false;
    let server = start(c).await;
    let addr = server.local_addr();
    let p = post_alert(addr, "auto_healing", None, &body)
        .await
        .problem(404);
    assert_eq!(p["detail"], "Auto healing API is not enabled.");
    let p = post_alert(addr, "auto_scaling", None, &body)
        .await
        .problem(404);
    assert_eq!(p["detail"], "Auto scaling API is not enabled.");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_token_guards_the_lcm_api_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.server.api_token = Some(vnfm_cli::config::Secret::new("api-token"));
    let server = start(c).await;
    let addr = server.local_addr();
    get(addr, "/vnflcm/v2/vnf_instances").await.problem(401);
    let r = request(
        addr,
        "GET",
        "/vnflcm/v2/vnf_instances",
        &[("Authorization", "Bearer api-token")],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(get(addr, "/metrics").await.status, 200);
    server.shutdown().await.unwrap();
}

/// python-tackerclient (through keystoneauth's `admin_token` plugin: `openstack --os-auth-type
/// admin_token --os-endpoint URL --os-token TOKEN vnflcm list`) sends the token as
/// `X-Auth-Token`, with its `Version: 2.0.0` and `Accept: application/json`: that request, as
/// scripts/tackerclient.sh's suite sends it, is admitted; a wrong token is 401 naming both
/// headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_token_is_accepted_as_x_auth_token_as_openstack_clients_send_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.server.api_token = Some(vnfm_cli::config::Secret::new("api-token"));
    let server = start(c).await;
    let addr = server.local_addr();
    let tackerclient = |token: &'static str| {
        [
            ("Accept", "application/json"),
            ("User-Agent", "python-tackerclient"),
            ("Version", "2.0.0"),
            ("X-Auth-Token", token),
        ]
    };
    let r = request(
        addr,
        "GET",
        "/vnflcm/v2/vnf_instances",
        &tackerclient("api-token"),
        b"",
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let p = request(
        addr,
        "GET",
        "/vnflcm/v2/vnf_instances",
        &tackerclient("wrong"),
        b"",
    )
    .await
    .problem(401);
    assert_eq!(
        p["detail"],
        "the LCM API requires Authorization: Bearer <[server] api_token> \
         (or X-Auth-Token: <[server] api_token>)"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heal_alerts_in_one_window_become_one_heal_in_both_label_spellings() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let before = servers(addr, &id).await;
    let vnfcs: Vec<&String> = before.keys().collect();
    assert!(vnfcs.len() >= 3, "{before:?}");
    let (a, b) = (vnfcs[0].clone(), vnfcs[1].clone());
    // snake_case for one VNFC, camelCase for another, then the same alert again.
    let first = webhook(&[heal_alert(&id, &a, "fa", "firing", false)]);
    for body in [
        first.clone(),
        webhook(&[heal_alert(&id, &b, "fb", "firing", true)]),
        first,
    ] {
        let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
        assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    }
    let heal = eventually(20, "one heal", || async {
        let h = ops(addr, &id, "HEAL").await;
        h.first()
            .filter(|o| o["operationState"] == "COMPLETED")
            .cloned()
    })
    .await;
    assert_eq!(heal["isAutomaticInvocation"], true);
    assert_eq!(
        heal["operationParams"]["vnfcInstanceId"],
        json!([a.clone(), b.clone()])
    );
    let after = servers(addr, &id).await;
    for (k, v) in &before {
        if *k == a || *k == b {
            assert_ne!(after[k], *v, "{k} re-created");
        } else {
            assert_eq!(after[k], *v, "{k} untouched");
        }
    }
    // The same alerts again, after the heal: nothing new.
    let r = post_alert(
        addr,
        "auto_healing",
        Some(BASIC_HEADER),
        &webhook(&[heal_alert(&id, &a, "fa", "firing", false)]),
    )
    .await;
    assert_eq!(r.status, 204);
    // Counted before the answer: the repeat is a duplicate and opened no window.
    let m = metrics(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_healing\",reason=\"duplicate\"}"
        ),
        2,
        "{m}"
    );
    assert_eq!(
        metric(&m, "vnfm_alerts_accepted_total{endpoint=\"auto_healing\"}"),
        2,
        "{m}"
    );
    // Settled: no window left and no instance busy, so no heal runs or is about to start.
    let m = settled(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_lcm_operations_total{operation=\"HEAL\",state=\"STARTING\"}"
        ),
        1,
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            "vnfm_alert_actions_not_started_total{endpoint=\"auto_healing\"}"
        ),
        0,
        "{m}"
    );
    assert_eq!(ops(addr, &id, "HEAL").await.len(), 1);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_alert_scales_one_step_then_cooldown_and_max_level() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.prometheus_plugin.plugin.scale_cooldown = 3600;
    let server = start(c).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let level = scale_level(addr, &id, "VDU1_scale").await;
    let bearer = format!("Bearer {BEARER}");
    let r = post_alert(
        addr,
        "auto_scaling",
        Some(&bearer),
        &webhook(&[scale_alert(&id, "VDU1_scale", "SCALE_OUT", "s1")]),
    )
    .await;
    assert_eq!(r.status, 204);
    let op = eventually(20, "one scale", || async {
        ops(addr, &id, "SCALE")
            .await
            .first()
            .filter(|o| o["operationState"] == "COMPLETED")
            .cloned()
    })
    .await;
    assert_eq!(op["isAutomaticInvocation"], true);
    assert_eq!(op["operationParams"]["numberOfSteps"], 1);
    assert_eq!(scale_level(addr, &id, "VDU1_scale").await, level + 1);
    // Within the cooldown: ignored.
    post_alert(
        addr,
        "auto_scaling",
        Some(&bearer),
        &webhook(&[scale_alert(&id, "VDU1_scale", "SCALE_OUT", "s2")]),
    )
    .await;
    // VDU2_scale: max_scale_level 1 in the demo package; once out, the next is beyond it.
    let out2 = webhook(&[scale_alert(&id, "VDU2_scale", "SCALE_OUT", "s3")]);
    post_alert(addr, "auto_scaling", Some(&bearer), &out2).await;
    eventually(20, "VDU2 scaled", || async {
        (scale_level(addr, &id, "VDU2_scale").await == 1).then_some(())
    })
    .await;
    eventually(20, "idle", || async {
        let m = metrics(addr).await;
        (metric(&m, "vnfm_lcm_operations_running") == 0).then_some(())
    })
    .await;
    post_alert(addr, "auto_scaling", Some(&bearer), &out2).await;
    let m = metrics(addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_scaling\",reason=\"cooldown\"}"
        ),
        1,
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_scaling\",reason=\"max_scale_level\"}"
        ),
        1,
        "{m}"
    );
    assert_eq!(ops(addr, &id, "SCALE").await.len(), 2);
    server.shutdown().await.unwrap();
}

/// A basic-auth user without a password (as the flags or environment may give) is refused at
/// start, exit 2, rather than leaving the alert endpoints open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_a_basic_auth_pair_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 3);
    c.prometheus_plugin.bearer_token = None;
    c.prometheus_plugin.basic_auth_password = None;
    let e = vnfm_cli::serve::Server::start(c, true).await.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let text = e.to_string();
    assert!(
        text.contains("--alert-basic-password") && text.contains("open"),
        "{text}"
    );
}

/// An operation of instance `id` in `state`, written to the state file in `dir` by another
/// connection (as a `vnfm` command on the same file, or an earlier run, would leave it).
async fn foreign_op(dir: &std::path::Path, op_id: &str, id: &str, state: &str) {
    use vnfm_core::driver::{Store, StoreBatch};
    use vnfm_core::lcm::{LcmOperationStateType, LcmOperationType, VnfLcmOpOcc};
    let store = vnfm_cli::store::SqliteStore::open(dir.join("state.sqlite")).unwrap();
    let mut op = VnfLcmOpOcc::new(op_id, id, LcmOperationType::Heal, chrono::Utc::now());
    let state: LcmOperationStateType =
        serde_json::from_value(serde_json::Value::String(state.into())).unwrap();
    op.enter(state, chrono::Utc::now());
    store
        .commit(StoreBatch::new().with_op_occ(op))
        .await
        .unwrap();
}

/// An instance with `op_id` left in `state` by an earlier run, a server started over it, and
/// a heal alert for one of its VNFCs whose window (1 s) has closed since: returns the
/// server, the instance and the VNFC.
async fn heal_window_behind(
    dir: &std::path::Path,
    op_id: &str,
    state: &str,
) -> (vnfm_cli::serve::Server, String, String) {
    let server = start(config(dir, 1)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let vnfc = servers(addr, &id).await.into_keys().next().unwrap();
    server.shutdown().await.unwrap();
    foreign_op(dir, op_id, &id, state).await;

    let server = start(config(dir, 1)).await;
    let addr = server.local_addr();
    let body = webhook(&[heal_alert(&id, &vnfc, "fp-behind", "firing", false)]);
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
    assert_eq!(r.status, 204);
    // The window closes, and the dispatcher leaves it waiting for the instance: it did not
    // even try to start its heal.
    let m = metric_reaches(addr, "vnfm_heal_windows_waiting", 1).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alert_actions_not_started_total{endpoint=\"auto_healing\"}"
        ),
        0,
        "{m}"
    );
    assert_eq!(metric(&m, "vnfm_lcm_operations_running"), 0, "{m}");
    assert!(
        ops(addr, &id, "HEAL")
            .await
            .iter()
            .all(|o| o["id"] == op_id),
        "no heal while {op_id} holds the instance"
    );
    (server, id, vnfc)
}

/// A heal window for an instance whose operation stopped in FAILED_TEMP (here one that a
/// restart interrupted) waits until that operation is failed, then runs: it is not dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heal_window_waits_for_a_failed_temp_operation_to_be_failed() {
    let dir = tempfile::tempdir().unwrap();
    // Left PROCESSING by a stop: the next start sets it FAILED_TEMP.
    let (server, id, vnfc) = heal_window_behind(dir.path(), "op-interrupted", "PROCESSING").await;
    let addr = server.local_addr();
    let m = metrics(addr).await;
    assert_eq!(metric(&m, "vnfm_heal_windows_pending"), 1, "{m}");
    // Another operation is refused meanwhile, and says why.
    let r = post_json(
        addr,
        &format!("/vnflcm/v2/vnf_instances/{id}/heal"),
        &serde_json::json!({}),
    )
    .await;
    assert!(
        r.problem(409)["detail"]
            .as_str()
            .unwrap()
            .contains("FAILED_TEMP"),
        "{:?}",
        r.json()
    );

    let r = post_json(
        addr,
        "/vnflcm/v2/vnf_lcm_op_occs/op-interrupted/fail",
        &serde_json::json!({}),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let heal = eventually(20, "the heal after the fail", || async {
        ops(addr, &id, "HEAL")
            .await
            .into_iter()
            .find(|o| o["id"] != "op-interrupted" && o["operationState"] == "COMPLETED")
    })
    .await;
    assert_eq!(heal["isAutomaticInvocation"], true);
    assert_eq!(
        heal["operationParams"]["vnfcInstanceId"],
        serde_json::json!([vnfc])
    );
    server.shutdown().await.unwrap();
}

/// A scale alert whose scale the lifecycle refuses (an operation that another program left
/// FAILED_TEMP on the instance) does not start the cooldown: the next alert tries again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_that_does_not_start_leaves_no_cooldown() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.prometheus_plugin.plugin.scale_cooldown = 3600;
    let server = start(c).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    foreign_op(dir.path(), "op-foreign", &id, "FAILED_TEMP").await;
    let bearer = format!("Bearer {BEARER}");
    let mut m = String::new();
    for (n, fp) in [(1, "s1"), (2, "s2")] {
        let r = post_alert(
            addr,
            "auto_scaling",
            Some(&bearer),
            &webhook(&[scale_alert(&id, "VDU1_scale", "SCALE_OUT", fp)]),
        )
        .await;
        assert_eq!(r.status, 204);
        // Counted once the handler has ended the cooldown the refused scale started.
        m = metric_reaches(
            addr,
            "vnfm_alert_actions_not_started_total{endpoint=\"auto_scaling\"}",
            n,
        )
        .await;
    }
    assert_eq!(
        metric(&m, "vnfm_alerts_accepted_total{endpoint=\"auto_scaling\"}"),
        2,
        "both admitted, none ignored for a cooldown: {m}"
    );
    assert_eq!(
        metric(
            &m,
            "vnfm_alerts_ignored_total{endpoint=\"auto_scaling\",reason=\"cooldown\"}"
        ),
        0,
        "{m}"
    );
    assert!(ops(addr, &id, "SCALE").await.is_empty());
    server.shutdown().await.unwrap();
}

/// The same when another program (`vnfm op fail`) fails the occurrence on the state file: the
/// server notices within a second or two, and the waiting heal runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heal_window_waits_for_a_failed_temp_operation_failed_by_another_program() {
    let dir = tempfile::tempdir().unwrap();
    let (server, id, _) = heal_window_behind(dir.path(), "op-stuck", "FAILED_TEMP").await;
    let addr = server.local_addr();
    foreign_op(dir.path(), "op-stuck", &id, "FAILED").await;
    eventually(20, "the heal after the other program's fail", || async {
        ops(addr, &id, "HEAL")
            .await
            .into_iter()
            .find(|o| o["id"] != "op-stuck" && o["operationState"] == "COMPLETED")
    })
    .await;
    server.shutdown().await.unwrap();
}

/// A heal whose start the lifecycle refuses because another program left an occurrence in
/// FAILED_TEMP on the instance while the server ran (the server did not know of it) is not
/// dropped: its window waits for that occurrence to be failed, then runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heal_refused_for_another_programs_operation_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let id = instantiated(addr).await;
    let vnfc = servers(addr, &id).await.into_keys().next().unwrap();
    foreign_op(dir.path(), "op-other", &id, "FAILED_TEMP").await;
    let body = webhook(&[heal_alert(&id, &vnfc, "fp-other", "firing", false)]);
    let r = post_alert(addr, "auto_healing", Some(BASIC_HEADER), &body).await;
    assert_eq!(r.status, 204);
    // The window (1 s) closes, its heal is refused, and the window is back, waiting.
    let m = metric_reaches(
        addr,
        "vnfm_alert_actions_not_started_total{endpoint=\"auto_healing\"}",
        1,
    )
    .await;
    assert_eq!(metric(&m, "vnfm_heal_windows_pending"), 1, "{m}");
    assert_eq!(metric(&m, "vnfm_instances_busy"), 1, "held: {m}");
    assert_eq!(ops(addr, &id, "HEAL").await.len(), 1, "only the other one");
    // The dispatcher sees it closed and leaves it waiting (it tries no second start).
    let m = metric_reaches(addr, "vnfm_heal_windows_waiting", 1).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_alert_actions_not_started_total{endpoint=\"auto_healing\"}"
        ),
        1,
        "{m}"
    );
    foreign_op(dir.path(), "op-other", &id, "FAILED").await;
    let heal = eventually(
        20,
        "the heal once the other operation is failed",
        || async {
            ops(addr, &id, "HEAL")
                .await
                .into_iter()
                .find(|o| o["id"] != "op-other" && o["operationState"] == "COMPLETED")
        },
    )
    .await;
    assert_eq!(
        heal["operationParams"]["vnfcInstanceId"],
        serde_json::json!([vnfc])
    );
    server.shutdown().await.unwrap();
}

/// Creates and instantiates the demo VNF through the LCM API; returns the finished occurrence.
async fn instantiate_op(addr: std::net::SocketAddr) -> serde_json::Value {
    let r = post_json(
        addr,
        "/vnflcm/v2/vnf_instances",
        &serde_json::json!({"vnfdId": serve_common::DEMO_VNFD}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let id = r.json()["id"].as_str().unwrap().to_owned();
    let r = post_json(
        addr,
        &format!("/vnflcm/v2/vnf_instances/{id}/instantiate"),
        &serde_json::json!({"flavourId": "default"}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    wait_op(addr, r.header("location").unwrap()).await
}

/// Issue 10, acceptance 5: `vnfm serve` with nothing configured but its state file, on the
/// built-in demo cloud whose first zone (AZ-1) cannot hold the demo VNF: the capacity-aware
/// granter avoids it, and the instantiate completes at the first attempt (no reselection is
/// configured). With `selection = "random"` the spec's blind choice comes back: some seed
/// grants a VNFC into AZ-1, and that instantiate fails there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaults_instantiate_on_a_cloud_whose_first_zone_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = vnfm_cli::config::Config::default();
    c.state.path = Some(dir.path().join("state.sqlite"));
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    let server = start(c.clone()).await;
    let op = instantiate_op(server.local_addr()).await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    let attempts = op["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{op}");
    assert!(
        attempts[0]["zones"]
            .as_object()
            .unwrap()
            .values()
            .all(|z| z != "AZ-1"),
        "{op}"
    );
    drop(server);

    let mut failed_in_az1 = None;
    for seed in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let mut c = c.clone();
        c.state.path = Some(dir.path().join("state.sqlite"));
        c.placement.selection = Some(vnfm_cli::config::SelectionKind::Random);
        c.placement.seed = seed;
        let server = start(c).await;
        let op = instantiate_op(server.local_addr()).await;
        let zones = op["attempts"][0]["zones"].as_object().unwrap().clone();
        if zones.values().any(|z| z == "AZ-1") {
            assert_eq!(op["operationState"], "FAILED_TEMP", "{op}");
            assert_eq!(op["attempts"][0]["outcome"], "failed", "{op}");
            failed_in_az1 = Some(seed);
            break;
        }
        assert_eq!(op["operationState"], "COMPLETED", "{op}");
    }
    assert!(
        failed_in_az1.is_some(),
        "no seed of the random granter chose AZ-1"
    );
}

/// `POST /intent/v1/selections`: the question of `vnfm select` over HTTP, with the server's
/// simulated zone catalogue as the capacity of the `zones` regions; 400 ProblemDetails naming
/// the field of a bad policy, 422 for an unknown package.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intent_selection_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/intent");
    let policy: Value =
        serde_json::from_str(&std::fs::read_to_string(examples.join("policy-ha.json")).unwrap())
            .unwrap();
    let cands: Value =
        serde_yaml::from_str(&std::fs::read_to_string(examples.join("candidates.yaml")).unwrap())
            .unwrap();
    let vnfd = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d";
    let body = json!({"policy": policy, "candidates": cands, "vnfdId": vnfd,
                      "customer": {"lat": 40.0, "lon": -75.0}});
    let r = post_json(addr, "/intent/v1/selections", &body).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let v = r.json();
    assert_eq!(v["chosen"]["region"], "sim-east", "{v}");
    assert_eq!(v["dropped"][0][0]["region"], "lab-small", "{v}");
    let reasons = v["selections"][0]["dropped"].to_string();
    assert!(reasons.contains("azure-west"), "{reasons}");

    let mut bad = body.clone();
    bad["policy"]["content"]["cloudDeploymentIntentList"][0]["Cloud Type (Cloud Provider)"] =
        json!({"VMware VIO": null});
    let p = post_json(addr, "/intent/v1/selections", &bad)
        .await
        .problem(400);
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("request body: policy"), "{detail}");
    assert!(detail.contains("Cloud Type (Cloud Provider)"), "{detail}");

    // a region backed by a pool of the server's Promise ledger: 3 cores do not hold the VNF's
    // 4 vCPUs, 8 do (the command line's rule, over HTTP)
    for (zone, cores) in [("pool-small", 3), ("pool-big", 8)] {
        let r = post_json(
            addr,
            "/promise/v1/pools",
            &json!({"zone": zone, "capacity": {"cores": cores, "ram": 65536}}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.json());
    }
    let mut pooled = body.clone();
    let region = |id: &str, pool: &str| {
        json!({"id": id, "owner": "lab", "location": {"lat": 40.7, "lon": -74.0}, "hosts": 8,
               "capacity": {"reservation": pool}})
    };
    pooled["candidates"]["regions"] =
        json!([region("small", "pool-small"), region("big", "pool-big")]);
    let v = post_json(addr, "/intent/v1/selections", &pooled)
        .await
        .json();
    assert_eq!(v["chosen"]["region"], "big", "{v}");
    assert_eq!(v["dropped"][0][0]["region"], "small", "{v}");

    let mut unknown = body.clone();
    unknown["vnfdId"] = json!("no-such-vnfd");
    post_json(addr, "/intent/v1/selections", &unknown)
        .await
        .problem(422);
    server.shutdown().await.unwrap();
}
