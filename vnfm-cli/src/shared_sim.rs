//! The simulated cloud shared by the processes on one PostgreSQL database (replicas of
//! `vnfm serve`): every call of a driver runs under the lock of the cloud's document
//! ([`PgStore::with_locked_document`]), on this process's copy brought up to date first when
//! another process changed the document, and the copy is written back when the call changed
//! it. So the replicas see one cloud, as they would see one OpenStack: a stack one replica
//! created is there for the replica that heals it, and capacity is counted once.
//!
//! The calls of one process are also one at a time (a lock of its own), and each takes a
//! snapshot of the whole cloud to see whether it changed: a simulator's cost, not a real
//! cloud's.

use std::future::Future;

use async_trait::async_trait;
use tokio::sync::Mutex;
use vnfm_core::driver::{
    ApplyObject, ClusterDriver, ClusterEvent, ClusterNode, ComputeInventory, CreateStack,
    DeletePod, DriverError, EvictPod, LabelNode, ListEvents, ListPods, ListResources,
    ListWorkloads, ListZones, MarkUnhealthy, ObjectRef, Pod, ScaleWorkload, ServerInfo, Stack,
    StackDriver, StackResource, UpdateStack, ZoneCatalog,
};
use vnfm_core::id::{ServerId, StackId};
use vnfm_core::sim::SimCloud;
use vnfm_core::zone::ComputeZone;

use crate::store_postgres::PgStore;

/// What this process last saw of the cloud's document.
#[derive(Debug, Default)]
struct Seen {
    /// Its stamp (`None`: not read or written yet).
    stamp: Option<i64>,
    /// The snapshot last read or written: a call that leaves the copy so writes nothing.
    body: Option<String>,
}

/// A [`SimCloud`] whose state is the document `document` of a PostgreSQL database, shared
/// with the other processes on it. See the [module docs](self).
#[derive(Debug)]
pub struct SharedSim {
    sim: SimCloud,
    store: PgStore,
    document: &'static str,
    seen: Mutex<Seen>,
}

impl SharedSim {
    /// `sim` (this process's copy, as opened from the database) kept in step with the document
    /// `document` of `store`.
    pub fn new(sim: SimCloud, store: PgStore, document: &'static str) -> Self {
        Self {
            sim,
            store,
            document,
            seen: Mutex::new(Seen::default()),
        }
    }

    /// Runs `call` on the copy under the document's lock (see the [module docs](self)).
    async fn call<T, F, Fut>(&self, call: F) -> Result<T, DriverError>
    where
        F: FnOnce(SimCloud) -> Fut + Send,
        Fut: Future<Output = Result<T, DriverError>> + Send,
        T: Send,
    {
        let mut seen = self.seen.lock().await;
        let sim = self.sim.clone();
        let last = seen.body.clone();
        // Taken: set again only once the call's changes are written, so that a call whose
        // changes were not (the database failed, or this future was dropped midway) reads the
        // document again next time instead of writing them later as if they had been.
        let known = seen.stamp.take();
        let ((out, now), stamp) = self
            .store
            .with_locked_document(self.document, known, |current| async move {
                let mut base = last;
                if let Some(body) = current {
                    sim.load(&body)?;
                    base = Some(body);
                }
                // The call's own failure is its answer; what it changed is kept either way.
                let out = call(sim.clone()).await;
                let after = sim.snapshot()?;
                let write = (base.as_deref() != Some(after.as_str())).then(|| after.clone());
                Ok(((out, after), write))
            })
            .await?;
        seen.stamp = stamp;
        seen.body = Some(now);
        out
    }
}

#[async_trait]
impl StackDriver for SharedSim {
    async fn create_stack(&self, req: CreateStack) -> Result<StackId, DriverError> {
        self.call(|s| async move { s.create_stack(req).await })
            .await
    }
    async fn update_stack(&self, req: UpdateStack) -> Result<(), DriverError> {
        self.call(|s| async move { s.update_stack(req).await })
            .await
    }
    async fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError> {
        let id = id.clone();
        self.call(|s| async move { s.show_stack(&id).await }).await
    }
    async fn delete_stack(&self, id: &StackId) -> Result<(), DriverError> {
        let id = id.clone();
        self.call(|s| async move { s.delete_stack(&id).await })
            .await
    }
    async fn list_resources(&self, req: ListResources) -> Result<Vec<StackResource>, DriverError> {
        self.call(|s| async move { s.list_resources(req).await })
            .await
    }
    async fn mark_unhealthy(&self, req: MarkUnhealthy) -> Result<(), DriverError> {
        self.call(|s| async move { s.mark_unhealthy(req).await })
            .await
    }
}

#[async_trait]
impl ZoneCatalog for SharedSim {
    async fn list_zones(&self, opts: ListZones) -> Result<Vec<ComputeZone>, DriverError> {
        self.call(|s| async move { s.list_zones(opts).await }).await
    }
}

#[async_trait]
impl ComputeInventory for SharedSim {
    async fn server(&self, id: &ServerId) -> Result<ServerInfo, DriverError> {
        let id = id.clone();
        self.call(|s| async move { s.server(&id).await }).await
    }
    async fn start_server(&self, id: &ServerId) -> Result<(), DriverError> {
        let id = id.clone();
        self.call(|s| async move { s.start_server(&id).await })
            .await
    }
    async fn stop_server(&self, id: &ServerId) -> Result<(), DriverError> {
        let id = id.clone();
        self.call(|s| async move { s.stop_server(&id).await }).await
    }
}

#[async_trait]
impl ClusterDriver for SharedSim {
    async fn list_nodes(&self) -> Result<Vec<ClusterNode>, DriverError> {
        self.call(|s| async move { s.list_nodes().await }).await
    }
    async fn label_node(&self, req: LabelNode) -> Result<(), DriverError> {
        self.call(|s| async move { s.label_node(req).await }).await
    }
    async fn apply_object(&self, req: ApplyObject) -> Result<(), DriverError> {
        self.call(|s| async move { s.apply_object(req).await })
            .await
    }
    async fn delete_object(&self, req: ObjectRef) -> Result<(), DriverError> {
        self.call(|s| async move { s.delete_object(req).await })
            .await
    }
    async fn list_workloads(
        &self,
        req: ListWorkloads,
    ) -> Result<Vec<serde_json::Value>, DriverError> {
        self.call(|s| async move { s.list_workloads(req).await })
            .await
    }
    async fn scale_workload(&self, req: ScaleWorkload) -> Result<(), DriverError> {
        self.call(|s| async move { s.scale_workload(req).await })
            .await
    }
    async fn list_pods(&self, req: ListPods) -> Result<Vec<Pod>, DriverError> {
        self.call(|s| async move { s.list_pods(req).await }).await
    }
    async fn delete_pod(&self, req: DeletePod) -> Result<(), DriverError> {
        self.call(|s| async move { s.delete_pod(req).await }).await
    }
    async fn evict_pod(&self, req: EvictPod) -> Result<(), DriverError> {
        self.call(|s| async move { s.evict_pod(req).await }).await
    }
    async fn list_events(&self, req: ListEvents) -> Result<Vec<ClusterEvent>, DriverError> {
        self.call(|s| async move { s.list_events(req).await }).await
    }
}
