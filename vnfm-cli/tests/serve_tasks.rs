//! The task resources of an operation occurrence over a real socket (SOL003 v3.3.1
//! 5.4.14–5.4.17, issue 16 acceptance 3): cancel of a PROCESSING operation, then retry,
//! rollback or fail of the FAILED_TEMP it leaves; the state rules (409 naming the state), 404
//! for unknown occurrences, 400 for a bad `CancelMode`.
//!
//! The simulated cloud's `stack_create_shows` makes a stack create slow (in progress for that
//! many polls of vnfm's, 2 s apart), so that the instantiate is still waiting for its stack
//! when it is cancelled. Cost: about 15 s (three instances in parallel).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::net::SocketAddr;

use serde_json::{json, Value};
use serve_common::*;

/// Polls of a new stack that see it in progress: the cancel comes during the first wait (a
/// few hundred ms after the stack exists), the retry or rollback then waits out the rest.
const SLOW_SHOWS: u32 = 5;

fn slow_cloud(dir: &std::path::Path) -> std::path::PathBuf {
    let demo = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/clouds/demo.yaml"),
    )
    .unwrap();
    let path = dir.join("slow.yaml");
    std::fs::write(&path, format!("{demo}\nstack_create_shows: {SLOW_SHOWS}\n")).unwrap();
    path
}

