//! TLS to the PostgreSQL server of `[state] url` (issue 27): libpq's `sslmode`, `sslrootcert`,
//! `sslcert` and `sslkey` parameters, read from the URL, and a
//! [`tokio_postgres::tls::MakeTlsConnect`] on rustls.
//!
//! ## Why an adapter of our own
//! tokio-postgres brings no TLS of its own: it takes a connector. The published ones sit on
//! OpenSSL or native-tls (`postgres-openssl`, `postgres-native-tls`), or are a further crate
//! (`tokio-postgres-rustls`) over the same rustls this workspace already builds with ring for
//! `vnfm serve`'s HTTPS, reqwest and kube. The adapter is small (a connector, a stream, the
//! `tls-server-end-point` channel binding of SCRAM), so it is written here: no extra crate, no
//! OpenSSL, no aws-lc, one TLS stack, and the PEM files read by `crate::pem` as `vnfm serve`'s
//! are, with the same errors.
//!
//! ## `sslmode` and the certificates
//! vnfm never runs TLS without verifying the server's certificate: a TLS connection is one whose
//! certificate chains to the CA of `sslrootcert=PATH` (a PEM bundle, in the URL: libpq's name,
//! so the same URL works for `psql`). There is no fallback to the system's or the web's roots,
//! and libpq's default `~/.postgresql/root.crt` is not read.
//!
//! | `sslmode` | without `sslrootcert` | with `sslrootcert` |
//! |---|---|---|
//! | `disable` | plain | plain |
//! | `allow`, `prefer` (default) | plain (libpq would encrypt without verifying) | TLS when the server offers it, verified as `verify-full`; plain when it does not |
//! | `require` | refused: name a CA (libpq would not verify) | TLS, verified as `verify-full` (as libpq's `require` verifies once a root certificate is given, and more: the host name too) |
//! | `verify-ca` | refused | TLS, the chain verified, not the host name |
//! | `verify-full` | refused | TLS, the chain and the host name verified |
//!
//! The host name checked is the URL's host (a DNS name, or an IP address that the certificate
//! must name in its subjectAltName). `sslcert=PATH` and `sslkey=PATH` (both or neither) present
//! a client certificate (PostgreSQL's `cert` authentication, or `clientcert=verify-full`); they
//! need `sslrootcert`. Every file is read when the store is opened: a missing or unreadable
//! file, one that is not PEM, without a certificate or a key, is refused then, naming the
//! parameter, the file and what is wrong.

use std::fmt;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::SignatureScheme;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

use crate::pem::{certificates, private_key};

