//! The core's conformance suite of the cluster trait (`vnfm_core::conformance::cluster::run_all`)
//! against a loopback server replaying the suite's own exchanges with a real kube-apiserver
//! 1.36.2: the project's fixture `tests/fixtures/conformance-v1.36.2.json` (no service and no
//! `../shared` needed). The server checks that every request the adapter sends is the recorded
//! one, in order, and answers as the real server did (see `replay/exchanges.rs`).
//!
//! The same suite runs against the simulator (`vnfm-core/tests/conformance_sim.rs`) and against
//! a real control plane (`tests/real_cluster.rs`).
//!
//! Re-capture (the only ignored test here; it replaces the fixture), with a control plane of
//! `scripts/k8s-dev.sh`:
//!
//! ```text
//! eval "$(scripts/k8s-dev.sh start)"
//! VNFM_K8S_CAPTURE=1 cargo test -p vnfm-k8s --test conformance_replay -- --ignored --nocapture
//! scripts/k8s-dev.sh stop
//! ```
//!
//! The suite names what it creates `<prefix>-<what>-<n>` with a counter of the process: only
//! one test of this file may run the suite (the capture runs alone with `--ignored`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod replay;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use vnfm_core::conformance::{cluster, Fixture, Polling};
use vnfm_core::driver::{
    ApplyObject, Clock, ClusterDriver, LabelNode, ListPods, ObjectRef, VirtualClock,
};
use vnfm_core::id::NodeName;
use vnfm_k8s::KubeCluster;

use replay::exchanges::{Exchange, Recorder, Recording, Script, Sent};
use replay::Server;

/// The fixture file, relative to the crate.
const RECORDING: &str = "tests/fixtures/conformance-v1.36.2.json";

fn recording_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(RECORDING)
}

