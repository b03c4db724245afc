//! The serde model of the ledger, named after OPNFV Promise's northbound model
//! (`ResourceReservation`, `ResourceAllocation`, `ResourcePool`, `capacity`, `start`, `end`,
//! `expiry`, `elements`), in camelCase JSON.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::id::ZoneId;

macro_rules! ledger_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// Wraps a string.
            pub fn new(s: impl Into<String>) -> Self {
                Self(s.into())
            }
            /// The identifier as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }
    };
}

ledger_id!(
    /// A reservation id (Promise `ResourceReservation.id`, SOL003 `GrantInfo.reservationId`).
    ReservationId
);
ledger_id!(
    /// An allocation id (Promise `ResourceAllocation.id`).
    AllocationId
);
ledger_id!(
    /// A capacity pool id (Promise `ResourcePool.id`).
    PoolId
);
ledger_id!(
    /// A subscription id.
    SubscriptionId
);

/// Number of resource lines.
pub const LINES: usize = 7;

/// A resource line of a zone (Promise `nfvi:resource-capacity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ResourceLine {
    /// Compute: virtual cores.
    Cores,
    /// Compute: memory (MiB).
    Ram,
    /// Compute: server instances.
    Instances,
    /// Network: addresses.
    Addresses,
    /// Storage: volumes.
    Volumes,
    /// Storage: total volume size (GiB).
    Size,
    /// Storage: snapshots.
    Snapshots,
}

impl ResourceLine {
    /// Every line, in order.
    pub const ALL: [ResourceLine; LINES] = [
        ResourceLine::Cores,
        ResourceLine::Ram,
        ResourceLine::Instances,
        ResourceLine::Addresses,
        ResourceLine::Volumes,
        ResourceLine::Size,
        ResourceLine::Snapshots,
    ];

    /// The line's position in [`ResourceLine::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The JSON name (`cores`, `ram`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ResourceLine::Cores => "cores",
            ResourceLine::Ram => "ram",
            ResourceLine::Instances => "instances",
            ResourceLine::Addresses => "addresses",
            ResourceLine::Volumes => "volumes",
            ResourceLine::Size => "size",
            ResourceLine::Snapshots => "snapshots",
        }
    }
}

impl fmt::Display for ResourceLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An amount on every resource line (Promise `capacity`). Missing members are zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Capacity {
    /// Virtual cores.
    pub cores: u64,
    /// Memory (MiB).
    pub ram: u64,
    /// Server instances.
    pub instances: u64,
    /// Network addresses.
    pub addresses: u64,
    /// Volumes.
    pub volumes: u64,
    /// Volume size (GiB).
    pub size: u64,
    /// Snapshots.
    pub snapshots: u64,
}

impl Capacity {
    /// A compute amount: `cores`, `ram` (MiB) and `instances`.
    pub const fn compute(cores: u64, ram: u64, instances: u64) -> Self {
        Capacity {
            cores,
            ram,
            instances,
            addresses: 0,
            volumes: 0,
            size: 0,
            snapshots: 0,
        }
    }

    /// The amount on `line`.
    pub fn get(&self, line: ResourceLine) -> u64 {
        match line {
            ResourceLine::Cores => self.cores,
            ResourceLine::Ram => self.ram,
            ResourceLine::Instances => self.instances,
            ResourceLine::Addresses => self.addresses,
            ResourceLine::Volumes => self.volumes,
            ResourceLine::Size => self.size,
            ResourceLine::Snapshots => self.snapshots,
        }
    }

    /// Sets the amount on `line`.
    pub fn set(&mut self, line: ResourceLine, amount: u64) {
        let slot = match line {
            ResourceLine::Cores => &mut self.cores,
            ResourceLine::Ram => &mut self.ram,
            ResourceLine::Instances => &mut self.instances,
            ResourceLine::Addresses => &mut self.addresses,
            ResourceLine::Volumes => &mut self.volumes,
            ResourceLine::Size => &mut self.size,
            ResourceLine::Snapshots => &mut self.snapshots,
        };
        *slot = amount;
    }

    /// The same capacity with `amount` on `line`.
    pub fn with(mut self, line: ResourceLine, amount: u64) -> Self {
        self.set(line, amount);
        self
    }

