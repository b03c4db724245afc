//! Reconciling hardware-aware labels at scale: `vnfm_core::cluster::reconcile` over 5,000
//! worker nodes and 50,000 pods, against a naive per-node get-and-patch in the same run.
//!
//! The cluster and Nova are an in-process fake that answers from memory and counts every
//! request by kind (what a real API server and Nova would be sent); 1 % of the worker VMs have
//! moved since the last labelling. Workloads:
//! - `vnfm_reconcile`: the whole reconcile: 1 list of nodes, 1 list of pods, 1 list of
//!   workloads, 1 Nova show per VNFC, 1 PATCH per node whose label changed, and the report
//!   (pods per host, 50 groups' skew and pairs);
//! - `vnfm_label`: the labelling alone (`label_workers`);
//! - `naive_get_and_patch`: the baseline: per node, GET the node, show its server, PATCH the
//!   label (what a per-worker script does; Tacker runs one SSH + `kubectl label` per worker).
//!
//! The bench prints the requests of each workload once. `cargo bench -p vnfm-benches --bench
//! cluster`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use vnfm_core::cluster::{label_workers, reconcile, LabelConfig, DEFAULT_HOST_LABEL};
use vnfm_core::driver::{
    ApplyObject, ApplyWorkload, ClusterDriver, ClusterEvent, ClusterNode, ComputeInventory,
    DeletePod, DriverError, EvictPod, LabelNode, ListEvents, ListPods, ListWorkloads, NodeAddress,
    ObjectRef, Pod, PodAntiAffinity, ScaleWorkload, ServerInfo,
};
use vnfm_core::id::{NodeName, ServerId};
use vnfm_core::lcm::VnfInstance;

const NODES: usize = 5_000;
const HOSTS: usize = 2_500;
const WORKLOADS: usize = 50;
const REPLICAS: usize = 1_000;
const MOVED_EVERY: usize = 100;

#[derive(Default, Debug)]
struct Counts {
    list: AtomicU64,
    get: AtomicU64,
    patch: AtomicU64,
    nova: AtomicU64,
}

impl Counts {
    fn take(&self) -> [u64; 4] {
        [
            self.list.swap(0, Ordering::Relaxed),
            self.get.swap(0, Ordering::Relaxed),
            self.patch.swap(0, Ordering::Relaxed),
            self.nova.swap(0, Ordering::Relaxed),
        ]
    }
}

/// Nodes, pods and servers in memory; every call counted.
#[derive(Debug)]
struct Fake {
    nodes: Mutex<Vec<ClusterNode>>,
    pods: Vec<Pod>,
    workloads: Vec<serde_json::Value>,
    servers: BTreeMap<ServerId, ServerInfo>,
    counts: Counts,
}

