//! Hardware-aware pod affinity on the simulated cloud, end to end through the drivers: four
//! worker VMs in an anti-affinity server group on four hosts join the cluster as nodes, get
//! labelled with their hosts, a CNF of three replicas with required pod anti-affinity on the
//! label spreads over them; a live migration puts two workers with pods on one host; verify
//! reports the pair and the stale label; reconcile relabels with one patch (none when run
//! again); --evict moves a pod to the worker on a host of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use vnfm_core::cloud::CloudFile;
use vnfm_core::cluster::{
    label_workers, reconcile, verify_cluster, HostSource, LabelConfig, DEFAULT_HOST_LABEL,
};
use vnfm_core::driver::{
    ApplyWorkload, ClusterDriver, ComputeInventory, CreateStack, ListPods, PodAntiAffinity,
    ScaleWorkload, StackDriver, TemplateBundle,
};
use vnfm_core::lcm::VnfInstance;
use vnfm_core::sim::{FaultySim, Method, SimCloud};

const CLOUD: &str = "
zones:
  AZ-1:
    hosts:
      host-a: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
      host-b: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
      host-c: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
      host-d: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
flavors:
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
cluster:
  join: {servers: '^worker'}
";

const HOT: &str = "
heat_template_version: 2018-08-31
resources:
  workers_group: {type: OS::Nova::ServerGroup, properties: {name: workers, policies: [anti-affinity]}}
  worker-1:
    type: OS::Nova::Server
    properties: {name: worker-1, flavor: m1.small, image: cirros, availability_zone: AZ-1, scheduler_hints: {group: {get_resource: workers_group}}}
  worker-2:
    type: OS::Nova::Server
    properties: {name: worker-2, flavor: m1.small, image: cirros, availability_zone: AZ-1, scheduler_hints: {group: {get_resource: workers_group}}}
  worker-3:
    type: OS::Nova::Server
    properties: {name: worker-3, flavor: m1.small, image: cirros, availability_zone: AZ-1, scheduler_hints: {group: {get_resource: workers_group}}}
  worker-4:
    type: OS::Nova::Server
    properties: {name: worker-4, flavor: m1.small, image: cirros, availability_zone: AZ-1, scheduler_hints: {group: {get_resource: workers_group}}}
";

