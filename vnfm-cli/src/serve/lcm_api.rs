//! The SOL003 VNF LCM API subset (v2 paths).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{Map, Value};
use vnfm_core::driver::{InstanceQuery, OpOccFilter, Store};
use vnfm_core::id::{OpOccId, VnfInstanceId};
use vnfm_core::lcm::{
    CreateVnfRequest, HealVnfRequest, InstantiateVnfRequest, InstantiationState, ScaleVnfRequest,
    TerminateVnfRequest, VnfInstance,
};
use vnfm_core::lifecycle::grant::{lcm_op_occ_href, vnf_instance_href};
use vnfm_core::lifecycle::modify::{self, ModifyError};
use vnfm_core::lifecycle::OperationOptions;

use super::guard::{require_api_token, Guard};
use super::http::{json, parse, problem, problem_of, read_body, with_location};
use super::query;
use super::state::{launch, lcm_problem, App, OpRequest};

pub(crate) fn routes(app: Arc<App>) -> Router<Arc<App>> {
    Router::new()
        .route(
            "/vnflcm/v2/vnf_instances",
            post(create_instance).get(list_instances),
        )
        .route(
            "/vnflcm/v2/vnf_instances/{id}",
            get(show_instance)
                .delete(delete_instance)
                .patch(modify_instance),
        )
        .route(
            "/vnflcm/v2/vnf_instances/{id}/instantiate",
            post(instantiate),
        )
        .route("/vnflcm/v2/vnf_instances/{id}/scale", post(scale))
        .route("/vnflcm/v2/vnf_instances/{id}/heal", post(heal))
        .route("/vnflcm/v2/vnf_instances/{id}/terminate", post(terminate))
        .route(
            "/vnflcm/v2/vnf_instances/{id}/scale_to_level",
            post(super::vnf_ops::scale_to_level),
        )
        .route(
            "/vnflcm/v2/vnf_instances/{id}/change_flavour",
            post(super::vnf_ops::change_flavour),
        )
        .route(
            "/vnflcm/v2/vnf_instances/{id}/operate",
            post(super::vnf_ops::operate),
        )
        .route(
            "/vnflcm/v2/vnf_instances/{id}/change_ext_conn",
            post(super::vnf_ops::change_ext_conn),
        )
        .route("/vnflcm/v2/vnf_lcm_op_occs", get(list_op_occs))
        .route("/vnflcm/v2/vnf_lcm_op_occs/{id}", get(show_op_occ))
        .route(
            "/vnflcm/v2/vnf_lcm_op_occs/{id}/fail",
            post(super::tasks::fail),
        )
        .route(
            "/vnflcm/v2/vnf_lcm_op_occs/{id}/retry",
            post(super::tasks::retry),
        )
        .route(
            "/vnflcm/v2/vnf_lcm_op_occs/{id}/rollback",
            post(super::tasks::rollback),
        )
        .route(
            "/vnflcm/v2/vnf_lcm_op_occs/{id}/cancel",
            post(super::tasks::cancel),
        )
        .route("/intent/v1/selections", post(select_region))
        .route_layer(axum::middleware::from_fn_with_state(
            Guard::new(app, "the LCM API requires"),
            require_api_token,
        ))
}

fn store_problem(e: &vnfm_core::driver::DriverError) -> Response {
    problem(super::state::store_failure(e))
}

/// The task resources an instance in `state` offers in its `_links` (SOL003 5.5.2.2), as
/// (member, path segment): only `instantiate` while `NOT_INSTANTIATED` (or a state not
/// recorded); the operations vnfm runs on an instantiated VNF after (`changeFlavour` is
/// offered whatever the package, which answers a change of a one-flavour package 409 saying
/// so; `changeExtConn` whatever the flavour's external CPs, a CNF answering 422).
fn task_links(state: Option<InstantiationState>) -> &'static [(&'static str, &'static str)] {
    match state {
        Some(InstantiationState::Instantiated) => &[
            ("scale", "scale"),
            ("scaleToLevel", "scale_to_level"),
            ("changeFlavour", "change_flavour"),
            ("changeExtConn", "change_ext_conn"),
            ("heal", "heal"),
            ("operate", "operate"),
            ("terminate", "terminate"),
        ],
        _ => &[("instantiate", "instantiate")],
    }
}

