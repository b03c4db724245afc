//! The persistent store: VNF instances and LCM operation occurrences in one SQLite file.
//!
//! [`SqliteStore`] implements [`Store`] with the same behaviour as
//! [`vnfm_core::store::MemoryStore`] (both pass `vnfm_core::store::conformance`).
//!
//! ## Schema
//! Each object is kept as the serde JSON of its SOL003 form in a `body` column, beside the
//! columns the store queries on:
//!
//! ```text
//! vnf_instances(id TEXT PRIMARY KEY, body TEXT NOT NULL,
//!               version INTEGER NOT NULL,      -- +1 per put: conditional commits
//!               name TEXT)                     -- vnfInstanceName, indexed with id
//! vnf_lcm_op_occs(id TEXT PRIMARY KEY,
//!                 vnf_instance_id TEXT NOT NULL REFERENCES vnf_instances ON DELETE CASCADE,
//!                 start_time TEXT NOT NULL,   -- RFC 3339, UTC, nanoseconds: sorts as text
//!                 body TEXT NOT NULL, version INTEGER NOT NULL)
//! ```
//!
//! The schema evolves by migrations: a list of SQL scripts applied in order when a file is
//! opened, each in its own transaction together with the new version number, which is kept
//! in `PRAGMA user_version` ([`SCHEMA_VERSION`] is the version this build writes). The file is
//! marked as vnfm's with `PRAGMA application_id`; a file that is not marked is refused (an
//! existing file of 0 bytes too: vnfm creates the file when it does not exist, and a file
//! truncated to nothing is not an empty state), and so is a file whose version is newer than
//! this build knows.
//!
//! ## Concurrency
//! Files are opened in WAL mode with a busy timeout and foreign keys on. Each batch is one
//! `BEGIN IMMEDIATE` transaction, so several processes (or several [`SqliteStore`]s on one
//! file) can commit concurrently. The blocking SQLite calls run on tokio's blocking pool
//! (`spawn_blocking`) when called inside a tokio runtime, and on the calling thread
//! otherwise. Inside a runtime a call waits for its connection's turn (asynchronously, in call
//! order) before it goes to the pool, so one connection never holds more than one of the
//! pool's threads: work that makes many calls ([`SqliteStore::reopen`] gives it a connection
//! of its own) does not delay the calls of another connection. Each connection counts its
//! reads and write transactions ([`SqliteStore::calls`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::SecondsFormat;
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, TransactionBehavior};
use vnfm_core::driver::{
    DriverError, InstanceQuery, OpOccFilter, Precondition, Store, StoreBatch, Version, Versioned,
};
use vnfm_core::id::{OpOccId, VnfInstanceId};
use vnfm_core::lcm::{VnfInstance, VnfLcmOpOcc};
use vnfm_core::store::unknown_instance_message;

const DRIVER: &str = "sqlite";

/// `PRAGMA application_id` of a vnfm state file (`VNFM` in ASCII).
const APPLICATION_ID: i32 = 0x564E_464D;

/// How long a writer waits for another writer's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The migrations, in order: script `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: instances and operation occurrences.
    "CREATE TABLE vnf_instances (
        id   TEXT PRIMARY KEY NOT NULL,
        body TEXT NOT NULL CHECK (json_valid(body))
    );
    CREATE TABLE vnf_lcm_op_occs (
        id              TEXT PRIMARY KEY NOT NULL,
        vnf_instance_id TEXT NOT NULL REFERENCES vnf_instances (id) ON DELETE CASCADE,
        start_time      TEXT NOT NULL,
        body            TEXT NOT NULL CHECK (json_valid(body))
    );
    CREATE INDEX vnf_lcm_op_occs_by_instance
        ON vnf_lcm_op_occs (vnf_instance_id, start_time, id);
    CREATE INDEX vnf_lcm_op_occs_by_start_time ON vnf_lcm_op_occs (start_time, id);",
    // 2: named documents of the CLI (e.g. the simulated cloud's state between runs).
    "CREATE TABLE documents (
        name TEXT PRIMARY KEY NOT NULL,
        body TEXT NOT NULL
    );",
    // 3: versions for conditional commits (one LCM operation per instance across processes).
    "ALTER TABLE vnf_instances ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE vnf_lcm_op_occs ADD COLUMN version INTEGER NOT NULL DEFAULT 1;",
    // 4: the instance's `vnfInstanceName`, indexed: `filter=(eq,vnfInstanceName,…)` answered
    // from the index (`Store::instance_page`).
    "ALTER TABLE vnf_instances ADD COLUMN name TEXT;
    UPDATE vnf_instances SET name = json_extract(body, '$.vnfInstanceName');
    CREATE INDEX vnf_instances_by_name ON vnf_instances (name, id);",
];

/// The schema version this build creates and understands (`PRAGMA user_version`).
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// A [`Store`] in an SQLite file (or in memory). Clones share the same connection.
///
/// ```
/// use vnfm_cli::store::{SqliteStore, SCHEMA_VERSION};
/// use vnfm_core::driver::{Store, StoreBatch};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = SqliteStore::open_in_memory()?;
/// assert_eq!(store.schema_version(), SCHEMA_VERSION);
/// store.commit(StoreBatch::new()).await?;
/// assert!(store.instances().await?.is_empty());
/// # Ok::<(), vnfm_core::driver::DriverError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    /// The connection's turn: a call inside a tokio runtime takes it (waiting asynchronously,
    /// in call order) before it goes to the blocking pool, so that one connection has at
    /// most one call there. Without it, a thousand calls queued on one connection would hold
    /// the pool's threads (each waiting for the connection) and every other connection's
    /// calls would queue behind them in the pool.
    turn: Arc<tokio::sync::Semaphore>,
    /// The calls made on the connection.
    calls: Arc<Counts>,
    /// The file as shown in messages (`:memory:` for an in-memory database).
    file: Arc<str>,
    path: Option<PathBuf>,
    schema_version: u32,
}

/// The calls made on one connection of a [`SqliteStore`] since it was opened: clones share
/// the connection and its counts; [`SqliteStore::reopen`] opens another connection, with its
/// own. `vnfm serve` shows them in `/metrics` (`vnfm_state_calls_total`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreCalls {
    /// Reads: one query (an instance, the occurrences, a batch of documents, ...).
    pub reads: u64,
    /// Writes: one transaction each (a commit with its notifications, a batch of documents
    /// written or deleted, a counter).
    pub writes: u64,
}

/// Whether a call reads or writes (what [`StoreCalls`] counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// The counts behind [`StoreCalls`].
#[derive(Debug, Default)]
struct Counts {
    reads: AtomicU64,
    writes: AtomicU64,
}

