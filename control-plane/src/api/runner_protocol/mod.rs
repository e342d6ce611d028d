//! The runner protocol's handlers (and `deliveries`: destinations delivered by runners): registration, listing and heartbeats (`registry`), long-poll claims
//! (`claim`), node results and completion under job tokens (`report`), and webhook nodes' waits for captures
//! (`captures`, whose searches `wait_conds` hands to the waiters' sweep as data). The state changes they cause are
//! the queue's (`crate::queue`); who may call them is `caller`'s, and a job token's requests per second `report`'s
//! `JobCall`.

pub mod caller;
pub mod captures;
pub mod claim;
pub mod deliveries;
pub mod pools;
pub mod registry;
pub mod report;
pub mod wait_conds;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(registry::routes())
        .merge(claim::routes())
        .merge(report::routes())
        .merge(captures::routes())
        .merge(deliveries::routes())
        .merge(pools::routes())
}
