//! The client certificate of a mutual-TLS connection (`[server.tls] client_ca`), as every
//! request on that connection sees it (a request extension, set by `super::conn`): its subject
//! for OAuth 2.0 `tls_client_auth` (RFC 8705 section 2.1) at `POST /token`, and its SHA-256
//! thumbprint, which binds the tokens issued that way to the certificate (section 3).

use ring::digest::{digest, SHA256};
use subtle::ConstantTimeEq;

use crate::dn::DistinguishedName;

/// The verified client certificate of the connection a request came on.
#[derive(Clone, Debug)]
pub(crate) struct PeerCertificate {
    /// Its subject.
    pub(crate) subject: DistinguishedName,
    /// SHA-256 of its DER (RFC 8705's `x5t#S256`).
    pub(crate) thumbprint: [u8; 32],
}

/// What stands for an attribute value that is not a string (it matches no configured name).
const NOT_A_STRING: &str = "\u{0}(not a string)";

impl PeerCertificate {
    /// The end-entity certificate `der` (rustls verified it against `client_ca` during the
    /// handshake), or `None` when it cannot be parsed.
    pub(crate) fn from_der(der: &[u8]) -> Option<Self> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = DistinguishedName::from_certificate_order(cert.subject().iter().map(|rdn| {
            rdn.iter()
                .map(|a| {
                    (
                        a.attr_type().to_id_string(),
                        a.as_str().unwrap_or(NOT_A_STRING).to_owned(),
                    )
                })
                .collect::<Vec<_>>()
        }));
        let mut thumbprint = [0u8; 32];
        thumbprint.copy_from_slice(digest(&SHA256, der).as_ref());
        Some(Self {
            subject,
            thumbprint,
        })
    }

    /// Whether `thumbprint` is this certificate's, compared in constant time.
    pub(crate) fn has_thumbprint(&self, thumbprint: &[u8]) -> bool {
        bool::from(self.thumbprint.as_slice().ct_eq(thumbprint))
    }
}
