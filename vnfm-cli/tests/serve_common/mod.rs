//! Shared by the `serve_*` tests: a minimal HTTP/1.1 client over loopback, a server over a
//! temporary state file, and helpers for the LCM API.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use vnfm_cli::config::{Config, Secret};
use vnfm_cli::serve::Server;

/// The demo package's vnfdId (the built-in package of the CLI).
pub const DEMO_VNFD: &str = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d";
pub const BASIC: (&str, &str) = ("vnfm", "vnfm-secret");
pub const BASIC_HEADER: &str = "Basic dm5mbTp2bmZtLXNlY3JldA==";
pub const BEARER: &str = "vnfm-test-token";

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    /// Asserts a SOL013 ProblemDetails of `status` and returns it.
    pub fn problem(&self, status: u16) -> Value {
        assert_eq!(
            self.status,
            status,
            "{}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "{self:?}"
        );
        let p = self.json();
        assert_eq!(p["status"], status, "{p}");
        assert!(p["detail"].as_str().is_some_and(|d| !d.is_empty()), "{p}");
        assert!(p["title"].is_string(), "{p}");
        p
    }
}

/// One request on a fresh connection.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).await.expect("write");
    // A server may answer (413, 401) before reading the whole body.
    let _ = s.write_all(body).await;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.expect("read");
    parse_reply(&raw)
}

pub fn parse_reply(raw: &[u8]) -> Reply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let p = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .expect("chunk size");
            let n =
                usize::from_str_radix(std::str::from_utf8(&rest[..p]).unwrap().trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&rest[p + 2..p + 2 + n]);
            rest = &rest[p + 2 + n + 2..];
        }
        body = out;
    }
    Reply {
        status,
        headers,
        body,
    }
}

pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, &[], b"").await
}

pub async fn post_json(addr: SocketAddr, path: &str, body: &Value) -> Reply {
    request(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        &serde_json::to_vec(body).unwrap(),
    )
    .await
}

/// A configuration over `dir/state.sqlite`, listening on a free loopback port, both alert
/// endpoints on, heal with basic auth `vnfm:vnfm-secret` and scale with the bearer token.
pub fn config(dir: &Path, timer_interval: u64) -> Config {
    let mut c = Config::default();
    c.state.path = Some(dir.join("state.sqlite"));
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    // The demo cloud has a full zone: reselection moves VNFCs out of it.
    c.placement.reselect_zones = true;
    c.placement.fallback_best_effort = true;
    // The tests' callbacks listen on loopback, which the destination policy refuses by default.
    c.notifications.allow = vec!["127.0.0.0/8".into()];
    let p = &mut c.prometheus_plugin;
    p.plugin.auto_healing = true;
    p.plugin.auto_scaling = true;
    p.plugin.timer_interval = timer_interval;
    p.plugin.scale_cooldown = 1;
    p.bearer_token = Some(Secret::new(BEARER));
    p.basic_auth_user = Some(BASIC.0.into());
    p.basic_auth_password = Some(Secret::new(BASIC.1));
    c
}

pub async fn start(c: Config) -> Server {
    let quiet = std::env::var_os("VNFM_TEST_VERBOSE").is_none();
    Server::start(c, quiet).await.expect("server starts")
}

/// Waits until `f` returns Some, at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out after {secs} s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the occurrence at `location` is terminal; returns it.
pub async fn wait_op(addr: SocketAddr, location: &str) -> Value {
    eventually(30, location, || async {
        let op = get(addr, location).await.json();
        let s = op["operationState"].as_str().unwrap_or("").to_owned();
        (!["STARTING", "PROCESSING", "ROLLING_BACK"].contains(&s.as_str())).then_some(op)
    })
    .await
}

/// Creates an instance of `vnfd` and instantiates it with `flavour`; returns its id and the
/// finished occurrence.
pub async fn create_and_instantiate(
    addr: SocketAddr,
    vnfd: &str,
    flavour: &str,
) -> (String, Value) {
    let r = post_json(addr, "/vnflcm/v2/vnf_instances", &json!({"vnfdId": vnfd})).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let id = r.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        r.header("location"),
        Some(format!("/vnflcm/v2/vnf_instances/{id}").as_str())
    );
    let r = post_json(
        addr,
        &format!("/vnflcm/v2/vnf_instances/{id}/instantiate"),
        &json!({"flavourId": flavour}),
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = wait_op(addr, r.header("location").unwrap()).await;
    (id, op)
}

