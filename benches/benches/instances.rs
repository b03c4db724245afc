//! A large fleet listed through `vnfm serve` (issue 27, state that scales): `GET
//! /vnflcm/v2/vnf_instances` read page by page (pages of 100, the default `[server]
//! page_size`), and `filter=(eq,vnfInstanceName,…)`, at 10,000 and at 100,000 instances, on
//! SQLite and (when `VNFM_BENCH_POSTGRES_URL` or `VNFM_TEST_POSTGRES_URL` names a server, on
//! which a database of its own is made and dropped) on PostgreSQL.
//!
//! Set-up: the instances are written straight through the store (`SqliteStore` / `PgStore`
//! commits of 1,000), each a `NOT_INSTANTIATED` instance as `POST /vnf_instances` makes it, named
//! `vnf-<i>`; then an in-process server is started on the state (2 tokio workers, loopback,
//! one keep-alive connection).
//!
//! Workloads (criterion, throughput per instance listed):
//! - `list_1000/<store>/<n>`: ten pages from a marker that moves through the list (so every
//!   part of it is read): the cost of 1,000 instances listed;
//! - `name_filter/<store>/<n>`: one `filter=(eq,vnfInstanceName,vnf-<i>)` request (one match),
//!   `i` moving through the list.
//!
//! Before criterion's runs, the whole list is walked once per size and the filter asked 20
//! times; the bench prints the time per 1,000 instances of the walk and the filter's median,
//! and the checks of the issue: the time per 1,000 at 100,000 within 2× of that at 10,000, the
//! filter under 50 ms. `cargo bench -p vnfm-benches --bench instances`; results in
//! `benches/README.md`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use vnfm_cli::config::{Config, Secret};
use vnfm_cli::serve::Server;
use vnfm_core::driver::{Store, StoreBatch};
use vnfm_core::lcm::VnfInstance;

#[cfg(feature = "jemalloc-nostats")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(all(feature = "mimalloc", not(feature = "jemalloc-nostats")))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SIZES: [usize; 2] = [10_000, 100_000];
const PAGE: usize = 100;
const DEMO_VNFD: &str = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d";

/// A keep-alive HTTP/1.1 connection: `GET`s with their status, `Link` header and body.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream,
            buf: Vec::with_capacity(1 << 16),
        }
    }

    async fn get(&mut self, path: &str) -> (u16, Option<String>, Vec<u8>) {
        let req = format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n");
        self.stream.write_all(req.as_bytes()).await.expect("write");
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).to_string();
                let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
                let header = |name: &str| {
                    head.lines()
                        .filter_map(|l| l.split_once(':'))
                        .find(|(n, _)| n.eq_ignore_ascii_case(name))
                        .map(|(_, v)| v.trim().to_owned())
                };
                let len: usize = header("content-length").map_or(0, |v| v.parse().unwrap());
                while self.buf.len() < end + 4 + len {
                    self.fill().await;
                }
                let body = self.buf[end + 4..end + 4 + len].to_vec();
                self.buf.drain(..end + 4 + len);
                return (status, header("link"), body);
            }
            self.fill().await;
        }
    }

    async fn fill(&mut self) {
        let mut chunk = [0u8; 1 << 16];
        let n = self.stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed by the server");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    /// The page at `path`: how many instances, and the path of the next one.
    async fn page(&mut self, path: &str) -> (usize, Option<String>) {
        let (status, link, body) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        let n = serde_json::from_slice::<Value>(&body)
            .unwrap()
            .as_array()
            .unwrap()
            .len();
        let next = link.map(|l| {
            l.strip_prefix('<')
                .and_then(|l| l.split_once(">; rel=\"next\""))
                .unwrap()
                .0
                .to_owned()
        });
        (n, next)
    }
}

fn id_of(i: usize) -> String {
    format!("{i:08x}-0000-4000-8000-000000000000")
}

