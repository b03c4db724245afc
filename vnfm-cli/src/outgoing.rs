//! Every outgoing HTTP request of `vnfm serve` goes through [`Outgoing`]: the SOL003 lifecycle
//! notifications and their callback test, the OAuth 2.0 token requests of their
//! subscriptions, the Promise notifications and the NFVO's Grant interface (`nfvo`). One rule,
//! stated here once:
//!
//! - **connections**: at most [`Outgoing::max_connections`] at once (`[notifications]
//!   max_connections`, default [`DEFAULT_MAX_CONNECTIONS`]), counted in the server's file
//!   descriptor budget beside `[server] max_connections`; none is kept alive after its answer
//!   (no idle pool: a connection holds a descriptor only while its request runs). A request
//!   waits for a free connection at most its own timeout.
//! - **timeouts**: every request, from the wait for a connection through the name's resolution
//!   to the last byte of its answer, within its [`Limits::timeout`];
//! - **answers**: a body is either not read at all ([`Body::Skip`]: the status is the answer;
//!   the connection is closed) or read as it streams up to [`Body::Read`]'s limit, and an
//!   answer past it is an error ([`Failure::TooLarge`]) the moment the limit is passed;
//! - **no redirects, no proxy** from the environment;
//! - **destinations**: a URL that a client gave ([`Destination::Client`]: `callbackUri`,
//!   `tokenEndpoint`, Promise callbacks) passes the [`Policy`] first: at most [`MAX_URL_BYTES`]
//!   long, `http` or `https`, and every address its host is (an IP literal in any spelling
//!   the URL standard reads: decimal, hex, octal IPv4, IPv4-mapped IPv6) or resolves to is
//!   checked; the request then goes to exactly the addresses checked (the name is resolved
//!   once, so a name that resolves elsewhere the second time, DNS rebinding, gains nothing).
//!   Refused by default: loopback, link-local (169.254.0.0/16, fe80::/10), cloud metadata
//!   addresses, unspecified (`0.0.0.0`, `::`, 0.0.0.0/8), multicast and broadcast;
//!   `[notifications] allow` (CIDRs and host names) permits what an operator needs. The
//!   server's own listen addresses (its port on any of its addresses) are refused always,
//!   whatever `allow` says.
//!   A URL the operator configured ([`Destination::Operator`]: `[grant] nfvo`) is not subject
//!   to the policy (the operator chose it, and an NFVO on the same host is a deployment
//!   vnfm supports), but takes the same connections, timeouts and answer limits.
//!
//! A [`Failure`] never holds the URL (reqwest's errors name it; they are stripped): callers
//! name the destination once, bounded by [`shown`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{StatusCode, Url};
use tokio::sync::Semaphore;

/// The longest URL a client may give (`callbackUri`, `tokenEndpoint`, Promise
/// `callbackUri`), in bytes.
pub const MAX_URL_BYTES: usize = 2048;

/// The default `[notifications] max_connections`: outgoing connections open at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 8;

/// The longest a host name's resolution may take (within a request's own timeout too).
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// How many characters of a URL a log line shows ([`shown`]).
pub const SHOWN_CHARS: usize = 120;

/// Addresses of cloud metadata services outside the link-local ranges (Alibaba Cloud's
/// `100.100.100.200`, Azure's WireServer `168.63.129.16`, AWS's IPv6 `fd00:ec2::254`).
const METADATA: [IpAddr; 3] = [
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
];

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// A URL a client gave: the [`Policy`] applies.
    Client,
    /// A URL a client gave whose subscription asked for `TLS_CERT`: as [`Destination::Client`],
    /// over HTTPS only, presenting the client certificate of [`Outgoing::with_tls`].
    ClientCertificate,
    /// A URL of the configuration (`[grant] nfvo`): no policy, the same limits.
    Operator,
}

/// What to do with an answer's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// Not read: the status and headers are the answer (the connection is closed).
    Skip,
    /// Read up to this many bytes; more is [`Failure::TooLarge`].
    Read(usize),
}

/// The limits of one request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The whole request: the wait for a connection, the resolution, the answer's last byte.
    pub timeout: Duration,
    /// The answer's body.
    pub body: Body,
}

/// An answer.
#[derive(Debug)]
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body (empty with [`Body::Skip`]).
    pub body: Vec<u8>,
}

