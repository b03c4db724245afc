//! The LCM commands: `grant`, `instantiate`, `scale`, `heal`, `terminate`, `instance`, `op`.
//!
//! Each opens the state file, builds the drivers (the simulated cloud, continued from the state
//! file, or a real OpenStack with `--vim openstack`: see [`crate::vim`]), runs one operation of
//! [`vnfm_core::lifecycle::Lifecycle`] and prints the result. The simulated cloud's state is
//! saved in the state file after every operation, so scripted runs continue where the previous
//! command stopped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::json;
use vnfm_core::driver::{Clock, DriverError, OpOccFilter, Store, StoreBatch};
use vnfm_core::id::{OpOccId, VnfInstanceId, ZoneId};
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, ScaleType, ScaleVnfRequest,
    TerminateVnfRequest, TerminationType, VnfInstance, VnfLcmOpOcc,
};
use vnfm_core::lifecycle::{
    GrantOnly, Interrupt, LcmConfig, Lifecycle, OperationOptions, OperationReport,
};
use vnfm_core::package::VnfPackage;
use vnfm_core::placement::Selection;
use vnfm_core::reselect::{AttemptOutcome, InsufficientResourcePattern};
use vnfm_core::sim::SimCloud;

use super::cloud;
use crate::builtin;
use crate::cli::{
    GrantArgs, GrantOperation, HealArgs, InstanceCommand, InstantiateArgs, OpCommand,
    PlacementArgs, ScaleArgs, ScaleDirection, TerminateArgs,
};
use crate::config::{Config, SelectionKind, VimKind};
use crate::error::CliError;
use crate::output::Output;
use crate::store::SqliteStore;

/// The state-file document holding the simulated cloud.
pub const SIM_DOCUMENT: &str = "sim";

/// The real clock (tokio's timer).
#[derive(Debug, Clone, Copy)]
pub struct SystemClock;

#[async_trait::async_trait]
impl Clock for SystemClock {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now()
    }
    async fn sleep(&self, duration: std::time::Duration) {
        tokio::time::sleep(duration).await;
    }
}

/// A current-thread tokio runtime for one command.
///
/// # Errors
/// [`CliError::Output`] if the runtime cannot start (no threads, no timer).
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            CliError::Output(std::io::Error::other(format!(
                "cannot start the runtime: {e}"
            )))
        })
}

/// Opens (creating it and its folder when needed) the state file of `config`.
///
/// # Errors
/// [`CliError::State`] (exit 2) naming the file: unreadable, not a vnfm state database, or a
/// newer schema.
pub fn open_state(config: &Config) -> Result<SqliteStore, CliError> {
    let path = config.state_path();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CliError::State {
            path: path.clone(),
            message: format!("cannot create the folder {}: {e}", dir.display()),
            source: None,
        })?;
    }
    SqliteStore::open(&path).map_err(|e| CliError::State {
        path: path.clone(),
        message: "cannot open the state file".into(),
        source: Some(e),
    })
}

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

/// Fails unless the configured VIM is built into this program (see [`crate::vim::check`]).
///
/// # Errors
/// [`CliError::Usage`] for `openstack` in a build without the `openstack` feature.
pub fn check_vim(config: &Config) -> Result<(), CliError> {
    crate::vim::check(config)
}

