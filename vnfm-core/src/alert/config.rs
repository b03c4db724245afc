//! `[prometheus_plugin]`: the alert endpoints ([`Endpoint`]), which of them are on, and how alerts
//! are batched and damped.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Location};
use crate::problem::ProblemDetails;

/// The alert endpoint a webhook was posted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `POST /alert/auto_healing`
    AutoHealing,
    /// `POST /alert/auto_scaling`
    AutoScaling,
}

impl Endpoint {
    /// The HTTP path.
    pub fn path(self) -> &'static str {
        match self {
            Self::AutoHealing => "/alert/auto_healing",
            Self::AutoScaling => "/alert/auto_scaling",
        }
    }

    /// The `function_type` label this endpoint acts on: `auto_heal` or `auto_scale`.
    pub fn function_type(self) -> &'static str {
        match self {
            Self::AutoHealing => "auto_heal",
            Self::AutoScaling => "auto_scale",
        }
    }
}

/// The `[prometheus_plugin]` section of `vnfm.toml` (names as Tacker's options of the same
/// section, plus vnfm's own `scale_cooldown` and de-duplication bounds).
///
/// Every field has a default, so an empty section (or none) is valid; unknown keys are
/// rejected so that a misspelt option does not pass silently.
///
/// ```
/// use vnfm_core::alert::PrometheusPluginConfig;
/// // vnfm.toml's `[prometheus_plugin]`, shown here as the equivalent JSON
/// let c: PrometheusPluginConfig =
///     serde_json::from_str(r#"{"auto_healing": true, "timer_interval": 5}"#).unwrap();
/// assert!(c.auto_healing && !c.auto_scaling);
/// assert_eq!(c.timer_interval, 5);
/// assert_eq!(c.scale_cooldown, 300);
/// assert_eq!(c.receiver_types, ["tacker"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrometheusPluginConfig {
    /// Serve `POST /alert/auto_healing` (default `false`: the endpoint answers 404).
    pub auto_healing: bool,
    /// Serve `POST /alert/auto_scaling` (default `false`: the endpoint answers 404).
    pub auto_scaling: bool,
    /// Seconds an auto-heal window stays open after the first alert for an instance; every
    /// VNFC alerted meanwhile is healed by the same operation (default 20, Tacker's).
    pub timer_interval: u64,
    /// Seconds after an auto-scale of an (instance, aspect) during which further scale alerts
    /// for it are ignored (default 300: long enough for a scaled VNFC to boot and for the
    /// monitored load to settle before the next step, the usual cloud autoscaler cooldown;
    /// Tacker has none).
    pub scale_cooldown: u64,
    /// Accepted values of the `receiver_type` label (default `["tacker"]`).
    pub receiver_types: Vec<String>,
    /// Seconds an auto-heal alert occurrence is remembered after it was last received, so that
    /// Alertmanager's re-sends never heal twice (default 86400; keep it above Alertmanager's
    /// `repeat_interval`, 4 h by default).
    pub dedupe_ttl: u64,
    /// At most this many alert occurrences are remembered; beyond it the least recently seen
    /// is forgotten first (default 10000).
    pub dedupe_capacity: usize,
    /// The longest `fingerprint` an alert may carry, in bytes (default 128; Alertmanager's are
    /// 16 hex digits). A longer one ignores its alert (`oversized`): the fingerprint is what
    /// the de-duplication memory, the heal windows and the saved alert state keep.
    pub max_fingerprint_bytes: usize,
    /// The most labels an alert may carry (default 64). More ignore the alert (`oversized`).
    pub max_labels: usize,
    /// The longest label name or value, in bytes (default 4096). A longer one ignores its
    /// alert (`oversized`): label values are what the log lines about ignored alerts quote.
    pub max_label_bytes: usize,
}