/// A `NOT_INSTANTIATED` instance as `POST /vnf_instances` makes it for the demo package.
fn instance(i: usize) -> VnfInstance {
    let id = id_of(i);
    serde_json::from_value(json!({
        "id": id,
        "vnfInstanceName": format!("vnf-{i}"),
        "vnfdId": DEMO_VNFD,
        "vnfProvider": "Company",
        "vnfProductName": "Sample VNF",
        "vnfSoftwareVersion": "1.0",
        "vnfdVersion": "1.0",
        "instantiationState": "NOT_INSTANTIATED",
        "vnfConfigurableProperties": {"isAutohealEnabled": true},
        "_links": {
            "self": {"href": format!("/vnflcm/v2/vnf_instances/{id}")},
            "instantiate": {"href": format!("/vnflcm/v2/vnf_instances/{id}/instantiate")}
        }
    }))
    .unwrap()
}

async fn fill(store: &dyn Store, n: usize) {
    for start in (0..n).step_by(1000) {
        let batch = (start..(start + 1000).min(n))
            .fold(StoreBatch::new(), |b, i| b.with_instance(instance(i)));
        store.commit(batch).await.unwrap();
    }
}

/// One server over `n` instances; `Drop` of the guard removes the state.
struct Fleet {
    server: Server,
    _dir: tempfile::TempDir,
    pg: Option<(String, String)>,
}

async fn fleet(backend: &str, n: usize) -> Fleet {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::default();
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    let mut pg = None;
    match backend {
        "sqlite" => {
            let path = dir.path().join("state.sqlite");
            fill(&vnfm_cli::store::SqliteStore::open(&path).unwrap(), n).await;
            c.state.path = Some(path);
        }
        _ => {
            let admin = pg_url().unwrap();
            let name = format!("vnfm_bench_{}_{n}", std::process::id());
            pg_exec(&admin, &format!("DROP DATABASE IF EXISTS \"{name}\"")).await;
            pg_exec(&admin, &format!("CREATE DATABASE \"{name}\"")).await;
            let url = with_database(&admin, &name);
            let store = vnfm_cli::store_postgres::PgStore::open(&url).await.unwrap();
            fill(&store, n).await;
            c.state.path = None;
            c.state.url = Some(Secret::new(&url));
            pg = Some((admin, name));
        }
    }
    let server = Server::start(c, true).await.expect("server starts");
    Fleet {
        server,
        _dir: dir,
        pg,
    }
}

impl Fleet {
    async fn stop(self) {
        self.server.shutdown().await.unwrap();
        if let Some((admin, name)) = self.pg {
            pg_exec(
                &admin,
                &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
            )
            .await;
        }
    }
}

fn pg_url() -> Option<String> {
    ["VNFM_BENCH_POSTGRES_URL", "VNFM_TEST_POSTGRES_URL"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|u| !u.trim().is_empty()))
}

async fn pg_exec(url: &str, sql: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client.batch_execute(sql).await.unwrap();
}

/// `url` with its database replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let rest = url.find("://").map_or(0, |i| i + 3);
    let query = url[rest..].find('?').map_or(url.len(), |i| rest + i);
    let path = url[rest..query].find('/').map_or(query, |i| rest + i);
    format!("{}/{db}{}", &url[..path], &url[query..])
}

