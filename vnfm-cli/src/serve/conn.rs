//! The connections of `vnfm serve`: the accept loop, the deadlines of a connection
//! (`[server] header_timeout`, `idle_timeout`) and the cap (`[server] max_connections`).
//!
//! Each connection is an HTTP/1.1 connection (hyper) watched by its own task. It is in one of
//! three phases:
//! - *head*: it was just opened, or the first byte of its next request arrived: the request
//!   line and headers must be complete within `header_timeout`, whatever the pace of the bytes;
//! - *busy*: a request is handled (its body, its handler, its answer): this module never
//!   closes it then (the request's own limit is `request_timeout`, see [`super::limit`]);
//! - *idle*: kept alive between two requests, nothing received: closed after `idle_timeout`.
//!
//! At most `max_connections` are open. A new connection beyond the cap closes one that has no
//! request in progress, in this order: a connection whose head is incomplete after every byte
//! it sent was read, or that has sent nothing for [`SPARED`]; then a kept-alive idle one; the
//! one that has waited longest first. A connection whose bytes are being read, or that was
//! opened less than [`SPARED`] ago and has sent nothing yet, is spared: a request that arrives
//! whole is read before its connection can be chosen. When no connection can be closed, the
//! next one is accepted once one can, or a request ends (it waits in the listen backlog
//! meanwhile). An accept that fails for want of file descriptors closes such a connection
//! too, and tries again shortly.
//!
//! So connections that send nothing, or their headers a byte at a time, hold a connection for
//! at most `header_timeout`, and never keep a request that arrives whole from being served.
//!
//! With `[server.tls]`, a connection is a TLS connection (`super::tls`): its handshake is part
//! of the head of its first request (within `header_timeout` of its opening, closed at the cap
//! as a slow head while the handshake waits for the client), and hyper reads the decrypted
//! stream. A handshake that fails closes the connection before any HTTP.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, Response};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::http::problem_of;
use super::peer::PeerCertificate;
use super::tls::Tls;
use super::wire::ProblemIo;

/// The limits of the connections (from `[server]`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// `header_timeout`.
    pub header: Duration,
    /// `idle_timeout`.
    pub idle: Duration,
    /// `max_connections` (effective).
    pub max: usize,
}

/// Why this module closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Closed {
    HeaderTimeout,
    IdleTimeout,
    /// Closed to make room for a new connection at the cap, or for want of file descriptors.
    Evicted,
    /// Closed at a stop of the server.
    Shutdown,
}

impl Closed {
    fn label(self) -> &'static str {
        match self {
            Closed::HeaderTimeout => "header_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::Evicted => "evicted",
            Closed::Shutdown => "shutdown",
        }
    }
}

/// How long a connection that has sent nothing yet is spared at the cap.
pub(crate) const SPARED: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for a request's line and headers since `since`: `read` once bytes of them
    /// arrived, `incomplete` once every byte received was parsed and the head is not whole.
    Head {
        since: Instant,
        read: bool,
        incomplete: bool,
    },
    Busy,
    Idle(Instant),
    Closed(Closed),
}

impl Phase {
    fn head(since: Instant, read: bool) -> Self {
        Phase::Head {
            since,
            read,
            incomplete: false,
        }
    }
}

/// Which connections are closed first at the cap (lowest first), and then the oldest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Victim {
    /// A head that is incomplete, or nothing sent for [`SPARED`].
    SlowHead,
    /// Kept alive between requests.
    Idle,
}

/// The phase of one connection, shared by its task, its IO and its service.
#[derive(Debug)]
struct Slot {
    phase: Mutex<Phase>,
    /// Wakes the connection's task when its deadline moved or it was closed.
    changed: Notify,
    /// Wakes the accept loop when the connection may be closed to make room.
    evictable: Arc<Notify>,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes arrived: an idle connection starts the head of its next request.
    fn received(&self) {
        let mut p = self.lock();
        match *p {
            Phase::Idle(_) => {
                *p = Phase::head(Instant::now(), true);
                drop(p);
                self.changed.notify_one();
            }
            Phase::Head {
                since, read: false, ..
            } => *p = Phase::head(since, true),
            _ => {}
        }
    }

