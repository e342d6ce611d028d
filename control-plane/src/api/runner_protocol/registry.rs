//! Runners: registration, listing (online while seen within three heartbeat intervals; the server's embedded
//! runners among the organization's own, as the organization's part of them), removal (its jobs go back to the
//! queue; never an embedded runner) and heartbeats, which extend the leases of the jobs a runner still holds and
//! tell it which to stop.

use crate::api::context::Ctx;
use crate::api::runner_protocol::caller::RunnerCaller;
use crate::auth::scope;
use crate::db::owned::{self, Owned};
use crate::error::{ApiError, ApiResult, Created, to_json};
use crate::extract::{ApiJson, Id};
use crate::pagination::{self, ListParams, Listed};
use crate::queue::heartbeat::Beat;
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
    DEFAULT_WAIT_S, Deregister, Heartbeat, HeartbeatReply, Host, Metrics, RegisterRunner, Registered, Runner,
};
use hookflow_shared::wire::runner_route;
use sqlx::types::Json as SqlJson;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register, list_runners))
        .routes(routes!(get_runner, delete_runner))
        .routes(routes!(heartbeat))
        .routes(routes!(deregister))
}

/// A runner as the organization `$1` sees it (`$2`: seconds after which a runner is offline, `$3`: the slots one
/// organization may hold on an embedded runner). An embedded runner (no organization: the server's own, serving
/// every organization) shows this organization's part of it only: the slots it may hold there, its own jobs
/// running there, and neither its host nor its metrics (a machine every tenant shares).
const RUNNER_COLUMNS: &str = "id, name, labels, version,
    CASE WHEN organization_id IS NULL THEN LEAST(max_concurrency, $3) ELSE max_concurrency END AS max_concurrency,
    CASE WHEN organization_id IS NULL
        THEN (SELECT count(*)::int FROM executions e
              WHERE e.organization_id = $1 AND e.status = 'running' AND e.runner_id = runners.id)
        ELSE running_jobs END AS running_jobs,
    CASE WHEN organization_id IS NULL THEN NULL ELSE host END AS host,
    CASE WHEN organization_id IS NULL THEN NULL ELSE metrics END AS metrics, last_seen_at,
    registered_at, last_seen_at > now() - make_interval(secs => $2) AS online";

#[derive(Debug, sqlx::FromRow)]
struct RunnerRow {
    id: RunnerId,
    name: String,
    labels: Vec<String>,
    version: String,
    max_concurrency: i32,
    running_jobs: i32,
    host: Option<SqlJson<Host>>,
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
            host: r.host.map(|h| h.0),
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

/// Slots one organization may hold on an embedded runner.
fn embedded_org_slots(app: &AppState) -> i32 {
    i32::try_from(app.settings.embedded_runner.org_slots.max(1)).unwrap_or(i32::MAX)
}

/// The organization's runners, and the server's embedded runners while they are online.
#[utoipa::path(get, path = runner_route::RUNNERS, params(ListParams), responses((status = 200, body = Page<Runner>)))]
async fn list_runners(Ctx { app, caller }: Ctx<scope::RunnersRead>, params: ListParams) -> Listed<Runner> {
    let page = params.page::<RunnerId>()?;
    // Embedded runners of earlier server runs stay offline until the next start removes them: not listed.
    let rows: Vec<RunnerRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {RUNNER_COLUMNS} FROM runners
         WHERE (organization_id = $1
                OR (organization_id IS NULL AND last_seen_at > now() - make_interval(secs => $2)))
           AND ($4::uuid IS NULL OR id > $4)
         ORDER BY id LIMIT $5"
    )))
    .bind(caller.org_id)
    .bind(offline_after_s(&app))
    .bind(embedded_org_slots(&app))
    .bind(page.after)
    .bind(page.fetch_limit())
    .fetch_all(&app.pool)
    .await?;
    let items: Vec<Runner> = rows.into_iter().map(Into::into).collect();
    Ok(Json(pagination::finish(items, &page, |r| r.id)?))
}

