//! Answer an ETSI SOL003 grant request with placement constraints, as an NFVO (or vnfm's local
//! granter) does: a zone, and a host, for every new VNFC.
//!
//! The request is `examples/grants/instantiate.json`: the demo package's three VNFCs (VDU1 ×2
//! with their boot volumes, VDU2 ×1), each in a zone of its own (`ANTI_AFFINITY`, `ZONE`,
//! `fallbackBestEffort: false`) and VDU1's two on distinct hosts (`NFVI_NODE`). The cloud is the
//! simulated demo cloud (`examples/clouds/demo.yaml`), whose AZ-1 is too small for either VDU.
//! The program answers the request, then the same request with a fourth VNFC in the zone
//! anti-affinity: three zones fit, so the hard rule is refused with the conflict named, and the
//! best-effort one is granted with the relaxation reported.
//!
//! ```sh
//! cargo run -p vnfm-examples --example grant
//! ```

use std::collections::BTreeMap;
use std::error::Error;

use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{ListZones, ZoneCatalog};
use vnfm_core::grant::{ConstraintResourceRef, GrantRequest, ResourceDefinition, ResourceType};
use vnfm_core::id::GrantId;
use vnfm_core::lcm::VnfInstance;
use vnfm_core::lifecycle::granter::{self, GrantContext};
use vnfm_core::package::fs;
use vnfm_core::placement::{Placement, Selection};
use vnfm_core::sim::SimCloud;
use vnfm_core::zone::ComputeZone;

const DIR: &str = env!("CARGO_MANIFEST_DIR");

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let sim = SimCloud::new(CloudFile::load(format!("{DIR}/clouds/demo.yaml"))?, 1);
    let zones = sim.list_zones(ListZones::default()).await?;
    let pkg = fs::load(format!("{DIR}/packages/demo-vnf").as_ref())?;
    let flavour = pkg
        .flavour("default")
        .ok_or("the demo package has no flavour default")?;
    let request: GrantRequest = serde_json::from_str(&std::fs::read_to_string(format!(
        "{DIR}/grants/instantiate.json"
    ))?)?;
    request.validate()?;
    // The instance the grant is for (the granter reads its existing VNFCs for `RES_MGMT`
    // references; a new instance has none).
    let instance = VnfInstance::new(request.vnf_instance_id.clone(), request.vnfd_id.clone());
    let no_pins = BTreeMap::new();
    let answer = |request: &GrantRequest, n: u32| {
        granter::grant(
            request,
            &GrantContext {
                grant_id: GrantId::new(format!("grant-{n}")),
                flavour,
                instance: &instance,
                zones: &zones,
                pinned: &no_pins,
                vnfc_names: &BTreeMap::new(),
                // Worst-fit over the free capacity the zone catalogue reports.
                selection: Selection::CapacityAware,
                seed: 7,
            },
        )
    };

    println!("cloud: {}", describe_zones(&zones));
    println!("\n1. grant request examples/grants/instantiate.json (3 VNFCs, zone anti-affinity):");
    let (grant, placement) = answer(&request, 1)?;
    print_assignments(&request, &placement);
    if let Some(sel) = grant
        .additional_params
        .as_ref()
        .and_then(|p| p.get(granter::ZONE_SELECTION))
    {
        println!("   additionalParams.zoneSelection: {sel}");
    }
    println!("   the Grant (SOL003 JSON):");
    for line in serde_json::to_string_pretty(&grant)?.lines() {
        println!("   | {line}");
    }

    // The same request with a fourth VNFC, also in the zone anti-affinity.
    let mut bigger = request.clone();
    bigger.add_resources.push(
        ResourceDefinition::new("res-vdu2-1", ResourceType::Compute, "VDU2").with_vdu_id("VDU2"),
    );
    let spread = bigger
        .placement_constraints
        .first_mut()
        .ok_or("the request has no placement constraint")?;
    spread
        .resource
        .push(ConstraintResourceRef::grant("res-vdu2-1"));
    println!("\n2. the same with a 4th VNFC in the zone anti-affinity, fallbackBestEffort false:");
    match answer(&bigger, 2) {
        Ok(_) => return Err("a 4th VNFC in its own zone was granted, yet only 3 zones fit".into()),
        Err(e) => println!("   refused: {}", chain(&e)),
    }

    if let Some(spread) = bigger.placement_constraints.first_mut() {
        spread.fallback_best_effort = Some(true);
    }
    println!("\n3. the same with fallbackBestEffort true:");
    let (grant, placement) = answer(&bigger, 3)?;
    print_assignments(&bigger, &placement);
    let relaxed = grant
        .additional_params
        .as_ref()
        .and_then(|p| p.get("relaxedPlacementConstraints"))
        .ok_or("the best-effort grant reports no relaxed constraint")?;
    println!("   additionalParams.relaxedPlacementConstraints: {relaxed}");
    Ok(())
}

/// `AZ-1 (2 hosts, 2 vCPU free), ...`
fn describe_zones(zones: &[ComputeZone]) -> String {
    zones
        .iter()
        .map(|z| {
            let free = z.free().unwrap_or_default();
            format!(
                "{} ({} vCPU / {} MiB free)",
                z.name, free.vcpus, free.memory_mb
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_assignments(request: &GrantRequest, placement: &Placement) {
    for r in &request.add_resources {
        if let Some(a) = placement.assignment(&r.id) {
            let vdu = r.vdu_id.as_ref().map_or("-", |v| v.as_str());
            println!("   {:<12} {vdu}: {} on {}", r.id, a.zone, a.host);
        }
    }
}

/// An error and its causes, `: `-separated.
fn chain(e: &dyn Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}
