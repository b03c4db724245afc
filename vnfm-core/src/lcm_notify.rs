//! SOL003 lifecycle change notifications (v3.3.1 clauses 5.4.18–5.4.20, 5.5.2.15–5.5.2.18,
//! 5.5.3.3–5.5.3.5) and SOL013's delivery rules, as pure decisions:
//!
//! - [`LccnSubscriptionRequest`]: the body of `POST /subscriptions`, strict (an unknown member
//!   is refused by the parser), [`LccnSubscriptionRequest::validate`]d (each refusal names its
//!   field);
//! - [`Tracker`]: which state changes a commit of the store makes, i.e. the [`LcmEvent`]s to
//!   notify: a new instance (`VnfIdentifierCreationNotification`), a deleted one
//!   (`VnfIdentifierDeletionNotification`), an occurrence entering a state
//!   (`VnfLcmOperationOccurrenceNotification`, once per `(occurrence, state,
//!   stateEnteredTime)`: a commit that only saves progress notifies nothing);
//! - [`LifecycleChangeNotificationsFilter::matches`]: which subscription gets which event;
//! - [`notification`]: the notification body, with its stable delivery id
//!   ([`notification_id`]: the same event to the same subscription always has the same id);
//! - [`RetryPolicy`]: the bounded exponential back-off of a failed delivery.
//!
//! The server writes the notifications of a commit in the same transaction as the commit (an
//! outbox), and delivers them afterwards; see `docs/serve.md`.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::driver::StoreBatch;
use crate::error::{Error, Location};
use crate::id::{OpOccId, VnfInstanceId};
use crate::lcm::{
    AffectedVnfc, ChangeType, LcmOperationStateType, LcmOperationType, ResourceChanges,
    VnfInstance, VnfLcmOpOcc, VnfcResourceInfo,
};
use crate::lifecycle::grant::{lcm_op_occ_href, vnf_instance_href};

/// The `href` of subscription `id`: `/vnflcm/v2/subscriptions/{id}`.
pub fn subscription_href(id: &str) -> String {
    format!("/vnflcm/v2/subscriptions/{id}")
}

/// SOL003 `notificationTypes` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NotificationType {
    /// An occurrence changed state.
    VnfLcmOperationOccurrenceNotification,
    /// An instance was created.
    VnfIdentifierCreationNotification,
    /// An instance was deleted.
    VnfIdentifierDeletionNotification,
}

/// SOL003 `VnfInstanceSubscriptionFilter` (SOL003 4.4.1.5): every present member must match
/// (each member: one of its values).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VnfInstanceSubscriptionFilter {
    /// `vnfdIds` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnfd_ids: Vec<String>,
    /// `vnfProductsFromProviders` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnf_products_from_providers: Vec<VnfProductsFromProvider>,
    /// `vnfInstanceIds` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnf_instance_ids: Vec<VnfInstanceId>,
    /// `vnfInstanceNames` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnf_instance_names: Vec<String>,
}

/// `vnfProductsFromProviders` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VnfProductsFromProvider {
    /// `vnfProvider` (1)
    pub vnf_provider: String,
    /// `vnfProducts` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnf_products: Vec<VnfProduct>,
}

/// `vnfProducts` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VnfProduct {
    /// `vnfProductName` (1)
    pub vnf_product_name: String,
    /// `versions` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<VnfVersion>,
}

/// `versions` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VnfVersion {
    /// `vnfSoftwareVersion` (1)
    pub vnf_software_version: String,
    /// `vnfdVersions` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnfd_versions: Vec<String>,
}

/// SOL003 `LifecycleChangeNotificationsFilter` (5.5.3.12).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LifecycleChangeNotificationsFilter {
    /// `vnfInstanceSubscriptionFilter` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_instance_subscription_filter: Option<VnfInstanceSubscriptionFilter>,
    /// `notificationTypes` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notification_types: Vec<NotificationType>,
    /// `operationTypes` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operation_types: Vec<LcmOperationType>,
    /// `operationStates` (0..N)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operation_states: Vec<LcmOperationStateType>,
}

/// SOL013 `authType` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AuthType {
    /// HTTP Basic towards the subscriber.
    Basic,
    /// An OAuth 2.0 token from the subscriber's token endpoint (client credentials grant).
    #[serde(rename = "OAUTH2_CLIENT_CREDENTIALS")]
    Oauth2ClientCredentials,
    /// Mutual TLS: the notifications go over HTTPS presenting the VNFM's client certificate
    /// (`callbackUri` must be `https://`).
    TlsCert,
}

/// SOL013 `paramsBasic`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamsBasic {
    /// `userName` (0..1; vnfm requires it)
    #[serde(default)]
    pub user_name: Option<String>,
    /// `password` (0..1; vnfm requires it)
    #[serde(default)]
    pub password: Option<String>,
}

/// SOL013 `paramsOauth2ClientCredentials`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamsOauth2 {
    /// `clientId` (0..1; vnfm requires it)
    #[serde(default)]
    pub client_id: Option<String>,
    /// `clientPassword` (0..1; vnfm requires it)
    #[serde(default)]
    pub client_password: Option<String>,
    /// `tokenEndpoint` (0..1; vnfm requires it): an `http://` or `https://` URI.
    #[serde(default)]
    pub token_endpoint: Option<String>,
}

/// SOL013 `SubscriptionAuthentication` (8.3.4).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubscriptionAuthentication {
    /// `authType` (1..N)
    pub auth_type: Vec<AuthType>,
    /// `paramsBasic` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_basic: Option<ParamsBasic>,
    /// `paramsOauth2ClientCredentials` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_oauth2_client_credentials: Option<ParamsOauth2>,
}

/// How vnfm authenticates towards a subscriber, decided from [`SubscriptionAuthentication`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// No `Authorization` header.
    Plain,
    /// `Authorization: Basic`.
    Basic {
        /// The user.
        user: String,
        /// The password.
        password: String,
    },
    /// `Authorization: Bearer <token>`, the token from `token_endpoint`.
    OAuth2 {
        /// The client id.
        client_id: String,
        /// The client secret.
        client_password: String,
        /// The token endpoint.
        token_endpoint: String,
    },
    /// No `Authorization` header: HTTPS, presenting the VNFM's client certificate (`TLS_CERT`
    /// alone). Whether the VNFM has one is the server's to say.
    TlsCert,
}

