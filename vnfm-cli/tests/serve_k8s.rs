//! Auto-heal and auto-scale of a CNF from Alertmanager webhooks, by `vnfm serve` on a real
//! Kubernetes control plane (issue 12, acceptance 7): the CNF
//! (`examples/packages/cnf-podaffinity`) is created and instantiated through the SOL003 API
//! on the cluster of `[cluster] kubeconfig`; an auto-heal alert naming one of its pods makes
//! vnfm delete it, the real controller-manager creates a replacement and the real scheduler
//! binds it; an auto-scale alert adds a replica (Pending: three hosts, required anti-affinity,
//! with the scheduler's reason) and another removes it.
//!
//! Runs with `VNFM_TEST_K8S=1` and `VNFM_K8S_KUBECONFIG` (`eval "$(scripts/k8s-dev.sh start)"`;
//! scripts/test.sh does it on CI); otherwise it records a skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod k8s_common;
mod serve_common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_common::{client, copy_package, register_node};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{json, Value};
use serve_common::*;

/// The vnfdId of `examples/packages/cnf-podaffinity`.
const CNF_VNFD: &str = "5b0c7e2a-91d4-4c3f-8a6e-2f7d1c9b4e30";
const HOST_KEY: &str = "topology.openstack.org/host-id";
const RUN_LABEL: &str = "vnfm-serve-e2e";

/// The pods of the CNF not being deleted: name → node.
async fn live_pods(pods: &Api<Pod>) -> Vec<(String, Option<String>)> {
    pods.list(&ListParams::default().labels("app=vdu1"))
        .await
        .unwrap()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.spec.and_then(|s| s.node_name),
            )
        })
        .collect()
}

async fn vnfc_ids(addr: std::net::SocketAddr, id: &str) -> BTreeSet<String> {
    servers(addr, id).await.into_keys().collect()
}

