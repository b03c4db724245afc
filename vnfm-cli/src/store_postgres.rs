//! A PostgreSQL store: VNF instances and LCM operation occurrences in one PostgreSQL database,
//! shared by every process that opens it (issue 27: several `vnfm serve` replicas).
//!
//! [`PgStore`] implements [`Store`] with the same behaviour as
//! [`vnfm_core::store::MemoryStore`] and [`crate::store::SqliteStore`] (all three pass
//! `vnfm_core::store::conformance`), and keeps the CLI's named documents as `SqliteStore` does
//! ([`PgStore::document`], documents written with a batch ([`StoreBatch::documents`]), ...).
//! `[state] url` selects it, for the CLI's commands and for `vnfm serve`.
//!
//! ## Driver
//! `tokio-postgres` (rust-postgres, the native async client: no libpq, no C) with the
//! `deadpool-postgres` pool (cached statements per connection, connection checks on recycle):
//! both mature, maintained, on tokio, the project's runtime. TLS is rustls with ring through an
//! adapter of our own ([`tls`]): libpq's `sslmode`, `sslrootcert`, `sslcert` and `sslkey` in
//! the URL; vnfm never runs TLS without verifying the server's certificate against
//! `sslrootcert`.
//!
//! ## Schema
//! As SQLite's: each object is the serde JSON of its SOL003 form in a `text` column (`text`, not
//! `jsonb`: read back byte for byte, and `jsonb` refuses the `\u0000` escape a SOL003 string may
//! carry), beside the columns the store queries on. Identifiers and times are `COLLATE "C"`, so
//! lists sort in byte order as the other stores do, whatever the database's collation:
//!
//! ```text
//! vnfm_schema(version INTEGER NOT NULL)            -- one row: the schema version
//! vnf_instances(id TEXT PRIMARY KEY, body TEXT NOT NULL,
//!               version BIGINT NOT NULL)           -- +1 per put: conditional commits
//! vnf_lcm_op_occs(id TEXT PRIMARY KEY,
//!                 vnf_instance_id TEXT NOT NULL REFERENCES vnf_instances ON DELETE CASCADE,
//!                 start_time TEXT NOT NULL,        -- RFC 3339, UTC, nanoseconds
//!                 body TEXT NOT NULL, version BIGINT NOT NULL)
//! documents(name TEXT PRIMARY KEY, body TEXT NOT NULL,
//!           stamp BIGINT NOT NULL)                 -- new at every write (a sequence)
//! ```
//!
//! Migrations are applied when a store is opened, each in its own transaction together with the
//! new version in `vnfm_schema`, under a transaction-level advisory lock (replicas starting
//! together migrate one after the other). A database whose version is newer than
//! [`SCHEMA_VERSION`] is refused, and nothing is written to it.
//!
//! ## Concurrency: row locks, not `SERIALIZABLE`
//! A batch is one `READ COMMITTED` transaction that takes row locks: the first time it meets a
//! row (a precondition or a put) it reads the row's version `FOR UPDATE`, so a concurrent batch
//! on the same object waits and then sees the committed version. A put is `UPDATE … WHERE
//! version = $v` with the version the batch read first, or an insert-if-absent (`ON CONFLICT DO
//! NOTHING`) when it read no row. A row that was absent cannot be locked: when another batch
//! creates it meanwhile, the insert-if-absent writes nothing and the store runs its batch again
//! from the start (as it does after a deadlock, `40P01`; at most 8 times), where its
//! precondition then fails with the usual conflict.
//! Chosen over `SERIALIZABLE` because every abort is then a real conflict on a named row:
//! serializable transactions also abort on predicate-lock overlaps (index pages) that are no
//! conflict, which replicas under load would meet and retry for nothing.
//!
//! ## Errors
//! Every message starts with the server and database, as `postgres://user@host:port/database`
//! (never the password). A server that cannot be reached, a connection lost, a pool with no
//! free connection in time or a server shutting down is [`DriverError::Unavailable`]; a
//! precondition that does not hold or an occurrence of an unknown instance is
//! [`DriverError::Conflict`] worded as the other stores word it; an unknown id is
//! [`DriverError::NotFound`].
//! TLS ([`tls`]): parameters or files that cannot be used are [`DriverError::Invalid`] at open,
//! naming the parameter and the file; a server that does not speak TLS when the `sslmode`
//! needs it is [`DriverError::Invalid`]; a server certificate that does not verify (another CA,
//! another host) is [`DriverError::Unauthenticated`], saying which.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::SecondsFormat;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use tokio_postgres::config::Host;
use tokio_postgres::error::SqlState;
use vnfm_core::driver::{
    DriverError, InstanceQuery, OpOccFilter, Precondition, Store, StoreBatch, Version, Versioned,
};
use vnfm_core::id::{OpOccId, VnfInstanceId};
use vnfm_core::lcm::{VnfInstance, VnfLcmOpOcc};
use vnfm_core::store::unknown_instance_message;

use crate::store::Flush;

pub mod cas;
mod delivery;
mod locked;
pub mod tls;

const DRIVER: &str = "postgres";

/// The most connections one [`PgStore`] keeps open.
const POOL_SIZE: usize = 16;

/// How long opening one connection may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a call waits for a free connection of the pool.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// How many times a batch is run again after a deadlock or a row created under it.
const ATTEMPTS: u32 = 8;

/// The key of the advisory lock migrations hold (`vnfm` in ASCII).
const MIGRATION_LOCK: i64 = 0x766E_666D;

/// The migrations, in order: script `i` takes the schema from version `i` to `i + 1`. Version 1
/// is SQLite's version 3 (the same tables and columns) at once.
const MIGRATIONS: &[&str] = &[
    // 1: instances, operation occurrences, documents, with versions.
    r#"CREATE TABLE vnf_instances (
        id      TEXT COLLATE "C" PRIMARY KEY,
        body    TEXT NOT NULL,
        version BIGINT NOT NULL
    );
    CREATE TABLE vnf_lcm_op_occs (
        id              TEXT COLLATE "C" PRIMARY KEY,
        vnf_instance_id TEXT COLLATE "C" NOT NULL
                        REFERENCES vnf_instances (id) ON DELETE CASCADE,
        start_time      TEXT COLLATE "C" NOT NULL,
        body            TEXT NOT NULL,
        version         BIGINT NOT NULL
    );
    CREATE INDEX vnf_lcm_op_occs_by_instance
        ON vnf_lcm_op_occs (vnf_instance_id, start_time, id);
    CREATE INDEX vnf_lcm_op_occs_by_start_time ON vnf_lcm_op_occs (start_time, id);
    CREATE TABLE documents (
        name TEXT COLLATE "C" PRIMARY KEY,
        body TEXT NOT NULL
    );"#,
    // 2: a change stamp per document, from one sequence, new at every insert and update
    // (`PgStore::document_stamp`: how `vnfm serve` sees that another process wrote one).
    r#"CREATE SEQUENCE documents_stamp;
    ALTER TABLE documents ADD COLUMN stamp BIGINT NOT NULL DEFAULT nextval('documents_stamp');
    CREATE FUNCTION vnfm_documents_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.stamp := nextval('documents_stamp');
        RETURN NEW;
    END
    $$;
    CREATE TRIGGER documents_stamp BEFORE UPDATE ON documents
        FOR EACH ROW EXECUTE FUNCTION vnfm_documents_stamp();"#,
    // 3: the outbox of several replicas (`delivery`): its entries numbered from one sequence
    // (starting above the entries already there), and one delivery claim per subscription.
    r#"CREATE SEQUENCE lcm_outbox_seq;
    SELECT setval('lcm_outbox_seq', COALESCE((
        SELECT max(substring(name FROM '([0-9]{1,18})$')::BIGINT) FROM documents
        WHERE name >= 'lcm_outbox:' AND left(name, 11) = 'lcm_outbox:'), 0) + 1, false);
    CREATE TABLE lcm_delivery_claims (
        subscription TEXT COLLATE "C" PRIMARY KEY,
        holder       TEXT NOT NULL,
        until        TIMESTAMPTZ NOT NULL
    );"#,
    // 4: the instance's `vnfInstanceName`, indexed: `filter=(eq,vnfInstanceName,…)` answered
    // from the index (`Store::instance_page`). The column holds the name as a JSON string
    // (`name_key`), as the body has it: a text column cannot hold a NUL character, which a
    // name may have. The bodies this store wrote begin `{"id":"…","vnfInstanceName":"…"` (the
    // order of `VnfInstance`'s fields) when the instance has a name; the name is taken from
    // there (`->>` cannot convert a `\u0000` to text).
    r#"ALTER TABLE vnf_instances ADD COLUMN name TEXT COLLATE "C";
    UPDATE vnf_instances SET name = substring(body from
        '^\{"id":"(?:[^"\\]|\\.)*","vnfInstanceName":("(?:[^"\\]|\\.)*")');
    CREATE INDEX vnf_instances_by_name ON vnf_instances (name, id);"#,
];

/// The schema version this build creates and understands (the row of `vnfm_schema`).
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The table of the schema version, created before anything else.
const SCHEMA_TABLE: &str = "CREATE TABLE IF NOT EXISTS vnfm_schema (
        one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
        version INTEGER NOT NULL
    );
    INSERT INTO vnfm_schema (version) VALUES (0) ON CONFLICT DO NOTHING;";

