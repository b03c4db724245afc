//! One conformance suite for the [driver traits](crate::driver), written once against the
//! traits and run against every implementation: [`SimCloud`](crate::sim::SimCloud) always,
//! the OpenStack and Kubernetes adapters when a backend is configured.
//!
//! The suite is one `pub async fn` per behaviour, grouped by trait:
//!
//! | module | trait | behaviours |
//! |---|---|---|
//! | [`stack`] | [`StackDriver`] | create, parameters, PATCH update, nested listing, heal, scheduling failure, duplicate name, unknown stack, delete, invalid template |
//! | [`zone`] | [`ZoneCatalog`](crate::driver::ZoneCatalog) | compute zones, free capacity follows servers |
//! | [`compute`] | [`ComputeInventory`](crate::driver::ComputeInventory) | host and zone of a server, unknown server, fault of a server in ERROR |
//! | [`cluster`] | [`ClusterDriver`](crate::driver::ClusterDriver) | labels, unknown objects, required anti-affinity, scale, heal by pod deletion |
//! | [`store`] | [`Store`](crate::driver::Store) | the store suite of [`crate::store`], re-exported |
//!
//! Each function takes the backend as `&dyn Trait` and a [`Fixture`] that says what the
//! backend offers (zone names, a flavor that fits, one that fits nowhere, an image, and
//! [`Capabilities`] for the optional behaviour), and returns `Result<(), ConformanceError>`:
//! a backend that misbehaves or fails yields an error naming the behaviour and what differed
//! (a failing driver call is kept as the error's source), never a panic.
//!
//! The functions work against any correct backend, shared or not: they create what they need
//! under unique names that start with [`Fixture::name_prefix`], never assume exact ids, poll
//! asynchronous backends through [`Fixture::clock`] with a bounded number of polls
//! ([`Polling`]), and delete what they created, also when they fail. The templates boot servers
//! with `networks: [{allocate_network: none}]`, so a Nova without Neutron can run them.
//! ClusterDriver has no delete of workloads: the cluster functions scale their workloads to
//! zero and remove their labels when done.
//!
//! # Running the suite for an adapter
//!
//! An adapter's test calls every function (each is independent of the others); the simulator
//! always runs, a real backend only when configured (`VNFM_TEST_OPENSTACK`, `VNFM_TEST_K8S`;
//! otherwise the test prints "skipping" and returns). Against the simulator:
//!
//! ```
//! use vnfm_core::cloud::CloudFile;
//! use vnfm_core::conformance::{compute, stack, zone, Capabilities, Fixture};
//! use vnfm_core::sim::SimCloud;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let cloud = CloudFile::from_yaml(
//!     "<doc>",
//!     "zones:\n  AZ-1:\n    hosts:\n      c1: {vcpus: 4, memory_mb: 8192, disk_gb: 80}\n\
//!      flavors:\n  m1.small: {vcpus: 1, memory_mb: 1024, disk_gb: 10}\n\
//!      \x20 m1.huge: {vcpus: 64, memory_mb: 65536, disk_gb: 10}\n",
//! )?;
//! let sim = SimCloud::new(cloud, 7);
//! let fx = Fixture::new("AZ-1", "m1.small", "m1.huge", "cirros")
//!     .with_capabilities(Capabilities::simulator());
//!
//! stack::create_complete(&sim, &fx).await?;
//! stack::update_patch_merges_and_keeps_servers(&sim, &fx).await?;
//! stack::unschedulable_server_fails_with_capacity_reason(&sim, &fx).await?;
//! zone::compute_zones_listed(&sim, &fx).await?;
//! zone::free_capacity_follows_servers(&sim, &sim, &fx).await?;
//! compute::server_in_requested_zone(&sim, &sim, &sim, &fx).await?;
//! // ... and every other function; or all of one trait at once:
//! stack::run_all(&sim, &fx).await?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! Against a real cloud the fixture names what exists there, e.g.
//! `Fixture::new("nova", "m1.tiny", "vnfm.huge", "cirros-0.6.2")` with a `name_prefix` unique
//! to the run ([`Fixture::with_name_prefix`]), a real [`Clock`] ([`Fixture::with_clock`]) and
//! [`Capabilities::openstack_admin`].

