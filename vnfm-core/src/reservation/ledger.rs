//! The [`Ledger`]: pools, reservations, allocations, policy, priority, counter-offers,
//! subscriptions, snapshots.

use std::collections::BTreeMap;
use std::mem::size_of;

use chrono::{DateTime, Utc};

use super::model::*;
use super::timeline::{column, Kind, Timeline, Values};
use crate::error::{Error, Location};
use crate::id::{IdGen, ZoneId};
use crate::zone::ComputeZone;

/// The largest amount on one line of one request (2^40): large enough for any zone (a pebibyte
/// of RAM in MiB), small enough that the sums of a timeline cannot overflow.
pub const MAX_AMOUNT: u64 = 1 << 40;

/// The provider name (the pools' `source`) of the capacity taken from a VIM's zone catalogue
/// ([`Ledger::add_catalogue`]; `reservation::lcm::CATALOGUE_PROVIDER`).
pub const CATALOGUE_PROVIDER: &str = "zone catalogue";

const FOREVER: i64 = i64::MAX;
const MS_PER_MINUTE: i64 = 60_000;
const MS_PER_HOUR: i64 = 3_600_000;
const MS_PER_DAY: i64 = 86_400_000;
/// Width of an event-queue bucket.
const BUCKET_MS: i64 = MS_PER_HOUR;

const NAMED: u8 = 1;
const RELEASED: u8 = 2;
const WARNED: u8 = 4;
const BIG: u8 = 8;

/// Why an allocation (or a draw) was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// No such reservation.
    #[error("reservation {0} does not exist")]
    UnknownReservation(ReservationId),
    /// The reservation is not active.
    #[error("reservation {id} is {status}, expected active")]
    NotActive {
        /// Reservation.
        id: ReservationId,
        /// Its status.
        status: ReservationStatus,
    },
    /// The reservation's unallocated capacity was released at its expiry.
    #[error("reservation {id} released its unallocated capacity at its expiry {expiry}")]
    Released {
        /// Reservation.
        id: ReservationId,
        /// Its expiry.
        expiry: DateTime<Utc>,
    },
    /// The reservation is in another zone.
    #[error("reservation {id} is in zone {reserved}, not in zone {requested}")]
    WrongZone {
        /// Reservation.
        id: ReservationId,
        /// Its zone.
        reserved: ZoneId,
        /// The zone asked for.
        requested: ZoneId,
    },
    /// Not enough left in the reservation.
    #[error("reservation {id} has {remaining} {line} remaining, {requested} requested")]
    InsufficientRemaining {
        /// Reservation.
        id: ReservationId,
        /// Line.
        line: ResourceLine,
        /// Asked.
        requested: u64,
        /// Left.
        remaining: u64,
    },
    /// Not enough unreserved capacity in the zone from now on.
    #[error("zone {zone} has {available} {line} unreserved from now on, {requested} requested")]
    InsufficientCapacity {
        /// Zone.
        zone: ZoneId,
        /// Line.
        line: ResourceLine,
        /// Asked.
        requested: u64,
        /// Available at the worst instant from now on.
        available: i64,
    },
}

/// Errors of the ledger.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// A bad input: what, where, and what was expected.
    #[error(transparent)]
    Invalid(#[from] Error),
    /// The request does not fit; the counter-offer says what would.
    #[error(
        "request does not fit in zone {zone} over [{start}, {end}): {requested} {line} \
         requested, {available} available at the worst instant"
    )]
    DoesNotFit {
        /// Zone.
        zone: ZoneId,
        /// Requested start.
        start: DateTime<Utc>,
        /// Requested end.
        end: DateTime<Utc>,
        /// The first line short.
        line: ResourceLine,
        /// Asked on that line.
        requested: u64,
        /// Available at the worst instant of the window on that line.
        available: i64,
        /// What would fit instead.
        offer: Box<CounterOffer>,
    },
    /// An allocation was rejected. The message includes the rejection's, so it is not also
    /// the error's source (a chain printer would say it twice).
    #[error("allocation rejected: {0}")]
    Rejected(Rejection),
    /// A capacity decrease would take capacity that reservations or allocations hold.
    #[error(
        "decreasing {line} in zone {zone} would leave it short by {shortfall}; \
         set force to accept the loss"
    )]
    CapacityInUse {
        /// Zone.
        zone: ZoneId,
        /// Line.
        line: ResourceLine,
        /// The shortfall at the worst instant.
        shortfall: u64,
    },
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> LedgerError {
    LedgerError::Invalid(Error::invalid(
        Location::default().with_field(field),
        message,
    ))
}

fn corrupt(what: &str) -> LedgerError {
    invalid("ledger", format!("internal inconsistency: {what}"))
}

fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

fn dt(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

fn opt_dt(ms: i64) -> Option<DateTime<Utc>> {
    (ms != FOREVER).then(|| dt(ms))
}

fn clamp_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

fn to_u64(v: i128) -> u64 {
    u64::try_from(v.max(0)).unwrap_or(u64::MAX)
}

fn amount_i64(a: u64) -> i64 {
    i64::try_from(a.min(MAX_AMOUNT)).unwrap_or(0)
}

fn bucket(t: i64) -> i64 {
    t.div_euclid(BUCKET_MS)
}

fn parse_uuid(s: &str) -> Option<[u64; 2]> {
    let b = s.as_bytes();
    if b.len() != 36 {
        return None;
    }
    let mut v: u128 = 0;
    for (i, c) in b.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if *c != b'-' {
                return None;
            }
            continue;
        }
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        v = (v << 4) | u128::from(d);
    }
    Some([(v >> 64) as u64, v as u64])
}

fn format_uuid(k: [u64; 2]) -> String {
    let h = format!("{:016x}{:016x}", k[0], k[1]);
    let p = |a: usize, b: usize| h.get(a..b).unwrap_or("");
    format!(
        "{}-{}-{}-{}-{}",
        p(0, 8),
        p(8, 12),
        p(12, 16),
        p(16, 20),
        p(20, 32)
    )
}

/// Extra state of a reservation, allocated only when it has elements, allocations, very
/// large amounts or was cancelled.
#[derive(Clone, Debug, Default)]
struct Extra {
    big: Option<Capacity>,
    elements: Vec<String>,
    allocations: Vec<u32>,
    allocated: Capacity,
    cancelled_on: Option<i64>,
    preempted_by: Option<ReservationId>,
}

/// A reservation, compact (88 bytes).
#[derive(Clone, Debug)]
struct Slot {
    key: [u64; 2],
    start: i64,
    end: i64,
    expiry: i64,
    amounts: [u32; LINES],
    zone: u32,
    extra: Option<Box<Extra>>,
    status: ReservationStatus,
    priority: Priority,
    flags: u8,
}

impl Slot {
    fn amounts(&self) -> Capacity {
        if self.flags & BIG != 0 {
            if let Some(c) = self.extra.as_ref().and_then(|x| x.big) {
                return c;
            }
        }
        let mut c = Capacity::default();
        for (l, a) in ResourceLine::ALL.iter().zip(self.amounts) {
            c.set(*l, u64::from(a));
        }
        c
    }

    fn set_amounts(&mut self, c: Capacity) {
        let mut small = [0u32; LINES];
        let mut big = false;
        for (l, slot) in ResourceLine::ALL.iter().zip(small.iter_mut()) {
            match u32::try_from(c.get(*l)) {
                Ok(v) => *slot = v,
                Err(_) => big = true,
            }
        }
        self.amounts = small;
        if big {
            self.flags |= BIG;
            self.extra_mut().big = Some(c);
        } else {
            self.flags &= !BIG;
            if let Some(x) = self.extra.as_mut() {
                x.big = None;
            }
        }
    }

    fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Box::default)
    }

    fn allocated(&self) -> Capacity {
        self.extra.as_ref().map(|x| x.allocated).unwrap_or_default()
    }

    fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// The end of its hold: `end`, or when it was cancelled.
    fn stop(&self) -> i64 {
        match self.extra.as_ref().and_then(|x| x.cancelled_on) {
            Some(c) => c.min(self.end),
            None => self.end,
        }
    }

    fn is_live(&self) -> bool {
        matches!(
            self.status,
            ReservationStatus::Initialized | ReservationStatus::Active
        )
    }
}

/// One piece of a timeline: `amounts` of `kind` over `[start, end)`.
#[derive(Clone, Copy, Debug)]
struct Piece {
    start: i64,
    end: i64,
    kind: Kind,
    amounts: Capacity,
}

#[derive(Clone, Debug)]
struct ZoneState {
    id: ZoneId,
    timeline: Timeline,
}

#[derive(Clone, Debug)]
struct AllocRec {
    alloc: Allocation,
    zone: u32,
    reservation: Option<u32>,
    start: i64,
    end: i64,
}

/// The terms a reservation asks for (a request, or a reservation with an update applied),
/// before they are checked against the policy.
#[derive(Clone, Copy, Debug)]
struct Terms<'a> {
    zone: &'a ZoneId,
    capacity: &'a Capacity,
    start: Option<DateTime<Utc>>,
    end: Option<DateTime<Utc>>,
    expiry: Option<DateTime<Utc>>,
}

impl<'a> Terms<'a> {
    /// The terms of a new reservation.
    fn of(req: &'a ReservationRequest) -> Self {
        Terms {
            zone: &req.zone,
            capacity: &req.capacity,
            start: req.start,
            end: req.end,
            expiry: req.expiry,
        }
    }
}

/// A request checked against the policy, in milliseconds.
#[derive(Clone, Copy, Debug)]
struct Checked {
    zone: u32,
    start: i64,
    end: i64,
    expiry: i64,
    amounts: Capacity,
}

/// What a transition does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transition {
    Start,
    Release,
    Warn,
    End,
}