/// A [`Store`] in a PostgreSQL database, through a pool of connections. Clones share the pool.
///
/// ```no_run
/// use vnfm_cli::store_postgres::PgStore;
/// use vnfm_core::driver::{Store, StoreBatch};
///
/// # async fn demo() -> Result<(), vnfm_core::driver::DriverError> {
/// let store = PgStore::open("postgres://vnfm@127.0.0.1:5432/vnfm").await?;
/// store.commit(StoreBatch::new()).await?;
/// assert!(store.instances().await?.is_empty());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// The connection settings the pool was built from ([`PgStore::reopen`]).
    config: Arc<tokio_postgres::Config>,
    /// The TLS of its connections (the URL's `sslmode`, `sslrootcert`, ...).
    tls: tls::MakeTls,
    /// The server and database as shown in messages (no password).
    target: Arc<str>,
    schema_version: u32,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .field("schema_version", &self.schema_version)
            .finish_non_exhaustive()
    }
}

/// What went wrong in one attempt at a batch.
enum Attempt {
    /// Run the batch again (a deadlock, a row created by another writer meanwhile).
    Again(String),
    /// The batch fails with this error.
    Fail(DriverError),
}

impl From<DriverError> for Attempt {
    fn from(e: DriverError) -> Self {
        Attempt::Fail(e)
    }
}

impl PgStore {
    /// Connects to the database of `url` (`postgres://user[:password]@host[:port]/database`,
    /// or libpq's `key=value` form) and migrates its schema to [`SCHEMA_VERSION`].
    ///
    /// # Errors
    /// [`DriverError::Invalid`] when `url` is not a PostgreSQL URL (shown without its
    /// password); [`DriverError::Unavailable`] naming the server and database when it cannot
    /// be reached; [`DriverError::Unauthenticated`] when the server refuses the credentials;
    /// [`DriverError::Other`] when the database's schema is newer than [`SCHEMA_VERSION`]
    /// (naming both versions) or a migration fails (the database is then left at the last
    /// version that succeeded).
    pub async fn open(url: &str) -> Result<Self, DriverError> {
        Self::open_with(url, MIGRATIONS).await
    }

