//! Reading one deployment flavour file.

use std::collections::{BTreeMap, BTreeSet};

use super::size;
use super::tosca::{self, Doc, Types};
use super::yaml::At;
use super::{
    hot, list_or_none, ConnectionPoint, Flavour, InstantiationLevel, InstantiationLevels,
    LcmOperation, PlacementGroup, PlacementRule, RuleKind, RuleScope, ScalingAspect, Vdu,
    VduInitialDelta, VduInstantiationLevels, VduScalingAspectDeltas, VirtualCompute, VirtualLink,
    VirtualStorage,
};
use crate::id::{FlavorId, VduId};
use crate::Result;

/// A size in bytes.
fn size_bytes(at: &At<'_>) -> Result<u64> {
    let s = at.str()?;
    size::parse_bytes(s).map_err(|m| at.err(m))
}

/// The target of a requirement: `name: node` or `name: {node: node, ...}`.
fn requirement_target(at: &At<'_>) -> Result<String> {
    if at.v.is_mapping() {
        Ok(at.req("node")?.str()?.to_owned())
    } else {
        Ok(at.str()?.to_owned())
    }
}

/// `sw_image_data.name` of a node's properties.
fn image_name(props: &Option<At<'_>>) -> Result<Option<String>> {
    let Some(props) = props else {
        return Ok(None);
    };
    match props.opt("sw_image_data")? {
        Some(img) => img.opt("name")?.map(|n| n.text()).transpose(),
        None => Ok(None),
    }
}

/// Reads the flavour `id` defined in `doc`: its node templates, substitution mappings, VNF
/// node, groups and policies, in that order (the first error met is the one returned).
pub(crate) fn parse(
    source: &str,
    files: &BTreeMap<String, Vec<u8>>,
    doc: &Doc,
    types: &Types<'_>,
    id: &str,
) -> Result<Flavour> {
    let root = doc.root();
    let tt = root.req("topology_template")?;

    let nodes = NodeTemplates::classify(&tt, types)?;
    let storages = storages(&nodes)?;
    let vdus = vdus(&nodes, &storages)?;
    let virtual_links = virtual_links(&nodes)?;
    let refs = Refs {
        flavour: id,
        vdus: &vdus,
        virtual_links: &virtual_links,
    };
    let connection_points = connection_points(&nodes, &refs)?;
    let external_links = external_links(&tt)?;
    let (description, lcm_operations) = vnf_node(doc, types)?;
    let placement_groups = placement_groups(&tt, types, &refs)?;

    let policies = Policies::collect(&tt, types)?;
    let (scaling_aspects, max_level_at) = scaling_aspects(&policies)?;
    let aspect_deltas = aspect_deltas(&policies, &scaling_aspects, &refs)?;
    let initial_deltas = initial_deltas(&policies, &refs)?;
    let instantiation_levels = instantiation_levels(&policies, &scaling_aspects)?;
    let vdu_instantiation_levels =
        vdu_instantiation_levels(&policies, instantiation_levels.as_ref(), &refs)?;
    let rules = rules(&policies, &placement_groups, &refs)?;

    let base_hot = hot::base_hot(source, files, id)?;

    let flavour = Flavour {
        id: id.to_owned(),
        description,
        definitions_file: doc.rel.clone(),
        vdus,
        storages,
        connection_points,
        virtual_links,
        external_links,
        placement_groups,
        rules,
        scaling_aspects,
        aspect_deltas,
        initial_deltas,
        instantiation_levels,
        vdu_instantiation_levels,
        lcm_operations,
        base_hot,
    };
    within_max_scale(&flavour, &max_level_at)?;
    Ok(flavour)
}

/// The node templates of a flavour whose type derives from a type the reader knows, by that
/// base type.
struct NodeTemplates<'d> {
    by_kind: BTreeMap<&'static str, Vec<(String, At<'d>)>>,
}

