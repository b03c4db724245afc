//! The outbox of the SOL003 lifecycle notifications (see `subscriptions` for the API and
//! `notify` for the delivery): the subscriptions in memory, and the notifications of every
//! commit, staged to be written in the commit's transaction (`observe`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;
use vnfm_core::driver::{Clock, DriverError, StoreBatch};
use vnfm_core::id::VnfInstanceId;
use vnfm_core::lcm::{VnfInstance, VnfLcmOpOcc};
use vnfm_core::lcm_notify::{notification, Delivery, LccnSubscriptionRequest, Tracker};

use crate::store::{Flush, SqliteStore};

/// Prefix of the subscription documents.
pub const SUBSCRIPTION_PREFIX: &str = "lcm_subscription:";
/// Prefix of the outbox documents: `lcm_outbox:<subscription>:<sequence, 20 digits>`.
pub const OUTBOX_PREFIX: &str = "lcm_outbox:";
/// The counter of subscription ids.
pub(crate) const COUNTER: &str = "lcm_subscription_counter";

/// A subscription as stored (with its credentials, which are never answered).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Stored {
    pub id: String,
    pub request: LccnSubscriptionRequest,
}

/// A subscription in memory.
#[derive(Debug, Clone)]
pub(crate) struct Sub {
    pub stored: Stored,
    pub delivery: Delivery,
    /// Wakes its delivery worker.
    pub wake: Arc<Notify>,
}

/// An outbox entry.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Queued {
    /// When the state change was committed.
    pub queued_at: chrono::DateTime<chrono::Utc>,
    /// The notification body.
    pub notification: Value,
}

/// The outbox's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub queued: AtomicU64,
    pub delivered: AtomicU64,
    pub retried: AtomicU64,
    pub failed: AtomicU64,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    tracker: Mutex<Tracker>,
    subs: RwLock<BTreeMap<String, Sub>>,
    seq: AtomicU64,
    clock: Mutex<Option<Arc<dyn Clock>>>,
    pub counters: Counters,
    /// Wakes the worker manager when the subscriptions change.
    pub changed: Notify,
}

/// What [`Outbox::stage`] prepared for one commit.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    pub docs: Vec<(String, String)>,
    wake: Vec<Arc<Notify>>,
}

pub(crate) fn outbox_prefix(sub: &str) -> String {
    format!("{OUTBOX_PREFIX}{sub}:")
}

fn outbox_name(sub: &str, seq: u64) -> String {
    format!("{OUTBOX_PREFIX}{sub}:{seq:020}")
}

/// The prune bound covering every name starting with `prefix`.
pub(crate) fn all_of(prefix: &str) -> (String, String) {
    (prefix.to_owned(), format!("{prefix}\u{10FFFF}"))
}

impl Outbox {
    /// Reads the subscriptions and the outbox's sequence from `sqlite`; `ops` are the stored
    /// occurrences (their states count as notified).
    pub(crate) async fn load(
        &self,
        sqlite: &SqliteStore,
        ops: &[VnfLcmOpOcc],
        clock: Arc<dyn Clock>,
    ) -> Result<(), String> {
        let read = |what: &str, e: DriverError| format!("cannot read {what}: {e}");
        let mut subs = BTreeMap::new();
        for (name, body) in sqlite
            .documents_with_prefix(SUBSCRIPTION_PREFIX)
            .await
            .map_err(|e| read("the subscriptions", e))?
        {
            let stored: Stored = serde_json::from_str(&body)
                .map_err(|e| format!("subscription document {name} is unreadable: {e}"))?;
            let delivery = stored
                .request
                .validate()
                .map_err(|e| format!("subscription document {name}: {e:?}"))?;
            subs.insert(
                stored.id.clone(),
                Sub {
                    stored,
                    delivery,
                    wake: Arc::new(Notify::new()),
                },
            );
        }
        let mut last = 0;
        let mut orphans = Vec::new();
        for (name, _) in sqlite
            .documents_with_prefix(OUTBOX_PREFIX)
            .await
            .map_err(|e| read("the notification outbox", e))?
        {
            if let Some(n) = name.rsplit(':').next().and_then(|s| s.parse::<u64>().ok()) {
                last = last.max(n);
            }
            // Left by a deletion that a crash cut between its two writes.
            let sub = name
                .strip_prefix(OUTBOX_PREFIX)
                .and_then(|r| r.split(':').next())
                .unwrap_or("");
            if !subs.contains_key(sub) {
                orphans.push(sub.to_owned());
            }
        }
        orphans.dedup();
        for sub in orphans {
            sqlite
                .write_documents(
                    Vec::new(),
                    Some(all_of(&outbox_prefix(&sub))),
                    Flush::Commit,
                )
                .await
                .map_err(|e| {
                    format!("cannot drop the outbox of deleted subscription {sub}: {e}")
                })?;
        }
        *self.subs.write().unwrap_or_else(PoisonError::into_inner) = subs;
        *self.tracker.lock().unwrap_or_else(PoisonError::into_inner) = Tracker::new(ops);
        self.seq.store(last + 1, Ordering::SeqCst);
        *self.clock.lock().unwrap_or_else(PoisonError::into_inner) = Some(clock);
        Ok(())
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or_else(chrono::Utc::now, |c| c.now())
    }

