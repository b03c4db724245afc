//! The package index of `vnfm serve` (issue 14 row 2), through real sockets on 127.0.0.1: the
//! packages of `[packages] dir` are read once at start, those that do not load are reported
//! (stderr, `/metrics`, `GET /admin/packages`), an unknown `vnfdId` is answered without
//! reading the folder again, and a package added to the folder is served after a reload or,
//! with `[packages] rescan_interval`, after the next look.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

mod serve_common;

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{json, Value};
use serve_common::*;

/// The `vnfdId` of the fixture package `tests/cmd/packages/mini`.
const MINI: &str = "0b6e2f55-9d1c-4c1e-8a57-1f0c3d2e4b6a";

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cmd/packages")
        .join(name)
}

/// A copy of the mini package whose `vnfdId` is `id`, written under a hidden name and renamed
/// into `dir` (published whole).
fn publish_mini_as(dir: &Path, name: &str, id: &str) {
    let hidden = dir.join(format!(".{name}.tmp"));
    copy_dir(&fixture("mini"), &hidden);
    let vnfd = hidden.join("Definitions/mini_top.vnfd.yaml");
    let text = std::fs::read_to_string(&vnfd).unwrap().replace(MINI, id);
    std::fs::write(&vnfd, text).unwrap();
    std::fs::rename(&hidden, dir.join(name)).unwrap();
}

async fn create(addr: SocketAddr, auth: &[(&str, &str)], vnfd: &str) -> Reply {
    let mut h = vec![("Content-Type", "application/json")];
    h.extend_from_slice(auth);
    request(
        addr,
        "POST",
        "/vnflcm/v2/vnf_instances",
        &h,
        &serde_json::to_vec(&json!({ "vnfdId": vnfd })).unwrap(),
    )
    .await
}

fn reads(m: &str) -> (u64, u64) {
    (
        metric(m, "vnfm_package_reads_total{outcome=\"loaded\"}"),
        metric(m, "vnfm_package_reads_total{outcome=\"failed\"}"),
    )
}

