//! The delivery of the Promise notifications when several replicas share the ledger
//! (PostgreSQL): each ledger change writes its notifications to the durable queue
//! (`promise_outbox:<number>`, in the change's transaction: `super::super::ledger`), and the
//! replica that holds the queue's claim (the row `promise-notifications` of
//! `lcm_delivery_claims`, as a subscription's outbox is claimed: `super::super::notify`)
//! delivers them, each callback's in order and no callback waiting for another, each with
//! the [`ATTEMPTS`](super::ATTEMPTS) of the in-memory queue, and deletes them once delivered
//! or given up. A replica that dies leaves the claim to expire; the next holder sends what
//! is left (a notification on its way at the death comes again). Every replica looks at the
//! queue every `[notifications] poll_interval_ms`, and at once after a change of its own.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use vnfm_core::driver::DriverError;
use vnfm_core::reservation::Notification;

use super::super::ledger::shared::PROMISE_OUTBOX;
use super::super::state::App;
use super::{attempt_all, stopped_signal, ATTEMPTS, DELIVERY_TIMEOUT};
use crate::state_store::Documents;

/// The claim of the Promise queue in `lcm_delivery_claims` (LCM subscriptions are `lccn-<n>`).
const CLAIM: &str = "promise-notifications";

/// Entries delivered in one pass at most.
const BATCH: usize = 256;

/// How long the claim lasts unrenewed: `[notifications] claim_seconds`, and at least twice
/// what one notification's attempts may take.
fn ttl(app: &App) -> Duration {
    let one = DELIVERY_TIMEOUT * ATTEMPTS + Duration::from_secs(2);
    app.config.notifications.claim_ttl().max(one * 2)
}

/// Delivers the durable queue until `stopped`; gives the claim back at the end (started
/// beside [`super::run`] on a shared store).
pub(crate) async fn run(app: Arc<App>, mut stopped: watch::Receiver<bool>) {
    let holder = super::super::notify::holder(&app.replica);
    let every = app.config.notifications.poll_interval();
    let mut failing = false;
    loop {
        let woken = app.promise.wake.notified();
        match pass(&app, &holder, &stopped).await {
            Ok(()) => failing = false,
            Err(e) if !failing => {
                failing = true;
                app.note(&format!("cannot deliver the Promise notifications: {e}"));
            }
            Err(_) => {}
        }
        tokio::select! {
            () = woken => {},
            () = tokio::time::sleep(every) => {},
            () = stopped_signal(&mut stopped) => break,
        }
    }
    if let Err(e) = app.delivery.release_delivery(CLAIM, Some(&holder)).await {
        tracing::warn!(
            "cannot give back the delivery of the Promise notifications (another replica takes \
             it when it expires): {e}"
        );
    }
}

/// One look at the queue: its size (the gauge), and when it has entries and this replica
/// holds or takes the claim, the delivery of up to [`BATCH`] of them.
async fn pass(
    app: &Arc<App>,
    holder: &str,
    stopped: &watch::Receiver<bool>,
) -> Result<(), DriverError> {
    let waiting = app
        .delivery
        .document_sizes_with_prefix(PROMISE_OUTBOX)
        .await?
        .len();
    app.promise.queued.store(waiting as u64, Ordering::Relaxed);
    if waiting == 0 || *stopped.borrow() {
        return Ok(());
    }
    let ttl = ttl(app);
    if !app.delivery.claim_delivery(CLAIM, holder, ttl).await? {
        return Ok(());
    }
    let batch = app
        .delivery
        .documents_after(PROMISE_OUTBOX, None, BATCH)
        .await?;
    // Each callback's notifications in order, one lane per callback.
    let mut lanes: BTreeMap<String, Vec<(String, Notification)>> = BTreeMap::new();
    let mut done = Vec::new();
    for (name, body) in batch {
        match serde_json::from_str::<Notification>(&body) {
            Ok(n) => lanes
                .entry(n.callback_uri.clone().unwrap_or_default())
                .or_default()
                .push((name, n)),
            Err(e) => {
                app.promise.failed.fetch_add(1, Ordering::Relaxed);
                app.note(&format!(
                    "Promise notification {name} is unreadable, dropped: {e}"
                ));
                done.push(name);
            }
        }
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (_, lane) in lanes {
        let app = app.clone();
        tasks.spawn(async move {
            let mut names = Vec::new();
            for (name, n) in lane {
                attempt_all(&app, &n).await;
                names.push(name);
            }
            names
        });
    }
    let mut stopped = stopped.clone();
    loop {
        tokio::select! {
            next = tasks.join_next() => match next {
                Some(Ok(names)) => done.extend(names),
                Some(Err(_)) => {}
                None => break,
            },
            // Renewed while the deliveries run.
            () = tokio::time::sleep(ttl / 3) => {
                app.delivery.claim_delivery(CLAIM, holder, ttl).await?;
            }
            // Left in the queue: delivered at the next start or by another replica.
            () = stopped_signal(&mut stopped) => {
                tasks.abort_all();
                break;
            }
        }
    }
    if !done.is_empty() {
        app.delivery.delete_documents(done).await?;
    }
    Ok(())
}
