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
    let instance = VnfInstanceId::from(id.as_str());
    let mut op = other
        .op_occs(OpOccFilter::instance(instance.clone()))
        .await
        .unwrap()
        .pop()
        .unwrap();
    op.id = OpOccId::from("gone-owner-heal");
    op.operation = LcmOperationType::Heal;
    op.operation_state = LcmOperationStateType::Processing;
    op.start_time = Utc::now() - Duration::minutes(11);
    op.state_entered_time = op.start_time;
    op.lease = Some(Lease {
        owner: "vnfm:elsewhere:4242".into(),
        expires: Utc::now() - Duration::minutes(10),
    });
    op.error = None;
    op.progress = None;
    other
        .commit(StoreBatch::new().with_op_occ(op))
        .await
        .unwrap();

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