impl Counts {
    fn count(&self, access: Access) {
        match access {
            Access::Read => &self.reads,
            Access::Write => &self.writes,
        }
        .fetch_add(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("file", &self.file)
            .field("schema_version", &self.schema_version)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens the state file at `path`, creating it when it does not exist and migrating its
    /// schema to [`SCHEMA_VERSION`]. This blocks on file IO.
    ///
    /// # Errors
    /// [`DriverError::Other`] naming the file when it cannot be opened (missing directory,
    /// no permission), when it is not a vnfm state database (not SQLite, or another
    /// program's SQLite file), when its schema version is newer than [`SCHEMA_VERSION`], or
    /// when a migration fails (the file is then left at the last version that succeeded).
    /// [`DriverError::Unavailable`] when another writer holds the file longer than the busy
    /// timeout.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, DriverError> {
        let path = path.as_ref();
        let file: Arc<str> = Arc::from(path.display().to_string());
        // A file of 0 bytes was not written by vnfm (it writes the header when it creates
        // one): a state file truncated to nothing (a full disk, a bad copy) would otherwise
        // start silently with an empty state.
        if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
            return Err(DriverError::Other {
                driver: DRIVER,
                message: format!(
                    "{file}: the state file is empty (0 bytes): not a vnfm state database, \
                     maybe truncated; expected an SQLite file written by vnfm. Restore it from \
                     a backup, or remove it to start with an empty state (vnfm creates the \
                     file when it does not exist)"
                ),
                source: None,
            });
        }
        let conn = Connection::open(path).map_err(|e| {
            sql_error(
                &file,
                "cannot open the state file (expected a readable and writable file in an \
                 existing directory)",
                e,
            )
        })?;
        Self::setup(conn, file, Some(path.to_path_buf()), MIGRATIONS)
    }

    /// Opens a fresh in-memory database with the current schema; it disappears with the last
    /// clone of the store.
    ///
    /// # Errors
    /// [`DriverError::Other`] when SQLite cannot allocate the database or create the schema.
    pub fn open_in_memory() -> Result<Self, DriverError> {
        let file: Arc<str> = Arc::from(":memory:");
        let conn = Connection::open_in_memory()
            .map_err(|e| sql_error(&file, "cannot open an in-memory database", e))?;
        Self::setup(conn, file, None, MIGRATIONS)
    }

    /// The schema version of the open database (after migration: [`SCHEMA_VERSION`]).
    pub fn schema_version(&self) -> u32 {
        self.schema_version
    }

    /// The file, or `None` for an in-memory database.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The reads and write transactions made on this store's connection so far (shared with
    /// its clones).
    pub fn calls(&self) -> StoreCalls {
        StoreCalls {
            reads: self.calls.reads.load(Ordering::Relaxed),
            writes: self.calls.writes.load(Ordering::Relaxed),
        }
    }

    fn setup(
        mut conn: Connection,
        file: Arc<str>,
        path: Option<PathBuf>,
        migrations: &[&str],
    ) -> Result<Self, DriverError> {
        let known = version_of(migrations.len());
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| sql_error(&file, "cannot set the busy timeout", e))?;
        // Identify the file before writing anything to it (WAL mode writes the header).
        let version = identify(&conn, &file)?;
        if version > known {
            return Err(too_new(&file, version, known));
        }
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
            .map_err(|e| sql_error(&file, "cannot switch to WAL journal mode", e))?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(|e| sql_error(&file, "cannot enable foreign keys", e))?;
        // Every commit is durable unless a write asks otherwise (`Flush::Deferred`).
        set_synchronous(&conn, &file, "FULL")?;
        let schema_version = migrate(&mut conn, &file, migrations)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            turn: Arc::new(tokio::sync::Semaphore::new(1)),
            calls: Arc::default(),
            file,
            path,
            schema_version,
        })
    }

    /// The document stored under `name`, if any (the CLI keeps the simulated cloud's state
    /// here between runs).
    ///
    /// # Errors
    /// [`DriverError::Other`] when the database cannot be read.
    pub async fn document(&self, name: &str) -> Result<Option<String>, DriverError> {
        let name = name.to_owned();
        self.with_conn(Access::Read, move |conn, file| {
            conn.query_row("SELECT body FROM documents WHERE name = ?1", [&name], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| sql_error(file, format!("reading document {name}"), e))
        })
        .await
    }

    /// Stores `body` under `name`, replacing what was there.
    ///
    /// # Errors
    /// [`DriverError::Other`] when the database cannot be written.
    pub async fn put_document(&self, name: &str, body: String) -> Result<(), DriverError> {
        self.write_documents(vec![(name.to_owned(), body)], None, Flush::Commit)
            .await
    }

    /// In one transaction: stores every `(name, body)` of `put` (replacing what was there),
    /// then deletes the documents whose names start with `prune.0` and sort at or before
    /// `prune.1`. The server's alert journal appends entries and folds them into a snapshot
    /// this way. `flush` says when the transaction reaches the disk (every other write of
    /// the store is [`Flush::Commit`]).
    ///
    /// # Errors
    /// [`DriverError::Other`] when the database cannot be written (nothing is written then).
    pub async fn write_documents(
        &self,
        put: Vec<(String, String)>,
        prune: Option<(String, String)>,
        flush: Flush,
    ) -> Result<(), DriverError> {
        self.with_conn(Access::Write, move |conn, file| {
            write_documents_tx(conn, file, &put, prune.as_ref(), flush)
        })
        .await
    }

    /// [`SqliteStore::write_documents`] on the calling thread, for a thread of its own
    /// outside the async runtime (it blocks on file IO).
    ///
    /// # Errors
    /// As [`SqliteStore::write_documents`].
    pub fn write_documents_blocking(
        &self,
        put: &[(String, String)],
        prune: Option<&(String, String)>,
        flush: Flush,
    ) -> Result<(), DriverError> {
        self.calls.count(Access::Write);
        let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        write_documents_tx(&mut conn, &self.file, put, prune, flush)
    }

    /// A second connection to the same state file, with its own turn and counts, for work
    /// that should not queue behind this connection's calls (or make them queue behind it):
    /// readers of the two connections do not wait for each other (WAL), and their writers take
    /// turns on the file (SQLite's busy timeout covers the waits). An in-memory store answers
    /// itself (a clone: the same connection).
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub fn reopen(&self) -> Result<Self, DriverError> {
        match &self.path {
            Some(p) => Self::open(p),
            None => Ok(self.clone()),
        }
    }

    /// The documents whose names start with `prefix`, in name order.
    ///
    /// # Errors
    /// [`DriverError::Other`] when the database cannot be read.
    pub async fn documents_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let prefix = prefix.to_owned();
        self.with_conn(Access::Read, move |conn, file| {
            let read = |e| sql_error(file, format!("reading documents {prefix}*"), e);
            let mut st = conn
                .prepare_cached(
                    "SELECT name, body FROM documents
                     WHERE name >= ?1 AND substr(name, 1, length(?1)) = ?1 ORDER BY name",
                )
                .map_err(read)?;
            let rows = st
                .query_map([&prefix], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(read)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(read)
        })
        .await
    }

    /// At most `limit` documents whose names start with `prefix` and sort after `after` (all
    /// of them when `None`), in name order: a long queue read in bounded batches.
    ///
    /// # Errors
    /// [`DriverError::Other`] when the database cannot be read.
    pub async fn documents_after(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let prefix = prefix.to_owned();
        let after = after.unwrap_or("").to_owned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with_conn(Access::Read, move |conn, file| {
            let read = |e| sql_error(file, format!("reading documents {prefix}*"), e);
            let mut st = conn
                .prepare_cached(
                    "SELECT name, body FROM documents
                     WHERE name >= ?1 AND name > ?2 AND substr(name, 1, length(?1)) = ?1
                     ORDER BY name LIMIT ?3",
                )
                .map_err(read)?;
            let rows = st
                .query_map(params![prefix, after, limit], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .map_err(read)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(read)
        })
        .await
    }

    /// The names and sizes (bytes) of the documents whose names start with `prefix`, in name
    /// order, without their bodies.
    ///
    /// # Errors
    /// [`DriverError::Other`] when the database cannot be read.
    pub async fn document_sizes_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, usize)>, DriverError> {
        let prefix = prefix.to_owned();
        self.with_conn(Access::Read, move |conn, file| {
            let read = |e| sql_error(file, format!("reading documents {prefix}*"), e);
            let mut st = conn
                .prepare_cached(
                    "SELECT name, length(CAST(body AS BLOB)) FROM documents
                     WHERE name >= ?1 AND substr(name, 1, length(?1)) = ?1 ORDER BY name",
                )
                .map_err(read)?;
            let rows = st
                .query_map([&prefix], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
                })
                .map_err(read)?;
            rows.map(|r| r.map(|(n, l)| (n, usize::try_from(l).unwrap_or(0))))
                .collect::<Result<Vec<_>, _>>()
                .map_err(read)
        })
        .await
    }

    /// Deletes the documents `names` in one transaction, without waiting for the disk
    /// ([`Flush::Deferred`]): delivered notifications leave the outbox this way, many at once.
    ///
    /// # Errors
    /// [`DriverError::Other`] when the database cannot be written (nothing is deleted then).
    pub async fn delete_documents(&self, names: Vec<String>) -> Result<(), DriverError> {
        self.with_conn(Access::Write, move |conn, file| {
            set_synchronous(conn, file, "NORMAL")?;
            let deleted = (|| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(|e| sql_error(file, "starting a transaction", e))?;
                {
                    let mut st = tx
                        .prepare_cached("DELETE FROM documents WHERE name = ?1")
                        .map_err(|e| sql_error(file, "preparing a document delete", e))?;
                    for n in &names {
                        st.execute([n])
                            .map_err(|e| sql_error(file, format!("deleting document {n}"), e))?;
                    }
                }
                tx.commit()
                    .map_err(|e| sql_error(file, "committing document deletes", e))
            })();
            let reset = set_synchronous(conn, file, "FULL");
            deleted.and(reset)
        })
        .await
    }

    /// Adds one to the counter kept as the document `name` (created at 1) and returns the new
    /// value, in one statement: two processes on the same file never get the same value. A
    /// body that is not a number counts as 0.
    ///
    /// # Errors
    /// [`DriverError::Other`] when the database cannot be written.
    pub async fn increment_counter(&self, name: &str) -> Result<u64, DriverError> {
        let name = name.to_owned();
        self.with_conn(Access::Write, move |conn, file| {
            let body: String = conn
                .query_row(
                    "INSERT INTO documents (name, body) VALUES (?1, '1')
                     ON CONFLICT (name) DO UPDATE
                         SET body = CAST(CAST(body AS INTEGER) + 1 AS TEXT)
                     RETURNING body",
                    [&name],
                    |r| r.get(0),
                )
                .map_err(|e| sql_error(file, format!("incrementing counter {name}"), e))?;
            body.parse().map_err(|_| DriverError::Other {
                driver: DRIVER,
                message: format!("{file}: counter {name} holds {body:?}, not a count"),
                source: None,
            })
        })
        .await
    }

    /// SQLite's `PRAGMA data_version` of this store's connection: it changes when another
    /// connection (another `vnfm` process) commits to the file, never for this store's own
    /// writes. A long-running server compares it to tell when to re-read a document.
    ///
    /// # Errors
    /// [`DriverError::Other`] when the database cannot be read.
    pub async fn data_version(&self) -> Result<i64, DriverError> {
        self.with_conn(Access::Read, |conn, file| {
            conn.query_row("PRAGMA data_version", [], |r| r.get(0))
                .map_err(|e| sql_error(file, "reading PRAGMA data_version", e))
        })
        .await
    }

    /// Runs `f` with the connection (counted as `access`): on tokio's blocking pool inside a
    /// runtime, once it is this call's turn on the connection; on this thread otherwise.
    async fn with_conn<T, F>(&self, access: Access, f: F) -> Result<T, DriverError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &str) -> Result<T, DriverError> + Send + 'static,
    {
        self.calls.count(access);
        let conn = Arc::clone(&self.conn);
        let file = Arc::clone(&self.file);
        let job = move || {
            // A panic cannot happen half-way through a write that is not rolled back: the
            // transaction guard rolls back on unwind, so a poisoned lock guards a sound
            // connection.
            let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut conn, &file)
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return job();
        }
        let turn =
            Arc::clone(&self.turn)
                .acquire_owned()
                .await
                .map_err(|e| DriverError::Other {
                    driver: DRIVER,
                    message: format!("{}: the store's connection is closed", self.file),
                    source: Some(Box::new(e)),
                })?;
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            job()
        })
        .await
        .map_err(|e| DriverError::Other {
            driver: DRIVER,
            message: format!("{}: the store's blocking task failed", self.file),
            source: Some(Box::new(e)),
        })?
    }
}

