//! `vnfm.toml`: the configuration file, and how flags and environment variables override it.
//!
//! Precedence, highest first: a command-line flag, its environment variable, the configuration
//! file, the built-in default. The file is the one named by `--config` / `VNFM_CONFIG`, else
//! `./vnfm.toml` when it exists, else none. Unknown sections or keys are errors.
//!
//! ```toml
//! [vim]
//! kind = "sim"              # --vim, VNFM_VIM. "sim" (default): the simulated cloud;
//!                           # "openstack": a real OpenStack (Keystone v3, Nova, Heat)
//! cloud = "my-cloud.yaml"   # --cloud, VNFM_CLOUD. Cloud file of the simulator; default: built-in demo cloud
//! seed = 0                  # --sim-seed, VNFM_SIM_SEED. Seed of the simulator's ids and choices
//! os_cloud = "mycloud"      # openstack: the clouds.yaml entry; default: OS_CLOUD, else the OS_* variables
//!
//! [packages]
//! dir = "packages"          # --packages-dir, VNFM_PACKAGES_DIR. Packages known by vnfdId
//! rescan_interval = 10      # vnfm serve: seconds between looks for changed packages; 0 = none
//!
//! [state]
//! path = "vnfm.sqlite"      # --state, VNFM_STATE. Default: $XDG_STATE_HOME/vnfm/state.sqlite
//!                           # (or ~/.local/state/vnfm/state.sqlite)
//! url = "postgres://vnfm:secret@db:5432/vnfm"  # VNFM_STATE_URL (no flag: a password on a
//!                           # command line is visible to every user). The state in PostgreSQL
//!                           # instead of the file (not with `path`); CLI commands only for now
//!                           # (no key) --id-salt, VNFM_ID_SALT: reproducible ids for scripts
//!
//! [placement]
//! fallback_best_effort = false   # fallbackBestEffort of every placement constraint
//! reselect_zones = false         # reselect zones when a stack fails for lack of resources
//! insufficient_resource_pattern = "..."  # regex on stack_status_reason; default: see below
//! max_reselections = 3           # stack updates after the first attempt; unset = no limit
//! group_race_retries = 2         # same-zone applies per operation after Nova's server-group
//!                                # race ("Anti-affinity instance group policy was violated")
//! selection = "random"           # "random" (the spec) or "capacity-aware": reselection's
//!                                # policy and, when set, the granter's too. Unset: the granter
//!                                # is capacity-aware (random where capacity is unknown) and
//!                                # reselection random
//! grant_selection = "capacity-aware"  # the granter's policy alone (overrides `selection`)
//! seed = 0                       # seed of the random choices (also --seed)
//! links_time_limit = 10          # vnfm select --links: seconds of search (--time-limit)
//! links_node_limit = 20000       # vnfm select --links: search nodes (--node-limit)
//!
//! [server]                       # `vnfm serve`
//! listen = "127.0.0.1:9890"      # --listen, VNFM_LISTEN
//! api_token = "..."              # VNFM_API_TOKEN: bearer token the LCM API requires; unset = none
//! body_limit = 1048576           # largest request body in bytes (413 beyond)
//! request_timeout = 30           # seconds a read may take (503 beyond), a write's body (408)
//! header_timeout = 10            # seconds to send a request's line and headers (closed beyond)
//! idle_timeout = 60              # seconds a kept-alive connection may idle (closed beyond)
//! max_connections = 1024         # connections open at once; default 1024 or ulimit -n - 32
//! alert_fsync = "periodic"       # --alert-fsync, VNFM_ALERT_FSYNC: "periodic" (an accepted alert
//!                                # is written before its answer, fsynced within a second) or
//!                                # "each" (fsynced before its answer); see AlertFsync
//! page_size = 100                # resources per page of a SOL003 list (Link rel="next" beyond)
//! filter_work_limit = 20000000   # work units one SOL013 filter may take per request (400 beyond)
//! list_scan_limit = 10000        # instances one GET /vnf_instances reads at most (a short page
//!                                # with a next marker beyond)
//! log_format = "text"            # "text" (one line per event, for people) or "json" (one object
//!                                # per line); see LogFormat
//! log_level = "info"             # an EnvFilter directive ("debug", "warn,vnfm_cli=debug");
//!                                # VNFM_LOG overrides it, --quiet makes the default "warn"
//! replica_id = "vnfm-0"          # VNFM_REPLICA_ID: on every log line and /metrics series;
//!                                # default: the hostname, else a random id made at start
//!
//! [server.tls]                   # HTTPS only on `listen` (rustls); unset = plain HTTP
//! cert = "server.crt"            # PEM: the server's certificate chain (both cert and key, or neither)
//! key = "server.key"             # PEM: its private key
//! client_ca = "clients-ca.pem"   # PEM bundle: mutual TLS, clients must present a certificate it signed
//!
//! [[server.oauth2.clients]]      # a client of POST /token (Tacker's [v2_nfvo])
//! id = "tacker"
//! secret = "tacker-password"     # HTTP Basic; and/or, with client_ca, the certificate's subject:
//! tls_client_auth_subject_dn = "CN=tacker.example,O=Example"
//!
//! [cluster]                      # hardware-aware affinity (`vnfm cluster`, the label hook)
//! kubeconfig = "kubeconfig"      # the Kubernetes cluster (token, client certificate, CA); unset with
//!                                # kind = "sim": the simulated cloud's cluster
//! context = "admin"              # the kubeconfig context; default: its current-context
//! namespace = "default"          # --namespace: the CNF's namespace
//! host_label = "topology.openstack.org/host-id"  # the node label that names the compute host
//! allow_zone_label = false       # true to let host_label be topology.kubernetes.io/zone
//! nodes = "node-role.kubernetes.io/worker"  # only these nodes are the cluster VNF's (selector)
//! cluster_vnfds = ["..."]        # vnfdIds of cluster VNFs: their instantiate, scale and heal
//!                                # end by labelling the worker nodes (the host-labels hook)
//!
//! [grant]                        # where grants come from (docs/grants.md)
//! nfvo = "http://nfvo:8080/grant/v1"  # an NFVO's SOL003 Grant API root; unset = the local granter
//! bearer_token = "..."           # or basic_auth_user / basic_auth_password: sent to the NFVO
//! poll_interval = 2              # seconds between two polls of a grant the NFVO still decides
//! timeout = 300                  # seconds without a grant before the operation ends ROLLED_BACK
//! request_timeout = 10           # seconds one request to the NFVO may take
//!
//! [prometheus_plugin]            # the alert endpoints of `vnfm serve`
//! auto_healing = false           # --auto-healing, VNFM_AUTO_HEALING: POST /alert/auto_healing
//! auto_scaling = false           # --auto-scaling, VNFM_AUTO_SCALING: POST /alert/auto_scaling
//! timer_interval = 20            # --timer-interval: heal window in seconds
//! scale_cooldown = 300           # --scale-cooldown: seconds between two auto-scales of an aspect
//! receiver_types = ["tacker"]    # --receiver-type: accepted `receiver_type` label values
//! max_fingerprint_bytes = 128    # longest alert fingerprint kept; longer: ignored `oversized`
//! max_labels = 64                # most labels per alert; more: ignored `oversized`
//! max_label_bytes = 4096         # longest label name or value; longer: ignored `oversized`
//! bearer_token = "..."           # VNFM_ALERT_BEARER_TOKEN
//! basic_auth_user = "..."        # VNFM_ALERT_BASIC_USER
//! basic_auth_password = "..."    # VNFM_ALERT_BASIC_PASSWORD
//! ```
//!
//! Secrets (`api_token`, `bearer_token`, `basic_auth_password`, also those of `[grant]`) are [`Secret`]s: `config show`
//! and `Debug` print them as `<redacted>`.
//!
//! The default `insufficient_resource_pattern` is
//! [`vnfm_core::reselect::DEFAULT_INSUFFICIENT_RESOURCE_PATTERN`]: it matches create and update
//! failures whose Nova fault is "No valid host was found" or "Exceeded maximum number of
//! retries", with nested resource paths. An invalid regex is a configuration error at start.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vnfm_core::alert::PrometheusPluginConfig;

use crate::dn::DistinguishedName;
use crate::error::CliError;

/// The kind of VIM the drivers talk to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum VimKind {
    /// The built-in simulated cloud.
    #[default]
    Sim,
    /// A real OpenStack (Keystone v3, Nova, Heat).
    Openstack,
}

/// `[vim]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VimConfig {
    /// `kind`: `sim` (default) or `openstack`.
    #[serde(default)]
    pub kind: VimKind,
    /// `cloud`: the simulator's cloud file; `None` means the built-in demo cloud.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud: Option<PathBuf>,
    /// `seed`: the simulator's seed (default 0).
    #[serde(default)]
    pub seed: u64,
    /// `os_cloud`: with `kind = "openstack"`, the `clouds.yaml` entry of the cloud (instead of
    /// `OS_CLOUD`); `None` means `OS_CLOUD`, else the `OS_*` variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_cloud: Option<String>,
}

/// `[packages]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PackagesConfig {
    /// `dir`: a directory of VNF packages (directories or zips), known by their vnfdId.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// `rescan_interval`: `vnfm serve` looks for changes in `dir` every this many seconds and
    /// re-reads the packages that changed (default 10); 0: only at start and on an explicit
    /// reload (`POST /admin/packages/reload`, SIGHUP).
    pub rescan_interval: u64,
}

/// The default `[packages] rescan_interval`, in seconds.
pub const DEFAULT_RESCAN_INTERVAL: u64 = 10;

impl Default for PackagesConfig {
    fn default() -> Self {
        Self {
            dir: None,
            rescan_interval: DEFAULT_RESCAN_INTERVAL,
        }
    }
}

