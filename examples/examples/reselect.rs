//! Instantiate a VNF with availability-zone reselection, and read the trace.
//!
//! The demo package (`examples/packages/demo-vnf`: VDU1 ×2, VDU2 ×1, every VNFC in a zone of
//! its own) on the simulated demo cloud (`examples/clouds/demo.yaml`), whose AZ-1 is too small
//! for an m1.small. The NFVO grants VDU1-0 into AZ-1 (a pinned zone); the local granter places
//! the other two. The stack fails in AZ-1 with Nova's "No valid host was found", vnfm excludes
//! AZ-1, moves VDU1-0 to the one zone that still honours the anti-affinity, and updates the
//! stack. The program prints every attempt of `op_occ.attempts` and where the VNFCs ended up.
//!
//! ```sh
//! cargo run -p vnfm-examples --example reselect
//! ```

use std::error::Error;
use std::sync::Arc;

use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::VirtualClock;
use vnfm_core::id::ZoneId;
use vnfm_core::lcm::{CreateVnfRequest, InstantiateVnfRequest};
use vnfm_core::lifecycle::{Drivers, LcmConfig, Lifecycle, OperationOptions};
use vnfm_core::package::fs;
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;

const DIR: &str = env!("CARGO_MANIFEST_DIR");

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let sim = SimCloud::new(CloudFile::load(format!("{DIR}/clouds/demo.yaml"))?, 1);
    let pkg = fs::load(format!("{DIR}/packages/demo-vnf").as_ref())?;
    let drivers = Drivers {
        stacks: Arc::new(sim.clone()),
        zones: Arc::new(sim.clone()),
        compute: Arc::new(sim.clone()),
        store: Arc::new(MemoryStore::new()),
        // Virtual time: waiting for the stack costs nothing.
        clock: Arc::new(VirtualClock::new(chrono::DateTime::UNIX_EPOCH)),
        cluster: None,
    };
    let mut config = LcmConfig::standard()?;
    config.reselect_zones = true;
    config.seed = 3;
    let lcm = Lifecycle::new(drivers, config);

    let inst = lcm
        .create(&pkg, &CreateVnfRequest::new(pkg.descriptor_id.clone()))
        .await?;
    println!("VNF instance {} created", inst.id);
    // What an NFVO's grant would say: VDU1-0 goes to AZ-1.
    let granted = OperationOptions {
        pinned: [("VDU1-0".to_owned(), ZoneId::from("AZ-1"))].into(),
        automatic: false,
        ..OperationOptions::default()
    };
    let report = lcm
        .instantiate(
            &inst.id,
            &pkg,
            &InstantiateVnfRequest::new("default"),
            &granted,
        )
        .await?;

    println!(
        "instantiate: {:?} after {} attempt(s)",
        report.op_occ.operation_state,
        report.op_occ.attempts.len()
    );
    for (i, a) in report.op_occ.attempts.iter().enumerate() {
        let zones: Vec<String> = a.zones.iter().map(|(u, z)| format!("{u}={z}")).collect();
        let outcome = a
            .outcome
            .map_or_else(|| "running".to_owned(), |o| format!("{o:?}"));
        println!("  attempt {}: {} -> {outcome}", i + 1, zones.join(" "));
        if let Some(reason) = &a.status_reason {
            println!("    Heat: {reason}");
        }
        if !a.failed_zones.is_empty() {
            let failed: Vec<&str> = a.failed_zones.iter().map(ZoneId::as_str).collect();
            println!(
                "    failed VNFC(s) {}; excluded zone(s) {}",
                a.failed_units.join(", "),
                failed.join(", ")
            );
        }
        for r in &a.relaxed {
            println!("    relaxed: {r}");
        }
    }
    println!("VNFCs:");
    for v in report
        .instance
        .instantiated_vnf_info
        .iter()
        .flat_map(|i| &i.vnfc_resource_info)
    {
        let host = v
            .metadata
            .as_ref()
            .and_then(|m| m.get("host"))
            .and_then(|h| h.as_str())
            .unwrap_or("-");
        let zone = v.zone_id.as_ref().map_or("-", ZoneId::as_str);
        println!(
            "  {} in {zone} on {host} (server {})",
            v.id, v.compute_resource.resource_id
        );
    }

    if !report.is_completed() || report.op_occ.attempts.len() < 2 {
        return Err(format!(
            "expected a completed instantiation after a reselection, got {:?}",
            report.op_occ.error
        )
        .into());
    }
    Ok(())
}