fn instance_links(inst: VnfInstance) -> Value {
    let href = vnf_instance_href(&inst.id);
    let tasks = task_links(inst.instantiation_state);
    let mut v = serde_json::to_value(&inst).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        let mut links = Map::new();
        links.insert("self".into(), serde_json::json!({ "href": href }));
        for (member, path) in tasks {
            links.insert(
                (*member).into(),
                serde_json::json!({ "href": format!("{href}/{path}") }),
            );
        }
        o.insert("_links".into(), Value::Object(links));
    }
    v
}

/// The entity tag of an instance's representation (RFC 9110 8.8.3, SOL003 5.4.3.3.2): a strong
/// tag, the FNV-1a hash of its JSON, the same across restarts for the same content.
fn etag_of(representation: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in representation.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("\"{h:016x}\"")
}

/// A parsed `If-Match` (RFC 9110 13.1.1): `*`, or a list of entity tags.
#[derive(Debug, PartialEq, Eq)]
enum IfMatch {
    /// `*`: any current representation.
    Any,
    /// The entity tags, as written (with their quotes; weak ones with `W/`).
    Tags(Vec<String>),
}

/// Parses the `If-Match` fields of `headers` (`None` when there is none): `If-Match = "*" /
/// #entity-tag`, `entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE` (RFC 9110 8.8.3, 13.1.1).
///
/// # Errors
/// What is wrong, for a 400: `*` in a list (`"zzz", *`) or twice, a tag without its quotes,
/// text after a tag, an empty field, a value that is not visible ASCII.
fn parse_if_match(headers: &HeaderMap) -> Result<Option<IfMatch>, String> {
    let mut fields = Vec::new();
    for v in headers.get_all(header::IF_MATCH) {
        fields.push(
            v.to_str()
                .map_err(|_| "If-Match is not visible ASCII text".to_owned())?,
        );
    }
    if fields.is_empty() {
        return Ok(None);
    }
    let text = fields.join(",");
    let shown = vnfm_core::input::shorten(&text, 80);
    let bad = |what: &str| {
        format!(
            "If-Match {shown:?}: {what}; expected * alone or a list of entity tags such as \
             \"0123abcd\", W/\"x\" (RFC 9110 13.1.1)"
        )
    };
    let b = text.as_bytes();
    let (mut i, mut star, mut tags) = (0usize, false, Vec::new());
    loop {
        // Empty list elements and whitespace between them (RFC 9110 5.6.1).
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b',') {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        let start = i;
        if b[i] == b'*' {
            i += 1;
            if star || !tags.is_empty() {
                return Err(bad("* together with other elements"));
            }
            star = true;
        } else {
            if b[i..].starts_with(b"W/") {
                i += 2;
            }
            if b.get(i) != Some(&b'"') {
                return Err(bad("an entity tag without its double quotes"));
            }
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if !(b[i] == 0x21 || (0x23..=0x7e).contains(&b[i])) {
                    return Err(bad("a character an entity tag cannot hold"));
                }
                i += 1;
            }
            if i == b.len() {
                return Err(bad("an entity tag without its closing double quote"));
            }
            i += 1;
            if star {
                return Err(bad("* together with other elements"));
            }
            tags.push(text[start..i].to_owned());
        }
        while i < b.len() && matches!(b[i], b' ' | b'\t') {
            i += 1;
        }
        if i < b.len() && b[i] != b',' {
            return Err(bad("text after an element where a comma belongs"));
        }
    }
    match (star, tags.is_empty()) {
        (true, _) => Ok(Some(IfMatch::Any)),
        (false, false) => Ok(Some(IfMatch::Tags(tags))),
        (false, true) => Err(bad("no element")),
    }
}

/// Whether `cond` admits the entity tag `etag`: `*`, or one of its strong tags (RFC 9110
/// 13.1.1: weak tags never match).
fn if_match_admits(cond: &IfMatch, etag: &str) -> bool {
    match cond {
        IfMatch::Any => true,
        IfMatch::Tags(tags) => tags.iter().any(|t| t == etag),
    }
}

