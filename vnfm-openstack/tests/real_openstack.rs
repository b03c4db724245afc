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
//!
//! The free capacity of hosts: with the admin credentials, what the zone catalogue reports per
//! host equals what this test computes itself from Placement's inventories and usages over raw
//! HTTP, before, while and after a server runs; with the non-admin user of
//! `VNFM_OS_MEMBER_USERNAME` / `_PASSWORD` / `_PROJECT` (printed by the script), who sees the
//! zones' hosts (the script's Nova policy.yaml) but whom Placement refuses, capacity is unknown
//! and the report says why, the local granter falls back to random and its grant says so, and
//! that user's servers come and go.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::{json, Value};
use vnfm_core::conformance::{
    compute, stack, zone, Capabilities, ConformanceError, Fixture, Polling,
};
use vnfm_core::driver::Clock;
use vnfm_core::id::HostId;
use vnfm_core::zone::{ComputeZone, Resources};
use vnfm_openstack::{CapacityUnknown, CloudConfig, OpenStack};

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
    if !vnfm_core::vectors::real_suite_enabled(
        "VNFM_TEST_OPENSTACK",
        "real-openstack",
        module_path!(),
        "set VNFM_TEST_OPENSTACK=1 and the OS_* variables of a cloud \
             (eval \"$(scripts/openstack-dev.sh start)\") to run the conformance suite \
             against real Keystone, Nova and Heat",
    ) {
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

// ------------------------------------------------------------------------ free capacity

fn enabled() -> bool {
    vnfm_core::vectors::real_suite_enabled(
        "VNFM_TEST_OPENSTACK",
        "real-openstack",
        module_path!(),
        "set VNFM_TEST_OPENSTACK=1 and the OS_* variables of a cloud",
    )
}

/// Plain HTTP to Keystone, Nova and Placement, apart from the adapter's code.
struct Raw {
    http: reqwest::Client,
    token: String,
    nova: String,
    placement: String,
}

impl Raw {
    async fn admin() -> Raw {
        let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
        // As the adapter's session does: never reuse a connection idle for longer than the
        // servers' keep-alive (gunicorn's 2 s), or the server may close it under our request.
        let http = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(1))
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let auth = env("OS_AUTH_URL");
        let auth = auth.trim_end_matches('/').trim_end_matches("/v3");
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": env("OS_USERNAME"), "password": env("OS_PASSWORD"),
                "domain": {"name": env_or("OS_USER_DOMAIN_NAME", "Default")}}}},
            "scope": {"project": {"name": env("OS_PROJECT_NAME"),
                "domain": {"name": env_or("OS_PROJECT_DOMAIN_NAME", "Default")}}}}});
        let resp = http
            .post(format!("{auth}/v3/auth/tokens"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 201, "raw login");
        let token = resp.headers()["x-subject-token"]
            .to_str()
            .unwrap()
            .to_owned();
        let v: Value = resp.json().await.unwrap();
        let url = |kind: &str| -> String {
            v["token"]["catalog"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["type"] == kind)
                .flat_map(|s| s["endpoints"].as_array().unwrap().iter())
                .find(|e| e["interface"] == "public")
                .unwrap_or_else(|| panic!("no public {kind} endpoint"))["url"]
                .as_str()
                .unwrap()
                .trim_end_matches('/')
                .to_owned()
        };
        Raw {
            nova: url("compute"),
            placement: url("placement"),
            http,
            token,
        }
    }

    async fn send(&self, method: reqwest::Method, url: String, body: Option<Value>) -> Value {
        let mut req = self
            .http
            .request(method.clone(), &url)
            .header("X-Auth-Token", &self.token)
            .header("Accept", "application/json")
            .header("X-OpenStack-Nova-API-Version", "2.79")
            .header("OpenStack-API-Version", "placement 1.29");
        if let Some(b) = body {
            req = req.json(&b);
        }
        // A GET is sent again once when the connection fails under it (the server closed a
        // kept-alive connection as the request left); anything else fails the test, named.
        let retry = req.try_clone().filter(|_| method == reqwest::Method::GET);
        let resp = match (req.send().await, retry) {
            (Ok(r), _) => r,
            (Err(e), Some(again)) => {
                eprintln!("{method} {url}: {e}; sent again");
                again
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{method} {url}: {e}"))
            }
            (Err(e), None) => panic!("{method} {url}: {e}"),
        };
        let status = resp.status();
        let text = resp
            .text()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: reading the body: {e}"));
        assert!(status.is_success(), "{method} {url}: {status} {text}");
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        }
    }

    async fn get(&self, url: String) -> Value {
        self.send(reqwest::Method::GET, url, None).await
    }

    async fn provider(&self, host: &str) -> String {
        let v = self
            .get(format!("{}/resource_providers?name={host}", self.placement))
            .await;
        v["resource_providers"][0]["uuid"]
            .as_str()
            .unwrap_or_else(|| panic!("no resource provider named {host}: {v}"))
            .to_owned()
    }

    /// `int((total - reserved) * allocation_ratio) - used` per class, from the provider's
    /// inventories and usages.
    async fn free(&self, host: &str) -> Resources {
        let uuid = self.provider(host).await;
        let base = format!("{}/resource_providers/{uuid}", self.placement);
        let inv = self.get(format!("{base}/inventories")).await;
        let used = self.get(format!("{base}/usages")).await;
        let class = |c: &str| -> u64 {
            let i = &inv["inventories"][c];
            let cap = ((i["total"].as_f64().unwrap() - i["reserved"].as_f64().unwrap())
                * i["allocation_ratio"].as_f64().unwrap())
            .trunc();
            (cap - used["usages"][c].as_f64().unwrap_or(0.0)).max(0.0) as u64
        };
        Resources::new(class("VCPU"), class("MEMORY_MB"), class("DISK_GB"))
    }

    async fn free_all(&self, hosts: &[HostId]) -> BTreeMap<HostId, Resources> {
        let mut out = BTreeMap::new();
        for h in hosts {
            out.insert(h.clone(), self.free(h.as_str()).await);
        }
        out
    }
}

