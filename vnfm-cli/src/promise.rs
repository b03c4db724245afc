//! The Promise capacity ledger of the state file: ONE document shared by the command line
//! (`vnfm reservation | allocation | capacity | provider`, and `instantiate` / `scale` /
//! `terminate` drawing from and giving back to reservations) and by `vnfm serve`
//! (`/promise/v1`).
//!
//! The ledger ([`vnfm_core::reservation::Ledger`]) and the id generator it draws new ids from
//! are saved together as one JSON document ([`PROMISE_DOCUMENT`]) of the state file: its
//! [`LedgerSnapshot`] (camelCase, Promise's names) and the [`IdGen`] state, so a run after a
//! restart continues with the same reservations, allocations and id sequence. Both the CLI and
//! the server encode and decode it here ([`PromiseBook::encode`], [`PromiseBook::decode`]) and
//! read and write it here ([`load`], [`save`], [`write()`]).
//!
//! A state file without the document holds an empty ledger: no zone has capacity until a
//! provider is registered (`vnfm provider add`: the zone catalogue of the simulated cloud, see
//! [`PromiseBook::add_catalogue`], or declared amounts; `POST /promise/v1/pools` on the
//! server).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vnfm_core::driver::{Clock, DriverError};
use vnfm_core::grant::GrantRequest;
use vnfm_core::id::IdGen;
use vnfm_core::lifecycle::StartError;
use vnfm_core::reservation::book::{BookError, LedgerChange, ReservationBook};
use vnfm_core::reservation::{
    lcm, Allocation, Ledger, LedgerError, LedgerSnapshot, Outcome, Pool, ReservationId,
};
use vnfm_core::zone::ComputeZone;

use crate::config::Config;
use crate::error::CliError;
use crate::state_store::Documents;

/// The state-file document holding the ledger (with its id generator).
pub const PROMISE_DOCUMENT: &str = "promise";

pub use vnfm_core::reservation::lcm::{
    Provider, CATALOGUE_PROVIDER, DECLARED_PROVIDER, DEFAULT_QUOTA,
};

/// What the state file holds for the ledger.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromiseDocument {
    /// The ledger.
    pub ledger: LedgerSnapshot,
    /// The id generator's state.
    pub ids: IdGen,
}

/// A ledger with its id generator.
#[derive(Clone, Debug)]
pub struct PromiseBook {
    /// The ledger.
    pub ledger: Ledger,
    /// Where new ids come from.
    pub ids: IdGen,
}

