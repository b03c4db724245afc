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

use crate::state_store::{Documents, StateStore};
use crate::store::Flush;

/// Prefix of the subscription documents.
pub const SUBSCRIPTION_PREFIX: &str = "lcm_subscription:";
/// Prefix of the outbox documents: `lcm_outbox:<subscription>:<sequence, 20 digits>`.
pub const OUTBOX_PREFIX: &str = "lcm_outbox:";
/// The counter of subscription ids.
pub(crate) const COUNTER: &str = "lcm_subscription_counter";
/// The document every creation and deletion of a subscription writes (in the same
/// transaction): its stamp tells a replica on PostgreSQL that another one changed the
/// subscriptions (docs/replicas.md, "Notifications and the ledger across replicas").
pub(crate) const SUBSCRIPTIONS_CHANGED: &str = "lcm_subscriptions_changed";

/// A subscription as stored (with its credentials, which are never answered).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Stored {
    pub id: String,
    pub request: LccnSubscriptionRequest,
}

/// A subscription in memory.
#[derive(Debug)]
pub(crate) struct Sub {
    pub stored: Stored,
    pub delivery: Delivery,
    /// Wakes its delivery worker.
    pub wake: Arc<Notify>,
    /// Its undelivered notifications, as the outbox holds them.
    pub queue: Mutex<Queue>,
}

impl Sub {
    pub(crate) fn new(stored: Stored, delivery: Delivery) -> Self {
        Self {
            stored,
            delivery,
            wake: Arc::new(Notify::new()),
            queue: Mutex::default(),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Its undelivered notifications are `entries` (sequence and size), as the store holds
    /// them now (on PostgreSQL other replicas add and deliver some).
    pub(crate) fn resync(&self, entries: BTreeMap<u64, usize>) {
        let mut q = self.queue();
        q.bytes = entries.values().fold(0, |a, n| a.saturating_add(*n));
        q.entries = entries;
    }

    /// Whether it has undelivered notifications.
    pub(crate) fn has_queued(&self) -> bool {
        !self.queue().entries.is_empty()
    }

    /// Outbox entry `name` of this subscription is gone (delivered or dropped).
    pub(crate) fn forgotten(&self, name: &str) {
        if let Some(seq) = sequence_of(name) {
            self.queue().remove(seq);
        }
    }
}

/// The undelivered notifications of one subscription: the sequence and size of each (what
/// [`OutboxBounds`] count), not their bodies, which stay in the state file.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    entries: BTreeMap<u64, usize>,
    bytes: usize,
    /// Whether the last commit that queued for it dropped (logged once until it had room).
    full: bool,
}

impl Queue {
    fn remove(&mut self, seq: u64) {
        if let Some(n) = self.entries.remove(&seq) {
            self.bytes = self.bytes.saturating_sub(n);
        }
    }

    fn add(&mut self, seq: u64, n: usize) {
        if let Some(old) = self.entries.insert(seq, n) {
            self.bytes = self.bytes.saturating_sub(old);
        }
        self.bytes = self.bytes.saturating_add(n);
    }

    /// Removes every entry at or before `upto`; how many there were.
    fn remove_upto(&mut self, upto: u64) -> usize {
        let keep = self.entries.split_off(&upto.saturating_add(1));
        let gone = std::mem::replace(&mut self.entries, keep);
        for n in gone.values() {
            self.bytes = self.bytes.saturating_sub(*n);
        }
        gone.len()
    }

    /// How many undelivered notifications, and their bytes.
    pub(crate) fn len_and_bytes(&self) -> (usize, usize) {
        (self.entries.len(), self.bytes)
    }
}

/// `[notifications] max_outbox_entries` and `max_outbox_bytes`: what one subscription's outbox
/// holds at most. A commit that would pass either drops the subscription's oldest
/// notifications (in the commit's transaction), then, if its own are more than the bound, the
/// oldest of those: the outbox keeps the newest state changes, which supersede the older ones
/// (an NFVO that lost some reads the occurrences, `GET /vnf_lcm_op_occs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutboxBounds {
    pub entries: usize,
    pub bytes: usize,
}

