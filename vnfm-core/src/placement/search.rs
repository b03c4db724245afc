//! The backtracking search over merged groups.
//!
//! Variables are *host groups* (members that hard host-affinity ties to one host); host
//! groups that hard zone- or host-affinity ties to one zone form a *zone group*. The host groups
//! of a zone group are consecutive in the search order; the first one decides the zone.
//! Anti-affinity is checked against per-constraint occupancy counts (per zone, or per host in a
//! hash map), so testing a value costs O(constraints of the group), never O(hosts) or
//! O(members). Values are drawn lazily: a few uniform draws first (random policy) or the next
//! entry of an ordered index (capacity-aware policy), and the full candidate list of a zone is
//! only materialised when those draws keep failing.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use rand::seq::SliceRandom;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::constraint::{ConstraintKind, Scope};
use crate::zone::Resources;

use super::index::{u32_index, Index};
use super::Selection;

/// How a constraint takes part in one search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// Ignored.
    Off,
    /// Must hold.
    Hard,
    /// Preferred: values that break it are tried only after those that do not.
    Soft,
}

/// The result of one search.
#[derive(Debug)]
pub(super) enum Outcome {
    /// A host for every item.
    Found(Vec<u32>),
    /// Proven impossible.
    Infeasible,
    /// The step limit was reached first.
    Limit,
}

/// Uniform draws tried before a candidate list is materialised.
const DRAWS: u32 = 16;

type Key = (u64, u64, u64);

fn key_of(free: Option<Resources>) -> Key {
    match free {
        Some(r) => (r.vcpus, r.memory_mb, r.disk_gb),
        None => (u64::MAX, u64::MAX, u64::MAX),
    }
}

#[derive(Debug, Default)]
struct HostGroup {
    items: Vec<u32>,
    zg: u32,
    demand: Resources,
    pin_host: Option<u32>,
    dead: bool,
    fixed: bool,
    /// (constraint, number of members of this group in it), host-scope constraints.
    hcons: Vec<(u32, u32)>,
    has_soft: bool,
    first: u32,
    degree: u64,
}

#[derive(Debug, Default)]
struct ZoneGroup {
    hgs: Vec<u32>,
    pin_zone: Option<u32>,
    dead: bool,
    /// (constraint, number of members of this group in it), zone-scope constraints.
    zcons: Vec<(u32, u32)>,
    has_soft: bool,
    demand: Resources,
    first: u32,
    degree: u64,
    zone: Option<u32>,
}

#[derive(Debug)]
struct ConsRt {
    mode: Mode,
    kind: ConstraintKind,
    occ_zone: Vec<u32>,
    occ_host: HashMap<u32, u32>,
    total: u32,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Gen {
    #[default]
    Start,
    Sampling(u32),
    List(usize),
    Ordered(Option<(Key, u32)>),
    Done,
}

#[derive(Debug, Default)]
struct Frame {
    hg: u32,
    decides: bool,
    placed: Option<u32>,
    tier1: bool,
    zgen: Gen,
    zlist: Vec<u32>,
    ztried: Vec<u32>,
    cur_zone: Option<u32>,
    hgen: Gen,
    hlist: Vec<u32>,
    htried: Vec<u32>,
    t1: Vec<(u64, [u64; 6], u32)>,
    t1pos: usize,
}

impl Frame {
    fn reset(&mut self, hg: u32, decides: bool) {
        self.hg = hg;
        self.decides = decides;
        self.placed = None;
        self.tier1 = false;
        self.zgen = Gen::Start;
        self.zlist.clear();
        self.ztried.clear();
        self.cur_zone = None;
        self.hgen = Gen::Start;
        self.hlist.clear();
        self.htried.clear();
        self.t1.clear();
        self.t1pos = 0;
    }
}

struct Solver<'i, 'a> {
    ix: &'i Index<'a>,
    selection: Selection,
    rng: ChaCha8Rng,
    hgs: Vec<HostGroup>,
    zgs: Vec<ZoneGroup>,
    cons: Vec<ConsRt>,
    host_free: Vec<Option<Resources>>,
    zone_sum: Vec<Resources>,
    zone_unknown: Vec<u32>,
    zone_rank: BTreeSet<(Reverse<Key>, u32)>,
    host_rank: Vec<BTreeSet<(Reverse<Key>, u32)>>,
}

/// Union-find with path halving.
fn find(parent: &mut [u32], mut x: u32) -> u32 {
    while let Some(&p) = parent.get(x as usize) {
        if p == x {
            break;
        }
        let gp = parent.get(p as usize).copied().unwrap_or(p);
        if let Some(slot) = parent.get_mut(x as usize) {
            *slot = gp;
        }
        x = gp;
    }
    x
}

fn union(parent: &mut [u32], a: u32, b: u32) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        if let Some(slot) = parent.get_mut(hi as usize) {
            *slot = lo;
        }
    }
}

