//! How to reach a cloud: Keystone URL, credentials, region, interface, the Nova microversion.
//!
//! A [`CloudConfig`] comes from one of the three places OpenStack users keep it:
//! - `OS_*` environment variables ([`CloudConfig::from_env_vars`], as `openstack` reads them),
//! - a `clouds.yaml` entry ([`CloudConfig::from_clouds_yaml`], chosen by `OS_CLOUD`),
//! - a SOL003 `vimConnectionInfo` ([`CloudConfig::from_vim_connection_info`]).
//!
//! Secrets are [`Secret`]s: their `Debug` prints `<redacted>`, so no configuration, client or
//! error ever shows a password in logs.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use vnfm_core::error::Location;
use vnfm_core::grant::VimConnectionInfo;

use crate::error::Error;

/// A secret string (password, application credential secret, token): never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    /// The secret itself, for the request that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Self(s)
    }
}

/// A Keystone domain (of a user or a project), by id or by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DomainRef {
    /// `{"id": ...}`
    Id(String),
    /// `{"name": ...}`
    Name(String),
}

/// A Keystone user, by id or by name within a domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserRef {
    /// `{"id": ...}`
    Id(String),
    /// `{"name": ..., "domain": ...}`
    Name {
        /// User name.
        name: String,
        /// Its domain.
        domain: DomainRef,
    },
}

/// What a token is scoped to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A project by id.
    ProjectId(String),
    /// A project by name within a domain.
    ProjectName {
        /// Project name.
        name: String,
        /// Its domain.
        domain: DomainRef,
    },
    /// A domain (no service catalog of Nova or Heat for a domain-scoped token, usually).
    Domain(DomainRef),
}

/// Keystone v3 credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Credentials {
    /// The `password` method, with an optional scope (unscoped tokens have no catalog).
    Password {
        /// The user.
        user: UserRef,
        /// The password.
        password: Secret,
        /// The scope.
        scope: Option<Scope>,
    },
    /// The `application_credential` method (scoped by the credential itself).
    ApplicationCredential {
        /// The credential by id, or by name together with `user`.
        id: Option<String>,
        /// The credential's name (used when `id` is `None`).
        name: Option<String>,
        /// The owner, required with `name`.
        user: Option<UserRef>,
        /// The credential's secret.
        secret: Secret,
    },
}

/// Which endpoint of a service to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Interface {
    /// `public` (the default).
    #[default]
    Public,
    /// `internal`
    Internal,
    /// `admin`
    Admin,
}

impl Interface {
    /// Keystone's spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Interface::Public => "public",
            Interface::Internal => "internal",
            Interface::Admin => "admin",
        }
    }

    /// Parses `public`, `internal`, `admin` (also with a `URL` suffix, as `publicURL`).
    pub fn parse(s: &str) -> Option<Interface> {
        match s.trim_end_matches("URL") {
            "public" => Some(Interface::Public),
            "internal" => Some(Interface::Internal),
            "admin" => Some(Interface::Admin),
            _ => None,
        }
    }
}

/// Where service endpoints come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EndpointSource {
    /// The catalog of the token (Keystone already substituted `%(project_id)s`).
    #[default]
    TokenCatalog,
    /// `GET /v3/services` and `GET /v3/endpoints` filtered by interface and region; the
    /// URL templates are substituted with the token's project id (needs a user allowed to
    /// list endpoints).
    EndpointsApi,
}

/// The Nova microversion the adapter asks for unless told otherwise: 2.79 (Train) has the
/// flavor name in server show (2.47) and the server's groups (2.71).
pub const DEFAULT_NOVA_MICROVERSION: &str = "2.79";

/// Everything needed to talk to one cloud.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CloudConfig {
    /// Keystone v3 URL (`.../v3` is appended when missing).
    pub auth_url: String,
    /// Credentials.
    pub credentials: Credentials,
    /// Region of the endpoints; `None` takes the first of any region.
    pub region: Option<String>,
    /// Endpoint interface.
    pub interface: Interface,
    /// Where endpoints come from.
    pub endpoint_source: EndpointSource,
    /// Endpoint URLs by service type (`compute`, `orchestration`), used instead of the
    /// catalog; `%(project_id)s` is substituted.
    pub endpoint_overrides: BTreeMap<String, String>,
    /// `X-OpenStack-Nova-API-Version` sent to Nova.
    pub nova_microversion: String,
    /// Timeout of one HTTP request.
    pub timeout: Duration,
    /// Ask Placement for the free capacity of the hosts of a zone listing (default `true`;
    /// see [`crate::placement`]). Off, every host reports `free: None`.
    pub free_capacity: bool,
    /// How transient failures are retried (see [`RetryPolicy`]).
    pub retry: RetryPolicy,
}