    /// The outbox documents of committing `batch` (call it under the store's gate, before the
    /// commit; `cache` holds the instances as stored).
    pub(crate) fn stage(
        &self,
        batch: &StoreBatch,
        cache: &RwLock<BTreeMap<VnfInstanceId, VnfInstance>>,
    ) -> Staged {
        let subs = self.subs.read().unwrap_or_else(PoisonError::into_inner);
        if subs.is_empty() {
            return Staged::default();
        }
        let now = self.now();
        let events = {
            let cache = cache.read().unwrap_or_else(PoisonError::into_inner);
            let known = |id: &VnfInstanceId| cache.get(id).cloned();
            self.tracker
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .events(batch, &known, now)
        };
        let mut staged = Staged::default();
        for e in &events {
            for sub in subs.values() {
                let passes = sub
                    .stored
                    .request
                    .filter
                    .as_ref()
                    .is_none_or(|f| f.matches(e));
                if !passes {
                    continue;
                }
                let q = Queued {
                    queued_at: now,
                    notification: notification(&sub.stored.id, e, now),
                };
                let Ok(body) = serde_json::to_string(&q) else {
                    continue;
                };
                let seq = self.seq.fetch_add(1, Ordering::SeqCst);
                staged.docs.push((outbox_name(&sub.stored.id, seq), body));
                if !staged.wake.iter().any(|w| Arc::ptr_eq(w, &sub.wake)) {
                    staged.wake.push(sub.wake.clone());
                }
            }
        }
        staged
    }

    /// Records a committed batch (its occurrences' and deletions' part) and wakes the workers
    /// of the notifications it queued. Returns the indices of the batch's occurrences that
    /// changed state ([`Tracker::record`]).
    /// `cache` still holds the instances as they were before the batch.
    pub(crate) fn record(
        &self,
        batch: &StoreBatch,
        staged: Staged,
        cache: &RwLock<BTreeMap<VnfInstanceId, VnfInstance>>,
    ) -> Vec<usize> {
        let changed = {
            let cache = cache.read().unwrap_or_else(PoisonError::into_inner);
            let known = |id: &VnfInstanceId| cache.get(id).cloned();
            self.tracker
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .record(batch, &known)
        };
        self.counters
            .queued
            .fetch_add(staged.docs.len() as u64, Ordering::Relaxed);
        for w in staged.wake {
            w.notify_one();
        }
        changed
    }

    /// How many subscriptions there are.
    pub(crate) fn len(&self) -> usize {
        self.subs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The subscriptions.
    pub(crate) fn subscriptions(&self) -> Vec<Sub> {
        self.subs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Adds a subscription (call it under the store's gate, once it is stored).
    pub(crate) fn insert(&self, sub: Sub) {
        self.subs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(sub.stored.id.clone(), sub);
    }

    /// Removes subscription `id` (call it under the store's gate, once it is deleted).
    pub(crate) fn remove(&self, id: &str) {
        self.subs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// Subscription `id`.
    pub(crate) fn get(&self, id: &str) -> Option<Sub> {
        self.subs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// Renders the counters (Prometheus text).
    pub(crate) fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let c = &self.counters;
        let _ = writeln!(
            out,
            "# HELP vnfm_lcm_notifications_total SOL003 lifecycle notifications: queued (written \
             to the outbox with their state change), delivered (the callback answered 2xx), \
             retried (an attempt failed and another follows), failed (dropped after \
             [notifications] max_attempts or max_age)."
        );
        let _ = writeln!(out, "# TYPE vnfm_lcm_notifications_total counter");
        for (k, v) in [
            ("queued", &c.queued),
            ("delivered", &c.delivered),
            ("retried", &c.retried),
            ("failed", &c.failed),
        ] {
            let _ = writeln!(
                out,
                "vnfm_lcm_notifications_total{{outcome=\"{k}\"}} {}",
                v.load(Ordering::Relaxed)
            );
        }
        let n = self
            .subs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        let _ = writeln!(
            out,
            "# HELP vnfm_lcm_subscriptions SOL003 lifecycle change subscriptions.\n\
             # TYPE vnfm_lcm_subscriptions gauge\nvnfm_lcm_subscriptions {n}"
        );
    }
}
