//! Delivery of the SOL003 lifecycle notifications queued in the outbox (`subscriptions`):
//! one worker per subscription sends its notifications in order (`POST` to `callbackUri`,
//! JSON, with the subscription's authentication: `Authorization: Basic`, or a bearer token
//! fetched from the subscriber's token endpoint with the client credentials grant and kept
//! until it expires), and deletes each from the outbox once the callback answered 2xx. A
//! failed attempt waits as the core's [`RetryPolicy`] says (`[notifications]`), then the same
//! notification is tried again (later ones wait: order is kept); beyond `max_attempts` or
//! `max_age` it is dropped, logged and counted. A stop leaves the queue in the state file;
//! the next start delivers it. Every request (notification, token, callback test) goes
//! through the server's one outgoing client (`crate::outgoing`: the destination policy,
//! `[notifications] max_connections`, no keep-alive, bounded answers).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::header;
use tokio::sync::watch;
use vnfm_core::lcm_notify::{Delivery, Retry, RetryPolicy};

use super::outbox::{outbox_prefix, Queued, Sub};
use super::state::App;
use crate::outgoing::{shown, Body, Destination, Failure, Limits};
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
            Delivery::Plain => Auth::None,
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
        .send(Destination::Client, uri, limits(app, Body::Skip), |c, u| {
            auth.apply(c.get(u))
        })
        .await?;
    match a.status.as_u16() {
        204 => Ok(()),
        s => Err(Refusal::Failed(format!("answered {s}"))),
    }
}

/// One attempt: `Ok` for 2xx. A 401 forgets the cached token.
async fn attempt(app: &App, token: &mut Token, sub: &Sub, body: &[u8]) -> Result<(), String> {
    let uri = &sub.stored.request.callback_uri;
    let why = |f: Failure| format!("{}: {f}", shown(uri));
    let auth = Auth::of(app, token, &sub.delivery)
        .await
        .map_err(|f| format!("{}: the token request: {f}", shown(uri)))?;
    let a = app
        .outgoing
        .send(Destination::Client, uri, limits(app, Body::Skip), |c, u| {
            auth.apply(
                c.post(u)
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::ACCEPT, "*/*")
                    .body(body.to_vec()),
            )
        })
        .await
        .map_err(why)?;
    let s = a.status.as_u16();
    if (200..300).contains(&s) {
        return Ok(());
    }
    if s == 401 {
        token.value = None;
    }
    Err(format!("{} answered {s}", shown(uri)))
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
    let mut token = Token::default();
    let prefix = outbox_prefix(&id);
    loop {
        let Some(sub) = app.shared.outbox.get(&id) else {
            return;
        };
        if *stopped.borrow() {
            return;
        }
        let woken = sub.wake.notified();
        let pending = match app.sqlite.documents_with_prefix(&prefix).await {
            Ok(p) => p,
            Err(e) => {
                app.note(&format!("cannot read the outbox of subscription {id}: {e}"));
                if !pause(&app, &id, policy.max_delay, &mut stopped).await {
                    return;
                }
                continue;
            }
        };
        if pending.is_empty() {
            tokio::select! {
                () = woken => {},
                _ = stopped.wait_for(|s| *s) => return,
            }
            continue;
        }
        for (name, body) in pending {
            let q: Queued = match serde_json::from_str(&body) {
                Ok(q) => q,
                Err(e) => {
                    app.note(&format!("outbox entry {name} is unreadable, dropped: {e}"));
                    app.shared
                        .outbox
                        .counters
                        .failed
                        .fetch_add(1, Ordering::Relaxed);
                    forget(&app, &name).await;
                    continue;
                }
            };
            let Ok(bytes) = serde_json::to_vec(&q.notification) else {
                continue;
            };
            let mut attempts = 0u32;
            loop {
                attempts += 1;
                let why = match attempt(&app, &mut token, &sub, &bytes).await {
                    Ok(()) => {
                        app.shared
                            .outbox
                            .counters
                            .delivered
                            .fetch_add(1, Ordering::Relaxed);
                        forget(&app, &name).await;
                        break;
                    }
                    Err(why) => why,
                };
                let age = (app.clock().now() - q.queued_at)
                    .to_std()
                    .unwrap_or(Duration::ZERO);
                match policy.after_failure(attempts, age) {
                    Retry::After(d) => {
                        app.shared
                            .outbox
                            .counters
                            .retried
                            .fetch_add(1, Ordering::Relaxed);
                        if !pause(&app, &id, d, &mut stopped).await {
                            return;
                        }
                    }
                    drop @ (Retry::DropAttempts | Retry::DropAge) => {
                        app.shared
                            .outbox
                            .counters
                            .failed
                            .fetch_add(1, Ordering::Relaxed);
                        crate::display::log_line(&format!(
                            "vnfm serve: notification {} of subscription {id} dropped after {attempts} \
                             attempt(s){}: {why}",
                            q.notification["id"].as_str().unwrap_or("?"),
                            if drop == Retry::DropAge {
                                " ([notifications] max_age)"
                            } else {
                                " ([notifications] max_attempts)"
                            }
                        ));
                        forget(&app, &name).await;
                        break;
                    }
                }
            }
        }
    }
}

/// Deletes outbox entry `name` (delivered or dropped).
async fn forget(app: &App, name: &str) {
    if let Err(e) = app
        .sqlite
        .write_documents(
            Vec::new(),
            Some((name.to_owned(), name.to_owned())),
            Flush::Commit,
        )
        .await
    {
        crate::display::log_line(&format!(
            "vnfm serve: cannot remove delivered notification {name} from the outbox: {e}"
        ));
    }
}

/// Runs one [`worker`] per subscription (started and ended as subscriptions come and go)
/// until `stopped`.
pub(crate) async fn run(app: Arc<App>, mut stopped: watch::Receiver<bool>) {
    let mut workers: BTreeMap<String, tokio::task::JoinHandle<()>> = BTreeMap::new();
    loop {
        let changed = app.shared.outbox.changed.notified();
        let subs = app.shared.outbox.subscriptions();
        workers.retain(|id, h| {
            let keep = subs.iter().any(|s| &s.stored.id == id) && !h.is_finished();
            if !keep {
                h.abort();
            }
            keep
        });
        for s in subs {
            workers.entry(s.stored.id.clone()).or_insert_with(|| {
                tokio::spawn(worker(app.clone(), s.stored.id.clone(), stopped.clone()))
            });
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