/// Bytes held by a ledger, by part (heap and inline storage of its collections, counted by
/// capacity; `BTreeMap` nodes estimated from their layout at two-thirds fill).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Reservation records (and their extra state).
    pub reservations: usize,
    /// Id indexes.
    pub indexes: usize,
    /// The per-zone timelines.
    pub timelines: usize,
    /// The transition queue.
    pub events: usize,
    /// Everything else (pools, allocations, subscriptions).
    pub other: usize,
}

impl MemoryUsage {
    /// The sum.
    pub fn total(&self) -> usize {
        self.reservations + self.indexes + self.timelines + self.events + self.other
    }
}

fn btree_bytes<K, V>(len: usize) -> usize {
    // std's B-tree: 11 slots per node; at two-thirds fill ~7.3 entries per node, plus one
    // internal node (with 12 edges) per ~7 nodes.
    let node = 11 * (size_of::<K>() + size_of::<V>()) + 16;
    let nodes = len.div_ceil(7);
    nodes * node + nodes.div_ceil(7) * (node + 12 * 8)
}

/// The OPNFV Promise capacity ledger. See the [module documentation](super).
#[derive(Clone, Debug)]
pub struct Ledger {
    policy: Policy,
    clock: i64,
    zones: Vec<ZoneState>,
    zone_index: BTreeMap<ZoneId, u32>,
    slots: Vec<Slot>,
    uuid_index: BTreeMap<[u64; 2], u32>,
    name_index: BTreeMap<String, u32>,
    names: Vec<String>,
    pools: Vec<Pool>,
    allocs: Vec<AllocRec>,
    alloc_index: BTreeMap<AllocationId, u32>,
    subscriptions: Vec<Subscription>,
    queue: BTreeMap<i64, Vec<u32>>,
    pending: Vec<Event>,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new(Policy::default())
    }
}

