//! Delivery of the SOL003 lifecycle notifications queued in the outbox (`subscriptions`):
//! one worker per subscription sends its notifications (`POST` to `callbackUri`, JSON, with the
//! subscription's authentication: `Authorization: Basic`, or a bearer token fetched from the
//! subscriber's token endpoint with the client credentials grant and kept until it expires),
//! and deletes each from the outbox once the callback answered 2xx.
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
//! A stop leaves the queue in the state file; the next start delivers it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::header;
use tokio::sync::watch;
use vnfm_core::lcm_notify::{Delivery, Retry, RetryPolicy};

use super::outbox::{outbox_prefix, Dropped, Queued, Sub};
use super::state::App;

/// The HTTP client of the deliveries: no proxy from the environment, no redirects.
fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// A cached OAuth 2.0 token.
#[derive(Debug, Default)]
struct Token {
    value: Option<(String, Instant)>,
}

/// Fetches a token (client credentials grant, RFC 6749 4.4, client authentication with HTTP
/// Basic, 2.3.1).
async fn fetch_token(
    client: &reqwest::Client,
    endpoint: &str,
    id: &str,
    secret: &str,
) -> Result<(String, Option<u64>), String> {
    let r = client
        .post(endpoint)
        .basic_auth(id, Some(secret))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ACCEPT, "application/json")
        .body("grant_type=client_credentials")
        .send()
        .await
        .map_err(|e| format!("the token endpoint {endpoint} cannot be reached: {e}"))?;
    let status = r.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(format!("the token endpoint {endpoint} answered {status}"));
    }
    let v: serde_json::Value = r
        .json()
        .await
        .map_err(|e| format!("the token endpoint {endpoint} answered no JSON: {e}"))?;
    let token = v["access_token"]
        .as_str()
        .ok_or_else(|| format!("the token endpoint {endpoint} answered no access_token"))?;
    Ok((token.to_owned(), v["expires_in"].as_u64()))
}

impl Token {
    async fn get(
        &mut self,
        client: &reqwest::Client,
        endpoint: &str,
        id: &str,
        secret: &str,
    ) -> Result<String, String> {
        if let Some((t, until)) = &self.value {
            if Instant::now() < *until {
                return Ok(t.clone());
            }
        }
        let (t, expires_in) = fetch_token(client, endpoint, id, secret).await?;
        // A token without a lifetime is kept for a minute; one with one until 10 s before.
        let life = expires_in.map_or(60, |s| s.saturating_sub(10));
        self.value = Some((t.clone(), Instant::now() + Duration::from_secs(life)));
        Ok(t)
    }
}

/// A request with the authentication of `delivery`.
async fn authorized(
    client: &reqwest::Client,
    token: &mut Token,
    delivery: &Delivery,
    rb: reqwest::RequestBuilder,
) -> Result<reqwest::RequestBuilder, String> {
    Ok(match delivery {
        Delivery::Plain => rb,
        Delivery::Basic { user, password } => rb.basic_auth(user, Some(password)),
        Delivery::OAuth2 {
            client_id,
            client_password,
            token_endpoint,
        } => {
            let t = token
                .get(client, token_endpoint, client_id, client_password)
                .await?;
            rb.bearer_auth(t)
        }
    })
}

fn send_error(uri: &str, e: &reqwest::Error) -> String {
    if e.is_connect() {
        format!("cannot connect to {uri}: {e}")
    } else if e.is_timeout() {
        format!("no answer from {uri} in time: {e}")
    } else {
        format!("cannot send to {uri}: {e}")
    }
}

/// SOL003 5.4.18.3.1: `GET callbackUri` must answer 204. `Err` says what happened instead.
pub(crate) async fn test_callback(app: &App, uri: &str, delivery: &Delivery) -> Result<(), String> {
    let c = client(Duration::from_secs(app.config.notifications.timeout))?;
    let mut token = Token::default();
    let rb = authorized(&c, &mut token, delivery, c.get(uri)).await?;
    let r = rb.send().await.map_err(|e| send_error(uri, &e))?;
    match r.status().as_u16() {
        204 => Ok(()),
        s => Err(format!("answered {s}")),
    }
}

/// Why an attempt failed.
#[derive(Debug)]
struct Failure {
    /// The subscriber answered (a refusal of this notification); else it could not be
    /// reached.
    answered: bool,
    why: String,
}

