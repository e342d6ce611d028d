//! The routes under `/executions`: the organization's executions of every flow and of inline definitions (list,
//! filtered), running an inline definition (`inline`), and one execution by its id alone (read, node results,
//! stream, cancel, captures) as the routes under `/flows/{flow_id}/executions/...` answer for a flow's.

use crate::api::context::Ctx;
use crate::api::executions::inline::__path_run_inline;
use crate::api::executions::inline::run_inline;
use crate::api::executions::path::ExecutionIdPath;
use crate::api::executions::read::{captures_of, nodes_of};
use crate::api::flows::model::FLOW_BODY_LIMIT;
use crate::auth::scope;
use crate::error::ApiResult;
use crate::extract::ApiQuery;
use crate::pagination::{self, ListParams, Listed};
use crate::queue::finish::{CancelTarget, cancel};
use crate::queue::row::{EXECUTION_COLUMNS, ExecutionRow, fetch, into_executions};
use crate::state::AppState;
use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use hookflow_shared::api::Page;
use hookflow_shared::api::executions::{Execution, ExecutionStatus, NodeResultList, Trigger};
use hookflow_shared::api::flows_as_code::SourceKind;
use hookflow_shared::api::webhooks::Capture;
use hookflow_shared::wire::LastEventIdHeader;
use hookflow_shared::{BatchId, ExecutionId, FlowId};
use std::convert::Infallible;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    let routes = OpenApiRouter::new()
        .routes(routes!(list_all_executions, run_inline))
        .routes(routes!(get_any_execution))
        .routes(routes!(any_execution_nodes))
        .routes(routes!(stream_any_execution))
        .routes(routes!(cancel_any_execution))
        .routes(routes!(any_execution_captures));
    crate::api::routing::merged([routes], FLOW_BODY_LIMIT)
}

/// `GET /executions` filters.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AllExecutionsParams {
    /// Only executions of this flow.
    pub flow_id: Option<FlowId>,
    /// `inline` (definitions sent to `POST /executions`) or `stored` (flows' drafts and versions).
    pub source: Option<SourceKind>,
    /// Only the rows of this batch (a data-driven launch, issue #52).
    pub batch_id: Option<BatchId>,
    /// Only executions launched so.
    pub trigger: Option<Trigger>,
    pub status: Option<ExecutionStatus>,
    /// Items per page: default 50, values above 100 are clamped to 100.
    #[param(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// **Added.** The organization's executions (of flows and inline definitions), newest first, filtered.
#[utoipa::path(get, operation_id = "list_all_executions", path = "/executions", params(AllExecutionsParams),
    responses((status = 200, body = Page<Execution>)))]
async fn list_all_executions(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ApiQuery(params): ApiQuery<AllExecutionsParams>,
) -> Listed<Execution> {
    let page = ListParams { limit: params.limit, cursor: params.cursor }.page::<ExecutionId>()?;
    let mut conn = app.read_pool.acquire().await?;
    let rows: Vec<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions e
         WHERE e.organization_id = $1 AND ($2::uuid IS NULL OR e.id < $2)
           AND ($4::uuid IS NULL OR e.flow_id = $4)
           AND ($5::text IS NULL OR ($5 = 'inline') = (e.flow_id IS NULL))
           AND ($6::text IS NULL OR e.trigger = $6)
           AND ($7::text IS NULL OR e.status = $7)
           AND ($8::uuid IS NULL OR e.batch_id = $8)
         ORDER BY e.id DESC LIMIT $3"
    )))
    .bind(caller.org_id)
    .bind(page.after)
    .bind(page.fetch_limit())
    .bind(params.flow_id)
    .bind(params.source.map(SourceKind::as_str))
    .bind(params.trigger.map(Trigger::as_str))
    .bind(params.status.map(|s| s.as_str()))
    .bind(params.batch_id)
    .fetch_all(&mut *conn)
    .await?;
    let mut items = into_executions(rows)?;
    crate::api::executions::waiting::fill(&app, &mut conn, caller.org_id, &mut items).await?;
    Ok(Json(pagination::finish(items, &page, |e| e.id)?))
}

/// **Added.** One execution, of a flow or of an inline definition.
#[utoipa::path(get, operation_id = "get_any_execution", path = "/executions/{execution_id}",
    params(ExecutionIdPath), responses((status = 200, body = Execution)))]
async fn get_any_execution(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ExecutionIdPath { execution_id }: ExecutionIdPath,
) -> ApiResult<Json<Execution>> {
    let mut conn = app.pool.acquire().await?;
    let mut execution = fetch(&mut conn, caller.org_id, None, execution_id).await?;
    let one = std::slice::from_mut(&mut execution);
    crate::api::executions::waiting::fill(&app, &mut conn, caller.org_id, one).await?;
    Ok(Json(execution))
}

/// **Added.** Node results of the latest attempt, in node order.
#[utoipa::path(get, operation_id = "list_any_execution_nodes", path = "/executions/{execution_id}/nodes",
    params(ExecutionIdPath), responses((status = 200, body = NodeResultList)))]
async fn any_execution_nodes(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ExecutionIdPath { execution_id }: ExecutionIdPath,
) -> ApiResult<Json<NodeResultList>> {
    nodes_of(&app, caller.org_id, None, execution_id).await
}

/// **Added.** Live events of an execution (SSE), as `/flows/{flow_id}/executions/{execution_id}/stream`.
#[utoipa::path(get, operation_id = "stream_any_execution", path = "/executions/{execution_id}/stream",
    params(ExecutionIdPath, LastEventIdHeader),
    responses((status = 200, description = "text/event-stream of `execution.status`, `node.started`, `node.completed` \
            and a final `execution.completed`", body = hookflow_shared::api::documents::ExecutionEventStream,
            content_type = "text/event-stream")))]
async fn stream_any_execution(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ExecutionIdPath { execution_id }: ExecutionIdPath,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    crate::api::executions::stream::open(app, &caller, None, execution_id, headers).await
}

/// **Added.** Cancel: queued executions end at once; running ones are stopped by their runner.
#[utoipa::path(post, operation_id = "cancel_any_execution", path = "/executions/{execution_id}/cancel",
    params(ExecutionIdPath), responses((status = 202, body = Execution), (status = 409)))]
async fn cancel_any_execution(
    Ctx { app, caller }: Ctx<scope::FlowsExecute>,
    ExecutionIdPath { execution_id }: ExecutionIdPath,
) -> ApiResult<(StatusCode, Json<Execution>)> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let execution = cancel(&mut tx, CancelTarget { org_id: caller.org_id, flow_id: None, execution_id }).await?;
    tx.commit().await?;
    Ok((StatusCode::ACCEPTED, Json(execution)))
}

/// **Added.** Requests captured at the execution's own URL, newest first.
#[utoipa::path(get, operation_id = "list_any_execution_captures", path = "/executions/{execution_id}/captures",
    params(ExecutionIdPath, ListParams), responses((status = 200, body = Page<Capture>)))]
async fn any_execution_captures(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ExecutionIdPath { execution_id }: ExecutionIdPath,
    params: ListParams,
) -> Listed<Capture> {
    captures_of(&app, caller.org_id, None, execution_id, params).await
}