/// SOL003 `verbosity` (only `FULL` is sent; `SHORT` is accepted and sends the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verbosity {
    /// Every attribute.
    Full,
    /// The mandatory attributes (vnfm sends FULL).
    Short,
}

/// SOL003 `LccnSubscriptionRequest` (5.5.2.15).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LccnSubscriptionRequest {
    /// `filter` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<LifecycleChangeNotificationsFilter>,
    /// `callbackUri` (1)
    pub callback_uri: String,
    /// `authentication` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<SubscriptionAuthentication>,
    /// `verbosity` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbosity: Option<Verbosity>,
}

/// Why a subscription request is refused.
#[derive(Debug)]
pub enum SubscriptionRefusal {
    /// Malformed (400).
    Bad(Error),
    /// Well-formed, but not what vnfm can do (422).
    Unsupported(Error),
}

fn bad(field: &str, message: impl Into<String>) -> Error {
    Error::invalid(
        Location::file("LccnSubscriptionRequest").with_field(field),
        message,
    )
}

/// Checks an `http://` or `https://` absolute URI with a host; `field` names it.
///
/// # Errors
/// An [`Error::Invalid`] at `field`.
pub fn check_uri(field: &str, uri: &str) -> Result<(), Error> {
    let rest = uri
        .strip_prefix("http://")
        .or_else(|| uri.strip_prefix("https://"))
        .ok_or_else(|| bad(field, format!("{uri:?} is not an http:// or https:// URI")))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains(char::is_whitespace) || host.contains('@') {
        return Err(bad(
            field,
            format!("{uri:?} has no plain host[:port] (user info is not accepted)"),
        ));
    }
    Ok(())
}

impl LccnSubscriptionRequest {
    /// Checks the request (the parser already refused unknown members and bad enum values) and
    /// decides how notifications are authenticated.
    ///
    /// # Errors
    /// [`SubscriptionRefusal::Bad`] for a malformed URI, an `authType` without its parameters,
    /// `operationTypes` / `operationStates` with `notificationTypes` that exclude occurrence
    /// notifications (SOL003 5.5.3.12: "shall be absent"); [`SubscriptionRefusal::Unsupported`]
    /// for `TLS_CERT` alone with a `callbackUri` that is not `https://`.
    pub fn validate(&self) -> Result<Delivery, SubscriptionRefusal> {
        check_uri("callbackUri", &self.callback_uri).map_err(SubscriptionRefusal::Bad)?;
        if let Some(f) = &self.filter {
            let occ = f.notification_types.is_empty()
                || f.notification_types
                    .contains(&NotificationType::VnfLcmOperationOccurrenceNotification);
            if !occ && !f.operation_types.is_empty() {
                return Err(SubscriptionRefusal::Bad(bad(
                    "filter.operationTypes",
                    "present while filter.notificationTypes excludes \
                     VnfLcmOperationOccurrenceNotification (SOL003 5.5.3.12: shall be absent)",
                )));
            }
            if !occ && !f.operation_states.is_empty() {
                return Err(SubscriptionRefusal::Bad(bad(
                    "filter.operationStates",
                    "present while filter.notificationTypes excludes \
                     VnfLcmOperationOccurrenceNotification (SOL003 5.5.3.12: shall be absent)",
                )));
            }
            if let Some(v) = &f.vnf_instance_subscription_filter {
                for (i, p) in v.vnf_products_from_providers.iter().enumerate() {
                    if p.vnf_provider.is_empty() {
                        return Err(SubscriptionRefusal::Bad(bad(
                            &format!(
                                "filter.vnfInstanceSubscriptionFilter.vnfProductsFromProviders[{i}].vnfProvider"
                            ),
                            "empty; expected the provider's name",
                        )));
                    }
                }
            }
        }
        let Some(a) = &self.authentication else {
            return Ok(Delivery::Plain);
        };
        if a.auth_type.is_empty() {
            return Err(SubscriptionRefusal::Bad(bad(
                "authentication.authType",
                "empty; expected one of BASIC, OAUTH2_CLIENT_CREDENTIALS",
            )));
        }
        if a.auth_type.contains(&AuthType::TlsCert) && a.auth_type.len() == 1 {
            if !self.callback_uri.starts_with("https://") {
                return Err(SubscriptionRefusal::Unsupported(bad(
                    "callbackUri",
                    "not https:// while authType is TLS_CERT alone (the client certificate is \
                     presented in a TLS handshake); expected an https:// URI, or BASIC or \
                     OAUTH2_CLIENT_CREDENTIALS",
                )));
            }
            return Ok(Delivery::TlsCert);
        }
        // OAuth2 first when both are offered (SOL013 recommends it over Basic).
        if a.auth_type.contains(&AuthType::Oauth2ClientCredentials) {
            let p = a.params_oauth2_client_credentials.as_ref().ok_or_else(|| {
                SubscriptionRefusal::Bad(bad(
                    "authentication.paramsOauth2ClientCredentials",
                    "absent while authType is OAUTH2_CLIENT_CREDENTIALS",
                ))
            })?;
            let need = |v: &Option<String>, name: &str| {
                v.clone().filter(|s| !s.is_empty()).ok_or_else(|| {
                    SubscriptionRefusal::Bad(bad(
                        &format!("authentication.paramsOauth2ClientCredentials.{name}"),
                        "absent or empty; vnfm needs it to fetch a token",
                    ))
                })
            };
            let client_id = need(&p.client_id, "clientId")?;
            let client_password = need(&p.client_password, "clientPassword")?;
            let token_endpoint = need(&p.token_endpoint, "tokenEndpoint")?;
            check_uri(
                "authentication.paramsOauth2ClientCredentials.tokenEndpoint",
                &token_endpoint,
            )
            .map_err(SubscriptionRefusal::Bad)?;
            return Ok(Delivery::OAuth2 {
                client_id,
                client_password,
                token_endpoint,
            });
        }
        let p = a.params_basic.as_ref().ok_or_else(|| {
            SubscriptionRefusal::Bad(bad(
                "authentication.paramsBasic",
                "absent while authType is BASIC",
            ))
        })?;
        let need = |v: &Option<String>, name: &str| {
            v.clone().ok_or_else(|| {
                SubscriptionRefusal::Bad(bad(
                    &format!("authentication.paramsBasic.{name}"),
                    "absent; vnfm needs it to authenticate towards the subscriber",
                ))
            })
        };
        Ok(Delivery::Basic {
            user: need(&p.user_name, "userName")?,
            password: need(&p.password, "password")?,
        })
    }

