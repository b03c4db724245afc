//! A VNF package as `vnfm package show` (and `vnfm demo`) print it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use vnfm_core::package::{Flavour, VnfPackage};

use crate::report::{reports, Report, Version};

/// What `vnfm package show --json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageReport {
    /// Where the package was read from.
    pub source: String,
    /// `descriptor_id` (the vnfdId).
    pub vnfd_id: String,
    /// Provider, product and version.
    pub provider: Option<String>,
    /// Product name.
    pub product_name: Option<String>,
    /// Software version.
    pub software_version: Option<String>,
    /// Descriptor version.
    pub descriptor_version: Option<String>,
    /// The deployment flavours.
    pub flavours: Vec<FlavourReport>,
    /// The format version.
    pub version: Version,
}

reports!(PackageReport);

/// One flavour in [`PackageReport`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavourReport {
    /// Flavour id.
    pub id: String,
    /// Description.
    pub description: Option<String>,
    /// The VDUs.
    pub vdus: Vec<VduReport>,
    /// Affinity / anti-affinity rules.
    pub rules: Vec<RuleReport>,
    /// Scaling aspects.
    pub aspects: Vec<AspectReport>,
    /// Files of the BaseHOT (top template first), or empty when the flavour has none.
    pub base_hot: Vec<String>,
    /// What makes the flavour unusable by some operations (no BaseHOT: the Heat drivers
    /// cannot instantiate it), naming the flavour and the expected path; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One VDU in [`FlavourReport`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VduReport {
    /// VDU id.
    pub id: String,
    /// Compute flavour name (`requested_additional_capability_name`).
    pub flavor: Option<String>,
    /// vCPUs, memory (MiB) and local disk (GiB) of the virtual compute.
    pub vcpus: Option<u32>,
    /// Memory in MiB.
    pub memory_mib: Option<u64>,
    /// Local storage in GiB.
    pub local_storage_gib: Vec<u64>,
    /// Instances: minimum, initial and maximum.
    pub min_instances: u32,
    /// Initial instances (initial delta, or the default instantiation level).
    pub initial_instances: Option<u32>,
    /// Maximum instances.
    pub max_instances: u32,
    /// Virtual storages with their size in GiB.
    pub storages: BTreeMap<String, u64>,
    /// Software image.
    pub image: Option<String>,
}

/// One rule in [`FlavourReport`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleReport {
    /// Policy name.
    pub name: String,
    /// `affinity` or `anti-affinity`.
    pub kind: String,
    /// Scope as in the VNFD (`zone`, `nfvi_node`, ...).
    pub scope: String,
    /// Targets as written.
    pub targets: Vec<String>,
    /// Targets expanded to VDUs.
    pub vdus: Vec<String>,
}

/// One scaling aspect in [`FlavourReport`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AspectReport {
    /// Aspect id.
    pub id: String,
    /// Maximum scale level.
    pub max_scale_level: u32,
    /// Instances added per step, per VDU.
    pub delta: BTreeMap<String, u32>,
}

/// Builds the report of a package.
pub fn report(pkg: &VnfPackage) -> PackageReport {
    PackageReport {
        source: pkg.source.clone(),
        vnfd_id: pkg.descriptor_id.clone(),
        provider: pkg.provider.clone(),
        product_name: pkg.product_name.clone(),
        software_version: pkg.software_version.clone(),
        descriptor_version: pkg.descriptor_version.clone(),
        flavours: pkg
            .flavours
            .values()
            .map(|f| {
                let mut r = flavour_report(f);
                if let Err(e) = pkg.base_hot(&f.id) {
                    r.warnings.push(format!(
                        "{e}; `vnfm instantiate` of this flavour fails (on the simulated cloud \
                         and on OpenStack)"
                    ));
                }
                r
            })
            .collect(),
        version: Version,
    }
}

