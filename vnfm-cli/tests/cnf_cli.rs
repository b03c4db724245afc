//! A CNF ("VNF B") through the `vnfm` binary on the simulated cloud's cluster: the example
//! package `examples/packages/cnf-podaffinity` on `examples/clouds/cnf.yaml` (3 nodes on 3
//! compute hosts) through instantiate, scale out (a pod left Pending, reported), heal of one
//! pod and terminate, with the state in a file between the commands.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

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

const PACKAGE: &str = "../examples/packages/cnf-podaffinity";
const CLOUD: &str = "../examples/clouds/cnf.yaml";

fn run(state: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.arg("--state")
        .arg(state)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    cmd.output().expect("vnfm runs")
}

fn ok_json(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn pods(v: &Value) -> Vec<(String, Option<String>)> {
    v["vnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["workloadKind"], "Deployment");
            (
                c["serverId"].as_str().unwrap().to_owned(),
                c["node"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn a_cnf_through_instantiate_scale_heal_terminate() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");

    let v = ok_json(&run(
        &state,
        &[
            "--json",
            "instantiate",
            "--package",
            PACKAGE,
            "--cloud",
            CLOUD,
            "--name",
            "cnf",
        ],
    ));
    assert_eq!(v["vnfLcmOpOcc"]["operationState"], "COMPLETED");
    let first = pods(&v);
    assert_eq!(first.len(), 3);
    let nodes: std::collections::BTreeSet<_> = first.iter().map(|p| p.1.clone().unwrap()).collect();
    assert_eq!(nodes.len(), 3, "one pod per node (per compute host)");
    let id = v["vnfInstance"]["id"].as_str().unwrap().to_owned();
    let info = &v["vnfInstance"]["instantiatedVnfInfo"]["vnfcResourceInfo"][0];
    assert_eq!(
        info["computeResource"]["vimLevelResourceType"],
        "Deployment"
    );

    // scale out: the 4th pod cannot go anywhere; reported, not a failure
    let v = ok_json(&run(
        &state,
        &[
            "--json",
            "scale",
            "--instance",
            &id,
            "--aspect",
            "vdu1_aspect",
            "--type",
            "out",
            "--package",
            PACKAGE,
        ],
    ));
    let now = pods(&v);
    assert_eq!(now.len(), 4);
    assert_eq!(now.iter().filter(|p| p.1.is_none()).count(), 1);
    let warnings = v["vnfLcmOpOcc"]["warnings"].as_array().unwrap();
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .contains("Pending: Unschedulable"),
        "{warnings:?}"
    );

    // the same in the human form
    let out = run(
        &state,
        &[
            "scale",
            "--instance",
            &id,
            "--aspect",
            "vdu1_aspect",
            "--type",
            "in",
            "--package",
            PACKAGE,
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("pod of Deployment on node worker-"), "{text}");

    // heal one pod: deleted and replaced
    let victim = first[0].0.clone();
    let v = ok_json(&run(
        &state,
        &[
            "--json",
            "heal",
            "--instance",
            &id,
            "--vnfc",
            &victim,
            "--package",
            PACKAGE,
        ],
    ));
    let healed = pods(&v);
    assert_eq!(healed.len(), 3);
    assert!(healed.iter().all(|p| p.0 != victim && p.1.is_some()));

    let v = ok_json(&run(&state, &["--json", "terminate", "--instance", &id]));
    assert_eq!(v["vnfLcmOpOcc"]["operationState"], "COMPLETED");
    assert_eq!(v["vnfInstance"]["instantiationState"], "NOT_INSTANTIATED");
}

#[test]
fn a_refused_preflight_exits_3_naming_both_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    // two of the three nodes lose their host label: 3 replicas over 1 host value
    let cloud = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(CLOUD))
        .unwrap()
        .replace(", topology.openstack.org/host-id: compute-2", "")
        .replace(", topology.openstack.org/host-id: compute-3", "");
    let cloud_file = dir.path().join("cloud.yaml");
    std::fs::write(&cloud_file, cloud).unwrap();
    let out = run(
        &state,
        &[
            "instantiate",
            "--package",
            PACKAGE,
            "--cloud",
            cloud_file.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("asks for 3 replicas") && err.contains("have 1 distinct value(s)"),
        "{err}"
    );
}
