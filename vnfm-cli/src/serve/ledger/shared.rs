//! The Promise ledger when several replicas share it (PostgreSQL): every change runs on the
//! ledger as stored, with its row locked, and is written in the same short transaction
//! ([`PgStore::update_document_locked`]); so two replicas changing the ledger at once both
//! land (the second runs on what the first wrote), and a replica's in-memory ledger is never
//! written over another's change (docs/replicas.md). A change runs once, as the core's
//! `ReservationBook` contract says (its changes are `FnOnce`: a compare-and-swap that runs
//! them again after a lost race is not possible for them). The notifications a change makes
//! are written to a durable queue in the same transaction ([`PROMISE_OUTBOX`]).

use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use vnfm_core::reservation::Notification;

use super::{hash_of, Promise, MAX_QUEUED};
use crate::promise::{PromiseBook, PROMISE_DOCUMENT};
use crate::store_postgres::PgStore;

/// Prefix of the durable queue of the Promise notifications on PostgreSQL:
/// `promise_outbox:<number, 20 digits>`, the JSON of a `Notification`, written with the
/// ledger change that made it and deleted once delivered or given up (`serve::promise`).
pub(crate) const PROMISE_OUTBOX: &str = "promise_outbox:";

/// [`MAX_QUEUED`] as a count of documents.
const MAX_QUEUED_DOCS: usize = MAX_QUEUED as usize;

impl Promise {
    /// Runs `f` on the ledger as stored in `pg` (the server's ledger is brought to it first),
    /// with its row locked, at the current time; `f` returns its value, whether it changed
    /// the ledger (then written in the same transaction) and the notifications it made
    /// (written to the durable queue [`PROMISE_OUTBOX`] in that transaction, delivered by the
    /// replica that claims the queue). The server's ledger is then what is stored.
    ///
    /// # Errors
    /// The message of a database that cannot be used, a stored ledger that cannot be read,
    /// or a first ledger that another replica created while this change ran; nothing was
    /// written, and the server's ledger is read again at the next change.
    pub(crate) async fn update_locked<T>(
        &self,
        pg: &PgStore,
        f: impl FnOnce(&mut PromiseBook, DateTime<Utc>) -> (T, bool, Vec<Notification>),
    ) -> Result<T, String> {
        // This replica's changes one at a time: the others wait on the row lock.
        let mut guard = self.persisted.lock().await;
        let p = &mut *guard;
        let mut written: Option<(String, u64)> = None;
        let mut wanted = 0;
        let known = p.version;
        let r = pg
            .update_document_locked_queueing(
                PROMISE_DOCUMENT,
                known,
                Some((PROMISE_OUTBOX, MAX_QUEUED_DOCS)),
                |current| {
                    let mut g = self.lock();
                    if let Some((stamp, Some(body))) = current {
                        if p.version != Some(stamp) {
                            match PromiseBook::decode(body) {
                                Ok(book) => {
                                    g.book = book;
                                    g.generation += 1;
                                    p.generation = g.generation;
                                    p.version = Some(stamp);
                                    p.hash = hash_of(body);
                                }
                                Err(e) => return (None, Vec::new(), Err(e)),
                            }
                        }
                    }
                    let now = self.now(&g.book.ledger);
                    let (out, changed, notifications) = f(&mut g.book, now);
                    if !changed {
                        return (None, Vec::new(), Ok(out));
                    }
                    g.generation += 1;
                    match g.book.encode() {
                        Ok(body) => {
                            let queued = queue_entries(&notifications);
                            wanted = queued.len();
                            written = Some((body.clone(), g.generation));
                            (Some(body), queued, Ok(out))
                        }
                        Err(e) => (None, Vec::new(), Err(e)),
                    }
                },
            )
            .await;
        match r {
            Ok((out, stamp, queued)) => {
                if let (Some(stamp), Some((body, generation))) = (stamp, written) {
                    p.version = Some(stamp);
                    p.hash = hash_of(&body);
                    p.generation = generation;
                    self.queued_durably(wanted, queued);
                }
                if out.is_err() {
                    // The in-memory ledger may hold a change that was not written.
                    p.version = None;
                }
                out
            }
            Err(e) => {
                p.version = None;
                Err(format!("cannot change the Promise ledger: {e}"))
            }
        }
    }

