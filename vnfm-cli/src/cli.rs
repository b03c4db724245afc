//! Command-line arguments (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, Overrides, Secret, VimKind};
use crate::output::Format;

const ABOUT: &str = "vnfm: NFV placement and VNF lifecycle management.

Decides where the virtual resources of a network function go (SOL003 grants with affinity /
anti-affinity, availability-zone reselection) and drives their lifecycle, on the built-in
simulated cloud by default.";

/// The `vnfm` command line.
#[derive(Debug, Parser)]
#[command(name = "vnfm", version, about = ABOUT, after_long_help = crate::exit::HELP, after_help = crate::exit::HELP)]
pub struct Cli {
    /// Global options.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Configuration file (default: ./vnfm.toml when it exists).
    #[arg(long, global = true, env = "VNFM_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// SQLite state file [default: $XDG_STATE_HOME/vnfm/state.sqlite].
    ///
    /// VNFM_STATE_URL (or `[state] url`) puts the state in a PostgreSQL database instead
    /// (the CLI's commands; not `vnfm serve` yet).
    #[arg(long, global = true, env = "VNFM_STATE", value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// The VIM to use [default: sim].
    #[arg(long, global = true, env = "VNFM_VIM", value_name = "KIND")]
    pub vim: Option<VimKind>,
    /// Seed of the simulated cloud's ids and choices [default: 0].
    #[arg(long, global = true, env = "VNFM_SIM_SEED", value_name = "N")]
    pub sim_seed: Option<u64>,
    /// Reproducible ids for scripts and tests: instance and operation ids come from N and a
    /// run counter in the state file, not from the clock.
    #[arg(long, global = true, env = "VNFM_ID_SALT", value_name = "N")]
    pub id_salt: Option<u64>,
    /// Directory of VNF packages known by vnfdId.
    #[arg(long, global = true, env = "VNFM_PACKAGES_DIR", value_name = "DIR")]
    pub packages_dir: Option<PathBuf>,
    /// Output format.
    #[arg(long, global = true, value_name = "FORMAT", default_value = "human")]
    pub format: Format,
    /// Shorthand for --format json.
    #[arg(long, global = true)]
    pub json: bool,
    /// No progress and no diagnostics except errors.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// More diagnostics on stderr (repeatable).
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl GlobalArgs {
    /// The effective output format.
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else {
            self.format
        }
    }

    /// The configuration overrides given by flags or environment.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            vim: self.vim,
            cloud: None,
            sim_seed: self.sim_seed,
            packages_dir: self.packages_dir.clone(),
            state: self.state.clone(),
            // An environment variable only: a flag's value shows in every user's `ps`.
            state_url: std::env::var(STATE_URL_VAR)
                .ok()
                .filter(|u| !u.is_empty())
                .map(Secret::new),
            id_salt: self.id_salt,
        }
    }
}

/// The environment variable of `[state] url`: the PostgreSQL database of the state.
pub const STATE_URL_VAR: &str = "VNFM_STATE_URL";

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the main job end to end on the built-in simulated cloud, narrated step by step.
    Demo(DemoArgs),
    /// Build the SOL003 grant request of an operation and answer it with the local granter.
    Grant(GrantArgs),
    /// Choose a cloud region by deployment intent (ONAP OOF), or place linked VNFs (OSM PLA).
    ///
    /// With --policy and --candidates: every candidate region is dropped with its reasons or
    /// valued, the survivors ranked, and one region chosen for all the package's VDUs. With
    /// --links: the VNFs of PLA's placement data placed on VIMs at minimum price, exactly.
    Select(SelectArgs),
    /// Create a VNF instance of a package and instantiate it.
    Instantiate(InstantiateArgs),
    /// Scale a VNF instance out or in by an aspect.
    Scale(ScaleArgs),
    /// Heal VNFCs of a VNF instance (re-create them).
    Heal(HealArgs),
    /// Terminate a VNF instance (delete its stack).
    Terminate(TerminateArgs),
    /// Inspect VNF instances in the state file.
    #[command(subcommand)]
    Instance(InstanceCommand),
    /// Inspect LCM operation occurrences in the state file.
    #[command(subcommand)]
    Op(OpCommand),
    /// Inspect a cloud file of the simulator.
    #[command(subcommand)]
    Cloud(CloudCommand),
    /// Hardware-aware affinity: label worker nodes with their compute host, verify that pod
    /// anti-affinity spreads over hardware, reconcile after VMs moved.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Inspect a VNF package.
    #[command(subcommand)]
    Package(PackageCommand),
    /// Inspect the effective configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Serve the SOL003 VNF LCM API, the Prometheus alert endpoints and /metrics over HTTP.
    Serve(ServeArgs),
    /// Reserve capacity now or for a future window (OPNFV Promise ledger of the state file).
    Reservation(ReservationArgs),
    /// Allocate capacity from a reservation or from unreserved capacity, or give it back.
    Allocation(AllocationArgs),
    /// Total, reserved, used and available capacity per zone; add or remove capacity.
    Capacity(CapacityArgs),
    /// Register capacity providers (a VIM's zones, or declared amounts) and list them.
    Provider(ProviderArgs),
}

