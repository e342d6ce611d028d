//! Administration: the scope catalog, API keys, the organization and its audit log.

pub mod audit;
pub mod keys;
pub mod organization;
pub mod permissions;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(permissions::routes()).merge(keys::routes()).merge(organization::routes())
}
