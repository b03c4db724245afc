//! Credentials of the alert endpoints and the LCM API, compared in constant time.
//!
//! `[server] api_token` is accepted as `Authorization: Bearer <token>` and, for OpenStack
//! clients (python-tackerclient through keystoneauth's `admin_token` plugin, `openstack
//! --os-auth-type admin_token --os-endpoint URL --os-token TOKEN`), as `X-Auth-Token: <token>`,
//! the header they send every token in. The alert endpoints take `Authorization` only.

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

use crate::config::{PrometheusConfig, Secret};

/// What an `Authorization` header must carry.
#[derive(Clone, Default)]
pub(crate) struct Credentials {
    /// `Bearer <token>`
    bearer: Option<Vec<u8>>,
    /// `Basic <base64(user:password)>`
    basic: Option<Vec<u8>>,
    /// Whether `X-Auth-Token: <token>` is accepted as well as `Bearer <token>` (the API token).
    x_auth_token: bool,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("bearer", &self.bearer.as_ref().map(|_| Secret::REDACTED))
            .field("basic", &self.basic.as_ref().map(|_| Secret::REDACTED))
            .finish()
    }
}

impl Credentials {
    /// The credentials of `[prometheus_plugin]`.
    pub(crate) fn alerts(c: &PrometheusConfig) -> Self {
        let basic = match (&c.basic_auth_user, &c.basic_auth_password) {
            (Some(u), Some(p)) => Some(base64(format!("{u}:{}", p.expose()).as_bytes())),
            _ => None,
        };
        Self {
            bearer: c
                .bearer_token
                .as_ref()
                .map(|t| t.expose().as_bytes().to_vec()),
            basic: basic.map(String::into_bytes),
            x_auth_token: false,
        }
    }

    /// `[server] api_token`: `Authorization: Bearer <token>` or `X-Auth-Token: <token>`.
    pub(crate) fn api_token(token: Option<&Secret>) -> Self {
        Self {
            bearer: token.map(|t| t.expose().as_bytes().to_vec()),
            basic: None,
            x_auth_token: true,
        }
    }

    /// Whether any credential is required.
    pub(crate) fn is_required(&self) -> bool {
        self.bearer.is_some() || self.basic.is_some()
    }

    /// Whether `headers` carry an accepted `Authorization` (or, for the API token, an accepted
    /// `X-Auth-Token`); always, when none is required.
    pub(crate) fn admits(&self, headers: &HeaderMap) -> bool {
        if !self.is_required() {
            return true;
        }
        self.admits_authorization(headers) || self.admits_x_auth_token(headers)
    }

    /// Whether `X-Auth-Token` carries the bearer token (when it is accepted).
    fn admits_x_auth_token(&self, headers: &HeaderMap) -> bool {
        let Some(want) = self.bearer.as_ref().filter(|_| self.x_auth_token) else {
            return false;
        };
        headers
            .get("x-auth-token")
            .is_some_and(|v| bool::from(want.as_slice().ct_eq(v.as_bytes())))
    }

    /// Whether `Authorization` carries an accepted credential.
    fn admits_authorization(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        let Some((scheme, given)) = value.trim().split_once(' ') else {
            return false;
        };
        let given = given.trim().as_bytes();
        let want = if scheme.eq_ignore_ascii_case("bearer") {
            &self.bearer
        } else if scheme.eq_ignore_ascii_case("basic") {
            &self.basic
        } else {
            return false;
        };
        want.as_ref()
            .is_some_and(|w| bool::from(w.as_slice().ct_eq(given)))
    }

    /// The `WWW-Authenticate` challenge to send with a 401.
    pub(crate) fn challenge(&self) -> &'static str {
        if self.basic.is_some() && self.bearer.is_none() {
            "Basic realm=\"vnfm\""
        } else {
            "Bearer realm=\"vnfm\""
        }
    }
}

/// Standard base64 with padding (RFC 4648), as HTTP basic auth sends it.
pub(crate) fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                let idx = ((n >> (18 - 6 * i)) & 0x3f) as usize;
                out.push(char::from(ALPHABET[idx]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn base64_matches_rfc4648_and_the_alertmanager_capture() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
            ("vnfm:vnfm-secret", "dm5mbTp2bmZtLXNlY3JldA=="),
        ] {
            assert_eq!(base64(i.as_bytes()), o, "{i}");
        }
    }

    #[test]
    fn admits_only_the_configured_credentials() {
        let c = Credentials::alerts(&PrometheusConfig {
            bearer_token: Some(Secret::new("tok")),
            basic_auth_user: Some("vnfm".into()),
            basic_auth_password: Some(Secret::new("vnfm-secret")),
            ..PrometheusConfig::default()
        });
        assert!(c.admits(&headers("Bearer tok")));
        assert!(c.admits(&headers("bearer tok")));
        assert!(c.admits(&headers("Basic dm5mbTp2bmZtLXNlY3JldA==")));
        assert!(!c.admits(&headers("Bearer to")));
        assert!(!c.admits(&headers("Bearer tokk")));
        assert!(!c.admits(&headers("Basic dm5mbTp3cm9uZw==")));
        assert!(!c.admits(&headers("Digest tok")));
        assert!(!c.admits(&headers("tok")));
        assert!(!c.admits(&HeaderMap::new()));
        assert!(!format!("{c:?}").contains("tok"));
        let open = Credentials::default();
        assert!(open.admits(&HeaderMap::new()));
        let bearer_only = Credentials::api_token(Some(&Secret::new("t")));
        assert!(!bearer_only.admits(&headers("Basic dDp0")));
        assert_eq!(bearer_only.challenge(), "Bearer realm=\"vnfm\"");
        // Alertmanager sends Authorization only: X-Auth-Token opens no alert endpoint.
        let mut x = HeaderMap::new();
        x.insert("x-auth-token", HeaderValue::from_static("tok"));
        assert!(!c.admits(&x));
    }

    #[test]
    fn the_api_token_is_admitted_as_x_auth_token_too() {
        let c = Credentials::api_token(Some(&Secret::new("tok")));
        let x = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert("x-auth-token", HeaderValue::from_static(v));
            h
        };
        assert!(c.admits(&headers("Bearer tok")));
        assert!(c.admits(&x("tok")));
        assert!(!c.admits(&x("to")));
        assert!(!c.admits(&x("tokk")));
        assert!(!c.admits(&x("Bearer tok")));
        assert!(!c.admits(&x("")));
        // Either header with the token is enough; a wrong one beside it changes nothing.
        let mut both = x("tok");
        both.insert("authorization", HeaderValue::from_static("Bearer wrong"));
        assert!(c.admits(&both));
        // Without an api_token the API is open, whatever the headers.
        assert!(Credentials::api_token(None).admits(&x("anything")));
    }
}
