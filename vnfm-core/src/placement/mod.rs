//! The placement solver: a zone and a host for every new resource, under affinity and
//! anti-affinity constraints, capacity, pinned and excluded zones.
//!
//! This is the engine of the local granter (SOL003 grants with `placementConstraints` and
//! `fallbackBestEffort`, as in Tacker's "Enhance Placement Process") and of AZ reselection. It
//! is pure: no IO, and randomness only from the caller's seed.
//!
//! ## Model
//!
//! - [`Item`]: a resource to place (a SOL003 resource definition id, its VDU, its demand, and
//!   optionally a zone it is pinned to).
//! - [`ExistingMember`]: a resource already placed (id, zone, host). It never moves, counts for
//!   the constraints that name it, and has already consumed its host's capacity (the free
//!   capacity the catalogue reports is net of it).
//! - [`Constraint`]: affinity or anti-affinity at [`Scope::Zone`] or [`Scope::Host`] over item
//!   and existing-member ids, with `fallback_best_effort` (see [`crate::constraint`] for how the
//!   SOL003 scopes map onto these two).
//! - Candidates: the [`ComputeZone`]s of the catalogue. Only zones that are
//!   [candidates] and not in the excluded set (zones that failed in
//!   an earlier attempt) are ever chosen, and within them only `available` hosts. A host's
//!   free capacity ([`ComputeHost::free`](crate::zone::ComputeHost::free)) bounds what goes on
//!   it; when it is unknown, capacity is not a bound there.
//! - [`Selection`]: [`Selection::Random`] picks a random compliant zone, then a random
//!   compliant host in it (uniform among the compliant ones, from a [`ChaCha8Rng`] seeded with
//!   [`PlacementRequest::seed`]; every iteration is in input order, so the same request and
//!   seed give the same result). [`Selection::CapacityAware`] is *worst-fit*: it takes the zone
//!   with the most free capacity, then the host with the most free capacity in it, comparing
//!   free vCPUs, then memory, then disk, unknown capacity counting as unbounded; ties go to
//!   the zone or host listed first. Worst-fit spreads load and keeps room for later scale-out.
//! - Result: a [`Placement`]: an [`Assignment`] (zone and host) per item, in item order, and the
//!   [`Relaxation`]s of best-effort constraints that could not be met, each saying which members
//!   share (or are split over) which domain and why.
//!
//! ## Semantics
//!
//! Hard affinity merges resources (union-find): host affinity into host groups, zone and host
//! affinity into zone groups (same host implies same zone). Anti-affinity separates the groups:
//! zone-scoped rules decide zones, host-scoped rules decide hosts within zones (members of a
//! host anti-affinity rule may share a zone). A group containing an existing member is pinned
//! to its zone and host. A host group's total demand must fit one host.
//!
//! The search is a backtracking search over host groups: zone groups in order (pinned first,
//! then the most constrained, then the largest), each followed by its host groups; the first
//! host group of a zone group decides the zone. Anti-affinity is checked against per-constraint
//! occupancy counts, capacity against per-host and per-zone free amounts, and a counting bound
//! (a hard anti-affinity rule needs as many free domains as groups still to place) prunes at
//! the start. The search is complete: when a compliant assignment with enough capacity exists
//! among the candidate hosts, it is found (within [`PlacementRequest::step_limit`] values
//! tried; [`PlacementError::SearchLimit`] otherwise). A placement costs
//! O(constraints of the resource) when the first draws succeed, not O(hosts) or O(members).
//!
//! ## Best effort
//!
//! 1. Solve with every constraint hard. Done if that works.
//! 2. If it fails even with no constraint at all, capacity is exhausted:
//!    [`PlacementError::CapacityExhausted`].
//! 3. Otherwise solve again with the best-effort constraints *soft*: values that break none of
//!    them are tried first, then the others by increasing cost (pairs of anti-affinity members
//!    sharing a domain, affinity members left elsewhere), so each relaxed rule is broken as
//!    little as the greedy order allows.
//! 4. Then restore: each relaxed constraint, in input order, is made hard again if a solution
//!    still exists with it. The relaxed set is thus minimal by inclusion: no reported
//!    constraint could have been kept on its own. Everything is deterministic.
//!
//! If step 3 fails, the hard constraints conflict: [`PlacementError::Infeasible`] names a
//! minimal conflicting subset (a deletion filter over them) and their members.
//!
//! ```
//! use vnfm_core::constraint::{Constraint, Scope};
//! use vnfm_core::placement::{Item, PlacementRequest, Selection};
//! use vnfm_core::zone::{ComputeHost, ComputeZone, Resources};
//!
//! let zone = |name: &str, host: &str| ComputeZone {
//!     name: name.into(),
//!     available: true,
//!     hosts: Some(vec![ComputeHost { name: host.into(), available: true, free: None }]),
//! };
//! let small = Resources::new(1, 512, 1);
//! let placement = PlacementRequest::new(vec![zone("AZ-1", "c1"), zone("AZ-2", "c2")])
//!     .with_items(vec![Item::new("VDU1-0", "VDU1", small), Item::new("VDU1-1", "VDU1", small)])
//!     .with_constraints(vec![
//!         Constraint::anti_affinity("spread", Scope::Zone, ["VDU1-0", "VDU1-1"]),
//!     ])
//!     .with_selection(Selection::Random)
//!     .with_seed(7)
//!     .place()?;
//! assert_ne!(placement.assignments[0].zone, placement.assignments[1].zone);
//! assert!(placement.relaxed.is_empty());
//! # Ok::<(), vnfm_core::placement::PlacementError>(())
//! ```
//!
//! [`ChaCha8Rng`]: rand_chacha::ChaCha8Rng
//! [`Constraint`]: crate::constraint::Constraint
//! [`ComputeZone`]: crate::zone::ComputeZone
//! [candidates]: crate::zone::ComputeZone::is_candidate

