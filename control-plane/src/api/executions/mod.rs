//! Executions as the API shows them: launching (with idempotency), reading, cancelling, streaming and their
//! statistics; `all` serves them by id alone (inline executions have no flow) and lists them, `inline` runs a
//! definition sent with the request. What happens to an execution (the state machine and its event log) lives in `queue`.

pub mod all;
pub mod idempotency;
pub mod inline;
pub mod launch;
pub mod path;
pub mod read;
pub mod resolve;
pub mod stats;
pub mod stream;
pub mod waiting;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

/// Launch bodies carry up to 10,000 rows of data (`rows`): more than the API's default limit.
pub const LAUNCH_BODY_LIMIT: usize = 8 * 1024 * 1024;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(crate::api::routing::merged([launch::routes()], LAUNCH_BODY_LIMIT))
        .merge(read::routes())
        .merge(stream::routes())
        .merge(stats::routes())
        .merge(all::routes())
}