impl PromiseBook {
    /// An empty ledger (no zone, default policy), its ids seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        PromiseBook {
            ledger: Ledger::default(),
            ids: IdGen::seeded(seed),
        }
    }

    /// A new ledger holding the capacity of `zones` from `now` on (see
    /// [`PromiseBook::add_catalogue`]), its ids seeded with `seed`.
    ///
    /// # Errors
    /// [`CliError::Promise`] when the catalogue holds amounts the ledger refuses.
    pub fn from_catalogue(
        zones: &[ComputeZone],
        seed: u64,
        now: DateTime<Utc>,
    ) -> Result<Self, CliError> {
        let mut book = PromiseBook::new(seed);
        book.add_catalogue(zones, now)?;
        Ok(book)
    }

    /// Registers a VIM's zone catalogue as the provider [`CATALOGUE_PROVIDER`] from `now` on
    /// (the core's [`vnfm_core::reservation::lcm::add_catalogue`]).
    ///
    /// # Errors
    /// [`CliError::Promise`] (exit 2) when the catalogue is already registered (registering it
    /// twice would count its capacity twice), or when the ledger refuses it.
    pub fn add_catalogue(
        &mut self,
        zones: &[ComputeZone],
        now: DateTime<Utc>,
    ) -> Result<Outcome<Vec<Pool>>, CliError> {
        Ok(lcm::add_catalogue(
            &mut self.ledger,
            &mut self.ids,
            zones,
            now,
        )?)
    }

    /// The providers of the ledger's pools, by name (pools without a source are `declared`).
    pub fn providers(&self) -> Vec<Provider> {
        lcm::providers(&self.ledger)
    }

    /// The document to save.
    pub fn document(&self) -> PromiseDocument {
        PromiseDocument {
            ledger: self.ledger.snapshot(),
            ids: self.ids.clone(),
        }
    }

    /// The ledger and ids of a saved document.
    ///
    /// # Errors
    /// [`LedgerError::Invalid`] naming the inconsistent entry of the snapshot.
    pub fn from_document(doc: PromiseDocument) -> Result<Self, LedgerError> {
        Ok(PromiseBook {
            ledger: Ledger::restore(doc.ledger)?,
            ids: doc.ids,
        })
    }

    /// The JSON body of [`PROMISE_DOCUMENT`].
    ///
    /// # Errors
    /// A message when the ledger cannot be encoded.
    pub fn encode(&self) -> Result<String, String> {
        serde_json::to_string(&self.document())
            .map_err(|e| format!("cannot encode the reservation ledger: {e}"))
    }

    /// The book of a [`PROMISE_DOCUMENT`] body.
    ///
    /// # Errors
    /// A message naming the document and what is wrong: the line and column of a JSON error,
    /// or the inconsistent entry of the snapshot.
    pub fn decode(body: &str) -> Result<Self, String> {
        let doc: PromiseDocument = serde_json::from_str(body).map_err(|e| {
            format!(
                "document {PROMISE_DOCUMENT}: line {} column {}: {e}; expected a saved \
                 reservation ledger ({{\"ledger\": ..., \"ids\": ...}})",
                e.line(),
                e.column()
            )
        })?;
        PromiseBook::from_document(doc).map_err(|e| format!("document {PROMISE_DOCUMENT}: {e}"))
    }
}

fn state_error(store: &dyn Documents, message: String, source: Option<DriverError>) -> CliError {
    store.location().error(message, source)
}

/// The ledger saved in the state file, if any.
///
/// # Errors
/// [`CliError::State`] (exit 2) when the state file cannot be read or its ledger document is
/// not one (naming the document and what was wrong).
pub async fn load(store: &dyn Documents) -> Result<Option<PromiseBook>, CliError> {
    let Some(body) = store
        .document(PROMISE_DOCUMENT)
        .await
        .map_err(|e| state_error(store, "cannot read the reservation ledger".into(), Some(e)))?
    else {
        return Ok(None);
    };
    PromiseBook::decode(&body)
        .map(Some)
        .map_err(|m| state_error(store, m, None))
}

/// The ledger saved in the state file, or an empty one ([`PromiseBook::new`] seeded with the
/// configured seed) when there is none.
///
/// # Errors
/// As [`load`].
pub async fn load_or_new(store: &dyn Documents, config: &Config) -> Result<PromiseBook, CliError> {
    Ok(load(store)
        .await?
        .unwrap_or_else(|| PromiseBook::new(config.vim.seed)))
}

/// Writes an encoded book ([`PromiseBook::encode`]) as [`PROMISE_DOCUMENT`].
///
/// # Errors
/// The store's error when the state file cannot be written.
pub async fn write(store: &dyn Documents, body: String) -> Result<(), DriverError> {
    store.put_document(PROMISE_DOCUMENT, body).await
}

/// Saves the ledger in the state file.
///
/// # Errors
/// [`CliError::State`] when the state file cannot be written.
pub async fn save(store: &dyn Documents, book: &PromiseBook) -> Result<(), CliError> {
    let body = book
        .encode()
        .map_err(|m| CliError::Output(std::io::Error::other(m)))?;
    write(store, body)
        .await
        .map_err(|e| state_error(store, "cannot save the reservation ledger".into(), Some(e)))
}

/// The effective `now`: `--now`, else the clock, never before the ledger's last operation
/// ([`lcm::effective_now`] over a reading of the clock).
pub(crate) fn effective_now(
    now: Option<DateTime<Utc>>,
    ledger: &Ledger,
    clock: &dyn Clock,
) -> DateTime<Utc> {
    lcm::effective_now(ledger, now, clock.now())
}

