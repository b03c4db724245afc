//! HTTP helpers: SOL013 ProblemDetails responses and bounded body reading.

use std::pin::Pin;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{header, HeaderValue, StatusCode};
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

/// Reads `body`, at most `limit` bytes: 413 ProblemDetails beyond, 400 when it breaks off.
pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Bytes, Response> {
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
                return Err(problem_of(
                    400,
                    format!("cannot read the request body: {e}"),
                ))
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
                "the request body is not a valid {what}: {e} (line {}, column {})",
                e.line(),
                e.column()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn body_limit_and_problem_shape() {
        let ok = read_body(Body::from("abc"), 3).await.unwrap();
        assert_eq!(&ok[..], b"abc");
        let err = read_body(Body::from("abcd"), 3).await.unwrap_err();
        assert_eq!(err.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(err.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        let r = problem_of(409, "busy");
        assert_eq!(r.status(), StatusCode::CONFLICT);
        let e = parse::<vnfm_core::lcm::CreateVnfRequest>(b"{}", "CreateVnfRequest").unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }
}
