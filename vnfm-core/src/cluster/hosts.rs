//! Which server a node runs on, and which physical host that is.
//!
//! A node is matched to a server of the cluster VNF by, in order: `spec.providerID`
//! (`openstack:///<server id>` or `openstack://<region>/<server id>`, as
//! cloud-provider-openstack writes it), `status.nodeInfo.systemUUID` (Nova gives the guest the
//! server id as its SMBIOS UUID; compared case-insensitively), then an `InternalIP` of the node
//! that is an address of exactly one server. The first rule that applies decides: a node whose
//! providerID names a server that is not a candidate matches nothing (its server is gone or
//! belongs to another VNF), however its addresses look. Two servers sharing the node's IP, or
//! two nodes claiming one server, is an error naming them all: never a guess.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::driver::{ClusterNode, ServerInfo};
use crate::id::{NodeName, ServerId};

/// How a node was matched to its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MatchedBy {
    /// `spec.providerID`.
    ProviderId,
    /// `status.nodeInfo.systemUUID`.
    SystemUuid,
    /// An `InternalIP` address.
    InternalIp,
}

impl fmt::Display for MatchedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MatchedBy::ProviderId => "providerID",
            MatchedBy::SystemUuid => "systemUUID",
            MatchedBy::InternalIp => "InternalIP",
        })
    }
}

/// Why nodes and servers could not be matched.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatchError {
    /// A node matches no server of the VNF and carries no label of ours to clean up.
    #[error(
        "node {node} matches no server of the cluster VNF by providerID ({provider_id}), \
         systemUUID ({system_uuid}) or InternalIP ({ips}); candidates: {candidates}"
    )]
    NoMatch {
        /// The node.
        node: NodeName,
        /// Its providerID, or `-`.
        provider_id: String,
        /// Its systemUUID, or `-`.
        system_uuid: String,
        /// Its InternalIPs, comma-separated, or `-`.
        ips: String,
        /// The candidate servers (`name id [ips]`), comma-separated.
        candidates: String,
    },
    /// The node's InternalIP belongs to several servers.
    #[error("node {node} InternalIP {ip} is an address of {} servers: {}; refusing to guess", servers.len(), join(servers))]
    AmbiguousIp {
        /// The node.
        node: NodeName,
        /// The shared address.
        ip: String,
        /// The servers having it.
        servers: Vec<ServerId>,
    },
    /// Several nodes match one server.
    #[error("server {server} is matched by {} nodes: {}; refusing to guess", nodes.len(), join(nodes))]
    SharedServer {
        /// The server.
        server: ServerId,
        /// The nodes matching it, with how.
        nodes: Vec<String>,
    },
}

fn join<T: fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The server id of a providerID: the last path segment after the scheme
/// (`openstack:///<id>`, `openstack://<region>/<id>`), or `None` when it has no such shape.
pub fn provider_server_id(provider_id: &str) -> Option<&str> {
    let (_, rest) = provider_id.split_once("://")?;
    rest.rsplit('/').next().filter(|id| !id.is_empty())
}

/// Servers indexed by id (lowercase) and by address, for [`match_node`].
#[derive(Debug)]
pub struct ServerIndex<'a> {
    by_id: HashMap<String, &'a ServerInfo>,
    by_ip: HashMap<&'a str, Vec<&'a ServerInfo>>,
}

impl<'a> ServerIndex<'a> {
    /// Indexes `servers`.
    pub fn new(servers: &'a [ServerInfo]) -> Self {
        let mut by_id = HashMap::with_capacity(servers.len());
        let mut by_ip: HashMap<&str, Vec<&ServerInfo>> = HashMap::with_capacity(servers.len());
        for s in servers {
            by_id.insert(s.id.as_str().to_ascii_lowercase(), s);
            for a in &s.addresses {
                by_ip.entry(a.as_str()).or_default().push(s);
            }
        }
        Self { by_id, by_ip }
    }

    /// The server of id `id` (case-insensitive).
    pub fn get(&self, id: &str) -> Option<&'a ServerInfo> {
        self.by_id.get(&id.to_ascii_lowercase()).copied()
    }
}

