//! The validation chain: one alert in, one [`Decision`] out.
//!
//! Each alert of a webhook is judged on its own, by these steps in this order (Tacker's, plus
//! the scale-level bound); the first that fails gives [`Decision::Ignore`] with its
//! [`IgnoreReason`]:
//!
//! 0. its fingerprint and labels are within the bounds of the configuration
//!    ([`IgnoreReason::Oversized`], see [`check_sizes`]);
//! 1. `status` is `firing` ([`IgnoreReason::Resolved`]);
//! 2. the label `receiver_type` is one of the configured names
//!    ([`IgnoreReason::ReceiverType`]);
//! 3. the label `function_type` is the endpoint's: `auto_heal` on `/alert/auto_healing`,
//!    `auto_scale` on `/alert/auto_scaling` ([`IgnoreReason::FunctionType`]);
//! 4. scale only: the label `auto_scale_type` is `SCALE_OUT` or `SCALE_IN`
//!    ([`IgnoreReason::AutoScaleType`]);
//! 5. the label `vnf_instance_id` names an instance that exists
//!    ([`IgnoreReason::MissingLabel`], [`IgnoreReason::InstanceNotFound`]);
//! 6. the instance is `INSTANTIATED` ([`IgnoreReason::NotInstantiated`]);
//! 7. its `vnfConfigurableProperties.isAutohealEnabled` / `isAutoscaleEnabled` is `true`
//!    ([`IgnoreReason::AutohealDisabled`], [`IgnoreReason::AutoscaleDisabled`]);
//! 8. heal: the label `vnfc_info_id` is the id of an entry of `instantiatedVnfInfo.vnfcInfo`
//!    ([`IgnoreReason::UnknownVnfc`]); scale: the label `aspect_id` is an aspect of
//!    `scaleStatus` ([`IgnoreReason::UnknownAspect`]);
//! 9. scale only: one more step stays within `0..=maxScaleLevels[aspect]`
//!    ([`IgnoreReason::MaxScaleLevel`], [`IgnoreReason::MinScaleLevel`]). When
//!    `maxScaleLevels` does not list the aspect, the upper bound is left to the LCM operation
//!    (which checks it against the VNFD).
//!
//! The id labels are read in both spellings, `vnf_instance_id` / `vnfInstanceId`,
//! `vnfc_info_id` / `vnfcInfoId`, `aspect_id` / `aspectId`; when both are present with
//! different values the alert is ambiguous and ignored ([`IgnoreReason::ConflictingLabels`]).
//!
//! Instances are looked up through [`InstanceLookup`], which the caller implements over its
//! store (any `Fn(&VnfInstanceId) -> Option<VnfInstance>` is one), so this module stays pure.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::id::VnfInstanceId;
use crate::lcm::{ScaleType, VnfInstance};

/// The endpoint an alert is judged for: defined beside the configuration that turns it on, and
/// reachable here as before.
pub use super::config::Endpoint;
use super::config::PrometheusPluginConfig;
use super::webhook::Alert;

/// Looks VNF instances up by id, synchronously (the caller's store or cache).
pub trait InstanceLookup {
    /// The instance `id`, or `None` when there is none: borrowed when the lookup holds it (a
    /// cache), so that judging an alert copies nothing.
    fn instance(&self, id: &VnfInstanceId) -> Option<Cow<'_, VnfInstance>>;
}

impl<F> InstanceLookup for F
where
    F: Fn(&VnfInstanceId) -> Option<VnfInstance>,
{
    fn instance(&self, id: &VnfInstanceId) -> Option<Cow<'_, VnfInstance>> {
        self(id).map(Cow::Owned)
    }
}

impl InstanceLookup for BTreeMap<VnfInstanceId, VnfInstance> {
    fn instance(&self, id: &VnfInstanceId) -> Option<Cow<'_, VnfInstance>> {
        self.get(id).map(Cow::Borrowed)
    }
}

/// What to do about one alert.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Heal the VNFC `vnfc` (a `vnfcInfo` id) of `instance` (batched by
    /// [`super::HealBatcher`]).
    Heal {
        /// The VNF instance.
        instance: VnfInstanceId,
        /// The `VnfcInfo.id` to heal.
        vnfc: String,
    },
    /// Scale `aspect` of `instance` by one step (subject to [`super::ScaleCooldown`]).
    Scale {
        /// The VNF instance.
        instance: VnfInstanceId,
        /// The scaling aspect.
        aspect: String,
        /// `SCALE_OUT` or `SCALE_IN`.
        #[serde(rename = "type")]
        type_: ScaleType,
    },
    /// Do nothing, for `reason`.
    Ignore {
        /// Why.
        reason: IgnoreReason,
    },
}