/// [`SqliteStore::write_documents`] on `conn`.
fn write_documents_tx(
    conn: &mut Connection,
    file: &str,
    put: &[(String, String)],
    prune: Option<&(String, String)>,
    flush: Flush,
) -> Result<(), DriverError> {
    if flush == Flush::Deferred {
        set_synchronous(conn, file, "NORMAL")?;
    }
    let written = documents_tx(conn, file, put, prune);
    if flush == Flush::Deferred {
        // Back to the store's default even when the write failed; the write's own error
        // comes first.
        let reset = set_synchronous(conn, file, "FULL");
        return written.and(reset);
    }
    written
}

/// The transaction of [`write_documents_tx`].
fn documents_tx(
    conn: &mut Connection,
    file: &str,
    put: &[(String, String)],
    prune: Option<&(String, String)>,
) -> Result<(), DriverError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sql_error(file, "starting a transaction", e))?;
    {
        let mut st = tx
            .prepare_cached(
                "INSERT INTO documents (name, body) VALUES (?1, ?2)
                         ON CONFLICT (name) DO UPDATE SET body = excluded.body",
            )
            .map_err(|e| sql_error(file, "preparing a document write", e))?;
        for (name, body) in put {
            st.execute(params![name, body])
                .map_err(|e| sql_error(file, format!("writing document {name}"), e))?;
        }
    }
    if let Some((prefix, upto)) = prune {
        tx.execute(
            "DELETE FROM documents
             WHERE name >= ?1 AND name <= ?2 AND substr(name, 1, length(?1)) = ?1",
            params![prefix, upto],
        )
        .map_err(|e| sql_error(file, format!("deleting documents {prefix}*"), e))?;
    }
    tx.commit()
        .map_err(|e| sql_error(file, "committing documents", e))
}

/// Sets `PRAGMA synchronous` of the connection (outside a transaction).
fn set_synchronous(conn: &Connection, file: &str, level: &str) -> Result<(), DriverError> {
    conn.pragma_update(None, "synchronous", level)
        .map_err(|e| sql_error(file, format!("cannot set PRAGMA synchronous = {level}"), e))
}

/// When a write of [`SqliteStore::write_documents`] reaches the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// The commit returns after an fsync (SQLite's `synchronous = FULL`, the store's default):
    /// the write survives a power loss or an OS crash.
    Commit,
    /// The commit returns without an fsync (`synchronous = NORMAL` in WAL mode): the write
    /// survives a crash or a kill of the process at once, and a power loss or an OS crash
    /// once a later [`Flush::Commit`] write (or a checkpoint) has synced the WAL. The
    /// database stays consistent either way.
    Deferred,
}