/// `vnfm serve`: each option overrides `[server]` / `[prometheus_plugin]` of the configuration.
#[derive(Debug, Args, Default, Clone)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:9890].
    #[arg(long, env = "VNFM_LISTEN", value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// Enable POST /alert/auto_healing.
    #[arg(long, env = "VNFM_AUTO_HEALING", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub auto_healing: Option<bool>,
    /// Enable POST /alert/auto_scaling.
    #[arg(long, env = "VNFM_AUTO_SCALING", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub auto_scaling: Option<bool>,
    /// Heal window in seconds: alerts for one instance within it become one heal [default: 20].
    #[arg(long, env = "VNFM_TIMER_INTERVAL", value_name = "SECS")]
    pub timer_interval: Option<u64>,
    /// Seconds between two auto-scales of one aspect of one instance [default: 300].
    #[arg(long, env = "VNFM_SCALE_COOLDOWN", value_name = "SECS")]
    pub scale_cooldown: Option<u64>,
    /// Accepted `receiver_type` label value (repeatable) [default: tacker].
    #[arg(
        long = "receiver-type",
        env = "VNFM_RECEIVER_TYPES",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub receiver_types: Vec<String>,
    /// Bearer token the alert endpoints accept.
    #[arg(
        long,
        env = "VNFM_ALERT_BEARER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub alert_bearer_token: Option<String>,
    /// Basic-auth user the alert endpoints accept (with --alert-basic-password).
    #[arg(long, env = "VNFM_ALERT_BASIC_USER", value_name = "USER")]
    pub alert_basic_user: Option<String>,
    /// Basic-auth password the alert endpoints accept.
    #[arg(
        long,
        env = "VNFM_ALERT_BASIC_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub alert_basic_password: Option<String>,
    /// When an accepted alert is fsynced: periodic (written before the answer, fsynced
    /// within a second) or each (fsynced before the answer) [default: periodic].
    #[arg(long, env = "VNFM_ALERT_FSYNC", value_name = "WHEN")]
    pub alert_fsync: Option<crate::config::AlertFsync>,
    /// Bearer token the LCM API requires.
    #[arg(
        long,
        env = "VNFM_API_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub api_token: Option<String>,
}

impl ServeArgs {
    /// `config` with these options applied (flags or environment override the file).
    pub fn apply_to(&self, mut config: Config) -> Config {
        let a = self;
        if let Some(l) = a.listen {
            config.server.listen = l;
        }
        if let Some(t) = &a.api_token {
            config.server.api_token = Some(Secret::new(t.clone()));
        }
        if let Some(f) = a.alert_fsync {
            config.server.alert_fsync = f;
        }
        let p = &mut config.prometheus_plugin;
        if let Some(v) = a.auto_healing {
            p.plugin.auto_healing = v;
        }
        if let Some(v) = a.auto_scaling {
            p.plugin.auto_scaling = v;
        }
        if let Some(v) = a.timer_interval {
            p.plugin.timer_interval = v;
        }
        if let Some(v) = a.scale_cooldown {
            p.plugin.scale_cooldown = v;
        }
        if !a.receiver_types.is_empty() {
            p.plugin.receiver_types = a.receiver_types.clone();
        }
        if let Some(t) = &a.alert_bearer_token {
            p.bearer_token = Some(Secret::new(t.clone()));
        }
        if let Some(u) = &a.alert_basic_user {
            p.basic_auth_user = Some(u.clone());
        }
        if let Some(pw) = &a.alert_basic_password {
            p.basic_auth_password = Some(Secret::new(pw.clone()));
        }
        config
    }
}

