//! HTTPS and mutual TLS on `vnfm serve` (`[server.tls]`), with certificates this test makes
//! (rcgen) and reqwest (rustls) as the client: an HTTPS request is answered and plain HTTP is
//! not; with `client_ca`, a client whose certificate that CA signed is served and a client
//! without one, or with one of another CA, is refused at the TLS handshake; a connection that
//! never handshakes is closed at `header_timeout`; replaced files are served after the reload
//! (on change, and on SIGHUP's path), a broken new pair is refused and the old one kept; bad
//! files stop the server at start with an error naming the file and what is wrong.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use serve_common::metric;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vnfm_cli::config::Config;
use vnfm_cli::serve::Server;

/// A certificate authority made for the test.
fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

/// A certificate of `ca` (PEM), its key (PEM) and the certificate's DER.
struct Leaf {
    cert: String,
    key: String,
    der: Vec<u8>,
}

fn leaf(ca: &Issuer<'_, KeyPair>, name: &str, purpose: ExtendedKeyUsagePurpose) -> Leaf {
    let mut p = CertificateParams::new(vec![name.to_owned()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.extended_key_usages = vec![purpose];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, ca).unwrap();
    Leaf {
        cert: cert.pem(),
        key: key.serialize_pem(),
        der: cert.der().to_vec(),
    }
}

/// The server's certificate for 127.0.0.1.
fn server_leaf(ca: &Issuer<'_, KeyPair>) -> Leaf {
    leaf(ca, "127.0.0.1", ExtendedKeyUsagePurpose::ServerAuth)
}

fn client_leaf(ca: &Issuer<'_, KeyPair>) -> Leaf {
    leaf(ca, "tacker.example", ExtendedKeyUsagePurpose::ClientAuth)
}

/// Writes `text` to `path` as a replacement would: a new file renamed over the old one.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

struct Files {
    cert: PathBuf,
    key: PathBuf,
    client_ca: PathBuf,
}

fn write_files(dir: &Path, server: &Leaf, client_ca: &str) -> Files {
    let f = Files {
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
        client_ca: dir.join("client-ca.pem"),
    };
    replace(&f.cert, &server.cert);
    replace(&f.key, &server.key);
    replace(&f.client_ca, client_ca);
    f
}

fn config(dir: &Path, files: &Files, mutual: bool) -> Config {
    let mut c = serve_common::config(dir, 1);
    c.server.tls.cert = Some(files.cert.clone());
    c.server.tls.key = Some(files.key.clone());
    if mutual {
        c.server.tls.client_ca = Some(files.client_ca.clone());
    }
    c
}

/// A client that trusts `ca` (and nothing else), presents `identity` when given, opens a new
/// connection for every request, and keeps what it learnt of the TLS session.
fn client(ca: &CertifiedIssuer<'_, KeyPair>, identity: Option<&Leaf>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10));
    if let Some(id) = identity {
        let pem = format!("{}{}", id.cert, id.key);
        b = b.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
    }
    b.build().unwrap()
}

/// The status and the DER of the server's certificate of `GET https://addr/path`.
async fn get(c: &reqwest::Client, addr: SocketAddr, path: &str) -> reqwest::Result<(u16, Vec<u8>)> {
    let r = c.get(format!("https://{addr}{path}")).send().await?;
    let peer = r
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    Ok((r.status().as_u16(), peer))
}

async fn metrics(c: &reqwest::Client, addr: SocketAddr) -> String {
    let r = c
        .get(format!("https://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    serve_common::without_replica(&r.text().await.unwrap())
}

/// The whole chain of an error, `Debug` included (rustls's alert is in its source).
fn chain(e: &reqwest::Error) -> String {
    let mut s = format!("{e:?}");
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(&format!(" / {x}"));
        src = x.source();
    }
    s
}

async fn start(c: Config) -> Server {
    serve_common::start(c).await
}

#[tokio::test]
async fn https_is_answered_and_plain_http_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca("vnfm test server CA");
    let server_cert = server_leaf(&ca);
    let files = write_files(dir.path(), &server_cert, "");
    let server = start(config(dir.path(), &files, false)).await;
    let addr = server.local_addr();
    assert!(server.is_https());

    let https = client(&ca, None);
    let (status, peer) = get(&https, addr, "/vnflcm/v2/api_versions").await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        peer, server_cert.der,
        "the configured certificate is served"
    );

    // Plain HTTP to the TLS listener: no HTTP answer.
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let e = plain
        .get(format!("http://{addr}/vnflcm/v2/api_versions"))
        .send()
        .await
        .expect_err("plain HTTP to an HTTPS listener fails");
    assert!(!e.is_timeout(), "refused at once, not left hanging: {e:?}");
    // The bytes it gets back, if any, are not HTTP.
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut back = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut back))
        .await
        .expect("the server closes the connection")
        .ok();
    assert!(
        !back.starts_with(b"HTTP/"),
        "{:?}",
        String::from_utf8_lossy(&back)
    );

    // And the server goes on serving HTTPS.
    assert_eq!(get(&https, addr, "/healthz").await.unwrap().0, 200);
    let m = metrics(&https, addr).await;
    assert!(metric(&m, "vnfm_tls_handshake_failures_total") >= 2, "{m}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_connection_that_never_handshakes_is_closed_at_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca("vnfm test server CA");
    let files = write_files(dir.path(), &server_leaf(&ca), "");
    let mut c = config(dir.path(), &files, false);
    c.server.header_timeout = 1;
    let server = start(c).await;
    let addr = server.local_addr();
    // One opens TCP and sends nothing; another sends the first bytes of a TLS record (a
    // ClientHello that never ends).
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut partial = tokio::net::TcpStream::connect(addr).await.unwrap();
    partial
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .unwrap();
    for s in [&mut silent, &mut partial] {
        let mut buf = Vec::new();
        // Far beyond the 1 s deadline: a connection held for good would hang here.
        tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
            .await
            .expect("closed by the server at the header timeout")
            .ok();
    }
    let m = metrics(&client(&ca, None), addr).await;
    assert_eq!(
        metric(
            &m,
            "vnfm_http_connections_closed_total{reason=\"header_timeout\"}"
        ),
        2,
        "{m}"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn mutual_tls_serves_a_client_signed_by_client_ca_and_refuses_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let server_ca = ca("vnfm test server CA");
    let clients_ca = ca("vnfm test client CA");
    let other_ca = ca("someone else's CA");
    let files = write_files(dir.path(), &server_leaf(&server_ca), &clients_ca.pem());
    let server = start(config(dir.path(), &files, true)).await;
    let addr = server.local_addr();

    let good = client(&server_ca, Some(&client_leaf(&clients_ca)));
    assert_eq!(
        get(&good, addr, "/vnflcm/v2/api_versions").await.unwrap().0,
        200
    );

    // No client certificate: the handshake is refused (TLS 1.3 "certificate required").
    let e = get(&client(&server_ca, None), addr, "/vnflcm/v2/api_versions")
        .await
        .expect_err("a client without a certificate is refused");
    let text = chain(&e);
    assert!(text.contains("CertificateRequired"), "{text}");

    // A certificate of another CA: refused the same way (the CA is unknown).
    let e = get(
        &client(&server_ca, Some(&client_leaf(&other_ca))),
        addr,
        "/vnflcm/v2/api_versions",
    )
    .await
    .expect_err("a client of another CA is refused");
    let text = chain(&e);
    assert!(
        text.contains("UnknownCA") || text.contains("BadCertificate"),
        "{text}"
    );

    let m = metrics(&good, addr).await;
    assert_eq!(metric(&m, "vnfm_tls_handshake_failures_total"), 2, "{m}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_replaced_certificate_is_served_after_the_reload_and_a_broken_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca("vnfm test server CA");
    let first = server_leaf(&ca);
    let files = write_files(dir.path(), &first, "");
    let server = start(config(dir.path(), &files, false)).await;
    let addr = server.local_addr();
    let c = client(&ca, None);
    assert_eq!(get(&c, addr, "/healthz").await.unwrap().1, first.der);

    // A new pair, each file renamed into place: new connections get the new certificate.
    let second = server_leaf(&ca);
    assert_ne!(second.der, first.der);
    replace(&files.key, &second.key);
    replace(&files.cert, &second.cert);
    let (status, peer) = get(&c, addr, "/healthz").await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(peer, second.der, "the replaced certificate is served");

    // A certificate whose key is not the one beside it: refused, the pair in use stays.
    let third = server_leaf(&ca);
    replace(&files.cert, &third.cert);
    let (status, peer) = get(&c, addr, "/healthz").await.unwrap();
    assert_eq!((status, peer), (200, second.der.clone()));
    // Garbage in the key file: refused too.
    replace(&files.key, "not a key\n");
    assert_eq!(get(&c, addr, "/healthz").await.unwrap().1, second.der);
    let m = metrics(&c, addr).await;
    assert_eq!(
        metric(&m, "vnfm_tls_reloads_total{outcome=\"ok\"}"),
        1,
        "{m}"
    );
    assert_eq!(
        metric(&m, "vnfm_tls_reloads_total{outcome=\"refused\"}"),
        2,
        "{m}"
    );

    // Its key put in place: served.
    replace(&files.key, &third.key);
    assert_eq!(get(&c, addr, "/healthz").await.unwrap().1, third.der);

    // SIGHUP's path reads the files whatever their stamps. A file rewritten in place with the
    // same size and modification time is not seen as a change (padded PEM, mtime put back);
    // SIGHUP (here `reload_tls`, what the handler calls) reads it all the same.
    const SIZE: usize = 4096;
    let pad = |pem: &str| format!("{pem}{}", "\n".repeat(SIZE - pem.len()));
    replace(&files.cert, &pad(&third.cert));
    replace(&files.key, &pad(&third.key));
    assert_eq!(get(&c, addr, "/healthz").await.unwrap().1, third.der);
    let fourth = server_leaf(&ca);
    for (path, pem) in [(&files.cert, &fourth.cert), (&files.key, &fourth.key)] {
        let modified = std::fs::metadata(path).unwrap().modified().unwrap();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)
            .unwrap();
        use std::io::Write as _;
        (&f).write_all(pad(pem).as_bytes()).unwrap();
        f.set_modified(modified).unwrap();
    }
    assert_eq!(
        get(&c, addr, "/healthz").await.unwrap().1,
        third.der,
        "same size, time and file: no change seen"
    );
    server.reload_tls();
    assert_eq!(get(&c, addr, "/healthz").await.unwrap().1, fourth.der);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_tls_files_stop_the_server_with_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = ca("vnfm test server CA");
    let good = server_leaf(&ca);
    let other = server_leaf(&ca);
    let files = write_files(d, &good, &ca.pem());
    let missing = d.join("missing.pem");
    let junk = d.join("junk.pem");
    std::fs::write(&junk, "just text, no PEM block\n").unwrap();
    let other_key = d.join("other.key");
    std::fs::write(&other_key, &other.key).unwrap();

    let start_with = |cert: &Path, key: &Path, client_ca: Option<&Path>| {
        let mut c = serve_common::config(d, 1);
        c.server.tls.cert = Some(cert.to_owned());
        c.server.tls.key = Some(key.to_owned());
        c.server.tls.client_ca = client_ca.map(Path::to_owned);
        async move { Server::start(c, true).await.unwrap_err().to_string() }
    };
    let cases: Vec<(String, Vec<String>)> = vec![
        (
            start_with(&missing, &files.key, None).await,
            vec![format!(
                "[server.tls] cert {}: cannot be read",
                missing.display()
            )],
        ),
        (
            start_with(&files.cert, &missing, None).await,
            vec![format!(
                "[server.tls] key {}: cannot be read",
                missing.display()
            )],
        ),
        (
            start_with(&junk, &files.key, None).await,
            vec![format!(
                "[server.tls] cert {}: no certificate",
                junk.display()
            )],
        ),
        (
            // The certificate file has no private key.
            start_with(&files.cert, &files.cert, None).await,
            vec![format!(
                "[server.tls] key {}: no private key",
                files.cert.display()
            )],
        ),
        (
            start_with(&files.cert, &other_key, None).await,
            vec![format!(
                "[server.tls] key {} does not match the certificate of cert {}",
                other_key.display(),
                files.cert.display()
            )],
        ),
        (
            start_with(&files.cert, &files.key, Some(&junk)).await,
            vec![format!(
                "[server.tls] client_ca {}: no certificate",
                junk.display()
            )],
        ),
        (
            start_with(&files.cert, &files.key, Some(&missing)).await,
            vec![format!(
                "[server.tls] client_ca {}: cannot be read",
                missing.display()
            )],
        ),
        (
            start_with(d, &files.key, None).await,
            vec![format!(
                "[server.tls] cert {}: is not a regular file",
                d.display()
            )],
        ),
    ];
    for (e, wants) in cases {
        for w in wants {
            assert!(e.contains(&w), "{e}\nexpected: {w}");
        }
    }
    // Half a pair is refused with the configuration itself.
    let e = Config::from_toml(Path::new("v.toml"), "[server.tls]\ncert = \"server.crt\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("[server.tls] has cert but no key"), "{e}");
}

/// What an HTTPS sink that requires client certificates received: (the client's certificate,
/// the method, the body).
type Got = std::sync::Arc<std::sync::Mutex<Vec<(Vec<u8>, String, Vec<u8>)>>>;

/// An HTTPS subscriber on loopback that requires a client certificate `clients` signed:
/// answers 204 to everything, and keeps what came.
async fn https_sink(server: &Leaf, clients: &CertifiedIssuer<'_, KeyPair>) -> (SocketAddr, Got) {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(clients.der().clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        std::sync::Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(server.der.clone())],
            PrivateKeyDer::from_pem_slice(server.key.as_bytes()).unwrap(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let got: Got = Default::default();
    let kept = got.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = l.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let got = kept.clone();
            tokio::spawn(async move {
                // A client without an accepted certificate ends here.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let peer = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(|c| c.to_vec())
                    .unwrap_or_default();
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let got = got.clone();
                        let peer = peer.clone();
                        async move {
                            let method = req.method().to_string();
                            let body = axum::body::to_bytes(
                                axum::body::Body::new(req.into_body()),
                                1 << 20,
                            )
                            .await
                            .unwrap_or_default();
                            got.lock().unwrap().push((peer, method, body.to_vec()));
                            Ok::<_, std::convert::Infallible>(
                                hyper::Response::builder()
                                    .status(204)
                                    .body(axum::body::Body::empty())
                                    .unwrap(),
                            )
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (addr, got)
}

#[tokio::test]
async fn a_tls_cert_subscription_is_delivered_presenting_the_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sink_ca = ca("subscriber's server CA");
    let vnfm_clients_ca = ca("CA of the VNFMs' client certificates");
    let vnfm_identity = client_leaf(&vnfm_clients_ca);
    let (sink, got) = https_sink(&server_leaf(&sink_ca), &vnfm_clients_ca).await;
    let cert = d.join("vnfm-client.crt");
    let key = d.join("vnfm-client.key");
    let roots = d.join("subscribers-ca.pem");
    std::fs::write(&cert, &vnfm_identity.cert).unwrap();
    std::fs::write(&key, &vnfm_identity.key).unwrap();
    std::fs::write(&roots, sink_ca.pem()).unwrap();
    let subscription = serde_json::json!({
        "callbackUri": format!("https://{sink}/cb"),
        "authentication": {"authType": ["TLS_CERT"]},
    });

    // Without a client certificate configured: 422 naming what is missing.
    let mut c = serve_common::config(d, 1);
    c.notifications.server_ca = Some(roots.clone());
    let server = start(c).await;
    let r = serve_common::post_json(
        server.local_addr(),
        "/vnflcm/v2/subscriptions",
        &subscription,
    )
    .await;
    let p = r.problem(422);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("[notifications] client_cert"),
        "{p}"
    );
    server.shutdown().await.unwrap();
    assert!(got.lock().unwrap().is_empty(), "nothing was sent");

    let mut c = serve_common::config(d, 1);
    c.notifications.client_cert = Some(cert.clone());
    c.notifications.client_key = Some(key.clone());
    c.notifications.server_ca = Some(roots.clone());
    let server = start(c).await;
    let addr = server.local_addr();
    // TLS_CERT with an http:// callback: 422 (no handshake to present a certificate in).
    let r = serve_common::post_json(
        addr,
        "/vnflcm/v2/subscriptions",
        &serde_json::json!({
            "callbackUri": format!("http://{sink}/cb"),
            "authentication": {"authType": ["TLS_CERT"]},
        }),
    )
    .await;
    r.problem(422);
    // The callback test (GET) and then the notifications come over mutual TLS.
    let r = serve_common::post_json(addr, "/vnflcm/v2/subscriptions", &subscription).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let r = serve_common::post_json(
        addr,
        "/vnflcm/v2/vnf_instances",
        &serde_json::json!({"vnfdId": serve_common::DEMO_VNFD}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let posts = serve_common::eventually(30, "the notification", || async {
        let g = got.lock().unwrap().clone();
        let posts: Vec<_> = g.into_iter().filter(|(_, m, _)| m == "POST").collect();
        (!posts.is_empty()).then_some(posts)
    })
    .await;
    let all = got.lock().unwrap().clone();
    assert!(
        all.iter().any(|(_, m, _)| m == "GET"),
        "the callback test came"
    );
    for (peer, _, _) in &all {
        assert_eq!(
            peer, &vnfm_identity.der,
            "every request presented vnfm's certificate"
        );
    }
    let n: serde_json::Value = serde_json::from_slice(&posts[0].2).unwrap();
    assert_eq!(
        n["notificationType"], "VnfIdentifierCreationNotification",
        "{n}"
    );
    server.shutdown().await.unwrap();

    // A bad client key stops the server at start, naming it.
    let mut c = serve_common::config(d, 1);
    c.notifications.client_cert = Some(cert.clone());
    c.notifications.client_key = Some(cert.clone());
    let e = Server::start(c, true).await.unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "[notifications] client_key {}: no private key",
            cert.display()
        )),
        "{e}"
    );
}

/// `POST https://addr/token` with the form `body` (no HTTP Basic): status and JSON.
async fn token_by_certificate(
    c: &reqwest::Client,
    addr: SocketAddr,
    body: &str,
) -> (u16, serde_json::Value) {
    let r = c
        .post(format!("https://{addr}/token"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or_default())
}

/// `GET https://addr/grant/v1/grants/grant-none` with `token`: the status and the body (a
/// 404 says the token was accepted, there being no such grant).
async fn grant_lookup(c: &reqwest::Client, addr: SocketAddr, token: &str) -> (u16, String) {
    let r = c
        .get(format!("https://{addr}/grant/v1/grants/grant-none"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Tacker's other NFVO mode (`[v2_nfvo] use_client_secret_basic = False`): the token request
/// carries only `client_id`, the client certificate authenticates it (RFC 8705
/// `tls_client_auth`), and the token is bound to that certificate.
#[tokio::test]
async fn a_client_certificate_obtains_a_token_bound_to_it_as_tackers_mtls_mode() {
    use vnfm_cli::config::OAuth2Client;
    let dir = tempfile::tempdir().unwrap();
    let server_ca = ca("vnfm test server CA");
    let clients_ca = ca("vnfm test client CA");
    let files = write_files(dir.path(), &server_leaf(&server_ca), &clients_ca.pem());
    let mut c = config(dir.path(), &files, true);
    c.server.oauth2.clients = vec![OAuth2Client {
        id: "tacker-mtls".into(),
        secret: None,
        tls_client_auth_subject_dn: Some("cn=Tacker.Example".into()),
        asynchronous: false,
    }];
    let server = start(c).await;
    let addr = server.local_addr();
    let tacker = client(&server_ca, Some(&client_leaf(&clients_ca)));

    let (status, body) = token_by_certificate(
        &tacker,
        addr,
        "grant_type=client_credentials&client_id=tacker-mtls",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    let token = body["access_token"].as_str().unwrap().to_owned();
    // Accepted on the Grant API over a connection with the same certificate (a new one:
    // the client keeps no connection alive).
    assert_eq!(grant_lookup(&tacker, addr, &token).await.0, 404);

    // Another certificate of the same CA (another subject): the TLS layer lets it in, the
    // token bound to Tacker's certificate is refused on it, and it obtains no token for
    // Tacker's client.
    let intruder = client(
        &server_ca,
        Some(&leaf(
            &clients_ca,
            "intruder.example",
            ExtendedKeyUsagePurpose::ClientAuth,
        )),
    );
    let (status, text) = grant_lookup(&intruder, addr, &token).await;
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("bound to a client certificate"), "{text}");
    let (status, body) = token_by_certificate(
        &intruder,
        addr,
        "grant_type=client_credentials&client_id=tacker-mtls",
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_client"))
    );

    // Tacker's certificate with an unknown client, or without client_id: invalid_client.
    for form in [
        "grant_type=client_credentials&client_id=someone",
        "grant_type=client_credentials",
    ] {
        let (status, body) = token_by_certificate(&tacker, addr, form).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (401, Some("invalid_client")),
            "{form}"
        );
    }
    // A client of certificates has no secret: HTTP Basic with any secret is refused.
    let r = tacker
        .post(format!("https://{addr}/token"))
        .basic_auth("tacker-mtls", Some(""))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    server.shutdown().await.unwrap();
}