    /// The connection's task parsed every byte received so far: a head that is read but not
    /// whole is incomplete.
    fn settled(&self) {
        let mut p = self.lock();
        if let Phase::Head {
            since,
            read: true,
            incomplete: false,
        } = *p
        {
            *p = Phase::Head {
                since,
                read: true,
                incomplete: true,
            };
            drop(p);
            self.evictable.notify_one();
        }
    }

    /// The TLS handshake is over: the head of the first request starts, as on a connection
    /// that has sent nothing yet (its deadline still counts from the opening).
    fn handshaken(&self) {
        let mut p = self.lock();
        if let Phase::Head { since, .. } = *p {
            *p = Phase::head(since, false);
        }
    }

    /// A request's head is complete: busy, unless the connection was closed.
    fn start_request(&self) -> bool {
        let mut p = self.lock();
        match *p {
            Phase::Closed(_) => false,
            _ => {
                *p = Phase::Busy;
                true
            }
        }
    }

    /// The request's answer is ready: idle.
    fn end_request(&self) {
        let mut p = self.lock();
        if let Phase::Busy = *p {
            *p = Phase::Idle(Instant::now());
            drop(p);
            self.changed.notify_one();
            self.evictable.notify_one();
        }
    }

    /// Closes the connection for `why` unless a request is in progress on it; whether it did.
    fn close(&self, why: Closed) -> bool {
        let mut p = self.lock();
        match *p {
            Phase::Head { .. } | Phase::Idle(_) => {
                *p = Phase::Closed(why);
                drop(p);
                self.changed.notify_one();
                true
            }
            Phase::Busy | Phase::Closed(_) => false,
        }
    }

    /// Whether (and how early) it may be closed at the cap now: `Ok(key)`, lowest first; else
    /// `Err(when)` it may be, if only time is missing.
    fn victim(&self, now: Instant) -> Result<(Victim, Instant), Option<Instant>> {
        match *self.lock() {
            Phase::Head {
                since,
                incomplete: true,
                ..
            } => Ok((Victim::SlowHead, since)),
            Phase::Head {
                since, read: false, ..
            } => {
                if now >= since + SPARED {
                    Ok((Victim::SlowHead, since))
                } else {
                    Err(Some(since + SPARED))
                }
            }
            Phase::Idle(t) => Ok((Victim::Idle, t)),
            Phase::Head { .. } | Phase::Busy | Phase::Closed(_) => Err(None),
        }
    }

    fn closed(&self) -> Option<Closed> {
        match *self.lock() {
            Phase::Closed(c) => Some(c),
            _ => None,
        }
    }

    /// When the current phase ends the connection.
    fn deadline(&self, l: &Limits) -> Option<Instant> {
        match *self.lock() {
            Phase::Head { since, .. } => Some(since + l.header),
            Phase::Idle(t) => Some(t + l.idle),
            Phase::Busy | Phase::Closed(_) => None,
        }
    }

    /// Closes the connection when its phase's deadline has passed; why, if it did.
    fn expire(&self, l: &Limits, now: Instant) -> Option<Closed> {
        let mut p = self.lock();
        let why = match *p {
            Phase::Head { since, .. } if now >= since + l.header => Closed::HeaderTimeout,
            Phase::Idle(t) if now >= t + l.idle => Closed::IdleTimeout,
            Phase::Closed(c) => return Some(c),
            _ => return None,
        };
        *p = Phase::Closed(why);
        Some(why)
    }
}

/// What [`Connections::make_room`] did.
#[derive(Debug)]
enum Room {
    /// A connection was closed, or fewer than the room are open: a permit comes.
    Made,
    /// None can be closed now; one may be at this time (`None`: when a request ends, or a
    /// head turns out slow).
    Later(Option<Instant>),
}

