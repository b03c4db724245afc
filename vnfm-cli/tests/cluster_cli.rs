//! Hardware-aware affinity through the `vnfm` binary on the simulated cloud: the cluster VNF
//! (`examples/packages/k8s-cluster-vnf`: three workers in an anti-affinity server group) is
//! instantiated and its end-of-operation hook labels the worker nodes with their hosts; the CNF
//! (`examples/packages/cnf-podaffinity`) spreads over them; `vnfm cloud migrate` puts two
//! workers on one host, `vnfm cluster verify` exits 6 naming the pair and the stale label,
//! `reconcile --evict` relabels and evicts, and once the worker is moved to a free host,
//! `reconcile` brings the spread back: three pods on three hosts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const VNFM_ENV: &[&str] = &[
    "VNFM_CONFIG",
    "VNFM_STATE",
    "VNFM_VIM",
    "VNFM_SIM_SEED",
    "VNFM_ID_SALT",
    "VNFM_PACKAGES_DIR",
    "VNFM_CLOUD",
    "VNFM_KUBECONFIG",
];

const CLUSTER_VNFD: &str = "7d1e5a90-3c42-4b8e-9f16-0a5c2e8b4d73";

const CLOUD: &str = "
zones:
  AZ-1:
    hosts:
      compute-1: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
      compute-2: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
      compute-3: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
      compute-4: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
flavors:
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
cluster:
  join: {servers: '^workerNode'}
";

fn run(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.arg("--config")
        .arg(dir.join("vnfm.toml"))
        .arg("--json")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    cmd.output().expect("vnfm runs")
}

/// The `--json` report of a run that exited `code`; every report (instantiate, instance show,
/// cluster verify even when it exits 6, cluster reconcile, cloud migrate) has `version` 1.
fn json(out: &Output, code: i32) -> Value {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], 1, "{v}");
    v
}

/// (server id, host) of every worker VNFC of the cluster VNF, by VNFC order.
fn workers(dir: &Path, instance: &str) -> Vec<(String, String)> {
    let v = json(&run(dir, &["instance", "show", instance]), 0);
    v["vnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["vduId"] == "workerNode")
        .map(|c| {
            (
                c["serverId"].as_str().unwrap().to_owned(),
                c["host"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn verify(dir: &Path, instance: &str, code: i32) -> Value {
    json(
        &run(dir, &["cluster", "verify", "--instance", instance]),
        code,
    )
}

fn bound_hosts(report: &Value) -> BTreeSet<String> {
    report["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| !h["pods"].as_array().unwrap().is_empty())
        .map(|h| h["host"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn label_verify_drift_and_reconcile_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cloud.yaml"), CLOUD).unwrap();
    std::fs::write(
        dir.path().join("vnfm.toml"),
        format!(
            "[vim]\ncloud = {:?}\n[state]\npath = {:?}\n[cluster]\ncluster_vnfds = [{CLUSTER_VNFD:?}]\n",
            dir.path().join("cloud.yaml"),
            dir.path().join("state.sqlite")
        ),
    )
    .unwrap();

    // the cluster VNF: its instantiate ends with the host-labels hook
    let a = json(
        &run(
            dir.path(),
            &[
                "instantiate",
                "--package",
                "../examples/packages/k8s-cluster-vnf",
            ],
        ),
        0,
    );
    let a_id = a["vnfInstance"]["id"].as_str().unwrap().to_owned();
    let hooks = a["vnfLcmOpOcc"]["hooks"].to_string();
    assert!(
        hooks.contains("3 node(s) labelled topology.openstack.org/host-id from OS-EXT-SRV-ATTR:host (3 patched"),
        "{hooks}"
    );
    let w = workers(dir.path(), &a_id);
    assert_eq!(w.len(), 3);
    assert_eq!(
        w.iter().map(|x| &x.1).collect::<BTreeSet<_>>().len(),
        3,
        "server group: 3 hosts"
    );
    // labelling again changes nothing: the hook labelled every worker
    let l = json(
        &run(dir.path(), &["cluster", "label", "--instance", &a_id]),
        0,
    );
    assert_eq!(l["patched"], 0, "{l}");
    assert_eq!(l["plan"]["nodes"].as_array().map(Vec::len), Some(3), "{l}");

    // the CNF spreads over the three hosts
    json(
        &run(
            dir.path(),
            &[
                "instantiate",
                "--package",
                "../examples/packages/cnf-podaffinity",
            ],
        ),
        0,
    );
    let r = verify(dir.path(), &a_id, 0);
    assert_eq!(bound_hosts(&r).len(), 3, "{r}");

    // a live migration puts the second worker on the first one's host
    json(
        &run(dir.path(), &["cloud", "migrate", &w[1].0, "--to", &w[0].1]),
        0,
    );
    let r = verify(dir.path(), &a_id, 6);
    assert_eq!(r["staleLabels"].as_array().unwrap().len(), 1, "{r}");
    let pairs: Vec<&Value> = r["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["sharing"].as_array().unwrap())
        .collect();
    assert_eq!(pairs.len(), 1, "{r}");
    assert_eq!(pairs[0]["host"], w[0].1.as_str());

    // reconcile --evict: one patch, one eviction; the evicted pod waits (two hosts left)
    let rec = json(
        &run(
            dir.path(),
            &["cluster", "reconcile", "--instance", &a_id, "--evict"],
        ),
        0,
    );
    assert_eq!(rec["labelled"]["patched"], 1, "{rec}");
    assert_eq!(rec["evicted"].as_array().unwrap().len(), 1, "{rec}");
    let r = verify(dir.path(), &a_id, 0);
    assert_eq!(r["pending"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["pending"][0]["reason"], "Unschedulable");

    // the worker goes to the free host; reconcile relabels and the pod is placed there
    let used: BTreeSet<&str> = w.iter().map(|x| x.1.as_str()).collect();
    let free = ["compute-1", "compute-2", "compute-3", "compute-4"]
        .into_iter()
        .find(|h| !used.contains(h))
        .unwrap();
    json(
        &run(dir.path(), &["cloud", "migrate", &w[1].0, "--to", free]),
        0,
    );
    let rec = json(
        &run(dir.path(), &["cluster", "reconcile", "--instance", &a_id]),
        0,
    );
    assert_eq!(rec["labelled"]["patched"], 1, "{rec}");
    let r = verify(dir.path(), &a_id, 0);
    assert!(r["pending"].as_array().unwrap().is_empty(), "{r}");
    assert_eq!(bound_hosts(&r).len(), 3, "{r}");
    // and nothing left to do
    let rec = json(
        &run(dir.path(), &["cluster", "reconcile", "--instance", &a_id]),
        0,
    );
    assert_eq!(rec["labelled"]["patched"], 0, "{rec}");
}
