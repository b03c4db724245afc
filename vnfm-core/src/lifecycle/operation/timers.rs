//! The operation's timers, named, in one table (as quinn-proto's `TimerTable`):
//! [`Operation::poll_timeout`](super::Operation::poll_timeout) is the earliest of them, and
//! [`Operation::handle_timeout`](super::Operation::handle_timeout) fires those that are due.

use chrono::{DateTime, Utc};

/// A timer of the operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// The current step waits on time: the stack, pod or server poll and its timeout, the
    /// settle wait after a failed stack, or the next ask of the NFVO's grant (a part's timer).
    Step,
    /// The next lease renewal commit of the occurrence.
    LeaseRenewal,
    /// The next try of a commit the store could not take (`retry`).
    CommitRetry,
}

impl Timer {
    const ALL: [Self; 3] = [Self::Step, Self::LeaseRenewal, Self::CommitRetry];

    fn index(self) -> usize {
        match self {
            Self::Step => 0,
            Self::LeaseRenewal => 1,
            Self::CommitRetry => 2,
        }
    }
}

/// When each [`Timer`] expires, if it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct TimerTable {
    at: [Option<DateTime<Utc>>; Timer::ALL.len()],
}

impl TimerTable {
    /// Runs `timer` until `at` (or stops it: `None`).
    pub(super) fn put(&mut self, timer: Timer, at: Option<DateTime<Utc>>) {
        self.at[timer.index()] = at;
    }

    /// Runs `timer` until `at`.
    pub(super) fn set(&mut self, timer: Timer, at: DateTime<Utc>) {
        self.put(timer, Some(at));
    }

    /// Stops `timer`.
    pub(super) fn stop(&mut self, timer: Timer) {
        self.put(timer, None);
    }

    /// Stops every timer.
    pub(super) fn stop_all(&mut self) {
        self.at = Default::default();
    }

    /// Whether `timer` runs and has expired at `now`.
    pub(super) fn is_expired(&self, timer: Timer, now: DateTime<Utc>) -> bool {
        self.at[timer.index()].is_some_and(|t| t <= now)
    }

    /// When `timer` expires, if it runs.
    pub(super) fn get(&self, timer: Timer) -> Option<DateTime<Utc>> {
        self.at[timer.index()]
    }

    /// The earliest expiry of a running timer.
    pub(super) fn next_timeout(&self) -> Option<DateTime<Utc>> {
        self.at.iter().flatten().min().copied()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use chrono::TimeZone;

    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    #[test]
    fn the_next_timeout_is_the_earliest_running_timer() {
        let mut timers = TimerTable::default();
        assert_eq!(timers.next_timeout(), None);
        timers.set(Timer::LeaseRenewal, t(20));
        timers.set(Timer::Step, t(5));
        assert_eq!(timers.next_timeout(), Some(t(5)));
        timers.stop(Timer::Step);
        assert_eq!(timers.next_timeout(), Some(t(20)));
        timers.put(Timer::Step, Some(t(30)));
        assert_eq!(timers.next_timeout(), Some(t(20)));
        timers.stop_all();
        assert_eq!(timers.next_timeout(), None);
    }

    #[test]
    fn each_timer_expires_on_its_own() {
        let mut timers = TimerTable::default();
        timers.set(Timer::Step, t(5));
        timers.set(Timer::LeaseRenewal, t(10));
        assert!(!timers.is_expired(Timer::Step, t(4)));
        assert!(timers.is_expired(Timer::Step, t(5)), "due at its time");
        assert!(!timers.is_expired(Timer::LeaseRenewal, t(5)));
        assert!(timers.is_expired(Timer::LeaseRenewal, t(11)));
        timers.put(Timer::Step, None);
        assert!(
            !timers.is_expired(Timer::Step, t(100)),
            "a stopped timer never fires"
        );
    }
}
