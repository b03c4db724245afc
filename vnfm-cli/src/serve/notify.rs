//! Delivery of the SOL003 lifecycle notifications queued in the outbox (`subscriptions`):
//! one worker per subscription sends its notifications (`POST` to `callbackUri`, JSON, with the
//! subscription's authentication: `Authorization: Basic`, or a bearer token fetched from the
//! subscriber's token endpoint with the client credentials grant and kept until it expires),
//! and deletes each from the outbox once the callback answered 2xx.
//!
//! # What the delivery costs the operations
//! The workers read and delete on a connection of their own to the state file
//! (`App::delivery`; on PostgreSQL a pool of its own on the same database), so a thousand
//! subscribers' reads and removals never queue the operations' commits or the API's reads
//! (each SQLite connection takes one thread of the blocking pool at a time: `crate::store`). The removals of every worker go through one [`Remover`]:
//! the entries asked while a removal runs are deleted together in the next transaction.
//!
//! # Order, and what a failure holds back
//! The worker reads its outbox in bounded batches ([`BATCH`] entries), in commit order, and
//! makes each notification's first attempt in that order: a subscriber that accepts them gets
//! them in the order of the state changes. A failed attempt waits as the core's
//! [`RetryPolicy`] says (`[notifications]`); beyond `max_attempts` or `max_age` the notification
//! is dropped, logged and counted. What waits depends on the failure:
//! - the subscriber *answered* (404, 500, 503, ...): that notification is set aside on its own
//!   back-off and the ones after it go on. Order is not kept across retries, not even within
//!   one occurrence: an NFVO that refuses one notification (one it did not expect) would
//!   otherwise hold back every later one for the whole retry schedule. SOL003 leaves the NFVO
//!   to cope with notifications that race (the start notification, the grant request and the
//!   202 arrive in any order), sets the occurrence's state before notifying it, and each
//!   notification carries its `operationState` and `timeStamp`: the occurrence itself
//!   (`GET /vnf_lcm_op_occs/{id}`) says where it is.
//! - the subscriber could not be reached (no connection, no answer in time, no token): nothing
//!   of the subscription can go, so all of it waits on that notification's back-off (order
//!   kept), instead of each notification trying and timing out in turn.
//!
//! A stop leaves the queue in the state file; the next start delivers it. Every request
//! (notification, token, callback test) goes through the server's one outgoing client
//! (`crate::outgoing`: the destination policy, `[notifications] max_connections`, no
//! keep-alive, bounded answers).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::header;
use tokio::sync::{mpsc, oneshot, watch};
use vnfm_core::driver::DriverError;
use vnfm_core::lcm_notify::{Delivery, Retry, RetryPolicy};

use super::outbox::{
    all_of, outbox_prefix, sequence_of, subscription_of, Dropped, Queued, Sub, OUTBOX_PREFIX,
    SUBSCRIPTION_PREFIX,
};
use super::state::App;
use crate::outgoing::{shown, Body, Destination, Failure, Limits};
use crate::state_store::{Documents, StateStore};
use crate::store::Flush;

/// The largest answer read from a token endpoint (16 KiB: a token answer is a small JSON
/// object); a longer one fails the token request.
pub(crate) const TOKEN_ANSWER_BYTES: usize = 16 * 1024;

/// The limits of a notification, a callback test or a token request (`[notifications]
/// timeout`).
fn limits(app: &App, body: Body) -> Limits {
    Limits {
        timeout: Duration::from_secs(app.config.notifications.timeout),
        body,
    }
}

/// A cached OAuth 2.0 token.
#[derive(Debug, Default)]
struct Token {
    value: Option<(String, Instant)>,
}

