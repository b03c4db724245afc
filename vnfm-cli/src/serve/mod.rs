//! `vnfm serve`: the SOL003 VNF LCM API subset, the Prometheus Alertmanager endpoints that
//! drive auto-heal and auto-scale, and `/metrics`, over HTTP (axum on tokio).
//!
//! # Routes
//! - `POST/GET /vnflcm/v2/vnf_instances`, `GET/PATCH/DELETE /vnflcm/v2/vnf_instances/{id}`,
//!   `POST /vnflcm/v2/vnf_instances/{id}/{instantiate|scale|heal|terminate}` (202 with the
//!   `Location` of the operation occurrence; the operation runs in the background),
//!   `GET /vnflcm/v2/vnf_lcm_op_occs[/{id}]`,
//!   `POST /vnflcm/v2/vnf_lcm_op_occs/{id}/{retry|rollback|fail|cancel}` (`tasks`: the core
//!   decides which task an occurrence takes in which state; 409 otherwise),
//!   `POST /vnflcm/v2/vnf_instances/{id}/{scale_to_level|operate|change_flavour|change_ext_conn}`
//!   (`vnf_ops`).
//!   One LCM operation at a time per instance: 409 otherwise. With `[server] api_token`, these
//!   require `Authorization: Bearer <token>`. The lists take SOL013 filters, attribute
//!   selectors and paging (`query`, over [`vnfm_core::query`]); an instance has an `ETag`, and
//!   a `PATCH` with a stale `If-Match` is 412.
//! - `GET /vnflcm/api_versions`, `GET /vnflcm/v2/api_versions` (SOL013 9.3), and `Version:
//!   2.0.0` on every answer under `/vnflcm/` (`versions`).
//!   An instantiate or a scale-out whose `additionalParams.reservationId` names a reservation
//!   draws from it, and the ledger keeps or gives back after the operation, as the command
//!   line's `--reservation` (the core's [`vnfm_core::reservation::lcm`]). `PATCH` is the core's
//!   [`vnfm_core::lifecycle::Lifecycle::modify_info`].
//! - `POST/GET /vnflcm/v2/subscriptions`, `GET/DELETE /vnflcm/v2/subscriptions/{id}`: SOL003
//!   lifecycle change subscriptions; their notifications are written to an outbox in the
//!   transaction of the state change they report and delivered with retry (`subscriptions`,
//!   `notify`).
//! - `POST /alert/auto_healing`, `POST /alert/auto_scaling`: Alertmanager webhooks (v4), 404
//!   unless enabled in `[prometheus_plugin]`, 401 without the configured credentials, 400 for
//!   a body that is not a webhook, else 204. Every decision is taken by
//!   [`vnfm_core::alert::AlertHandler`]; ignored alerts are logged on stderr with their reason
//!   and counted.
//! - `POST /grant/v1/grants`, `GET /grant/v1/grants/{id}`: the SOL003 Grant interface as an
//!   NFVO, for another VNFM (`nfvo_grants`: the decision is the core's
//!   [`vnfm_core::lifecycle::grantor`]); `GET /grant/api_versions`, `GET
//!   /grant/v1/api_versions`, and `Version: 1.4.0` on every answer under `/grant/`.
//! - `POST /token`: the OAuth 2.0 client-credentials token endpoint (`oauth`, with
//!   `[server.oauth2]` clients); its tokens open the Grant API and the package endpoints beside
//!   `[server] api_token` (`guard`).
//! - `GET /vnfpkgm/v2/onboarded_vnf_packages/{vnfdId}[/vnfd|/package_content]`: the SOL005
//!   subset a VNFM reads from its NFVO, from the package index, zips the same bytes every time
//!   (`vnfpkgm`); `Version: 2.1.0` under `/vnfpkgm/`.
//! - `GET /metrics`: Prometheus text format.
//! - `GET /healthz`: 200 when the state store answers a read, 503 otherwise (`health`).
//! - `/promise/v1/...`: the OPNFV Promise capacity ledger (pools, capacity, reservations,
//!   allocations, subscriptions with delivery to callback URIs); see [`promise`].
//! - `GET /admin/packages`, `POST /admin/packages/reload`: the package index, the packages of
//!   `[packages] dir` read at start and when they change, by `vnfdId`, and the entries that
//!   do not load (`packages`, `admin`).
//!
//! Errors are SOL013 ProblemDetails (`application/problem+json`), axum's and hyper's own
//! answers included (`http::problems`, `wire`). Bodies above `[server] body_limit` are 413; a
//! body with a `Content-Type` that is not JSON or a `Content-Encoding` is 415
//! (`http::check_media`). `[server] request_timeout` bounds reads (503 beyond) and the arrival
//! of a write's body (408 beyond); a write whose body arrived runs to its end and is answered
//! with its outcome, never 503 while it goes on (`limit`).
//!
//! # Connections
//! The server runs its own accept loop (`conn`): a connection must send a request's headers
//! within `[server] header_timeout`, may stay idle between requests for `idle_timeout`, and at
//! most `max_connections` are open (within the open-file limit); at the cap, a connection
//! without a request in progress is closed to make room, so clients that send nothing or
//! trickle their headers cannot keep a whole request from being served.
//!
//! # Logs
//! `tracing` events on stderr, as text or JSON lines (`log`): every line carries the replica
//! id (`[server] replica_id`), a request's line its request id (`X-Request-Id`, echoed), method,
//! path, status and latency (`front`), an operation's lines its instance and operation ids
//! (`observe`). Every `/metrics` series carries the label `replica`.
//!
//! # State
//! Instances and occurrences live in the state store (`crate::state_store::StateStore`: the
//! SQLite state file, [`crate::store::SqliteStore`], or with `[state] url` the PostgreSQL
//! database, [`crate::store_postgres::PgStore`]), with the
//! simulated cloud (saved after every operation) and the alert handler's pending state
//! (heal windows, remembered alerts, scale cooldowns: document [`ALERT_DOCUMENT`]). An accepted
//! alert is saved before it is answered: an auto-heal alert as a line appended to the alert
//! journal, the folder `<state file>-alerts` beside the state file (one `write(2)` per request,
//! fsynced before the answer only under `[server] alert_fsync = "each"`, by one `fdatasync`
//! for every request waiting at the time), a scale with the whole state. The whole state is
//! written again within a second of any change and before heals start, and that write drops the
//! journal segments it covers; [`load_alert_handler`] reads the state back (snapshot, then the
//! journal after it: the documents [`ALERT_JOURNAL_PREFIX`]`<generation>:<n>` older versions
//! wrote, then the folder's records).
//! On PostgreSQL there is no journal folder: an accepted heal alert is saved with a snapshot
//! of the whole alert state in the database before its answer (one write shared by the
//! requests waiting together), as a scale alert is on either store.
//! After a restart the pending heal windows still run, once.
//! Operations that a stop interrupted are set to `FAILED_TEMP` at start.

