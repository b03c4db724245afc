//! Reading the TOSCA side of a package: entry file, imports, types and the descriptor.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_yaml::Value;

use super::yaml::{self, At};
use crate::error::{Error, Location};
use crate::Result;

/// The TOSCA metadata file.
pub(crate) const TOSCA_META: &str = "TOSCA-Metadata/TOSCA.meta";

/// The standard ETSI SOL001 type files: known by name, never read.
const STANDARD_IMPORTS: &[&str] = &[
    "etsi_nfv_sol001_common_types.yaml",
    "etsi_nfv_sol001_vnfd_types.yaml",
];

/// Base node types.
pub(crate) const VNF: &str = "tosca.nodes.nfv.VNF";
pub(crate) const VDU_COMPUTE: &str = "tosca.nodes.nfv.Vdu.Compute";
pub(crate) const VDU_STORAGE: &str = "tosca.nodes.nfv.Vdu.VirtualBlockStorage";
pub(crate) const VDU_CP: &str = "tosca.nodes.nfv.VduCp";
pub(crate) const VIRTUAL_LINK: &str = "tosca.nodes.nfv.VnfVirtualLink";
/// Base group type.
pub(crate) const PLACEMENT_GROUP: &str = "tosca.groups.nfv.PlacementGroup";
/// Base policy types.
pub(crate) const POLICY_TYPES: &[&str] = &[
    "tosca.policies.nfv.AffinityRule",
    "tosca.policies.nfv.AntiAffinityRule",
    "tosca.policies.nfv.ScalingAspects",
    "tosca.policies.nfv.VduScalingAspectDeltas",
    "tosca.policies.nfv.VduInitialDelta",
    "tosca.policies.nfv.InstantiationLevels",
    "tosca.policies.nfv.VduInstantiationLevels",
];

/// A parsed definitions file.
#[derive(Debug)]
pub(crate) struct Doc {
    /// Path relative to the package root.
    pub rel: String,
    /// Path as shown in errors (`<source>/<rel>`).
    pub shown: PathBuf,
    /// The YAML.
    pub value: Value,
}

impl Doc {
    fn parse(source: &str, rel: &str, bytes: &[u8]) -> Result<Doc> {
        let shown = Path::new(source).join(rel);
        let value = yaml::parse(&shown, bytes)?;
        let doc = Doc {
            rel: rel.to_owned(),
            shown,
            value,
        };
        if !matches!(doc.value, Value::Mapping(_) | Value::Null) {
            return Err(doc.root().expected("a mapping (a TOSCA service template)"));
        }
        Ok(doc)
    }

    /// The document root.
    pub fn root(&self) -> At<'_> {
        At::root(&self.value, &self.shown)
    }

    /// `topology_template`, when present.
    pub fn topology(&self) -> Result<Option<At<'_>>> {
        self.root().opt("topology_template")
    }

    /// The imports as written, with their location.
    fn imports(&self) -> Result<Vec<(String, At<'_>)>> {
        let Some(imports) = self.root().opt("imports")? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for item in imports.items()? {
            let file = match item.v {
                Value::String(s) => s.clone(),
                Value::Mapping(_) => match item.opt("file")? {
                    Some(f) => f.str()?.to_owned(),
                    None => {
                        // legacy form: `- name: file` or `- name: {file: ...}`
                        let entries = item.entries()?;
                        match entries.as_slice() {
                            [(_, v)] if v.v.is_string() => v.str()?.to_owned(),
                            [(_, v)] => v.req("file")?.str()?.to_owned(),
                            _ => return Err(item.expected("a file name or a mapping with `file`")),
                        }
                    }
                },
                _ => return Err(item.expected("a file name or a mapping with `file`")),
            };
            out.push((file, item));
        }
        Ok(out)
    }
}

/// Normalizes a `/`-separated path: drops empty and `.` segments, applies `..`. `None` when
/// the path is empty or leaves the root.
pub(crate) fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split(['/', '\\']) {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        None
    } else {
        Some(parts.join("/"))
    }
}

/// The folder of a package path (`Definitions` for `Definitions/x.yaml`; empty at the root).
fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

/// True for an import of a standard ETSI SOL001 types file (by file name, URL or not).
fn is_standard_import(import: &str) -> bool {
    let name = import.rsplit('/').next().unwrap_or(import);
    STANDARD_IMPORTS.contains(&name)
}

/// The package path an import resolves to, against the importing file's folder.
fn resolve_import(importer: &str, import: &str) -> Option<String> {
    normalize(&format!("{}/{import}", parent(importer)))
}

