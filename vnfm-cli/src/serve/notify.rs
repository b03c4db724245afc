//! Delivery of the SOL003 lifecycle notifications queued in the outbox (`subscriptions`):
//! one worker per subscription sends its notifications in order (`POST` to `callbackUri`,
//! JSON, with the subscription's authentication: `Authorization: Basic`, or a bearer token
//! fetched from the subscriber's token endpoint with the client credentials grant and kept
//! until it expires), and deletes each from the outbox once the callback answered 2xx. A
//! failed attempt waits as the core's [`RetryPolicy`] says (`[notifications]`), then the same
//! notification is tried again (later ones wait: order is kept); beyond `max_attempts` or
//! `max_age` it is dropped, logged and counted. A stop leaves the queue in the state file;
//! the next start delivers it.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::header;
use tokio::sync::watch;
use vnfm_core::lcm_notify::{Delivery, Retry, RetryPolicy};

use super::outbox::{outbox_prefix, Queued, Sub};
use super::state::App;
use crate::store::Flush;

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

/// One attempt: `Ok` for 2xx. A 401 forgets the cached token.
async fn attempt(
    client: &reqwest::Client,
    token: &mut Token,
    sub: &Sub,
    body: &[u8],
) -> Result<(), String> {
    let uri = &sub.stored.request.callback_uri;
    let rb = client
        .post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "*/*")
        .body(body.to_vec());
    let rb = authorized(client, token, &sub.delivery, rb).await?;
    let r = rb.send().await.map_err(|e| send_error(uri, &e))?;
    let s = r.status().as_u16();
    if (200..300).contains(&s) {
        return Ok(());
    }
    if s == 401 {
        token.value = None;
    }
    Err(format!("{uri} answered {s}"))
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
    let c = match client(Duration::from_secs(app.config.notifications.timeout)) {
        Ok(c) => c,
        Err(e) => {
            crate::display::log_line(&format!("vnfm serve: notifications not delivered: {e}"));
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
                let why = match attempt(&c, &mut token, &sub, &bytes).await {
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
