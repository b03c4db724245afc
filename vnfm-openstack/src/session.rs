//! The authenticated session every service client shares: Keystone v3 tokens (reused until
//! close to expiry, renewed on 401), endpoint discovery, request sending and error decoding.
//!
//! A token's expiry is judged on Keystone's clock, not this host's: its lifetime is
//! `expires_at - issued_at` (both Keystone's), counted from its receipt on this host's
//! monotonic clock, so a host clock that is wrong, or moves, neither keeps an expired token
//! nor renews a fresh one at every request. A token without `issued_at` (not Keystone v3, which
//! always sends it) is kept until a service answers 401, then renewed once.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::capacity::{CapacityNote, CapacityReport};
use crate::config::{CloudConfig, Credentials, DomainRef, EndpointSource, Scope, Secret, UserRef};
use crate::error::{Error, Result};

/// A token is renewed when it expires within this long.
const RENEW_MARGIN: Duration = Duration::from_secs(120);

/// The service type of Keystone itself (requests go to [`CloudConfig::identity_url`]).
pub(crate) const IDENTITY: &str = "identity";

/// One endpoint of a service in a token's catalog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogEndpoint {
    /// `id`
    #[serde(default)]
    pub id: String,
    /// `interface`: `public`, `internal` or `admin`.
    pub interface: String,
    /// `region_id`
    #[serde(default)]
    pub region_id: Option<String>,
    /// `region` (the legacy name of `region_id`)
    #[serde(default)]
    pub region: Option<String>,
    /// `url`, with `%(project_id)s` already substituted by Keystone.
    pub url: String,
}

/// One service of a token's catalog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogService {
    /// `type`: `compute`, `orchestration`, `identity`, ...
    #[serde(rename = "type")]
    pub service_type: String,
    /// `name`
    #[serde(default)]
    pub name: String,
    /// `endpoints`
    #[serde(default)]
    pub endpoints: Vec<CatalogEndpoint>,
}

/// A service as `GET /v3/services` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    /// `id`
    pub id: String,
    /// `type`
    #[serde(rename = "type")]
    pub service_type: String,
    /// `name`
    #[serde(default)]
    pub name: String,
    /// `enabled`
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// An endpoint as `GET /v3/endpoints` lists it (the URL is the raw template, e.g.
/// `http://heat:8004/v1/%(project_id)s`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// `id`
    pub id: String,
    /// `interface`
    pub interface: String,
    /// `region_id`
    #[serde(default)]
    pub region_id: Option<String>,
    /// `service_id`
    pub service_id: String,
    /// `url`
    pub url: String,
    /// `enabled`
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// Filter of [`crate::OpenStack::list_endpoints`] (Keystone's query parameters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndpointFilter {
    /// `interface`
    pub interface: Option<String>,
    /// `service_id`
    pub service_id: Option<String>,
    /// `region_id`
    pub region_id: Option<String>,
}

impl EndpointFilter {
    /// Every endpoint.
    pub fn all() -> Self {
        Self::default()
    }
    /// The same filter restricted to `interface`.
    pub fn with_interface(mut self, interface: impl Into<String>) -> Self {
        self.interface = Some(interface.into());
        self
    }
    /// The same filter restricted to one service.
    pub fn with_service_id(mut self, id: impl Into<String>) -> Self {
        self.service_id = Some(id.into());
        self
    }
    /// The same filter restricted to one region.
    pub fn with_region_id(mut self, region: impl Into<String>) -> Self {
        self.region_id = Some(region.into());
        self
    }
}

/// What a token says (the token itself stays inside the session).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenInfo {
    /// `expires_at`
    pub expires_at: DateTime<Utc>,
    /// The project the token is scoped to.
    pub project_id: Option<String>,
    /// The user.
    pub user_id: Option<String>,
    /// The catalog.
    pub catalog: Vec<CatalogService>,
}

#[derive(Debug)]
struct Token {
    value: Secret,
    info: TokenInfo,
    /// When it was received, on this host's monotonic clock.
    received: Instant,
    /// `expires_at - issued_at`, on Keystone's clock; `None` without `issued_at`.
    lifetime: Option<Duration>,
}

