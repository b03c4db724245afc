//! `POST /vnflcm/v2/vnf_instances/{id}/scale_to_level`, `/change_flavour` and
//! `/change_ext_conn`, `/operate` (SOL003 v3.3.1 5.4.6, 5.4.7, 5.4.11, 5.4.10).
//!
//! - `operate`: the core's `OPERATE` ([`vnfm_core::lifecycle::operate`]): every server of the
//!   instance started or stopped through the VIM; 202 with the occurrence.
//!
//! - `scale_to_level`: the core decides the aspect's scale steps
//!   ([`vnfm_core::lifecycle::to_level`]) and runs them as a scale, in the background (202
//!   with the occurrence's `Location`, a `SCALE_TO_LEVEL`); 422 for a request that names an
//!   unknown level or aspect, or changes no aspect or several (one aspect per operation).
//! - `change_flavour`: the core's `CHANGE_FLAVOUR` ([`vnfm_core::lifecycle::change_flavour`])
//!   in the background (202 with the occurrence); 409 for an instance not instantiated, a
//!   package with one flavour or the flavour it has, 422 for an unknown flavour or level and
//!   for the request fields vnfm does not support.
//! - `change_ext_conn`: not run; the core says why ([`vnfm_core::lifecycle::unsupported`]):
//!   409 for an instance not instantiated, 422 for what vnfm does not do.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{Map, Value};
use vnfm_core::id::VnfInstanceId;
use vnfm_core::lifecycle::change_flavour::ChangeVnfFlavourRequest;
use vnfm_core::lifecycle::to_level::ScaleVnfToLevelRequest;
use vnfm_core::lifecycle::unsupported;

use super::http::{parse, problem, problem_of, read_body};
use super::state::{launch, lcm_problem, App, OpRequest};

async fn body_of<T: serde::de::DeserializeOwned>(
    app: &App,
    body: Body,
    what: &str,
) -> Result<T, Response> {
    read_body(body, app.config.server.body_limit, app.request_timeout())
        .await
        .and_then(|b| parse(&b, what))
}

/// `POST /vnf_instances/{id}/scale_to_level` with a `ScaleVnfToLevelRequest`.
pub(super) async fn scale_to_level(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let req: ScaleVnfToLevelRequest = match body_of(&app, body, "ScaleVnfToLevelRequest").await {
        Ok(r) => r,
        Err(r) => return r,
    };
    launch(app, id, OpRequest::ScaleToLevel(req)).await
}

/// `POST /vnf_instances/{id}/operate` with an `OperateVnfRequest`: the core's
/// [`vnfm_core::lifecycle::Lifecycle::operate`] in the background (202).
pub(super) async fn operate(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let req: vnfm_core::lifecycle::operate::OperateVnfRequest =
        match body_of(&app, body, "OperateVnfRequest").await {
            Ok(r) => r,
            Err(r) => return r,
        };
    launch(app, id, OpRequest::Operate(req)).await
}

/// A request body that must be a JSON object with `required` (400 otherwise).
fn require(body: &Map<String, Value>, what: &str, required: &str) -> Result<(), Response> {
    if body.contains_key(required) {
        return Ok(());
    }
    Err(problem_of(
        400,
        format!("the request body is not a valid {what}: missing field `{required}`"),
    ))
}

/// `POST /vnf_instances/{id}/change_flavour` with a `ChangeVnfFlavourRequest`: the core's
/// [`vnfm_core::lifecycle::Lifecycle::change_flavour`] in the background (202); 409 or 422
/// for what [`vnfm_core::lifecycle::change_flavour::check`] refuses.
pub(super) async fn change_flavour(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let req: ChangeVnfFlavourRequest = match body_of(&app, body, "ChangeVnfFlavourRequest").await {
        Ok(r) => r,
        Err(r) => return r,
    };
    launch(app, id, OpRequest::ChangeFlavour(Box::new(req))).await
}

/// `POST /vnf_instances/{id}/change_ext_conn` with a `ChangeExtVnfConnectivityRequest`: 409
/// or 422, saying why vnfm does not run it.
pub(super) async fn change_ext_conn(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let req: Map<String, Value> = match body_of(&app, body, "ChangeExtVnfConnectivityRequest").await
    {
        Ok(r) => r,
        Err(r) => return r,
    };
    if let Err(r) = require(&req, "ChangeExtVnfConnectivityRequest", "extVirtualLinks") {
        return r;
    }
    let (inst, _) = match app.instance_and_package(&VnfInstanceId::from(id)).await {
        Ok(x) => x,
        Err(p) => return problem(p),
    };
    problem(lcm_problem(&unsupported::change_ext_conn(&inst)))
}
