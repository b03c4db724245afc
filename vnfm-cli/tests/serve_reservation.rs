//! Reservation parity over HTTP (issue 11, acceptance 5): `vnfm serve` draws from and gives
//! back to reservations exactly as `vnfm instantiate | scale | terminate --reservation` do.
//! The same steps run through the binary on one state file and through the LCM API (with
//! `additionalParams.reservationId`) on another, both over the demo cloud with the same seed
//! and placement settings; after every step the two ledgers hold the same live allocations
//! (VNFC, reservation, amounts) and the reservations the same allocated amounts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};
use serve_common::*;
use vnfm_cli::config::{Config, SelectionKind};
use vnfm_cli::promise::{PromiseBook, PROMISE_DOCUMENT};
use vnfm_cli::store::SqliteStore;
use vnfm_core::reservation::Capacity;

const VNFM_ENV: &[&str] = &[
    "VNFM_CONFIG",
    "VNFM_STATE",
    "VNFM_VIM",
    "VNFM_SIM_SEED",
    "VNFM_ID_SALT",
    "VNFM_PACKAGES_DIR",
    "VNFM_CLOUD",
];

/// The placement flags of every CLI operation, the same as [`server_config`]'s.
const PLACEMENT: &[&str] = &["--selection", "capacity-aware", "--fallback-best-effort"];

fn run(state: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.arg("--state")
        .arg(state)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    cmd.output().expect("vnfm runs")
}

