//! Linked placement: several VNFs joined by VLDs with latency / jitter bounds, each placed on
//! one VIM at minimum total price (OSM PLA's model), solved exactly by branch and bound.
//!
//! # The model
//! - VIMs, in order ([`LinksRequest::vims`]); VNFs, in order ([`Vnf`], PLA's member index).
//! - The price of each VNF at each VIM ([`Vnf::prices`]). A missing price (`None`) means the
//!   VNF cannot go to that VIM; it never stands for a number. A VNF may be pinned to one VIM
//!   ([`Vnf::pin`], PLA's `vim_account`).
//! - Links between VIMs ([`LinksRequest::links`], a square matrix indexed `[from][to]`): price,
//!   latency and jitter. `None` is an absent link: **no VLD can use it**, constrained or not,
//!   because it has no price (PLA writes 32767 instead; see [the loader](#loading-plas-data)).
//!   A link whose latency (jitter) is `None` cannot carry a VLD with a latency (jitter) bound.
//!   Two VNFs on the same VIM use the zero link (price 0, latency 0, jitter 0); the matrix
//!   diagonal must be `None` or zero. The matrix is *directed*: a VLD from `a` to `b` uses
//!   `links[vim(a)][vim(b)]`, as PLA indexes it (PLA's factory writes symmetric matrices, two of
//!   its hand-written tests do not).
//! - VLDs ([`Vld`]) between two VNFs, with an optional latency bound and an optional jitter
//!   bound. **Every** VLD adds the price of the link it uses, bounded or not (PLA's
//!   `used_transport_cost` sums `trp_link_price_list` over every entry of `vld_desc`).
//!
//! The objective is `Σ vnf price at its VIM + Σ over VLDs of the link price`.
//!
//! # Exact arithmetic
//! Prices are [`Price`]: fixed point with 6 decimals held in a `u64` (micro-units), so sums are
//! exact integers and ties are real ties. Inputs with more than 6 decimals are refused rather
//! than rounded; validation refuses a request whose largest possible total does not fit.
//!
//! # Tie-break
//! Among optimal placements, [`Problem::solve`] returns the first in lexicographic order of
//! the vector of VIM indices, taken in VNF order (VIMs and VNFs in the order given). This is
//! what PLA's expected answers show on the 4 tied scenarios of its tests (e.g. optima `(4,2,0)`
//! and `(4,2,1)`: PLA answers `(4,2,0)`).
//!
//! # The search
//! Domains start from the prices and pins and are made arc-consistent over the VLDs. VNFs are
//! assigned most-constrained first (smallest domain, then most unassigned neighbours, then
//! order). After each assignment the neighbours' domains are filtered (forward checking).
//!
//! The lower bound is the Lagrangian dual of the LP relaxation of the model (a pairwise cost
//! function network: VNF prices are unary costs, each VLD a binary cost, unusable pairs
//! infinite). Integer messages move cost between each VLD and its two VNFs (toulbar2's
//! "project" and "extend" operations); whatever the messages, every complete placement keeps its
//! exact cost, so the sum over VNFs of their cheapest reparametrised cost (plus what the VLDs
//! keep) is a lower bound, computed exactly in integer micro-units. The messages are improved by
//! block-coordinate ascent (each VNF gathers its VLDs' min-marginals and shares them evenly
//! between itself and its VLDs to unassigned VNFs, as MPLP's star update does), many sweeps at
//! the root and a few at every node, starting from the messages the search last had (any
//! messages are valid, so nothing is undone when it backtracks). Along the way a value that a
//! VLD can no longer carry is removed (arc consistency), and so is a value whose own bound
//! exceeds the best cost found. Values are tried in the order of their bound. On the benches'
//! generated 20 x 50 instances the root bound is at or very near the optimum, and the search
//! proves it in a few hundred nodes. (Requests whose totals exceed 2^56 micro-units fall back to a plain bound: the cost so
//! far plus each unassigned VNF's cheapest VIM.) A node is pruned when its bound exceeds the
//! best cost, or equals it and it cannot lead to a lexicographically smaller placement.
//! [`Problem::solve_exhaustive`] is the reference (the oracle of the tests and benches).
//!
//! # Limits
//! [`Problem::solve_with`] takes a node limit and a `should_stop` checker (the caller's clock:
//! the core reads none), asked every [`POLL_EVERY`] nodes with the [`Progress`]. When either
//! stops the search, the answer is the best placement found, with a proven lower bound on every
//! placement ([`Solution::lower_bound`], the least bound of the parts of the tree not explored)
//! and [`Solution::optimal`] false; with no placement found, [`Unsatisfiable::LimitReached`].
//! [`SolveOptions`] also limits the bound's work (table cells read), which does not depend on
//! the size of a node. [`Problem::solve`] uses the defaults: [`DEFAULT_NODE_LIMIT`] nodes and
//! [`DEFAULT_WORK_LIMIT`] cells. The node limit counts the searches that
//! explain an unsatisfiable request too, and no candidate is tried past it.
//!
//! # Unsatisfiable requests
//! [`Unsatisfiable`] names the blocking constraint: a VNF with no priced VIM (or pinned to an
//! unpriced one), else the first VLD that no pair of allowed VIMs can carry, else a conflicting
//! set of VLDs and pins found by deletion filtering (each member is necessary: dropping any one
//! makes the rest satisfiable).
//!
//! # Loading PLA's data
//! [`Problem::from_pla_json`] reads PLA's `ns_placement_data` (`vim_accounts`, the three
//! `trp_link_*` matrices, `ns_desc`, `vld_desc`). To reproduce PLA's answers it takes every
//! matrix entry as a number, **including 32767** ([`PLA_MISSING`], PLA's "no link"): such a
//! link is present, costs 32767 and has latency and jitter 32767, exactly as in PLA's MiniZinc
//! model. Build a [`LinksRequest`] directly to say "absent" as `None`.

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;
use thiserror::Error;

/// The most VLD table cells a request may need (VLDs x VIMs^2): each cell takes about 32
/// bytes across the search's tables, so this caps them near 512 MiB (a 40 x 200 request with 80
/// VLDs needs 3.2 million cells).
pub const MAX_TABLE_CELLS: u64 = 1 << 24;

/// The number PLA writes for a missing PoP link (or a missing characteristic of one).
pub const PLA_MISSING: u64 = 32767;

/// A price: non-negative fixed point with 6 decimals (micro-units in a `u64`), so that cost
/// sums are exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Price(u64);

impl Price {
    /// Micro-units per unit.
    pub const SCALE: u64 = 1_000_000;
    /// Zero.
    pub const ZERO: Price = Price(0);

    /// A price of `micros` millionths of a unit.
    pub const fn from_micros(micros: u64) -> Self {
        Price(micros)
    }

    /// A whole number of units, or `None` when it does not fit.
    pub const fn from_units(units: u64) -> Option<Self> {
        match units.checked_mul(Self::SCALE) {
            Some(m) => Some(Price(m)),
            None => None,
        }
    }

    /// The price in micro-units.
    pub const fn micros(self) -> u64 {
        self.0
    }

    /// Parses a plain decimal (`12`, `12.5`, `0.000001`): digits, optionally a point and at
    /// most 6 more digits. `None` for anything else (signs, exponents, more decimals).
    pub fn parse_decimal(s: &str) -> Option<Self> {
        let (int, frac) = match s.split_once('.') {
            Some((i, f)) => (i, f),
            None => (s, ""),
        };
        let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty() || !digits(int) || !digits(frac) || frac.len() > 6 {
            return None;
        }
        if s.contains('.') && frac.is_empty() {
            return None;
        }
        let whole: u64 = int.parse().ok()?;
        let mut micros: u64 = 0;
        for (k, b) in frac.bytes().enumerate() {
            let d = u64::from(b - b'0');
            micros += d * 10u64.pow(5 - k as u32);
        }
        whole
            .checked_mul(Self::SCALE)?
            .checked_add(micros)
            .map(Price)
    }
}

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / Self::SCALE;
        let frac = self.0 % Self::SCALE;
        if frac == 0 {
            write!(f, "{whole}")
        } else {
            let s = format!("{frac:06}");
            write!(f, "{whole}.{}", s.trim_end_matches('0'))
        }
    }
}

/// A link between two VIMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Link {
    /// What a VLD pays to use the link.
    pub price: Price,
    /// The link's latency; `None` (unknown) cannot meet a latency bound.
    pub latency: Option<u64>,
    /// The link's jitter; `None` (unknown) cannot meet a jitter bound.
    pub jitter: Option<u64>,
}

impl Link {
    /// The link between a VIM and itself: free, no latency, no jitter.
    pub const ZERO: Link = Link {
        price: Price::ZERO,
        latency: Some(0),
        jitter: Some(0),
    };

    /// A link with all three characteristics known.
    pub const fn new(price: Price, latency: u64, jitter: u64) -> Self {
        Link {
            price,
            latency: Some(latency),
            jitter: Some(jitter),
        }
    }
}

/// A VNF to place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vnf {
    /// Its id (PLA: the member VNF index), unique in the request.
    pub id: String,
    /// Its price at each VIM, in the order of [`LinksRequest::vims`]; `None`: it cannot go there.
    pub prices: Vec<Option<Price>>,
    /// The VIM it must go to (PLA's `vim_account`), by id.
    pub pin: Option<String>,
}

/// A VLD joining two VNFs, with optional bounds on the link it uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vld {
    /// The first VNF's id; the link used is `links[vim(from)][vim(to)]`.
    pub from: String,
    /// The second VNF's id.
    pub to: String,
    /// The highest latency allowed, if bounded.
    pub max_latency: Option<u64>,
    /// The highest jitter allowed, if bounded.
    pub max_jitter: Option<u64>,
}

