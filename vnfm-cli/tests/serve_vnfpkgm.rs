//! The SOL005 package endpoints that Tacker reads from its NFVO (`GET
//! /vnfpkgm/v2/onboarded_vnf_packages/{vnfdId}`, `…/vnfd`, `…/package_content`), through real
//! sockets: the `VnfPkgInfo` of a folder package, of a zip package and of the built-in demo;
//! zips that are the same bytes every time (built twice, and after the files' times and modes
//! changed); `Accept` handling (406); unknown ids (404); the Grant API's credentials.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod serve_common;

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use serve_common::*;
use vnfm_cli::config::{OAuth2Client, Secret};

/// The `vnfdId` of the fixture package `tests/cmd/packages/mini`.
const MINI: &str = "0b6e2f55-9d1c-4c1e-8a57-1f0c3d2e4b6a";
/// The `vnfdId` of the zip copy of it.
const ZIPPED: &str = "5a1d3c2b-0000-4000-8000-000000000001";
const BASE: &str = "/vnfpkgm/v2/onboarded_vnf_packages";

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cmd/packages/mini")
}

/// Every file under `dir`, relative path → content.
fn files_under(dir: &Path, rel: &str, out: &mut BTreeMap<String, Vec<u8>>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let path = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if e.file_type().unwrap().is_dir() {
            files_under(&e.path(), &path, out);
        } else {
            out.insert(path, std::fs::read(e.path()).unwrap());
        }
    }
}

/// The mini package with `vnfdId` `ZIPPED`, as a zip file (written by the test, in an order
/// of its own, with its own dates).
fn zip_package(to: &Path) -> Vec<u8> {
    let mut files = BTreeMap::new();
    files_under(&fixture(), "", &mut files);
    let top = files.get_mut("Definitions/mini_top.vnfd.yaml").unwrap();
    *top = String::from_utf8(top.clone())
        .unwrap()
        .replace(MINI, ZIPPED)
        .into_bytes();
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::from_date_and_time(2024, 5, 6, 7, 8, 10).unwrap());
    for (p, b) in files.iter().rev() {
        w.start_file(p.as_str(), opts).unwrap();
        w.write_all(b).unwrap();
    }
    let bytes = w.finish().unwrap().into_inner();
    std::fs::write(to, &bytes).unwrap();
    bytes
}

/// A zip's entries in order: name, content, date, mode.
fn entries(zip_bytes: &[u8]) -> Vec<(String, Vec<u8>, String, Option<u32>)> {
    let mut a = zip::ZipArchive::new(Cursor::new(zip_bytes)).unwrap();
    (0..a.len())
        .map(|i| {
            let mut f = a.by_index(i).unwrap();
            let mut b = Vec::new();
            f.read_to_end(&mut b).unwrap();
            let date = f.last_modified().map(|d| d.to_string()).unwrap_or_default();
            (f.name().to_owned(), b, date, f.unix_mode())
        })
        .collect()
}

async fn get_with(addr: SocketAddr, path: &str, accept: Option<&str>) -> Reply {
    let auth = format!("Bearer {BEARER}");
    let mut h = vec![("Authorization", auth.as_str())];
    if let Some(a) = accept {
        h.push(("Accept", a));
    }
    request(addr, "GET", path, &h, b"").await
}