// Handlers return `Result<_, Response>` (axum's idiom: the error is the response to send),
// and a `Response` is larger than clippy's threshold.
#![allow(clippy::result_large_err)]

mod admin;
mod alerts;
mod auth;
mod conn;
mod guard;
mod health;
mod http;
mod instance_cache;
mod journal;
mod lcm_api;
mod ledger;
mod log;
mod metrics;
mod nfvo_grants;
mod notify;
mod oauth;
mod observe;
mod outbox;
mod packages;
mod peer;
pub mod promise;
mod query;
mod shared_alerts;
mod state;
mod subscriptions;
mod sweep;
mod tasks;
mod tls;
mod versions;
mod vnf_ops;
mod vnfpkgm;
mod wire;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::{watch, Notify};
use tracing::Instrument as _;
use vnfm_core::driver::{Clock, DriverError, OpOccFilter, Store};
use vnfm_core::lifecycle::{LcmError, Lifecycle};

use crate::cli::PlacementArgs;
use crate::config::{AlertFsync, Config};
use crate::error::CliError;
use crate::state_store::Documents;
use crate::store::Flush;
use auth::Credentials;
use observe::{ServerObserver, Shared};

pub use lcm_api::{check_lcm_body, LcmBody};
pub use state::{
    check_alert_document, load_alert_handler, AlertDocument, ALERT_DOCUMENT,
    ALERT_GENERATION_DOCUMENT, ALERT_JOURNAL_PREFIX,
};
use state::{journal_through, App, DRAIN_TIMEOUT};

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let mut text = app.shared.metrics.render(app.gauges());
    app.promise.render_metrics(&mut text);
    app.packages.render_metrics(&mut text);
    app.connections.render_metrics(&mut text);
    app.shared.outbox.render_metrics(&mut text);
    // SQLite's connections count their calls; PostgreSQL's pools do not.
    if let (Some(main), Some(notifications)) = (app.state.calls(), app.delivery.calls()) {
        metrics::render_state_calls(
            &mut text,
            &[("main", main), ("notifications", notifications)],
        );
    }
    if let Some((allocator, heap)) = crate::heap::read() {
        metrics::render_heap(&mut text, allocator, heap);
    }
    let text = metrics::with_replica(&text, &app.replica);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// The POST routes that change nothing (a computation over the request and the state).
