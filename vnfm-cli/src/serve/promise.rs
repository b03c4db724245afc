//! The OPNFV Promise northbound API over the capacity ledger
//! ([`vnfm_core::reservation::Ledger`]), and the delivery of its notifications to the
//! subscriptions' callback URIs.
//!
//! # Routes (JSON, camelCase, Promise names; errors are SOL013 ProblemDetails)
//! - `GET /promise/v1/zones`; `GET /promise/v1/pools`; `POST /promise/v1/pools`
//!   (`increase-capacity`, 201); `POST /promise/v1/pools/decrease` (`decrease-capacity`, 201;
//!   409 when reservations hold the capacity and `force` is not set).
//! - `GET /promise/v1/capacity[?zone=&start=&end=]`: total / reserved / usage / available
//!   at the worst instant of the window (default: from now on), per zone;
//!   `GET /promise/v1/capacity/utilization?zone=&start=&end=`: the timeline;
//!   `GET /promise/v1/capacity/fit?cores=&ram=&...[&zone=&start=&end=]`: how many instances
//!   of that flavour fit.
//! - `POST /promise/v1/reservations` (`create-reservation`, 201 with `Location`; 409 with a
//!   `counterOffer` member when it does not fit); `GET /promise/v1/reservations[?zone=&start=
//!   &end=&scope=&without=&some=&every=&utilization=]` and `POST /promise/v1/reservations/query`
//!   (a `ReservationQuery` body) (`query-reservation`); `GET`, `PATCH` (`update-reservation`)
//!   and `DELETE` (`cancel-reservation`) `/promise/v1/reservations/{id}`.
//! - `POST /promise/v1/allocations` (`create-instance`, 201; 409 with the reason of a
//!   rejection); `GET` and `DELETE` (`destroy-instance`) `/promise/v1/allocations/{id}`.
//! - `POST /promise/v1/subscriptions` (`{"callbackUri", "filter"}`, 201), `GET` the list,
//!   `GET` / `DELETE` (204) `/promise/v1/subscriptions/{id}`.
//! - `GET` / `PUT /promise/v1/policy`.
//!
//! With `[server] api_token` these require `Authorization: Bearer <token>`, as the LCM API.
//!
//! # Time, state and delivery
//! `now` is the system clock (never before the ledger's own time). A ticker advances the
//! ledger every [`TICK`], so reservations start, release their unallocated capacity and
//! expire on time. The ledger is the one of the command line: the same state-file document
//! ([`crate::promise::PROMISE_DOCUMENT`]: the snapshot and the id generator), loaded, encoded
//! and written by [`crate::promise`]; a state file without it starts with an empty ledger.
//! After every change the document is saved before the request is answered. Before every
//! request and at every tick the server checks whether another process (e.g. `vnfm
//! reservation create`) wrote the state since (SQLite's `data_version`, the document's
//! stamp on PostgreSQL: `crate::state_store::StateStore::change_stamp`) and, when the
//! document changed, reloads it; between two such checks the last writer wins. Notifications are POSTed
//! as JSON (`Notification`: `subscriptionId`, `callbackUri`, `event`) to `http://` callback
//! URIs (through the server's one outgoing client, `crate::outgoing`: the destination
//! policy, no proxy, no redirects, no keep-alive, `[notifications] max_connections`), in
//! order, each retried [`ATTEMPTS`] times; a callback answering 2xx has it. Subscriptions are
//! bounded in number (`[notifications] max_subscriptions`) and size
//! ([`MAX_SUBSCRIPTION_BYTES`]), the queue of notifications by
//! `ledger::MAX_QUEUED` (beyond it a notification is dropped, counted as failed and logged).
//!
//! On PostgreSQL (several replicas, docs/replicas.md) every change runs on the ledger as
//! stored with its row locked and is written in the same transaction
//! (`ledger::Promise::update_locked`), with its notifications in a durable queue delivered by
//! the replica that claims it (`durable`); nothing is written whole from memory.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};
use vnfm_core::id::{IdGen, ZoneId};

use vnfm_core::reservation::{
    AllocationId, AllocationRequest, Capacity, ElementsFilter, Ledger, LedgerError, Notification,
    Outcome, Policy, PoolRequest, QueryWindow, ReservationId, ReservationQuery, ReservationRequest,
    ReservationUpdate, ResourceLine, Scope, SubscriptionFilter, SubscriptionId, Window,
};

