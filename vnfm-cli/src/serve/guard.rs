//! The one check of `[server] api_token` in front of the APIs that require it (the LCM API,
//! its subscriptions, the Grant API, the package listing): [`require_api_token`], a
//! middleware whose state ([`Guard`]) names the API in the 401's text.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use super::http::problem_of;
use super::state::App;

/// What [`require_api_token`] guards: the server, and the start of the 401's text (`the LCM
/// API requires`), which goes on with `Authorization: Bearer <[server] api_token>`.
#[derive(Clone)]
pub(crate) struct Guard {
    app: Arc<App>,
    requires: &'static str,
}

impl Guard {
    /// The guard of the API that `requires` names (`"the Grant API requires"`).
    pub(crate) fn new(app: Arc<App>, requires: &'static str) -> Self {
        Self { app, requires }
    }
}

/// Lets a request with the accepted `Authorization` through (any request when `[server]
/// api_token` is unset); answers the others 401 with `WWW-Authenticate` and a ProblemDetails
/// naming the API ([`unauthorized`]).
pub(crate) async fn require_api_token(
    State(guard): State<Guard>,
    req: Request,
    next: Next,
) -> Response {
    if guard.app.api_auth.admits(req.headers()) {
        return next.run(req).await;
    }
    unauthorized(&guard.app, guard.requires)
}

/// The 401 of a request to the API that `requires` names without the accepted credentials:
/// `{requires} Authorization: Bearer <[server] api_token>`, with the challenge.
pub(crate) fn unauthorized(app: &App, requires: &str) -> Response {
    let mut r = problem_of(
        401,
        format!("{requires} Authorization: Bearer <[server] api_token>"),
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(app.api_auth.challenge()),
    );
    r
}
