//! SOL003 "change flavour" (`ChangeVnfFlavourRequest`, v3.3.1 5.4.7) of a package with
//! several deployment flavours: what is checked before anything starts, and which VNFCs the
//! new flavour keeps (pure). The operation itself is a placed plan of the operation machine
//! ([`super::Plan::ChangeFlavour`]).
//!
//! # What it does
//! The new flavour's instantiation level (`instantiationLevelId`, else its default level, else
//! each VDU's `min_number_of_instances`) gives the VNFCs wanted per VDU. Of the instance's
//! VNFCs, those of a VDU the new flavour has are kept, lowest index first, up to the wanted
//! count; the others (VDUs the new flavour does not have, or beyond the count) are removed.
//! The grant (`CHANGE_FLAVOUR`, through the local granter) adds the VNFCs still missing and
//! removes those that go. Then the instance's stack is updated with the new flavour's BaseHOT
//! (and its nested templates) and the `nfv` parameter instantiate would compute for it:
//! Heat keeps every resource whose name and properties do not change (a kept VNFC of a VDU
//! with the same definition in both flavours keeps its server), creates the new ones and
//! deletes those the new template does not have. "In place as far as Heat allows."
//!
//! A failed update ends `FAILED_TEMP` with Heat's reason; a retry updates again; a rollback
//! updates the stack back to the old flavour's template with the instance's VNFCs before the
//! operation (as a scale-out rollback does). On success `instantiatedVnfInfo` is the new
//! flavour's: `flavourId`, `scaleStatus` (its aspects at the level), `vnfcResourceInfo`.
//!
//! # Refused
//! - 409: an instance not instantiated, a package with one flavour, the flavour the instance
//!   has, another operation unfinished on the instance.
//! - 422: an unknown flavour (naming the package's), an unknown level, `extVirtualLinks`,
//!   `extManagedVirtualLinks`, `vimConnectionInfo`, `vnfConfigurableProperties` or
//!   `extensions` (vnfm keeps the instance's external connectivity and VIM), a CNF (its
//!   workloads are the cluster's; change flavour is for VNFs on a VIM).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::types::LcmError;
use super::userdata::VnfcSlot;
use crate::error::{Error, Location};
use crate::grant::KeyValuePairs;
use crate::id::ZoneId;
use crate::lcm::VnfInstance;
use crate::package::{Flavour, VnfPackage};

/// SOL003 `ChangeVnfFlavourRequest` (v3.3.1 5.5.2.7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangeVnfFlavourRequest {
    /// `newFlavourId` (1).
    pub new_flavour_id: String,
    /// `instantiationLevelId` (0..1): the level of the new flavour (default: its default
    /// level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instantiation_level_id: Option<String>,
    /// `extVirtualLinks` (0..N): not supported (422 when not empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ext_virtual_links: Option<Value>,
    /// `extManagedVirtualLinks` (0..N): not supported (422 when not empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ext_managed_virtual_links: Option<Value>,
    /// `vimConnectionInfo` (0..N): not supported (422 when not empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vim_connection_info: Option<Value>,
    /// `additionalParams` (0..1): recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_params: Option<KeyValuePairs>,
    /// `extensions` (0..1): not supported (422 when not empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Value>,
    /// `vnfConfigurableProperties` (0..1): not supported (422 when not empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnf_configurable_properties: Option<Value>,
}

impl ChangeVnfFlavourRequest {
    /// A request for `new_flavour_id` at its default level.
    pub fn new(new_flavour_id: impl Into<String>) -> Self {
        Self {
            new_flavour_id: new_flavour_id.into(),
            instantiation_level_id: None,
            ext_virtual_links: None,
            ext_managed_virtual_links: None,
            vim_connection_info: None,
            additional_params: None,
            extensions: None,
            vnf_configurable_properties: None,
        }
    }

    /// The same request at the instantiation level `level`.
    #[must_use]
    pub fn at_level(mut self, level: impl Into<String>) -> Self {
        self.instantiation_level_id = Some(level.into());
        self
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The checks of SOL003 before a change flavour starts (see the [module docs](self)).
///
/// # Errors
/// [`LcmError::Conflict`] for an instance not instantiated, a package with one flavour or the
/// flavour the instance has; [`LcmError::Invalid`] for an unknown flavour or level, a field
/// vnfm does not support, and a CNF.
pub fn check(
    pkg: &VnfPackage,
    inst: &VnfInstance,
    req: &ChangeVnfFlavourRequest,
) -> Result<(), LcmError> {
    let new_flavour = req.new_flavour_id.as_str();
    let info = super::plan::instantiated(inst, Some("changes flavour"))?;
    let flavours = || pkg.flavours.keys().cloned().collect::<Vec<_>>().join(", ");
    if pkg.flavours.len() <= 1 {
        return Err(LcmError::Conflict(format!(
            "package {} (vnfdId {}) has one deployment flavour ({}): there is no other flavour \
             to change VNF instance {} to",
            pkg.source,
            inst.vnfd_id,
            flavours(),
            inst.id
        )));
    }
    let Some(flavour) = pkg.flavours.get(new_flavour) else {
        return Err(LcmError::Invalid(Error::invalid(
            Location::default().with_field("newFlavourId"),
            format!(
                "package {} has no flavour {new_flavour:?}; it has {}",
                pkg.source,
                flavours()
            ),
        )));
    };
    if info.flavour_id == new_flavour {
        return Err(LcmError::Conflict(format!(
            "VNF instance {} has flavour {new_flavour} already",
            inst.id
        )));
    }
    let unsupported = [
        ("extVirtualLinks", &req.ext_virtual_links),
        ("extManagedVirtualLinks", &req.ext_managed_virtual_links),
        ("vimConnectionInfo", &req.vim_connection_info),
        ("extensions", &req.extensions),
        (
            "vnfConfigurableProperties",
            &req.vnf_configurable_properties,
        ),
    ];
    for (field, v) in unsupported {
        if v.as_ref().is_some_and(|v| !is_empty(v)) {
            return Err(LcmError::Invalid(Error::invalid(
                Location::default().with_field(field),
                format!(
                    "vnfm changes the flavour of VNF instance {} with its external connectivity, \
                     VIM and properties as they are: {field} is not supported in a change of \
                     flavour (omit it)",
                    inst.id
                ),
            )));
        }
    }
    if pkg.is_cnf(new_flavour)
        || pkg.is_cnf(&info.flavour_id)
        || super::cnf::CnfResources::of(inst).is_some()
    {
        return Err(LcmError::Invalid(Error::invalid(
            Location::default().with_field("newFlavourId"),
            format!(
                "VNF instance {} or flavour {new_flavour} is a CNF (its VDUs are Kubernetes \
                 workloads): vnfm changes the flavour of VNFs on a VIM (Heat) only",
                inst.id
            ),
        )));
    }
    super::grant::check_level(flavour, req.instantiation_level_id.as_deref())
        .map_err(LcmError::Invalid)?;
    Ok(())
}

/// The slots of `existing` (the instance's VNFCs with their zones) that the new flavour keeps.
pub(crate) fn kept(
    flavour: &Flavour,
    level: Option<&str>,
    existing: Vec<(VnfcSlot, ZoneId)>,
) -> Vec<(VnfcSlot, ZoneId)> {
    let keep = super::keep::keep_map(
        &|vdu| super::keep::wanted(flavour, vdu, level),
        existing.iter().map(|(s, _)| (s.vdu.clone(), s.index)),
    );
    existing
        .into_iter()
        .filter(|(s, _)| keep.get(&s.vdu).is_some_and(|k| k.contains(&s.index)))
        .collect()
}
