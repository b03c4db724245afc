//! The simulated container cluster: nodes with labels, workloads of replicas, pods bound to
//! nodes by a small scheduler.
//!
//! Scheduling: a pending pod of a workload with a *required* anti-affinity term goes to a node
//! that has the topology label and whose label value no other pod of the workload uses; with a
//! *preferred* term, nodes whose value is used least come first; otherwise the node with the
//! fewest pods; ties by node name. A pod that fits nowhere stays `Pending` with no node, and is
//! retried after every change (labels, workloads, deletions). Bound pods never move
//! (`IgnoredDuringExecution`). Scaling in removes pending pods first, then the newest.

use std::collections::BTreeMap;

use crate::cloud::ClusterSpec;
use crate::driver::{
    ApplyWorkload, ClusterNode, DeletePod, DriverError, LabelNode, ListPods, Pod, PodAntiAffinity,
    ScaleWorkload,
};
use crate::id::{IdGen, NodeName};

use super::{not_found, DRIVER};

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct PodRec {
    name: String,
    node: Option<NodeName>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Workload {
    replicas: u32,
    anti: Option<PodAntiAffinity>,
    hash: String,
    pods: Vec<PodRec>,
}

/// The cluster part of the simulator's state.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct ClusterState {
    nodes: BTreeMap<NodeName, BTreeMap<String, String>>,
    #[serde(with = "pair_keyed")]
    workloads: BTreeMap<(String, String), Workload>,
}

/// Serializes a map keyed by `(namespace, name)` as a list of entries (JSON keys are strings).
mod pair_keyed {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<V: Serialize, S: Serializer>(
        m: &BTreeMap<(String, String), V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }

    pub(super) fn deserialize<'de, V: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<(String, String), V>, D::Error> {
        let v: Vec<((String, String), V)> = Vec::deserialize(d)?;
        Ok(v.into_iter().collect())
    }
}

fn suffix(ids: &mut IdGen, len: usize) -> String {
    ids.next_uuid().replace('-', "").chars().take(len).collect()
}

