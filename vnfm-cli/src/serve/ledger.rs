//! The server's Promise capacity ledger: the state store's ledger held in memory, changed under
//! a lock, saved after every change, reloaded when another process wrote it, advanced every
//! [`TICK`], with the queue of the notifications it produced (delivered by
//! [`super::promise`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use vnfm_core::driver::Clock;
use vnfm_core::id::IdGen;

use crate::promise::{self as book_io, PromiseBook};
use vnfm_core::problem::ProblemDetails;
use vnfm_core::reservation::book::{BookError, LedgerChange, ReservationBook};
use vnfm_core::reservation::{Ledger, LedgerError, Notification, Outcome, Rejection};

use crate::state_store::{Documents, StateStore};

pub(crate) mod shared;

/// How often the ledger is advanced to the current time.
pub const TICK: Duration = Duration::from_millis(500);

/// Delivery attempts per notification.
pub const ATTEMPTS: u32 = 3;

/// The most Promise notifications waiting for delivery; one more is dropped, counted in
/// `vnfm_promise_notifications_failed_total` and logged (the first drop, then every
/// thousandth).
pub(crate) const MAX_QUEUED: u64 = 10_000;

/// The ledger, its id generator, and the delivery queue.
#[derive(Debug)]
pub(crate) struct Promise {
    inner: Mutex<Inner>,
    /// What the state store holds, as far as this server knows.
    persisted: tokio::sync::Mutex<Persisted>,
    queue: mpsc::UnboundedSender<Notification>,
    /// Notifications a callback accepted.
    pub(crate) delivered: AtomicU64,
    /// Notifications given up after [`ATTEMPTS`].
    pub(crate) failed: AtomicU64,
    /// Notifications queued and not yet delivered or given up.
    pub(super) queued: AtomicU64,
    /// Ticks done (see [`Promise::tick`]).
    pub(super) ticks: AtomicU64,
    /// Notifications dropped because [`MAX_QUEUED`] were waiting.
    dropped: AtomicU64,
    /// The server's clock.
    clock: Arc<dyn Clock>,
    /// Wakes the delivery of the durable queue (PostgreSQL) when a change queued to it.
    pub(crate) wake: tokio::sync::Notify,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) book: PromiseBook,
    /// Bumped by every change (and reload) of `book`.
    pub(super) generation: u64,
}

/// What the state store holds, as far as this server knows.
#[derive(Debug, Default)]
struct Persisted {
    /// The generation of `book` the document holds.
    pub(super) generation: u64,
    /// The store's change stamp of the document when it was last looked at
    /// ([`StateStore::change_stamp`]: SQLite's `data_version`, PostgreSQL's document stamp).
    version: Option<i64>,
    /// A hash of the document's body as last written or read.
    hash: u64,
}

fn hash_of(body: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut h);
    h.finish()
}

/// A saved snapshot: its generation and its JSON.
type Saved = (u64, String);

impl Promise {
    /// Loads the ledger of the state store ([`book_io::load_or_new`]: the same as the command
    /// line's) and returns it with the receiving end of its delivery queue.
    pub(crate) async fn open(
        state: &StateStore,
        config: &crate::config::Config,
        clock: Arc<dyn Clock>,
    ) -> Result<(Promise, mpsc::UnboundedReceiver<Notification>), crate::error::CliError> {
        let version = state.change_stamp(book_io::PROMISE_DOCUMENT).await.ok();
        let book = book_io::load_or_new(state, config).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        Ok((
            Promise {
                inner: Mutex::new(Inner {
                    book,
                    generation: 0,
                }),
                persisted: tokio::sync::Mutex::new(Persisted {
                    generation: 0,
                    version,
                    hash: 0,
                }),
                queue: tx,
                delivered: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                queued: AtomicU64::new(0),
                ticks: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                clock,
                wake: tokio::sync::Notify::new(),
            },
            rx,
        ))
    }

    /// Reloads the ledger when another process changed its document since the last look (see
    /// the module docs). Unsaved changes of this server win: the reload waits for the next
    /// look.
    pub(crate) async fn refresh(&self, state: &StateStore) -> Result<(), String> {
        let mut p = self.persisted.lock().await;
        let version = state
            .change_stamp(book_io::PROMISE_DOCUMENT)
            .await
            .map_err(|e| format!("cannot check the state store: {e}"))?;
        if p.version == Some(version) {
            return Ok(());
        }
        let Some(body) = state
            .document(book_io::PROMISE_DOCUMENT)
            .await
            .map_err(|e| format!("cannot read the Promise ledger: {e}"))?
        else {
            p.version = Some(version);
            return Ok(());
        };
        let hash = hash_of(&body);
        if hash == p.hash {
            p.version = Some(version);
            return Ok(());
        }
        let book = PromiseBook::decode(&body)?;
        let mut g = self.lock();
        if g.generation != p.generation {
            return Ok(());
        }
        g.book = book;
        g.generation += 1;
        p.generation = g.generation;
        p.version = Some(version);
        p.hash = hash;
        Ok(())
    }

