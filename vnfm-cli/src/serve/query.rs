//! SOL013 query parameters of the list routes (attribute-based filters, attribute selectors,
//! paging): the wiring of [`vnfm_core::query`], which decides, to HTTP. A query it refuses is a
//! 400 ProblemDetails naming the parameter; a page with more to follow carries
//! `Link: <path?query&nextpage_opaque_marker=...>; rel="next"` (a relative reference, RFC 8288,
//! as `Location` is a path).
//!
//! `GET /vnf_instances` reads its store a chunk at a time ([`scan_off_workers`]: keyset
//! queries, at most `[server] list_scan_limit` instances per request); the other lists read theirs
//! whole. A list is answered off the async workers: the handler reads its resources (under the store's
//! gate, which it releases then) and [`page_off_workers`] builds, filters and pages them on the
//! blocking pool, the filter's work bounded by `[server] filter_work_limit` (a 400 beyond) and
//! stopped when the request gives up (`[server] request_timeout`: the middleware answers 503
//! and drops the handler, which sets the evaluation's cancel flag). A heavy filter therefore
//! neither holds an async worker nor the gate that commits wait for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use serde_json::Value;
use vnfm_core::query::{ApplyError, Budget, ListQuery, Page, Resource, Scan, NEXTPAGE_MARKER};

use super::http::{json, problem_of};

/// The checked query of a `GET` on a list of `resource`; a 400 ProblemDetails otherwise.
pub(crate) fn parse(uri: &Uri, resource: Resource) -> Result<ListQuery, Response> {
    ListQuery::parse(uri.query(), resource).map_err(|e| problem_of(400, e.to_string()))
}

/// The 200 answer of a list: the page, with its `Link` to the next page when more follow.
fn answer(uri: &Uri, page: Page) -> Response {
    let mut r = json(StatusCode::OK, &page.items);
    if let Some(marker) = page.next_marker {
        if let Ok(v) = HeaderValue::from_str(&next_link(uri, &marker)) {
            r.headers_mut().insert(header::LINK, v);
        }
    }
    r
}

/// Sets the flag when dropped: the request that waits for a blocking evaluation went away.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The answer of a list, computed on the blocking pool: `items()` builds the representations
/// (from a snapshot the handler read), then `query` filters them within a budget of `work`
/// units ([`Budget`]), pages and selects. A filter that needs more work is a 400 naming
/// `[server] filter_work_limit`; when the caller's future is dropped (the request timed out),
/// the evaluation stops at its next unit.
pub(crate) async fn page_off_workers<F>(
    uri: &Uri,
    query: ListQuery,
    page_size: usize,
    work: u64,
    items: F,
) -> Response
where
    F: FnOnce() -> Vec<Value> + Send + 'static,
{
    let flag = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop(flag.clone());
    let uri = uri.clone();
    // The page is encoded there too: its resources may be large.
    let task = tokio::task::spawn_blocking(move || {
        let mut budget = Budget::new(work).with_cancel(&flag);
        query
            .apply_within(items(), page_size, &mut budget)
            .map(|page| answer(&uri, page))
    });
    let r = task.await;
    drop(guard);
    match r {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => apply_problem(e),
        Err(e) => problem_of(500, format!("the list's task failed: {e}")),
    }
}

/// The most instances one `GET /vnf_instances` reads from the store: `[server]
/// list_scan_limit`, or `page_size + 1` when that is more (a full page and the one that says
/// more follow).
pub(crate) fn scan_limit(list_scan_limit: usize, page_size: usize) -> usize {
    list_scan_limit.max(page_size.saturating_add(1))
}

/// The answer of a list read from its store in chunks ordered by id (`scan` decides which:
/// `read(after, limit)` reads them, under the gate, and answers a ProblemDetails when it
/// cannot). Each chunk is turned into its representations (`to_json`) and filtered on the
/// blocking pool within the scan's budget (a 400 naming `[server] filter_work_limit` beyond),
/// and the evaluation stops when the caller's future is dropped, as [`page_off_workers`].
pub(crate) async fn scan_off_workers<T, R, Fut>(
    uri: &Uri,
    mut scan: Scan,
    mut read: R,
    to_json: fn(T) -> Value,
) -> Response
where
    T: Send + 'static,
    R: FnMut(Option<String>, usize) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, Response>>,
{
    let flag = Arc::new(AtomicBool::new(false));
    let _guard = CancelOnDrop(flag.clone());
    loop {
        let (after, limit) = scan.next_read();
        let chunk = match read(after.map(str::to_owned), limit).await {
            Ok(chunk) => chunk,
            Err(r) => return r,
        };
        let (flag, uri) = (flag.clone(), uri.clone());
        let task = tokio::task::spawn_blocking(move || {
            let values = chunk.into_iter().map(to_json).collect();
            let r = scan
                .feed(values, Some(&flag))
                .map(|page| page.map(|page| answer(&uri, page)));
            (scan, r)
        });
        match task.await {
            Ok((_, Ok(Some(answer)))) => return answer,
            Ok((next, Ok(None))) => scan = next,
            Ok((_, Err(e))) => return apply_problem(e),
            Err(e) => return problem_of(500, format!("the list's task failed: {e}")),
        }
    }
}

/// The ProblemDetails of a filter that stopped.
fn apply_problem(e: ApplyError) -> Response {
    match e {
        e @ ApplyError::Exhausted { .. } => problem_of(
            400,
            format!("query parameter filter: {e} ([server] filter_work_limit)"),
        ),
        ApplyError::Cancelled => problem_of(503, "the list request was cancelled"),
    }
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