/// An unknown reservation id (show, update, cancel): exit 2, worded as what it is, not as a
/// rejected allocation.
pub(crate) fn unknown_reservation(id: &str) -> CliError {
    CliError::Usage(format!(
        "reservation {id} does not exist in the state file's ledger (`vnfm reservation query` \
         lists the reservations)"
    ))
}

// ----- grants and operations drawing from reservations --------------------------------------

/// Draws the new VNFCs of `grant` granted into the zone of reservation `from.reservation` from it (see
/// [`vnfm_core::lifecycle::granter::draw_reservation`]), in the ledger of the state file, and
/// saves the ledger.
///
/// # Errors
/// [`CliError::Promise`] when the reservation cannot give them (exit 4 when it has not enough
/// left, 2 otherwise); [`CliError::State`] for an unusable state file.
pub async fn draw_grant(
    store: &dyn Documents,
    grant: &mut vnfm_core::grant::Grant,
    request: &GrantRequest,
    flavour: &vnfm_core::package::Flavour,
    from: DrawFrom<'_>,
    clock: &dyn Clock,
) -> Result<Vec<Allocation>, CliError> {
    let DrawFrom {
        reservation: id,
        now,
    } = from;
    let Some(mut book) = load(store).await? else {
        return Err(unknown_reservation(id));
    };
    let now = effective_now(now, &book.ledger, clock);
    let drawn = vnfm_core::lifecycle::granter::draw_reservation(
        grant,
        request,
        flavour,
        &ReservationId::new(id),
        &mut book.ledger,
        &mut book.ids,
        now,
    );
    save(store, &book).await?;
    Ok(drawn?)
}

/// The reservation a grant draws from, and when.
#[derive(Clone, Copy, Debug)]
pub struct DrawFrom<'a> {
    /// The reservation id.
    pub reservation: &'a str,
    /// The time of the draw [default: the clock, never before the ledger's last operation].
    pub now: Option<DateTime<Utc>>,
}

/// The state file's ledger as the book [`vnfm_core::lifecycle::Lifecycle::start`] draws from
/// and gives back to (the core decides what; see [`vnfm_core::lifecycle::start`]): each change
/// reads the ledger, applies the change at `now`
/// ([`vnfm_core::reservation::lcm::effective_now`]) and saves it when it changed (or refused:
/// what fell due happened).
#[derive(Debug)]
pub struct FileBook<'a> {
    store: &'a dyn Documents,
    /// `--now`, else the clock.
    now: Option<DateTime<Utc>>,
    clock: &'a dyn Clock,
}

impl<'a> FileBook<'a> {
    /// The ledger of `store`, changed at `now` (default: `clock`).
    pub fn new(store: &'a dyn Documents, now: Option<DateTime<Utc>>, clock: &'a dyn Clock) -> Self {
        Self { store, now, clock }
    }
}

#[async_trait::async_trait]
impl ReservationBook for FileBook<'_> {
    async fn apply(&self, change: LedgerChange<'_>) -> Result<(), BookError> {
        let unusable = |e: CliError| BookError::Unusable(Box::new(e));
        let Some(mut book) = load(self.store).await.map_err(unusable)? else {
            return Err(BookError::NoLedger);
        };
        let now = effective_now(self.now, &book.ledger, self.clock);
        let PromiseBook { ledger, ids } = &mut book;
        let changed = change(ledger, ids, now);
        if !matches!(changed, Ok(false)) {
            save(self.store, &book).await.map_err(unusable)?;
        }
        changed.map(|_| ()).map_err(BookError::Ledger)
    }
}

/// The error of a book that did not give what `reservation` was asked for.
pub fn book_error(reservation: &str, e: BookError) -> CliError {
    match e {
        BookError::NoLedger => unknown_reservation(reservation),
        BookError::Ledger(e) => e.into(),
        BookError::Unusable(e) => match e.downcast::<CliError>() {
            Ok(e) => *e,
            Err(e) => CliError::Output(std::io::Error::other(e.to_string())),
        },
    }
}