/// The simulated cloud of the state file, or a new one from `cloud_path` (else the configured
/// cloud file, else the built-in demo cloud) when the state file has none yet.
///
/// # Errors
/// An unreadable saved cloud or cloud file, or a cloud file other than the saved one (exit 2).
pub async fn open_sim(
    store: &SqliteStore,
    cloud_path: Option<&Path>,
    config: &Config,
) -> Result<SimCloud, CliError> {
    let state_err = |message: String, source| CliError::State {
        path: config.state_path(),
        message,
        source,
    };
    let saved = store
        .document(SIM_DOCUMENT)
        .await
        .map_err(|e| state_err("cannot read the simulated cloud".into(), Some(e)))?;
    let wanted = cloud_path.or(config.vim.cloud.as_deref());
    match saved {
        Some(snapshot) => {
            let sim = SimCloud::restore(&snapshot).map_err(|e| {
                state_err("the saved simulated cloud is unreadable".into(), Some(e))
            })?;
            if let Some(p) = cloud_path {
                let (file, _) = cloud::load(Some(p))?;
                if file != sim.cloud() {
                    return Err(CliError::Usage(format!(
                        "the state file {} already holds a simulated cloud built from another cloud \
                         file than {}; use another --state for another cloud",
                        config.state_path().display(),
                        p.display()
                    )));
                }
            }
            Ok(sim)
        }
        None => {
            let (file, _) = cloud::load(wanted)?;
            Ok(SimCloud::new(file, config.vim.seed))
        }
    }
}

/// Saves the simulated cloud's state in the state file (nothing when the VIM is a real cloud).
///
/// # Errors
/// [`CliError::State`] when the state file cannot be written.
pub async fn save_sim(
    store: &SqliteStore,
    sim: &Option<SimCloud>,
    config: &Config,
) -> Result<(), CliError> {
    let Some(sim) = sim else {
        return Ok(());
    };
    let snap = sim.snapshot()?;
    store
        .put_document(SIM_DOCUMENT, snap)
        .await
        .map_err(|e| CliError::State {
            path: config.state_path(),
            message: "cannot save the simulated cloud".into(),
            source: Some(e),
        })
}

/// The state file as an operation of a command on the simulator sees it: after every commit
/// that went through, the simulated cloud is saved too.
#[derive(Debug)]
struct SimSavingStore {
    inner: SqliteStore,
    sim: SimCloud,
    /// Fault injection ([`KILL_AFTER_COMMIT_VAR`]): after which commit, and whether SIGINT
    /// (else SIGKILL).
    kill_after: Option<(u32, bool)>,
    commits: std::sync::atomic::AtomicU32,
}

/// Fault injection on the simulator: `VNFM_SIM_KILL_AFTER_COMMIT=N` makes a command SIGKILL
/// itself right after the N-th commit of its operation (the crash tests use it to stop a
/// command at each step, as `kill -9` would); `N:INT` sends SIGINT instead (Ctrl-C).
pub const KILL_AFTER_COMMIT_VAR: &str = "VNFM_SIM_KILL_AFTER_COMMIT";

fn parse_kill_after(v: &str) -> Option<(u32, bool)> {
    match v.split_once(':') {
        Some((n, "INT")) => n.parse().ok().map(|n| (n, true)),
        Some(_) => None,
        None => v.parse().ok().map(|n| (n, false)),
    }
}

impl SimSavingStore {
    fn maybe_die(&self) {
        let n = self
            .commits
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            .saturating_add(1);
        let Some((at, int)) = self.kill_after else {
            return;
        };
        let pid = std::process::id().to_string();
        if at == n && int {
            let _ = std::process::Command::new("kill")
                .args(["-INT", &pid])
                .status();
        } else if at == n {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid])
                .status();
            // The signal is on its way; nothing more happens in this process.
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }
}

#[async_trait::async_trait]
impl vnfm_core::driver::Store for SimSavingStore {
    async fn commit(&self, batch: StoreBatch) -> Result<(), DriverError> {
        self.inner.commit(batch).await?;
        // Only after the commit went through: a command that lost the race for an instance
        // must not overwrite the cloud of the one that won.
        let snap = self.sim.snapshot()?;
        self.inner.put_document(SIM_DOCUMENT, snap).await?;
        self.maybe_die();
        Ok(())
    }
    async fn instance(&self, id: &VnfInstanceId) -> Result<VnfInstance, DriverError> {
        self.inner.instance(id).await
    }
    async fn instance_entry(
        &self,
        id: &VnfInstanceId,
    ) -> Result<vnfm_core::driver::Versioned<VnfInstance>, DriverError> {
        self.inner.instance_entry(id).await
    }
    async fn op_occ_entry(
        &self,
        id: &OpOccId,
    ) -> Result<vnfm_core::driver::Versioned<VnfLcmOpOcc>, DriverError> {
        self.inner.op_occ_entry(id).await
    }
    async fn instances(&self) -> Result<Vec<VnfInstance>, DriverError> {
        self.inner.instances().await
    }
    async fn op_occ(&self, id: &OpOccId) -> Result<VnfLcmOpOcc, DriverError> {
        self.inner.op_occ(id).await
    }
    async fn op_occs(&self, filter: OpOccFilter) -> Result<Vec<VnfLcmOpOcc>, DriverError> {
        self.inner.op_occs(filter).await
    }
}

