//! Filtering with reasons, valuation with a term breakdown, and the choice.
//!
//! [`select`] walks the regions of a [`CandidateFile`] in file order. A region is dropped
//! when any constraint fails, and carries every failing constraint as a typed
//! [`DropReason`] (constraint, measured value, bound) that displays as a sentence:
//! `owner vio does not support Burstable QoS`, `region R: 12 vCPU free < 16 needed`,
//! `region R: distance 1730 km > 1500 km (bound < 1500 km)`. The constraints, in order:
//! owner and region filters (`cloudOwner`, `cloudRegion`), cloud type, the owner's support
//! of each intent, the flavour, the over-subscription variant of a burstable intent, hosts for
//! HA (`max(2, instances)` distinct hosts; these two only when the owner supports the
//! intent at all, so that one missing capability gives one reason), free capacity (`instances ×` the flavour's reserved
//! amount; public clouds always pass), the distance bound, and a price when cost counts.
//!
//! Survivors are valued ([`Ranked::terms`], [`Ranked::contributions`]):
//! - [`Objective::Weighted`]: `wd·distance + wc·cost` (the design note);
//! - [`Objective::HasCasablanca`]: `w·(distance + cost)` (HAS's `distance_between` adds the
//!   candidate cost to the distance; one weight);
//! - [`Objective::Lexicographic`]: the terms compared in order (the reported `value` is still
//!   `wd·distance + wc·cost`, for information).
//!
//! The ranking is ascending; ties keep candidate order, so the choice is deterministic.
//! [`pareto`] gives the non-dominated survivors over (cost, distance).
//!
//! # Several VNFCs and links
//! [`select_each`] selects per VNFC, and [`linked_inputs`] turns the per-VNFC rankings into
//! the options a linked solver needs: for each VNFC, its surviving VIMs with price and
//! location. [`crate::intent::links`] (OSM PLA's model: VNFs coupled by links with latency
//! bounds, placed at minimum total price) takes its input from there once its API is fixed;
//! capacity shared by VNFCs placed in the same region is the linked solver's to account for,
//! as each per-VNFC selection sees the region's whole free capacity.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::candidates::{
    CandidateFile, Capacities, CapacitySource, CloudOwner, CostModel, Flavour, FreeCapacity,
    GeoPoint, Oversubscription, Region,
};
use super::policy::{
    fmt_num, CloudType, DistanceBound, Feature, Intent, Isolation, Objective, Policy, Term, Weights,
};
use crate::error::{Error, Location, Result};
use crate::zone::Resources;

/// What one VNFC asks for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Demand {
    /// The VNFC (must be among the policy's `resources` when it lists any).
    pub vnfc: String,
    /// The flavour (instance type) name.
    pub flavour: String,
    /// Number of instances (at least 1).
    pub instances: u64,
    /// The customer location distance is measured to.
    pub customer: Option<GeoPoint>,
}

impl Demand {
    /// A demand for `instances` instances of `flavour`, without a customer location.
    pub fn new(vnfc: impl Into<String>, flavour: impl Into<String>, instances: u64) -> Self {
        Demand {
            vnfc: vnfc.into(),
            flavour: flavour.into(),
            instances,
            customer: None,
        }
    }

    /// The same demand with a customer location.
    pub fn with_customer(mut self, at: GeoPoint) -> Self {
        self.customer = Some(at);
        self
    }
}

/// A candidate: a region of an owner.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CandidateId {
    /// Owner name.
    pub owner: String,
    /// Region id.
    pub region: String,
}

impl fmt::Display for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.region)
    }
}

/// A resource dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// vCPUs.
    Vcpus,
    /// Memory, MiB.
    MemoryMb,
    /// Disk, GiB.
    DiskGb,
}

impl ResourceKind {
    fn unit(self) -> &'static str {
        match self {
            ResourceKind::Vcpus => "vCPU",
            ResourceKind::MemoryMb => "MiB memory",
            ResourceKind::DiskGb => "GiB disk",
        }
    }
}

