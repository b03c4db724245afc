//! The LCM commands: `grant`, `instantiate`, `scale`, `heal`, `terminate`, `instance`, `op`.
//!
//! Each opens the state file, builds the drivers (the simulated cloud, continued from the state
//! file, or a real OpenStack with `--vim openstack`: see [`crate::vim`]), runs one operation of
//! [`vnfm_core::lifecycle::Lifecycle`] and prints the result. The simulated cloud's state is
//! saved in the state file after every operation, so scripted runs continue where the previous
//! command stopped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use vnfm_core::driver::{OpOccFilter, Store};
use vnfm_core::id::{OpOccId, VnfInstanceId, ZoneId};
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, ScaleType, ScaleVnfRequest,
    TerminateVnfRequest, TerminationType, VnfInstance,
};
use vnfm_core::lifecycle::{
    GrantOnly, Interrupt, Lifecycle, OpRequest, OperationOptions, OperationReport, StartOptions,
};
use vnfm_core::package::VnfPackage;
use vnfm_core::reservation::Allocation;
use vnfm_core::sim::SimCloud;

use crate::app::{check_vim, env, lcm_config, open_state, runtime, Env};
use crate::cli::{
    GrantArgs, GrantOperation, HealArgs, InstanceCommand, InstantiateArgs, OpCommand,
    PlacementArgs, ScaleArgs, ScaleDirection, TerminateArgs,
};
use crate::config::{Config, VimKind};
use crate::display::escape;
use crate::error::CliError;
use crate::inputs::{default_flavour, load_cloud, load_package};
use crate::output::Output;
use crate::promise::{book_error, draw_grant, start_error, DrawFrom, FileBook};
use crate::render::lcm::{human_operation, sol, vnfc_lines};
use crate::render::progress::ProgressLines;
use crate::render::promise::{amounts, human_drawn};
use crate::report::{
    GrantFailure, GrantReport, InstanceReport, InstancesReport, OpOccReport, OpOccsReport,
    OperationResultReport, PlacementOutcome, Version,
};
use crate::vim::{save_sim, Vim};

/// A store error, with "not found" turned into a usage error naming what and the state file.
fn not_found(config: &Config, what: &str, id: &str, e: vnfm_core::driver::DriverError) -> CliError {
    if e.is_not_found() {
        CliError::Usage(format!(
            "no {what} {id} in {}",
            config.state_path().display()
        ))
    } else {
        CliError::Driver(e)
    }
}

fn parse_zones(specs: &[String]) -> Result<BTreeMap<String, ZoneId>, CliError> {
    let mut out: BTreeMap<String, ZoneId> = BTreeMap::new();
    for s in specs {
        let (k, z) = match s.split_once('=') {
            Some((k, z)) if !k.is_empty() && !z.is_empty() => (k, z),
            _ => {
                return Err(CliError::Usage(format!(
                    "--zone {s:?}: expected VNFC=ZONE or VDU=ZONE, e.g. --zone VDU1-0=AZ-1"
                )))
            }
        };
        if let Some(before) = out.insert(k.to_owned(), ZoneId::from(z)) {
            return Err(CliError::Usage(format!(
                "--zone {s:?}: {k} is already pinned to {before}; expected one --zone per VNFC \
                 or VDU"
            )));
        }
    }
    Ok(out)
}

fn print_report(out: Output, r: &OperationReport) -> Result<(), CliError> {
    print_report_drawn(out, r, &[], &[])
}

/// [`print_report`] with the allocations drawn from or given back to reservations.
fn print_report_drawn(
    out: Output,
    r: &OperationReport,
    allocations: &[vnfm_core::reservation::Allocation],
    released: &[vnfm_core::reservation::Allocation],
) -> Result<(), CliError> {
    let data = OperationResultReport {
        vnf_lcm_op_occ: &r.op_occ,
        vnf_instance: &r.instance,
        vnfcs: vnfc_lines(&r.instance),
        grant: r.grant.as_ref(),
        allocations,
        released,
        version: Version,
    };
    let mut human = human_operation(&r.op_occ, &r.instance);
    human.push_str(&human_drawn(allocations, released));
    out.data(&human, &data)?;
    match r.failure {
        None => Ok(()),
        Some(kind) => Err(CliError::Operation {
            op_occ: r.op_occ.id.to_string(),
            state: sol(&r.op_occ.operation_state),
            kind,
            detail: r
                .op_occ
                .error
                .as_ref()
                .map(|e| e.detail.clone())
                .unwrap_or_default(),
        }),
    }
}

