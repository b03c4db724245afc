//! From a deployment intent to a deployable package: the demands of a package's VDUs, one
//! region for the whole VNF instance, and the intent realised in the package's templates.
//!
//! A VNF instance lives in one region (one VIM connection), so [`choose_region`] keeps the
//! candidates that survive the selection of *every* VDU the policy covers, checks that their
//! summed demand fits the region's free capacity, and ranks them by the sum of the VDUs'
//! values (ties: candidate-file order). [`realise_package`] then writes the chosen region's
//! intents into the package: the flavour's `BaseHOT` gets the HA server group and the VDUs get
//! their (burstable) flavour, so every later operation of the instance (scale, heal) builds its
//! stack from the same realised templates. [`IntentRecord`] is what an instance keeps to
//! realise the package again for those operations ([`reapply`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::candidates::{
    region_flavour, CandidateFile, Capacities, CloudOwner, FreeCapacity, GeoPoint, Region,
};
use super::policy::{Intent, Isolation as PolicyIsolation, Policy};
use super::realise::{
    realise, Change, Isolation, Oversubscription as RealisedVariant, Realisation, RealiseError,
    RealiseRequest, RegionFlavour, RegionOffer,
};
use super::select::{select, write_more, CandidateId, Demand, Selection};
use crate::error::{Error, Location, Result};
use crate::id::{FlavorId, VduId};
use crate::package::VnfPackage;
use crate::zone::Resources;

/// The demands of the VDUs of `flavour_id` that `policy` covers (all of them when its
/// `resources` is empty): each VDU's Nova flavour and its initial number of instances (at
/// least 1).
///
/// # Errors
/// No such deployment flavour, a covered VDU without a flavour, or no VDU covered.
pub fn package_demands(
    pkg: &VnfPackage,
    flavour_id: &str,
    policy: &Policy,
    customer: Option<GeoPoint>,
) -> Result<Vec<Demand>> {
    let at = || Location::file(&pkg.source);
    let flavour = pkg.flavour(flavour_id).ok_or_else(|| {
        Error::invalid(
            at(),
            format!("no deployment flavour `{flavour_id}` for the intent"),
        )
    })?;
    let mut out = Vec::new();
    for (id, vdu) in &flavour.vdus {
        if !policy.resources.is_empty() && !policy.resources.iter().any(|r| r == id.as_str()) {
            continue;
        }
        let name = vdu.flavor.as_ref().ok_or_else(|| {
            Error::invalid(
                at(),
                format!(
                    "VDU {id}: no flavour (requested_additional_capability_name): the intent's \
                     selection needs the instance type"
                ),
            )
        })?;
        let instances = flavour
            .initial_instances(id)
            .unwrap_or(vdu.min_instances)
            .max(1);
        let mut d = Demand::new(id.as_str(), name.as_str(), u64::from(instances));
        d.customer = customer;
        out.push(d);
    }
    if out.is_empty() {
        return Err(Error::invalid(
            at(),
            format!(
                "the policy's resources ({}) name no VDU of flavour `{flavour_id}` (VDUs: {})",
                policy.resources.join(", "),
                flavour
                    .vdus
                    .keys()
                    .map(VduId::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(out)
}

/// A candidate that survives every VDU's selection, valued for the whole VNF.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommonCandidate {
    /// The candidate.
    pub candidate: CandidateId,
    /// Position in the candidate file.
    pub order: usize,
    /// The sum of the VDUs' values (lower is better).
    pub value: f64,
}

/// The region of a whole VNF instance: per-VDU selections, the common ranking, and the
/// candidates that survived every VDU alone but not together.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionChoice {
    /// One selection per demand, in demand order.
    pub selections: Vec<Selection>,
    /// Candidates that survive every demand and fit their sum, best first.
    pub ranking: Vec<CommonCandidate>,
    /// Candidates that survive each demand alone but not all of them together, with why.
    pub dropped: Vec<(CandidateId, String)>,
    /// The choice, `None` when no candidate serves every VDU.
    pub chosen: Option<CandidateId>,
}

impl fmt::Display for RegionChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.display_limited(None).fmt(f)
    }
}

impl RegionChoice {
    /// The choice as text with at most `limit` entries per list (each VDU's ranking and
    /// dropped candidates, the whole VNF's ranking and dropped candidates; every one for
    /// `None`), as [`Selection::display_limited`].
    pub fn display_limited(&self, limit: Option<usize>) -> LimitedChoice<'_> {
        LimitedChoice {
            choice: self,
            limit,
        }
    }
}