/// The SOL003 request bodies that `vnfm serve` parses, for [`check_lcm_body`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LcmBody {
    /// `POST /vnf_instances`: a `CreateVnfRequest`.
    Create,
    /// `POST /vnf_instances/{id}/instantiate`: an `InstantiateVnfRequest`.
    Instantiate,
    /// `POST /vnf_instances/{id}/scale`: a `ScaleVnfRequest`.
    Scale,
    /// `POST /vnf_instances/{id}/heal`: a `HealVnfRequest`.
    Heal,
    /// `POST /vnf_instances/{id}/terminate`: a `TerminateVnfRequest`.
    Terminate,
    /// `PATCH /vnf_instances/{id}`: a `VnfInfoModificationRequest`.
    Modify,
}

/// Reads `body` as the handler of `kind` does before it looks at an instance or a package: the
/// same JSON parse (a 400 ProblemDetails on failure), then the checks that need neither (the
/// request's `validate`, which the lifecycle runs first; [`modify::check`] for `PATCH`).
/// Public for the fuzz targets of `fuzz/` and their corpus regression test.
///
/// # Errors
/// The HTTP status the request is refused with (400, or 422 for a `PATCH` that names a
/// field it cannot change).
pub fn check_lcm_body(kind: LcmBody, body: &[u8]) -> Result<(), u16> {
    let status = |r: Response| r.status().as_u16();
    match kind {
        LcmBody::Create => {
            let req: CreateVnfRequest = parse(body, "CreateVnfRequest").map_err(status)?;
            req.validate().map_err(|_| 400)
        }
        LcmBody::Instantiate => {
            let req: InstantiateVnfRequest =
                parse(body, "InstantiateVnfRequest").map_err(status)?;
            req.validate().map_err(|_| 400)
        }
        LcmBody::Scale => {
            let req: ScaleVnfRequest = parse(body, "ScaleVnfRequest").map_err(status)?;
            req.validate().map_err(|_| 400)
        }
        LcmBody::Heal => parse_heal(body).map(drop).map_err(status),
        LcmBody::Terminate => parse::<TerminateVnfRequest>(body, "TerminateVnfRequest")
            .map(drop)
            .map_err(status),
        LcmBody::Modify => {
            let patch: Map<String, Value> =
                parse(body, "VnfInfoModificationRequest").map_err(status)?;
            modify::check(&patch).map_err(|e| status(modify_problem(&e)))
        }
    }
}

async fn body_of(app: &App, body: Body) -> Result<axum::body::Bytes, Response> {
    read_body(body, app.config.server.body_limit, app.request_timeout()).await
}

async fn create_instance(State(app): State<Arc<App>>, body: Body) -> Response {
    let req: CreateVnfRequest = match body_of(&app, body)
        .await
        .and_then(|b| parse(&b, "CreateVnfRequest"))
    {
        Ok(r) => r,
        Err(r) => return r,
    };
    let pkg = match app.package(&req.vnfd_id) {
        Ok(p) => p,
        Err(p) => return problem(p),
    };
    match app.lcm.create(&pkg, &req).await {
        Ok(inst) => {
            let href = vnf_instance_href(&inst.id);
            with_location(json(StatusCode::CREATED, &instance_links(inst)), &href)
        }
        Err(e) => problem(lcm_problem(&e)),
    }
}

/// `GET /vnf_instances`: filters, attribute selectors and paging (SOL013 5.2-5.4, `query`),
/// read from the store a chunk at a time (`Store::instance_page`: a keyset query on the id), so
/// that a page costs what it reads, not the number of instances. An `eq` term on
/// `vnfInstanceName` or `id` is handed to the store (an index answers it); the whole filter is
/// then evaluated on what the store returns. One request reads at most
/// `[server] list_scan_limit` instances (`query::scan_limit`): a filter that matches fewer than a page among them is
/// answered with a short page and a next marker (`vnfm_core::query::Scan`).
async fn list_instances(State(app): State<Arc<App>>, uri: Uri) -> Response {
    let q = match query::parse(&uri, vnfm_core::query::VNF_INSTANCES) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let pushed = |attr: &str| {
        q.filter
            .as_ref()
            .and_then(|f| f.eq_values(attr))
            .map(<[String]>::to_vec)
    };
    let (names, ids) = (pushed("vnfInstanceName"), pushed("id"));
    let s = &app.config.server;
    let scan = vnfm_core::query::Scan::new(
        q,
        s.page_size,
        query::scan_limit(s.list_scan_limit, s.page_size),
        s.filter_work_limit,
    );
    let read = |after: Option<String>, limit: usize| {
        let app = app.clone();
        let mut page = InstanceQuery::first(limit).after(after.map(VnfInstanceId::from));
        if let Some(names) = &names {
            page = page.named(names.clone());
        }
        if let Some(ids) = &ids {
            page = page.with_ids(ids.iter().cloned().map(VnfInstanceId::from).collect());
        }
        async move {
            // Under the gate for the read only; released before the filter runs.
            let _gate = app.shared.gate.read().await;
            app.store
                .instance_page(&page)
                .await
                .map_err(|e| store_problem(&e))
        }
    };
    query::scan_off_workers(&uri, scan, read, instance_links).await
}