/// `vnfm demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Seed of every random choice in the demo.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Placement options of the operations; each overrides `[placement]` of the configuration.
#[derive(Debug, Args, Default, Clone)]
pub struct PlacementArgs {
    /// Seed of every random choice [default: placement.seed of the configuration, else 0].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Zone selection policy of the granter and of reselection [default: placement.selection of
    /// the configuration; unset: a capacity-aware granter (random where capacity is unknown) and
    /// random reselection].
    #[arg(long, value_name = "POLICY")]
    pub selection: Option<crate::config::SelectionKind>,
    /// Set fallbackBestEffort on every placement constraint.
    #[arg(long)]
    pub fallback_best_effort: bool,
    /// Reselect zones when a stack fails for lack of resources.
    #[arg(long)]
    pub reselect_zones: bool,
    /// At most this many stack updates after the first attempt.
    #[arg(long, value_name = "N")]
    pub max_reselections: Option<u32>,
    /// Regex telling an insufficient-resource failure from others.
    #[arg(long, value_name = "REGEX")]
    pub insufficient_resource_pattern: Option<String>,
}

/// The operation a grant is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GrantOperation {
    /// Instantiate a new instance of the package.
    Instantiate,
    /// Scale out an instance of the state file (`--instance`, `--aspect`).
    ScaleOut,
}

/// `vnfm grant`
#[derive(Debug, Args)]
pub struct GrantArgs {
    /// The VNF package (directory or zip) [default: the built-in demo package].
    #[arg(long, value_name = "PATH")]
    pub package: Option<PathBuf>,
    /// The simulator's cloud file [default: the configured one, else the built-in demo cloud].
    #[arg(long, env = "VNFM_CLOUD", value_name = "FILE")]
    pub cloud: Option<PathBuf>,
    /// The operation.
    #[arg(long, default_value = "instantiate")]
    pub operation: GrantOperation,
    /// The deployment flavour (instantiate) [default: the package's only or first flavour].
    #[arg(long, value_name = "ID")]
    pub flavour: Option<String>,
    /// The instance to scale out.
    #[arg(long, value_name = "ID", required_if_eq("operation", "scale-out"))]
    pub instance: Option<String>,
    /// The aspect to scale out.
    #[arg(long, value_name = "ID", required_if_eq("operation", "scale-out"))]
    pub aspect: Option<String>,
    /// Scale-out steps.
    #[arg(long, default_value_t = 1)]
    pub steps: u32,
    /// Draw the new VNFCs granted into the zone of this reservation of the state file's
    /// ledger (`vnfm reservation`) from it, and name it in their `reservationId`.
    #[arg(long, value_name = "ID")]
    pub reservation: Option<String>,
    /// The time of the draw (RFC 3339) [default: now].
    #[arg(long, value_name = "TIME", requires = "reservation")]
    pub now: Option<chrono::DateTime<chrono::Utc>>,
    /// Placement options.
    #[command(flatten)]
    pub placement: PlacementArgs,
}

/// `vnfm instantiate`
#[derive(Debug, Args)]
pub struct InstantiateArgs {
    /// The VNF package (directory or zip) [default: the built-in demo package].
    #[arg(long, value_name = "PATH")]
    pub package: Option<PathBuf>,
    /// The simulator's cloud file, for a state file without a simulated cloud yet [default:
    /// the configured one, else the built-in demo cloud].
    #[arg(long, env = "VNFM_CLOUD", value_name = "FILE")]
    pub cloud: Option<PathBuf>,
    /// The deployment flavour [default: the package's only or first flavour].
    #[arg(long, value_name = "ID")]
    pub flavour: Option<String>,
    /// A zone an NFVO granted: `VDU1-0=AZ-1` for one VNFC, `VDU1=AZ-1` for every new VNFC of a
    /// VDU (repeatable). Those VNFCs skip the local granter; reselection starts from them.
    #[arg(long = "zone", value_name = "VNFC=ZONE")]
    pub zones: Vec<String>,
    /// Instantiate this existing NOT_INSTANTIATED instance instead of creating one.
    #[arg(long, value_name = "ID")]
    pub instance: Option<String>,
    /// The new instance's name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Draw the new VNFCs placed in the zone of this reservation (`vnfm reservation`) from
    /// it, one allocation per VNFC; refused before any stack is created when it cannot.
    #[arg(long, value_name = "ID", conflicts_with = "zones")]
    pub reservation: Option<String>,
    /// The time of the draw (RFC 3339) [default: now].
    #[arg(long, value_name = "TIME", requires = "reservation")]
    pub now: Option<chrono::DateTime<chrono::Utc>>,
    /// Deployment intent: a cloud-selection policy (ONAP seed format, JSON or YAML). The
    /// region is chosen among --candidates, the intent realised in the package's templates
    /// (HA server group, burstable flavour), and the instance deployed through the chosen
    /// region's VIM (`vim:` of the region); see docs/cloud-selection.md.
    #[arg(long, value_name = "FILE", requires = "candidates", conflicts_with_all = ["instance", "zones", "reservation"])]
    pub intent: Option<PathBuf>,
    /// The candidate file of --intent (cloud owners and regions).
    #[arg(long, value_name = "FILE", requires = "intent")]
    pub candidates: Option<PathBuf>,
    /// The customer location of --intent, `LAT,LON` in degrees (distance is measured to it).
    #[arg(long, value_name = "LAT,LON", requires = "intent")]
    pub customer: Option<String>,
    /// With --intent: where the region cannot honour HA (fewer hosts than instances), use
    /// soft anti-affinity and say so instead of refusing.
    #[arg(long, requires = "intent")]
    pub best_effort: bool,
    /// Placement options.
    #[command(flatten)]
    pub placement: PlacementArgs,
}