#[async_trait]
impl Store for SqliteStore {
    async fn commit(&self, batch: StoreBatch) -> Result<(), DriverError> {
        self.with_conn(Access::Write, move |conn, file| {
            let (documents, prune) = (&batch.documents, &batch.prune_documents);
            commit(conn, file, &batch, documents, prune)
        })
        .await
    }

    async fn instance(&self, id: &VnfInstanceId) -> Result<VnfInstance, DriverError> {
        self.instance_entry(id).await.map(|e| e.value)
    }

    async fn instance_entry(
        &self,
        id: &VnfInstanceId,
    ) -> Result<Versioned<VnfInstance>, DriverError> {
        let id = id.clone();
        self.with_conn(Access::Read, move |conn, file| {
            let row: Option<(String, i64)> = conn
                .query_row(
                    "SELECT body, version FROM vnf_instances WHERE id = ?1",
                    [id.as_str()],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(|e| sql_error(file, format!("cannot load VNF instance {id}"), e))?;
            match row {
                Some((body, version)) => Ok(Versioned {
                    value: decode(file, &INSTANCES, id.as_str(), &body)?,
                    version: to_version(version),
                }),
                None => Err(DriverError::NotFound {
                    driver: DRIVER,
                    what: format!("VNF instance {id}"),
                }),
            }
        })
        .await
    }

    async fn instances(&self) -> Result<Vec<VnfInstance>, DriverError> {
        self.with_conn(Access::Read, |conn, file| {
            query_bodies(
                conn,
                file,
                &INSTANCES,
                "SELECT id, body FROM vnf_instances ORDER BY id",
                &[],
            )
        })
        .await
    }

    async fn instance_page(&self, query: &InstanceQuery) -> Result<Vec<VnfInstance>, DriverError> {
        if query.ids.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        // One query per name (a range of the index `(name, id)`, in id order: a page of a name
        // that many instances have costs a page too), merged by id.
        let names: Option<Vec<String>> = query.names.as_ref().map(|names| {
            let set: std::collections::BTreeSet<&String> = names.iter().collect();
            set.into_iter().cloned().collect()
        });
        let limit = query.limit;
        let query = query.clone();
        self.with_conn(Access::Read, move |conn, file| {
            let run = |name: Option<&str>| {
                let (sql, args) = instance_page_sql(&query, name);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                query_bodies::<VnfInstance>(conn, file, &INSTANCES, &sql, &args)
            };
            let Some(names) = names else {
                return run(None);
            };
            let mut out = Vec::new();
            for name in &names {
                out.extend(run(Some(name))?);
            }
            out.sort_by(|a, b| a.id.cmp(&b.id));
            out.truncate(limit);
            Ok(out)
        })
        .await
    }

    async fn op_occ(&self, id: &OpOccId) -> Result<VnfLcmOpOcc, DriverError> {
        self.op_occ_entry(id).await.map(|e| e.value)
    }

    async fn op_occ_entry(&self, id: &OpOccId) -> Result<Versioned<VnfLcmOpOcc>, DriverError> {
        let id = id.clone();
        self.with_conn(Access::Read, move |conn, file| {
            let row: Option<(String, i64)> = conn
                .query_row(
                    "SELECT body, version FROM vnf_lcm_op_occs WHERE id = ?1",
                    [id.as_str()],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(|e| {
                    sql_error(
                        file,
                        format!("cannot load VNF LCM operation occurrence {id}"),
                        e,
                    )
                })?;
            match row {
                Some((body, version)) => Ok(Versioned {
                    value: decode(file, &OP_OCCS, id.as_str(), &body)?,
                    version: to_version(version),
                }),
                None => Err(DriverError::NotFound {
                    driver: DRIVER,
                    what: format!("VNF LCM operation occurrence {id}"),
                }),
            }
        })
        .await
    }

    async fn op_occs(&self, filter: OpOccFilter) -> Result<Vec<VnfLcmOpOcc>, DriverError> {
        self.with_conn(Access::Read, move |conn, file| {
            match &filter.vnf_instance_id {
                Some(id) => query_bodies(
                    conn,
                    file,
                    &OP_OCCS,
                    "SELECT id, body FROM vnf_lcm_op_occs WHERE vnf_instance_id = ?1 \
                 ORDER BY start_time, id",
                    &[id.as_str()],
                ),
                None => query_bodies(
                    conn,
                    file,
                    &OP_OCCS,
                    "SELECT id, body FROM vnf_lcm_op_occs ORDER BY start_time, id",
                    &[],
                ),
            }
        })
        .await
    }
}

/// The keyset query of [`Store::instance_page`] and its arguments, for the instances named
/// `name` when it is given (the query's own `names` are the caller's: one query per name).
/// The id's primary key serves the pages, the index `vnf_instances_by_name` a name; the limit
/// is written in the text (a number).
fn instance_page_sql(query: &InstanceQuery, name: Option<&str>) -> (String, Vec<String>) {
    let mut conds = Vec::new();
    let mut args = Vec::new();
    if let Some(name) = name {
        args.push(name.to_owned());
        conds.push("name = ?1".to_owned());
    }
    if let Some(after) = &query.after {
        args.push(after.as_str().to_owned());
        conds.push(format!("id > ?{}", args.len()));
    }
    if let Some(ids) = &query.ids {
        let first = args.len() + 1;
        args.extend(ids.iter().map(|i| i.as_str().to_owned()));
        let marks: Vec<String> = (first..=args.len()).map(|i| format!("?{i}")).collect();
        conds.push(format!("id IN ({})", marks.join(", ")));
    }
    let filter = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    let order = if name.is_some() { "name, id" } else { "id" };
    let sql = format!(
        "SELECT id, body FROM vnf_instances{filter} ORDER BY {order} LIMIT {}",
        query.limit.min(i64::MAX as usize)
    );
    (sql, args)
}

/// A table and the SOL003 type its bodies hold, for messages.
struct Table {
    name: &'static str,
    kind: &'static str,
}

const INSTANCES: Table = Table {
    name: "vnf_instances",
    kind: "VnfInstance",
};

const OP_OCCS: Table = Table {
    name: "vnf_lcm_op_occs",
    kind: "VnfLcmOpOcc",
};

fn version_of(migrations: usize) -> u32 {
    u32::try_from(migrations).unwrap_or(u32::MAX)
}

/// Checks that the file is empty or a vnfm state database and returns its schema version.
fn identify(conn: &Connection, file: &str) -> Result<u32, DriverError> {
    let reading = "cannot read the database header";
    let application_id: i32 = conn
        .pragma_query_value(None, "application_id", |row| row.get(0))
        .map_err(|e| sql_error(file, reading, e))?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|e| sql_error(file, reading, e))?;
    let objects: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))
        .map_err(|e| sql_error(file, "cannot read the database schema", e))?;
    let fresh = application_id == 0 && version == 0 && objects == 0;
    if application_id != APPLICATION_ID && !fresh {
        return Err(DriverError::Other {
            driver: DRIVER,
            message: format!(
                "{file}: not a vnfm state database: it is an SQLite database with \
                 application_id {application_id:#x}, user_version {version} and {objects} \
                 schema objects (expected an empty file or one with application_id \
                 {APPLICATION_ID:#x} written by vnfm)"
            ),
            source: None,
        });
    }
    u32::try_from(version).map_err(|_| DriverError::Other {
        driver: DRIVER,
        message: format!(
            "{file}: not a vnfm state database: schema version {version} (expected 0 to \
             {SCHEMA_VERSION})"
        ),
        source: None,
    })
}

