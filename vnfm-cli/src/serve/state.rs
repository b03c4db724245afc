//! What the request handlers of `vnfm serve` share ([`App`]): the configuration, the state
//! file, the lifecycle over the drivers, the alert handler and its journal, the Promise
//! ledger; and the background operations they start ([`spawn_op`]).

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tracing::Instrument as _;
use vnfm_core::alert::{AlertHandler, AlertState, HealEntry};
use vnfm_core::driver::{Clock, Store};
use vnfm_core::id::{OpOccId, VnfInstanceId};
use vnfm_core::lcm::VnfInstance;
use vnfm_core::lifecycle::{
    Interrupt, LcmError, Lifecycle, OperationOptions, StartError, StartOptions,
};
use vnfm_core::package::VnfPackage;
use vnfm_core::problem::ProblemDetails;
use vnfm_core::reservation::book::BookError;
use vnfm_core::sim::SimCloud;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use vnfm_core::lifecycle::grant::lcm_op_occ_href;

use super::auth::Credentials;
use super::http::{problem, with_location};
use super::metrics::Gauges;
use super::observe::{Shared, Started};
use super::{journal, ledger};
use crate::config::Config;
use crate::state_store::{Documents, StateLocation, StateStore};
use crate::store::Flush;

/// The state-file document holding the alert handler's pending state.
pub const ALERT_DOCUMENT: &str = "alert_state";

/// The state-file document holding the generation that [`ALERT_DOCUMENT`] covers.
pub const ALERT_GENERATION_DOCUMENT: &str = "alert_state:generation";

/// Prefix of the alert journal's documents: `alert_journal:<generation, 20 digits>:<n, 6
/// digits>`, each a JSON [`HealEntry`], replayed after [`ALERT_DOCUMENT`] by
/// [`load_alert_handler`].
pub const ALERT_JOURNAL_PREFIX: &str = "alert_journal:";

#[cfg(test)]
pub(super) fn journal_name(generation: u64, n: usize) -> String {
    format!("{ALERT_JOURNAL_PREFIX}{generation:020}:{n:06}")
}

/// The prune bound that covers every journal entry of `generation` and before: `;` sorts
/// after the `:<n>` of any entry name of that generation.
pub(super) fn journal_through(generation: u64) -> (String, String) {
    (
        ALERT_JOURNAL_PREFIX.to_owned(),
        format!("{ALERT_JOURNAL_PREFIX}{generation:020};"),
    )
}

/// The generation of a journal entry's name, `None` for a name not made by `journal_name`.
pub(super) fn journal_generation(name: &str) -> Option<u64> {
    name.strip_prefix(ALERT_JOURNAL_PREFIX)?
        .split(':')
        .next()?
        .parse()
        .ok()
}

/// The alert handler saved in `store`: [`ALERT_DOCUMENT`], then every journal entry of a later
/// generation than the one it covers, in order: the entries of the state store (documents
/// [`ALERT_JOURNAL_PREFIX`], written by vnfm until 2026-11-28), then, for a state file, the
/// records of the journal folder beside it (`<state file>-alerts`, see `docs/serve.md`; a
/// database has none). A missing state is an empty handler.
///
/// # Errors
/// The state file or the journal folder cannot be read, or a saved document or record is not
/// what vnfm wrote (named).
pub async fn load_alert_handler(
    store: &dyn Documents,
    config: &vnfm_core::alert::PrometheusPluginConfig,
) -> Result<AlertHandler, String> {
    load_alert_state(store, config).await.map(|(h, _)| h)
}

