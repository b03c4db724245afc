//! What a [`Lifecycle`](super::Lifecycle) tells its embedder as it goes: a
//! [`LifecycleEvent`] for every batch it commits (an operation's start, progress and end, an
//! instance created or deleted, an occurrence failed or taken over), handed to each
//! [`LifecycleObserver`] given with [`Lifecycle::with_observer`](super::Lifecycle::with_observer).
//!
//! An embedder learns what happened from these events instead of wrapping the store: the CLI
//! saves the simulated cloud after each commit (a command killed mid-operation leaves the
//! cloud as a real one would be); `vnfm serve` adds to each batch, in
//! [`LifecycleObserver::prepare`], the SOL003 notifications it causes (written in the same
//! transaction: its outbox), and on the batch's event updates its view of the instances, its
//! metrics and which instances are busy.

use std::any::Any;
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
    /// This batch was not committed: the store refused it (a conflict) or failed.
    CommitFailed(&'a StoreBatch, &'a DriverError),
}

/// What an observer's [`LifecycleObserver::prepare`] keeps until the batch's event (e.g. a lock
/// held from before the commit to after it); handed back with that event.
#[derive(Debug, Default)]
pub struct CommitTicket(Option<Box<dyn Any + Send + Sync>>);

impl CommitTicket {
    /// A ticket carrying `value`.
    pub fn new(value: impl Any + Send + Sync) -> Self {
        Self(Some(Box::new(value)))
    }

    /// The value, if it is a `T`.
    pub fn take<T: Any>(self) -> Option<T> {
        self.0.and_then(|b| b.downcast::<T>().ok()).map(|b| *b)
    }
}

/// Told every [`LifecycleEvent`], in order, before the lifecycle goes on.
///
/// # Contract
/// - Before each commit, [`LifecycleObserver::prepare`] may add documents to the batch
///   ([`StoreBatch::documents`]: written in the same transaction) and returns a ticket; the
///   batch's [`LifecycleEvent::Committed`] or [`LifecycleEvent::CommitFailed`] follows with
///   that ticket, always, once.
/// - [`LifecycleObserver::event`] runs after the event happened (a commit is in the store)
///   and before the lifecycle's next step; it should be quick.
/// - An error from `event` is the lifecycle's as if the step itself had failed (a commit whose
///   observer failed is reported as a failed commit, although the store has it).
#[async_trait]
pub trait LifecycleObserver: Send + Sync + Debug {
    /// Before `batch` is committed: adds what must be written with it. The default adds
    /// nothing.
    async fn prepare(&self, batch: &mut StoreBatch) -> CommitTicket {
        let _ = batch;
        CommitTicket::default()
    }

    /// Handles `event`; `ticket` is what [`LifecycleObserver::prepare`] returned for its batch.
    ///
    /// # Errors
    /// A failure the lifecycle takes as the step's (see the contract).
    async fn event(
        &self,
        event: &LifecycleEvent<'_>,
        ticket: CommitTicket,
    ) -> Result<(), DriverError>;
}

/// Lets each of `observers` prepare `batch`, commits it to `store`, then tells each of them
/// (all of them, also after one failed: the first error is returned).
pub(crate) async fn commit(
    store: &dyn Store,
    observers: &[Arc<dyn LifecycleObserver>],
    mut batch: StoreBatch,
) -> Result<(), DriverError> {
    if observers.is_empty() {
        return store.commit(batch).await;
    }
    let mut tickets = Vec::with_capacity(observers.len());
    for o in observers {
        tickets.push(o.prepare(&mut batch).await);
    }
    let seen = batch.clone();
    let committed = store.commit(batch).await;
    let event = match &committed {
        Ok(()) => LifecycleEvent::Committed(&seen),
        Err(e) => LifecycleEvent::CommitFailed(&seen, e),
    };
    let mut told = Ok(());
    for (o, ticket) in observers.iter().zip(tickets) {
        let r = o.event(&event, ticket).await;
        if told.is_ok() {
            told = r;
        }
    }
    committed.and(told)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Mutex;

    use super::*;
    use crate::id::VnfInstanceId;
    use crate::store::{conformance, MemoryStore, Precondition};

    /// Adds a document to every batch; records each event with the ticket it got back.
    #[derive(Debug, Default)]
    struct Outbox {
        seen: Mutex<Vec<(String, Option<u32>)>>,
        prepared: Mutex<u32>,
    }

    #[async_trait]
    impl LifecycleObserver for Outbox {
        async fn prepare(&self, batch: &mut StoreBatch) -> CommitTicket {
            let mut n = self.prepared.lock().unwrap();
            *n += 1;
            batch
                .documents
                .push((format!("outbox:{n:03}"), format!("entry {n}")));
            CommitTicket::new(*n)
        }

        async fn event(
            &self,
            event: &LifecycleEvent<'_>,
            ticket: CommitTicket,
        ) -> Result<(), DriverError> {
            let what = match event {
                LifecycleEvent::Committed(b) => format!("committed {}", b.documents.len()),
                LifecycleEvent::CommitFailed(_, e) => {
                    format!("failed {}", matches!(e, DriverError::Conflict { .. }))
                }
            };
            self.seen.lock().unwrap().push((what, ticket.take::<u32>()));
            Ok(())
        }
    }

    #[tokio::test]
    async fn what_prepare_adds_is_written_with_the_batch_and_every_batch_gets_its_event() {
        let store = MemoryStore::new();
        let outbox = Arc::new(Outbox::default());
        let observers: Vec<Arc<dyn LifecycleObserver>> = vec![outbox.clone()];
        let inst = conformance::instance("vnf-1", "vnfd-1");
        commit(&store, &observers, StoreBatch::new().with_instance(inst))
            .await
            .unwrap();
        assert_eq!(store.document("outbox:001").as_deref(), Some("entry 1"));

        // Refused by its precondition: nothing of it is written, and the observer is told,
        // with its ticket, so it can take back what it staged.
        let stale = StoreBatch::new()
            .with_deleted_instance(VnfInstanceId::from("vnf-1"))
            .with_precondition(Precondition::InstanceAt {
                id: VnfInstanceId::from("vnf-1"),
                version: crate::store::Version(7),
            });
        let err = commit(&store, &observers, stale).await.unwrap_err();
        assert!(matches!(err, DriverError::Conflict { .. }), "{err}");
        assert_eq!(store.document("outbox:002"), None);
        assert!(store
            .instance_entry(&VnfInstanceId::from("vnf-1"))
            .await
            .is_ok());
        assert_eq!(
            *outbox.seen.lock().unwrap(),
            vec![
                ("committed 1".to_owned(), Some(1)),
                ("failed true".to_owned(), Some(2)),
            ]
        );
    }

    #[tokio::test]
    async fn a_batch_prunes_the_documents_of_its_ranges() {
        let store = MemoryStore::new();
        let mut b = StoreBatch::new();
        for n in 1..=4 {
            b.documents
                .push((format!("outbox:s1:{n:03}"), n.to_string()));
        }
        b.documents.push(("outbox:s2:001".into(), "other".into()));
        store.commit(b).await.unwrap();
        let mut prune = StoreBatch::new();
        prune
            .prune_documents
            .push(("outbox:s1:".into(), "outbox:s1:002".into()));
        store.commit(prune).await.unwrap();
        assert_eq!(store.document("outbox:s1:001"), None);
        assert_eq!(store.document("outbox:s1:002"), None);
        assert_eq!(store.document("outbox:s1:003").as_deref(), Some("3"));
        assert_eq!(store.document("outbox:s2:001").as_deref(), Some("other"));
    }
}
