//! Executions as the API shows them: launching (with idempotency), reading, cancelling, streaming and their
//! statistics. What happens to an execution (the state machine and its event log) lives in `queue`.

pub mod idempotency;
pub mod launch;
pub mod path;
pub mod read;
pub mod resolve;
pub mod stats;
pub mod stream;
pub mod waiting;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(launch::routes()).merge(read::routes()).merge(stream::routes()).merge(stats::routes())
}