/// How many entries of each list of a region choice are printed by default (`vnfm select
/// --top`, and the choice `vnfm instantiate --intent` prints): the head is what a person reads;
/// 100,000 regions would be 100,000 lines.
pub const DEFAULT_TOP: usize = 20;

/// `vnfm select`
#[derive(Debug, Args)]
pub struct SelectArgs {
    /// The cloud-selection policy (ONAP seed format, JSON or YAML).
    #[arg(long, value_name = "FILE", required_unless_present = "links")]
    pub policy: Option<PathBuf>,
    /// The candidate file (cloud owners and regions, YAML or JSON).
    #[arg(long, value_name = "FILE", required_unless_present = "links")]
    pub candidates: Option<PathBuf>,
    /// Instead: place linked VNFs on VIMs at minimum price under the links' latency and jitter
    /// bounds, exactly (OSM PLA's model; FILE is PLA's `ns_placement_data` JSON).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["policy", "candidates", "package", "customer", "pareto"])]
    pub links: Option<PathBuf>,
    /// With --links: the most seconds to search; then the best placement found is printed
    /// with its lower bound and gap [default: `[placement] links_time_limit`, else 10].
    #[arg(long, value_name = "SECONDS", requires = "links")]
    pub time_limit: Option<f64>,
    /// With --links: the most search nodes [default: `[placement] links_node_limit`, else
    /// 20000].
    #[arg(long, value_name = "N", requires = "links")]
    pub node_limit: Option<u64>,
    /// The VNF package whose VDUs are the demands [default: the built-in demo package].
    #[arg(long, value_name = "PATH")]
    pub package: Option<PathBuf>,
    /// The deployment flavour [default: the package's only or first flavour].
    #[arg(long, value_name = "ID")]
    pub flavour: Option<String>,
    /// The customer location, `LAT,LON` in degrees (distance is measured to it).
    #[arg(long, value_name = "LAT,LON")]
    pub customer: Option<String>,
    /// Print each VDU's non-dominated candidates over (cost, distance) as well.
    #[arg(long)]
    pub pareto: bool,
    /// How many entries of each ranking and of each list of dropped candidates to print, the
    /// rest counted in a `… N more not shown` line (0: every one). `--output json` always has
    /// every one.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TOP, conflicts_with = "links")]
    pub top: usize,
    /// The simulator's cloud file, for regions whose capacity is the simulated cloud's zone
    /// catalogue [default: the state file's, else the configured one, else the demo cloud].
    #[arg(long, env = "VNFM_CLOUD", value_name = "FILE")]
    pub cloud: Option<PathBuf>,
}

/// Scale direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ScaleDirection {
    /// SCALE_OUT
    Out,
    /// SCALE_IN
    In,
}

