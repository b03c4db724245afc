//! Alert endpoint throughput: `POST /alert/auto_healing` of `vnfm serve` against a bare axum
//! handler answering 204, in the same run, over the same keep-alive loopback client.
//!
//! The servers run in-process on a 2-worker tokio runtime over temporary state files, each with
//! `INSTANCES` demo VNFs instantiated through its LCM API (auto-heal enabled) and bearer-token
//! auth on the alert endpoints. `timer_interval` is an hour so no heal runs during the
//! measurement: what is measured is the endpoint (auth, body limit, parsing, the validation
//! chain, batching, de-duplication, metrics, and the state persisted before answering).
//!
//! Workloads (one alert per webhook, Alertmanager's shape):
//! - `vnfm_duplicates`: every request repeats an alert already queued (the storm case:
//!   Alertmanager re-sends, duplicated groups): ignored `duplicate`, counted, 204;
//! - `vnfm_storm`: the storm of the acceptance test (10,000 alerts, 300 occurrences):
//!   one request in 33 is a new occurrence, the others repeat queued ones;
//! - `vnfm_new_alerts`: every request is a new occurrence (new `startsAt`) of a VNFC alert,
//!   joining its instance's open window: accepted, and written to the SQLite state file
//!   before the 204 (so that an accepted alert survives a restart), fsynced within a second
//!   (`[server] alert_fsync = "periodic"`, the default);
//! - `vnfm_new_alerts_fsync_each`: the same on a second server with `alert_fsync = "each"`
//!   (an fsync before the 204);
//! - `bare_axum_204`: the baseline, an axum route that reads the body and answers 204.
//!
//! At the end the bench prints each workload's throughput relative to the baseline; the
//! target is at least half of it (recorded in `benches/README.md`). `cargo bench -p
//! vnfm-benches --bench alerts`.

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

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tokio::runtime::Runtime;
use vnfm_cli::config::{AlertFsync, Config, Secret};
use vnfm_cli::serve::Server;

mod loopback;
use loopback::{instantiated, webhook, Conn};

/// jemalloc, as the default `vnfm` binary (the default feature `jemalloc`: background threads
/// on, its counters built in); without its counters with `--no-default-features --features
/// jemalloc-nostats`; the system's with `--no-default-features`; mimalloc with
/// `--no-default-features --features mimalloc` (jemalloc takes precedence, as in `vnfm`). The
/// baseline runs in the same process, over the same allocator.
#[cfg(feature = "jemalloc-nostats")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// mimalloc, with `--no-default-features --features mimalloc` (see above).
#[cfg(all(feature = "mimalloc", not(feature = "jemalloc-nostats")))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const TOKEN: &str = "vnfm-bench-token";
const INSTANCES: usize = 10;
/// In the `vnfm_storm` workload, one request in this many brings a new occurrence.
const STORM_REPEATS: u64 = 33;
/// Concurrent keep-alive connections of the client.
const CONNECTIONS: usize = 8;

/// Sends `iters` requests over `CONNECTIONS` keep-alive connections, body `i` from `body(i)`;
/// every answer must be 204. Returns the wall time.
async fn blast(
    addr: SocketAddr,
    path: &'static str,
    iters: u64,
    body: Arc<dyn Fn(u64) -> Vec<u8> + Send + Sync>,
) -> Duration {
    let mut conns = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        conns.push(Conn::open(addr).await);
    }
    let next = Arc::new(AtomicU64::new(0));
    let auth = format!("Bearer {TOKEN}");
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            let next = next.clone();
            let body = body.clone();
            let auth = auth.clone();
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= iters {
                        return;
                    }
                    let b = body(i);
                    let (status, reply) = c
                        .send(
                            "POST",
                            path,
                            &[
                                ("Content-Type", "application/json"),
                                ("Authorization", &auth),
                            ],
                            &b,
                        )
                        .await;
                    assert_eq!(status, 204, "{}", String::from_utf8_lossy(&reply));
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("client task");
    }
    start.elapsed()
}

struct Bench {
    rt: Runtime,
    /// `vnfm serve` with the default `[server] alert_fsync = "periodic"`.
    vnfm: SocketAddr,
    /// `vnfm serve` with `alert_fsync = "each"`.
    vnfm_each: SocketAddr,
    bare: SocketAddr,
    targets: Arc<Vec<(String, String)>>,
    targets_each: Arc<Vec<(String, String)>>,
    _servers: [Server; 2],
    _dir: tempfile::TempDir,
}

/// Starts a server over its own state file in `dir` and instantiates `INSTANCES` VNFs;
/// returns it, its address and its (instance, VNFC) pairs.
async fn serve(
    dir: &std::path::Path,
    cloud: &std::path::Path,
    fsync: AlertFsync,
) -> (Server, SocketAddr, Vec<(String, String)>) {
    let mut c = Config::default();
    c.state.path = Some(dir.join(format!("state-{fsync:?}.sqlite")));
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.server.alert_fsync = fsync;
    c.vim.cloud = Some(cloud.to_owned());
    c.prometheus_plugin.plugin.auto_healing = true;
    c.prometheus_plugin.plugin.timer_interval = 3600;
    c.prometheus_plugin.bearer_token = Some(Secret::new(TOKEN));
    let server = Server::start(c, true).await.expect("server starts");
    let addr = server.local_addr();
    let mut targets = Vec::new();
    for _ in 0..INSTANCES {
        let (id, vnfcs) = instantiated(addr).await;
        targets.extend(vnfcs.into_iter().map(|v| (id.clone(), v)));
    }
    (server, addr, targets)
}

