//! A loopback API server (plain HTTP/1.1 on 127.0.0.1, port 0) answering with a [`Handler`]:
//! [`Replay`] replays captured answers of a real kube-apiserver, in order, and records every
//! request it gets; [`exchanges`] records and replays whole conversations (the conformance
//! suite's).
//!
//! The captures are read at test time from `../shared/vectors/k8s/live-v1.36.2/` (nothing of
//! them is copied into the project): each file is `{"request": {method, path, content_type?,
//! body?, auth}, "response": {status, content_type, body}}`. Without the vectors, [`capture`]
//! records a skip (`vnfm_core::vectors`) and returns `None`.

#![allow(dead_code)]

pub mod exchanges;

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::Value;

/// The folder of the captures below `shared/vectors`.
pub const CAPTURES: &str = "k8s/live-v1.36.2";

/// One capture of the real API server.
#[derive(Clone, Debug)]
pub struct Capture {
    /// The file name without `.json`.
    pub name: String,
    /// The captured request's method.
    pub method: String,
    /// The captured request's path and query.
    pub path: String,
    /// The captured request's content type, if it had a body.
    pub content_type: Option<String>,
    /// The captured request's body.
    pub body: Option<Value>,
    /// The captured request's `auth` (`bearer admin-token`).
    pub auth: String,
    /// The answer's status.
    pub status: u16,
    /// The answer's body.
    pub response: Value,
}

impl Capture {
    /// The captured request's path without its query.
    pub fn path_only(&self) -> &str {
        self.path.split('?').next().unwrap_or("")
    }

    /// The capture's answer, to be given to a request like the captured one (same method and
    /// path; the query may differ).
    pub fn reply(&self) -> Reply {
        Reply {
            status: self.status,
            body: self.response.to_string(),
            expect: Some((self.method.clone(), self.path_only().to_owned())),
            from: self.name.clone(),
        }
    }

    /// The capture's answer, given to whatever request comes (an adapter call that sends
    /// another request than the captured one, answered as the server answered that one).
    pub fn reply_to_any(&self) -> Reply {
        Reply {
            expect: None,
            ..self.reply()
        }
    }
}

/// The capture `name` (`10-patch-node-label-merge-patch`), or `None` after recording a skip
/// when `shared/vectors` is absent.
///
/// # Panics
/// When the vectors exist but the capture does not, or does not parse.
pub fn capture(name: &str) -> Option<Capture> {
    let text = vnfm_core::vectors::read_vector(
        env!("CARGO_MANIFEST_DIR"),
        &format!("{CAPTURES}/{name}.json"),
    )?;
    let v: Value = serde_json::from_str(&text).unwrap();
    let req = &v["request"];
    let res = &v["response"];
    let s = |x: &Value| x.as_str().unwrap_or_default().to_owned();
    Some(Capture {
        name: name.to_owned(),
        method: s(&req["method"]),
        path: s(&req["path"]),
        content_type: req["content_type"].as_str().map(str::to_owned),
        body: req.get("body").filter(|b| !b.is_null()).cloned(),
        auth: s(&req["auth"]),
        status: u16::try_from(res["status"].as_u64().unwrap()).unwrap(),
        response: res["body"].clone(),
    })
}

/// One queued answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    /// The method and path (without query) the request must have; otherwise the server
    /// answers 599 naming both.
    pub expect: Option<(String, String)>,
    /// Which capture (or what) the answer comes from.
    pub from: String,
}

impl Reply {
    /// A JSON answer written by the test (not a capture).
    pub fn json(status: u16, body: Value, what: &str) -> Self {
        Self {
            status,
            body: body.to_string(),
            expect: None,
            from: what.to_owned(),
        }
    }
}

/// One recorded request.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    /// Header names in lowercase.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    /// The status answered.
    pub answered: u16,
}

impl Request {
    pub fn header(&self, k: &str) -> Option<&str> {
        self.headers.get(k).map(String::as_str)
    }
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{} {}: body is not JSON: {e}", self.method, self.target))
    }
}

/// What a [`Handler`] answers.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Answer {
    /// A Kubernetes `Status` of `code` with `message` (reason `ReplayMismatch`).
    pub fn status(code: u16, message: &str) -> Self {
        Self {
            status: code,
            content_type: "application/json".to_owned(),
            body: status_json(code, message).into_bytes(),
        }
    }
}

/// What answers the requests of a [`Server`]: called once per request, in the order they
/// arrive (the request is recorded with the status answered afterwards).
pub trait Handler: Send + Sync + 'static {
    fn answer(&self, request: &Request) -> Answer;
}

/// A plain HTTP/1.1 server on 127.0.0.1 (port 0) answering with a [`Handler`], and a kubeconfig
/// pointing at it (see [`kubeconfig`]).
pub struct Server {
    pub url: String,
    dir: tempfile::TempDir,
}

impl Server {
    pub fn start(handler: Arc<dyn Handler>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let handler = handler.clone();
                thread::spawn(move || serve(stream, &*handler));
            }
        });
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kubeconfig"), kubeconfig(&url)).unwrap();
        Server { url, dir }
    }

    /// The kubeconfig pointing at the server.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<Request>,
}

