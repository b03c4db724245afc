//! SOL003 lifecycle change subscriptions (v3.3.1 clauses 5.4.18–5.4.20) and the outbox of
//! their notifications.
//!
//! # Routes
//! - `POST /vnflcm/v2/subscriptions` (`LccnSubscriptionRequest`): 400 naming an unknown member
//!   or a bad value; 422 for `TLS_CERT` without `[notifications] client_cert` (or with a
//!   `callbackUri` that is not `https://`), a `callbackUri` or `tokenEndpoint` the destination
//!   policy refuses (`crate::outgoing`), or a callback that does not answer the test `GET`
//!   with 204 (the ProblemDetails says which of the two, never what the target answered:
//!   the log does); 303 See Other with the
//!   `Location` of the existing subscription for the same `callbackUri` and `filter`
//!   (SOL003 5.4.18.3.1 lets the VNFM refuse duplicates that way: an NFVO that re-subscribes
//!   after a restart gets the one it had, not a second stream of the same notifications);
//!   else 201 with the `LccnSubscription` (never its credentials) and `Location`.
//! - `GET /vnflcm/v2/subscriptions`, `GET` / `DELETE` (204) `/vnflcm/v2/subscriptions/{id}`.
//!
//! # Outbox
//! Every commit of the state store goes through `outbox::Outbox::stage` (see `observe`): the core's
//! [`Tracker`] says which state changes the commit makes, each subscription's filter which
//! it gets, and the notifications are written in the *same transaction* as the commit, as
//! documents `lcm_outbox:<subscription>:<sequence>`. A notification is thus never lost (a
//! crash loses the state change with it) nor made twice for one state change (the tracker
//! knows the stored states at start). The delivery workers (`notify`) send them in sequence
//! order and delete each once delivered (or dropped). Subscriptions are the documents
//! `lcm_subscription:<id>`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use vnfm_core::lcm_notify::{subscription_body, subscription_href, Delivery, SubscriptionRefusal};

use super::guard::{require_api_token, Guard};
use super::http::{json, problem_of, read_body, with_location};
use super::notify::Refusal;
use super::outbox::{
    all_of, outbox_prefix, Stored, Sub, COUNTER, SUBSCRIPTIONS_CHANGED, SUBSCRIPTION_PREFIX,
};
use super::state::App;
use crate::state_store::Documents;
use crate::store::Flush;

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
        .route_layer(axum::middleware::from_fn_with_state(
            Guard::new(app, "the LCM API requires"),
            require_api_token,
        ))
}

