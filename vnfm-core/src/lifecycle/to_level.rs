//! SOL003 "scale to level" (`ScaleVnfToLevelRequest`, v3.3.1 5.4.6): the target level of
//! every aspect, from an instantiation level of the flavour (`instantiationLevelId`) or given
//! per aspect (`scaleInfo`), and the scale steps that reach it. Pure.
//!
//! A request that changes one aspect is run as a scale of that aspect (its occurrence is a
//! `SCALE_TO_LEVEL`). One that changes several (SOL003 5.4.6 allows it: an instantiation level
//! names the level of every aspect) is one operation of its own ([`super::Plan::ScaleToLevel`]):
//! the VNFC count of every VDU at the new levels ([`vdu_counts`]: its count now plus, for each
//! aspect, its delta times the steps of that aspect), one grant for what is added and what
//! goes (`SCALE_TO_LEVEL`), one stack update with the parameters of every aspect, the
//! `scaleStatus` of each aspect recorded; a rollback updates the stack back to the VNFCs
//! before it (every aspect at its level before). A request that changes nothing is refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::userdata::VnfcSlot;
use crate::error::{Error, Location};
use crate::grant::KeyValuePairs;
use crate::id::VduId;
use crate::lcm::{InstantiatedVnfInfo, ScaleInfo, ScaleType, ScaleVnfRequest};
use crate::package::Flavour;

/// SOL003 `ScaleVnfToLevelRequest`: exactly one of `instantiationLevelId` and `scaleInfo`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScaleVnfToLevelRequest {
    /// `instantiationLevelId` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instantiation_level_id: Option<String>,
    /// `scaleInfo` (0..N)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_info: Option<Vec<ScaleInfo>>,
    /// `additionalParams` (0..1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<KeyValuePairs>,
}

fn bad(field: &str, message: String) -> Error {
    Error::invalid(Location::default().with_field(field), message)
}