fn is_yaml(path: &str) -> bool {
    path.ends_with(".yaml") || path.ends_with(".yml")
}

/// `topology_template.substitution_mappings.properties.flavour_id`, when present.
pub(super) fn flavour_id(doc: &Doc) -> Result<Option<At<'_>>> {
    let Some(tt) = doc.topology()? else {
        return Ok(None);
    };
    let Some(sm) = tt.opt("substitution_mappings")? else {
        return Ok(None);
    };
    let Some(props) = sm.opt("properties")? else {
        return Ok(None);
    };
    props.opt("flavour_id")
}

/// Finds the entry definitions file.
pub(super) fn entry_definitions(source: &str, files: &BTreeMap<String, Vec<u8>>) -> Result<String> {
    if let Some(bytes) = files.get(TOSCA_META) {
        let shown = Path::new(source).join(TOSCA_META);
        let text = std::str::from_utf8(crate::input::strip_bom_bytes(bytes)).map_err(|e| {
            Error::invalid(
                Location::file(&shown),
                format!("not UTF-8 text (at byte {})", e.valid_up_to()),
            )
        })?;
        for (i, line) in text.lines().enumerate() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            if key.trim() != "Entry-Definitions" {
                continue;
            }
            let loc = Location::file(&shown).with_line(i + 1);
            let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
            let Some(entry) = normalize(value) else {
                return Err(Error::invalid(
                    loc,
                    format!(
                        "Entry-Definitions `{value}` is not a path inside the package: expected \
                         e.g. `Definitions/top.vnfd.yaml`"
                    ),
                ));
            };
            if !files.contains_key(&entry) {
                return Err(Error::invalid(
                    loc,
                    format!("Entry-Definitions names `{entry}`, which is not in the package"),
                ));
            }
            return Ok(entry);
        }
        return Err(Error::invalid(
            Location::file(&shown),
            "no `Entry-Definitions` line: expected `Entry-Definitions: Definitions/<top>.yaml`",
        ));
    }

    // No TOSCA.meta: the one Definitions/*.yaml with a topology_template that no file imports.
    let mut with_topology = Vec::new();
    let mut imported = BTreeSet::new();
    for (path, bytes) in files {
        let Some(name) = path.strip_prefix("Definitions/") else {
            continue;
        };
        if name.contains('/') || !is_yaml(name) {
            continue;
        }
        let doc = Doc::parse(source, path, bytes)?;
        for (import, _) in doc.imports()? {
            if let Some(target) = resolve_import(path, &import) {
                imported.insert(target);
            }
        }
        if doc.topology()?.is_some() {
            with_topology.push(path.clone());
        }
    }
    let candidates: Vec<String> = with_topology
        .into_iter()
        .filter(|p| !imported.contains(p))
        .collect();
    match candidates.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Error::invalid(
            Location::file(source),
            "no entry VNFD: there is no TOSCA-Metadata/TOSCA.meta, and no Definitions/*.yaml file \
             has a topology_template without being imported by another file",
        )),
        several => Err(Error::invalid(
            Location::file(source),
            format!(
                "ambiguous entry VNFD: there is no TOSCA-Metadata/TOSCA.meta, and {} \
                 Definitions files have a topology_template and are imported by no other file \
                 ({}); add TOSCA-Metadata/TOSCA.meta with `Entry-Definitions: <one of them>`",
                several.len(),
                several.join(", ")
            ),
        )),
    }
}

/// Reads the entry file and everything it imports, entry first, then in import order.
pub(super) fn load_definitions(
    source: &str,
    files: &BTreeMap<String, Vec<u8>>,
    entry: &str,
) -> Result<Vec<Doc>> {
    let mut docs: Vec<Doc> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let bytes = files.get(entry).ok_or_else(|| {
        Error::invalid(
            Location::file(source),
            format!("entry definitions `{entry}` is not in the package"),
        )
    })?;
    docs.push(Doc::parse(source, entry, bytes)?);
    seen.insert(entry.to_owned());
    let mut next = 0;
    while let Some(doc) = docs.get(next) {
        let mut new = Vec::new();
        for (import, at) in doc.imports()? {
            if is_standard_import(&import) {
                continue;
            }
            if import.contains("://") {
                return Err(at.err(format!(
                    "import `{import}` is a URL and not a standard ETSI SOL001 types file: vnfm \
                     reads no remote files; put the file in the package and import it by a \
                     relative path"
                )));
            }
            let Some(target) = resolve_import(&doc.rel, &import) else {
                return Err(at.err(format!(
                    "import `{import}` leaves the package root (resolved against {})",
                    doc.rel
                )));
            };
            let Some(bytes) = files.get(&target) else {
                return Err(at.err(format!(
                    "import `{import}` is missing: `{target}` is not in the package"
                )));
            };
            if seen.insert(target.clone()) {
                new.push(Doc::parse(source, &target, bytes)?);
            }
        }
        docs.extend(new);
        next += 1;
    }
    Ok(docs)
}

