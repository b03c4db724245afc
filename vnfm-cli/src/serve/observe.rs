//! What the server learns from its lifecycle's events ([`ServerObserver`]): every commit also
//! writes the outbox entries of the SOL003 notifications it causes (added to the batch before
//! it, so in the same transaction), updates the bounded instance cache (read by the alert
//! endpoints), the operation metrics and the [`Occupancy`] of the instances (whose events free
//! or hold them for the alert handler), and tells the request that launched an operation the id
//! of its occurrence as soon as it is stored.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{oneshot, Notify};
use vnfm_core::alert::AlertHandler;
use vnfm_core::driver::{DriverError, StoreBatch};
use vnfm_core::id::{OpOccId, VnfInstanceId};
use vnfm_core::lcm::{LcmOperationStateType, VnfInstance, VnfLcmOpOcc};
use vnfm_core::lifecycle::{
    CommitTicket, LifecycleEvent, LifecycleObserver, Occupancy, OperationEvent,
};
use vnfm_core::problem::ProblemDetails;

use super::metrics::Metrics;
use crate::render::lcm::sol;
use crate::state_store::StateStore;

/// Where the id of a started occurrence (or the reason it did not start) goes.
pub(crate) type Started = Arc<Mutex<Option<oneshot::Sender<Result<OpOccId, ProblemDetails>>>>>;

/// State shared by the store wrapper and the server.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The alert handler; its busy marks are the one-operation-per-instance lock.
    pub alerts: Mutex<AlertHandler>,
    /// Wakes the heal dispatcher.
    pub wake: Notify,
    /// Held (write) across a commit and its bookkeeping; API reads hold it (read) so that a
    /// client never sees an occurrence's end before the instance is free for the next one.
    pub gate: Arc<tokio::sync::RwLock<()>>,
    /// Recently used VNF instances, as last committed or read (bounded: `instance_cache`).
    pub cache: super::instance_cache::InstanceCache,
    /// The counters.
    pub metrics: Metrics,
    /// Requests waiting for the occurrence of the operation they launched, by instance.
    pub started: Mutex<HashMap<VnfInstanceId, Started>>,
    /// The SOL003 subscriptions and the outbox of their notifications, written with every
    /// commit (`outbox`).
    pub outbox: super::outbox::Outbox,
    /// Which instances take no other operation now (the core decides from the occurrences
    /// this server stores and reads back); its events mark the alert handler busy or idle.
    occupancy: Mutex<Occupancy>,
}

impl Shared {
    pub(crate) fn new(alerts: AlertHandler, cache: super::instance_cache::InstanceCache) -> Self {
        Self {
            alerts: Mutex::new(alerts),
            wake: Notify::new(),
            gate: Arc::new(tokio::sync::RwLock::new(())),
            cache,
            metrics: Metrics::default(),
            started: Mutex::default(),
            outbox: super::outbox::Outbox::default(),
            occupancy: Mutex::default(),
        }
    }