impl Fake {
    fn new() -> (Self, VnfInstance) {
        let mut nodes = Vec::new();
        let mut servers = BTreeMap::new();
        let mut vnfcs = Vec::new();
        for i in 0..NODES {
            let id = ServerId::new(format!("00000000-0000-4000-8000-{i:012}"));
            let host = format!("compute-{}", i % HOSTS);
            // labelled before; 1 % of the VMs moved since
            let labelled = if i % MOVED_EVERY == 0 {
                format!("compute-{}", (i + 1) % HOSTS)
            } else {
                host.clone()
            };
            let mut n = ClusterNode::new(
                format!("worker-{i}"),
                BTreeMap::from([(DEFAULT_HOST_LABEL.to_owned(), labelled)]),
            );
            n.system_uuid = Some(id.as_str().to_owned());
            n.addresses = vec![NodeAddress::new(
                "InternalIP",
                format!("10.0.{}.{}", i / 250, i % 250),
            )];
            nodes.push(n);
            servers.insert(
                id.clone(),
                ServerInfo {
                    id: id.clone(),
                    name: format!("worker-{i}"),
                    status: "ACTIVE".into(),
                    host: Some(host.as_str().into()),
                    host_id: Some(format!("{:056x}", i % HOSTS)),
                    addresses: vec![format!("10.0.{}.{}", i / 250, i % 250)],
                    zone: None,
                    flavor: None,
                    server_groups: vec![],
                    fault: None,
                },
            );
            vnfcs.push(serde_json::json!({"id": format!("w{i}"), "vduId": "worker",
                "computeResource": {"resourceId": id.as_str()}}));
        }
        let mut pods = Vec::new();
        let mut workloads = Vec::new();
        for w in 0..WORKLOADS {
            let name = format!("cnf-{w}");
            let mut a = ApplyWorkload::new("cnf", &name, REPLICAS as u32);
            a.anti_affinity = Some(PodAntiAffinity {
                topology_key: DEFAULT_HOST_LABEL.into(),
                required: w % 2 == 0,
            });
            workloads.push(a.to_object().object);
            for r in 0..REPLICAS {
                pods.push(Pod {
                    namespace: "cnf".into(),
                    name: format!("{name}-{r}"),
                    labels: BTreeMap::from([("app".to_owned(), name.clone())]),
                    node: Some(NodeName::new(format!(
                        "worker-{}",
                        (w * 97 + r * 5) % NODES
                    ))),
                    phase: "Running".into(),
                    scheduled: None,
                    deleting: false,
                });
            }
        }
        let vnf: VnfInstance = serde_json::from_value(serde_json::json!({
            "id": "vnf-a", "vnfdId": "cluster", "vnfProvider": "p", "vnfProductName": "k8s",
            "vnfSoftwareVersion": "1", "vnfdVersion": "1", "instantiationState": "INSTANTIATED",
            "instantiatedVnfInfo": {"flavourId": "f", "vnfcResourceInfo": vnfcs}
        }))
        .unwrap();
        (
            Fake {
                nodes: Mutex::new(nodes),
                pods,
                workloads,
                servers,
                counts: Counts::default(),
            },
            vnf,
        )
    }

    /// Puts the labels back as they were before the bench's reconcile.
    fn reset(&self, fresh: &[ClusterNode]) {
        *self.nodes.lock().unwrap() = fresh.to_vec();
    }

    fn get_node(&self, name: &NodeName) -> Option<ClusterNode> {
        self.counts.get.fetch_add(1, Ordering::Relaxed);
        self.nodes
            .lock()
            .unwrap()
            .iter()
            .find(|n| &n.name == name)
            .cloned()
    }
}

fn unsupported() -> DriverError {
    DriverError::Invalid {
        driver: "bench",
        message: "not used by the bench".into(),
    }
}

#[async_trait]
impl ClusterDriver for Fake {
    async fn list_nodes(&self) -> Result<Vec<ClusterNode>, DriverError> {
        self.counts.list.fetch_add(1, Ordering::Relaxed);
        Ok(self.nodes.lock().unwrap().clone())
    }
    async fn label_node(&self, req: LabelNode) -> Result<(), DriverError> {
        self.counts.patch.fetch_add(1, Ordering::Relaxed);
        let mut nodes = self.nodes.lock().unwrap();
        let n = nodes
            .iter_mut()
            .find(|n| n.name == req.node)
            .ok_or_else(unsupported)?;
        for (k, v) in req.labels {
            match v {
                Some(v) => n.labels.insert(k, v),
                None => n.labels.remove(&k),
            };
        }
        Ok(())
    }
    async fn apply_object(&self, _: ApplyObject) -> Result<(), DriverError> {
        Err(unsupported())
    }
    async fn delete_object(&self, _: ObjectRef) -> Result<(), DriverError> {
        Err(unsupported())
    }
    async fn list_workloads(
        &self,
        _: ListWorkloads,
    ) -> Result<Vec<serde_json::Value>, DriverError> {
        self.counts.list.fetch_add(1, Ordering::Relaxed);
        Ok(self.workloads.clone())
    }
    async fn scale_workload(&self, _: ScaleWorkload) -> Result<(), DriverError> {
        Err(unsupported())
    }
    async fn list_pods(&self, _: ListPods) -> Result<Vec<Pod>, DriverError> {
        self.counts.list.fetch_add(1, Ordering::Relaxed);
        Ok(self.pods.clone())
    }
    async fn delete_pod(&self, _: DeletePod) -> Result<(), DriverError> {
        Err(unsupported())
    }
    async fn evict_pod(&self, _: EvictPod) -> Result<(), DriverError> {
        Err(unsupported())
    }
    async fn list_events(&self, _: ListEvents) -> Result<Vec<ClusterEvent>, DriverError> {
        Err(unsupported())
    }
}

