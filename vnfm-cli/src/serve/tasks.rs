//! The task resources of an operation occurrence (SOL003 v3.3.1 5.4.14–5.4.17):
//! `POST /vnflcm/v2/vnf_lcm_op_occs/{id}/{retry|rollback|fail|cancel}`.
//!
//! The core decides which task an occurrence takes in which state
//! ([`vnfm_core::lifecycle::task`]); these handlers look the occurrence up (404), ask the core
//! (409 naming the state), and carry the task out:
//! - `retry`, `rollback`: 202 with the occurrence's `Location` once it is `PROCESSING` /
//!   `ROLLING_BACK` again; the operation continues in the background
//!   ([`vnfm_core::lifecycle::Lifecycle::retry`], [`Lifecycle::rollback_with`]).
//! - `fail`: 200 with the occurrence, now `FAILED`.
//! - `cancel` (body `CancelMode`): 202; the operation stops at its next step boundary (a VIM
//!   call in flight completes; a wait for a stack ends at once) and ends `FAILED_TEMP`, to be
//!   retried, rolled back or failed. `GRACEFUL` and `FORCEFUL` act the same: vnfm never breaks
//!   off a VIM call, and stops before the next one either way.
//!
//! Every operation this server runs gets an [`Interrupt`] registered by instance
//! ([`Cancels`]); a cancel triggers it.
//!
//! [`Lifecycle::rollback_with`]: vnfm_core::lifecycle::Lifecycle::rollback_with

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;
use tracing::Instrument as _;
use vnfm_core::driver::Store;
use vnfm_core::id::OpOccId;
use vnfm_core::lcm::{CancelModeType, VnfLcmOpOcc};
use vnfm_core::lifecycle::grant::lcm_op_occ_href;
use vnfm_core::lifecycle::{LcmError, OpTask, OperationOptions};
use vnfm_core::problem::ProblemDetails;

use super::http::{json, parse, problem, problem_of, read_body};
use super::observe::{send_started, Started};
use super::state::{lcm_problem, App};

/// The body of `POST .../cancel` (SOL003 `CancelMode`).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CancelMode {
    /// `GRACEFUL` or `FORCEFUL`.
    cancel_mode: CancelModeType,
}

/// The occurrence `id`, or a 404 / 500 ProblemDetails.
async fn occurrence(app: &App, id: &OpOccId) -> Result<VnfLcmOpOcc, Response> {
    stored(app, id).await.map_err(problem)
}

/// The occurrence `id`, or the 404 / 500 ProblemDetails of why not.
async fn stored(app: &App, id: &OpOccId) -> Result<VnfLcmOpOcc, ProblemDetails> {
    app.store.op_occ(id).await.map_err(|e| {
        if e.is_not_found() {
            ProblemDetails::new(404, format!("VNF LCM operation occurrence {id} not found"))
        } else {
            ProblemDetails::new(500, format!("the state store failed: {e}"))
        }
    })
}

/// The ProblemDetails of a task the core refused or that failed to start.
fn task_problem(e: &LcmError) -> Response {
    problem(lcm_problem(e))
}

/// `POST /vnf_lcm_op_occs/{id}/fail`: 200 with the occurrence, `FAILED`.
pub(crate) async fn fail(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    let id = OpOccId::from(id);
    if let Err(r) = occurrence(&app, &id).await {
        return r;
    }
    match app.lcm.fail(&id).await {
        Ok(op) => json(StatusCode::OK, &op),
        Err(e) => task_problem(&e),
    }
}

/// `POST /vnf_lcm_op_occs/{id}/retry`.
pub(crate) async fn retry(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    resume(app, OpOccId::from(id), OpTask::Retry).await
}

/// `POST /vnf_lcm_op_occs/{id}/rollback`.
pub(crate) async fn rollback(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    resume(app, OpOccId::from(id), OpTask::Rollback).await
}

/// What runs an occurrence on in the background: a SOL003 task, or the take-over of one
/// whose owner went away (`[state] takeover = "resume"`, [`super::sweep`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Run {
    /// `retry` or `rollback`.
    Task(OpTask),
    /// [`vnfm_core::lifecycle::Lifecycle::resume_expired`].
    TakeOver,
}

impl Run {
    fn name(self) -> &'static str {
        match self {
            Self::Task(t) => t.name(),
            Self::TakeOver => "take-over",
        }
    }
}

/// Retry or rollback: checked by the core, then run in the background; 202 once the
/// occurrence is stored running again, or the ProblemDetails of why it did not start.
async fn resume(app: Arc<App>, id: OpOccId, task: OpTask) -> Response {
    match start(app, id, Run::Task(task)).await {
        Ok(op_id) => accepted(&op_id),
        Err(p) => problem(p),
    }
}

