//! The one check of the credentials in front of the APIs that require them (the LCM API, its
//! subscriptions, the Grant API, the package endpoints and listing): [`require_api_token`], a
//! middleware whose state ([`Guard`]) names the API in the 401's text and says whether the
//! OAuth 2.0 access tokens of `POST /token` ([`super::oauth`]) are accepted beside `[server]
//! api_token`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use super::http::problem_of;
use super::oauth::Issuer;
use super::peer::PeerCertificate;
use super::state::App;

/// What [`require_api_token`] guards: the server, the start of the 401's text (`the LCM API
/// requires`), which goes on with what is accepted, and the token issuer whose tokens are
/// accepted too (`None`: `[server] api_token` alone).
#[derive(Clone)]
pub(crate) struct Guard {
    app: Arc<App>,
    requires: &'static str,
    oauth: Option<Arc<Issuer>>,
}

impl Guard {
    /// The guard of the API that `requires` names (`"the Grant API requires"`).
    pub(crate) fn new(app: Arc<App>, requires: &'static str) -> Self {
        Self {
            app,
            requires,
            oauth: None,
        }
    }

    /// The same, accepting the access tokens of `oauth` too (when there is a token endpoint).
    pub(crate) fn with_oauth(mut self, oauth: Option<Arc<Issuer>>) -> Self {
        self.oauth = oauth;
        self
    }
}

/// The OAuth 2.0 client whose access token let a request through (a request extension;
/// absent for `[server] api_token` or an open API).
#[derive(Clone, Debug)]
pub(crate) struct OAuthClient(pub(crate) String);

/// The bearer token of `headers`, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Lets a request through when it carries `[server] api_token` or (with a token endpoint) a
/// valid access token, or when neither is configured; answers the others 401 with
/// `WWW-Authenticate` and a ProblemDetails naming the API and what it accepts
/// ([`unauthorized`]), or, for an access token that is not valid, why (expired, forged, its
/// client gone; never the token itself).
pub(crate) async fn require_api_token(
    State(guard): State<Guard>,
    req: Request,
    next: Next,
) -> Response {
    let app = &guard.app;
    let Some(oauth) = &guard.oauth else {
        if app.api_auth.admits(req.headers()) {
            return next.run(req).await;
        }
        return unauthorized(app, guard.requires);
    };
    if app.api_auth.is_required() && app.api_auth.admits(req.headers()) {
        return next.run(req).await;
    }
    let Some(token) = bearer(req.headers()).filter(|t| Issuer::is_ours(t)) else {
        let accepted = if app.api_auth.is_required() {
            "Authorization: Bearer <[server] api_token> (or X-Auth-Token: <[server] api_token>) \
             or Bearer <an access token of POST /token>"
        } else {
            "Authorization: Bearer <an access token of POST /token>"
        };
        return challenge(
            problem_of(401, format!("{} {accepted}", guard.requires)),
            "Bearer realm=\"vnfm\"",
        );
    };
    let peer = req.extensions().get::<Arc<PeerCertificate>>().cloned();
    match oauth.check(token, app.clock().now(), peer.as_deref()) {
        Ok(client) => {
            let mut req = req;
            req.extensions_mut().insert(OAuthClient(client));
            next.run(req).await
        }
        Err(why) => challenge(
            problem_of(
                401,
                format!("{} a valid access token: {why}", guard.requires),
            ),
            "Bearer realm=\"vnfm\", error=\"invalid_token\"",
        ),
    }
}

fn challenge(mut r: Response, value: &'static str) -> Response {
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(value));
    r
}

/// The 401 of a request to the API that `requires` names without the accepted credentials:
/// `{requires} Authorization: Bearer <[server] api_token> (or X-Auth-Token: <[server]
/// api_token>)`, with the challenge.
pub(crate) fn unauthorized(app: &App, requires: &str) -> Response {
    challenge(
        problem_of(
            401,
            format!(
                "{requires} Authorization: Bearer <[server] api_token> \
                 (or X-Auth-Token: <[server] api_token>)"
            ),
        ),
        app.api_auth.challenge(),
    )
}