/// `[state]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// `path`: the SQLite state file; `None` means the default location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// `url` (or `VNFM_STATE_URL`): a PostgreSQL database
    /// (`postgres://user:password@host:port/database`) that holds the state instead of the
    /// file. Not together with `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<Secret>,
    /// `--id-salt` / `VNFM_ID_SALT` only (not a key of the file): when set, the operations
    /// draw instance and operation ids from this number and a run counter kept in the state
    /// file instead of the clock, so a replayed script gets the same ids.
    #[serde(skip)]
    pub id_salt: Option<u64>,
    /// `lease_seconds`: how long a running operation's claim on its instance lasts without
    /// renewal (renewed every third of it while the operation runs). When the process running
    /// an operation is killed, other commands may retry, roll back or fail it once this has
    /// passed. Default 60; at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_seconds: Option<u64>,
    /// `takeover`: what `vnfm serve` does with a running operation whose owner went away (its
    /// lease expired: a killed command, a replica that died): `interrupt` (the default:
    /// `FAILED_TEMP`, `failureKind: INTERRUPTED`, for the NFVO to retry, roll back or fail) or
    /// `resume` (run on where its saved progress says, as a retry would).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover: Option<TakeoverKind>,
    /// `resume_limit`: under `takeover = "resume"`, how many times one operation is resumed at
    /// most (then interrupted: an operation that kills whoever runs it does not go round the
    /// replicas for ever). Default 3; at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_limit: Option<u32>,
}

/// `[state] takeover`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TakeoverKind {
    /// `FAILED_TEMP`, `failureKind: INTERRUPTED`.
    #[default]
    Interrupt,
    /// Run on where its progress says.
    Resume,
}

/// How a zone is chosen among the compliant ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum SelectionKind {
    /// A random compliant zone (seeded), as the spec says.
    #[default]
    Random,
    /// The compliant zone with the most free capacity.
    CapacityAware,
}

/// `[placement]`
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementConfig {
    /// `fallback_best_effort` (default false).
    #[serde(default)]
    pub fallback_best_effort: bool,
    /// `reselect_zones` (default false).
    #[serde(default)]
    pub reselect_zones: bool,
    /// `insufficient_resource_pattern`; `None` means the default pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insufficient_resource_pattern: Option<String>,
    /// `max_reselections`; `None` means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reselections: Option<u32>,
    /// `group_race_retries`: same-zone stack applies per operation after Nova's server-group
    /// race; `None` means the default (2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_race_retries: Option<u32>,
    /// `selection`: reselection's policy (default random) and, when set, the granter's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<SelectionKind>,
    /// `grant_selection`: the local granter's policy (default: `selection` when set, else
    /// capacity-aware, which falls back to random where the catalogue reports no capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_selection: Option<SelectionKind>,
    /// `seed` (default 0).
    #[serde(default)]
    pub seed: u64,
    /// `links_time_limit`: seconds `vnfm select --links` may search (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links_time_limit: Option<f64>,
    /// `links_node_limit`: search nodes `vnfm select --links` may visit (default
    /// `vnfm_core::intent::links::DEFAULT_NODE_LIMIT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links_node_limit: Option<u64>,
}

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[vim]`
    #[serde(default)]
    pub vim: VimConfig,
    /// `[packages]`
    #[serde(default)]
    pub packages: PackagesConfig,
    /// `[state]`
    #[serde(default)]
    pub state: StateConfig,
    /// `[placement]`
    #[serde(default)]
    pub placement: PlacementConfig,
    /// `[server]`
    #[serde(default)]
    pub server: ServerConfig,
    /// `[prometheus_plugin]`
    #[serde(default)]
    pub prometheus_plugin: PrometheusConfig,
    /// `[cluster]`
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// `[notifications]`
    #[serde(default)]
    pub notifications: NotificationsConfig,
    /// `[grant]`
    #[serde(default)]
    pub grant: GrantConfig,
}

/// `[grant]`: where the grants of the LCM operations come from. Unset `nfvo`: the local
/// granter (vnfm decides). Set: an NFVO's SOL003 Grant interface is asked, and the operation
/// stays `STARTING` until it answers (see `vnfm_core::lifecycle::NfvoGrants` and
/// docs/grants.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrantConfig {
    /// `nfvo`: the API root of the NFVO's Grant interface, e.g.
    /// `http://nfvo.example:8080/grant/v1` (requests go to `{nfvo}/grants`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nfvo: Option<String>,
    /// `bearer_token`: `Authorization: Bearer` of every request to the NFVO.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bearer_token: Option<Secret>,
    /// `basic_auth_user`: HTTP Basic user of every request to the NFVO (with
    /// `basic_auth_password`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basic_auth_user: Option<String>,
    /// `basic_auth_password`: HTTP Basic password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basic_auth_password: Option<Secret>,
    /// `poll_interval`: seconds between two polls of a grant the NFVO is still deciding, or
    /// two attempts to reach it (default 2).
    pub poll_interval: u64,
    /// `timeout`: seconds after the request without a grant when the operation ends
    /// `ROLLED_BACK` (default 300).
    pub timeout: u64,
    /// `request_timeout`: seconds one HTTP request to the NFVO may take (default 10).
    pub request_timeout: u64,
}

impl Default for GrantConfig {
    fn default() -> Self {
        Self {
            nfvo: None,
            bearer_token: None,
            basic_auth_user: None,
            basic_auth_password: None,
            poll_interval: 2,
            timeout: 300,
            request_timeout: 10,
        }
    }
}

impl GrantConfig {
    /// The checked settings when an NFVO grants, `None` for the local granter.
    ///
    /// # Errors
    /// [`CliError::Usage`] naming the key: a `nfvo` that is no `http(s)` URL, a duration of
    /// 0, a `timeout` shorter than `poll_interval`, both a token and a Basic user, a user
    /// without a password (or the other way), or credentials without `nfvo`.
    pub fn nfvo(&self) -> Result<Option<NfvoSettings>, CliError> {
        let usage = |m: String| Err(CliError::Usage(format!("[grant] {m}")));
        let Some(url) = &self.nfvo else {
            if self.bearer_token.is_some() || self.basic_auth_user.is_some() {
                return usage(
                    "credentials are set but nfvo is not: set nfvo (the NFVO's Grant API \
                     root) or remove them"
                        .into(),
                );
            }
            return Ok(None);
        };
        let parsed = match reqwest::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => u,
            Ok(u) => {
                return usage(format!(
                    "nfvo = {url:?}: scheme {:?}; expected an http or https URL with a host, \
                     e.g. http://nfvo.example:8080/grant/v1",
                    u.scheme()
                ))
            }
            Err(e) => {
                return usage(format!(
                    "nfvo = {url:?}: {e}; expected an http or https URL, e.g. \
                     http://nfvo.example:8080/grant/v1"
                ))
            }
        };
        for (key, v) in [
            ("poll_interval", self.poll_interval),
            ("timeout", self.timeout),
            ("request_timeout", self.request_timeout),
        ] {
            if v == 0 {
                return usage(format!("{key} = 0; expected at least 1 (seconds)"));
            }
        }
        if self.timeout < self.poll_interval {
            return usage(format!(
                "timeout = {} is shorter than poll_interval = {}; expected timeout >= \
                 poll_interval",
                self.timeout, self.poll_interval
            ));
        }
        let auth = match (
            &self.bearer_token,
            &self.basic_auth_user,
            &self.basic_auth_password,
        ) {
            (None, None, None) => NfvoAuth::None,
            (Some(t), None, None) if !t.expose().is_empty() => NfvoAuth::Bearer(t.clone()),
            (Some(_), None, None) => return usage("bearer_token is empty".into()),
            (None, Some(u), Some(p)) if !u.is_empty() => NfvoAuth::Basic {
                user: u.clone(),
                password: p.clone(),
            },
            (None, Some(_), Some(_)) => return usage("basic_auth_user is empty".into()),
            (None, Some(_), None) | (None, None, Some(_)) => {
                return usage(
                    "basic_auth_user and basic_auth_password go together; one is missing".into(),
                )
            }
            (Some(_), _, _) => {
                return usage(
                    "both bearer_token and basic_auth_user are set; expected one of them".into(),
                )
            }
        };
        Ok(Some(NfvoSettings {
            url: parsed,
            auth,
            poll_interval: std::time::Duration::from_secs(self.poll_interval),
            timeout: std::time::Duration::from_secs(self.timeout),
            request_timeout: std::time::Duration::from_secs(self.request_timeout),
        }))
    }
}

/// How vnfm authenticates to the NFVO.
#[derive(Clone, Debug, PartialEq)]
pub enum NfvoAuth {
    /// No `Authorization` header.
    None,
    /// `Authorization: Bearer`.
    Bearer(Secret),
    /// `Authorization: Basic`.
    Basic {
        /// The user.
        user: String,
        /// The password.
        password: Secret,
    },
}

/// `[grant]` checked, for an NFVO that grants.
#[derive(Clone, Debug, PartialEq)]
pub struct NfvoSettings {
    /// The API root of the Grant interface.
    pub url: reqwest::Url,
    /// The authentication.
    pub auth: NfvoAuth,
    /// Between two polls.
    pub poll_interval: std::time::Duration,
    /// The grant timeout.
    pub timeout: std::time::Duration,
    /// One HTTP request's timeout.
    pub request_timeout: std::time::Duration,
}

