//! The hardware-affinity chapter of `vnfm demo` (docs/hardware-affinity.md), on a simulated
//! cloud of its own (built in: `examples/clouds/cluster.yaml`, four hosts, workers join a
//! Kubernetes cluster as nodes):
//!
//! 1. the cluster VNF (`examples/packages/k8s-cluster-vnf`): three workers in a Nova server
//!    group `anti-affinity` from the VNFD's `AntiAffinityRule` at `nfvi_node` scope, on three
//!    hosts; the `host-labels` hook labels their nodes with the hosts;
//! 2. the CNF (`examples/packages/cnf-podaffinity`): three replicas with required pod
//!    anti-affinity on the host label, one per host, as `vnfm cluster verify` reports;
//! 3. a live migration puts two workers on one host: `verify` finds the pair of pods sharing
//!    it and the stale label;
//! 4. `reconcile --evict` relabels (one PATCH) and evicts one pod of the pair; it waits,
//!    Pending, until the operator moves the worker to the free host; `reconcile` then
//!    relabels again and the pod goes there: three pods on three hosts again.
//!
//! Every decision is the core's (`vnfm_core::cluster`); this only wires and narrates.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;

use vnfm_core::cluster::{self, HostLabelHook, LabelConfig, VerifyReport, DEFAULT_HOST_LABEL};
use vnfm_core::driver::{ClusterDriver, ComputeInventory, ListZones, ZoneCatalog};
use vnfm_core::id::ServerId;
use vnfm_core::lcm::{CreateVnfRequest, InstantiateVnfRequest, VnfInstance};
use vnfm_core::lifecycle::{Drivers, LcmConfig, Lifecycle, OperationOptions, OperationReport};
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;

use super::cluster::{reconciled_human, report_human};
use crate::builtin;
use crate::error::CliError;
use crate::output::Output;
use crate::render::lcm::human_operation;

const NAMESPACE: &str = "default";

/// One step of the chapter: `vnfm demo` makes it a `DemoStep`.
pub(crate) struct HwStep {
    /// What the step does.
    pub(crate) title: String,
    /// The narrative.
    pub(crate) narrative: String,
    /// The operation of an LCM step.
    pub(crate) report: Option<OperationReport>,
}

fn step(title: &str, narrative: String, r: Option<&OperationReport>) -> HwStep {
    HwStep {
        title: title.to_owned(),
        narrative,
        report: r.cloned(),
    }
}

fn with_hooks(r: &OperationReport) -> String {
    let mut s = human_operation(&r.op_occ, &r.instance);
    for h in &r.op_occ.hooks {
        let _ = writeln!(
            s,
            "  hook {} at {}: {}{}",
            h.name,
            h.point,
            if h.succeeded { "" } else { "FAILED: " },
            h.detail
        );
    }
    s
}

/// (server, host) of every worker of the cluster VNF, as Nova shows them now.
async fn workers(
    compute: &dyn ComputeInventory,
    inst: &VnfInstance,
) -> Result<Vec<(ServerId, String)>, CliError> {
    let servers = cluster::servers_of(compute, inst).await?;
    Ok(servers
        .into_iter()
        .filter(|s| s.name.starts_with("workerNode"))
        .map(|s| (s.id, s.host.map(|h| h.to_string()).unwrap_or_default()))
        .collect())
}

fn hosts_with_pods(r: &VerifyReport) -> usize {
    r.hosts.iter().filter(|h| !h.pods.is_empty()).count()
}