impl Token {
    /// Still usable for [`RENEW_MARGIN`] more (always, when its lifetime is unknown: a 401
    /// renews it).
    fn fresh(&self) -> bool {
        self.lifetime
            .is_none_or(|l| self.received.elapsed() + RENEW_MARGIN < l)
    }
}

#[derive(Deserialize)]
struct TokenBody {
    token: TokenFields,
}

#[derive(Deserialize)]
struct TokenFields {
    expires_at: String,
    #[serde(default)]
    issued_at: Option<String>,
    #[serde(default)]
    project: Option<IdOnly>,
    #[serde(default)]
    user: Option<IdOnly>,
    #[serde(default)]
    catalog: Vec<CatalogService>,
}

#[derive(Deserialize)]
struct IdOnly {
    id: String,
}

/// An answer with a success status.
pub(crate) struct Reply {
    pub(crate) service: &'static str,
    pub(crate) method: Method,
    pub(crate) url: String,
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    /// The body as `T`.
    pub(crate) fn json<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.body).map_err(|e| Error::Decode {
            service: self.service,
            method: self.method.to_string(),
            url: self.url.clone(),
            what: format!(
                "a JSON body of the expected shape, got {} ({e})",
                snippet(&self.body)
            ),
            source: Some(e),
        })
    }

    /// A decode error about this reply.
    pub(crate) fn unexpected(&self, what: impl Into<String>) -> Error {
        Error::Decode {
            service: self.service,
            method: self.method.to_string(),
            url: self.url.clone(),
            what: what.into(),
            source: None,
        }
    }
}

/// A request to a service: path segments (percent-encoded here), query and JSON body.
pub(crate) struct Call<'a> {
    pub(crate) service: &'static str,
    pub(crate) service_type: &'static str,
    pub(crate) method: Method,
    pub(crate) path: Vec<&'a str>,
    pub(crate) query: Vec<(&'static str, String)>,
    pub(crate) body: Option<Value>,
}

impl<'a> Call<'a> {
    pub(crate) fn new(
        service: &'static str,
        service_type: &'static str,
        method: Method,
        path: Vec<&'a str>,
    ) -> Self {
        Self {
            service,
            service_type,
            method,
            path,
            query: Vec::new(),
            body: None,
        }
    }
    pub(crate) fn query(mut self, k: &'static str, v: impl Into<String>) -> Self {
        self.query.push((k, v.into()));
        self
    }
    pub(crate) fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }
}