/// [`RegionChoice::display_limited`]: a choice printed with at most a given number of
/// entries per list.
#[derive(Clone, Copy, Debug)]
pub struct LimitedChoice<'a> {
    choice: &'a RegionChoice,
    limit: Option<usize>,
}

impl fmt::Display for LimitedChoice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.choice;
        let limit = self.limit.unwrap_or(usize::MAX);
        for s in &c.selections {
            writeln!(f, "{}", s.display_limited(self.limit))?;
        }
        if c.selections.len() > 1 {
            writeln!(f, "the VNF as a whole (one region for every VDU):")?;
            for (i, r) in c.ranking.iter().enumerate().take(limit) {
                writeln!(f, "  {}. {}  value {}", i + 1, r.candidate, round(r.value))?;
            }
            write_more(f, c.ranking.len(), c.ranking.len().min(limit))?;
            for (d, why) in c.dropped.iter().take(limit) {
                writeln!(f, "  dropped {d}: {why}")?;
            }
            write_more(f, c.dropped.len(), c.dropped.len().min(limit))?;
        }
        match &c.chosen {
            Some(c) => writeln!(f, "chosen: {c}"),
            None => writeln!(f, "chosen: none (no candidate serves every VDU)"),
        }
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Selects for every demand and chooses one region for all of them (see the module docs).
///
/// # Errors
/// As [`select`]: a demand the policy does not fit.
pub fn choose_region(
    policy: &Policy,
    candidates: &CandidateFile,
    demands: &[Demand],
    capacities: &Capacities,
) -> Result<RegionChoice> {
    let selections = demands
        .iter()
        .map(|d| select(policy, candidates, d, capacities))
        .collect::<Result<Vec<_>>>()?;
    let mut ranking = Vec::new();
    let mut dropped = Vec::new();
    // Each selection's values indexed once by the candidate's position in the file (a
    // ranked entry's `order`): the loop below looks every region up in every selection, which
    // a scan of the rankings made quadratic (12,000 regions: 1.6 s).
    let values_by_order: Vec<Vec<Option<f64>>> = selections
        .iter()
        .map(|s| {
            let mut by = vec![None; candidates.regions.len()];
            for r in &s.ranking {
                if let Some(slot) = by.get_mut(r.order) {
                    *slot = Some(r.value);
                }
            }
            by
        })
        .collect();
    let owners = candidates.owner_index();
    for (order, region) in candidates.regions.iter().enumerate() {
        let values: Option<Vec<f64>> = values_by_order
            .iter()
            .map(|by| by.get(order).copied().flatten())
            .collect();
        let Some(values) = values else { continue };
        let id = CandidateId {
            owner: region.owner.clone(),
            region: region.id.clone(),
        };
        if demands.len() > 1 {
            let owner = owners.get(region.owner.as_str()).copied();
            if let Some(why) = joint_shortfall(owner, region, demands, capacities) {
                dropped.push((id, why));
                continue;
            }
        }
        ranking.push(CommonCandidate {
            candidate: id,
            order,
            value: values.iter().sum(),
        });
    }
    ranking.sort_by(|a, b| a.value.total_cmp(&b.value).then(a.order.cmp(&b.order)));
    let chosen = ranking.first().map(|c| c.candidate.clone());
    Ok(RegionChoice {
        selections,
        ranking,
        dropped,
        chosen,
    })
}