    async fn open_with(url: &str, migrations: &[&str]) -> Result<Self, DriverError> {
        let (rest, params) = tls::split(url).map_err(|m| DriverError::Invalid {
            driver: DRIVER,
            message: format!("{}: {m}", redact(url)),
        })?;
        let mut config: tokio_postgres::Config =
            rest.parse().map_err(|e| DriverError::Invalid {
                driver: DRIVER,
                message: format!(
                    "{}: not a PostgreSQL URL ({}); expected \
                     postgres://user[:password]@host[:port]/database",
                    redact(url),
                    chain(&e)
                ),
            })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("vnfm");
        }
        let target: Arc<str> = Arc::from(target_of(&config));
        let tls = tls::MakeTls::new(&params).map_err(|m| DriverError::Invalid {
            driver: DRIVER,
            message: format!("{target}: {m}"),
        })?;
        config.ssl_mode(tls.ssl_mode());
        let mut store = Self {
            pool: Self::pool(&config, &tls, &target)?,
            config: Arc::new(config),
            tls,
            target,
            schema_version: 0,
        };
        store.schema_version = store.migrate(migrations).await?;
        Ok(store)
    }

    /// A pool of connections to the database of `config` (none opened yet).
    fn pool(
        config: &tokio_postgres::Config,
        tls: &tls::MakeTls,
        target: &str,
    ) -> Result<Pool, DriverError> {
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                // Checked with an empty query before each use: a connection the server closed
                // (a restart, a failover) is replaced instead of failing the call.
                recycling_method: RecyclingMethod::Verified,
            },
        );
        Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(WAIT_TIMEOUT))
            .build()
            .map_err(|e| DriverError::Other {
                driver: DRIVER,
                message: format!("{target}: cannot build the connection pool"),
                source: Some(Box::new(e)),
            })
    }

    /// The same database through a pool of its own (as
    /// [`crate::store::SqliteStore::reopen`]: `vnfm serve` delivers its notifications on it,
    /// so that the deliveries never wait for a connection the requests and operations use).
    /// Its connections are opened when first used; the schema is the one checked when this
    /// store was opened.
    ///
    /// # Errors
    /// [`DriverError::Other`] when the pool cannot be built.
    pub fn reopen(&self) -> Result<Self, DriverError> {
        Ok(Self {
            pool: Self::pool(&self.config, &self.tls, &self.target)?,
            config: self.config.clone(),
            tls: self.tls.clone(),
            target: self.target.clone(),
            schema_version: self.schema_version,
        })
    }

    /// The schema version of the database (after migration: [`SCHEMA_VERSION`]).
    pub fn schema_version(&self) -> u32 {
        self.schema_version
    }

    /// The server and database, as messages name them: `postgres://user@host:port/database`
    /// (never the password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// A connection of the pool.
    async fn client(&self, doing: &str) -> Result<deadpool_postgres::Client, DriverError> {
        self.pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => self.pg_error(doing, e),
            PoolError::Timeout(_) | PoolError::Closed => DriverError::Unavailable {
                driver: DRIVER,
                message: format!(
                    "{}: {doing}: no connection of the pool within {WAIT_TIMEOUT:?} ({e}); \
                     the server is slow or every connection is busy",
                    self.target
                ),
            },
            other => DriverError::Other {
                driver: DRIVER,
                message: format!("{}: {doing}: cannot get a connection", self.target),
                source: Some(Box::new(other)),
            },
        })
    }

    /// Applies the missing migrations and returns the final version.
    async fn migrate(&self, migrations: &[&str]) -> Result<u32, DriverError> {
        let known = u32::try_from(migrations.len()).unwrap_or(u32::MAX);
        let mut client = self.client("opening the store").await?;
        loop {
            let tx = client
                .transaction()
                .await
                .map_err(|e| self.pg_error("cannot start a schema migration", e))?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .await
                .map_err(|e| self.pg_error("cannot take the migration lock", e))?;
            tx.batch_execute(SCHEMA_TABLE)
                .await
                .map_err(|e| self.pg_error("cannot create the table vnfm_schema", e))?;
            let row = tx
                .query_one("SELECT version FROM vnfm_schema", &[])
                .await
                .map_err(|e| self.pg_error("cannot read the schema version", e))?;
            let version: i32 = row
                .try_get(0)
                .map_err(|e| self.pg_error("cannot read the schema version", e))?;
            let version = u32::try_from(version).map_err(|_| DriverError::Other {
                driver: DRIVER,
                message: format!(
                    "{}: table vnfm_schema holds version {version} (expected 0 to {known}): \
                     not a vnfm database",
                    self.target
                ),
                source: None,
            })?;
            if version > known {
                return Err(DriverError::Other {
                    driver: DRIVER,
                    message: format!(
                        "{}: the database has schema version {version}, newer than version \
                         {known} that this vnfm knows; use a newer vnfm (or another database)",
                        self.target
                    ),
                    source: None,
                });
            }
            let Some(script) = migrations.get(version as usize) else {
                tx.commit()
                    .await
                    .map_err(|e| self.pg_error("cannot end the schema check", e))?;
                return Ok(version);
            };
            let next = version + 1;
            let doing = format!("cannot migrate the schema from version {version} to {next}");
            tx.batch_execute(script)
                .await
                .map_err(|e| self.pg_error(&doing, e))?;
            let next_i32 = i32::try_from(next).unwrap_or(i32::MAX);
            tx.execute("UPDATE vnfm_schema SET version = $1", &[&next_i32])
                .await
                .map_err(|e| self.pg_error(&doing, e))?;
            tx.commit().await.map_err(|e| self.pg_error(&doing, e))?;
        }
    }

    /// Maps a PostgreSQL error met while `doing` something to the shared vocabulary.
    fn pg_error(&self, doing: impl fmt::Display, e: tokio_postgres::Error) -> DriverError {
        let target = &self.target;
        if let Some((failure, why)) = self.tls.failure(&e) {
            let message = format!("{target}: {doing}: {why}");
            return match failure {
                tls::Failure::Refused => DriverError::Unauthenticated {
                    driver: DRIVER,
                    message,
                },
                tls::Failure::NoTls => DriverError::Invalid {
                    driver: DRIVER,
                    message,
                },
                tls::Failure::Other => DriverError::Unavailable {
                    driver: DRIVER,
                    message,
                },
            };
        }
        let Some(db) = e.as_db_error() else {
            let unreachable = e.is_closed()
                || e.source().is_some_and(|s| s.is::<std::io::Error>())
                || e.to_string() == "timeout waiting for server";
            return if unreachable {
                DriverError::Unavailable {
                    driver: DRIVER,
                    message: format!(
                        "{target}: {doing}: cannot reach the PostgreSQL server: {}",
                        chain(&e)
                    ),
                }
            } else {
                DriverError::Other {
                    driver: DRIVER,
                    message: format!("{target}: {doing}"),
                    source: Some(Box::new(e)),
                }
            };
        };
        let code = db.code().code().to_owned();
        let message = format!("{target}: {doing}: {} (SQLSTATE {code})", db.message());
        match code.get(..2).unwrap_or("") {
            "23" => DriverError::Conflict {
                driver: DRIVER,
                message,
            },
            // Connection exceptions, insufficient resources, operator intervention (shutdown,
            // cannot connect now), system errors, deadlocks and serialization failures.
            "08" | "53" | "57" | "58" | "40" => DriverError::Unavailable {
                driver: DRIVER,
                message,
            },
            "28" => DriverError::Unauthenticated {
                driver: DRIVER,
                message: format!("{message}; check the user and password of the state URL"),
            },
            _ if code == "42501" => DriverError::PermissionDenied {
                driver: DRIVER,
                message,
            },
            _ => DriverError::Other {
                driver: DRIVER,
                message,
                source: Some(Box::new(e)),
            },
        }
    }

    /// [`Store::commit`] of `batch` with documents put and pruned, in one transaction, run
    /// again (up to [`ATTEMPTS`] times) after a deadlock or a row created under it.
    async fn commit_all(
        &self,
        batch: &StoreBatch,
        documents: &[(String, String)],
        prune: &[(String, String)],
    ) -> Result<(), DriverError> {
        let mut client = self.client("committing a batch").await?;
        let mut why = String::new();
        for _ in 0..ATTEMPTS {
            match self.commit_once(&mut client, batch, documents, prune).await {
                Ok(()) => return Ok(()),
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Again(reason)) => why = reason,
            }
        }
        Err(DriverError::Unavailable {
            driver: DRIVER,
            message: format!(
                "{}: the batch met concurrent writers {ATTEMPTS} times in a row (last: {why}); \
                 retry later",
                self.target
            ),
        })
    }

    /// One attempt at [`PgStore::commit_all`]: the transaction rolls back when it is dropped
    /// without a commit.
    async fn commit_once(
        &self,
        client: &mut deadpool_postgres::Client,
        batch: &StoreBatch,
        documents: &[(String, String)],
        prune: &[(String, String)],
    ) -> Result<(), Attempt> {
        let tx = client
            .transaction()
            .await
            .map_err(|e| self.attempt_error("cannot start a transaction", e))?;
        // The version of every row read or written so far: a put writes at the version its
        // precondition read, not at one read again later (a row absent for the precondition
        // may have been committed by another writer since, and must not be updated then).
        let mut seen = Seen::new();
        for p in &batch.preconditions {
            self.check(&tx, &mut seen, p).await?;
        }
        for inst in &batch.put_instances {
            let body = self.encode(&INSTANCES, inst.id.as_str(), inst)?;
            let row = Row {
                table: &INSTANCES,
                id: inst.id.as_str(),
                what: format!("VNF instance {}", inst.id),
                unknown_parent: None,
            };
            let name = inst.vnf_instance_name.as_deref().map(name_key);
            self.put_row(&tx, &mut seen, &row, &[&body, &name]).await?;
        }
        for op in &batch.put_op_occs {
            let body = self.encode(&OP_OCCS, op.id.as_str(), op)?;
            let row = Row {
                table: &OP_OCCS,
                id: op.id.as_str(),
                what: format!("VNF LCM operation occurrence {}", op.id),
                unknown_parent: Some(unknown_instance_message(&op.id, &op.vnf_instance_id)),
            };
            let instance = op.vnf_instance_id.as_str();
            let start = start_time_key(op);
            self.put_row(&tx, &mut seen, &row, &[&body, &instance, &start])
                .await?;
        }
        for id in &batch.delete_instances {
            tx.execute("DELETE FROM vnf_instances WHERE id = $1", &[&id.as_str()])
                .await
                .map_err(|e| self.attempt_error(format!("cannot delete VNF instance {id}"), e))?;
        }
        if !documents.is_empty() {
            let st = tx
                .prepare_cached(
                    "INSERT INTO documents (name, body) VALUES ($1, $2)
                     ON CONFLICT (name) DO UPDATE SET body = excluded.body",
                )
                .await
                .map_err(|e| self.attempt_error("cannot prepare a document write", e))?;
            for (name, body) in documents {
                tx.execute(&st, &[name, body])
                    .await
                    .map_err(|e| self.attempt_error(format!("cannot write document {name}"), e))?;
            }
        }
        for (prefix, upto) in prune {
            tx.execute(
                "DELETE FROM documents
                 WHERE name >= $1 AND name <= $2 AND left(name, length($1)) = $1",
                &[prefix, upto],
            )
            .await
            .map_err(|e| self.attempt_error(format!("cannot delete documents {prefix}*"), e))?;
        }
        tx.commit()
            .await
            .map_err(|e| self.attempt_error("cannot commit the batch", e))
    }

    /// Puts one row at its next version: `UPDATE … WHERE version = $v` when it exists, an
    /// insert-if-absent otherwise, `$v` (or its absence) as this transaction saw it first (see
    /// [`Seen`]); a row not seen yet is read and locked first. Writing nothing (another writer
    /// created the row meanwhile) runs the batch again. `values` are the body and then the
    /// table's other columns ([`Table::update`] / [`Table::insert`]).
    async fn put_row(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        seen: &mut Seen,
        row: &Row<'_>,
        values: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<(), Attempt> {
        let Row {
            table, id, what, ..
        } = row;
        let key = (table.name, (*id).to_owned());
        let found = match seen.get(&key) {
            Some(v) => *v,
            None => self.locked_version(tx, table, id).await?,
        };
        let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![id];
        params.extend_from_slice(values);
        let (sql, written) = match found {
            Some(v) => (table.update, Some(v)),
            None => (table.insert, None),
        };
        let next = written.map_or(1, |v| v.saturating_add(1));
        params.push(&next);
        if let Some(v) = written.as_ref() {
            params.push(v);
        }
        let rows =
            tx.execute(sql, &params)
                .await
                .map_err(|e| match (&row.unknown_parent, e.code()) {
                    (Some(message), Some(&SqlState::FOREIGN_KEY_VIOLATION)) => {
                        Attempt::Fail(DriverError::Conflict {
                            driver: DRIVER,
                            message: format!("{}: {message}", self.target),
                        })
                    }
                    _ => self.attempt_error(format!("cannot put {what}"), e),
                })?;
        if rows == 1 {
            seen.insert(key, Some(next));
            Ok(())
        } else {
            Err(Attempt::Again(format!(
                "{what} was written by another writer meanwhile"
            )))
        }
    }

    /// The version of a row, locked until the end of the transaction (`None`: no such row).
    async fn locked_version(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        table: &Table,
        id: &str,
    ) -> Result<Option<i64>, Attempt> {
        let doing = format!("cannot read the version of {id} in table {}", table.name);
        let row = tx
            .query_opt(table.lock, &[&id])
            .await
            .map_err(|e| self.attempt_error(&doing, e))?;
        match row {
            Some(row) => Ok(Some(
                row.try_get(0).map_err(|e| self.attempt_error(&doing, e))?,
            )),
            None => Ok(None),
        }
    }

    /// Checks one precondition inside the batch's transaction, locking the row it reads.
    async fn check(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        seen: &mut Seen,
        p: &Precondition,
    ) -> Result<(), Attempt> {
        let (table, id, want) = match p {
            Precondition::InstanceAt { id, version } => (&INSTANCES, id.as_str(), Some(*version)),
            Precondition::OpOccAt { id, version } => (&OP_OCCS, id.as_str(), Some(*version)),
            Precondition::OpOccAbsent { id } => (&OP_OCCS, id.as_str(), None),
            _ => {
                return Err(Attempt::Fail(DriverError::Other {
                    driver: DRIVER,
                    message: format!("{}: unsupported precondition {p:?}", self.target),
                    source: None,
                }))
            }
        };
        let key = (table.name, id.to_owned());
        let read = match seen.get(&key) {
            Some(v) => *v,
            None => self.locked_version(tx, table, id).await?,
        };
        seen.insert(key, read);
        let found = read.map(to_version);
        if found == want {
            Ok(())
        } else {
            Err(Attempt::Fail(DriverError::Conflict {
                driver: DRIVER,
                message: format!("{}: {}", self.target, p.conflict_message(found)),
            }))
        }
    }

    /// [`PgStore::pg_error`] inside a batch: a deadlock or a serialization failure runs the
    /// batch again.
    fn attempt_error(&self, doing: impl fmt::Display, e: tokio_postgres::Error) -> Attempt {
        match e.code().map(|c| c.code()) {
            Some(code @ ("40P01" | "40001")) => Attempt::Again(format!("{doing}: SQLSTATE {code}")),
            _ => Attempt::Fail(self.pg_error(doing, e)),
        }
    }

    fn encode<T: serde::Serialize>(
        &self,
        table: &Table,
        id: &str,
        value: &T,
    ) -> Result<String, DriverError> {
        serde_json::to_string(value).map_err(|e| DriverError::Other {
            driver: DRIVER,
            message: format!(
                "{}: table {}, row id {id:?}: cannot serialize the {} to JSON",
                self.target, table.name, table.kind
            ),
            source: Some(Box::new(e)),
        })
    }

    fn decode<T: serde::de::DeserializeOwned>(
        &self,
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
                    "{}: table {}, row id {id:?}:{field} the body does not deserialize \
                     (expected the JSON of a SOL003 {})",
                    self.target, table.name, table.kind
                ),
                source: Some(Box::new(e.into_inner())),
            }
        })
    }

    /// One row's body and version, or `NotFound` naming `what`.
    async fn entry<T: serde::de::DeserializeOwned>(
        &self,
        table: &Table,
        id: &str,
        what: String,
    ) -> Result<Versioned<T>, DriverError> {
        let doing = format!("cannot load {what}");
        let client = self.client(&doing).await?;
        let st = client
            .prepare_cached(table.select)
            .await
            .map_err(|e| self.pg_error(&doing, e))?;
        let row = client
            .query_opt(&st, &[&id])
            .await
            .map_err(|e| self.pg_error(&doing, e))?;
        let Some(row) = row else {
            return Err(DriverError::NotFound {
                driver: DRIVER,
                what,
            });
        };
        let body: String = row.try_get(0).map_err(|e| self.pg_error(&doing, e))?;
        let version: i64 = row.try_get(1).map_err(|e| self.pg_error(&doing, e))?;
        Ok(Versioned {
            value: self.decode(table, id, &body)?,
            version: to_version(version),
        })
    }

    /// The `(id, body)` rows of a query, decoded.
    async fn bodies<T: serde::de::DeserializeOwned>(
        &self,
        table: &Table,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<T>, DriverError> {
        let doing = format!("cannot list table {}", table.name);
        let rows = self.rows(&doing, sql, params).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let id: String = row.try_get(0).map_err(|e| self.pg_error(&doing, e))?;
            let body: String = row.try_get(1).map_err(|e| self.pg_error(&doing, e))?;
            out.push(self.decode(table, &id, &body)?);
        }
        Ok(out)
    }

    /// The rows of one query on a connection of the pool.
    async fn rows(
        &self,
        doing: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, DriverError> {
        let client = self.client(doing).await?;
        let st = client
            .prepare_cached(sql)
            .await
            .map_err(|e| self.pg_error(doing, e))?;
        client
            .query(&st, params)
            .await
            .map_err(|e| self.pg_error(doing, e))
    }

    /// Name and text pairs of rows whose columns 0 and 1 are text.
    fn pairs(
        &self,
        doing: &str,
        rows: Vec<tokio_postgres::Row>,
    ) -> Result<Vec<(String, String)>, DriverError> {
        rows.into_iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()
            .map_err(|e| self.pg_error(doing, e))
    }

    /// The document stored under `name`, if any (as [`crate::store::SqliteStore::document`]).
    ///
    /// # Errors
    /// [`DriverError::Unavailable`] when the server cannot be reached, [`DriverError::Other`]
    /// when the query fails.
    pub async fn document(&self, name: &str) -> Result<Option<String>, DriverError> {
        let doing = format!("reading document {name}");
        let rows = self
            .rows(
                &doing,
                "SELECT body FROM documents WHERE name = $1",
                &[&name],
            )
            .await?;
        match rows.first() {
            Some(row) => Ok(Some(
                row.try_get::<_, String>(0)
                    .map_err(|e| self.pg_error(&doing, e))?,
            )),
            None => Ok(None),
        }
    }

    /// The change stamp of document `name`: a number drawn from one sequence at every insert
    /// and update of the document, by any process (a trigger of the schema), so it differs
    /// from any stamp read before once the document was written since; `None` when there is
    /// no such document. `vnfm serve` compares it to the last one it read to learn whether
    /// another process (a CLI command, another server) wrote the document.
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn document_stamp(&self, name: &str) -> Result<Option<i64>, DriverError> {
        let doing = format!("reading the stamp of document {name}");
        let rows = self
            .rows(
                &doing,
                "SELECT stamp FROM documents WHERE name = $1",
                &[&name],
            )
            .await?;
        match rows.first() {
            Some(row) => Ok(Some(
                row.try_get::<_, i64>(0)
                    .map_err(|e| self.pg_error(&doing, e))?,
            )),
            None => Ok(None),
        }
    }

    /// Stores `body` under `name`, replacing what was there.
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn put_document(&self, name: &str, body: String) -> Result<(), DriverError> {
        self.write_documents(vec![(name.to_owned(), body)], None, Flush::Commit)
            .await
    }

    /// In one transaction: stores every `(name, body)` of `put`, then deletes the documents
    /// whose names start with `prune.0` and sort at or before `prune.1` (as
    /// [`crate::store::SqliteStore::write_documents`]). [`Flush::Deferred`] commits with
    /// `synchronous_commit = off`: the server acknowledges before its WAL reaches the disk.
    ///
    /// # Errors
    /// As [`PgStore::document`]; nothing is written then.
    pub async fn write_documents(
        &self,
        put: Vec<(String, String)>,
        prune: Option<(String, String)>,
        flush: Flush,
    ) -> Result<(), DriverError> {
        let mut client = self.client("writing documents").await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| self.pg_error("starting a transaction", e))?;
        if flush == Flush::Deferred {
            tx.batch_execute("SET LOCAL synchronous_commit = off")
                .await
                .map_err(|e| self.pg_error("setting synchronous_commit", e))?;
        }
        let st = tx
            .prepare_cached(
                "INSERT INTO documents (name, body) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET body = excluded.body",
            )
            .await
            .map_err(|e| self.pg_error("preparing a document write", e))?;
        for (name, body) in &put {
            tx.execute(&st, &[name, body])
                .await
                .map_err(|e| self.pg_error(format!("writing document {name}"), e))?;
        }
        if let Some((prefix, upto)) = &prune {
            tx.execute(
                "DELETE FROM documents
                 WHERE name >= $1 AND name <= $2 AND left(name, length($1)) = $1",
                &[prefix, upto],
            )
            .await
            .map_err(|e| self.pg_error(format!("deleting documents {prefix}*"), e))?;
        }
        tx.commit()
            .await
            .map_err(|e| self.pg_error("committing documents", e))
    }

    /// The documents whose names start with `prefix`, in name (byte) order.
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn documents_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let doing = format!("reading documents {prefix}*");
        let rows = self
            .rows(
                &doing,
                "SELECT name, body FROM documents
                 WHERE name >= $1 AND left(name, length($1)) = $1 ORDER BY name",
                &[&prefix],
            )
            .await?;
        self.pairs(&doing, rows)
    }

    /// At most `limit` documents whose names start with `prefix` and sort after `after` (all
    /// of them when `None`), in name order.
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn documents_after(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, String)>, DriverError> {
        let doing = format!("reading documents {prefix}*");
        let after = after.unwrap_or("");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .rows(
                &doing,
                "SELECT name, body FROM documents
                 WHERE name >= $1 AND name > $2 AND left(name, length($1)) = $1
                 ORDER BY name LIMIT $3",
                &[&prefix, &after, &limit],
            )
            .await?;
        self.pairs(&doing, rows)
    }

    /// The names and sizes (bytes of UTF-8) of the documents whose names start with `prefix`,
    /// in name order, without their bodies.
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn document_sizes_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, usize)>, DriverError> {
        let doing = format!("reading documents {prefix}*");
        let rows = self
            .rows(
                &doing,
                "SELECT name, octet_length(body)::BIGINT FROM documents
                 WHERE name >= $1 AND left(name, length($1)) = $1 ORDER BY name",
                &[&prefix],
            )
            .await?;
        rows.into_iter()
            .map(|r| {
                let name: String = r.try_get(0)?;
                let size: i64 = r.try_get(1)?;
                Ok((name, usize::try_from(size).unwrap_or(0)))
            })
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()
            .map_err(|e| self.pg_error(&doing, e))
    }

    /// Deletes the documents `names` in one transaction, with `synchronous_commit = off` (as
    /// [`Flush::Deferred`]).
    ///
    /// # Errors
    /// As [`PgStore::document`]; nothing is deleted then.
    pub async fn delete_documents(&self, names: Vec<String>) -> Result<(), DriverError> {
        let mut client = self.client("deleting documents").await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| self.pg_error("starting a transaction", e))?;
        tx.batch_execute("SET LOCAL synchronous_commit = off")
            .await
            .map_err(|e| self.pg_error("setting synchronous_commit", e))?;
        tx.execute("DELETE FROM documents WHERE name = ANY($1)", &[&names])
            .await
            .map_err(|e| self.pg_error(format!("deleting {} documents", names.len()), e))?;
        tx.commit()
            .await
            .map_err(|e| self.pg_error("committing document deletes", e))
    }

    /// Adds one to the counter kept as the document `name` (created at 1) and returns the new
    /// value, in one statement: two processes never get the same value. A body that does not
    /// start with a number counts as 0 (SQLite's cast).
    ///
    /// # Errors
    /// As [`PgStore::document`].
    pub async fn increment_counter(&self, name: &str) -> Result<u64, DriverError> {
        let doing = format!("incrementing counter {name}");
        let rows = self
            .rows(
                &doing,
                r"INSERT INTO documents (name, body) VALUES ($1, '1')
                  ON CONFLICT (name) DO UPDATE SET body = (COALESCE(
                      substring(documents.body FROM '^\s*([-+]?[0-9]{1,18})')::BIGINT, 0) + 1
                  )::TEXT
                  RETURNING body",
                &[&name],
            )
            .await?;
        let body: String = match rows.first() {
            Some(row) => row.try_get(0).map_err(|e| self.pg_error(&doing, e))?,
            None => String::new(),
        };
        body.parse().map_err(|_| DriverError::Other {
            driver: DRIVER,
            message: format!(
                "{}: counter {name} holds {body:?}, not a count",
                self.target
            ),
            source: None,
        })
    }
}