/// `[notifications]`: how `vnfm serve` delivers the SOL003 lifecycle notifications to the
/// subscriptions' callbacks (see docs/serve.md): bounded exponential back-off.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotificationsConfig {
    /// `retry_initial_ms`: the wait after the first failed attempt (default 1000); it doubles
    /// at every failure.
    pub retry_initial_ms: u64,
    /// `retry_max_delay_ms`: the longest wait between two attempts (default 300000).
    pub retry_max_delay_ms: u64,
    /// `max_attempts`: attempts at most per notification (default 20); then it is dropped and
    /// counted (`vnfm_lcm_notifications_total{outcome="dropped"}`).
    pub max_attempts: u32,
    /// `max_age`: seconds after which an undelivered notification is dropped and counted
    /// (default 86400).
    pub max_age: u64,
    /// `timeout`: seconds one attempt (and the callback test at subscription) may take
    /// (default 10).
    pub timeout: u64,
    /// `max_subscriptions`: subscriptions at most (default 1000); a `POST /subscriptions`
    /// beyond it is refused (409) until one is deleted. The Promise subscriptions
    /// (`/promise/v1/subscriptions`) have the same bound, of their own.
    pub max_subscriptions: u64,
    /// `max_filter_values`: values at most in one list of a subscription (default 256), e.g.
    /// its filter's `vnfInstanceIds`; more is refused (422 naming the member).
    pub max_filter_values: usize,
    /// `max_value_length`: characters at most of one string of a subscription (default 2048):
    /// an id, a name, `callbackUri`, a credential.
    pub max_value_length: usize,
    /// `max_subscription_bytes`: bytes at most of one subscription as JSON (default 32768).
    pub max_subscription_bytes: usize,
    /// `max_outbox_entries`: undelivered notifications kept at most per subscription (default
    /// 1000); beyond, the oldest are dropped and counted (docs/serve.md).
    pub max_outbox_entries: usize,
    /// `max_outbox_bytes`: bytes of undelivered notifications kept at most per subscription
    /// (default 4 MiB); beyond, the oldest are dropped and counted.
    pub max_outbox_bytes: usize,
    /// `poll_interval_ms`: on PostgreSQL, how often (milliseconds, default 1000) a replica
    /// reads the outbox for notifications other replicas wrote (it is not woken by their
    /// commits) and the subscriptions for changes other replicas made (docs/replicas.md).
    /// Unused on SQLite.
    pub poll_interval_ms: u64,
    /// `claim_seconds`: on PostgreSQL, how long a replica's claim on a subscription's delivery
    /// lasts without renewal (default 60; at least twice `timeout` and one second): a replica
    /// that dies leaves its subscriptions' notifications to the others this long after its
    /// last renewal (docs/replicas.md). Unused on SQLite.
    pub claim_seconds: u64,
    /// `allow`: the destinations a client-given URL (`callbackUri`, `tokenEndpoint`, Promise
    /// `callbackUri`) may have beside the default ones: CIDRs (`10.0.0.0/8`, `::1/128`),
    /// addresses and host names (default none). Loopback, link-local, cloud metadata,
    /// unspecified, multicast and broadcast addresses are refused unless listed here; the
    /// server's own listen address always (`crate::outgoing`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// `max_connections`: outgoing HTTP connections open at once, every outgoing request of
    /// `vnfm serve` counted (notifications, callback tests, token requests, the NFVO's
    /// grants; default 8). Taken from the open-file limit beside `[server]
    /// max_connections`.
    pub max_connections: usize,
    /// `client_cert`: a PEM file of the client certificate chain presented to the subscribers
    /// whose `authType` is `TLS_CERT` (with `client_key`; both or neither). Without it, such a
    /// subscription is refused (422).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<PathBuf>,
    /// `client_key`: a PEM file of the private key of `client_cert`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_key: Option<PathBuf>,
    /// `server_ca`: a PEM bundle of CA certificates trusted for the subscribers' HTTPS
    /// servers beside the built-in roots (a private PKI).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_ca: Option<PathBuf>,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        Self {
            retry_initial_ms: 1000,
            retry_max_delay_ms: 300_000,
            max_attempts: 20,
            max_age: 86_400,
            timeout: 10,
            max_subscriptions: 1000,
            max_filter_values: 256,
            max_value_length: 2048,
            max_subscription_bytes: 32 * 1024,
            max_outbox_entries: 1000,
            max_outbox_bytes: 4 * 1024 * 1024,
            poll_interval_ms: 1000,
            claim_seconds: 60,
            allow: Vec::new(),
            max_connections: crate::outgoing::DEFAULT_MAX_CONNECTIONS,
            client_cert: None,
            client_key: None,
            server_ca: None,
        }
    }
}

impl NotificationsConfig {
    /// The core's retry policy of these settings.
    ///
    /// # Errors
    /// [`CliError::Usage`] naming a key that is 0.
    pub fn policy(&self) -> Result<vnfm_core::lcm_notify::RetryPolicy, CliError> {
        for (key, v) in [
            ("retry_initial_ms", self.retry_initial_ms),
            ("retry_max_delay_ms", self.retry_max_delay_ms),
            ("max_attempts", u64::from(self.max_attempts)),
            ("max_age", self.max_age),
            ("timeout", self.timeout),
            ("max_subscriptions", self.max_subscriptions),
            ("max_filter_values", self.max_filter_values as u64),
            ("max_value_length", self.max_value_length as u64),
            ("max_subscription_bytes", self.max_subscription_bytes as u64),
            ("max_outbox_entries", self.max_outbox_entries as u64),
            ("max_outbox_bytes", self.max_outbox_bytes as u64),
            ("max_connections", self.max_connections as u64),
            ("poll_interval_ms", self.poll_interval_ms),
            ("claim_seconds", self.claim_seconds),
        ] {
            if v == 0 {
                return Err(CliError::Usage(format!(
                    "[notifications] {key} = 0; expected at least 1"
                )));
            }
        }
        if self.client_cert.is_some() != self.client_key.is_some() {
            return Err(CliError::Usage(
                "[notifications] has one of client_cert and client_key; expected both (the PEM \
                 files of the client certificate and of its private key) or neither"
                    .into(),
            ));
        }
        Ok(vnfm_core::lcm_notify::RetryPolicy {
            initial: std::time::Duration::from_millis(self.retry_initial_ms),
            max_delay: std::time::Duration::from_millis(
                self.retry_max_delay_ms.max(self.retry_initial_ms),
            ),
            max_attempts: self.max_attempts,
            max_age: std::time::Duration::from_secs(self.max_age),
        })
    }

    /// How long a delivery claim lasts (`claim_seconds`, raised to twice `timeout` and one
    /// second when below: a claim outlives one attempt, a token request and the notification
    /// each up to `timeout`, since the holder renews it before each attempt).
    pub fn claim_ttl(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.claim_seconds
                .max(self.timeout.saturating_mul(2).saturating_add(1)),
        )
    }

    /// How often a replica polls the outbox and the subscriptions (`poll_interval_ms`).
    pub fn poll_interval(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.poll_interval_ms.max(1))
    }

    /// The size bounds of one subscription.
    pub fn subscription_limits(&self) -> vnfm_core::lcm_notify::SubscriptionLimits {
        vnfm_core::lcm_notify::SubscriptionLimits {
            max_list_len: self.max_filter_values,
            max_string_len: self.max_value_length,
            max_bytes: self.max_subscription_bytes,
        }
    }
}

/// `[cluster]`: the Kubernetes cluster whose worker nodes are VMs of a cluster VNF.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// `kubeconfig`: the cluster; `None` with the simulated cloud means its own cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// `context`: the kubeconfig context; `None` means its current-context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// `namespace`: the CNF's namespace (default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `host_label`: the label key (default [`vnfm_core::cluster::DEFAULT_HOST_LABEL`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_label: Option<String>,
    /// `allow_zone_label`: `host_label` may be `topology.kubernetes.io/zone` only with this.
    #[serde(default)]
    pub allow_zone_label: bool,
    /// `nodes`: a label selector (`key`, `key=value`, comma-separated) of the nodes that are
    /// the cluster VNF's; `None` means every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    /// `cluster_vnfds`: the vnfdIds of cluster VNFs, whose operations end by labelling.
    #[serde(default)]
    pub cluster_vnfds: Vec<String>,
}

/// A secret (token, password): `Debug` and `Serialize` print `<redacted>`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// What `Debug` and `Serialize` print instead of the value.
    pub const REDACTED: &'static str = "<redacted>";

    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(Self::REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(Self::REDACTED)
    }
}

/// The largest configuration file read, in bytes (1 MiB); a larger one, or one that is not a
/// regular file (`/dev/zero`, a FIFO), is refused before it is read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The default `[server] listen` address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9890";

/// `[server]`: the HTTP server of `vnfm serve`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// `listen` (default `127.0.0.1:9890`).
    pub listen: SocketAddr,
    /// `api_token`: a bearer token the LCM API (`/vnflcm/...`) requires; `None` = open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_token: Option<Secret>,
    /// `body_limit`: the largest request body in bytes (default 1 MiB).
    pub body_limit: usize,
    /// `request_timeout`: seconds a read (GET, HEAD, and the POSTs that change nothing) may
    /// take, 503 beyond; the seconds a write's body may take to arrive, 408 beyond. A write
    /// whose body arrived runs to its end (default 30; at least 1).
    pub request_timeout: u64,
    /// `header_timeout`: seconds a connection has to send the line and headers of a request,
    /// from its opening or from the first byte of the next request on a kept-alive
    /// connection; closed beyond (default 10; 1 to 300).
    pub header_timeout: u64,
    /// `idle_timeout`: seconds a kept-alive connection may wait without a request in progress
    /// and without receiving anything; closed beyond (default 60; 1 to 3600).
    pub idle_timeout: u64,
    /// `max_connections`: the most connections open at once; at the cap, the connection that
    /// has waited longest without a request in progress is closed to make room for a new one,
    /// and when every connection has a request in progress, new ones wait in the listen
    /// backlog. `None`: 1024, or fewer when the open-file limit is lower (it minus
    /// [`RESERVED_FILES`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<usize>,
    /// `alert_fsync`: when an accepted alert reaches the disk (default `periodic`).
    pub alert_fsync: AlertFsync,
    /// `page_size`: the most resources one page of a SOL003 list (`GET /vnf_instances`,
    /// `/vnf_lcm_op_occs`) holds; more follow through `Link: <...>; rel="next"` (SOL013 5.4;
    /// default 100, at least 1).
    pub page_size: usize,
    /// `filter_work_limit`: the units of work the SOL013 filter of one list request may take
    /// (a value visited, a byte compared: [`vnfm_core::query::Budget`]); a filter that needs
    /// more is refused with a 400 (default 20,000,000; at least 1).
    pub filter_work_limit: u64,
    /// `list_scan_limit`: the most instances one `GET /vnf_instances` reads from the store
    /// (or `page_size + 1` when that is more); a filter that matches fewer than a page among
    /// them is answered with a short page and a next marker at the last instance read
    /// (`vnfm_core::query::Scan`; default 10,000, at least 1).
    pub list_scan_limit: usize,
    /// `log_format`: how `vnfm serve` writes its log on stderr (default `text`).
    pub log_format: LogFormat,
    /// `log_level`: which events `vnfm serve` logs, as a `tracing` `EnvFilter` directive
    /// (`info`, `debug`, `warn,vnfm_cli=debug`; default `info`). The environment variable
    /// `VNFM_LOG` replaces it; `--quiet` makes the default `warn`.
    pub log_level: String,
    /// `replica_id`: the name of this replica on every log line and every `/metrics` series
    /// (1 to [`MAX_REPLICA_ID_LEN`] characters of `A-Z a-z 0-9 . _ -`). The environment
    /// variable `VNFM_REPLICA_ID` replaces it. Unset: the hostname, else a random id made at
    /// start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_id: Option<String>,
    /// `[server.oauth2]`: the OAuth 2.0 token endpoint (`POST /token`) and its clients.
    #[serde(skip_serializing_if = "OAuth2Config::is_unset")]
    pub oauth2: OAuth2Config,
    /// `[server.grants]`: the grants of the Grant API (NFVO side) that wait for an operator.
    #[serde(skip_serializing_if = "ServerGrantsConfig::is_unset")]
    pub grants: ServerGrantsConfig,
    /// `[server.tls]`: HTTPS (and mutual TLS) on `listen`.
    #[serde(skip_serializing_if = "TlsConfig::is_unset")]
    pub tls: TlsConfig,
}

