//! The NFVO's SOL003 Grant interface (clause 9) as the core's [`GrantDriver`]: `POST
//! {nfvo}/grants` with the `GrantRequest`, `GET` of the `Location` a `202` gave. It only talks:
//! when to ask again, and what an answer means for the operation, is the core's
//! ([`vnfm_core::lifecycle::NfvoGrants`]).
//!
//! Every request carries `Accept` and `Content-Type: application/json`, SOL013's `Version`
//! header ([`GRANT_API_VERSION`]) and the `[grant]` credentials. Answers:
//!
//! | answer | to |
//! |---|---|
//! | `201` (`POST`) or `200` (`GET`) with a `Grant` | [`GrantAnswer::Granted`] |
//! | `202` with `Location` (and `Retry-After` in seconds) | [`GrantAnswer::Pending`]; a poll's `202` without `Location` keeps the one polled |
//! | `403` | [`GrantAnswer::Rejected`] with the NFVO's `ProblemDetails` (or its body as `detail`) |
//! | not reached, timed out, `5xx`, `429` | [`DriverError::Unavailable`] (asked again) |
//! | `401` | [`DriverError::Unauthenticated`] |
//! | `404` | [`DriverError::NotFound`] |
//! | a body that is no `Grant`, any other status | [`DriverError::Invalid`] |
//!
//! A body is read up to [`MAX_BODY`] bytes; a longer one is an error, not truncated. The
//! requests go through [`Outgoing`] (the one client of every outgoing request: its
//! connection limit, no redirects, no proxy), as an operator destination: `[grant] nfvo` is
//! the operator's choice and is not subject to the destination policy of client-given URLs.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{self, HeaderMap};
use reqwest::{StatusCode, Url};
use vnfm_core::driver::{DriverError, GrantAnswer, GrantDriver};
use vnfm_core::grant::{Grant, GrantRequest};
use vnfm_core::problem::ProblemDetails;

use crate::config::{NfvoAuth, NfvoSettings};
use crate::outgoing::{Body, Destination, Failure, Limits, Outgoing, Policy};

/// The `Version` header sent: SOL003 v3.3.1's Grant interface.
pub const GRANT_API_VERSION: &str = "1.4.0";

/// The largest answer body read from the NFVO (1 MiB).
pub const MAX_BODY: usize = 1 << 20;

const DRIVER: &str = "nfvo";

/// The client of one NFVO's Grant interface.
#[derive(Debug, Clone)]
pub struct NfvoGrantClient {
    grants: Url,
    auth: NfvoAuth,
    http: Arc<Outgoing>,
    timeout: Duration,
}

impl NfvoGrantClient {
    /// A client for `settings` over an [`Outgoing`] of its own (the command line's).
    ///
    /// # Errors
    /// The HTTP client cannot be built (its TLS backend).
    pub fn new(settings: &NfvoSettings) -> Result<Self, String> {
        let http = Outgoing::new(Policy::default(), crate::outgoing::DEFAULT_MAX_CONNECTIONS)?;
        Self::over(settings, Arc::new(http))
    }

    /// A client for `settings` whose requests go through `http` (`vnfm serve`'s, shared with
    /// its other outgoing requests).
    ///
    /// # Errors
    /// `[grant] nfvo` has no `grants` below it.
    pub fn over(settings: &NfvoSettings, http: Arc<Outgoing>) -> Result<Self, String> {
        let mut root = settings.url.clone();
        if !root.path().ends_with('/') {
            let p = format!("{}/", root.path());
            root.set_path(&p);
        }
        let grants = root
            .join("grants")
            .map_err(|e| format!("[grant] nfvo = {}: {e}", settings.url))?;
        Ok(Self {
            grants,
            auth: settings.auth.clone(),
            http,
            timeout: settings.request_timeout,
        })
    }

    /// The URI grant requests go to.
    pub fn grants_uri(&self) -> &Url {
        &self.grants
    }

    fn with_headers(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let rb = rb
            .header(header::ACCEPT, "application/json")
            .header("Version", GRANT_API_VERSION);
        match &self.auth {
            NfvoAuth::None => rb,
            NfvoAuth::Bearer(t) => rb.bearer_auth(t.expose()),
            NfvoAuth::Basic { user, password } => rb.basic_auth(user, Some(password.expose())),
        }
    }

    /// Sends the request `rb` makes to `url` and reads the answer: status, headers, body
    /// (bounded).
    async fn exchange(
        &self,
        what: &str,
        url: &Url,
        rb: impl FnOnce(&reqwest::Client, Url) -> reqwest::RequestBuilder,
    ) -> Result<(StatusCode, HeaderMap, Vec<u8>), DriverError> {
        let limits = Limits {
            timeout: self.timeout,
            body: Body::Read(MAX_BODY),
        };
        let a = self
            .http
            .send(Destination::Operator, url.as_str(), limits, |c, u| {
                self.with_headers(rb(c, u))
            })
            .await
            .map_err(|e| match e {
                Failure::TooLarge { status, .. } => DriverError::Invalid {
                    driver: DRIVER,
                    message: format!(
                        "{what}: the NFVO answered {status} with a body of more than {MAX_BODY} \
                         bytes"
                    ),
                },
                e => unavailable(format!("{what}: {e}")),
            })?;
        Ok((a.status, a.headers, a.body))
    }