/// The CLI's error for an operation [`vnfm_core::lifecycle::Lifecycle::start`] did not run.
pub fn start_error(e: StartError) -> CliError {
    match e {
        StartError::Lcm(e) => e.into(),
        StartError::NoGrant { kind, detail, .. } => CliError::Grant { kind, detail },
        StartError::Draw { reservation, error } => book_error(reservation.as_str(), error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;
    use vnfm_core::reservation::{Capacity, ReservationRequest};
    use vnfm_core::zone::{ComputeHost, Resources};

    fn t(h: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + h * 3600, 0).unwrap()
    }

    fn zones() -> Vec<ComputeZone> {
        vec![ComputeZone {
            name: "AZ-1".into(),
            available: true,
            hosts: Some(vec![ComputeHost {
                name: "h1".into(),
                available: true,
                free: Some(Resources::new(8, 16384, 100)),
            }]),
        }]
    }

    #[test]
    fn seeded_from_the_catalogue() {
        let book = PromiseBook::from_catalogue(&zones(), 1, t(0)).unwrap();
        assert_eq!(
            book.providers(),
            vec![Provider {
                name: CATALOGUE_PROVIDER.into(),
                zones: vec!["AZ-1".into()],
                pools: 1
            }]
        );
        let r = book
            .ledger
            .capacity(
                &"AZ-1".into(),
                vnfm_core::reservation::Window::new(t(0), t(1)),
            )
            .unwrap();
        assert_eq!(r.available.cores, 8);
        assert_eq!(r.available.ram, 16384);
        assert_eq!(r.available.size, 100);
        assert_eq!(r.available.instances, 10);
    }

    #[test]
    fn the_catalogue_is_registered_once() {
        let mut book = PromiseBook::from_catalogue(&zones(), 1, t(0)).unwrap();
        let err = book.add_catalogue(&zones(), t(1)).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("already registered"), "{err}");
        assert_eq!(book.ledger.pools().len(), 1);
    }

    #[test]
    fn encode_decode_round_trip_and_errors_name_the_document() {
        let book = PromiseBook::from_catalogue(&zones(), 1, t(0)).unwrap();
        let again = PromiseBook::decode(&book.encode().unwrap()).unwrap();
        assert_eq!(again.ledger.snapshot(), book.ledger.snapshot());
        let err = PromiseBook::decode("{\"ledger\": 3}").unwrap_err();
        assert!(err.contains("document promise: line 1"), "{err}");
    }

    #[tokio::test]
    async fn survives_a_restart_with_its_id_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        let store = SqliteStore::open(&path).unwrap();
        assert!(load(&store).await.unwrap().is_none());
        let mut book = PromiseBook::from_catalogue(&zones(), 1, t(0)).unwrap();
        let r = book
            .ledger
            .create_reservation(
                ReservationRequest::new("AZ-1", Capacity::compute(4, 1024, 1))
                    .with_window(t(1), t(2)),
                &mut book.ids,
                t(0),
            )
            .unwrap()
            .value;
        save(&store, &book).await.unwrap();
        let next_here = book.ids.next_uuid();
        drop(store);

        let store = SqliteStore::open(&path).unwrap();
        let mut again = load(&store).await.unwrap().unwrap();
        assert_eq!(again.ledger.reservation(&r.id), Some(r));
        assert_eq!(again.ids.next_uuid(), next_here);
        // The restored ledger still refuses what does not fit next to the reservation.
        let err = again
            .ledger
            .create_reservation(
                ReservationRequest::new("AZ-1", Capacity::compute(5, 1024, 1))
                    .with_window(t(1), t(2)),
                &mut again.ids,
                t(0),
            )
            .unwrap_err();
        assert!(matches!(err, LedgerError::DoesNotFit { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_corrupt_document_is_a_state_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        let store = SqliteStore::open(&path).unwrap();
        store
            .put_document(PROMISE_DOCUMENT, "{\"ledger\": 3}".into())
            .await
            .unwrap();
        let err = load(&store).await.unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("document promise"), "{msg}");
        assert!(msg.contains("state.sqlite"), "{msg}");
        assert_eq!(err.exit_code(), 2);
    }
}
