//! What becomes of a BaseHOT the package reader accepts but Heat would not: the reader checks
//! only `type: X.yaml` references (see the `package-unknown-hot-type` trycmd case), so an
//! unknown resource type is for the VIM to reject when the stack is created. These tests
//! create the stacks of the CLI's test packages on the simulated cloud.

// Test helpers: failing means panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::json;
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{CreateStack, DriverError, Parameters, StackDriver, TemplateBundle};
use vnfm_core::sim::SimCloud;

fn fixture(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cmd")
        .join(rel)
}

/// The BaseHOT of flavour `simple` of the test package `name`.
fn base_hot(name: &str) -> TemplateBundle {
    let pkg = vnfm_core::package::fs::load(&fixture(&format!("packages/{name}"))).unwrap();
    pkg.base_hot("simple").unwrap().clone()
}

/// The `nfv` parameter of the test packages' top template, for one `web` server in `edge-a`.
fn parameters() -> Parameters {
    let mut p = Parameters::new();
    p.insert(
        "nfv".into(),
        json!({"VDU": {"web": {
            "computeFlavourId": "small",
            "vcImageId": "cirros",
            "locationConstraints": "edge-a"
        }}}),
    );
    p
}

fn create(bundle: TemplateBundle) -> Result<(), DriverError> {
    let cloud = CloudFile::load(fixture("clouds/small.yaml")).unwrap();
    let sim = SimCloud::new(cloud, 0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(sim.create_stack(CreateStack::new("vnf1", bundle, parameters())))
        .map(|_| ())
}

/// The stack is created *and* completes: one ACTIVE server `web` in `edge-a` (the simulator
/// answers `Ok` to a create whose stack then ends `CREATE_FAILED`, so `Ok` alone proves
/// nothing).
#[test]
fn the_valid_package_creates_its_stack() {
    use vnfm_core::driver::{ComputeInventory, ListResources};
    let cloud = CloudFile::load(fixture("clouds/small.yaml")).unwrap();
    let sim = SimCloud::new(cloud, 0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let id = sim
            .create_stack(CreateStack::new("vnf1", base_hot("mini"), parameters()))
            .await
            .unwrap();
        let stack = sim.show_stack(&id).await.unwrap();
        assert_eq!(
            stack.stack_status.to_string(),
            "CREATE_COMPLETE",
            "{}",
            stack.stack_status_reason
        );
        let res = sim
            .list_resources(ListResources::new(id.clone(), 5))
            .await
            .unwrap();
        let servers: Vec<_> = res
            .iter()
            .filter(|r| r.resource_type == "OS::Nova::Server")
            .collect();
        assert_eq!(servers.len(), 1, "{res:?}");
        let s = sim
            .server(&servers[0].physical_resource_id.as_str().into())
            .await
            .unwrap();
        assert_eq!(s.status, "ACTIVE");
        assert_eq!(s.zone.as_ref().map(|z| z.as_str()), Some("edge-a"));
    });
}

#[test]
fn an_unknown_resource_type_is_rejected_at_stack_create() {
    let err = create(base_hot("unknown-hot-type")).unwrap_err();
    assert!(matches!(err, DriverError::Invalid { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("The Resource Type (Acme::Monitor::Probe) could not be found."),
        "{msg}"
    );
}

#[test]
fn a_misspelled_os_resource_type_is_rejected_at_stack_create() {
    let mut bundle = base_hot("mini");
    for text in bundle.files.values_mut() {
        *text = text.replace("type: OS::Nova::Server", "type: OS::Nova::Servr");
    }
    assert!(bundle.files.values().any(|t| t.contains("OS::Nova::Servr")));
    let err = create(bundle).unwrap_err();
    assert!(matches!(err, DriverError::Invalid { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("The Resource Type (OS::Nova::Servr) could not be found."),
        "{err}"
    );
}