/// The groups hard affinity makes of the members, numbered densely in member order: a zone
/// group shares a zone (zone or host affinity), a host group, inside one zone group, a host
/// (host affinity).
struct Groups {
    hgs: Vec<HostGroup>,
    zgs: Vec<ZoneGroup>,
    /// The host group of each member.
    hg_of: Vec<u32>,
    /// The zone group of each member.
    zg_of: Vec<u32>,
}

impl Groups {
    /// The groups of the members of `ix` under the constraints' `modes`, with their demand and
    /// pins.
    fn of(ix: &Index<'_>, modes: &[Mode]) -> Self {
        let n = ix.n_members();
        let (mut zpar, mut hpar) = affinity_parents(ix, modes);
        let mut hg_of = vec![u32::MAX; n];
        let mut zg_of = vec![u32::MAX; n];
        let mut hg_by_root: HashMap<u32, u32> = HashMap::new();
        let mut zg_by_root: HashMap<u32, u32> = HashMap::new();
        let mut hgs: Vec<HostGroup> = Vec::new();
        let mut zgs: Vec<ZoneGroup> = Vec::new();
        for m in 0..n {
            let m32 = u32_index(m);
            let zr = find(&mut zpar, m32);
            let zg = *zg_by_root.entry(zr).or_insert_with(|| {
                zgs.push(ZoneGroup {
                    first: m32,
                    ..ZoneGroup::default()
                });
                u32_index(zgs.len() - 1)
            });
            let hr = find(&mut hpar, m32);
            let hg = *hg_by_root.entry(hr).or_insert_with(|| {
                hgs.push(HostGroup {
                    zg,
                    first: m32,
                    fixed: true,
                    ..HostGroup::default()
                });
                let id = u32_index(hgs.len() - 1);
                if let Some(z) = zgs.get_mut(zg as usize) {
                    z.hgs.push(id);
                }
                id
            });
            hg_of[m] = hg;
            zg_of[m] = zg;
            let (group, zgroup) = match (hgs.get_mut(hg as usize), zgs.get_mut(zg as usize)) {
                (Some(g), Some(z)) => (g, z),
                _ => continue,
            };
            let pin = |slot: &mut Option<u32>, dead: &mut bool, v: u32| match *slot {
                None => *slot = Some(v),
                Some(p) if p != v => *dead = true,
                Some(_) => {}
            };
            if m < ix.n_items {
                group.fixed = false;
                group.items.push(m32);
                let d = ix.demand.get(m).copied().unwrap_or_default();
                group.demand = group.demand.saturating_add(&d);
                zgroup.demand = zgroup.demand.saturating_add(&d);
                if let Some(Some(z)) = ix.item_pin.get(m) {
                    pin(&mut zgroup.pin_zone, &mut zgroup.dead, *z);
                }
            } else if let Some((z, h)) = ix.fixed.get(m - ix.n_items) {
                pin(&mut group.pin_host, &mut group.dead, *h);
                pin(&mut zgroup.pin_zone, &mut zgroup.dead, *z);
            }
        }

        Groups {
            hgs,
            zgs,
            hg_of,
            zg_of,
        }
    }