fn flavour_report(f: &Flavour) -> FlavourReport {
    let vdus = f
        .vdus
        .values()
        .map(|v| VduReport {
            id: v.id.to_string(),
            flavor: v.flavor.as_ref().map(|x| x.to_string()),
            vcpus: v.virtual_compute.as_ref().map(|c| c.num_virtual_cpu),
            memory_mib: v.virtual_compute.as_ref().map(|c| c.virtual_mem_size_mib),
            local_storage_gib: v
                .virtual_compute
                .as_ref()
                .map(|c| c.virtual_local_storage_gib.clone())
                .unwrap_or_default(),
            min_instances: v.min_instances,
            initial_instances: f.initial_instances(&v.id),
            max_instances: v.max_instances,
            storages: v
                .storages
                .iter()
                .map(|s| (s.clone(), f.storages.get(s).map_or(0, |x| x.size_gib)))
                .collect(),
            image: v.image.clone(),
        })
        .collect();
    let rules = f
        .rules
        .iter()
        .map(|r| RuleReport {
            name: r.name.clone(),
            kind: match r.kind {
                vnfm_core::package::RuleKind::Affinity => "affinity".into(),
                vnfm_core::package::RuleKind::AntiAffinity => "anti-affinity".into(),
            },
            scope: r.scope.as_str().to_owned(),
            targets: r.targets.clone(),
            vdus: r.vdus.iter().map(|v| v.to_string()).collect(),
        })
        .collect();
    let aspects = f
        .scaling_aspects
        .values()
        .map(|a| AspectReport {
            id: a.id.clone(),
            max_scale_level: a.max_scale_level,
            delta: f
                .vdus
                .keys()
                .filter_map(|v| f.aspect_delta(&a.id, v).map(|d| (v.to_string(), d)))
                .collect(),
        })
        .collect();
    let base_hot = f
        .base_hot
        .as_ref()
        .map(|b| {
            // Nested templates are also keyed by their bare name (`VDU1.yaml` beside
            // `nested/VDU1.yaml`, as HOT refers to them); list each file once.
            let mut files = vec!["(top template)".to_owned()];
            files.extend(
                b.files
                    .keys()
                    .filter(|k| !b.files.contains_key(&format!("nested/{k}")))
                    .cloned(),
            );
            files
        })
        .unwrap_or_default();
    FlavourReport {
        id: f.id.clone(),
        description: f.description.clone(),
        vdus,
        rules,
        aspects,
        base_hot,
        warnings: Vec::new(),
    }
}

/// The human-readable form of a [`PackageReport`].
pub fn human(r: &PackageReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "package {}", r.source);
    let _ = writeln!(s, "  vnfdId: {}", r.vnfd_id);
    for (k, v) in [
        ("provider", &r.provider),
        ("product", &r.product_name),
        ("software version", &r.software_version),
        ("descriptor version", &r.descriptor_version),
    ] {
        if let Some(v) = v {
            let _ = writeln!(s, "  {k}: {v}");
        }
    }
    for f in &r.flavours {
        let _ = writeln!(
            s,
            "\nflavour {}{}",
            f.id,
            f.description
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        );
        let _ = writeln!(s, "  VDUs:");
        for v in &f.vdus {
            let compute = match (v.vcpus, v.memory_mib) {
                (Some(c), Some(m)) => format!(", {c} vCPU, {m} MiB"),
                _ => String::new(),
            };
            let initial = v
                .initial_instances
                .map(|i| i.to_string())
                .unwrap_or_else(|| "?".into());
            let _ = writeln!(
                s,
                "    {}  flavour {}{compute}, instances min {} / initial {initial} / max {}",
                v.id,
                v.flavor.as_deref().unwrap_or("(none)"),
                v.min_instances,
                v.max_instances
            );
            for (name, size) in &v.storages {
                let _ = writeln!(s, "      storage {name}: {size} GiB");
            }
            if let Some(img) = &v.image {
                let _ = writeln!(s, "      image {img}");
            }
        }
        if !f.rules.is_empty() {
            let _ = writeln!(s, "  placement rules:");
            for ru in &f.rules {
                let _ = writeln!(
                    s,
                    "    {}: {} at scope {} over {} (VDUs {})",
                    ru.name,
                    ru.kind,
                    ru.scope,
                    ru.targets.join(", "),
                    ru.vdus.join(", ")
                );
            }
        }
        if !f.aspects.is_empty() {
            let _ = writeln!(s, "  scaling aspects:");
            for a in &f.aspects {
                let delta: Vec<String> = a.delta.iter().map(|(v, d)| format!("{v} +{d}")).collect();
                let _ = writeln!(
                    s,
                    "    {}: max scale level {}, per step {}",
                    a.id,
                    a.max_scale_level,
                    if delta.is_empty() {
                        "(no VDU)".to_owned()
                    } else {
                        delta.join(", ")
                    }
                );
            }
        }
        if f.base_hot.is_empty() {
            // Why is a warning on stderr (`vnfm package show`).
            let _ = writeln!(s, "  BaseHOT: none");
        } else {
            let _ = writeln!(s, "  BaseHOT: {}", f.base_hot.join(", "));
        }
    }
    s
}