fn too_new(file: &str, version: u32, known: u32) -> DriverError {
    DriverError::Other {
        driver: DRIVER,
        message: format!(
            "{file}: the state database has schema version {version}, newer than version \
             {known} that this vnfm knows; use a newer vnfm (or another state file)"
        ),
        source: None,
    }
}

/// Applies the missing migrations, each in its own `BEGIN IMMEDIATE` transaction together with
/// its version number, and returns the final version.
fn migrate(conn: &mut Connection, file: &str, migrations: &[&str]) -> Result<u32, DriverError> {
    let known = version_of(migrations.len());
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql_error(file, "cannot start a schema migration", e))?;
        // Read the version inside the write transaction: another process may have migrated
        // the file since it was opened.
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(|e| sql_error(file, "cannot read the schema version", e))?;
        let version = u32::try_from(version).unwrap_or(u32::MAX);
        if version > known {
            return Err(too_new(file, version, known));
        }
        let Some(script) = migrations.get(version as usize) else {
            tx.commit()
                .map_err(|e| sql_error(file, "cannot end the schema check", e))?;
            return Ok(version);
        };
        let next = version + 1;
        let doing = format!("cannot migrate the schema from version {version} to {next}");
        tx.execute_batch(script)
            .map_err(|e| sql_error(file, &doing, e))?;
        tx.pragma_update(None, "user_version", next)
            .map_err(|e| sql_error(file, &doing, e))?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)
            .map_err(|e| sql_error(file, &doing, e))?;
        tx.commit().map_err(|e| sql_error(file, &doing, e))?;
    }
}

/// The text `start_time` column: RFC 3339 in UTC with nine fraction digits, so that text order
/// is time order (for years 0 to 9999).
fn start_time_key(op: &VnfLcmOpOcc) -> String {
    op.start_time.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

fn commit(
    conn: &mut Connection,
    file: &str,
    batch: &StoreBatch,
    documents: &[(String, String)],
    prune: &[(String, String)],
) -> Result<(), DriverError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sql_error(file, "cannot start a transaction", e))?;
    {
        // An upsert, not `INSERT OR REPLACE`: replacing deletes the row, and the delete would
        // cascade to the instance's operation occurrences.
        for p in &batch.preconditions {
            check(&tx, file, p)?;
        }
        let mut put_instance = tx
            .prepare_cached(
                "INSERT INTO vnf_instances (id, body, version, name) VALUES (?1, ?2, 1, ?3) \
                 ON CONFLICT (id) DO UPDATE SET body = excluded.body, \
                 name = excluded.name, version = version + 1",
            )
            .map_err(|e| sql_error(file, "cannot prepare the instance upsert", e))?;
        for inst in &batch.put_instances {
            let body = encode(file, &INSTANCES, inst.id.as_str(), inst)?;
            put_instance
                .execute(params![
                    inst.id.as_str(),
                    body,
                    inst.vnf_instance_name.as_deref()
                ])
                .map_err(|e| sql_error(file, format!("cannot put VNF instance {}", inst.id), e))?;
        }
        let mut put_op = tx
            .prepare_cached(
                "INSERT INTO vnf_lcm_op_occs (id, vnf_instance_id, start_time, body, version) \
                 VALUES (?1, ?2, ?3, ?4, 1) \
                 ON CONFLICT (id) DO UPDATE SET vnf_instance_id = excluded.vnf_instance_id, \
                 start_time = excluded.start_time, body = excluded.body, version = version + 1",
            )
            .map_err(|e| sql_error(file, "cannot prepare the operation occurrence upsert", e))?;
        for op in &batch.put_op_occs {
            let body = encode(file, &OP_OCCS, op.id.as_str(), op)?;
            put_op
                .execute(params![
                    op.id.as_str(),
                    op.vnf_instance_id.as_str(),
                    start_time_key(op),
                    body
                ])
                .map_err(|e| {
                    if is_foreign_key_violation(&e) {
                        DriverError::Conflict {
                            driver: DRIVER,
                            message: format!(
                                "{file}: {}",
                                unknown_instance_message(&op.id, &op.vnf_instance_id)
                            ),
                        }
                    } else {
                        sql_error(
                            file,
                            format!("cannot put VNF LCM operation occurrence {}", op.id),
                            e,
                        )
                    }
                })?;
        }
        let mut delete = tx
            .prepare_cached("DELETE FROM vnf_instances WHERE id = ?1")
            .map_err(|e| sql_error(file, "cannot prepare the instance delete", e))?;
        for id in &batch.delete_instances {
            delete
                .execute([id.as_str()])
                .map_err(|e| sql_error(file, format!("cannot delete VNF instance {id}"), e))?;
        }
        if !documents.is_empty() {
            let mut put_doc = tx
                .prepare_cached(
                    "INSERT INTO documents (name, body) VALUES (?1, ?2)
                     ON CONFLICT (name) DO UPDATE SET body = excluded.body",
                )
                .map_err(|e| sql_error(file, "cannot prepare a document write", e))?;
            for (name, body) in documents {
                put_doc
                    .execute(params![name, body])
                    .map_err(|e| sql_error(file, format!("cannot write document {name}"), e))?;
            }
        }
        for (prefix, upto) in prune {
            tx.execute(
                "DELETE FROM documents
                 WHERE name >= ?1 AND name <= ?2 AND substr(name, 1, length(?1)) = ?1",
                params![prefix, upto],
            )
            .map_err(|e| sql_error(file, format!("cannot delete documents {prefix}*"), e))?;
        }
    }
    tx.commit()
        .map_err(|e| sql_error(file, "cannot commit the batch", e))
}

/// Checks one precondition inside the batch's transaction.
fn check(tx: &rusqlite::Transaction<'_>, file: &str, p: &Precondition) -> Result<(), DriverError> {
    let (sql, id, want) = match p {
        Precondition::InstanceAt { id, version } => (
            "SELECT version FROM vnf_instances WHERE id = ?1",
            id.as_str(),
            Some(*version),
        ),
        Precondition::OpOccAt { id, version } => (
            "SELECT version FROM vnf_lcm_op_occs WHERE id = ?1",
            id.as_str(),
            Some(*version),
        ),
        Precondition::OpOccAbsent { id } => (
            "SELECT version FROM vnf_lcm_op_occs WHERE id = ?1",
            id.as_str(),
            None,
        ),
        _ => {
            return Err(DriverError::Other {
                driver: DRIVER,
                message: format!("{file}: unsupported precondition {p:?}"),
                source: None,
            })
        }
    };
    let found: Option<i64> = tx
        .query_row(sql, [id], |row| row.get(0))
        .optional()
        .map_err(|e| sql_error(file, format!("cannot check the version of {id}"), e))?;
    let found = found.map(to_version);
    if found == want {
        Ok(())
    } else {
        Err(DriverError::Conflict {
            driver: DRIVER,
            message: format!("{file}: {}", p.conflict_message(found)),
        })
    }
}

fn to_version(v: i64) -> Version {
    Version(u64::try_from(v).unwrap_or(0))
}

fn is_foreign_key_violation(e: &rusqlite::Error) -> bool {
    e.sqlite_error()
        .is_some_and(|e| e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY)
}

