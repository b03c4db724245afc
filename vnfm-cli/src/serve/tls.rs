//! HTTPS and mutual TLS of `vnfm serve` (`[server.tls]`, rustls with the ring provider).
//!
//! [`Tls::open`] reads the certificate chain, its private key and, for mutual TLS, the bundle
//! of client CA certificates; each file that cannot be used is an error naming its key, its
//! path and what is wrong (unreadable, no certificate, no private key, a key that does not
//! match the certificate, a CA certificate that is not one). The accept loop (`super::conn`)
//! asks [`Tls::acceptor`] for the acceptor of every new connection: it first compares the
//! files' stamps (size, modification time, inode) with the ones it read, and reads them again
//! when one changed. A new set that cannot be used is logged once and the one in use is kept;
//! SIGHUP reads the files again whatever their stamps ([`Tls::reload`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{InconsistentKeys, RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::config::TlsConfig;
use crate::error::CliError;
use crate::pem::{certificates, private_key, read_file};

/// The files of `[server.tls]`.
#[derive(Debug, Clone)]
struct Files {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

impl Files {
    fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(self.cert.as_path()), Some(self.key.as_path())]
            .into_iter()
            .chain(std::iter::once(self.client_ca.as_deref()))
            .flatten()
    }
}

/// What identifies the content of a file without reading it: `None` when it cannot be looked
/// at (then the next look that can is a change).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    inode: (u64, u64),
}

fn stamp_of(path: &Path) -> Option<FileStamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        len: m.len(),
        modified: m.modified().ok(),
        #[cfg(unix)]
        inode: {
            use std::os::unix::fs::MetadataExt as _;
            (m.dev(), m.ino())
        },
    })
}

type Stamp = Vec<Option<FileStamp>>;

struct Current {
    acceptor: TlsAcceptor,
    /// The stamps of the files last looked at: those of the acceptor, or of a set that was
    /// refused (so that it is logged once, not at every connection).
    seen: Stamp,
}

/// The TLS side of the server: the acceptor in use, and the files it comes from.
pub(crate) struct Tls {
    files: Files,
    provider: Arc<CryptoProvider>,
    current: Mutex<Current>,
    quiet: bool,
    handshake_failures: AtomicU64,
    reloads: AtomicU64,
    refused_reloads: AtomicU64,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish()
    }
}

