//! Liveness (`/healthz`: the process answers) and readiness (`/readyz`: the database answers too).

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use std::time::Duration;

pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

pub async fn readyz(State(app): State<AppState>) -> ApiResult<Json<serde_json::Value>> {
    let probe = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(&app.pool);
    match tokio::time::timeout(Duration::from_secs(2), probe).await {
        Ok(Ok(_)) => Ok(Json(serde_json::json!({"status": "ready"}))),
        Ok(Err(e)) => Err(ApiError::from(e)),
        Err(_) => Err(ApiError::unavailable()),
    }
}