/// A linked placement request as the caller builds it; [`LinksRequest::validate`] makes it a
/// [`Problem`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinksRequest {
    /// VIM ids, in order; unique.
    pub vims: Vec<String>,
    /// VNFs, in order.
    pub vnfs: Vec<Vnf>,
    /// `links[from][to]`, one row and one column per VIM; `None`: no link.
    pub links: Vec<Vec<Option<Link>>>,
    /// VLDs.
    pub vlds: Vec<Vld>,
}

/// Why a request or PLA's data was refused: the field, the value found and what was expected.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LinksError {
    /// A field has a value the model cannot take.
    #[error("{field}: {value}: expected {expected}")]
    Invalid {
        /// The field path, e.g. `vnfs[2].prices`.
        field: String,
        /// The value found (or a description of it).
        value: String,
        /// What the field must hold.
        expected: String,
    },
    /// PLA data given as text is not JSON.
    #[error("ns_placement_data is not JSON")]
    Json(#[source] serde_json::Error),
}

fn invalid(
    field: impl Into<String>,
    value: impl fmt::Display,
    expected: impl Into<String>,
) -> LinksError {
    LinksError::Invalid {
        field: field.into(),
        value: value.to_string(),
        expected: expected.into(),
    }
}

/// What makes a link unusable for a VLD, when no pair of allowed VIMs can carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LinkBlock {
    /// No pair of allowed VIMs has a link at all.
    NoLink,
    /// No linked pair meets the latency bound.
    Latency,
    /// No linked pair meets the jitter bound.
    Jitter,
    /// Some pairs meet the latency bound and some the jitter bound, but none both.
    LatencyAndJitter,
}

impl fmt::Display for LinkBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkBlock::NoLink => "no pair of allowed vims is linked",
            LinkBlock::Latency => "no linked pair of allowed vims meets the latency bound",
            LinkBlock::Jitter => "no linked pair of allowed vims meets the jitter bound",
            LinkBlock::LatencyAndJitter => {
                "no linked pair of allowed vims meets the latency and jitter bounds together"
            }
        })
    }
}

fn bounds(lat: &Option<u64>, jit: &Option<u64>) -> String {
    match (lat, jit) {
        (Some(l), Some(j)) => format!("latency <= {l}, jitter <= {j}"),
        (Some(l), None) => format!("latency <= {l}"),
        (None, Some(j)) => format!("jitter <= {j}"),
        (None, None) => "unbounded".to_owned(),
    }
}

/// Why no placement exists, naming the constraint that blocks it.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Unsatisfiable {
    /// The VNF has no price at any VIM.
    #[error("vnf {vnf:?} has no price at any vim")]
    NoPricedVim {
        /// The VNF's id.
        vnf: String,
    },
    /// The VNF is pinned to a VIM that has no price for it.
    #[error("vnf {vnf:?} is pinned to vim {vim:?}, which has no price for it")]
    PinnedWithoutPrice {
        /// The VNF's id.
        vnf: String,
        /// The VIM it is pinned to.
        vim: String,
    },
    /// This VLD alone cannot be carried by any pair of VIMs allowed to its VNFs (by prices and
    /// pins); the first such VLD in order.
    #[error("vld {vld} ({from:?} -> {to:?}, {}): {cause}", bounds(.max_latency, .max_jitter))]
    Link {
        /// The VLD's index in the request.
        vld: usize,
        /// Its first VNF.
        from: String,
        /// Its second VNF.
        to: String,
        /// Its latency bound.
        max_latency: Option<u64>,
        /// Its jitter bound.
        max_jitter: Option<u64>,
        /// What blocks it.
        cause: LinkBlock,
    },
    /// The search stopped at its limits before finding any placement: the request may still
    /// be satisfiable.
    #[error("no placement found within the search limits ({nodes} nodes); the request may be satisfiable")]
    LimitReached {
        /// The search nodes spent.
        nodes: u64,
    },
    /// Every VLD is satisfiable alone, but not these together: dropping any one member of the
    /// set (a VLD or a pin) makes the rest satisfiable (when each search that checks it ends
    /// within the limits; a member whose check stopped at a limit is kept, so the set still
    /// conflicts).
    #[error("these constraints cannot hold together: {description}")]
    Conflict {
        /// Indices of the VLDs in the set.
        vlds: Vec<usize>,
        /// Indices of the VNFs whose pins are in the set.
        pins: Vec<usize>,
        /// The set, readable: `vld 1 ("2" -> "3", latency <= 20), pin "1" -> "vim4"`.
        description: String,
    },
}

/// An assignment of every VNF to a VIM, with its total cost.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Placement {
    /// For each VNF (in order), the index of its VIM.
    pub vims: Vec<usize>,
    /// The objective: VNF prices plus link prices.
    pub cost: Price,
}

/// Counters of one search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Search nodes visited (assignments tried), over every search the call made.
    pub nodes: u64,
    /// Complete placements that became the best so far.
    pub improvements: u64,
    /// Nodes cut by the lower bound.
    pub pruned_by_bound: u64,
    /// Assignments that emptied a neighbour's domain.
    pub wipeouts: u64,
    /// Satisfiability searches run to find a conflicting set.
    pub conflict_searches: u64,
}

/// The answer of [`Problem::solve`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Solution {
    /// The optimal placement (first in lexicographic order among optima), or why none exists;
    /// when the search stopped at a limit ([`Solution::optimal`] false), the best placement
    /// found, or [`Unsatisfiable::LimitReached`] when none was found.
    pub outcome: Result<Placement, Unsatisfiable>,
    /// Whether the outcome is proven: the placement is optimal (and first among optima), or no
    /// placement exists. False when the search stopped at a limit.
    pub optimal: bool,
    /// A proven lower bound on the cost of every placement: the cost itself when optimal,
    /// `None` when no placement exists or none was found.
    pub lower_bound: Option<Price>,
    /// What the search did.
    pub stats: SearchStats,
}

impl Solution {
    /// The relative gap between the placement's cost and the lower bound, in percent (0 when
    /// optimal, `None` without a placement): `100 * (cost - bound) / cost`.
    pub fn gap_percent(&self) -> Option<f64> {
        let cost = self.outcome.as_ref().ok()?.cost.micros();
        let bound = self.lower_bound?.micros().min(cost);
        if cost == 0 {
            return Some(0.0);
        }
        Some(100.0 * (cost - bound) as f64 / cost as f64)
    }
}

/// The search nodes [`SolveOptions::default`] allows: 20 times what the benches' generated
/// 30 x 100 instances need to prove their optima.
pub const DEFAULT_NODE_LIMIT: u64 = 20_000;

/// The bound's work [`SolveOptions::default`] allows, in table cells read: about 10 s of CPU
/// on the benches' 2-core machine, whatever the size of the request (on the benches' 40 x 200
/// dense instance, 2^34 cells took 69 s of wall time under a load average of 14: about 4
/// million cells per node).
pub const DEFAULT_WORK_LIMIT: u64 = 1 << 32;

/// [`SolveOptions::should_stop`] is asked after this many search nodes, or sooner when the
/// bound's work since the last question reaches [`POLL_WORK`].
pub const POLL_EVERY: u64 = 16;

/// The bound's work (table cells read) between two questions to [`SolveOptions::should_stop`]
/// at most: about a millisecond.
pub const POLL_WORK: u64 = 1 << 20;

/// What a running search reports to [`SolveOptions::should_stop`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Search nodes so far.
    pub nodes: u64,
    /// The cost of the best placement found so far.
    pub best: Option<Price>,
    /// The lower bound proven at the root (every placement costs at least this).
    pub lower_bound: Option<Price>,
}

/// Limits of [`Problem::solve_with`]. The core reads no clock: a deadline is the caller's
/// `should_stop`.
#[derive(Clone, Copy)]
pub struct SolveOptions<'a> {
    /// The most search nodes, over the optimisation and the searches that explain an
    /// unsatisfiable request together ([`DEFAULT_NODE_LIMIT`] by default).
    pub node_limit: u64,
    /// The most work of the bound, in table cells read ([`DEFAULT_WORK_LIMIT`] by default):
    /// a limit that does not depend on how large a node's work is.
    pub work_limit: u64,
    /// Asked with the progress every [`POLL_EVERY`] nodes or [`POLL_WORK`] cells of the bound's
    /// work, whichever comes first (and at the root); `true` stops the search, which then
    /// answers with what it has.
    pub should_stop: Option<&'a dyn Fn(&Progress) -> bool>,
}

impl Default for SolveOptions<'_> {
    fn default() -> Self {
        SolveOptions {
            node_limit: DEFAULT_NODE_LIMIT,
            work_limit: DEFAULT_WORK_LIMIT,
            should_stop: None,
        }
    }
}

impl fmt::Debug for SolveOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SolveOptions")
            .field("node_limit", &self.node_limit)
            .field("work_limit", &self.work_limit)
            .field("should_stop", &self.should_stop.is_some())
            .finish()
    }
}

/// Per-VLD tables: for each pair `(i, j)` the cost when usable.
#[derive(Clone, Debug)]
struct VldTable {
    a: usize,
    b: usize,
    /// `m * m`, `[i * m + j]`: `Some(link price)` when `vim(a) = i, vim(b) = j` is usable.
    cost: Vec<Option<u64>>,
    /// `m * w`: for `vim(a) = i`, the bitset of usable `j`.
    fwd: Vec<u64>,
    /// `m * w`: for `vim(b) = j`, the bitset of usable `i`.
    bwd: Vec<u64>,
}

/// A validated request, ready to solve.
#[derive(Clone, Debug)]
pub struct Problem {
    req: LinksRequest,
    pins: Vec<Option<usize>>,
    ends: Vec<(usize, usize)>,
    /// `n * m` micro-unit prices.
    price: Vec<Option<u64>>,
    tables: Vec<VldTable>,
    words: usize,
    /// The largest possible total, in micro-units.
    max_total: u64,
}