    /// Whether `other` asks for the same notifications at the same place (same callback and
    /// filter): SOL003 5.4.18.3.1 lets the VNFM answer 303 See Other to it. Compares in place
    /// (no copy of either filter: the server compares a new request with every subscription).
    pub fn same_as(&self, other: &LccnSubscriptionRequest) -> bool {
        let empty = LifecycleChangeNotificationsFilter::default();
        self.callback_uri == other.callback_uri
            && self.filter.as_ref().unwrap_or(&empty) == other.filter.as_ref().unwrap_or(&empty)
    }

    /// Checks the request against the server's size bounds (see [`SubscriptionLimits`]): every
    /// list (a filter's `vnfInstanceIds`, `authType`, ...) has at most `max_list_len` values,
    /// every string (an id, a name, a URI, a credential) at most `max_string_len` characters,
    /// and the request as stored (JSON) at most `max_bytes` bytes. A subscription is kept for
    /// as long as it exists and compared and filtered at every state change: what the server
    /// keeps must be bounded by size, not only by count.
    ///
    /// # Errors
    /// The first bound exceeded, with the path of the member ([`TooLarge`]).
    pub fn check_limits(&self, limits: &SubscriptionLimits) -> Result<(), TooLarge> {
        let v = serde_json::to_value(self).unwrap_or(Value::Null);
        check_value(&v, &mut String::new(), limits)?;
        let bytes = serde_json::to_vec(self).map(|b| b.len()).unwrap_or(0);
        if bytes > limits.max_bytes {
            return Err(TooLarge {
                field: "LccnSubscriptionRequest".into(),
                limit: Limit::Bytes,
                found: bytes,
                max: limits.max_bytes,
            });
        }
        Ok(())
    }
}

/// The size bounds of one subscription ([`LccnSubscriptionRequest::check_limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriptionLimits {
    /// Values at most in one list of the request (default 256).
    pub max_list_len: usize,
    /// Characters at most in one string of the request (default 2048).
    pub max_string_len: usize,
    /// Bytes at most of the whole request as JSON (default 32768).
    pub max_bytes: usize,
}

impl Default for SubscriptionLimits {
    fn default() -> Self {
        Self {
            max_list_len: 256,
            max_string_len: 2048,
            max_bytes: 32 * 1024,
        }
    }
}

/// Which bound of [`SubscriptionLimits`] a request exceeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// [`SubscriptionLimits::max_list_len`].
    ListLength,
    /// [`SubscriptionLimits::max_string_len`].
    StringLength,
    /// [`SubscriptionLimits::max_bytes`].
    Bytes,
}

/// A request beyond a bound of [`SubscriptionLimits`]: where, which bound, what it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TooLarge {
    /// The member's path (`filter.vnfInstanceSubscriptionFilter.vnfInstanceIds`,
    /// `callbackUri`, `LccnSubscriptionRequest` for the whole request).
    pub field: String,
    /// The bound.
    pub limit: Limit,
    /// What the request has (values, characters or bytes).
    pub found: usize,
    /// The bound's value.
    pub max: usize,
}

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let TooLarge {
            field, found, max, ..
        } = self;
        match self.limit {
            Limit::ListLength => write!(
                f,
                "{field} has {found} values; a subscription keeps at most {max} per list"
            ),
            Limit::StringLength => write!(
                f,
                "{field} is {found} characters long; a subscription keeps at most {max} per \
                 value"
            ),
            Limit::Bytes => write!(
                f,
                "the subscription is {found} bytes as JSON; a subscription keeps at most {max}"
            ),
        }
    }
}

fn check_value(v: &Value, path: &mut String, limits: &SubscriptionLimits) -> Result<(), TooLarge> {
    let too = |path: &str, limit, found, max| TooLarge {
        field: path.to_owned(),
        limit,
        found,
        max,
    };
    match v {
        Value::String(s) => {
            let n = s.chars().count();
            if n > limits.max_string_len {
                return Err(too(path, Limit::StringLength, n, limits.max_string_len));
            }
        }
        Value::Array(a) => {
            if a.len() > limits.max_list_len {
                return Err(too(path, Limit::ListLength, a.len(), limits.max_list_len));
            }
            let len = path.len();
            for (i, x) in a.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                check_value(x, path, limits)?;
                path.truncate(len);
            }
        }
        Value::Object(o) => {
            let len = path.len();
            for (k, x) in o {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                check_value(x, path, limits)?;
                path.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

/// SOL003 `LccnSubscription` (5.5.2.16) as answered: never the credentials.
pub fn subscription_body(id: &str, req: &LccnSubscriptionRequest) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(id));
    if let Some(f) = &req.filter {
        o.insert(
            "filter".into(),
            serde_json::to_value(f).unwrap_or(Value::Null),
        );
    }
    o.insert("callbackUri".into(), json!(req.callback_uri));
    o.insert(
        "verbosity".into(),
        serde_json::to_value(req.verbosity.unwrap_or(Verbosity::Full)).unwrap_or(Value::Null),
    );
    o.insert(
        "_links".into(),
        json!({"self": {"href": subscription_href(id)}}),
    );
    Value::Object(o)
}

/// What a notification says about its instance (the filter's facts, kept at the time of the
/// event: a deleted instance is no longer in the store).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceFacts {
    /// `id`
    pub id: VnfInstanceId,
    /// `vnfInstanceName`
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `vnfdId`
    pub vnfd_id: String,
    /// `vnfProvider`
    pub vnf_provider: String,
    /// `vnfProductName`
    pub vnf_product_name: String,
    /// `vnfSoftwareVersion`
    pub vnf_software_version: String,
    /// `vnfdVersion`
    pub vnfd_version: String,
}

impl InstanceFacts {
    /// The facts of `i`.
    pub fn of(i: &VnfInstance) -> Self {
        Self {
            id: i.id.clone(),
            name: i.vnf_instance_name.clone(),
            vnfd_id: i.vnfd_id.clone(),
            vnf_provider: i.vnf_provider.clone(),
            vnf_product_name: i.vnf_product_name.clone(),
            vnf_software_version: i.vnf_software_version.clone(),
            vnfd_version: i.vnfd_version.clone(),
        }
    }

