//! VNF packages in the layout of Tacker's v2 samples (ETSI SOL004 CSAR with SOL001 VNFDs).
//!
//! ```text
//! TOSCA-Metadata/TOSCA.meta        Entry-Definitions: Definitions/<top>.yaml  (optional)
//! Definitions/<top>.yaml           top VNFD: imports the types and the flavour files
//! Definitions/<types>.yaml         node_types: the VNF node type (descriptor_id, provider, ...)
//! Definitions/<df>.yaml            one deployment flavour: substitution_mappings.flavour_id,
//!                                  VDUs, storages, CPs, VLs, groups and policies
//! BaseHOT/<flavourId>/<top>.yaml   Heat template of the flavour
//! BaseHOT/<flavourId>/nested/*.yaml  nested templates (`type: VDU1.yaml`)
//! ```
//!
//! [`VnfPackage::from_files`] reads a package from an in-memory map of files and does no IO;
//! [`fs::load`] reads a directory or a `.zip` file from disk and hands it over.
//!
//! # How a package is read
//! - **Entry**: `Entry-Definitions` of `TOSCA-Metadata/TOSCA.meta`; without that file, the one
//!   `Definitions/*.yaml` file that has a `topology_template` and is imported by no other file
//!   (several such files are an error listing them).
//! - **Imports** resolve against the importing file's folder, recursively; each file is read
//!   once. The standard ETSI SOL001 type files (`etsi_nfv_sol001_common_types.yaml`,
//!   `etsi_nfv_sol001_vnfd_types.yaml`, also as URLs such as
//!   `https://forge.etsi.org/rep/nfv/SOL001/raw/v2.6.1/etsi_nfv_sol001_vnfd_types.yaml`) are
//!   known by name and never read, present or not. Any other import that is not in the package
//!   is an error naming the importing file and the missing path.
//! - **Descriptor**: `descriptor_id`, `descriptor_version`, `provider`, `product_name`,
//!   `software_version` and `vnfm_info` come from the properties of the entry file's VNF node
//!   template; a property absent there (or given as a function such as `get_input`) comes from
//!   the VNF node type (and the types it derives from) in the package's types files: its single
//!   `valid_values` constraint if it has one, else its `default`. Tacker's samples carry the id
//!   that way.
//! - **Flavours**: every file reached from the entry whose
//!   `topology_template.substitution_mappings.properties.flavour_id` is set is one deployment
//!   flavour. Node templates, groups and policies are classified by type, following
//!   `derived_from` through the package's `node_types`, `group_types` and `policy_types`.
//! - **Sizes** (see below): decimal units are read as binary ones (`4096 MB` = 4096 MiB),
//!   memory is kept in MiB and storage in GiB, rounded up.
//! - **BaseHOT**: see [`Flavour::base_hot`]. A flavour without a `BaseHOT/<flavourId>/` folder
//!   is valid (a Kubernetes flavour has none); asking for its HOT with
//!   [`VnfPackage::base_hot`] is the error. A folder that exists but is broken (no or several
//!   top-level templates, malformed YAML, a nested template type that is not in the folder) is
//!   an error when the package is read.
//!
//! # Sizes
//! Units are matched case-insensitively (`B`, `kB`, `KiB`, `MB`, `MiB`, `GB`, `GiB`, `TB`,
//! `TiB`); `MB` and `MiB` both mean 1024² bytes, as VNFD authors mean them for Nova flavors
//! and Cinder volumes. An unknown unit is an error.
//!
//! # Errors
//! Every problem is an [`Error::Invalid`] whose [`Location`] names the
//! file (below the package's `source` name), the field path (such as
//! `topology_template.node_templates.VDU1.properties.vdu_profile.min_number_of_instances`) or
//! the line of a YAML syntax error, the value found and what was expected.

use std::collections::BTreeMap;

use crate::error::{Error, Location};
use crate::Result;

mod flavour;
pub mod fs;
mod hot;
mod model;
mod read;
mod size;
mod tosca;
pub(crate) mod yaml;

pub(crate) use model::list_or_none;
pub use model::{
    is_kubernetes_file, ConnectionPoint, Flavour, InstantiationLevel, InstantiationLevels,
    LcmOperation, PlacementGroup, PlacementRule, RuleKind, RuleScope, ScalingAspect, Vdu,
    VduInitialDelta, VduInstantiationLevels, VduScalingAspectDeltas, VirtualCompute, VirtualLink,
    VirtualStorage, VnfPackage, KUBERNETES_DIR,
};

