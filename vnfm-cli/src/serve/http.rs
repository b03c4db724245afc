//! HTTP helpers: SOL013 ProblemDetails responses, bounded body reading, the media type and
//! encoding a JSON body must have, and the middleware that turns every other error answer
//! (axum's rejections and fallbacks) into a ProblemDetails.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use vnfm_core::problem::ProblemDetails;

/// The media type of a ProblemDetails body.
pub(crate) const PROBLEM_JSON: &str = "application/problem+json";

/// The standard reason phrase of `status`, as the ProblemDetails `title`.
fn reason(status: u16) -> &'static str {
    StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error")
}

/// A ProblemDetails response; its HTTP status is `p.status`.
pub(crate) fn problem(mut p: ProblemDetails) -> Response {
    let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if p.title.is_none() {
        p.title = Some(reason(p.status).to_owned());
    }
    let body = serde_json::to_vec(&p).unwrap_or_default();
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON))],
        body,
    )
        .into_response()
}

/// A ProblemDetails response of `status` with `detail`.
pub(crate) fn problem_of(status: u16, detail: impl Into<String>) -> Response {
    problem(ProblemDetails::new(status, detail).with_title(reason(status)))
}

/// A JSON response.
pub(crate) fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(e) => problem_of(500, format!("cannot encode the response: {e}")),
    }
}

/// Reads `body`, at most `limit` bytes: 413 ProblemDetails beyond, 400 when it breaks off, 408
/// when it has not arrived `within` (`[server] request_timeout`: nothing was done).
pub(crate) async fn read_body(
    body: Body,
    limit: usize,
    within: Duration,
) -> Result<Bytes, Response> {
    match tokio::time::timeout(within, read_at_most(body, limit)).await {
        Ok(r) => r,
        Err(_) => Err(problem_of(
            408,
            format!(
                "the request body did not arrive within {} s ([server] request_timeout); \
                 nothing was done",
                within.as_secs()
            ),
        )),
    }
}

async fn read_at_most(body: Body, limit: usize) -> Result<Bytes, Response> {
    let too_large = || {
        problem_of(
            413,
            format!("the request body is larger than {limit} bytes ([server] body_limit)"),
        )
    };
    if body.size_hint().lower() > limit as u64 {
        return Err(too_large());
    }
    let mut body = body;
    let mut buf: Vec<u8> = Vec::new();
    loop {
        match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            None => break,
            Some(Err(e)) => {
                if let Some(r) = unsupported(&e) {
                    return Err(r);
                }
                return Err(problem_of(
                    400,
                    format!("cannot read the request body: {e}"),
                ));
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    if buf.len().saturating_add(data.len()) > limit {
                        return Err(too_large());
                    }
                    buf.extend_from_slice(&data);
                }
            }
        }
    }
    Ok(Bytes::from(buf))
}

/// Parses a JSON request body as `T` (named `what` in the 400 ProblemDetails).
pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    body: &[u8],
    what: &str,
) -> Result<T, Response> {
    serde_json::from_slice(body).map_err(|e| {
        problem_of(
            400,
            format!(
                "the request body is not a valid {what}: {} (line {}, column {})",
                vnfm_core::input::json_message(&e),
                e.line(),
                e.column()
            ),
        )
    })
}

