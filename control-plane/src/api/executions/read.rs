//! Reading executions (list, one, node results, the captures of their own URL) and cancelling them: a queued execution is cancelled at once, a
//! running one is flagged and its runner is told at its next heartbeat or result.

use crate::api::context::Ctx;
use crate::api::executions::path::ExecutionPath;
use crate::api::executions::waiting;
use crate::api::flows::model::ensure_exists;
use crate::auth::scope;
use crate::capture::row::{CAPTURE_COLUMNS_INLINE, CaptureRow};
use crate::error::ApiResult;
use crate::extract::{ApiPath, Id};
use crate::pagination::{self, ListParams, Listed};
use crate::queue::finish::{CancelTarget, cancel};
use crate::queue::row::{EXECUTION_COLUMNS, ExecutionRow, fetch, into_executions};
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use hookflow_shared::api::Page;
use hookflow_shared::api::executions::{Execution, NodeResult, NodeResultList};
use hookflow_shared::api::webhooks::Capture;
use hookflow_shared::{ExecutionId, FlowId, OrgId};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_executions))
        .routes(routes!(get_execution))
        .routes(routes!(node_results))
        .routes(routes!(cancel_execution))
        .routes(routes!(execution_captures))
}

/// A flow's executions, newest first.
#[utoipa::path(get, path = "/flows/{id}/executions", params(Id, ListParams),
    responses((status = 200, body = Page<Execution>)))]
async fn list_executions(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ApiPath(flow_id): ApiPath<FlowId>,
    params: ListParams,
) -> Listed<Execution> {
    // The flow on the primary (one object by id: just made, it is there); the list on the read replica.
    ensure_exists(&mut *app.pool.acquire().await?, caller.org_id, flow_id).await?;
    let mut conn = app.read_pool.acquire().await?;
    let sql = format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions e
         WHERE e.organization_id = $1 AND e.flow_id = $4 AND ($2::uuid IS NULL OR e.id < $2)
         ORDER BY e.id DESC LIMIT $3"
    );
    let scope = (caller.org_id, Some(flow_id.into()));
    let rows = pagination::keyset_page(&mut *conn, sql, scope, &params, |r: ExecutionRow| r, ExecutionRow::id).await?;
    drop(conn);
    let mut items = into_executions(rows.items)?;
    // Why the queued ones wait, from the primary (the runners' state of now).
    waiting::fill(&app, &mut *app.pool.acquire().await?, caller.org_id, &mut items).await?;
    Ok(Json(Page { items, next_cursor: rows.next_cursor }))
}

/// One execution.
#[utoipa::path(get, path = "/flows/{flow_id}/executions/{execution_id}",
    params(ExecutionPath),
    responses((status = 200, body = Execution)))]
async fn get_execution(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ExecutionPath { flow_id, execution_id }: ExecutionPath,
) -> ApiResult<Json<Execution>> {
    let mut conn = app.pool.acquire().await?;
    let mut execution = fetch(&mut conn, caller.org_id, flow_id, execution_id).await?;
    waiting::fill(&app, &mut conn, caller.org_id, std::slice::from_mut(&mut execution)).await?;
    Ok(Json(execution))
}

/// Node results of the latest attempt, in node order.
#[utoipa::path(get, operation_id = "list_execution_nodes", path = "/flows/{flow_id}/executions/{execution_id}/nodes",
    params(ExecutionPath),
    responses((status = 200, body = NodeResultList)))]
async fn node_results(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ExecutionPath { flow_id, execution_id }: ExecutionPath,
) -> ApiResult<Json<NodeResultList>> {
    nodes_of(&app, caller.org_id, Some(flow_id), execution_id).await
}

/// Node results of an execution's latest attempt (of the flow `flow_id`, or any of the organization's).
pub async fn nodes_of(
    app: &AppState,
    org_id: OrgId,
    flow_id: Option<FlowId>,
    execution_id: ExecutionId,
) -> ApiResult<Json<NodeResultList>> {
    let mut conn = app.pool.acquire().await?;
    let execution = fetch(&mut conn, org_id, flow_id, execution_id).await?;
    let rows: Vec<sqlx::types::Json<NodeResult>> = sqlx::query_scalar(
        "SELECT result FROM node_results WHERE execution_id = $1 AND attempt = $2 ORDER BY position, node_id",
    )
    .bind(execution_id)
    .bind(execution.attempt)
    .fetch_all(&mut *conn)
    .await?;
    Ok(Json(NodeResultList { items: rows.into_iter().map(|r| r.0).collect() }))
}

/// Requests captured at the execution's own URL (`{{execution.capture_url}}`), newest first; `webhook_id` is null
/// on each, `execution_id` set and `signature` `unverified`.
#[utoipa::path(get, operation_id = "list_execution_captures",
    path = "/flows/{flow_id}/executions/{execution_id}/captures",
    params(ExecutionPath, ListParams),
    responses((status = 200, body = Page<Capture>)))]
async fn execution_captures(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ExecutionPath { flow_id, execution_id }: ExecutionPath,
    params: ListParams,
) -> Listed<Capture> {
    captures_of(&app, caller.org_id, Some(flow_id), execution_id, params).await
}

/// The captures at an execution's own URL (of the flow `flow_id`, or any of the organization's), newest first.
pub async fn captures_of(
    app: &AppState,
    org_id: OrgId,
    flow_id: Option<FlowId>,
    execution_id: ExecutionId,
    params: ListParams,
) -> Listed<Capture> {
    // The execution on the primary (one object by id), its captures on the read replica.
    fetch(&mut *app.pool.acquire().await?, org_id, flow_id, execution_id).await?;
    let mut conn = app.read_pool.acquire().await?;
    let sql = format!(
        "SELECT {CAPTURE_COLUMNS_INLINE} FROM captures
         WHERE organization_id = $1 AND execution_id = $4 AND ($2::uuid IS NULL OR id < $2)
         ORDER BY id DESC LIMIT $3"
    );
    let scope = (org_id, Some(execution_id.into()));
    let page =
        pagination::keyset_page(&mut *conn, sql, scope, &params, |r: CaptureRow| Capture::from(r), |c: &Capture| c.id)
            .await?;
    Ok(Json(page))
}

/// Cancel: queued executions end at once; running ones are stopped by their runner.
#[utoipa::path(post, path = "/flows/{flow_id}/executions/{execution_id}/cancel",
    params(ExecutionPath),
    responses((status = 202, body = Execution), (status = 409)))]
async fn cancel_execution(
    Ctx { app, caller }: Ctx<scope::FlowsExecute>,
    ExecutionPath { flow_id, execution_id }: ExecutionPath,
) -> ApiResult<(StatusCode, Json<Execution>)> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let execution =
        cancel(&mut tx, CancelTarget { org_id: caller.org_id, flow_id: Some(flow_id), execution_id }).await?;
    tx.commit().await?;
    Ok((StatusCode::ACCEPTED, Json(execution)))
}