mod index;
mod request;
mod search;

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::constraint::{ConstraintKind, Scope};
use crate::error::Error;
use crate::id::{HostId, VduId, ZoneId};
use crate::zone::Resources;

use index::Index;
use search::{solve, Mode, Outcome};

pub use request::{ExistingMember, Item, PlacementRequest, Selection, DEFAULT_STEP_LIMIT};

/// Values tried by each search that explains a failure or restores a relaxed constraint.
const AUX_STEP_LIMIT: u64 = 200_000;

impl PlacementRequest {
    /// Places every item; see the [module docs](self) for the semantics.
    ///
    /// # Errors
    /// - [`PlacementError::Invalid`] for a malformed request (duplicate ids, zone or host
    ///   names; unknown constraint members; an existing member on a host the catalogue lists
    ///   in another zone), naming the field.
    /// - [`PlacementError::NoCandidateZone`] when items are to be placed but no zone is a
    ///   non-excluded candidate.
    /// - [`PlacementError::CapacityExhausted`] when the items do not fit even without
    ///   constraints.
    /// - [`PlacementError::Infeasible`] when constraints that may not be relaxed (or pinned
    ///   zones) cannot be met.
    /// - [`PlacementError::SearchLimit`] when the search gave up before an answer.
    pub fn place(&self) -> Result<Placement, PlacementError> {
        place(self)
    }
}

/// Where one item goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    /// The item's id.
    pub id: String,
    /// The item's VDU.
    pub vdu_id: VduId,
    /// The zone.
    pub zone: ZoneId,
    /// The compute host.
    pub host: HostId,
}

/// Members of a relaxed constraint that share a domain (anti-affinity) or one part of a split
/// group (affinity).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    /// The zone or host name.
    pub domain: String,
    /// The members there, in constraint order.
    pub members: Vec<String>,
}

/// A best-effort constraint that was relaxed, and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Relaxation {
    /// The constraint's name.
    pub constraint: String,
    /// Affinity or anti-affinity.
    pub kind: ConstraintKind,
    /// Its scope.
    pub scope: Scope,
    /// For anti-affinity, the domains holding more than one member; for affinity, every
    /// domain the members ended up in.
    pub violations: Vec<Violation>,
    /// Why it had to be relaxed.
    pub reason: String,
}