fn failed_paths(listing: &Value) -> Vec<String> {
    listing["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            Path::new(f["path"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packages_are_read_once_reported_and_found_after_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let pkgs = dir.path().join("packages");
    copy_dir(&fixture("mini"), &pkgs.join("mini"));
    copy_dir(&fixture("malformed-vnfd"), &pkgs.join("broken"));
    std::fs::write(pkgs.join("notes.txt"), "not a package\n").unwrap();
    // A package with a link inside: refused (the operator's link to a package is followed:
    // `a_linked_package_folder_is_followed`).
    copy_dir(&fixture("mini"), &pkgs.join("link"));
    let vnfd = pkgs.join("link/Definitions/mini_top.vnfd.yaml");
    std::fs::rename(&vnfd, dir.path().join("outside.yaml")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("outside.yaml"), &vnfd).unwrap();
    // A FIFO would block whoever opens it for reading: it must never be opened.
    let made = std::process::Command::new("mkfifo")
        .arg(pkgs.join("fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::write(pkgs.join(".partial.zip"), "half a zip").unwrap();

    let mut c = config(dir.path(), 3600);
    c.packages.dir = Some(pkgs.clone());
    c.packages.rescan_interval = 0;
    let server = start(c).await;
    let addr = server.local_addr();

    // Read once at start; what does not load is listed with why, and counted.
    let listing = get(addr, "/admin/packages").await.json();
    let served: Vec<&str> = listing["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["vnfdId"].as_str().unwrap())
        .collect();
    assert_eq!(served, [MINI], "{listing}");
    assert_eq!(
        failed_paths(&listing),
        ["broken", "fifo", "link", "notes.txt"],
        "{listing}"
    );
    let reason = |name: &str| {
        listing["failed"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with(name))
            .map(|f| f["reason"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert!(reason("fifo").contains("a special file"), "{listing}");
    assert!(
        reason("link").contains("mini_top.vnfd.yaml: a symbolic link inside a package"),
        "{listing}"
    );
    assert!(
        reason("notes.txt").contains("not a VNF package"),
        "{listing}"
    );
    let m = metrics(addr).await;
    assert_eq!(metric(&m, "vnfm_packages{state=\"loaded\"}"), 1, "{m}");
    assert_eq!(metric(&m, "vnfm_packages{state=\"failed\"}"), 4, "{m}");
    assert_eq!(reads(&m), (1, 4), "{m}");

    // Unknown ids: 422 from the index, the folder not read again.
    for i in 0..20 {
        let id = format!("unknown-{i}");
        let p = create(addr, &[], &id).await.problem(422);
        let detail = p["detail"].as_str().unwrap();
        assert!(
            detail.contains(&format!("no package with vnfdId {id} in [packages] dir"))
                && detail.contains("1 served, 4 not loaded"),
            "{p}"
        );
    }
    assert_eq!(reads(&metrics(addr).await), (1, 4));
    assert_eq!(create(addr, &[], MINI).await.status, 201);
    // The built-in demo package stays known.
    assert_eq!(create(addr, &[], DEMO_VNFD).await.status, 201);

    // A package added to the folder: unknown until the reload, which reads everything again.
    let new_id = "5e3c1a9d-0000-4000-8000-00000000a002";
    publish_mini_as(&pkgs, "mini2", new_id);
    create(addr, &[], new_id).await.problem(422);
    let r = request(addr, "POST", "/admin/packages/reload", &[], b"").await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["packages"].as_array().unwrap().len(), 2);
    assert_eq!(create(addr, &[], new_id).await.status, 201);
    assert_eq!(reads(&metrics(addr).await), (1 + 2, 4 + 4));
    server.shutdown().await.unwrap();
}

/// With `rescan_interval`, a package added to the folder is served after the next look,
/// which reads only what changed; the listing and the reload need the API token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_folder_is_read_again_for_what_changed_only() {
    let dir = tempfile::tempdir().unwrap();
    let pkgs = dir.path().join("packages");
    copy_dir(&fixture("mini"), &pkgs.join("mini"));
    copy_dir(&fixture("malformed-vnfd"), &pkgs.join("broken"));
    let mut c = config(dir.path(), 3600);
    c.packages.dir = Some(pkgs.clone());
    c.packages.rescan_interval = 1;
    c.server.api_token = Some(vnfm_cli::config::Secret::new("api-t0ken"));
    let server = start(c).await;
    let addr = server.local_addr();
    let auth = [("Authorization", "Bearer api-t0ken")];
    get(addr, "/admin/packages").await.problem(401);
    request(addr, "POST", "/admin/packages/reload", &[], b"")
        .await
        .problem(401);
    assert_eq!(reads(&metrics(addr).await), (1, 1));

    let new_id = "5e3c1a9d-0000-4000-8000-00000000a003";
    publish_mini_as(&pkgs, "mini3", new_id);
    eventually(15, "the new package served", || async {
        (create(addr, &auth, new_id).await.status == 201).then_some(())
    })
    .await;
    // Only the new entry was read: the others did not change.
    assert_eq!(reads(&metrics(addr).await), (2, 1));
    let r = request(addr, "GET", "/admin/packages", &auth, b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["packages"].as_array().unwrap().len(), 2);

    // A package removed from the folder is no longer served.
    std::fs::remove_dir_all(pkgs.join("mini")).unwrap();
    eventually(15, "the removed package gone", || async {
        (create(addr, &auth, MINI).await.status == 422).then_some(())
    })
    .await;
    server.shutdown().await.unwrap();
}

/// The operator's link in the packages folder (a release link, a ConfigMap mount) is followed,
/// and moving it to another release is a change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_package_folder_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let pkgs = dir.path().join("packages");
    let releases = dir.path().join("releases");
    std::fs::create_dir_all(&pkgs).unwrap();
    std::fs::create_dir_all(&releases).unwrap();
    let (v1, v2) = (
        "5e3c1a9d-0000-4000-8000-00000000b001",
        "5e3c1a9d-0000-4000-8000-00000000b002",
    );
    publish_mini_as(&releases, "r1", v1);
    publish_mini_as(&releases, "r2", v2);
    std::os::unix::fs::symlink(releases.join("r1"), pkgs.join("current")).unwrap();
    let mut c = config(dir.path(), 3600);
    c.packages.dir = Some(pkgs.clone());
    c.packages.rescan_interval = 1;
    let server = start(c).await;
    let addr = server.local_addr();
    let listing = get(addr, "/admin/packages").await.json();
    assert_eq!(failed_paths(&listing), Vec::<String>::new(), "{listing}");
    assert_eq!(create(addr, &[], v1).await.status, 201, "{listing}");
    // The link moved to the next release: served after the next look.
    let tmp = pkgs.join(".current.tmp");
    std::os::unix::fs::symlink(releases.join("r2"), &tmp).unwrap();
    std::fs::rename(&tmp, pkgs.join("current")).unwrap();
    eventually(15, "the next release served", || async {
        (create(addr, &[], v2).await.status == 201).then_some(())
    })
    .await;
    server.shutdown().await.unwrap();
}