/// The open connections and the counters of `/metrics`.
#[derive(Debug)]
pub(crate) struct Connections {
    limits: Limits,
    slots: Mutex<HashMap<u64, Arc<Slot>>>,
    next_id: AtomicU64,
    evictable: Arc<Notify>,
    closed: Mutex<BTreeMap<Closed, u64>>,
    accept_errors: AtomicU64,
    accepted: AtomicUsize,
    /// `[server.tls]`: HTTPS only, with this acceptor.
    tls: Option<Arc<Tls>>,
}

impl Connections {
    pub(crate) fn new(limits: Limits, tls: Option<Arc<Tls>>) -> Self {
        Self {
            limits,
            slots: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            evictable: Arc::new(Notify::new()),
            closed: Mutex::new(BTreeMap::new()),
            accept_errors: AtomicU64::new(0),
            accepted: AtomicUsize::new(0),
            tls,
        }
    }

    /// The TLS side, with `[server.tls]`.
    pub(crate) fn tls(&self) -> Option<&Arc<Tls>> {
        self.tls.as_ref()
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<u64, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self, why: Closed) {
        *self
            .closed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(why)
            .or_insert(0) += 1;
    }

    /// When the connections not yet closing fill `room`, closes one without a request in
    /// progress: a slow head before an idle connection, the one waiting longest first.
    fn make_room(&self, room: usize) -> Room {
        let now = Instant::now();
        let slots = self.slots();
        let live = slots.values().filter(|s| s.closed().is_none()).count();
        if live < room {
            return Room::Made;
        }
        let mut best: Option<((Victim, Instant), &Arc<Slot>)> = None;
        let mut wake: Option<Instant> = None;
        for s in slots.values() {
            match s.victim(now) {
                Ok(key) => {
                    if best.as_ref().is_none_or(|(k, _)| key < *k) {
                        best = Some((key, s));
                    }
                }
                Err(Some(at)) => wake = Some(wake.map_or(at, |w| w.min(at))),
                Err(None) => {}
            }
        }
        let victim = best.map(|(_, s)| s.clone());
        drop(slots);
        match victim {
            Some(s) if s.close(Closed::Evicted) => {
                self.count(Closed::Evicted);
                Room::Made
            }
            // Its phase changed meanwhile: look again at once.
            Some(_) => Room::Later(Some(now)),
            None => Room::Later(wake),
        }
    }

    /// Appends the connection series to a `/metrics` text.
    pub(crate) fn render_metrics(&self, s: &mut String) {
        let open = self.slots().len();
        let _ = writeln!(
            s,
            "# HELP vnfm_http_connections Open HTTP connections.\n\
             # TYPE vnfm_http_connections gauge\n\
             vnfm_http_connections {open}\n\
             # HELP vnfm_http_connections_max The most HTTP connections open at once \
             ([server] max_connections).\n\
             # TYPE vnfm_http_connections_max gauge\n\
             vnfm_http_connections_max {}\n\
             # HELP vnfm_http_connections_accepted_total HTTP connections accepted.\n\
             # TYPE vnfm_http_connections_accepted_total counter\n\
             vnfm_http_connections_accepted_total {}\n\
             # HELP vnfm_http_accept_errors_total Failed accepts of a connection (e.g. no file \
             descriptor left).\n\
             # TYPE vnfm_http_accept_errors_total counter\n\
             vnfm_http_accept_errors_total {}\n\
             # HELP vnfm_http_connections_closed_total HTTP connections the server closed \
             without a request in progress, by reason.\n\
             # TYPE vnfm_http_connections_closed_total counter",
            self.limits.max,
            self.accepted.load(Ordering::Relaxed),
            self.accept_errors.load(Ordering::Relaxed),
        );
        let closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        for why in [Closed::HeaderTimeout, Closed::IdleTimeout, Closed::Evicted] {
            let _ = writeln!(
                s,
                "vnfm_http_connections_closed_total{{reason=\"{}\"}} {}",
                why.label(),
                closed.get(&why).copied().unwrap_or(0)
            );
        }
        drop(closed);
        if let Some(tls) = &self.tls {
            tls.render_metrics(s);
        }
    }
}