fn hosts_of(zones: &[ComputeZone]) -> BTreeMap<HostId, Option<Resources>> {
    zones
        .iter()
        .flat_map(|z| z.hosts.iter().flatten())
        .map(|h| (h.name.clone(), h.free))
        .collect()
}

/// Lists the zones until Placement holds still around the listing (other tests share the
/// cloud), then checks that every host's free capacity is what `raw` computes; returns it.
async fn catalogue_matches_placement(
    cloud: &OpenStack,
    raw: &Raw,
    when: &str,
) -> BTreeMap<HostId, Resources> {
    for attempt in 1..=10 {
        let before = cloud.request_counts();
        let listing = cloud.nova().list_zones_with_capacity().await.unwrap();
        let after = cloud.request_counts();
        let hosts = hosts_of(&listing.zones);
        let names: Vec<HostId> = hosts.keys().cloned().collect();
        let raw_after = raw.free_all(&names).await;
        let raw_again = raw.free_all(&names).await;
        if raw_after != raw_again {
            eprintln!("{when}: Placement changed while being read (attempt {attempt}), again");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let got: BTreeMap<HostId, Resources> = hosts
            .iter()
            .map(|(h, f)| {
                (
                    h.clone(),
                    f.unwrap_or_else(|| {
                        panic!(
                            "{when}: host {h} has no free capacity: {:?}",
                            listing.capacity
                        )
                    }),
                )
            })
            .collect();
        if got != raw_after {
            eprintln!(
                "{when}: catalogue {got:?} != Placement {raw_after:?} (attempt {attempt}), again"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        assert!(listing.capacity.is_complete(), "{:?}", listing.capacity);
        let calls: BTreeMap<&String, u64> = after
            .iter()
            .map(|(k, v)| (k, v - before.get(k).copied().unwrap_or(0)))
            .filter(|(k, n)| *n > 0 && !k.starts_with("keystone "))
            .collect();
        eprintln!(
            "{when}: catalogue == Placement for {} hosts; requests of the listing: {calls:?}",
            got.len()
        );
        let want: BTreeMap<String, u64> = [
            "nova GET os-availability-zone/detail",
            "placement GET resource_providers",
            "placement GET allocation_candidates",
        ]
        .into_iter()
        .map(|k| (k.to_owned(), 1))
        .collect();
        let calls: BTreeMap<String, u64> = calls.into_iter().map(|(k, v)| (k.clone(), v)).collect();
        assert_eq!(calls, want, "{when}: the listing's requests");
        return got;
    }
    panic!("{when}: the catalogue never matched Placement in 10 attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_capacity_is_placements_with_admin_credentials() {
    if !enabled() {
        return;
    }
    let cloud = OpenStack::from_env().expect("OS_* configuration");
    let raw = Raw::admin().await;
    let idle = catalogue_matches_placement(&cloud, &raw, "before").await;
    eprintln!("free per host: {idle:?}");

    // a server in the second zone (the conformance suite boots in the first)
    let zones = env_or("VNFM_OS_TEST_ZONES", "nova");
    let zone = zones.split_whitespace().nth(1).unwrap_or("nova").to_owned();
    let flavor_name = env_or("VNFM_OS_TEST_FLAVOR", "m1.tiny");
    let flavors = raw.get(format!("{}/flavors/detail", raw.nova)).await;
    let flavor = flavors["flavors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == flavor_name.as_str())
        .unwrap()
        .clone();
    let images = raw
        .get(format!(
            "{}/images?name={}",
            raw.nova.replace(":8774/v2.1", ":9292/v2"),
            env_or("VNFM_OS_TEST_IMAGE", "tiny")
        ))
        .await;
    let name = format!("vnfm-rt-capacity-{}", chrono::Utc::now().timestamp());
    let created = raw
        .send(
            reqwest::Method::POST,
            format!("{}/servers", raw.nova),
            Some(
                json!({"server": {"name": name, "imageRef": images["images"][0]["id"],
                "flavorRef": flavor["id"], "availability_zone": zone, "networks": "none"}}),
            ),
        )
        .await;
    let id = created["server"]["id"].as_str().unwrap().to_owned();
    let server_url = format!("{}/servers/{id}", raw.nova);

    let raw = Arc::new(raw);
    let during = {
        let (raw, cloud, id, server_url) =
            (raw.clone(), cloud.clone(), id.clone(), server_url.clone());
        async move {
            let mut host = None;
            for _ in 0..240 {
                let s = raw.get(server_url.clone()).await;
                match s["server"]["status"].as_str() {
                    Some("ACTIVE") => {
                        host = s["server"]["OS-EXT-SRV-ATTR:host"]
                            .as_str()
                            .map(str::to_owned);
                        break;
                    }
                    Some("ERROR") => panic!("server {id} went to ERROR: {s}"),
                    _ => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
            let host = host.unwrap_or_else(|| panic!("server {id} not ACTIVE in 2 minutes"));
            // the server's allocation is on its host's provider, of the flavor's amounts
            let rp = raw.provider(&host).await;
            let alloc = raw.get(format!("{}/allocations/{id}", raw.placement)).await;
            let res = &alloc["allocations"][&rp]["resources"];
            assert_eq!(
                (
                    res["VCPU"].as_u64(),
                    res["MEMORY_MB"].as_u64(),
                    res["DISK_GB"].as_u64()
                ),
                (
                    flavor["vcpus"].as_u64(),
                    flavor["ram"].as_u64(),
                    flavor["disk"].as_u64()
                ),
                "allocation of server {id}: {alloc}"
            );
            let running = catalogue_matches_placement(&cloud, &raw, "with a server").await;
            eprintln!(
                "server {id} on {host}: free {:?} -> {:?}",
                idle.get(&HostId::new(host.as_str())),
                running.get(&HostId::new(host.as_str()))
            );
        }
    };
    // run the checks, then delete the server whatever happened
    let outcome = tokio::spawn(during).await;
    let _ = raw
        .http
        .delete(&server_url)
        .header("X-Auth-Token", &raw.token)
        .send()
        .await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    for _ in 0..120 {
        let r = raw
            .http
            .get(format!("{}/allocations/{id}", raw.placement))
            .header("X-Auth-Token", &raw.token)
            .header("OpenStack-API-Version", "placement 1.29")
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        if v["allocations"].as_object().is_some_and(|a| a.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    catalogue_matches_placement(&cloud, &raw, "after the server was deleted").await;
}

/// The configuration of the non-admin user of `scripts/openstack-dev.sh`.
fn member_config() -> Option<CloudConfig> {
    let mut vars: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("OS_") && k != "OS_PROJECT_ID" && k != "OS_CLOUD")
        .collect();
    for (os, member) in [
        ("OS_USERNAME", "VNFM_OS_MEMBER_USERNAME"),
        ("OS_PASSWORD", "VNFM_OS_MEMBER_PASSWORD"),
        ("OS_PROJECT_NAME", "VNFM_OS_MEMBER_PROJECT"),
    ] {
        vars.insert(os.to_owned(), std::env::var(member).ok()?);
    }
    Some(CloudConfig::from_env_vars(&vars).expect("member configuration"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_capacity_is_unknown_to_a_member_and_says_why() {
    if !enabled() {
        return;
    }
    let Some(config) = member_config() else {
        panic!(
            "VNFM_OS_MEMBER_USERNAME / _PASSWORD / _PROJECT are not set \
             (eval \"$(scripts/openstack-dev.sh env)\" prints them)"
        );
    };
    let member = OpenStack::new(config).unwrap();
    let listing = member.nova().list_zones_with_capacity().await.unwrap();
    // Nova lets the member read os-availability-zone/detail (the policy.yaml that
    // scripts/openstack-dev.sh writes, as vnfm's warning asks operators to): hosts listed,
    // but Placement refuses the member, so none has its free capacity.
    let hosts = hosts_of(&listing.zones);
    assert!(
        !hosts.is_empty(),
        "the member sees zones without hosts: is the Nova policy.yaml of \
         scripts/openstack-dev.sh in place? {:?}",
        listing.zones
    );
    assert!(hosts.values().all(Option::is_none), "{hosts:?}");
    let n = listing.capacity.unknown.clone().unwrap();
    assert_eq!(n.reason, CapacityUnknown::Forbidden, "{n}");
    assert!(
        n.message
            .contains("HTTP 403: Access was denied to this resource. Policy does not allow placement:resource_providers:list to be performed."),
        "{n}"
    );
    eprintln!("member listing ({} hosts): {n}", hosts.len());
    let report = member
        .capacity_report()
        .expect("the listing's capacity report");
    assert_eq!(
        report.unknown.as_ref().map(|n| n.reason),
        Some(CapacityUnknown::Forbidden),
        "{report:?}"
    );
    assert!(report.known.is_empty(), "{report:?}");
    assert!(
        member.warnings().iter().any(|w| w.contains("HTTP 403")),
        "{:?}",
        member.warnings()
    );
    let mut zones = listing.zones.clone();
    let before = member.request_count();
    member.nova().fill_free_capacity(&mut zones).await;
    assert_eq!(
        member.request_count(),
        before,
        "a refusal is not asked again"
    );

    // the member creates and deletes servers through Heat; its zone listing stays the same
    let zones_env = env_or("VNFM_OS_TEST_ZONES", "nova");
    let zone_names: Vec<&str> = zones_env.split_whitespace().collect();
    let stamp = chrono::Utc::now().timestamp() % 1_000_000;
    let fx = Fixture::new(
        zone_names[zone_names.len().min(3) - 1],
        env_or("VNFM_OS_TEST_FLAVOR", "m1.tiny"),
        env_or("VNFM_OS_TEST_HUGE_FLAVOR", "vnfm.huge"),
        env_or("VNFM_OS_TEST_IMAGE", "tiny"),
    )
    .with_name_prefix(format!("vnfm-rt-member-{stamp}"))
    .with_capabilities(
        Capabilities::openstack_admin()
            .with_free_capacity(false)
            .with_hosts(false),
    )
    .with_polling(Polling::new(240, Duration::from_millis(500)))
    .with_clock(Arc::new(TokioClock));
    let (heat, nova) = (member.heat(), member.nova());
    stack::create_complete(&heat, &fx).await.unwrap();
    zone::free_capacity_follows_servers(&heat, &nova, &fx)
        .await
        .unwrap();
}

/// A local granter over `cloud`'s zone catalogue (default configuration: capacity-aware).
fn granter_of(cloud: &OpenStack) -> vnfm_core::lifecycle::Lifecycle {
    let drivers = vnfm_core::lifecycle::Drivers {
        stacks: Arc::new(cloud.heat()),
        zones: Arc::new(cloud.nova()),
        compute: Arc::new(cloud.nova()),
        store: Arc::new(vnfm_core::store::MemoryStore::new()),
        clock: Arc::new(TokioClock),
        cluster: None,
    };
    let mut c = vnfm_core::lifecycle::LcmConfig::standard().unwrap();
    c.vim_connection_id = "vim-openstack".into();
    vnfm_core::lifecycle::Lifecycle::new(drivers, c)
}

/// The grant of an instantiation of `examples/packages/os-vnf` (flavour `anti`) by the local
/// granter over `cloud`'s catalogue: its `additionalParams.zoneSelection`.
async fn zone_selection_of_a_grant(cloud: &OpenStack) -> Value {
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/os-vnf");
    let pkg = vnfm_core::package::fs::load(&dir).expect("examples/packages/os-vnf");
    let lcm = granter_of(cloud);
    let inst = lcm
        .create(
            &pkg,
            &vnfm_core::lcm::CreateVnfRequest::new(pkg.descriptor_id.clone()),
        )
        .await
        .unwrap();
    let (_, grant) = lcm
        .grant_only(
            &pkg,
            &inst,
            vnfm_core::lifecycle::GrantOnly::Instantiate {
                flavour_id: "anti".into(),
            },
        )
        .await
        .unwrap()
        .unwrap_or_else(|(_, kind, detail)| panic!("grant refused: {kind:?}: {detail}"));
    let g = serde_json::to_value(&grant).unwrap();
    eprintln!("grant zones: {}", g["zones"]);
    g["additionalParams"]["zoneSelection"].clone()
}

/// The local granter is capacity-aware by default: with the admin's catalogue (free capacity
/// from Placement) it says so; with the member's (hosts listed, Placement's 403) it falls back
/// to random and the grant says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granter_falls_back_to_random_for_a_member_and_says_so() {
    if !enabled() {
        return;
    }
    let Some(config) = member_config() else {
        panic!(
            "VNFM_OS_MEMBER_USERNAME / _PASSWORD / _PROJECT are not set \
             (eval \"$(scripts/openstack-dev.sh env)\" prints them)"
        );
    };
    let member = OpenStack::new(config).unwrap();
    let sel = zone_selection_of_a_grant(&member).await;
    eprintln!("member's grant: zoneSelection {sel}");
    assert_eq!(sel["policy"], "random", "{sel}");
    assert_eq!(sel["configured"], "capacity-aware", "{sel}");
    let reason = sel["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("capacity unknown"), "{sel}");
    assert!(
        member
            .capacity_report()
            .and_then(|r| r.unknown)
            .map(|n| n.reason)
            == Some(CapacityUnknown::Forbidden),
        "{:?}",
        member.capacity_report()
    );

    let admin = OpenStack::from_env().unwrap();
    let sel = zone_selection_of_a_grant(&admin).await;
    eprintln!("admin's grant: zoneSelection {sel}");
    assert_eq!(sel["policy"], "capacity-aware", "{sel}");
    assert!(sel.get("reason").is_none(), "{sel}");
    assert!(
        admin.capacity_report().is_some_and(|r| r.is_complete()),
        "{:?}",
        admin.capacity_report()
    );
}
