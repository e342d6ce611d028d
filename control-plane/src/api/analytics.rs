//! Analytics from the per-minute capture counters (never a scan of the captures): volume over time in minute,
//! hour or day buckets (UTC, empty buckets as 0), method breakdown, and the organization overview.

use crate::api::context::Ctx;
use crate::api::webhooks::endpoints::ensure_exists;
use crate::auth::scope;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiQuery, Id};
use crate::state::AppState;
use axum::Json;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use hookflow_shared::api::analytics::{
    Bucket, CaptureTotals, EndpointCount, MethodBreakdown, MethodCount, Overview, Volume, VolumePoint,
};
use hookflow_shared::{Timestamp, WebhookId};
use std::collections::{BTreeMap, HashMap};
use utoipa_axum::{router::OpenApiRouter, routes};

/// Most points one volume answer holds.
const MAX_POINTS: i64 = 10_000;
/// Execution statuses, reported with zeros included.
const EXECUTION_STATUSES: [&str; 6] = ["queued", "running", "succeeded", "failed", "cancelled", "error"];

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(volume)).routes(routes!(methods)).routes(routes!(overview))
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Window {
    /// Start (RFC 3339); default `to` - 24 h.
    #[param(value_type = Option<String>, format = DateTime)]
    pub from: Option<Timestamp>,
    /// End, exclusive (RFC 3339); default now.
    #[param(value_type = Option<String>, format = DateTime)]
    pub to: Option<Timestamp>,
}

/// The bucket width of a time series, beside its `Window`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BucketParam {
    /// `minute`, `hour` (default) or `day`.
    #[param(value_type = Option<Bucket>)]
    pub bucket: Option<Bucket>,
}

impl Window {
    /// The window, widened to whole minutes (the counters' resolution).
    fn bounds(&self) -> ApiResult<(DateTime<Utc>, DateTime<Utc>)> {
        let to = self.to.map_or_else(Utc::now, |t| t.0);
        let from = self.from.map_or(to - TimeDelta::hours(24), |t| t.0);
        if from >= to {
            return Err(ApiError::invalid("`from` must be before `to`"));
        }
        let minute = TimeDelta::minutes(1);
        let from = from.duration_trunc(minute).unwrap_or(from);
        let to_trunc = to.duration_trunc(minute).unwrap_or(to);
        let to = if to_trunc == to { to } else { to_trunc + minute };
        Ok((from, to))
    }
}

fn step(bucket: Bucket) -> (TimeDelta, &'static str) {
    match bucket {
        Bucket::Minute => (TimeDelta::minutes(1), "minute"),
        Bucket::Hour => (TimeDelta::hours(1), "hour"),
        Bucket::Day => (TimeDelta::days(1), "day"),
    }
}

/// The buckets of a time series: the window widened to whole minutes, the bucket width and its SQL unit, and
/// the start of every bucket. Refuses windows of more than `MAX_POINTS` buckets.
#[derive(Debug)]
pub struct Series {
    pub bucket: Bucket,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub unit: &'static str,
    pub starts: Vec<DateTime<Utc>>,
}

impl Series {
    pub fn new(window: &Window, BucketParam { bucket }: BucketParam) -> ApiResult<Self> {
        let bucket = bucket.unwrap_or_default();
        let (from, to) = window.bounds()?;
        let (width, unit) = step(bucket);
        let first = from.duration_trunc(width).unwrap_or(from);
        if (to - first).num_seconds() / width.num_seconds() > MAX_POINTS {
            return Err(ApiError::invalid(format!(
                "that window holds more than {MAX_POINTS} {unit} buckets; use a wider bucket"
            )));
        }
        let mut starts = Vec::new();
        let mut t = first;
        while t < to {
            starts.push(t);
            t += width;
        }
        Ok(Self { bucket, from, to, unit, starts })
    }
}

/// Capture volume over time.
#[utoipa::path(get, operation_id = "get_webhook_volume_analytics", path = "/webhooks/{id}/analytics/volume", params(Id, Window, BucketParam),
    responses((status = 200, body = Volume)))]
