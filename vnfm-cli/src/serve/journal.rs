//! The alert journal: an append-only file of accepted heal alerts beside the state file, so
//! that an accepted alert is on disk before its 204 without a SQLite transaction per request.
//!
//! - **Records.** One line per accepted heal alert, `<generation> <HealEntry as JSON>\n`,
//!   appended with one `write(2)` per request by the request's own task: no hand-over to
//!   another thread. The request takes its place in the journal ([`Journal::slot`]) under the
//!   alert lock, so lines are in generation order, and encodes and writes after releasing
//!   it. Once the write returns the record is in the OS: it survives a crash or a kill of the
//!   server.
//! - **fsync.** Under `[server] alert_fsync = "each"`, [`Journal::sync`] waits for a
//!   `fdatasync` of every segment written so far, made by the journal's sync thread for every
//!   request waiting at that moment (group commit), and of the folder when a segment was
//!   created. Under `periodic` nothing waits: the snapshot of the whole alert state, written
//!   (and fsynced) by the dispatcher within about a second, makes the records it covers
//!   redundant.
//! - **Segments.** Records go to numbered files in the folder `<state file>-alerts`
//!   (`00000000000000000001.jsonl`, ...). [`Journal::rotate`], called where the snapshot is
//!   taken (under the same lock), starts a new segment; once the snapshot is committed the
//!   segments it covers are removed ([`Journal::remove_through`]). So the folder holds about a
//!   second of records, more only while snapshots fail (a full disk).
//! - **Failures.** A write that fails (a full disk) leaves its segment sealed, a partial line
//!   at its end, and the next record starts a new segment; the reader skips a cut last line
//!   ([`read_dir`]).
//!
//! Nothing here decides what to write: the entries come from
//! `vnfm_core::alert::AlertHandler::heal_entries`.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use tokio::sync::watch;

/// The folder of the alert journal of the state file `state`: `<state>-alerts`.
pub(crate) fn dir_of(state: &Path) -> PathBuf {
    let mut name = state.file_name().unwrap_or_default().to_os_string();
    name.push("-alerts");
    state.with_file_name(name)
}

/// The file name of segment `n`.
fn segment_name(n: u64) -> String {
    format!("{n:020}.jsonl")
}

