//! SOL003 "scale to level" (`ScaleVnfToLevelRequest`, v3.3.1 5.4.6): the target level of
//! every aspect, from an instantiation level of the flavour (`instantiationLevelId`) or given
//! per aspect (`scaleInfo`), and the scale steps that reach it. Pure.
//!
//! vnfm runs one aspect's scale per operation: a request that changes one aspect is run as a
//! scale of that aspect (its occurrence is a `SCALE_TO_LEVEL`); one that changes several is
//! refused (422, naming each change: send one request per aspect), as is one that changes
//! nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Location};
use crate::grant::KeyValuePairs;
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

/// The scale that takes `info` to the request's levels: one aspect's `ScaleVnfRequest`.
///
/// # Errors
/// As [`targets`]; also a request that changes no aspect, or more than one (named, with
/// their levels now and wanted).
pub fn scale_step(
    flavour: &Flavour,
    info: &InstantiatedVnfInfo,
    req: &ScaleVnfToLevelRequest,
) -> Result<ScaleVnfRequest, Error> {
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
        [(aspect, now, to)] => Ok(ScaleVnfRequest {
            type_: if to > now {
                ScaleType::ScaleOut
            } else {
                ScaleType::ScaleIn
            },
            aspect_id: aspect.clone(),
            number_of_steps: Some(now.abs_diff(*to)),
            additional_params: req.additional_params.clone(),
        }),
        many => Err(bad(
            field,
            format!(
                "the request changes {} aspects ({}); vnfm scales one aspect per operation: \
                 send one scale_to_level (scaleInfo) per aspect",
                many.len(),
                many.iter()
                    .map(|(a, now, to)| format!("{a}: {now} -> {to}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}
