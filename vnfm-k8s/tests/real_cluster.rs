//! The vnfm-core conformance suite, and what it does not cover of the adapter, against a real
//! Kubernetes control plane.
//!
//! Runs when `VNFM_K8S_KUBECONFIG` names a kubeconfig, e.g. the one `scripts/k8s-dev.sh start`
//! prints for its control plane on 127.0.0.1 (kube-apiserver, kube-scheduler and
//! kube-controller-manager 1.36.2 on Debian's etcd, no kubelet):
//!
//! ```text
//! eval "$(scripts/k8s-dev.sh start)"
//! cargo test -p vnfm-k8s --test real_cluster -- --nocapture
//! scripts/k8s-dev.sh stop
//! ```
//!
//! (`VNFM_TEST_K8S=1 scripts/test.sh` does the same.) Without `VNFM_K8S_KUBECONFIG` each test
//! records a skip and passes; with `VNFM_TEST_K8S` true but no kubeconfig it fails.
//!
//! There are no kubelets: the test creates three Nodes as a kubelet would (addresses,
//! `nodeInfo.systemUUID`, a `providerID`, allocatable, a `Ready` condition, then the
//! `node.kubernetes.io/not-ready` taint removed by a merge patch) and deletes them at the end;
//! the real scheduler binds pods to them and the real controller-manager runs the workloads.
//! Against a cluster with kubelets, `VNFM_K8S_TEST_NODES` (space-separated) names the nodes to
//! use instead: none is created, and the two behaviours that need pods nothing runs (a
//! graceful delete left pending, eviction against a budget of pods whose status the test
//! writes) are skipped. Everything else lives in a namespace of its own, deleted at
//! the end. Every behaviour runs and is timed; the test fails at the end listing every failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod as KubePod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use vnfm_core::cluster::Workload;
use vnfm_core::conformance::{cluster, ConformanceError, Fixture, Polling};
use vnfm_core::driver::{
    ApplyObject, ApplyWorkload, Clock, ClusterDriver, DeletePod, DriverError, EvictPod, ListEvents,
    ListPods, ListWorkloads, ObjectRef, Pod, ScaleWorkload, WorkloadKind,
};
use vnfm_core::id::NodeName;
use vnfm_k8s::KubeCluster;

const SUITE: &str = "real-k8s";

/// Real time, for the suite's polls.
#[derive(Debug)]
struct TokioClock;

#[async_trait]
impl Clock for TokioClock {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now()
    }
    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

