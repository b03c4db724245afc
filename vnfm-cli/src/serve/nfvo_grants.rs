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
//! # Asynchronous grants: operator approval
//! A request whose `operation` is in `[server.grants] approve`, from an OAuth 2.0 client
//! marked `asynchronous = true`, is answered `202 Accepted` with `Location` and an empty body
//! (SOL003 9.4.2.3.1) once its limits and rules are checked, and is kept as a
//! [`PendingGrant`] (the core's state: [`vnfm_core::lifecycle::approval`]). Its `GET` answers
//! 202 with an empty body while it waits, 200 with the `Grant` once approved, 403 naming who
//! rejected it and why (an operator, its expiry after `pending_lifetime`, or a placement that
//! failed at approval) (9.4.3.3.2). The operator acts through [`admin_routes`] (behind
//! `[server] api_token`): `GET /admin/grants` (the pending ones), `POST
//! /admin/grants/{grantId}/approve` (the placement is decided then, by the same
//! [`grantor::decide`]) and `POST /admin/grants/{grantId}/reject` (`{"reason": ...}`). At most
//! `[server.grants] max_pending` wait at once: beyond, 503. Every decision (a grant decided at
//! once, a grant that starts waiting, an approval, a rejection) takes its turn (`App::
//! grant_turn`) within the server.
//!
//! # The instances and the reservation
//! Before a decision, the request's instance and package are checked by the core
//! ([`nfvo_instances::admit`]): an unknown `vnfdId` or `flavourId` (422), an operation on an
//! instance this NFVO did not grant an `INSTANTIATE` to (422), an `INSTANTIATE` of one
//! instantiated (403), and so on; a grant that waits is checked when it is requested and
//! again when it is approved. A grant answered draws from the Promise ledger's reservation
//! (`additionalParams.reservationId`, else `[server.grants] reservation`) and gives back what
//! a scale-in or a terminate removes ([`nfvo_instances::settle_reservation`], under
//! [`super::ledger::Promise::apply`]); the registry's entry (`nfvo_instance:<vnfInstanceId>`,
//! counted in `nfvo_instance_count`) is written with the grant. A grant that cannot be stored
//! gives its draws back.
//!
//! # Storage
//! Every grant is the document `nfvo_grant:<n>` (`n` zero-padded, from the counter
//! [`COUNTER`]) of the state file, so it survives a restart; its id is `nfvo-grant-<n>`. The
//! write that stores a grant drops the ones more than [`KEPT_GRANTS`] older: the newest
//! [`KEPT_GRANTS`] are kept, an older one answers 404. A grant that waits for an operator is
//! the same document holding `{"asyncGrant": <PendingGrant>}`, beside a marker
//! `nfvo_grant_pending:<n>` (its deadline) while it waits: the markers are what the bound on
//! the waiting grants counts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use futures_util::{StreamExt, TryStreamExt};
use vnfm_core::driver::{DriverError, ListZones};
use vnfm_core::grant::GrantedLcmOperationType;
use vnfm_core::grant::{Grant, GrantRequest};
use vnfm_core::id::ServerId;
use vnfm_core::lifecycle::approval::{self, ApprovalError, GrantAnswer, PendingGrant};
use vnfm_core::lifecycle::grantor::{self, GrantRefusal, GrantorContext, Located};
use vnfm_core::lifecycle::nfvo_instances::{
    self, Admission, NfvoInstance, RegistryChange, Settlement,
};
use vnfm_core::package::{Flavour, VnfPackage};
use vnfm_core::reservation::{AllocationId, ReservationId};
use vnfm_core::zone::ComputeZone;

use super::guard::{require_api_token, Guard, OAuthClient};
use super::http::{json, problem_of, read_body, with_location};
use super::ledger::Applied;
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

/// The prefix of the markers of the grants that wait for an operator (body: the deadline).
const PENDING_PREFIX: &str = "nfvo_grant_pending:";

