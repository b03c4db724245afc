//! Prometheus-driven auto-heal and auto-scale: the Alertmanager webhook model, the validation
//! chain, heal batching with de-duplication, and the scale cooldown. Pure and sans-IO: the
//! HTTP server hands in the request body, `now` and an instance lookup, and gets back what to
//! answer and which operations to run.
//!
//! Tacker's design ("Support VNFM for AutoHeal and AutoScale with External Monitoring Tools")
//! is the reference: `POST /alert/auto_healing` and `POST /alert/auto_scaling` take
//! Alertmanager's webhook, each alert is validated on its own, heals are gathered per VNF
//! instance for `timer_interval` seconds, scales run at once.
//!
//! ## Pieces
//! - [`webhook`]: [`Webhook`] and [`Alert`] (version 4), parsed by [`Webhook::from_slice`] with
//!   an error that names the field and what was expected (answer it with [`bad_request`]).
//! - [`judge`](mod@judge): the validation chain, [`judge()`] → [`Decision`] (`Heal`, `Scale`,
//!   `Ignore { reason }`) with [`IgnoreReason`] (stable snake_case [`IgnoreReason::label`]).
//! - [`heal`]: [`HealBatcher`], windows, de-duplication, busy queue, snapshot / restore.
//! - [`scale`]: [`ScaleCooldown`], one step per alert, cooldown per (instance, aspect).
//! - [`config`]: [`PrometheusPluginConfig`], the `[prometheus_plugin]` section, and the
//!   [`Endpoint`]s it turns on.
//! - [`AlertHandler`] puts them together for the server: `handle_webhook` per request,
//!   `poll_due` / `poll_timeout` for the heal timer, `mark_busy` / `mark_idle` around
//!   operations, `snapshot` / `restore` across restarts.
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use vnfm_core::alert::{Action, AlertHandler, Endpoint, PrometheusPluginConfig};
//! use vnfm_core::id::VnfInstanceId;
//! use vnfm_core::lcm::VnfInstance;
//!
//! let mut handler = AlertHandler::new(PrometheusPluginConfig::default().with_all_enabled());
//! let store = |_: &VnfInstanceId| -> Option<VnfInstance> { None };
//! let body = br#"{"alerts": [{"status": "firing", "labels": {"receiver_type": "tacker",
//!     "function_type": "auto_heal", "vnf_instance_id": "gone", "vnfc_info_id": "VDU1-x"},
//!     "annotations": {}, "startsAt": "2026-11-21T10:15:12Z", "fingerprint": "0522bf86a31113e2"}]}"#;
//! let now = Utc.with_ymd_and_hms(2026, 11, 21, 10, 15, 13).unwrap();
//! let outcomes = handler.handle_webhook(Endpoint::AutoHealing, body, &store, now).unwrap();
//! let Action::Ignored(reason) = &outcomes[0].action else { unreachable!() };
//! assert_eq!(reason.label(), "instance_not_found");
//! assert!(handler.poll_due(now).is_empty());
//!
//! let problem = handler.handle_webhook(Endpoint::AutoHealing, b"{}", &store, now).unwrap_err();
//! assert_eq!(problem.status, 400);
//! assert_eq!(problem.detail, "alerts: missing mandatory attribute `alerts`; expected an array of alerts");
//! ```
//!
//! ## Tacker's expected outcomes, and where vnfm differs on purpose
//!
//! `tests/alert_vectors.rs` runs every scenario of Tacker's `alert_cases.json` and every
//! captured Alertmanager request. The mapping:
//!
//! | Tacker case | Tacker | vnfm |
//! |---|---|---|
//! | `auto_healing_config_false`, `auto_scaling_config_false` | 404 `Auto … API is not enabled.` | the same 404 ([`PrometheusPluginConfig::check_enabled`]) |
//! | `auto_healing_is_autoheal_enabled` | heal enqueued, runs after `timer_interval` | [`Action::HealQueued`], one [`HealJob`] from `poll_due` after the window |
//! | `auto_healing_no_autoheal_enabled` | nothing | `autoheal_disabled` |
//! | `auto_healing_multiple_continue` | nothing (resolved, wrong function, unknown VNFC) | `resolved`, `function_type`, `unknown_vnfc` |
//! | `auto_healing_not_instantiated` | nothing, pending timer cancelled | `not_instantiated`, pending window cancelled |
//! | `auto_healing_instance_not_found` | alert skipped | `instance_not_found`, and the window is cancelled too (see 3) |
//! | `auto_scaling_is_autoscale_enabled` (and `…_set_callback_none`) | one SCALE_OUT of `aspect`, the `vnffm` alert skipped | [`Action::Scale`] with one step, `function_type` for the second |
//! | `auto_scaling_no_autoscale_enabled` | nothing | `autoscale_disabled`, `function_type` |
//! | `auto_scaling_multiple_continue` | nothing (resolved, wrong function, unknown aspect) | `resolved`, `function_type`, `unknown_aspect` |
//! | `auto_scaling_not_instantiated` | nothing | `not_instantiated`, `function_type` |
//! | `auto_scaling_error_body` (`{}`) | 204, the schema error logged | **400** (see 1) |
//!
//! Deliberate differences:
//! 1. **A malformed body is a 400**, with a `ProblemDetails` naming the field, not a silent
//!    204: Alertmanager never sends one, so whoever does has a bug to be told about.
//! 2. **Re-sent alerts do not heal twice.** Tacker heals again each time Alertmanager repeats a
//!    still-firing alert after the timer fired; vnfm remembers each occurrence (fingerprint,
//!    `startsAt`, VNFC) and answers `duplicate` (bounded memory, see [`heal`]).
//! 3. **A window is cancelled when the instance is gone** as well as when it is not
//!    instantiated (Tacker only does the latter; the heal would fail anyway).
//! 4. **Heals of an instance never overlap another operation on it**: windows that close while
//!    it is busy wait for [`AlertHandler::mark_idle`] (Tacker fires the timer regardless).
//! 5. **Scale is damped and bounded**: a cooldown per (instance, aspect) (`cooldown`), no
//!    SCALE_OUT at `maxScaleLevels` (`max_scale_level`) and no SCALE_IN at 0
//!    (`min_scale_level`), no scale while an operation runs (`operation_in_progress`). Tacker
//!    scales on every alert and lets the operation fail. Tacker's functional test posts a
//!    SCALE_IN seconds after the SCALE_OUT; with the default `scale_cooldown` (300 s) vnfm
//!    ignores it (`cooldown`), with `scale_cooldown = 0` it runs it.
//! 6. **camelCase id labels** (`vnfInstanceId`, `vnfcInfoId`, `aspectId`) are accepted as well,
//!    and an alert whose two spellings disagree is ignored (`conflicting_labels`). A missing
//!    label ignores that alert only (`missing_label`); the other alerts of the request proceed.

