//! The LCM commands end to end through the `vnfm` binary on the simulated cloud, with a state
//! file in a temporary folder: the JSON a script would read, and the exit codes.

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
];

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

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap()
}

fn servers(v: &Value) -> std::collections::BTreeMap<String, String> {
    v["vnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["serverId"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn demo_narrates_and_its_json_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("unused.sqlite");
    let out = run(&state, &["demo"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "No valid host was found",
        "excluded zones: AZ-1",
        "relaxed:",
        "Heal VDU1-0",
        "ignored [duplicate]",
        "ONE automatic heal",
        "Terminate",
        // hardware-aware affinity: labels, spread, drift found, reconcile
        "3 node(s) labelled topology.openstack.org/host-id",
        "skew 0",
        "VIOLATED",
        "stale label: node workerNode-",
        "evicted default/vdu1-",
        "ok: every required group is spread over hardware",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let out = run(&state, &["demo", "--json"]);
    assert_eq!(code(&out), 0);
    let v = json(&out);
    assert_eq!(v["version"], 1);
    assert_eq!(v["ok"], true);
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 13);
    // the CNF's pods on three distinct nodes (three hosts), then drift, then reconciled
    let cnf = &steps[10]["vnfcs"];
    let nodes: std::collections::BTreeSet<&str> = cnf
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes.len(), 3, "{cnf}");
    let auto = &steps[5]["vnfLcmOpOcc"];
    assert_eq!(auto["operation"], "HEAL");
    assert_eq!(auto["isAutomaticInvocation"], true);
    assert_eq!(auto["operationState"], "COMPLETED");
    let attempts = steps[2]["vnfLcmOpOcc"]["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["outcome"], "failed");
    assert_eq!(attempts[0]["failedZones"], serde_json::json!(["AZ-1"]));
    assert_eq!(attempts.last().unwrap()["outcome"], "succeeded");
    assert!(!state.exists(), "the demo keeps its state in memory");
}

#[test]
fn a_scripted_lifecycle_over_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("nested/state.sqlite");

    // Instantiate with an NFVO grant of VDU1-0 into the full AZ-1: reselection moves it.
    let out = run(
        &state,
        &[
            "--json",
            "instantiate",
            "--zone",
            "VDU1-0=AZ-1",
            "--reselect-zones",
            "--name",
            "web",
        ],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    let op = &v["vnfLcmOpOcc"];
    assert_eq!(op["operationState"], "COMPLETED");
    assert_eq!(op["operation"], "INSTANTIATE");
    let a0 = &op["attempts"][0];
    assert_eq!(a0["zones"]["VDU1-0"], "AZ-1");
    assert_eq!(a0["outcome"], "failed");
    assert!(a0["statusReason"]
        .as_str()
        .unwrap()
        .contains("No valid host was found"));
    assert_eq!(a0["failedZones"], serde_json::json!(["AZ-1"]));
    assert_eq!(op["attempts"][1]["outcome"], "succeeded");
    let vnfcs = v["vnfcs"].as_array().unwrap();
    assert_eq!(vnfcs.len(), 3);
    for c in vnfcs {
        assert_ne!(c["zoneId"], "AZ-1");
        assert!(c["host"].as_str().unwrap().starts_with("compute-"));
    }
    let id = v["vnfInstance"]["id"].as_str().unwrap().to_owned();
    let before = servers(&v);

    // Scale out without best effort: the only zone left for a fourth VNFC is the full AZ-1 and
    // reselection is off: capacity exhausted (4); the occurrence is FAILED_TEMP.
    let out = run(
        &state,
        &[
            "--json",
            "scale",
            "--instance",
            &id,
            "--aspect",
            "VDU1_scale",
            "--type",
            "out",
        ],
    );
    assert_eq!(code(&out), 4, "{}", String::from_utf8_lossy(&out.stderr));
    let failed = json(&out);
    assert_eq!(failed["vnfLcmOpOcc"]["operationState"], "FAILED_TEMP");
    let failed_op = failed["vnfLcmOpOcc"]["id"].as_str().unwrap().to_owned();
    // Blocked until handled, then failed.
    let out = run(&state, &["heal", "--instance", &id]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("FAILED_TEMP"));
    let out = run(&state, &["--json", "op", "fail", &failed_op]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out)["vnfLcmOpOcc"]["operationState"], "FAILED");

    // With best effort and reselection the scale-out succeeds and reports the relaxation;
    // existing VNFCs keep their servers.
    let out = run(
        &state,
        &[
            "--json",
            "scale",
            "--instance",
            &id,
            "--aspect",
            "VDU1_scale",
            "--type",
            "out",
            "--fallback-best-effort",
            "--reselect-zones",
        ],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    let after = servers(&v);
    assert_eq!(after.len(), 4);
    for (k, s) in &before {
        assert_eq!(&after[k], s, "{k} moved on scale-out");
    }
    // The default granter reads the zones' free capacity: it relaxes the zone anti-affinity
    // in the grant (AZ-1 has no room), and the first attempt succeeds.
    let attempts = v["vnfLcmOpOcc"]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "succeeded");
    let params = &v["grant"]["additionalParams"];
    assert!(
        !params["relaxedPlacementConstraints"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{params}"
    );
    assert_eq!(params["zoneSelection"]["policy"], "capacity-aware");

    // Heal VDU1-0: new server, others untouched.
    let out = run(
        &state,
        &["--json", "heal", "--instance", &id, "--vnfc", "VDU1-0"],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let healed = servers(&json(&out));
    assert_ne!(healed["VDU1-0"], after["VDU1-0"]);
    for k in ["VDU1-1", "VDU1-2", "VDU2-0"] {
        assert_eq!(healed[k], after[k]);
    }

    // Inspect.
    let out = run(&state, &["--json", "instance", "show", &id]);
    assert_eq!(code(&out), 0);
    assert_eq!(
        json(&out)["vnfInstance"]["instantiationState"],
        "INSTANTIATED"
    );
    let out = run(&state, &["--json", "op", "list", "--instance", &id]);
    let states: Vec<String> = json(&out)["vnfLcmOpOccs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["operationState"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(states, ["COMPLETED", "FAILED", "COMPLETED", "COMPLETED"]);
    let out = run(&state, &["instance", "show", "no-such-id"]);
    assert_eq!(code(&out), 2);

    // Terminate and delete.
    let out = run(
        &state,
        &["--json", "terminate", "--instance", &id, "--delete"],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&state, &["--json", "instance", "list"]);
    assert_eq!(json(&out)["vnfInstances"], serde_json::json!([]));
}

#[test]
fn grant_prints_the_sol003_grant_and_exits_3_or_4_when_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.sqlite");
    let out = run(&state, &["--json", "grant", "--seed", "5"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    let grant = &v["grant"];
    let request = &v["grantRequest"];
    assert_eq!(request["operation"], "INSTANTIATE");
    assert_eq!(
        request["placementConstraints"][0]["affinityOrAntiAffinity"],
        "ANTI_AFFINITY"
    );
    let computes: Vec<&Value> = request["addResources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "COMPUTE")
        .collect();
    assert_eq!(computes.len(), 3);
    // Every compute resource has a zone, three distinct zones.
    let zone_of = |id: &str| {
        let zref = grant["addResources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["resourceDefinitionId"] == id)
            .unwrap()["zoneId"]
            .as_str()
            .unwrap()
            .to_owned();
        grant["zones"]
            .as_array()
            .unwrap()
            .iter()
            .find(|z| z["id"] == zref.as_str())
            .unwrap()["zoneId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let zones: std::collections::BTreeSet<String> = computes
        .iter()
        .map(|c| zone_of(c["id"].as_str().unwrap()))
        .collect();
    assert_eq!(zones.len(), 3, "{grant}");
    // Same seed, same zones.
    let again = json(&run(&state, &["--json", "grant", "--seed", "5"]));
    assert_eq!(again["grant"]["zones"], grant["zones"]);

    // Two zones for three anti-affine VNFCs: infeasible (3), the message names the constraint.
    let out = run(
        &state,
        &["grant", "--cloud", "tests/cmd/clouds/two-zones.yaml"],
    );
    assert_eq!(code(&out), 3, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("placementConstraints[0]"));
    // Hosts too small everywhere, with capacity-aware selection: capacity exhausted (4).
    let out = run(
        &state,
        &[
            "grant",
            "--cloud",
            "tests/cmd/clouds/tiny-hosts.yaml",
            "--selection",
            "capacity-aware",
        ],
    );
    assert_eq!(code(&out), 4, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!state.exists(), "an instantiate grant changes no state");
}

#[test]
fn bad_operation_input_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.sqlite");
    let cases: &[(&[&str], &str)] = &[
        (&["instantiate", "--zone", "VDU1-0"], "expected VNFC=ZONE"),
        (&["instantiate", "--zone", "VDU9=AZ-1"], "VDU9"),
        (&["instantiate", "--flavour", "gold"], "gold"),
        (
            &[
                "scale",
                "--instance",
                "nope",
                "--aspect",
                "VDU1_scale",
                "--type",
                "out",
            ],
            "no VNF instance nope",
        ),
        (
            &[
                "instantiate",
                "--insufficient-resource-pattern",
                "(unclosed",
            ],
            "--insufficient-resource-pattern",
        ),
        (&["--vim", "openstack", "instantiate"], "openstack"),
    ];
    for (args, needle) in cases {
        let out = run(&state, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// Issue 14 row 12: two pins for one VNFC are refused (exit 2) instead of the last winning.
#[test]
fn two_pins_for_one_vnfc_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let out = run(
        &state,
        &[
            "instantiate",
            "--zone",
            "VDU1-0=AZ-2",
            "--zone",
            "VDU1-0=AZ-3",
        ],
    );
    assert_eq!(code(&out), 2);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("VDU1-0 is already pinned to AZ-2"), "{e}");
}

/// Issue 14 row 5: invalid scale and heal requests are refused (exit 2) before an operation
/// starts: no occurrence is left FAILED_TEMP holding the instance, and the next valid
/// operation runs.
#[test]
fn invalid_scale_and_heal_requests_start_no_operation() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let out = run(&state, &["--json", "instantiate"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let id = json(&out)["vnfLcmOpOcc"]["vnfInstanceId"]
        .as_str()
        .unwrap()
        .to_owned();
    let ops_before = json(&run(&state, &["--json", "op", "list"]));
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "scale",
                "--instance",
                &id,
                "--aspect",
                "VDU1_scale",
                "--type",
                "out",
                "--steps",
                "0",
            ],
            "numberOfSteps is 0",
        ),
        (
            &["heal", "--instance", &id, "--vnfc", "VDU9-0"],
            "\"VDU9-0\" is not a VNFC of the instance",
        ),
        (
            &[
                "heal",
                "--instance",
                &id,
                "--vnfc",
                "VDU1-0",
                "--vnfc",
                "VDU1-0",
            ],
            "\"VDU1-0\" is named twice",
        ),
    ];
    for (args, says) in cases {
        let out = run(&state, args);
        let e = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(code(&out), 2, "{args:?}: {e}");
        assert!(e.contains(says), "{args:?}: {e}");
    }
    assert_eq!(json(&run(&state, &["--json", "op", "list"])), ops_before);
    let out = run(
        &state,
        &["--json", "heal", "--instance", &id, "--vnfc", "VDU1-0"],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
}

/// An infeasible placement is a result, not an error: `vnfm grant` prints the grant request
/// and why no grant (`--json`: `grant: null`, `failure.failureKind`), and exits 3.
#[test]
fn an_infeasible_grant_is_a_result_on_stdout_with_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.sqlite");
    let cloud = dir.path().join("two-zones.yaml");
    std::fs::write(
        &cloud,
        "zones:\n  AZ-1:\n    hosts:\n      c1: {vcpus: 16, memory_mb: 32768, disk_gb: 320}\n  \
         AZ-2:\n    hosts:\n      c2: {vcpus: 16, memory_mb: 32768, disk_gb: 320}\n\
         flavors:\n  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}\n  \
         m1.medium: {vcpus: 2, memory_mb: 4096, disk_gb: 40}\n\
         images: [cirros, demo-frontend-image, demo-backend-image]\n",
    )
    .unwrap();
    let cloud = cloud.to_str().unwrap();
    // Three VNFCs, each in a zone of its own, in two zones.
    let out = run(&state, &["--json", "grant", "--cloud", cloud]);
    assert_eq!(code(&out), 3, "{}", String::from_utf8_lossy(&out.stderr));
    let v = json(&out);
    assert!(v["grant"].is_null(), "{v:#}");
    assert_eq!(v["failure"]["failureKind"], "INFEASIBLE");
    assert_eq!(
        v["grantRequest"]["addResources"].as_array().unwrap().len(),
        5
    );
    let out = run(&state, &["grant", "--cloud", cloud]);
    assert_eq!(code(&out), 3);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("no grant for the Instantiate grant request"),
        "{text}"
    );
}