const READ_ONLY_POSTS: &[&str] = &["/intent/v1/selections", "/promise/v1/reservations/query"];

/// Whether `req` changes nothing: GET, HEAD, OPTIONS and [`READ_ONLY_POSTS`]. Every other
/// request is a write (an unknown route too: it answers 404 at once either way).
fn is_read(req: &Request) -> bool {
    matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS)
        || (req.method() == Method::POST && READ_ONLY_POSTS.contains(&req.uri().path()))
}

/// Every request's way in and out, one middleware (each axum `from_fn` layer costs a boxed
/// service and a boxed future per request), in this order:
/// - in: the request id (the client's `X-Request-Id` when sane, else a new one:
///   [`log::client_request_id`]) and the request's span, whose events carry it;
/// - in: a body that cannot be JSON is marked refused ([`http::check_media`]);
/// - [`limit`]: the request timeout of reads, a task of its own for writes;
/// - out: an error answer becomes a ProblemDetails ([`http::problems`]), and an answer of the
///   VNF LCM or Grant interface carries its `Version` ([`versions::version_header`]);
/// - out: the answer carries `X-Request-Id`, and the request is logged (method, path without
///   its query, status, latency): at `info`, the routine routes at `debug`
///   ([`log::is_routine`]), a 5xx at `warn`.
async fn front(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let start = std::time::Instant::now();
    let request_id =
        log::client_request_id(req.headers()).unwrap_or_else(|| app.request_ids.make());
    let request_id_text = request_id.to_str().unwrap_or_default();
    let routine = log::is_routine(req.uri().path());
    let span = if routine {
        tracing::debug_span!("request", request_id = request_id_text)
    } else {
        tracing::info_span!("request", request_id = request_id_text)
    };
    let method = req.method().clone();
    let uri = req.uri().clone();
    let mut r = answer(app, req, next, &method, &uri).instrument(span).await;
    r.headers_mut()
        .insert(&log::X_REQUEST_ID, request_id.clone());
    let status = r.status().as_u16();
    // Microseconds, shown as milliseconds with 3 decimals at most.
    let latency_ms = start.elapsed().as_micros() as f64 / 1000.0;
    let path = uri.path();
    // Outside the span (which is off for a routine request at `info`): its own request id.
    let request_id = request_id_text;
    if status >= 500 {
        tracing::warn!(request_id, %method, path, status, latency_ms, "request");
    } else if routine {
        tracing::debug!(request_id, %method, path, status, latency_ms, "request");
    } else {
        tracing::info!(request_id, %method, path, status, latency_ms, "request");
    }
    r
}

/// [`front`] within the request's span (`method` and `uri` are the request's).
async fn answer(
    app: Arc<App>,
    mut req: Request,
    next: Next,
    method: &Method,
    uri: &axum::http::Uri,
) -> Response {
    let version = versions::version_of(uri.path());
    // The token endpoint's body is a form (RFC 6749), not JSON.
    if uri.path() != oauth::TOKEN_PATH {
        http::check_media(&mut req);
    }
    let r = limit(&app, req, next).await;
    // The token endpoint's own errors are RFC 6749's JSON (5.2), not ProblemDetails.
    if uri.path() == oauth::TOKEN_PATH && oauth::is_oauth_answer(&r) {
        return r;
    }
    let r = http::problems(method, uri.path(), r).await;
    versions::version_header(version, r)
}

