//! The runner protocol's handlers: registration, listing and heartbeats (`registry`), long-poll claims
//! (`claim`), and node results and completion under job tokens (`report`). The state changes they cause are the
//! queue's (`crate::queue`); who may call them is `caller`'s.

pub mod caller;
pub mod claim;
pub mod registry;
pub mod report;

use crate::state::AppState;
use axum::extract::DefaultBodyLimit;
use utoipa_axum::router::OpenApiRouter;

/// Node reports may carry many results with bodies of up to 64 KiB each.
const REPORT_BODY_LIMIT: usize = 16 * 1024 * 1024;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(registry::routes())
        .merge(claim::routes())
        .merge(report::routes().layer(DefaultBodyLimit::max(REPORT_BODY_LIMIT)))
}