/// The kubeconfig of `VNFM_K8S_KUBECONFIG`; `None` after recording a skip of `what`.
///
/// # Panics
/// When `VNFM_TEST_K8S` asks for the suite and no kubeconfig is given.
fn kubeconfig(what: &str) -> Option<PathBuf> {
    match std::env::var_os("VNFM_K8S_KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(p) => Some(PathBuf::from(p)),
        None if vnfm_core::vectors::flag("VNFM_TEST_K8S") == Some(true) => panic!(
            "VNFM_TEST_K8S is true but VNFM_K8S_KUBECONFIG is not set: start a control plane \
             (eval \"$(scripts/k8s-dev.sh start)\") or point it at a cluster"
        ),
        None => {
            vnfm_core::vectors::skip(
                SUITE,
                what,
                "VNFM_K8S_KUBECONFIG is not set; run eval \"$(scripts/k8s-dev.sh start)\" \
                 (a control plane on 127.0.0.1) or point it at a cluster's kubeconfig, or run \
                 VNFM_TEST_K8S=1 scripts/test.sh",
            );
            None
        }
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// A failure of one behaviour of this file (the conformance suite has its own error).
#[derive(Debug)]
struct Failed(String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

impl From<DriverError> for Failed {
    fn from(e: DriverError) -> Self {
        Failed(chain(&e))
    }
}

impl From<kube::Error> for Failed {
    fn from(e: kube::Error) -> Self {
        Failed(chain(&e))
    }
}

impl From<ConformanceError> for Failed {
    fn from(e: ConformanceError) -> Self {
        Failed(chain(&e))
    }
}

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Result<(), Failed> {
    if cond {
        Ok(())
    } else {
        Err(Failed(what()))
    }
}

/// Polls `read` every 250 ms for at most 30 s until `done` holds; the last value otherwise.
async fn until<T: std::fmt::Debug, F, Fut>(
    what: &str,
    mut read: F,
    done: impl Fn(&T) -> bool,
) -> Result<T, Failed>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failed>>,
{
    let mut last = None;
    for _ in 0..120 {
        let v = read().await?;
        if done(&v) {
            return Ok(v);
        }
        last = Some(v);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(Failed(format!("{what}: not after 30 s; last saw {last:?}")))
}

// ------------------------------------------------------------------------------------ nodes

/// What a test node is made of.
struct FakeNode {
    name: String,
    ip: String,
    system_uuid: String,
    provider_id: String,
}

/// Creates `n` as a kubelet registers itself: addresses, nodeInfo, allocatable and a Ready
/// condition (the API server keeps the status of a create), then removes the
/// `node.kubernetes.io/not-ready` taint the TaintNodesByCondition admission added, as the
/// node-lifecycle controller would once the node is Ready (capture 07).
async fn create_node(client: &kube::Client, n: &FakeNode) -> Result<(), Failed> {
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let resources = json!({"cpu": "8", "memory": "32Gi", "pods": "110"});
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": n.name,
            "labels": {
                "kubernetes.io/hostname": n.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": { "providerID": n.provider_id },
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": n.ip},
                {"type": "Hostname", "address": n.name},
            ],
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
            "nodeInfo": {
                "machineID": "", "systemUUID": n.system_uuid, "bootID": "",
                "kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.0", "kubeletVersion": "v1.36.2",
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
            },
        },
    }))
    .map_err(|e| Failed(format!("node manifest: {e}")))?;
    let nodes = Api::<Node>::all(client.clone());
    nodes.create(&PostParams::default(), &node).await?;
    nodes
        .patch(
            &n.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": null}})),
        )
        .await?;
    Ok(())
}

async fn delete_node(client: &kube::Client, name: &str) {
    if let Err(e) = Api::<Node>::all(client.clone())
        .delete(name, &Default::default())
        .await
    {
        eprintln!("cleanup: delete node {name}: {}", chain(&e));
    }
}

// ------------------------------------------------------------------------------------ the suite

type Run<'a> = Pin<Box<dyn Future<Output = Result<(), Failed>> + 'a>>;