impl Ledger {
    /// An empty ledger with `policy`.
    pub fn new(policy: Policy) -> Self {
        Ledger {
            policy,
            clock: i64::MIN,
            zones: Vec::new(),
            zone_index: BTreeMap::new(),
            slots: Vec::new(),
            uuid_index: BTreeMap::new(),
            name_index: BTreeMap::new(),
            names: Vec::new(),
            pools: Vec::new(),
            allocs: Vec::new(),
            alloc_index: BTreeMap::new(),
            subscriptions: Vec::new(),
            queue: BTreeMap::new(),
            pending: Vec::new(),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Replaces the policy (it applies to later requests).
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    /// The latest `now` the ledger was given.
    pub fn now(&self) -> Option<DateTime<Utc>> {
        (self.clock != i64::MIN).then(|| dt(self.clock))
    }

    /// The declared zones.
    pub fn zones(&self) -> Vec<ZoneId> {
        self.zones.iter().map(|z| z.id.clone()).collect()
    }

    /// Declares a zone (with no capacity yet). Declaring it again does nothing.
    pub fn add_zone(&mut self, zone: impl Into<ZoneId>) {
        let zone = zone.into();
        if !self.zone_index.contains_key(&zone) {
            let i = self.zones.len() as u32;
            self.zone_index.insert(zone.clone(), i);
            self.zones.push(ZoneState {
                id: zone,
                timeline: Timeline::new(),
            });
        }
    }

    /// The number of reservations held (every status).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when no reservation was ever made.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The pools.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// The subscriptions.
    pub fn subscriptions(&self) -> &[Subscription] {
        &self.subscriptions
    }

    // ----- time -----------------------------------------------------------------------

    fn begin(&mut self, now: DateTime<Utc>) -> Result<i64, LedgerError> {
        let t = ms(now);
        if t < self.clock {
            return Err(invalid(
                "now",
                format!(
                    "now {now} is before the ledger's time {}; expected a non-decreasing now",
                    dt(self.clock)
                ),
            ));
        }
        self.clock = t;
        self.process_due(t)?;
        Ok(t)
    }

    /// Advances the ledger to `now`: reservations start, release their unallocated capacity
    /// at expiry, are warned of and reach their end, in time order; capacity thresholds are
    /// evaluated.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] when `now` is before the ledger's time.
    pub fn advance_to(&mut self, now: DateTime<Utc>) -> Result<Outcome<()>, LedgerError> {
        self.begin(now)?;
        Ok(self.finish(()))
    }

    fn next_transition(&self, idx: u32) -> Option<(i64, Transition)> {
        let s = self.slots.get(idx as usize)?;
        match s.status {
            ReservationStatus::Initialized => Some((s.start, Transition::Start)),
            ReservationStatus::Active => {
                let mut best = (s.end, Transition::End);
                let lead = i64::from(self.policy.expiring_soon) * MS_PER_MINUTE;
                if !s.is(WARNED) && lead > 0 {
                    let w = s.end.saturating_sub(lead).max(s.start);
                    if w < s.end && w <= best.0 {
                        best = (w, Transition::Warn);
                    }
                }
                if !s.is(RELEASED) && s.expiry < s.end && s.expiry <= best.0 {
                    best = (s.expiry, Transition::Release);
                }
                Some(best)
            }
            ReservationStatus::Expired | ReservationStatus::Cancelled => None,
        }
    }

    fn schedule(&mut self, idx: u32) {
        if let Some((t, _)) = self.next_transition(idx) {
            self.queue.entry(bucket(t)).or_default().push(idx);
        }
    }

    fn process_due(&mut self, now: i64) -> Result<(), LedgerError> {
        let buckets: Vec<i64> = self.queue.range(..=bucket(now)).map(|(b, _)| *b).collect();
        let mut due: Vec<(i64, u32)> = Vec::new();
        for b in buckets {
            let Some(list) = self.queue.remove(&b) else {
                continue;
            };
            let mut keep = Vec::new();
            for idx in list {
                match self.next_transition(idx) {
                    Some((t, _)) if bucket(t) == b => {
                        if t <= now {
                            due.push((t, idx));
                        } else {
                            keep.push(idx);
                        }
                    }
                    // Stale: the reservation changed and was scheduled elsewhere.
                    _ => {}
                }
            }
            if !keep.is_empty() {
                keep.sort_unstable();
                keep.dedup();
                self.queue.insert(b, keep);
            }
        }
        due.sort_unstable();
        due.dedup_by_key(|d| d.1);
        for (_, idx) in due {
            self.process_slot(idx, now)?;
        }
        Ok(())
    }

    fn process_slot(&mut self, idx: u32, now: i64) -> Result<(), LedgerError> {
        let mut changed = false;
        while let Some((t, what)) = self.next_transition(idx) {
            if t > now {
                break;
            }
            changed = true;
            let (rid, zone) = (self.id_of(idx), self.zone_of_slot(idx));
            match what {
                Transition::Start => {
                    self.slot_mut(idx)?.status = ReservationStatus::Active;
                    self.pending.push(Event::ReservationStarted {
                        reservation_id: rid,
                        zone,
                        at: dt(t),
                    });
                }
                Transition::Warn => {
                    let s = self.slot_mut(idx)?;
                    s.flags |= WARNED;
                    let end = dt(s.end);
                    self.pending.push(Event::ReservationExpiringSoon {
                        reservation_id: rid,
                        zone,
                        end,
                        at: dt(t),
                    });
                }
                Transition::Release => {
                    self.apply_slot(idx, -1)?;
                    let s = self.slot_mut(idx)?;
                    s.flags |= RELEASED;
                    let released = s.amounts().saturating_sub(&s.allocated());
                    self.apply_slot(idx, 1)?;
                    self.pending.push(Event::UnallocatedReleased {
                        reservation_id: rid,
                        zone,
                        released,
                        at: dt(t),
                    });
                }
                Transition::End => {
                    let end = self.slot(idx)?.end;
                    let live: Vec<u32> = self
                        .slot(idx)?
                        .extra
                        .as_ref()
                        .map(|x| x.allocations.clone())
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|a| {
                            self.allocs
                                .get(*a as usize)
                                .is_some_and(|a| a.end == FOREVER)
                        })
                        .collect();
                    // Closing them at `end` changes no timeline: a live allocation drawn
                    // from a reservation is already counted until the reservation's end.
                    let mut closed = Vec::new();
                    for a in live {
                        if let Some(rec) = self.allocs.get_mut(a as usize) {
                            rec.end = end;
                            rec.alloc.end = Some(dt(end));
                            closed.push(rec.alloc.id.clone());
                        }
                    }
                    let s = self.slot_mut(idx)?;
                    s.status = ReservationStatus::Expired;
                    if let Some(x) = s.extra.as_mut() {
                        x.allocated = Capacity::default();
                    }
                    self.pending.push(Event::ReservationExpired {
                        reservation_id: rid,
                        zone,
                        closed_allocations: closed,
                        at: dt(t),
                    });
                }
            }
        }
        if changed {
            self.schedule(idx);
        }
        Ok(())
    }

    fn finish<T>(&mut self, value: T) -> Outcome<T> {
        let mut events = std::mem::take(&mut self.pending);
        let mut notifications = Vec::new();
        if self.clock != i64::MIN {
            for sub in &mut self.subscriptions {
                let SubscriptionFilter::Capacity {
                    zone,
                    line,
                    op,
                    value,
                } = &sub.filter
                else {
                    continue;
                };
                let Some(z) = self
                    .zone_index
                    .get(zone)
                    .and_then(|i| self.zones.get(*i as usize))
                else {
                    continue;
                };
                let available = z.timeline.at(line.index(), self.clock).available;
                let holds = match op {
                    Comparison::Lt => available < i128::from(*value),
                    Comparison::Gt => available > i128::from(*value),
                };
                if holds && !sub.triggered {
                    let event = Event::CapacityThreshold {
                        zone: zone.clone(),
                        line: *line,
                        op: *op,
                        value: *value,
                        available: clamp_i64(available),
                        at: dt(self.clock),
                    };
                    notifications.push(Notification {
                        subscription_id: sub.id.clone(),
                        callback_uri: sub.callback_uri.clone(),
                        event: event.clone(),
                    });
                    events.push(event);
                }
                sub.triggered = holds;
            }
        }
        events.sort_by_key(Event::at);
        for e in &events {
            let Some(kind) = e.kind() else { continue };
            for sub in &self.subscriptions {
                let SubscriptionFilter::Reservation {
                    zone,
                    reservation,
                    events: kinds,
                } = &sub.filter
                else {
                    continue;
                };
                let ok = zone.as_ref().is_none_or(|z| z == e.zone())
                    && reservation
                        .as_ref()
                        .is_none_or(|r| Some(r) == e.reservation_id())
                    && (kinds.is_empty() || kinds.contains(&kind));
                if ok {
                    notifications.push(Notification {
                        subscription_id: sub.id.clone(),
                        callback_uri: sub.callback_uri.clone(),
                        event: e.clone(),
                    });
                }
            }
        }
        notifications.sort_by_key(|n| n.event.at());
        Outcome {
            value,
            events,
            notifications,
        }
    }

    // ----- slots and ids ----------------------------------------------------------------

    fn slot(&self, idx: u32) -> Result<&Slot, LedgerError> {
        self.slots
            .get(idx as usize)
            .ok_or_else(|| corrupt("reservation index"))
    }

    fn slot_mut(&mut self, idx: u32) -> Result<&mut Slot, LedgerError> {
        self.slots
            .get_mut(idx as usize)
            .ok_or_else(|| corrupt("reservation index"))
    }

    fn id_of(&self, idx: u32) -> ReservationId {
        let Some(s) = self.slots.get(idx as usize) else {
            return ReservationId::default();
        };
        if s.is(NAMED) {
            let name = usize::try_from(s.key[1])
                .ok()
                .and_then(|i| self.names.get(i))
                .cloned()
                .unwrap_or_default();
            ReservationId(name)
        } else {
            ReservationId(format_uuid(s.key))
        }
    }

    fn zone_of_slot(&self, idx: u32) -> ZoneId {
        self.slots
            .get(idx as usize)
            .and_then(|s| self.zones.get(s.zone as usize))
            .map(|z| z.id.clone())
            .unwrap_or_default()
    }

    fn find(&self, id: &ReservationId) -> Option<u32> {
        match parse_uuid(id.as_str()) {
            Some(k) => self.uuid_index.get(&k).copied(),
            None => self.name_index.get(id.as_str()).copied(),
        }
    }

    fn find_or_invalid(&self, id: &ReservationId) -> Result<u32, LedgerError> {
        self.find(id).ok_or_else(|| {
            invalid(
                "reservationId",
                format!("unknown reservation {id}; expected the id of an existing reservation"),
            )
        })
    }

    /// Stores `slot` under `id` and returns its index.
    fn insert_slot(&mut self, id: &ReservationId, mut slot: Slot) -> u32 {
        let idx = self.slots.len() as u32;
        match parse_uuid(id.as_str()) {
            Some(k) => {
                slot.key = k;
                self.uuid_index.insert(k, idx);
            }
            None => {
                slot.flags |= NAMED;
                slot.key = [0, self.names.len() as u64];
                self.names.push(id.0.clone());
                self.name_index.insert(id.0.clone(), idx);
            }
        }
        self.slots.push(slot);
        idx
    }

    fn zone_idx(&self, zone: &ZoneId, field: &str) -> Result<u32, LedgerError> {
        self.zone_index.get(zone).copied().ok_or_else(|| {
            let known: Vec<&str> = self
                .zone_index
                .keys()
                .take(10)
                .map(ZoneId::as_str)
                .collect();
            invalid(
                field,
                format!(
                    "unknown zone {zone}; expected a declared zone ({})",
                    if known.is_empty() {
                        "none declared yet".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            )
        })
    }

    fn timeline(&self, zone: u32) -> Result<&Timeline, LedgerError> {
        self.zones
            .get(zone as usize)
            .map(|z| &z.timeline)
            .ok_or_else(|| corrupt("zone index"))
    }

    // ----- contributions to the timelines ----------------------------------------------

    fn slot_pieces(&self, idx: u32) -> Vec<Piece> {
        let Some(s) = self.slots.get(idx as usize) else {
            return Vec::new();
        };
        let stop = s.stop();
        let amounts = s.amounts();
        if s.is(RELEASED) && s.expiry < stop {
            let mut out = vec![Piece {
                start: s.start,
                end: s.expiry,
                kind: Kind::Reserved,
                amounts,
            }];
            for a in s.extra.iter().flat_map(|x| x.allocations.iter()) {
                if let Some(rec) = self.allocs.get(*a as usize) {
                    if rec.start < s.expiry {
                        out.push(Piece {
                            start: s.expiry,
                            end: rec.end.min(stop),
                            kind: Kind::Reserved,
                            amounts: rec.alloc.capacity,
                        });
                    }
                }
            }
            out
        } else {
            vec![Piece {
                start: s.start,
                end: stop,
                kind: Kind::Reserved,
                amounts,
            }]
        }
    }

    fn alloc_piece(&self, a: u32) -> Option<(u32, Piece)> {
        let rec = self.allocs.get(a as usize)?;
        let piece = match rec.reservation {
            Some(r) => Piece {
                start: rec.start,
                end: rec.end.min(self.slots.get(r as usize)?.end),
                kind: Kind::ReservedUsed,
                amounts: rec.alloc.capacity,
            },
            None => Piece {
                start: rec.start,
                end: rec.end,
                kind: Kind::Unreserved,
                amounts: rec.alloc.capacity,
            },
        };
        Some((rec.zone, piece))
    }

    fn apply(&mut self, zone: u32, pieces: &[Piece], sign: i64) -> Result<(), LedgerError> {
        let tl = self
            .zones
            .get_mut(zone as usize)
            .map(|z| &mut z.timeline)
            .ok_or_else(|| corrupt("zone index"))?;
        for p in pieces {
            if p.start >= p.end {
                continue;
            }
            let up: Vec<(u8, i64)> = p
                .amounts
                .lines()
                .map(|(l, a)| (column(l.index(), p.kind), sign * amount_i64(a)))
                .collect();
            tl.add(p.start, &up).map_err(|_| {
                invalid(
                    "capacity",
                    "capacity arithmetic overflow in the zone's timeline",
                )
            })?;
            if p.end != FOREVER {
                let down: Vec<(u8, i64)> = up.iter().map(|(c, d)| (*c, -d)).collect();
                tl.add(p.end, &down).map_err(|_| {
                    invalid(
                        "capacity",
                        "capacity arithmetic overflow in the zone's timeline",
                    )
                })?;
            }
        }
        Ok(())
    }

    fn apply_slot(&mut self, idx: u32, sign: i64) -> Result<(), LedgerError> {
        let zone = self.slot(idx)?.zone;
        let pieces = self.slot_pieces(idx);
        self.apply(zone, &pieces, sign)
    }

    fn apply_alloc(&mut self, a: u32, sign: i64) -> Result<(), LedgerError> {
        if let Some((zone, piece)) = self.alloc_piece(a) {
            self.apply(zone, &[piece], sign)?;
        }
        Ok(())
    }

    fn pool_piece(p: &Pool) -> Piece {
        Piece {
            start: ms(p.start),
            end: p.end.map_or(FOREVER, ms),
            kind: Kind::Total,
            amounts: p.capacity,
        }
    }

    // ----- validation -------------------------------------------------------------------

    fn check_capacity(c: &Capacity, field: &str) -> Result<(), LedgerError> {
        if c.is_zero() {
            return Err(invalid(
                field,
                "every amount is zero; expected a positive amount on at least one of cores, \
                 ram, instances, addresses, volumes, size, snapshots",
            ));
        }
        for (l, a) in c.lines() {
            if a > MAX_AMOUNT {
                return Err(invalid(
                    format!("{field}.{l}"),
                    format!("amount {a} is too large; expected at most {MAX_AMOUNT}"),
                ));
            }
        }
        Ok(())
    }

    /// Checks a request's times, amounts and zone against the policy.
    fn check(
        &self,
        terms: Terms<'_>,
        now: i64,
        start_may_be_past: bool,
    ) -> Result<Checked, LedgerError> {
        let Terms {
            zone,
            capacity,
            start,
            end,
            expiry,
        } = terms;
        let zone = self.zone_idx(zone, "zone")?;
        Self::check_capacity(capacity, "capacity")?;
        let p = &self.policy;
        let s = start.map_or(now, ms);
        if !start_may_be_past && s < now {
            return Err(invalid(
                "start",
                format!(
                    "start {} is before now {}; expected a start at or after now (or no start \
                     for immediate use)",
                    dt(s),
                    dt(now)
                ),
            ));
        }
        let x = match (expiry, p.expiry) {
            (Some(x), _) => ms(x),
            (None, Some(m)) => s.saturating_add(i64::from(m) * MS_PER_MINUTE),
            (None, None) => FOREVER,
        };
        let max_dur = i64::from(p.max_duration) * MS_PER_HOUR;
        let e = match end {
            Some(e) => ms(e),
            None if start.is_none() && x != FOREVER => x,
            None => {
                let by_duration = s.saturating_add(max_dur);
                match p.max_future_end_range {
                    Some(d) => by_duration.min(now.saturating_add(i64::from(d) * MS_PER_DAY)),
                    None => by_duration,
                }
            }
        };
        if e <= s {
            return Err(invalid(
                "end",
                format!(
                    "end {} is not after start {}; expected end > start",
                    dt(e),
                    dt(s)
                ),
            ));
        }
        // The policy's default expiry never outlives the reservation.
        let x = if expiry.is_none() && x != FOREVER {
            x.min(e)
        } else {
            x
        };
        if e - s > max_dur {
            return Err(invalid(
                "end",
                format!(
                    "duration {:.1} h exceeds the policy's max-duration of {} h",
                    (e - s) as f64 / MS_PER_HOUR as f64,
                    p.max_duration
                ),
            ));
        }
        if let Some(d) = p.max_future_start_range {
            if s - now > i64::from(d) * MS_PER_DAY {
                return Err(invalid(
                    "start",
                    format!(
                        "start {} is {:.1} days after now; the policy's max-future-start-range \
                         is {d} days",
                        dt(s),
                        (s - now) as f64 / MS_PER_DAY as f64
                    ),
                ));
            }
        }
        if let Some(d) = p.max_future_end_range {
            if e - now > i64::from(d) * MS_PER_DAY {
                return Err(invalid(
                    "end",
                    format!(
                        "end {} is {:.1} days after now; the policy's max-future-end-range is \
                         {d} days",
                        dt(e),
                        (e - now) as f64 / MS_PER_DAY as f64
                    ),
                ));
            }
        }
        if x != FOREVER {
            if x <= s {
                return Err(invalid(
                    "expiry",
                    format!(
                        "expiry {} is not after start {}; expected start < expiry <= end",
                        dt(x),
                        dt(s)
                    ),
                ));
            }
            if x > e {
                return Err(invalid(
                    "expiry",
                    format!(
                        "expiry {} is after end {}; expected start < expiry <= end",
                        dt(x),
                        dt(e)
                    ),
                ));
            }
            if let Some(m) = p.expiry {
                if x - s > i64::from(m) * MS_PER_MINUTE {
                    return Err(invalid(
                        "expiry",
                        format!(
                            "expiry {} is {} minutes after start; the policy's expiry is {m} \
                             minutes",
                            dt(x),
                            (x - s) / MS_PER_MINUTE
                        ),
                    ));
                }
            }
        }
        Ok(Checked {
            zone,
            start: s,
            end: e,
            expiry: x,
            amounts: *capacity,
        })
    }

    /// `Ok` when `amounts` fit over `[s, e)` in `zone`, else the first short line.
    fn fits(
        &self,
        zone: u32,
        s: i64,
        e: i64,
        amounts: &Capacity,
    ) -> Result<Result<(), (ResourceLine, u64, i64)>, LedgerError> {
        let tl = self.timeline(zone)?;
        for (l, a) in amounts.lines() {
            let w = tl.worst(l.index(), s, e).available;
            if w < i128::from(a) {
                return Ok(Err((l, a, clamp_i64(w))));
            }
        }
        Ok(Ok(()))
    }

    fn does_not_fit(
        &self,
        c: &Checked,
        short: (ResourceLine, u64, i64),
        now: i64,
    ) -> Result<LedgerError, LedgerError> {
        let offer = self.counter_offer(c, now)?;
        Ok(LedgerError::DoesNotFit {
            zone: self
                .zones
                .get(c.zone as usize)
                .map(|z| z.id.clone())
                .unwrap_or_default(),
            start: dt(c.start),
            end: dt(c.end),
            line: short.0,
            requested: short.1,
            available: short.2,
            offer: Box::new(offer),
        })
    }

    /// The counter-offer for a request that does not fit: per line the largest amount over
    /// the window, and the earliest window of the same length (from the requested start,
    /// within the policy's ranges) where everything fits.
    ///
    /// Candidate starts are the requested start and the timeline's keys: if the window at
    /// `t` contains an instant `f` short of capacity, every start in `[t, f]` fails too, so
    /// the search jumps to the first key after the latest short instant found (one per
    /// line). Each step is
    /// O(lines * log n); steps are bounded by the keys in the searched range.
    fn counter_offer(&self, c: &Checked, now: i64) -> Result<CounterOffer, LedgerError> {
        let tl = self.timeline(c.zone)?;
        let mut largest = Capacity::default();
        for (l, _) in c.amounts.lines() {
            largest.set(l, to_u64(tl.worst(l.index(), c.start, c.end).available));
        }
        let len = c.end - c.start;
        let start_limit = self
            .policy
            .max_future_start_range
            .map_or(FOREVER, |d| now.saturating_add(i64::from(d) * MS_PER_DAY));
        let end_limit = self
            .policy
            .max_future_end_range
            .map_or(FOREVER, |d| now.saturating_add(i64::from(d) * MS_PER_DAY));
        let mut t = c.start;
        let earliest = loop {
            let Some(e) = t.checked_add(len) else {
                break None;
            };
            if t > start_limit || e > end_limit || e == FOREVER {
                break None;
            }
            let mut last_short: Option<i64> = None;
            for (l, a) in c.amounts.lines() {
                if let Some(f) = tl.first_below(l.index(), t, e, i128::from(a)) {
                    last_short = Some(last_short.map_or(f, |x| x.max(f)));
                }
            }
            match last_short {
                None => break Some(Window::new(dt(t), dt(e))),
                Some(f) => match tl.next_key_after(f) {
                    Some(k) => t = k,
                    None => break None,
                },
            }
        };
        Ok(CounterOffer { largest, earliest })
    }

    // ----- pools ------------------------------------------------------------------------

    fn check_pool(&self, req: &PoolRequest, now: i64) -> Result<(i64, i64), LedgerError> {
        if req.zone.as_str().trim().is_empty() {
            return Err(invalid(
                "zone",
                format!(
                    "zone {:?} is empty; expected a zone name",
                    req.zone.as_str()
                ),
            ));
        }
        if let Some(s) = req.source.as_deref().filter(|s| s.trim().is_empty()) {
            return Err(invalid(
                "source",
                format!("source (the provider's name) {s:?} is empty; expected a name"),
            ));
        }
        Self::check_capacity(&req.capacity, "capacity")?;
        let s = req.start.map_or(now, ms);
        let e = req.end.map_or(FOREVER, ms);
        if e <= s {
            return Err(invalid(
                "end",
                format!(
                    "end {} is not after start {}; expected end > start (or no end for \
                     forever)",
                    dt(e),
                    dt(s)
                ),
            ));
        }
        Ok((s, e))
    }

    fn new_pool(
        &self,
        req: &PoolRequest,
        s: i64,
        ids: &mut IdGen,
        decrease: bool,
    ) -> Result<Pool, LedgerError> {
        let id = req.id.clone().unwrap_or_else(|| PoolId(ids.next_uuid()));
        if self.pools.iter().any(|p| p.id == id) {
            return Err(invalid(
                "id",
                format!("pool {id} already exists; expected a new id"),
            ));
        }
        Ok(Pool {
            id,
            zone: req.zone.clone(),
            capacity: req.capacity,
            decrease,
            start: dt(s),
            end: req.end,
            source: req.source.clone(),
        })
    }

    /// Adds capacity to a zone over a window (Promise `increase-capacity`); declares the zone
    /// when new.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for zero or too large amounts, `end <= start`, a taken id or
    /// a `now` before the ledger's time.
    pub fn increase_capacity(
        &mut self,
        req: PoolRequest,
        ids: &mut IdGen,
        now: DateTime<Utc>,
    ) -> Result<Outcome<Pool>, LedgerError> {
        let now = self.begin(now)?;
        let (s, _) = self.check_pool(&req, now)?;
        let pool = self.new_pool(&req, s, ids, false)?;
        self.add_zone(req.zone.clone());
        let zone = self.zone_idx(&req.zone, "zone")?;
        self.apply(zone, &[Self::pool_piece(&pool)], 1)?;
        self.pools.push(pool.clone());
        Ok(self.finish(pool))
    }

    /// Removes capacity from a zone over a window (Promise `decrease-capacity`). Without
    /// `force`, a decrease that would leave the zone short of what reservations and
    /// allocations hold is refused; with it, the reservations that lose capacity (lowest
    /// priority and latest start first, until the shortfall is covered) get a
    /// [`Event::CapacityLost`].
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for bad input or an unknown zone;
    /// [`LedgerError::CapacityInUse`] when refused.
    pub fn decrease_capacity(
        &mut self,
        req: PoolRequest,
        ids: &mut IdGen,
        now: DateTime<Utc>,
    ) -> Result<Outcome<Pool>, LedgerError> {
        let now = self.begin(now)?;
        let (s, e) = self.check_pool(&req, now)?;
        let zone = self.zone_idx(&req.zone, "zone")?;
        let pool = self.new_pool(&req, s, ids, true)?;
        let piece = Self::pool_piece(&pool);
        self.apply(zone, &[piece], -1)?;
        let mut short = Vec::new();
        for (l, _) in req.capacity.lines() {
            let w = self.timeline(zone)?.worst(l.index(), s, e).available;
            if w < 0 {
                short.push((l, to_u64(-w)));
            }
        }
        if let Some(&(line, shortfall)) = short.first() {
            if !req.force {
                self.apply(zone, &[piece], 1)?;
                return Err(LedgerError::CapacityInUse {
                    zone: req.zone,
                    line,
                    shortfall,
                });
            }
            let mut cands: Vec<u32> = (0..self.slots.len() as u32)
                .filter(|i| {
                    self.slots
                        .get(*i as usize)
                        .is_some_and(|r| r.zone == zone && r.is_live() && r.start < e && s < r.end)
                })
                .collect();
            cands.sort_by_key(|i| {
                let r = self.slots.get(*i as usize);
                (
                    r.map(|r| r.priority),
                    std::cmp::Reverse(r.map(|r| r.start)),
                    std::cmp::Reverse(*i),
                )
            });
            for (line, shortfall) in short {
                let mut covered = 0u64;
                for i in &cands {
                    if covered >= shortfall {
                        break;
                    }
                    let a = self.slot(*i)?.amounts().get(line);
                    if a == 0 {
                        continue;
                    }
                    covered = covered.saturating_add(a);
                    self.pending.push(Event::CapacityLost {
                        reservation_id: self.id_of(*i),
                        zone: req.zone.clone(),
                        line,
                        shortfall,
                        at: dt(now),
                    });
                }
            }
        }
        self.pools.push(pool.clone());
        Ok(self.finish(pool))
    }

    /// Declares the capacity of a VIM's zones as pools from `now` on: `cores`, `ram` and
    /// `size` from the free vCPUs, memory and disk of each zone's available hosts (zones
    /// whose hosts do not all report it are skipped), the other lines from `quota`
    /// (per zone).
    ///
    /// # Errors
    /// As [`Ledger::increase_capacity`].
    pub fn add_catalogue(
        &mut self,
        zones: &[ComputeZone],
        quota: Capacity,
        ids: &mut IdGen,
        now: DateTime<Utc>,
    ) -> Result<Outcome<Vec<Pool>>, LedgerError> {
        let mut pools = Vec::new();
        let mut events = Vec::new();
        let mut notifications = Vec::new();
        for z in zones {
            let Some(free) = z.free() else { continue };
            let mut c = quota;
            c.cores = free.vcpus;
            c.ram = free.memory_mb;
            c.size = free.disk_gb;
            if c.is_zero() || !z.available {
                self.add_zone(z.name.clone());
                continue;
            }
            let mut req = PoolRequest::new(z.name.clone(), c);
            req.source = Some(CATALOGUE_PROVIDER.to_owned());
            let o = self.increase_capacity(req, ids, now)?;
            pools.push(o.value);
            events.extend(o.events);
            notifications.extend(o.notifications);
        }
        Ok(Outcome {
            value: pools,
            events,
            notifications,
        })
    }

    // ----- reservations -----------------------------------------------------------------

    /// Checks whether `req` would be admitted now, without preemption and without changing
    /// anything (transitions due by `now` and not yet processed are not taken into account,
    /// which only makes the answer more conservative).
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for bad input or a policy violation;
    /// [`LedgerError::DoesNotFit`] with a counter-offer.
    pub fn check_reservation(
        &self,
        req: &ReservationRequest,
        now: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        let now = ms(now);
        let c = self.check(Terms::of(req), now, false)?;
        match self.fits(c.zone, c.start, c.end, &c.amounts)? {
            Ok(()) => Ok(()),
            Err(short) => Err(self.does_not_fit(&c, short, now)?),
        }
    }

    /// Creates a reservation (Promise `create-reservation`). When it does not fit and the
    /// policy allows preemption, lower-priority reservations of the zone that have not
    /// started are preempted (lowest priority, then latest start first), as few as needed;
    /// each gets a [`Event::ReservationPreempted`].
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for bad input (unknown zone, zero or too large amounts, end
    /// not after start, start in the past, a taken id) or a policy violation
    /// (`max-future-start-range`, `max-future-end-range`, `max-duration`, `expiry`);
    /// [`LedgerError::DoesNotFit`] with a counter-offer.
    pub fn create_reservation(
        &mut self,
        req: ReservationRequest,
        ids: &mut IdGen,
        now: DateTime<Utc>,
    ) -> Result<Outcome<Reservation>, LedgerError> {
        let now = self.begin(now)?;
        let c = self.check(Terms::of(&req), now, false)?;
        let id = match &req.id {
            Some(id) => {
                if id.as_str().is_empty() {
                    return Err(invalid(
                        "id",
                        "empty reservation id; expected a non-empty id",
                    ));
                }
                id.clone()
            }
            None => ReservationId(ids.next_uuid()),
        };
        if self.find(&id).is_some() {
            return Err(invalid(
                "id",
                format!("reservation {id} already exists; expected a new id"),
            ));
        }
        let mut preempted = Vec::new();
        if let Err(short) = self.fits(c.zone, c.start, c.end, &c.amounts)? {
            let ok = if self.policy.preemption {
                self.try_preempt(&c, req.priority, now)?
            } else {
                None
            };
            match ok {
                Some(p) => preempted = p,
                None => return Err(self.does_not_fit(&c, short, now)?),
            }
        }
        let mut slot = Slot {
            key: [0, 0],
            start: c.start,
            end: c.end,
            expiry: c.expiry,
            amounts: [0; LINES],
            zone: c.zone,
            extra: None,
            status: ReservationStatus::Initialized,
            priority: req.priority,
            flags: 0,
        };
        slot.set_amounts(c.amounts);
        if !req.elements.is_empty() {
            slot.extra_mut().elements = req.elements.clone();
        }
        let idx = self.insert_slot(&id, slot);
        self.apply_slot(idx, 1)?;
        let zone = self.zone_of_slot(idx);
        for p in preempted {
            let s = self.slot_mut(p)?;
            s.status = ReservationStatus::Cancelled;
            let x = s.extra_mut();
            x.cancelled_on = Some(now);
            x.preempted_by = Some(id.clone());
            self.pending.push(Event::ReservationPreempted {
                reservation_id: self.id_of(p),
                zone: zone.clone(),
                by: id.clone(),
                at: dt(now),
            });
        }
        self.schedule(idx);
        self.process_slot(idx, now)?;
        let view = self.view(idx)?;
        Ok(self.finish(view))
    }

    /// Tries to make room for `c` by preempting lower-priority reservations that have not
    /// started. On success their holds are removed and their indexes returned (the caller
    /// marks them); on failure nothing changes.
    fn try_preempt(
        &mut self,
        c: &Checked,
        priority: Priority,
        now: i64,
    ) -> Result<Option<Vec<u32>>, LedgerError> {
        let mut cands: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|i| {
                self.slots.get(*i as usize).is_some_and(|r| {
                    r.zone == c.zone
                        && r.status == ReservationStatus::Initialized
                        && r.start > now
                        && r.priority < priority
                        && r.start < c.end
                        && c.start < r.end
                        && r.amounts().lines().any(|(l, _)| c.amounts.get(l) > 0)
                })
            })
            .collect();
        if cands.is_empty() {
            return Ok(None);
        }
        cands.sort_by_key(|i| {
            let r = self.slots.get(*i as usize);
            (
                r.map(|r| r.priority),
                std::cmp::Reverse(r.map(|r| r.start)),
                std::cmp::Reverse(*i),
            )
        });
        let mut removed = Vec::new();
        let mut fits = false;
        for i in cands {
            self.apply_slot(i, -1)?;
            removed.push(i);
            if self.fits(c.zone, c.start, c.end, &c.amounts)?.is_ok() {
                fits = true;
                break;
            }
        }
        if !fits {
            for i in removed {
                self.apply_slot(i, 1)?;
            }
            return Ok(None);
        }
        // Keep every removed reservation that still fits next to the new one.
        let new = Piece {
            start: c.start,
            end: c.end,
            kind: Kind::Reserved,
            amounts: c.amounts,
        };
        self.apply(c.zone, &[new], 1)?;
        let mut preempted = Vec::new();
        for i in removed.into_iter().rev() {
            let (s, e, a) = {
                let r = self.slot(i)?;
                (r.start, r.end, r.amounts())
            };
            if self.fits(c.zone, s, e, &a)?.is_ok() {
                self.apply_slot(i, 1)?;
            } else {
                preempted.push(i);
            }
        }
        self.apply(c.zone, &[new], -1)?;
        preempted.reverse();
        Ok(Some(preempted))
    }

    /// Updates a reservation (Promise `update-reservation`): times, amounts, zone, elements.
    /// An active reservation keeps its start; amounts stay at least what is allocated; the
    /// zone changes only without allocations. The new values must fit (the reservation's own
    /// hold does not count against it) and meet the policy; otherwise nothing changes.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for an unknown reservation, one that is not initialized or
    /// active (or already released its capacity), a forbidden change or a policy violation;
    /// [`LedgerError::DoesNotFit`] with a counter-offer.
    pub fn update_reservation(
        &mut self,
        id: &ReservationId,
        upd: ReservationUpdate,
        now: DateTime<Utc>,
    ) -> Result<Outcome<Reservation>, LedgerError> {
        let now = self.begin(now)?;
        let idx = self.find_or_invalid(id)?;
        let cur = self.slot(idx)?.clone();
        if !cur.is_live() || cur.is(RELEASED) {
            return Err(invalid(
                "reservationId",
                format!(
                    "reservation {id} is {}{}; expected an initialized or active reservation",
                    cur.status,
                    if cur.is(RELEASED) {
                        " and released its unallocated capacity"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let active = cur.status == ReservationStatus::Active;
        if active && upd.start.is_some_and(|s| ms(s) != cur.start) {
            return Err(invalid(
                "start",
                format!(
                    "reservation {id} is active; its start {} cannot change",
                    dt(cur.start)
                ),
            ));
        }
        let allocated = cur.allocated();
        let live_allocs = !allocated.is_zero();
        let zone = match &upd.zone {
            Some(z) => z.clone(),
            None => self.zone_of_slot(idx),
        };
        if live_allocs && self.zone_idx(&zone, "zone")? != cur.zone {
            return Err(invalid(
                "zone",
                format!("reservation {id} has live allocations; its zone cannot change"),
            ));
        }
        let capacity = upd.capacity.unwrap_or_else(|| cur.amounts());
        if !allocated.fits_within(&capacity) {
            return Err(invalid(
                "capacity",
                format!(
                    "reservation {id} has {allocated:?} allocated; expected a capacity at least \
                     that large"
                ),
            ));
        }
        let start = upd.start.unwrap_or(dt(cur.start));
        let end = upd.end.unwrap_or(dt(cur.end));
        let expiry = upd.expiry.or_else(|| opt_dt(cur.expiry));
        let terms = Terms {
            zone: &zone,
            capacity: &capacity,
            start: Some(start),
            end: Some(end),
            expiry,
        };
        let c = self.check(terms, now, upd.start.is_none())?;
        if c.end <= now {
            return Err(invalid(
                "end",
                format!(
                    "end {} is not after now {}; expected a future end",
                    end,
                    dt(now)
                ),
            ));
        }
        self.apply_slot(idx, -1)?;
        if let Err(short) = self.fits(c.zone, c.start, c.end, &c.amounts)? {
            self.apply_slot(idx, 1)?;
            return Err(self.does_not_fit(&c, short, now)?);
        }
        let end_changed = c.end != cur.end;
        let s = self.slot_mut(idx)?;
        s.zone = c.zone;
        s.start = c.start;
        s.end = c.end;
        s.expiry = c.expiry;
        s.set_amounts(c.amounts);
        if end_changed {
            s.flags &= !WARNED;
        }
        if let Some(el) = upd.elements {
            s.extra_mut().elements = el;
        }
        self.apply_slot(idx, 1)?;
        self.schedule(idx);
        self.process_slot(idx, now)?;
        let view = self.view(idx)?;
        Ok(self.finish(view))
    }

    /// Cancels a reservation (Promise `cancel-reservation`): its hold ends now.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for an unknown reservation, one already expired or cancelled,
    /// or one with live allocations (destroy them first).
    pub fn cancel_reservation(
        &mut self,
        id: &ReservationId,
        now: DateTime<Utc>,
    ) -> Result<Outcome<Reservation>, LedgerError> {
        let now = self.begin(now)?;
        let idx = self.find_or_invalid(id)?;
        let s = self.slot(idx)?;
        if !s.is_live() {
            return Err(invalid(
                "reservationId",
                format!(
                    "reservation {id} is {}; expected an initialized or active reservation",
                    s.status
                ),
            ));
        }
        let live: Vec<String> = s
            .extra
            .iter()
            .flat_map(|x| x.allocations.iter())
            .filter_map(|a| self.allocs.get(*a as usize))
            .filter(|a| a.end == FOREVER)
            .map(|a| a.alloc.id.0.clone())
            .collect();
        if !live.is_empty() {
            return Err(invalid(
                "reservationId",
                format!(
                    "reservation {id} has {} live allocation(s) ({}); destroy them first",
                    live.len(),
                    live.join(", ")
                ),
            ));
        }
        self.apply_slot(idx, -1)?;
        let s = self.slot_mut(idx)?;
        s.status = ReservationStatus::Cancelled;
        s.extra_mut().cancelled_on = Some(now);
        self.apply_slot(idx, 1)?;
        self.pending.push(Event::ReservationCancelled {
            reservation_id: id.clone(),
            zone: self.zone_of_slot(idx),
            at: dt(now),
        });
        let view = self.view(idx)?;
        Ok(self.finish(view))
    }

    fn view(&self, idx: u32) -> Result<Reservation, LedgerError> {
        let s = self.slot(idx)?;
        let amounts = s.amounts();
        let allocated = s.allocated();
        let remaining = if s.status == ReservationStatus::Active && !s.is(RELEASED) {
            amounts.saturating_sub(&allocated)
        } else {
            Capacity::default()
        };
        let x = s.extra.as_deref();
        Ok(Reservation {
            id: self.id_of(idx),
            zone: self.zone_of_slot(idx),
            capacity: amounts,
            start: dt(s.start),
            end: dt(s.end),
            expiry: opt_dt(s.expiry),
            elements: x.map(|x| x.elements.clone()).unwrap_or_default(),
            priority: s.priority,
            status: s.status,
            active: s.status == ReservationStatus::Active,
            remaining,
            allocated,
            allocations: x
                .map(|x| {
                    x.allocations
                        .iter()
                        .filter_map(|a| self.allocs.get(*a as usize))
                        .map(|a| a.alloc.id.clone())
                        .collect()
                })
                .unwrap_or_default(),
            released: s.is(RELEASED),
            warned: s.is(WARNED),
            cancelled_on: x.and_then(|x| x.cancelled_on).map(dt),
            preempted_by: x.and_then(|x| x.preempted_by.clone()),
        })
    }

    /// A reservation.
    pub fn reservation(&self, id: &ReservationId) -> Option<Reservation> {
        self.find(id).and_then(|i| self.view(i).ok())
    }

    /// Reservations matching a query (Promise `query-reservation`), ordered by start then
    /// id, with their utilization timeline when asked. Scans the reservations.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for an unknown zone or a window whose end is not after its
    /// start.
    pub fn query_reservations(
        &self,
        q: &ReservationQuery,
    ) -> Result<ReservationQueryResult, LedgerError> {
        let zone = match &q.zone {
            Some(z) => Some(self.zone_idx(z, "zone")?),
            None => None,
        };
        let window = match &q.window {
            Some(w) => {
                let (s, e) = (ms(w.start), w.end.map_or(FOREVER, ms));
                if e <= s {
                    return Err(invalid(
                        "window.end",
                        format!(
                            "end {} is not after start {}; expected end > start",
                            dt(e),
                            w.start
                        ),
                    ));
                }
                Some((s, e, w.scope))
            }
            None => None,
        };
        let without: Vec<u32> = q.without.iter().filter_map(|id| self.find(id)).collect();
        let mut hits: Vec<u32> = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            let i = i as u32;
            if zone.is_some_and(|z| z != s.zone) || without.contains(&i) {
                continue;
            }
            if let Some((ws, we, scope)) = window {
                let ok = match scope {
                    Scope::Inclusive => s.start < we && ws < s.end,
                    Scope::Exclusive => ws <= s.start && s.end <= we,
                };
                if !ok {
                    continue;
                }
            }
            if !q.elements.some.is_empty() || !q.elements.every.is_empty() {
                let el = s
                    .extra
                    .as_ref()
                    .map(|x| x.elements.as_slice())
                    .unwrap_or(&[]);
                if !q.elements.some.is_empty() && !q.elements.some.iter().any(|e| el.contains(e)) {
                    continue;
                }
                if !q.elements.every.iter().all(|e| el.contains(e)) {
                    continue;
                }
            }
            hits.push(i);
        }
        let mut reservations = hits
            .iter()
            .map(|i| self.view(*i))
            .collect::<Result<Vec<_>, _>>()?;
        reservations.sort_by(|a, b| a.start.cmp(&b.start).then_with(|| a.id.cmp(&b.id)));
        let utilization = q.show_utilization.then(|| {
            let (ws, we) = window.map_or((i64::MIN, FOREVER), |w| (w.0, w.1));
            let mut steps: BTreeMap<i64, (i64, [i128; LINES])> = BTreeMap::new();
            for i in &hits {
                for p in self.slot_pieces(*i) {
                    let (s, e) = (p.start.max(ws), p.end.min(we));
                    if s >= e {
                        continue;
                    }
                    let up = steps.entry(s).or_insert((0, [0; LINES]));
                    up.0 += 1;
                    for (l, a) in p.amounts.lines() {
                        if let Some(x) = up.1.get_mut(l.index()) {
                            *x += i128::from(a);
                        }
                    }
                    if e != FOREVER {
                        let down = steps.entry(e).or_insert((0, [0; LINES]));
                        down.0 -= 1;
                        for (l, a) in p.amounts.lines() {
                            if let Some(x) = down.1.get_mut(l.index()) {
                                *x -= i128::from(a);
                            }
                        }
                    }
                }
            }
            let mut count = 0i64;
            let mut cap = [0i128; LINES];
            let mut out = Vec::new();
            for (t, (dc, d)) in steps {
                count += dc;
                let mut c = Capacity::default();
                for (l, (x, dx)) in ResourceLine::ALL.iter().zip(cap.iter_mut().zip(d)) {
                    *x += dx;
                    c.set(*l, to_u64(*x));
                }
                out.push(ReservationUtilization {
                    timestamp: dt(t),
                    count: to_u64(i128::from(count)),
                    capacity: c,
                });
            }
            out
        });
        Ok(ReservationQueryResult {
            reservations,
            utilization,
        })
    }

    // ----- allocations ------------------------------------------------------------------

    /// Checks that `amounts` can be drawn from reservation `id` at `now` (the check the
    /// granter makes for `GrantInfo.reservationId`), without changing anything.
    ///
    /// # Errors
    /// [`LedgerError::Rejected`] saying why not; [`LedgerError::Invalid`] for zero amounts.
    pub fn check_draw(
        &self,
        id: &ReservationId,
        amounts: &Capacity,
        now: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        Self::check_capacity(amounts, "capacity")?;
        let now = ms(now);
        let idx = self
            .find(id)
            .ok_or_else(|| LedgerError::Rejected(Rejection::UnknownReservation(id.clone())))?;
        let s = self.slot(idx)?;
        // The status at `now`, even when the ledger was not advanced to it yet.
        let status = match s.status {
            ReservationStatus::Initialized if s.start <= now && now < s.end => {
                ReservationStatus::Active
            }
            ReservationStatus::Active if now >= s.end => ReservationStatus::Expired,
            st => st,
        };
        if status != ReservationStatus::Active {
            return Err(LedgerError::Rejected(Rejection::NotActive {
                id: id.clone(),
                status,
            }));
        }
        if s.is(RELEASED) || s.expiry <= now {
            return Err(LedgerError::Rejected(Rejection::Released {
                id: id.clone(),
                expiry: dt(s.expiry),
            }));
        }
        let remaining = s.amounts().saturating_sub(&s.allocated());
        for (l, a) in amounts.lines() {
            if a > remaining.get(l) {
                return Err(LedgerError::Rejected(Rejection::InsufficientRemaining {
                    id: id.clone(),
                    line: l,
                    requested: a,
                    remaining: remaining.get(l),
                }));
            }
        }
        Ok(())
    }

    /// Draws `amounts` from reservation `id` (what granting with `GrantInfo.reservationId`
    /// does): an allocation against it.
    ///
    /// # Errors
    /// As [`Ledger::create_instance`].
    pub fn draw(
        &mut self,
        id: &ReservationId,
        amounts: Capacity,
        ids: &mut IdGen,
        now: DateTime<Utc>,
    ) -> Result<Outcome<Allocation>, LedgerError> {
        self.create_instance(
            AllocationRequest {
                reservation: Some(id.clone()),
                capacity: amounts,
                ..Default::default()
            },
            ids,
            now,
        )
    }

    /// Allocates (Promise `create-instance`): against a reservation (it must exist, be
    /// active, not released, and have enough remaining) or against the zone's unreserved
    /// capacity (enough must be available at every instant from now on, since the
    /// allocation lasts until destroyed).
    ///
    /// # Errors
    /// [`LedgerError::Rejected`] saying why; [`LedgerError::Invalid`] for bad input (zero
    /// amounts, no zone without a reservation, unknown zone, a taken id).
    pub fn create_instance(
        &mut self,
        req: AllocationRequest,
        ids: &mut IdGen,
        now: DateTime<Utc>,
    ) -> Result<Outcome<Allocation>, LedgerError> {
        let now = self.begin(now)?;
        Self::check_capacity(&req.capacity, "capacity")?;
        let id = req
            .id
            .clone()
            .unwrap_or_else(|| AllocationId(ids.next_uuid()));
        if self.alloc_index.contains_key(&id) {
            return Err(invalid(
                "id",
                format!("allocation {id} already exists; expected a new id"),
            ));
        }
        let (zone, reservation) = match &req.reservation {
            Some(rid) => {
                self.check_draw(rid, &req.capacity, dt(now))?;
                let idx = self.find(rid).ok_or_else(|| {
                    LedgerError::Rejected(Rejection::UnknownReservation(rid.clone()))
                })?;
                let zone = self.slot(idx)?.zone;
                if let Some(z) = &req.zone {
                    if self.zone_index.get(z) != Some(&zone) {
                        return Err(LedgerError::Rejected(Rejection::WrongZone {
                            id: rid.clone(),
                            reserved: self.zone_of_slot(idx),
                            requested: z.clone(),
                        }));
                    }
                }
                (zone, Some(idx))
            }
            None => {
                let z = req.zone.as_ref().ok_or_else(|| {
                    invalid(
                        "zone",
                        "an allocation without a reservation needs a zone; expected zone or \
                         reservation",
                    )
                })?;
                let zone = self.zone_idx(z, "zone")?;
                let tl = self.timeline(zone)?;
                for (l, a) in req.capacity.lines() {
                    let w = tl.worst(l.index(), now, FOREVER).available;
                    if w < i128::from(a) {
                        return Err(LedgerError::Rejected(Rejection::InsufficientCapacity {
                            zone: z.clone(),
                            line: l,
                            requested: a,
                            available: clamp_i64(w),
                        }));
                    }
                }
                (zone, None)
            }
        };
        let alloc = Allocation {
            id: id.clone(),
            zone: self
                .zones
                .get(zone as usize)
                .map(|z| z.id.clone())
                .unwrap_or_default(),
            reservation: req.reservation.clone(),
            capacity: req.capacity,
            start: dt(now),
            end: None,
            instance_ref: req.instance_ref.clone(),
        };
        let a = self.allocs.len() as u32;
        self.allocs.push(AllocRec {
            alloc: alloc.clone(),
            zone,
            reservation,
            start: now,
            end: FOREVER,
        });
        self.alloc_index.insert(id, a);
        if let Some(r) = reservation {
            let x = self.slot_mut(r)?.extra_mut();
            x.allocations.push(a);
            x.allocated = x.allocated.saturating_add(&req.capacity);
        }
        self.apply_alloc(a, 1)?;
        Ok(self.finish(alloc))
    }

    /// Destroys an allocation (Promise `destroy-instance`): its capacity goes back to its
    /// reservation (or, once the reservation released its unallocated capacity, to the
    /// zone) or to the zone.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for an unknown allocation or one already destroyed.
    pub fn destroy_instance(
        &mut self,
        id: &AllocationId,
        now: DateTime<Utc>,
    ) -> Result<Outcome<Allocation>, LedgerError> {
        let now = self.begin(now)?;
        let a = *self.alloc_index.get(id).ok_or_else(|| {
            invalid(
                "allocationId",
                format!("unknown allocation {id}; expected the id of an existing allocation"),
            )
        })?;
        let rec = self
            .allocs
            .get(a as usize)
            .ok_or_else(|| corrupt("allocation index"))?;
        if rec.end != FOREVER {
            return Err(invalid(
                "allocationId",
                format!(
                    "allocation {id} already ended at {}; expected a live allocation",
                    dt(rec.end)
                ),
            ));
        }
        let reservation = rec.reservation;
        let capacity = rec.alloc.capacity;
        if let Some(r) = reservation {
            self.apply_slot(r, -1)?;
        }
        self.apply_alloc(a, -1)?;
        if let Some(rec) = self.allocs.get_mut(a as usize) {
            rec.end = now;
            rec.alloc.end = Some(dt(now));
        }
        self.apply_alloc(a, 1)?;
        if let Some(r) = reservation {
            let x = self.slot_mut(r)?.extra_mut();
            x.allocated = x.allocated.saturating_sub(&capacity);
            self.apply_slot(r, 1)?;
        }
        let alloc = self
            .allocs
            .get(a as usize)
            .map(|r| r.alloc.clone())
            .ok_or_else(|| corrupt("allocation index"))?;
        Ok(self.finish(alloc))
    }

    /// An allocation.
    pub fn allocation(&self, id: &AllocationId) -> Option<&Allocation> {
        self.alloc_index
            .get(id)
            .and_then(|a| self.allocs.get(*a as usize))
            .map(|r| &r.alloc)
    }

    /// Every allocation, live or destroyed, in creation order.
    pub fn allocations(&self) -> impl Iterator<Item = &Allocation> + '_ {
        self.allocs.iter().map(|r| &r.alloc)
    }

    // ----- capacity ---------------------------------------------------------------------

    fn window_ms(window: &Window) -> Result<(i64, i64), LedgerError> {
        let (s, e) = (ms(window.start), window.end.map_or(FOREVER, ms));
        if e <= s {
            return Err(invalid(
                "window.end",
                format!(
                    "end {} is not after start {}; expected end > start",
                    dt(e),
                    window.start
                ),
            ));
        }
        Ok((s, e))
    }

    /// Total / reserved / used / available of a zone over a window, each at the worst
    /// instant of the window. O(lines * log n).
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for an unknown zone or an empty window.
    pub fn capacity(&self, zone: &ZoneId, window: Window) -> Result<CapacityReport, LedgerError> {
        let (s, e) = Self::window_ms(&window)?;
        let tl = self.timeline(self.zone_idx(zone, "zone")?)?;
        let mut r = CapacityReport {
            zone: zone.clone(),
            window,
            total: SignedCapacity::default(),
            reserved: SignedCapacity::default(),
            usage: SignedCapacity::default(),
            available: SignedCapacity::default(),
        };
        for l in ResourceLine::ALL {
            let w = tl.worst(l.index(), s, e);
            r.total.set(l, clamp_i64(w.total));
            r.reserved.set(l, clamp_i64(w.reserved));
            r.usage.set(l, clamp_i64(w.used));
            r.available.set(l, clamp_i64(w.available));
        }
        Ok(r)
    }

    /// The capacity of every zone over a window.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for an empty window.
    pub fn capacity_all(&self, window: Window) -> Result<Vec<CapacityReport>, LedgerError> {
        self.zones
            .iter()
            .map(|z| self.capacity(&z.id, window))
            .collect()
    }

    /// The utilization timeline of a zone over a window: the figures at the window's start
    /// and at every instant they change within it. O(log n + points).
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for an unknown zone or an empty window.
    pub fn utilization(
        &self,
        zone: &ZoneId,
        window: Window,
    ) -> Result<Vec<UtilizationPoint>, LedgerError> {
        let (s, e) = Self::window_ms(&window)?;
        let tl = self.timeline(self.zone_idx(zone, "zone")?)?;
        let mut cur: [Values; LINES] = [Values::default(); LINES];
        for (l, v) in cur.iter_mut().enumerate() {
            *v = tl.at(l, s);
        }
        let point = |t: i64, cur: &[Values; LINES]| {
            let mut p = UtilizationPoint {
                timestamp: dt(t),
                total: SignedCapacity::default(),
                reserved: SignedCapacity::default(),
                usage: SignedCapacity::default(),
                available: SignedCapacity::default(),
            };
            for (l, v) in ResourceLine::ALL.iter().zip(cur) {
                p.total.set(*l, clamp_i64(v.total));
                p.reserved.set(*l, clamp_i64(v.reserved));
                p.usage.set(*l, clamp_i64(v.used));
                p.available.set(*l, clamp_i64(v.available));
            }
            p
        };
        let mut out = vec![point(s, &cur)];
        for (t, deltas) in tl.points(s.saturating_add(1), e) {
            for (c, d) in deltas {
                let (line, kind) = (usize::from(c) / 4, usize::from(c) % 4);
                let Some(v) = cur.get_mut(line) else { continue };
                let d = i128::from(d);
                match kind {
                    0 => {
                        v.total += d;
                        v.available += d;
                    }
                    1 => {
                        v.reserved += d;
                        v.available -= d;
                    }
                    2 => {
                        v.used += d;
                        v.available -= d;
                    }
                    _ => v.used += d,
                }
            }
            out.push(point(t, &cur));
        }
        Ok(out)
    }

    /// How many instances of `flavour` (per-instance amounts) fit in a zone at every instant
    /// of a window.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for an unknown zone, an empty window or an all-zero flavour.
    pub fn fit_count(
        &self,
        zone: &ZoneId,
        flavour: &Capacity,
        window: Window,
    ) -> Result<u64, LedgerError> {
        let (s, e) = Self::window_ms(&window)?;
        Self::check_capacity(flavour, "flavour")?;
        let tl = self.timeline(self.zone_idx(zone, "zone")?)?;
        let mut n = u64::MAX;
        for (l, need) in flavour.lines() {
            let avail = to_u64(tl.worst(l.index(), s, e).available);
            n = n.min(avail / need);
        }
        Ok(n)
    }

    /// [`Ledger::fit_count`] for every zone.
    ///
    /// # Errors
    /// As [`Ledger::fit_count`].
    pub fn fit_counts(
        &self,
        flavour: &Capacity,
        window: Window,
    ) -> Result<Vec<ZoneFit>, LedgerError> {
        self.zones
            .iter()
            .map(|z| {
                Ok(ZoneFit {
                    zone: z.id.clone(),
                    count: self.fit_count(&z.id, flavour, window)?,
                })
            })
            .collect()
    }

    // ----- subscriptions ----------------------------------------------------------------

    /// Subscribes to capacity thresholds or reservation events. A capacity threshold that
    /// already holds is notified in the returned outcome.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for an unknown zone or reservation in the filter.
    pub fn subscribe(
        &mut self,
        callback_uri: Option<String>,
        filter: SubscriptionFilter,
        ids: &mut IdGen,
    ) -> Result<Outcome<Subscription>, LedgerError> {
        match &filter {
            SubscriptionFilter::Capacity { zone, .. } => {
                self.zone_idx(zone, "filter.zone")?;
            }
            SubscriptionFilter::Reservation {
                zone, reservation, ..
            } => {
                if let Some(z) = zone {
                    self.zone_idx(z, "filter.zone")?;
                }
                if let Some(r) = reservation {
                    self.find_or_invalid(r)?;
                }
            }
        }
        let sub = Subscription {
            id: SubscriptionId(ids.next_uuid()),
            callback_uri,
            filter,
            triggered: false,
        };
        self.subscriptions.push(sub);
        let mut out = self.finish(());
        let sub = self
            .subscriptions
            .last()
            .cloned()
            .ok_or_else(|| corrupt("subscription"))?;
        // Only this subscription's notifications: others were delivered before.
        out.notifications.retain(|n| n.subscription_id == sub.id);
        Ok(Outcome {
            value: sub,
            events: out.events,
            notifications: out.notifications,
        })
    }

    /// Removes a subscription.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] for an unknown subscription.
    pub fn unsubscribe(&mut self, id: &SubscriptionId) -> Result<Subscription, LedgerError> {
        let i = self
            .subscriptions
            .iter()
            .position(|s| &s.id == id)
            .ok_or_else(|| invalid("subscriptionId", format!("unknown subscription {id}")))?;
        Ok(self.subscriptions.remove(i))
    }

    // ----- persistence ------------------------------------------------------------------

    /// Everything the ledger holds, for the store.
    pub fn snapshot(&self) -> LedgerSnapshot {
        LedgerSnapshot {
            policy: self.policy.clone(),
            now: self.now(),
            zones: self.zones(),
            pools: self.pools.clone(),
            reservations: (0..self.slots.len() as u32)
                .filter_map(|i| self.view(i).ok())
                .collect(),
            allocations: self.allocs.iter().map(|a| a.alloc.clone()).collect(),
            subscriptions: self.subscriptions.clone(),
            undelivered: self.pending.clone(),
        }
    }

    /// Rebuilds a ledger from a snapshot: restarting loses nothing.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] naming the entry of the snapshot that refers to an unknown
    /// zone or reservation, repeats an id, or has zero or too large amounts or an empty
    /// window.
    pub fn restore(snapshot: LedgerSnapshot) -> Result<Ledger, LedgerError> {
        let mut l = Ledger::new(snapshot.policy);
        l.clock = snapshot.now.map_or(i64::MIN, ms);
        for z in snapshot.zones {
            l.add_zone(z);
        }
        for (i, p) in snapshot.pools.into_iter().enumerate() {
            let f = format!("pools[{i}]");
            let zone = l.zone_idx(&p.zone, &format!("{f}.zone"))?;
            Self::check_capacity(&p.capacity, &format!("{f}.capacity"))?;
            if p.end.is_some_and(|e| e <= p.start) {
                return Err(invalid(format!("{f}.end"), "end is not after start"));
            }
            if l.pools.iter().any(|q| q.id == p.id) {
                return Err(invalid(
                    format!("{f}.id"),
                    format!("pool {} repeated", p.id),
                ));
            }
            l.apply(
                zone,
                &[Self::pool_piece(&p)],
                if p.decrease { -1 } else { 1 },
            )?;
            l.pools.push(p);
        }
        for (i, r) in snapshot.reservations.into_iter().enumerate() {
            let f = format!("reservations[{i}]");
            let zone = l.zone_idx(&r.zone, &format!("{f}.zone"))?;
            Self::check_capacity(&r.capacity, &format!("{f}.capacity"))?;
            if r.end <= r.start {
                return Err(invalid(format!("{f}.end"), "end is not after start"));
            }
            if r.id.as_str().is_empty() || l.find(&r.id).is_some() {
                return Err(invalid(
                    format!("{f}.id"),
                    format!("reservation id {:?} is empty or repeated", r.id.as_str()),
                ));
            }
            let mut flags = 0;
            if r.released {
                flags |= RELEASED;
            }
            if r.warned {
                flags |= WARNED;
            }
            let mut slot = Slot {
                key: [0, 0],
                start: ms(r.start),
                end: ms(r.end),
                expiry: r.expiry.map_or(FOREVER, ms),
                amounts: [0; LINES],
                zone,
                extra: None,
                status: r.status,
                priority: r.priority,
                flags,
            };
            slot.set_amounts(r.capacity);
            if !r.elements.is_empty() {
                slot.extra_mut().elements = r.elements;
            }
            if r.cancelled_on.is_some() || r.preempted_by.is_some() {
                let x = slot.extra_mut();
                x.cancelled_on = r.cancelled_on.map(ms);
                x.preempted_by = r.preempted_by;
            }
            l.insert_slot(&r.id, slot);
        }
        for (i, a) in snapshot.allocations.into_iter().enumerate() {
            let f = format!("allocations[{i}]");
            let zone = l.zone_idx(&a.zone, &format!("{f}.zone"))?;
            Self::check_capacity(&a.capacity, &format!("{f}.capacity"))?;
            if l.alloc_index.contains_key(&a.id) {
                return Err(invalid(
                    format!("{f}.id"),
                    format!("allocation {} repeated", a.id),
                ));
            }
            let reservation = match &a.reservation {
                Some(rid) => Some(l.find(rid).ok_or_else(|| {
                    invalid(
                        format!("{f}.reservation"),
                        format!("unknown reservation {rid}"),
                    )
                })?),
                None => None,
            };
            let idx = l.allocs.len() as u32;
            if let Some(r) = reservation {
                let x = l.slot_mut(r)?.extra_mut();
                x.allocations.push(idx);
                if a.end.is_none() {
                    x.allocated = x.allocated.saturating_add(&a.capacity);
                }
            }
            l.alloc_index.insert(a.id.clone(), idx);
            l.allocs.push(AllocRec {
                start: ms(a.start),
                end: a.end.map_or(FOREVER, ms),
                alloc: a,
                zone,
                reservation,
            });
        }
        for i in 0..l.slots.len() as u32 {
            l.apply_slot(i, 1)?;
            l.schedule(i);
        }
        for a in 0..l.allocs.len() as u32 {
            l.apply_alloc(a, 1)?;
        }
        l.subscriptions = snapshot.subscriptions;
        l.pending = snapshot.undelivered;
        Ok(l)
    }

    /// Bytes held by the ledger's structures (see [`MemoryUsage`]).
    pub fn memory(&self) -> MemoryUsage {
        let reservations = self.slots.capacity() * size_of::<Slot>()
            + self
                .slots
                .iter()
                .filter_map(|s| s.extra.as_deref())
                .map(|x| {
                    size_of::<Extra>()
                        + x.elements.capacity() * size_of::<String>()
                        + x.elements.iter().map(String::capacity).sum::<usize>()
                        + x.allocations.capacity() * 4
                })
                .sum::<usize>();
        let indexes = btree_bytes::<[u64; 2], u32>(self.uuid_index.len())
            + btree_bytes::<String, u32>(self.name_index.len())
            + self.names.capacity() * size_of::<String>()
            + self.names.iter().map(|n| 2 * n.capacity()).sum::<usize>();
        let timelines = self.zones.capacity() * size_of::<ZoneState>()
            + self.zones.iter().map(|z| z.timeline.bytes()).sum::<usize>()
            + btree_bytes::<ZoneId, u32>(self.zone_index.len());
        let events = btree_bytes::<i64, Vec<u32>>(self.queue.len())
            + self.queue.values().map(|v| v.capacity() * 4).sum::<usize>();
        let other = self.pools.capacity() * size_of::<Pool>()
            + self.allocs.capacity() * size_of::<AllocRec>()
            + btree_bytes::<AllocationId, u32>(self.alloc_index.len())
            + self.subscriptions.capacity() * size_of::<Subscription>();
        MemoryUsage {
            reservations,
            indexes,
            timelines,
            events,
            other,
        }
    }
}
