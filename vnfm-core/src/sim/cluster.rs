//! The simulated container cluster: nodes with labels, the objects of CNFs, workloads
//! (Deployments, StatefulSets) of replicas, and pods bound to nodes by a scheduler that filters
//! and scores like kube-scheduler's `InterPodAffinity` and `PodTopologySpread` plugins.
//!
//! Filtering, in kube-scheduler's order, for a pending pod and each node: the pod's required
//! pod affinity terms (the node must carry the topology key and its domain hold a matching pod,
//! except for the first pod of a group that matches its own term), the pod's required
//! anti-affinity terms (no matching pod in the node's domain; a node without the topology key
//! passes, as in Kubernetes), the required anti-affinity of pods already bound (the same,
//! seen from them), then the `DoNotSchedule` topology spread constraints (the node must carry
//! the key, and placing the pod must keep the skew within `maxSkew`). A pod no node passes
//! stays `Pending` with `PodScheduled=False`, reason `Unschedulable` and the scheduler's
//! message (`0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. ...`).
//! Scoring: preferred terms (weight per matching pod in the domain, anti-affinity negative),
//! `ScheduleAnyway` spread (fewer matching pods in the domain first), then the node with the
//! fewest pods, then by name. Pending pods are retried after every change (labels,
//! workloads, deletions). Bound pods never move (`IgnoredDuringExecution`). Scaling in removes
//! pending pods first, then the newest (a StatefulSet: the highest ordinal).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::cloud::ClusterSpec;
use crate::cluster::Workload;
use crate::driver::{
    ApplyObject, ClusterEvent, ClusterNode, DeletePod, DriverError, EvictPod, LabelNode, ListPods,
    NodeAddress, ObjectRef, Pod, PodScheduled, ScaleWorkload, WorkloadKind,
};
use crate::id::{IdGen, NodeName};

use super::failure::{not_found, DRIVER};

/// At most this many events are kept (the oldest go first), as the API server's TTL would.
const MAX_EVENTS: usize = 1_000;

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct NodeRec {
    pub(crate) labels: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) provider_id: Option<String>,
    #[serde(default)]
    pub(crate) system_uuid: Option<String>,
    #[serde(default)]
    pub(crate) addresses: Vec<NodeAddress>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct PodRec {
    name: String,
    labels: BTreeMap<String, String>,
    node: Option<NodeName>,
    /// The scheduler's message while unschedulable.
    #[serde(default)]
    unschedulable: Option<String>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct SimWorkload {
    spec: Workload,
    object: Value,
    hash: String,
    pods: Vec<PodRec>,
    /// The next StatefulSet ordinal (Deployments name pods by hash).
    #[serde(default)]
    next_ordinal: u32,
}

/// The cluster part of the simulator's state.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct ClusterState {
    pub(crate) nodes: BTreeMap<NodeName, NodeRec>,
    /// Workloads by `namespace/Kind/name`.
    workloads: BTreeMap<String, SimWorkload>,
    /// Other objects by `namespace/Kind/name`.
    #[serde(default)]
    objects: BTreeMap<String, Value>,
    #[serde(default)]
    events: Vec<(String, ClusterEvent)>,
}

fn suffix(ids: &mut IdGen, len: usize) -> String {
    ids.next_uuid().replace('-', "").chars().take(len).collect()
}

fn key(namespace: &str, kind: &str, name: &str) -> String {
    format!("{namespace}/{kind}/{name}")
}

fn invalid(message: String) -> DriverError {
    DriverError::Invalid {
        driver: DRIVER,
        message,
    }
}

/// Label keys as the API server validates them: an optional DNS-subdomain prefix and `/`, then
/// a name of 1-63 characters `[A-Za-z0-9._-]`, starting and ending alphanumeric.
fn valid_label_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.len() <= 63
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            && n.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && n.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok(name) && prefix_ok
}

fn valid_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            && v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && v.chars().last().is_some_and(|c| c.is_ascii_alphanumeric()))
}

/// A bound pod as the scheduler sees it.
struct Placed<'a> {
    namespace: &'a str,
    labels: &'a BTreeMap<String, String>,
    node: &'a NodeName,
    workload: &'a Workload,
}

