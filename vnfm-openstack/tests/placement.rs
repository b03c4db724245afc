//! The free capacity of hosts from Placement, against a loopback server replaying what the
//! real Placement 16.0.0 and Nova 34.0.0 of `scripts/openstack-dev.sh` answered
//! (`tests/fixtures/placement-16.0.0/`, captured by `scripts/capture-openstack.sh placement`;
//! its README says how). Variants a test derives from a capture say so where they are made.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mock;

use std::path::PathBuf;

use serde_json::{json, Value};
use vnfm_core::driver::{ListZones, ZoneCatalog};
use vnfm_core::id::HostId;
use vnfm_core::zone::{ComputeZone, Resources};
use vnfm_openstack::{CapacityUnknown, CloudConfig, OpenStack, RetryPolicy};

use mock::{Mock, Reply};

const PROJECT: &str = "5936c643b4934faf9bac403a05af6a50";

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/placement-16.0.0")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn fixture_json(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap()
}

/// A token whose catalog has Nova at `/nova/v2.1` and, with `placement`, Placement at
/// `/placement` of the mock.
fn auth_reply(mock: &Mock, placement: bool) -> Reply {
    let ep = |url: String| json!([{"id": "e", "interface": "public", "region_id": "RegionOne", "url": url}]);
    let mut catalog = vec![json!({"type": "compute", "name": "nova",
                                  "endpoints": ep(format!("{}/nova/v2.1", mock.url))})];
    if placement {
        catalog.push(json!({"type": "placement", "name": "placement",
                            "endpoints": ep(format!("{}/placement", mock.url))}));
    }
    let expires = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let body = json!({"token": {"expires_at": expires, "project": {"id": PROJECT},
                      "user": {"id": "u1"}, "catalog": catalog}});
    Reply::json(201, body.to_string()).with_header("X-Subject-Token", "tok-1")
}

/// Without retries of transient failures: each test queues exactly the replies it expects
/// (the retries have their own test in loopback.rs).
fn open(mock: &Mock, placement: bool) -> OpenStack {
    mock.push(auth_reply(mock, placement));
    OpenStack::new(
        CloudConfig::password(
            format!("{}/identity/v3", mock.url),
            "admin",
            "pw",
            "admin",
            "Default",
        )
        .with_retry(RetryPolicy::none()),
    )
    .unwrap()
}

fn ok(name: &str) -> Reply {
    Reply::json(200, fixture(name))
}

fn free_of(zones: &[ComputeZone]) -> Vec<(String, Option<Resources>)> {
    zones
        .iter()
        .flat_map(|z| z.hosts.iter().flatten())
        .map(|h| (h.name.to_string(), h.free))
        .collect()
}

/// Placement's capacity formula written out here, apart from the adapter's code:
/// `int((total - reserved) * allocation_ratio) - used` per class.
fn expected_free(host: &str) -> Resources {
    let inv = fixture_json(&format!("placement-inventories-{host}.json"));
    let used = fixture_json(&format!("placement-usages-{host}.json"));
    let class = |c: &str| {
        let i = &inv["inventories"][c];
        let cap = ((i["total"].as_f64().unwrap() - i["reserved"].as_f64().unwrap())
            * i["allocation_ratio"].as_f64().unwrap())
        .trunc();
        (cap - used["usages"][c].as_f64().unwrap()) as u64
    };
    Resources::new(class("VCPU"), class("MEMORY_MB"), class("DISK_GB"))
}

