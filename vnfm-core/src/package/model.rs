//! What a package is: the descriptor's identity, its deployment flavours and what they are
//! made of (VDUs, storage, connection points, virtual links, placement rules, scaling aspects,
//! instantiation levels), with the accessors the lifecycle asks them through. Everything the
//! readers of the package (`read`, `flavour`, `hot`, `fs`) build; nothing here reads.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::driver::TemplateBundle;
use crate::error::{Error, Location};
use crate::id::{FlavorId, VduId};
use crate::Result;

/// A VNF package: the descriptor's identity and its deployment flavours.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct VnfPackage {
    /// The name the package was read from (a path, or a name given by the caller).
    pub source: String,
    /// The entry VNFD file, relative to the package root (`Definitions/demo_top.vnfd.yaml`).
    pub entry_definitions: String,
    /// The VNF node type (`company.provider.VNF`).
    pub vnf_type: String,
    /// `descriptor_id` (the VNFD id).
    pub descriptor_id: String,
    /// `descriptor_version`.
    pub descriptor_version: Option<String>,
    /// `provider`.
    pub provider: Option<String>,
    /// `product_name`.
    pub product_name: Option<String>,
    /// `software_version`.
    pub software_version: Option<String>,
    /// `vnfm_info`.
    pub vnfm_info: Vec<String>,
    /// Deployment flavours by `flavour_id`.
    pub flavours: BTreeMap<String, Flavour>,
    /// The Kubernetes manifests of a CNF package by path (`Files/kubernetes/deployment.yaml`):
    /// the `.yaml` / `.yml` files directly under [`KUBERNETES_DIR`], as text (see
    /// [`VnfPackage::is_cnf`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub kubernetes: BTreeMap<String, String>,
}

/// The folder of a CNF package's Kubernetes manifests (Tacker v2's layout): the one part of
/// `Files/` the package reader reads.
pub const KUBERNETES_DIR: &str = "Files/kubernetes";

/// Whether `path` (relative to the package root, `/`-separated) is a Kubernetes manifest the
/// reader keeps: a `.yaml` or `.yml` file directly under [`KUBERNETES_DIR`].
pub fn is_kubernetes_file(path: &str) -> bool {
    path.strip_prefix(KUBERNETES_DIR)
        .and_then(|r| r.strip_prefix('/'))
        .is_some_and(|name| {
            !name.is_empty()
                && !name.contains('/')
                && (name.ends_with(".yaml") || name.ends_with(".yml"))
        })
}

/// One deployment flavour (one `Definitions/` file with `substitution_mappings`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Flavour {
    /// `flavour_id`.
    pub id: String,
    /// `flavour_description` of the flavour's VNF node template.
    pub description: Option<String>,
    /// The file that defines the flavour, relative to the package root.
    pub definitions_file: String,
    /// VDUs (`tosca.nodes.nfv.Vdu.Compute`) by id.
    pub vdus: BTreeMap<VduId, Vdu>,
    /// Virtual block storages (`tosca.nodes.nfv.Vdu.VirtualBlockStorage`) by node name.
    pub storages: BTreeMap<String, VirtualStorage>,
    /// Connection points (`tosca.nodes.nfv.VduCp`) by node name.
    pub connection_points: BTreeMap<String, ConnectionPoint>,
    /// Internal virtual links (`tosca.nodes.nfv.VnfVirtualLink`) by node name.
    pub virtual_links: BTreeMap<String, VirtualLink>,
    /// External virtual link requirements of `substitution_mappings`: requirement name
    /// (`virtual_link_external1_1`) to the connection point that carries it.
    pub external_links: BTreeMap<String, String>,
    /// `tosca.groups.nfv.PlacementGroup` groups by name.
    pub placement_groups: BTreeMap<String, PlacementGroup>,
    /// Affinity and anti-affinity rules, in document order.
    pub rules: Vec<PlacementRule>,
    /// `ScalingAspects` by aspect id.
    pub scaling_aspects: BTreeMap<String, ScalingAspect>,
    /// `VduScalingAspectDeltas` policies, in document order.
    pub aspect_deltas: Vec<VduScalingAspectDeltas>,
    /// `VduInitialDelta` policies, in document order.
    pub initial_deltas: Vec<VduInitialDelta>,
    /// The `InstantiationLevels` policy, when there is one.
    pub instantiation_levels: Option<InstantiationLevels>,
    /// `VduInstantiationLevels` policies, in document order.
    pub vdu_instantiation_levels: Vec<VduInstantiationLevels>,
    /// Operations of the `Vnflcm` interface of the flavour's VNF node template, by name
    /// (`instantiate_start`, `scale_end`, ...).
    pub lcm_operations: BTreeMap<String, LcmOperation>,
    /// The flavour's `BaseHOT/<flavourId>/`, when the package has it.
    pub base_hot: Option<TemplateBundle>,
}