/// The suite's fixture as recorded, on `clock`.
fn fixture(recorded: &Value, clock: Arc<dyn Clock>) -> Fixture {
    let s = |k: &str| {
        recorded[k]
            .as_str()
            .unwrap_or_else(|| panic!("{RECORDING}: fixture.{k} is not a string"))
            .to_owned()
    };
    let n = |k: &str| {
        recorded[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{RECORDING}: fixture.{k} is not a number"))
    };
    let nodes: Vec<String> = recorded["cluster_nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("{RECORDING}: fixture.cluster_nodes is not an array"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    Fixture::new("unused", "unused", "unused", "unused")
        .with_name_prefix(s("name_prefix"))
        .with_namespace(s("namespace"))
        .with_cluster_nodes(nodes)
        .with_polling(Polling::new(
            u32::try_from(n("max_polls")).unwrap(),
            Duration::from_millis(n("interval_ms")),
        ))
        .with_clock(clock)
}

/// A loopback server serving `exchanges`, and the adapter on its kubeconfig.
async fn scripted(exchanges: Vec<Exchange>) -> (Server, Arc<Script>, KubeCluster) {
    let script = Arc::new(Script::new(exchanges));
    let server = Server::start(script.clone());
    let k = KubeCluster::from_kubeconfig(&server.kubeconfig(), None)
        .await
        .unwrap();
    (server, script, k)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_passes_against_the_recorded_api_server() {
    let rec = Recording::read(&recording_path());
    let recorded = rec.exchanges.len();
    // sleeps return at once: the recorded answers come in the recorded order
    let fx = fixture(
        &rec.fixture,
        Arc::new(VirtualClock::new(chrono::DateTime::UNIX_EPOCH)),
    );
    let (_server, script, k) = scripted(rec.exchanges).await;
    let outcome = cluster::run_all(&k, &fx).await;
    let mismatches = script.mismatches();
    assert!(
        mismatches.is_empty(),
        "the adapter did not send the recorded requests:\n{}",
        mismatches.join("\n")
    );
    outcome.unwrap();
    assert_eq!(script.unserved(), None, "of {recorded} exchanges");
}

// ------------------------------------------------------------------------------------ the server

fn get(target: &str, body: Value) -> Exchange {
    Exchange {
        request: Sent {
            method: "GET".into(),
            target: target.into(),
            content_type: None,
            body: None,
        },
        status: 200,
        content_type: "application/json".into(),
        body,
    }
}

fn pods(names: &[&str]) -> Value {
    let items: Vec<Value> = names
        .iter()
        .map(|n| {
            json!({"metadata": {"name": n, "namespace": "ns", "labels": {"app": "web"}},
                   "spec": {}, "status": {"phase": "Pending"}})
        })
        .collect();
    json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
}

fn nodes(names: &[&str]) -> Value {
    let items: Vec<Value> = names
        .iter()
        .map(|n| json!({"metadata": {"name": n, "labels": {}}}))
        .collect();
    json!({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items})
}

const PODS: &str = "/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb";

async fn pod_count(k: &KubeCluster) -> usize {
    k.list_pods(ListPods::new("ns", "web")).await.unwrap().len()
}

#[tokio::test]
async fn a_poll_repeated_more_or_fewer_times_than_recorded_is_served() {
    let recording = vec![
        get(PODS, pods(&[])),
        get(PODS, pods(&["a"])),
        get(PODS, pods(&["a", "b"])),
        get("/api/v1/nodes", nodes(&["n1"])),
        get(PODS, pods(&["a"])),
        get(PODS, pods(&["a", "b"])),
        get(PODS, pods(&["a", "b", "c"])),
        get("/api/v1/nodes", nodes(&["n1", "n2"])),
    ];
    let (_server, script, k) = scripted(recording).await;
    // more polls than recorded: the last answer again
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(pod_count(&k).await);
    }
    assert_eq!(seen, [0, 1, 2, 2, 2]);
    assert_eq!(k.list_nodes().await.unwrap().len(), 1);
    // fewer polls than recorded: the recorded repeats are skipped when the adapter moves on
    assert_eq!(pod_count(&k).await, 1);
    assert_eq!(k.list_nodes().await.unwrap().len(), 2);
    assert_eq!(script.mismatches(), Vec::<String>::new());
    assert_eq!(script.unserved(), None);
}

#[tokio::test]
async fn a_request_other_than_the_recorded_one_fails_naming_both() {
    // the recording's first request is the suite's first list of nodes
    let rec = Recording::read(&recording_path());
    let first = rec.exchanges[0].request.clone();
    assert_eq!(first.to_string(), "GET /api/v1/nodes");
    let (_server, script, k) = scripted(rec.exchanges).await;
    let e = k
        .list_pods(ListPods::new("elsewhere", "x"))
        .await
        .unwrap_err();
    let actual = "GET /api/v1/namespaces/elsewhere/pods?labelSelector=app%3Dx";
    let text = e.to_string();
    assert!(text.contains(actual), "{text}");
    assert!(text.contains("expected exchange 1 of"), "{text}");
    assert!(
        text.contains("GET /api/v1/nodes (differs in: path or query)"),
        "{text}"
    );
    let [m] = script.mismatches().try_into().unwrap();
    assert!(m.contains(actual) && m.contains("GET /api/v1/nodes"), "{m}");
    // the recording goes on where it was
    assert!(!k.list_nodes().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_body_other_than_the_recorded_one_fails_naming_both() {
    let patch = Exchange {
        request: Sent {
            method: "PATCH".into(),
            target: "/api/v1/nodes/n1".into(),
            content_type: Some("application/merge-patch+json".into()),
            body: Some(json!({"metadata": {"labels": {"zone": "a"}}})),
        },
        status: 200,
        content_type: "application/json".into(),
        body: json!({"metadata": {"name": "n1", "labels": {"zone": "a"}}}),
    };
    let (_server, script, k) = scripted(vec![patch]).await;
    let labels = BTreeMap::from([("zone".to_owned(), Some("b".to_owned()))]);
    let e = k
        .label_node(LabelNode::new(NodeName::new("n1"), labels))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(r#"PATCH /api/v1/nodes/n1 (application/merge-patch+json) {"metadata":{"labels":{"zone":"b"}}}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"metadata":{"labels":{"zone":"a"}}} (differs in: body)"#),
        "{text}"
    );
    assert_eq!(script.mismatches().len(), 1);
    assert!(script.unserved().unwrap().contains("exchange 1 of 1"));
}

// ------------------------------------------------------------------------------------ capture

/// Real time, for the polls of the capture.
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

const NAME_PREFIX: &str = "vnfm-cf";
const NAMESPACE: &str = "vnfm-conformance";
const NODES: [&str; 3] = ["vnfm-cf-node-1", "vnfm-cf-node-2", "vnfm-cf-node-3"];

/// Creates node `i` of [`NODES`] as a kubelet registers itself (as `real_cluster.rs` does),
/// without the `node.kubernetes.io/not-ready` taint.
async fn create_node(client: &kube::Client, i: usize) {
    let name = NODES[i];
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let resources = json!({"cpu": "8", "memory": "32Gi", "pods": "110"});
    let uuid = format!("4f2c0c0e-0000-4000-8000-00000000000{}", i + 1);
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"providerID": format!("openstack:///{uuid}")},
        "status": {
            "addresses": [{"type": "InternalIP", "address": format!("198.51.100.{}", 11 + i)}],
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "nodeInfo": {"machineID": "", "systemUUID": uuid, "bootID": "",
                         "kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "containerRuntimeVersion": "containerd://1.7.0",
                         "kubeletVersion": "v1.36.2", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"},
        },
    }))
    .unwrap();
    let api = Api::<Node>::all(client.clone());
    api.create(&PostParams::default(), &node).await.unwrap();
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"taints": null}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "re-captures tests/fixtures/conformance-v1.36.2.json: VNFM_K8S_CAPTURE=1 and a control plane (VNFM_K8S_KUBECONFIG)"]
async fn capture_the_suite_from_a_real_control_plane() {
    if vnfm_core::vectors::flag("VNFM_K8S_CAPTURE") != Some(true) {
        eprintln!(
            "capture_the_suite_from_a_real_control_plane: VNFM_K8S_CAPTURE is not set, nothing \
             recorded"
        );
        return;
    }
    let path = std::env::var_os("VNFM_K8S_KUBECONFIG")
        .expect("VNFM_K8S_CAPTURE needs VNFM_K8S_KUBECONFIG: eval \"$(scripts/k8s-dev.sh start)\"");
    let real = KubeCluster::from_kubeconfig(Path::new(&path), None)
        .await
        .unwrap();
    let client = real.client().clone();
    // the suite's fixture objects, not recorded: a namespace and three nodes, as fixed names
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    assert!(
        namespaces.get_opt(NAMESPACE).await.unwrap().is_none(),
        "namespace {NAMESPACE} exists (a previous capture?): restart the control plane \
         (scripts/k8s-dev.sh stop; scripts/k8s-dev.sh start), which empties etcd"
    );
    real.apply_object(ApplyObject::new(
        "",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
    ))
    .await
    .unwrap();
    for i in 0..NODES.len() {
        create_node(&client, i).await;
    }

    let recorder = Arc::new(Recorder::new(
        client.clone(),
        tokio::runtime::Handle::current(),
    ));
    let server = Server::start(recorder.clone());
    let k = KubeCluster::from_kubeconfig(&server.kubeconfig(), None)
        .await
        .unwrap();
    let recorded_fixture = json!({
        "name_prefix": NAME_PREFIX,
        "namespace": NAMESPACE,
        "cluster_nodes": NODES,
        "max_polls": 120,
        "interval_ms": 500,
    });
    let fx = fixture(&recorded_fixture, Arc::new(TokioClock));
    let outcome = cluster::run_all(&k, &fx).await;

    if let Err(e) = real
        .delete_object(ObjectRef::new("v1", "Namespace", "", NAMESPACE))
        .await
    {
        eprintln!("cleanup: delete namespace {NAMESPACE}: {e}");
    }
    for n in NODES {
        if let Err(e) = Api::<Node>::all(client.clone())
            .delete(n, &Default::default())
            .await
        {
            eprintln!("cleanup: delete node {n}: {e}");
        }
    }
    outcome.unwrap();
    assert_eq!(recorder.errors(), Vec::<String>::new());

    let version = client.apiserver_version().await.unwrap();
    let rec = Recording {
        about: json!(format!(
            "The exchanges of vnfm_core::conformance::cluster::run_all with kube-apiserver {} \
             (scripts/k8s-dev.sh), recorded by the ignored test \
             capture_the_suite_from_a_real_control_plane of vnfm-k8s/tests/conformance_replay.rs \
             (see tests/fixtures/README.md); answers keep status, Content-Type and body, without \
             metadata.managedFields; a run of identical polls is kept once",
            version.git_version
        )),
        fixture: recorded_fixture,
        exchanges: recorder.exchanges(),
    };
    let mut text = serde_json::to_string_pretty(&rec.to_json()).unwrap();
    text.push('\n');
    std::fs::write(recording_path(), text).unwrap();
    eprintln!(
        "recorded {} exchanges into {}",
        rec.exchanges.len(),
        recording_path().display()
    );
}
