//! The vnfm-core conformance suite against real Keystone, Nova and Heat.
//!
//! Runs only with `VNFM_TEST_OPENSTACK=1` and the `OS_*` variables of a cloud, e.g. the one
//! `scripts/openstack-dev.sh start` brings up on loopback:
//!
//! ```text
//! eval "$(scripts/openstack-dev.sh start)"
//! VNFM_TEST_OPENSTACK=1 cargo test -p vnfm-openstack --test real_openstack -- --nocapture
//! ```
//!
//! The fixture comes from `VNFM_OS_TEST_ZONES` (space-separated; the first is the boot zone),
//! `VNFM_OS_TEST_IMAGE`, `VNFM_OS_TEST_FLAVOR` and `VNFM_OS_TEST_HUGE_FLAVOR` (a flavor no host
//! can hold), which the script prints too. Every behaviour runs, each is timed, and the test
//! fails at the end listing every behaviour that failed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use vnfm_core::conformance::{
    compute, stack, zone, Capabilities, ConformanceError, Fixture, Polling,
};
use vnfm_core::driver::Clock;
use vnfm_openstack::OpenStack;

/// Real time, for the suite's polls.
#[derive(Debug)]
struct TokioClock;

#[async_trait]
impl Clock for TokioClock {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now()
    }
    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

fn env_or(k: &str, default: &str) -> String {
    std::env::var(k)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

type Run<'a> = Pin<Box<dyn Future<Output = Result<(), ConformanceError>> + 'a>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_against_real_openstack() {
    if std::env::var("VNFM_TEST_OPENSTACK").as_deref() != Ok("1") {
        eprintln!(
            "skipping: set VNFM_TEST_OPENSTACK=1 and the OS_* variables of a cloud \
             (eval \"$(scripts/openstack-dev.sh start)\") to run the conformance suite \
             against real Keystone, Nova and Heat"
        );
        return;
    }
    let cloud = OpenStack::from_env().expect("OS_* configuration");
    let heat = cloud.heat();
    let nova = cloud.nova();

    let zones = env_or("VNFM_OS_TEST_ZONES", "nova");
    let zones: Vec<&str> = zones.split_whitespace().collect();
    let stamp = chrono::Utc::now().timestamp() % 1_000_000;
    let fx = Fixture::new(
        zones[0],
        env_or("VNFM_OS_TEST_FLAVOR", "m1.tiny"),
        env_or("VNFM_OS_TEST_HUGE_FLAVOR", "vnfm.huge"),
        env_or("VNFM_OS_TEST_IMAGE", "tiny"),
    )
    .with_zones(zones.iter().copied())
    .with_name_prefix(format!("vnfm-rt-{stamp}"))
    .with_capabilities(Capabilities::openstack_admin())
    .with_polling(Polling::new(240, Duration::from_millis(500)))
    .with_clock(Arc::new(TokioClock));

    let (h, n) = (&heat, &nova);
    let f = &fx;
    let suite: Vec<(&str, Run<'_>)> = vec![
        (
            "zone::compute_zones_listed",
            Box::pin(zone::compute_zones_listed(n, f)),
        ),
        (
            "stack::create_complete",
            Box::pin(stack::create_complete(h, f)),
        ),
        (
            "stack::parameters_round_trip",
            Box::pin(stack::parameters_round_trip(h, f)),
        ),
        (
            "stack::update_patch_merges_and_keeps_servers",
            Box::pin(stack::update_patch_merges_and_keeps_servers(h, f)),
        ),
        (
            "stack::nested_resources_listing",
            Box::pin(stack::nested_resources_listing(h, f)),
        ),
        (
            "stack::mark_unhealthy_recreates_server",
            Box::pin(stack::mark_unhealthy_recreates_server(h, f)),
        ),
        (
            "stack::unschedulable_server_fails_with_capacity_reason",
            Box::pin(stack::unschedulable_server_fails_with_capacity_reason(h, f)),
        ),
        (
            "stack::duplicate_name_already_exists",
            Box::pin(stack::duplicate_name_already_exists(h, f)),
        ),
        (
            "stack::unknown_stack_not_found",
            Box::pin(stack::unknown_stack_not_found(h, f)),
        ),
        (
            "stack::delete_then_not_found",
            Box::pin(stack::delete_then_not_found(h, f)),
        ),
        (
            "stack::invalid_template_creates_nothing",
            Box::pin(stack::invalid_template_creates_nothing(h, f)),
        ),
        (
            "zone::free_capacity_follows_servers",
            Box::pin(zone::free_capacity_follows_servers(h, n, f)),
        ),
        (
            "compute::server_in_requested_zone",
            Box::pin(compute::server_in_requested_zone(h, n, n, f)),
        ),
        (
            "compute::unknown_server_not_found",
            Box::pin(compute::unknown_server_not_found(n, f)),
        ),
        (
            "compute::error_server_has_fault",
            Box::pin(compute::error_server_has_fault(h, n, f)),
        ),
    ];

    let total = Instant::now();
    let mut failed = Vec::new();
    for (name, run) in suite {
        let t = Instant::now();
        let before = cloud.request_count();
        let result = run.await;
        let took = t.elapsed();
        let requests = cloud.request_count() - before;
        match result {
            Ok(()) => eprintln!(
                "ok     {name} ({:.1} s, {requests} requests)",
                took.as_secs_f64()
            ),
            Err(e) => {
                eprintln!("FAILED {name} ({:.1} s): {}", took.as_secs_f64(), chain(&e));
                failed.push(format!("{name}: {}", chain(&e)));
            }
        }
    }
    eprintln!(
        "suite: {:.1} s, {} requests, {} authentications",
        total.elapsed().as_secs_f64(),
        cloud.request_count(),
        cloud.auth_count()
    );
    for w in cloud.warnings() {
        eprintln!("warning: {w}");
    }
    assert!(
        failed.is_empty(),
        "failed behaviours:\n{}",
        failed.join("\n")
    );
}