pub mod config;
pub mod heal;
pub mod judge;
pub mod scale;
pub mod webhook;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use config::{Endpoint, PrometheusPluginConfig};
pub use heal::{HealBatcher, HealBatcherState, HealJob, HealOutcome};
pub use judge::{judge, named_instance, Decision, IgnoreReason, InstanceLookup};
pub use scale::{ScaleCooldown, ScaleCooldownState, ScaleJob};
pub use webhook::{Alert, AlertKey, AlertStatus, Webhook};

use crate::error::Error;
use crate::id::VnfInstanceId;
use crate::problem::ProblemDetails;

/// The 400 `ProblemDetails` for a body [`Webhook::from_slice`] rejected; `detail` is the error
/// text (field path, value, expectation).
pub fn bad_request(error: &Error) -> ProblemDetails {
    ProblemDetails::new(400, error.to_string()).with_title("Bad Request")
}

impl Endpoint {
    /// The endpoint served at `path`, if any.
    pub fn from_path(path: &str) -> Option<Self> {
        [Self::AutoHealing, Self::AutoScaling]
            .into_iter()
            .find(|e| e.path() == path)
    }
}

/// What became of one alert of a webhook.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertOutcome {
    /// The alert's index in `alerts`.
    pub index: usize,
    /// The alert's fingerprint.
    pub fingerprint: String,
    /// What was done.
    pub action: Action,
}

impl AlertOutcome {
    /// Whether the state change this alert made must be saved before the webhook is answered:
    /// it was accepted (joined or opened a heal window, started a scale's cooldown), or it
    /// named an instance that is gone or not instantiated (its heal window, if any, was
    /// cancelled). What an ignored alert otherwise changes (when a duplicate was last seen, a
    /// resolved alert forgotten) may be saved later: lost, a repeat of the alert is judged as
    /// a new one. A webhook none of whose alerts must be saved needs no write before its answer.
    pub fn must_be_saved(&self) -> bool {
        match &self.action {
            Action::HealQueued { .. } | Action::Scale(_) => true,
            Action::Ignored(
                IgnoreReason::NotInstantiated { .. } | IgnoreReason::InstanceNotFound { .. },
            ) => true,
            Action::Ignored(_) => false,
        }
    }
}

/// What [`AlertHandler`] did with one alert.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// The VNFC joined (or opened) the instance's heal window, which closes at `due`.
    HealQueued {
        /// The VNF instance.
        instance: VnfInstanceId,
        /// The `VnfcInfo.id`.
        vnfc: String,
        /// When the window closes (the heal runs at the first `poll_due` from then on, once the
        /// instance is idle).
        due: DateTime<Utc>,
    },
    /// Run this scale now; its instance is marked busy until [`AlertHandler::mark_idle`].
    Scale(ScaleJob),
    /// Nothing to do.
    Ignored(IgnoreReason),
}