/// Why a request has no answer. The messages never hold the URL.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Failure {
    /// The [`Policy`] refuses the destination; nothing was sent.
    #[error("refused by the destination policy: {0}")]
    Refused(String),
    /// No connection, no answer, or an answer that broke off.
    #[error("{0}")]
    Failed(String),
    /// Not done within [`Limits::timeout`].
    #[error("no answer within {0} s")]
    Timeout(u64),
    /// The answer's body is longer than [`Body::Read`]'s limit.
    #[error("the answer ({status}) has a body of more than {limit} bytes")]
    TooLarge {
        /// The answer's status.
        status: u16,
        /// The limit.
        limit: usize,
    },
}

/// At most [`SHOWN_CHARS`] characters of `url`, for a log line (control characters escaped
/// by the logger).
pub fn shown(url: &str) -> String {
    if url.chars().count() <= SHOWN_CHARS {
        return url.to_owned();
    }
    let head: String = url.chars().take(SHOWN_CHARS).collect();
    format!("{head}… ({} bytes)", url.len())
}

/// An entry of `[notifications] allow`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Allowed {
    /// A network: an address and a prefix length.
    Net(IpAddr, u8),
    /// A host name (lower case, no final dot): permitted whatever it resolves to.
    Name(String),
}

/// The destination policy of client-given URLs (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Policy {
    allow: Vec<Allowed>,
    /// The server's listen addresses.
    own: Vec<SocketAddr>,
}

/// The IPv4 address an IPv6 address stands for (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible
/// `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`), or the address itself.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    let [.., a, b, c, d] = v6.octets();
    let embedded = Ipv4Addr::new(a, b, c, d);
    let compatible = s[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified();
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    if compatible || nat64 {
        IpAddr::V4(embedded)
    } else {
        ip
    }
}

/// Why `ip` (canonical) is refused by default, if it is.
fn refused_class(ip: IpAddr) -> Option<&'static str> {
    if METADATA.contains(&ip) {
        return Some("a cloud metadata address");
    }
    match ip {
        IpAddr::V4(v4) => {
            if v4.is_loopback() {
                Some("a loopback address")
            } else if v4.is_link_local() {
                Some("a link-local address (cloud metadata among them)")
            } else if v4.is_unspecified() || v4.octets()[0] == 0 {
                Some("an unspecified address (0.0.0.0/8)")
            } else if v4.is_multicast() {
                Some("a multicast address")
            } else if v4.is_broadcast() {
                Some("the broadcast address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_loopback() {
                Some("a loopback address")
            } else if v6.is_unspecified() {
                Some("an unspecified address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else if v6.segments()[0] & 0xffc0 == 0xfe80 {
                Some("a link-local address")
            } else {
                None
            }
        }
    }
}

/// Whether `ip` is in `net/prefix`.
fn in_net(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// The IP address `url`'s host is, `None` for a name, `Err` for no host. The URL parser has
/// already read every spelling of an IPv4 address (decimal, hex, octal, short forms) into
/// the dotted one.
fn literal(url: &Url) -> Result<Option<IpAddr>, ()> {
    let host = url.host_str().ok_or(())?;
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6
            .parse::<Ipv6Addr>()
            .map(|ip| Some(IpAddr::V6(ip)))
            .map_err(|_| ());
    }
    Ok(host.parse::<Ipv4Addr>().ok().map(IpAddr::V4))
}

/// Whether `ip` is an address of this host (a socket can be bound to it).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || std::net::UdpSocket::bind((ip, 0)).is_ok()
}