/// The key of a stored grant that was (or is) asynchronous.
const ASYNC_KEY: &str = "asyncGrant";

/// The prefix of the registry's entries of the instances (`nfvo_instance:<vnfInstanceId>`,
/// an [`NfvoInstance`]).
const INSTANCE_PREFIX: &str = "nfvo_instance:";

/// The document counting the registry's entries.
const INSTANCE_COUNT: &str = "nfvo_instance_count";

pub(crate) fn routes(app: Arc<App>, oauth: Option<Arc<Issuer>>) -> Router<Arc<App>> {
    Router::new()
        .route(&format!("{GRANT_URI_PREFIX}/grants"), post(create))
        .route(&format!("{GRANT_URI_PREFIX}/grants/{{id}}"), get(show))
        .route_layer(axum::middleware::from_fn_with_state(
            Guard::new(app.clone(), "the Grant API requires").with_oauth(oauth),
            require_api_token,
        ))
        .merge(admin_routes(app))
}

/// The operator's routes of the grants that wait (`/admin/grants...`), behind `[server]
/// api_token` alone (as `/admin/packages`): an OAuth 2.0 client cannot approve its own grant.
fn admin_routes(app: Arc<App>) -> Router<Arc<App>> {
    Router::new()
        .route("/admin/grants", get(list_pending))
        .route("/admin/grants/{id}/approve", post(approve))
        .route("/admin/grants/{id}/reject", post(reject))
        .route_layer(axum::middleware::from_fn_with_state(
            Guard::new(app, "approving or rejecting grants requires"),
            require_api_token,
        ))
}

fn pending_marker(n: u64) -> String {
    format!("{PENDING_PREFIX}{n:020}")
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

/// Where each server that a `RES_MGMT` reference names runs, each server a `HEAL` replaces
/// ([`grantor::healed_references`]: the healed VNFC is granted its zone), and each server of
/// `also` (the servers a scale-in removes, [`nfvo_instances::scaled_in_references`]: its
/// draws are given back by zone), as the VIM shows it (one it does not know, or that has no
/// zone, is left out: the core rejects a `RES_MGMT` reference to it, and places a
/// replacement as any new VNFC).
///
/// Bounded three ways: the references are at most
/// [`grantor::MAX_RES_MGMT_REFERENCES`] plus the `removeResources` of a heal or a scale (at
/// most [`grantor::MAX_GRANT_RESOURCES`]; both checked by [`grantor::check_limits`] before),
/// at most [`LOOKUPS_IN_FLIGHT`] lookups run at once (`buffer_unordered`), and all of them
/// together must end within `[server] request_timeout`: beyond, 503 naming the VIM's compute
/// service (Nova), nothing granted. The first lookup that fails answers 503 too.
async fn locate(
    app: &App,
    request: &GrantRequest,
    also: BTreeSet<String>,
) -> Result<BTreeMap<String, Located>, Response> {
    let compute = &app.lcm.drivers().compute;
    let mut ids = grantor::res_mgmt_references(request);
    ids.extend(grantor::healed_references(request));
    ids.extend(also);
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
                 {count} servers that the request names (placementConstraints RES_MGMT, \
                 removeResources) within {} s ([server] request_timeout); nothing was granted, \
                 ask again",
                within.as_secs()
            ),
        )),
    }
}

/// Why a decision did not end in a grant.
enum Failure {
    /// The core refused the request: a refusal of the request (or, at approval, the end of
    /// the waiting grant).
    Refused(GrantRefusal),
    /// The decision could not be made (the VIM, the state store): this answer, nothing
    /// changed.
    Answer(Response),
}

/// The registry as a decision reads it: the entry of the request's instance and how many
/// there are.
struct Registry {
    registered: Option<NfvoInstance>,
    count: usize,
}

fn instance_document(id: &str) -> String {
    format!("{INSTANCE_PREFIX}{id}")
}

