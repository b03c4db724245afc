//! Does pod anti-affinity spread over hardware? The report `vnfm cluster verify` prints and
//! `reconcile` acts on: pods per physical host, the skew of every anti-affinity and spread
//! group, the pending pods with the scheduler's reason, every pair of pods of one group on
//! one host, and node labels that no longer name the node's host.
//!
//! The physical host of a pod is the host its node's server runs on *now* (as the VIM says),
//! not the node's label: a live migration or a heal moves a worker VM, and the label is then
//! stale until reconciled.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::labels::LabelPlan;
use super::Workload;
use crate::driver::Pod;
use crate::id::NodeName;

/// The pods of one physical host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostPods {
    /// The host (name or hostId, as the label plan's source says).
    pub host: String,
    /// The worker nodes on it.
    pub nodes: Vec<NodeName>,
    /// The pods bound to those nodes (`namespace/name`).
    pub pods: Vec<String>,
}

/// Two pods of one group on one host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedHost {
    /// The host.
    pub host: String,
    /// The two pods (`name`), in name order.
    pub pods: [String; 2],
}

/// What kind of group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GroupKind {
    /// A pod anti-affinity term of a workload about its own pods.
    PodAntiAffinity,
    /// A topology spread constraint.
    TopologySpread,
}

/// One anti-affinity or spread group of a workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupReport {
    /// `Kind namespace/name`.
    pub workload: String,
    /// Anti-affinity or spread.
    pub kind: GroupKind,
    /// The term's topology key.
    pub topology_key: String,
    /// Required (`requiredDuring...` / `DoNotSchedule`) or preferred.
    pub required: bool,
    /// `maxSkew` of a spread constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_skew: Option<u32>,
    /// True when the topology key is the host label: the group means to spread over hardware.
    pub on_host_key: bool,
    /// Desired replicas.
    pub replicas: u32,
    /// Pods bound to a node.
    pub bound: usize,
    /// Pods not bound.
    pub pending: usize,
    /// Pods per physical host (hosts with worker nodes and no pod count 0).
    pub per_host: BTreeMap<String, usize>,
    /// Most minus fewest pods per host.
    pub skew: usize,
    /// Pairs of pods sharing a host.
    pub sharing: Vec<SharedHost>,
    /// True when the group's intent is broken on hardware: a required anti-affinity group on
    /// the host key with two pods on one host, or a required spread on the host key over its
    /// `maxSkew`.
    pub violated: bool,
}

/// A pod that is not bound, with the scheduler's reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingPod {
    /// `namespace/name`.
    pub pod: String,
    /// `PodScheduled` reason (`Unschedulable`), when written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The scheduler's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A node whose label does not name the host its server is on now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StaleLabel {
    /// The node.
    pub node: NodeName,
    /// Its label (`None`: absent).
    pub label: Option<String>,
    /// Its host now.
    pub host: String,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// The host label key.
    pub key: String,
    /// Pods per physical host.
    pub hosts: Vec<HostPods>,
    /// Every anti-affinity and spread group.
    pub groups: Vec<GroupReport>,
    /// Pods not bound.
    pub pending: Vec<PendingPod>,
    /// Labels that name another host than the node's.
    pub stale_labels: Vec<StaleLabel>,
    /// Pods on nodes whose host is unknown (not a worker of the VNF, or its server is gone).
    pub on_unknown_nodes: Vec<String>,
    /// Warnings (e.g. a group whose key is not the host key).
    pub warnings: Vec<String>,
}

impl VerifyReport {
    /// True when a group is violated or a label is stale.
    pub fn violated(&self) -> bool {
        !self.stale_labels.is_empty() || self.groups.iter().any(|g| g.violated)
    }
}

