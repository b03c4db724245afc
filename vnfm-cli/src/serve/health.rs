//! `GET /healthz`: whether this server can serve, for a load balancer or a Kubernetes
//! readiness and liveness probe (`deploy/kubernetes/`).
//!
//! The answer is 200 `{"status":"ok"}` when the state store answers a read, a 503
//! ProblemDetails naming the store's failure otherwise. The read is one indexed lookup of a
//! document that does not exist, on the connection the requests use: it takes SQLite's read
//! transaction, looks up the schema and reads the `documents` index, so a file that cannot be
//! read, a schema that is gone or a connection held by a stuck write all fail it. On
//! PostgreSQL it is the same query on a connection of the requests' pool: a database that is
//! down, unreachable or without the schema fails it. Like every
//! read, it is bounded by `[server] request_timeout` (`super::limit`: 503 beyond). Open like
//! `/metrics` (no `[server] api_token`): probes carry no credentials.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use super::http;
use super::state::{store_failure, App};
use crate::state_store::Documents;

/// The document the probe reads: a name no writer uses, so the lookup finds nothing (the
/// cheapest read that still goes through the schema and the index).
const PROBE_DOCUMENT: &str = "healthz_probe";

/// `GET /healthz` (see the module docs).
pub(super) async fn healthz(State(app): State<Arc<App>>) -> Response {
    match app.state.document(PROBE_DOCUMENT).await {
        Ok(_) => http::json(StatusCode::OK, &json!({ "status": "ok" })),
        Err(e) => {
            // `store_failure` logs the causes and says 500 for a failure that is not a
            // transient unavailability; a probe answers 503 either way: this replica cannot
            // serve now, whatever the reason.
            let mut p = store_failure(&e);
            p.status = 503;
            http::problem(p)
        }
    }
}
