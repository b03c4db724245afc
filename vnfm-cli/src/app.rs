//! The composition root of the CLI: the one place that builds what a command or `vnfm serve`
//! runs on, from the configuration: the tokio runtime, the clock, the state file, the VIM (the
//! simulated cloud or a real OpenStack, see [`crate::vim`]), the drivers and the
//! [`Lifecycle`] over them. Commands and the server take these from here; nothing else
//! reads the clock or maps `[placement]` to the core's [`LcmConfig`].

use std::path::Path;
use std::sync::Arc;

use vnfm_core::cluster::{
    HostLabelHook, LabelConfig, LabelSelector, DEFAULT_HOST_LABEL, ZONE_LABEL,
};
use vnfm_core::driver::{Clock, DriverError};
use vnfm_core::lifecycle::{
    CommitTicket, LcmConfig, Lifecycle, LifecycleEvent, LifecycleObserver, Takeover,
};
use vnfm_core::placement::Selection;
use vnfm_core::reselect::InsufficientResourcePattern;
use vnfm_core::sim::SimCloud;

use crate::cli::PlacementArgs;
use crate::cli::STATE_URL_VAR;
use crate::config::{Config, SelectionKind};
use crate::error::CliError;
use crate::state_store::{Documents, StateStore};
use crate::store::SqliteStore;
use crate::store_postgres::PgStore;
use crate::vim::{Vim, SIM_DOCUMENT};

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

/// The clock of every command and of `vnfm serve`: [`SystemClock`], the one reading of the
/// wall clock in the CLI. Everything else takes a [`Clock`] (or the lifecycle's); a monotonic
/// instant is read for IO deadlines alone (`tests/one_clock.rs` lists where, and why).
pub fn clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
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

/// Opens the state of `config`: the PostgreSQL database of `[state] url` /
/// `VNFM_STATE_URL` (its schema migrated), else the state file ([`open_state_file`]).
///
/// # Errors
/// [`CliError::Usage`] when both a state file (`[state] path`, `--state`, `VNFM_STATE`) and a
/// database are configured; [`CliError::StateDb`] naming the database (without its
/// password): not a PostgreSQL URL or a newer schema (exit 2), unreachable or refusing the
/// credentials (5); as [`open_state_file`] for the file.
pub async fn open_state(config: &Config) -> Result<StateStore, CliError> {
    let Some(url) = &config.state.url else {
        return open_state_file(config).map(StateStore::Sqlite);
    };
    if let Some(path) = &config.state.path {
        return Err(CliError::Usage(format!(
            "both a state file ({}: [state] path, --state or VNFM_STATE) and a state database \
             ([state] url or {STATE_URL_VAR}) are configured; expected one of them",
            path.display()
        )));
    }
    PgStore::open(url.expose())
        .await
        .map(StateStore::Postgres)
        .map_err(|e| CliError::StateDb {
            url: crate::store_postgres::redacted(url.expose()),
            message: "cannot open the state database".into(),
            source: Some(e),
        })
}

