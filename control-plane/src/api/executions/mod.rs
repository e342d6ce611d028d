//! Executions as the API shows them: launching (with idempotency), reading, cancelling, streaming and their
//! statistics. What happens to an execution (the state machine and its event log) lives in `queue`.

pub mod idempotency;
pub mod launch;
pub mod read;
pub mod resolve;
pub mod stats;
pub mod stream;

use crate::error::ApiError;
use crate::extract::ApiPath;
use crate::state::AppState;
use hookflow_shared::{ExecutionId, FlowId};
use utoipa_axum::router::OpenApiRouter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(launch::routes()).merge(read::routes()).merge(stream::routes()).merge(stats::routes())
}

/// The `{flow_id}` and `{execution_id}` of one execution's routes: `ExecutionPath { flow_id, execution_id }:
/// ExecutionPath`. Anything that is not a UUID answers 404.
#[derive(Debug, Clone, Copy, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ExecutionPath {
    pub flow_id: FlowId,
    pub execution_id: ExecutionId,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ExecutionPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        ApiPath::<ExecutionPath>::from_request_parts(parts, state).await.map(|ApiPath(path)| path)
    }
}