/// libpq's `sslmode`, as vnfm reads it (the module's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `disable`: plain.
    Disable,
    /// `allow` or `prefer` (the default): TLS when a CA is given and the server offers it.
    Prefer,
    /// `require`: TLS, verified as `verify-full`.
    Require,
    /// `verify-ca`: TLS, the chain verified.
    VerifyCa,
    /// `verify-full`: TLS, the chain and the host name verified.
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> Result<Mode, String> {
        Ok(match value {
            "disable" => Mode::Disable,
            "allow" | "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode={other}: unknown; expected disable, allow, prefer, require, \
                     verify-ca or verify-full"
                ))
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS parameters of a state URL that vnfm reads itself (tokio-postgres knows only
/// `disable`, `prefer` and `require`, and no file).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Params {
    mode: Option<Mode>,
    root_cert: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
}

impl Params {
    /// Takes `key=value` when it is one of vnfm's; `false` when it is not.
    fn take(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "sslmode" => self.mode = Some(Mode::parse(value)?),
            "sslrootcert" => self.root_cert = Some(path(key, value)?),
            "sslcert" => self.cert = Some(path(key, value)?),
            "sslkey" => self.key = Some(path(key, value)?),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn path(key: &str, value: &str) -> Result<PathBuf, String> {
    if value.is_empty() {
        return Err(format!("{key} is empty; expected the path of a PEM file"));
    }
    Ok(PathBuf::from(value))
}

/// `url` without the parameters vnfm reads itself (`sslmode`, `sslrootcert`, `sslcert`,
/// `sslkey`), for tokio-postgres, and those parameters; in the URL form (`postgres://…?k=v&…`,
/// percent-encoded) or libpq's `key=value` form. A string that is neither is refused rather
/// than handed on whole: its `sslmode` (say `require`) would otherwise be lost, and the
/// connection made without TLS.
///
/// # Errors
/// A parameter's value vnfm does not accept (an unknown `sslmode`, an empty path, a value
/// that is not UTF-8 once decoded), named; a string that is neither form.
pub(crate) fn split(url: &str) -> Result<(String, Params), String> {
    let mut params = Params::default();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let rest = url.find("://").map_or(0, |i| i + 3);
        let Some(q) = url[rest..].find('?').map(|i| rest + i) else {
            return Ok((url.to_owned(), params));
        };
        let mut kept = Vec::new();
        for pair in url[q + 1..].split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = decode(key)?;
            let value = decode(value).map_err(|e| format!("{key}: {e}"))?;
            if !params.take(&key, &value)? {
                kept.push(pair);
            }
        }
        let mut out = url[..q].to_owned();
        if !kept.is_empty() {
            out.push('?');
            out.push_str(&kept.join("&"));
        }
        return Ok((out, params));
    }
    let Some(pairs) = key_values(url) else {
        return Err(
            "not a PostgreSQL URL: expected postgres://user[:password]@host[:port]/database \
             or libpq `key=value` pairs (a value with spaces quoted: key='a b')"
                .to_owned(),
        );
    };
    let mut kept = Vec::new();
    for (key, value, text) in pairs {
        if !params.take(&key, &value)? {
            kept.push(text);
        }
    }
    Ok((kept.join(" "), params))
}

/// Percent-decodes a URL's query key or value (`+` stays a `+`, as libpq reads it).
fn decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let v = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    // The value itself is not repeated: it may be a password.
    String::from_utf8(out).map_err(|_| "not UTF-8 once percent-decoded".to_owned())
}

/// The pairs of a libpq `key=value` string: key, value (unquoted, unescaped) and the pair's
/// text; `None` when it is not one.
fn key_values(s: &str) -> Option<Vec<(String, String, &str)>> {
    let b = s.as_bytes();
    let ws = |i: usize| b.get(i).is_some_and(|c| c.is_ascii_whitespace());
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while ws(i) {
            i += 1;
        }
        if i >= b.len() {
            return Some(out);
        }
        let start = i;
        while i < b.len() && b[i] != b'=' && !ws(i) {
            i += 1;
        }
        let key = s.get(start..i)?.to_owned();
        while ws(i) {
            i += 1;
        }
        if b.get(i) != Some(&b'=') || key.is_empty() {
            return None;
        }
        i += 1;
        while ws(i) {
            i += 1;
        }
        let mut value = Vec::new();
        if b.get(i) == Some(&b'\'') {
            i += 1;
            loop {
                match b.get(i)? {
                    b'\'' => break,
                    b'\\' => value.push(*b.get(i + 1)?),
                    c => {
                        value.push(*c);
                        i += 1;
                        continue;
                    }
                }
                i += 2;
            }
            i += 1;
        } else {
            while i < b.len() && !ws(i) {
                if b[i] == b'\\' {
                    value.push(*b.get(i + 1)?);
                    i += 2;
                } else {
                    value.push(b[i]);
                    i += 1;
                }
            }
        }
        out.push((key, String::from_utf8(value).ok()?, s.get(start..i)?));
    }
}

/// Why a TLS handshake with the server failed, as the store reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The server's certificate does not verify (or it refused ours).
    Refused,
    /// The server does not speak TLS, and the `sslmode` needs it.
    NoTls,
    /// Anything else (the connection lost during the handshake, ...).
    Other,
}

/// The TLS side of a store's connections: the `sslmode` tokio-postgres runs with, and the
/// connector it asks for each connection.
#[derive(Clone)]
pub(crate) struct MakeTls {
    mode: Mode,
    /// `None`: plain connections only (tokio-postgres's mode is `disable` then).
    config: Option<Arc<ClientConfig>>,
    root_cert: Option<PathBuf>,
}

impl fmt::Debug for MakeTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MakeTls")
            .field("mode", &self.mode)
            .field("tls", &self.config.is_some())
            .field("root_cert", &self.root_cert)
            .finish()
    }
}

