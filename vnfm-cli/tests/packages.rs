//! `vnfm package show` on Tacker's sample package and `vnfm instantiate` on packages that are
//! wrong in ways only the cloud can tell.
//!
//! The Tacker sample VNFD and BaseHOT are read from `../shared/vectors/` at test time (the test
//! prints "skipping" when that folder is absent) and assembled in a temporary folder with a small
//! types file this test writes itself.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

fn vnfm(state: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vnfm"));
    cmd.arg("--state")
        .arg(state)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for var in [
        "VNFM_CONFIG",
        "VNFM_STATE",
        "VNFM_VIM",
        "VNFM_SIM_SEED",
        "VNFM_ID_SALT",
        "VNFM_PACKAGES_DIR",
        "VNFM_CLOUD",
    ] {
        cmd.env_remove(var);
    }
    cmd.output().unwrap()
}

/// The types file the Tacker sample imports (`v2_sample6_types.yaml`), written by this test.
const SAMPLE6_TYPES: &str = r#"tosca_definitions_version: tosca_simple_yaml_1_2
description: types of the Tacker sample6 package, written for vnfm's tests
imports:
  - etsi_nfv_sol001_common_types.yaml
  - etsi_nfv_sol001_vnfd_types.yaml
node_types:
  company.provider.VNF:
    derived_from: tosca.nodes.nfv.VNF
    properties:
      descriptor_id:
        type: string
        constraints: [ valid_values: [ b1bb0ce7-ebca-4fa7-95ed-4840d70a1177 ] ]
        default: b1bb0ce7-ebca-4fa7-95ed-4840d70a1177
      descriptor_version:
        type: string
        default: '1.0'
      provider:
        type: string
        default: 'Company'
      product_name:
        type: string
        default: 'Sample VNF'
      software_version:
        type: string
        default: '1.0'
      vnfm_info:
        type: list
        entry_schema:
          type: string
        default: [ Tacker ]
      flavour_id:
        type: string
        constraints: [ valid_values: [ simple ] ]
        default: simple
      flavour_description:
        type: string
        default: ""
    requirements:
      - virtual_link_external1_1:
          capability: tosca.capabilities.nfv.VirtualLinkable
    interfaces:
      Vnflcm:
        type: tosca.interfaces.nfv.Vnflcm
"#;

#[test]
fn package_show_on_the_tacker_sample() {
    let Some(vectors) = vnfm_core::vectors::shared_vectors(
        env!("CARGO_MANIFEST_DIR"),
        "package_show_on_the_tacker_sample",
    ) else {
        return;
    };
    let src = vectors.join("tacker/az_reselection");
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("sample6");
    std::fs::create_dir_all(pkg.join("Definitions")).unwrap();
    std::fs::create_dir_all(pkg.join("BaseHOT/simple/nested")).unwrap();
    std::fs::copy(
        src.join("vnfd/v2_sample6_df_simple.yaml"),
        pkg.join("Definitions/v2_sample6_df_simple.yaml"),
    )
    .unwrap();
    std::fs::write(pkg.join("Definitions/v2_sample6_types.yaml"), SAMPLE6_TYPES).unwrap();
    std::fs::copy(
        src.join("hot/sample6.yaml"),
        pkg.join("BaseHOT/simple/sample6.yaml"),
    )
    .unwrap();
    std::fs::copy(
        src.join("hot/nested/VDU1.yaml"),
        pkg.join("BaseHOT/simple/nested/VDU1.yaml"),
    )
    .unwrap();

    let state = dir.path().join("s.sqlite");
    let out = vnfm(&state, &["package", "show", pkg.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "vnfdId: b1bb0ce7-ebca-4fa7-95ed-4840d70a1177",
        "flavour simple",
        "VDU1  flavour sample4G, 2 vCPU, 4096 MiB, instances min 1 / initial 1 / max 5",
        "storage VDU1-VirtualStorage: 1 GiB",
        "policy_antiaffinity_group: anti-affinity at scope nfvi_node over affinityOrAntiAffinityGroup1 (VDUs VDU1)",
        "VDU1_scale: max scale level 4, per step VDU1 +1",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    let out = vnfm(
        &state,
        &["--json", "package", "show", pkg.to_str().unwrap()],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let vdu = &v["flavours"][0]["vdus"][0];
    assert_eq!(vdu["id"], "VDU1");
    assert_eq!(vdu["flavor"], "sample4G");
    assert_eq!(vdu["storages"]["VDU1-VirtualStorage"], 1);
}

#[test]
fn an_unknown_heat_resource_type_fails_instantiate_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.sqlite");
    let out = vnfm(
        &state,
        &[
            "instantiate",
            "--package",
            "tests/cmd/packages/unknown-hot-type",
            "--cloud",
            "tests/cmd/clouds/small.yaml",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.contains("web.yaml"), "{stderr}");
    assert!(
        stderr.contains("The Resource Type (Acme::Monitor::Probe) could not be found."),
        "{stderr}"
    );
}
