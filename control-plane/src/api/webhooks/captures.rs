//! The captures of one endpoint (its history): list (newest first), read one whole, its raw body, delete one, clear all.

use crate::api::context::Ctx;
use crate::api::webhooks::endpoints::ensure_exists;
use crate::api::webhooks::model::subtract_stored;
use crate::api::webhooks::search::{self, Search};
use crate::auth::scope;
use crate::capture::row::{CAPTURE_COLUMNS_FULL, CaptureRow};
use crate::db::owned::{self, Owned};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiPath, Id};
use crate::pagination::{ListParams, Listed};
use crate::state::AppState;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::Page;
use hookflow_shared::api::webhooks::{Capture, SearchSort};
use hookflow_shared::{CaptureId, OrgId, WebhookId};

/// List captured requests, newest first (bodies over 64 KiB are left out: `body_truncated`).
#[utoipa::path(get, operation_id = "list_webhook_requests", path = "/webhooks/{id}/requests", params(Id, ListParams),
    responses((status = 200, body = Page<Capture>)))]
pub async fn list_captures(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath(id): ApiPath<WebhookId>,
    params: ListParams,
) -> Listed<Capture> {
    ensure_exists(&app.pool, caller.org_id, id).await?;
    let search =
        Search { org_id: caller.org_id, webhook_id: id, conds: Vec::new(), sort: SearchSort::default(), page: params };
    Ok(Json(search::run(&app.read_pool, search).await?))
}

/// One captured request of the organization's endpoint; another endpoint's or organization's is 404.
pub(super) async fn fetch_capture(
    app: &AppState,
    org_id: OrgId,
    webhook_id: WebhookId,
    id: CaptureId,
) -> ApiResult<CaptureRow> {
    let row: Option<CaptureRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {CAPTURE_COLUMNS_FULL} FROM captures WHERE organization_id = $1 AND webhook_id = $2 AND id = $3"
    )))
    .bind(org_id)
    .bind(webhook_id)
    .bind(id)
    .fetch_optional(&app.pool)
    .await?;
    row.ok_or_else(|| ApiError::not_found("captured request"))
}

/// Read one captured request, whole.
#[utoipa::path(get, operation_id = "get_webhook_request", path = "/webhooks/{id}/requests/{request_id}",
    params(Id, ("request_id" = Uuid, Path)),
    responses((status = 200, body = Capture)))]
pub async fn get_capture(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath((id, request_id)): ApiPath<(WebhookId, CaptureId)>,
) -> ApiResult<Json<Capture>> {
    Ok(Json(fetch_capture(&app, caller.org_id, id, request_id).await?.into()))
}

/// The raw body bytes, with the original Content-Type.
#[utoipa::path(get, operation_id = "get_webhook_request_body", path = "/webhooks/{id}/requests/{request_id}/body",
    params(Id, ("request_id" = Uuid, Path)),
    responses((status = 200, description = "The body exactly as received",
        body = hookflow_shared::api::documents::RawBody, content_type = "application/octet-stream")))]
pub async fn get_capture_body(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath((id, request_id)): ApiPath<(WebhookId, CaptureId)>,
) -> ApiResult<Response> {
    let row = fetch_capture(&app, caller.org_id, id, request_id).await?;
    let content_type = row
        .content_type
        .as_deref()
        .and_then(|ct| HeaderValue::from_str(ct).ok())
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    let mut response = row.body.unwrap_or_default().into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    // The body is the sender's, not ours: never let a browser sniff or run it in our origin.
    response.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
    Ok(response)
}

/// Delete one captured request.
#[utoipa::path(delete, operation_id = "delete_webhook_request", path = "/webhooks/{id}/requests/{request_id}",
    params(Id, ("request_id" = Uuid, Path)),
    responses((status = 204)))]
pub async fn delete_capture(
    Ctx { app, caller }: Ctx<scope::WebhooksWrite>,
    ApiPath((id, request_id)): ApiPath<(WebhookId, CaptureId)>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    owned::delete(&mut *tx, Owned::Capture(id), caller.org_id, request_id).await?;
    subtract_stored(&mut tx, id, 1).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Clear the endpoint's whole history (analytics counters keep what was received).
#[utoipa::path(delete, operation_id = "clear_webhook_requests", path = "/webhooks/{id}/requests", params(Id), responses((status = 204)))]
pub async fn clear_captures(
    Ctx { app, caller }: Ctx<scope::WebhooksWrite>,
    ApiPath(id): ApiPath<WebhookId>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    ensure_exists(&mut *tx, caller.org_id, id).await?;
    // Lock the counters first: batches in flight finish, and later ones wait, so rows and counts agree.
    sqlx::query("SELECT 1 FROM webhook_counters WHERE webhook_id = $1 FOR UPDATE").bind(id).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM captures WHERE webhook_id = $1").bind(id).execute(&mut *tx).await?;
    sqlx::query("UPDATE webhook_counters SET stored = 0 WHERE webhook_id = $1").bind(id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}
