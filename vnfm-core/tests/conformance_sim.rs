//! The conformance suite against the simulator: every function against `SimCloud`, the same
//! against `FaultySim` with no fault armed, armed faults reported as driver errors, and
//! backends that break the contract caught with a message naming what differed.
#![cfg(feature = "conformance")]
// a test crate: helpers outside `#[test]` fns fail by panicking too
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Debug;

use async_trait::async_trait;
use vnfm_core::cloud::CloudFile;
use vnfm_core::conformance::{
    cluster, compute, stack, wait_for_stack, zone, Capabilities, ConformanceError, Fixture,
};
use vnfm_core::driver::{
    ComputeInventory, CreateStack, DriverError, ListResources, ListZones, MarkUnhealthy, Stack,
    StackDriver, StackResource, StackStatus, UpdateStack, VirtualClock, ZoneCatalog,
};
use vnfm_core::id::{ServerId, StackId};
use vnfm_core::sim::{FaultKind, FaultySim, Method, SimCloud};
use vnfm_core::zone::{ComputeHost, ComputeZone};

const CLOUD: &str = "
zones:
  AZ-1:
    hosts:
      compute-1: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
      compute-2: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
  AZ-2:
    hosts:
      compute-3: {vcpus: 4, memory_mb: 8192, disk_gb: 80}
      compute-4: {vcpus: 4, memory_mb: 8192, disk_gb: 80, available: false}
  AZ-3:
    available: false
    hosts: null
flavors:
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
  m1.huge: {vcpus: 64, memory_mb: 262144, disk_gb: 2000}
images: [cirros]
cluster:
  nodes:
    worker-1: {labels: {kubernetes.io/hostname: worker-1}}
    worker-2: {labels: {kubernetes.io/hostname: worker-2}}
    worker-3: {labels: {kubernetes.io/hostname: worker-3}}
";

fn sim() -> SimCloud {
    SimCloud::new(CloudFile::from_yaml("conformance_sim", CLOUD).unwrap(), 11)
}

fn fixture() -> Fixture {
    Fixture::new("AZ-1", "m1.small", "m1.huge", "cirros")
        .with_zones(["AZ-1", "AZ-2", "AZ-3"])
        .with_capabilities(Capabilities::simulator())
}

/// Fails the test with the whole error chain.
fn ok(r: Result<(), ConformanceError>) {
    if let Err(e) = r {
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            msg.push_str(&format!(": {s}"));
            src = s.source();
        }
        panic!("{msg}");
    }
}

/// Nothing left behind: no server in the cloud.
fn clean(sim: &SimCloud) {
    assert!(sim.server_ids().is_empty(), "left: {:?}", sim.server_ids());
}

macro_rules! each_backend {
    ($name:ident, |$b:ident, $fx:ident| $call:expr) => {
        #[tokio::test]
        async fn $name() {
            let s = sim();
            let $fx = fixture();
            {
                let $b = &s;
                ok($call);
            }
            clean(&s);
            let f = FaultySim::new(sim());
            {
                let $b = &f;
                ok($call);
            }
            clean(f.sim());
        }
    };
}

each_backend!(stack_create_complete, |b, fx| stack::create_complete(
    b, &fx
)
.await);
each_backend!(stack_parameters_round_trip, |b, fx| {
    stack::parameters_round_trip(b, &fx).await
});
each_backend!(stack_update_patch, |b, fx| {
    stack::update_patch_merges_and_keeps_servers(b, &fx).await
});
each_backend!(stack_nested_listing, |b, fx| {
    stack::nested_resources_listing(b, &fx).await
});
each_backend!(stack_mark_unhealthy, |b, fx| {
    stack::mark_unhealthy_recreates_server(b, &fx).await
});
each_backend!(stack_unschedulable, |b, fx| {
    stack::unschedulable_server_fails_with_capacity_reason(b, &fx).await
});
each_backend!(stack_duplicate_name, |b, fx| {
    stack::duplicate_name_already_exists(b, &fx).await
});
each_backend!(stack_unknown_not_found, |b, fx| {
    stack::unknown_stack_not_found(b, &fx).await
});
each_backend!(stack_delete_then_not_found, |b, fx| {
    stack::delete_then_not_found(b, &fx).await
});
each_backend!(stack_invalid_template, |b, fx| {
    stack::invalid_template_creates_nothing(b, &fx).await
});
each_backend!(zone_compute_zones, |b, fx| zone::compute_zones_listed(
    b, &fx
)
.await);
each_backend!(zone_free_capacity, |b, fx| {
    zone::free_capacity_follows_servers(b, b, &fx).await
});
each_backend!(compute_server_zone, |b, fx| {
    compute::server_in_requested_zone(b, b, b, &fx).await
});
each_backend!(compute_unknown, |b, fx| compute::unknown_server_not_found(
    b, &fx
)
.await);
each_backend!(compute_error_fault, |b, fx| {
    compute::error_server_has_fault(b, b, &fx).await
});
each_backend!(cluster_labels, |b, fx| {
    cluster::label_set_remove_idempotent(b, &fx).await
});
each_backend!(cluster_unknown, |b, fx| cluster::unknown_objects_not_found(
    b, &fx
)
.await);
each_backend!(cluster_anti_affinity, |b, fx| {
    cluster::required_anti_affinity_spreads(b, &fx).await
});
each_backend!(cluster_scale, |b, fx| cluster::scale_workload(b, &fx).await);
each_backend!(cluster_heal, |b, fx| cluster::deleted_pod_is_recreated(
    b, &fx
)
.await);

