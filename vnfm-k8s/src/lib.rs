//! # vnfm-k8s
//!
//! The Kubernetes adapter of vnfm: [`KubeCluster`] implements the core's
//! [`ClusterDriver`](vnfm_core::driver::ClusterDriver) over [kube-rs](https://kube.rs) and
//! takes no decision of its own: every call is one request (two for a kind looked up by
//! discovery) to the API server, its answer mapped onto the core's types.
//!
//! | method | request |
//! |---|---|
//! | `list_nodes` | `GET /api/v1/nodes`: name, labels, `spec.providerID`, `status.nodeInfo.systemUUID`, `status.addresses` |
//! | `label_node` | `PATCH /api/v1/nodes/{name}`, `application/merge-patch+json` of `metadata.labels` (`None` is `null`: removed) |
//! | `apply_object` | server-side apply: `PATCH` `application/apply-patch+yaml` with `fieldManager=vnfm&force=true`, of any manifest whose kind the [`kinds`] table or API discovery maps |
//! | `delete_object` | `DELETE` with `propagationPolicy: Background` |
//! | `list_workloads` | `GET` the Deployments and StatefulSets of a namespace, each returned as a manifest with `apiVersion` and `kind` |
//! | `scale_workload` | `PATCH .../{deployments,statefulsets}/{name}/scale`, `application/merge-patch+json` |
//! | `list_pods` | `GET /api/v1/namespaces/{ns}/pods?labelSelector=k=v,...`: `spec.nodeName`, `status.phase`, the `PodScheduled` condition, `metadata.deletionTimestamp` |
//! | `delete_pod` | `DELETE` with `gracePeriodSeconds` when given |
//! | `evict_pod` | `POST .../pods/{name}/eviction`, a `policy/v1` Eviction |
//! | `list_events` | `GET /api/v1/namespaces/{ns}/events` (core/v1) |
//!
//! ## Construction and authentication
//!
//! - [`KubeCluster::from_kubeconfig`]: a kubeconfig file and optionally a context: a bearer
//!   token (inline or `tokenFile`), a client certificate and key (inline or by file), an exec
//!   plugin; the CA embedded or by file; `http://` servers too.
//! - [`KubeCluster::in_cluster`]: the pod's service account.
//! - [`KubeCluster::infer`]: `KUBECONFIG`, then `~/.kube/config`, then in-cluster.
//! - [`KubeCluster::from_config`] / [`KubeCluster::new`]: a `kube::Config` or a
//!   `kube::Client` of the caller.
//!
//! The constructors of this crate turn kube's retry of 429, 503 and 504 answers off: retrying
//! is the caller's decision ([`DriverError::is_retryable`](vnfm_core::driver::DriverError)),
//! and an eviction a PodDisruptionBudget refuses (429) must come back at once as a
//! `Conflict`.
//!
//! ```no_run
//! use std::path::Path;
//! use std::sync::Arc;
//! use vnfm_core::driver::{ClusterDriver, ListPods};
//! use vnfm_k8s::KubeCluster;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = KubeCluster::from_kubeconfig(Path::new("/etc/vnfm/kubeconfig"), None).await?;
//! for node in cluster.list_nodes().await? {
//!     println!("{} {:?}", node.name, node.system_uuid);
//! }
//! let pods = cluster.list_pods(ListPods::new("default", "vdu1")).await?;
//! let driver: Arc<dyn ClusterDriver> = Arc::new(cluster);
//! # let _ = (pods, driver);
//! # Ok(()) }
//! ```
//!
//! ## Errors
//!
//! The API server's error Statuses (401, 403, 404, 409, 415, 422, 429, 5xx) map onto
//! [`DriverError`](vnfm_core::driver::DriverError) kinds as [`Error`] describes, keeping the
//! Status message; a server that cannot be reached is `Unavailable`, naming its URL.
//!
//! ## The Kubernetes API version
//!
//! Like every library on `k8s-openapi`, this crate does not choose the Kubernetes API version
//! of `k8s-openapi`: the final binary enables one feature of `k8s-openapi` (`vnfm-cli` and the
//! tests of this crate enable `v1_36`). The adapter reads only fields that every supported
//! version has.

pub mod error;
pub mod kinds;

mod cluster;
mod convert;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub use error::{Error, Result};

/// The field manager of vnfm's server-side applies.
pub const FIELD_MANAGER: &str = "vnfm";

