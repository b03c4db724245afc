//! The OAuth 2.0 client-credentials grant (RFC 6749 section 4.4) of `vnfm serve`: `POST
//! /token`, what Tacker's `[v2_nfvo]` asks before every grant and package request
//! (`token_endpoint`, `client_id`, `client_password`, `use_client_secret_basic = True`).
//!
//! # The endpoint
//! The body is a form (`application/x-www-form-urlencoded`) with `grant_type=client_credentials`
//! (a `scope` is accepted and ignored); the client authenticates as one of
//! `[[server.oauth2.clients]]`, either with HTTP Basic (`client_secret_basic`, RFC 6749 section
//! 2.3.1: its `secret`), or, on a mutual-TLS connection (`[server.tls] client_ca`), with its
//! certificate (RFC 8705 section 2.1 `tls_client_auth`: the form's `client_id` names a client
//! whose `tls_client_auth_subject_dn` is the subject of the certificate the connection
//! presented; Tacker's `[v2_nfvo] use_client_secret_basic = False`). The answer (200,
//! `Cache-Control: no-store`) is `{"access_token", "token_type": "Bearer", "expires_in"}`.
//! Errors are RFC 6749 section 5.2's: `invalid_client` (401 with
//! `WWW-Authenticate: Basic`: no Basic, an unknown client or a wrong secret, the same answer
//! for both), `invalid_request` (a body that is not a form, a parameter given twice, no
//! `grant_type`), `unsupported_grant_type` (400).
//!
//! # The tokens
//! `vnfm1.<payload>.<tag>`: the payload is base64url JSON `{"cid": <client id>, "exp": <unix
//! seconds>}` (and `"x5t"`, the base64url SHA-256 of the client certificate, for a token issued
//! to a certificate: RFC 8705 section 3's certificate-bound token, accepted only on a
//! connection presenting that certificate), the tag base64url HMAC-SHA256 over
//! `vnfm1.<payload>` with the signing key (`[server.oauth2] signing_key`, else 32 random
//! bytes made at start). Nothing is kept per
//! token: a check verifies the tag in constant time, then the expiry on the server's clock
//! (the app's `Clock`), then that the client is still configured. Neither a secret nor a token
//! is ever written to a log or an error text.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use chrono::{DateTime, Utc};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use subtle::ConstantTimeEq;

use super::http::read_body;
use super::peer::PeerCertificate;
use super::state::App;
use crate::config::OAuth2Config;
use crate::dn::DistinguishedName;
use crate::error::CliError;

/// The path of the token endpoint.
pub(crate) const TOKEN_PATH: &str = "/token";

/// What every token starts with (and what tells one from a static `api_token`).
const TOKEN_PREFIX: &str = "vnfm1.";

/// The most bytes of a token request's body (a form of two short parameters).
const TOKEN_BODY_LIMIT: usize = 4096;

/// The most bytes of a token that is checked (longer: refused before any work).
const MAX_TOKEN_BYTES: usize = 2048;

/// The token endpoint's clients and key (see the module docs).
pub(crate) struct Issuer {
    /// Client id → how it authenticates.
    clients: BTreeMap<String, ClientAuth>,
    key: hmac::Key,
    lifetime: u64,
    /// Compared against when the client is unknown, so that an unknown client takes the time
    /// a known one does.
    decoy: Vec<u8>,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("clients", &self.clients.keys().collect::<Vec<_>>())
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// How one client authenticates at the token endpoint.
struct ClientAuth {
    /// Its secret (HTTP Basic), if any.
    secret: Option<Vec<u8>>,
    /// The subject of its certificate (mutual TLS), if any.
    subject: Option<DistinguishedName>,
}

/// Why a bearer token is not accepted (the text names the cause, never the token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Invalid {
    /// Not of the form of this server's tokens, or too long.
    Malformed,
    /// The signature does not hold: forged, altered, or signed with another key.
    Forged,
    /// Past its expiry.
    Expired,
    /// Its client is no longer among `[[server.oauth2.clients]]`.
    UnknownClient,
    /// Bound to a client certificate that the connection did not present.
    OtherCertificate,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Invalid::Malformed => "the access token is not one this server issued (malformed)",
            Invalid::Forged => {
                "the access token's signature does not hold (not issued by this server, or \
                 altered, or signed with another [server.oauth2] signing_key)"
            }
            Invalid::Expired => {
                "the access token has expired ([server.oauth2] token_lifetime); ask POST /token \
                 for a new one"
            }
            Invalid::UnknownClient => {
                "the access token's client is no longer one of [[server.oauth2.clients]]"
            }
            Invalid::OtherCertificate => {
                "the access token is bound to a client certificate (RFC 8705) that this \
                 connection did not present; send it on a connection with that certificate"
            }
        })
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Payload {
    cid: String,
    exp: i64,
    /// base64url SHA-256 of the client certificate the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    x5t: Option<String>,
}