/// `[server] request_timeout`, which never answers 503 for a write that goes on:
/// - a read that takes longer is answered 503 (it changed nothing: safe to retry);
/// - a write runs to its end on a task of its own, and its answer is its outcome: the timeout
///   does not cut it, and neither does a client that goes away. Only the arrival of its body
///   is bounded by the timeout (408, nothing done: [`http::read_body`]), after the checks that
///   come before reading it (route, credentials).
async fn limit(app: &Arc<App>, req: Request, next: Next) -> Response {
    let alert_endpoint = vnfm_core::alert::Endpoint::from_path(req.uri().path());
    if alert_endpoint.is_some() && req.method() == Method::POST {
        // The alert handlers change nothing before their lock and hand what must outlive a
        // client that goes away to a task of their own (`alerts::receive`): the common case,
        // a heal alert journaled without an fsync, needs no task at all.
        let tracked = state::Write::start(app);
        let r = next.run(req).await;
        drop(tracked);
        return r;
    }
    if !is_read(&req) {
        let tracked = state::Write::start(app);
        // In the request's span: the handler's lines carry its request id.
        let task = tokio::spawn(
            async move {
                let r = next.run(req).await;
                drop(tracked);
                r
            }
            .in_current_span(),
        );
        return match task.await {
            Ok(r) => r,
            Err(e) => http::problem_of(500, format!("the request's task failed: {e}")),
        };
    }
    let secs = app.config.server.request_timeout;
    match tokio::time::timeout(Duration::from_secs(secs), next.run(req)).await {
        Ok(r) => r,
        Err(_) => {
            // The alert handlers count their own answers; this one replaces theirs.
            if let Some(e) = alert_endpoint {
                app.shared.metrics.request(e, 503);
            }
            http::problem_of(
                503,
                format!(
                    "the request took longer than {secs} s ([server] request_timeout); it \
                     changed nothing"
                ),
            )
        }
    }
}

async fn not_found(req: Request) -> Response {
    http::problem_of(
        404,
        format!("no route for {} {}", req.method(), req.uri().path()),
    )
}

fn router(app: Arc<App>, issuer: Option<Arc<oauth::Issuer>>) -> Router {
    let token = match issuer.clone() {
        Some(issuer) => post(
            move |State(app): State<Arc<App>>,
                  headers: axum::http::HeaderMap,
                  peer: Option<axum::Extension<Arc<peer::PeerCertificate>>>,
                  body: Body| {
                oauth::token(app, issuer.clone(), headers, peer.map(|e| e.0), body)
            },
        ),
        None => post(|| async {
            http::problem_of(
                404,
                "no token endpoint: [server.oauth2] has no clients ([[server.oauth2.clients]] \
                 id and secret or tls_client_auth_subject_dn)",
            )
        }),
    };
    Router::new()
        .merge(lcm_api::routes(app.clone()))
        .merge(versions::routes())
        .merge(subscriptions::routes(app.clone()))
        .merge(nfvo_grants::routes(app.clone(), issuer.clone()))
        .merge(vnfpkgm::routes(app.clone(), issuer.clone()))
        .route(oauth::TOKEN_PATH, token)
        .merge(alerts::routes())
        .merge(promise::routes(app.clone()))
        .merge(admin::routes(app.clone()))
        .route("/metrics", get(metrics))
        .route("/healthz", get(health::healthz))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(app.clone(), front))
        .with_state(app)
}

/// A running server (see the module docs); stop it with [`Server::shutdown`].
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    dispatcher: tokio::task::JoinHandle<()>,
    promise: tokio::task::JoinHandle<()>,
    watcher: tokio::task::JoinHandle<()>,
    sweeper: tokio::task::JoinHandle<()>,
    notifier: tokio::task::JoinHandle<()>,
    app: Arc<App>,
}

impl Server {
    /// Opens the state of `config` (the state file, or the PostgreSQL database of `[state]
    /// url`), restores the simulated cloud and the alert state,
    /// binds `config.server.listen` (port 0 picks a free one) and starts serving on the
    /// current tokio runtime.
    ///
    /// # Errors
    /// An invalid configuration (`[server]`, `[prometheus_plugin]`, `[placement]`, an
    /// unsupported VIM, a state file and a database at once), an unusable state file or
    /// database, or an address that cannot be bound.
    pub async fn start(config: Config, quiet: bool) -> Result<Server, CliError> {
        Self::start_with_clock(config, quiet, crate::app::clock()).await
    }

