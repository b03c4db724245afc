//! Lifecycle operations (instantiate, scale, heal, terminate) carried out through the driver
//! traits: the IO side of the sans-IO decisions in [`crate::placement`] and
//! [`crate::reselect`].

pub mod grant;
pub mod userdata;