pub mod cluster;
pub mod compute;
pub mod stack;
mod templates;
pub mod zone;

/// The conformance suite of [`Store`](crate::driver::Store) implementations (it lives with
/// the memory store; its functions panic on a mismatch, as a test does).
pub use crate::store::conformance as store;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::driver::{Clock, DriverError, Stack, StackDriver, VirtualClock};
use crate::id::{FlavorId, NodeName, StackId, ZoneId};

/// What a backend offers beyond the contract every backend honours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Hosts report their free capacity ([`ComputeHost::free`](crate::zone::ComputeHost)): the
    /// simulator does; OpenStack does when its credentials may read Placement (admin), not
    /// for a non-admin user.
    pub reports_free_capacity: bool,
    /// [`StackDriver::mark_unhealthy`] is supported; when false the suite checks that it fails
    /// with [`DriverError::NotImplemented`].
    pub mark_unhealthy: bool,
    /// `create_stack` and `update_stack` return with the stack already in a terminal state
    /// (the simulator); when false the suite polls [`StackDriver::show_stack`].
    pub synchronous_stacks: bool,
    /// [`ComputeInventory::server`](crate::driver::ComputeInventory::server) reports the host
    /// of a scheduled server (admin credentials).
    pub reports_hosts: bool,
}

impl Capabilities {
    /// Everything the simulator offers: all true.
    pub fn simulator() -> Self {
        Self {
            reports_free_capacity: true,
            mark_unhealthy: true,
            synchronous_stacks: true,
            reports_hosts: true,
        }
    }

    /// The same capabilities with `reports_free_capacity` set to `yes`.
    pub fn with_free_capacity(mut self, yes: bool) -> Self {
        self.reports_free_capacity = yes;
        self
    }

    /// The same capabilities with `mark_unhealthy` set to `yes`.
    pub fn with_mark_unhealthy(mut self, yes: bool) -> Self {
        self.mark_unhealthy = yes;
        self
    }

    /// The same capabilities with `synchronous_stacks` set to `yes`.
    pub fn with_synchronous_stacks(mut self, yes: bool) -> Self {
        self.synchronous_stacks = yes;
        self
    }

    /// The same capabilities with `reports_hosts` set to `yes`.
    pub fn with_hosts(mut self, yes: bool) -> Self {
        self.reports_hosts = yes;
        self
    }

    /// A real OpenStack with admin credentials: asynchronous stacks, hosts reported, free
    /// capacity in the zone listing (from Placement), `mark_unhealthy` supported.
    pub fn openstack_admin() -> Self {
        Self {
            reports_free_capacity: true,
            mark_unhealthy: true,
            synchronous_stacks: false,
            reports_hosts: true,
        }
    }
}

/// How long to wait for an asynchronous backend: at most `max_polls` reads, `interval` apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Polling {
    /// The most reads before giving up (at least one read is made).
    pub max_polls: u32,
    /// The pause between two reads.
    pub interval: Duration,
}

impl Polling {
    /// At most `max_polls` reads, `interval` apart.
    pub fn new(max_polls: u32, interval: Duration) -> Self {
        Self {
            max_polls,
            interval,
        }
    }
}

impl Default for Polling {
    /// 150 reads 2 s apart: five minutes, enough for Heat to boot a small server.
    fn default() -> Self {
        Self::new(150, Duration::from_secs(2))
    }
}