pub(crate) mod durable;

use super::http::{json, parse, problem, problem_of, read_body, with_location};
use super::ledger::{ledger_problem_details, snapshot_locked};
pub use super::ledger::{ATTEMPTS, TICK};
use super::state::App;
use crate::outgoing::{Destination, Failure, Limits, MAX_URL_BYTES};
use crate::promise::PromiseBook;
use crate::state_store::StateStore;

/// How long one delivery attempt may take.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// The path prefix of the API.
const BASE: &str = "/promise/v1";

// ----- routes ------------------------------------------------------------------------------

pub(crate) fn routes(app: Arc<App>) -> Router<Arc<App>> {
    Router::new()
        .route("/promise/v1/zones", get(zones))
        .route("/promise/v1/pools", get(pools).post(increase))
        .route("/promise/v1/pools/decrease", post(decrease))
        .route("/promise/v1/capacity", get(capacity))
        .route("/promise/v1/capacity/utilization", get(utilization))
        .route("/promise/v1/capacity/fit", get(fit))
        .route(
            "/promise/v1/reservations",
            post(create_reservation).get(list_reservations),
        )
        .route("/promise/v1/reservations/query", post(query_reservations))
        .route(
            "/promise/v1/reservations/{id}",
            get(show_reservation)
                .patch(update_reservation)
                .delete(cancel_reservation),
        )
        .route("/promise/v1/allocations", post(create_allocation))
        .route(
            "/promise/v1/allocations/{id}",
            get(show_allocation).delete(destroy_allocation),
        )
        .route(
            "/promise/v1/subscriptions",
            post(subscribe).get(list_subscriptions),
        )
        .route(
            "/promise/v1/subscriptions/{id}",
            get(show_subscription).delete(unsubscribe),
        )
        .route("/promise/v1/policy", get(show_policy).put(set_policy))
        .route_layer(axum::middleware::from_fn_with_state(app, require_token))
}

async fn require_token(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if app.api_auth.admits(req.headers()) {
        if let Err(e) = app.promise.refresh(&app.state).await {
            return problem_of(500, e);
        }
        return next.run(req).await;
    }
    super::guard::unauthorized(&app, "the Promise API requires")
}

/// The ProblemDetails response of a ledger error ([`ledger_problem_details`]).
fn ledger_problem(e: &LedgerError) -> Response {
    problem(ledger_problem_details(e))
}

async fn body_of<T: serde::de::DeserializeOwned>(
    app: &App,
    body: Body,
    what: &str,
) -> Result<T, Response> {
    let bytes = read_body(body, app.config.server.body_limit, app.request_timeout()).await?;
    parse(&bytes, what)
}

/// Runs a change, saves the ledger, answers `status` with the value.
async fn changed<T: Serialize>(
    app: &App,
    status: StatusCode,
    f: impl FnOnce(&mut Ledger, &mut IdGen, DateTime<Utc>) -> Result<Outcome<T>, LedgerError>,
) -> Result<(T, Response), Response> {
    if let StateStore::Postgres(pg) = &app.state {
        // Several replicas: on the ledger as stored, its row locked, written with it.
        let value = app
            .promise
            .update_locked(pg, |book, now| {
                let PromiseBook { ledger, ids } = book;
                match f(ledger, ids, now) {
                    Ok(out) => (Ok(out.value), true, out.notifications),
                    Err(e) => (Err(e), false, Vec::new()),
                }
            })
            .await
            .map_err(|e| problem_of(500, e))?
            .map_err(|e| ledger_problem(&e))?;
        let r = json(status, &value);
        return Ok((value, r));
    }
    let (value, saved) = app.promise.change(f).map_err(|e| ledger_problem(&e))?;
    app.promise
        .persist(&app.state, saved)
        .await
        .map_err(|e| problem_of(500, e))?;
    let r = json(status, &value);
    Ok((value, r))
}

fn not_found(what: &str, id: &str) -> Response {
    problem_of(404, format!("no {what} {id}"))
}

async fn zones(State(app): State<Arc<App>>) -> Response {
    json(StatusCode::OK, &app.promise.read(Ledger::zones))
}

async fn pools(State(app): State<Arc<App>>) -> Response {
    json(StatusCode::OK, &app.promise.read(|l| l.pools().to_vec()))
}

