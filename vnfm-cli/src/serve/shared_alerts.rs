//! The alert state shared by the replicas on PostgreSQL: heal windows, remembered alerts and
//! scale cooldowns are one document ([`ALERT_DOCUMENT`]) that every replica changes by
//! compare-and-swap on its stamp (`PgStore::write_document_if`).
//!
//! A change that decides ([`App::alert_change`]: a webhook judged, the dispatcher taking the
//! windows that closed, a heal that did not start put back, a scale's cooldown ended) runs on
//! the replica's handler as it was last synchronised with the database and is written on the
//! stamp read then. When another replica wrote in between, the write is refused: the change is
//! undone (its busy marks), the handler is restored from the database, and the change runs
//! again on what the others decided (a window another replica took is no longer there; an alert
//! another replica accepted is a duplicate; a cooldown another replica started refuses the
//! scale). So of two replicas, exactly one takes a closed window, and an alert accepted by any
//! replica joins the one window of its instance. The handler's decisions stay in the core
//! (`AlertHandler`); this module only keeps its copy in step with the database.
//!
//! What is not written at once (when an ignored alert was last seen, a resolved alert
//! forgotten) is written with the next change, or by [`App::alert_sync`] (the dispatcher, every
//! second), unless another replica wrote first: then that replica's state wins and the
//! refresh is lost (a remembered alert may be forgotten earlier than `dedupe_ttl`; at worst a
//! repeat of it joins a window as a new alert would).
//!
//! Busy marks (which instances run an operation of this replica) stay per replica and are not
//! in the document: a replica that takes a window whose instance another replica is operating
//! on gets a conflict when the heal starts, and the window waits for that operation (the path
//! of an operation started by another program).

use std::time::Duration;

use vnfm_core::alert::{AlertHandler, AlertState};
use vnfm_core::driver::DriverError;

use super::state::{AlertSync, App, ALERT_DOCUMENT};
use crate::state_store::StateStore;
use crate::store_postgres::cas::Expect;
use crate::store_postgres::PgStore;

/// How many times a change is tried against other replicas' writes before it is given up
/// (an answer 503, the dispatcher trying again a second later).
const ATTEMPTS: u32 = 32;

impl App {
    /// The PostgreSQL store when the alert state is shared by replicas (`None` on SQLite,
    /// where the server alone writes it, through the journal and snapshots).
    pub(super) fn shared_alert_store(&self) -> Option<&PgStore> {
        match &self.state {
            StateStore::Postgres(pg) => Some(pg),
            StateStore::Sqlite(_) => None,
        }
    }

    /// Runs `change` on the alert handler and writes the result to the shared document, as
    /// one decision among the replicas (see the module docs); its result once written. When
    /// another replica wrote first, `undo` takes back what the discarded result did outside
    /// the document (its busy marks) and `change` runs again on the state read back.
    ///
    /// # Errors
    /// The database failed, or other replicas kept writing first `ATTEMPTS` times: nothing
    /// of the change is kept (the handler is read again before the next change).
    pub(super) async fn alert_change<R>(
        &self,
        pg: &PgStore,
        mut change: impl FnMut(&mut AlertHandler) -> R,
        mut undo: impl FnMut(&mut AlertHandler, R),
    ) -> Result<R, DriverError> {
        let mut sync = self.alert_sync.lock().await;
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                // Another replica writes at the same moment: a short, growing, spread wait.
                let jitter = u64::from(
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.subsec_nanos())
                        % 8,
                );
                let ms = (1u64 << attempt.min(5)) + jitter;
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            let expect = match sync.known {
                Some(e) => e,
                None => self.alert_reload(pg, &mut sync).await?,
            };
            let (result, body, generation) = {
                let mut h = self.lock_alerts();
                let result = change(&mut h);
                let generation = self.changed_locked(&h);
                let body = serde_json::to_string(&h.snapshot());
                (result, body, generation)
            };
            let body = match body {
                Ok(b) => b,
                Err(e) => {
                    undo(&mut self.lock_alerts(), result);
                    sync.known = None;
                    return Err(DriverError::Other {
                        driver: "postgres",
                        message: format!("cannot encode the alert state: {e}"),
                        source: None,
                    });
                }
            };
            match pg.write_document_if(ALERT_DOCUMENT, &body, expect).await {
                Ok(stamp) => {
                    sync.known = Some(Expect::Stamp(stamp));
                    sync.synced_generation = generation;
                    return Ok(result);
                }
                Err(e) => {
                    undo(&mut self.lock_alerts(), result);
                    sync.known = None;
                    if !matches!(e, DriverError::Conflict { .. }) {
                        return Err(e);
                    }
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| DriverError::Conflict {
            driver: "postgres",
            message: "the alert state kept changing under this replica".into(),
        }))
    }

    /// Brings the handler in step with the database (the dispatcher, every second): writes
    /// what changed here since (when no other replica wrote meanwhile), or takes the others'
    /// state when one did.
    ///
    /// Returns whether the handler is in step (its changes written, or the others' taken).
    pub(super) async fn alert_sync(&self, pg: &PgStore) -> bool {
        let dirty = {
            let sync = self.alert_sync.lock().await;
            self.generation.load(std::sync::atomic::Ordering::SeqCst) > sync.synced_generation
                || sync.known.is_none()
        };
        if dirty {
            if let Err(e) = self.alert_change(pg, |_| (), |_, ()| ()).await {
                tracing::warn!("cannot save the alert state: {e}");
                return false;
            }
            return true;
        }
        let mut sync = self.alert_sync.lock().await;
        let stamp = match pg.document_stamp(ALERT_DOCUMENT).await {
            Ok(s) => s.map_or(Expect::Absent, Expect::Stamp),
            Err(e) => {
                tracing::warn!("cannot read the alert state's stamp: {e}");
                return false;
            }
        };
        if sync.known != Some(stamp) {
            if let Err(e) = self.alert_reload(pg, &mut sync).await {
                tracing::warn!("cannot read the alert state: {e}");
                return false;
            }
        }
        true
    }

    /// Restores the handler from the document (its busy marks kept); the stamp read.
    async fn alert_reload(
        &self,
        pg: &PgStore,
        sync: &mut AlertSync,
    ) -> Result<Expect, DriverError> {
        let read = pg.document_with_stamp(ALERT_DOCUMENT).await?;
        let (state, expect) = match read {
            Some((body, stamp)) => {
                let state: AlertState =
                    serde_json::from_str(&body).map_err(|e| DriverError::Other {
                        driver: "postgres",
                        message: format!(
                            "{}: the shared alert state (document {ALERT_DOCUMENT}) is \
                             unreadable: {e}",
                            pg.target()
                        ),
                        source: None,
                    })?;
                (state, Expect::Stamp(stamp))
            }
            None => (AlertState::default(), Expect::Absent),
        };
        let generation = {
            let mut h = self.lock_alerts();
            h.restore(state);
            self.changed_locked(&h)
        };
        sync.known = Some(expect);
        sync.synced_generation = generation;
        Ok(expect)
    }
}
