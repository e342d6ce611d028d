//! `GET /organization/usage`: what the caller's organization stores, has received today (UTC) and may still, as
//! the database counts it (`quota::usage`), with the limits in force.

use crate::api::context::Ctx;
use crate::auth::scope;
use crate::error::{ApiError, ApiResult};
use crate::quota::usage::{self, RetentionDays};
use crate::state::AppState;
use axum::Json;
use hookflow_shared::api::admin::Usage;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_usage))
}

/// The organization's usage: stored bytes (capture bodies and node results), endpoints, flows and captures
/// received today (UTC), with the limits in force (its own, else the server's defaults; `null`: none).
#[utoipa::path(get, path = "/organization/usage", responses((status = 200, body = Usage)))]
async fn get_usage(Ctx { app, caller }: Ctx<scope::OrganizationRead>) -> ApiResult<Json<Usage>> {
    let retention = app.settings.retention;
    let retention = RetentionDays { executions: retention.execution_days, audit: retention.audit_days };
    let usage = usage::read(&app.pool, caller.org_id, app.settings.quotas, retention).await?;
    usage.map(Json).ok_or_else(|| ApiError::not_found("organization"))
}
