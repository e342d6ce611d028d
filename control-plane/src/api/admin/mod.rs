//! Administration: the scope catalog, API keys, the organization, its usage and its audit log.

pub mod audit;
pub mod keys;
pub mod limits;
pub mod organization;
pub mod permissions;
pub mod usage;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(permissions::routes())
        .merge(keys::routes())
        .merge(organization::routes())
        .merge(usage::routes())
}
