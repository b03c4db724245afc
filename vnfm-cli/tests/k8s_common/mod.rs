//! Shared by the tests against a real Kubernetes control plane (`serve_k8s`,
//! `real_hw_affinity`): a client of a kubeconfig, Nodes registered as kubelets would, and
//! package copies.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// A client of the kubeconfig at `path` (its current context).
pub async fn client(path: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(path).unwrap();
    let kc = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(kc).unwrap()
}

/// Creates Node `name` as its kubelet registers it: `labels` (plus `kubernetes.io/hostname`
/// and `kubernetes.io/os`), a Hostname address, allocatable, Ready, and with `system_uuid`
/// (Nova's SMBIOS UUID = the server id) the nodeInfo; then removes the not-ready taint as the
/// node-lifecycle controller would once Ready.
pub async fn register_node(
    client: &kube::Client,
    name: &str,
    labels: &BTreeMap<&str, String>,
    system_uuid: Option<&str>,
) {
    let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let resources = json!({"cpu": "4", "memory": "8Gi", "pods": "110"});
    let mut all = json!({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"});
    for (k, v) in labels {
        all[*k] = json!(v);
    }
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all},
        "status": {
            "addresses": [{"type": "Hostname", "address": name}],
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
        },
    });
    if let Some(uuid) = system_uuid {
        node["status"]["nodeInfo"] = json!({
            "machineID": "", "systemUUID": uuid, "bootID": "",
            "kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
            "containerRuntimeVersion": "containerd://1.7.0", "kubeletVersion": "v1.36.2",
            "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
        });
    }
    let node: Node = serde_json::from_value(node).unwrap();
    let nodes = Api::<Node>::all(client.clone());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": null}})),
        )
        .await
        .unwrap();
}

/// Copies the folder `src` into `dst` with every `(from, to)` replaced in its files.
pub fn copy_package(src: &Path, dst: &Path, edits: &[(&str, &str)]) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_package(&entry.path(), &to, edits);
        } else {
            let mut text = std::fs::read_to_string(entry.path()).unwrap();
            for (from, by) in edits {
                text = text.replace(from, by);
            }
            std::fs::write(to, text).unwrap();
        }
    }
}