#[async_trait]
impl Store for PgStore {
    async fn commit(&self, batch: StoreBatch) -> Result<(), DriverError> {
        self.commit_all(&batch, &batch.documents, &batch.prune_documents)
            .await
    }

    async fn instance(&self, id: &VnfInstanceId) -> Result<VnfInstance, DriverError> {
        self.instance_entry(id).await.map(|e| e.value)
    }

    async fn instance_entry(
        &self,
        id: &VnfInstanceId,
    ) -> Result<Versioned<VnfInstance>, DriverError> {
        self.entry(&INSTANCES, id.as_str(), format!("VNF instance {id}"))
            .await
    }

    async fn op_occ_entry(&self, id: &OpOccId) -> Result<Versioned<VnfLcmOpOcc>, DriverError> {
        self.entry(
            &OP_OCCS,
            id.as_str(),
            format!("VNF LCM operation occurrence {id}"),
        )
        .await
    }

    async fn instances(&self) -> Result<Vec<VnfInstance>, DriverError> {
        self.bodies(
            &INSTANCES,
            "SELECT id, body FROM vnf_instances ORDER BY id",
            &[],
        )
        .await
    }

    async fn instance_page(&self, query: &InstanceQuery) -> Result<Vec<VnfInstance>, DriverError> {
        // A text holds no NUL, so no stored id has one: the ids after `p\0…` are those after
        // `p`, and an id with a NUL is none of them (a client's marker may be anything).
        let after = query
            .after
            .as_ref()
            .map(|a| a.as_str().split('\0').next().unwrap_or("").to_owned());
        let ids: Option<Vec<String>> = query.ids.as_ref().map(|ids| {
            ids.iter()
                .filter(|i| !i.as_str().contains('\0'))
                .map(|i| i.as_str().to_owned())
                .collect()
        });
        if ids.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let Some(names) = &query.names else {
            return self
                .instance_range(None, after.as_ref(), ids.as_ref(), query.limit)
                .await;
        };
        // One query per name, merged by id: `name = $n ORDER BY name, id` is a range of the
        // index `(name, id)` whatever the planner's statistics say (with `name = ANY(…) ORDER
        // BY id`, a table without statistics yet is read in id order and filtered), and a
        // page of a name that many instances have costs a page too.
        let names: std::collections::BTreeSet<String> = names.iter().map(|n| name_key(n)).collect();
        let mut out = Vec::new();
        for name in &names {
            out.extend(
                self.instance_range(Some(name), after.as_ref(), ids.as_ref(), query.limit)
                    .await?,
            );
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out.truncate(query.limit);
        Ok(out)
    }

    async fn op_occ(&self, id: &OpOccId) -> Result<VnfLcmOpOcc, DriverError> {
        self.op_occ_entry(id).await.map(|e| e.value)
    }

    async fn op_occs(&self, filter: OpOccFilter) -> Result<Vec<VnfLcmOpOcc>, DriverError> {
        match &filter.vnf_instance_id {
            Some(id) => {
                self.bodies(
                    &OP_OCCS,
                    "SELECT id, body FROM vnf_lcm_op_occs WHERE vnf_instance_id = $1 \
                     ORDER BY start_time, id",
                    &[&id.as_str()],
                )
                .await
            }
            None => {
                self.bodies(
                    &OP_OCCS,
                    "SELECT id, body FROM vnf_lcm_op_occs ORDER BY start_time, id",
                    &[],
                )
                .await
            }
        }
    }
}

impl PgStore {
    /// The instances after `after`, at most `limit`, by id: those named `name` (its
    /// [`name_key`]) when it is given, those among `ids` when they are. One statement per
    /// combination of conditions (each prepared once per connection), so that the planner sees
    /// the ones present: the primary key serves the pages, the index `vnf_instances_by_name`
    /// a name.
    async fn instance_range(
        &self,
        name: Option<&String>,
        after: Option<&String>,
        ids: Option<&Vec<String>>,
        limit: usize,
    ) -> Result<Vec<VnfInstance>, DriverError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut conds = Vec::new();
        let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&limit];
        if let Some(name) = name {
            params.push(name);
            conds.push(format!("name = ${}", params.len()));
        }
        if let Some(after) = after {
            params.push(after);
            conds.push(format!("id > ${}", params.len()));
        }
        if let Some(ids) = ids {
            params.push(ids);
            conds.push(format!("id = ANY(${})", params.len()));
        }
        let filter = if conds.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conds.join(" AND "))
        };
        let order = if name.is_some() { "name, id" } else { "id" };
        let sql = format!("SELECT id, body FROM vnf_instances{filter} ORDER BY {order} LIMIT $1");
        self.bodies(&INSTANCES, &sql, &params).await
    }
}