async fn increase(State(app): State<Arc<App>>, body: Body) -> Result<Response, Response> {
    let req: PoolRequest = body_of(&app, body, "PoolRequest").await?;
    let (_, r) = changed(&app, StatusCode::CREATED, |l, ids, now| {
        l.increase_capacity(req, ids, now)
    })
    .await?;
    Ok(r)
}

async fn decrease(State(app): State<Arc<App>>, body: Body) -> Result<Response, Response> {
    let req: PoolRequest = body_of(&app, body, "PoolRequest").await?;
    let (_, r) = changed(&app, StatusCode::CREATED, |l, ids, now| {
        l.decrease_capacity(req, ids, now)
    })
    .await?;
    Ok(r)
}

// ----- query strings -----------------------------------------------------------------------

/// The decoded `name=value` pairs of a query string (`+` and `%XX` decoded).
fn query_pairs(req: &Request) -> Result<Vec<(String, String)>, Response> {
    let Some(q) = req.uri().query() else {
        return Ok(Vec::new());
    };
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (n, v) = p.split_once('=').unwrap_or((p, ""));
            Ok((decode(n)?, decode(v)?))
        })
        .collect()
}

fn decode(s: &str) -> Result<String, Response> {
    let bad = || problem_of(400, format!("the query string has a bad escape in {s:?}"));
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = b.get(i + 1..i + 3).ok_or_else(bad)?;
                let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                i += 2;
            }
            _ => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// Query parameters, each used at most once.
struct Params(Vec<(String, String)>);

impl Params {
    fn of(req: &Request, known: &[&str]) -> Result<Params, Response> {
        let pairs = query_pairs(req)?;
        if let Some((n, _)) = pairs.iter().find(|(n, _)| !known.contains(&n.as_str())) {
            return Err(problem_of(
                400,
                format!(
                    "unknown query parameter {n:?} on {}; expected one of {}",
                    req.uri().path(),
                    known.join(", ")
                ),
            ));
        }
        Ok(Params(pairs))
    }

    fn one(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, comma-separated values split.
    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.split(',').map(str::to_owned))
            .filter(|v| !v.is_empty())
            .collect()
    }

    fn time(&self, name: &str) -> Result<Option<DateTime<Utc>>, Response> {
        self.one(name)
            .map(|v| {
                DateTime::parse_from_rfc3339(v)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| {
                        problem_of(
                            400,
                            format!(
                                "query parameter {name}={v:?} is not an RFC 3339 date-time \
                                 (e.g. 2026-01-01T00:00:00Z): {e}"
                            ),
                        )
                    })
            })
            .transpose()
    }

    fn amount(&self, name: &str) -> Result<Option<u64>, Response> {
        self.one(name)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    problem_of(
                        400,
                        format!(
                            "query parameter {name}={v:?} is not an amount (a non-negative \
                             integer)"
                        ),
                    )
                })
            })
            .transpose()
    }

    fn flag(&self, name: &str) -> Result<bool, Response> {
        match self.one(name) {
            None | Some("false") => Ok(false),
            Some("" | "true") => Ok(true),
            Some(v) => Err(problem_of(
                400,
                format!("query parameter {name}={v:?} is not true or false"),
            )),
        }
    }

    /// `start` (default now) and `end` (default forever).
    fn window(&self, app: &App) -> Result<Window, Response> {
        let start = match self.time("start")? {
            Some(t) => t,
            None => app.promise.read(|l| app.promise.now(l)),
        };
        Ok(Window {
            start,
            end: self.time("end")?,
        })
    }
}

const WINDOW: [&str; 3] = ["zone", "start", "end"];

async fn capacity(State(app): State<Arc<App>>, req: Request) -> Result<Response, Response> {
    let p = Params::of(&req, &WINDOW)?;
    let w = p.window(&app)?;
    let reports = match p.one("zone") {
        Some(z) => app
            .promise
            .read(|l| l.capacity(&ZoneId::from(z), w))
            .map(|r| vec![r]),
        None => app.promise.read(|l| l.capacity_all(w)),
    }
    .map_err(|e| ledger_problem(&e))?;
    Ok(json(StatusCode::OK, &reports))
}