impl fmt::Display for Relaxation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} at {} scope: ",
            self.kind, self.constraint, self.scope
        )?;
        match self.kind {
            ConstraintKind::AntiAffinity => {
                for (i, v) in self.violations.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{} share {}", and_list(&v.members), v.domain)?;
                }
            }
            ConstraintKind::Affinity => {
                f.write_str("split over ")?;
                let parts: Vec<String> = self
                    .violations
                    .iter()
                    .map(|v| format!("{} ({})", v.domain, v.members.join(", ")))
                    .collect();
                f.write_str(&and_list(&parts))?;
            }
        }
        write!(f, " because {}", self.reason)
    }
}

/// The solver's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// One per item, in item order.
    pub assignments: Vec<Assignment>,
    /// Best-effort constraints that were relaxed, in constraint order.
    pub relaxed: Vec<Relaxation>,
}

impl Placement {
    /// The assignment of item `id`.
    pub fn assignment(&self, id: &str) -> Option<&Assignment> {
        self.assignments.iter().find(|a| a.id == id)
    }

    /// True when some constraint was relaxed.
    pub fn is_relaxed(&self) -> bool {
        !self.relaxed.is_empty()
    }
}

/// Why no placement was produced.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    /// The request is malformed.
    #[error("invalid placement request")]
    Invalid(#[source] Error),
    /// No zone can be chosen at all.
    #[error(
        "no candidate zone: {listed} zone(s) listed, {excluded} excluded, none available with \
         an available compute host"
    )]
    NoCandidateZone {
        /// Zones in the catalogue.
        listed: usize,
        /// Zones excluded by the request.
        excluded: usize,
    },
    /// The items do not fit in the candidate hosts even without constraints.
    #[error("capacity exhausted: {detail}")]
    CapacityExhausted {
        /// Items that fit no candidate host on their own (empty when only the total does not
        /// fit).
        items: Vec<String>,
        /// What does not fit where.
        detail: String,
    },
    /// Constraints that may not be relaxed (or pinned zones) cannot be met together.
    #[error(
        "placement infeasible: {} cannot be met for {}: {reason}",
        constraint_list(constraints),
        short_list(resources)
    )]
    Infeasible {
        /// A minimal set of conflicting constraints (names), empty when a pin alone conflicts.
        constraints: Vec<String>,
        /// The resources they are about.
        resources: Vec<String>,
        /// Why.
        reason: String,
    },
    /// The search tried `steps` values without an answer.
    #[error(
        "placement search gave up after {steps} steps without an answer: raise the step limit \
         or simplify the constraints"
    )]
    SearchLimit {
        /// Values tried.
        steps: u64,
    },
}

impl PlacementError {
    /// True for [`PlacementError::CapacityExhausted`] and
    /// [`PlacementError::NoCandidateZone`] (the CLI's exit code 4).
    pub fn is_capacity(&self) -> bool {
        matches!(
            self,
            PlacementError::CapacityExhausted { .. } | PlacementError::NoCandidateZone { .. }
        )
    }

    /// True for [`PlacementError::Infeasible`] (the CLI's exit code 3).
    pub fn is_infeasible(&self) -> bool {
        matches!(self, PlacementError::Infeasible { .. })
    }
}

fn and_list<S: AsRef<str>>(xs: &[S]) -> String {
    match xs {
        [] => String::new(),
        [a] => a.as_ref().to_owned(),
        [init @ .., last] => format!(
            "{} and {}",
            init.iter()
                .map(AsRef::as_ref)
                .collect::<Vec<_>>()
                .join(", "),
            last.as_ref()
        ),
    }
}

fn short_list(xs: &[String]) -> String {
    const SHOWN: usize = 8;
    if xs.len() <= SHOWN {
        and_list(xs)
    } else {
        format!(
            "{} and {} more",
            xs.iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            xs.len() - SHOWN
        )
    }
}

