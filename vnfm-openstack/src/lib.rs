//! # vnfm-openstack
//!
//! The OpenStack adapter of vnfm: it implements the driver traits of `vnfm-core` against
//! Keystone v3, Nova and Heat over HTTP, and takes no decision of its own.
//!
//! | type | trait | API |
//! |---|---|---|
//! | [`Heat`] | [`StackDriver`](vnfm_core::driver::StackDriver) | Heat v1 stacks, resources (`nested_depth`), events, mark unhealthy |
//! | [`Nova`] | [`ZoneCatalog`](vnfm_core::driver::ZoneCatalog), [`ComputeInventory`](vnfm_core::driver::ComputeInventory) | `os-availability-zone/detail` (falls back to `os-availability-zone` on 403) with the hosts' free capacity from Placement ([`placement`]: resource providers, allocation candidates), server show, server groups |
//!
//! Both come from one [`OpenStack`] session, which authenticates with Keystone v3 (password
//! or application credential), reuses its token until shortly before it expires, renews it
//! and retries once when a service answers 401, finds endpoints in the token's catalog (or
//! through `GET /v3/services` + `GET /v3/endpoints`, [`EndpointSource::EndpointsApi`]), and
//! counts its requests. Clones share the session; every type is `Clone + Debug` and usable
//! as `Arc<dyn Trait>`. Secrets never appear in `Debug` output.
//!
//! Configuration comes from `OS_*` variables or `clouds.yaml` ([`CloudConfig::from_env`])
//! or from a SOL003 `vimConnectionInfo` ([`CloudConfig::from_vim_connection_info`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use vnfm_core::driver::{ListZones, StackDriver, ZoneCatalog};
//! use vnfm_openstack::{CloudConfig, OpenStack};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let cloud = OpenStack::new(CloudConfig::from_env()?)?;
//! let zones = cloud.nova().list_zones(ListZones::default()).await?;
//! let stacks: Arc<dyn StackDriver> = Arc::new(cloud.heat());
//! for w in cloud.warnings() {
//!     eprintln!("warning: {w}");
//! }
//! # let _ = (zones, stacks);
//! # Ok(()) }
//! ```
//!
//! Errors of the services map onto [`DriverError`](vnfm_core::driver::DriverError) kinds as
//! [`Error`] describes; the HTTP status and the service's message are kept in the message.

mod capacity;
pub mod config;
pub mod error;
pub mod heat;
pub mod nova;
pub mod placement;
mod service;
pub mod session;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

pub use config::{
    CloudConfig, Credentials, DomainRef, EndpointSource, Interface, RetryPolicy, Scope, Secret,
    UserRef,
};
pub use error::{Error, Result};
pub use heat::{Heat, ListEvents, StackEvent};
pub use nova::{Nova, NovaServer, ServerGroup};
pub use placement::{CapacityNote, CapacityReport, CapacityUnknown, ZoneListing};
pub use session::{CatalogEndpoint, CatalogService, Endpoint, EndpointFilter, Service, TokenInfo};

use session::Session;

/// A session with one OpenStack cloud; hands out the service clients.
#[derive(Clone)]
pub struct OpenStack {
    session: Arc<Session>,
    names: Arc<Mutex<BTreeMap<String, String>>>,
}

impl fmt::Debug for OpenStack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenStack")
            .field("session", &self.session)
            .finish()
    }
}

impl OpenStack {
    /// A session for `config` (nothing is sent until the first request).
    ///
    /// # Errors
    /// [`Error::Transport`] when the HTTP client cannot be built (TLS backend).
    pub fn new(config: CloudConfig) -> Result<Self> {
        Ok(Self {
            session: Arc::new(Session::new(config)?),
            names: Arc::new(Mutex::new(BTreeMap::new())),
        })
    }

    /// A session configured from the environment ([`CloudConfig::from_env`]).
    ///
    /// # Errors
    /// As [`CloudConfig::from_env`] and [`OpenStack::new`].
    pub fn from_env() -> Result<Self> {
        Self::new(CloudConfig::from_env()?)
    }