    /// What an answer means; `polled` is the location a poll read (kept when a `202` names
    /// none).
    fn answer(
        &self,
        what: &str,
        (status, headers, body): (StatusCode, HeaderMap, Vec<u8>),
        polled: Option<&Url>,
    ) -> Result<GrantAnswer, DriverError> {
        let granted = if polled.is_some() {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        match status {
            s if s == granted => serde_json::from_slice::<Grant>(&body)
                .map(|g| GrantAnswer::Granted(Box::new(g)))
                .map_err(|e| DriverError::Invalid {
                    driver: DRIVER,
                    message: format!(
                        "{what}: the NFVO answered {s} with a body that is no Grant: {e}"
                    ),
                }),
            StatusCode::ACCEPTED => {
                let location = match headers.get(header::LOCATION) {
                    Some(l) => {
                        let l = l.to_str().map_err(|_| DriverError::Invalid {
                            driver: DRIVER,
                            message: format!(
                                "{what}: the NFVO's 202 has a Location that is no text"
                            ),
                        })?;
                        // A relative Location is relative to the URI asked.
                        let base = polled.unwrap_or(&self.grants);
                        base.join(l).map_err(|e| DriverError::Invalid {
                            driver: DRIVER,
                            message: format!("{what}: the NFVO's 202 has Location {l:?}: {e}"),
                        })?
                    }
                    None => match polled {
                        Some(p) => p.clone(),
                        None => {
                            return Err(DriverError::Invalid {
                                driver: DRIVER,
                                message: format!(
                                    "{what}: the NFVO answered 202 without a Location header \
                                     (SOL003 clause 9.4.2.3.1: the grant's URI, to poll)"
                                ),
                            })
                        }
                    },
                };
                let retry_after = headers
                    .get(header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                Ok(GrantAnswer::Pending {
                    location: location.to_string(),
                    retry_after,
                })
            }
            StatusCode::FORBIDDEN => Ok(GrantAnswer::Rejected(problem(status, &body))),
            s => {
                let p = problem(s, &body);
                let message = format!("{what}: the NFVO answered {s}: {}", p.detail);
                Err(match s {
                    s if s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS => {
                        unavailable(message)
                    }
                    StatusCode::UNAUTHORIZED => DriverError::Unauthenticated {
                        driver: DRIVER,
                        message,
                    },
                    StatusCode::NOT_FOUND => DriverError::NotFound {
                        driver: DRIVER,
                        what: message,
                    },
                    _ => DriverError::Invalid {
                        driver: DRIVER,
                        message,
                    },
                })
            }
        }
    }
}

#[async_trait]
impl GrantDriver for NfvoGrantClient {
    async fn request_grant(&self, req: &GrantRequest) -> Result<GrantAnswer, DriverError> {
        let what = format!("POST {}", self.grants);
        let body = serde_json::to_vec(req).map_err(|e| DriverError::Invalid {
            driver: DRIVER,
            message: format!("{what}: cannot encode the grant request: {e}"),
        })?;
        let answer = self
            .exchange(&what, &self.grants, |c, u| {
                c.post(u)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(body)
            })
            .await?;
        self.answer(&what, answer, None)
    }

    async fn poll_grant(&self, location: &str) -> Result<GrantAnswer, DriverError> {
        let url = self
            .grants
            .join(location)
            .map_err(|e| DriverError::Invalid {
                driver: DRIVER,
                message: format!("the grant's location {location:?} is no URI: {e}"),
            })?;
        let what = format!("GET {url}");
        let answer = self.exchange(&what, &url, |c, u| c.get(u)).await?;
        self.answer(&what, answer, Some(&url))
    }
}

fn unavailable(message: String) -> DriverError {
    DriverError::Unavailable {
        driver: DRIVER,
        message,
    }
}

/// The NFVO's `ProblemDetails`, or one whose `detail` is its body (the first 500 characters).
fn problem(status: StatusCode, body: &[u8]) -> ProblemDetails {
    if let Ok(p) = serde_json::from_slice::<ProblemDetails>(body) {
        return p;
    }
    let text: String = String::from_utf8_lossy(body)
        .chars()
        .filter(|c| !c.is_control())
        .take(500)
        .collect();
    let detail = if text.trim().is_empty() {
        "no detail".to_owned()
    } else {
        text.trim().to_owned()
    };
    ProblemDetails::new(status.as_u16(), detail)
        .with_title(status.canonical_reason().unwrap_or("error"))
}