/// A VDU (`tosca.nodes.nfv.Vdu.Compute`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Vdu {
    /// Node template name (`VDU1`).
    pub id: VduId,
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: Option<String>,
    /// `vdu_profile.min_number_of_instances`.
    pub min_instances: u32,
    /// `vdu_profile.max_number_of_instances`.
    pub max_instances: u32,
    /// The `virtual_compute` capability, when given.
    pub virtual_compute: Option<VirtualCompute>,
    /// The Nova flavor: `requested_additional_capabilities.*.requested_additional_capability_name`.
    pub flavor: Option<FlavorId>,
    /// The virtual storages the VDU requires (`requirements: - virtual_storage: ...`), in order;
    /// the first is the boot storage.
    pub storages: Vec<String>,
    /// The software image name: `sw_image_data.name` of the VDU, else of its boot storage.
    pub image: Option<String>,
}

/// The `virtual_compute` capability of a VDU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VirtualCompute {
    /// `virtual_cpu.num_virtual_cpu`.
    pub num_virtual_cpu: u32,
    /// `virtual_memory.virtual_mem_size` in MiB.
    pub virtual_mem_size_mib: u64,
    /// `virtual_local_storage[*].size_of_storage` in GiB.
    pub virtual_local_storage_gib: Vec<u64>,
}

/// A virtual block storage (`tosca.nodes.nfv.Vdu.VirtualBlockStorage`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VirtualStorage {
    /// Node template name (`VDU1-VirtualStorage`).
    pub id: String,
    /// `virtual_block_storage_data.size_of_storage` in GiB.
    pub size_gib: u64,
    /// `sw_image_data.name`.
    pub image: Option<String>,
}

/// A connection point (`tosca.nodes.nfv.VduCp`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ConnectionPoint {
    /// Node template name (`VDU1_CP1`).
    pub id: String,
    /// The VDU it binds to (`virtual_binding`).
    pub vdu: Option<VduId>,
    /// The internal virtual link it attaches to (`virtual_link`), if any.
    pub virtual_link: Option<String>,
    /// `order`.
    pub order: Option<u32>,
    /// `layer_protocols`.
    pub layer_protocols: Vec<String>,
}

/// An internal virtual link (`tosca.nodes.nfv.VnfVirtualLink`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VirtualLink {
    /// Node template name (`internalVL1`).
    pub id: String,
    /// `description`.
    pub description: Option<String>,
    /// `connectivity_type.layer_protocols`.
    pub layer_protocols: Vec<String>,
}

/// A `tosca.groups.nfv.PlacementGroup`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PlacementGroup {
    /// Group name.
    pub id: String,
    /// `members` as written (VDUs or virtual links).
    pub members: Vec<String>,
}

/// Whether a rule keeps its targets together or apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// `tosca.policies.nfv.AffinityRule`.
    Affinity,
    /// `tosca.policies.nfv.AntiAffinityRule`.
    AntiAffinity,
}

/// The `scope` of an affinity or anti-affinity rule (SOL001 values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleScope {
    /// `nfvi_node`: compute host.
    NfviNode,
    /// `zone`: availability zone.
    Zone,
    /// `zone_group`.
    ZoneGroup,
    /// `nfvi_pop`.
    NfviPop,
    /// `cis_node`: container infrastructure node.
    CisNode,
}

