//! Lifecycle operations (instantiate, scale, heal, terminate) carried out through the driver
//! traits: the IO side of the sans-IO decisions in [`crate::placement`] and
//! [`crate::reselect`].
//!
//! - [`grant`]: the SOL003 grant request of an operation, from the package and the instance.
//! - [`granter`]: the local granter (zones for the new VNFCs, by the placement solver).
//! - [`userdata`]: the Heat template and `nfv` parameter (Tacker's StandardUserData layout).
//! - [`engine`]: [`Lifecycle`], the loop that runs an operation end to end.
//! - [`modify`]: `MODIFY_INFO` (`PATCH /vnf_instances/{id}`), validated, merged and recorded.

pub mod engine;
pub mod grant;
pub mod granter;
pub mod modify;
pub mod userdata;

pub use engine::{
    Drivers, FailureKind, GrantOnly, LcmConfig, LcmError, Lifecycle, OperationOptions,
    OperationReport,
};