/// The chapter's steps, and whether everything went as told.
pub(crate) async fn chapter(seed: u64, out: Output) -> Result<(Vec<HwStep>, bool), CliError> {
    let sim = SimCloud::new(builtin::cluster_cloud()?, seed);
    let cluster_pkg = builtin::cluster_package()?;
    let cnf_pkg = builtin::cnf_package()?;
    let k8s: Arc<dyn ClusterDriver> = Arc::new(sim.clone());
    let compute: Arc<dyn ComputeInventory> = Arc::new(sim.clone());
    let drivers = Drivers {
        stacks: Arc::new(sim.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(MemoryStore::new()),
        clock: crate::app::clock(),
        cluster: Some(k8s.clone()),
    };
    let mut config = LcmConfig::standard()?;
    config.seed = seed;
    config.vim_connection_id = "vim-sim".into();
    let cfg = LabelConfig::new(DEFAULT_HOST_LABEL)
        .map_err(|e| CliError::Usage(format!("demo label key: {e}")))?;
    let lcm = Lifecycle::new(drivers, config).with_hook(Arc::new(HostLabelHook::new(
        k8s.clone(),
        compute.clone(),
        cfg.clone(),
        vec![cluster_pkg.descriptor_id.clone()],
    )));
    let mut steps = Vec::new();
    let mut ok = true;

    // 1. The cluster VNF and its labels.
    out.progress("instantiating the Kubernetes cluster VNF");
    let mut req = CreateVnfRequest::new(cluster_pkg.descriptor_id.clone());
    req.vnf_instance_name = Some("k8s-cluster".into());
    let a = lcm.create(&cluster_pkg, &req).await?;
    let r = lcm
        .instantiate(
            &a.id,
            &cluster_pkg,
            &InstantiateVnfRequest::new("default"),
            &OperationOptions::default(),
        )
        .await?;
    let a = r.instance.clone();
    let w = workers(compute.as_ref(), &a).await?;
    let distinct: BTreeSet<&String> = w.iter().map(|x| &x.1).collect();
    ok &= r.is_completed() && w.len() == 3 && distinct.len() == 3;
    ok &= r.op_occ.hooks.iter().all(|h| h.succeeded);
    steps.push(step(
        "Hardware-aware affinity: the cluster VNF's three workers in an anti-affinity server group, on three hosts; the host-labels hook labels their nodes",
        with_hooks(&r),
        Some(&r),
    ));

    // 2. The CNF spreads over the hosts.
    out.progress("instantiating the CNF on the cluster");
    let mut req = CreateVnfRequest::new(cnf_pkg.descriptor_id.clone());
    req.vnf_instance_name = Some("cnf".into());
    let b = lcm.create(&cnf_pkg, &req).await?;
    let r = lcm
        .instantiate(
            &b.id,
            &cnf_pkg,
            &InstantiateVnfRequest::new("podaffinity"),
            &OperationOptions::default(),
        )
        .await?;
    let (_, report) =
        cluster::verify_cluster(k8s.as_ref(), compute.as_ref(), &a, NAMESPACE, &cfg).await?;
    ok &= r.is_completed() && !report.violated() && hosts_with_pods(&report) == 3;
    let mut n = human_operation(&r.op_occ, &r.instance);
    n.push_str("  vnfm cluster verify:\n");
    n.push_str(&indent(&report_human(&report)));
    steps.push(step(
        "The CNF: three replicas, required pod anti-affinity on topology.openstack.org/host-id: one pod per physical host",
        n,
        Some(&r),
    ));

    // 3. A live migration puts two workers on one host.
    out.progress("live-migrating a worker onto another worker's host");
    let (moved, _) = w[1].clone();
    let target = w[0].1.clone();
    sim.live_migrate(&moved, &target)?;
    let (_, report) =
        cluster::verify_cluster(k8s.as_ref(), compute.as_ref(), &a, NAMESPACE, &cfg).await?;
    let pairs: usize = report.groups.iter().map(|g| g.sharing.len()).sum();
    ok &= report.violated() && pairs == 1 && report.stale_labels.len() == 1;
    let mut n = format!(
        "  an operator live-migrates worker server {moved} to {target}, where another worker runs\n  vnfm cluster verify (exit 6, a violation):\n"
    );
    n.push_str(&indent(&report_human(&report)));
    steps.push(step(
        "Drift: a live migration puts two workers, and two replicas, on one host; verify finds the pair and the stale label",
        n,
        None,
    ));

    // 4. reconcile --evict, then the worker back on a free host and reconcile.
    out.progress("reconciling");
    let rec = cluster::reconcile(k8s.as_ref(), compute.as_ref(), &a, NAMESPACE, &cfg, true).await?;
    ok &= rec.labelled.patched == 1 && rec.evicted.len() == 1;
    let mut n = String::from("  vnfm cluster reconcile --evict:\n");
    n.push_str(&indent(&reconciled_human(&rec)));
    let used: BTreeSet<String> = workers(compute.as_ref(), &a)
        .await?
        .into_iter()
        .map(|x| x.1)
        .collect();
    let zones = sim.list_zones(ListZones::default()).await?;
    let free = zones
        .iter()
        .flat_map(|z| z.hosts.iter().flatten())
        .map(|h| h.name.to_string())
        .find(|h| !used.contains(h))
        .ok_or_else(|| CliError::Usage("demo: the cluster cloud has no free host".into()))?;
    sim.live_migrate(&moved, &free)?;
    let rec =
        cluster::reconcile(k8s.as_ref(), compute.as_ref(), &a, NAMESPACE, &cfg, false).await?;
    let (_, report) =
        cluster::verify_cluster(k8s.as_ref(), compute.as_ref(), &a, NAMESPACE, &cfg).await?;
    ok &= rec.labelled.patched == 1
        && !report.violated()
        && report.pending.is_empty()
        && hosts_with_pods(&report) == 3;
    let _ = writeln!(
        n,
        "  the operator moves worker server {moved} to the free host {free}; vnfm cluster reconcile:"
    );
    n.push_str(&indent(&reconciled_human(&rec)));
    n.push_str("  vnfm cluster verify:\n");
    n.push_str(&indent(&report_human(&report)));
    steps.push(step(
        "Reconcile: relabel (one PATCH per changed node) and evict one pod of the pair; with the worker on a free host, the pod follows: three pods on three hosts again",
        n,
        None,
    ));
    Ok((steps, ok))
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}
