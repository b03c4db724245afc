//! Auto-heal batching, sans-IO: alerts in through [`HealBatcher::handle_alert`] (with `now`),
//! heal operations out through [`HealBatcher::poll_due`].
//!
//! * **Window.** The first alert for an instance opens a window of `timer_interval`; every
//!   VNFC alerted for that instance until it closes joins it, and [`HealBatcher::poll_due`]
//!   then returns ONE [`HealJob`] for all of them (Tacker's `AutoHealTimer`: the window is
//!   fixed by its first alert, later alerts do not extend it).
//! * **De-duplication.** An alert occurrence ([`AlertKey`]: fingerprint and `startsAt`) that
//!   was already accepted for the same VNFC is answered [`HealOutcome::Duplicate`] and triggers
//!   nothing, however often Alertmanager re-sends it. The VNFC (and instance) is part of the
//!   key on purpose: Alertmanager's fingerprint is a hash of the labels, so for real alerts this
//!   changes nothing, but synthetic senders reuse one fingerprint for different VNFCs (Tacker's
//!   functional test posts two VNFC alerts with the same fingerprint and `startsAt` and expects
//!   one heal of both). The memory is bounded: an occurrence is forgotten
//!   `dedupe_ttl` after it was last received, or at once when it is reported resolved
//!   ([`HealBatcher::forget`]), and at most `dedupe_capacity` occurrences are kept (the least
//!   recently received is dropped first). So memory is O(`dedupe_capacity`) keys, and an
//!   occurrence that keeps being re-sent at least every `dedupe_ttl` is never healed twice.
//! * **Busy instances.** While an operation runs on an instance ([`HealBatcher::mark_busy`];
//!   every job that [`HealBatcher::poll_due`] returns marks its instance busy), a window that
//!   closes stays queued and keeps gathering alerts; after [`HealBatcher::mark_idle`] the next
//!   poll returns it. Nothing is lost and no two heals of one instance run at once.
//! * **Restart.** [`HealBatcher::snapshot`] is the serde-serializable pending state (open and
//!   queued windows, remembered occurrences); [`HealBatcher::restore`] puts it back. Busy marks
//!   are not part of it: after a restart, mark busy the instances whose operation occurrence
//!   is not yet terminal.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::id::VnfInstanceId;
use crate::lcm::{HealVnfRequest, VnfInstance};
use crate::lifecycle::OperationOptions;

use super::config::PrometheusPluginConfig;
use super::webhook::AlertKey;

/// One batched auto-heal to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealJob {
    /// The VNF instance.
    pub instance: VnfInstanceId,
    /// The `VnfcInfo.id`s to heal, in the order their alerts arrived, each once.
    pub vnfcs: Vec<String>,
    /// The alert occurrences that asked for it: the first [`WINDOW_ALERTS`].
    pub alerts: Vec<AlertKey>,
    /// How many more occurrences asked for it (counted, not kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_alerts: u64,
    /// When the window opened (the first alert).
    pub opened_at: DateTime<Utc>,
    /// When the window closed.
    pub due: DateTime<Utc>,
}

/// How many alert occurrences a heal window keeps ([`PendingHeal::alerts`]); later ones are
/// only counted ([`PendingHeal::more_alerts`]). A window stays open `timer_interval`, and
/// longer while an operation runs on its instance, and every new occurrence (a new
/// `startsAt` of a flapping alert) joins it: without a bound, its size, and that of every save
/// of the alert state, would grow with the alert rate. The occurrences only serve to word the
/// heal's cause; the de-duplication memory is separate (`dedupe_capacity`).
pub const WINDOW_ALERTS: usize = 64;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl HealJob {
    /// The SOL003 request to run: heal exactly [`HealJob::vnfcs`].
    pub fn request(&self) -> HealVnfRequest {
        HealVnfRequest {
            vnfc_instance_id: self.vnfcs.clone(),
            cause: Some(format!(
                "auto-heal: {} Prometheus alert(s) for {} VNFC(s)",
                (self.alerts.len() as u64).saturating_add(self.more_alerts),
                self.vnfcs.len()
            )),
            ..HealVnfRequest::default()
        }
    }

    /// Drops the VNFCs that `instance` no longer has in `instantiatedVnfInfo.vnfcInfo` (the
    /// window may have closed after a scale-in or another heal replaced them), so that the
    /// heal does not fail on an unknown id; returns the dropped ones. When nothing is left,
    /// there is nothing to run.
    pub fn retain_existing(&mut self, instance: &VnfInstance) -> Vec<String> {
        let known: BTreeSet<&str> = instance
            .instantiated_vnf_info
            .iter()
            .flat_map(|i| i.vnfc_info.iter().map(|v| v.id.as_str()))
            .collect();
        let (keep, dropped) = self
            .vnfcs
            .drain(..)
            .partition(|v| known.contains(v.as_str()));
        self.vnfcs = keep;
        dropped
    }

    /// The operation options: `isAutomaticInvocation` true.
    pub fn options(&self) -> OperationOptions {
        OperationOptions {
            automatic: true,
            ..OperationOptions::default()
        }
    }
}

