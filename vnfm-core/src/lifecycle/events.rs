//! What a [`Lifecycle`](super::Lifecycle) tells its embedder as it goes: a
//! [`LifecycleEvent`] for every batch it commits (an operation's start, progress and end, an
//! instance created or deleted, an occurrence failed or taken over), handed to each
//! [`LifecycleObserver`] given with [`Lifecycle::with_observer`](super::Lifecycle::with_observer).
//!
//! An embedder learns what happened from these events instead of wrapping the store: the CLI
//! saves the simulated cloud after each commit (a command killed mid-operation leaves the
//! cloud as a real one would be).

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;

use crate::driver::{DriverError, Store, StoreBatch};

/// Something the lifecycle did.
#[derive(Debug)]
#[non_exhaustive]
pub enum LifecycleEvent<'a> {
    /// This batch was committed to the store.
    Committed(&'a StoreBatch),
}

/// Told every [`LifecycleEvent`], in order, before the lifecycle goes on.
///
/// # Contract
/// - [`LifecycleObserver::event`] runs after the event happened (a commit is in the store)
///   and before the lifecycle's next step; it should be quick.
/// - An error is the lifecycle's as if the step itself had failed (a commit whose observer
///   failed is reported as a failed commit, although the store has it).
#[async_trait]
pub trait LifecycleObserver: Send + Sync + Debug {
    /// Handles `event`.
    ///
    /// # Errors
    /// A failure the lifecycle takes as the step's (see the contract).
    async fn event(&self, event: &LifecycleEvent<'_>) -> Result<(), DriverError>;
}

/// Commits `batch` to `store`, then tells each of `observers`.
pub(crate) async fn commit(
    store: &dyn Store,
    observers: &[Arc<dyn LifecycleObserver>],
    batch: StoreBatch,
) -> Result<(), DriverError> {
    if observers.is_empty() {
        return store.commit(batch).await;
    }
    let seen = batch.clone();
    store.commit(batch).await?;
    for o in observers {
        o.event(&LifecycleEvent::Committed(&seen)).await?;
    }
    Ok(())
}
