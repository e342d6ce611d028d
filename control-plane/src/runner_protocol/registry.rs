//! Runners: registration, listing (online while seen within three heartbeat intervals), removal (its jobs go
//! back to the queue) and heartbeats, which extend the leases of the jobs a runner still holds and tell it which
//! to stop.

use crate::auth::{Caller, scope};
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::pagination::{self, ListParams};
use crate::runner_protocol::{RunnerCaller, check_labels, rescue};
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::ErrorBody;
use hookflow_shared::api::Page;
use hookflow_shared::api::runners::{DEFAULT_WAIT_S, Heartbeat, HeartbeatReply, RegisterRunner, Registered, Runner};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register, list_runners))
        .routes(routes!(get_runner, delete_runner))
        .routes(routes!(heartbeat))
}

const RUNNER_COLUMNS: &str = "id, name, labels, version, max_concurrency, running_jobs, host, metrics, last_seen_at,
    registered_at, last_seen_at > now() - make_interval(secs => $2) AS online";

#[derive(Debug, sqlx::FromRow)]
struct RunnerRow {
    id: Uuid,
    name: String,
    labels: Vec<String>,
    version: String,
    max_concurrency: i32,
    running_jobs: i32,
    host: serde_json::Value,
    metrics: Option<serde_json::Value>,
    last_seen_at: DateTime<Utc>,
    registered_at: DateTime<Utc>,
    online: bool,
}

impl From<RunnerRow> for Runner {
    fn from(r: RunnerRow) -> Self {
        Runner {
            id: r.id,
            name: r.name,
            labels: r.labels,
            version: r.version,
            max_concurrency: r.max_concurrency,
            status: if r.online { "online" } else { "offline" }.into(),
            last_seen_at: r.last_seen_at.into(),
            running_jobs: r.running_jobs,
            host: serde_json::from_value(r.host).unwrap_or_default(),
            metrics: r.metrics.and_then(|m| serde_json::from_value(m).ok()),
            registered_at: r.registered_at.into(),
        }
    }
}

fn offline_after_s(app: &AppState) -> f64 {
    app.settings.heartbeat_interval.as_secs_f64() * 3.0
}

/// Register a runner.
#[utoipa::path(post, path = "/runners", tag = "Runner", request_body = RegisterRunner,
    responses((status = 201, body = Registered), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn register(
    State(app): State<AppState>,
    caller: RunnerCaller,
    ApiJson(body): ApiJson<RegisterRunner>,
) -> Result<(StatusCode, Json<Registered>), ApiError> {
    let name = crate::admin::display_name("name", &body.name)?;
    check_labels("labels", &body.labels)?;
    crate::admin::bounded_text("version", Some(&body.version), 100)?;
    if !(1..=1000).contains(&body.max_concurrency) {
        return Err(ApiError::invalid("invalid field `max_concurrency`: 1 to 1000"));
    }
    if caller.org_id.is_none() {
        // Embedded runners of earlier server runs.
        sqlx::query("DELETE FROM runners WHERE organization_id IS NULL AND last_seen_at < now() - interval '1 hour'")
            .execute(&app.pool)
            .await?;
    }
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO runners (id, organization_id, name, labels, version, max_concurrency, host)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(id)
    .bind(caller.org_id)
    .bind(name)
    .bind(&body.labels)
    .bind(&body.version)
    .bind(i32::try_from(body.max_concurrency).unwrap_or(1))
    .bind(serde_json::to_value(&body.host).unwrap_or_default())
    .execute(&app.pool)
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Registered {
            id,
            heartbeat_interval_s: app.settings.heartbeat_interval.as_secs().max(1),
            poll_timeout_s: DEFAULT_WAIT_S,
            lease_s: app.settings.lease.as_secs().max(1),
        }),
    ))
}

/// The organization's runners.
#[utoipa::path(get, path = "/runners", tag = "Runner", params(ListParams),
    responses((status = 200, body = Page<Runner>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn list_runners(
    State(app): State<AppState>,
    caller: Caller<scope::RunnersRead>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Json<Page<Runner>>, ApiError> {
    let page = params.page::<Uuid>()?;
    let rows: Vec<RunnerRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {RUNNER_COLUMNS} FROM runners WHERE organization_id = $1 AND ($3::uuid IS NULL OR id > $3)
         ORDER BY id LIMIT $4"
    )))
    .bind(caller.org_id)
    .bind(offline_after_s(&app))
    .bind(page.after)
    .bind(page.fetch_limit())
    .fetch_all(&app.pool)
    .await?;
    let items: Vec<Runner> = rows.into_iter().map(Into::into).collect();
    Ok(Json(pagination::finish(items, &page, |r| r.id)))
}