impl Decision {
    fn ignore(reason: IgnoreReason) -> Self {
        Self::Ignore { reason }
    }

    /// The reason, when this is [`Decision::Ignore`].
    pub fn ignore_reason(&self) -> Option<&IgnoreReason> {
        match self {
            Self::Ignore { reason } => Some(reason),
            _ => None,
        }
    }
}

/// Why an alert triggers nothing. [`IgnoreReason::label`] is a stable snake_case name for
/// metrics (it is also the `reason` tag of the serde form); `Display` is the message for logs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum IgnoreReason {
    /// The alert's own `status` is `resolved`.
    Resolved,
    /// `receiver_type` is absent or not one of the configured names.
    ReceiverType {
        /// The label value, if any.
        found: Option<String>,
        /// The configured names.
        expected: Vec<String>,
    },
    /// `function_type` is absent or not this endpoint's.
    FunctionType {
        /// The label value, if any.
        found: Option<String>,
        /// This endpoint's `function_type`.
        expected: String,
    },
    /// `auto_scale_type` is absent or not `SCALE_OUT` / `SCALE_IN`.
    AutoScaleType {
        /// The label value, if any.
        found: Option<String>,
    },
    /// A label the decision needs is absent (in both spellings).
    MissingLabel {
        /// The snake_case label name.
        label: String,
    },
    /// Both spellings of a label are present with different values.
    ConflictingLabels {
        /// The snake_case name and its value.
        snake: (String, String),
        /// The camelCase name and its value.
        camel: (String, String),
    },
    /// No VNF instance has this id.
    InstanceNotFound {
        /// The id from the alert.
        instance: VnfInstanceId,
    },
    /// The instance is not `INSTANTIATED`.
    NotInstantiated {
        /// The instance.
        instance: VnfInstanceId,
    },
    /// `vnfConfigurableProperties.isAutohealEnabled` is not `true`.
    AutohealDisabled {
        /// The instance.
        instance: VnfInstanceId,
    },
    /// `vnfConfigurableProperties.isAutoscaleEnabled` is not `true`.
    AutoscaleDisabled {
        /// The instance.
        instance: VnfInstanceId,
    },
    /// `vnfc_info_id` is not the id of an entry of `instantiatedVnfInfo.vnfcInfo`.
    UnknownVnfc {
        /// The instance.
        instance: VnfInstanceId,
        /// The label value.
        vnfc: String,
    },
    /// `aspect_id` is not an aspect of `instantiatedVnfInfo.scaleStatus`.
    UnknownAspect {
        /// The instance.
        instance: VnfInstanceId,
        /// The label value.
        aspect: String,
    },
    /// `SCALE_OUT` of an aspect already at its `maxScaleLevels` level.
    MaxScaleLevel {
        /// The instance.
        instance: VnfInstanceId,
        /// The aspect.
        aspect: String,
        /// Its current and maximum level.
        level: u32,
    },
    /// `SCALE_IN` of an aspect at level 0.
    MinScaleLevel {
        /// The instance.
        instance: VnfInstanceId,
        /// The aspect.
        aspect: String,
    },
    /// The (instance, aspect) was scaled less than `scale_cooldown` seconds ago.
    Cooldown {
        /// The instance.
        instance: VnfInstanceId,
        /// The aspect.
        aspect: String,
        /// Seconds left (rounded up).
        remaining_secs: u64,
    },
    /// An operation on the instance is in progress (a scale does not wait for it: the next
    /// re-sent alert will try again).
    OperationInProgress {
        /// The instance.
        instance: VnfInstanceId,
    },
    /// This alert occurrence (fingerprint and `startsAt`) already triggered a heal.
    Duplicate {
        /// The alert's fingerprint.
        fingerprint: String,
    },
    /// A value of the alert is over its bound ([`PrometheusPluginConfig::max_fingerprint_bytes`],
    /// [`PrometheusPluginConfig::max_labels`], [`PrometheusPluginConfig::max_label_bytes`]):
    /// nothing of the alert is kept, and only the field's name (shortened) is logged.
    Oversized {
        /// What is over its bound: `fingerprint`, `labels` (their number), `a label name`, or
        /// `labels.<name>` (a value).
        field: String,
        /// Its size: bytes, or labels for `labels`.
        size: usize,
        /// The bound.
        limit: usize,
        /// The `[prometheus_plugin]` key of the bound.
        key: String,
    },
}

