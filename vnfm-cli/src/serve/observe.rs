//! The state store as the server sees it: every commit also updates the in-memory instance
//! cache (read by the alert endpoints), the operation metrics, and tells the request that
//! launched an operation the id of its occurrence as soon as it is stored.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use tokio::sync::{oneshot, Notify};
use vnfm_core::alert::AlertHandler;
use vnfm_core::driver::{DriverError, OpOccFilter, Store, StoreBatch, Versioned};
use vnfm_core::id::{OpOccId, VnfInstanceId};
use vnfm_core::lcm::{LcmOperationStateType, VnfInstance, VnfLcmOpOcc};
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
    /// Instances kept busy by an occurrence in `FAILED_TEMP` (or another state that is not
    /// over), with that occurrence: released when it is failed or rolled back, through this
    /// server or by another program on the state file (see [`Shared::held`]).
    held: Mutex<BTreeMap<VnfInstanceId, OpOccId>>,
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
            held: Mutex::default(),
        }
    }

    /// Keeps `instance` busy until `op` is over (it stopped without ending: `FAILED_TEMP`).
    pub(crate) fn hold(&self, instance: &VnfInstanceId, op: &OpOccId) {
        self.alerts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .mark_busy(instance);
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(instance.clone(), op.clone());
    }

    /// Releases `instance` if `op` still holds it (an operation started since then keeps it
    /// busy).
    pub(crate) fn release_hold(&self, instance: &VnfInstanceId, op: &OpOccId) {
        let still = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(instance)
            == Some(op);
        if still {
            self.release(instance);
        }
    }

    /// The instances held by an occurrence that is not over, with it.
    pub(crate) fn held(&self) -> Vec<(VnfInstanceId, OpOccId)> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(i, o)| (i.clone(), o.clone()))
            .collect()
    }

    /// Ends the claim on `instance` and wakes the dispatcher (a queued heal may run now).
    pub(crate) fn release(&self, instance: &VnfInstanceId) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(instance);
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

    fn observe(&self, ops: &[VnfLcmOpOcc], put: Vec<VnfInstance>, deleted: &[VnfInstanceId]) {
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
        for op in ops {
            let m = &self.shared.metrics;
            m.operation(sol(&op.operation), sol(&op.operation_state));
            match op.operation_state {
                LcmOperationStateType::Starting => {
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
                LcmOperationStateType::Completed => {
                    m.reselections(op.attempts.len().saturating_sub(1) as u64);
                    // The operation is over once this is stored: the instance takes the next
                    // one at once (a client that saw this state must not get a 409).
                    self.shared.release(&op.vnf_instance_id);
                }
                LcmOperationStateType::FailedTemp => {
                    // Not over (SOL003): the instance takes no other operation until this one
                    // is failed, so it stays busy; a heal window for it waits, a scale alert
                    // is ignored as `operation_in_progress`.
                    m.reselections(op.attempts.len().saturating_sub(1) as u64);
                    self.shared.hold(&op.vnf_instance_id, &op.id);
                }
                LcmOperationStateType::Failed | LcmOperationStateType::RolledBack => {
                    self.shared.release(&op.vnf_instance_id);
                }
                _ => {}
            }
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
        self.inner.commit(batch).await?;
        self.observe(&ops, put, &deleted);
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
