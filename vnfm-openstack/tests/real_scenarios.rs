//! LCM scenarios of `vnfm_core::lifecycle::Lifecycle` over the OpenStack drivers, against real
//! Keystone, Nova and Heat: AZ reselection after Nova's real "No valid host was found", a
//! failure that is not a capacity error, scale-out and heal that reselect, a token revoked
//! in the middle of an operation, an AutoScalingGroup moved whole by reselection (the zones
//! blamed checked against Nova's failed servers), deletes that end once Heat reports the
//! stack gone, a deployment intent's HA server group enforced by Nova, and an instantiate
//! interrupted right after Heat accepted the create, then retried (and another rolled back)
//! while the stack is still in progress, and an instantiate cancelled while PROCESSING (its
//! stack held `CREATE_IN_PROGRESS` by an `OS::Heat::TestResource`), then rolled back, and an
//! instantiate granted by an NFVO into zones of its choosing. One of them pins the HTTP calls of
//! a reselection round.
//!
//! Runs only with `VNFM_TEST_OPENSTACK=1` and a cloud brought up with zones whose hosts cannot
//! hold an m1.small (`VNFM_OS_TEST_SMALL_ZONE`, and `VNFM_OS_TEST_SMALL_ZONES` naming two of
//! them for the AutoScalingGroup scenarios, besides two zones that can):
//!
//! ```text
//! eval "$(VNFM_OS_HOSTS="c1 c2 c3 c4" VNFM_OS_ZONES="az1:c1 az2:c2 az3:c3 az4:c4" \
//!         VNFM_OS_SMALL_HOSTS="c3 c4" scripts/openstack-dev.sh start)"
//! VNFM_TEST_OPENSTACK=1 cargo test -p vnfm-openstack --test real_scenarios -- --nocapture
//! ```
//!
//! `VNFM_TEST_ONLY=<part of a name>` runs only the matching scenarios.
//!
//! The package is `examples/packages/os-vnf`: VDU1 (m1.small, 2 GB) and VDU2 (m1.tiny), image
//! `tiny`, one deployment flavour per case (`anti`, `affine`, `free`, `noimage`, and `group`:
//! VDU1 as the members of an `OS::Heat::AutoScalingGroup`). Scenarios run one after the other
//! (they share the small zones and disable a compute service for a while), each is timed, and
//! the test fails at the end listing every scenario that failed. Every instance is terminated
//! (or its failed stack rolled back) before the next scenario.
//!
//! The change-flavour scenario uses `examples/packages/flavours-vnf` (flavours `small` and
//! `large`, same image and flavors), which also runs on that cloud; the change-external-
//! connectivity scenario a copy of it whose `small` has an external CP read into the server's
//! metadata (no Neutron needed).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{json, Value};
use vnfm_core::driver::{Clock, ListResources, ListZones, StackDriver, ZoneCatalog};
use vnfm_core::id::{OpOccId, ServerId, StackId, VnfInstanceId, ZoneId};
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, LcmOperationStateType, ScaleType,
    ScaleVnfRequest, TerminateVnfRequest, TerminationType, VnfInstance,
};
use vnfm_core::lifecycle::engine::STACK_ID_KEY;
use vnfm_core::lifecycle::{
    Drivers, FailureKind, Interrupt, LcmConfig, Lifecycle, OperationOptions, OperationReport,
};
use vnfm_core::package::VnfPackage;
use vnfm_core::reselect::AttemptOutcome;
use vnfm_core::store::MemoryStore;
use vnfm_openstack::OpenStack;

/// Real time.
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

type Res = Result<(), String>;
type Run<'a> = Pin<Box<dyn Future<Output = Res> + 'a>>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
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

/// What every scenario shares.
struct Fx {
    pkg: VnfPackage,
    /// A zone whose hosts cannot hold VDU1 (m1.small) but are up: still a candidate.
    small: ZoneId,
    /// Every such zone (`VNFM_OS_TEST_SMALL_ZONES`; `small` first).
    small_zones: Vec<ZoneId>,
    /// zone → hosts, from Nova.
    hosts: BTreeMap<ZoneId, BTreeSet<String>>,
}

impl Fx {
    /// The available zones that can hold an m1.small, in name order.
    fn big(&self) -> Vec<&ZoneId> {
        self.hosts
            .keys()
            .filter(|z| !self.small_zones.contains(z))
            .collect()
    }

    fn zone_of_host(&self, host: &str) -> Option<&ZoneId> {
        self.hosts
            .iter()
            .find(|(_, hs)| hs.contains(host))
            .map(|(z, _)| z)
    }
}

/// The id salt of this run (ids, and so stack names, differ from a previous run's).
fn salt() -> u64 {
    chrono::Utc::now().timestamp() as u64
}

fn lifecycle(cloud: &OpenStack, seed: u64) -> Lifecycle {
    let drivers = Drivers {
        stacks: Arc::new(cloud.heat()),
        zones: Arc::new(cloud.nova()),
        compute: Arc::new(cloud.nova()),
        store: Arc::new(MemoryStore::new()),
        clock: Arc::new(TokioClock),
        cluster: None,
    };
    let mut c = LcmConfig::standard().unwrap();
    c.reselect_zones = true;
    c.max_reselections = Some(3);
    c.seed = seed;
    c.vim_connection_id = "vim-openstack".into();
    c.poll_interval = Duration::from_millis(500);
    c.stack_timeout = Duration::from_secs(240);
    Lifecycle::new(drivers, c).with_id_salt(seed ^ salt())
}

fn pins(p: &[(&str, &ZoneId)]) -> OperationOptions {
    OperationOptions {
        pinned: p
            .iter()
            .map(|(k, z)| ((*k).to_owned(), (*z).clone()))
            .collect(),
        automatic: false,
        ..OperationOptions::default()
    }
}

async fn create(lcm: &Lifecycle, fx: &Fx, name: &str) -> Result<VnfInstance, String> {
    let mut req = CreateVnfRequest::new(fx.pkg.descriptor_id.clone());
    req.vnf_instance_name = Some(name.to_owned());
    lcm.create(&fx.pkg, &req).await.map_err(|e| chain(&e))
}

fn describe(r: &OperationReport) -> String {
    format!(
        "{:?} {:?} failure {:?} error {:?} attempts {}",
        r.op_occ.operation,
        r.op_occ.operation_state,
        r.failure,
        r.op_occ.error.as_ref().map(|e| e.detail.clone()),
        serde_json::to_string(&r.op_occ.attempts).unwrap_or_default()
    )
}

/// The detail of the occurrence's error (empty without one).
fn error_detail(r: &OperationReport) -> String {
    r.op_occ
        .error
        .as_ref()
        .map(|e| e.detail.clone())
        .unwrap_or_default()
}

/// Retries the occurrence `op` of `lcm`, which must then complete (`what` says after what).
async fn retry_completes(
    lcm: &Lifecycle,
    fx: &Fx,
    op: &OpOccId,
    what: &str,
) -> Result<OperationReport, String> {
    let done = lcm
        .retry(op, &fx.pkg, &OperationOptions::default())
        .await
        .map_err(|e| chain(&e))?;
    ensure!(done.is_completed(), "{what}: {}", describe(&done));
    Ok(done)
}