/// Retries of transient failures: a request that may be sent twice with the effect of once
/// (GET, HEAD, PUT, DELETE; and Keystone's `POST /auth/tokens`, which only makes a token) is
/// sent again after a connection failure or a 502, 503 or 504 answer (a service restarting,
/// a proxy without its backend, keystonemiddleware unable to reach Keystone), waiting
/// `initial_delay`, then twice as long each time up to `max_delay`, at most `max_retries`
/// times. Other methods (a stack create) are never resent: the first attempt may have taken
/// effect. The default, 6 retries from 0.5 s to 8 s, rides out about 30 s of unavailability.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Retries after the first attempt (0: none).
    pub max_retries: u32,
    /// Wait before the first retry.
    pub initial_delay: Duration,
    /// Longest wait between two attempts.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 6,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// No retry at all.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// `max_retries` retries from `initial_delay`, doubling up to `max_delay`.
    pub fn new(max_retries: u32, initial_delay: Duration, max_delay: Duration) -> Self {
        Self {
            max_retries,
            initial_delay,
            max_delay,
        }
    }

    /// The wait before retry number `n` (1-based).
    pub fn delay(&self, n: u32) -> Duration {
        let factor = 2u32.saturating_pow(n.saturating_sub(1));
        self.initial_delay
            .checked_mul(factor)
            .map_or(self.max_delay, |d| d.min(self.max_delay))
    }
}

impl CloudConfig {
    /// A configuration with default region, interface (public), endpoint source (token
    /// catalog), Nova microversion, a 60 s timeout and free capacity from Placement.
    pub fn new(auth_url: impl Into<String>, credentials: Credentials) -> Self {
        Self {
            auth_url: auth_url.into(),
            credentials,
            region: None,
            interface: Interface::default(),
            endpoint_source: EndpointSource::default(),
            endpoint_overrides: BTreeMap::new(),
            nova_microversion: DEFAULT_NOVA_MICROVERSION.to_owned(),
            timeout: Duration::from_secs(60),
            free_capacity: true,
            retry: RetryPolicy::default(),
        }
    }

    /// The same configuration with another retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Password credentials for `user` (by name in domain `domain`) scoped to project
    /// `project` (by name, in the same domain).
    pub fn password(
        auth_url: impl Into<String>,
        user: impl Into<String>,
        password: impl Into<Secret>,
        project: impl Into<String>,
        domain: impl Into<String>,
    ) -> Self {
        let domain = domain.into();
        Self::new(
            auth_url,
            Credentials::Password {
                user: UserRef::Name {
                    name: user.into(),
                    domain: DomainRef::Name(domain.clone()),
                },
                password: password.into(),
                scope: Some(Scope::ProjectName {
                    name: project.into(),
                    domain: DomainRef::Name(domain),
                }),
            },
        )
    }

    /// The same configuration in `region`.
    pub fn with_region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// The same configuration with another interface.
    pub fn with_interface(mut self, interface: Interface) -> Self {
        self.interface = interface;
        self
    }

    /// The same configuration with another endpoint source.
    pub fn with_endpoint_source(mut self, source: EndpointSource) -> Self {
        self.endpoint_source = source;
        self
    }

    /// The same configuration with an explicit endpoint for `service_type`.
    pub fn with_endpoint_override(
        mut self,
        service_type: impl Into<String>,
        url: impl Into<String>,
    ) -> Self {
        self.endpoint_overrides
            .insert(service_type.into(), url.into());
        self
    }

    /// The same configuration with another Nova microversion.
    pub fn with_nova_microversion(mut self, version: impl Into<String>) -> Self {
        self.nova_microversion = version.into();
        self
    }

    /// The same configuration with another request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same configuration with the free capacity of hosts asked of Placement (`yes`, the
    /// default) or not.
    pub fn with_free_capacity(mut self, yes: bool) -> Self {
        self.free_capacity = yes;
        self
    }

