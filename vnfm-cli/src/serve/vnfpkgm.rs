//! The SOL005 VNF package management subset that a VNFM reads from its NFVO (Tacker's
//! `[v2_nfvo]` reads it before it asks for a grant), read-only, from the packages `vnfm serve`
//! already serves ([`super::packages`]): the package of a `vnfdId`, its VNFD and its content.
//!
//! # Routes (API version 2.1.0, `Version: 2.1.0` on every answer under `/vnfpkgm/`)
//! - `GET /vnfpkgm/v2/onboarded_vnf_packages/{vnfdId}`: the `VnfPkgInfo` (its `id` is the
//!   `vnfdId`: one package per `vnfdId`), `ONBOARDED`, `ENABLED`, `NOT_IN_USE` (vnfm does not
//!   count the instances of another VNFM).
//! - `…/vnfd`: the VNFD (SOL005 10.4.4.3.2): with `Accept` allowing `application/zip` (or
//!   Tacker's `application/json`, read as no preference), a zip
//!   of the package's `TOSCA-Metadata/` and `Definitions/`; with `text/plain` only, the VNFD
//!   file itself when it is one (the only file of `Definitions/`, YAML), else 406.
//! - `…/package_content`: the whole package as a zip (`application/zip`; 406 when `Accept`
//!   does not allow it): a `.zip` / `.csar` entry as it is on disk, a folder zipped on the fly.
//!
//! A zip made here is the same bytes every time ([`crate::package_zip::stable_zip`]). At
//! most [`ZIPPING`] are made at once, each of at most
//! [`crate::package_zip::MAX_CONTENT_BYTES`]. An unknown `vnfdId` is 404 naming it. The
//! routes take the credentials of the Grant API: `[server] api_token`, or an access token of
//! `POST /token`.

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::json;
use tokio::sync::Semaphore;
use vnfm_core::package::VnfPackage;

use super::guard::{require_api_token, Guard};
use super::http::{json, problem_of};
use super::oauth::Issuer;
use super::state::App;
use crate::package_zip::{self, Files};

/// The URI prefix of the package endpoints.
pub(crate) const VNFPKGM_URI_PREFIX: &str = "/vnfpkgm/v2";

/// How many package zips are made (or read) at once; more wait.
const ZIPPING: usize = 2;

/// The permits of [`ZIPPING`].
static ZIPPERS: Semaphore = Semaphore::const_new(ZIPPING);

pub(crate) fn routes(app: Arc<App>, oauth: Option<Arc<Issuer>>) -> Router<Arc<App>> {
    let base = format!("{VNFPKGM_URI_PREFIX}/onboarded_vnf_packages/{{vnfd_id}}");
    Router::new()
        .route(&base, get(show))
        .route(&format!("{base}/vnfd"), get(vnfd))
        .route(&format!("{base}/package_content"), get(package_content))
        .route_layer(axum::middleware::from_fn_with_state(
            Guard::new(app, "the VNF package API requires").with_oauth(oauth),
            require_api_token,
        ))
}

fn href(vnfd_id: &str, tail: &str) -> String {
    format!("{VNFPKGM_URI_PREFIX}/onboarded_vnf_packages/{vnfd_id}{tail}")
}

fn not_found(vnfd_id: &str) -> Response {
    problem_of(
        404,
        format!(
            "no onboarded VNF package with vnfdId {vnfd_id:?}: expected the vnfdId of a package \
             of [packages] dir or of the built-in demo package (GET /admin/packages lists them)"
        ),
    )
}

/// `GET …/{vnfdId}`: the `VnfPkgInfo`.
async fn show(State(app): State<Arc<App>>, Path(vnfd_id): Path<String>) -> Response {
    let Some((p, _)) = app.packages.origin(&vnfd_id) else {
        return not_found(&vnfd_id);
    };
    json(StatusCode::OK, &info(&p))
}

fn info(p: &VnfPackage) -> serde_json::Value {
    let id = p.descriptor_id.as_str();
    json!({
        "id": id,
        "vnfdId": id,
        "vnfProvider": p.provider.clone().unwrap_or_default(),
        "vnfProductName": p.product_name.clone().unwrap_or_default(),
        "vnfSoftwareVersion": p.software_version.clone().unwrap_or_default(),
        "vnfdVersion": p.descriptor_version.clone().unwrap_or_default(),
        "packageSecurityOption": "OPTION_1",
        "softwareImages": [],
        "additionalArtifacts": [],
        "onboardingState": "ONBOARDED",
        "operationalState": "ENABLED",
        "usageState": "NOT_IN_USE",
        "vnfmInfo": p.vnfm_info,
        "_links": {
            "self": {"href": href(id, "")},
            "vnfd": {"href": href(id, "/vnfd")},
            "packageContent": {"href": href(id, "/package_content")},
        },
    })
}