/// Why a candidate was dropped: the constraint, the measured value and the bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "constraint", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DropReason {
    /// The policy's `cloudOwner` does not list the owner.
    OwnerNotAllowed {
        /// Owner.
        owner: String,
        /// Owners the policy allows.
        allowed: Vec<String>,
    },
    /// The policy's `cloudRegion` does not list the region.
    RegionNotAllowed {
        /// Region.
        region: String,
        /// Regions the policy allows.
        allowed: Vec<String>,
    },
    /// The policy states its intents for other cloud types.
    CloudType {
        /// Owner.
        owner: String,
        /// The owner's cloud type.
        cloud_type: CloudType,
        /// The cloud types the policy names.
        named: Vec<CloudType>,
    },
    /// The owner does not support a feature an intent needs.
    Unsupported {
        /// Owner.
        owner: String,
        /// The feature.
        feature: Feature,
    },
    /// Neither the region nor its owner has the flavour.
    NoFlavour {
        /// Region.
        region: String,
        /// Flavour.
        flavour: String,
    },
    /// The flavour has no variant for the burstable percentage.
    NoOversubscription {
        /// Region.
        region: String,
        /// Flavour.
        flavour: String,
        /// Asked percentage.
        percent: u32,
        /// Percentages offered.
        offered: Vec<u32>,
    },
    /// Fewer hosts than HA needs.
    TooFewHosts {
        /// Region.
        region: String,
        /// Hosts.
        hosts: u64,
        /// Hosts needed.
        needed: u64,
    },
    /// HA asked, and the region's host count is unknown.
    HostsUnknown {
        /// Region.
        region: String,
        /// Hosts needed.
        needed: u64,
    },
    /// Not enough free capacity on one dimension.
    Capacity {
        /// Region.
        region: String,
        /// Dimension.
        resource: ResourceKind,
        /// Free amount.
        free: u64,
        /// Needed amount.
        needed: u64,
        /// Where the free amount came from (`declared`, `zone catalogue`, ...).
        source: String,
    },
    /// The capacity source gave no answer.
    CapacityUnknown {
        /// Region.
        region: String,
        /// Why.
        why: String,
    },
    /// The distance bound fails.
    Distance {
        /// Region.
        region: String,
        /// Measured distance, km.
        km: f64,
        /// The bound.
        bound: DistanceBound,
    },
    /// Cost counts and the owner's cost model has no price for the flavour.
    NoPrice {
        /// Owner.
        owner: String,
        /// Flavour.
        flavour: String,
    },
}

fn list<T: fmt::Display>(xs: &[T]) -> String {
    xs.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::OwnerNotAllowed { owner, allowed } => {
                write!(
                    f,
                    "owner {owner} is not among the policy's cloud owners ({})",
                    list(allowed)
                )
            }
            DropReason::RegionNotAllowed { region, allowed } => {
                write!(
                    f,
                    "region {region} is not among the policy's cloud regions ({})",
                    list(allowed)
                )
            }
            DropReason::CloudType {
                owner,
                cloud_type,
                named,
            } => write!(
                f,
                "owner {owner} is {cloud_type}; the policy states intents for {} only",
                list(named)
            ),
            DropReason::Unsupported { owner, feature } => {
                write!(f, "owner {owner} does not support {feature}")
            }
            DropReason::NoFlavour { region, flavour } => {
                write!(f, "region {region} has no flavour {flavour}")
            }
            DropReason::NoOversubscription {
                region,
                flavour,
                percent,
                offered,
            } => {
                write!(f, "region {region}: flavour {flavour} has no {percent}% over-subscription variant")?;
                if offered.is_empty() {
                    f.write_str(" (none offered)")
                } else {
                    write!(f, " (offered: {}%)", list(offered))
                }
            }
            DropReason::TooFewHosts {
                region,
                hosts,
                needed,
            } => write!(f, "region {region}: {hosts} hosts < {needed} needed for HA"),
            DropReason::HostsUnknown { region, needed } => {
                write!(
                    f,
                    "region {region}: host count unknown, {needed} needed for HA"
                )
            }
            DropReason::Capacity {
                region,
                resource,
                free,
                needed,
                source,
            } => write!(
                f,
                "region {region}: {free} {} free < {needed} needed ({source})",
                resource.unit()
            ),
            DropReason::CapacityUnknown { region, why } => {
                write!(f, "region {region}: free capacity unknown: {why}")
            }
            DropReason::Distance { region, km, bound } => {
                let rel = if *km > bound.km {
                    ">"
                } else if *km < bound.km {
                    "<"
                } else {
                    "="
                };
                write!(
                    f,
                    "region {region}: distance {} km {rel} {} km (bound {bound})",
                    fmt_num(*km),
                    fmt_num(bound.km)
                )
            }
            DropReason::NoPrice { owner, flavour } => {
                write!(f, "owner {owner} has no price for flavour {flavour}")
            }
        }
    }
}

