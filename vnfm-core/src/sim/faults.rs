//! Fault injection: [`FaultySim`] wraps a [`SimCloud`] and implements the same traits, failing
//! chosen calls (in the shape of object_store's `ThrottledStore`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::cloud::SimCloud;
use super::failure::{BuildFault, StackDeleteFault, DRIVER};
use crate::driver::{
    ApplyObject, ClusterDriver, ClusterEvent, ClusterNode, ComputeInventory, CreateStack,
    DeletePod, DriverError, EvictPod, LabelNode, ListEvents, ListPods, ListResources,
    ListWorkloads, ListZones, MarkUnhealthy, ObjectRef, Pod, ScaleWorkload, ServerInfo, Stack,
    StackDriver, StackResource, UpdateStack, ZoneCatalog,
};
use crate::id::{ServerId, StackId};
use crate::zone::ComputeZone;

/// A driver trait method whose next calls can be made to fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Method {
    /// [`StackDriver::create_stack`]
    CreateStack,
    /// [`StackDriver::update_stack`]
    UpdateStack,
    /// [`StackDriver::show_stack`]
    ShowStack,
    /// [`StackDriver::delete_stack`]
    DeleteStack,
    /// [`StackDriver::list_resources`]
    ListResources,
    /// [`StackDriver::mark_unhealthy`]
    MarkUnhealthy,
    /// [`ZoneCatalog::list_zones`]
    ListZones,
    /// [`ComputeInventory::server`]
    Server,
    /// [`ClusterDriver::list_nodes`]
    ListNodes,
    /// [`ClusterDriver::label_node`]
    LabelNode,
    /// [`ClusterDriver::apply_object`]
    ApplyObject,
    /// [`ClusterDriver::delete_object`]
    DeleteObject,
    /// [`ClusterDriver::list_workloads`]
    ListWorkloads,
    /// [`ClusterDriver::scale_workload`]
    ScaleWorkload,
    /// [`ClusterDriver::list_pods`]
    ListPods,
    /// [`ClusterDriver::delete_pod`]
    DeletePod,
    /// [`ClusterDriver::evict_pod`]
    EvictPod,
    /// [`ClusterDriver::list_events`]
    ListEvents,
}

/// The [`DriverError`] kind an injected fault returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultKind {
    /// [`DriverError::NotFound`]
    NotFound,
    /// [`DriverError::Conflict`]
    Conflict,
    /// [`DriverError::AlreadyExists`] (Heat's 409 for a stack name that is taken)
    AlreadyExists,
    /// [`DriverError::QuotaExceeded`]
    QuotaExceeded,
    /// [`DriverError::Invalid`]
    Invalid,
    /// [`DriverError::Unauthenticated`]
    Unauthenticated,
    /// [`DriverError::PermissionDenied`]
    PermissionDenied,
    /// [`DriverError::Unavailable`] (retryable)
    Unavailable,
    /// [`DriverError::Other`]
    Other,
}

impl FaultKind {
    fn error(self, method: Method) -> DriverError {
        let message = format!("injected fault in {method:?}");
        let driver = DRIVER;
        match self {
            FaultKind::NotFound => DriverError::NotFound {
                driver,
                what: message,
            },
            FaultKind::Conflict => DriverError::Conflict { driver, message },
            FaultKind::AlreadyExists => DriverError::AlreadyExists {
                driver,
                what: message,
            },
            FaultKind::QuotaExceeded => DriverError::QuotaExceeded { driver, message },
            FaultKind::Invalid => DriverError::Invalid { driver, message },
            FaultKind::Unauthenticated => DriverError::Unauthenticated { driver, message },
            FaultKind::PermissionDenied => DriverError::PermissionDenied { driver, message },
            FaultKind::Unavailable => DriverError::Unavailable { driver, message },
            FaultKind::Other => DriverError::Other {
                driver,
                message,
                source: None,
            },
        }
    }
}

/// A [`SimCloud`] that fails chosen calls. Clones share the fault plan and the cloud.
#[derive(Clone, Debug)]
pub struct FaultySim {
    inner: SimCloud,
    plan: Arc<Mutex<BTreeMap<Method, VecDeque<FaultKind>>>>,
    calls: Arc<Mutex<BTreeMap<Method, u64>>>,
}

impl FaultySim {
    /// Wraps `inner` with no faults planned.
    pub fn new(inner: SimCloud) -> Self {
        Self {
            inner,
            plan: Arc::default(),
            calls: Arc::default(),
        }
    }

