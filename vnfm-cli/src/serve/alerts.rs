//! `POST /alert/auto_healing` and `POST /alert/auto_scaling`, and the dispatcher that runs
//! the heal windows when they close. Every decision comes from
//! [`vnfm_core::alert::AlertHandler`]; this module only feeds it and carries out its jobs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use chrono::{DateTime, Utc};
use tokio::sync::watch;
use vnfm_core::alert::judge::Shown;
use vnfm_core::alert::{bad_request, Action, AlertHandler, Endpoint, HealJob, Webhook};
use vnfm_core::driver::{OpOccFilter, Store};
use vnfm_core::id::VnfInstanceId;
use vnfm_core::lcm::VnfInstance;

use super::http::{problem, problem_of, read_body};
use super::metrics::endpoint_label;
use super::state::{spawn_op, App, Journaled, OpRequest};
use crate::render::lcm::sol;

pub(crate) fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/alert/auto_healing", post(auto_healing))
        .route("/alert/auto_scaling", post(auto_scaling))
}

async fn auto_healing(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    receive(&app, Endpoint::AutoHealing, &headers, body).await
}

async fn auto_scaling(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    receive(&app, Endpoint::AutoScaling, &headers, body).await
}

/// `answer`, counted in `vnfm_alert_requests_total`.
fn counted(app: &App, endpoint: Endpoint, answer: Response) -> Response {
    app.shared
        .metrics
        .request(endpoint, answer.status().as_u16());
    answer
}

/// A webhook, answered and counted. It runs on the connection's task (`serve::limit` gives
/// alert requests no task of their own): until the alert lock it changes nothing, so a client
/// that goes away while its body arrives cancels nothing that matters; from the lock on it
/// never waits, except on a task of its own that a client going away does not cancel.
async fn receive(app: &Arc<App>, endpoint: Endpoint, headers: &HeaderMap, body: Body) -> Response {
    match judge_webhook(app, endpoint, headers, body).await {
        Reply::Now(answer) => counted(app, endpoint, answer),
        Reply::Counted(answer) => answer,
    }
}

/// The answer of [`judge_webhook`].
enum Reply {
    /// To be counted.
    Now(Response),
    /// Already counted (by the task that settled the webhook).
    Counted(Response),
}

async fn judge_webhook(
    app: &Arc<App>,
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: Body,
) -> Reply {
    match judge_and_journal(app, endpoint, headers, body).await {
        Judged::Answer(answer) => Reply::Now(answer),
        Judged::Settle(settle) => {
            let tracked = super::state::Write::start(app);
            let app = app.clone();
            let task = tokio::spawn(async move {
                let answer = settle.run(&app).await;
                drop(tracked);
                counted(&app, endpoint, answer)
            });
            match task.await {
                Ok(answer) => Reply::Counted(answer),
                Err(e) => Reply::Now(problem_of(500, format!("the request's task failed: {e}"))),
            }
        }
    }
}