    /// The Keystone v3 base URL, ending in `/v3` without a trailing slash.
    pub fn identity_url(&self) -> String {
        let base = self.auth_url.trim_end_matches('/');
        if base.ends_with("/v3") {
            base.to_owned()
        } else {
            format!("{base}/v3")
        }
    }

    /// The configuration of the process environment: `OS_CLOUD` names a `clouds.yaml` entry
    /// (looked up in `./clouds.yaml`, `~/.config/openstack/clouds.yaml`,
    /// `/etc/openstack/clouds.yaml`, or `OS_CLIENT_CONFIG_FILE`), otherwise the `OS_*`
    /// variables.
    ///
    /// # Errors
    /// [`Error::Core`] (an invalid-input error) naming the variable or the file and field that is missing or wrong.
    pub fn from_env() -> Result<Self, Error> {
        Self::from_env_with_cloud(None)
    }

    /// As [`CloudConfig::from_env`], with `cloud` (when given) naming the `clouds.yaml` entry
    /// instead of `OS_CLOUD` (e.g. the `[vim] os_cloud` option of the CLI).
    ///
    /// # Errors
    /// As [`CloudConfig::from_env`].
    pub fn from_env_with_cloud(cloud: Option<&str>) -> Result<Self, Error> {
        let vars: BTreeMap<String, String> = std::env::vars()
            .filter(|(k, _)| k.starts_with("OS_"))
            .collect();
        let (cloud, origin) = match cloud.filter(|c| !c.is_empty()) {
            Some(c) => (Some(c.to_owned()), "the cloud name"),
            None => (
                vars.get("OS_CLOUD").filter(|c| !c.is_empty()).cloned(),
                "OS_CLOUD",
            ),
        };
        if let Some(cloud) = cloud.as_deref() {
            let path = clouds_yaml_path(&vars).ok_or_else(|| {
                Error::config(
                    Location::default().with_field(origin),
                    format!(
                        "{origin} is {cloud:?} but no clouds.yaml was found (looked at \
                         OS_CLIENT_CONFIG_FILE, ./clouds.yaml, ~/.config/openstack/clouds.yaml, \
                         /etc/openstack/clouds.yaml)"
                    ),
                )
            })?;
            let text = vnfm_core::input::read_text(
                &path,
                vnfm_core::input::MAX_INPUT_BYTES,
                "a clouds.yaml",
            )
            .map_err(Error::Core)?;
            return Self::from_clouds_yaml(&path, &text, cloud);
        }
        Self::from_env_vars(&vars)
    }