/// A request body refused for its media type or its encoding: what the body stands for once
/// [`check_media`] found it unsupported, so that the 415 comes when a handler reads the body
/// (after the checks that come first, such as credentials), and not for a route that reads
/// none.
#[derive(Debug)]
struct Unsupported {
    detail: String,
    /// `Accept-Encoding: identity` goes with the answer.
    encoding: bool,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for Unsupported {}

/// The body of a refused request: its first frame is the error.
struct Refused(Option<Unsupported>);

impl HttpBody for Refused {
    type Data = Bytes;
    type Error = Unsupported;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Unsupported>>> {
        Poll::Ready(self.0.take().map(Err))
    }
}

/// The 415 ProblemDetails of a body that [`check_media`] refused.
fn unsupported(e: &axum::Error) -> Option<Response> {
    let e = std::error::Error::source(e)?.downcast_ref::<Unsupported>()?;
    let mut r = problem_of(415, e.detail.clone());
    if e.encoding {
        r.headers_mut().insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
    }
    Some(r)
}

/// Whether `media` (a `Content-Type` value) is JSON: `application/json` or a type with the
/// `+json` suffix (`application/merge-patch+json`, ...), in any case, with any parameters.
fn is_json(media: &str) -> bool {
    let essence = media
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.split_once('/') {
        Some((kind, sub)) => {
            !kind.is_empty() && (essence == "application/json" || sub.ends_with("+json"))
        }
        None => false,
    }
}

/// Why a request's body cannot be read as JSON, from its headers: a `Content-Encoding` other
/// than `identity` (any method), or a `Content-Type` that is not JSON on a POST, PUT or
/// PATCH. A request without `Content-Type` is read as JSON.
fn refusal(method: &Method, headers: &HeaderMap) -> Option<Unsupported> {
    for v in headers.get_all(header::CONTENT_ENCODING) {
        let text = v.to_str().unwrap_or("(not text)");
        let codings: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("identity"))
            .collect();
        if !codings.is_empty() {
            return Some(Unsupported {
                detail: format!(
                    "Content-Encoding {text:?} is not supported; expected none (or identity): \
                     send the JSON body uncompressed"
                ),
                encoding: true,
            });
        }
    }
    if !matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
        return None;
    }
    let ct = headers.get(header::CONTENT_TYPE)?;
    let text = ct.to_str().unwrap_or("(not text)");
    (!is_json(text)).then(|| Unsupported {
        detail: format!(
            "Content-Type {text:?} is not supported; expected application/json (or a +json \
             type such as application/merge-patch+json)"
        ),
        encoding: false,
    })
}

/// On the way in (`serve::front`): a request whose body cannot be JSON (see [`refusal`])
/// gets a body that fails with the reason, which [`read_body`] answers 415.
pub(crate) fn check_media(req: &mut Request) {
    if let Some(why) = refusal(req.method(), req.headers()) {
        *req.body_mut() = Body::new(Refused(Some(why)));
    }
}

/// The most bytes of an error answer that is not a ProblemDetails that [`problems`] reads for
/// its detail (axum's rejections are one short line).
const PLAIN_ERROR_LIMIT: usize = 4096;

/// On the way out (`serve::front`) of a request `method` `path`: every error answer (4xx,
/// 5xx) that is not a ProblemDetails already, i.e. axum's own (405 of a known path with
/// another method, a path parameter that is not valid percent-encoded UTF-8, ...), becomes
/// one, with the same status and headers (`Allow` of a 405 included); its text, if any, is
/// the detail.
pub(crate) async fn problems(method: &Method, path: &str, r: Response) -> Response {
    let status = r.status();
    let is_problem = r
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case(PROBLEM_JSON));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return r;
    }
    let (parts, body) = r.into_parts();
    let text = axum::body::to_bytes(body, PLAIN_ERROR_LIMIT)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let detail = if status == StatusCode::METHOD_NOT_ALLOWED {
        let allowed = parts
            .headers
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        format!("{method} is not allowed on {path}; allowed: {allowed}")
    } else if text.is_empty() {
        format!("{method} {path}: {}", reason(status.as_u16()))
    } else {
        format!("{method} {path}: {text}")
    };
    let mut out = problem_of(status.as_u16(), detail);
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().append(name, value.clone());
        }
    }
    out
}

/// `r` with a `Location` header (left out when `href` is not a valid header value).
pub(crate) fn with_location(mut r: Response, href: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(href) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn body_limit_and_problem_shape() {
        let second = Duration::from_secs(1);
        let ok = read_body(Body::from("abc"), 3, second).await.unwrap();
        assert_eq!(&ok[..], b"abc");
        let err = read_body(Body::from("abcd"), 3, second).await.unwrap_err();
        assert_eq!(err.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(err.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        let r = problem_of(409, "busy");
        assert_eq!(r.status(), StatusCode::CONFLICT);
        let e = parse::<vnfm_core::lcm::CreateVnfRequest>(b"{}", "CreateVnfRequest").unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }
}
