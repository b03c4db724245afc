//! SOL003 operations vnfm answers without running them, and why (pure): change external
//! connectivity (v3.3.1 5.4.11).
//!
//! - **Change external connectivity**: the external virtual links of an instance are fixed
//!   at instantiation; neither VIM adapter (the simulator, OpenStack through Heat) offers a
//!   port re-plug that vnfm drives (422, saying so).
//!
//! It first checks what SOL003 checks first: the instance must be `INSTANTIATED` (409).
//!
//! Change flavour (5.4.7) is run (see [`super::change_flavour`]); its refusals (409 for an
//! instance not instantiated, a package with one flavour or the same flavour, 422 for an
//! unknown flavour) are [`super::change_flavour::check`].

use crate::error::{Error, Location};
use crate::lcm::VnfInstance;

use super::engine::LcmError;

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
