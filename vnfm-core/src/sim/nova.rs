//! The Nova part of the simulator: server builds as Nova takes them (the API's checks,
//! placement, filters, weighers: see the parent module), server show, start and stop, and the
//! servers a cloud file's `cluster.join` makes cluster nodes.

use std::collections::BTreeMap;

use serde_json::Value;

use super::cluster::NodeRec;
use super::failure::{not_found, BuildFault, Failure};
use super::state::{ServerRec, State};
use crate::driver::{DriverError, ServerFault};
use crate::id::{HostId, ServerId, ZoneId};
use crate::zone::Resources;

/// What a server build asks for.
#[derive(Clone, Debug)]
pub(crate) struct Boot {
    pub(super) name: String,
    pub(super) flavor: String,
    pub(super) zone: Option<String>,
    pub(super) group: Option<String>,
}

/// Nova's `hostId` of `host` for `project`: an opaque hash of both (Nova takes SHA-224 of the
/// project id and the host name; the simulator a 56-hex-digit FNV-1a stretch of the same).
pub(super) fn host_id_of(project: &str, host: &str) -> String {
    let mut out = String::with_capacity(56);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for round in 0u8..4 {
        for b in project.bytes().chain(host.bytes()).chain([round]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out.truncate(56);
    out
}

impl State {
    /// Registers every `ACTIVE` server the cloud file's `cluster.join` names as a node, once.
    pub(super) fn join_nodes(&mut self) {
        let Some(join) = self.cloud.cluster.as_ref().and_then(|c| c.join.clone()) else {
            return;
        };
        let Ok(re) = regex::Regex::new(&join.servers) else {
            return; // validated when the cloud file was loaded
        };
        for s in self.servers.values() {
            if s.status != "ACTIVE" || !re.is_match(&s.name) {
                continue;
            }
            if self
                .cluster
                .nodes
                .values()
                .any(|n| n.system_uuid.as_deref() == Some(s.id.as_str()))
            {
                continue;
            }
            // a node is named after its server's hostname; servers sharing a name (Heat gives
            // every member of a resource group the same one) get the id's first 8 digits
            let mut node = crate::id::NodeName::new(s.name.as_str());
            let shared = self.servers.values().filter(|o| o.name == s.name).count() > 1;
            if shared || self.cluster.nodes.contains_key(&node) {
                let short: String =
                    s.id.as_str()
                        .chars()
                        .filter(|c| *c != '-')
                        .take(8)
                        .collect();
                node = crate::id::NodeName::new(format!("{}-{short}", s.name));
            }
            let mut addresses = Vec::new();
            if let Some(ip) = &s.ip {
                addresses.push(crate::driver::NodeAddress::new("InternalIP", ip.as_str()));
            }
            addresses.push(crate::driver::NodeAddress::new("Hostname", node.as_str()));
            let rec = NodeRec {
                labels: BTreeMap::from([(
                    "kubernetes.io/hostname".to_owned(),
                    node.as_str().to_owned(),
                )]),
                provider_id: join.provider_id.then(|| format!("openstack:///{}", s.id)),
                system_uuid: Some(s.id.as_str().to_owned()),
                addresses,
            };
            self.cluster.nodes.insert(node, rec);
        }
    }

    /// What the `ACTIVE` servers on `host` use.
    pub(super) fn used(&self, host: &HostId) -> Resources {
        self.servers
            .values()
            .filter(|s| s.host.as_ref() == Some(host) && s.status == "ACTIVE")
            .fold(Resources::default(), |acc, s| acc.saturating_add(&s.need))
    }

    /// `host`'s capacity minus what its `ACTIVE` servers use.
    pub(super) fn free(&self, host: &HostId) -> Resources {
        self.hosts
            .get(host)
            .map(|h| h.capacity.saturating_sub(&self.used(host)))
            .unwrap_or_default()
    }

    /// Boots a server the way Nova does. Returns the server id when Nova accepted the request
    /// (even if the build then failed) and the failure Heat sees, if any.
    pub(super) fn boot(
        &mut self,
        res_name: &str,
        req: Boot,
    ) -> (Option<ServerId>, Option<Failure>) {
        let path = vec!["resources".to_owned(), res_name.to_owned()];
        let Some(need) = self.cloud.flavor(&req.flavor) else {
            let rid = self.request_id();
            return (
                None,
                Some(Failure::new(
                    Some("NotFound"),
                    path,
                    format!(
                        "Flavor {} could not be found. (HTTP 404) (Request-ID: {rid})",
                        req.flavor
                    ),
                )),
            );
        };
        let zone = req.zone.filter(|z| !z.is_empty()).map(ZoneId::new);
        if let Some(z) = &zone {
            let ok = self
                .zones
                .get(z)
                .is_some_and(|zr| zr.available && !zr.hosts_null);
            if !ok {
                let rid = self.request_id();
                return (
                    None,
                    Some(Failure::new(
                        Some("BadRequest"),
                        path,
                        format!(
                            "The requested availability zone is not available (HTTP 400) (Request-ID: {rid})"
                        ),
                    )),
                );
            }
        }
        if let Some(g) = &req.group {
            if !self.groups.contains_key(g) {
                let rid = self.request_id();
                return (
                    None,
                    Some(Failure::new(
                        Some("BadRequest"),
                        path,
                        format!(
                            "Invalid input for field/attribute group. Value: {g}. Instance group {g} could not be found. (HTTP 400) (Request-ID: {rid})"
                        ),
                    )),
                );
            }
        }
        if let Some(BuildFault::Rejected { message }) = self.build_faults.front().cloned() {
            self.build_faults.pop_front();
            let rid = self.request_id();
            return (
                None,
                Some(Failure::new(
                    Some("BadRequest"),
                    path,
                    format!("{message} (HTTP 400) (Request-ID: {rid})"),
                )),
            );
        }
        let id = ServerId::new(self.uuid());
        self.servers_made = self.servers_made.saturating_add(1);
        let n = self.servers_made;
        let mut server = ServerRec {
            id: id.clone(),
            name: req.name,
            flavor: req.flavor,
            need,
            zone: zone.clone(),
            host: None,
            status: "ERROR".to_owned(),
            fault: None,
            group: req.group.clone(),
            ip: Some(format!(
                "10.{}.{}.{}",
                (n >> 16) & 0xff,
                (n >> 8) & 0xff,
                n & 0xff
            )),
            stopped: false,
        };
        if let Some(g) = req.group.as_ref().and_then(|g| self.groups.get_mut(g)) {
            g.members.push(id.clone());
        }
        let outcome = match self.build_faults.pop_front() {
            Some(BuildFault::RetriesExhausted) => Err(ServerFault {
                code: 500,
                message: format!(
                    "Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures for instance {id}."
                ),
            }),
            Some(BuildFault::Fault { code, message }) => Err(ServerFault { code, message }),
            Some(BuildFault::Rejected { .. }) | None => self.schedule(need, zone.as_ref(), req.group.as_deref()),
        };
        let failure = match outcome {
            Ok(host) => {
                server.zone = self.hosts.get(&host).map(|h| h.zone.clone());
                server.host = Some(host);
                server.status = "ACTIVE".to_owned();
                None
            }
            Err(fault) => {
                let f = Failure::new(
                    Some("ResourceInError"),
                    path,
                    format!(
                        "Went to status ERROR due to \"Message: {}, Code: {}\"",
                        fault.message, fault.code
                    ),
                );
                server.fault = Some(fault);
                Some(f)
            }
        };
        self.servers.insert(id.clone(), server);
        (Some(id), failure)
    }

    /// Nova's scheduler: placement, filters, weighers (see the module docs).
    pub(super) fn schedule(
        &self,
        need: Resources,
        zone: Option<&ZoneId>,
        group: Option<&str>,
    ) -> Result<HostId, ServerFault> {
        let candidates: Vec<&HostId> = self
            .hosts
            .iter()
            .filter(|(_, h)| zone.is_none_or(|z| &h.zone == z))
            .filter(|(name, _)| self.free(name).fits(&need))
            .map(|(name, _)| name)
            .collect();
        if candidates.is_empty() {
            return Err(ServerFault {
                code: 500,
                message: "No valid host was found. ".to_owned(),
            });
        }
        let group = group.and_then(|g| self.groups.get(g));
        let member_hosts: Vec<&HostId> = group
            .map(|g| {
                g.members
                    .iter()
                    .filter_map(|m| self.servers.get(m))
                    .filter(|s| s.status == "ACTIVE")
                    .filter_map(|s| s.host.as_ref())
                    .collect()
            })
            .unwrap_or_default();
        let policy = group.map(|g| g.policy.as_str()).unwrap_or_default();
        let mut passed: Vec<&HostId> = candidates
            .into_iter()
            .filter(|h| {
                self.hosts.get(*h).is_some_and(|r| {
                    r.available && self.zones.get(&r.zone).is_some_and(|z| z.available)
                })
            })
            .filter(|h| match policy {
                "affinity" => member_hosts.is_empty() || member_hosts.contains(h),
                "anti-affinity" => !member_hosts.contains(h),
                _ => true,
            })
            .collect();
        let count = |h: &HostId| member_hosts.iter().filter(|m| **m == h).count();
        passed.sort_by(|a, b| {
            let soft = match policy {
                "soft-affinity" => count(b).cmp(&count(a)),
                "soft-anti-affinity" => count(a).cmp(&count(b)),
                _ => std::cmp::Ordering::Equal,
            };
            soft.then(self.free(b).memory_mb.cmp(&self.free(a).memory_mb))
                .then(a.cmp(b))
        });
        passed.first().map(|h| (*h).clone()).ok_or(ServerFault {
            code: 500,
            message: "No valid host was found. There are not enough hosts available.".to_owned(),
        })
    }

    /// Deletes a server, and its membership of its server group.
    pub(super) fn delete_server(&mut self, id: &ServerId) {
        if let Some(s) = self.servers.remove(id) {
            if let Some(g) = s.group.and_then(|g| self.groups.get_mut(&g)) {
                g.members.retain(|m| m != id);
            }
        }
    }

    /// Nova's admin server show, as a JSON object (Heat's `show` attribute).
    pub(super) fn server_show(&self, id: &ServerId) -> Value {
        let Some(s) = self.servers.get(id) else {
            return Value::Null;
        };
        let mut m = serde_json::Map::new();
        m.insert("id".into(), Value::from(s.id.as_str()));
        m.insert("name".into(), Value::from(s.name.as_str()));
        m.insert("status".into(), Value::from(s.status.as_str()));
        m.insert(
            "flavor".into(),
            serde_json::json!({
                "vcpus": s.need.vcpus, "ram": s.need.memory_mb, "disk": s.need.disk_gb,
                "original_name": s.flavor
            }),
        );
        m.insert(
            "OS-EXT-SRV-ATTR:host".into(),
            s.host
                .as_ref()
                .map_or(Value::Null, |h| Value::from(h.as_str())),
        );
        m.insert(
            "OS-EXT-SRV-ATTR:hypervisor_hostname".into(),
            s.host
                .as_ref()
                .map_or(Value::Null, |h| Value::from(h.as_str())),
        );
        m.insert(
            "OS-EXT-AZ:availability_zone".into(),
            s.zone
                .as_ref()
                .map_or(Value::Null, |z| Value::from(z.as_str())),
        );
        m.insert(
            "server_groups".into(),
            Value::Array(s.group.iter().map(|g| Value::from(g.as_str())).collect()),
        );
        if let Some(f) = &s.fault {
            m.insert(
                "fault".into(),
                serde_json::json!({"code": f.code, "message": f.message}),
            );
        }
        Value::Object(m)
    }

    /// Nova's `os-start` (`on`) / `os-stop`: the power state changes at once; a server that
    /// is not `ACTIVE` (built), or already in that state, is refused with Nova's 409 text.
    pub(super) fn set_power(&mut self, id: &ServerId, on: bool) -> Result<(), DriverError> {
        self.tick();
        let s = self
            .servers
            .get_mut(id)
            .ok_or_else(|| not_found("server", id.as_str()))?;
        let action = if on { "start" } else { "stop" };
        let state = match (on, s.stopped) {
            _ if s.status != "ACTIVE" => "error",
            (true, false) => "active",
            (false, true) => "stopped",
            _ => {
                s.stopped = !on;
                return Ok(());
            }
        };
        Err(DriverError::Conflict {
            driver: "nova",
            message: format!(
                "Cannot '{action}' instance {id} while it is in vm_state {state} (HTTP 409)"
            ),
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cloud::CloudFile;
    use crate::sim::state::GroupRec;

    pub(in crate::sim) fn cloud(text: &str) -> CloudFile {
        CloudFile::from_yaml("test", text).unwrap()
    }

    pub(in crate::sim) const TWO_ZONES: &str = "
zones:
  AZ-1:
    hosts:
      c1: {vcpus: 4, memory_mb: 4096, disk_gb: 40}
      c2: {vcpus: 4, memory_mb: 8192, disk_gb: 40}
  AZ-2:
    available: false
    hosts: null
flavors:
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
  huge: {vcpus: 64, memory_mb: 512, disk_gb: 1}
";

    pub(in crate::sim) fn boot(
        st: &mut State,
        name: &str,
        flavor: &str,
        zone: Option<&str>,
        group: Option<&str>,
    ) -> (Option<ServerId>, Option<Failure>) {
        st.boot(
            name,
            Boot {
                name: name.into(),
                flavor: flavor.into(),
                zone: zone.map(Into::into),
                group: group.map(Into::into),
            },
        )
    }

    #[test]
    fn scheduler_prefers_most_free_ram_and_accounts_capacity() {
        let mut st = State::new(cloud(TWO_ZONES), 1);
        let (id, f) = boot(&mut st, "a", "m1.small", Some("AZ-1"), None);
        assert!(f.is_none());
        assert_eq!(
            st.servers[&id.unwrap()].host.as_ref().unwrap().as_str(),
            "c2"
        );
        // c2 now has 6144 free, c1 4096: c2 again, then equal (4096): name order -> c1
        boot(&mut st, "b", "m1.small", None, None);
        assert_eq!(st.free(&"c2".into()), Resources::new(2, 4096, 0));
        let (id, _) = boot(&mut st, "c", "m1.small", None, None);
        assert_eq!(
            st.servers[&id.unwrap()].host.as_ref().unwrap().as_str(),
            "c1"
        );
        // c2's disk is full now: one more fits on c1 only, then nothing fits anywhere
        boot(&mut st, "d", "m1.small", None, None);
        let (id, f) = boot(&mut st, "e", "m1.small", Some("AZ-1"), None);
        let s = &st.servers[&id.unwrap()];
        assert_eq!(s.status, "ERROR");
        assert_eq!(
            s.fault.as_ref().unwrap().message,
            "No valid host was found. "
        );
        assert_eq!(
            f.unwrap().to_string(),
            "ResourceInError: resources.e: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\""
        );
    }

    #[test]
    fn flavor_bigger_than_any_host_is_a_placement_failure() {
        let mut st = State::new(cloud(TWO_ZONES), 1);
        let (_, f) = boot(&mut st, "x", "huge", None, None);
        assert!(f
            .unwrap()
            .message
            .contains("\"Message: No valid host was found. , Code: 500\""));
    }

    #[test]
    fn unknown_or_unavailable_zone_is_rejected_by_the_api() {
        let mut st = State::new(cloud(TWO_ZONES), 1);
        for z in ["AZ-2", "AZ-9"] {
            let (id, f) = boot(&mut st, "x", "m1.small", Some(z), None);
            assert!(id.is_none());
            let f = f.unwrap().to_string();
            assert!(
                f.starts_with("BadRequest: resources.x: The requested availability zone is not available (HTTP 400) (Request-ID: req-"),
                "{f}"
            );
        }
    }

    fn group(st: &mut State, policy: &str) -> String {
        let id = st.uuid();
        st.groups.insert(
            id.clone(),
            GroupRec {
                policy: policy.into(),
                members: vec![],
            },
        );
        id
    }

    #[test]
    fn server_group_policies() {
        let mut st = State::new(cloud(TWO_ZONES), 1);
        let aa = group(&mut st, "anti-affinity");
        let hosts: Vec<_> = (0..3)
            .map(|i| {
                let (id, f) = boot(&mut st, &format!("s{i}"), "m1.small", None, Some(&aa));
                (id.and_then(|id| st.servers[&id].host.clone()), f)
            })
            .collect();
        assert_eq!(hosts[0].0.as_ref().unwrap().as_str(), "c2");
        assert_eq!(hosts[1].0.as_ref().unwrap().as_str(), "c1");
        assert!(hosts[2].0.is_none());
        assert!(hosts[2]
            .1
            .as_ref()
            .unwrap()
            .message
            .contains("There are not enough hosts available."));

        let mut st = State::new(cloud(TWO_ZONES), 1);
        let aff = group(&mut st, "affinity");
        let (a, _) = boot(&mut st, "a", "m1.small", None, Some(&aff));
        let (b, _) = boot(&mut st, "b", "m1.small", None, Some(&aff));
        assert_eq!(st.servers[&a.unwrap()].host, st.servers[&b.unwrap()].host);

        let mut st = State::new(cloud(TWO_ZONES), 1);
        let soft = group(&mut st, "soft-anti-affinity");
        let (a, _) = boot(&mut st, "a", "m1.small", None, Some(&soft));
        let (b, _) = boot(&mut st, "b", "m1.small", None, Some(&soft));
        assert_ne!(st.servers[&a.unwrap()].host, st.servers[&b.unwrap()].host);
        let (c, f) = boot(&mut st, "c", "m1.small", None, Some(&soft));
        assert!(f.is_none(), "soft policies never fail a build");
        assert!(st.servers[&c.unwrap()].host.is_some());
        let mut st = State::new(cloud(TWO_ZONES), 1);
        let softa = group(&mut st, "soft-affinity");
        let (a, _) = boot(&mut st, "a", "m1.small", None, Some(&softa));
        let (b, _) = boot(&mut st, "b", "m1.small", None, Some(&softa));
        assert_eq!(st.servers[&a.unwrap()].host, st.servers[&b.unwrap()].host);
    }

    #[test]
    fn down_host_is_filtered_not_placed() {
        let mut st = State::new(cloud(TWO_ZONES), 1);
        for h in ["c1", "c2"] {
            st.hosts.get_mut(h).unwrap().available = false;
        }
        let (_, f) = boot(&mut st, "x", "m1.small", None, None);
        assert!(f
            .unwrap()
            .message
            .contains("There are not enough hosts available."));
    }
}