    /// True when every line is zero.
    pub fn is_zero(&self) -> bool {
        ResourceLine::ALL.iter().all(|l| self.get(*l) == 0)
    }

    /// The lines with a non-zero amount, with their amounts.
    pub fn lines(&self) -> impl Iterator<Item = (ResourceLine, u64)> + '_ {
        ResourceLine::ALL
            .into_iter()
            .map(|l| (l, self.get(l)))
            .filter(|(_, a)| *a != 0)
    }

    /// True when `self <= other` on every line.
    pub fn fits_within(&self, other: &Capacity) -> bool {
        ResourceLine::ALL
            .iter()
            .all(|l| self.get(*l) <= other.get(*l))
    }

    /// `self + other`, saturating, line by line.
    pub fn saturating_add(&self, other: &Capacity) -> Capacity {
        let mut c = *self;
        for l in ResourceLine::ALL {
            c.set(l, self.get(l).saturating_add(other.get(l)));
        }
        c
    }

    /// `self - other`, saturating at zero, line by line.
    pub fn saturating_sub(&self, other: &Capacity) -> Capacity {
        let mut c = *self;
        for l in ResourceLine::ALL {
            c.set(l, self.get(l).saturating_sub(other.get(l)));
        }
        c
    }
}

/// A signed amount on every resource line: capacity figures that a forced decrease can drive
/// below zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SignedCapacity {
    /// Virtual cores.
    pub cores: i64,
    /// Memory (MiB).
    pub ram: i64,
    /// Server instances.
    pub instances: i64,
    /// Network addresses.
    pub addresses: i64,
    /// Volumes.
    pub volumes: i64,
    /// Volume size (GiB).
    pub size: i64,
    /// Snapshots.
    pub snapshots: i64,
}

impl SignedCapacity {
    /// The amount on `line`.
    pub fn get(&self, line: ResourceLine) -> i64 {
        match line {
            ResourceLine::Cores => self.cores,
            ResourceLine::Ram => self.ram,
            ResourceLine::Instances => self.instances,
            ResourceLine::Addresses => self.addresses,
            ResourceLine::Volumes => self.volumes,
            ResourceLine::Size => self.size,
            ResourceLine::Snapshots => self.snapshots,
        }
    }

    /// Sets the amount on `line`.
    pub fn set(&mut self, line: ResourceLine, amount: i64) {
        let slot = match line {
            ResourceLine::Cores => &mut self.cores,
            ResourceLine::Ram => &mut self.ram,
            ResourceLine::Instances => &mut self.instances,
            ResourceLine::Addresses => &mut self.addresses,
            ResourceLine::Volumes => &mut self.volumes,
            ResourceLine::Size => &mut self.size,
            ResourceLine::Snapshots => &mut self.snapshots,
        };
        *slot = amount;
    }
}

/// Reservation priority (Promise `priority`): a higher one may preempt lower ones that have
/// not started, when the policy allows it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Preempted first.
    Low,
    /// The default.
    #[default]
    Normal,
    /// May preempt normal and low.
    High,
}

/// The state of a reservation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReservationStatus {
    /// Accepted, not started.
    #[default]
    Initialized,
    /// Between `start` and `end`: allocations may draw from it.
    Active,
    /// `end` passed.
    Expired,
    /// Cancelled by its owner, or preempted (then `preemptedBy` is set).
    Cancelled,
}

impl fmt::Display for ReservationStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReservationStatus::Initialized => "initialized",
            ReservationStatus::Active => "active",
            ReservationStatus::Expired => "expired",
            ReservationStatus::Cancelled => "cancelled",
        })
    }
}

/// Reservation policy (Promise `policy/reservation`). Every limit is enforced on create and
/// update.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Policy {
    /// `max-future-start-range` (days): `start` at most this far after `now`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_future_start_range: Option<u32>,
    /// `max-future-end-range` (days): `end` at most this far after `now`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_future_end_range: Option<u32>,
    /// `max-duration` (hours): `end - start` at most this long; also the duration of a
    /// reservation requested without `end` (and without `expiry`). Default 8760.
    pub max_duration: u32,
    /// `expiry` (minutes): unallocated capacity is released at most this long after `start`;
    /// the default `expiry` of a request that gives none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiry: Option<u32>,
    /// Whether a higher-priority request may preempt lower-priority reservations that have
    /// not started. Default true.
    pub preemption: bool,
    /// Lead time (minutes) of the `reservationExpiringSoon` event before `end`. Default 60.
    pub expiring_soon: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_future_start_range: None,
            max_future_end_range: None,
            max_duration: 8760,
            expiry: None,
            preemption: true,
            expiring_soon: 60,
        }
    }
}

