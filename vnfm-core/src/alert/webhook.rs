//! The Alertmanager webhook body (`"version": "4"`) and its parser.
//!
//! [`Webhook::from_slice`] reads the request body as Alertmanager 0.25 sends it, and also the
//! minimal bodies of Tacker's API reference (only `alerts`, each without `generatorURL`). It
//! walks the JSON by hand so that every error names the field path (`alerts[1].startsAt`), the
//! value found and what was expected; the HTTP server answers it as a 400 `ProblemDetails`
//! (see [`super::bad_request`]).
//!
//! What is required:
//! * the body is a JSON object with an `alerts` array (may be empty);
//! * each alert has `status` (`firing` or `resolved`), `labels` (an object of strings),
//!   `annotations` (an object), `startsAt` (RFC 3339) and `fingerprint` (a string), as in
//!   Tacker's schema;
//! * when present: `version` is `"4"`, `status` is `firing` or `resolved`, `truncatedAlerts` is
//!   a non-negative integer, the label maps hold strings, the URLs and keys are strings, and
//!   `endsAt` is RFC 3339.
//!
//! Everything else is ignored. A firing alert's `endsAt` is Go's zero time
//! `0001-01-01T00:00:00Z`: it reads as `None` (and is written back as that zero time).

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, SecondsFormat, Utc};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::error::{Error, Location};

/// The webhook `version` this module reads.
pub const WEBHOOK_VERSION: &str = "4";

/// Go's zero time, which Alertmanager sends as the `endsAt` of a firing alert.
pub const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// `status` of a webhook or of one alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertStatus {
    /// `firing`
    Firing,
    /// `resolved`
    Resolved,
}

impl AlertStatus {
    /// The wire value, `firing` or `resolved`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Firing => "firing",
            Self::Resolved => "resolved",
        }
    }
}

/// One alert of a webhook.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    /// `status`: this alert's own state (a `firing` webhook may carry resolved alerts).
    pub status: AlertStatus,
    /// `labels`: identify the alert (`alertname`, `receiver_type`, `function_type`, ids).
    pub labels: BTreeMap<String, String>,
    /// `annotations`: free text; kept as JSON because Tacker's samples put numbers there.
    pub annotations: Map<String, Value>,
    /// `startsAt`
    #[serde(serialize_with = "ser_time")]
    pub starts_at: DateTime<Utc>,
    /// `endsAt`; `None` for Go's zero time (a firing alert) or when absent.
    #[serde(serialize_with = "ser_end")]
    pub ends_at: Option<DateTime<Utc>>,
    /// `generatorURL`; empty when the alert came from the API without one.
    #[serde(rename = "generatorURL")]
    pub generator_url: String,
    /// `fingerprint`: 16 hex characters, stable for a label set.
    pub fingerprint: String,
}

impl Alert {
    /// The label `name`, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }

    /// Whether this alert is firing.
    pub fn is_firing(&self) -> bool {
        self.status == AlertStatus::Firing
    }

    /// The identity of this occurrence of the alert: fingerprint and `startsAt`.
    pub fn key(&self) -> AlertKey {
        AlertKey {
            fingerprint: self.fingerprint.clone(),
            starts_at: self.starts_at,
        }
    }
}

/// One occurrence of an alert: the same label set (`fingerprint`) that started firing at the
/// same time (`startsAt`). Alertmanager re-sends an occurrence unchanged (repeat interval,
/// group changes); a new occurrence of the same alert has a new `startsAt`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertKey {
    /// `fingerprint`
    pub fingerprint: String,
    /// `startsAt`
    pub starts_at: DateTime<Utc>,
}

/// An Alertmanager webhook request body (version 4).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    /// `version`: `"4"`; `None` when absent (Tacker's minimal bodies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `groupKey`: identifies the alert group, e.g. `{}:{}` for the root route.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_key: Option<String>,
    /// `truncatedAlerts`: how many alerts `max_alerts` cut from the list (0 when absent).
    pub truncated_alerts: u64,
    /// `status`: `firing` when any alert of the request fires.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<AlertStatus>,
    /// `receiver`: the receiver name from `alertmanager.yml`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver: Option<String>,
    /// `groupLabels`
    pub group_labels: BTreeMap<String, String>,
    /// `commonLabels`: the labels all sent alerts share.
    pub common_labels: BTreeMap<String, String>,
    /// `commonAnnotations`
    pub common_annotations: BTreeMap<String, String>,
    /// `externalURL`: Alertmanager's external URL.
    #[serde(rename = "externalURL", skip_serializing_if = "Option::is_none")]
    pub external_url: Option<String>,
    /// `alerts`
    pub alerts: Vec<Alert>,
}

