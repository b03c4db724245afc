//! The simulated cloud: [`SimCloud`], an in-memory cloud that implements every driver trait
//! ([`StackDriver`], [`ZoneCatalog`], [`ComputeInventory`], [`ClusterDriver`]) the way Heat 27,
//! Nova 34 and Kubernetes behave, including their failure texts, and [`FaultySim`], a wrapper
//! that injects faults.
//!
//! # Model
//! - Zones, hosts, flavors and images come from a [`CloudFile`]. A host's free capacity is its
//!   capacity minus the flavors of the `ACTIVE` servers on it.
//! - Stacks are Heat stacks. Creates and updates complete synchronously: when `create_stack`
//!   or `update_stack` returns, `show_stack` reports `*_COMPLETE` or `*_FAILED`. A delete
//!   takes a moment: a `show_stack` right after `delete_stack` reports `DELETE_IN_PROGRESS`,
//!   the next one finds the stack gone ([`DriverError::NotFound`]); any call about something
//!   else (another stack, zones, servers) also comes after that moment. The capacity is
//!   freed when the delete completes. [`FaultySim::fail_next_stack_deletes`] makes deletes
//!   slower (in progress for N shows, whatever else happens) or fail. A cloud file's
//!   `stack_create_shows: N` makes creates slow the same way: a new stack shows
//!   `CREATE_IN_PROGRESS` to its first N `show_stack` calls (not after an update or a delete).
//! - Time: an `OS::Heat::TestResource` with `wait_secs` / `action_wait_secs` shows its create,
//!   update or delete in progress (and its stacks) for that many seconds of the clock given
//!   with [`SimCloud::set_clock`] (normally the lifecycle's; without one time stands still),
//!   then its outcome (`fail: true`: Heat's `ValueError: resources.T: Test Resource failed T`).
//! - Everything is deterministic: ids come from an [`IdGen`] seeded by the seed given to
//!   [`SimCloud::new`], and a virtual clock (a counter) orders events.
//! - Clones share state (`Arc<Mutex<_>>`), so a clone handed to the code under test and one
//!   kept by the test see the same cloud.
//!
//! # Scheduling (Nova 34)
//! A server build goes through the steps Nova takes, and fails with Nova's texts:
//! 1. The API checks the requested availability zone: an unknown zone, or one that is not
//!    available, is rejected with `The requested availability zone is not available` (HTTP
//!    400): the server is not created and Heat reports
//!    `BadRequest: resources.<name>: The requested availability zone is not available (HTTP 400) (Request-ID: req-...)`.
//! 2. Placement: the candidates are the hosts of the requested zone (all zones when none is
//!    given; Nova 34 maps the zone to a placement aggregate) whose free vCPUs, memory and disk
//!    fit the flavor. No candidate at all gives the fault `No valid host was found. ` (empty
//!    reason, trailing space), as in the captured `server-show-error-novalidhost-placement`
//!    and Tacker's full-zone texts.
//! 3. Filters: hosts whose nova-compute is down (`available: false`) or whose zone is not
//!    available, and hosts that the server group policy excludes (`affinity`: not the host of
//!    the group's members; `anti-affinity`: a host with a member) are removed. When candidates
//!    existed but none is left, the fault is
//!    `No valid host was found. There are not enough hosts available.` (captured
//!    `server-show-error-novalidhost-antiaffinity`).
//! 4. Weighers: `soft-affinity` prefers hosts with more members of the group,
//!    `soft-anti-affinity` hosts with fewer; then most free RAM first (Nova's RAMWeigher);
//!    ties by host name.
//!
//! A server that fails is kept in `ERROR` with its `fault` (code 500) and no host; it uses no
//! capacity.
//!
//! # Heat
//! - Templates are validated before anything is created (Heat's HTTP 400 →
//!   [`DriverError::Invalid`]): structure, resource types (`OS::*`, `AWS::*`, or a key of the
//!   bundle's `files`), references, parameters, unknown intrinsic functions, and the flavor and
//!   image of top-level servers (`Property error: resources.VDU1.properties.flavor: Error
//!   validating value 'm1.huge': The Flavor ID (m1.huge) could not be found.`). A bad flavor in
//!   a nested template fails its parent resource at create time with
//!   `StackValidationFailed: resources.VDU1-0: Property error: ...` (the simulator's choice;
//!   no capture of that case exists).
//! - Independent resources are built in reverse template order (the captured run built
//!   `vdus[1]` before `vdus[0]`); a failed stack reports the first failed resource in template
//!   order, with Heat's texts: `Resource CREATE failed: ResourceInError:
//!   resources.vdus.resources[0]: Went to status ERROR due to "Message: ..., Code: 500"`, and
//!   on update `Resource UPDATE failed: resources.vdus: Resource CREATE failed: ...`.
//! - Update merges parameters (PATCH); servers that failed, were marked unhealthy, or whose
//!   flavor, image, zone or server group changed are replaced, the others kept (a replaced
//!   server is kept until its replacement succeeds, as Heat's convergence engine does);
//!   nested stacks are updated in place; a ResourceGroup shrinks by its highest indexes.
//! - An AutoScalingGroup names its members with Heat's 12-character short ids, replaces
//!   them in rolling-update batches (`rolling_updates`, one member per batch by default) and
//!   words its failures as Heat glues them (see the `heat` module).
//! - `list_resources` lists a stack's resources dependents first (as the captures list `vdus`
//!   before `grp`), then nested stacks level by level with `parent_resource` set.

