//! SOL003 lifecycle change subscriptions (v3.3.1 clauses 5.4.18–5.4.20) and the outbox of
//! their notifications.
//!
//! # Routes
//! - `POST /vnflcm/v2/subscriptions` (`LccnSubscriptionRequest`): 400 naming an unknown member
//!   or a bad value; 422 for `TLS_CERT` or a callback that does not answer the test `GET` with
//!   204 (the ProblemDetails names the URI and what it answered); 303 See Other with the
//!   `Location` of the existing subscription for the same `callbackUri` and `filter`
//!   (SOL003 5.4.18.3.1 lets the VNFM refuse duplicates that way: an NFVO that re-subscribes
//!   after a restart gets the one it had, not a second stream of the same notifications);
//!   else 201 with the `LccnSubscription` (never its credentials) and `Location`.
//! - `GET /vnflcm/v2/subscriptions`, `GET` / `DELETE` (204) `/vnflcm/v2/subscriptions/{id}`.
//!
//! # Outbox
//! Every commit of the state store goes through [`Outbox::stage`] (see `observe`): the core's
//! [`Tracker`] says which state changes the commit makes, each subscription's filter which
//! it gets, and the notifications are written in the *same transaction* as the commit, as
//! documents `lcm_outbox:<subscription>:<sequence>`. A notification is thus never lost (a
//! crash loses the state change with it) nor made twice for one state change (the tracker
//! knows the stored states at start). The delivery workers (`notify`) send them in sequence
//! order and delete each once delivered (or dropped). Subscriptions are the documents
//! `lcm_subscription:<id>`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;
use vnfm_core::driver::{Clock, DriverError, StoreBatch};
use vnfm_core::id::VnfInstanceId;
use vnfm_core::lcm::{VnfInstance, VnfLcmOpOcc};
use vnfm_core::lcm_notify::{
    notification, subscription_body, subscription_href, Delivery, LccnSubscriptionRequest,
    SubscriptionRefusal, Tracker,
};

use super::http::{json, problem_of, read_body};
use super::state::App;
use crate::store::{Flush, SqliteStore};

/// Prefix of the subscription documents.
pub const SUBSCRIPTION_PREFIX: &str = "lcm_subscription:";
/// Prefix of the outbox documents: `lcm_outbox:<subscription>:<sequence, 20 digits>`.
pub const OUTBOX_PREFIX: &str = "lcm_outbox:";
/// The counter of subscription ids.
const COUNTER: &str = "lcm_subscription_counter";

/// A subscription as stored (with its credentials, which are never answered).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Stored {
    pub id: String,
    pub request: LccnSubscriptionRequest,
}

/// A subscription in memory.
#[derive(Debug, Clone)]
pub(crate) struct Sub {
    pub stored: Stored,
    pub delivery: Delivery,
    /// Wakes its delivery worker.
    pub wake: Arc<Notify>,
}

/// An outbox entry.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Queued {
    /// When the state change was committed.
    pub queued_at: chrono::DateTime<chrono::Utc>,
    /// The notification body.
    pub notification: Value,
}

/// The outbox's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub queued: AtomicU64,
    pub delivered: AtomicU64,
    pub retried: AtomicU64,
    pub failed: AtomicU64,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    tracker: Mutex<Tracker>,
    subs: RwLock<BTreeMap<String, Sub>>,
    seq: AtomicU64,
    clock: Mutex<Option<Arc<dyn Clock>>>,
    pub counters: Counters,
    /// Wakes the worker manager when the subscriptions change.
    pub changed: Notify,
}

/// What [`Outbox::stage`] prepared for one commit.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    pub docs: Vec<(String, String)>,
    wake: Vec<Arc<Notify>>,
}

pub(crate) fn outbox_prefix(sub: &str) -> String {
    format!("{OUTBOX_PREFIX}{sub}:")
}

fn outbox_name(sub: &str, seq: u64) -> String {
    format!("{OUTBOX_PREFIX}{sub}:{seq:020}")
}

/// The prune bound covering every name starting with `prefix`.
pub(crate) fn all_of(prefix: &str) -> (String, String) {
    (prefix.to_owned(), format!("{prefix}\u{10FFFF}"))
}