/// `vnfm instantiate`.
///
/// # Errors
/// See the exit codes: 2 for bad input or state, 3 / 4 / 5 / 1 for an operation that failed.
pub fn instantiate(config: &Config, args: &InstantiateArgs, out: Output) -> Result<(), CliError> {
    let pinned = parse_zones(&args.zones)?;
    runtime()?.block_on(async {
        // --intent: the region (and its VIM) and the realised package, decided by the core.
        let intent = match &args.intent {
            Some(_) => {
                let pkg = load_package(args.package.as_deref(), config, None)?;
                crate::intent::plan(config, args, &pkg, out).await?
            }
            None => None,
        };
        let config = intent.as_ref().map_or(config, |p| &p.config);
        let mut env = env(config, args.cloud.as_deref(), &args.placement).await?;
        show_progress(&mut env, out);
        let inst = match &args.instance {
            Some(id) => env
                .store
                .instance(&VnfInstanceId::from(id.as_str()))
                .await
                .map_err(|e| not_found(config, "VNF instance", id, e))?,
            None => {
                let pkg = load_package(args.package.as_deref(), config, None)?;
                let mut req = CreateVnfRequest::new(pkg.descriptor_id.clone());
                req.vnf_instance_name = args.name.clone();
                if let Some(p) = &intent {
                    req.metadata = Some(crate::intent::record_metadata(p)?);
                }
                env.lcm.create(&pkg, &req).await?
            }
        };
        let pkg = match &intent {
            Some(p) => p.realised.package.clone(),
            None => load_package(args.package.as_deref(), config, Some(&inst.vnfd_id))?,
        };
        let flavour = default_flavour(&pkg, args.flavour.as_deref())?;
        let mut req = InstantiateVnfRequest::new(flavour.clone());
        // --reservation: drawn before any stack exists (the core's flow, see `run`); a
        // refusal deletes the instance this command created.
        req.additional_params = reservation_param(args.reservation.as_deref());
        out.progress(&format!("instantiating {} (flavour {flavour})", inst.id));
        let opts = OperationOptions {
            pinned,
            automatic: false,
            interrupt: Some(interrupt_on_signals()),
        };
        let run = Run {
            now: args.now,
            delete_on_refusal: args.instance.is_none(),
        };
        let request = OpRequest::Instantiate(Box::new(req));
        let (r, kept, released) = run.start(&env, &inst.id, request, Some(&pkg), opts).await?;
        print_report_drawn(out, &r, &kept, &released)
    })
}

/// Prints the operation's progress lines as it commits ([`ProgressLines`]), where `out` shows
/// progress (a terminal, human mode, no `--quiet`).
fn show_progress(env: &mut Env, out: Output) {
    if out.shows_progress() {
        env.lcm.add_observer(Arc::new(ProgressLines::new(out)));
    }
}

/// `additionalParams` naming `reservation` (`--reservation`), as a client of `vnfm serve`
/// names it.
fn reservation_param(reservation: Option<&str>) -> Option<vnfm_core::grant::KeyValuePairs> {
    reservation.map(|rid| {
        let mut p = vnfm_core::grant::KeyValuePairs::new();
        p.insert(
            vnfm_core::reservation::lcm::RESERVATION_PARAM.to_owned(),
            serde_json::Value::String(rid.to_owned()),
        );
        p
    })
}

/// How a command starts its operation through [`Lifecycle::start`], with the state file's
/// ledger as the book.
#[derive(Default)]
struct Run {
    /// `--now`: the time of the ledger's changes.
    now: Option<chrono::DateTime<chrono::Utc>>,
    /// The command created the instance: deleted again when the operation is refused.
    delete_on_refusal: bool,
}

impl Run {
    /// Starts `request` on `id` and runs it; saves the simulated cloud after an operation
    /// that ran. Returns its report, the allocations it keeps and those it gave back.
    async fn start(
        &self,
        env: &Env,
        id: &VnfInstanceId,
        request: OpRequest,
        pkg: Option<&VnfPackage>,
        operation: OperationOptions,
    ) -> Result<(OperationReport, Vec<Allocation>, Vec<Allocation>), CliError> {
        let book = FileBook::new(&env.store, self.now, env.clock.as_ref());
        let opts = StartOptions {
            operation,
            book: Some(&book),
            delete_on_refusal: self.delete_on_refusal,
        };
        let started = env.lcm.start(id, request, pkg, &opts).await;
        // Saved with every commit; a command that lost the race saves nothing.
        if started.is_ok() {
            save_sim(&env.store, &env.sim).await?;
        }
        let started = started.map_err(start_error)?;
        if let Some(e) = started.ledger_failure {
            return Err(book_error("", e));
        }
        Ok((started.report, started.kept, started.released))
    }
}

