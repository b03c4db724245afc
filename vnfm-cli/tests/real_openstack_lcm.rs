//! `vnfm --vim openstack ...` as a process: configuration errors (always), and the LCM
//! commands end to end against a real OpenStack (only with `VNFM_TEST_OPENSTACK=1` and the
//! `OS_*` variables, e.g. of `scripts/openstack-dev.sh start`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// The environment variables `vnfm` reads, removed from every command of these tests.
const VNFM_ENV: &[&str] = &[
    "VNFM_CONFIG",
    "VNFM_STATE",
    "VNFM_VIM",
    "VNFM_SIM_SEED",
    "VNFM_ID_SALT",
    "VNFM_PACKAGES_DIR",
    "VNFM_CLOUD",
];

fn vnfm(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    cmd
}

/// `vnfm` with every `OS_*` variable removed.
fn vnfm_no_cloud(args: &[&str]) -> Command {
    let mut cmd = vnfm(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("OS_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn package() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/packages/os-vnf")
        .display()
        .to_string()
}

#[test]
fn openstack_without_configuration_is_a_usage_error_naming_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.sqlite");
    let pkg = package();
    let o = vnfm_no_cloud(&[
        "--vim",
        "openstack",
        "--state",
        state.to_str().unwrap(),
        "instantiate",
        "--package",
        &pkg,
        "--flavour",
        "free",
    ])
    .output()
    .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("OS_AUTH_URL"), "{err}");
    assert!(err.contains("--vim openstack"), "{err}");

    // A cloud named in vnfm.toml that no clouds.yaml holds.
    let cfg = dir.path().join("vnfm.toml");
    std::fs::write(&cfg, "[vim]\nkind = \"openstack\"\nos_cloud = \"lab\"\n").unwrap();
    let yaml = dir.path().join("clouds.yaml");
    std::fs::write(
        &yaml,
        "clouds:\n  other:\n    auth:\n      auth_url: http://127.0.0.1:1/v3\n",
    )
    .unwrap();
    let o = vnfm_no_cloud(&[
        "--config",
        cfg.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "terminate",
        "--instance",
        "x",
    ])
    .env("OS_CLIENT_CONFIG_FILE", &yaml)
    .output()
    .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("lab") && err.contains("os_cloud"), "{err}");
    assert!(err.contains("clouds.lab"), "{err}");

    // --cloud is the simulator's cloud file.
    let o = vnfm(&[
        "--vim",
        "openstack",
        "--state",
        state.to_str().unwrap(),
        "instantiate",
        "--cloud",
        "c.yaml",
    ])
    .output()
    .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--cloud c.yaml"), "{err}");
}

#[test]
fn openstack_unreachable_keystone_exits_5() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.sqlite");
    let pkg = package();
    // Nothing listens on port 1.
    let o = vnfm_no_cloud(&[
        "--vim",
        "openstack",
        "--state",
        state.to_str().unwrap(),
        "grant",
        "--package",
        &pkg,
        "--flavour",
        "free",
    ])
    .env("OS_AUTH_URL", "http://127.0.0.1:1/v3")
    .env("OS_USERNAME", "admin")
    .env("OS_PASSWORD", "x")
    .env("OS_PROJECT_NAME", "admin")
    .env("OS_USER_DOMAIN_NAME", "Default")
    .env("OS_PROJECT_DOMAIN_NAME", "Default")
    .output()
    .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(err.contains("127.0.0.1:1"), "{err}");
}

fn json_of(o: &Output, what: &str) -> Value {
    assert!(
        o.status.success(),
        "{what}: exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", text(&o.stdout)))
}

