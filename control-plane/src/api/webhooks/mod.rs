//! Webhook endpoints and their captures: CRUD, history, search, export, replay, signature re-checks and the live
//! stream. (The API names a capture a "request" in its paths: `/webhooks/{id}/requests`.)

pub mod answers;
pub mod captures;
pub mod destinations;
pub mod endpoints;
pub mod export;
pub mod handshake;
pub mod model;
pub mod query_text;
pub mod replay;
pub mod search;
pub mod stream;
pub mod triggers;
pub mod verification;
pub mod verify;

use crate::state::AppState;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(endpoints::routes())
        .merge(destinations::routes())
        .routes(routes!(captures::list_captures, captures::clear_captures))
        .routes(routes!(search::search_requests))
        .routes(routes!(export::export_requests))
        .routes(routes!(captures::get_capture, captures::delete_capture))
        .routes(routes!(captures::get_capture_body))
        .routes(routes!(replay::replay_request))
        .routes(routes!(verify::verify_request))
        .routes(routes!(answers::test_rules))
        .routes(routes!(stream::stream_requests))
}