impl ClusterState {
    pub(crate) fn new(spec: Option<&ClusterSpec>) -> Self {
        let nodes = spec
            .map(|s| {
                s.nodes
                    .iter()
                    .map(|(n, ns)| {
                        (
                            NodeName::new(n.as_str()),
                            NodeRec {
                                labels: ns.labels.clone(),
                                ..NodeRec::default()
                            },
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            nodes,
            ..Self::default()
        }
    }

    pub(crate) fn list_nodes(&self) -> Vec<ClusterNode> {
        self.nodes
            .iter()
            .map(|(name, n)| ClusterNode {
                name: name.clone(),
                labels: n.labels.clone(),
                provider_id: n.provider_id.clone(),
                system_uuid: n.system_uuid.clone(),
                addresses: n.addresses.clone(),
            })
            .collect()
    }

    pub(crate) fn label_node(
        &mut self,
        req: LabelNode,
        ids: &mut IdGen,
    ) -> Result<(), DriverError> {
        for (k, v) in &req.labels {
            if !valid_label_key(k) {
                return Err(invalid(format!(
                    "Node \"{}\" is invalid: metadata.labels: Invalid value: {k:?}: a valid label key must be an optional DNS subdomain prefix and '/', then 1-63 characters [A-Za-z0-9._-] starting and ending alphanumeric",
                    req.node
                )));
            }
            if let Some(v) = v.as_deref().filter(|v| !valid_label_value(v)) {
                return Err(invalid(format!(
                    "Node \"{}\" is invalid: metadata.labels: Invalid value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                    req.node
                )));
            }
        }
        let node = self
            .nodes
            .get_mut(&req.node)
            .ok_or_else(|| not_found("node", req.node.as_str()))?;
        for (k, v) in req.labels {
            match v {
                Some(v) => {
                    node.labels.insert(k, v);
                }
                None => {
                    node.labels.remove(&k);
                }
            }
        }
        self.schedule(ids);
        Ok(())
    }

    pub(crate) fn apply_object(
        &mut self,
        req: ApplyObject,
        ids: &mut IdGen,
    ) -> Result<(), DriverError> {
        let kind = req.object.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = req
            .object
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if kind.is_empty() || name.is_empty() {
            return Err(invalid(
                "Object 'Kind' is missing or metadata.name is empty in the manifest".to_owned(),
            ));
        }
        if let Some(ns) = req
            .object
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
        {
            if ns != req.namespace {
                return Err(invalid(format!(
                    "the namespace of the provided object ({ns}) does not match the namespace sent on the request ({})",
                    req.namespace
                )));
            }
        }
        let k = key(&req.namespace, kind, name);
        if WorkloadKind::parse(kind).is_none() {
            self.objects.insert(k, req.object);
            return Ok(());
        }
        let spec = Workload::from_object(&req.object, &req.namespace)
            .map_err(|e| invalid(format!("{kind}.apps \"{name}\" is invalid: {e}")))?;
        if !spec.selector.matches(&spec.pod_labels) {
            return Err(invalid(format!(
                "{kind}.apps \"{name}\" is invalid: spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`"
            )));
        }
        let template_changed = self.workloads.get(&k).is_none_or(|w| {
            w.object.pointer("/spec/template") != req.object.pointer("/spec/template")
        });
        if template_changed {
            // a new pod template: a new ReplicaSet replaces every pod
            let hash = suffix(ids, 10);
            self.workloads.insert(
                k.clone(),
                SimWorkload {
                    spec: Workload {
                        replicas: 0,
                        ..spec.clone()
                    },
                    object: req.object,
                    hash,
                    pods: Vec::new(),
                    next_ordinal: 0,
                },
            );
        } else if let Some(w) = self.workloads.get_mut(&k) {
            w.object = req.object;
        }
        self.resize(&k, spec.replicas, ids);
        self.schedule(ids);
        Ok(())
    }

    pub(crate) fn delete_object(
        &mut self,
        req: &ObjectRef,
        ids: &mut IdGen,
    ) -> Result<(), DriverError> {
        let k = key(&req.namespace, &req.kind, &req.name);
        if self.workloads.remove(&k).is_none() && self.objects.remove(&k).is_none() {
            return Err(not_found(
                &req.kind.to_lowercase(),
                &format!("{}/{}", req.namespace, req.name),
            ));
        }
        self.schedule(ids);
        Ok(())
    }

    pub(crate) fn list_workloads(&self, namespace: &str) -> Vec<Value> {
        self.workloads
            .values()
            .filter(|w| w.spec.namespace == namespace)
            .map(|w| {
                let mut o = w.object.clone();
                o["spec"]["replicas"] = Value::from(w.spec.replicas);
                let ready = w.pods.iter().filter(|p| p.node.is_some()).count();
                o["status"] = serde_json::json!({
                    "replicas": w.pods.len(),
                    "readyReplicas": ready,
                    "availableReplicas": ready,
                });
                o
            })
            .collect()
    }

    pub(crate) fn scale_workload(
        &mut self,
        req: ScaleWorkload,
        ids: &mut IdGen,
    ) -> Result<(), DriverError> {
        let k = key(&req.namespace, req.kind.as_str(), &req.name);
        if !self.workloads.contains_key(&k) {
            return Err(not_found(
                &req.kind.as_str().to_lowercase(),
                &format!("{}/{}", req.namespace, req.name),
            ));
        }
        self.resize(&k, req.replicas, ids);
        self.schedule(ids);
        Ok(())
    }

    pub(crate) fn list_pods(&self, req: &ListPods) -> Vec<Pod> {
        self.workloads
            .values()
            .filter(|w| w.spec.namespace == req.namespace)
            .flat_map(|w| w.pods.iter().map(move |p| (w, p)))
            .filter(|(_, p)| req.selector.iter().all(|(k, v)| p.labels.get(k) == Some(v)))
            .map(|(w, p)| Pod {
                namespace: w.spec.namespace.clone(),
                name: p.name.clone(),
                labels: p.labels.clone(),
                node: p.node.clone(),
                phase: if p.node.is_some() {
                    "Running"
                } else {
                    "Pending"
                }
                .to_owned(),
                scheduled: match (&p.node, &p.unschedulable) {
                    (Some(_), _) => Some(PodScheduled {
                        status: true,
                        reason: None,
                        message: None,
                    }),
                    (None, Some(m)) => Some(PodScheduled {
                        status: false,
                        reason: Some("Unschedulable".to_owned()),
                        message: Some(m.clone()),
                    }),
                    (None, None) => None,
                },
                deleting: false,
            })
            .collect()
    }

    pub(crate) fn delete_pod(
        &mut self,
        req: &DeletePod,
        ids: &mut IdGen,
    ) -> Result<(), DriverError> {
        self.remove_pod(&req.namespace, &req.name, ids)
    }

    /// The Eviction API: a pod that is running (bound: the simulator's kubelets run every bound
    /// pod) is evicted only when every PodDisruptionBudget of its namespace that selects it
    /// allows a disruption; otherwise the API server's 429 (a `Conflict` with its message) and
    /// the pod stays. A pod that is not running is evicted whatever the budgets, as the real
    /// API server does (vnfm-k8s/tests/real_cluster.rs, eviction_honours_the_disruption_budget).
    pub(crate) fn evict_pod(&mut self, req: &EvictPod, ids: &mut IdGen) -> Result<(), DriverError> {
        let pod = self
            .workloads
            .values()
            .filter(|w| w.spec.namespace == req.namespace)
            .flat_map(|w| &w.pods)
            .find(|p| p.name == req.name)
            .ok_or_else(|| not_found("pod", &format!("{}/{}", req.namespace, req.name)))?;
        if pod.node.is_some() {
            let labels = pod.labels.clone();
            for (k, pdb) in &self.objects {
                if !k.starts_with(&format!("{}/PodDisruptionBudget/", req.namespace)) {
                    continue;
                }
                let allowed = self.disruptions_allowed(k, pdb, &req.namespace, &labels)?;
                if allowed == Some(0) {
                    return Err(DriverError::Conflict {
                        driver: DRIVER,
                        message: "Cannot evict pod as it would violate the pod's disruption \
                                  budget."
                            .to_owned(),
                    });
                }
            }
        }
        self.remove_pod(&req.namespace, &req.name, ids)
    }

    /// How many disruptions the budget `pdb` allows now, as the disruption controller computes
    /// it (`None` when it does not select a pod with `labels`): the healthy (bound) pods it
    /// selects minus `minAvailable`, or `maxUnavailable` minus the pods it selects that are not
    /// healthy; percentages of the selected pods, rounded up as Kubernetes does.
    fn disruptions_allowed(
        &self,
        key: &str,
        pdb: &Value,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Option<u32>, DriverError> {
        let sel = crate::cluster::workload::selector_at(key, pdb, "spec.selector")
            .map_err(|e| invalid(e.to_string()))?;
        if !sel.matches(labels) {
            return Ok(None);
        }
        let selected: Vec<&PodRec> = self
            .workloads
            .values()
            .filter(|w| w.spec.namespace == namespace)
            .flat_map(|w| &w.pods)
            .filter(|p| sel.matches(&p.labels))
            .collect();
        let expected = u32::try_from(selected.len()).unwrap_or(u32::MAX);
        let healthy =
            u32::try_from(selected.iter().filter(|p| p.node.is_some()).count()).unwrap_or(0);
        let amount = |field: &str| -> Result<Option<u32>, DriverError> {
            let Some(v) = pdb.get("spec").and_then(|s| s.get(field)) else {
                return Ok(None);
            };
            if let Some(n) = v.as_u64() {
                return Ok(Some(u32::try_from(n).unwrap_or(u32::MAX)));
            }
            let pct = v
                .as_str()
                .and_then(|t| t.strip_suffix('%'))
                .and_then(|t| t.parse::<u64>().ok())
                .ok_or_else(|| {
                    invalid(format!(
                        "{key}: spec.{field}: expected an integer or a percentage, found {v}"
                    ))
                })?;
            Ok(Some(
                u32::try_from((pct * u64::from(expected)).div_ceil(100)).unwrap_or(u32::MAX),
            ))
        };
        let allowed = if let Some(min) = amount("minAvailable")? {
            healthy.saturating_sub(min)
        } else if let Some(max) = amount("maxUnavailable")? {
            max.saturating_sub(expected - healthy)
        } else {
            // a budget without either allows nothing to be evicted (minAvailable 100%)
            0
        };
        Ok(Some(allowed))
    }

    pub(crate) fn list_events(&self, namespace: &str) -> Vec<ClusterEvent> {
        self.events
            .iter()
            .filter(|(ns, _)| ns == namespace)
            .map(|(_, e)| e.clone())
            .collect()
    }

    fn remove_pod(
        &mut self,
        namespace: &str,
        name: &str,
        ids: &mut IdGen,
    ) -> Result<(), DriverError> {
        let found = self.workloads.values_mut().find_map(|w| {
            if w.spec.namespace != namespace {
                return None;
            }
            let i = w.pods.iter().position(|p| p.name == name)?;
            w.pods.remove(i);
            Some(())
        });
        if found.is_none() {
            return Err(not_found("pod", &format!("{namespace}/{name}")));
        }
        // the controller re-creates the missing replica
        let keys: Vec<_> = self.workloads.keys().cloned().collect();
        for k in keys {
            let replicas = self.workloads.get(&k).map_or(0, |w| w.spec.replicas);
            self.resize(&k, replicas, ids);
        }
        self.schedule(ids);
        Ok(())
    }

    fn resize(&mut self, k: &str, replicas: u32, ids: &mut IdGen) {
        let Some(w) = self.workloads.get_mut(k) else {
            return;
        };
        w.spec.replicas = replicas;
        while w.pods.len() > replicas as usize {
            let i = match w.spec.kind {
                WorkloadKind::StatefulSet => w.pods.len() - 1,
                WorkloadKind::Deployment => w
                    .pods
                    .iter()
                    .rposition(|p| p.node.is_none())
                    .unwrap_or(w.pods.len() - 1),
            };
            w.pods.remove(i);
            if w.spec.kind == WorkloadKind::StatefulSet {
                w.next_ordinal = w.next_ordinal.saturating_sub(1);
            }
        }
        while w.pods.len() < replicas as usize {
            let mut labels = w.spec.pod_labels.clone();
            let name = match w.spec.kind {
                WorkloadKind::Deployment => {
                    labels.insert("pod-template-hash".to_owned(), w.hash.clone());
                    format!("{}-{}-{}", w.spec.name, w.hash, suffix(ids, 5))
                }
                WorkloadKind::StatefulSet => {
                    let n = format!("{}-{}", w.spec.name, w.next_ordinal);
                    labels.insert("statefulset.kubernetes.io/pod-name".to_owned(), n.clone());
                    w.next_ordinal += 1;
                    n
                }
            };
            w.pods.push(PodRec {
                name,
                labels,
                node: None,
                unschedulable: None,
            });
        }
    }

    fn pods_on(&self, node: &NodeName) -> usize {
        self.workloads
            .values()
            .flat_map(|w| &w.pods)
            .filter(|p| p.node.as_ref() == Some(node))
            .count()
    }

    fn placed(&self) -> Vec<Placed<'_>> {
        self.workloads
            .values()
            .flat_map(|w| {
                w.pods.iter().filter_map(move |p| {
                    p.node.as_ref().map(|node| Placed {
                        namespace: &w.spec.namespace,
                        labels: &p.labels,
                        node,
                        workload: &w.spec,
                    })
                })
            })
            .collect()
    }

    fn domain(&self, node: &NodeName, key: &str) -> Option<&String> {
        self.nodes.get(node).and_then(|n| n.labels.get(key))
    }

    /// Why `node` cannot take a pod of `w` labelled `labels` (kube-scheduler's reason), or
    /// `None` when it can.
    fn filter(
        &self,
        placed: &[Placed<'_>],
        w: &Workload,
        labels: &BTreeMap<String, String>,
        node: &NodeName,
    ) -> Option<&'static str> {
        let value = |key: &str| self.domain(node, key);
        // the pod's required affinity
        for t in w.affinity.iter().filter(|t| !t.anti && t.required) {
            let Some(sel) = &t.selector else { continue };
            let matching: Vec<_> = placed
                .iter()
                .filter(|p| p.namespace == w.namespace && sel.matches(p.labels))
                .collect();
            let ok = match value(&t.topology_key) {
                None => false,
                Some(v) => {
                    matching
                        .iter()
                        .any(|p| self.domain(p.node, &t.topology_key) == Some(v))
                        || (matching.is_empty() && sel.matches(labels))
                }
            };
            if !ok {
                return Some("node(s) didn't match pod affinity rules");
            }
        }
        // the pod's required anti-affinity
        for t in w.affinity.iter().filter(|t| t.anti && t.required) {
            let (Some(sel), Some(v)) = (&t.selector, value(&t.topology_key)) else {
                continue;
            };
            if placed.iter().any(|p| {
                p.namespace == w.namespace
                    && sel.matches(p.labels)
                    && self.domain(p.node, &t.topology_key) == Some(v)
            }) {
                return Some("node(s) didn't match pod anti-affinity rules");
            }
        }
        // required anti-affinity of the pods already bound
        for p in placed {
            for t in p.workload.affinity.iter().filter(|t| t.anti && t.required) {
                let (Some(sel), Some(v)) = (&t.selector, value(&t.topology_key)) else {
                    continue;
                };
                if p.namespace == w.namespace
                    && sel.matches(labels)
                    && self.domain(p.node, &t.topology_key) == Some(v)
                {
                    return Some("node(s) didn't satisfy existing pods anti-affinity rules");
                }
            }
        }
        // hard topology spread
        for c in w.spread.iter().filter(|c| c.hard) {
            let Some(v) = value(&c.topology_key) else {
                return Some(
                    "node(s) didn't match pod topology spread constraints (missing required label)",
                );
            };
            let counts = self.spread_counts(placed, w, c.selector.as_ref(), &c.topology_key);
            let min = counts.values().copied().min().unwrap_or(0);
            let here = counts.get(v).copied().unwrap_or(0);
            if here + 1 - min > c.max_skew as usize {
                return Some("node(s) didn't match pod topology spread constraints");
            }
        }
        None
    }

    /// Matching pods per domain of `key`, over every node that carries the key.
    fn spread_counts(
        &self,
        placed: &[Placed<'_>],
        w: &Workload,
        sel: Option<&crate::cluster::LabelSelector>,
        key: &str,
    ) -> BTreeMap<String, usize> {
        let mut counts: BTreeMap<String, usize> = self
            .nodes
            .values()
            .filter_map(|n| n.labels.get(key).map(|v| (v.clone(), 0)))
            .collect();
        if let Some(sel) = sel {
            for p in placed
                .iter()
                .filter(|p| p.namespace == w.namespace && sel.matches(p.labels))
            {
                if let Some(c) = self.domain(p.node, key).and_then(|v| counts.get_mut(v)) {
                    *c += 1;
                }
            }
        }
        counts
    }

    /// The score of `node` for a pod of `w` (higher is better).
    fn score(&self, placed: &[Placed<'_>], w: &Workload, node: &NodeName) -> i64 {
        let mut score = 0i64;
        for t in w.affinity.iter().filter(|t| !t.required) {
            let (Some(sel), Some(v)) = (&t.selector, self.domain(node, &t.topology_key)) else {
                continue;
            };
            let n = placed
                .iter()
                .filter(|p| {
                    p.namespace == w.namespace
                        && sel.matches(p.labels)
                        && self.domain(p.node, &t.topology_key) == Some(v)
                })
                .count() as i64;
            score += if t.anti { -n } else { n } * i64::from(t.weight);
        }
        for c in w.spread.iter().filter(|c| !c.hard) {
            if let Some(v) = self.domain(node, &c.topology_key) {
                let counts = self.spread_counts(placed, w, c.selector.as_ref(), &c.topology_key);
                score -= counts.get(v).copied().unwrap_or(0) as i64;
            }
        }
        score
    }

    /// Binds pending pods where they fit; records why the others do not.
    fn schedule(&mut self, _ids: &mut IdGen) {
        self.retry_pending();
        let keys: Vec<String> = self.workloads.keys().cloned().collect();
        for k in keys {
            while let Some(w) = self.workloads.get(&k) {
                let Some(idx) = w
                    .pods
                    .iter()
                    .position(|p| p.node.is_none() && p.unschedulable.is_none())
                else {
                    break;
                };
                let labels = w.pods[idx].labels.clone();
                let spec = w.spec.clone();
                let placed = self.placed();
                let mut reasons: BTreeMap<&'static str, usize> = BTreeMap::new();
                let mut best: Option<(i64, usize, NodeName)> = None;
                for node in self.nodes.keys() {
                    if let Some(r) = self.filter(&placed, &spec, &labels, node) {
                        *reasons.entry(r).or_default() += 1;
                        continue;
                    }
                    let cand = (
                        -self.score(&placed, &spec, node),
                        self.pods_on(node),
                        node.clone(),
                    );
                    if best.as_ref().is_none_or(|b| cand < *b) {
                        best = Some(cand);
                    }
                }
                let message = unschedulable_message(self.nodes.len(), &reasons);
                drop(placed);
                let Some(w) = self.workloads.get_mut(&k) else {
                    break;
                };
                let Some(pod) = w.pods.get_mut(idx) else {
                    break;
                };
                match best {
                    Some((_, _, node)) => pod.node = Some(node),
                    None => {
                        pod.unschedulable = Some(message.clone());
                        let event = ClusterEvent {
                            object_kind: "Pod".to_owned(),
                            object_name: pod.name.clone(),
                            kind: "Warning".to_owned(),
                            reason: "FailedScheduling".to_owned(),
                            message,
                            count: 1,
                        };
                        self.events.push((spec.namespace.clone(), event));
                        if self.events.len() > MAX_EVENTS {
                            self.events.remove(0);
                        }
                    }
                }
            }
        }
    }

    /// Marks every unschedulable pod for another try (after a change of nodes or pods).
    fn retry_pending(&mut self) {
        for w in self.workloads.values_mut() {
            for p in &mut w.pods {
                p.unschedulable = None;
            }
        }
    }
}

/// kube-scheduler's `FitError` message: `0/N nodes are available: <count reason>, ... .`
/// with its reasons sorted, and the preemption suffix it adds when no victim helps.
fn unschedulable_message(nodes: usize, reasons: &BTreeMap<&'static str, usize>) -> String {
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    if nodes == 0 {
        return "no nodes available to schedule pods".to_owned();
    }
    format!(
        "0/{nodes} nodes are available: {}. no new claims to deallocate, preemption: 0/{nodes} nodes are available: {nodes} No preemption victims found for incoming pod.",
        parts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::cloud::CloudFile;
    use crate::driver::*;
    use crate::sim::SimCloud;

    fn sim() -> SimCloud {
        let c = CloudFile::from_yaml(
            "t",
            "zones: {}\ncluster:\n  nodes:\n    worker-1: {}\n    worker-2: {}\n    worker-3: {labels: {zone: a}}\n",
        )
        .unwrap();
        SimCloud::new(c, 5)
    }

    fn label(node: &str, k: &str, v: Option<&str>) -> LabelNode {
        let mut m = BTreeMap::new();
        m.insert(k.to_owned(), v.map(str::to_owned));
        LabelNode::new(node.into(), m)
    }

    /// As the real API server does (real_cluster.rs eviction_honours_the_disruption_budget): a
    /// running pod is not evicted against a budget that allows no disruption (429 → Conflict
    /// with the API server's message, the pod stays); a Pending pod is evicted whatever the
    /// budget; a budget that allows one lets one eviction through.
    #[tokio::test]
    async fn eviction_honours_pod_disruption_budgets() {
        let s = sim();
        // three nodes, four replicas with required anti-affinity per node: one pending
        let mut w = ApplyWorkload::new("default", "db", 4);
        w.anti_affinity = Some(PodAntiAffinity {
            topology_key: "kubernetes.io/hostname".into(),
            required: true,
        });
        for n in ["worker-1", "worker-2", "worker-3"] {
            s.label_node(label(n, "kubernetes.io/hostname", Some(n)))
                .await
                .unwrap();
        }
        s.apply_object(w.to_object()).await.unwrap();
        let pdb = |spec: serde_json::Value| {
            ApplyObject::new(
                "default",
                serde_json::json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": "db"},
                    "spec": spec}),
            )
        };
        s.apply_object(pdb(serde_json::json!({"minAvailable": 3,
            "selector": {"matchLabels": {"app": "db"}}})))
            .await
            .unwrap();
        let pods = s.list_pods(ListPods::new("default", "db")).await.unwrap();
        let running = pods.iter().find(|p| p.node.is_some()).unwrap().name.clone();
        let pending = pods.iter().find(|p| p.node.is_none()).unwrap().name.clone();
        match s.evict_pod(EvictPod::new("default", &running)).await {
            Err(DriverError::Conflict { message, .. }) => {
                assert!(message.contains("disruption budget"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        let after = s.list_pods(ListPods::new("default", "db")).await.unwrap();
        assert!(after.iter().any(|p| p.name == running), "the pod stays");
        s.evict_pod(EvictPod::new("default", &pending))
            .await
            .unwrap();
        // half of the four pods may be unavailable: two, of which the re-created pending pod is
        // one, so one eviction is allowed
        s.apply_object(pdb(serde_json::json!({"maxUnavailable": "50%",
            "selector": {"matchLabels": {"app": "db"}}})))
            .await
            .unwrap();
        s.evict_pod(EvictPod::new("default", &running))
            .await
            .unwrap();
        let after = s.list_pods(ListPods::new("default", "db")).await.unwrap();
        assert!(after.iter().all(|p| p.name != running), "evicted");
        // a budget over other pods does not apply
        s.apply_object(pdb(serde_json::json!({"minAvailable": 10,
            "selector": {"matchLabels": {"app": "other"}}})))
            .await
            .unwrap();
        let victim = after
            .iter()
            .find(|p| p.node.is_some())
            .unwrap()
            .name
            .clone();
        s.evict_pod(EvictPod::new("default", &victim))
            .await
            .unwrap();
        assert!(s
            .evict_pod(EvictPod::new("default", "no-such-pod"))
            .await
            .unwrap_err()
            .is_not_found());
    }

    #[tokio::test]
    async fn labels_are_set_and_removed() {
        let s = sim();
        s.label_node(label("worker-1", "CIS-node", Some("c1")))
            .await
            .unwrap();
        s.label_node(label("worker-3", "zone", None)).await.unwrap();
        s.label_node(label("worker-3", "absent", None))
            .await
            .unwrap();
        let nodes = s.list_nodes().await.unwrap();
        assert_eq!(nodes[0].labels["CIS-node"], "c1");
        assert!(nodes[2].labels.is_empty());
        let e = s
            .label_node(label("nope", "a", Some("b")))
            .await
            .unwrap_err();
        assert!(e.is_not_found());
    }

    #[tokio::test]
    async fn required_anti_affinity_spreads_over_topology_values() {
        let s = sim();
        s.label_node(label("worker-1", "CIS-node", Some("c1")))
            .await
            .unwrap();
        s.label_node(label("worker-2", "CIS-node", Some("c1")))
            .await
            .unwrap();
        s.label_node(label("worker-3", "CIS-node", Some("c2")))
            .await
            .unwrap();
        let mut w = ApplyWorkload::new("default", "vdu1", 3);
        w.anti_affinity = Some(PodAntiAffinity {
            topology_key: "CIS-node".into(),
            required: true,
        });
        s.apply_object(w.to_object()).await.unwrap();
        let pods = s.list_pods(ListPods::new("default", "vdu1")).await.unwrap();
        assert_eq!(pods.len(), 3);
        let bound: Vec<_> = pods.iter().filter_map(|p| p.node.clone()).collect();
        assert_eq!(bound.len(), 2, "only two distinct CIS-node values");
        let pending = pods.iter().find(|p| p.node.is_none()).unwrap();
        assert_eq!(pending.phase, "Pending");
        // a new topology value lets the pending pod schedule
        s.label_node(label("worker-2", "CIS-node", Some("c3")))
            .await
            .unwrap();
        let pods = s.list_pods(ListPods::new("default", "vdu1")).await.unwrap();
        assert!(pods.iter().all(|p| p.phase == "Running"));
        // scale in removes pods, scale out adds pending ones
        s.scale_workload(ScaleWorkload::new("default", "vdu1", 4))
            .await
            .unwrap();
        let pods = s.list_pods(ListPods::new("default", "vdu1")).await.unwrap();
        assert_eq!(pods.iter().filter(|p| p.node.is_none()).count(), 1);
        s.scale_workload(ScaleWorkload::new("default", "vdu1", 3))
            .await
            .unwrap();
        let pods = s.list_pods(ListPods::new("default", "vdu1")).await.unwrap();
        assert!(pods.iter().all(|p| p.node.is_some()));
        assert!(s
            .scale_workload(ScaleWorkload::new("default", "nope", 1))
            .await
            .unwrap_err()
            .is_not_found());
    }

    #[tokio::test]
    async fn preferred_anti_affinity_and_heal_by_delete() {
        let s = sim();
        let mut w = ApplyWorkload::new("ns", "vdu2", 4);
        w.anti_affinity = Some(PodAntiAffinity {
            topology_key: "kubernetes.io/hostname".into(),
            required: false,
        });
        s.apply_object(w.to_object()).await.unwrap();
        let pods = s.list_pods(ListPods::new("ns", "vdu2")).await.unwrap();
        assert!(
            pods.iter().all(|p| p.node.is_some()),
            "preferred never leaves pods pending"
        );
        let victim = pods[0].name.clone();
        s.delete_pod(DeletePod::new("ns", victim.clone()))
            .await
            .unwrap();
        let after = s.list_pods(ListPods::new("ns", "vdu2")).await.unwrap();
        assert_eq!(after.len(), 4);
        assert!(after.iter().all(|p| p.name != victim));
        assert!(s
            .delete_pod(DeletePod::new("ns", victim))
            .await
            .unwrap_err()
            .is_not_found());
        let mut bad = ApplyWorkload::new("ns", "x", 1);
        bad.anti_affinity = Some(PodAntiAffinity {
            topology_key: String::new(),
            required: true,
        });
        assert!(matches!(
            s.apply_object(bad.to_object()).await.unwrap_err(),
            DriverError::Invalid { .. }
        ));
    }

    #[tokio::test]
    async fn pods_are_named_deterministically() {
        let names = |s: SimCloud| async move {
            s.apply_object(ApplyWorkload::new("ns", "w", 2).to_object())
                .await
                .unwrap();
            s.list_pods(ListPods::new("ns", "w"))
                .await
                .unwrap()
                .into_iter()
                .map(|p| (p.name, p.node))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(sim()).await, names(sim()).await);
    }
}
