//! What the simulator keeps, whole in a snapshot ([`SimCloud::snapshot`]): the [`State`]
//! behind every clone of a [`SimCloud`], made of plain records of Nova (zones, hosts,
//! servers, server groups), of Heat (stacks and their resources) and of the cluster
//! ([`ClusterState`]), with its id generator and its time. What Nova and Heat do with them is
//! in the `nova` and `heat` modules, which add to [`State`]'s methods.
//!
//! [`SimCloud`]: super::SimCloud
//! [`SimCloud::snapshot`]: super::SimCloud::snapshot

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::cluster::ClusterState;
use super::failure::{BuildFault, Failure, StackDeleteFault};
use super::test_resource::Wait;
use crate::cloud::CloudFile;
use crate::driver::{Clock, ServerFault, StackStatus};
use crate::id::{HostId, IdGen, ServerId, StackId, ZoneId};
use crate::zone::Resources;

/// A compute host.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct HostRec {
    pub(super) zone: ZoneId,
    pub(super) capacity: Resources,
    pub(super) available: bool,
}

/// A zone.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ZoneRec {
    pub(super) available: bool,
    pub(super) hosts_null: bool,
}

/// A Nova server.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ServerRec {
    pub(super) id: ServerId,
    pub(super) name: String,
    pub(super) flavor: String,
    pub(super) need: Resources,
    pub(super) zone: Option<ZoneId>,
    pub(super) host: Option<HostId>,
    pub(super) status: String,
    pub(super) fault: Option<ServerFault>,
    pub(super) group: Option<String>,
    /// The server's one fixed IP.
    #[serde(default)]
    pub(super) ip: Option<String>,
    /// Stopped (`os-stop`): shown `SHUTOFF`; it keeps its host and capacity, as in Nova.
    #[serde(default)]
    pub(super) stopped: bool,
}

/// A Nova server group.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct GroupRec {
    pub(super) policy: String,
    pub(super) members: Vec<ServerId>,
}

/// The shared state of a [`SimCloud`](super::SimCloud).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct State {
    pub(super) ids: IdGen,
    pub(super) clock: u64,
    pub(super) project_id: String,
    pub(super) cloud: CloudFile,
    pub(super) zones: BTreeMap<ZoneId, ZoneRec>,
    pub(super) hosts: BTreeMap<HostId, HostRec>,
    pub(super) servers: BTreeMap<ServerId, ServerRec>,
    pub(super) groups: BTreeMap<String, GroupRec>,
    pub(super) stacks: BTreeMap<StackId, StackRec>,
    pub(super) build_faults: VecDeque<BuildFault>,
    #[serde(default)]
    pub(super) delete_faults: VecDeque<StackDeleteFault>,
    pub(super) cluster: ClusterState,
    /// Servers created so far (numbers their IPs).
    #[serde(default)]
    pub(super) servers_made: u32,
    /// False when the credentials are not an admin's: `OS-EXT-SRV-ATTR:host` is hidden.
    #[serde(default = "yes")]
    pub(super) admin_view: bool,
    /// Where the simulator's time comes from ([`SimCloud::set_clock`]); not saved.
    ///
    /// [`SimCloud::set_clock`]: super::SimCloud::set_clock
    #[serde(skip)]
    pub(super) time: Option<Arc<dyn Clock>>,
}

fn yes() -> bool {
    true
}

/// What a resource is backed by.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) enum ResKind {
    Plain,
    Server(ServerId),
    Group(String),
    Nested(StackId),
}

/// A resource of a stack.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ResRec {
    pub(super) name: String,
    pub(super) rtype: String,
    pub(super) physical_id: String,
    pub(super) status: StackStatus,
    pub(super) reason: String,
    pub(super) kind: ResKind,
    pub(super) props: Value,
    pub(super) deps: Vec<String>,
    pub(super) created: u64,
    pub(super) unhealthy: bool,
    pub(super) failure: Option<Failure>,
    /// Earlier rows of this resource that Heat's convergence engine keeps until a
    /// replacement succeeds: the original of a replaced server (`UPDATE_COMPLETE`, `The
    /// Resource VDU1 requires replacement.`) and failed servers, with their servers.
    #[serde(default)]
    pub(super) older: Vec<ResRec>,
    /// Set when the resource got a new row and every earlier row was purged: Heat lists a
    /// stack's rows in id order, so the resource moves to the end of the listing. The value
    /// orders such resources among themselves.
    #[serde(default)]
    pub(super) relisted: Option<u64>,
    /// Until when the row shows its action in progress (an `OS::Heat::TestResource` that
    /// waits): the outcome is decided, the wait only hides it.
    #[serde(default)]
    pub(super) busy: Option<Busy>,
}