    /// The runtime state of each constraint under its mode; a tracked constraint is recorded
    /// on the groups it binds (a hard anti-affinity with two members in one group kills it).
    fn constraints(&mut self, ix: &Index<'_>, modes: &[Mode]) -> Vec<ConsRt> {
        let mode_of = |c: usize| modes.get(c).copied().unwrap_or(Mode::Off);
        let mut cons = Vec::with_capacity(ix.cons.len());
        for (c, ci) in ix.cons.iter().enumerate() {
            let mode = mode_of(c);
            let tracked = match mode {
                Mode::Off => false,
                Mode::Hard => ci.kind == ConstraintKind::AntiAffinity,
                Mode::Soft => true,
            };
            cons.push(ConsRt {
                mode: if tracked { mode } else { Mode::Off },
                kind: ci.kind,
                occ_zone: if tracked && ci.scope == Scope::Zone {
                    vec![0; ix.zone_names.len()]
                } else {
                    Vec::new()
                },
                occ_host: HashMap::new(),
                total: 0,
            });
            if !tracked {
                continue;
            }
            let c32 = u32_index(c);
            let of = if ci.scope == Scope::Zone {
                &self.zg_of
            } else {
                &self.hg_of
            };
            let mut groups: Vec<u32> = ci
                .members
                .iter()
                .filter_map(|m| of.get(*m as usize).copied())
                .collect();
            groups.sort_unstable();
            let size = u64::try_from(ci.members.len()).unwrap_or(u64::MAX);
            let mut i = 0;
            while let Some(&g) = groups.get(i) {
                let cnt = groups[i..].iter().take_while(|x| **x == g).count();
                i += cnt;
                let cnt32 = u32_index(cnt);
                let hard_clash = mode == Mode::Hard && cnt > 1;
                if ci.scope == Scope::Zone {
                    if let Some(z) = self.zgs.get_mut(g as usize) {
                        z.zcons.push((c32, cnt32));
                        z.dead |= hard_clash;
                        if mode == Mode::Soft {
                            z.has_soft = true;
                        } else {
                            z.degree = z.degree.saturating_add(size);
                        }
                    }
                } else if let Some(h) = self.hgs.get_mut(g as usize) {
                    h.hcons.push((c32, cnt32));
                    h.dead |= hard_clash;
                    if mode == Mode::Soft {
                        h.has_soft = true;
                    } else {
                        h.degree = h.degree.saturating_add(size);
                    }
                }
            }
        }

        cons
    }
}

/// The union-find parents of hard affinity over the members of `ix`: (zone, host); zone
/// affinity joins zone groups only, host affinity both.
fn affinity_parents(ix: &Index<'_>, modes: &[Mode]) -> (Vec<u32>, Vec<u32>) {
    let n = ix.n_members();
    let mode_of = |c: usize| modes.get(c).copied().unwrap_or(Mode::Off);
    let mut zpar: Vec<u32> = (0..n).map(u32_index).collect();
    let mut hpar = zpar.clone();
    for (c, cons) in ix.cons.iter().enumerate() {
        if mode_of(c) != Mode::Hard || cons.kind != ConstraintKind::Affinity {
            continue;
        }
        for w in cons.members.windows(2) {
            union(&mut zpar, w[0], w[1]);
            if cons.scope == Scope::Host {
                union(&mut hpar, w[0], w[1]);
            }
        }
    }
    (zpar, hpar)
}

/// Searches for a host for every item, honouring the constraints whose mode is `Hard` and
/// preferring values that honour those whose mode is `Soft`.
pub(super) fn solve(
    ix: &Index<'_>,
    modes: &[Mode],
    selection: Selection,
    seed: u64,
    step_limit: u64,
) -> Outcome {
    let Some(mut solver) = Solver::build(ix, modes, selection, seed) else {
        return Outcome::Infeasible;
    };
    solver.run(step_limit)
}

impl<'i, 'a> Solver<'i, 'a> {
    /// Builds groups and occupancy from the fixed members; `None` when that already proves the
    /// problem infeasible.
    fn build(ix: &'i Index<'a>, modes: &[Mode], selection: Selection, seed: u64) -> Option<Self> {
        let mut groups = Groups::of(ix, modes);
        let cons = groups.constraints(ix, modes);
        let nz = ix.zone_names.len();
        let mut zone_sum = vec![Resources::default(); nz];
        let mut zone_unknown = vec![0u32; nz];
        for (z, hosts) in ix.zone_hosts.iter().enumerate() {
            for h in hosts {
                match ix.host_free.get(*h as usize).copied().flatten() {
                    Some(f) => zone_sum[z] = zone_sum[z].saturating_add(&f),
                    None => zone_unknown[z] += 1,
                }
            }
        }
        let mut solver = Solver {
            ix,
            selection,
            rng: ChaCha8Rng::seed_from_u64(seed),
            hgs: groups.hgs,
            zgs: groups.zgs,
            cons,
            host_free: ix.host_free.clone(),
            zone_sum,
            zone_unknown,
            zone_rank: BTreeSet::new(),
            host_rank: Vec::new(),
        };
        if selection == Selection::CapacityAware {
            solver.rank_by_capacity();
        }
        if solver.hgs.iter().any(|g| g.dead) || solver.zgs.iter().any(|z| z.dead) {
            return None;
        }
        solver.place_fixed().then_some(solver)
    }

