//! CNFs ("VNF B") end to end on the simulated cloud's cluster: the example package
//! `examples/packages/cnf-podaffinity` (a Deployment of 3 replicas with a required pod
//! anti-affinity on the host label) over 3 nodes on 3 compute hosts, through instantiate,
//! scale out (the 4th pod stays Pending, reported), heal (a pod deleted and replaced), scale
//! in and terminate; the preflight refusal and warning; auto-heal from an Alertmanager alert.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use vnfm_core::alert::{Action, AlertHandler, Endpoint, PrometheusPluginConfig};
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{
    ApplyObject, ClusterDriver, ClusterEvent, ClusterNode, DeletePod, DriverError, EvictPod,
    LabelNode, ListEvents, ListPods, ListWorkloads, ObjectRef, Pod, PodScheduled, ScaleWorkload,
    VirtualClock,
};
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, LcmOperationStateType, ScaleType,
    ScaleVnfRequest, TerminateVnfRequest, VnfInstance,
};
use vnfm_core::lifecycle::cnf::CnfResources;
use vnfm_core::lifecycle::{
    Drivers, FailureKind, HookCall, HookPoint, LcmConfig, LcmError, Lifecycle, OperationHook,
    OperationOptions,
};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::sim::{FaultKind, FaultySim, Method, SimCloud};
use vnfm_core::store::MemoryStore;

const HOST: &str = "topology.openstack.org/host-id";

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

fn package_dir() -> std::path::PathBuf {
    examples().join("packages/cnf-podaffinity")
}

/// The example package with its manifest edited by `edit`.
fn package_with(edit: impl Fn(&str) -> String) -> VnfPackage {
    let mut files = BTreeMap::new();
    for rel in [
        "TOSCA-Metadata/TOSCA.meta",
        "Definitions/cnf_top.vnfd.yaml",
        "Definitions/cnf_types.yaml",
        "Definitions/cnf_df_podaffinity.yaml",
        "Files/kubernetes/deployment.yaml",
    ] {
        let text = std::fs::read_to_string(package_dir().join(rel)).unwrap();
        let text = if rel.starts_with("Files/") {
            edit(&text)
        } else {
            text
        };
        files.insert(rel.to_owned(), text.into_bytes());
    }
    VnfPackage::from_files("cnf-edited", files).unwrap()
}

#[derive(Debug, Default)]
struct Recorder {
    calls: Mutex<Vec<(HookPoint, usize)>>,
}

#[async_trait]
impl OperationHook for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn points(&self) -> &[HookPoint] {
        &[
            HookPoint::InstantiateEnd,
            HookPoint::ScaleEnd,
            HookPoint::HealEnd,
            HookPoint::TerminateStart,
        ]
    }
    async fn run(&self, call: &HookCall) -> Result<String, String> {
        let n = call
            .instance
            .instantiated_vnf_info
            .as_ref()
            .map_or(0, |i| i.vnfc_resource_info.len());
        self.calls.lock().unwrap().push((call.point, n));
        Ok(format!("{n} VNFC(s)"))
    }
}

struct Fx {
    lcm: Lifecycle,
    sim: SimCloud,
    pkg: VnfPackage,
    hook: Arc<Recorder>,
}

fn cnf_cloud() -> SimCloud {
    SimCloud::new(
        CloudFile::load(examples().join("clouds/cnf.yaml")).unwrap(),
        1,
    )
}

fn setup_with(cluster: bool, tune: impl FnOnce(&mut LcmConfig)) -> Fx {
    let sim = cnf_cloud();
    let driver = cluster.then(|| Arc::new(sim.clone()) as Arc<dyn ClusterDriver>);
    setup_over(sim, driver, tune)
}