/// A TCP stream that tells its slot when bytes arrive.
struct Watched {
    inner: TcpStream,
    slot: Arc<Slot>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.slot.received();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Marks its slot idle when the request's answer is ready (or the request is dropped).
struct Busy(Arc<Slot>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.end_request();
    }
}

/// The answer to a request whose head completed on a connection being closed: never
/// handled (nothing done); the connection goes.
fn closing() -> Response<Body> {
    let mut r = problem_of(
        503,
        "the server closed this connection to make room for others; nothing was done, send \
         the request again",
    );
    r.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    r
}

/// Serves `router` on `listener` until `stop` turns true, then lets the requests in progress
/// finish and returns once every connection is closed.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    conns: Arc<Connections>,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(conns.limits.max));
    let mut tasks = tokio::task::JoinSet::new();
    let mut last_error_log: Option<Instant> = None;
    loop {
        while tasks.try_join_next().is_some() {}
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors, most likely: close the connection that waited
                // longest, and try again shortly.
                conns.accept_errors.fetch_add(1, Ordering::Relaxed);
                if last_error_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    tracing::warn!(
                        "cannot accept a connection: {e}; closing the connection \
                         that waited longest (see [server] max_connections)"
                    );
                    last_error_log = Some(Instant::now());
                }
                let _ = conns.make_room(0);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(20)) => continue,
                    _ = stop.wait_for(|s| *s) => break,
                }
            }
        };
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => match room(&permits, &conns, &mut stop).await {
                Some(p) => p,
                None => break,
            },
        };
        conns.accepted.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        let id = conns.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            phase: Mutex::new(Phase::head(Instant::now(), false)),
            changed: Notify::new(),
            evictable: conns.evictable.clone(),
        });
        conns.slots().insert(id, slot.clone());
        // The files of [server.tls] are looked at (and read again when they changed) here.
        let acceptor = conns.tls.as_ref().map(|t| t.acceptor());
        tasks.spawn(connection(
            stream,
            acceptor,
            router.clone(),
            slot,
            id,
            conns.clone(),
            stop.clone(),
            permit,
        ));
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
}

