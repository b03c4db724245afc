//! The VIM drivers of a command: the simulated cloud (continued from the state file) or a real
//! OpenStack (Keystone v3, Nova, Heat) configured the OpenStack way.
//!
//! With `--vim openstack` (or `[vim] kind = "openstack"`) the cloud comes from `[vim] os_cloud`
//! (an entry of `clouds.yaml`), else `OS_CLOUD`, else the `OS_*` variables
//! ([`vnfm_openstack::CloudConfig::from_env_with_cloud`]). Heat is the stack driver, Nova the
//! zone catalogue and the compute inventory. No simulated cloud is saved in the state file;
//! VNF instances and operation occurrences are kept there as with the simulator.

use std::path::Path;
use std::sync::Arc;

use vnfm_core::driver::{Clock, ClusterDriver, ComputeInventory, StackDriver, Store, ZoneCatalog};
use vnfm_core::lifecycle::Drivers;
use vnfm_core::sim::SimCloud;

use crate::config::{Config, VimKind};
use crate::error::CliError;
use crate::inputs::load_cloud;
use crate::shared_sim::SharedSim;
use crate::state_store::Documents;

/// The state-file document holding the simulated cloud.
pub const SIM_DOCUMENT: &str = "sim";

/// The simulated cloud of the state file, or a new one from `cloud_path` (else the configured
/// cloud file, else the built-in demo cloud) when the state file has none yet.
///
/// # Errors
/// An unreadable saved cloud or cloud file, or a cloud file other than the saved one (exit 2).
pub async fn open_sim(
    store: &dyn Documents,
    cloud_path: Option<&Path>,
    config: &Config,
) -> Result<SimCloud, CliError> {
    let state_err = |message: String, source| store.location().error(message, source);
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
                let (file, _) = load_cloud(Some(p))?;
                if file != sim.cloud() {
                    return Err(CliError::Usage(format!(
                        "the state {} already holds a simulated cloud built from another cloud \
                         file than {}; use another --state for another cloud",
                        store.location(),
                        p.display()
                    )));
                }
            }
            Ok(sim)
        }
        None => {
            let (file, _) = load_cloud(wanted)?;
            Ok(SimCloud::new(file, config.vim.seed))
        }
    }
}

/// Saves the simulated cloud's state in the state file (nothing when the VIM is a real cloud).
///
/// # Errors
/// [`CliError::State`] when the state file cannot be written.
pub async fn save_sim(store: &dyn Documents, sim: &Option<SimCloud>) -> Result<(), CliError> {
    let Some(sim) = sim else {
        return Ok(());
    };
    let snap = sim.snapshot()?;
    store.put_document(SIM_DOCUMENT, snap).await.map_err(|e| {
        store
            .location()
            .error("cannot save the simulated cloud", Some(e))
    })
}

/// The VIM side of [`Drivers`]: stacks, zones and servers.
#[derive(Clone, Debug)]
pub struct Vim {
    /// The simulated cloud, when the VIM is the simulator (saved after every operation).
    pub sim: Option<SimCloud>,
    /// The OpenStack session, when the VIM is a real OpenStack.
    #[cfg(feature = "openstack")]
    pub openstack: Option<vnfm_openstack::OpenStack>,
    stacks: Arc<dyn StackDriver>,
    zones: Arc<dyn ZoneCatalog>,
    compute: Arc<dyn ComputeInventory>,
    /// The Kubernetes cluster, when there is one: the simulator's own, or the one of
    /// `[cluster] kubeconfig` (set by [`Vim::with_cluster`]).
    cluster: Option<Arc<dyn ClusterDriver>>,
}

impl Vim {
    /// The simulator's drivers over `sim`.
    pub fn simulated(sim: SimCloud) -> Self {
        Self {
            stacks: Arc::new(sim.clone()),
            zones: Arc::new(sim.clone()),
            compute: Arc::new(sim.clone()),
            cluster: Some(Arc::new(sim.clone())),
            sim: Some(sim),
            #[cfg(feature = "openstack")]
            openstack: None,
        }
    }

