//! The Heat input of an operation, built the way Tacker's `StandardUserData` builds it.
//!
//! The BaseHOT top template of a flavour has one resource per VDU (`VDU1`, of a nested
//! template type such as `VDU1.yaml`) whose properties read the `nfv` parameter:
//! `{get_param: [nfv, VDU, VDU1, computeFlavourId]}`. For a VNF with VNFCs `VDU1-0` and
//! `VDU1-1`, that resource is replaced by one copy per VNFC, named `<VDU>-<index>`, and the third
//! element of every such `get_param` path gets the same index (`[nfv, VDU, VDU1-1, ...]`,
//! `[nfv, VDU, VDU1-VirtualStorage-1, vcImageId]`, `[nfv, CP, VDU1_CP1-1, network]`). The
//! `nfv` parameter then has one entry per indexed name, filled from the package and the grant:
//!
//! - `VDU.<vdu>-<i>.computeFlavourId`: the VDU's flavour (`requested_additional_capability_name`),
//! - `VDU.<name>-<i>.vcImageId`: the software image of the VDU or storage,
//! - `VDU.<vdu>-<i>.locationConstraints`: the zone granted to that VNFC,
//! - `CP.<cp>-<i>.network`: the network of the connection point, when known (the
//!   `resourceId` of the external virtual link it is on, see [`super::change_ext_conn`]),
//! - `CP.<cp>-<i>.fixed_ips`: its fixed IPs from the link's `cpConfig` (a list of
//!   `{ip_address, subnet}`; a path that indexes it, `[nfv, CP, <cp>, fixed_ips, 0, subnet]`,
//!   reads that list).
//!
//! Leaves with no known value stay `null` (Heat then uses the nested template's default).
//! Reselection changes `locationConstraints` only and updates the stack with the new `nfv`.
//!
//! # VDUs under an AutoScalingGroup
//! A VDU that has no resource of its own name may instead be the member of an
//! `OS::Heat::AutoScalingGroup` resource whose `resource.properties` read
//! `{get_param: [nfv, VDU, <VDU>, ...]}` (the layout of Tacker's samples, e.g. `worker_instance`
//! of the pod affinity sample). Such a VDU is in the [`Layout::Group`] layout: its ASG resource
//! is kept as it is (no per-VNFC copies, no indexed names) and `nfv.VDU.<VDU>` holds
//!
//! - `computeFlavourId` and `vcImageId`: the VDU's flavour and image,
//! - `locationConstraints`: the VDU's one zone (every member of the group shares it: the
//!   spec's forced affinity), taken from [`NfvValues::zones`] under the VDU id, else under the
//!   group resource's name (the reselection unit), else from its first VNFC (`<VDU>-<index>`,
//!   lowest index),
//! - `desired_capacity`: the number of VNFCs of the VDU (a number).
//!
//! The group's `desired_capacity` property must be driven by the operation: unless it already
//! reads `{get_param: [nfv, VDU, <VDU>, desired_capacity]}`, it is set to that (a literal
//! count in the template would make scaling impossible). `min_size` and `max_size` are kept;
//! Heat rejects a count outside them.
//!
//! The group's `rolling_updates` gets `max_batch_size` = the number of VNFCs of the VDU (at
//! least 1) and `min_in_service: 0` (its `pause_time`, when given, is kept; 0 otherwise). Heat
//! replaces the members whose definition changed `max_batch_size` at a time, 1 by default: a
//! reselection that moves the group to another zone would move one member per stack update,
//! while Heat rebuilds every other failed member with its old definition, in the old zone,
//! where it fails again (captured against real Heat 27). With the whole group in one batch one
//! update moves every member. vnfm changes a member's definition only to move the group's zone
//! (a scale adds or removes members, a heal replaces the member marked unhealthy), so this
//! changes nothing else of what the BaseHOT means.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json};
use serde_yaml::{Mapping, Value as Yaml};

use crate::error::{Error, Location};
use crate::id::{VduId, ZoneId};
use crate::package::{Flavour, VnfPackage};

/// One VNFC slot of the template: VDU and index, named `<vdu>-<index>`.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct VnfcSlot {
    /// The VDU.
    pub vdu: VduId,
    /// The index (Tacker's `vdu_idx`).
    pub index: u32,
}

impl VnfcSlot {
    /// A slot.
    pub fn new(vdu: impl Into<VduId>, index: u32) -> Self {
        Self {
            vdu: vdu.into(),
            index,
        }
    }

    /// `<vdu>-<index>`, the name of its top-level stack resource and of its `nfv` entries.
    pub fn name(&self) -> String {
        add_idx(self.vdu.as_str(), self.index)
    }
}

pub use crate::id::{add_idx, rm_idx};
pub use crate::intent::realise::AUTO_SCALING_GROUP;

/// The `nfv` leaf holding the member count of a VDU under an AutoScalingGroup.
pub const DESIRED_CAPACITY: &str = "desired_capacity";

