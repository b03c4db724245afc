//! The state of the CLI's commands, in either store: the SQLite file (the embedded default,
//! [`SqliteStore`]) or a PostgreSQL database (`[state] url` / `VNFM_STATE_URL`, [`PgStore`]).
//!
//! - [`Documents`]: the named documents beside instances and occurrences (the simulated
//!   cloud, the Promise ledger, the cloud catalogue, the id-salt counter), as both stores keep
//!   them. The CLI's helpers that read or write documents take `&dyn Documents`, so they work
//!   on either store and on the server's SQLite connections alike.
//! - [`StateStore`]: one of the two, chosen by the configuration (`app::open_state`);
//!   a [`Store`] and [`Documents`] that hands every call to the store it holds.
//!
//! `vnfm serve` runs on either too: [`StateStore::reopen`] gives its notification deliveries a
//! connection (SQLite) or a pool (PostgreSQL) of their own, and [`StateStore::change_stamp`]
//! tells it that another process wrote a document (SQLite's `data_version`, PostgreSQL's
//! per-document stamps).

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use vnfm_core::driver::{DriverError, OpOccFilter, Store, StoreBatch, Versioned};
use vnfm_core::id::{OpOccId, VnfInstanceId};
use vnfm_core::lcm::{VnfInstance, VnfLcmOpOcc};

use crate::error::CliError;
use crate::store::{Flush, SqliteStore, StoreCalls};
use crate::store_postgres::PgStore;

/// Named documents kept beside instances and occurrences, in one transaction with them when a
/// batch carries them ([`StoreBatch`]'s documents), or alone through these calls.
///
/// # Contract
/// - A document reads back exactly as written; [`Documents::write_documents`] is atomic (every
///   put and the prune, or nothing).
/// - [`Documents::increment_counter`] never gives two callers the same value, across processes
///   on the same store.
/// - Names sort as byte strings (prefix scans and `documents_after` use that order).
#[async_trait]
pub trait Documents: Send + Sync + std::fmt::Debug {
    /// The document stored under `name`, if any.
    async fn document(&self, name: &str) -> Result<Option<String>, DriverError>;
    /// Stores `body` under `name`, replacing what was there.
    async fn put_document(&self, name: &str, body: String) -> Result<(), DriverError>;
    /// In one transaction: stores every `(name, body)` of `put`, then deletes the documents
    /// whose names start with `prune.0` and sort at or before `prune.1`.
    async fn write_documents(
        &self,
        put: Vec<(String, String)>,
        prune: Option<(String, String)>,
        flush: Flush,
    ) -> Result<(), DriverError>;
    /// The documents whose names start with `prefix`, in name order.
    async fn documents_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, DriverError>;
    /// At most `limit` documents whose names start with `prefix` and sort after `after`.
    async fn documents_after(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, String)>, DriverError>;
    /// Adds one to the counter kept as the document `name` (created at 1) and returns it.
    async fn increment_counter(&self, name: &str) -> Result<u64, DriverError>;
    /// Where the state is, for messages.
    fn location(&self) -> StateLocation;
}

/// Where a command's state is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateLocation {
    /// The SQLite file (`None`: in memory).
    File(Option<PathBuf>),
    /// The PostgreSQL database: its URL without the password (`user@host:port/database`).
    Database(String),
}

impl StateLocation {
    /// The error of a state that cannot be used: [`CliError::State`] naming the file, or
    /// [`CliError::StateDb`] naming the database.
    pub fn error(&self, message: impl Into<String>, source: Option<DriverError>) -> CliError {
        let message = message.into();
        match self {
            StateLocation::File(path) => CliError::State {
                path: path.clone().unwrap_or_else(|| PathBuf::from(":memory:")),
                message,
                source,
            },
            StateLocation::Database(url) => CliError::StateDb {
                url: url.clone(),
                message,
                source,
            },
        }
    }
}

impl std::fmt::Display for StateLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateLocation::File(Some(p)) => write!(f, "{}", p.display()),
            StateLocation::File(None) => f.write_str(":memory:"),
            StateLocation::Database(url) => f.write_str(url),
        }
    }
}