    /// [`Server::start`] on `clock`: the lifecycle, the alert handler, the Promise ledger and
    /// the leases read it (a virtual clock runs the server on virtual time; the HTTP timeouts
    /// stay tokio's).
    ///
    /// # Errors
    /// As [`Server::start`].
    pub async fn start_with_clock(
        config: Config,
        quiet: bool,
        clock: Arc<dyn Clock>,
    ) -> Result<Server, CliError> {
        crate::app::check_vim(&config)?;
        config.server.validate()?;
        let tls = tls::Tls::open(&config.server.tls, quiet)?;
        config.notifications.policy()?;
        let (client_identity, server_roots) = tls::notification_tls(&config.notifications)?;
        config.notifications.policy()?;
        let max_connections = config
            .server
            .connection_cap_beside(open_file_limit(), config.notifications.max_connections)?;
        let outgoing = Arc::new(
            crate::outgoing::Policy::new(&config.notifications.allow)
                .and_then(|p| {
                    crate::outgoing::Outgoing::new(p, config.notifications.max_connections)
                })
                .and_then(|o| o.with_tls(client_identity, server_roots))
                .map_err(CliError::Usage)?,
        );
        config.prometheus_plugin.plugin.validate()?;
        config.prometheus_plugin.validate_credentials()?;
        // The file's parser refuses half a pair; flags and environment are merged after it.
        let p = &config.prometheus_plugin;
        if p.basic_auth_user.is_some() != p.basic_auth_password.is_some() {
            return Err(CliError::Usage(
                "the alert endpoints' basic auth needs both a user and a password \
                 (--alert-basic-user / VNFM_ALERT_BASIC_USER and --alert-basic-password / \
                 VNFM_ALERT_BASIC_PASSWORD, or [prometheus_plugin] basic_auth_user and \
                 basic_auth_password); only one is given, which would leave the endpoints open"
                    .into(),
            ));
        }
        let lcm_cfg = crate::app::lcm_config(&config, &PlacementArgs::default())?;
        let state = crate::app::open_state(&config).await?;
        let vim = crate::app::open_cluster(
            shared_vim(crate::vim::Vim::open(&state, None, &config).await?, &state),
            &config,
        )
        .await?;
        let location = state.location();
        let state_err = |message: &str, e| location.error(message, Some(e));
        let state_msg = |message: String| location.error(message, None);
        let (handler, generation) =
            state::load_alert_state(&state, &config.prometheus_plugin.plugin)
                .await
                .map_err(state_msg)?;
        // Fold the journal into the snapshot; this process counts generations on from the
        // last one saved. On PostgreSQL there is no journal, and the other replicas may be
        // changing the state: nothing to fold, nothing written (`shared_alerts`).
        let folded = serde_json::to_string(&handler.snapshot())
            .map_err(|e| state_msg(format!("cannot encode the alert state: {e}")))?;
        if matches!(state, crate::state_store::StateStore::Sqlite(_)) {
            state
                .write_documents(
                    vec![
                        (ALERT_DOCUMENT.to_owned(), folded),
                        (ALERT_GENERATION_DOCUMENT.to_owned(), generation.to_string()),
                    ],
                    Some(journal_through(u64::MAX)),
                    Flush::Commit,
                )
                .await
                .map_err(|e| state_err("cannot save the alert state", e))?;
        }
        // The alert journal is a folder beside the state file; on PostgreSQL there is none
        // (every accepted alert is saved in the database).
        let journal_dir = state.path().map(journal::dir_of);
        if let Some(dir) = &journal_dir {
            journal::clear_dir(dir).map_err(|e| {
                state_msg(format!(
                    "cannot clear the alert journal {} (its records are saved in the state \
                     file): {e}",
                    dir.display()
                ))
            })?;
        }
        let store = state.clone();
        check_instances(&store)
            .await
            .map_err(|e| state_err("cannot read the VNF instances", e))?;
        // No instance is kept from that reading: the cache fills as instances are used.
        let cache = instance_cache::InstanceCache::new(
            Arc::new(store.clone()),
            instance_cache::INSTANCE_CACHE_CAPACITY,
        );
        // On PostgreSQL other replicas change the instances: read them, never a cached copy.
        let cache = match &store {
            crate::state_store::StateStore::Postgres(_) => cache.shared(),
            crate::state_store::StateStore::Sqlite(_) => cache,
        };
        let shared = Arc::new(Shared::new(handler, cache));
        let ops = store
            .op_occs(OpOccFilter::all())
            .await
            .map_err(|e| state_err("cannot read the operation occurrences", e))?;
        config.notifications.policy()?;
        shared
            .outbox
            .load(
                &state,
                &ops,
                clock.clone(),
                outbox::OutboxBounds {
                    entries: config.notifications.max_outbox_entries,
                    bytes: config.notifications.max_outbox_bytes,
                },
            )
            .await
            .map_err(state_msg)?;
        let delivery = state.reopen().map_err(|e| {
            state_err(
                "cannot open a second connection to the state store (for the delivery of the \
                 notifications)",
                e,
            )
        })?;
        let drivers = vim.drivers(Arc::new(store.clone()), clock.clone());
        let salt = crate::app::run_id_salt(&state, &config, clock.as_ref()).await?;
        let lcm = crate::app::with_nfvo_grants_over(
            crate::app::with_cluster_hook(
                Lifecycle::new(drivers, lcm_cfg)
                    .with_id_salt(salt)
                    .with_observer(Arc::new(ServerObserver::new(shared.clone(), &state))),
                &config,
                &vim,
            )?,
            &config,
            Some(outgoing.clone()),
        )?;
        // On PostgreSQL the simulated cloud is saved by every call that changes it (shared by
        // the replicas): nothing to save whole.
        let sim = match state {
            crate::state_store::StateStore::Sqlite(_) => vim.sim,
            crate::state_store::StateStore::Postgres(_) => None,
        };
        let resumable = interrupt_unfinished(&store, &shared, &lcm).await?;
        let listener = tokio::net::TcpListener::bind(config.server.listen)
            .await
            .map_err(|e| {
                CliError::Usage(format!(
                    "cannot listen on {} ([server] listen / --listen): {e}",
                    config.server.listen
                ))
            })?;
        let addr = listener.local_addr().map_err(CliError::Output)?;
        // A callback to the server itself is refused whatever [notifications] allow says.
        outgoing.listening_on(vec![addr]);
        let (promise, notifications) =
            ledger::Promise::open(&state, &config, clock.clone()).await?;
        let packages = packages::PackageIndex::open(
            config.packages.dir.clone(),
            config.packages.rescan_interval,
            quiet,
            clock.clone(),
        )
        .await?;
        let connections = Arc::new(conn::Connections::new(
            conn::Limits {
                header: Duration::from_secs(config.server.header_timeout),
                idle: Duration::from_secs(config.server.idle_timeout),
                max: max_connections,
            },
            tls,
        ));
        let journal = match journal_dir {
            Some(dir) => Some(
                journal::Journal::open(dir.clone(), config.server.alert_fsync == AlertFsync::Each)
                    .map_err(|e| {
                        state_msg(format!(
                            "cannot open the alert journal {}: {e}",
                            dir.display()
                        ))
                    })?,
            ),
            None => None,
        };
        let issuer = oauth::Issuer::from_config(&config.server.oauth2)?;
        let replica = log::replica_id(&config.server)?;
        let app = Arc::new(App {
            replica,
            request_ids: log::RequestIds::new(),
            alert_auth: Credentials::alerts(&config.prometheus_plugin),
            api_auth: Credentials::api_token(config.server.api_token.as_ref()),
            config,
            quiet,
            state,
            delivery,
            store,
            shared,
            sim,
            lcm,
            packages,
            connections: connections.clone(),
            writes: AtomicUsize::new(0),
            generation: AtomicU64::new(generation),
            persisted: tokio::sync::Mutex::new(generation),
            sim_changes: AtomicU64::new(0),
            sim_saved: tokio::sync::Mutex::new(0),
            journal,
            journal_failing: std::sync::atomic::AtomicBool::new(false),
            running: AtomicUsize::new(0),
            idle: Notify::new(),
            promise,
            cancels: state::Cancels::default(),
            outgoing,
            grant_turn: tokio::sync::Mutex::new(()),
            alert_sync: tokio::sync::Mutex::default(),
            alert_queue: std::sync::Mutex::default(),
        });
        let (stop, stopped) = watch::channel(false);
        let dispatcher = tokio::spawn(alerts::dispatch(app.clone(), stopped.clone()));
        let promise = tokio::spawn({
            let (app, stopped) = (app.clone(), stopped.clone());
            async move {
                let ledger = promise::run(app.clone(), notifications, stopped.clone());
                if app.state.is_shared() {
                    // The durable queue of the Promise notifications (docs/replicas.md).
                    tokio::join!(ledger, promise::durable::run(app, stopped));
                } else {
                    ledger.await;
                }
            }
        });
        let watcher = tokio::spawn(admin::watch(app.clone(), stopped.clone()));
        let sweeper = tokio::spawn(sweep::run(app.clone(), stopped.clone(), resumable));
        let notifier = tokio::spawn(notify::run(app.clone(), stopped.clone()));
        let service = router(app.clone(), issuer);
        let task = tokio::spawn(conn::serve(listener, service, connections, stopped));
        Ok(Server {
            addr,
            stop,
            task,
            dispatcher,
            promise,
            watcher,
            sweeper,
            notifier,
            app,
        })
    }

