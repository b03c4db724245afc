//! Validation of a [`PlacementRequest`] and its dense, index-based form.

use std::collections::HashMap;

use crate::constraint::{ConstraintKind, Scope};
use crate::error::{Error, Location};
use crate::zone::Resources;

use super::PlacementRequest;

/// A constraint over member indices.
#[derive(Debug)]
pub(super) struct ConsIx {
    pub kind: ConstraintKind,
    pub scope: Scope,
    pub members: Vec<u32>,
    pub fallback: bool,
}

/// The request with every name replaced by a dense index.
///
/// Members `0..n_items` are the items, `n_items..` the existing members. Zones and hosts named
/// only by existing members are indexed too, as non-candidates.
#[derive(Debug)]
pub(super) struct Index<'a> {
    pub zone_names: Vec<&'a str>,
    pub zone_candidate: Vec<bool>,
    /// Candidate hosts of each zone (empty for non-candidate zones), in catalogue order.
    pub zone_hosts: Vec<Vec<u32>>,
    /// Candidate zones in catalogue order.
    pub cand_zones: Vec<u32>,
    pub host_names: Vec<&'a str>,
    pub host_zone: Vec<u32>,
    pub host_candidate: Vec<bool>,
    pub host_free: Vec<Option<Resources>>,
    pub cand_hosts: usize,
    pub n_items: usize,
    pub member_ids: Vec<&'a str>,
    pub demand: Vec<Resources>,
    pub item_pin: Vec<Option<u32>>,
    /// (zone, host) of each existing member.
    pub fixed: Vec<(u32, u32)>,
    pub cons: Vec<ConsIx>,
}

impl<'a> Index<'a> {
    /// Validates `req` and indexes it.
    pub(super) fn build(req: &'a PlacementRequest) -> Result<Self, Error> {
        let ix = Index {
            zone_names: Vec::new(),
            zone_candidate: Vec::new(),
            zone_hosts: Vec::new(),
            cand_zones: Vec::new(),
            host_names: Vec::new(),
            host_zone: Vec::new(),
            host_candidate: Vec::new(),
            host_free: Vec::new(),
            cand_hosts: 0,
            n_items: req.items.len(),
            member_ids: Vec::with_capacity(req.items.len() + req.existing.len()),
            demand: Vec::with_capacity(req.items.len()),
            item_pin: Vec::with_capacity(req.items.len()),
            fixed: Vec::with_capacity(req.existing.len()),
            cons: Vec::with_capacity(req.constraints.len()),
        };
        let mut b = Builder {
            ix,
            zone_by_name: HashMap::with_capacity(req.zones.len()),
            host_by_name: HashMap::new(),
            member_by_id: HashMap::with_capacity(req.items.len() + req.existing.len()),
        };
        b.zones(req)?;
        b.items(req)?;
        b.existing(req)?;
        b.constraints(req)?;
        Ok(b.ix)
    }

    /// Number of members (items and existing).
    pub(super) fn n_members(&self) -> usize {
        self.member_ids.len()
    }

    /// The name of a zone index.
    pub(super) fn zone_name(&self, z: u32) -> &'a str {
        self.zone_names.get(z as usize).copied().unwrap_or_default()
    }

    /// The name of a host index.
    pub(super) fn host_name(&self, h: u32) -> &'a str {
        self.host_names.get(h as usize).copied().unwrap_or_default()
    }

    /// The zone of a host index.
    pub(super) fn zone_of(&self, h: u32) -> u32 {
        self.host_zone.get(h as usize).copied().unwrap_or(0)
    }

    /// The id of a member index.
    pub(super) fn member_id(&self, m: u32) -> &'a str {
        self.member_ids.get(m as usize).copied().unwrap_or_default()
    }
}

/// An [`Index`] being built, with the lookups by name that only building needs.
struct Builder<'a> {
    ix: Index<'a>,
    zone_by_name: HashMap<&'a str, u32>,
    host_by_name: HashMap<&'a str, u32>,
    member_by_id: HashMap<&'a str, u32>,
}

