//! Webhook endpoints and their captured requests: CRUD, history, search, export, replay and the live stream.

pub mod endpoints;
pub mod export;
pub mod model;
pub mod query_text;
pub mod replay;
pub mod requests;
pub mod search;
pub mod stream;
pub mod verification;
pub mod verify;

use crate::state::AppState;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(endpoints::routes())
        .routes(routes!(requests::list_requests, requests::clear_requests))
        .routes(routes!(search::search_requests))
        .routes(routes!(export::export_requests))
        .routes(routes!(requests::get_request, requests::delete_request))
        .routes(routes!(requests::get_request_body))
        .routes(routes!(replay::replay_request))
        .routes(routes!(verify::verify_request))
        .routes(routes!(stream::stream_requests))
}