async fn read_registry(app: &App, id: &str) -> Result<Registry, Response> {
    let unreadable = |what: &str, e: &dyn std::fmt::Display| {
        problem_of(
            500,
            format!("the registry of the NFVO's instances ({what}) cannot be read: {e}"),
        )
    };
    let registered = match app.state.document(&instance_document(id)).await {
        Ok(Some(doc)) => Some(
            serde_json::from_str::<NfvoInstance>(&doc)
                .map_err(|e| unreadable(&instance_document(id), &e))?,
        ),
        Ok(None) => None,
        Err(e) => return Err(store_failed(&e)),
    };
    let count = match app.state.document(INSTANCE_COUNT).await {
        Ok(Some(doc)) => doc
            .trim()
            .parse::<usize>()
            .map_err(|e| unreadable(INSTANCE_COUNT, &e))?,
        Ok(None) => 0,
        Err(e) => return Err(store_failed(&e)),
    };
    Ok(Registry { registered, count })
}

/// What a request was admitted with ([`nfvo_instances::admit`]).
struct Admitted {
    registry: Registry,
    /// The package whose flavour the added VNFCs are of (the `dstVnfdId`'s for a
    /// `CHANGE_VNFPKG`).
    package: Arc<VnfPackage>,
    flavour_id: String,
    reservation: Option<ReservationId>,
}

impl Admitted {
    fn flavour(&self) -> Result<&Flavour, Failure> {
        self.package.flavour(&self.flavour_id).ok_or_else(|| {
            Failure::Answer(problem_of(
                500,
                format!("flavour {} of the package vanished", self.flavour_id),
            ))
        })
    }
}

/// Reads the registry and the packages and asks the core whether the request is taken.
async fn admit(app: &App, request: &GrantRequest) -> Result<Admitted, Failure> {
    let registry = read_registry(app, request.vnf_instance_id.as_str())
        .await
        .map_err(Failure::Answer)?;
    let package = app.packages.get(&request.vnfd_id).ok();
    let dst = request
        .dst_vnfd_id
        .as_deref()
        .and_then(|d| app.packages.get(d).ok());
    let admission = Admission {
        registered: registry.registered.as_ref(),
        registered_count: registry.count,
        package: package.as_deref(),
        dst_package: dst.as_deref(),
    };
    let flavour_id = nfvo_instances::admit(request, &admission)
        .map_err(Failure::Refused)?
        .flavour
        .id
        .clone();
    let reservation = nfvo_instances::requested_reservation(
        request,
        app.config.server.grants.reservation.as_deref(),
    )
    .map_err(Failure::Refused)?;
    let target = if request.operation == GrantedLcmOperationType::ChangeVnfpkg {
        dst
    } else {
        package
    };
    let package =
        target.ok_or_else(|| Failure::Answer(problem_of(500, "the admitted package vanished")))?;
    Ok(Admitted {
        registry,
        package,
        flavour_id,
        reservation,
    })
}

/// What [`grantor::decide`] needs besides the request, gathered from the VIM.
struct Inputs {
    zones: Vec<ComputeZone>,
    located: BTreeMap<String, Located>,
}

/// Asks the VIM for the zones and where the servers the request names run.
async fn gather(
    app: &App,
    request: &GrantRequest,
    admitted: &Admitted,
) -> Result<Inputs, Response> {
    let zones = match app
        .lcm
        .drivers()
        .zones
        .list_zones(ListZones::default())
        .await
    {
        Ok(z) => z,
        Err(e) => return Err(vim_unavailable("listing the zones", &e)),
    };
    let also = nfvo_instances::scaled_in_references(request, admitted.registry.registered.as_ref());
    let located = locate(app, request, also).await?;
    Ok(Inputs { zones, located })
}

/// A grant decided, the ledger settled, what the registry becomes: not yet stored.
struct Decision {
    grant: Grant,
    /// The documents to put (the registry's entry, its count).
    put: Vec<(String, String)>,
    /// The registry's entry to remove (a `TERMINATE`).
    remove: Option<String>,
    /// What the ledger drew (given back when the grant cannot be stored).
    drawn: Vec<AllocationId>,
}