/// What the backend under test offers and how the suite may use it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Fixture {
    /// Start of every name the suite creates (stacks, workloads, label keys). It must be a
    /// valid Heat stack name and Kubernetes name: lowercase letters, digits and `-`, starting
    /// with a letter. Make it unique per run when the backend is shared or a run may crash.
    pub name_prefix: String,
    /// Compute zones that must be listed.
    pub zones: Vec<ZoneId>,
    /// The zone servers are booted in; `flavor` must fit on one of its hosts.
    pub zone: ZoneId,
    /// A flavor (by name) that fits in `zone`.
    pub flavor: FlavorId,
    /// A flavor that exists but that no host can hold (Nova: "No valid host was found").
    pub unschedulable_flavor: FlavorId,
    /// The image servers boot from.
    pub image: String,
    /// The namespace of the cluster functions.
    pub namespace: String,
    /// The cluster nodes pods can be scheduled on; empty means every listed node.
    pub cluster_nodes: Vec<NodeName>,
    /// Optional behaviour of the backend.
    pub capabilities: Capabilities,
    /// How long to wait for asynchronous backends.
    pub polling: Polling,
    /// The clock the suite sleeps on between polls (virtual by default).
    pub clock: Arc<dyn Clock>,
}

impl Fixture {
    /// A fixture booting `flavor` from `image` in `zone`, with `unschedulable_flavor` as the
    /// flavor no host can hold; `zones` is `[zone]`, the name prefix `vnfm-conformance`, the
    /// namespace `default`, no optional capability, default polling on a virtual clock.
    pub fn new(
        zone: impl Into<ZoneId>,
        flavor: impl Into<FlavorId>,
        unschedulable_flavor: impl Into<FlavorId>,
        image: impl Into<String>,
    ) -> Self {
        let zone = zone.into();
        let start = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
        Self {
            name_prefix: "vnfm-conformance".to_owned(),
            zones: vec![zone.clone()],
            zone,
            flavor: flavor.into(),
            unschedulable_flavor: unschedulable_flavor.into(),
            image: image.into(),
            namespace: "default".to_owned(),
            cluster_nodes: Vec::new(),
            capabilities: Capabilities::default(),
            polling: Polling::default(),
            clock: Arc::new(VirtualClock::new(start)),
        }
    }

    /// The same fixture with these capabilities.
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// The same fixture requiring these zones to be listed (the boot zone is added if absent).
    pub fn with_zones<I, Z>(mut self, zones: I) -> Self
    where
        I: IntoIterator<Item = Z>,
        Z: Into<ZoneId>,
    {
        self.zones = zones.into_iter().map(Into::into).collect();
        if !self.zones.contains(&self.zone) {
            self.zones.push(self.zone.clone());
        }
        self
    }

    /// The same fixture with another name prefix.
    pub fn with_name_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.name_prefix = prefix.into();
        self
    }

    /// The same fixture with another namespace for the cluster functions.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// The same fixture scheduling pods on these nodes only.
    pub fn with_cluster_nodes<I, N>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<NodeName>,
    {
        self.cluster_nodes = nodes.into_iter().map(Into::into).collect();
        self
    }

    /// The same fixture with another polling bound.
    pub fn with_polling(mut self, polling: Polling) -> Self {
        self.polling = polling;
        self
    }

    /// The same fixture sleeping on `clock` between polls.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// A fresh name `<prefix>-<what>-<n>`, unique within the process.
    pub(crate) fn unique(&self, what: &str) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        format!("{}-{what}-{n}", self.name_prefix)
    }

    /// Checks the fields every function relies on.
    pub(crate) fn check(&self, behaviour: &'static str) -> Result<(), ConformanceError> {
        let p = &self.name_prefix;
        let valid = p.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && p.len() <= 40;
        if !valid {
            return Err(ConformanceError::fixture(
                behaviour,
                format!(
                    "name_prefix {p:?} is not usable as a stack or Kubernetes name (expected \
                     at most 40 lowercase letters, digits or '-', starting with a letter)"
                ),
            ));
        }
        if self.polling.max_polls == 0 {
            return Err(ConformanceError::fixture(
                behaviour,
                "polling.max_polls is 0 (expected at least 1)",
            ));
        }
        Ok(())
    }
}