impl RuleScope {
    /// The SOL001 spelling (`nfvi_node`, `zone`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            RuleScope::NfviNode => "nfvi_node",
            RuleScope::Zone => "zone",
            RuleScope::ZoneGroup => "zone_group",
            RuleScope::NfviPop => "nfvi_pop",
            RuleScope::CisNode => "cis_node",
        }
    }

    /// Parses the SOL001 spelling.
    pub fn parse(s: &str) -> Option<Self> {
        [
            RuleScope::NfviNode,
            RuleScope::Zone,
            RuleScope::ZoneGroup,
            RuleScope::NfviPop,
            RuleScope::CisNode,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// An `AffinityRule` or `AntiAffinityRule` policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PlacementRule {
    /// Policy name.
    pub name: String,
    /// Affinity or anti-affinity.
    pub kind: RuleKind,
    /// `properties.scope`.
    pub scope: RuleScope,
    /// `targets` as written (VDUs and placement groups).
    pub targets: Vec<String>,
    /// The targets expanded to VDU ids (groups replaced by their VDU members), without
    /// duplicates, in order of first appearance.
    pub vdus: Vec<VduId>,
}

/// One aspect of the `ScalingAspects` policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ScalingAspect {
    /// Aspect id (`VDU1_scale`).
    pub id: String,
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: Option<String>,
    /// `max_scale_level`.
    pub max_scale_level: u32,
    /// `step_deltas` (delta ids, one per step).
    pub step_deltas: Vec<String>,
}

/// A `VduScalingAspectDeltas` policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VduScalingAspectDeltas {
    /// Policy name.
    pub name: String,
    /// `aspect`.
    pub aspect: String,
    /// `deltas`: delta id to `number_of_instances`.
    pub deltas: BTreeMap<String, u32>,
    /// `targets` (VDUs).
    pub targets: Vec<VduId>,
}

/// A `VduInitialDelta` policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VduInitialDelta {
    /// Policy name.
    pub name: String,
    /// `initial_delta.number_of_instances`.
    pub number_of_instances: u32,
    /// `targets` (VDUs).
    pub targets: Vec<VduId>,
}

/// The `InstantiationLevels` policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct InstantiationLevels {
    /// Policy name.
    pub name: String,
    /// `levels` by level id.
    pub levels: BTreeMap<String, InstantiationLevel>,
    /// `default_level`.
    pub default_level: Option<String>,
}

/// One level of [`InstantiationLevels`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct InstantiationLevel {
    /// `description`.
    pub description: Option<String>,
    /// `scale_info`: aspect id to `scale_level`.
    pub scale_info: BTreeMap<String, u32>,
}

/// A `VduInstantiationLevels` policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VduInstantiationLevels {
    /// Policy name.
    pub name: String,
    /// `levels`: level id to `number_of_instances`.
    pub levels: BTreeMap<String, u32>,
    /// `targets` (VDUs).
    pub targets: Vec<VduId>,
}

/// One operation of the `Vnflcm` interface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LcmOperation {
    /// `implementation`: an artifact name (or a file), when given.
    pub implementation: Option<String>,
    /// The `file` of the artifact named by `implementation`, when the node defines it.
    pub artifact_file: Option<String>,
}

impl VnfPackage {
    /// The flavour `id`.
    pub fn flavour(&self, id: &str) -> Option<&Flavour> {
        self.flavours.get(id)
    }

    /// Whether flavour `id` is a CNF: its VDUs are Kubernetes objects of the package
    /// (manifests under [`KUBERNETES_DIR`]) and it has no `BaseHOT/<id>/`.
    pub fn is_cnf(&self, id: &str) -> bool {
        !self.kubernetes.is_empty() && self.flavour(id).is_some_and(|f| f.base_hot.is_none())
    }

    /// The Heat templates of flavour `id` (see [`Flavour::base_hot`]).
    ///
    /// # Errors
    /// When the package has no flavour `id`, or the flavour has no `BaseHOT/<id>/` folder.
    pub fn base_hot(&self, id: &str) -> Result<&TemplateBundle> {
        let flavour = self.flavour(id).ok_or_else(|| {
            Error::invalid(
                Location::file(&self.source),
                format!(
                    "no deployment flavour `{id}`: the package has {}",
                    list_or_none(self.flavours.keys())
                ),
            )
        })?;
        flavour.base_hot.as_ref().ok_or_else(|| {
            Error::invalid(
                Location::file(PathBuf::from(&self.source).join(format!("BaseHOT/{id}"))),
                format!(
                    "flavour `{id}` has no Heat template: expected a folder BaseHOT/{id}/ with one \
                     top-level .yaml template"
                ),
            )
        })
    }
}