/// How a VDU appears in the top template.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// StandardUserData: a resource named after the VDU, replaced by one copy per VNFC
    /// (`<VDU>-<index>`).
    PerVnfc,
    /// A member of the `OS::Heat::AutoScalingGroup` resource `resource`, whose
    /// `resource.properties` read `[nfv, VDU, <VDU>, ...]`; the resource is kept, and its size
    /// and zone come from `nfv.VDU.<VDU>`.
    Group {
        /// The name of the AutoScalingGroup resource in the top template.
        resource: String,
    },
}

impl Layout {
    /// The AutoScalingGroup resource of a VDU in the group layout.
    pub fn group_resource(&self) -> Option<&str> {
        match self {
            Layout::PerVnfc => None,
            Layout::Group { resource } => Some(resource),
        }
    }

    /// True for the group layout.
    pub fn is_group(&self) -> bool {
        matches!(self, Layout::Group { .. })
    }
}

/// The values the `nfv` parameter is filled from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NfvValues {
    /// Flavour per VDU id.
    pub flavors: BTreeMap<String, String>,
    /// Image per VDU or storage node name.
    pub images: BTreeMap<String, String>,
    /// Zone per VNFC name (`VDU1-0`); for a VDU in the group layout, per VDU id (`VDU1`) or
    /// per AutoScalingGroup resource name, else the zone of its first VNFC is used.
    pub zones: BTreeMap<String, ZoneId>,
    /// Network per connection point name.
    pub networks: BTreeMap<String, String>,
    /// Fixed IPs per connection point name (Tacker's `fixed_ips`: a list of
    /// `{ip_address, subnet}`), for a `[nfv, CP, <cp>, fixed_ips]` leaf.
    pub fixed_ips: BTreeMap<String, Vec<Json>>,
}

/// The expanded top template and the `nfv` parameter of one operation.
#[derive(Clone, Debug, PartialEq)]
pub struct HeatInput {
    /// The top template (YAML text).
    pub template: String,
    /// The `nfv` parameter.
    pub nfv: Json,
    /// The layout of every VDU.
    pub layouts: BTreeMap<VduId, Layout>,
}

/// Expands `top` (the BaseHOT top template; `source` names it in errors) for the VNFC slots
/// `vnfcs` of the VDUs `vdus`, and fills the `nfv` parameter from `values`.
///
/// A VDU in the [`Layout::PerVnfc`] layout has its resource removed and replaced by one copy
/// per slot; a VDU in the [`Layout::Group`] layout keeps its AutoScalingGroup resource (see the
/// [module docs](self)). Resources of other names are kept as they are.
///
/// # Errors
/// [`Error::Invalid`] when `top` is not a YAML mapping with `resources`, when a VDU is in
/// neither layout (or under more than one AutoScalingGroup), or when a slot names a VDU not in
/// `vdus`.
pub fn build(
    source: &str,
    top: &str,
    vdus: &[VduId],
    vnfcs: &[VnfcSlot],
    values: &NfvValues,
) -> Result<HeatInput, Error> {
    let loc = || Location::file(source);
    let mut doc = parse_top(source, top)?;
    let resources = resources_mut(source, &mut doc)?;
    let layouts = detect_layouts(source, resources, vdus)?;
    let popped = take_vdu_resources(resources, &layouts, vdus, vnfcs);
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut first_zone: BTreeMap<&str, (u32, &ZoneId)> = BTreeMap::new();
    for slot in vnfcs {
        let layout = layouts.get(&slot.vdu).ok_or_else(|| {
            Error::invalid(
                loc(),
                format!(
                    "VNFC {} names VDU {} which is not a VDU of the flavour",
                    slot.name(),
                    slot.vdu
                ),
            )
        })?;
        if layout.is_group() {
            *counts.entry(slot.vdu.as_str()).or_default() += 1;
            if let Some(z) = values.zones.get(&slot.name()) {
                let e = first_zone
                    .entry(slot.vdu.as_str())
                    .or_insert((slot.index, z));
                if slot.index < e.0 {
                    *e = (slot.index, z);
                }
            }
            continue;
        }
        let Some(def) = popped.get(slot.vdu.as_str()) else {
            continue;
        };
        let mut def = def.clone();
        index_get_params(&mut def, slot.index);
        resources.insert(Yaml::String(slot.name()), def);
    }
    let mut nfv = Map::new();
    collect_nfv_paths(&doc, &mut nfv);
    fill(&mut nfv, values);
    for (vdu, layout) in &layouts {
        if !layout.is_group() {
            continue;
        }
        let zone = values
            .zones
            .get(vdu.as_str())
            .or_else(|| layout.group_resource().and_then(|r| values.zones.get(r)))
            .or_else(|| first_zone.get(vdu.as_str()).map(|(_, z)| *z));
        let count = counts.get(vdu.as_str()).copied().unwrap_or(0);
        fill_group(&mut nfv, vdu.as_str(), values, zone, count);
    }
    let template = serde_yaml::to_string(&doc)
        .map_err(|e| Error::invalid(loc(), format!("cannot write the expanded template: {e}")))?;
    Ok(HeatInput {
        template,
        nfv: Json::Object(nfv),
        layouts,
    })
}

