//! A loopback HTTP/1.1 server (127.0.0.1, port 0) that answers with queued replies, in order,
//! and records every request. Enough HTTP for reqwest: keep-alive, Content-Length bodies.

#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

/// One queued answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Heat's behaviour: this body (HTML) when the request lacks `Accept: application/json`.
    pub html_without_accept: Option<String>,
}

impl Reply {
    pub fn json(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.into(),
            html_without_accept: None,
        }
    }
    pub fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: String::new(),
            html_without_accept: None,
        }
    }
    /// No answer: the mock reads the request, records it (answered 0) and closes the
    /// connection, as a server does with a keep-alive connection it timed out while the
    /// request was on its way.
    pub fn hang_up() -> Self {
        Self::empty(0)
    }
    pub fn with_header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }
    pub fn html_without_accept(mut self, html: impl Into<String>) -> Self {
        self.html_without_accept = Some(html.into());
        self
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
    pub body: String,
    /// The status the mock answered.
    pub answered: u16,
}

impl Request {
    pub fn header(&self, k: &str) -> Option<&str> {
        self.headers.get(k).map(String::as_str)
    }
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<Request>,
}

#[derive(Clone)]
pub struct Mock {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl Mock {
    pub fn start() -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let st = st.clone();
                thread::spawn(move || serve(stream, &st));
            }
        });
        Mock { url, state }
    }

    pub fn push(&self, reply: Reply) -> &Self {
        self.state.lock().unwrap().replies.push_back(reply);
        self
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn pending(&self) -> usize {
        self.state.lock().unwrap().replies.len()
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let target = parts.next().unwrap_or("").to_owned();
        let mut headers = BTreeMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
        let len: usize = headers
            .get("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let reply = {
            let mut st = state.lock().unwrap();
            let reply = st.replies.pop_front().unwrap_or_else(|| {
                Reply::json(
                    599,
                    format!(r#"{{"error": {{"message": "mock: no reply queued for {method} {target}"}}}}"#),
                )
            });
            st.requests.push(Request {
                method,
                target,
                headers: headers.clone(),
                body: String::from_utf8_lossy(&body).into_owned(),
                answered: reply.status,
            });
            reply
        };
        if reply.status == 0 {
            return;
        }
        let accepts_json = headers
            .get("accept")
            .is_some_and(|a| a.contains("application/json"));
        let (body, ctype) = match (&reply.html_without_accept, accepts_json) {
            (Some(html), false) => (html.clone(), Some("text/html; charset=UTF-8")),
            _ => (reply.body.clone(), None),
        };
        let mut head = format!(
            "HTTP/1.1 {} Mock\r\nContent-Length: {}\r\n",
            reply.status,
            body.len()
        );
        for (k, v) in &reply.headers {
            if ctype.is_some() && k.eq_ignore_ascii_case("content-type") {
                continue;
            }
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(c) = ctype {
            head.push_str(&format!("Content-Type: {c}\r\n"));
        }
        head.push_str("\r\n");
        if out.write_all(head.as_bytes()).is_err() || out.write_all(body.as_bytes()).is_err() {
            return;
        }
        let _ = out.flush();
    }
}
