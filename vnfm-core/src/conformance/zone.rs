//! The behaviour of every [`ZoneCatalog`].

use std::collections::BTreeSet;

use super::stack::{create, expect_status, settle, with_stack};
use super::templates::{self, ONE_SERVER};
use super::{ensure, ConformanceError, Fixture, OrFail};
use crate::driver::{ListZones, StackAction, StackDriver, StackState, ZoneCatalog};
use crate::id::ZoneId;
use crate::zone::{ComputeZone, Resources};

/// Lists the zones.
pub(crate) async fn list(
    zones: &dyn ZoneCatalog,
    behaviour: &'static str,
) -> Result<Vec<ComputeZone>, ConformanceError> {
    zones
        .list_zones(ListZones::default())
        .await
        .or_fail(behaviour, "list_zones")
}

/// The zone named `name` in a listing.
pub(crate) fn zone<'a>(
    behaviour: &'static str,
    list: &'a [ComputeZone],
    name: &ZoneId,
) -> Result<&'a ComputeZone, ConformanceError> {
    list.iter().find(|z| &z.name == name).ok_or_else(|| {
        let names: Vec<&str> = list.iter().map(|z| z.name.as_str()).collect();
        ConformanceError::mismatch(
            behaviour,
            format!("zone {name} is not listed (listed: {names:?})"),
        )
    })
}

/// Only compute zones are listed, each once, with no host twice; every zone of the fixture is
/// listed and the boot zone is a candidate; a zone listed with `hosts: None` is not a
/// candidate, and a candidate has an available host; with
/// [`Capabilities::reports_free_capacity`](super::Capabilities::reports_free_capacity),
/// every available host of a candidate zone reports its free capacity.
///
/// # Errors
/// A [`ConformanceError`] naming the zone or host that differed, or the call that failed.
pub async fn compute_zones_listed(
    zones: &dyn ZoneCatalog,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "zone::compute_zones_listed";
    fx.check(B)?;
    let list = list(zones, B).await?;
    let mut names = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for z in &list {
        ensure(B, names.insert(z.name.clone()), || {
            format!("zone {} is listed twice", z.name)
        })?;
        ensure(B, z.name.as_str() != "internal", || {
            "zone \"internal\" (no nova-compute) is listed, expected compute zones only".to_owned()
        })?;
        let Some(zone_hosts) = &z.hosts else {
            ensure(B, !z.is_candidate(), || {
                format!("zone {} has hosts: None but is a candidate", z.name)
            })?;
            continue;
        };
        for h in zone_hosts {
            ensure(B, hosts.insert(h.name.clone()), || {
                format!("host {} is listed twice (again in zone {})", h.name, z.name)
            })?;
            if fx.capabilities.reports_free_capacity && z.available && h.available {
                ensure(B, h.free.is_some(), || {
                    format!(
                        "available host {} of zone {} reports no free capacity, but \
                         capabilities.reports_free_capacity is set",
                        h.name, z.name
                    )
                })?;
            }
        }
        let has_available_host = zone_hosts.iter().any(|h| h.available);
        ensure(
            B,
            z.is_candidate() == (z.available && has_available_host),
            || {
                format!(
                    "zone {} is_candidate disagrees with its hosts: {z:?}",
                    z.name
                )
            },
        )?;
    }
    for want in &fx.zones {
        zone(B, &list, want)?;
    }
    let boot = zone(B, &list, &fx.zone)?;
    ensure(B, boot.is_candidate(), || {
        format!(
            "the fixture's boot zone {} is not a candidate (available and with an available \
             host): {boot:?}",
            fx.zone
        )
    })
}

/// With [`Capabilities::reports_free_capacity`](super::Capabilities::reports_free_capacity):
/// the free capacity of the boot zone drops when a server is created there and comes back
/// exactly when its stack is deleted. Without it, the listing must not pretend: the zone's
/// hosts may report no free capacity, and the function checks only that creating and deleting
/// a server leaves the list of zones unchanged.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn free_capacity_follows_servers(
    stacks: &dyn StackDriver,
    zones: &dyn ZoneCatalog,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "zone::free_capacity_follows_servers";
    fx.check(B)?;
    let measure = |list: &[ComputeZone]| -> Result<Option<Resources>, ConformanceError> {
        let z = zone(B, list, &fx.zone)?;
        if !fx.capabilities.reports_free_capacity {
            return Ok(None);
        }
        z.free().map(Some).ok_or_else(|| {
            ConformanceError::mismatch(
                B,
                format!(
                    "zone {} reports no free capacity for every available host, but \
                     capabilities.reports_free_capacity is set",
                    fx.zone
                ),
            )
        })
    };
    let zone_names = |list: &[ComputeZone]| -> BTreeSet<ZoneId> {
        list.iter().map(|z| z.name.clone()).collect()
    };
    let before_list = list(zones, B).await?;
    let before = measure(&before_list)?;
    let id = create(
        stacks,
        B,
        &fx.unique("capacity"),
        templates::bundle(ONE_SERVER),
        templates::boot_params(fx, None),
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Complete)?;
        let during = measure(&list(zones, B).await?)?;
        if let (Some(b), Some(d)) = (before, during) {
            ensure(B, b.fits(&d) && d != b, || {
                format!("free capacity of zone {} went from {b:?} to {d:?} with a server created there, expected it to drop", fx.zone)
            })?;
        }
        Ok(())
    })?;
    let after_list = list(zones, B).await?;
    let after = measure(&after_list)?;
    ensure(B, after == before, || {
        format!(
            "free capacity of zone {} is {after:?} after the stack was deleted, expected {before:?} again",
            fx.zone
        )
    })?;
    ensure(
        B,
        zone_names(&after_list) == zone_names(&before_list),
        || {
            format!(
                "the zones changed while a server came and went: {:?} then {:?}",
                zone_names(&before_list),
                zone_names(&after_list)
            )
        },
    )
}

/// Runs every function of this module in turn; stops at the first error.
///
/// # Errors
/// The first [`ConformanceError`].
pub async fn run_all(
    stacks: &dyn StackDriver,
    zones: &dyn ZoneCatalog,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    compute_zones_listed(zones, fx).await?;
    free_capacity_follows_servers(stacks, zones, fx).await
}