    /// Facts of an instance known only by id (its record is gone).
    pub fn id_only(id: &VnfInstanceId) -> Self {
        Self {
            id: id.clone(),
            ..Self::default()
        }
    }
}

/// A state change to notify.
#[derive(Clone, Debug, PartialEq)]
pub enum LcmEvent {
    /// An occurrence entered `op.operation_state` (the occurrence as committed).
    OpOcc {
        /// The occurrence.
        op: Box<VnfLcmOpOcc>,
        /// Its instance.
        instance: InstanceFacts,
    },
    /// An instance was created.
    Created {
        /// The instance.
        instance: InstanceFacts,
        /// When (the commit's `now`).
        at: DateTime<Utc>,
    },
    /// An instance was deleted.
    Deleted {
        /// The instance.
        instance: InstanceFacts,
        /// When.
        at: DateTime<Utc>,
    },
}

fn nanos(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

impl LcmEvent {
    /// The notification type.
    pub fn kind(&self) -> NotificationType {
        match self {
            LcmEvent::OpOcc { .. } => NotificationType::VnfLcmOperationOccurrenceNotification,
            LcmEvent::Created { .. } => NotificationType::VnfIdentifierCreationNotification,
            LcmEvent::Deleted { .. } => NotificationType::VnfIdentifierDeletionNotification,
        }
    }

    /// The instance.
    pub fn instance(&self) -> &InstanceFacts {
        match self {
            LcmEvent::OpOcc { instance, .. }
            | LcmEvent::Created { instance, .. }
            | LcmEvent::Deleted { instance, .. } => instance,
        }
    }

    /// A key that is the same for one state change and differs for any other:
    /// `<opOccId>:<STATE>:<stateEnteredTime>`, `<vnfInstanceId>:CREATED`,
    /// `<vnfInstanceId>:DELETED`.
    pub fn key(&self) -> String {
        match self {
            LcmEvent::OpOcc { op, .. } => format!(
                "{}:{}:{}",
                op.id,
                op.operation_state,
                nanos(&op.state_entered_time)
            ),
            LcmEvent::Created { instance, .. } => format!("{}:CREATED", instance.id),
            LcmEvent::Deleted { instance, .. } => format!("{}:DELETED", instance.id),
        }
    }
}

fn one_of<T: PartialEq>(wanted: &[T], v: &T) -> bool {
    wanted.is_empty() || wanted.contains(v)
}

impl VnfInstanceSubscriptionFilter {
    /// Whether the instance passes the filter.
    pub fn matches(&self, i: &InstanceFacts) -> bool {
        let product = self.vnf_products_from_providers.is_empty()
            || self.vnf_products_from_providers.iter().any(|p| {
                p.vnf_provider == i.vnf_provider
                    && (p.vnf_products.is_empty()
                        || p.vnf_products.iter().any(|pr| {
                            pr.vnf_product_name == i.vnf_product_name
                                && (pr.versions.is_empty()
                                    || pr.versions.iter().any(|v| {
                                        v.vnf_software_version == i.vnf_software_version
                                            && one_of(&v.vnfd_versions, &i.vnfd_version)
                                    }))
                        }))
            });
        let named = self.vnf_instance_names.is_empty()
            || i.name
                .as_ref()
                .is_some_and(|n| self.vnf_instance_names.contains(n));
        one_of(&self.vnfd_ids, &i.vnfd_id)
            && one_of(&self.vnf_instance_ids, &i.id)
            && named
            && product
    }
}

impl LifecycleChangeNotificationsFilter {
    /// Whether `e` passes the filter (every present member matches; SOL013 5.2).
    pub fn matches(&self, e: &LcmEvent) -> bool {
        if !one_of(&self.notification_types, &e.kind()) {
            return false;
        }
        if let Some(f) = &self.vnf_instance_subscription_filter {
            if !f.matches(e.instance()) {
                return false;
            }
        }
        match e {
            LcmEvent::OpOcc { op, .. } => {
                one_of(&self.operation_types, &op.operation)
                    && one_of(&self.operation_states, &op.operation_state)
            }
            _ => true,
        }
    }
}

/// The delivery id of `e` to subscription `subscription`: `<subscription>:<event key>`, the
/// same at every attempt and after a restart.
pub fn notification_id(subscription: &str, e: &LcmEvent) -> String {
    format!("{subscription}:{}", e.key())
}

/// SOL003 `notificationStatus`: START for `STARTING`, `PROCESSING` and `ROLLING_BACK`, RESULT
/// for the other states (final or intermediate results, `FAILED_TEMP` included).
pub fn notification_status(s: LcmOperationStateType) -> &'static str {
    use LcmOperationStateType as S;
    match s {
        S::Starting | S::Processing | S::RollingBack => "START",
        S::Completed | S::FailedTemp | S::Failed | S::RolledBack => "RESULT",
    }
}

