//! Several `vnfm serve` replicas on one PostgreSQL database (issue 27, acceptance 2, 3 and 4):
//! three `vnfm serve` processes on a database of the test's own, a subscriber (an HTTP server
//! of the test's own) subscribed through one replica, an NFVO-like client spreading SOL003
//! requests round-robin over the replicas (create, instantiate, enable auto-heal, scale out,
//! heal, terminate, delete on 20 instances, a few at a time, retrying a 409 or a 503 as an
//! NFVO does and failing an occurrence left in FAILED_TEMP as an NFVO decides to) and an
//! Alertmanager-like client spreading heal alerts for the instances' VNFCs over them (each
//! alert to every replica, and repeated to random replicas for the rest of the run).
//!
//! What is asserted at the end of each run (all of it reported before the first failure):
//! - every occurrence ends (COMPLETED, FAILED or ROLLED_BACK; none STARTING, PROCESSING,
//!   ROLLING_BACK or FAILED_TEMP);
//! - never two occurrences at once on one instance (from their `startTime` and the time they
//!   entered their final state);
//! - one automatic heal per instance (its alerts all fall in one heal window, whichever
//!   replica got them);
//! - every notification reaches the subscriber (the creation and deletion of every instance,
//!   the STARTING and the final state of every occurrence), and a notification that comes
//!   again has the same `id`;
//! - every answer of the replicas is one an NFVO expects (no 500).
//!
//! The variants: one replica SIGKILLed while it runs an instantiate and started again later
//! (its occurrence taken over as FAILED_TEMP / INTERRUPTED once its lease expired, nothing
//! lost), and the same under `[state] takeover = "resume"` (its instantiate run on by another
//! replica to COMPLETED, never FAILED_TEMP); the database stopped and started again with `pg_ctl` in the middle of the run (503
//! ProblemDetails while it is down, the replicas answer again without a restart).
//!
//! Needs `VNFM_TEST_POSTGRES_URL` (see serve_postgres.rs); without it each test records a skip
//! of the suite `postgres`. The replicas' logs are kept in
//! `$CARGO_TARGET_TMPDIR/replicas/<test>/replica-<i>.log`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod pg_common;
mod serve_common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get as route_get;
use axum::Router;
use chrono::{DateTime, Utc};
use pg_common::{admin_url, TestDb};
use serde_json::{json, Value};
use serve_common::{heal_alert, parse_reply, serve_command, webhook, Reply, ServeProcess};
use serve_common::{BASIC_HEADER, DEMO_VNFD};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const REPLICAS: usize = 3;
const INSTANCES: usize = 20;
/// Instances driven at once by the NFVO.
const AT_ONCE: usize = 5;
/// The tests of this file run one at a time: each runs three replicas under load, and the
/// machine of CI has two cores (a step not done within 90 s would fail a test that shares
/// them with another).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `[state] lease_seconds`: a killed replica's occurrences are taken over after this.
const LEASE: u64 = 2;
/// The lease of the database variant: longer than the outage (3 s), so that no running
/// operation of a live replica is taken over.
const DB_LEASE: u64 = 10;
/// `[prometheus_plugin] timer_interval`: a heal window's length.
const WINDOW: u64 = 2;
/// How long the NFVO tries one step (retrying 409 and 503) before it reports it.
const STEP_SECS: u64 = 90;

// ---------------------------------------------------------------------------------------
// The database

/// A PostgreSQL cluster of one test (`scripts/postgres-dev.sh start`), to be stopped and
/// started again under the replicas with `pg_ctl`; stopped when dropped.
struct OwnCluster {
    dir: tempfile::TempDir,
    url: String,
}

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

impl OwnCluster {
    fn start() -> OwnCluster {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(script("postgres-dev.sh"))
            .arg("start")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "postgres-dev.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("export VNFM_TEST_POSTGRES_URL="))
            .unwrap()
            .to_owned();
        OwnCluster { dir, url }
    }

    /// `pg_ctl ARGS` on the cluster, as its owner.
    fn pg_ctl(&self, args: &[&str]) {
        let data = self.dir.path().join("data");
        let log = self.dir.path().join("postgres.log");
        let pg_ctl = format!("{PG_BIN}/pg_ctl");
        let mut cmd = if nix_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--", &pg_ctl]);
            c
        } else {
            std::process::Command::new(&pg_ctl)
        };
        let out = cmd
            .arg("--pgdata")
            .arg(&data)
            .arg("--log")
            .arg(&log)
            .args(["--wait", "--timeout=60"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(script("postgres-dev.sh"))
            .arg("stop")
            .arg(self.dir.path())
            .output();
    }
}

fn nix_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts")
        .join(name)
}

// ---------------------------------------------------------------------------------------
// The replicas

/// A cloud big enough for every instance (5 zones of 3 hosts: the demo VNF's VNFCs each in a
/// zone of its own, 4 after a scale-out, a healed VNFC on another host of its zone), with a stack create in progress for one poll (2 s) so that an
/// instantiate is still running when a replica is killed.
const CLOUD: &str = "zones:
  Z-1:
    hosts: {h-11: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}, h-12: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}, h-13: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}}
  Z-2:
    hosts: {h-21: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}, h-22: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}, h-23: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}}
  Z-3:
    hosts: {h-31: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}, h-32: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}, h-33: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}}
  Z-4:
    hosts: {h-41: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}, h-42: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}, h-43: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}}
  Z-5:
    hosts: {h-51: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}, h-52: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}, h-53: {vcpus: 256, memory_mb: 524288, disk_gb: 10000}}
flavors:
  m1.tiny: {vcpus: 1, memory_mb: 512, disk_gb: 1}
  m1.small: {vcpus: 1, memory_mb: 2048, disk_gb: 20}
  m1.medium: {vcpus: 2, memory_mb: 4096, disk_gb: 40}
images: [cirros, demo-frontend-image, demo-backend-image]
stack_create_shows: 1
";