fn constraint_list(xs: &[String]) -> String {
    match xs {
        [] => "the pinned zone".to_owned(),
        [one] => format!("constraint {one:?}"),
        _ => {
            let quoted: Vec<String> = xs.iter().map(|x| format!("{x:?}")).collect();
            format!("constraints {}", and_list(&quoted))
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn place(req: &PlacementRequest) -> Result<Placement, PlacementError> {
    let ix = Index::build(req).map_err(PlacementError::Invalid)?;
    if ix.n_items > 0 && ix.cand_zones.is_empty() {
        return Err(PlacementError::NoCandidateZone {
            listed: req.zones.len(),
            excluded: req
                .zones
                .iter()
                .filter(|z| req.excluded.contains(&z.name))
                .count(),
        });
    }
    check_pins(req, &ix)?;
    let n = ix.cons.len();
    let run = |modes: &[Mode], limit: u64| solve(&ix, modes, req.selection, req.seed, limit);

    let all_hard = vec![Mode::Hard; n];
    let first = run(&all_hard, req.step_limit);
    if let Outcome::Found(hosts) = first {
        return Ok(result(&ix, req, &hosts, Vec::new()));
    }
    match run(&vec![Mode::Off; n], req.step_limit) {
        Outcome::Found(_) => {}
        Outcome::Infeasible => return Err(capacity_error(&ix)),
        Outcome::Limit => {
            return Err(PlacementError::SearchLimit {
                steps: req.step_limit,
            })
        }
    }
    let any_fallback = ix.cons.iter().any(|c| c.fallback);
    if any_fallback {
        let mut modes: Vec<Mode> = ix
            .cons
            .iter()
            .map(|c| if c.fallback { Mode::Soft } else { Mode::Hard })
            .collect();
        match run(&modes, req.step_limit) {
            Outcome::Found(mut hosts) => {
                let mut tried = vec![false; n];
                while let Some(c) = (0..n).find(|c| {
                    !tried[*c] && modes[*c] == Mode::Soft && !violations(&ix, *c, &hosts).is_empty()
                }) {
                    tried[c] = true;
                    modes[c] = Mode::Hard;
                    match run(&modes, AUX_STEP_LIMIT.min(req.step_limit)) {
                        Outcome::Found(better) => hosts = better,
                        Outcome::Infeasible | Outcome::Limit => modes[c] = Mode::Soft,
                    }
                }
                let relaxed = (0..n)
                    .filter_map(|c| relaxation(&ix, req, c, &hosts))
                    .collect();
                return Ok(result(&ix, req, &hosts, relaxed));
            }
            Outcome::Infeasible => {}
            Outcome::Limit => {
                return Err(PlacementError::SearchLimit {
                    steps: req.step_limit,
                })
            }
        }
    } else if matches!(first, Outcome::Limit) {
        return Err(PlacementError::SearchLimit {
            steps: req.step_limit,
        });
    }
    Err(explain(&ix, req))
}

/// Items pinned to a zone that is unknown, excluded or not a candidate.
fn check_pins(req: &PlacementRequest, ix: &Index<'_>) -> Result<(), PlacementError> {
    for (i, item) in req.items.iter().enumerate() {
        let Some(zone) = &item.zone else { continue };
        let why = match ix.item_pin.get(i).copied().flatten() {
            None => "which is not in the zone catalogue",
            Some(_) if req.excluded.contains(zone) => "which is excluded",
            Some(z) if ix.zone_candidate.get(z as usize) != Some(&true) => {
                "which is not available or has no available compute host"
            }
            Some(_) => continue,
        };
        return Err(PlacementError::Infeasible {
            constraints: Vec::new(),
            resources: vec![item.id.clone()],
            reason: format!(
                "item {:?} is pinned to zone {:?}, {why}",
                item.id,
                zone.as_str()
            ),
        });
    }
    Ok(())
}

fn capacity_error(ix: &Index<'_>) -> PlacementError {
    let mut items = Vec::new();
    let mut total = Resources::default();
    for i in 0..ix.n_items {
        let d = ix.demand.get(i).copied().unwrap_or_default();
        total = total.saturating_add(&d);
        let zones: Vec<u32> = match ix.item_pin.get(i).copied().flatten() {
            Some(z) => vec![z],
            None => ix.cand_zones.clone(),
        };
        let fits = zones.iter().any(|z| {
            ix.zone_hosts
                .get(*z as usize)
                .into_iter()
                .flatten()
                .any(|h| {
                    ix.host_free
                        .get(*h as usize)
                        .copied()
                        .flatten()
                        .is_none_or(|f| f.fits(&d))
                })
        });
        if !fits {
            items.push(
                ix.member_id(u32::try_from(i).unwrap_or(u32::MAX))
                    .to_owned(),
            );
        }
    }
    let detail = if items.is_empty() {
        let free = ix
            .cand_zones
            .iter()
            .flat_map(|z| ix.zone_hosts.get(*z as usize).into_iter().flatten())
            .filter_map(|h| ix.host_free.get(*h as usize).copied().flatten())
            .fold(Resources::default(), |a, f| a.saturating_add(&f));
        format!(
            "{} demanding {} vCPU, {} MiB, {} GiB in total do not fit the free capacity of the \
             candidate hosts ({} vCPU, {} MiB, {} GiB known free)",
            plural(ix.n_items, "item"),
            total.vcpus,
            total.memory_mb,
            total.disk_gb,
            free.vcpus,
            free.memory_mb,
            free.disk_gb
        )
    } else {
        format!("no candidate host has room for {}", short_list(&items))
    };
    PlacementError::CapacityExhausted { items, detail }
}

/// A minimal set of hard constraints that conflict (deletion filter), as an error.
fn explain(ix: &Index<'_>, req: &PlacementRequest) -> PlacementError {
    let n = ix.cons.len();
    let limit = AUX_STEP_LIMIT.min(req.step_limit);
    let mut modes: Vec<Mode> = ix
        .cons
        .iter()
        .map(|c| if c.fallback { Mode::Off } else { Mode::Hard })
        .collect();
    for c in 0..n {
        if modes[c] != Mode::Hard {
            continue;
        }
        modes[c] = Mode::Off;
        if !matches!(
            solve(ix, &modes, req.selection, req.seed, limit),
            Outcome::Infeasible
        ) {
            modes[c] = Mode::Hard;
        }
    }
    let conflict: Vec<usize> = (0..n).filter(|c| modes[*c] == Mode::Hard).collect();
    let mut resources = Vec::new();
    let mut seen = BTreeSet::new();
    for c in &conflict {
        for m in ix.cons.get(*c).map(|c| c.members.as_slice()).unwrap_or(&[]) {
            if seen.insert(*m) {
                resources.push(ix.member_id(*m).to_owned());
            }
        }
    }
    let reason = match conflict.as_slice() {
        [c] => {
            let cons = ix.cons.get(*c);
            match cons.map(|c| (c.kind, c.scope)) {
                Some((ConstraintKind::AntiAffinity, scope)) => {
                    let domains = match scope {
                        Scope::Zone => ix.cand_zones.len(),
                        Scope::Host => ix.cand_hosts,
                    };
                    let members = cons.map_or(0, |c| c.members.len());
                    if members > domains {
                        format!(
                            "{} need distinct {scope}s but only {} remain",
                            plural(members, "member"),
                            plural(domains, &format!("candidate {scope}"))
                        )
                    } else {
                        format!(
                            "no distinct {scope}s with enough capacity remain for them among \
                             the candidate zones"
                        )
                    }
                }
                Some((ConstraintKind::Affinity, scope)) => format!(
                    "no single candidate {scope} can hold them all, given capacity, pinned \
                     zones and the existing members' places"
                ),
                None => String::new(),
            }
        }
        _ => "no assignment to the candidate zones meets them together with capacity and \
              pinned zones"
            .to_owned(),
    };
    PlacementError::Infeasible {
        constraints: conflict
            .iter()
            .filter_map(|c| req.constraints.get(*c).map(|c| c.name.clone()))
            .collect(),
        resources,
        reason,
    }
}

/// The domain (zone or host index) of member `m` under `hosts`.
fn domain(ix: &Index<'_>, scope: Scope, hosts: &[u32], m: u32) -> (u32, u32) {
    let (zone, host) = if (m as usize) < ix.n_items {
        let h = hosts.get(m as usize).copied().unwrap_or(u32::MAX);
        (ix.zone_of(h), h)
    } else {
        ix.fixed
            .get(m as usize - ix.n_items)
            .copied()
            .unwrap_or((u32::MAX, u32::MAX))
    };
    match scope {
        Scope::Zone => (0, zone),
        Scope::Host => (1, host),
    }
}

/// Violations of constraint `c` under `hosts`, as (domain, members) in first-member order.
fn violations(ix: &Index<'_>, c: usize, hosts: &[u32]) -> Vec<((u32, u32), Vec<u32>)> {
    let Some(cons) = ix.cons.get(c) else {
        return Vec::new();
    };
    let mut parts: Vec<((u32, u32), Vec<u32>)> = Vec::new();
    for m in &cons.members {
        let d = domain(ix, cons.scope, hosts, *m);
        match parts.iter_mut().find(|(pd, _)| *pd == d) {
            Some((_, ms)) => ms.push(*m),
            None => parts.push((d, vec![*m])),
        }
    }
    match cons.kind {
        ConstraintKind::Affinity if parts.len() > 1 => parts,
        ConstraintKind::Affinity => Vec::new(),
        ConstraintKind::AntiAffinity => parts.into_iter().filter(|(_, ms)| ms.len() > 1).collect(),
    }
}

fn relaxation(
    ix: &Index<'_>,
    req: &PlacementRequest,
    c: usize,
    hosts: &[u32],
) -> Option<Relaxation> {
    let v = violations(ix, c, hosts);
    if v.is_empty() {
        return None;
    }
    let cons = ix.cons.get(c)?;
    let spec = req.constraints.get(c)?;
    let name = |(kind, i): (u32, u32)| {
        if kind == 0 {
            ix.zone_name(i).to_owned()
        } else {
            ix.host_name(i).to_owned()
        }
    };
    let reason = match cons.kind {
        ConstraintKind::AntiAffinity => {
            let domains = match cons.scope {
                Scope::Zone => ix.cand_zones.len(),
                Scope::Host => ix.cand_hosts,
            };
            if cons.members.len() > domains {
                let word = format!("candidate {}", cons.scope);
                format!(
                    "only {} {} for {}",
                    plural(domains, &word),
                    if domains == 1 { "remains" } else { "remain" },
                    plural(cons.members.len(), "member")
                )
            } else {
                "no compliant assignment exists together with the other constraints and \
                 capacity"
                    .to_owned()
            }
        }
        ConstraintKind::Affinity => format!(
            "no single candidate {} can hold them all together with the other constraints and \
             capacity",
            cons.scope
        ),
    };
    Some(Relaxation {
        constraint: spec.name.clone(),
        kind: cons.kind,
        scope: cons.scope,
        violations: v
            .into_iter()
            .map(|(d, ms)| Violation {
                domain: name(d),
                members: ms.iter().map(|m| ix.member_id(*m).to_owned()).collect(),
            })
            .collect(),
        reason,
    })
}

fn result(
    ix: &Index<'_>,
    req: &PlacementRequest,
    hosts: &[u32],
    relaxed: Vec<Relaxation>,
) -> Placement {
    let assignments = req
        .items
        .iter()
        .zip(hosts)
        .map(|(item, h)| Assignment {
            id: item.id.clone(),
            vdu_id: item.vdu_id.clone(),
            zone: ZoneId::new(ix.zone_name(ix.zone_of(*h))),
            host: HostId::new(ix.host_name(*h)),
        })
        .collect();
    Placement {
        assignments,
        relaxed,
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
