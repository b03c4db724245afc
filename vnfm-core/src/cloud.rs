//! The cloud file: a YAML description of a simulated cloud (zones, hosts, flavors, images and
//! optionally the nodes of a container cluster).
//!
//! ```yaml
//! zones:
//!   AZ-1:
//!     available: true            # optional, default true
//!     hosts:
//!       compute-1: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
//!       compute-2: {vcpus: 8, memory_mb: 16384, disk_gb: 160, available: false}  # nova-compute down
//!   AZ-3:
//!     available: false
//!     hosts: null                # Nova reports unavailable zones with hosts: null
//! flavors:
//!   m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
//! images: [cirros]               # optional; when present, other images fail validation
//! cluster:                       # optional; nodes of the simulated Kubernetes cluster
//!   nodes:
//!     worker-1: {labels: {kubernetes.io/hostname: worker-1}}
//!   join:                        # optional; servers that register as nodes, as kubelets do
//!     servers: "worker"          # a regular expression over server names
//!     provider_id: false         # set spec.providerID (a cloud controller manager runs)
//! ```
//!
//! Every section but `zones` is optional. Capacities are non-negative integers; a flavor needs
//! at least one vCPU and some memory (a zero root disk is allowed, as Nova allows it for
//! boot-from-volume flavors). A host may appear in one zone only. Unknown keys are rejected.
//!
//! [`CloudFile::from_yaml`] parses and validates text; [`CloudFile::load`] reads a file (the
//! only IO of this module). Errors name the file, the line when the YAML parser knows it, the
//! field path (`zones.AZ-1.hosts.compute-1.vcpus`), the value and what was expected.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Location, Result};
use crate::zone::Resources;

/// A capacity amount in a cloud file: a non-negative integer. Deserializing anything else
/// fails with a message naming the value and what was expected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Capacity(pub u64);

