//! How `vnfm` reads its input files (issue 14 row 13): every file within a bound and only when
//! it is a regular file, a UTF-8 byte order mark accepted in every kind of file, and an error
//! that quotes a long line quoting only a bounded excerpt of it.

// Test helpers: failing means panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const VNFM_ENV: &[&str] = &[
    "VNFM_CONFIG",
    "VNFM_STATE",
    "VNFM_VIM",
    "VNFM_SIM_SEED",
    "VNFM_ID_SALT",
    "VNFM_PACKAGES_DIR",
    "VNFM_CLOUD",
];

const BOM: &[u8] = b"\xef\xbb\xbf";

/// `vnfm args` in the crate directory, without inherited `VNFM_*` variables, its memory
/// capped at 2 GiB (a file read without bound fails fast instead of taking the machine) and
/// killed after 20 s (a FIFO read without care never ends).
fn run(args: &[&str]) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 2097152 2>/dev/null; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_vnfm"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in VNFM_ENV {
        cmd.env_remove(var);
    }
    let mut child = cmd.spawn().expect("vnfm runs");
    let end = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            child.kill().unwrap();
            panic!("vnfm {args:?} did not end within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn with_bom(text: &[u8]) -> Vec<u8> {
    [BOM, text].concat()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[cfg(unix)]
#[test]
fn a_config_that_is_not_a_regular_file_is_refused_unread() {
    let o = run(&["--config", "/dev/zero", "config", "show"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "configuration /dev/zero: is a character device; expected a configuration file"
        ),
        "{}",
        stderr(&o)
    );
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("vnfm.toml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let o = run(&["--config", fifo.to_str().unwrap(), "config", "show"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is a named pipe (FIFO)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_config_larger_than_1_mib_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vnfm.toml");
    // Valid TOML: comments.
    let text = "# padding padding padding padding padding padding padding padding\n".repeat(20_000);
    std::fs::write(&path, text).unwrap();
    let o = run(&["--config", path.to_str().unwrap(), "config", "show"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is larger than 1048576 bytes (1320000 bytes); expected a configuration file of at most 1048576 bytes"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_toml_error_on_a_long_line_quotes_a_bounded_excerpt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vnfm.toml");
    let long = "x".repeat(200_000);
    for text in [
        format!("[vim]\nkind = \"{long}\"\n"),
        format!("[vim]\ncloud = \"a.yaml\" {long}\n"),
        format!("[vim]\n{long} = 1\n"),
    ] {
        std::fs::write(&path, &text).unwrap();
        let o = run(&["--config", path.to_str().unwrap(), "config", "show"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(err.len() < 2000, "{} bytes: {}", err.len(), &err[..2000]);
        assert!(err.contains("line 2"), "{err}");
    }
}

#[test]
fn a_byte_order_mark_is_accepted_in_every_input() {
    let dir = tempfile::tempdir().unwrap();
    // A configuration file.
    let config = dir.path().join("vnfm.toml");
    std::fs::write(&config, with_bom(b"[vim]\nseed = 7\n")).unwrap();
    let o = run(&["--config", config.to_str().unwrap(), "config", "show"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A cloud file.
    let cloud = dir.path().join("cloud.yaml");
    let text =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/clouds/demo.yaml"))
            .unwrap();
    std::fs::write(&cloud, with_bom(&text)).unwrap();
    let o = run(&["cloud", "show", "--cloud", cloud.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A package whose every text file starts with one: VNFD, flavour, types, TOSCA.meta, HOT.
    let pkg = dir.path().join("pkg");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/demo-vnf"),
        &pkg,
    );
    for rel in [
        "Definitions/demo_df_default.yaml",
        "Definitions/demo_top.vnfd.yaml",
        "Definitions/demo_types.yaml",
        "TOSCA-Metadata/TOSCA.meta",
        "BaseHOT/default/demo.yaml",
        "BaseHOT/default/nested/VDU1.yaml",
    ] {
        let p = pkg.join(rel);
        let text = std::fs::read(&p).unwrap();
        std::fs::write(&p, with_bom(&text)).unwrap();
    }
    let o = run(&["package", "show", pkg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let plain = run(&[
        "package",
        "show",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/packages/demo-vnf")
            .to_str()
            .unwrap(),
    ]);
    // The same package, but for where it was read from.
    let shown = String::from_utf8(o.stdout).unwrap();
    let plain = String::from_utf8(plain.stdout).unwrap();
    assert_eq!(
        shown.lines().skip(1).collect::<Vec<_>>(),
        plain.lines().skip(1).collect::<Vec<_>>()
    );
    // A candidate file and a policy of `vnfm select`.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/intent");
    let candidates = dir.path().join("candidates.yaml");
    let policy = dir.path().join("policy.json");
    std::fs::write(
        &candidates,
        with_bom(&std::fs::read(examples.join("candidates.yaml")).unwrap()),
    )
    .unwrap();
    std::fs::write(
        &policy,
        with_bom(&std::fs::read(examples.join("policy-ha.json")).unwrap()),
    )
    .unwrap();
    let o = run(&[
        "select",
        "--policy",
        policy.to_str().unwrap(),
        "--candidates",
        candidates.to_str().unwrap(),
        "--customer",
        "48.85,2.35",
    ]);
    assert!(matches!(o.status.code(), Some(0 | 3)), "{}", stderr(&o));
}

#[test]
fn a_package_file_beyond_16_mib_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("pkg");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages/demo-vnf"),
        &pkg,
    );
    let big = pkg.join("Definitions/huge.bin");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(17 * 1024 * 1024).unwrap();
    let o = run(&["package", "show", pkg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("huge.bin: is larger than 16777216 bytes"),
        "{}",
        stderr(&o)
    );
    // Under Files/ it is not read.
    std::fs::create_dir_all(pkg.join("Files")).unwrap();
    std::fs::rename(&big, pkg.join("Files/huge.bin")).unwrap();
    let o = run(&["package", "show", pkg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[cfg(unix)]
#[test]
fn links_inside_a_package_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/packages");
    let pkg = dir.path().join("cnf");
    copy_dir(&examples.join("cnf-podaffinity"), &pkg);
    // A host file outside the package, valid as a manifest: it must not be read.
    let host = dir.path().join("host-file.yaml");
    std::fs::copy(pkg.join("Files/kubernetes/deployment.yaml"), &host).unwrap();
    let o = run(&["package", "show", pkg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::remove_file(pkg.join("Files/kubernetes/deployment.yaml")).unwrap();
    std::os::unix::fs::symlink(&host, pkg.join("Files/kubernetes/deployment.yaml")).unwrap();
    let o = run(&["package", "show", pkg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("Files/kubernetes/deployment.yaml")
            && e.contains("a symbolic link inside a package (not followed)"),
        "{e}"
    );
    // Files/kubernetes itself as a link: refused too.
    std::fs::remove_file(pkg.join("Files/kubernetes/deployment.yaml")).unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::copy(&host, manifests.join("deployment.yaml")).unwrap();
    std::fs::remove_dir(pkg.join("Files/kubernetes")).unwrap();
    std::os::unix::fs::symlink(&manifests, pkg.join("Files/kubernetes")).unwrap();
    let o = run(&["package", "show", pkg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Files/kubernetes: a symbolic link inside"),
        "{}",
        stderr(&o)
    );

    // A descriptor linked from outside the package: refused as well.
    let demo = dir.path().join("demo");
    copy_dir(&examples.join("demo-vnf"), &demo);
    let types = demo.join("Definitions/demo_types.yaml");
    let outside = dir.path().join("types.yaml");
    std::fs::rename(&types, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &types).unwrap();
    let o = run(&["package", "show", demo.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Definitions/demo_types.yaml: a symbolic link inside a package"),
        "{}",
        stderr(&o)
    );
    // The operator's own link to a package folder (`--package`, `package show`) is followed.
    std::fs::remove_file(&types).unwrap();
    std::fs::rename(&outside, &types).unwrap();
    let link = dir.path().join("current");
    std::os::unix::fs::symlink(&demo, &link).unwrap();
    let o = run(&["package", "show", link.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn deeply_nested_intent_yaml_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/intent");
    let deep = dir.path().join("deep.yaml");
    // 100,000 `[`: over 30 s in serde_yaml before its own recursion limit answers.
    std::fs::write(&deep, format!("intents: {}", "[".repeat(100_000))).unwrap();
    let policy = examples.join("policy-ha.json");
    let candidates = examples.join("candidates.yaml");
    for args in [
        [
            "--policy",
            deep.to_str().unwrap(),
            "--candidates",
            candidates.to_str().unwrap(),
        ],
        [
            "--policy",
            policy.to_str().unwrap(),
            "--candidates",
            deep.to_str().unwrap(),
        ],
    ] {
        let started = Instant::now();
        let mut all = vec!["select"];
        all.extend(args);
        all.extend(["--customer", "48.85,2.35"]);
        let o = run(&all);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("deep.yaml") && e.contains("nested deeper than 64 levels at line 1"),
            "{e}"
        );
        // Generous: it took 9 s for 40,000 `[`.
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    // JSON too.
    let deep_json = dir.path().join("deep.json");
    std::fs::write(&deep_json, "[".repeat(100_000)).unwrap();
    let o = run(&[
        "select",
        "--policy",
        deep_json.to_str().unwrap(),
        "--candidates",
        candidates.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("nested deeper than 64"),
        "{}",
        stderr(&o)
    );
}