    /// Test seam: while `refuse` is set, every write of the alert journal fails as on a full
    /// disk (the state file is left alone: refuse its writes with a trigger).
    #[doc(hidden)]
    pub fn refuse_alert_journal_writes(&self, refuse: bool) {
        if let Some(j) = &self.app.journal {
            j.refuse_writes(refuse);
        }
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether the server speaks HTTPS (`[server.tls]`).
    pub fn is_https(&self) -> bool {
        self.app.connections.tls().is_some()
    }

    /// Reads the files of `[server.tls]` again, whatever their stamps, as SIGHUP does (a set
    /// that cannot be used is logged, and the one in use kept). Nothing without `[server.tls]`.
    pub fn reload_tls(&self) {
        if let Some(tls) = self.app.connections.tls() {
            tls.reload();
        }
    }

    /// Reads every package of `[packages] dir` again (as `POST /admin/packages/reload`).
    ///
    /// # Errors
    /// The folder cannot be read (the packages read before stay served).
    pub async fn reload_packages(&self) -> Result<(), std::io::Error> {
        self.app.packages.reload().await
    }

    /// Stops accepting requests, lets the ones in progress finish, waits (at most 30 s) for
    /// running operations, and saves the alert state and the simulated cloud.
    ///
    /// # Errors
    /// [`CliError::Output`] when the server failed while serving; [`CliError::State`] when
    /// the simulated cloud cannot be saved.
    pub async fn shutdown(self) -> Result<(), CliError> {
        let _ = self.stop.send(true);
        let served = self.task.await;
        let _ = self.dispatcher.await;
        let _ = self.promise.await;
        let _ = self.watcher.await;
        let _ = self.sweeper.await;
        let _ = self.notifier.await;
        let app = self.app;
        // Operations, and writes whose client went away, run on.
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
            loop {
                let idle = app.idle.notified();
                if app.running.load(Ordering::SeqCst) == 0 && app.writes.load(Ordering::SeqCst) == 0
                {
                    break;
                }
                idle.await;
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                "operations still running after {} s; they are left unfinished",
                DRAIN_TIMEOUT.as_secs()
            );
        }
        app.persist_now().await;
        if let Some(j) = &app.journal {
            j.stop().await;
        }
        app.promise.persist_now(&app.state).await;
        crate::vim::save_sim(&app.state, &app.sim).await?;
        match served {
            Ok(()) => Ok(()),
            Err(e) => Err(CliError::Output(std::io::Error::other(e.to_string()))),
        }
    }
}

