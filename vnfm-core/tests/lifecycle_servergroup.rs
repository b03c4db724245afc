//! The VNFD's host anti-affinity as a Nova server group, end to end on the simulated cloud,
//! with `examples/packages/k8s-cluster-vnf`: a master and the workers of a Kubernetes cluster,
//! whose `AntiAffinityRule` at `nfvi_node` scope targets the `PlacementGroup` of the workers.
//!
//! The cloud has one zone of three hosts: `compute-1` has room for every VM, `compute-2` and
//! `compute-3` for two each. Nova weighs hosts by free RAM, so without a group every worker
//! goes to `compute-1`; with the group each has a host of its own, four do not fit three hosts
//! and are refused before any stack, and best effort (`soft-anti-affinity`) places them anyway.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{ComputeInventory, OpOccFilter, ServerInfo, Store, VirtualClock};
use vnfm_core::id::{ServerId, VnfInstanceId};
use vnfm_core::lcm::{
    CreateVnfRequest, InstantiateVnfRequest, LcmOperationStateType, ScaleType, ScaleVnfRequest,
    VnfInstance,
};
use vnfm_core::lifecycle::{
    Drivers, FailureKind, LcmConfig, LcmError, Lifecycle, OperationOptions, OperationReport,
    SERVER_GROUPS_KEY,
};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::sim::{BuildFault, FaultySim, SimCloud};
use vnfm_core::store::MemoryStore;

const CLOUD: &str = "
zones:
  AZ-1:
    hosts:
      compute-1: {vcpus: 16, memory_mb: 32768, disk_gb: 320}
      compute-2: {vcpus: 2, memory_mb: 4096, disk_gb: 40}
      compute-3: {vcpus: 2, memory_mb: 4096, disk_gb: 40}
flavors:
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
";

const REFUSED: &str = "rule workers_apart (AntiAffinityRule, nfvi_node) over PlacementGroup \
                       workers (VDU workerNode): 4 servers need 4 distinct hosts, zone AZ-1 has 3";

fn package_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/k8s-cluster-vnf")
}

fn cluster() -> VnfPackage {
    fs::load(&package_dir()).unwrap()
}

/// An edit of one file of the package: its path and the new text from the old one.
type Edit<'a> = (&'a str, &'a dyn Fn(&str) -> String);