/// Reads, judges and journals a webhook: its answer, or what is left to do before answering
/// (on a task of its own).
async fn judge_and_journal(
    app: &Arc<App>,
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: Body,
) -> Judged {
    if let Err(p) = app.config.prometheus_plugin.plugin.check_enabled(endpoint) {
        return Judged::Answer(problem(*p));
    }
    if !app.alert_auth.admits(headers) {
        app.note(&format!(
            "{} webhook refused: missing or wrong credentials",
            endpoint_label(endpoint)
        ));
        let mut r = problem_of(
            401,
            "the alert endpoints require the credentials of [prometheus_plugin] \
             (bearer_token or basic_auth_user / basic_auth_password)",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(app.alert_auth.challenge()),
        );
        return Judged::Answer(r);
    }
    let body = match read_body(body, app.config.server.body_limit, app.request_timeout()).await {
        Ok(b) => b,
        Err(r) => return Judged::Answer(r),
    };
    let webhook = match Webhook::from_slice(&body) {
        Ok(w) => w,
        Err(e) => return Judged::Answer(problem(bad_request(&e))),
    };
    let metrics = &app.shared.metrics;
    metrics.received(endpoint, webhook.alerts.len());
    // The instances the alerts name, read before the lock is taken (from the bounded cache,
    // the others from the store): the alert handler looks them up synchronously.
    let named = webhook
        .alerts
        .iter()
        .filter_map(vnfm_core::alert::named_instance);
    let instances = app.shared.cache.load_or_cached(named).await;
    let now = app.clock().now();
    if app.shared_alert_store().is_some() {
        // On a task of its own: a client going away must not cancel the change midway (the
        // shared state's lock and transaction, then the handler's busy marks).
        let app = app.clone();
        let task = tokio::spawn(async move {
            match app.shared_alert_store() {
                Some(pg) => judge_shared(&app, pg, endpoint, webhook, instances, now).await,
                None => Judged::Answer(problem_of(500, "the alert state is not shared")),
            }
        });
        return match task.await {
            Ok(judged) => judged,
            Err(e) => Judged::Answer(problem_of(500, format!("the request's task failed: {e}"))),
        };
    }
    let (outcomes, generation, entries, slot) = {
        let mut h = app.lock_alerts();
        let outcomes = h.handle_alerts(endpoint, &webhook, &instances, now);
        let generation = app.changed_locked(&h);
        let entries = AlertHandler::heal_entries(&webhook, &outcomes, now);
        // The journal's next place, taken under the lock (records in generation order)...
        // None without heal entries, or without a journal (PostgreSQL: saved by a snapshot).
        let slot = match entries.is_empty() {
            true => None,
            false => app.journal_slot(&h),
        };
        (outcomes, generation, entries, slot)
    };
    // ... and written once the next webhook may be judged (one write, no other thread).
    let journaled = match slot {
        Some(slot) => app.journal_write(slot, generation, &entries),
        None => Journaled::NotEncoded,
    };
    let (accepted, scales) = account(app, endpoint, outcomes);
    if !accepted {
        // Only the de-duplication memory changed (when an alert was last seen, a resolved
        // alert forgotten): the dispatcher saves it within a second, together with whatever
        // else changed meanwhile, and the answer does not wait for it.
        return Judged::Answer(StatusCode::NO_CONTENT.into_response());
    }
    // Heal alerts only, their journal records written above and `alert_fsync = "periodic"`:
    // saved (the records are in the OS), nothing to wait for.
    if scales.is_empty() && matches!(journaled, Journaled::Written) && !app.journal_syncs() {
        return Judged::Answer(StatusCode::NO_CONTENT.into_response());
    }
    Judged::Settle(Settle {
        generation,
        journaled,
        entries,
        scales,
    })
}

/// Counts and logs the outcomes of a webhook's alerts: whether one was accepted, and the
/// scales to run.
fn account(
    app: &App,
    endpoint: Endpoint,
    outcomes: Vec<vnfm_core::alert::AlertOutcome>,
) -> (bool, Vec<vnfm_core::alert::ScaleJob>) {
    let metrics = &app.shared.metrics;
    let mut accepted = false;
    let mut scales = Vec::new();
    let mut logged = 0;
    for o in outcomes {
        match o.action {
            Action::HealQueued { .. } => {
                metrics.accepted(endpoint);
                accepted = true;
            }
            Action::Scale(job) => {
                metrics.accepted(endpoint);
                accepted = true;
                scales.push(job);
            }
            Action::Ignored(reason) => {
                metrics.ignored(endpoint, reason.label());
                if app.quiet {
                    continue;
                }
                logged += 1;
                if logged > LOGGED_PER_REQUEST {
                    continue;
                }
                app.note(&format!(
                    "{} alert #{} (fingerprint {}) ignored [{}]: {reason}",
                    endpoint_label(endpoint),
                    o.index,
                    Shown(&o.fingerprint),
                    reason.label()
                ));
            }
        }
    }
    if logged > LOGGED_PER_REQUEST {
        app.note(&format!(
            "{} webhook: {} more ignored alerts not logged (at most {LOGGED_PER_REQUEST} \
             lines per request; every one is counted in vnfm_alerts_ignored_total)",
            endpoint_label(endpoint),
            logged - LOGGED_PER_REQUEST
        ));
    }
    (accepted, scales)
}