impl Tls {
    /// The TLS side of `config`, its files read; `None` without `[server.tls]`.
    ///
    /// # Errors
    /// [`CliError::Usage`] naming the key, the file and what is wrong with it.
    pub(crate) fn open(config: &TlsConfig, quiet: bool) -> Result<Option<Arc<Tls>>, CliError> {
        let (Some(cert), Some(key)) = (&config.cert, &config.key) else {
            // Half a pair is refused with the configuration ([server.tls] both or neither).
            return Ok(None);
        };
        let files = Files {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: config.client_ca.clone(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let seen = files.paths().map(stamp_of).collect();
        let server = load(&files, &provider).map_err(CliError::Usage)?;
        Ok(Some(Arc::new(Tls {
            files,
            provider,
            current: Mutex::new(Current {
                acceptor: TlsAcceptor::from(server),
                seen,
            }),
            quiet,
            handshake_failures: AtomicU64::new(0),
            reloads: AtomicU64::new(0),
            refused_reloads: AtomicU64::new(0),
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The acceptor for a new connection: the files are read again first when one of them
    /// changed since it was last looked at.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        let stamp: Stamp = self.files.paths().map(stamp_of).collect();
        let mut current = self.lock();
        if current.seen != stamp {
            current.seen = stamp;
            self.replace(&mut current, "changed");
        }
        current.acceptor.clone()
    }

    /// Reads the files again whatever their stamps (SIGHUP). A set that cannot be used is
    /// logged and the one in use kept.
    pub(crate) fn reload(&self) {
        let stamp: Stamp = self.files.paths().map(stamp_of).collect();
        let mut current = self.lock();
        current.seen = stamp;
        self.replace(&mut current, "SIGHUP");
    }

    fn replace(&self, current: &mut Current, why: &str) {
        match load(&self.files, &self.provider) {
            Ok(server) => {
                current.acceptor = TlsAcceptor::from(server);
                self.reloads.fetch_add(1, Ordering::Relaxed);
                if !self.quiet {
                    tracing::info!(
                        "[server.tls] read again ({why}): new connections use the certificate \
                         of {}",
                        self.files.cert.display()
                    );
                }
            }
            Err(e) => {
                self.refused_reloads.fetch_add(1, Ordering::Relaxed);
                // Logged even when quiet: the server goes on with a certificate the operator
                // meant to replace.
                tracing::warn!(
                    "{e}; the certificate and key read before stay in use until the files are \
                     fixed ({why})"
                );
            }
        }
    }

    /// A TLS handshake failed (no client certificate, an unknown CA, plain HTTP, a client
    /// that went away): counted, not logged (anyone can cause one).
    pub(crate) fn handshake_failed(&self) {
        self.handshake_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Appends the TLS series to a `/metrics` text.
    pub(crate) fn render_metrics(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "# HELP vnfm_tls_handshake_failures_total TLS handshakes that failed (no or an \
             untrusted client certificate, not TLS, a client that went away).\n\
             # TYPE vnfm_tls_handshake_failures_total counter\n\
             vnfm_tls_handshake_failures_total {}\n\
             # HELP vnfm_tls_reloads_total Readings of the [server.tls] files after start, by \
             outcome (refused: the files read before stay in use).\n\
             # TYPE vnfm_tls_reloads_total counter\n\
             vnfm_tls_reloads_total{{outcome=\"ok\"}} {}\n\
             vnfm_tls_reloads_total{{outcome=\"refused\"}} {}",
            self.handshake_failures.load(Ordering::Relaxed),
            self.reloads.load(Ordering::Relaxed),
            self.refused_reloads.load(Ordering::Relaxed),
        );
    }
}

/// The certificate chain of `cert` with the private key of `key`, checked to match; `section`
/// names them in errors (`[server.tls]`).
fn certified_key(
    section: &str,
    (cert_key, cert): (&str, &Path),
    (key_key, key): (&str, &Path),
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let chain = certificates(&format!("{section} {cert_key}"), cert)?;
    let der = private_key(&format!("{section} {key_key}"), key)?;
    let signer = provider.key_provider.load_private_key(der).map_err(|e| {
        format!(
            "{section} {key_key} {}: cannot be used ({e}); expected a private key of a kind \
             rustls signs with (RSA, ECDSA P-256/P-384, Ed25519)",
            key.display()
        )
    })?;
    let certified = CertifiedKey::new(chain, signer);
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(certified),
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => Err(format!(
            "{section} {key_key} {} does not match the certificate of {cert_key} {} (its \
             public key is another); expected the private key of that certificate",
            key.display(),
            cert.display()
        )),
        Err(e) => Err(format!(
            "{section} {cert_key} {}: its first certificate cannot be read ({e}); expected \
             an X.509 certificate first",
            cert.display()
        )),
    }
}

/// `[notifications] client_cert` / `client_key` (the identity presented to `TLS_CERT`
/// subscribers) and `server_ca` (trusted beside the built-in roots), read and checked as
/// `[server.tls]`'s files.
///
/// # Errors
/// [`CliError::Usage`] naming the key, the file and what is wrong with it.
pub(crate) fn notification_tls(
    config: &crate::config::NotificationsConfig,
) -> Result<(Option<reqwest::Identity>, Vec<reqwest::Certificate>), CliError> {
    const SECTION: &str = "[notifications]";
    let provider = rustls::crypto::ring::default_provider();
    let identity = match (&config.client_cert, &config.client_key) {
        (Some(cert), Some(key)) => {
            certified_key(
                SECTION,
                ("client_cert", cert),
                ("client_key", key),
                &provider,
            )
            .map_err(CliError::Usage)?;
            // Both files were just read and checked; reqwest takes them as one PEM.
            let mut pem =
                read_file("[notifications] client_cert", cert).map_err(CliError::Usage)?;
            pem.push(b'\n');
            pem.extend(read_file("[notifications] client_key", key).map_err(CliError::Usage)?);
            Some(reqwest::Identity::from_pem(&pem).map_err(|e| {
                CliError::Usage(format!(
                    "{SECTION} client_cert {} and client_key {}: cannot be used as a client \
                     identity ({e})",
                    cert.display(),
                    key.display()
                ))
            })?)
        }
        _ => None,
    };
    let mut roots = Vec::new();
    if let Some(path) = &config.server_ca {
        for c in certificates("[notifications] server_ca", path).map_err(CliError::Usage)? {
            roots.push(reqwest::Certificate::from_der(&c).map_err(|e| {
                CliError::Usage(format!(
                    "{SECTION} server_ca {}: a certificate cannot be used ({e})",
                    path.display()
                ))
            })?);
        }
    }
    Ok((identity, roots))
}

/// The server configuration of `files`.
fn load(files: &Files, provider: &Arc<CryptoProvider>) -> Result<Arc<ServerConfig>, String> {
    let certified = certified_key(
        "[server.tls]",
        ("cert", &files.cert),
        ("key", &files.key),
        provider,
    )?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("[server.tls]: no TLS version available ({e})"))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for (i, c) in certificates("[server.tls] client_ca", path)?
                .into_iter()
                .enumerate()
            {
                roots.add(c).map_err(|e| {
                    format!(
                        "[server.tls] client_ca {}: certificate {} is not a usable CA \
                         certificate ({e})",
                        path.display(),
                        i + 1
                    )
                })?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| {
                        format!(
                            "[server.tls] client_ca {}: cannot verify clients with it ({e})",
                            path.display()
                        )
                    })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut server = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    // The server speaks HTTP/1.1 only.
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(server))
}
