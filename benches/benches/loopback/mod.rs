//! The loopback HTTP client of the server benches (`alerts`, `replicas`): keep-alive
//! HTTP/1.1 connections with as little work per request as the client can do, and the set-up
//! calls (a demo VNF instantiated through the LCM API, an Alertmanager webhook body). Each
//! bench uses part of it.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The demo package's VNFD id (built into `vnfm`).
pub const DEMO_VNFD: &str = "7d1f2c0a-3b5e-4f6a-9c8d-0e1f2a3b4c5d";

/// A keep-alive HTTP/1.1 connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream,
            buf: Vec::with_capacity(4096),
        }
    }

    /// Sends one request, returns (status, body).
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.stream.write_all(&bytes).await.expect("write");
        self.read_reply().await
    }

    async fn read_reply(&mut self) -> (u16, Vec<u8>) {
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).to_string();
                let status: u16 = head
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .expect("status");
                let len: usize = head
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                    .map_or(0, |(_, v)| v.trim().parse().expect("content-length"));
                assert!(
                    !head
                        .to_ascii_lowercase()
                        .contains("transfer-encoding: chunked"),
                    "chunked replies are not expected here: {head}"
                );
                while self.buf.len() < end + 4 + len {
                    self.fill().await;
                }
                let body = self.buf[end + 4..end + 4 + len].to_vec();
                self.buf.drain(..end + 4 + len);
                return (status, body);
            }
            self.fill().await;
        }
    }

    async fn fill(&mut self) {
        let mut chunk = [0u8; 4096];
        let n = self.stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed by the server");
        self.buf.extend_from_slice(&chunk[..n]);
    }
}

/// One short-lived request (setup only).
pub async fn call(addr: SocketAddr, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let mut c = Conn::open(addr).await;
    let (status, body) = c
        .send(
            method,
            path,
            &[("Content-Type", "application/json")],
            &serde_json::to_vec(body).unwrap(),
        )
        .await;
    let v = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).unwrap()
    };
    (status, v)
}

pub async fn wait_op(addr: SocketAddr, op: &str) -> Value {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, v) = call(
            addr,
            "GET",
            &format!("/vnflcm/v2/vnf_lcm_op_occs/{op}"),
            &Value::Null,
        )
        .await;
        let s = v["operationState"].as_str().unwrap_or("");
        if !["STARTING", "PROCESSING", "ROLLING_BACK"].contains(&s) {
            return v;
        }
        assert!(Instant::now() < end, "operation {op} did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates and instantiates a demo VNF with auto-heal on; returns its id and VNFC ids.
pub async fn instantiated(addr: SocketAddr) -> (String, Vec<String>) {
    let (s, v) = call(
        addr,
        "POST",
        "/vnflcm/v2/vnf_instances",
        &json!({"vnfdId": DEMO_VNFD}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_owned();
    let (s, v) = call(
        addr,
        "POST",
        &format!("/vnflcm/v2/vnf_instances/{id}/instantiate"),
        &json!({"flavourId": "default", "vnfConfigurableProperties": {"isAutohealEnabled": true}}),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    let ops = call(addr, "GET", "/vnflcm/v2/vnf_lcm_op_occs", &Value::Null)
        .await
        .1;
    let op = ops
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["vnfInstanceId"] == id.as_str() && o["operation"] == "INSTANTIATE")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let op = wait_op(addr, &op).await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    let (_, inst) = call(
        addr,
        "GET",
        &format!("/vnflcm/v2/vnf_instances/{id}"),
        &Value::Null,
    )
    .await;
    assert_eq!(
        inst["vnfConfigurableProperties"]["isAutohealEnabled"], true,
        "{inst}"
    );
    let vnfcs = inst["instantiatedVnfInfo"]["vnfcInfo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_owned())
        .collect();
    (id, vnfcs)
}

pub fn webhook(instance: &str, vnfc: &str, fingerprint: &str, starts_at: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": "4", "groupKey": "{}:{function_type=\"auto_heal\"}", "truncatedAlerts": 0,
        "status": "firing", "receiver": "vnfm-auto-heal",
        "groupLabels": {"function_type": "auto_heal"}, "commonLabels": {"function_type": "auto_heal"},
        "commonAnnotations": {}, "externalURL": "http://127.0.0.1:9093",
        "alerts": [{"status": "firing", "labels": {"alertname": "VnfcDown", "receiver_type": "tacker",
            "function_type": "auto_heal", "vnf_instance_id": instance, "vnfc_info_id": vnfc},
            "annotations": {"summary": "VNFC down"}, "startsAt": starts_at,
            "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://127.0.0.1:9090/graph",
            "fingerprint": fingerprint}]
    }))
    .unwrap()
}

/// Writes a cloud file of four roomy zones (no capacity limit within a bench) in `dir`;
/// its path.
pub fn big_cloud(dir: &std::path::Path) -> std::path::PathBuf {
    let cloud = dir.join("big.yaml");
    let zones: String = (1..=4)
        .map(|z| {
            format!("  AZ-{z}:\n    hosts:\n      host-{z}: {{vcpus: 4096, memory_mb: 8388608, disk_gb: 81920}}\n")
        })
        .collect();
    std::fs::write(
        &cloud,
        format!(
            "zones:\n{zones}flavors:\n  m1.tiny: {{vcpus: 1, memory_mb: 512, disk_gb: 1}}\n  \
             m1.small: {{vcpus: 1, memory_mb: 2048, disk_gb: 20}}\n  \
             m1.medium: {{vcpus: 2, memory_mb: 4096, disk_gb: 40}}\n  \
             m1.large: {{vcpus: 4, memory_mb: 8192, disk_gb: 80}}\n\
             images: [cirros, demo-frontend-image, demo-backend-image]\n"
        ),
    )
    .unwrap();
    cloud
}

/// The occurrences handed out so far, across every generator of [`new_occurrences`] of the
/// process: no two requests of a bench run carry the same `startsAt`.
static OCCURRENCES: AtomicU64 = AtomicU64::new(0);

/// Request bodies of new auto-heal occurrences of the (instance, VNFC) pairs of `targets`,
/// round-robin: each a fresh `startsAt` (the de-duplication key is fingerprint + `startsAt`), so
/// every one is accepted. The bodies are made up front; a request only splices its time in.
pub fn new_occurrences(targets: &[(String, String)]) -> Arc<dyn Fn(u64) -> Vec<u8> + Send + Sync> {
    const AT: &str = "2099-12-31T23:59:59.000Z";
    let halves: Vec<(Vec<u8>, Vec<u8>)> = targets
        .iter()
        .map(|(id, v)| {
            let body = String::from_utf8(webhook(id, v, &format!("{id}/{v}"), AT)).unwrap();
            let (head, tail) = body.split_once(AT).unwrap();
            (head.as_bytes().to_vec(), tail.as_bytes().to_vec())
        })
        .collect();
    Arc::new(move |i| {
        let (head, tail) = &halves[(i as usize) % halves.len()];
        let n = OCCURRENCES.fetch_add(1, Ordering::Relaxed);
        let at = chrono::DateTime::from_timestamp(1_800_000_000 + i64::try_from(n).unwrap(), 0)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut body = Vec::with_capacity(head.len() + at.len() + tail.len());
        body.extend_from_slice(head);
        body.extend_from_slice(at.as_bytes());
        body.extend_from_slice(tail);
        body
    })
}