macro_rules! documents_of {
    ($ty:ty, $location:expr) => {
        #[async_trait]
        impl Documents for $ty {
            async fn document(&self, name: &str) -> Result<Option<String>, DriverError> {
                <$ty>::document(self, name).await
            }
            async fn put_document(&self, name: &str, body: String) -> Result<(), DriverError> {
                <$ty>::put_document(self, name, body).await
            }
            async fn write_documents(
                &self,
                put: Vec<(String, String)>,
                prune: Option<(String, String)>,
                flush: Flush,
            ) -> Result<(), DriverError> {
                <$ty>::write_documents(self, put, prune, flush).await
            }
            async fn documents_with_prefix(
                &self,
                prefix: &str,
            ) -> Result<Vec<(String, String)>, DriverError> {
                <$ty>::documents_with_prefix(self, prefix).await
            }
            async fn documents_after(
                &self,
                prefix: &str,
                after: Option<&str>,
                limit: usize,
            ) -> Result<Vec<(String, String)>, DriverError> {
                <$ty>::documents_after(self, prefix, after, limit).await
            }
            async fn increment_counter(&self, name: &str) -> Result<u64, DriverError> {
                <$ty>::increment_counter(self, name).await
            }
            fn location(&self) -> StateLocation {
                let f: fn(&$ty) -> StateLocation = $location;
                f(self)
            }
        }
    };
}

documents_of!(SqliteStore, |s| StateLocation::File(
    s.path().map(std::path::Path::to_path_buf)
));
documents_of!(PgStore, |s| StateLocation::Database(s.target().to_owned()));

/// The state store of a command: the SQLite file or a PostgreSQL database.
#[derive(Clone, Debug)]
pub enum StateStore {
    /// The SQLite state file (the default).
    Sqlite(SqliteStore),
    /// A PostgreSQL database (`[state] url`).
    Postgres(PgStore),
}

impl StateStore {
    /// The store as its documents.
    fn documents(&self) -> &dyn Documents {
        match self {
            StateStore::Sqlite(s) => s,
            StateStore::Postgres(s) => s,
        }
    }

    /// The store as a [`Store`].
    fn store(&self) -> &dyn Store {
        match self {
            StateStore::Sqlite(s) => s,
            StateStore::Postgres(s) => s,
        }
    }

    /// The SQLite state file; `None` for an in-memory SQLite database or PostgreSQL (where
    /// nothing of the state is kept beside a file).
    pub fn path(&self) -> Option<&Path> {
        match self {
            StateStore::Sqlite(s) => s.path(),
            StateStore::Postgres(_) => None,
        }
    }

    /// The calls made on the SQLite connection (shown in `vnfm serve`'s `/metrics`); `None`
    /// on PostgreSQL, whose pool does not count them.
    pub fn calls(&self) -> Option<StoreCalls> {
        match self {
            StateStore::Sqlite(s) => Some(s.calls()),
            StateStore::Postgres(_) => None,
        }
    }

    /// The same state through a connection of its own ([`SqliteStore::reopen`]) or a pool of
    /// its own ([`PgStore::reopen`]): calls on it never wait for this store's.
    ///
    /// # Errors
    /// The file cannot be opened again, or the pool cannot be built.
    pub fn reopen(&self) -> Result<Self, DriverError> {
        match self {
            StateStore::Sqlite(s) => s.reopen().map(StateStore::Sqlite),
            StateStore::Postgres(s) => s.reopen().map(StateStore::Postgres),
        }
    }