/// The shared state behind [`crate::OpenStack`].
pub(crate) struct Session {
    http: reqwest::Client,
    pub(crate) config: CloudConfig,
    token: Mutex<Option<Arc<Token>>>,
    endpoints: Mutex<BTreeMap<String, String>>,
    requests: AtomicU64,
    auths: AtomicU64,
    retries: AtomicU64,
    routes: Mutex<BTreeMap<String, u64>>,
    warnings: Mutex<Vec<String>>,
    /// Placement's refusal (403, no endpoint) and the authentication it was given to (the
    /// value of `auths` then): not asked again with the same token.
    capacity_refusal: Mutex<Option<(u64, CapacityNote)>>,
    /// The capacity report of the last zone listing.
    last_capacity: Mutex<Option<CapacityReport>>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("config", &self.config)
            .field("requests", &self.requests.load(Ordering::Relaxed))
            .field("authentications", &self.auths.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Session {
    pub(crate) fn new(config: CloudConfig) -> Result<Self> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(config.timeout)
            // Never reuse a connection idle for longer than the shortest keep-alive of the
            // servers OpenStack APIs run in (gunicorn's 2 s, behind which Heat and Nova run
            // here): the server may close it while our request is on its way.
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .user_agent(concat!("vnfm-openstack/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|source| Error::Transport {
                service: "openstack",
                method: "-".into(),
                url: config.identity_url(),
                source,
            })?;
        Ok(Self {
            http,
            config,
            token: Mutex::new(None),
            endpoints: Mutex::new(BTreeMap::new()),
            requests: AtomicU64::new(0),
            auths: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            routes: Mutex::new(BTreeMap::new()),
            warnings: Mutex::new(Vec::new()),
            capacity_refusal: Mutex::new(None),
            last_capacity: Mutex::new(None),
        })
    }

    pub(crate) fn request_count(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    pub(crate) fn retry_count(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    pub(crate) fn auth_count(&self) -> u64 {
        self.auths.load(Ordering::Relaxed)
    }

    pub(crate) fn route_counts(&self) -> BTreeMap<String, u64> {
        lock(&self.routes).clone()
    }

    /// Counts one request of `route` (see [`route_key`]).
    fn count_route(&self, service: &str, method: &Method, segments: &[&str]) {
        *lock(&self.routes)
            .entry(route_key(service, method, segments))
            .or_insert(0) += 1;
    }

    /// The current token itself (authenticating when there is none or it expires soon).
    pub(crate) async fn token_secret(&self) -> Result<Secret> {
        Ok(self.token().await?.value.clone())
    }

    pub(crate) fn warn(&self, w: String) {
        let mut ws = lock(&self.warnings);
        if !ws.contains(&w) {
            ws.push(w);
        }
    }

    pub(crate) fn warnings(&self) -> Vec<String> {
        lock(&self.warnings).clone()
    }

    /// Remembers Placement's refusal for the current token.
    pub(crate) fn remember_capacity_refusal(&self, note: CapacityNote) {
        *lock(&self.capacity_refusal) = Some((self.auth_count(), note));
    }

    /// Placement's refusal, when it was given to the current token.
    pub(crate) fn capacity_refusal(&self) -> Option<CapacityNote> {
        lock(&self.capacity_refusal)
            .as_ref()
            .filter(|(auth, _)| *auth == self.auth_count())
            .map(|(_, n)| n.clone())
    }

    pub(crate) fn set_last_capacity(&self, report: CapacityReport) {
        *lock(&self.last_capacity) = Some(report);
    }

    pub(crate) fn last_capacity(&self) -> Option<CapacityReport> {
        lock(&self.last_capacity).clone()
    }

    fn auth_body(&self) -> Value {
        fn domain(d: &DomainRef) -> Value {
            match d {
                DomainRef::Id(id) => json!({"id": id}),
                DomainRef::Name(name) => json!({"name": name}),
            }
        }
        fn user(u: &UserRef) -> Value {
            match u {
                UserRef::Id(id) => json!({"id": id}),
                UserRef::Name { name, domain: d } => json!({"name": name, "domain": domain(d)}),
            }
        }
        match &self.config.credentials {
            Credentials::Password {
                user: u,
                password,
                scope,
            } => {
                let mut u = user(u);
                if let Value::Object(m) = &mut u {
                    m.insert("password".into(), Value::from(password.expose()));
                }
                let mut auth = json!({
                    "identity": {"methods": ["password"], "password": {"user": u}}
                });
                let scope = match scope {
                    Some(Scope::ProjectId(id)) => Some(json!({"project": {"id": id}})),
                    Some(Scope::ProjectName { name, domain: d }) => {
                        Some(json!({"project": {"name": name, "domain": domain(d)}}))
                    }
                    Some(Scope::Domain(d)) => Some(json!({"domain": domain(d)})),
                    None => None,
                };
                if let (Some(scope), Value::Object(m)) = (scope, &mut auth) {
                    m.insert("scope".into(), scope);
                }
                json!({ "auth": auth })
            }
            Credentials::ApplicationCredential {
                id,
                name,
                user: u,
                secret,
            } => {
                let mut ac = serde_json::Map::new();
                if let Some(id) = id {
                    ac.insert("id".into(), Value::from(id.as_str()));
                } else {
                    if let Some(name) = name {
                        ac.insert("name".into(), Value::from(name.as_str()));
                    }
                    if let Some(u) = u {
                        ac.insert("user".into(), user(u));
                    }
                }
                ac.insert("secret".into(), Value::from(secret.expose()));
                json!({"auth": {"identity": {
                    "methods": ["application_credential"],
                    "application_credential": ac,
                }}})
            }
        }
    }

    /// `POST /v3/auth/tokens`: a new token (the cached one is replaced).
    async fn authenticate(&self) -> Result<Arc<Token>> {
        let url = format!("{}/auth/tokens", self.config.identity_url());
        let mut transient = 0u32;
        let reply = loop {
            self.count_route("keystone", &Method::POST, &["auth", "tokens"]);
            // making a token twice has the effect of once: transient failures are retried
            match self
                .send_raw(
                    "keystone",
                    Method::POST,
                    &url,
                    None,
                    Some(&self.auth_body()),
                    None,
                )
                .await
            {
                Err(e) if self.retry_after(&e, &mut transient) => self.pause(transient).await,
                other => break other?,
            }
        };
        self.auths.fetch_add(1, Ordering::Relaxed);
        let value = reply
            .headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| reply.unexpected("a token in the X-Subject-Token header, found none"))?
            .to_owned();
        let received = Instant::now();
        let body: TokenBody = reply.json()?;
        let time = |field: &str, v: &str| {
            DateTime::parse_from_rfc3339(v)
                .map(|t| t.to_utc())
                .map_err(|e| {
                    reply.unexpected(format!(
                        "token.{field} as an RFC 3339 time, got {v:?} ({e})"
                    ))
                })
        };
        let expires_at = time("expires_at", &body.token.expires_at)?;
        let lifetime = match &body.token.issued_at {
            Some(v) => Some(
                (expires_at - time("issued_at", v)?)
                    .to_std()
                    .unwrap_or(Duration::ZERO),
            ),
            None => None,
        };
        let token = Arc::new(Token {
            value: Secret::new(value),
            received,
            lifetime,
            info: TokenInfo {
                expires_at,
                project_id: body.token.project.map(|p| p.id),
                user_id: body.token.user.map(|u| u.id),
                catalog: body.token.catalog,
            },
        });
        *lock(&self.token) = Some(token.clone());
        lock(&self.endpoints).clear();
        Ok(token)
    }

    /// The cached token unless it expires soon, else a new one.
    async fn token(&self) -> Result<Arc<Token>> {
        let cached = lock(&self.token).clone();
        if let Some(t) = cached {
            if t.fresh() {
                return Ok(t);
            }
        }
        self.authenticate().await
    }

    /// Forgets the cached token (the next request authenticates).
    fn invalidate(&self, stale: &Arc<Token>) {
        let mut t = lock(&self.token);
        if t.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, stale)) {
            *t = None;
        }
    }