    /// The configuration of `OS_*` variables (`OS_AUTH_URL`, `OS_USERNAME` or `OS_USER_ID`,
    /// `OS_PASSWORD`, `OS_PROJECT_NAME` or `OS_PROJECT_ID`, `OS_USER_DOMAIN_NAME`/`_ID`,
    /// `OS_PROJECT_DOMAIN_NAME`/`_ID`, `OS_REGION_NAME`, `OS_INTERFACE`, or
    /// `OS_AUTH_TYPE=v3applicationcredential` with `OS_APPLICATION_CREDENTIAL_ID`/`_NAME` and
    /// `OS_APPLICATION_CREDENTIAL_SECRET`; `OS_COMPUTE_API_VERSION` sets the microversion).
    ///
    /// # Errors
    /// [`Error::Core`] (an invalid-input error) naming the missing or invalid variable.
    pub fn from_env_vars(vars: &BTreeMap<String, String>) -> Result<Self, Error> {
        let get = |k: &str| vars.get(k).filter(|v| !v.is_empty()).cloned();
        let at = |k: &str| Location::default().with_field(k.to_owned());
        let auth_url = get("OS_AUTH_URL").ok_or_else(|| {
            Error::config(at("OS_AUTH_URL"), "missing (expected the Keystone URL)")
        })?;
        let mut m = BTreeMap::new();
        for (env, key) in [
            ("OS_AUTH_TYPE", "auth_type"),
            ("OS_USERNAME", "username"),
            ("OS_USER_ID", "user_id"),
            ("OS_PASSWORD", "password"),
            ("OS_PROJECT_NAME", "project_name"),
            ("OS_TENANT_NAME", "project_name"),
            ("OS_PROJECT_ID", "project_id"),
            ("OS_TENANT_ID", "project_id"),
            ("OS_USER_DOMAIN_NAME", "user_domain_name"),
            ("OS_USER_DOMAIN_ID", "user_domain_id"),
            ("OS_PROJECT_DOMAIN_NAME", "project_domain_name"),
            ("OS_PROJECT_DOMAIN_ID", "project_domain_id"),
            ("OS_DOMAIN_NAME", "domain_name"),
            ("OS_DOMAIN_ID", "domain_id"),
            ("OS_APPLICATION_CREDENTIAL_ID", "application_credential_id"),
            (
                "OS_APPLICATION_CREDENTIAL_NAME",
                "application_credential_name",
            ),
            (
                "OS_APPLICATION_CREDENTIAL_SECRET",
                "application_credential_secret",
            ),
        ] {
            if let Some(v) = get(env) {
                m.entry(key.to_owned()).or_insert(v);
            }
        }
        let names: BTreeMap<&str, String> = [
            ("username", "OS_USERNAME"),
            ("password", "OS_PASSWORD"),
            (
                "application_credential_secret",
                "OS_APPLICATION_CREDENTIAL_SECRET",
            ),
            ("project_name", "OS_PROJECT_NAME"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect();
        let credentials = credentials_from(&m, &|key| {
            Location::default().with_field(
                names
                    .get(key)
                    .cloned()
                    .unwrap_or_else(|| format!("OS_{}", key.to_ascii_uppercase())),
            )
        })?;
        let mut c = CloudConfig::new(auth_url, credentials);
        c.region = get("OS_REGION_NAME");
        if let Some(i) = get("OS_INTERFACE").or_else(|| get("OS_ENDPOINT_TYPE")) {
            c.interface = Interface::parse(&i).ok_or_else(|| {
                Error::config(
                    at("OS_INTERFACE"),
                    format!("{i:?} is not an interface (expected public, internal or admin)"),
                )
            })?;
        }
        if let Some(v) = get("OS_COMPUTE_API_VERSION") {
            c.nova_microversion = v;
        }
        Ok(c)
    }

    /// The configuration of entry `cloud` of a `clouds.yaml` text (`clouds.<cloud>.auth`,
    /// `auth_type`, `region_name`, `interface`).
    ///
    /// # Errors
    /// [`Error::Core`] (an invalid-input error) naming the file and the field path that is missing or wrong.
    pub fn from_clouds_yaml(path: &Path, text: &str, cloud: &str) -> Result<Self, Error> {
        let at = |field: String| Location::file(path).with_field(field);
        if let Some(at) = vnfm_core::input::too_deep(text.as_bytes()) {
            return Err(Error::config(
                Location::file(path).with_line(at.0),
                format!(
                    "not valid YAML: `[` / `{{` nested deeper than {} levels at line {}, column \
                     {}",
                    vnfm_core::input::MAX_NESTING,
                    at.0,
                    at.1
                ),
            ));
        }
        let doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
            let mut loc = Location::file(path);
            if let Some(l) = e.location() {
                loc = loc.with_line(l.line());
            }
            Error::config(loc, format!("not valid YAML: {e}"))
        })?;
        let entry = doc
            .get("clouds")
            .and_then(|c| c.get(cloud))
            .ok_or_else(|| {
                Error::config(
                    at(format!("clouds.{cloud}")),
                    format!("no cloud named {cloud:?} (expected an entry under `clouds:`)"),
                )
            })?;
        let prefix = format!("clouds.{cloud}");
        let auth = entry.get("auth").ok_or_else(|| {
            Error::config(
                at(format!("{prefix}.auth")),
                "missing (expected a mapping with auth_url and credentials)",
            )
        })?;
        let text_of = |v: &serde_yaml::Value| match v {
            serde_yaml::Value::String(s) => Some(s.clone()),
            serde_yaml::Value::Number(n) => Some(n.to_string()),
            serde_yaml::Value::Bool(b) => Some(b.to_string()),
            _ => None,
        };
        let mut m = BTreeMap::new();
        if let Some(map) = auth.as_mapping() {
            for (k, v) in map {
                if let (Some(k), Some(v)) = (k.as_str(), text_of(v)) {
                    m.insert(k.to_owned(), v);
                }
            }
        } else {
            return Err(Error::config(
                at(format!("{prefix}.auth")),
                "expected a mapping",
            ));
        }
        if let Some(t) = entry.get("auth_type").and_then(text_of) {
            m.insert("auth_type".to_owned(), t);
        }
        let auth_url = m.get("auth_url").cloned().ok_or_else(|| {
            Error::config(
                at(format!("{prefix}.auth.auth_url")),
                "missing (expected the Keystone URL)",
            )
        })?;
        let credentials = credentials_from(&m, &|key| at(format!("{prefix}.auth.{key}")))?;
        let mut c = CloudConfig::new(auth_url, credentials);
        c.region = entry.get("region_name").and_then(text_of);
        if let Some(i) = entry.get("interface").and_then(text_of) {
            c.interface = Interface::parse(&i).ok_or_else(|| {
                Error::config(
                    at(format!("{prefix}.interface")),
                    format!("{i:?} is not an interface (expected public, internal or admin)"),
                )
            })?;
        }
        if let Some(v) = entry.get("compute_api_version").and_then(text_of) {
            c.nova_microversion = v;
        }
        Ok(c)
    }

