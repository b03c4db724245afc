//! The IO around the pure plans: read the cluster VNF's servers and the cluster's nodes,
//! pods and workloads through the drivers, plan, and write the patches and evictions. Also
//! the end-of-operation hook that keeps the labels true after instantiate, scale and heal.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::labels::{plan_labels, LabelConfig, LabelError, LabelPlan};
use super::verify::{evictions, verify, Eviction, VerifyReport};
use super::Workload;
use crate::driver::{
    ClusterDriver, ComputeInventory, DriverError, EvictPod, ListPods, ListWorkloads, ServerInfo,
};
use crate::id::ServerId;
use crate::lcm::VnfInstance;
use crate::lifecycle::{HookCall, HookPoint, OperationHook};

/// Why a cluster check or change did not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// A driver call failed.
    #[error("{what}: {source}")]
    Driver {
        /// The call.
        what: String,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// Nodes and servers could not be matched, or the key is invalid.
    #[error(transparent)]
    Label(#[from] LabelError),
}

fn driver(what: impl Into<String>) -> impl FnOnce(DriverError) -> ClusterError {
    let what = what.into();
    move |source| ClusterError::Driver { what, source }
}

/// The servers of `instance` (every VNFC's compute resource) as the VIM shows them now; a
/// server the VIM no longer knows is left out (its node's label is then removed).
///
/// # Errors
/// [`ClusterError::Driver`] for any other failure.
pub async fn servers_of(
    compute: &dyn ComputeInventory,
    instance: &VnfInstance,
) -> Result<Vec<ServerInfo>, ClusterError> {
    let ids: Vec<ServerId> = instance
        .instantiated_vnf_info
        .iter()
        .flat_map(|i| &i.vnfc_resource_info)
        .map(|v| ServerId::new(v.compute_resource.resource_id.as_str()))
        .filter(|id| !id.as_str().is_empty())
        .collect();
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        match compute.server(&id).await {
            Ok(s) => out.push(s),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(driver(format!("show server {id}"))(e)),
        }
    }
    Ok(out)
}

/// The labels as planned and how many patches were sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Labelled {
    /// The plan.
    pub plan: LabelPlan,
    /// Patches sent (one per node whose label changed).
    pub patched: usize,
}

impl Labelled {
    /// One line saying what was done.
    pub fn summary(&self) -> String {
        let values: Vec<String> = self
            .plan
            .nodes
            .iter()
            .map(|n| format!("{}={}", n.node, n.value))
            .collect();
        let mut s = format!(
            "{} node(s) labelled {} from {} ({} patched, {} unchanged): {}",
            self.plan.nodes.len(),
            self.plan.key,
            self.plan.source,
            self.plan.changed().count(),
            self.plan.nodes.len() - self.plan.changed().count(),
            values.join(" ")
        );
        if !self.plan.removed.is_empty() {
            let gone: Vec<String> = self
                .plan
                .removed
                .iter()
                .map(|r| r.node.to_string())
                .collect();
            s.push_str(&format!(
                "; label removed from {} (server gone)",
                gone.join(", ")
            ));
        }
        for w in &self.plan.warnings {
            s.push_str(&format!("; warning: {w}"));
        }
        s
    }
}

/// Plans the host labels of the worker nodes of `instance` and sends the patches.
///
/// # Errors
/// [`ClusterError`] from reading, planning or patching.
pub async fn label_workers(
    cluster: &dyn ClusterDriver,
    compute: &dyn ComputeInventory,
    instance: &VnfInstance,
    cfg: &LabelConfig,
) -> Result<Labelled, ClusterError> {
    let servers = servers_of(compute, instance).await?;
    let nodes = cluster.list_nodes().await.map_err(driver("list nodes"))?;
    let plan = plan_labels(&nodes, &servers, cfg)?;
    let mut patched = 0;
    for p in &plan.patches {
        cluster
            .label_node(p.clone())
            .await
            .map_err(driver(format!("label node {}", p.node)))?;
        patched += 1;
    }
    Ok(Labelled { plan, patched })
}

/// Reads everything and reports (see [`super::verify()`]); changes nothing.
///
/// # Errors
/// [`ClusterError`] from reading or planning.
pub async fn verify_cluster(
    cluster: &dyn ClusterDriver,
    compute: &dyn ComputeInventory,
    instance: &VnfInstance,
    namespace: &str,
    cfg: &LabelConfig,
) -> Result<(LabelPlan, VerifyReport), ClusterError> {
    let servers = servers_of(compute, instance).await?;
    let nodes = cluster.list_nodes().await.map_err(driver("list nodes"))?;
    let plan = plan_labels(&nodes, &servers, cfg)?;
    let report = read_report(cluster, &plan, namespace).await?;
    Ok((plan, report))
}