impl Default for OutboxBounds {
    fn default() -> Self {
        Self {
            entries: usize::MAX,
            bytes: usize::MAX,
        }
    }
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

/// Why a notification was dropped undelivered (`vnfm_lcm_notifications_dropped_total{reason}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// The subscription's outbox was full ([`OutboxBounds`]): the oldest went.
    OutboxFull,
    /// `[notifications] max_attempts` attempts failed.
    MaxAttempts,
    /// Older than `[notifications] max_age`.
    MaxAge,
    /// The stored entry could not be read.
    Unreadable,
}

impl Dropped {
    const ALL: [Dropped; 4] = [
        Dropped::OutboxFull,
        Dropped::MaxAttempts,
        Dropped::MaxAge,
        Dropped::Unreadable,
    ];

    fn label(self) -> &'static str {
        match self {
            Dropped::OutboxFull => "outbox_full",
            Dropped::MaxAttempts => "max_attempts",
            Dropped::MaxAge => "max_age",
            Dropped::Unreadable => "unreadable",
        }
    }
}

/// The outbox's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub queued: AtomicU64,
    pub delivered: AtomicU64,
    pub retried: AtomicU64,
    pub failed: AtomicU64,
    dropped: [AtomicU64; 4],
}

impl Counters {
    /// Counts `n` notifications dropped for `why` (also `failed`: dropped at a bound).
    pub(crate) fn dropped(&self, why: Dropped, n: u64) {
        if let Some(i) = Dropped::ALL.iter().position(|d| *d == why) {
            self.dropped[i].fetch_add(n, Ordering::Relaxed);
        }
        self.failed.fetch_add(n, Ordering::Relaxed);
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    tracker: Mutex<Tracker>,
    /// Shared, never copied: a list request or a commit takes references (a subscription
    /// may be tens of KiB, [notifications] max_subscription_bytes).
    subs: RwLock<BTreeMap<String, Arc<Sub>>>,
    seq: AtomicU64,
    /// The stamp of [`SUBSCRIPTIONS_CHANGED`] when the subscriptions were last read (on a
    /// shared store).
    subs_stamp: Mutex<Option<i64>>,
    clock: Mutex<Option<Arc<dyn Clock>>>,
    bounds: Mutex<OutboxBounds>,
    pub counters: Counters,
    /// Wakes the worker manager when the subscriptions change.
    pub changed: Notify,
}

/// What [`Outbox::stage`] prepared for one commit.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    /// The notifications to write.
    pub docs: Vec<(String, String)>,
    /// The ranges of older notifications a full outbox drops for them.
    pub prune: Vec<(String, String)>,
    subs: Vec<StagedSub>,
}

/// A notification staged for a subscription: sequence, document name, body.
type NewEntry = (u64, String, String);

/// The notifications a commit causes, not yet numbered: each subscription's and its body, in
/// the order of the state changes ([`Outbox::plan`]).
#[derive(Debug, Default)]
pub(crate) struct Planned {
    entries: Vec<(Arc<Sub>, String)>,
}

