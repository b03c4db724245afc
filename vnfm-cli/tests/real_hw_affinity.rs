//! Hardware-aware pod affinity end to end on real services (issue 12, acceptance 2 and 3): a
//! real OpenStack (Keystone, Nova with its real scheduler, Placement, Heat) and a real
//! Kubernetes control plane (kube-apiserver, kube-scheduler, kube-controller-manager 1.36),
//! driven by the `vnfm` binary as an operator would:
//!
//! 1. `vnfm --vim openstack instantiate` of the cluster VNF (`examples/packages/k8s-cluster-vnf`
//!    with the cloud's image and flavour): its three workers are an AutoScalingGroup in one
//!    zone of three hosts, and the VNFD's `AntiAffinityRule` over the `PlacementGroup` at
//!    `nfvi_node` scope makes them members of a Nova server group `anti-affinity`: Nova's
//!    scheduler puts them on three hosts;
//! 2. the test registers three Nodes in the real kube-apiserver as their kubelets would
//!    (addresses, `systemUUID` = the server id, Ready);
//! 3. `vnfm cluster label` labels them with the real hosts (admin: `OS-EXT-SRV-ATTR:host`;
//!    the non-admin run: Nova's `hostId`), and again with no PATCH;
//! 4. the CNF (`examples/packages/cnf-podaffinity`: a Deployment of three replicas with
//!    required pod anti-affinity on the host label) is instantiated on the real cluster: the
//!    real kube-scheduler binds its pods to three nodes on three hosts; `vnfm cluster verify`
//!    reports one pod per host;
//! 5. a scale out to four leaves one pod Pending, and `verify` reports the scheduler's reason;
//! 6. after a scale in, a heal (pod delete) is rescheduled by the real controller-manager and
//!    scheduler onto the freed node.
//!
//! Runs only with `VNFM_TEST_HW_AFFINITY=1`, the `OS_*` variables of a cloud whose zone
//! `VNFM_OS_TEST_WORKER_ZONE` has at least three hosts that can hold an m1.tiny, and
//! `VNFM_K8S_KUBECONFIG` (scripts/test.sh brings both up on CI: `scripts/openstack-dev.sh`
//! with `VNFM_OS_HOSTS="w1 w2 w3" VNFM_OS_ZONES="azw:w1,w2,w3"`, and `scripts/k8s-dev.sh`);
//! otherwise it records a skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod k8s_common;

use k8s_common::{client, copy_package, register_node};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};

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

/// The vnfdId of `examples/packages/k8s-cluster-vnf`.
const CLUSTER_VNFD: &str = "7d1e5a90-3c42-4b8e-9f16-0a5c2e8b4d73";
const HOST_KEY: &str = "topology.openstack.org/host-id";

/// Whose credentials `vnfm` uses.
#[derive(Clone, Copy, Debug)]
enum Creds {
    Admin,
    Member,
}

impl Creds {
    fn run(self) -> &'static str {
        match self {
            Creds::Admin => "admin",
            Creds::Member => "member",
        }
    }
}

struct Env {
    dir: PathBuf,
    creds: Creds,
}

impl Env {
    fn vnfm(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
        cmd.arg("--config")
            .arg(self.dir.join("vnfm.toml"))
            .arg("--json")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        for var in VNFM_ENV {
            cmd.env_remove(var);
        }
        if let Creds::Member = self.creds {
            let var = |k: &str| {
                std::env::var(k)
                    .unwrap_or_else(|_| panic!("{k} (scripts/openstack-dev.sh env prints it)"))
            };
            cmd.env("OS_USERNAME", var("VNFM_OS_MEMBER_USERNAME"))
                .env("OS_PASSWORD", var("VNFM_OS_MEMBER_PASSWORD"))
                .env("OS_PROJECT_NAME", var("VNFM_OS_MEMBER_PROJECT"))
                .env_remove("OS_PROJECT_ID");
        }
        cmd.output().expect("vnfm runs")
    }
}