/// The package with `edits` applied (each must change its file).
fn edited(edits: &[Edit<'_>]) -> VnfPackage {
    let mut files = BTreeMap::new();
    let root = package_dir();
    let mut todo = vec![root.clone()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    for (path, edit) in edits {
        let text = String::from_utf8(files[*path].clone()).unwrap();
        let new = edit(&text);
        assert_ne!(new, text, "the edit of {path} changed nothing");
        files.insert((*path).to_owned(), new.into_bytes());
    }
    VnfPackage::from_files("k8s-cluster-vnf (edited)", files).unwrap()
}

struct Setup {
    lcm: Lifecycle,
    sim: SimCloud,
    store: MemoryStore,
}

fn setup(best_effort: bool) -> Setup {
    let sim = SimCloud::new(CloudFile::from_yaml("cloud", CLOUD).unwrap(), 1);
    let store = MemoryStore::new();
    let lcm = lifecycle(&sim, &store, best_effort);
    Setup { lcm, sim, store }
}

fn lifecycle(sim: &SimCloud, store: &MemoryStore, best_effort: bool) -> Lifecycle {
    lifecycle_on(Arc::new(sim.clone()), sim, store, best_effort)
}

fn lifecycle_on(
    stacks: Arc<dyn vnfm_core::driver::StackDriver>,
    sim: &SimCloud,
    store: &MemoryStore,
    best_effort: bool,
) -> Lifecycle {
    let drivers = Drivers {
        stacks,
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        cluster: None,
        store: Arc::new(store.clone()),
        clock: Arc::new(VirtualClock::new(
            chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
                .unwrap()
                .to_utc(),
        )),
    };
    let mut config = LcmConfig::standard().unwrap();
    config.seed = 5;
    config.fallback_best_effort = best_effort;
    Lifecycle::new(drivers, config)
}

/// Creates an instance of `pkg` and instantiates it at `level`.
async fn start(
    s: &Setup,
    pkg: &VnfPackage,
    level: Option<&str>,
) -> (VnfInstanceId, Result<OperationReport, LcmError>) {
    let inst = s
        .lcm
        .create(pkg, &CreateVnfRequest::new(pkg.descriptor_id.clone()))
        .await
        .unwrap();
    let mut req = InstantiateVnfRequest::new("default");
    req.instantiation_level_id = level.map(str::to_owned);
    let r = s
        .lcm
        .instantiate(&inst.id, pkg, &req, &OperationOptions::default())
        .await;
    (inst.id, r)
}

async fn instantiate(s: &Setup, pkg: &VnfPackage, level: Option<&str>) -> OperationReport {
    start(s, pkg, level).await.1.unwrap()
}

/// One more worker.
async fn scale_out(lcm: &Lifecycle, inst: &VnfInstanceId) -> OperationReport {
    let req = ScaleVnfRequest::new(ScaleType::ScaleOut, "worker_instance");
    lcm.scale(inst, &cluster(), &req, &OperationOptions::default())
        .await
        .unwrap()
}

/// Every server of the instance's `vdu`, as Nova shows it.
async fn servers(s: &Setup, inst: &VnfInstance, vdu: &str) -> Vec<ServerInfo> {
    let mut out = Vec::new();
    for v in &inst
        .instantiated_vnf_info
        .as_ref()
        .unwrap()
        .vnfc_resource_info
    {
        if v.vdu_id.as_str() == vdu {
            let id = ServerId::from(v.compute_resource.resource_id.clone());
            out.push(s.sim.server(&id).await.unwrap());
        }
    }
    out
}

fn hosts(servers: &[ServerInfo]) -> Vec<String> {
    servers
        .iter()
        .map(|s| s.host.as_ref().unwrap().to_string())
        .collect()
}

fn distinct(hosts: &[String]) -> usize {
    hosts.iter().collect::<BTreeSet<_>>().len()
}

fn refused(r: &OperationReport) -> String {
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::Infeasible));
    let err = r.op_occ.error.as_ref().unwrap();
    assert_eq!(err.title.as_deref(), Some("too few hosts"));
    assert!(r.op_occ.attempts.is_empty(), "{:?}", r.op_occ.attempts);
    err.detail.clone()
}

#[tokio::test]
async fn three_workers_land_on_three_hosts_because_of_the_group() {
    let s = setup(false);
    let r = instantiate(&s, &cluster(), None).await;
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let workers = servers(&s, &r.instance, "workerNode").await;
    assert_eq!(workers.len(), 3);
    assert_eq!(distinct(&hosts(&workers)), 3, "{:?}", hosts(&workers));
    // one group, the one vnfm added for the rule, holds the three workers and nothing else
    let groups: BTreeSet<&Vec<String>> = workers.iter().map(|w| &w.server_groups).collect();
    assert_eq!(groups.len(), 1);
    assert_eq!(workers[0].server_groups.len(), 1);
    let master = servers(&s, &r.instance, "masterNode").await;
    assert!(master[0].server_groups.is_empty());
    // the instance records the group's policy
    let info = r.instance.instantiated_vnf_info.as_ref().unwrap();
    assert_eq!(
        info.metadata.as_ref().unwrap()[SERVER_GROUPS_KEY],
        serde_json::json!({"workers_apart": "anti-affinity"})
    );

    // Without the rule, Nova's RAM weigher puts every worker on compute-1.
    let s = setup(false);
    let pkg = edited(&[("Definitions/k8s_cluster_df_default.yaml", &|t| {
        let start = t.find("    - workers_apart:").unwrap();
        let end = t.find("    - scaling_aspects:").unwrap();
        format!("{}{}", &t[..start], &t[end..])
    })]);
    let r = instantiate(&s, &pkg, None).await;
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let workers = servers(&s, &r.instance, "workerNode").await;
    assert_eq!(hosts(&workers), vec!["compute-1"; 3]);
    assert!(workers.iter().all(|w| w.server_groups.is_empty()));
}