impl<'d> NodeTemplates<'d> {
    /// Classifies `topology_template.node_templates`.
    fn classify(tt: &At<'d>, types: &Types<'_>) -> Result<Self> {
        let mut by_kind: BTreeMap<&'static str, Vec<(String, At<'d>)>> = BTreeMap::new();
        if let Some(nodes) = tt.opt("node_templates")? {
            for (name, node) in nodes.entries()? {
                let ty = node.req("type")?.str()?;
                if let Some(kind) = types.node_kind(ty) {
                    by_kind.entry(kind).or_default().push((name, node));
                }
            }
        }
        Ok(NodeTemplates { by_kind })
    }

    /// The nodes of base type `kind`, in template order.
    fn of(&self, kind: &str) -> Vec<(String, At<'d>)> {
        self.by_kind.get(kind).cloned().unwrap_or_default()
    }
}

/// What the later sections of a flavour name: its VDUs and virtual links, read first.
struct Refs<'f> {
    /// The flavour's id, for messages.
    flavour: &'f str,
    vdus: &'f BTreeMap<VduId, Vdu>,
    virtual_links: &'f BTreeMap<String, VirtualLink>,
}

impl Refs<'_> {
    /// The VDU names, for messages.
    fn vdu_names(&self) -> String {
        list_or_none(self.vdus.keys().map(|k| &k.0))
    }

    /// The VDU targets (`targets`) of the policy at `at` (a `what` policy).
    fn vdu_targets(&self, at: &At<'_>, what: &str) -> Result<Vec<VduId>> {
        let id = self.flavour;
        let t = at.req("targets")?;
        let mut out = Vec::new();
        for name in t.str_list()? {
            if !self.vdus.contains_key(name.as_str()) {
                return Err(t.err(format!(
                    "{what} target `{name}` is not a VDU ({}) of flavour `{id}`: expected one of {}",
                    tosca::VDU_COMPUTE,
                    self.vdu_names()
                )));
            }
            out.push(VduId::new(name));
        }
        Ok(out)
    }

    /// Checks that a count `n` (written at `at`) fits the VDU profiles of the targets.
    fn within_profile(&self, at: &At<'_>, n: u32, targets: &[VduId]) -> Result<()> {
        for t in targets {
            if let Some(v) = self.vdus.get(t) {
                if n < v.min_instances || n > v.max_instances {
                    return Err(at.err(format!(
                        "{n} instances of `{t}` is outside its vdu_profile ({}..={})",
                        v.min_instances, v.max_instances
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The storages (`tosca.nodes.nfv.Vdu.VirtualBlockStorage`).
fn storages(nodes: &NodeTemplates<'_>) -> Result<BTreeMap<String, VirtualStorage>> {
    let mut storages = BTreeMap::new();
    for (name, node) in nodes.of(tosca::VDU_STORAGE) {
        let props = node.req("properties")?;
        let data = props.req("virtual_block_storage_data")?;
        let size_gib = size::to_gib(size_bytes(&data.req("size_of_storage")?)?);
        let image = image_name(&Some(props))?;
        storages.insert(
            name.clone(),
            VirtualStorage {
                id: name,
                size_gib,
                image,
            },
        );
    }
    Ok(storages)
}

/// The VDUs (`tosca.nodes.nfv.Vdu.Compute`).
fn vdus(
    nodes: &NodeTemplates<'_>,
    storages: &BTreeMap<String, VirtualStorage>,
) -> Result<BTreeMap<VduId, Vdu>> {
    let mut vdus = BTreeMap::new();
    for (name, node) in nodes.of(tosca::VDU_COMPUTE) {
        let vdu = parse_vdu(&name, &node, storages)?;
        vdus.insert(VduId::new(name), vdu);
    }
    Ok(vdus)
}

/// The virtual links (`tosca.nodes.nfv.VnfVirtualLink`).
fn virtual_links(nodes: &NodeTemplates<'_>) -> Result<BTreeMap<String, VirtualLink>> {
    let mut virtual_links = BTreeMap::new();
    for (name, node) in nodes.of(tosca::VIRTUAL_LINK) {
        let props = node.opt("properties")?;
        let (description, layer_protocols) = match &props {
            Some(p) => (
                p.opt("description")?.map(|d| d.text()).transpose()?,
                match p.opt("connectivity_type")? {
                    Some(ct) => ct
                        .opt("layer_protocols")?
                        .map(|l| l.str_list())
                        .transpose()?
                        .unwrap_or_default(),
                    None => Vec::new(),
                },
            ),
            None => (None, Vec::new()),
        };
        virtual_links.insert(
            name.clone(),
            VirtualLink {
                id: name,
                description,
                layer_protocols,
            },
        );
    }
    Ok(virtual_links)
}

/// The connection points (`tosca.nodes.nfv.VduCp`), whose requirements name a VDU and a
/// virtual link.
fn connection_points(
    nodes: &NodeTemplates<'_>,
    refs: &Refs<'_>,
) -> Result<BTreeMap<String, ConnectionPoint>> {
    let id = refs.flavour;
    let mut connection_points = BTreeMap::new();
    for (name, node) in nodes.of(tosca::VDU_CP) {
        let props = node.opt("properties")?;
        let order = match &props {
            Some(p) => p.opt("order")?.map(|o| o.u32()).transpose()?,
            None => None,
        };
        let layer_protocols = match &props {
            Some(p) => p
                .opt("layer_protocols")?
                .map(|l| l.str_list())
                .transpose()?
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let mut vdu = None;
        let mut virtual_link = None;
        if let Some(reqs) = node.opt("requirements")? {
            for (req, at) in reqs.named_items()? {
                match req.as_str() {
                    "virtual_binding" => {
                        let target = requirement_target(&at)?;
                        if !refs.vdus.contains_key(target.as_str()) {
                            return Err(at.err(format!(
                                "virtual_binding `{target}` is not a VDU ({}) of flavour `{id}`: \
                                 expected one of {}",
                                tosca::VDU_COMPUTE,
                                refs.vdu_names()
                            )));
                        }
                        vdu = Some(VduId::new(target));
                    }
                    "virtual_link" => {
                        let target = requirement_target(&at)?;
                        if !refs.virtual_links.contains_key(&target) {
                            return Err(at.err(format!(
                                "virtual_link `{target}` is not a virtual link ({}) of flavour \
                                 `{id}`: expected one of {}",
                                tosca::VIRTUAL_LINK,
                                list_or_none(refs.virtual_links.keys())
                            )));
                        }
                        virtual_link = Some(target);
                    }
                    _ => {}
                }
            }
        }
        connection_points.insert(
            name.clone(),
            ConnectionPoint {
                id: name,
                vdu,
                virtual_link,
                order,
                layer_protocols,
            },
        );
    }
    Ok(connection_points)
}

/// The external virtual links: the requirements of `substitution_mappings`, each to the
/// first node of its `[ node, requirement ]`.
fn external_links(tt: &At<'_>) -> Result<BTreeMap<String, String>> {
    let mut external_links = BTreeMap::new();
    if let Some(reqs) = tt
        .opt("substitution_mappings")?
        .map(|s| s.opt("requirements"))
        .transpose()?
        .flatten()
    {
        for (req, at) in reqs.entries()? {
            let items = at.items()?;
            let Some(first) = items.first() else {
                return Err(at.expected("a list `[ node, requirement ]`"));
            };
            external_links.insert(req, first.text()?);
        }
    }
    Ok(external_links)
}

/// The flavour's VNF node: its description and LCM interface.
fn vnf_node(
    doc: &Doc,
    types: &Types<'_>,
) -> Result<(Option<String>, BTreeMap<String, LcmOperation>)> {
    let mut description = None;
    let mut lcm_operations = BTreeMap::new();
    if let Some((_, node, _)) = tosca::vnf_nodes(doc, types)?.into_iter().next() {
        if let Some(props) = node.opt("properties")? {
            description = props
                .opt("flavour_description")?
                .map(|d| d.text())
                .transpose()?;
        }
        lcm_operations = lcm_interface(&node)?;
    }
    Ok((description, lcm_operations))
}

/// The placement groups (`tosca.groups.nfv.PlacementGroup`) among `groups`, whose members are
/// VDUs and virtual links.
fn placement_groups(
    tt: &At<'_>,
    types: &Types<'_>,
    refs: &Refs<'_>,
) -> Result<BTreeMap<String, PlacementGroup>> {
    let id = refs.flavour;
    let mut placement_groups = BTreeMap::new();
    if let Some(groups) = tt.opt("groups")? {
        for (name, g) in groups.named_items()? {
            let ty = g.req("type")?.str()?;
            if !types.is_placement_group(ty) {
                continue;
            }
            let members_at = g.req("members")?;
            let members = members_at.str_list()?;
            for m in &members {
                if !refs.vdus.contains_key(m.as_str()) && !refs.virtual_links.contains_key(m) {
                    return Err(members_at.err(format!(
                        "member `{m}` is neither a VDU nor a virtual link of flavour `{id}`: \
                         expected one of {}",
                        list_or_none(
                            refs.vdus
                                .keys()
                                .map(|k| &k.0)
                                .chain(refs.virtual_links.keys())
                        )
                    )));
                }
            }
            placement_groups.insert(name.clone(), PlacementGroup { id: name, members });
        }
    }
    Ok(placement_groups)
}

/// The policies of a flavour whose type derives from a policy type the reader knows: name,
/// value and base type, in template order.
struct Policies<'d> {
    all: Vec<(String, At<'d>, &'static str)>,
}

impl<'d> Policies<'d> {
    /// Collects `topology_template.policies`.
    fn collect(tt: &At<'d>, types: &Types<'_>) -> Result<Self> {
        let all = match tt.opt("policies")? {
            Some(p) => {
                let mut out = Vec::new();
                for (name, at) in p.named_items()? {
                    let ty = at.req("type")?.str()?;
                    if let Some(kind) = types.policy_kind(ty) {
                        out.push((name, at, kind));
                    }
                }
                out
            }
            None => Vec::new(),
        };
        Ok(Policies { all })
    }

    /// The policies of base type `kind`.
    fn of<'p>(
        &'p self,
        kind: &'static str,
    ) -> impl Iterator<Item = &'p (String, At<'d>, &'static str)> + 'p {
        self.all.iter().filter(move |(_, _, k)| *k == kind)
    }
}

/// The scaling aspects (`ScalingAspects` policies), with where each aspect's
/// `max_scale_level` is written, for the bound check at the end.
fn scaling_aspects<'d>(
    policies: &Policies<'d>,
) -> Result<(BTreeMap<String, ScalingAspect>, BTreeMap<String, At<'d>>)> {
    let mut scaling_aspects: BTreeMap<String, ScalingAspect> = BTreeMap::new();
    let mut max_level_at: BTreeMap<String, At<'d>> = BTreeMap::new();
    for (_, at, _) in policies.of("tosca.policies.nfv.ScalingAspects") {
        for (aid, a) in at.req("properties")?.req("aspects")?.entries()? {
            if scaling_aspects.contains_key(&aid) {
                return Err(a.err(format!("scaling aspect `{aid}` is defined twice")));
            }
            let aspect = ScalingAspect {
                name: a
                    .opt("name")?
                    .map(|n| n.text())
                    .transpose()?
                    .unwrap_or_else(|| aid.clone()),
                description: a.opt("description")?.map(|d| d.text()).transpose()?,
                max_scale_level: {
                    let level_at = a.req("max_scale_level")?;
                    let level = level_at.u32()?;
                    max_level_at.insert(aid.clone(), level_at);
                    level
                },
                step_deltas: a
                    .opt("step_deltas")?
                    .map(|s| s.str_list())
                    .transpose()?
                    .unwrap_or_default(),
                id: aid.clone(),
            };
            scaling_aspects.insert(aid, aspect);
        }
    }
    Ok((scaling_aspects, max_level_at))
}

/// The aspect deltas (`VduScalingAspectDeltas` policies): each of a defined aspect, with a
/// delta for every step of it.
fn aspect_deltas(
    policies: &Policies<'_>,
    scaling_aspects: &BTreeMap<String, ScalingAspect>,
    refs: &Refs<'_>,
) -> Result<Vec<VduScalingAspectDeltas>> {
    let mut aspect_deltas = Vec::new();
    for (name, at, _) in policies.of("tosca.policies.nfv.VduScalingAspectDeltas") {
        let props = at.req("properties")?;
        let aspect_at = props.req("aspect")?;
        let aspect = aspect_at.text()?;
        let Some(def) = scaling_aspects.get(&aspect) else {
            return Err(aspect_at.err(format!(
                "aspect `{aspect}` is not defined by a ScalingAspects policy: expected one of {}",
                list_or_none(scaling_aspects.keys())
            )));
        };
        let deltas_at = props.req("deltas")?;
        let mut deltas = BTreeMap::new();
        for (did, d) in deltas_at.entries()? {
            deltas.insert(did, d.req("number_of_instances")?.u32()?);
        }
        for step in &def.step_deltas {
            if !deltas.contains_key(step) {
                return Err(deltas_at.err(format!(
                    "aspect `{aspect}` steps by delta `{step}`, which is not defined here \
                     (deltas: {})",
                    list_or_none(deltas.keys())
                )));
            }
        }
        aspect_deltas.push(VduScalingAspectDeltas {
            name: name.clone(),
            aspect,
            deltas,
            targets: refs.vdu_targets(at, "VduScalingAspectDeltas")?,
        });
    }
    Ok(aspect_deltas)
}

/// The initial deltas (`VduInitialDelta` policies), each within its targets' profiles.
fn initial_deltas(policies: &Policies<'_>, refs: &Refs<'_>) -> Result<Vec<VduInitialDelta>> {
    let mut initial_deltas = Vec::new();
    for (name, at, _) in policies.of("tosca.policies.nfv.VduInitialDelta") {
        let n_at = at
            .req("properties")?
            .req("initial_delta")?
            .req("number_of_instances")?;
        let n = n_at.u32()?;
        let targets = refs.vdu_targets(at, "VduInitialDelta")?;
        refs.within_profile(&n_at, n, &targets)?;
        initial_deltas.push(VduInitialDelta {
            name: name.clone(),
            number_of_instances: n,
            targets,
        });
    }
    Ok(initial_deltas)
}

/// The instantiation levels (at most one `InstantiationLevels` policy), whose scale levels
/// are of defined aspects and within their `max_scale_level`.
fn instantiation_levels(
    policies: &Policies<'_>,
    scaling_aspects: &BTreeMap<String, ScalingAspect>,
) -> Result<Option<InstantiationLevels>> {
    let mut instantiation_levels: Option<InstantiationLevels> = None;
    for (name, at, _) in policies.of("tosca.policies.nfv.InstantiationLevels") {
        if let Some(first) = &instantiation_levels {
            return Err(at.err(format!(
                "a second InstantiationLevels policy (the first is `{}`): expected one per flavour",
                first.name
            )));
        }
        let props = at.req("properties")?;
        let mut levels = BTreeMap::new();
        for (lid, l) in props.req("levels")?.entries()? {
            levels.insert(
                lid,
                InstantiationLevel {
                    scale_info: scale_info(&l, scaling_aspects)?,
                    description: l.opt("description")?.map(|d| d.text()).transpose()?,
                },
            );
        }
        let default_level = match props.opt("default_level")? {
            Some(d) => {
                let level = d.text()?;
                if !levels.contains_key(&level) {
                    return Err(d.err(format!(
                        "default_level `{level}` is not one of the levels ({})",
                        list_or_none(levels.keys())
                    )));
                }
                Some(level)
            }
            None => None,
        };
        instantiation_levels = Some(InstantiationLevels {
            name: name.clone(),
            levels,
            default_level,
        });
    }
    Ok(instantiation_levels)
}

/// The `scale_info` of the instantiation level at `level`: aspect → scale level.
fn scale_info(
    level: &At<'_>,
    scaling_aspects: &BTreeMap<String, ScalingAspect>,
) -> Result<BTreeMap<String, u32>> {
    let mut scale_info = BTreeMap::new();
    if let Some(si) = level.opt("scale_info")? {
        for (aid, s) in si.entries()? {
            let Some(def) = scaling_aspects.get(&aid) else {
                return Err(s.err(format!(
                    "aspect `{aid}` is not defined by a ScalingAspects policy: expected one of \
                     {}",
                    list_or_none(scaling_aspects.keys())
                )));
            };
            let level_at = s.req("scale_level")?;
            let level = level_at.u32()?;
            if level > def.max_scale_level {
                return Err(level_at.err(format!(
                    "scale_level {level} is above max_scale_level {} of aspect `{aid}`",
                    def.max_scale_level
                )));
            }
            scale_info.insert(aid, level);
        }
    }
    Ok(scale_info)
}

/// The VDU instantiation levels (`VduInstantiationLevels` policies): levels the
/// `InstantiationLevels` policy defines, counts within the targets' profiles.
fn vdu_instantiation_levels(
    policies: &Policies<'_>,
    instantiation_levels: Option<&InstantiationLevels>,
    refs: &Refs<'_>,
) -> Result<Vec<VduInstantiationLevels>> {
    let mut vdu_instantiation_levels = Vec::new();
    for (name, at, _) in policies.of("tosca.policies.nfv.VduInstantiationLevels") {
        let targets = refs.vdu_targets(at, "VduInstantiationLevels")?;
        let mut levels = BTreeMap::new();
        for (lid, l) in at.req("properties")?.req("levels")?.entries()? {
            if let Some(il) = instantiation_levels {
                if !il.levels.contains_key(&lid) {
                    return Err(l.err(format!(
                        "level `{lid}` is not defined by InstantiationLevels policy `{}` \
                         (levels: {})",
                        il.name,
                        list_or_none(il.levels.keys())
                    )));
                }
            }
            let n_at = l.req("number_of_instances")?;
            let n = n_at.u32()?;
            refs.within_profile(&n_at, n, &targets)?;
            levels.insert(lid, n);
        }
        vdu_instantiation_levels.push(VduInstantiationLevels {
            name: name.clone(),
            levels,
            targets,
        });
    }
    Ok(vdu_instantiation_levels)
}

/// The affinity and anti-affinity rules (`AffinityRule`, `AntiAffinityRule` policies), in
/// policy order, each with its targets expanded to VDUs.
fn rules(
    policies: &Policies<'_>,
    placement_groups: &BTreeMap<String, PlacementGroup>,
    refs: &Refs<'_>,
) -> Result<Vec<PlacementRule>> {
    let mut rules = Vec::new();
    for (name, at, kind) in &policies.all {
        let kind = match *kind {
            "tosca.policies.nfv.AffinityRule" => RuleKind::Affinity,
            "tosca.policies.nfv.AntiAffinityRule" => RuleKind::AntiAffinity,
            _ => continue,
        };
        let scope_at = at.req("properties")?.req("scope")?;
        let scope_text = scope_at.str()?;
        let scope = RuleScope::parse(scope_text).ok_or_else(|| {
            scope_at.err(format!(
                "unknown scope `{scope_text}`: expected one of nfvi_node, zone, zone_group, \
                 nfvi_pop, cis_node"
            ))
        })?;
        let targets_at = at.req("targets")?;
        let targets = targets_at.str_list()?;
        let vdus = rule_vdus(&targets_at, &targets, placement_groups, refs)?;
        rules.push(PlacementRule {
            name: name.clone(),
            kind,
            scope,
            targets,
            vdus,
        });
    }
    Ok(rules)
}

/// The VDUs of a rule's `targets` (written at `targets_at`): a VDU itself, a placement group
/// its VDU members; each once, in order.
fn rule_vdus(
    targets_at: &At<'_>,
    targets: &[String],
    placement_groups: &BTreeMap<String, PlacementGroup>,
    refs: &Refs<'_>,
) -> Result<Vec<VduId>> {
    let id = refs.flavour;
    let mut seen = BTreeSet::new();
    let mut expanded = Vec::new();
    for t in targets {
        let members: Vec<&String> = if refs.vdus.contains_key(t.as_str()) {
            vec![t]
        } else if let Some(g) = placement_groups.get(t) {
            g.members
                .iter()
                .filter(|m| refs.vdus.contains_key(m.as_str()))
                .collect()
        } else {
            return Err(targets_at.err(format!(
                "target `{t}` is neither a VDU nor a PlacementGroup of flavour `{id}` \
                 (VDUs: {}; placement groups: {})",
                refs.vdu_names(),
                list_or_none(placement_groups.keys())
            )));
        };
        for m in members {
            if seen.insert(m.clone()) {
                expanded.push(VduId::new(m.clone()));
            }
        }
    }
    Ok(expanded)
}

/// Every aspect can reach its `max_scale_level` within the `vdu_profile` of each VDU it
/// scales: the VDU's initial instances (see [`Flavour::initial_instances`]; its
/// `min_number_of_instances` when the VNFD gives none) plus `max_scale_level` steps of the
/// aspect's delta for that VDU (uniform, [`Flavour::aspect_delta`]) must not exceed
/// `max_number_of_instances`. A flavour that says otherwise declares scale levels it can never
/// reach, and a scale-out to them would be refused only at run time.
fn within_max_scale(flavour: &Flavour, max_level_at: &BTreeMap<String, At<'_>>) -> Result<()> {
    for (aid, aspect) in &flavour.scaling_aspects {
        for (vdu_id, vdu) in &flavour.vdus {
            let Some(delta) = flavour.aspect_delta(aid, vdu_id) else {
                continue;
            };
            let initial = flavour
                .initial_instances(vdu_id)
                .unwrap_or(vdu.min_instances);
            // The initial instances are at the default instantiation level's scale level of
            // the aspect (its `scale_info`), or at level 0 (a VduInitialDelta, no level).
            let from_delta = flavour
                .initial_deltas
                .iter()
                .any(|d| d.targets.contains(vdu_id));
            let start = if from_delta {
                0
            } else {
                flavour
                    .instantiation_levels
                    .as_ref()
                    .and_then(|l| l.levels.get(l.default_level.as_ref()?))
                    .and_then(|l| l.scale_info.get(aid).copied())
                    .unwrap_or(0)
            };
            let steps = aspect.max_scale_level.saturating_sub(start);
            let top = u64::from(initial) + u64::from(steps) * u64::from(delta);
            if top > u64::from(vdu.max_instances) {
                let message = format!(
                    "aspect `{aid}`: {initial} initial instances of VDU `{}` (at scale level \
                     {start}) + {steps} more level(s) up to max_scale_level {} x delta {delta} = \
                     {top} instances, above its max_number_of_instances {}: expected \
                     max_scale_level at most {}, or a larger vdu_profile.max_number_of_instances",
                    vdu_id.0,
                    aspect.max_scale_level,
                    vdu.max_instances,
                    start + (vdu.max_instances.saturating_sub(initial)) / delta.max(1),
                );
                return Err(match max_level_at.get(aid) {
                    Some(at) => at.err(message),
                    None => crate::Error::invalid(
                        crate::error::Location::file(&flavour.definitions_file),
                        message,
                    ),
                });
            }
        }
    }
    Ok(())
}

fn parse_vdu(
    name: &str,
    node: &At<'_>,
    storages: &BTreeMap<String, VirtualStorage>,
) -> Result<Vdu> {
    let props = node.req("properties")?;
    let profile = props.req("vdu_profile")?;
    let min_instances = profile.req("min_number_of_instances")?.u32()?;
    let max_instances = profile.req("max_number_of_instances")?.u32()?;
    if min_instances > max_instances {
        return Err(profile.err(format!(
            "min_number_of_instances {min_instances} is greater than max_number_of_instances \
             {max_instances}"
        )));
    }

    let vc = match node.opt("capabilities")? {
        Some(c) => match c.opt("virtual_compute")? {
            Some(v) => v.opt("properties")?,
            None => None,
        },
        None => None,
    };
    let mut flavor = None;
    let virtual_compute = match &vc {
        Some(vc) => {
            if let Some(caps) = vc.opt("requested_additional_capabilities")? {
                for (_, cap) in caps.entries()? {
                    if let Some(n) = cap.opt("requested_additional_capability_name")? {
                        flavor = Some(FlavorId::new(n.text()?));
                        break;
                    }
                }
            }
            let mut local = Vec::new();
            if let Some(l) = vc.opt("virtual_local_storage")? {
                for item in l.items()? {
                    local.push(size::to_gib(size_bytes(&item.req("size_of_storage")?)?));
                }
            }
            Some(VirtualCompute {
                num_virtual_cpu: vc.req("virtual_cpu")?.req("num_virtual_cpu")?.u32()?,
                virtual_mem_size_mib: size::to_mib(size_bytes(
                    &vc.req("virtual_memory")?.req("virtual_mem_size")?,
                )?),
                virtual_local_storage_gib: local,
            })
        }
        None => None,
    };

    let mut vdu_storages = Vec::new();
    if let Some(reqs) = node.opt("requirements")? {
        for (req, at) in reqs.named_items()? {
            if req != "virtual_storage" {
                continue;
            }
            let target = requirement_target(&at)?;
            if !storages.contains_key(&target) {
                return Err(at.err(format!(
                    "virtual_storage `{target}` is not a {} node template of this flavour: \
                     expected one of {}",
                    tosca::VDU_STORAGE,
                    list_or_none(storages.keys())
                )));
            }
            vdu_storages.push(target);
        }
    }
    let image = match image_name(&Some(props.clone()))? {
        Some(i) => Some(i),
        None => vdu_storages
            .iter()
            .filter_map(|s| storages.get(s))
            .find_map(|s| s.image.clone()),
    };

    Ok(Vdu {
        id: VduId::new(name),
        name: props
            .opt("name")?
            .map(|n| n.text())
            .transpose()?
            .unwrap_or_else(|| name.to_owned()),
        description: props.opt("description")?.map(|d| d.text()).transpose()?,
        min_instances,
        max_instances,
        virtual_compute,
        flavor,
        storages: vdu_storages,
        image,
    })
}

/// The `Vnflcm` interface operations of a VNF node template.
fn lcm_interface(node: &At<'_>) -> Result<BTreeMap<String, LcmOperation>> {
    let mut out = BTreeMap::new();
    let Some(ifaces) = node.opt("interfaces")? else {
        return Ok(out);
    };
    let Some(lcm) = ifaces.opt("Vnflcm")? else {
        return Ok(out);
    };
    let artifacts = node.opt("artifacts")?;
    for (op, def) in lcm.entries()? {
        if op == "type" || op == "inputs" {
            continue;
        }
        let implementation = match def.v {
            serde_yaml::Value::Null => None,
            serde_yaml::Value::Sequence(s) if s.is_empty() => None,
            serde_yaml::Value::String(s) => Some(s.clone()),
            serde_yaml::Value::Mapping(_) => match def.opt("implementation")? {
                None => None,
                Some(i) if i.v.is_mapping() => {
                    let primary = i.req("primary")?;
                    if primary.v.is_mapping() {
                        Some(primary.req("file")?.text()?)
                    } else {
                        Some(primary.text()?)
                    }
                }
                Some(i) => Some(i.text()?),
            },
            _ => return Err(def.expected("an operation definition (a mapping or a name)")),
        };
        let artifact_file = match (&implementation, &artifacts) {
            (Some(i), Some(a)) => match a.opt(i)? {
                Some(art) if art.v.is_mapping() => {
                    art.opt("file")?.map(|f| f.text()).transpose()?
                }
                Some(art) => Some(art.text()?),
                None => None,
            },
            _ => None,
        };
        out.insert(
            op,
            LcmOperation {
                implementation,
                artifact_file,
            },
        );
    }
    Ok(out)
}
