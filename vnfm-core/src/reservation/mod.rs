//! The capacity ledger of OPNFV Promise: capacity pools, reservations, allocations, policy
//! limits, expiry, priority, counter-offers and subscriptions, over time windows.
//!
//! ## Model
//! - Each zone has seven **resource lines**: compute (`cores`, `ram`, `instances`), network
//!   (`addresses`) and storage (`volumes`, `size`, `snapshots`); amounts are `u64` per line
//!   ([`Capacity`]).
//! - **Pools** add capacity to a zone over `[start, end)` (`end` optional: forever), declared
//!   ([`Ledger::increase_capacity`] / [`Ledger::decrease_capacity`]) or taken from a VIM's
//!   zone catalogue ([`Ledger::add_catalogue`]).
//! - **Reservations** hold capacity over `[start, end)`: for immediate use (no `start`, valid
//!   until `expiry`) or for future use. Status: `initialized` → `active` at `start` →
//!   `expired` at `end`, or `cancelled` (also when preempted). At `expiry` the capacity not
//!   allocated goes back to the zone.
//! - **Allocations** (`create-instance` / `destroy-instance`) draw from an active reservation
//!   or from the zone's unreserved capacity; a rejection says why ([`Rejection`]).
//!   [`Ledger::draw`] / [`Ledger::check_draw`] are what granting with
//!   `GrantInfo.reservationId` calls.
//! - **Available** = total − reserved − used outside reservations. A request fits when it
//!   fits at *every* instant of its window: the worst point, never one instant (Promise's
//!   reference code bucketed by day and overbooked same-day reservations) and never the peak
//!   over whole overlapping leases (Blazar's check, which rejects requests that fit).
//! - **Policy** ([`Policy`]): `max-future-start-range`, `max-future-end-range`,
//!   `max-duration` (8760 h by default), `expiry`; each violation is an error naming the
//!   limit.
//! - **Priority** high | normal | low: a request that does not fit may preempt
//!   lower-priority reservations that have not started (policy `preemption`); each one is
//!   cancelled with `preemptedBy` and an [`Event::ReservationPreempted`].
//! - **Counter-offer**: a request that does not fit is answered with the largest amount per
//!   line reservable over its window and the earliest window of the same length (from its
//!   start) where it fits ([`CounterOffer`]).
//! - **Subscriptions** to capacity thresholds and reservation events: operations and
//!   [`Ledger::advance_to`] return the [`Event`]s and the [`Notification`]s; delivering them
//!   is the server's job.
//!
//! - **LCM operations** ([`lcm`]): what an instantiate or a scale-out draws from a reservation
//!   (`additionalParams.reservationId`, `--reservation`), what it keeps after the operation,
//!   and what a scale-in or a terminate gives back; shared by the command line and `vnfm serve`.
//!
//! Nothing here reads a clock: every operation takes `now` (non-decreasing) and first applies
//! the transitions due by then. Ids come from a caller's [`crate::id::IdGen`] or the request.
//! Every type is serde-serializable (camelCase, Promise names), and
//! [`Ledger::snapshot`] / [`Ledger::restore`] persist the whole ledger.
//!
//! ## Complexity
//! Each zone keeps a B+tree keyed by time (ms) holding capacity deltas in one column per
//! (line, kind), each subtree summarised per line by its sums and extreme prefix sums. The
//! worst point of a window and an admission check cost O(log n) per line; the timeline
//! stores 8 bytes per key plus 8 per line used, so a three-line reservation costs about
//! 110 bytes of timeline, 88 of record, 40 of id index: about 250 bytes by [`Ledger::memory`]'s
//! estimate; measured on the heap with a counting allocator it is about 490 bytes
//! (`tests/ledger_memory.rs`, `benches/README.md`): the estimate counts about half. Listing queries and preemption scan the
//! reservations. The naive interval scan survives only as the `oracle` module (feature
//! `proptest`): the oracle of the property tests and the baseline of the benchmark.
//!
//! ```
//! use chrono::{DateTime, Duration};
//! use vnfm_core::id::IdGen;
//! use vnfm_core::reservation::{Capacity, Ledger, PoolRequest, ReservationRequest};
//!
//! let now = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
//! let mut ids = IdGen::seeded(1);
//! let mut ledger = Ledger::default();
//! ledger.increase_capacity(PoolRequest::new("AZ-1", Capacity::compute(16, 65536, 8)), &mut ids, now)?;
//! let r = ledger.create_reservation(
//!     ReservationRequest::new("AZ-1", Capacity::compute(12, 4096, 2))
//!         .with_window(now + Duration::hours(1), now + Duration::hours(3)),
//!     &mut ids,
//!     now,
//! )?;
//! // A second one overlapping the first does not fit; the counter-offer says what would.
//! let err = ledger
//!     .create_reservation(
//!         ReservationRequest::new("AZ-1", Capacity::compute(8, 4096, 1))
//!             .with_window(now + Duration::hours(2), now + Duration::hours(4)),
//!         &mut ids,
//!         now,
//!     )
//!     .unwrap_err();
//! let vnfm_core::reservation::LedgerError::DoesNotFit { offer, .. } = err else { panic!() };
//! assert_eq!(offer.largest.cores, 4);
//! assert_eq!(offer.earliest.unwrap().start, r.value.end);
//! # Ok::<(), vnfm_core::reservation::LedgerError>(())
//! ```

pub mod book;
pub mod lcm;
mod ledger;
mod model;
#[cfg(any(test, feature = "proptest"))]
pub mod oracle;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
mod timeline;

pub use ledger::{Ledger, LedgerError, MemoryUsage, Rejection, MAX_AMOUNT};
pub use model::*;