    /// `queued` of the `wanted` notifications of a change were written to the durable queue
    /// (the rest found it full: dropped, counted as failed, logged as [`Promise::enqueue`]
    /// does); the delivery is woken.
    fn queued_durably(&self, wanted: usize, queued: usize) {
        let dropped = wanted.saturating_sub(queued) as u64;
        if dropped > 0 {
            let failed = self.failed.fetch_add(dropped, Ordering::Relaxed);
            let before = self.dropped.fetch_add(dropped, Ordering::Relaxed);
            if before / 1000 != (before + dropped) / 1000 || before == 0 {
                tracing::warn!(
                    "{MAX_QUEUED} Promise notifications wait for delivery: {dropped} more \
                     dropped ({} dropped so far, {} failed in all)",
                    before + dropped,
                    failed + dropped
                );
            }
        }
        if queued > 0 {
            self.wake.notify_one();
        }
    }
}

/// The bodies of the durable queue of `notifications`: those with a callback, as JSON.
fn queue_entries(notifications: &[Notification]) -> Vec<String> {
    notifications
        .iter()
        .filter(|n| n.callback_uri.is_some())
        .filter_map(|n| match serde_json::to_string(n) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::warn!("cannot encode a Promise notification: {e}");
                None
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::state_store::StateStore;
    use crate::store_postgres::tests::TestDb;
    use vnfm_core::reservation::SubscriptionFilter;

    /// Two replicas' ledgers on one database, each adding subscriptions at once: every
    /// subscription of both lands, with distinct ids, in the stored ledger and in each
    /// replica's ledger after its last change.
    #[tokio::test]
    async fn concurrent_changes_through_two_stores_both_land() {
        let Some(db) = TestDb::create("ledger_cas").await else {
            return;
        };
        let config = crate::config::Config::default();
        let clock: Arc<dyn vnfm_core::driver::Clock> = Arc::new(crate::app::SystemClock);
        let mut tasks = Vec::new();
        for r in 0..2 {
            let pg = db.store().await;
            let state = StateStore::Postgres(pg.clone());
            let (promise, _queue) = Promise::open(&state, &config, clock.clone()).await.unwrap();
            tasks.push(tokio::spawn(async move {
                for i in 0..15 {
                    let uri = format!("http://nfvo-{r}.example/cb/{i}");
                    promise
                        .update_locked(&pg, |book, _now| {
                            let PromiseBook { ledger, ids } = book;
                            let filter = SubscriptionFilter::Reservation {
                                zone: None,
                                reservation: None,
                                events: Vec::new(),
                            };
                            match ledger.subscribe(Some(uri), filter, ids) {
                                Ok(out) => ((), true, out.notifications),
                                Err(e) => panic!("{e}"),
                            }
                        })
                        .await
                        .unwrap();
                }
                promise.read(|l| l.subscriptions().len())
            }));
        }
        let mut last = Vec::new();
        for t in tasks {
            last.push(t.await.unwrap());
        }
        let (body, _) = db
            .store()
            .await
            .document_with_stamp(PROMISE_DOCUMENT)
            .await
            .unwrap()
            .unwrap();
        let book = PromiseBook::decode(&body).unwrap();
        let subs = book.ledger.subscriptions();
        assert_eq!(subs.len(), 30, "{subs:?}");
        let mut ids: Vec<_> = subs.iter().map(|s| s.id.as_str().to_owned()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 30);
        // Each replica saw at least its own 15 (and all 30 once the other was done).
        assert!(
            last.iter().all(|n| *n >= 15) && last.contains(&30),
            "{last:?}"
        );
    }
}