/// Matches one node to one of the indexed servers (see the [module docs](self)); `Ok(None)`
/// when no rule applies.
///
/// # Errors
/// [`MatchError::AmbiguousIp`] when the deciding InternalIP belongs to several servers.
pub fn match_node<'a>(
    node: &ClusterNode,
    servers: &ServerIndex<'a>,
) -> Result<Option<(&'a ServerInfo, MatchedBy)>, MatchError> {
    if let Some(pid) = node.provider_id.as_deref().filter(|p| !p.is_empty()) {
        return Ok(provider_server_id(pid)
            .and_then(|id| servers.get(id))
            .map(|s| (s, MatchedBy::ProviderId)));
    }
    if let Some(s) = node
        .system_uuid
        .as_deref()
        .filter(|u| !u.is_empty())
        .and_then(|u| servers.get(u))
    {
        return Ok(Some((s, MatchedBy::SystemUuid)));
    }
    for ip in node.addresses_of("InternalIP") {
        match servers.by_ip.get(ip).map(Vec::as_slice).unwrap_or_default() {
            [] => continue,
            [one] => return Ok(Some((one, MatchedBy::InternalIp))),
            many => {
                let mut ids: Vec<ServerId> = many.iter().map(|s| s.id.clone()).collect();
                ids.sort();
                return Err(MatchError::AmbiguousIp {
                    node: node.name.clone(),
                    ip: ip.to_owned(),
                    servers: ids,
                });
            }
        }
    }
    Ok(None)
}

/// A node matched to its server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeServer {
    /// The node.
    pub node: NodeName,
    /// Its server.
    pub server: ServerId,
    /// The server's name.
    pub server_name: String,
    /// How they were matched.
    pub matched_by: MatchedBy,
}

/// Every node matched to its server, and the nodes matching none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Matching {
    /// Matched nodes, by node name.
    pub matched: BTreeMap<NodeName, NodeServer>,
    /// Nodes matching no server.
    pub unmatched: Vec<NodeName>,
}

/// Matches every node (see the [module docs](self)).
///
/// # Errors
/// The first [`MatchError::AmbiguousIp`], or [`MatchError::SharedServer`] when two nodes
/// match one server.
pub fn match_nodes(nodes: &[ClusterNode], servers: &[ServerInfo]) -> Result<Matching, MatchError> {
    let index = ServerIndex::new(servers);
    let mut out = Matching::default();
    let mut by_server: BTreeMap<ServerId, Vec<String>> = BTreeMap::new();
    for n in nodes {
        match match_node(n, &index)? {
            Some((s, by)) => {
                by_server
                    .entry(s.id.clone())
                    .or_default()
                    .push(format!("{} (by {by})", n.name));
                out.matched.insert(
                    n.name.clone(),
                    NodeServer {
                        node: n.name.clone(),
                        server: s.id.clone(),
                        server_name: s.name.clone(),
                        matched_by: by,
                    },
                );
            }
            None => out.unmatched.push(n.name.clone()),
        }
    }
    if let Some((server, nodes)) = by_server.into_iter().find(|(_, n)| n.len() > 1) {
        return Err(MatchError::SharedServer { server, nodes });
    }
    Ok(out)
}

/// The error for a node that matches nothing, listing every candidate.
pub fn no_match(node: &ClusterNode, servers: &[ServerInfo]) -> MatchError {
    let or_dash = |s: Option<&str>| s.filter(|s| !s.is_empty()).unwrap_or("-").to_owned();
    let ips: Vec<&str> = node.addresses_of("InternalIP").collect();
    MatchError::NoMatch {
        node: node.name.clone(),
        provider_id: or_dash(node.provider_id.as_deref()),
        system_uuid: or_dash(node.system_uuid.as_deref()),
        ips: if ips.is_empty() {
            "-".to_owned()
        } else {
            ips.join(",")
        },
        candidates: if servers.is_empty() {
            "none".to_owned()
        } else {
            servers
                .iter()
                .map(|s| format!("{} {} [{}]", s.name, s.id, s.addresses.join(",")))
                .collect::<Vec<_>>()
                .join(", ")
        },
    }
}

/// Where the label value of a node comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HostSource {
    /// `OS-EXT-SRV-ATTR:host`: the compute host's name (admin credentials).
    Host,
    /// Nova's `hostId`: a per-project hash of the host, visible to every user.
    HostId,
}

impl fmt::Display for HostSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostSource::Host => "OS-EXT-SRV-ATTR:host",
            HostSource::HostId => "hostId",
        })
    }
}

/// The source every server can give: the host name when all of them show it, else
/// `hostId` (mixing both would make one host look like two).
pub fn host_source(servers: &[&ServerInfo]) -> HostSource {
    if servers.iter().all(|s| s.host.is_some()) {
        HostSource::Host
    } else {
        HostSource::HostId
    }
}

/// The host value of `server` from `source`, if the server is on a host.
pub fn host_value(server: &ServerInfo, source: HostSource) -> Option<String> {
    match source {
        HostSource::Host => server.host.as_ref().map(|h| h.as_str().to_owned()),
        HostSource::HostId => server.host_id.clone().filter(|h| !h.is_empty()),
    }
}