/// Builds the report. `plan` says where each worker node runs now (a fresh
/// [`super::plan_labels`]); `pods` are the pods of the namespace; `workloads` its Deployments
/// and StatefulSets.
pub fn verify(plan: &LabelPlan, pods: &[Pod], workloads: &[Workload]) -> VerifyReport {
    let host_of = plan.host_of();
    let mut hosts: BTreeMap<String, HostPods> = BTreeMap::new();
    for (node, host) in &host_of {
        hosts
            .entry(host.clone())
            .or_insert_with(|| HostPods {
                host: host.clone(),
                nodes: Vec::new(),
                pods: Vec::new(),
            })
            .nodes
            .push(node.clone());
    }
    let mut on_unknown_nodes = Vec::new();
    let mut pending = Vec::new();
    for p in pods {
        let id = format!("{}/{}", p.namespace, p.name);
        match &p.node {
            Some(n) => match host_of.get(n).and_then(|h| hosts.get_mut(h)) {
                Some(h) => h.pods.push(id),
                None => on_unknown_nodes.push(id),
            },
            None => pending.push(PendingPod {
                pod: id,
                reason: p.scheduled.as_ref().and_then(|s| s.reason.clone()),
                message: p.scheduled.as_ref().and_then(|s| s.message.clone()),
            }),
        }
    }
    let stale_labels = plan
        .nodes
        .iter()
        .filter(|n| n.previous.as_deref() != Some(n.value.as_str()))
        .map(|n| StaleLabel {
            node: n.node.clone(),
            label: n.previous.clone(),
            host: n.value.clone(),
        })
        .collect();
    let mut groups = Vec::new();
    let mut warnings = plan.warnings.clone();
    // pods by each of their labels, so a workload's selector looks at its own pods only
    let mut by_label: HashMap<(&str, &str), Vec<&Pod>> = HashMap::new();
    for p in pods {
        for (k, v) in &p.labels {
            by_label
                .entry((k.as_str(), v.as_str()))
                .or_default()
                .push(p);
        }
    }
    for w in workloads {
        let candidates: Vec<&Pod> = match w.selector.match_labels.iter().next() {
            Some((k, v)) => by_label
                .get(&(k.as_str(), v.as_str()))
                .cloned()
                .unwrap_or_default(),
            None => pods.iter().collect(),
        };
        let mine: Vec<&Pod> = candidates
            .into_iter()
            .filter(|p| p.namespace == w.namespace && w.selector.matches(&p.labels))
            .collect();
        let terms = w.self_anti_affinity().map(|t| GroupTerm {
            kind: GroupKind::PodAntiAffinity,
            topology_key: t.topology_key.clone(),
            required: t.required,
            max_skew: None,
        });
        let spreads = w.spread.iter().filter(|c| {
            c.selector
                .as_ref()
                .is_some_and(|s| s.matches(&w.pod_labels))
        });
        let spreads = spreads.map(|c| GroupTerm {
            kind: GroupKind::TopologySpread,
            topology_key: c.topology_key.clone(),
            required: c.hard,
            max_skew: Some(c.max_skew),
        });
        for term in terms.chain(spreads).collect::<Vec<_>>() {
            let g = group(w, &mine, &host_of, &hosts, term, &plan.key);
            if !g.on_host_key {
                warnings.push(format!(
                    "{} spreads over {:?}, not over the host label {:?}: two of its pods can \
                     share a physical host",
                    g.workload, g.topology_key, plan.key
                ));
            }
            groups.push(g);
        }
    }
    VerifyReport {
        key: plan.key.clone(),
        hosts: hosts.into_values().collect(),
        groups,
        pending,
        stale_labels,
        on_unknown_nodes,
        warnings,
    }
}

/// What makes a group of a workload's pods: a pod anti-affinity term about its own pods or a
/// topology spread constraint that selects them.
struct GroupTerm {
    kind: GroupKind,
    topology_key: String,
    /// Required (`requiredDuring...` / `DoNotSchedule`) or preferred.
    required: bool,
    /// `maxSkew` of a spread constraint.
    max_skew: Option<u32>,
}

/// The report of the group `term` makes of `mine`, the pods of `w`, on the hosts of
/// `host_of` (`key` is the host label key).
fn group(
    w: &Workload,
    mine: &[&Pod],
    host_of: &BTreeMap<NodeName, String>,
    hosts: &BTreeMap<String, HostPods>,
    term: GroupTerm,
    key: &str,
) -> GroupReport {
    let GroupTerm {
        kind,
        topology_key,
        required,
        max_skew,
    } = term;
    let mut per_host: BTreeMap<String, usize> = hosts.keys().map(|h| (h.clone(), 0)).collect();
    let mut by_host: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut bound = 0;
    for p in mine {
        let Some(n) = &p.node else { continue };
        bound += 1;
        if let Some(h) = host_of.get(n) {
            *per_host.entry(h.clone()).or_default() += 1;
            by_host.entry(h.as_str()).or_default().push(p.name.as_str());
        }
    }
    let mut sharing = Vec::new();
    for (h, names) in &by_host {
        let mut names = names.clone();
        names.sort_unstable();
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                sharing.push(SharedHost {
                    host: (*h).to_owned(),
                    pods: [(*a).to_owned(), (*b).to_owned()],
                });
            }
        }
    }
    let skew = per_host.values().max().copied().unwrap_or(0)
        - per_host.values().min().copied().unwrap_or(0);
    let on_host_key = topology_key == key;
    let violated = on_host_key
        && required
        && match kind {
            GroupKind::PodAntiAffinity => !sharing.is_empty(),
            GroupKind::TopologySpread => max_skew.is_some_and(|m| skew > m as usize),
        };
    GroupReport {
        workload: format!("{} {}/{}", w.kind, w.namespace, w.name),
        kind,
        topology_key,
        required,
        max_skew,
        on_host_key,
        replicas: w.replicas,
        bound,
        pending: mine.len() - bound,
        per_host,
        skew,
        sharing,
        violated,
    }
}

/// One eviction `reconcile --evict` asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Eviction {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The host it shares.
    pub host: String,
    /// The group (`Kind namespace/name`).
    pub workload: String,
}

