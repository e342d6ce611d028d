//! Runners: registration, listing (online while seen within three heartbeat intervals), removal (its jobs go
//! back to the queue) and heartbeats, which extend the leases of the jobs a runner still holds and tell it which
//! to stop.

use crate::api::context::Ctx;
use crate::api::runner_protocol::caller::RunnerCaller;
use crate::auth::scope;
use crate::db::owned::{self, Owned};
use crate::error::{ApiError, ApiResult, Created, to_json};
use crate::extract::{ApiJson, Id};
use crate::pagination::{self, ListParams, Listed};
use crate::queue::{lease, release};
use crate::state::AppState;
use crate::validate::field;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::RunnerId;
use hookflow_shared::api::Page;
use hookflow_shared::api::fields::RunnerText;
use hookflow_shared::api::runners::{
    DEFAULT_WAIT_S, Heartbeat, HeartbeatReply, Host, Metrics, RegisterRunner, Registered, Runner,
};
use hookflow_shared::wire::runner_route;
use sqlx::types::Json as SqlJson;
use utoipa_axum::{router::OpenApiRouter, routes};

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
    id: RunnerId,
    name: String,
    labels: Vec<String>,
    version: String,
    max_concurrency: i32,
    running_jobs: i32,
    host: SqlJson<Host>,
    metrics: Option<SqlJson<Metrics>>,
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
            host: r.host.0,
            metrics: r.metrics.map(|m| m.0),
            registered_at: r.registered_at.into(),
        }
    }
}

fn offline_after_s(app: &AppState) -> f64 {
    app.settings.heartbeat_interval.as_secs_f64() * 3.0
}

/// CPU counts and byte sizes as PostgreSQL and JSON clients hold them: `integer` and `bigint`.
fn check_sizes(cpus: u32, bytes: u64, field: &str) -> ApiResult<()> {
    if i32::try_from(cpus).is_err() {
        return Err(ApiError::invalid("invalid field `host.cpus`: at most 2147483647"));
    }
    if i64::try_from(bytes).is_err() {
        return Err(ApiError::invalid(format!("invalid field `{field}`: at most 9223372036854775807")));
    }
    Ok(())
}

/// Register a runner.
#[utoipa::path(post, operation_id = "register_runner", path = runner_route::RUNNERS, request_body = RegisterRunner,
    responses((status = 201, body = Registered)))]
async fn register(
    State(app): State<AppState>,
    caller: RunnerCaller,
    ApiJson(body): ApiJson<RegisterRunner>,
) -> Created<Registered> {
    let host = &body.host;
    // The host is stored and read back as it came (`Host` parses nothing): its texts are checked here.
    for (name, text) in [("host.hostname", &host.hostname), ("host.os", &host.os), ("host.arch", &host.arch)] {
        field::<RunnerText>(name, text.as_str())?;
    }
    check_sizes(host.cpus, host.memory_bytes, "host.memory_bytes")?;
    if !(1..=1000).contains(&body.max_concurrency) {
        return Err(ApiError::invalid("invalid field `max_concurrency`: 1 to 1000"));
    }
    if caller.org_id.is_none() {
        // Embedded runners of earlier server runs.
        sqlx::query("DELETE FROM runners WHERE organization_id IS NULL AND last_seen_at < now() - interval '1 hour'")
            .execute(&app.pool)
            .await?;
    }
    let id = RunnerId::now_v7();
    sqlx::query(
        "INSERT INTO runners (id, organization_id, name, labels, version, max_concurrency, host)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(id)
    .bind(caller.org_id)
    .bind(body.name.as_str())
    .bind(&*body.labels)
    .bind(body.version.as_str())
    .bind(i32::try_from(body.max_concurrency).unwrap_or(1))
    .bind(to_json(&body.host)?)
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
#[utoipa::path(get, path = runner_route::RUNNERS, params(ListParams), responses((status = 200, body = Page<Runner>)))]
async fn list_runners(Ctx { app, caller }: Ctx<scope::RunnersRead>, params: ListParams) -> Listed<Runner> {
    let page = params.page::<RunnerId>()?;
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
    Ok(Json(pagination::finish(items, &page, |r| r.id)?))
}

/// One runner.
#[utoipa::path(get, path = runner_route::RUNNER, params(Id), responses((status = 200, body = Runner)))]
async fn get_runner(Ctx { app, caller }: Ctx<scope::RunnersRead>, Id(id): Id<RunnerId>) -> ApiResult<Json<Runner>> {
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
#[utoipa::path(delete, path = runner_route::RUNNER, params(Id), responses((status = 204)))]
async fn delete_runner(Ctx { app, caller }: Ctx<scope::RunnersWrite>, Id(id): Id<RunnerId>) -> ApiResult<StatusCode> {
    let mut tx = app.pool.begin().await?;
    owned::delete(&mut *tx, Owned::Runner, caller.org_id, id).await?;
    release::release_runner(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    app.seen_runners.forget(Some(caller.org_id), id);
    app.queue.wake(caller.org_id);
    Ok(StatusCode::NO_CONTENT)
}

/// Heartbeat: extends the leases of the listed jobs and answers which of them to stop.
#[utoipa::path(post, operation_id = "heartbeat_runner", path = runner_route::HEARTBEAT, params(Id), request_body = Heartbeat,
    responses((status = 200, body = HeartbeatReply)))]
async fn heartbeat(
    State(app): State<AppState>,
    caller: RunnerCaller,
    Id(id): Id<RunnerId>,
    ApiJson(body): ApiJson<Heartbeat>,
) -> ApiResult<Json<HeartbeatReply>> {
    if body.running_jobs.len() > 10_000 {
        return Err(ApiError::invalid("invalid field `running_jobs`: at most 10000"));
    }
    if let Some(metrics) = &body.metrics {
        check_sizes(0, metrics.memory_used_bytes, "metrics.memory_used_bytes")?;
    }
    let seen = sqlx::query(
        "UPDATE runners SET last_seen_at = now(), metrics = COALESCE($3, metrics), running_jobs = $4
         WHERE id = $1 AND organization_id IS NOT DISTINCT FROM $2",
    )
    .bind(id)
    .bind(caller.org_id)
    .bind(body.metrics.as_ref().map(to_json).transpose()?)
    .bind(i32::try_from(body.running_jobs.len()).unwrap_or(i32::MAX))
    .execute(&app.pool)
    .await?;
    if seen.rows_affected() == 0 {
        return Err(ApiError::not_found("runner"));
    }
    let cancel = lease::extend(&app.pool, id, body.running_jobs, app.settings.lease.as_secs_f64()).await?;
    Ok(Json(HeartbeatReply { cancel }))
}