impl Flavour {
    /// A flavour `id` that declares nothing: no VDU, so every VDU's demand is zero
    /// (what a grant for a VNF whose VNFD is unknown counts each VNFC as).
    pub fn empty(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            description: None,
            definitions_file: String::new(),
            vdus: BTreeMap::new(),
            storages: BTreeMap::new(),
            connection_points: BTreeMap::new(),
            virtual_links: BTreeMap::new(),
            external_links: BTreeMap::new(),
            placement_groups: BTreeMap::new(),
            rules: Vec::new(),
            scaling_aspects: BTreeMap::new(),
            aspect_deltas: Vec::new(),
            initial_deltas: Vec::new(),
            instantiation_levels: None,
            vdu_instantiation_levels: Vec::new(),
            lcm_operations: BTreeMap::new(),
            base_hot: None,
        }
    }

    /// The VDU `id`.
    pub fn vdu(&self, id: &VduId) -> Option<&Vdu> {
        self.vdus.get(id)
    }

    /// The affinity and anti-affinity rules that apply to VDU `id` (directly or through a
    /// placement group), in document order.
    pub fn rules_for(&self, id: &VduId) -> Vec<&PlacementRule> {
        self.rules.iter().filter(|r| r.vdus.contains(id)).collect()
    }

    /// How many instances of VDU `id` instantiation creates: the `VduInitialDelta` that
    /// targets it, else its count at the default instantiation level
    /// (`VduInstantiationLevels`), else `None` when the VNFD says neither.
    pub fn initial_instances(&self, id: &VduId) -> Option<u32> {
        if let Some(d) = self.initial_deltas.iter().find(|d| d.targets.contains(id)) {
            return Some(d.number_of_instances);
        }
        let default = self.instantiation_levels.as_ref()?.default_level.as_ref()?;
        self.vdu_instantiation_levels
            .iter()
            .find(|l| l.targets.contains(id))
            .and_then(|l| l.levels.get(default).copied())
    }

    /// How many instances of VDU `id` instantiation at `level` creates: its
    /// `VduInstantiationLevels` count at that level, else as [`Flavour::initial_instances`].
    pub fn instances_at_level(&self, id: &VduId, level: Option<&str>) -> Option<u32> {
        let at_level = level.and_then(|level| {
            self.vdu_instantiation_levels
                .iter()
                .find(|l| l.targets.contains(id))
                .and_then(|l| l.levels.get(level).copied())
        });
        at_level.or_else(|| self.initial_instances(id))
    }

    /// The number of instances of VDU `vdu` that one step of aspect `aspect` adds or removes.
    /// Like Tacker, deltas are taken as uniform: the aspect's first step delta is looked up in
    /// the `VduScalingAspectDeltas` of that aspect that targets the VDU. `None` when the aspect
    /// does not scale that VDU.
    pub fn aspect_delta(&self, aspect: &str, vdu: &VduId) -> Option<u32> {
        let step = self.scaling_aspects.get(aspect)?.step_deltas.first()?;
        self.aspect_deltas
            .iter()
            .filter(|d| d.aspect == aspect && d.targets.contains(vdu))
            .find_map(|d| d.deltas.get(step).copied())
    }

    /// The Heat templates of the flavour, when the package has `BaseHOT/<flavourId>/`.
    ///
    /// `template` is the one `.yaml`/`.yml` file directly in that folder. `files` holds every
    /// other file of the folder (text), keyed by its path relative to the folder
    /// (`nested/VDU1.yaml`); in addition, each file directly in `nested/` is also keyed by its
    /// bare name (`VDU1.yaml`), since HOT references nested templates that way and Heat
    /// resolves `files` by exact key. A relative-path key is never replaced by a bare-name one.
    pub fn base_hot(&self) -> Option<&TemplateBundle> {
        self.base_hot.as_ref()
    }
}

/// `a, b, c` or `none`.
pub(crate) fn list_or_none<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    let v: Vec<&str> = items.into_iter().map(String::as_str).collect();
    if v.is_empty() {
        "none".to_owned()
    } else {
        v.join(", ")
    }
}