/// Fetches a token (client credentials grant, RFC 6749 4.4, client authentication with HTTP
/// Basic, 2.3.1); the answer is read up to [`TOKEN_ANSWER_BYTES`].
async fn fetch_token(
    app: &App,
    endpoint: &str,
    id: &str,
    secret: &str,
) -> Result<(String, Option<u64>), Failure> {
    let a = app
        .outgoing
        .send(
            Destination::Client,
            endpoint,
            limits(app, Body::Read(TOKEN_ANSWER_BYTES)),
            |c, u| {
                c.post(u)
                    .basic_auth(id, Some(secret))
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .header(header::ACCEPT, "application/json")
                    .body("grant_type=client_credentials")
            },
        )
        .await?;
    let status = a.status.as_u16();
    if !(200..300).contains(&status) {
        return Err(Failure::Failed(format!(
            "the token endpoint answered {status}"
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&a.body)
        .map_err(|e| Failure::Failed(format!("the token endpoint answered no JSON: {e}")))?;
    let token = v["access_token"]
        .as_str()
        .ok_or_else(|| Failure::Failed("the token endpoint answered no access_token".into()))?;
    Ok((token.to_owned(), v["expires_in"].as_u64()))
}

impl Token {
    async fn get(
        &mut self,
        app: &App,
        endpoint: &str,
        id: &str,
        secret: &str,
    ) -> Result<String, Failure> {
        if let Some((t, until)) = &self.value {
            if Instant::now() < *until {
                return Ok(t.clone());
            }
        }
        let (t, expires_in) = fetch_token(app, endpoint, id, secret).await?;
        // A token without a lifetime is kept for a minute; one with one until 10 s before.
        let life = expires_in.map_or(60, |s| s.saturating_sub(10));
        self.value = Some((t.clone(), Instant::now() + Duration::from_secs(life)));
        Ok(t)
    }
}

/// The `Authorization` of `delivery`.
enum Auth {
    None,
    Basic(String, String),
    Bearer(String),
}

impl Auth {
    async fn of(app: &App, token: &mut Token, delivery: &Delivery) -> Result<Auth, Failure> {
        Ok(match delivery {
            // The client certificate authenticates (`destination`).
            Delivery::Plain | Delivery::TlsCert => Auth::None,
            Delivery::Basic { user, password } => Auth::Basic(user.clone(), password.clone()),
            Delivery::OAuth2 {
                client_id,
                client_password,
                token_endpoint,
            } => Auth::Bearer(
                token
                    .get(app, token_endpoint, client_id, client_password)
                    .await?,
            ),
        })
    }

    fn apply(self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Auth::None => rb,
            Auth::Basic(u, p) => rb.basic_auth(u, Some(p)),
            Auth::Bearer(t) => rb.bearer_auth(t),
        }
    }
}

/// Where the notifications of `delivery` go: presenting the client certificate for
/// `TLS_CERT`.
fn destination(delivery: &Delivery) -> Destination {
    match delivery {
        Delivery::TlsCert => Destination::ClientCertificate,
        _ => Destination::Client,
    }
}

/// Why a callback test did not pass: the destination policy refused a URL, or the test
/// failed. The 422 of each says only which (not what the target answered, which would make
/// vnfm a port scanner); the message here, logged, says more.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// `callbackUri` or `tokenEndpoint` is refused by the destination policy.
    Policy(String),
    /// The token request or the test `GET` failed, or did not answer 204.
    Failed(String),
}

impl From<Failure> for Refusal {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Refused(m) => Refusal::Policy(m),
            f => Refusal::Failed(f.to_string()),
        }
    }
}

/// SOL003 5.4.18.3.1: `GET callbackUri` must answer 204. Both URLs (`callbackUri` and
/// `tokenEndpoint`) pass the destination policy before anything is sent.
pub(crate) async fn test_callback(
    app: &App,
    uri: &str,
    delivery: &Delivery,
) -> Result<(), Refusal> {
    app.outgoing.check(uri).await?;
    if let Delivery::OAuth2 { token_endpoint, .. } = delivery {
        app.outgoing
            .check(token_endpoint)
            .await
            .map_err(|f| match f {
                Failure::Refused(m) => Refusal::Policy(format!("tokenEndpoint: {m}")),
                f => Refusal::Failed(format!("tokenEndpoint: {f}")),
            })?;
    }
    let mut token = Token::default();
    let auth = Auth::of(app, &mut token, delivery)
        .await
        .map_err(|f| match Refusal::from(f) {
            Refusal::Policy(m) => Refusal::Policy(format!("tokenEndpoint: {m}")),
            Refusal::Failed(m) => Refusal::Failed(format!("the token request: {m}")),
        })?;
    let a = app
        .outgoing
        .send(
            destination(delivery),
            uri,
            limits(app, Body::Skip),
            |c, u| auth.apply(c.get(u)),
        )
        .await?;
    match a.status.as_u16() {
        204 => Ok(()),
        s => Err(Refusal::Failed(format!("answered {s}"))),
    }
}

/// Why an attempt failed.
#[derive(Debug)]
struct AttemptFailure {
    /// The subscriber answered (a refusal of this notification); else it could not be
    /// reached.
    answered: bool,
    why: String,
}

