//! The host labels of worker nodes: which node gets which value, and the patches that make
//! it so (only for nodes whose label differs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::hosts::{self, HostSource, MatchError, MatchedBy};
use super::LabelSelector;
use crate::driver::{ClusterNode, LabelNode, ServerInfo};
use crate::id::{NodeName, ServerId};

/// The label key vnfm writes by default: the one cloud-provider-openstack adopted for the
/// compute host of a node.
pub const DEFAULT_HOST_LABEL: &str = "topology.openstack.org/host-id";

/// The zone label the OpenStack cloud controller manager owns (it writes the Nova zone there
/// and would overwrite a host).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// What to label.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelConfig {
    /// The label key.
    pub key: String,
    /// Only the nodes this selects are the cluster VNF's (default: every node).
    pub nodes: Option<LabelSelector>,
}

/// Why no label plan could be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LabelError {
    /// Nodes and servers do not match unambiguously.
    #[error(transparent)]
    Match(#[from] MatchError),
    /// The key is not a valid Kubernetes label key.
    #[error("label key {key:?} is invalid: {why}")]
    InvalidKey {
        /// The key.
        key: String,
        /// What is wrong.
        why: String,
    },
}

impl LabelConfig {
    /// Labels every node with `key`.
    ///
    /// # Errors
    /// [`LabelError::InvalidKey`] for a key the API server would refuse.
    pub fn new(key: impl Into<String>) -> Result<Self, LabelError> {
        let key = key.into();
        check_key(&key)?;
        Ok(Self { key, nodes: None })
    }

    /// Only the nodes `selector` selects.
    pub fn with_nodes(mut self, selector: LabelSelector) -> Self {
        self.nodes = Some(selector);
        self
    }
}

fn check_key(key: &str) -> Result<(), LabelError> {
    let bad = |why: &str| LabelError::InvalidKey {
        key: key.to_owned(),
        why: why.to_owned(),
    };
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    let ends = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty() || name.len() > 63 || !name_chars || !ends {
        return Err(bad(
            "the name part must be 1-63 characters [A-Za-z0-9._-], starting and ending alphanumeric",
        ));
    }
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            });
        if !ok {
            return Err(bad("the prefix must be a lowercase DNS subdomain"));
        }
    }
    Ok(())
}

/// One node's label as planned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLabel {
    /// The node.
    pub node: NodeName,
    /// Its server.
    pub server: ServerId,
    /// The server's name.
    pub server_name: String,
    /// How they were matched.
    pub matched_by: MatchedBy,
    /// The value it gets.
    pub value: String,
    /// The value it had.
    pub previous: Option<String>,
}

/// A label removed from a node whose server is gone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemovedLabel {
    /// The node.
    pub node: NodeName,
    /// The value it had.
    pub previous: String,
}

/// A node whose server is on no host now (building, in error, or shelved): its label is left
/// as it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unplaced {
    /// The node.
    pub node: NodeName,
    /// Its server.
    pub server: ServerId,
    /// The server's status.
    pub status: String,
}

/// The labels of every worker node and the patches that set them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelPlan {
    /// The label key.
    pub key: String,
    /// Where the values come from.
    pub source: HostSource,
    /// Every matched node with its value.
    pub nodes: Vec<NodeLabel>,
    /// Labels removed from nodes whose server is gone.
    pub removed: Vec<RemovedLabel>,
    /// Nodes whose server is on no host.
    pub unplaced: Vec<Unplaced>,
    /// Warnings (e.g. the zone label).
    pub warnings: Vec<String>,
    /// The patches to send: one per node whose label changes, none when nothing changed.
    #[serde(skip)]
    pub patches: Vec<LabelNode>,
}

impl LabelPlan {
    /// The nodes whose label changes.
    pub fn changed(&self) -> impl Iterator<Item = &NodeLabel> {
        self.nodes
            .iter()
            .filter(|n| n.previous.as_deref() != Some(n.value.as_str()))
    }