impl Webhook {
    /// Parses a request body.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the body is not JSON (with its line), or when a field is missing
    /// or has the wrong type or value: the location is the field path (`alerts[0].status`) and
    /// the message names the value found and what was expected.
    pub fn from_slice(body: &[u8]) -> Result<Self, Error> {
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            Error::invalid(
                Location::default().with_line(e.line()),
                format!(
                    "request body is not valid JSON: {e}; expected an Alertmanager webhook object"
                ),
            )
        })?;
        Self::from_value(&value)
    }

    /// Reads a webhook from parsed JSON; see [`Webhook::from_slice`].
    ///
    /// # Errors
    /// As [`Webhook::from_slice`], without the JSON syntax case.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let top = object(value, "")?;
        let version = opt_string(top, "", "version")?;
        if let Some(v) = &version {
            if v != WEBHOOK_VERSION {
                return Err(invalid(
                    "version",
                    format!(
                        "webhook version {v:?} is not supported; expected \"{WEBHOOK_VERSION}\""
                    ),
                ));
            }
        }
        let truncated_alerts = match top.get("truncatedAlerts") {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_u64().ok_or_else(|| {
                invalid(
                    "truncatedAlerts",
                    format!("found {}; expected a non-negative integer", show(v)),
                )
            })?,
        };
        let alerts_value = top.get("alerts").ok_or_else(|| {
            invalid(
                "alerts",
                "missing mandatory attribute `alerts`; expected an array of alerts",
            )
        })?;
        let Value::Array(items) = alerts_value else {
            return Err(invalid(
                "alerts",
                format!("found {}; expected an array of alerts", show(alerts_value)),
            ));
        };
        let alerts = items
            .iter()
            .enumerate()
            .map(|(i, a)| Alert::from_value(a, &format!("alerts[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            version,
            group_key: opt_string(top, "", "groupKey")?,
            truncated_alerts,
            status: opt_status(top, "", "status")?,
            receiver: opt_string(top, "", "receiver")?,
            group_labels: opt_string_map(top, "", "groupLabels")?,
            common_labels: opt_string_map(top, "", "commonLabels")?,
            common_annotations: opt_string_map(top, "", "commonAnnotations")?,
            external_url: opt_string(top, "", "externalURL")?,
            alerts,
        })
    }

    /// The body as JSON bytes, in Alertmanager's field names.
    ///
    /// # Errors
    /// None in practice (every field serializes).
    pub fn to_vec(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }
}