impl<'de> Deserialize<'de> for Capacity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str = "expected a non-negative integer";
        impl serde::de::Visitor<'_> for V {
            type Value = Capacity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Capacity, E> {
                Ok(Capacity(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Capacity, E> {
                u64::try_from(v)
                    .map(Capacity)
                    .map_err(|_| E::custom(format!("invalid value `{v}`: {EXPECTED}")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Capacity, E> {
                Err(E::custom(format!("invalid value `{v}`: {EXPECTED}")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Capacity, E> {
                Err(E::custom(format!("invalid value \"{v}\": {EXPECTED}")))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<Capacity, E> {
                Err(E::custom(format!("invalid value `{v}`: {EXPECTED}")))
            }
            fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Capacity, E> {
                Err(E::custom(format!("missing value (null): {EXPECTED}")))
            }
        }
        d.deserialize_any(V)
    }
}

/// A compute host of the cloud file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Virtual CPUs.
    pub vcpus: Capacity,
    /// Memory in MiB.
    pub memory_mb: Capacity,
    /// Disk in GiB.
    pub disk_gb: Capacity,
    /// False for a host whose nova-compute service is down (Nova's scheduler filters it out).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub available: bool,
}

impl HostSpec {
    /// A host with this capacity, available.
    pub fn new(capacity: Resources) -> Self {
        Self {
            vcpus: Capacity(capacity.vcpus),
            memory_mb: Capacity(capacity.memory_mb),
            disk_gb: Capacity(capacity.disk_gb),
            available: true,
        }
    }
    /// The host's total capacity.
    pub fn capacity(&self) -> Resources {
        Resources::new(self.vcpus.0, self.memory_mb.0, self.disk_gb.0)
    }
}

/// A zone of the cloud file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneSpec {
    /// Nova `zoneState.available`.
    #[serde(default = "yes")]
    pub available: bool,
    /// Hosts by name, or `None` for `hosts: null`.
    pub hosts: Option<BTreeMap<String, HostSpec>>,
}

/// A flavor of the cloud file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlavorSpec {
    /// Virtual CPUs.
    pub vcpus: Capacity,
    /// Memory in MiB.
    pub memory_mb: Capacity,
    /// Root disk in GiB.
    pub disk_gb: Capacity,
}

impl FlavorSpec {
    /// A flavor asking for `need`.
    pub fn new(need: Resources) -> Self {
        Self {
            vcpus: Capacity(need.vcpus),
            memory_mb: Capacity(need.memory_mb),
            disk_gb: Capacity(need.disk_gb),
        }
    }
    /// What the flavor asks for.
    pub fn resources(&self) -> Resources {
        Resources::new(self.vcpus.0, self.memory_mb.0, self.disk_gb.0)
    }
}

/// A node of the simulated container cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Initial labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Which servers of the simulated cloud register as nodes of its cluster.
///
/// A server whose name matches joins once it is `ACTIVE`, named after the server, with
/// `nodeInfo.systemUUID` = the server id, `InternalIP` = its address, `Hostname` = its name,
/// and (with `provider_id`) `spec.providerID` = `openstack:///<server id>`. A node stays when
/// its server goes (no cloud controller manager removes it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinSpec {
    /// A regular expression over server names.
    pub servers: String,
    /// Set `spec.providerID`, as cloud-provider-openstack does.
    #[serde(default)]
    pub provider_id: bool,
}

/// The simulated container cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// Nodes by name.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeSpec>,
    /// Servers that register as nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<JoinSpec>,
}

/// A cloud file: the description of a simulated cloud.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloudFile {
    /// Availability zones by name.
    pub zones: BTreeMap<String, ZoneSpec>,
    /// Flavors by name.
    #[serde(default)]
    pub flavors: BTreeMap<String, FlavorSpec>,
    /// Known images; `None` accepts any image name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<String>>,
    /// The container cluster, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterSpec>,
    /// A slow Heat: a stack create shows `CREATE_IN_PROGRESS` to this many polls
    /// (`show_stack`) before its outcome (default 0: at once). With vnfm's poll interval of 2 s
    /// an operation then waits that many intervals for its stack: what a test of `cancel`
    /// needs. Updates (a retry, a scale) are not slowed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stack_create_shows: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

impl CloudFile {
    /// Parses and validates a cloud file. `source_name` (a path or a name such as
    /// `<built-in demo cloud>`) is used in error locations.
    ///
    /// # Errors
    /// [`Error::Invalid`] for malformed YAML, unknown keys, a capacity that is not a
    /// non-negative integer, an empty zone, host or flavor name, a host listed in two zones, or
    /// a flavor without vCPUs or memory.
    pub fn from_yaml(source_name: &str, text: &str) -> Result<CloudFile> {
        let text = crate::input::strip_bom(text);
        // Syntax first, so that a malformed document is reported as such rather than as a
        // type error of the part that parsed; a document nested too deep before anything (the
        // guarded reader).
        crate::input::yaml_value(source_name, text)?;
        let cloud: CloudFile =
            serde_yaml::from_str(text).map_err(|e| yaml_error(source_name, &e))?;
        cloud.validate(source_name, text)?;
        Ok(cloud)
    }

    /// Reads and validates a cloud file from disk.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::Invalid`] when it is not a regular
    /// file or is larger than [`crate::input::MAX_INPUT_BYTES`]; else as [`CloudFile::from_yaml`].
    pub fn load(path: impl AsRef<Path>) -> Result<CloudFile> {
        let path = path.as_ref();
        let text = crate::input::read_text(path, crate::input::MAX_INPUT_BYTES, "a cloud file")?;
        Self::from_yaml(&path.display().to_string(), &text)
    }

    /// The file as YAML text (parses back to an equal value).
    ///
    /// # Errors
    /// [`Error::Invalid`] if serialization fails (it does not for values of this type).
    pub fn to_yaml(&self) -> Result<String> {
        serde_yaml::to_string(self).map_err(|e| {
            Error::invalid(
                Location::default(),
                format!("cannot serialize cloud file: {e}"),
            )
        })
    }

    /// The flavor named `name`.
    pub fn flavor(&self, name: &str) -> Option<Resources> {
        self.flavors.get(name).map(FlavorSpec::resources)
    }

    fn validate(&self, source: &str, text: &str) -> Result<()> {
        let at = |field: String| {
            let mut loc = Location::file(source);
            let key = field.rsplit('.').next().unwrap_or_default().to_owned();
            if let Some(line) = line_of_key(text, &key, 0) {
                loc = loc.with_line(line);
            }
            loc.with_field(field)
        };
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        for (zone, spec) in &self.zones {
            if zone.trim().is_empty() {
                return Err(Error::invalid(
                    Location::file(source).with_field("zones"),
                    format!(
                        "empty zone name {zone:?}: expected a non-empty availability zone name"
                    ),
                ));
            }
            for host in spec.hosts.iter().flat_map(|h| h.keys()) {
                if host.trim().is_empty() {
                    return Err(Error::invalid(
                        Location::file(source).with_field(format!("zones.{zone}.hosts")),
                        format!("empty host name {host:?}: expected a non-empty compute host name"),
                    ));
                }
                if let Some(first) = seen.insert(host, zone) {
                    let field = format!("zones.{zone}.hosts.{host}");
                    let mut loc = Location::file(source);
                    if let Some(line) = line_of_key(text, host, 1) {
                        loc = loc.with_line(line);
                    }
                    return Err(Error::invalid(
                        loc.with_field(field),
                        format!(
                            "host {host:?} is listed in zones {first:?} and {zone:?}: expected each host in exactly one zone"
                        ),
                    ));
                }
            }
        }
        for (name, f) in &self.flavors {
            if name.trim().is_empty() {
                return Err(Error::invalid(
                    Location::file(source).with_field("flavors"),
                    "empty flavor name \"\": expected a non-empty flavor name",
                ));
            }
            for (what, v) in [("vcpus", f.vcpus.0), ("memory_mb", f.memory_mb.0)] {
                if v == 0 {
                    return Err(Error::invalid(
                        at(format!("flavors.{name}.{what}")),
                        format!("zero-size flavor {name:?}: {what} is 0, expected at least 1"),
                    ));
                }
            }
        }
        for (i, image) in self.images.iter().flatten().enumerate() {
            if image.trim().is_empty() {
                return Err(Error::invalid(
                    Location::file(source).with_field(format!("images[{i}]")),
                    "empty image name \"\": expected a non-empty image name",
                ));
            }
        }
        if let Some(cluster) = &self.cluster {
            if cluster.nodes.keys().any(|n| n.trim().is_empty()) {
                return Err(Error::invalid(
                    Location::file(source).with_field("cluster.nodes"),
                    "empty node name \"\": expected a non-empty node name",
                ));
            }
            if let Some(join) = &cluster.join {
                if let Err(e) = regex::Regex::new(&join.servers) {
                    return Err(Error::invalid(
                        Location::file(source).with_field("cluster.join.servers"),
                        format!("{:?} is not a regular expression: {e}", join.servers),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The 1-based line of the `nth` (0-based) occurrence of `key:` as a mapping key in `text`.
fn line_of_key(text: &str, key: &str, nth: usize) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim_start().trim_start_matches(['{', ' ']);
            t.strip_prefix(key).is_some_and(|r| r.starts_with(':'))
                || t.strip_prefix(&format!("\"{key}\""))
                    .is_some_and(|r| r.starts_with(':'))
                || l.contains(&format!(" {key}:"))
                || l.contains(&format!("{{{key}:"))
        })
        .nth(nth)
        .map(|(i, _)| i + 1)
}

/// Turns a serde_yaml error into an [`Error::Invalid`] with file, line, field path and a
/// message that says what was expected.
fn yaml_error(source: &str, e: &serde_yaml::Error) -> Error {
    let mut loc = Location::file(source);
    if let Some(l) = e.location() {
        loc = loc.with_line(l.line());
    }
    let full = e.to_string();
    let msg = match full.rfind(" at line ") {
        Some(i) if e.location().is_some() => &full[..i],
        _ => full.as_str(),
    };
    let (field, msg) = match msg.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') && !path.is_empty() => (Some(path), rest),
        _ => (None, msg),
    };
    if let Some(field) = field {
        loc = loc.with_field(field);
    }
    let msg = if msg.starts_with("unknown field") {
        format!("{msg} (unknown key)")
    } else {
        msg.to_owned()
    };
    Error::invalid(loc, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "\
zones:
  AZ-1:
    available: true
    hosts:
      compute-1: {vcpus: 8, memory_mb: 16384, disk_gb: 160}
  AZ-3:
    available: false
    hosts: null
flavors:
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
images: [cirros]
";

    fn err(text: &str) -> String {
        CloudFile::from_yaml("cloud.yaml", text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn documented_minimal_form_parses() {
        let c = CloudFile::from_yaml("cloud.yaml", MINIMAL).unwrap();
        assert_eq!(c.zones.len(), 2);
        assert!(c.zones["AZ-1"].available);
        assert!(c.zones["AZ-3"].hosts.is_none());
        let h = &c.zones["AZ-1"].hosts.as_ref().unwrap()["compute-1"];
        assert_eq!(h.capacity(), Resources::new(8, 16384, 160));
        assert!(h.available);
        assert_eq!(c.flavor("m1.small"), Some(Resources::new(1, 2048, 20)));
        assert_eq!(c.images.as_deref(), Some(&["cirros".to_owned()][..]));
        // available defaults to true, images and cluster are optional
        let c = CloudFile::from_yaml(
            "c",
            "zones: {Z: {hosts: {h: {vcpus: 1, memory_mb: 1, disk_gb: 1}}}}",
        )
        .unwrap();
        assert!(c.zones["Z"].available);
        assert!(c.images.is_none());
    }

    #[test]
    fn round_trips_through_yaml() {
        let c = CloudFile::from_yaml("cloud.yaml", MINIMAL).unwrap();
        let again = CloudFile::from_yaml("again", &c.to_yaml().unwrap()).unwrap();
        assert_eq!(c, again);
    }

    #[test]
    fn demo_cloud_is_valid() {
        let text = include_str!("../../examples/clouds/demo.yaml");
        let c = CloudFile::from_yaml("examples/clouds/demo.yaml", text).unwrap();
        assert_eq!(c.zones.len(), 4);
        for f in ["m1.tiny", "m1.small", "m1.medium", "m1.large"] {
            assert!(c.flavor(f).is_some(), "{f}");
        }
    }

    #[test]
    fn malformed_yaml_names_file_and_line() {
        let e = err("zones:\n  AZ-1: [\n");
        assert!(e.starts_with("cloud.yaml:line "), "{e}");
        assert!(e.contains("malformed YAML"), "{e}");
    }

    #[test]
    fn negative_capacity_is_rewritten() {
        let e = err(
            "zones:\n  AZ-1:\n    hosts:\n      compute-1: {vcpus: -1, memory_mb: 1, disk_gb: 1}\n",
        );
        assert_eq!(
            e,
            "cloud.yaml:line 4: zones.AZ-1.hosts.compute-1.vcpus: invalid value `-1`: expected a non-negative integer"
        );
    }

    #[test]
    fn non_integer_capacity_is_rewritten() {
        let e =
            err("zones:\n  AZ-1:\n    hosts:\n      c1: {vcpus: 2.5, memory_mb: 1, disk_gb: 1}\n");
        assert!(e.contains("zones.AZ-1.hosts.c1.vcpus"), "{e}");
        assert!(e.contains("`2.5`: expected a non-negative integer"), "{e}");
        let e =
            err("zones:\n  AZ-1:\n    hosts:\n      c1: {vcpus: lots, memory_mb: 1, disk_gb: 1}\n");
        assert!(
            e.contains("invalid value \"lots\": expected a non-negative integer"),
            "{e}"
        );
    }

    #[test]
    fn unknown_key_is_rejected() {
        let e = err("zones:\n  AZ-1:\n    hosts:\n      c1: {vcpus: 1, memory_mb: 1, disk_gb: 1, gpus: 2}\n");
        assert!(e.contains("zones.AZ-1.hosts.c1"), "{e}");
        assert!(e.contains("unknown field `gpus`"), "{e}");
        assert!(e.contains("line 4"), "{e}");
        let e = err("zones: {}\nregions: {}\n");
        assert!(e.contains("unknown field `regions`"), "{e}");
    }

    #[test]
    fn host_in_two_zones_is_rejected() {
        let e = err("zones:\n  A:\n    hosts:\n      c1: {vcpus: 1, memory_mb: 1, disk_gb: 1}\n  B:\n    hosts:\n      c1: {vcpus: 1, memory_mb: 1, disk_gb: 1}\n");
        assert_eq!(
            e,
            "cloud.yaml:line 7: zones.B.hosts.c1: host \"c1\" is listed in zones \"A\" and \"B\": expected each host in exactly one zone"
        );
    }

    #[test]
    fn zero_size_flavor_is_rejected() {
        let e = err("zones: {}\nflavors:\n  m1.zero: {vcpus: 0, memory_mb: 512, disk_gb: 1}\n");
        assert_eq!(
            e,
            "cloud.yaml:line 3: flavors.m1.zero.vcpus: zero-size flavor \"m1.zero\": vcpus is 0, expected at least 1"
        );
        // a zero root disk is a boot-from-volume flavor, which Nova allows
        assert!(CloudFile::from_yaml(
            "c",
            "zones: {}\nflavors:\n  bfv: {vcpus: 1, memory_mb: 512, disk_gb: 0}\n"
        )
        .is_ok());
    }

    #[test]
    fn empty_zone_name_is_rejected() {
        let e = err("zones:\n  \"\":\n    hosts: null\n");
        assert!(e.contains("zones: empty zone name"), "{e}");
    }

    #[test]
    fn missing_capacity_and_wrong_shape() {
        let e = err("zones:\n  A:\n    hosts:\n      c1: {vcpus: 1, memory_mb: 1}\n");
        assert!(
            e.contains("zones.A.hosts.c1: missing field `disk_gb`"),
            "{e}"
        );
        let e = err("zones: [a, b]\n");
        assert!(
            e.contains("zones: invalid type: sequence, expected a map"),
            "{e}"
        );
    }

    #[test]
    fn load_reads_a_file_and_reports_missing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.yaml");
        std::fs::write(&p, MINIMAL).unwrap();
        assert_eq!(CloudFile::load(&p).unwrap().zones.len(), 2);
        let e = CloudFile::load(dir.path().join("nope.yaml")).unwrap_err();
        assert!(matches!(e, Error::Io { .. }));
    }
}
