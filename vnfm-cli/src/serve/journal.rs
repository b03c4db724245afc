//! The writer of the alert journal: a thread of its own, with its own connection to the state
//! file, appends the queued journal entries in one transaction per turn (group commit), and
//! tells every waiting request at once how far it got.
//!
//! A request queues its entries under the alert lock (so the queue is in generation order)
//! and waits for [`Journal::wait`]; the writer takes everything queued when it comes round,
//! writes it, and publishes the last generation written. The requests that queued while a
//! write was in progress share the next one. Nothing here decides what to write: the entries
//! come from `vnfm_core::alert::AlertHandler::heal_entries`.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use tokio::sync::watch;

use crate::store::{Flush, SqliteStore};

/// How far the writer got: every entry of a generation up to `written` is in the file; the
/// write of the entries up to `failed` failed (they are queued again, and the next turn
/// retries them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Progress {
    written: u64,
    failed: u64,
}

#[derive(Default)]
struct Queue {
    /// (document name, JSON body), in generation order.
    entries: Vec<(String, String)>,
    /// The generation of the last push: every entry queued is of it or before.
    upto: u64,
    stop: bool,
}

struct Inner {
    queue: Mutex<Queue>,
    ready: Condvar,
    progress: watch::Sender<Progress>,
}

/// The journal writer (see the module docs). Dropping it stops the thread once the queue is
/// written.
pub(crate) struct Journal {
    inner: Arc<Inner>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").finish_non_exhaustive()
    }
}

impl Journal {
    /// Starts the writer over `store` (a connection of its own: see
    /// [`SqliteStore::reopen`]); each turn is written with `flush`.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub(crate) fn start(store: SqliteStore, flush: Flush) -> std::io::Result<Journal> {
        let inner = Arc::new(Inner {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            progress: watch::Sender::new(Progress::default()),
        });
        let worker = inner.clone();
        let thread = std::thread::Builder::new()
            .name("vnfm-alert-journal".into())
            .spawn(move || worker.run(&store, flush))?;
        Ok(Journal {
            inner,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues the `entries` of change `generation` (call it under the alert lock, so that
    /// generations stay in order).
    pub(crate) fn push(
        &self,
        generation: u64,
        entries: impl IntoIterator<Item = (String, String)>,
    ) {
        let mut q = self.inner.lock();
        q.entries.extend(entries);
        q.upto = generation;
        self.inner.ready.notify_one();
    }

    /// Waits until the entries of `generation` are written: `true`, or their write failed:
    /// `false` (the writer keeps them queued and retries at its next turn).
    pub(crate) async fn wait(&self, generation: u64) -> bool {
        let mut rx = self.inner.progress.subscribe();
        loop {
            let p = *rx.borrow_and_update();
            if p.written >= generation {
                return true;
            }
            if p.failed >= generation {
                return false;
            }
            if rx.changed().await.is_err() {
                return false;
            }
        }
    }

    /// Stops the writer once the queue is written, and waits for it.
    pub(crate) async fn stop(&self) {
        self.inner.stop();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.inner.stop();
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells the writer to stop once the queue is written.
    fn stop(&self) {
        self.lock().stop = true;
        self.ready.notify_one();
    }

    fn run(&self, store: &SqliteStore, flush: Flush) {
        loop {
            let (batch, upto) = {
                let mut q = self.lock();
                while q.entries.is_empty() && !q.stop {
                    q = self.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
                }
                if q.entries.is_empty() {
                    return;
                }
                (std::mem::take(&mut q.entries), q.upto)
            };
            match store.write_documents_blocking(&batch, None, flush) {
                Ok(()) => self
                    .progress
                    .send_modify(|p| p.written = p.written.max(upto)),
                Err(e) => {
                    crate::display::log_line(&format!(
                        "vnfm serve: cannot save the alert journal: {e}"
                    ));
                    // Back in the queue, ahead of what came meanwhile. Everything queued now
                    // counts as failed: the requests that queued during the write (their wake-up
                    // came while the writer was busy) are answered too, not left to time out.
                    let mut q = self.lock();
                    let later = std::mem::replace(&mut q.entries, batch);
                    q.entries.extend(later);
                    let queued = q.upto;
                    self.progress
                        .send_modify(|p| p.failed = p.failed.max(queued));
                    if q.stop {
                        // The stop's save of the whole state covers what is left.
                        return;
                    }
                    // Retry when something new is queued (or at the stop).
                    let n = q.entries.len();
                    drop(
                        self.ready
                            .wait_while(q, |q| q.entries.len() == n && !q.stop)
                            .unwrap_or_else(PoisonError::into_inner),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(generation: u64, n: u32) -> (String, String) {
        (
            format!("j:{generation:04}:{n}"),
            format!("{{\"g\":{generation}}}"),
        )
    }

    /// A trigger that makes SQLite refuse the journal's inserts while it exists.
    const REFUSE: &str = "CREATE TRIGGER refuse BEFORE INSERT ON documents \
                          WHEN NEW.name LIKE 'j:%' BEGIN SELECT RAISE(ABORT, 'refused'); END";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiters_learn_when_their_entries_are_written_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        let store = SqliteStore::open(&path).unwrap();
        let journal = Journal::start(store.reopen().unwrap(), Flush::Deferred).unwrap();

        journal.push(1, [entry(1, 0), entry(1, 1)]);
        journal.push(2, [entry(2, 0)]);
        assert!(journal.wait(2).await);
        assert!(journal.wait(1).await, "an earlier generation is covered");
        let names: Vec<String> = store
            .documents_with_prefix("j:")
            .await
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["j:0001:0", "j:0001:1", "j:0002:0"]);

        // A write that fails is answered as failed, kept, and retried with the next push.
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute_batch(REFUSE).unwrap();
        journal.push(3, [entry(3, 0)]);
        assert!(!journal.wait(3).await);
        raw.execute_batch("DROP TRIGGER refuse").unwrap();
        journal.push(4, [entry(4, 0)]);
        assert!(journal.wait(4).await);
        assert!(
            journal.wait(3).await,
            "the refused entry went with the next write"
        );
        assert_eq!(store.documents_with_prefix("j:").await.unwrap().len(), 5);

        // Entries queued while a write fails are answered as failed too.
        raw.execute_batch(REFUSE).unwrap();
        journal.push(5, [entry(5, 0)]);
        journal.push(6, [entry(6, 0)]);
        assert!(!journal.wait(6).await);
        assert!(!journal.wait(5).await);
        raw.execute_batch("DROP TRIGGER refuse").unwrap();
        journal.push(7, [entry(7, 0)]);
        assert!(journal.wait(7).await);
        assert_eq!(store.documents_with_prefix("j:").await.unwrap().len(), 8);

        // The stop writes what is queued first.
        journal.push(8, [entry(8, 0)]);
        journal.stop().await;
        assert_eq!(store.documents_with_prefix("j:").await.unwrap().len(), 9);
    }
}