fn uuid_of(name: &str) -> String {
    let rps = fixture_json("placement-resource-providers.json");
    rps["resource_providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn admin_listing_reports_the_free_capacity_placement_computes() {
    let mock = Mock::start();
    let cloud = open(&mock, true);
    mock.push(ok("nova-availability-zone-detail.json"));
    mock.push(ok("placement-resource-providers.json"));
    mock.push(ok("placement-allocation-candidates.json"));
    let listing = cloud.nova().list_zones_with_capacity().await.unwrap();

    // the capture: one m1.tiny (1 VCPU, 512 MB, 1 GB) on c1; VCPU total 1000 at ratio 4.0;
    // 512 MB reserved on c1/c2, all but 1000 MB reserved on the small hosts c3/c4
    let want = [
        ("c1", Resources::new(3999, 798_976, 599_999)),
        ("c2", Resources::new(4000, 799_488, 600_000)),
        ("c3", Resources::new(4000, 1000, 600_000)),
        ("c4", Resources::new(4000, 1000, 600_000)),
    ];
    for (h, r) in want {
        assert_eq!(
            expected_free(h),
            r,
            "{h}: the formula over the captured inventories"
        );
    }
    assert_eq!(
        free_of(&listing.zones),
        want.iter()
            .map(|(h, r)| ((*h).to_owned(), Some(*r)))
            .collect::<Vec<_>>()
    );
    assert!(listing.capacity.is_complete(), "{:?}", listing.capacity);
    let known: Vec<&str> = listing.capacity.known.iter().map(HostId::as_str).collect();
    assert_eq!(known, ["c1", "c2", "c3", "c4"]);
    assert_eq!(cloud.capacity_report(), Some(listing.capacity.clone()));
    assert!(cloud.warnings().is_empty(), "{:?}", cloud.warnings());

    let reqs = mock.requests();
    let targets: Vec<&str> = reqs.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(
        targets,
        [
            "/identity/v3/auth/tokens",
            "/nova/v2.1/os-availability-zone/detail",
            "/placement/resource_providers",
            "/placement/allocation_candidates?resources=VCPU%3A1",
        ]
    );
    for r in &reqs[2..] {
        assert_eq!(r.header("openstack-api-version"), Some("placement 1.29"));
        assert_eq!(r.header("x-auth-token"), Some("tok-1"));
        assert_eq!(r.header("x-openstack-nova-api-version"), None);
    }
    let counts = cloud.request_counts();
    assert_eq!(counts.get("placement GET resource_providers"), Some(&1));
    assert_eq!(counts.get("placement GET allocation_candidates"), Some(&1));

    // the trait's listing is the same listing
    mock.push(ok("nova-availability-zone-detail.json"));
    mock.push(ok("placement-resource-providers.json"));
    mock.push(ok("placement-allocation-candidates.json"));
    let zones = cloud.nova().list_zones(ListZones::default()).await.unwrap();
    assert_eq!(zones, listing.zones);
    let az1 = zones.iter().find(|z| z.name.as_str() == "az1").unwrap();
    assert_eq!(az1.free(), Some(Resources::new(3999, 798_976, 599_999)));
}

#[tokio::test]
async fn a_tree_missing_from_the_candidates_is_read_provider_by_provider() {
    let mock = Mock::start();
    let cloud = open(&mock, true);
    let c4 = uuid_of("c4");
    // derived: c4 left out of the candidates, as Placement does for a provider with no VCPU
    // left or when `max_allocation_candidates` cuts the answer
    let mut ac = fixture_json("placement-allocation-candidates.json");
    ac["provider_summaries"]
        .as_object_mut()
        .unwrap()
        .remove(&c4);
    // derived: c4's captured inventories with a reserve and fractional allocation ratios, so
    // that Placement's int() truncation shows: (1000 - 3) * 1.5 = 1495.5 -> 1495,
    // (800000 - 799000) * 1.25 = 1250, (600000 - 7) * 0.5 = 299996.5 -> 299996
    let mut inv = fixture_json("placement-inventories-c4.json");
    inv["inventories"]["VCPU"]["reserved"] = json!(3);
    inv["inventories"]["VCPU"]["allocation_ratio"] = json!(1.5);
    inv["inventories"]["MEMORY_MB"]["allocation_ratio"] = json!(1.25);
    inv["inventories"]["DISK_GB"]["reserved"] = json!(7);
    inv["inventories"]["DISK_GB"]["allocation_ratio"] = json!(0.5);
    // derived: some usage on c4
    let mut usages = fixture_json("placement-usages-c4.json");
    usages["usages"] = json!({"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 2});

    mock.push(ok("nova-availability-zone-detail.json"));
    mock.push(ok("placement-resource-providers.json"));
    mock.push(Reply::json(200, ac.to_string()));
    mock.push(Reply::json(200, inv.to_string()));
    mock.push(Reply::json(200, usages.to_string()));
    let listing = cloud.nova().list_zones_with_capacity().await.unwrap();
    let free = free_of(&listing.zones);
    assert_eq!(
        free[3],
        ("c4".into(), Some(Resources::new(1493, 226, 299_994)))
    );
    assert_eq!(free[0].1, Some(expected_free("c1")));
    assert!(listing.capacity.is_complete());

    let reqs = mock.requests();
    assert_eq!(
        reqs[4].path(),
        format!("/placement/resource_providers/{c4}/inventories")
    );
    assert_eq!(
        reqs[5].path(),
        format!("/placement/resource_providers/{c4}/usages")
    );
    assert_eq!(mock.pending(), 0);
    let counts = cloud.request_counts();
    assert_eq!(
        counts.get("placement GET resource_providers/{id}/inventories"),
        Some(&1)
    );
}

#[tokio::test]
async fn a_host_without_a_provider_of_its_name_is_found_through_os_hypervisors() {
    let mock = Mock::start();
    let cloud = open(&mock, true);
    // derived: c2's provider named as libvirt often names it (the node's FQDN), and a host c9
    // in az2 that has no compute node
    let mut rps = fixture_json("placement-resource-providers.json");
    for p in rps["resource_providers"].as_array_mut().unwrap() {
        if p["name"] == "c2" {
            p["name"] = json!("c2.example.org");
        }
    }
    let mut detail = fixture_json("nova-availability-zone-detail.json");
    for z in detail["availabilityZoneInfo"].as_array_mut().unwrap() {
        if z["zoneName"] == "az2" {
            let c2 = z["hosts"]["c2"].clone();
            z["hosts"]["c9"] = c2;
        }
    }
    mock.push(Reply::json(200, detail.to_string()));
    mock.push(Reply::json(200, rps.to_string()));
    mock.push(ok("nova-hypervisors-detail.json"));
    mock.push(ok("placement-allocation-candidates.json"));
    let listing = cloud.nova().list_zones_with_capacity().await.unwrap();
    let free = free_of(&listing.zones);
    assert_eq!(
        free[1..3],
        [
            ("c2".to_owned(), Some(expected_free("c2"))),
            ("c9".to_owned(), None)
        ]
    );
    let r = &listing.capacity;
    assert_eq!(r.unknown, None);
    assert_eq!(r.hosts.len(), 1, "{r:?}");
    let n = &r.hosts[&HostId::new("c9")];
    assert_eq!(n.reason, CapacityUnknown::NoProvider);
    assert!(
        n.message
            .contains("no Placement resource provider is named c9"),
        "{n}"
    );
    let w = cloud.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("host c9"), "{w:?}");
    let reqs = mock.requests();
    assert_eq!(reqs[3].path(), "/nova/v2.1/os-hypervisors/detail");
    assert_eq!(reqs[3].header("x-openstack-nova-api-version"), Some("2.79"));
    // the az2 zone's free sums what is known only when every available host knows it
    let az2 = listing
        .zones
        .iter()
        .find(|z| z.name.as_str() == "az2")
        .unwrap();
    assert_eq!(az2.free(), None);
}

#[tokio::test]
async fn placement_refusing_a_member_leaves_capacity_unknown_with_the_reason() {
    let mock = Mock::start();
    let cloud = open(&mock, true);
    // a member allowed os-availability-zone/detail (a custom Nova policy) but not Placement
    mock.push(ok("nova-availability-zone-detail.json"));
    mock.push(Reply::json(
        403,
        fixture("member-placement-resource-providers-403.json"),
    ));
    let listing = cloud.nova().list_zones_with_capacity().await.unwrap();
    assert_eq!(listing.zones.len(), 4);
    assert!(listing
        .zones
        .iter()
        .all(|z| z.is_candidate() && z.free().is_none()));
    let n = listing.capacity.unknown.clone().unwrap();
    assert_eq!(n.reason, CapacityUnknown::Forbidden);
    assert!(
        n.message.contains("/placement/resource_providers: HTTP 403: Access was denied to this resource. Policy does not allow placement:resource_providers:list to be performed."),
        "{n}"
    );
    assert!(listing.capacity.known.is_empty());
    assert_eq!(
        listing.capacity.note_for(&HostId::new("c1")),
        Some(&n),
        "every host has the listing's reason"
    );
    let w = cloud.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("free capacity of hosts is unknown") && w[0].contains("HTTP 403"));

    // the refusal holds for this token: the next listing does not ask again
    mock.push(ok("nova-availability-zone-detail.json"));
    let again = cloud.nova().list_zones(ListZones::default()).await.unwrap();
    assert_eq!(again, listing.zones);
    assert_eq!(mock.requests().len(), 4);
    assert_eq!(cloud.capacity_report().unwrap().unknown, Some(n));
}

#[tokio::test]
async fn a_member_gets_zones_without_hosts_and_placement_is_not_asked() {
    let mock = Mock::start();
    let cloud = open(&mock, true);
    mock.push(Reply::json(
        403,
        fixture("member-nova-availability-zone-detail-403.json"),
    ));
    mock.push(ok("member-nova-availability-zone.json"));
    let listing = cloud.nova().list_zones_with_capacity().await.unwrap();
    assert_eq!(listing.zones.len(), 4);
    assert!(listing.zones.iter().all(|z| z.hosts.is_none()));
    let n = listing.capacity.unknown.unwrap();
    assert_eq!(n.reason, CapacityUnknown::NoHosts);
    assert!(n.message.contains("names no compute host"), "{n}");
    assert_eq!(mock.requests().len(), 3, "no request to Placement");
    // the only warning is Nova's about /detail
    let w = cloud.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("os-availability-zone/detail"), "{w:?}");
}