async fn create(addr: SocketAddr) -> String {
    let r = post_json(
        addr,
        "/vnflcm/v2/vnf_instances",
        &json!({"vnfdId": DEMO_VNFD}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()["id"].as_str().unwrap().to_owned()
}

/// Starts an instantiate of `id`; returns its occurrence's location once its stack exists
/// (the operation then waits for it).
async fn instantiating(addr: SocketAddr, id: &str) -> String {
    let r = post_json(
        addr,
        &format!("/vnflcm/v2/vnf_instances/{id}/instantiate"),
        &json!({"flavourId": "default"}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let loc = r.header("location").unwrap().to_owned();
    eventually(30, "the stack of the instantiate", || async {
        let op = get(addr, &loc).await.json();
        let state = op["operationState"].as_str().unwrap().to_owned();
        assert!(["STARTING", "PROCESSING"].contains(&state.as_str()), "{op}");
        op["progress"]["stackId"].is_string().then_some(())
    })
    .await;
    loc
}

async fn task(addr: SocketAddr, loc: &str, task: &str, body: &Value) -> Reply {
    post_json(addr, &format!("{loc}/{task}"), body).await
}

/// A 409 whose detail names `state`.
fn conflict(r: &Reply, state: &str) {
    let p = r.problem(409);
    assert!(
        p["detail"].as_str().unwrap().contains(state),
        "409 not naming {state}: {p}"
    );
}

/// Cancels the operation at `loc`; returns it, FAILED_TEMP.
async fn cancelled(addr: SocketAddr, loc: &str, mode: &str) -> Value {
    // Not FAILED_TEMP yet: retry, rollback and fail are refused, naming the state.
    for t in ["retry", "rollback", "fail"] {
        conflict(&task(addr, loc, t, &json!({})).await, "PROCESSING");
    }
    let r = task(addr, loc, "cancel", &json!({ "cancelMode": mode })).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = wait_op(addr, loc).await;
    assert_eq!(op["operationState"], "FAILED_TEMP", "{op}");
    assert_eq!(op["error"]["failureKind"], "INTERRUPTED", "{op}");
    let detail = op["error"]["detail"].as_str().unwrap();
    assert!(detail.contains(&format!("cancelled ({mode})")), "{detail}");
    // FAILED_TEMP does not take a cancel.
    conflict(
        &task(addr, loc, "cancel", &json!({"cancelMode": "GRACEFUL"})).await,
        "FAILED_TEMP",
    );
    op
}

async fn instance(addr: SocketAddr, id: &str) -> Value {
    get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json()
}

/// Cancel, then retry: the operation continues (its stack is updated, not created again: a
/// new create would be slow again) and completes; a COMPLETED occurrence takes no task.
async fn cancel_then_retry(addr: SocketAddr) {
    let id = create(addr).await;
    let loc = instantiating(addr, &id).await;
    cancelled(addr, &loc, "GRACEFUL").await;
    let r = task(addr, &loc, "retry", &json!({})).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("location"), Some(loc.as_str()));
    let op = get(addr, &loc).await.json();
    assert_ne!(
        op["operationState"], "FAILED_TEMP",
        "202 once running again: {op}"
    );
    let op = wait_op(addr, &loc).await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    assert_eq!(
        instance(addr, &id).await["instantiationState"],
        "INSTANTIATED"
    );
    for t in ["retry", "rollback", "fail"] {
        conflict(&task(addr, &loc, t, &json!({})).await, "COMPLETED");
    }
    conflict(
        &task(addr, &loc, "cancel", &json!({"cancelMode": "FORCEFUL"})).await,
        "COMPLETED",
    );
}

/// Cancel, then rollback: the stack is deleted and the instance is NOT_INSTANTIATED again.
async fn cancel_then_rollback(addr: SocketAddr) {
    let id = create(addr).await;
    let loc = instantiating(addr, &id).await;
    cancelled(addr, &loc, "FORCEFUL").await;
    let r = task(addr, &loc, "rollback", &json!({})).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = wait_op(addr, &loc).await;
    assert_eq!(op["operationState"], "ROLLED_BACK", "{op}");
    assert_eq!(
        instance(addr, &id).await["instantiationState"],
        "NOT_INSTANTIATED"
    );
    conflict(&task(addr, &loc, "retry", &json!({})).await, "ROLLED_BACK");
}

/// Cancel, then fail: 200 with the occurrence FAILED; the instance takes the next operation.
async fn cancel_then_fail(addr: SocketAddr) {
    let id = create(addr).await;
    let loc = instantiating(addr, &id).await;
    cancelled(addr, &loc, "GRACEFUL").await;
    let r = task(addr, &loc, "fail", &json!({})).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let op = r.json();
    assert_eq!(op["operationState"], "FAILED", "{op}");
    assert_eq!(op["id"], get(addr, &loc).await.json()["id"]);
    conflict(&task(addr, &loc, "fail", &json!({})).await, "FAILED");
    conflict(&task(addr, &loc, "rollback", &json!({})).await, "FAILED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_processing_operation_and_retry_rollback_fail_end_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.vim.cloud = Some(slow_cloud(dir.path()));
    let server = start(c).await;
    let addr = server.local_addr();
    tokio::join!(
        cancel_then_retry(addr),
        cancel_then_rollback(addr),
        cancel_then_fail(addr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_on_unknown_occurrences_are_404_and_a_bad_cancel_mode_is_400() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(config(dir.path(), 1)).await;
    let addr = server.local_addr();
    for t in ["retry", "rollback", "fail"] {
        let r = task(addr, "/vnflcm/v2/vnf_lcm_op_occs/nope", t, &json!({})).await;
        let p = r.problem(404);
        assert!(p["detail"].as_str().unwrap().contains("nope"), "{p}");
    }
    let r = task(
        addr,
        "/vnflcm/v2/vnf_lcm_op_occs/nope",
        "cancel",
        &json!({"cancelMode": "GRACEFUL"}),
    )
    .await;
    r.problem(404);
    for body in [
        json!({"cancelMode": "SOFTLY"}),
        json!({}),
        json!({"cancelMode": "GRACEFUL", "extra": 1}),
    ] {
        let r = task(addr, "/vnflcm/v2/vnf_lcm_op_occs/nope", "cancel", &body).await;
        let p = r.problem(400);
        assert!(p["detail"].as_str().unwrap().contains("CancelMode"), "{p}");
    }
}