/// One runner: the organization's, or an embedded runner of the server (which runs every organization's flows).
#[utoipa::path(get, path = runner_route::RUNNER, params(Id), responses((status = 200, body = Runner)))]
async fn get_runner(Ctx { app, caller }: Ctx<scope::RunnersRead>, Id(id): Id<RunnerId>) -> ApiResult<Json<Runner>> {
    let row: Option<RunnerRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {RUNNER_COLUMNS} FROM runners
         WHERE (organization_id = $1 OR organization_id IS NULL) AND id = $4"
    )))
    .bind(caller.org_id)
    .bind(offline_after_s(&app))
    .bind(embedded_org_slots(&app))
    .bind(id)
    .fetch_optional(&app.pool)
    .await?;
    row.map(|r| Json(r.into())).ok_or_else(|| ApiError::not_found("runner"))
}

/// Remove a runner; the jobs it was running go back to the queue. The server's embedded runner is not the
/// organization's to remove: 409, and it keeps running (the operator turns it off with `--embedded-runner off`).
#[utoipa::path(delete, path = runner_route::RUNNER, params(Id), responses((status = 204),
    (status = 409, description = "An embedded runner of the server: it is not removed")))]
async fn delete_runner(Ctx { app, caller }: Ctx<scope::RunnersWrite>, Id(id): Id<RunnerId>) -> ApiResult<StatusCode> {
    let embedded: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM runners WHERE id = $1 AND organization_id IS NULL)")
            .bind(id)
            .fetch_one(&app.pool)
            .await?;
    if embedded {
        return Err(ApiError::conflict(
            "this is the server's embedded runner, which runs every organization's flows: it cannot be removed \
             through the API (the operator turns it off with `--embedded-runner off`)",
        ));
    }
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    owned::delete(&mut *tx, Owned::Runner, caller.org_id, id).await?;
    release::release_runner(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    app.seen_runners.forget(Some(caller.org_id), id);
    app.queue.wake(caller.org_id);
    Ok(StatusCode::NO_CONTENT)
}

/// A runner leaves (`--max-jobs` reached, idle for `--idle-exit-s`, drained after SIGTERM): its row is deleted
/// and whatever it still holds (a claim it never received, a job abandoned after its grace period) goes back to
/// the queue at once, so `GET /runners`, the pools' counts and the queue agree without waiting for a lease.
#[utoipa::path(post, operation_id = "deregister_runner", path = runner_route::DEREGISTER, request_body = Deregister,
    responses((status = 204), (status = 404, description = "No such runner of the key's organization")))]
async fn deregister(
    State(app): State<AppState>,
    caller: RunnerCaller,
    ApiJson(body): ApiJson<Deregister>,
) -> ApiResult<StatusCode> {
    // The server's embedded runner belongs to no organization and never leaves through the protocol.
    let Some(org_id) = caller.org_id else { return Err(ApiError::not_found("runner")) };
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    owned::delete(&mut *tx, Owned::Runner, org_id, body.runner_id).await?;
    release::release_runner(&mut tx, org_id, body.runner_id).await?;
    tx.commit().await?;
    app.seen_runners.forget(Some(org_id), body.runner_id);
    app.queue.wake(org_id);
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
    // Many runners' heartbeats share one statement and commit (`queue::heartbeat`).
    let beat = Beat {
        runner_id: id,
        org_id: caller.org_id,
        metrics: body.metrics.as_ref().map(to_json).transpose()?,
        running_jobs: i32::try_from(body.running_jobs.len()).unwrap_or(i32::MAX),
    };
    if !app.writers.heartbeats.submit(beat).await? {
        return Err(ApiError::not_found("runner"));
    }
    let cancel = lease::extend(&app.pool, id, body.running_jobs, app.settings.lease.as_secs_f64()).await?;
    Ok(Json(HeartbeatReply { cancel }))
}