impl Outbox {
    /// Reads the subscriptions and the outbox's sequence from `sqlite`; `ops` are the stored
    /// occurrences (their states count as notified).
    pub(crate) async fn load(
        &self,
        sqlite: &SqliteStore,
        ops: &[VnfLcmOpOcc],
        clock: Arc<dyn Clock>,
    ) -> Result<(), String> {
        let read = |what: &str, e: DriverError| format!("cannot read {what}: {e}");
        let mut subs = BTreeMap::new();
        for (name, body) in sqlite
            .documents_with_prefix(SUBSCRIPTION_PREFIX)
            .await
            .map_err(|e| read("the subscriptions", e))?
        {
            let stored: Stored = serde_json::from_str(&body)
                .map_err(|e| format!("subscription document {name} is unreadable: {e}"))?;
            let delivery = stored
                .request
                .validate()
                .map_err(|e| format!("subscription document {name}: {e:?}"))?;
            subs.insert(
                stored.id.clone(),
                Sub {
                    stored,
                    delivery,
                    wake: Arc::new(Notify::new()),
                },
            );
        }
        let mut last = 0;
        let mut orphans = Vec::new();
        for (name, _) in sqlite
            .documents_with_prefix(OUTBOX_PREFIX)
            .await
            .map_err(|e| read("the notification outbox", e))?
        {
            if let Some(n) = name.rsplit(':').next().and_then(|s| s.parse::<u64>().ok()) {
                last = last.max(n);
            }
            // Left by a deletion that a crash cut between its two writes.
            let sub = name
                .strip_prefix(OUTBOX_PREFIX)
                .and_then(|r| r.split(':').next())
                .unwrap_or("");
            if !subs.contains_key(sub) {
                orphans.push(sub.to_owned());
            }
        }
        orphans.dedup();
        for sub in orphans {
            sqlite
                .write_documents(
                    Vec::new(),
                    Some(all_of(&outbox_prefix(&sub))),
                    Flush::Commit,
                )
                .await
                .map_err(|e| {
                    format!("cannot drop the outbox of deleted subscription {sub}: {e}")
                })?;
        }
        *self.subs.write().unwrap_or_else(PoisonError::into_inner) = subs;
        *self.tracker.lock().unwrap_or_else(PoisonError::into_inner) = Tracker::new(ops);
        self.seq.store(last + 1, Ordering::SeqCst);
        *self.clock.lock().unwrap_or_else(PoisonError::into_inner) = Some(clock);
        Ok(())
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or_else(chrono::Utc::now, |c| c.now())
    }

    /// The outbox documents of committing `batch` (call it under the store's gate, before the
    /// commit; `cache` holds the instances as stored).
    pub(crate) fn stage(
        &self,
        batch: &StoreBatch,
        cache: &RwLock<BTreeMap<VnfInstanceId, VnfInstance>>,
    ) -> Staged {
        let subs = self.subs.read().unwrap_or_else(PoisonError::into_inner);
        if subs.is_empty() {
            return Staged::default();
        }
        let now = self.now();
        let events = {
            let cache = cache.read().unwrap_or_else(PoisonError::into_inner);
            let known = |id: &VnfInstanceId| cache.get(id).cloned();
            self.tracker
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .events(batch, &known, now)
        };
        let mut staged = Staged::default();
        for e in &events {
            for sub in subs.values() {
                let passes = sub
                    .stored
                    .request
                    .filter
                    .as_ref()
                    .is_none_or(|f| f.matches(e));
                if !passes {
                    continue;
                }
                let q = Queued {
                    queued_at: now,
                    notification: notification(&sub.stored.id, e, now),
                };
                let Ok(body) = serde_json::to_string(&q) else {
                    continue;
                };
                let seq = self.seq.fetch_add(1, Ordering::SeqCst);
                staged.docs.push((outbox_name(&sub.stored.id, seq), body));
                if !staged.wake.iter().any(|w| Arc::ptr_eq(w, &sub.wake)) {
                    staged.wake.push(sub.wake.clone());
                }
            }
        }
        staged
    }

    /// Records a committed batch (its occurrences' and deletions' part) and wakes the workers
    /// of the notifications it queued.
    pub(crate) fn record(&self, batch: &StoreBatch, staged: Staged) {
        self.tracker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(batch);
        self.counters
            .queued
            .fetch_add(staged.docs.len() as u64, Ordering::Relaxed);
        for w in staged.wake {
            w.notify_one();
        }
    }

    /// The subscriptions.
    pub(crate) fn subscriptions(&self) -> Vec<Sub> {
        self.subs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Subscription `id`.
    pub(crate) fn get(&self, id: &str) -> Option<Sub> {
        self.subs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// Renders the counters (Prometheus text).
    pub(crate) fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let c = &self.counters;
        let _ = writeln!(
            out,
            "# HELP vnfm_lcm_notifications_total SOL003 lifecycle notifications: queued (written \
             to the outbox with their state change), delivered (the callback answered 2xx), \
             retried (an attempt failed and another follows), failed (dropped after \
             [notifications] max_attempts or max_age)."
        );
        let _ = writeln!(out, "# TYPE vnfm_lcm_notifications_total counter");
        for (k, v) in [
            ("queued", &c.queued),
            ("delivered", &c.delivered),
            ("retried", &c.retried),
            ("failed", &c.failed),
        ] {
            let _ = writeln!(
                out,
                "vnfm_lcm_notifications_total{{outcome=\"{k}\"}} {}",
                v.load(Ordering::Relaxed)
            );
        }
        let n = self
            .subs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        let _ = writeln!(
            out,
            "# HELP vnfm_lcm_subscriptions SOL003 lifecycle change subscriptions.\n\
             # TYPE vnfm_lcm_subscriptions gauge\nvnfm_lcm_subscriptions {n}"
        );
    }
}

pub(crate) fn routes(app: Arc<App>) -> Router<Arc<App>> {
    Router::new()
        .route(
            "/vnflcm/v2/subscriptions",
            post(subscribe).get(list_subscriptions),
        )
        .route(
            "/vnflcm/v2/subscriptions/{id}",
            get(show_subscription).delete(unsubscribe),
        )
        .route_layer(axum::middleware::from_fn_with_state(app, require_token))
}

async fn require_token(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if app.api_auth.admits(req.headers()) {
        return next.run(req).await;
    }
    let mut r = problem_of(
        401,
        "the LCM API requires Authorization: Bearer <[server] api_token>",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(app.api_auth.challenge()),
    );
    r
}

fn with_location(mut r: Response, href: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(href) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// Parses the body, naming the path of a bad member.
fn parse_request(body: &[u8]) -> Result<LccnSubscriptionRequest, Response> {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let at = if path == "." || path.is_empty() {
            String::new()
        } else {
            format!(" at {path}")
        };
        problem_of(
            400,
            format!(
                "the request body is not a valid LccnSubscriptionRequest{at}: {} (line {}, \
                 column {})",
                vnfm_core::input::json_message(&inner),
                inner.line(),
                inner.column()
            ),
        )
    })
}