    /// How many calls of `method` were made through this wrapper (failed ones included):
    /// what a real backend would have been sent.
    pub fn calls(&self, method: Method) -> u64 {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&method)
            .copied()
            .unwrap_or(0)
    }

    /// The wrapped cloud (for its mutators and to look behind the faults).
    pub fn sim(&self) -> &SimCloud {
        &self.inner
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<Method, VecDeque<FaultKind>>> {
        self.plan.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the next `n` calls of `method` fail with `kind` (after faults already planned).
    pub fn fail_next(&self, method: Method, n: u32, kind: FaultKind) {
        let mut plan = self.lock();
        let q = plan.entry(method).or_default();
        for _ in 0..n {
            q.push_back(kind);
        }
    }

    /// How many injected failures of `method` are still to come.
    pub fn pending(&self, method: Method) -> usize {
        self.lock().get(&method).map_or(0, VecDeque::len)
    }

    /// Makes the next `n` server builds fail with `fault`.
    pub fn fail_next_builds(&self, n: u32, fault: BuildFault) {
        self.inner.push_build_faults(n, fault);
    }

    /// Makes the next `n` stack deletes go as `fault` says (after deletes already planned).
    pub fn fail_next_stack_deletes(&self, n: u32, fault: StackDeleteFault) {
        self.inner.push_delete_faults(n, fault);
    }

    fn check(&self, method: Method) -> Result<(), DriverError> {
        *self
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(method)
            .or_default() += 1;
        match self.lock().get_mut(&method).and_then(VecDeque::pop_front) {
            Some(kind) => Err(kind.error(method)),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl StackDriver for FaultySim {
    async fn create_stack(&self, req: CreateStack) -> Result<StackId, DriverError> {
        self.check(Method::CreateStack)?;
        self.inner.create_stack(req).await
    }
    async fn update_stack(&self, req: UpdateStack) -> Result<(), DriverError> {
        self.check(Method::UpdateStack)?;
        self.inner.update_stack(req).await
    }
    async fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError> {
        self.check(Method::ShowStack)?;
        self.inner.show_stack(id).await
    }
    async fn delete_stack(&self, id: &StackId) -> Result<(), DriverError> {
        self.check(Method::DeleteStack)?;
        self.inner.delete_stack(id).await
    }
    async fn list_resources(&self, req: ListResources) -> Result<Vec<StackResource>, DriverError> {
        self.check(Method::ListResources)?;
        self.inner.list_resources(req).await
    }
    async fn mark_unhealthy(&self, req: MarkUnhealthy) -> Result<(), DriverError> {
        self.check(Method::MarkUnhealthy)?;
        self.inner.mark_unhealthy(req).await
    }
}

#[async_trait]
impl ZoneCatalog for FaultySim {
    async fn list_zones(&self, opts: ListZones) -> Result<Vec<ComputeZone>, DriverError> {
        self.check(Method::ListZones)?;
        self.inner.list_zones(opts).await
    }
}

#[async_trait]
impl ComputeInventory for FaultySim {
    async fn server(&self, id: &ServerId) -> Result<ServerInfo, DriverError> {
        self.check(Method::Server)?;
        self.inner.server(id).await
    }
    async fn start_server(&self, id: &ServerId) -> Result<(), DriverError> {
        self.inner.start_server(id).await
    }
    async fn stop_server(&self, id: &ServerId) -> Result<(), DriverError> {
        self.inner.stop_server(id).await
    }
}

#[async_trait]
impl ClusterDriver for FaultySim {
    async fn list_nodes(&self) -> Result<Vec<ClusterNode>, DriverError> {
        self.check(Method::ListNodes)?;
        self.inner.list_nodes().await
    }
    async fn label_node(&self, req: LabelNode) -> Result<(), DriverError> {
        self.check(Method::LabelNode)?;
        self.inner.label_node(req).await
    }
    async fn apply_object(&self, req: ApplyObject) -> Result<(), DriverError> {
        self.check(Method::ApplyObject)?;
        self.inner.apply_object(req).await
    }
    async fn delete_object(&self, req: ObjectRef) -> Result<(), DriverError> {
        self.check(Method::DeleteObject)?;
        self.inner.delete_object(req).await
    }
    async fn list_workloads(
        &self,
        req: ListWorkloads,
    ) -> Result<Vec<serde_json::Value>, DriverError> {
        self.check(Method::ListWorkloads)?;
        self.inner.list_workloads(req).await
    }
    async fn scale_workload(&self, req: ScaleWorkload) -> Result<(), DriverError> {
        self.check(Method::ScaleWorkload)?;
        self.inner.scale_workload(req).await
    }
    async fn list_pods(&self, req: ListPods) -> Result<Vec<Pod>, DriverError> {
        self.check(Method::ListPods)?;
        self.inner.list_pods(req).await
    }
    async fn delete_pod(&self, req: DeletePod) -> Result<(), DriverError> {
        self.check(Method::DeletePod)?;
        self.inner.delete_pod(req).await
    }
    async fn evict_pod(&self, req: EvictPod) -> Result<(), DriverError> {
        self.check(Method::EvictPod)?;
        self.inner.evict_pod(req).await
    }
    async fn list_events(&self, req: ListEvents) -> Result<Vec<ClusterEvent>, DriverError> {
        self.check(Method::ListEvents)?;
        self.inner.list_events(req).await
    }
}
