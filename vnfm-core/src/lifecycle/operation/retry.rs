//! A commit that the store could not take for a while (the database restarting, a connection
//! lost: [`DriverError::is_retryable`]) is tried again, not given up: the operation keeps its
//! state and its place, sends the same batch again after a short wait (its lease renewed in
//! it), and goes on once it is stored. Lease renewals that fail so are tried again the same
//! way. Only after [`RETRY_FOR`](super::backoff::RETRY_FOR) of failures is the operation given up as lost (the store's
//! error), for another process to take over once its lease has expired; a conflict (another
//! process took the occurrence over meanwhile) ends it at once, as before.
//!
//! The first commit of a new operation (`STARTING`) is not retried: its request is answered
//! with the store's failure (503) and nothing was started.

use super::backoff::{Backoff, PendingCommit};
use super::helpers::chrono_of;
use super::machine::Operation;
use super::timers::Timer;
use crate::driver::{DriverError, StoreBatch};

impl Operation {
    /// The main commit `failed`: whether it will be tried again (then nothing else happens until
    /// [`Operation::retry_due`]).
    pub(super) fn retry_commit(&mut self, failed: &DriverError) -> bool {
        if !failed.is_retryable() {
            self.commit_retry = None;
            return false;
        }
        let Some(batch) = self.commit_out.take() else {
            return false;
        };
        let Some(backoff) =
            Backoff::after(self.commit_retry.as_ref().map(|p| &p.backoff), self.now)
        else {
            self.commit_retry = None;
            return false;
        };
        self.timers.set(Timer::CommitRetry, self.now + backoff.wait);
        self.commit_retry = Some(PendingCommit { batch, backoff });
        true
    }

    /// A renewal of the lease `failed`: whether it will be tried again (its timer set).
    pub(super) fn retry_renewal(&mut self, failed: &DriverError) -> bool {
        if !failed.is_retryable() {
            return false;
        }
        let Some(backoff) = Backoff::after(self.renewal_retry.as_ref(), self.now) else {
            return false;
        };
        self.timers
            .set(Timer::LeaseRenewal, self.now + backoff.wait);
        self.renewal_retry = Some(backoff);
        true
    }

    /// The commit waiting to be sent again, when its time has come: its batch, the lease in it
    /// renewed from now.
    pub(super) fn retry_due(&mut self) -> Option<StoreBatch> {
        if !self.timers.is_expired(Timer::CommitRetry, self.now) {
            return None;
        }
        self.timers.stop(Timer::CommitRetry);
        let mut batch = self.commit_retry.as_ref()?.batch.clone();
        let expires = self.now + chrono_of(self.cfg.lease_time);
        for op in batch.put_op_occs.iter_mut().filter(|o| o.id == self.op.id) {
            if let Some(lease) = op.lease.as_mut() {
                lease.expires = expires;
            }
        }
        if self.op.lease.is_some() {
            self.timers.set(
                Timer::LeaseRenewal,
                self.now + chrono_of(self.cfg.lease_time / 3),
            );
        }
        Some(batch)
    }
}
