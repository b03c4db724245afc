//! The alert state shared by the replicas on PostgreSQL: heal windows, remembered alerts and
//! scale cooldowns are one document ([`ALERT_DOCUMENT`]) that the replicas change one at a
//! time, under the document's lock (`PgStore::with_locked_document`).
//!
//! A change that decides ([`App::alert_change`]: a webhook judged, the dispatcher taking the
//! windows that closed, a heal that did not start put back, a scale's cooldown ended) takes the
//! lock, brings the replica's handler up to date first when another replica wrote the document
//! since this one last read or wrote it (its stamp moved), runs on it, and writes it back in the
//! same transaction. So every change runs on what the others decided (a window another replica
//! took is no longer there; an alert another replica accepted is a duplicate; a cooldown
//! another replica started refuses the scale): of two replicas, exactly one takes a closed
//! window, and an alert accepted by any replica joins the one window of its instance. The
//! replicas wait for each other instead of trying again (an earlier version changed the
//! document by compare-and-swap and tried again on a conflict: with three replicas under an
//! alert storm most tries were lost). The handler's decisions stay in the core
//! (`AlertHandler`); this module only keeps its copy in step with the database.
//!
//! A replica's webhooks take their turn as a group ([`App::judge_grouped`]): those that
//! arrive while a change is in flight queue, and the first of them to get the turn judges them
//! all, in order, as one change (one transaction, one write of the document), then answers
//! each once it is committed (a webhook so judged takes its answer without waiting for the
//! turn itself). Judged in order on one handler, they decide as they would one
//! at a time (a duplicate within the group is a duplicate; each alert joins the window its
//! predecessors opened), and a failed change fails them all (nothing of it kept). Under an
//! alert storm a replica so writes the document once per round trip to the database rather
//! than once per webhook. A change none of whose alerts must be saved now
//! (`AlertOutcome::must_be_saved`: duplicates, resolved or refused alerts only) is not
//! written at all: it is left to the next write, as below.
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

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use vnfm_core::alert::{Action, AlertHandler, AlertOutcome, AlertState, Endpoint, Webhook};
use vnfm_core::driver::DriverError;
use vnfm_core::id::VnfInstanceId;
use vnfm_core::lcm::VnfInstance;

use super::state::{AlertSync, App, PendingWebhook, ALERT_DOCUMENT};
use crate::state_store::StateStore;
use crate::store_postgres::cas::Expect;
use crate::store_postgres::PgStore;

impl App {
    /// The PostgreSQL store when the alert state is shared by replicas (`None` on SQLite,
    /// where the server alone writes it, through the journal and snapshots).
    pub(super) fn shared_alert_store(&self) -> Option<&PgStore> {
        match &self.state {
            StateStore::Postgres(pg) => Some(pg),
            StateStore::Sqlite(_) => None,
        }
    }

    /// Runs `change` on the alert handler, brought up to date under the shared document's lock,
    /// and writes the result in the same transaction, as one decision among the replicas (see
    /// the module docs); its result once written. When the write fails, `undo` takes back what
    /// the result did outside the document (its busy marks).
    ///
    /// # Errors
    /// The database failed: nothing of the change is kept (the handler is read again before
    /// the next change).
    pub(super) async fn alert_change<R: Send>(
        &self,
        pg: &PgStore,
        change: impl FnMut(&mut AlertHandler) -> R + Send,
        undo: impl FnMut(&mut AlertHandler, R),
    ) -> Result<R, DriverError> {
        let mut sync = self.alert_sync.lock().await;
        self.alert_change_in(&mut sync, pg, change, undo, |_| true)
            .await
    }

    /// [`App::alert_change`] with the turn (`sync`) already taken, written only when
    /// `write(result)` says so: otherwise the change is left to the next write (it counts as
    /// not in step: [`App::alert_sync`] writes it within a second, unless another replica
    /// writes first).
    async fn alert_change_in<R: Send>(
        &self,
        sync: &mut AlertSync,
        pg: &PgStore,
        mut change: impl FnMut(&mut AlertHandler) -> R + Send,
        mut undo: impl FnMut(&mut AlertHandler, R),
        write: impl Fn(&R) -> bool + Send + Sync,
    ) -> Result<R, DriverError> {
        // Taken: put back only once the change is written, so that a change that is not (the
        // database failed, or this future was dropped midway) is never written later as if it
        // had been: the next change reads the document again.
        let known = match sync.known.take() {
            Some(Expect::Stamp(s)) => Some(s),
            _ => None,
        };
        // The change's result, and its generation when it is written, kept here so that a
        // failed commit can undo it.
        let mut made: Option<(R, Option<u64>)> = None;
        let (slot, change, write) = (&mut made, &mut change, &write);
        let written = pg
            .with_locked_document(ALERT_DOCUMENT, known, |current| async move {
                if let Some(body) = current {
                    let state = self.decode_alert_state(pg, &body)?;
                    self.lock_alerts().restore(state);
                }
                let (result, body, generation) = {
                    let mut h = self.lock_alerts();
                    let result = change(&mut h);
                    let generation = self.changed_locked(&h);
                    let body = write(&result).then(|| serde_json::to_string(&h.snapshot()));
                    (result, body, generation)
                };
                *slot = Some((result, body.is_some().then_some(generation)));
                let body = body.transpose().map_err(|e| DriverError::Other {
                    driver: "postgres",
                    message: format!("cannot encode the alert state: {e}"),
                    source: None,
                })?;
                Ok(((), body))
            })
            .await;
        match (written, made) {
            (Ok(((), stamp)), Some((result, generation))) => {
                sync.known = Some(stamp.map_or(Expect::Absent, Expect::Stamp));
                if let Some(generation) = generation {
                    sync.synced_generation = generation;
                }
                Ok(result)
            }
            (Ok(_), None) => Err(DriverError::Other {
                driver: "postgres",
                message: "the alert state's change did not run".into(),
                source: None,
            }),
            (Err(e), made) => {
                if let Some((result, _)) = made {
                    undo(&mut self.lock_alerts(), result);
                }
                // Read again before the next change: nothing of this one is kept.
                sync.known = None;
                Err(e)
            }
        }
    }