/// What the `name` column of `vnf_instances` holds for a `vnfInstanceName`: its JSON string
/// (quoted, escaped as in the body), which has no NUL character whatever the name has.
fn name_key(name: &str) -> String {
    serde_json::Value::String(name.to_owned()).to_string()
}

/// The versions a batch's transaction saw, by table name and id (`None`: no such row), from its
/// first read of each row (locked `FOR UPDATE` when the row exists) and updated by its own puts.
type Seen = std::collections::HashMap<(&'static str, String), Option<i64>>;

/// One row a batch puts.
struct Row<'a> {
    table: &'static Table,
    id: &'a str,
    /// The object, for messages (`VNF instance x`).
    what: String,
    /// The conflict message when the row's parent does not exist (a foreign key violation).
    unknown_parent: Option<String>,
}

/// A table, the SOL003 type its bodies hold, and its statements.
struct Table {
    name: &'static str,
    kind: &'static str,
    /// Body and version of one row (`$1`: the id).
    select: &'static str,
    /// The version of one row, locked (`$1`: the id).
    lock: &'static str,
    /// Insert-if-absent: `$1` id, then the body and other columns, then the version (1).
    insert: &'static str,
    /// Versioned update: `$1` id, then the body and other columns, then the new version and
    /// the version read.
    update: &'static str,
}

const INSTANCES: Table = Table {
    name: "vnf_instances",
    kind: "VnfInstance",
    select: "SELECT body, version FROM vnf_instances WHERE id = $1",
    lock: "SELECT version FROM vnf_instances WHERE id = $1 FOR UPDATE",
    insert: "INSERT INTO vnf_instances (id, body, name, version) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (id) DO NOTHING",
    update: "UPDATE vnf_instances SET body = $2, name = $3, version = $4 \
             WHERE id = $1 AND version = $5",
};

const OP_OCCS: Table = Table {
    name: "vnf_lcm_op_occs",
    kind: "VnfLcmOpOcc",
    select: "SELECT body, version FROM vnf_lcm_op_occs WHERE id = $1",
    lock: "SELECT version FROM vnf_lcm_op_occs WHERE id = $1 FOR UPDATE",
    insert: "INSERT INTO vnf_lcm_op_occs (id, body, vnf_instance_id, start_time, version) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
    update: "UPDATE vnf_lcm_op_occs SET body = $2, vnf_instance_id = $3, start_time = $4, \
             version = $5 WHERE id = $1 AND version = $6",
};

/// The text `start_time` column: RFC 3339 in UTC with nine fraction digits, so that byte order
/// is time order (for years 0 to 9999), as in the SQLite store.
fn start_time_key(op: &VnfLcmOpOcc) -> String {
    op.start_time.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

fn to_version(v: i64) -> Version {
    Version(u64::try_from(v).unwrap_or(0))
}

/// An error and its causes, joined by `: `.
fn chain(e: &dyn StdError) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}