/// The bounds of `[server.grants] pending_lifetime`, in seconds (a minute to a week).
pub const PENDING_LIFETIME_RANGE: std::ops::RangeInclusive<u64> = 60..=604_800;

/// The bounds of `[server.grants] max_pending`.
pub const MAX_PENDING_RANGE: std::ops::RangeInclusive<usize> = 1..=10_000;

/// `[server.grants]`: asynchronous grants, as an NFVO has them (docs/grants.md, "Asynchronous
/// grants: operator approval"). A grant request whose `operation` is in `approve`, from an
/// OAuth 2.0 client marked `asynchronous = true`, is answered 202 and waits for an operator
/// (`POST /admin/grants/{grantId}/approve` or `/reject`) at most `pending_lifetime` seconds;
/// at most `max_pending` wait at once. Every other request is decided at once (201 or 403).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerGrantsConfig {
    /// `approve`: the operations (SOL003 `GrantedLcmOperationType`: `INSTANTIATE`, `SCALE`,
    /// `HEAL`, `TERMINATE`, ...) whose grants wait for an operator (default none).
    pub approve: Vec<vnfm_core::grant::GrantedLcmOperationType>,
    /// `pending_lifetime`: the seconds a grant waits for an operator before it is rejected
    /// (default 3600; [`PENDING_LIFETIME_RANGE`]).
    pub pending_lifetime: u64,
    /// `max_pending`: the most grants waiting at once; beyond, a request that would wait is
    /// answered 503 (default 100; [`MAX_PENDING_RANGE`]).
    pub max_pending: usize,
    /// `reservation`: the reservation of the Promise ledger the grants draw from (every
    /// `COMPUTE` resource granted into its zone) when a request names none in
    /// `additionalParams.reservationId` (default none: no draw).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
}

impl Default for ServerGrantsConfig {
    fn default() -> Self {
        Self {
            approve: Vec::new(),
            pending_lifetime: 3600,
            max_pending: 100,
            reservation: None,
        }
    }
}

impl ServerGrantsConfig {
    /// Whether nothing is configured (the section is left out of `config show`).
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }

    fn problem(&self) -> Option<String> {
        if !PENDING_LIFETIME_RANGE.contains(&self.pending_lifetime) {
            return Some(format!(
                "[server.grants] pending_lifetime is {}; expected {} to {} seconds",
                self.pending_lifetime,
                PENDING_LIFETIME_RANGE.start(),
                PENDING_LIFETIME_RANGE.end()
            ));
        }
        if !MAX_PENDING_RANGE.contains(&self.max_pending) {
            return Some(format!(
                "[server.grants] max_pending is {}; expected {} to {}",
                self.max_pending,
                MAX_PENDING_RANGE.start(),
                MAX_PENDING_RANGE.end()
            ));
        }
        if let Some(r) = &self.reservation {
            if r.trim().is_empty() || r.len() > 256 || r.chars().any(char::is_control) {
                return Some(format!(
                    "[server.grants] reservation is {r:?}; expected the id of a reservation of \
                     the Promise ledger (one line, 1 to 256 bytes)"
                ));
            }
        }
        None
    }
}

/// `[server.tls]`: with `cert` and `key`, `vnfm serve` speaks only HTTPS (rustls) on `listen`;
/// with `client_ca` too, every connection must present a client certificate signed by one of
/// its certificates (mutual TLS), else the TLS handshake is refused. The files are read at
/// start and again when they change (docs/serve.md, "HTTPS and mutual TLS").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// `cert`: a PEM file of the server's certificate chain, its own certificate first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    /// `key`: a PEM file of the private key of `cert` (PKCS#8, PKCS#1 or SEC1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    /// `client_ca`: a PEM bundle of the certificates that sign the clients' certificates; set,
    /// a client without such a certificate is refused at the TLS handshake.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<PathBuf>,
}

impl TlsConfig {
    /// Whether nothing is configured (plain HTTP; the section is left out of `config show`).
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }

    /// What is wrong with the section's keys (the files themselves are read by `vnfm serve`).
    fn problem(&self) -> Option<String> {
        match (&self.cert, &self.key) {
            (Some(_), None) => Some(
                "[server.tls] has cert but no key; expected both (the PEM files of the \
                 certificate and of its private key) or neither"
                    .into(),
            ),
            (None, Some(_)) => Some(
                "[server.tls] has key but no cert; expected both (the PEM files of the \
                 certificate and of its private key) or neither"
                    .into(),
            ),
            (None, None) if self.client_ca.is_some() => Some(
                "[server.tls] has client_ca but no cert and key; mutual TLS needs the server's \
                 own certificate and key too"
                    .into(),
            ),
            _ => None,
        }
    }
}

/// The bounds of `[server.oauth2] token_lifetime`, in seconds.
pub const TOKEN_LIFETIME_RANGE: std::ops::RangeInclusive<u64> = 60..=86_400;

/// The default `[server.oauth2] token_lifetime`, in seconds.
pub const DEFAULT_TOKEN_LIFETIME: u64 = 3600;

/// The most `[[server.oauth2.clients]]`.
pub const MAX_OAUTH2_CLIENTS: usize = 100;

/// The fewest bytes of `[server.oauth2] signing_key`.
pub const MIN_SIGNING_KEY_BYTES: usize = 32;

/// `[server.oauth2]`: the OAuth 2.0 client-credentials grant (RFC 6749 section 4.4) of `vnfm
/// serve`, as Tacker's `[v2_nfvo]` asks for an access token before every grant and package
/// request. With at least one client, `POST /token` issues tokens (HTTP Basic client
/// authentication), and the Grant API and the package endpoints accept them beside `[server]
/// api_token`. A token is signed (HMAC-SHA256) and carries its client and its expiry: nothing
/// is kept per token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OAuth2Config {
    /// `clients`: who may ask for a token (`[[server.oauth2.clients]]`, at most
    /// [`MAX_OAUTH2_CLIENTS`]). None: no token endpoint.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<OAuth2Client>,
    /// `token_lifetime`: the seconds a token is valid, on the server's clock (default
    /// [`DEFAULT_TOKEN_LIFETIME`]; [`TOKEN_LIFETIME_RANGE`]).
    pub token_lifetime: u64,
    /// `signing_key`: the key tokens are signed with (at least [`MIN_SIGNING_KEY_BYTES`]
    /// bytes); replicas that accept each other's tokens share it. Unset: a random key made at
    /// start, so tokens end with the process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<Secret>,
}

impl Default for OAuth2Config {
    fn default() -> Self {
        Self {
            clients: Vec::new(),
            token_lifetime: DEFAULT_TOKEN_LIFETIME,
            signing_key: None,
        }
    }
}

impl OAuth2Config {
    /// Whether nothing is configured (the section is left out of `config show`).
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }

    /// What is wrong with the section, naming the key, its value (never a secret's) and what
    /// is expected.
    fn problem(&self) -> Option<String> {
        if !TOKEN_LIFETIME_RANGE.contains(&self.token_lifetime) {
            return Some(format!(
                "[server.oauth2] token_lifetime is {}; expected {} to {} seconds",
                self.token_lifetime,
                TOKEN_LIFETIME_RANGE.start(),
                TOKEN_LIFETIME_RANGE.end()
            ));
        }
        if self.clients.len() > MAX_OAUTH2_CLIENTS {
            return Some(format!(
                "[server.oauth2] has {} clients; expected at most {MAX_OAUTH2_CLIENTS}",
                self.clients.len()
            ));
        }
        if let Some(k) = &self.signing_key {
            if k.expose().len() < MIN_SIGNING_KEY_BYTES {
                return Some(format!(
                    "[server.oauth2] signing_key has {} bytes; expected at least \
                     {MIN_SIGNING_KEY_BYTES} (or no key: one is made at start)",
                    k.expose().len()
                ));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, c) in self.clients.iter().enumerate() {
            if c.id.trim().is_empty() || c.id.contains(':') || c.id.chars().any(char::is_control) {
                return Some(format!(
                    "[server.oauth2] clients[{i}] id {:?}: expected a non-empty id without ':' \
                     or control characters (HTTP Basic sends it before a ':')",
                    c.id
                ));
            }
            if c.secret
                .as_ref()
                .is_some_and(|s| s.expose().trim().is_empty())
            {
                return Some(format!(
                    "[server.oauth2] clients[{i}] (id {:?}) has an empty secret; expected a \
                     non-empty one",
                    c.id
                ));
            }
            match &c.tls_client_auth_subject_dn {
                None if c.secret.is_none() => {
                    return Some(format!(
                        "[server.oauth2] clients[{i}] (id {:?}) has neither secret nor \
                         tls_client_auth_subject_dn; expected one of them (or both): how the \
                         client authenticates at POST /token",
                        c.id
                    ));
                }
                None => {}
                Some(dn) => {
                    if let Err(e) = DistinguishedName::parse(dn) {
                        return Some(format!(
                            "[server.oauth2] clients[{i}] (id {:?}) tls_client_auth_subject_dn \
                             {dn:?}: {e}; expected an RFC 4514 distinguished name such as \
                             \"CN=tacker,O=example\"",
                            c.id
                        ));
                    }
                }
            }
            if !seen.insert(c.id.as_str()) {
                return Some(format!(
                    "[server.oauth2] clients[{i}] id {:?} is given twice; expected one entry \
                     per client",
                    c.id
                ));
            }
        }
        None
    }
}

