//! The reselection units of a placed plan (one per VNFC or AutoScalingGroup).

use std::collections::{BTreeMap, BTreeSet};

use crate::id::{VduId, ZoneId};
use crate::lifecycle::failure::{Failed, FailureKind};
use crate::lifecycle::grant::PlannedGrant;
use crate::lifecycle::granter;
use crate::lifecycle::userdata::VnfcSlot;
use crate::package::Flavour;
use crate::reselect::Unit;
use crate::zone::Resources;

/// What the reselection units are built from.
pub(super) struct UnitsInput<'a> {
    pub(super) flavour: &'a Flavour,
    pub(super) planned: &'a PlannedGrant,
    pub(super) groups: &'a BTreeMap<VduId, String>,
    pub(super) group_zone: BTreeMap<VduId, ZoneId>,
    pub(super) existing: &'a [(VnfcSlot, ZoneId)],
    pub(super) new_zones: &'a BTreeMap<String, ZoneId>,
    /// The unit zones of the last apply of a resumed operation.
    pub(super) resumed: &'a BTreeMap<String, ZoneId>,
}

impl UnitsInput<'_> {
    /// One unit per new VNFC (movable) and per VNFC that stays (fixed); the VNFCs of a VDU
    /// under an AutoScalingGroup are one unit named after the group, movable only when the
    /// VDU had no VNFC (see the module docs of [`crate::lifecycle::engine`]).
    pub(super) fn build(mut self) -> Result<Vec<Unit>, Failed> {
        let fixed_groups: BTreeSet<VduId> = self.group_zone.keys().cloned().collect();
        // Forced affinity: a group without VNFCs takes the zone of its first new VNFC.
        let mut new_sorted: Vec<&VnfcSlot> =
            self.planned.new_vnfcs.iter().map(|n| &n.slot).collect();
        new_sorted.sort();
        for slot in new_sorted {
            if self.groups.contains_key(&slot.vdu) && !self.group_zone.contains_key(&slot.vdu) {
                if let Some(z) = self.new_zones.get(&slot.name()) {
                    self.group_zone.insert(slot.vdu.clone(), z.clone());
                }
            }
        }
        let mut units: Vec<Unit> = Vec::new();
        let mut group_demand: BTreeMap<VduId, Resources> = BTreeMap::new();
        for n in &self.planned.new_vnfcs {
            let demand = granter::vdu_demand(self.flavour, &n.slot.vdu);
            if self.groups.contains_key(&n.slot.vdu) {
                let d = group_demand.entry(n.slot.vdu.clone()).or_default();
                *d = d.saturating_add(&demand);
                continue;
            }
            let zone = self.new_zones.get(&n.slot.name()).cloned().ok_or_else(|| {
                Failed::new(
                    FailureKind::Invalid,
                    "grant incomplete",
                    format!("no zone granted to VNFC {}", n.slot.name()),
                )
            })?;
            units.push(self.unit(n.slot.name(), &n.slot.vdu, zone, true, demand));
        }
        for (s, z) in self.existing {
            let demand = granter::vdu_demand(self.flavour, &s.vdu);
            if self.groups.contains_key(&s.vdu) {
                let d = group_demand.entry(s.vdu.clone()).or_default();
                *d = d.saturating_add(&demand);
                continue;
            }
            units.push(Unit::new(s.name(), s.vdu.clone(), z.clone(), false, demand));
        }
        for (vdu, demand) in group_demand {
            let Some(resource) = self.groups.get(&vdu) else {
                continue;
            };
            let zone = self.group_zone.get(&vdu).cloned().ok_or_else(|| {
                Failed::new(
                    FailureKind::Invalid,
                    "grant incomplete",
                    format!(
                        "no zone granted to the VNFCs of VDU {vdu} (AutoScalingGroup {resource})"
                    ),
                )
            })?;
            let movable = !fixed_groups.contains(&vdu);
            units.push(self.unit(resource.clone(), &vdu, zone, movable, demand));
        }
        Ok(units)
    }

    /// A unit; a movable one of a resumed operation starts in the zone of its last apply.
    pub(super) fn unit(
        &self,
        name: String,
        vdu: &VduId,
        zone: ZoneId,
        movable: bool,
        demand: Resources,
    ) -> Unit {
        let zone = if movable {
            self.resumed.get(&name).cloned().unwrap_or(zone)
        } else {
            zone
        };
        Unit::new(name, vdu.clone(), zone, movable, demand)
    }
}