fn conformance<'a>(f: impl Future<Output = Result<(), ConformanceError>> + 'a) -> Run<'a> {
    Box::pin(async move { f.await.map_err(Failed::from) })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_against_a_real_control_plane() {
    let Some(path) = kubeconfig("real_cluster::conformance_against_a_real_control_plane") else {
        return;
    };
    let k = KubeCluster::from_kubeconfig(&path, None).await.unwrap();
    let client = k.client().clone();
    let stamp = chrono::Utc::now().timestamp_millis() % 100_000_000;
    let prefix = format!("vnfm-rt-{stamp}");
    let namespace = prefix.clone();

    // the nodes: created as a kubelet would, unless the cluster has its own
    let mut created = Vec::new();
    let nodes: Vec<String> = match std::env::var("VNFM_K8S_TEST_NODES") {
        Ok(v) if !v.trim().is_empty() => v.split_whitespace().map(str::to_owned).collect(),
        _ => {
            let t = Instant::now();
            for i in 1..=3 {
                let n = FakeNode {
                    name: format!("{prefix}-node-{i}"),
                    ip: format!("198.51.100.{}", 10 + i),
                    system_uuid: format!("4f2c0c0e-0000-4000-8000-{stamp:08}{i:04}"),
                    provider_id: format!("openstack:///4f2c0c0e-0000-4000-8000-{stamp:08}{i:04}"),
                };
                create_node(&client, &n).await.unwrap();
                created.push(n);
            }
            eprintln!(
                "created nodes {:?} ({:.1} s)",
                created.iter().map(|n| &n.name).collect::<Vec<_>>(),
                t.elapsed().as_secs_f64()
            );
            created.iter().map(|n| n.name.clone()).collect()
        }
    };
    k.apply_object(ApplyObject::new(
        "",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    ))
    .await
    .unwrap();

    let fx = Fixture::new("unused", "unused", "unused", "unused")
        .with_name_prefix(&prefix)
        .with_namespace(&namespace)
        .with_cluster_nodes(nodes.iter().map(String::as_str))
        .with_polling(Polling::new(120, Duration::from_millis(250)))
        .with_clock(Arc::new(TokioClock));

    let (c, f) = (&k, &fx);
    let ns = namespace.as_str();
    // the functions of cluster::run_all, each timed
    let mut suite: Vec<(&str, Run<'_>)> = vec![
        (
            "cluster::label_set_remove_idempotent",
            conformance(cluster::label_set_remove_idempotent(c, f)),
        ),
        (
            "cluster::unknown_objects_not_found",
            conformance(cluster::unknown_objects_not_found(c, f)),
        ),
        (
            "cluster::invalid_label_is_invalid",
            conformance(cluster::invalid_label_is_invalid(c, f)),
        ),
        (
            "cluster::required_anti_affinity_spreads",
            conformance(cluster::required_anti_affinity_spreads(c, f)),
        ),
        (
            "cluster::scale_workload",
            conformance(cluster::scale_workload(c, f)),
        ),
        (
            "cluster::deleted_pod_is_recreated",
            conformance(cluster::deleted_pod_is_recreated(c, f)),
        ),
        // what the suite does not cover
        (
            "nodes_as_a_kubelet_wrote_them",
            Box::pin(nodes_as_a_kubelet_wrote_them(c, &created)),
        ),
        (
            "events_say_why_a_pod_waits",
            Box::pin(events_say_why_a_pod_waits(c, ns)),
        ),
        (
            "apply_maps_the_kinds_of_a_cnf",
            Box::pin(apply_maps_the_kinds_of_a_cnf(c, ns)),
        ),
        (
            "apply_removes_fields_vnfm_no_longer_sets",
            Box::pin(apply_removes_fields_vnfm_no_longer_sets(c, ns)),
        ),
        (
            "apply_refusals_are_invalid",
            Box::pin(apply_refusals_are_invalid(c, ns)),
        ),
        (
            "statefulset_listed_and_scaled",
            Box::pin(statefulset_listed_and_scaled(c, ns)),
        ),
    ];
    // these two write pod status as a kubelet would, or rely on none running the pods
    if created.is_empty() {
        for what in [
            "graceful_delete_leaves_pod_deleting",
            "eviction_honours_the_disruption_budget",
        ] {
            vnfm_core::vectors::skip(
                SUITE,
                what,
                "needs a cluster without kubelets (VNFM_K8S_TEST_NODES names nodes of a \
                 cluster with kubelets)",
            );
        }
    } else {
        suite.push((
            "graceful_delete_leaves_pod_deleting",
            Box::pin(graceful_delete_leaves_pod_deleting(c, ns)),
        ));
        suite.push((
            "eviction_honours_the_disruption_budget",
            Box::pin(eviction_honours_the_disruption_budget(c, ns)),
        ));
    }

    let total = Instant::now();
    let mut failed = Vec::new();
    for (name, run) in suite {
        let t = Instant::now();
        match run.await {
            Ok(()) => eprintln!("ok     {name} ({:.1} s)", t.elapsed().as_secs_f64()),
            Err(e) => {
                eprintln!("FAILED {name} ({:.1} s): {e}", t.elapsed().as_secs_f64());
                failed.push(format!("{name}: {e}"));
            }
        }
    }
    eprintln!("suite: {:.1} s", total.elapsed().as_secs_f64());

    // clean-up: the namespace (and everything in it), then the nodes
    if let Err(e) = k
        .delete_object(ObjectRef::new("v1", "Namespace", "", &namespace))
        .await
    {
        eprintln!("cleanup: delete namespace {namespace}: {}", chain(&e));
    }
    for n in &created {
        delete_node(&client, &n.name).await;
    }
    assert!(
        failed.is_empty(),
        "{} behaviour(s) failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// `list_nodes` reads what a kubelet writes: addresses, `systemUUID`, `providerID`.
async fn nodes_as_a_kubelet_wrote_them(
    k: &KubeCluster,
    created: &[FakeNode],
) -> Result<(), Failed> {
    let listed = k.list_nodes().await?;
    for n in created {
        let Some(l) = listed.iter().find(|l| l.name.as_str() == n.name) else {
            return Err(Failed(format!("node {} is not listed", n.name)));
        };
        ensure(
            l.system_uuid.as_deref() == Some(n.system_uuid.as_str())
                && l.provider_id.as_deref() == Some(n.provider_id.as_str())
                && l.addresses_of("InternalIP").eq([n.ip.as_str()])
                && l.addresses_of("Hostname").eq([n.name.as_str()])
                && l.labels.get("kubernetes.io/hostname") == Some(&n.name),
            || format!("node {} listed as {l:?}", n.name),
        )?;
    }
    Ok(())
}

/// After the suite's anti-affinity behaviour left a pod unschedulable, the namespace's events
/// say why, as the scheduler wrote it (`events.k8s.io/v1`, read as core/v1).
async fn events_say_why_a_pod_waits(k: &KubeCluster, ns: &str) -> Result<(), Failed> {
    let events = until(
        "a FailedScheduling event",
        || async { Ok(k.list_events(ListEvents::new(ns)).await?) },
        |ev: &Vec<vnfm_core::driver::ClusterEvent>| {
            ev.iter().any(|e| e.reason == "FailedScheduling")
        },
    )
    .await?;
    let e = events
        .iter()
        .find(|e| e.reason == "FailedScheduling")
        .ok_or_else(|| Failed("no FailedScheduling".into()))?;
    ensure(
        e.kind == "Warning"
            && e.object_kind == "Pod"
            && e.count >= 1
            && e.message.contains("didn't match pod anti-affinity rules"),
        || format!("FailedScheduling event {e:?}"),
    )
}

/// Every kind of the table the task names is applied (created, then updated), read back
/// through kube, and deleted; a second delete is `NotFound`.
async fn apply_maps_the_kinds_of_a_cnf(k: &KubeCluster, ns: &str) -> Result<(), Failed> {
    let pod = json!({
        "metadata": {"labels": {"app": "kinds"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                 "terminationGracePeriodSeconds": 0},
    });
    let sel = json!({"matchLabels": {"app": "kinds"}});
    let objects = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kinds"},
               "data": {"a": "1"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kinds"},
               "stringData": {"a": "1"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kinds"}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kinds"},
               "spec": {"selector": {"app": "kinds"}, "ports": [{"port": 80}]}}),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "kinds"}, "spec": {"minAvailable": 1, "selector": sel}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kinds-d"},
               "spec": {"replicas": 0, "selector": sel, "template": pod}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "kinds-s"},
               "spec": {"replicas": 0, "serviceName": "kinds", "selector": sel, "template": pod}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kinds-ds"},
               "spec": {"selector": sel, "template": pod}}),
    ];
    for mut o in objects {
        // a field of vnfm's in every object: server-side apply records a manager only for the
        // fields it owns (a bare ServiceAccount would have none)
        o["metadata"]["labels"] = json!({"vnfm-test": "kinds"});
        let kind = o["kind"].as_str().unwrap_or_default();
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let api_version = o["apiVersion"].as_str().unwrap_or_default();
        k.apply_object(ApplyObject::new(ns, o.clone())).await?;
        // applying the same manifest again is a no-op that succeeds
        k.apply_object(ApplyObject::new(ns, o.clone())).await?;
        let r = vnfm_k8s::kinds::known(api_version, kind)
            .ok_or_else(|| Failed(format!("{kind} not in the table")))?;
        let got = Api::<kube::api::DynamicObject>::namespaced_with(k.client().clone(), ns, &r.api)
            .get(name)
            .await?;
        let managed = got
            .metadata
            .managed_fields
            .unwrap_or_default()
            .iter()
            .any(|m| {
                m.manager.as_deref() == Some("vnfm") && m.operation.as_deref() == Some("Apply")
            });
        ensure(managed, || {
            format!("{kind} {ns}/{name} has no Apply entry of field manager vnfm")
        })?;
        let obj = ObjectRef::new(api_version, kind, ns, name);
        k.delete_object(obj.clone()).await?;
        match k.delete_object(obj).await {
            Err(e) if e.is_not_found() => {}
            other => return Err(Failed(format!("second delete of {kind}: {other:?}"))),
        }
    }
    Ok(())
}