/// A dropped candidate and every reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dropped {
    /// The candidate.
    pub candidate: CandidateId,
    /// The reasons (at least one).
    pub reasons: Vec<DropReason>,
}

/// The raw terms of a survivor.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Terms {
    /// Cost (`None` when cost evaluation is off).
    pub cost: Option<f64>,
    /// Distance in km (`None` without a customer location).
    pub distance_km: Option<f64>,
}

impl Terms {
    /// The value of `term` (absent terms count as 0).
    pub fn get(&self, term: Term) -> f64 {
        match term {
            Term::Cost => self.cost.unwrap_or(0.0),
            Term::Distance => self.distance_km.unwrap_or(0.0),
        }
    }
}

/// One term's part of a value: `weight × amount = value`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Contribution {
    /// The term.
    pub term: Term,
    /// Its weight.
    pub weight: f64,
    /// The raw amount.
    pub amount: f64,
    /// `weight × amount`.
    pub value: f64,
}

/// A surviving candidate, valued.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// 1-based rank.
    pub rank: usize,
    /// The candidate.
    pub candidate: CandidateId,
    /// Position in the candidate file (the tie-break).
    pub order: usize,
    /// The owner's cloud type.
    pub cloud_type: CloudType,
    /// The region's location.
    pub location: GeoPoint,
    /// The flavour.
    pub flavour: String,
    /// The burstable variant used, when the intent is burstable.
    pub oversubscription: Option<Oversubscription>,
    /// The intents applied.
    pub intents: Vec<Intent>,
    /// Raw terms.
    pub terms: Terms,
    /// The weighted parts of `value`.
    pub contributions: Vec<Contribution>,
    /// The sum of the contributions (the design note's net value; lower is better).
    pub value: f64,
    /// The sort key: `[value]`, or the terms in lexicographic order.
    pub key: Vec<f64>,
}

/// The outcome of [`select`]: the ranking (best first), the dropped candidates with reasons,
/// and the choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The demand.
    pub demand: Demand,
    /// The objective mode.
    pub objective: Objective,
    /// The weights used.
    pub weights: Weights,
    /// Survivors, best first.
    pub ranking: Vec<Ranked>,
    /// Dropped candidates, in candidate order.
    pub dropped: Vec<Dropped>,
    /// The choice (the first of the ranking), `None` when every candidate was dropped.
    pub chosen: Option<CandidateId>,
}

impl Selection {
    /// The chosen candidate's entry.
    pub fn chosen(&self) -> Option<&Ranked> {
        self.ranking.first()
    }

    /// The non-dominated survivors over (cost, distance), see [`pareto`].
    pub fn pareto(&self) -> Vec<Ranked> {
        pareto(&self.ranking)
    }

    /// The dropped entry of `owner/region`.
    pub fn dropped_of(&self, owner: &str, region: &str) -> Option<&Dropped> {
        self.dropped
            .iter()
            .find(|d| d.candidate.owner == owner && d.candidate.region == region)
    }
}

fn fmt_objective(o: &Objective, w: &Weights) -> String {
    match o {
        Objective::Weighted => format!(
            "weighted: wd·distance + wc·cost (wd = {}, wc = {})",
            fmt_num(w.distance),
            fmt_num(w.cost)
        ),
        Objective::HasCasablanca => format!(
            "has-casablanca: w·(distance + cost) (w = {})",
            fmt_num(w.distance)
        ),
        Objective::Lexicographic { order } => format!("lexicographic: {}", list(order)),
    }
}

impl fmt::Display for Ranked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}. {} ({}, {}",
            self.rank, self.candidate, self.cloud_type, self.flavour
        )?;
        if let Some(o) = &self.oversubscription {
            write!(f, ", {}% over-subscribed", o.percent)?;
        }
        write!(f, "): value {}", fmt_num(self.value))?;
        let parts: Vec<String> = self
            .contributions
            .iter()
            .map(|c| {
                let unit = if c.term == Term::Distance { " km" } else { "" };
                format!(
                    "{} × {} {}{unit}",
                    fmt_num(c.weight),
                    c.term,
                    fmt_num(c.amount)
                )
            })
            .collect();
        if !parts.is_empty() {
            write!(f, " = {}", parts.join(" + "))?;
        }
        if self.key.len() > 1 || self.key.first() != Some(&self.value) {
            write!(
                f,
                " [key {}]",
                self.key
                    .iter()
                    .map(|k| fmt_num(*k))
                    .collect::<Vec<_>>()
                    .join(", ")
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.display_limited(None).fmt(f)
    }
}