impl Issuer {
    /// The issuer of `c`, or `None` when it has no client (no token endpoint).
    ///
    /// # Errors
    /// [`CliError::Usage`] when no random key can be made.
    pub(crate) fn from_config(c: &OAuth2Config) -> Result<Option<Arc<Self>>, CliError> {
        if c.clients.is_empty() {
            return Ok(None);
        }
        let rng = SystemRandom::new();
        let key_bytes = match &c.signing_key {
            Some(k) => k.expose().as_bytes().to_vec(),
            None => {
                let mut k = vec![0u8; 32];
                rng.fill(&mut k).map_err(|_| {
                    CliError::Usage(
                        "cannot make a random signing key for [server.oauth2] (the system's \
                         random source failed); set [server.oauth2] signing_key"
                            .into(),
                    )
                })?;
                k
            }
        };
        let mut decoy = vec![0u8; 32];
        let _ = rng.fill(&mut decoy);
        Ok(Some(Arc::new(Self {
            clients: c
                .clients
                .iter()
                .map(|cl| {
                    let auth = ClientAuth {
                        secret: cl.secret.as_ref().map(|s| s.expose().as_bytes().to_vec()),
                        // Checked when the configuration was read.
                        subject: cl
                            .tls_client_auth_subject_dn
                            .as_deref()
                            .and_then(|dn| DistinguishedName::parse(dn).ok()),
                    };
                    (cl.id.clone(), auth)
                })
                .collect(),
            key: hmac::Key::new(hmac::HMAC_SHA256, &key_bytes),
            lifetime: c.token_lifetime,
            decoy,
        })))
    }

    /// Whether `token` has the form of this server's tokens (else it may be a static
    /// `api_token`).
    pub(crate) fn is_ours(token: &str) -> bool {
        token.starts_with(TOKEN_PREFIX)
    }

    /// A token for `client`, valid until `now` + the lifetime, bound to the certificate of
    /// thumbprint `bound` if any; with the lifetime.
    fn issue(&self, client: &str, bound: Option<&[u8]>, now: DateTime<Utc>) -> (String, u64) {
        let exp = now
            .timestamp()
            .saturating_add(i64::try_from(self.lifetime).unwrap_or(i64::MAX));
        let payload = serde_json::to_vec(&Payload {
            cid: client.to_owned(),
            exp,
            x5t: bound.map(|t| URL_SAFE_NO_PAD.encode(t)),
        })
        .unwrap_or_default();
        let mut signed = String::from(TOKEN_PREFIX);
        signed.push_str(&URL_SAFE_NO_PAD.encode(payload));
        let tag = hmac::sign(&self.key, signed.as_bytes());
        signed.push('.');
        signed.push_str(&URL_SAFE_NO_PAD.encode(tag.as_ref()));
        (signed, self.lifetime)
    }

    /// The client of `token` when it is valid at `now` on a connection that presented `peer`.
    ///
    /// # Errors
    /// Why it is not.
    pub(crate) fn check(
        &self,
        token: &str,
        now: DateTime<Utc>,
        peer: Option<&PeerCertificate>,
    ) -> Result<String, Invalid> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Invalid::Malformed);
        }
        let (signed, tag) = token.rsplit_once('.').ok_or(Invalid::Malformed)?;
        let payload = signed
            .strip_prefix(TOKEN_PREFIX)
            .ok_or(Invalid::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| Invalid::Malformed)?;
        // Constant time (ring's verify).
        hmac::verify(&self.key, signed.as_bytes(), &tag).map_err(|_| Invalid::Forged)?;
        let payload: Payload = URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(Invalid::Malformed)?;
        if now.timestamp() >= payload.exp {
            return Err(Invalid::Expired);
        }
        if !self.clients.contains_key(&payload.cid) {
            return Err(Invalid::UnknownClient);
        }
        if let Some(x5t) = &payload.x5t {
            let bound = URL_SAFE_NO_PAD
                .decode(x5t)
                .map_err(|_| Invalid::Malformed)?;
            if !peer.is_some_and(|p| p.has_thumbprint(&bound)) {
                return Err(Invalid::OtherCertificate);
            }
        }
        Ok(payload.cid)
    }

    /// The client `client_id` when the connection's certificate `peer` authenticates it
    /// (`tls_client_auth`: the client has a subject and it is the certificate's).
    fn authenticate_certificate(
        &self,
        client_id: &str,
        peer: &PeerCertificate,
    ) -> Result<String, CertificateRefusal> {
        let Some(subject) = self.clients.get(client_id).and_then(|c| c.subject.as_ref()) else {
            return Err(CertificateRefusal::NoSuchClient);
        };
        if *subject != peer.subject {
            return Err(CertificateRefusal::OtherSubject);
        }
        Ok(client_id.to_owned())
    }

    /// The client that `headers` authenticate with HTTP Basic, compared in constant time.
    /// The id and the secret are taken as sent and, per RFC 6749 section 2.3.1, form-decoded:
    /// either matches.
    fn authenticate(&self, headers: &HeaderMap) -> Option<String> {
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
        let (scheme, given) = value.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = STANDARD.decode(given.trim()).ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (id, secret) = text.split_once(':')?;
        let forms = [
            (id.to_owned(), secret.to_owned()),
            (form_decode(id), form_decode(secret)),
        ];
        let mut found = None;
        for (id, secret) in forms {
            let (want, known) = match self.clients.get(&id).and_then(|c| c.secret.as_ref()) {
                Some(s) => (s.as_slice(), true),
                None => (self.decoy.as_slice(), false),
            };
            let same = bool::from(want.ct_eq(secret.as_bytes()));
            if same && known && found.is_none() {
                found = Some(id);
            }
        }
        found
    }
}