/// What [`HealBatcher::handle_alert`] did with an alert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealOutcome {
    /// The alert opened a new window for its instance, closing at `due`.
    Opened {
        /// When the window closes.
        due: DateTime<Utc>,
    },
    /// The alert joined the instance's open (or queued) window, closing at `due`.
    Joined {
        /// When the window closes (already past when it waits for a busy instance).
        due: DateTime<Utc>,
    },
    /// The alert occurrence was already accepted; nothing changes.
    Duplicate,
}

/// A window not yet dispatched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingHeal {
    /// The VNF instance.
    pub instance: VnfInstanceId,
    /// VNFCs, in arrival order, each once.
    pub vnfcs: Vec<String>,
    /// The alert occurrences: the first [`WINDOW_ALERTS`].
    pub alerts: Vec<AlertKey>,
    /// How many more occurrences joined (counted, not kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_alerts: u64,
    /// When the window opened.
    pub opened_at: DateTime<Utc>,
    /// When it closes.
    pub due: DateTime<Utc>,
}

impl PendingHeal {
    /// Adds `vnfc` unless the window has it.
    fn add_vnfc(&mut self, vnfc: &str) {
        if !self.vnfcs.iter().any(|v| v == vnfc) {
            self.vnfcs.push(vnfc.to_owned());
        }
    }

    /// Keeps `alert` among the first [`WINDOW_ALERTS`], or counts it.
    fn add_alert(&mut self, alert: AlertKey) {
        if self.alerts.len() < WINDOW_ALERTS {
            self.alerts.push(alert);
        } else {
            self.more_alerts = self.more_alerts.saturating_add(1);
        }
    }
}

/// A remembered alert occurrence and when it was last received.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeenAlert {
    /// The occurrence.
    pub alert: AlertKey,
    /// The instance it asked to heal.
    pub instance: VnfInstanceId,
    /// The VNFC it asked to heal.
    pub vnfc: String,
    /// When it was last received.
    pub last_seen: DateTime<Utc>,
}

/// The de-duplication key: the occurrence and what it asked to heal.
type SeenKey = (AlertKey, VnfInstanceId, String);

/// The remembered occurrences and when each was last received, by occurrence: a hash map
/// (every accepted alert looks its key up, inserts it and, at capacity, removes the oldest;
/// ordered by time in `HealBatcher::by_time`), grouped by [`AlertKey`] so that a resolved
/// alert forgets every target of its occurrence at once. An occurrence almost always names
/// one (instance, VNFC), so the group is a short list.
#[derive(Clone, Debug, Default)]
struct Seen {
    by_alert: HashMap<AlertKey, Vec<(VnfInstanceId, String, DateTime<Utc>)>>,
    len: usize,
}

impl Seen {
    fn contains(&self, alert: &AlertKey, instance: &VnfInstanceId, vnfc: &str) -> bool {
        self.by_alert
            .get(alert)
            .is_some_and(|ts| ts.iter().any(|(i, v, _)| i == instance && v == vnfc))
    }

    /// Sets when `key` was last received; returns the time it replaces.
    fn insert(&mut self, key: &SeenKey, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let (alert, instance, vnfc) = key;
        let targets = match self.by_alert.get_mut(alert) {
            Some(ts) => ts,
            None => self.by_alert.entry(alert.clone()).or_default(),
        };
        if let Some(t) = targets
            .iter_mut()
            .find(|(i, v, _)| i == instance && v == vnfc)
        {
            return Some(std::mem::replace(&mut t.2, at));
        }
        targets.push((instance.clone(), vnfc.clone(), at));
        self.len += 1;
        None
    }

    fn remove(&mut self, key: &SeenKey) {
        let (alert, instance, vnfc) = key;
        let Some(targets) = self.by_alert.get_mut(alert) else {
            return;
        };
        if let Some(n) = targets
            .iter()
            .position(|(i, v, _)| i == instance && v == vnfc)
        {
            targets.swap_remove(n);
            self.len -= 1;
        }
        if targets.is_empty() {
            self.by_alert.remove(alert);
        }
    }

    /// Forgets every target of `alert`; returns them with when each was last received.
    fn take_alert(&mut self, alert: &AlertKey) -> Vec<(SeenKey, DateTime<Utc>)> {
        let targets = self.by_alert.remove(alert).unwrap_or_default();
        self.len -= targets.len();
        targets
            .into_iter()
            .map(|(i, v, t)| ((alert.clone(), i, v), t))
            .collect()
    }

    fn len(&self) -> usize {
        self.len
    }

    fn clear(&mut self) {
        self.by_alert.clear();
        self.len = 0;
    }
}

/// The persistent state of a [`HealBatcher`] (see the module docs, "Restart").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealBatcherState {
    /// Windows not yet dispatched, by instance id.
    pub pending: Vec<PendingHeal>,
    /// Remembered alert occurrences, least recently seen first.
    pub seen: Vec<SeenAlert>,
}