    pub(crate) async fn token_info(&self, renew: bool) -> Result<TokenInfo> {
        let t = if renew {
            self.authenticate().await?
        } else {
            self.token().await?
        };
        Ok(t.info.clone())
    }

    /// The base URL of `service_type` for `token`.
    async fn endpoint_for(&self, service_type: &str, token: &Arc<Token>) -> Result<String> {
        if service_type == IDENTITY {
            return Ok(self.config.identity_url());
        }
        if let Some(u) = lock(&self.endpoints).get(service_type) {
            return Ok(u.clone());
        }
        let project = token.info.project_id.as_deref().unwrap_or("");
        let url = if let Some(o) = self.config.endpoint_overrides.get(service_type) {
            substitute(o, project)
        } else {
            match self.config.endpoint_source {
                EndpointSource::TokenCatalog => substitute(
                    &self.catalog_url(service_type, &token.info.catalog)?,
                    project,
                ),
                EndpointSource::EndpointsApi => {
                    substitute(&self.endpoints_api_url(service_type, token).await?, project)
                }
            }
        };
        lock(&self.endpoints).insert(service_type.to_owned(), url.clone());
        Ok(url)
    }

    fn region_matches(&self, region_id: Option<&str>, region: Option<&str>) -> bool {
        match &self.config.region {
            None => true,
            Some(want) => region_id == Some(want) || region == Some(want),
        }
    }

    fn no_endpoint(&self, service_type: &str, source_name: &'static str) -> Error {
        Error::NoEndpoint {
            service_type: service_type.to_owned(),
            interface: self.config.interface.as_str(),
            region: self
                .config
                .region
                .as_ref()
                .map_or_else(String::new, |r| format!(" in region {r}")),
            source_name,
        }
    }

    pub(crate) fn catalog_url(
        &self,
        service_type: &str,
        catalog: &[CatalogService],
    ) -> Result<String> {
        let iface = self.config.interface.as_str();
        catalog
            .iter()
            .filter(|s| s.service_type == service_type)
            .flat_map(|s| s.endpoints.iter())
            .find(|e| {
                e.interface == iface
                    && self.region_matches(e.region_id.as_deref(), e.region.as_deref())
            })
            .map(|e| e.url.clone())
            .ok_or_else(|| self.no_endpoint(service_type, "the token catalog"))
    }