/// One runner.
#[utoipa::path(get, path = "/runners/{id}", tag = "Runner", params(("id" = Uuid, Path)),
    responses((status = 200, body = Runner), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn get_runner(
    State(app): State<AppState>,
    caller: Caller<scope::RunnersRead>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<Runner>, ApiError> {
    let row: Option<RunnerRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {RUNNER_COLUMNS} FROM runners WHERE organization_id = $1 AND id = $3"
    )))
    .bind(caller.org_id)
    .bind(offline_after_s(&app))
    .bind(id)
    .fetch_optional(&app.pool)
    .await?;
    row.map(|r| Json(r.into())).ok_or_else(|| ApiError::not_found("runner"))
}

/// Remove a runner; the jobs it was running go back to the queue.
#[utoipa::path(delete, path = "/runners/{id}", tag = "Runner", params(("id" = Uuid, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn delete_runner(
    State(app): State<AppState>,
    caller: Caller<scope::RunnersWrite>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mut tx = app.pool.begin().await?;
    let deleted = sqlx::query("DELETE FROM runners WHERE organization_id = $1 AND id = $2")
        .bind(caller.org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    if deleted.rows_affected() == 0 {
        return Err(ApiError::not_found("runner"));
    }
    let held: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM executions WHERE organization_id = $1 AND runner_id = $2 AND status = 'running' FOR UPDATE",
    )
    .bind(caller.org_id)
    .bind(id)
    .fetch_all(&mut *tx)
    .await?;
    for execution_id in held {
        rescue::release(&mut tx, execution_id, "runner_removed").await?;
    }
    tx.commit().await?;
    app.queue.wake(caller.org_id);
    Ok(StatusCode::NO_CONTENT)
}

/// Heartbeat: extends the leases of the listed jobs and answers which of them to stop.
#[utoipa::path(post, path = "/runners/{id}/heartbeat", tag = "Runner", params(("id" = Uuid, Path)), request_body = Heartbeat,
    responses((status = 200, body = HeartbeatReply), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn heartbeat(
    State(app): State<AppState>,
    caller: RunnerCaller,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<Heartbeat>,
) -> Result<Json<HeartbeatReply>, ApiError> {
    if body.running_jobs.len() > 10_000 {
        return Err(ApiError::invalid("invalid field `running_jobs`: too many"));
    }
    let seen = sqlx::query(
        "UPDATE runners SET last_seen_at = now(), metrics = COALESCE($3, metrics), running_jobs = $4
         WHERE id = $1 AND organization_id IS NOT DISTINCT FROM $2",
    )
    .bind(id)
    .bind(caller.org_id)
    .bind(body.metrics.as_ref().map(|m| serde_json::to_value(m).unwrap_or_default()))
    .bind(i32::try_from(body.running_jobs.len()).unwrap_or(i32::MAX))
    .execute(&app.pool)
    .await?;
    if seen.rows_affected() == 0 {
        return Err(ApiError::not_found("runner"));
    }
    // Jobs still current for this runner get a longer lease; everything else listed is to be stopped.
    let keep: Vec<Uuid> = sqlx::query_scalar(
        "UPDATE executions e SET lease_expires_at = now() + make_interval(secs => $3)
         FROM jobs j
         WHERE j.id = ANY($1) AND j.runner_id = $2 AND e.id = j.execution_id AND e.job_id = j.id
           AND e.status = 'running' AND NOT e.cancel_requested
         RETURNING j.id",
    )
    .bind(&body.running_jobs)
    .bind(id)
    .bind(app.settings.lease.as_secs_f64())
    .fetch_all(&app.pool)
    .await?;
    let cancel = body.running_jobs.into_iter().filter(|job| !keep.contains(job)).collect();
    Ok(Json(HeartbeatReply { cancel }))
}