    /// Ranks the candidate zones and the hosts of each zone by free capacity.
    fn rank_by_capacity(&mut self) {
        let ix = self.ix;
        for &z in &ix.cand_zones {
            let key = self.zone_key(z);
            self.zone_rank.insert((Reverse(key), z));
        }
        self.host_rank = ix
            .zone_hosts
            .iter()
            .map(|hosts| {
                hosts
                    .iter()
                    .map(|h| (Reverse(key_of(self.host_free_of(*h))), *h))
                    .collect()
            })
            .collect();
    }

    /// Registers the groups whose place is known from the start; false when one does not fit
    /// there or the rest cannot fit.
    fn place_fixed(&mut self) -> bool {
        // Zone groups whose zone is known from the start (pinned items, existing members).
        for zg in 0..self.zgs.len() {
            let Some(z) = self.zgs[zg].pin_zone else {
                continue;
            };
            if !self.zone_compatible(zg, z) {
                return false;
            }
            self.register_zone(zg, z, 1);
        }
        // Host groups made only of existing members.
        for hg in 0..self.hgs.len() {
            let g = &self.hgs[hg];
            if !g.fixed {
                continue;
            }
            let Some(h) = g.pin_host else { continue };
            if !self.host_compatible(hg, h) {
                return false;
            }
            self.register_host(hg, h, 1);
        }
        self.pigeonhole_ok()
    }

    fn host_free_of(&self, h: u32) -> Option<Resources> {
        self.host_free.get(h as usize).copied().flatten()
    }

    fn zone_key(&self, z: u32) -> Key {
        let zi = z as usize;
        if self.zone_unknown.get(zi).copied().unwrap_or(0) > 0 {
            key_of(None)
        } else {
            key_of(self.zone_sum.get(zi).copied())
        }
    }

    /// Hard zone-scope anti-affinity allows zone group `zg` in zone `z`.
    fn zone_compatible(&self, zg: usize, z: u32) -> bool {
        let Some(g) = self.zgs.get(zg) else {
            return false;
        };
        g.zcons
            .iter()
            .all(|(c, _)| match self.cons.get(*c as usize) {
                Some(rt) if rt.mode == Mode::Hard => rt.occ_zone.get(z as usize) == Some(&0),
                _ => true,
            })
    }

    /// Hard host-scope anti-affinity allows host group `hg` on host `h`.
    fn host_compatible(&self, hg: usize, h: u32) -> bool {
        let Some(g) = self.hgs.get(hg) else {
            return false;
        };
        g.hcons
            .iter()
            .all(|(c, _)| match self.cons.get(*c as usize) {
                Some(rt) if rt.mode == Mode::Hard => !rt.occ_host.contains_key(&h),
                _ => true,
            })
    }

    fn register_zone(&mut self, zg: usize, z: u32, sign: i8) {
        let Some(g) = self.zgs.get_mut(zg) else {
            return;
        };
        g.zone = if sign > 0 { Some(z) } else { None };
        for (c, cnt) in &g.zcons {
            if let Some(rt) = self.cons.get_mut(*c as usize) {
                if let Some(o) = rt.occ_zone.get_mut(z as usize) {
                    if sign > 0 {
                        *o += cnt;
                        rt.total += cnt;
                    } else {
                        *o -= cnt;
                        rt.total -= cnt;
                    }
                }
            }
        }
    }