impl Selection {
    /// The selection as text with at most `limit` entries of the ranking and `limit` dropped
    /// candidates (every one for `None`); each cut list ends with a line saying how many more
    /// there are. 100,000 regions are 100,000 lines of ranking: a person reads the head.
    pub fn display_limited(&self, limit: Option<usize>) -> LimitedSelection<'_> {
        LimitedSelection {
            selection: self,
            limit,
        }
    }
}

/// [`Selection::display_limited`]: a selection printed with at most a given number of entries
/// per list.
#[derive(Clone, Copy, Debug)]
pub struct LimitedSelection<'a> {
    selection: &'a Selection,
    limit: Option<usize>,
}

/// Writes the `more not shown` line of a list of `total` entries of which `shown` were
/// printed, when some were not.
pub(crate) fn write_more(f: &mut fmt::Formatter<'_>, total: usize, shown: usize) -> fmt::Result {
    if total > shown {
        writeln!(f, "  … {} more not shown", total - shown)?;
    }
    Ok(())
}

/// The head of a list as text: at most `limit` entries (every one for `None`), one per line
/// indented by two spaces, then the `… N more not shown` line when some were not printed (the
/// rankings of [`Selection::display_limited`], and a caller's own lists such as a Pareto
/// front).
#[derive(Clone, Copy, Debug)]
pub struct Head<'a, T> {
    items: &'a [T],
    limit: Option<usize>,
}

impl<'a, T> Head<'a, T> {
    /// The first `limit` entries of `items` (every one for `None`).
    pub fn new(items: &'a [T], limit: Option<usize>) -> Self {
        Head { items, limit }
    }
}

impl<T: fmt::Display> fmt::Display for Head<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self.items.len().min(self.limit.unwrap_or(usize::MAX));
        for item in &self.items[..shown] {
            writeln!(f, "  {item}")?;
        }
        write_more(f, self.items.len(), shown)
    }
}

impl fmt::Display for LimitedSelection<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.selection;
        let limit = self.limit.unwrap_or(usize::MAX);
        writeln!(
            f,
            "{} × {} for {} — {}",
            s.demand.instances,
            s.demand.flavour,
            s.demand.vnfc,
            fmt_objective(&s.objective, &s.weights)
        )?;
        match &s.chosen {
            Some(c) => writeln!(f, "chosen: {c}")?,
            None => writeln!(f, "chosen: none (every candidate was dropped)")?,
        }
        if !s.ranking.is_empty() {
            writeln!(f, "ranking:")?;
            write!(f, "{}", Head::new(&s.ranking, self.limit))?;
        }
        if !s.dropped.is_empty() {
            writeln!(f, "dropped:")?;
            for d in s.dropped.iter().take(limit) {
                for (i, r) in d.reasons.iter().enumerate() {
                    if i == 0 {
                        writeln!(f, "  {}: {r}", d.candidate)?;
                    } else {
                        writeln!(f, "  {:w$}  {r}", "", w = d.candidate.to_string().len())?;
                    }
                }
            }
            write_more(f, s.dropped.len(), s.dropped.len().min(limit))?;
        }
        Ok(())
    }
}

/// The non-dominated entries over (cost, distance): no other entry is at most as costly and
/// at most as far and better on one of them. Entries keep their order; equal entries are all
/// kept. Absent terms count as 0.
///
/// `O(n log n)`: the entries sorted by (cost, distance), one sweep keeps those strictly
/// nearer than every cheaper entry (or equal to the best of their own cost). A scan of every
/// pair was quadratic: 100,000 regions are 10^10 comparisons.
pub fn pareto(ranked: &[Ranked]) -> Vec<Ranked> {
    let pt = |r: &Ranked| (r.terms.get(Term::Cost), r.terms.get(Term::Distance));
    let mut order: Vec<usize> = (0..ranked.len()).collect();
    order.sort_by(|&a, &b| {
        let ((ca, da), (cb, db)) = (pt(&ranked[a]), pt(&ranked[b]));
        ca.total_cmp(&cb).then(da.total_cmp(&db))
    });
    let mut keep = vec![false; ranked.len()];
    // The least distance among strictly cheaper entries, and the least within the current cost.
    let mut best_cheaper = f64::INFINITY;
    let mut i = 0;
    while i < order.len() {
        let cost = pt(&ranked[order[i]]).0;
        let mut j = i;
        while j < order.len() && pt(&ranked[order[j]]).0.total_cmp(&cost).is_eq() {
            j += 1;
        }
        // Sorted by distance within the cost: the first is the least of this cost.
        let least = pt(&ranked[order[i]]).1;
        for &k in &order[i..j] {
            let d = pt(&ranked[k]).1;
            // Dominated by a cheaper entry at most as far, or by one of this cost nearer.
            keep[k] = d < best_cheaper && d.total_cmp(&least).is_eq();
        }
        best_cheaper = best_cheaper.min(least);
        i = j;
    }
    ranked
        .iter()
        .zip(keep)
        .filter(|&(_, k)| k)
        .map(|(r, _)| r.clone())
        .collect()
}