#[tokio::test]
async fn run_all_on_one_shared_cloud() {
    let s = sim();
    let fx = fixture();
    ok(stack::run_all(&s, &fx).await);
    ok(zone::run_all(&s, &s, &fx).await);
    ok(compute::run_all(&s, &s, &s, &fx).await);
    ok(cluster::run_all(&s, &fx).await);
    clean(&s);
    // the cluster functions leave their labels off
    for n in cluster_nodes(&s).await {
        assert_eq!(n.labels.len(), 1, "{n:?}");
    }
}

async fn cluster_nodes(s: &SimCloud) -> Vec<vnfm_core::driver::ClusterNode> {
    vnfm_core::driver::ClusterDriver::list_nodes(s)
        .await
        .unwrap()
}

#[tokio::test]
async fn cluster_anti_affinity_with_one_node_and_named_nodes() {
    // one node: one value, one pod bound, one pending
    let one = CLOUD.replace(
        "    worker-2: {labels: {kubernetes.io/hostname: worker-2}}\n    worker-3: {labels: {kubernetes.io/hostname: worker-3}}\n",
        "",
    );
    assert_ne!(one, CLOUD);
    let s = SimCloud::new(CloudFile::from_yaml("one", &one).unwrap(), 3);
    ok(cluster::required_anti_affinity_spreads(&s, &fixture()).await);
    // naming the schedulable nodes: the others must not get pods
    let s = sim();
    let fx = fixture().with_cluster_nodes(["worker-2"]);
    let e = cluster::required_anti_affinity_spreads(&s, &fx)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("which is not schedulable"), "{e}");
    let fx = fixture().with_cluster_nodes(["worker-1", "worker-2", "worker-3"]);
    ok(cluster::required_anti_affinity_spreads(&s, &fx).await);
    let fx = fixture().with_cluster_nodes(["worker-9"]);
    let e = cluster::label_set_remove_idempotent(&s, &fx)
        .await
        .unwrap_err();
    assert!(matches!(e, ConformanceError::Fixture { .. }), "{e:?}");
    assert!(e.to_string().contains("worker-9"), "{e}");
}

#[tokio::test]
async fn store_suite_is_reexported() {
    vnfm_core::conformance::store::round_trip(&vnfm_core::store::MemoryStore::new()).await;
}