    fn register_host(&mut self, hg: usize, h: u32, sign: i8) {
        let Some(g) = self.hgs.get(hg) else {
            return;
        };
        for (c, cnt) in &g.hcons {
            if let Some(rt) = self.cons.get_mut(*c as usize) {
                if sign > 0 {
                    *rt.occ_host.entry(h).or_insert(0) += cnt;
                    rt.total += cnt;
                } else {
                    rt.total -= cnt;
                    if let Some(o) = rt.occ_host.get_mut(&h) {
                        *o -= cnt;
                        if *o == 0 {
                            rt.occ_host.remove(&h);
                        }
                    }
                }
            }
        }
    }

    /// Counting bound: a hard anti-affinity constraint needs as many free domains as it has
    /// groups still to place.
    fn pigeonhole_ok(&self) -> bool {
        let mut need_z: HashMap<u32, usize> = HashMap::new();
        for g in &self.zgs {
            if g.zone.is_some() {
                continue;
            }
            for (c, _) in &g.zcons {
                *need_z.entry(*c).or_insert(0) += 1;
            }
        }
        let mut need_h: HashMap<u32, usize> = HashMap::new();
        for g in &self.hgs {
            if g.fixed {
                continue;
            }
            for (c, _) in &g.hcons {
                *need_h.entry(*c).or_insert(0) += 1;
            }
        }
        for (c, rt) in self.cons.iter().enumerate() {
            if rt.mode != Mode::Hard {
                continue;
            }
            let c32 = u32_index(c);
            if let Some(need) = need_z.get(&c32) {
                let free = self
                    .ix
                    .cand_zones
                    .iter()
                    .filter(|z| rt.occ_zone.get(**z as usize) == Some(&0))
                    .count();
                if *need > free {
                    return false;
                }
            }
            if let Some(need) = need_h.get(&c32) {
                let used = rt
                    .occ_host
                    .keys()
                    .filter(|h| self.ix.host_candidate.get(**h as usize) == Some(&true))
                    .count();
                if *need > self.ix.cand_hosts.saturating_sub(used) {
                    return false;
                }
            }
        }
        true
    }

    /// The search order: zone groups (pinned first, then most constrained, then largest), each
    /// followed by its host groups in the same order.
    fn order(&self) -> Vec<u32> {
        let mut zgs: Vec<usize> = (0..self.zgs.len())
            .filter(|z| {
                self.zgs[*z]
                    .hgs
                    .iter()
                    .any(|h| !self.hgs[*h as usize].fixed)
            })
            .collect();
        let zdeg = |z: &ZoneGroup| {
            z.hgs.iter().fold(z.degree, |acc, h| {
                acc.saturating_add(self.hgs.get(*h as usize).map_or(0, |g| g.degree))
            })
        };
        zgs.sort_by_key(|z| {
            let g = &self.zgs[*z];
            (
                g.pin_zone.is_none(),
                Reverse(zdeg(g)),
                Reverse(key_of(Some(g.demand))),
                g.first,
            )
        });
        let mut order = Vec::with_capacity(self.hgs.len());
        for z in zgs {
            let mut hs: Vec<u32> = self.zgs[z]
                .hgs
                .iter()
                .copied()
                .filter(|h| !self.hgs[*h as usize].fixed)
                .collect();
            hs.sort_by_key(|h| {
                let g = &self.hgs[*h as usize];
                (
                    g.pin_host.is_none(),
                    Reverse(g.degree),
                    Reverse(key_of(Some(g.demand))),
                    g.first,
                )
            });
            order.extend(hs);
        }
        order
    }

    fn run(&mut self, step_limit: u64) -> Outcome {
        let order = self.order();
        let mut frames: Vec<Frame> = Vec::with_capacity(order.len());
        let mut depth = 0usize;
        let mut steps = 0u64;
        if let Some(first) = order.first() {
            let mut f = Frame::default();
            f.reset(*first, self.zone_of_group_unset(*first));
            frames.push(f);
        }
        while depth < order.len() {
            steps += 1;
            if steps > step_limit {
                return Outcome::Limit;
            }
            let mut f = std::mem::take(&mut frames[depth]);
            if let Some(h) = f.placed.take() {
                self.apply(&f, h, -1);
            }
            match self.next_value(&mut f) {
                Some(h) => {
                    self.apply(&f, h, 1);
                    f.placed = Some(h);
                    frames[depth] = f;
                    depth += 1;
                    if let Some(next) = order.get(depth) {
                        let decides = self.zone_of_group_unset(*next);
                        if frames.len() <= depth {
                            frames.push(Frame::default());
                        }
                        frames[depth].reset(*next, decides);
                    }
                }
                None => {
                    frames[depth] = f;
                    if depth == 0 {
                        return Outcome::Infeasible;
                    }
                    depth -= 1;
                }
            }
        }
        let mut hosts = vec![u32::MAX; self.ix.n_items];
        for f in &frames {
            if let (Some(h), Some(g)) = (f.placed, self.hgs.get(f.hg as usize)) {
                for m in &g.items {
                    if let Some(slot) = hosts.get_mut(*m as usize) {
                        *slot = h;
                    }
                }
            }
        }
        Outcome::Found(hosts)
    }