mod cluster;
mod faults;
mod heat;
mod hot;
mod test_resource;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde_json::Value;

use crate::cloud::CloudFile;
use crate::driver::{
    ApplyObject, Clock, ClusterDriver, ClusterEvent, ClusterNode, ComputeInventory, CreateStack,
    DeletePod, DriverError, EvictPod, LabelNode, ListEvents, ListPods, ListResources,
    ListWorkloads, ListZones, MarkUnhealthy, ObjectRef, Pod, ScaleWorkload, ServerFault,
    ServerInfo, Stack, StackDriver, StackResource, StackStatus, UpdateStack, ZoneCatalog,
};
use crate::id::{HostId, IdGen, ServerId, StackId, ZoneId};
use crate::zone::{ComputeHost, ComputeZone, Resources};

pub use faults::{BuildFault, FaultKind, FaultySim, Method, StackDeleteFault};

pub(crate) const DRIVER: &str = "sim";

/// A compute host.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct HostRec {
    zone: ZoneId,
    capacity: Resources,
    available: bool,
}

/// A zone.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ZoneRec {
    available: bool,
    hosts_null: bool,
}

/// A Nova server.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ServerRec {
    id: ServerId,
    name: String,
    flavor: String,
    need: Resources,
    zone: Option<ZoneId>,
    host: Option<HostId>,
    status: String,
    fault: Option<ServerFault>,
    group: Option<String>,
    /// The server's one fixed IP.
    #[serde(default)]
    ip: Option<String>,
    /// Stopped (`os-stop`): shown `SHUTOFF`; it keeps its host and capacity, as in Nova.
    #[serde(default)]
    stopped: bool,
}

/// A Nova server group.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct GroupRec {
    policy: String,
    members: Vec<ServerId>,
}

/// The shared state of a [`SimCloud`].
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct State {
    ids: IdGen,
    clock: u64,
    project_id: String,
    cloud: CloudFile,
    zones: BTreeMap<ZoneId, ZoneRec>,
    hosts: BTreeMap<HostId, HostRec>,
    servers: BTreeMap<ServerId, ServerRec>,
    groups: BTreeMap<String, GroupRec>,
    stacks: BTreeMap<StackId, heat::StackRec>,
    build_faults: VecDeque<BuildFault>,
    #[serde(default)]
    delete_faults: VecDeque<StackDeleteFault>,
    cluster: cluster::ClusterState,
    /// Servers created so far (numbers their IPs).
    #[serde(default)]
    servers_made: u32,
    /// False when the credentials are not an admin's: `OS-EXT-SRV-ATTR:host` is hidden.
    #[serde(default = "yes")]
    admin_view: bool,
    /// Where the simulator's time comes from ([`SimCloud::set_clock`]); not saved.
    #[serde(skip)]
    time: Option<Arc<dyn Clock>>,
}

fn yes() -> bool {
    true
}