/// A backend that does not behave as the driver contract says, or that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConformanceError {
    /// A driver call failed where the behaviour expects success, or failed with another kind
    /// of error than the contract says.
    #[error("{behaviour}: {call} failed")]
    Driver {
        /// The behaviour (the function's name).
        behaviour: &'static str,
        /// The call and what was expected of it.
        call: String,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// The backend answered, but not as the contract says.
    #[error("{behaviour}: {message}")]
    Mismatch {
        /// The behaviour (the function's name).
        behaviour: &'static str,
        /// What was expected and what was seen.
        message: String,
    },
    /// The backend did not settle within [`Polling::max_polls`] reads.
    #[error("{behaviour}: {what} after {polls} polls")]
    Timeout {
        /// The behaviour (the function's name).
        behaviour: &'static str,
        /// What was awaited and the last state seen.
        what: String,
        /// How many reads were made.
        polls: u32,
    },
    /// The fixture does not fit the backend (e.g. a cluster without nodes).
    #[error("{behaviour}: fixture: {message}")]
    Fixture {
        /// The behaviour (the function's name).
        behaviour: &'static str,
        /// What is missing.
        message: String,
    },
}

impl ConformanceError {
    /// The behaviour that failed (the function's name).
    pub fn behaviour(&self) -> &'static str {
        match self {
            ConformanceError::Driver { behaviour, .. }
            | ConformanceError::Mismatch { behaviour, .. }
            | ConformanceError::Timeout { behaviour, .. }
            | ConformanceError::Fixture { behaviour, .. } => behaviour,
        }
    }

    /// The driver's error, when a driver call failed.
    pub fn driver_error(&self) -> Option<&DriverError> {
        match self {
            ConformanceError::Driver { source, .. } => Some(source),
            _ => None,
        }
    }

    pub(crate) fn driver(
        behaviour: &'static str,
        call: impl Into<String>,
        source: DriverError,
    ) -> Self {
        ConformanceError::Driver {
            behaviour,
            call: call.into(),
            source,
        }
    }

    pub(crate) fn mismatch(behaviour: &'static str, message: impl Into<String>) -> Self {
        ConformanceError::Mismatch {
            behaviour,
            message: message.into(),
        }
    }

    pub(crate) fn fixture(behaviour: &'static str, message: impl Into<String>) -> Self {
        ConformanceError::Fixture {
            behaviour,
            message: message.into(),
        }
    }
}