    /// The configuration of a SOL003 `vimConnectionInfo` of type
    /// `ETSINFV.OPENSTACK_KEYSTONE.V_3`: `interfaceInfo.endpoint` is the Keystone URL,
    /// `accessInfo` holds `username`/`userId`, `password`, `project`/`projectId`,
    /// `userDomain`, `projectDomain`, `region` (Tacker's names, snake_case also accepted)
    /// or `applicationCredentialId`/`applicationCredentialSecret`.
    ///
    /// # Errors
    /// [`Error::Core`] (an invalid-input error) naming the field path (`interfaceInfo.endpoint`,
    /// `accessInfo.password`, ...) that is missing or wrong.
    pub fn from_vim_connection_info(vim: &VimConnectionInfo) -> Result<Self, Error> {
        let at = |f: &str| Location::default().with_field(f.to_owned());
        if !vim.vim_type.contains("OPENSTACK") {
            return Err(Error::config(
                at("vimType"),
                format!(
                    "{:?} is not an OpenStack VIM (expected ETSINFV.OPENSTACK_KEYSTONE.V_3)",
                    vim.vim_type
                ),
            ));
        }
        let endpoint = vim
            .interface_info
            .as_ref()
            .and_then(|i| i.get("endpoint"))
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| {
                Error::config(
                    at("interfaceInfo.endpoint"),
                    "missing (expected the Keystone URL as a string)",
                )
            })?;
        let access = vim
            .access_info
            .as_ref()
            .ok_or_else(|| Error::config(at("accessInfo"), "missing (expected credentials)"))?;
        let mut m = BTreeMap::new();
        for (sol, key) in [
            ("username", "username"),
            ("userId", "user_id"),
            ("password", "password"),
            ("project", "project_name"),
            ("projectName", "project_name"),
            ("projectId", "project_id"),
            ("userDomain", "user_domain_name"),
            ("userDomainName", "user_domain_name"),
            ("userDomainId", "user_domain_id"),
            ("projectDomain", "project_domain_name"),
            ("projectDomainName", "project_domain_name"),
            ("projectDomainId", "project_domain_id"),
            ("applicationCredentialId", "application_credential_id"),
            ("applicationCredentialName", "application_credential_name"),
            (
                "applicationCredentialSecret",
                "application_credential_secret",
            ),
            ("authType", "auth_type"),
        ] {
            let v = access.str(sol).or_else(|| access.str(key));
            if let Some(v) = v.filter(|v| !v.is_empty()) {
                m.entry(key.to_owned()).or_insert_with(|| v.to_owned());
            }
        }
        let camel: BTreeMap<&str, &str> = [
            ("username", "accessInfo.username"),
            ("password", "accessInfo.password"),
            ("project_name", "accessInfo.project"),
            (
                "application_credential_secret",
                "accessInfo.applicationCredentialSecret",
            ),
        ]
        .into_iter()
        .collect();
        let credentials = credentials_from(&m, &|key| {
            at(camel
                .get(key)
                .map_or_else(|| format!("accessInfo.{key}"), |s| (*s).to_owned())
                .as_str())
        })?;
        let mut c = CloudConfig::new(endpoint, credentials);
        c.region = access.str("region").map(str::to_owned);
        if let Some(i) = access.str("interface") {
            c.interface = Interface::parse(i).ok_or_else(|| {
                Error::config(
                    at("accessInfo.interface"),
                    format!("{i:?} is not an interface (expected public, internal or admin)"),
                )
            })?;
        }
        Ok(c)
    }
}

