//! An endpoint's destinations (issue #49) and their deliveries: CRUD (`crud`), the checks and stored shape
//! (`model`), deliveries, attempts and replay (`deliveries`); claiming due deliveries (`claim`), preparing an
//! attempt (`attempts`) and recording attempts, many in one statement (`recording`), for the server's sender (`delivery`) and for runners alike.

pub mod attempts;
pub mod claim;
pub mod crud;
pub mod deliveries;
pub mod model;
pub mod recording;

use crate::state::AppState;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(crud::create_destination, crud::list_destinations))
        .routes(routes!(crud::get_destination, crud::update_destination, crud::delete_destination))
        .routes(routes!(deliveries::list_deliveries))
        .routes(routes!(deliveries::replay_deliveries))
        .routes(routes!(deliveries::get_delivery))
        .routes(routes!(deliveries::list_attempts))
}