/// Server-side apply: a field vnfm set and no longer sets is removed; a field another
/// manager set is kept.
async fn apply_removes_fields_vnfm_no_longer_sets(k: &KubeCluster, ns: &str) -> Result<(), Failed> {
    let cm = |data: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "ssa", "namespace": ns}, "data": data})
    };
    k.apply_object(ApplyObject::new(ns, cm(json!({"a": "1", "b": "2"}))))
        .await?;
    let maps = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(k.client().clone(), ns);
    maps.patch(
        "ssa",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"other": "x"}})),
    )
    .await?;
    k.apply_object(ApplyObject::new(ns, cm(json!({"a": "1"}))))
        .await?;
    let data = maps.get("ssa").await?.data.unwrap_or_default();
    let want = BTreeMap::from([
        ("a".to_owned(), "1".to_owned()),
        ("other".to_owned(), "x".to_owned()),
    ]);
    ensure(data == want, || {
        format!("ConfigMap data {data:?}, expected {want:?}")
    })?;
    k.delete_object(ObjectRef::new("v1", "ConfigMap", ns, "ssa"))
        .await?;
    Ok(())
}

/// A manifest the API server refuses and kinds it does not serve are `Invalid`, with the API
/// server's message or naming the kind.
async fn apply_refusals_are_invalid(k: &KubeCluster, ns: &str) -> Result<(), Failed> {
    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad"},
        "spec": {"selector": {"matchLabels": {"app": "x"}},
                 "template": {"metadata": {"labels": {"app": "y"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    match k.apply_object(ApplyObject::new(ns, bad)).await {
        Err(DriverError::Invalid { message, .. })
            if message.contains("`selector` does not match template `labels`") => {}
        other => return Err(Failed(format!("selector mismatch applied: {other:?}"))),
    }
    for (api_version, kind) in [("example.com/v1", "Widget"), ("apps/v1", "Widget")] {
        let o = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}});
        match k.apply_object(ApplyObject::new(ns, o)).await {
            Err(DriverError::Invalid { message, .. })
                if message.contains(&format!("kind {kind} of apiVersion {api_version}")) => {}
            other => return Err(Failed(format!("{api_version} {kind} applied: {other:?}"))),
        }
    }
    // a kind outside the table, found by discovery: a Lease
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "vnfm-discovered"}, "spec": {"holderIdentity": "vnfm"}});
    k.apply_object(ApplyObject::new(ns, lease)).await?;
    k.delete_object(ObjectRef::new(
        "coordination.k8s.io/v1",
        "Lease",
        ns,
        "vnfm-discovered",
    ))
    .await?;
    Ok(())
}