#[async_trait]
impl ComputeInventory for Fake {
    async fn server(&self, id: &ServerId) -> Result<ServerInfo, DriverError> {
        self.counts.nova.fetch_add(1, Ordering::Relaxed);
        self.servers.get(id).cloned().ok_or_else(unsupported)
    }
}

/// The baseline: per node, GET it, show its server (by systemUUID), PATCH the label.
async fn naive(fake: &Fake, vnf: &VnfInstance) {
    let names: Vec<NodeName> = vnf
        .instantiated_vnf_info
        .iter()
        .flat_map(|i| &i.vnfc_resource_info)
        .enumerate()
        .map(|(i, _)| NodeName::new(format!("worker-{i}")))
        .collect();
    for name in names {
        let node = fake.get_node(&name).unwrap();
        let id = ServerId::new(node.system_uuid.clone().unwrap());
        let s = fake.server(&id).await.unwrap();
        let host = s.host.unwrap().to_string();
        fake.label_node(LabelNode::new(
            name,
            BTreeMap::from([(DEFAULT_HOST_LABEL.to_owned(), Some(host))]),
        ))
        .await
        .unwrap();
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (fake, vnf) = Fake::new();
    let fresh = fake.nodes.lock().unwrap().clone();
    let cfg = LabelConfig::new(DEFAULT_HOST_LABEL).unwrap();

    // requests of one run of each, printed once
    let report = |what: &str, counts: [u64; 4]| {
        println!(
            "{what}: {} list, {} get, {} patch (Kubernetes); {} server show (Nova)",
            counts[0], counts[1], counts[2], counts[3]
        );
    };
    let r = rt
        .block_on(reconcile(&fake, &fake, &vnf, "cnf", &cfg, false))
        .unwrap();
    report("vnfm_reconcile", fake.counts.take());
    println!(
        "  {} nodes relabelled, {} groups, {} pairs sharing a host after",
        r.labelled.patched,
        r.after.groups.len(),
        r.after
            .groups
            .iter()
            .map(|g| g.sharing.len())
            .sum::<usize>()
    );
    fake.reset(&fresh);
    rt.block_on(label_workers(&fake, &fake, &vnf, &cfg))
        .unwrap();
    report("vnfm_label", fake.counts.take());
    fake.reset(&fresh);
    rt.block_on(naive(&fake, &vnf));
    report("naive_get_and_patch", fake.counts.take());

    let mut g = c.benchmark_group("cluster_reconcile");
    g.sample_size(10);
    g.throughput(Throughput::Elements(NODES as u64));
    g.bench_function("vnfm_reconcile", |b| {
        b.iter(|| {
            fake.reset(&fresh);
            rt.block_on(reconcile(&fake, &fake, &vnf, "cnf", &cfg, false))
                .unwrap()
        })
    });
    g.bench_function("vnfm_label", |b| {
        b.iter(|| {
            fake.reset(&fresh);
            rt.block_on(label_workers(&fake, &fake, &vnf, &cfg))
                .unwrap()
        })
    });
    g.bench_function("naive_get_and_patch", |b| {
        b.iter(|| {
            fake.reset(&fresh);
            rt.block_on(naive(&fake, &vnf))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