#[tokio::test]
async fn wait_for_stack_returns_the_settled_stack() {
    let s = sim();
    let fx = fixture();
    let id = StackDriver::create_stack(
        &s,
        CreateStack::new(
            "wait",
            vnfm_core::driver::TemplateBundle {
                template: "heat_template_version: 2021-04-16\nresources: {}\n".into(),
                files: Default::default(),
            },
            Default::default(),
        ),
    )
    .await
    .unwrap();
    let stack = wait_for_stack(&s, &id, fx.clock.as_ref()).await.unwrap();
    assert_eq!(stack.stack_status.to_string(), "CREATE_COMPLETE");
    let e = wait_for_stack(&s, &StackId::new("nope"), fx.clock.as_ref())
        .await
        .unwrap_err();
    assert!(
        e.driver_error().is_some_and(DriverError::is_not_found),
        "{e:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Armed faults are reported, not panicked on, and the suite still cleans up
// ---------------------------------------------------------------------------------------------

fn unavailable(e: &ConformanceError) -> bool {
    matches!(e.driver_error(), Some(DriverError::Unavailable { .. }))
}

#[tokio::test]
async fn armed_show_stack_fault_fails_create_complete_and_cleans_up() {
    let f = FaultySim::new(sim());
    f.fail_next(Method::ShowStack, 1, FaultKind::Unavailable);
    let e = stack::create_complete(&f, &fixture()).await.unwrap_err();
    assert!(unavailable(&e), "{e:?}");
    assert_eq!(e.behaviour(), "stack::create_complete");
    assert!(
        e.to_string()
            .starts_with("stack::create_complete: show_stack "),
        "{e}"
    );
    assert_eq!(f.pending(Method::ShowStack), 0);
    clean(f.sim());
}

#[tokio::test]
async fn armed_faults_fail_the_matching_functions() {
    let fx = fixture();
    let f = FaultySim::new(sim());
    f.fail_next(Method::ListZones, 1, FaultKind::Unavailable);
    let e = zone::compute_zones_listed(&f, &fx).await.unwrap_err();
    assert!(unavailable(&e), "{e:?}");

    f.fail_next(Method::Server, 1, FaultKind::Unavailable);
    let e = compute::server_in_requested_zone(&f, &f, &f, &fx)
        .await
        .unwrap_err();
    assert!(unavailable(&e), "{e:?}");
    clean(f.sim());

    f.fail_next(Method::LabelNode, 1, FaultKind::Unavailable);
    let e = cluster::label_set_remove_idempotent(&f, &fx)
        .await
        .unwrap_err();
    assert!(unavailable(&e), "{e:?}");

    // a wrong kind of error where NotFound is due is named with what was expected
    f.fail_next(Method::ShowStack, 1, FaultKind::Conflict);
    let e = stack::unknown_stack_not_found(&f, &fx).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("show_stack of an unknown stack (expected not found)"),
        "{e}"
    );
    assert!(matches!(
        e.driver_error(),
        Some(DriverError::Conflict { .. })
    ));

    // a failing cleanup is reported when the behaviour itself passed
    f.fail_next(Method::DeleteStack, 1, FaultKind::Unavailable);
    let e = stack::create_complete(&f, &fx).await.unwrap_err();
    assert!(e.to_string().contains("cleanup: delete_stack"), "{e}");
}

#[tokio::test]
async fn the_suite_passes_with_fewer_capabilities_declared() {
    // an asynchronous backend without admin view or capacity reporting: the simulator is
    // also such a backend, as it offers more than declared
    let f = FaultySim::new(sim());
    let fx = fixture().with_capabilities(
        Capabilities::simulator()
            .with_synchronous_stacks(false)
            .with_free_capacity(false)
            .with_hosts(false),
    );
    ok(stack::run_all(&f, &fx).await);
    ok(zone::run_all(&f, &f, &fx).await);
    ok(compute::run_all(&f, &f, &f, &fx).await);
    clean(f.sim());
}

// ---------------------------------------------------------------------------------------------
// A backend that breaks the contract is caught
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
enum Lie {
    /// `show_stack` forgets the `note` parameter.
    ForgetsNote,
    /// `delete_stack` answers Ok and deletes nothing.
    KeepsDeleted,
    /// `list_zones` adds Nova's `internal` zone.
    ListsInternal,
    /// `list_resources` lists nested resources before the top ones.
    NestedFirst,
    /// `show_stack` of a deleted stack reports DELETE_COMPLETE instead of NotFound.
    ShowsDeleted,
    /// `update_stack` re-creates the stack's servers (by deleting and re-creating the stack
    /// in the simulator is not possible; instead every update marks every server unhealthy).
    ReplacesEverything,
    /// `mark_unhealthy` is not implemented although the capability says it is.
    NoMark,
}

#[derive(Debug)]
struct Liar {
    sim: SimCloud,
    lie: Lie,
    deleted: std::sync::Mutex<Vec<(StackId, Stack)>>,
}

impl Liar {
    fn new(lie: Lie) -> Self {
        Self {
            sim: sim(),
            lie,
            deleted: Default::default(),
        }
    }
}

#[async_trait]
impl StackDriver for Liar {
    async fn create_stack(&self, req: CreateStack) -> Result<StackId, DriverError> {
        self.sim.create_stack(req).await
    }
    async fn update_stack(&self, req: UpdateStack) -> Result<(), DriverError> {
        if self.lie == Lie::ReplacesEverything {
            let list = self
                .sim
                .list_resources(ListResources::new(req.id.clone(), 5))
                .await?;
            for r in list
                .iter()
                .filter(|r| r.resource_type == "OS::Nova::Server")
            {
                self.sim
                    .mark_unhealthy(MarkUnhealthy::new(
                        r.stack_id.clone(),
                        &r.resource_name,
                        "lie",
                    ))
                    .await?;
            }
        }
        self.sim.update_stack(req).await
    }
    async fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError> {
        match self.sim.show_stack(id).await {
            Ok(mut s) => {
                if self.lie == Lie::ForgetsNote {
                    s.parameters.remove("note");
                }
                Ok(s)
            }
            Err(e) if self.lie == Lie::ShowsDeleted => {
                let deleted = self.deleted.lock().unwrap();
                match deleted.iter().find(|(d, _)| d == id) {
                    Some((_, s)) => {
                        let mut s = s.clone();
                        s.stack_status = "DELETE_COMPLETE".parse::<StackStatus>().unwrap();
                        Ok(s)
                    }
                    None => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }
    async fn delete_stack(&self, id: &StackId) -> Result<(), DriverError> {
        if self.lie == Lie::KeepsDeleted {
            return self.sim.show_stack(id).await.map(|_| ());
        }
        if self.lie == Lie::ShowsDeleted {
            if let Ok(s) = self.sim.show_stack(id).await {
                self.deleted.lock().unwrap().push((id.clone(), s));
            }
        }
        self.sim.delete_stack(id).await
    }
    async fn list_resources(&self, req: ListResources) -> Result<Vec<StackResource>, DriverError> {
        let mut list = self.sim.list_resources(req).await?;
        if self.lie == Lie::NestedFirst {
            list.reverse();
        }
        Ok(list)
    }
    async fn mark_unhealthy(&self, req: MarkUnhealthy) -> Result<(), DriverError> {
        if self.lie == Lie::NoMark {
            return Err(DriverError::NotImplemented {
                driver: "liar",
                operation: "mark_unhealthy",
            });
        }
        self.sim.mark_unhealthy(req).await
    }
}

#[async_trait]
impl ZoneCatalog for Liar {
    async fn list_zones(&self, opts: ListZones) -> Result<Vec<ComputeZone>, DriverError> {
        let mut zones = self.sim.list_zones(opts).await?;
        if self.lie == Lie::ListsInternal {
            zones.push(ComputeZone {
                name: "internal".into(),
                available: true,
                hosts: Some(vec![ComputeHost {
                    name: "controller".into(),
                    available: true,
                    free: None,
                }]),
            });
        }
        Ok(zones)
    }
}

#[async_trait]
impl ComputeInventory for Liar {
    async fn server(&self, id: &ServerId) -> Result<vnfm_core::driver::ServerInfo, DriverError> {
        self.sim.server(id).await
    }
}

async fn mismatch<F, Fut>(lie: Lie, run: F) -> String
where
    F: FnOnce(std::sync::Arc<Liar>, Fixture) -> Fut,
    Fut: std::future::Future<Output = Result<(), ConformanceError>>,
{
    let liar = std::sync::Arc::new(Liar::new(lie));
    let e = run(liar, fixture()).await.unwrap_err();
    assert!(
        matches!(
            e,
            ConformanceError::Mismatch { .. } | ConformanceError::Timeout { .. }
        ),
        "{lie:?}: {e:?}"
    );
    e.to_string()
}

fn assert_contains(msg: &str, part: &str) {
    assert!(msg.contains(part), "{msg:?} should contain {part:?}");
}

#[tokio::test]
async fn contract_breaches_are_named() {
    let m = mismatch(Lie::ForgetsNote, |l, fx| async move {
        stack::parameters_round_trip(l.as_ref(), &fx).await
    })
    .await;
    assert_contains(&m, "parameter \"note\"");
    assert_contains(&m, "is missing");

    let m = mismatch(Lie::KeepsDeleted, |l, fx| async move {
        stack::delete_then_not_found(l.as_ref(), &fx).await
    })
    .await;
    assert_contains(&m, "expected not found");

    let m = mismatch(Lie::ShowsDeleted, |l, fx| async move {
        stack::delete_then_not_found(l.as_ref(), &fx).await
    })
    .await;
    assert_contains(&m, "reported DELETE_COMPLETE");

    let m = mismatch(Lie::ListsInternal, |l, fx| async move {
        zone::compute_zones_listed(l.as_ref(), &fx).await
    })
    .await;
    assert_contains(&m, "\"internal\"");

    let m = mismatch(Lie::NestedFirst, |l, fx| async move {
        stack::nested_resources_listing(l.as_ref(), &fx).await
    })
    .await;
    assert_contains(&m, "stack::nested_resources_listing");

    let m = mismatch(Lie::ReplacesEverything, |l, fx| async move {
        stack::update_patch_merges_and_keeps_servers(l.as_ref(), &fx).await
    })
    .await;
    assert_contains(&m, "member 0 was replaced");

    let m = mismatch(Lie::ReplacesEverything, |l, fx| async move {
        stack::mark_unhealthy_recreates_server(l.as_ref(), &fx).await
    })
    .await;
    assert_contains(&m, "member 1 was healthy");
}

#[tokio::test]
async fn mark_unhealthy_capability_is_honoured() {
    // declared unsupported and not implemented: conforms
    let liar = Liar::new(Lie::NoMark);
    let fx = fixture().with_capabilities(Capabilities::simulator().with_mark_unhealthy(false));
    ok(stack::mark_unhealthy_recreates_server(&liar, &fx).await);
    ok(stack::unknown_stack_not_found(&liar, &fx).await);
    // declared supported but not implemented: the error is reported
    let e = stack::mark_unhealthy_recreates_server(&liar, &fixture())
        .await
        .unwrap_err();
    assert!(
        matches!(e.driver_error(), Some(DriverError::NotImplemented { .. })),
        "{e:?}"
    );
    // declared unsupported but implemented: that is a mismatch too
    let e = stack::mark_unhealthy_recreates_server(&sim(), &fx)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("expected not implemented"), "{e}");
    clean(&liar.sim);
}

#[tokio::test]
async fn capacity_without_reporting_is_not_checked() {
    let s = sim();
    let fx = fixture().with_capabilities(Capabilities::simulator().with_free_capacity(false));
    ok(zone::free_capacity_follows_servers(&s, &s, &fx).await);
    clean(&s);
}

#[tokio::test]
async fn fixture_zone_that_is_missing_or_no_candidate_is_reported() {
    let s = sim();
    let e = zone::compute_zones_listed(&s, &fixture().with_zones(["AZ-9"]))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("zone AZ-9 is not listed"), "{e}");
    let fx = Fixture::new("AZ-3", "m1.small", "m1.huge", "cirros")
        .with_capabilities(Capabilities::simulator());
    let e = zone::compute_zones_listed(&s, &fx).await.unwrap_err();
    assert!(
        e.to_string().contains("boot zone AZ-3 is not a candidate"),
        "{e}"
    );
}

#[tokio::test]
async fn a_virtual_clock_is_advanced_by_polling() {
    // a backend that stays in progress: the wait gives up after max_polls reads
    #[derive(Debug)]
    struct Stuck(SimCloud);
    #[async_trait]
    impl StackDriver for Stuck {
        async fn create_stack(&self, req: CreateStack) -> Result<StackId, DriverError> {
            self.0.create_stack(req).await
        }
        async fn update_stack(&self, req: UpdateStack) -> Result<(), DriverError> {
            self.0.update_stack(req).await
        }
        async fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError> {
            let mut s = self.0.show_stack(id).await?;
            s.stack_status = "CREATE_IN_PROGRESS".parse().unwrap();
            Ok(s)
        }
        async fn delete_stack(&self, id: &StackId) -> Result<(), DriverError> {
            self.0.delete_stack(id).await
        }
        async fn list_resources(
            &self,
            req: ListResources,
        ) -> Result<Vec<StackResource>, DriverError> {
            self.0.list_resources(req).await
        }
        async fn mark_unhealthy(&self, req: MarkUnhealthy) -> Result<(), DriverError> {
            self.0.mark_unhealthy(req).await
        }
    }
    let stuck = Stuck(sim());
    let clock = VirtualClock::new(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH);
    let fx = fixture()
        .with_capabilities(Capabilities::default())
        .with_clock(std::sync::Arc::new(clock.clone()))
        .with_polling(vnfm_core::conformance::Polling::new(
            5,
            std::time::Duration::from_secs(3),
        ));
    let e = stack::create_complete(&stuck, &fx).await.unwrap_err();
    assert!(
        matches!(e, ConformanceError::Timeout { polls: 5, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("CREATE_IN_PROGRESS"), "{e}");
    // 4 pauses of 3 s between 5 reads, and one while the clean-up's delete is in progress
    // (the simulator shows a deleted stack DELETE_IN_PROGRESS once before it is gone)
    assert_eq!(
        vnfm_core::driver::Clock::now(&clock),
        chrono::DateTime::<chrono::Utc>::UNIX_EPOCH + chrono::Duration::seconds(15)
    );
    clean(&stuck.0);
    // declared synchronous, the first read must be terminal
    let e = stack::create_complete(&stuck, &fixture())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("synchronous_stacks"), "{e}");
}