/// Opens (creating it and its folder when needed) the state file of `config`.
///
/// # Errors
/// [`CliError::State`] naming the file: unreadable, not a vnfm state database, or a newer
/// schema (exit 2); locked by another writer (5); failing IO (1).
pub fn open_state_file(config: &Config) -> Result<SqliteStore, CliError> {
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

/// Fails unless the configured VIM is built into this program (see [`crate::vim::check`]).
///
/// # Errors
/// [`CliError::Usage`] for `openstack` in a build without the `openstack` feature.
pub fn check_vim(config: &Config) -> Result<(), CliError> {
    crate::vim::check(config)
}

/// Saves the simulated cloud in the state file after every commit of a command's lifecycle
/// (told by its [`LifecycleEvent`]s): a command killed mid-operation leaves the simulated
/// cloud as a real one would be.
#[derive(Debug)]
struct SimSaver {
    store: StateStore,
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

impl SimSaver {
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
impl LifecycleObserver for SimSaver {
    async fn event(&self, event: &LifecycleEvent<'_>, _: CommitTicket) -> Result<(), DriverError> {
        // Only after a commit went through: a command that lost the race for an instance must
        // not overwrite the cloud of the one that won.
        let LifecycleEvent::Committed(_) = event else {
            return Ok(());
        };
        let snap = self.sim.snapshot()?;
        self.store.put_document(SIM_DOCUMENT, snap).await?;
        self.maybe_die();
        Ok(())
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
    if let Some(n) = p.group_race_retries {
        c.group_race_retries = n;
    }
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
    c.vim_connection_id = Vim::connection_id(config.vim.kind).into();
    // CNFs: the preflight's host label and the namespace of an instance whose request names
    // none, from [cluster].
    if let Some(key) = &config.cluster.host_label {
        c.host_label.clone_from(key);
    }
    if let Some(ns) = &config.cluster.namespace {
        c.cnf_namespace.clone_from(ns);
    }
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
    c.takeover = takeover(&config.state)?;
    Ok(c)
}
/// `[state] takeover` and `resume_limit` as the core's policy.
fn takeover(state: &crate::config::StateConfig) -> Result<Takeover, CliError> {
    use crate::config::TakeoverKind;
    let limit = match state.resume_limit {
        Some(0) => {
            return Err(CliError::Usage(
                "[state] resume_limit = 0: expected at least 1 (use takeover = \"interrupt\" \
                 to resume nothing)"
                    .into(),
            ))
        }
        Some(n) => n,
        None => vnfm_core::lifecycle::takeover::DEFAULT_RESUME_LIMIT,
    };
    Ok(match state.takeover.unwrap_or_default() {
        TakeoverKind::Interrupt => Takeover::Interrupt,
        TakeoverKind::Resume => Takeover::Resume { limit },
    })
}

/// The drivers of one command over the state file.
pub struct Env {
    /// The state file.
    pub store: StateStore,
    /// The simulated cloud, saved after the operation; `None` for a real cloud, and on
    /// PostgreSQL (where the simulated cloud saves itself at every call that changes it,
    /// [`Vim::shared_on`]).
    pub sim: Option<SimCloud>,
    /// The lifecycle over the drivers.
    pub lcm: Lifecycle,
    /// The clock of the command (the lifecycle's).
    pub clock: Arc<dyn Clock>,
    /// The VIM, for the notes on its degraded answers printed when the command ends.
    pub vim: Vim,
}

impl Drop for Env {
    /// Prints the real cloud's notes on degraded answers (e.g. the hosts' free capacity is
    /// unknown to these credentials, so the granter fell back to random) on stderr.
    fn drop(&mut self) {
        for w in self.vim.warnings() {
            eprintln!("warning: {}", crate::display::escape_text(&w.to_string()));
        }
    }
}

/// Builds the drivers of one LCM command: checks the VIM, maps the configuration to the
/// [`LcmConfig`], opens the state file and the VIM, and puts the [`Lifecycle`] over them.
///
/// # Errors
/// As [`check_vim`], [`lcm_config`], [`open_state`], [`Vim::open`] and [`run_id_salt`].
pub async fn env(
    config: &Config,
    cloud_path: Option<&Path>,
    placement: &PlacementArgs,
) -> Result<Env, CliError> {
    check_vim(config)?;
    let lcm_cfg = lcm_config(config, placement)?;
    let store = open_state(config).await?;
    let mut vim = open_cluster(Vim::open(&store, cloud_path, config).await?, config).await?;
    // On PostgreSQL the simulated cloud is shared with the replicas of `vnfm serve` and other
    // commands: each call changes it under its lock and saves it, so it is not saved whole
    // (which would put back what this command loaded over what the others did meanwhile).
    let sim = match &store {
        StateStore::Postgres(pg) => {
            vim = vim.shared_on(pg.clone());
            None
        }
        StateStore::Sqlite(_) => vim.sim.take(),
    };
    // With the simulator, its state is saved with every commit of an operation: a command
    // killed mid-operation leaves the simulated cloud as a real one would be (stacks it
    // created are still there for a rollback to delete, or a retry to continue).
    let sim_saver: Option<Arc<dyn LifecycleObserver>> = sim.as_ref().map(|s| {
        Arc::new(SimSaver {
            store: store.clone(),
            sim: s.clone(),
            kill_after: std::env::var(KILL_AFTER_COMMIT_VAR)
                .ok()
                .and_then(|v| parse_kill_after(&v)),
            commits: std::sync::atomic::AtomicU32::new(0),
        }) as Arc<dyn LifecycleObserver>
    });
    let lcm_store: Arc<dyn vnfm_core::driver::Store> = Arc::new(store.clone());
    let clock = clock();
    let drivers = vim.drivers(lcm_store, clock.clone());
    // Ids must not repeat across runs of the CLI; placement choices depend on the seed only.
    let salt = run_id_salt(&store, config, clock.as_ref()).await?;
    let mut lcm = with_nfvo_grants(
        with_cluster_hook(
            Lifecycle::new(drivers, lcm_cfg).with_id_salt(salt),
            config,
            &vim,
        )?,
        config,
    )?;
    if let Some(saver) = sim_saver {
        lcm = lcm.with_observer(saver);
    }
    Ok(Env {
        store,
        sim,
        lcm,
        clock,
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
pub async fn run_id_salt(
    store: &dyn Documents,
    config: &Config,
    clock: &dyn Clock,
) -> Result<u64, CliError> {
    let Some(base) = config.state.id_salt else {
        return Ok(id_salt(clock));
    };
    let n = store
        .increment_counter(ID_RUNS_DOCUMENT)
        .await
        .map_err(|e| {
            store
                .location()
                .error("cannot count the runs of --id-salt", Some(e))
        })?;
    Ok(vnfm_core::id::run_salt(base, n))
}

/// A salt for ids that differs between runs: the time of `clock` and the process id.
pub fn id_salt(clock: &dyn Clock) -> u64 {
    let nanos = clock.now().timestamp_nanos_opt().map_or(0, |n| n as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(40)
}

/// `lcm` with the host-labels hook when `[cluster] cluster_vnfds` names cluster VNFs (the
/// operations of their instances end by labelling the worker nodes with their hosts).
///
/// # Errors
/// Cluster VNFs named without a cluster, or an invalid `[cluster]` (exit 2).
pub fn with_cluster_hook(
    lcm: Lifecycle,
    config: &Config,
    vim: &Vim,
) -> Result<Lifecycle, CliError> {
    if config.cluster.cluster_vnfds.is_empty() {
        return Ok(lcm);
    }
    let cluster = vim.cluster().ok_or_else(no_cluster)?;
    Ok(lcm.with_hook(Arc::new(HostLabelHook::new(
        cluster,
        vim.compute(),
        label_config(config)?,
        config.cluster.cluster_vnfds.clone(),
    ))))
}

/// `lcm` asking the NFVO of `[grant] nfvo` for its grants, when one is set (the local
/// granter otherwise).
///
/// # Errors
/// An invalid `[grant]` section (exit 2).
pub fn with_nfvo_grants(lcm: Lifecycle, config: &Config) -> Result<Lifecycle, CliError> {
    with_nfvo_grants_over(lcm, config, None)
}

/// [`with_nfvo_grants`] whose requests go through `http` (`vnfm serve`'s one client of its
/// outgoing requests), or a client of their own (`None`).
///
/// # Errors
/// As [`with_nfvo_grants`].
pub fn with_nfvo_grants_over(
    lcm: Lifecycle,
    config: &Config,
    http: Option<Arc<crate::outgoing::Outgoing>>,
) -> Result<Lifecycle, CliError> {
    let Some(s) = config.grant.nfvo()? else {
        return Ok(lcm);
    };
    let client = match http {
        Some(http) => crate::nfvo::NfvoGrantClient::over(&s, http),
        None => crate::nfvo::NfvoGrantClient::new(&s),
    }
    .map_err(CliError::Usage)?;
    Ok(lcm.with_grant_driver(
        Arc::new(client),
        vnfm_core::lifecycle::NfvoGrants {
            poll_interval: s.poll_interval,
            timeout: s.timeout,
        },
    ))
}

/// The error for a command that needs a cluster where none is configured.
pub fn no_cluster() -> CliError {
    CliError::Usage(
        "no Kubernetes cluster: set [cluster] kubeconfig; only the \
         simulated cloud has one of its own"
            .into(),
    )
}

/// The VIM with the cluster of `[cluster] kubeconfig`, when configured.
///
/// # Errors
/// A kubeconfig that cannot be read, or a build without the Kubernetes adapter (exit 2).
pub async fn open_cluster(vim: Vim, config: &Config) -> Result<Vim, CliError> {
    let Some(path) = &config.cluster.kubeconfig else {
        return Ok(vim);
    };
    let cluster = crate::vim::kube_cluster(path, config.cluster.context.as_deref()).await?;
    Ok(vim.with_cluster(cluster))
}

/// `[cluster]` as the core's [`LabelConfig`].
///
/// # Errors
/// An invalid label key or node selector, or the zone label without `allow_zone_label`
/// (exit 2, naming the key).
pub fn label_config(config: &Config) -> Result<LabelConfig, CliError> {
    let c = &config.cluster;
    let key = c.host_label.as_deref().unwrap_or(DEFAULT_HOST_LABEL);
    if key == ZONE_LABEL && !c.allow_zone_label {
        return Err(CliError::Usage(format!(
            "[cluster] host_label = {key:?}: the OpenStack cloud controller manager sets this \
             label to the node's Nova zone and would overwrite the host; set \
             allow_zone_label = true to write it anyway"
        )));
    }
    let mut cfg =
        LabelConfig::new(key).map_err(|e| CliError::Usage(format!("[cluster] host_label: {e}")))?;
    if let Some(sel) = &c.nodes {
        let sel = LabelSelector::parse(sel)
            .map_err(|e| CliError::Usage(format!("[cluster] nodes = {sel:?}: {e}")))?;
        cfg = cfg.with_nodes(sel);
    }
    if key == ZONE_LABEL {
        eprintln!(
            "warning: [cluster] host_label = {ZONE_LABEL}: the OpenStack cloud controller \
             manager may overwrite it with the node's zone"
        );
    }
    Ok(cfg)
}

#[cfg(test)]
mod shared_cloud_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::config::Secret;
    use crate::store_postgres::tests::TestDb;
    use crate::vim::{save_sim, SIM_DOCUMENT};
    use vnfm_core::lcm::{CreateVnfRequest, InstantiateVnfRequest};
    use vnfm_core::lifecycle::OperationOptions;

    /// Instantiates a demo instance through `env` and saves the cloud as `vnfm instantiate`
    /// does.
    async fn instantiate(env: &Env) {
        let pkg = crate::builtin::demo_package().unwrap();
        let req: CreateVnfRequest =
            serde_json::from_value(serde_json::json!({"vnfdId": pkg.descriptor_id})).unwrap();
        let inst = env.lcm.create(&pkg, &req).await.unwrap();
        let r = env
            .lcm
            .instantiate(
                &inst.id,
                &pkg,
                &InstantiateVnfRequest::new("default"),
                &OperationOptions::default(),
            )
            .await
            .unwrap();
        assert!(r.is_completed(), "{:?}", r.op_occ.error);
        save_sim(&env.store, &env.sim).await.unwrap();
    }

    /// Two commands on one PostgreSQL database, the first opened (its cloud loaded) before the
    /// second instantiates: the first's instantiate does not put back the cloud it loaded
    /// over the second's stack (before, the last writer won: one stack left, and the ids of
    /// the second drawn again).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commands_on_postgresql_share_the_simulated_cloud() {
        let Some(db) = TestDb::create("cli_shared_sim").await else {
            return;
        };
        let mut config = Config::default();
        config.state.url = Some(Secret::new(db.url()));
        config.placement.fallback_best_effort = true;
        config.placement.reselect_zones = true;
        let placement = PlacementArgs::default();
        let first = env(&config, None, &placement).await.unwrap();
        let second = env(&config, None, &placement).await.unwrap();
        assert!(first.sim.is_none(), "saved by its calls, not whole");
        instantiate(&second).await;
        instantiate(&first).await;
        let doc = first.store.document(SIM_DOCUMENT).await.unwrap().unwrap();
        let sim: serde_json::Value = serde_json::from_str(&doc).unwrap();
        let top: Vec<&str> = sim["stacks"]
            .as_object()
            .unwrap()
            .values()
            .filter(|s| s["parent"].is_null())
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            top.len(),
            2,
            "both commands' stacks in the one cloud: {top:?}"
        );
    }
}
