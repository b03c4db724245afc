//! End to end on the simulated cloud with a VDU under an `OS::Heat::AutoScalingGroup`: the
//! `asg-vnf` example package (VDU1: workers, members of `worker_group`; VDU2: a database in the
//! StandardUserData layout; zone anti-affinity between them) through instantiate with the
//! group's zone full (reselection moves the whole group), scale-out, a scale-out whose zone is
//! full (FAILED_TEMP, nothing moves), heal of one member, scale-in and terminate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{ComputeInventory, ListResources, StackDriver, Store, VirtualClock};
use vnfm_core::id::{StackId, VduId, ZoneId};
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, LcmOperationStateType, ScaleType,
    ScaleVnfRequest, TerminateVnfRequest, VnfInstance, VnfcResourceInfo,
};
use vnfm_core::lifecycle::engine::STACK_ID_KEY;
use vnfm_core::lifecycle::{
    Drivers, FailureKind, LcmConfig, Lifecycle, OperationOptions, OperationReport,
};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::reselect::AttemptOutcome;
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;
use vnfm_core::zone::Resources;

const GROUP: &str = "worker_group";

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
}

fn setup(reselect: bool) -> (Lifecycle, SimCloud, VnfPackage, MemoryStore) {
    let cloud = CloudFile::load(examples().join("clouds/demo.yaml")).unwrap();
    let sim = SimCloud::new(cloud, 1);
    let store = MemoryStore::new();
    let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let drivers = Drivers {
        stacks: Arc::new(sim.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(store.clone()),
        clock: Arc::new(VirtualClock::new(start)),
        cluster: None,
    };
    let mut config = LcmConfig::standard().unwrap();
    config.reselect_zones = reselect;
    config.seed = 5;
    let pkg = fs::load(&examples().join("packages/asg-vnf")).unwrap();
    (Lifecycle::new(drivers, config), sim, pkg, store)
}

async fn created(lcm: &Lifecycle, pkg: &VnfPackage) -> VnfInstance {
    let req: CreateVnfRequest =
        serde_json::from_value(serde_json::json!({"vnfdId": pkg.descriptor_id})).unwrap();
    lcm.create(pkg, &req).await.unwrap()
}

fn pin(pairs: &[(&str, &str)]) -> OperationOptions {
    OperationOptions {
        pinned: pairs
            .iter()
            .map(|(k, z)| ((*k).to_owned(), ZoneId::from(*z)))
            .collect(),
        automatic: false,
        ..OperationOptions::default()
    }
}

fn vnfcs(inst: &VnfInstance) -> &[VnfcResourceInfo] {
    &inst
        .instantiated_vnf_info
        .as_ref()
        .unwrap()
        .vnfc_resource_info
}

/// VNFC id → server id, for the VNFCs of `vdu`.
fn servers_of(inst: &VnfInstance, vdu: &str) -> BTreeMap<String, String> {
    vnfcs(inst)
        .iter()
        .filter(|v| v.vdu_id.as_str() == vdu)
        .map(|v| (v.id.clone(), v.compute_resource.resource_id.clone()))
        .collect()
}

fn zones_of(inst: &VnfInstance, vdu: &str) -> BTreeSet<ZoneId> {
    vnfcs(inst)
        .iter()
        .filter(|v| v.vdu_id.as_str() == vdu)
        .map(|v| v.zone_id.clone().unwrap())
        .collect()
}

fn stack_of(inst: &VnfInstance) -> StackId {
    StackId::from(
        inst.metadata.as_ref().unwrap()[STACK_ID_KEY]
            .as_str()
            .unwrap(),
    )
}

/// The ids of the servers Heat has under the AutoScalingGroup.
async fn group_servers(sim: &SimCloud, stack: &StackId) -> BTreeSet<String> {
    let res = sim
        .list_resources(ListResources::new(stack.clone(), 5))
        .await
        .unwrap();
    res.iter()
        .filter(|r| r.resource_type == "OS::Nova::Server")
        .filter(|r| {
            vnfm_core::reselect::top_level_resource(stack, r, &res).as_deref() == Some(GROUP)
        })
        .map(|r| r.physical_resource_id.clone())
        .collect()
}

/// Checks that the instance records what Nova says, and that every worker shares one zone
/// other than the database's.
async fn check_consistent(sim: &SimCloud, inst: &VnfInstance) {
    for v in vnfcs(inst) {
        let s = sim
            .server(&v.compute_resource.resource_id.clone().into())
            .await
            .unwrap();
        assert_eq!(s.status, "ACTIVE", "{}", v.id);
        assert_eq!(s.zone.as_ref(), v.zone_id.as_ref(), "{}", v.id);
        let md = v.metadata.as_ref().unwrap();
        assert_eq!(
            md["host"].as_str(),
            s.host.as_ref().map(|h| h.as_str()),
            "{}",
            v.id
        );
    }
    let workers = zones_of(inst, "VDU1");
    assert_eq!(workers.len(), 1, "workers in one zone: {workers:?}");
    let db = zones_of(inst, "VDU2");
    assert!(workers.is_disjoint(&db), "{workers:?} vs {db:?}");
    let on_stack = group_servers(sim, &stack_of(inst)).await;
    let recorded: BTreeSet<String> = servers_of(inst, "VDU1").into_values().collect();
    assert_eq!(on_stack, recorded);
}

async fn instantiate(
    lcm: &Lifecycle,
    pkg: &VnfPackage,
    opts: &OperationOptions,
) -> (VnfInstance, OperationReport) {
    let inst = created(lcm, pkg).await;
    let r = lcm
        .instantiate(&inst.id, pkg, &InstantiateVnfRequest::new("default"), opts)
        .await
        .unwrap();
    (inst, r)
}

fn scale(type_: ScaleType) -> ScaleVnfRequest {
    ScaleVnfRequest::new(type_, "worker_scale")
}

#[tokio::test]
async fn the_package_loads_with_one_group_vdu() {
    let (_lcm, _sim, pkg, _store) = setup(true);
    let flavour = pkg.flavour("default").unwrap();
    let base = pkg.base_hot("default").unwrap();
    let vdus: Vec<_> = flavour.vdus.keys().cloned().collect();
    let layouts =
        vnfm_core::lifecycle::userdata::layouts("asg.yaml", &base.template, &vdus).unwrap();
    use vnfm_core::lifecycle::userdata::Layout;
    assert_eq!(
        layouts[&VduId::from("VDU1")],
        Layout::Group {
            resource: GROUP.into()
        }
    );
    assert_eq!(layouts[&VduId::from("VDU2")], Layout::PerVnfc);
}

#[tokio::test]
async fn instantiate_moves_the_whole_group_out_of_a_full_zone_then_scale_heal_terminate() {
    let (lcm, sim, pkg, store) = setup(true);
    // The NFVO grants the workers into AZ-1, which cannot hold an m1.small.
    let (inst, r) = instantiate(&lcm, &pkg, &pin(&[("VDU1", "AZ-1")])).await;
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let attempts = &r.op_occ.attempts;
    assert!(attempts.len() >= 2, "{attempts:?}");
    assert_eq!(attempts[0].outcome, Some(AttemptOutcome::Failed));
    // The failed unit is the group, named as Heat names it.
    assert_eq!(attempts[0].failed_units, vec![GROUP.to_owned()]);
    assert_eq!(attempts[0].failed_zones, vec![ZoneId::from("AZ-1")]);
    assert_eq!(attempts[0].zones[GROUP], ZoneId::from("AZ-1"));
    assert_eq!(
        attempts.last().unwrap().outcome,
        Some(AttemptOutcome::Succeeded)
    );
    let inst1 = r.instance.clone();
    let workers = servers_of(&inst1, "VDU1");
    assert_eq!(
        workers.keys().cloned().collect::<Vec<_>>(),
        vec!["VDU1-0", "VDU1-1"]
    );
    let zone = zones_of(&inst1, "VDU1").into_iter().next().unwrap();
    assert_ne!(zone, ZoneId::from("AZ-1"));
    assert_eq!(attempts.last().unwrap().zones[GROUP], zone);
    check_consistent(&sim, &inst1).await;
    for v in vnfcs(&inst1).iter().filter(|v| v.vdu_id.as_str() == "VDU1") {
        assert_eq!(v.metadata.as_ref().unwrap()["parent_resource_name"], GROUP);
    }

    // Scale out: one more member in the same zone; the existing ones keep their servers.
    let r = lcm
        .scale(
            &inst.id,
            &pkg,
            &scale(ScaleType::ScaleOut),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let inst2 = r.instance.clone();
    let after = servers_of(&inst2, "VDU1");
    assert_eq!(after.len(), 3);
    for (id, server) in &workers {
        assert_eq!(after.get(id), Some(server), "{id} kept its server");
    }
    assert!(!workers.values().any(|s| s == &after["VDU1-2"]));
    assert_eq!(zones_of(&inst2, "VDU1"), BTreeSet::from([zone.clone()]));
    let grant = r.grant.as_ref().unwrap();
    assert!(grant.zones.iter().all(|z| z.zone_id == zone), "{grant:?}");
    check_consistent(&sim, &inst2).await;

    // Heal one member: exactly that one is re-created, in its zone.
    let heal = HealVnfRequest {
        vnfc_instance_id: vec!["VDU1-1".into()],
        ..HealVnfRequest::default()
    };
    let r = lcm
        .heal(&inst.id, &pkg, &heal, &OperationOptions::default())
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let inst3 = r.instance.clone();
    let healed = servers_of(&inst3, "VDU1");
    assert_eq!(healed.len(), 3);
    let changed: Vec<&String> = healed
        .iter()
        .filter(|(id, s)| after.get(*id) != Some(*s))
        .map(|(id, _)| id)
        .collect();
    assert_eq!(changed, vec!["VDU1-1"]);
    assert_eq!(servers_of(&inst3, "VDU2"), servers_of(&inst2, "VDU2"));
    assert_eq!(zones_of(&inst3, "VDU1"), BTreeSet::from([zone.clone()]));
    check_consistent(&sim, &inst3).await;

    // Scale in: one member goes; the entries of the servers left are kept.
    let r = lcm
        .scale(
            &inst.id,
            &pkg,
            &scale(ScaleType::ScaleIn),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    let inst4 = r.instance.clone();
    let left = servers_of(&inst4, "VDU1");
    assert_eq!(left.len(), 2);
    for (id, server) in &left {
        assert_eq!(healed.get(id), Some(server), "{id}");
    }
    check_consistent(&sim, &inst4).await;

    // Terminate: the stack and its servers are gone.
    let r = lcm
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
    assert!(sim.server_ids().is_empty());
    assert!(!store.instance(&inst.id).await.unwrap().is_instantiated());
}

#[tokio::test]
async fn a_scale_out_into_a_full_zone_fails_without_moving_the_group() {
    let (lcm, sim, pkg, store) = setup(true);
    let (inst, r) = instantiate(&lcm, &pkg, &pin(&[("VDU1", "AZ-2"), ("VDU2", "AZ-3")])).await;
    assert!(r.is_completed(), "{:?}", r.op_occ.error);
    assert_eq!(r.op_occ.attempts.len(), 1);
    let before = r.instance.clone();
    let workers = servers_of(&before, "VDU1");
    // AZ-2 fills up: each host keeps exactly the workers it runs.
    let small = sim.cloud().flavor("m1.small").unwrap();
    for host in ["compute-3", "compute-4"] {
        let n = vnfcs(&before)
            .iter()
            .filter(|v| v.metadata.as_ref().unwrap()["host"] == host)
            .count() as u64;
        let cap = Resources::new(small.vcpus * n, small.memory_mb * n, small.disk_gb * n);
        sim.set_host_capacity(host, cap).unwrap();
    }
    let r = lcm
        .scale(
            &inst.id,
            &pkg,
            &scale(ScaleType::ScaleOut),
            &OperationOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::CapacityExhausted));
    // One attempt, no reselection: the group stays in AZ-2.
    assert_eq!(r.op_occ.attempts.len(), 1, "{:?}", r.op_occ.attempts);
    assert_eq!(r.op_occ.attempts[0].zones[GROUP], ZoneId::from("AZ-2"));
    let detail = &r.op_occ.error.as_ref().unwrap().detail;
    assert!(detail.contains(GROUP), "{detail}");
    // The existing workers still run, where they were.
    for server in workers.values() {
        let s = sim.server(&server.clone().into()).await.unwrap();
        assert_eq!(s.status, "ACTIVE");
        assert_eq!(s.zone, Some(ZoneId::from("AZ-2")));
    }
    let stored = store.instance(&inst.id).await.unwrap();
    assert_eq!(servers_of(&stored, "VDU1"), workers);

    // Rolling the scale-out back removes the failed member again.
    let rb = lcm.rollback(&r.op_occ.id, &pkg).await.unwrap();
    assert_eq!(rb.op_occ.operation_state, LcmOperationStateType::RolledBack);
    let on_stack = group_servers(&sim, &stack_of(&stored)).await;
    assert_eq!(on_stack, workers.values().cloned().collect());
}

#[tokio::test]
async fn without_reselection_a_full_group_zone_fails_the_instantiate() {
    let (lcm, _sim, pkg, _store) = setup(false);
    let (_inst, r) = instantiate(&lcm, &pkg, &pin(&[("VDU1-1", "AZ-1")])).await;
    assert_eq!(r.op_occ.operation_state, LcmOperationStateType::FailedTemp);
    assert_eq!(r.failure, Some(FailureKind::CapacityExhausted));
    // The pin of one worker pins the whole group (forced affinity).
    assert_eq!(r.op_occ.attempts[0].zones[GROUP], ZoneId::from("AZ-1"));
    let grant = r.grant.as_ref().unwrap();
    let grant_zones: BTreeSet<&ZoneId> = grant.zones.iter().map(|z| &z.zone_id).collect();
    assert!(grant_zones.contains(&ZoneId::from("AZ-1")));
    assert_eq!(grant_zones.len(), 2, "{grant:?}");
}

#[tokio::test]
async fn grant_only_gives_the_group_one_zone_apart_from_the_database() {
    use vnfm_core::grant::ResourceType;
    use vnfm_core::lifecycle::GrantOnly;
    let (lcm, _sim, pkg, _store) = setup(true);
    let inst = created(&lcm, &pkg).await;
    let (planned, grant) = lcm
        .grant_only(
            &pkg,
            &inst,
            GrantOnly::Instantiate {
                flavour_id: "default".into(),
            },
        )
        .await
        .unwrap()
        .unwrap();
    let request = planned.request;
    let mut zones: BTreeMap<String, BTreeSet<ZoneId>> = BTreeMap::new();
    for r in request
        .add_resources
        .iter()
        .filter(|r| r.type_ == ResourceType::Compute)
    {
        let vdu = r.vdu_id.clone().unwrap().to_string();
        zones
            .entry(vdu)
            .or_default()
            .insert(grant.zone_of(&r.id).unwrap().clone());
    }
    assert_eq!(zones["VDU1"].len(), 1, "{zones:?}");
    assert_eq!(zones["VDU2"].len(), 1, "{zones:?}");
    assert!(zones["VDU1"].is_disjoint(&zones["VDU2"]), "{zones:?}");
}

/// Issue 10, acceptance 1: the workers' group is granted into Z1, which holds one of its two
/// members; Z2 holds none; Z3 has room; Z4 holds the database, which the zone anti-affinity
/// keeps apart from the workers. Of the two other zones only Z3 can hold the group. Every seed
/// ends COMPLETED with both members in Z3 and each attempt's `failedZones` naming only the zone
/// where a server failed; some seed's first reselection picks Z3 at once, another's the other
/// full zone Z2 first (both runs with `max_reselections` unset).
#[tokio::test]
async fn a_group_granted_into_a_full_zone_ends_in_the_only_zone_that_fits() {
    const CLOUD: &str = "
zones:
  Z1:
    hosts:
      h1: {vcpus: 1, memory_mb: 2560, disk_gb: 40}
  Z2:
    hosts:
      h2: {vcpus: 1, memory_mb: 1024, disk_gb: 40}
  Z3:
    hosts:
      h3: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
  Z4:
    hosts:
      h4: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
flavors:
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
  m1.medium: {vcpus: 2, memory_mb: 4096, disk_gb: 40}
images: [cirros]
";
    let pkg = fs::load(&examples().join("packages/asg-vnf")).unwrap();
    let mut first_choices = BTreeSet::new();
    for seed in 0..16 {
        let sim = SimCloud::new(CloudFile::from_yaml("asg.yaml", CLOUD).unwrap(), seed);
        let start = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let drivers = Drivers {
            stacks: Arc::new(sim.clone()),
            zones: Arc::new(sim.clone()),
            compute: Arc::new(sim.clone()),
            store: Arc::new(MemoryStore::new()),
            clock: Arc::new(VirtualClock::new(start)),
            cluster: None,
        };
        let mut config = LcmConfig::standard().unwrap();
        config.reselect_zones = true;
        config.max_reselections = None;
        config.seed = seed;
        let lcm = Lifecycle::new(drivers, config);
        let (_, r) = instantiate(&lcm, &pkg, &pin(&[("VDU1", "Z1"), ("VDU2", "Z4")])).await;
        assert!(r.is_completed(), "seed {seed}: {:?}", r.op_occ.error);
        let a = &r.op_occ.attempts;
        // Z1: one member fits, the other failed there; nothing else failed in that attempt.
        assert_eq!(a[0].zones[GROUP], ZoneId::from("Z1"));
        assert_eq!(a[0].failed_zones, vec![ZoneId::from("Z1")], "seed {seed}");
        assert_eq!(a[0].failed_units, vec![GROUP.to_owned()]);
        first_choices.insert(a[1].zones[GROUP].clone());
        for (i, at) in a.iter().enumerate().skip(1) {
            let z = &at.zones[GROUP];
            match at.outcome {
                Some(AttemptOutcome::Failed) => {
                    // only the zone asked, which is also where its servers really failed
                    assert_eq!(z, &ZoneId::from("Z2"), "seed {seed} attempt {i}");
                    assert_eq!(at.failed_zones, vec![z.clone()], "seed {seed} attempt {i}");
                }
                Some(AttemptOutcome::Succeeded) => assert_eq!(z, &ZoneId::from("Z3")),
                o => panic!("seed {seed} attempt {i}: {o:?}"),
            }
        }
        assert!(a.len() <= 3, "seed {seed}: {a:?}");
        // Both members run in Z3 (Nova's view), the database in Z4.
        assert_eq!(
            zones_of(&r.instance, "VDU1"),
            BTreeSet::from([ZoneId::from("Z3")])
        );
        assert_eq!(servers_of(&r.instance, "VDU1").len(), 2);
        for id in servers_of(&r.instance, "VDU1").values() {
            let s = sim.server(&id.as_str().into()).await.unwrap();
            assert_eq!(s.zone, Some(ZoneId::from("Z3")));
            assert_eq!(s.status, "ACTIVE");
        }
        assert_eq!(
            zones_of(&r.instance, "VDU2"),
            BTreeSet::from([ZoneId::from("Z4")])
        );
        check_consistent(&sim, &r.instance).await;
    }
    assert_eq!(
        first_choices,
        BTreeSet::from([ZoneId::from("Z2"), ZoneId::from("Z3")]),
        "some seed reselects Z3 at once, another the other full zone Z2 first"
    );
}
