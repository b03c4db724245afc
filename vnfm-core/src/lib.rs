//! # vnfm-core
//!
//! The pure core of vnfm, an NFV placement and VNF lifecycle library. It decides *where* the
//! virtual resources of a network function go and drives the lifecycle that puts them there,
//! without doing any IO itself: the outside world is reached only through the small async
//! [`driver`] traits, and every decision is a function of its inputs (the replies of the
//! drivers, a seed, and `now`).
//!
//! ## Model
//! - [`grant`], [`lcm`], [`problem`]: ETSI NFV-SOL 003 v3.3.1 / SOL 013 data types with the
//!   standard's serde names (`GrantRequest`, `Grant`, `PlacementConstraint`, `VnfInstance`,
//!   `VnfLcmOpOcc`, `ProblemDetails`, ...).
//! - [`package`]: VNF packages in the layout of Tacker's v2 samples (SOL001 VNFD under
//!   `Definitions/`, Heat templates under `BaseHOT/<flavour>/`).
//! - [`zone`]: compute zones, hosts and resource amounts.
//! - [`driver`]: the traits adapters implement (`StackDriver`, `ZoneCatalog`,
//!   `ComputeInventory`, `ClusterDriver`, and `Store`, which lives in [`store`]) and the shared
//!   [`driver::DriverError`] (defined in [`error`] beside [`Error`]); both are re-exported
//!   from `driver`, so `error` depends on no other module of the crate.
//! - [`cloud`]: the cloud file (YAML) that describes a simulated cloud.
//! - [`sim`]: [`sim::SimCloud`], an in-memory cloud that implements every driver trait the way
//!   Nova and Heat behave, including their failure texts. It is the test double, the engine of
//!   the examples and the default backend of the `vnfm` CLI.
//! - [`store`]: the [`store::Store`] trait, its batches and versions, and an in-memory
//!   implementation (the CLI adds an SQLite one).
//! - [`alert`]: Prometheus Alertmanager webhooks turned into auto-heal / auto-scale
//!   decisions (validation chain, heal batching and de-duplication, scale cooldown).
//! - `strategy` (feature `proptest`): proptest strategies for zones, clouds, constraints,
//!   placement requests and VNF packages, to property-test placement policies.
//! - [`intent`]: intent-based cloud selection (ONAP OOF / Multi-Cloud, OSM PLA): filtering with
//!   reasons, exact choice, realisation in the template.
//! - [`reservation`]: the OPNFV Promise capacity ledger (pools, reservations, allocations,
//!   policy, priority, counter-offers, notifications) over time windows.
//! - [`input`]: how every input file is read (within a bound, a leading byte order mark
//!   skipped) and how its errors quote it (a bounded excerpt, the position once).
//!
//! ## Adapters
//! - `vnfm-openstack`: Keystone v3, Nova and Heat over HTTP.
//! - `vnfm-k8s`: Kubernetes.
//!
//! No module here opens a socket, reads a clock or a file, or starts a runtime, with one
//! exception kept apart: [`input`] reads files from disk, for `package::fs`,
//! `cloud::CloudFile::load` and the `load` functions of [`intent`].

pub mod alert;
pub mod cloud;
pub mod cluster;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod constraint;
pub mod driver;
pub mod error;
pub mod grant;
pub mod id;
pub mod input;
pub mod intent;
pub mod lcm;
pub mod lcm_notify;
pub mod lifecycle;
pub mod package;
pub mod placement;
pub mod problem;
pub mod query;
pub mod reselect;
pub mod reservation;
pub mod sim;
pub mod store;
#[cfg(feature = "proptest")]
pub mod strategy;
#[cfg(any(test, feature = "vectors"))]
pub mod vectors;
pub mod zone;

pub use error::{Error, Result};
