//! Leases watched while the server runs: every lease time, the occurrences whose owner went
//! away (their lease expired: a killed command, another server stopped) are taken over as the
//! core decides ([`vnfm_core::lifecycle::Lifecycle::take_over_expired`], `[state] takeover`):
//! - `interrupt` (the default): declared interrupted (`FAILED_TEMP` with `failureKind:
//!   INTERRUPTED`, or `ROLLED_BACK` from `STARTING`), one conditional commit each, so two
//!   servers never take the same one. Their instances stay busy until an operator retries,
//!   rolls back or fails them, and their subscribers are notified, as for any commit of this
//!   server.
//! - `resume`: run on by this server where their progress says
//!   ([`vnfm_core::lifecycle::Lifecycle::resume_expired`], started as a retry is: cancellable,
//!   awaited at shutdown); the first commit is conditioned on the version read, so of two
//!   servers one runs it. One that cannot be started for a reason that will not pass (its
//!   package is gone) is declared interrupted, so that nothing is left running with nobody
//!   behind it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use vnfm_core::id::OpOccId;
use vnfm_core::lifecycle::takeover::{self, FailedStart};
use vnfm_core::lifecycle::{Resumable, Sweep};

use super::state::App;
use super::tasks::{self, Run};

/// Sweeps every `[state] lease_seconds` until the server stops. The pace is real time (a
/// timer of the runtime), while expiry is judged on the server's clock: sleeping on the
/// lifecycle's clock would move a test's virtual clock forward by itself.
///
/// After a sweep that could not read the store (the database down), the next one is skipped:
/// while the database was down no owner could renew its lease, and an owner that is alive
/// renews it within a second of the database's return (the core tries its failed commits
/// again), so it is given a whole lease time before its occurrences count as abandoned.
///
/// `first` are the occurrences the start-up recovery left to resume: they are started at once.
pub(crate) async fn run(app: Arc<App>, mut stopped: watch::Receiver<bool>, first: Vec<Resumable>) {
    let resumer = Arc::new(Resumer::default());
    resume_all(&app, &resumer, first);
    let every = app.lcm.config().lease_time;
    let mut store_failed = false;
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            () = tokio::time::sleep(every) => {}
        }
        if std::mem::take(&mut store_failed) {
            // Still down? (A missing instance is the answer of a store that works.)
            let probe = vnfm_core::id::VnfInstanceId::from("vnfm-sweep-probe");
            if let Err(e) = app.lcm.drivers().store.instance(&probe).await {
                store_failed = e.is_retryable();
            }
            continue;
        }
        match app.lcm.take_over_expired().await {
            Ok(sweep) => taken(&app, &resumer, sweep),
            Err(e) => {
                store_failed = true;
                tracing::warn!("cannot sweep for operations whose owner went away: {e}");
            }
        }
    }
}

/// Says what a sweep declared interrupted and resumes what it left to resume.
fn taken(app: &Arc<App>, resumer: &Arc<Resumer>, sweep: Sweep) {
    for id in sweep.interrupted {
        // The commit's own line (`observe`) carries the instance id too.
        if !app.quiet {
            tracing::info!(
                operation_id = id.as_str(),
                "operation {id} declared interrupted: its owner's lease expired"
            );
        }
    }
    resume_all(app, resumer, sweep.resumable);
}

/// The take-overs of this server: those being started (a sweep does not start one twice) and
/// the failed starts of each.
#[derive(Default)]
struct Resumer {
    starting: Mutex<HashSet<OpOccId>>,
    failures: Mutex<HashMap<OpOccId, u32>>,
}

/// Starts the take-over of each of `ops` (`[state] takeover = "resume"`), each on a task of its
/// own (a start waits for the occurrence's first commit; the sweep does not wait for it). What
/// follows a start that failed is the core's decision
/// ([`vnfm_core::lifecycle::takeover::after_failed_start`]: left to another server, tried by
/// the next sweep, or declared interrupted with the reason).
fn resume_all(app: &Arc<App>, resumer: &Arc<Resumer>, ops: Vec<Resumable>) {
    for r in ops {
        if !lock(&resumer.starting).insert(r.op.clone()) {
            continue;
        }
        let (app, resumer) = (app.clone(), resumer.clone());
        tokio::spawn(async move {
            let id = r.op.clone();
            let started = tasks::start(app.clone(), r.op, Run::TakeOver).await;
            lock(&resumer.starting).remove(&id);
            let p = match started {
                Ok(_) => {
                    lock(&resumer.failures).remove(&id);
                    if !app.quiet {
                        tracing::info!(
                            operation_id = id.as_str(),
                            vnf_instance_id = r.instance.as_str(),
                            "operation {id} resumed: its owner's lease expired"
                        );
                    }
                    return;
                }
                Err(p) => p,
            };
            let earlier = lock(&resumer.failures).get(&id).copied().unwrap_or(0);
            let why = match takeover::after_failed_start(&p, earlier) {
                FailedStart::LeftToOthers => {
                    lock(&resumer.failures).remove(&id);
                    tracing::debug!(operation_id = id.as_str(), "not resumed: {}", p.detail);
                    return;
                }
                FailedStart::TryAgain { failed } => {
                    lock(&resumer.failures).insert(id.clone(), failed);
                    tracing::warn!(
                        operation_id = id.as_str(),
                        "cannot resume operation {id} now (failed start {failed} of {}): {}",
                        takeover::START_FAILURES,
                        p.detail
                    );
                    return;
                }
                FailedStart::Interrupt(why) => {
                    lock(&resumer.failures).remove(&id);
                    why
                }
            };
            match app.lcm.interrupt_expired(&id, &why).await {
                Ok(true) => tracing::warn!(
                    operation_id = id.as_str(),
                    "operation {id} declared interrupted: {why}"
                ),
                Ok(false) => {}
                Err(e) => tracing::warn!(
                    operation_id = id.as_str(),
                    "cannot declare operation {id} interrupted: {e}"
                ),
            }
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