impl ClusterState {
    pub(crate) fn new(spec: Option<&ClusterSpec>) -> Self {
        let nodes = spec
            .map(|s| {
                s.nodes
                    .iter()
                    .map(|(n, ns)| (NodeName::new(n.as_str()), ns.labels.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            nodes,
            workloads: BTreeMap::new(),
        }
    }

    pub(crate) fn list_nodes(&self) -> Vec<ClusterNode> {
        self.nodes
            .iter()
            .map(|(name, labels)| ClusterNode {
                name: name.clone(),
                labels: labels.clone(),
            })
            .collect()
    }

    pub(crate) fn label_node(
        &mut self,
        req: LabelNode,
        ids: &mut IdGen,
    ) -> Result<(), DriverError> {
        if let Some(k) = req.labels.keys().find(|k| k.is_empty() || k.len() > 316) {
            return Err(DriverError::Invalid {
                driver: DRIVER,
                message: format!(
                    "Node \"{}\" is invalid: metadata.labels: Invalid value: {k:?}: name part must be non-empty",
                    req.node
                ),
            });
        }
        let labels = self
            .nodes
            .get_mut(&req.node)
            .ok_or_else(|| not_found("node", req.node.as_str()))?;
        for (k, v) in req.labels {
            match v {
                Some(v) => {
                    labels.insert(k, v);
                }
                None => {
                    labels.remove(&k);
                }
            }
        }
        self.schedule(ids);
        Ok(())
    }

    pub(crate) fn apply_workload(
        &mut self,
        req: ApplyWorkload,
        ids: &mut IdGen,
    ) -> Result<(), DriverError> {
        if let Some(a) = &req.anti_affinity {
            if a.topology_key.is_empty() {
                return Err(DriverError::Invalid {
                    driver: DRIVER,
                    message: format!(
                        "Deployment.apps \"{}\" is invalid: spec.template.spec.affinity.podAntiAffinity: topologyKey: Required value: can not be empty",
                        req.name
                    ),
                });
            }
        }
        let key = (req.namespace.clone(), req.name.clone());
        let changed = self
            .workloads
            .get(&key)
            .is_none_or(|w| w.anti != req.anti_affinity);
        if changed {
            // a new pod template: a new ReplicaSet replaces every pod
            let hash = suffix(ids, 10);
            self.workloads.insert(
                key.clone(),
                Workload {
                    replicas: 0,
                    anti: req.anti_affinity,
                    hash,
                    pods: Vec::new(),
                },
            );
        }
        self.resize(&key, req.replicas, ids);
        self.schedule(ids);
        Ok(())
    }

    pub(crate) fn scale_workload(
        &mut self,
        req: ScaleWorkload,
        ids: &mut IdGen,
    ) -> Result<(), DriverError> {
        let key = (req.namespace, req.name);
        if !self.workloads.contains_key(&key) {
            return Err(not_found("deployment", &format!("{}/{}", key.0, key.1)));
        }
        self.resize(&key, req.replicas, ids);
        self.schedule(ids);
        Ok(())
    }

    pub(crate) fn list_pods(&self, req: &ListPods) -> Result<Vec<Pod>, DriverError> {
        let key = (req.namespace.clone(), req.workload.clone());
        Ok(self
            .workloads
            .get(&key)
            .map(|w| {
                w.pods
                    .iter()
                    .map(|p| Pod {
                        namespace: req.namespace.clone(),
                        name: p.name.clone(),
                        workload: req.workload.clone(),
                        node: p.node.clone(),
                        phase: if p.node.is_some() {
                            "Running"
                        } else {
                            "Pending"
                        }
                        .to_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    pub(crate) fn delete_pod(
        &mut self,
        req: DeletePod,
        ids: &mut IdGen,
    ) -> Result<(), DriverError> {
        let found = self.workloads.iter_mut().find_map(|((ns, _), w)| {
            if ns != &req.namespace {
                return None;
            }
            let i = w.pods.iter().position(|p| p.name == req.name)?;
            w.pods.remove(i);
            Some(())
        });
        if found.is_none() {
            return Err(not_found("pod", &format!("{}/{}", req.namespace, req.name)));
        }
        // the controller re-creates the missing replica
        let keys: Vec<_> = self.workloads.keys().cloned().collect();
        for k in keys {
            let replicas = self.workloads.get(&k).map_or(0, |w| w.replicas);
            self.resize(&k, replicas, ids);
        }
        self.schedule(ids);
        Ok(())
    }

    fn resize(&mut self, key: &(String, String), replicas: u32, ids: &mut IdGen) {
        let Some(w) = self.workloads.get_mut(key) else {
            return;
        };
        w.replicas = replicas;
        while w.pods.len() > replicas as usize {
            let i = w
                .pods
                .iter()
                .rposition(|p| p.node.is_none())
                .unwrap_or(w.pods.len() - 1);
            w.pods.remove(i);
        }
        while w.pods.len() < replicas as usize {
            let name = format!("{}-{}-{}", key.1, w.hash, suffix(ids, 5));
            w.pods.push(PodRec { name, node: None });
        }
    }

    fn pods_on(&self, node: &NodeName) -> usize {
        self.workloads
            .values()
            .flat_map(|w| &w.pods)
            .filter(|p| p.node.as_ref() == Some(node))
            .count()
    }

    /// Binds pending pods where they fit.
    fn schedule(&mut self, _ids: &mut IdGen) {
        let keys: Vec<_> = self.workloads.keys().cloned().collect();
        for key in keys {
            let pending = self
                .workloads
                .get(&key)
                .map(|w| w.pods.iter().filter(|p| p.node.is_none()).count())
                .unwrap_or(0);
            for _ in 0..pending {
                let Some(w) = self.workloads.get(&key) else {
                    break;
                };
                let Some(idx) = w.pods.iter().position(|p| p.node.is_none()) else {
                    break;
                };
                let used: Vec<Option<&String>> = w
                    .pods
                    .iter()
                    .filter_map(|p| p.node.as_ref())
                    .map(|n| {
                        w.anti
                            .as_ref()
                            .and_then(|a| self.nodes.get(n).and_then(|l| l.get(&a.topology_key)))
                    })
                    .collect();
                let mut candidates: Vec<(usize, usize, &NodeName)> = Vec::new();
                for (node, labels) in &self.nodes {
                    let (ok, score) = match &w.anti {
                        Some(a) => {
                            let v = labels.get(&a.topology_key);
                            let same = used.iter().filter(|u| u.is_some() && **u == v).count();
                            if a.required {
                                (v.is_some() && same == 0, 0)
                            } else {
                                (true, same)
                            }
                        }
                        None => (true, 0),
                    };
                    if ok {
                        candidates.push((score, self.pods_on(node), node));
                    }
                }
                candidates.sort();
                let choice = candidates.first().map(|c| c.2.clone());
                match (choice, self.workloads.get_mut(&key)) {
                    (Some(node), Some(w)) => {
                        if let Some(p) = w.pods.get_mut(idx) {
                            p.node = Some(node);
                        }
                    }
                    _ => break,
                }
            }
        }
    }
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
        s.apply_workload(w).await.unwrap();
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
        s.apply_workload(w).await.unwrap();
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
            s.apply_workload(bad).await.unwrap_err(),
            DriverError::Invalid { .. }
        ));
    }

    #[tokio::test]
    async fn pods_are_named_deterministically() {
        let names = |s: SimCloud| async move {
            s.apply_workload(ApplyWorkload::new("ns", "w", 2))
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