/// Ten pages from the marker of instance `from` (or the first page): 1,000 instances.
async fn thousand(conn: &mut Conn, from: usize) -> usize {
    let mut path = if from == 0 {
        "/vnflcm/v2/vnf_instances".to_owned()
    } else {
        format!(
            "/vnflcm/v2/vnf_instances?nextpage_opaque_marker={}",
            id_of(from - 1)
        )
    };
    let mut n = 0;
    for _ in 0..1000 / PAGE {
        let (got, next) = conn.page(&path).await;
        n += got;
        match next {
            Some(next) => path = next,
            None => break,
        }
    }
    n
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut backends = vec!["sqlite"];
    if pg_url().is_some() {
        backends.push("postgres");
    } else {
        println!("PostgreSQL skipped: neither VNFM_BENCH_POSTGRES_URL nor VNFM_TEST_POSTGRES_URL");
    }
    let mut report = Vec::new();
    for backend in backends {
        let mut per_thousand = Vec::new();
        for n in SIZES {
            let fleet = rt.block_on(fleet(backend, n));
            let addr = fleet.server.local_addr();
            let mut conn = rt.block_on(Conn::open(addr));
            // The whole list, page by page, once.
            let (walk, listed) = rt.block_on(async {
                let t = Instant::now();
                let mut path = Some("/vnflcm/v2/vnf_instances".to_owned());
                let mut listed = 0;
                while let Some(p) = path {
                    let (got, next) = conn.page(&p).await;
                    listed += got;
                    path = next;
                }
                (t.elapsed(), listed)
            });
            assert_eq!(listed, n, "{backend}: the walk listed every instance once");
            let ms_per_thousand = walk.as_secs_f64() * 1000.0 / n as f64 * 1000.0;
            per_thousand.push(ms_per_thousand);
            let filter = rt.block_on(async {
                let mut times = Vec::new();
                for k in 0..20 {
                    let i = (k * 7919) % n;
                    let t = Instant::now();
                    let (got, _) = conn
                        .page(&format!(
                            "/vnflcm/v2/vnf_instances?filter=(eq,vnfInstanceName,vnf-{i})"
                        ))
                        .await;
                    times.push(t.elapsed());
                    assert_eq!(got, 1);
                }
                median(times)
            });
            report.push(format!(
                "{backend} {n}: whole list {:.2} s ({ms_per_thousand:.1} ms per 1,000), \
                 name filter median {:.2} ms ({})",
                walk.as_secs_f64(),
                filter.as_secs_f64() * 1000.0,
                if filter < Duration::from_millis(50) {
                    "under 50 ms: ok"
                } else {
                    "OVER 50 ms"
                }
            ));

            let mut g = c.benchmark_group(format!("instances_{backend}"));
            g.sample_size(10)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(3))
                .throughput(Throughput::Elements(1000));
            let mut from = 0;
            g.bench_function(BenchmarkId::new("list_1000", n), |b| {
                b.iter_custom(|iters| {
                    from = (from + 7000) % (n - 1000);
                    let mut at = from;
                    rt.block_on(async {
                        let t = Instant::now();
                        for _ in 0..iters {
                            let got = thousand(&mut conn, at).await;
                            assert_eq!(got, 1000);
                            at = (at + 13_000) % (n - 1000);
                        }
                        t.elapsed()
                    })
                });
            });
            g.throughput(Throughput::Elements(1));
            let mut k = 0;
            g.bench_function(BenchmarkId::new("name_filter", n), |b| {
                b.iter_custom(|iters| {
                    k += 1;
                    let start = k;
                    rt.block_on(async {
                        let t = Instant::now();
                        for j in 0..iters as usize {
                            let i = ((start + j) * 7919) % n;
                            let (got, _) = conn
                                .page(&format!(
                                    "/vnflcm/v2/vnf_instances?filter=(eq,vnfInstanceName,vnf-{i})"
                                ))
                                .await;
                            assert_eq!(got, 1);
                        }
                        t.elapsed()
                    })
                });
            });
            g.finish();
            rt.block_on(fleet.stop());
        }
        let ratio = per_thousand[1] / per_thousand[0];
        report.push(format!(
            "{backend}: per 1,000 at {} / at {}: {ratio:.2} ({})",
            SIZES[1],
            SIZES[0],
            if ratio <= 2.0 {
                "within 2x: ok"
            } else {
                "MORE THAN 2x"
            }
        ));
    }
    println!();
    for line in report {
        println!("{line}");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
