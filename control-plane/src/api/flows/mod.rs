//! Flows: the draft (CRUD, search, tags, validation), immutable published versions, keyed environments, the
//! export document, trying one node now, and schedules. Definitions are validated with the same code the runner executes them
//! with, and stored as their authors wrote them (`json` columns, keys in their order).

pub mod crud;
pub mod environments;
pub mod model;
pub mod schedules;
pub mod transfer;
pub mod try_node;
pub mod versions;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

pub use model::FLOW_BODY_LIMIT;

pub fn routes() -> OpenApiRouter<AppState> {
    crate::api::routing::merged(
        [
            crud::routes(),
            versions::routes(),
            environments::routes(),
            transfer::routes(),
            try_node::routes(),
            schedules::routes(),
        ],
        FLOW_BODY_LIMIT,
    )
}
