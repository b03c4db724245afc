//! # vnfm-core
//!
//! The pure core of vnfm, an NFV placement and VNF lifecycle library. It decides *where* the
//! virtual resources of a network function go and drives the lifecycle that puts them there,
//! without doing any IO itself: the outside world is reached only through the small async
//! [`driver`] traits, and every decision is a function of its inputs (the replies of the
//! drivers, a seed, and `now`).
//!
//! `docs/architecture.md` in the repository is the map of the workspace: the crates, these
//! modules by role, where each decision lives, and how an operation and an alert flow.
//!
//! ## Machines and the ledger (fed `now`, never reading a clock)
//! - [`lifecycle`]: LCM operations. [`lifecycle::Operation`] is one operation (instantiate,
//!   scale, heal, terminate, ...) as a sans-IO machine; [`lifecycle::Lifecycle`] validates a
//!   request, builds the machine and runs it through the drivers.
//! - [`reselect`]: [`reselect::Reselection`], availability-zone reselection after a stack
//!   failed for lack of capacity; it runs nested in an operation.
//! - [`alert`]: Prometheus Alertmanager webhooks turned into heals and scales
//!   ([`alert::AlertHandler`]: validation, heal windows and de-duplication, scale cooldown).
//! - [`reservation`]: the OPNFV Promise capacity ledger over time windows, and what an LCM
//!   operation draws from a reservation.
//!
//! ## Solvers
//! - [`placement`]: the constraint solver: a zone and a host for every new resource under
//!   affinity, anti-affinity and capacity, with best-effort relaxation.
//! - [`intent`]: intent-based cloud selection (ONAP OOF / Multi-Cloud, OSM PLA): filtering with
//!   reasons, exact choice, realisation in the template.
//! - [`cluster`]: hardware-aware pod affinity: node hosts, node labels, spread verification.
//!
//! ## Model
//! - [`grant`], [`lcm`], [`problem`]: ETSI NFV-SOL 003 v3.3.1 / SOL 013 data types with the
//!   standard's serde names (`GrantRequest`, `Grant`, `VnfInstance`, `VnfLcmOpOcc`,
//!   `ProblemDetails`, ...).
//! - [`lcm_notify`]: SOL003 lifecycle change subscriptions and notifications, and which state
//!   changes a commit notifies.
//! - [`query`]: SOL013 filters, attribute selectors and paging of list resources.
//! - [`package`]: VNF packages in the layout of Tacker's v2 samples (SOL001 VNFD, Heat
//!   templates, Kubernetes manifests).
//! - [`constraint`]: affinity and anti-affinity at zone or host scope.
//! - [`zone`]: compute zones, hosts and resource amounts.
//! - [`id`]: identifier newtypes and the seeded id generator.
//! - [`cloud`]: the cloud file (YAML) that describes a simulated cloud.
//! - [`input`]: how every input file is read (within a bound, a byte order mark skipped) and
//!   how its errors quote it.
//! - [`error`]: [`Error`] and [`driver::DriverError`]; it depends on no other module.
//!
//! ## Drivers and backends
//! - [`driver`]: the traits adapters implement (`StackDriver`, `ZoneCatalog`,
//!   `ComputeInventory`, `ClusterDriver`, `GrantDriver`, `Clock`, and `Store`).
//! - [`store`]: the [`store::Store`] trait and its contract (atomic batches, versions,
//!   preconditions), and an in-memory implementation (the CLI adds an SQLite one).
//! - [`sim`]: [`sim::SimCloud`], an in-memory cloud that implements the stack, zone, compute and
//!   cluster traits the way Heat, Nova and Kubernetes behave, including their failure texts:
//!   the test double, the engine of the examples and the default backend of the `vnfm` CLI.
//! - `conformance` (feature `conformance`): one test suite for every implementation of the
//!   driver traits.
//! - `strategy` (feature `proptest`): proptest strategies to property-test placement policies.
//! - `vectors` (feature `vectors`): the shared reference payloads of the tests, and how tests
//!   skip without them.
//!
//! ## Adapters
//! - `vnfm-openstack`: Keystone v3, Nova, Placement and Heat over HTTP.
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
