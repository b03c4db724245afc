//! `GET /vnflcm/v2/vnf_instances` read from the store page by page (issue 27, state that scales):
//! every instance once over the pages, `filter=(eq,vnfInstanceName,…)` and `(eq,id,…)` answered
//! from the store's index (full pages however few instances match), any other filter evaluated
//! on at most `[server] list_scan_limit` instances per request (a short page with a next marker
//! beyond). Through the HTTP API on SQLite, and on PostgreSQL when `VNFM_TEST_POSTGRES_URL` is
//! set (otherwise that test records a skip of the suite `postgres`).

// a test crate: helpers outside `#[test]` fns fail by panicking too
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod pg_common;
mod serve_common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use pg_common::{admin_url, client, with_database};
use serde_json::json;
use serve_common::*;
use vnfm_cli::config::{Config, Secret};

/// Ten instances, four named `edge`; pages of 3, at most 4 instances read per request.
const INSTANCES: usize = 10;

fn limits(c: &mut Config) {
    c.server.page_size = 3;
    c.server.list_scan_limit = 4;
}

/// Every page of `path` from the first, following `Link: <…>; rel="next"`: the ids of each.
async fn pages(addr: SocketAddr, path: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut next = Some(path.to_owned());
    while let Some(path) = next.take() {
        let r = get(addr, &path).await;
        assert_eq!(
            r.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        let list = r.json();
        let ids = list.as_array().unwrap().iter();
        out.push(ids.map(|i| i["id"].as_str().unwrap().to_owned()).collect());
        next = r.header("link").map(|l| {
            l.strip_prefix('<')
                .and_then(|l| l.split_once(">; rel=\"next\""))
                .map(|(u, _)| u.to_owned())
                .unwrap_or_else(|| panic!("not a next link: {l}"))
        });
        assert!(out.len() <= 2 * INSTANCES, "{path}: the pages never end");
    }
    out
}

fn flat(pages: &[Vec<String>]) -> Vec<String> {
    pages.iter().flatten().cloned().collect()
}

/// The scenario, on a server started from `c`.
async fn lists_page_by_page(mut c: Config) {
    limits(&mut c);
    let server = start(c).await;
    let addr = server.local_addr();
    let mut all = Vec::new();
    let mut edge = Vec::new();
    let mut core1 = String::new();
    for i in 0..INSTANCES {
        let name = if i % 3 == 0 {
            "edge".to_owned()
        } else {
            format!("core-{i}")
        };
        let r = post_json(
            addr,
            "/vnflcm/v2/vnf_instances",
            &json!({"vnfdId": DEMO_VNFD, "vnfInstanceName": name}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let id = r.json()["id"].as_str().unwrap().to_owned();
        if name == "edge" {
            edge.push(id.clone());
        } else if name == "core-1" {
            core1.clone_from(&id);
        }
        all.push(id);
    }
    all.sort();
    edge.sort();

    // The whole list: every instance once, in id order, full pages.
    let p = pages(addr, "/vnflcm/v2/vnf_instances").await;
    assert_eq!(flat(&p), all);
    let sizes: Vec<usize> = p.iter().map(Vec::len).collect();
    assert_eq!(sizes, [3, 3, 3, 1]);

    // The name from the index: full pages, though 4 instances of 10 match and a request reads
    // at most 4 (without the index the first 4 by id would hold fewer than a page).
    let p = pages(
        addr,
        "/vnflcm/v2/vnf_instances?filter=(eq,vnfInstanceName,edge)",
    )
    .await;
    assert_eq!(p, [edge[..3].to_vec(), edge[3..].to_vec()]);
    // With the rest of the filter evaluated on what the index gives.
    let path = format!(
        "/vnflcm/v2/vnf_instances?filter=(eq,vnfInstanceName,edge,core-1);(neq,id,{})",
        edge[0]
    );
    let mut want: Vec<String> = edge[1..].to_vec();
    want.push(core1);
    want.sort();
    assert_eq!(flat(&pages(addr, &path).await), want);
    // Ids from the index: the last two by id, in one page.
    let path = format!(
        "/vnflcm/v2/vnf_instances?filter=(eq,id,{},{})",
        all[INSTANCES - 1],
        all[INSTANCES - 2]
    );
    assert_eq!(
        pages(addr, &path).await,
        [vec![all[INSTANCES - 2].clone(), all[INSTANCES - 1].clone()]]
    );

    // A filter no index answers: at most 4 instances read per request, so short pages with a
    // next marker, and still every match once.
    let p = pages(
        addr,
        "/vnflcm/v2/vnf_instances?filter=(cont,vnfInstanceName,dg)",
    )
    .await;
    assert_eq!(flat(&p), edge);
    assert!(p.len() >= INSTANCES.div_ceil(4), "{p:?}");
    let p = pages(
        addr,
        "/vnflcm/v2/vnf_instances?filter=(cont,vnfInstanceName,zzz)",
    )
    .await;
    assert_eq!(
        p.len(),
        INSTANCES.div_ceil(4),
        "empty short pages to the end: {p:?}"
    );
    assert!(p.iter().all(Vec::is_empty), "{p:?}");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_page_by_page_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    lists_page_by_page(config(dir.path(), 1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_page_by_page_on_postgres() {
    let Some(admin) = admin_url("lists_page_by_page_on_postgres") else {
        return;
    };
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "t_{}_{}_list_scale",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let admin_client = client(&admin).await;
    admin_client
        .batch_execute(&format!("CREATE DATABASE \"{name}\" TEMPLATE template0"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), 1);
    c.state.path = None;
    c.state.url = Some(Secret::new(with_database(&admin, &name)));
    lists_page_by_page(c).await;
    admin_client
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .await
        .unwrap();
}