/// Nova's `hostId` of `host` for `project`: an opaque hash of both (Nova takes SHA-224 of the
/// project id and the host name; the simulator a 56-hex-digit FNV-1a stretch of the same).
pub(crate) fn host_id_of(project: &str, host: &str) -> String {
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

/// The outcome of a server build that Heat turns into a resource failure.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Failure {
    /// The exception type Heat prefixes (`ResourceInError`, `BadRequest`, ...), if any.
    kind: Option<String>,
    /// Path components such as `["resources", "vdus", "resources", "0"]`.
    path: Vec<String>,
    /// The message.
    message: String,
}

impl Failure {
    fn new(kind: Option<&str>, path: Vec<String>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.map(str::to_owned),
            path,
            message: message.into(),
        }
    }
}

/// Heat's `short_id.get_id`: the 60-bit `time` field of a uuid (`time_low`, `time_mid` and the
/// 12 low bits of `time_hi_and_version`), as 12 base32 characters, lowercased.
pub(crate) fn short_id_of(uuid: &str) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let hex: String = uuid.chars().filter(char::is_ascii_hexdigit).collect();
    let part = |r: std::ops::Range<usize>| {
        hex.get(r)
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .unwrap_or(0)
    };
    let time = ((part(12..16) & 0x0fff) << 48) | (part(8..12) << 32) | part(0..8);
    (0..12)
        .map(|i| char::from(ALPHABET[((time >> (55 - 5 * i)) & 31) as usize]))
        .collect()
}

/// Heat's `ResourceFailure` built from the status reason of a resource's nested stack
/// (`heat/common/exception.py`): when the reason holds `Resource <ACTION> failed: ` for the
/// resource's own action, it is split on `:` and re-joined as `<error>: <path>: <message>`
/// with `resources.<name>` in front of the path, otherwise the reason is kept whole behind
/// `resources.<name>: `. This is what glues an autoscaling group's update failure into
/// `resources.3anlrib6cpvf: resources.VDU1_scale_group.Resource CREATE failed: ...`.
pub(crate) fn resource_failure(
    reason: &str,
    resource: &str,
    action: crate::driver::StackAction,
) -> Failure {
    let mut path = vec!["resources".to_owned(), resource.to_owned()];
    let marker = format!("Resource {} failed: ", action.as_str());
    if !reason.contains(&marker) {
        return Failure::new(None, path, reason);
    }
    let parsed: Vec<&str> = reason.split(':').map(str::trim).collect();
    if parsed.len() < 4 {
        return Failure::new(None, path, reason);
    }
    path.extend(parsed[2].split('.').map(str::to_owned));
    let error = Some(parsed[1]).filter(|e| !e.is_empty());
    Failure::new(error, path, parsed[3..].join(": "))
}

/// Heat's path format: `resources.vdus.resources[0]` (numeric names as indices).
fn format_path(path: &[String]) -> String {
    let mut out = String::new();
    for (i, p) in path.iter().enumerate() {
        if i == 0 {
            out.push_str(p);
        } else if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{p}]"));
        } else {
            out.push('.');
            out.push_str(p);
        }
    }
    out
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(k) = &self.kind {
            write!(f, "{k}: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", format_path(&self.path))?;
        }
        f.write_str(&self.message)
    }
}

/// What a server build asks for.
#[derive(Clone, Debug)]
pub(crate) struct Boot {
    name: String,
    flavor: String,
    zone: Option<String>,
    group: Option<String>,
}

impl State {
    fn new(cloud: CloudFile, seed: u64) -> State {
        let mut ids = IdGen::seeded(seed);
        let project_id = ids.next_uuid().replace('-', "");
        let mut zones = BTreeMap::new();
        let mut hosts = BTreeMap::new();
        for (z, spec) in &cloud.zones {
            zones.insert(
                ZoneId::new(z.as_str()),
                ZoneRec {
                    available: spec.available,
                    hosts_null: spec.hosts.is_none(),
                },
            );
            for (h, hs) in spec.hosts.iter().flatten() {
                hosts.insert(
                    HostId::new(h.as_str()),
                    HostRec {
                        zone: ZoneId::new(z.as_str()),
                        capacity: hs.capacity(),
                        available: hs.available,
                    },
                );
            }
        }
        let cluster = cluster::ClusterState::new(cloud.cluster.as_ref());
        State {
            ids,
            clock: 0,
            project_id,
            cloud,
            zones,
            hosts,
            servers: BTreeMap::new(),
            groups: BTreeMap::new(),
            stacks: BTreeMap::new(),
            build_faults: VecDeque::new(),
            delete_faults: VecDeque::new(),
            cluster,
            servers_made: 0,
            admin_view: true,
            time: None,
        }
    }