/// `vnfm scale`
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// The instance.
    #[arg(long, value_name = "ID")]
    pub instance: String,
    /// The scaling aspect.
    #[arg(long, value_name = "ID")]
    pub aspect: String,
    /// Out or in.
    #[arg(long = "type", value_name = "DIRECTION")]
    pub direction: ScaleDirection,
    /// Steps.
    #[arg(long, default_value_t = 1)]
    pub steps: u32,
    /// The package [default: found by the instance's vnfdId in --packages-dir, else the
    /// built-in demo package].
    #[arg(long, value_name = "PATH")]
    pub package: Option<PathBuf>,
    /// Scale out: draw the new VNFCs placed in the zone of this reservation (`vnfm
    /// reservation`) from it, one allocation per VNFC; refused before the stack changes when
    /// it cannot.
    #[arg(long, value_name = "ID")]
    pub reservation: Option<String>,
    /// The time of the draw (RFC 3339) [default: now].
    #[arg(long, value_name = "TIME", requires = "reservation")]
    pub now: Option<chrono::DateTime<chrono::Utc>>,
    /// Placement options.
    #[command(flatten)]
    pub placement: PlacementArgs,
}

/// `vnfm heal`
#[derive(Debug, Args)]
pub struct HealArgs {
    /// The instance.
    #[arg(long, value_name = "ID")]
    pub instance: String,
    /// A VNFC to heal (`vnfcInfo` id such as `VDU1-0`; repeatable) [default: every VNFC].
    #[arg(long = "vnfc", value_name = "ID")]
    pub vnfcs: Vec<String>,
    /// The cause recorded with the heal.
    #[arg(long, value_name = "TEXT")]
    pub cause: Option<String>,
    /// The package [default: found by the instance's vnfdId].
    #[arg(long, value_name = "PATH")]
    pub package: Option<PathBuf>,
    /// Placement options.
    #[command(flatten)]
    pub placement: PlacementArgs,
}

/// `vnfm terminate`
#[derive(Debug, Args)]
pub struct TerminateArgs {
    /// The instance.
    #[arg(long, value_name = "ID")]
    pub instance: String,
    /// Also delete the instance once terminated.
    #[arg(long)]
    pub delete: bool,
}

/// `vnfm instance ...`
#[derive(Debug, Subcommand)]
pub enum InstanceCommand {
    /// Show one instance with its VNFCs.
    Show {
        /// The instance id.
        id: String,
    },
    /// List the instances.
    List,
}

/// `vnfm op ...`
#[derive(Debug, Subcommand)]
pub enum OpCommand {
    /// Show one operation occurrence with its reselection trace.
    Show {
        /// The occurrence id.
        id: String,
    },
    /// List operation occurrences.
    List {
        /// Only those of this instance.
        #[arg(long, value_name = "ID")]
        instance: Option<String>,
    },
    /// Mark an occurrence in FAILED_TEMP (or whose owner is gone: interrupted, lease expired)
    /// as FAILED (terminal), so other operations may run.
    Fail {
        /// The occurrence id.
        id: String,
    },
    /// Retry an occurrence in FAILED_TEMP (or whose owner is gone) from where it stopped: the
    /// grant is kept, a stack it created is updated, only the hooks run if the stack was done.
    Retry {
        /// The occurrence id.
        id: String,
        /// The package [default: found by the instance's vnfdId].
        #[arg(long, value_name = "PATH")]
        package: Option<PathBuf>,
    },
    /// Roll back an instantiate (delete its stack), a scale-out (remove what it added) or a
    /// change flavour (back to the old flavour) that is in FAILED_TEMP (or whose owner is gone).
    Rollback {
        /// The occurrence id.
        id: String,
        /// The package [default: found by the instance's vnfdId].
        #[arg(long, value_name = "PATH")]
        package: Option<PathBuf>,
    },
}

/// `vnfm cloud ...`
#[derive(Debug, Subcommand)]
pub enum CloudCommand {
    /// Show zones, hosts, capacity and flavors of a cloud file.
    Show {
        /// The cloud file (YAML) [default: the configured one, else the built-in demo cloud].
        #[arg(long, env = "VNFM_CLOUD", value_name = "FILE")]
        cloud: Option<PathBuf>,
    },
    /// Live-migrate a server of the simulated cloud (in the state file) to another host, as an
    /// operator forcing the target would: the server group's policy is not checked.
    Migrate {
        /// The server id.
        server: String,
        /// The target host (same zone, up, with room).
        #[arg(long, value_name = "HOST")]
        to: String,
    },
}