impl Policy {
    /// The policy of `[notifications] allow`: each entry a CIDR (`10.0.0.0/8`, `::1/128`), an
    /// address (`127.0.0.1`, a /32 or /128) or a host name (`nfvo.example`, `localhost`).
    ///
    /// # Errors
    /// An entry that is none of these, naming it.
    pub fn new(allow: &[String]) -> Result<Policy, String> {
        let mut out = Vec::new();
        for entry in allow {
            let bad = |why: &str| {
                format!(
                    "[notifications] allow: {entry:?} {why}; expected a CIDR (10.0.0.0/8, \
                     ::1/128), an address or a host name"
                )
            };
            let e = entry.trim();
            if let Some((addr, prefix)) = e.split_once('/') {
                let ip: IpAddr = addr
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| bad("has no address before its /"))?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let prefix: u8 =
                    prefix.parse().ok().filter(|p| *p <= max).ok_or_else(|| {
                        bad(&format!("has a prefix length that is not 0 to {max}"))
                    })?;
                out.push(Allowed::Net(canonical(ip), prefix));
            } else if let Ok(ip) = e.trim_start_matches('[').trim_end_matches(']').parse() {
                let ip = canonical(ip);
                out.push(Allowed::Net(ip, if ip.is_ipv4() { 32 } else { 128 }));
            } else {
                let name = e.trim_end_matches('.').to_ascii_lowercase();
                let plain = !name.is_empty()
                    && name.len() <= 253
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
                if !plain {
                    return Err(bad("is not a host name"));
                }
                out.push(Allowed::Name(name));
            }
        }
        Ok(Policy {
            allow: out,
            own: Vec::new(),
        })
    }

    /// The policy, with the server's listen addresses.
    #[must_use]
    pub fn listening_on(mut self, own: Vec<SocketAddr>) -> Policy {
        self.own = own;
        self
    }

    fn allows_name(&self, name: &str) -> bool {
        let name = name.trim_end_matches('.');
        self.allow
            .iter()
            .any(|a| matches!(a, Allowed::Name(n) if n.eq_ignore_ascii_case(name)))
    }

    /// Whether `to` is the server itself: its listen port on one of its addresses.
    fn is_own(&self, to: SocketAddr) -> bool {
        let ip = canonical(to.ip());
        self.own.iter().any(|l| {
            let lip = canonical(l.ip());
            l.port() == to.port()
                && (lip == ip
                    // 0.0.0.0 and :: reach the host's own sockets.
                    || ip.is_unspecified()
                    || (lip.is_unspecified() && is_local(ip)))
        })
    }

    /// Why `to` is refused (`by_name`: the URL's host name is in `allow`), if it is.
    fn refusal(&self, to: SocketAddr, by_name: bool) -> Option<String> {
        if self.is_own(to) {
            return Some(format!("{to} is this server's own listen address"));
        }
        if by_name {
            return None;
        }
        let ip = canonical(to.ip());
        if self
            .allow
            .iter()
            .any(|a| matches!(a, Allowed::Net(n, p) if in_net(ip, *n, *p)))
        {
            return None;
        }
        refused_class(ip).map(|c| {
            format!(
                "{} is {c}, which [notifications] allow does not permit",
                to.ip()
            )
        })
    }

    /// Checks `url` (see the module docs) and returns the addresses to connect to.
    async fn check(&self, url: &Url) -> Result<Vec<SocketAddr>, Failure> {
        let refused = |m: String| Err(Failure::Refused(m));
        if url.as_str().len() > MAX_URL_BYTES {
            return refused(format!("the URL is longer than {MAX_URL_BYTES} bytes"));
        }
        if !matches!(url.scheme(), "http" | "https") {
            return refused(format!("scheme {:?}; expected http or https", url.scheme()));
        }
        let Some(port) = url.port_or_known_default() else {
            return refused("the URL has no port".into());
        };
        let (addrs, by_name) = match literal(url) {
            Err(()) => return refused("the URL has no host".into()),
            Ok(Some(ip)) => (vec![SocketAddr::new(ip, port)], false),
            Ok(None) => {
                let name = url.host_str().unwrap_or_default();
                let addrs: Vec<SocketAddr> =
                    tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((name, port)))
                        .await
                        .map_err(|_| Failure::Timeout(RESOLVE_TIMEOUT.as_secs()))?
                        .map_err(|e| {
                            Failure::Failed(format!("the host name does not resolve: {e}"))
                        })?
                        .collect();
                if addrs.is_empty() {
                    return Err(Failure::Failed("the host name resolves to nothing".into()));
                }
                (addrs, self.allows_name(name))
            }
        };
        for a in &addrs {
            if let Some(why) = self.refusal(*a, by_name) {
                return refused(why);
            }
        }
        Ok(addrs)
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct Outgoing {
    permits: Arc<Semaphore>,
    max: usize,
    policy: RwLock<Policy>,
    /// The client of operator destinations (no policy, no idle pool).
    operator: reqwest::Client,
    /// `[notifications] client_cert` / `client_key`: presented to [`Destination::ClientCertificate`].
    identity: Option<reqwest::Identity>,
    /// `[notifications] server_ca`: trusted beside the built-in roots, by every client.
    roots: Vec<reqwest::Certificate>,
}

/// A client builder with the rules every request follows (no proxy, no redirects, no idle
/// connection kept, HTTP/1.1).
fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .http1_only()
}

fn build(b: reqwest::ClientBuilder) -> Result<reqwest::Client, String> {
    b.build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// A reqwest error without its URL.
fn failed(e: reqwest::Error) -> Failure {
    let e = e.without_url();
    let mut m = if e.is_connect() {
        "cannot connect".to_owned()
    } else if e.is_timeout() {
        "no answer in time".to_owned()
    } else {
        "cannot send or read".to_owned()
    };
    // The chain of causes says what happened (refused, reset, TLS ...).
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        m.push_str(": ");
        m.push_str(&s.to_string());
        source = s.source();
    }
    Failure::Failed(m)
}