fn setup_over(
    sim: SimCloud,
    cluster: Option<Arc<dyn ClusterDriver>>,
    tune: impl FnOnce(&mut LcmConfig),
) -> Fx {
    let drivers = Drivers {
        stacks: Arc::new(sim.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(MemoryStore::new()),
        clock: Arc::new(VirtualClock::new(
            chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
                .unwrap()
                .to_utc(),
        )),
        cluster,
    };
    let mut config = LcmConfig::standard().unwrap();
    config.seed = 5;
    tune(&mut config);
    let hook = Arc::new(Recorder::default());
    let lcm = Lifecycle::new(drivers, config).with_hook(hook.clone());
    let pkg = fs::load(&package_dir()).unwrap();
    Fx {
        lcm,
        sim,
        pkg,
        hook,
    }
}

fn setup() -> Fx {
    setup_with(true, |_| {})
}

async fn created(lcm: &Lifecycle, pkg: &VnfPackage) -> VnfInstance {
    let req: CreateVnfRequest =
        serde_json::from_value(serde_json::json!({"vnfdId": pkg.descriptor_id})).unwrap();
    lcm.create(pkg, &req).await.unwrap()
}

async fn pods(sim: &SimCloud) -> Vec<Pod> {
    let sel = BTreeMap::from([("app".to_owned(), "vdu1".to_owned())]);
    sim.list_pods(ListPods::selected("default", sel))
        .await
        .unwrap()
}

fn pod_ids(inst: &VnfInstance) -> Vec<String> {
    inst.instantiated_vnf_info
        .as_ref()
        .unwrap()
        .vnfc_resource_info
        .iter()
        .map(|v| v.compute_resource.resource_id.clone())
        .collect()
}

fn hosts_of(sim_nodes: &BTreeMap<String, String>, pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter_map(|p| p.node.as_ref())
        .map(|n| sim_nodes[&n.to_string()].clone())
        .collect()
}

async fn node_hosts(sim: &SimCloud) -> BTreeMap<String, String> {
    sim.list_nodes()
        .await
        .unwrap()
        .into_iter()
        .map(|n| (n.name.to_string(), n.labels[HOST].clone()))
        .collect()
}

fn instantiate_req() -> InstantiateVnfRequest {
    InstantiateVnfRequest::new("podaffinity")
}

#[tokio::test]
async fn the_package_is_a_cnf_with_its_manifest_read_from_files_kubernetes() {
    let fx = setup();
    assert!(fx.pkg.is_cnf("podaffinity"));
    assert_eq!(
        fx.pkg.kubernetes.keys().collect::<Vec<_>>(),
        ["Files/kubernetes/deployment.yaml"]
    );
}

#[tokio::test]
async fn instantiate_scale_heal_scale_in_terminate() {
    let fx = setup();
    let hosts = node_hosts(&fx.sim).await;
    let inst = created(&fx.lcm, &fx.pkg).await;

    // instantiate: 3 pods on 3 distinct host values
    let r = fx
        .lcm
        .instantiate(
            &inst.id,
            &fx.pkg,
            &instantiate_req(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert!(r.op_occ.warnings.is_empty(), "{:?}", r.op_occ.warnings);
    let listed = pods(&fx.sim).await;
    assert_eq!(listed.len(), 3);
    assert_eq!(
        hosts_of(&hosts, &listed).len(),
        3,
        "one pod per compute host"
    );
    let info = r.instance.instantiated_vnf_info.clone().unwrap();
    assert_eq!(info.vnfc_resource_info.len(), 3);
    for v in &info.vnfc_resource_info {
        assert_eq!(v.id, v.compute_resource.resource_id, "the VNFC is its pod");
        assert_eq!(
            v.compute_resource.vim_level_resource_type.as_deref(),
            Some("Deployment")
        );
        assert_eq!(v.vdu_id.as_str(), "VDU1");
        assert!(listed.iter().any(|p| p.name == v.id));
    }
    assert_eq!(info.vnfc_info.len(), 3);
    let res = CnfResources::of(&r.instance).unwrap();
    assert_eq!(res.namespace, "default");
    assert_eq!(res.objects.len(), 2, "the Deployment and the Service");
    assert_eq!(
        fx.hook.calls.lock().unwrap()[0],
        (HookPoint::InstantiateEnd, 3)
    );

    // scale out to 4: the 4th pod cannot be placed, reported with the scheduler's reason
    let out = ScaleVnfRequest::new(ScaleType::ScaleOut, "vdu1_aspect");
    let r = fx
        .lcm
        .scale(&inst.id, &fx.pkg, &out, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let listed = pods(&fx.sim).await;
    assert_eq!(listed.len(), 4);
    let pending: Vec<&Pod> = listed.iter().filter(|p| p.node.is_none()).collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(r.op_occ.warnings.len(), 1, "{:?}", r.op_occ.warnings);
    let w = &r.op_occ.warnings[0];
    assert!(w.contains(&pending[0].name), "{w}");
    assert!(
        w.contains("Pending: Unschedulable: 0/3 nodes are available"),
        "{w}"
    );
    assert!(w.contains("anti-affinity"), "{w}");
    let info = r.instance.instantiated_vnf_info.clone().unwrap();
    assert_eq!(info.vnfc_resource_info.len(), 4);
    assert_eq!(info.scale_level("vdu1_aspect"), Some(1));
    let p = info
        .vnfc_resource_info
        .iter()
        .find(|v| v.id == pending[0].name)
        .unwrap();
    assert_eq!(
        p.metadata.as_ref().unwrap()["reason"],
        serde_json::json!("Unschedulable")
    );

    // scale in back to 3: the pending pod goes first
    let back = ScaleVnfRequest::new(ScaleType::ScaleIn, "vdu1_aspect");
    let r = fx
        .lcm
        .scale(&inst.id, &fx.pkg, &back, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let listed = pods(&fx.sim).await;
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().all(|p| p.node.is_some()));
    assert_eq!(pod_ids(&r.instance).len(), 3);

    // heal one pod: deleted and replaced
    let victim = pod_ids(&r.instance)[1].clone();
    let heal = HealVnfRequest {
        vnfc_instance_id: vec![victim.clone()],
        ..HealVnfRequest::default()
    };
    let r = fx
        .lcm
        .heal(&inst.id, &fx.pkg, &heal, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let listed = pods(&fx.sim).await;
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().all(|p| p.name != victim));
    assert_eq!(hosts_of(&hosts, &listed).len(), 3);
    let ids = pod_ids(&r.instance);
    assert!(!ids.contains(&victim));
    assert_eq!(
        ids.iter().cloned().collect::<BTreeSet<_>>(),
        listed
            .iter()
            .map(|p| p.name.clone())
            .collect::<BTreeSet<_>>()
    );

    // terminate: the objects are gone
    let r = fx
        .lcm
        .terminate(
            &inst.id,
            &serde_json::from_value::<TerminateVnfRequest>(
                serde_json::json!({"terminationType": "FORCEFUL"}),
            )
            .unwrap(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert!(!r.instance.is_instantiated());
    assert!(CnfResources::of(&r.instance).is_none());
    assert!(pods(&fx.sim).await.is_empty());
    assert!(fx
        .sim
        .list_workloads(ListWorkloads::new("default"))
        .await
        .unwrap()
        .is_empty());
    let points: Vec<HookPoint> = fx.hook.calls.lock().unwrap().iter().map(|c| c.0).collect();
    assert_eq!(
        points,
        [
            HookPoint::InstantiateEnd,
            HookPoint::ScaleEnd,
            HookPoint::ScaleEnd,
            HookPoint::HealEnd,
            HookPoint::TerminateStart
        ]
    );
}

#[tokio::test]
async fn preflight_refuses_more_replicas_than_host_values_naming_both_numbers() {
    let fx = setup();
    let pkg = package_with(|t| t.replace("name: vdu1\n  labels", "name: vdu1x\n  labels"));
    // a VDU whose Deployment is missing is refused before anything starts
    let inst = created(&fx.lcm, &pkg).await;
    let e = fx
        .lcm
        .instantiate(
            &inst.id,
            &pkg,
            &instantiate_req(),
            &OperationOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, LcmError::Invalid(_)), "{e}");
    assert!(
        e.to_string().contains(
            "VDU VDU1 of flavour podaffinity is no Deployment or StatefulSet named \"vdu1\""
        ),
        "{e}"
    );

    // 4 replicas required over 3 host values: refused, naming both numbers
    let fx = setup_with(true, |_| {});
    let inst = created(&fx.lcm, &fx.pkg).await;
    let mut req = instantiate_req();
    req.instantiation_level_id = Some("instantiation_level_1".into());
    let four = four_replicas(&fx.pkg);
    let r = fx
        .lcm
        .instantiate(&inst.id, &four, &req, &OperationOptions::default())
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::Infeasible));
    let detail = r.op_occ.error.unwrap().detail;
    assert!(
        detail.contains(
            "Deployment vdu1 asks for 4 replicas with required pod anti-affinity on \
             \"topology.openstack.org/host-id\", and the cluster's nodes have 3 distinct \
             value(s) of that label (compute-1, compute-2, compute-3): at most 3 can be scheduled"
        ),
        "{detail}"
    );
    assert!(pods(&fx.sim).await.is_empty(), "nothing applied");
    // the failed instantiate rolls back (nothing to delete but the attempt)
    let rb = fx.lcm.rollback(&r.op_occ.id, &four).await.unwrap();
    assert_eq!(rb.op_occ.operation_state, LcmOperationStateType::RolledBack);

    // with best effort: allowed and reported
    let fx = setup_with(true, |c| c.fallback_best_effort = true);
    let inst = created(&fx.lcm, &fx.pkg).await;
    let four = four_replicas(&fx.pkg);
    let r = fx
        .lcm
        .instantiate(&inst.id, &four, &req, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert!(
        r.op_occ.warnings[0].contains("asks for 4 replicas")
            && r.op_occ.warnings[0]
                .contains("allowed by fallbackBestEffort; 1 pod(s) will stay Pending"),
        "{:?}",
        r.op_occ.warnings
    );
    assert_eq!(pods(&fx.sim).await.len(), 4);
}

/// The example package with 4 instances of VDU1 at instantiation.
fn four_replicas(_pkg: &VnfPackage) -> VnfPackage {
    let mut files = BTreeMap::new();
    for rel in [
        "TOSCA-Metadata/TOSCA.meta",
        "Definitions/cnf_top.vnfd.yaml",
        "Definitions/cnf_types.yaml",
        "Definitions/cnf_df_podaffinity.yaml",
        "Files/kubernetes/deployment.yaml",
    ] {
        let mut text = std::fs::read_to_string(package_dir().join(rel)).unwrap();
        if rel.ends_with("cnf_df_podaffinity.yaml") {
            // four at instantiation, and room for the two scale levels above them
            text = text
                .replace("number_of_instances: 3", "number_of_instances: 4")
                .replace("max_number_of_instances: 5", "max_number_of_instances: 6");
        }
        files.insert(rel.to_owned(), text.into_bytes());
    }
    VnfPackage::from_files("cnf-four", files).unwrap()
}

#[tokio::test]
async fn another_topology_key_is_reported_naming_both_keys() {
    let fx = setup();
    let pkg = package_with(|t| {
        t.replace(
            &format!("topologyKey: {HOST}"),
            "topologyKey: kubernetes.io/hostname",
        )
    });
    let inst = created(&fx.lcm, &pkg).await;
    let r = fx
        .lcm
        .instantiate(
            &inst.id,
            &pkg,
            &instantiate_req(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(r.op_occ.warnings.len(), 1, "{:?}", r.op_occ.warnings);
    let w = &r.op_occ.warnings[0];
    assert!(
        w.contains("\"kubernetes.io/hostname\"") && w.contains(&format!("{HOST:?}")),
        "{w}"
    );
}

#[tokio::test]
async fn a_cnf_without_a_cluster_does_not_start() {
    let fx = setup_with(false, |_| {});
    let inst = created(&fx.lcm, &fx.pkg).await;
    let e = fx
        .lcm
        .instantiate(
            &inst.id,
            &fx.pkg,
            &instantiate_req(),
            &OperationOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("is a CNF") && e.to_string().contains("no Kubernetes cluster"),
        "{e}"
    );
}

#[tokio::test]
async fn namespace_and_manifest_list_come_from_additional_params() {
    let fx = setup();
    let inst = created(&fx.lcm, &fx.pkg).await;
    let mut req = instantiate_req();
    req.additional_params = Some(
        serde_json::from_value(serde_json::json!({
            "namespace": "cnf",
            "lcm-kubernetes-def-files": ["Files/kubernetes/deployment.yaml"]
        }))
        .unwrap(),
    );
    let r = fx
        .lcm
        .instantiate(&inst.id, &fx.pkg, &req, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(CnfResources::of(&r.instance).unwrap().namespace, "cnf");
    let in_ns = fx
        .sim
        .list_pods(ListPods::selected("cnf", BTreeMap::new()))
        .await
        .unwrap();
    assert_eq!(in_ns.len(), 3);

    let inst = created(&fx.lcm, &fx.pkg).await;
    req.additional_params = Some(
        serde_json::from_value(serde_json::json!({
            "lcm-kubernetes-def-files": ["Files/kubernetes/nope.yaml"]
        }))
        .unwrap(),
    );
    let e = fx
        .lcm
        .instantiate(&inst.id, &fx.pkg, &req, &OperationOptions::default())
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("\"Files/kubernetes/nope.yaml\" is not a manifest of package"),
        "{e}"
    );
}

#[tokio::test]
async fn auto_heal_from_an_alert_deletes_and_replaces_the_pod() {
    let fx = setup();
    let inst = created(&fx.lcm, &fx.pkg).await;
    let mut req = instantiate_req();
    req.vnf_configurable_properties = Some(
        serde_json::from_value(
            serde_json::json!({"isAutohealEnabled": true, "isAutoscaleEnabled": true}),
        )
        .unwrap(),
    );
    let r = fx
        .lcm
        .instantiate(&inst.id, &fx.pkg, &req, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed());
    let victim = pod_ids(&r.instance)[0].clone();

    let mut handler = AlertHandler::new(PrometheusPluginConfig::default().with_all_enabled());
    let instances = BTreeMap::from([(r.instance.id.clone(), r.instance.clone())]);
    let body = serde_json::to_vec(&serde_json::json!({
        "version": "4", "status": "firing",
        "alerts": [{"status": "firing", "labels": {"receiver_type": "tacker",
            "function_type": "auto_heal", "vnf_instance_id": r.instance.id,
            "vnfc_info_id": victim}, "annotations": {},
            "startsAt": "2026-01-01T00:00:00Z", "fingerprint": "cnf-1"}]
    }))
    .unwrap();
    let now = fx.lcm.drivers().clock.now();
    let out = handler
        .handle_webhook(Endpoint::AutoHealing, &body, &instances, now)
        .unwrap();
    assert!(
        matches!(&out[0].action, Action::HealQueued { vnfc, .. } if vnfc == &victim),
        "{:?}",
        out[0].action
    );
    let due = handler.poll_timeout().unwrap();
    let mut jobs = handler.poll_due(due);
    assert_eq!(jobs.len(), 1);
    let job = &mut jobs[0];
    let current = fx
        .lcm
        .drivers()
        .store
        .instance(&r.instance.id)
        .await
        .unwrap();
    assert!(job.retain_existing(&current).is_empty());
    let healed = fx
        .lcm
        .heal(&job.instance, &fx.pkg, &job.request(), &job.options())
        .await
        .unwrap();
    assert!(healed.is_completed(), "{:?}", healed.op_occ.error);
    assert!(healed.op_occ.is_automatic_invocation);
    let listed = pods(&fx.sim).await;
    assert_eq!(listed.len(), 3);
    assert!(
        listed.iter().all(|p| p.name != victim),
        "the failed pod was deleted"
    );
    assert!(!pod_ids(&healed.instance).contains(&victim), "and replaced");

    // auto-scale: one step out adds a replica
    let body = serde_json::to_vec(&serde_json::json!({
        "version": "4", "status": "firing",
        "alerts": [{"status": "firing", "labels": {"receiver_type": "tacker",
            "function_type": "auto_scale", "vnf_instance_id": r.instance.id,
            "auto_scale_type": "SCALE_OUT", "aspect_id": "vdu1_aspect"}, "annotations": {},
            "startsAt": "2026-01-01T00:01:00Z", "fingerprint": "cnf-2"}]
    }))
    .unwrap();
    handler.mark_idle(&job.instance);
    let instances = BTreeMap::from([(healed.instance.id.clone(), healed.instance.clone())]);
    let out = handler
        .handle_webhook(
            Endpoint::AutoScaling,
            &body,
            &instances,
            fx.lcm.drivers().clock.now(),
        )
        .unwrap();
    let Action::Scale(job) = &out[0].action else {
        panic!("{:?}", out[0].action)
    };
    let scaled = fx
        .lcm
        .scale(
            &job.instance,
            &fx.pkg,
            &job.request,
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(scaled.is_completed(), "{:?}", scaled.op_occ.error);
    assert_eq!(pods(&fx.sim).await.len(), 4);
}

#[tokio::test]
async fn a_failed_cnf_instantiate_is_retried_or_rolled_back() {
    let faulty = FaultySim::new(cnf_cloud());
    let fx = setup_over(
        faulty.sim().clone(),
        Some(Arc::new(faulty.clone()) as Arc<dyn ClusterDriver>),
        |_| {},
    );

    // the API server is unavailable for the first apply: FAILED_TEMP, then retry completes
    faulty.fail_next(Method::ApplyObject, 1, FaultKind::Unavailable);
    let inst = created(&fx.lcm, &fx.pkg).await;
    let r = fx
        .lcm
        .instantiate(
            &inst.id,
            &fx.pkg,
            &instantiate_req(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::Backend));
    assert!(!r.instance.is_instantiated());
    let r = fx
        .lcm
        .retry(&r.op_occ.id, &fx.pkg, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(pod_ids(&r.instance).len(), 3);
    assert_eq!(pods(&fx.sim).await.len(), 3);

    // the pods cannot be listed after the apply: FAILED_TEMP, then rollback deletes the objects
    let fx = setup_over(
        faulty.sim().clone(),
        Some(Arc::new(faulty.clone()) as Arc<dyn ClusterDriver>),
        |c| c.cnf_namespace = "other".into(),
    );
    faulty.fail_next(Method::ListPods, 1, FaultKind::Unavailable);
    let inst = created(&fx.lcm, &fx.pkg).await;
    let r = fx
        .lcm
        .instantiate(
            &inst.id,
            &fx.pkg,
            &instantiate_req(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    let other = || ListPods::selected("other", BTreeMap::new());
    assert_eq!(fx.sim.list_pods(other()).await.unwrap().len(), 3);
    let rb = fx.lcm.rollback(&r.op_occ.id, &fx.pkg).await.unwrap();
    assert_eq!(rb.op_occ.operation_state, LcmOperationStateType::RolledBack);
    assert!(fx.sim.list_pods(other()).await.unwrap().is_empty());
    assert!(fx
        .sim
        .list_workloads(ListWorkloads::new("other"))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        pods(&fx.sim).await.len(),
        3,
        "the first instance's pods stay"
    );
}

/// The simulated cluster with the real kube-scheduler's lag after a pod delete: for the next
/// two listings the replacement is refused for anti-affinity (`Unschedulable`), as the real
/// scheduler does while its cache still holds the victim; the victim is listed terminating in
/// the first of them and gone in the second. Later listings show the replacement bound.
#[derive(Debug)]
struct LaggingScheduler {
    sim: SimCloud,
    /// After a delete: the victim, the pods listed before it, the listings left.
    lag: Mutex<Option<(Pod, BTreeSet<String>, usize)>>,
}

#[async_trait]
impl ClusterDriver for LaggingScheduler {
    async fn list_nodes(&self) -> Result<Vec<ClusterNode>, DriverError> {
        self.sim.list_nodes().await
    }
    async fn label_node(&self, req: LabelNode) -> Result<(), DriverError> {
        self.sim.label_node(req).await
    }
    async fn apply_object(&self, req: ApplyObject) -> Result<(), DriverError> {
        self.sim.apply_object(req).await
    }
    async fn delete_object(&self, req: ObjectRef) -> Result<(), DriverError> {
        self.sim.delete_object(req).await
    }
    async fn list_workloads(
        &self,
        req: ListWorkloads,
    ) -> Result<Vec<serde_json::Value>, DriverError> {
        self.sim.list_workloads(req).await
    }
    async fn scale_workload(&self, req: ScaleWorkload) -> Result<(), DriverError> {
        self.sim.scale_workload(req).await
    }
    async fn list_pods(&self, req: ListPods) -> Result<Vec<Pod>, DriverError> {
        let mut listed = self.sim.list_pods(req).await?;
        let mut lag = self.lag.lock().unwrap();
        if let Some((victim, before, left)) = lag.as_mut() {
            for p in listed.iter_mut().filter(|p| !before.contains(&p.name)) {
                p.node = None;
                p.phase = "Pending".into();
                p.scheduled = Some(PodScheduled {
                    status: false,
                    reason: Some("Unschedulable".into()),
                    message: Some(
                        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
                            .into(),
                    ),
                });
            }
            if *left == 2 {
                let mut v = victim.clone();
                v.deleting = true;
                listed.push(v);
            }
            *left -= 1;
            if *left == 0 {
                *lag = None;
            }
        }
        Ok(listed)
    }
    async fn delete_pod(&self, req: DeletePod) -> Result<(), DriverError> {
        let before = pods(&self.sim).await;
        self.sim.delete_pod(req.clone()).await?;
        if let Some(v) = before.iter().find(|p| p.name == req.name) {
            let names = before.iter().map(|p| p.name.clone()).collect();
            *self.lag.lock().unwrap() = Some((v.clone(), names, 2));
        }
        Ok(())
    }
    async fn evict_pod(&self, req: EvictPod) -> Result<(), DriverError> {
        self.sim.evict_pod(req).await
    }
    async fn list_events(&self, req: ListEvents) -> Result<Vec<ClusterEvent>, DriverError> {
        self.sim.list_events(req).await
    }
}

/// Found against the real control plane: right after a heal deleted its pod, the real
/// scheduler refused the replacement (its cache still held the victim) and bound it a moment
/// later; the heal must report the bound pod, not the first verdict.
#[tokio::test]
async fn a_heal_waits_out_the_schedulers_verdict_given_while_the_victim_was_terminating() {
    let sim = cnf_cloud();
    let lagging = Arc::new(LaggingScheduler {
        sim: sim.clone(),
        lag: Mutex::new(None),
    });
    let fx = setup_over(sim, Some(lagging as Arc<dyn ClusterDriver>), |_| {});
    let inst = created(&fx.lcm, &fx.pkg).await;
    let r = fx
        .lcm
        .instantiate(
            &inst.id,
            &fx.pkg,
            &instantiate_req(),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let victim = pod_ids(&r.instance)[0].clone();
    let heal = HealVnfRequest {
        vnfc_instance_id: vec![victim.clone()],
        ..HealVnfRequest::default()
    };
    let r = fx
        .lcm
        .heal(&inst.id, &fx.pkg, &heal, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert!(r.op_occ.warnings.is_empty(), "{:?}", r.op_occ.warnings);
    let info = r.instance.instantiated_vnf_info.unwrap();
    assert_eq!(info.vnfc_resource_info.len(), 3);
    for v in &info.vnfc_resource_info {
        assert_ne!(v.id, victim);
        let md = v.metadata.as_ref().unwrap();
        assert!(md.contains_key("node"), "{} is bound: {md:?}", v.id);
    }
}