/// [`judge_and_journal`] on PostgreSQL: the webhook is judged in a change of the alert state
/// shared by the replicas, together with this replica's webhooks that waited with it
/// (`shared_alerts`), written before the answer when one of its alerts was accepted.
async fn judge_shared(
    app: &Arc<App>,
    pg: &crate::store_postgres::PgStore,
    endpoint: Endpoint,
    webhook: Webhook,
    instances: BTreeMap<VnfInstanceId, VnfInstance>,
    now: DateTime<Utc>,
) -> Judged {
    let changed = app
        .judge_grouped(pg, endpoint, webhook, instances, now)
        .await;
    let outcomes = match changed {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!("cannot save the alert state: {e}");
            return Judged::Answer(problem_of(
                503,
                "the alerts could not be saved in the state database (see the server's log); \
                 retry",
            ));
        }
    };
    let (accepted, scales) = account(app, endpoint, outcomes);
    if !accepted || scales.is_empty() {
        return Judged::Answer(StatusCode::NO_CONTENT.into_response());
    }
    Judged::Settle(Settle {
        generation: 0,
        journaled: Journaled::Shared,
        entries: Vec::new(),
        scales,
    })
}

/// What [`judge_and_journal`] made of a webhook.
enum Judged {
    /// Its answer.
    Answer(Response),
    /// Accepted, but the answer waits for what is left.
    Settle(Settle),
}

/// What is left of an accepted webhook whose answer waits: saving it (an fsync of its journal
/// records, or a snapshot of the whole alert state), then starting its scale operations.
struct Settle {
    generation: u64,
    journaled: Journaled,
    entries: Vec<vnfm_core::alert::HealEntry>,
    scales: Vec<vnfm_core::alert::ScaleJob>,
}

impl Settle {
    /// Saves the webhook (an accepted alert survives a restart), then starts its scale
    /// operations; the answer.
    async fn run(self, app: &Arc<App>) -> Response {
        let Settle {
            generation,
            journaled,
            entries,
            scales,
        } = self;
        // Heal alerts as journal records (written by `receive`; under `alert_fsync = "each"`
        // fsynced by one fdatasync shared by the requests waiting together); a scale changed the
        // cooldowns, saved with the whole state, and so is a heal entry that could not be encoded.
        let saved = match journaled {
            Journaled::Shared => true,
            _ if !scales.is_empty() => app.persist(generation).await,
            Journaled::Written => app.flush_journal(generation).await,
            Journaled::Failed => false,
            Journaled::NotEncoded => app.persist(generation).await,
        };
        if !saved {
            // Not on disk: not remembered as seen either, so that the retry is accepted and
            // saved again rather than answered `duplicate` (issue 26).
            app.lock_alerts().not_saved(&entries);
        }
        // The dispatcher is not woken: a window opened now is due `timer_interval` (at least a
        // second) from now, and the dispatcher looks at the due times at least every second.
        for job in scales {
            let opts = job.options();
            let aspect = job.request.aspect_id.clone();
            // The handler marked the instance busy; the operation's end marks it idle.
            let started = spawn_op(
                app,
                job.instance.clone(),
                OpRequest::Scale(job.request),
                opts,
            );
            let app = app.clone();
            tokio::spawn(async move {
                if let Ok(Err(_)) = started.await {
                    // Refused before it started (logged by `spawn_op`, which also marked the
                    // instance idle): the handler ends the cooldown it started for it.
                    if let Some(pg) = app.shared_alert_store() {
                        let ended = app
                            .alert_change(
                                pg,
                                |h| h.scale_not_started(&job.instance, &aspect),
                                |_, _| {},
                            )
                            .await;
                        if let Err(e) = ended {
                            tracing::warn!("cannot save the alert state: {e}");
                        }
                    } else {
                        let mut h = app.lock_alerts();
                        h.scale_not_started(&job.instance, &aspect);
                        app.changed_locked(&h);
                    }
                    app.shared.metrics.not_started(Endpoint::AutoScaling);
                }
            });
        }
        if !saved {
            // Alertmanager retries a 5xx: the retry's heal alerts are accepted again (the
            // de-duplication memory forgot them above) and join the same windows, so nothing runs
            // twice; the dispatcher keeps trying to save the state meanwhile.
            return problem_of(
                503,
                "the alerts were accepted but the state file could not be written (see the \
             server's log); retry",
            );
        }
        StatusCode::NO_CONTENT.into_response()
    }
}