impl IgnoreReason {
    /// Every label, in declaration order.
    pub const LABELS: [&'static str; 18] = [
        "resolved",
        "receiver_type",
        "function_type",
        "auto_scale_type",
        "missing_label",
        "conflicting_labels",
        "instance_not_found",
        "not_instantiated",
        "autoheal_disabled",
        "autoscale_disabled",
        "unknown_vnfc",
        "unknown_aspect",
        "max_scale_level",
        "min_scale_level",
        "cooldown",
        "operation_in_progress",
        "duplicate",
        "oversized",
    ];

    /// A stable snake_case name for metrics, e.g. `not_instantiated`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Resolved => "resolved",
            Self::ReceiverType { .. } => "receiver_type",
            Self::FunctionType { .. } => "function_type",
            Self::AutoScaleType { .. } => "auto_scale_type",
            Self::MissingLabel { .. } => "missing_label",
            Self::ConflictingLabels { .. } => "conflicting_labels",
            Self::InstanceNotFound { .. } => "instance_not_found",
            Self::NotInstantiated { .. } => "not_instantiated",
            Self::AutohealDisabled { .. } => "autoheal_disabled",
            Self::AutoscaleDisabled { .. } => "autoscale_disabled",
            Self::UnknownVnfc { .. } => "unknown_vnfc",
            Self::UnknownAspect { .. } => "unknown_aspect",
            Self::MaxScaleLevel { .. } => "max_scale_level",
            Self::MinScaleLevel { .. } => "min_scale_level",
            Self::Cooldown { .. } => "cooldown",
            Self::OperationInProgress { .. } => "operation_in_progress",
            Self::Duplicate { .. } => "duplicate",
            Self::Oversized { .. } => "oversized",
        }
    }
}

fn quoted(v: &Option<String>) -> String {
    match v {
        Some(v) => format!("is {}", Shown(v)),
        None => "is absent".to_owned(),
    }
}

/// How many characters of a client's value a log line quotes ([`Shown`]).
pub const SHOWN_CHARS: usize = 64;

/// A client's value as a log line quotes it: in quotes, at most [`SHOWN_CHARS`] characters,
/// with the size of what was left out. A log line about an alert never echoes more than
/// that of any value (issue 26: a 1 MB label made a 1 MB log line).
pub struct Shown<'a>(pub &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.char_indices().nth(SHOWN_CHARS) {
            None => write!(f, "{:?}", self.0),
            Some((cut, _)) => write!(
                f,
                "{:?}... ({} bytes)",
                self.0.get(..cut).unwrap_or_default(),
                self.0.len()
            ),
        }
    }
}

