//! The SOL003 Grant interface, NFVO side (v3.3.1 clause 9.4): `vnfm serve` answers another
//! VNFM's grant requests. The decision is the core's ([`vnfm_core::lifecycle::grantor`]); this
//! module reads the body, gathers what the decision needs (the zone catalogue, where the
//! servers that `RES_MGMT` references name run, the package of the request's `vnfdId`), and
//! stores the grant.
//!
//! # Routes
//! - `POST /grant/v1/grants` (`GrantRequest`): 201 with the `Grant` and its `Location` (the
//!   decision is synchronous, SOL003 9.4.2.3.1); 400 naming the member of a body that is not a
//!   `GrantRequest` (a missing mandatory attribute, an unknown enumeration value); 422 for a
//!   list over its limit or a request that breaks SOL003's rules; 403 for a grant refused (a
//!   constraint's reference that cannot be resolved, no placement under the hard
//!   constraints); 503 when the VIM cannot be asked. Every refusal names the field.
//! - `GET /grant/v1/grants/{grantId}`: 200 with the grant, 404 when it is not (or no longer)
//!   kept.
//! - Other methods: 405 with `Allow`. With `[server] api_token`, both require
//!   `Authorization: Bearer <token>`, as the LCM API does.
//!
//! # Storage
//! Every grant is the document `nfvo_grant:<n>` (`n` zero-padded, from the counter
//! [`COUNTER`]) of the state file, so it survives a restart; its id is `nfvo-grant-<n>`. The
//! write that stores a grant drops the ones more than [`KEPT_GRANTS`] older: the newest
//! [`KEPT_GRANTS`] are kept, an older one answers 404.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use futures_util::{StreamExt, TryStreamExt};
use vnfm_core::driver::{DriverError, ListZones};
use vnfm_core::grant::GrantRequest;
use vnfm_core::id::ServerId;
use vnfm_core::lifecycle::grantor::{self, GrantorContext, Located};

use super::guard::{require_api_token, Guard};
use super::http::{json, problem_of, read_body, with_location};
use super::oauth::Issuer;
use super::state::App;
use super::versions::GRANT_URI_PREFIX;
use crate::state_store::Documents;
use crate::store::Flush;

/// The counter of the grants' numbers.
pub(crate) const COUNTER: &str = "nfvo_grant_counter";

/// The prefix of the grants' documents.
const PREFIX: &str = "nfvo_grant:";

/// How many grants are kept (the newest).
pub(crate) const KEPT_GRANTS: u64 = 10_000;

/// The prefix of the grants' ids.
const ID_PREFIX: &str = "nfvo-grant-";

pub(crate) fn routes(app: Arc<App>, oauth: Option<Arc<Issuer>>) -> Router<Arc<App>> {
    Router::new()
        .route(&format!("{GRANT_URI_PREFIX}/grants"), post(create))
        .route(&format!("{GRANT_URI_PREFIX}/grants/{{id}}"), get(show))
        .route_layer(axum::middleware::from_fn_with_state(
            Guard::new(app, "the Grant API requires").with_oauth(oauth),
            require_api_token,
        ))
}

fn document(n: u64) -> String {
    format!("{PREFIX}{n:020}")
}

fn href(id: &str) -> String {
    format!("{GRANT_URI_PREFIX}/grants/{id}")
}

/// Parses the body, naming the path of a bad member.
fn parse_request(body: &[u8]) -> Result<GrantRequest, Response> {
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
                "the request body is not a valid GrantRequest{at}: {} (line {}, column {})",
                vnfm_core::input::json_message(&inner),
                inner.line(),
                inner.column()
            ),
        )
    })
}

fn vim_unavailable(what: &str, e: &DriverError) -> Response {
    problem_of(
        503,
        format!("cannot decide the grant: {what} failed: {e}; nothing was granted, ask again"),
    )
}

/// How many servers [`locate`] asks the VIM about at once.
const LOOKUPS_IN_FLIGHT: usize = 8;

