//! Replicas on PostgreSQL (issue 27, acceptance 5): the throughput of the alert endpoint and of
//! SOL003 requests with 1, 2 and 3 `vnfm serve` replicas on one PostgreSQL database, against
//! one server on a SQLite state file (the embedded default) in the same run.
//!
//! Every server runs in-process on one 2-worker tokio runtime (replicas on one machine, as
//! `scripts/replicas-dev.sh` starts them), over the simulated cloud, with `INSTANCES` demo VNFs
//! instantiated (through the first replica on PostgreSQL, before the others start). The client:
//! `CONNECTIONS` keep-alive HTTP/1.1 connections, spread round-robin over the replicas measured.
//!
//! Workloads:
//! - `new_alerts`: each request an auto-heal alert with a new occurrence joining its instance's
//!   open window: accepted and saved before its 204 (on PostgreSQL, one compare-and-swap write
//!   of the shared alert state per webhook; a replica that lost the race reads the state again
//!   and judges the alert again);
//! - `get_instance`: `GET /vnflcm/v2/vnf_instances/{id}` (one read of the store);
//! - `create_instance`: `POST /vnflcm/v2/vnf_instances` (one commit), answered 201.
//!
//! Needs a PostgreSQL server to create a database on: `VNFM_BENCH_POSTGRES_URL` or
//! `VNFM_TEST_POSTGRES_URL` (`eval "$(scripts/postgres-dev.sh start DIR)"`); without one only
//! the SQLite baseline runs. `cargo bench -p vnfm-benches --bench replicas`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;
use tokio::runtime::Runtime;
use vnfm_cli::config::{Config, Secret};
use vnfm_cli::serve::Server;

mod loopback;
use loopback::{instantiated, Conn, DEMO_VNFD};

const TOKEN: &str = "vnfm-bench-token";
const INSTANCES: usize = 10;
const CONNECTIONS: usize = 8;
const REPLICAS: usize = 3;