/// `postgres://user@host:port/database` of a configuration: what messages name (no password).
fn target_of(config: &tokio_postgres::Config) -> String {
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = ports
                .get(i)
                .or_else(|| ports.first())
                .copied()
                .unwrap_or(5432);
            match h {
                Host::Tcp(name) if name.contains(':') => format!("[{name}]:{port}"),
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(dir) => format!("{}:{port}", dir.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "(no host)".to_owned()
    } else {
        hosts.join(",")
    };
    let user = config.get_user().unwrap_or("");
    let user = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("(default database)");
    format!("postgres://{user}{hosts}/{db}")
}

/// `url` with its password replaced by `***`: the user info of a URL (`scheme://user:pw@`) and
/// the value of a `password=` key (libpq's key-value form, or a URL query).
/// `url` without its password, for messages.
pub fn redacted(url: &str) -> String {
    redact(url)
}

fn redact(url: &str) -> String {
    let mut out = url.to_owned();
    // The last `@` ends the user info, even when the password holds an unescaped `@` or `/`
    // (whatever follows a later `@` is hidden too: more than needed, never less).
    if let Some(rest) = out.find("://").map(|i| i + 3) {
        if let Some(at) = out[rest..].rfind('@').map(|i| rest + i) {
            if let Some(colon) = out[rest..at].find(':').map(|i| rest + i) {
                out.replace_range(colon + 1..at, "***");
            }
        }
    }
    let mut from = 0;
    while let Some(i) = out[from..].find("password=").map(|i| from + i) {
        let start = i + "password=".len();
        let end = out[start..]
            .find([' ', '&'])
            .map_or(out.len(), |j| start + j);
        out.replace_range(start..end, "***");
        from = start + 3;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use tokio_postgres::NoTls;
    use vnfm_core::store::conformance;

    use super::*;

    /// The server the tests create their databases on (`scripts/postgres-dev.sh start`
    /// prints it; `scripts/test.sh` exports it on CI).
    const URL_VAR: &str = "VNFM_TEST_POSTGRES_URL";

    /// The suite name of the skips.
    const SUITE: &str = "postgres";

    /// The server's URL, or `None` after recording a skip of `what`.
    fn server_url(what: &str) -> Option<String> {
        match std::env::var(URL_VAR) {
            Ok(url) if !url.trim().is_empty() => Some(url),
            _ => {
                vnfm_core::vectors::skip(
                    SUITE,
                    what,
                    &format!(
                        "{URL_VAR} is not set (a PostgreSQL server to create test databases \
                         on); scripts/test.sh starts one when CI or VNFM_TEST_POSTGRES=1 is \
                         set, or: eval \"$(scripts/postgres-dev.sh start DIR)\""
                    ),
                );
                None
            }
        }
    }

    /// `url` with its database replaced by `db` (URL form only).
    fn with_database(url: &str, db: &str) -> String {
        let rest = url.find("://").map_or(0, |i| i + 3);
        let query = url[rest..].find('?').map_or(url.len(), |i| rest + i);
        let path = url[rest..query].find('/').map_or(query, |i| rest + i);
        format!("{}/{db}{}", &url[..path], &url[query..])
    }

    pub(crate) async fn admin_client(url: &str) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(url, NoTls)
            .await
            .unwrap_or_else(|e| panic!("connecting to {URL_VAR} ({}): {}", redact(url), chain(&e)));
        tokio::spawn(conn);
        client
    }

    /// A database of one test, created from `template0` (ICU `en-US` collation when the server
    /// has ICU) on the server of [`URL_VAR`] and
    /// dropped (its connections closed) when this is dropped, also when the test fails.
    pub(crate) struct TestDb {
        admin: String,
        name: String,
        url: String,
    }

    impl TestDb {
        pub(crate) async fn create(test: &str) -> Option<Self> {
            static SEQ: AtomicU32 = AtomicU32::new(0);
            let admin = server_url(&format!("store_postgres::tests, database {test}"))?;
            let name = format!(
                "t_{}_{}_{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed),
                test.chars().take(30).collect::<String>()
            );
            // An ICU collation where the server has one: its order is not byte order ("a" <
            // "B"), so a column the store forgot to make `COLLATE "C"` fails the ordering tests.
            let client = admin_client(&admin).await;
            let create = format!("CREATE DATABASE \"{name}\" TEMPLATE template0");
            let icu = format!("{create} LOCALE_PROVIDER icu ICU_LOCALE 'en-US'");
            if client.batch_execute(&icu).await.is_err() {
                client
                    .batch_execute(&create)
                    .await
                    .unwrap_or_else(|e| panic!("creating database {name}: {}", chain(&e)));
            }
            let url = with_database(&admin, &name);
            Some(Self { admin, name, url })
        }

        /// The URL of the database (plain: no TLS parameter).
        pub(crate) fn url(&self) -> &str {
            &self.url
        }

        /// The database's name.
        pub(crate) fn name(&self) -> &str {
            &self.name
        }

        pub(crate) async fn store(&self) -> PgStore {
            PgStore::open(&self.url)
                .await
                .unwrap_or_else(|e| panic!("opening {}: {}", self.url, chain(&e)))
        }
    }

    impl Drop for TestDb {
        fn drop(&mut self) {
            let admin = self.admin.clone();
            let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
            // A thread of its own: drop may run inside the test's runtime.
            let dropped = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let client = admin_client(&admin).await;
                    client.batch_execute(&sql).await
                })
            })
            .join();
            if let Ok(Err(e)) = dropped {
                eprintln!("could not drop test database {}: {}", self.name, chain(&e));
            }
        }
    }

    // ---- the shared suite, one database per behaviour ----

    #[tokio::test]
    async fn conformance_round_trip() {
        let Some(db) = TestDb::create("round_trip").await else {
            return;
        };
        conformance::round_trip(&db.store().await).await;
    }

    #[tokio::test]
    async fn conformance_list_ordering() {
        let Some(db) = TestDb::create("list_ordering").await else {
            return;
        };
        conformance::list_ordering(&db.store().await).await;
    }

    #[tokio::test]
    async fn conformance_instance_pages() {
        let Some(db) = TestDb::create("instance_pages").await else {
            return;
        };
        conformance::instance_pages(&db.store().await).await;
    }

    #[tokio::test]
    async fn conformance_not_found() {
        let Some(db) = TestDb::create("not_found").await else {
            return;
        };
        conformance::not_found(&db.store().await).await;
    }

    #[tokio::test]
    async fn conformance_delete_cascades() {
        let Some(db) = TestDb::create("delete_cascades").await else {
            return;
        };
        conformance::delete_cascades(&db.store().await).await;
    }

    #[tokio::test]
    async fn conformance_batch_is_atomic() {
        let Some(db) = TestDb::create("batch_is_atomic").await else {
            return;
        };
        conformance::batch_is_atomic(&db.store().await).await;
    }

    #[tokio::test]
    async fn conformance_versions_and_preconditions() {
        let Some(db) = TestDb::create("versions_and_preconditions").await else {
            return;
        };
        conformance::versions_and_preconditions(&db.store().await).await;
    }

    /// The second store is opened (a new pool: new connections, migrations checked again)
    /// after the first one was dropped.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn conformance_survives_reopen() {
        let Some(db) = TestDb::create("survives_reopen").await else {
            return;
        };
        let url = db.url.clone();
        conformance::survives_reopen(Box::new(db.store().await), move || {
            let reopened = tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(PgStore::open(&url))
            });
            Box::new(reopened.unwrap())
        })
        .await;
    }

    // ---- PostgreSQL specifics ----

    #[tokio::test]
    async fn a_new_database_is_migrated_once_and_a_newer_one_is_refused() {
        let Some(db) = TestDb::create("schema_version").await else {
            return;
        };
        let store = db.store().await;
        assert_eq!(store.schema_version(), SCHEMA_VERSION);
        let raw = admin_client(&db.url).await;
        let version = |row: tokio_postgres::Row| row.get::<_, i32>(0);
        let row = raw
            .query_one("SELECT version FROM vnfm_schema", &[])
            .await
            .unwrap();
        assert_eq!(version(row), SCHEMA_VERSION as i32);
        // Opening again applies nothing (the tables exist: a second run would fail).
        assert_eq!(db.store().await.schema_version(), SCHEMA_VERSION);

        let newer = SCHEMA_VERSION as i32 + 1;
        raw.execute("UPDATE vnfm_schema SET version = $1", &[&newer])
            .await
            .unwrap();
        let err = PgStore::open(&db.url).await.unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, DriverError::Other { .. }), "{err:?}");
        assert!(
            msg.contains(&format!("schema version {newer}"))
                && msg.contains(&format!("newer than version {SCHEMA_VERSION}"))
                && msg.contains(&db.name)
                && msg.contains("127.0.0.1"),
            "the refusal names both versions, the server and the database: {msg}"
        );
        let row = raw
            .query_one("SELECT version FROM vnfm_schema", &[])
            .await
            .unwrap();
        assert_eq!(version(row), newer, "a refused database is left as it was");
    }

    /// Replicas starting together on a new database: one migrates, the others wait for it and
    /// find the schema done (the advisory lock), none fails.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stores_opened_together_migrate_once() {
        let Some(db) = TestDb::create("opened_together").await else {
            return;
        };
        let opens: Vec<_> = (0..6)
            .map(|_| {
                let url = db.url.clone();
                tokio::spawn(async move { PgStore::open(&url).await })
            })
            .collect();
        for open in opens {
            let store = open
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("{}", chain(&e)));
            assert_eq!(store.schema_version(), SCHEMA_VERSION);
        }
    }

    #[tokio::test]
    async fn migrations_apply_in_order_and_a_failing_one_rolls_back() {
        let Some(db) = TestDb::create("migrations").await else {
            return;
        };
        let good: &[&str] = &["CREATE TABLE a (x INT)", "CREATE TABLE b (y INT)"];
        let store = PgStore::open_with(&db.url, good).await.unwrap();
        assert_eq!(store.schema_version(), 2);
        let bad: &[&str] = &[
            good[0],
            good[1],
            "CREATE TABLE c (z INT); SELECT no_such_function()",
        ];
        let err = PgStore::open_with(&db.url, bad).await.unwrap_err();
        assert!(
            err.to_string().contains("from version 2 to 3")
                && err.to_string().contains("no_such_function"),
            "{err}"
        );
        let raw = admin_client(&db.url).await;
        let row = raw
            .query_one("SELECT version FROM vnfm_schema", &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, i32>(0), 2);
        let c = raw
            .query_opt("SELECT 1 FROM pg_tables WHERE tablename = 'c'", &[])
            .await
            .unwrap();
        assert!(c.is_none(), "the failed migration's table was rolled back");
    }

    /// No server on the port: `Unavailable`, naming host, port and database, not the password.
    #[tokio::test]
    async fn a_server_that_is_down_is_unavailable_naming_the_address() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url = format!("postgres://vnfm:s3cret@127.0.0.1:{port}/vnfm_state?connect_timeout=5");
        let err = PgStore::open(&url).await.unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, DriverError::Unavailable { .. }),
            "a refused connection is retryable: {err:?}"
        );
        assert!(err.is_retryable());
        assert!(
            msg.contains(&format!("postgres://vnfm@127.0.0.1:{port}/vnfm_state"))
                && msg.contains("cannot reach the PostgreSQL server"),
            "{msg}"
        );
        assert!(!msg.contains("s3cret"), "the password leaked: {msg}");
    }

    /// The server closes the store's connections (as a restart does): once they are gone, the
    /// next call runs on a new connection (the store needs no reopening). A connection that
    /// dies between the pool's check and the query still fails its call (`Unavailable`).
    #[tokio::test]
    async fn connections_closed_by_the_server_are_replaced() {
        let Some(db) = TestDb::create("terminated").await else {
            return;
        };
        let store = db.store().await;
        store
            .commit(StoreBatch::new().with_instance(conformance::instance("i", "v")))
            .await
            .unwrap();
        let raw = admin_client(&db.admin).await;
        let backends = "SELECT pid FROM pg_stat_activity WHERE datname = $1";
        for round in 0..3 {
            let before = raw.query(backends, &[&db.name]).await.unwrap().len();
            assert!(before > 0, "round {round}: the store holds a connection");
            raw.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                &[&db.name],
            )
            .await
            .unwrap();
            // Termination is asynchronous: wait until the backends are gone.
            let mut waited = 0;
            while !raw.query(backends, &[&db.name]).await.unwrap().is_empty() {
                assert!(
                    waited < 500,
                    "round {round}: the backends did not exit in 5 s"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
                waited += 1;
            }
            assert_eq!(
                store.instances().await.unwrap().len(),
                1,
                "round {round}: the call after a restart runs on a new connection"
            );
        }
    }

    /// A role the server does not know: `Unauthenticated`, naming the server and the role.
    #[tokio::test]
    async fn an_unknown_role_is_unauthenticated() {
        let Some(admin) = server_url("store_postgres::tests, an unknown role") else {
            return;
        };
        let mut config: tokio_postgres::Config = admin.parse().unwrap();
        config.user("no_such_role").password("pw-not-shown");
        // `target_of` writes a URL: postgres://no_such_role@host:port/database.
        let url = format!("{}?password=pw-not-shown", target_of(&config));
        let err = PgStore::open(&url).await.unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, DriverError::Unauthenticated { .. }),
            "{err:?}"
        );
        assert!(
            msg.contains("postgres://no_such_role@") && msg.contains("\"no_such_role\""),
            "{msg}"
        );
        assert!(!msg.contains("pw-not-shown"), "{msg}");
    }

    #[tokio::test]
    async fn a_bad_url_is_invalid_without_its_password() {
        let err = PgStore::open("postgres://vnfm:s3cret@127.0.0.1:notaport/db")
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, DriverError::Invalid { .. }), "{err:?}");
        assert!(
            msg.contains("postgres://vnfm:***@127.0.0.1:notaport/db")
                && msg.contains("invalid value for option `port`")
                && !msg.contains("s3cret"),
            "{msg}"
        );
    }

    #[test]
    fn redact_hides_passwords_of_both_forms() {
        assert_eq!(
            redact("postgres://u:p@ss@h:1/db?password=x&sslmode=disable"),
            "postgres://u:***@h:1/db?password=***&sslmode=disable"
        );
        assert_eq!(
            redact("host=h password=pw dbname=d"),
            "host=h password=*** dbname=d"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            redact("postgres://u:a/b@c@h:1/db"),
            "postgres://u:***@h:1/db",
            "unescaped / and @ in the password"
        );
    }

    #[test]
    fn targets_name_user_hosts_ports_and_database() {
        let c: tokio_postgres::Config = "postgres://u:pw@db.example:6543/state".parse().unwrap();
        assert_eq!(target_of(&c), "postgres://u@db.example:6543/state");
        let c: tokio_postgres::Config = "host=/run/pg,::1 port=5433 user=v".parse().unwrap();
        assert_eq!(target_of(&c), "postgres://v@/run/pg:5433,[::1]:5433/v");
        assert_eq!(
            with_database("postgres://u@h:1/postgres?x=1", "t"),
            "postgres://u@h:1/t?x=1"
        );
        assert_eq!(with_database("postgres://u@h:1", "t"), "postgres://u@h:1/t");
    }

    /// Of concurrent writers that read one version, exactly one wins, also across pools (two
    /// replicas): on an existing row (`UPDATE … WHERE version`) and on a new one
    /// (insert-if-absent).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_conditional_commits_have_one_winner() {
        let Some(db) = TestDb::create("concurrent").await else {
            return;
        };
        let a = db.store().await;
        let b = db.store().await;
        // Several rounds of 12 writers: the window between a precondition and a put is narrow.
        for round in 0..6 {
            race_round(&a, &b, &format!("race-{round}")).await;
        }
    }

    /// One round of [`concurrent_conditional_commits_have_one_winner`] on instance `id`.
    async fn race_round(a: &PgStore, b: &PgStore, id: &str) {
        let inst = conformance::instance(id, "vnfd");
        let op_id = format!("op-{id}");
        a.commit(StoreBatch::new().with_instance(inst.clone()))
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for n in 0..12 {
            let store = if n % 2 == 0 { a.clone() } else { b.clone() };
            let mut mine = inst.clone();
            mine.vnf_instance_name = Some(format!("writer-{n}"));
            let op = conformance::op_occ(&op_id, id, "2026-01-01T00:00:00Z");
            let at1 = Precondition::InstanceAt {
                id: inst.id.clone(),
                version: Version(1),
            };
            let absent = Precondition::OpOccAbsent { id: op.id.clone() };
            tasks.push(tokio::spawn(async move {
                let first = store
                    .commit(StoreBatch::new().with_instance(mine).with_precondition(at1))
                    .await;
                let second = store
                    .commit(StoreBatch::new().with_op_occ(op).with_precondition(absent))
                    .await;
                (first, second)
            }));
        }
        let (mut updates, mut inserts) = (0, 0);
        for t in tasks {
            let (first, second) = t.await.unwrap();
            for (r, won) in [(first, &mut updates), (second, &mut inserts)] {
                match r {
                    Ok(()) => *won += 1,
                    Err(DriverError::Conflict { message, .. }) => {
                        assert!(
                            message.contains("another writer")
                                || message.contains("already exists"),
                            "{message}"
                        );
                    }
                    Err(e) => panic!("a loser must see a conflict: {e:?}"),
                }
            }
        }
        assert_eq!(
            (updates, inserts),
            (1, 1),
            "{id}: exactly one winner of each race"
        );
        assert_eq!(
            a.instance_entry(&inst.id).await.unwrap().version,
            Version(2)
        );
        assert_eq!(
            b.op_occ_entry(&op_id.as_str().into())
                .await
                .unwrap()
                .version,
            Version(1)
        );
    }

    #[tokio::test]
    async fn bodies_round_trip_byte_for_byte_even_with_nul_characters() {
        let Some(db) = TestDb::create("nul").await else {
            return;
        };
        let store = db.store().await;
        let mut inst = conformance::instance("nul", "vnfd");
        inst.vnf_instance_name = Some("a\u{0}b \u{1F600} \"q\"".into());
        store
            .commit(StoreBatch::new().with_instance(inst.clone()))
            .await
            .unwrap();
        assert_eq!(store.instance(&inst.id).await.unwrap(), inst);
        let named = InstanceQuery::first(5).named(vec![inst.vnf_instance_name.clone().unwrap()]);
        assert_eq!(
            store.instance_page(&named).await.unwrap(),
            vec![inst.clone()]
        );
        let raw = admin_client(&db.url).await;
        let row = raw
            .query_one("SELECT body FROM vnf_instances WHERE id = 'nul'", &[])
            .await
            .unwrap();
        assert_eq!(
            row.get::<_, String>(0),
            serde_json::to_string(&inst).unwrap()
        );
    }

    #[tokio::test]
    async fn an_undeserializable_body_names_server_table_and_row() {
        let Some(db) = TestDb::create("corrupt").await else {
            return;
        };
        let store = db.store().await;
        let raw = admin_client(&db.url).await;
        raw.execute(
            "INSERT INTO vnf_instances (id, body, version) VALUES ('bad', '{\"id\": 7}', 1)",
            &[],
        )
        .await
        .unwrap();
        let err = store.instance(&"bad".into()).await.unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&db.name) && msg.contains("vnf_instances") && msg.contains("\"bad\""),
            "{msg}"
        );
        assert!(
            store.instances().await.is_err(),
            "a list with a bad row fails too"
        );
    }

    // ---- documents and counters ----

    #[tokio::test]
    async fn documents_round_trip_list_in_byte_order_and_delete() {
        let Some(db) = TestDb::create("documents").await else {
            return;
        };
        let store = db.store().await;
        assert_eq!(store.document("a").await.unwrap(), None);
        store.put_document("a", "1".into()).await.unwrap();
        store.put_document("a", "one".into()).await.unwrap();
        assert_eq!(store.document("a").await.unwrap().as_deref(), Some("one"));
        store
            .write_documents(
                vec![
                    ("q/B".into(), "b".into()),
                    ("q/a".into(), "a".into()),
                    ("q/é".into(), "é".into()),
                    ("q/c".into(), "c".into()),
                    ("qq".into(), "not in q/".into()),
                ],
                None,
                Flush::Deferred,
            )
            .await
            .unwrap();
        let names = |v: Vec<(String, String)>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(
            names(store.documents_with_prefix("q/").await.unwrap()),
            ["q/B", "q/a", "q/c", "q/é"],
            "byte order, prefix only"
        );
        assert_eq!(
            names(store.documents_after("q/", Some("q/B"), 2).await.unwrap()),
            ["q/a", "q/c"]
        );
        assert_eq!(
            store.document_sizes_with_prefix("q/é").await.unwrap(),
            [("q/é".to_owned(), 2)],
            "sizes in bytes"
        );
        // Prune up to q/a, put another in the same transaction.
        store
            .write_documents(
                vec![("q/d".into(), "d".into())],
                Some(("q/".into(), "q/a".into())),
                Flush::Commit,
            )
            .await
            .unwrap();
        assert_eq!(
            names(store.documents_with_prefix("q/").await.unwrap()),
            ["q/c", "q/d", "q/é"]
        );
        store
            .delete_documents(vec!["q/c".into(), "q/none".into()])
            .await
            .unwrap();
        assert_eq!(
            names(store.documents_with_prefix("q/").await.unwrap()),
            ["q/d", "q/é"]
        );
        assert_eq!(
            store.document("qq").await.unwrap().as_deref(),
            Some("not in q/")
        );
    }

    #[tokio::test]
    async fn a_batch_and_its_outbox_commit_together_or_not_at_all() {
        let Some(db) = TestDb::create("outbox").await else {
            return;
        };
        let store = db.store().await;
        let with = |mut b: StoreBatch, put: &[(&str, &str)], prune: &[(&str, &str)]| {
            b.documents = put
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            b.prune_documents = prune
                .iter()
                .map(|(p, u)| (p.to_string(), u.to_string()))
                .collect();
            b
        };
        store
            .commit(with(
                StoreBatch::new().with_instance(conformance::instance("i", "v")),
                &[("out/1", "n1"), ("out/2", "n2")],
                &[],
            ))
            .await
            .unwrap();
        let err = store
            .commit(with(
                StoreBatch::new().with_op_occ(conformance::op_occ(
                    "op",
                    "missing",
                    "2026-01-01T00:00:00Z",
                )),
                &[("out/3", "n3")],
                &[],
            ))
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, DriverError::Conflict { .. }), "{err:?}");
        assert!(msg.contains("op") && msg.contains("missing"), "{msg}");
        assert_eq!(
            store.document("out/3").await.unwrap(),
            None,
            "nothing of a failed batch"
        );
        store
            .commit(with(
                StoreBatch::new(),
                &[("out/4", "n4")],
                &[("out/", "out/1")],
            ))
            .await
            .unwrap();
        let names: Vec<String> = store
            .documents_with_prefix("out/")
            .await
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["out/2", "out/4"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counters_count_from_one_without_duplicates() {
        let Some(db) = TestDb::create("counters").await else {
            return;
        };
        let store = db.store().await;
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store.increment_counter("seq").await.unwrap()
            }));
        }
        let mut got = Vec::new();
        for t in tasks {
            got.push(t.await.unwrap());
        }
        got.sort_unstable();
        assert_eq!(got, (1..=20).collect::<Vec<u64>>());
        store.put_document("junk", "abc".into()).await.unwrap();
        assert_eq!(
            store.increment_counter("junk").await.unwrap(),
            1,
            "not a number: 0"
        );
        store.put_document("n", "41 apples".into()).await.unwrap();
        assert_eq!(store.increment_counter("n").await.unwrap(), 42);
    }

    /// The stamp `vnfm serve` watches: every way of writing a document (a put, documents
    /// written together, a batch's documents, a counter), from another store on the database
    /// (another process), gives the document a stamp it never had; reading changes nothing;
    /// a document deleted and written again does not get an old stamp back.
    #[tokio::test]
    async fn document_stamps_change_with_every_write_from_any_store() {
        let Some(db) = TestDb::create("stamps").await else {
            return;
        };
        let watcher = db.store().await;
        let writer = db.store().await;
        assert_eq!(watcher.document_stamp("d").await.unwrap(), None);
        let mut seen = std::collections::BTreeSet::new();
        let mut look = |stamp: Option<i64>, what: &str| {
            let stamp = stamp.unwrap_or_else(|| panic!("{what}: no stamp"));
            assert!(seen.insert(stamp), "{what}: stamp {stamp} seen before");
        };
        writer.put_document("d", "1".into()).await.unwrap();
        look(watcher.document_stamp("d").await.unwrap(), "insert");
        let before = watcher.document_stamp("d").await.unwrap();
        assert_eq!(watcher.document("d").await.unwrap().as_deref(), Some("1"));
        assert_eq!(
            watcher.document_stamp("d").await.unwrap(),
            before,
            "a read is no change"
        );
        writer.put_document("d", "1".into()).await.unwrap();
        look(
            watcher.document_stamp("d").await.unwrap(),
            "the same body again",
        );
        writer
            .write_documents(vec![("d".into(), "2".into())], None, Flush::Deferred)
            .await
            .unwrap();
        look(
            watcher.document_stamp("d").await.unwrap(),
            "write_documents",
        );
        let mut batch = StoreBatch::new();
        batch.documents = vec![("d".into(), "3".into())];
        writer.commit(batch).await.unwrap();
        look(watcher.document_stamp("d").await.unwrap(), "a batch");
        writer.increment_counter("d").await.unwrap();
        look(watcher.document_stamp("d").await.unwrap(), "a counter");
        writer.delete_documents(vec!["d".into()]).await.unwrap();
        assert_eq!(watcher.document_stamp("d").await.unwrap(), None);
        writer.put_document("d", "1".into()).await.unwrap();
        look(
            watcher.document_stamp("d").await.unwrap(),
            "deleted and written again",
        );
    }

    /// The instances of a database made before the name column get their names from their
    /// bodies when it is migrated.
    #[tokio::test]
    async fn the_name_column_is_filled_from_the_instances_of_an_older_database() {
        let Some(db) = TestDb::create("name_migration").await else {
            return;
        };
        let old = PgStore::open_with(&db.url, &MIGRATIONS[..2]).await.unwrap();
        assert_eq!(old.schema_version(), 2);
        let client = admin_client(&db.url).await;
        for id in ["a", "b"] {
            let mut inst = conformance::instance(id, "v");
            if id == "b" {
                inst.vnf_instance_name = Some("a\u{0}b \"q\" \\".into());
            }
            let body = serde_json::to_string(&inst).unwrap();
            client
                .execute(
                    "INSERT INTO vnf_instances (id, body, version) VALUES ($1, $2, 1)",
                    &[&id, &body],
                )
                .await
                .unwrap();
        }
        drop(old);
        let store = db.store().await;
        assert_eq!(store.schema_version(), SCHEMA_VERSION);
        let page = store
            .instance_page(&InstanceQuery::first(10).named(vec!["a\u{0}b \"q\" \\".into()]))
            .await
            .unwrap();
        let ids: Vec<&str> = page.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["b"], "a name with a NUL, quotes and a backslash");
        let page = store
            .instance_page(&InstanceQuery::first(10).named(vec!["vnf-a".into()]))
            .await
            .unwrap();
        assert_eq!(page, vec![conformance::instance("a", "v")]);
    }

    /// A database made by the first schema (documents without stamps) is migrated with its
    /// documents kept, each given a stamp; a second pool on it (`reopen`) reads the same.
    #[tokio::test]
    async fn a_version_one_database_gets_stamps_and_keeps_its_documents() {
        let Some(db) = TestDb::create("stamps_migration").await else {
            return;
        };
        let old = PgStore::open_with(&db.url, &MIGRATIONS[..1]).await.unwrap();
        assert_eq!(old.schema_version(), 1);
        old.put_document("a", "kept".into()).await.unwrap();
        old.put_document("b", "kept too".into()).await.unwrap();
        let store = db.store().await;
        assert_eq!(store.schema_version(), SCHEMA_VERSION);
        assert_eq!(store.document("a").await.unwrap().as_deref(), Some("kept"));
        let (a, b) = (
            store.document_stamp("a").await.unwrap().unwrap(),
            store.document_stamp("b").await.unwrap().unwrap(),
        );
        assert_ne!(a, b);
        let second = store.reopen().unwrap();
        assert_eq!(second.schema_version(), SCHEMA_VERSION);
        assert_eq!(
            second.document("b").await.unwrap().as_deref(),
            Some("kept too")
        );
        second.put_document("a", "new".into()).await.unwrap();
        assert_ne!(store.document_stamp("a").await.unwrap(), Some(a));
    }
}