/// A request to reserve capacity (Promise `create-reservation` input).
///
/// Without `start` the reservation is for immediate use: it starts at `now` and is valid
/// until `expiry` (or `end`). With `start` it is for future use over `[start, end)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationRequest {
    /// The id to use; one is generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<ReservationId>,
    /// The zone.
    pub zone: ZoneId,
    /// The amounts reserved.
    pub capacity: Capacity,
    /// When consumption may begin; `None`: now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<DateTime<Utc>>,
    /// When consumption must end; `None`: `expiry` for immediate use, else
    /// `start + max-duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// When unallocated capacity is released; `None`: `start + policy.expiry` when the policy
    /// sets one, else never before `end`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<DateTime<Utc>>,
    /// Pre-existing resource elements the reservation needs (opaque references).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elements: Vec<String>,
    /// Priority.
    #[serde(default)]
    pub priority: Priority,
}

impl ReservationRequest {
    /// An immediate-use request for `capacity` in `zone`.
    pub fn new(zone: impl Into<ZoneId>, capacity: Capacity) -> Self {
        ReservationRequest {
            zone: zone.into(),
            capacity,
            ..Default::default()
        }
    }

    /// The same request over the window `[start, end)`.
    pub fn with_window(mut self, start: DateTime<Utc>, end: DateTime<Utc>) -> Self {
        self.start = Some(start);
        self.end = Some(end);
        self
    }

    /// The same request with an `expiry`.
    pub fn with_expiry(mut self, expiry: DateTime<Utc>) -> Self {
        self.expiry = Some(expiry);
        self
    }

    /// The same request with a priority.
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The same request with a caller-given id.
    pub fn with_id(mut self, id: impl Into<ReservationId>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The same request with resource elements.
    pub fn with_elements(mut self, elements: Vec<String>) -> Self {
        self.elements = elements;
        self
    }
}

/// Changes to a reservation (Promise `update-reservation`): each present member replaces the
/// current value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationUpdate {
    /// New zone (only without allocations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<ZoneId>,
    /// New amounts (at least what is allocated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Capacity>,
    /// New start (only before the reservation started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<DateTime<Utc>>,
    /// New end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// New expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<DateTime<Utc>>,
    /// New elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements: Option<Vec<String>>,
}

/// A reservation (Promise `ResourceReservation`), as the ledger reports and persists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// Id.
    pub id: ReservationId,
    /// Zone.
    pub zone: ZoneId,
    /// Amounts reserved.
    pub capacity: Capacity,
    /// Start of the window.
    pub start: DateTime<Utc>,
    /// End of the window (exclusive).
    pub end: DateTime<Utc>,
    /// When unallocated capacity is (or was) released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<DateTime<Utc>>,
    /// Resource elements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elements: Vec<String>,
    /// Priority.
    #[serde(default)]
    pub priority: Priority,
    /// Status.
    pub status: ReservationStatus,
    /// Promise `active`: the status is `active`.
    #[serde(default)]
    pub active: bool,
    /// Amounts still available for allocations (zero once released or not active).
    #[serde(default)]
    pub remaining: Capacity,
    /// Amounts drawn by live allocations.
    #[serde(default)]
    pub allocated: Capacity,
    /// Allocations drawn from this reservation, live or not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<AllocationId>,
    /// Whether the unallocated capacity was released at `expiry`.
    #[serde(default)]
    pub released: bool,
    /// Whether the expiring-soon event was produced.
    #[serde(default)]
    pub warned: bool,
    /// When it was cancelled or preempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_on: Option<DateTime<Utc>>,
    /// The reservation that preempted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempted_by: Option<ReservationId>,
}