/// The LCM configuration: `[placement]` overridden by the command's flags.
///
/// # Errors
/// [`CliError::Core`] for an invalid `insufficient_resource_pattern` (exit 2).
pub fn lcm_config(config: &Config, args: &PlacementArgs) -> Result<LcmConfig, CliError> {
    let p = &config.placement;
    let mut c = LcmConfig::standard()?;
    c.fallback_best_effort = args.fallback_best_effort || p.fallback_best_effort;
    c.reselect_zones = args.reselect_zones || p.reselect_zones;
    c.max_reselections = args.max_reselections.or(p.max_reselections);
    let policy = |k: SelectionKind| match k {
        SelectionKind::Random => Selection::Random,
        SelectionKind::CapacityAware => Selection::CapacityAware,
    };
    // `--selection` / `selection` set both policies; unset, the granter is capacity-aware
    // (random where the catalogue reports no capacity) and reselection keeps the spec's random.
    let selection = args.selection.or(p.selection);
    c.selection = selection.map_or(Selection::Random, policy);
    c.grant_selection = p
        .grant_selection
        .filter(|_| args.selection.is_none())
        .or(selection)
        .map_or(Selection::CapacityAware, policy);
    c.seed = args.seed.unwrap_or(p.seed);
    if let Some(pattern) = args.insufficient_resource_pattern.as_deref() {
        c.pattern = InsufficientResourcePattern::new(
            pattern,
            vnfm_core::error::Location::default().with_field("--insufficient-resource-pattern"),
        )?;
    } else if let Some(pattern) = p.insufficient_resource_pattern.as_deref() {
        c.pattern = InsufficientResourcePattern::new(
            pattern,
            vnfm_core::error::Location::default()
                .with_field("[placement] insufficient_resource_pattern"),
        )?;
    }
    c.vim_connection_id = crate::vim::Vim::connection_id(config.vim.kind).into();
    match config.state.lease_seconds {
        Some(0) => {
            return Err(CliError::Usage(
                "[state] lease_seconds = 0: expected at least 1 (a lease that is always \
                 expired would let any process take over a running operation)"
                    .into(),
            ))
        }
        Some(n) => c.lease_time = std::time::Duration::from_secs(n),
        None => {}
    }
    Ok(c)
}

/// The package: `explicit`, else the one in `[packages] dir` whose descriptor id is `vnfd_id`,
/// else the built-in demo package (when its descriptor id matches, or no id is asked).
///
/// # Errors
/// An unreadable package, or no package for `vnfd_id` (exit 2).
pub fn load_package(
    explicit: Option<&Path>,
    config: &Config,
    vnfd_id: Option<&str>,
) -> Result<VnfPackage, CliError> {
    if let Some(p) = explicit {
        return Ok(vnfm_core::package::fs::load(p)?);
    }
    if let (Some(dir), Some(id)) = (config.packages.dir.as_deref(), vnfd_id) {
        let entries = std::fs::read_dir(dir).map_err(|e| CliError::Config {
            file: dir.to_path_buf(),
            message: "cannot read the packages folder ([packages] dir)".into(),
            source: Some(e),
        })?;
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if let Ok(pkg) = vnfm_core::package::fs::load(&p) {
                if pkg.descriptor_id == id {
                    return Ok(pkg);
                }
            }
        }
    }
    let demo = builtin::demo_package()?;
    match vnfd_id {
        Some(id) if id != demo.descriptor_id => Err(CliError::Usage(format!(
            "no package with vnfdId {id}: give --package, or put it in the folder of \
             --packages-dir / [packages] dir"
        ))),
        _ => Ok(demo),
    }
}