    /// The current time, never before the ledger's (its operations need a non-decreasing
    /// `now`; [`vnfm_core::reservation::lcm::effective_now`] over a reading of the clock).
    pub(crate) fn now(&self, ledger: &Ledger) -> DateTime<Utc> {
        vnfm_core::reservation::lcm::effective_now(ledger, None, self.clock.now())
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs a read-only `f` on the ledger.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Ledger) -> T) -> T {
        f(&self.lock().book.ledger)
    }

    /// Runs a changing `f` at the current time; on success takes a snapshot to save and
    /// queues the notifications.
    pub(super) fn change<T>(
        &self,
        f: impl FnOnce(&mut Ledger, &mut IdGen, DateTime<Utc>) -> Result<Outcome<T>, LedgerError>,
    ) -> Result<(T, Option<Saved>), LedgerError> {
        let mut g = self.lock();
        let now = self.now(&g.book.ledger);
        let PromiseBook { ledger, ids } = &mut g.book;
        let out = f(ledger, ids, now)?;
        let saved = snapshot_locked(&mut g);
        self.enqueue(out.notifications);
        Ok((out.value, saved))
    }

    /// Runs `f` (a core decision over the ledger, e.g. a draw of
    /// [`vnfm_core::reservation::lcm`]) at the current time, after a [`Promise::refresh`];
    /// `f` says with its result whether it changed the ledger. A change is saved before this
    /// returns, also when `f` refused (the transitions due by `now` happened). A save that
    /// fails is logged, not returned: the change stands in the server's ledger, and the next
    /// save (a change, a tick with events, the stop) writes it.
    ///
    /// # Errors
    /// `f`'s refusal, or the message of a state store that cannot be read.
    pub(crate) async fn apply<T>(
        &self,
        state: &StateStore,
        f: impl FnOnce(&mut Ledger, &mut IdGen, DateTime<Utc>) -> Result<(T, bool), LedgerError>,
    ) -> Result<T, Applied> {
        if let StateStore::Postgres(pg) = state {
            // Several replicas: `f` runs on the ledger as stored, its row locked.
            return self
                .update_locked(pg, |book, now| {
                    let PromiseBook { ledger, ids } = book;
                    let r = f(ledger, ids, now);
                    let changed = !matches!(r, Ok((_, false)));
                    (r.map(|(v, _)| v), changed, Vec::new())
                })
                .await
                .map_err(Applied::State)?
                .map_err(Applied::Ledger);
        }
        self.refresh(state).await.map_err(Applied::State)?;
        let (out, saved) = {
            let mut g = self.lock();
            let now = self.now(&g.book.ledger);
            let PromiseBook { ledger, ids } = &mut g.book;
            match f(ledger, ids, now) {
                Ok((v, false)) => (Ok(v), None),
                Ok((v, true)) => (Ok(v), snapshot_locked(&mut g)),
                Err(e) => (Err(Applied::Ledger(e)), snapshot_locked(&mut g)),
            }
        };
        if let Err(e) = self.persist(state, saved).await {
            tracing::warn!("{e}");
        }
        out
    }

    /// Queues the notifications that have a callback, in order; beyond [`MAX_QUEUED`] waiting,
    /// drops them (counted as failed, logged).
    pub(super) fn enqueue(&self, notifications: Vec<Notification>) {
        for n in notifications {
            if n.callback_uri.is_none() {
                continue;
            }
            if self.queued.load(Ordering::Relaxed) >= MAX_QUEUED {
                let failed = self.failed.fetch_add(1, Ordering::Relaxed);
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed);
                if dropped.is_multiple_of(1000) {
                    tracing::warn!(
                        "{MAX_QUEUED} Promise notifications wait for delivery: \
                         one more is dropped ({} dropped so far, {} failed in all)",
                        dropped + 1,
                        failed + 1
                    );
                }
                continue;
            }
            if self.queue.send(n).is_ok() {
                self.queued.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Appends the Promise families to a `/metrics` text.
    pub(crate) fn render_metrics(&self, s: &mut String) {
        use std::fmt::Write as _;
        let (reservations, subscriptions) = self.read(|l| (l.len(), l.subscriptions().len()));
        for (name, kind, help, v) in [
            (
                "vnfm_promise_notifications_delivered_total",
                "counter",
                "Promise notifications a callback accepted.",
                self.delivered.load(Ordering::Relaxed),
            ),
            (
                "vnfm_promise_notifications_failed_total",
                "counter",
                "Promise notifications given up after every attempt.",
                self.failed.load(Ordering::Relaxed),
            ),
            (
                "vnfm_promise_notifications_queued",
                "gauge",
                "Promise notifications waiting for delivery.",
                self.queued.load(Ordering::Relaxed),
            ),
            (
                "vnfm_promise_ticks_total",
                "counter",
                "Advances of the Promise ledger to the current time (every 0.5 s), counted \
                 once their notifications are queued and the ledger saved.",
                self.ticks.load(Ordering::Relaxed),
            ),
            (
                "vnfm_promise_reservations",
                "gauge",
                "Reservations in the Promise ledger (every status).",
                reservations as u64,
            ),
            (
                "vnfm_promise_subscriptions",
                "gauge",
                "Promise subscriptions.",
                subscriptions as u64,
            ),
        ] {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
        }
    }

    /// Writes a snapshot, unless a newer one was written.
    pub(super) async fn persist(
        &self,
        state: &StateStore,
        saved: Option<Saved>,
    ) -> Result<(), String> {
        let Some((generation, body)) = saved else {
            return Ok(());
        };
        let mut last = self.persisted.lock().await;
        if last.generation >= generation {
            return Ok(());
        }
        let hash = hash_of(&body);
        book_io::write(state, body)
            .await
            .map_err(|e| format!("cannot save the Promise ledger: {e}"))?;
        last.generation = generation;
        last.hash = hash;
        Ok(())
    }

    /// Advances the ledger to now; saves it when something happened. Counted in
    /// `vnfm_promise_ticks_total` at the end: a tick counted after some moment started after
    /// it, when the count has gone up by two since.
    pub(crate) async fn tick(&self, state: &StateStore) {
        if let StateStore::Postgres(pg) = state {
            // Several replicas: advanced as stored, its row locked (the body read only when
            // another process wrote it); written when something happened.
            let r = self
                .update_locked(pg, |book, now| match book.ledger.advance_to(now) {
                    Err(e) => {
                        tracing::warn!("cannot advance the Promise ledger: {e}");
                        ((), false, Vec::new())
                    }
                    Ok(out) => ((), !out.events.is_empty(), out.notifications),
                })
                .await;
            if let Err(e) = r {
                tracing::warn!("{e}");
            }
            self.ticks.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Err(e) = self.refresh(state).await {
            tracing::warn!("{e}");
        }
        let saved = {
            let mut g = self.lock();
            let now = self.now(&g.book.ledger);
            match g.book.ledger.advance_to(now) {
                Err(e) => {
                    tracing::warn!("cannot advance the Promise ledger: {e}");
                    None
                }
                Ok(out) if out.events.is_empty() => None,
                Ok(out) => {
                    self.enqueue(out.notifications);
                    snapshot_locked(&mut g)
                }
            }
        };
        if let Err(e) = self.persist(state, saved).await {
            tracing::warn!("{e}");
        }
        self.ticks.fetch_add(1, Ordering::Relaxed);
    }

    /// Saves the ledger now (on PostgreSQL every change is written as it is made: nothing to
    /// save, and a whole write could go over another replica's change).
    pub(crate) async fn persist_now(&self, state: &StateStore) {
        if state.is_shared() {
            return;
        }
        let saved = snapshot_locked(&mut self.lock());
        if let Err(e) = self.persist(state, saved).await {
            tracing::warn!("{e}");
        }
    }
}

pub(super) fn snapshot_locked(g: &mut Inner) -> Option<Saved> {
    g.generation += 1;
    match g.book.encode() {
        Ok(body) => Some((g.generation, body)),
        Err(e) => {
            tracing::warn!("{e}");
            None
        }
    }
}

/// The server's ledger as the book [`vnfm_core::lifecycle::Lifecycle::start`] draws from
/// and gives back to: each change is applied by [`Promise::apply`] (refreshed from the state
/// file first, saved after).
#[derive(Debug)]
pub(crate) struct ServerBook<'a> {
    promise: &'a Promise,
    state: &'a StateStore,
}

impl<'a> ServerBook<'a> {
    pub(crate) fn new(promise: &'a Promise, state: &'a StateStore) -> Self {
        Self { promise, state }
    }
}

#[async_trait::async_trait]
impl ReservationBook for ServerBook<'_> {
    async fn apply(&self, change: LedgerChange<'_>) -> Result<(), BookError> {
        self.promise
            .apply(self.state, |ledger, ids, now| {
                change(ledger, ids, now).map(|changed| ((), changed))
            })
            .await
            .map_err(|e| match e {
                Applied::Ledger(e) => BookError::Ledger(e),
                Applied::State(m) => BookError::Unusable(m.into()),
            })
    }
}

/// Why [`Promise::apply`] failed.
#[derive(Debug)]
pub(crate) enum Applied {
    /// The ledger refused.
    Ledger(LedgerError),
    /// The state store could not be read (the message says why).
    State(String),
}

/// The ProblemDetails of a ledger error: 422 for a bad request or an unknown reservation, 409
/// (with a `counterOffer` when it does not fit) for a refusal, else 500.
pub(crate) fn ledger_problem_details(e: &LedgerError) -> ProblemDetails {
    let status = match e {
        LedgerError::Invalid(_) | LedgerError::Rejected(Rejection::UnknownReservation(_)) => 422,
        LedgerError::DoesNotFit { offer, .. } => {
            return ProblemDetails::new(409, e.to_string()).with_extension(
                "counterOffer",
                serde_json::to_value(offer).unwrap_or(serde_json::Value::Null),
            )
        }
        LedgerError::Rejected(_) | LedgerError::CapacityInUse { .. } => 409,
        _ => 500,
    };
    ProblemDetails::new(status, e.to_string())
}