impl<'a> Builder<'a> {
    /// Indexes the zones and their hosts (each once; a zone is a candidate unless excluded, a
    /// host when its zone is and it is available).
    fn zones(&mut self, req: &'a PlacementRequest) -> Result<(), Error> {
        for (zi, zone) in req.zones.iter().enumerate() {
            let z = u32_index(self.ix.zone_names.len());
            if self.zone_by_name.insert(zone.name.as_str(), z).is_some() {
                return Err(Error::invalid(
                    at(format!("zones[{zi}].name")),
                    format!(
                        "duplicate zone {:?}: expected each zone once",
                        zone.name.as_str()
                    ),
                ));
            }
            let candidate = zone.is_candidate() && !req.excluded.contains(&zone.name);
            let mut hosts = Vec::new();
            for (hi, host) in zone.hosts.iter().flatten().enumerate() {
                let h = u32_index(self.ix.host_names.len());
                if let Some(prev) = self.host_by_name.insert(host.name.as_str(), h) {
                    let prev_zone = self
                        .ix
                        .host_zone
                        .get(prev as usize)
                        .and_then(|pz| self.ix.zone_names.get(*pz as usize))
                        .copied()
                        .unwrap_or_default();
                    return Err(Error::invalid(
                        at(format!("zones[{zi}].hosts[{hi}].name")),
                        format!(
                            "duplicate host {:?} (also listed in zone {prev_zone:?}): expected \
                             each compute host once",
                            host.name.as_str()
                        ),
                    ));
                }
                let host_ok = candidate && host.available;
                self.ix.host_names.push(host.name.as_str());
                self.ix.host_zone.push(z);
                self.ix.host_candidate.push(host_ok);
                self.ix.host_free.push(host.free);
                if host_ok {
                    hosts.push(h);
                }
            }
            self.ix.cand_hosts += hosts.len();
            self.ix.zone_names.push(zone.name.as_str());
            self.ix.zone_candidate.push(candidate);
            if candidate {
                self.ix.cand_zones.push(z);
            }
            self.ix.zone_hosts.push(hosts);
        }
        Ok(())
    }

    /// Indexes the items to place (non-empty, unique ids; a pin to a listed zone).
    fn items(&mut self, req: &'a PlacementRequest) -> Result<(), Error> {
        for (i, item) in req.items.iter().enumerate() {
            if item.id.is_empty() {
                return Err(Error::invalid(
                    at(format!("items[{i}].id")),
                    "empty id: expected a resource id",
                ));
            }
            let m = u32_index(self.ix.member_ids.len());
            if self.member_by_id.insert(item.id.as_str(), m).is_some() {
                return Err(Error::invalid(
                    at(format!("items[{i}].id")),
                    format!("duplicate resource id {:?}: expected unique ids", item.id),
                ));
            }
            self.ix.member_ids.push(item.id.as_str());
            self.ix.demand.push(item.demand);
            self.ix.item_pin.push(
                item.zone
                    .as_ref()
                    .and_then(|z| self.zone_by_name.get(z.as_str()).copied()),
            );
        }
        Ok(())
    }