async fn pods(k: &KubeCluster, ns: &str, app: &str) -> Result<Vec<Pod>, Failed> {
    Ok(k.list_pods(ListPods::new(ns, app)).await?)
}

/// A StatefulSet is listed by `list_workloads` as a manifest the core reads, and scales.
async fn statefulset_listed_and_scaled(k: &KubeCluster, ns: &str) -> Result<(), Failed> {
    let app = json!({"app": "sts"});
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "sts", "labels": app},
        "spec": {"replicas": 1, "serviceName": "sts", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": app},
                 "template": {"metadata": {"labels": app},
                     "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                              "terminationGracePeriodSeconds": 0}}}});
    k.apply_object(ApplyObject::new(ns, sts)).await?;
    k.scale_workload(ScaleWorkload::of(WorkloadKind::StatefulSet, ns, "sts", 2))
        .await?;
    let listed = k.list_workloads(ListWorkloads::new(ns)).await?;
    let w = listed
        .iter()
        .filter_map(|o| Workload::from_object(o, ns).ok())
        .find(|w| w.name == "sts")
        .ok_or_else(|| Failed(format!("sts not in list_workloads: {listed:?}")))?;
    ensure(
        w.kind == WorkloadKind::StatefulSet && w.replicas == 2,
        || format!("sts listed as {w:?}"),
    )?;
    until(
        "2 pods of the StatefulSet",
        || pods(k, ns, "sts"),
        |p| p.len() == 2,
    )
    .await?;
    k.delete_object(ObjectRef::new("apps/v1", "StatefulSet", ns, "sts"))
        .await?;
    Ok(())
}

/// Without a kubelet, a bound pod deleted with its own grace period stays, `deleting`; a
/// delete with grace 0 removes it (captures 43 and 44).
async fn graceful_delete_leaves_pod_deleting(k: &KubeCluster, ns: &str) -> Result<(), Failed> {
    let mut w = ApplyWorkload::new(ns, "graceful", 1).to_object();
    // a grace period of its own, so that the plain delete is graceful
    w.object["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(30);
    k.apply_object(w).await?;
    let bound = until(
        "a bound pod",
        || pods(k, ns, "graceful"),
        |p| p.len() == 1 && p[0].node.is_some(),
    )
    .await?;
    let name = bound[0].name.clone();
    k.delete_pod(DeletePod::new(ns, &name)).await?;
    let after = pods(k, ns, "graceful").await?;
    let victim = after.iter().find(|p| p.name == name);
    ensure(victim.is_some_and(|p| p.deleting), || {
        format!("after a graceful delete without kubelet, {name} is {victim:?}")
    })?;
    k.delete_pod(DeletePod::new(ns, &name).with_grace(0))
        .await?;
    until(
        "the pod gone after a delete with grace 0",
        || pods(k, ns, "graceful"),
        |p| p.iter().all(|x| x.name != name),
    )
    .await?;
    k.delete_object(ObjectRef::new("apps/v1", "Deployment", ns, "graceful"))
        .await?;
    Ok(())
}

/// Writes a pod's status as a kubelet would: Running and Ready (capture 48).
async fn run_pod(k: &KubeCluster, ns: &str, name: &str) -> Result<(), Failed> {
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let ready = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
    Api::<KubePod>::namespaced(k.client().clone(), ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {
                "phase": "Running", "startTime": now,
                "conditions": [ready("Initialized"), ready("ContainersReady"), ready("Ready")],
                "containerStatuses": [{"name": "vdu", "image": "registry.k8s.io/pause:3.10",
                    "imageID": "", "ready": true, "started": true, "restartCount": 0,
                    "state": {"running": {"startedAt": now}}}],
            }})),
        )
        .await?;
    Ok(())
}