/// A request to allocate (Promise `create-instance`): against a reservation, or against
/// unreserved capacity of a zone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocationRequest {
    /// The id to use; one is generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<AllocationId>,
    /// Draw from this reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationId>,
    /// The zone, required without `reservation` (and checked against it with one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<ZoneId>,
    /// Amounts.
    pub capacity: Capacity,
    /// Reference to the instance (server id) this allocation stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_ref: Option<String>,
}

/// An allocation (Promise `ResourceAllocation`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Allocation {
    /// Id.
    pub id: AllocationId,
    /// Zone.
    pub zone: ZoneId,
    /// The reservation it draws from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationId>,
    /// Amounts.
    pub capacity: Capacity,
    /// When it was created.
    pub start: DateTime<Utc>,
    /// When it was destroyed (or its reservation ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// Instance reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_ref: Option<String>,
}

impl Allocation {
    /// True until destroyed.
    pub fn is_live(&self) -> bool {
        self.end.is_none()
    }
}

/// A request to add or remove capacity (Promise `increase-capacity` / `decrease-capacity`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRequest {
    /// The id to use; one is generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<PoolId>,
    /// Zone.
    pub zone: ZoneId,
    /// Amounts.
    pub capacity: Capacity,
    /// Start; `None`: now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<DateTime<Utc>>,
    /// End; `None`: forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// The provider (a VIM name, `declared`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Decrease even when reservations lose capacity (they are notified). Without it, a
    /// decrease that would leave a reservation unfulfilled is refused.
    #[serde(default)]
    pub force: bool,
}

impl PoolRequest {
    /// A request for `capacity` in `zone` from now on.
    pub fn new(zone: impl Into<ZoneId>, capacity: Capacity) -> Self {
        PoolRequest {
            zone: zone.into(),
            capacity,
            ..Default::default()
        }
    }

    /// The same request over `[start, end)` (`end` `None`: forever).
    pub fn with_window(mut self, start: DateTime<Utc>, end: Option<DateTime<Utc>>) -> Self {
        self.start = Some(start);
        self.end = end;
        self
    }

    /// The same request, forced.
    pub fn with_force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }
}

/// A capacity pool (Promise `ResourcePool`): an increase or a decrease of a zone's capacity
/// over a window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    /// Id.
    pub id: PoolId,
    /// Zone.
    pub zone: ZoneId,
    /// Amounts.
    pub capacity: Capacity,
    /// True for a decrease.
    #[serde(default)]
    pub decrease: bool,
    /// Start.
    pub start: DateTime<Utc>,
    /// End; `None`: forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// Provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A time window `[start, end)`; `end` `None` is forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Window {
    /// Start (inclusive).
    pub start: DateTime<Utc>,
    /// End (exclusive); `None`: forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
}

impl Window {
    /// `[start, end)`.
    pub fn new(start: DateTime<Utc>, end: DateTime<Utc>) -> Self {
        Window {
            start,
            end: Some(end),
        }
    }

    /// `[start, forever)`.
    pub fn from(start: DateTime<Utc>) -> Self {
        Window { start, end: None }
    }
}

/// How a window query matches (Promise `window/scope`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Entries that overlap the window (Promise: start *or* end within it; entries spanning
    /// the whole window match too, since they hold capacity in it).
    #[default]
    Inclusive,
    /// Entries that start *and* end within the window.
    Exclusive,
}

/// A window with its scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryWindow {
    /// Start.
    pub start: DateTime<Utc>,
    /// End; `None`: forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<DateTime<Utc>>,
    /// Scope.
    #[serde(default)]
    pub scope: Scope,
}

/// Element filters of a query.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementsFilter {
    /// Match reservations holding at least one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub some: Vec<String>,
    /// Match reservations holding all of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub every: Vec<String>,
}

/// A reservation query (Promise `query-reservation` input).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationQuery {
    /// Only this zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<ZoneId>,
    /// Only this window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<QueryWindow>,
    /// Exclude these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub without: Vec<ReservationId>,
    /// Element filters.
    #[serde(default)]
    pub elements: ElementsFilter,
    /// Include the utilization timeline of the matches.
    #[serde(default)]
    pub show_utilization: bool,
}

