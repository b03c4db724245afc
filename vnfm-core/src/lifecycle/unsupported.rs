//! SOL003 operations vnfm answers without running them, and why (pure): change flavour
//! (v3.3.1 5.4.7) and change external connectivity (5.4.11).
//!
//! - **Change flavour**: a package with one deployment flavour has nothing to change to
//!   (409, naming it). With several, vnfm does not change an instance's flavour in place: its
//!   flavours are different Heat templates (BaseHOTs) and VDU sets, and the only way from
//!   one to the other that the engine has is to delete the stack and create another, i.e. a
//!   terminate and an instantiate that lose every VNFC; vnfm does not do that silently under
//!   the name of a flavour change (422, saying so and how to do it on purpose).
//! - **Change external connectivity**: the external virtual links of an instance are fixed
//!   at instantiation; neither VIM adapter (the simulator, OpenStack through Heat) offers a
//!   port re-plug that vnfm drives (422, saying so).
//!
//! Both first check what SOL003 checks first: the instance must be `INSTANTIATED` (409).

use crate::error::{Error, Location};
use crate::lcm::VnfInstance;
use crate::package::VnfPackage;

use super::engine::LcmError;

/// Why `POST /vnf_instances/{id}/change_flavour` to `new_flavour` is not run on `inst`:
/// [`LcmError::Conflict`] for an instance not instantiated, a package with one flavour, or
/// the flavour the instance has; [`LcmError::Invalid`] for an unknown flavour, and for a
/// change vnfm does not make in place.
pub fn change_flavour(pkg: &VnfPackage, inst: &VnfInstance, new_flavour: &str) -> LcmError {
    let Some(info) = inst
        .instantiated_vnf_info
        .as_ref()
        .filter(|_| inst.is_instantiated())
    else {
        return LcmError::Conflict(format!(
            "VNF instance {} is NOT_INSTANTIATED: only an instantiated instance changes flavour",
            inst.id
        ));
    };
    let field = Location::default().with_field("newFlavourId");
    if pkg.flavours.len() <= 1 {
        return LcmError::Conflict(format!(
            "package {} (vnfdId {}) has one deployment flavour ({}): there is no other flavour \
             to change VNF instance {} to",
            pkg.source,
            inst.vnfd_id,
            pkg.flavours.keys().cloned().collect::<Vec<_>>().join(", "),
            inst.id
        ));
    }
    if !pkg.flavours.contains_key(new_flavour) {
        return LcmError::Invalid(Error::invalid(
            field,
            format!(
                "package {} has no flavour {new_flavour:?}; it has {}",
                pkg.source,
                pkg.flavours.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    if info.flavour_id == new_flavour {
        return LcmError::Conflict(format!(
            "VNF instance {} has flavour {new_flavour} already",
            inst.id
        ));
    }
    LcmError::Invalid(Error::invalid(
        field,
        format!(
            "vnfm does not change the flavour of an instantiated VNF in place: flavour {} and \
             {new_flavour} are different Heat templates and VDUs, and the engine's only way \
             between them is to delete the stack and create another, which loses every VNFC; \
             vnfm does not do that under the name of a flavour change. To do it on purpose: \
             terminate VNF instance {} and instantiate it with flavourId {new_flavour}",
            info.flavour_id, inst.id
        ),
    ))
}

/// Why `POST /vnf_instances/{id}/change_ext_conn` is not run on `inst`:
/// [`LcmError::Conflict`] for an instance not instantiated, else [`LcmError::Invalid`]
/// saying that vnfm does not change external connectivity.
pub fn change_ext_conn(inst: &VnfInstance) -> LcmError {
    if !inst.is_instantiated() {
        return LcmError::Conflict(format!(
            "VNF instance {} is NOT_INSTANTIATED: only an instantiated instance changes its \
             external connectivity",
            inst.id
        ));
    }
    LcmError::Invalid(Error::invalid(
        Location::default().with_field("extVirtualLinks"),
        format!(
            "vnfm does not change the external connectivity of an instantiated VNF: the \
             external virtual links of VNF instance {} are fixed when it is instantiated, and \
             neither VIM adapter (the simulator; OpenStack through Heat) re-plugs the ports of \
             running VNFCs for vnfm; terminate and instantiate with the new extVirtualLinks",
            inst.id
        ),
    ))
}