/// One request of a workload: method, path, body; and the status it must get.
type Request = Arc<dyn Fn(u64) -> (&'static str, String, Vec<u8>) + Send + Sync>;

/// A workload: its name, the status each request must get, and its requests over the
/// (instance, VNFC) pairs made.
type Workload = (&'static str, u16, fn(&[(String, String)]) -> Request);

/// Sends `iters` requests over `CONNECTIONS` connections spread over `addrs`; returns the wall
/// time and how many answers were not `want` (counted, not fatal: a replica that keeps losing
/// the alert state's race answers 503 after its attempts, and the figure says so).
async fn blast(addrs: &[SocketAddr], iters: u64, req: Request, want: u16) -> (Duration, u64) {
    let mut conns = Vec::with_capacity(CONNECTIONS);
    for i in 0..CONNECTIONS {
        conns.push(Conn::open(addrs[i % addrs.len()]).await);
    }
    let next = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(AtomicU64::new(0));
    let auth = format!("Bearer {TOKEN}");
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            let (next, bad, req, auth) = (next.clone(), bad.clone(), req.clone(), auth.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= iters {
                        return;
                    }
                    let (method, path, body) = req(i);
                    let (status, _) = c
                        .send(
                            method,
                            &path,
                            &[
                                ("Content-Type", "application/json"),
                                ("Authorization", &auth),
                            ],
                            &body,
                        )
                        .await;
                    if status != want {
                        bad.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("client task");
    }
    (start.elapsed(), bad.load(Ordering::Relaxed))
}

fn config(cloud: &std::path::Path) -> Config {
    let mut c = Config::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.vim.cloud = Some(cloud.to_owned());
    c.prometheus_plugin.plugin.auto_healing = true;
    c.prometheus_plugin.plugin.timer_interval = 3600;
    c.prometheus_plugin.bearer_token = Some(Secret::new(TOKEN));
    c
}

/// The instances and VNFCs made on `addr`.
async fn populate(addr: SocketAddr) -> Vec<(String, String)> {
    let mut targets = Vec::new();
    for _ in 0..INSTANCES {
        let (id, vnfcs) = instantiated(addr).await;
        targets.extend(vnfcs.into_iter().map(|v| (id.clone(), v)));
    }
    targets
}

/// A database of its own on the server of `url`: its URL.
async fn bench_database(url: &str) -> String {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    tokio::spawn(conn);
    let name = format!("vnfm_bench_replicas_{}", std::process::id());
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .await
        .unwrap();
    client
        .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE template0"))
        .await
        .unwrap();
    let rest = url.find("://").map_or(0, |i| i + 3);
    let query = url[rest..].find('?').map_or(url.len(), |i| rest + i);
    let path = url[rest..query].find('/').map_or(query, |i| rest + i);
    format!("{}/{name}{}", &url[..path], &url[query..])
}

struct Setup {
    rt: Runtime,
    sqlite: SocketAddr,
    sqlite_targets: Vec<(String, String)>,
    /// The replicas on PostgreSQL (empty without a server).
    pg: Vec<SocketAddr>,
    pg_targets: Vec<(String, String)>,
    _servers: Vec<Server>,
    _dir: tempfile::TempDir,
}

fn setup() -> Setup {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cloud = loopback::big_cloud(dir.path());
    let url = std::env::var("VNFM_BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("VNFM_TEST_POSTGRES_URL"))
        .ok()
        .filter(|u| !u.trim().is_empty());
    let (servers, sqlite, sqlite_targets, pg, pg_targets) = rt.block_on(async {
        let mut servers = Vec::new();
        let mut c = config(&cloud);
        c.state.path = Some(dir.path().join("state.sqlite"));
        let s = Server::start(c, true).await.expect("server starts");
        let sqlite = s.local_addr();
        servers.push(s);
        let sqlite_targets = populate(sqlite).await;
        let mut pg = Vec::new();
        let mut pg_targets = Vec::new();
        match &url {
            Some(url) => {
                let db = bench_database(url).await;
                for i in 0..REPLICAS {
                    let mut c = config(&cloud);
                    c.state.path = None;
                    c.state.url = Some(Secret::new(&db));
                    c.server.replica_id = Some(format!("bench-{i}"));
                    let s = Server::start(c, true).await.expect("replica starts");
                    pg.push(s.local_addr());
                    servers.push(s);
                    if i == 0 {
                        // Before the other replicas start: their instance caches have them.
                        pg_targets = populate(pg[0]).await;
                    }
                }
            }
            None => eprintln!(
                "replicas bench: no PostgreSQL (VNFM_BENCH_POSTGRES_URL or \
                 VNFM_TEST_POSTGRES_URL): only the SQLite baseline runs"
            ),
        }
        (servers, sqlite, sqlite_targets, pg, pg_targets)
    });
    Setup {
        rt,
        sqlite,
        sqlite_targets,
        pg,
        pg_targets,
        _servers: servers,
        _dir: dir,
    }
}

/// New auto-heal occurrences of the (instance, VNFC) pairs of `targets`, never one sent before
/// in the run (the runs of 1, 2 and 3 replicas share the targets).
fn new_alerts(targets: &[(String, String)]) -> Request {
    let body = loopback::new_occurrences(targets);
    Arc::new(move |i| ("POST", "/alert/auto_healing".to_owned(), body(i)))
}

fn get_instance(targets: &[(String, String)]) -> Request {
    let paths: Vec<String> = targets
        .iter()
        .map(|(id, _)| format!("/vnflcm/v2/vnf_instances/{id}"))
        .collect();
    Arc::new(move |i| ("GET", paths[(i as usize) % paths.len()].clone(), Vec::new()))
}

fn create_instance() -> Request {
    let body = serde_json::to_vec(&json!({"vnfdId": DEMO_VNFD})).unwrap();
    Arc::new(move |_| ("POST", "/vnflcm/v2/vnf_instances".to_owned(), body.clone()))
}

fn replicas(c: &mut Criterion) {
    let s = setup();
    let mut g = c.benchmark_group("replicas");
    g.throughput(Throughput::Elements(1));
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let workloads: [Workload; 3] = [
        ("new_alerts", 204, new_alerts),
        ("get_instance", 200, get_instance),
        ("create_instance", 201, |_| create_instance()),
    ];
    let mut results = Vec::new();
    for (workload, want, make) in workloads {
        let mut runs: Vec<(String, Vec<SocketAddr>, Request)> =
            vec![("sqlite_1".into(), vec![s.sqlite], make(&s.sqlite_targets))];
        for n in 1..=s.pg.len() {
            runs.push((
                format!("postgres_{n}"),
                s.pg[..n].to_vec(),
                make(&s.pg_targets),
            ));
        }
        for (name, addrs, req) in runs {
            let per: Arc<std::sync::Mutex<Vec<f64>>> = Arc::default();
            let bad = Arc::new(AtomicU64::new(0));
            let (per2, bad2) = (per.clone(), bad.clone());
            let rt = &s.rt;
            g.bench_function(format!("{workload}/{name}"), |b| {
                b.iter_custom(|iters| {
                    let (d, n) = rt.block_on(blast(&addrs, iters, req.clone(), want));
                    bad2.fetch_add(n, Ordering::Relaxed);
                    per2.lock().unwrap().push(d.as_secs_f64() / iters as f64);
                    d
                });
            });
            let mut v = per.lock().unwrap().clone();
            v.sort_by(f64::total_cmp);
            if let Some(m) = v.get(v.len() / 2) {
                results.push((workload, name, *m, bad.load(Ordering::Relaxed)));
            }
        }
    }
    g.finish();
    println!(
        "\nreplicas: median per request over the samples, {CONNECTIONS} keep-alive connections \
         spread over the replicas; ratio to one server on SQLite"
    );
    for (workload, name, secs, bad) in &results {
        let base = results
            .iter()
            .find(|(w, n, _, _)| w == workload && n == "sqlite_1")
            .map(|(_, _, s, _)| *s);
        let ratio = base.map_or_else(String::new, |b| format!("{:.2}", b / secs));
        println!(
            "  {workload:<16} {name:<11} {:>8.0} req/s ({:>8.1} µs/req)  {ratio:>5} of SQLite  {bad} not {}",
            1.0 / secs,
            secs * 1e6,
            match *workload {
                "new_alerts" => "204",
                "get_instance" => "200",
                _ => "201",
            }
        );
    }
}

criterion_group!(benches, replicas);
criterion_main!(benches);