/// [`load_alert_handler`], and the highest generation the saved state covers (the snapshot's
/// or a replayed entry's): the server counts on from it, so that a journal record it did not
/// manage to remove is never replayed over a later snapshot.
pub(super) async fn load_alert_state(
    store: &dyn Documents,
    config: &vnfm_core::alert::PrometheusPluginConfig,
) -> Result<(AlertHandler, u64), String> {
    let mut handler = AlertHandler::new(config.clone());
    let read = |what: &str, e: vnfm_core::driver::DriverError| format!("cannot read {what}: {e}");
    if let Some(doc) = store
        .document(ALERT_DOCUMENT)
        .await
        .map_err(|e| read("the alert state", e))?
    {
        let state: AlertState = serde_json::from_str(&doc).map_err(|e| {
            format!("the saved alert state (document {ALERT_DOCUMENT}) is unreadable: {e}")
        })?;
        handler.restore(state);
    }
    let covered = match store
        .document(ALERT_GENERATION_DOCUMENT)
        .await
        .map_err(|e| read("the alert state's generation", e))?
    {
        Some(g) => g.trim().parse::<u64>().map_err(|e| {
            format!("document {ALERT_GENERATION_DOCUMENT} is not a generation ({g:?}): {e}")
        })?,
        None => 0,
    };
    let mut last = covered;
    for (name, body) in store
        .documents_with_prefix(ALERT_JOURNAL_PREFIX)
        .await
        .map_err(|e| read("the alert journal", e))?
    {
        let generation = journal_generation(&name)
            .ok_or_else(|| format!("alert journal entry {name:?}: not a journal entry's name"))?;
        if generation <= covered {
            continue;
        }
        let entry: HealEntry = serde_json::from_str(&body)
            .map_err(|e| format!("alert journal entry {name} is unreadable: {e}"))?;
        handler.replay_heal(&entry);
        last = last.max(generation);
    }
    if let StateLocation::File(Some(path)) = store.location() {
        let dir = journal::dir_of(&path);
        for (generation, body) in journal::read_dir(&dir)? {
            if generation <= covered {
                continue;
            }
            let entry: HealEntry = serde_json::from_str(&body).map_err(|e| {
                format!(
                    "a record of generation {generation} in the alert journal {} is \
                     unreadable: {e}",
                    dir.display()
                )
            })?;
            handler.replay_heal(&entry);
            last = last.max(generation);
        }
    }
    Ok((handler, last))
}

/// The alert-state documents [`check_alert_document`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertDocument {
    /// [`ALERT_DOCUMENT`]: the alert handler's snapshot.
    Snapshot,
    /// [`ALERT_GENERATION_DOCUMENT`]: the generation the snapshot covers.
    Generation,
    /// A journal entry (named `name`, see [`ALERT_JOURNAL_PREFIX`]): one accepted heal.
    JournalEntry,
}

/// Reads one saved alert document as [`load_alert_handler`] does, into a handler with every
/// endpoint enabled, and takes the handler's snapshot again. `name` is the document's name
/// (only read for a [`AlertDocument::JournalEntry`]). Public for the fuzz targets of `fuzz/`
/// and their corpus regression test.
///
/// # Errors
/// The message [`load_alert_handler`] gives for that document.
pub fn check_alert_document(kind: AlertDocument, name: &str, body: &str) -> Result<(), String> {
    let config = vnfm_core::alert::PrometheusPluginConfig::default().with_all_enabled();
    let mut handler = AlertHandler::new(config);
    match kind {
        AlertDocument::Snapshot => {
            let state: AlertState = serde_json::from_str(body).map_err(|e| {
                format!("the saved alert state (document {ALERT_DOCUMENT}) is unreadable: {e}")
            })?;
            handler.restore(state);
        }
        AlertDocument::Generation => {
            body.trim().parse::<u64>().map_err(|e| {
                format!("document {ALERT_GENERATION_DOCUMENT} is not a generation ({body:?}): {e}")
            })?;
        }
        AlertDocument::JournalEntry => {
            journal_generation(name).ok_or_else(|| {
                format!("alert journal entry {name:?}: not a journal entry's name")
            })?;
            let entry: HealEntry = serde_json::from_str(body)
                .map_err(|e| format!("alert journal entry {name} is unreadable: {e}"))?;
            handler.replay_heal(&entry);
        }
    }
    let _ = handler.snapshot();
    Ok(())
}

/// What became of the journal records of a request ([`App::journal_write`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Journaled {
    /// In the journal (in the OS).
    Written,
    /// The write failed (a full disk): not saved.
    Failed,
    /// Not in a journal: an entry could not be encoded (logged), the request has no heal
    /// entry, or there is no journal (PostgreSQL). The whole state is to be saved instead.
    NotEncoded,
    /// Written to the alert state the replicas share (PostgreSQL) as it was decided.
    Shared,
}

/// What this replica knows of the shared document.
#[derive(Debug, Default)]
pub(crate) struct AlertSync {
    /// The stamp of the document the handler was last restored from or wrote (`None`: not
    /// known, read it before the next change).
    pub(super) known: Option<crate::store_postgres::cas::Expect>,
    /// The handler's generation (`App::generation`) when it was last in step with the
    /// database: a later one has changes not written yet.
    pub(super) synced_generation: u64,
}