    fn occupancy(&self) -> std::sync::MutexGuard<'_, Occupancy> {
        self.occupancy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands an event of the occupancy to the alert handler; an end wakes the dispatcher (a
    /// queued heal may run now).
    fn apply(&self, event: Option<OperationEvent>) {
        let Some(event) = event else {
            return;
        };
        self.alerts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .handle_operation_event(&event);
        if matches!(event, OperationEvent::Ended { .. }) {
            self.wake.notify_one();
        }
    }

    /// Takes `instance` for a request of this server, unless an operation (or a heal the alert
    /// handler runs) takes it.
    pub(crate) fn claim(&self, instance: &VnfInstanceId) -> bool {
        if self
            .alerts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_busy(instance)
        {
            return false;
        }
        let event = self.occupancy().claim(instance);
        match event {
            Ok(e) => {
                self.apply(Some(e));
                true
            }
            Err(_) => false,
        }
    }

    /// Keeps `instance` busy until `op` (not over: e.g. another program's `FAILED_TEMP`) is.
    pub(crate) fn hold(&self, instance: &VnfInstanceId, op: &VnfLcmOpOcc) {
        let event = self.occupancy().hold(op);
        self.apply(event);
        // Busy whether or not the occupancy changed: the alert handler's heal queue waits.
        self.alerts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .mark_busy(instance);
    }

    /// The stopped occurrences that take an instance (another program may end them).
    pub(crate) fn held(&self) -> Vec<(VnfInstanceId, OpOccId)> {
        self.occupancy().stopped()
    }

    /// `op`, read back from the store, or `None` when it no longer exists: frees its instance
    /// if it is over.
    pub(crate) fn read_back(
        &self,
        instance: &VnfInstanceId,
        id: &OpOccId,
        op: Option<&VnfLcmOpOcc>,
    ) {
        let event = match op {
            Some(op) => self.occupancy().observe(op),
            None => self.occupancy().gone(instance, id),
        };
        self.apply(event);
    }

    /// Frees `instance` whatever took it (a request that did not start, a heal with nothing
    /// left to do) and wakes the dispatcher.
    pub(crate) fn release(&self, instance: &VnfInstanceId) {
        let _ = self.occupancy().release(instance);
        self.alerts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .mark_idle(instance);
        self.wake.notify_one();
    }
}

/// Sends `value` once through `started` (later sends are dropped).
pub(crate) fn send_started(started: &Started, value: Result<OpOccId, ProblemDetails>) {
    let tx = started
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(tx) = tx {
        let _ = tx.send(value);
    }
}

/// What the server learns from its lifecycle's commits ([`LifecycleObserver`]): before a
/// commit, under the gate, the SOL003 notifications it causes are staged and added to the batch
/// (written in its transaction: the outbox); after it, the instance cache, the metrics, the
/// occupancy and the "started" senders follow, and the gate is released.
#[derive(Debug, Clone)]
pub(crate) struct ServerObserver {
    shared: Arc<Shared>,
    /// The store several replicas share (PostgreSQL): each commit's outbox entries are
    /// numbered from it, and the subscriptions read again first when another replica changed
    /// them. `None` on SQLite (one server).
    replicated: Option<StateStore>,
}

/// What [`ServerObserver::prepare`] keeps until its batch's event: the gate, held across the
/// commit, the notifications staged for it, and the instances the batch names as they were
/// before it (read under the gate: what the outbox decides from).
struct Prepared {
    _gate: tokio::sync::OwnedRwLockWriteGuard<()>,
    staged: super::outbox::Staged,
    before: BTreeMap<VnfInstanceId, VnfInstance>,
}

impl ServerObserver {
    pub(crate) fn new(shared: Arc<Shared>, state: &StateStore) -> Self {
        Self {
            shared,
            replicated: state.is_shared().then(|| state.clone()),
        }
    }