/// One attempt: `Ok` for 2xx. A 401 forgets the cached token.
async fn attempt(
    client: &reqwest::Client,
    token: &mut Token,
    sub: &Sub,
    body: &[u8],
) -> Result<(), Failure> {
    let unreachable = |why: String| Failure {
        answered: false,
        why,
    };
    let uri = &sub.stored.request.callback_uri;
    let rb = client
        .post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "*/*")
        .body(body.to_vec());
    let rb = authorized(client, token, &sub.delivery, rb)
        .await
        .map_err(unreachable)?;
    let r = rb
        .send()
        .await
        .map_err(|e| unreachable(send_error(uri, &e)))?;
    let s = r.status().as_u16();
    if (200..300).contains(&s) {
        return Ok(());
    }
    if s == 401 {
        token.value = None;
    }
    Err(Failure {
        answered: true,
        why: format!("{uri} answered {s}"),
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
}

/// A worker's state: the client, the token, the notifications set aside.
struct Worker {
    app: Arc<App>,
    id: String,
    policy: RetryPolicy,
    client: reqwest::Client,
    token: Token,
    later: BTreeMap<String, Later>,
}

impl Worker {
    /// One pass over the outbox in commit order, [`BATCH`] entries at a time: each entry not
    /// set aside (or due again) is attempted once.
    async fn pass(&mut self, sub: &Sub, stopped: &watch::Receiver<bool>) -> Pass {
        let prefix = outbox_prefix(&self.id);
        let mut after: Option<String> = None;
        let mut seen: BTreeSet<String> = BTreeSet::new();
        loop {
            let batch = match self
                .app
                .sqlite
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
                if let Some(wait) = self.one(sub, name, &body, attempts).await {
                    return Pass::Unreachable(wait);
                }
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
                forget(&self.app, sub, &name).await;
                return None;
            }
        };
        let Ok(bytes) = serde_json::to_vec(&q.notification) else {
            return None;
        };
        let attempts = attempts.saturating_add(1);
        let failure = match attempt(&self.client, &mut self.token, sub, &bytes).await {
            Ok(()) => {
                self.later.remove(&name);
                forget(&self.app, sub, &name).await;
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
                crate::display::log_line(&format!(
                    "vnfm serve: notification {} of subscription {} dropped after {attempts} \
                     attempt(s) ([notifications] {key}): {}",
                    q.notification["id"].as_str().unwrap_or("?"),
                    self.id,
                    failure.why
                ));
                self.later.remove(&name);
                forget(&self.app, sub, &name).await;
                None
            }
        }
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

/// Delivers subscription `id`'s outbox until it is deleted or the server stops.
async fn worker(app: Arc<App>, id: String, mut stopped: watch::Receiver<bool>) {
    let policy: RetryPolicy = match app.config.notifications.policy() {
        Ok(p) => p,
        Err(e) => {
            app.note(&format!("notifications not delivered: {e}"));
            return;
        }
    };
    let client = match client(Duration::from_secs(app.config.notifications.timeout)) {
        Ok(c) => c,
        Err(e) => {
            crate::display::log_line(&format!("vnfm serve: notifications not delivered: {e}"));
            return;
        }
    };
    let mut w = Worker {
        app: app.clone(),
        id: id.clone(),
        policy,
        client,
        token: Token::default(),
        later: BTreeMap::new(),
    };
    loop {
        let Some(sub) = app.shared.outbox.get(&id) else {
            return;
        };
        if *stopped.borrow() {
            return;
        }
        let woken = sub.wake.notified();
        match w.pass(&sub, &stopped).await {
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

/// Deletes outbox entry `name` of `sub` (delivered or dropped). Without waiting for the disk:
/// a power loss may send it again, with the same `id` (delivery is at least once).
async fn forget(app: &App, sub: &Sub, name: &str) {
    if let Err(e) = app.sqlite.delete_documents(vec![name.to_owned()]).await {
        crate::display::log_line(&format!(
            "vnfm serve: cannot remove delivered notification {name} from the outbox: {e}"
        ));
    }
    sub.forgotten(name);
}

/// Runs one [`worker`] per subscription (started and ended as subscriptions come and go)
/// until `stopped`.
pub(crate) async fn run(app: Arc<App>, mut stopped: watch::Receiver<bool>) {
    let mut workers: BTreeMap<String, tokio::task::JoinHandle<()>> = BTreeMap::new();
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
            workers
                .entry(id.clone())
                .or_insert_with(|| tokio::spawn(worker(app.clone(), id, stopped.clone())));
        }
        tokio::select! {
            () = changed => {},
            _ = stopped.wait_for(|s| *s) => break,
        }
    }
    for (_, h) in workers {
        let _ = h.await;
    }
}