/// One `[[server.oauth2.clients]]`: a client of the token endpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuth2Client {
    /// `id`: the `client_id` (Tacker's `[v2_nfvo] client_id`).
    pub id: String,
    /// `secret`: the client's password (Tacker's `[v2_nfvo] client_password`), for HTTP Basic
    /// client authentication (`client_secret_basic`). Unset: the client authenticates with its
    /// certificate only (`tls_client_auth_subject_dn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Secret>,
    /// `tls_client_auth_subject_dn`: the subject distinguished name (RFC 4514, e.g.
    /// `"CN=tacker,O=example"`) of the client certificate this client authenticates with at the
    /// token endpoint (RFC 8705 `tls_client_auth`: Tacker's `[v2_nfvo]
    /// use_client_secret_basic = False`). Needs `[server.tls] client_ca`, which verifies the
    /// certificate; the tokens issued this way are bound to that certificate (RFC 8705 section
    /// 3) and accepted only on connections that present it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_client_auth_subject_dn: Option<String>,
    /// `asynchronous`: the client accepts a `202 Accepted` to its grant requests and polls
    /// the grant (SOL003 clause 9.4.2.3.1), so its requests of the operations of
    /// `[server.grants] approve` wait for an operator (default false: Tacker accepts only 201).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asynchronous: bool,
}

/// The file descriptors `vnfm serve` keeps for itself beside its connections (state file, on
/// two connections; journal, runtime, packages, outgoing HTTP): `max_connections` is at most
/// the open-file limit minus this.
pub const RESERVED_FILES: u64 = 32;

/// The default `[server] max_connections` when the open-file limit allows it.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// The bounds of `[server] header_timeout`, in seconds.
pub const HEADER_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 1..=300;

/// The bounds of `[server] idle_timeout`, in seconds.
pub const IDLE_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 1..=3600;

/// The longest `[server] replica_id` (a DNS label's length: a pod's name fits).
pub const MAX_REPLICA_ID_LEN: usize = 63;

/// Whether `id` may name a replica: 1 to [`MAX_REPLICA_ID_LEN`] characters of `A-Z a-z 0-9 .
/// _ -` (safe in a log line, a JSON string and a Prometheus label value as it is).
pub fn is_replica_id(id: &str) -> bool {
    (1..=MAX_REPLICA_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `[server] log_format`: how `vnfm serve` writes its log on stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line per event, `vnfm serve: <message> key=value ... replica=<id>`, for people.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `replica`, `message` and the event's
    /// fields), for a log collector.
    Json,
}

/// `[server] alert_fsync`: when the state file is fsynced for an accepted alert. Either way
/// the alert is written to the state file before its answer (so it survives a crash, a kill
/// or a restart of the server) and the file stays consistent; the choice is what a power loss
/// or an OS crash may take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AlertFsync {
    /// The fsync comes with the next save of the whole alert state, within a second: a power
    /// loss may take the alerts of the last second (Alertmanager sends them again at its
    /// next notification of the group). Several times the throughput of `each`.
    #[default]
    Periodic,
    /// An fsync before every answer that accepted an alert (shared by the requests that wait
    /// together): nothing answered is lost to a power loss.
    Each,
}

impl ServerConfig {
    /// Checks the values `vnfm serve` cannot work with safely: `body_limit = 0` would answer
    /// every body 413, an empty `api_token` every request 401, `request_timeout = 0` every
    /// read 503 at once, a `header_timeout` or `idle_timeout` out of its range lets a client
    /// hold a connection for a long time (or closes every connection at once),
    /// `max_connections = 0` would serve nothing.
    ///
    /// # Errors
    /// [`CliError::Usage`] (exit 2) naming the key, its value and what is expected.
    pub fn validate(&self) -> Result<(), CliError> {
        match self.problem() {
            Some(p) => Err(CliError::Usage(p)),
            None => Ok(()),
        }
    }

    /// What [`ServerConfig::validate`] refuses, as a message naming the key, its value and
    /// what is expected.
    fn problem(&self) -> Option<String> {
        if self.body_limit == 0 {
            return Some(
                "[server] body_limit is 0; expected at least 1 byte (every request with a body \
                 would be answered 413)"
                    .into(),
            );
        }
        if self
            .api_token
            .as_ref()
            .is_some_and(|t| t.expose().trim().is_empty())
        {
            return Some(
                "the LCM API token (--api-token / VNFM_API_TOKEN / [server] api_token) is empty; \
                 expected a non-empty token, or none to leave the API open"
                    .into(),
            );
        }
        if self.request_timeout == 0 {
            return Some(
                "[server] request_timeout is 0; expected at least 1 second (every read would be \
                 answered 503 at once, and every write with a body 408)"
                    .into(),
            );
        }
        for (key, value, range) in [
            ("header_timeout", self.header_timeout, HEADER_TIMEOUT_RANGE),
            ("idle_timeout", self.idle_timeout, IDLE_TIMEOUT_RANGE),
        ] {
            if !range.contains(&value) {
                return Some(format!(
                    "[server] {key} is {value}; expected {} to {} seconds",
                    range.start(),
                    range.end()
                ));
            }
        }
        if self.filter_work_limit == 0 {
            return Some(
                "[server] filter_work_limit is 0; expected at least 1 (every filter would be \
                 refused)"
                    .into(),
            );
        }
        if self.list_scan_limit == 0 {
            return Some(
                "[server] list_scan_limit is 0; expected at least 1 instance read per list \
                 request"
                    .into(),
            );
        }
        if self.page_size == 0 {
            return Some(
                "[server] page_size is 0; expected at least 1 resource per page of a list".into(),
            );
        }
        if self.max_connections == Some(0) {
            return Some(
                "[server] max_connections is 0; expected at least 1 (no connection would be \
                 served), or no key for the default"
                    .into(),
            );
        }
        if let Some(id) = &self.replica_id {
            if !is_replica_id(id) {
                return Some(format!(
                    "[server] replica_id {id:?}: expected 1 to {MAX_REPLICA_ID_LEN} characters \
                     of A-Z a-z 0-9 . _ -"
                ));
            }
        }
        // A lone word is a target for EnvFilter ("warning" would log nothing): here it must
        // be a level.
        let lone_word = !self.log_level.contains([',', '=', '[']);
        let level = ["off", "error", "warn", "info", "debug", "trace"]
            .iter()
            .any(|l| l.eq_ignore_ascii_case(self.log_level.trim()));
        let parsed = tracing_subscriber::EnvFilter::builder()
            .parse(&self.log_level)
            .map_err(|e| e.to_string())
            .and_then(|_| {
                if lone_word && !level {
                    Err("not a level".to_owned())
                } else {
                    Ok(())
                }
            });
        if let Err(e) = parsed {
            return Some(format!(
                "[server] log_level {:?}: {e}; expected a level (error, warn, info, debug, \
                 trace) or tracing EnvFilter directives such as \"warn,vnfm_cli=debug\"",
                self.log_level
            ));
        }
        self.oauth2
            .problem()
            .or_else(|| self.grants.problem())
            .or_else(|| self.tls.problem())
            .or_else(|| self.certificate_clients_problem())
    }

    /// A client that authenticates with its certificate on a server that verifies none.
    fn certificate_clients_problem(&self) -> Option<String> {
        if self.tls.client_ca.is_some() {
            return None;
        }
        let (i, c) = self
            .oauth2
            .clients
            .iter()
            .enumerate()
            .find(|(_, c)| c.tls_client_auth_subject_dn.is_some())?;
        Some(format!(
            "[server.oauth2] clients[{i}] (id {:?}) has tls_client_auth_subject_dn, but [server.tls] \
             has no client_ca; expected [server.tls] cert, key and client_ca (the server must \
             verify the client certificates it authenticates)",
            c.id
        ))
    }

    /// The effective `max_connections` under an open-file limit of `open_files` (`None`:
    /// unknown): the configured value, else [`DEFAULT_MAX_CONNECTIONS`] or the limit minus
    /// [`RESERVED_FILES`] when that is lower.
    ///
    /// # Errors
    /// [`CliError::Usage`] (exit 2) when the configured value does not fit in the limit, or
    /// the limit leaves no room for connections.
    pub fn connection_cap(&self, open_files: Option<u64>) -> Result<usize, CliError> {
        self.connection_cap_beside(open_files, 0)
    }

    /// [`ServerConfig::connection_cap`] with `outgoing` more descriptors kept for outgoing
    /// connections (`[notifications] max_connections`): the room left for the server's own
    /// connections is the open-file limit minus [`RESERVED_FILES`] minus `outgoing`.
    ///
    /// # Errors
    /// As [`ServerConfig::connection_cap`].
    pub fn connection_cap_beside(
        &self,
        open_files: Option<u64>,
        outgoing: usize,
    ) -> Result<usize, CliError> {
        let reserved = RESERVED_FILES + outgoing as u64;
        let room = open_files.map(|n| n.saturating_sub(reserved));
        match (self.max_connections, room) {
            (_, Some(0)) => Err(CliError::Usage(format!(
                "the open-file limit (ulimit -n) is {}; vnfm serve needs more than {reserved} \
                 (it keeps {RESERVED_FILES} for itself and [notifications] max_connections = \
                 {outgoing} for outgoing requests, beside [server] max_connections)",
                open_files.unwrap_or(0)
            ))),
            (Some(n), Some(room)) if n as u64 > room => Err(CliError::Usage(format!(
                "[server] max_connections is {n}; expected at most {room}: the open-file limit \
                 (ulimit -n) is {} and vnfm serve keeps {reserved} of them for itself and its \
                 outgoing requests (raise the limit, or lower max_connections)",
                open_files.unwrap_or(0)
            ))),
            (Some(n), _) => Ok(n),
            (None, Some(room)) => {
                Ok(DEFAULT_MAX_CONNECTIONS.min(usize::try_from(room).unwrap_or(usize::MAX)))
            }
            (None, None) => Ok(DEFAULT_MAX_CONNECTIONS),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9890)),
            api_token: None,
            body_limit: 1024 * 1024,
            request_timeout: 30,
            header_timeout: 10,
            idle_timeout: 60,
            max_connections: None,
            alert_fsync: AlertFsync::Periodic,
            page_size: 100,
            filter_work_limit: DEFAULT_FILTER_WORK_LIMIT,
            list_scan_limit: 10_000,
            log_format: LogFormat::Text,
            log_level: "info".into(),
            replica_id: None,
            oauth2: OAuth2Config::default(),
            grants: ServerGrantsConfig::default(),
            tls: TlsConfig::default(),
        }
    }
}