    /// Judges a webhook as one change of the shared alert state, together with the webhooks of
    /// this replica that wait for their turn with it (see the module docs); its outcomes once
    /// that change is committed.
    ///
    /// # Errors
    /// The database failed: nothing of the change is kept, for any webhook of it.
    pub(super) async fn judge_grouped(
        &self,
        pg: &PgStore,
        endpoint: Endpoint,
        webhook: Webhook,
        instances: BTreeMap<VnfInstanceId, VnfInstance>,
        now: DateTime<Utc>,
    ) -> Result<Vec<AlertOutcome>, DriverError> {
        let (reply, mut answer) = oneshot::channel();
        self.lock_alert_queue().push(PendingWebhook {
            endpoint,
            webhook,
            instances,
            now,
            reply,
        });
        // The answer, or the turn. A webhook that another change judged takes its answer at
        // once rather than the turn: waiting for it too would hold its answer back behind every
        // change queued before it, one webhook answered per change.
        let answered = tokio::select! {
            biased;
            a = &mut answer => Some(a),
            mut sync = self.alert_sync.lock() => {
                // Empty when a change that took the turn before judged this webhook (it
                // answered before giving the turn up).
                let group = std::mem::take(&mut *self.lock_alert_queue());
                if !group.is_empty() {
                    self.judge_group(&mut sync, pg, group).await;
                }
                None
            }
        };
        let failed = |message| DriverError::Other {
            driver: "postgres",
            message,
            source: None,
        };
        let answer = match answered {
            Some(a) => a,
            None => answer.await,
        };
        match answer {
            Ok(Ok(outcomes)) => Ok(outcomes),
            Ok(Err(message)) => Err(failed(message)),
            Err(_) => Err(failed("the alert state's change was dropped".into())),
        }
    }

    /// Judges `group` in order as one change, written when one of its alerts must be saved
    /// now (`AlertOutcome::must_be_saved`: none for a group of duplicates only), and answers
    /// each of its webhooks.
    async fn judge_group(&self, sync: &mut AlertSync, pg: &PgStore, group: Vec<PendingWebhook>) {
        let (webhooks, replies): (Vec<_>, Vec<_>) = group
            .into_iter()
            .map(|p| ((p.endpoint, p.webhook, p.instances, p.now), p.reply))
            .unzip();
        let judged = self
            .alert_change_in(
                sync,
                pg,
                |h| {
                    webhooks
                        .iter()
                        .map(|(endpoint, webhook, instances, now)| {
                            h.handle_alerts(*endpoint, webhook, instances, *now)
                        })
                        .collect::<Vec<_>>()
                },
                |h, judged| {
                    // A scale admitted on the discarded state marked its instance busy.
                    for o in judged.into_iter().flatten() {
                        if let Action::Scale(job) = o.action {
                            h.mark_idle(&job.instance);
                        }
                    }
                },
                |judged| judged.iter().flatten().any(AlertOutcome::must_be_saved),
            )
            .await;
        match judged {
            Ok(judged) => {
                for (reply, outcomes) in replies.into_iter().zip(judged) {
                    // Its webhook's task is gone only when the server stops.
                    let _gone = reply.send(Ok(outcomes));
                }
            }
            Err(e) => {
                let message = e.to_string();
                for reply in replies {
                    let _gone = reply.send(Err(message.clone()));
                }
            }
        }
    }

    /// The webhooks waiting for their turn (`judge_grouped`).
    fn lock_alert_queue(&self) -> std::sync::MutexGuard<'_, Vec<PendingWebhook>> {
        self.alert_queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// [`App::alert_change`] tried again every second while the database fails, for up to ten
    /// minutes (a heal window put back after its heal could not start, usually because the
    /// database is down: it must reach the shared state, or it is lost at the next reload).
    /// `None` when it was given up (logged).
    pub(super) async fn alert_change_until_saved<R: Send>(
        &self,
        pg: &PgStore,
        mut change: impl FnMut(&mut AlertHandler) -> R + Send,
        mut undo: impl FnMut(&mut AlertHandler, R),
    ) -> Option<R> {
        const TRIES: u32 = 600;
        for attempt in 1..=TRIES {
            match self.alert_change(pg, &mut change, &mut undo).await {
                Ok(r) => return Some(r),
                Err(e) if attempt == TRIES => {
                    tracing::warn!(
                        "cannot save the alert state, given up after {TRIES} tries: {e}"
                    );
                }
                Err(e) => {
                    if attempt == 1 {
                        tracing::warn!(
                            "cannot save the alert state (tried again every second): {e}"
                        );
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
        None
    }

    /// The alert state of the shared document `body`.
    fn decode_alert_state(&self, pg: &PgStore, body: &str) -> Result<AlertState, DriverError> {
        serde_json::from_str(body).map_err(|e| DriverError::Other {
            driver: "postgres",
            message: format!(
                "{}: the shared alert state (document {ALERT_DOCUMENT}) is unreadable: {e}",
                pg.target()
            ),
            source: None,
        })
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
                let state = self.decode_alert_state(pg, &body)?;
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