/// One point of a reservation utilization timeline (Promise `utilization`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationUtilization {
    /// From this instant until the next point.
    pub timestamp: DateTime<Utc>,
    /// Matching reservations holding capacity.
    pub count: u64,
    /// Capacity they hold.
    pub capacity: Capacity,
}

/// The answer to a [`ReservationQuery`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationQueryResult {
    /// Matches, ordered by start then id.
    pub reservations: Vec<Reservation>,
    /// Utilization of the matches, when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<Vec<ReservationUtilization>>,
}

/// Capacity figures of a zone over a window, each at its worst instant (Promise `capacity`):
/// the least `total`, the most `reserved`, the most `usage`, the least `available`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReport {
    /// Zone.
    pub zone: ZoneId,
    /// Window.
    pub window: Window,
    /// Least total capacity.
    pub total: SignedCapacity,
    /// Most reserved.
    pub reserved: SignedCapacity,
    /// Most used (allocations, inside and outside reservations).
    pub usage: SignedCapacity,
    /// Least available: `total - reserved - unreserved usage` (negative only after a forced
    /// decrease).
    pub available: SignedCapacity,
}

/// Capacity figures of a zone from one instant until the next point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UtilizationPoint {
    /// From this instant.
    pub timestamp: DateTime<Utc>,
    /// Total.
    pub total: SignedCapacity,
    /// Reserved.
    pub reserved: SignedCapacity,
    /// Used.
    pub usage: SignedCapacity,
    /// Available.
    pub available: SignedCapacity,
}

/// How many instances of a flavour fit in a zone over a window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneFit {
    /// Zone.
    pub zone: ZoneId,
    /// Instances that fit at every instant of the window.
    pub count: u64,
}

/// What the ledger can offer instead of a request that does not fit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CounterOffer {
    /// Per requested line, the largest amount reservable over the requested window.
    pub largest: Capacity,
    /// The earliest window of the requested length, starting no earlier than the requested
    /// start and within the policy's ranges, where the whole request fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earliest: Option<Window>,
}

/// Comparison of a capacity threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Comparison {
    /// Available below the value.
    Lt,
    /// Available above the value.
    Gt,
}

/// Kinds of reservation events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EventKind {
    /// [`Event::ReservationStarted`]
    Started,
    /// [`Event::ReservationExpiringSoon`]
    ExpiringSoon,
    /// [`Event::ReservationExpired`]
    Expired,
    /// [`Event::UnallocatedReleased`]
    Released,
    /// [`Event::ReservationCancelled`]
    Cancelled,
    /// [`Event::ReservationPreempted`]
    Preempted,
    /// [`Event::CapacityLost`]
    CapacityLost,
}

/// What a subscription watches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum SubscriptionFilter {
    /// The available amount of a line of a zone, now, crossing a threshold (notified once
    /// per crossing).
    #[serde(rename_all = "camelCase")]
    Capacity {
        /// Zone.
        zone: ZoneId,
        /// Line.
        line: ResourceLine,
        /// `lt` or `gt`.
        op: Comparison,
        /// Threshold.
        value: u64,
    },
    /// Reservation events.
    #[serde(rename_all = "camelCase")]
    Reservation {
        /// Only this zone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone: Option<ZoneId>,
        /// Only this reservation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reservation: Option<ReservationId>,
        /// Only these kinds (empty: all).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        events: Vec<EventKind>,
    },
}

/// A subscription.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    /// Id.
    pub id: SubscriptionId,
    /// Where the server delivers notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_uri: Option<String>,
    /// What it watches.
    pub filter: SubscriptionFilter,
    /// For capacity thresholds: whether the condition held at the last evaluation.
    #[serde(default)]
    pub triggered: bool,
}