/// A label value for `value`: Kubernetes label values are at most 63 characters of
/// `[A-Za-z0-9._-]`, starting and ending alphanumeric. Nova's `hostId` is 56 hex digits, host
/// names usually fit; anything else is mapped character by character (others become `-`),
/// trimmed, and cut to 63 characters.
pub fn label_value(value: &str) -> String {
    let mapped: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    mapped
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::NodeAddress;

    fn server(id: &str, name: &str, ip: &str) -> ServerInfo {
        ServerInfo {
            id: ServerId::new(id),
            name: name.into(),
            status: "ACTIVE".into(),
            host: Some("compute-1".into()),
            host_id: Some("ab12".into()),
            addresses: vec![ip.to_owned()],
            zone: None,
            flavor: None,
            server_groups: vec![],
            fault: None,
        }
    }

    fn node(name: &str) -> ClusterNode {
        ClusterNode::new(name, BTreeMap::new())
    }

    fn servers() -> Vec<ServerInfo> {
        vec![
            server("11111111-aaaa", "worker-a", "10.0.0.11"),
            server("22222222-bbbb", "worker-b", "10.0.0.12"),
        ]
    }

    #[test]
    fn provider_id_decides_first() {
        let s = servers();
        let mut n = node("n1");
        n.provider_id = Some("openstack:///22222222-bbbb".into());
        // an IP of the other server does not matter
        n.addresses = vec![NodeAddress::new("InternalIP", "10.0.0.11")];
        let (m, by) = match_node(&n, &ServerIndex::new(&s)).unwrap().unwrap();
        assert_eq!((m.name.as_str(), by), ("worker-b", MatchedBy::ProviderId));
        n.provider_id = Some("openstack://RegionOne/22222222-bbbb".into());
        assert_eq!(
            match_node(&n, &ServerIndex::new(&s))
                .unwrap()
                .unwrap()
                .0
                .name,
            "worker-b"
        );
        // a providerID naming a server that is gone matches nothing, whatever the IP says
        n.provider_id = Some("openstack:///99999999-gone".into());
        assert_eq!(match_node(&n, &ServerIndex::new(&s)).unwrap(), None);
    }

    #[test]
    fn system_uuid_then_ip() {
        let s = servers();
        let mut n = node("n1");
        n.system_uuid = Some("11111111-AAAA".into());
        n.addresses = vec![NodeAddress::new("InternalIP", "10.0.0.12")];
        let (m, by) = match_node(&n, &ServerIndex::new(&s)).unwrap().unwrap();
        assert_eq!((m.name.as_str(), by), ("worker-a", MatchedBy::SystemUuid));
        n.system_uuid = Some("not-a-server".into());
        let (m, by) = match_node(&n, &ServerIndex::new(&s)).unwrap().unwrap();
        assert_eq!((m.name.as_str(), by), ("worker-b", MatchedBy::InternalIp));
        // an ExternalIP is not an InternalIP
        n.addresses = vec![NodeAddress::new("ExternalIP", "10.0.0.12")];
        assert_eq!(match_node(&n, &ServerIndex::new(&s)).unwrap(), None);
    }

    #[test]
    fn no_match_and_two_matches_name_the_node_and_the_candidates() {
        let mut s = servers();
        let mut n = node("worker-x");
        n.addresses = vec![NodeAddress::new("InternalIP", "10.9.9.9")];
        let e = no_match(&n, &s).to_string();
        assert_eq!(
            e,
            "node worker-x matches no server of the cluster VNF by providerID (-), systemUUID (-) \
             or InternalIP (10.9.9.9); candidates: worker-a 11111111-aaaa [10.0.0.11], \
             worker-b 22222222-bbbb [10.0.0.12]"
        );
        s[1].addresses.push("10.0.0.11".into());
        n.addresses = vec![NodeAddress::new("InternalIP", "10.0.0.11")];
        let e = match_node(&n, &ServerIndex::new(&s))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "node worker-x InternalIP 10.0.0.11 is an address of 2 servers: 11111111-aaaa, \
             22222222-bbbb; refusing to guess"
        );
        // two nodes claiming one server
        let mut a = node("n-a");
        a.system_uuid = Some("11111111-aaaa".into());
        let mut b = node("n-b");
        b.provider_id = Some("openstack:///11111111-aaaa".into());
        let e = match_nodes(&[a, b], &servers()).unwrap_err().to_string();
        assert_eq!(
            e,
            "server 11111111-aaaa is matched by 2 nodes: n-a (by systemUUID), n-b (by \
             providerID); refusing to guess"
        );
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(
            label_value("compute-1.example.org"),
            "compute-1.example.org"
        );
        assert_eq!(label_value("node 1/a"), "node-1-a");
        assert_eq!(label_value(&"a".repeat(80)).len(), 63);
        assert_eq!(label_value("-x-"), "x");
    }
}