pub(crate) fn default_flavour(pkg: &VnfPackage, flavour: Option<&str>) -> Result<String, CliError> {
    match flavour {
        Some(f) => Ok(f.to_owned()),
        None => pkg.flavours.keys().next().cloned().ok_or_else(|| {
            CliError::Usage(format!("package {} has no deployment flavour", pkg.source))
        }),
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

/// The drivers of one command over the state file.
struct Env {
    store: SqliteStore,
    /// The simulated cloud, saved after the operation; `None` for a real cloud.
    sim: Option<SimCloud>,
    lcm: Lifecycle,
    /// The VIM, for the notes on its degraded answers printed when the command ends.
    vim: crate::vim::Vim,
}

impl Drop for Env {
    /// Prints the real cloud's notes on degraded answers (e.g. the hosts' free capacity is
    /// unknown to these credentials, so the granter fell back to random) on stderr.
    fn drop(&mut self) {
        for w in self.vim.warnings() {
            eprintln!("warning: {w}");
        }
    }
}

async fn env(
    config: &Config,
    cloud_path: Option<&Path>,
    placement: &PlacementArgs,
) -> Result<Env, CliError> {
    check_vim(config)?;
    let lcm_cfg = lcm_config(config, placement)?;
    let store = open_state(config)?;
    let mut vim = crate::vim::Vim::open(&store, cloud_path, config).await?;
    let sim = vim.sim.take();
    // With the simulator, its state is saved with every commit of an operation: a command
    // killed mid-operation leaves the simulated cloud as a real one would be (stacks it
    // created are still there for a rollback to delete, or a retry to continue).
    let lcm_store: Arc<dyn vnfm_core::driver::Store> = match &sim {
        Some(s) => Arc::new(SimSavingStore {
            inner: store.clone(),
            sim: s.clone(),
            kill_after: std::env::var(KILL_AFTER_COMMIT_VAR)
                .ok()
                .and_then(|v| parse_kill_after(&v)),
            commits: std::sync::atomic::AtomicU32::new(0),
        }),
        None => Arc::new(store.clone()),
    };
    let drivers = vim.drivers(lcm_store, Arc::new(SystemClock));
    // Ids must not repeat across runs of the CLI; placement choices depend on the seed only.
    let salt = run_id_salt(&store, config).await?;
    let lcm = Lifecycle::new(drivers, lcm_cfg).with_id_salt(salt);
    Ok(Env {
        store,
        sim,
        lcm,
        vim,
    })
}

/// The document of the state file counting the runs of `--id-salt` / `VNFM_ID_SALT`.
pub const ID_RUNS_DOCUMENT: &str = "id-salt-runs";

/// The id salt of one command over the state file: [`id_salt`] (the clock), or with
/// `--id-salt N` / `VNFM_ID_SALT` a salt derived from `N` and the state file's run counter
/// ([`vnfm_core::id::run_salt`]), which this call advances: a script replayed on a new state
/// file gets the same ids, and no two commands on one state file get the same salt.
///
/// # Errors
/// [`CliError::State`] when the counter cannot be written.
pub async fn run_id_salt(store: &SqliteStore, config: &Config) -> Result<u64, CliError> {
    let Some(base) = config.state.id_salt else {
        return Ok(id_salt());
    };
    let n = store
        .increment_counter(ID_RUNS_DOCUMENT)
        .await
        .map_err(|e| CliError::State {
            path: config.state_path(),
            message: "cannot count the runs of --id-salt".into(),
            source: Some(e),
        })?;
    Ok(vnfm_core::id::run_salt(base, n))
}

/// A salt for ids that differs between runs: the wall clock and the process id.
pub fn id_salt() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ u64::from(std::process::id()).rotate_left(40)
}

/// What an operation prints with `--json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationOutput<'a> {
    /// The occurrence, with `attempts`.
    pub vnf_lcm_op_occ: &'a VnfLcmOpOcc,
    /// The instance after the operation.
    pub vnf_instance: &'a VnfInstance,
    /// Its VNFCs: id, VDU, zone, host.
    pub vnfcs: Vec<VnfcLine>,
    /// The grant, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<&'a vnfm_core::grant::Grant>,
    /// What `--reservation` drew for the new VNFCs (one allocation each).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub allocations: &'a [vnfm_core::reservation::Allocation],
    /// The allocations given back (the VNFCs a scale-in removed, or a terminated instance's).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub released: &'a [vnfm_core::reservation::Allocation],
}

