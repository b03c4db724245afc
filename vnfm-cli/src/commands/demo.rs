//! `vnfm demo`: the main job end to end on the built-in simulated cloud, narrated.
//!
//! Needs no file: the demo package and cloud are built into the binary (the same files are under
//! `examples/`), the state is kept in memory. The story:
//!
//! 1. the cloud: four zones, AZ-1 too small for the VNF's flavors;
//! 2. the package: VDU1 ×2 and VDU2 ×1, every VNFC in a zone of its own (zone anti-affinity,
//!    best effort), VDU1 instances on distinct hosts;
//! 3. an NFVO grants VDU1-0 into AZ-1; the local granter places the others;
//! 4. instantiate: the stack fails in AZ-1 with Nova's "No valid host was found", reselection
//!    excludes AZ-1 and moves VDU1-0 to the zone that still honours the anti-affinity;
//! 5. scale out VDU1: the only zone left that honours the anti-affinity is AZ-1, which fails
//!    again; with no compliant zone left the best-effort constraint is relaxed, and reported;
//! 6. heal VDU1-0: re-created, the other VNFCs untouched;
//! 7. auto-heal from Prometheus: Alertmanager's webhooks (as `vnfm serve` receives them on
//!    `POST /alert/auto_healing`) report two VNFCs down, one of them twice; the alert handler
//!    of `vnfm_core::alert` gathers them into one window, drops the repeat, and the window
//!    closes into ONE heal of both VNFCs, `isAutomaticInvocation` true (the window's time is
//!    simulated: the handler is sans-IO);
//! 8. terminate;
//! 9. reserve capacity for the next rollout in the OPNFV Promise ledger (what `vnfm provider
//!    add` and `vnfm reservation create` do): a second request that overlaps it does not fit
//!    and is answered with a counter-offer;
//! 10. the rollout's grant draws the VNFCs placed in the reserved zone from the reservation
//!     (`GrantInfo.reservationId`; what `vnfm instantiate --reservation` does before it
//!     creates the stack);
//! 11. hardware-aware pod affinity (`demo_hw`, four steps): three worker VMs on three hosts
//!     labelled on their nodes, a CNF spread over the hosts, a live migration that puts two
//!     workers on one host, `verify` finding it and `reconcile` fixing it.

use std::fmt::Write as _;
use std::sync::Arc;

use chrono::Duration;
use serde::Serialize;
use vnfm_core::alert::{Action, AlertHandler, Endpoint, PrometheusPluginConfig};
use vnfm_core::driver::Store;
use vnfm_core::driver::{ListZones, ZoneCatalog};
use vnfm_core::id::{VnfInstanceId, ZoneId};
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, ScaleType, ScaleVnfRequest,
    TerminateVnfRequest, TerminationType, VnfInstance,
};
use vnfm_core::lifecycle::{Drivers, LcmConfig, Lifecycle, OperationOptions, OperationReport};
use vnfm_core::placement::Selection;
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;

use crate::app::runtime;
use crate::builtin;
use crate::cli::DemoArgs;
use crate::error::CliError;
use crate::output::Output;
use crate::render::lcm::{human_operation, vnfc_lines, VnfcLine};
use crate::render::package;
use crate::render::promise::amounts;
use crate::report::{reports, Report, Version};

/// One step of the demo in `--json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DemoStep {
    /// What the step does.
    pub title: String,
    /// The narrative of the step (the human output).
    pub narrative: String,
    /// The operation occurrence, for LCM steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vnf_lcm_op_occ: Option<vnfm_core::lcm::VnfLcmOpOcc>,
    /// The VNFCs after the step.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vnfcs: Vec<VnfcLine>,
}

/// What `vnfm demo --json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DemoReport {
    /// The seed used.
    pub seed: u64,
    /// The steps in order.
    pub steps: Vec<DemoStep>,
    /// True when every step went as the story says.
    pub ok: bool,
    /// The format version.
    pub version: Version,
}