/// The notification body of `e` for `subscription` (SOL003 5.5.2.17 / 5.5.2.18 / 5.5.2.19),
/// at `now`. A `RESULT` carries the occurrence's `affectedVnfcs`, `affectedVirtualLinks`,
/// `affectedExtLinkPorts`, `affectedVirtualStorages`, `changedInfo`, `changedExtConnectivity`
/// and `error` as far as it has them.
pub fn notification(subscription: &str, e: &LcmEvent, now: DateTime<Utc>) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(notification_id(subscription, e)));
    o.insert(
        "notificationType".into(),
        serde_json::to_value(e.kind()).unwrap_or(Value::Null),
    );
    o.insert("subscriptionId".into(), json!(subscription));
    o.insert("timeStamp".into(), json!(nanos(&now)));
    let inst = &e.instance().id;
    let mut links = Map::new();
    links.insert(
        "vnfInstance".into(),
        json!({"href": vnf_instance_href(inst)}),
    );
    links.insert(
        "subscription".into(),
        json!({"href": subscription_href(subscription)}),
    );
    match e {
        LcmEvent::OpOcc { op, .. } => {
            let state = op.operation_state;
            o.insert(
                "notificationStatus".into(),
                json!(notification_status(state)),
            );
            o.insert(
                "operationState".into(),
                serde_json::to_value(state).unwrap_or(Value::Null),
            );
            o.insert("vnfInstanceId".into(), json!(inst));
            o.insert(
                "operation".into(),
                serde_json::to_value(op.operation).unwrap_or(Value::Null),
            );
            o.insert(
                "isAutomaticInvocation".into(),
                json!(op.is_automatic_invocation),
            );
            o.insert("verbosity".into(), json!("FULL"));
            o.insert("vnfLcmOpOccId".into(), json!(op.id));
            if notification_status(state) == "RESULT" {
                if let Some(rc) = &op.resource_changes {
                    let put = |o: &mut Map<String, Value>, k: &str, v: Value| {
                        if v.as_array().is_some_and(|a| !a.is_empty()) {
                            o.insert(k.into(), v);
                        }
                    };
                    put(
                        &mut o,
                        "affectedVnfcs",
                        serde_json::to_value(&rc.affected_vnfcs).unwrap_or(Value::Null),
                    );
                    put(
                        &mut o,
                        "affectedVirtualLinks",
                        json!(rc.affected_virtual_links),
                    );
                    put(
                        &mut o,
                        "affectedExtLinkPorts",
                        json!(rc.affected_ext_link_ports),
                    );
                    put(
                        &mut o,
                        "affectedVirtualStorages",
                        json!(rc.affected_virtual_storages),
                    );
                }
                if let Some(c) = &op.changed_info {
                    o.insert("changedInfo".into(), c.clone());
                }
                if !op.changed_ext_connectivity.is_empty() {
                    o.insert(
                        "changedExtConnectivity".into(),
                        json!(op.changed_ext_connectivity),
                    );
                }
                if let Some(err) = &op.error {
                    o.insert(
                        "error".into(),
                        serde_json::to_value(err).unwrap_or(Value::Null),
                    );
                }
            }
            links.insert(
                "vnfLcmOpOcc".into(),
                json!({"href": lcm_op_occ_href(&op.id)}),
            );
        }
        LcmEvent::Created { .. } | LcmEvent::Deleted { .. } => {
            o.insert("vnfInstanceId".into(), json!(inst));
        }
    }
    o.insert("_links".into(), Value::Object(links));
    Value::Object(o)
}

/// The last state seen of every occurrence: what a commit changes.
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    last: BTreeMap<OpOccId, (VnfInstanceId, LcmOperationStateType, DateTime<Utc>)>,
    /// The VNFCs of an instance when its running occurrence started (seen by this process):
    /// what a result's `affectedVnfcs` is the difference from.
    before: BTreeMap<OpOccId, Vec<VnfcResourceInfo>>,
}

fn vnfcs(i: &VnfInstance) -> Vec<VnfcResourceInfo> {
    i.instantiated_vnf_info
        .as_ref()
        .map(|v| v.vnfc_resource_info.clone())
        .unwrap_or_default()
}

/// `affectedVnfcs` from the VNFCs before and after an operation: a VNFC only after is
/// `ADDED`, only before `REMOVED`, on another compute resource `MODIFIED` (a heal's new
/// server).
pub fn affected_vnfcs(
    before: &[VnfcResourceInfo],
    after: &[VnfcResourceInfo],
) -> Vec<AffectedVnfc> {
    let entry = |v: &VnfcResourceInfo, change_type: ChangeType| AffectedVnfc {
        id: v.id.clone(),
        vdu_id: v.vdu_id.clone(),
        vnfd_id: v.vnfd_id.clone(),
        change_type,
        compute_resource: v.compute_resource.clone(),
        resource_definition_id: None,
        zone_id: v.zone_id.clone(),
        metadata: v.metadata.clone(),
        affected_vnfc_cp_ids: Vec::new(),
        added_storage_resource_ids: Vec::new(),
        removed_storage_resource_ids: Vec::new(),
    };
    let mut out = Vec::new();
    for a in after {
        match before.iter().find(|b| b.id == a.id) {
            None => out.push(entry(a, ChangeType::Added)),
            Some(b) if b.compute_resource.resource_id != a.compute_resource.resource_id => {
                out.push(entry(a, ChangeType::Modified));
            }
            Some(_) => {}
        }
    }
    for b in before {
        if !after.iter().any(|a| a.id == b.id) {
            out.push(entry(b, ChangeType::Removed));
        }
    }
    out
}

impl Tracker {
    /// A tracker that knows `ops` (as stored): their current states were notified already.
    pub fn new(ops: &[VnfLcmOpOcc]) -> Self {
        let mut t = Self::default();
        for op in ops {
            t.last.insert(
                op.id.clone(),
                (
                    op.vnf_instance_id.clone(),
                    op.operation_state,
                    op.state_entered_time,
                ),
            );
        }
        t
    }

    /// The events of committing `batch` at `now`, in order: instance creations, the occurrences'
    /// state changes (in the batch's order), then deletions. `known` gives the instance as
    /// stored before the batch (`None`: it does not exist yet). Pure: record the batch with
    /// [`Tracker::record`] once it is committed.
    pub fn events(
        &self,
        batch: &StoreBatch,
        known: &dyn Fn(&VnfInstanceId) -> Option<VnfInstance>,
        now: DateTime<Utc>,
    ) -> Vec<LcmEvent> {
        let mut out = Vec::new();
        let mut facts: BTreeMap<VnfInstanceId, InstanceFacts> = BTreeMap::new();
        for i in &batch.put_instances {
            if known(&i.id).is_none() && !facts.contains_key(&i.id) {
                out.push(LcmEvent::Created {
                    instance: InstanceFacts::of(i),
                    at: now,
                });
            }
            facts.insert(i.id.clone(), InstanceFacts::of(i));
        }
        let mut seen = self.last.clone();
        for op in &batch.put_op_occs {
            let now_key = (op.operation_state, op.state_entered_time);
            let changed = seen.get(&op.id).is_none_or(|(_, s, t)| (*s, *t) != now_key);
            if !changed {
                continue;
            }
            seen.insert(
                op.id.clone(),
                (
                    op.vnf_instance_id.clone(),
                    op.operation_state,
                    op.state_entered_time,
                ),
            );
            let instance = facts
                .get(&op.vnf_instance_id)
                .cloned()
                .or_else(|| known(&op.vnf_instance_id).as_ref().map(InstanceFacts::of))
                .unwrap_or_else(|| InstanceFacts::id_only(&op.vnf_instance_id));
            let mut op = op.clone();
            // A result without resourceChanges gets the VNFCs' difference since the start.
            let result = notification_status(op.operation_state) == "RESULT";
            if let (true, None, Some(before)) =
                (result, &op.resource_changes, self.before.get(&op.id))
            {
                let after = batch
                    .put_instances
                    .iter()
                    .rev()
                    .find(|i| i.id == op.vnf_instance_id)
                    .cloned()
                    .or_else(|| known(&op.vnf_instance_id));
                if let Some(after) = after {
                    let affected = affected_vnfcs(before, &vnfcs(&after));
                    if !affected.is_empty() {
                        op.resource_changes = Some(ResourceChanges {
                            affected_vnfcs: affected,
                            ..ResourceChanges::default()
                        });
                    }
                }
            }
            out.push(LcmEvent::OpOcc {
                op: Box::new(op),
                instance,
            });
        }
        for id in &batch.delete_instances {
            let instance = facts
                .get(id)
                .cloned()
                .or_else(|| known(id).as_ref().map(InstanceFacts::of));
            if let Some(instance) = instance {
                out.push(LcmEvent::Deleted { instance, at: now });
            }
        }
        out
    }