    /// The configuration (secrets redacted in its `Debug`).
    pub fn config(&self) -> &CloudConfig {
        &self.session.config
    }

    /// The Nova client ([`ZoneCatalog`](vnfm_core::driver::ZoneCatalog),
    /// [`ComputeInventory`](vnfm_core::driver::ComputeInventory)).
    pub fn nova(&self) -> Nova {
        Nova {
            session: self.session.clone(),
        }
    }

    /// The Heat client ([`StackDriver`](vnfm_core::driver::StackDriver)).
    pub fn heat(&self) -> Heat {
        Heat {
            session: self.session.clone(),
            names: self.names.clone(),
        }
    }

    /// How many HTTP requests the session sent (authentication included).
    pub fn request_count(&self) -> u64 {
        self.session.request_count()
    }

    /// How many tokens the session obtained.
    pub fn auth_count(&self) -> u64 {
        self.session.auth_count()
    }

    /// How many times a transient failure was retried (see [`RetryPolicy`]).
    pub fn retry_count(&self) -> u64 {
        self.session.retry_count()
    }

    /// How many requests the session sent, per route: `service METHOD path` with the path
    /// relative to the service's endpoint and ids (segments with a digit or an upper case
    /// letter) written `{id}`, e.g. `keystone POST auth/tokens`,
    /// `nova GET os-availability-zone/detail`, `heat GET stacks/{id}/{id}`. The values add up
    /// to [`OpenStack::request_count`]. Meant for tests and metrics that pin the calls an
    /// operation makes.
    pub fn request_counts(&self) -> BTreeMap<String, u64> {
        self.session.route_counts()
    }

    /// The current token itself (authenticating first when there is none or it expires
    /// soon), for a caller that must hand it to another tool (e.g. to revoke it with
    /// `DELETE /v3/auth/tokens`). Its `Debug` is redacted.
    ///
    /// # Errors
    /// As [`OpenStack::token`].
    pub async fn current_token(&self) -> Result<Secret> {
        self.session.token_secret().await
    }

    /// Notes on degraded answers the caller should show (e.g. the zone listing fell back to
    /// `GET /os-availability-zone` because `/detail` is forbidden), without duplicates.
    pub fn warnings(&self) -> Vec<String> {
        self.session.warnings()
    }

    /// What the last zone listing of this session ([`Nova::list_zones_with_capacity`] or
    /// [`ZoneCatalog::list_zones`](vnfm_core::driver::ZoneCatalog::list_zones)) knew of the
    /// free capacity of its hosts, and why not where it did not; `None` before the first.
    pub fn capacity_report(&self) -> Option<CapacityReport> {
        self.session.last_capacity()
    }

    /// The current token's information, authenticating when there is no valid token (or
    /// always, with `renew`).
    ///
    /// # Errors
    /// [`Error::Http`] (401 for bad credentials), [`Error::Transport`], [`Error::Decode`].
    pub async fn token(&self, renew: bool) -> Result<TokenInfo> {
        self.session.token_info(renew).await
    }

    /// The base URL of `service_type` (`compute`, `orchestration`) for the configured
    /// interface and region, `%(project_id)s` substituted.
    ///
    /// # Errors
    /// [`Error::NoEndpoint`] when the catalog has none; authentication errors.
    pub async fn endpoint(&self, service_type: &str) -> Result<String> {
        self.session.endpoint(service_type).await
    }

    /// `GET /v3/services`.
    ///
    /// # Errors
    /// [`Error::Http`] (403 for users not allowed to list services), [`Error::Transport`],
    /// [`Error::Decode`].
    pub async fn list_services(&self) -> Result<Vec<Service>> {
        self.session.list_services().await
    }

    /// `GET /v3/endpoints` with Keystone's filters (the URLs are raw templates).
    ///
    /// # Errors
    /// As [`OpenStack::list_services`].
    pub async fn list_endpoints(&self, filter: EndpointFilter) -> Result<Vec<Endpoint>> {
        self.session.list_endpoints(&filter).await
    }
}