/// One attempt: `Ok` for 2xx. A 401 forgets the cached token.
async fn attempt(
    app: &App,
    token: &mut Token,
    sub: &Sub,
    body: &[u8],
) -> Result<(), AttemptFailure> {
    let uri = &sub.stored.request.callback_uri;
    let unreachable = |why: String| AttemptFailure {
        answered: false,
        why,
    };
    let auth = Auth::of(app, token, &sub.delivery)
        .await
        .map_err(|f| unreachable(format!("{}: the token request: {f}", shown(uri))))?;
    let a = app
        .outgoing
        .send(
            destination(&sub.delivery),
            uri,
            limits(app, Body::Skip),
            |c, u| {
                auth.apply(
                    c.post(u)
                        .header(header::CONTENT_TYPE, "application/json")
                        .header(header::ACCEPT, "*/*")
                        .body(body.to_vec()),
                )
            },
        )
        .await
        .map_err(|f| unreachable(format!("{}: {f}", shown(uri))))?;
    let s = a.status.as_u16();
    if (200..300).contains(&s) {
        return Ok(());
    }
    if s == 401 {
        token.value = None;
    }
    Err(AttemptFailure {
        answered: true,
        why: format!("{} answered {s}", shown(uri)),
    })
}

/// Outbox entries read at once by a worker.
pub(crate) const BATCH: usize = 64;

/// A notification set aside after a refused attempt.
#[derive(Debug, Clone, Copy)]
struct Later {
    attempts: u32,
    due: tokio::time::Instant,
}

/// How a pass over a subscription's outbox ended.
enum Pass {
    /// Every entry was tried or is set aside.
    Done,
    /// The subscriber could not be reached: everything waits this long.
    Unreachable(Duration),
    /// The server stops or the subscription is gone.
    Over,
    /// Another replica delivers this subscription now (its claim).
    Lost,
}

/// A replica's claim on the delivery of one subscription's outbox (PostgreSQL: several
/// replicas share the outbox, and one at a time delivers a subscription's, in order).
struct Claim {
    /// This replica's name in the claims (unique per process: `replica/pid-n`).
    holder: Arc<str>,
    /// How long a claim lasts unrenewed (`[notifications] claim_seconds`).
    ttl: Duration,
    /// When it was last taken or renewed (`None`: not held).
    renewed: Option<Instant>,
}

/// A worker's state: the token, the notifications set aside, the claim.
struct Worker {
    app: Arc<App>,
    id: String,
    policy: RetryPolicy,
    token: Token,
    later: BTreeMap<String, Later>,
    remover: Remover,
    /// `None` on SQLite (one server delivers everything).
    claim: Option<Claim>,
}

impl Worker {
    /// Whether this replica holds the subscription's delivery: on PostgreSQL, taken or renewed
    /// in the database once a third of its time has passed since the last renewal (so the
    /// claim outlives an attempt: `[notifications] claim_seconds` is at least twice
    /// `timeout`); always on SQLite.
    async fn hold(&mut self) -> bool {
        let Some(claim) = &mut self.claim else {
            return true;
        };
        if claim.renewed.is_some_and(|at| at.elapsed() < claim.ttl / 3) {
            return true;
        }
        match self
            .app
            .delivery
            .claim_delivery(&self.id, &claim.holder, claim.ttl)
            .await
        {
            Ok(true) => {
                if claim.renewed.is_none() {
                    tracing::debug!("delivering the notifications of subscription {}", self.id);
                }
                claim.renewed = Some(Instant::now());
                true
            }
            Ok(false) => {
                claim.renewed = None;
                false
            }
            Err(e) => {
                claim.renewed = None;
                self.app.note(&format!(
                    "cannot claim the delivery of subscription {}: {e}",
                    self.id
                ));
                false
            }
        }
    }

    /// Gives the claim back (a stop, the subscription gone): another replica takes it at once.
    async fn release(&mut self) {
        let Some(claim) = &mut self.claim else {
            return;
        };
        if claim.renewed.take().is_none() {
            return;
        }
        if let Err(e) = self
            .app
            .delivery
            .release_delivery(&self.id, Some(&claim.holder))
            .await
        {
            tracing::warn!(
                "cannot give back the delivery of subscription {} (another replica takes it \
                 when it expires): {e}",
                self.id
            );
        }
    }