/// Batches auto-heal alerts per instance; see the module docs.
#[derive(Clone, Debug)]
pub struct HealBatcher {
    window: TimeDelta,
    ttl: TimeDelta,
    capacity: usize,
    pending: BTreeMap<VnfInstanceId, PendingHeal>,
    busy: BTreeSet<VnfInstanceId>,
    seen: Seen,
    by_time: BTreeSet<(DateTime<Utc>, SeenKey)>,
    /// Remembered occurrences whose acceptance could not be saved ([`HealBatcher::not_saved`]):
    /// a subset of `seen`, not part of the snapshot.
    unsaved: BTreeSet<SeenKey>,
}

fn secs(s: u64) -> TimeDelta {
    i64::try_from(s)
        .ok()
        .and_then(TimeDelta::try_seconds)
        .unwrap_or(TimeDelta::MAX)
}

impl HealBatcher {
    /// A batcher with windows of `window_secs`, remembering occurrences `dedupe_ttl_secs` after
    /// they were last received, at most `dedupe_capacity` of them (0 is taken as 1).
    pub fn new(window_secs: u64, dedupe_ttl_secs: u64, dedupe_capacity: usize) -> Self {
        Self {
            window: secs(window_secs),
            ttl: secs(dedupe_ttl_secs),
            capacity: dedupe_capacity.max(1),
            pending: BTreeMap::new(),
            busy: BTreeSet::new(),
            seen: Seen::default(),
            by_time: BTreeSet::new(),
            unsaved: BTreeSet::new(),
        }
    }

    /// A batcher with the `timer_interval`, `dedupe_ttl` and `dedupe_capacity` of `config`.
    pub fn from_config(config: &PrometheusPluginConfig) -> Self {
        Self::new(
            config.timer_interval,
            config.dedupe_ttl,
            config.dedupe_capacity,
        )
    }

    // ---- getters ----------------------------------------------------------------------

    /// The window not yet dispatched for `instance`, if any.
    pub fn pending(&self, instance: &VnfInstanceId) -> Option<&PendingHeal> {
        self.pending.get(instance)
    }

    /// Whether `instance` is marked busy.
    pub fn is_busy(&self, instance: &VnfInstanceId) -> bool {
        self.busy.contains(instance)
    }

    /// How many instances are marked busy.
    pub fn busy_instances(&self) -> usize {
        self.busy.len()
    }

    /// How many windows are not yet dispatched.
    pub fn pending_windows(&self) -> usize {
        self.pending.len()
    }

