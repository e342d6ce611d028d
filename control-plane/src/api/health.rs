//! Liveness (`/healthz`: the process answers) and readiness (`/readyz`: a writable primary answers too). Both are
//! open to anyone, so they say nothing of where the databases are: the metrics listener's `/readyz` does.

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

/// 200 `{"status": "ready"}` while the primary takes writes; else 503 with `Retry-After` and the error body with
/// `"status": "unavailable"` (a load balancer sends traffic elsewhere meanwhile). No host, socket path or lag: an
/// unauthenticated caller learns only whether to send traffic here.
pub async fn readyz(State(app): State<AppState>, request_id: Option<Extension<RequestId>>) -> Response {
    if app.databases.writable().await {
        return Json(serde_json::json!({"status": "ready"})).into_response();
    }
    let unavailable = ApiError::unavailable();
    let request_id = request_id.map(|Extension(id)| id.as_str().to_owned()).unwrap_or_default();
    let error = ErrorBody { error: ErrorDetail { code: unavailable.code, message: unavailable.message, request_id } };
    let mut body = serde_json::to_value(&error).unwrap_or_default();
    body["status"] = "unavailable".into();
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    if let Some(seconds) = unavailable.retry_after_s {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}