async fn instance_and_package(
    env: &Env,
    config: &Config,
    id: &str,
    package: Option<&Path>,
) -> Result<(VnfInstanceId, VnfPackage), CliError> {
    let inst = env
        .store
        .instance(&VnfInstanceId::from(id))
        .await
        .map_err(|e| not_found(config, "VNF instance", id, e))?;
    let pkg = load_package(package, config, Some(&inst.vnfd_id))?;
    let pkg = crate::intent::reapply(&inst, pkg)?;
    Ok((inst.id, pkg))
}

/// `vnfm scale`.
///
/// # Errors
/// As [`instantiate`].
pub fn scale(config: &Config, args: &ScaleArgs, out: Output) -> Result<(), CliError> {
    if args.reservation.is_some() && args.direction == ScaleDirection::In {
        return Err(CliError::Usage(
            "--reservation draws the VNFCs a scale out adds; a scale in gives the allocations of \
             the VNFCs it removes back by itself"
                .into(),
        ));
    }
    runtime()?.block_on(async {
        let mut env = env(config, None, &args.placement).await?;
        show_progress(&mut env, out);
        let (id, pkg) =
            instance_and_package(&env, config, &args.instance, args.package.as_deref()).await?;
        let t = match args.direction {
            ScaleDirection::Out => ScaleType::ScaleOut,
            ScaleDirection::In => ScaleType::ScaleIn,
        };
        let mut req = ScaleVnfRequest::new(t, args.aspect.clone());
        req.number_of_steps = Some(args.steps);
        // --reservation: the VNFCs a scale-out adds are drawn from it; a scale-in gives the
        // allocations of the VNFCs it removes back (the core decides both).
        req.additional_params = reservation_param(args.reservation.as_deref());
        let run = Run {
            now: args.now,
            ..Run::default()
        };
        let (r, kept, released) = run
            .start(
                &env,
                &id,
                OpRequest::Scale(req),
                Some(&pkg),
                interruptible(),
            )
            .await?;
        print_report_drawn(out, &r, &kept, &released)
    })
}

/// `vnfm heal`.
///
/// # Errors
/// As [`instantiate`].
pub fn heal(config: &Config, args: &HealArgs, out: Output) -> Result<(), CliError> {
    runtime()?.block_on(async {
        let mut env = env(config, None, &args.placement).await?;
        show_progress(&mut env, out);
        let (id, pkg) =
            instance_and_package(&env, config, &args.instance, args.package.as_deref()).await?;
        let req = HealVnfRequest {
            vnfc_instance_id: args.vnfcs.clone(),
            cause: args.cause.clone(),
            ..HealVnfRequest::default()
        };
        let (r, _, released) = Run::default()
            .start(&env, &id, OpRequest::Heal(req), Some(&pkg), interruptible())
            .await?;
        print_report_drawn(out, &r, &[], &released)
    })
}

/// `vnfm terminate`.
///
/// # Errors
/// As [`instantiate`].
pub fn terminate(config: &Config, args: &TerminateArgs, out: Output) -> Result<(), CliError> {
    runtime()?.block_on(async {
        let mut env = env(config, None, &PlacementArgs::default()).await?;
        show_progress(&mut env, out);
        let id = VnfInstanceId::from(args.instance.as_str());
        let req = TerminateVnfRequest {
            termination_type: TerminationType::Forceful,
            graceful_termination_timeout: None,
            additional_params: None,
        };
        // A completed terminate gives back every allocation of the instance (the core decides).
        let (r, _, released) = Run::default()
            .start(&env, &id, OpRequest::Terminate(req), None, interruptible())
            .await?;
        if args.delete && r.failure.is_none() {
            env.lcm.delete(&id).await?;
        }
        print_report_drawn(out, &r, &[], &released)
    })
}