    fn zone_of_group_unset(&self, hg: u32) -> bool {
        self.hgs
            .get(hg as usize)
            .and_then(|g| self.zgs.get(g.zg as usize))
            .is_some_and(|z| z.zone.is_none())
    }

    fn apply(&mut self, f: &Frame, h: u32, sign: i8) {
        let hg = f.hg as usize;
        let z = self.ix.zone_of(h);
        let (zg, demand) = match self.hgs.get(hg) {
            Some(g) => (g.zg as usize, g.demand),
            None => return,
        };
        if f.decides {
            self.register_zone(zg, z, sign);
        }
        self.register_host(hg, h, sign);
        let Some(free) = self.host_free_of(h) else {
            return;
        };
        let new_free = if sign > 0 {
            free.saturating_sub(&demand)
        } else {
            free.saturating_add(&demand)
        };
        let zi = z as usize;
        let old_zkey = self.zone_key(z);
        if let Some(slot) = self.host_free.get_mut(h as usize) {
            *slot = Some(new_free);
        }
        if let Some(s) = self.zone_sum.get_mut(zi) {
            *s = if sign > 0 {
                s.saturating_sub(&demand)
            } else {
                s.saturating_add(&demand)
            };
        }
        if self.selection == Selection::CapacityAware {
            if let Some(set) = self.host_rank.get_mut(zi) {
                set.remove(&(Reverse(key_of(Some(free))), h));
                set.insert((Reverse(key_of(Some(new_free))), h));
            }
            let new_zkey = self.zone_key(z);
            if self.zone_rank.remove(&(Reverse(old_zkey), z)) {
                self.zone_rank.insert((Reverse(new_zkey), z));
            }
        }
    }

    /// Zone `z` for the deciding frame of `zg`; `tier0` also demands no soft violation.
    fn zone_ok(&self, zg: usize, z: u32, tier0: bool) -> bool {
        let Some(g) = self.zgs.get(zg) else {
            return false;
        };
        if self.ix.zone_candidate.get(z as usize) != Some(&true) {
            return false;
        }
        let zi = z as usize;
        if self.zone_unknown.get(zi) == Some(&0)
            && !self.zone_sum.get(zi).is_some_and(|s| s.fits(&g.demand))
        {
            return false;
        }
        g.zcons.iter().all(|(c, cnt)| {
            let Some(rt) = self.cons.get(*c as usize) else {
                return true;
            };
            let occ = rt.occ_zone.get(zi).copied().unwrap_or(0);
            match rt.mode {
                Mode::Hard => occ == 0,
                Mode::Soft if tier0 => soft_cost(rt, occ, *cnt) == 0,
                _ => true,
            }
        })
    }

    fn zone_cost(&self, zg: usize, z: u32) -> u64 {
        let Some(g) = self.zgs.get(zg) else {
            return 0;
        };
        g.zcons
            .iter()
            .filter_map(|(c, cnt)| {
                let rt = self.cons.get(*c as usize)?;
                (rt.mode == Mode::Soft)
                    .then(|| soft_cost(rt, rt.occ_zone.get(z as usize).copied().unwrap_or(0), *cnt))
            })
            .sum()
    }