fn encode<T: serde::Serialize>(
    file: &str,
    table: &Table,
    id: &str,
    value: &T,
) -> Result<String, DriverError> {
    serde_json::to_string(value).map_err(|e| DriverError::Other {
        driver: DRIVER,
        message: format!(
            "{file}: table {}, row id {id:?}: cannot serialize the {} to JSON",
            table.name, table.kind
        ),
        source: Some(Box::new(e)),
    })
}

/// The tables whose row bodies [`decode_row`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// `vnf_instances`: a SOL003 `VnfInstance`.
    Instance,
    /// `vnf_lcm_op_occs`: a SOL003 `VnfLcmOpOcc`.
    OpOcc,
}

/// Decodes one row body of the state file as the store does when it reads that table.
/// Public for the fuzz targets of `fuzz/` and their corpus regression test.
///
/// # Errors
/// The store's error for a body that does not deserialize (table, row and field named).
pub fn decode_row(kind: RowKind, body: &str) -> Result<(), DriverError> {
    match kind {
        RowKind::Instance => decode::<VnfInstance>("state", &INSTANCES, "fuzz", body).map(drop),
        RowKind::OpOcc => decode::<VnfLcmOpOcc>("state", &OP_OCCS, "fuzz", body).map(drop),
    }
}

fn decode<T: serde::de::DeserializeOwned>(
    file: &str,
    table: &Table,
    id: &str,
    body: &str,
) -> Result<T, DriverError> {
    let mut de = serde_json::Deserializer::from_str(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            String::new()
        } else {
            format!(" field {path}:")
        };
        DriverError::Other {
            driver: DRIVER,
            message: format!(
                "{file}: table {}, row id {id:?}:{field} the body does not deserialize \
                 (expected the JSON of a SOL003 {})",
                table.name, table.kind
            ),
            // The JSON error itself: a corrupt state file (exit 2, `crate::error`).
            source: Some(Box::new(e.into_inner())),
        }
    })
}

fn query_bodies<T: serde::de::DeserializeOwned>(
    conn: &Connection,
    file: &str,
    table: &Table,
    sql: &str,
    args: &[&str],
) -> Result<Vec<T>, DriverError> {
    let listing = format!("cannot list table {}", table.name);
    let mut stmt = conn
        .prepare_cached(sql)
        .map_err(|e| sql_error(file, &listing, e))?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(args), |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })
        .map_err(|e| sql_error(file, &listing, e))?;
    let mut out = Vec::new();
    for row in rows {
        let (id, body) = row.map_err(|e| sql_error(file, &listing, e))?;
        out.push(decode(file, table, &id, &body)?);
    }
    Ok(out)
}