/// One VNFC of an instance.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VnfcLine {
    /// `vnfcResourceInfo.id`
    pub id: String,
    /// VDU
    pub vdu_id: String,
    /// Zone
    pub zone_id: Option<String>,
    /// Compute host
    pub host: Option<String>,
    /// Server id
    pub server_id: String,
}

/// The VNFCs of an instance as lines.
pub fn vnfc_lines(inst: &VnfInstance) -> Vec<VnfcLine> {
    inst.instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_resource_info.iter())
        .map(|v| VnfcLine {
            id: v.id.clone(),
            vdu_id: v.vdu_id.to_string(),
            zone_id: v.zone_id.as_ref().map(ToString::to_string),
            host: v
                .metadata
                .as_ref()
                .and_then(|m| m.get("host"))
                .and_then(|h| h.as_str())
                .map(str::to_owned),
            server_id: v.compute_resource.resource_id.clone(),
        })
        .collect()
}

/// The SOL003 spelling of an enum value (`COMPLETED`, `SCALE`, `INSTANTIATED`).
pub fn sol<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::from("?"),
    }
}

/// The human-readable account of an operation.
pub fn human_operation(op: &VnfLcmOpOcc, inst: &VnfInstance) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} of VNF instance {}: {} (operation {})",
        sol(&op.operation),
        inst.id,
        sol(&op.operation_state),
        op.id
    );
    for (i, a) in op.attempts.iter().enumerate() {
        let zones: Vec<String> = a.zones.iter().map(|(u, z)| format!("{u}={z}")).collect();
        let outcome = match a.outcome {
            Some(AttemptOutcome::Succeeded) => "succeeded",
            Some(AttemptOutcome::Failed) => "failed",
            Some(AttemptOutcome::Refused) => "refused",
            None => "unfinished",
        };
        let _ = writeln!(s, "  attempt {}: {} -> {outcome}", i + 1, zones.join(" "));
        if let Some(r) = &a.status_reason {
            let _ = writeln!(s, "    reason: {r}");
        }
        if !a.failed_zones.is_empty() {
            let z: Vec<&str> = a.failed_zones.iter().map(ZoneId::as_str).collect();
            let _ = writeln!(s, "    excluded zones: {}", z.join(", "));
        }
        for r in &a.relaxed {
            let _ = writeln!(s, "    relaxed: {r}");
        }
    }
    if let Some(e) = &op.error {
        let _ = writeln!(s, "  error: {}", e.detail);
    }
    let lines = vnfc_lines(inst);
    if !lines.is_empty() {
        let _ = writeln!(s, "  VNFCs:");
        for v in lines {
            let _ = writeln!(
                s,
                "    {:<8} zone {:<6} host {:<12} server {}",
                v.id,
                v.zone_id.as_deref().unwrap_or("-"),
                v.host.as_deref().unwrap_or("-"),
                v.server_id
            );
        }
    }
    s
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
    let data = OperationOutput {
        vnf_lcm_op_occ: &r.op_occ,
        vnf_instance: &r.instance,
        vnfcs: vnfc_lines(&r.instance),
        grant: r.grant.as_ref(),
        allocations,
        released,
    };
    let mut human = human_operation(&r.op_occ, &r.instance);
    human.push_str(&super::promise::human_drawn(allocations, released));
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
    let mut pinned = parse_zones(&args.zones)?;
    runtime()?.block_on(async {
        // --intent: the region (and its VIM) and the realised package, decided by the core.
        let intent = match &args.intent {
            Some(_) => {
                let pkg = load_package(args.package.as_deref(), config, None)?;
                super::intent::plan(config, args, &pkg, out).await?
            }
            None => None,
        };
        let config = intent.as_ref().map_or(config, |p| &p.config);
        let env = env(config, args.cloud.as_deref(), &args.placement).await?;
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
                    req.metadata = Some(super::intent::record_metadata(p)?);
                }
                env.lcm.create(&pkg, &req).await?
            }
        };
        let pkg = match &intent {
            Some(p) => p.realised.package.clone(),
            None => load_package(args.package.as_deref(), config, Some(&inst.vnfd_id))?,
        };
        let flavour = default_flavour(&pkg, args.flavour.as_deref())?;
        // --reservation: draw before any stack exists; a refusal deletes a new instance.
        let drawn = match &args.reservation {
            Some(rid) => {
                let op = vnfm_core::lifecycle::GrantOnly::Instantiate {
                    flavour_id: flavour.clone(),
                };
                match super::promise::draw_operation(
                    config,
                    &env.store,
                    &env.lcm,
                    &pkg,
                    &inst,
                    op,
                    super::promise::DrawFrom {
                        reservation: rid,
                        now: args.now,
                    },
                )
                .await
                {
                    Ok(d) => Some(d),
                    Err(e) => {
                        if args.instance.is_none() {
                            env.lcm.delete(&inst.id).await?;
                        }
                        return Err(e);
                    }
                }
            }
            None => None,
        };
        if let Some(d) = &drawn {
            pinned.clone_from(&d.draw.pinned);
        }
        out.progress(&format!("instantiating {} (flavour {flavour})", inst.id));
        let r = env
            .lcm
            .instantiate(
                &inst.id,
                &pkg,
                &InstantiateVnfRequest::new(flavour),
                &OperationOptions {
                    pinned,
                    automatic: false,
                    interrupt: Some(interrupt_on_signals()),
                },
            )
            .await;
        // Saved with every commit; a command that lost the race saves nothing.
        if r.is_ok() {
            save_sim(&env.store, &env.sim, config).await?;
        }
        let drawn = match drawn {
            Some(d) => super::promise::settle(config, &env.store, d, r.as_ref().ok()).await?,
            None => Vec::new(),
        };
        print_report_drawn(out, &r?, &drawn, &[])
    })
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
    let pkg = super::intent::reapply(&inst, pkg)?;
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
        let env = env(config, None, &args.placement).await?;
        let (id, pkg) =
            instance_and_package(&env, config, &args.instance, args.package.as_deref()).await?;
        let before = env.store.instance(&id).await?;
        let drawn = match &args.reservation {
            Some(rid) => {
                let op = vnfm_core::lifecycle::GrantOnly::ScaleOut {
                    aspect_id: args.aspect.clone(),
                    steps: args.steps,
                };
                Some(
                    super::promise::draw_operation(
                        config,
                        &env.store,
                        &env.lcm,
                        &pkg,
                        &before,
                        op,
                        super::promise::DrawFrom {
                            reservation: rid,
                            now: args.now,
                        },
                    )
                    .await?,
                )
            }
            None => None,
        };
        let mut opts = interruptible();
        if let Some(d) = &drawn {
            opts.pinned.clone_from(&d.draw.pinned);
        }
        let t = match args.direction {
            ScaleDirection::Out => ScaleType::ScaleOut,
            ScaleDirection::In => ScaleType::ScaleIn,
        };
        let mut req = ScaleVnfRequest::new(t, args.aspect.clone());
        req.number_of_steps = Some(args.steps);
        let r = env.lcm.scale(&id, &pkg, &req, &opts).await;
        // Saved with every commit; a command that lost the race saves nothing.
        if r.is_ok() {
            save_sim(&env.store, &env.sim, config).await?;
        }
        let drawn = match drawn {
            Some(d) => super::promise::settle(config, &env.store, d, r.as_ref().ok()).await?,
            None => Vec::new(),
        };
        let r = r?;
        // A scale-in gives back the allocations of the VNFCs it removed (the core decides).
        let released = super::promise::release_after(config, &env.store, Some(&before), &r).await?;
        print_report_drawn(out, &r, &drawn, &released)
    })
}