/// Why a certificate does not authenticate a client (logged, not answered: the answer is the
/// same `invalid_client` for every cause).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CertificateRefusal {
    /// No client of that id authenticates with a certificate.
    NoSuchClient,
    /// The client's configured subject is not the certificate's.
    OtherSubject,
}

/// `s` with `+` as a space and `%XX` decoded (form encoding); `s` itself when that is not
/// UTF-8.
fn form_decode(s: &str) -> String {
    form_urlencoded::parse(format!("x={}", s.replace('&', "%26")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_owned())
}

/// Whether `r` is an answer of [`token`] (a token or an RFC 6749 error, `application/json`),
/// which the server's ProblemDetails wrapping leaves as it is.
pub(crate) fn is_oauth_answer(r: &Response) -> bool {
    r.headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "application/json")
}

/// A JSON answer that no cache keeps (RFC 6749 5.1: `Cache-Control: no-store`, `Pragma:
/// no-cache`).
fn no_store_json(status: StatusCode, body: &serde_json::Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    r
}

/// An RFC 6749 section 5.2 error answer.
fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    let body = serde_json::json!({"error": error, "error_description": description});
    let mut r = no_store_json(status, &body);
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"vnfm\""),
        );
    }
    r
}

/// `POST /token` (see the module docs). `peer` is the connection's verified client
/// certificate (mutual TLS), if any.
pub(crate) async fn token(
    app: Arc<App>,
    issuer: Arc<Issuer>,
    headers: HeaderMap,
    peer: Option<Arc<PeerCertificate>>,
    body: Body,
) -> Response {
    // HTTP Basic when the request has an Authorization header (checked before the body is
    // read); else the client certificate, once the form names the client.
    let basic = headers.contains_key(header::AUTHORIZATION);
    let by_secret = if basic {
        match issuer.authenticate(&headers) {
            Some(client) => Some(client),
            None => return invalid_client(),
        }
    } else if peer.is_none() {
        // Neither a secret nor a certificate: refused before the body is read.
        return invalid_client();
    } else {
        None
    };
    let bytes = match read_body(body, TOKEN_BODY_LIMIT, app.request_timeout()).await {
        Ok(b) => b,
        Err(_) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &format!(
                    "the request body could not be read, or is over {TOKEN_BODY_LIMIT} bytes; \
                     expected a form with grant_type=client_credentials"
                ),
            )
        }
    };
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    // No Content-Type is read as a form (a client that sends a form body without saying so).
    if form_type
        .as_deref()
        .is_some_and(|t| t != "application/x-www-form-urlencoded")
    {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the request body must be application/x-www-form-urlencoded (RFC 6749 section 4.4.2)",
        );
    }
    let mut grant_type = None;
    let mut client_id = None;
    let mut seen = std::collections::BTreeSet::new();
    for (name, value) in form_urlencoded::parse(&bytes) {
        if !seen.insert(name.clone().into_owned()) {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &format!(
                    "the parameter {:?} is given more than once (RFC 6749 section 3.2)",
                    name.chars().take(64).collect::<String>()
                ),
            );
        }
        match name.as_ref() {
            "grant_type" => grant_type = Some(value.into_owned()),
            "client_id" => client_id = Some(value.into_owned()),
            _ => {}
        }
    }
    let by_certificate = by_secret.is_none();
    let client = match by_secret {
        Some(client) => {
            // RFC 6749 section 2.3.1: a client_id in the form must be the authenticated one.
            if client_id.as_deref().is_some_and(|id| id != client) {
                return invalid_client();
            }
            client
        }
        None => {
            let (Some(id), Some(peer)) = (client_id.as_deref(), peer.as_deref()) else {
                return invalid_client();
            };
            match issuer.authenticate_certificate(id, peer) {
                Ok(client) => client,
                Err(why) => {
                    app.note(&format!(
                        "token request refused: the client certificate (subject {}) does not \
                         authenticate client_id {:?}: {}",
                        peer.subject,
                        id.chars().take(64).collect::<String>(),
                        match why {
                            CertificateRefusal::NoSuchClient => {
                                "no [[server.oauth2.clients]] of that id has \
                                 tls_client_auth_subject_dn"
                            }
                            CertificateRefusal::OtherSubject => {
                                "its tls_client_auth_subject_dn is another subject"
                            }
                        }
                    ));
                    return invalid_client();
                }
            }
        }
    };
    match grant_type.as_deref() {
        Some("client_credentials") => {}
        Some(other) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                &format!(
                    "grant_type {:?} is not supported; expected client_credentials",
                    other.chars().take(64).collect::<String>()
                ),
            )
        }
        None => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "grant_type is missing; expected grant_type=client_credentials",
            )
        }
    }
    // A token issued to a certificate is bound to it (RFC 8705 section 3).
    let bound = peer
        .as_deref()
        .filter(|_| by_certificate)
        .map(|p| p.thumbprint.as_slice());
    let (access_token, expires_in) = issuer.issue(&client, bound, app.clock().now());
    let body = serde_json::json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": expires_in,
    });
    no_store_json(StatusCode::OK, &body)
}

