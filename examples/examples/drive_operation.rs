//! Drive an `Operation` by hand: the sans-IO loop, for programs with their own IO.
//!
//! `vnfm_core::lifecycle::Operation` is one LCM operation as a state machine that performs no
//! IO and reads no clock (in the shape of quinn-proto's `Connection`). This program is the
//! loop `Lifecycle` runs, written out: it hands every action to the simulated cloud and the
//! in-memory store, feeds the result back with the time, sleeps (on virtual time) until
//! `poll_timeout`, and stops at `poll_end`. It instantiates the demo package with VDU1-0
//! pinned to the too-small AZ-1 and reselection on, prints each action as it goes, and runs
//! one end-of-operation hook (answered here by the program) that reads the new instance.
//!
//! ```sh
//! cargo run -p vnfm-examples --example drive_operation
//! ```

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use vnfm_core::cloud::CloudFile;
use vnfm_core::driver::{
    ComputeInventory, ListZones, StackDriver, Store, StoreBatch, Version, Versioned, ZoneCatalog,
};
use vnfm_core::id::{IdGen, OpOccId};
use vnfm_core::lcm::{InstantiationState, LcmOperationType, VnfInstance, VnfLcmOpOcc};
use vnfm_core::lifecycle::grant::{self, GrantOptions};
use vnfm_core::lifecycle::{
    HookPoint, HookSpec, LcmConfig, OpAction, OpEvent, Operation, OperationStart, Plan, Progress,
};
use vnfm_core::package::fs;
use vnfm_core::sim::SimCloud;
use vnfm_core::store::MemoryStore;