async fn utilization(State(app): State<Arc<App>>, req: Request) -> Result<Response, Response> {
    let p = Params::of(&req, &WINDOW)?;
    let w = p.window(&app)?;
    let zone = p.one("zone").ok_or_else(|| {
        problem_of(
            400,
            "query parameter zone is required on /promise/v1/capacity/utilization",
        )
    })?;
    let points = app
        .promise
        .read(|l| l.utilization(&ZoneId::from(zone), w))
        .map_err(|e| ledger_problem(&e))?;
    Ok(json(StatusCode::OK, &points))
}

async fn fit(State(app): State<Arc<App>>, req: Request) -> Result<Response, Response> {
    let mut known: Vec<&str> = WINDOW.to_vec();
    known.extend(ResourceLine::ALL.iter().map(|l| l.name()));
    let p = Params::of(&req, &known)?;
    let w = p.window(&app)?;
    let mut flavour = Capacity::default();
    for l in ResourceLine::ALL {
        if let Some(a) = p.amount(l.name())? {
            flavour.set(l, a);
        }
    }
    let fits = match p.one("zone") {
        Some(z) => {
            let zone = ZoneId::from(z);
            app.promise
                .read(|l| l.fit_count(&zone, &flavour, w))
                .map(|count| vec![vnfm_core::reservation::ZoneFit { zone, count }])
        }
        None => app.promise.read(|l| l.fit_counts(&flavour, w)),
    }
    .map_err(|e| ledger_problem(&e))?;
    Ok(json(StatusCode::OK, &fits))
}

// ----- reservations ------------------------------------------------------------------------

fn reservation_href(id: &ReservationId) -> String {
    format!("{BASE}/reservations/{id}")
}

async fn create_reservation(State(app): State<Arc<App>>, body: Body) -> Result<Response, Response> {
    let req: ReservationRequest = body_of(&app, body, "ReservationRequest").await?;
    let (r, resp) = changed(&app, StatusCode::CREATED, |l, ids, now| {
        l.create_reservation(req, ids, now)
    })
    .await?;
    Ok(with_location(resp, &reservation_href(&r.id)))
}

async fn list_reservations(
    State(app): State<Arc<App>>,
    req: Request,
) -> Result<Response, Response> {
    let p = Params::of(
        &req,
        &[
            "zone",
            "start",
            "end",
            "scope",
            "without",
            "some",
            "every",
            "utilization",
        ],
    )?;
    let start = p.time("start")?;
    let end = p.time("end")?;
    let scope = match p.one("scope") {
        None | Some("inclusive") => Scope::Inclusive,
        Some("exclusive") => Scope::Exclusive,
        Some(v) => {
            return Err(problem_of(
                400,
                format!("query parameter scope={v:?} is not inclusive or exclusive"),
            ))
        }
    };
    let window = match (start, end) {
        (None, None) => None,
        (Some(start), end) => Some(QueryWindow { start, end, scope }),
        (None, Some(_)) => {
            return Err(problem_of(
                400,
                "query parameter end needs start (the window is [start, end))",
            ))
        }
    };
    let q = ReservationQuery {
        zone: p.one("zone").map(ZoneId::from),
        window,
        without: p.all("without").into_iter().map(ReservationId).collect(),
        elements: ElementsFilter {
            some: p.all("some"),
            every: p.all("every"),
        },
        show_utilization: p.flag("utilization")?,
    };
    query(&app, &q)
}

async fn query_reservations(State(app): State<Arc<App>>, body: Body) -> Result<Response, Response> {
    let q: ReservationQuery = body_of(&app, body, "ReservationQuery").await?;
    query(&app, &q)
}

fn query(app: &App, q: &ReservationQuery) -> Result<Response, Response> {
    let r = app
        .promise
        .read(|l| l.query_reservations(q))
        .map_err(|e| ledger_problem(&e))?;
    Ok(json(StatusCode::OK, &r))
}

fn known_reservation(app: &App, id: &ReservationId) -> Result<(), Response> {
    if app.promise.read(|l| l.reservation(id).is_none()) {
        return Err(not_found("reservation", id.as_str()));
    }
    Ok(())
}

async fn show_reservation(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    let id = ReservationId(id);
    let r = app
        .promise
        .read(|l| l.reservation(&id))
        .ok_or_else(|| not_found("reservation", id.as_str()))?;
    Ok(json(StatusCode::OK, &r))
}