/// `clouds.yaml` as `openstack` looks for it.
fn clouds_yaml_path(vars: &BTreeMap<String, String>) -> Option<PathBuf> {
    if let Some(p) = vars.get("OS_CLIENT_CONFIG_FILE") {
        return Some(PathBuf::from(p));
    }
    let mut candidates = vec![PathBuf::from("clouds.yaml")];
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(
            PathBuf::from(home)
                .join(".config")
                .join("openstack")
                .join("clouds.yaml"),
        );
    }
    candidates.push(PathBuf::from("/etc/openstack/clouds.yaml"));
    candidates.into_iter().find(|p| p.is_file())
}

/// Credentials from keystoneauth-style keys (`username`, `user_domain_name`, ...).
fn credentials_from(
    m: &BTreeMap<String, String>,
    at: &dyn Fn(&str) -> Location,
) -> Result<Credentials, Error> {
    let get = |k: &str| m.get(k).cloned();
    let domain = |id: &str, name: &str| -> Option<DomainRef> {
        get(id)
            .map(DomainRef::Id)
            .or_else(|| get(name).map(DomainRef::Name))
    };
    let default_domain = domain("domain_id", "domain_name");
    let user_domain = || {
        domain("user_domain_id", "user_domain_name")
            .or_else(|| default_domain.clone())
            .unwrap_or_else(|| DomainRef::Id("default".to_owned()))
    };
    let user = || -> Option<UserRef> {
        get("user_id").map(UserRef::Id).or_else(|| {
            get("username").map(|name| UserRef::Name {
                name,
                domain: user_domain(),
            })
        })
    };
    let auth_type = get("auth_type").unwrap_or_else(|| {
        if m.contains_key("application_credential_secret") {
            "v3applicationcredential".to_owned()
        } else {
            "password".to_owned()
        }
    });
    match auth_type.as_str() {
        "v3applicationcredential" | "application_credential" => {
            let secret = get("application_credential_secret").ok_or_else(|| {
                Error::config(
                    at("application_credential_secret"),
                    "missing (expected the application credential's secret)",
                )
            })?;
            let id = get("application_credential_id");
            let name = get("application_credential_name");
            let user = user();
            if id.is_none() && (name.is_none() || user.is_none()) {
                return Err(Error::config(
                    at("application_credential_id"),
                    "missing (expected the credential's id, or its name and the user)",
                ));
            }
            Ok(Credentials::ApplicationCredential {
                id,
                name,
                user,
                secret: Secret::new(secret),
            })
        }
        "password" | "v3password" => {
            let user = user().ok_or_else(|| {
                Error::config(at("username"), "missing (expected a user name or user id)")
            })?;
            let password = get("password")
                .ok_or_else(|| Error::config(at("password"), "missing (expected the password)"))?;
            let project_domain = || {
                domain("project_domain_id", "project_domain_name")
                    .or_else(|| default_domain.clone())
                    .unwrap_or_else(|| DomainRef::Id("default".to_owned()))
            };
            let scope = if let Some(id) = get("project_id") {
                Some(Scope::ProjectId(id))
            } else if let Some(name) = get("project_name") {
                Some(Scope::ProjectName {
                    name,
                    domain: project_domain(),
                })
            } else {
                default_domain.clone().map(Scope::Domain)
            };
            Ok(Credentials::Password {
                user,
                password: Secret::new(password),
                scope,
            })
        }
        other => Err(Error::config(
            at("auth_type"),
            format!("{other:?} is not supported (expected password or v3applicationcredential)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn env_vars_give_password_credentials_scoped_by_name() {
        let c = CloudConfig::from_env_vars(&vars(&[
            ("OS_AUTH_URL", "http://127.0.0.1:5000/v3"),
            ("OS_USERNAME", "admin"),
            ("OS_PASSWORD", "s3cret-value"),
            ("OS_PROJECT_NAME", "admin"),
            ("OS_USER_DOMAIN_NAME", "Default"),
            ("OS_PROJECT_DOMAIN_ID", "default"),
            ("OS_REGION_NAME", "RegionOne"),
            ("OS_INTERFACE", "internal"),
        ]))
        .unwrap();
        assert_eq!(c.identity_url(), "http://127.0.0.1:5000/v3");
        assert_eq!(c.region.as_deref(), Some("RegionOne"));
        assert_eq!(c.interface, Interface::Internal);
        assert_eq!(
            c.credentials,
            Credentials::Password {
                user: UserRef::Name {
                    name: "admin".into(),
                    domain: DomainRef::Name("Default".into())
                },
                password: Secret::new("s3cret-value"),
                scope: Some(Scope::ProjectName {
                    name: "admin".into(),
                    domain: DomainRef::Id("default".into())
                }),
            }
        );
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret-value"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn env_vars_report_what_is_missing() {
        let e = CloudConfig::from_env_vars(&vars(&[("OS_USERNAME", "admin")])).unwrap_err();
        assert!(e.to_string().contains("OS_AUTH_URL"), "{e}");
        let e = CloudConfig::from_env_vars(&vars(&[
            ("OS_AUTH_URL", "http://k:5000"),
            ("OS_USERNAME", "admin"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("OS_PASSWORD"), "{e}");
        let e = CloudConfig::from_env_vars(&vars(&[
            ("OS_AUTH_URL", "http://k:5000"),
            ("OS_AUTH_TYPE", "v3oidc"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("\"v3oidc\""), "{e}");
    }

    #[test]
    fn clouds_yaml_entry_with_application_credential() {
        let text = "clouds:\n  lab:\n    auth_type: v3applicationcredential\n    auth:\n      \
                    auth_url: http://k:5000\n      application_credential_id: ac1\n      \
                    application_credential_secret: topsecret\n    region_name: R2\n    \
                    interface: admin\n";
        let c = CloudConfig::from_clouds_yaml(Path::new("clouds.yaml"), text, "lab").unwrap();
        assert_eq!(c.identity_url(), "http://k:5000/v3");
        assert_eq!(c.region.as_deref(), Some("R2"));
        assert_eq!(c.interface, Interface::Admin);
        assert!(matches!(
            &c.credentials,
            Credentials::ApplicationCredential { id: Some(id), .. } if id == "ac1"
        ));
        assert!(!format!("{c:?}").contains("topsecret"));
        let e = CloudConfig::from_clouds_yaml(Path::new("clouds.yaml"), text, "other").unwrap_err();
        assert!(e.to_string().contains("clouds.yaml: clouds.other"), "{e}");
        let bad = "clouds:\n  lab:\n    auth:\n      auth_url: http://k\n      username: u\n";
        let e = CloudConfig::from_clouds_yaml(Path::new("c.yaml"), bad, "lab").unwrap_err();
        assert!(e.to_string().contains("clouds.lab.auth.password"), "{e}");
    }

    #[test]
    fn vim_connection_info_maps_tacker_names() {
        let vim: VimConnectionInfo = serde_json::from_value(serde_json::json!({
            "vimType": "ETSINFV.OPENSTACK_KEYSTONE.V_3",
            "interfaceInfo": {"endpoint": "http://127.0.0.1:5000/v3"},
            "accessInfo": {"username": "nfv_user", "password": "devstack",
                           "project": "nfv", "userDomain": "Default",
                           "projectDomain": "Default", "region": "RegionOne"}
        }))
        .unwrap();
        let c = CloudConfig::from_vim_connection_info(&vim).unwrap();
        assert_eq!(c.region.as_deref(), Some("RegionOne"));
        assert!(matches!(
            &c.credentials,
            Credentials::Password { scope: Some(Scope::ProjectName { name, .. }), .. } if name == "nfv"
        ));
        let mut no_endpoint = vim.clone();
        no_endpoint.interface_info = None;
        let e = CloudConfig::from_vim_connection_info(&no_endpoint).unwrap_err();
        assert!(e.to_string().contains("interfaceInfo.endpoint"), "{e}");
        let mut k8s = vim;
        k8s.vim_type = "kubernetes".into();
        let e = CloudConfig::from_vim_connection_info(&k8s).unwrap_err();
        assert!(e.to_string().contains("vimType"), "{e}");
    }
}