    /// One pass over the outbox in commit order, [`BATCH`] entries at a time: each entry not
    /// set aside (or due again) is attempted once.
    async fn pass(&mut self, sub: &Sub, stopped: &watch::Receiver<bool>) -> Pass {
        let prefix = outbox_prefix(&self.id);
        let mut after: Option<String> = None;
        let mut seen: BTreeSet<String> = BTreeSet::new();
        loop {
            let batch = match self
                .app
                .delivery
                .documents_after(&prefix, after.as_deref(), BATCH)
                .await
            {
                Ok(b) => b,
                Err(e) => {
                    self.app.note(&format!(
                        "cannot read the outbox of subscription {}: {e}",
                        self.id
                    ));
                    return Pass::Unreachable(self.policy.max_delay);
                }
            };
            let Some((last, _)) = batch.last() else {
                break;
            };
            after = Some(last.clone());
            // A short batch is the end of the outbox: what a later commit adds wakes the
            // worker for another pass.
            let end = batch.len() < BATCH;
            for (name, body) in batch {
                if *stopped.borrow() || self.app.shared.outbox.get(&self.id).is_none() {
                    return Pass::Over;
                }
                seen.insert(name.clone());
                let now = tokio::time::Instant::now();
                let attempts = match self.later.get(&name) {
                    Some(l) if l.due > now => continue,
                    Some(l) => l.attempts,
                    None => 0,
                };
                if !self.hold().await {
                    return Pass::Lost;
                }
                if let Some(wait) = self.one(sub, name, &body, attempts).await {
                    return Pass::Unreachable(wait);
                }
            }
            if end {
                break;
            }
        }
        // Entries no longer in the outbox (dropped by a full outbox) are forgotten.
        self.later.retain(|n, _| seen.contains(n));
        Pass::Done
    }

    /// Attempts entry `name` (its `attempts` so far); `Some(wait)` when the subscriber could
    /// not be reached.
    async fn one(
        &mut self,
        sub: &Sub,
        name: String,
        body: &str,
        attempts: u32,
    ) -> Option<Duration> {
        let counters = &self.app.shared.outbox.counters;
        let q: Queued = match serde_json::from_str(body) {
            Ok(q) => q,
            Err(e) => {
                self.app
                    .note(&format!("outbox entry {name} is unreadable, dropped: {e}"));
                counters.dropped(Dropped::Unreadable, 1);
                self.later.remove(&name);
                self.forget(sub, &name).await;
                return None;
            }
        };
        let Ok(bytes) = serde_json::to_vec(&q.notification) else {
            return None;
        };
        let attempts = attempts.saturating_add(1);
        let failure = match attempt(&self.app, &mut self.token, sub, &bytes).await {
            Ok(()) => {
                self.later.remove(&name);
                self.forget(sub, &name).await;
                counters.delivered.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            Err(f) => f,
        };
        let age = (self.app.clock().now() - q.queued_at)
            .to_std()
            .unwrap_or(Duration::ZERO);
        match self.policy.after_failure(attempts, age) {
            Retry::After(d) => {
                counters.retried.fetch_add(1, Ordering::Relaxed);
                let due = tokio::time::Instant::now() + d;
                self.later.insert(name, Later { attempts, due });
                (!failure.answered).then_some(d)
            }
            drop @ (Retry::DropAttempts | Retry::DropAge) => {
                let (reason, key) = if drop == Retry::DropAge {
                    (Dropped::MaxAge, "max_age")
                } else {
                    (Dropped::MaxAttempts, "max_attempts")
                };
                counters.dropped(reason, 1);
                tracing::warn!(
                    "notification {} of subscription {} dropped after {attempts} \
                     attempt(s) ([notifications] {key}): {}",
                    q.notification["id"].as_str().unwrap_or("?"),
                    self.id,
                    failure.why
                );
                self.later.remove(&name);
                self.forget(sub, &name).await;
                None
            }
        }
    }
}

impl Worker {
    /// Removes outbox entry `name` of `sub` (delivered or dropped), with the entries of the
    /// other workers asked meanwhile ([`Remover`]). Without waiting for the disk: a power loss
    /// may send it again, with the same `id` (delivery is at least once).
    async fn forget(&self, sub: &Sub, name: &str) {
        if let Err(e) = self.remover.remove(name.to_owned()).await {
            tracing::warn!("cannot remove delivered notification {name} from the outbox: {e}");
        }
        sub.forgotten(name);
    }
}

/// Waits `d`, or less when `stopped` or the subscription is gone; whether to go on.
async fn pause(app: &App, id: &str, d: Duration, stopped: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => {},
        _ = stopped.wait_for(|s| *s) => return false,
    }
    app.shared.outbox.get(id).is_some() && !*stopped.borrow()
}