reports!(DemoReport);

fn op_step(title: &str, r: &OperationReport) -> DemoStep {
    DemoStep {
        title: title.to_owned(),
        narrative: human_operation(&r.op_occ, &r.instance),
        vnf_lcm_op_occ: Some(r.op_occ.clone()),
        vnfcs: vnfc_lines(&r.instance),
    }
}

/// `vnfm demo`.
///
/// # Errors
/// Only if the built-in files or the simulator misbehave (exit 1), or the output cannot be
/// written.
pub fn run(args: &DemoArgs, out: Output) -> Result<(), CliError> {
    let report = runtime()?.block_on(story(args.seed, out))?;
    let mut human = String::new();
    for (i, s) in report.steps.iter().enumerate() {
        let _ = writeln!(human, "== {}. {}", i + 1, s.title);
        human.push_str(&s.narrative);
        human.push('\n');
    }
    let _ = writeln!(
        human,
        "{}",
        if report.ok {
            "The deployment survived a full zone twice (once by reselection, once by relaxing a best-effort constraint) and healed itself from Prometheus alerts; a live migration that put two CNF replicas on one physical host was found and undone."
        } else {
            "The demo did not go as planned: see the steps above."
        }
    );
    out.data(&human, &report)?;
    if report.ok {
        Ok(())
    } else {
        Err(CliError::Usage("the demo did not go as planned".into()))
    }
}

