//! Collections: requests grouped in folders (CRUD), imported from an OpenAPI 3.0/3.1 description and kept in sync
//! with it, referenced by flows' request nodes (`request_ref`, resolved at launch), and mocked by an endpoint
//! answering each operation with its example (`mock`).

pub mod crud;
pub mod import;
pub mod imports;
pub mod merge;
pub mod mock;
pub mod model;
pub mod openapi;
pub mod refs;
pub mod schemas;
pub mod sync;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

/// Collection bodies (imports carry whole OpenAPI descriptions) may be up to 10 MiB.
pub const COLLECTION_BODY_LIMIT: usize = 10 * 1024 * 1024;

pub fn routes() -> OpenApiRouter<AppState> {
    crate::api::routing::merged(
        [crud::routes(), import::routes(), imports::routes(), sync::routes(), mock::routes()],
        COLLECTION_BODY_LIMIT,
    )
}