/// Sets `vnfConfigurableProperties` of `id` by a merge PATCH (a MODIFY_INFO, 202); returns
/// the answer.
pub async fn configure(addr: SocketAddr, id: &str, properties: Value) -> Reply {
    let body = serde_json::to_vec(&json!({ "vnfConfigurableProperties": properties })).unwrap();
    let r = request(
        addr,
        "PATCH",
        &format!("/vnflcm/v2/vnf_instances/{id}"),
        &[("Content-Type", "application/merge-patch+json")],
        &body,
    )
    .await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    r
}

/// Creates and instantiates a demo instance with auto-heal and auto-scale enabled; returns
/// its id.
pub async fn instantiated(addr: SocketAddr) -> String {
    let (id, op) = create_and_instantiate(addr, DEMO_VNFD, "default").await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    let r = configure(
        addr,
        &id,
        json!({"isAutohealEnabled": true, "isAutoscaleEnabled": true}),
    )
    .await;
    let op = get(addr, r.header("location").unwrap()).await.json();
    assert_eq!(op["operation"], "MODIFY_INFO");
    assert_eq!(op["operationState"], "COMPLETED");
    id
}

/// The instance's VNFCs: `vnfcInfo.id` -> server id.
pub async fn servers(addr: SocketAddr, id: &str) -> std::collections::BTreeMap<String, String> {
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    inst["instantiatedVnfInfo"]["vnfcResourceInfo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["id"].as_str().unwrap().to_owned(),
                v["computeResource"]["resourceId"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect()
}

pub async fn scale_level(addr: SocketAddr, id: &str, aspect: &str) -> u64 {
    let inst = get(addr, &format!("/vnflcm/v2/vnf_instances/{id}"))
        .await
        .json();
    inst["instantiatedVnfInfo"]["scaleStatus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["aspectId"] == aspect)
        .map(|s| s["scaleLevel"].as_u64().unwrap())
        .unwrap()
}

/// The occurrences of `instance` of `operation` (whole: `all_fields`).
pub async fn ops(addr: SocketAddr, instance: &str, operation: &str) -> Vec<Value> {
    get(addr, "/vnflcm/v2/vnf_lcm_op_occs?all_fields")
        .await
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["vnfInstanceId"] == instance && o["operation"] == operation)
        .cloned()
        .collect()
}

/// An Alertmanager webhook (v4) body with `alerts`.
pub fn webhook(alerts: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "receiver": "vnfm", "status": "firing", "alerts": alerts, "groupLabels": {},
        "commonLabels": {}, "commonAnnotations": {}, "externalURL": "http://127.0.0.1:9093",
        "version": "4", "groupKey": "{}:{}", "truncatedAlerts": 0
    }))
    .unwrap()
}

/// A heal alert (snake_case labels unless `camel`).
pub fn heal_alert(
    instance: &str,
    vnfc: &str,
    fingerprint: &str,
    status: &str,
    camel: bool,
) -> Value {
    let (i, v) = if camel {
        ("vnfInstanceId", "vnfcInfoId")
    } else {
        ("vnf_instance_id", "vnfc_info_id")
    };
    json!({"status": status, "labels": {"alertname": "VnfcDown", "receiver_type": "tacker",
        "function_type": "auto_heal", i: instance, v: vnfc}, "annotations": {},
        "startsAt": "2027-01-15T08:00:00.123Z",
        "endsAt": if status == "firing" { "0001-01-01T00:00:00Z" } else { "2027-01-15T08:05:00Z" },
        "generatorURL": "", "fingerprint": fingerprint})
}

/// A scale alert.
pub fn scale_alert(instance: &str, aspect: &str, kind: &str, fingerprint: &str) -> Value {
    json!({"status": "firing", "labels": {"alertname": "VnfHighLoad", "receiver_type": "tacker",
        "function_type": "auto_scale", "vnf_instance_id": instance, "auto_scale_type": kind,
        "aspect_id": aspect}, "annotations": {}, "startsAt": "2027-01-15T08:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": fingerprint})
}

pub async fn post_alert(
    addr: SocketAddr,
    endpoint: &str,
    auth: Option<&str>,
    body: &[u8],
) -> Reply {
    let mut h = vec![("Content-Type", "application/json")];
    if let Some(a) = auth {
        h.push(("Authorization", a));
    }
    request(addr, "POST", &format!("/alert/{endpoint}"), &h, body).await
}

/// The value of the metric line `name{labels}` (exact text before the value), 0 when absent.
pub fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0)
}