/// `vnfm grant`: the grant, or a valid "no" ([`PlacementOutcome::Infeasible`], exit 3 when
/// the constraints cannot be met, 4 when capacity is exhausted) with the request and why on
/// stdout.
///
/// # Errors
/// 2 for bad input; the errors of the VIM, the state file and `--reservation`.
pub fn grant(config: &Config, args: &GrantArgs, out: Output) -> Result<PlacementOutcome, CliError> {
    check_vim(config)?;
    let lcm_cfg = lcm_config(config, &args.placement)?;
    runtime()?.block_on(async {
        // A grant changes nothing: the cloud is the state file's simulated cloud when there is
        // one and --cloud is not given, else a fresh one (or the real OpenStack); the instance
        // is transient unless scaling one out.
        let (vim, inst, pkg, op) = match args.operation {
            GrantOperation::Instantiate => {
                let vim = match config.vim.kind {
                    VimKind::Sim => {
                        let (file, _) = load_cloud(args.cloud.as_deref().or(config.vim.cloud.as_deref()))?;
                        Vim::simulated(SimCloud::new(file, config.vim.seed))
                    }
                    VimKind::Openstack => Vim::open(&open_state(config).await?, args.cloud.as_deref(), config).await?,
                };
                let pkg = load_package(args.package.as_deref(), config, None)?;
                let flavour = default_flavour(&pkg, args.flavour.as_deref())?;
                let mut inst = VnfInstance::new("grant-only", pkg.descriptor_id.clone());
                inst.instantiation_state = Some(vnfm_core::lcm::InstantiationState::NotInstantiated);
                (vim, inst, pkg, GrantOnly::Instantiate { flavour_id: flavour })
            }
            GrantOperation::ScaleOut => {
                let store = open_state(config).await?;
                let vim = Vim::open(&store, args.cloud.as_deref(), config).await?;
                let id = args.instance.clone().unwrap_or_default();
                let inst = store.instance(&VnfInstanceId::from(id.as_str())).await.map_err(|e| not_found(config, "VNF instance", &id, e))?;
                let pkg = load_package(args.package.as_deref(), config, Some(&inst.vnfd_id))?;
                let pkg = crate::intent::reapply(&inst, pkg)?;
                let op = GrantOnly::ScaleOut {
                    aspect_id: args.aspect.clone().unwrap_or_default(),
                    steps: args.steps,
                };
                (vim, inst, pkg, op)
            }
        };
        let drivers = vim.drivers(Arc::new(vnfm_core::store::MemoryStore::new()), crate::app::clock());
        let lcm = Lifecycle::new(drivers, lcm_cfg);
        match lcm.grant_only(&pkg, &inst, op).await? {
            Ok((planned, mut grant)) => {
                let request = planned.request;
                let allocations = match &args.reservation {
                    Some(rid) => {
                        let flavour = pkg.flavour(request.flavour_id.as_deref().unwrap_or_default()).ok_or_else(|| {
                            CliError::Usage(format!("the grant request names no flavour of {}", pkg.descriptor_id))
                        })?;
                        draw_grant(&open_state(config).await?, &mut grant, &request, flavour, DrawFrom { reservation: rid, now: args.now }, lcm.drivers().clock.as_ref()).await?
                    }
                    None => Vec::new(),
                };
                let mut human = String::new();
                let _ = writeln!(human, "grant {} for {:?} of {}", grant.id, request.operation, pkg.descriptor_id);
                for r in &request.add_resources {
                    let mut zone = grant.zone_of(&r.id).map(ToString::to_string).unwrap_or_else(|| "-".into());
                    if let Some(rid) = grant.add_resources.iter().find(|g| g.resource_definition_id == r.id).and_then(|g| g.reservation_id.as_deref()) {
                        zone.push_str(&format!(" reservation {rid}"));
                    }
                    let _ = writeln!(
                        human,
                        "  {:<8} {:<22} zone {zone}  ({})",
                        format!("{:?}", r.type_).to_uppercase(),
                        r.resource_template_id,
                        r.id
                    );
                }
                for (i, c) in request.placement_constraints.iter().enumerate() {
                    let _ = writeln!(
                        human,
                        "  placementConstraints[{i}]: {:?} at {:?} over {} resources, fallbackBestEffort {}",
                        c.affinity_or_anti_affinity,
                        c.scope,
                        c.resource.len(),
                        c.is_fallback_best_effort()
                    );
                }
                if let Some(how) = grant.additional_params.as_ref().and_then(|p| p.get(vnfm_core::lifecycle::granter::ZONE_SELECTION)) {
                    let policy = how.get("policy").and_then(|v| v.as_str()).unwrap_or_default();
                    match how.get("reason").and_then(|v| v.as_str()) {
                        Some(why) => { let _ = writeln!(human, "  zones chosen: {policy} ({why})"); }
                        None => { let _ = writeln!(human, "  zones chosen: {policy}"); }
                    }
                }
                if let Some(relaxed) = grant.additional_params.as_ref().and_then(|p| p.get("relaxedPlacementConstraints")) {
                    for r in relaxed.as_array().into_iter().flatten() {
                        let _ = writeln!(human, "  relaxed: {}", r.as_str().unwrap_or_default());
                    }
                }
                for a in &allocations {
                    let _ = writeln!(
                        human,
                        "  drew {} for {} (allocation {})",
                        amounts(&a.capacity),
                        a.instance_ref.as_deref().unwrap_or("-"),
                        a.id
                    );
                }
                let report = GrantReport {
                    grant_request: &request,
                    grant: Some(&grant),
                    allocations: &allocations,
                    failure: None,
                    version: Version,
                };
                out.data(&human, &report)?;
                Ok(PlacementOutcome::Placed)
            }
            Err((request, kind, detail)) => {
                // A valid "no" is a result: the request and why, on stdout; the exit code says
                // which no (3 infeasible, 4 capacity).
                let human = format!(
                    "no grant for the {:?} grant request ({} resource(s), {} placement \
                     constraint(s)): {detail}\n",
                    request.operation,
                    request.add_resources.len(),
                    request.placement_constraints.len()
                );
                let failure = GrantFailure {
                    failure_kind: kind,
                    detail,
                };
                let report = GrantReport {
                    grant_request: &request,
                    grant: None,
                    allocations: &[],
                    failure: Some(&failure),
                    version: Version,
                };
                out.data(&human, &report)?;
                Ok(PlacementOutcome::Infeasible {
                    kind,
                    message: format!("no grant: {}", failure.detail),
                })
            }
        }
    })
}

