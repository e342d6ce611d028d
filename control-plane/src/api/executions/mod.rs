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

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(launch::routes())
        .merge(read::routes())
        .merge(stream::routes())
        .merge(stats::routes())
        .merge(all::routes())
}