/// With a PodDisruptionBudget that allows no disruption, evicting a running pod is a
/// `Conflict` carrying the API server's message, and the pod stays; a Pending pod is evicted
/// whatever the budget (the Eviction API ignores budgets for pods not running).
async fn eviction_honours_the_disruption_budget(k: &KubeCluster, ns: &str) -> Result<(), Failed> {
    let app = "evict";
    k.apply_object(ApplyWorkload::new(ns, app, 3).to_object())
        .await?;
    let bound = until(
        "3 bound pods",
        || pods(k, ns, app),
        |p| p.len() == 3 && p.iter().all(|x| x.node.is_some()),
    )
    .await?;
    let (running, pending) = (&bound[..2], &bound[2]);
    for p in running {
        run_pod(k, ns, &p.name).await?;
    }
    k.apply_object(ApplyObject::new(
        ns,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": app},
               "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app}}}}),
    ))
    .await?;
    let pdbs = Api::<PodDisruptionBudget>::namespaced(k.client().clone(), ns);
    until(
        "the disruption controller's status of the budget (2 healthy, 0 allowed)",
        || async {
            let s = pdbs.get(app).await?.status.unwrap_or_default();
            Ok((
                s.current_healthy,
                s.disruptions_allowed,
                s.observed_generation,
            ))
        },
        |&(healthy, allowed, observed)| {
            healthy == Some(2) && allowed == Some(0) && observed.is_some()
        },
    )
    .await?;
    match k.evict_pod(EvictPod::new(ns, &running[0].name)).await {
        Err(DriverError::Conflict { message, .. }) if message.contains("disruption budget") => {}
        other => return Err(Failed(format!("eviction against the budget: {other:?}"))),
    }
    let still = pods(k, ns, app).await?;
    ensure(
        still
            .iter()
            .any(|p| p.name == running[0].name && !p.deleting),
        || {
            format!(
                "{} was touched by a refused eviction: {still:?}",
                running[0].name
            )
        },
    )?;
    k.evict_pod(EvictPod::new(ns, &pending.name)).await?;
    until(
        "the evicted Pending pod gone",
        || pods(k, ns, app),
        |p| p.iter().all(|x| x.name != pending.name),
    )
    .await?;
    match k.evict_pod(EvictPod::new(ns, "no-such-pod")).await {
        Err(e) if e.is_not_found() => {}
        other => return Err(Failed(format!("eviction of an unknown pod: {other:?}"))),
    }
    k.delete_object(ObjectRef::new("policy/v1", "PodDisruptionBudget", ns, app))
        .await?;
    k.delete_object(ObjectRef::new("apps/v1", "Deployment", ns, app))
        .await?;
    Ok(())
}

