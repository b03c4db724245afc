//! SOL013 API versioning of the VNF LCM API and of the Grant API (clause 9): the
//! `api_versions` resources (`GET /vnflcm/api_versions`, `GET /vnflcm/v2/api_versions`,
//! `GET /grant/api_versions`, `GET /grant/v1/api_versions`, clause 9.3; any other method is 405
//! with `Allow`) and the `Version` header on every response under `/vnflcm/` and `/grant/`
//! (clause 9.2), errors included.
//!
//! vnfm implements SOL003 v3.3.1, whose VNF LCM interface is API version 2.0.0 (major version
//! `v2`, the URI prefix `/vnflcm/v2`) and whose Grant interface is API version 1.4.0 (`v1`,
//! `/grant/v1`). The resources are open like `/metrics`: a client finds the versions before it
//! has a token (SOL013 9.3.1 leaves their authorization optional).

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

/// The version of the Grant API that `vnfm serve` implements as an NFVO (SOL003 v3.3.1).
pub(crate) const GRANT_API_VERSION: &str = "1.4.0";

/// The URI prefix of that version.
pub(crate) const GRANT_URI_PREFIX: &str = "/grant/v1";

/// The version of the VNF package management API (SOL005 v3.3.1) whose read-only subset
/// `vnfm serve` answers (`super::vnfpkgm`): Tacker's `[v2_nfvo] vnfpkgm_api_version`.
pub(crate) const VNFPKGM_API_VERSION: &str = "2.1.0";

/// The `Version` response header (SOL013 9.2).
static VERSION: HeaderName = HeaderName::from_static("version");

pub(crate) fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/vnflcm/api_versions", get(api_versions))
        .route("/vnflcm/v2/api_versions", get(api_versions))
        .route("/grant/api_versions", get(grant_api_versions))
        .route("/grant/v1/api_versions", get(grant_api_versions))
        .route("/vnfpkgm/api_versions", get(vnfpkgm_api_versions))
        .route("/vnfpkgm/v2/api_versions", get(vnfpkgm_api_versions))
}

/// SOL013 `ApiVersionInformation` of the VNF package management API.
async fn vnfpkgm_api_versions() -> Response {
    http::json(
        StatusCode::OK,
        &json!({
            "uriPrefix": super::vnfpkgm::VNFPKGM_URI_PREFIX,
            "apiVersions": [{ "version": VNFPKGM_API_VERSION, "isDeprecated": false }],
        }),
    )
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

/// SOL013 `ApiVersionInformation` of the Grant API.
async fn grant_api_versions() -> Response {
    http::json(
        StatusCode::OK,
        &json!({
            "uriPrefix": GRANT_URI_PREFIX,
            "apiVersions": [{ "version": GRANT_API_VERSION, "isDeprecated": false }],
        }),
    )
}

/// Adds `Version: <version>` to `r`, the answer of a request under the API of that version
/// ([`version_of`]).
pub(crate) fn version_header(version: Option<&'static str>, mut r: Response) -> Response {
    if let Some(v) = version {
        r.headers_mut()
            .insert(VERSION.clone(), HeaderValue::from_static(v));
    }
    r
}

/// The API version of the interface `path` is one of (its answers carry [`VERSION`]): the
/// VNF LCM interface's under `/vnflcm/`, the Grant interface's under `/grant/`, the VNF
/// package management interface's under `/vnfpkgm/`.
pub(crate) fn version_of(path: &str) -> Option<&'static str> {
    if path.starts_with("/vnflcm/") {
        Some(VNFLCM_API_VERSION)
    } else if path.starts_with("/grant/") {
        Some(GRANT_API_VERSION)
    } else if path.starts_with("/vnfpkgm/") {
        Some(VNFPKGM_API_VERSION)
    } else {
        None
    }
}