fn invalid(field: &str, message: String) -> Error {
    Error::invalid(Location::default().with_field(field), message)
}

/// Filters, values and ranks the candidates for one demand.
///
/// # Errors
/// [`Error::Invalid`] when the demand does not fit the policy: zero instances, a VNFC the
/// policy does not cover, or no customer location while the objective or the distance bound
/// needs one. A "no" (every candidate dropped) is not an error: `chosen` is `None`.
pub fn select(
    policy: &Policy,
    candidates: &CandidateFile,
    demand: &Demand,
    capacities: &Capacities,
) -> Result<Selection> {
    if demand.instances == 0 {
        return Err(invalid(
            "demand.instances",
            "value 0: expected at least 1".to_owned(),
        ));
    }
    if !policy.resources.is_empty() && !policy.resources.contains(&demand.vnfc) {
        return Err(invalid(
            "demand.vnfc",
            format!(
                "value {:?}: expected a VNFC of the policy's resources ({})",
                demand.vnfc,
                policy.resources.join(", ")
            ),
        ));
    }
    if demand.customer.is_none() && policy.needs_distance() {
        return Err(invalid(
            "demand.customer",
            "missing: the policy's objective or distance bound needs the customer location"
                .to_owned(),
        ));
    }
    let mut ranking = Vec::new();
    let mut dropped = Vec::new();
    let owners = candidates.owner_index();
    for (order, region) in candidates.regions.iter().enumerate() {
        let Some(owner) = owners.get(region.owner.as_str()).copied() else {
            continue; // the file validates owners; unreachable for parsed files
        };
        match evaluate(policy, owner, region, demand, capacities, order) {
            Ok(r) => ranking.push(r),
            Err(reasons) => dropped.push(Dropped {
                candidate: CandidateId {
                    owner: owner.name.clone(),
                    region: region.id.clone(),
                },
                reasons,
            }),
        }
    }
    let mut ranking = sorted_by_key(ranking);
    for (i, r) in ranking.iter_mut().enumerate() {
        r.rank = i + 1;
    }
    Ok(Selection {
        demand: demand.clone(),
        objective: policy.objective.clone(),
        weights: policy.weights,
        chosen: ranking.first().map(|r| r.candidate.clone()),
        ranking,
        dropped,
    })
}

/// `ranking` ordered by key, then by position in the candidate file (a total order: the
/// positions differ). The positions are sorted, not the entries (an entry is a few hundred
/// bytes; moving 100,000 of them through a merge sort was a tenth of a selection), and the
/// entries then swapped into place along the permutation's cycles (at most one swap each).
fn sorted_by_key(mut ranking: Vec<Ranked>) -> Vec<Ranked> {
    let mut idx: Vec<usize> = (0..ranking.len()).collect();
    idx.sort_unstable_by(|&a, &b| {
        let (a, b) = (&ranking[a], &ranking[b]);
        a.key
            .iter()
            .zip(&b.key)
            .map(|(x, y)| x.total_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.order.cmp(&b.order))
    });
    // `idx[j]` is where the entry that belongs at `j` is now; `usize::MAX` marks a place done.
    for start in 0..idx.len() {
        let mut j = start;
        while idx[j] != usize::MAX {
            let from = idx[j];
            idx[j] = usize::MAX;
            if from == start {
                break;
            }
            ranking.swap(j, from);
            j = from;
        }
    }
    ranking
}