    /// The simulated cloud's drivers made to share its state with the other processes on the
    /// PostgreSQL database `store` (replicas of `vnfm serve`, see [`SharedSim`]); a real
    /// cloud is left as it is. The cloud is then saved by every call that changes it, so the
    /// caller must not save it whole ([`save_sim`]) any more.
    pub fn shared_on(mut self, store: crate::store_postgres::PgStore) -> Self {
        if let Some(sim) = &self.sim {
            let shared = Arc::new(SharedSim::new(sim.clone(), store, SIM_DOCUMENT));
            self.stacks = shared.clone();
            self.zones = shared.clone();
            self.compute = shared.clone();
            self.cluster = Some(shared);
        }
        self
    }

    /// The drivers of a real OpenStack session.
    #[cfg(feature = "openstack")]
    pub fn openstack(cloud: vnfm_openstack::OpenStack) -> Self {
        Self {
            stacks: Arc::new(cloud.heat()),
            zones: Arc::new(cloud.nova()),
            compute: Arc::new(cloud.nova()),
            cluster: None,
            sim: None,
            openstack: Some(cloud),
        }
    }

    /// The configured VIM: the state file's simulated cloud (or a new one from `cloud_path`,
    /// see [`open_sim`]), or the OpenStack of [`openstack_config`].
    ///
    /// # Errors
    /// As [`open_sim`] for the simulator; for OpenStack, a configuration that is missing
    /// or invalid, or a `--cloud` file (the simulator's), exit 2.
    pub async fn open(
        store: &dyn Documents,
        cloud_path: Option<&Path>,
        config: &Config,
    ) -> Result<Self, CliError> {
        match config.vim.kind {
            VimKind::Sim => Ok(Self::simulated(open_sim(store, cloud_path, config).await?)),
            VimKind::Openstack => {
                if let Some(p) = cloud_path {
                    return Err(CliError::Usage(format!(
                        "--cloud {} is a cloud file of the simulator; with --vim openstack the \
                         cloud is the one of [vim] os_cloud, OS_CLOUD or the OS_* variables",
                        p.display()
                    )));
                }
                Self::open_openstack(config)
            }
        }
    }

    #[cfg(feature = "openstack")]
    fn open_openstack(config: &Config) -> Result<Self, CliError> {
        let cloud = vnfm_openstack::OpenStack::new(openstack_config(config)?)
            .map_err(|e| CliError::Usage(format!("cannot set up the OpenStack client: {e}")))?;
        Ok(Self::openstack(cloud))
    }

    #[cfg(not(feature = "openstack"))]
    fn open_openstack(_config: &Config) -> Result<Self, CliError> {
        Err(not_built())
    }

    /// The same VIM with `cluster` as its Kubernetes cluster.
    pub fn with_cluster(mut self, cluster: Arc<dyn ClusterDriver>) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// The Kubernetes cluster, if any.
    pub fn cluster(&self) -> Option<Arc<dyn ClusterDriver>> {
        self.cluster.clone()
    }

    /// The compute inventory (Nova).
    pub fn compute(&self) -> Arc<dyn ComputeInventory> {
        self.compute.clone()
    }

    /// [`Drivers`] over these VIM drivers, `store` and `clock`. The simulated cloud reads its
    /// time on `clock` too ([`SimCloud::set_clock`]: a test resource's waits).
    pub fn drivers(&self, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Drivers {
        if let Some(sim) = &self.sim {
            sim.set_clock(clock.clone());
        }
        Drivers {
            stacks: self.stacks.clone(),
            zones: self.zones.clone(),
            compute: self.compute.clone(),
            store,
            clock,
            cluster: self.cluster.clone(),
        }
    }

    /// The VIM's compute zones (its zone catalogue).
    ///
    /// # Errors
    /// The catalogue's error (e.g. Nova unreachable).
    pub async fn list_zones(&self) -> Result<Vec<vnfm_core::zone::ComputeZone>, CliError> {
        Ok(self
            .zones
            .list_zones(vnfm_core::driver::ListZones::default())
            .await?)
    }

    /// The VIM connection id recorded on resources (`vim-sim`, `vim-openstack`).
    pub fn connection_id(kind: VimKind) -> &'static str {
        match kind {
            VimKind::Sim => "vim-sim",
            VimKind::Openstack => "vim-openstack",
        }
    }

