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
pub(crate) async fn run(app: Arc<App>, mut stopped: watch::Receiver<bool>) {
    let every = app.lcm.config().lease_time;
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            () = tokio::time::sleep(every) => {}
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
            Err(e) => tracing::warn!("cannot sweep for operations whose owner went away: {e}"),
        }
    }
}