fn evaluate(
    policy: &Policy,
    owner: &CloudOwner,
    region: &Region,
    demand: &Demand,
    caps: &Capacities,
    order: usize,
) -> std::result::Result<Ranked, Vec<DropReason>> {
    let mut e = Evaluation {
        policy,
        owner,
        region,
        demand,
        reasons: Vec::new(),
    };
    e.allowed();
    let intents = e.intents();
    let flavour = super::candidates::region_flavour(Some(owner), region, &demand.flavour);
    let variant = e.oversubscription(flavour, &intents);
    let free = caps.free(region);
    if intents.contains(&Intent::HighAvailability)
        && owner.supports.contains(&Feature::HighAvailability)
    {
        e.enough_hosts(&free);
    }
    if let (true, Some(fl)) = (policy.capacity_check, flavour) {
        e.enough_capacity(fl, free);
    }
    let distance_km = e.distance_km();
    let cost = if policy.cost_evaluation.enabled {
        e.cost(&intents)
    } else {
        None
    };
    if !e.reasons.is_empty() {
        return Err(e.reasons);
    }
    let terms = Terms { cost, distance_km };
    let (contributions, value) = contributions(policy.weights, &terms);
    let key = match &policy.objective {
        Objective::Weighted | Objective::HasCasablanca => vec![value],
        Objective::Lexicographic { order } => order.iter().map(|t| terms.get(*t)).collect(),
    };
    Ok(Ranked {
        rank: 0,
        candidate: CandidateId {
            owner: owner.name.clone(),
            region: region.id.clone(),
        },
        order,
        cloud_type: owner.cloud_type.clone(),
        location: region.location,
        flavour: demand.flavour.clone(),
        oversubscription: variant,
        intents,
        terms,
        contributions,
        value,
        key,
    })
}

/// The weighted terms (`weights`) of a survivor, and their sum.
fn contributions(weights: Weights, terms: &Terms) -> (Vec<Contribution>, f64) {
    let w = weights;
    let mut contributions = Vec::new();
    if let Some(d) = terms.distance_km {
        contributions.push(Contribution {
            term: Term::Distance,
            weight: w.distance,
            amount: d,
            value: w.distance * d,
        });
    }
    if let Some(c) = terms.cost {
        contributions.push(Contribution {
            term: Term::Cost,
            weight: w.cost,
            amount: c,
            value: w.cost * c,
        });
    }
    let value: f64 = contributions.iter().map(|c| c.value).sum();
    (contributions, value)
}

/// One candidate region of a cloud owner judged for a demand under a policy: each check adds
/// the reasons it finds to drop the region, in the order [`select`] reports them.
struct Evaluation<'a> {
    policy: &'a Policy,
    owner: &'a CloudOwner,
    region: &'a Region,
    demand: &'a Demand,
    reasons: Vec<DropReason>,
}

