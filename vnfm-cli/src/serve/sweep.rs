//! Leases watched while the server runs: every lease time, the occurrences whose owner went
//! away (their lease expired: a killed command, another server stopped) are declared
//! interrupted by the core ([`vnfm_core::lifecycle::Lifecycle::take_over_expired`]:
//! `FAILED_TEMP` with `failureKind: INTERRUPTED`, or `ROLLED_BACK` from `STARTING`), one
//! conditional commit each, so two servers never take the same one. Their instances stay busy
//! until an operator retries, rolls back or fails them, and their subscribers are notified, as
//! for any commit of this server.

use std::sync::Arc;

use tokio::sync::watch;

use super::state::App;

/// Sweeps every `[state] lease_seconds` until the server stops. The pace is real time (a
/// timer of the runtime), while expiry is judged on the server's clock: sleeping on the
/// lifecycle's clock would move a test's virtual clock forward by itself.
///
/// After a sweep that could not read the store (the database down), the next one is skipped:
/// while the database was down no owner could renew its lease, and an owner that is alive
/// renews it within a second of the database's return (the core tries its failed commits
/// again), so it is given a whole lease time before its occurrences count as abandoned.
pub(crate) async fn run(app: Arc<App>, mut stopped: watch::Receiver<bool>) {
    let every = app.lcm.config().lease_time;
    let mut store_failed = false;
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            () = tokio::time::sleep(every) => {}
        }
        if std::mem::take(&mut store_failed) {
            // Still down? (A missing instance is the answer of a store that works.)
            let probe = vnfm_core::id::VnfInstanceId::from("vnfm-sweep-probe");
            if let Err(e) = app.lcm.drivers().store.instance(&probe).await {
                store_failed = e.is_retryable();
            }
            continue;
        }
        match app.lcm.take_over_expired().await {
            Ok(ids) => {
                for id in ids {
                    // The commit's own line (`observe`) carries the instance id too.
                    if !app.quiet {
                        tracing::info!(
                            operation_id = id.as_str(),
                            "operation {id} declared interrupted: its owner's lease expired"
                        );
                    }
                }
            }
            Err(e) => {
                store_failed = true;
                tracing::warn!("cannot sweep for operations whose owner went away: {e}");
            }
        }
    }
}