impl MakeTls {
    /// The connector of `params`, its files read and checked.
    ///
    /// # Errors
    /// A mode that needs a CA without `sslrootcert`, half a client identity, or a file that
    /// cannot be used, named (parameter, file, what is wrong, what was expected).
    pub(crate) fn new(params: &Params) -> Result<Self, String> {
        let mode = params.mode.unwrap_or(Mode::Prefer);
        let plain = Self {
            mode,
            config: None,
            root_cert: None,
        };
        if mode == Mode::Disable {
            return Ok(plain);
        }
        let identity = match (&params.cert, &params.key) {
            (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
            (None, None) => None,
            (Some(_), None) => {
                return Err("sslcert is given without sslkey; expected both (a client \
                            certificate and its private key) or neither"
                    .into())
            }
            (None, Some(_)) => {
                return Err("sslkey is given without sslcert; expected both (a client \
                            certificate and its private key) or neither"
                    .into())
            }
        };
        let Some(root_cert) = &params.root_cert else {
            if mode != Mode::Prefer {
                return Err(format!(
                    "sslmode={} needs sslrootcert=PATH (a PEM file of the CA that signed the \
                     server's certificate): vnfm verifies every TLS connection to PostgreSQL \
                     (unlike libpq's sslmode=require without a root certificate); add it to \
                     the URL, or use sslmode=disable on a trusted network",
                    mode.name()
                ));
            }
            if identity.is_some() {
                return Err(
                    "sslcert and sslkey need sslrootcert=PATH (a PEM file of the CA \
                            that signed the server's certificate): vnfm only speaks TLS it \
                            verifies"
                        .into(),
                );
            }
            return Ok(plain);
        };
        let config = client_config(mode, root_cert, identity)?;
        Ok(Self {
            mode,
            config: Some(Arc::new(config)),
            root_cert: Some(root_cert.clone()),
        })
    }

    /// The `sslmode` of tokio-postgres: `disable` without TLS, `prefer` or `require` with.
    pub(crate) fn ssl_mode(&self) -> SslMode {
        match (self.mode, &self.config) {
            (Mode::Disable, _) | (_, None) => SslMode::Disable,
            (Mode::Prefer, Some(_)) => SslMode::Prefer,
            (Mode::Require | Mode::VerifyCa | Mode::VerifyFull, Some(_)) => SslMode::Require,
        }
    }

    /// What went wrong when `e` is a failed TLS handshake (`None` when it is not one), and
    /// what to do about it.
    pub(crate) fn failure(&self, e: &tokio_postgres::Error) -> Option<(Failure, String)> {
        if e.to_string() != "error performing TLS handshake" {
            return None;
        }
        let source = std::error::Error::source(e);
        let rustls = source
            .and_then(|s| s.downcast_ref::<io::Error>())
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        let root = self
            .root_cert
            .as_deref()
            .map_or_else(String::new, |p| p.display().to_string());
        let detail = source.map_or_else(String::new, |s| s.to_string());
        Some(match rustls {
            Some(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => (
                Failure::Refused,
                format!(
                    "the server's certificate does not name the URL's host ({detail}); expected \
                     the host name (or IP address) the certificate was issued for, or \
                     sslmode=verify-ca to check the CA only"
                ),
            ),
            Some(rustls::Error::InvalidCertificate(_)) => (
                Failure::Refused,
                format!(
                    "the server's certificate does not verify against sslrootcert {root} \
                     ({detail}); expected a certificate signed by that CA, valid now"
                ),
            ),
            Some(rustls::Error::AlertReceived(_)) => (
                Failure::Refused,
                format!(
                    "the server refused the TLS handshake ({detail}); a client certificate \
                     it does not accept (sslcert), or no common TLS version"
                ),
            ),
            _ if detail == "server does not support TLS" => (
                Failure::NoTls,
                format!(
                    "the server does not speak TLS (its ssl is off), and sslmode={} needs it; \
                     expected a server with ssl = on, or sslmode=disable",
                    self.mode.name()
                ),
            ),
            _ => (Failure::Other, format!("TLS handshake failed: {detail}")),
        })
    }
}

/// The rustls client configuration of `mode` with the CA of `root_cert` and the client
/// identity of `identity` (certificate, key).
fn client_config(
    mode: Mode,
    root_cert: &Path,
    identity: Option<(&Path, &Path)>,
) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for (i, c) in certificates("sslrootcert", root_cert)?
        .into_iter()
        .enumerate()
    {
        roots.add(c).map_err(|e| {
            format!(
                "sslrootcert {}: certificate {} is not a usable CA certificate ({e})",
                root_cert.display(),
                i + 1
            )
        })?;
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| {
            format!(
                "sslrootcert {}: cannot verify servers with it ({e})",
                root_cert.display()
            )
        })?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("no TLS version available ({e})"))?;
    let builder = if mode == Mode::VerifyCa {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CaOnly(webpki)))
    } else {
        builder.with_webpki_verifier(webpki)
    };
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = certificates("sslcert", cert)?;
            let der = private_key("sslkey", key)?;
            builder.with_client_auth_cert(chain, der).map_err(|e| {
                format!(
                    "sslcert {} and sslkey {}: cannot be used as a client identity ({e}); \
                     expected a certificate and its own private key (RSA, ECDSA P-256/P-384, \
                     Ed25519)",
                    cert.display(),
                    key.display()
                )
            })?
        }
    };
    // PostgreSQL 17's direct TLS (sslnegotiation=direct) asks for it; older servers ignore it.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(config)
}

