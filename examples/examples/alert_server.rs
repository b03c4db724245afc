//! Embed vnfm's Alertmanager handler (`vnfm_core::alert`) behind your own HTTP server, and
//! heal from Prometheus alerts.
//!
//! The program instantiates the demo VNF on the simulated cloud with auto-heal enabled, serves
//! `POST /alert/auto_healing` and `POST /alert/auto_scaling` with axum on `127.0.0.1:0`, and
//! posts to itself the Alertmanager 0.25 webhook `examples/alerts/firing.json` (two VNFCs
//! down; its `vnf_instance_id` label, `VNF_INSTANCE_ID` in the file, becomes the id of the
//! instance created here, as a Prometheus rule per instance would label it). Then it posts it
//! again, as Alertmanager re-sends a group that still fires. The handler queues both VNFCs in
//! one heal window (shortened to 1 s here; Tacker's default is 20 s) and drops the repeat; the
//! server's timer task runs one automatic heal of both when the window closes, and the program
//! exits once it completed.
//!
//! The handler is sans-IO: the server reads the instances from its store, hands in the body and
//! `now`, gets back what to answer and which operations to run, and tells it when they end.
//!
//! ```sh
//! cargo run -p vnfm-examples --example alert_server
//! ```

use std::collections::BTreeMap;
use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Mutex, Notify};
use vnfm_core::alert::{
    bad_request, Action, AlertHandler, Endpoint, PrometheusPluginConfig, Webhook,
};
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{Store, VirtualClock};
use vnfm_core::id::VnfInstanceId;
use vnfm_core::lcm::{CreateVnfRequest, InstantiateVnfRequest, VnfInstance};
use vnfm_core::lifecycle::{Drivers, LcmConfig, Lifecycle, OperationOptions, OperationReport};
use vnfm_core::package::{fs, VnfPackage};
use vnfm_core::problem::ProblemDetails;
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;

const DIR: &str = env!("CARGO_MANIFEST_DIR");