/// Something that happened in the ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum Event {
    /// A reservation reached its start.
    #[serde(rename_all = "camelCase")]
    ReservationStarted {
        /// Reservation.
        reservation_id: ReservationId,
        /// Zone.
        zone: ZoneId,
        /// When.
        at: DateTime<Utc>,
    },
    /// A reservation ends within the policy's lead time.
    #[serde(rename_all = "camelCase")]
    ReservationExpiringSoon {
        /// Reservation.
        reservation_id: ReservationId,
        /// Zone.
        zone: ZoneId,
        /// Its end.
        end: DateTime<Utc>,
        /// When.
        at: DateTime<Utc>,
    },
    /// A reservation reached its end; its live allocations were closed with it.
    #[serde(rename_all = "camelCase")]
    ReservationExpired {
        /// Reservation.
        reservation_id: ReservationId,
        /// Zone.
        zone: ZoneId,
        /// Allocations that were still live.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        closed_allocations: Vec<AllocationId>,
        /// When.
        at: DateTime<Utc>,
    },
    /// A reservation reached its expiry: what was not allocated went back to the zone.
    #[serde(rename_all = "camelCase")]
    UnallocatedReleased {
        /// Reservation.
        reservation_id: ReservationId,
        /// Zone.
        zone: ZoneId,
        /// Released amounts.
        released: Capacity,
        /// When.
        at: DateTime<Utc>,
    },
    /// A reservation was cancelled by its owner.
    #[serde(rename_all = "camelCase")]
    ReservationCancelled {
        /// Reservation.
        reservation_id: ReservationId,
        /// Zone.
        zone: ZoneId,
        /// When.
        at: DateTime<Utc>,
    },
    /// A reservation was preempted by a higher-priority one.
    #[serde(rename_all = "camelCase")]
    ReservationPreempted {
        /// Reservation.
        reservation_id: ReservationId,
        /// Zone.
        zone: ZoneId,
        /// The reservation that took its capacity.
        by: ReservationId,
        /// When.
        at: DateTime<Utc>,
    },
    /// A forced capacity decrease left a reservation without (all of) its capacity.
    #[serde(rename_all = "camelCase")]
    CapacityLost {
        /// Reservation.
        reservation_id: ReservationId,
        /// Zone.
        zone: ZoneId,
        /// The line short.
        line: ResourceLine,
        /// The zone's shortfall on that line at its worst instant.
        shortfall: u64,
        /// When.
        at: DateTime<Utc>,
    },
    /// The available amount of a line crossed a subscription's threshold.
    #[serde(rename_all = "camelCase")]
    CapacityThreshold {
        /// Zone.
        zone: ZoneId,
        /// Line.
        line: ResourceLine,
        /// `lt` or `gt`.
        op: Comparison,
        /// Threshold.
        value: u64,
        /// Available now.
        available: i64,
        /// When.
        at: DateTime<Utc>,
    },
}

impl Event {
    /// The reservation concerned, if any.
    pub fn reservation_id(&self) -> Option<&ReservationId> {
        match self {
            Event::ReservationStarted { reservation_id, .. }
            | Event::ReservationExpiringSoon { reservation_id, .. }
            | Event::ReservationExpired { reservation_id, .. }
            | Event::UnallocatedReleased { reservation_id, .. }
            | Event::ReservationCancelled { reservation_id, .. }
            | Event::ReservationPreempted { reservation_id, .. }
            | Event::CapacityLost { reservation_id, .. } => Some(reservation_id),
            Event::CapacityThreshold { .. } => None,
        }
    }

    /// The zone concerned.
    pub fn zone(&self) -> &ZoneId {
        match self {
            Event::ReservationStarted { zone, .. }
            | Event::ReservationExpiringSoon { zone, .. }
            | Event::ReservationExpired { zone, .. }
            | Event::UnallocatedReleased { zone, .. }
            | Event::ReservationCancelled { zone, .. }
            | Event::ReservationPreempted { zone, .. }
            | Event::CapacityLost { zone, .. }
            | Event::CapacityThreshold { zone, .. } => zone,
        }
    }

    /// When it happened.
    pub fn at(&self) -> DateTime<Utc> {
        match self {
            Event::ReservationStarted { at, .. }
            | Event::ReservationExpiringSoon { at, .. }
            | Event::ReservationExpired { at, .. }
            | Event::UnallocatedReleased { at, .. }
            | Event::ReservationCancelled { at, .. }
            | Event::ReservationPreempted { at, .. }
            | Event::CapacityLost { at, .. }
            | Event::CapacityThreshold { at, .. } => *at,
        }
    }