/// Maps an SQLite error met while `doing` something to the shared vocabulary.
fn sql_error(file: &str, doing: impl fmt::Display, e: rusqlite::Error) -> DriverError {
    match e.sqlite_error_code() {
        Some(ErrorCode::ConstraintViolation) => DriverError::Conflict {
            driver: DRIVER,
            message: format!("{file}: {doing}: {e}"),
        },
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => DriverError::Unavailable {
            driver: DRIVER,
            message: format!(
                "{file}: {doing}: the database stayed locked by another writer for more than \
                 {BUSY_TIMEOUT:?} ({e})"
            ),
        },
        // SQLITE_FULL (SQLite's ENOSPC, or a page limit): nothing of the transaction stays;
        // retrying once there is room may succeed.
        Some(ErrorCode::DiskFull) => DriverError::Unavailable {
            driver: DRIVER,
            message: format!("{file}: {doing}: the disk is full ({e}); free some space and retry"),
        },
        Some(ErrorCode::NotADatabase) => DriverError::Other {
            driver: DRIVER,
            message: format!(
                "{file}: not a vnfm state database (expected an SQLite file written by vnfm, or \
                 no file: vnfm creates it): {doing}"
            ),
            source: Some(Box::new(e)),
        },
        _ => DriverError::Other {
            driver: DRIVER,
            message: format!("{file}: {doing}"),
            source: Some(Box::new(e)),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use vnfm_core::store::conformance;

    use super::*;

    fn file_store(dir: &tempfile::TempDir) -> (PathBuf, SqliteStore) {
        let path = dir.path().join("state.db");
        let store = SqliteStore::open(&path).unwrap();
        (path, store)
    }

    /// The message of an error and its causes.
    fn chain(e: &DriverError) -> String {
        let mut out = e.to_string();
        let mut cur = e.source();
        while let Some(c) = cur {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cur = c.source();
        }
        out
    }

    fn raw(path: &Path) -> Connection {
        Connection::open(path).unwrap()
    }

    /// The connection's `PRAGMA synchronous` (2 = FULL, 1 = NORMAL).
    async fn synchronous(store: &SqliteStore) -> i64 {
        store
            .with_conn(Access::Read, |conn, _| {
                Ok(conn.pragma_query_value(None, "synchronous", |r| r.get(0)))
            })
            .await
            .unwrap()
            .unwrap()
    }

    #[tokio::test]
    async fn a_deferred_write_is_in_the_file_and_later_writes_are_synced_again() {
        let dir = tempfile::tempdir().unwrap();
        let (path, store) = file_store(&dir);
        assert_eq!(synchronous(&store).await, 2, "FULL from the start");
        store
            .write_documents(
                vec![("a".into(), "1".into()), ("b".into(), "2".into())],
                None,
                Flush::Deferred,
            )
            .await
            .unwrap();
        assert_eq!(synchronous(&store).await, 2, "FULL again after the write");
        // Another connection (another process) sees the committed write at once.
        let body: String = raw(&path)
            .query_row("SELECT body FROM documents WHERE name = 'b'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(body, "2");
        drop(store);
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.document("a").await.unwrap().as_deref(), Some("1"));
        assert_eq!(synchronous(&store).await, 2);
    }

    // ---- the shared suite, in memory and in a file ----

    #[tokio::test]
    async fn conformance_round_trip() {
        conformance::round_trip(&SqliteStore::open_in_memory().unwrap()).await;
        let dir = tempfile::tempdir().unwrap();
        conformance::round_trip(&file_store(&dir).1).await;
    }

    #[tokio::test]
    async fn conformance_list_ordering() {
        conformance::list_ordering(&SqliteStore::open_in_memory().unwrap()).await;
        let dir = tempfile::tempdir().unwrap();
        conformance::list_ordering(&file_store(&dir).1).await;
    }

    #[tokio::test]
    async fn conformance_instance_pages() {
        conformance::instance_pages(&SqliteStore::open_in_memory().unwrap()).await;
        let dir = tempfile::tempdir().unwrap();
        conformance::instance_pages(&file_store(&dir).1).await;
    }

    #[tokio::test]
    async fn conformance_not_found() {
        conformance::not_found(&SqliteStore::open_in_memory().unwrap()).await;
        let dir = tempfile::tempdir().unwrap();
        conformance::not_found(&file_store(&dir).1).await;
    }

    #[tokio::test]
    async fn conformance_delete_cascades() {
        conformance::delete_cascades(&SqliteStore::open_in_memory().unwrap()).await;
        let dir = tempfile::tempdir().unwrap();
        conformance::delete_cascades(&file_store(&dir).1).await;
    }

    #[tokio::test]
    async fn conformance_versions_and_preconditions() {
        let dir = tempfile::tempdir().unwrap();
        let (_, store) = file_store(&dir);
        conformance::versions_and_preconditions(&store).await;
    }

    #[tokio::test]
    async fn conformance_batch_is_atomic() {
        conformance::batch_is_atomic(&SqliteStore::open_in_memory().unwrap()).await;
        let dir = tempfile::tempdir().unwrap();
        conformance::batch_is_atomic(&file_store(&dir).1).await;
    }

    #[tokio::test]
    async fn conformance_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (path, store) = file_store(&dir);
        conformance::survives_reopen(Box::new(store), move || {
            Box::new(SqliteStore::open(&path).unwrap())
        })
        .await;
    }

    // ---- SQLite specifics ----

    #[test]
    fn works_without_a_tokio_runtime() {
        let store = SqliteStore::open_in_memory().unwrap();
        let fut = store.commit(StoreBatch::new().with_instance(conformance::instance("i", "v")));
        // A minimal executor: the future completes on first poll outside a runtime.
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut fut = fut;
        assert!(matches!(
            fut.as_mut().poll(&mut cx),
            std::task::Poll::Ready(Ok(()))
        ));
    }

    #[test]
    fn corrupt_file_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junk.db");
        let junk: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
        std::fs::write(&path, &junk).unwrap();
        let err = SqliteStore::open(&path).unwrap_err();
        assert!(
            matches!(
                err,
                DriverError::Other {
                    driver: "sqlite",
                    ..
                }
            ),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("not a vnfm state database"), "{msg}");
        assert!(
            chain(&err).contains("file is not a database"),
            "{}",
            chain(&err)
        );
        // The junk was not touched.
        assert_eq!(std::fs::read(&path).unwrap(), junk);
    }

    #[test]
    fn another_programs_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.db");
        raw(&path)
            .execute_batch("CREATE TABLE songs (title TEXT)")
            .unwrap();
        let msg = SqliteStore::open(&path).unwrap_err().to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("not a vnfm state database"), "{msg}");
        // Its schema is left alone.
        let tables: i64 = raw(&path)
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tables, 1);
    }

    #[test]
    fn unopenable_paths_are_errors_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        for path in [
            dir.path().join("no-such-dir").join("state.db"),
            dir.path().to_path_buf(),
        ] {
            let err = SqliteStore::open(&path).unwrap_err();
            assert!(
                matches!(
                    err,
                    DriverError::Other {
                        driver: "sqlite",
                        ..
                    }
                ),
                "{err:?}"
            );
            assert!(
                err.to_string().contains(&path.display().to_string()),
                "{err}"
            );
        }
    }

    #[test]
    fn future_schema_version_is_refused_naming_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        let (path, store) = file_store(&dir);
        drop(store);
        raw(&path)
            .pragma_update(None, "user_version", SCHEMA_VERSION + 6)
            .unwrap();
        let err = SqliteStore::open(&path).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(
            msg.contains(&format!("schema version {}", SCHEMA_VERSION + 6)),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("version {SCHEMA_VERSION} that")),
            "{msg}"
        );
    }

    #[tokio::test]
    async fn a_full_disk_is_unavailable_naming_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let (_, store) = file_store(&dir);
        // A page limit is how SQLite answers a full disk too: SQLITE_FULL.
        store
            .conn
            .lock()
            .unwrap()
            .pragma_update(None, "max_page_count", 1)
            .unwrap();
        let mut inst = conformance::instance("i", "v");
        inst.vnf_instance_description = Some("x".repeat(100_000));
        let e = store
            .commit(StoreBatch::new().with_instance(inst))
            .await
            .unwrap_err();
        assert!(matches!(e, DriverError::Unavailable { .. }), "{e:?}");
        assert!(e.to_string().contains("the disk is full"), "{e}");
    }

    #[test]
    fn an_empty_state_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.db");
        std::fs::write(&path, b"").unwrap();
        let e = SqliteStore::open(&path).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "{}: the state file is empty (0 bytes)",
                path.display()
            )),
            "{e}"
        );
        // Left as it was.
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[tokio::test]
    async fn migrates_a_new_file_to_the_current_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version(), SCHEMA_VERSION);
        assert_eq!(store.path(), Some(path.as_path()));
        store
            .commit(StoreBatch::new().with_instance(conformance::instance("i", "v")))
            .await
            .unwrap();
        drop(store);

        let conn = raw(&path);
        let version: u32 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let app: i32 = conn
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .unwrap();
        assert_eq!(app, APPLICATION_ID);
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let mut names: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'index') AND name NOT LIKE 'sqlite_%' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        names.sort();
        assert_eq!(
            names,
            [
                "documents",
                "vnf_instances",
                "vnf_instances_by_name",
                "vnf_lcm_op_occs",
                "vnf_lcm_op_occs_by_instance",
                "vnf_lcm_op_occs_by_start_time"
            ]
        );
        let body: String = conn
            .query_row("SELECT body FROM vnf_instances WHERE id = 'i'", [], |r| {
                r.get(0)
            })
            .unwrap();
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["vnfdId"], "v", "the body is the SOL003 JSON");

        // Reopening a current file migrates nothing and keeps the data.
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version(), SCHEMA_VERSION);
    }

    #[tokio::test]
    async fn the_name_column_is_filled_from_the_instances_of_an_older_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db");
        let file = path.display().to_string();
        let mut conn = raw(&path);
        conn.pragma_update(None, "application_id", APPLICATION_ID)
            .unwrap();
        assert_eq!(migrate(&mut conn, &file, &MIGRATIONS[..3]).unwrap(), 3);
        for id in ["a", "b"] {
            let body = serde_json::to_string(&conformance::instance(id, "v")).unwrap();
            conn.execute(
                "INSERT INTO vnf_instances (id, body) VALUES (?1, ?2)",
                params![id, body],
            )
            .unwrap();
        }
        drop(conn);
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version(), SCHEMA_VERSION);
        let page = store
            .instance_page(&InstanceQuery::first(10).named(vec!["vnf-b".into()]))
            .await
            .unwrap();
        assert_eq!(page, vec![conformance::instance("b", "v")]);
    }

    #[test]
    fn migrations_apply_in_order_and_a_failing_one_rolls_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let file = path.display().to_string();
        let migrations = [
            "CREATE TABLE a (x INTEGER);",
            "INSERT INTO a VALUES (1); CREATE TABLE b (y INTEGER);",
            "INSERT INTO a VALUES (2); CREATE TABLE broken (;",
        ];
        let mut conn = raw(&path);
        assert_eq!(migrate(&mut conn, &file, &migrations[..1]).unwrap(), 1);
        assert_eq!(migrate(&mut conn, &file, &migrations[..2]).unwrap(), 2);
        let err = migrate(&mut conn, &file, &migrations).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&file), "{msg}");
        assert!(msg.contains("from version 2 to 3"), "{msg}");
        let version: u32 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, 2, "the failed migration left the version");
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM a", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1, "the failed migration's insert was rolled back");
        // Going back to an older binary's list is refused.
        let err = migrate(&mut conn, &file, &migrations[..1]).unwrap_err();
        assert!(err.to_string().contains("schema version 2"), "{err}");
    }

    #[tokio::test]
    async fn data_version_moves_with_other_writers_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        let a = SqliteStore::open(&path).unwrap();
        let b = SqliteStore::open(&path).unwrap();
        let v0 = a.data_version().await.unwrap();
        a.put_document("x", "1".into()).await.unwrap();
        assert_eq!(
            a.data_version().await.unwrap(),
            v0,
            "own writes do not count"
        );
        b.put_document("x", "2".into()).await.unwrap();
        assert_ne!(a.data_version().await.unwrap(), v0);
    }

    #[tokio::test]
    async fn documents_round_trip_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let (path, store) = file_store(&dir);
        assert_eq!(store.document("sim").await.unwrap(), None);
        store.put_document("sim", "{\"a\":1}".into()).await.unwrap();
        store.put_document("sim", "{\"a\":2}".into()).await.unwrap();
        drop(store);
        let again = SqliteStore::open(&path).unwrap();
        assert_eq!(
            again.document("sim").await.unwrap().as_deref(),
            Some("{\"a\":2}")
        );
    }

    #[tokio::test]
    async fn counters_count_from_one_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let (path, store) = file_store(&dir);
        assert_eq!(store.increment_counter("n").await.unwrap(), 1);
        assert_eq!(store.increment_counter("n").await.unwrap(), 2);
        assert_eq!(store.increment_counter("m").await.unwrap(), 1);
        drop(store);
        let again = SqliteStore::open(&path).unwrap();
        assert_eq!(again.increment_counter("n").await.unwrap(), 3);
        assert_eq!(again.document("n").await.unwrap().as_deref(), Some("3"));
    }

    #[tokio::test]
    async fn undeserializable_body_names_file_table_and_row() {
        let dir = tempfile::tempdir().unwrap();
        let (path, store) = file_store(&dir);
        store
            .commit(
                StoreBatch::new()
                    .with_instance(conformance::instance("good", "v"))
                    .with_op_occ(conformance::op_occ("op-1", "good", "2024-01-01T00:00:00Z")),
            )
            .await
            .unwrap();
        let conn = raw(&path);
        conn.execute_batch(
            "INSERT INTO vnf_instances (id, body) VALUES ('bad', '{\"id\": [\"not a string\"]}');
             UPDATE vnf_lcm_op_occs SET body = '{\"id\": 42}' WHERE id = 'op-1';",
        )
        .unwrap();
        drop(conn);

        let file = path.display().to_string();
        let err = store
            .instance(&VnfInstanceId::new("bad"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                DriverError::Other {
                    driver: "sqlite",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.source().is_some(), "the serde error is kept as source");
        let msg = err.to_string();
        for part in [
            file.as_str(),
            "table vnf_instances",
            "\"bad\"",
            "VnfInstance",
        ] {
            assert!(msg.contains(part), "{part:?} missing in {msg}");
        }
        let msg = store.instances().await.unwrap_err().to_string();
        assert!(msg.contains("\"bad\""), "{msg}");
        assert_eq!(
            store.instance(&VnfInstanceId::new("good")).await.unwrap(),
            conformance::instance("good", "v")
        );
        let msg = store
            .op_occs(OpOccFilter::all())
            .await
            .unwrap_err()
            .to_string();
        for part in [
            file.as_str(),
            "table vnf_lcm_op_occs",
            "\"op-1\"",
            "VnfLcmOpOcc",
        ] {
            assert!(msg.contains(part), "{part:?} missing in {msg}");
        }
    }

    /// A connection's calls take one thread of the blocking pool at a time: calls queued on
    /// one connection (here held by someone else) never keep another connection's calls from
    /// the pool. `vnfm serve`'s notification deliveries queue thousands of calls on their own
    /// connection while the operations commit on theirs (issue 26). The timeout only keeps a
    /// failure from hanging: without the turn, the call on `a` never runs while `b` is held.
    #[test]
    fn calls_queued_on_one_connection_leave_the_blocking_pool_to_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let (_, a) = file_store(&dir);
        let b = a.reopen().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(a.put_document("x", "1".into())).unwrap();
        // Someone else holds `b`'s connection until told.
        let (locked, is_locked) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let conn = Arc::clone(&b.conn);
        let holder = std::thread::spawn(move || {
            let _held = conn.lock().unwrap();
            locked.send(()).unwrap();
            let _ = released.recv();
        });
        is_locked.recv().unwrap();
        rt.block_on(async {
            let queued: Vec<_> = (0..8)
                .map(|_| {
                    let b = b.clone();
                    tokio::spawn(async move { b.document("x").await })
                })
                .collect();
            // Every one has called (each is then in the pool or waits for its turn).
            while b.calls().reads < 8 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let got = tokio::time::timeout(Duration::from_secs(30), a.document("x"))
                .await
                .expect("the call on the other connection waited for the held one");
            assert_eq!(got.unwrap().as_deref(), Some("1"));
            release.send(()).unwrap();
            for q in queued {
                assert_eq!(q.await.unwrap().unwrap().as_deref(), Some("1"));
            }
        });
        holder.join().unwrap();
        assert_eq!(
            a.calls(),
            StoreCalls {
                reads: 1,
                writes: 1
            }
        );
        assert_eq!(
            b.calls(),
            StoreCalls {
                reads: 8,
                writes: 0
            }
        );
    }

    #[tokio::test]
    async fn concurrent_commits_from_several_tasks_and_connections() {
        let dir = tempfile::tempdir().unwrap();
        let (path, first) = file_store(&dir);
        let second = SqliteStore::open(&path).unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for t in 0..6 {
            // Half the tasks share one connection, half the other: the second pair contends
            // on the file itself (BEGIN IMMEDIATE + busy timeout).
            let store = if t % 2 == 0 {
                first.clone()
            } else {
                second.clone()
            };
            tasks.spawn(async move {
                for i in 0..15 {
                    let id = format!("t{t}-{i:02}");
                    let batch = StoreBatch::new()
                        .with_instance(conformance::instance(&id, "v"))
                        .with_op_occ(conformance::op_occ(
                            &format!("op-{id}"),
                            &id,
                            &format!("2024-01-01T00:00:{i:02}Z"),
                        ));
                    store.commit(batch).await.unwrap();
                }
            });
        }
        while let Some(res) = tasks.join_next().await {
            res.unwrap();
        }
        for store in [&first, &second] {
            let instances = store.instances().await.unwrap();
            assert_eq!(instances.len(), 90);
            assert!(instances.windows(2).all(|w| w[0].id < w[1].id));
            assert_eq!(store.op_occs(OpOccFilter::all()).await.unwrap().len(), 90);
        }
    }

    #[tokio::test]
    async fn upsert_keeps_operation_occurrences_in_the_file() {
        // The instance put must not be a delete + insert (that would cascade).
        let dir = tempfile::tempdir().unwrap();
        let (path, store) = file_store(&dir);
        store
            .commit(
                StoreBatch::new()
                    .with_instance(conformance::instance("i", "v1"))
                    .with_op_occ(conformance::op_occ("op", "i", "2024-01-01T00:00:00Z")),
            )
            .await
            .unwrap();
        store
            .commit(StoreBatch::new().with_instance(conformance::instance("i", "v2")))
            .await
            .unwrap();
        let n: i64 = raw(&path)
            .query_row("SELECT count(*) FROM vnf_lcm_op_occs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn start_time_key_sorts_as_time() {
        let a = conformance::op_occ("a", "i", "2024-01-01T00:00:00Z");
        let b = conformance::op_occ("b", "i", "2024-01-01T00:00:00.5Z");
        let c = conformance::op_occ("c", "i", "2024-01-01T01:00:00+02:00");
        assert_eq!(start_time_key(&a), "2024-01-01T00:00:00.000000000Z");
        assert!(start_time_key(&a) < start_time_key(&b));
        assert!(
            start_time_key(&c) < start_time_key(&a),
            "offsets are normalised"
        );
    }
}