/// `vnfm cluster ...`
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Label the worker nodes of a cluster VNF with their compute host (one PATCH per node
    /// whose label changes).
    Label(ClusterArgs),
    /// Report pods per physical host, the skew of every anti-affinity and spread group, the
    /// pending pods with the scheduler's reason, the pairs of pods sharing a host, and stale
    /// labels. Exit 6 on a violation.
    Verify(ClusterArgs),
    /// Re-read where the worker VMs run, fix the labels, list the pods now sharing a host;
    /// with --evict, evict one pod per violating pair through the Eviction API.
    Reconcile {
        /// What to reconcile.
        #[command(flatten)]
        args: ClusterArgs,
        /// Evict one pod of each pair of a violated group (PodDisruptionBudgets honoured).
        #[arg(long)]
        evict: bool,
    },
}

/// The cluster VNF and the CNF's namespace.
#[derive(Debug, Args, Clone)]
pub struct ClusterArgs {
    /// The VNF instance whose servers are the cluster's worker nodes.
    #[arg(long, value_name = "ID")]
    pub instance: String,
    /// The CNF's namespace [default: [cluster] namespace, else `default`].
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
}

/// `vnfm package ...`
#[derive(Debug, Subcommand)]
pub enum PackageCommand {
    /// Show the VDUs, flavors, storage, placement rules and scaling aspects of a package.
    Show {
        /// A package directory or zip file.
        path: PathBuf,
    },
}

/// `vnfm config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Show the effective configuration (file, environment and flags merged).
    Show,
}

/// Amounts per resource line (Promise's capacity fields); unset lines are zero.
#[derive(Debug, Args, Default, Clone)]
pub struct AmountArgs {
    /// Virtual CPUs.
    #[arg(long, value_name = "N")]
    pub cores: Option<u64>,
    /// Memory in MiB.
    #[arg(long, value_name = "MIB")]
    pub ram: Option<u64>,
    /// Instances (servers).
    #[arg(long, value_name = "N")]
    pub instances: Option<u64>,
    /// Network addresses.
    #[arg(long, value_name = "N")]
    pub addresses: Option<u64>,
    /// Volumes.
    #[arg(long, value_name = "N")]
    pub volumes: Option<u64>,
    /// Storage size in GiB.
    #[arg(long, value_name = "GIB")]
    pub size: Option<u64>,
    /// Volume snapshots.
    #[arg(long, value_name = "N")]
    pub snapshots: Option<u64>,
}

/// Reservation priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PriorityArg {
    /// May preempt normal and low reservations that have not started.
    High,
    /// The default.
    Normal,
    /// May be preempted.
    Low,
}

/// How a query window matches reservations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeArg {
    /// Reservations overlapping the window.
    Inclusive,
    /// Reservations entirely inside the window.
    Exclusive,
}

/// The time a ledger command acts at.
#[derive(Debug, Args, Default, Clone)]
pub struct NowArgs {
    /// The time the command acts at (RFC 3339) [default: now]; never before the ledger's last
    /// operation.
    #[arg(long, global = true, value_name = "TIME")]
    pub now: Option<chrono::DateTime<chrono::Utc>>,
}

/// `vnfm reservation ...`
#[derive(Debug, Args)]
pub struct ReservationArgs {
    /// When the command acts.
    #[command(flatten)]
    pub now: NowArgs,
    /// The action.
    #[command(subcommand)]
    pub command: ReservationCommand,
}

