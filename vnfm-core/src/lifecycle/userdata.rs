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
//! - `CP.<cp>-<i>.network`: the network of the connection point, when known.
//!
//! Leaves with no known value stay `null` (Heat then uses the nested template's default).
//! Reselection changes `locationConstraints` only and updates the stack with the new `nfv`.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json};
use serde_yaml::Value as Yaml;

use crate::error::{Error, Location};
use crate::id::{VduId, ZoneId};

/// One VNFC slot of the template: VDU and index, named `<vdu>-<index>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

/// `name-index`.
pub fn add_idx(name: &str, index: u32) -> String {
    format!("{name}-{index}")
}

/// The name without its `-<index>` suffix (`VDU1-VirtualStorage-0` → `VDU1-VirtualStorage`);
/// the name itself when it has no numeric suffix.
pub fn rm_idx(name: &str) -> &str {
    match name.rsplit_once('-') {
        Some((base, idx)) if !idx.is_empty() && idx.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// The values the `nfv` parameter is filled from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NfvValues {
    /// Flavour per VDU id.
    pub flavors: BTreeMap<String, String>,
    /// Image per VDU or storage node name.
    pub images: BTreeMap<String, String>,
    /// Zone per VNFC name (`VDU1-0`).
    pub zones: BTreeMap<String, ZoneId>,
    /// Network per connection point name.
    pub networks: BTreeMap<String, String>,
}

/// The expanded top template and the `nfv` parameter of one operation.
#[derive(Clone, Debug, PartialEq)]
pub struct HeatInput {
    /// The top template (YAML text).
    pub template: String,
    /// The `nfv` parameter.
    pub nfv: Json,
}

/// Expands `top` (the BaseHOT top template; `source` names it in errors) for the VNFC slots
/// `vnfcs` of the VDUs `vdus`, and fills the `nfv` parameter from `values`.
///
/// Every VDU of `vdus` must be a resource of `top`; its resource is removed and replaced by one
/// copy per slot. Resources of other names are kept as they are.
///
/// # Errors
/// [`Error::Invalid`] when `top` is not a YAML mapping with `resources`, when a VDU has no
/// resource in it, or when a slot names a VDU not in `vdus`.
pub fn build(
    source: &str,
    top: &str,
    vdus: &[VduId],
    vnfcs: &[VnfcSlot],
    values: &NfvValues,
) -> Result<HeatInput, Error> {
    let loc = || Location::file(source);
    let mut doc: Yaml = serde_yaml::from_str(top).map_err(|e| {
        let mut l = loc();
        if let Some(m) = e.location() {
            l = l.with_line(m.line());
        }
        Error::invalid(l, format!("not a valid HOT template: {e}"))
    })?;
    let resources = doc
        .get_mut("resources")
        .and_then(Yaml::as_mapping_mut)
        .ok_or_else(|| {
            Error::invalid(
                loc().with_field("resources"),
                "expected a mapping of resources in the top template",
            )
        })?;
    let mut popped = BTreeMap::new();
    for vdu in vdus {
        let def = resources.remove(vdu.as_str()).ok_or_else(|| {
            Error::invalid(
                loc().with_field(format!("resources.{vdu}")),
                format!("the top template has no resource for VDU {vdu}"),
            )
        })?;
        popped.insert(vdu.as_str(), def);
    }
    for slot in vnfcs {
        let def = popped.get(slot.vdu.as_str()).ok_or_else(|| {
            Error::invalid(
                loc(),
                format!(
                    "VNFC {} names VDU {} which is not a VDU of the flavour",
                    slot.name(),
                    slot.vdu
                ),
            )
        })?;
        let mut def = def.clone();
        index_get_params(&mut def, slot.index);
        resources.insert(Yaml::String(slot.name()), def);
    }
    let mut nfv = Map::new();
    collect_nfv_paths(&doc, &mut nfv);
    fill(&mut nfv, values);
    let template = serde_yaml::to_string(&doc)
        .map_err(|e| Error::invalid(loc(), format!("cannot write the expanded template: {e}")))?;
    Ok(HeatInput {
        template,
        nfv: Json::Object(nfv),
    })
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

/// Builds the skeleton `{X: {name: {leaf: null}}}` of every `get_param: [nfv, X, name, leaf]`.
fn collect_nfv_paths(v: &Yaml, nfv: &mut Map<String, Json>) {
    match v {
        Yaml::Mapping(m) => {
            for (k, val) in m {
                if k.as_str() == Some("get_param") {
                    if let Some(seq) = val.as_sequence() {
                        let parts: Vec<&str> = seq.iter().filter_map(Yaml::as_str).collect();
                        if parts.len() == seq.len()
                            && parts.len() >= 4
                            && parts.first() == Some(&"nfv")
                        {
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
}