async fn update_reservation(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Body,
) -> Result<Response, Response> {
    let id = ReservationId(id);
    known_reservation(&app, &id)?;
    let upd: ReservationUpdate = body_of(&app, body, "ReservationUpdate").await?;
    let (_, r) = changed(&app, StatusCode::OK, |l, _, now| {
        l.update_reservation(&id, upd, now)
    })
    .await?;
    Ok(r)
}

async fn cancel_reservation(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    let id = ReservationId(id);
    known_reservation(&app, &id)?;
    let (_, r) = changed(&app, StatusCode::OK, |l, _, now| {
        l.cancel_reservation(&id, now)
    })
    .await?;
    Ok(r)
}

// ----- allocations -------------------------------------------------------------------------

async fn create_allocation(State(app): State<Arc<App>>, body: Body) -> Result<Response, Response> {
    let req: AllocationRequest = body_of(&app, body, "AllocationRequest").await?;
    let (a, r) = changed(&app, StatusCode::CREATED, |l, ids, now| {
        l.create_instance(req, ids, now)
    })
    .await?;
    Ok(with_location(r, &format!("{BASE}/allocations/{}", a.id)))
}

async fn show_allocation(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    let id = AllocationId(id);
    let a = app
        .promise
        .read(|l| l.allocation(&id).cloned())
        .ok_or_else(|| not_found("allocation", id.as_str()))?;
    Ok(json(StatusCode::OK, &a))
}

async fn destroy_allocation(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    let id = AllocationId(id);
    if app.promise.read(|l| l.allocation(&id).is_none()) {
        return Err(not_found("allocation", id.as_str()));
    }
    let (_, r) = changed(&app, StatusCode::OK, |l, _, now| {
        l.destroy_instance(&id, now)
    })
    .await?;
    Ok(r)
}

// ----- subscriptions -----------------------------------------------------------------------

/// The body of `POST /promise/v1/subscriptions`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SubscriptionRequest {
    callback_uri: String,
    filter: SubscriptionFilter,
}

/// The largest Promise subscription stored, in bytes (its `callbackUri` and its filter as
/// JSON): the whole ledger document is written again at every change, with every
/// subscription in it.
pub const MAX_SUBSCRIPTION_BYTES: usize = 4096;

/// `POST /promise/v1/subscriptions`: `callbackUri` at most [`MAX_URL_BYTES`] bytes, the
/// subscription at most [`MAX_SUBSCRIPTION_BYTES`] (422 beyond), at most `[notifications]
/// max_subscriptions` of them (409 beyond), and a callback the destination policy admits
/// (`crate::outgoing`; 422 otherwise, without saying what the target is). The callback is
/// not sent a test request: the Promise API defines none, and its callbacks take POSTed
/// notifications only; the policy is checked again at every delivery.
async fn subscribe(State(app): State<Arc<App>>, body: Body) -> Result<Response, Response> {
    let req: SubscriptionRequest = body_of(&app, body, "SubscriptionRequest").await?;
    let uri = req.callback_uri;
    let shown = crate::outgoing::shown(&uri);
    if uri.len() > MAX_URL_BYTES {
        return Err(problem_of(
            422,
            format!(
                "callbackUri {shown} is {} bytes long; expected at most {MAX_URL_BYTES}",
                uri.len()
            ),
        ));
    }
    Callback::parse(&uri).map_err(|why| {
        problem_of(
            422,
            format!("callbackUri {shown} is not usable: {why}; expected http://host[:port]/path"),
        )
    })?;
    let size = uri.len() + serde_json::to_string(&req.filter).map_or(usize::MAX, |f| f.len());
    if size > MAX_SUBSCRIPTION_BYTES {
        return Err(problem_of(
            422,
            format!(
                "the subscription is {size} bytes (callbackUri and filter); expected at most \
                 {MAX_SUBSCRIPTION_BYTES}"
            ),
        ));
    }
    if let Err(Failure::Refused(why)) = app.outgoing.check(&uri).await {
        app.note(&format!("Promise subscription to {shown} refused: {why}"));
        return Err(problem_of(
            422,
            format!(
                "callbackUri {shown}: the destination is refused by this server's policy \
                 (loopback, link-local, cloud metadata, unspecified and multicast addresses, \
                 and the server itself, are refused unless [notifications] allow permits them)"
            ),
        ));
    }
    let cap = app.config.notifications.max_subscriptions;
    let full = |n: usize| {
        problem_of(
            409,
            format!(
                "there are {n} Promise subscriptions, the most this server keeps \
                 ([notifications] max_subscriptions = {cap}): delete one first"
            ),
        )
    };
    if let StateStore::Postgres(pg) = &app.state {
        // Several replicas: on the ledger as stored, its row locked, written with it.
        let s = app
            .promise
            .update_locked(pg, |book, _| {
                let n = book.ledger.subscriptions().len();
                if u64::try_from(n).unwrap_or(u64::MAX) >= cap {
                    return (Err(full(n)), false, Vec::new());
                }
                let PromiseBook { ledger, ids } = book;
                match ledger.subscribe(Some(uri), req.filter, ids) {
                    Ok(out) => (Ok(out.value), true, out.notifications),
                    Err(e) => (Err(ledger_problem(&e)), false, Vec::new()),
                }
            })
            .await
            .map_err(|e| problem_of(500, e))??;
        return Ok(with_location(
            json(StatusCode::CREATED, &s),
            &format!("{BASE}/subscriptions/{}", s.id),
        ));
    }
    let (s, saved) = {
        let mut g = app.promise.lock();
        let n = g.book.ledger.subscriptions().len();
        if u64::try_from(n).unwrap_or(u64::MAX) >= cap {
            return Err(full(n));
        }
        let PromiseBook { ledger, ids } = &mut g.book;
        let out = ledger
            .subscribe(Some(uri), req.filter, ids)
            .map_err(|e| ledger_problem(&e))?;
        app.promise.enqueue(out.notifications);
        (out.value, snapshot_locked(&mut g))
    };
    app.promise
        .persist(&app.state, saved)
        .await
        .map_err(|e| problem_of(500, e))?;
    Ok(with_location(
        json(StatusCode::CREATED, &s),
        &format!("{BASE}/subscriptions/{}", s.id),
    ))
}

