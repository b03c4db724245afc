//! # vnfm-k8s
//!
//! The k8s adapter of vnfm: it implements the driver traits of `vnfm-core` against the real
//! API and takes no decision of its own.
//!
//! Status: the crate is laid out; its implementation is tracked in the project's issues and is
//! not usable yet. Until then the `vnfm` CLI accepts only the simulated cloud.