/// The cluster VNF: the stack's three servers as its VNFCs.
async fn cluster_vnf(sim: &SimCloud) -> VnfInstance {
    let bundle = TemplateBundle {
        template: HOT.to_owned(),
        files: BTreeMap::new(),
    };
    sim.create_stack(CreateStack::new("cluster-vnf", bundle, Default::default()))
        .await
        .unwrap();
    let vnfcs: Vec<serde_json::Value> = sim
        .server_ids()
        .iter()
        .enumerate()
        .map(|(i, id)| {
            serde_json::json!({
                "id": format!("worker-{i}"), "vduId": "workerNode",
                "computeResource": {"resourceId": id.as_str(), "vimLevelResourceType": "OS::Nova::Server"}
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "id": "vnf-a", "vnfdId": "cluster-vnfd", "vnfProvider": "p", "vnfProductName": "k8s",
        "vnfSoftwareVersion": "1", "vnfdVersion": "1", "instantiationState": "INSTANTIATED",
        "instantiatedVnfInfo": {"flavourId": "simple", "vnfState": "STARTED",
            "vnfcResourceInfo": vnfcs}
    }))
    .unwrap()
}

fn cnf(replicas: u32) -> ApplyWorkload {
    let mut w = ApplyWorkload::new("cnf", "vdu1", replicas);
    w.anti_affinity = Some(PodAntiAffinity {
        topology_key: DEFAULT_HOST_LABEL.into(),
        required: true,
    });
    w
}

async fn hosts_of_pods(sim: &SimCloud) -> Vec<Option<String>> {
    let nodes = sim.list_nodes().await.unwrap();
    let mut out: Vec<Option<String>> = sim
        .list_pods(ListPods::new("cnf", "vdu1"))
        .await
        .unwrap()
        .iter()
        .map(|p| {
            p.node.as_ref().and_then(|n| {
                nodes
                    .iter()
                    .find(|x| &x.name == n)
                    .and_then(|x| x.labels.get(DEFAULT_HOST_LABEL).cloned())
            })
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn labels_spread_drift_and_reconcile_on_the_simulator() {
    let sim = SimCloud::new(CloudFile::from_yaml("t", CLOUD).unwrap(), 3);
    let vnf = cluster_vnf(&sim).await;
    let cfg = LabelConfig::new(DEFAULT_HOST_LABEL).unwrap();

    // the server group put the workers on three hosts; each joined as a node
    let nodes = sim.list_nodes().await.unwrap();
    assert_eq!(nodes.len(), 4);
    assert!(nodes.iter().all(|n| n.system_uuid.is_some()));

    // without labels, required anti-affinity on the key spreads nothing: a node without the
    // key passes the filter, as in Kubernetes
    sim.apply_object(cnf(3).to_object()).await.unwrap();
    let pods = sim.list_pods(ListPods::new("cnf", "vdu1")).await.unwrap();
    assert!(pods.iter().all(|p| p.node.is_some()));

    // label, then a new template (the CNF re-applied) spreads over hosts
    let l = label_workers(&sim, &sim, &vnf, &cfg).await.unwrap();
    assert_eq!(l.plan.source, HostSource::Host);
    assert_eq!(l.patched, 4);
    let again = label_workers(&sim, &sim, &vnf, &cfg).await.unwrap();
    assert_eq!(again.patched, 0, "nothing changed: no patch");
    let mut w = cnf(3);
    w.name = "vdu1".into();
    sim.delete_object(vnfm_core::driver::ObjectRef::new(
        "apps/v1",
        "Deployment",
        "cnf",
        "vdu1",
    ))
    .await
    .unwrap();
    sim.apply_object(w.to_object()).await.unwrap();
    let hosts = hosts_of_pods(&sim).await;
    assert_eq!(
        hosts
            .iter()
            .flatten()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3
    );
    let (_, report) = verify_cluster(&sim, &sim, &vnf, "cnf", &cfg).await.unwrap();
    assert!(!report.violated(), "{report:?}");

    // a fifth replica has no host of its own: Pending, with the scheduler's reason
    sim.scale_workload(ScaleWorkload::new("cnf", "vdu1", 5))
        .await
        .unwrap();
    let (_, report) = verify_cluster(&sim, &sim, &vnf, "cnf", &cfg).await.unwrap();
    assert_eq!(report.pending.len(), 1);
    assert_eq!(report.pending[0].reason.as_deref(), Some("Unschedulable"));
    assert!(report.pending[0]
        .message
        .as_deref()
        .unwrap()
        .starts_with("0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules."));
    assert!(!report.violated());
    sim.scale_workload(ScaleWorkload::new("cnf", "vdu1", 3))
        .await
        .unwrap();

    // drift: the VM of a worker with a pod is moved onto the host of another such worker
    let pods = sim.list_pods(ListPods::new("cnf", "vdu1")).await.unwrap();
    let busy: Vec<String> = {
        let mut v: Vec<String> = pods
            .iter()
            .filter_map(|p| p.node.clone())
            .map(|n| n.to_string())
            .collect();
        v.sort();
        v
    };
    let server_of = |node: &str| {
        nodes
            .iter()
            .find(|n| n.name.as_str() == node)
            .and_then(|n| n.system_uuid.clone())
            .map(vnfm_core::id::ServerId::new)
            .unwrap()
    };
    let (first, second) = (server_of(&busy[0]), server_of(&busy[1]));
    let target = sim.server(&first).await.unwrap().host.unwrap();
    sim.live_migrate(&second, target.as_str()).unwrap();
    let (_, report) = verify_cluster(&sim, &sim, &vnf, "cnf", &cfg).await.unwrap();
    assert!(report.violated());
    assert_eq!(report.stale_labels.len(), 1);
    assert_eq!(report.stale_labels[0].node.as_str(), busy[1]);
    assert_eq!(report.groups[0].sharing.len(), 1, "{report:?}");
    assert_eq!(report.groups[0].sharing[0].host, target.as_str());

    // reconcile without evicting: one patch, the pair listed
    let counted = FaultySim::new(sim.clone());
    let r = reconcile(&counted, &counted, &vnf, "cnf", &cfg, false)
        .await
        .unwrap();
    assert_eq!(r.labelled.patched, 1);
    assert_eq!(counted.calls(Method::LabelNode), 1);
    assert_eq!(r.after.groups[0].sharing.len(), 1);
    assert!(r.evicted.is_empty());

    // --evict: labels already right (no patch), one pod of the pair evicted; the scheduler
    // puts its replacement on the free worker, whose host is its own
    let r = reconcile(&counted, &counted, &vnf, "cnf", &cfg, true)
        .await
        .unwrap();
    assert_eq!(r.labelled.patched, 0);
    assert_eq!(counted.calls(Method::LabelNode), 1);
    assert_eq!(r.evicted.len(), 1);
    assert_eq!(counted.calls(Method::EvictPod), 1);
    let (_, report) = verify_cluster(&sim, &sim, &vnf, "cnf", &cfg).await.unwrap();
    assert!(!report.violated(), "{report:?}");
    let spread = hosts_of_pods(&sim).await;
    assert_eq!(
        spread
            .iter()
            .flatten()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3,
        "{spread:?}"
    );
    let r = reconcile(&counted, &counted, &vnf, "cnf", &cfg, true)
        .await
        .unwrap();
    assert_eq!(
        (r.labelled.patched, r.evicted.len()),
        (0, 0),
        "nothing left to fix"
    );
}

#[tokio::test]
async fn non_admin_credentials_label_with_host_id() {
    let sim = SimCloud::new(CloudFile::from_yaml("t", CLOUD).unwrap(), 3);
    let vnf = cluster_vnf(&sim).await;
    sim.set_admin_view(false);
    let cfg = LabelConfig::new(DEFAULT_HOST_LABEL).unwrap();
    let l = label_workers(&sim, &sim, &vnf, &cfg).await.unwrap();
    assert_eq!(l.plan.source, HostSource::HostId);
    assert!(l.plan.nodes.iter().all(|n| n.value.len() == 56));
    sim.apply_object(cnf(3).to_object()).await.unwrap();
    let (_, report) = verify_cluster(&sim, &sim, &vnf, "cnf", &cfg).await.unwrap();
    assert!(!report.violated());
    assert_eq!(report.groups[0].per_host.len(), 4);
    assert_eq!(
        report.groups[0]
            .per_host
            .values()
            .filter(|n| **n == 1)
            .count(),
        3
    );
}
