//! Leases watched while `vnfm serve` runs (issue 27, "leases watched while running"): an
//! occurrence whose owner went away (its lease expired) is declared interrupted by the
//! server's sweep without a restart and without anyone typing `vnfm op ...`; its instance
//! stays busy until an operator ends the occurrence; the server's own running operations are
//! never taken.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use chrono::{Duration, Utc};
use serde_json::json;
use serve_common::*;
use vnfm_cli::store::SqliteStore;
use vnfm_core::driver::{OpOccFilter, Store, StoreBatch};
use vnfm_core::id::{OpOccId, VnfInstanceId};
use vnfm_core::lcm::{LcmOperationStateType, LcmOperationType, Lease};

/// Stores `op_id`, a copy of the last occurrence of `instance` as `shape` makes it, left
/// `PROCESSING` by another program (a killed command, a replica that died) under a lease that
/// expired ten minutes ago.
async fn left_running(
    store: &SqliteStore,
    instance: &str,
    op_id: &str,
    shape: impl FnOnce(&mut vnfm_core::lcm::VnfLcmOpOcc),
) {
    let mut op = store
        .op_occs(OpOccFilter::instance(VnfInstanceId::from(instance)))
        .await
        .unwrap()
        .pop()
        .unwrap();
    op.id = OpOccId::from(op_id);
    op.operation_state = LcmOperationStateType::Processing;
    op.start_time = Utc::now() - Duration::minutes(11);
    op.state_entered_time = op.start_time;
    op.lease = Some(Lease {
        owner: "vnfm:elsewhere:4242".into(),
        expires: Utc::now() - Duration::minutes(10),
    });
    op.error = None;
    shape(&mut op);
    store
        .commit(StoreBatch::new().with_op_occ(op))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_whose_owner_went_away_is_declared_interrupted_while_the_server_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 60);
    c.state.lease_seconds = Some(1);
    let state = c.state_path();
    let server = start(c).await;
    let addr = server.local_addr();
    let (id, done) = create_and_instantiate(addr, DEMO_VNFD, "default").await;
    assert_eq!(done["operationState"], "COMPLETED", "{done}");

    // Another program (a killed `vnfm heal`, a replica that died) left a heal running on the
    // instance, under a lease that expired ten minutes ago.
    let other = SqliteStore::open(&state).unwrap();
    left_running(&other, &id, "gone-owner-heal", |op| {
        op.operation = LcmOperationType::Heal;
        op.progress = None;
    })
    .await;

    // The sweep (every lease time, 1 s here) takes it over: FAILED_TEMP, INTERRUPTED.
    let path = "/vnflcm/v2/vnf_lcm_op_occs/gone-owner-heal";
    let taken = eventually(20, "the sweep to take the occurrence over", || async {
        let op = get(addr, path).await.json();
        (op["operationState"] == "FAILED_TEMP").then_some(op)
    })
    .await;
    assert_eq!(taken["error"]["failureKind"], "INTERRUPTED", "{taken}");
    assert!(
        taken["error"]["detail"]
            .as_str()
            .unwrap()
            .contains("vnfm:elsewhere:4242"),
        "{taken}"
    );

    // The instance is not free for another operation until the occurrence is ended.
    let heal = format!("/vnflcm/v2/vnf_instances/{id}/heal");
    let r = post_json(addr, &heal, &json!({})).await;
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    let r = post_json(addr, &format!("{path}/fail"), &json!({})).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let r = post_json(addr, &heal, &json!({})).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let healed = wait_op(addr, r.header("location").unwrap()).await;
    // The server's own heal ran its course: sweeps during it left it alone.
    assert_eq!(healed["operationState"], "COMPLETED", "{healed}");
    server.shutdown().await.unwrap();
}

/// `[state] takeover = "resume"`: a terminate whose owner died just after storing it
/// `PROCESSING` is run on by the server's sweep where its progress says (the stack deleted, the
/// instance `NOT_INSTANTIATED`, the occurrence `COMPLETED`), not declared interrupted; one
/// already taken over as often as `resume_limit` allows is interrupted instead, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_takeover_resume_an_operation_whose_owner_went_away_is_run_on() {
    use vnfm_cli::config::TakeoverKind;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 60);
    c.state.lease_seconds = Some(1);
    c.state.takeover = Some(TakeoverKind::Resume);
    c.state.resume_limit = Some(2);
    let state = c.state_path();
    let server = start(c).await;
    let addr = server.local_addr();
    let (id, done) = create_and_instantiate(addr, DEMO_VNFD, "default").await;
    assert_eq!(done["operationState"], "COMPLETED", "{done}");
    let (other, _) = create_and_instantiate(addr, DEMO_VNFD, "default").await;

    // A `vnfm terminate` killed right after it stored its occurrence, on each instance: the
    // second one already resumed twice (the limit) by replicas that died too.
    let store = SqliteStore::open(&state).unwrap();
    for (inst, op_id, takeovers) in [(&id, "gone-terminate", 0), (&other, "gone-again", 2)] {
        left_running(&store, inst, op_id, |op| {
            op.operation = LcmOperationType::Terminate;
            op.operation_params = Some(json!({"terminationType": "FORCEFUL"}));
            op.progress = Some(json!({"plan": {"kind": "terminate"}, "takeovers": takeovers}));
        })
        .await;
    }

    let path = "/vnflcm/v2/vnf_lcm_op_occs/gone-terminate";
    let ended = eventually(30, "the sweep to resume the terminate", || async {
        let op = get(addr, path).await.json();
        let s = op["operationState"].as_str().unwrap_or_default().to_owned();
        (s != "PROCESSING").then_some(op)
    })
    .await;
    assert_eq!(ended["operationState"], "COMPLETED", "{ended}");
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    assert_eq!(inst["instantiationState"], "NOT_INSTANTIATED", "{inst}");

    let path = "/vnflcm/v2/vnf_lcm_op_occs/gone-again";
    let taken = eventually(
        30,
        "the sweep to interrupt the one at its limit",
        || async {
            let op = get(addr, path).await.json();
            (op["operationState"] == "FAILED_TEMP").then_some(op)
        },
    )
    .await;
    assert_eq!(taken["error"]["failureKind"], "INTERRUPTED", "{taken}");
    let detail = taken["error"]["detail"].as_str().unwrap();
    assert!(detail.contains("taken over 2 times"), "{detail}");
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{other}"))
        .await
        .json();
    assert_eq!(inst["instantiationState"], "INSTANTIATED", "{inst}");
    server.shutdown().await.unwrap();
}