/// The whole decision on `request` as grant `n`: admitted ([`admit`]), placed by the core on
/// the VIM's zones, drawn from (and given back to) the Promise ledger, the registry's change.
async fn decide_now(
    app: &App,
    request: &GrantRequest,
    n: u64,
    admitted: &Admitted,
) -> Result<Decision, Failure> {
    let inputs = gather(app, request, admitted)
        .await
        .map_err(Failure::Answer)?;
    let flavour = admitted.flavour()?;
    let id = format!("{ID_PREFIX}{n}");
    let config = app.lcm.config();
    let ctx = GrantorContext {
        grant_id: id.as_str().into(),
        zones: &inputs.zones,
        located: &inputs.located,
        flavour: Some(flavour),
        selection: config.grant_selection,
        seed: config.seed ^ n,
        self_href: href(&id),
    };
    let mut grant = grantor::decide(request, &ctx).map_err(Failure::Refused)?;
    let registered = admitted.registry.registered.as_ref();
    let release = nfvo_instances::released_by(request, registered, &inputs.located);
    let settlement = if release.is_empty() && admitted.reservation.is_none() {
        Settlement::default()
    } else {
        let resolved = grantor::with_vdu_ids(request, Some(flavour)).map_err(Failure::Refused)?;
        let applied = app
            .promise
            .apply(&app.state, |ledger, ids, now| {
                let out = nfvo_instances::settle_reservation(
                    ledger,
                    ids,
                    &mut grant,
                    &resolved,
                    flavour,
                    admitted.reservation.as_ref(),
                    registered,
                    &release,
                    now,
                );
                let changed = out.as_ref().is_ok_and(Settlement::changed);
                Ok((out, changed))
            })
            .await;
        match applied {
            Ok(out) => out.map_err(Failure::Refused)?,
            Err(Applied::State(m)) => return Err(Failure::Answer(problem_of(500, m))),
            Err(Applied::Ledger(e)) => return Err(Failure::Answer(problem_of(500, e.to_string()))),
        }
    };
    let drawn = settlement
        .drawn
        .iter()
        .map(|d| d.allocation.clone())
        .collect();
    let change = nfvo_instances::after_grant(
        request,
        registered,
        &admitted.flavour_id,
        settlement.drawn,
        &settlement.released,
    );
    let name = instance_document(request.vnf_instance_id.as_str());
    let count = admitted.registry.count;
    let (put, remove) = match change {
        RegistryChange::Put(entry) => {
            let Ok(doc) = serde_json::to_string(&entry) else {
                return Err(Failure::Answer(problem_of(
                    500,
                    "cannot encode the instance",
                )));
            };
            let mut put = vec![(name, doc)];
            if registered.is_none() {
                put.push((INSTANCE_COUNT.to_owned(), (count + 1).to_string()));
            }
            (put, None)
        }
        RegistryChange::Remove => (
            registered
                .map(|_| {
                    (
                        INSTANCE_COUNT.to_owned(),
                        count.saturating_sub(1).to_string(),
                    )
                })
                .into_iter()
                .collect(),
            registered.map(|_| name),
        ),
    };
    Ok(Decision {
        grant,
        put,
        remove,
        drawn,
    })
}

/// Gives back what a decision drew when it cannot be stored (logged when that fails too).
async fn undraw(app: &App, drawn: &[AllocationId]) {
    if drawn.is_empty() {
        return;
    }
    let undone = app
        .promise
        .apply(&app.state, |ledger, _, now| {
            for a in drawn {
                if ledger.allocation(a).is_some_and(|x| x.is_live()) {
                    ledger.destroy_instance(a, now)?;
                }
            }
            Ok(((), true))
        })
        .await;
    if undone.is_err() {
        tracing::warn!(
            "a grant that could not be stored drew {} allocations from the Promise ledger, and \
             they could not be given back: destroy them (DELETE /promise/v1/allocations/{{id}})",
            drawn.len()
        );
    }
}