/// What an `Accept` header allows: (`application/zip`, `text/plain`). No header, `*/*` and
/// `application/json` (what Tacker's `HttpClient` sends to every resource, zips included)
/// allow both.
fn accepts(headers: &HeaderMap) -> (bool, bool) {
    let values: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if values.is_empty() {
        return (true, true);
    }
    let (mut zip, mut text) = (false, false);
    for range in values.iter().flat_map(|v| v.split(',')) {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let refused = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        if refused {
            continue;
        }
        match media.as_str() {
            // `application/json`: Tacker's HttpClient sends it on every request, the zips
            // included (it reads the answer by its Content-Type): no preference.
            "*/*" | "application/json" => (zip, text) = (true, true),
            "application/*" | "application/zip" => zip = true,
            "text/*" | "text/plain" => text = true,
            _ => {}
        }
    }
    (zip, text)
}

fn not_acceptable(headers: &HeaderMap, offered: &str) -> Response {
    let asked = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    problem_of(
        406,
        format!("Accept {asked:?} cannot be met: this resource is {offered}"),
    )
}

fn body(content_type: &'static str, bytes: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        bytes,
    )
        .into_response()
}

/// The package's files (read on the blocking pool, [`ZIPPING`] at a time), or the bytes of
/// its zip file as they are when `whole_zip` and the package is one.
enum Content {
    Files(Files),
    ZipFile(Vec<u8>),
}

async fn content(
    app: &App,
    vnfd_id: &str,
    whole_zip: bool,
) -> Result<(Arc<VnfPackage>, Content), Response> {
    let Some((p, entry)) = app.packages.origin(vnfd_id) else {
        return Err(not_found(vnfd_id));
    };
    let Ok(_permit) = ZIPPERS.acquire().await else {
        return Err(problem_of(503, "the package endpoints are closed"));
    };
    let read = tokio::task::spawn_blocking(move || read_content(entry, whole_zip)).await;
    match read {
        Ok(Ok(c)) => Ok((p, c)),
        Ok(Err(why)) => Err(problem_of(
            500,
            format!("the package of vnfdId {vnfd_id:?} cannot be served: {why}"),
        )),
        Err(e) => Err(problem_of(500, format!("reading the package failed: {e}"))),
    }
}

fn read_content(entry: Option<PathBuf>, whole_zip: bool) -> Result<Content, String> {
    let Some(path) = entry else {
        let files = crate::builtin::demo_package_files()
            .iter()
            .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
            .collect();
        return Ok(Content::Files(files));
    };
    let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.is_dir() {
        return package_zip::folder_files(&path).map(Content::Files);
    }
    if meta.len() > package_zip::MAX_CONTENT_BYTES {
        return Err(format!(
            "{}: {} bytes; at most {} are served",
            path.display(),
            meta.len(),
            package_zip::MAX_CONTENT_BYTES
        ));
    }
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if whole_zip {
        return Ok(Content::ZipFile(bytes));
    }
    package_zip::zip_files(&bytes)
        .map(Content::Files)
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn zipped(files: &Files) -> Response {
    match package_zip::stable_zip(files) {
        Ok(bytes) => body("application/zip", bytes),
        Err(e) => problem_of(500, format!("cannot make the zip: {e}")),
    }
}

/// `GET …/{vnfdId}/vnfd`.
async fn vnfd(
    State(app): State<Arc<App>>,
    Path(vnfd_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (zip, text) = accepts(&headers);
    if !zip && !text {
        return not_acceptable(
            &headers,
            "application/zip (or text/plain for a one-file VNFD)",
        );
    }
    let files = match content(&app, &vnfd_id, false).await {
        Ok((_, Content::Files(f))) => package_zip::vnfd_files(&f),
        Ok((_, Content::ZipFile(_))) => Files::new(),
        Err(r) => return r,
    };
    if zip {
        return zipped(&files);
    }
    match package_zip::single_vnfd_file(&files) {
        Some((_, bytes)) => body("text/plain", bytes.to_vec()),
        None => not_acceptable(
            &headers,
            "a VNFD of several files (Definitions/ has more than one), which only \
             application/zip can carry",
        ),
    }
}

/// `GET …/{vnfdId}/package_content`.
async fn package_content(
    State(app): State<Arc<App>>,
    Path(vnfd_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !accepts(&headers).0 {
        return not_acceptable(&headers, "application/zip");
    }
    match content(&app, &vnfd_id, true).await {
        Ok((_, Content::Files(f))) => zipped(&f),
        Ok((_, Content::ZipFile(bytes))) => body("application/zip", bytes),
        Err(r) => r,
    }
}