impl Outgoing {
    /// At most `max_connections` connections at once, client destinations under `policy`.
    ///
    /// # Errors
    /// The HTTP client cannot be built (its TLS backend).
    pub fn new(policy: Policy, max_connections: usize) -> Result<Outgoing, String> {
        let max = max_connections.max(1);
        Ok(Outgoing {
            permits: Arc::new(Semaphore::new(max)),
            max,
            policy: RwLock::new(policy),
            operator: build(builder())?,
            identity: None,
            roots: Vec::new(),
        })
    }

    /// The client certificate presented to [`Destination::ClientCertificate`] (`None`: such a
    /// request fails), and CA certificates trusted beside the built-in roots.
    ///
    /// # Errors
    /// The HTTP client cannot be built with them.
    pub fn with_tls(
        mut self,
        identity: Option<reqwest::Identity>,
        roots: Vec<reqwest::Certificate>,
    ) -> Result<Outgoing, String> {
        self.identity = identity;
        self.roots = roots;
        self.operator = build(self.with_roots(builder()))?;
        Ok(self)
    }

    /// Whether a client certificate is configured (`TLS_CERT` subscriptions can be served).
    pub fn has_client_certificate(&self) -> bool {
        self.identity.is_some()
    }

    fn with_roots(&self, mut b: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        for c in &self.roots {
            b = b.add_root_certificate(c.clone());
        }
        b
    }

    /// The most connections open at once.
    pub fn max_connections(&self) -> usize {
        self.max
    }

    /// Sets the server's listen addresses (known once it is bound), always refused.
    pub fn listening_on(&self, own: Vec<SocketAddr>) {
        let mut p = self.policy.write().unwrap_or_else(PoisonError::into_inner);
        p.own = own;
    }