fn refused(e: &GrantRefusal) -> Response {
    problem_of(e.status(), format!("the grant request is refused: {e}"))
}

fn store_failed(e: &DriverError) -> Response {
    problem_of(500, format!("the state store failed: {e}"))
}

/// The prune of the grants more than [`KEPT_GRANTS`] older than `n`.
fn prune_before(n: u64) -> Option<(String, String)> {
    n.checked_sub(KEPT_GRANTS)
        .map(|old| (PREFIX.to_owned(), document(old)))
}

/// The prune of a write that stores a decision: the registry's entry it removes (the name
/// alone: nothing else starts with it and sorts before it), else the old grants (a write
/// that removes an entry leaves them to the next write, whose prune covers them too).
fn prune_of(decision: &Decision, n: u64) -> Option<(String, String)> {
    match &decision.remove {
        Some(name) => Some((name.clone(), name.clone())),
        None => prune_before(n),
    }
}

/// Whether the request's OAuth 2.0 client accepts an asynchronous answer.
fn is_asynchronous(app: &App, client: Option<&OAuthClient>) -> bool {
    client.is_some_and(|c| {
        app.config
            .server
            .oauth2
            .clients
            .iter()
            .any(|k| k.id == c.0 && k.asynchronous)
    })
}

async fn create(
    State(app): State<Arc<App>>,
    client: Option<Extension<OAuthClient>>,
    body: Body,
) -> Response {
    let bytes = match read_body(body, app.config.server.body_limit, app.request_timeout()).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let request = match parse_request(&bytes) {
        Ok(r) => r,
        Err(r) => return r,
    };
    // The limits first: they bound what is asked of the VIM below.
    if let Err(e) = grantor::check_limits(&request) {
        return refused(&e);
    }
    let client = client.map(|Extension(c)| c);
    let asynchronous = is_asynchronous(&app, client.as_ref());
    if approval::waits(
        request.operation,
        &app.config.server.grants.approve,
        asynchronous,
    ) {
        return create_pending(&app, request, client).await;
    }
    let _turn = app.grant_turn.lock().await;
    let note_refused = |e: &GrantRefusal| {
        app.note(&format!(
            "grant request for {} of {} refused: {e}",
            request.vnf_lcm_op_occ_id, request.vnf_instance_id
        ));
        refused(e)
    };
    let admitted = match admit(&app, &request).await {
        Ok(a) => a,
        Err(Failure::Refused(e)) => return note_refused(&e),
        Err(Failure::Answer(r)) => return r,
    };
    let n = match app.state.increment_counter(COUNTER).await {
        Ok(n) => n,
        Err(e) => return store_failed(&e),
    };
    let decision = match decide_now(&app, &request, n, &admitted).await {
        Ok(d) => d,
        Err(Failure::Refused(e)) => return note_refused(&e),
        Err(Failure::Answer(r)) => return r,
    };
    let Ok(doc) = serde_json::to_string(&decision.grant) else {
        undraw(&app, &decision.drawn).await;
        return problem_of(500, "cannot encode the grant");
    };
    let mut put = vec![(document(n), doc)];
    put.extend(decision.put.iter().cloned());
    if let Err(e) = app
        .state
        .write_documents(put, prune_of(&decision, n), Flush::Commit)
        .await
    {
        undraw(&app, &decision.drawn).await;
        return store_failed(&e);
    }
    with_location(
        json(StatusCode::CREATED, &decision.grant),
        &href(&format!("{ID_PREFIX}{n}")),
    )
}