/// Default of [`PrometheusPluginConfig::timer_interval`], in seconds.
pub const DEFAULT_TIMER_INTERVAL: u64 = 20;
/// Default of [`PrometheusPluginConfig::scale_cooldown`], in seconds.
pub const DEFAULT_SCALE_COOLDOWN: u64 = 300;
/// Default of [`PrometheusPluginConfig::dedupe_ttl`], in seconds.
pub const DEFAULT_DEDUPE_TTL: u64 = 24 * 60 * 60;
/// Default of [`PrometheusPluginConfig::dedupe_capacity`].
pub const DEFAULT_DEDUPE_CAPACITY: usize = 10_000;
/// Default of [`PrometheusPluginConfig::max_fingerprint_bytes`].
pub const DEFAULT_MAX_FINGERPRINT_BYTES: usize = 128;
/// The least [`PrometheusPluginConfig::max_fingerprint_bytes`] accepted: Alertmanager's
/// fingerprints are 16 hex digits.
pub const MIN_FINGERPRINT_BYTES: usize = 16;
/// Default of [`PrometheusPluginConfig::max_labels`].
pub const DEFAULT_MAX_LABELS: usize = 64;
/// Default of [`PrometheusPluginConfig::max_label_bytes`].
pub const DEFAULT_MAX_LABEL_BYTES: usize = 4096;

impl Default for PrometheusPluginConfig {
    fn default() -> Self {
        Self {
            auto_healing: false,
            auto_scaling: false,
            timer_interval: DEFAULT_TIMER_INTERVAL,
            scale_cooldown: DEFAULT_SCALE_COOLDOWN,
            receiver_types: vec!["tacker".to_owned()],
            dedupe_ttl: DEFAULT_DEDUPE_TTL,
            dedupe_capacity: DEFAULT_DEDUPE_CAPACITY,
            max_fingerprint_bytes: DEFAULT_MAX_FINGERPRINT_BYTES,
            max_labels: DEFAULT_MAX_LABELS,
            max_label_bytes: DEFAULT_MAX_LABEL_BYTES,
        }
    }
}

impl PrometheusPluginConfig {
    /// The same configuration with both endpoints on.
    pub fn with_all_enabled(mut self) -> Self {
        self.auto_healing = true;
        self.auto_scaling = true;
        self
    }

    /// Whether `endpoint` is served.
    pub fn is_enabled(&self, endpoint: Endpoint) -> bool {
        match endpoint {
            Endpoint::AutoHealing => self.auto_healing,
            Endpoint::AutoScaling => self.auto_scaling,
        }
    }

    /// `Ok` when `endpoint` is served, else the 404 problem Tacker answers (same detail text:
    /// `Auto healing API is not enabled.` / `Auto scaling API is not enabled.`).
    ///
    /// # Errors
    /// The 404 [`ProblemDetails`] when the endpoint is off.
    pub fn check_enabled(&self, endpoint: Endpoint) -> Result<(), Box<ProblemDetails>> {
        if self.is_enabled(endpoint) {
            return Ok(());
        }
        let what = match endpoint {
            Endpoint::AutoHealing => "Auto healing",
            Endpoint::AutoScaling => "Auto scaling",
        };
        Err(Box::new(
            ProblemDetails::new(404, format!("{what} API is not enabled.")).with_title("Not Found"),
        ))
    }

    /// Whether `value` is an accepted `receiver_type`.
    pub fn accepts_receiver_type(&self, value: &str) -> bool {
        self.receiver_types.iter().any(|r| r == value)
    }