/// The `vnfm reservation` actions.
#[derive(Debug, Subcommand)]
pub enum ReservationCommand {
    /// Reserve capacity in a zone: for future use over [--start, --end), or for immediate use
    /// until --expiry. A request that does not fit is answered with a counter-offer (exit 4).
    Create {
        /// The zone.
        #[arg(long, value_name = "ZONE")]
        zone: String,
        /// The amounts.
        #[command(flatten)]
        amounts: AmountArgs,
        /// Start of a future reservation (with --end).
        #[arg(long, value_name = "TIME", requires = "end")]
        start: Option<chrono::DateTime<chrono::Utc>>,
        /// End of the reservation [default: --expiry for immediate use, else start plus the
        /// policy's max-duration].
        #[arg(long, value_name = "TIME")]
        end: Option<chrono::DateTime<chrono::Utc>>,
        /// When unallocated capacity goes back to the zone [default: the policy's expiry].
        #[arg(long, value_name = "TIME")]
        expiry: Option<chrono::DateTime<chrono::Utc>>,
        /// Priority.
        #[arg(long, value_name = "PRIORITY", default_value = "normal")]
        priority: PriorityArg,
        /// A pre-existing resource element the reservation needs (repeatable).
        #[arg(long = "element", value_name = "REF")]
        elements: Vec<String>,
        /// The reservation's id [default: a new UUID].
        #[arg(long, value_name = "ID")]
        id: Option<String>,
    },
    /// Change a reservation: each option given replaces its value (an amount flag replaces
    /// that line only). A change that does not fit is answered with a counter-offer (exit 4).
    Update {
        /// The reservation id.
        id: String,
        /// New zone (only without allocations).
        #[arg(long, value_name = "ZONE")]
        zone: Option<String>,
        /// New amounts, per line.
        #[command(flatten)]
        amounts: AmountArgs,
        /// New start (only before it started).
        #[arg(long, value_name = "TIME")]
        start: Option<chrono::DateTime<chrono::Utc>>,
        /// New end.
        #[arg(long, value_name = "TIME")]
        end: Option<chrono::DateTime<chrono::Utc>>,
        /// New expiry.
        #[arg(long, value_name = "TIME")]
        expiry: Option<chrono::DateTime<chrono::Utc>>,
        /// New resource elements (repeatable; replaces the list).
        #[arg(long = "element", value_name = "REF")]
        elements: Vec<String>,
    },
    /// Cancel a reservation (its live allocations end with it).
    Cancel {
        /// The reservation id.
        id: String,
    },
    /// Show one reservation.
    Show {
        /// The reservation id.
        id: String,
    },
    /// List reservations by zone, window, elements, with or without utilization.
    Query {
        /// Only those of this zone.
        #[arg(long, value_name = "ZONE")]
        zone: Option<String>,
        /// Window start.
        #[arg(long, value_name = "TIME")]
        start: Option<chrono::DateTime<chrono::Utc>>,
        /// Window end [default: forever] (needs --start).
        #[arg(long, value_name = "TIME", requires = "start")]
        end: Option<chrono::DateTime<chrono::Utc>>,
        /// How the window matches (needs --start).
        #[arg(long, value_name = "SCOPE", default_value = "inclusive")]
        scope: ScopeArg,
        /// Leave this reservation out (repeatable).
        #[arg(long, value_name = "ID")]
        without: Vec<String>,
        /// Only those holding at least one of these elements (repeatable).
        #[arg(long, value_name = "REF")]
        some: Vec<String>,
        /// Only those holding all of these elements (repeatable).
        #[arg(long, value_name = "REF")]
        every: Vec<String>,
        /// Also report each reservation's allocated and remaining amounts.
        #[arg(long)]
        utilization: bool,
    },
}

/// `vnfm allocation ...`
#[derive(Debug, Args)]
pub struct AllocationArgs {
    /// When the command acts.
    #[command(flatten)]
    pub now: NowArgs,
    /// The action.
    #[command(subcommand)]
    pub command: AllocationCommand,
}

/// The `vnfm allocation` actions.
#[derive(Debug, Subcommand)]
pub enum AllocationCommand {
    /// Allocate capacity (Promise create-instance): from an active reservation, or from the
    /// unreserved capacity of a zone. Refused, saying why, when it does not fit.
    Create {
        /// Draw from this reservation.
        #[arg(long, value_name = "ID", required_unless_present = "zone")]
        reservation: Option<String>,
        /// The zone (required without --reservation).
        #[arg(long, value_name = "ZONE")]
        zone: Option<String>,
        /// The amounts.
        #[command(flatten)]
        amounts: AmountArgs,
        /// What the allocation stands for (e.g. a server id).
        #[arg(long, value_name = "REF")]
        instance_ref: Option<String>,
        /// The allocation's id [default: a new UUID].
        #[arg(long, value_name = "ID")]
        id: Option<String>,
    },
    /// Give back what an allocation holds (Promise destroy-instance).
    Destroy {
        /// The allocation id.
        id: String,
    },
}

/// `vnfm capacity ...`
#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// When the command acts.
    #[command(flatten)]
    pub now: NowArgs,
    /// The action.
    #[command(subcommand)]
    pub command: CapacityCommand,
}