/// `verify-ca`: the webpki verifier, whose host name check (its last) is not asked for.
#[derive(Debug)]
struct CaOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for CaOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            // webpki checks the name last, once the chain verified.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl<S> MakeTlsConnect<S> for MakeTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = TlsStream<S>;
    type TlsConnect = Connect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Connect, io::Error> {
        // A Unix socket has no host name (tokio-postgres refuses TLS there before connecting).
        let name = ServerName::try_from(domain.to_owned()).ok();
        Ok(Connect {
            config: self.config.clone(),
            name,
        })
    }
}

/// The TLS handshake of one connection.
pub(crate) struct Connect {
    config: Option<Arc<ClientConfig>>,
    name: Option<ServerName<'static>>,
}

impl<S> TlsConnect<S> for Connect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = TlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let Some(config) = self.config else {
                return Err(io::Error::other(
                    "no sslrootcert: vnfm does not run TLS it cannot verify",
                ));
            };
            let Some(name) = self.name else {
                return Err(io::Error::other(
                    "no host name to verify the server's certificate against",
                ));
            };
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, stream)
                .await?;
            Ok(TlsStream(stream))
        })
    }
}

/// A connection under TLS.
pub(crate) struct TlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for TlsStream<S> {
    /// `tls-server-end-point` (RFC 5929), for SCRAM-SHA-256-PLUS: the hash of the server's
    /// certificate, with the hash of its signature algorithm (SHA-256 for MD5 and SHA-1 too);
    /// none for Ed25519/Ed448, for which PostgreSQL offers no channel binding either.
    fn channel_binding(&self) -> ChannelBinding {
        let (_, conn) = self.0.get_ref();
        conn.peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|cert| end_point(cert))
            .map_or_else(ChannelBinding::none, ChannelBinding::tls_server_end_point)
    }
}

