//! SOL013 query parameters of the list routes (attribute-based filters, attribute selectors,
//! paging): the wiring of [`vnfm_core::query`], which decides, to HTTP. A query it refuses is a
//! 400 ProblemDetails naming the parameter; a page with more to follow carries
//! `Link: <path?query&nextpage_opaque_marker=...>; rel="next"` (a relative reference, RFC 8288,
//! as `Location` is a path).

use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use serde_json::Value;
use vnfm_core::query::{ListQuery, Resource, NEXTPAGE_MARKER};

use super::http::{json, problem_of};

/// The checked query of a `GET` on a list of `resource`; a 400 ProblemDetails otherwise.
pub(crate) fn parse(uri: &Uri, resource: Resource) -> Result<ListQuery, Response> {
    ListQuery::parse(uri.query(), resource).map_err(|e| problem_of(400, e.to_string()))
}

/// The 200 answer of a list: the page of `items` (whole representations) that `query` selects,
/// with its `Link` to the next page when more follow.
pub(crate) fn page(uri: &Uri, query: &ListQuery, items: Vec<Value>, page_size: usize) -> Response {
    let page = query.apply(items, page_size);
    let mut r = json(StatusCode::OK, &page.items);
    if let Some(marker) = page.next_marker {
        if let Ok(v) = HeaderValue::from_str(&next_link(uri, &marker)) {
            r.headers_mut().insert(header::LINK, v);
        }
    }
    r
}

/// The `Link` header to the page after `marker`: the request's own path and query, its marker
/// replaced.
fn next_link(uri: &Uri, marker: &str) -> String {
    let marker = format!("{NEXTPAGE_MARKER}={}", encode(marker));
    let mut parts: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty() && p.split('=').next() != Some(NEXTPAGE_MARKER))
        .collect();
    parts.push(&marker);
    format!("<{}?{}>; rel=\"next\"", uri.path(), parts.join("&"))
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_link_keeps_the_query_and_replaces_the_marker() {
        let uri: Uri = "/vnflcm/v2/vnf_instances?filter=(eq,id,1)&nextpage_opaque_marker=a"
            .parse()
            .unwrap();
        assert_eq!(
            next_link(&uri, "b c/d"),
            "</vnflcm/v2/vnf_instances?filter=(eq,id,1)&nextpage_opaque_marker=b%20c%2Fd>; \
             rel=\"next\""
        );
    }
}