/// One accepted auto-heal alert, as a journal entry: applying it with
/// [`AlertHandler::replay_heal`] to the state saved before it gives the state after it. A
/// server saves these (small, append-only) before answering, instead of the whole
/// [`AlertState`] for every accepted alert, and folds them into a snapshot from time to time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealEntry {
    /// The VNF instance.
    pub instance: VnfInstanceId,
    /// The `VnfcInfo.id`.
    pub vnfc: String,
    /// The alert occurrence.
    pub alert: AlertKey,
    /// When it was handled.
    pub at: DateTime<Utc>,
}

/// The persistent state of an [`AlertHandler`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlertState {
    /// Heal windows and remembered alerts.
    pub heal: HealBatcherState,
    /// Scales cooling down.
    pub scale: ScaleCooldownState,
}

/// The alert endpoints' state machine: the configuration, a [`HealBatcher`] and a
/// [`ScaleCooldown`]. Sans-IO: every input comes with `now`, operations come out as
/// [`HealJob`]s and [`ScaleJob`]s for the caller to run (automatic invocations); the caller
/// reports their end with [`AlertHandler::mark_idle`].
#[derive(Clone, Debug)]
pub struct AlertHandler {
    config: PrometheusPluginConfig,
    heal: HealBatcher,
    scale: ScaleCooldown,
}