/// Why the summed demand does not fit `region`, when it does not.
fn joint_shortfall(
    owner: Option<&CloudOwner>,
    region: &Region,
    demands: &[Demand],
    capacities: &Capacities,
) -> Option<String> {
    let FreeCapacity::Free { free, .. } = capacities.free(region) else {
        return None;
    };
    let mut need = Resources::default();
    for d in demands {
        let f = region_flavour(owner, region, &d.flavour)?;
        let r = &f.resources;
        let times = Resources::new(
            r.vcpus.saturating_mul(d.instances),
            r.memory_mb.saturating_mul(d.instances),
            r.disk_gb.saturating_mul(d.instances),
        );
        need = need.saturating_add(&times);
    }
    let short = [
        ("vCPU", need.vcpus, free.vcpus),
        ("MiB of memory", need.memory_mb, free.memory_mb),
        ("GiB of disk", need.disk_gb, free.disk_gb),
    ]
    .into_iter()
    .find(|(_, n, f)| n > f)?;
    Some(format!(
        "region {}: {} {} free < {} needed by the VDUs together",
        region.id, short.2, short.0, short.1
    ))
}

/// What an instance keeps of its intent: the region and the realisation request, so later
/// operations realise the package the same way ([`reapply`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntentRecord {
    /// The chosen region.
    pub region: CandidateId,
    /// The deployment flavour realised.
    pub flavour_id: String,
    /// The request given to [`realise`].
    pub request: RealiseRequest,
}

impl IntentRecord {
    /// The key under which an instance's metadata holds the record.
    pub const METADATA_KEY: &'static str = "vnfmIntent";
}

/// A package with the intent realised.
#[derive(Clone, Debug)]
pub struct RealisedPackage {
    /// The package: the flavour's `BaseHOT` and VDU flavours realised.
    pub package: VnfPackage,
    /// What changed.
    pub changes: Vec<Change>,
    /// The diff of the templates.
    pub diff: String,
    /// What the instance keeps.
    pub record: IntentRecord,
}

/// The realisation request of the chosen region for deployment flavour `flavour_id` of `pkg`:
/// each VDU's intents (HA; isolation, by default guaranteed) and maximum number of instances,
/// and the region's hosts and flavours.
///
/// # Errors
/// No region chosen, or a chosen region that is not in `candidates`.
pub fn realise_request(
    pkg: &VnfPackage,
    flavour_id: &str,
    choice: &RegionChoice,
    candidates: &CandidateFile,
    capacities: &Capacities,
    best_effort: bool,
) -> Result<RealiseRequest> {
    let chosen = choice.chosen.as_ref().ok_or_else(|| {
        Error::invalid(
            Location::default(),
            "no region serves every VDU: nothing to realise",
        )
    })?;
    let region = candidates
        .regions
        .iter()
        .find(|r| r.id == chosen.region && r.owner == chosen.owner)
        .ok_or_else(|| {
            Error::invalid(
                Location::default(),
                format!("chosen region {chosen} is not in the candidate file"),
            )
        })?;
    let free = capacities.free(region);
    let hosts = region
        .hosts
        .or(match &free {
            FreeCapacity::Free { hosts, .. } => *hosts,
            _ => None,
        })
        .map(|h| u32::try_from(h).unwrap_or(u32::MAX))
        .unwrap_or(match free {
            FreeCapacity::Unlimited => u32::MAX,
            _ => 0,
        });
    let mut vdus = Vec::new();
    for s in &choice.selections {
        let Some(r) = s.ranking.iter().find(|r| &r.candidate == chosen) else {
            continue;
        };
        let vdu = VduId::new(s.demand.vnfc.as_str());
        let mut real = Realisation::new(vdu.clone());
        for i in &r.intents {
            match i {
                Intent::HighAvailability => real = real.with_ha(),
                Intent::Isolation { isolation } => {
                    real = real.with_isolation(match isolation {
                        PolicyIsolation::Guaranteed => Isolation::Guaranteed,
                        PolicyIsolation::Burstable { percent } => {
                            Isolation::Burstable { percent: *percent }
                        }
                    });
                }
            }
        }
        if let Some(max) = pkg
            .flavour(flavour_id)
            .and_then(|f| f.vdus.get(&vdu))
            .map(|v| v.max_instances)
        {
            real = real.with_max_instances(max);
        }
        vdus.push(real);
    }
    Ok(RealiseRequest {
        vdus,
        region: RegionOffer {
            hosts,
            flavours: region_flavours(candidates, region),
        },
        best_effort,
    })
}