/// A webhook waiting for its turn to be judged on PostgreSQL (`shared_alerts`): the webhooks
/// that arrive while a change of the shared alert state is in flight are judged together, in
/// order, as the next change.
#[derive(Debug)]
pub(crate) struct PendingWebhook {
    pub(super) endpoint: vnfm_core::alert::Endpoint,
    pub(super) webhook: vnfm_core::alert::Webhook,
    /// The instances its alerts name (read before it queued).
    pub(super) instances: std::collections::BTreeMap<VnfInstanceId, VnfInstance>,
    pub(super) now: chrono::DateTime<chrono::Utc>,
    /// Its outcomes once the change that judged it is committed, or why it failed (nothing
    /// of it kept).
    pub(super) reply: oneshot::Sender<Result<Vec<vnfm_core::alert::AlertOutcome>, String>>,
}

/// How long a stop waits for running operations.
pub(super) const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// An operation to run in the background (the core's request of each operation).
pub(crate) use vnfm_core::lifecycle::OpRequest;

/// Everything a request handler needs.
#[derive(Debug)]
pub(crate) struct App {
    /// The id of this replica, on every log line and every `/metrics` series (`log`).
    pub(super) replica: String,
    /// The request ids this server makes (`log`).
    pub(super) request_ids: super::log::RequestIds,
    pub(super) config: Config,
    pub(super) quiet: bool,
    /// The state: the SQLite file or the PostgreSQL database of `[state] url`.
    pub(super) state: StateStore,
    /// A connection of its own to the state file (a pool of its own on PostgreSQL) for the
    /// delivery of the SOL003 notifications (`notify`): the workers' reads and removals of
    /// their outboxes never queue an operation's commits (or a request's reads), which stay
    /// on `state`.
    pub(super) delivery: StateStore,
    /// The state, as the handlers read it (the same connection as `state`).
    pub(super) store: StateStore,
    pub(super) shared: Arc<Shared>,
    /// The simulated cloud (saved in the state file), `None` for a real cloud.
    pub(super) sim: Option<SimCloud>,
    pub(super) lcm: Lifecycle,
    pub(super) alert_auth: Credentials,
    pub(super) api_auth: Credentials,
    /// The packages of `[packages] dir`, read at start and when they change.
    pub(super) packages: super::packages::PackageIndex,
    /// The open HTTP connections.
    pub(super) connections: Arc<super::conn::Connections>,
    /// Writes running on their own task (see `super::limit`), waited for at a stop.
    pub(super) writes: AtomicUsize,
    /// Generation of the alert state: bumped under the `alerts` lock by every change.
    pub(super) generation: AtomicU64,
    /// The generation last written to the state file.
    pub(super) persisted: tokio::sync::Mutex<u64>,
    /// The alert journal beside the state file; `None` on PostgreSQL, where an accepted heal
    /// alert is saved with a snapshot of the whole alert state in the database before its
    /// answer (as a scale is), so that nothing of it is kept on the replica's disk.
    pub(super) journal: Option<journal::Journal>,
    /// Whether the last write of the alert journal failed (logged once, until it works again).
    pub(super) journal_failing: std::sync::atomic::AtomicBool,
    pub(super) running: AtomicUsize,
    pub(super) idle: Notify,
    /// Operations ended on the simulated cloud (numbered from 1), whose changes to it must be
    /// saved ([`App::save_sim`]).
    pub(super) sim_changes: AtomicU64,
    /// The number of the last of them that a save of the simulated cloud covers.
    pub(super) sim_saved: tokio::sync::Mutex<u64>,
    /// The Promise capacity ledger.
    pub(super) promise: ledger::Promise,
    /// The interrupts of the running operations, that `POST .../cancel` triggers.
    pub(super) cancels: Cancels,
    /// The one client of every outgoing request (`crate::outgoing`).
    pub(super) outgoing: Arc<crate::outgoing::Outgoing>,
    /// The turns of the Grant API's decisions (`nfvo_grants`): each decision reads and
    /// writes the registry of the instances, the count of the grants that wait and the ledger
    /// as one step within the server.
    pub(super) grant_turn: tokio::sync::Mutex<()>,
    /// On PostgreSQL, what this replica knows of the shared alert state (`shared_alerts`).
    pub(super) alert_sync: tokio::sync::Mutex<AlertSync>,
    /// On PostgreSQL, the webhooks waiting to be judged together (`shared_alerts`).
    pub(super) alert_queue: Mutex<Vec<PendingWebhook>>,
}

