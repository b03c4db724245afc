//! Recorded exchanges with a real kube-apiserver, served back in order: the project's own
//! fixture of the conformance suite (`tests/fixtures/conformance-v1.36.2.json`, see
//! `tests/fixtures/README.md`).
//!
//! [`Recorder`] is a [`Handler`] forwarding every request to the real API server (through a
//! `kube::Client` of the real kubeconfig, which brings the TLS, the CA and the credentials) and
//! recording the request (method, path and query, content type, body) and the answer (status,
//! content type, body; no other header: none is read by the adapter, and most are volatile).
//!
//! [`Script`] is a [`Handler`] serving recorded exchanges in order: each request must be the
//! recorded one (method, path and query with kube's `?&` as `?`, content type, body compared
//! as JSON), else the server answers a 599 Status naming the expected and the actual request
//! and keeps the message for [`Script::mismatches`]. A poll may run more or fewer times than
//! recorded: a `GET` repeating the last one served gets that answer again, and when the
//! adapter moves on, the recorded repeats of the last `GET` are skipped.

use std::sync::Mutex;

use serde_json::{json, Map, Value};

use super::{Answer, Handler, Request};

/// A request of the adapter, normalised for comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    pub method: String,
    /// Path and query, with kube's `?&` written `?` and no trailing `?`.
    pub target: String,
    /// The `Content-Type` header, when the request has a body.
    pub content_type: Option<String>,
    /// The body as JSON (a JSON string when it is not JSON); `None` when empty.
    pub body: Option<Value>,
}

impl Sent {
    /// `request` normalised.
    pub fn of(request: &Request) -> Sent {
        let target = request.target.replacen("?&", "?", 1);
        let body = (!request.body.is_empty()).then(|| {
            serde_json::from_slice(&request.body)
                .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&request.body)))
        });
        Sent {
            method: request.method.clone(),
            target: target.trim_end_matches('?').to_owned(),
            content_type: body
                .as_ref()
                .and(request.header("content-type").map(str::to_owned)),
            body,
        }
    }

    fn from_json(v: &Value, at: &str) -> Sent {
        let s = |k: &str| {
            v[k].as_str()
                .unwrap_or_else(|| panic!("{at}: request.{k} is not a string"))
                .to_owned()
        };
        Sent {
            method: s("method"),
            target: s("path"),
            content_type: v["content_type"].as_str().map(str::to_owned),
            body: v.get("body").filter(|b| !b.is_null()).cloned(),
        }
    }

    fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("method".into(), Value::from(self.method.clone()));
        o.insert("path".into(), Value::from(self.target.clone()));
        if let Some(ct) = &self.content_type {
            o.insert("content_type".into(), Value::from(ct.clone()));
        }
        if let Some(b) = &self.body {
            o.insert("body".into(), b.clone());
        }
        Value::Object(o)
    }

    fn is_get(&self) -> bool {
        self.method == "GET"
    }
}

impl std::fmt::Display for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.target)?;
        if let Some(ct) = &self.content_type {
            write!(f, " ({ct})")?;
        }
        if let Some(b) = &self.body {
            write!(f, " {b}")?;
        }
        Ok(())
    }
}

/// One recorded exchange.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    pub request: Sent,
    pub status: u16,
    pub content_type: String,
    /// The answer's body as JSON (a JSON string when it was not JSON).
    pub body: Value,
}

impl Exchange {
    fn answer(&self) -> Answer {
        let body = match &self.body {
            Value::String(s) if !self.content_type.contains("json") => s.clone().into_bytes(),
            b => b.to_string().into_bytes(),
        };
        Answer {
            status: self.status,
            content_type: self.content_type.clone(),
            body,
        }
    }

    pub fn from_json(v: &Value, at: &str) -> Exchange {
        let res = &v["response"];
        Exchange {
            request: Sent::from_json(&v["request"], at),
            status: res["status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or_else(|| panic!("{at}: response.status is not a status")),
            content_type: res["content_type"]
                .as_str()
                .unwrap_or("application/json")
                .to_owned(),
            body: res["body"].clone(),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "request": self.request.to_json(),
            "response": {
                "status": self.status,
                "content_type": self.content_type,
                "body": self.body,
            },
        })
    }
}