/// Starts one closed heal window (its instance is marked busy by `poll_due`).
async fn start_heal(app: &Arc<App>, mut job: HealJob) {
    let instance = app
        .shared
        .cache
        .load_or_cached([job.instance.clone()])
        .await
        .remove(&job.instance);
    let Some(instance) = instance else {
        app.note_op(
            job.instance.as_str(),
            None,
            &format!(
                "heal window of VNF instance {} dropped: the instance is gone",
                job.instance
            ),
        );
        app.release(&job.instance);
        return;
    };
    let dropped = job.retain_existing(&instance);
    if !dropped.is_empty() {
        app.note_op(
            job.instance.as_str(),
            None,
            &format!(
                "heal of VNF instance {}: VNFC(s) {} no longer exist",
                job.instance,
                dropped.join(", ")
            ),
        );
    }
    if job.vnfcs.is_empty() {
        app.release(&job.instance);
        return;
    }
    let opts = job.options();
    let started = spawn_op(
        app,
        job.instance.clone(),
        OpRequest::Heal(job.request()),
        opts,
    );
    let app = app.clone();
    tokio::spawn(async move {
        if let Ok(Err(p)) = started.await {
            // Refused before it started (logged by `spawn_op`).
            if p.status >= 500 {
                // The server's own failure (the state store: a full disk), not the
                // instance's: the window is kept and tried again (issue 26).
                heal_failed(&app, job).await;
            } else {
                // The handler decides whether the window waits, from whether an unfinished
                // occurrence holds the instance (one this server did not start: another
                // program's, on the state file).
                heal_not_started(&app, job).await;
            }
        }
    });
}