async fn load(app: &App, id: &VnfInstanceId) -> Result<VnfInstance, Response> {
    app.store.instance(id).await.map_err(|e| {
        if e.is_not_found() {
            problem_of(404, format!("VNF instance {id} not found"))
        } else {
            store_problem(&e)
        }
    })
}

async fn show_instance(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    let _gate = app.shared.gate.read().await;
    match load(&app, &VnfInstanceId::from(id)).await {
        Ok(inst) => {
            let v = instance_links(inst);
            let mut r = json(StatusCode::OK, &v);
            if let Ok(tag) = HeaderValue::from_str(&etag_of(&v)) {
                r.headers_mut().insert(header::ETAG, tag);
            }
            r
        }
        Err(r) => r,
    }
}

async fn delete_instance(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    let id = VnfInstanceId::from(id);
    if let Err(p) = app.claim(&id) {
        return problem(p);
    }
    let r = app.lcm.delete(&id).await;
    app.release(&id);
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => problem(lcm_problem(&e)),
    }
}

/// The ProblemDetails of a refused modification: 400 for a member of the wrong type, 422 for
/// a member vnfm does not modify, 404, 409, 500.
fn modify_problem(e: &ModifyError) -> Response {
    let status = match e {
        ModifyError::BadMember { .. } => 400,
        ModifyError::Unmodifiable { .. } => 422,
        ModifyError::NotFound(_) => 404,
        ModifyError::Busy { .. } => 409,
        _ => 500,
    };
    let detail = match e {
        ModifyError::Store(s) => format!("{e}: {s}"),
        _ => e.to_string(),
    };
    problem_of(status, detail)
}

/// `PATCH`: a `VnfInfoModificationRequest`, run as a `MODIFY_INFO` operation by the core
/// ([`vnfm_core::lifecycle::Lifecycle::modify_info`]); this handler parses and answers.
async fn modify_instance(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let id = VnfInstanceId::from(id);
    let patch: Map<String, Value> = match body_of(&app, body)
        .await
        .and_then(|b| parse(&b, "VnfInfoModificationRequest"))
    {
        Ok(p) => p,
        Err(r) => return r,
    };
    // A bad request is answered before the instance is looked at (or claimed).
    if let Err(e) = modify::check(&patch) {
        return modify_problem(&e);
    }
    let cond = match parse_if_match(&headers) {
        Ok(c) => c,
        Err(e) => return problem_of(400, e),
    };
    if let Err(p) = app.claim(&id) {
        return problem(p);
    }
    // If-Match (SOL003 5.4.3.3.4): compared with the instance as it is now that it is claimed,
    // so no other change comes between the comparison and the modification.
    if let Some(cond) = cond {
        let current = load(&app, &id).await.map(|i| etag_of(&instance_links(i)));
        match current {
            Ok(tag) if if_match_admits(&cond, &tag) => {}
            Ok(tag) => {
                app.release(&id);
                return problem_of(
                    412,
                    format!(
                        "If-Match does not match the current entity tag {tag} of VNF instance \
                         {id}: it changed since it was read; read it again (GET) and retry"
                    ),
                );
            }
            Err(r) => {
                app.release(&id);
                return r;
            }
        }
    }
    let r = app
        .lcm
        .modify_info(&id, &patch, &OperationOptions::default())
        .await;
    app.release(&id);
    match r {
        Ok(report) => with_location(
            StatusCode::ACCEPTED.into_response(),
            &lcm_op_occ_href(&report.op_occ.id),
        ),
        Err(e) => problem(lcm_problem(&e)),
    }
}