async fn volume(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    Id(id): Id<WebhookId>,
    ApiQuery(window): ApiQuery<Window>,
    ApiQuery(bucket): ApiQuery<BucketParam>,
) -> ApiResult<Json<Volume>> {
    ensure_exists(&app.pool, caller.org_id, id).await?;
    let series = Series::new(&window, bucket)?;
    let rows: Vec<(DateTime<Utc>, i64, i64, i64)> = sqlx::query_as(
        "SELECT date_trunc($3, minute, 'UTC') AS t, sum(count)::bigint, sum(valid)::bigint, sum(invalid)::bigint
         FROM capture_counts
         WHERE webhook_id = $1 AND organization_id = $2 AND minute >= $4 AND minute < $5 GROUP BY 1",
    )
    .bind(id)
    .bind(caller.org_id)
    .bind(series.unit)
    .bind(series.from)
    .bind(series.to)
    .fetch_all(&app.read_pool)
    .await?;
    let counts: HashMap<DateTime<Utc>, (i64, i64, i64)> =
        rows.into_iter().map(|(t, count, valid, invalid)| (t, (count, valid, invalid))).collect();
    let points: Vec<VolumePoint> = series
        .starts
        .iter()
        .map(|t| {
            let (count, valid, invalid) = counts.get(t).copied().unwrap_or_default();
            VolumePoint { t: (*t).into(), count, valid, invalid }
        })
        .collect();
    let total = points.iter().map(|p| p.count).sum();
    Ok(Json(Volume { bucket: series.bucket, from: series.from.into(), to: series.to.into(), total, points }))
}

/// Captures by HTTP method.
#[utoipa::path(get, operation_id = "get_webhook_method_analytics", path = "/webhooks/{id}/analytics/methods", params(Id, Window),
    responses((status = 200, body = MethodBreakdown)))]
async fn methods(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    Id(id): Id<WebhookId>,
    ApiQuery(params): ApiQuery<Window>,
) -> ApiResult<Json<MethodBreakdown>> {
    ensure_exists(&app.pool, caller.org_id, id).await?;
    let (from, to) = params.bounds()?;
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT method, sum(count)::bigint FROM capture_counts
         WHERE webhook_id = $1 AND organization_id = $2 AND minute >= $3 AND minute < $4
         GROUP BY method ORDER BY 2 DESC, 1",
    )
    .bind(id)
    .bind(caller.org_id)
    .bind(from)
    .bind(to)
    .fetch_all(&app.read_pool)
    .await?;
    let total: i64 = rows.iter().map(|r| r.1).sum();
    let methods = rows
        .into_iter()
        .map(|(method, count)| MethodCount {
            method,
            count,
            share: if total == 0 { 0.0 } else { count as f64 / total as f64 },
        })
        .collect();
    Ok(Json(MethodBreakdown { from: from.into(), to: to.into(), total, methods }))
}

/// Organization totals: captures per endpoint and executions by status.
#[utoipa::path(get, operation_id = "get_analytics_overview", path = "/analytics/overview", params(Window), responses((status = 200, body = Overview)))]
async fn overview(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiQuery(params): ApiQuery<Window>,
) -> ApiResult<Json<Overview>> {
    let (from, to) = params.bounds()?;
    let rows: Vec<(WebhookId, String, i64)> = sqlx::query_as(
        "SELECT w.id, w.name, COALESCE(sum(c.count), 0)::bigint FROM webhooks w
         LEFT JOIN capture_counts c ON c.webhook_id = w.id AND c.minute >= $2 AND c.minute < $3
         WHERE w.organization_id = $1 GROUP BY w.id, w.name ORDER BY 3 DESC, w.name",
    )
    .bind(caller.org_id)
    .bind(from)
    .bind(to)
    .fetch_all(&app.read_pool)
    .await?;
    let endpoints: Vec<EndpointCount> =
        rows.into_iter().map(|(webhook_id, name, count)| EndpointCount { webhook_id, name, count }).collect();
    let total = endpoints.iter().map(|e| e.count).sum();
    let counted: Vec<(String, i64)> = sqlx::query_as(
        "SELECT status, count(*) FROM executions
         WHERE organization_id = $1 AND created_at >= $2 AND created_at < $3 GROUP BY status",
    )
    .bind(caller.org_id)
    .bind(from)
    .bind(to)
    .fetch_all(&app.read_pool)
    .await?;
    let mut executions: BTreeMap<String, i64> = EXECUTION_STATUSES.iter().map(|s| ((*s).to_owned(), 0)).collect();
    executions.extend(counted);
    Ok(Json(Overview { from: from.into(), to: to.into(), captures: CaptureTotals { total, endpoints }, executions }))
}