/// The replicas' `vnfm.toml` in `dir`, with `[state] lease_seconds = lease` and `state`, more
/// keys of `[state]` (one per line).
fn write_config(dir: &Path, lease: u64, state: &str) -> PathBuf {
    let cloud = dir.join("cloud.yaml");
    std::fs::write(&cloud, CLOUD).unwrap();
    let config = dir.join("vnfm.toml");
    std::fs::write(
        &config,
        format!(
            "[vim]\ncloud = \"{}\"\n\n[state]\nlease_seconds = {lease}\n{state}\n\
             [placement]\nreselect_zones = true\nfallback_best_effort = true\n\n\
             [server]\nlisten = \"127.0.0.1:0\"\npage_size = 1000\n\n\
             [notifications]\nallow = [\"127.0.0.0/8\"]\nretry_initial_ms = 200\n\
             retry_max_delay_ms = 1000\ntimeout = 2\nclaim_seconds = 5\npoll_interval_ms = 200\n\n\
             [prometheus_plugin]\nauto_healing = true\nauto_scaling = true\n\
             timer_interval = {WINDOW}\nscale_cooldown = 1\nbasic_auth_user = \"vnfm\"\n\
             basic_auth_password = \"vnfm-secret\"\n",
            cloud.display()
        ),
    )
    .unwrap();
    config
}

/// The replicas of one test: their processes, the addresses the clients spread over (None
/// while a replica is down) and what each printed.
struct Replicas {
    url: String,
    config: PathBuf,
    home: PathBuf,
    procs: Vec<Option<ServeProcess>>,
    addrs: Arc<RwLock<Vec<Option<SocketAddr>>>>,
    logs: Vec<Vec<String>>,
}

impl Replicas {
    fn start(url: &str, dir: &Path, lease: u64) -> Replicas {
        Self::start_with(url, dir, lease, "")
    }

    /// [`Replicas::start`] with more keys of `[state]`.
    fn start_with(url: &str, dir: &Path, lease: u64, state: &str) -> Replicas {
        let mut r = Replicas {
            url: url.to_owned(),
            config: write_config(dir, lease, state),
            home: dir.to_owned(),
            procs: (0..REPLICAS).map(|_| None).collect(),
            addrs: Arc::new(RwLock::new(vec![None; REPLICAS])),
            logs: vec![Vec::new(); REPLICAS],
        };
        for i in 0..REPLICAS {
            r.start_one(i);
        }
        r
    }

    fn start_one(&mut self, i: usize) {
        let mut cmd = serve_command(&self.config, None);
        cmd.env("VNFM_STATE_URL", &self.url)
            .env("VNFM_REPLICA_ID", format!("replica-{}", i + 1))
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", self.home.join("state"));
        let p = ServeProcess::start(cmd);
        self.logs[i].push(format!("--- replica-{} started on {}", i + 1, p.addr));
        self.addrs.write().unwrap()[i] = Some(p.addr);
        self.procs[i] = Some(p);
    }

    fn kill(&mut self, i: usize) {
        self.addrs.write().unwrap()[i] = None;
        let p = self.procs[i].take().unwrap();
        let lines: Vec<String> = p.stderr.try_iter().collect();
        self.logs[i].extend(lines);
        p.kill();
        self.logs[i].push(format!("--- replica-{} SIGKILLed", i + 1));
    }

    fn addr(&self, i: usize) -> SocketAddr {
        self.addrs.read().unwrap()[i].unwrap()
    }

    /// Stops every replica (SIGTERM), writes their logs beside the test binary's temporary
    /// folder and returns where.
    fn stop(mut self, test: &str) -> PathBuf {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("replicas")
            .join(test);
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..REPLICAS {
            if let Some(p) = self.procs[i].take() {
                let (code, said) = p.stop();
                self.logs[i].push(said);
                self.logs[i].push(format!("--- replica-{} exited with {code:?}", i + 1));
            }
            std::fs::write(
                dir.join(format!("replica-{}.log", i + 1)),
                self.logs[i].join("\n"),
            )
            .unwrap();
        }
        dir
    }
}

// ---------------------------------------------------------------------------------------
// The subscriber

#[derive(Default)]
struct Subscriber {
    got: Mutex<Vec<Value>>,
}

async fn subscriber() -> (Arc<Subscriber>, SocketAddr) {
    let s = Arc::new(Subscriber::default());
    let app = Router::new()
        .route(
            "/cb",
            route_get(|| async { StatusCode::NO_CONTENT }).post(
                |State(s): State<Arc<Subscriber>>, body: String| async move {
                    s.got
                        .lock()
                        .unwrap()
                        .push(serde_json::from_str(&body).unwrap());
                    StatusCode::NO_CONTENT
                },
            ),
        )
        .with_state(s.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (s, a)
}

// ---------------------------------------------------------------------------------------
// The clients

/// One request on a fresh connection; Err when the connection fails or the answer is cut
/// (a replica killed, a request that took too long).
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Reply, String> {
    let go = async {
        let mut s = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
             Content-Length: {}\r\n",
            body.len()
        );
        for (n, v) in headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes())
            .await
            .map_err(|e| format!("write {addr}: {e}"))?;
        let _ = s.write_all(body).await;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)
            .await
            .map_err(|e| format!("read {addr}: {e}"))?;
        if !raw.windows(4).any(|w| w == b"\r\n\r\n") {
            return Err(format!("{addr}: the answer was cut ({} bytes)", raw.len()));
        }
        Ok(parse_reply(&raw))
    };
    tokio::time::timeout(Duration::from_secs(40), go)
        .await
        .unwrap_or_else(|_| Err(format!("{addr}: no answer within 40 s")))
}