impl Planned {
    /// How many notifications.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// One subscription's part of a [`Staged`] commit.
#[derive(Debug)]
struct StagedSub {
    sub: Arc<Sub>,
    /// Its entries at or before this sequence are dropped.
    evict_upto: Option<u64>,
    /// The entries written (sequence, bytes).
    added: Vec<(u64, usize)>,
    /// The commit's own notifications not written (more than the bound).
    dropped_new: usize,
}

pub(crate) fn outbox_prefix(sub: &str) -> String {
    format!("{OUTBOX_PREFIX}{sub}:")
}

fn outbox_name(sub: &str, seq: u64) -> String {
    format!("{OUTBOX_PREFIX}{sub}:{seq:020}")
}

/// The sequence of outbox entry `name`.
pub(crate) fn sequence_of(name: &str) -> Option<u64> {
    name.rsplit(':').next().and_then(|s| s.parse::<u64>().ok())
}

/// The subscription of outbox entry `name`.
pub(crate) fn subscription_of(name: &str) -> &str {
    name.strip_prefix(OUTBOX_PREFIX)
        .and_then(|r| r.split(':').next())
        .unwrap_or("")
}

/// The prune bound covering every name starting with `prefix`.
pub(crate) fn all_of(prefix: &str) -> (String, String) {
    (prefix.to_owned(), format!("{prefix}\u{10FFFF}"))
}

impl Outbox {
    /// Reads the subscriptions and the outbox's sequence from `state`; `ops` are the stored
    /// occurrences (their states count as notified). The outbox is read by names and sizes
    /// only (its bodies stay in the file); a subscription's outbox beyond `bounds` (lowered
    /// since it was written) loses its oldest entries now.
    pub(crate) async fn load(
        &self,
        state: &StateStore,
        ops: &[VnfLcmOpOcc],
        clock: Arc<dyn Clock>,
        bounds: OutboxBounds,
    ) -> Result<(), String> {
        let read = |what: &str, e: DriverError| format!("cannot read {what}: {e}");
        // Read before the subscriptions: a change after it is seen by the next look.
        let stamp = if state.is_shared() {
            Some(
                state
                    .change_stamp(SUBSCRIPTIONS_CHANGED)
                    .await
                    .map_err(|e| read("the subscriptions' stamp", e))?,
            )
        } else {
            None
        };
        let mut subs = BTreeMap::new();
        for (name, body) in state
            .documents_with_prefix(SUBSCRIPTION_PREFIX)
            .await
            .map_err(|e| read("the subscriptions", e))?
        {
            let sub = parse_sub(&name, &body)?;
            subs.insert(sub.stored.id.clone(), Arc::new(sub));
        }
        let mut last = 0;
        let mut orphans = Vec::new();
        for (name, size) in state
            .document_sizes_with_prefix(OUTBOX_PREFIX)
            .await
            .map_err(|e| read("the notification outbox", e))?
        {
            let seq = sequence_of(&name).unwrap_or(0);
            last = last.max(seq);
            // Left by a deletion that a crash cut between its two writes.
            let sub = subscription_of(&name);
            match subs.get(sub) {
                Some(s) => s.queue().add(seq, size),
                None => orphans.push(sub.to_owned()),
            }
        }
        orphans.dedup();
        for sub in orphans {
            state
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
        for (id, s) in &subs {
            let upto = evict(&s.queue(), bounds, 0, 0).1;
            if let Some(upto) = upto {
                state
                    .write_documents(
                        Vec::new(),
                        Some((outbox_prefix(id), outbox_name(id, upto))),
                        Flush::Commit,
                    )
                    .await
                    .map_err(|e| format!("cannot trim the outbox of subscription {id}: {e}"))?;
                let n = s.queue().remove_upto(upto);
                self.counters.dropped(Dropped::OutboxFull, n as u64);
                tracing::warn!(
                    "the outbox of subscription {id} was beyond [notifications] \
                     max_outbox_entries = {} or max_outbox_bytes = {}: its {n} oldest \
                     notification(s) dropped",
                    bounds.entries,
                    bounds.bytes
                );
            }
        }
        *self.subs.write().unwrap_or_else(PoisonError::into_inner) = subs;
        *self
            .subs_stamp
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = stamp;
        *self.tracker.lock().unwrap_or_else(PoisonError::into_inner) = Tracker::new(ops);
        self.seq.store(last + 1, Ordering::SeqCst);
        *self.clock.lock().unwrap_or_else(PoisonError::into_inner) = Some(clock);
        *self.bounds.lock().unwrap_or_else(PoisonError::into_inner) = bounds;
        Ok(())
    }

    /// The time on the clock [`Outbox::load`] gave (the server's); before that, on the CLI's
    /// system clock ([`crate::app::SystemClock`]), which nothing asks in practice: there is
    /// no subscription to stage for before the load.
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        let clock = self.clock.lock().unwrap_or_else(PoisonError::into_inner);
        match clock.as_ref() {
            Some(c) => c.now(),
            None => crate::app::SystemClock.now(),
        }
    }