/// `vnfm heal`.
///
/// # Errors
/// As [`instantiate`].
pub fn heal(config: &Config, args: &HealArgs, out: Output) -> Result<(), CliError> {
    runtime()?.block_on(async {
        let env = env(config, None, &args.placement).await?;
        let (id, pkg) =
            instance_and_package(&env, config, &args.instance, args.package.as_deref()).await?;
        let req: HealVnfRequest = serde_json::from_value(json!({
            "vnfcInstanceId": args.vnfcs,
            "cause": args.cause,
        }))
        .map_err(|e| CliError::Usage(format!("bad heal request: {e}")))?;
        let r = env.lcm.heal(&id, &pkg, &req, &interruptible()).await;
        // Saved with every commit; a command that lost the race saves nothing.
        if r.is_ok() {
            save_sim(&env.store, &env.sim, config).await?;
        }
        print_report(out, &r?)
    })
}

/// `vnfm terminate`.
///
/// # Errors
/// As [`instantiate`].
pub fn terminate(config: &Config, args: &TerminateArgs, out: Output) -> Result<(), CliError> {
    runtime()?.block_on(async {
        let env = env(config, None, &PlacementArgs::default()).await?;
        let id = VnfInstanceId::from(args.instance.as_str());
        let req = TerminateVnfRequest {
            termination_type: TerminationType::Forceful,
            graceful_termination_timeout: None,
            additional_params: None,
        };
        let r = env.lcm.terminate(&id, &req, &interruptible()).await;
        // Saved with every commit; a command that lost the race saves nothing.
        if r.is_ok() {
            save_sim(&env.store, &env.sim, config).await?;
        }
        let r = r?;
        // A completed terminate gives back every allocation of the instance.
        let released = super::promise::release_after(config, &env.store, None, &r).await?;
        if args.delete && r.failure.is_none() {
            env.lcm.delete(&id).await?;
        }
        print_report_drawn(out, &r, &[], &released)
    })
}