    /// Notes on degraded answers of the real cloud (e.g. the zone listing fell back to
    /// `GET /os-availability-zone`), to show on stderr; none for the simulator.
    pub fn warnings(&self) -> Vec<String> {
        #[cfg(feature = "openstack")]
        if let Some(os) = &self.openstack {
            return os.warnings();
        }
        Vec::new()
    }
}

/// Fails unless the configured VIM is built into this program (`openstack` needs the
/// `openstack` feature, on by default).
///
/// # Errors
/// [`CliError::Usage`] (exit 2) for `openstack` in a build without it.
pub fn check(config: &Config) -> Result<(), CliError> {
    match config.vim.kind {
        VimKind::Sim => Ok(()),
        #[cfg(feature = "openstack")]
        VimKind::Openstack => Ok(()),
        #[cfg(not(feature = "openstack"))]
        VimKind::Openstack => Err(not_built()),
    }
}

#[cfg(not(feature = "openstack"))]
fn not_built() -> CliError {
    CliError::Usage(
        "this build of vnfm has no openstack VIM (feature `openstack`); use --vim sim".into(),
    )
}

/// The OpenStack configuration of `config`: `[vim] os_cloud` names a `clouds.yaml` entry,
/// else `OS_CLOUD` does, else the `OS_*` variables give it.
///
/// # Errors
/// [`CliError::Usage`] (exit 2) naming what is missing or wrong (`OS_AUTH_URL`, `OS_PASSWORD`,
/// the `clouds.yaml` file and field, ...).
#[cfg(feature = "openstack")]
pub fn openstack_config(config: &Config) -> Result<vnfm_openstack::CloudConfig, CliError> {
    vnfm_openstack::CloudConfig::from_env_with_cloud(config.vim.os_cloud.as_deref()).map_err(|e| {
        let via = match config.vim.os_cloud.as_deref() {
            Some(c) => format!(" ([vim] os_cloud = {c:?})"),
            None => String::new(),
        };
        CliError::Usage(format!(
            "--vim openstack: the OpenStack configuration{via} is incomplete: {e} \
             (set OS_CLOUD and a clouds.yaml, or the OS_* variables such as OS_AUTH_URL, \
             OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME)"
        ))
    })
}

/// The cluster of a kubeconfig (the Kubernetes adapter, `vnfm-k8s`).
///
/// # Errors
/// The kubeconfig cannot be read or has no usable context (exit 2).
#[cfg(feature = "k8s")]
pub async fn kube_cluster(
    path: &Path,
    context: Option<&str>,
) -> Result<Arc<dyn ClusterDriver>, CliError> {
    let cluster = vnfm_k8s::KubeCluster::from_kubeconfig(path, context)
        .await
        .map_err(|e| CliError::Usage(format!("[cluster] kubeconfig: {e}")))?;
    Ok(Arc::new(cluster))
}

/// Without the Kubernetes adapter (`k8s` feature), a kubeconfig is a usage error.
///
/// # Errors
/// Always (exit 2).
#[cfg(not(feature = "k8s"))]
pub async fn kube_cluster(
    path: &Path,
    _context: Option<&str>,
) -> Result<Arc<dyn ClusterDriver>, CliError> {
    Err(CliError::Usage(format!(
        "[cluster] kubeconfig {}: this vnfm was built without the Kubernetes adapter (feature k8s)",
        path.display()
    )))
}