/// The `vnfm capacity` actions.
#[derive(Debug, Subcommand)]
pub enum CapacityCommand {
    /// Total, reserved, used and available capacity over a window (each at its worst instant),
    /// per zone; with --utilization, the timeline of one zone.
    Query {
        /// Only this zone.
        #[arg(long, value_name = "ZONE")]
        zone: Option<String>,
        /// Window start [default: --now].
        #[arg(long, value_name = "TIME")]
        start: Option<chrono::DateTime<chrono::Utc>>,
        /// Window end [default: one hour after the start].
        #[arg(long, value_name = "TIME")]
        end: Option<chrono::DateTime<chrono::Utc>>,
        /// The utilization timeline of the zone over the window instead (needs --zone).
        #[arg(long, requires = "zone")]
        utilization: bool,
    },
    /// Add capacity to a zone over a window (a pool of the provider `declared`).
    Increase {
        /// The zone.
        #[arg(long, value_name = "ZONE")]
        zone: String,
        /// The amounts.
        #[command(flatten)]
        amounts: AmountArgs,
        /// Start [default: --now].
        #[arg(long, value_name = "TIME")]
        start: Option<chrono::DateTime<chrono::Utc>>,
        /// End [default: forever].
        #[arg(long, value_name = "TIME")]
        end: Option<chrono::DateTime<chrono::Utc>>,
        /// Add --zone to the ledger when it has no such zone yet (without it, an unknown zone
        /// is refused: a typo would create a zone).
        #[arg(long)]
        new_zone: bool,
    },
    /// Remove capacity from a zone over a window; refused (exit 4) when reservations or
    /// allocations hold it, unless --force.
    Decrease {
        /// The zone.
        #[arg(long, value_name = "ZONE")]
        zone: String,
        /// The amounts.
        #[command(flatten)]
        amounts: AmountArgs,
        /// Start [default: --now].
        #[arg(long, value_name = "TIME")]
        start: Option<chrono::DateTime<chrono::Utc>>,
        /// End [default: forever].
        #[arg(long, value_name = "TIME")]
        end: Option<chrono::DateTime<chrono::Utc>>,
        /// Remove it even when reservations hold it (they are notified of the loss).
        #[arg(long)]
        force: bool,
    },
    /// How many instances of a flavour (the amounts of one instance) fit, per zone, at every
    /// instant of a window.
    Fit {
        /// Only this zone.
        #[arg(long, value_name = "ZONE")]
        zone: Option<String>,
        /// The amounts of one instance.
        #[command(flatten)]
        amounts: AmountArgs,
        /// Window start [default: --now].
        #[arg(long, value_name = "TIME")]
        start: Option<chrono::DateTime<chrono::Utc>>,
        /// Window end [default: one hour after the start].
        #[arg(long, value_name = "TIME")]
        end: Option<chrono::DateTime<chrono::Utc>>,
    },
}

/// `vnfm provider ...`
#[derive(Debug, Args)]
pub struct ProviderArgs {
    /// When the command acts.
    #[command(flatten)]
    pub now: NowArgs,
    /// The action.
    #[command(subcommand)]
    pub command: ProviderCommand,
}

/// The `vnfm provider` actions.
#[derive(Debug, Subcommand)]
pub enum ProviderCommand {
    /// Register a provider's capacity from --now on: by default the zone catalogue of the
    /// VIM (the state file's simulated cloud): every available zone's free host capacity plus
    /// default quotas; with --declared, the amounts given for --zone.
    Add {
        /// The provider's name [default: `zone catalogue` for the VIM; required with
        /// --declared].
        #[arg(long, value_name = "NAME", required_if_eq("declared", "true"))]
        name: Option<String>,
        /// Declare the amounts given for --zone instead of reading the zone catalogue.
        #[arg(long, requires = "zone")]
        declared: bool,
        /// The zone (with --declared).
        #[arg(long, value_name = "ZONE", requires = "declared")]
        zone: Option<String>,
        /// The amounts (with --declared).
        #[command(flatten)]
        amounts: AmountArgs,
        /// The simulator's cloud file, for a state file without a simulated cloud yet
        /// [default: the configured one, else the built-in demo cloud].
        #[arg(
            long,
            env = "VNFM_CLOUD",
            value_name = "FILE",
            conflicts_with = "declared"
        )]
        cloud: Option<PathBuf>,
    },
    /// List the providers with their zones.
    List,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::AlertFsync;

    #[test]
    fn alert_fsync_from_the_flag_overrides_the_file() {
        let c = Config::from_toml(
            std::path::Path::new("v.toml"),
            "[server]\nalert_fsync = \"each\"\n",
        )
        .unwrap();
        let args = ServeArgs {
            alert_fsync: Some(AlertFsync::Periodic),
            ..Default::default()
        };
        assert_eq!(args.apply_to(c).server.alert_fsync, AlertFsync::Periodic);
    }
}