/// `vnfm instance show|list`.
///
/// # Errors
/// 2 for an unknown instance or an unusable state file.
pub fn instance(config: &Config, cmd: &InstanceCommand, out: Output) -> Result<(), CliError> {
    runtime()?.block_on(async {
        let store = open_state(config).await?;
        match cmd {
            InstanceCommand::Show { id } => {
                let inst = store
                    .instance(&VnfInstanceId::from(id.as_str()))
                    .await
                    .map_err(|e| not_found(config, "VNF instance", id, e))?;
                let mut human = String::new();
                let _ = writeln!(
                    human,
                    "VNF instance {} ({}) of {}: {}",
                    inst.id,
                    escape(inst.vnf_instance_name.as_deref().unwrap_or("no name")),
                    escape(&inst.vnfd_id),
                    inst.instantiation_state
                        .as_ref()
                        .map(sol)
                        .unwrap_or_else(|| "NOT_INSTANTIATED".into())
                );
                if let Some(info) = &inst.instantiated_vnf_info {
                    let _ = writeln!(human, "  flavour {}", info.flavour_id);
                    for s in &info.scale_status {
                        let max = info
                            .max_scale_levels
                            .iter()
                            .find(|m| m.aspect_id == s.aspect_id)
                            .map(|m| m.scale_level);
                        let _ = writeln!(
                            human,
                            "  aspect {}: level {} of {}",
                            s.aspect_id,
                            s.scale_level,
                            max.unwrap_or(0)
                        );
                    }
                }
                for v in vnfc_lines(&inst) {
                    let _ = writeln!(
                        human,
                        "  {:<8} zone {:<6} host {:<12} server {}",
                        v.id,
                        v.zone_id.as_deref().unwrap_or("-"),
                        v.host.as_deref().unwrap_or("-"),
                        v.server_id
                    );
                }
                let report = InstanceReport {
                    vnf_instance: &inst,
                    vnfcs: vnfc_lines(&inst),
                    version: Version,
                };
                out.data(&human, &report)
            }
            InstanceCommand::List => {
                let all = store.instances().await?;
                let mut human = String::new();
                for i in &all {
                    let _ = writeln!(
                        human,
                        "{}  {:<16} {:<16}  {} VNFC(s)",
                        i.id,
                        escape(i.vnf_instance_name.as_deref().unwrap_or("-")),
                        i.instantiation_state
                            .as_ref()
                            .map(sol)
                            .unwrap_or_else(|| "NOT_INSTANTIATED".into()),
                        vnfc_lines(i).len()
                    );
                }
                if all.is_empty() {
                    human.push_str("no VNF instance\n");
                }
                out.data(
                    &human,
                    &InstancesReport {
                        vnf_instances: &all,
                        version: Version,
                    },
                )
            }
        }
    })
}

