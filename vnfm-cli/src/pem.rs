//! PEM files of certificates and private keys, read for rustls: `vnfm serve`'s HTTPS and mutual
//! TLS (`crate::serve`'s `[server.tls]`, `[notifications]` client identity) and TLS to the
//! PostgreSQL state store ([`crate::store_postgres`]'s `sslrootcert`, `sslcert`, `sslkey`).
//!
//! Every error names the file's key (`key`, e.g. `[server.tls] cert` or `sslrootcert`), its
//! path and what is wrong with it (unreadable, not a regular file, too large, not PEM, no
//! certificate, no private key).

use std::path::Path;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The largest PEM file read (certificate chain, key, CA bundle), in bytes: a larger one (or
/// one that is not a regular file) is refused before it is read.
pub(crate) const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// Reads `path` (at most [`MAX_PEM_BYTES`], a regular file); `key` names it in errors
/// (`[server.tls] cert`).
pub(crate) fn read_file(key: &str, path: &Path) -> Result<Vec<u8>, String> {
    let what = |m: String| format!("{key} {}: {m}", path.display());
    let meta = std::fs::metadata(path).map_err(|e| what(format!("cannot be read ({e})")))?;
    if !meta.is_file() {
        return Err(what("is not a regular file; expected a PEM file".into()));
    }
    if meta.len() > MAX_PEM_BYTES {
        return Err(what(format!(
            "has {} bytes; expected a PEM file of at most {MAX_PEM_BYTES}",
            meta.len()
        )));
    }
    std::fs::read(path).map_err(|e| what(format!("cannot be read ({e})")))
}

/// The certificates of a PEM file, at least one.
pub(crate) fn certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read_file(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            format!(
                "{key} {}: not PEM ({e}); expected PEM certificates",
                path.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "{key} {}: no certificate; expected a PEM file with at least one \
             \"-----BEGIN CERTIFICATE-----\" block",
            path.display()
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (its first).
pub(crate) fn private_key(key: &str, path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let bytes = read_file(key, path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        pem::Error::NoItemsFound => format!(
            "{key} {}: no private key; expected a PEM file with a \"-----BEGIN \
             PRIVATE KEY-----\" (PKCS#8), \"RSA PRIVATE KEY\" or \"EC PRIVATE KEY\" block",
            path.display()
        ),
        e => format!(
            "{key} {}: not PEM ({e}); expected a PEM private key",
            path.display()
        ),
    })
}