    /// The physical host value of each matched node (`None` for unplaced ones).
    pub fn host_of(&self) -> BTreeMap<NodeName, String> {
        self.nodes
            .iter()
            .map(|n| (n.node.clone(), n.value.clone()))
            .collect()
    }
}

/// Plans the host label of every worker node: `servers` are the cluster VNF's servers as the
/// VIM shows them now (see [`hosts`] for matching and the value's source).
///
/// # Errors
/// [`LabelError::Match`] for a node that matches no server and carries no label of ours, an
/// IP shared by servers, or a server claimed by two nodes.
pub fn plan_labels(
    nodes: &[ClusterNode],
    servers: &[ServerInfo],
    cfg: &LabelConfig,
) -> Result<LabelPlan, LabelError> {
    let workers: Vec<ClusterNode> = nodes
        .iter()
        .filter(|n| cfg.nodes.as_ref().is_none_or(|s| s.matches(&n.labels)))
        .cloned()
        .collect();
    let matching = hosts::match_nodes(&workers, servers)?;
    let index = hosts::ServerIndex::new(servers);
    let matched_servers: Vec<&ServerInfo> = matching
        .matched
        .values()
        .filter_map(|m| index.get(m.server.as_str()))
        .filter(|s| s.host.is_some() || s.host_id.is_some())
        .collect();
    let source = hosts::host_source(&matched_servers);
    let mut plan = LabelPlan {
        key: cfg.key.clone(),
        source,
        nodes: Vec::new(),
        removed: Vec::new(),
        unplaced: Vec::new(),
        warnings: Vec::new(),
        patches: Vec::new(),
    };
    if cfg.key == ZONE_LABEL {
        plan.warnings.push(format!(
            "label key {ZONE_LABEL} is the zone label: the OpenStack cloud controller manager \
             sets it to the Nova zone of the node and would overwrite the host written here"
        ));
    }
    for n in &workers {
        let previous = n.labels.get(&cfg.key).cloned();
        let Some(m) = matching.matched.get(&n.name) else {
            match previous {
                Some(previous) => {
                    plan.patches.push(LabelNode::new(
                        n.name.clone(),
                        BTreeMap::from([(cfg.key.clone(), None)]),
                    ));
                    plan.removed.push(RemovedLabel {
                        node: n.name.clone(),
                        previous,
                    });
                }
                None => return Err(hosts::no_match(n, servers).into()),
            }
            continue;
        };
        let Some(server) = index.get(m.server.as_str()) else {
            continue;
        };
        let Some(value) = hosts::host_value(server, source).map(|v| hosts::label_value(&v)) else {
            plan.unplaced.push(Unplaced {
                node: n.name.clone(),
                server: server.id.clone(),
                status: server.status.clone(),
            });
            continue;
        };
        if previous.as_deref() != Some(value.as_str()) {
            plan.patches.push(LabelNode::new(
                n.name.clone(),
                BTreeMap::from([(cfg.key.clone(), Some(value.clone()))]),
            ));
        }
        plan.nodes.push(NodeLabel {
            node: n.name.clone(),
            server: server.id.clone(),
            server_name: server.name.clone(),
            matched_by: m.matched_by,
            value,
            previous,
        });
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::NodeAddress;

    fn server(id: &str, host: Option<&str>, host_id: &str, ip: &str) -> ServerInfo {
        ServerInfo {
            id: ServerId::new(id),
            name: format!("vm-{id}"),
            status: "ACTIVE".into(),
            host: host.map(Into::into),
            host_id: Some(host_id.into()),
            addresses: vec![ip.to_owned()],
            zone: None,
            flavor: None,
            server_groups: vec![],
            fault: None,
        }
    }

    fn node(name: &str, uuid: &str, labels: &[(&str, &str)]) -> ClusterNode {
        let mut n = ClusterNode::new(
            name,
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        n.system_uuid = Some(uuid.into());
        n.addresses = vec![NodeAddress::new("InternalIP", "192.0.2.1")];
        n
    }

    fn cfg() -> LabelConfig {
        LabelConfig::new(DEFAULT_HOST_LABEL).unwrap()
    }

    #[test]
    fn labels_each_node_with_its_host_and_patches_only_changes() {
        let servers = vec![
            server("s1", Some("c1"), "h1", "10.0.0.1"),
            server("s2", Some("c2"), "h2", "10.0.0.2"),
        ];
        let nodes = vec![
            node("w1", "s1", &[]),
            node("w2", "s2", &[(DEFAULT_HOST_LABEL, "c2")]),
        ];
        let plan = plan_labels(&nodes, &servers, &cfg()).unwrap();
        assert_eq!(plan.source, HostSource::Host);
        assert_eq!(plan.patches.len(), 1, "w2 already carries c2");
        assert_eq!(plan.patches[0].node.as_str(), "w1");
        assert_eq!(
            plan.patches[0].labels[DEFAULT_HOST_LABEL].as_deref(),
            Some("c1")
        );
        assert_eq!(plan.changed().count(), 1);
        // once applied, nothing changes
        let nodes = vec![
            node("w1", "s1", &[(DEFAULT_HOST_LABEL, "c1")]),
            node("w2", "s2", &[(DEFAULT_HOST_LABEL, "c2")]),
        ];
        assert!(plan_labels(&nodes, &servers, &cfg())
            .unwrap()
            .patches
            .is_empty());
    }

    #[test]
    fn non_admin_credentials_label_with_host_id() {
        let servers = vec![
            server("s1", None, "h1", "10.0.0.1"),
            server("s2", Some("c2"), "h2", "10.0.0.2"),
        ];
        let nodes = vec![node("w1", "s1", &[]), node("w2", "s2", &[])];
        let plan = plan_labels(&nodes, &servers, &cfg()).unwrap();
        assert_eq!(
            plan.source,
            HostSource::HostId,
            "one hidden host: hostId for all"
        );
        let values: Vec<_> = plan.nodes.iter().map(|n| n.value.as_str()).collect();
        assert_eq!(values, ["h1", "h2"]);
    }

    #[test]
    fn a_gone_server_loses_its_label_an_unknown_node_is_an_error() {
        let servers = vec![server("s1", Some("c1"), "h1", "10.0.0.1")];
        let nodes = vec![
            node("w1", "s1", &[(DEFAULT_HOST_LABEL, "c1")]),
            node("w2", "s-gone", &[(DEFAULT_HOST_LABEL, "c2")]),
        ];
        let plan = plan_labels(&nodes, &servers, &cfg()).unwrap();
        assert_eq!(plan.removed.len(), 1);
        assert_eq!(plan.patches.len(), 1);
        assert_eq!(plan.patches[0].labels[DEFAULT_HOST_LABEL], None);
        let nodes = vec![node("stranger", "s-x", &[])];
        let e = plan_labels(&nodes, &servers, &cfg())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("node stranger matches no server"), "{e}");
        // unless a selector leaves it out
        let sel = LabelSelector::labels(BTreeMap::from([("role".into(), "worker".into())]));
        let plan = plan_labels(&nodes, &servers, &cfg().with_nodes(sel)).unwrap();
        assert!(plan.nodes.is_empty() && plan.patches.is_empty());
    }

    #[test]
    fn zone_key_warns_and_bad_keys_are_refused() {
        let servers = vec![server("s1", Some("c1"), "h1", "10.0.0.1")];
        let plan = plan_labels(
            &[node("w1", "s1", &[])],
            &servers,
            &LabelConfig::new(ZONE_LABEL).unwrap(),
        )
        .unwrap();
        assert!(plan.warnings[0].contains("cloud controller manager"));
        assert!(LabelConfig::new("CIS-node").is_ok());
        assert!(LabelConfig::new("Bad.Prefix/x").is_err());
        assert!(LabelConfig::new("a b").is_err());
        assert!(LabelConfig::new("").is_err());
    }
}
