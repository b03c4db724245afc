//! Replays every committed fuzz input (`fuzz/corpus/<target>/`, the seeds, and
//! `fuzz/regressions/<target>/`, the minimised inputs of crashes that were fixed) through the
//! same entry points as the cargo-fuzz targets (`fuzz/src/lib.rs`, included here), on the
//! stable toolchain: CI covers them without nightly. A panic fails the test. See
//! docs/fuzzing.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::type_complexity,
    clippy::needless_borrow
)]
#[path = "../../fuzz/src/lib.rs"]
mod targets;

use std::path::Path;

fn files_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_committed_fuzz_input_is_handled_without_panicking() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    for (name, entry) in targets::TARGETS {
        let seeds = files_in(&fuzz.join("corpus").join(name));
        assert!(!seeds.is_empty(), "fuzz/corpus/{name} has no seed");
        let regressions = files_in(&fuzz.join("regressions").join(name));
        for file in seeds.iter().chain(&regressions) {
            let data = std::fs::read(file).unwrap();
            eprintln!("{name}: {}", file.display());
            entry(&data);
        }
    }
}

/// The seeds are valid inputs: the targets reach past the parsers (a seed that stopped
/// parsing would leave the fuzzer exploring error paths only).
#[test]
fn the_seeds_parse() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let read = |t: &str, f: &str| std::fs::read(fuzz.join(t).join(f)).unwrap();
    assert!(vnfm_core::alert::Webhook::from_slice(&read("webhook", "firing.json")).is_ok());
    assert!(vnfm_core::package::VnfPackage::from_files(
        "demo",
        targets::split_files(&read("package_files", "demo-vnf"))
    )
    .is_ok());
    assert!(vnfm_core::package::fs::load_zip_bytes(
        "demo.zip",
        &read("package_zip", "demo-vnf.zip")
    )
    .is_ok());
    let sol003 = |f: &str| {
        let d = read("sol003", f);
        let kind = match d[0] {
            0 => vnfm_cli::serve::LcmBody::Create,
            1 => vnfm_cli::serve::LcmBody::Instantiate,
            2 => vnfm_cli::serve::LcmBody::Scale,
            3 => vnfm_cli::serve::LcmBody::Heal,
            4 => vnfm_cli::serve::LcmBody::Terminate,
            _ => vnfm_cli::serve::LcmBody::Modify,
        };
        vnfm_cli::serve::check_lcm_body(kind, &d[1..])
    };
    for f in [
        "create",
        "instantiate",
        "scale",
        "heal",
        "terminate",
        "patch",
    ] {
        assert_eq!(sol003(f), Ok(()), "{f}");
    }
    // Issue 26's inputs: subscription bodies, SOL013 queries, intent files.
    for f in [
        "filter-vnfd.json",
        "plain.json",
        "states-and-auth.json",
        "basic.json",
    ] {
        let req: vnfm_core::lcm_notify::LccnSubscriptionRequest =
            serde_json::from_slice(&read("subscription", f)).unwrap();
        req.check_limits(&Default::default()).unwrap();
        assert!(req.validate().is_ok(), "{f}");
    }
    for (f, resource) in [
        ("instances-eq", vnfm_core::query::VNF_INSTANCES),
        ("numbers", vnfm_core::query::VNF_INSTANCES),
        ("occs-neq", vnfm_core::query::VNF_LCM_OP_OCCS),
        ("subs-cont", vnfm_core::query::SUBSCRIPTIONS),
    ] {
        let d = read("filter", f);
        let end = d.iter().skip(1).position(|&b| b == 0).unwrap() + 1;
        let q = std::str::from_utf8(&d[1..end]).unwrap();
        let parsed = vnfm_core::query::ListQuery::parse(Some(q), resource);
        assert!(parsed.is_ok(), "{f}: {parsed:?}");
        let doc: serde_json::Value = serde_json::from_slice(&d[end + 1..]).unwrap();
        assert!(doc.is_array(), "{f}");
    }
    let intent = |f: &str| String::from_utf8(read("intent", f)[1..].to_vec()).unwrap();
    assert!(vnfm_core::intent::policy::Policy::from_text("p", &intent("policy")).is_ok());
    assert!(
        vnfm_core::intent::candidates::CandidateFile::from_text("c", &intent("candidates")).is_ok()
    );
    assert!(vnfm_core::intent::links::Problem::from_pla_str(&intent("links")).is_ok());
}