/// Declares interrupted the occurrences whose owner went away (the core's
/// [`Lifecycle::recover_interrupted`]: lease expired, or none), then keeps every instance
/// whose last operation is not over busy, as while an operation runs. Returns those to resume
/// instead (`[state] takeover = "resume"`): the sweep starts them once the server serves.
async fn interrupt_unfinished(
    store: &crate::state_store::StateStore,
    shared: &Shared,
    lcm: &Lifecycle,
) -> Result<Vec<vnfm_core::lifecycle::Resumable>, CliError> {
    let location = store.location();
    let state_err = |message: &str, e: DriverError| location.error(message, Some(e));
    let sweep = lcm.recover_interrupted().await.map_err(|e| match e {
        LcmError::Store(e) => state_err("cannot record interrupted operations", e),
        e => CliError::Usage(e.to_string()),
    })?;
    let ops = store
        .op_occs(OpOccFilter::all())
        .await
        .map_err(|e| state_err("cannot read the operation occurrences", e))?;
    for op in ops.iter().filter(|o| !o.is_terminal()) {
        shared.hold(&op.vnf_instance_id, op);
    }
    Ok(sweep.resumable)
}

/// Threads of the runtime's blocking pool at most (tokio's default is 512). The state file's
/// jobs run there, one per connection at a time (the main one, the notifications' one: each
/// waits for its connection's turn before it takes a thread, `crate::store`), and the package
/// index reads there: more threads would only wait, each with its own stack and allocator
/// arena (the soak saw the pool grow under bursts and its threads come and go; docs/soak.md).
const BLOCKING_THREADS: usize = 8;

/// How long an idle thread of the blocking pool is kept (tokio's default is 10 s): a pool that
/// keeps its threads between bursts does not make and unmake their stacks and arenas.
const BLOCKING_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(300);

