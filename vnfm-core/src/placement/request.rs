//! What the solver is asked: the items to place, the members already placed, the
//! constraints, the zone catalogue and the selection policy ([`PlacementRequest`], built with
//! its `with_*` methods). The search and its index read it; [`PlacementRequest::place`] (in
//! the parent module) answers it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::constraint::Constraint;
use crate::id::{HostId, VduId, ZoneId};
use crate::zone::{ComputeZone, Resources};

/// Values tried by one search before it gives up, unless the request says otherwise.
pub const DEFAULT_STEP_LIMIT: u64 = 2_000_000;

/// A resource to place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    /// Its id (e.g. a SOL003 resource definition id); unique among items and existing members.
    pub id: String,
    /// The VDU it instantiates.
    pub vdu_id: VduId,
    /// What it needs on one host.
    pub demand: Resources,
    /// A zone it must go to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<ZoneId>,
}

impl Item {
    /// An item that may go to any zone.
    pub fn new(id: impl Into<String>, vdu_id: impl Into<VduId>, demand: Resources) -> Self {
        Self {
            id: id.into(),
            vdu_id: vdu_id.into(),
            demand,
            zone: None,
        }
    }

    /// The same item pinned to `zone`.
    pub fn with_zone(mut self, zone: impl Into<ZoneId>) -> Self {
        self.zone = Some(zone.into());
        self
    }
}

/// A resource already placed: it never moves, and its host's reported free capacity is
/// already net of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExistingMember {
    /// Its id; unique among items and existing members.
    pub id: String,
    /// Its zone.
    pub zone: ZoneId,
    /// Its compute host.
    pub host: HostId,
}

impl ExistingMember {
    /// An existing member on `host` in `zone`.
    pub fn new(id: impl Into<String>, zone: impl Into<ZoneId>, host: impl Into<HostId>) -> Self {
        Self {
            id: id.into(),
            zone: zone.into(),
            host: host.into(),
        }
    }
}

/// How to choose among compliant zones and hosts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Selection {
    /// A random compliant zone, then a random compliant host in it, from the seed.
    #[default]
    Random,
    /// Worst-fit: the compliant zone, then host, with the most free capacity.
    CapacityAware,
}

/// Everything the solver needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRequest {
    /// Resources to place.
    #[serde(default)]
    pub items: Vec<Item>,
    /// Resources already placed.
    #[serde(default)]
    pub existing: Vec<ExistingMember>,
    /// Affinity and anti-affinity rules.
    #[serde(default)]
    pub constraints: Vec<Constraint>,
    /// The zone catalogue.
    pub zones: Vec<ComputeZone>,
    /// Zones never to choose (e.g. those that failed in earlier attempts).
    #[serde(default)]
    pub excluded: BTreeSet<ZoneId>,
    /// The selection policy.
    #[serde(default)]
    pub selection: Selection,
    /// The seed of every random choice.
    #[serde(default)]
    pub seed: u64,
    /// Values one search may try before giving up ([`DEFAULT_STEP_LIMIT`]).
    #[serde(default = "default_step_limit")]
    pub step_limit: u64,
}

fn default_step_limit() -> u64 {
    DEFAULT_STEP_LIMIT
}

impl PlacementRequest {
    /// A request over the zone catalogue `zones`, with nothing to place yet, the random policy
    /// and seed 0.
    pub fn new(zones: Vec<ComputeZone>) -> Self {
        Self {
            items: Vec::new(),
            existing: Vec::new(),
            constraints: Vec::new(),
            zones,
            excluded: BTreeSet::new(),
            selection: Selection::Random,
            seed: 0,
            step_limit: DEFAULT_STEP_LIMIT,
        }
    }

    /// With these items to place.
    pub fn with_items(mut self, items: Vec<Item>) -> Self {
        self.items = items;
        self
    }

    /// With these existing members.
    pub fn with_existing(mut self, existing: Vec<ExistingMember>) -> Self {
        self.existing = existing;
        self
    }

    /// With these constraints.
    pub fn with_constraints(mut self, constraints: Vec<Constraint>) -> Self {
        self.constraints = constraints;
        self
    }

    /// With these zones excluded.
    pub fn with_excluded(mut self, excluded: impl IntoIterator<Item = ZoneId>) -> Self {
        self.excluded = excluded.into_iter().collect();
        self
    }

    /// With this selection policy.
    pub fn with_selection(mut self, selection: Selection) -> Self {
        self.selection = selection;
        self
    }

    /// With this seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// With this step limit.
    pub fn with_step_limit(mut self, step_limit: u64) -> Self {
        self.step_limit = step_limit;
        self
    }
}
