//! The state store as the server sees it: every commit also writes the outbox entries of the
//! SOL003 notifications it causes (in the same transaction), updates the in-memory instance
//! cache (read by the alert endpoints), the operation metrics and the [`Occupancy`] of the
//! instances (whose events free or hold them for the alert handler), and tells the request
//! that launched an operation the id of its occurrence as soon as it is stored.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use tokio::sync::{oneshot, Notify};
use vnfm_core::alert::AlertHandler;
use vnfm_core::driver::{DriverError, OpOccFilter, Store, StoreBatch, Versioned};
use vnfm_core::id::{OpOccId, VnfInstanceId};
use vnfm_core::lcm::{LcmOperationStateType, VnfInstance, VnfLcmOpOcc};
use vnfm_core::lifecycle::{Occupancy, OperationEvent};
use vnfm_core::problem::ProblemDetails;

use super::metrics::Metrics;
use crate::render::lcm::sol;
use crate::store::SqliteStore;

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
    pub gate: tokio::sync::RwLock<()>,
    /// Every VNF instance, as last committed.
    pub cache: RwLock<BTreeMap<VnfInstanceId, VnfInstance>>,
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
    pub(crate) fn new(alerts: AlertHandler) -> Self {
        Self {
            alerts: Mutex::new(alerts),
            wake: Notify::new(),
            gate: tokio::sync::RwLock::new(()),
            cache: RwLock::default(),
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

/// [`SqliteStore`] plus the bookkeeping of [`Shared`].
#[derive(Debug, Clone)]
pub(crate) struct ObservedStore {
    inner: SqliteStore,
    shared: Arc<Shared>,
}

impl ObservedStore {
    pub(crate) fn new(inner: SqliteStore, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }

    /// `changed`: the indices of `ops` that changed state (what the operations metric counts;
    /// a commit that saves progress or renews a lease is not a state entered).
    fn observe(
        &self,
        ops: &[VnfLcmOpOcc],
        changed: &[usize],
        put: Vec<VnfInstance>,
        deleted: &[VnfInstanceId],
    ) {
        {
            let mut cache = self
                .shared
                .cache
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            for i in put {
                cache.insert(i.id.clone(), i);
            }
            for id in deleted {
                cache.remove(id);
            }
        }
        for (n, op) in ops.iter().enumerate() {
            let m = &self.shared.metrics;
            if changed.contains(&n) {
                m.operation(sol(&op.operation), sol(&op.operation_state));
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

#[async_trait::async_trait]
impl Store for ObservedStore {
    async fn commit(&self, batch: StoreBatch) -> Result<(), DriverError> {
        let ops = batch.put_op_occs.clone();
        let put = batch.put_instances.clone();
        let deleted = batch.delete_instances.clone();
        let _gate = self.shared.gate.write().await;
        // The notifications of the commit are written in its transaction (the outbox).
        let mut staged = self.shared.outbox.stage(&batch, &self.shared.cache);
        let mut done = StoreBatch::new();
        done.put_op_occs.clone_from(&ops);
        done.delete_instances.clone_from(&deleted);
        let committed = if staged.docs.is_empty() && staged.prune.is_empty() {
            self.inner.commit(batch).await
        } else {
            let docs = std::mem::take(&mut staged.docs);
            let prune = std::mem::take(&mut staged.prune);
            self.inner.commit_with_outbox(batch, docs, prune).await
        };
        if let Err(e) = committed {
            self.shared.outbox.discard(&staged);
            return Err(e);
        }
        let changed = self.shared.outbox.record(&done, staged, &self.shared.cache);
        self.observe(&ops, &changed, put, &deleted);
        Ok(())
    }

    async fn instance(&self, id: &VnfInstanceId) -> Result<VnfInstance, DriverError> {
        self.inner.instance(id).await
    }

    async fn instance_entry(
        &self,
        id: &VnfInstanceId,
    ) -> Result<Versioned<VnfInstance>, DriverError> {
        self.inner.instance_entry(id).await
    }

    async fn op_occ_entry(&self, id: &OpOccId) -> Result<Versioned<VnfLcmOpOcc>, DriverError> {
        self.inner.op_occ_entry(id).await
    }

    async fn instances(&self) -> Result<Vec<VnfInstance>, DriverError> {
        self.inner.instances().await
    }

    async fn op_occ(&self, id: &OpOccId) -> Result<VnfLcmOpOcc, DriverError> {
        self.inner.op_occ(id).await
    }

    async fn op_occs(&self, filter: OpOccFilter) -> Result<Vec<VnfLcmOpOcc>, DriverError> {
        self.inner.op_occs(filter).await
    }
}