    fn host_ok(&self, hg: usize, h: u32, tier0: bool) -> bool {
        let Some(g) = self.hgs.get(hg) else {
            return false;
        };
        if self.ix.host_candidate.get(h as usize) != Some(&true) {
            return false;
        }
        if g.pin_host.is_some_and(|p| p != h) {
            return false;
        }
        if let Some(free) = self.host_free_of(h) {
            if !free.fits(&g.demand) {
                return false;
            }
        }
        g.hcons.iter().all(|(c, cnt)| {
            let Some(rt) = self.cons.get(*c as usize) else {
                return true;
            };
            match rt.mode {
                Mode::Hard => !rt.occ_host.contains_key(&h),
                Mode::Soft if tier0 => {
                    soft_cost(rt, rt.occ_host.get(&h).copied().unwrap_or(0), *cnt) == 0
                }
                _ => true,
            }
        })
    }

    fn host_cost(&self, hg: usize, h: u32) -> u64 {
        let Some(g) = self.hgs.get(hg) else {
            return 0;
        };
        g.hcons
            .iter()
            .filter_map(|(c, cnt)| {
                let rt = self.cons.get(*c as usize)?;
                (rt.mode == Mode::Soft)
                    .then(|| soft_cost(rt, rt.occ_host.get(&h).copied().unwrap_or(0), *cnt))
            })
            .sum()
    }

    fn next_value(&mut self, f: &mut Frame) -> Option<u32> {
        let hg = f.hg as usize;
        let zg = self.hgs.get(hg)?.zg as usize;
        loop {
            if f.tier1 {
                let v = f.t1.get(f.t1pos).map(|t| t.2);
                f.t1pos += 1;
                return v;
            }
            if let Some(z) = f.cur_zone {
                if let Some(h) = self.next_host(f, hg, z) {
                    return Some(h);
                }
                f.cur_zone = None;
                f.hgen = Gen::Start;
                f.hlist.clear();
                f.htried.clear();
            }
            match self.next_zone(f, zg) {
                Some(z) => f.cur_zone = Some(z),
                None => {
                    f.tier1 = true;
                    let soft = (f.decides && self.zgs.get(zg).is_some_and(|g| g.has_soft))
                        || self.hgs.get(hg).is_some_and(|g| g.has_soft);
                    if soft {
                        self.build_tier1(f, hg, zg);
                    }
                }
            }
        }
    }

    fn next_zone(&mut self, f: &mut Frame, zg: usize) -> Option<u32> {
        if !f.decides {
            if f.zgen == Gen::Start {
                f.zgen = Gen::Done;
                return self.zgs.get(zg).and_then(|g| g.zone);
            }
            return None;
        }
        if f.zgen == Gen::Start {
            f.zgen = match self.selection {
                Selection::Random => Gen::Sampling(0),
                Selection::CapacityAware => Gen::Ordered(None),
            };
        }
        loop {
            match f.zgen {
                Gen::Sampling(draws) => {
                    let cands = &self.ix.cand_zones;
                    if draws >= DRAWS || cands.is_empty() {
                        let mut list: Vec<u32> = cands
                            .iter()
                            .copied()
                            .filter(|z| !f.ztried.contains(z) && self.zone_ok(zg, *z, true))
                            .collect();
                        list.shuffle(&mut self.rng);
                        f.zlist = list;
                        f.zgen = Gen::List(0);
                        continue;
                    }
                    f.zgen = Gen::Sampling(draws + 1);
                    let z = cands[self.rng.gen_range(0..cands.len())];
                    if f.ztried.contains(&z) {
                        continue;
                    }
                    f.ztried.push(z);
                    if self.zone_ok(zg, z, true) {
                        return Some(z);
                    }
                }
                Gen::List(pos) => {
                    f.zgen = Gen::List(pos + 1);
                    return f.zlist.get(pos).copied();
                }
                Gen::Ordered(last) => {
                    let lower = match last {
                        Some((k, z)) => Bound::Excluded((Reverse(k), z)),
                        None => Bound::Unbounded,
                    };
                    let found = self
                        .zone_rank
                        .range((lower, Bound::Unbounded))
                        .find(|(_, z)| self.zone_ok(zg, *z, true))
                        .map(|(k, z)| (k.0, *z));
                    return match found {
                        Some((k, z)) => {
                            f.zgen = Gen::Ordered(Some((k, z)));
                            Some(z)
                        }
                        None => {
                            f.zgen = Gen::Done;
                            None
                        }
                    };
                }
                Gen::Start | Gen::Done => return None,
            }
        }
    }

