//! The Promise capacity ledger of the CLI, kept in the state file between runs.
//!
//! The ledger ([`vnfm_core::reservation::Ledger`]) and the id generator it draws new ids from
//! are saved together as one JSON document ([`PROMISE_DOCUMENT`]) of the state file: its
//! [`LedgerSnapshot`] (camelCase, Promise's names) and the [`IdGen`] state, so a run after a
//! restart continues with the same reservations, allocations and id sequence.
//!
//! A state file without a ledger starts with the capacity of the simulated cloud's zones
//! ([`Ledger::add_catalogue`]): the free vCPUs, memory and disk of each zone's available
//! hosts, and [`DEFAULT_QUOTA`] on the other lines.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vnfm_core::id::IdGen;
use vnfm_core::reservation::{Capacity, Ledger, LedgerError, LedgerSnapshot};
use vnfm_core::zone::ComputeZone;

use crate::config::Config;
use crate::error::CliError;
use crate::store::SqliteStore;

/// The state-file document holding the ledger.
pub const PROMISE_DOCUMENT: &str = "promise";

/// The lines a zone catalogue does not report, per zone, for a ledger seeded from the
/// simulated cloud: OpenStack's default project quotas (Nova `instances` 10, Neutron
/// `floatingip` 50, Cinder `volumes` 10 and `snapshots` 10).
pub const DEFAULT_QUOTA: Capacity = Capacity {
    cores: 0,
    ram: 0,
    instances: 10,
    addresses: 50,
    volumes: 10,
    size: 0,
    snapshots: 10,
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
#[derive(Debug)]
pub struct PromiseBook {
    /// The ledger.
    pub ledger: Ledger,
    /// Where new ids come from.
    pub ids: IdGen,
}

impl PromiseBook {
    /// A new ledger holding the capacity of `zones` from `now` on (see the module docs), its
    /// ids seeded with `seed`.
    ///
    /// # Errors
    /// [`CliError::Promise`] when the catalogue holds amounts the ledger refuses.
    pub fn from_catalogue(
        zones: &[ComputeZone],
        seed: u64,
        now: DateTime<Utc>,
    ) -> Result<Self, CliError> {
        let mut ids = IdGen::seeded(seed);
        let mut ledger = Ledger::default();
        ledger.add_catalogue(zones, DEFAULT_QUOTA, &mut ids, now)?;
        Ok(PromiseBook { ledger, ids })
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
}

fn state_error(
    config: &Config,
    message: String,
    source: Option<vnfm_core::driver::DriverError>,
) -> CliError {
    CliError::State {
        path: config.state_path(),
        message,
        source,
    }
}

/// The ledger saved in the state file, if any.
///
/// # Errors
/// [`CliError::State`] (exit 2) when the state file cannot be read or its ledger document is
/// not one (naming the document and what was wrong).
pub async fn load(store: &SqliteStore, config: &Config) -> Result<Option<PromiseBook>, CliError> {
    let Some(body) = store
        .document(PROMISE_DOCUMENT)
        .await
        .map_err(|e| state_error(config, "cannot read the reservation ledger".into(), Some(e)))?
    else {
        return Ok(None);
    };
    let doc: PromiseDocument = serde_json::from_str(&body).map_err(|e| {
        state_error(
            config,
            format!(
                "document {PROMISE_DOCUMENT}: line {} column {}: {e}; expected a saved \
                 reservation ledger",
                e.line(),
                e.column()
            ),
            None,
        )
    })?;
    PromiseBook::from_document(doc)
        .map(Some)
        .map_err(|e| state_error(config, format!("document {PROMISE_DOCUMENT}: {e}"), None))
}

/// Saves the ledger in the state file.
///
/// # Errors
/// [`CliError::State`] when the state file cannot be written.
pub async fn save(
    store: &SqliteStore,
    book: &PromiseBook,
    config: &Config,
) -> Result<(), CliError> {
    let body = serde_json::to_string(&book.document()).map_err(|e| {
        CliError::Output(std::io::Error::other(format!(
            "cannot encode the reservation ledger: {e}"
        )))
    })?;
    store
        .put_document(PROMISE_DOCUMENT, body)
        .await
        .map_err(|e| state_error(config, "cannot save the reservation ledger".into(), Some(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vnfm_core::reservation::ReservationRequest;
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

    #[tokio::test]
    async fn survives_a_restart_with_its_id_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        let config = Config::default().with_overrides(&crate::config::Overrides {
            state: Some(path.clone()),
            ..Default::default()
        });
        let store = SqliteStore::open(&path).unwrap();
        assert!(load(&store, &config).await.unwrap().is_none());
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
        save(&store, &book, &config).await.unwrap();
        let next_here = book.ids.next_uuid();
        drop(store);

        let store = SqliteStore::open(&path).unwrap();
        let mut again = load(&store, &config).await.unwrap().unwrap();
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
        let config = Config::default().with_overrides(&crate::config::Overrides {
            state: Some(path.clone()),
            ..Default::default()
        });
        let store = SqliteStore::open(&path).unwrap();
        store
            .put_document(PROMISE_DOCUMENT, "{\"ledger\": 3}".into())
            .await
            .unwrap();
        let err = load(&store, &config).await.unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("document promise"), "{msg}");
        assert!(msg.contains("state.sqlite"), "{msg}");
        assert_eq!(err.exit_code(), 2);
    }
}