/// `/metrics`, the `replica` label every series carries taken out (the series read as they
/// read on one replica; `serve_logs.rs` checks the label).
pub async fn metrics(addr: SocketAddr) -> String {
    let r = get(addr, "/metrics").await;
    assert_eq!(r.status, 200);
    without_replica(&String::from_utf8(r.body).unwrap())
}

/// `text` (metrics) without the `replica="..."` label of each series.
pub fn without_replica(text: &str) -> String {
    text.lines()
        .map(|l| {
            let Some(start) = l.find("{replica=\"") else {
                return format!("{l}\n");
            };
            let value = start + "{replica=\"".len();
            let end = value + l[value..].find('"').unwrap() + 1;
            match &l[end..] {
                r if r.starts_with(',') => format!("{}{{{}\n", &l[..start], &r[1..]),
                r => format!("{}{}\n", &l[..start], &r[1..]),
            }
        })
        .collect()
}

/// The address in a line that says where `vnfm serve` listens (text or JSON), if it is one.
pub fn listening_addr(line: &str) -> Option<SocketAddr> {
    let rest = line.split_once("listening on http://")?.1;
    rest.split(|c: char| c.is_whitespace() || c == '"')
        .next()?
        .parse()
        .ok()
}

/// The metrics once the server is settled: no heal window pending, no instance busy (nothing
/// runs, and nothing an alert asked for is about to start: a window the dispatcher took keeps
/// its instance busy until its heal ends or is refused) and no operation task left. Both
/// gauges are read in one look under the server's lock. A positive signal to wait for before
/// asserting that nothing else happened; only valid when no operation holds an instance.
pub async fn settled(addr: SocketAddr) -> String {
    const GAUGES: [&str; 3] = [
        "vnfm_heal_windows_pending",
        "vnfm_instances_busy",
        "vnfm_lcm_operations_running",
    ];
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let m = metrics(addr).await;
        let values: Vec<u64> = GAUGES.iter().map(|g| metric(&m, g)).collect();
        if values.iter().all(|v| *v == 0) {
            return m;
        }
        // On failure, the gauges that stayed up, and the metrics as a whole.
        assert!(
            Instant::now() < end,
            "timed out after 30 s waiting for no pending window, no busy instance, no \
             operation running: {:?}\n{m}",
            GAUGES.iter().zip(&values).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the counter `series` reaches `want`, asserts that it did not go past it, and
/// returns the metrics text of that moment.
pub async fn metric_reaches(addr: SocketAddr, series: &str, want: u64) -> String {
    let m = eventually(30, &format!("{series} = {want}"), || async {
        let m = metrics(addr).await;
        (metric(&m, series) >= want).then_some(m)
    })
    .await;
    assert_eq!(metric(&m, series), want, "{series}:\n{m}");
    m
}

/// `vnfm --config CONFIG serve`, every `VNFM_*` variable of the test's environment removed;
/// with `open_files`, under `ulimit -n` (a shell sets the limit, then execs the server).
pub fn serve_command(config: &Path, open_files: Option<u32>) -> std::process::Command {
    let mut cmd = match open_files {
        Some(files) => {
            let mut sh = std::process::Command::new("sh");
            sh.arg("-c")
                .arg(format!("ulimit -n {files} && exec \"$0\" \"$@\""))
                .arg(env!("CARGO_BIN_EXE_vnfm"));
            sh
        }
        None => std::process::Command::new(env!("CARGO_BIN_EXE_vnfm")),
    };
    cmd.arg("--config")
        .arg(config)
        .arg("serve")
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, _) in std::env::vars() {
        if k.starts_with("VNFM_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// A child `vnfm serve`: its address from the line that says where it listens, the rest of
/// its stderr read on (so that it never blocks on a full pipe); killed when dropped.
pub struct ServeProcess {
    pub child: std::process::Child,
    pub addr: SocketAddr,
    pub stderr: std::sync::mpsc::Receiver<String>,
}

impl ServeProcess {
    pub fn start(mut cmd: std::process::Command) -> ServeProcess {
        use std::io::BufRead;
        let mut child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("vnfm serve starts");
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("vnfm serve says where it listens")
                .unwrap();
            if let Some(a) = listening_addr(&line) {
                break a;
            }
        };
        let (tx, stderr) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        ServeProcess {
            child,
            addr,
            stderr,
        }
    }

    /// SIGTERM, and the exit status with what the server printed.
    pub fn stop(mut self) -> (Option<i32>, String) {
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = self.child.wait().unwrap();
        let text: Vec<String> = self.stderr.try_iter().collect();
        (status.code(), text.join("\n"))
    }

    /// SIGKILL, as a crash.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Copies the folder `from` to `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