    /// Records a committed batch: its occurrences' states, and the VNFCs of the instance of
    /// an occurrence that starts (`known`: the instances as stored before the batch); a
    /// deleted instance's occurrences are forgotten (the store deleted them with it).
    /// Returns the indices (in `batch.put_op_occs`) of the occurrences that changed state: a
    /// commit that only saves progress or renews a lease changes none.
    pub fn record(
        &mut self,
        batch: &StoreBatch,
        known: &dyn Fn(&VnfInstanceId) -> Option<VnfInstance>,
    ) -> Vec<usize> {
        for op in &batch.put_op_occs {
            let starts = op.operation_state == LcmOperationStateType::Starting
                && !self.before.contains_key(&op.id);
            if starts {
                let v = known(&op.vnf_instance_id)
                    .map(|i| vnfcs(&i))
                    .unwrap_or_default();
                self.before.insert(op.id.clone(), v);
            }
            if op.is_terminal() {
                self.before.remove(&op.id);
            }
        }
        let mut changed = Vec::new();
        for (n, op) in batch.put_op_occs.iter().enumerate() {
            let key = (op.operation_state, op.state_entered_time);
            let was = self.last.insert(
                op.id.clone(),
                (
                    op.vnf_instance_id.clone(),
                    op.operation_state,
                    op.state_entered_time,
                ),
            );
            if was.is_none_or(|(_, s, t)| (s, t) != key) {
                changed.push(n);
            }
            // An ended occurrence is never stored again: forgotten, so that the tracker holds
            // the running and FAILED_TEMP ones only, not the history of a long-lived instance
            // (found by the soak: it grew with every heal and scale).
            if op.is_terminal() {
                self.last.remove(&op.id);
            }
        }
        for id in &batch.delete_instances {
            self.last.retain(|_, (i, _, _)| i != id);
            self.before.retain(|op, _| self.last.contains_key(op));
        }
        changed
    }
}

/// The bounded exponential back-off of a delivery: attempt `n` (1-based) that failed waits
/// `min(initial * 2^(n-1), max_delay)` before the next, until `max_attempts` attempts were made
/// or the notification is older than `max_age`; then it is dropped (and counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The wait after the first failed attempt.
    pub initial: Duration,
    /// The longest wait.
    pub max_delay: Duration,
    /// Attempts at most (at least 1).
    pub max_attempts: u32,
    /// The age (since the state change) after which a notification is dropped.
    pub max_age: Duration,
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Try again after this wait.
    After(Duration),
    /// Give up: every attempt was made.
    DropAttempts,
    /// Give up: the notification is too old.
    DropAge,
}