/// The queue of [`Reply`]s as a [`Handler`].
struct Queue(Arc<Mutex<State>>);

impl Handler for Queue {
    fn answer(&self, request: &Request) -> Answer {
        let mut st = self.0.lock().unwrap();
        let (method, target) = (&request.method, &request.target);
        let answer = match st.replies.pop_front() {
            None => Answer::status(
                599,
                &format!("replay: no answer queued for {method} {target}"),
            ),
            Some(r) => match &r.expect {
                Some((m, p)) if m != method || p != request.path() => Answer::status(
                    599,
                    &format!(
                        "replay: {method} {target} is not the request of capture {} ({m} {p})",
                        r.from
                    ),
                ),
                _ => Answer {
                    status: r.status,
                    content_type: "application/json".to_owned(),
                    body: r.body.into_bytes(),
                },
            },
        };
        let mut recorded = request.clone();
        recorded.answered = answer.status;
        st.requests.push(recorded);
        answer
    }
}

/// The loopback server answering queued [`Reply`]s in order, recording every request, and a
/// kubeconfig pointing at it.
pub struct Replay {
    pub url: String,
    state: Arc<Mutex<State>>,
    server: Server,
}

impl Replay {
    /// Starts the server and writes a kubeconfig with the contexts `admin` (current; token
    /// `admin-token`), `viewer` (`viewer-token`) and `wrong` (`wrong-token`), the tokens of the
    /// captures' `auth` fields.
    pub fn start() -> Replay {
        let state = Arc::new(Mutex::new(State::default()));
        let server = Server::start(Arc::new(Queue(state.clone())));
        Replay {
            url: server.url.clone(),
            state,
            server,
        }
    }

    /// The kubeconfig pointing at the server.
    pub fn kubeconfig(&self) -> PathBuf {
        self.server.kubeconfig()
    }

    pub fn push(&self, reply: Reply) -> &Self {
        self.state.lock().unwrap().replies.push_back(reply);
        self
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The only request so far.
    pub fn request(&self) -> Request {
        let r = self.requests();
        assert_eq!(r.len(), 1, "expected one request, got {r:#?}");
        r.into_iter().next().unwrap()
    }

    pub fn pending(&self) -> usize {
        self.state.lock().unwrap().replies.len()
    }
}

/// A kubeconfig of three contexts on `url`.
pub fn kubeconfig(url: &str) -> String {
    let mut s = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: replay\n  cluster:\n    server: {url}\n\
         users:\n"
    );
    for u in ["admin", "viewer", "wrong"] {
        s.push_str(&format!("- name: {u}\n  user:\n    token: {u}-token\n"));
    }
    s.push_str("contexts:\n");
    for u in ["admin", "viewer", "wrong"] {
        s.push_str(&format!(
            "- name: {u}\n  context:\n    cluster: replay\n    user: {u}\n    namespace: default\n"
        ));
    }
    s.push_str("current-context: admin\n");
    s
}

/// Reads one line (without CR LF); `None` at the end of the stream.
fn line(reader: &mut impl BufRead) -> Option<String> {
    let mut l = String::new();
    if reader.read_line(&mut l).unwrap_or(0) == 0 {
        return None;
    }
    Some(l.trim_end_matches(['\r', '\n']).to_owned())
}

fn read_body(reader: &mut impl BufRead, headers: &BTreeMap<String, String>) -> Option<Vec<u8>> {
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        let mut body = Vec::new();
        loop {
            let size = usize::from_str_radix(line(reader)?.split(';').next()?.trim(), 16).ok()?;
            let mut chunk = vec![0; size];
            reader.read_exact(&mut chunk).ok()?;
            body.extend(chunk);
            line(reader)?;
            if size == 0 {
                return Some(body);
            }
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

fn serve(stream: TcpStream, handler: &dyn Handler) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let Some(request_line) = line(&mut reader) else {
            return;
        };
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let target = parts.next().unwrap_or("").to_owned();
        let mut headers = BTreeMap::new();
        loop {
            let Some(h) = line(&mut reader) else { return };
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
        let Some(body) = read_body(&mut reader, &headers) else {
            return;
        };
        let request = Request {
            method,
            target,
            headers,
            body,
            answered: 0,
        };
        let answer = handler.answer(&request);
        let head = format!(
            "HTTP/1.1 {} Replay\r\nContent-Type: {}\r\nContent-Length: {}\r\n\r\n",
            answer.status,
            answer.content_type,
            answer.body.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(&answer.body).is_err() {
            return;
        }
        let _ = out.flush();
    }
}

fn status_json(code: u16, message: &str) -> String {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "ReplayMismatch", "code": code,
    })
    .to_string()
}

/// A path that exists nowhere, for a kubeconfig that must not be found.
pub fn nowhere() -> &'static Path {
    Path::new("/nonexistent/vnfm-k8s/kubeconfig")
}