const DIR: &str = env!("CARGO_MANIFEST_DIR");

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let sim = SimCloud::new(CloudFile::load(format!("{DIR}/clouds/demo.yaml"))?, 1);
    let store = MemoryStore::new();
    let pkg = Arc::new(fs::load(format!("{DIR}/packages/demo-vnf").as_ref())?);
    let mut config = LcmConfig::standard()?;
    config.reselect_zones = true;
    config.seed = 3;
    config.poll_interval = Duration::from_secs(2);

    // The instance, stored; the machine starts from it and the version it was read at.
    let mut inst = VnfInstance::new("inst-1", pkg.descriptor_id.clone());
    inst.instantiation_state = Some(InstantiationState::NotInstantiated);
    store.commit(StoreBatch::new().with_instance(inst)).await?;
    let instance = store.instance_entry(&"inst-1".into()).await?;

    // What to do: instantiate flavour `default`, the grant request built from the package.
    let mut now: DateTime<Utc> = DateTime::UNIX_EPOCH;
    let op_id = OpOccId::from("op-1");
    let op = VnfLcmOpOcc::new(op_id.clone(), "inst-1", LcmOperationType::Instantiate, now);
    let mut progress = Progress::new(Plan::Instantiate {
        flavour_id: "default".into(),
        stack_name: "vnf-inst-1".into(),
        configurable: None,
        level: None,
    });
    let opts = GrantOptions {
        fallback_best_effort: false,
        vim_connection_id: Some("vim-0".into()),
        is_automatic_invocation: false,
    };
    progress.planned = Some(grant::instantiate(
        &pkg,
        "default",
        &instance.value,
        &op_id,
        &opts,
        &mut IdGen::seeded(1),
    )?);
    progress.grant_id = Some("grant-1".into());
    progress.pinned.insert("VDU1-0".into(), "AZ-1".into());

    let mut m = Operation::new(
        config,
        OperationStart {
            op: Versioned {
                value: op,
                version: Version(0),
            },
            resume: false,
            instance,
            progress,
            package: Some(pkg.clone()),
            owner: "drive_operation-example".into(),
            hooks: vec![HookSpec {
                name: "print-hosts".into(),
                points: vec![HookPoint::InstantiateEnd],
            }],
        },
        now,
    );

    // The loop: actions out, events in, sleep on the machine's timer.
    let mut step = 0;
    let report = loop {
        if let Some(action) = m.poll_action() {
            step += 1;
            println!("{step:>2}. {}", describe(&action));
            let event = match action {
                OpAction::Commit(b) => OpEvent::Committed(store.commit(b).await),
                OpAction::ListZones => OpEvent::Zones(sim.list_zones(ListZones::default()).await),
                OpAction::CreateStack(r) => OpEvent::StackCreated(sim.create_stack(r).await),
                OpAction::UpdateStack(r) => OpEvent::StackUpdated(sim.update_stack(r).await),
                OpAction::ShowStack(id) => OpEvent::Stack(sim.show_stack(&id).await),
                OpAction::DeleteStack(id) => OpEvent::StackDeleted(sim.delete_stack(&id).await),
                OpAction::ListResources(r) => OpEvent::Resources(sim.list_resources(r).await),
                OpAction::MarkUnhealthy(r) => OpEvent::Marked(sim.mark_unhealthy(r).await),
                OpAction::ShowServers(ids) => {
                    let mut out = std::collections::BTreeMap::new();
                    for id in ids {
                        let r = sim.server(&id).await;
                        out.insert(id, r);
                    }
                    OpEvent::Servers(out)
                }
                OpAction::RunHook(call) => {
                    // A hook of our own: here it only reads where the servers went.
                    let hosts: Vec<String> = call
                        .instance
                        .instantiated_vnf_info
                        .iter()
                        .flat_map(|i| i.vnfc_resource_info.iter())
                        .map(|v| {
                            let host = v
                                .metadata
                                .as_ref()
                                .and_then(|m| m.get("host"))
                                .and_then(|h| h.as_str())
                                .unwrap_or("?");
                            format!("{}@{host}", v.id)
                        })
                        .collect();
                    OpEvent::Hook(Ok(format!("servers on {}", hosts.join(", "))))
                }
                other => {
                    return Err(format!("an action this program does not know: {other:?}").into())
                }
            };
            m.handle_event(event, now);
            continue;
        }
        if let Some(end) = m.poll_end() {
            break end?;
        }
        match m.poll_timeout() {
            Some(t) => {
                println!("    (sleep until {t})");
                now = t;
                m.handle_timeout(now);
            }
            None => return Err("the machine neither acts, waits nor ends".into()),
        }
    };

    let op = &report.op_occ;
    println!(
        "\n{} {}: {} attempt(s), hook {}",
        op.operation,
        op.operation_state,
        op.attempts.len(),
        op.hooks
            .iter()
            .map(|h| format!("{} ({}): {}", h.name, h.point, h.detail))
            .collect::<Vec<_>>()
            .join("; ")
    );
    for v in report
        .instance
        .instantiated_vnf_info
        .iter()
        .flat_map(|i| i.vnfc_resource_info.iter())
    {
        println!(
            "  {} in {}",
            v.id,
            v.zone_id.as_ref().map_or("?", |z| z.as_str())
        );
    }
    if !report.is_completed() {
        return Err(format!("the operation ended {}", op.operation_state).into());
    }
    Ok(())
}

fn describe(a: &OpAction) -> String {
    match a {
        OpAction::Commit(b) => {
            let states: Vec<String> = b
                .put_op_occs
                .iter()
                .map(|o| o.operation_state.to_string())
                .collect();
            format!(
                "commit: occurrence {} ({} precondition(s){})",
                states.join(", "),
                b.preconditions.len(),
                if b.put_instances.is_empty() {
                    ""
                } else {
                    ", with the instance"
                }
            )
        }
        OpAction::ListZones => "list the zones".into(),
        OpAction::CreateStack(r) => format!("create stack {}", r.name),
        OpAction::UpdateStack(r) => format!("update stack {}", r.id),
        OpAction::ShowStack(id) => format!("show stack {id}"),
        OpAction::DeleteStack(id) => format!("delete stack {id}"),
        OpAction::ListResources(r) => format!("list the resources of stack {}", r.id),
        OpAction::MarkUnhealthy(r) => format!("mark {} unhealthy", r.resource_name),
        OpAction::ShowServers(ids) => format!("show {} server(s)", ids.len()),
        OpAction::RunHook(c) => format!("run hook {} at {}", c.name, c.point.as_str()),
        other => format!("{other:?}"),
    }
}