/// The newest occurrence of `operation` of `instance`, once terminal.
async fn settled_op(
    addr: std::net::SocketAddr,
    instance: &str,
    operation: &str,
    n: usize,
) -> Value {
    let op = eventually(60, &format!("{operation} number {n}"), || async {
        let all = ops(addr, instance, operation).await;
        (all.len() >= n).then(|| all[n - 1].clone())
    })
    .await;
    let id = op["id"].as_str().unwrap();
    wait_op(addr, &format!("/vnflcm/v2/vnf_lcm_op_occs/{id}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_heal_and_scale_a_cnf_on_a_real_control_plane() {
    if !vnfm_core::vectors::real_suite_enabled(
        "VNFM_TEST_K8S",
        "real-k8s",
        module_path!(),
        "set VNFM_TEST_K8S=1 and VNFM_K8S_KUBECONFIG (eval \"$(scripts/k8s-dev.sh start)\")",
    ) {
        return;
    }
    let kubeconfig = PathBuf::from(
        std::env::var("VNFM_K8S_KUBECONFIG").expect("VNFM_K8S_KUBECONFIG (scripts/k8s-dev.sh)"),
    );
    let client = client(&kubeconfig).await;
    let nodes = Api::<Node>::all(client.clone());
    for n in nodes
        .list(&ListParams::default().labels(RUN_LABEL))
        .await
        .unwrap()
    {
        let _ = nodes
            .delete(
                &n.metadata.name.unwrap_or_default(),
                &DeleteParams::default(),
            )
            .await;
    }
    let run = std::process::id();
    let names: Vec<String> = (1..=3).map(|i| format!("serve-{run}-worker-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        // labelled with its compute host, as `vnfm cluster label` would have
        let labels = BTreeMap::from([
            (RUN_LABEL, "1".to_owned()),
            (HOST_KEY, format!("compute-{}", i + 1)),
        ]);
        register_node(&client, name, &labels, None).await;
    }
    let ns = format!("vnfm-serve-{run}");
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);

    let dir = tempfile::tempdir().unwrap();
    let pkgs = dir.path().join("packages");
    copy_package(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/cnf-podaffinity"),
        &pkgs.join("cnf-podaffinity"),
        &[],
    );
    let mut c = config(dir.path(), 1);
    c.packages.dir = Some(pkgs);
    c.cluster.kubeconfig = Some(kubeconfig.clone());
    c.cluster.namespace = Some(ns.clone());
    c.cluster.nodes = Some(format!("{RUN_LABEL}=1"));
    let server = start(c).await;
    let addr = server.local_addr();

    // create and instantiate through the API, then allow auto-heal and auto-scale
    let (id, op) = create_and_instantiate(addr, CNF_VNFD, "podaffinity").await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    configure(
        addr,
        &id,
        json!({"isAutohealEnabled": true, "isAutoscaleEnabled": true}),
    )
    .await;

    let before = live_pods(&pods).await;
    assert_eq!(before.len(), 3, "{before:?}");
    let bound: BTreeSet<&String> = before.iter().filter_map(|p| p.1.as_ref()).collect();
    assert_eq!(bound.len(), 3, "one pod per node (host): {before:?}");
    let vnfcs = vnfc_ids(addr, &id).await;
    assert_eq!(
        vnfcs,
        before.iter().map(|p| p.0.clone()).collect::<BTreeSet<_>>(),
        "the VNFCs are the pods"
    );

    // auto-heal: the pod named by the alert is deleted and replaced, the new one bound
    let victim = before[0].0.clone();
    let r = post_alert(
        addr,
        "auto_healing",
        Some(BASIC_HEADER),
        &webhook(&[heal_alert(&id, &victim, "cnf-heal-1", "firing", false)]),
    )
    .await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let heal = settled_op(addr, &id, "HEAL", 1).await;
    assert_eq!(heal["operationState"], "COMPLETED", "{heal}");
    assert_eq!(heal["isAutomaticInvocation"], true, "{heal}");
    let after = eventually(30, "the replacement bound", || async {
        let now = live_pods(&pods).await;
        (now.len() == 3 && now.iter().all(|p| p.1.is_some())).then_some(now)
    })
    .await;
    assert!(after.iter().all(|p| p.0 != victim), "{after:?}");
    let vnfcs = vnfc_ids(addr, &id).await;
    assert!(!vnfcs.contains(&victim), "{vnfcs:?}");
    assert_eq!(vnfcs.len(), 3, "{vnfcs:?}");

    // auto-scale out: a fourth replica, Pending with the scheduler's reason
    let r = post_alert(
        addr,
        "auto_scaling",
        Some(&format!("Bearer {BEARER}")),
        &webhook(&[scale_alert(&id, "vdu1_aspect", "SCALE_OUT", "cnf-scale-1")]),
    )
    .await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    let scale = settled_op(addr, &id, "SCALE", 1).await;
    assert_eq!(scale["operationState"], "COMPLETED", "{scale}");
    let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
    let d = deployments.get("vdu1").await.unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(4));
    let four = live_pods(&pods).await;
    assert_eq!(four.len(), 4, "{four:?}");
    assert_eq!(four.iter().filter(|p| p.1.is_none()).count(), 1, "{four:?}");
    assert_eq!(vnfc_ids(addr, &id).await.len(), 4);
    let warnings = scale["warnings"].to_string();
    assert!(
        warnings.contains("didn't match pod anti-affinity rules"),
        "the real scheduler's reason in the occurrence: {scale}"
    );

    // and in again, after the cooldown
    eventually(30, "a scale-in accepted after the cooldown", || async {
        let r = post_alert(
            addr,
            "auto_scaling",
            Some(&format!("Bearer {BEARER}")),
            &webhook(&[scale_alert(&id, "vdu1_aspect", "SCALE_IN", "cnf-scale-2")]),
        )
        .await;
        assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
        let all = ops(addr, &id, "SCALE").await;
        (all.len() >= 2).then_some(())
    })
    .await;
    let scale_in = settled_op(addr, &id, "SCALE", 2).await;
    assert_eq!(scale_in["operationState"], "COMPLETED", "{scale_in}");
    let d = deployments.get("vdu1").await.unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(3));
    let three = eventually(30, "three pods, all bound", || async {
        let now = live_pods(&pods).await;
        (now.len() == 3 && now.iter().all(|p| p.1.is_some())).then_some(now)
    })
    .await;
    assert_eq!(three.len(), 3);

    server.shutdown().await.unwrap();
    for name in &names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
}
