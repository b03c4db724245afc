//! Intent-based cloud selection through the `vnfm` binary on the simulated cloud:
//! `vnfm select` (ranking, reasons, exit codes) and `vnfm instantiate --intent` end to end
//! (region chosen, intent realised and recorded, re-applied by a later heal).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
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

fn example(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "examples", "intent", name]
        .iter()
        .collect();
    p.display().to_string()
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

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const CUSTOMER: &str = "40.0,-75.0";

#[test]
fn select_ranks_explains_and_chooses_one_region_for_the_vnf() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let (policy, cands) = (example("policy-ha.json"), example("candidates.yaml"));
    let args = [
        "select",
        "--policy",
        &policy,
        "--candidates",
        &cands,
        "--customer",
        CUSTOMER,
    ];
    let out = run(&state, &args);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("edge/edge-newark: owner edge does not support HA"),
        "{t}"
    );
    assert!(
        t.contains("azure/azure-west: region azure-west: distance 4063.26 km > 3000 km"),
        "{t}"
    );
    // each VDU alone fits the small region, both together do not
    assert!(
        t.contains(
            "dropped lab/lab-small: region lab-small: 2 vCPU free < 4 needed by the VDUs together"
        ),
        "{t}"
    );
    assert!(t.contains("chosen: lab/sim-east"), "{t}");

    let mut with_json = vec!["--json"];
    with_json.extend_from_slice(&args);
    with_json.push("--pareto");
    let v = json(&run(&state, &with_json));
    assert_eq!(v["version"], 1, "{v}");
    assert_eq!(v["chosen"]["region"], "sim-east", "{v}");
    let ranking: Vec<&str> = v["ranking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["candidate"]["region"].as_str().unwrap())
        .collect();
    assert_eq!(ranking, ["sim-east", "azure-east"], "{v}");
    // VDU1 (2 × m1.small) and VDU2 (1 × m1.medium): one selection each, with their terms
    let sel = v["selections"].as_array().unwrap();
    assert_eq!(sel.len(), 2);
    assert_eq!(sel[0]["demand"]["vnfc"], "VDU1");
    assert_eq!(sel[0]["demand"]["instances"], 2);
    assert!(
        v["pareto"]["VDU1"]
            .as_array()
            .is_some_and(|a| !a.is_empty()),
        "{v}"
    );
}

/// Issue 28: 100,000 regions printed 300,000 lines. The text shows the head of each list
/// (`--top`, 20 by default) and counts the rest; `--top 0` and `--output json` show every one.
#[test]
fn select_prints_the_head_of_each_list_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let mut file = String::from(
        "owners:\n  - {name: lab, cloud_type: OpenStack, supports: [HA, Guaranteed QoS], \
         cost: {per_instance_type: {m1.small: 10, m1.medium: 20}}, flavours: [\
         {name: m1.small, vcpus: 1, memory_mb: 2048, disk_gb: 20}, \
         {name: m1.medium, vcpus: 2, memory_mb: 4096, disk_gb: 40}]}\nregions:\n",
    );
    for i in 0..30 {
        file.push_str(&format!(
            "  - {{id: r{i}, owner: lab, location: {{lat: 40.5, lon: -75.0}}, hosts: 4, \
             capacity: {{declared: {{vcpus: {}, memory_mb: 65536, disk_gb: 1000}}}}}}\n",
            3 + i % 2
        ));
    }
    let cands = dir.path().join("c.yaml");
    std::fs::write(&cands, file).unwrap();
    let (policy, cands) = (example("policy-ha.json"), cands.display().to_string());
    let base = [
        "select",
        "--policy",
        &policy,
        "--candidates",
        &cands,
        "--customer",
        CUSTOMER,
    ];
    let out = run(&state, &base);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    // Each VDU's ranking: 20 of 30 shown; the whole VNF: 15 fit both VDUs, 15 do not.
    assert_eq!(t.matches("… 10 more not shown").count(), 2, "{t}");
    assert!(!t.contains("lab/r29 (OpenStack"), "{t}");
    let mut top = base.to_vec();
    top.extend(["--top", "4"]);
    let t = text(&run(&state, &top));
    assert_eq!(t.matches("… 26 more not shown").count(), 2, "{t}");
    assert_eq!(t.matches("… 11 more not shown").count(), 2, "{t}");
    let mut all = base.to_vec();
    all.extend(["--top", "0"]);
    let t = text(&run(&state, &all));
    assert!(!t.contains("more not shown"), "{t}");
    assert!(t.contains("lab/r29 (OpenStack"), "{t}");
    let mut json_args = vec!["--json"];
    json_args.extend_from_slice(&base);
    let v = json(&run(&state, &json_args));
    assert_eq!(v["selections"][0]["ranking"].as_array().unwrap().len(), 30);
}