/// What `vnfm grant --json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantOutput<'a> {
    /// The request.
    pub grant_request: &'a vnfm_core::grant::GrantRequest,
    /// The grant.
    pub grant: &'a vnfm_core::grant::Grant,
    /// What the grant drew from `--reservation` (one allocation per VNFC).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<vnfm_core::reservation::Allocation>,
}

/// `vnfm grant`.
///
/// # Errors
/// 3 when the constraints cannot be met, 4 when capacity is exhausted, 2 for bad input.
pub fn grant(config: &Config, args: &GrantArgs, out: Output) -> Result<(), CliError> {
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
                        let (file, _) = cloud::load(args.cloud.as_deref().or(config.vim.cloud.as_deref()))?;
                        crate::vim::Vim::simulated(SimCloud::new(file, config.vim.seed))
                    }
                    VimKind::Openstack => crate::vim::Vim::open(&open_state(config)?, args.cloud.as_deref(), config).await?,
                };
                let pkg = load_package(args.package.as_deref(), config, None)?;
                let flavour = default_flavour(&pkg, args.flavour.as_deref())?;
                let mut inst = VnfInstance::new("grant-only", pkg.descriptor_id.clone());
                inst.instantiation_state = Some(vnfm_core::lcm::InstantiationState::NotInstantiated);
                (vim, inst, pkg, GrantOnly::Instantiate { flavour_id: flavour })
            }
            GrantOperation::ScaleOut => {
                let store = open_state(config)?;
                let vim = crate::vim::Vim::open(&store, args.cloud.as_deref(), config).await?;
                let id = args.instance.clone().unwrap_or_default();
                let inst = store.instance(&VnfInstanceId::from(id.as_str())).await.map_err(|e| not_found(config, "VNF instance", &id, e))?;
                let pkg = load_package(args.package.as_deref(), config, Some(&inst.vnfd_id))?;
                let pkg = super::intent::reapply(&inst, pkg)?;
                let op = GrantOnly::ScaleOut {
                    aspect_id: args.aspect.clone().unwrap_or_default(),
                    steps: args.steps,
                };
                (vim, inst, pkg, op)
            }
        };
        let drivers = vim.drivers(Arc::new(vnfm_core::store::MemoryStore::new()), Arc::new(SystemClock));
        let lcm = Lifecycle::new(drivers, lcm_cfg);
        match lcm.grant_only(&pkg, &inst, op).await? {
            Ok((planned, mut grant)) => {
                let request = planned.request;
                let allocations = match &args.reservation {
                    Some(rid) => {
                        let flavour = pkg.flavour(request.flavour_id.as_deref().unwrap_or_default()).ok_or_else(|| {
                            CliError::Usage(format!("the grant request names no flavour of {}", pkg.descriptor_id))
                        })?;
                        super::promise::draw_grant(config, &mut grant, &request, flavour, rid, args.now).await?
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
                        super::promise::amounts(&a.capacity),
                        a.instance_ref.as_deref().unwrap_or("-"),
                        a.id
                    );
                }
                out.data(&human, &GrantOutput { grant_request: &request, grant: &grant, allocations })
            }
            Err((_request, kind, detail)) => Err(CliError::Grant { kind, detail }),
        }
    })
}