impl AlertHandler {
    /// A handler for `config` (validate it first with [`PrometheusPluginConfig::validate`]).
    pub fn new(config: PrometheusPluginConfig) -> Self {
        Self {
            heal: HealBatcher::from_config(&config),
            scale: ScaleCooldown::new(config.scale_cooldown),
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PrometheusPluginConfig {
        &self.config
    }

    /// The heal batcher (pending windows, busy marks).
    pub fn heal_batcher(&self) -> &HealBatcher {
        &self.heal
    }

    /// Whether an operation on `instance` is in progress.
    pub fn is_busy(&self, instance: &VnfInstanceId) -> bool {
        self.heal.is_busy(instance)
    }

    /// Handles one request body posted to `endpoint` at `now`: the outcome of each alert, in
    /// order. The server answers 204 on `Ok`.
    ///
    /// # Errors
    /// The `ProblemDetails` to answer: 404 when the endpoint is off (Tacker's text), 400 when
    /// the body is not a valid webhook (see [`Webhook::from_slice`]).
    pub fn handle_webhook(
        &mut self,
        endpoint: Endpoint,
        body: &[u8],
        lookup: &dyn InstanceLookup,
        now: DateTime<Utc>,
    ) -> Result<Vec<AlertOutcome>, Box<ProblemDetails>> {
        self.config.check_enabled(endpoint)?;
        let webhook = Webhook::from_slice(body).map_err(|e| Box::new(bad_request(&e)))?;
        Ok(self.handle_alerts(endpoint, &webhook, lookup, now))
    }

    /// Handles the alerts of a parsed webhook posted to `endpoint` at `now` (whether the
    /// endpoint is on is not checked here).
    pub fn handle_alerts(
        &mut self,
        endpoint: Endpoint,
        webhook: &Webhook,
        lookup: &dyn InstanceLookup,
        now: DateTime<Utc>,
    ) -> Vec<AlertOutcome> {
        webhook
            .alerts
            .iter()
            .enumerate()
            .map(|(index, alert)| AlertOutcome {
                index,
                fingerprint: alert.fingerprint.clone(),
                action: self.handle_alert(endpoint, alert, lookup, now),
            })
            .collect()
    }

    fn handle_alert(
        &mut self,
        endpoint: Endpoint,
        alert: &Alert,
        lookup: &dyn InstanceLookup,
        now: DateTime<Utc>,
    ) -> Action {
        let decision = judge(alert, endpoint, &self.config, lookup);
        let oversized = matches!(
            decision.ignore_reason(),
            Some(IgnoreReason::Oversized { .. })
        );
        if !alert.is_firing() && endpoint == Endpoint::AutoHealing && !oversized {
            self.heal.forget(&alert.key());
        }
        match decision {
            Decision::Heal { instance, vnfc } => {
                match self.heal.handle_alert(&instance, &vnfc, &alert.key(), now) {
                    HealOutcome::Opened { due } | HealOutcome::Joined { due } => {
                        Action::HealQueued {
                            instance,
                            vnfc,
                            due,
                        }
                    }
                    HealOutcome::Duplicate => Action::Ignored(IgnoreReason::Duplicate {
                        fingerprint: alert.fingerprint.clone(),
                    }),
                }
            }
            Decision::Scale {
                instance,
                aspect,
                type_,
            } => {
                if self.heal.is_busy(&instance) {
                    return Action::Ignored(IgnoreReason::OperationInProgress { instance });
                }
                match self.scale.admit(&instance, &aspect, type_, now) {
                    Ok(job) => {
                        self.heal.mark_busy(&instance);
                        Action::Scale(job)
                    }
                    Err(reason) => Action::Ignored(reason),
                }
            }
            Decision::Ignore { reason } => {
                if endpoint == Endpoint::AutoHealing {
                    if let IgnoreReason::NotInstantiated { instance }
                    | IgnoreReason::InstanceNotFound { instance } = &reason
                    {
                        self.heal.cancel(instance);
                    }
                }
                Action::Ignored(reason)
            }
        }
    }

    /// The heal windows closed at `now` whose instance is idle, as jobs to run now; each marks
    /// its instance busy. Before running one, reload its instance and apply
    /// [`HealJob::retain_existing`] (VNFCs may have gone while the window was open).
    pub fn poll_due(&mut self, now: DateTime<Utc>) -> Vec<HealJob> {
        self.heal.poll_due(now)
    }

    /// When [`AlertHandler::poll_due`] next has a job (sleep until then, or until the next
    /// request or [`AlertHandler::mark_idle`]).
    pub fn poll_timeout(&self) -> Option<DateTime<Utc>> {
        self.heal.poll_timeout()
    }

    /// Marks an operation on `instance` in progress (started by someone else, e.g. the LCM
    /// API, or still running after a restart).
    pub fn mark_busy(&mut self, instance: &VnfInstanceId) {
        self.heal.mark_busy(instance);
    }

    /// Marks the operation on `instance` over; a heal that waited for it is due again.
    pub fn mark_idle(&mut self, instance: &VnfInstanceId) {
        self.heal.mark_idle(instance);
    }

    /// An event of the lifecycle's [`crate::lifecycle::Occupancy`]: a taken instance is busy,
    /// an ended operation makes it idle (a heal that waited for it is due again), as quinn's
    /// endpoint hands connection events out.
    pub fn handle_operation_event(&mut self, event: &crate::lifecycle::OperationEvent) {
        match event {
            crate::lifecycle::OperationEvent::Taken { instance } => self.mark_busy(instance),
            crate::lifecycle::OperationEvent::Ended { instance, .. } => self.mark_idle(instance),
        }
    }

    /// The heal of `job` (from [`AlertHandler::poll_due`]) did not start, and the caller has
    /// marked its instance idle. When an operation that is not over holds the instance
    /// (`held`: e.g. one that another program started on the state file), the job waits for
    /// it like a window that closed during an operation (see [`HealBatcher::requeue`]): returns
    /// `true`, the instance is busy again, and the caller marks it idle when that operation
    /// ends. Otherwise the heal is dropped (`false`: the instance's state forbids it, e.g. it
    /// is no longer instantiated).
    pub fn heal_not_started(&mut self, job: HealJob, held: bool) -> bool {
        if held {
            self.heal.requeue(job);
        }
        held
    }

    /// The heal of `job` (from [`AlertHandler::poll_due`]) did not start for a failure of the
    /// server's own, not of the instance's state (the state store failed: a full disk), and
    /// the caller has marked its instance idle: the window is put back, due again
    /// `timer_interval` after `now` (and merged with a window opened since), so that the heal
    /// is tried again rather than lost. Returns when it is due.
    pub fn heal_failed(&mut self, job: HealJob, now: DateTime<Utc>) -> DateTime<Utc> {
        let due = now
            .checked_add_signed(self.heal.window())
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        self.heal.retry_at(job, due);
        due
    }

    /// The journal entries `entries` (from [`AlertHandler::heal_entries`]) could not be saved:
    /// an alert that was not durably recorded is not remembered as seen. The sender's retry of
    /// each is accepted again ([`Action::HealQueued`], so that it is saved then) instead of
    /// being answered `duplicate` (issue 26: on a full disk the retried alerts were
    /// duplicates, and the heal was lost), while its window waits; the window itself keeps its
    /// VNFC (the heal runs while this process lives), so the retry changes nothing in it and
    /// nothing heals twice. Once the window's heal has started, a retry is a duplicate.
    pub fn not_saved(&mut self, entries: &[HealEntry]) {
        for e in entries {
            self.heal.not_saved(&e.instance, &e.vnfc, &e.alert);
        }
    }

    /// The scale of `aspect` of `instance` that an [`Action::Scale`] asked for did not start
    /// (the lifecycle refused it: e.g. an operation that another program started on the
    /// instance): its cooldown ends, so that the next alert may try again. Returns whether a
    /// cooldown was running. (The instance's busy mark is the caller's, who clears it when the
    /// operation is refused, before this: a later clear could end another operation's.)
    pub fn scale_not_started(&mut self, instance: &VnfInstanceId, aspect: &str) -> bool {
        self.scale.reset(instance, aspect)
    }

    /// The journal entries of the alerts of `webhook` that `outcomes` (from
    /// [`AlertHandler::handle_alerts`] at `at`) queued for a heal.
    pub fn heal_entries(
        webhook: &Webhook,
        outcomes: &[AlertOutcome],
        at: DateTime<Utc>,
    ) -> Vec<HealEntry> {
        outcomes
            .iter()
            .filter_map(|o| match &o.action {
                Action::HealQueued { instance, vnfc, .. } => {
                    webhook.alerts.get(o.index).map(|a| HealEntry {
                        instance: instance.clone(),
                        vnfc: vnfc.clone(),
                        alert: a.key(),
                        at,
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// Applies a journal entry to the restored state: the alert joins (or opens) its
    /// instance's window as when it was accepted. An entry the state already holds (saved in
    /// the snapshot too) changes nothing: it is a duplicate occurrence.
    pub fn replay_heal(&mut self, entry: &HealEntry) {
        self.heal
            .handle_alert(&entry.instance, &entry.vnfc, &entry.alert, entry.at);
    }

    /// The state to persist.
    pub fn snapshot(&self) -> AlertState {
        AlertState {
            heal: self.heal.snapshot(),
            scale: self.scale.snapshot(),
        }
    }

    /// Restores a persisted state (busy marks are the caller's to set again).
    pub fn restore(&mut self, state: AlertState) {
        self.heal.restore(state.heal);
        self.scale.restore(state.scale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lcm::{
        InstantiatedVnfInfo, InstantiationState, ScaleInfo, ScaleType, VnfInstance,
        VnfOperationalStateType, VnfcInfo,
    };
    use chrono::TimeZone;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    fn inst(id: &str, level: u32) -> VnfInstance {
        let mut i = VnfInstance::new(id, "d");
        i.instantiation_state = Some(InstantiationState::Instantiated);
        i.vnf_configurable_properties =
            json!({"isAutohealEnabled": true, "isAutoscaleEnabled": true})
                .as_object()
                .cloned();
        i.instantiated_vnf_info = Some(InstantiatedVnfInfo {
            vnfc_info: ["VDU1-a", "VDU2-b"]
                .iter()
                .map(|v| VnfcInfo {
                    id: (*v).into(),
                    vdu_id: "VDU1".into(),
                    vnfc_resource_info_id: None,
                    vnfc_state: VnfOperationalStateType::Started,
                    vnfc_configurable_properties: None,
                })
                .collect(),
            scale_status: vec![ScaleInfo {
                aspect_id: "A".into(),
                vnfd_id: None,
                scale_level: level,
            }],
            max_scale_levels: vec![ScaleInfo {
                aspect_id: "A".into(),
                vnfd_id: None,
                scale_level: 3,
            }],
            ..InstantiatedVnfInfo::default()
        });
        i
    }

    fn body(alerts: &[serde_json::Value]) -> Vec<u8> {
        serde_json::to_vec(&json!({"version": "4", "status": "firing", "alerts": alerts})).unwrap()
    }

    fn heal(vnfc: &str, fp: &str, status: &str) -> serde_json::Value {
        json!({"status": status, "labels": {"receiver_type": "tacker", "function_type": "auto_heal",
            "vnf_instance_id": "i", "vnfc_info_id": vnfc}, "annotations": {},
            "startsAt": "2027-01-15T08:00:00Z", "endsAt": "0001-01-01T00:00:00Z", "fingerprint": fp})
    }

    fn scale(t: &str) -> serde_json::Value {
        json!({"status": "firing", "labels": {"receiver_type": "tacker", "function_type": "auto_scale",
            "vnf_instance_id": "i", "auto_scale_type": t, "aspect_id": "A"}, "annotations": {},
            "startsAt": "2027-01-15T08:00:00Z", "fingerprint": "s"})
    }

    fn labels(outcomes: &[AlertOutcome]) -> Vec<String> {
        outcomes
            .iter()
            .map(|o| match &o.action {
                Action::HealQueued { vnfc, .. } => format!("heal {vnfc}"),
                Action::Scale(j) => format!("scale {:?}", j.request.type_),
                Action::Ignored(r) => r.label().to_owned(),
            })
            .collect()
    }

    /// What must be written before a webhook's answer: accepted alerts and a cancelled
    /// window; not a duplicate, a resolved alert or a refused scale (issue 27: the replicas on
    /// PostgreSQL write nothing for a webhook of those only).
    #[test]
    fn only_accepted_alerts_and_cancelled_windows_must_be_saved_now() {
        let store = BTreeMap::from([(VnfInstanceId::new("i"), inst("i", 1))]);
        let mut h = AlertHandler::new(PrometheusPluginConfig::default().with_all_enabled());
        let saved = |out: &[AlertOutcome]| -> Vec<bool> {
            out.iter().map(AlertOutcome::must_be_saved).collect()
        };
        let mut send = |endpoint, alerts: &[serde_json::Value], at| {
            h.handle_webhook(endpoint, &body(alerts), &store, t(at))
                .unwrap()
        };
        let out = send(Endpoint::AutoHealing, &[heal("VDU1-a", "f1", "firing")], 0);
        assert_eq!(saved(&out), [true]);
        let out = send(
            Endpoint::AutoHealing,
            &[
                heal("VDU1-a", "f1", "firing"),
                heal("VDU2-b", "f2", "resolved"),
            ],
            1,
        );
        assert_eq!(labels(&out), ["duplicate", "resolved"]);
        assert_eq!(saved(&out), [false, false]);
        let out = send(Endpoint::AutoScaling, &[scale("SCALE_OUT")], 2);
        assert_eq!(saved(&out), [true]);
        let out = send(Endpoint::AutoScaling, &[scale("SCALE_OUT")], 3);
        assert!(matches!(out[0].action, Action::Ignored(_)), "{out:?}");
        assert_eq!(saved(&out), [false]);
        let mut gone = heal("VDU1-a", "f3", "firing");
        gone["labels"]["vnf_instance_id"] = json!("gone");
        let out = send(Endpoint::AutoHealing, &[gone], 4);
        assert_eq!(labels(&out), ["instance_not_found"]);
        assert_eq!(saved(&out), [true]);
    }

    #[test]
    fn heal_flow_with_dedupe_busy_and_resolve() {
        let store = BTreeMap::from([(VnfInstanceId::new("i"), inst("i", 1))]);
        let mut h = AlertHandler::new(PrometheusPluginConfig::default().with_all_enabled());
        let out = h
            .handle_webhook(
                Endpoint::AutoHealing,
                &body(&[
                    heal("VDU1-a", "f1", "firing"),
                    heal("VDU2-b", "f2", "firing"),
                ]),
                &store,
                t(0),
            )
            .unwrap();
        assert_eq!(labels(&out), ["heal VDU1-a", "heal VDU2-b"]);
        assert_eq!(out[1].index, 1);
        assert_eq!(out[1].fingerprint, "f2");
        assert_eq!(h.poll_timeout(), Some(t(20)));
        // Alertmanager re-sends the group, one alert now resolved
        let out = h
            .handle_webhook(
                Endpoint::AutoHealing,
                &body(&[
                    heal("VDU1-a", "f1", "resolved"),
                    heal("VDU2-b", "f2", "firing"),
                ]),
                &store,
                t(5),
            )
            .unwrap();
        assert_eq!(labels(&out), ["resolved", "duplicate"]);
        let jobs = h.poll_due(t(20));
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].vnfcs, ["VDU1-a", "VDU2-b"]);
        assert!(h.is_busy(&"i".into()));
        // while the heal runs, a scale is not started
        let out = h
            .handle_webhook(
                Endpoint::AutoScaling,
                &body(&[scale("SCALE_OUT")]),
                &store,
                t(21),
            )
            .unwrap();
        assert_eq!(labels(&out), ["operation_in_progress"]);
        h.mark_idle(&"i".into());
        let out = h
            .handle_webhook(
                Endpoint::AutoScaling,
                &body(&[scale("SCALE_OUT")]),
                &store,
                t(22),
            )
            .unwrap();
        assert_eq!(labels(&out), ["scale ScaleOut"]);
        let Action::Scale(job) = &out[0].action else {
            panic!()
        };
        assert_eq!(
            job.request,
            crate::lcm::ScaleVnfRequest::new(ScaleType::ScaleOut, "A").with_number_of_steps(1)
        );
        assert!(
            h.is_busy(&"i".into()),
            "a scale marks the instance busy too"
        );
        h.mark_idle(&"i".into());
        let out = h
            .handle_webhook(
                Endpoint::AutoScaling,
                &body(&[scale("SCALE_IN")]),
                &store,
                t(30),
            )
            .unwrap();
        assert_eq!(labels(&out), ["cooldown"]);
        // A scale that did not start does not hold the cooldown.
        assert!(h.scale_not_started(&"i".into(), "A"));
        let out = h
            .handle_webhook(
                Endpoint::AutoScaling,
                &body(&[scale("SCALE_IN")]),
                &store,
                t(31),
            )
            .unwrap();
        assert_eq!(labels(&out), ["scale ScaleIn"]);
    }

    #[test]
    fn not_instantiated_or_gone_cancels_the_window() {
        let mut store = BTreeMap::from([(VnfInstanceId::new("i"), inst("i", 0))]);
        let mut h = AlertHandler::new(PrometheusPluginConfig::default().with_all_enabled());
        h.handle_webhook(
            Endpoint::AutoHealing,
            &body(&[heal("VDU1-a", "f1", "firing")]),
            &store,
            t(0),
        )
        .unwrap();
        assert!(h.heal_batcher().pending(&"i".into()).is_some());
        store
            .get_mut(&VnfInstanceId::new("i"))
            .unwrap()
            .instantiation_state = Some(InstantiationState::NotInstantiated);
        let out = h
            .handle_webhook(
                Endpoint::AutoHealing,
                &body(&[heal("VDU2-b", "f2", "firing")]),
                &store,
                t(1),
            )
            .unwrap();
        assert_eq!(labels(&out), ["not_instantiated"]);
        assert!(h.heal_batcher().pending(&"i".into()).is_none());
        assert!(h.poll_due(t(100)).is_empty());
    }

    #[test]
    fn outcomes_serialize_tagged() {
        let o = AlertOutcome {
            index: 0,
            fingerprint: "f".into(),
            action: Action::Ignored(IgnoreReason::Resolved),
        };
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(
            v,
            json!({"index": 0, "fingerprint": "f", "action": {"action": "ignored", "reason": "resolved"}})
        );
        assert_eq!(serde_json::from_value::<AlertOutcome>(v).unwrap(), o);
        let a = Action::Scale(ScaleJob {
            instance: "i".into(),
            request: crate::lcm::ScaleVnfRequest::new(ScaleType::ScaleIn, "A"),
        });
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(
            v,
            json!({"action": "scale", "instance": "i", "request": {"type": "SCALE_IN", "aspectId": "A"}})
        );
        assert_eq!(serde_json::from_value::<Action>(v).unwrap(), a);
    }

    #[test]
    fn endpoint_switches_and_bad_bodies() {
        let store = BTreeMap::new();
        let mut h = AlertHandler::new(PrometheusPluginConfig::default());
        let p = h
            .handle_webhook(Endpoint::AutoHealing, b"not json", &store, t(0))
            .unwrap_err();
        assert_eq!(p.status, 404, "the switch is checked before the body");
        let mut h = AlertHandler::new(PrometheusPluginConfig::default().with_all_enabled());
        let p = h
            .handle_webhook(Endpoint::AutoScaling, b"{\"alerts\": 3}", &store, t(0))
            .unwrap_err();
        assert_eq!(p.status, 400);
        assert_eq!(p.title.as_deref(), Some("Bad Request"));
        assert_eq!(
            p.detail,
            "alerts: found a number (3); expected an array of alerts"
        );
        assert_eq!(
            Endpoint::from_path("/alert/auto_scaling"),
            Some(Endpoint::AutoScaling)
        );
        assert_eq!(Endpoint::from_path("/alert"), None);
    }

    #[test]
    fn state_survives_a_restart() {
        let store = BTreeMap::from([(VnfInstanceId::new("i"), inst("i", 1))]);
        let mut h = AlertHandler::new(PrometheusPluginConfig::default().with_all_enabled());
        h.handle_webhook(
            Endpoint::AutoHealing,
            &body(&[heal("VDU1-a", "f1", "firing")]),
            &store,
            t(0),
        )
        .unwrap();
        h.handle_webhook(
            Endpoint::AutoScaling,
            &body(&[scale("SCALE_OUT")]),
            &store,
            t(1),
        )
        .unwrap();
        let saved = serde_json::to_string(&h.snapshot()).unwrap();

        let mut after = AlertHandler::new(PrometheusPluginConfig::default().with_all_enabled());
        after.restore(serde_json::from_str(&saved).unwrap());
        assert_eq!(after.snapshot(), h.snapshot());
        let out = after
            .handle_webhook(
                Endpoint::AutoHealing,
                &body(&[heal("VDU1-a", "f1", "firing")]),
                &store,
                t(2),
            )
            .unwrap();
        assert_eq!(labels(&out), ["duplicate"]);
        let out = after
            .handle_webhook(
                Endpoint::AutoScaling,
                &body(&[scale("SCALE_OUT")]),
                &store,
                t(3),
            )
            .unwrap();
        assert_eq!(labels(&out), ["cooldown"]);
        assert_eq!(after.poll_due(t(20))[0].vnfcs, ["VDU1-a"]);
    }

    #[test]
    fn a_snapshot_plus_the_journal_after_it_is_the_state() {
        let store = BTreeMap::from([(VnfInstanceId::new("i"), inst("i", 1))]);
        let cfg = PrometheusPluginConfig::default().with_all_enabled();
        let mut h = AlertHandler::new(cfg.clone());
        let w1 = Webhook::from_slice(&body(&[heal("VDU1-a", "f1", "firing")])).unwrap();
        let out = h.handle_alerts(Endpoint::AutoHealing, &w1, &store, t(0));
        assert!(AlertHandler::heal_entries(&w1, &out, t(0)).len() == 1);
        let snapshot = h.snapshot();
        // After the snapshot: a new VNFC joins, a duplicate and a scale are not heal entries.
        let w2 = Webhook::from_slice(&body(&[
            heal("VDU2-b", "f2", "firing"),
            heal("VDU1-a", "f1", "firing"),
        ]))
        .unwrap();
        let out = h.handle_alerts(Endpoint::AutoHealing, &w2, &store, t(5));
        let journal = AlertHandler::heal_entries(&w2, &out, t(5));
        assert_eq!(journal.len(), 1, "{out:?}");
        assert_eq!(journal[0].vnfc, "VDU2-b");
        let text = serde_json::to_string(&journal[0]).unwrap();

        let mut after = AlertHandler::new(cfg);
        after.restore(snapshot);
        after.replay_heal(&serde_json::from_str(&text).unwrap());
        assert_eq!(
            after.heal_batcher().pending(&VnfInstanceId::new("i")),
            h.heal_batcher().pending(&VnfInstanceId::new("i"))
        );
        // Replaying an entry the state already holds changes nothing.
        let before = after.snapshot();
        after.replay_heal(&journal[0]);
        assert_eq!(after.snapshot().heal.pending, before.heal.pending);
        let job = after.poll_due(t(20));
        assert_eq!(job[0].vnfcs, ["VDU1-a", "VDU2-b"]);
    }

    /// Issue 26 High 6: a fingerprint, a label count or a label over its bound ignores its
    /// alert (`oversized`, naming the field and the bound), and nothing of it is kept; the
    /// other alerts of the webhook proceed. The reason's text quotes no client value at length
    /// (the Low item: a 1 MB label on an ignored alert wrote a 1 MB log line).
    #[test]
    fn oversized_fingerprints_and_labels_are_ignored_and_not_stored() {
        let store = BTreeMap::from([(VnfInstanceId::new("i"), inst("i", 1))]);
        let mut h = AlertHandler::new(PrometheusPluginConfig::default().with_all_enabled());
        let big = "f".repeat(1 << 20);
        let mut many = heal("VDU2-b", "f3", "firing");
        for n in 0..64 {
            many["labels"][format!("extra{n}")] = json!("x");
        }
        let mut long_value = heal("VDU2-b", "f4", "firing");
        long_value["labels"]["receiver_type"] = json!("r".repeat(1 << 20));
        let mut long_name = heal("VDU2-b", "f5", "firing");
        long_name["labels"]["n".repeat(5000)] = json!("x");
        let out = h
            .handle_webhook(
                Endpoint::AutoHealing,
                &body(&[
                    heal("VDU1-a", &big, "firing"),
                    many,
                    long_value,
                    long_name,
                    heal("VDU2-b", "ok", "firing"),
                ]),
                &store,
                t(0),
            )
            .unwrap();
        assert_eq!(
            labels(&out),
            [
                "oversized",
                "oversized",
                "oversized",
                "oversized",
                "heal VDU2-b"
            ]
        );
        let texts: Vec<String> = out[..4]
            .iter()
            .map(|o| match &o.action {
                Action::Ignored(r) => r.to_string(),
                a => panic!("{a:?}"),
            })
            .collect();
        assert_eq!(
            texts[0],
            "fingerprint is 1048576 bytes; expected at most 128 ([prometheus_plugin] \
             max_fingerprint_bytes); nothing of the alert is kept"
        );
        assert!(
            texts[1].starts_with(
                "labels is 68 labels; expected at most 64 ([prometheus_plugin] max_labels)"
            ),
            "{}",
            texts[1]
        );
        assert!(
            texts[2].starts_with("labels.receiver_type is 1048576 bytes; expected at most 4096"),
            "{}",
            texts[2]
        );
        assert!(
            texts[3].starts_with("a label name is 5000 bytes"),
            "{}",
            texts[3]
        );
        let state = h.snapshot();
        assert_eq!(state.heal.seen.len(), 1, "only the alert within the bounds");
        assert_eq!(state.heal.seen[0].alert.fingerprint, "ok");
        assert_eq!(state.heal.pending[0].alerts.len(), 1);
        // A resolved oversized alert forgets nothing either, and the bound is configurable.
        let mut c = PrometheusPluginConfig::default().with_all_enabled();
        c.max_fingerprint_bytes = 16;
        let mut h = AlertHandler::new(c);
        let out = h
            .handle_webhook(
                Endpoint::AutoHealing,
                &body(&[heal("VDU1-a", &"g".repeat(17), "firing")]),
                &store,
                t(0),
            )
            .unwrap();
        assert_eq!(labels(&out), ["oversized"]);
    }

    /// The Low item of issue 26: the reason of an ignored alert quotes each client value in at
    /// most `SHOWN_CHARS` characters and says how long it was.
    #[test]
    fn an_ignored_alert_reason_quotes_no_value_at_length() {
        let store = BTreeMap::from([(VnfInstanceId::new("i"), inst("i", 1))]);
        let mut c = PrometheusPluginConfig::default().with_all_enabled();
        c.max_label_bytes = 1 << 21;
        let mut h = AlertHandler::new(c);
        let long = "v".repeat(1 << 20);
        let mut receiver = heal("VDU1-a", "f1", "firing");
        receiver["labels"]["receiver_type"] = json!(long);
        let mut conflicting = heal("VDU1-a", "f2", "firing");
        conflicting["labels"]["vnfcInfoId"] = json!(long);
        let mut unknown = heal("VDU1-a", "f3", "firing");
        unknown["labels"]["vnfc_info_id"] = json!(long);
        let mut gone = heal("VDU1-a", "f4", "firing");
        gone["labels"]["vnf_instance_id"] = json!(long);
        let out = h
            .handle_webhook(
                Endpoint::AutoHealing,
                &body(&[receiver, conflicting, unknown, gone]),
                &store,
                t(0),
            )
            .unwrap();
        assert_eq!(
            labels(&out),
            [
                "receiver_type",
                "conflicting_labels",
                "unknown_vnfc",
                "instance_not_found"
            ]
        );
        for o in &out {
            let Action::Ignored(r) = &o.action else {
                panic!("{o:?}")
            };
            let text = r.to_string();
            assert!(text.len() < 400, "{} bytes: {}", text.len(), &text[..400]);
            assert!(text.contains("... (1048576 bytes)"), "{text}");
        }
    }
}