/// `vnfm serve`: serves until Ctrl-C or SIGTERM, then stops gracefully.
///
/// # Errors
/// As [`Server::start`] and [`Server::shutdown`]; also a runtime that cannot start.
pub fn run(config: Config, quiet: bool) -> Result<(), CliError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_keep_alive(BLOCKING_KEEP_ALIVE)
        .build()
        .map_err(|e| {
            CliError::Output(std::io::Error::other(format!(
                "cannot start the runtime: {e}"
            )))
        })?;
    let mut config = config;
    config.server.validate()?;
    // Made once: the log and /metrics name the same replica.
    let replica = log::replica_id(&config.server)?;
    log::init(&config.server, quiet, &replica)?;
    config.server.replica_id = Some(replica);
    rt.block_on(async move {
        let open_alerts = {
            let p = &config.prometheus_plugin;
            (p.plugin.auto_healing || p.plugin.auto_scaling) && !p.requires_auth()
        };
        let stop = shutdown_signal();
        let server = Server::start(config, quiet).await?;
        let reloads = reload_on_hangup(server.app.clone());
        if !quiet {
            let scheme = if server.app.connections.tls().is_some() {
                "https"
            } else {
                "http"
            };
            tracing::info!("listening on {scheme}://{}", server.local_addr());
            if open_alerts {
                tracing::warn!(
                    "the alert endpoints take webhooks without credentials; set \
                     [prometheus_plugin] bearer_token or basic_auth_user / basic_auth_password"
                );
            }
        }
        stop.await;
        if !quiet {
            tracing::info!("stopping");
        }
        reloads.abort();
        server.shutdown().await
    })
}

/// The open-file limit of the process (`ulimit -n`, the soft limit), where it can be read.
fn open_file_limit() -> Option<u64> {
    // /proc/self/limits: "Max open files            1024                 4096      files"
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.strip_prefix("Max open files")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Reads the packages, and the files of `[server.tls]`, again at every SIGHUP.
#[cfg(unix)]
fn reload_on_hangup(app: Arc<App>) -> tokio::task::JoinHandle<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let hangups = signal(SignalKind::hangup());
    tokio::spawn(async move {
        let Ok(mut hangups) = hangups else {
            return;
        };
        while hangups.recv().await.is_some() {
            app.note("SIGHUP: reading the packages again");
            // A folder that cannot be read is logged, and the packages read before stay.
            let _ = app.packages.reload().await;
            if let Some(tls) = app.connections.tls() {
                app.note("SIGHUP: reading the [server.tls] files again");
                // A set that cannot be used is logged, and the one in use kept.
                tls.reload();
            }
        }
    })
}

/// SIGHUP does not exist here: reloads are `POST /admin/packages/reload`.
#[cfg(not(unix))]
fn reload_on_hangup(_app: Arc<App>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {})
}

/// Resolves at the first Ctrl-C or SIGTERM. The handlers are installed when this is called,
/// not when it is first awaited: a signal that comes before the await is not lost (nor does
/// it kill the process with the default action).
#[cfg(unix)]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, Signal, SignalKind};
    // `tokio::signal::ctrl_c` installs its handler only when first polled: SIGINT is taken
    // the same way as SIGTERM instead.
    let int = signal(SignalKind::interrupt()).ok();
    let term = signal(SignalKind::terminate()).ok();
    async fn recv(s: Option<Signal>) {
        match s {
            Some(mut s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    async move {
        tokio::select! {
            () = recv(int) => {},
            () = recv(term) => {},
        }
    }
}

/// Resolves at the first Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The VIM of a server: on PostgreSQL, the simulated cloud shared with the other replicas
/// ([`crate::shared_sim::SharedSim`]).
fn shared_vim(vim: crate::vim::Vim, state: &crate::state_store::StateStore) -> crate::vim::Vim {
    match state {
        crate::state_store::StateStore::Postgres(pg) => vim.shared_on(pg.clone()),
        crate::state_store::StateStore::Sqlite(_) => vim,
    }
}

/// Reads every stored instance once, a page at a time, keeping none (the memory stays bounded
/// whatever the fleet): a row that does not decode stops the server at start, naming it, rather
/// than failing the first request that meets it.
async fn check_instances(store: &crate::state_store::StateStore) -> Result<(), DriverError> {
    const PAGE: usize = 1000;
    let mut after = None;
    loop {
        let query = vnfm_core::driver::InstanceQuery::first(PAGE).after(after);
        let page = store.instance_page(&query).await?;
        if page.len() < PAGE {
            return Ok(());
        }
        after = page.last().map(|i| i.id.clone());
    }
}