/// `vnfm instance show|list`.
///
/// # Errors
/// 2 for an unknown instance or an unusable state file.
pub fn instance(config: &Config, cmd: &InstanceCommand, out: Output) -> Result<(), CliError> {
    runtime()?.block_on(async {
        let store = open_state(config)?;
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
                    inst.vnf_instance_name.as_deref().unwrap_or("no name"),
                    inst.vnfd_id,
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
                let data = json!({"vnfInstance": inst, "vnfcs": vnfc_lines(&inst)});
                out.data(&human, &data)
            }
            InstanceCommand::List => {
                let all = store.instances().await?;
                let mut human = String::new();
                for i in &all {
                    let _ = writeln!(
                        human,
                        "{}  {:<16} {:<16}  {} VNFC(s)",
                        i.id,
                        i.vnf_instance_name.as_deref().unwrap_or("-"),
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
                out.data(&human, &json!({"vnfInstances": all}))
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
            let env = env(config, None, &PlacementArgs::default()).await?;
            let op_id = OpOccId::from(id.as_str());
            if let OpCommand::Rollback { package, .. } | OpCommand::Retry { package, .. } = cmd {
                let op = env
                    .store
                    .op_occ(&op_id)
                    .await
                    .map_err(|e| not_found(config, "operation occurrence", id, e))?;
                let inst = env.store.instance(&op.vnf_instance_id).await?;
                let pkg = load_package(package.as_deref(), config, Some(&inst.vnfd_id))?;
                let pkg = super::intent::reapply(&inst, pkg)?;
                let r = if matches!(cmd, OpCommand::Retry { .. }) {
                    env.lcm.retry(&op_id, &pkg, &interruptible()).await
                } else {
                    env.lcm.rollback(&op_id, &pkg).await
                };
                // Saved with every commit; a command that lost the race saves nothing.
                if r.is_ok() {
                    save_sim(&env.store, &env.sim, config).await?;
                }
                return print_report(out, &r?);
            }
            let op = env.lcm.fail(&op_id).await?;
            let inst = env.store.instance(&op.vnf_instance_id).await?;
            return out.data(&human_operation(&op, &inst), &json!({"vnfLcmOpOcc": op}));
        }
        let store = open_state(config)?;
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
                out.data(&human, &json!({"vnfLcmOpOcc": op}))
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
                out.data(&human, &json!({"vnfLcmOpOccs": all}))
            }
            OpCommand::Fail { .. } | OpCommand::Rollback { .. } | OpCommand::Retry { .. } => Ok(()),
        }
    })
}
