//! The API: one folder or file per resource, each with its routes and SQL together, merged here into the router
//! with the layers around it, the probes, the web console (`app`) and the OpenAPI document; and `serve`, which
//! takes a bound listener and the state's shutdown token so tests run it on 127.0.0.1:0 and every loop stops on
//! one signal. Below it: the transport (`http`), the error type, extractors, pagination and field checks at the
//! crate root, identity (`auth`), the queue and the capture path.

pub mod admin;
pub mod alerts;
pub mod analytics;
pub mod app;
pub mod batches;
pub mod catalog;
pub mod collections;
pub mod context;
pub mod executions;
pub mod flows;
pub mod health;
pub mod openapi;
pub mod openapi_ids;
pub mod openapi_shapes;
pub mod people;
pub mod resources;
pub mod routing;
pub mod runner_protocol;
pub mod webhooks;

use crate::capture;
use crate::http::envelope::EnvelopeLayer;
use crate::state::AppState;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::sync::Arc;
use tokio::net::TcpListener;
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;

/// Default API request body limit: 1 MiB.
pub const API_BODY_LIMIT: usize = 1024 * 1024;

/// Every documented operation, with the document that describes them.
fn documented() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(admin::routes())
        .merge(alerts::routes())
        .merge(people::routes())
        .merge(webhooks::routes())
        .merge(capture::routes())
        .merge(analytics::routes())
        .merge(catalog::routes())
        .merge(resources::routes())
        .merge(flows::routes())
        .merge(collections::routes())
        .merge(executions::routes())
        .merge(batches::routes())
        .merge(runner_protocol::routes())
}

/// The OpenAPI document as served at `/openapi.json`.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    assembled().1
}

/// The routes and their completed document.
fn assembled() -> (axum::Router<AppState>, utoipa::openapi::OpenApi) {
    let (routes, mut document) = documented().split_for_parts();
    openapi_ids::inline_ids(&mut document);
    openapi::complete_operations(&mut document);
    openapi_shapes::for_generators(&mut document);
    (routes, document)
}

/// Routes outside the contract's operations: probes, the document itself and the app (its page, its settings
/// and, for one of its files, its script).
pub const UNDOCUMENTED_ROUTES: [&str; 6] =
    ["/healthz", "/readyz", "/openapi.json", "/", "/app/config.json", "/app/js/main.js"];

pub fn router(state: AppState) -> Router {
    let (api, mut document) = assembled();
    openapi::state_server_limits(&mut document, state.settings.max_capture_rate_per_s);
    let document: Arc<[u8]> = match serde_json::to_vec(&document) {
        Ok(bytes) => bytes.into(),
        // The document is built from types of this crate; a failure here is a bug that every test would see.
        Err(e) => panic!("the OpenAPI document cannot be serialized: {e}"),
    };
    let serve_document = move || {
        let document = document.clone();
        async move {
            ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], document.to_vec()).into_response()
        }
    };
    api.route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/openapi.json", get(serve_document))
        .merge(crate::api::app::routes())
        .layer(tower::ServiceBuilder::new().layer(EnvelopeLayer).layer(DefaultBodyLimit::max(API_BODY_LIMIT)))
        .with_state(state)
}

/// Serves until the state's shutdown token is cancelled, then finishes in-flight requests.
pub async fn serve(listener: TcpListener, state: AppState) -> std::io::Result<()> {
    let shutdown = state.shutdown.clone();
    let limits = state.settings.limits;
    crate::http::listener::serve(listener, router(state), shutdown, limits).await
}