#[test]
fn select_with_no_region_left_exits_3_and_bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let policy = dir.path().join("near.json");
    let text_of = std::fs::read_to_string(example("policy-ha.json")).unwrap();
    std::fs::write(
        &policy,
        text_of.replace("\"value\": \"3000\"", "\"value\": \"1\""),
    )
    .unwrap();
    let cands = example("candidates.yaml");
    let p = policy.display().to_string();
    let out = run(
        &state,
        &[
            "select",
            "--policy",
            &p,
            "--candidates",
            &cands,
            "--customer",
            CUSTOMER,
        ],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(t.contains("no candidate region serves every VDU"), "{t}");
    assert!(t.contains("km > 1 km"), "{t}");
    // a valid "no" is a result: the versioned report on stdout (`chosen: null`), the reason
    // on stderr, exit 3
    let out = run(
        &state,
        &[
            "--json",
            "select",
            "--policy",
            &p,
            "--candidates",
            &cands,
            "--customer",
            CUSTOMER,
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let v = json(&out);
    assert_eq!(v["version"], 1, "{v}");
    assert!(v["chosen"].is_null(), "{v}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: no candidate region serves every VDU"),
        "{err}"
    );

    let out = run(
        &state,
        &[
            "select",
            "--policy",
            &p,
            "--candidates",
            &cands,
            "--customer",
            "91,0",
        ],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("--customer \"91,0\""), "{t}");
}

#[test]
fn instantiate_with_an_intent_realises_and_records_it_for_later_operations() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let (policy, cands) = (example("policy-ha.json"), example("candidates.yaml"));
    let out = run(
        &state,
        &[
            "--json",
            "instantiate",
            "--intent",
            &policy,
            "--candidates",
            &cands,
            "--customer",
            CUSTOMER,
        ],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("intent: region lab/sim-east chosen (VIM simulated)"),
        "{t}"
    );
    assert!(t.contains("added server group VDU2_anti_affinity"), "{t}");
    let v = json(&out);
    let id = v["vnfLcmOpOcc"]["vnfInstanceId"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned();
    let inst = json(&run(&state, &["--json", "instance", "show", &id]));
    let record = &inst["vnfInstance"]["metadata"]["vnfmIntent"];
    assert_eq!(record["region"]["region"], "sim-east", "{inst}");
    assert_eq!(record["request"]["vdus"][1]["vdu"], "VDU2", "{inst}");
    assert_eq!(record["request"]["vdus"][1]["ha"], true, "{inst}");

    // a later operation builds its stack from the package realised again from the record
    // (scale-outs do not fit the demo cloud's zone spread; a heal re-creates VDU2-0)
    let out = run(
        &state,
        &["--json", "heal", "--instance", &id, "--vnfc", "VDU2-0"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(json(&out)["vnfLcmOpOcc"]["operationState"], "COMPLETED");
}

#[test]
fn an_intent_the_region_cannot_realise_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    // the only region left has two hosts, VDU1 may have four instances
    let cands = dir.path().join("two-hosts.yaml");
    std::fs::write(
        &cands,
        "owners:\n  - name: lab\n    cloud_type: OpenStack\n    supports: [HA, Guaranteed QoS]\n    cost: {fixed: 1}\n    flavours:\n      - {name: m1.small, vcpus: 1, memory_mb: 2048, disk_gb: 20}\n      - {name: m1.medium, vcpus: 2, memory_mb: 4096, disk_gb: 40}\nregions:\n  - id: tiny\n    owner: lab\n    location: {lat: 40.7, lon: -74.0}\n    hosts: 2\n    capacity: {declared: {vcpus: 64, memory_mb: 131072, disk_gb: 1000}}\n    vim: simulated\n",
    )
    .unwrap();
    let (policy, c) = (example("policy-ha.json"), cands.display().to_string());
    let args = [
        "instantiate",
        "--intent",
        &policy,
        "--candidates",
        &c,
        "--customer",
        CUSTOMER,
    ];
    let out = run(&state, &args);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(t.contains("region lab/tiny"), "{t}");
    let list = json(&run(&state, &["--json", "instance", "list"]));
    assert_eq!(
        list["vnfInstances"].as_array().map(Vec::len),
        Some(0),
        "{list}"
    );

    // best effort: soft anti-affinity, said so, and the instance runs
    let mut best = args.to_vec();
    best.push("--best-effort");
    let out = run(&state, &best);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("soft"), "{t}");
}

#[test]
fn select_links_places_linked_vnfs_exactly_or_names_the_blocking_link() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    // 1 on the edge (10 + link 3 to the core), 2 on the core (10), 3 in the cloud (4 + link 2)
    let data = example("linked-vnfs.json");
    let out = run(&state, &["--json", "select", "--links", &data]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v = json(&out);
    assert_eq!(v["cost"], "29", "{v}");
    let got: Vec<(&str, &str)> = v["placement"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["member-vnf-index"].as_str().unwrap(),
                p["vimAccountId"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("1", "edge"), ("2", "core"), ("3", "cloud")]);
    assert_eq!(v["optimal"], true, "{v}");
    assert_eq!(v["lowerBound"], "29", "{v}");
    assert_eq!(v["gap"], 0.0, "{v}");

    // 1 pinned to the edge, 3 to the cloud, 50 ms apart: a 5 ms bound between them blocks
    let mut d: Value = serde_json::from_str(&std::fs::read_to_string(&data).unwrap()).unwrap();
    d["ns_desc"][0]["vim_account"] = "vimedge".into();
    d["ns_desc"][2]["vim_account"] = "vimcloud".into();
    d["vld_desc"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"cp_refs": ["1", "3"], "latency": 5}));
    let f = dir.path().join("blocked.json");
    std::fs::write(&f, d.to_string()).unwrap();
    let out = run(&state, &["select", "--links", &f.display().to_string()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(t.contains("unsatisfiable"), "{t}");
    assert!(t.contains("latency <= 5"), "{t}");
}

/// PLA data of `n` VNFs x `m` VIMs, every pair linked, a chain of VLDs, prices from a fixed
/// pseudo-random sequence (VNF prices 10-200, link prices 20-200, latency 5-150, bound 100).
fn pla_chain(n: usize, m: usize, seed: u64) -> Value {
    let mut x: u64 = seed;
    let mut next = |lo: u64, hi: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        lo + (x >> 33) % (hi - lo + 1)
    };
    let mut lat = vec![vec![0u64; m]; m];
    let mut price = vec![vec![0u64; m]; m];
    for i in 0..m {
        for j in i + 1..m {
            lat[i][j] = next(5, 150);
            lat[j][i] = lat[i][j];
            price[i][j] = next(20, 200);
            price[j][i] = price[i][j];
        }
    }
    let vnfs: Vec<Value> = (0..n)
        .map(|k| {
            let prices: Vec<u64> = (0..m).map(|_| next(10, 200)).collect();
            serde_json::json!({"vnf_id": format!("{}", k + 1), "vnf_price_per_vim": prices})
        })
        .collect();
    // A chain, and each VNF linked to the one three further on.
    let vlds: Vec<Value> = (1..n)
        .map(|k| (k, k + 1))
        .chain((1..n.saturating_sub(2)).map(|k| (k, k + 3)))
        .map(|(a, b)| serde_json::json!({"cp_refs": [format!("{a}"), format!("{b}")], "latency": 100}))
        .collect();
    serde_json::json!({
        "vim_accounts": (0..m).map(|i| format!("vim{i}")).collect::<Vec<_>>(),
        "trp_link_latency": lat,
        "trp_link_jitter": vec![vec![0u64; m]; m],
        "trp_link_price_list": price,
        "ns_desc": vnfs,
        "vld_desc": vlds,
    })
}