impl App {
    /// The clock of the server (the lifecycle's): see [`super::Server::start_with_clock`].
    pub(super) fn clock(&self) -> &Arc<dyn Clock> {
        &self.lcm.drivers().clock
    }

    /// `[server] request_timeout`.
    pub(super) fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.config.server.request_timeout)
    }

    /// Logs `line` at `info` (nothing with `--quiet`).
    pub(super) fn note(&self, line: &str) {
        if !self.quiet {
            tracing::info!("{line}");
        }
    }

    /// [`App::note`] about an LCM operation: the line carries the instance id and, when
    /// known, the operation id (docs/serve.md "Logs").
    pub(super) fn note_op(&self, instance_id: &str, operation_id: Option<&str>, line: &str) {
        if !self.quiet {
            tracing::info!(instance_id, operation_id, "{line}");
        }
    }

    pub(super) fn lock_alerts(&self) -> std::sync::MutexGuard<'_, AlertHandler> {
        self.shared
            .alerts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn gauges(&self) -> Gauges {
        // One look under the lock: no window and no busy instance together mean that no
        // alert-driven operation runs or is about to start (a window that the dispatcher took
        // keeps its instance busy until its heal ends or is refused).
        let h = self.lock_alerts();
        let b = h.heal_batcher();
        Gauges {
            pending_heals: b.pending_windows(),
            busy_instances: b.busy_instances(),
            remembered_alerts: b.remembered(),
            running_operations: self.running.load(Ordering::Relaxed),
        }
    }

    /// Saves the simulated cloud after an operation on it ended (nothing for a real cloud).
    /// Operations that end together share a save: one that begins after an operation's end
    /// covers it, so a hundred heals ending at once write the cloud a few times, not a hundred
    /// (each write is the whole cloud). Returns once the cloud as it was at the call is saved,
    /// or the save failed (logged).
    pub(super) async fn save_sim(&self) {
        if self.sim.is_none() {
            return;
        }
        let mine = self.sim_changes.fetch_add(1, Ordering::SeqCst) + 1;
        let mut saved = self.sim_saved.lock().await;
        if *saved >= mine {
            return;
        }
        // Every change numbered up to here happened before the snapshot the save takes.
        let covers = self.sim_changes.load(Ordering::SeqCst);
        match crate::vim::save_sim(&self.state, &self.sim).await {
            Ok(()) => *saved = covers,
            Err(e) => tracing::warn!("{e}"),
        }
    }

    /// Records a change of the alert state (call it under the `alerts` lock, after the
    /// change); returns the change's generation, to pass to [`App::persist`].
    pub(super) fn changed_locked(&self, _h: &AlertHandler) -> u64 {
        self.generation.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Makes generation `generation` of the alert state durable with a snapshot. Returns at
    /// once when a snapshot covering it is written; otherwise writes the state as it is *now*
    /// (its generation is at least `generation`) and drops the journal entries it covers. That
    /// is a group commit: every caller that waited on the `persisted` lock during a write is
    /// covered by the next one.
    ///
    /// Returns whether the state up to `generation` is saved.
    pub(super) async fn persist(&self, generation: u64) -> bool {
        if let Some(pg) = self.shared_alert_store() {
            // Shared by the replicas: every decision was written when it was made; what is
            // left (remembered alerts refreshed) is written unless another replica wrote.
            return self.alert_sync(pg).await;
        }
        let mut last = self.persisted.lock().await;
        if *last >= generation {
            return true;
        }
        let (current, state, sealed) = {
            let h = self.lock_alerts();
            // The journal's records up to now are in segments up to `sealed`, which this
            // snapshot covers.
            (
                self.generation.load(Ordering::SeqCst),
                h.snapshot(),
                self.journal.as_ref().map(journal::Journal::rotate),
            )
        };
        let body = match serde_json::to_string(&state) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("cannot encode the alert state: {e}");
                return false;
            }
        };
        let put = vec![
            (ALERT_DOCUMENT.to_owned(), body),
            (ALERT_GENERATION_DOCUMENT.to_owned(), current.to_string()),
        ];
        match self
            .state
            .write_documents(put, Some(journal_through(current)), Flush::Commit)
            .await
        {
            Ok(()) => {
                *last = current;
                if let (Some(j), Some(sealed)) = (&self.journal, sealed) {
                    j.remove_through(sealed);
                }
                true
            }
            Err(e) => {
                tracing::warn!("cannot save the alert state: {e}");
                false
            }
        }
    }

    /// The right to append the journal records of the change just made (call it under the
    /// `alerts` lock, right after [`App::changed_locked`], so that the records stay in
    /// generation order); write them with [`App::journal_write`] once the lock is released.
    /// `None` without a journal (PostgreSQL): the change is saved with a snapshot.
    pub(super) fn journal_slot(&self, _h: &AlertHandler) -> Option<journal::Slot<'_>> {
        self.journal.as_ref().map(journal::Journal::slot)
    }

    /// Appends the journal records of change `generation` through `slot` (taken under the
    /// lock with [`App::journal_slot`]): one write, in the OS when this returns (see
    /// `journal`).
    pub(super) fn journal_write(
        &self,
        slot: journal::Slot<'_>,
        generation: u64,
        entries: &[HealEntry],
    ) -> Journaled {
        let mut lines = Vec::with_capacity(entries.len() * 256);
        for e in entries {
            let _ = write!(lines, "{generation} ");
            if let Err(e) = serde_json::to_writer(&mut lines, e) {
                tracing::warn!("cannot encode an alert journal entry: {e}");
                return Journaled::NotEncoded;
            }
            lines.push(b'\n');
        }
        match slot.append(generation, &lines) {
            Ok(()) => {
                if self.journal_failing.swap(false, Ordering::Relaxed) {
                    tracing::warn!("the alert journal takes writes again");
                }
                Journaled::Written
            }
            Err(e) => {
                // Logged once until it works again: a full disk under an alert storm does not
                // make a log line per request.
                if !self.journal_failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "cannot write the alert journal: {e}; alerts are answered \
                         503 until it works again"
                    );
                }
                Journaled::Failed
            }
        }
    }

    /// Makes the journal records of change `generation` durable as `[server] alert_fsync`
    /// says: in the OS already (`periodic`), or fsynced by one `fdatasync` shared by the
    /// requests waiting together (`each`). Returns whether they are saved.
    /// Whether an accepted heal alert's answer waits for an fsync of its journal record
    /// (`alert_fsync = "each"`).
    pub(super) fn journal_syncs(&self) -> bool {
        self.journal.as_ref().is_some_and(journal::Journal::syncs)
    }

    pub(super) async fn flush_journal(&self, generation: u64) -> bool {
        match &self.journal {
            Some(j) => j.sync(generation).await,
            // Nothing was journaled (`journal_write` needs a slot): saved by `persist`.
            None => self.persist(generation).await,
        }
    }

    /// Writes every change of the alert state made so far (at a stop, and from the
    /// dispatcher for changes that need not be durable before the answer).
    pub(super) async fn persist_now(&self) {
        // A failure is logged by `persist`; the next call tries again.
        let _saved = self.persist(self.generation.load(Ordering::SeqCst)).await;
    }

    /// The package of `vnfd_id`, from the package index (never reads the folder): 422 when
    /// there is none.
    pub(super) fn package(&self, vnfd_id: &str) -> Result<Arc<VnfPackage>, ProblemDetails> {
        self.packages.get(vnfd_id)
    }

    /// Marks `id` busy, unless an operation runs on it (then a 409 ProblemDetails).
    pub(super) fn claim(&self, id: &VnfInstanceId) -> Result<(), ProblemDetails> {
        if !self.shared.claim(id) {
            return Err(ProblemDetails::new(
                409,
                format!(
                    "an LCM operation is in progress on VNF instance {id}, or stopped in \
                     FAILED_TEMP (fail it with POST /vnflcm/v2/vnf_lcm_op_occs/{{opOccId}}/fail); \
                     one operation at a time per instance"
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn release(&self, id: &VnfInstanceId) {
        self.shared.release(id);
    }

    /// The instance `id` and its package (as realised, for an instance deployed with a
    /// deployment intent).
    pub(super) async fn instance_and_package(
        &self,
        id: &VnfInstanceId,
    ) -> Result<(VnfInstance, Arc<VnfPackage>), ProblemDetails> {
        let inst = self.store.instance(id).await.map_err(|e| {
            if e.is_not_found() {
                lcm_problem(&LcmError::NotFound(id.clone()))
            } else {
                ProblemDetails::new(500, e.to_string())
            }
        })?;
        let pkg = self.package(&inst.vnfd_id)?;
        if inst
            .metadata
            .as_ref()
            .is_some_and(|m| m.contains_key(vnfm_core::intent::deploy::IntentRecord::METADATA_KEY))
        {
            let pkg = crate::intent::reapply(&inst, (*pkg).clone())
                .map(Arc::new)
                .map_err(|e| ProblemDetails::new(422, e.to_string()))?;
            return Ok((inst, pkg));
        }
        Ok((inst, pkg))
    }

    /// Runs `op` on `id` through [`Lifecycle::start`], with the server's Promise ledger as
    /// the book its reservation draws from and gives back to (see
    /// [`vnfm_core::lifecycle::start`]). A ledger that cannot be settled or given back after
    /// the operation is logged; the operation's result stands.
    pub(super) async fn run_op(
        &self,
        id: &VnfInstanceId,
        op: OpRequest,
        opts: &OperationOptions,
    ) -> Result<vnfm_core::lifecycle::OperationReport, ProblemDetails> {
        // The package (as realised, for an instance deployed with an intent); a terminate and
        // an operate need none.
        let pkg = match op.needs_package() {
            true => Some(self.instance_and_package(id).await?.1),
            false => None,
        };
        let book = ledger::ServerBook::new(&self.promise, &self.state);
        let start = StartOptions {
            operation: opts.clone(),
            book: Some(&book),
            delete_on_refusal: false,
        };
        let started = self
            .lcm
            .start(id, op, pkg.as_deref(), &start)
            .await
            .map_err(|e| start_problem(&e))?;
        if let Some(e) = &started.ledger_failure {
            tracing::warn!(
                "cannot settle or give back the reservation allocations of VNF \
                 instance {id}: {e}"
            );
        }
        Ok(started.report)
    }
}

/// The ProblemDetails of an operation [`Lifecycle::start`] did not run: a refused draw is 409
/// for constraints, capacity or a reservation that has not enough left, 422 for a bad
/// request or an unknown reservation, 503 for an unreachable VIM.
pub(crate) fn start_problem(e: &StartError) -> ProblemDetails {
    use vnfm_core::lifecycle::FailureKind as K;
    match e {
        StartError::Lcm(e) => lcm_problem(e),
        StartError::NoGrant { kind, .. } => {
            let status = match kind {
                K::Infeasible | K::CapacityExhausted => 409,
                K::Invalid => 422,
                K::Backend => 503,
                _ => 500,
            };
            ProblemDetails::new(status, e.to_string())
        }
        StartError::Draw { error, .. } => match error {
            BookError::Ledger(l) => ledger::ledger_problem_details(l),
            BookError::Unusable(m) => ProblemDetails::new(500, m.to_string()),
            BookError::NoLedger => ProblemDetails::new(422, e.to_string()),
        },
    }
}

/// A write running on its own task: counted in [`App::writes`] while it lives.
#[derive(Debug)]
pub(super) struct Write(Arc<App>);

impl Write {
    pub(super) fn start(app: &Arc<App>) -> Self {
        app.writes.fetch_add(1, Ordering::SeqCst);
        Self(app.clone())
    }
}

impl Drop for Write {
    fn drop(&mut self) {
        if self.0.writes.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The ProblemDetails of an operation that could not start.
pub(crate) fn lcm_problem(e: &LcmError) -> ProblemDetails {
    let status = match e {
        LcmError::NotFound(_) => 404,
        LcmError::Conflict(_) => 409,
        LcmError::Invalid(_) => 422,
        LcmError::Store(d) => return store_failure(d),
        _ => 500,
    };
    ProblemDetails::new(status, e.to_string())
}

/// The most characters of a store failure's causes that an answer and its log line carry.
const STORE_CAUSE_CHARS: usize = 1000;

/// The ProblemDetails of a failed state store, logged on stderr with its causes (at most
/// [`STORE_CAUSE_CHARS`] characters): 503 when the store is unavailable for a while (a full
/// disk, a writer holding the file: retry later), 500 otherwise.
pub(crate) fn store_failure(e: &vnfm_core::driver::DriverError) -> ProblemDetails {
    let mut cause = e.to_string();
    let mut cur = std::error::Error::source(e);
    while let Some(c) = cur {
        cause.push_str(": ");
        cause.push_str(&c.to_string());
        cur = c.source();
    }
    let cause = vnfm_core::input::shorten(&cause, STORE_CAUSE_CHARS);
    tracing::warn!("the state store failed: {cause}");
    let (status, then) = match e {
        vnfm_core::driver::DriverError::Unavailable { .. } => (503, "; retry later"),
        _ => (500, ""),
    };
    ProblemDetails::new(status, format!("the state store failed: {cause}{then}"))
}

/// Runs `op` on `id` (already claimed with [`App::claim`]) in the background. The receiver
/// gets the occurrence id once stored, or why the operation did not start.
pub(crate) fn spawn_op(
    app: &Arc<App>,
    id: VnfInstanceId,
    op: OpRequest,
    opts: OperationOptions,
) -> oneshot::Receiver<Result<OpOccId, ProblemDetails>> {
    let (tx, rx) = oneshot::channel();
    let started: Started = Arc::new(Mutex::new(Some(tx)));
    app.shared
        .started
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id.clone(), started.clone());
    // Cancellable (`POST .../cancel`), unless the caller brought its own interrupt.
    let mut opts = opts;
    let cancel = match &opts.interrupt {
        Some(_) => None,
        None => {
            let (token, interrupt) = app.cancels.register(&id);
            opts.interrupt = Some(interrupt);
            Some(token)
        }
    };
    app.running.fetch_add(1, Ordering::SeqCst);
    let app = app.clone();
    // In the span of the request that launched it (none for an alert's): the operation's
    // lines carry that request's id.
    let run = async move {
        let what = format!("{op:?}");
        let kind = what.split('(').next().unwrap_or("operation").to_lowercase();
        let result = app.run_op(&id, op, &opts).await;
        if let Some(token) = cancel {
            app.cancels.unregister(&id, token);
        }
        {
            let mut s = app
                .shared
                .started
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if s.get(&id).is_some_and(|x| Arc::ptr_eq(x, &started)) {
                s.remove(&id);
            }
        }
        // A stored end state released the instance already (see `observe`); an operation
        // that did not start, or whose end could not be stored, releases it here.
        if result.is_err() {
            app.release(&id);
        }
        match result {
            Err(p) => {
                if opts.automatic {
                    app.note_op(
                        id.as_str(),
                        None,
                        &format!(
                            "automatic {kind} of VNF instance {id} did not start: {}",
                            p.detail
                        ),
                    );
                }
                super::observe::send_started(&started, Err(p));
            }
            Ok(report) => {
                app.note_op(
                    id.as_str(),
                    Some(report.op_occ.id.as_str()),
                    &format!(
                        "{}{kind} of VNF instance {id}: operation {} {}{}",
                        if opts.automatic { "automatic " } else { "" },
                        report.op_occ.id,
                        crate::render::lcm::sol(&report.op_occ.operation_state),
                        report
                            .op_occ
                            .error
                            .as_ref()
                            .map(|e| format!(": {}", e.detail))
                            .unwrap_or_default()
                    ),
                );
                app.save_sim().await;
            }
        }
        if app.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            app.idle.notify_waiters();
        }
    };
    tokio::spawn(run.in_current_span());
    rx
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::store::SqliteStore;
    use chrono::{TimeZone, Utc};
    use vnfm_core::alert::{AlertKey, PrometheusPluginConfig};

    fn entry(vnfc: &str, fp: &str, secs: i64) -> HealEntry {
        let at = Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap();
        HealEntry {
            instance: VnfInstanceId::new("i"),
            vnfc: vnfc.into(),
            alert: AlertKey {
                fingerprint: fp.into(),
                starts_at: at,
            },
            at,
        }
    }

    fn doc(e: &HealEntry) -> String {
        serde_json::to_string(e).unwrap()
    }

    #[test]
    fn a_full_disk_answers_503_naming_the_cause() {
        let full = vnfm_core::driver::DriverError::Unavailable {
            driver: "sqlite",
            message: "state.sqlite: committing: the disk is full (database or disk is full)".into(),
        };
        let p = lcm_problem(&LcmError::Store(full));
        assert_eq!(p.status, 503);
        assert!(
            p.detail
                .contains("the state store failed: sqlite: unavailable: state.sqlite")
                && p.detail.contains("the disk is full")
                && p.detail.ends_with("retry later"),
            "{}",
            p.detail
        );
        // A long cause is cut.
        let other = vnfm_core::driver::DriverError::Other {
            driver: "sqlite",
            message: "x".repeat(100_000),
            source: None,
        };
        let p = lcm_problem(&LcmError::Store(other));
        assert_eq!(p.status, 500);
        assert!(p.detail.len() < 1100, "{}", p.detail.len());
    }

    #[tokio::test]
    async fn the_saved_state_is_the_snapshot_then_the_journal_after_it() {
        let sqlite = SqliteStore::open_in_memory().unwrap();
        let cfg = PrometheusPluginConfig::default().with_all_enabled();
        // Nothing saved: an empty handler.
        let h = load_alert_handler(&sqlite, &cfg).await.unwrap();
        assert_eq!(h.snapshot(), AlertState::default());

        // A snapshot at generation 2 holding VDU1's alert; journal entries of generations 1
        // (covered by the snapshot: skipped), 3 and 4.
        let mut saved = AlertHandler::new(cfg.clone());
        saved.replay_heal(&entry("VDU1", "a", 0));
        let skipped = entry("VDU9", "z", 1);
        sqlite
            .write_documents(
                vec![
                    (
                        ALERT_DOCUMENT.into(),
                        serde_json::to_string(&saved.snapshot()).unwrap(),
                    ),
                    (ALERT_GENERATION_DOCUMENT.into(), "2".into()),
                    (journal_name(1, 0), doc(&skipped)),
                    (journal_name(3, 0), doc(&entry("VDU2", "b", 2))),
                    (journal_name(4, 0), doc(&entry("VDU3", "c", 3))),
                    (journal_name(4, 1), doc(&entry("VDU2", "b", 2))),
                ],
                None,
                Flush::Deferred,
            )
            .await
            .unwrap();
        let h = load_alert_handler(&sqlite, &cfg).await.unwrap();
        let window = h
            .heal_batcher()
            .pending(&VnfInstanceId::new("i"))
            .unwrap()
            .clone();
        assert_eq!(window.vnfcs, ["VDU1", "VDU2", "VDU3"]);
        assert_eq!(window.alerts.len(), 3, "the repeated entry is a duplicate");

        // A snapshot at generation 4 drops the entries it covers.
        sqlite
            .write_documents(
                vec![(ALERT_GENERATION_DOCUMENT.into(), "4".into())],
                Some(journal_through(4)),
                Flush::Commit,
            )
            .await
            .unwrap();
        assert!(sqlite
            .documents_with_prefix(ALERT_JOURNAL_PREFIX)
            .await
            .unwrap()
            .is_empty());

        // A damaged entry is named.
        sqlite
            .write_documents(vec![(journal_name(5, 0), "{".into())], None, Flush::Commit)
            .await
            .unwrap();
        let e = load_alert_handler(&sqlite, &cfg).await.unwrap_err();
        assert!(e.contains(&journal_name(5, 0)), "{e}");
    }
}

/// The interrupts of the operations this server runs, by instance (one operation at a time
/// per instance): what a cancel triggers. Bounded by the number of running operations.
#[derive(Debug, Default)]
pub(crate) struct Cancels {
    next: AtomicU64,
    by_instance: Mutex<HashMap<VnfInstanceId, (u64, Interrupt)>>,
}

impl Cancels {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<VnfInstanceId, (u64, Interrupt)>> {
        self.by_instance
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A new interrupt for the operation about to run on `id`, and the token that
    /// [`Cancels::unregister`] takes when it ends.
    pub(crate) fn register(&self, id: &VnfInstanceId) -> (u64, Interrupt) {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let i = Interrupt::new();
        self.map().insert(id.clone(), (token, i.clone()));
        (token, i)
    }

    /// Forgets the interrupt of `token` (a later operation's is kept).
    pub(crate) fn unregister(&self, id: &VnfInstanceId, token: u64) {
        let mut m = self.map();
        if m.get(id).is_some_and(|(t, _)| *t == token) {
            m.remove(id);
        }
    }

    /// Triggers the interrupt of the operation running on `id`; false when none runs here.
    pub(crate) fn trigger(&self, id: &VnfInstanceId, reason: &str) -> bool {
        match self.map().get(id) {
            Some((_, i)) => {
                i.trigger(reason);
                true
            }
            None => false,
        }
    }
}

pub(super) async fn launch(app: Arc<App>, id: String, op: OpRequest) -> Response {
    let id = VnfInstanceId::from(id);
    if let Err(p) = app.claim(&id) {
        return problem(p);
    }
    let rx = spawn_op(&app, id, op, OperationOptions::default());
    match rx.await {
        Ok(Ok(op_id)) => with_location(
            StatusCode::ACCEPTED.into_response(),
            &lcm_op_occ_href(&op_id),
        ),
        Ok(Err(p)) => problem(p),
        Err(_) => problem(ProblemDetails::new(
            500,
            "the operation ended before it was recorded",
        )),
    }
}