    async fn endpoints_api_url(&self, service_type: &str, token: &Arc<Token>) -> Result<String> {
        let services = self.list_services_with(token).await?;
        let iface = self.config.interface.as_str();
        for s in services
            .iter()
            .filter(|s| s.service_type == service_type && s.enabled)
        {
            let mut filter = EndpointFilter::all()
                .with_interface(iface)
                .with_service_id(&s.id);
            if let Some(r) = &self.config.region {
                filter = filter.with_region_id(r);
            }
            let eps = self.list_endpoints_with(token, &filter).await?;
            if let Some(e) = eps.iter().find(|e| {
                e.enabled
                    && e.interface == iface
                    && e.service_id == s.id
                    && self.region_matches(e.region_id.as_deref(), None)
            }) {
                return Ok(e.url.clone());
            }
        }
        Err(self.no_endpoint(service_type, "GET /v3/endpoints"))
    }

    async fn list_services_with(&self, token: &Arc<Token>) -> Result<Vec<Service>> {
        #[derive(Deserialize)]
        struct Services {
            services: Vec<Service>,
        }
        let url = format!("{}/services", self.config.identity_url());
        self.count_route("keystone", &Method::GET, &["services"]);
        let r = self
            .send_raw("keystone", Method::GET, &url, Some(token), None, None)
            .await?;
        Ok(r.json::<Services>()?.services)
    }

    async fn list_endpoints_with(
        &self,
        token: &Arc<Token>,
        filter: &EndpointFilter,
    ) -> Result<Vec<Endpoint>> {
        #[derive(Deserialize)]
        struct Endpoints {
            endpoints: Vec<Endpoint>,
        }
        let mut url = url::Url::parse(&format!("{}/endpoints", self.config.identity_url()))
            .map_err(|e| self.bad_url(&self.config.identity_url(), e))?;
        {
            let mut q = url.query_pairs_mut();
            if let Some(i) = &filter.interface {
                q.append_pair("interface", i);
            }
            if let Some(s) = &filter.service_id {
                q.append_pair("service_id", s);
            }
            if let Some(r) = &filter.region_id {
                q.append_pair("region_id", r);
            }
        }
        let url = url.to_string().trim_end_matches('?').to_owned();
        self.count_route("keystone", &Method::GET, &["endpoints"]);
        let r = self
            .send_raw("keystone", Method::GET, &url, Some(token), None, None)
            .await?;
        Ok(r.json::<Endpoints>()?.endpoints)
    }

    pub(crate) async fn list_services(&self) -> Result<Vec<Service>> {
        let t = self.token().await?;
        self.list_services_with(&t).await
    }

    pub(crate) async fn list_endpoints(&self, filter: &EndpointFilter) -> Result<Vec<Endpoint>> {
        let t = self.token().await?;
        self.list_endpoints_with(&t, filter).await
    }

    pub(crate) async fn endpoint(&self, service_type: &str) -> Result<String> {
        let t = self.token().await?;
        self.endpoint_for(service_type, &t).await
    }

    fn bad_url(&self, base: &str, e: url::ParseError) -> Error {
        Error::config(
            vnfm_core::error::Location::default().with_field("endpoint"),
            format!("{base:?} is not a URL ({e})"),
        )
    }

    fn build_url(&self, base: &str, call: &Call<'_>) -> Result<String> {
        let mut url = url::Url::parse(base).map_err(|e| self.bad_url(base, e))?;
        {
            let mut segs = url.path_segments_mut().map_err(|()| {
                self.bad_url(base, url::ParseError::RelativeUrlWithCannotBeABaseBase)
            })?;
            segs.pop_if_empty();
            segs.extend(call.path.iter());
        }
        if !call.query.is_empty() {
            let mut q = url.query_pairs_mut();
            for (k, v) in &call.query {
                q.append_pair(k, v);
            }
        }
        Ok(url.to_string())
    }