#[test]
fn select_links_stops_at_its_limits_and_says_what_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    let f = dir.path().join("chain.json");
    std::fs::write(&f, pla_chain(12, 30, 12345).to_string()).unwrap();
    let f = f.display().to_string();

    // Unbounded enough: proven.
    let out = run(&state, &["--json", "select", "--links", &f]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v = json(&out);
    assert_eq!(v["optimal"], true, "{v}");
    assert_eq!(v["lowerBound"], v["cost"], "{v}");

    // Stopped after the optimum was found and its cost proven by the bound, before the
    // tie-break among equal costs was settled: not "optimal", gap 0, said so.
    let out = run(
        &state,
        &["--json", "select", "--links", &f, "--node-limit", "14"],
    );
    let v = json(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["optimal"], false, "{v}");
    assert_eq!(v["lowerBound"], v["cost"], "{v}");
    assert_eq!(v["gap"], 0.0, "{v}");
    let out = run(&state, &["select", "--links", &f, "--node-limit", "14"]);
    let t = text(&out);
    assert!(
        t.contains("(cost proven minimal; the search stopped before settling"),
        "{t}"
    );

    // An instance whose LP bound is below its optimum, stopped after a first placement: its
    // cost, a lower bound and the gap.
    let g = dir.path().join("gap.json");
    std::fs::write(&g, pla_chain(20, 10, 32).to_string()).unwrap();
    let g = g.display().to_string();
    let optimum: f64 = json(&run(&state, &["--json", "select", "--links", &g]))["cost"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let out = run(
        &state,
        &["--json", "select", "--links", &g, "--node-limit", "28"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v = json(&out);
    assert_eq!(v["optimal"], false, "{v}");
    let cost: f64 = v["cost"].as_str().unwrap().parse().unwrap();
    let bound: f64 = v["lowerBound"].as_str().unwrap().parse().unwrap();
    assert!(bound < cost && bound <= optimum && optimum <= cost, "{v}");
    let gap = v["gap"].as_f64().unwrap();
    assert!(
        gap > 0.0 && (gap - 100.0 * (cost - bound) / cost).abs() < 1e-9,
        "{v}"
    );
    let out = run(&state, &["select", "--links", &g, "--node-limit", "28"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("best found, not proven optimal: total price"),
        "{t}"
    );
    assert!(t.contains("gap 0.0"), "{t}");

    // Stopped before any placement: said so, exit 3.
    let out = run(&state, &["select", "--links", &f, "--node-limit", "2"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(
        t.contains("no placement found within the search limits"),
        "{t}"
    );

    // A time limit that cannot be one.
    let out = run(&state, &["select", "--links", &f, "--time-limit", "0"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("--time-limit is 0"), "{t}");
}

#[test]
fn regions_backed_by_a_promise_pool_are_checked_against_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.sqlite");
    for (zone, cores) in [("pool-small", "3"), ("pool-big", "8")] {
        let out = run(
            &state,
            &[
                "provider",
                "add",
                "--declared",
                "--name",
                zone,
                "--zone",
                zone,
                "--cores",
                cores,
                "--ram",
                "65536",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let cands = dir.path().join("pools.yaml");
    let region = |id: &str, pool: &str, lon: f64| {
        format!(
            "  - id: {id}\n    owner: lab\n    location: {{lat: 40.7, lon: {lon}}}\n    hosts: 8\n    capacity: {{reservation: {pool}}}\n"
        )
    };
    std::fs::write(
        &cands,
        format!(
            "owners:\n  - name: lab\n    cloud_type: OpenStack\n    supports: [HA, Guaranteed QoS]\n    cost: {{fixed: 1}}\n    flavours:\n      - {{name: m1.small, vcpus: 1, memory_mb: 2048, disk_gb: 20}}\n      - {{name: m1.medium, vcpus: 2, memory_mb: 4096, disk_gb: 40}}\nregions:\n{}{}{}",
            region("near-small", "pool-small", -74.0),
            region("far-big", "pool-big", -73.0),
            region("unknown", "no-such-pool", -74.0),
        ),
    )
    .unwrap();
    let (policy, c) = (example("policy-ha.json"), cands.display().to_string());
    let out = run(
        &state,
        &[
            "select",
            "--policy",
            &policy,
            "--candidates",
            &c,
            "--customer",
            CUSTOMER,
        ],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    // VDU1 needs 2 vCPUs, VDU2 2: each fits 3 cores, together they do not
    assert!(
        t.contains("dropped lab/near-small: region near-small: 3 vCPU free < 4 needed by the VDUs together"),
        "{t}"
    );
    assert!(t.contains("lab/unknown"), "{t}");
    assert!(t.contains("chosen: lab/far-big"), "{t}");
}