/// The heal of `job` failed to start for the server's own failure: its window is put back,
/// due again `timer_interval` from now.
async fn heal_failed(app: &Arc<App>, job: HealJob) {
    let instance = job.instance.clone();
    let now = app.clock().now();
    let (due, generation) = match app.shared_alert_store() {
        Some(pg) => {
            match app
                .alert_change_until_saved(pg, |h| h.heal_failed(job.clone(), now), |_, _| {})
                .await
            {
                Some(due) => (due, None),
                None => {
                    // Given up after minutes of a failing database: kept in this replica's
                    // memory only, until the handler is read again.
                    let mut h = app.lock_alerts();
                    let due = h.heal_failed(job, now);
                    (due, Some(app.changed_locked(&h)))
                }
            }
        }
        None => {
            let mut h = app.lock_alerts();
            let due = h.heal_failed(job, now);
            (due, Some(app.changed_locked(&h)))
        }
    };
    app.note_op(
        instance.as_str(),
        None,
        &format!(
            "heal window of VNF instance {instance} kept: its heal did not start for a failure of \
         the server's own; tried again at {}",
            due.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
    );
    // Saved when the store takes writes again (the dispatcher retries every second).
    if let Some(generation) = generation {
        app.persist(generation).await;
    }
    app.shared.metrics.not_started(Endpoint::AutoHealing);
}

async fn heal_not_started(app: &Arc<App>, job: HealJob) {
    let holder = app
        .store
        .op_occs(OpOccFilter::instance(job.instance.clone()))
        .await
        .ok()
        .and_then(|ops| ops.into_iter().find(|o| !o.is_terminal()));
    let instance = job.instance.clone();
    let held = holder.is_some();
    let (waits, generation) = match app.shared_alert_store() {
        Some(pg) => {
            let changed = app
                .alert_change_until_saved(
                    pg,
                    |h| h.heal_not_started(job.clone(), held),
                    |h, waits| {
                        if waits {
                            h.mark_idle(&instance);
                        }
                    },
                )
                .await;
            match changed {
                Some(waits) => (waits, None),
                None => {
                    let mut h = app.lock_alerts();
                    let waits = h.heal_not_started(job, held);
                    (waits, Some(app.changed_locked(&h)))
                }
            }
        }
        None => {
            let mut h = app.lock_alerts();
            let waits = h.heal_not_started(job, held);
            (waits, Some(app.changed_locked(&h)))
        }
    };
    if let Some(op) = holder.filter(|_| waits) {
        app.shared.hold(&instance, &op);
        app.note_op(
            instance.as_str(),
            Some(op.id.as_str()),
            &format!(
                "heal window of VNF instance {instance} waits for operation {} ({})",
                op.id,
                sol(&op.operation_state)
            ),
        );
        // Back in the saved state before anything else happens to it.
        if let Some(generation) = generation {
            app.persist(generation).await;
        }
    }
    // Last: a test that waits for this count sees the refusal fully handled.
    app.shared.metrics.not_started(Endpoint::AutoHealing);
}

/// Releases the instances held by an occurrence that is now over: failed or rolled back by
/// another program on the state file (`vnfm op fail`, `vnfm op rollback`), or gone. This
/// server's own fail releases at once (see `observe`).
async fn release_ended_holds(app: &Arc<App>) {
    for (instance, id) in app.shared.held() {
        match app.store.op_occ(&id).await {
            Ok(op) => app.shared.read_back(&instance, &id, Some(&op)),
            Err(e) if e.is_not_found() => app.shared.read_back(&instance, &id, None),
            Err(_) => {}
        }
    }
}

/// How many ignored alerts of one request are logged, one line each; the others are counted
/// in one more line (and each in `vnfm_alerts_ignored_total`): a body of thousands of ignored
/// alerts does not make thousands of log lines.
const LOGGED_PER_REQUEST: usize = 8;

/// How often the dispatcher saves the alert state changes that did not need saving before
/// their answer (see `receive`): a snapshot of the whole state, so not at every wake-up (the
/// end of an operation wakes the dispatcher).
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// Runs heal windows as they close, until `stop` turns true.
pub(crate) async fn dispatch(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    // On the server's clock, as every time of the alert state (no reading of its own).
    let mut saved_at: Option<DateTime<Utc>> = None;
    loop {
        if *stop.borrow() {
            return;
        }
        if let Some(pg) = app.shared_alert_store() {
            // The windows closed here are taken as one decision among the replicas: of two
            // that see a window close, one takes it.
            let now = app.clock().now();
            let due = app.lock_alerts().poll_timeout().is_some_and(|t| t <= now);
            if due {
                let taken = app
                    .alert_change(
                        pg,
                        |h| h.poll_due(now),
                        |h, jobs| {
                            for j in jobs {
                                h.mark_idle(&j.instance);
                            }
                        },
                    )
                    .await;
                match taken {
                    Ok(jobs) if !jobs.is_empty() => {
                        for job in jobs {
                            start_heal(&app, job).await;
                        }
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!("cannot take the closed heal windows: {e}");
                        // Not at once again: the database is failing.
                        tokio::select! {
                            () = tokio::time::sleep(SAVE_EVERY) => {}
                            _ = stop.changed() => {}
                        }
                        continue;
                    }
                }
            }
        }
        let (jobs, next, generation) = {
            let mut h = app.lock_alerts();
            let now = app.clock().now();
            // On PostgreSQL only the shared decision above takes windows.
            let jobs = match app.shared_alert_store() {
                Some(_) => Vec::new(),
                None => h.poll_due(now),
            };
            // What this look left: closed windows whose instance is held.
            app.shared
                .metrics
                .heal_windows_waiting(h.heal_batcher().waiting(now));
            let generation = (!jobs.is_empty()).then(|| app.changed_locked(&h));
            (jobs, h.poll_timeout(), generation)
        };
        if let Some(g) = generation {
            // Saved before the heals start: a restart does not run them again.
            app.persist(g).await;
            for job in jobs {
                start_heal(&app, job).await;
            }
            continue;
        }
        release_ended_holds(&app).await;
        // Changes that did not need saving before their answer (see `receive`), at most
        // every SAVE_EVERY.
        let now = app.clock().now();
        let since = saved_at.map_or(SAVE_EVERY, |t| (now - t).to_std().unwrap_or(SAVE_EVERY));
        let save_in = if since >= SAVE_EVERY {
            app.persist_now().await;
            saved_at = Some(now);
            SAVE_EVERY
        } else {
            SAVE_EVERY - since
        };
        let wait = next
            .map(|t| (t - app.clock().now()).to_std().unwrap_or(Duration::ZERO))
            .unwrap_or(Duration::from_secs(3600))
            // The batcher's due times have sub-second precision; poll at least every
            // second so a restored window is never late by more than that.
            .min(Duration::from_secs(1))
            .min(save_in);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = app.shared.wake.notified() => {}
            _ = stop.changed() => {}
        }
    }
}
