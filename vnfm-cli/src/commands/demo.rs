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
//! 7. terminate;
//! 8. reserve capacity for the next rollout in the OPNFV Promise ledger: a second request
//!    that overlaps it does not fit and is answered with a counter-offer;
//! 9. the rollout's grant draws the VNFCs placed in the reserved zone from the reservation
//!    (`GrantInfo.reservationId`).

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;
use vnfm_core::driver::{ListZones, ZoneCatalog};
use vnfm_core::id::ZoneId;
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, ScaleType, ScaleVnfRequest,
    TerminateVnfRequest, TerminationType,
};
use vnfm_core::lifecycle::{Drivers, LcmConfig, Lifecycle, OperationOptions, OperationReport};
use vnfm_core::placement::Selection;
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;

use super::lcm::{human_operation, runtime, vnfc_lines, SystemClock, VnfcLine};
use super::package;
use crate::builtin;
use crate::cli::DemoArgs;
use crate::error::CliError;
use crate::output::Output;

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
}

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
            "The deployment survived a full zone twice: once by reselection, once by relaxing a best-effort constraint."
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
    let drivers = Drivers {
        stacks: Arc::new(sim.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(MemoryStore::new()),
        clock: Arc::new(SystemClock),
    };
    let mut config = LcmConfig::standard()?;
    config.reselect_zones = true;
    config.fallback_best_effort = true;
    config.selection = Selection::Random;
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
    };
    let r = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &opts,
        )
        .await?;
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
    let heal: HealVnfRequest = serde_json::from_value(serde_json::json!({
        "vnfcInstanceId": ["VDU1-0"],
        "cause": "demo: VDU1-0 stopped answering"
    }))
    .map_err(|e| CliError::Usage(format!("demo heal request: {e}")))?;
    let r = lcm
        .heal(&inst.id, &pkg, &heal, &OperationOptions::default())
        .await?;
    ok &= r.is_completed();
    steps.push(op_step(
        "Heal VDU1-0: re-created; the other VNFCs keep their servers",
        &r,
    ));

    // 7. Terminate.
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

    Ok(DemoReport { seed, steps, ok })
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
        super::promise::amounts(&first.capacity),
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
                super::promise::amounts(&offer.largest),
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
        clock: Arc::new(SystemClock),
    };
    let mut config = LcmConfig::standard()?;
    config.fallback_best_effort = true;
    config.selection = Selection::CapacityAware;
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
        Ok((request, mut grant)) => {
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
                    super::promise::amounts(&a.capacity),
                    first.id
                );
            }
            let left = book
                .ledger
                .reservation(&first.id)
                .map(|r| r.remaining)
                .unwrap_or_default();
            let _ = writeln!(
                n,
                "  left in the reservation: {}",
                super::promise::amounts(&left)
            );
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