    fn next_host(&mut self, f: &mut Frame, hg: usize, z: u32) -> Option<u32> {
        if f.hgen == Gen::Start {
            let pinned = self.hgs.get(hg).and_then(|g| g.pin_host);
            if let Some(p) = pinned {
                f.hgen = Gen::Done;
                let ok = self.ix.zone_of(p) == z && self.host_ok(hg, p, true);
                return ok.then_some(p);
            }
            f.hgen = match self.selection {
                Selection::Random => Gen::Sampling(0),
                Selection::CapacityAware => Gen::Ordered(None),
            };
        }
        let hosts = self.ix.zone_hosts.get(z as usize)?;
        loop {
            match f.hgen {
                Gen::Sampling(draws) => {
                    if draws >= DRAWS || hosts.is_empty() {
                        let mut list: Vec<u32> = hosts
                            .iter()
                            .copied()
                            .filter(|h| !f.htried.contains(h) && self.host_ok(hg, *h, true))
                            .collect();
                        list.shuffle(&mut self.rng);
                        f.hlist = list;
                        f.hgen = Gen::List(0);
                        continue;
                    }
                    f.hgen = Gen::Sampling(draws + 1);
                    let h = hosts[self.rng.gen_range(0..hosts.len())];
                    if f.htried.contains(&h) {
                        continue;
                    }
                    f.htried.push(h);
                    if self.host_ok(hg, h, true) {
                        return Some(h);
                    }
                }
                Gen::List(pos) => {
                    f.hgen = Gen::List(pos + 1);
                    return f.hlist.get(pos).copied();
                }
                Gen::Ordered(last) => {
                    let lower = match last {
                        Some((k, h)) => Bound::Excluded((Reverse(k), h)),
                        None => Bound::Unbounded,
                    };
                    let found = self
                        .host_rank
                        .get(z as usize)?
                        .range((lower, Bound::Unbounded))
                        .find(|(_, h)| self.host_ok(hg, *h, true))
                        .map(|(k, h)| (k.0, *h));
                    return match found {
                        Some((k, h)) => {
                            f.hgen = Gen::Ordered(Some((k, h)));
                            Some(h)
                        }
                        None => {
                            f.hgen = Gen::Done;
                            None
                        }
                    };
                }
                Gen::Start | Gen::Done => return None,
            }
        }
    }

    /// The values that break a soft constraint, cheapest first.
    fn build_tier1(&mut self, f: &mut Frame, hg: usize, zg: usize) {
        let zones: Vec<u32> = if f.decides {
            self.ix
                .cand_zones
                .iter()
                .copied()
                .filter(|z| self.zone_ok(zg, *z, false))
                .collect()
        } else {
            self.zgs.get(zg).and_then(|g| g.zone).into_iter().collect()
        };
        let mut t1 = std::mem::take(&mut f.t1);
        t1.clear();
        for z in zones {
            let zc = if f.decides { self.zone_cost(zg, z) } else { 0 };
            let zk = self.zone_key(z);
            for &h in self.ix.zone_hosts.get(z as usize).into_iter().flatten() {
                if !self.host_ok(hg, h, false) {
                    continue;
                }
                let cost = zc.saturating_add(self.host_cost(hg, h));
                if cost == 0 {
                    continue;
                }
                let tie = match self.selection {
                    Selection::Random => [self.rng.next_u64(), 0, 0, 0, 0, 0],
                    Selection::CapacityAware => {
                        let hk = key_of(self.host_free_of(h));
                        [
                            u64::MAX - zk.0,
                            u64::MAX - zk.1,
                            u64::MAX - zk.2,
                            u64::MAX - hk.0,
                            u64::MAX - hk.1,
                            u64::MAX - hk.2,
                        ]
                    }
                };
                t1.push((cost, tie, h));
            }
        }
        t1.sort_unstable();
        f.t1 = t1;
        f.t1pos = 0;
    }
}

/// What placing `cnt` members of a soft constraint in a domain already holding `occ` of its
/// members costs: shared pairs for anti-affinity, members left elsewhere for affinity.
fn soft_cost(rt: &ConsRt, occ: u32, cnt: u32) -> u64 {
    match rt.kind {
        ConstraintKind::AntiAffinity => u64::from(occ) * u64::from(cnt),
        ConstraintKind::Affinity => u64::from(rt.total - occ),
    }
}