    fn policy(&self) -> Policy {
        self.policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Checks a client-given `url` against the policy without sending anything (the host
    /// name is resolved).
    ///
    /// # Errors
    /// [`Failure::Refused`], or [`Failure::Failed`] for a URL that does not parse or a name
    /// that does not resolve.
    pub async fn check(&self, url: &str) -> Result<(), Failure> {
        let u = Url::parse(url).map_err(|e| Failure::Refused(format!("not a URL: {e}")))?;
        self.policy().check(&u).await.map(|_| ())
    }

    /// Sends the request `build` makes (over the client it is given, to the URL it is given)
    /// to `url`, within `limits`.
    ///
    /// # Errors
    /// See [`Failure`].
    pub async fn send(
        &self,
        to: Destination,
        url: &str,
        limits: Limits,
        build_request: impl FnOnce(&reqwest::Client, Url) -> reqwest::RequestBuilder,
    ) -> Result<Answer, Failure> {
        let secs = limits.timeout.as_secs().max(1);
        tokio::time::timeout(
            limits.timeout,
            self.exchange(to, url, limits, build_request),
        )
        .await
        .unwrap_or(Err(Failure::Timeout(secs)))
    }

    async fn exchange(
        &self,
        to: Destination,
        url: &str,
        limits: Limits,
        build_request: impl FnOnce(&reqwest::Client, Url) -> reqwest::RequestBuilder,
    ) -> Result<Answer, Failure> {
        let u = Url::parse(url).map_err(|e| match to {
            Destination::Client | Destination::ClientCertificate => {
                Failure::Refused(format!("not a URL: {e}"))
            }
            Destination::Operator => Failure::Failed(format!("not a URL: {e}")),
        })?;
        // The permit is held until the answer is read (or dropped): the connection's life.
        let _permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Failure::Failed("the outgoing connections are closed".into()))?;
        let client = match to {
            Destination::Operator => self.operator.clone(),
            Destination::Client | Destination::ClientCertificate => {
                let addrs = self.policy().check(&u).await?;
                let mut b = self.with_roots(builder());
                if to == Destination::ClientCertificate {
                    let id = self.identity.clone().ok_or_else(|| {
                        Failure::Failed(
                            "no client certificate ([notifications] client_cert and client_key) \
                             for a TLS_CERT subscriber"
                                .into(),
                        )
                    })?;
                    b = b.identity(id).https_only(true);
                }
                if let (Ok(None), Some(name)) = (literal(&u), u.host_str()) {
                    // Exactly the addresses checked: no second resolution.
                    b = b.resolve_to_addrs(name, &addrs);
                }
                build(b).map_err(Failure::Failed)?
            }
        };
        let mut r = build_request(&client, u)
            .timeout(limits.timeout)
            .send()
            .await
            .map_err(failed)?;
        let status = r.status();
        let headers = std::mem::take(r.headers_mut());
        let mut body = Vec::new();
        if let Body::Read(limit) = limits.body {
            while let Some(c) = r.chunk().await.map_err(failed)? {
                if body.len() + c.len() > limit {
                    return Err(Failure::TooLarge {
                        status: status.as_u16(),
                        limit,
                    });
                }
                body.extend_from_slice(&c);
            }
        }
        Ok(Answer {
            status,
            headers,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    async fn refused(p: &Policy, u: &str) -> String {
        match p.check(&url(u)).await {
            Err(Failure::Refused(m)) => m,
            other => panic!("{u}: {other:?}"),
        }
    }

    #[tokio::test]
    async fn every_spelling_of_loopback_is_refused_by_default() {
        let p = Policy::new(&[]).unwrap();
        for u in [
            "http://127.0.0.1:8080/cb",
            "http://127.1/cb",
            "http://2130706433/cb",
            "http://0x7f000001/cb",
            "http://017700000001/cb",
            "http://[::1]/cb",
            "http://[::ffff:127.0.0.1]/cb",
            "http://[::ffff:7f00:1]/cb",
            "http://[64:ff9b::7f00:1]/cb",
            "http://localhost/cb",
            "http://LOCALHOST/cb",
        ] {
            let m = refused(&p, u).await;
            assert!(m.contains("loopback"), "{u}: {m}");
        }
        for (u, class) in [
            ("http://0.0.0.0/cb", "unspecified"),
            ("http://0/cb", "unspecified"),
            ("http://[::]/cb", "unspecified"),
            ("http://169.254.169.254/latest/meta-data", "link-local"),
            ("http://[fe80::1]/cb", "link-local"),
            ("http://100.100.100.200/", "metadata"),
            ("http://[fd00:ec2::254]/", "metadata"),
            ("http://224.0.0.1/", "multicast"),
            ("http://[ff02::1]/", "multicast"),
            ("http://255.255.255.255/", "broadcast"),
        ] {
            let m = refused(&p, u).await;
            assert!(m.contains(class), "{u}: {m}");
        }
        // Other schemes and overlong URLs.
        assert!(refused(&p, "ftp://10.0.0.1/").await.contains("scheme"));
        let long = format!("http://10.0.0.1/{}", "a".repeat(MAX_URL_BYTES));
        assert!(refused(&p, &long).await.contains("longer"));
        // A private address is an NFVO's usual home.
        assert!(p.check(&url("http://10.1.2.3:8080/cb")).await.is_ok());
    }

    #[tokio::test]
    async fn allow_permits_networks_and_names_but_never_the_server_itself() {
        let p = Policy::new(&["127.0.0.0/8".into(), "::1".into()])
            .unwrap()
            .listening_on(vec!["127.0.0.1:9890".parse().unwrap()]);
        assert!(p.check(&url("http://127.0.0.1:8080/cb")).await.is_ok());
        assert!(p.check(&url("http://[::1]:8080/cb")).await.is_ok());
        assert!(p.check(&url("http://2130706433:8080/cb")).await.is_ok());
        for u in [
            "http://127.0.0.1:9890/admin/packages/reload",
            "http://2130706433:9890/",
            "http://[::ffff:127.0.0.1]:9890/",
            "http://0.0.0.0:9890/",
        ] {
            assert!(refused(&p, u).await.contains("own listen address"), "{u}");
        }
        // 169.254.x stays refused.
        assert!(refused(&p, "http://169.254.169.254/")
            .await
            .contains("link-local"));
        let by_name = Policy::new(&["localhost".into()])
            .unwrap()
            .listening_on(vec!["0.0.0.0:9890".parse().unwrap()]);
        assert!(by_name.check(&url("http://localhost:8080/")).await.is_ok());
        assert!(refused(&by_name, "http://127.0.0.1:8080/")
            .await
            .contains("loopback"));
        assert!(refused(&by_name, "http://localhost:9890/")
            .await
            .contains("own listen address"));
        for bad in ["10.0.0.0/33", "/8", "a b", "x/y", ""] {
            let e = Policy::new(&[bad.into()]).unwrap_err();
            assert!(e.contains("[notifications] allow"), "{e}");
        }
    }

    #[test]
    fn shown_urls_are_bounded() {
        assert_eq!(shown("http://a/cb"), "http://a/cb");
        let long = format!("http://a/{}", "x".repeat(1 << 20));
        let s = shown(&long);
        assert!(s.len() < 200 && s.contains("1048585 bytes"), "{s}");
    }
}