#[test]
fn lcm_commands_against_real_openstack() {
    if !vnfm_core::vectors::real_suite_enabled(
        "VNFM_TEST_OPENSTACK",
        "real-openstack",
        module_path!(),
        "set VNFM_TEST_OPENSTACK=1 and the OS_* variables of a cloud \
             (eval \"$(scripts/openstack-dev.sh start)\") to run vnfm --vim openstack",
    ) {
        return;
    }
    let zones = std::env::var("VNFM_OS_TEST_ZONES").unwrap_or_else(|_| "nova".into());
    let zone = zones.split_whitespace().next().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.sqlite");
    let state = state.to_str().unwrap();
    let pkg = package();
    let os = |args: &[&str]| {
        let mut all = vec!["--vim", "openstack", "--state", state, "--json"];
        all.extend_from_slice(args);
        vnfm(&all).output().unwrap()
    };

    let g = json_of(
        &os(&["grant", "--package", &pkg, "--flavour", "free"]),
        "grant",
    );
    assert!(
        g["grant"]["zones"]
            .as_array()
            .is_some_and(|z| !z.is_empty()),
        "{g}"
    );

    let vdu1 = format!("VDU1={zone}");
    let vdu2 = format!("VDU2={zone}");
    let r = json_of(
        &os(&[
            "instantiate",
            "--package",
            &pkg,
            "--flavour",
            "free",
            "--zone",
            &vdu1,
            "--zone",
            &vdu2,
            "--name",
            "cli-real",
        ]),
        "instantiate",
    );
    assert_eq!(r["vnfLcmOpOcc"]["operationState"], "COMPLETED", "{r}");
    let id = r["vnfInstance"]["id"].as_str().unwrap().to_owned();
    let vnfcs = r["vnfcs"].as_array().unwrap();
    assert_eq!(vnfcs.len(), 2, "{r}");
    for v in vnfcs {
        assert_eq!(v["zoneId"], zone.as_str(), "{v}");
        assert!(v["host"].as_str().is_some_and(|h| !h.is_empty()), "{v}");
    }

    let s = json_of(
        &os(&[
            "scale",
            "--instance",
            &id,
            "--aspect",
            "VDU1_scale",
            "--type",
            "out",
            "--package",
            &pkg,
            // The local granter (capacity-aware) should avoid the small zones
            // (VNFM_OS_TEST_SMALL_ZONES), which Nova refuses for VDU1's m1.small; if it does
            // not, the CLI reselects.
            "--reselect-zones",
        ]),
        "scale",
    );
    assert_eq!(s["vnfLcmOpOcc"]["operationState"], "COMPLETED", "{s}");
    // The check needs the small zones: without them it would check nothing.
    let small: Vec<String> = std::env::var("VNFM_OS_TEST_SMALL_ZONES")
        .or_else(|_| std::env::var("VNFM_OS_TEST_SMALL_ZONE"))
        .expect(
            "VNFM_OS_TEST_SMALL_ZONES: the zones too small for an m1.small \
             (scripts/openstack-dev.sh env prints it)",
        )
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert!(!small.is_empty(), "VNFM_OS_TEST_SMALL_ZONES is empty");
    let attempts = s["vnfLcmOpOcc"]["attempts"].as_array().unwrap();
    let last = attempts
        .last()
        .expect("a scale-out has at least one attempt");
    assert!(
        last["zones"]
            .as_object()
            .unwrap()
            .values()
            .all(|z| !small.iter().any(|s| z == s.as_str())),
        "the scale-out ended in a small zone {small:?}: {s}"
    );
    assert_eq!(s["vnfcs"].as_array().unwrap().len(), 3, "{s}");

    let h = json_of(
        &os(&[
            "heal",
            "--instance",
            &id,
            "--vnfc",
            "VDU2-0",
            "--package",
            &pkg,
            "--reselect-zones",
        ]),
        "heal",
    );
    assert_eq!(h["vnfLcmOpOcc"]["operationState"], "COMPLETED", "{h}");

    let shown = json_of(&os(&["instance", "show", &id]), "instance show");
    assert_eq!(shown["vnfInstance"]["instantiationState"], "INSTANTIATED");
    let ops = json_of(&os(&["op", "list", "--instance", &id]), "op list");
    assert_eq!(ops["vnfLcmOpOccs"].as_array().unwrap().len(), 3, "{ops}");

    let t = json_of(
        &os(&["terminate", "--instance", &id, "--delete"]),
        "terminate",
    );
    assert_eq!(t["vnfLcmOpOcc"]["operationState"], "COMPLETED", "{t}");
}
