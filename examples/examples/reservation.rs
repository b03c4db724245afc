//! Reserve capacity in the OPNFV Promise ledger (`vnfm_core::reservation`), then answer a grant
//! whose VNFCs draw from that reservation (SOL003 `GrantInfo.reservationId`).
//!
//! The ledger is seeded from the zone catalogue of the simulated demo cloud
//! (`examples/clouds/demo.yaml`). The program reserves room for two VNFCs in AZ-3 for a
//! two-hour window starting in an hour, shows that an overlapping request no longer fits (the
//! counter-offer), answers the grant request `examples/grants/instantiate.json` with the local
//! granter when the window opens, and draws the VNFC granted into AZ-3 from the reservation.
//! It prints AZ-3's line of the ledger before the reservation, after it, and after the draw.
//!
//! ```sh
//! cargo run -p vnfm-examples --example reservation
//! ```

use std::collections::BTreeMap;
use std::error::Error;

use chrono::{DateTime, Duration, Utc};
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{ListZones, ZoneCatalog};
use vnfm_core::grant::GrantRequest;
use vnfm_core::id::{GrantId, IdGen, ZoneId};
use vnfm_core::lcm::VnfInstance;
use vnfm_core::lifecycle::granter::{self, GrantContext};
use vnfm_core::package::fs;
use vnfm_core::placement::Selection;
use vnfm_core::reservation::{
    Capacity, Ledger, LedgerError, ReservationRequest, ResourceLine, Window,
};
use vnfm_core::sim::SimCloud;

const DIR: &str = env!("CARGO_MANIFEST_DIR");

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    // The ledger reads no clock: every call takes `now`. A fixed start keeps the output stable.
    let t0 = DateTime::<Utc>::from_timestamp(1_893_456_000, 0).ok_or("bad start time")?;
    let (start, end) = (t0 + Duration::hours(1), t0 + Duration::hours(3));
    let window = Window::new(start, end);
    let az3 = ZoneId::from("AZ-3");

    let sim = SimCloud::new(CloudFile::load(format!("{DIR}/clouds/demo.yaml"))?, 1);
    let zones = sim.list_zones(ListZones::default()).await?;
    let mut ids = IdGen::seeded(1);
    let mut ledger = Ledger::default();
    // Free vCPUs, memory and disk per zone from the catalogue, ten instances of quota each.
    let quota = Capacity::default().with(ResourceLine::Instances, 10);
    ledger.add_catalogue(&zones, quota, &mut ids, t0)?;
    println!("ledger, {az3} over [{start}, {end}):");
    print_line("before", &ledger, &az3, window)?;

    // Room for two VNFCs of VDU1 or one of VDU2: 4 cores, 8 GiB, 2 instances, 80 GiB of disk.
    let request = ReservationRequest::new(
        az3.clone(),
        Capacity::compute(4, 8192, 2).with(ResourceLine::Size, 80),
    )
    .with_window(start, end)
    .with_id("rollout-1");
    let reservation = ledger.create_reservation(request, &mut ids, t0)?.value;
    println!(
        "reserved {} in {}: {}",
        reservation.id,
        reservation.zone,
        amounts(&reservation.capacity)
    );
    print_line("reserved", &ledger, &az3, window)?;

    // Someone else asks for most of AZ-3 over an overlapping window.
    let greedy = ReservationRequest::new(az3.clone(), Capacity::compute(30, 8192, 2))
        .with_window(start + Duration::hours(1), end + Duration::hours(1));
    match ledger.create_reservation(greedy, &mut ids, t0) {
        Err(LedgerError::DoesNotFit { offer, .. }) => println!(
            "30 more cores over an overlapping window do not fit; counter-offer: {} cores there, \
             or the whole request from {}",
            offer.largest.cores,
            offer
                .earliest
                .map_or_else(|| "never".to_owned(), |w| w.start.to_string())
        ),
        Ok(_) => return Err("an over-committing reservation was accepted".into()),
        Err(e) => return Err(e.into()),
    }

    // When the window opens, the rollout's grant request is answered...
    let pkg = fs::load(format!("{DIR}/packages/demo-vnf").as_ref())?;
    let flavour = pkg
        .flavour("default")
        .ok_or("the demo package has no flavour default")?;
    let grant_request: GrantRequest = serde_json::from_str(&std::fs::read_to_string(format!(
        "{DIR}/grants/instantiate.json"
    ))?)?;
    let instance = VnfInstance::new(
        grant_request.vnf_instance_id.clone(),
        grant_request.vnfd_id.clone(),
    );
    let (mut grant, _) = granter::grant(
        &grant_request,
        &GrantContext {
            grant_id: GrantId::new("grant-rollout-1"),
            flavour,
            instance: &instance,
            zones: &zones,
            pinned: &BTreeMap::new(),
            vnfc_names: &BTreeMap::new(),
            selection: Selection::CapacityAware,
            seed: 7,
        },
    )?;
    // ...and the VNFCs granted into the reserved zone draw from the reservation (all or
    // nothing: a reservation too small for them refuses and draws nothing).
    let drawn = granter::draw_reservation(
        &mut grant,
        &grant_request,
        flavour,
        &reservation.id,
        &mut ledger,
        &mut ids,
        start,
    )?;
    println!("grant {}:", grant.id);
    for g in &grant.add_resources {
        let zone = grant
            .zone_of(&g.resource_definition_id)
            .map_or("-", ZoneId::as_str);
        let from = g
            .reservation_id
            .as_deref()
            .map_or_else(String::new, |r| format!(", reservationId {r}"));
        println!("  {:<16} {zone}{from}", g.resource_definition_id);
    }
    for a in &drawn {
        println!(
            "  allocation {} for {} draws {}",
            a.id,
            a.instance_ref.as_deref().unwrap_or("-"),
            amounts(&a.capacity)
        );
    }
    let left = ledger
        .reservation(&reservation.id)
        .ok_or("the reservation is gone")?
        .remaining;
    println!("left in {}: {}", reservation.id, amounts(&left));
    print_line("drawn", &ledger, &az3, window)?;
    if drawn.is_empty() {
        return Err("nothing was drawn from the reservation".into());
    }
    Ok(())
}

/// One zone's figures over `window`, each at the window's worst instant.
fn print_line(
    label: &str,
    ledger: &Ledger,
    zone: &ZoneId,
    window: Window,
) -> Result<(), LedgerError> {
    let r = ledger.capacity(zone, window)?;
    let f = |c: &vnfm_core::reservation::SignedCapacity| {
        format!(
            "{:>2} cores {:>5} MiB {:>2} inst",
            c.cores, c.ram, c.instances
        )
    };
    println!(
        "  {label:<8} total {} | reserved {} | used {} | available {}",
        f(&r.total),
        f(&r.reserved),
        f(&r.usage),
        f(&r.available)
    );
    Ok(())
}

fn amounts(c: &Capacity) -> String {
    format!(
        "{} cores, {} MiB, {} instance(s), {} GiB",
        c.cores, c.ram, c.instances, c.size
    )
}