#[tokio::test]
async fn no_endpoint_failure_and_opt_out_never_fail_the_listing() {
    // no Placement in the catalog
    let mock = Mock::start();
    let cloud = open(&mock, false);
    mock.push(ok("nova-availability-zone-detail.json"));
    let listing = cloud.nova().list_zones_with_capacity().await.unwrap();
    let n = listing.capacity.unknown.unwrap();
    assert_eq!(n.reason, CapacityUnknown::NoEndpoint);
    assert!(
        n.message
            .contains("no public endpoint of service type \"placement\""),
        "{n}"
    );
    assert_eq!(mock.requests().len(), 2);

    // Placement down: a 503, then a body of the wrong shape
    let mock = Mock::start();
    let cloud = open(&mock, true);
    mock.push(ok("nova-availability-zone-detail.json"));
    mock.push(Reply::json(
        503,
        r#"{"errors": [{"status": 503, "title": "Service Unavailable", "detail": "down"}]}"#,
    ));
    mock.push(ok("nova-availability-zone-detail.json"));
    mock.push(Reply::json(200, r#"{"providers": []}"#));
    let listing = cloud.nova().list_zones_with_capacity().await.unwrap();
    let n = listing.capacity.unknown.unwrap();
    assert_eq!(n.reason, CapacityUnknown::Failed);
    assert!(n.message.contains("HTTP 503: down"), "{n}");
    let listing = cloud.nova().list_zones_with_capacity().await.unwrap();
    let n = listing.capacity.unknown.unwrap();
    assert_eq!(
        n.reason,
        CapacityUnknown::Failed,
        "a failure is asked again"
    );
    assert!(n.message.contains("`resource_providers` array"), "{n}");
    assert_eq!(listing.zones.len(), 4);

    // asked not to
    let mock = Mock::start();
    mock.push(auth_reply(&mock, true));
    let cloud = OpenStack::new(
        CloudConfig::password(
            format!("{}/identity/v3", mock.url),
            "admin",
            "pw",
            "admin",
            "Default",
        )
        .with_free_capacity(false),
    )
    .unwrap();
    mock.push(ok("nova-availability-zone-detail.json"));
    let listing = cloud.nova().list_zones_with_capacity().await.unwrap();
    assert_eq!(
        listing.capacity.unknown.map(|n| n.reason),
        Some(CapacityUnknown::Disabled)
    );
    assert_eq!(mock.requests().len(), 2);
    assert!(cloud.warnings().is_empty());
}
