//! Which of an instance's VNFCs a change of size keeps, as pure functions over the flavour and
//! the VNFC slots: a change of flavour or a scale to level keeps, of each VDU, the lowest
//! indices up to the count wanted ([`wanted`], [`keep_map`]); a scale-in drops the newest
//! ([`scale_in_keep`]).
//!
//! A leaf of the lifecycle (of its files it names only [`super::userdata`]'s `VnfcSlot`):
//! the grant requests ([`super::grant`]), the checks of each request and the machine
//! ([`super::operation`]) all read it.

use std::collections::{BTreeMap, BTreeSet};

use super::userdata::VnfcSlot;
use crate::id::{VduId, ZoneId};
use crate::package::Flavour;

/// The VNFCs of a VDU at `level` of `flavour` (`None`: the default level), else its
/// `min_number_of_instances`; 0 for a VDU the flavour does not have.
pub(crate) fn wanted(flavour: &Flavour, vdu: &VduId, level: Option<&str>) -> u32 {
    let Some(v) = flavour.vdu(vdu) else {
        return 0;
    };
    flavour
        .instances_at_level(vdu, level)
        .unwrap_or(v.min_instances)
}

/// The VNFC indices per VDU kept of `slots` (the instance's VNFCs as VDU and index): of each
/// VDU, the lowest indices up to its count (`count`: for a change of flavour, [`wanted`]; for a scale to level, the VNFCs of the level).
pub(crate) fn keep_map(
    count: &dyn Fn(&VduId) -> u32,
    slots: impl IntoIterator<Item = (VduId, u32)>,
) -> BTreeMap<VduId, BTreeSet<u32>> {
    let mut by_vdu: BTreeMap<VduId, BTreeSet<u32>> = BTreeMap::new();
    for (vdu, index) in slots {
        by_vdu.entry(vdu).or_default().insert(index);
    }
    by_vdu
        .into_iter()
        .map(|(vdu, all)| {
            let n = count(&vdu) as usize;
            let kept = all.into_iter().take(n).collect();
            (vdu, kept)
        })
        .collect()
}

/// The VNFCs a scale-in of `steps` steps of `aspect` keeps: the newest (highest index) of
/// every VDU the aspect scales go.
pub(crate) fn scale_in_keep(
    flavour: &Flavour,
    aspect: &str,
    steps: u32,
    existing: Vec<(VnfcSlot, ZoneId)>,
) -> Vec<(VnfcSlot, ZoneId)> {
    let mut keep = existing;
    for vdu in flavour.vdus.keys() {
        let Some(delta) = flavour.aspect_delta(aspect, vdu) else {
            continue;
        };
        let remove = usize::try_from(delta.saturating_mul(steps)).unwrap_or(usize::MAX);
        let mut of_vdu: Vec<u32> = keep
            .iter()
            .filter(|(s, _)| &s.vdu == vdu)
            .map(|(s, _)| s.index)
            .collect();
        of_vdu.sort_unstable();
        let cut: BTreeSet<u32> = of_vdu.iter().rev().take(remove).copied().collect();
        keep.retain(|(s, _)| &s.vdu != vdu || !cut.contains(&s.index));
    }
    keep
}
