//! The counters behind `GET /metrics`, rendered in the Prometheus text format (0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use vnfm_core::alert::Endpoint;

use crate::heap::HeapStats;
use crate::store::StoreCalls;

/// The metrics label of an alert endpoint.
pub(crate) fn endpoint_label(e: Endpoint) -> &'static str {
    match e {
        Endpoint::AutoHealing => "auto_healing",
        Endpoint::AutoScaling => "auto_scaling",
    }
}

fn index(e: Endpoint) -> usize {
    match e {
        Endpoint::AutoHealing => 0,
        Endpoint::AutoScaling => 1,
    }
}

const ENDPOINTS: [Endpoint; 2] = [Endpoint::AutoHealing, Endpoint::AutoScaling];

/// `text` (the Prometheus text format) with `replica="<replica>"` first among the labels of
/// every sample: replicas behind one scrape address (a Service) stay apart, and a series
/// names the replica whose log lines carry the same id. `replica` is a valid replica id
/// ([`crate::config::is_replica_id`]): nothing in it needs escaping.
pub(crate) fn with_replica(text: &str, replica: &str) -> String {
    let label = format!("replica=\"{replica}\"");
    let mut out = String::with_capacity(text.len() + text.len() / 3);
    for line in text.split_inclusive('\n') {
        if line.starts_with('#') || line.trim().is_empty() {
            out.push_str(line);
            continue;
        }
        // A metric name is [a-zA-Z_:][a-zA-Z0-9_:]*: its end is the first '{' or space.
        match line.find(['{', ' ']) {
            Some(i) if line.as_bytes().get(i) == Some(&b'{') => {
                out.push_str(&line[..=i]);
                out.push_str(&label);
                if !line[i + 1..].starts_with('}') {
                    out.push(',');
                }
                out.push_str(&line[i + 1..]);
            }
            Some(i) => {
                out.push_str(&line[..i]);
                out.push('{');
                out.push_str(&label);
                out.push('}');
                out.push_str(&line[i..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Values read at render time.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Gauges {
    /// Heal windows not yet dispatched.
    pub pending_heals: usize,
    /// Instances that take no other operation now (read with `pending_heals`, under one lock).
    pub busy_instances: usize,
    /// Alert occurrences remembered for de-duplication.
    pub remembered_alerts: usize,
    /// LCM operations running now.
    pub running_operations: usize,
}

/// The statuses [`StatusCounts`] counts: 100-599.
const STATUSES: std::ops::Range<u16> = 100..600;

/// A counter per endpoint and status of [`STATUSES`].
#[derive(Debug)]
struct StatusCounts(Vec<AtomicU64>);

impl Default for StatusCounts {
    fn default() -> Self {
        Self(
            (0..ENDPOINTS.len() * STATUSES.len())
                .map(|_| AtomicU64::new(0))
                .collect(),
        )
    }
}

impl StatusCounts {
    fn slot(e: Endpoint, status: u16) -> Option<usize> {
        STATUSES
            .contains(&status)
            .then(|| index(e) * STATUSES.len() + usize::from(status - STATUSES.start))
    }
}

/// Every counter of the server.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    received: [AtomicU64; 2],
    accepted: [AtomicU64; 2],
    ignored: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    not_started: [AtomicU64; 2],
    /// Requests by endpoint and status 100-599 (an atomic each: bumped on every webhook).
    requests: StatusCounts,
    /// Requests with another status (none that the server answers).
    other_requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    operations: Mutex<BTreeMap<(String, String), u64>>,
    reselections: AtomicU64,
    /// Set by the heal dispatcher at every look at the windows.
    heal_windows_waiting: AtomicU64,
}

fn bump<K: Ord>(m: &Mutex<BTreeMap<K, u64>>, key: K, n: u64) {
    let mut g = m.lock().unwrap_or_else(PoisonError::into_inner);
    *g.entry(key).or_insert(0) += n;
}

impl Metrics {
    pub(crate) fn received(&self, e: Endpoint, n: usize) {
        self.received[index(e)].fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn accepted(&self, e: Endpoint) {
        self.accepted[index(e)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn ignored(&self, e: Endpoint, reason: &'static str) {
        bump(&self.ignored, (endpoint_label(e), reason), 1);
    }

    /// The operation of an accepted alert (a heal window, a scale) was refused before it
    /// started, and the alert handler has taken that into account (the window waits again or
    /// is dropped; the cooldown ended).
    pub(crate) fn not_started(&self, e: Endpoint) {
        self.not_started[index(e)].fetch_add(1, Ordering::Relaxed);
    }

    /// The heal dispatcher's count of closed windows that wait for their instance.
    pub(crate) fn heal_windows_waiting(&self, n: usize) {
        self.heal_windows_waiting.store(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn request(&self, e: Endpoint, status: u16) {
        match StatusCounts::slot(e, status).and_then(|n| self.requests.0.get(n)) {
            Some(c) => {
                c.fetch_add(1, Ordering::Relaxed);
            }
            None => bump(&self.other_requests, (endpoint_label(e), status), 1),
        }
    }

    pub(crate) fn operation(&self, operation: String, state: String) {
        bump(&self.operations, (operation, state), 1);
    }

    pub(crate) fn reselections(&self, n: u64) {
        self.reselections.fetch_add(n, Ordering::Relaxed);
    }

    /// The text exposition.
    pub(crate) fn render(&self, g: Gauges) -> String {
        let mut s = String::new();
        header(
            &mut s,
            "vnfm_alert_requests_total",
            "counter",
            "Webhook requests to the alert endpoints, by endpoint and HTTP status.",
        );
        let mut requests: BTreeMap<(&'static str, u16), u64> = self
            .other_requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for e in ENDPOINTS {
            for code in STATUSES {
                let n = StatusCounts::slot(e, code)
                    .and_then(|i| self.requests.0.get(i))
                    .map_or(0, |c| c.load(Ordering::Relaxed));
                if n > 0 {
                    requests.insert((endpoint_label(e), code), n);
                }
            }
        }
        for ((e, code), n) in &requests {
            let _ = writeln!(
                s,
                "vnfm_alert_requests_total{{endpoint=\"{e}\",code=\"{code}\"}} {n}"
            );
        }
        header(
            &mut s,
            "vnfm_alerts_received_total",
            "counter",
            "Alerts received in valid webhooks, by endpoint.",
        );
        for e in ENDPOINTS {
            let n = self.received[index(e)].load(Ordering::Relaxed);
            let _ = writeln!(
                s,
                "vnfm_alerts_received_total{{endpoint=\"{}\"}} {n}",
                endpoint_label(e)
            );
        }
        header(
            &mut s,
            "vnfm_alerts_accepted_total",
            "counter",
            "Alerts that queued a heal or started a scale, by endpoint.",
        );
        for e in ENDPOINTS {
            let n = self.accepted[index(e)].load(Ordering::Relaxed);
            let _ = writeln!(
                s,
                "vnfm_alerts_accepted_total{{endpoint=\"{}\"}} {n}",
                endpoint_label(e)
            );
        }
        header(
            &mut s,
            "vnfm_alerts_ignored_total",
            "counter",
            "Alerts that triggered nothing, by endpoint and reason.",
        );
        for ((e, r), n) in self
            .ignored
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let _ = writeln!(
                s,
                "vnfm_alerts_ignored_total{{endpoint=\"{e}\",reason=\"{r}\"}} {n}"
            );
        }
        header(
            &mut s,
            "vnfm_alert_actions_not_started_total",
            "counter",
            "Accepted alerts whose operation (heal window, scale) the lifecycle refused before \
             it started, by endpoint; counted once the refusal is handled (the window waits \
             for the operation holding its instance, or is dropped; the scale cooldown ends).",
        );
        for e in ENDPOINTS {
            let n = self.not_started[index(e)].load(Ordering::Relaxed);
            let _ = writeln!(
                s,
                "vnfm_alert_actions_not_started_total{{endpoint=\"{}\"}} {n}",
                endpoint_label(e)
            );
        }
        header(
            &mut s,
            "vnfm_lcm_operations_total",
            "counter",
            "LCM operation occurrences that entered a state, by operation and state.",
        );
        for ((o, st), n) in self
            .operations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let _ = writeln!(
                s,
                "vnfm_lcm_operations_total{{operation=\"{o}\",state=\"{st}\"}} {n}"
            );
        }
        header(
            &mut s,
            "vnfm_reselections_total",
            "counter",
            "Stack attempts after the first one (availability-zone reselections).",
        );
        let _ = writeln!(
            s,
            "vnfm_reselections_total {}",
            self.reselections.load(Ordering::Relaxed)
        );
        for (name, help, v) in [
            (
                "vnfm_heal_windows_pending",
                "Auto-heal windows not yet dispatched.",
                g.pending_heals,
            ),
            (
                "vnfm_heal_windows_waiting",
                "Closed auto-heal windows that wait for the operation holding their instance, \
                 as the dispatcher last saw them.",
                self.heal_windows_waiting.load(Ordering::Relaxed) as usize,
            ),
            (
                "vnfm_instances_busy",
                "VNF instances that take no other operation now: one runs or is being started \
                 on them, or one that is not over (FAILED_TEMP) holds them.",
                g.busy_instances,
            ),
            (
                "vnfm_alerts_remembered",
                "Alert occurrences remembered for de-duplication (bounded by dedupe_capacity).",
                g.remembered_alerts,
            ),
            (
                "vnfm_lcm_operations_running",
                "LCM operations running now.",
                g.running_operations,
            ),
        ] {
            header(&mut s, name, "gauge", help);
            let _ = writeln!(s, "{name} {v}");
        }
        s
    }
}

fn header(s: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Appends `vnfm_state_calls_total{connection, kind}`: the reads and write transactions of
/// each of the server's connections to the state file (`main`: the operations, the API, the
/// alerts; `notifications`: the delivery of the SOL003 notifications).
pub(super) fn render_state_calls(s: &mut String, connections: &[(&str, StoreCalls)]) {
    header(
        s,
        "vnfm_state_calls_total",
        "counter",
        "Calls on the server's connections to the state file, by connection (main: the \
         operations, the API, the alerts; notifications: the delivery of the SOL003 \
         notifications) and kind (read: one query; write: one transaction).",
    );
    for (connection, calls) in connections {
        for (kind, v) in [("read", calls.reads), ("write", calls.writes)] {
            let _ = writeln!(
                s,
                "vnfm_state_calls_total{{connection=\"{connection}\",kind=\"{kind}\"}} {v}"
            );
        }
    }
}

/// Appends the allocator's counters ([`crate::heap`]) as `vnfm_heap_*_bytes` gauges labelled
/// with the allocator.
pub(super) fn render_heap(s: &mut String, allocator: &str, h: HeapStats) {
    for (name, help, v) in [
        (
            "allocated",
            "Bytes the program allocated and has not freed, as its allocator counts them.",
            h.allocated,
        ),
        (
            "active",
            "Bytes in the allocator's pages that hold the program's allocations.",
            h.active,
        ),
        (
            "metadata",
            "Bytes of the allocator's own bookkeeping.",
            h.metadata,
        ),
        (
            "resident",
            "Bytes the allocator holds in physical memory (active, metadata, freed pages not yet \
             given back).",
            h.resident,
        ),
        (
            "mapped",
            "Bytes the allocator has mapped for allocations.",
            h.mapped,
        ),
        (
            "retained",
            "Bytes of address space the allocator keeps for reuse, not resident.",
            h.retained,
        ),
    ] {
        let name = format!("vnfm_heap_{name}_bytes");
        header(s, &name, "gauge", help);
        let _ = writeln!(s, "{name}{{allocator=\"{allocator}\"}} {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_gets_the_replica_label_and_comments_stay() {
        let text = "# HELP a_total A.\n# TYPE a_total counter\na_total 3\n\
                    b{endpoint=\"auto_healing\",status=\"204\"} 1\nc{} 2\n";
        let want = "# HELP a_total A.\n# TYPE a_total counter\na_total{replica=\"vnfm-0\"} 3\n\
                    b{replica=\"vnfm-0\",endpoint=\"auto_healing\",status=\"204\"} 1\n\
                    c{replica=\"vnfm-0\"} 2\n";
        assert_eq!(with_replica(text, "vnfm-0"), want);
    }

    #[test]
    fn every_heap_counter_is_a_gauge_labelled_with_the_allocator() {
        let mut text = String::new();
        let heap = HeapStats {
            allocated: 1,
            active: 2,
            metadata: 3,
            resident: 4,
            mapped: 5,
            retained: 6,
        };
        render_heap(&mut text, "jemalloc", heap);
        for (name, value) in [
            ("allocated", 1),
            ("active", 2),
            ("metadata", 3),
            ("resident", 4),
            ("mapped", 5),
            ("retained", 6),
        ] {
            assert!(
                text.contains(&format!("# TYPE vnfm_heap_{name}_bytes gauge\n")),
                "{text}"
            );
            assert!(
                text.contains(&format!(
                    "\nvnfm_heap_{name}_bytes{{allocator=\"jemalloc\"}} {value}\n"
                )),
                "{text}"
            );
        }
        assert_eq!(text.lines().count(), 18);
    }

    #[test]
    fn renders_every_family_with_labels() {
        let m = Metrics::default();
        m.received(Endpoint::AutoHealing, 3);
        m.accepted(Endpoint::AutoHealing);
        m.ignored(Endpoint::AutoHealing, "duplicate");
        m.ignored(Endpoint::AutoHealing, "duplicate");
        m.request(Endpoint::AutoScaling, 401);
        m.operation("HEAL".into(), "COMPLETED".into());
        m.reselections(2);
        m.not_started(Endpoint::AutoScaling);
        m.heal_windows_waiting(3);
        let t = m.render(Gauges {
            pending_heals: 1,
            busy_instances: 2,
            ..Gauges::default()
        });
        for line in [
            "vnfm_alerts_received_total{endpoint=\"auto_healing\"} 3",
            "vnfm_alerts_received_total{endpoint=\"auto_scaling\"} 0",
            "vnfm_alerts_accepted_total{endpoint=\"auto_healing\"} 1",
            "vnfm_alerts_ignored_total{endpoint=\"auto_healing\",reason=\"duplicate\"} 2",
            "vnfm_alert_requests_total{endpoint=\"auto_scaling\",code=\"401\"} 1",
            "vnfm_lcm_operations_total{operation=\"HEAL\",state=\"COMPLETED\"} 1",
            "vnfm_reselections_total 2",
            "vnfm_heal_windows_pending 1",
            "vnfm_heal_windows_waiting 3",
            "vnfm_instances_busy 2",
            "vnfm_alert_actions_not_started_total{endpoint=\"auto_scaling\"} 1",
            "vnfm_alert_actions_not_started_total{endpoint=\"auto_healing\"} 0",
            "# TYPE vnfm_alerts_ignored_total counter",
        ] {
            assert!(t.lines().any(|l| l == line), "missing {line:?} in\n{t}");
        }
    }
}