/// Where each server that a `RES_MGMT` reference names runs, and each server a `HEAL`
/// replaces ([`grantor::healed_references`]: the healed VNFC is granted its zone), as the VIM
/// shows it (one it does not know, or that has no zone, is left out: the core rejects a
/// `RES_MGMT` reference to it, and places a replacement as any new VNFC).
///
/// Bounded three ways: the references are at most
/// [`grantor::MAX_RES_MGMT_REFERENCES`] plus the `removeResources` of a heal (at most
/// [`grantor::MAX_GRANT_RESOURCES`]; both checked by [`grantor::check_limits`] before), at
/// most [`LOOKUPS_IN_FLIGHT`] lookups run at once (`buffer_unordered`), and all of them
/// together must end within `[server] request_timeout`: beyond, 503 naming the VIM's compute
/// service (Nova), nothing granted. The first lookup that fails answers 503 too.
async fn locate(app: &App, request: &GrantRequest) -> Result<BTreeMap<String, Located>, Response> {
    let compute = &app.lcm.drivers().compute;
    let mut ids = grantor::res_mgmt_references(request);
    ids.extend(grantor::healed_references(request));
    let count = ids.len();
    let lookups = futures_util::stream::iter(ids)
        .map(|id| async move {
            match compute.server(&ServerId::from(id.as_str())).await {
                Ok(s) => Ok(s.zone.map(|zone| (id, Located { zone, host: s.host }))),
                Err(DriverError::NotFound { .. }) => Ok(None),
                Err(e) => Err(vim_unavailable(&format!("showing server {id}"), &e)),
            }
        })
        .buffer_unordered(LOOKUPS_IN_FLIGHT)
        .try_fold(BTreeMap::new(), |mut out, found| async move {
            if let Some((id, at)) = found {
                out.insert(id, at);
            }
            Ok(out)
        });
    let within = app.request_timeout();
    match tokio::time::timeout(within, lookups).await {
        Ok(located) => located,
        Err(_) => Err(problem_of(
            503,
            format!(
                "cannot decide the grant: the VIM's compute service (Nova) did not show the \
                 {count} servers that placementConstraints name (RES_MGMT) within {} s \
                 ([server] request_timeout); nothing was granted, ask again",
                within.as_secs()
            ),
        )),
    }
}

async fn create(State(app): State<Arc<App>>, body: Body) -> Response {
    let bytes = match read_body(body, app.config.server.body_limit, app.request_timeout()).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let request = match parse_request(&bytes) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let refused = |e: grantor::GrantRefusal| {
        problem_of(e.status(), format!("the grant request is refused: {e}"))
    };
    // The limits first: they bound what is asked of the VIM below.
    if let Err(e) = grantor::check_limits(&request) {
        return refused(e);
    }
    let zones = match app
        .lcm
        .drivers()
        .zones
        .list_zones(ListZones::default())
        .await
    {
        Ok(z) => z,
        Err(e) => return vim_unavailable("listing the zones", &e),
    };
    let located = match locate(&app, &request).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let package = app.packages.get(&request.vnfd_id).ok();
    let flavour = package
        .as_deref()
        .zip(request.flavour_id.as_deref())
        .and_then(|(p, f)| p.flavour(f));
    let n = match app.state.increment_counter(COUNTER).await {
        Ok(n) => n,
        Err(e) => return problem_of(500, format!("the state store failed: {e}")),
    };
    let id = format!("{ID_PREFIX}{n}");
    let config = app.lcm.config();
    let ctx = GrantorContext {
        grant_id: id.as_str().into(),
        zones: &zones,
        located: &located,
        flavour,
        selection: config.grant_selection,
        seed: config.seed ^ n,
        self_href: href(&id),
    };
    let grant = match grantor::decide(&request, &ctx) {
        Ok(g) => g,
        Err(e) => {
            app.note(&format!(
                "grant request for {} of {} refused: {e}",
                request.vnf_lcm_op_occ_id, request.vnf_instance_id
            ));
            return refused(e);
        }
    };
    let Ok(doc) = serde_json::to_string(&grant) else {
        return problem_of(500, "cannot encode the grant");
    };
    let prune = n
        .checked_sub(KEPT_GRANTS)
        .map(|old| (PREFIX.to_owned(), document(old)));
    if let Err(e) = app
        .state
        .write_documents(vec![(document(n), doc)], prune, Flush::Commit)
        .await
    {
        return problem_of(500, format!("the state store failed: {e}"));
    }
    with_location(json(StatusCode::CREATED, &grant), &href(&id))
}

async fn show(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    let not_found = || {
        problem_of(
            404,
            format!(
                "no grant {id:?}: this NFVO keeps its newest {KEPT_GRANTS} grants, with ids \
                 {ID_PREFIX}<n>"
            ),
        )
    };
    let Some(n) = id
        .strip_prefix(ID_PREFIX)
        .filter(|d| !d.starts_with('0') && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse::<u64>().ok())
    else {
        return not_found();
    };
    match app.state.document(&document(n)).await {
        Ok(Some(doc)) => match serde_json::from_str::<serde_json::Value>(&doc) {
            Ok(v) => json(StatusCode::OK, &v),
            Err(e) => problem_of(500, format!("the stored grant {id} cannot be read: {e}")),
        },
        Ok(None) => not_found(),
        Err(e) => problem_of(500, format!("the state store failed: {e}")),
    }
}