/// The `tls-server-end-point` hash of `cert`.
fn end_point(cert: &CertificateDer<'_>) -> Option<Vec<u8>> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).ok()?;
    let algorithm = match parsed.signature_algorithm.algorithm.to_id_string().as_str() {
        // sha384WithRSAEncryption, ecdsa-with-SHA384
        "1.2.840.113549.1.1.12" | "1.2.840.10045.4.3.3" => &ring::digest::SHA384,
        // sha512WithRSAEncryption, ecdsa-with-SHA512
        "1.2.840.113549.1.1.13" | "1.2.840.10045.4.3.4" => &ring::digest::SHA512,
        // Ed25519, Ed448: RFC 5929 names no hash.
        "1.3.101.112" | "1.3.101.113" => return None,
        _ => &ring::digest::SHA256,
    };
    Some(ring::digest::digest(algorithm, cert).as_ref().to_vec())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose,
    };
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use vnfm_core::driver::DriverError;

    use super::*;
    use crate::store_postgres::PgStore;

    /// A CA made for the test, and its certificate's PEM.
    fn ca(name: &str) -> (CertifiedIssuer<'static, KeyPair>, String) {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap();
        let pem = issuer.pem();
        (issuer, pem)
    }

    /// A server certificate of `ca` for `name`: its DER and its key's DER (PKCS#8).
    fn server_cert(
        ca: &CertifiedIssuer<'static, KeyPair>,
        name: &str,
    ) -> (CertificateDer<'static>, Vec<u8>) {
        let mut p = CertificateParams::new(vec![name.to_owned()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, ca).unwrap();
        (cert.der().clone(), key.serialize_der())
    }

    /// A server on 127.0.0.1 that answers each connection's SSLRequest: `N` without `tls`,
    /// else `S` and a TLS handshake, then closes it.
    async fn fake_server(tls: Option<(CertificateDer<'static>, Vec<u8>)>) -> u16 {
        let config = tls.map(|(cert, key)| {
            let key = rustls::pki_types::PrivatePkcs8KeyDer::from(key);
            Arc::new(
                rustls::ServerConfig::builder_with_provider(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![cert], key.into())
                .unwrap(),
            )
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let config = config.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 8];
                    if s.read_exact(&mut request).await.is_err() {
                        return;
                    }
                    match config {
                        None => drop(s.write_all(b"N").await),
                        Some(c) => {
                            if s.write_all(b"S").await.is_ok() {
                                drop(tokio_rustls::TlsAcceptor::from(c).accept(s).await);
                            }
                        }
                    }
                });
            }
        });
        port
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn params(url: &str) -> Params {
        split(url).unwrap().1
    }

    #[test]
    fn split_takes_the_tls_parameters_out_of_both_forms() {
        let (rest, p) = split(
            "postgres://u:pw@h:5432/db?sslmode=verify-full&application_name=x&sslrootcert=\
             %2Ftmp%2Fca%20b.pem&sslcert=/c.pem&sslkey=/c.key&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://u:pw@h:5432/db?application_name=x&connect_timeout=3"
        );
        assert_eq!(p.mode, Some(Mode::VerifyFull));
        assert_eq!(p.root_cert, Some(PathBuf::from("/tmp/ca b.pem")));
        assert_eq!(p.cert, Some(PathBuf::from("/c.pem")));
        assert_eq!(p.key, Some(PathBuf::from("/c.key")));
        let (rest, p) = split("postgresql://h/db?sslmode=require").unwrap();
        assert_eq!(rest, "postgresql://h/db");
        assert_eq!(p.mode, Some(Mode::Require));
        assert_eq!(split("postgres://h/db").unwrap().0, "postgres://h/db");

        let (rest, p) = split(
            "host=h  sslrootcert = '/a dir/ca\\'s.pem' user=v sslmode=verify-ca dbname='x y'",
        )
        .unwrap();
        assert_eq!(rest, "host=h user=v dbname='x y'");
        assert_eq!(p.root_cert, Some(PathBuf::from("/a dir/ca's.pem")));
        assert_eq!(p.mode, Some(Mode::VerifyCa));
        // Neither form: refused, not handed on (its sslmode would be lost); a value that
        // does not decode is named by its key, not repeated (it may be a password).
        let e = split("host sslmode=require").unwrap_err();
        assert!(e.starts_with("not a PostgreSQL URL"), "{e}");
        let e = split("postgres://h/db?password=%FF%FE").unwrap_err();
        assert!(e.starts_with("password: not UTF-8"), "{e}");
        assert!(!e.contains("%FF"), "{e}");

        let e = split("postgres://h/db?sslmode=verify_full").unwrap_err();
        assert!(
            e.contains("sslmode=verify_full: unknown; expected disable"),
            "{e}"
        );
        let e = split("postgres://h/db?sslrootcert=").unwrap_err();
        assert!(e.contains("sslrootcert is empty"), "{e}");
        // tokio-postgres takes what is left, and still names what it does not know.
        let (rest, _) = split("postgres://h/db?sslmode=require&sslcrl=/x").unwrap();
        assert!(rest.parse::<tokio_postgres::Config>().is_err());
    }

    #[test]
    fn modes_map_onto_tokio_postgres_and_never_tls_without_a_ca() {
        let dir = tempfile::tempdir().unwrap();
        let ca_file = write(dir.path(), "ca.pem", &ca("t").1);
        let ca = ca_file.display();
        let mode = |url: &str| MakeTls::new(&params(url)).map(|t| t.ssl_mode());
        assert_eq!(mode("postgres://h/d").unwrap(), SslMode::Disable);
        assert_eq!(
            mode("postgres://h/d?sslmode=prefer").unwrap(),
            SslMode::Disable
        );
        assert_eq!(
            mode("postgres://h/d?sslmode=allow").unwrap(),
            SslMode::Disable
        );
        let with_ca = |m: &str| mode(&format!("postgres://h/d?sslmode={m}&sslrootcert={ca}"));
        assert_eq!(with_ca("disable").unwrap(), SslMode::Disable);
        assert_eq!(with_ca("prefer").unwrap(), SslMode::Prefer);
        for m in ["require", "verify-ca", "verify-full"] {
            assert_eq!(with_ca(m).unwrap(), SslMode::Require, "{m}");
            let e = mode(&format!("postgres://h/d?sslmode={m}")).unwrap_err();
            assert!(
                e.starts_with(&format!("sslmode={m} needs sslrootcert=PATH")),
                "{m}: {e}"
            );
        }
        let e = mode("postgres://h/d?sslcert=/c.pem&sslkey=/c.key").unwrap_err();
        assert!(e.contains("sslcert and sslkey need sslrootcert"), "{e}");
        let e = mode(&format!("postgres://h/d?sslrootcert={ca}&sslcert=/c.pem")).unwrap_err();
        assert!(e.contains("sslcert is given without sslkey"), "{e}");
    }

    #[test]
    fn files_that_cannot_be_used_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let new = |url: String| MakeTls::new(&params(&url)).unwrap_err();
        let missing = dir.path().join("nope.pem");
        let e = new(format!(
            "postgres://h/d?sslmode=require&sslrootcert={}",
            missing.display()
        ));
        assert!(
            e.starts_with(&format!(
                "sslrootcert {}: cannot be read (",
                missing.display()
            )),
            "{e}"
        );
        let key_only = write(
            dir.path(),
            "key.pem",
            &KeyPair::generate().unwrap().serialize_pem(),
        );
        let e = new(format!(
            "postgres://h/d?sslmode=require&sslrootcert={}",
            key_only.display()
        ));
        assert!(e.contains("no certificate; expected a PEM file"), "{e}");
        let junk = write(dir.path(), "junk.pem", "-----BEGIN CERTIFICATE-----\n%%%\n");
        let e = new(format!(
            "postgres://h/d?sslmode=require&sslrootcert={}",
            junk.display()
        ));
        assert!(
            e.contains(&format!("sslrootcert {}: not PEM", junk.display())),
            "{e}"
        );
        let ca = write(dir.path(), "ca.pem", &ca("t").1);
        let e = new(format!(
            "postgres://h/d?sslmode=require&sslrootcert={}&sslcert={}&sslkey={}",
            ca.display(),
            ca.display(),
            ca.display()
        ));
        assert!(
            e.contains(&format!("sslkey {}: no private key", ca.display())),
            "{e}"
        );
    }

    /// What opening a store on `url` fails with.
    async fn open_error(url: &str) -> DriverError {
        match PgStore::open(url).await {
            Ok(_) => panic!("{url}: opened"),
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn require_refuses_a_server_without_tls() {
        let dir = tempfile::tempdir().unwrap();
        let ca = write(dir.path(), "ca.pem", &ca("t").1);
        let port = fake_server(None).await;
        let e = open_error(&format!(
            "postgres://u@127.0.0.1:{port}/d?sslmode=require&sslrootcert={}",
            ca.display()
        ))
        .await;
        let DriverError::Invalid { message, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(
            message.contains(
                "the server does not speak TLS (its ssl is off), and sslmode=require needs it"
            ),
            "{message}"
        );
        assert!(
            message.starts_with(&format!("postgres://u@127.0.0.1:{port}/d: ")),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_certificate_that_does_not_verify_is_refused_naming_why() {
        let dir = tempfile::tempdir().unwrap();
        let (server_ca, server_ca_pem) = ca("server CA");
        let own = write(dir.path(), "own.pem", &server_ca_pem);
        let other = write(dir.path(), "other.pem", &ca("another CA").1);

        // Signed by another CA.
        let port = fake_server(Some(server_cert(&server_ca, "127.0.0.1"))).await;
        let e = open_error(&format!(
            "postgres://u@127.0.0.1:{port}/d?sslmode=require&sslrootcert={}",
            other.display()
        ))
        .await;
        let DriverError::Unauthenticated { message, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(
            message.contains(&format!(
                "the server's certificate does not verify against sslrootcert {}",
                other.display()
            )),
            "{message}"
        );

        // The right CA, another host: refused by verify-full (and require), not verify-ca.
        let port = fake_server(Some(server_cert(&server_ca, "db.example"))).await;
        for mode in ["require", "verify-full"] {
            let e = open_error(&format!(
                "postgres://u@127.0.0.1:{port}/d?sslmode={mode}&sslrootcert={}",
                own.display()
            ))
            .await;
            let DriverError::Unauthenticated { message, .. } = &e else {
                panic!("{mode}: {e:?}")
            };
            assert!(
                message.contains("the server's certificate does not name the URL's host"),
                "{mode}: {message}"
            );
        }
        // verify-ca: the handshake passes (the fake server then closes the connection).
        let e = open_error(&format!(
            "postgres://u@127.0.0.1:{port}/d?sslmode=verify-ca&sslrootcert={}",
            own.display()
        ))
        .await;
        assert!(matches!(e, DriverError::Unavailable { .. }), "{e:?}");
        assert!(!e.to_string().contains("certificate"), "{e}");
    }

    /// Against the PostgreSQL of `VNFM_TEST_POSTGRES_URL` started with TLS
    /// (`scripts/postgres-dev.sh start DIR --tls`, which `scripts/test.sh` does).
    mod pg {
        use tokio_postgres::NoTls;
        use vnfm_core::store::conformance;

        use super::*;
        use crate::store_postgres::tests::{admin_client, TestDb};

        const TLS_VAR: &str = "VNFM_TEST_POSTGRES_TLS";

        /// The test database and the directory of the cluster's certificates (`ca.pem`,
        /// `client.pem`, `client.key`), or `None` after recording a skip.
        async fn tls_db(test: &str) -> Option<(TestDb, PathBuf)> {
            let db = TestDb::create(test).await?;
            match std::env::var(TLS_VAR) {
                Ok(dir) if !dir.trim().is_empty() => Some((db, PathBuf::from(dir))),
                _ => {
                    vnfm_core::vectors::skip(
                        "postgres",
                        &format!("store_postgres::tls::tests::pg, {test}"),
                        &format!(
                            "{TLS_VAR} is not set (the certificates of a PostgreSQL server \
                             with TLS); scripts/test.sh starts one, or: eval \
                             \"$(scripts/postgres-dev.sh start DIR --tls)\""
                        ),
                    );
                    None
                }
            }
        }

        /// `url` with `params` added to its query.
        fn with(url: &str, params: &str) -> String {
            let sep = if url.contains('?') { '&' } else { '?' };
            format!("{url}{sep}{params}")
        }

        async fn encrypted(store: &PgStore) -> bool {
            let client = store.client("asking pg_stat_ssl").await.unwrap();
            let row = client
                .query_one(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .await
                .unwrap();
            row.get(0)
        }

        #[tokio::test]
        async fn the_store_runs_over_verified_tls() {
            let Some((db, tls)) = tls_db("tls_store").await else {
                return;
            };
            let ca = tls.join("ca.pem");
            for mode in ["require", "verify-full", "verify-ca", "prefer"] {
                let url = with(
                    db.url(),
                    &format!("sslmode={mode}&sslrootcert={}", ca.display()),
                );
                let store = PgStore::open(&url)
                    .await
                    .unwrap_or_else(|e| panic!("{mode}: {e}"));
                assert!(encrypted(&store).await, "{mode}: not encrypted");
                if mode == "require" {
                    conformance::round_trip(&store).await;
                    assert!(encrypted(&store.reopen().unwrap()).await);
                }
            }
            // Without a CA, prefer stays plain (as before), and so does disable.
            for url in [db.url().to_owned(), with(db.url(), "sslmode=disable")] {
                let store = PgStore::open(&url).await.unwrap();
                assert!(!encrypted(&store).await, "{url}: encrypted");
            }
        }

        #[tokio::test]
        async fn another_ca_is_refused_by_the_real_server() {
            let Some((db, _)) = tls_db("tls_wrong_ca").await else {
                return;
            };
            let dir = tempfile::tempdir().unwrap();
            let other = write(dir.path(), "other.pem", &ca("another CA").1);
            let url = with(
                db.url(),
                &format!("sslmode=require&sslrootcert={}", other.display()),
            );
            let e = open_error(&url).await;
            let DriverError::Unauthenticated { message, .. } = &e else {
                panic!("{e:?}")
            };
            assert!(
                message.contains(&format!(
                    "does not verify against sslrootcert {}",
                    other.display()
                )),
                "{message}"
            );
        }

        /// `url` as the user `user` (password `password` when given).
        fn as_user(url: &str, user: &str, password: Option<&str>) -> String {
            let rest = url.find("://").map_or(0, |i| i + 3);
            let at = url[rest..].rfind('@').map_or(rest, |i| rest + i + 1);
            let auth = password.map_or(user.to_owned(), |p| format!("{user}:{p}"));
            format!("{}{auth}@{}", &url[..rest], &url[at..])
        }

        /// Creates `role` (once per cluster) and gives it the test's database.
        async fn owner(db: &TestDb, role: &str, password: Option<&str>) {
            let admin = admin_client(db.url()).await;
            admin
                .batch_execute(&format!(
                    "DO $$ BEGIN CREATE ROLE {role} LOGIN; EXCEPTION WHEN duplicate_object \
                     OR unique_violation THEN NULL; END $$"
                ))
                .await
                .unwrap();
            if let Some(p) = password {
                admin
                    .batch_execute(&format!("ALTER ROLE {role} PASSWORD '{p}'"))
                    .await
                    .unwrap();
            }
            admin
                .batch_execute(&format!("ALTER DATABASE \"{}\" OWNER TO {role}", db.name()))
                .await
                .unwrap();
        }

        /// SCRAM-SHA-256-PLUS: the `tls-server-end-point` binding is the server's.
        #[tokio::test]
        async fn scram_with_channel_binding() {
            let Some((db, tls)) = tls_db("tls_scram").await else {
                return;
            };
            owner(&db, "vnfm_scram", Some("s3cret")).await;
            let url = with(
                &as_user(db.url(), "vnfm_scram", Some("s3cret")),
                &format!(
                    "sslmode=verify-full&sslrootcert={}&channel_binding=require",
                    tls.join("ca.pem").display()
                ),
            );
            let store = PgStore::open(&url).await.unwrap_or_else(|e| panic!("{e}"));
            assert!(encrypted(&store).await);
            // The role may not connect without TLS (pg_hba.conf of postgres-dev.sh --tls).
            let plain = as_user(db.url(), "vnfm_scram", Some("s3cret"));
            assert!(tokio_postgres::connect(&plain, NoTls).await.is_err());
        }

        /// PostgreSQL's `cert` authentication: the client certificate of `sslcert`/`sslkey`.
        #[tokio::test]
        async fn a_client_certificate_logs_in() {
            let Some((db, tls)) = tls_db("tls_client_cert").await else {
                return;
            };
            owner(&db, "vnfm_cert", None).await;
            let base = with(
                &as_user(db.url(), "vnfm_cert", None),
                &format!(
                    "sslmode=verify-full&sslrootcert={}",
                    tls.join("ca.pem").display()
                ),
            );
            let url = format!(
                "{base}&sslcert={}&sslkey={}",
                tls.join("client.pem").display(),
                tls.join("client.key").display()
            );
            let store = PgStore::open(&url).await.unwrap_or_else(|e| panic!("{e}"));
            assert!(encrypted(&store).await);
            // Without the certificate the server refuses the role.
            let e = open_error(&base).await;
            assert!(matches!(e, DriverError::Unauthenticated { .. }), "{e:?}");
        }
    }
}