impl VnfPackage {
    /// Reads a package from its files: paths relative to the package root, `/`-separated (a
    /// leading `./` is ignored). `source` names the package in errors: a file `x` of the
    /// package is shown as `<source>/x`.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the file, field path or line, the value found and what was
    /// expected, for: a missing or malformed `TOSCA.meta` entry, no or several candidate entry
    /// files, malformed YAML, a missing import, a value of the wrong shape, an unknown size
    /// unit, a VDU with `min_number_of_instances > max_number_of_instances`, a policy or rule
    /// target that is not a VDU (or, for rules, a placement group), an unknown rule scope, a
    /// missing `descriptor_id`, no flavour at all, and a broken `BaseHOT/<flavourId>/` folder.
    pub fn from_files(source: &str, files: BTreeMap<String, Vec<u8>>) -> Result<VnfPackage> {
        let files = normalize_paths(source, files)?;
        read::read_package(source, &files)
    }
}

/// Strips `./` prefixes and rejects paths that leave the package root.
fn normalize_paths(
    source: &str,
    files: BTreeMap<String, Vec<u8>>,
) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for (path, bytes) in files {
        let norm = tosca::normalize(&path).ok_or_else(|| {
            Error::invalid(
                Location::file(source),
                format!("file path `{path}` leaves the package root or is empty"),
            )
        })?;
        out.insert(norm, bytes);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{FlavorId, VduId};

    const META: &str = "TOSCA-Meta-File-Version: 1.0\nEntry-Definitions: Definitions/top.yaml\n";

    const TOP: &str = r#"
tosca_definitions_version: tosca_simple_yaml_1_2
imports:
  - https://forge.etsi.org/rep/nfv/SOL001/raw/v2.6.1/etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
  - types.yaml
  - df.yaml
topology_template:
  node_templates:
    VNF:
      type: acme.VNF
      properties:
        flavour_id: { get_input: selected_flavour }
        descriptor_id: from-top
        provider: Acme
"#;

    const TYPES: &str = r#"
node_types:
  acme.BaseVNF:
    derived_from: tosca.nodes.nfv.VNF
    properties:
      software_version:
        type: string
        default: '2.0'
  acme.VNF:
    derived_from: acme.BaseVNF
    properties:
      descriptor_id:
        type: string
        constraints: [ valid_values: [ from-types ] ]
        default: ignored-default
      descriptor_version:
        type: string
        default: 1.5
      product_name:
        type: string
        default: Widget
      vnfm_info:
        type: list
        entry_schema:
          type: string
          constraints: [ valid_values: [ Tacker, vnfm ] ]
  acme.Vdu:
    derived_from: tosca.nodes.nfv.Vdu.Compute
"#;

    const DF: &str = r#"
imports:
  - etsi_nfv_sol001_vnfd_types.yaml
  - types.yaml
topology_template:
  substitution_mappings:
    node_type: acme.VNF
    properties:
      flavour_id: simple
    requirements:
      virtual_link_external1: [ VDU1_CP1, virtual_link ]
  node_templates:
    VNF:
      type: acme.VNF
      properties:
        flavour_description: A simple flavour
      interfaces:
        Vnflcm:
          instantiate_start:
            implementation: script
          instantiate_end: []
          scale_end: script
      artifacts:
        script:
          type: tosca.artifacts.Implementation.Python
          file: ../Scripts/s.py
    VDU1:
      type: tosca.nodes.nfv.Vdu.Compute
      properties:
        name: VDU1
        description: first
        vdu_profile:
          min_number_of_instances: 1
          max_number_of_instances: 3
      capabilities:
        virtual_compute:
          properties:
            requested_additional_capabilities:
              properties:
                requested_additional_capability_name: m1.big
                support_mandatory: true
            virtual_memory:
              virtual_mem_size: 4 GB
            virtual_cpu:
              num_virtual_cpu: 2
            virtual_local_storage:
              - size_of_storage: 10 GB
      requirements:
        - virtual_storage: VDU1-Storage
    VDU1-Storage:
      type: tosca.nodes.nfv.Vdu.VirtualBlockStorage
      properties:
        virtual_block_storage_data:
          size_of_storage: 3 GB
        sw_image_data:
          name: img1
    VDU2:
      type: acme.Vdu
      properties:
        vdu_profile:
          min_number_of_instances: 0
          max_number_of_instances: 2
        sw_image_data:
          name: img2
    VDU1_CP1:
      type: tosca.nodes.nfv.VduCp
      properties:
        layer_protocols: [ ipv4 ]
        order: 0
      requirements:
        - virtual_binding: VDU1
    VDU2_CP1:
      type: tosca.nodes.nfv.VduCp
      requirements:
        - virtual_binding: VDU2
        - virtual_link: VL1
    VL1:
      type: tosca.nodes.nfv.VnfVirtualLink
      properties:
        description: internal
        connectivity_type:
          layer_protocols: [ ipv4 ]
  groups:
    grp:
      type: tosca.groups.nfv.PlacementGroup
      members: [ VDU1, VDU2, VL1 ]
  policies:
    - spread:
        type: tosca.policies.nfv.AntiAffinityRule
        targets: [ grp, VDU1 ]
        properties:
          scope: zone
    - together:
        type: tosca.policies.nfv.AffinityRule
        targets: [ VDU2 ]
        properties:
          scope: nfvi_node
    - aspects:
        type: tosca.policies.nfv.ScalingAspects
        properties:
          aspects:
            VDU1_scale:
              max_scale_level: 2
              step_deltas: [ delta_1 ]
    - VDU1_delta:
        type: tosca.policies.nfv.VduScalingAspectDeltas
        properties:
          aspect: VDU1_scale
          deltas:
            delta_1:
              number_of_instances: 1
        targets: [ VDU1 ]
    - VDU1_initial:
        type: tosca.policies.nfv.VduInitialDelta
        properties:
          initial_delta:
            number_of_instances: 1
        targets: [ VDU1 ]
    - levels:
        type: tosca.policies.nfv.InstantiationLevels
        properties:
          levels:
            l1:
              description: small
              scale_info:
                VDU1_scale:
                  scale_level: 0
            l2:
              scale_info:
                VDU1_scale:
                  scale_level: 2
          default_level: l1
    - VDU2_levels:
        type: tosca.policies.nfv.VduInstantiationLevels
        properties:
          levels:
            l1:
              number_of_instances: 1
            l2:
              number_of_instances: 2
        targets: [ VDU2 ]
    - VL1_levels:
        type: tosca.policies.nfv.VirtualLinkInstantiationLevels
        properties:
          levels: {}
        targets: [ VL1 ]
"#;

    const HOT_TOP: &str =
        "heat_template_version: 2013-05-23\nresources:\n  VDU1:\n    type: VDU1.yaml\n";
    const HOT_VDU1: &str =
        "heat_template_version: 2013-05-23\nresources:\n  VDU1:\n    type: OS::Nova::Server\n";

    fn files(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        entries
            .iter()
            .map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec()))
            .collect()
    }

    fn base() -> BTreeMap<String, Vec<u8>> {
        files(&[
            ("TOSCA-Metadata/TOSCA.meta", META),
            ("Definitions/top.yaml", TOP),
            ("Definitions/types.yaml", TYPES),
            ("Definitions/df.yaml", DF),
            ("BaseHOT/simple/top.yaml", HOT_TOP),
            ("BaseHOT/simple/nested/VDU1.yaml", HOT_VDU1),
            ("Scripts/s.py", "print('hi')\n"),
        ])
    }

    /// `base()` with `from` replaced by `to` in `file`.
    fn with(file: &str, from: &str, to: &str) -> BTreeMap<String, Vec<u8>> {
        let mut f = base();
        let text = String::from_utf8(f[file].clone()).unwrap();
        assert!(text.contains(from), "fixture {file} has no {from:?}");
        f.insert(file.to_owned(), text.replacen(from, to, 1).into_bytes());
        f
    }

    fn err(files: BTreeMap<String, Vec<u8>>) -> String {
        VnfPackage::from_files("pkg", files)
            .unwrap_err()
            .to_string()
    }

    fn vdu(s: &str) -> VduId {
        VduId::new(s)
    }

    #[test]
    fn reads_descriptor_and_flavour() {
        let p = VnfPackage::from_files("pkg", base()).unwrap();
        assert_eq!(p.entry_definitions, "Definitions/top.yaml");
        assert_eq!(p.vnf_type, "acme.VNF");
        assert_eq!(p.descriptor_id, "from-top");
        assert_eq!(p.provider.as_deref(), Some("Acme"));
        // from the type: default, number read as text, inherited from the parent type
        assert_eq!(p.descriptor_version.as_deref(), Some("1.5"));
        assert_eq!(p.product_name.as_deref(), Some("Widget"));
        assert_eq!(p.software_version.as_deref(), Some("2.0"));
        assert_eq!(p.vnfm_info, vec!["Tacker", "vnfm"]);

        let f = p.flavour("simple").unwrap();
        assert!(p.flavour("other").is_none());
        assert_eq!(f.description.as_deref(), Some("A simple flavour"));
        assert_eq!(f.definitions_file, "Definitions/df.yaml");

        let v1 = f.vdu(&vdu("VDU1")).unwrap();
        assert_eq!((v1.min_instances, v1.max_instances), (1, 3));
        assert_eq!(v1.flavor, Some(FlavorId::new("m1.big")));
        let vc = v1.virtual_compute.as_ref().unwrap();
        assert_eq!(vc.num_virtual_cpu, 2);
        assert_eq!(vc.virtual_mem_size_mib, 4096);
        assert_eq!(vc.virtual_local_storage_gib, vec![10]);
        assert_eq!(v1.storages, vec!["VDU1-Storage"]);
        assert_eq!(
            v1.image.as_deref(),
            Some("img1"),
            "image of the boot storage"
        );
        assert_eq!(f.storages["VDU1-Storage"].size_gib, 3);

        // a VDU of a type derived from Vdu.Compute, image on the VDU itself
        let v2 = f.vdu(&vdu("VDU2")).unwrap();
        assert_eq!(v2.name, "VDU2");
        assert_eq!(v2.image.as_deref(), Some("img2"));
        assert!(v2.virtual_compute.is_none());

        assert_eq!(f.connection_points["VDU1_CP1"].vdu, Some(vdu("VDU1")));
        assert_eq!(f.connection_points["VDU1_CP1"].order, Some(0));
        assert_eq!(
            f.connection_points["VDU2_CP1"].virtual_link.as_deref(),
            Some("VL1")
        );
        assert_eq!(f.virtual_links["VL1"].layer_protocols, vec!["ipv4"]);
        assert_eq!(f.external_links["virtual_link_external1"], "VDU1_CP1");
        assert_eq!(
            f.placement_groups["grp"].members,
            vec!["VDU1", "VDU2", "VL1"]
        );

        assert_eq!(f.lcm_operations.len(), 3);
        let start = &f.lcm_operations["instantiate_start"];
        assert_eq!(start.implementation.as_deref(), Some("script"));
        assert_eq!(start.artifact_file.as_deref(), Some("../Scripts/s.py"));
        assert_eq!(f.lcm_operations["instantiate_end"].implementation, None);
        assert_eq!(
            f.lcm_operations["scale_end"].artifact_file.as_deref(),
            Some("../Scripts/s.py")
        );
    }

    #[test]
    fn rules_are_expanded_to_vdus() {
        let p = VnfPackage::from_files("pkg", base()).unwrap();
        let f = p.flavour("simple").unwrap();
        assert_eq!(f.rules.len(), 2);
        let spread = &f.rules[0];
        assert_eq!(spread.kind, RuleKind::AntiAffinity);
        assert_eq!(spread.scope, RuleScope::Zone);
        assert_eq!(spread.targets, vec!["grp", "VDU1"]);
        // group members that are VDUs, without the duplicate VDU1 and without the VL
        assert_eq!(spread.vdus, vec![vdu("VDU1"), vdu("VDU2")]);
        let names = |v: &str| -> Vec<String> {
            f.rules_for(&vdu(v))
                .iter()
                .map(|r| r.name.clone())
                .collect()
        };
        assert_eq!(names("VDU1"), vec!["spread"]);
        assert_eq!(names("VDU2"), vec!["spread", "together"]);
        assert!(names("VDU9").is_empty());
        assert_eq!(f.rules[1].kind, RuleKind::Affinity);
        assert_eq!(f.rules[1].scope, RuleScope::NfviNode);
    }

    #[test]
    fn scaling_and_levels() {
        let p = VnfPackage::from_files("pkg", base()).unwrap();
        let f = p.flavour("simple").unwrap();
        let a = &f.scaling_aspects["VDU1_scale"];
        assert_eq!(a.name, "VDU1_scale", "name defaults to the id");
        assert_eq!(a.max_scale_level, 2);
        assert_eq!(a.step_deltas, vec!["delta_1"]);
        assert_eq!(f.aspect_delta("VDU1_scale", &vdu("VDU1")), Some(1));
        assert_eq!(f.aspect_delta("VDU1_scale", &vdu("VDU2")), None);
        assert_eq!(f.aspect_delta("nope", &vdu("VDU1")), None);
        // initial delta for VDU1, default level for VDU2
        assert_eq!(f.initial_instances(&vdu("VDU1")), Some(1));
        assert_eq!(f.initial_instances(&vdu("VDU2")), Some(1));
        assert_eq!(f.initial_instances(&vdu("VDU9")), None);
        let il = f.instantiation_levels.as_ref().unwrap();
        assert_eq!(il.default_level.as_deref(), Some("l1"));
        assert_eq!(il.levels["l2"].scale_info["VDU1_scale"], 2);
        assert_eq!(il.levels["l1"].description.as_deref(), Some("small"));
        assert_eq!(f.vdu_instantiation_levels[0].levels["l2"], 2);

        // the default level decides when there is no initial delta
        let p = VnfPackage::from_files(
            "pkg",
            with(
                "Definitions/df.yaml",
                "default_level: l1",
                "default_level: l2",
            ),
        )
        .unwrap();
        assert_eq!(
            p.flavour("simple").unwrap().initial_instances(&vdu("VDU2")),
            Some(2)
        );
    }

    #[test]
    fn base_hot_keys_nested_files_by_path_and_bare_name() {
        let p = VnfPackage::from_files("pkg", base()).unwrap();
        let hot = p.base_hot("simple").unwrap();
        assert_eq!(hot.template, HOT_TOP);
        assert_eq!(hot.files["nested/VDU1.yaml"], HOT_VDU1);
        assert_eq!(hot.files["VDU1.yaml"], HOT_VDU1);
        assert_eq!(hot.files.len(), 2);
        assert_eq!(p.flavour("simple").unwrap().base_hot(), Some(hot));
        let e = p.base_hot("gold").unwrap_err().to_string();
        assert!(
            e.contains("no deployment flavour `gold`: the package has simple"),
            "{e}"
        );
    }

    #[test]
    fn missing_base_hot_is_an_error_only_when_asked_for() {
        let mut f = base();
        f.retain(|k, _| !k.starts_with("BaseHOT/"));
        let p = VnfPackage::from_files("pkg", f).unwrap();
        assert!(p.flavour("simple").unwrap().base_hot().is_none());
        let e = p.base_hot("simple").unwrap_err().to_string();
        assert_eq!(
            e,
            "pkg/BaseHOT/simple: flavour `simple` has no Heat template: expected a folder \
             BaseHOT/simple/ with one top-level .yaml template"
        );
    }

    #[test]
    fn broken_base_hot_is_an_error() {
        let mut f = base();
        f.insert(
            "BaseHOT/simple/other.yaml".into(),
            HOT_VDU1.as_bytes().to_vec(),
        );
        let e = err(f);
        assert!(
            e.contains("pkg/BaseHOT/simple: 2 top-level Heat templates (other.yaml, top.yaml)"),
            "{e}"
        );

        let mut f = base();
        f.remove("BaseHOT/simple/nested/VDU1.yaml");
        f.insert(
            "BaseHOT/simple/nested/x.yaml".into(),
            HOT_VDU1.as_bytes().to_vec(),
        );
        let e = err(f);
        assert!(
            e.contains(
                "pkg/BaseHOT/simple/top.yaml: resources.VDU1.type: resource type `VDU1.yaml`"
            ),
            "{e}"
        );

        let e = err(with(
            "BaseHOT/simple/nested/VDU1.yaml",
            "resources:",
            "resources: [",
        ));
        assert!(
            e.starts_with("pkg/BaseHOT/simple/nested/VDU1.yaml:line "),
            "{e}"
        );
    }

    #[test]
    fn entry_without_tosca_meta() {
        let mut f = base();
        f.remove("TOSCA-Metadata/TOSCA.meta");
        let p = VnfPackage::from_files("pkg", f.clone()).unwrap();
        assert_eq!(p.entry_definitions, "Definitions/top.yaml");

        // two files with a topology_template that nobody imports
        f.insert(
            "Definitions/other.yaml".into(),
            b"topology_template: {}\n".to_vec(),
        );
        let e = err(f.clone());
        assert!(e.contains("ambiguous entry VNFD"), "{e}");
        assert!(
            e.contains("(Definitions/other.yaml, Definitions/top.yaml)"),
            "{e}"
        );

        f.remove("Definitions/other.yaml");
        f.remove("Definitions/top.yaml");
        // now the df is the entry: the descriptor comes from the types
        let p = VnfPackage::from_files("pkg", f.clone()).unwrap();
        assert_eq!(p.entry_definitions, "Definitions/df.yaml");
        assert_eq!(
            p.descriptor_id, "from-types",
            "single valid_values wins over default"
        );

        f.remove("Definitions/df.yaml");
        let e = err(f);
        assert!(e.starts_with("pkg: no entry VNFD"), "{e}");
    }

    #[test]
    fn tosca_meta_errors() {
        let e = err(with(
            "TOSCA-Metadata/TOSCA.meta",
            "Entry-Definitions",
            "Entry-Definition",
        ));
        assert_eq!(
            e,
            "pkg/TOSCA-Metadata/TOSCA.meta: no `Entry-Definitions` line: expected \
             `Entry-Definitions: Definitions/<top>.yaml`"
        );
        let e = err(with("TOSCA-Metadata/TOSCA.meta", "top.yaml", "nope.yaml"));
        assert_eq!(
            e,
            "pkg/TOSCA-Metadata/TOSCA.meta:line 2: Entry-Definitions names \
             `Definitions/nope.yaml`, which is not in the package"
        );
    }

    #[test]
    fn imports_resolve_relative_and_missing_ones_are_errors() {
        let e = err(with(
            "Definitions/top.yaml",
            "- types.yaml",
            "- lib/types.yaml",
        ));
        assert_eq!(
            e,
            "pkg/Definitions/top.yaml: imports[2]: import `lib/types.yaml` is missing: \
             `Definitions/lib/types.yaml` is not in the package"
        );
        // the types in a subfolder, imported relatively from there
        let mut f = with("Definitions/top.yaml", "- types.yaml", "- lib/types.yaml");
        let types = f.remove("Definitions/types.yaml").unwrap();
        f.insert("Definitions/lib/types.yaml".into(), types);
        let df = String::from_utf8(f["Definitions/df.yaml"].clone()).unwrap();
        f.insert(
            "Definitions/df.yaml".into(),
            df.replace("- types.yaml", "- ./lib/../lib/types.yaml")
                .into_bytes(),
        );
        let p = VnfPackage::from_files("pkg", f).unwrap();
        assert_eq!(p.product_name.as_deref(), Some("Widget"));

        let e = err(with(
            "Definitions/df.yaml",
            "- types.yaml",
            "- https://example.com/t.yaml",
        ));
        assert!(
            e.starts_with(
                "pkg/Definitions/df.yaml: imports[1]: import `https://example.com/t.yaml` is a URL"
            ),
            "{e}"
        );
        let e = err(with(
            "Definitions/df.yaml",
            "- types.yaml",
            "- ../../t.yaml",
        ));
        assert!(e.contains("leaves the package root"), "{e}");
        // mapping forms of an import
        let p = VnfPackage::from_files(
            "pkg",
            with("Definitions/df.yaml", "- types.yaml", "- file: types.yaml"),
        );
        assert!(p.is_ok());
    }

    #[test]
    fn malformed_yaml_names_file_and_line() {
        let e = err(with("Definitions/df.yaml", "    VDU1:\n", "    VDU1: [\n"));
        assert!(e.starts_with("pkg/Definitions/df.yaml:line "), "{e}");
        assert!(e.contains("malformed YAML"), "{e}");
    }

    #[test]
    fn wrong_shapes_name_field_value_and_expectation() {
        let e = err(with(
            "Definitions/df.yaml",
            "min_number_of_instances: 1",
            "min_number_of_instances: five",
        ));
        assert_eq!(
            e,
            "pkg/Definitions/df.yaml: topology_template.node_templates.VDU1.properties.vdu_profile.\
             min_number_of_instances: expected a non-negative integer, found `\"five\"`"
        );
        let e = err(with(
            "Definitions/df.yaml",
            "min_number_of_instances: 0",
            "min_number_of_instances: -1",
        ));
        assert!(e.contains("VDU2.properties.vdu_profile.min_number_of_instances: expected a non-negative integer, found `-1`"), "{e}");
        let e = err(with(
            "Definitions/df.yaml",
            "          min_number_of_instances: 1\n",
            "",
        ));
        assert!(e.ends_with("vdu_profile.min_number_of_instances: missing required field `min_number_of_instances`"), "{e}");
        let e = err(with(
            "Definitions/df.yaml",
            "members: [ VDU1, VDU2, VL1 ]",
            "members: VDU1",
        ));
        assert!(
            e.contains("topology_template.groups.grp.members: expected a list, found `\"VDU1\"`"),
            "{e}"
        );
        let e = err(with(
            "Definitions/df.yaml",
            "members: [ VDU1, VDU2, VL1 ]",
            "members: [ VDU1, VDU7 ]",
        ));
        assert!(
            e.contains("member `VDU7` is neither a VDU nor a virtual link"),
            "{e}"
        );
    }

    #[test]
    fn unknown_size_unit() {
        let e = err(with(
            "Definitions/df.yaml",
            "virtual_mem_size: 4 GB",
            "virtual_mem_size: 4 GiGa",
        ));
        assert!(e.contains("VDU1.capabilities.virtual_compute.properties.virtual_memory.virtual_mem_size: unknown size unit `GiGa` in `4 GiGa`"), "{e}");
        let e = err(with(
            "Definitions/df.yaml",
            "size_of_storage: 3 GB",
            "size_of_storage: 3",
        ));
        assert!(
            e.contains("virtual_block_storage_data.size_of_storage: expected a string, found `3`"),
            "{e}"
        );
    }

    #[test]
    fn min_above_max() {
        let e = err(with(
            "Definitions/df.yaml",
            "max_number_of_instances: 3",
            "max_number_of_instances: 0",
        ));
        assert_eq!(
            e,
            "pkg/Definitions/df.yaml: topology_template.node_templates.VDU1.properties.vdu_profile: \
             min_number_of_instances 1 is greater than max_number_of_instances 0"
        );
    }

    #[test]
    fn bad_rule_targets_and_scopes() {
        let e = err(with(
            "Definitions/df.yaml",
            "targets: [ grp, VDU1 ]",
            "targets: [ grp, VL1 ]",
        ));
        assert!(e.contains("topology_template.policies[0].spread.targets: target `VL1` is neither a VDU nor a PlacementGroup of flavour `simple` (VDUs: VDU1, VDU2; placement groups: grp)"), "{e}");
        let e = err(with("Definitions/df.yaml", "scope: zone", "scope: region"));
        assert!(e.contains("policies[0].spread.properties.scope: unknown scope `region`: expected one of nfvi_node, zone, zone_group, nfvi_pop, cis_node"), "{e}");
        let p = VnfPackage::from_files(
            "pkg",
            with("Definitions/df.yaml", "scope: zone", "scope: cis_node"),
        )
        .unwrap();
        assert_eq!(
            p.flavour("simple").unwrap().rules[0].scope,
            RuleScope::CisNode
        );
    }

    #[test]
    fn policy_consistency_errors() {
        let e = err(with(
            "Definitions/df.yaml",
            "        targets: [ VDU1 ]\n    - VDU1_initial",
            "        targets: [ VDU3 ]\n    - VDU1_initial",
        ));
        assert!(
            e.contains("VDU1_delta.targets: VduScalingAspectDeltas target `VDU3` is not a VDU"),
            "{e}"
        );
        let e = err(with(
            "Definitions/df.yaml",
            "aspect: VDU1_scale",
            "aspect: VDU9_scale",
        ));
        assert!(e.contains("aspect `VDU9_scale` is not defined by a ScalingAspects policy: expected one of VDU1_scale"), "{e}");
        let e = err(with(
            "Definitions/df.yaml",
            "            delta_1:\n              number_of_instances: 1\n        targets: [ VDU1 ]",
            "            delta_2:\n              number_of_instances: 1\n        targets: [ VDU1 ]",
        ));
        assert!(e.contains("aspect `VDU1_scale` steps by delta `delta_1`, which is not defined here (deltas: delta_2)"), "{e}");
        let e = err(with(
            "Definitions/df.yaml",
            " scale_level: 2",
            " scale_level: 3",
        ));
        assert!(
            e.contains("scale_level 3 is above max_scale_level 2 of aspect `VDU1_scale`"),
            "{e}"
        );
        let e = err(with(
            "Definitions/df.yaml",
            "default_level: l1",
            "default_level: l9",
        ));
        assert!(
            e.contains("default_level `l9` is not one of the levels (l1, l2)"),
            "{e}"
        );
        let e = err(with(
            "Definitions/df.yaml",
            "            l2:\n              number_of_instances: 2",
            "            l3:\n              number_of_instances: 2",
        ));
        assert!(
            e.contains("level `l3` is not defined by InstantiationLevels policy `levels`"),
            "{e}"
        );
        let e = err(with(
            "Definitions/df.yaml",
            "l2:\n              number_of_instances: 2",
            "l2:\n              number_of_instances: 5",
        ));
        assert!(
            e.contains("5 instances of `VDU2` is outside its vdu_profile (0..=2)"),
            "{e}"
        );
        let e = err(with(
            "Definitions/df.yaml",
            "virtual_binding: VDU2",
            "virtual_binding: VL1",
        ));
        assert!(e.contains("virtual_binding `VL1` is not a VDU"), "{e}");
        let e = err(with(
            "Definitions/df.yaml",
            "virtual_storage: VDU1-Storage",
            "virtual_storage: Disk",
        ));
        assert!(e.contains("VDU1.requirements[0].virtual_storage: virtual_storage `Disk` is not a tosca.nodes.nfv.Vdu.VirtualBlockStorage"), "{e}");
    }

    #[test]
    fn max_scale_level_beyond_max_number_of_instances_is_refused() {
        // VDU1: 1 initial + 2 levels x 1 = 3 = max_number_of_instances: loads (the base).
        assert!(VnfPackage::from_files("pkg", base()).is_ok());
        // 1 + 3 x 1 = 4 > 3.
        let e = err(with(
            "Definitions/df.yaml",
            "max_scale_level: 2",
            "max_scale_level: 3",
        ));
        assert!(e.contains("Definitions/df.yaml"), "{e}");
        assert!(
            e.contains(
                "aspect `VDU1_scale`: 1 initial instances of VDU `VDU1` (at scale level 0) + 3 \
                 more level(s) up to max_scale_level 3 x delta 1 = 4 instances, above its \
                 max_number_of_instances 3: expected max_scale_level at most 2"
            ),
            "{e}"
        );
        // The level of issue 14 row 4, with no overflow: 1 + 4e9 x 2.
        let mut files = with(
            "Definitions/df.yaml",
            "max_scale_level: 2",
            "max_scale_level: 4000000000",
        );
        let df = String::from_utf8(files["Definitions/df.yaml"].clone())
            .unwrap()
            .replace(
                "            delta_1:\n              number_of_instances: 1",
                "            delta_1:\n              number_of_instances: 2",
            );
        files.insert("Definitions/df.yaml".into(), df.into_bytes());
        let e = err(files);
        assert!(e.contains("= 8000000001 instances"), "{e}");
        assert!(e.contains("expected max_scale_level at most 1"), "{e}");
    }

    #[test]
    fn descriptor_and_flavour_must_exist() {
        let mut f = with(
            "Definitions/top.yaml",
            "descriptor_id: from-top",
            "descriptor_id: { get_input: id }",
        );
        let types = String::from_utf8(f["Definitions/types.yaml"].clone()).unwrap();
        f.insert(
            "Definitions/types.yaml".into(),
            types
                .replace("constraints: [ valid_values: [ from-types ] ]", "")
                .replace("default: ignored-default", "")
                .into_bytes(),
        );
        let e = err(f);
        assert!(
            e.starts_with("pkg/Definitions/top.yaml: no descriptor_id"),
            "{e}"
        );
        assert!(e.contains("node type `acme.VNF`"), "{e}");

        let e = err(with(
            "Definitions/df.yaml",
            "flavour_id: simple",
            "flavour: simple",
        ));
        assert!(e.contains("no deployment flavour"), "{e}");
    }

    #[test]
    fn paths_are_normalized_and_checked() {
        let mut f = base();
        let df = f.remove("Definitions/df.yaml").unwrap();
        f.insert("./Definitions/df.yaml".into(), df);
        assert!(VnfPackage::from_files("pkg", f.clone()).is_ok());
        f.insert("../evil".into(), vec![]);
        assert!(err(f).contains("file path `../evil` leaves the package root"));
    }

    #[test]
    fn serializes_with_sol001_names() {
        let p = VnfPackage::from_files("pkg", base()).unwrap();
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(j["descriptor_id"], "from-top");
        let rule = &j["flavours"]["simple"]["rules"][0];
        assert_eq!(rule["kind"], "anti_affinity");
        assert_eq!(rule["scope"], "zone");
        assert_eq!(j["flavours"]["simple"]["vdus"]["VDU1"]["flavor"], "m1.big");
        assert_eq!(
            j["flavours"]["simple"]["base_hot"]["files"]["VDU1.yaml"],
            HOT_VDU1
        );
    }

    #[test]
    fn never_panics_on_mangled_input() {
        // Every file truncated at every 7th byte: always Ok or Err, never a panic.
        for (name, content) in base() {
            for cut in (0..content.len()).step_by(7) {
                let mut f = base();
                f.insert(name.clone(), content[..cut].to_vec());
                let _ = VnfPackage::from_files("pkg", f);
            }
        }
    }
}