macro_rules! operation {
    ($name:ident, $req:ty, $what:literal, $variant:ident) => {
        async fn $name(
            State(app): State<Arc<App>>,
            Path(id): Path<String>,
            body: Body,
        ) -> Response {
            let req: $req = match body_of(&app, body).await.and_then(|b| parse(&b, $what)) {
                Ok(r) => r,
                Err(r) => return r,
            };
            launch(app, id, OpRequest::$variant(req.into())).await
        }
    };
}

operation!(
    instantiate,
    InstantiateVnfRequest,
    "InstantiateVnfRequest",
    Instantiate
);
operation!(scale, ScaleVnfRequest, "ScaleVnfRequest", Scale);

/// `POST .../heal`: a `HealVnfRequest`; `vnfcInstanceId` absent heals every VNFC (SOL003
/// 5.5.2.9), an empty list is refused (422 naming the field: it names no VNFC, most likely a
/// client's mistake, and healing all of them is the opposite of what it says).
async fn heal(State(app): State<Arc<App>>, Path(id): Path<String>, body: Body) -> Response {
    let req = match body_of(&app, body).await.and_then(|b| parse_heal(&b)) {
        Ok(r) => r,
        Err(r) => return r,
    };
    launch(app, id, OpRequest::Heal(req)).await
}

/// Parses a `HealVnfRequest`: 400 when it is not one, 422 for `"vnfcInstanceId": []`.
fn parse_heal(body: &[u8]) -> Result<HealVnfRequest, Response> {
    let raw: Value = parse(body, "HealVnfRequest")?;
    if raw
        .get("vnfcInstanceId")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        return Err(problem_of(
            422,
            "vnfcInstanceId is an empty list: it names no VNFC to heal; expected the ids of \
             the VNFCs to heal, or no vnfcInstanceId to heal every VNFC (SOL003 5.5.2.9)",
        ));
    }
    serde_json::from_value(raw).map_err(|e| {
        problem_of(
            400,
            format!("the request body is not a valid HealVnfRequest: {e}"),
        )
    })
}
operation!(
    terminate,
    TerminateVnfRequest,
    "TerminateVnfRequest",
    Terminate
);

/// `GET /vnf_lcm_op_occs`: filters, attribute selectors and paging (SOL013 5.2-5.4, `query`).
async fn list_op_occs(State(app): State<Arc<App>>, uri: Uri) -> Response {
    let q = match query::parse(&uri, vnfm_core::query::VNF_LCM_OP_OCCS) {
        Ok(q) => q,
        Err(r) => return r,
    };
    // A snapshot under the gate; the gate is released before the filter runs.
    let ops = {
        let _gate = app.shared.gate.read().await;
        app.store.op_occs(OpOccFilter::all()).await
    };
    match ops {
        Ok(ops) => {
            let s = &app.config.server;
            query::page_off_workers(&uri, q, s.page_size, s.filter_work_limit, move || {
                ops.iter()
                    .map(|o| serde_json::to_value(o).unwrap_or(Value::Null))
                    .collect()
            })
            .await
        }
        Err(e) => store_problem(&e),
    }
}

async fn show_op_occ(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    let _gate = app.shared.gate.read().await;
    let id = OpOccId::from(id);
    match app.store.op_occ(&id).await {
        Ok(op) => json(StatusCode::OK, &op),
        Err(e) if e.is_not_found() => {
            problem_of(404, format!("VNF LCM operation occurrence {id} not found"))
        }
        Err(e) => store_problem(&e),
    }
}

/// The body of `POST /intent/v1/selections`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SelectionRequest {
    /// The cloud-selection policy (the seed's JSON).
    policy: Value,
    /// The candidate file's content as JSON.
    candidates: Value,
    /// The package whose VDUs are the demands.
    vnfd_id: String,
    /// Its deployment flavour [default: the only or first].
    #[serde(default)]
    flavour_id: Option<String>,
    /// The customer location.
    #[serde(default)]
    customer: Option<vnfm_core::intent::candidates::GeoPoint>,
}