/// Parses the body, naming the path of a bad member.
fn parse_request(body: &[u8]) -> Result<vnfm_core::lcm_notify::LccnSubscriptionRequest, Response> {
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

/// 422 naming the member and the `[notifications]` key of the bound a request exceeds: a
/// subscription is kept as long as it exists, so it is bounded by size as well as by count.
fn within_limits(
    app: &App,
    req: &vnfm_core::lcm_notify::LccnSubscriptionRequest,
) -> Result<(), Response> {
    use vnfm_core::lcm_notify::Limit;
    req.check_limits(&app.config.notifications.subscription_limits())
        .map_err(|e| {
            let key = match e.limit {
                Limit::ListLength => "max_filter_values",
                Limit::StringLength => "max_value_length",
                Limit::Bytes => "max_subscription_bytes",
            };
            problem_of(422, format!("{e} ([notifications] {key} = {})", e.max))
        })
}

/// 409 when the subscriptions are at `[notifications] max_subscriptions`.
fn full(app: &App) -> Option<Response> {
    let cap = app.config.notifications.max_subscriptions;
    let n = app.shared.outbox.len();
    (u64::try_from(n).unwrap_or(u64::MAX) >= cap).then(|| {
        problem_of(
            409,
            format!(
                "there are {n} subscriptions, the most this server keeps ([notifications] \
                 max_subscriptions = {cap}): delete one first"
            ),
        )
    })
}

/// The 422 of a callback that did not pass: one message per kind (refused by the
/// destination policy, or the test failed), never what the target answered; the log says
/// more.
fn callback_refused(app: &App, uri: &str, why: &Refusal) -> Response {
    let shown = crate::outgoing::shown(uri);
    let detail = match why {
        Refusal::Policy(m) => {
            app.note(&format!("subscription to {shown} refused: {m}"));
            format!(
                "callbackUri {shown}: the destination is refused by this server's policy \
                 (loopback, link-local, cloud metadata, unspecified and multicast addresses, \
                 and the server itself, are refused unless [notifications] allow permits them)"
            )
        }
        Refusal::Failed(m) => {
            app.note(&format!(
                "subscription to {shown}: the callback test failed: {m}"
            ));
            format!(
                "callbackUri {shown}: the callback test failed (SOL003 5.4.18.3.1: the test GET \
                 must answer 204 No Content); the server's log says why"
            )
        }
    };
    problem_of(422, detail)
}

/// On a shared store (PostgreSQL), reads the subscriptions again when another replica
/// created or deleted one ([`super::outbox::Outbox::refresh`]); a store that cannot be read
/// is logged and the subscriptions known are used.
async fn refresh(app: &App) {
    if let Err(e) = app
        .shared
        .outbox
        .refresh(&app.state, &app.shared.gate)
        .await
    {
        app.note(&format!("cannot read the subscriptions again: {e}"));
    }
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
    if let Err(r) = within_limits(&app, &req) {
        return r;
    }
    if delivery == Delivery::TlsCert && !app.outgoing.has_client_certificate() {
        return problem_of(
            422,
            "authentication.authType: TLS_CERT needs a client certificate on this VNFM \
             ([notifications] client_cert and client_key), and none is configured; use BASIC \
             or OAUTH2_CLIENT_CREDENTIALS",
        );
    }
    refresh(&app).await;
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
    if let Some(full) = full(&app) {
        return full;
    }
    // SOL003 5.4.18.3.1: the callback is tested before the subscription exists.
    if let Err(why) = super::notify::test_callback(&app, &req.callback_uri, &delivery).await {
        return callback_refused(&app, &req.callback_uri, &why);
    }
    let n = match app.state.increment_counter(COUNTER).await {
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
        // Again under the gate: subscriptions created since the first look count too.
        if let Some(full) = full(&app) {
            return full;
        }
        if let Err(e) = app
            .state
            .write_documents(
                vec![
                    (format!("{SUBSCRIPTION_PREFIX}{id}"), doc),
                    (SUBSCRIPTIONS_CHANGED.to_owned(), id.clone()),
                ],
                None,
                Flush::Commit,
            )
            .await
        {
            return problem_of(500, format!("the state store failed: {e}"));
        }
        outbox.insert(Sub::new(stored.clone(), delivery));
    }
    outbox.changed.notify_one();
    app.note(&format!(
        "subscription {id} to {} created",
        crate::outgoing::shown(&stored.request.callback_uri)
    ));
    with_location(
        json(
            StatusCode::CREATED,
            &subscription_body(&id, &stored.request),
        ),
        &subscription_href(&id),
    )
}

/// `GET /subscriptions`: filters, attribute selectors and paging (SOL013 5.2-5.4, as the
/// other lists: `query`); an unknown or malformed filter is a 400.
///
/// The subscriptions (shared, not copied) are turned into representations, filtered, paged and
/// encoded on the blocking pool within `[server] filter_work_limit` (`query::page_off_workers`);
/// each is bounded in size (`[notifications] max_subscription_bytes`), and so is their number.
async fn list_subscriptions(State(app): State<Arc<App>>, uri: Uri) -> Response {
    let q = match super::query::parse(&uri, vnfm_core::query::SUBSCRIPTIONS) {
        Ok(q) => q,
        Err(r) => return r,
    };
    refresh(&app).await;
    let subs = app.shared.outbox.subscriptions();
    let s = &app.config.server;
    super::query::page_off_workers(&uri, q, s.page_size, s.filter_work_limit, move || {
        subs.iter()
            .map(|s| subscription_body(&s.stored.id, &s.stored.request))
            .collect()
    })
    .await
}

fn not_found(id: &str) -> Response {
    problem_of(404, format!("subscription {id} not found"))
}

async fn show_subscription(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    refresh(&app).await;
    match app.shared.outbox.get(&id) {
        Some(s) => json(
            StatusCode::OK,
            &subscription_body(&s.stored.id, &s.stored.request),
        ),
        None => not_found(&id),
    }
}

async fn unsubscribe(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    refresh(&app).await;
    let outbox = &app.shared.outbox;
    if outbox.get(&id).is_none() {
        return not_found(&id);
    }
    {
        let _gate = app.shared.gate.write().await;
        let name = format!("{SUBSCRIPTION_PREFIX}{id}");
        let gone = app
            .state
            .write_documents(
                vec![(SUBSCRIPTIONS_CHANGED.to_owned(), id.clone())],
                Some((name.clone(), name)),
                Flush::Commit,
            )
            .await
            .and(
                app.state
                    .write_documents(Vec::new(), Some(all_of(&outbox_prefix(&id))), Flush::Commit)
                    .await,
            );
        if let Err(e) = gone {
            return problem_of(500, format!("the state store failed: {e}"));
        }
        outbox.remove(&id);
    }
    outbox.changed.notify_one();
    // Its delivery claim goes with it (a claim row never outlives its subscription for long:
    // a failure here leaves one small row, freed when it expires and unused).
    if let Err(e) = app.state.release_delivery(&id, None).await {
        app.note(&format!(
            "cannot drop the delivery claim of deleted subscription {id}: {e}"
        ));
    }
    app.note(&format!("subscription {id} deleted"));
    StatusCode::NO_CONTENT.into_response()
}