/// The type definitions of the package (`node_types`, `group_types`, `policy_types`).
pub(crate) struct Types<'a> {
    node: BTreeMap<String, At<'a>>,
    group: BTreeMap<String, At<'a>>,
    policy: BTreeMap<String, At<'a>>,
}

impl<'a> Types<'a> {
    pub(super) fn new(docs: &'a [Doc]) -> Result<Self> {
        let mut t = Types {
            node: BTreeMap::new(),
            group: BTreeMap::new(),
            policy: BTreeMap::new(),
        };
        for doc in docs {
            let root = doc.root();
            for (section, map) in [
                ("node_types", &mut t.node),
                ("group_types", &mut t.group),
                ("policy_types", &mut t.policy),
            ] {
                if let Some(sec) = root.opt(section)? {
                    for (name, def) in sec.entries()? {
                        map.entry(name).or_insert(def);
                    }
                }
            }
        }
        Ok(t)
    }

    /// Which of `bases` `ty` is or derives from (through the package's types).
    fn base_in(
        map: &BTreeMap<String, At<'a>>,
        ty: &str,
        bases: &[&'static str],
    ) -> Option<&'static str> {
        let mut cur = ty.to_owned();
        // A derivation chain longer than this is a cycle.
        for _ in 0..64 {
            if let Some(b) = bases.iter().find(|b| **b == cur) {
                return Some(b);
            }
            let parent = map
                .get(&cur)
                .and_then(|d| d.v.get("derived_from"))
                .and_then(Value::as_str)?;
            cur = parent.to_owned();
        }
        None
    }

    /// The base node type of `ty` among the ones vnfm reads.
    pub fn node_kind(&self, ty: &str) -> Option<&'static str> {
        Self::base_in(
            &self.node,
            ty,
            &[VNF, VDU_COMPUTE, VDU_STORAGE, VDU_CP, VIRTUAL_LINK],
        )
    }

    /// True when group type `ty` is a placement group.
    pub fn is_placement_group(&self, ty: &str) -> bool {
        Self::base_in(&self.group, ty, &[PLACEMENT_GROUP]).is_some()
    }

    /// The base policy type of `ty` among the ones vnfm reads.
    pub fn policy_kind(&self, ty: &str) -> Option<&'static str> {
        Self::base_in(&self.policy, ty, POLICY_TYPES)
    }

    /// The value a node type (or a type it derives from) gives property `name`: its single
    /// `valid_values`, else its `default`.
    fn property_value(&self, ty: &str, name: &str) -> Result<Option<At<'a>>> {
        let mut cur = ty.to_owned();
        for _ in 0..64 {
            let Some(def) = self.node.get(&cur) else {
                return Ok(None);
            };
            if let Some(prop) = def
                .opt("properties")?
                .map(|p| p.opt(name))
                .transpose()?
                .flatten()
            {
                if let Some(constraints) = prop.opt("constraints")? {
                    for c in constraints.items()? {
                        if let Some(vv) = c.opt("valid_values")? {
                            let items = vv.items()?;
                            if let [one] = items.as_slice() {
                                return Ok(Some(one.clone()));
                            }
                        }
                    }
                }
                if let Some(d) = prop.opt("default")? {
                    return Ok(Some(d));
                }
                if let Some(es) = prop.opt("entry_schema")? {
                    if let Some(constraints) = es.opt("constraints")? {
                        for c in constraints.items()? {
                            if let Some(vv) = c.opt("valid_values")? {
                                return Ok(Some(vv));
                            }
                        }
                    }
                }
                return Ok(None);
            }
            match def.v.get("derived_from").and_then(Value::as_str) {
                Some(p) => cur = p.to_owned(),
                None => return Ok(None),
            }
        }
        Ok(None)
    }
}

/// The descriptor's identity.
pub(super) struct Descriptor {
    pub(super) vnf_type: String,
    pub(super) descriptor_id: String,
    pub(super) descriptor_version: Option<String>,
    pub(super) provider: Option<String>,
    pub(super) product_name: Option<String>,
    pub(super) software_version: Option<String>,
    pub(super) vnfm_info: Vec<String>,
}