impl LinksRequest {
    /// Checks the request and builds the [`Problem`].
    ///
    /// # Errors
    /// [`LinksError::Invalid`] naming the field: no VIMs, an empty or duplicate id, a price
    /// list or link matrix of the wrong size, a non-zero diagonal link, a pin or VLD end that
    /// names no VIM / VNF, prices so large that a total could overflow, or more VLD table
    /// cells than [`MAX_TABLE_CELLS`].
    pub fn validate(self) -> Result<Problem, LinksError> {
        let m = self.vims.len();
        if m == 0 {
            return Err(invalid("vims", "[]", "at least one vim"));
        }
        let mut vim_ix = HashMap::new();
        for (k, v) in self.vims.iter().enumerate() {
            if v.is_empty() {
                return Err(invalid(format!("vims[{k}]"), "\"\"", "a non-empty id"));
            }
            if vim_ix.insert(v.as_str(), k).is_some() {
                return Err(invalid(
                    format!("vims[{k}]"),
                    format!("{v:?}"),
                    "an id not used before",
                ));
            }
        }
        let mut vnf_ix = HashMap::new();
        let mut pins = Vec::with_capacity(self.vnfs.len());
        let mut price = Vec::with_capacity(self.vnfs.len() * m);
        let mut max_total: u64 = 0;
        for (k, vnf) in self.vnfs.iter().enumerate() {
            if vnf.id.is_empty() {
                return Err(invalid(format!("vnfs[{k}].id"), "\"\"", "a non-empty id"));
            }
            if vnf_ix.insert(vnf.id.as_str(), k).is_some() {
                return Err(invalid(
                    format!("vnfs[{k}].id"),
                    format!("{:?}", vnf.id),
                    "an id not used before",
                ));
            }
            if vnf.prices.len() != m {
                return Err(invalid(
                    format!("vnfs[{k}].prices"),
                    format!("{} entries", vnf.prices.len()),
                    format!("one entry per vim ({m})"),
                ));
            }
            let pin = match &vnf.pin {
                None => None,
                Some(p) => Some(*vim_ix.get(p.as_str()).ok_or_else(|| {
                    invalid(
                        format!("vnfs[{k}].pin"),
                        format!("{p:?}"),
                        "the id of a vim in `vims`",
                    )
                })?),
            };
            pins.push(pin);
            let mut most = 0;
            for p in &vnf.prices {
                let p = p.map(Price::micros);
                most = most.max(p.unwrap_or(0));
                price.push(p);
            }
            max_total = max_total.checked_add(most).ok_or_else(|| {
                invalid(
                    format!("vnfs[{k}].prices"),
                    "too large",
                    "totals that fit in u64 micro-units",
                )
            })?;
        }
        if self.links.len() != m {
            return Err(invalid(
                "links",
                format!("{} rows", self.links.len()),
                format!("one row per vim ({m})"),
            ));
        }
        let mut most_link = 0;
        for (i, row) in self.links.iter().enumerate() {
            if row.len() != m {
                return Err(invalid(
                    format!("links[{i}]"),
                    format!("{} entries", row.len()),
                    format!("one entry per vim ({m})"),
                ));
            }
            if let Some(l) = row[i] {
                if l != Link::ZERO {
                    return Err(invalid(
                        format!("links[{i}][{i}]"),
                        format!("{l:?}"),
                        "None or the zero link (a vim to itself is free, latency 0, jitter 0)",
                    ));
                }
            }
            for l in row.iter().flatten() {
                most_link = most_link.max(l.price.micros());
            }
        }
        let mut ends = Vec::with_capacity(self.vlds.len());
        for (e, vld) in self.vlds.iter().enumerate() {
            let end = |field: &str, id: &str| {
                vnf_ix.get(id).copied().ok_or_else(|| {
                    invalid(
                        format!("vlds[{e}].{field}"),
                        format!("{id:?}"),
                        "the id of a vnf in `vnfs`",
                    )
                })
            };
            ends.push((end("from", &vld.from)?, end("to", &vld.to)?));
            max_total = max_total.checked_add(most_link).ok_or_else(|| {
                invalid(
                    "links",
                    "prices too large",
                    "totals that fit in u64 micro-units",
                )
            })?;
        }
        let cells = (self.vlds.len() as u64).saturating_mul((m as u64).saturating_mul(m as u64));
        if cells > MAX_TABLE_CELLS {
            return Err(invalid(
                "vlds",
                format!(
                    "{} vlds over {m} vims ({cells} table cells, one per pair of vims per vld)",
                    self.vlds.len()
                ),
                format!("at most {MAX_TABLE_CELLS} cells"),
            ));
        }
        let words = m.div_ceil(64);
        let tables = ends
            .iter()
            .zip(&self.vlds)
            .map(|(&(a, b), vld)| build_table(&self.links, a, b, vld, m, words))
            .collect();
        Ok(Problem {
            req: self,
            pins,
            ends,
            price,
            tables,
            words,
            max_total,
        })
    }
}

fn link_at(links: &[Vec<Option<Link>>], i: usize, j: usize) -> Option<Link> {
    if i == j {
        Some(Link::ZERO)
    } else {
        links[i][j]
    }
}

fn meets(bound: Option<u64>, value: Option<u64>) -> bool {
    match bound {
        None => true,
        Some(b) => value.is_some_and(|v| v <= b),
    }
}

fn build_table(
    links: &[Vec<Option<Link>>],
    a: usize,
    b: usize,
    vld: &Vld,
    m: usize,
    w: usize,
) -> VldTable {
    let mut cost = vec![None; m * m];
    let mut fwd = vec![0u64; m * w];
    let mut bwd = vec![0u64; m * w];
    for i in 0..m {
        for j in 0..m {
            if a == b && i != j {
                continue;
            }
            if let Some(l) = link_at(links, i, j) {
                if meets(vld.max_latency, l.latency) && meets(vld.max_jitter, l.jitter) {
                    cost[i * m + j] = Some(l.price.micros());
                    fwd[i * w + j / 64] |= 1 << (j % 64);
                    bwd[j * w + i / 64] |= 1 << (i % 64);
                }
            }
        }
    }
    VldTable {
        a,
        b,
        cost,
        fwd,
        bwd,
    }
}

fn bits(set: &[u64]) -> impl Iterator<Item = usize> + '_ {
    set.iter().enumerate().flat_map(|(k, &word)| {
        let mut w = word;
        std::iter::from_fn(move || {
            if w == 0 {
                None
            } else {
                let t = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(k * 64 + t)
            }
        })
    })
}

impl Problem {
    /// The validated request.
    pub fn request(&self) -> &LinksRequest {
        &self.req
    }

    /// The VIM index of each VNF's pin.
    pub fn pins(&self) -> &[Option<usize>] {
        &self.pins
    }

    /// The VNF indices of each VLD's ends.
    pub fn vld_ends(&self) -> &[(usize, usize)] {
        &self.ends
    }

    /// The cost of a complete assignment (VIM index per VNF), or `None` when it breaks a
    /// constraint (unpriced VIM, pin, unusable link) or has the wrong length.
    pub fn cost_of(&self, vims: &[usize]) -> Option<Price> {
        let (n, m) = (self.req.vnfs.len(), self.req.vims.len());
        if vims.len() != n || vims.iter().any(|&i| i >= m) {
            return None;
        }
        let mut total = 0u64;
        for (v, &i) in vims.iter().enumerate() {
            if self.pins[v].is_some_and(|p| p != i) {
                return None;
            }
            total += self.price[v * m + i]?;
        }
        for t in &self.tables {
            total += t.cost[vims[t.a] * m + vims[t.b]]?;
        }
        Some(Price(total))
    }

    fn initial_domains(&self, pins_on: &[bool]) -> Vec<u64> {
        let (n, m, w) = (self.req.vnfs.len(), self.req.vims.len(), self.words);
        let mut dom = vec![0u64; n * w];
        for v in 0..n {
            for i in 0..m {
                let pinned_away = pins_on[v] && self.pins[v].is_some_and(|p| p != i);
                if self.price[v * m + i].is_some() && !pinned_away {
                    dom[v * w + i / 64] |= 1 << (i % 64);
                }
            }
        }
        dom
    }

    /// The optimal placement, first in lexicographic order of VIM indices among optima (see
    /// the [module docs](self)), or the constraint that blocks every placement, within the
    /// default limits ([`SolveOptions::default`]).
    pub fn solve(&self) -> Solution {
        self.solve_with(&SolveOptions::default())
    }

    /// [`Problem::solve`] within `options`' limits: when a limit stops the search, the answer
    /// is the best placement found with a proven lower bound ([`Solution::optimal`] false).
    pub fn solve_with(&self, options: &SolveOptions<'_>) -> Solution {
        let n = self.req.vnfs.len();
        let all_vlds = vec![true; self.tables.len()];
        let all_pins = vec![true; n];
        let mut stats = SearchStats::default();
        let run =
            Engine::new(self, &all_vlds, &all_pins, Mode::Optimise, options, 0).run(&mut stats);
        let (outcome, optimal, lower_bound) = match run.best {
            Some((cost, vims)) => {
                let bound = if run.stopped {
                    run.open_bound.min(cost)
                } else {
                    cost
                };
                (
                    Ok(Placement {
                        vims,
                        cost: Price(cost),
                    }),
                    !run.stopped,
                    Some(Price(bound)),
                )
            }
            None if run.stopped => match self.diagnose_cheap() {
                Some(why) => (Err(why), true, None),
                None => (
                    Err(Unsatisfiable::LimitReached { nodes: stats.nodes }),
                    false,
                    None,
                ),
            },
            None => (Err(self.diagnose(&mut stats, options)), true, None),
        };
        Solution {
            outcome,
            optimal,
            lower_bound,
            stats,
        }
    }