/// The markers of the grants waiting at `now`; the markers of the expired ones are removed.
async fn waiting(app: &App, now: DateTime<Utc>) -> Result<Vec<(u64, DateTime<Utc>)>, Response> {
    let markers = app
        .state
        .documents_with_prefix(PENDING_PREFIX)
        .await
        .map_err(|e| store_failed(&e))?;
    let mut live = Vec::new();
    let mut gone = Vec::new();
    for (name, body) in markers {
        let n = name
            .strip_prefix(PENDING_PREFIX)
            .and_then(|d| d.parse::<u64>().ok());
        let deadline = DateTime::parse_from_rfc3339(&body)
            .ok()
            .map(|d| d.with_timezone(&Utc));
        match (n, deadline) {
            (Some(n), Some(d)) if now < d => live.push((n, d)),
            _ => gone.push(name),
        }
    }
    if !gone.is_empty() {
        app.state
            .delete_documents(gone)
            .await
            .map_err(|e| store_failed(&e))?;
    }
    Ok(live)
}

/// A request that waits for an operator: checked, counted against `max_pending`, stored,
/// answered 202 with `Location` and an empty body.
async fn create_pending(app: &App, request: GrantRequest, client: Option<OAuthClient>) -> Response {
    let _turn = app.grant_turn.lock().await;
    // The instance and the package are checked now (and again at approval).
    let admitted = match admit(app, &request).await {
        Ok(a) => a,
        Err(Failure::Refused(e)) => return refused(&e),
        Err(Failure::Answer(r)) => return r,
    };
    let flavour = match admitted.flavour() {
        Ok(f) => f,
        Err(Failure::Refused(e)) => return refused(&e),
        Err(Failure::Answer(r)) => return r,
    };
    if let Err(e) = grantor::check_request(&request, Some(flavour)) {
        return refused(&e);
    }
    let settings = &app.config.server.grants;
    let now = app.clock().now();
    let live = match waiting(app, now).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    if live.len() >= settings.max_pending {
        return problem_of(
            503,
            format!(
                "cannot take the grant request: {} grants already wait for an operator, the most [server.grants] max_pending = {} allows; nothing was stored: approve or reject some (POST /admin/grants/{{grantId}}/approve or /reject), or ask again later",
                live.len(),
                settings.max_pending
            ),
        );
    }
    let n = match app.state.increment_counter(COUNTER).await {
        Ok(n) => n,
        Err(e) => return store_failed(&e),
    };
    let id = format!("{ID_PREFIX}{n}");
    let lifetime = std::time::Duration::from_secs(settings.pending_lifetime);
    let pending = PendingGrant::new(id.clone(), request, client.map(|c| c.0), now, lifetime);
    let doc = serde_json::json!({ ASYNC_KEY: &pending }).to_string();
    let marker = pending.deadline.to_rfc3339();
    if let Err(e) = app
        .state
        .write_documents(
            vec![(document(n), doc), (pending_marker(n), marker)],
            prune_before(n),
            Flush::Commit,
        )
        .await
    {
        return store_failed(&e);
    }
    app.note(&format!(
        "grant {id} for {} of {} waits for an operator until {}",
        pending.request.vnf_lcm_op_occ_id, pending.request.vnf_instance_id, pending.deadline
    ));
    with_location(StatusCode::ACCEPTED.into_response(), &href(&id))
}

/// What a stored grant is.
enum Stored {
    /// Decided at once: the `Grant` as it was answered.
    Decided(serde_json::Value),
    /// Waited (or waits) for an operator.
    Async(Box<PendingGrant>),
}

/// The number of a grant id (`nfvo-grant-<n>`, no leading zero).
fn number_of(id: &str) -> Option<u64> {
    id.strip_prefix(ID_PREFIX)
        .filter(|d| !d.starts_with('0') && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse::<u64>().ok())
}

fn not_found(id: &str) -> Response {
    problem_of(
        404,
        format!(
            "no grant {id:?}: this NFVO keeps its newest {KEPT_GRANTS} grants, with ids {ID_PREFIX}<n>"
        ),
    )
}