impl fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Resolved => f.write_str("alert is resolved; only firing alerts trigger an operation"),
            Self::ReceiverType { found, expected } => write!(
                f,
                "label receiver_type {}; expected one of {expected:?}",
                quoted(found)
            ),
            Self::FunctionType { found, expected } => write!(
                f,
                "label function_type {}; this endpoint expects {expected:?}",
                quoted(found)
            ),
            Self::AutoScaleType { found } => write!(
                f,
                "label auto_scale_type {}; expected \"SCALE_OUT\" or \"SCALE_IN\"",
                quoted(found)
            ),
            Self::MissingLabel { label } => {
                write!(f, "label {label} (or {}) is absent", camel(label))
            }
            Self::ConflictingLabels { snake, camel } => write!(
                f,
                "labels {}={} and {}={} disagree; expected one of them, or equal values",
                snake.0,
                Shown(&snake.1),
                camel.0,
                Shown(&camel.1)
            ),
            Self::InstanceNotFound { instance } => {
                write!(f, "VNF instance {} does not exist", Shown(instance.as_str()))
            }
            Self::NotInstantiated { instance } => write!(
                f,
                "VNF instance {instance} is not INSTANTIATED; expected INSTANTIATED"
            ),
            Self::AutohealDisabled { instance } => write!(
                f,
                "vnfConfigurableProperties.isAutohealEnabled of VNF instance {instance} is not true"
            ),
            Self::AutoscaleDisabled { instance } => write!(
                f,
                "vnfConfigurableProperties.isAutoscaleEnabled of VNF instance {instance} is not true"
            ),
            Self::UnknownVnfc { instance, vnfc } => write!(
                f,
                "vnfc_info_id {} is not in instantiatedVnfInfo.vnfcInfo of VNF instance {instance}",
                Shown(vnfc)
            ),
            Self::UnknownAspect { instance, aspect } => write!(
                f,
                "aspect_id {} is not in instantiatedVnfInfo.scaleStatus of VNF instance {instance}",
                Shown(aspect)
            ),
            Self::MaxScaleLevel {
                instance,
                aspect,
                level,
            } => write!(
                f,
                "aspect {aspect:?} of VNF instance {instance} is at its maximum scale level {level}; SCALE_OUT would exceed it"
            ),
            Self::MinScaleLevel { instance, aspect } => write!(
                f,
                "aspect {aspect:?} of VNF instance {instance} is at scale level 0; SCALE_IN would go below it"
            ),
            Self::Cooldown {
                instance,
                aspect,
                remaining_secs,
            } => write!(
                f,
                "aspect {aspect:?} of VNF instance {instance} was scaled recently; cooldown ends in {remaining_secs} s"
            ),
            Self::OperationInProgress { instance } => write!(
                f,
                "an operation on VNF instance {instance} is in progress"
            ),
            Self::Duplicate { fingerprint } => write!(
                f,
                "alert {} with this startsAt was already received; it triggers one heal only",
                Shown(fingerprint)
            ),
            Self::Oversized {
                field,
                size,
                limit,
                key,
            } => {
                let unit = if field == "labels" { "labels" } else { "bytes" };
                let field = match field.char_indices().nth(SHOWN_CHARS) {
                    Some((cut, _)) => format!("{}...", field.get(..cut).unwrap_or_default()),
                    None => field.clone(),
                };
                write!(
                    f,
                    "{field} is {size} {unit}; expected at most {limit} ([prometheus_plugin] \
                     {key}); nothing of the alert is kept"
                )
            }
        }
    }
}

/// The camelCase spelling of an id label.
fn camel(snake: &str) -> &'static str {
    match snake {
        "vnf_instance_id" => "vnfInstanceId",
        "vnfc_info_id" => "vnfcInfoId",
        "aspect_id" => "aspectId",
        _ => "",
    }
}

/// Reads an id label in either spelling; `Err` when absent or conflicting.
fn id_label(alert: &Alert, snake: &'static str) -> Result<String, IgnoreReason> {
    let camel_name = camel(snake);
    match (alert.label(snake), alert.label(camel_name)) {
        (Some(a), Some(b)) if a != b => Err(IgnoreReason::ConflictingLabels {
            snake: (snake.to_owned(), a.to_owned()),
            camel: (camel_name.to_owned(), b.to_owned()),
        }),
        (Some(v), _) | (None, Some(v)) => Ok(v.to_owned()),
        (None, None) => Err(IgnoreReason::MissingLabel {
            label: snake.to_owned(),
        }),
    }
}

/// The VNF instance `alert` names (its label `vnf_instance_id` or `vnfInstanceId`, the two
/// equal when both are given), if any: the instance [`judge`] looks up, so that a caller with a
/// cache can load it first.
pub fn named_instance(alert: &Alert) -> Option<VnfInstanceId> {
    id_label(alert, "vnf_instance_id")
        .ok()
        .map(VnfInstanceId::new)
}

/// Judges one alert posted to `endpoint`; see the module docs for the steps.
pub fn judge(
    alert: &Alert,
    endpoint: Endpoint,
    config: &PrometheusPluginConfig,
    lookup: &dyn InstanceLookup,
) -> Decision {
    match judge_inner(alert, endpoint, config, lookup) {
        Ok(d) => d,
        Err(reason) => Decision::ignore(reason),
    }
}