    /// The reference solver: every combination of allowed VIMs in lexicographic order, keeping
    /// the first of the cheapest. Exponential (`m^n`); the oracle of the tests and benches.
    /// `None` when no placement exists.
    pub fn solve_exhaustive(&self) -> Option<Placement> {
        let (n, m) = (self.req.vnfs.len(), self.req.vims.len());
        let all_pins = vec![true; n];
        let dom = self.initial_domains(&all_pins);
        let cands: Vec<Vec<usize>> = (0..n)
            .map(|v| bits(&dom[v * self.words..(v + 1) * self.words]).collect())
            .collect();
        if cands.iter().any(Vec::is_empty) {
            return None;
        }
        let mut idx = vec![0usize; n];
        let mut best: Option<Placement> = None;
        let mut x = vec![0usize; n];
        loop {
            for v in 0..n {
                x[v] = cands[v][idx[v]];
            }
            let mut total = Some(0u64);
            for (v, &i) in x.iter().enumerate() {
                total = total.and_then(|t| Some(t + self.price[v * m + i]?));
            }
            for t in &self.tables {
                total = total.and_then(|s| Some(s + t.cost[x[t.a] * m + x[t.b]]?));
            }
            if let Some(c) = total {
                if best.as_ref().is_none_or(|b| c < b.cost.0) {
                    best = Some(Placement {
                        vims: x.clone(),
                        cost: Price(c),
                    });
                }
            }
            // Odometer, the last VNF fastest, so assignments come in lexicographic order.
            let mut k = n;
            loop {
                if k == 0 {
                    return best;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < cands[k].len() {
                    break;
                }
                idx[k] = 0;
            }
        }
    }

    fn vnf_id(&self, v: usize) -> &str {
        &self.req.vnfs[v].id
    }

    fn diagnose(&self, stats: &mut SearchStats, options: &SolveOptions<'_>) -> Unsatisfiable {
        if let Some(why) = self.diagnose_cheap() {
            return why;
        }
        let n = self.req.vnfs.len();
        // Deletion filter over the VLDs and pins: drop each constraint whose removal leaves the
        // rest unsatisfiable; what remains is a minimal conflicting set. A search stopped by the
        // limits keeps its constraint (the set stays unsatisfiable, maybe not minimal).
        let mut vlds_on = vec![true; self.tables.len()];
        let mut pins_on: Vec<bool> = self.pins.iter().map(Option::is_some).collect();
        // Whether the constraint just dropped must stay: the rest is satisfiable, or the search
        // could not tell within the limits.
        let keep = |vlds_on: &[bool], pins_on: &[bool], stats: &mut SearchStats| {
            stats.conflict_searches += 1;
            let base = stats.nodes;
            let run = Engine::new(self, vlds_on, pins_on, Mode::Satisfy, options, base).run(stats);
            run.best.is_some() || run.stopped
        };
        for e in 0..vlds_on.len() {
            vlds_on[e] = false;
            if keep(&vlds_on, &pins_on, stats) {
                vlds_on[e] = true;
            }
        }
        for v in 0..n {
            if !pins_on[v] {
                continue;
            }
            pins_on[v] = false;
            if keep(&vlds_on, &pins_on, stats) {
                pins_on[v] = true;
            }
        }
        self.conflict(vlds_on, pins_on)
    }

    /// The polynomial part of the diagnosis: a VNF without a usable VIM, or a VLD that no pair
    /// of allowed VIMs can carry.
    fn diagnose_cheap(&self) -> Option<Unsatisfiable> {
        let (n, m, w) = (self.req.vnfs.len(), self.req.vims.len(), self.words);
        let all_pins = vec![true; n];
        let dom = self.initial_domains(&all_pins);
        for v in 0..n {
            if dom[v * w..(v + 1) * w].iter().all(|&x| x == 0) {
                return Some(match self.pins[v] {
                    Some(p) if (0..m).any(|i| self.price[v * m + i].is_some()) => {
                        Unsatisfiable::PinnedWithoutPrice {
                            vnf: self.vnf_id(v).to_owned(),
                            vim: self.req.vims[p].clone(),
                        }
                    }
                    _ => Unsatisfiable::NoPricedVim {
                        vnf: self.vnf_id(v).to_owned(),
                    },
                });
            }
        }
        for (e, t) in self.tables.iter().enumerate() {
            let da: Vec<usize> = bits(&dom[t.a * w..(t.a + 1) * w]).collect();
            let db: Vec<usize> = bits(&dom[t.b * w..(t.b + 1) * w]).collect();
            let pairs = || da.iter().flat_map(|&i| db.iter().map(move |&j| (i, j)));
            if pairs().any(|(i, j)| t.cost[i * m + j].is_some()) {
                continue;
            }
            let vld = &self.req.vlds[e];
            let linked: Vec<Link> = pairs()
                .filter_map(|(i, j)| link_at(&self.req.links, i, j))
                .collect();
            let lat_ok = linked.iter().any(|l| meets(vld.max_latency, l.latency));
            let jit_ok = linked.iter().any(|l| meets(vld.max_jitter, l.jitter));
            let cause = match (linked.is_empty(), lat_ok, jit_ok) {
                (true, _, _) => LinkBlock::NoLink,
                (false, false, _) => LinkBlock::Latency,
                (false, true, false) => LinkBlock::Jitter,
                (false, true, true) => LinkBlock::LatencyAndJitter,
            };
            return Some(Unsatisfiable::Link {
                vld: e,
                from: vld.from.clone(),
                to: vld.to.clone(),
                max_latency: vld.max_latency,
                max_jitter: vld.max_jitter,
                cause,
            });
        }
        None
    }

    fn conflict(&self, vlds_on: Vec<bool>, pins_on: Vec<bool>) -> Unsatisfiable {
        let n = self.req.vnfs.len();
        let vlds: Vec<usize> = (0..vlds_on.len()).filter(|&e| vlds_on[e]).collect();
        let pins: Vec<usize> = (0..n).filter(|&v| pins_on[v]).collect();
        let mut parts: Vec<String> = vlds
            .iter()
            .map(|&e| {
                let d = &self.req.vlds[e];
                format!(
                    "vld {e} ({:?} -> {:?}, {})",
                    d.from,
                    d.to,
                    bounds(&d.max_latency, &d.max_jitter)
                )
            })
            .collect();
        parts.extend(pins.iter().filter_map(|&v| {
            self.pins[v].map(|p| format!("pin {:?} -> {:?}", self.vnf_id(v), self.req.vims[p]))
        }));
        Unsatisfiable::Conflict {
            vlds,
            pins,
            description: parts.join(", "),
        }
    }

    /// PLA's answer for a placement: `[{"vimAccountId", "member-vnf-index"}]` in VNF order,
    /// each VIM id turned into an account id by [`pla_vim_account_id`].
    pub fn to_pla_placement(&self, placement: &Placement) -> Value {
        Value::Array(
            placement
                .vims
                .iter()
                .zip(&self.req.vnfs)
                .map(|(&i, vnf)| {
                    let vim = self.req.vims.get(i).map(String::as_str).unwrap_or_default();
                    serde_json::json!({
                        "vimAccountId": pla_vim_account_id(vim),
                        "member-vnf-index": vnf.id,
                    })
                })
                .collect(),
        )
    }

    /// Reads PLA's `ns_placement_data` (see the [module docs](self#loading-plas-data)).
    ///
    /// # Errors
    /// [`LinksError::Invalid`] naming the field when the shape differs from PLA's, then the
    /// errors of [`LinksRequest::validate`].
    pub fn from_pla_json(data: &Value) -> Result<Problem, LinksError> {
        pla_request(data)?.validate()
    }

    /// [`Problem::from_pla_json`] from text.
    ///
    /// # Errors
    /// [`LinksError::Json`] when the text is not JSON, then those of [`Problem::from_pla_json`].
    pub fn from_pla_str(text: &str) -> Result<Problem, LinksError> {
        let v: Value = serde_json::from_str(text).map_err(LinksError::Json)?;
        Self::from_pla_json(&v)
    }
}

/// PLA's `vimAccountId` for a VIM enum name: the leading `vim` dropped and `_` turned back into
/// `-` (MiniZinc enum names cannot hold `-` or start with a digit).
pub fn pla_vim_account_id(enum_name: &str) -> String {
    enum_name
        .strip_prefix("vim")
        .unwrap_or(enum_name)
        .replace('_', "-")
}

fn field<'a>(obj: &'a Value, path: &str, key: &str) -> Result<&'a Value, LinksError> {
    obj.get(key)
        .ok_or_else(|| invalid(format!("{path}.{key}"), "missing", "present"))
}

fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, LinksError> {
    v.as_array()
        .ok_or_else(|| invalid(path, short(v), "an array"))
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

fn pla_int(v: &Value, path: &str) -> Result<u64, LinksError> {
    v.as_u64()
        .ok_or_else(|| invalid(path, short(v), "a non-negative integer"))
}

fn pla_price(v: &Value, path: &str) -> Result<Price, LinksError> {
    let parsed = match v {
        Value::Number(num) => Price::parse_decimal(&num.to_string()),
        Value::String(s) => Price::parse_decimal(s.trim()),
        _ => None,
    };
    parsed.ok_or_else(|| {
        invalid(
            path,
            short(v),
            "a non-negative number with at most 6 decimals",
        )
    })
}

fn pla_id(v: &Value, path: &str) -> Result<String, LinksError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) if n.is_u64() => Ok(n.to_string()),
        _ => Err(invalid(path, short(v), "a string or an integer")),
    }
}

fn pla_matrix<'a>(data: &'a Value, key: &str, m: usize) -> Result<Vec<Vec<&'a Value>>, LinksError> {
    let rows = array(field(data, "ns_placement_data", key)?, key)?;
    if rows.len() != m {
        return Err(invalid(
            key,
            format!("{} rows", rows.len()),
            format!("one row per vim ({m})"),
        ));
    }
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let path = format!("{key}[{i}]");
            let row = array(r, &path)?;
            if row.len() != m {
                return Err(invalid(
                    path,
                    format!("{} entries", row.len()),
                    format!("one entry per vim ({m})"),
                ));
            }
            Ok(row.iter().collect())
        })
        .collect()
}