async fn story(seed: u64, out: Output) -> Result<DemoReport, CliError> {
    let cloud = builtin::demo_cloud()?;
    let pkg = builtin::demo_package()?;
    let sim = SimCloud::new(cloud, seed);
    let store = Arc::new(MemoryStore::new());
    let drivers = Drivers {
        stacks: Arc::new(sim.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: store.clone(),
        clock: crate::app::clock(),
        cluster: None,
    };
    let mut config = LcmConfig::standard()?;
    config.reselect_zones = true;
    config.fallback_best_effort = true;
    config.selection = Selection::Random;
    // The story is the spec's: a granter blind to capacity (as an NFVO without capacity
    // information is), so that the scale-out meets the full zone and relaxes a constraint.
    config.grant_selection = Selection::Random;
    config.seed = seed;
    config.vim_connection_id = "vim-sim".into();
    let lcm = Lifecycle::new(drivers, config);
    let mut steps = Vec::new();
    let mut ok = true;

    // 1. The cloud.
    out.progress("listing the simulated cloud's zones");
    let zones = sim.list_zones(ListZones::default()).await?;
    let mut n = String::new();
    for z in &zones {
        let free = z.free().unwrap_or_default();
        let _ = writeln!(
            n,
            "  {}: {} host(s), {} vCPU / {} MiB / {} GiB free",
            z.name,
            z.hosts.as_ref().map_or(0, Vec::len),
            free.vcpus,
            free.memory_mb,
            free.disk_gb
        );
    }
    n.push_str("  AZ-1's hosts are too small for an m1.small (VDU1) or an m1.medium (VDU2).\n");
    steps.push(DemoStep {
        title: "The simulated cloud (built in: examples/clouds/demo.yaml)".into(),
        narrative: n,
        vnf_lcm_op_occ: None,
        vnfcs: Vec::new(),
    });

    // 2. The package.
    steps.push(DemoStep {
        title: "The VNF package (built in: examples/packages/demo-vnf)".into(),
        narrative: package::human(&package::report(&pkg)),
        vnf_lcm_op_occ: None,
        vnfcs: Vec::new(),
    });

    // 3-4. Create and instantiate with an NFVO grant of VDU1-0 into AZ-1.
    let mut req = CreateVnfRequest::new(pkg.descriptor_id.clone());
    req.vnf_instance_name = Some("demo".into());
    let inst = lcm.create(&pkg, &req).await?;
    out.progress("instantiating with VDU1-0 granted into AZ-1");
    let opts = OperationOptions {
        pinned: [("VDU1-0".to_owned(), ZoneId::from("AZ-1"))]
            .into_iter()
            .collect(),
        automatic: false,
        ..OperationOptions::default()
    };
    let mut inst_req = InstantiateVnfRequest::new("default");
    // Opted in to auto-heal (step 7), as `PATCH vnfConfigurableProperties` would.
    inst_req.vnf_configurable_properties = serde_json::from_value(serde_json::json!({
        "isAutohealEnabled": true
    }))
    .map_err(|e| CliError::Usage(format!("demo instantiate request: {e}")))?;
    let r = lcm.instantiate(&inst.id, &pkg, &inst_req, &opts).await?;
    ok &= r.is_completed() && r.op_occ.attempts.len() >= 2;
    let mut s = op_step(
        "Instantiate: the NFVO grants VDU1-0 into AZ-1, which is full; reselection saves the deployment",
        &r,
    );
    s.narrative.insert_str(
        0,
        &format!("  VNF instance {} created (NOT_INSTANTIATED)\n", inst.id),
    );
    steps.push(s);

    // 5. Scale out.
    out.progress("scaling out VDU1");
    let r = lcm
        .scale(
            &inst.id,
            &pkg,
            &ScaleVnfRequest::new(ScaleType::ScaleOut, "VDU1_scale"),
            &OperationOptions::default(),
        )
        .await?;
    ok &= r.is_completed();
    steps.push(op_step(
        "Scale out VDU1: no zone honours the anti-affinity any more, so the best-effort constraint is relaxed",
        &r,
    ));

    // 6. Heal.
    out.progress("healing VDU1-0");
    let heal = HealVnfRequest {
        vnfc_instance_id: vec!["VDU1-0".into()],
        cause: Some("demo: VDU1-0 stopped answering".into()),
        ..HealVnfRequest::default()
    };
    let r = lcm
        .heal(&inst.id, &pkg, &heal, &OperationOptions::default())
        .await?;
    ok &= r.is_completed();
    steps.push(op_step(
        "Heal VDU1-0: re-created; the other VNFCs keep their servers",
        &r,
    ));

    // 7. Auto-heal from Prometheus alerts.
    out.progress("auto-healing from Prometheus alerts");
    let before = store.instance(&inst.id).await?;
    let (step, healed) = auto_heal(&lcm, &pkg, &before).await?;
    ok &= healed;
    steps.push(step);

    // 8. Terminate.
    out.progress("terminating");
    let r = lcm
        .terminate(
            &inst.id,
            &TerminateVnfRequest {
                termination_type: TerminationType::Forceful,
                graceful_termination_timeout: None,
                additional_params: None,
            },
            &OperationOptions::default(),
        )
        .await?;
    ok &= r.is_completed() && sim.server_ids().is_empty();
    steps.push(op_step("Terminate: the stack and its servers are gone", &r));

    // 8-9. Reservations.
    out.progress("reserving capacity for the next rollout");
    let (reserve_step, grant_step, fine) = reservations(&sim, &pkg, seed).await?;
    ok &= fine;
    steps.push(reserve_step);
    steps.push(grant_step);

    // 10-13. Hardware-aware affinity on a cloud whose workers join a Kubernetes cluster.
    let (hw, fine) = super::demo_hw::chapter(seed, out).await?;
    ok &= fine;
    steps.extend(hw.into_iter().map(|s| {
        DemoStep {
            title: s.title,
            narrative: s.narrative,
            vnfcs: s
                .report
                .as_ref()
                .map(|r| vnfc_lines(&r.instance))
                .unwrap_or_default(),
            vnf_lcm_op_occ: s.report.map(|r| r.op_occ),
        }
    }));

    Ok(DemoReport {
        seed,
        steps,
        ok,
        version: Version,
    })
}

/// The demo's clock for the ledger: a fixed instant, so the narrative is the same every run.
fn demo_time(hours: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(1_893_456_000, 0).unwrap_or_default()
        + chrono::Duration::hours(hours)
}

/// Steps 8 and 9: a reservation, a counter-offer, and a grant that draws from the reservation.
async fn reservations(
    sim: &SimCloud,
    pkg: &vnfm_core::package::VnfPackage,
    seed: u64,
) -> Result<(DemoStep, DemoStep, bool), CliError> {
    use vnfm_core::reservation::{Capacity, LedgerError, ReservationRequest};

    let zones = sim.list_zones(ListZones::default()).await?;
    let mut book = crate::promise::PromiseBook::from_catalogue(&zones, seed, demo_time(0))?;
    let mut ok = true;
    let mut n = String::new();
    let _ = writeln!(
        n,
        "  the ledger holds the free capacity of every zone from {} on (demo time)",
        demo_time(0).to_rfc3339()
    );
    let first = book
        .ledger
        .create_reservation(
            ReservationRequest::new(
                "AZ-3",
                Capacity::compute(24, 32768, 3)
                    .with(vnfm_core::reservation::ResourceLine::Size, 200),
            )
            .with_window(demo_time(1), demo_time(3))
            .with_id("rollout"),
            &mut book.ids,
            demo_time(0),
        )?
        .value;
    let _ = writeln!(
        n,
        "  reservation {} in AZ-3: {} over [{}, {})",
        first.id,
        amounts(&first.capacity),
        first.start.to_rfc3339(),
        first.end.to_rfc3339()
    );
    match book.ledger.create_reservation(
        ReservationRequest::new("AZ-3", Capacity::compute(16, 8192, 2))
            .with_window(demo_time(2), demo_time(4)),
        &mut book.ids,
        demo_time(0),
    ) {
        Err(LedgerError::DoesNotFit { offer, .. }) => {
            let _ = writeln!(
                n,
                "  another 16 cores over [{}, {}) do not fit; the counter-offer: {} over that \
                 window, or all of it from {}",
                demo_time(2).to_rfc3339(),
                demo_time(4).to_rfc3339(),
                amounts(&offer.largest),
                offer
                    .earliest
                    .map_or_else(|| "nowhere".to_owned(), |w| w.start.to_rfc3339())
            );
            ok &= offer.largest.cores == 8 && offer.earliest.map(|w| w.start) == Some(first.end);
        }
        other => {
            ok = false;
            let _ = writeln!(n, "  unexpected: the overlapping request gave {other:?}");
        }
    }
    let reserve = DemoStep {
        title: "Reserve capacity for the next rollout (OPNFV Promise): an overlapping request gets a counter-offer".into(),
        narrative: n,
        vnf_lcm_op_occ: None,
        vnfcs: Vec::new(),
    };

    // The grant of the rollout, capacity-aware: the largest zone, AZ-3, gets a VNFC.
    let drivers = Drivers {
        stacks: Arc::new(sim.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(MemoryStore::new()),
        clock: crate::app::clock(),
        cluster: None,
    };
    let mut config = LcmConfig::standard()?;
    config.fallback_best_effort = true;
    config.selection = Selection::CapacityAware;
    config.grant_selection = Selection::CapacityAware;
    config.seed = seed;
    let lcm = Lifecycle::new(drivers, config);
    let mut inst = vnfm_core::lcm::VnfInstance::new("rollout", pkg.descriptor_id.clone());
    inst.instantiation_state = Some(vnfm_core::lcm::InstantiationState::NotInstantiated);
    let mut n = String::new();
    match lcm
        .grant_only(
            pkg,
            &inst,
            vnfm_core::lifecycle::GrantOnly::Instantiate {
                flavour_id: "default".into(),
            },
        )
        .await?
    {
        Ok((planned, mut grant)) => {
            let request = planned.request;
            let flavour = pkg
                .flavour("default")
                .ok_or_else(|| CliError::Usage("the demo package has no flavour default".into()))?;
            let drawn = vnfm_core::lifecycle::granter::draw_reservation(
                &mut grant,
                &request,
                flavour,
                &first.id,
                &mut book.ledger,
                &mut book.ids,
                demo_time(1),
            )?;
            for a in &drawn {
                let _ = writeln!(
                    n,
                    "  {} granted into AZ-3 draws {} from reservation {} (reservationId in the grant)",
                    a.instance_ref.as_deref().unwrap_or("-"),
                    amounts(&a.capacity),
                    first.id
                );
            }
            let left = book
                .ledger
                .reservation(&first.id)
                .map(|r| r.remaining)
                .unwrap_or_default();
            let _ = writeln!(n, "  left in the reservation: {}", amounts(&left));
            ok &= !drawn.is_empty()
                && grant
                    .add_resources
                    .iter()
                    .any(|g| g.reservation_id.as_deref() == Some(first.id.as_str()));
        }
        Err((_, _, detail)) => {
            ok = false;
            let _ = writeln!(n, "  no grant: {detail}");
        }
    }
    let grant = DemoStep {
        title: "Grant the rollout: the VNFCs placed in the reserved zone draw from the reservation"
            .into(),
        narrative: n,
        vnf_lcm_op_occ: None,
        vnfcs: Vec::new(),
    };
    Ok((reserve, grant, ok))
}

/// An Alertmanager webhook (version 4) of firing alerts, as `vnfm serve` receives it: one
/// alert per `(vnfc, fingerprint)`, all started at `starts_at`.
fn webhook(instance: &VnfInstanceId, alerts: &[(&str, &str)], starts_at: &str) -> Vec<u8> {
    let alerts: Vec<serde_json::Value> = alerts
        .iter()
        .map(|(vnfc, fingerprint)| {
            serde_json::json!({
                "status": "firing",
                "labels": {
                    "alertname": "VnfcDown",
                    "receiver_type": "tacker",
                    "function_type": "auto_heal",
                    "vnf_instance_id": instance.to_string(),
                    "vnfc_info_id": vnfc,
                },
                "annotations": {"summary": format!("{vnfc} stopped answering")},
                "startsAt": starts_at,
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://127.0.0.1:9090/graph",
                "fingerprint": fingerprint,
            })
        })
        .collect();
    serde_json::json!({
        "version": "4",
        "groupKey": "{}:{function_type=\"auto_heal\"}",
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "vnfm-auto-heal",
        "groupLabels": {"function_type": "auto_heal"},
        "commonLabels": {"function_type": "auto_heal"},
        "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9093",
        "alerts": alerts,
    })
    .to_string()
    .into_bytes()
}

/// Step 7: two webhooks through the alert handler, the window closing into one automatic heal.
/// Returns the step and whether it went as the story says.
async fn auto_heal(
    lcm: &Lifecycle,
    pkg: &vnfm_core::package::VnfPackage,
    inst: &VnfInstance,
) -> Result<(DemoStep, bool), CliError> {
    let config = PrometheusPluginConfig {
        auto_healing: true,
        ..PrometheusPluginConfig::default()
    };
    let window = config.timer_interval;
    let mut handler = AlertHandler::new(config);
    let lookup = |id: &VnfInstanceId| (id == &inst.id).then(|| inst.clone());
    let vnfcs: Vec<&str> = inst
        .instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_info.iter().map(|v| v.id.as_str()))
        .collect();
    // The last VNFC of VDU2 and the last of VDU1 go down (not the one healed by hand).
    let pick = |vdu: &str| -> String {
        vnfcs
            .iter()
            .rev()
            .find(|v| v.starts_with(vdu))
            .map_or_else(|| vdu.to_owned(), |v| (*v).to_owned())
    };
    let (a, b) = (pick("VDU2-"), pick("VDU1-"));
    let (a, b) = (a.as_str(), b.as_str());
    let t0 = lcm.drivers().clock.now();
    let starts_at = t0.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut n = String::new();
    let mut ok = true;
    let mut post = |handler: &mut AlertHandler, at, body: Vec<u8>, what: &str| {
        let _ = writeln!(n, "  {what}:");
        match handler.handle_webhook(Endpoint::AutoHealing, &body, &lookup, at) {
            Ok(outcomes) => outcomes
                .into_iter()
                .map(|o| {
                    let line = match &o.action {
                        Action::HealQueued { vnfc, due, .. } => format!(
                            "{vnfc} queued for heal, window closes at +{} s",
                            (*due - t0).num_seconds()
                        ),
                        Action::Scale(_) => "a scale (unexpected)".to_owned(),
                        Action::Ignored(r) => format!("ignored [{}]: {r}", r.label()),
                    };
                    let _ = writeln!(n, "    alert {}: {line}", o.fingerprint);
                    o.action
                })
                .collect(),
            Err(p) => {
                let _ = writeln!(n, "    answered {}: {}", p.status, p.detail);
                Vec::new()
            }
        }
    };
    let first = post(
        &mut handler,
        t0,
        webhook(
            &inst.id,
            &[(a, "a1f0c0de00000001"), (b, "a1f0c0de00000002")],
            &starts_at,
        ),
        &format!("Alertmanager posts to /alert/auto_healing at +0 s ({a} and {b} down)"),
    );
    ok &= first.len() == 2 && first.iter().all(|x| matches!(x, Action::HealQueued { .. }));
    let at = t0 + Duration::seconds(5);
    let second = post(
        &mut handler,
        at,
        webhook(&inst.id, &[(a, "a1f0c0de00000001")], &starts_at),
        &format!("Alertmanager repeats the {a} alert at +5 s"),
    );
    ok &= matches!(second.as_slice(), [Action::Ignored(r)] if r.label() == "duplicate");
    ok &= handler.poll_due(at).is_empty();
    let due = t0 + Duration::seconds(i64::try_from(window).unwrap_or(i64::MAX));
    let mut jobs = handler.poll_due(due);
    let _ = writeln!(
        n,
        "  the {window} s window closes: {} heal job(s)",
        jobs.len()
    );
    ok &= jobs.len() == 1;
    let Some(mut job) = jobs.pop() else {
        return Ok((
            DemoStep {
                title: "Auto-heal from Prometheus alerts".into(),
                narrative: n,
                vnf_lcm_op_occ: None,
                vnfcs: Vec::new(),
            },
            false,
        ));
    };
    job.retain_existing(inst);
    let mut want = vec![a.to_owned(), b.to_owned()];
    want.sort();
    let mut got = job.vnfcs.clone();
    got.sort();
    ok &= got == want;
    let servers = |i: &VnfInstance| -> Vec<(String, String)> {
        vnfc_lines(i)
            .into_iter()
            .map(|l| (l.id, l.server_id))
            .collect()
    };
    let old = servers(inst);
    let r = lcm
        .heal(&inst.id, pkg, &job.request(), &job.options())
        .await?;
    handler.mark_idle(&inst.id);
    let new = servers(&r.instance);
    // The healed VNFCs have new servers, the others keep theirs.
    let kept = old.iter().filter(|o| new.contains(o)).count();
    ok &= r.is_completed() && r.op_occ.is_automatic_invocation && kept + got.len() == old.len();
    let mut step = op_step(
        "Auto-heal from Prometheus alerts: two VNFCs down, one alert repeated, ONE automatic heal",
        &r,
    );
    let _ = writeln!(
        n,
        "  one heal of {} (isAutomaticInvocation: {}), {kept} other VNFC(s) untouched",
        job.vnfcs.join(", "),
        r.op_occ.is_automatic_invocation
    );
    step.narrative.insert_str(0, &n);
    Ok((step, ok))
}