    /// The kind of a reservation event (`None` for threshold crossings).
    pub fn kind(&self) -> Option<EventKind> {
        Some(match self {
            Event::ReservationStarted { .. } => EventKind::Started,
            Event::ReservationExpiringSoon { .. } => EventKind::ExpiringSoon,
            Event::ReservationExpired { .. } => EventKind::Expired,
            Event::UnallocatedReleased { .. } => EventKind::Released,
            Event::ReservationCancelled { .. } => EventKind::Cancelled,
            Event::ReservationPreempted { .. } => EventKind::Preempted,
            Event::CapacityLost { .. } => EventKind::CapacityLost,
            Event::CapacityThreshold { .. } => return None,
        })
    }
}

/// An event for one subscription: what the server delivers to its callback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// Subscription.
    pub subscription_id: SubscriptionId,
    /// Its callback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_uri: Option<String>,
    /// The event.
    pub event: Event,
}

/// The result of a ledger operation with everything it caused: every event (including the
/// status transitions due by `now`), and the notifications for the subscriptions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome<T> {
    /// The result.
    pub value: T,
    /// Every event, in time order.
    pub events: Vec<Event>,
    /// Events matched to subscriptions.
    pub notifications: Vec<Notification>,
}

/// Everything the ledger holds, to persist and restore it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerSnapshot {
    /// Policy.
    pub policy: Policy,
    /// The latest `now` seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<DateTime<Utc>>,
    /// Declared zones.
    pub zones: Vec<ZoneId>,
    /// Pools.
    pub pools: Vec<Pool>,
    /// Reservations (every status).
    pub reservations: Vec<Reservation>,
    /// Allocations (live or not).
    pub allocations: Vec<Allocation>,
    /// Subscriptions.
    pub subscriptions: Vec<Subscription>,
    /// Events of operations that failed after the ledger advanced to their `now`; they are
    /// delivered with the next successful operation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undelivered: Vec<Event>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_json_is_promise_shaped() {
        let c = Capacity::compute(2, 4096, 1).with(ResourceLine::Size, 10);
        let j = serde_json::to_value(c).unwrap();
        assert_eq!(j["cores"], 2);
        assert_eq!(j["ram"], 4096);
        assert_eq!(j["size"], 10);
        let back: Capacity = serde_json::from_str(r#"{"cores": 3}"#).unwrap();
        assert_eq!(back, Capacity::default().with(ResourceLine::Cores, 3));
        assert!(serde_json::from_str::<Capacity>(r#"{"cores": -1}"#).is_err());
    }

    #[test]
    fn names_match_promise() {
        assert_eq!(serde_json::to_value(Priority::High).unwrap(), "high");
        assert_eq!(
            serde_json::to_value(ReservationStatus::Initialized).unwrap(),
            "initialized"
        );
        assert_eq!(serde_json::to_value(Scope::Exclusive).unwrap(), "exclusive");
        let e = Event::ReservationCancelled {
            reservation_id: "r".into(),
            zone: "AZ-1".into(),
            at: DateTime::from_timestamp(0, 0).unwrap(),
        };
        let j = serde_json::to_value(&e).unwrap();
        assert_eq!(j["event"], "reservationCancelled");
        assert_eq!(j["reservationId"], "r");
        assert_eq!(serde_json::from_value::<Event>(j).unwrap(), e);
        let p: Policy = serde_json::from_str(r#"{"maxFutureStartRange": 30}"#).unwrap();
        assert_eq!(p.max_future_start_range, Some(30));
        assert_eq!(p.max_duration, 8760);
    }

    #[test]
    fn capacity_arithmetic() {
        let a = Capacity::compute(4, 100, 2);
        let b = Capacity::compute(1, 200, 0);
        assert!(!b.fits_within(&a));
        assert_eq!(a.saturating_sub(&b), Capacity::compute(3, 0, 2));
        assert_eq!(a.saturating_add(&b), Capacity::compute(5, 300, 2));
        assert_eq!(
            a.lines().collect::<Vec<_>>(),
            vec![
                (ResourceLine::Cores, 4),
                (ResourceLine::Ram, 100),
                (ResourceLine::Instances, 2)
            ]
        );
        assert!(Capacity::default().is_zero());
    }
}