    /// The outbox entries of `batch` (under the gate): on a shared store, the subscriptions
    /// are read again first when another replica changed them, and the entries numbered from
    /// the database; a commit whose notifications cannot be numbered (the database did not
    /// answer, and the commit will most likely fail too) writes none, logged and counted as
    /// failed.
    async fn stage(
        &self,
        batch: &StoreBatch,
        before: &BTreeMap<VnfInstanceId, VnfInstance>,
    ) -> super::outbox::Staged {
        let outbox = &self.shared.outbox;
        let Some(state) = &self.replicated else {
            let planned = outbox.plan(batch, before);
            return outbox.stage_planned(planned, None);
        };
        match outbox.stale(state).await {
            Ok(Some(stamp)) => {
                if let Err(e) = outbox.reload(state, stamp).await {
                    tracing::warn!("cannot read the subscriptions again: {e}");
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("cannot read the subscriptions' stamp: {e}"),
        }
        let planned = outbox.plan(batch, before);
        if planned.is_empty() {
            return super::outbox::Staged::default();
        }
        match state.outbox_sequences(planned.len()).await {
            Ok(numbers) => outbox.stage_planned(planned, numbers),
            Err(e) => {
                let n = planned.len() as u64;
                outbox
                    .counters
                    .failed
                    .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(
                    "{n} notification(s) of a commit not written to the outbox: cannot number \
                     them: {e}"
                );
                super::outbox::Staged::default()
            }
        }
    }

    /// `changed`: the indices of `ops` that changed state (what the operations metric counts;
    /// a commit that saves progress or renews a lease is not a state entered).
    fn observe(
        &self,
        ops: &[VnfLcmOpOcc],
        changed: &[usize],
        put: &[VnfInstance],
        deleted: &[VnfInstanceId],
    ) {
        for i in put {
            self.shared.cache.put(i.clone());
        }
        for id in deleted {
            self.shared.cache.remove(id);
        }
        for (n, op) in ops.iter().enumerate() {
            let m = &self.shared.metrics;
            if changed.contains(&n) {
                m.operation(sol(&op.operation), sol(&op.operation_state));
                log_state(op);
            }
            // STARTING for a new operation; PROCESSING / ROLLING_BACK for a retry or a
            // rollback (the first commit of each; later ones find the sender taken).
            if matches!(
                op.operation_state,
                LcmOperationStateType::Starting
                    | LcmOperationStateType::Processing
                    | LcmOperationStateType::RollingBack
            ) {
                let started = self
                    .shared
                    .started
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&op.vnf_instance_id)
                    .cloned();
                if let Some(s) = started {
                    send_started(&s, Ok(op.id.clone()));
                }
            }
            if matches!(
                op.operation_state,
                LcmOperationStateType::Completed | LcmOperationStateType::FailedTemp
            ) {
                m.reselections(op.attempts.len().saturating_sub(1) as u64);
            }
            // The core decides what the state means for the instance (FAILED_TEMP is not
            // over; an end frees it at once, so a client that saw it never gets a 409).
            let event = self.shared.occupancy().observe(op);
            self.shared.apply(event);
        }
    }
}

/// Logs the state `op` entered (just committed), with its instance id and its operation id:
/// a start, a step (PROCESSING, ROLLING_BACK) and an end at `info`, a failure at `warn` with
/// its detail. Every replica logs the commits it makes: whichever replica runs an operation,
/// its lines carry the same `operation_id` (docs/replicas.md).
fn log_state(op: &VnfLcmOpOcc) {
    let operation = sol(&op.operation);
    let state = sol(&op.operation_state);
    let instance_id = op.vnf_instance_id.to_string();
    let operation_id = op.id.to_string();
    match op.operation_state {
        LcmOperationStateType::Failed | LcmOperationStateType::FailedTemp => tracing::warn!(
            %instance_id,
            %operation_id,
            %operation,
            %state,
            error = op.error.as_ref().map(|e| e.detail.as_str()).unwrap_or(""),
            "operation {operation}: {state}"
        ),
        _ => tracing::info!(
            %instance_id,
            %operation_id,
            %operation,
            %state,
            "operation {operation}: {state}"
        ),
    }
}

#[async_trait::async_trait]
impl LifecycleObserver for ServerObserver {
    async fn prepare(&self, batch: &mut StoreBatch) -> CommitTicket {
        let gate = self.shared.gate.clone().write_owned().await;
        // The instances the batch names, as stored before it (the cache holds a bounded few).
        let ids = batch
            .put_instances
            .iter()
            .map(|i| &i.id)
            .chain(&batch.delete_instances)
            .chain(batch.put_op_occs.iter().map(|o| &o.vnf_instance_id))
            .cloned();
        let before = self.shared.cache.load_or_cached(ids).await;
        // The notifications of the commit are written in its transaction (the outbox).
        let mut staged = self.stage(batch, &before).await;
        batch.documents.append(&mut staged.docs);
        batch.prune_documents.append(&mut staged.prune);
        CommitTicket::new(Prepared {
            _gate: gate,
            staged,
            before,
        })
    }

    async fn event(
        &self,
        event: &LifecycleEvent<'_>,
        ticket: CommitTicket,
    ) -> Result<(), DriverError> {
        let Some(prepared) = ticket.take::<Prepared>() else {
            return Ok(());
        };
        match event {
            LifecycleEvent::Committed(batch) => {
                let mut done = StoreBatch::new();
                done.put_op_occs.clone_from(&batch.put_op_occs);
                done.delete_instances.clone_from(&batch.delete_instances);
                let changed = self
                    .shared
                    .outbox
                    .record(&done, prepared.staged, &prepared.before);
                self.observe(
                    &batch.put_op_occs,
                    &changed,
                    &batch.put_instances,
                    &batch.delete_instances,
                );
            }
            LifecycleEvent::CommitFailed(..) => self.shared.outbox.discard(&prepared.staged),
            _ => {}
        }
        Ok(())
    }
}
