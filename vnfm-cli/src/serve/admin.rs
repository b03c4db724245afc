//! `GET /admin/packages` and `POST /admin/packages/reload`: the package index
//! ([`super::packages`]) over HTTP, and the task that looks at the packages folder every
//! `[packages] rescan_interval` seconds.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::watch;

use super::guard::{require_api_token, Guard};
use super::http::{json, problem_of};
use super::state::App;

/// Looks at the folder every `[packages] rescan_interval` seconds until `stopped`.
pub(crate) async fn watch(app: Arc<App>, mut stopped: watch::Receiver<bool>) {
    let Some(every) = app.packages.rescan_interval() else {
        return;
    };
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => return,
            () = tokio::time::sleep(every) => {}
        }
        // A folder that cannot be read is logged by `look` when that starts or changes.
        let _ = app.packages.look(false).await;
    }
}

/// `/admin/packages` and its reload, behind `[server] api_token` as the LCM API.
pub(crate) fn routes(app: Arc<App>) -> Router<Arc<App>> {
    Router::new()
        .route("/admin/packages", get(list))
        .route("/admin/packages/reload", post(reload))
        .route_layer(axum::middleware::from_fn_with_state(
            Guard::new(app, "the package listing and reload require"),
            require_api_token,
        ))
}

/// `GET /admin/packages`: the packages served and the entries that are not, with why.
async fn list(State(app): State<Arc<App>>) -> Response {
    json(StatusCode::OK, &app.packages.listing())
}

/// `POST /admin/packages/reload`: reads every package again, then answers the listing.
async fn reload(State(app): State<Arc<App>>) -> Response {
    match app.packages.reload().await {
        Ok(()) => json(StatusCode::OK, &app.packages.listing()),
        Err(e) => problem_of(
            500,
            format!(
                "cannot read the packages folder {} ([packages] dir): {e}; the packages read \
                 before stay served",
                app.packages.dir_display()
            ),
        ),
    }
}
