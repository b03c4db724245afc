//! The waits of the commits tried again (`retry`): how long, and for how long in all.

use chrono::{DateTime, TimeDelta, Utc};

use crate::driver::StoreBatch;

/// How long failing commits are tried again before the operation is given up as lost.
pub(super) const RETRY_FOR: TimeDelta = TimeDelta::minutes(10);

/// The first wait before a commit is tried again; each failure doubles it, up to [`MAX_WAIT`].
const FIRST_WAIT: TimeDelta = TimeDelta::milliseconds(250);

/// The longest wait between two tries (short: once the store is back, the operation renews its
/// lease before another process's sweep may find it expired).
const MAX_WAIT: TimeDelta = TimeDelta::seconds(1);

/// Failures in a row of the store, and when they began.
#[derive(Clone, Debug)]
pub(super) struct Backoff {
    since: DateTime<Utc>,
    pub(super) wait: TimeDelta,
}

impl Backoff {
    /// After one more failure at `now` (the first: `None`): the next, or `None` when the
    /// failures have lasted [`RETRY_FOR`].
    pub(super) fn after(prev: Option<&Backoff>, now: DateTime<Utc>) -> Option<Backoff> {
        match prev {
            None => Some(Backoff {
                since: now,
                wait: FIRST_WAIT,
            }),
            Some(b) if now - b.since >= RETRY_FOR => None,
            Some(b) => Some(Backoff {
                since: b.since,
                wait: (b.wait * 2).min(MAX_WAIT),
            }),
        }
    }
}

/// A main commit waiting to be sent again.
#[derive(Clone, Debug)]
pub(super) struct PendingCommit {
    pub(super) batch: StoreBatch,
    pub(super) backoff: Backoff,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_800_000_000 + s, 0).unwrap_or_default()
    }

    #[test]
    fn waits_grow_to_a_second_and_stop_after_ten_minutes() {
        let b = Backoff::after(None, t(0)).unwrap_or_else(|| unreachable!());
        assert_eq!(b.wait, FIRST_WAIT);
        let b = Backoff::after(Some(&b), t(1)).unwrap_or_else(|| unreachable!());
        assert_eq!(b.wait, TimeDelta::milliseconds(500));
        let b = Backoff::after(Some(&b), t(2)).unwrap_or_else(|| unreachable!());
        let b = Backoff::after(Some(&b), t(3)).unwrap_or_else(|| unreachable!());
        assert_eq!(b.wait, MAX_WAIT, "at most a second");
        assert_eq!(b.since, t(0));
        assert!(Backoff::after(Some(&b), t(599)).is_some());
        assert!(
            Backoff::after(Some(&b), t(600)).is_none(),
            "given up after ten minutes"
        );
    }
}