async fn subscribe(State(app): State<Arc<App>>, body: Body) -> Response {
    let bytes = match read_body(body, app.config.server.body_limit, app.request_timeout()).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let req = match parse_request(&bytes) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let delivery = match req.validate() {
        Ok(d) => d,
        Err(SubscriptionRefusal::Bad(e)) => return problem_of(400, e.to_string()),
        Err(SubscriptionRefusal::Unsupported(e)) => return problem_of(422, e.to_string()),
    };
    let outbox = &app.shared.outbox;
    if let Some(same) = outbox
        .subscriptions()
        .into_iter()
        .find(|s| s.stored.request.same_as(&req))
    {
        return with_location(
            StatusCode::SEE_OTHER.into_response(),
            &subscription_href(&same.stored.id),
        );
    }
    // SOL003 5.4.18.3.1: the callback is tested before the subscription exists.
    if let Err(why) = super::notify::test_callback(&app, &req.callback_uri, &delivery).await {
        return problem_of(
            422,
            format!(
                "callbackUri {}: the test GET (SOL003 5.4.18.3.1 expects 204 No Content) {why}",
                req.callback_uri
            ),
        );
    }
    let n = match app.sqlite.increment_counter(COUNTER).await {
        Ok(n) => n,
        Err(e) => return problem_of(500, format!("the state store failed: {e}")),
    };
    let id = format!("lccn-{n}");
    let stored = Stored {
        id: id.clone(),
        request: req,
    };
    let Ok(doc) = serde_json::to_string(&stored) else {
        return problem_of(500, "cannot encode the subscription");
    };
    {
        // Under the gate: no commit stages notifications while the set changes.
        let _gate = app.shared.gate.write().await;
        if let Err(e) = app
            .sqlite
            .write_documents(
                vec![(format!("{SUBSCRIPTION_PREFIX}{id}"), doc)],
                None,
                Flush::Commit,
            )
            .await
        {
            return problem_of(500, format!("the state store failed: {e}"));
        }
        outbox
            .subs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id.clone(),
                Sub {
                    stored: stored.clone(),
                    delivery,
                    wake: Arc::new(Notify::new()),
                },
            );
    }
    outbox.changed.notify_one();
    app.note(&format!(
        "subscription {id} to {} created",
        stored.request.callback_uri
    ));
    with_location(
        json(
            StatusCode::CREATED,
            &subscription_body(&id, &stored.request),
        ),
        &subscription_href(&id),
    )
}

async fn list_subscriptions(State(app): State<Arc<App>>) -> Response {
    let v: Vec<Value> = app
        .shared
        .outbox
        .subscriptions()
        .iter()
        .map(|s| subscription_body(&s.stored.id, &s.stored.request))
        .collect();
    json(StatusCode::OK, &v)
}

fn not_found(id: &str) -> Response {
    problem_of(404, format!("subscription {id} not found"))
}

async fn show_subscription(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    match app.shared.outbox.get(&id) {
        Some(s) => json(
            StatusCode::OK,
            &subscription_body(&s.stored.id, &s.stored.request),
        ),
        None => not_found(&id),
    }
}

async fn unsubscribe(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    let outbox = &app.shared.outbox;
    if outbox.get(&id).is_none() {
        return not_found(&id);
    }
    {
        let _gate = app.shared.gate.write().await;
        let name = format!("{SUBSCRIPTION_PREFIX}{id}");
        let gone = app
            .sqlite
            .write_documents(Vec::new(), Some((name.clone(), name)), Flush::Commit)
            .await
            .and(
                app.sqlite
                    .write_documents(Vec::new(), Some(all_of(&outbox_prefix(&id))), Flush::Commit)
                    .await,
            );
        if let Err(e) = gone {
            return problem_of(500, format!("the state store failed: {e}"));
        }
        outbox
            .subs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }
    outbox.changed.notify_one();
    app.note(&format!("subscription {id} deleted"));
    StatusCode::NO_CONTENT.into_response()
}