/// Until when something shows in progress, on the simulator's time ([`State::time_now`]).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Busy {
    /// Until that time.
    Until(DateTime<Utc>),
    /// For ever (Heat's `wait_secs: -1`).
    Forever,
}

impl Busy {
    /// The wait of a test resource that starts at `now`; `None` when it takes no time.
    pub(super) fn of(wait: Wait, now: DateTime<Utc>) -> Option<Busy> {
        match wait {
            Wait::None => None,
            Wait::Forever => Some(Busy::Forever),
            Wait::Secs(s) => {
                let ms = (s * 1000.0).ceil().min(i64::MAX as f64) as i64;
                Some(Busy::Until(
                    now + chrono::Duration::try_milliseconds(ms).unwrap_or(chrono::Duration::MAX),
                ))
            }
        }
    }

    /// Whether it is still in progress at `now` (Heat: done once `waited > wait_secs`).
    pub(super) fn at(self, now: DateTime<Utc>) -> bool {
        match self {
            Busy::Forever => true,
            Busy::Until(t) => now <= t,
        }
    }
}

/// A stack delete that has not completed yet.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Deleting {
    /// `show_stack` calls that still see `DELETE_IN_PROGRESS`.
    pub(super) shows_left: u32,
    /// Nova's message when the delete is to end `DELETE_FAILED`.
    pub(super) fail: Option<String>,
    /// A delete without a planned fault: it also completes when the caller does anything
    /// else than polling this stack.
    #[serde(default)]
    pub(super) quick: bool,
    /// The delete waits of the stack's test resources: in progress until then, whatever the
    /// polls.
    #[serde(default)]
    pub(super) busy: Option<Busy>,
}

/// A stack (top-level or nested).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct StackRec {
    pub(super) id: StackId,
    pub(super) name: String,
    pub(super) parent: Option<StackId>,
    pub(super) template: Value,
    pub(super) files: Arc<BTreeMap<String, String>>,
    pub(super) given: Map<String, Value>,
    pub(super) status: StackStatus,
    pub(super) reason: String,
    pub(super) failure: Option<Failure>,
    pub(super) resources: Vec<ResRec>,
    /// The nested stack of an AutoScalingGroup: its members are built in template order.
    #[serde(default)]
    pub(super) asg: bool,
    /// A delete in progress.
    #[serde(default)]
    pub(super) deleting: Option<Deleting>,
    /// Polls left that see the create in progress (the cloud file's `stack_create_shows`).
    #[serde(default)]
    pub(super) create_shows_left: u32,
}

impl State {
    /// The state of a new cloud shaped like `cloud`, with every id drawn from `seed`.
    pub(super) fn new(cloud: CloudFile, seed: u64) -> State {
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
        let cluster = ClusterState::new(cloud.cluster.as_ref());
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

    /// A uuid from the seeded generator.
    pub(super) fn uuid(&mut self) -> String {
        self.ids.next_uuid()
    }

    /// A 12-character id drawn from the seeded generator the way Heat's
    /// `short_id.generate_id()` makes one: the 60 random bits of a version 4 uuid's `time`
    /// field, base32-encoded and lowercased (alphabet `a-z`, `2-7`, e.g. `3anlrib6cpvf`).
    pub(super) fn short_id(&mut self) -> String {
        short_id_of(&self.ids.next_uuid())
    }

    /// A request id (`req-<uuid>`), as Nova and Heat put in their errors.
    pub(super) fn request_id(&mut self) -> String {
        format!("req-{}", self.uuid())
    }

    /// The simulator's time: the clock of [`SimCloud::set_clock`], else the Unix epoch for
    /// ever (time stands still: what waits on it never ends).
    ///
    /// [`SimCloud::set_clock`]: super::SimCloud::set_clock
    pub(super) fn time_now(&self) -> chrono::DateTime<chrono::Utc> {
        self.time
            .as_ref()
            .map_or(chrono::DateTime::UNIX_EPOCH, |c| c.now())
    }

    /// Advances the virtual clock (a counter) and returns it.
    pub(super) fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

/// Heat's `short_id.get_id`: the 60-bit `time` field of a uuid (`time_low`, `time_mid` and the
/// 12 low bits of `time_hi_and_version`), as 12 base32 characters, lowercased.
fn short_id_of(uuid: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_are_heats() {
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
    }
}