/// The answer to a client that did not authenticate (RFC 6749 section 5.2), the same for
/// every cause.
fn invalid_client() -> Response {
    oauth_error(
        StatusCode::UNAUTHORIZED,
        "invalid_client",
        "client authentication failed: expected HTTP Basic (client_secret_basic) with the \
         client_id and secret of one of [[server.oauth2.clients]], or, on a mutual-TLS \
         connection, the form's client_id of a client whose tls_client_auth_subject_dn is the \
         subject of the certificate presented (tls_client_auth)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{OAuth2Client, Secret};

    fn issuer(key: Option<&str>) -> Arc<Issuer> {
        Issuer::from_config(&OAuth2Config {
            clients: vec![OAuth2Client {
                id: "tacker".into(),
                secret: Some(Secret::new("s+cret")),
                tls_client_auth_subject_dn: None,
                asynchronous: false,
            }],
            token_lifetime: 60,
            signing_key: key.map(Secret::new),
        })
        .unwrap()
        .unwrap()
    }

    fn basic(user_pass: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        let v = format!("Basic {}", STANDARD.encode(user_pass));
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(&v).unwrap());
        h
    }

    #[test]
    fn tokens_are_checked_by_signature_expiry_and_client() {
        let i = issuer(None);
        let t0 = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let (tok, ttl) = i.issue("tacker", None, t0);
        assert_eq!(ttl, 60);
        assert!(Issuer::is_ours(&tok));
        assert_eq!(i.check(&tok, t0, None).unwrap(), "tacker");
        let later = t0 + chrono::Duration::seconds(60);
        assert_eq!(i.check(&tok, later, None), Err(Invalid::Expired));
        // Another server's key (a replica without the shared key): forged.
        assert_eq!(issuer(None).check(&tok, t0, None), Err(Invalid::Forged));
        // Altered payload: forged.
        let (other, _) = i.issue("someone", None, t0);
        let forged = format!(
            "{}.{}",
            other.rsplit_once('.').unwrap().0,
            tok.rsplit_once('.').unwrap().1
        );
        assert_eq!(i.check(&forged, t0, None), Err(Invalid::Forged));
        // Signed, but its client is not configured.
        assert_eq!(i.check(&other, t0, None), Err(Invalid::UnknownClient));
        assert_eq!(i.check("vnfm1.x", t0, None), Err(Invalid::Malformed));
        assert_eq!(i.check("vnfm1.!!.!!", t0, None), Err(Invalid::Malformed));
        // A shared key: replicas accept each other's tokens.
        let key = "k".repeat(32);
        let (shared, _) = issuer(Some(&key)).issue("tacker", None, t0);
        assert_eq!(
            issuer(Some(&key)).check(&shared, t0, None).unwrap(),
            "tacker"
        );
        assert!(!format!("{i:?}").contains("s+cret"));
    }

    #[test]
    fn basic_authentication_takes_the_id_and_secret_as_sent_or_form_decoded() {
        let i = issuer(None);
        assert_eq!(i.authenticate(&basic("tacker:s+cret")).unwrap(), "tacker");
        assert_eq!(i.authenticate(&basic("tacker:s%2Bcret")).unwrap(), "tacker");
        assert!(i.authenticate(&basic("tacker:s cret")).is_none());
        assert!(i.authenticate(&basic("tacker:wrong")).is_none());
        assert!(i.authenticate(&basic("nobody:s+cret")).is_none());
        assert!(i.authenticate(&basic("tacker")).is_none());
        assert!(i.authenticate(&HeaderMap::new()).is_none());
    }
}