    /// The notifications of committing `batch` (call it under the store's gate, before the
    /// commit; `before` holds the instances the batch names as stored): one per (state
    /// change, subscription whose filter passes), nothing per subscription beyond its filter.
    pub(crate) fn plan(
        &self,
        batch: &StoreBatch,
        before: &BTreeMap<VnfInstanceId, VnfInstance>,
    ) -> Planned {
        let subs = self.subs.read().unwrap_or_else(PoisonError::into_inner);
        if subs.is_empty() {
            return Planned::default();
        }
        let now = self.now();
        let events = {
            let known = |id: &VnfInstanceId| before.get(id).cloned();
            self.tracker
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .events(batch, &known, now)
        };
        let mut planned = Planned::default();
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
                if let Ok(body) = serde_json::to_string(&q) {
                    planned.entries.push((Arc::clone(sub), body));
                }
            }
        }
        planned
    }

    /// The outbox documents of `planned` (under the same gate as [`Outbox::plan`]), and the
    /// oldest ones a full outbox drops for them ([`OutboxBounds`]). Each is numbered by
    /// `numbers` in order (PostgreSQL: drawn from the database, unique across replicas), or
    /// by the outbox's own counter when `None` (or short).
    pub(crate) fn stage_planned(&self, planned: Planned, numbers: Option<Vec<u64>>) -> Staged {
        if planned.entries.is_empty() {
            return Staged::default();
        }
        let mut numbers = numbers.unwrap_or_default().into_iter();
        // Each subscription's new entries, in the order of the events.
        let mut new: BTreeMap<String, (Arc<Sub>, Vec<NewEntry>)> = BTreeMap::new();
        for (sub, body) in planned.entries {
            let seq = numbers
                .next()
                .unwrap_or_else(|| self.seq.fetch_add(1, Ordering::SeqCst));
            let name = outbox_name(&sub.stored.id, seq);
            new.entry(sub.stored.id.clone())
                .or_insert_with(|| (Arc::clone(&sub), Vec::new()))
                .1
                .push((seq, name, body));
        }
        let bounds = *self.bounds.lock().unwrap_or_else(PoisonError::into_inner);
        let mut staged = Staged::default();
        for (id, (sub, entries)) in new {
            let adding: usize = entries.iter().map(|(_, _, b)| b.len()).sum();
            let (mut n, evict_upto, mut bytes) = evict(&sub.queue(), bounds, entries.len(), adding);
            if let Some(upto) = evict_upto {
                staged
                    .prune
                    .push((outbox_prefix(&id), outbox_name(&id, upto)));
            }
            // Still beyond: the commit's own oldest go too.
            let mut added = Vec::new();
            let mut dropped_new = 0;
            for (seq, name, body) in entries {
                if n > bounds.entries || bytes > bounds.bytes {
                    n -= 1;
                    bytes = bytes.saturating_sub(body.len());
                    dropped_new += 1;
                    continue;
                }
                added.push((seq, body.len()));
                staged.docs.push((name, body));
            }
            // In the index before the commit: a worker may deliver one as soon as it is
            // committed, before `record` (it is taken out again if the commit fails: `discard`).
            {
                let mut q = sub.queue();
                for (seq, n) in &added {
                    q.add(*seq, *n);
                }
            }
            staged.subs.push(StagedSub {
                sub: Arc::clone(&sub),
                evict_upto,
                added,
                dropped_new,
            });
        }
        staged
    }

    /// Records a committed batch (its occurrences' and deletions' part) and wakes the workers
    /// of the notifications it queued. Returns the indices of the batch's occurrences that
    /// changed state ([`Tracker::record`]).
    /// `before` holds the instances the batch names as they were before it.
    pub(crate) fn record(
        &self,
        batch: &StoreBatch,
        staged: Staged,
        before: &BTreeMap<VnfInstanceId, VnfInstance>,
    ) -> Vec<usize> {
        let changed = {
            let known = |id: &VnfInstanceId| before.get(id).cloned();
            self.tracker
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .record(batch, &known)
        };
        let bounds = *self.bounds.lock().unwrap_or_else(PoisonError::into_inner);
        for s in staged.subs {
            let dropped = {
                let mut q = s.sub.queue();
                let evicted = s.evict_upto.map_or(0, |u| q.remove_upto(u));
                let dropped = evicted + s.dropped_new;
                let first = dropped > 0 && !q.full;
                q.full = dropped > 0;
                if first {
                    tracing::warn!(
                        "the outbox of subscription {} is full ([notifications] \
                         max_outbox_entries = {}, max_outbox_bytes = {}): its oldest \
                         notifications are dropped as new ones come (counted in \
                         vnfm_lcm_notifications_dropped_total{{reason=\"outbox_full\"}})",
                        s.sub.stored.id,
                        bounds.entries,
                        bounds.bytes
                    );
                }
                dropped
            };
            if dropped > 0 {
                self.counters.dropped(Dropped::OutboxFull, dropped as u64);
            }
            self.counters
                .queued
                .fetch_add(s.added.len() as u64, Ordering::Relaxed);
            if !s.added.is_empty() {
                s.sub.wake.notify_one();
            }
        }
        changed
    }

    /// Forgets what `stage` prepared for a commit that failed.
    pub(crate) fn discard(&self, staged: &Staged) {
        for s in &staged.subs {
            let mut q = s.sub.queue();
            for (seq, _) in &s.added {
                q.remove(*seq);
            }
        }
    }

    /// On a shared store: the stamp of [`SUBSCRIPTIONS_CHANGED`] when it is not the one seen
    /// when the subscriptions were last read (another replica created or deleted one since);
    /// `None` when they are as read. One small query.
    pub(crate) async fn stale(&self, state: &StateStore) -> Result<Option<i64>, DriverError> {
        let stamp = state.change_stamp(SUBSCRIPTIONS_CHANGED).await?;
        let known = *self
            .subs_stamp
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok((known != Some(stamp)).then_some(stamp))
    }

    /// Reads the subscriptions again (call it under the store's gate; `stamp` from
    /// [`Outbox::stale`], read before): the ones still stored are kept as they are (a
    /// subscription never changes), new ones added, gone ones removed. A stored subscription
    /// that cannot be read is left out and logged (another replica wrote it: not this one's
    /// to refuse to start over).
    pub(crate) async fn reload(&self, state: &StateStore, stamp: i64) -> Result<(), DriverError> {
        let docs = state.documents_with_prefix(SUBSCRIPTION_PREFIX).await?;
        let mut next = BTreeMap::new();
        {
            let old = self.subs.read().unwrap_or_else(PoisonError::into_inner);
            for (name, body) in docs {
                let id = name.strip_prefix(SUBSCRIPTION_PREFIX).unwrap_or(&name);
                if let Some(s) = old.get(id) {
                    next.insert(id.to_owned(), Arc::clone(s));
                    continue;
                }
                match parse_sub(&name, &body) {
                    Ok(sub) => {
                        tracing::info!(
                            "subscription {} (made through another replica) found",
                            sub.stored.id
                        );
                        next.insert(sub.stored.id.clone(), Arc::new(sub));
                    }
                    Err(e) => tracing::warn!("{e}: left out"),
                }
            }
            for id in old.keys().filter(|id| !next.contains_key(*id)) {
                tracing::info!("subscription {id} (deleted through another replica) gone");
            }
        }
        *self.subs.write().unwrap_or_else(PoisonError::into_inner) = next;
        *self
            .subs_stamp
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(stamp);
        self.changed.notify_one();
        Ok(())
    }

    /// On a shared store (PostgreSQL), reads the subscriptions again when another replica
    /// created or deleted one since they were last read (the stamp of
    /// [`SUBSCRIPTIONS_CHANGED`]: one small query when nothing changed), under `gate` (the
    /// store's gate: no commit stages notifications while the set changes). Nothing on
    /// SQLite (one server).
    ///
    /// # Errors
    /// The store cannot be read; the subscriptions known are kept.
    pub(crate) async fn refresh(
        &self,
        state: &StateStore,
        gate: &tokio::sync::RwLock<()>,
    ) -> Result<(), DriverError> {
        if !state.is_shared() {
            return Ok(());
        }
        let Some(stamp) = self.stale(state).await? else {
            return Ok(());
        };
        let _gate = gate.write().await;
        self.reload(state, stamp).await
    }

    /// How many subscriptions there are.
    pub(crate) fn len(&self) -> usize {
        self.subs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The subscriptions, in id order (shared, not copied).
    pub(crate) fn subscriptions(&self) -> Vec<Arc<Sub>> {
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
            .insert(sub.stored.id.clone(), Arc::new(sub));
    }

    /// Removes subscription `id` (call it under the store's gate, once it is deleted).
    pub(crate) fn remove(&self, id: &str) {
        self.subs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// Subscription `id`.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Sub>> {
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
            "# HELP vnfm_lcm_notifications_dropped_total SOL003 lifecycle notifications dropped \
             undelivered, by reason: outbox_full (the subscription's outbox was at \
             [notifications] max_outbox_entries or max_outbox_bytes: its oldest went), \
             max_attempts, max_age ([notifications]), unreadable (a stored entry that could not \
             be read).\n# TYPE vnfm_lcm_notifications_dropped_total counter"
        );
        for (d, v) in Dropped::ALL.iter().zip(&c.dropped) {
            let _ = writeln!(
                out,
                "vnfm_lcm_notifications_dropped_total{{reason=\"{}\"}} {}",
                d.label(),
                v.load(Ordering::Relaxed)
            );
        }
        let (queued, bytes) = self
            .subs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|s| s.queue().len_and_bytes())
            .fold((0, 0), |(a, b), (n, m)| (a + n, b + m));
        let _ = writeln!(
            out,
            "# HELP vnfm_lcm_outbox_notifications SOL003 lifecycle notifications waiting in the \
             outbox (every subscription).\n# TYPE vnfm_lcm_outbox_notifications gauge\n\
             vnfm_lcm_outbox_notifications {queued}\n\
             # HELP vnfm_lcm_outbox_bytes Bytes of the notifications waiting in the outbox.\n\
             # TYPE vnfm_lcm_outbox_bytes gauge\nvnfm_lcm_outbox_bytes {bytes}"
        );
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

/// The subscription of document `name` with its `body`.
fn parse_sub(name: &str, body: &str) -> Result<Sub, String> {
    let stored: Stored = serde_json::from_str(body)
        .map_err(|e| format!("subscription document {name} is unreadable: {e}"))?;
    let delivery = stored
        .request
        .validate()
        .map_err(|e| format!("subscription document {name}: {e:?}"))?;
    Ok(Sub::new(stored, delivery))
}

/// What a subscription's outbox `q` keeps of its entries when `n` new ones of `bytes` bytes
/// come, within `bounds`: the entries it then has (new ones included), the sequence up to which
/// the oldest are dropped (`None`: none), and the bytes it then has.
fn evict(q: &Queue, bounds: OutboxBounds, n: usize, bytes: usize) -> (usize, Option<u64>, usize) {
    let mut count = q.entries.len().saturating_add(n);
    let mut total = q.bytes.saturating_add(bytes);
    let mut upto = None;
    for (seq, size) in &q.entries {
        if count <= bounds.entries && total <= bounds.bytes {
            break;
        }
        count -= 1;
        total = total.saturating_sub(*size);
        upto = Some(*seq);
    }
    (count, upto, total)
}
