//! Liveness (`/healthz`: the process answers) and readiness (`/readyz`: a writable primary answers too, and where
//! the databases are: the primary's host, the read replica's host and lag, failovers seen).

use crate::error::ApiError;
use crate::http::envelope::RequestId;
use crate::state::AppState;
use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hookflow_shared::{ErrorBody, ErrorDetail};

pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

/// 200 `{"status": "ready", "database": {...}}` while the primary takes writes; else 503 with `Retry-After`, the
/// error body and the same `database` object (a load balancer sends traffic elsewhere meanwhile).
pub async fn readyz(State(app): State<AppState>, request_id: Option<Extension<RequestId>>) -> Response {
    let status = app.databases.status().await;
    let database = serde_json::to_value(&status).unwrap_or_default();
    if status.writable {
        return Json(serde_json::json!({"status": "ready", "database": database})).into_response();
    }
    let unavailable = ApiError::unavailable();
    let request_id = request_id.map(|Extension(id)| id.as_str().to_owned()).unwrap_or_default();
    let error = ErrorBody { error: ErrorDetail { code: unavailable.code, message: unavailable.message, request_id } };
    let mut body = serde_json::to_value(&error).unwrap_or_default();
    body["status"] = "unavailable".into();
    body["database"] = database;
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    if let Some(seconds) = unavailable.retry_after_s {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}