/// Prepares the resource of each VDU of `vdus` for its layout: a VDU under an AutoScalingGroup
/// keeps the group's resource, made to follow `desired_capacity` and to replace its members
/// (those `vnfcs` has) in one batch; the resource of any other VDU is removed from
/// `resources` and returned, by VDU, to be copied per VNFC.
fn take_vdu_resources<'v>(
    resources: &mut Mapping,
    layouts: &BTreeMap<VduId, Layout>,
    vdus: &'v [VduId],
    vnfcs: &[VnfcSlot],
) -> BTreeMap<&'v str, Yaml> {
    let mut popped = BTreeMap::new();
    for vdu in vdus {
        match layouts.get(vdu) {
            Some(Layout::Group { resource }) => {
                if let Some(def) = resources.get_mut(resource.as_str()) {
                    drive_desired_capacity(def, vdu);
                    let members = vnfcs.iter().filter(|s| &s.vdu == vdu).count();
                    replace_in_one_batch(def, u64::try_from(members.max(1)).unwrap_or(u64::MAX));
                }
            }
            _ => {
                if let Some(def) = resources.remove(vdu.as_str()) {
                    popped.insert(vdu.as_str(), def);
                }
            }
        }
    }
    popped
}

/// How errors and changes name the flavour's BaseHOT top template (the `source` of
/// [`layouts`]): `<package source>: BaseHOT/<flavour id>`.
pub(crate) fn template_source(pkg: &VnfPackage, flavour: &Flavour) -> String {
    format!("{}: BaseHOT/{}", pkg.source, flavour.id)
}

/// The layout of every VDU of `vdus` in `top` (the BaseHOT top template; `source` names it in
/// errors): [`Layout::PerVnfc`] when `top` has a resource named after the VDU, else
/// [`Layout::Group`] when one `OS::Heat::AutoScalingGroup` resource's `resource.properties`
/// read `[nfv, VDU, <VDU>, ...]`.
///
/// # Errors
/// [`Error::Invalid`] when `top` is not a YAML mapping with `resources`, or when a VDU is in
/// neither layout or under more than one AutoScalingGroup.
pub fn layouts(source: &str, top: &str, vdus: &[VduId]) -> Result<BTreeMap<VduId, Layout>, Error> {
    let mut doc = parse_top(source, top)?;
    let resources = resources_mut(source, &mut doc)?;
    detect_layouts(source, resources, vdus)
}

fn parse_top(source: &str, top: &str) -> Result<Yaml, Error> {
    crate::input::check_nesting(source, top)?;
    serde_yaml::from_str(top).map_err(|e| {
        let mut l = Location::file(source);
        if let Some(m) = e.location() {
            l = l.with_line(m.line());
        }
        Error::invalid(l, format!("not a valid HOT template: {e}"))
    })
}

fn resources_mut<'a>(source: &str, doc: &'a mut Yaml) -> Result<&'a mut Mapping, Error> {
    doc.get_mut("resources")
        .and_then(Yaml::as_mapping_mut)
        .ok_or_else(|| {
            Error::invalid(
                Location::file(source).with_field("resources"),
                "expected a mapping of resources in the top template",
            )
        })
}

fn detect_layouts(
    source: &str,
    resources: &Mapping,
    vdus: &[VduId],
) -> Result<BTreeMap<VduId, Layout>, Error> {
    let mut out = BTreeMap::new();
    for vdu in vdus {
        if resources.contains_key(vdu.as_str()) {
            out.insert(vdu.clone(), Layout::PerVnfc);
            continue;
        }
        let groups: Vec<&str> = resources
            .iter()
            .filter(|(_, def)| def.get("type").and_then(Yaml::as_str) == Some(AUTO_SCALING_GROUP))
            .filter(|(_, def)| {
                def.get("properties")
                    .and_then(|p| p.get("resource"))
                    .and_then(|r| r.get("properties"))
                    .is_some_and(|p| reads_vdu(p, vdu.as_str()))
            })
            .filter_map(|(name, _)| name.as_str())
            .collect();
        match groups.as_slice() {
            [one] => {
                out.insert(
                    vdu.clone(),
                    Layout::Group {
                        resource: (*one).to_owned(),
                    },
                );
            }
            [] => {
                return Err(Error::invalid(
                    Location::file(source).with_field(format!("resources.{vdu}")),
                    format!(
                        "the top template has no resource for VDU {vdu}: expected a resource \
                         named {vdu} (StandardUserData) or an {AUTO_SCALING_GROUP} whose \
                         resource.properties read [nfv, VDU, {vdu}, ...]"
                    ),
                ))
            }
            many => {
                return Err(Error::invalid(
                    Location::file(source).with_field("resources"),
                    format!(
                        "VDU {vdu} is under more than one {AUTO_SCALING_GROUP} ({}); expected \
                         exactly one",
                        many.join(", ")
                    ),
                ))
            }
        }
    }
    Ok(out)
}