/// A recording: the fixture the suite ran with and the exchanges, in order.
#[derive(Clone, Debug)]
pub struct Recording {
    /// Free text: how the recording was made.
    pub about: Value,
    /// The suite's fixture (`name_prefix`, `namespace`, `cluster_nodes`, `max_polls`,
    /// `interval_ms`).
    pub fixture: Value,
    pub exchanges: Vec<Exchange>,
}

impl Recording {
    /// The recording in the file at `path`.
    ///
    /// # Panics
    /// When the file cannot be read or is not a recording, naming the file and the field.
    pub fn read(path: &std::path::Path) -> Recording {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        let exchanges = v["exchanges"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no exchanges array", path.display()))
            .iter()
            .enumerate()
            .map(|(i, x)| Exchange::from_json(x, &format!("{} exchanges[{i}]", path.display())))
            .collect();
        Recording {
            about: v["about"].clone(),
            fixture: v["fixture"].clone(),
            exchanges,
        }
    }

    /// The recording as the fixture file's JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "about": self.about,
            "fixture": self.fixture,
            "exchanges": self.exchanges.iter().map(Exchange::to_json).collect::<Vec<_>>(),
        })
    }
}

// ------------------------------------------------------------------------------------ replay

#[derive(Debug, Default)]
struct ScriptState {
    exchanges: Vec<Exchange>,
    /// The first exchange not served yet.
    next: usize,
    /// The exchange served last.
    last: Option<usize>,
    /// Requests received.
    received: usize,
    mismatches: Vec<String>,
}

impl ScriptState {
    /// The exchange answering `sent`, or why none does.
    fn find(&self, sent: &Sent) -> Result<usize, String> {
        let ex = &self.exchanges;
        if ex.get(self.next).is_some_and(|e| e.request == *sent) {
            return Ok(self.next);
        }
        if let Some(last) = self.last.filter(|&l| ex[l].request.is_get()) {
            // a poll repeated more often than recorded
            if ex[last].request == *sent {
                return Ok(last);
            }
            // the adapter moved on before the recorded repeats of its last poll
            let mut i = self.next;
            while ex.get(i).is_some_and(|e| e.request == ex[last].request) {
                i += 1;
            }
            if ex.get(i).is_some_and(|e| e.request == *sent) {
                return Ok(i);
            }
        }
        let expected = match ex.get(self.next) {
            Some(e) => format!(
                "expected exchange {} of {}: {}{}",
                self.next + 1,
                ex.len(),
                e.request,
                differences(&e.request, sent)
            ),
            None => format!("all {} recorded exchanges were served", ex.len()),
        };
        Err(format!(
            "replay: request {} of the adapter, {sent}, is not the recorded one: {expected}",
            self.received
        ))
    }
}

/// What differs between the recorded request and the sent one.
fn differences(recorded: &Sent, sent: &Sent) -> String {
    let mut d = Vec::new();
    if recorded.method != sent.method {
        d.push("method");
    }
    if recorded.target != sent.target {
        d.push("path or query");
    }
    if recorded.content_type != sent.content_type {
        d.push("content type");
    }
    if recorded.body != sent.body {
        d.push("body");
    }
    format!(" (differs in: {})", d.join(", "))
}

/// Serves recorded exchanges in order (see the module documentation).
#[derive(Debug)]
pub struct Script(Mutex<ScriptState>);

impl Script {
    pub fn new(exchanges: Vec<Exchange>) -> Script {
        Script(Mutex::new(ScriptState {
            exchanges,
            ..ScriptState::default()
        }))
    }

    /// The requests that were not the recorded ones, each message naming the expected and
    /// the actual request.
    pub fn mismatches(&self) -> Vec<String> {
        self.0.lock().unwrap().mismatches.clone()
    }

