//! Reading executions (list, one, node results) and cancelling them: a queued execution is cancelled at once, a
//! running one is flagged and its runner is told at its next heartbeat or result.

use crate::auth::{Caller, scope};
use crate::error::ApiError;
use crate::executions::{EXECUTION_COLUMNS, Ending, ExecutionRow, events, fetch, finish};
use crate::extract::{ApiPath, ApiQuery};
use crate::pagination::{self, ListParams};
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use hookflow_shared::ErrorBody;
use hookflow_shared::api::Page;
use hookflow_shared::api::executions::{Execution, NodeResult, NodeResultList};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_executions))
        .routes(routes!(get_execution))
        .routes(routes!(node_results))
        .routes(routes!(cancel_execution))
}

/// A flow's executions, newest first.
#[utoipa::path(get, path = "/flows/{id}/executions", tag = "Flows", params(("id" = Uuid, Path), ListParams),
    responses((status = 200, body = Page<Execution>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn list_executions(
    State(app): State<AppState>,
    caller: Caller<scope::FlowsRead>,
    ApiPath(flow_id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<Page<Execution>>, ApiError> {
    let page = params.page::<Uuid>()?;
    let mut conn = app.pool.acquire().await?;
    crate::flows::ensure_exists(&mut conn, caller.org_id, flow_id).await?;
    let rows: Vec<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions e
         WHERE e.organization_id = $1 AND e.flow_id = $2 AND ($3::uuid IS NULL OR e.id < $3)
         ORDER BY e.id DESC LIMIT $4"
    )))
    .bind(caller.org_id)
    .bind(flow_id)
    .bind(page.after)
    .bind(page.fetch_limit())
    .fetch_all(&mut *conn)
    .await?;
    let items: Vec<Execution> = rows.into_iter().map(Into::into).collect();
    Ok(Json(pagination::finish(items, &page, |e| e.id)))
}

/// One execution.
#[utoipa::path(get, path = "/flows/{flow_id}/executions/{execution_id}", tag = "Flows",
    params(("flow_id" = Uuid, Path), ("execution_id" = Uuid, Path)),
    responses((status = 200, body = Execution), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn get_execution(
    State(app): State<AppState>,
    caller: Caller<scope::FlowsRead>,
    ApiPath((flow_id, execution_id)): ApiPath<(Uuid, Uuid)>,
) -> Result<Json<Execution>, ApiError> {
    let mut conn = app.pool.acquire().await?;
    fetch(&mut conn, caller.org_id, flow_id, execution_id).await.map(Json)
}

/// Node results of the latest attempt, in node order.
#[utoipa::path(get, path = "/flows/{flow_id}/executions/{execution_id}/nodes", tag = "Flows",
    params(("flow_id" = Uuid, Path), ("execution_id" = Uuid, Path)),
    responses((status = 200, body = NodeResultList), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn node_results(
    State(app): State<AppState>,
    caller: Caller<scope::FlowsRead>,
    ApiPath((flow_id, execution_id)): ApiPath<(Uuid, Uuid)>,
) -> Result<Json<NodeResultList>, ApiError> {
    let mut conn = app.pool.acquire().await?;
    let execution = fetch(&mut conn, caller.org_id, flow_id, execution_id).await?;
    let rows: Vec<serde_json::Value> = sqlx::query_scalar(
        "SELECT result FROM node_results WHERE execution_id = $1 AND attempt = $2 ORDER BY position, node_id",
    )
    .bind(execution_id)
    .bind(execution.attempt)
    .fetch_all(&mut *conn)
    .await?;
    let items = rows.into_iter().filter_map(|r| serde_json::from_value::<NodeResult>(r).ok()).collect();
    Ok(Json(NodeResultList { items }))
}

/// Cancel: queued executions end at once; running ones are stopped by their runner.
#[utoipa::path(post, path = "/flows/{flow_id}/executions/{execution_id}/cancel", tag = "Flows",
    params(("flow_id" = Uuid, Path), ("execution_id" = Uuid, Path)),
    responses((status = 202, body = Execution), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn cancel_execution(
    State(app): State<AppState>,
    caller: Caller<scope::FlowsExecute>,
    ApiPath((flow_id, execution_id)): ApiPath<(Uuid, Uuid)>,
) -> Result<(StatusCode, Json<Execution>), ApiError> {
    let mut tx = app.pool.begin().await?;
    let current: Option<(String, i32)> = sqlx::query_as(
        "SELECT status, attempt FROM executions WHERE organization_id = $1 AND flow_id = $2 AND id = $3 FOR UPDATE",
    )
    .bind(caller.org_id)
    .bind(flow_id)
    .bind(execution_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((status, attempt)) = current else { return Err(ApiError::not_found("execution")) };
    match status.as_str() {
        "queued" => {
            let ending = Ending {
                execution_id,
                attempt,
                job_id: None,
                status: "cancelled",
                error: Some("cancelled before a runner took it"),
            };
            finish(&mut tx, ending).await?;
        }
        "running" => {
            sqlx::query("UPDATE executions SET cancel_requested = true WHERE id = $1")
                .bind(execution_id)
                .execute(&mut *tx)
                .await?;
            let event = serde_json::json!({"type": "execution.status", "status": "running", "attempt": attempt,
                "cancel_requested": true});
            events::append(&mut tx, execution_id, &[event]).await?;
        }
        other => return Err(ApiError::conflict(format!("the execution already finished ({other})"))),
    }
    let execution = fetch(&mut tx, caller.org_id, flow_id, execution_id).await?;
    tx.commit().await?;
    Ok((StatusCode::ACCEPTED, Json(execution)))
}