/// True when `v` contains a `get_param: [nfv, VDU, <vdu>, ...]`.
fn reads_vdu(v: &Yaml, vdu: &str) -> bool {
    match v {
        Yaml::Mapping(m) => m.iter().any(|(k, val)| {
            if k.as_str() == Some("get_param") {
                val.as_sequence().is_some_and(|seq| {
                    seq.len() >= 4
                        && seq.first().and_then(Yaml::as_str) == Some("nfv")
                        && seq.get(1).and_then(Yaml::as_str) == Some("VDU")
                        && seq.get(2).and_then(Yaml::as_str) == Some(vdu)
                })
            } else {
                reads_vdu(val, vdu)
            }
        }),
        Yaml::Sequence(s) => s.iter().any(|x| reads_vdu(x, vdu)),
        Yaml::Tagged(t) => reads_vdu(&t.value, vdu),
        _ => false,
    }
}

/// Makes the group's `desired_capacity` read `[nfv, VDU, <vdu>, desired_capacity]`.
fn drive_desired_capacity(def: &mut Yaml, vdu: &VduId) {
    let path = Yaml::Sequence(vec![
        Yaml::from("nfv"),
        Yaml::from("VDU"),
        Yaml::from(vdu.as_str()),
        Yaml::from(DESIRED_CAPACITY),
    ]);
    let Some(props) = def.get_mut("properties").and_then(Yaml::as_mapping_mut) else {
        return;
    };
    if props
        .get(DESIRED_CAPACITY)
        .and_then(|d| d.get("get_param"))
        .is_some_and(|p| p == &path)
    {
        return;
    }
    let mut get = Mapping::new();
    get.insert(Yaml::from("get_param"), path);
    props.insert(Yaml::from(DESIRED_CAPACITY), Yaml::Mapping(get));
}

/// Sets the group's `rolling_updates` so that one update replaces every member: see the
/// [module docs](self).
fn replace_in_one_batch(def: &mut Yaml, members: u64) {
    let Some(props) = def.get_mut("properties").and_then(Yaml::as_mapping_mut) else {
        return;
    };
    let key = Yaml::from("rolling_updates");
    if !props.get(&key).is_some_and(Yaml::is_mapping) {
        props.insert(key.clone(), Yaml::Mapping(Mapping::new()));
    }
    let Some(policy) = props.get_mut(&key).and_then(Yaml::as_mapping_mut) else {
        return;
    };
    policy.insert(Yaml::from("max_batch_size"), Yaml::from(members));
    policy.insert(Yaml::from("min_in_service"), Yaml::from(0_u64));
    if !policy.contains_key("pause_time") {
        policy.insert(Yaml::from("pause_time"), Yaml::from(0_u64));
    }
}

/// Fills `nfv.VDU.<vdu>` of a VDU in the group layout.
fn fill_group(
    nfv: &mut Map<String, Json>,
    vdu: &str,
    values: &NfvValues,
    zone: Option<&ZoneId>,
    count: u64,
) {
    let Some(Json::Object(leaves)) = nfv.get_mut("VDU").and_then(|v| match v {
        Json::Object(m) => m.get_mut(vdu),
        _ => None,
    }) else {
        return;
    };
    for (leaf, value) in leaves.iter_mut() {
        let v = match leaf.as_str() {
            "computeFlavourId" => values.flavors.get(vdu).cloned().map(Json::String),
            "vcImageId" => values.images.get(vdu).cloned().map(Json::String),
            "locationConstraints" => zone.map(|z| Json::String(z.to_string())),
            DESIRED_CAPACITY => Some(Json::from(count)),
            _ => None,
        };
        if let Some(v) = v {
            *value = v;
        }
    }
}

/// Adds `-index` to the third element of every `get_param: [nfv, X, name, ...]` (paths of at
/// least four elements) in a resource's properties.
fn index_get_params(v: &mut Yaml, index: u32) {
    match v {
        Yaml::Mapping(m) => {
            for (k, val) in m.iter_mut() {
                if k.as_str() == Some("get_param") {
                    if let Some(seq) = val.as_sequence_mut() {
                        if seq.len() >= 4 && seq.first().and_then(Yaml::as_str) == Some("nfv") {
                            if let Some(Yaml::String(name)) = seq.get_mut(2) {
                                *name = add_idx(name, index);
                            }
                        }
                    }
                } else {
                    index_get_params(val, index);
                }
            }
        }
        Yaml::Sequence(s) => s.iter_mut().for_each(|x| index_get_params(x, index)),
        Yaml::Tagged(t) => index_get_params(&mut t.value, index),
        _ => {}
    }
}