// ------------------------------------------------------------------------------------ auth

/// `kubeconfig` with its `token:` line replaced by `token`, written into `dir`.
fn with_token(kubeconfig: &Path, token: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        match line.split_once("token:") {
            Some((indent, _)) if indent.trim().is_empty() => {
                out.push_str(&format!("{indent}token: {token}\n"));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let path = dir.join("kubeconfig-wrong-token");
    std::fs::write(&path, out).unwrap();
    path
}

/// The other ways in: a client certificate with the CA by file, a user without a role
/// (`PermissionDenied` with the API server's message), a token the server does not know
/// (`Unauthenticated`). The kubeconfigs come from `scripts/k8s-dev.sh`
/// (`VNFM_K8S_KUBECONFIG_CERT`, `VNFM_K8S_KUBECONFIG_VIEWER`).
#[tokio::test]
async fn auth_modes_against_a_real_control_plane() {
    let Some(admin) = kubeconfig("real_cluster::auth_modes_against_a_real_control_plane") else {
        return;
    };
    let admin = KubeCluster::from_kubeconfig(&admin, None).await.unwrap();
    let by_admin = admin.list_nodes().await.unwrap();
    match std::env::var_os("VNFM_K8S_KUBECONFIG_CERT").filter(|v| !v.is_empty()) {
        Some(p) => {
            let cert = KubeCluster::from_kubeconfig(Path::new(&p), None)
                .await
                .unwrap();
            let by_cert = cert.list_nodes().await.unwrap();
            let names = |n: &[vnfm_core::driver::ClusterNode]| -> Vec<NodeName> {
                n.iter().map(|x| x.name.clone()).collect()
            };
            // the other test may create or delete nodes in between: compare what both saw
            let (a, c) = (names(&by_admin), names(&by_cert));
            assert!(
                a.iter()
                    .all(|n| c.contains(n) || n.as_str().starts_with("vnfm-rt-")),
                "admin saw {a:?}, the client certificate {c:?}"
            );
        }
        None => vnfm_core::vectors::skip(
            SUITE,
            "auth_modes: client certificate",
            "VNFM_K8S_KUBECONFIG_CERT is not set (scripts/k8s-dev.sh prints it)",
        ),
    }
    match std::env::var_os("VNFM_K8S_KUBECONFIG_VIEWER").filter(|v| !v.is_empty()) {
        Some(p) => {
            let viewer = KubeCluster::from_kubeconfig(Path::new(&p), None)
                .await
                .unwrap();
            let e = viewer.list_nodes().await.unwrap_err();
            assert!(
                matches!(&e, DriverError::PermissionDenied { message, .. }
                    if message.contains(r#"User "vnfm-viewer" cannot list resource "nodes""#)),
                "{e:?}"
            );
            let e = viewer
                .list_pods(ListPods::new("default", "x"))
                .await
                .unwrap_err();
            assert!(matches!(e, DriverError::PermissionDenied { .. }), "{e:?}");
            let dir = tempfile::tempdir().unwrap();
            let wrong = with_token(Path::new(&p), "not-a-token-of-this-server", dir.path());
            let wrong = KubeCluster::from_kubeconfig(&wrong, None).await.unwrap();
            let e = wrong.list_nodes().await.unwrap_err();
            assert!(
                matches!(&e, DriverError::Unauthenticated { message, .. } if message.contains("Unauthorized")),
                "{e:?}"
            );
        }
        None => vnfm_core::vectors::skip(
            SUITE,
            "auth_modes: no role, wrong token",
            "VNFM_K8S_KUBECONFIG_VIEWER is not set (scripts/k8s-dev.sh prints it)",
        ),
    }
}