#[tokio::test]
async fn more_workers_than_hosts_are_refused_before_any_stack() {
    // instantiate at the level of four workers: FAILED_TEMP before any stack
    let s = setup(false);
    let r = instantiate(&s, &cluster(), Some("instantiation_level_2")).await;
    assert_eq!(refused(&r), REFUSED);
    assert!(s.sim.server_ids().is_empty());
    assert!(!r.instance.is_instantiated());
    // the occurrence holds no stack: rolled back at once
    let rb = s.lcm.rollback(&r.op_occ.id, &cluster()).await.unwrap();
    assert_eq!(rb.op_occ.operation_state, LcmOperationStateType::RolledBack);

    // a scale-out from three workers to four: refused before the stack update
    let s = setup(false);
    let r = instantiate(&s, &cluster(), None).await;
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let before = s.sim.server_ids();
    let out = scale_out(&s.lcm, &r.instance.id).await;
    assert_eq!(refused(&out), REFUSED);
    assert_eq!(s.sim.server_ids(), before);

    // the policy is the one recorded at instantiation: best effort configured afterwards
    // does not soften the group (Heat would replace it and every worker with it)
    let s2 = Setup {
        lcm: lifecycle(&s.sim, &s.store, true),
        sim: s.sim.clone(),
        store: s.store.clone(),
    };
    s2.lcm.fail(&out.op_occ.id).await.unwrap();
    let out = scale_out(&s2.lcm, &r.instance.id).await;
    assert_eq!(refused(&out), REFUSED);
    assert_eq!(s2.sim.server_ids(), before);
}

#[tokio::test]
async fn best_effort_puts_four_workers_on_three_hosts() {
    let s = setup(true);
    let r = instantiate(&s, &cluster(), Some("instantiation_level_2")).await;
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let workers = servers(&s, &r.instance, "workerNode").await;
    assert_eq!(workers.len(), 4);
    // soft-anti-affinity spreads them as far as the hosts allow
    assert_eq!(distinct(&hosts(&workers)), 3, "{:?}", hosts(&workers));
    let info = r.instance.instantiated_vnf_info.as_ref().unwrap();
    assert_eq!(
        info.metadata.as_ref().unwrap()[SERVER_GROUPS_KEY],
        serde_json::json!({"workers_apart": "soft-anti-affinity"})
    );
}

/// The package whose BaseHOT declares the workers' group `srvgroup_worker` with `policy` and
/// passes it to the workers' nested template, which reads it (Tacker's UserData way).
fn declared(policy: &str) -> VnfPackage {
    let top = |t: &str| {
        t.replace(
            "resources:\n",
            &format!(
                "resources:\n  srvgroup_worker:\n    type: OS::Nova::ServerGroup\n    \
                 properties: {{name: srvgroup_worker, policies: [{policy}]}}\n\n"
            ),
        )
        .replace(
            "          zone: { get_param: [ nfv, VDU, workerNode, locationConstraints ] }\n",
            "          zone: { get_param: [ nfv, VDU, workerNode, locationConstraints ] }\n          \
             worker_group: { get_resource: srvgroup_worker }\n",
        )
    };
    let worker = |t: &str| {
        t.replace(
            "  zone:\n    type: string\n",
            "  zone:\n    type: string\n  worker_group:\n    type: string\n",
        )
        .replace(
            "      networks:",
            "      scheduler_hints:\n        group: { get_param: worker_group }\n      networks:",
        )
    };
    edited(&[
        ("BaseHOT/default/k8s_cluster.yaml", &top),
        ("BaseHOT/default/nested/worker.yaml", &worker),
    ])
}