/// The VNF node templates of a document: `(name, template, type)`.
pub(crate) fn vnf_nodes<'a>(
    doc: &'a Doc,
    types: &Types<'_>,
) -> Result<Vec<(String, At<'a>, String)>> {
    let mut out = Vec::new();
    let Some(tt) = doc.topology()? else {
        return Ok(out);
    };
    let Some(nodes) = tt.opt("node_templates")? else {
        return Ok(out);
    };
    for (name, node) in nodes.entries()? {
        let ty = node.req("type")?.str()?.to_owned();
        if types.node_kind(&ty) == Some(VNF) {
            out.push((name, node, ty));
        }
    }
    Ok(out)
}

pub(super) fn descriptor(entry: &Doc, docs: &[Doc], types: &Types<'_>) -> Result<Descriptor> {
    let entry_vnf = vnf_nodes(entry, types)?.into_iter().next();
    let vnf_type = match &entry_vnf {
        Some((_, _, ty)) => ty.clone(),
        None => {
            let mut found = None;
            for doc in docs {
                if let Some(tt) = doc.topology()? {
                    if let Some(nt) = tt
                        .opt("substitution_mappings")?
                        .map(|s| s.opt("node_type"))
                        .transpose()?
                        .flatten()
                    {
                        found = Some(nt.str()?.to_owned());
                        break;
                    }
                }
                if let Some((_, _, ty)) = vnf_nodes(doc, types)?.into_iter().next() {
                    found = Some(ty);
                    break;
                }
            }
            found.ok_or_else(|| {
                Error::invalid(
                    Location::file(&entry.shown).with_field("topology_template.node_templates"),
                    format!(
                        "no VNF: expected a node template of type {VNF} (or a type derived from \
                         it) or substitution_mappings.node_type"
                    ),
                )
            })?
        }
    };
    let node_props = match &entry_vnf {
        Some((_, node, _)) => node.opt("properties")?,
        None => None,
    };
    // The value of a descriptor property: the node template's, unless absent or a function.
    let value = |name: &str| -> Result<Option<At<'_>>> {
        if let Some(props) = &node_props {
            if let Some(v) = props.opt(name)? {
                if !v.v.is_mapping() {
                    return Ok(Some(v));
                }
            }
        }
        types.property_value(&vnf_type, name)
    };
    let text =
        |name: &str| -> Result<Option<String>> { value(name)?.map(|v| v.text()).transpose() };
    let descriptor_id = text("descriptor_id")?.ok_or_else(|| {
        Error::invalid(
            Location::file(&entry.shown),
            format!(
                "no descriptor_id: expected it in the properties of the VNF node template of this \
                 file, or as the default (or single valid_values) of property descriptor_id of \
                 node type `{vnf_type}` in the package's types files"
            ),
        )
    })?;
    let vnfm_info = match value("vnfm_info")? {
        None => Vec::new(),
        Some(v) if v.v.is_sequence() => v.str_list()?,
        Some(v) => vec![v.text()?],
    };
    Ok(Descriptor {
        descriptor_version: text("descriptor_version")?,
        provider: text("provider")?,
        product_name: text("product_name")?,
        software_version: text("software_version")?,
        vnfm_info,
        descriptor_id,
        vnf_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_normalization() {
        assert_eq!(
            normalize("./Definitions//a.yaml").as_deref(),
            Some("Definitions/a.yaml")
        );
        assert_eq!(
            normalize("Definitions/../x.yaml").as_deref(),
            Some("x.yaml")
        );
        assert_eq!(normalize("../x.yaml"), None);
        assert_eq!(normalize(""), None);
        assert_eq!(
            resolve_import("Definitions/top.yaml", "types/t.yaml").as_deref(),
            Some("Definitions/types/t.yaml")
        );
        assert_eq!(
            resolve_import("Definitions/sub/df.yaml", "../t.yaml").as_deref(),
            Some("Definitions/t.yaml")
        );
    }

    #[test]
    fn standard_imports_are_known_by_name() {
        assert!(is_standard_import("etsi_nfv_sol001_vnfd_types.yaml"));
        assert!(is_standard_import(
            "https://forge.etsi.org/rep/nfv/SOL001/raw/v2.6.1/etsi_nfv_sol001_vnfd_types.yaml"
        ));
        assert!(is_standard_import("../etsi_nfv_sol001_common_types.yaml"));
        assert!(!is_standard_import("etsi_nfv_sol001_nsd_types.yaml"));
        assert!(!is_standard_import("my_types.yaml"));
    }
}