    /// Checks what serde cannot: `timer_interval` ≥ 1, `dedupe_ttl` ≥ `timer_interval`,
    /// `dedupe_capacity` ≥ 1, a non-empty list of non-empty `receiver_types`,
    /// `max_fingerprint_bytes` ≥ [`MIN_FINGERPRINT_BYTES`], `max_labels` and `max_label_bytes`
    /// ≥ 1.
    ///
    /// # Errors
    /// [`Error::Invalid`] at the field path `prometheus_plugin.<option>` with the value and what
    /// was expected.
    pub fn validate(&self) -> Result<(), Error> {
        let at = |field: &str| Location::default().with_field(format!("prometheus_plugin.{field}"));
        if self.timer_interval == 0 {
            return Err(Error::invalid(
                at("timer_interval"),
                "timer_interval is 0; expected at least 1 second",
            ));
        }
        if self.dedupe_ttl < self.timer_interval {
            return Err(Error::invalid(
                at("dedupe_ttl"),
                format!(
                    "dedupe_ttl {} is shorter than timer_interval {}; expected at least timer_interval seconds",
                    self.dedupe_ttl, self.timer_interval
                ),
            ));
        }
        if self.dedupe_capacity == 0 {
            return Err(Error::invalid(
                at("dedupe_capacity"),
                "dedupe_capacity is 0; expected at least 1",
            ));
        }
        if self.receiver_types.is_empty() {
            return Err(Error::invalid(
                at("receiver_types"),
                "receiver_types is empty; expected at least one name such as \"tacker\"",
            ));
        }
        if let Some(i) = self.receiver_types.iter().position(String::is_empty) {
            return Err(Error::invalid(
                at(&format!("receiver_types[{i}]")),
                "receiver type is empty; expected a name such as \"tacker\"",
            ));
        }
        if self.max_fingerprint_bytes < MIN_FINGERPRINT_BYTES {
            return Err(Error::invalid(
                at("max_fingerprint_bytes"),
                format!(
                    "max_fingerprint_bytes is {}; expected at least {MIN_FINGERPRINT_BYTES} \
                     (Alertmanager's fingerprints are 16 hex digits)",
                    self.max_fingerprint_bytes
                ),
            ));
        }
        for (key, value) in [
            ("max_labels", self.max_labels),
            ("max_label_bytes", self.max_label_bytes),
        ] {
            if value == 0 {
                return Err(Error::invalid(
                    at(key),
                    format!("{key} is 0; expected at least 1 (every alert would be ignored)"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_toml() {
        let c = PrometheusPluginConfig::default();
        assert!(!c.auto_healing && !c.auto_scaling);
        assert_eq!(c.timer_interval, 20);
        assert_eq!(c.scale_cooldown, 300);
        assert_eq!(c.receiver_types, vec!["tacker".to_owned()]);
        c.validate().unwrap();
        let parsed: PrometheusPluginConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(parsed, c);
        let parsed: PrometheusPluginConfig = serde_json::from_str(
            r#"{"auto_scaling": true, "scale_cooldown": 60, "receiver_types": ["tacker", "vnfm"]}"#,
        )
        .unwrap();
        assert!(parsed.auto_scaling && parsed.accepts_receiver_type("vnfm"));
        assert!(!parsed.accepts_receiver_type("other"));
        assert_eq!(parsed.scale_cooldown, 60);
        let e = serde_json::from_str::<PrometheusPluginConfig>(r#"{"timer_intervall": 3}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `timer_intervall`"), "{e}");
    }

    #[test]
    fn endpoint_switches_answer_tackers_404() {
        let c = PrometheusPluginConfig::default();
        let p = c.check_enabled(Endpoint::AutoHealing).unwrap_err();
        assert_eq!(p.status, 404);
        assert_eq!(p.detail, "Auto healing API is not enabled.");
        let p = c.check_enabled(Endpoint::AutoScaling).unwrap_err();
        assert_eq!(p.detail, "Auto scaling API is not enabled.");
        let on = c.with_all_enabled();
        assert!(on.check_enabled(Endpoint::AutoHealing).is_ok());
        assert!(on.check_enabled(Endpoint::AutoScaling).is_ok());
    }

    #[test]
    fn validate_names_the_option() {
        let bad = |f: fn(&mut PrometheusPluginConfig)| {
            let mut c = PrometheusPluginConfig::default();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert_eq!(
            bad(|c| c.timer_interval = 0),
            "prometheus_plugin.timer_interval: timer_interval is 0; expected at least 1 second"
        );
        assert!(bad(|c| c.dedupe_ttl = 5)
            .starts_with("prometheus_plugin.dedupe_ttl: dedupe_ttl 5 is shorter"));
        assert!(bad(|c| c.dedupe_capacity = 0).starts_with("prometheus_plugin.dedupe_capacity: "));
        assert!(bad(|c| c.receiver_types.clear()).starts_with("prometheus_plugin.receiver_types: "));
        assert!(bad(|c| c.receiver_types.push(String::new()))
            .starts_with("prometheus_plugin.receiver_types[1]: "));
        assert!(bad(|c| c.max_fingerprint_bytes = 15)
            .starts_with("prometheus_plugin.max_fingerprint_bytes: max_fingerprint_bytes is 15;"));
        assert!(bad(|c| c.max_labels = 0).starts_with("prometheus_plugin.max_labels: "));
        assert!(bad(|c| c.max_label_bytes = 0).starts_with("prometheus_plugin.max_label_bytes: "));
    }
}