/// The grant `id` as stored, or the answer when there is none.
async fn read(app: &App, id: &str) -> Result<(u64, Stored), Response> {
    let Some(n) = number_of(id) else {
        return Err(not_found(id));
    };
    let doc = match app.state.document(&document(n)).await {
        Ok(Some(doc)) => doc,
        Ok(None) => return Err(not_found(id)),
        Err(e) => return Err(store_failed(&e)),
    };
    let unreadable = |e: serde_json::Error| {
        problem_of(500, format!("the stored grant {id} cannot be read: {e}"))
    };
    let mut v = serde_json::from_str::<serde_json::Value>(&doc).map_err(unreadable)?;
    match v.as_object_mut().and_then(|o| o.remove(ASYNC_KEY)) {
        Some(p) => Ok((
            n,
            Stored::Async(Box::new(serde_json::from_value(p).map_err(unreadable)?)),
        )),
        None => Ok((n, Stored::Decided(v))),
    }
}

async fn show(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    match read(&app, &id).await {
        Ok((_, Stored::Decided(v))) => json(StatusCode::OK, &v),
        Ok((_, Stored::Async(p))) => match p.answer(app.clock().now()) {
            // SOL003 9.4.3.3.2: 202, the body empty, while the decision is not made.
            GrantAnswer::Processing => StatusCode::ACCEPTED.into_response(),
            GrantAnswer::Granted(g) => json(StatusCode::OK, g),
            GrantAnswer::Rejected(why) => problem_of(403, why),
        },
        Err(r) => r,
    }
}

/// One grant that waits, as `GET /admin/grants` lists it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Waiting<'a> {
    id: &'a str,
    operation: vnfm_core::grant::GrantedLcmOperationType,
    vnf_instance_id: &'a str,
    vnf_lcm_op_occ_id: &'a str,
    vnfd_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<&'a str>,
    created: DateTime<Utc>,
    deadline: DateTime<Utc>,
}

/// `GET /admin/grants`: the grants that wait for an operator (at most `[server.grants]
/// max_pending`), oldest first.
async fn list_pending(State(app): State<Arc<App>>) -> Response {
    let now = app.clock().now();
    let live = match waiting(&app, now).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let mut found = Vec::new();
    for (n, _) in live {
        if let Ok((_, Stored::Async(p))) = read(&app, &format!("{ID_PREFIX}{n}")).await {
            if p.is_pending(now) {
                found.push(p);
            }
        }
    }
    let out: Vec<Waiting<'_>> = found
        .iter()
        .map(|p| Waiting {
            id: &p.id,
            operation: p.request.operation,
            vnf_instance_id: p.request.vnf_instance_id.as_str(),
            vnf_lcm_op_occ_id: p.request.vnf_lcm_op_occ_id.as_str(),
            vnfd_id: &p.request.vnfd_id,
            client: p.client.as_deref(),
            created: p.created,
            deadline: p.deadline,
        })
        .collect();
    json(StatusCode::OK, &out)
}

/// The body of `POST /admin/grants/{id}/approve` (optional) and `/reject`.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Verdict {
    /// Who decides (default: `the operator`).
    #[serde(default)]
    by: Option<String>,
    /// Why (required to reject).
    #[serde(default)]
    reason: Option<String>,
}

const DEFAULT_ACTOR: &str = "the operator";

async fn verdict(app: &App, body: Body) -> Result<Verdict, Response> {
    let bytes = read_body(body, app.config.server.body_limit, app.request_timeout()).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Verdict::default());
    }
    super::http::parse::<Verdict>(&bytes, "verdict ({\"by\": ..., \"reason\": ...})")
}

fn approval_refused(e: &ApprovalError) -> Response {
    match e {
        ApprovalError::NotPending { .. } => problem_of(409, e.to_string()),
        _ => problem_of(422, e.to_string()),
    }
}