/// The evictions that undo the violations of `report`: in every violated anti-affinity
/// group, all but the first pod (in name order) of each host with several, so that each
/// violating pair loses one member and the scheduler places it again under the fixed labels.
pub fn evictions(report: &VerifyReport) -> Vec<Eviction> {
    let mut out = Vec::new();
    for g in report
        .groups
        .iter()
        .filter(|g| g.violated && g.kind == GroupKind::PodAntiAffinity)
    {
        let namespace = g
            .workload
            .split_once(' ')
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(ns, _)| ns.to_owned())
            .unwrap_or_default();
        let mut seen: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for s in &g.sharing {
            let names = seen.entry(s.host.as_str()).or_default();
            for p in &s.pods {
                if !names.contains(&p.as_str()) {
                    names.push(p.as_str());
                }
            }
        }
        for (host, mut names) in seen {
            names.sort_unstable();
            for p in names.iter().skip(1) {
                if !out
                    .iter()
                    .any(|e: &Eviction| e.pod == *p && e.namespace == namespace)
                {
                    out.push(Eviction {
                        namespace: namespace.clone(),
                        pod: (*p).to_owned(),
                        host: host.to_owned(),
                        workload: g.workload.clone(),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::hosts::{HostSource, MatchedBy};
    use crate::cluster::labels::NodeLabel;
    use crate::driver::{ApplyWorkload, PodAntiAffinity, PodScheduled};
    use crate::id::ServerId;

    fn plan(nodes: &[(&str, &str, Option<&str>)]) -> LabelPlan {
        LabelPlan {
            key: "host".into(),
            source: HostSource::Host,
            nodes: nodes
                .iter()
                .map(|(n, h, prev)| NodeLabel {
                    node: (*n).into(),
                    server: ServerId::new(format!("s-{n}")),
                    server_name: (*n).into(),
                    matched_by: MatchedBy::SystemUuid,
                    value: (*h).into(),
                    previous: prev.map(Into::into),
                })
                .collect(),
            removed: vec![],
            unplaced: vec![],
            warnings: vec![],
            patches: vec![],
        }
    }

    fn pod(name: &str, node: Option<&str>) -> Pod {
        Pod {
            namespace: "ns".into(),
            name: name.into(),
            labels: BTreeMap::from([("app".into(), "cnf".into())]),
            node: node.map(Into::into),
            phase: if node.is_some() { "Running" } else { "Pending" }.into(),
            scheduled: node.is_none().then(|| PodScheduled {
                status: false,
                reason: Some("Unschedulable".into()),
                message: Some("0/3 nodes are available".into()),
            }),
            deleting: false,
        }
    }

    fn cnf(key: &str, required: bool) -> Workload {
        let mut w = ApplyWorkload::new("ns", "cnf", 3);
        w.anti_affinity = Some(PodAntiAffinity {
            topology_key: key.into(),
            required,
        });
        Workload::from_object(&w.to_object().object, "ns").unwrap()
    }

    #[test]
    fn a_migration_shows_as_a_pair_on_one_host_and_a_stale_label() {
        // w2 was on c2 and its label says so; its server now runs on c1
        let p = plan(&[
            ("w1", "c1", Some("c1")),
            ("w2", "c1", Some("c2")),
            ("w3", "c3", Some("c3")),
        ]);
        let pods = [
            pod("a", Some("w1")),
            pod("b", Some("w2")),
            pod("c", Some("w3")),
        ];
        let r = verify(&p, &pods, &[cnf("host", true)]);
        assert!(r.violated());
        assert_eq!(r.stale_labels.len(), 1);
        assert_eq!(r.stale_labels[0].node.as_str(), "w2");
        let g = &r.groups[0];
        assert_eq!(g.per_host["c1"], 2);
        assert_eq!(g.skew, 1, "c1 has 2 pods, c3 has 1 (c2 has no worker now)");
        assert_eq!(
            g.sharing,
            vec![SharedHost {
                host: "c1".into(),
                pods: ["a".into(), "b".into()]
            }]
        );
        let ev = evictions(&r);
        assert_eq!(ev.len(), 1);
        assert_eq!((ev[0].pod.as_str(), ev[0].namespace.as_str()), ("b", "ns"));
    }

    #[test]
    fn pending_pods_carry_the_reason_and_other_keys_warn() {
        let p = plan(&[("w1", "c1", Some("c1")), ("w2", "c2", Some("c2"))]);
        let pods = [pod("a", Some("w1")), pod("b", Some("w2")), pod("c", None)];
        let r = verify(&p, &pods, &[cnf("host", true)]);
        assert!(!r.violated());
        assert_eq!(r.pending[0].reason.as_deref(), Some("Unschedulable"));
        assert_eq!(r.groups[0].pending, 1);
        let r = verify(&p, &pods, &[cnf("kubernetes.io/hostname", true)]);
        assert!(r.warnings[0].contains("not over the host label"));
        assert!(!r.groups[0].on_host_key);
    }
}