    fn uuid(&mut self) -> String {
        self.ids.next_uuid()
    }

    /// Registers every `ACTIVE` server the cloud file's `cluster.join` names as a node, once.
    fn join_nodes(&mut self) {
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
            let rec = cluster::NodeRec {
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

    /// A 12-character id drawn from the seeded generator the way Heat's
    /// `short_id.generate_id()` makes one: the 60 random bits of a version 4 uuid's `time`
    /// field, base32-encoded and lowercased (alphabet `a-z`, `2-7`, e.g. `3anlrib6cpvf`).
    fn short_id(&mut self) -> String {
        short_id_of(&self.ids.next_uuid())
    }

    /// The simulator's time: the clock of [`SimCloud::set_clock`], else the Unix epoch for
    /// ever (time stands still: what waits on it never ends).
    pub(crate) fn time_now(&self) -> chrono::DateTime<chrono::Utc> {
        self.time
            .as_ref()
            .map_or(chrono::DateTime::UNIX_EPOCH, |c| c.now())
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn used(&self, host: &HostId) -> Resources {
        self.servers
            .values()
            .filter(|s| s.host.as_ref() == Some(host) && s.status == "ACTIVE")
            .fold(Resources::default(), |acc, s| acc.saturating_add(&s.need))
    }

    fn free(&self, host: &HostId) -> Resources {
        self.hosts
            .get(host)
            .map(|h| h.capacity.saturating_sub(&self.used(host)))
            .unwrap_or_default()
    }

    fn request_id(&mut self) -> String {
        format!("req-{}", self.uuid())
    }

    /// Boots a server the way Nova does. Returns the server id when Nova accepted the request
    /// (even if the build then failed) and the failure Heat sees, if any.
    fn boot(&mut self, res_name: &str, req: Boot) -> (Option<ServerId>, Option<Failure>) {
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
    fn schedule(
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

    fn delete_server(&mut self, id: &ServerId) {
        if let Some(s) = self.servers.remove(id) {
            if let Some(g) = s.group.and_then(|g| self.groups.get_mut(&g)) {
                g.members.retain(|m| m != id);
            }
        }
    }

    /// Nova's admin server show, as a JSON object (Heat's `show` attribute).
    fn server_show(&self, id: &ServerId) -> Value {
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
}

/// An in-memory simulated cloud implementing every driver trait. Clones share state.
///
/// ```
/// use vnfm_core::cloud::CloudFile;
/// use vnfm_core::driver::{ListZones, ZoneCatalog};
/// use vnfm_core::sim::SimCloud;
///
/// let cloud = CloudFile::from_yaml(
///     "inline",
///     "zones: {AZ-1: {hosts: {c1: {vcpus: 4, memory_mb: 8192, disk_gb: 80}}}}",
/// )?;
/// let sim = SimCloud::new(cloud, 42);
/// let zones = futures_lite_block_on(sim.list_zones(ListZones::default()))?;
/// assert_eq!(zones[0].name.as_str(), "AZ-1");
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SimCloud {
    state: Arc<Mutex<State>>,
}

impl SimCloud {
    /// A simulated cloud shaped like `cloud`, with every id drawn from `seed`.
    pub fn new(cloud: CloudFile, seed: u64) -> Self {
        Self {
            state: Arc::new(Mutex::new(State::new(cloud, seed))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-updated in a way that
        // matters more than losing the simulator, so a poisoned lock is simply taken over.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state, after completing the quick stack deletes (those without a planned
    /// [`StackDeleteFault`]) of every stack but `polled`: a call about anything else comes
    /// after the moment such a delete takes.
    fn settled(&self, polled: Option<&StackId>) -> MutexGuard<'_, State> {
        let mut st = self.lock();
        st.finish_quick_deletes(polled);
        st
    }

    /// The whole state of the simulated cloud (stacks, servers, capacity, ids, virtual time)
    /// as JSON, so that a later process can continue where this one stopped (the CLI keeps it
    /// in its state file).
    ///
    /// # Errors
    /// [`DriverError::Other`] if the state cannot be encoded (not expected).
    pub fn snapshot(&self) -> Result<String, DriverError> {
        serde_json::to_string(&*self.settled(None)).map_err(|e| DriverError::Other {
            driver: DRIVER,
            message: "cannot encode the simulator state".into(),
            source: Some(Box::new(e)),
        })
    }

    /// A simulated cloud continuing from a [`SimCloud::snapshot`].
    ///
    /// # Errors
    /// [`DriverError::Invalid`] naming what does not decode.
    pub fn restore(snapshot: &str) -> Result<SimCloud, DriverError> {
        let state: State = serde_json::from_str(snapshot).map_err(|e| DriverError::Invalid {
            driver: DRIVER,
            message: format!("the saved simulator state does not decode: {e}"),
        })?;
        Ok(SimCloud {
            state: Arc::new(Mutex::new(state)),
        })
    }

    /// Gives the simulator its time: what takes time in it (an `OS::Heat::TestResource`'s
    /// `wait_secs`) is measured on `clock`, normally the lifecycle's ([`Clock::now`] only; the
    /// simulator never sleeps). Without a clock time stands still. Clones share it; a
    /// [`SimCloud::restore`]d cloud needs it given again.
    pub fn set_clock(&self, clock: Arc<dyn Clock>) {
        self.lock().time = Some(clock);
    }

    /// The cloud file the simulator was built from.
    pub fn cloud(&self) -> CloudFile {
        self.lock().cloud.clone()
    }

    /// The virtual clock: a counter advanced by every state change.
    pub fn now(&self) -> u64 {
        self.lock().clock
    }

    /// Makes a zone available or not (Nova `zoneState.available`). Servers cannot be booted
    /// in an unavailable zone; existing ones keep running.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown zone.
    pub fn set_zone_available(&self, zone: &str, available: bool) -> Result<(), DriverError> {
        let mut st = self.settled(None);
        st.tick();
        let z = st
            .zones
            .get_mut(zone)
            .ok_or_else(|| not_found("zone", zone))?;
        z.available = available;
        Ok(())
    }

    /// Marks a host's nova-compute up or down. The scheduler filters out down hosts.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown host.
    pub fn set_host_available(&self, host: &str, available: bool) -> Result<(), DriverError> {
        let mut st = self.settled(None);
        st.tick();
        let h = st
            .hosts
            .get_mut(host)
            .ok_or_else(|| not_found("host", host))?;
        h.available = available;
        Ok(())
    }

    /// Changes a host's total capacity (e.g. cuts it). Servers already on the host stay; the
    /// free capacity is the new capacity minus their use, saturating at zero.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown host.
    pub fn set_host_capacity(&self, host: &str, capacity: Resources) -> Result<(), DriverError> {
        let mut st = self.settled(None);
        st.tick();
        let h = st
            .hosts
            .get_mut(host)
            .ok_or_else(|| not_found("host", host))?;
        h.capacity = capacity;
        Ok(())
    }

    /// The state with every server that should have joined the cluster joined.
    fn joined(&self) -> MutexGuard<'_, State> {
        let mut st = self.settled(None);
        st.join_nodes();
        st
    }

    /// Shows servers as a user without the admin role sees them (`OS-EXT-SRV-ATTR:host`
    /// hidden, `hostId` shown), or as an admin (the default).
    pub fn set_admin_view(&self, admin: bool) {
        self.lock().admin_view = admin;
    }

    /// Live-migrates a server to `host` as an operator forcing the target would: the host
    /// must be in the server's zone, up, and have room for it; the server group's policy is
    /// not checked (that is how two members of an anti-affinity group end up on one host).
    /// Returns the host the server left.
    ///
    /// # Errors
    /// [`DriverError::NotFound`] for an unknown server or host, [`DriverError::Conflict`] for
    /// a server that is not `ACTIVE`, a host of another zone, down, full, or the server's own.
    pub fn live_migrate(&self, server: &ServerId, host: &str) -> Result<HostId, DriverError> {
        let mut st = self.settled(None);
        let conflict = |message: String| DriverError::Conflict {
            driver: DRIVER,
            message,
        };
        let s = st
            .servers
            .get(server)
            .ok_or_else(|| not_found("server", server.as_str()))?;
        let to = HostId::new(host);
        let h = st.hosts.get(&to).ok_or_else(|| not_found("host", host))?;
        let from = s.host.clone().ok_or_else(|| {
            conflict(format!(
                "server {server} is not on any host (status {})",
                s.status
            ))
        })?;
        if s.status != "ACTIVE" {
            return Err(conflict(format!(
                "Cannot 'os-migrateLive' instance {server} while it is in vm_state {}",
                s.status.to_lowercase()
            )));
        }
        if from == to {
            return Err(conflict(format!("server {server} already runs on {host}")));
        }
        if Some(&h.zone) != s.zone.as_ref() || !h.available {
            return Err(conflict(format!(
                "host {host} cannot take server {server}: {}",
                if h.available {
                    "another availability zone"
                } else {
                    "nova-compute is down"
                }
            )));
        }
        let need = s.need;
        if !st.free(&to).fits(&need) {
            return Err(conflict(format!(
                "host {host} has no room for server {server} ({need:?} needed, {:?} free)",
                st.free(&to)
            )));
        }
        st.tick();
        if let Some(s) = st.servers.get_mut(server) {
            s.host = Some(to);
        }
        Ok(from)
    }

    /// The ids of every server, in id order.
    pub fn server_ids(&self) -> Vec<ServerId> {
        self.settled(None).servers.keys().cloned().collect()
    }

    fn push_build_faults(&self, n: u32, fault: BuildFault) {
        let mut st = self.lock();
        for _ in 0..n {
            st.build_faults.push_back(fault.clone());
        }
    }

    fn push_delete_faults(&self, n: u32, fault: StackDeleteFault) {
        let mut st = self.lock();
        for _ in 0..n {
            st.delete_faults.push_back(fault.clone());
        }
    }
}

pub(crate) fn not_found(kind: &str, what: &str) -> DriverError {
    DriverError::NotFound {
        driver: DRIVER,
        what: format!("{kind} {what}"),
    }
}

#[async_trait]
impl StackDriver for SimCloud {
    async fn create_stack(&self, req: CreateStack) -> Result<StackId, DriverError> {
        self.settled(None).create_stack(req)
    }
    async fn update_stack(&self, req: UpdateStack) -> Result<(), DriverError> {
        self.settled(Some(&req.id)).update_stack(req)
    }
    async fn show_stack(&self, id: &StackId) -> Result<Stack, DriverError> {
        self.settled(Some(id)).show_stack_polled(id)
    }
    async fn delete_stack(&self, id: &StackId) -> Result<(), DriverError> {
        self.settled(Some(id)).delete_stack(id)
    }
    async fn list_resources(&self, req: ListResources) -> Result<Vec<StackResource>, DriverError> {
        self.settled(Some(&req.id))
            .list_resources(&req.id, req.nested_depth)
    }
    async fn mark_unhealthy(&self, req: MarkUnhealthy) -> Result<(), DriverError> {
        self.settled(Some(&req.stack_id)).mark_unhealthy(req)
    }
}

#[async_trait]
impl ZoneCatalog for SimCloud {
    async fn list_zones(&self, _opts: ListZones) -> Result<Vec<ComputeZone>, DriverError> {
        let st = self.settled(None);
        Ok(st
            .zones
            .iter()
            .map(|(name, z)| ComputeZone {
                name: name.clone(),
                available: z.available,
                hosts: (!z.hosts_null).then(|| {
                    st.hosts
                        .iter()
                        .filter(|(_, h)| &h.zone == name)
                        .map(|(hn, h)| ComputeHost {
                            name: hn.clone(),
                            available: h.available,
                            free: Some(st.free(hn)),
                        })
                        .collect()
                }),
            })
            .collect())
    }
}

#[async_trait]
impl ComputeInventory for SimCloud {
    async fn server(&self, id: &ServerId) -> Result<ServerInfo, DriverError> {
        let st = self.settled(None);
        let s = st
            .servers
            .get(id)
            .ok_or_else(|| not_found("server", id.as_str()))?;
        Ok(ServerInfo {
            id: s.id.clone(),
            name: s.name.clone(),
            status: if s.stopped && s.status == "ACTIVE" {
                "SHUTOFF".to_owned()
            } else {
                s.status.clone()
            },
            host: s.host.clone().filter(|_| st.admin_view),
            host_id: s
                .host
                .as_ref()
                .map(|h| host_id_of(&st.project_id, h.as_str())),
            addresses: s.ip.iter().cloned().collect(),
            zone: s.zone.clone(),
            flavor: Some(s.flavor.as_str().into()),
            server_groups: s.group.iter().cloned().collect(),
            fault: s.fault.clone(),
        })
    }

    async fn start_server(&self, id: &ServerId) -> Result<(), DriverError> {
        self.settled(None).set_power(id, true)
    }

    async fn stop_server(&self, id: &ServerId) -> Result<(), DriverError> {
        self.settled(None).set_power(id, false)
    }
}

impl State {
    /// Nova's `os-start` (`on`) / `os-stop`: the power state changes at once; a server that
    /// is not `ACTIVE` (built), or already in that state, is refused with Nova's 409 text.
    fn set_power(&mut self, id: &ServerId, on: bool) -> Result<(), DriverError> {
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

#[async_trait]
impl ClusterDriver for SimCloud {
    async fn list_nodes(&self) -> Result<Vec<ClusterNode>, DriverError> {
        Ok(self.joined().cluster.list_nodes())
    }
    async fn label_node(&self, req: LabelNode) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.label_node(req, ids)
    }
    async fn apply_object(&self, req: ApplyObject) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.apply_object(req, ids)
    }
    async fn delete_object(&self, req: ObjectRef) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.delete_object(&req, ids)
    }
    async fn list_workloads(
        &self,
        req: ListWorkloads,
    ) -> Result<Vec<serde_json::Value>, DriverError> {
        Ok(self.joined().cluster.list_workloads(&req.namespace))
    }
    async fn scale_workload(&self, req: ScaleWorkload) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.scale_workload(req, ids)
    }
    async fn list_pods(&self, req: ListPods) -> Result<Vec<Pod>, DriverError> {
        Ok(self.joined().cluster.list_pods(&req))
    }
    async fn delete_pod(&self, req: DeletePod) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.delete_pod(&req, ids)
    }
    async fn evict_pod(&self, req: EvictPod) -> Result<(), DriverError> {
        let mut st = self.joined();
        st.tick();
        let State { cluster, ids, .. } = &mut *st;
        cluster.evict_pod(&req, ids)
    }
    async fn list_events(&self, req: ListEvents) -> Result<Vec<ClusterEvent>, DriverError> {
        Ok(self.joined().cluster.list_events(&req.namespace))
    }
}

/// Parses a Heat status the simulator produced (always valid).
pub(crate) fn status(action: crate::driver::StackAction, ok: bool) -> StackStatus {
    StackStatus::new(
        action,
        if ok {
            crate::driver::StackState::Complete
        } else {
            crate::driver::StackState::Failed
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn cloud(text: &str) -> CloudFile {
        CloudFile::from_yaml("test", text).unwrap()
    }

    const TWO_ZONES: &str = "
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

    fn boot(
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
    fn failure_paths_format_like_heat() {
        let f = Failure::new(
            Some("ResourceInError"),
            vec!["resources".into(), "0".into()],
            "m",
        );
        assert_eq!(f.to_string(), "ResourceInError: resources[0]: m");
        assert_eq!(
            resource_failure(
                &format!("Resource CREATE failed: {f}"),
                "vdus",
                crate::driver::StackAction::Create
            )
            .to_string(),
            "ResourceInError: resources.vdus.resources[0]: m"
        );
        // the reason of an autoscaling group whose member failed in an update (captured)
        let nested = "Resource UPDATE failed: resources.3anlrib6cpvf: Resource CREATE failed: ResourceInError: resources.VDU1: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\"";
        assert_eq!(
            resource_failure(nested, "VDU1_scale_group", crate::driver::StackAction::Update).to_string(),
            "resources.3anlrib6cpvf: resources.VDU1_scale_group.Resource CREATE failed: ResourceInError: resources.VDU1: Went to status ERROR due to \"Message: No valid host was found. , Code: 500\""
        );
        // another action's failure is kept whole behind the resource's path
        assert_eq!(
            resource_failure(
                "Resource CREATE failed: x: y",
                "vdus",
                crate::driver::StackAction::Update
            )
            .to_string(),
            "resources.vdus: Resource CREATE failed: x: y"
        );
        // Heat's short ids: base32 of the uuid's 60 time bits
        assert_eq!(
            short_id_of("00000000-0000-4000-8000-000000000000"),
            "aaaaaaaaaaaa"
        );
        assert_eq!(
            short_id_of("ffffffff-ffff-4fff-bfff-ffffffffffff"),
            "777777777777"
        );
        assert_eq!(
            short_id_of("00000001-0000-4000-8000-000000000000"),
            "aaaaaaaaaaab"
        );
        // computed with heat.common.short_id.get_id
        assert_eq!(
            short_id_of("3f2a9c4e-1b2d-4c5e-9f00-123456789abc"),
            "yxq3fu7svhco"
        );
        let g = Failure::new(None, vec!["resources".into(), "VDU1-0".into()], "x");
        assert_eq!(g.to_string(), "resources.VDU1-0: x");
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

    #[tokio::test]
    async fn zones_report_free_capacity_and_null_hosts() {
        let sim = SimCloud::new(cloud(TWO_ZONES), 3);
        {
            let mut st = sim.lock();
            boot(&mut st, "a", "m1.small", Some("AZ-1"), None);
        }
        let zones = sim.list_zones(ListZones::default()).await.unwrap();
        assert_eq!(zones.len(), 2);
        let az1 = &zones[0];
        assert!(az1.is_candidate());
        let hosts = az1.hosts.as_ref().unwrap();
        assert_eq!(hosts[0].free, Some(Resources::new(4, 4096, 40)));
        assert_eq!(hosts[1].free, Some(Resources::new(3, 6144, 20)));
        assert!(!zones[1].available);
        assert!(zones[1].hosts.is_none());
    }

    #[tokio::test]
    async fn mutators_change_what_the_scheduler_sees() {
        let sim = SimCloud::new(cloud(TWO_ZONES), 3);
        let clone = sim.clone();
        sim.set_zone_available("AZ-1", false).unwrap();
        let zones = clone.list_zones(ListZones::default()).await.unwrap();
        assert!(!zones[0].available);
        sim.set_zone_available("AZ-1", true).unwrap();
        sim.set_host_available("c2", false).unwrap();
        sim.set_host_capacity("c1", Resources::new(1, 1024, 10))
            .unwrap();
        let zones = clone.list_zones(ListZones::default()).await.unwrap();
        let hosts = zones[0].hosts.as_ref().unwrap();
        assert_eq!(hosts[0].free, Some(Resources::new(1, 1024, 10)));
        assert!(!hosts[1].available);
        let (_, f) = boot(&mut sim.lock(), "x", "m1.small", Some("AZ-1"), None);
        // c1 is too small (placement), c2 fits but is down (filter)
        assert!(f
            .unwrap()
            .message
            .contains("There are not enough hosts available."));
        assert!(sim
            .set_zone_available("nope", true)
            .unwrap_err()
            .is_not_found());
        assert!(sim
            .set_host_available("nope", true)
            .unwrap_err()
            .is_not_found());
        assert!(sim
            .set_host_capacity("nope", Resources::default())
            .unwrap_err()
            .is_not_found());
    }

    #[tokio::test]
    async fn server_show_reports_host_zone_and_fault() {
        let sim = SimCloud::new(cloud(TWO_ZONES), 3);
        let (ok, _) = boot(&mut sim.lock(), "vdu-1", "m1.small", Some("AZ-1"), None);
        let (bad, _) = boot(&mut sim.lock(), "vdu-2", "huge", Some("AZ-1"), None);
        let s = sim.server(&ok.unwrap()).await.unwrap();
        assert_eq!(s.status, "ACTIVE");
        assert_eq!(s.host.unwrap().as_str(), "c2");
        assert_eq!(s.zone.unwrap().as_str(), "AZ-1");
        assert_eq!(s.flavor.unwrap().as_str(), "m1.small");
        let s = sim.server(&bad.unwrap()).await.unwrap();
        assert_eq!(s.status, "ERROR");
        assert_eq!(s.host, None);
        assert_eq!(s.zone.unwrap().as_str(), "AZ-1");
        assert_eq!(
            s.fault.unwrap(),
            ServerFault {
                code: 500,
                message: "No valid host was found. ".into()
            }
        );
        assert!(sim.server(&"nope".into()).await.unwrap_err().is_not_found());
    }
}
