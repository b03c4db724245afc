//! The loop that runs an [`Operation`] through the driver traits: performs each action it
//! hands out, feeds the result back with the clock's time, sleeps on the clock until its timer
//! when it waits, and interrupts it when asked. Everything it decides is in the machine.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::events::LifecycleObserver;
use super::hook::{Interrupt, OperationHook};
use super::operation::{OpAction, OpEvent, Operation};
use super::types::{Drivers, LcmError, OperationReport};
use crate::driver::{ClusterDriver, DriverError, GrantDriver, ListZones};

/// The cluster driver, or why there is none (a CNF operation checks before it starts).
fn cluster(d: &Drivers) -> Result<&Arc<dyn ClusterDriver>, DriverError> {
    d.cluster.as_ref().ok_or(DriverError::NotImplemented {
        driver: "lifecycle",
        operation: "a Kubernetes call without a cluster driver",
    })
}

/// Why a grant cannot be asked of an NFVO: the lifecycle has no grant driver.
fn no_grant_driver() -> DriverError {
    DriverError::NotImplemented {
        driver: "lifecycle",
        operation: "a grant request to an NFVO without a grant driver",
    }
}

/// Runs `m` to its end. `listed` is the zone catalogue as listed for a check just before the
/// operation started: the machine's first listing takes it instead of asking again.
///
/// # Errors
/// What the machine ends with when it cannot record its end ([`Operation::poll_end`]), or
/// [`LcmError::Interrupted`] if it stops with neither an action, a timer nor an end.
pub(crate) async fn drive(
    d: &Drivers,
    hooks: &[Arc<dyn OperationHook>],
    grants: Option<&Arc<dyn GrantDriver>>,
    observers: &[Arc<dyn LifecycleObserver>],
    mut m: Operation,
    interrupt: Option<&Interrupt>,
    mut listed: Option<Vec<crate::zone::ComputeZone>>,
) -> Result<OperationReport, LcmError> {
    let clock = &d.clock;
    loop {
        if let Some(reason) = interrupt.and_then(Interrupt::reason) {
            m.interrupt(clock.now(), &reason);
        }
        if let Some(action) = m.poll_action() {
            let event = match action {
                OpAction::ListZones if listed.is_some() => {
                    OpEvent::Zones(Ok(listed.take().unwrap_or_default()))
                }
                action => perform(d, hooks, grants, observers, action).await,
            };
            m.handle_event(event, clock.now());
            continue;
        }
        if let Some(end) = m.poll_end() {
            return end;
        }
        let Some(at) = m.poll_timeout() else {
            return Err(LcmError::Interrupted(format!(
                "operation {} stopped without an action, a timer or an end",
                m.op_occ().id
            )));
        };
        let wait = (at - clock.now()).to_std().unwrap_or(Duration::ZERO);
        match interrupt {
            Some(i) => {
                i.race(clock.sleep(wait)).await;
            }
            None => clock.sleep(wait).await,
        }
        m.handle_timeout(clock.now());
    }
}

/// A call of the cluster driver, as its async methods return it.
type ClusterCall<'c> = Pin<Box<dyn Future<Output = Result<(), DriverError>> + Send + 'c>>;

/// Makes `call` on the cluster driver for each of `reqs`, in order; each fails when there is
/// no cluster driver.
async fn each_on_cluster<R>(
    d: &Drivers,
    reqs: Vec<R>,
    call: impl for<'c> Fn(&'c dyn ClusterDriver, R) -> ClusterCall<'c>,
) -> Vec<Result<(), DriverError>> {
    let mut out = Vec::new();
    for r in reqs {
        out.push(match cluster(d) {
            Ok(c) => call(c.as_ref(), r).await,
            Err(e) => Err(e),
        });
    }
    out
}

/// Carries out one action through the drivers.
async fn perform(
    d: &Drivers,
    hooks: &[Arc<dyn OperationHook>],
    grants: Option<&Arc<dyn GrantDriver>>,
    observers: &[Arc<dyn LifecycleObserver>],
    action: OpAction,
) -> OpEvent {
    match action {
        OpAction::RequestGrant(req) => OpEvent::Grant(match grants {
            Some(g) => g.request_grant(&req).await,
            None => Err(no_grant_driver()),
        }),
        OpAction::PollGrant(location) => OpEvent::Grant(match grants {
            Some(g) => g.poll_grant(&location).await,
            None => Err(no_grant_driver()),
        }),
        OpAction::Commit(batch) => {
            OpEvent::Committed(super::events::commit(d.store.as_ref(), observers, batch).await)
        }
        OpAction::ListZones => OpEvent::Zones(d.zones.list_zones(ListZones::default()).await),
        OpAction::CreateStack(req) => OpEvent::StackCreated(d.stacks.create_stack(req).await),
        OpAction::UpdateStack(req) => OpEvent::StackUpdated(d.stacks.update_stack(req).await),
        OpAction::ShowStack(id) => OpEvent::Stack(d.stacks.show_stack(&id).await),
        OpAction::DeleteStack(id) => OpEvent::StackDeleted(d.stacks.delete_stack(&id).await),
        OpAction::ListResources(req) => OpEvent::Resources(d.stacks.list_resources(req).await),
        OpAction::MarkUnhealthy(req) => OpEvent::Marked(d.stacks.mark_unhealthy(req).await),
        OpAction::ShowServers(ids) => {
            let mut out = BTreeMap::new();
            for id in ids {
                let r = d.compute.server(&id).await;
                out.insert(id, r);
            }
            OpEvent::Servers(out)
        }
        OpAction::ListNodes => OpEvent::Nodes(match cluster(d) {
            Ok(c) => c.list_nodes().await,
            Err(e) => Err(e),
        }),
        OpAction::ApplyObjects(reqs) => {
            OpEvent::ObjectsApplied(each_on_cluster(d, reqs, |c, r| c.apply_object(r)).await)
        }
        OpAction::ScaleWorkloads(reqs) => {
            OpEvent::WorkloadsScaled(each_on_cluster(d, reqs, |c, r| c.scale_workload(r)).await)
        }
        OpAction::ListPods(req) => OpEvent::Pods(match cluster(d) {
            Ok(c) => c.list_pods(req).await,
            Err(e) => Err(e),
        }),
        OpAction::DeletePods(reqs) => {
            OpEvent::PodsDeleted(each_on_cluster(d, reqs, |c, r| c.delete_pod(r)).await)
        }
        OpAction::DeleteObjects(reqs) => {
            OpEvent::ObjectsDeleted(each_on_cluster(d, reqs, |c, r| c.delete_object(r)).await)
        }
        OpAction::SetPower { servers, on } => {
            let mut out = Vec::new();
            for id in servers {
                out.push(if on {
                    d.compute.start_server(&id).await
                } else {
                    d.compute.stop_server(&id).await
                });
            }
            OpEvent::PowerSet(out)
        }
        OpAction::RunHook(call) => {
            let hook = hooks.iter().find(|h| h.name() == call.name);
            OpEvent::Hook(match hook {
                Some(h) => h.run(&call).await,
                None => Err(format!("no hook named {}", call.name)),
            })
        }
    }
}