fn json_of(out: &Output, code: i32, what: &str) -> Value {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The pods of the CNF as the binary reports them: (pod, node).
fn pods(v: &Value) -> Vec<(String, Option<String>)> {
    v["vnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["serverId"].as_str().unwrap().to_owned(),
                c["node"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// The cluster VNF, the nodes, the labels and the CNF for one set of credentials.
async fn scenario(client: &kube::Client, kubeconfig: &Path, zone: &str, creds: Creds) {
    // unique per run: a cluster kept from an earlier run does not collide
    let run = format!("{}-{}", creds.run(), std::process::id());
    let run = run.as_str();
    let tmp = tempfile::tempdir().unwrap();
    let env = Env {
        dir: tmp.path().to_owned(),
        creds,
    };
    let ns = format!("vnfm-e2e-{run}");
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    std::fs::write(
        env.dir.join("vnfm.toml"),
        format!(
            "[vim]\nkind = \"openstack\"\n[state]\npath = {:?}\n[cluster]\nkubeconfig = {:?}\n\
             namespace = {ns:?}\nnodes = \"vnfm-e2e={run}\"\ncluster_vnfds = [{CLUSTER_VNFD:?}]\n",
            env.dir.join("state.sqlite"),
            kubeconfig
        ),
    )
    .unwrap();
    // The cluster VNF with the cloud's image and a flavour every test host holds.
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/packages");
    let cluster_pkg = env.dir.join("k8s-cluster-vnf");
    copy_package(
        &examples.join("k8s-cluster-vnf"),
        &cluster_pkg,
        &[
            ("name: k8s-node", "name: tiny"),
            ("m1.small", "m1.tiny"),
            ("virtual_mem_size: 2048 MiB", "virtual_mem_size: 512 MiB"),
            ("size_of_storage: 20 GiB", "size_of_storage: 1 GiB"),
        ],
    );
    let cluster_pkg = cluster_pkg.to_str().unwrap().to_owned();
    let cnf_pkg = examples.join("cnf-podaffinity");
    let cnf_pkg = cnf_pkg.to_str().unwrap();

    // 1. three workers, an anti-affinity server group, one zone of three hosts
    let pin = format!("workerNode={zone}");
    let master = format!("masterNode={zone}");
    let a = json_of(
        &env.vnfm(&[
            "instantiate",
            "--package",
            &cluster_pkg,
            "--zone",
            &pin,
            "--zone",
            &master,
            "--name",
            &format!("k8s-{run}"),
        ]),
        0,
        "instantiate the cluster VNF",
    );
    assert_eq!(a["vnfLcmOpOcc"]["operationState"], "COMPLETED", "{a}");
    let a_id = a["vnfInstance"]["id"].as_str().unwrap().to_owned();
    let workers: Vec<Value> = a["vnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["vduId"] == "workerNode")
        .cloned()
        .collect();
    assert_eq!(workers.len(), 3, "{a}");
    for w in &workers {
        assert_eq!(w["zoneId"], zone, "{w}");
    }
    eprintln!("[{run}] cluster VNF {a_id}: workers {workers:?}");
    // The hook ran with no node registered yet: nothing to label, not a failure.
    let hooks = a["vnfLcmOpOcc"]["hooks"].to_string();
    assert!(hooks.contains("0 node(s) labelled"), "{hooks}");

    // 2. the kubelets register
    let mut node_of_server = BTreeMap::new();
    for (i, w) in workers.iter().enumerate() {
        let server = w["serverId"].as_str().unwrap().to_owned();
        let name = format!("{run}-worker-{i}");
        let labels = BTreeMap::from([("vnfm-e2e", run.to_owned())]);
        register_node(client, &name, &labels, Some(&server.to_uppercase())).await;
        node_of_server.insert(server, name);
    }

    // 3. labels: the hosts (admin) or Nova's hostId (member), three distinct values
    let l = json_of(
        &env.vnfm(&["cluster", "label", "--instance", &a_id]),
        0,
        "cluster label",
    );
    eprintln!("[{run}] labels: {l}");
    let source = match creds {
        Creds::Admin => "host",
        Creds::Member => "hostId",
    };
    assert_eq!(l["plan"]["source"], source, "{l}");
    assert_eq!(l["patched"], 3, "{l}");
    let labelled = l["plan"]["nodes"].as_array().unwrap();
    assert_eq!(labelled.len(), 3, "{l}");
    let mut host_of_node = BTreeMap::new();
    for n in labelled {
        assert_eq!(n["matchedBy"], "systemUuid", "{n}");
        let server = n["server"].as_str().unwrap();
        assert_eq!(node_of_server[server], n["node"].as_str().unwrap(), "{n}");
        host_of_node.insert(
            n["node"].as_str().unwrap().to_owned(),
            n["value"].as_str().unwrap().to_owned(),
        );
    }
    let distinct: BTreeSet<&String> = host_of_node.values().collect();
    assert_eq!(distinct.len(), 3, "three workers on three hosts: {l}");
    match creds {
        Creds::Admin => {
            // the values are the hosts Nova reports for the servers
            let hosts: BTreeSet<String> = workers
                .iter()
                .map(|w| w["host"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(
                hosts,
                host_of_node.values().cloned().collect::<BTreeSet<_>>()
            );
        }
        Creds::Member => {
            for v in host_of_node.values() {
                assert!(
                    v.len() == 56 && v.chars().all(|c| c.is_ascii_hexdigit()),
                    "a hostId: {v}"
                );
            }
        }
    }
    // the labels are on the real nodes
    let nodes = Api::<Node>::all(client.clone());
    for (node, value) in &host_of_node {
        let n = nodes.get(node).await.unwrap();
        let labels = n.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get(HOST_KEY), Some(value), "{node}");
    }
    let again = json_of(
        &env.vnfm(&["cluster", "label", "--instance", &a_id]),
        0,
        "cluster label again",
    );
    assert_eq!(again["patched"], 0, "nothing changed, no PATCH: {again}");

    // 4. the CNF: the real scheduler binds three pods on three hosts
    let b = json_of(
        &env.vnfm(&[
            "instantiate",
            "--package",
            cnf_pkg,
            "--name",
            &format!("cnf-{run}"),
        ]),
        0,
        "instantiate the CNF",
    );
    assert_eq!(b["vnfLcmOpOcc"]["operationState"], "COMPLETED", "{b}");
    let b_id = b["vnfInstance"]["id"].as_str().unwrap().to_owned();
    let first = pods(&b);
    assert_eq!(first.len(), 3, "{b}");
    let hosts: BTreeSet<&String> = first
        .iter()
        .map(|p| &host_of_node[p.1.as_ref().unwrap_or_else(|| panic!("bound: {b}"))])
        .collect();
    assert_eq!(hosts.len(), 3, "one pod per host: {b}");
    let r = json_of(
        &env.vnfm(&["cluster", "verify", "--instance", &a_id]),
        0,
        "verify",
    );
    let per_host: Vec<usize> = r["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["pods"].as_array().unwrap().len())
        .collect();
    assert_eq!(per_host, [1, 1, 1], "{r}");
    let group = &r["groups"][0];
    assert_eq!(group["skew"], 0, "{r}");
    assert!(r["pending"].as_array().unwrap().is_empty(), "{r}");

    // 5. a fourth replica has no host of its own: Pending with the scheduler's reason
    let s = json_of(
        &env.vnfm(&[
            "scale",
            "--instance",
            &b_id,
            "--aspect",
            "vdu1_aspect",
            "--type",
            "out",
            "--package",
            cnf_pkg,
        ]),
        0,
        "scale out the CNF",
    );
    let now = pods(&s);
    assert_eq!(now.len(), 4, "{s}");
    assert_eq!(now.iter().filter(|p| p.1.is_none()).count(), 1, "{s}");
    let r = json_of(
        &env.vnfm(&["cluster", "verify", "--instance", &a_id]),
        0,
        "verify after the scale out (pending is not a violation)",
    );
    let pending = r["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{r}");
    assert_eq!(pending[0]["reason"], "Unschedulable", "{r}");
    let message = pending[0]["message"].as_str().unwrap();
    assert!(
        message.contains("didn't match pod anti-affinity rules"),
        "the real scheduler's message: {message}"
    );

    // 6. scale in, then heal a pod: the controller-manager replaces it, the scheduler binds
    // the new one to the freed node
    json_of(
        &env.vnfm(&[
            "scale",
            "--instance",
            &b_id,
            "--aspect",
            "vdu1_aspect",
            "--type",
            "in",
            "--package",
            cnf_pkg,
        ]),
        0,
        "scale in the CNF",
    );
    let victim = first[0].clone();
    let h = json_of(
        &env.vnfm(&[
            "heal",
            "--instance",
            &b_id,
            "--vnfc",
            &victim.0,
            "--package",
            cnf_pkg,
        ]),
        0,
        "heal a pod",
    );
    assert_eq!(h["vnfLcmOpOcc"]["operationState"], "COMPLETED", "{h}");
    let healed = pods(&h);
    assert_eq!(healed.len(), 3, "{h}");
    assert!(healed.iter().all(|p| p.0 != victim.0), "{h}");
    let hosts: BTreeSet<&String> = healed
        .iter()
        .map(|p| &host_of_node[p.1.as_ref().unwrap_or_else(|| panic!("rebound: {h}"))])
        .collect();
    assert_eq!(hosts.len(), 3, "the spread holds after the heal: {h}");
    json_of(
        &env.vnfm(&["cluster", "verify", "--instance", &a_id]),
        0,
        "verify after the heal",
    );

    // clean up: both instances, the nodes and the namespace
    for id in [&b_id, &a_id] {
        let t = json_of(
            &env.vnfm(&["terminate", "--instance", id, "--delete"]),
            0,
            "terminate",
        );
        assert_eq!(t["vnfLcmOpOcc"]["operationState"], "COMPLETED", "{t}");
    }
    for node in node_of_server.values() {
        let _ = nodes.delete(node, &DeleteParams::default()).await;
    }
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::default())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_vms_on_three_hosts_labelled_and_a_cnf_spread_over_them() {
    if !vnfm_core::vectors::real_suite_enabled(
        "VNFM_TEST_HW_AFFINITY",
        "real-hw-affinity",
        module_path!(),
        "set VNFM_TEST_HW_AFFINITY=1 with a real OpenStack whose zone VNFM_OS_TEST_WORKER_ZONE \
         has three hosts (OS_* of scripts/openstack-dev.sh) and a Kubernetes control plane \
         (VNFM_K8S_KUBECONFIG of scripts/k8s-dev.sh); scripts/test.sh does both on CI",
    ) {
        return;
    }
    let kubeconfig = PathBuf::from(
        std::env::var("VNFM_K8S_KUBECONFIG").expect("VNFM_K8S_KUBECONFIG (scripts/k8s-dev.sh)"),
    );
    let zone = std::env::var("VNFM_OS_TEST_WORKER_ZONE")
        .expect("VNFM_OS_TEST_WORKER_ZONE: a zone of three hosts that hold an m1.tiny");
    let client = client(&kubeconfig).await;
    // Nodes of an earlier run that stopped half-way would take the CNF's pods.
    let nodes = Api::<Node>::all(client.clone());
    for n in nodes
        .list(&kube::api::ListParams::default().labels("vnfm-e2e"))
        .await
        .unwrap()
    {
        let name = n.metadata.name.unwrap_or_default();
        eprintln!("removing node {name} of an earlier run");
        nodes.delete(&name, &DeleteParams::default()).await.unwrap();
    }
    scenario(&client, &kubeconfig, &zone, Creds::Admin).await;
    scenario(&client, &kubeconfig, &zone, Creds::Member).await;
}