fn ok(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn server_config(state: &Path) -> Config {
    let mut c = Config::default();
    c.state.path = Some(state.to_owned());
    c.server.listen = "127.0.0.1:0".parse().unwrap();
    c.placement.selection = Some(SelectionKind::CapacityAware);
    c.placement.fallback_best_effort = true;
    c
}

/// The live allocations of a state file's ledger as `(VNFC, reservation, amounts)`, sorted
/// (instance ids and times differ between the two runs), and the reservation's allocated
/// amounts.
async fn ledger_of(state: &Path) -> (Vec<(String, Value, Value)>, Value) {
    let store = SqliteStore::open(state).unwrap();
    let body = store.document(PROMISE_DOCUMENT).await.unwrap().unwrap();
    let book = PromiseBook::decode(&body).unwrap();
    let mut live: Vec<(String, Value, Value)> = book
        .ledger
        .allocations()
        .filter(|a| a.is_live())
        .map(|a| {
            let vnfc = a
                .instance_ref
                .as_deref()
                .and_then(|r| r.split_once('/'))
                .map(|(_, v)| v.to_owned())
                .unwrap();
            (
                vnfc,
                json!(a.reservation),
                serde_json::to_value(a.capacity).unwrap(),
            )
        })
        .collect();
    live.sort_by(|a, b| a.0.cmp(&b.0));
    let allocated = serde_json::to_value(
        book.ledger
            .reservation(&"rollout".into())
            .unwrap()
            .allocated,
    )
    .unwrap();
    (live, allocated)
}

/// Posts an LCM request; with 202 waits for the occurrence and for the server to have
/// settled the reservation (no operation running), and returns the occurrence.
async fn operation(addr: SocketAddr, path: &str, body: Value) -> Value {
    let r = post_json(addr, path, &body).await;
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let op = wait_op(addr, r.header("location").unwrap()).await;
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    settled(addr).await;
    op
}

fn zones_of(vnfcs: &[Value]) -> Vec<(String, String)> {
    let mut z: Vec<(String, String)> = vnfcs
        .iter()
        .map(|v| {
            (
                v["id"].as_str().unwrap().to_owned(),
                v["zoneId"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    z.sort();
    z
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_draws_and_gives_back_as_the_command_line_does() {
    let dir = tempfile::tempdir().unwrap();
    let cli = dir.path().join("cli.sqlite");
    let http = dir.path().join("http.sqlite");
    // Both ledgers: the demo cloud's zone catalogue. The CLI's reservation is made with the
    // command, the server's over /promise/v1: room for four VNFCs of VDU1 in AZ-3, from now.
    let amounts = json!({"cores": 4, "ram": 8192, "instances": 4, "size": 200});
    ok(&run(&cli, &["provider", "add"]));
    ok(&run(&http, &["provider", "add"]));
    ok(&run(
        &cli,
        &[
            "reservation",
            "create",
            "--zone",
            "AZ-3",
            "--cores",
            "4",
            "--ram",
            "8192",
            "--instances",
            "4",
            "--size",
            "200",
            "--id",
            "rollout",
        ],
    ));
    let server = start(server_config(&http)).await;
    let addr = server.local_addr();
    let r = post_json(
        addr,
        "/promise/v1/reservations",
        &json!({"zone": "AZ-3", "capacity": amounts, "id": "rollout"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["status"], "active");

    // Instantiate drawing from the reservation.
    let mut args = vec!["--json", "instantiate", "--reservation", "rollout"];
    args.extend_from_slice(PLACEMENT);
    let v = ok(&run(&cli, &args));
    let cli_id = v["vnfInstance"]["id"].as_str().unwrap().to_owned();
    let cli_zones = zones_of(v["vnfcs"].as_array().unwrap());
    assert!(!v["allocations"].as_array().unwrap().is_empty(), "{v}");

    let r = post_json(
        addr,
        "/vnflcm/v2/vnf_instances",
        &json!({"vnfdId": DEMO_VNFD}),
    )
    .await;
    assert_eq!(r.status, 201);
    let id = r.json()["id"].as_str().unwrap().to_owned();
    let base = format!("/vnflcm/v2/vnf_instances/{id}");
    // Refusals come before any occurrence: an unknown reservation (422), a non-string (422).
    for (params, status, says) in [
        (
            json!({"reservationId": "nope"}),
            422,
            "reservation nope does not exist",
        ),
        (
            json!({"reservationId": 7}),
            422,
            "additionalParams.reservationId",
        ),
    ] {
        let r = post_json(
            addr,
            &format!("{base}/instantiate"),
            &json!({"flavourId": "default", "additionalParams": params}),
        )
        .await;
        let p = r.problem(status);
        assert!(p["detail"].as_str().unwrap().contains(says), "{p}");
    }
    assert!(ops(addr, &id, "INSTANTIATE").await.is_empty());
    operation(
        addr,
        &format!("{base}/instantiate"),
        json!({"flavourId": "default", "additionalParams": {"reservationId": "rollout"}}),
    )
    .await;
    let inst = get(addr, &base).await.json();
    let http_zones = zones_of(
        inst["instantiatedVnfInfo"]["vnfcResourceInfo"]
            .as_array()
            .unwrap(),
    );
    assert_eq!(http_zones, cli_zones, "same seed, same placement");
    let after_instantiate = ledger_of(&cli).await;
    assert!(!after_instantiate.0.is_empty());
    assert_eq!(ledger_of(&http).await, after_instantiate);

    // Scale out drawing from it.
    let mut args = vec![
        "--json",
        "scale",
        "--instance",
        &cli_id,
        "--aspect",
        "VDU1_scale",
        "--type",
        "out",
        "--reservation",
        "rollout",
    ];
    args.extend_from_slice(PLACEMENT);
    ok(&run(&cli, &args));
    operation(
        addr,
        &format!("{base}/scale"),
        json!({"type": "SCALE_OUT", "aspectId": "VDU1_scale",
               "additionalParams": {"reservationId": "rollout"}}),
    )
    .await;
    let after_out = ledger_of(&cli).await;
    assert!(
        after_out.0.len() > after_instantiate.0.len(),
        "{after_out:?}"
    );
    assert_eq!(ledger_of(&http).await, after_out);

    // A scale-in naming a reservation is refused (the CLI's usage error); without, it gives
    // back the allocations of the VNFCs it removed.
    let r = post_json(
        addr,
        &format!("{base}/scale"),
        &json!({"type": "SCALE_IN", "aspectId": "VDU1_scale",
                "additionalParams": {"reservationId": "rollout"}}),
    )
    .await;
    assert!(r.problem(422)["detail"]
        .as_str()
        .unwrap()
        .contains("SCALE_IN"));
    let mut args = vec![
        "--json",
        "scale",
        "--instance",
        &cli_id,
        "--aspect",
        "VDU1_scale",
        "--type",
        "in",
    ];
    args.extend_from_slice(PLACEMENT);
    ok(&run(&cli, &args));
    operation(
        addr,
        &format!("{base}/scale"),
        json!({"type": "SCALE_IN", "aspectId": "VDU1_scale"}),
    )
    .await;
    let after_in = ledger_of(&cli).await;
    assert!(after_in.0.len() < after_out.0.len(), "{after_in:?}");
    assert_eq!(ledger_of(&http).await, after_in);

    // Terminate gives back the rest: nothing allocated in either ledger.
    ok(&run(&cli, &["--json", "terminate", "--instance", &cli_id]));
    operation(
        addr,
        &format!("{base}/terminate"),
        json!({"terminationType": "FORCEFUL"}),
    )
    .await;
    let (live, allocated) = ledger_of(&http).await;
    assert!(live.is_empty(), "{live:?}");
    let zero = serde_json::to_value(Capacity::default()).unwrap();
    assert_eq!(allocated, zero, "nothing allocated");
    assert_eq!(ledger_of(&cli).await, (live, allocated));
    let res = get(addr, "/promise/v1/reservations/rollout").await.json();
    assert_eq!(res["allocated"], zero, "{res}");
    server.shutdown().await.unwrap();
}