/// Checks the sizes of what an alert brings against the bounds of `config`: its fingerprint,
/// the number of its labels, each label's name and value ([`IgnoreReason::Oversized`] for the
/// first one over). Step 0 of [`judge()`]. The other fields of a webhook (annotations, URLs,
/// group labels) are neither kept, logged nor echoed: `[server] body_limit` bounds them.
///
/// # Errors
/// The [`IgnoreReason::Oversized`] of the first value over its bound.
pub fn check_sizes(alert: &Alert, config: &PrometheusPluginConfig) -> Result<(), IgnoreReason> {
    let over = |field: String, size: usize, limit: usize, key: &str| IgnoreReason::Oversized {
        field,
        size,
        limit,
        key: key.to_owned(),
    };
    if alert.fingerprint.len() > config.max_fingerprint_bytes {
        return Err(over(
            "fingerprint".into(),
            alert.fingerprint.len(),
            config.max_fingerprint_bytes,
            "max_fingerprint_bytes",
        ));
    }
    if alert.labels.len() > config.max_labels {
        return Err(over(
            "labels".into(),
            alert.labels.len(),
            config.max_labels,
            "max_labels",
        ));
    }
    let limit = config.max_label_bytes;
    for (name, value) in &alert.labels {
        if name.len() > limit {
            return Err(over(
                "a label name".into(),
                name.len(),
                limit,
                "max_label_bytes",
            ));
        }
        if value.len() > limit {
            return Err(over(
                format!("labels.{name}"),
                value.len(),
                limit,
                "max_label_bytes",
            ));
        }
    }
    Ok(())
}