/// The number of a segment's file name, `None` for another name.
fn segment_number(name: &str) -> Option<u64> {
    let n = name.strip_suffix(".jsonl")?;
    (n.len() == 20 && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// The segments in `dir`, by number (none when the folder does not exist).
fn segments(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for e in entries {
        let e = e?;
        if let Some(n) = e.file_name().to_str().and_then(segment_number) {
            found.push((n, e.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// One record read back: its generation and its JSON.
pub(crate) type Record = (u64, String);

/// Reads every record of the journal folder `dir`, segment after segment, line after line. A
/// last line without its newline (cut by a crash, or by a failed write that sealed its
/// segment) is skipped.
///
/// # Errors
/// The folder or a segment cannot be read, or a complete line is not a record (named by
/// file and line).
pub(crate) fn read_dir(dir: &Path) -> Result<Vec<Record>, String> {
    let mut records = Vec::new();
    let list = segments(dir)
        .map_err(|e| format!("cannot list the alert journal {}: {e}", dir.display()))?;
    for (_, path) in list {
        let text = std::fs::read(&path)
            .map_err(|e| format!("cannot read the alert journal {}: {e}", path.display()))?;
        let complete = match text.iter().rposition(|b| *b == b'\n') {
            Some(end) => &text[..=end],
            None => &[][..],
        };
        for (i, line) in complete.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let bad = |what: &str| {
                format!(
                    "alert journal {} line {}: {what}; expected `<generation> <JSON entry>`",
                    path.display(),
                    i + 1
                )
            };
            let line = std::str::from_utf8(line).map_err(|_| bad("not UTF-8"))?;
            let (generation, json) = line.split_once(' ').ok_or_else(|| bad("no generation"))?;
            let generation = generation
                .parse::<u64>()
                .map_err(|_| bad("the generation is not a number"))?;
            records.push((generation, json.to_owned()));
        }
    }
    Ok(records)
}

/// Removes every segment of the journal folder `dir` (after its records were folded into a
/// snapshot).
pub(crate) fn clear_dir(dir: &Path) -> std::io::Result<()> {
    for (_, path) in segments(dir)? {
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// How far the sync thread got: every record of a generation up to `synced` is fsynced; the
/// fsync of those up to `failed` failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Progress {
    synced: u64,
    failed: u64,
}

struct Writer {
    /// The segment records go to; `None` until the first record after a rotation (or a
    /// failed write).
    file: Option<Arc<File>>,
    /// The number of the current segment (created or to create).
    segment: u64,
    /// The lowest segment number that may still exist.
    oldest: u64,
    /// The generation of the last record written.
    written: u64,
    /// Sealed segments not yet fsynced (`each` only).
    unsynced: Vec<Arc<File>>,
    /// Whether a segment was created since the folder's last fsync.
    dir_dirty: bool,
}

struct SyncState {
    /// The highest generation a request waits to see fsynced.
    wanted: u64,
    stop: bool,
}

struct Inner {
    dir: PathBuf,
    writer: Mutex<Writer>,
    sync: Mutex<SyncState>,
    ready: Condvar,
    progress: watch::Sender<Progress>,
    /// Test seam: every write fails while set (a full disk).
    refuse: AtomicBool,
}

/// The alert journal (see the module docs).
pub(crate) struct Journal {
    inner: Arc<Inner>,
    each: bool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Opens the journal in folder `dir` (created when missing), appending after its existing
    /// segments; with `each`, starts the sync thread.
    ///
    /// # Errors
    /// The folder cannot be created or listed, or the thread cannot be started.
    pub(crate) fn open(dir: PathBuf, each: bool) -> std::io::Result<Journal> {
        std::fs::create_dir_all(&dir)?;
        let existing = segments(&dir)?;
        let oldest = existing.first().map_or(1, |(n, _)| *n);
        let segment = existing.last().map_or(1, |(n, _)| n.saturating_add(1));
        let inner = Arc::new(Inner {
            dir,
            writer: Mutex::new(Writer {
                file: None,
                segment,
                oldest,
                written: 0,
                unsynced: Vec::new(),
                dir_dirty: false,
            }),
            sync: Mutex::new(SyncState {
                wanted: 0,
                stop: false,
            }),
            ready: Condvar::new(),
            progress: watch::Sender::new(Progress::default()),
            refuse: AtomicBool::new(false),
        });
        let thread = if each {
            let worker = inner.clone();
            Some(
                std::thread::Builder::new()
                    .name("vnfm-alert-fsync".into())
                    .spawn(move || worker.run())?,
            )
        } else {
            None
        };
        Ok(Journal {
            inner,
            each,
            thread: Mutex::new(thread),
        })
    }

    /// Appends `lines` (complete records, each ending in a newline) of change `generation`:
    /// [`Journal::slot`], then [`Slot::append`].
    ///
    /// # Errors
    /// As [`Slot::append`].
    #[cfg(test)]
    pub(crate) fn append(&self, generation: u64, lines: &[u8]) -> std::io::Result<()> {
        self.slot().append(generation, lines)
    }

    /// The right to append the next records. Take it under the alert lock, right after the
    /// change's generation (so that records are written in generation order, and a rotation,
    /// which waits for it, never passes a record of a change its snapshot covers), then
    /// release the lock and [`Slot::append`]: the encoding and the `write(2)` do not hold up
    /// the next alert's judgement.
    pub(crate) fn slot(&self) -> Slot<'_> {
        Slot {
            journal: self,
            writer: self.inner.writer(),
        }
    }

    /// Whether [`Journal::sync`] waits for an fsync (`each`), or returns at once.
    pub(crate) fn syncs(&self) -> bool {
        self.each
    }

    /// Waits until the records of `generation` are fsynced (`each`): `true`, or their fsync
    /// failed: `false`. Under `periodic`, `true` at once: the records are in the OS.
    pub(crate) async fn sync(&self, generation: u64) -> bool {
        if !self.each {
            return true;
        }
        let mut rx = self.inner.progress.subscribe();
        {
            let mut s = self.inner.sync_state();
            s.wanted = s.wanted.max(generation);
            self.inner.ready.notify_one();
        }
        loop {
            let p = *rx.borrow_and_update();
            if p.synced >= generation {
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

    /// Starts a new segment for the records that follow; returns the highest segment number
    /// that holds records written before (call it under the alert lock, where the snapshot
    /// that covers them is taken).
    pub(crate) fn rotate(&self) -> u64 {
        let mut w = self.inner.writer();
        w.seal(self.each);
        w.segment.saturating_sub(1)
    }

    /// Removes the segments up to `through` (their records are in a committed snapshot).
    /// A segment that cannot be removed is tried again at the next call (its records are
    /// covered by the snapshot's generation: replaying it changes nothing).
    pub(crate) fn remove_through(&self, through: u64) {
        let from = self.inner.writer().oldest;
        let mut next = from;
        for n in from..=through {
            let path = self.inner.dir.join(segment_name(n));
            match std::fs::remove_file(&path) {
                Ok(()) => next = n + 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => next = n + 1,
                Err(e) => {
                    tracing::warn!(
                        "cannot remove the alert journal segment {}: {e}",
                        path.display()
                    );
                    break;
                }
            }
        }
        let mut w = self.inner.writer();
        w.oldest = w.oldest.max(next);
    }

    /// Test seam: while `refuse` is set, every write fails as on a full disk.
    pub(crate) fn refuse_writes(&self, refuse: bool) {
        self.inner.refuse.store(refuse, Ordering::Relaxed);
    }

    /// Stops the sync thread, and waits for it.
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

/// The right to append the next records of the journal ([`Journal::slot`]).
pub(crate) struct Slot<'a> {
    journal: &'a Journal,
    writer: std::sync::MutexGuard<'a, Writer>,
}

impl Slot<'_> {
    /// Appends `lines` (complete records, each ending in a newline) of change `generation`:
    /// one `write(2)`. Once it returns the records are in the OS.
    ///
    /// # Errors
    /// The segment cannot be created or written (its segment is sealed then: the next record
    /// starts a new one).
    pub(crate) fn append(mut self, generation: u64, lines: &[u8]) -> std::io::Result<()> {
        let each = self.journal.each;
        let inner = &self.journal.inner;
        let w = &mut *self.writer;
        if inner.refuse.load(Ordering::Relaxed) {
            w.seal(each);
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "no space left on device (refused by a test)",
            ));
        }
        let file = match &w.file {
            Some(f) => f.clone(),
            None => {
                let path = inner.dir.join(segment_name(w.segment));
                let f = match open_segment(&path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        // The folder went away: made again.
                        std::fs::create_dir_all(&inner.dir)?;
                        open_segment(&path)?
                    }
                    r => r?,
                };
                let f = Arc::new(f);
                w.file = Some(f.clone());
                w.dir_dirty = true;
                f
            }
        };
        match (&*file).write_all(lines) {
            Ok(()) => {
                w.written = w.written.max(generation);
                Ok(())
            }
            Err(e) => {
                // Sealed: a partial line may end it; the next record starts a new segment.
                w.seal(each);
                Err(e)
            }
        }
    }
}

fn open_segment(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.inner.stop();
    }
}

impl Writer {
    /// Closes the current segment (kept for the next fsync under `each`); the next record
    /// opens a new one.
    fn seal(&mut self, each: bool) {
        if let Some(f) = self.file.take() {
            if each {
                self.unsynced.push(f);
            }
            self.segment = self.segment.saturating_add(1);
        }
    }
}

impl Inner {
    fn writer(&self) -> std::sync::MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sync_state(&self) -> std::sync::MutexGuard<'_, SyncState> {
        self.sync.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stop(&self) {
        self.sync_state().stop = true;
        self.ready.notify_one();
    }

    /// The sync thread: whenever a request waits, one `fdatasync` of every segment written
    /// so far (and of the folder after a new segment) answers every request waiting then.
    fn run(&self) {
        loop {
            {
                let mut s = self.sync_state();
                let done = |p: Progress| p.synced.max(p.failed);
                while s.wanted <= done(*self.progress.borrow()) && !s.stop {
                    s = self.ready.wait(s).unwrap_or_else(PoisonError::into_inner);
                }
                if s.stop {
                    return;
                }
            }
            let (target, files, dir_dirty) = {
                let mut w = self.writer();
                let mut files = std::mem::take(&mut w.unsynced);
                files.extend(w.file.clone());
                (w.written, files, std::mem::take(&mut w.dir_dirty))
            };
            let mut result = files.iter().try_for_each(|f| f.sync_data());
            if result.is_ok() && dir_dirty {
                result = File::open(&self.dir).and_then(|d| d.sync_all());
            }
            match result {
                Ok(()) => self
                    .progress
                    .send_modify(|p| p.synced = p.synced.max(target)),
                Err(e) => {
                    tracing::warn!("cannot fsync the alert journal {}: {e}", self.dir.display());
                    {
                        // Tried again with the next request's fsync.
                        let mut w = self.writer();
                        w.unsynced.extend(files);
                        w.dir_dirty |= dir_dirty;
                    }
                    let wanted = self.sync_state().wanted;
                    self.progress
                        .send_modify(|p| p.failed = p.failed.max(wanted.max(target)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn line(generation: u64, n: u32) -> Vec<u8> {
        format!("{generation} {{\"n\":{n}}}\n").into_bytes()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_are_read_back_in_order_across_segments() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = dir_of(&tmp.path().join("state.sqlite"));
        assert!(dir.ends_with("state.sqlite-alerts"));
        for each in [false, true] {
            let j = Journal::open(dir.clone(), each).unwrap();
            j.append(1, &line(1, 0)).unwrap();
            j.append(2, &[line(2, 0), line(2, 1)].concat()).unwrap();
            assert!(j.sync(2).await);
            let sealed = j.rotate();
            j.append(3, &line(3, 0)).unwrap();
            assert!(j.sync(3).await);
            let got: Vec<u64> = read_dir(&dir).unwrap().iter().map(|r| r.0).collect();
            assert_eq!(got, [1, 2, 2, 3]);
            j.remove_through(sealed);
            let got: Vec<u64> = read_dir(&dir).unwrap().iter().map(|r| r.0).collect();
            assert_eq!(got, [3], "the rotated segments are gone");

            // A failed write seals its segment; the cut line is skipped, the next record
            // goes to a new segment.
            j.refuse_writes(true);
            assert!(j.append(4, &line(4, 0)).is_err());
            j.refuse_writes(false);
            let current = segments(&dir).unwrap().last().unwrap().1.clone();
            std::fs::OpenOptions::new()
                .append(true)
                .open(&current)
                .unwrap()
                .write_all(b"5 {\"cut")
                .unwrap();
            j.append(6, &line(6, 0)).unwrap();
            let got: Vec<u64> = read_dir(&dir).unwrap().iter().map(|r| r.0).collect();
            assert_eq!(got, [3, 6]);
            j.stop().await;
            clear_dir(&dir).unwrap();
            assert!(read_dir(&dir).unwrap().is_empty());
        }
    }

    #[test]
    fn a_damaged_line_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("j");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(segment_name(3)), "1 {}\nx {}\n").unwrap();
        std::fs::write(dir.join("notes.txt"), "not a segment").unwrap();
        let e = read_dir(&dir).unwrap_err();
        assert!(
            e.contains("00000000000000000003.jsonl line 2: the generation is not a number"),
            "{e}"
        );
    }
}
