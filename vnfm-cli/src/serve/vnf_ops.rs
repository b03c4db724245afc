//! `POST /vnflcm/v2/vnf_instances/{id}/scale_to_level`, `/change_flavour` and
//! `/change_ext_conn`, `/operate` (SOL003 v3.3.1 5.4.6, 5.4.7, 5.4.11, 5.4.10).
//!
//! - `operate`: the core's `OPERATE` ([`vnfm_core::lifecycle::operate`]): every server of the
//!   instance started or stopped through the VIM; 202 with the occurrence.
//!
//! - `scale_to_level`: the core decides what the levels change
//!   ([`vnfm_core::lifecycle::to_level`]): one aspect's scale, or one operation for the
//!   several aspects a level changes; in the background (202 with the occurrence's
//!   `Location`, a `SCALE_TO_LEVEL`); 422 for a request that names an unknown level or aspect,
//!   levels out of range, or changes no aspect.
//! - `change_flavour`: the core's `CHANGE_FLAVOUR` ([`vnfm_core::lifecycle::change_flavour`])
//!   in the background (202 with the occurrence); 409 for an instance not instantiated, a
//!   package with one flavour or the flavour it has, 422 for an unknown flavour or level and
//!   for the request fields vnfm does not support.
//! - `change_ext_conn`: the core's `CHANGE_EXT_CONN`
//!   ([`vnfm_core::lifecycle::change_ext_conn`]) in the background (202 with the occurrence);
//!   409 for an instance not instantiated, 422 for a request the core refuses (each naming the
//!   field and the value: no link, a link without `id`, `resourceId` or `extCps`, a `cpdId`
//!   that is no external CP of the flavour or is on two links, a v2 `cpConfig` array, ...).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::Value;
use vnfm_core::lifecycle::change_ext_conn::{self, ChangeExtVnfConnectivityRequest};
use vnfm_core::lifecycle::change_flavour::ChangeVnfFlavourRequest;
use vnfm_core::lifecycle::to_level::ScaleVnfToLevelRequest;

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

/// `POST /vnf_instances/{id}/change_ext_conn` with a `ChangeExtVnfConnectivityRequest`: the
/// core's [`vnfm_core::lifecycle::Lifecycle::change_ext_conn`] in the background (202); 422
/// for a link or CP without its mandatory attributes or a v2 `cpConfig` array
/// ([`change_ext_conn::check_body`]), 409 or 422 for what [`change_ext_conn::check`] refuses.
pub(super) async fn change_ext_conn(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let raw: Value = match body_of(&app, body, "ChangeExtVnfConnectivityRequest").await {
        Ok(r) => r,
        Err(r) => return r,
    };
    if let Err(e) = change_ext_conn::check_body(&raw) {
        return problem(lcm_problem(&e));
    }
    let req: ChangeExtVnfConnectivityRequest =
        match serde_json::from_value(raw).map_err(|e| e.to_string()) {
            Ok(r) => r,
            Err(e) => {
                return problem_of(
                    400,
                    format!("the request body is not a valid ChangeExtVnfConnectivityRequest: {e}"),
                )
            }
        };
    launch(app, id, OpRequest::ChangeExtConn(Box::new(req))).await
}