/// `POST /intent/v1/selections`: the question of `vnfm select` over HTTP. 200 with the
/// choice, the ranking and every dropped candidate's reasons (also when nothing is chosen:
/// `chosen` is null); 400 naming the field of a bad policy or candidate list; 422 for an
/// unknown package.
///
/// The computation runs on the blocking pool (parsing and checking the request, then the
/// choice), not on the async workers: the middleware's `[server] request_timeout` answers 503
/// when it takes longer, and other requests are served meanwhile. Only the VIM's zone listing
/// runs on the async workers.
async fn select_region(State(app): State<Arc<App>>, body: Body) -> Response {
    use vnfm_core::intent::{candidates, deploy};
    let bytes = match body_of(&app, body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let a = app.clone();
    let prepared = blocking(move || prepare_selection(&a, &bytes)).await;
    let prepared = match prepared {
        Ok(p) => p,
        Err(r) => return r,
    };
    let zones = if prepared.zoned.is_empty() {
        Vec::new()
    } else {
        match app
            .lcm
            .drivers()
            .zones
            .list_zones(vnfm_core::driver::ListZones::default())
            .await
        {
            Ok(z) => z,
            Err(e) => return problem_of(503, format!("listing the VIM's zones: {e}")),
        }
    };
    blocking(move || {
        let Prepared {
            policy,
            cands,
            demands,
            zoned,
        } = prepared;
        let now = app.clock().now();
        let mut caps = app.promise.read(|l| {
            let from = l.now().unwrap_or(now);
            candidates::Capacities::new().with_ledger(&cands, l, from)
        });
        for r in zoned {
            caps = caps.with_zone_catalogue(r, &zones);
        }
        match deploy::choose_region(&policy, &cands, &demands, &caps) {
            Ok(choice) => Ok(json(StatusCode::OK, &choice)),
            Err(e) => Err(problem_of(422, e.to_string())),
        }
    })
    .await
    .unwrap_or_else(|r| r)
}

/// Runs `f` on the blocking pool; its error, or a 500 when the task failed.
async fn blocking<T, F>(f: F) -> Result<T, Response>
where
    F: FnOnce() -> Result<T, Response> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(problem_of(500, format!("the request's task failed: {e}"))))
}

/// A selection request, checked: what the choice needs beside the VIM's zones.
struct Prepared {
    policy: vnfm_core::intent::policy::Policy,
    cands: vnfm_core::intent::candidates::CandidateFile,
    demands: Vec<vnfm_core::intent::select::Demand>,
    /// The regions whose capacity is a zone catalogue of this server's VIM (or of no named
    /// VIM).
    zoned: Vec<String>,
}

/// Parses and checks the body of a selection request (blocking: the documents may be large).
fn prepare_selection(app: &App, bytes: &[u8]) -> Result<Prepared, Response> {
    use vnfm_core::intent::{candidates, deploy, policy};
    let req: SelectionRequest = parse(bytes, "selection request")?;
    let bad = |e: vnfm_core::Error| problem_of(400, e.to_string());
    let policy =
        policy::Policy::from_text("request body: policy", &req.policy.to_string()).map_err(bad)?;
    let cands = candidates::CandidateFile::from_text(
        "request body: candidates",
        &req.candidates.to_string(),
    )
    .map_err(bad)?;
    if let Some(c) = &req.customer {
        c.check("request body", "customer").map_err(bad)?;
    }
    let pkg = app.package(&req.vnfd_id).map_err(problem)?;
    let flavour = req
        .flavour_id
        .clone()
        .or_else(|| pkg.flavours.keys().next().cloned())
        .ok_or_else(|| problem_of(422, "the package has no deployment flavour"))?;
    let demands = deploy::package_demands(&pkg, &flavour, &policy, req.customer)
        .map_err(|e| problem_of(422, e.to_string()))?;
    // Regions whose capacity is a zone catalogue of this server's VIM (or of no named VIM),
    // and regions backed by a pool of the server's ledger.
    let own = |v: &candidates::VimRef| match v {
        candidates::VimRef::Simulated => app.config.vim.kind == crate::config::VimKind::Sim,
        candidates::VimRef::OpenStack { .. } => {
            app.config.vim.kind == crate::config::VimKind::Openstack
        }
    };
    let zoned: Vec<String> = cands
        .zone_catalogue_regions()
        .into_iter()
        .filter(|(vim, _)| vim.is_none_or(own))
        .flat_map(|(_, regions)| regions)
        .map(|r| r.id.clone())
        .collect();
    Ok(Prepared {
        policy,
        cands,
        demands,
        zoned,
    })
}