/// The pending grant `id` (the answer when it is none, or not one that waited).
async fn read_async(app: &App, id: &str) -> Result<(u64, PendingGrant), Response> {
    match read(app, id).await? {
        (n, Stored::Async(p)) => Ok((n, *p)),
        (_, Stored::Decided(_)) => Err(problem_of(
            409,
            format!("grant {id} was decided when it was requested (201); nothing waits to approve"),
        )),
    }
}

/// Stores the decided `p` (grant `n`) and drops its marker; answers 200 with it.
async fn store_decided(app: &App, n: u64, p: &PendingGrant) -> Response {
    let doc = serde_json::json!({ ASYNC_KEY: p }).to_string();
    let marker = pending_marker(n);
    if let Err(e) = app
        .state
        .write_documents(
            vec![(document(n), doc)],
            Some((marker.clone(), marker)),
            Flush::Commit,
        )
        .await
    {
        return store_failed(&e);
    }
    app.note(&format!("grant {} is {}", p.id, p.state.name()));
    json(StatusCode::OK, p)
}

/// `POST /admin/grants/{id}/approve`: the placement is decided now; the grant ends approved
/// (200 with it), or rejected when the decision refuses (the reason says why).
async fn approve(State(app): State<Arc<App>>, Path(id): Path<String>, body: Body) -> Response {
    let v = match verdict(&app, body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let by = v.by.as_deref().unwrap_or(DEFAULT_ACTOR);
    let _turn = app.grant_turn.lock().await;
    let (n, mut p) = match read_async(&app, &id).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    if let Err(e) = p.check_approve(by, app.clock().now()) {
        if p.handle_timeout(app.clock().now()) {
            let _ = store_decided(&app, n, &p).await;
        }
        return approval_refused(&e);
    }
    // The instance, the package, the placement and the ledger are decided now. The VIM or
    // the state store failing leaves the grant waiting: approve again.
    let decision = match admit(&app, &p.request).await {
        Ok(admitted) => decide_now(&app, &p.request, n, &admitted).await,
        Err(e) => Err(e),
    };
    let decision = match decision {
        Ok(d) => Ok(d),
        Err(Failure::Refused(e)) => Err(e),
        Err(Failure::Answer(r)) => return r,
    };
    let drawn = decision
        .as_ref()
        .map(|d| d.drawn.clone())
        .unwrap_or_default();
    let mut next = p.clone();
    let outcome = decision
        .as_ref()
        .map(|d| d.grant.clone())
        .map_err(Clone::clone);
    if let Err(e) = next.handle_approve(by, app.clock().now(), outcome) {
        undraw(&app, &drawn).await;
        if p.handle_timeout(app.clock().now()) {
            let _ = store_decided(&app, n, &p).await;
        }
        return approval_refused(&e);
    }
    // Approved: the registry changes before the grant is stored as approved.
    if let Ok(d) = &decision {
        if !d.put.is_empty() || d.remove.is_some() {
            let prune = d.remove.as_ref().map(|name| (name.clone(), name.clone()));
            if let Err(e) = app
                .state
                .write_documents(d.put.clone(), prune, Flush::Commit)
                .await
            {
                undraw(&app, &drawn).await;
                return store_failed(&e);
            }
        }
    }
    let p = next;
    store_decided(&app, n, &p).await
}

/// `POST /admin/grants/{id}/reject` (`{"reason": ..., "by": ...}`): 200 with the grant, now
/// rejected; its `GET` answers 403 naming who and why.
async fn reject(State(app): State<Arc<App>>, Path(id): Path<String>, body: Body) -> Response {
    let v = match verdict(&app, body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let by = v.by.as_deref().unwrap_or(DEFAULT_ACTOR);
    let _turn = app.grant_turn.lock().await;
    let (n, mut p) = match read_async(&app, &id).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let now = app.clock().now();
    if let Err(e) = p.handle_reject(by, v.reason.as_deref().unwrap_or(""), now) {
        if p.handle_timeout(now) {
            let _ = store_decided(&app, n, &p).await;
        }
        return approval_refused(&e);
    }
    store_decided(&app, n, &p).await
}