/// The region's flavours: the owner's, overridden by the region's of the same name.
fn region_flavours(candidates: &CandidateFile, region: &Region) -> Vec<RegionFlavour> {
    let mut by_name = BTreeMap::new();
    let owner = candidates.owner(&region.owner).map(|o| o.flavours.iter());
    for f in owner.into_iter().flatten().chain(region.flavours.iter()) {
        by_name.insert(f.name.clone(), f);
    }
    by_name
        .into_values()
        .map(|f| RegionFlavour {
            name: f.name.clone(),
            vcpus: f.resources.vcpus,
            memory_mb: f.resources.memory_mb,
            disk_gb: f.resources.disk_gb,
            oversubscribed: f
                .oversubscription
                .iter()
                .map(|o| {
                    (
                        o.percent,
                        RealisedVariant {
                            flavour: o.flavour.clone(),
                            max_vcpus: o.max_vcpus,
                            max_memory_mb: o.max_memory_mb,
                        },
                    )
                })
                .collect(),
        })
        .collect()
}

/// Realises `request` in flavour `flavour_id` of `pkg`: the `BaseHOT` gets the server group
/// and hints, and each VDU whose flavour the realisation switched gets the new one.
///
/// # Errors
/// The flavour has no `BaseHOT`, or [`realise`] refuses (too few hosts, an unsupported
/// over-subscription percentage, ...).
pub fn realise_package(
    pkg: &VnfPackage,
    flavour_id: &str,
    region: CandidateId,
    request: RealiseRequest,
) -> std::result::Result<RealisedPackage, DeployError> {
    let bundle = pkg.base_hot(flavour_id).map_err(DeployError::Package)?;
    let flavour = pkg.flavour(flavour_id).ok_or_else(|| {
        DeployError::Package(Error::invalid(
            Location::file(&pkg.source),
            format!("no deployment flavour `{flavour_id}`"),
        ))
    })?;
    // The BaseHOT reads each VDU's flavour as {get_param: [nfv, VDU, <vdu>, computeFlavourId]}.
    let mut nfv = serde_json::Map::new();
    for (id, vdu) in &flavour.vdus {
        if let Some(f) = &vdu.flavor {
            nfv.insert(id.to_string(), json!({"computeFlavourId": f.as_str()}));
        }
    }
    let mut params = serde_json::Map::new();
    params.insert("nfv".into(), json!({ "VDU": nfv }));
    let source = format!("{}/BaseHOT/{flavour_id}", pkg.source);
    let done = realise(&source, bundle, &params, &request).map_err(DeployError::Realise)?;
    let mut package = pkg.clone();
    if let Some(f) = package.flavours.get_mut(flavour_id) {
        f.base_hot = Some(done.template.clone());
        for (id, vdu) in f.vdus.iter_mut() {
            let new = done
                .parameters
                .get("nfv")
                .and_then(|n| n.get("VDU"))
                .and_then(|v| v.get(id.as_str()))
                .and_then(|v| v.get("computeFlavourId"))
                .and_then(|v| v.as_str());
            if let Some(new) = new {
                vdu.flavor = Some(FlavorId::new(new));
            }
        }
    }
    Ok(RealisedPackage {
        package,
        changes: done.changes,
        diff: done.diff,
        record: IntentRecord {
            region,
            flavour_id: flavour_id.to_owned(),
            request,
        },
    })
}

/// Realises `pkg` again as `record` says (for the later operations of an instance).
///
/// # Errors
/// As [`realise_package`].
pub fn reapply(
    pkg: &VnfPackage,
    record: &IntentRecord,
) -> std::result::Result<VnfPackage, DeployError> {
    realise_package(
        pkg,
        &record.flavour_id,
        record.region.clone(),
        record.request.clone(),
    )
    .map(|r| r.package)
}

/// Why a package could not be realised.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeployError {
    /// The package has no such flavour or no `BaseHOT`.
    #[error("{0}")]
    Package(Error),
    /// The realisation refused.
    #[error("realising the intent: {0}")]
    Realise(RealiseError),
}