async fn list_subscriptions(State(app): State<Arc<App>>) -> Response {
    json(
        StatusCode::OK,
        &app.promise.read(|l| l.subscriptions().to_vec()),
    )
}

async fn show_subscription(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    let id = SubscriptionId(id);
    let s = app
        .promise
        .read(|l| l.subscriptions().iter().find(|s| s.id == id).cloned())
        .ok_or_else(|| not_found("subscription", id.as_str()))?;
    Ok(json(StatusCode::OK, &s))
}

async fn unsubscribe(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Response, Response> {
    let id = SubscriptionId(id);
    if let StateStore::Postgres(pg) = &app.state {
        app.promise
            .update_locked(pg, |book, _| match book.ledger.unsubscribe(&id) {
                Ok(_) => (Ok(()), true, Vec::new()),
                Err(_) => (
                    Err(not_found("subscription", id.as_str())),
                    false,
                    Vec::new(),
                ),
            })
            .await
            .map_err(|e| problem_of(500, e))??;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let removed = {
        let mut g = app.promise.lock();
        match g.book.ledger.unsubscribe(&id) {
            Ok(_) => Ok(snapshot_locked(&mut g)),
            Err(_) => Err(not_found("subscription", id.as_str())),
        }
    }?;
    app.promise
        .persist(&app.state, removed)
        .await
        .map_err(|e| problem_of(500, e))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ----- policy ------------------------------------------------------------------------------

async fn show_policy(State(app): State<Arc<App>>) -> Response {
    json(StatusCode::OK, &app.promise.read(|l| l.policy().clone()))
}

async fn set_policy(State(app): State<Arc<App>>, body: Body) -> Result<Response, Response> {
    // A Policy is a JSON object of known fields: `[]` or `{"bogus": 1}` would otherwise read as
    // the default policy and replace the operator's.
    let v: serde_json::Value = body_of(&app, body, "Policy").await?;
    if !v.is_object() {
        return Err(problem_of(
            400,
            format!("the request body is not a valid Policy: {v}: expected a JSON object"),
        ));
    }
    let policy: Policy = serde_json::from_value(v)
        .map_err(|e| problem_of(400, format!("the request body is not a valid Policy: {e}")))?;
    if let StateStore::Postgres(pg) = &app.state {
        app.promise
            .update_locked(pg, |book, _| {
                book.ledger.set_policy(policy.clone());
                ((), true, Vec::new())
            })
            .await
            .map_err(|e| problem_of(500, e))?;
        return Ok(json(StatusCode::OK, &policy));
    }
    let saved = {
        let mut g = app.promise.lock();
        g.book.ledger.set_policy(policy.clone());
        snapshot_locked(&mut g)
    };
    app.promise
        .persist(&app.state, saved)
        .await
        .map_err(|e| problem_of(500, e))?;
    Ok(json(StatusCode::OK, &policy))
}

// ----- delivery ----------------------------------------------------------------------------

/// An `http://` callback URI, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Callback {
    /// `host:port`.
    authority: String,
    /// The path and query (at least `/`).
    target: String,
}

impl Callback {
    fn parse(uri: &str) -> Result<Callback, String> {
        let rest = if let Some(r) = uri.strip_prefix("http://") {
            r
        } else if uri.starts_with("https://") {
            return Err("https callbacks are not supported yet".into());
        } else {
            return Err("the scheme is not http".into());
        };
        let (authority, target) = match rest.find(['/', '?']) {
            Some(i) => (rest.get(..i).unwrap_or(""), rest.get(i..).unwrap_or("/")),
            None => (rest, "/"),
        };
        if authority.is_empty()
            || authority.contains('@')
            || authority.contains(char::is_whitespace)
        {
            return Err("the host is missing or not a plain host[:port]".into());
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        let target = if target.starts_with('?') {
            format!("/{target}")
        } else {
            target.to_owned()
        };
        Ok(Callback { authority, target })
    }

    /// The URL to POST to.
    fn url(&self) -> String {
        format!("http://{}{}", self.authority, self.target)
    }
}

/// POSTs `body` (JSON) to `cb` once, through the server's one outgoing client (the
/// destination policy, its connections, no keep-alive); `Ok` for a 2xx answer, whose body is
/// not read.
async fn post_once(app: &App, cb: &Callback, body: &[u8]) -> Result<(), Failure> {
    let limits = Limits {
        timeout: DELIVERY_TIMEOUT,
        body: crate::outgoing::Body::Skip,
    };
    let answer = app
        .outgoing
        .send(Destination::Client, &cb.url(), limits, |c, u| {
            c.post(u)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "*/*")
                .body(body.to_vec())
        })
        .await?;
    let status = answer.status.as_u16();
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(Failure::Failed(format!("the callback answered {status}")))
    }
}

/// Delivers `n` to its callback, [`ATTEMPTS`] times at most (once when the destination
/// policy refuses it); a failure is logged once, the URI shortened.
async fn deliver(app: &App, n: &Notification) {
    attempt_all(app, n).await;
    app.promise.queued.fetch_sub(1, Ordering::Relaxed);
}

async fn attempt_all(app: &App, n: &Notification) {
    let Some(uri) = &n.callback_uri else { return };
    let body = match serde_json::to_vec(n) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!("cannot encode a Promise notification: {e}");
            return;
        }
    };
    let mut attempts = 0;
    let why = match Callback::parse(uri) {
        Err(why) => why,
        Ok(cb) => {
            let mut why = String::new();
            while attempts < ATTEMPTS {
                attempts += 1;
                match post_once(app, &cb, &body).await {
                    Ok(()) => {
                        app.promise.delivered.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Err(e @ Failure::Refused(_)) => {
                        why = e.to_string();
                        break;
                    }
                    Err(e) => why = e.to_string(),
                }
                if attempts < ATTEMPTS {
                    tokio::time::sleep(Duration::from_millis(200 << attempts)).await;
                }
            }
            why
        }
    };
    app.promise.failed.fetch_add(1, Ordering::Relaxed);
    app.note(&format!(
        "Promise notification of subscription {} to {} not delivered after {attempts} \
         attempt(s): {why}",
        n.subscription_id,
        crate::outgoing::shown(uri)
    ));
}