/// The target level of every aspect the request names, checked against the flavour.
///
/// # Errors
/// [`Error::Invalid`]: neither or both of `instantiationLevelId` and `scaleInfo`, an unknown
/// level or aspect, an aspect named twice, a level above the aspect's maximum.
pub fn targets(
    flavour: &Flavour,
    req: &ScaleVnfToLevelRequest,
) -> Result<BTreeMap<String, u32>, Error> {
    let wanted: BTreeMap<String, u32> = match (&req.instantiation_level_id, &req.scale_info) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(bad(
                "ScaleVnfToLevelRequest",
                "expected exactly one of instantiationLevelId and scaleInfo (SOL003 5.5.2.6)"
                    .into(),
            ))
        }
        (Some(level), None) => {
            let levels = flavour.instantiation_levels.as_ref();
            let at = levels.and_then(|l| l.levels.get(level)).ok_or_else(|| {
                bad(
                    "instantiationLevelId",
                    format!(
                        "unknown instantiation level {level:?} of flavour {}; it has {}",
                        flavour.id,
                        levels
                            .map(|l| l.levels.keys().cloned().collect::<Vec<_>>().join(", "))
                            .filter(|s| !s.is_empty())
                            .unwrap_or_else(|| "none".into())
                    ),
                )
            })?;
            // Aspects the level does not name are at 0 there.
            flavour
                .scaling_aspects
                .keys()
                .map(|a| (a.clone(), at.scale_info.get(a).copied().unwrap_or(0)))
                .collect()
        }
        (None, Some(infos)) => {
            if infos.is_empty() {
                return Err(bad("scaleInfo", "expected at least one ScaleInfo".into()));
            }
            let mut out = BTreeMap::new();
            for (i, s) in infos.iter().enumerate() {
                if out.insert(s.aspect_id.clone(), s.scale_level).is_some() {
                    return Err(bad(
                        &format!("scaleInfo[{i}].aspectId"),
                        format!("aspect {:?} is named twice", s.aspect_id),
                    ));
                }
            }
            out
        }
    };
    for (aspect, level) in &wanted {
        let spec = flavour.scaling_aspects.get(aspect).ok_or_else(|| {
            bad(
                "scaleInfo.aspectId",
                format!(
                    "unknown scaling aspect {aspect:?}; the flavour has {}",
                    flavour
                        .scaling_aspects
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
        if *level > spec.max_scale_level {
            return Err(bad(
                "scaleInfo.scaleLevel",
                format!(
                    "scale level {level} of aspect {aspect} is above its maximum {}",
                    spec.max_scale_level
                ),
            ));
        }
    }
    Ok(wanted)
}

/// How a scale to level runs ([`decide`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ToLevel {
    /// One aspect changes: the scale of that aspect.
    One(ScaleVnfRequest),
    /// Several aspects change: one operation to their levels (aspect -> level after; only
    /// the aspects that change).
    Many(BTreeMap<String, u32>),
}

/// What takes `info` to the request's levels: one aspect's `ScaleVnfRequest`, or the levels of
/// the several aspects that change.
///
/// # Errors
/// As [`targets`]; also a request that changes no aspect.
pub fn decide(
    flavour: &Flavour,
    info: &InstantiatedVnfInfo,
    req: &ScaleVnfToLevelRequest,
) -> Result<ToLevel, Error> {
    let wanted = targets(flavour, req)?;
    let changes: Vec<(String, u32, u32)> = wanted
        .into_iter()
        .map(|(a, to)| {
            let now = info.scale_level(&a).unwrap_or(0);
            (a, now, to)
        })
        .filter(|(_, now, to)| now != to)
        .collect();
    let field = if req.instantiation_level_id.is_some() {
        "instantiationLevelId"
    } else {
        "scaleInfo"
    };
    match changes.as_slice() {
        [] => Err(bad(
            field,
            "the instance is at that level already: no aspect changes".into(),
        )),
        [(aspect, now, to)] => Ok(ToLevel::One(ScaleVnfRequest {
            type_: if to > now {
                ScaleType::ScaleOut
            } else {
                ScaleType::ScaleIn
            },
            aspect_id: aspect.clone(),
            number_of_steps: Some(now.abs_diff(*to)),
            additional_params: req.additional_params.clone(),
        })),
        many => {
            let levels: BTreeMap<String, u32> =
                many.iter().map(|(a, _, to)| (a.clone(), *to)).collect();
            vdu_counts(flavour, info, &levels).map_err(|e| match e {
                Error::Invalid { message, .. } => bad(field, message),
                other => other,
            })?;
            Ok(ToLevel::Many(levels))
        }
    }
}

/// The VNFC count of every VDU of the flavour once the aspects of `levels` are at those
/// levels: its count now plus, for each aspect that scales it, the aspect's delta times the
/// steps from its level now (`info`'s `scaleStatus`) to the new one.
///
/// # Errors
/// [`Error::Invalid`] for a VDU that would have more than its `max_number_of_instances`, or
/// fewer than none.
pub fn vdu_counts(
    flavour: &Flavour,
    info: &InstantiatedVnfInfo,
    levels: &BTreeMap<String, u32>,
) -> Result<BTreeMap<VduId, u32>, Error> {
    let mut out = BTreeMap::new();
    for (id, vdu) in &flavour.vdus {
        let now = info
            .vnfc_resource_info
            .iter()
            .filter(|v| &v.vdu_id == id)
            .count() as i64;
        let mut count = now;
        let mut why = Vec::new();
        for (aspect, to) in levels {
            let Some(delta) = flavour.aspect_delta(aspect, id) else {
                continue;
            };
            let from = info.scale_level(aspect).unwrap_or(0);
            count += i64::from(delta) * (i64::from(*to) - i64::from(from));
            why.push(format!("{aspect}: {from} -> {to}"));
        }
        if count > i64::from(vdu.max_instances) || count < 0 {
            return Err(bad(
                "scaleInfo.scaleLevel",
                format!(
                    "the levels ({}) take VDU {id} from {now} to {count} instances; expected \
                     0..={} (its max_number_of_instances)",
                    why.join(", "),
                    vdu.max_instances
                ),
            ));
        }
        out.insert(id.clone(), u32::try_from(count).unwrap_or(0));
    }
    Ok(out)
}

/// The slots of `existing` that VDU counts `counts` keep: of each VDU, the lowest indices up to
/// its count (a scale-in removes the newest VNFCs, as [`ScaleVnfRequest`] does); a VDU not in
/// `counts` keeps none.
pub(crate) fn kept<Z>(
    counts: &BTreeMap<VduId, u32>,
    existing: Vec<(VnfcSlot, Z)>,
) -> Vec<(VnfcSlot, Z)> {
    let keep = super::keep::keep_map(
        &|vdu| counts.get(vdu).copied().unwrap_or(0),
        existing.iter().map(|(s, _)| (s.vdu.clone(), s.index)),
    );
    existing
        .into_iter()
        .filter(|(s, _)| keep.get(&s.vdu).is_some_and(|k| k.contains(&s.index)))
        .collect()
}