/// Starts `run` on the occurrence `id` in the background, as this server runs its operations
/// (an interrupt registered for a cancel, counted as running); the occurrence's id once it is
/// stored running again under this server's lease, or the ProblemDetails of why it did not
/// start (then nothing was written).
pub(super) async fn start(app: Arc<App>, id: OpOccId, run: Run) -> Result<OpOccId, ProblemDetails> {
    let op = stored(&app, &id).await?;
    let check = match run {
        Run::Task(t) => t,
        Run::TakeOver => OpTask::Retry,
    };
    if let Err(e) = app.lcm.check_task(&id, check).await {
        return Err(lcm_problem(&e));
    }
    let instance = op.vnf_instance_id.clone();
    let (_, pkg) = app.instance_and_package(&instance).await?;
    let (tx, rx) = oneshot::channel();
    let started: Started = Arc::new(Mutex::new(Some(tx)));
    app.shared
        .started
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(instance.clone(), started.clone());
    let (token, interrupt) = app.cancels.register(&instance);
    let opts = OperationOptions {
        interrupt: Some(interrupt),
        ..OperationOptions::default()
    };
    app.running.fetch_add(1, Ordering::SeqCst);
    let bg = app.clone();
    // In the span of the request that launched it (none for a sweep's): the operation's
    // lines carry that request's id.
    let task = async move {
        let app = bg;
        let r = match run {
            Run::Task(OpTask::Retry) => app.lcm.retry(&id, &pkg, &opts).await,
            Run::Task(_) => app.lcm.rollback_with(&id, &pkg, &opts).await,
            Run::TakeOver => app.lcm.resume_expired(&id, &pkg, &opts).await,
        };
        {
            let mut s = app
                .shared
                .started
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if s.get(&instance).is_some_and(|x| Arc::ptr_eq(x, &started)) {
                s.remove(&instance);
            }
        }
        app.cancels.unregister(&instance, token);
        // A task that did not start leaves the occurrence as it was (FAILED_TEMP, or running
        // without a live lease: the instance stays taken by it).
        match r {
            Err(e) => send_started(&started, Err(lcm_problem(&e))),
            Ok(report) => {
                app.note_op(
                    instance.as_str(),
                    Some(id.as_str()),
                    &format!(
                        "{} of operation {id} on VNF instance {instance}: {}{}",
                        run.name(),
                        crate::render::lcm::sol(&report.op_occ.operation_state),
                        report
                            .op_occ
                            .error
                            .as_ref()
                            .map(|e| format!(": {}", e.detail))
                            .unwrap_or_default()
                    ),
                );
                app.save_sim().await;
            }
        }
        if app.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            app.idle.notify_waiters();
        }
    };
    tokio::spawn(task.in_current_span());
    match rx.await {
        Ok(r) => r,
        Err(_) => Err(ProblemDetails::new(
            500,
            format!(
                "the {} of operation {} ended before it was recorded",
                run.name(),
                op.id
            ),
        )),
    }
}

fn accepted(op_id: &OpOccId) -> Response {
    let mut r = StatusCode::ACCEPTED.into_response();
    if let Ok(v) = HeaderValue::from_str(&lcm_op_occ_href(op_id)) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// `POST /vnf_lcm_op_occs/{id}/cancel` with a `CancelMode`: 202, and the operation stops at
/// its next step boundary (`FAILED_TEMP`).
pub(crate) async fn cancel(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let req: CancelMode = match read_body(body, app.config.server.body_limit, app.request_timeout())
        .await
        .and_then(|b| parse(&b, "CancelMode"))
    {
        Ok(r) => r,
        Err(r) => return r,
    };
    let id = OpOccId::from(id);
    if let Err(r) = occurrence(&app, &id).await {
        return r;
    }
    let op = match app.lcm.check_cancel(&id).await {
        Ok(op) => op,
        Err(e) => return task_problem(&e),
    };
    let mode = match req.cancel_mode {
        CancelModeType::Graceful => "GRACEFUL",
        CancelModeType::Forceful => "FORCEFUL",
    };
    let reason = format!("cancelled ({mode}) by POST {}/cancel", lcm_op_occ_href(&id));
    if !app.cancels.trigger(&op.vnf_instance_id, &reason) {
        // It ended between the check and now.
        let state = match occurrence(&app, &id).await {
            Ok(o) => o.operation_state.to_string(),
            Err(r) => return r,
        };
        return problem_of(
            409,
            format!(
                "operation {id} is {state}: only an operation STARTING, PROCESSING or \
                 ROLLING_BACK can be cancelled"
            ),
        );
    }
    app.note_op(
        op.vnf_instance_id.as_str(),
        Some(id.as_str()),
        &format!("operation {id}: {reason}"),
    );
    accepted(&id)
}