impl RetryPolicy {
    /// What follows attempt `attempts` (1-based) that failed, for a notification of age `age`.
    pub fn after_failure(&self, attempts: u32, age: Duration) -> Retry {
        if attempts >= self.max_attempts {
            return Retry::DropAttempts;
        }
        let shift = attempts.saturating_sub(1).min(31);
        let wait = self
            .initial
            .checked_mul(1u32 << shift)
            .unwrap_or(self.max_delay)
            .min(self.max_delay);
        if age.saturating_add(wait) > self.max_age {
            return Retry::DropAge;
        }
        Retry::After(wait)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::lcm::LcmOperationStateType as S;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn inst(id: &str) -> VnfInstance {
        VnfInstance {
            id: id.into(),
            vnfd_id: "vnfd-a".into(),
            vnf_provider: "Acme".into(),
            vnf_product_name: "fw".into(),
            vnf_software_version: "1.0".into(),
            vnfd_version: "1".into(),
            vnf_instance_name: Some("edge".into()),
            ..VnfInstance::default()
        }
    }

    fn op(id: &str, i: &str, s: S, at: i64) -> VnfLcmOpOcc {
        let mut o = VnfLcmOpOcc::new(id, i, LcmOperationType::Instantiate, t(0));
        o.enter(s, t(at));
        o
    }

    fn req(v: Value) -> Result<LccnSubscriptionRequest, serde_json::Error> {
        serde_json::from_value(v)
    }

    #[test]
    fn a_request_is_strict_and_each_refusal_names_its_field() {
        let e = req(json!({"callbackUri": "http://a/x", "filtre": {}})).unwrap_err();
        assert!(e.to_string().contains("filtre"), "{e}");
        let e = req(json!({"callbackUri": "http://a/x",
            "filter": {"vnfInstanceSubscriptionFilter": {"vnfdId": ["x"]}}}))
        .unwrap_err();
        assert!(e.to_string().contains("vnfdId"), "{e}");
        let e = req(json!({"callbackUri": "http://a", "filter": {"operationStates": ["DONE"]}}))
            .unwrap_err();
        assert!(e.to_string().contains("DONE"), "{e}");

        let field = |v: Value| match req(v).unwrap().validate() {
            Err(SubscriptionRefusal::Bad(Error::Invalid { location, .. })) => {
                location.field.unwrap()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(field(json!({"callbackUri": "ftp://a"})), "callbackUri");
        assert_eq!(field(json!({"callbackUri": "http:///x"})), "callbackUri");
        assert_eq!(
            field(json!({"callbackUri": "http://a", "filter": {
                "notificationTypes": ["VnfIdentifierCreationNotification"],
                "operationTypes": ["HEAL"]}})),
            "filter.operationTypes"
        );
        assert_eq!(
            field(json!({"callbackUri": "http://a", "authentication": {"authType": ["BASIC"]}})),
            "authentication.paramsBasic"
        );
        assert_eq!(
            field(json!({"callbackUri": "http://a", "authentication": {
                "authType": ["OAUTH2_CLIENT_CREDENTIALS"],
                "paramsOauth2ClientCredentials": {"clientId": "c", "clientPassword": "p"}}})),
            "authentication.paramsOauth2ClientCredentials.tokenEndpoint"
        );
        assert!(matches!(
            req(json!({"callbackUri": "http://a", "authentication": {"authType": ["TLS_CERT"]}}))
                .unwrap()
                .validate(),
            Err(SubscriptionRefusal::Unsupported(_))
        ));
        assert_eq!(
            req(json!({"callbackUri": "https://a", "authentication": {"authType": ["TLS_CERT"]}}))
                .unwrap()
                .validate()
                .unwrap(),
            Delivery::TlsCert
        );
        assert_eq!(
            req(
                json!({"callbackUri": "http://a", "authentication": {"authType": ["BASIC"],
                "paramsBasic": {"userName": "u", "password": "p"}}})
            )
            .unwrap()
            .validate()
            .ok()
            .unwrap(),
            Delivery::Basic {
                user: "u".into(),
                password: "p".into()
            }
        );
        assert_eq!(
            req(json!({"callbackUri": "https://nfvo:8443/cb"}))
                .unwrap()
                .validate()
                .ok()
                .unwrap(),
            Delivery::Plain
        );
    }

    #[test]
    fn subscriptions_capped_by_size_name_the_member_and_the_bound() {
        let l = SubscriptionLimits {
            max_list_len: 3,
            max_string_len: 20,
            max_bytes: 200,
        };
        let ok = req(json!({"callbackUri": "http://a/x",
            "filter": {"vnfInstanceSubscriptionFilter": {"vnfInstanceIds": ["a", "b", "c"]}}}))
        .unwrap();
        assert_eq!(ok.check_limits(&l), Ok(()));
        let e = req(json!({"callbackUri": "http://a/x",
            "filter": {"vnfInstanceSubscriptionFilter": {"vnfInstanceIds": ["a", "b", "c", "d"]}}}))
        .unwrap()
        .check_limits(&l)
        .unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.limit, e.found, e.max),
            (
                "filter.vnfInstanceSubscriptionFilter.vnfInstanceIds",
                Limit::ListLength,
                4,
                3
            )
        );
        assert!(e.to_string().contains("has 4 values"), "{e}");
        // Lists of enumerations count too (a value may be repeated).
        let e = req(json!({"callbackUri": "http://a/x",
            "filter": {"operationStates": ["STARTING", "STARTING", "STARTING", "STARTING"]}}))
        .unwrap()
        .check_limits(&l)
        .unwrap_err();
        assert_eq!(e.field, "filter.operationStates");
        let e = req(json!({"callbackUri": "http://a/x",
            "filter": {"vnfInstanceSubscriptionFilter": {"vnfProductsFromProviders": [
                {"vnfProvider": "a-provider-named-at-length"}]}}}))
        .unwrap()
        .check_limits(&l)
        .unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.limit),
            (
                "filter.vnfInstanceSubscriptionFilter.vnfProductsFromProviders[0].vnfProvider",
                Limit::StringLength
            )
        );
        let e = req(json!({"callbackUri": format!("http://a/{}", "x".repeat(30))}))
            .unwrap()
            .check_limits(&l)
            .unwrap_err();
        assert_eq!((e.field.as_str(), e.found), ("callbackUri", 39));
        // Every member within its bound, the whole beyond.
        let e = req(json!({"callbackUri": "http://a/x", "filter": {
            "vnfInstanceSubscriptionFilter": {"vnfdIds": ["aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbb", "c"],
                "vnfInstanceIds": ["aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbb", "c"],
                "vnfInstanceNames": ["aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbb", "c"]}}}))
        .unwrap()
        .check_limits(&l)
        .unwrap_err();
        assert_eq!(e.limit, Limit::Bytes);
        assert!(e.found > 200, "{e}");
    }

    #[test]
    fn a_duplicate_is_the_same_callback_and_filter() {
        let a = req(json!({"callbackUri": "http://a/x", "filter": {}})).unwrap();
        let b = req(json!({"callbackUri": "http://a/x", "verbosity": "SHORT"})).unwrap();
        let c = req(json!({"callbackUri": "http://a/x", "filter": {"operationTypes": ["HEAL"]}}))
            .unwrap();
        assert!(a.same_as(&b));
        assert!(!a.same_as(&c));
    }

    #[test]
    fn a_commit_notifies_each_state_change_once_and_progress_not_at_all() {
        let mut tr = Tracker::new(&[]);
        let known = |_: &VnfInstanceId| None;
        let mut b = StoreBatch::new();
        b.put_instances.push(inst("i"));
        let ev = tr.events(&b, &known, t(0));
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].key(), "i:CREATED");
        tr.record(&b, &known);
        let known = |id: &VnfInstanceId| (id.as_str() == "i").then(|| inst("i"));
        let mut b = StoreBatch::new();
        b.put_op_occs.push(op("o", "i", S::Starting, 1));
        let ev = tr.events(&b, &known, t(1));
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].instance().vnfd_id, "vnfd-a", "facts from the store");
        assert_eq!(tr.record(&b, &known), [0]);
        // Saving progress in the same state notifies nothing; a new state does.
        assert!(tr.events(&b, &known, t(2)).is_empty());
        assert!(tr.record(&b, &known).is_empty(), "no state change to count");
        let mut b = StoreBatch::new();
        b.put_op_occs.push(op("o", "i", S::Processing, 2));
        b.put_op_occs.push(op("o", "i", S::Processing, 2));
        b.put_op_occs.push(op("o", "i", S::Completed, 3));
        let ev = tr.events(&b, &known, t(3));
        assert_eq!(ev.len(), 2, "{ev:?}");
        // record says which of the batch changed state (what the metrics count)
        assert_eq!(tr.record(&b, &known), [0, 2]);
        assert!(tr.last.is_empty(), "an ended occurrence is forgotten");
        // A re-entered state (a retry after FAILED_TEMP) is a new change.
        let mut b = StoreBatch::new();
        b.put_op_occs.push(op("o", "i", S::Processing, 9));
        assert_eq!(tr.events(&b, &known, t(9)).len(), 1);
        tr.record(&b, &known);
        assert_eq!(tr.last.len(), 1, "a running occurrence is kept");
        let mut b = StoreBatch::new();
        b.delete_instances.push("i".into());
        let ev = tr.events(&b, &known, t(10));
        assert_eq!(ev[0].key(), "i:DELETED");
        assert_eq!(ev[0].instance().name.as_deref(), Some("edge"));
        tr.record(&b, &known);
        assert!(
            tr.last.is_empty(),
            "a deleted instance's occurrences are forgotten"
        );
    }

    #[test]
    fn filters_match_every_present_member() {
        let e = LcmEvent::OpOcc {
            op: Box::new(op("o", "i", S::Completed, 1)),
            instance: InstanceFacts::of(&inst("i")),
        };
        let created = LcmEvent::Created {
            instance: InstanceFacts::of(&inst("i")),
            at: t(0),
        };
        let f = |v: Value| serde_json::from_value::<LifecycleChangeNotificationsFilter>(v).unwrap();
        assert!(f(json!({})).matches(&e));
        assert!(
            f(json!({"operationTypes": ["INSTANTIATE"], "operationStates": ["COMPLETED"]}))
                .matches(&e)
        );
        assert!(!f(json!({"operationStates": ["FAILED_TEMP"]})).matches(&e));
        assert!(
            f(json!({"operationStates": ["FAILED_TEMP"]})).matches(&created),
            "creations have no state"
        );
        assert!(
            !f(json!({"notificationTypes": ["VnfIdentifierDeletionNotification"]}))
                .matches(&created)
        );
        assert!(f(json!({"vnfInstanceSubscriptionFilter": {"vnfdIds": ["vnfd-a"], "vnfInstanceNames": ["edge"]}})).matches(&e));
        assert!(
            !f(json!({"vnfInstanceSubscriptionFilter": {"vnfInstanceIds": ["other"]}})).matches(&e)
        );
        assert!(f(
            json!({"vnfInstanceSubscriptionFilter": {"vnfProductsFromProviders": [
            {"vnfProvider": "Acme", "vnfProducts": [{"vnfProductName": "fw",
              "versions": [{"vnfSoftwareVersion": "1.0", "vnfdVersions": ["1"]}]}]}]}})
        )
        .matches(&e));
        assert!(!f(
            json!({"vnfInstanceSubscriptionFilter": {"vnfProductsFromProviders": [
            {"vnfProvider": "Acme", "vnfProducts": [{"vnfProductName": "router"}]}]}})
        )
        .matches(&e));
    }

    #[test]
    fn notifications_have_stable_ids_status_and_links() {
        let mut o = op("o", "i", S::Completed, 1);
        o.resource_changes = Some(crate::lcm::ResourceChanges::default());
        let e = LcmEvent::OpOcc {
            op: Box::new(o),
            instance: InstanceFacts::of(&inst("i")),
        };
        let n = notification("s1", &e, t(5));
        let again = notification("s1", &e, t(50));
        assert_eq!(
            n["id"], again["id"],
            "the same change has the same id at every attempt"
        );
        assert_ne!(n["id"], notification("s2", &e, t(5))["id"]);
        assert_eq!(n["notificationStatus"], "RESULT");
        assert_eq!(n["operationState"], "COMPLETED");
        assert_eq!(
            n["_links"]["vnfLcmOpOcc"]["href"],
            "/vnflcm/v2/vnf_lcm_op_occs/o"
        );
        assert_eq!(
            n["_links"]["subscription"]["href"],
            "/vnflcm/v2/subscriptions/s1"
        );
        let s = notification(
            "s1",
            &LcmEvent::OpOcc {
                op: Box::new(op("o", "i", S::Starting, 0)),
                instance: InstanceFacts::id_only(&"i".into()),
            },
            t(0),
        );
        assert_eq!(s["notificationStatus"], "START");
        assert_ne!(s["id"], n["id"]);
    }

    #[test]
    fn affected_vnfcs_are_the_difference_of_the_vnfcs() {
        let v = |id: &str, server: &str| -> VnfcResourceInfo {
            serde_json::from_value(json!({"id": id, "vduId": "VDU1",
                "computeResource": {"resourceId": server}}))
            .unwrap()
        };
        let before = [v("a", "s1"), v("b", "s2")];
        let after = [v("a", "s1"), v("b", "s9"), v("c", "s3")];
        let got: Vec<(String, ChangeType)> = affected_vnfcs(&before, &after)
            .into_iter()
            .map(|a| (a.id, a.change_type))
            .collect();
        assert_eq!(
            got,
            [
                ("b".into(), ChangeType::Modified),
                ("c".into(), ChangeType::Added)
            ]
        );
        let gone = affected_vnfcs(&after, &[]);
        assert!(gone.iter().all(|a| a.change_type == ChangeType::Removed) && gone.len() == 3);
    }

    #[test]
    fn back_off_doubles_up_to_its_cap_and_gives_up_at_the_bounds() {
        let p = RetryPolicy {
            initial: Duration::from_secs(1),
            max_delay: Duration::from_secs(5),
            max_attempts: 5,
            max_age: Duration::from_secs(100),
        };
        let z = Duration::ZERO;
        assert_eq!(p.after_failure(1, z), Retry::After(Duration::from_secs(1)));
        assert_eq!(p.after_failure(2, z), Retry::After(Duration::from_secs(2)));
        assert_eq!(p.after_failure(3, z), Retry::After(Duration::from_secs(4)));
        assert_eq!(p.after_failure(4, z), Retry::After(Duration::from_secs(5)));
        assert_eq!(p.after_failure(5, z), Retry::DropAttempts);
        assert_eq!(p.after_failure(2, Duration::from_secs(99)), Retry::DropAge);
        let big = RetryPolicy {
            max_attempts: u32::MAX,
            ..p
        };
        assert_eq!(
            big.after_failure(200, z),
            Retry::After(Duration::from_secs(5))
        );
    }
}