fn judge_inner(
    alert: &Alert,
    endpoint: Endpoint,
    config: &PrometheusPluginConfig,
    lookup: &dyn InstanceLookup,
) -> Result<Decision, IgnoreReason> {
    check_sizes(alert, config)?;
    if !alert.is_firing() {
        return Err(IgnoreReason::Resolved);
    }
    let receiver = alert.label("receiver_type");
    if !receiver.is_some_and(|r| config.accepts_receiver_type(r)) {
        return Err(IgnoreReason::ReceiverType {
            found: receiver.map(str::to_owned),
            expected: config.receiver_types.clone(),
        });
    }
    let function = alert.label("function_type");
    if function != Some(endpoint.function_type()) {
        return Err(IgnoreReason::FunctionType {
            found: function.map(str::to_owned),
            expected: endpoint.function_type().to_owned(),
        });
    }
    let scale_type = match endpoint {
        Endpoint::AutoHealing => None,
        Endpoint::AutoScaling => match alert.label("auto_scale_type") {
            Some("SCALE_OUT") => Some(ScaleType::ScaleOut),
            Some("SCALE_IN") => Some(ScaleType::ScaleIn),
            other => {
                return Err(IgnoreReason::AutoScaleType {
                    found: other.map(str::to_owned),
                })
            }
        },
    };
    let id = VnfInstanceId::new(id_label(alert, "vnf_instance_id")?);
    let Some(inst) = lookup.instance(&id) else {
        return Err(IgnoreReason::InstanceNotFound { instance: id });
    };
    let info = match (&inst.instantiated_vnf_info, inst.is_instantiated()) {
        (Some(info), true) => info,
        _ => return Err(IgnoreReason::NotInstantiated { instance: id }),
    };
    match scale_type {
        None => {
            if !inst.is_autoheal_enabled() {
                return Err(IgnoreReason::AutohealDisabled { instance: id });
            }
            let vnfc = id_label(alert, "vnfc_info_id")?;
            if !info.vnfc_info.iter().any(|v| v.id == vnfc) {
                return Err(IgnoreReason::UnknownVnfc { instance: id, vnfc });
            }
            Ok(Decision::Heal { instance: id, vnfc })
        }
        Some(type_) => {
            if !inst.is_autoscale_enabled() {
                return Err(IgnoreReason::AutoscaleDisabled { instance: id });
            }
            let aspect = id_label(alert, "aspect_id")?;
            let Some(level) = info.scale_level(&aspect) else {
                return Err(IgnoreReason::UnknownAspect {
                    instance: id,
                    aspect,
                });
            };
            let max = info
                .max_scale_levels
                .iter()
                .find(|s| s.aspect_id == aspect)
                .map(|s| s.scale_level);
            match type_ {
                ScaleType::ScaleOut if max.is_some_and(|m| level >= m) => {
                    Err(IgnoreReason::MaxScaleLevel {
                        instance: id,
                        aspect,
                        level,
                    })
                }
                ScaleType::ScaleIn if level == 0 => Err(IgnoreReason::MinScaleLevel {
                    instance: id,
                    aspect,
                }),
                _ => Ok(Decision::Scale {
                    instance: id,
                    aspect,
                    type_,
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::webhook::AlertStatus;
    use crate::lcm::{
        InstantiatedVnfInfo, InstantiationState, ScaleInfo, VnfOperationalStateType, VnfcInfo,
    };
    use chrono::TimeZone;
    use serde_json::json;

    fn alert(labels: &[(&str, &str)]) -> Alert {
        Alert {
            status: AlertStatus::Firing,
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            annotations: serde_json::Map::new(),
            starts_at: chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            ends_at: None,
            generator_url: String::new(),
            fingerprint: "f1".into(),
        }
    }

    fn heal_labels() -> Vec<(&'static str, &'static str)> {
        vec![
            ("receiver_type", "tacker"),
            ("function_type", "auto_heal"),
            ("vnf_instance_id", "i1"),
            ("vnfc_info_id", "VDU1-a"),
        ]
    }

    fn scale_labels(t: &'static str) -> Vec<(&'static str, &'static str)> {
        vec![
            ("receiver_type", "tacker"),
            ("function_type", "auto_scale"),
            ("vnf_instance_id", "i1"),
            ("auto_scale_type", t),
            ("aspect_id", "VDU1_aspect"),
        ]
    }

    fn instance(level: u32, max: Option<u32>) -> VnfInstance {
        let mut i = VnfInstance::new("i1", "d");
        i.instantiation_state = Some(InstantiationState::Instantiated);
        i.vnf_configurable_properties =
            json!({"isAutohealEnabled": true, "isAutoscaleEnabled": true})
                .as_object()
                .cloned();
        i.instantiated_vnf_info = Some(InstantiatedVnfInfo {
            vnfc_info: vec![VnfcInfo {
                id: "VDU1-a".into(),
                vdu_id: "VDU1".into(),
                vnfc_resource_info_id: Some("a".into()),
                vnfc_state: VnfOperationalStateType::Started,
                vnfc_configurable_properties: None,
            }],
            scale_status: vec![ScaleInfo {
                aspect_id: "VDU1_aspect".into(),
                vnfd_id: None,
                scale_level: level,
            }],
            max_scale_levels: max
                .map(|m| ScaleInfo {
                    aspect_id: "VDU1_aspect".into(),
                    vnfd_id: None,
                    scale_level: m,
                })
                .into_iter()
                .collect(),
            ..InstantiatedVnfInfo::default()
        });
        i
    }

    fn store(i: VnfInstance) -> BTreeMap<VnfInstanceId, VnfInstance> {
        BTreeMap::from([(i.id.clone(), i)])
    }

    fn cfg() -> PrometheusPluginConfig {
        PrometheusPluginConfig::default().with_all_enabled()
    }

    fn reason(d: Decision) -> IgnoreReason {
        match d {
            Decision::Ignore { reason } => reason,
            other => panic!("expected an ignore, got {other:?}"),
        }
    }

    #[test]
    fn heal_passes_the_chain() {
        let d = judge(
            &alert(&heal_labels()),
            Endpoint::AutoHealing,
            &cfg(),
            &store(instance(0, None)),
        );
        assert_eq!(
            d,
            Decision::Heal {
                instance: "i1".into(),
                vnfc: "VDU1-a".into()
            }
        );
        let camel = [
            ("receiver_type", "tacker"),
            ("function_type", "auto_heal"),
            ("vnfInstanceId", "i1"),
            ("vnfcInfoId", "VDU1-a"),
        ];
        assert_eq!(
            judge(
                &alert(&camel),
                Endpoint::AutoHealing,
                &cfg(),
                &store(instance(0, None))
            ),
            d
        );
    }

    #[test]
    fn the_named_instance_is_read_from_either_spelling() {
        let id = |labels: &[(&str, &str)]| named_instance(&alert(labels));
        assert_eq!(id(&[("vnf_instance_id", "i1")]), Some("i1".into()));
        assert_eq!(id(&[("vnfInstanceId", "i2")]), Some("i2".into()));
        assert_eq!(
            id(&[("vnf_instance_id", "i3"), ("vnfInstanceId", "i3")]),
            Some("i3".into())
        );
        assert_eq!(
            id(&[("vnf_instance_id", "a"), ("vnfInstanceId", "b")]),
            None
        );
        assert_eq!(id(&[("receiver_type", "tacker")]), None);
    }

    #[test]
    fn each_step_names_its_reason_in_order() {
        let s = store(instance(0, None));
        let c = cfg();
        let heal =
            |labels: &[(&str, &str)]| reason(judge(&alert(labels), Endpoint::AutoHealing, &c, &s));

        let mut resolved = alert(&heal_labels());
        resolved.status = AlertStatus::Resolved;
        assert_eq!(
            reason(judge(&resolved, Endpoint::AutoHealing, &c, &s)),
            IgnoreReason::Resolved
        );

        let r = heal(&[("function_type", "auto_heal")]);
        assert_eq!(r.label(), "receiver_type");
        assert_eq!(
            r.to_string(),
            "label receiver_type is absent; expected one of [\"tacker\"]"
        );
        let r = heal(&[("receiver_type", "other")]);
        assert_eq!(
            r.to_string(),
            "label receiver_type is \"other\"; expected one of [\"tacker\"]"
        );
        let r = heal(&[("receiver_type", "tacker"), ("function_type", "auto_scale")]);
        assert_eq!(
            r.to_string(),
            "label function_type is \"auto_scale\"; this endpoint expects \"auto_heal\""
        );
        let r = heal(&[("receiver_type", "tacker"), ("function_type", "auto_heal")]);
        assert_eq!(
            r.to_string(),
            "label vnf_instance_id (or vnfInstanceId) is absent"
        );
        let r = heal(&[
            ("receiver_type", "tacker"),
            ("function_type", "auto_heal"),
            ("vnf_instance_id", "i1"),
            ("vnfInstanceId", "i2"),
        ]);
        assert_eq!(r.label(), "conflicting_labels");
        assert_eq!(
            r.to_string(),
            "labels vnf_instance_id=\"i1\" and vnfInstanceId=\"i2\" disagree; expected one of them, or equal values"
        );
        let r = heal(&[
            ("receiver_type", "tacker"),
            ("function_type", "auto_heal"),
            ("vnf_instance_id", "nope"),
        ]);
        assert_eq!(
            r,
            IgnoreReason::InstanceNotFound {
                instance: "nope".into()
            }
        );
        let r = heal(&[
            ("receiver_type", "tacker"),
            ("function_type", "auto_heal"),
            ("vnf_instance_id", "i1"),
        ]);
        assert_eq!(
            r.to_string(),
            "label vnfc_info_id (or vnfcInfoId) is absent"
        );
        let mut labels = heal_labels();
        labels[3] = ("vnfc_info_id", "VDU9-z");
        let r = heal(&labels);
        assert_eq!(
            r.to_string(),
            "vnfc_info_id \"VDU9-z\" is not in instantiatedVnfInfo.vnfcInfo of VNF instance i1"
        );

        // instance state and flags
        let mut i = instance(0, None);
        i.instantiation_state = Some(InstantiationState::NotInstantiated);
        let r = reason(judge(
            &alert(&heal_labels()),
            Endpoint::AutoHealing,
            &c,
            &store(i),
        ));
        assert_eq!(r.label(), "not_instantiated");
        let mut i = instance(0, None);
        i.instantiated_vnf_info = None;
        let r = reason(judge(
            &alert(&heal_labels()),
            Endpoint::AutoHealing,
            &c,
            &store(i),
        ));
        assert_eq!(r.label(), "not_instantiated");
        let mut i = instance(0, None);
        i.vnf_configurable_properties = None;
        let s2 = store(i);
        assert_eq!(
            reason(judge(
                &alert(&heal_labels()),
                Endpoint::AutoHealing,
                &c,
                &s2
            ))
            .label(),
            "autoheal_disabled"
        );
        assert_eq!(
            reason(judge(
                &alert(&scale_labels("SCALE_OUT")),
                Endpoint::AutoScaling,
                &c,
                &s2
            ))
            .label(),
            "autoscale_disabled"
        );
    }

    #[test]
    fn scale_checks_type_aspect_and_levels() {
        let c = cfg();
        let scale = |labels: &[(&str, &str)], i: VnfInstance| {
            judge(&alert(labels), Endpoint::AutoScaling, &c, &store(i))
        };
        assert_eq!(
            scale(&scale_labels("SCALE_OUT"), instance(0, Some(2))),
            Decision::Scale {
                instance: "i1".into(),
                aspect: "VDU1_aspect".into(),
                type_: ScaleType::ScaleOut
            }
        );
        assert_eq!(
            scale(&scale_labels("SCALE_IN"), instance(1, Some(2))),
            Decision::Scale {
                instance: "i1".into(),
                aspect: "VDU1_aspect".into(),
                type_: ScaleType::ScaleIn
            }
        );
        let r = reason(scale(&scale_labels("SCALE_UP"), instance(0, None)));
        assert_eq!(
            r.to_string(),
            "label auto_scale_type is \"SCALE_UP\"; expected \"SCALE_OUT\" or \"SCALE_IN\""
        );
        let r = reason(scale(&scale_labels("SCALE_OUT"), instance(2, Some(2))));
        assert_eq!(r.label(), "max_scale_level");
        assert!(r.to_string().contains("maximum scale level 2"), "{r}");
        // no maxScaleLevels entry: the upper bound is left to the LCM operation
        assert!(matches!(
            scale(&scale_labels("SCALE_OUT"), instance(7, None)),
            Decision::Scale { .. }
        ));
        let r = reason(scale(&scale_labels("SCALE_IN"), instance(0, Some(2))));
        assert_eq!(r.label(), "min_scale_level");
        let mut labels = scale_labels("SCALE_OUT");
        labels[4] = ("aspectId", "other");
        let r = reason(scale(&labels, instance(0, None)));
        assert_eq!(
            r.to_string(),
            "aspect_id \"other\" is not in instantiatedVnfInfo.scaleStatus of VNF instance i1"
        );
        // a heal alert on the scale endpoint
        let r = reason(scale(&heal_labels(), instance(0, None)));
        assert_eq!(r.label(), "function_type");
    }

    #[test]
    fn configured_receiver_types_and_closure_lookup() {
        let mut c = cfg();
        c.receiver_types = vec!["vnfm".into()];
        let mut labels = heal_labels();
        labels[0] = ("receiver_type", "vnfm");
        let inst = instance(0, None);
        let lookup = move |id: &VnfInstanceId| (id.as_str() == "i1").then(|| inst.clone());
        assert!(matches!(
            judge(&alert(&labels), Endpoint::AutoHealing, &c, &lookup),
            Decision::Heal { .. }
        ));
        assert_eq!(
            reason(judge(
                &alert(&heal_labels()),
                Endpoint::AutoHealing,
                &c,
                &lookup
            ))
            .label(),
            "receiver_type"
        );
    }

    #[test]
    fn labels_match_the_serde_tag_and_are_unique() {
        let samples = vec![
            IgnoreReason::Resolved,
            IgnoreReason::ReceiverType {
                found: None,
                expected: vec![],
            },
            IgnoreReason::FunctionType {
                found: None,
                expected: "auto_heal".into(),
            },
            IgnoreReason::AutoScaleType { found: None },
            IgnoreReason::MissingLabel {
                label: "aspect_id".into(),
            },
            IgnoreReason::ConflictingLabels {
                snake: ("a".into(), "1".into()),
                camel: ("b".into(), "2".into()),
            },
            IgnoreReason::InstanceNotFound {
                instance: "i".into(),
            },
            IgnoreReason::NotInstantiated {
                instance: "i".into(),
            },
            IgnoreReason::AutohealDisabled {
                instance: "i".into(),
            },
            IgnoreReason::AutoscaleDisabled {
                instance: "i".into(),
            },
            IgnoreReason::UnknownVnfc {
                instance: "i".into(),
                vnfc: "v".into(),
            },
            IgnoreReason::UnknownAspect {
                instance: "i".into(),
                aspect: "a".into(),
            },
            IgnoreReason::MaxScaleLevel {
                instance: "i".into(),
                aspect: "a".into(),
                level: 1,
            },
            IgnoreReason::MinScaleLevel {
                instance: "i".into(),
                aspect: "a".into(),
            },
            IgnoreReason::Cooldown {
                instance: "i".into(),
                aspect: "a".into(),
                remaining_secs: 3,
            },
            IgnoreReason::OperationInProgress {
                instance: "i".into(),
            },
            IgnoreReason::Duplicate {
                fingerprint: "f".into(),
            },
            IgnoreReason::Oversized {
                field: "fingerprint".into(),
                size: 200,
                limit: 128,
                key: "max_fingerprint_bytes".into(),
            },
        ];
        assert_eq!(samples.len(), IgnoreReason::LABELS.len());
        for (r, label) in samples.iter().zip(IgnoreReason::LABELS) {
            assert_eq!(r.label(), label);
            let v = serde_json::to_value(r).unwrap();
            assert_eq!(v["reason"], label);
            assert_eq!(&serde_json::from_value::<IgnoreReason>(v).unwrap(), r);
            assert!(!r.to_string().is_empty());
            assert!(!r.to_string().ends_with('.'), "{r}");
        }
        let d = serde_json::to_value(Decision::Scale {
            instance: "i".into(),
            aspect: "a".into(),
            type_: ScaleType::ScaleIn,
        })
        .unwrap();
        assert_eq!(
            d,
            json!({"decision": "scale", "instance": "i", "aspect": "a", "type": "SCALE_IN"})
        );
    }
}