    /// What the adapter did not ask for: `None` when every exchange was served (recorded
    /// repeats of the last poll aside).
    pub fn unserved(&self) -> Option<String> {
        let st = self.0.lock().unwrap();
        let ex = &st.exchanges;
        let mut i = st.next;
        if let Some(last) = st.last.filter(|&l| ex[l].request.is_get()) {
            while ex.get(i).is_some_and(|e| e.request == ex[last].request) {
                i += 1;
            }
        }
        let rest = ex.get(i..).unwrap_or_default();
        let first = rest.first()?;
        Some(format!(
            "the adapter stopped before exchange {} of {}: {} ({} left)",
            i + 1,
            ex.len(),
            first.request,
            rest.len()
        ))
    }
}

impl Handler for Script {
    fn answer(&self, request: &Request) -> Answer {
        let sent = Sent::of(request);
        let mut st = self.0.lock().unwrap();
        st.received += 1;
        match st.find(&sent) {
            Ok(i) => {
                st.last = Some(i);
                st.next = st.next.max(i + 1);
                st.exchanges[i].answer()
            }
            Err(message) => {
                st.mismatches.push(message.clone());
                Answer::status(599, &message)
            }
        }
    }
}

// ------------------------------------------------------------------------------------ record

/// Forwards every request to a real API server and records the exchanges (see the module
/// documentation). Requests are answered on the server's threads, outside the runtime.
pub struct Recorder {
    client: kube::Client,
    runtime: tokio::runtime::Handle,
    exchanges: Mutex<Vec<Exchange>>,
    errors: Mutex<Vec<String>>,
}

impl Recorder {
    /// A recorder forwarding through `client` (its base URL, TLS and credentials) on `runtime`.
    pub fn new(client: kube::Client, runtime: tokio::runtime::Handle) -> Recorder {
        Recorder {
            client,
            runtime,
            exchanges: Mutex::default(),
            errors: Mutex::default(),
        }
    }

    /// Requests that could not be forwarded.
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }

    /// The exchanges, made smaller: `metadata.managedFields` removed from every object
    /// answered (the adapter reads none), and a run of identical polls (same `GET`, same
    /// answer) kept once.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let mut out: Vec<Exchange> = Vec::new();
        for mut e in self.exchanges.lock().unwrap().iter().cloned() {
            strip_managed_fields(&mut e.body);
            if e.request.is_get() && out.last() == Some(&e) {
                continue;
            }
            out.push(e);
        }
        out
    }

    async fn forward(&self, request: &Request) -> Result<Exchange, String> {
        let mut builder = http::Request::builder()
            .method(request.method.as_str())
            .uri(request.target.as_str());
        for h in ["content-type", "accept"] {
            if let Some(v) = request.header(h) {
                builder = builder.header(h, v);
            }
        }
        let req = builder
            .body(kube::client::Body::from(request.body.clone()))
            .map_err(|e| e.to_string())?;
        let res = self.client.send(req).await.map_err(|e| e.to_string())?;
        let status = res.status().as_u16();
        let content_type = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .to_owned();
        let bytes = res
            .into_body()
            .collect_bytes()
            .await
            .map_err(|e| e.to_string())?;
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&bytes)));
        Ok(Exchange {
            request: Sent::of(request),
            status,
            content_type,
            body,
        })
    }
}

impl Handler for Recorder {
    fn answer(&self, request: &Request) -> Answer {
        match self.runtime.block_on(self.forward(request)) {
            Ok(e) => {
                let answer = e.answer();
                self.exchanges.lock().unwrap().push(e);
                answer
            }
            Err(e) => {
                let message = format!(
                    "recorder: {} {} not forwarded: {e}",
                    request.method, request.target
                );
                self.errors.lock().unwrap().push(message.clone());
                Answer::status(502, &message)
            }
        }
    }
}

/// Removes `metadata.managedFields` from an object and from the items of a list.
fn strip_managed_fields(body: &mut Value) {
    if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    if let Some(items) = body.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            strip_managed_fields(item);
        }
    }
}