/// Options whose interrupt is triggered by SIGINT or SIGTERM (see [`interrupt_on_signals`]).
fn interruptible() -> OperationOptions {
    OperationOptions {
        interrupt: Some(interrupt_on_signals()),
        ..OperationOptions::default()
    }
}

/// An [`Interrupt`] that SIGINT or SIGTERM triggers: the operation then ends `FAILED_TEMP`
/// ("interrupted") once its current step returns, and its occurrence says how to retry, roll
/// back or fail it. The handlers are installed now (inside the runtime); a second signal while
/// the operation winds down is taken as the first.
fn interrupt_on_signals() -> Interrupt {
    let interrupt = Interrupt::new();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        for (kind, name) in [
            (SignalKind::interrupt(), "SIGINT"),
            (SignalKind::terminate(), "SIGTERM"),
        ] {
            if let Ok(mut s) = signal(kind) {
                let i = interrupt.clone();
                tokio::spawn(async move {
                    if s.recv().await.is_some() {
                        i.trigger(name);
                    }
                });
            }
        }
    }
    interrupt
}

/// `vnfm op show|list`.
///
/// # Errors
/// 2 for an unknown occurrence or an unusable state file.
pub fn op(config: &Config, cmd: &OpCommand, out: Output) -> Result<(), CliError> {
    runtime()?.block_on(async {
        if let OpCommand::Fail { id }
        | OpCommand::Rollback { id, .. }
        | OpCommand::Retry { id, .. } = cmd
        {
            let mut env = env(config, None, &PlacementArgs::default()).await?;
            show_progress(&mut env, out);
            let op_id = OpOccId::from(id.as_str());
            if let OpCommand::Rollback { package, .. } | OpCommand::Retry { package, .. } = cmd {
                let op = env
                    .store
                    .op_occ(&op_id)
                    .await
                    .map_err(|e| not_found(config, "operation occurrence", id, e))?;
                let inst = env.store.instance(&op.vnf_instance_id).await?;
                let pkg = load_package(package.as_deref(), config, Some(&inst.vnfd_id))?;
                let pkg = crate::intent::reapply(&inst, pkg)?;
                let r = if matches!(cmd, OpCommand::Retry { .. }) {
                    env.lcm.retry(&op_id, &pkg, &interruptible()).await
                } else {
                    env.lcm.rollback(&op_id, &pkg).await
                };
                // Saved with every commit; a command that lost the race saves nothing.
                if r.is_ok() {
                    save_sim(&env.store, &env.sim).await?;
                }
                return print_report(out, &r?);
            }
            let op = env.lcm.fail(&op_id).await?;
            let inst = env.store.instance(&op.vnf_instance_id).await?;
            let report = OpOccReport {
                vnf_lcm_op_occ: &op,
                version: Version,
            };
            return out.data(&human_operation(&op, &inst), &report);
        }
        let store = open_state(config).await?;
        match cmd {
            OpCommand::Show { id } => {
                let op = store
                    .op_occ(&OpOccId::from(id.as_str()))
                    .await
                    .map_err(|e| not_found(config, "operation occurrence", id, e))?;
                let inst = store.instance(&op.vnf_instance_id).await.ok();
                let human = match &inst {
                    Some(i) => human_operation(&op, i),
                    None => format!(
                        "{} {} (operation {})\n",
                        sol(&op.operation),
                        sol(&op.operation_state),
                        op.id
                    ),
                };
                let report = OpOccReport {
                    vnf_lcm_op_occ: &op,
                    version: Version,
                };
                out.data(&human, &report)
            }
            OpCommand::List { instance } => {
                let filter = match instance {
                    Some(i) => OpOccFilter::instance(VnfInstanceId::from(i.as_str())),
                    None => OpOccFilter::all(),
                };
                let all = store.op_occs(filter).await?;
                let mut human = String::new();
                for o in &all {
                    let _ = writeln!(
                        human,
                        "{}  {:<11} {:<11} instance {}  {} attempt(s)  {}",
                        o.id,
                        sol(&o.operation),
                        sol(&o.operation_state),
                        o.vnf_instance_id,
                        o.attempts.len(),
                        o.start_time
                            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    );
                }
                if all.is_empty() {
                    human.push_str("no operation occurrence\n");
                }
                out.data(
                    &human,
                    &OpOccsReport {
                        vnf_lcm_op_occs: &all,
                        version: Version,
                    },
                )
            }
            OpCommand::Fail { .. } | OpCommand::Rollback { .. } | OpCommand::Retry { .. } => Ok(()),
        }
    })
}