    /// Sends `call` with a valid token; on 401 authenticates again and retries once. An
    /// idempotent request (GET, HEAD, PUT, DELETE) whose connection broke before an answer came
    /// is sent once more on a fresh connection (a keep-alive connection the server closed as
    /// we reused it); a timeout is not retried.
    pub(crate) async fn call(&self, call: Call<'_>) -> Result<Reply> {
        let mut retried = false;
        let mut resent = false;
        let mut transient = 0u32;
        loop {
            let token = self.token().await?;
            let base = self.endpoint_for(call.service_type, &token).await?;
            let url = self.build_url(&base, &call)?;
            self.count_route(call.service, &call.method, &call.path);
            let extra = match call.service_type {
                crate::service::nova::TYPE => Some((
                    "x-openstack-nova-api-version",
                    self.config.nova_microversion.as_str(),
                )),
                crate::service::placement::TYPE => Some((
                    "openstack-api-version",
                    crate::service::placement::API_VERSION_HEADER,
                )),
                _ => None,
            };
            match self
                .send_raw(
                    call.service,
                    call.method.clone(),
                    &url,
                    Some(&token),
                    call.body.as_ref(),
                    extra,
                )
                .await
            {
                Err(Error::Http { status: 401, .. }) if !retried => {
                    retried = true;
                    self.invalidate(&token);
                }
                Err(Error::Transport { ref source, .. })
                    if !resent && is_idempotent(&call.method) && !source.is_timeout() =>
                {
                    // a pooled connection the server had closed: once at once
                    resent = true;
                }
                Err(e) if is_idempotent(&call.method) && self.retry_after(&e, &mut transient) => {
                    self.pause(transient).await;
                }
                other => return other,
            }
        }
    }

    /// True when `e` is transient and the policy allows another attempt (counted in `n`).
    fn retry_after(&self, e: &Error, n: &mut u32) -> bool {
        let transient = match e {
            Error::Http { status, .. } => matches!(status, 502..=504),
            Error::Transport { .. } => true,
            _ => false,
        };
        if !transient || *n >= self.config.retry.max_retries {
            return false;
        }
        *n += 1;
        self.retries.fetch_add(1, Ordering::Relaxed);
        true
    }

    async fn pause(&self, n: u32) {
        tokio::time::sleep(self.config.retry.delay(n)).await;
    }