/// Builds the skeleton `{X: {name: {leaf: null}}}` of every `get_param: [nfv, X, name, leaf]`
/// (a path with a list index after its leaf, `[nfv, CP, name, fixed_ips, 0, subnet]`, counts
/// as its part before the index).
fn collect_nfv_paths(v: &Yaml, nfv: &mut Map<String, Json>) {
    match v {
        Yaml::Mapping(m) => {
            for (k, val) in m {
                if k.as_str() == Some("get_param") {
                    if let Some(seq) = val.as_sequence() {
                        // The path up to its first list index (`[nfv, CP, VDU1_CP1,
                        // fixed_ips, 0, subnet]` gives the leaf `fixed_ips`).
                        let parts: Vec<&str> = seq.iter().map_while(Yaml::as_str).collect();
                        let whole = parts.len() == seq.len()
                            || seq.get(parts.len()).is_some_and(Yaml::is_number);
                        if whole && parts.len() >= 4 && parts.first() == Some(&"nfv") {
                            insert_path(nfv, parts.get(1..).unwrap_or_default());
                        }
                    }
                } else {
                    collect_nfv_paths(val, nfv);
                }
            }
        }
        Yaml::Sequence(s) => s.iter().for_each(|x| collect_nfv_paths(x, nfv)),
        Yaml::Tagged(t) => collect_nfv_paths(&t.value, nfv),
        _ => {}
    }
}

fn insert_path(map: &mut Map<String, Json>, path: &[&str]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        map.entry((*first).to_owned()).or_insert(Json::Null);
        return;
    }
    let child = map
        .entry((*first).to_owned())
        .or_insert_with(|| Json::Object(Map::new()));
    if !child.is_object() {
        *child = Json::Object(Map::new());
    }
    if let Json::Object(m) = child {
        insert_path(m, rest);
    }
}