    /// Indexes the existing members, adding the zones and hosts they name that the catalogue
    /// does not list (as non-candidates); a listed host must be in the member's zone.
    fn existing(&mut self, req: &'a PlacementRequest) -> Result<(), Error> {
        for (i, ex) in req.existing.iter().enumerate() {
            if ex.id.is_empty() {
                return Err(Error::invalid(
                    at(format!("existing[{i}].id")),
                    "empty id: expected a resource id",
                ));
            }
            let m = u32_index(self.ix.member_ids.len());
            if self.member_by_id.insert(ex.id.as_str(), m).is_some() {
                return Err(Error::invalid(
                    at(format!("existing[{i}].id")),
                    format!(
                        "duplicate resource id {:?}: expected ids unique across items and \
                         existing members",
                        ex.id
                    ),
                ));
            }
            self.ix.member_ids.push(ex.id.as_str());
            let z = match self.zone_by_name.get(ex.zone.as_str()) {
                Some(z) => *z,
                None => {
                    let z = u32_index(self.ix.zone_names.len());
                    self.zone_by_name.insert(ex.zone.as_str(), z);
                    self.ix.zone_names.push(ex.zone.as_str());
                    self.ix.zone_candidate.push(false);
                    self.ix.zone_hosts.push(Vec::new());
                    z
                }
            };
            let h = match self.host_by_name.get(ex.host.as_str()) {
                Some(h) => {
                    let hz = self.ix.host_zone.get(*h as usize).copied().unwrap_or(z);
                    if hz != z {
                        let listed = self
                            .ix
                            .zone_names
                            .get(hz as usize)
                            .copied()
                            .unwrap_or_default();
                        return Err(Error::invalid(
                            at(format!("existing[{i}].host")),
                            format!(
                                "existing member {:?} is on host {:?} in zone {:?}, but the \
                                 zone catalogue lists that host in zone {listed:?}: expected \
                                 the host's zone",
                                ex.id,
                                ex.host.as_str(),
                                ex.zone.as_str()
                            ),
                        ));
                    }
                    *h
                }
                None => {
                    let h = u32_index(self.ix.host_names.len());
                    self.host_by_name.insert(ex.host.as_str(), h);
                    self.ix.host_names.push(ex.host.as_str());
                    self.ix.host_zone.push(z);
                    self.ix.host_candidate.push(false);
                    self.ix.host_free.push(None);
                    h
                }
            };
            self.ix.fixed.push((z, h));
        }
        Ok(())
    }

    /// Indexes the constraints (non-empty, unique names; known members, each once).
    fn constraints(&mut self, req: &'a PlacementRequest) -> Result<(), Error> {
        let mut names: HashMap<&str, usize> = HashMap::with_capacity(req.constraints.len());
        for (ci, c) in req.constraints.iter().enumerate() {
            if c.name.is_empty() {
                return Err(Error::invalid(
                    at(format!("constraints[{ci}].name")),
                    "empty name: expected a constraint name",
                ));
            }
            if let Some(prev) = names.insert(c.name.as_str(), ci) {
                return Err(Error::invalid(
                    at(format!("constraints[{ci}].name")),
                    format!(
                        "duplicate constraint name {:?} (also constraints[{prev}]): expected \
                         unique names",
                        c.name
                    ),
                ));
            }
            let mut members = Vec::with_capacity(c.members.len());
            let mut seen = std::collections::HashSet::with_capacity(c.members.len());
            for (mi, id) in c.members.iter().enumerate() {
                let Some(m) = self.member_by_id.get(id.as_str()) else {
                    return Err(Error::invalid(
                        at(format!("constraints[{ci}].members[{mi}]")),
                        format!(
                            "unknown member {id:?} in constraint {:?}: expected the id of an \
                             item or of an existing member",
                            c.name
                        ),
                    ));
                };
                if !seen.insert(*m) {
                    return Err(Error::invalid(
                        at(format!("constraints[{ci}].members[{mi}]")),
                        format!(
                            "member {id:?} listed twice in constraint {:?}: expected each \
                             member once",
                            c.name
                        ),
                    ));
                }
                members.push(*m);
            }
            self.ix.cons.push(ConsIx {
                kind: c.kind,
                scope: c.scope,
                members,
                fallback: c.fallback_best_effort,
            });
        }
        Ok(())
    }
}

/// The location of `field` of the request.
fn at(field: String) -> Location {
    Location::default().with_field(field)
}

/// An index as `u32`; the solver's inputs are far below 2^32 entries.
pub(super) fn u32_index(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}