    /// One HTTP exchange; error statuses become [`Error::Http`].
    async fn send_raw(
        &self,
        service: &'static str,
        method: Method,
        url: &str,
        token: Option<&Arc<Token>>,
        body: Option<&Value>,
        extra: Option<(&'static str, &str)>,
    ) -> Result<Reply> {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(t) = token {
            let mut v = HeaderValue::from_str(t.value.expose()).map_err(|_| Error::Decode {
                service: "keystone",
                method: "POST".into(),
                url: format!("{}/auth/tokens", self.config.identity_url()),
                what: "a token usable as a header value".into(),
                source: None,
            })?;
            v.set_sensitive(true);
            headers.insert("x-auth-token", v);
        }
        if let Some((k, v)) = extra {
            if let Ok(v) = HeaderValue::from_str(v) {
                headers.insert(k, v);
            }
        }
        let mut req = self.http.request(method.clone(), url).headers(headers);
        if let Some(b) = body {
            req = req
                .header(CONTENT_TYPE, "application/json")
                .body(b.to_string());
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        let transport = |source| Error::Transport {
            service,
            method: method.to_string(),
            url: url.to_owned(),
            source,
        };
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.map_err(transport)?.to_vec();
        let reply = Reply {
            service,
            method,
            url: url.to_owned(),
            status,
            headers,
            body,
        };
        if status.is_success() || status.is_redirection() {
            return Ok(reply);
        }
        let (error_type, message) = error_message(&reply.body);
        Err(Error::Http {
            service,
            method: reply.method.to_string(),
            url: reply.url,
            status: status.as_u16(),
            error_type,
            message,
        })
    }
}

/// How long an idle pooled connection may be reused: below gunicorn's 2 s keep-alive.
const POOL_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Methods that may be sent twice with the effect of once (RFC 9110, 9.2.2).
fn is_idempotent(m: &Method) -> bool {
    [Method::GET, Method::HEAD, Method::PUT, Method::DELETE].contains(m)
}

/// The key of a request in [`crate::OpenStack::request_counts`]: `service METHOD path`, the
/// path relative to the service's endpoint with every segment that holds a digit or an upper
/// case letter (ids, names) replaced by `{id}`, e.g. `heat GET stacks/{id}/{id}` or
/// `nova GET os-availability-zone/detail`.
pub(crate) fn route_key(service: &str, method: &Method, segments: &[&str]) -> String {
    let path: Vec<&str> = segments
        .iter()
        .map(|s| {
            if s.is_empty()
                || s.chars()
                    .any(|c| c.is_ascii_digit() || c.is_ascii_uppercase() || !c.is_ascii())
            {
                "{id}"
            } else {
                s
            }
        })
        .collect();
    format!("{service} {method} {}", path.join("/"))
}

/// `%(project_id)s`, `%(tenant_id)s` (and the `$(...)s` spelling) replaced by `project`.
pub(crate) fn substitute(url: &str, project: &str) -> String {
    [
        "%(project_id)s",
        "%(tenant_id)s",
        "$(project_id)s",
        "$(tenant_id)s",
    ]
    .iter()
    .fold(url.to_owned(), |u, pat| u.replace(pat, project))
}

/// The error type and message of an OpenStack error body: Keystone `{"error": {"message"}}`,
/// Heat `{"explanation", "error": {"type", "message"}}`, Nova `{"itemNotFound": {"message"}}`,
/// Placement (the API working group's form) `{"errors": [{"code", "title", "detail"}]}` (its
/// whitespace collapsed), or the start of the body.
pub(crate) fn error_message(body: &[u8]) -> (Option<String>, String) {
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else {
        return (None, snippet(body));
    };
    if let Some(Value::Object(err)) = map.get("error") {
        let ty = err.get("type").and_then(Value::as_str).map(str::to_owned);
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| map.get("explanation").and_then(Value::as_str));
        if let Some(m) = msg {
            return (ty, m.trim().to_owned());
        }
    }
    if let Some(first) = map
        .get("errors")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        let text = first
            .get("detail")
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty())
            .or_else(|| first.get("title").and_then(Value::as_str));
        if let Some(t) = text {
            let code = first.get("code").and_then(Value::as_str).map(str::to_owned);
            return (code, t.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    for (k, v) in &map {
        if let Some(m) = v.get("message").and_then(Value::as_str) {
            return (Some(k.clone()), m.trim().to_owned());
        }
    }
    if let Some(m) = map.get("message").and_then(Value::as_str) {
        return (None, m.trim().to_owned());
    }
    (None, snippet(body))
}

/// The start of a body, for messages.
pub(crate) fn snippet(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body);
    let s = s.trim();
    if s.is_empty() {
        return "an empty body".to_owned();
    }
    let mut out: String = s.chars().take(300).collect();
    if s.chars().count() > 300 {
        out.push_str("...");
    }
    format!("{out:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_of_each_service() {
        let heat = br#"{"code": 404, "title": "Not Found", "explanation": "The resource could not be found.", "error": {"type": "EntityNotFound", "traceback": null, "message": "The Stack (nosuch) could not be found."}}"#;
        assert_eq!(
            error_message(heat),
            (
                Some("EntityNotFound".into()),
                "The Stack (nosuch) could not be found.".into()
            )
        );
        let ks = br#"{"error":{"code":401,"message":"The request you have made requires authentication.","title":"Unauthorized"}}"#;
        assert_eq!(
            error_message(ks).1,
            "The request you have made requires authentication."
        );
        let nova = br#"{"forbidden": {"code": 403, "message": "Quota exceeded for cores"}}"#;
        assert_eq!(
            error_message(nova),
            (Some("forbidden".into()), "Quota exceeded for cores".into())
        );
        assert_eq!(
            error_message(b"<html>oops</html>").1,
            "\"<html>oops</html>\""
        );
        assert_eq!(error_message(b"").1, "an empty body");
        let placement = br#"{"errors": [{"status": 403, "title": "Forbidden", "detail": "Access was denied to this resource.\n\n Policy does not allow placement:resource_providers:list to be performed.  ", "code": "placement.undefined_code", "request_id": "req-1"}]}"#;
        assert_eq!(
            error_message(placement),
            (
                Some("placement.undefined_code".into()),
                "Access was denied to this resource. Policy does not allow \
                 placement:resource_providers:list to be performed."
                    .into()
            )
        );
    }

    #[test]
    fn project_id_templates_are_substituted() {
        assert_eq!(
            substitute("http://h:8004/v1/%(project_id)s", "p1"),
            "http://h:8004/v1/p1"
        );
        assert_eq!(
            substitute("http://h/v1/$(tenant_id)s", "p1"),
            "http://h/v1/p1"
        );
    }
}