impl Evaluation<'_> {
    /// The policy's allow-lists of owners and regions.
    fn allowed(&mut self) {
        let (policy, owner, region) = (self.policy, self.owner, self.region);
        if let Some(allowed) = &policy.owners {
            if !allowed.contains(&owner.name) {
                self.reasons.push(DropReason::OwnerNotAllowed {
                    owner: owner.name.clone(),
                    allowed: allowed.clone(),
                });
            }
        }
        if let Some(allowed) = &policy.regions {
            if !allowed.contains(&region.id) {
                self.reasons.push(DropReason::RegionNotAllowed {
                    region: region.id.clone(),
                    allowed: allowed.clone(),
                });
            }
        }
    }

    /// The intents the policy has for the owner's cloud type, each of a feature the owner
    /// supports.
    fn intents(&mut self) -> Vec<Intent> {
        let (policy, owner) = (self.policy, self.owner);
        let intents = match policy.intents_for(&owner.cloud_type) {
            Some(i) => i,
            None => {
                self.reasons.push(DropReason::CloudType {
                    owner: owner.name.clone(),
                    cloud_type: owner.cloud_type.clone(),
                    named: policy.named_cloud_types(),
                });
                Vec::new()
            }
        };
        for i in &intents {
            if !owner.supports.contains(&i.feature()) {
                self.reasons.push(DropReason::Unsupported {
                    owner: owner.name.clone(),
                    feature: i.feature(),
                });
            }
        }
        intents
    }

    /// The region's flavour `flavour` exists, and has the over-subscription variant a
    /// Burstable isolation intent asks for, which it returns.
    fn oversubscription(
        &mut self,
        flavour: Option<&Flavour>,
        intents: &[Intent],
    ) -> Option<Oversubscription> {
        let (owner, region) = (self.owner, self.region);
        let mut variant = None;
        if flavour.is_none() {
            self.reasons.push(DropReason::NoFlavour {
                region: region.id.clone(),
                flavour: self.demand.flavour.clone(),
            });
        }
        if let Some(fl) = flavour {
            for i in intents {
                if let (
                    true,
                    Intent::Isolation {
                        isolation: Isolation::Burstable { percent },
                    },
                ) = (owner.supports.contains(&i.feature()), i)
                {
                    match fl.variant(*percent) {
                        Some(v) => variant = Some(v.clone()),
                        None => self.reasons.push(DropReason::NoOversubscription {
                            region: region.id.clone(),
                            flavour: fl.name.clone(),
                            percent: *percent,
                            offered: fl.oversubscription.iter().map(|o| o.percent).collect(),
                        }),
                    }
                }
            }
        }
        variant
    }

    /// High availability: the region has a host for each instance, and at least two.
    fn enough_hosts(&mut self, free: &FreeCapacity) {
        let region = self.region;
        let needed = self.demand.instances.max(2);
        let hosts = region.hosts.or(match free {
            FreeCapacity::Free { hosts, .. } => *hosts,
            _ => None,
        });
        match hosts {
            Some(h) if h < needed => self.reasons.push(DropReason::TooFewHosts {
                region: region.id.clone(),
                hosts: h,
                needed,
            }),
            Some(_) => {}
            None if region.capacity == CapacitySource::Public => {}
            None => self.reasons.push(DropReason::HostsUnknown {
                region: region.id.clone(),
                needed,
            }),
        }
    }

    /// The region's free capacity holds the demand's instances of flavour `fl`.
    fn enough_capacity(&mut self, fl: &Flavour, free: FreeCapacity) {
        let region = self.region;
        let n = self.demand.instances;
        let need = Resources::new(
            fl.resources.vcpus.saturating_mul(n),
            fl.resources.memory_mb.saturating_mul(n),
            fl.resources.disk_gb.saturating_mul(n),
        );
        match free {
            FreeCapacity::Unlimited => {}
            FreeCapacity::Unknown(why) => self.reasons.push(DropReason::CapacityUnknown {
                region: region.id.clone(),
                why,
            }),
            FreeCapacity::Free { free, .. } => {
                for (resource, have, want) in [
                    (ResourceKind::Vcpus, free.vcpus, need.vcpus),
                    (ResourceKind::MemoryMb, free.memory_mb, need.memory_mb),
                    (ResourceKind::DiskGb, free.disk_gb, need.disk_gb),
                ] {
                    if have < want {
                        self.reasons.push(DropReason::Capacity {
                            region: region.id.clone(),
                            resource,
                            free: have,
                            needed: want,
                            source: region.capacity.to_string(),
                        });
                    }
                }
            }
        }
    }

    /// The distance to the customer, within the policy's bound.
    fn distance_km(&mut self) -> Option<f64> {
        let region = self.region;
        let distance_km = self
            .demand
            .customer
            .map(|c| c.distance_km(&region.location));
        if let (Some(bound), Some(km)) = (self.policy.distance, distance_km) {
            if !bound.operator.holds(km, bound.km) {
                self.reasons.push(DropReason::Distance {
                    region: region.id.clone(),
                    km,
                    bound,
                });
            }
        }
        distance_km
    }

    /// The cost of the demand's instances: the region's unit price, else the owner's (fixed,
    /// or per instance type with the discounts of the feature groups `intents` use).
    fn cost(&mut self, intents: &[Intent]) -> Option<f64> {
        let (policy, owner, demand) = (self.policy, self.owner, self.demand);
        let n = demand.instances as f64;
        let unit = match (self.region.cost, &owner.cost) {
            (Some(c), _) => Some(c),
            (None, CostModel::Fixed(c)) => Some(*c),
            (
                None,
                CostModel::PerInstanceType {
                    prices,
                    feature_group_discounts,
                },
            ) => prices.get(&demand.flavour).map(|p| {
                let mut p = *p;
                if policy.cost_evaluation.feature_groups {
                    let used: Vec<Feature> = intents.iter().map(Intent::feature).collect();
                    for d in feature_group_discounts {
                        if !d.features.is_empty() && d.features.iter().all(|f| used.contains(f)) {
                            p *= 1.0 - d.percent / 100.0;
                        }
                    }
                }
                p
            }),
        };
        match unit {
            Some(u) => Some(u * n),
            None => {
                self.reasons.push(DropReason::NoPrice {
                    owner: owner.name.clone(),
                    flavour: demand.flavour.clone(),
                });
                None
            }
        }
    }
}