/// What the server shares between requests and its heal timer.
struct App {
    lcm: Lifecycle,
    pkg: VnfPackage,
    store: MemoryStore,
    alerts: Mutex<AlertHandler>,
    /// Wakes the heal timer when a request opened a window.
    wake: Notify,
    /// Where the heal timer reports the heals it ran.
    healed: mpsc::Sender<OperationReport>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    // The VNF, on the simulated cloud, opted in to auto-heal.
    let sim = SimCloud::new(CloudFile::load(format!("{DIR}/clouds/demo.yaml"))?, 1);
    let pkg = fs::load(format!("{DIR}/packages/demo-vnf").as_ref())?;
    let store = MemoryStore::new();
    let drivers = Drivers {
        stacks: Arc::new(sim.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(store.clone()),
        clock: Arc::new(VirtualClock::new(Utc::now())),
        cluster: None,
    };
    let lcm = Lifecycle::new(drivers, LcmConfig::standard()?);
    let inst = lcm
        .create(&pkg, &CreateVnfRequest::new(pkg.descriptor_id.clone()))
        .await?;
    let mut request = InstantiateVnfRequest::new("default");
    request.vnf_configurable_properties =
        serde_json::from_value(serde_json::json!({"isAutohealEnabled": true}))?;
    let r = lcm
        .instantiate(&inst.id, &pkg, &request, &OperationOptions::default())
        .await?;
    if !r.is_completed() {
        return Err(format!("instantiate failed: {:?}", r.op_occ.error).into());
    }
    println!(
        "VNF instance {} instantiated: {}",
        inst.id,
        servers(&r.instance)
    );

    // The server.
    let config = PrometheusPluginConfig {
        auto_healing: true,
        timer_interval: 1,
        ..PrometheusPluginConfig::default()
    };
    config.validate()?;
    let (healed, mut heals) = mpsc::channel(4);
    let app = Arc::new(App {
        lcm,
        pkg,
        store,
        alerts: Mutex::new(AlertHandler::new(config)),
        wake: Notify::new(),
        healed,
    });
    let router = Router::new()
        .route("/alert/{endpoint}", post(alert))
        .with_state(app.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    let timer = tokio::spawn(heal_timer(app));
    println!("serving the alert endpoints on http://{addr}");

    // Alertmanager's webhook, twice.
    let body = std::fs::read_to_string(format!("{DIR}/alerts/firing.json"))?
        .replace("VNF_INSTANCE_ID", inst.id.as_str());
    for what in ["posts", "re-sends"] {
        println!("Alertmanager {what} examples/alerts/firing.json to /alert/auto_healing");
        let status = post_json(addr, "/alert/auto_healing", &body).await?;
        println!("  answered {status}");
    }

    // The window closes after 1 s; the timer task runs the heal.
    let report = tokio::time::timeout(Duration::from_secs(30), heals.recv())
        .await?
        .ok_or("the heal timer stopped")?;
    println!(
        "heal {:?} (isAutomaticInvocation {}): {}",
        report.op_occ.operation_state,
        report.op_occ.is_automatic_invocation,
        servers(&report.instance)
    );

    let _ = stop.send(());
    server.await??;
    timer.abort();
    if !report.is_completed() || !report.op_occ.is_automatic_invocation {
        return Err("the automatic heal did not complete".into());
    }
    Ok(())
}

/// `POST /alert/{endpoint}`: the alerts through the handler; 204, or a `ProblemDetails`.
async fn alert(State(app): State<Arc<App>>, Path(name): Path<String>, body: Bytes) -> Response {
    let Some(endpoint) = Endpoint::from_path(&format!("/alert/{name}")) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if let Err(p) = app.alerts.lock().await.config().check_enabled(endpoint) {
        return problem(*p);
    }
    let webhook = match Webhook::from_slice(&body) {
        Ok(w) => w,
        Err(e) => return problem(bad_request(&e)),
    };
    // The instances the alerts name, read from the store before the handler is called (it
    // looks them up synchronously).
    let mut instances: BTreeMap<VnfInstanceId, VnfInstance> = BTreeMap::new();
    for a in &webhook.alerts {
        let Some(id) = a.label("vnf_instance_id").or(a.label("vnfInstanceId")) else {
            continue;
        };
        let id = VnfInstanceId::from(id);
        if let Ok(inst) = app.store.instance(&id).await {
            instances.insert(id, inst);
        }
    }
    let outcomes =
        app.alerts
            .lock()
            .await
            .handle_alerts(endpoint, &webhook, &instances, Utc::now());
    for o in &outcomes {
        let decision = match &o.action {
            Action::HealQueued { vnfc, due, .. } => format!(
                "heal of {vnfc} queued; the window closes in {} ms",
                (*due - Utc::now()).num_milliseconds().max(0)
            ),
            // Scales run at once; this server has auto_scaling off (the endpoint answers 404).
            Action::Scale(job) => format!("scale {:?}", job.request),
            Action::Ignored(reason) => format!("ignored [{}]: {reason}", reason.label()),
        };
        println!("  server: alert {}: {decision}", o.fingerprint);
    }
    app.wake.notify_one();
    StatusCode::NO_CONTENT.into_response()
}

fn problem(p: ProblemDetails) -> Response {
    let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(p)).into_response()
}

/// Sleeps until a heal window closes (or a request opens one), then runs the heals that are
/// due, one automatic heal per instance, and reports each to `main`.
async fn heal_timer(app: Arc<App>) {
    loop {
        let next = app.alerts.lock().await.poll_timeout();
        match next {
            None => app.wake.notified().await,
            Some(at) => {
                let wait = (at - Utc::now()).to_std().unwrap_or_default();
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = app.wake.notified() => {}
                }
            }
        }
        let jobs = app.alerts.lock().await.poll_due(Utc::now());
        for mut job in jobs {
            // The VNFCs may have gone while the window was open.
            if let Ok(inst) = app.store.instance(&job.instance).await {
                job.retain_existing(&inst);
            }
            println!(
                "  server: the window closed: one heal of {}",
                job.vnfcs.join(", ")
            );
            let result = if job.vnfcs.is_empty() {
                None
            } else {
                Some(
                    app.lcm
                        .heal(&job.instance, &app.pkg, &job.request(), &job.options())
                        .await,
                )
            };
            app.alerts.lock().await.mark_idle(&job.instance);
            match result {
                Some(Ok(report)) => {
                    let _ = app.healed.send(report).await;
                }
                Some(Err(e)) => println!("  server: the heal did not start: {e}"),
                None => {}
            }
        }
    }
}

/// POSTs `body` as JSON to `path` on `addr` over plain HTTP/1.1; the status line.
async fn post_json(addr: SocketAddr, path: &str, body: &str) -> Result<String, Box<dyn Error>> {
    let mut stream = TcpStream::connect(addr).await?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: Alertmanager/0.25.0\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await?;
    Ok(reply.lines().next().unwrap_or_default().to_owned())
}

/// `VDU1-0 on <server>, ...`
fn servers(inst: &VnfInstance) -> String {
    inst.instantiated_vnf_info
        .iter()
        .flat_map(|i| &i.vnfc_resource_info)
        .map(|v| {
            let id = &v.compute_resource.resource_id;
            format!("{} on server {}", v.id, id.get(..8).unwrap_or(id))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
