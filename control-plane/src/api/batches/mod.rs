//! Batches of data-driven runs (issue #52): a launch with `rows` makes one (`launch`, called by the launch
//! routes); here a batch's summary, its executions by row, and the rerun of its failed rows. A batch of another
//! organization is 404.

pub mod launch;

use crate::api::context::Ctx;
use crate::auth::scope;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiPath, ApiQuery, Id, parse_json};
use crate::pagination::{self, ListParams, Listed};
use crate::queue::batch::rerun_failed;
use crate::queue::row::{EXECUTION_COLUMNS, ExecutionRow, into_executions};
use crate::state::AppState;
use axum::Json;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use hookflow_shared::api::Page;
use hookflow_shared::api::batches::{Batch, LaunchedBatch, Rerun};
use hookflow_shared::api::executions::{Execution, ExecutionStatus, Trigger};
use hookflow_shared::{BatchId, FlowId};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_batch)).routes(routes!(batch_executions)).routes(routes!(rerun_batch))
}

#[derive(Debug, sqlx::FromRow)]
struct BatchRow {
    id: BatchId,
    flow_id: Option<FlowId>,
    total: i32,
    rerun_of: Option<BatchId>,
    created_at: DateTime<Utc>,
    queued: i64,
    running: i64,
    succeeded: i64,
    failed: i64,
    cancelled: i64,
    last_finished_at: Option<DateTime<Utc>>,
}

fn count(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

impl From<BatchRow> for Batch {
    fn from(r: BatchRow) -> Self {
        let open = r.queued + r.running > 0;
        Batch {
            id: r.id,
            flow_id: r.flow_id,
            total: u32::try_from(r.total).unwrap_or(0),
            queued: count(r.queued),
            running: count(r.running),
            succeeded: count(r.succeeded),
            failed: count(r.failed),
            cancelled: count(r.cancelled),
            rerun_of: r.rerun_of,
            created_at: r.created_at.into(),
            finished_at: if open { None } else { r.last_finished_at.or(Some(r.created_at)).map(Into::into) },
        }
    }
}

/// A batch's summary: its executions counted by status (by the batch index, one pass over its rows).
#[utoipa::path(get, path = "/batches/{id}", params(Id), responses((status = 200, body = Batch)))]
async fn get_batch(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ApiPath(batch_id): ApiPath<BatchId>,
) -> ApiResult<Json<Batch>> {
    let row: Option<BatchRow> = sqlx::query_as(
        "SELECT b.id, b.flow_id, b.total, b.rerun_of, b.created_at, c.*
         FROM batches b CROSS JOIN LATERAL (
             SELECT count(*) FILTER (WHERE e.status = 'queued') AS queued,
                 count(*) FILTER (WHERE e.status = 'running') AS running,
                 count(*) FILTER (WHERE e.status = 'succeeded') AS succeeded,
                 count(*) FILTER (WHERE e.status IN ('failed', 'error')) AS failed,
                 count(*) FILTER (WHERE e.status = 'cancelled') AS cancelled,
                 max(e.finished_at) AS last_finished_at
             FROM executions e WHERE e.batch_id = b.id AND e.organization_id = b.organization_id) c
         WHERE b.id = $1 AND b.organization_id = $2",
    )
    .bind(batch_id)
    .bind(caller.org_id)
    .fetch_optional(&mut *app.pool.acquire().await?)
    .await?;
    row.map(|r| Json(r.into())).ok_or_else(|| ApiError::not_found("batch"))
}

/// The query of a batch's executions.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BatchExecutionParams {
    /// Only executions in this status.
    #[param(value_type = Option<ExecutionStatus>)]
    pub status: Option<String>,
    /// Items per page: default 50, values above 100 are clamped to 100.
    #[param(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// A batch's executions by row (`iteration`, from 0), optionally of one status.
#[utoipa::path(get, operation_id = "list_batch_executions", path = "/batches/{id}/executions",
    params(Id, BatchExecutionParams), responses((status = 200, body = Page<Execution>)))]
async fn batch_executions(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ApiPath(batch_id): ApiPath<BatchId>,
    ApiQuery(params): ApiQuery<BatchExecutionParams>,
) -> Listed<Execution> {
    let status = match params.status.as_deref() {
        None => None,
        Some(s) => Some(s.parse::<ExecutionStatus>().map_err(|_| {
            ApiError::invalid("invalid field `status`: one of queued, running, succeeded, failed, cancelled, error")
        })?),
    };
    let page = ListParams { limit: params.limit, cursor: params.cursor }.page::<i32>()?;
    let mut conn = app.pool.acquire().await?;
    let exists: Option<BatchId> = sqlx::query_scalar("SELECT id FROM batches WHERE id = $1 AND organization_id = $2")
        .bind(batch_id)
        .bind(caller.org_id)
        .fetch_optional(&mut *conn)
        .await?;
    if exists.is_none() {
        return Err(ApiError::not_found("batch"));
    }
    let rows: Vec<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions e
         WHERE e.batch_id = $1 AND e.organization_id = $2 AND ($3::text IS NULL OR e.status = $3)
             AND ($4::int IS NULL OR e.iteration > $4)
         ORDER BY e.iteration LIMIT $5"
    )))
    .bind(batch_id)
    .bind(caller.org_id)
    .bind(status.map(ExecutionStatus::as_str))
    .bind(page.after)
    .bind(page.fetch_limit())
    .fetch_all(&mut *conn)
    .await?;
    let items = into_executions(rows)?;
    Ok(Json(pagination::finish(items, &page, |e: &Execution| e.iteration.unwrap_or(0))?))
}

/// Run a batch's failed rows again (`failed` or `error`) as a new batch; each keeps its `iteration`.
#[utoipa::path(post, path = "/batches/{id}/rerun", params(Id), request_body = Rerun,
    responses((status = 201, body = LaunchedBatch), (status = 409, description = "No row of the batch failed")))]
async fn rerun_batch(
    Ctx { app, caller }: Ctx<scope::FlowsExecute>,
    ApiPath(batch_id): ApiPath<BatchId>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<LaunchedBatch>)> {
    let _rerun: Rerun = if body.iter().all(u8::is_ascii_whitespace) { Rerun::default() } else { parse_json(&body)? };
    let trigger = crate::api::executions::launch::trigger(&headers, Trigger::Api);
    let _turn = app.shares.take(caller.org_id).await?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let launched = rerun_failed(&mut tx, caller.org_id, batch_id, trigger, app.replica).await?;
    tx.commit().await?;
    app.queue.wake(caller.org_id);
    Ok((StatusCode::CREATED, Json(launched)))
}