/// One Kubernetes cluster: a [`ClusterDriver`](vnfm_core::driver::ClusterDriver) over a
/// `kube::Client`. Clones share the client and the kinds found by discovery.
#[derive(Clone)]
pub struct KubeCluster {
    client: kube::Client,
    server: Arc<str>,
    discovered: Arc<Mutex<BTreeMap<(String, String), kinds::Resource>>>,
}

impl fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeCluster")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl KubeCluster {
    /// A cluster reached through `client`, built by the caller (its retry policy and
    /// timeouts are kept). Error messages name the server as "the API server of the given
    /// client" unless [`KubeCluster::with_server`] names it.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            server: Arc::from("the API server of the given client"),
            discovered: Arc::default(),
        }
    }

    /// The same cluster, naming the server `server` (its URL) in error messages.
    pub fn with_server(mut self, server: impl Into<String>) -> Self {
        self.server = Arc::from(server.into());
        self
    }

    /// A cluster for `config`, with kube's retry of 429, 503 and 504 answers turned off.
    ///
    /// # Errors
    /// [`Error::Config`] when the client cannot be built (a CA or client certificate that
    /// cannot be read, no Tokio runtime).
    pub fn from_config(mut config: kube::Config) -> Result<Self> {
        let server = config.cluster_url.to_string();
        // kube's client spawns its request buffer on the current Tokio runtime
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::Config {
                what: format!("a client for {server}"),
                source: "the client must be built within a Tokio runtime".into(),
            });
        }
        config.default_retry = false;
        let client = kube::Client::try_from(config).map_err(|e| Error::Config {
            what: format!("a client for {server}"),
            source: Box::new(e),
        })?;
        Ok(Self::new(client).with_server(server))
    }

    /// A cluster from the kubeconfig file at `path`, with its `context` or its current
    /// context.
    ///
    /// # Errors
    /// [`Error::Config`] naming the file when it cannot be read or parsed, when the context
    /// does not exist, or when its credentials or CA cannot be loaded.
    pub async fn from_kubeconfig(path: &Path, context: Option<&str>) -> Result<Self> {
        let what = || match context {
            Some(c) => format!("kubeconfig {} (context {c})", path.display()),
            None => format!("kubeconfig {}", path.display()),
        };
        let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| Error::Config {
            what: what(),
            source: Box::new(e),
        })?;
        let options = kube::config::KubeConfigOptions {
            context: context.map(str::to_owned),
            ..Default::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| Error::Config {
                what: what(),
                source: Box::new(e),
            })?;
        Self::from_config(config)
    }

    /// A cluster from the pod's service account (`KUBERNETES_SERVICE_HOST`, the token and CA
    /// under `/var/run/secrets/kubernetes.io/serviceaccount`).
    ///
    /// # Errors
    /// [`Error::Config`] outside a pod, or when the token or CA cannot be read.
    pub fn in_cluster() -> Result<Self> {
        let config = kube::Config::incluster().map_err(|e| Error::Config {
            what: "in-cluster configuration".to_owned(),
            source: Box::new(e),
        })?;
        Self::from_config(config)
    }

    /// A cluster from the environment, as `kubectl` finds it: the kubeconfig of `KUBECONFIG`
    /// or `~/.kube/config`, else the in-cluster configuration.
    ///
    /// # Errors
    /// [`Error::Config`] when neither is usable.
    pub async fn infer() -> Result<Self> {
        let config = kube::Config::infer().await.map_err(|e| Error::Config {
            what: "a kubeconfig (KUBECONFIG, ~/.kube/config) or an in-cluster configuration"
                .to_owned(),
            source: Box::new(e),
        })?;
        Self::from_config(config)
    }

    /// The kube client (for requests the driver trait does not cover).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The server URL (or its description) used in error messages.
    pub fn server(&self) -> &str {
        &self.server
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn a_client_needs_a_runtime_and_says_so() {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let e = KubeCluster::from_config(config).unwrap_err();
        let text = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(text.contains("http://127.0.0.1:1/"), "{text}");
        assert!(text.contains("Tokio runtime"), "{text}");
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_is_named() {
        let e = KubeCluster::from_kubeconfig(Path::new("/nonexistent/kubeconfig"), Some("c"))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Config { .. }));
        assert!(
            e.to_string()
                .contains("kubeconfig /nonexistent/kubeconfig (context c)"),
            "{e}"
        );
    }
}
