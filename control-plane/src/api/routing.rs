//! How a resource's routers are put together from its parts'.

use crate::state::AppState;
use axum::extract::DefaultBodyLimit;
use utoipa_axum::router::OpenApiRouter;

/// A resource's routes: its parts' routers as one, under the resource's body limit.
pub fn merged<const N: usize>(parts: [OpenApiRouter<AppState>; N], body_limit: usize) -> OpenApiRouter<AppState> {
    parts.into_iter().fold(OpenApiRouter::new(), OpenApiRouter::merge).layer(DefaultBodyLimit::max(body_limit))
}