/// Names the behaviour in the errors of driver calls: `call(..).await.or_fail(b, "what")?`.
pub(crate) trait OrFail<T> {
    /// Maps a driver error to [`ConformanceError::Driver`].
    fn or_fail(self, behaviour: &'static str, call: &str) -> Result<T, ConformanceError>;
}

impl<T> OrFail<T> for Result<T, DriverError> {
    fn or_fail(self, behaviour: &'static str, call: &str) -> Result<T, ConformanceError> {
        self.map_err(|e| ConformanceError::driver(behaviour, call, e))
    }
}

/// `Ok` when `cond` holds, a [`ConformanceError::Mismatch`] with `message()` otherwise.
pub(crate) fn ensure(
    behaviour: &'static str,
    cond: bool,
    message: impl FnOnce() -> String,
) -> Result<(), ConformanceError> {
    if cond {
        Ok(())
    } else {
        Err(ConformanceError::mismatch(behaviour, message()))
    }
}

/// Checks that `result` is an error of the kind `expected` describes (`is` tells it).
pub(crate) fn expect_error<T: std::fmt::Debug>(
    behaviour: &'static str,
    call: &str,
    result: Result<T, DriverError>,
    expected: &str,
    is: impl FnOnce(&DriverError) -> bool,
) -> Result<(), ConformanceError> {
    match result {
        Err(e) if is(&e) => Ok(()),
        Err(e) => Err(ConformanceError::driver(
            behaviour,
            format!("{call} (expected {expected})"),
            e,
        )),
        Ok(v) => Err(ConformanceError::mismatch(
            behaviour,
            format!("{call} succeeded with {v:?}, expected {expected}"),
        )),
    }
}

/// Polls [`StackDriver::show_stack`] until the stack is not in progress, with
/// [`Polling::default`]; returns the stack as last shown.
///
/// The first read is immediate; later reads come [`Polling::interval`] apart, slept on `poll`.
///
/// # Errors
/// [`ConformanceError::Driver`] when `show_stack` fails, [`ConformanceError::Timeout`] when
/// the stack is still in progress after the last read.
pub async fn wait_for_stack(
    stacks: &dyn StackDriver,
    id: &StackId,
    poll: &dyn Clock,
) -> Result<Stack, ConformanceError> {
    wait_for_stack_with(stacks, id, poll, Polling::default()).await
}

/// [`wait_for_stack`] with an explicit polling bound.
///
/// # Errors
/// As [`wait_for_stack`].
pub async fn wait_for_stack_with(
    stacks: &dyn StackDriver,
    id: &StackId,
    poll: &dyn Clock,
    polling: Polling,
) -> Result<Stack, ConformanceError> {
    wait_stack(stacks, id, poll, polling, "wait_for_stack").await
}

pub(crate) async fn wait_stack(
    stacks: &dyn StackDriver,
    id: &StackId,
    clock: &dyn Clock,
    polling: Polling,
    behaviour: &'static str,
) -> Result<Stack, ConformanceError> {
    let polls = polling.max_polls.max(1);
    let mut last = None;
    for i in 0..polls {
        if i > 0 {
            clock.sleep(polling.interval).await;
        }
        let stack = stacks
            .show_stack(id)
            .await
            .or_fail(behaviour, &format!("show_stack {id}"))?;
        if !stack.stack_status.is_in_progress() {
            return Ok(stack);
        }
        last = Some(stack.stack_status);
    }
    Err(ConformanceError::Timeout {
        behaviour,
        what: format!(
            "stack {id} still {}",
            last.map_or_else(|| "unknown".to_owned(), |s| s.to_string())
        ),
        polls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_checks_the_prefix_and_polling() {
        let fx = Fixture::new("AZ-1", "m1.small", "m1.huge", "cirros");
        assert!(fx.check("b").is_ok());
        assert_eq!(fx.zones, vec![ZoneId::new("AZ-1")]);
        let bad = fx.clone().with_name_prefix("Bad_Prefix");
        let e = bad.check("b").unwrap_err();
        assert!(e.to_string().contains("\"Bad_Prefix\""), "{e}");
        assert_eq!(e.behaviour(), "b");
        let e = fx
            .clone()
            .with_polling(Polling::new(0, Duration::ZERO))
            .check("b")
            .unwrap_err();
        assert!(e.to_string().contains("max_polls"), "{e}");
        let fx = fx.with_zones(["AZ-2"]);
        assert_eq!(fx.zones, vec![ZoneId::new("AZ-2"), ZoneId::new("AZ-1")]);
    }

    #[test]
    fn unique_names_differ() {
        let fx = Fixture::new("AZ-1", "m1.small", "m1.huge", "cirros");
        let a = fx.unique("x");
        let b = fx.unique("x");
        assert_ne!(a, b);
        assert!(a.starts_with("vnfm-conformance-x-"), "{a}");
    }

    #[test]
    fn expect_error_tells_kinds_apart() {
        let nf = || DriverError::NotFound {
            driver: "t",
            what: "stack s".into(),
        };
        assert!(expect_error::<()>("b", "c", Err(nf()), "not found", |e| e.is_not_found()).is_ok());
        let e = expect_error::<()>(
            "b",
            "show_stack",
            Err(DriverError::Unavailable {
                driver: "t",
                message: "down".into(),
            }),
            "not found",
            |e| e.is_not_found(),
        )
        .unwrap_err();
        assert!(e.driver_error().is_some_and(DriverError::is_retryable));
        assert_eq!(e.to_string(), "b: show_stack (expected not found) failed");
        let e =
            expect_error("b", "show_stack", Ok(3), "not found", |e| e.is_not_found()).unwrap_err();
        assert!(matches!(e, ConformanceError::Mismatch { .. }));
        assert!(e.to_string().contains("succeeded with 3"), "{e}");
    }
}