async fn read_report(
    cluster: &dyn ClusterDriver,
    plan: &LabelPlan,
    namespace: &str,
) -> Result<VerifyReport, ClusterError> {
    let pods = cluster
        .list_pods(ListPods::selected(namespace, Default::default()))
        .await
        .map_err(driver(format!("list pods of {namespace}")))?;
    let objects = cluster
        .list_workloads(ListWorkloads::new(namespace))
        .await
        .map_err(driver(format!("list workloads of {namespace}")))?;
    // A workload the API server holds but vnfm cannot read is reported, not skipped silently.
    let mut workloads = Vec::new();
    let mut unreadable = Vec::new();
    for o in &objects {
        match Workload::from_object(o, namespace) {
            Ok(w) => workloads.push(w),
            Err(e) => unreadable.push(format!("workload not checked: {e}")),
        }
    }
    let mut report = verify(plan, &pods, &workloads);
    report.warnings.extend(unreadable);
    Ok(report)
}

/// What `reconcile` found and did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reconciled {
    /// The report before any change.
    pub before: VerifyReport,
    /// The labels as planned and patched.
    pub labelled: Labelled,
    /// The evictions sent (empty without `evict`).
    pub evicted: Vec<Eviction>,
    /// Evictions refused (e.g. by a PodDisruptionBudget), with the API server's message.
    pub refused: Vec<(Eviction, String)>,
    /// The pods sharing a host after relabelling, before any eviction takes effect.
    pub after: VerifyReport,
}

/// Re-reads where the worker VMs run, fixes the labels (one patch per changed node), and,
/// with `evict`, evicts one pod of each pair of a violated group through the Eviction API so
/// the scheduler places it again under the fixed labels.
///
/// # Errors
/// [`ClusterError`] from reading, planning or patching (a refused eviction is reported in
/// [`Reconciled::refused`], not an error).
pub async fn reconcile(
    cluster: &dyn ClusterDriver,
    compute: &dyn ComputeInventory,
    instance: &VnfInstance,
    namespace: &str,
    cfg: &LabelConfig,
    evict: bool,
) -> Result<Reconciled, ClusterError> {
    let (plan, before) = verify_cluster(cluster, compute, instance, namespace, cfg).await?;
    let mut patched = 0;
    for p in &plan.patches {
        cluster
            .label_node(p.clone())
            .await
            .map_err(driver(format!("label node {}", p.node)))?;
        patched += 1;
    }
    let labelled = Labelled { plan, patched };
    let after = read_report(cluster, &labelled.plan, namespace).await?;
    let mut evicted = Vec::new();
    let mut refused = Vec::new();
    if evict {
        for e in evictions(&after) {
            match cluster.evict_pod(EvictPod::new(&e.namespace, &e.pod)).await {
                Ok(()) => evicted.push(e),
                Err(DriverError::Conflict { message, .. }) => refused.push((e, message)),
                Err(err) => {
                    return Err(driver(format!("evict pod {}/{}", e.namespace, e.pod))(err))
                }
            }
        }
    }
    Ok(Reconciled {
        before,
        labelled,
        evicted,
        refused,
        after,
    })
}

/// The end-of-operation hook that labels the worker nodes of a cluster VNF with their
/// compute hosts after instantiate, scale and heal. It acts on instances of the VNFDs it is
/// given (the cluster VNFs) and says so for others.
#[derive(Debug)]
pub struct HostLabelHook {
    cluster: Arc<dyn ClusterDriver>,
    compute: Arc<dyn ComputeInventory>,
    cfg: LabelConfig,
    vnfd_ids: Vec<String>,
}

impl HostLabelHook {
    /// The hook's name in the occurrence.
    pub const NAME: &'static str = "host-labels";

    /// Labels the worker nodes of instances of `vnfd_ids`.
    pub fn new(
        cluster: Arc<dyn ClusterDriver>,
        compute: Arc<dyn ComputeInventory>,
        cfg: LabelConfig,
        vnfd_ids: Vec<String>,
    ) -> Self {
        Self {
            cluster,
            compute,
            cfg,
            vnfd_ids,
        }
    }
}

const POINTS: [HookPoint; 3] = [
    HookPoint::InstantiateEnd,
    HookPoint::ScaleEnd,
    HookPoint::HealEnd,
];

#[async_trait]
impl OperationHook for HostLabelHook {
    fn name(&self) -> &str {
        Self::NAME
    }
    fn points(&self) -> &[HookPoint] {
        &POINTS
    }
    async fn run(&self, call: &HookCall) -> Result<String, String> {
        if !self.vnfd_ids.contains(&call.instance.vnfd_id) {
            return Ok(format!(
                "not a cluster VNF (vnfdId {} is not among {:?}): nothing labelled",
                call.instance.vnfd_id, self.vnfd_ids
            ));
        }
        label_workers(
            self.cluster.as_ref(),
            self.compute.as_ref(),
            &call.instance,
            &self.cfg,
        )
        .await
        .map(|l| l.summary())
        .map_err(|e| e.to_string())
    }
}