/// The default `[server] filter_work_limit`: about 0.1 s of one core in a release build.
pub const DEFAULT_FILTER_WORK_LIMIT: u64 = 20_000_000;

/// `[prometheus_plugin]`: the keys of [`PrometheusPluginConfig`] plus the credentials the
/// alert endpoints require.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrometheusConfig {
    /// `auto_healing`, `auto_scaling`, `timer_interval`, `scale_cooldown`, `receiver_types`,
    /// `dedupe_ttl`, `dedupe_capacity`.
    pub plugin: PrometheusPluginConfig,
    /// `bearer_token`: accepted as `Authorization: Bearer <token>`.
    pub bearer_token: Option<Secret>,
    /// `basic_auth_user`: with `basic_auth_password`, accepted as `Authorization: Basic`.
    pub basic_auth_user: Option<String>,
    /// `basic_auth_password`.
    pub basic_auth_password: Option<Secret>,
}

impl PrometheusConfig {
    /// Whether the alert endpoints require credentials.
    pub fn requires_auth(&self) -> bool {
        self.bearer_token.is_some() || self.basic_auth_user.is_some()
    }

    /// Refuses an empty credential, wherever it came from (the file is checked when read; the
    /// flags and variables are merged after it): no client could send it.
    ///
    /// # Errors
    /// [`CliError::Usage`] (exit 2) naming the flag, variable and key.
    pub fn validate_credentials(&self) -> Result<(), CliError> {
        for (name, value) in [
            (
                "--alert-bearer-token / VNFM_ALERT_BEARER_TOKEN / [prometheus_plugin] bearer_token",
                self.bearer_token.as_ref().map(Secret::expose),
            ),
            (
                "--alert-basic-user / VNFM_ALERT_BASIC_USER / [prometheus_plugin] basic_auth_user",
                self.basic_auth_user.as_deref(),
            ),
            (
                "--alert-basic-password / VNFM_ALERT_BASIC_PASSWORD / [prometheus_plugin] \
                 basic_auth_password",
                self.basic_auth_password.as_ref().map(Secret::expose),
            ),
        ] {
            if value.is_some_and(|v| v.trim().is_empty()) {
                return Err(CliError::Usage(format!(
                    "{name} is empty; expected a non-empty value, or none"
                )));
            }
        }
        Ok(())
    }
}

#[derive(Serialize)]
struct PrometheusConfigOut<'a> {
    #[serde(flatten)]
    plugin: &'a PrometheusPluginConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    bearer_token: Option<&'a Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    basic_auth_user: Option<&'a String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    basic_auth_password: Option<&'a Secret>,
}

impl Serialize for PrometheusConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PrometheusConfigOut {
            plugin: &self.plugin,
            bearer_token: self.bearer_token.as_ref(),
            basic_auth_user: self.basic_auth_user.as_ref(),
            basic_auth_password: self.basic_auth_password.as_ref(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for PrometheusConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut table = toml::Table::deserialize(d)?;
        let mut take = |key: &str| -> Result<Option<String>, D::Error> {
            match table.remove(key) {
                None => Ok(None),
                Some(toml::Value::String(s)) => Ok(Some(s)),
                Some(other) => Err(D::Error::custom(format!(
                    "[prometheus_plugin] {key} is a {}; expected a string",
                    other.type_str()
                ))),
            }
        };
        let bearer_token = take("bearer_token")?.map(Secret);
        let basic_auth_user = take("basic_auth_user")?;
        let basic_auth_password = take("basic_auth_password")?.map(Secret);
        if basic_auth_user.is_some() != basic_auth_password.is_some() {
            return Err(D::Error::custom(
                "[prometheus_plugin] basic_auth_user and basic_auth_password go together; \
                 expected both or neither",
            ));
        }
        let plugin = PrometheusPluginConfig::deserialize(toml::Value::Table(table))
            .map_err(|e| D::Error::custom(format!("[prometheus_plugin] {e}")))?;
        Ok(Self {
            plugin,
            bearer_token,
            basic_auth_user,
            basic_auth_password,
        })
    }
}

/// Values given on the command line or in the environment, which override the file.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--vim`
    pub vim: Option<VimKind>,
    /// `--cloud`
    pub cloud: Option<PathBuf>,
    /// `--sim-seed`
    pub sim_seed: Option<u64>,
    /// `--packages-dir`
    pub packages_dir: Option<PathBuf>,
    /// `--state`
    pub state: Option<PathBuf>,
    /// `VNFM_STATE_URL`
    pub state_url: Option<Secret>,
    /// `--id-salt`
    pub id_salt: Option<u64>,
}

impl Config {
    /// Parses a configuration file's text (a leading byte order mark skipped); `file` names it
    /// in errors.
    ///
    /// # Errors
    /// [`CliError::Config`] naming the file, line and key for malformed TOML, unknown keys and
    /// wrong types, with an excerpt of the line of at most
    /// [`vnfm_core::input::EXCERPT_WIDTH`] characters, and naming the key, its value and what
    /// is expected for a `[server]` limit [`ServerConfig::validate`] refuses.
    pub fn from_toml(file: &Path, text: &str) -> Result<Config, CliError> {
        let text = vnfm_core::input::strip_bom(text);
        let config: Config = toml::from_str(text).map_err(|e| CliError::Config {
            file: file.to_path_buf(),
            message: toml_message(text, &e),
            source: None,
        })?;
        config.check_values().map_err(|message| CliError::Config {
            file: file.to_path_buf(),
            message,
            source: None,
        })?;
        // `[server]`'s limits are keys of the file only: refused where they are written.
        if let Some(message) = config.server.problem() {
            return Err(CliError::Config {
                file: file.to_path_buf(),
                message,
                source: None,
            });
        }
        Ok(config)
    }

    /// The values a file may not give although they have the right type: `[server]
    /// body_limit = 0` (every body would be 413), an empty token, user or password (no client
    /// could send it: the API would be unusable), a `[packages] dir` that is not a folder.
    fn check_values(&self) -> Result<(), String> {
        if self.server.body_limit == 0 {
            return Err(
                "[server] body_limit = 0: expected at least 1 byte (every request with \
                        a body would be answered 413); the default is 1048576"
                    .into(),
            );
        }
        let p = &self.prometheus_plugin;
        for (key, value) in [
            (
                "[server] api_token",
                self.server.api_token.as_ref().map(Secret::expose),
            ),
            (
                "[prometheus_plugin] bearer_token",
                p.bearer_token.as_ref().map(Secret::expose),
            ),
            (
                "[prometheus_plugin] basic_auth_user",
                p.basic_auth_user.as_deref(),
            ),
            (
                "[prometheus_plugin] basic_auth_password",
                p.basic_auth_password.as_ref().map(Secret::expose),
            ),
        ] {
            if value.is_some_and(|v| v.trim().is_empty()) {
                return Err(format!(
                    "{key} is empty: expected a non-empty value, or no key at all (no client \
                     can send an empty credential)"
                ));
            }
        }
        if let Some(dir) = &self.packages.dir {
            check_packages_dir(dir).map_err(|why| {
                format!("[packages] dir = {:?}: {why}", dir.display().to_string())
            })?;
        }
        Ok(())
    }

    /// Loads the configuration: `explicit` (from `--config` / `VNFM_CONFIG`) must exist;
    /// otherwise `./vnfm.toml` is read when present; otherwise the defaults.
    ///
    /// # Errors
    /// An unreadable or invalid file, one that is not a regular file (`/dev/zero`, a FIFO) or
    /// is larger than [`MAX_CONFIG_BYTES`].
    pub fn load(explicit: Option<&Path>) -> Result<(Config, Option<PathBuf>), CliError> {
        let path = match explicit {
            Some(p) => Some(p.to_path_buf()),
            None => {
                let p = PathBuf::from("vnfm.toml");
                p.is_file().then_some(p)
            }
        };
        let Some(path) = path else {
            return Ok((Config::default(), None));
        };
        let text = vnfm_core::input::read_text(&path, MAX_CONFIG_BYTES, "a configuration file")
            .map_err(|e| match e {
                vnfm_core::Error::Io { source, .. } => CliError::Config {
                    file: path.clone(),
                    message: "cannot read the configuration file".into(),
                    source: Some(source),
                },
                vnfm_core::Error::Invalid { message, .. } => CliError::Config {
                    file: path.clone(),
                    message,
                    source: None,
                },
                other => CliError::Config {
                    file: path.clone(),
                    message: other.to_string(),
                    source: None,
                },
            })?;
        Ok((Config::from_toml(&path, &text)?, Some(path)))
    }

    /// Applies command-line / environment overrides.
    pub fn with_overrides(mut self, o: &Overrides) -> Config {
        if let Some(v) = o.vim {
            self.vim.kind = v;
        }
        if let Some(c) = &o.cloud {
            self.vim.cloud = Some(c.clone());
        }
        if let Some(s) = o.sim_seed {
            self.vim.seed = s;
        }
        if let Some(d) = &o.packages_dir {
            self.packages.dir = Some(d.clone());
        }
        if let Some(s) = &o.state {
            self.state.path = Some(s.clone());
        }
        if let Some(u) = &o.state_url {
            self.state.url = Some(u.clone());
        }
        if let Some(s) = o.id_salt {
            self.state.id_salt = Some(s);
        }
        self
    }

    /// The state file: the configured path, else `$XDG_STATE_HOME/vnfm/state.sqlite`, else
    /// `$HOME/.local/state/vnfm/state.sqlite`, else `./vnfm-state.sqlite`.
    pub fn state_path(&self) -> PathBuf {
        if let Some(p) = &self.state.path {
            return p.clone();
        }
        default_state_path(
            std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
            std::env::var_os("HOME").map(PathBuf::from),
        )
    }
}