fn fill(nfv: &mut Map<String, Json>, values: &NfvValues) {
    if let Some(Json::Object(vdus)) = nfv.get_mut("VDU") {
        for (name, leaves) in vdus.iter_mut() {
            let Json::Object(leaves) = leaves else {
                continue;
            };
            let base = rm_idx(name);
            for (leaf, value) in leaves.iter_mut() {
                let v = match leaf.as_str() {
                    "computeFlavourId" => values.flavors.get(base).cloned(),
                    "vcImageId" => values.images.get(base).cloned(),
                    "locationConstraints" => values.zones.get(name).map(|z| z.to_string()),
                    _ => None,
                };
                if let Some(v) = v {
                    *value = Json::String(v);
                }
            }
        }
    }
    if let Some(Json::Object(cps)) = nfv.get_mut("CP") {
        for (name, leaves) in cps.iter_mut() {
            let Json::Object(leaves) = leaves else {
                continue;
            };
            if let (Some(value), Some(net)) =
                (leaves.get_mut("network"), values.networks.get(rm_idx(name)))
            {
                *value = Json::String(net.clone());
            }
            if let (Some(value), Some(ips)) = (
                leaves.get_mut("fixed_ips"),
                values.fixed_ips.get(rm_idx(name)),
            ) {
                *value = Json::Array(ips.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOP: &str = r#"
heat_template_version: 2013-05-23
parameters:
  nfv: {type: json}
resources:
  VDU1:
    type: VDU1.yaml
    properties:
      flavor: { get_param: [ nfv, VDU, VDU1, computeFlavourId ] }
      image-VDU1-VirtualStorage: { get_param: [ nfv, VDU, VDU1-VirtualStorage, vcImageId ] }
      zone: { get_param: [ nfv, VDU, VDU1, locationConstraints] }
      net1: { get_param: [ nfv, CP, VDU1_CP1, network ] }
      net2: { get_resource: internalVL1 }
  internalVL1:
    type: OS::Neutron::Net
"#;

    fn values() -> NfvValues {
        let mut v = NfvValues::default();
        v.flavors.insert("VDU1".into(), "sample4G".into());
        v.images
            .insert("VDU1-VirtualStorage".into(), "cirros".into());
        v.zones.insert("VDU1-0".into(), "az-1".into());
        v.zones.insert("VDU1-1".into(), "az-2".into());
        v.networks.insert("VDU1_CP1".into(), "ext-net".into());
        v
    }

    #[test]
    fn idx_helpers() {
        assert_eq!(add_idx("VDU1", 3), "VDU1-3");
        assert_eq!(rm_idx("VDU1-3"), "VDU1");
        assert_eq!(rm_idx("VDU1-VirtualStorage-0"), "VDU1-VirtualStorage");
        assert_eq!(rm_idx("VDU1-VirtualStorage"), "VDU1-VirtualStorage");
        assert_eq!(rm_idx("vdu-db-2"), "vdu-db");
        assert_eq!(rm_idx("VDU1"), "VDU1");
    }

    #[test]
    fn expands_one_resource_per_vnfc_and_fills_nfv() {
        let out = build(
            "sample6.yaml",
            TOP,
            &["VDU1".into()],
            &[VnfcSlot::new("VDU1", 0), VnfcSlot::new("VDU1", 1)],
            &values(),
        )
        .unwrap();
        let doc: Yaml = serde_yaml::from_str(&out.template).unwrap();
        let res = doc["resources"].as_mapping().unwrap();
        assert!(res.get("VDU1").is_none());
        assert!(res.get("internalVL1").is_some());
        let r1 = &doc["resources"]["VDU1-1"]["properties"];
        assert_eq!(r1["flavor"]["get_param"][2].as_str(), Some("VDU1-1"));
        assert_eq!(
            r1["image-VDU1-VirtualStorage"]["get_param"][2].as_str(),
            Some("VDU1-VirtualStorage-1")
        );
        assert_eq!(r1["net1"]["get_param"][2].as_str(), Some("VDU1_CP1-1"));
        assert_eq!(r1["net2"]["get_resource"].as_str(), Some("internalVL1"));
        let expected = serde_json::json!({
            "VDU": {
                "VDU1-0": {"computeFlavourId": "sample4G", "locationConstraints": "az-1"},
                "VDU1-VirtualStorage-0": {"vcImageId": "cirros"},
                "VDU1-1": {"computeFlavourId": "sample4G", "locationConstraints": "az-2"},
                "VDU1-VirtualStorage-1": {"vcImageId": "cirros"}
            },
            "CP": {"VDU1_CP1-0": {"network": "ext-net"}, "VDU1_CP1-1": {"network": "ext-net"}}
        });
        assert_eq!(out.nfv, expected);
    }

    #[test]
    fn fixed_ips_indexed_in_the_template_read_the_cp_s_list() {
        let top = TOP.replace(
            "      net2: { get_resource: internalVL1 }",
            "      net2: { get_resource: internalVL1 }\n      \
             ip1: { get_param: [ nfv, CP, VDU1_CP1, fixed_ips, 0, ip_address ] }",
        );
        let mut v = values();
        v.fixed_ips.insert(
            "VDU1_CP1".into(),
            vec![serde_json::json!({"ip_address": "10.0.0.5", "subnet": "s1"})],
        );
        let out = build("t", &top, &["VDU1".into()], &[VnfcSlot::new("VDU1", 0)], &v).unwrap();
        assert_eq!(
            out.nfv["CP"]["VDU1_CP1-0"],
            serde_json::json!({
                "network": "ext-net",
                "fixed_ips": [{"ip_address": "10.0.0.5", "subnet": "s1"}]
            })
        );
    }

    #[test]
    fn unknown_leaves_stay_null() {
        let out = build(
            "t",
            TOP,
            &["VDU1".into()],
            &[VnfcSlot::new("VDU1", 0)],
            &NfvValues::default(),
        )
        .unwrap();
        assert_eq!(out.nfv["VDU"]["VDU1-0"]["locationConstraints"], Json::Null);
    }

    #[test]
    fn errors_name_the_template_and_the_vdu() {
        let e = build(
            "top.yaml",
            TOP,
            &["VDU9".into()],
            &[],
            &NfvValues::default(),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("top.yaml") && e.to_string().contains("VDU9"),
            "{e}"
        );
        let e = build(
            "top.yaml",
            "heat_template_version: x\n",
            &[],
            &[],
            &NfvValues::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("resources"), "{e}");
        let e = build("top.yaml", "a: [", &[], &[], &NfvValues::default()).unwrap_err();
        assert!(e.to_string().contains("top.yaml:line"), "{e}");
        let e = build(
            "top.yaml",
            TOP,
            &["VDU1".into()],
            &[VnfcSlot::new("VDU2", 0)],
            &NfvValues::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("VDU2"), "{e}");
    }

    /// The Tacker sample BaseHOT (read from ../shared/vectors) expands as Tacker's
    /// `fields_example_*` files show: one `VDU1-<i>` per VNFC with indexed nfv names.
    #[test]
    fn tacker_sample6_top_template() {
        let Some(top) = crate::vectors::read_vector(
            env!("CARGO_MANIFEST_DIR"),
            "tacker/az_reselection/hot/sample6.yaml",
        ) else {
            return;
        };
        let out = build(
            "sample6.yaml",
            &top,
            &["VDU1".into()],
            &[VnfcSlot::new("VDU1", 0)],
            &values(),
        )
        .unwrap();
        assert_eq!(out.nfv["VDU"]["VDU1-0"]["locationConstraints"], "az-1");
        assert_eq!(
            out.nfv["VDU"]["VDU1-VirtualStorage-0"]["vcImageId"],
            "cirros"
        );
        let doc: Yaml = serde_yaml::from_str(&out.template).unwrap();
        assert_eq!(
            doc["resources"]["VDU1-0"]["type"].as_str(),
            Some("VDU1.yaml")
        );
        assert!(doc["resources"]["nfvi_node_affinity"].is_mapping());
    }

    const GROUP_TOP: &str = r#"
heat_template_version: 2013-05-23
parameters:
  nfv: {type: json}
resources:
  VDU1_group:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 3
      desired_capacity: 1
      resource:
        type: VDU1.yaml
        properties:
          flavor: { get_param: [ nfv, VDU, VDU1, computeFlavourId ] }
          image: { get_param: [ nfv, VDU, VDU1, vcImageId ] }
          zone: { get_param: [ nfv, VDU, VDU1, locationConstraints ] }
          net: { get_param: [ nfv, CP, VDU1_CP1, network ] }
  VDU2:
    type: VDU2.yaml
    properties:
      flavor: { get_param: [ nfv, VDU, VDU2, computeFlavourId ] }
      zone: { get_param: [ nfv, VDU, VDU2, locationConstraints ] }
"#;

    fn group_values() -> NfvValues {
        let mut v = NfvValues::default();
        v.flavors.insert("VDU1".into(), "m1.small".into());
        v.flavors.insert("VDU2".into(), "m1.medium".into());
        v.images.insert("VDU1".into(), "cirros".into());
        v.networks.insert("VDU1_CP1".into(), "net0".into());
        v.zones.insert("VDU2-0".into(), "az-2".into());
        v
    }

    fn group_slots() -> Vec<VnfcSlot> {
        vec![
            VnfcSlot::new("VDU1", 0),
            VnfcSlot::new("VDU1", 1),
            VnfcSlot::new("VDU2", 0),
        ]
    }

    #[test]
    fn group_layout_keeps_the_asg_and_fills_the_vdu_entry() {
        let mut values = group_values();
        // The zone of the reselection unit, keyed by the group resource.
        values.zones.insert("VDU1_group".into(), "az-3".into());
        let out = build(
            "top.yaml",
            GROUP_TOP,
            &["VDU1".into(), "VDU2".into()],
            &group_slots(),
            &values,
        )
        .unwrap();
        assert_eq!(
            out.layouts.get(&VduId::from("VDU1")),
            Some(&Layout::Group {
                resource: "VDU1_group".into()
            })
        );
        assert_eq!(
            out.layouts.get(&VduId::from("VDU2")),
            Some(&Layout::PerVnfc)
        );
        let doc: Yaml = serde_yaml::from_str(&out.template).unwrap();
        let res = doc["resources"].as_mapping().unwrap();
        // No per-VNFC copies of the group VDU; the per-VNFC VDU is expanded.
        assert!(res.get("VDU1-0").is_none() && res.get("VDU1").is_none());
        assert!(res.get("VDU2-0").is_some() && res.get("VDU2").is_none());
        let group = &doc["resources"]["VDU1_group"]["properties"];
        assert_eq!(
            group["resource"]["properties"]["zone"]["get_param"][2],
            "VDU1"
        );
        // The literal count is replaced by the nfv entry.
        let dc: Vec<&str> = group["desired_capacity"]["get_param"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(dc, ["nfv", "VDU", "VDU1", "desired_capacity"]);
        assert_eq!(group["max_size"].as_u64(), Some(3));
        // One update replaces every member (both VNFCs of VDU1 in one batch).
        assert_eq!(group["rolling_updates"]["max_batch_size"].as_u64(), Some(2));
        assert_eq!(group["rolling_updates"]["min_in_service"].as_u64(), Some(0));
        assert_eq!(group["rolling_updates"]["pause_time"].as_u64(), Some(0));
        let expected = serde_json::json!({
            "VDU": {
                "VDU1": {
                    "computeFlavourId": "m1.small",
                    "vcImageId": "cirros",
                    "locationConstraints": "az-3",
                    "desired_capacity": 2
                },
                "VDU2-0": {"computeFlavourId": "m1.medium", "locationConstraints": "az-2"}
            },
            "CP": {"VDU1_CP1": {"network": "net0"}}
        });
        assert_eq!(out.nfv, expected);
    }

    #[test]
    fn a_rolling_update_policy_of_the_basehot_keeps_its_pause_time() {
        let top = GROUP_TOP.replace(
            "      desired_capacity: 1\n",
            "      desired_capacity: 1\n      rolling_updates: {max_batch_size: 1, min_in_service: 1, pause_time: 5}\n",
        );
        let mut slots = group_slots();
        slots.push(VnfcSlot::new("VDU1", 2));
        let out = build(
            "top.yaml",
            &top,
            &["VDU1".into(), "VDU2".into()],
            &slots,
            &group_values(),
        )
        .unwrap();
        let doc: Yaml = serde_yaml::from_str(&out.template).unwrap();
        let policy = &doc["resources"]["VDU1_group"]["properties"]["rolling_updates"];
        assert_eq!(policy["max_batch_size"].as_u64(), Some(3));
        assert_eq!(policy["min_in_service"].as_u64(), Some(0));
        assert_eq!(policy["pause_time"].as_u64(), Some(5));
    }

    #[test]
    fn group_zone_falls_back_to_the_vdu_id_then_the_first_vnfc() {
        let mut values = group_values();
        values.zones.insert("VDU1-1".into(), "az-9".into());
        values.zones.insert("VDU1-0".into(), "az-4".into());
        let slots = [VnfcSlot::new("VDU1", 1), VnfcSlot::new("VDU1", 0)];
        let out = build("t", GROUP_TOP, &["VDU1".into()], &slots, &values).unwrap();
        assert_eq!(out.nfv["VDU"]["VDU1"]["locationConstraints"], "az-4");
        values.zones.insert("VDU1".into(), "az-5".into());
        let out = build("t", GROUP_TOP, &["VDU1".into()], &slots, &values).unwrap();
        assert_eq!(out.nfv["VDU"]["VDU1"]["locationConstraints"], "az-5");
        // Scaled in to nothing: a count of zero, no zone.
        let out = build("t", GROUP_TOP, &["VDU1".into()], &[], &group_values()).unwrap();
        assert_eq!(out.nfv["VDU"]["VDU1"]["desired_capacity"], 0);
        assert_eq!(out.nfv["VDU"]["VDU1"]["locationConstraints"], Json::Null);
    }

    #[test]
    fn a_desired_capacity_already_read_from_nfv_is_kept() {
        let top = GROUP_TOP.replace(
            "desired_capacity: 1",
            "desired_capacity: { get_param: [ nfv, VDU, VDU1, desired_capacity ] }",
        );
        let out = build(
            "t",
            &top,
            &["VDU1".into()],
            &[VnfcSlot::new("VDU1", 0)],
            &group_values(),
        )
        .unwrap();
        let before: Yaml = serde_yaml::from_str(&top).unwrap();
        let mut after: Yaml = serde_yaml::from_str(&out.template).unwrap();
        // Only the rolling-update policy is added.
        let props = after["resources"]["VDU1_group"]["properties"]
            .as_mapping_mut()
            .unwrap();
        assert!(props.remove("rolling_updates").is_some());
        assert_eq!(
            before["resources"]["VDU1_group"],
            after["resources"]["VDU1_group"]
        );
        assert_eq!(out.nfv["VDU"]["VDU1"]["desired_capacity"], 1);
    }

    #[test]
    fn group_layout_errors() {
        // A VDU in neither layout names both expected forms.
        let e = layouts("top.yaml", GROUP_TOP, &["VDU3".into()]).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("top.yaml") && msg.contains("VDU3") && msg.contains(AUTO_SCALING_GROUP),
            "{msg}"
        );
        // A VDU read by two groups is ambiguous.
        let two = GROUP_TOP.replace(
            "  VDU2:\n    type: VDU2.yaml",
            "  other_group:\n    type: OS::Heat::AutoScalingGroup\n    properties:\n      \
             resource:\n        type: VDU1.yaml\n        properties:\n          flavor: { \
             get_param: [ nfv, VDU, VDU1, computeFlavourId ] }\n  VDU2:\n    type: VDU2.yaml",
        );
        let e = layouts("top.yaml", &two, &["VDU1".into()]).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("VDU1_group") && msg.contains("other_group"),
            "{msg}"
        );
        // Only the group's member properties count: a get_param elsewhere is no membership.
        let outside = GROUP_TOP.replace(
            "      max_size: 3\n",
            "      max_size: { get_param: [ nfv, VDU, VDU7, max ] }\n",
        );
        assert!(layouts("t", &outside, &["VDU7".into()]).is_err());
    }

    /// Tacker's pod affinity sample (read from ../shared/vectors): both VDUs are members of an
    /// AutoScalingGroup.
    #[test]
    fn tacker_pod_affinity_top_template_is_in_the_group_layout() {
        let Some(top) = crate::vectors::read_vector(
            env!("CARGO_MANIFEST_DIR"),
            "tacker/pod_affinity/hot/podaffinity_hot_top.yaml",
        ) else {
            return;
        };
        let l = layouts(
            "podaffinity_hot_top.yaml",
            &top,
            &["masterNode".into(), "workerNode".into()],
        )
        .unwrap();
        assert_eq!(
            l.get(&VduId::from("masterNode"))
                .and_then(Layout::group_resource),
            Some("master_instance")
        );
        assert_eq!(
            l.get(&VduId::from("workerNode"))
                .and_then(Layout::group_resource),
            Some("worker_instance")
        );
        let out = build(
            "podaffinity_hot_top.yaml",
            &top,
            &["masterNode".into(), "workerNode".into()],
            &[
                VnfcSlot::new("workerNode", 0),
                VnfcSlot::new("workerNode", 1),
                VnfcSlot::new("workerNode", 2),
            ],
            &NfvValues::default(),
        )
        .unwrap();
        assert_eq!(out.nfv["VDU"]["workerNode"]["desired_capacity"], 3);
        assert_eq!(out.nfv["VDU"]["masterNode"]["desired_capacity"], 0);
    }
}