/// VNFC id → (server id, zone, host) as the instance records it.
fn vnfcs(inst: &VnfInstance) -> BTreeMap<String, (String, Option<ZoneId>, Option<String>)> {
    inst.instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_resource_info.iter())
        .map(|v| {
            let host = v
                .metadata
                .as_ref()
                .and_then(|m| m.get("host"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            (
                v.id.clone(),
                (v.compute_resource.resource_id.clone(), v.zone(), host),
            )
        })
        .collect()
}

/// Nova's server show of every VNFC: ACTIVE, in the recorded zone and on a host of that zone.
async fn check_servers(
    cloud: &OpenStack,
    fx: &Fx,
    inst: &VnfInstance,
) -> Result<BTreeMap<String, (ZoneId, String)>, String> {
    let mut out = BTreeMap::new();
    for (id, (server, zone, host)) in vnfcs(inst) {
        let s = cloud
            .nova()
            .show_server(&ServerId::from(server.as_str()))
            .await
            .map_err(|e| format!("server show {server} of {id}: {}", chain(&e)))?;
        ensure!(
            s.status == "ACTIVE",
            "{id}: server {server} is {}",
            s.status
        );
        let real_zone = s.zone.clone().ok_or(format!("{id}: Nova shows no zone"))?;
        let real_host = s
            .host
            .as_ref()
            .map(ToString::to_string)
            .ok_or(format!("{id}: Nova shows no host"))?;
        ensure!(
            zone.as_ref() == Some(&real_zone),
            "{id}: the instance records zone {zone:?}, Nova says {real_zone}"
        );
        ensure!(
            host.as_deref() == Some(real_host.as_str()),
            "{id}: the instance records host {host:?}, Nova says {real_host}"
        );
        ensure!(
            fx.zone_of_host(&real_host) == Some(&real_zone),
            "{id}: host {real_host} is not a host of zone {real_zone} ({:?})",
            fx.hosts
        );
        out.insert(id, (real_zone, real_host));
    }
    Ok(out)
}

/// The first attempt failed with Nova's real text, the last one succeeded, and the zones of
/// the failed attempt were excluded.
fn check_reselected(r: &OperationReport, small: &ZoneId) -> Res {
    let a = &r.op_occ.attempts;
    ensure!(a.len() >= 2, "expected a reselection, got {}", describe(r));
    let first = &a[0];
    ensure!(
        first.outcome == Some(AttemptOutcome::Failed),
        "first attempt: {first:?}"
    );
    let reason = first.status_reason.clone().unwrap_or_default();
    ensure!(
        reason.contains("No valid host was found"),
        "first attempt failed without Nova's \"No valid host was found\": {reason}"
    );
    ensure!(
        first.failed_zones.contains(small),
        "the failed attempt excluded {:?}, expected {small}",
        first.failed_zones
    );
    ensure!(
        a.last().and_then(|x| x.outcome) == Some(AttemptOutcome::Succeeded),
        "last attempt: {:?}",
        a.last()
    );
    Ok(())
}

async fn terminate(lcm: &Lifecycle, id: &VnfInstanceId) -> Res {
    let req = TerminateVnfRequest {
        termination_type: TerminationType::Forceful,
        graceful_termination_timeout: None,
        additional_params: None,
    };
    let r = lcm
        .terminate(id, &req, &OperationOptions::default())
        .await
        .map_err(|e| format!("terminate {id}: {}", chain(&e)))?;
    ensure!(r.is_completed(), "terminate {id}: {}", describe(&r));
    Ok(())
}

/// Terminates `id` when instantiated, else rolls its failed instantiation back (deleting the
/// stack it created), so no scenario leaves servers behind.
async fn clean(lcm: &Lifecycle, fx: &Fx, id: &VnfInstanceId) -> Res {
    let inst = lcm
        .drivers()
        .store
        .instance(id)
        .await
        .map_err(|e| chain(&e))?;
    if inst.is_instantiated() {
        return terminate(lcm, id).await;
    }
    let ops = lcm
        .drivers()
        .store
        .op_occs(vnfm_core::driver::OpOccFilter::instance(id.clone()))
        .await
        .map_err(|e| chain(&e))?;
    for op in ops
        .iter()
        .filter(|o| o.operation_state == LcmOperationStateType::FailedTemp)
    {
        let r = lcm
            .rollback(&op.id, &fx.pkg)
            .await
            .map_err(|e| format!("rollback {}: {}", op.id, chain(&e)))?;
        ensure!(
            r.op_occ.operation_state == LcmOperationStateType::RolledBack,
            "rollback of {}: {}",
            op.id,
            describe(&r)
        );
    }
    Ok(())
}

// ------------------------------------------------------------------------------ scenarios

/// An NFVO of the test's own (in process, no HTTP: the HTTP client has its tests in
/// vnfm-cli/tests/serve_grants.rs): it answers the grant request 202, then grants at the first
/// poll, the i-th VNFC of a VDU into the i-th zone listed for it.
#[derive(Debug)]
struct TestNfvo {
    zones: Vec<(String, ZoneId)>,
    request: std::sync::Mutex<Option<vnfm_core::grant::GrantRequest>>,
    polls: std::sync::atomic::AtomicU32,
}

#[async_trait]
impl vnfm_core::driver::GrantDriver for TestNfvo {
    async fn request_grant(
        &self,
        req: &vnfm_core::grant::GrantRequest,
    ) -> Result<vnfm_core::driver::GrantAnswer, vnfm_core::driver::DriverError> {
        *self.request.lock().unwrap() = Some(req.clone());
        Ok(vnfm_core::driver::GrantAnswer::Pending {
            location: "http://nfvo.test/grant/v1/grants/g-1".into(),
            retry_after: None,
        })
    }

    async fn poll_grant(
        &self,
        _location: &str,
    ) -> Result<vnfm_core::driver::GrantAnswer, vnfm_core::driver::DriverError> {
        self.polls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let req = self.request.lock().unwrap().clone().unwrap();
        let mut used: BTreeMap<String, usize> = BTreeMap::new();
        let (mut infos, mut add) = (Vec::new(), Vec::new());
        for r in &req.add_resources {
            let Some(vdu) = r.vdu_id.as_ref().map(|v| v.as_str().to_owned()) else {
                continue;
            };
            if !matches!(r.type_, vnfm_core::grant::ResourceType::Compute) {
                continue;
            }
            let i = used.entry(vdu.clone()).or_default();
            let Some((_, zone)) = self.zones.iter().filter(|(v, _)| *v == vdu).nth(*i) else {
                continue;
            };
            *i += 1;
            let zid = format!("zone-{}", infos.len());
            infos.push(json!({"id": zid, "zoneId": zone}));
            add.push(json!({"resourceDefinitionId": r.id, "zoneId": zid}));
        }
        let g = serde_json::from_value(json!({
            "id": "nfvo-grant-1",
            "vnfInstanceId": req.vnf_instance_id,
            "vnfLcmOpOccId": req.vnf_lcm_op_occ_id,
            "zones": infos,
            "addResources": add,
            "_links": {
                "self": {"href": "http://nfvo.test/grant/v1/grants/g-1"},
                "vnfLcmOpOcc": {"href": "/o"},
                "vnfInstance": {"href": "/i"}
            }
        }))
        .unwrap();
        Ok(vnfm_core::driver::GrantAnswer::Granted(Box::new(g)))
    }
}

/// Grants of an NFVO (`[grant] nfvo`, docs/grants.md) on real Nova and Heat: the occurrence
/// waits STARTING for the grant (202, then polled); the NFVO grants VDU1 into the small zone
/// and VDU2 into a big one. The stack's first attempt uses the NFVO's zones (Nova's real "No
/// valid host" for VDU1 in the small zone), reselection moves VDU1 only, VDU2 stays where the
/// NFVO put it, and the occurrence's grantId is the NFVO's.
async fn nfvo_grant_zones_are_used(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let big = fx.big();
    ensure!(!big.is_empty(), "no big zone: {:?}", fx.hosts);
    let nfvo = Arc::new(TestNfvo {
        zones: vec![
            ("VDU1".to_owned(), fx.small.clone()),
            ("VDU2".to_owned(), big[0].clone()),
        ],
        request: std::sync::Mutex::new(None),
        polls: std::sync::atomic::AtomicU32::new(0),
    });
    let lcm = lifecycle(&cloud, 41).with_grant_driver(
        nfvo.clone(),
        vnfm_core::lifecycle::NfvoGrants {
            poll_interval: Duration::from_millis(500),
            timeout: Duration::from_secs(30),
        },
    );
    let inst = create(&lcm, fx, "rs-nfvo").await?;
    let r = lcm
        .instantiate(
            &inst.id,
            &fx.pkg,
            &InstantiateVnfRequest::new("anti"),
            &OperationOptions::default(),
        )
        .await
        .map_err(|e| chain(&e))?;
    let outcome = async {
        ensure!(r.is_completed(), "instantiate: {}", describe(&r));
        ensure!(
            nfvo.polls.load(std::sync::atomic::Ordering::SeqCst) == 1,
            "the grant was polled once"
        );
        ensure!(
            r.op_occ.grant_id.as_ref().map(|g| g.as_str()) == Some("nfvo-grant-1"),
            "grantId {:?}",
            r.op_occ.grant_id
        );
        let first = &r.op_occ.attempts[0].zones;
        ensure!(
            first.values().any(|z| *z == fx.small) && first.values().any(|z| z == big[0]),
            "the first attempt did not use the NFVO's zones: {first:?}"
        );
        check_reselected(&r, &fx.small)?;
        let servers = check_servers(&cloud, fx, &r.instance).await?;
        let (z1, _) = &servers["VDU1-0"];
        let (z2, _) = &servers["VDU2-0"];
        ensure!(z2 == big[0], "VDU2 left the NFVO's zone {}: {z2}", big[0]);
        ensure!(*z1 != fx.small && z1 != z2, "VDU1 in {z1}, VDU2 in {z2}");
        Ok(())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// 1. Zone anti-affinity, VDU1 granted into the small zone: CREATE_FAILED with Nova's real
///    text, reselection, UPDATE_COMPLETE; both ACTIVE in different zones, VDU1 on a host of
///    its new zone. Also pins the HTTP calls of this reselection round.
async fn anti_affinity_reselects(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 11);
    let inst = create(&lcm, fx, "rs-anti").await?;
    let before = cloud.request_counts();
    ensure!(
        before.is_empty(),
        "requests before the operation: {before:?}"
    );
    let r = lcm
        .instantiate(
            &inst.id,
            &fx.pkg,
            &InstantiateVnfRequest::new("anti"),
            &pins(&[("VDU1", &fx.small)]),
        )
        .await
        .map_err(|e| chain(&e))?;
    let counts = cloud.request_counts();
    let outcome = async {
        ensure!(r.is_completed(), "instantiate: {}", describe(&r));
        check_reselected(&r, &fx.small)?;
        let servers = check_servers(&cloud, fx, &r.instance).await?;
        let (z1, _) = &servers["VDU1-0"];
        let (z2, _) = &servers["VDU2-0"];
        ensure!(z1 != z2, "anti-affinity broken: both in {z1}");
        ensure!(*z1 != fx.small, "VDU1 still in the small zone {z1}");
        // The pinned-to-fail zone was tried first: the first attempt names it for VDU1.
        ensure!(
            r.op_occ.attempts[0].zones.values().any(|z| *z == fx.small),
            "first attempt zones {:?}",
            r.op_occ.attempts[0].zones
        );
        check_call_counts(&counts, r.op_occ.attempts.len(), 2)
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// The calls of one instantiate with one reselection round: one authentication (one token
/// lifetime), one zone listing for the whole operation (Nova's, and Placement's providers and
/// allocation candidates for the hosts' free capacity), one stack create, one PATCH per
/// reselection, one server show per VNFC and one per failed server (the zone a failure is
/// blamed on is where Nova says the server was); only the stack polls depend on timing.
fn check_call_counts(counts: &BTreeMap<String, u64>, attempts: usize, vnfcs: u64) -> Res {
    eprintln!("    calls of the reselection round: {counts:?}");
    let get = |k: &str| counts.get(k).copied().unwrap_or(0);
    ensure!(
        get("keystone POST auth/tokens") == 1,
        "authentications: {counts:?}"
    );
    for route in [
        "nova GET os-availability-zone/detail",
        "placement GET resource_providers",
        "placement GET allocation_candidates",
    ] {
        ensure!(
            get(route) == 1,
            "zone listings (expected one {route} per operation): {counts:?}"
        );
    }
    ensure!(get("heat POST stacks") == 1, "stack creates: {counts:?}");
    ensure!(
        get("heat PATCH stacks/{id}/{id}") == attempts as u64 - 1,
        "stack updates (expected {} for {attempts} attempts): {counts:?}",
        attempts - 1
    );
    // One show per VNFC once the stack completes, and one per failed attempt that locates
    // the server that failed (its zone is taken from Nova's facts; in this scenario each
    // failed attempt has exactly one failed server, VDU1's).
    ensure!(
        get("nova GET servers/{id}") == vnfcs + attempts as u64 - 1,
        "server shows (expected one per VNFC and one per failed attempt): {counts:?}"
    );
    let polls = get("heat GET stacks/{id}/{id}");
    ensure!(polls >= attempts as u64, "stack polls: {counts:?}");
    // Nothing else than these routes and the resource listings that find the failed VDUs
    // and the servers: one per attempt, and one more per poll interval while a nested stack
    // of the failed stack is still in progress (the engine waits for it to settle before the
    // update), which every stack poll bounds too.
    let polls_allowed = attempts as u64 + polls;
    for (k, n) in counts {
        let known = [
            "keystone POST auth/tokens",
            "nova GET os-availability-zone/detail",
            "placement GET resource_providers",
            "placement GET allocation_candidates",
            "heat POST stacks",
            "heat PATCH stacks/{id}/{id}",
            "nova GET servers/{id}",
            "heat GET stacks/{id}/{id}",
        ];
        if known.contains(&k.as_str()) {
            continue;
        }
        ensure!(
            k.starts_with("heat GET stacks/{id}/{id}/resources") && *n <= polls_allowed,
            "unexpected or repeated call {k} x{n}: {counts:?}"
        );
    }
    Ok(())
}

/// 2. Zone affinity, both granted into the small zone: VDU1 fails there, reselection moves the
///    affinity group to one other zone.
async fn affinity_reselects_together(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 12);
    let inst = create(&lcm, fx, "rs-affine").await?;
    let r = lcm
        .instantiate(
            &inst.id,
            &fx.pkg,
            &InstantiateVnfRequest::new("affine"),
            &pins(&[("VDU1", &fx.small), ("VDU2", &fx.small)]),
        )
        .await
        .map_err(|e| chain(&e))?;
    let outcome = async {
        ensure!(r.is_completed(), "instantiate: {}", describe(&r));
        check_reselected(&r, &fx.small)?;
        let servers = check_servers(&cloud, fx, &r.instance).await?;
        let (z1, _) = &servers["VDU1-0"];
        let (z2, _) = &servers["VDU2-0"];
        ensure!(z1 == z2, "affinity broken: VDU1 in {z1}, VDU2 in {z2}");
        ensure!(*z1 != fx.small, "still in the failed zone {z1}");
        Ok(())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// 3. A missing image: not a capacity error, so no reselection; FAILED_TEMP with Heat's reason.
async fn missing_image_is_not_reselected(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 13);
    let inst = create(&lcm, fx, "rs-noimage").await?;
    let r = lcm
        .instantiate(
            &inst.id,
            &fx.pkg,
            &InstantiateVnfRequest::new("noimage"),
            &OperationOptions::default(),
        )
        .await
        .map_err(|e| chain(&e))?;
    let outcome = (|| {
        ensure!(
            r.op_occ.operation_state == LcmOperationStateType::FailedTemp,
            "expected FAILED_TEMP: {}",
            describe(&r)
        );
        ensure!(
            r.failure != Some(FailureKind::CapacityExhausted),
            "a missing image is not a capacity error: {}",
            describe(&r)
        );
        ensure!(
            r.op_occ.attempts.len() <= 1,
            "no reselection expected: {}",
            describe(&r)
        );
        let detail = error_detail(&r);
        ensure!(
            detail.contains("vnfm-no-such-image"),
            "the error should carry Heat's reason naming the image: {detail}"
        );
        eprintln!("    FAILED_TEMP: {detail}");
        Ok(())
    })();
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// 4. Scale-out of VDU1 granted into the small zone reselects; then a heal of VDU2 whose host
///    has its nova-compute disabled reselects; every other server keeps its id.
async fn scale_out_and_heal_reselect(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 14);
    let big = fx.big();
    ensure!(
        big.len() >= 2,
        "need two zones besides the small ones {:?}: {:?}",
        fx.small_zones,
        fx.hosts
    );
    let inst = create(&lcm, fx, "rs-scale-heal").await?;
    let outcome = async {
        let r = lcm
            .instantiate(
                &inst.id,
                &fx.pkg,
                &InstantiateVnfRequest::new("free"),
                &pins(&[("VDU1", big[0]), ("VDU2", big[1])]),
            )
            .await
            .map_err(|e| chain(&e))?;
        ensure!(r.is_completed(), "instantiate: {}", describe(&r));
        let before = vnfcs(&r.instance);

        let mut req = ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale");
        req.number_of_steps = Some(1);
        let r = lcm
            .scale(&inst.id, &fx.pkg, &req, &pins(&[("VDU1-1", &fx.small)]))
            .await
            .map_err(|e| chain(&e))?;
        ensure!(r.is_completed(), "scale out: {}", describe(&r));
        check_reselected(&r, &fx.small)?;
        let servers = check_servers(&cloud, fx, &r.instance).await?;
        let after = vnfcs(&r.instance);
        for (id, (server, ..)) in &before {
            ensure!(
                after.get(id).map(|a| &a.0) == Some(server),
                "{id} changed server on scale-out: {server} -> {:?}",
                after.get(id)
            );
        }
        let (z, _) = servers
            .get("VDU1-1")
            .ok_or(format!("no VDU1-1 after scale-out: {after:?}"))?;
        ensure!(*z != fx.small, "VDU1-1 in the small zone {z}");

        // Heal VDU2-0 after its host stops taking servers.
        let (vdu2_zone, vdu2_host) = servers["VDU2-0"].clone();
        let service = compute_service(&cloud, &vdu2_host).await?;
        set_service(&cloud, &service, "disabled").await?;
        let healed = lcm
            .heal(
                &inst.id,
                &fx.pkg,
                &HealVnfRequest {
                    vnfc_instance_id: vec!["VDU2-0".into()],
                    cause: Some("real-service test".into()),
                    additional_params: None,
                    heal_script: None,
                },
                &OperationOptions::default(),
            )
            .await;
        let enabled = set_service(&cloud, &service, "enabled").await;
        let r = healed.map_err(|e| chain(&e))?;
        enabled?;
        ensure!(r.is_completed(), "heal: {}", describe(&r));
        let a = &r.op_occ.attempts;
        ensure!(a.len() >= 2, "heal did not reselect: {}", describe(&r));
        // The zone's only host is disabled: Nova's API refuses the zone itself ("The requested
        // availability zone is not available", HTTP 400, what Nova 34 answers once it sees
        // the service disabled), or its scheduler finds no host ("No valid host was found").
        // Either is a zone failure that the default pattern reselects.
        let first = a[0].status_reason.as_deref().unwrap_or_default();
        ensure!(
            first.contains("The requested availability zone is not available")
                || first.contains("No valid host was found"),
            "heal's first attempt: {:?}",
            a[0]
        );
        ensure!(
            a[0].failed_zones.contains(&vdu2_zone),
            "heal's first attempt did not exclude {vdu2_zone}: {:?}",
            a[0]
        );
        let servers = check_servers(&cloud, fx, &r.instance).await?;
        let healed = vnfcs(&r.instance);
        for id in ["VDU1-0", "VDU1-1"] {
            ensure!(
                healed.get(id).map(|h| &h.0) == after.get(id).map(|a| &a.0),
                "{id} changed server on heal: {:?} -> {:?}",
                after.get(id),
                healed.get(id)
            );
        }
        ensure!(
            healed["VDU2-0"].0 != after["VDU2-0"].0,
            "VDU2-0 was not re-created"
        );
        ensure!(
            servers["VDU2-0"].0 != vdu2_zone,
            "VDU2-0 stayed in {vdu2_zone}"
        );
        Ok(())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// 5. The session's token is revoked after an instantiate, while the session still holds it:
///    the scale-out that follows gets 401 on its first request, the session authenticates
///    again and the operation completes. (Revoking it while Heat creates the stack fails the
///    stack itself: heat-engine validates the nested resources with the caller's token, so a
///    revocation in that window is Heat's failure, not the client's.)
async fn revoked_token_reauthenticates(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let admin = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 15);
    let big = fx.big();
    let inst = create(&lcm, fx, "rs-token").await?;
    let outcome = async {
        let r = lcm
            .instantiate(
                &inst.id,
                &fx.pkg,
                &InstantiateVnfRequest::new("free"),
                &pins(&[("VDU1", big[0]), ("VDU2", big[0])]),
            )
            .await
            .map_err(|e| chain(&e))?;
        ensure!(r.is_completed(), "instantiate: {}", describe(&r));
        ensure!(cloud.auth_count() == 1, "auths: {}", cloud.auth_count());
        let victim = cloud.current_token().await.map_err(|e| chain(&e))?;
        let token = admin.current_token().await.map_err(|e| chain(&e))?;
        let url = format!("{}/auth/tokens", admin.config().identity_url());
        let resp = reqwest::Client::new()
            .delete(&url)
            .header("X-Auth-Token", token.expose())
            .header("X-Subject-Token", victim.expose())
            .send()
            .await
            .map_err(|e| chain(&e))?;
        ensure!(
            resp.status().as_u16() == 204,
            "DELETE /v3/auth/tokens: HTTP {}",
            resp.status()
        );
        let mut req = ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale");
        req.number_of_steps = Some(1);
        let r = lcm
            .scale(&inst.id, &fx.pkg, &req, &pins(&[("VDU1-1", big[0])]))
            .await
            .map_err(|e| chain(&e))?;
        ensure!(
            r.is_completed(),
            "scale-out after revocation: {}",
            describe(&r)
        );
        ensure!(
            cloud.auth_count() == 2,
            "expected one re-authentication after the revocation, got {} authentications \
             ({:?})",
            cloud.auth_count(),
            cloud.request_counts()
        );
        check_servers(&cloud, fx, &r.instance).await?;
        Ok(())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// The zones Nova says a server failed in since `since`: every server changed since then
/// (`changes-since` lists deleted ones too, without their fault) whose `create` instance action
/// ended in `Error` (the scheduler's "No valid host" among its events), by its
/// `OS-EXT-AZ:availability_zone`. These are the facts a reselection may blame.
async fn failed_server_zones(
    cloud: &OpenStack,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<BTreeMap<ZoneId, Vec<String>>, String> {
    let since = (since - chrono::Duration::seconds(2)).format("%Y-%m-%dT%H:%M:%SZ");
    let v = nova_call(
        cloud,
        reqwest::Method::GET,
        &format!("servers/detail?all_tenants=1&changes-since={since}"),
        None,
    )
    .await?;
    let mut out: BTreeMap<ZoneId, Vec<String>> = BTreeMap::new();
    for srv in v["servers"].as_array().into_iter().flatten() {
        let id = srv["id"].as_str().unwrap_or_default();
        let actions = nova_call(
            cloud,
            reqwest::Method::GET,
            &format!("servers/{id}/os-instance-actions"),
            None,
        )
        .await?;
        let failed_create = actions["instanceActions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| a["action"] == "create" && a["message"] == "Error");
        if !failed_create {
            continue;
        }
        let zone = srv["OS-EXT-AZ:availability_zone"]
            .as_str()
            .unwrap_or_default();
        out.entry(ZoneId::from(zone)).or_default().push(format!(
            "{id} {} {} host {}",
            srv["name"].as_str().unwrap_or_default(),
            srv["status"].as_str().unwrap_or_default(),
            srv["OS-EXT-SRV-ATTR:host"].as_str().unwrap_or("-")
        ));
    }
    Ok(out)
}

/// Every attempt's `failedZones` names only zones where Nova shows a failed server since
/// `since`, and a failed attempt names at least one.
async fn check_failed_zones_are_facts(
    cloud: &OpenStack,
    r: &OperationReport,
    since: chrono::DateTime<chrono::Utc>,
) -> Res {
    let facts = failed_server_zones(cloud, since).await?;
    for (i, a) in r.op_occ.attempts.iter().enumerate() {
        for z in &a.failed_zones {
            ensure!(
                facts.contains_key(z),
                "attempt {i} blames zone {z}, where Nova shows no failed server since the \
                 operation started: {facts:?}; attempt {a:?}"
            );
        }
        ensure!(
            a.outcome != Some(AttemptOutcome::Failed) || !a.failed_zones.is_empty(),
            "failed attempt {i} blames no zone: {a:?}"
        );
    }
    eprintln!("    servers Nova shows failed, per zone: {facts:?}");
    Ok(())
}

/// The `group` flavour pinned so that only one zone can hold the workers' AutoScalingGroup:
/// the group into `start` (a small zone), VDU2 into a big zone that its zone anti-affinity
/// rule then forbids to the group; the other small zone is a candidate that fails too.
/// Returns the report and the zone that fits.
async fn instantiate_group(
    cloud: &OpenStack,
    lcm: &Lifecycle,
    fx: &Fx,
    id: &VnfInstanceId,
    start: &ZoneId,
) -> Result<(OperationReport, ZoneId), String> {
    let big = fx.big();
    ensure!(
        big.len() >= 2 && fx.small_zones.len() >= 2,
        "the group scenarios need two big and two small zones (VNFM_OS_TEST_SMALL_ZONES): \
         big {big:?}, small {:?}",
        fx.small_zones
    );
    let (fits, blocked) = (big[0].clone(), big[1]);
    let since = chrono::Utc::now();
    let r = lcm
        .instantiate(
            id,
            &fx.pkg,
            &InstantiateVnfRequest::new("group"),
            &pins(&[("VDU1", start), ("VDU2", blocked)]),
        )
        .await
        .map_err(|e| chain(&e))?;
    eprintln!("    instantiate: {}", describe(&r));
    ensure!(r.is_completed(), "instantiate: {}", describe(&r));
    let a = &r.op_occ.attempts;
    ensure!(
        a.first().and_then(|x| x.zones.get("VDU1_group")) == Some(start),
        "the first attempt should put the group VDU1_group in {start}: {a:?}"
    );
    let reason = a[0].status_reason.clone().unwrap_or_default();
    ensure!(
        reason.contains("No valid host was found"),
        "the first attempt failed without Nova's \"No valid host was found\": {reason}"
    );
    check_failed_zones_are_facts(cloud, &r, since).await?;
    // The update that moved the group into the zone that fits moved both members at once
    // (rolling_updates max_batch_size = members): no attempt in that zone failed.
    for (i, x) in a.iter().enumerate() {
        if x.zones.get("VDU1_group") == Some(&fits) {
            ensure!(
                x.outcome == Some(AttemptOutcome::Succeeded),
                "attempt {i} moved the group into {fits}, which fits, and did not succeed: {x:?}"
            );
        }
        ensure!(
            x.zones.get("VDU1_group") != Some(blocked),
            "attempt {i} put the group in {blocked}, against the anti-affinity rule: {x:?}"
        );
    }
    let servers = check_servers(cloud, fx, &r.instance).await?;
    let members: Vec<_> = servers
        .iter()
        .filter(|(k, _)| k.starts_with("VDU1-"))
        .collect();
    ensure!(
        members.len() == 2,
        "expected two members of VDU1_group: {servers:?}"
    );
    for (k, (z, h)) in &members {
        ensure!(*z == fits, "{k} is in {z} (host {h}), expected {fits}");
    }
    ensure!(
        servers.get("VDU2-0").map(|s| &s.0) == Some(blocked),
        "VDU2-0 should stay in {blocked}: {servers:?}"
    );
    Ok((r, fits))
}

/// 6. The workers' AutoScalingGroup (two m1.small members) granted into a small zone: real
///    Heat fails the stack with Nova's "No valid host", reselection moves the whole group into
///    the one zone that fits (the other big zone holds VDU2, which the anti-affinity rule
///    keeps apart; the other small zone fails too), both members ACTIVE there. Every attempt
///    blames only zones where Nova shows a failed server.
async fn asg_group_reselects(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 16);
    let inst = create(&lcm, fx, "rs-asg").await?;
    let outcome = instantiate_group(&cloud, &lcm, fx, &inst.id, &fx.small)
        .await
        .map(|_| ());
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// The seed of [`asg_group_via_other_small_zone`]: random reselection's first choice from
/// {the fitting zone, the other small zone} is the small one.
const ASG_SMALL_FIRST_SEED: u64 = 2;

/// 7. The same with `max_reselections` unset and a seed for which reselection first moves the
///    group into the other small zone: that update fails as well (both zones blamed from
///    Nova's facts), the next one completes in the zone that fits. Then a scale-out adds a
///    third member in the group's zone, keeping the two others.
async fn asg_group_via_other_small_zone(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    // VNFM_OS_TEST_ASG_SEED overrides the seed (to find another one if the choice changes)
    let seed = std::env::var("VNFM_OS_TEST_ASG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(ASG_SMALL_FIRST_SEED);
    let mut lcm = lifecycle(&cloud, seed);
    lcm = {
        let mut c = lcm.config().clone();
        c.max_reselections = None;
        Lifecycle::new(lcm.drivers().clone(), c).with_id_salt(seed ^ salt())
    };
    let inst = create(&lcm, fx, "rs-asg-small").await?;
    let outcome = async {
        let (r, fits) = instantiate_group(&cloud, &lcm, fx, &inst.id, &fx.small).await?;
        let other_small = &fx.small_zones[1];
        let a = &r.op_occ.attempts;
        ensure!(
            a.len() == 3
                && a[1].zones.get("VDU1_group") == Some(other_small)
                && a[1].failed_zones.contains(other_small),
            "expected the first reselection into {other_small} to fail (pick another seed for \
             ASG_SMALL_FIRST_SEED if random chose differently): {a:?}"
        );
        let before = vnfcs(&r.instance);
        let mut req = ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale");
        req.number_of_steps = Some(1);
        let r = lcm
            .scale(&inst.id, &fx.pkg, &req, &OperationOptions::default())
            .await
            .map_err(|e| chain(&e))?;
        ensure!(r.is_completed(), "scale out: {}", describe(&r));
        let servers = check_servers(&cloud, fx, &r.instance).await?;
        let after = vnfcs(&r.instance);
        for (id, (server, ..)) in &before {
            ensure!(
                after.get(id).map(|a| &a.0) == Some(server),
                "{id} changed server on scale-out: {server} -> {:?}",
                after.get(id)
            );
        }
        let members: Vec<_> = servers
            .iter()
            .filter(|(k, _)| k.starts_with("VDU1-"))
            .collect();
        ensure!(members.len() == 3, "expected three members: {servers:?}");
        for (k, (z, _)) in &members {
            ensure!(
                *z == fits,
                "{k} is in {z}, expected the group's zone {fits}"
            );
        }
        Ok(())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// Heat's view of `stack` right after an operation that deleted it: gone (404) or
/// DELETE_COMPLETE, and Nova has none of `servers`.
async fn check_stack_gone(cloud: &OpenStack, stack: &StackId, servers: &[String]) -> Res {
    match cloud.heat().show_stack(stack).await {
        Err(e) if e.is_not_found() => {}
        Ok(s) => ensure!(
            s.stack_status.to_string() == "DELETE_COMPLETE",
            "stack {stack} is {} right after the operation returned: {}",
            s.stack_status,
            s.stack_status_reason
        ),
        Err(e) => return Err(format!("stack show {stack}: {}", chain(&e))),
    }
    for id in servers {
        match cloud.nova().show_server(&ServerId::from(id.as_str())).await {
            Err(e) if e.is_not_found() => {}
            Ok(s) => ensure!(
                s.status == "DELETED",
                "server {id} of the deleted stack is still {}",
                s.status
            ),
            Err(e) => return Err(format!("server show {id}: {}", chain(&e))),
        }
    }
    Ok(())
}

fn stack_id_of(inst: &VnfInstance) -> Result<StackId, String> {
    inst.metadata
        .as_ref()
        .and_then(|m| m.get(STACK_ID_KEY))
        .and_then(Value::as_str)
        .map(StackId::from)
        .ok_or(format!("instance {} records no stack id", inst.id))
}

/// 8. Deletes are awaited: a terminate returns COMPLETED only once Heat reports the stack gone
///    and Nova has none of its servers; a failed instantiate (reselection off, VDU1 pinned into
///    the small zone) ends FAILED_TEMP, and its rollback returns ROLLED_BACK with the stack
///    gone. Prints how long each delete took.
async fn deletes_are_awaited(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 17);
    let big = fx.big();
    let inst = create(&lcm, fx, "rs-delete").await?;
    let outcome = async {
        let r = lcm
            .instantiate(
                &inst.id,
                &fx.pkg,
                &InstantiateVnfRequest::new("free"),
                &pins(&[("VDU1", big[0]), ("VDU2", big[0])]),
            )
            .await
            .map_err(|e| chain(&e))?;
        ensure!(r.is_completed(), "instantiate: {}", describe(&r));
        let stack = stack_id_of(&r.instance)?;
        let servers: Vec<String> = vnfcs(&r.instance).into_values().map(|v| v.0).collect();
        let polls_before = cloud.request_counts();
        let t = Instant::now();
        terminate(&lcm, &inst.id).await?;
        let secs = t.elapsed().as_secs_f64();
        let calls = diff_counts(&polls_before, &cloud.request_counts());
        check_stack_gone(&cloud, &stack, &servers).await?;
        eprintln!(
            "    terminate returned after {secs:.1}s, the stack gone (Heat's delete); calls: \
             {calls:?}"
        );
        Ok(())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    let first = outcome.and(cleaned);

    let mut c = lcm.config().clone();
    c.reselect_zones = false;
    let lcm = Lifecycle::new(lcm.drivers().clone(), c).with_id_salt(0xdead ^ salt());
    let inst = create(&lcm, fx, "rs-rollback").await?;
    let outcome = async {
        let r = lcm
            .instantiate(
                &inst.id,
                &fx.pkg,
                &InstantiateVnfRequest::new("free"),
                &pins(&[("VDU1", &fx.small), ("VDU2", big[0])]),
            )
            .await
            .map_err(|e| chain(&e))?;
        ensure!(
            r.op_occ.operation_state == LcmOperationStateType::FailedTemp,
            "expected FAILED_TEMP: {}",
            describe(&r)
        );
        let stored = lcm
            .drivers()
            .store
            .instance(&inst.id)
            .await
            .map_err(|e| chain(&e))?;
        let stack = stack_id_of(&stored)?;
        let servers: Vec<String> = cloud
            .heat()
            .list_resources(ListResources::new(stack.clone(), 3))
            .await
            .map_err(|e| chain(&e))?
            .into_iter()
            .filter(|x| x.resource_type == "OS::Nova::Server" && !x.physical_resource_id.is_empty())
            .map(|x| x.physical_resource_id)
            .collect();
        ensure!(
            !servers.is_empty(),
            "the failed stack {stack} has no server to delete"
        );
        let t = Instant::now();
        let rb = lcm
            .rollback(&r.op_occ.id, &fx.pkg)
            .await
            .map_err(|e| chain(&e))?;
        let secs = t.elapsed().as_secs_f64();
        ensure!(
            rb.op_occ.operation_state == LcmOperationStateType::RolledBack,
            "rollback: {}",
            describe(&rb)
        );
        check_stack_gone(&cloud, &stack, &servers).await?;
        eprintln!(
            "    rollback returned after {secs:.1}s, the failed stack and its {} servers gone",
            servers.len()
        );
        Ok(())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    let second = first.and(outcome).and(cleaned);

    let inst = create(&lcm, fx, "rs-lost-create").await?;
    let outcome = async {
        let mut drivers = lcm.drivers().clone();
        drivers.stacks = Arc::new(AfterCreate {
            heat: Arc::new(cloud.heat()),
            then: Box::new(|_| {}),
            lose_answer: true,
        });
        let lost = Lifecycle::new(drivers, lcm.config().clone()).with_id_salt(0x1057 ^ salt());
        let big = fx.big();
        let r = lost
            .instantiate(
                &inst.id,
                &fx.pkg,
                &InstantiateVnfRequest::new("free"),
                &pins(&[("VDU1", big[0]), ("VDU2", big[0])]),
            )
            .await
            .map_err(|e| chain(&e))?;
        ensure!(
            r.op_occ.operation_state == LcmOperationStateType::FailedTemp,
            "expected FAILED_TEMP after the lost answer: {}",
            describe(&r)
        );
        let done = retry_completes(&lcm, fx, &r.op_occ.id, "retry after a lost create").await?;
        check_servers(&cloud, fx, &done.instance).await?;
        Ok(())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    second.and(outcome).and(cleaned)
}

/// The calls made between two snapshots of the request counters.
fn diff_counts(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    b.iter()
        .filter_map(|(k, n)| {
            let d = n - a.get(k).copied().unwrap_or(0);
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

// ------------------------------------------------------------------------------ helpers

/// The id of the nova-compute service of `host`.
async fn compute_service(cloud: &OpenStack, host: &str) -> Result<String, String> {
    let v = nova_call(
        cloud,
        reqwest::Method::GET,
        &format!("os-services?binary=nova-compute&host={host}"),
        None,
    )
    .await?;
    v["services"][0]["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or(format!("no nova-compute service on {host}: {v}"))
}

/// `PUT /os-services/{id}` with `status` `enabled` or `disabled` (microversion 2.53).
async fn set_service(cloud: &OpenStack, id: &str, status: &str) -> Res {
    let mut body = json!({ "status": status });
    if status == "disabled" {
        body["disabled_reason"] = json!("vnfm real-service test");
    }
    nova_call(
        cloud,
        reqwest::Method::PUT,
        &format!("os-services/{id}"),
        Some(body),
    )
    .await
    .map(|_| ())
}

async fn nova_call(
    cloud: &OpenStack,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let base = cloud.endpoint("compute").await.map_err(|e| chain(&e))?;
    let token = cloud.current_token().await.map_err(|e| chain(&e))?;
    let mut req = reqwest::Client::new()
        .request(method.clone(), format!("{base}/{path}"))
        .header("X-Auth-Token", token.expose())
        .header("X-OpenStack-Nova-API-Version", "2.53")
        .header("Accept", "application/json");
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.map_err(|e| chain(&e))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| chain(&e))?;
    ensure!(
        status.is_success(),
        "{method} {path}: HTTP {status}: {text}"
    );
    serde_json::from_str(&text).map_err(|e| format!("{method} {path}: {e}: {text}"))
}

/// 9. A deployment intent's HA realised in the templates (`intent::deploy`): VDU1's servers join
///    an anti-affinity server group. A scale-out pinned to the zone (one host) of VDU1-0 fails
///    with Nova's real "No valid host was found" (the group is enforced: that host has room),
///    reselection moves VDU1-1 to another zone, and the two servers are on distinct hosts.
async fn ha_intent_server_group_is_enforced(fx: &Fx) -> Res {
    use vnfm_core::intent::deploy::realise_package;
    use vnfm_core::intent::realise::{Realisation, RealiseRequest, RegionFlavour, RegionOffer};
    use vnfm_core::intent::select::CandidateId;
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 19);
    let request = RealiseRequest {
        vdus: vec![Realisation::new("VDU1").with_ha().with_max_instances(2)],
        region: RegionOffer {
            hosts: u32::try_from(fx.hosts.values().map(BTreeSet::len).sum::<usize>())
                .unwrap_or(u32::MAX),
            flavours: vec![
                RegionFlavour::new("m1.small", 1, 2048, 20),
                RegionFlavour::new("m1.tiny", 1, 512, 1),
            ],
        },
        best_effort: false,
    };
    let region = CandidateId {
        owner: "real".into(),
        region: "RegionOne".into(),
    };
    let realised = realise_package(&fx.pkg, "free", region, request).map_err(|e| e.to_string())?;
    let pkg = realised.package;
    ensure!(
        realised
            .changes
            .iter()
            .any(|c| c.to_string().contains("added server group")),
        "changes: {:?}",
        realised.changes
    );
    let big = fx.big();
    ensure!(big.len() >= 2, "two zones that hold an m1.small: {big:?}");
    let mut req = CreateVnfRequest::new(pkg.descriptor_id.clone());
    req.vnf_instance_name = Some("rs-ha-intent".into());
    let inst = lcm.create(&pkg, &req).await.map_err(|e| chain(&e))?;
    let during = async {
        let r = lcm
            .instantiate(
                &inst.id,
                &pkg,
                &InstantiateVnfRequest::new("free"),
                &pins(&[("VDU1", big[0]), ("VDU2", big[0])]),
            )
            .await
            .map_err(|e| chain(&e))?;
        ensure!(r.is_completed(), "instantiate: {}", describe(&r));
        let mut sreq = ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale");
        sreq.number_of_steps = Some(1);
        let r = lcm
            .scale(&inst.id, &pkg, &sreq, &pins(&[("VDU1-1", big[0])]))
            .await
            .map_err(|e| chain(&e))?;
        ensure!(r.is_completed(), "scale out: {}", describe(&r));
        let a = &r.op_occ.attempts;
        ensure!(a.len() >= 2, "expected a reselection: {}", describe(&r));
        let first = a[0].status_reason.clone().unwrap_or_default();
        ensure!(
            first.contains("No valid host was found"),
            "the pinned attempt did not fail with Nova's text: {first}"
        );
        ensure!(
            a[0].failed_zones.contains(big[0]),
            "failed zones {:?}",
            a[0].failed_zones
        );
        let inst_now = lcm
            .drivers()
            .store
            .instance(&inst.id)
            .await
            .map_err(|e| chain(&e))?;
        let servers = check_servers(&cloud, fx, &inst_now).await?;
        let h0 = servers.get("VDU1-0").map(|(_, h)| h.clone());
        let h1 = servers.get("VDU1-1").map(|(_, h)| h.clone());
        ensure!(
            h0.is_some() && h1.is_some() && h0 != h1,
            "VDU1's servers share a host or are missing: {servers:?}"
        );
        eprintln!("HA intent: VDU1 on {h0:?} and {h1:?}; first attempt: {first}");
        Ok(())
    };
    let outcome: Res = during.await;
    let cleaned = terminate(&lcm, &inst.id).await;
    outcome.and(cleaned)
}

/// Heat, and `then` called as soon as Heat accepted a stack create (with the stack still
/// `CREATE_IN_PROGRESS`): an interrupt, a service killed.
struct AfterCreate {
    heat: Arc<dyn StackDriver>,
    then: Box<dyn Fn(&StackId) + Send + Sync>,
    /// The create's answer is lost: an error is returned although Heat accepted it (the
    /// process that sent it died before it saved the stack's id).
    lose_answer: bool,
}

impl std::fmt::Debug for AfterCreate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfterCreate").finish_non_exhaustive()
    }
}

#[async_trait]
impl StackDriver for AfterCreate {
    async fn create_stack(
        &self,
        req: vnfm_core::driver::CreateStack,
    ) -> Result<StackId, vnfm_core::driver::DriverError> {
        let id = self.heat.create_stack(req).await?;
        (self.then)(&id);
        if self.lose_answer {
            return Err(vnfm_core::driver::DriverError::Unavailable {
                driver: "test",
                message: format!("the answer to the create of stack {id} was lost"),
            });
        }
        Ok(id)
    }
    async fn update_stack(
        &self,
        req: vnfm_core::driver::UpdateStack,
    ) -> Result<(), vnfm_core::driver::DriverError> {
        self.heat.update_stack(req).await
    }
    async fn show_stack(
        &self,
        id: &StackId,
    ) -> Result<vnfm_core::driver::Stack, vnfm_core::driver::DriverError> {
        self.heat.show_stack(id).await
    }
    async fn delete_stack(&self, id: &StackId) -> Result<(), vnfm_core::driver::DriverError> {
        self.heat.delete_stack(id).await
    }
    async fn list_resources(
        &self,
        req: ListResources,
    ) -> Result<Vec<vnfm_core::driver::StackResource>, vnfm_core::driver::DriverError> {
        self.heat.list_resources(req).await
    }
    async fn mark_unhealthy(
        &self,
        req: vnfm_core::driver::MarkUnhealthy,
    ) -> Result<(), vnfm_core::driver::DriverError> {
        self.heat.mark_unhealthy(req).await
    }
}

/// Instantiates `inst` interrupted right after Heat accepted the create: FAILED_TEMP,
/// `INTERRUPTED`, the stack recorded on the instance and still in progress at Heat.
async fn interrupted_instantiate(
    cloud: &OpenStack,
    lcm: &Lifecycle,
    fx: &Fx,
    inst: &VnfInstance,
) -> Result<(OperationReport, StackId), String> {
    let interrupt = Interrupt::new();
    let mut drivers = lcm.drivers().clone();
    let cut_off = interrupt.clone();
    drivers.stacks = Arc::new(AfterCreate {
        heat: Arc::new(cloud.heat()),
        then: Box::new(move |_| cut_off.trigger("test: interrupted after the create")),
        lose_answer: false,
    });
    let cut = Lifecycle::new(drivers, lcm.config().clone()).with_id_salt(0xc0ffee ^ salt());
    let big = fx.big();
    let mut opts = pins(&[("VDU1", big[0]), ("VDU2", big[0])]);
    opts.interrupt = Some(interrupt);
    let r = cut
        .instantiate(
            &inst.id,
            &fx.pkg,
            &InstantiateVnfRequest::new("free"),
            &opts,
        )
        .await
        .map_err(|e| chain(&e))?;
    ensure!(
        r.op_occ.operation_state == LcmOperationStateType::FailedTemp
            && r.failure == Some(FailureKind::Interrupted),
        "expected FAILED_TEMP (INTERRUPTED): {}",
        describe(&r)
    );
    let stored = lcm
        .drivers()
        .store
        .instance(&inst.id)
        .await
        .map_err(|e| chain(&e))?;
    let stack = stack_id_of(&stored)?;
    let shown = cloud
        .heat()
        .show_stack(&stack)
        .await
        .map_err(|e| chain(&e))?;
    eprintln!(
        "    interrupted after the create: stack {stack} is {} at Heat",
        shown.stack_status
    );
    Ok((r, stack))
}

/// 10. An instantiate interrupted right after Heat accepted the create (the stack still
///     `CREATE_IN_PROGRESS`): `retry` waits for the stack to settle (Heat refuses an update of
///     a stack in progress with a 409), updates it and completes with the servers ACTIVE;
///     another one interrupted the same way is rolled back with the stack gone; a third whose
///     create's answer was lost (no stack id saved) is retried: the stack Heat made is found
///     by its name (Heat's `GET /stacks/{name}` answers 302 with the stack's address), not
///     created again, and the instantiate completes with it.
async fn interrupted_instantiate_retries_or_rolls_back(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 23);
    let inst = create(&lcm, fx, "rs-interrupt-retry").await?;
    let outcome = async {
        let (r, _) = interrupted_instantiate(&cloud, &lcm, fx, &inst).await?;
        let done = retry_completes(&lcm, fx, &r.op_occ.id, "retry").await?;
        ensure!(
            done.op_occ.id == r.op_occ.id,
            "the retry continues the same occurrence"
        );
        check_servers(&cloud, fx, &done.instance).await?;
        Ok(())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    let first = outcome.and(cleaned);

    let inst = create(&lcm, fx, "rs-interrupt-rollback").await?;
    let outcome = async {
        let (r, stack) = interrupted_instantiate(&cloud, &lcm, fx, &inst).await?;
        let back = lcm
            .rollback(&r.op_occ.id, &fx.pkg)
            .await
            .map_err(|e| chain(&e))?;
        ensure!(
            back.op_occ.operation_state == LcmOperationStateType::RolledBack,
            "rollback: {}",
            describe(&back)
        );
        check_stack_gone(&cloud, &stack, &[]).await
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    first.and(outcome).and(cleaned)
}

// ------------------------------------------------------------------------ faults (issue 14)

/// `scripts/openstack-dev.sh ARGS` (the script that started the services): `kill SERVICE`,
/// `revive SERVICE`.
fn dev_script(args: &[&str]) -> Res {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/openstack-dev.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    ensure!(
        out.status.success(),
        "openstack-dev.sh {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Kills `service` when told (right after Heat accepted a stack create, through
/// [`AfterCreate`]), once, and revives it `after` later in a thread of its own: the operation
/// goes on meanwhile.
#[derive(Debug)]
struct Killer {
    service: &'static str,
    after: Duration,
    revived: std::sync::Mutex<Option<std::thread::JoinHandle<Res>>>,
}

impl Killer {
    fn kill(&self, stack: &StackId) {
        let Ok(mut slot) = self.revived.lock() else {
            return;
        };
        if slot.is_some() {
            return;
        }
        let (service, after) = (self.service, self.after);
        if let Err(e) = dev_script(&["kill", service]) {
            eprintln!("    {e}");
        }
        eprintln!("    killed {service} after the create of stack {stack}");
        *slot = Some(std::thread::spawn(move || {
            std::thread::sleep(after);
            let r = dev_script(&["revive", service]);
            eprintln!("    revived {service}");
            r
        }));
    }

    fn join(&self) -> Res {
        let handle = self.revived.lock().map_err(|e| e.to_string())?.take();
        match handle {
            Some(h) => h
                .join()
                .map_err(|_| "the revive thread panicked".to_owned())?,
            None => Err(format!(
                "{} was never killed (no stack create)",
                self.service
            )),
        }
    }
}

fn killing(cloud: &OpenStack, lcm: &Lifecycle, service: &'static str) -> (Lifecycle, Arc<Killer>) {
    let k = Arc::new(Killer {
        service,
        after: Duration::from_secs(3),
        revived: std::sync::Mutex::default(),
    });
    let killer = k.clone();
    let mut drivers = lcm.drivers().clone();
    drivers.stacks = Arc::new(AfterCreate {
        heat: Arc::new(cloud.heat()),
        then: Box::new(move |id| killer.kill(id)),
        lose_answer: false,
    });
    (
        Lifecycle::new(drivers, lcm.config().clone()).with_id_salt(0xfa17 ^ salt()),
        k,
    )
}

/// 11. heat-engine killed (SIGKILL) right after it accepted a stack create, and started again
///     3 s later. Real Heat 27 leaves the dead engine's stack `CREATE_IN_PROGRESS` (the new
///     engine does not take it over): the operation ends `FAILED_TEMP` at its stack timeout
///     (60 s here) naming the stack and its status, never stuck, and rollback deletes the
///     stack (Heat takes the dead engine's lock). Should Heat instead mark the stack
///     `CREATE_FAILED` ("Engine went down during stack CREATE"), `retry` completes it; should
///     the create finish first, the operation completes.
async fn heat_engine_killed_during_create(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let base = lifecycle(&cloud, 29);
    let mut cfg = base.config().clone();
    cfg.stack_timeout = Duration::from_secs(60);
    let lcm = Lifecycle::new(base.drivers().clone(), cfg).with_id_salt(29 ^ salt());
    let inst = create(&lcm, fx, "rs-heat-killed").await?;
    let outcome = async {
        let (cut, k) = killing(&cloud, &lcm, "heat-engine");
        let big = fx.big();
        let r = cut
            .instantiate(
                &inst.id,
                &fx.pkg,
                &InstantiateVnfRequest::new("free"),
                &pins(&[("VDU1", big[0]), ("VDU2", big[0])]),
            )
            .await
            .map_err(|e| chain(&e))?;
        k.join()?;
        eprintln!("    after the kill: {}", describe(&r));
        if r.is_completed() {
            return check_servers(&cloud, fx, &r.instance).await.map(|_| ());
        }
        ensure!(
            r.op_occ.operation_state == LcmOperationStateType::FailedTemp,
            "expected FAILED_TEMP or COMPLETED: {}",
            describe(&r)
        );
        let why = error_detail(&r);
        if why.contains("Engine went down") {
            let done = retry_completes(&lcm, fx, &r.op_occ.id, "retry").await?;
            return check_servers(&cloud, fx, &done.instance).await.map(|_| ());
        }
        ensure!(
            why.contains("still CREATE_IN_PROGRESS after 60s"),
            "the reason names what happened: {why}"
        );
        let stored = lcm
            .drivers()
            .store
            .instance(&inst.id)
            .await
            .map_err(|e| chain(&e))?;
        let stack = stack_id_of(&stored)?;
        let back = lcm
            .rollback(&r.op_occ.id, &fx.pkg)
            .await
            .map_err(|e| chain(&e))?;
        ensure!(
            back.op_occ.operation_state == LcmOperationStateType::RolledBack,
            "rollback of the stack the dead engine left: {}",
            describe(&back)
        );
        check_stack_gone(&cloud, &stack, &[]).await
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// 12. Keystone killed while the operation's token is in use (right after the stack create)
///     and started again 3 s later: Heat and Nova cannot validate the token meanwhile
///     (keystonemiddleware answers 503) or Keystone refuses connections; the adapter retries
///     (RetryPolicy) and the operation completes on the same token (fernet tokens survive a
///     restart): no FAILED operation where a retry succeeds. Heat itself needs Keystone while
///     it builds the stack: when it validates a resource during the outage, real Heat 27 fails
///     that resource (seen on CI, 2026-11-27: `Resource CREATE failed: resources.VDU1-0:
///     Property error: resources.VDU1.properties.image: HTTP 401 Unauthorized`, Glance having
///     refused Heat's token). The operation then ends `FAILED_TEMP` with Heat's reason, which
///     says what happened, and a retry once Keystone is back completes it (the failed stack
///     is updated, Heat builds the resource again).
async fn keystone_restarted_mid_operation(fx: &Fx) -> Res {
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 31);
    let inst = create(&lcm, fx, "rs-keystone-restart").await?;
    let outcome = async {
        let (cut, k) = killing(&cloud, &lcm, "keystone-api");
        let big = fx.big();
        let r = cut
            .instantiate(
                &inst.id,
                &fx.pkg,
                &InstantiateVnfRequest::new("free"),
                &pins(&[("VDU1", big[0]), ("VDU2", big[0])]),
            )
            .await
            .map_err(|e| chain(&e))?;
        k.join()?;
        if r.is_completed() {
            eprintln!(
                "    completed; {} transient failure(s) retried, {} token(s)",
                cloud.retry_count(),
                cloud.auth_count()
            );
            return check_servers(&cloud, fx, &r.instance).await.map(|_| ());
        }
        ensure!(
            r.op_occ.operation_state == LcmOperationStateType::FailedTemp,
            "instantiate across a Keystone restart: expected COMPLETED or FAILED_TEMP: {}",
            describe(&r)
        );
        let why = error_detail(&r);
        ensure!(
            why.contains("Resource CREATE failed"),
            "FAILED_TEMP names Heat's failure (Keystone's outage reached it as an error of \
             another service, e.g. HTTP 401 from Glance): {why}"
        );
        eprintln!("    Heat failed a resource while Keystone was down: {why}");
        let done =
            retry_completes(&lcm, fx, &r.op_occ.id, "retry after Keystone came back").await?;
        check_servers(&cloud, fx, &done.instance).await.map(|_| ())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// A proxy in front of Nova on 127.0.0.1 that answers `503 Service Unavailable` (as a
/// load balancer without its backend does) to the next `outage` requests, and forwards the
/// others to the real Nova.
struct FlakyNova {
    url: String,
    outage: Arc<std::sync::atomic::AtomicU64>,
    served_503: Arc<std::sync::atomic::AtomicU64>,
}

async fn flaky_nova(nova: String) -> Result<FlakyNova, String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let outage = Arc::new(AtomicU64::new(0));
    let served = Arc::new(AtomicU64::new(0));
    let (o, sv) = (outage.clone(), served.clone());
    let http = reqwest::Client::new();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (o, sv, http, nova) = (o.clone(), sv.clone(), http.clone(), nova.clone());
            tokio::spawn(async move {
                // one request per connection: read the head, then Content-Length bytes
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let head_end = loop {
                    let Ok(n) = sock.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let mut lines = head.split("\r\n");
                let mut first = lines.next().unwrap_or("").split(' ');
                let method = first.next().unwrap_or("GET").to_owned();
                let target = first.next().unwrap_or("/").to_owned();
                let headers: Vec<(String, String)> = lines
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                    .collect();
                let len: usize = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                while buf.len() < head_end + len {
                    let Ok(n) = sock.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = buf[head_end..].to_vec();
                let fail = o
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                let (status, ctype, reply) = if fail {
                    sv.fetch_add(1, Ordering::SeqCst);
                    (
                        503,
                        "text/html".to_owned(),
                        b"<html><body><h1>503 Service Unavailable</h1></body></html>".to_vec(),
                    )
                } else {
                    let m = reqwest::Method::from_bytes(method.as_bytes())
                        .unwrap_or(reqwest::Method::GET);
                    let mut req = http.request(m, format!("{nova}{target}")).body(body);
                    for (k, v) in &headers {
                        if !["host", "content-length", "connection"].contains(&k.as_str()) {
                            req = req.header(k.as_str(), v.as_str());
                        }
                    }
                    match req.send().await {
                        Ok(resp) => {
                            let status = resp.status().as_u16();
                            let ctype = resp
                                .headers()
                                .get("content-type")
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("application/json")
                                .to_owned();
                            (
                                status,
                                ctype,
                                resp.bytes().await.map(|b| b.to_vec()).unwrap_or_default(),
                            )
                        }
                        Err(e) => (502, "text/plain".to_owned(), e.to_string().into_bytes()),
                    }
                };
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    reply.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&reply).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Ok(FlakyNova {
        url: format!("http://{addr}"),
        outage,
        served_503: served,
    })
}

/// 13. Nova answering 503 for a while (a proxy in front of the real Nova): a short outage
///     (four answers) is ridden out by the adapter's retries and the instantiate completes;
///     an outage longer than the retries ends the scale-out `FAILED_TEMP` with a reason
///     naming Nova's 503 (never stuck), and `retry` completes it once Nova is back.
async fn nova_unavailable_for_a_while(fx: &Fx) -> Res {
    use std::sync::atomic::Ordering;
    let nova_url = OpenStack::from_env()
        .map_err(|e| chain(&e))?
        .config()
        .endpoint_overrides
        .get("compute")
        .cloned()
        .unwrap_or_else(|| "http://127.0.0.1:8774".to_owned());
    let base = nova_url.trim_end_matches("/v2.1").to_owned();
    let proxy = flaky_nova(base).await?;
    let config = vnfm_openstack::CloudConfig::from_env()
        .map_err(|e| chain(&e))?
        .with_endpoint_override("compute", format!("{}/v2.1", proxy.url));
    let cloud = OpenStack::new(config).map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 37);
    let inst = create(&lcm, fx, "rs-nova-503").await?;
    let outcome = async {
        proxy.outage.store(4, Ordering::SeqCst);
        let big = fx.big();
        let r = lcm
            .instantiate(
                &inst.id,
                &fx.pkg,
                &InstantiateVnfRequest::new("free"),
                &pins(&[("VDU1", big[0]), ("VDU2", big[0])]),
            )
            .await
            .map_err(|e| chain(&e))?;
        ensure!(
            r.is_completed(),
            "instantiate across 4 answers 503: {}",
            describe(&r)
        );
        ensure!(
            proxy.served_503.load(Ordering::SeqCst) == 4 && cloud.retry_count() >= 4,
            "503s served {}, retries {}",
            proxy.served_503.load(Ordering::SeqCst),
            cloud.retry_count()
        );
        // longer than the policy's retries: 1000 answers 503
        proxy.outage.store(1000, Ordering::SeqCst);
        let req = ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale");
        let s = lcm
            .scale(&inst.id, &fx.pkg, &req, &pins(&[("VDU1", big[0])]))
            .await;
        proxy.outage.store(0, Ordering::SeqCst);
        match s {
            Ok(s) => {
                ensure!(
                    s.op_occ.operation_state == LcmOperationStateType::FailedTemp,
                    "a scale-out while Nova answers 503: {}",
                    describe(&s)
                );
                let why = error_detail(&s);
                ensure!(why.contains("503"), "the reason names Nova's 503: {why}");
                retry_completes(&lcm, fx, &s.op_occ.id, "retry once Nova is back").await?;
            }
            Err(e) => {
                // refused before it started: nothing may be left running
                let text = chain(&e);
                ensure!(text.contains("503"), "the error names Nova's 503: {text}");
                let ops = lcm
                    .drivers()
                    .store
                    .op_occs(vnfm_core::driver::OpOccFilter::instance(inst.id.clone()))
                    .await
                    .map_err(|e| chain(&e))?;
                ensure!(
                    ops.iter().all(|o| !matches!(
                        o.operation_state,
                        LcmOperationStateType::Processing | LcmOperationStateType::Starting
                    )),
                    "no operation left running: {ops:?}"
                );
            }
        }
        Ok(())
    }
    .await;
    proxy.outage.store(0, Ordering::SeqCst);
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// 14. A stack that stays `CREATE_IN_PROGRESS` past the operation's stack timeout (a BaseHOT
///     with an `OS::Heat::TestResource` whose create waits 10 minutes; stack timeout 20 s):
///     `FAILED_TEMP` "stack timed out" naming the stack and its status, never stuck; rollback
///     deletes the stack (Heat cancels the create).
async fn stack_in_progress_past_the_timeout(fx: &Fx) -> Res {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/os-vnf");
    copy_tree(&src, dir.path()).map_err(|e| e.to_string())?;
    let top = dir.path().join("BaseHOT/free/os.yaml");
    let hot = std::fs::read_to_string(&top).map_err(|e| e.to_string())?;
    let hot = hot.replace(
        "\noutputs: {}",
        "\n  slow:\n    type: OS::Heat::TestResource\n    properties:\n      value: slow\n      action_wait_secs: {create: 600}\n\noutputs: {}",
    );
    std::fs::write(&top, hot).map_err(|e| e.to_string())?;
    let pkg = vnfm_core::package::fs::load(dir.path()).map_err(|e| chain(&e))?;
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let base = lifecycle(&cloud, 41);
    let mut cfg = base.config().clone();
    cfg.stack_timeout = Duration::from_secs(20);
    let lcm = Lifecycle::new(base.drivers().clone(), cfg).with_id_salt(41 ^ salt());
    let mut req = CreateVnfRequest::new(pkg.descriptor_id.clone());
    req.vnf_instance_name = Some("rs-slow-stack".to_owned());
    let inst = lcm.create(&pkg, &req).await.map_err(|e| chain(&e))?;
    let big = fx.big();
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("free"),
            &pins(&[("VDU1", big[0]), ("VDU2", big[0])]),
        )
        .await
        .map_err(|e| chain(&e))?;
    ensure!(
        r.op_occ.operation_state == LcmOperationStateType::FailedTemp,
        "expected FAILED_TEMP: {}",
        describe(&r)
    );
    let why = error_detail(&r);
    ensure!(
        why.contains("CREATE_IN_PROGRESS") && why.contains("20s"),
        "the reason names the stack's status and the timeout: {why}"
    );
    let stored = lcm
        .drivers()
        .store
        .instance(&inst.id)
        .await
        .map_err(|e| chain(&e))?;
    let stack = stack_id_of(&stored)?;
    let back = lcm
        .rollback(&r.op_occ.id, &pkg)
        .await
        .map_err(|e| chain(&e))?;
    ensure!(
        back.op_occ.operation_state == LcmOperationStateType::RolledBack,
        "rollback: {}",
        describe(&back)
    );
    check_stack_gone(&cloud, &stack, &[]).await
}

/// The os-vnf package copied to `dir`, its `free` BaseHOT with an `OS::Heat::TestResource`
/// whose create waits `secs` seconds (Heat 27's `action_wait_secs`).
fn slow_package(dir: &std::path::Path, secs: u64) -> Result<VnfPackage, String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/os-vnf");
    copy_tree(&src, dir).map_err(|e| e.to_string())?;
    let top = dir.join("BaseHOT/free/os.yaml");
    let hot = std::fs::read_to_string(&top).map_err(|e| e.to_string())?;
    ensure!(
        hot.matches("\noutputs: {}").count() == 1,
        "examples/packages/os-vnf changed: BaseHOT/free/os.yaml has no single `outputs: {{}}`"
    );
    let hot = hot.replace(
        "\noutputs: {}",
        &format!(
            "\n  slow:\n    type: OS::Heat::TestResource\n    properties:\n      value: slow\n      action_wait_secs: {{create: {secs}}}\n\noutputs: {{}}"
        ),
    );
    std::fs::write(&top, hot).map_err(|e| e.to_string())?;
    vnfm_core::package::fs::load(dir).map_err(|e| chain(&e))
}

/// 17. SOL003 cancel (5.4.17) of an instantiate while it is PROCESSING: its stack is held
///     `CREATE_IN_PROGRESS` by an `OS::Heat::TestResource` waiting 60 s in create; once the
///     occurrence is PROCESSING with its stack created, the cancel is checked
///     (`Lifecycle::check_cancel`, as `POST .../cancel` does) and the operation's interrupt
///     triggered: it ends `FAILED_TEMP` (`INTERRUPTED`, the reason saying it was cancelled)
///     well before the stack's 60 s, without waiting for the stack; a rollback then ends
///     `ROLLED_BACK` with the stack gone (Heat deletes a stack whose create is in progress).
async fn cancel_while_processing_then_roll_back(fx: &Fx) -> Res {
    const WAIT: u64 = 60;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let pkg = slow_package(dir.path(), WAIT)?;
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 43);
    let mut req = CreateVnfRequest::new(pkg.descriptor_id.clone());
    req.vnf_instance_name = Some("rs-cancel".to_owned());
    let inst = lcm.create(&pkg, &req).await.map_err(|e| chain(&e))?;
    let big = fx.big();
    let interrupt = Interrupt::new();
    let mut opts = pins(&[("VDU1", big[0]), ("VDU2", big[0])]);
    opts.interrupt = Some(interrupt.clone());
    let reason = "cancelled (GRACEFUL) by the real scenario";
    let started = Instant::now();
    let ireq = InstantiateVnfRequest::new("free");
    let run = lcm.instantiate(&inst.id, &pkg, &ireq, &opts);
    let cancel = async {
        // PROCESSING, with the stack created (the operation waits for it)
        let deadline = Instant::now() + Duration::from_secs(WAIT / 2);
        loop {
            ensure!(
                Instant::now() < deadline,
                "the instantiate did not reach PROCESSING with its stack within {}s",
                WAIT / 2
            );
            let ops = lcm
                .drivers()
                .store
                .op_occs(vnfm_core::driver::OpOccFilter::instance(inst.id.clone()))
                .await
                .map_err(|e| chain(&e))?;
            let processing = ops.iter().find(|o| {
                o.operation_state == LcmOperationStateType::Processing
                    && o.progress
                        .as_ref()
                        .and_then(|p| p.get(STACK_ID_KEY))
                        .is_some_and(Value::is_string)
            });
            if let Some(op) = processing {
                let stack = op
                    .progress
                    .as_ref()
                    .and_then(|p| p.get(STACK_ID_KEY))
                    .and_then(Value::as_str)
                    .map(StackId::from)
                    .ok_or("no stack id")?;
                let shown = cloud
                    .heat()
                    .show_stack(&stack)
                    .await
                    .map_err(|e| chain(&e))?;
                eprintln!(
                    "    cancelling {} while PROCESSING: stack {stack} is {} at Heat",
                    op.id, shown.stack_status
                );
                ensure!(
                    shown.stack_status.is_in_progress(),
                    "the stack should still be in progress: {}",
                    shown.stack_status
                );
                lcm.check_cancel(&op.id).await.map_err(|e| chain(&e))?;
                interrupt.trigger(reason);
                return Ok(stack);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let (r, stack) = tokio::join!(run, cancel);
    let outcome = async {
        let r = r.map_err(|e| chain(&e))?;
        let stack = stack?;
        let took = started.elapsed();
        ensure!(
            r.op_occ.operation_state == LcmOperationStateType::FailedTemp
                && r.failure == Some(FailureKind::Interrupted),
            "expected FAILED_TEMP (INTERRUPTED): {}",
            describe(&r)
        );
        let why = error_detail(&r);
        ensure!(
            why.contains(reason),
            "the reason says it was cancelled: {why}"
        );
        ensure!(
            took < Duration::from_secs(WAIT - 10),
            "the cancel did not wait for the stack: {took:?}"
        );
        let back = lcm
            .rollback(&r.op_occ.id, &pkg)
            .await
            .map_err(|e| chain(&e))?;
        ensure!(
            back.op_occ.operation_state == LcmOperationStateType::RolledBack,
            "rollback: {}",
            describe(&back)
        );
        check_stack_gone(&cloud, &stack, &[]).await
    }
    .await;
    if outcome.is_err() {
        // whatever happened, no stack left behind
        let _ = clean(&lcm, fx, &inst.id).await;
    }
    outcome
}

fn copy_tree(src: &std::path::Path, dst: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let to = dst.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &to)?;
        } else {
            std::fs::copy(entry.path(), to)?;
        }
    }
    Ok(())
}

/// 15. Operate (issue 16): an instance of the `free` flavour instantiated in the big zones,
///     stopped (Nova `os-stop`: every server SHUTOFF, `vnfState` STOPPED), stopped again (409:
///     nothing sent), started (`os-start`: ACTIVE, STARTED), then terminated.
async fn operate_stops_and_starts_servers(fx: &Fx) -> Res {
    use vnfm_core::lcm::VnfOperationalStateType as S;
    use vnfm_core::lifecycle::operate::OperateVnfRequest;
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 31);
    let inst = create(&lcm, fx, "rs-operate").await?;
    let big = fx.big();
    ensure!(!big.is_empty(), "no zone can hold an m1.small");
    let r = lcm
        .instantiate(
            &inst.id,
            &fx.pkg,
            &InstantiateVnfRequest::new("free"),
            &pins(&[("VDU1", big[0]), ("VDU2", big[0])]),
        )
        .await
        .map_err(|e| chain(&e))?;
    let outcome = async {
        ensure!(r.is_completed(), "instantiate: {}", describe(&r));
        let servers: Vec<ServerId> = r
            .instance
            .instantiated_vnf_info
            .as_ref()
            .map(|i| {
                i.vnfc_resource_info
                    .iter()
                    .map(|v| ServerId::from(v.compute_resource.resource_id.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        ensure!(!servers.is_empty(), "no servers: {}", describe(&r));
        let nova = cloud.nova();
        for (to, status) in [(S::Stopped, "SHUTOFF"), (S::Started, "ACTIVE")] {
            let req = OperateVnfRequest {
                vnfc_instance_id: Vec::new(),
                change_state_to: to,
                stop_type: None,
                graceful_stop_timeout: None,
                additional_params: None,
            };
            let op = lcm
                .operate(&inst.id, &req, &OperationOptions::default())
                .await
                .map_err(|e| format!("operate {to}: {}", chain(&e)))?;
            ensure!(op.is_completed(), "operate {to}: {}", describe(&op));
            let info = op.instance.instantiated_vnf_info.as_ref();
            ensure!(
                info.and_then(|i| i.vnf_state) == Some(to),
                "vnfState after operate {to}: {:?}",
                info.map(|i| i.vnf_state)
            );
            for id in &servers {
                let s = nova.show_server(id).await.map_err(|e| chain(&e))?;
                ensure!(
                    s.status == status,
                    "server {id} is {} after operate {to}",
                    s.status
                );
            }
            // Again: refused before anything is sent (409).
            match lcm
                .operate(&inst.id, &req, &OperationOptions::default())
                .await
            {
                Err(vnfm_core::lifecycle::LcmError::Conflict(_)) => {}
                other => return Err(format!("operate {to} again: {other:?}")),
            }
        }
        Ok(())
    }
    .await;
    let cleaned = clean(&lcm, fx, &inst.id).await;
    outcome.and(cleaned)
}

/// 16. Change flavour (issue 16) with `examples/packages/flavours-vnf`: `small` (one VDU1)
///     instantiated in a big zone, changed to `large` (Heat PATCH of the stack with large's
///     template: VDU1-0 keeps its server, VDU1-1 and VDU2-0 are created, ACTIVE), changed back
///     to `small` (VDU1-1 and VDU2-0 deleted by Heat, VDU1-0 still the same server), then
///     terminated.
async fn change_flavour_updates_the_stack_in_place(fx: &Fx) -> Res {
    use vnfm_core::lifecycle::change_flavour::ChangeVnfFlavourRequest;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/flavours-vnf");
    let pkg = vnfm_core::package::fs::load(&dir).map_err(|e| chain(&e))?;
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 37);
    let mut req = CreateVnfRequest::new(pkg.descriptor_id.clone());
    req.vnf_instance_name = Some("rs-change-flavour".into());
    let inst = lcm.create(&pkg, &req).await.map_err(|e| chain(&e))?;
    let big = fx.big();
    ensure!(!big.is_empty(), "no zone can hold an m1.small");
    let pin = pins(&[("VDU1", big[0]), ("VDU2", big[0])]);
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("small"),
            &pins(&[("VDU1", big[0])]),
        )
        .await
        .map_err(|e| chain(&e))?;
    let outcome = async {
        ensure!(r.is_completed(), "instantiate: {}", describe(&r));
        let small = vnfcs(&r.instance);
        let first = small
            .get("VDU1-0")
            .map(|v| v.0.clone())
            .ok_or_else(|| format!("no VDU1-0: {small:?}"))?;
        let nova = cloud.nova();
        let to_large = lcm
            .change_flavour(&inst.id, &pkg, &ChangeVnfFlavourRequest::new("large"), &pin)
            .await
            .map_err(|e| format!("change to large: {}", chain(&e)))?;
        ensure!(
            to_large.is_completed(),
            "change to large: {}",
            describe(&to_large)
        );
        let large = vnfcs(&to_large.instance);
        ensure!(
            large.keys().map(String::as_str).collect::<Vec<_>>() == ["VDU1-0", "VDU1-1", "VDU2-0"],
            "VNFCs after the change to large: {large:?}"
        );
        ensure!(
            large["VDU1-0"].0 == first,
            "VDU1-0 was replaced: {first} -> {}",
            large["VDU1-0"].0
        );
        for (vnfc, (server, _, _)) in &large {
            let s = nova
                .show_server(&ServerId::from(server.as_str()))
                .await
                .map_err(|e| chain(&e))?;
            ensure!(s.status == "ACTIVE", "{vnfc} ({server}) is {}", s.status);
        }
        let back = lcm
            .change_flavour(
                &inst.id,
                &pkg,
                &ChangeVnfFlavourRequest::new("small"),
                &OperationOptions::default(),
            )
            .await
            .map_err(|e| format!("change back to small: {}", chain(&e)))?;
        ensure!(
            back.is_completed(),
            "change back to small: {}",
            describe(&back)
        );
        let after = vnfcs(&back.instance);
        ensure!(
            after.keys().map(String::as_str).collect::<Vec<_>>() == ["VDU1-0"]
                && after["VDU1-0"].0 == first,
            "VNFCs after the change back to small: {after:?} (VDU1-0 was {first})"
        );
        for gone in ["VDU1-1", "VDU2-0"] {
            let server = ServerId::from(large[gone].0.as_str());
            match nova.show_server(&server).await {
                Err(e) if e.is_not_found() => {}
                Ok(s) if s.status == "DELETED" => {}
                other => return Err(format!("{gone} ({server}) still there: {other:?}")),
            }
        }
        Ok(())
    }
    .await;
    let cleaned = terminate(&lcm, &inst.id).await;
    outcome.and(cleaned)
}

/// `examples/packages/flavours-vnf` copied to `dir` with an external CP: `VDU1_CP1` (bound to
/// VDU1) mapped to the external virtual link of flavour `small`, and small's BaseHOT passing
/// `[nfv, CP, VDU1_CP1, network]` to VDU1's nested template, which puts it in the server's
/// metadata (the dev cloud has no Neutron to build a port from it; Heat updates a server's
/// metadata in place), and as the stack output `ext_net` (`[nfv, CP, VDU1_CP1, network]`).
fn flavours_with_ext_cp(dir: &std::path::Path) -> Result<PathBuf, String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/flavours-vnf");
    let dst = dir.join("flavours-vnf");
    copy_tree(&src, &dst).map_err(|e| format!("copy {}: {e}", src.display()))?;
    let edit = |rel: &str, old: &str, new: &str| -> Res {
        let path = dst.join(rel);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{rel}: {e}"))?;
        ensure!(text.contains(old), "{rel} changed: {old:?} not found");
        std::fs::write(&path, text.replacen(old, new, 1)).map_err(|e| format!("{rel}: {e}"))
    };
    edit(
        "Definitions/flavours_types.yaml",
        "    interfaces:\n      Vnflcm:\n",
        "    requirements:\n      - virtual_link_external:\n          capability: \
         tosca.capabilities.nfv.VirtualLinkable\n    interfaces:\n      Vnflcm:\n",
    )?;
    edit(
        "Definitions/flavours_df_small.yaml",
        "      flavour_id: small\n",
        "      flavour_id: small\n    requirements:\n      virtual_link_external: [ VDU1_CP1, \
         virtual_link ]\n",
    )?;
    edit(
        "Definitions/flavours_df_small.yaml",
        "    VDU1:\n      type: tosca.nodes.nfv.Vdu.Compute\n",
        "    VDU1_CP1:\n      type: tosca.nodes.nfv.VduCp\n      properties:\n        \
         layer_protocols: [ ipv4 ]\n        order: 0\n      requirements:\n        - \
         virtual_binding: VDU1\n\n    VDU1:\n      type: tosca.nodes.nfv.Vdu.Compute\n",
    )?;
    edit(
        "BaseHOT/small/flavours.yaml",
        "      zone: { get_param: [ nfv, VDU, VDU1, locationConstraints ] }\n",
        "      zone: { get_param: [ nfv, VDU, VDU1, locationConstraints ] }\n      \
         ext_net: { get_param: [ nfv, CP, VDU1_CP1, network ] }\n",
    )?;
    edit(
        "BaseHOT/small/flavours.yaml",
        "outputs: {}",
        "outputs:\n  ext_net:\n    value: { get_param: [ nfv, CP, VDU1_CP1, network ] }",
    )?;
    edit(
        "BaseHOT/small/nested/VDU1.yaml",
        "  zone:\n    type: string\n",
        "  zone:\n    type: string\n  ext_net:\n    type: string\n    default: none\n",
    )?;
    edit(
        "BaseHOT/small/nested/VDU1.yaml",
        "      availability_zone: { get_param: zone }\n",
        "      availability_zone: { get_param: zone }\n      metadata:\n        ext_net: { \
         get_param: ext_net }\n",
    )?;
    Ok(dst)
}

/// 17. Change external connectivity (SOL003 5.4.11) with flavours-vnf `small` given an external
///     CP (see [`flavours_with_ext_cp`]): instantiated on link `ext1` (network `net-a`: the
///     stack's `nfv` parameter carries `CP.VDU1_CP1-0.network`, its output `ext_net` is
///     `net-a`), changed to link `ext2` (`net-b`): real Heat takes the PATCH of `nfv` with the
///     new CP section, the stack is UPDATE_COMPLETE with `ext_net` `net-b`, VDU1-0 keeps its
///     server (its metadata updated in place), ACTIVE, and the instance reports `ext2` only;
///     then terminated.
async fn change_ext_conn_updates_the_stack_in_place(fx: &Fx) -> Res {
    use vnfm_core::lifecycle::change_ext_conn::ChangeExtVnfConnectivityRequest;
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = flavours_with_ext_cp(tmp.path())?;
    let pkg = vnfm_core::package::fs::load(&dir).map_err(|e| chain(&e))?;
    let cloud = OpenStack::from_env().map_err(|e| chain(&e))?;
    let lcm = lifecycle(&cloud, 41);
    let mut req = CreateVnfRequest::new(pkg.descriptor_id.clone());
    req.vnf_instance_name = Some("rs-change-ext-conn".into());
    let inst = lcm.create(&pkg, &req).await.map_err(|e| chain(&e))?;
    let big = fx.big();
    ensure!(!big.is_empty(), "no zone can hold an m1.small");
    let link = |id: &str, net: &str| -> Result<vnfm_core::grant::ExtVirtualLinkData, String> {
        serde_json::from_value(json!({
            "id": id, "resourceId": net,
            "extCps": [{"cpdId": "VDU1_CP1", "cpConfig": {"VDU1_CP1_1": {}}}]
        }))
        .map_err(|e| e.to_string())
    };
    let mut ireq = InstantiateVnfRequest::new("small");
    ireq.ext_virtual_links = vec![link("ext1", "net-a")?];
    let r = lcm
        .instantiate(&inst.id, &pkg, &ireq, &pins(&[("VDU1", big[0])]))
        .await
        .map_err(|e| chain(&e))?;
    let outcome = async {
        ensure!(r.is_completed(), "instantiate: {}", describe(&r));
        let heat = cloud.heat();
        let nova = cloud.nova();
        let stack_of = |i: &VnfInstance| -> Result<StackId, String> {
            i.metadata
                .as_ref()
                .and_then(|m| m.get(STACK_ID_KEY))
                .and_then(Value::as_str)
                .map(StackId::from)
                .ok_or_else(|| format!("no stack id: {:?}", i.metadata))
        };
        let stack = stack_of(&r.instance)?;
        let first = vnfcs(&r.instance)
            .get("VDU1-0")
            .map(|v| v.0.clone())
            .ok_or_else(|| "no VDU1-0".to_owned())?;
        let output = |s: &vnfm_core::driver::Stack| {
            s.outputs
                .iter()
                .find(|o| o.output_key == "ext_net")
                .map(|o| o.output_value.clone())
        };
        // Real Heat 27 shows a `json` parameter as the JSON text it was given (a string), not
        // as an object: read it either way.
        let nfv_of = |s: &vnfm_core::driver::Stack| -> Value {
            match &s.parameters["nfv"] {
                Value::String(t) => serde_json::from_str(t).unwrap_or(Value::Null),
                v => v.clone(),
            }
        };
        let s = heat.show_stack(&stack).await.map_err(|e| chain(&e))?;
        ensure!(
            nfv_of(&s)["CP"]["VDU1_CP1-0"]["network"] == "net-a",
            "nfv after instantiate: {}",
            s.parameters["nfv"]
        );
        ensure!(
            output(&s) == Some(json!("net-a")),
            "output ext_net: {:?}",
            s.outputs
        );

        let changed = lcm
            .change_ext_conn(
                &inst.id,
                &pkg,
                &ChangeExtVnfConnectivityRequest::new(vec![link("ext2", "net-b")?]),
                &OperationOptions::default(),
            )
            .await
            .map_err(|e| format!("change_ext_conn: {}", chain(&e)))?;
        ensure!(
            changed.is_completed(),
            "change_ext_conn: {}",
            describe(&changed)
        );
        let s = heat.show_stack(&stack).await.map_err(|e| chain(&e))?;
        ensure!(
            s.stack_status.to_string() == "UPDATE_COMPLETE",
            "stack {stack} is {}: {}",
            s.stack_status,
            s.stack_status_reason
        );
        ensure!(
            nfv_of(&s)["CP"]["VDU1_CP1-0"]["network"] == "net-b"
                && nfv_of(&s)["CP"]["VDU1_CP1"]["network"] == "net-b",
            "nfv after the change: {}",
            s.parameters["nfv"]
        );
        let after = vnfcs(&changed.instance);
        ensure!(
            after.keys().map(String::as_str).collect::<Vec<_>>() == ["VDU1-0"]
                && after["VDU1-0"].0 == first,
            "VNFCs after the change: {after:?} (VDU1-0 was {first})"
        );
        ensure!(
            output(&s) == Some(json!("net-b")),
            "output ext_net: {:?}",
            s.outputs
        );
        let server = nova
            .show_server(&ServerId::from(first.as_str()))
            .await
            .map_err(|e| chain(&e))?;
        ensure!(
            server.status == "ACTIVE",
            "VDU1-0 ({first}) is {}",
            server.status
        );
        let links: Vec<(String, String)> = changed
            .instance
            .instantiated_vnf_info
            .iter()
            .flat_map(|i| i.ext_virtual_link_info.iter())
            .map(|l| (l.id.clone(), l.resource_handle.resource_id.clone()))
            .collect();
        ensure!(
            links == [("ext2".to_owned(), "net-b".to_owned())],
            "extVirtualLinkInfo: {links:?}"
        );
        Ok(())
    }
    .await;
    let cleaned = terminate(&lcm, &inst.id).await;
    outcome.and(cleaned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lcm_scenarios_against_real_openstack() {
    if !vnfm_core::vectors::real_suite_enabled(
        "VNFM_TEST_OPENSTACK",
        "real-openstack",
        module_path!(),
        "set VNFM_TEST_OPENSTACK=1 and the OS_* variables of a cloud with a \
             small zone (see the header of tests/real_scenarios.rs) to run the LCM scenarios \
             against real Keystone, Nova and Heat",
    ) {
        return;
    }
    let small = std::env::var("VNFM_OS_TEST_SMALL_ZONE")
        .ok()
        .filter(|z| !z.is_empty())
        .expect(
            "VNFM_OS_TEST_SMALL_ZONE: a zone whose hosts cannot hold an m1.small \
             (scripts/openstack-dev.sh prints it when started with VNFM_OS_SMALL_HOSTS)",
        );
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/os-vnf");
    let pkg = vnfm_core::package::fs::load(&dir).expect("examples/packages/os-vnf");
    let cloud = OpenStack::from_env().expect("OS_* configuration");
    let zones = cloud
        .nova()
        .list_zones(ListZones::default())
        .await
        .expect("zone listing");
    let hosts: BTreeMap<ZoneId, BTreeSet<String>> = zones
        .iter()
        .filter(|z| z.available)
        .map(|z| {
            (
                z.name.clone(),
                z.hosts
                    .iter()
                    .flatten()
                    .map(|h| h.name.to_string())
                    .collect(),
            )
        })
        .collect();
    let small = ZoneId::from(small.as_str());
    assert!(
        hosts.contains_key(&small),
        "the small zone {small} is not an available zone: {hosts:?}"
    );
    let mut small_zones: Vec<ZoneId> = std::env::var("VNFM_OS_TEST_SMALL_ZONES")
        .unwrap_or_default()
        .split_whitespace()
        .map(ZoneId::from)
        .filter(|z| *z != small)
        .collect();
    small_zones.insert(0, small.clone());
    for z in &small_zones {
        assert!(
            hosts.contains_key(z),
            "the small zone {z} is not an available zone: {hosts:?}"
        );
    }
    let fx = Fx {
        pkg,
        small,
        small_zones,
        hosts,
    };
    let f = &fx;
    let suite: Vec<(&str, Run<'_>)> = vec![
        (
            "anti_affinity_reselects",
            Box::pin(anti_affinity_reselects(f)),
        ),
        (
            "affinity_reselects_together",
            Box::pin(affinity_reselects_together(f)),
        ),
        (
            "missing_image_is_not_reselected",
            Box::pin(missing_image_is_not_reselected(f)),
        ),
        (
            "scale_out_and_heal_reselect",
            Box::pin(scale_out_and_heal_reselect(f)),
        ),
        (
            "revoked_token_reauthenticates",
            Box::pin(revoked_token_reauthenticates(f)),
        ),
        ("asg_group_reselects", Box::pin(asg_group_reselects(f))),
        (
            "asg_group_via_other_small_zone",
            Box::pin(asg_group_via_other_small_zone(f)),
        ),
        ("deletes_are_awaited", Box::pin(deletes_are_awaited(f))),
        (
            "ha_intent_server_group_is_enforced",
            Box::pin(ha_intent_server_group_is_enforced(f)),
        ),
        (
            "interrupted_instantiate_retries_or_rolls_back",
            Box::pin(interrupted_instantiate_retries_or_rolls_back(f)),
        ),
        (
            "heat_engine_killed_during_create",
            Box::pin(heat_engine_killed_during_create(f)),
        ),
        (
            "keystone_restarted_mid_operation",
            Box::pin(keystone_restarted_mid_operation(f)),
        ),
        (
            "nova_unavailable_for_a_while",
            Box::pin(nova_unavailable_for_a_while(f)),
        ),
        (
            "stack_in_progress_past_the_timeout",
            Box::pin(stack_in_progress_past_the_timeout(f)),
        ),
        (
            "operate_stops_and_starts_servers",
            Box::pin(operate_stops_and_starts_servers(f)),
        ),
        (
            "change_flavour_updates_the_stack_in_place",
            Box::pin(change_flavour_updates_the_stack_in_place(f)),
        ),
        (
            "cancel_while_processing_then_roll_back",
            Box::pin(cancel_while_processing_then_roll_back(f)),
        ),
        (
            "change_ext_conn_updates_the_stack_in_place",
            Box::pin(change_ext_conn_updates_the_stack_in_place(f)),
        ),
        (
            "nfvo_grant_zones_are_used",
            Box::pin(nfvo_grant_zones_are_used(f)),
        ),
    ];
    let only = std::env::var("VNFM_TEST_ONLY").unwrap_or_default();
    let names: Vec<&str> = suite.iter().map(|(n, _)| *n).collect();
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, run) in suite {
        if !only.is_empty() && !name.contains(&only) {
            continue;
        }
        ran += 1;
        let t = Instant::now();
        let r = run.await;
        let secs = t.elapsed().as_secs_f64();
        match r {
            Ok(()) => eprintln!("ok     {name} ({secs:.1}s)"),
            Err(e) => {
                eprintln!("FAILED {name} ({secs:.1}s): {e}");
                failed.push(format!("{name}: {e}"));
            }
        }
    }
    // A filter that matches nothing ran nothing: that is no pass.
    assert!(
        ran > 0,
        "VNFM_TEST_ONLY={only:?} matches no scenario of {names:?}"
    );
    assert!(
        failed.is_empty(),
        "failed scenarios:\n{}",
        failed.join("\n")
    );
}