fn zip_of(r: &Reply) -> &[u8] {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("content-type"), Some("application/zip"));
    &r.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packages_are_served_as_tacker_reads_them_in_stable_zips() {
    let dir = tempfile::tempdir().unwrap();
    let pkgs = dir.path().join("packages");
    let mini = pkgs.join("mini");
    copy_dir(&fixture(), &mini);
    std::fs::create_dir_all(mini.join("Files/images")).unwrap();
    std::fs::write(mini.join("Files/images/image.bin"), [0u8, 1, 2, 255]).unwrap();
    let zip_file = zip_package(&pkgs.join("mini.zip"));
    let mut c = serve_common::config(dir.path(), 1);
    c.server.api_token = Some(Secret::new(BEARER));
    c.server.oauth2.clients = vec![OAuth2Client {
        id: "tacker".into(),
        secret: Some(Secret::new("tacker-secret")),
        tls_client_auth_subject_dn: None,
        asynchronous: false,
    }];
    c.packages.dir = Some(pkgs.clone());
    let server = start(c).await;
    let addr = server.local_addr();

    // The VnfPkgInfo.
    let r = get_with(addr, &format!("{BASE}/{MINI}"), None).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("version"), Some("2.1.0"));
    let info = r.json();
    assert_eq!(info["vnfdId"], MINI);
    assert_eq!(info["id"], MINI);
    assert_eq!(info["vnfdVersion"], "2.1");
    assert_eq!(info["onboardingState"], "ONBOARDED");
    assert_eq!(info["operationalState"], "ENABLED");
    assert_eq!(info["usageState"], "NOT_IN_USE");
    for key in ["vnfProvider", "vnfProductName", "vnfSoftwareVersion"] {
        assert!(info[key].is_string(), "{key}: {info}");
    }
    assert_eq!(
        info["_links"]["packageContent"]["href"],
        format!("{BASE}/{MINI}/package_content")
    );
    assert_eq!(
        info["_links"]["vnfd"]["href"],
        format!("{BASE}/{MINI}/vnfd")
    );

    // The whole folder, zipped: sorted, dated 1980-01-01, mode 0644, Files/ included.
    let content = format!("{BASE}/{MINI}/package_content");
    let first = zip_of(&get_with(addr, &content, Some("application/zip")).await).to_vec();
    let listed = entries(&first);
    let mut on_disk = BTreeMap::new();
    files_under(&mini, "", &mut on_disk);
    let names: Vec<&String> = listed.iter().map(|e| &e.0).collect();
    assert_eq!(names, on_disk.keys().collect::<Vec<_>>());
    for (name, bytes, date, mode) in &listed {
        assert_eq!(bytes, &on_disk[name], "{name}");
        assert!(date.starts_with("1980-01-01"), "{name}: {date}");
        assert_eq!(mode.map(|m| m & 0o777), Some(0o644), "{name}");
    }
    // Built again, and after every file's time and mode changed and a reload: the same bytes.
    let again = get_with(addr, &content, None).await;
    assert_eq!(zip_of(&again), first.as_slice());
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000);
    for name in on_disk.keys() {
        let p = mini.join(name);
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(when).unwrap();
        let mut perm = f.metadata().unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o600);
        std::fs::set_permissions(&p, perm).unwrap();
    }
    server.reload_packages().await.unwrap();
    let touched = get_with(addr, &content, None).await;
    assert_eq!(zip_of(&touched), first.as_slice());

    // The VNFD: TOSCA-Metadata/ and Definitions/ only; a three-file VNFD is no text/plain.
    let vnfd = format!("{BASE}/{MINI}/vnfd");
    let r = get_with(addr, &vnfd, Some("application/zip")).await;
    let vnfd_names: Vec<String> = entries(zip_of(&r)).into_iter().map(|e| e.0).collect();
    assert_eq!(
        vnfd_names,
        [
            "Definitions/mini_df_simple.yaml",
            "Definitions/mini_top.vnfd.yaml",
            "Definitions/mini_types.yaml",
            "TOSCA-Metadata/TOSCA.meta"
        ]
    );
    // Tacker's HttpClient sends `Accept: application/json` to every resource: the zip.
    let tacker = get_with(addr, &vnfd, Some("application/json")).await;
    assert_eq!(zip_of(&tacker), r.body.as_slice());
    let tacker = get_with(addr, &content, Some("application/json")).await;
    assert_eq!(zip_of(&tacker), first.as_slice());
    let both = get_with(addr, &vnfd, Some("text/plain, application/zip")).await;
    assert_eq!(zip_of(&both), r.body.as_slice());
    let p = get_with(addr, &vnfd, Some("text/plain")).await.problem(406);
    assert!(
        p["detail"].as_str().unwrap().contains("application/zip"),
        "{p}"
    );
    get_with(addr, &vnfd, Some("image/png")).await.problem(406);
    get_with(addr, &content, Some("text/plain"))
        .await
        .problem(406);
    get_with(addr, &content, Some("application/zip;q=0"))
        .await
        .problem(406);

    // A zip package: its content is the file as it is; its VNFD is zipped anew.
    let r = get_with(addr, &format!("{BASE}/{ZIPPED}/package_content"), None).await;
    assert_eq!(zip_of(&r), zip_file.as_slice());
    let r = get_with(addr, &format!("{BASE}/{ZIPPED}/vnfd"), None).await;
    let names: Vec<String> = entries(zip_of(&r)).into_iter().map(|e| e.0).collect();
    assert_eq!(names, vnfd_names);

    // The built-in demo package.
    let r = get_with(addr, &format!("{BASE}/{DEMO_VNFD}"), None).await;
    assert_eq!(r.json()["vnfdId"], DEMO_VNFD);
    let r = get_with(addr, &format!("{BASE}/{DEMO_VNFD}/package_content"), None).await;
    let names: Vec<String> = entries(zip_of(&r)).into_iter().map(|e| e.0).collect();
    assert!(
        names.contains(&"BaseHOT/default/demo.yaml".to_owned()),
        "{names:?}"
    );

    // Unknown: 404 naming the id, on each resource.
    for tail in ["", "/vnfd", "/package_content"] {
        let p = get_with(addr, &format!("{BASE}/no-such-vnfd{tail}"), None)
            .await
            .problem(404);
        assert!(
            p["detail"].as_str().unwrap().contains("no-such-vnfd"),
            "{p}"
        );
    }

    // Credentials: none is 401; an access token of POST /token works as the api_token does.
    let p = get(addr, &format!("{BASE}/{MINI}")).await.problem(401);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("the VNF package API requires"),
        "{p}"
    );
    let r = request(
        addr,
        "POST",
        "/token",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Authorization", "Basic dGFja2VyOnRhY2tlci1zZWNyZXQ="),
        ],
        b"grant_type=client_credentials",
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let token = format!("Bearer {}", r.json()["access_token"].as_str().unwrap());
    let r = request(addr, "GET", &content, &[("Authorization", &token)], b"").await;
    assert_eq!(zip_of(&r), first.as_slice());
    let v: Value = get(addr, "/vnfpkgm/v2/api_versions").await.json();
    assert_eq!(v["apiVersions"][0]["version"], "2.1.0");
    server.shutdown().await.unwrap();
}
