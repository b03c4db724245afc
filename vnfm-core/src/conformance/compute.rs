//! The behaviour of every [`ComputeInventory`]. Servers are created through a
//! [`StackDriver`], the only way the driver traits create them.

use super::stack::{create, expect_status, physical_id, resources, settle, with_stack};
use super::templates::{self, ONE_SERVER};
use super::{ensure, expect_error, zone, ConformanceError, Fixture, OrFail};
use crate::driver::{
    ComputeInventory, DriverError, StackAction, StackDriver, StackState, ZoneCatalog,
};
use crate::id::ServerId;

/// A server created in the boot zone is `ACTIVE` and reported in that zone, with its flavor;
/// with [`Capabilities::reports_hosts`](super::Capabilities::reports_hosts) its host is
/// reported and is one of the zone's hosts in the zone catalogue.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn server_in_requested_zone(
    stacks: &dyn StackDriver,
    compute: &dyn ComputeInventory,
    zones: &dyn ZoneCatalog,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "compute::server_in_requested_zone";
    fx.check(B)?;
    let id = create(
        stacks,
        B,
        &fx.unique("where"),
        templates::bundle(ONE_SERVER),
        templates::boot_params(fx, None),
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Complete)?;
        let list = resources(stacks, &id, 0, B).await?;
        let sid = ServerId::new(physical_id(B, &list, &id, "server")?);
        let s = compute
            .server(&sid)
            .await
            .or_fail(B, &format!("server {sid}"))?;
        ensure(B, s.id == sid && s.status == "ACTIVE", || {
            format!("server {sid} is reported as {s:?}, expected that id in status ACTIVE")
        })?;
        ensure(B, s.zone.as_ref() == Some(&fx.zone), || {
            format!(
                "server {sid} is reported in zone {:?}, expected {}",
                s.zone, fx.zone
            )
        })?;
        if let Some(f) = &s.flavor {
            ensure(B, f == &fx.flavor, || {
                format!("server {sid} reports flavor {f}, expected {}", fx.flavor)
            })?;
        }
        ensure(B, s.fault.is_none(), || {
            format!("the ACTIVE server {sid} carries a fault {:?}", s.fault)
        })?;
        if fx.capabilities.reports_hosts {
            let Some(host) = &s.host else {
                return Err(ConformanceError::mismatch(
                    B,
                    format!("server {sid} reports no host, but capabilities.reports_hosts is set"),
                ));
            };
            let listed = zone::list(zones, B).await?;
            let z = zone::zone(B, &listed, &fx.zone)?;
            let in_zone = z
                .hosts
                .as_ref()
                .is_some_and(|hs| hs.iter().any(|h| &h.name == host));
            ensure(B, in_zone, || {
                format!(
                    "server {sid} runs on host {host}, which the zone catalogue does not list \
                     in zone {}",
                    fx.zone
                )
            })?;
        }
        Ok(())
    })
}

/// An unknown server id fails with [`DriverError::NotFound`].
///
/// # Errors
/// A [`ConformanceError`] when the call answers otherwise.
pub async fn unknown_server_not_found(
    compute: &dyn ComputeInventory,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "compute::unknown_server_not_found";
    fx.check(B)?;
    let missing = fx.unique("missing");
    // UUID-shaped, as a backend may reject anything else as malformed
    let n: u64 = missing
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let sid = ServerId::new(format!("00000000-0000-4000-8000-{n:012}"));
    expect_error(
        B,
        &format!("server {sid} (unknown)"),
        compute.server(&sid).await,
        "not found",
        DriverError::is_not_found,
    )
}

/// A server no host can hold is reported in `ERROR` with no host and a `fault` with code 500
/// and Nova's text (`No valid host was found. ...`), the text the stack's reason quotes.
///
/// # Errors
/// A [`ConformanceError`] naming what differed or which call failed.
pub async fn error_server_has_fault(
    stacks: &dyn StackDriver,
    compute: &dyn ComputeInventory,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    const B: &str = "compute::error_server_has_fault";
    fx.check(B)?;
    let id = create(
        stacks,
        B,
        &fx.unique("fault"),
        templates::bundle(ONE_SERVER),
        templates::boot_params(fx, Some(fx.unschedulable_flavor.as_str())),
    )
    .await?;
    with_stack!(stacks, fx, B, id, {
        let stack = settle(stacks, fx, &id, B).await?;
        expect_status(B, &stack, StackAction::Create, StackState::Failed)?;
        let list = resources(stacks, &id, 0, B).await?;
        let sid = ServerId::new(physical_id(B, &list, &id, "server")?);
        let s = compute
            .server(&sid)
            .await
            .or_fail(B, &format!("server {sid}"))?;
        ensure(B, s.status == "ERROR" && s.host.is_none(), || {
            format!("the unschedulable server {sid} is {s:?}, expected status ERROR and no host")
        })?;
        let Some(fault) = &s.fault else {
            return Err(ConformanceError::mismatch(
                B,
                format!("server {sid} in ERROR carries no fault"),
            ));
        };
        ensure(
            B,
            fault.code == 500 && fault.message.starts_with("No valid host was found."),
            || {
                format!(
                    "server {sid} has fault {fault:?}, expected code 500 and a message starting \
                     with \"No valid host was found.\""
                )
            },
        )?;
        let quoted = format!("Message: {}, Code: {}", fault.message, fault.code);
        ensure(B, stack.stack_status_reason.contains(&quoted), || {
            format!(
                "the stack's reason {:?} does not quote the server's fault as {quoted:?}",
                stack.stack_status_reason
            )
        })
    })
}

/// Runs every function of this module in turn; stops at the first error.
///
/// # Errors
/// The first [`ConformanceError`].
pub async fn run_all(
    stacks: &dyn StackDriver,
    compute: &dyn ComputeInventory,
    zones: &dyn ZoneCatalog,
    fx: &Fixture,
) -> Result<(), ConformanceError> {
    server_in_requested_zone(stacks, compute, zones, fx).await?;
    unknown_server_not_found(compute, fx).await?;
    error_server_has_fault(stacks, compute, fx).await
}