/// Delivers subscription `id`'s outbox until it is deleted or the server stops; on
/// PostgreSQL, while this replica holds its claim (`holder`: this replica's name in the
/// claims), given back at the end.
async fn worker(
    app: Arc<App>,
    id: String,
    remover: Remover,
    holder: Option<Arc<str>>,
    stopped: watch::Receiver<bool>,
) {
    let policy: RetryPolicy = match app.config.notifications.policy() {
        Ok(p) => p,
        Err(e) => {
            app.note(&format!("notifications not delivered: {e}"));
            return;
        }
    };
    let mut w = Worker {
        app: app.clone(),
        id,
        policy,
        token: Token::default(),
        later: BTreeMap::new(),
        remover,
        claim: holder.map(|holder| Claim {
            holder,
            ttl: app.config.notifications.claim_ttl(),
            renewed: None,
        }),
    };
    deliver(&mut w, stopped).await;
    w.release().await;
}

/// The loop of [`worker`].
async fn deliver(w: &mut Worker, mut stopped: watch::Receiver<bool>) {
    let app = w.app.clone();
    let id = w.id.clone();
    loop {
        let Some(sub) = app.shared.outbox.get(&id) else {
            return;
        };
        if *stopped.borrow() {
            return;
        }
        let woken = sub.wake.notified();
        // On PostgreSQL, claimed only when there is something to deliver; not held (another
        // replica delivers it): woken again by a commit here or the next poll.
        let held = w.claim.is_none() || (sub.has_queued() && w.hold().await);
        let pass = if held {
            w.pass(&sub, &stopped).await
        } else {
            Pass::Lost
        };
        match pass {
            Pass::Lost => {
                tokio::select! {
                    () = woken => {},
                    _ = stopped.wait_for(|s| *s) => return,
                }
                continue;
            }
            Pass::Over => return,
            Pass::Unreachable(d) => {
                if !pause(&app, &id, d, &mut stopped).await {
                    return;
                }
                continue;
            }
            Pass::Done => {}
        }
        // New notifications, or the first one set aside due again.
        let due = w.later.values().map(|l| l.due).min();
        tokio::select! {
            () = woken => {},
            () = async {
                match due {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => {},
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}

/// The most outbox entries one removal transaction deletes.
const REMOVE_BATCH: usize = 1024;

/// A removal a worker asked for: the entry, and where its outcome goes.
type Removal = (String, oneshot::Sender<Result<(), String>>);

/// Removes the outbox entries the workers are done with (delivered or dropped), on the
/// delivery connection: every entry asked while the previous removal ran goes in one
/// transaction (a group commit, up to [`REMOVE_BATCH`]), so a state change notified to a
/// thousand subscribers costs a few transactions, not a thousand. Each worker waits for its
/// removal before its next attempt, so there is at most one per worker in the queue.
#[derive(Clone, Debug)]
struct Remover {
    queue: mpsc::UnboundedSender<Removal>,
}

impl Remover {
    /// Starts the task that carries out the removals on `store`; it ends once every clone of
    /// the [`Remover`] is dropped and the removals asked are done.
    fn start(store: StateStore) -> (Self, tokio::task::JoinHandle<()>) {
        let (queue, asked) = mpsc::unbounded_channel();
        (Self { queue }, tokio::spawn(removals(store, asked)))
    }

    /// Removes entry `name`; returns once the transaction that deletes it committed.
    async fn remove(&self, name: String) -> Result<(), String> {
        let stopped = || "the outbox's remover stopped".to_owned();
        let (done, outcome) = oneshot::channel();
        self.queue.send((name, done)).map_err(|_| stopped())?;
        outcome.await.map_err(|_| stopped())?
    }
}

/// The task of [`Remover::start`].
async fn removals(store: StateStore, mut asked: mpsc::UnboundedReceiver<Removal>) {
    while let Some(first) = asked.recv().await {
        let mut batch = vec![first];
        while batch.len() < REMOVE_BATCH {
            match asked.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let names = batch.iter().map(|(n, _)| n.clone()).collect();
        let outcome = store
            .delete_documents(names)
            .await
            .map_err(|e| e.to_string());
        for (_, done) in batch {
            let _ = done.send(outcome.clone());
        }
    }
}

/// Runs one [`worker`] per subscription (started and ended as subscriptions come and go)
/// until `stopped`.
pub(crate) async fn run(app: Arc<App>, mut stopped: watch::Receiver<bool>) {
    let mut workers: BTreeMap<String, tokio::task::JoinHandle<()>> = BTreeMap::new();
    let (remover, removing) = Remover::start(app.delivery.clone());
    let holder: Option<Arc<str>> = app.state.is_shared().then(|| holder(&app.replica).into());
    let poller = holder
        .is_some()
        .then(|| tokio::spawn(poll(app.clone(), stopped.clone())));
    loop {
        let changed = app.shared.outbox.changed.notified();
        let subs: BTreeSet<String> = app
            .shared
            .outbox
            .subscriptions()
            .iter()
            .map(|s| s.stored.id.clone())
            .collect();
        workers.retain(|id, h| {
            let keep = subs.contains(id) && !h.is_finished();
            if !keep {
                h.abort();
            }
            keep
        });
        for id in subs {
            if let std::collections::btree_map::Entry::Vacant(slot) = workers.entry(id) {
                let id = slot.key().clone();
                slot.insert(tokio::spawn(worker(
                    app.clone(),
                    id,
                    remover.clone(),
                    holder.clone(),
                    stopped.clone(),
                )));
            }
        }
        tokio::select! {
            () = changed => {},
            _ = stopped.wait_for(|s| *s) => break,
        }
    }
    for (_, h) in workers {
        let _ = h.await;
    }
    if let Some(p) = poller {
        let _ = p.await;
    }
    // The workers' last removals are done once the remover's task ends.
    drop(remover);
    let _ = removing.await;
}

/// This process's name in the delivery claims: the replica id, the process id and a number
/// of this process (two servers of one process, as in tests, or two processes with one
/// replica id by mistake, never share a claim).
pub(crate) fn holder(replica: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!(
        "{replica}/{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// On PostgreSQL, every `[notifications] poll_interval_ms` until `stopped`: the subscriptions
/// read again when another replica changed them, and the outbox looked at ([`look`]): a
/// replica is not woken by the other replicas' commits.
async fn poll(app: Arc<App>, mut stopped: watch::Receiver<bool>) {
    let every = app.config.notifications.poll_interval();
    let mut failing = false;
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {},
            _ = stopped.wait_for(|s| *s) => return,
        }
        if let Err(e) = app
            .shared
            .outbox
            .refresh(&app.state, &app.shared.gate)
            .await
        {
            if !failing {
                app.note(&format!("cannot read the subscriptions again: {e}"));
            }
        }
        match look(&app).await {
            Ok(()) => failing = false,
            // Logged once until it works again: the database may be down for a while.
            Err(e) if !failing => {
                failing = true;
                app.note(&format!("cannot read the notification outbox: {e}"));
            }
            Err(_) => {}
        }
    }
}

/// Reads the names and sizes of the outbox's entries: each subscription's count and bytes
/// (what `[notifications] max_outbox_entries` and `max_outbox_bytes` bound) become what the
/// database holds, whichever replica wrote or delivered them, and the worker of each
/// subscription with entries is woken (it delivers them if it holds the claim or can take
/// it). Expired claims are dropped, and the entries of a subscription no longer stored
/// (deleted through another replica while this one wrote for it) are deleted.
async fn look(app: &App) -> Result<(), DriverError> {
    let mut by_sub: BTreeMap<String, BTreeMap<u64, usize>> = BTreeMap::new();
    {
        // No commit of this replica between its staging and its end: the entries it is
        // writing are in the database or not yet in its count.
        let _gate = app.shared.gate.read().await;
        for (name, size) in app
            .delivery
            .document_sizes_with_prefix(OUTBOX_PREFIX)
            .await?
        {
            by_sub
                .entry(subscription_of(&name).to_owned())
                .or_default()
                .insert(sequence_of(&name).unwrap_or(0), size);
        }
        for sub in app.shared.outbox.subscriptions() {
            let entries = by_sub.remove(&sub.stored.id).unwrap_or_default();
            let any = !entries.is_empty();
            sub.resync(entries);
            if any {
                sub.wake.notify_one();
            }
        }
    }
    app.delivery.drop_expired_claims().await?;
    // A subscription's document is written before any entry for it: an entry without one
    // belongs to a deleted subscription.
    for id in by_sub.keys() {
        if app
            .delivery
            .document(&format!("{SUBSCRIPTION_PREFIX}{id}"))
            .await?
            .is_none()
        {
            app.delivery
                .write_documents(Vec::new(), Some(all_of(&outbox_prefix(id))), Flush::Commit)
                .await?;
        }
    }
    Ok(())
}