/// A permit for one more connection: at the cap, closes a connection without a request in
/// progress (see [`Connections::make_room`]), or waits until one can be. `None` at a stop.
async fn room(
    permits: &Arc<Semaphore>,
    conns: &Connections,
    stop: &mut watch::Receiver<bool>,
) -> Option<OwnedSemaphorePermit> {
    loop {
        let evictable = conns.evictable.notified();
        let wake = match conns.make_room(conns.limits.max) {
            Room::Made => None,
            Room::Later(at) => at,
        };
        let later = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            p = permits.clone().acquire_owned() => return p.ok(),
            () = evictable => {}
            () = later => {}
            _ = stop.wait_for(|s| *s) => return None,
        }
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Serves one connection (after its TLS handshake with `acceptor`) until it ends, its
/// phase's deadline passes, it is closed to make room, or the server stops (then a request in
/// progress finishes first).
#[allow(clippy::too_many_arguments)]
async fn connection(
    stream: TcpStream,
    acceptor: Option<TlsAcceptor>,
    router: Router,
    slot: Arc<Slot>,
    id: u64,
    conns: Arc<Connections>,
    mut stop: watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
) {
    let watched = Watched {
        inner: stream,
        slot: slot.clone(),
    };
    match acceptor {
        None => serve_http(watched, router, None, &slot, &conns, &mut stop).await,
        Some(acceptor) => {
            if let Some(tls) = handshake(acceptor, watched, &slot, &conns, &mut stop).await {
                // The client certificate rustls verified (mutual TLS), for every request.
                let peer = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .and_then(|c| PeerCertificate::from_der(c.as_ref()))
                    .map(Arc::new);
                serve_http(tls, router, peer, &slot, &conns, &mut stop).await;
            }
        }
    }
    conns.slots().remove(&id);
    drop(permit);
}

/// The TLS handshake of a new connection, within the deadline of its first head: the stream,
/// or `None` when it failed, timed out, or the connection was closed meanwhile.
async fn handshake(
    acceptor: TlsAcceptor,
    watched: Watched,
    slot: &Slot,
    conns: &Connections,
    stop: &mut watch::Receiver<bool>,
) -> Option<TlsStream<Watched>> {
    let limits = conns.limits;
    let accept = acceptor.accept(watched);
    tokio::pin!(accept);
    loop {
        let changed = slot.changed.notified();
        let deadline = slot.deadline(&limits);
        let expiry = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        // A handshake waiting for the client after every byte it sent was read is slow.
        let shaken = std::future::poll_fn(|cx| {
            let r = accept.as_mut().poll(cx);
            if r.is_pending() {
                slot.settled();
            }
            r
        });
        tokio::select! {
            biased;
            () = changed => {
                if slot.closed().is_some() {
                    return None;
                }
            }
            () = expiry => {
                match slot.expire(&limits, Instant::now()) {
                    Some(Closed::Evicted | Closed::Shutdown) => return None,
                    Some(why) => {
                        conns.count(why);
                        return None;
                    }
                    None => {}
                }
            }
            _ = stop.wait_for(|s| *s) => {
                slot.close(Closed::Shutdown);
                return None;
            }
            r = shaken => {
                return match r {
                    Ok(s) => {
                        slot.handshaken();
                        Some(s)
                    }
                    Err(_) => {
                        if let Some(tls) = &conns.tls {
                            tls.handshake_failed();
                        }
                        None
                    }
                };
            }
        }
    }
}

/// Serves HTTP/1.1 on `stream` (see [`connection`]).
async fn serve_http<S>(
    stream: S,
    router: Router,
    peer: Option<Arc<PeerCertificate>>,
    slot: &Arc<Slot>,
    conns: &Connections,
    stop: &mut watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = conns.limits;
    let io = TokioIo::new(ProblemIo::new(stream));
    let svc = TowerToHyperService::new(router);
    let svc_slot = slot.clone();
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let slot = svc_slot.clone();
        let svc = svc.clone();
        if let Some(p) = &peer {
            req.extensions_mut().insert(p.clone());
        }
        async move {
            if !slot.start_request() {
                return Ok::<_, Infallible>(closing());
            }
            let _busy = Busy(slot);
            hyper::service::Service::call(&svc, req).await
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The deadlines are this module's (the phases above), not hyper's.
    builder.header_read_timeout(None);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        let changed = slot.changed.notified();
        let deadline = slot.deadline(&limits);
        let expiry = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        // hyper reads whatever has arrived before it returns pending: a head still incomplete
        // then is slow.
        let served = std::future::poll_fn(|cx| {
            let r = conn.as_mut().poll(cx);
            if r.is_pending() {
                slot.settled();
            }
            r
        });
        tokio::select! {
            // A connection closed meanwhile is not read again.
            biased;
            () = changed => {
                if slot.closed().is_some() {
                    break;
                }
            }
            () = expiry => {
                match slot.expire(&limits, Instant::now()) {
                    Some(Closed::Evicted | Closed::Shutdown) => break,
                    Some(why) => {
                        conns.count(why);
                        break;
                    }
                    None => {}
                }
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                if slot.close(Closed::Shutdown) {
                    break;
                }
                // A request is in progress: hyper closes the connection after its answer.
                conn.as_mut().graceful_shutdown();
            }
            // Ended by the client, or by an error of the connection (nothing to add).
            _ = served => break,
        }
    }
}