/// `what` with each id (36 characters with dashes) replaced by `{id}`.
fn shape(what: &str) -> String {
    what.split('/')
        .map(|seg| {
            let (id, rest) = seg.split_at(seg.len().min(36));
            if id.len() == 36 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                format!("{{id}}{rest}")
            } else {
                seg.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// What the clients saw that the assertions need.
#[derive(Default)]
struct Seen {
    /// Instances created (201), and those deleted (204).
    created: BTreeSet<String>,
    deleted: BTreeSet<String>,
    /// Occurrences the NFVO found in FAILED_TEMP: id -> (operation, failureKind, detail).
    failed_temp: BTreeMap<String, (String, String, String)>,
    /// Answers no NFVO expects (a 500, a 503 without ProblemDetails, ...).
    unexpected: Vec<String>,
    /// Steps the NFVO gave up on (an occurrence that never ended, retries beyond STEP_SECS).
    gave_up: Vec<String>,
    /// Answers while the database was down, by status and request (ids left out).
    while_down: BTreeMap<String, usize>,
    /// Heal alerts accepted (the webhooks answered 204), and sent in all.
    alerts_sent: usize,
    /// The alert bodies sent, to be repeated by the storm.
    alert_bodies: Vec<Vec<u8>>,
    /// The instances whose heal alerts were sent.
    alerted: BTreeSet<String>,
    /// The occurrences of each instance as they were just before it was deleted (the
    /// database deletes them with it).
    ops_of_deleted: Vec<Value>,
    /// Replica index (0-based) of the instantiates the NFVO got a 202 for: occurrence -> replica.
    instantiated_on: BTreeMap<String, usize>,
}

struct Nfvo {
    addrs: Arc<RwLock<Vec<Option<SocketAddr>>>>,
    next: AtomicUsize,
    seen: Mutex<Seen>,
    db_down: AtomicBool,
    /// Sends (replica, occurrence location) when an instantiate was accepted by replica 2 (the
    /// one the kill variant kills).
    on_instantiate: Mutex<Option<tokio::sync::mpsc::UnboundedSender<String>>>,
    started: AtomicUsize,
}

impl Nfvo {
    fn new(addrs: Arc<RwLock<Vec<Option<SocketAddr>>>>) -> Nfvo {
        Nfvo {
            addrs,
            next: AtomicUsize::new(0),
            seen: Mutex::new(Seen::default()),
            db_down: AtomicBool::new(false),
            on_instantiate: Mutex::new(None),
            started: AtomicUsize::new(0),
        }
    }

    /// The next live replica, round-robin: (index, address).
    async fn pick(&self) -> (usize, SocketAddr) {
        loop {
            let live: Vec<(usize, SocketAddr)> = self
                .addrs
                .read()
                .unwrap()
                .iter()
                .enumerate()
                .filter_map(|(i, a)| a.map(|a| (i, a)))
                .collect();
            if !live.is_empty() {
                return live[self.next.fetch_add(1, Ordering::Relaxed) % live.len()];
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Notes an answer: while the database is down, by status; a 5xx other than a 503
    /// ProblemDetails is unexpected.
    fn note(&self, what: &str, r: &Reply) {
        if self.db_down.load(Ordering::SeqCst) {
            *self
                .seen
                .lock()
                .unwrap()
                .while_down
                .entry(format!("{} {}", r.status, shape(what)))
                .or_default() += 1;
        }
        let problem = r.header("content-type") == Some("application/problem+json");
        if r.status >= 500 && !(r.status == 503 && problem) {
            self.seen.lock().unwrap().unexpected.push(format!(
                "{what}: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
    }

    /// A GET on any replica, tried again on the next one (a replica down, a 503) until it
    /// answers 200 or 404.
    async fn get(&self, path: &str) -> Option<Value> {
        let end = tokio::time::Instant::now() + Duration::from_secs(STEP_SECS);
        loop {
            let (_, addr) = self.pick().await;
            if let Ok(r) = send(addr, "GET", path, &[], b"").await {
                self.note(&format!("GET {path}"), &r);
                match r.status {
                    200 => return Some(r.json()),
                    404 => return None,
                    _ => {}
                }
            }
            if tokio::time::Instant::now() > end {
                self.seen
                    .lock()
                    .unwrap()
                    .gave_up
                    .push(format!("GET {path}: no answer within {STEP_SECS} s"));
                return None;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The occurrences of `instance`.
    async fn ops_of(&self, instance: &str) -> Vec<Value> {
        self.get(&format!(
            "/vnflcm/v2/vnf_lcm_op_occs?all_fields&filter=(eq,vnfInstanceId,{instance})"
        ))
        .await
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
    }

    /// A POST of an LCM operation as an NFVO sends it: again on a 409 (after failing an
    /// occurrence of the instance left in FAILED_TEMP) or a 503 or a lost answer (unless the
    /// lost request was accepted after all: a new occurrence of `operation` on the instance).
    /// Returns the occurrence once it ended, or None when the request was refused.
    async fn lcm(&self, instance: &str, operation: &str, path: &str, body: Value) -> Option<Value> {
        self.lcm_with("POST", "application/json", instance, operation, path, body)
            .await
    }

    /// [`Nfvo::lcm`] with another method and content type (a PATCH).
    async fn lcm_with(
        &self,
        method: &str,
        content_type: &str,
        instance: &str,
        operation: &str,
        path: &str,
        body: Value,
    ) -> Option<Value> {
        let end = tokio::time::Instant::now() + Duration::from_secs(STEP_SECS);
        let body = serde_json::to_vec(&body).unwrap();
        let mut last = String::new();
        loop {
            if tokio::time::Instant::now() > end {
                self.seen.lock().unwrap().gave_up.push(format!(
                    "{operation} of {instance}: not accepted within {STEP_SECS} s (last: {last})"
                ));
                return None;
            }
            let known: BTreeSet<String> = self
                .ops_of(instance)
                .await
                .iter()
                .map(|o| o["id"].as_str().unwrap().to_owned())
                .collect();
            let (replica, addr) = self.pick().await;
            let r = send(addr, method, path, &[("Content-Type", content_type)], &body).await;
            let r = match r {
                Ok(r) => r,
                Err(_) => {
                    // Was it accepted before the answer was lost?
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let new = self.ops_of(instance).await.into_iter().find(|o| {
                        o["operation"] == operation
                            && !known.contains(o["id"].as_str().unwrap_or(""))
                    });
                    if let Some(o) = new {
                        let loc =
                            format!("/vnflcm/v2/vnf_lcm_op_occs/{}", o["id"].as_str().unwrap());
                        return self.wait_op(&loc).await;
                    }
                    continue;
                }
            };
            self.note(&format!("{method} {path}"), &r);
            if r.status != 202 {
                last = format!("{} {}", r.status, String::from_utf8_lossy(&r.body));
            }
            match r.status {
                202 => {
                    let loc = r.header("location").unwrap().to_owned();
                    if operation == "INSTANTIATE" {
                        let id = loc.rsplit('/').next().unwrap().to_owned();
                        self.seen
                            .lock()
                            .unwrap()
                            .instantiated_on
                            .insert(id, replica);
                        if replica == 1 {
                            if let Some(tx) = self.on_instantiate.lock().unwrap().as_ref() {
                                let _ = tx.send(loc.clone());
                            }
                        }
                    }
                    return self.wait_op(&loc).await;
                }
                409 => {
                    for o in self.ops_of(instance).await {
                        if o["operationState"] == "FAILED_TEMP" {
                            self.fail(&o).await;
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                503 => tokio::time::sleep(Duration::from_millis(300)).await,
                _ => {
                    self.seen.lock().unwrap().unexpected.push(format!(
                        "{operation} of {instance} refused: {} {}",
                        r.status,
                        String::from_utf8_lossy(&r.body)
                    ));
                    return None;
                }
            }
        }
    }

    /// Notes an occurrence in FAILED_TEMP and fails it (the NFVO's decision).
    async fn fail(&self, op: &Value) {
        let id = op["id"].as_str().unwrap().to_owned();
        self.seen.lock().unwrap().failed_temp.insert(
            id.clone(),
            (
                op["operation"].as_str().unwrap_or("").to_owned(),
                op["error"]["failureKind"].as_str().unwrap_or("").to_owned(),
                op["error"]["detail"].as_str().unwrap_or("").to_owned(),
            ),
        );
        let path = format!("/vnflcm/v2/vnf_lcm_op_occs/{id}/fail");
        let end = tokio::time::Instant::now() + Duration::from_secs(STEP_SECS);
        while tokio::time::Instant::now() < end {
            let (_, addr) = self.pick().await;
            if let Ok(r) = send(addr, "POST", &path, &[], b"").await {
                self.note(&format!("POST {path}"), &r);
                // 200: failed; 409: not FAILED_TEMP any more (another NFVO task failed it).
                if r.status == 200 || r.status == 409 {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.seen
            .lock()
            .unwrap()
            .gave_up
            .push(format!("fail of {id}: not answered within {STEP_SECS} s"));
    }

    /// Waits until the occurrence at `loc` ended (failing it when it is left FAILED_TEMP).
    async fn wait_op(&self, loc: &str) -> Option<Value> {
        let end = tokio::time::Instant::now() + Duration::from_secs(STEP_SECS);
        let mut last = Value::Null;
        while tokio::time::Instant::now() < end {
            let op = self.get(loc).await?;
            match op["operationState"].as_str().unwrap_or("") {
                "COMPLETED" | "FAILED" | "ROLLED_BACK" => return Some(op),
                "FAILED_TEMP" => self.fail(&op).await,
                _ => {}
            }
            last = op;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.seen.lock().unwrap().gave_up.push(format!(
            "{loc}: still {} after {STEP_SECS} s",
            last["operationState"]
        ));
        None
    }

    /// The whole life of one instance, with its heal alerts in the middle.
    async fn instance_life(self: Arc<Self>, n: usize) {
        self.started.fetch_add(1, Ordering::SeqCst);
        // Create (a lost answer: create another, the first is an orphan the NFVO never uses).
        let end = tokio::time::Instant::now() + Duration::from_secs(STEP_SECS);
        let body =
            serde_json::to_vec(&json!({"vnfdId": DEMO_VNFD, "vnfInstanceName": format!("r-{n}")}))
                .unwrap();
        let id = loop {
            if tokio::time::Instant::now() > end {
                self.seen
                    .lock()
                    .unwrap()
                    .gave_up
                    .push(format!("create r-{n}: not created within {STEP_SECS} s"));
                return;
            }
            let (_, addr) = self.pick().await;
            let hdr = [("Content-Type", "application/json")];
            if let Ok(r) = send(addr, "POST", "/vnflcm/v2/vnf_instances", &hdr, &body).await {
                self.note("POST /vnf_instances", &r);
                if r.status == 201 {
                    break r.json()["id"].as_str().unwrap().to_owned();
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        self.seen.lock().unwrap().created.insert(id.clone());
        let base = format!("/vnflcm/v2/vnf_instances/{id}");
        let inst = self
            .lcm(
                &id,
                "INSTANTIATE",
                &format!("{base}/instantiate"),
                json!({"flavourId": "default"}),
            )
            .await;
        if inst.is_some_and(|o| o["operationState"] == "COMPLETED") {
            self.enable_autoheal(&id).await;
            self.lcm(
                &id,
                "SCALE",
                &format!("{base}/scale"),
                json!({"type": "SCALE_OUT", "aspectId": "VDU1_scale", "numberOfSteps": 1}),
            )
            .await;
            self.alert(&id).await;
            self.lcm(&id, "HEAL", &format!("{base}/heal"), json!({}))
                .await;
        }
        // Terminate unless the instantiate did not take (rolled back, failed).
        let state = self.get(&base).await;
        if state.is_some_and(|i| i["instantiationState"] == "INSTANTIATED") {
            self.lcm(
                &id,
                "TERMINATE",
                &format!("{base}/terminate"),
                json!({"terminationType": "FORCEFUL"}),
            )
            .await;
        }
        let ops = self.ops_of(&id).await;
        self.seen.lock().unwrap().ops_of_deleted.extend(ops);
        // Delete (404 after a lost answer: it was deleted).
        let end = tokio::time::Instant::now() + Duration::from_secs(STEP_SECS);
        while tokio::time::Instant::now() < end {
            let (_, addr) = self.pick().await;
            if let Ok(r) = send(addr, "DELETE", &base, &[], b"").await {
                self.note(&format!("DELETE {base}"), &r);
                if r.status == 204 || r.status == 404 {
                    self.seen.lock().unwrap().deleted.insert(id.clone());
                    return;
                }
                if r.status == 409 {
                    for o in self.ops_of(&id).await {
                        if o["operationState"] == "FAILED_TEMP" {
                            self.fail(&o).await;
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.seen
            .lock()
            .unwrap()
            .gave_up
            .push(format!("DELETE {base}: not deleted within {STEP_SECS} s"));
    }

    /// PATCH isAutohealEnabled (a MODIFY_INFO), as the NFVO enables auto-heal.
    async fn enable_autoheal(&self, id: &str) {
        self.lcm_with(
            "PATCH",
            "application/merge-patch+json",
            id,
            "MODIFY_INFO",
            &format!("/vnflcm/v2/vnf_instances/{id}"),
            json!({"vnfConfigurableProperties": {"isAutohealEnabled": true}}),
        )
        .await;
    }

    /// The instance's heal alerts (one per VNFC, one webhook) sent to every live replica at
    /// once and again; then waits (at most the window and 30 s) for its automatic heal to end.
    async fn alert(&self, id: &str) {
        let Some(inst) = self.get(&format!("/vnflcm/v2/vnf_instances/{id}")).await else {
            return;
        };
        let alerts: Vec<Value> = inst["instantiatedVnfInfo"]["vnfcResourceInfo"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|v| {
                let vnfc = v["id"].as_str().unwrap();
                heal_alert(id, vnfc, &format!("{id}-{vnfc}"), "firing", false)
            })
            .collect();
        let body = webhook(&alerts);
        {
            let mut s = self.seen.lock().unwrap();
            s.alert_bodies.push(body.clone());
            s.alerted.insert(id.to_owned());
        }
        for _ in 0..2 {
            let addrs: Vec<SocketAddr> = self
                .addrs
                .read()
                .unwrap()
                .iter()
                .flatten()
                .copied()
                .collect();
            let sends = addrs.into_iter().map(|a| {
                let body = body.clone();
                async move { send_alert(a, &body).await }
            });
            for r in futures_util::future::join_all(sends)
                .await
                .into_iter()
                .flatten()
            {
                self.note("POST /alert/auto_healing", &r);
                self.seen.lock().unwrap().alerts_sent += 1;
            }
        }
        let end = tokio::time::Instant::now() + Duration::from_secs(WINDOW + 30);
        while tokio::time::Instant::now() < end {
            let heals: Vec<Value> = self
                .ops_of(id)
                .await
                .into_iter()
                .filter(|o| o["operation"] == "HEAL" && o["isAutomaticInvocation"] == true)
                .collect();
            if !heals.is_empty()
                && heals.iter().all(|o| {
                    ["COMPLETED", "FAILED", "ROLLED_BACK", "FAILED_TEMP"]
                        .contains(&o["operationState"].as_str().unwrap_or(""))
                })
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn send_alert(addr: SocketAddr, body: &[u8]) -> Result<Reply, String> {
    send(
        addr,
        "POST",
        "/alert/auto_healing",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", BASIC_HEADER),
        ],
        body,
    )
    .await
}

/// The Alertmanager's repeats: the webhooks already sent, again to random replicas, until
/// `stop` is set.
async fn alert_storm(nfvo: Arc<Nfvo>, stop: Arc<AtomicBool>) {
    let mut k = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let body = {
            let s = nfvo.seen.lock().unwrap();
            (!s.alert_bodies.is_empty()).then(|| s.alert_bodies[k % s.alert_bodies.len()].clone())
        };
        if let Some(body) = body {
            let (_, addr) = nfvo.pick().await;
            if let Ok(r) = send_alert(addr, &body).await {
                nfvo.note("POST /alert/auto_healing (repeat)", &r);
                nfvo.seen.lock().unwrap().alerts_sent += 1;
            }
        }
        k = k.wrapping_add(7);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The NFVO's whole run: `INSTANCES` lives, `AT_ONCE` at a time, and the alert storm beside.
async fn run(nfvo: Arc<Nfvo>) {
    let stop = Arc::new(AtomicBool::new(false));
    let storm = tokio::spawn(alert_storm(nfvo.clone(), stop.clone()));
    let gate = Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
    let mut lives = Vec::new();
    for n in 0..INSTANCES {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let nfvo = nfvo.clone();
        lives.push(tokio::spawn(async move {
            nfvo.instance_life(n).await;
            drop(permit);
        }));
    }
    for l in lives {
        l.await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    storm.await.unwrap();
}

// ---------------------------------------------------------------------------------------
// The checks

/// What the run's end is checked for; each entry a list of violations (empty: holds).
struct Report {
    checks: Vec<(&'static str, Vec<String>)>,
}

impl Report {
    fn print_and_assert(&self, test: &str, logs: &Path) {
        let mut text = format!("replicas {test} (logs: {}):\n", logs.display());
        for (name, v) in &self.checks {
            if v.is_empty() {
                text.push_str(&format!("  PASS {name}\n"));
            } else {
                text.push_str(&format!("  FAIL {name} ({}):\n", v.len()));
                for line in v.iter().take(12) {
                    text.push_str(&format!("       {line}\n"));
                }
                if v.len() > 12 {
                    text.push_str(&format!("       ... and {} more\n", v.len() - 12));
                }
            }
        }
        eprintln!("{text}");
        let failed: Vec<&str> = self
            .checks
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(name, _)| *name)
            .collect();
        assert!(
            failed.is_empty(),
            "replicas {test}: failed {failed:?} (the report above; logs: {})",
            logs.display()
        );
    }
}

fn time(op: &Value, field: &str) -> DateTime<Utc> {
    op[field]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .unwrap_or_else(|| panic!("{field} of {op}"))
        .with_timezone(&Utc)
}

/// The checks shared by every variant, on the occurrences and notifications at the end.
async fn check(nfvo: &Nfvo, sub: &Subscriber) -> Vec<(&'static str, Vec<String>)> {
    // Every occurrence ends (the sweep may still be taking over a dead replica's).
    let mut ops = Vec::new();
    for _ in 0..60 {
        ops = nfvo
            .get("/vnflcm/v2/vnf_lcm_op_occs?all_fields")
            .await
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default();
        if ops.iter().all(final_state) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // With those of the deleted instances, as they were before the deletion.
    let listed: BTreeSet<String> = ops.iter().map(|o| o["id"].to_string()).collect();
    let before: Vec<Value> = nfvo.seen.lock().unwrap().ops_of_deleted.clone();
    ops.extend(
        before
            .into_iter()
            .filter(|o| !listed.contains(&o["id"].to_string())),
    );
    let unended: Vec<String> = ops
        .iter()
        .filter(|o| !final_state(o))
        .map(|o| {
            format!(
                "{} {} of {}: {} {}",
                o["operation"], o["id"], o["vnfInstanceId"], o["operationState"], o["error"]
            )
        })
        .collect();

    // Never two at once on one instance.
    let mut by_instance: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for o in &ops {
        by_instance
            .entry(o["vnfInstanceId"].as_str().unwrap().to_owned())
            .or_default()
            .push(o);
    }
    let mut overlaps = Vec::new();
    for (inst, list) in &mut by_instance {
        list.sort_by_key(|o| time(o, "startTime"));
        for w in list.windows(2) {
            let (a, b) = (w[0], w[1]);
            if final_state(a) && time(b, "startTime") < time(a, "stateEnteredTime") {
                overlaps.push(format!(
                    "{inst}: {} {} ({} .. {} {}) and {} {} (from {})",
                    a["operation"],
                    a["id"],
                    a["startTime"],
                    a["stateEnteredTime"],
                    a["operationState"],
                    b["operation"],
                    b["id"],
                    b["startTime"]
                ));
            }
        }
    }

    // One automatic heal per alerted instance.
    let (alerted, created, deleted, mut answers) = {
        let seen = nfvo.seen.lock().unwrap();
        let mut answers = seen.unexpected.clone();
        answers.extend(seen.gave_up.iter().cloned());
        (
            seen.alerted.clone(),
            seen.created.clone(),
            seen.deleted.clone(),
            answers,
        )
    };
    answers.sort();
    let mut heals = Vec::new();
    for inst in &alerted {
        let auto: Vec<&&Value> = by_instance
            .get(inst)
            .map(|l| {
                l.iter()
                    .filter(|o| o["operation"] == "HEAL" && o["isAutomaticInvocation"] == true)
                    .collect()
            })
            .unwrap_or_default();
        if auto.len() != 1 {
            heals.push(format!(
                "{inst}: {} automatic heals for one window: {:?}",
                auto.len(),
                auto.iter()
                    .map(|o| format!("{} {}", o["id"], o["operationState"]))
                    .collect::<Vec<_>>()
            ));
        }
    }

    // Every notification reaches the subscriber; a repeat has the same id.
    let mut want: BTreeSet<String> = BTreeSet::new();
    for id in &created {
        want.insert(format!("VnfIdentifierCreationNotification {id}"));
    }
    for id in &deleted {
        want.insert(format!("VnfIdentifierDeletionNotification {id}"));
    }
    for o in &ops {
        want.insert(format!("{} {} STARTING", s(&o["id"]), s(&o["operation"])));
        want.insert(format!(
            "{} {} {}",
            s(&o["id"]),
            s(&o["operation"]),
            s(&o["operationState"])
        ));
    }
    let mut missing = Vec::new();
    let mut repeats = Vec::new();
    let mut got_keys = BTreeSet::new();
    for _ in 0..60 {
        let got = sub.got.lock().unwrap().clone();
        let mut ids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        got_keys.clear();
        for n in &got {
            let key = match n["notificationType"].as_str().unwrap_or("") {
                "VnfLcmOperationOccurrenceNotification" => format!(
                    "{} {} {}",
                    s(&n["vnfLcmOpOccId"]),
                    s(&n["operation"]),
                    s(&n["operationState"])
                ),
                t => format!("{t} {}", n["vnfInstanceId"].as_str().unwrap_or("")),
            };
            ids.entry(key.clone())
                .or_default()
                .insert(n["id"].as_str().unwrap_or("").to_owned());
            got_keys.insert(key);
        }
        repeats = ids
            .iter()
            .filter(|(_, v)| v.len() > 1)
            .map(|(k, v)| format!("{k}: {} different ids {v:?}", v.len()))
            .collect();
        missing = want.difference(&got_keys).cloned().collect();
        if missing.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    for o in &ops {
        *states
            .entry(format!(
                "{} {}",
                s(&o["operation"]),
                s(&o["operationState"])
            ))
            .or_default() += 1;
    }
    let failed_temp = nfvo.seen.lock().unwrap().failed_temp.clone();
    let mut why: BTreeMap<String, usize> = BTreeMap::new();
    for (op, kind, detail) in failed_temp.values() {
        let detail: String = detail.chars().take(110).collect();
        *why.entry(format!("{op} {kind}: {detail}")).or_default() += 1;
    }
    eprintln!("occurrences at the end: {states:?}\nfailed by the NFVO after FAILED_TEMP: {why:#?}");
    vec![
        ("every occurrence ends", unended),
        ("never two operations at once on one instance", overlaps),
        ("one automatic heal per heal window", heals),
        ("every notification reaches the subscriber", missing),
        ("a repeated notification has the same id", repeats),
        ("every answer is one an NFVO expects", answers),
    ]
}

/// A JSON string's text ("" for anything else).
fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn final_state(o: &Value) -> bool {
    ["COMPLETED", "FAILED", "ROLLED_BACK"].contains(&o["operationState"].as_str().unwrap_or(""))
}

/// Subscribes the subscriber to everything through replica 1; waits until it is listed.
async fn subscribe(replicas: &Replicas, sub: SocketAddr) {
    let r = serve_common::post_json(
        replicas.addr(0),
        "/vnflcm/v2/subscriptions",
        &json!({"callbackUri": format!("http://{sub}/cb")}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

/// While the database is down: every replica must answer `GET /healthz`, `GET
/// /vnf_instances` and `POST /vnf_instances` with a 503 ProblemDetails; the answers that are
/// not.
async fn answers_while_down(replicas: &Replicas) -> Vec<String> {
    let mut down = Vec::new();
    let create = serde_json::to_vec(&json!({ "vnfdId": DEMO_VNFD })).unwrap();
    for i in 0..REPLICAS {
        let addr = replicas.addr(i);
        let tries: [(&str, &str, &[u8]); 3] = [
            ("GET", "/healthz", b""),
            ("GET", "/vnflcm/v2/vnf_instances", b""),
            ("POST", "/vnflcm/v2/vnf_instances", &create),
        ];
        for (method, path, body) in tries {
            let hdr = [("Content-Type", "application/json")];
            match send(addr, method, path, &hdr, body).await {
                Ok(r)
                    if r.status == 503
                        && r.header("content-type") == Some("application/problem+json") => {}
                Ok(r) => down.push(format!(
                    "replica-{} {method} {path}: {} {}",
                    i + 1,
                    r.status,
                    String::from_utf8_lossy(&r.body)
                )),
                Err(e) => down.push(format!("replica-{} {method} {path}: {e}", i + 1)),
            }
        }
    }
    down
}

/// Once the database is back: the replicas whose `/healthz` is not 200 within 30 s.
async fn recovered(replicas: &Replicas) -> Vec<String> {
    let mut late = Vec::new();
    for i in 0..REPLICAS {
        let addr = replicas.addr(i);
        let mut ok = false;
        for _ in 0..60 {
            if send(addr, "GET", "/healthz", &[], b"")
                .await
                .is_ok_and(|r| r.status == 200)
            {
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if !ok {
            late.push(format!("replica-{}: /healthz not 200 within 30 s", i + 1));
        }
    }
    late
}

// ---------------------------------------------------------------------------------------
// The tests

/// What holds today (not ignored): three replicas on a cluster of the test's own answer 503
/// ProblemDetails while it is stopped, and once it is started again each answers and runs an
/// instantiate to its end, none restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_answer_503_while_the_database_is_down_and_recover() {
    let _one = ONE_AT_A_TIME.lock().await;
    if admin_url("database_down_503").is_none() {
        return;
    }
    let cluster = OwnCluster::start();
    let db = TestDb::create_on(&cluster.url, "down_503").await;
    let dir = tempfile::tempdir().unwrap();
    let replicas = Replicas::start(&db.url, dir.path(), DB_LEASE);
    cluster.pg_ctl(&["--mode=fast", "stop"]);
    let down = answers_while_down(&replicas).await;
    cluster.pg_ctl(&["start"]);
    let late = recovered(&replicas).await;
    let mut ended = Vec::new();
    if late.is_empty() {
        for i in 0..REPLICAS {
            let (_, op) =
                serve_common::create_and_instantiate(replicas.addr(i), DEMO_VNFD, "default").await;
            ended.push(op["operationState"].as_str().unwrap_or("").to_owned());
        }
    }
    let logs = replicas.stop("database_down_503");
    assert!(down.is_empty(), "{down:#?} (logs: {})", logs.display());
    assert!(late.is_empty(), "{late:#?} (logs: {})", logs.display());
    assert_eq!(ended, ["COMPLETED"; REPLICAS], "logs: {}", logs.display());
    db.drop_now().await;
}

/// Whether the process `pid` runs (a zombie does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// `scripts/replicas-dev.sh` (what docs/replicas.md "Running replicas" documents): two
/// replicas on a database of the test's own, each answering `/healthz` with its own replica
/// id in `/metrics`; one killed and revived on a new port; `stop` ends them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replicas_script_starts_kills_revives_and_stops_them() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(admin) = admin_url("replicas_script") else {
        return;
    };
    let db = TestDb::create_on(&admin, "script").await;
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(script("replicas-dev.sh"));
        for (k, _) in std::env::vars() {
            if k.starts_with("VNFM_") {
                cmd.env_remove(k);
            }
        }
        let out = cmd
            .args(args)
            .env("VNFM_BIN", env!("CARGO_BIN_EXE_vnfm"))
            .env("VNFM_STATE_URL", &db.url)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "replicas-dev.sh {args:?}: {said}");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let urls: Vec<String> = stdout
            .lines()
            .find_map(|l| l.strip_prefix("export VNFM_REPLICAS="))
            .map(|u| u.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        (urls, said)
    };
    let d = dir.path().to_str().unwrap();
    let (urls, _) = run(&["start", d, "2"]);
    assert_eq!(urls.len(), 2, "{urls:?}");
    let addr = |u: &str| -> SocketAddr { u.strip_prefix("http://").unwrap().parse().unwrap() };
    for (i, u) in urls.iter().enumerate() {
        let r = serve_common::get(addr(u), "/healthz").await;
        assert_eq!(r.status, 200, "{u}: {}", String::from_utf8_lossy(&r.body));
        let m = String::from_utf8(serve_common::get(addr(u), "/metrics").await.body).unwrap();
        assert!(
            m.contains(&format!("replica=\"replica-{}\"", i + 1)),
            "{u} is not replica-{}",
            i + 1
        );
    }
    let pid = |i: usize| -> u32 {
        std::fs::read_to_string(dir.path().join(format!("replica-{i}.pid")))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let killed = pid(2);
    let (_, said) = run(&["kill", d, "2"]);
    assert!(said.contains("replica-2 stopped (SIGKILL)"), "{said}");
    assert!(!alive(killed), "{killed} still runs");
    let (again, _) = run(&["revive", d, "2"]);
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(again[0], urls[0]);
    let r = serve_common::get(addr(&again[1]), "/healthz").await;
    assert_eq!(r.status, 200);
    let pids = [pid(1), pid(2)];
    let (_, said) = run(&["stop", d]);
    assert!(said.contains("replica-1 stopped (SIGTERM)"), "{said}");
    for p in pids {
        assert!(!alive(p), "{p} still runs");
    }
    assert!(std::fs::read_to_string(dir.path().join("replica-1.log"))
        .unwrap()
        .contains("listening on http://"));
    db.drop_now().await;
}

/// Acceptance 2: three replicas, the NFVO and the alert storm spread over them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_share_the_work_and_lose_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(admin) = admin_url("three_replicas") else {
        return;
    };
    let db = TestDb::create_on(&admin, "three").await;
    let dir = tempfile::tempdir().unwrap();
    let replicas = Replicas::start(&db.url, dir.path(), LEASE);
    let (sub, sub_addr) = subscriber().await;
    subscribe(&replicas, sub_addr).await;
    let nfvo = Arc::new(Nfvo::new(replicas.addrs.clone()));
    run(nfvo.clone()).await;
    let checks = check(&nfvo, &sub).await;
    let logs = replicas.stop("three_replicas");
    Report { checks }.print_and_assert("three_replicas", &logs);
    db.drop_now().await;
}

/// Acceptance 3: replica 2 SIGKILLed while it runs an instantiate, started again later.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_in_the_middle_loses_nothing() {
    killed_in_the_middle("replica_killed", false).await;
}

/// Acceptance 3 with `[state] takeover = "resume"`: the killed replica's instantiate is run
/// on by another replica and completes, never `FAILED_TEMP`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_in_the_middle_has_its_instantiate_resumed() {
    killed_in_the_middle("replica_killed_resume", true).await;
}

/// Replica 2 SIGKILLed while it runs an instantiate, down for three leases, started again;
/// its instantiate taken over as `FAILED_TEMP` `INTERRUPTED`, or with `resume`, completed.
async fn killed_in_the_middle(test: &str, resume: bool) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(admin) = admin_url(test) else {
        return;
    };
    let db = TestDb::create_on(&admin, if resume { "resumed" } else { "killed" }).await;
    let dir = tempfile::tempdir().unwrap();
    let state = if resume { "takeover = \"resume\"" } else { "" };
    let mut replicas = Replicas::start_with(&db.url, dir.path(), LEASE, state);
    let (sub, sub_addr) = subscriber().await;
    subscribe(&replicas, sub_addr).await;
    let nfvo = Arc::new(Nfvo::new(replicas.addrs.clone()));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    *nfvo.on_instantiate.lock().unwrap() = Some(tx);
    let running = tokio::spawn(run(nfvo.clone()));

    // The first instantiate replica 2 accepts once a few instances have started: kill it
    // while that runs (the slow stack create keeps it running for a poll of 2 s).
    let killed_op = 'found: loop {
        let loc = tokio::time::timeout(Duration::from_secs(STEP_SECS), rx.recv())
            .await
            .ok()
            .flatten()
            .expect("replica 2 accepts an instantiate once 5 instances started");
        if nfvo.started.load(Ordering::SeqCst) < AT_ONCE {
            continue;
        }
        // Once it is PROCESSING (its stack being created), asked of replica 1.
        for _ in 0..100 {
            let r = send(replicas.addr(0), "GET", &loc, &[], b"").await.unwrap();
            match r.json()["operationState"].as_str().unwrap_or("") {
                "PROCESSING" => break 'found loc.rsplit('/').next().unwrap().to_owned(),
                "STARTING" => tokio::time::sleep(Duration::from_millis(20)).await,
                _ => continue 'found,
            }
        }
    };
    *nfvo.on_instantiate.lock().unwrap() = None;
    replicas.kill(1);
    // Down until the sweep of the others took its occurrences over (the lease expires, then
    // the grace of a take-over, then a sweep every lease), then back.
    let grace = vnfm_core::lifecycle::TAKEOVER_GRACE.num_seconds() as u64;
    tokio::time::sleep(Duration::from_secs(3 * LEASE + grace + 1)).await;
    replicas.start_one(1);
    running.await.unwrap();

    let mut checks = check(&nfvo, &sub).await;
    let seen = nfvo
        .seen
        .lock()
        .unwrap()
        .failed_temp
        .get(&killed_op)
        .cloned();
    let taken = if resume {
        // Its end as notified (the NFVO deletes the instance, and its occurrences, at the end).
        let ends: Vec<String> = sub
            .got
            .lock()
            .unwrap()
            .iter()
            .filter(|n| n["vnfLcmOpOccId"] == killed_op.as_str())
            .filter_map(|n| n["operationState"].as_str().map(str::to_owned))
            .filter(|s| !["STARTING", "PROCESSING"].contains(&s.as_str()))
            .collect();
        let mut wrong = Vec::new();
        if let Some((op, kind, detail)) = seen {
            wrong.push(format!(
                "{killed_op} ({op}) was seen FAILED_TEMP ({kind}: {detail}), not resumed"
            ));
        }
        if ends != ["COMPLETED"] {
            wrong.push(format!(
                "{killed_op} notified ending {ends:?}, not COMPLETED once"
            ));
        }
        wrong
    } else {
        match seen {
            Some((_, ref kind, _)) if kind == "INTERRUPTED" => vec![],
            Some((op, kind, detail)) => vec![format!(
                "{killed_op} ({op}) was FAILED_TEMP with failureKind {kind}: {detail}"
            )],
            None => vec![format!(
                "{killed_op}, running on the killed replica, was never seen FAILED_TEMP \
                 INTERRUPTED"
            )],
        }
    };
    checks.push((
        if resume {
            "the killed replica's instantiate resumed by another (COMPLETED)"
        } else {
            "the killed replica's instantiate taken over (FAILED_TEMP INTERRUPTED)"
        },
        taken,
    ));
    let logs = replicas.stop(test);
    // Taken over by another replica than the killed one, not by it once revived.
    let said = if resume {
        "resumed"
    } else {
        "declared interrupted"
    };
    let by: Vec<String> = (1..=REPLICAS)
        .filter(|i| {
            std::fs::read_to_string(logs.join(format!("replica-{i}.log")))
                .unwrap_or_default()
                .lines()
                .any(|l| l.contains(&format!("operation {killed_op} {said}")))
        })
        .map(|i| format!("replica-{i}"))
        .collect();
    let mut wrong = Vec::new();
    if by.len() != 1 || by.contains(&"replica-2".to_owned()) {
        wrong.push(format!(
            "{killed_op} {said} by {by:?}, expected one replica but replica-2"
        ));
    }
    checks.push(("taken over by a replica that was not killed", wrong));
    Report { checks }.print_and_assert(test, &logs);
    db.drop_now().await;
}

/// Acceptance 4: the database stopped and started again (`pg_ctl`) in the middle of the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_database_restarted_in_the_middle_loses_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    if admin_url("database_restarted").is_none() {
        return;
    }
    let cluster = OwnCluster::start();
    let db = TestDb::create_on(&cluster.url, "restarted").await;
    let dir = tempfile::tempdir().unwrap();
    // A lease longer than the outage: the replicas' running operations must survive it.
    let replicas = Replicas::start(&db.url, dir.path(), DB_LEASE);
    let (sub, sub_addr) = subscriber().await;
    subscribe(&replicas, sub_addr).await;
    let nfvo = Arc::new(Nfvo::new(replicas.addrs.clone()));
    let running = tokio::spawn(run(nfvo.clone()));

    while nfvo.started.load(Ordering::SeqCst) < 2 * AT_ONCE {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.pg_ctl(&["--mode=fast", "stop"]);
    nfvo.db_down.store(true, Ordering::SeqCst);
    let down = answers_while_down(&replicas).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.pg_ctl(&["start"]);
    nfvo.db_down.store(false, Ordering::SeqCst);
    let recovered = recovered(&replicas).await;
    running.await.unwrap();

    let mut checks = check(&nfvo, &sub).await;
    let (while_down, interrupted) = {
        let seen = nfvo.seen.lock().unwrap();
        let interrupted: Vec<String> = seen
            .failed_temp
            .iter()
            .filter(|(_, (_, kind, _))| kind == "INTERRUPTED")
            .map(|(id, (op, _, detail))| format!("{op} {id}: {detail}"))
            .collect();
        (seen.while_down.clone(), interrupted)
    };
    checks.push((
        "no running operation of a live replica taken over",
        interrupted,
    ));
    checks.push(("503 ProblemDetails while the database is down", down));
    checks.push(("the replicas answer again without a restart", recovered));
    let logs = replicas.stop("database_restarted");
    eprintln!("answers to the NFVO while the database was down: {while_down:?}");
    Report { checks }.print_and_assert("database_restarted", &logs);
    db.drop_now().await;
}