fn pla_request(data: &Value) -> Result<LinksRequest, LinksError> {
    let vims = array(
        field(data, "ns_placement_data", "vim_accounts")?,
        "vim_accounts",
    )?
    .iter()
    .enumerate()
    .map(|(k, v)| {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| invalid(format!("vim_accounts[{k}]"), short(v), "a string"))
    })
    .collect::<Result<Vec<_>, _>>()?;
    let m = vims.len();
    let lat = pla_matrix(data, "trp_link_latency", m)?;
    let jit = pla_matrix(data, "trp_link_jitter", m)?;
    let pri = pla_matrix(data, "trp_link_price_list", m)?;
    let mut links = vec![vec![None; m]; m];
    for i in 0..m {
        for j in 0..m {
            let l = pla_int(lat[i][j], &format!("trp_link_latency[{i}][{j}]"))?;
            let jt = pla_int(jit[i][j], &format!("trp_link_jitter[{i}][{j}]"))?;
            let p = pla_price(pri[i][j], &format!("trp_link_price_list[{i}][{j}]"))?;
            // 32767 (PLA's "missing") is kept as a number, as PLA's model does.
            links[i][j] = Some(Link::new(p, l, jt));
        }
    }
    let mut vnfs = Vec::new();
    for (k, d) in array(field(data, "ns_placement_data", "ns_desc")?, "ns_desc")?
        .iter()
        .enumerate()
    {
        let path = format!("ns_desc[{k}]");
        let id = pla_id(field(d, &path, "vnf_id")?, &format!("{path}.vnf_id"))?;
        let ppath = format!("{path}.vnf_price_per_vim");
        let raw = array(field(d, &path, "vnf_price_per_vim")?, &ppath)?;
        // PLA's test data sometimes holds one comma-joined string (the template writes the
        // list's items joined by commas, so both render the same MiniZinc array).
        let prices = match raw.as_slice() {
            [Value::String(s)] => s
                .split(',')
                .enumerate()
                .map(|(x, p)| {
                    Price::parse_decimal(p.trim()).map(Some).ok_or_else(|| {
                        invalid(
                            format!("{ppath}[0] item {x}"),
                            format!("{p:?}"),
                            "a non-negative number with at most 6 decimals",
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            items => items
                .iter()
                .enumerate()
                .map(|(x, p)| match p {
                    Value::Null => Ok(None),
                    _ => pla_price(p, &format!("{ppath}[{x}]")).map(Some),
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        let pin = match d.get("vim_account") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(invalid(
                    format!("{path}.vim_account"),
                    short(other),
                    "a vim enum name",
                ))
            }
        };
        vnfs.push(Vnf { id, prices, pin });
    }
    let mut vlds = Vec::new();
    for (k, d) in array(field(data, "ns_placement_data", "vld_desc")?, "vld_desc")?
        .iter()
        .enumerate()
    {
        let path = format!("vld_desc[{k}]");
        let refs = array(field(d, &path, "cp_refs")?, &format!("{path}.cp_refs"))?;
        let [a, b] = refs.as_slice() else {
            return Err(invalid(
                format!("{path}.cp_refs"),
                short(&d["cp_refs"]),
                "two member vnf indices",
            ));
        };
        let bound = |key: &str| -> Result<Option<u64>, LinksError> {
            d.get(key)
                .map(|v| pla_int(v, &format!("{path}.{key}")))
                .transpose()
        };
        vlds.push(Vld {
            from: pla_id(a, &format!("{path}.cp_refs[0]"))?,
            to: pla_id(b, &format!("{path}.cp_refs[1]"))?,
            max_latency: bound("latency")?,
            max_jitter: bound("jitter")?,
        });
    }
    Ok(LinksRequest {
        vims,
        vnfs,
        links,
        vlds,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Optimise,
    Satisfy,
}

const UNSET: usize = usize::MAX;

/// An unusable pair in the dual bound's integer tables.
const INF: i64 = 1 << 61;
/// Anything at or above this is infinite (INF plus a few finite terms stays below `i64::MAX`).
const HUGE: i64 = 1 << 60;
/// The dual bound is used when every total fits well below [`HUGE`] (a problem with larger
/// prices falls back to the plain bound, still exact).
const DUAL_MAX_TOTAL: u64 = 1 << 56;
/// Sweeps of star updates at every node but the root.
const NODE_SWEEPS: usize = 3;
/// At the root: rounds of this many sweeps (each ending with a projection) ...
const ROOT_ROUND: usize = 10;
/// ... until a round raises the bound by less than 1 / `ROOT_STALL` of it, or after
/// `ROOT_ROUNDS` rounds.
const ROOT_STALL: u64 = 5_000;
const ROOT_ROUNDS: usize = 200;

/// What one engine run found.
struct Run {
    best: Option<(u64, Vec<usize>)>,
    /// The limits stopped the search before it finished.
    stopped: bool,
    /// When stopped: a lower bound on every placement the search did not rule out.
    open_bound: u64,
}

/// The Lagrangian (dual) bound of the pairwise cost function network: VNF prices are unary
/// costs, each VLD a binary cost on its two VNFs (infinite on unusable pairs). Messages
/// `alpha` move cost between a VLD and its ends: the reparametrised costs are
/// `unary'[v][i] = price[v][i] + Σ_e alpha[e→v][i]` and `pair'[e][i][j] = cost[e][i][j] -
/// alpha[e→a][i] - alpha[e→b][j]`. For **any** messages every complete placement costs exactly
/// `Σ unary' + Σ pair'` (the messages cancel), so `Σ_v min unary'_v + Σ_e min pair'_e` over the
/// current domains is a lower bound, computed exactly in integers. The messages are improved by
/// block-coordinate ascent (MPLP-style star updates: each VNF gathers its VLDs' min-marginals
/// and shares them evenly between itself and its unassigned VLDs), a final sweep projects every
/// VLD onto its VNFs (so every `pair' >= 0` and the bound is `Σ_v min unary'_v`), and the
/// messages are kept from node to node (any messages are valid, so nothing is undone on
/// backtracking). A value whose VLD has no usable partner left is removed (arc consistency); a
/// value whose bound exceeds the best cost is removed too.
struct Dual {
    /// Per active table: `[i * m + j]`, the cost with `a` at `i`, `b` at `j` (INF: unusable).
    cab: Vec<Vec<i64>>,
    /// Per active table: the transpose, `[j * m + i]`.
    cba: Vec<Vec<i64>>,
    /// Per active table: messages to its `a` end, `m` each.
    to_a: Vec<Vec<i64>>,
    /// Per active table: messages to its `b` end.
    to_b: Vec<Vec<i64>>,
    /// `n * m`: the reparametrised unary costs (INF where unpriced).
    unary: Vec<i64>,
    /// Scratch: min-marginals per incident VLD (`degree * m`), the other end's messages, the
    /// gathered totals, the domain as a list.
    mu: Vec<i64>,
    wo: Vec<i64>,
    total: Vec<i64>,
    vals: Vec<usize>,
    /// A message grew past [`MESSAGE_MAX`]: the next bound starts again from zero messages.
    reset: bool,
}

/// The largest message magnitude kept (see [`Dual::reset`]); with totals below
/// [`DUAL_MAX_TOTAL`], finite sums stay far below [`HUGE`].
const MESSAGE_MAX: i64 = 1 << 57;

struct Engine<'p, 'o> {
    p: &'p Problem,
    n: usize,
    m: usize,
    w: usize,
    mode: Mode,
    options: &'o SolveOptions<'o>,
    /// Nodes spent by earlier searches of the same call (they count against the limit).
    base_nodes: u64,
    /// Active VLD tables only.
    tables: Vec<&'p VldTable>,
    /// Per VNF: (table index, other VNF, this VNF is `a`).
    adj: Vec<Vec<(usize, usize, bool)>>,
    /// Per active table and VIM `i` of its `a` end: the cheapest usable link from `i` to the
    /// `b` end's root domain (the plain bound charges a VLD between two unassigned VNFs to its
    /// `a`).
    owned_min: Vec<Vec<u64>>,
    dual: Option<Dual>,
    root_bound: Option<u64>,
    dom: Vec<u64>,
    trail: Vec<(usize, u64)>,
    x: Vec<usize>,
    cost: u64,
    best: Option<(u64, Vec<usize>)>,
    stats: SearchStats,
    done: bool,
    stopped: bool,
    open_bound: u64,
    /// The node count at which `should_stop` is asked next.
    next_poll: u64,
    /// The bound's work so far (table cells read), and the amount at which `should_stop` is
    /// asked next.
    work: u64,
    next_work: u64,
    /// The limits said stop inside the bound: the search stops at its next node.
    stop_requested: bool,
}

impl<'p, 'o> Engine<'p, 'o> {
    fn new(
        p: &'p Problem,
        vlds_on: &[bool],
        pins_on: &[bool],
        mode: Mode,
        options: &'o SolveOptions<'o>,
        base_nodes: u64,
    ) -> Self {
        let (n, m, w) = (p.req.vnfs.len(), p.req.vims.len(), p.words);
        let tables: Vec<&VldTable> = p
            .tables
            .iter()
            .zip(vlds_on)
            .filter(|(_, &on)| on)
            .map(|(t, _)| t)
            .collect();
        let mut adj = vec![Vec::new(); n];
        for (e, t) in tables.iter().enumerate() {
            if t.a != t.b {
                adj[t.a].push((e, t.b, true));
                adj[t.b].push((e, t.a, false));
            }
        }
        let dual = (mode == Mode::Optimise && p.max_total <= DUAL_MAX_TOTAL).then(|| {
            let to_i = |c: Option<u64>| c.map_or(INF, |c| c as i64);
            let cab: Vec<Vec<i64>> = tables
                .iter()
                .map(|t| t.cost.iter().map(|&c| to_i(c)).collect())
                .collect();
            let cba = tables
                .iter()
                .map(|t| {
                    let mut v = vec![INF; m * m];
                    for i in 0..m {
                        for j in 0..m {
                            v[j * m + i] = to_i(t.cost[i * m + j]);
                        }
                    }
                    v
                })
                .collect();
            let degree = adj.iter().map(Vec::len).max().unwrap_or(0);
            Dual {
                to_a: vec![vec![0; m]; tables.len()],
                to_b: vec![vec![0; m]; tables.len()],
                cab,
                cba,
                unary: p.price.iter().map(|&c| to_i(c)).collect(),
                mu: vec![0; degree * m],
                wo: vec![0; m],
                total: vec![0; m],
                vals: Vec::with_capacity(m),
                reset: false,
            }
        });
        Engine {
            p,
            n,
            m,
            w,
            mode,
            options,
            base_nodes,
            owned_min: vec![Vec::new(); tables.len()],
            tables,
            adj,
            dual,
            root_bound: None,
            dom: p.initial_domains(pins_on),
            trail: Vec::new(),
            x: vec![UNSET; n],
            cost: 0,
            best: None,
            stats: SearchStats::default(),
            done: false,
            stopped: false,
            open_bound: u64::MAX,
            next_poll: 0,
            work: 0,
            next_work: 0,
            stop_requested: false,
        }
    }

    fn domain(&self, v: usize) -> &[u64] {
        &self.dom[v * self.w..(v + 1) * self.w]
    }

    fn size(&self, v: usize) -> u32 {
        self.domain(v).iter().map(|x| x.count_ones()).sum()
    }

    /// Removes VIM `i` from VNF `v`'s domain (trailed); false when the domain empties.
    fn remove(&mut self, v: usize, i: usize) -> bool {
        let at = v * self.w + i / 64;
        let old = self.dom[at];
        let new = old & !(1 << (i % 64));
        if new != old {
            self.trail.push((at, old));
            self.dom[at] = new;
        }
        self.domain(v).iter().any(|&x| x != 0)
    }

    /// Arc consistency at the root; false when a domain empties.
    fn root_consistency(&mut self) -> bool {
        let (m, w) = (self.m, self.w);
        for e in 0..self.tables.len() {
            let t = self.tables[e];
            if t.a == t.b {
                // Only the diagonal is usable: keep the VIMs whose zero link meets the bounds.
                for i in 0..m {
                    if t.cost[i * m + i].is_none() {
                        self.dom[t.a * w + i / 64] &= !(1 << (i % 64));
                    }
                }
            }
        }
        let mut changed = true;
        while changed {
            changed = false;
            for t in &self.tables {
                for (v, other, sup) in [(t.a, t.b, &t.fwd), (t.b, t.a, &t.bwd)] {
                    for i in bits(&self.dom[v * w..(v + 1) * w]).collect::<Vec<_>>() {
                        let s = &sup[i * w..(i + 1) * w];
                        let od = &self.dom[other * w..(other + 1) * w];
                        if s.iter().zip(od).all(|(a, b)| a & b == 0) {
                            self.dom[v * w + i / 64] &= !(1 << (i % 64));
                            changed = true;
                        }
                    }
                }
            }
        }
        if (0..self.n).any(|v| self.size(v) == 0) {
            return false;
        }
        for (e, t) in self.tables.iter().enumerate() {
            let db = &self.dom[t.b * w..(t.b + 1) * w];
            self.owned_min[e] = (0..m)
                .map(|i| {
                    bits(db)
                        .filter_map(|j| t.cost[i * m + j])
                        .min()
                        .unwrap_or(0)
                })
                .collect();
        }
        true
    }

    fn run(mut self, stats: &mut SearchStats) -> Run {
        if self.root_consistency() {
            if self.dual.is_some() {
                if let Some(lb) = self.root_bound() {
                    self.search(lb);
                }
            } else {
                self.search(0);
            }
        }
        stats.nodes += self.stats.nodes;
        stats.improvements += self.stats.improvements;
        stats.pruned_by_bound += self.stats.pruned_by_bound;
        stats.wipeouts += self.stats.wipeouts;
        Run {
            best: self.best,
            stopped: self.stopped,
            open_bound: self.open_bound,
        }
    }

    /// The dual bound at the root: rounds of sweeps until the bound stalls (or the limits say
    /// stop); `None` when a domain empties.
    fn root_bound(&mut self) -> Option<u64> {
        let mut lb = self.dual_bound(ROOT_ROUND)?;
        self.root_bound = Some(lb);
        for _ in 1..ROOT_ROUNDS {
            if self.stop_requested {
                break;
            }
            let next = self.dual_bound(ROOT_ROUND)?;
            let gain = next.saturating_sub(lb);
            lb = lb.max(next);
            self.root_bound = Some(lb);
            if gain <= lb / ROOT_STALL {
                break;
            }
        }
        Some(lb)
    }

    /// One star update of unassigned VNF `v`: gathers the min-marginals of its VLDs (removing
    /// the values a VLD can no longer carry), then leaves each VLD to an unassigned VNF an even
    /// share and keeps the rest (`project`: keeps everything). False on a wipe-out.
    fn star(&mut self, v: usize, project: bool) -> bool {
        let (m, w) = (self.m, self.w);
        let Some(d) = self.dual.as_mut() else {
            return true;
        };
        d.vals.clear();
        d.vals
            .extend(bits(&self.dom[v * w..(v + 1) * w]).filter(|&i| d.unary[v * m + i] < HUGE));
        let adj = &self.adj[v];
        for &i in &d.vals {
            d.total[i] = d.unary[v * m + i];
        }
        let mut unassigned = 0i64;
        for (k, &(e, o, is_a)) in adj.iter().enumerate() {
            let (c, to_v, to_o) = if is_a {
                (&d.cab[e], &d.to_a[e], &d.to_b[e])
            } else {
                (&d.cba[e], &d.to_b[e], &d.to_a[e])
            };
            let mu = &mut d.mu[k * m..(k + 1) * m];
            let xo = self.x[o];
            self.work += if xo == UNSET {
                d.vals.len() * m
            } else {
                d.vals.len()
            } as u64;
            if xo != UNSET {
                for &i in &d.vals {
                    let c = c[i * m + xo];
                    mu[i] = if c >= HUGE {
                        INF
                    } else {
                        c - to_o[xo] - to_v[i]
                    };
                }
            } else {
                unassigned += 1;
                for (j, wo) in d.wo.iter_mut().enumerate() {
                    let on = self.dom[o * w + j / 64] & (1 << (j % 64)) != 0;
                    *wo = if on { -to_o[j] } else { INF };
                }
                for &i in &d.vals {
                    let row = &c[i * m..(i + 1) * m];
                    let best = row
                        .iter()
                        .zip(&d.wo)
                        .map(|(a, b)| a + b)
                        .min()
                        .unwrap_or(INF);
                    mu[i] = if best >= HUGE { INF } else { best - to_v[i] };
                }
            }
            for &i in &d.vals {
                if mu[i] >= HUGE {
                    d.total[i] = INF;
                } else if d.total[i] < HUGE {
                    d.total[i] += mu[i];
                }
            }
        }
        let share = if project { 1 } else { unassigned + 1 };
        let mut dead = Vec::new();
        for &i in &d.vals {
            let t = d.total[i];
            if t >= HUGE {
                dead.push(i);
                continue;
            }
            let s = t.div_euclid(share);
            let mut kept = t;
            for (k, &(e, o, is_a)) in adj.iter().enumerate() {
                let target = if project || self.x[o] != UNSET { 0 } else { s };
                let delta = d.mu[k * m + i] - target;
                let msg = if is_a {
                    &mut d.to_a[e][i]
                } else {
                    &mut d.to_b[e][i]
                };
                *msg += delta;
                d.reset |= msg.abs() > MESSAGE_MAX;
                kept -= target;
            }
            d.unary[v * m + i] = kept;
        }
        for i in dead {
            if !self.remove(v, i) {
                return false;
            }
        }
        self.domain(v).iter().any(|&x| x != 0)
    }

    /// The dual bound after `sweeps` rounds of star updates and a projection; `None` when a
    /// domain empties.
    fn dual_bound(&mut self, sweeps: usize) -> Option<u64> {
        let n = self.n;
        if let Some(d) = self.dual.as_mut().filter(|d| d.reset) {
            for msgs in d.to_a.iter_mut().chain(d.to_b.iter_mut()) {
                msgs.fill(0);
            }
            for (u, &c) in d.unary.iter_mut().zip(&self.p.price) {
                *u = c.map_or(INF, |c| c as i64);
            }
            d.reset = false;
        }
        for s in 0..sweeps {
            for k in 0..n {
                let v = if s % 2 == 0 { k } else { n - 1 - k };
                if self.x[v] == UNSET && !self.adj[v].is_empty() && !self.star(v, false) {
                    return None;
                }
            }
            if self.limit_hit() {
                // Stop improving; the projection below still makes a valid bound.
                break;
            }
        }
        for v in 0..n {
            if self.x[v] == UNSET && !self.star(v, true) {
                return None;
            }
        }
        let (m, w) = (self.m, self.w);
        let d = self.dual.as_ref()?;
        let mut lb: i64 = 0;
        for v in 0..n {
            let xv = self.x[v];
            let least = if xv != UNSET {
                d.unary[v * m + xv]
            } else {
                bits(&self.dom[v * w..(v + 1) * w])
                    .map(|i| d.unary[v * m + i])
                    .min()
                    .unwrap_or(INF)
            };
            if least >= HUGE {
                return None;
            }
            lb += least;
        }
        for (e, t) in self.tables.iter().enumerate() {
            let (xa, xb) = (self.x[t.a], self.x[t.b]);
            if t.a != t.b && xa != UNSET && xb != UNSET {
                lb += d.cab[e][xa * m + xb] - d.to_a[e][xa] - d.to_b[e][xb];
            }
        }
        Some(u64::try_from(lb).unwrap_or(0))
    }

    /// The cheapest cost VNF `u` (unassigned) can add at VIM `j`, counting its links to
    /// assigned neighbours; `None` when `j` is not usable.
    fn local_cost(&self, u: usize, j: usize) -> Option<u64> {
        let m = self.m;
        let mut c = self.p.price[u * m + j]?;
        for &(e, o, is_a) in &self.adj[u] {
            let xo = self.x[o];
            if xo != UNSET {
                let t = self.tables[e];
                c += if is_a {
                    t.cost[j * m + xo]
                } else {
                    t.cost[xo * m + j]
                }?;
            }
        }
        Some(c)
    }

    /// The plain bound (problems too large for the dual bound's integers).
    fn lower_bound(&self) -> u64 {
        let mut lb = self.cost;
        for u in 0..self.n {
            if self.x[u] != UNSET {
                continue;
            }
            let best = bits(self.domain(u))
                .filter_map(|j| {
                    let mut c = self.local_cost(u, j)?;
                    for &(e, o, is_a) in &self.adj[u] {
                        if is_a && self.x[o] == UNSET {
                            c += self.owned_min[e][j];
                        }
                    }
                    Some(c)
                })
                .min();
            lb += best.unwrap_or(0);
        }
        lb
    }

    /// Whether completing the current partial assignment could give a placement before `best`
    /// in lexicographic order.
    fn could_be_lex_smaller(&self, best: &[usize]) -> bool {
        for (v, &b) in best.iter().enumerate() {
            let xv = self.x[v];
            if xv == UNSET || xv < b {
                return true;
            }
            if xv > b {
                return false;
            }
        }
        false
    }

    /// Whether a subtree whose placements cost at least `lb` can hold a better placement.
    fn worth(&self, lb: u64) -> bool {
        match (&self.best, self.mode) {
            (_, Mode::Satisfy) | (None, _) => true,
            (Some((c, b)), Mode::Optimise) => lb < *c || (lb == *c && self.could_be_lex_smaller(b)),
        }
    }

    fn choose(&self) -> Option<usize> {
        let mut pick: Option<(u32, usize, usize)> = None;
        for v in 0..self.n {
            if self.x[v] != UNSET {
                continue;
            }
            let size = self.size(v);
            let degree = self.adj[v]
                .iter()
                .filter(|&&(_, o, _)| self.x[o] == UNSET)
                .count();
            let better = match pick {
                None => true,
                Some((s, d, _)) => size < s || (size == s && degree > d),
            };
            if better {
                pick = Some((size, degree, v));
            }
        }
        pick.map(|(_, _, v)| v)
    }

    /// Whether the limits stop the search now (asked once per node and once per sweep of the
    /// bound).
    fn limit_hit(&mut self) -> bool {
        if self.stop_requested {
            return true;
        }
        let nodes = self.base_nodes + self.stats.nodes;
        if nodes >= self.options.node_limit || self.work >= self.options.work_limit {
            self.stop_requested = true;
            return true;
        }
        let due = self.stats.nodes >= self.next_poll || self.work >= self.next_work;
        self.stop_requested = match self.options.should_stop {
            Some(stop) if due => {
                self.next_poll = self.stats.nodes + POLL_EVERY;
                self.next_work = self.work + POLL_WORK;
                stop(&Progress {
                    nodes,
                    best: self.best.as_ref().map(|(c, _)| Price(*c)),
                    lower_bound: self.root_bound.map(Price),
                })
            }
            _ => false,
        };
        self.stop_requested
    }

    /// Stops the search: the open part of the tree is bounded by `lb`.
    fn stop(&mut self, lb: u64) {
        self.stopped = true;
        self.done = true;
        self.open_bound = self.open_bound.min(lb);
    }

    /// Searches below the current node, whose placements cost at least `lb_in`.
    fn search(&mut self, lb_in: u64) {
        if self.done {
            return;
        }
        if self.x.iter().all(|&x| x != UNSET) {
            let better = match &self.best {
                None => true,
                Some((c, b)) => self.cost < *c || (self.cost == *c && self.x < *b),
            };
            if better {
                self.best = Some((self.cost, self.x.clone()));
                self.stats.improvements += 1;
                if self.mode == Mode::Satisfy {
                    self.done = true;
                }
            }
            return;
        }
        if self.limit_hit() {
            self.stop(lb_in);
            return;
        }
        let mark = self.trail.len();
        let mut lb = lb_in;
        // The dual bound of this node, when used.
        let mut dual_lb = 0;
        // Candidates with the bound of their subtree, best first.
        let mut cands: Vec<(u64, usize)> = Vec::new();
        if self.mode == Mode::Optimise && self.dual.is_some() {
            match self.dual_bound(NODE_SWEEPS) {
                None => {
                    self.stats.wipeouts += 1;
                    self.undo(mark);
                    return;
                }
                Some(b) => {
                    dual_lb = b;
                    lb = lb.max(b);
                }
            }
            if !self.worth(lb) {
                self.stats.pruned_by_bound += 1;
                self.undo(mark);
                return;
            }
            self.prune_values(dual_lb);
        }
        let Some(v) = self.choose() else {
            self.undo(mark);
            return;
        };
        if self.mode == Mode::Optimise && self.dual.is_some() {
            if let Some(d) = &self.dual {
                let m = self.m;
                let least = bits(self.domain(v))
                    .map(|i| d.unary[v * m + i])
                    .min()
                    .unwrap_or(0);
                // The dual bound with `v` at `i`.
                let base = i128::from(dual_lb) - i128::from(least);
                for i in bits(self.domain(v)) {
                    let key = base + i128::from(d.unary[v * m + i]);
                    cands.push((u64::try_from(key).unwrap_or(0), i));
                }
            }
        } else {
            if self.mode == Mode::Optimise && self.best.is_some() {
                lb = lb.max(self.lower_bound());
                if !self.worth(lb) {
                    self.stats.pruned_by_bound += 1;
                    self.undo(mark);
                    return;
                }
            }
            cands = bits(self.domain(v))
                .filter_map(|i| self.local_cost(v, i).map(|c| (self.cost + c, i)))
                .collect();
        }
        if self.stop_requested {
            // Said inside the bound's sweeps.
            self.stop(lb);
            self.undo(mark);
            return;
        }
        cands.sort_unstable();
        let w = self.w;
        for k in 0..cands.len() {
            let (key, i) = cands[k];
            if !self.done && self.base_nodes + self.stats.nodes >= self.options.node_limit {
                // The node limit is exact: no candidate is tried past it.
                self.stop_requested = true;
                self.stopped = true;
                self.done = true;
            }
            if self.done {
                if self.stopped {
                    // The candidates not tried yet are part of the open tree.
                    let rest = cands[k..].iter().map(|&(key, _)| key.max(lb)).min();
                    self.open_bound = self.open_bound.min(rest.unwrap_or(u64::MAX));
                }
                break;
            }
            let Some(delta) = self.local_cost(v, i) else {
                continue;
            };
            self.stats.nodes += 1;
            let inner = self.trail.len();
            self.x[v] = i;
            self.cost += delta;
            let mut ok = true;
            for a in 0..self.adj[v].len() {
                let (e, o, is_a) = self.adj[v][a];
                if self.x[o] != UNSET {
                    continue;
                }
                let t = self.tables[e];
                let sup = if is_a { &t.fwd } else { &t.bwd };
                let mut empty = true;
                for q in 0..w {
                    let old = self.dom[o * w + q];
                    let new = old & sup[i * w + q];
                    if new != old {
                        self.trail.push((o * w + q, old));
                        self.dom[o * w + q] = new;
                    }
                    empty &= new == 0;
                }
                if empty {
                    ok = false;
                    self.stats.wipeouts += 1;
                    break;
                }
            }
            if ok {
                let child = key.max(lb);
                if self.worth(child) {
                    self.search(child);
                } else {
                    self.stats.pruned_by_bound += 1;
                }
            }
            self.undo(inner);
            self.cost -= delta;
            self.x[v] = UNSET;
        }
        self.undo(mark);
    }

    /// Removes from the unassigned VNFs' domains the values whose bound exceeds the best cost
    /// (with the dual bound `lb`, the bound with `v` at `i` is `lb - min unary'_v +
    /// unary'_v(i)`).
    fn prune_values(&mut self, lb: u64) {
        let Some((best, _)) = &self.best else {
            return;
        };
        let best = *best;
        let (m, w) = (self.m, self.w);
        let mut drop = Vec::new();
        if let Some(d) = &self.dual {
            for v in 0..self.n {
                if self.x[v] != UNSET {
                    continue;
                }
                let dv = &self.dom[v * w..(v + 1) * w];
                let least = bits(dv).map(|i| d.unary[v * m + i]).min().unwrap_or(0);
                let base = i128::from(lb) - i128::from(least);
                for i in bits(dv) {
                    if base + i128::from(d.unary[v * m + i]) > i128::from(best) {
                        drop.push((v, i));
                    }
                }
            }
        }
        for (v, i) in drop {
            // The cheapest value stays, so no domain empties.
            self.remove(v, i);
        }
    }

    fn undo(&mut self, mark: usize) {
        while self.trail.len() > mark {
            if let Some((at, old)) = self.trail.pop() {
                self.dom[at] = old;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn p(u: u64) -> Option<Price> {
        Price::from_units(u)
    }

    fn mesh(m: usize, price: u64, lat: u64, jit: u64) -> Vec<Vec<Option<Link>>> {
        (0..m)
            .map(|i| {
                (0..m)
                    .map(|j| {
                        (i != j).then(|| Link::new(Price::from_units(price).unwrap(), lat, jit))
                    })
                    .collect()
            })
            .collect()
    }

    fn req(
        prices: Vec<Vec<Option<Price>>>,
        links: Vec<Vec<Option<Link>>>,
        vlds: Vec<(usize, usize, Option<u64>, Option<u64>)>,
    ) -> LinksRequest {
        let m = links.len();
        LinksRequest {
            vims: (0..m).map(|i| format!("vim{i}")).collect(),
            vnfs: prices
                .into_iter()
                .enumerate()
                .map(|(k, prices)| Vnf {
                    id: format!("{}", k + 1),
                    prices,
                    pin: None,
                })
                .collect(),
            links,
            vlds: vlds
                .into_iter()
                .map(|(a, b, l, j)| Vld {
                    from: format!("{}", a + 1),
                    to: format!("{}", b + 1),
                    max_latency: l,
                    max_jitter: j,
                })
                .collect(),
        }
    }

    fn field_of(e: LinksError) -> String {
        match e {
            LinksError::Invalid { field, .. } => field,
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn validation_names_the_field() {
        let base = req(vec![vec![p(1), p(2)]], mesh(2, 1, 1, 1), vec![]);

        let mut r = base.clone();
        r.vims.clear();
        r.vnfs[0].prices.clear();
        r.links.clear();
        assert_eq!(field_of(r.validate().unwrap_err()), "vims");

        let mut r = base.clone();
        r.vims[1] = "vim0".into();
        let e = r.validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "vims[1]: \"vim0\": expected an id not used before"
        );

        let mut r = base.clone();
        r.vnfs[0].prices.pop();
        let e = r.validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "vnfs[0].prices: 1 entries: expected one entry per vim (2)"
        );

        let mut r = base.clone();
        r.vnfs[0].pin = Some("nowhere".into());
        assert_eq!(field_of(r.validate().unwrap_err()), "vnfs[0].pin");

        let mut r = base.clone();
        r.links[1][1] = Some(Link::new(Price::ZERO, 3, 0));
        assert_eq!(field_of(r.validate().unwrap_err()), "links[1][1]");

        let mut r = base.clone();
        r.links[0].pop();
        assert_eq!(field_of(r.validate().unwrap_err()), "links[0]");

        let mut r = base.clone();
        r.vlds.push(Vld {
            from: "1".into(),
            to: "9".into(),
            max_latency: None,
            max_jitter: None,
        });
        let e = r.validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "vlds[0].to: \"9\": expected the id of a vnf in `vnfs`"
        );

        let mut r = base.clone();
        r.vnfs.push(Vnf {
            id: "2".into(),
            prices: vec![Some(Price::from_micros(u64::MAX)), None],
            pin: None,
        });
        r.vnfs[0].prices[0] = Some(Price::from_micros(u64::MAX));
        assert_eq!(field_of(r.validate().unwrap_err()), "vnfs[1].prices");

        assert!(base.validate().is_ok());
    }

    #[test]
    fn requests_whose_tables_would_not_fit_are_refused() {
        // 1,100 VLDs over 128 VIMs: 18 million cells, each VLD a table of 128 x 128.
        let m = 128;
        let mut r = req(vec![vec![p(1); m]; 2], vec![vec![None; m]; m], vec![]);
        r.vlds = (0..1100)
            .map(|_| Vld {
                from: "1".into(),
                to: "2".into(),
                max_latency: None,
                max_jitter: None,
            })
            .collect();
        let e = r.clone().validate().unwrap_err();
        assert!(
            e.to_string().starts_with("vlds: 1100 vlds over 128 vims"),
            "{e}"
        );
        r.vlds.truncate(1000);
        assert!(r.validate().is_ok());
    }

    #[test]
    fn pla_loader_names_the_field() {
        let e = Problem::from_pla_str("{\"vim_accounts\": [\"a\"]}").unwrap_err();
        assert_eq!(
            e.to_string(),
            "ns_placement_data.trp_link_latency: missing: expected present"
        );
        let e = Problem::from_pla_str("nope").unwrap_err();
        assert!(matches!(e, LinksError::Json(_)));
        let data = serde_json::json!({
            "vim_accounts": ["vimA", "vimB"],
            "trp_link_latency": [[0, 1], [1, 0]],
            "trp_link_jitter": [[0, 1], [1, 0]],
            "trp_link_price_list": [[0, 1], [1, -2]],
            "ns_desc": [], "vld_desc": []
        });
        let e = Problem::from_pla_json(&data).unwrap_err();
        assert_eq!(
            e.to_string(),
            "trp_link_price_list[1][1]: -2: expected a non-negative number with at most 6 decimals"
        );
    }

    #[test]
    fn decimal_prices_are_exact() {
        assert_eq!(Price::parse_decimal("0.1").unwrap().micros(), 100_000);
        assert_eq!(
            Price::parse_decimal("12.000001").unwrap().micros(),
            12_000_001
        );
        assert!(Price::parse_decimal("1.0000001").is_none());
        assert!(Price::parse_decimal("-1").is_none());
        assert!(Price::parse_decimal("1e3").is_none());
        assert!(Price::parse_decimal("1.").is_none());
        assert_eq!(Price::parse_decimal("2.50").unwrap().to_string(), "2.5");
        // 0.1 + 0.2 == 0.3 exactly: the tie is a tie.
        let r = req(
            vec![
                vec![Price::parse_decimal("0.3"), Price::parse_decimal("0.1")],
                vec![Price::parse_decimal("0.1"), Price::parse_decimal("0.2")],
            ],
            mesh(2, 0, 0, 0),
            vec![],
        );
        let s = r.validate().unwrap().solve();
        let pl = s.outcome.unwrap();
        assert_eq!(pl.cost.to_string(), "0.2");
        assert_eq!(pl.vims, vec![1, 0]);
    }

    #[test]
    fn ties_go_to_the_lexicographically_first_placement() {
        // Every VIM costs the same for both VNFs, links are free: all 9 placements tie.
        let r = req(
            vec![vec![p(5); 3], vec![p(5); 3]],
            mesh(3, 0, 0, 0),
            vec![(0, 1, None, None)],
        );
        let prob = r.validate().unwrap();
        let s = prob.solve();
        assert_eq!(s.outcome.as_ref().unwrap().vims, vec![0, 0]);
        assert_eq!(prob.solve_exhaustive().unwrap().vims, vec![0, 0]);
        // Make VIM 0 unusable for VNF 1 (a missing price, not a number): (0,1) is next.
        let mut r = req(
            vec![vec![None, p(5), p(5)], vec![p(5); 3]],
            mesh(3, 0, 0, 0),
            vec![],
        );
        r.vnfs[1].prices[0] = None;
        let prob = r.validate().unwrap();
        assert_eq!(prob.solve().outcome.unwrap().vims, vec![1, 1]);
        // Tie between (1, 2) and (2, 1): first one wins although the search tries the most
        // constrained VNF (the second) first.
        let r = req(
            vec![vec![None, p(1), p(2)], vec![None, None, p(1)]],
            mesh(3, 0, 0, 0),
            vec![],
        );
        let mut r2 = r.clone();
        r2.vnfs[1].prices[1] = p(2);
        let prob = r2.validate().unwrap();
        assert_eq!(prob.solve().outcome.unwrap().vims, vec![1, 2]);
    }

    #[test]
    fn absent_links_are_unusable_and_named() {
        let mut links = mesh(2, 1, 10, 1);
        links[0][1] = None;
        links[1][0] = None;
        let mut r = req(
            vec![vec![p(1), None], vec![None, p(1)]],
            links,
            vec![(0, 1, None, None)],
        );
        let s = r.clone().validate().unwrap().solve();
        match s.outcome {
            Err(Unsatisfiable::Link {
                vld: 0,
                cause: LinkBlock::NoLink,
                ..
            }) => {}
            other => panic!("unexpected {other:?}"),
        }
        r.links[0][1] = Some(Link::new(Price::ZERO, 50, 1));
        r.vlds[0].max_latency = Some(20);
        let s = r.validate().unwrap().solve();
        let e = s.outcome.unwrap_err();
        assert_eq!(
            e.to_string(),
            "vld 0 (\"1\" -> \"2\", latency <= 20): no linked pair of allowed vims meets the latency bound"
        );
    }

    #[test]
    fn conflicts_name_a_minimal_set() {
        // Triangle: 1-2 and 2-3 must be on the same VIM (latency 0), 1 and 3 pinned apart.
        let mut r = req(
            vec![vec![p(1), p(1)], vec![p(1), p(1)], vec![p(1), p(1)]],
            mesh(2, 1, 10, 0),
            vec![
                (0, 1, Some(5), None),
                (1, 2, Some(5), None),
                (0, 2, None, None),
            ],
        );
        r.vnfs[0].pin = Some("vim0".into());
        r.vnfs[2].pin = Some("vim1".into());
        let s = r.validate().unwrap().solve();
        match s.outcome {
            Err(Unsatisfiable::Conflict {
                vlds,
                pins,
                description,
            }) => {
                assert_eq!(vlds, vec![0, 1]);
                assert_eq!(pins, vec![0, 2]);
                assert!(
                    description.contains("pin \"1\" -> \"vim0\""),
                    "{description}"
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(s.stats.conflict_searches > 0);
    }

    #[test]
    fn pins_without_prices_and_unpriced_vnfs_are_named() {
        let mut r = req(
            vec![vec![p(1), None], vec![None, None]],
            mesh(2, 1, 1, 1),
            vec![],
        );
        let s = r.clone().validate().unwrap().solve();
        assert_eq!(
            s.outcome,
            Err(Unsatisfiable::NoPricedVim { vnf: "2".into() })
        );
        r.vnfs[1].prices = vec![p(1), p(1)];
        r.vnfs[0].pin = Some("vim1".into());
        let s = r.validate().unwrap().solve();
        assert_eq!(
            s.outcome,
            Err(Unsatisfiable::PinnedWithoutPrice {
                vnf: "1".into(),
                vim: "vim1".into()
            })
        );
    }

    #[test]
    fn pla_account_ids() {
        assert_eq!(
            pla_vim_account_id("vim00000000_38f5_438d"),
            "00000000-38f5-438d"
        );
    }
}