    /// How many alert occurrences are remembered (at most `dedupe_capacity`).
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }

    /// How many windows are closed at `now` but wait for their instance (busy: an operation
    /// runs on it, or one that is not over holds it). Right after [`HealBatcher::poll_due`] at
    /// the same `now`, these are every closed window it left.
    pub fn waiting(&self, now: DateTime<Utc>) -> usize {
        self.pending
            .values()
            .filter(|p| p.due <= now && self.busy.contains(&p.instance))
            .count()
    }

    // ---- handle_* ---------------------------------------------------------------------

    /// Takes an alert that passed the validation chain ([`super::Decision::Heal`]) at `now`.
    pub fn handle_alert(
        &mut self,
        instance: &VnfInstanceId,
        vnfc: &str,
        alert: &AlertKey,
        now: DateTime<Utc>,
    ) -> HealOutcome {
        self.expire(now);
        let key: SeenKey = (alert.clone(), instance.clone(), vnfc.to_owned());
        let duplicate = self.seen.contains(alert, instance, vnfc);
        let unsaved = duplicate && self.unsaved.remove(&key);
        self.touch(key, now);
        if duplicate {
            // The retry of an occurrence whose acceptance was not saved: accepted again (so
            // that the caller saves it), without changing the window it is in. Once that
            // window's heal has started, the heal's own record covers it: a duplicate.
            if let Some(p) = self
                .pending
                .get(instance)
                .filter(|p| unsaved && p.vnfcs.iter().any(|v| v == vnfc))
            {
                return HealOutcome::Joined { due: p.due };
            }
            return HealOutcome::Duplicate;
        }
        match self.pending.get_mut(instance) {
            Some(p) => {
                p.add_vnfc(vnfc);
                p.add_alert(alert.clone());
                HealOutcome::Joined { due: p.due }
            }
            None => {
                let due = now
                    .checked_add_signed(self.window)
                    .unwrap_or(DateTime::<Utc>::MAX_UTC);
                self.pending.insert(
                    instance.clone(),
                    PendingHeal {
                        instance: instance.clone(),
                        vnfcs: vec![vnfc.to_owned()],
                        alerts: vec![alert.clone()],
                        more_alerts: 0,
                        opened_at: now,
                        due,
                    },
                );
                HealOutcome::Opened { due }
            }
        }
    }

    // ---- mutators ---------------------------------------------------------------------

    /// Forgets an alert occurrence (its resolved notification arrived): the same fingerprint
    /// can only fire again with a new `startsAt`. Returns whether it was remembered.
    pub fn forget(&mut self, alert: &AlertKey) -> bool {
        let keys = self.seen.take_alert(alert);
        for (k, t) in &keys {
            self.by_time.remove(&(*t, k.clone()));
            self.unsaved.remove(k);
        }
        !keys.is_empty()
    }

    /// Drops the window of `instance` (e.g. it is no longer instantiated, as Tacker's
    /// `remove_timer`); returns it if there was one.
    pub fn cancel(&mut self, instance: &VnfInstanceId) -> Option<PendingHeal> {
        self.pending.remove(instance)
    }

    /// Puts back the window of a job that [`HealBatcher::poll_due`] returned but that could not
    /// run (another operation holds its instance): due at once, in front of what joined a
    /// window opened for the instance since (its VNFCs first, then theirs; its occurrences
    /// first). The instance stays busy: the job's heal runs after [`HealBatcher::mark_idle`].
    pub fn requeue(&mut self, job: HealJob) {
        let mut back = PendingHeal {
            instance: job.instance,
            vnfcs: job.vnfcs,
            alerts: job.alerts,
            more_alerts: job.more_alerts,
            opened_at: job.opened_at,
            due: job.due,
        };
        if let Some(since) = self.pending.remove(&back.instance) {
            for v in &since.vnfcs {
                back.add_vnfc(v);
            }
            for a in since.alerts {
                back.add_alert(a);
            }
            back.more_alerts = back.more_alerts.saturating_add(since.more_alerts);
        }
        self.busy.insert(back.instance.clone());
        self.pending.insert(back.instance.clone(), back);
    }

    /// Puts back the window of a job that [`HealBatcher::poll_due`] returned but whose heal
    /// failed to start for a reason of the server's own (its store failed), due at `due`, in
    /// front of what joined a window opened for the instance since (as
    /// [`HealBatcher::requeue`]). The instance's busy mark is left as it is (the caller cleared
    /// it when the start failed).
    pub fn retry_at(&mut self, job: HealJob, due: DateTime<Utc>) {
        let busy = self.busy.contains(&job.instance);
        let instance = job.instance.clone();
        self.requeue(job);
        if !busy {
            self.busy.remove(&instance);
        }
        if let Some(p) = self.pending.get_mut(&instance) {
            p.due = due;
        }
    }

    /// The acceptance of the occurrence `alert` of `vnfc` of `instance` could not be saved
    /// (see [`super::AlertHandler::not_saved`]): its next receipt is accepted again
    /// ([`HealOutcome::Joined`], so that the caller saves it) while its window has not been
    /// dispatched, instead of being a [`HealOutcome::Duplicate`]. Returns whether it is
    /// remembered.
    pub fn not_saved(&mut self, instance: &VnfInstanceId, vnfc: &str, alert: &AlertKey) -> bool {
        if !self.seen.contains(alert, instance, vnfc) {
            return false;
        }
        self.unsaved
            .insert((alert.clone(), instance.clone(), vnfc.to_owned()));
        true
    }

    /// How many remembered occurrences wait for their acceptance to be saved.
    pub fn unsaved(&self) -> usize {
        self.unsaved.len()
    }

    /// The length of a window (`timer_interval`).
    pub fn window(&self) -> TimeDelta {
        self.window
    }

    /// Marks an operation on `instance` in progress: its windows wait.
    pub fn mark_busy(&mut self, instance: &VnfInstanceId) {
        self.busy.insert(instance.clone());
    }

    /// Marks the operation on `instance` over: a window that closed meanwhile is returned by
    /// the next [`HealBatcher::poll_due`].
    pub fn mark_idle(&mut self, instance: &VnfInstanceId) {
        self.busy.remove(instance);
    }

    /// The pending state, to persist.
    pub fn snapshot(&self) -> HealBatcherState {
        HealBatcherState {
            pending: self.pending.values().cloned().collect(),
            seen: self
                .by_time
                .iter()
                .map(|(t, (alert, instance, vnfc))| SeenAlert {
                    alert: alert.clone(),
                    instance: instance.clone(),
                    vnfc: vnfc.clone(),
                    last_seen: *t,
                })
                .collect(),
        }
    }

    /// Replaces the pending state with `state` (busy marks are kept). When `state` remembers
    /// more than `dedupe_capacity` occurrences, the least recently seen are dropped.
    pub fn restore(&mut self, state: HealBatcherState) {
        self.pending = state
            .pending
            .into_iter()
            .map(|p| (p.instance.clone(), p))
            .collect();
        self.seen.clear();
        self.by_time.clear();
        self.unsaved.clear();
        for s in state.seen {
            self.touch((s.alert, s.instance, s.vnfc), s.last_seen);
        }
    }

    // ---- poll_* -----------------------------------------------------------------------

    /// The windows closed at `now` whose instance is not busy, oldest first; each one's
    /// instance is marked busy (call [`HealBatcher::mark_idle`] when its operation ends).
    pub fn poll_due(&mut self, now: DateTime<Utc>) -> Vec<HealJob> {
        self.expire(now);
        let ready: Vec<VnfInstanceId> = self
            .pending
            .values()
            .filter(|p| p.due <= now && !self.busy.contains(&p.instance))
            .map(|p| p.instance.clone())
            .collect();
        let mut jobs: Vec<HealJob> = ready
            .iter()
            .filter_map(|id| self.pending.remove(id))
            .map(|p| HealJob {
                instance: p.instance,
                vnfcs: p.vnfcs,
                alerts: p.alerts,
                more_alerts: p.more_alerts,
                opened_at: p.opened_at,
                due: p.due,
            })
            .collect();
        jobs.sort_by(|a, b| (a.due, &a.instance).cmp(&(b.due, &b.instance)));
        for j in &jobs {
            self.busy.insert(j.instance.clone());
        }
        jobs
    }

    /// When [`HealBatcher::poll_due`] next has something to return: the earliest close of a
    /// window whose instance is not busy.
    pub fn poll_timeout(&self) -> Option<DateTime<Utc>> {
        self.pending
            .values()
            .filter(|p| !self.busy.contains(&p.instance))
            .map(|p| p.due)
            .min()
    }

    // ---- internals --------------------------------------------------------------------

    fn touch(&mut self, key: SeenKey, now: DateTime<Utc>) {
        if let Some(old) = self.seen.insert(&key, now) {
            self.by_time.remove(&(old, key.clone()));
        }
        self.by_time.insert((now, key));
        while self.seen.len() > self.capacity {
            let Some((_, oldest)) = self.by_time.pop_first() else {
                break;
            };
            self.seen.remove(&oldest);
            self.unsaved.remove(&oldest);
        }
    }

    fn expire(&mut self, now: DateTime<Utc>) {
        while let Some((t, _)) = self.by_time.first() {
            let expires = t
                .checked_add_signed(self.ttl)
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            if expires > now {
                break;
            }
            if let Some((_, key)) = self.by_time.pop_first() {
                self.seen.remove(&key);
                self.unsaved.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::Value;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    fn key(fp: &str, start: i64) -> AlertKey {
        AlertKey {
            fingerprint: fp.into(),
            starts_at: t(start),
        }
    }

    fn id(s: &str) -> VnfInstanceId {
        VnfInstanceId::new(s)
    }

    #[test]
    fn a_requeued_job_runs_after_the_operation_before_what_joined_since() {
        let mut b = HealBatcher::new(20, 600, 100);
        b.handle_alert(&id("i"), "VDU1", &key("a", 0), t(0));
        let job = b.poll_due(t(20)).pop().unwrap();
        // Meanwhile another alert opens a new window.
        b.handle_alert(&id("i"), "VDU2", &key("b", 21), t(21));
        b.requeue(job);
        assert!(b.is_busy(&id("i")));
        assert!(
            b.poll_due(t(100)).is_empty(),
            "not while the instance is held"
        );
        b.mark_idle(&id("i"));
        let job = b.poll_due(t(22)).pop().unwrap();
        assert_eq!(job.vnfcs, ["VDU1", "VDU2"]);
        assert_eq!(job.alerts, [key("a", 0), key("b", 21)]);
        assert_eq!(job.due, t(20), "due at once: the first window's close");
    }

    #[test]
    fn closed_windows_of_busy_instances_are_counted_as_waiting() {
        let mut b = HealBatcher::new(20, 600, 100);
        b.handle_alert(&id("i"), "VDU1", &key("a", 0), t(0));
        b.handle_alert(&id("j"), "VDU1", &key("b", 0), t(0));
        b.mark_busy(&id("i"));
        assert_eq!(b.waiting(t(19)), 0, "not closed yet");
        assert_eq!(b.waiting(t(20)), 1, "closed, its instance busy");
        // poll_due takes the other one; the busy one stays, waiting.
        assert_eq!(b.poll_due(t(20)).len(), 1);
        assert_eq!(b.waiting(t(20)), 1);
        b.mark_idle(&id("i"));
        assert_eq!(b.waiting(t(20)), 0, "due now, no longer waiting");
        assert_eq!(
            (b.pending_windows(), b.busy_instances()),
            (1, 1),
            "j's heal runs"
        );
    }

    #[test]
    fn a_window_keeps_the_first_occurrences_and_counts_the_rest() {
        let mut b = HealBatcher::new(20, 600, 100_000);
        let n = WINDOW_ALERTS as i64 + 936;
        for i in 0..n {
            b.handle_alert(&id("i"), "VDU1", &key("f", i), t(0));
        }
        let p = b.pending(&id("i")).unwrap();
        assert_eq!(p.alerts.len(), WINDOW_ALERTS);
        assert_eq!(p.alerts[0], key("f", 0), "the first ones are kept");
        assert_eq!(p.more_alerts, 936);
        // The count survives a restart, and words the heal's cause.
        let saved = serde_json::to_string(&b.snapshot()).unwrap();
        let mut c = HealBatcher::new(20, 600, 100_000);
        c.restore(serde_json::from_str(&saved).unwrap());
        let job = c.poll_due(t(20)).pop().unwrap();
        assert_eq!(job.more_alerts, 936);
        assert_eq!(
            job.request().cause.as_deref(),
            Some("auto-heal: 1000 Prometheus alert(s) for 1 VNFC(s)")
        );
        // A state saved before the count existed reads as none beyond the kept ones.
        let mut old: Value = serde_json::from_str(&saved).unwrap();
        old["pending"][0]
            .as_object_mut()
            .unwrap()
            .remove("moreAlerts");
        let old: HealBatcherState = serde_json::from_value(old).unwrap();
        assert_eq!(old.pending[0].more_alerts, 0);
    }

    #[test]
    fn alerts_within_the_window_become_one_heal() {
        let mut b = HealBatcher::new(20, 3600, 100);
        assert_eq!(
            b.handle_alert(&id("i"), "VDU1-a", &key("a", 0), t(0)),
            HealOutcome::Opened { due: t(20) }
        );
        assert_eq!(
            b.handle_alert(&id("i"), "VDU2-b", &key("b", 0), t(5)),
            HealOutcome::Joined { due: t(20) }
        );
        // a second alert for an already queued VNFC: listed once
        assert_eq!(
            b.handle_alert(&id("i"), "VDU1-a", &key("c", 3), t(6)),
            HealOutcome::Joined { due: t(20) }
        );
        assert_eq!(b.poll_timeout(), Some(t(20)));
        assert!(b.poll_due(t(19)).is_empty());
        let jobs = b.poll_due(t(20));
        assert_eq!(jobs.len(), 1);
        let j = &jobs[0];
        assert_eq!(j.instance, id("i"));
        assert_eq!(j.vnfcs, vec!["VDU1-a".to_owned(), "VDU2-b".to_owned()]);
        assert_eq!(j.alerts.len(), 3);
        assert_eq!((j.opened_at, j.due), (t(0), t(20)));
        let req = j.request();
        assert_eq!(req.vnfc_instance_id, j.vnfcs);
        assert_eq!(
            req.cause.as_deref(),
            Some("auto-heal: 3 Prometheus alert(s) for 2 VNFC(s)")
        );
        assert!(j.options().automatic);
        assert!(b.poll_due(t(100)).is_empty(), "dispatched once");
        assert_eq!(b.poll_timeout(), None);
    }

    #[test]
    fn windows_are_per_instance_and_fixed_by_the_first_alert() {
        let mut b = HealBatcher::new(20, 3600, 100);
        b.handle_alert(&id("x"), "v1", &key("a", 0), t(0));
        b.handle_alert(&id("y"), "v1", &key("b", 0), t(10));
        b.handle_alert(&id("x"), "v2", &key("c", 0), t(19));
        let jobs = b.poll_due(t(25));
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].instance.as_str(), jobs[0].vnfcs.len()), ("x", 2));
        assert_eq!(b.poll_timeout(), Some(t(30)));
        // after its job, a new alert for x opens a new window
        b.mark_idle(&id("x"));
        assert_eq!(
            b.handle_alert(&id("x"), "v3", &key("d", 26), t(26)),
            HealOutcome::Opened { due: t(46) }
        );
        let jobs = b.poll_due(t(50));
        let order: Vec<_> = jobs.iter().map(|j| j.instance.as_str()).collect();
        assert_eq!(order, ["y", "x"], "oldest window first");
    }

    #[test]
    fn the_same_alert_never_heals_twice() {
        let mut b = HealBatcher::new(20, 3600, 100);
        let k = key("a", 0);
        assert!(matches!(
            b.handle_alert(&id("i"), "v", &k, t(0)),
            HealOutcome::Opened { .. }
        ));
        assert_eq!(
            b.handle_alert(&id("i"), "v", &k, t(1)),
            HealOutcome::Duplicate
        );
        assert_eq!(b.poll_due(t(20))[0].alerts, vec![k.clone()]);
        b.mark_idle(&id("i"));
        // Alertmanager re-sends it every repeat interval (below the TTL): still a duplicate,
        // each re-send refreshing the memory
        for hour in 1..=5 {
            assert_eq!(
                b.handle_alert(&id("i"), "v", &k, t(hour * 3000)),
                HealOutcome::Duplicate
            );
        }
        assert!(b.poll_due(t(20_000)).is_empty());
        // the same fingerprint firing anew (new startsAt) is a new occurrence
        assert!(matches!(
            b.handle_alert(&id("i"), "v", &key("a", 20_000), t(20_000)),
            HealOutcome::Opened { .. }
        ));
    }

    #[test]
    fn one_fingerprint_for_two_vnfcs_heals_both() {
        // Tacker's functional test: two alerts, same fingerprint and startsAt, two VNFCs
        let mut b = HealBatcher::new(20, 3600, 100);
        let k = key("5ef77f1f8a3ecb8d", 0);
        assert!(matches!(
            b.handle_alert(&id("i"), "v1", &k, t(0)),
            HealOutcome::Opened { .. }
        ));
        assert!(matches!(
            b.handle_alert(&id("i"), "v2", &k, t(1)),
            HealOutcome::Joined { .. }
        ));
        assert_eq!(
            b.handle_alert(&id("i"), "v2", &k, t(2)),
            HealOutcome::Duplicate
        );
        assert_eq!(b.poll_due(t(20))[0].vnfcs, ["v1", "v2"]);
        assert_eq!(b.remembered(), 2);
        assert!(
            b.forget(&k),
            "a resolve forgets the occurrence for every VNFC"
        );
        assert_eq!(b.remembered(), 0);
    }

    #[test]
    fn dedupe_memory_is_bounded() {
        let mut b = HealBatcher::new(20, 100, 3);
        for i in 0..5 {
            b.handle_alert(&id("i"), "v", &key(&format!("k{i}"), 0), t(i));
        }
        assert_eq!(b.remembered(), 3, "capacity");
        // the least recently seen (k0, k1) were dropped
        assert!(!b
            .snapshot()
            .seen
            .iter()
            .any(|s| s.alert.fingerprint == "k0"));
        assert_eq!(
            b.snapshot()
                .seen
                .first()
                .map(|s| s.alert.fingerprint.clone()),
            Some("k2".into())
        );
        // entries expire ttl after they were last seen
        b.handle_alert(&id("i"), "v", &key("k4", 0), t(50)); // refresh k4 (duplicate)
        let _ = b.poll_due(t(102));
        assert_eq!(b.remembered(), 2, "k2 (seen at 2) expired at 102");
        let _ = b.poll_due(t(149));
        assert_eq!(b.remembered(), 1, "only the refreshed k4 is left");
        assert!(b.forget(&key("k4", 0)));
        assert!(!b.forget(&key("k4", 0)));
        assert_eq!(b.remembered(), 0);
    }

    #[test]
    fn a_busy_instance_keeps_its_alerts_queued() {
        let mut b = HealBatcher::new(20, 3600, 100);
        b.mark_busy(&id("i"));
        assert!(b.is_busy(&id("i")));
        b.handle_alert(&id("i"), "v1", &key("a", 0), t(0));
        assert!(
            b.poll_due(t(30)).is_empty(),
            "not in parallel with the running operation"
        );
        assert_eq!(b.poll_timeout(), None);
        // alerts arriving while it waits join the same queued window
        assert_eq!(
            b.handle_alert(&id("i"), "v2", &key("b", 0), t(40)),
            HealOutcome::Joined { due: t(20) }
        );
        b.mark_idle(&id("i"));
        assert_eq!(b.poll_timeout(), Some(t(20)));
        let jobs = b.poll_due(t(41));
        assert_eq!(jobs[0].vnfcs, ["v1", "v2"]);
        // the dispatched job marks the instance busy until the caller says it is over
        assert!(b.is_busy(&id("i")));
        b.handle_alert(&id("i"), "v3", &key("c", 0), t(42));
        assert!(b.poll_due(t(100)).is_empty());
        b.mark_idle(&id("i"));
        assert_eq!(b.poll_due(t(100))[0].vnfcs, ["v3"]);
    }

    #[test]
    fn vnfcs_gone_by_dispatch_time_are_dropped() {
        use crate::lcm::{InstantiatedVnfInfo, VnfOperationalStateType, VnfcInfo};
        let mut b = HealBatcher::new(20, 3600, 100);
        b.handle_alert(&id("i"), "v1", &key("a", 0), t(0));
        b.handle_alert(&id("i"), "v2", &key("b", 0), t(1));
        let mut job = b.poll_due(t(20)).remove(0);
        let mut inst = VnfInstance::new("i", "d");
        inst.instantiated_vnf_info = Some(InstantiatedVnfInfo {
            vnfc_info: vec![VnfcInfo {
                id: "v2".into(),
                vdu_id: "VDU1".into(),
                vnfc_resource_info_id: None,
                vnfc_state: VnfOperationalStateType::Started,
                vnfc_configurable_properties: None,
            }],
            ..InstantiatedVnfInfo::default()
        });
        assert_eq!(job.retain_existing(&inst), ["v1"]);
        assert_eq!(job.vnfcs, ["v2"]);
        inst.instantiated_vnf_info = None;
        assert_eq!(job.retain_existing(&inst), ["v2"]);
        assert!(job.vnfcs.is_empty());
    }

    #[test]
    fn cancel_drops_the_window() {
        let mut b = HealBatcher::new(20, 3600, 100);
        b.handle_alert(&id("i"), "v1", &key("a", 0), t(0));
        assert_eq!(
            b.cancel(&id("i")).map(|p| p.vnfcs),
            Some(vec!["v1".to_owned()])
        );
        assert!(b.cancel(&id("i")).is_none());
        assert!(b.poll_due(t(100)).is_empty());
    }

    #[test]
    fn pending_state_survives_a_restart() {
        let mut b = HealBatcher::new(20, 3600, 100);
        b.handle_alert(&id("i"), "v1", &key("a", 0), t(0));
        b.handle_alert(&id("i"), "v2", &key("b", 0), t(3));
        b.handle_alert(&id("j"), "w1", &key("c", 0), t(4));
        let _ = b.poll_due(t(22)); // i dispatched, j still open
        b.handle_alert(&id("i"), "v3", &key("d", 0), t(25));
        let json = serde_json::to_string(&b.snapshot()).unwrap();

        let mut after = HealBatcher::new(20, 3600, 100);
        after.restore(serde_json::from_str(&json).unwrap());
        assert_eq!(after.snapshot(), b.snapshot());
        // dedupe memory survived: re-sent alerts are still duplicates
        assert_eq!(
            after.handle_alert(&id("i"), "v1", &key("a", 0), t(30)),
            HealOutcome::Duplicate
        );
        assert_eq!(after.pending(&id("j")).map(|p| p.due), Some(t(24)));
        // busy marks are the caller's to restore
        after.mark_busy(&id("i"));
        let jobs = after.poll_due(t(60));
        assert_eq!(jobs.len(), 1);
        assert_eq!(
            (jobs[0].instance.as_str(), jobs[0].vnfcs.clone()),
            ("j", vec!["w1".to_owned()])
        );
        after.mark_idle(&id("i"));
        assert_eq!(after.poll_due(t(60))[0].vnfcs, ["v3"]);

        // restoring into a smaller memory keeps the most recently seen
        let mut small = HealBatcher::new(20, 3600, 2);
        small.restore(b.snapshot());
        let kept: Vec<_> = small
            .snapshot()
            .seen
            .into_iter()
            .map(|s| s.alert.fingerprint)
            .collect();
        assert_eq!(kept, ["c", "d"]);
    }

    /// Issue 26 High 8: an alert whose acceptance was not saved (the journal write failed on
    /// a full disk, answered 503) is accepted again when the sender retries it, as long as its
    /// window waits, without changing the window; after the window is dispatched, or once the
    /// retry was accepted, it is a duplicate again.
    #[test]
    fn an_alert_not_saved_is_accepted_again_when_retried_not_a_duplicate() {
        let mut b = HealBatcher::new(20, 3600, 100);
        let i = id("i");
        assert!(matches!(
            b.handle_alert(&i, "VDU1", &key("a", 0), t(0)),
            HealOutcome::Opened { .. }
        ));
        assert!(b.not_saved(&i, "VDU1", &key("a", 0)));
        assert!(!b.not_saved(&i, "VDU1", &key("never", 0)), "not remembered");
        assert_eq!(b.unsaved(), 1);
        let before = b.pending(&i).unwrap().clone();
        assert_eq!(
            b.handle_alert(&i, "VDU1", &key("a", 0), t(1)),
            HealOutcome::Joined { due: t(20) },
            "the retry is accepted (to be saved)"
        );
        assert_eq!(b.pending(&i).unwrap(), &before, "the window is unchanged");
        assert_eq!(
            b.handle_alert(&i, "VDU1", &key("a", 0), t(2)),
            HealOutcome::Duplicate,
            "saved with the retry: a duplicate again"
        );
        // Not saved again, then the window is dispatched: its heal covers the alert.
        b.not_saved(&i, "VDU1", &key("a", 0));
        assert_eq!(b.poll_due(t(20)).len(), 1);
        assert_eq!(
            b.handle_alert(&i, "VDU1", &key("a", 0), t(21)),
            HealOutcome::Duplicate
        );
        // The unsaved marks are bounded by the memory: a forgotten occurrence drops its mark.
        b.handle_alert(&i, "VDU1", &key("b", 0), t(22));
        b.not_saved(&i, "VDU1", &key("b", 0));
        b.forget(&key("b", 0));
        assert_eq!(b.unsaved(), 0);
    }

    /// Issue 26 High 8: a window whose heal failed to start for the server's own failure is
    /// put back, due again later, merged with a window opened since, the instance left idle.
    #[test]
    fn a_window_whose_heal_failed_to_start_is_put_back() {
        let mut b = HealBatcher::new(20, 3600, 100);
        let i = id("i");
        b.handle_alert(&i, "VDU1", &key("a", 0), t(0));
        let job = b.poll_due(t(20)).pop().unwrap();
        b.mark_idle(&i);
        b.handle_alert(&i, "VDU2", &key("b", 0), t(21));
        b.retry_at(job, t(40));
        assert!(!b.is_busy(&i));
        assert!(b.poll_due(t(39)).is_empty());
        let again = b.poll_due(t(40)).pop().unwrap();
        assert_eq!(again.vnfcs, ["VDU1", "VDU2"]);
        assert_eq!(again.alerts.len(), 2);
    }
}