/// [`select`] for each demand (one per VNFC), in order.
///
/// # Errors
/// The first error of [`select`].
pub fn select_each(
    policy: &Policy,
    candidates: &CandidateFile,
    demands: &[Demand],
    capacities: &Capacities,
) -> Result<Vec<Selection>> {
    demands
        .iter()
        .map(|d| select(policy, candidates, d, capacities))
        .collect()
}

/// One VIM a VNFC may go to, as the linked solver sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VimOption {
    /// The candidate (owner/region: the VIM).
    pub vim: CandidateId,
    /// Its price: the valued survivor's `value` (cost and distance as the policy weighs
    /// them), what a minimum-price placement adds up.
    pub price: f64,
    /// Where it is (for link latency estimates).
    pub location: GeoPoint,
    /// The raw terms.
    pub terms: Terms,
}

/// The options of one VNFC for the linked solver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VnfcOptions {
    /// The VNFC.
    pub vnfc: String,
    /// Its surviving VIMs, best first.
    pub options: Vec<VimOption>,
}

/// The per-VNFC inputs of [`crate::intent::links`]: each VNFC's survivors after filtering, with
/// a price and a location. The links (latency, jitter bounds) come from the service
/// descriptor, not from here.
pub fn linked_inputs(selections: &[Selection]) -> Vec<VnfcOptions> {
    selections
        .iter()
        .map(|s| VnfcOptions {
            vnfc: s.demand.vnfc.clone(),
            options: s
                .ranking
                .iter()
                .map(|r| VimOption {
                    vim: r.candidate.clone(),
                    price: r.value,
                    location: r.location,
                    terms: r.terms,
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn ranked(c: f64, d: f64, order: usize) -> Ranked {
        Ranked {
            rank: order + 1,
            candidate: CandidateId {
                owner: format!("o{order}"),
                region: "r".to_owned(),
            },
            order,
            cloud_type: CloudType::OpenStack,
            location: GeoPoint::new(0.0, 0.0),
            flavour: "f".to_owned(),
            oversubscription: None,
            intents: Vec::new(),
            terms: Terms {
                cost: Some(c),
                distance_km: Some(d),
            },
            contributions: Vec::new(),
            value: 0.0,
            key: vec![0.0],
        }
    }

    #[test]
    fn pareto_drops_dominated_and_keeps_equal_points() {
        let r = vec![
            ranked(100.0, 100.0, 0),
            ranked(150.0, 80.0, 1),
            ranked(200.0, 200.0, 2),
            ranked(100.0, 100.0, 3),
            ranked(100.0, 120.0, 4),
        ];
        let front: Vec<usize> = pareto(&r).iter().map(|x| x.order).collect();
        assert_eq!(front, vec![0, 1, 3]);
    }

    proptest::proptest! {
        /// The sweep keeps exactly what the definition (no other entry at most as costly and
        /// at most as far, and better on one) keeps, on small grids where ties are common.
        #[test]
        fn pareto_is_the_definition(points in proptest::collection::vec((0u8..6, 0u8..6), 0..40)) {
            let r: Vec<Ranked> = points
                .iter()
                .enumerate()
                .map(|(i, &(c, d))| ranked(f64::from(c), f64::from(d), i))
                .collect();
            let naive: Vec<usize> = r
                .iter()
                .filter(|a| {
                    let (ca, da) = (a.terms.get(Term::Cost), a.terms.get(Term::Distance));
                    !r.iter().any(|b| {
                        let (cb, db) = (b.terms.get(Term::Cost), b.terms.get(Term::Distance));
                        cb <= ca && db <= da && (cb < ca || db < da)
                    })
                })
                .map(|x| x.order)
                .collect();
            let fast: Vec<usize> = pareto(&r).iter().map(|x| x.order).collect();
            proptest::prop_assert_eq!(fast, naive);
        }
    }

    #[test]
    fn distance_reason_reads_as_a_sentence() {
        let r = DropReason::Distance {
            region: "R".to_owned(),
            km: 1730.0,
            bound: DistanceBound {
                operator: super::super::policy::Comparison::Lt,
                km: 1500.0,
            },
        };
        assert_eq!(
            r.to_string(),
            "region R: distance 1730 km > 1500 km (bound < 1500 km)"
        );
    }
}