#[tokio::test]
async fn a_group_the_basehot_declares_is_used_or_refused_before_anything_starts() {
    // it agrees with the rule: used as it is, no group added
    let s = setup(false);
    let r = instantiate(&s, &declared("anti-affinity"), None).await;
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let workers = servers(&s, &r.instance, "workerNode").await;
    assert_eq!(distinct(&hosts(&workers)), 3, "{:?}", hosts(&workers));
    let stack = r.instance.metadata.as_ref().unwrap()["stackId"]
        .as_str()
        .unwrap()
        .to_owned();
    let resources = vnfm_core::driver::StackDriver::list_resources(
        &s.sim,
        vnfm_core::driver::ListResources::new(stack.into(), 5),
    )
    .await
    .unwrap();
    let groups: Vec<&str> = resources
        .iter()
        .filter(|r| r.resource_type == "OS::Nova::ServerGroup")
        .map(|r| r.resource_name.as_str())
        .collect();
    assert_eq!(groups, vec!["srvgroup_worker"]);

    // it contradicts the rule: nothing starts, the error names both policies
    let s = setup(false);
    let (inst, r) = start(&s, &declared("affinity"), None).await;
    let e = r.unwrap_err();
    assert!(matches!(e, LcmError::Invalid(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "k8s-cluster-vnf (edited): rule workers_apart: VDU workerNode: BaseHOT/default: \
         resources.srvgroup_worker: server group policy `affinity`, expected anti-affinity"
    );
    assert!(s
        .store
        .op_occs(OpOccFilter::instance(inst))
        .await
        .unwrap()
        .is_empty());
}

/// Nova's fault when its late server-group check failed a worker until its reschedules ran
/// out (real Nova 34, three workers created at once on three hosts).
const RACE: &str = "Exceeded maximum number of retries. Exceeded max scheduling attempts 3 for \
                    instance bddc4ef6-2f33-4469-abfa-6bea2249cda3. Last exception: \
                    Anti-affinity instance group policy was violated";

/// The cluster on a cloud whose next `n` builds fail on Nova's server-group race.
fn racing(n: u32) -> Setup {
    let sim = SimCloud::new(CloudFile::from_yaml("cloud", CLOUD).unwrap(), 1);
    let faults = FaultySim::new(sim.clone());
    faults.fail_next_builds(
        n,
        BuildFault::Fault {
            code: 500,
            message: RACE.into(),
        },
    );
    let store = MemoryStore::new();
    let lcm = lifecycle_on(Arc::new(faults), &sim, &store, false);
    Setup { lcm, sim, store }
}

#[tokio::test]
async fn the_server_group_race_is_applied_again_in_the_same_zone() {
    // reselection is off (the default), and the race is retried anyway: it is not capacity
    let s = racing(1);
    let r = instantiate(&s, &cluster(), None).await;
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let attempts = &r.op_occ.attempts;
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0].zones, attempts[1].zones);
    let reason = attempts[0].status_reason.as_deref().unwrap();
    assert!(
        reason.contains("Anti-affinity instance group policy was violated"),
        "{reason}"
    );
    assert!(attempts[0].failed_zones.is_empty(), "{attempts:?}");
    let workers = servers(&s, &r.instance, "workerNode").await;
    assert_eq!(workers.len(), 3);
    assert_eq!(distinct(&hosts(&workers)), 3, "{:?}", hosts(&workers));
}

#[tokio::test]
async fn a_race_that_keeps_coming_back_fails_the_operation_as_a_stack_failure() {
    let s = racing(20);
    let r = instantiate(&s, &cluster(), None).await;
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    // not a lack of capacity: the zone has room
    assert_eq!(r.failure, Some(FailureKind::StackFailed));
    assert_eq!(r.op_occ.attempts.len(), 3, "the first and two retries");
    let detail = &r.op_occ.error.as_ref().unwrap().detail;
    assert!(detail.contains("after 2 same-zone retries"), "{detail}");
    assert!(detail.contains("retry the operation"), "{detail}");
}