/// Why `dir` cannot be the folder of VNF packages (`[packages] dir`, `--packages-dir`).
///
/// # Errors
/// The reason, with what is expected.
pub(crate) fn check_packages_dir(dir: &Path) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err("not a folder; expected a folder of VNF packages".into()),
        Err(e) => Err(format!(
            "cannot be read ({e}); expected an existing folder of VNF packages (relative paths \
             are resolved against the current directory)"
        )),
    }
}

/// The message of a TOML error as the toml crate writes it (`TOML parse error at line L,
/// column C`, the line with a caret under the error, the message), but with the line cut to
/// [`vnfm_core::input::EXCERPT_WIDTH`] characters around the column and the message to a few
/// times that: a 200 KB line is not echoed.
fn toml_message(text: &str, e: &toml::de::Error) -> String {
    use vnfm_core::input::{excerpt, shorten, EXCERPT_WIDTH};
    let message = shorten(e.message().trim_end(), 4 * EXCERPT_WIDTH);
    let Some(span) = e.span() else {
        return message.into_owned();
    };
    let start = span.start.min(text.len());
    let Some(before) = text.get(..start) else {
        return message.into_owned();
    };
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line_no = before.matches('\n').count() + 1;
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = text[line_start..line_end].trim_end_matches('\r');
    let column = text[line_start..start].chars().count();
    let (shown, at) = excerpt(line, column);
    let width = text
        .get(start..span.end.min(line_end))
        .map_or(1, |s| s.chars().count())
        .clamp(1, shown.chars().count().saturating_sub(at).max(1));
    let gutter = " ".repeat(line_no.to_string().len());
    format!(
        "TOML parse error at line {line_no}, column {}\n{gutter} |\n{line_no} | {shown}\n{gutter} | \
         {}{}\n{message}",
        column + 1,
        " ".repeat(at),
        "^".repeat(width)
    )
}