impl Alert {
    fn from_value(value: &Value, at: &str) -> Result<Self, Error> {
        let map = object(value, at)?;
        let status = opt_status(map, at, "status")?
            .ok_or_else(|| missing(at, "status", "\"firing\" or \"resolved\""))?;
        if !map.contains_key("labels") {
            return Err(missing(at, "labels", "an object of string labels"));
        }
        let labels = opt_string_map(map, at, "labels")?;
        let annotations = match map.get("annotations") {
            None => return Err(missing(at, "annotations", "an object")),
            Some(Value::Object(m)) => m.clone(),
            Some(v) => {
                return Err(invalid(
                    &join(at, "annotations"),
                    format!("found {}; expected an object", show(v)),
                ))
            }
        };
        let starts_at = opt_time(map, at, "startsAt")?
            .ok_or_else(|| missing(at, "startsAt", "an RFC 3339 time"))?;
        let ends_at = opt_time(map, at, "endsAt")?.filter(|t| t.year() > 1);
        let fingerprint = opt_string(map, at, "fingerprint")?
            .ok_or_else(|| missing(at, "fingerprint", "a string"))?;
        Ok(Self {
            status,
            labels,
            annotations,
            starts_at,
            ends_at,
            generator_url: opt_string(map, at, "generatorURL")?.unwrap_or_default(),
            fingerprint,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// decoding helpers

fn join(prefix: &str, attr: &str) -> String {
    if prefix.is_empty() {
        attr.to_owned()
    } else {
        format!("{prefix}.{attr}")
    }
}

fn invalid(field: &str, message: impl Into<String>) -> Error {
    let location = if field.is_empty() {
        Location::default()
    } else {
        Location::default().with_field(field)
    };
    Error::invalid(location, message)
}

fn missing(at: &str, attr: &str, expected: &str) -> Error {
    invalid(
        &join(at, attr),
        format!("missing mandatory attribute `{attr}`; expected {expected}"),
    )
}

/// A short description of a JSON value for error messages: its kind and (shortened) text.
fn show(v: &Value) -> String {
    let kind = match v {
        Value::Null => return "null".into(),
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let mut text = v.to_string();
    if text.chars().count() > 60 {
        text = text.chars().take(57).collect::<String>() + "...";
    }
    format!("{kind} ({text})")
}

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, Error> {
    v.as_object().ok_or_else(|| {
        let what = if at.is_empty() {
            "an Alertmanager webhook object"
        } else {
            "an alert object"
        };
        invalid(at, format!("found {}; expected {what}", show(v)))
    })
}

fn opt_string(map: &Map<String, Value>, at: &str, attr: &str) -> Result<Option<String>, Error> {
    match map.get(attr) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(invalid(
            &join(at, attr),
            format!("found {}; expected a string", show(v)),
        )),
    }
}

fn opt_status(
    map: &Map<String, Value>,
    at: &str,
    attr: &str,
) -> Result<Option<AlertStatus>, Error> {
    match opt_string(map, at, attr)?.as_deref() {
        None => Ok(None),
        Some("firing") => Ok(Some(AlertStatus::Firing)),
        Some("resolved") => Ok(Some(AlertStatus::Resolved)),
        Some(other) => Err(invalid(
            &join(at, attr),
            format!("status {other:?} is not known; expected \"firing\" or \"resolved\""),
        )),
    }
}

fn opt_string_map(
    map: &Map<String, Value>,
    at: &str,
    attr: &str,
) -> Result<BTreeMap<String, String>, Error> {
    let here = join(at, attr);
    match map.get(attr) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(invalid(
                    &join(&here, k),
                    format!("found {}; expected a string", show(other)),
                )),
            })
            .collect(),
        Some(v) => Err(invalid(
            &here,
            format!("found {}; expected an object of strings", show(v)),
        )),
    }
}

fn opt_time(
    map: &Map<String, Value>,
    at: &str,
    attr: &str,
) -> Result<Option<DateTime<Utc>>, Error> {
    let Some(text) = opt_string(map, at, attr)? else {
        return Ok(None);
    };
    DateTime::parse_from_rfc3339(&text)
        .map(|t| Some(t.with_timezone(&Utc)))
        .map_err(|e| {
            invalid(
                &join(at, attr),
                format!("{text:?} is not a time ({e}); expected RFC 3339 such as 2026-11-21T10:15:12.558Z"),
            )
        })
}

fn ser_time<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

fn ser_end<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_time(t, s),
        None => s.serialize_str(ZERO_TIME),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    const FIRING: &str = r#"{"receiver":"vnfm-auto-heal","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"VnfcDown","function_type":"auto_heal","receiver_type":"tacker","vnf_instance_id":"i-1","vnfc_info_id":"VDU1-a"},"annotations":{},"startsAt":"2026-11-21T10:15:12.979001097Z","endsAt":"0001-01-01T00:00:00Z","generatorURL":"","fingerprint":"4158b72fcca2dd56"}],"groupLabels":{"vnf_instance_id":"i-1"},"commonLabels":{"alertname":"VnfcDown"},"commonAnnotations":{},"externalURL":"http://127.0.0.1:19093","version":"4","groupKey":"{}:{}","truncatedAlerts":0}"#;

    fn err(body: &str) -> String {
        Webhook::from_slice(body.as_bytes())
            .unwrap_err()
            .to_string()
    }

    fn with_alert(alert: &str) -> String {
        format!(r#"{{"alerts":[{alert}]}}"#)
    }

    #[test]
    fn parses_a_real_body() {
        let w = Webhook::from_slice(FIRING.as_bytes()).unwrap();
        assert_eq!(w.version.as_deref(), Some("4"));
        assert_eq!(w.status, Some(AlertStatus::Firing));
        assert_eq!(w.receiver.as_deref(), Some("vnfm-auto-heal"));
        assert_eq!(w.group_key.as_deref(), Some("{}:{}"));
        assert_eq!(w.group_labels["vnf_instance_id"], "i-1");
        assert_eq!(w.external_url.as_deref(), Some("http://127.0.0.1:19093"));
        let a = &w.alerts[0];
        assert!(a.is_firing());
        assert_eq!(a.label("vnfc_info_id"), Some("VDU1-a"));
        assert_eq!(a.ends_at, None, "Go's zero time reads as none");
        assert_eq!(a.starts_at.timestamp_subsec_nanos(), 979_001_097);
        assert_eq!(
            a.key(),
            AlertKey {
                fingerprint: "4158b72fcca2dd56".into(),
                starts_at: a.starts_at
            }
        );
    }

    #[test]
    fn round_trips_through_its_own_output() {
        let w = Webhook::from_slice(FIRING.as_bytes()).unwrap();
        let out = w.to_vec().unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.contains(r#""endsAt":"0001-01-01T00:00:00Z""#),
            "{text}"
        );
        assert!(
            text.contains(r#""startsAt":"2026-11-21T10:15:12.979001097Z""#),
            "{text}"
        );
        assert_eq!(Webhook::from_slice(&out).unwrap(), w);
    }

    #[test]
    fn minimal_body_defaults() {
        let w = Webhook::from_slice(
            br#"{"alerts":[{"status":"resolved","labels":{},"annotations":{"value":99},
                "startsAt":"2022-06-21T23:47:36.453Z","endsAt":"2022-06-21T23:50:00Z",
                "fingerprint":"f"}]}"#,
        )
        .unwrap();
        assert_eq!(w.version, None);
        assert_eq!(w.truncated_alerts, 0);
        assert!(w.common_labels.is_empty());
        let a = &w.alerts[0];
        assert_eq!(a.generator_url, "");
        assert_eq!(a.annotations["value"], 99);
        assert_eq!(
            a.ends_at,
            Some(Utc.with_ymd_and_hms(2022, 6, 21, 23, 50, 0).unwrap())
        );
        let empty = Webhook::from_slice(br#"{"alerts":[]}"#).unwrap();
        assert!(empty.alerts.is_empty());
    }

