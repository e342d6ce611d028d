//! The `{flow_id}` and `{execution_id}` of one execution's routes, read and streamed alike, and the
//! `{execution_id}` alone of the routes under `/executions` (inline executions have no flow).

use crate::error::ApiError;
use crate::extract::ApiPath;
use hookflow_shared::{ExecutionId, FlowId};

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

/// The `{execution_id}` of the routes under `/executions/{execution_id}`. Anything that is not a UUID answers 404.
#[derive(Debug, Clone, Copy, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ExecutionIdPath {
    pub execution_id: ExecutionId,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ExecutionIdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        ApiPath::<ExecutionIdPath>::from_request_parts(parts, state).await.map(|ApiPath(path)| path)
    }
}