    /// A value that differs from the one read before whenever another process (or another
    /// connection of this one) wrote the document `name` since; it may also differ when
    /// something else changed. SQLite: the file's `data_version` (moves with any other
    /// connection's commit, [`SqliteStore::data_version`]); PostgreSQL: the document's
    /// stamp ([`PgStore::document_stamp`], `0` when there is no such document). Reading it is
    /// one small query: a caller compares it before reading a large document again.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn change_stamp(&self, name: &str) -> Result<i64, DriverError> {
        match self {
            StateStore::Sqlite(s) => s.data_version().await,
            StateStore::Postgres(s) => Ok(s.document_stamp(name).await?.unwrap_or(0)),
        }
    }

    /// The names and sizes (bytes) of the documents whose names start with `prefix`, in name
    /// order (as [`SqliteStore::document_sizes_with_prefix`]).
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn document_sizes_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, usize)>, DriverError> {
        match self {
            StateStore::Sqlite(s) => s.document_sizes_with_prefix(prefix).await,
            StateStore::Postgres(s) => s.document_sizes_with_prefix(prefix).await,
        }
    }

    /// Whether several servers may share this store (PostgreSQL): `vnfm serve` then numbers
    /// its outbox entries from the database, claims a subscription before delivering its
    /// outbox, and reads the subscriptions again when another replica changed them
    /// (docs/replicas.md). A SQLite file has one server.
    pub fn is_shared(&self) -> bool {
        matches!(self, StateStore::Postgres(_))
    }

    /// `n` outbox numbers no other replica gets ([`PgStore::outbox_sequences`]); `None` on
    /// SQLite, where the server numbers its entries itself.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn outbox_sequences(&self, n: usize) -> Result<Option<Vec<u64>>, DriverError> {
        match self {
            StateStore::Sqlite(_) => Ok(None),
            StateStore::Postgres(s) => s.outbox_sequences(n).await.map(Some),
        }
    }

    /// Claims or renews the delivery of `subscription`'s outbox for `holder` for `ttl`
    /// ([`PgStore::claim_delivery`]); always `true` on SQLite (one server).
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn claim_delivery(
        &self,
        subscription: &str,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, DriverError> {
        match self {
            StateStore::Sqlite(_) => Ok(true),
            StateStore::Postgres(s) => s.claim_delivery(subscription, holder, ttl).await,
        }
    }

    /// Gives up the claim of `holder` (of anyone with `None`) on `subscription`'s outbox
    /// ([`PgStore::release_delivery`]); nothing on SQLite.
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn release_delivery(
        &self,
        subscription: &str,
        holder: Option<&str>,
    ) -> Result<(), DriverError> {
        match self {
            StateStore::Sqlite(_) => Ok(()),
            StateStore::Postgres(s) => s.release_delivery(subscription, holder).await,
        }
    }

    /// Deletes the expired delivery claims ([`PgStore::drop_expired_claims`]); nothing on
    /// SQLite.
    ///
    /// # Errors
    /// The store cannot be written.
    pub async fn drop_expired_claims(&self) -> Result<(), DriverError> {
        match self {
            StateStore::Sqlite(_) => Ok(()),
            StateStore::Postgres(s) => s.drop_expired_claims().await,
        }
    }

    /// Deletes the documents `names` in one transaction (as
    /// [`SqliteStore::delete_documents`]).
    ///
    /// # Errors
    /// The store cannot be written; nothing is deleted then.
    pub async fn delete_documents(&self, names: Vec<String>) -> Result<(), DriverError> {
        match self {
            StateStore::Sqlite(s) => s.delete_documents(names).await,
            StateStore::Postgres(s) => s.delete_documents(names).await,
        }
    }
}

#[async_trait]
impl Documents for StateStore {
    async fn document(&self, name: &str) -> Result<Option<String>, DriverError> {
        self.documents().document(name).await
    }
    async fn put_document(&self, name: &str, body: String) -> Result<(), DriverError> {
        self.documents().put_document(name, body).await
    }
    async fn write_documents(
        &self,
        put: Vec<(String, String)>,
        prune: Option<(String, String)>,
        flush: Flush,
    ) -> Result<(), DriverError> {
        self.documents().write_documents(put, prune, flush).await
    }
    async fn documents_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, DriverError> {
        self.documents().documents_with_prefix(prefix).await
    }
    async fn documents_after(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, String)>, DriverError> {
        self.documents().documents_after(prefix, after, limit).await
    }
    async fn increment_counter(&self, name: &str) -> Result<u64, DriverError> {
        self.documents().increment_counter(name).await
    }
    fn location(&self) -> StateLocation {
        self.documents().location()
    }
}

#[async_trait]
impl Store for StateStore {
    async fn commit(&self, batch: StoreBatch) -> Result<(), DriverError> {
        self.store().commit(batch).await
    }
    async fn instance(&self, id: &VnfInstanceId) -> Result<VnfInstance, DriverError> {
        self.store().instance(id).await
    }
    async fn instance_entry(
        &self,
        id: &VnfInstanceId,
    ) -> Result<Versioned<VnfInstance>, DriverError> {
        self.store().instance_entry(id).await
    }
    async fn op_occ_entry(&self, id: &OpOccId) -> Result<Versioned<VnfLcmOpOcc>, DriverError> {
        self.store().op_occ_entry(id).await
    }
    async fn instances(&self) -> Result<Vec<VnfInstance>, DriverError> {
        self.store().instances().await
    }
    async fn instance_page(
        &self,
        query: &vnfm_core::driver::InstanceQuery,
    ) -> Result<Vec<VnfInstance>, DriverError> {
        self.store().instance_page(query).await
    }
    async fn op_occ(&self, id: &OpOccId) -> Result<VnfLcmOpOcc, DriverError> {
        self.store().op_occ(id).await
    }
    async fn op_occs(&self, filter: OpOccFilter) -> Result<Vec<VnfLcmOpOcc>, DriverError> {
        self.store().op_occs(filter).await
    }
}
