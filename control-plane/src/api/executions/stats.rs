//! `GET /flows/{id}/analytics/executions`: finished executions per bucket (by creation time, UTC) with duration
//! percentiles, empty buckets included.

use crate::api::analytics::{BucketParam, Series, Window};
use crate::api::context::Ctx;
use crate::auth::scope;
use crate::error::ApiResult;
use crate::extract::{ApiPath, ApiQuery, Id};
use crate::state::AppState;
use axum::Json;
use chrono::{DateTime, Utc};
use hookflow_shared::FlowId;
use hookflow_shared::api::analytics::{ExecutionPoint, ExecutionStats};
use std::collections::HashMap;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(execution_stats))
}

type BucketRow = (DateTime<Utc>, i64, i64, Option<f64>, Option<f64>);

/// Succeeded and failed executions over time, with p50 and p95 durations.
#[utoipa::path(get, operation_id = "get_flow_execution_analytics", path = "/flows/{id}/analytics/executions", params(Id, Window, BucketParam),
    responses((status = 200, body = ExecutionStats)))]
async fn execution_stats(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ApiPath(flow_id): ApiPath<FlowId>,
    ApiQuery(window): ApiQuery<Window>,
    ApiQuery(bucket): ApiQuery<BucketParam>,
) -> ApiResult<Json<ExecutionStats>> {
    // The flow on the primary (one object by id: just made, it is there); its executions on the read replica.
    crate::api::flows::model::ensure_exists(&mut *app.pool.acquire().await?, caller.org_id, flow_id).await?;
    let mut conn = app.read_pool.acquire().await?;
    let series = Series::new(&window, bucket)?;
    let rows: Vec<BucketRow> = sqlx::query_as(
        "SELECT date_trunc($3, created_at, 'UTC') AS t,
                count(*) FILTER (WHERE status = 'succeeded'),
                count(*) FILTER (WHERE status IN ('failed', 'error')),
                percentile_cont(0.5) WITHIN GROUP (ORDER BY (extract(epoch FROM finished_at - started_at) * 1000)::float8)
                    FILTER (WHERE finished_at IS NOT NULL AND started_at IS NOT NULL),
                percentile_cont(0.95) WITHIN GROUP (ORDER BY (extract(epoch FROM finished_at - started_at) * 1000)::float8)
                    FILTER (WHERE finished_at IS NOT NULL AND started_at IS NOT NULL)
         FROM executions
         WHERE organization_id = $1 AND flow_id = $2 AND created_at >= $4 AND created_at < $5
           AND status IN ('succeeded', 'failed', 'error')
         GROUP BY 1",
    )
    .bind(caller.org_id)
    .bind(flow_id)
    .bind(series.unit)
    .bind(series.from)
    .bind(series.to)
    .fetch_all(&mut *conn)
    .await?;
    let by_bucket: HashMap<DateTime<Utc>, BucketRow> = rows.into_iter().map(|r| (r.0, r)).collect();
    let points = series
        .starts
        .iter()
        .map(|t| {
            let row = by_bucket.get(t);
            ExecutionPoint {
                t: (*t).into(),
                succeeded: row.map_or(0, |r| r.1),
                failed: row.map_or(0, |r| r.2),
                p50_ms: row.and_then(|r| r.3),
                p95_ms: row.and_then(|r| r.4),
            }
        })
        .collect();
    Ok(Json(ExecutionStats { bucket: series.bucket, from: series.from.into(), to: series.to.into(), points }))
}