/// Resolves once `stopped` is true (or its sender is gone).
async fn stopped_signal(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// How long a stop waits for the queued notifications.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The notifications waiting for delivery, by callback URI: a URI is a key while one of its
/// notifications is being delivered, and its queue holds the ones after it. A key goes once
/// its queue is empty and its delivery ended: nothing is kept for a callback with nothing to
/// deliver.
#[derive(Default)]
struct Lanes {
    waiting: HashMap<String, VecDeque<Notification>>,
}

impl Lanes {
    /// Takes `n`: `Some` when its callback has no delivery going on (start it now).
    fn push(&mut self, n: Notification) -> Option<Notification> {
        let uri = n.callback_uri.clone()?;
        match self.waiting.get_mut(&uri) {
            Some(q) => {
                q.push_back(n);
                None
            }
            None => {
                self.waiting.insert(uri, VecDeque::new());
                Some(n)
            }
        }
    }

    /// The delivery to `uri` ended: its next notification, if any (else `uri` is forgotten).
    fn next(&mut self, uri: &str) -> Option<Notification> {
        let n = self.waiting.get_mut(uri).and_then(VecDeque::pop_front);
        if n.is_none() {
            self.waiting.remove(uri);
        }
        n
    }
}

/// Advances the ledger every [`TICK`] and delivers the queued notifications until `stopped`.
/// One worker routes them: each callback gets its notifications in order, one at a time, and
/// a slow or dead callback delays no other (each delivery is a task that ends with it; the
/// server's outgoing connections bound how many run at once); a callback with nothing to
/// deliver holds nothing. At a stop, what is queued is delivered for at most
/// [`DRAIN_TIMEOUT`].
pub(crate) async fn run(
    app: Arc<App>,
    mut queue: mpsc::UnboundedReceiver<Notification>,
    mut stopped: watch::Receiver<bool>,
) {
    let ticker = {
        let app = app.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(TICK);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = every.tick() => app.promise.tick(&app.state).await,
                    () = stopped_signal(&mut stopped) => break,
                }
            }
        })
    };
    if app.state.is_shared() {
        // Several replicas: nothing is queued here; the durable queue is delivered by
        // `durable::run`, started beside this.
        let _ = ticker.await;
        return;
    }
    let mut lanes = Lanes::default();
    let mut tasks: tokio::task::JoinSet<String> = tokio::task::JoinSet::new();
    let start = |n: Notification, tasks: &mut tokio::task::JoinSet<String>| {
        let app = app.clone();
        tasks.spawn(async move {
            deliver(&app, &n).await;
            n.callback_uri.unwrap_or_default()
        });
    };
    loop {
        tokio::select! {
            n = queue.recv() => match n {
                Some(n) => {
                    if let Some(n) = lanes.push(n) {
                        start(n, &mut tasks);
                    }
                }
                None => break,
            },
            () = stopped_signal(&mut stopped) => break,
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                if let Some(n) = done.ok().and_then(|uri| lanes.next(&uri)) {
                    start(n, &mut tasks);
                }
            }
        }
    }
    let _ = ticker.await;
    while let Ok(n) = queue.try_recv() {
        if let Some(n) = lanes.push(n) {
            start(n, &mut tasks);
        }
    }
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while let Some(done) = tasks.join_next().await {
            if let Some(n) = done.ok().and_then(|uri| lanes.next(&uri)) {
                start(n, &mut tasks);
            }
        }
    })
    .await;
    if drained.is_err() {
        let left = app.promise.queued.load(Ordering::Relaxed);
        tracing::warn!(
            "{left} Promise notification(s) not delivered within {} s of the stop",
            DRAIN_TIMEOUT.as_secs()
        );
        tasks.abort_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_parse_or_say_why() {
        assert_eq!(
            Callback::parse("http://127.0.0.1:8080/cb?x=1").unwrap(),
            Callback {
                authority: "127.0.0.1:8080".into(),
                target: "/cb?x=1".into()
            }
        );
        assert_eq!(
            Callback::parse("http://example.org").unwrap(),
            Callback {
                authority: "example.org:80".into(),
                target: "/".into()
            }
        );
        assert!(Callback::parse("https://x/cb")
            .unwrap_err()
            .contains("https"));
        assert!(Callback::parse("ftp://x/cb")
            .unwrap_err()
            .contains("scheme"));
        assert!(Callback::parse("http:///cb").unwrap_err().contains("host"));
        assert!(Callback::parse("http://u:p@x/cb").is_err());
    }

    #[test]
    fn query_strings_decode() {
        assert_eq!(
            decode("2026-01-01T00%3A00%3A00Z").unwrap(),
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(decode("a+b").unwrap(), "a b");
        assert!(decode("%zz").is_err());
        assert!(decode("%4").is_err());
    }
}
