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
        // The typed reading takes a well-formed body in one pass; anything it does not take
        // goes through the `Value` walk, which accepts exactly the same bodies (test
        // `the_typed_reading_agrees_with_the_value_walk`) and names what is wrong.
        if let Some(w) = typed::read(body) {
            return Ok(w);
        }
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            Error::invalid(
                Location::default().with_line(e.line()),
                format!(
                    "request body is not valid JSON (column {}): {}; expected an Alertmanager \
                     webhook object",
                    e.column(),
                    crate::input::json_message(&e)
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

/// The typed reading of a body: serde straight into [`Webhook`], no intermediate `Value`.
/// `None` for anything the `Value` walk of [`Webhook::from_value`] might read differently or
/// refuse (a missing or mistyped field, a duplicate key, a bad time or version), so that it
/// decides, and words the error.
mod typed {
    use std::borrow::Cow;
    use std::collections::BTreeMap;
    use std::fmt;
    use std::marker::PhantomData;

    use chrono::{DateTime, Datelike, Utc};
    use serde::de::{value::MapAccessDeserializer, MapAccess, Visitor};
    use serde::{Deserialize, Deserializer};
    use serde_json::{Map, Value};

    use super::{Alert, AlertStatus, Webhook, WEBHOOK_VERSION};

    /// `T` read from a JSON object only: serde's derived structs also take a JSON array of
    /// their fields in order, which the `Value` walk refuses.
    struct ObjectOnly<T>(T);

    impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Object<T>(PhantomData<T>);
            impl<'de, T: Deserialize<'de>> Visitor<'de> for Object<T> {
                type Value = T;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                    T::deserialize(MapAccessDeserializer::new(map))
                }
            }
            d.deserialize_map(Object(PhantomData)).map(ObjectOnly)
        }
    }

    /// `firing` or `resolved` from a JSON string only (a derived enum also takes
    /// `{"firing": null}`).
    fn status(text: &str) -> Option<AlertStatus> {
        match text {
            "firing" => Some(AlertStatus::Firing),
            "resolved" => Some(AlertStatus::Resolved),
            _ => None,
        }
    }

    #[derive(Deserialize)]
    struct Body<'a> {
        #[serde(borrow, default)]
        version: Option<Cow<'a, str>>,
        #[serde(rename = "groupKey", default)]
        group_key: Option<String>,
        #[serde(rename = "truncatedAlerts", default)]
        truncated_alerts: Option<u64>,
        #[serde(borrow, default)]
        status: Option<Cow<'a, str>>,
        #[serde(default)]
        receiver: Option<String>,
        #[serde(rename = "groupLabels", default)]
        group_labels: Option<BTreeMap<String, String>>,
        #[serde(rename = "commonLabels", default)]
        common_labels: Option<BTreeMap<String, String>>,
        #[serde(rename = "commonAnnotations", default)]
        common_annotations: Option<BTreeMap<String, String>>,
        #[serde(rename = "externalURL", default)]
        external_url: Option<String>,
        #[serde(borrow)]
        alerts: Vec<ObjectOnly<TypedAlert<'a>>>,
    }

    #[derive(Deserialize)]
    struct TypedAlert<'a> {
        #[serde(borrow)]
        status: Cow<'a, str>,
        /// Required, and `null` reads as no labels (as in the `Value` walk).
        #[serde(deserialize_with = "null_or_map")]
        labels: BTreeMap<String, String>,
        annotations: Map<String, Value>,
        #[serde(rename = "startsAt", borrow)]
        starts_at: Cow<'a, str>,
        #[serde(rename = "endsAt", borrow, default)]
        ends_at: Option<Cow<'a, str>>,
        #[serde(rename = "generatorURL", default)]
        generator_url: Option<String>,
        fingerprint: String,
    }

    fn null_or_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
        Ok(Option::<BTreeMap<String, String>>::deserialize(d)?.unwrap_or_default())
    }

    fn time(text: &str) -> Option<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    pub(super) fn read(body: &[u8]) -> Option<Webhook> {
        let ObjectOnly(b): ObjectOnly<Body<'_>> = serde_json::from_slice(body).ok()?;
        if b.version.as_deref().is_some_and(|v| v != WEBHOOK_VERSION) {
            return None;
        }
        let webhook_status = match b.status {
            None => None,
            Some(s) => Some(status(&s)?),
        };
        let alerts = b
            .alerts
            .into_iter()
            .map(|ObjectOnly(a)| {
                let ends_at = match a.ends_at {
                    None => None,
                    Some(t) => Some(time(&t)?),
                };
                Some(Alert {
                    status: status(&a.status)?,
                    labels: a.labels,
                    annotations: a.annotations,
                    starts_at: time(&a.starts_at)?,
                    ends_at: ends_at.filter(|t: &DateTime<Utc>| t.year() > 1),
                    generator_url: a.generator_url.unwrap_or_default(),
                    fingerprint: a.fingerprint,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Webhook {
            version: b.version.map(Cow::into_owned),
            group_key: b.group_key,
            truncated_alerts: b.truncated_alerts.unwrap_or(0),
            status: webhook_status,
            receiver: b.receiver,
            group_labels: b.group_labels.unwrap_or_default(),
            common_labels: b.common_labels.unwrap_or_default(),
            common_annotations: b.common_annotations.unwrap_or_default(),
            external_url: b.external_url,
            alerts,
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
    use serde_json::json;

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

    /// The `Value` walk alone (what `from_slice` did before the typed reading).
    fn walked(body: &[u8]) -> Option<Webhook> {
        let v: Value = serde_json::from_slice(body).ok()?;
        Webhook::from_value(&v).ok()
    }

    /// The typed reading takes a body exactly when the walk does, with the same result.
    fn assert_agree(body: &[u8]) {
        assert_eq!(
            typed::read(body),
            walked(body),
            "{}",
            String::from_utf8_lossy(body)
        );
    }

    #[test]
    fn the_typed_reading_agrees_with_the_value_walk() {
        assert!(typed::read(FIRING.as_bytes()).is_some());
        let base: Value = serde_json::from_str(FIRING).unwrap();
        let replacements = [
            json!(null),
            json!(1),
            json!(-1),
            json!(1.5),
            json!(true),
            json!("x"),
            json!("4"),
            json!("firing"),
            json!("resolved"),
            json!("2022-06-21T23:47:36+02:00"),
            json!("0001-01-01T00:00:00Z"),
            json!([]),
            json!({}),
            json!({"a": "b"}),
            json!({"a": 1}),
        ];
        let top = base
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>();
        let alert = base["alerts"][0]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>();
        let mut cases = 0;
        for (in_alert, keys) in [(false, &top), (true, &alert)] {
            for key in keys.iter().chain([&"unknownField".to_owned()]) {
                fn target(v: &mut Value, in_alert: bool) -> &mut Map<String, Value> {
                    let v = if in_alert { &mut v["alerts"][0] } else { v };
                    v.as_object_mut().unwrap()
                }
                let mut removed = base.clone();
                target(&mut removed, in_alert).remove(key);
                assert_agree(&serde_json::to_vec(&removed).unwrap());
                for r in &replacements {
                    let mut v = base.clone();
                    target(&mut v, in_alert).insert(key.clone(), r.clone());
                    assert_agree(&serde_json::to_vec(&v).unwrap());
                    cases += 1;
                }
            }
        }
        for body in [
            "[]",
            "null",
            "{}",
            r#"{"alerts":[]}"#,
            r#"{"alerts":[null]}"#,
            r#"{"alerts":[[]]}"#,
            r#"{"alerts":[],"version":null,"truncatedAlerts":null,"status":null}"#,
            r#"{"alerts":[],"truncatedAlerts":1e2}"#,
            // serde's derived structs and enums take these; the walk does not.
            "[null,null,null,null,null,null,null,null,null,[]]",
            r#"{"alerts":[["firing",{},{},"2022-06-21T23:47:36Z",null,null,"f"]]}"#,
            r#"{"alerts":[],"status":{"firing":null}}"#,
            r#"{"alerts":[{"status":{"resolved":null},"labels":{},"annotations":{},"startsAt":"2022-06-21T23:47:36Z","fingerprint":"f"}]}"#,
            r#"{"alerts":[],"truncatedAlerts":18446744073709551615}"#,
            r#"{"alerts":[{"status":"firing","labels":null,"annotations":{},"startsAt":"2022-06-21T23:47:36Z","endsAt":null,"generatorURL":null,"fingerprint":"f"}]}"#,
            r#"{"alerts":[{"status":"firing","labels":{"a\u00e9":"\n"},"annotations":{"z":1,"a":[]},"startsAt":"2022-06-21T23:47:36\u005a","fingerprint":"f\"q"}]}"#,
        ] {
            assert_agree(body.as_bytes());
        }
        assert!(cases > 200, "{cases}");
    }

    #[test]
    fn a_duplicate_key_is_read_as_the_walk_reads_it() {
        let body = r#"{"receiver":"a","alerts":[],"receiver":"b"}"#;
        assert_eq!(typed::read(body.as_bytes()), None, "serde refuses it");
        let w = Webhook::from_slice(body.as_bytes()).unwrap();
        assert_eq!(
            w.receiver.as_deref(),
            Some("b"),
            "the last one, as the walk reads it"
        );
    }

    /// Every webhook body of the shared vectors (the Alertmanager captures, and every object
    /// with `alerts` in Tacker's Prometheus-plugin files) is read the same both ways.
    #[cfg(feature = "vectors")]
    #[test]
    fn the_typed_reading_agrees_on_every_vector_body() {
        fn bodies(v: &Value, out: &mut Vec<Vec<u8>>) {
            match v {
                Value::Object(m) => {
                    if m.contains_key("alerts") {
                        out.push(serde_json::to_vec(v).unwrap());
                    }
                    m.values().for_each(|x| bodies(x, out));
                }
                Value::Array(a) => a.iter().for_each(|x| bodies(x, out)),
                _ => {}
            }
        }
        fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    files(&p, out);
                } else if p.extension().is_some_and(|x| x == "json") {
                    out.push(p);
                }
            }
        }
        let Some(root) = crate::vectors::shared_vectors(
            env!("CARGO_MANIFEST_DIR"),
            "the typed webhook reading against the vector bodies",
        ) else {
            return;
        };
        let mut paths = Vec::new();
        files(&root.join("alertmanager"), &mut paths);
        files(&root.join("tacker/prometheus"), &mut paths);
        let mut read = 0;
        for p in paths {
            let raw = std::fs::read(&p).unwrap();
            let Ok(v) = serde_json::from_slice::<Value>(&raw) else {
                continue;
            };
            let mut all = Vec::new();
            if v.get("alerts").is_some() {
                all.push(raw);
            }
            bodies(&v, &mut all);
            for b in all {
                assert_agree(&b);
                read += 1;
            }
        }
        assert!(read >= 40, "only {read} bodies found");
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