    #[test]
    fn bad_bodies_name_the_field_value_and_expectation() {
        assert!(err("").starts_with("line 1: request body is not valid JSON"));
        assert_eq!(
            err("[1]"),
            "<input>: found an array ([1]); expected an Alertmanager webhook object"
        );
        assert_eq!(
            err("{}"),
            "alerts: missing mandatory attribute `alerts`; expected an array of alerts"
        );
        assert_eq!(
            err(r#"{"alerts":{}}"#),
            "alerts: found an object ({}); expected an array of alerts"
        );
        assert_eq!(
            err(r#"{"alerts":[],"version":"3"}"#),
            "version: webhook version \"3\" is not supported; expected \"4\""
        );
        assert_eq!(
            err(r#"{"alerts":[],"truncatedAlerts":-1}"#),
            "truncatedAlerts: found a number (-1); expected a non-negative integer"
        );
        assert_eq!(
            err(r#"{"alerts":[],"status":"burning"}"#),
            "status: status \"burning\" is not known; expected \"firing\" or \"resolved\""
        );
        assert_eq!(
            err(r#"{"alerts":[],"commonLabels":{"a":1}}"#),
            "commonLabels.a: found a number (1); expected a string"
        );
        assert_eq!(
            err(r#"{"alerts":[7]}"#),
            "alerts[0]: found a number (7); expected an alert object"
        );
        let ok = r#""labels":{},"annotations":{},"startsAt":"2022-06-21T23:47:36.453Z","fingerprint":"f""#;
        assert_eq!(
            err(&with_alert(&format!("{{{ok}}}"))),
            "alerts[0].status: missing mandatory attribute `status`; expected \"firing\" or \"resolved\""
        );
        assert_eq!(
            err(&with_alert(
                r#"{"status":"firing","labels":{"x":true},"annotations":{},"startsAt":"2022-06-21T23:47:36Z","fingerprint":"f"}"#
            )),
            "alerts[0].labels.x: found a boolean (true); expected a string"
        );
        assert_eq!(
            err(&with_alert(r#"{"status":"firing","annotations":{},"startsAt":"2022-06-21T23:47:36Z","fingerprint":"f"}"#)),
            "alerts[0].labels: missing mandatory attribute `labels`; expected an object of string labels"
        );
        assert_eq!(
            err(&with_alert(
                r#"{"status":"firing","labels":{},"startsAt":"2022-06-21T23:47:36Z","fingerprint":"f"}"#
            )),
            "alerts[0].annotations: missing mandatory attribute `annotations`; expected an object"
        );
        assert_eq!(
            err(&with_alert(
                r#"{"status":"firing","labels":{},"annotations":[],"startsAt":"2022-06-21T23:47:36Z","fingerprint":"f"}"#
            )),
            "alerts[0].annotations: found an array ([]); expected an object"
        );
        let e = err(&with_alert(
            r#"{"status":"firing","labels":{},"annotations":{},"startsAt":"yesterday","fingerprint":"f"}"#,
        ));
        assert!(
            e.starts_with("alerts[0].startsAt: \"yesterday\" is not a time (")
                && e.ends_with("expected RFC 3339 such as 2026-11-21T10:15:12.558Z"),
            "{e}"
        );
        assert_eq!(
            err(&with_alert(
                r#"{"status":"firing","labels":{},"annotations":{},"startsAt":"2022-06-21T23:47:36Z"}"#
            )),
            "alerts[0].fingerprint: missing mandatory attribute `fingerprint`; expected a string"
        );
        assert_eq!(
            err(&with_alert(
                r#"{"status":"firing","labels":{},"annotations":{},"fingerprint":"f"}"#
            )),
            "alerts[0].startsAt: missing mandatory attribute `startsAt`; expected an RFC 3339 time"
        );
        let long = "x".repeat(100);
        let e = err(&format!(r#"{{"alerts":[],"receiver":["{long}"]}}"#));
        assert!(
            e.starts_with("receiver: found an array ([\"xxx") && e.contains("...)"),
            "{e}"
        );
    }
}