fn setup() -> Bench {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cloud = loopback::big_cloud(dir.path());
    let (servers, vnfm, vnfm_each, bare, targets, targets_each) = rt.block_on(async {
        let (server, vnfm, targets) = serve(dir.path(), &cloud, AlertFsync::Periodic).await;
        let (server_each, vnfm_each, targets_each) =
            serve(dir.path(), &cloud, AlertFsync::Each).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let bare = listener.local_addr().unwrap();
        let app = Router::new().route(
            "/alert/auto_healing",
            post(|_body: Bytes| async { StatusCode::NO_CONTENT }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        (
            [server, server_each],
            vnfm,
            vnfm_each,
            bare,
            targets,
            targets_each,
        )
    });
    Bench {
        rt,
        vnfm,
        vnfm_each,
        bare,
        targets: Arc::new(targets),
        targets_each: Arc::new(targets_each),
        _servers: servers,
        _dir: dir,
    }
}

fn alerts(c: &mut Criterion) {
    let b = setup();
    let targets = b.targets.clone();
    // The client does as little as it can per request (the bodies are made up front, a new
    // occurrence only splices its `startsAt` in): it shares the two cores with the servers.
    let dup_bodies: Arc<Vec<Vec<u8>>> = Arc::new(
        targets
            .iter()
            .map(|(id, v)| webhook(id, v, &format!("{id}/{v}"), "2027-01-15T08:00:00.000Z"))
            .collect(),
    );
    // Queue every (instance, VNFC) once so that the duplicates workload repeats queued alerts.
    let dup_body: Arc<dyn Fn(u64) -> Vec<u8> + Send + Sync> = {
        let b = dup_bodies.clone();
        Arc::new(move |i| b[(i as usize) % b.len()].clone())
    };
    b.rt.block_on(blast(
        b.vnfm,
        "/alert/auto_healing",
        targets.len() as u64,
        dup_body.clone(),
    ));
    // New occurrences: a fresh startsAt per request (the dedupe key is fingerprint + startsAt).
    let new_body = loopback::new_occurrences;

    let mut g = c.benchmark_group("alert_endpoint");
    g.throughput(Throughput::Elements(1));
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let mut medians = Vec::new();
    // The storm of the acceptance test: 10,000 alerts carrying 300 occurrences, so
    // one request in 33 brings a new occurrence and the others repeat queued ones.
    let storm_body: Arc<dyn Fn(u64) -> Vec<u8> + Send + Sync> = {
        let new = new_body(&targets);
        let dup = dup_body.clone();
        Arc::new(move |i| {
            if i % STORM_REPEATS == 0 {
                new(i)
            } else {
                dup(i)
            }
        })
    };
    for (name, addr, body) in [
        ("bare_axum_204", b.bare, dup_body.clone()),
        ("vnfm_duplicates", b.vnfm, dup_body.clone()),
        ("vnfm_storm", b.vnfm, storm_body),
        ("vnfm_new_alerts", b.vnfm, new_body(&targets)),
        (
            "vnfm_new_alerts_fsync_each",
            b.vnfm_each,
            new_body(&b.targets_each),
        ),
    ] {
        let rt = &b.rt;
        let per: Arc<std::sync::Mutex<Vec<f64>>> = Arc::default();
        let per2 = per.clone();
        g.bench_function(name, |bench| {
            bench.iter_custom(|iters| {
                let d = rt.block_on(blast(addr, "/alert/auto_healing", iters, body.clone()));
                per2.lock().unwrap().push(d.as_secs_f64() / iters as f64);
                d
            });
        });
        let mut v = per.lock().unwrap().clone();
        v.sort_by(f64::total_cmp);
        // A criterion filter (`-- vnfm_new`) skips the benchmarks it does not match.
        if let Some(median) = v.get(v.len() / 2) {
            medians.push((name, *median));
        }
    }
    g.finish();
    let base = medians
        .iter()
        .find(|(name, _)| *name == "bare_axum_204")
        .map(|(_, secs)| *secs);
    println!("\nalert endpoint throughput (median per request over the samples, {CONNECTIONS} keep-alive connections):");
    for (name, secs) in &medians {
        let ratio = base.map_or_else(
            || "(baseline not run)".to_owned(),
            |b| format!("{:.2} of bare axum", b / secs),
        );
        println!(
            "  {name:<27} {:>9.0} req/s  ({:>7.1} µs/req)  {ratio}",
            1.0 / secs,
            secs * 1e6,
        );
    }
    // Everything the server answered is accounted for in its metrics.
    let metrics = b.rt.block_on(async {
        let mut c = Conn::open(b.vnfm).await;
        let (s, m) = c.send("GET", "/metrics", &[], b"").await;
        assert_eq!(s, 200);
        String::from_utf8(m).unwrap()
    });
    for l in metrics.lines().filter(|l| l.starts_with("vnfm_alerts")) {
        println!("  {l}");
    }
}

criterion_group!(benches, alerts);
criterion_main!(benches);