fn default_state_path(xdg: Option<PathBuf>, home: Option<PathBuf>) -> PathBuf {
    match (xdg.filter(|p| p.is_absolute()), home) {
        (Some(x), _) => x.join("vnfm").join("state.sqlite"),
        (None, Some(h)) => h
            .join(".local")
            .join("state")
            .join("vnfm")
            .join("state.sqlite"),
        (None, None) => PathBuf::from("vnfm-state.sqlite"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(toml: &str) -> Result<Option<NfvoSettings>, String> {
        let c = Config::from_toml(Path::new("g.toml"), &format!("[grant]\n{toml}"))
            .map_err(|e| e.to_string())?;
        c.grant.nfvo().map_err(|e| e.to_string())
    }

    #[test]
    fn grant_is_local_by_default_and_an_nfvo_is_checked_naming_the_key() {
        assert_eq!(grant("").unwrap(), None);
        let s = grant("nfvo = \"http://127.0.0.1:9/grant/v1\"\nbearer_token = \"t\"\n")
            .unwrap()
            .unwrap();
        assert_eq!(s.url.as_str(), "http://127.0.0.1:9/grant/v1");
        assert_eq!(s.auth, NfvoAuth::Bearer(Secret::new("t")));
        assert_eq!(s.poll_interval, std::time::Duration::from_secs(2));
        assert_eq!(s.timeout, std::time::Duration::from_secs(300));
        for (toml, words) in [
            ("nfvo = \"ftp://x/g\"", "[grant] nfvo = \"ftp://x/g\": scheme \"ftp\""),
            ("nfvo = \"not a url\"", "[grant] nfvo = \"not a url\""),
            ("nfvo = \"http://n/g\"\npoll_interval = 0", "[grant] poll_interval = 0"),
            ("nfvo = \"http://n/g\"\ntimeout = 1\npoll_interval = 5", "timeout = 1 is shorter"),
            ("bearer_token = \"t\"", "credentials are set but nfvo is not"),
            ("nfvo = \"http://n/g\"\nbasic_auth_user = \"u\"", "one is missing"),
            (
                "nfvo = \"http://n/g\"\nbasic_auth_user = \"u\"\nbasic_auth_password = \"p\"\nbearer_token = \"t\"",
                "both bearer_token and basic_auth_user",
            ),
            ("nfvo = \"http://n/g\"\nbearer_token = \"\"", "bearer_token is empty"),
            ("nfvo = \"http://n/g\"\nretries = 3", "retries"),
        ] {
            let e = grant(toml).unwrap_err();
            assert!(e.contains(words), "{toml}: {e}");
        }
    }

    #[test]
    fn notifications_have_documented_defaults_and_refuse_zero_naming_the_key() {
        let c =
            Config::from_toml(Path::new("n.toml"), "[notifications]\nmax_attempts = 3\n").unwrap();
        let p = c.notifications.policy().unwrap();
        assert_eq!(p.max_attempts, 3);
        assert_eq!(p.initial, std::time::Duration::from_millis(1000));
        assert_eq!(p.max_delay, std::time::Duration::from_secs(300));
        assert_eq!(p.max_age, std::time::Duration::from_secs(86_400));
        let c = Config::from_toml(Path::new("n.toml"), "[notifications]\ntimeout = 0\n").unwrap();
        let e = c.notifications.policy().unwrap_err().to_string();
        assert!(e.contains("[notifications] timeout"), "{e}");
        let e = Config::from_toml(Path::new("n.toml"), "[notifications]\nretries = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("retries"), "{e}");
    }

    #[test]
    fn defaults_and_overrides() {
        let c = Config::from_toml(Path::new("v.toml"), "").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.vim.kind, VimKind::Sim);
        let c = Config::from_toml(
            Path::new("v.toml"),
            "[vim]\nkind = \"sim\"\ncloud = \"c.yaml\"\nseed = 3\n[state]\npath = \"s.db\"\n",
        )
        .unwrap();
        assert_eq!(c.vim.cloud.as_deref(), Some(Path::new("c.yaml")));
        assert_eq!(c.vim.seed, 3);
        let c = c.with_overrides(&Overrides {
            state: Some("other.db".into()),
            sim_seed: Some(9),
            ..Overrides::default()
        });
        assert_eq!(c.state_path(), PathBuf::from("other.db"));
        assert_eq!(c.vim.seed, 9);
        assert_eq!(c.vim.cloud.as_deref(), Some(Path::new("c.yaml")));
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e = Config::from_toml(Path::new("v.toml"), "[vim]\nkindd = \"sim\"\n").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("v.toml"), "{s}");
        assert!(s.contains("line 2"), "{s}");
        assert!(s.contains("kindd"), "{s}");
    }

    #[test]
    fn openstack_vim_with_a_named_cloud() {
        let c = Config::from_toml(
            Path::new("v.toml"),
            "[vim]\nkind = \"openstack\"\nos_cloud = \"lab\"\n",
        )
        .unwrap();
        assert_eq!(c.vim.kind, VimKind::Openstack);
        assert_eq!(c.vim.os_cloud.as_deref(), Some("lab"));
        let c = Config::from_toml(Path::new("v.toml"), "").unwrap();
        let c = c.with_overrides(&Overrides {
            vim: Some(VimKind::Openstack),
            ..Overrides::default()
        });
        assert_eq!(c.vim.kind, VimKind::Openstack);
        assert_eq!(c.vim.os_cloud, None);
    }

    #[test]
    fn bad_vim_kind_lists_the_accepted_values() {
        let e = Config::from_toml(Path::new("v.toml"), "[vim]\nkind = \"aws\"\n").unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("aws") && s.contains("sim") && s.contains("openstack"),
            "{s}"
        );
    }

    #[test]
    fn server_and_prometheus_sections_parse_and_redact_secrets() {
        let c = Config::from_toml(
            Path::new("v.toml"),
            "[server]\nlisten = \"127.0.0.1:1234\"\napi_token = \"api-s3cret\"\n\
             [prometheus_plugin]\nauto_healing = true\ntimer_interval = 5\n\
             bearer_token = \"tok-s3cret\"\nbasic_auth_user = \"u\"\n\
             basic_auth_password = \"pw-s3cret\"\n",
        )
        .unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:1234".parse().unwrap());
        assert_eq!(c.server.api_token.as_ref().unwrap().expose(), "api-s3cret");
        assert!(c.prometheus_plugin.plugin.auto_healing);
        assert!(!c.prometheus_plugin.plugin.auto_scaling);
        assert_eq!(c.prometheus_plugin.plugin.timer_interval, 5);
        assert_eq!(
            c.prometheus_plugin
                .basic_auth_password
                .as_ref()
                .unwrap()
                .expose(),
            "pw-s3cret"
        );
        let shown = format!("{c:?}\n{}", toml::to_string(&c).unwrap());
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("<redacted>") && shown.contains("timer_interval = 5"),
            "{shown}"
        );
        for (text, want) in [
            (
                "[prometheus_plugin]\ntimer_intervall = 3\n",
                "timer_intervall",
            ),
            (
                "[prometheus_plugin]\nbearer_token = 3\n",
                "bearer_token is a integer",
            ),
            (
                "[prometheus_plugin]\nbasic_auth_user = \"u\"\n",
                "go together",
            ),
            ("[server]\nlisten = \"nowhere\"\n", "nowhere"),
            (
                "[server]\nalert_fsync = \"never\"\n",
                "unknown variant `never`, expected `periodic` or `each`",
            ),
        ] {
            let e = Config::from_toml(Path::new("v.toml"), text)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want) && e.contains("v.toml"), "{e}");
        }
    }

    #[test]
    fn log_keys_from_the_file_and_their_checks() {
        let c = Config::default();
        assert_eq!(c.server.log_format, LogFormat::Text);
        assert_eq!(c.server.log_level, "info");
        assert_eq!(c.server.replica_id, None);
        let c = Config::from_toml(
            Path::new("v.toml"),
            "[server]\nlog_format = \"json\"\nlog_level = \"warn,vnfm_cli=debug\"\n\
             replica_id = \"vnfm-0.a_b\"\n",
        )
        .unwrap();
        assert_eq!(c.server.log_format, LogFormat::Json);
        assert_eq!(c.server.log_level, "warn,vnfm_cli=debug");
        assert_eq!(c.server.replica_id.as_deref(), Some("vnfm-0.a_b"));
        let long = "r".repeat(MAX_REPLICA_ID_LEN + 1);
        for (text, want) in [
            ("log_format = \"xml\"", "log_format"),
            (
                "log_level = \"warning\"",
                "[server] log_level \"warning\": not a level",
            ),
            (
                "log_level = \"vnfm_cli=loud\"",
                "[server] log_level \"vnfm_cli=loud\"",
            ),
            ("replica_id = \"a b\"", "[server] replica_id \"a b\""),
            ("replica_id = \"\"", "[server] replica_id \"\""),
            ("replica_id = \"a\\\"b\"", "[server] replica_id"),
            (
                &format!("replica_id = \"{long}\""),
                "expected 1 to 63 characters",
            ),
        ] {
            let e = Config::from_toml(Path::new("v.toml"), &format!("[server]\n{text}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn alert_fsync_from_the_file() {
        let c = Config::default();
        assert_eq!(c.server.alert_fsync, AlertFsync::Periodic);
        let c =
            Config::from_toml(Path::new("v.toml"), "[server]\nalert_fsync = \"each\"\n").unwrap();
        assert_eq!(c.server.alert_fsync, AlertFsync::Each);
    }

    #[test]
    fn server_grants_are_read_and_their_bounds_refused_naming_the_key() {
        let text = "[server.grants]\napprove = [\"INSTANTIATE\", \"SCALE\"]\n\
                    pending_lifetime = 600\nmax_pending = 5\nreservation = \"rollout\"\n\
                    [[server.oauth2.clients]]\nid = \"n\"\nsecret = \"s\"\nasynchronous = true\n";
        let c = Config::from_toml(Path::new("v.toml"), text).unwrap();
        let g = &c.server.grants;
        assert_eq!(g.approve.len(), 2);
        assert_eq!((g.pending_lifetime, g.max_pending), (600, 5));
        assert_eq!(g.reservation.as_deref(), Some("rollout"));
        assert!(c.server.oauth2.clients[0].asynchronous);
        let shown = toml::to_string(&c).unwrap();
        assert!(shown.contains("asynchronous = true"), "{shown}");
        let shown = toml::to_string(&Config::default()).unwrap();
        assert!(
            !shown.contains("grants") && !shown.contains("asynchronous"),
            "{shown}"
        );
        for (bad, says) in [
            (
                "[server.grants]\npending_lifetime = 0\n",
                "[server.grants] pending_lifetime is 0; expected 60 to 604800 seconds",
            ),
            (
                "[server.grants]\nmax_pending = 0\n",
                "[server.grants] max_pending is 0; expected 1 to 10000",
            ),
            (
                "[server.grants]\nmax_pending = 20000\n",
                "max_pending is 20000",
            ),
            (
                "[server.grants]\nreservation = \" \"\n",
                "[server.grants] reservation is \" \"",
            ),
            (
                "[server.grants]\napprove = [\"INSTANTIATE\", \"MODIFY_INFO\"]\n",
                "MODIFY_INFO",
            ),
        ] {
            let e = Config::from_toml(Path::new("v.toml"), bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn oauth2_clients_are_read_checked_and_redacted() {
        let text = "[server.oauth2]\ntoken_lifetime = 600\n\
                    [[server.oauth2.clients]]\nid = \"tacker\"\nsecret = \"s3cret\"\n";
        let c = Config::from_toml(Path::new("v.toml"), text).unwrap();
        assert_eq!(c.server.oauth2.token_lifetime, 600);
        assert_eq!(c.server.oauth2.clients[0].id, "tacker");
        assert_eq!(
            c.server.oauth2.clients[0]
                .secret
                .as_ref()
                .map(Secret::expose),
            Some("s3cret")
        );
        let shown = toml::to_string(&c).unwrap();
        assert!(
            !shown.contains("s3cret") && shown.contains("tacker"),
            "{shown}"
        );
        assert!(!toml::to_string(&Config::default())
            .unwrap()
            .contains("oauth2"));
        for (bad, says) in [
            (
                "[server.oauth2]\ntoken_lifetime = 5\n",
                "token_lifetime is 5",
            ),
            (
                "[server.oauth2]\nsigning_key = \"short\"\n",
                "signing_key has 5 bytes",
            ),
            (
                "[[server.oauth2.clients]]\nid = \"a:b\"\nsecret = \"x\"\n",
                "clients[0] id \"a:b\"",
            ),
            (
                "[[server.oauth2.clients]]\nid = \"a\"\nsecret = \" \"\n",
                "empty secret",
            ),
            (
                "[[server.oauth2.clients]]\nid = \"a\"\nsecret = \"x\"\n\
                 [[server.oauth2.clients]]\nid = \"a\"\nsecret = \"y\"\n",
                "given twice",
            ),
            (
                "[[server.oauth2.clients]]\nid = \"a\"\n",
                "has neither secret nor tls_client_auth_subject_dn",
            ),
            (
                "[[server.oauth2.clients]]\nid = \"a\"\ntls_client_auth_subject_dn = \"tacker\"\n",
                "tls_client_auth_subject_dn \"tacker\": \"tacker\" has no '='",
            ),
            (
                "[[server.oauth2.clients]]\nid = \"a\"\ntls_client_auth_subject_dn = \"CN=t\"\n",
                "has tls_client_auth_subject_dn, but [server.tls] has no client_ca",
            ),
        ] {
            let e = Config::from_toml(Path::new("v.toml"), bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains("short"), "the key is never echoed: {e}");
        }
    }

    #[test]
    fn a_request_timeout_of_zero_is_refused() {
        assert!(ServerConfig::default().validate().is_ok());
        let c = ServerConfig {
            request_timeout: 0,
            ..ServerConfig::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("[server] request_timeout is 0"), "{e}");
    }

    #[test]
    fn server_limits_are_refused_where_the_file_sets_them() {
        for (text, want) in [
            (
                "[server]\nrequest_timeout = 0\n",
                "configuration v.toml: [server] request_timeout is 0; expected at least 1 second",
            ),
            (
                "[server]\nheader_timeout = 0\n",
                "configuration v.toml: [server] header_timeout is 0; expected 1 to 300 seconds",
            ),
            (
                "[server]\nheader_timeout = 3600\n",
                "[server] header_timeout is 3600; expected 1 to 300 seconds",
            ),
            (
                "[server]\nidle_timeout = 0\n",
                "[server] idle_timeout is 0; expected 1 to 3600 seconds",
            ),
            (
                "[server]\nmax_connections = 0\n",
                "[server] max_connections is 0; expected at least 1",
            ),
        ] {
            let e = Config::from_toml(Path::new("v.toml"), text)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let c = Config::from_toml(
            Path::new("v.toml"),
            "[server]\nheader_timeout = 2\nidle_timeout = 5\nmax_connections = 40\n\
             [packages]\nrescan_interval = 0\n",
        )
        .unwrap();
        assert_eq!(
            (
                c.server.header_timeout,
                c.server.idle_timeout,
                c.server.max_connections
            ),
            (2, 5, Some(40))
        );
        assert_eq!(c.packages.rescan_interval, 0);
        assert_eq!(Config::default().packages.rescan_interval, 10);
    }

    #[test]
    fn server_tls_needs_both_cert_and_key() {
        for (text, want) in [
            (
                "[server.tls]\ncert = \"s.crt\"\n",
                "configuration v.toml: [server.tls] has cert but no key; expected both",
            ),
            (
                "[server.tls]\nkey = \"s.key\"\n",
                "[server.tls] has key but no cert; expected both",
            ),
            (
                "[server.tls]\nclient_ca = \"ca.pem\"\n",
                "[server.tls] has client_ca but no cert and key",
            ),
            ("[server.tls]\ncrt = \"s.crt\"\n", "unknown field `crt`"),
        ] {
            let e = Config::from_toml(Path::new("v.toml"), text)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let c = Config::from_toml(
            Path::new("v.toml"),
            "[server.tls]\ncert = \"s.crt\"\nkey = \"s.key\"\nclient_ca = \"ca.pem\"\n",
        )
        .unwrap();
        assert_eq!(c.server.tls.cert, Some(PathBuf::from("s.crt")));
        assert_eq!(c.server.tls.key, Some(PathBuf::from("s.key")));
        assert_eq!(c.server.tls.client_ca, Some(PathBuf::from("ca.pem")));
        assert!(Config::default().server.tls.is_unset());
    }

    #[test]
    fn the_connection_cap_fits_in_the_open_file_limit() {
        let auto = ServerConfig::default();
        assert_eq!(auto.connection_cap(None).unwrap(), DEFAULT_MAX_CONNECTIONS);
        assert_eq!(auto.connection_cap(Some(20_000)).unwrap(), 1024);
        assert_eq!(auto.connection_cap(Some(96)).unwrap(), 64);
        // [notifications] max_connections comes out of the same limit.
        assert_eq!(auto.connection_cap_beside(Some(96), 8).unwrap(), 56);
        let e = auto
            .connection_cap_beside(Some(40), 8)
            .unwrap_err()
            .to_string();
        assert!(e.contains("[notifications] max_connections = 8"), "{e}");
        let e = auto.connection_cap(Some(32)).unwrap_err().to_string();
        assert!(e.contains("the open-file limit (ulimit -n) is 32"), "{e}");
        let set = ServerConfig {
            max_connections: Some(100),
            ..ServerConfig::default()
        };
        assert_eq!(set.connection_cap(None).unwrap(), 100);
        assert_eq!(set.connection_cap(Some(132)).unwrap(), 100);
        let e = set.connection_cap(Some(96)).unwrap_err().to_string();
        assert!(
            e.contains("[server] max_connections is 100; expected at most 64")
                && e.contains("ulimit -n) is 96"),
            "{e}"
        );
    }

    #[test]
    fn default_state_path_rules() {
        assert_eq!(
            default_state_path(Some("/x".into()), Some("/h".into())),
            PathBuf::from("/x/vnfm/state.sqlite")
        );
        assert_eq!(
            default_state_path(Some("rel".into()), Some("/h".into())),
            PathBuf::from("/h/.local/state/vnfm/state.sqlite")
        );
        assert_eq!(
            default_state_path(None, None),
            PathBuf::from("vnfm-state.sqlite")
        );
    }
}
