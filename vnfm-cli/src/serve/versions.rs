//! SOL013 API versioning of the VNF LCM API (clause 9): the `api_versions` resources
//! (`GET /vnflcm/api_versions`, `GET /vnflcm/v2/api_versions`, clause 9.3; any other method is
//! 405 with `Allow`) and the `Version` header on every response under `/vnflcm/` (clause 9.2),
//! errors included.
//!
//! vnfm implements SOL003 v3.3.1, whose VNF LCM interface is API version 2.0.0 (major version
//! `v2`, the URI prefix `/vnflcm/v2`). The resources are open like `/metrics`: a client finds
//! the versions before it has a token (SOL013 9.3.1 leaves their authorization optional).

use std::sync::Arc;

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde_json::json;

use super::http;
use super::state::App;

/// The version of the VNF LCM API that `vnfm serve` implements (SOL003 v3.3.1).
pub(crate) const VNFLCM_API_VERSION: &str = "2.0.0";

/// The URI prefix of that version.
pub(crate) const VNFLCM_URI_PREFIX: &str = "/vnflcm/v2";

/// The `Version` response header (SOL013 9.2).
static VERSION: HeaderName = HeaderName::from_static("version");

pub(crate) fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/vnflcm/api_versions", get(api_versions))
        .route("/vnflcm/v2/api_versions", get(api_versions))
}

/// SOL013 `ApiVersionInformation` (clause 9.3.3).
async fn api_versions() -> Response {
    http::json(
        StatusCode::OK,
        &json!({
            "uriPrefix": VNFLCM_URI_PREFIX,
            "apiVersions": [{ "version": VNFLCM_API_VERSION, "isDeprecated": false }],
        }),
    )
}

/// Adds `Version: 2.0.0` to `r`, the answer of a request under `/vnflcm/` ([`is_lcm`]).
pub(crate) fn version_header(lcm: bool, mut r: Response) -> Response {
    if lcm {
        r.headers_mut().insert(
            VERSION.clone(),
            HeaderValue::from_static(VNFLCM_API_VERSION),
        );
    }
    r
}

/// Whether `path` is one of the VNF LCM interface's (its answers carry [`VERSION`]).
pub(crate) fn is_lcm(path: &str) -> bool {
    path.starts_with("/vnflcm/")
}
