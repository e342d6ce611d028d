//! Executions: launching (with idempotency), reading, cancelling and streaming them, and the event log every
//! state change appends to (the execution stream replays it). The queue side lives in `runner_protocol`.

pub mod events;
pub mod idempotency;
pub mod launch;
pub mod read;
pub mod stats;
pub mod stream;

use crate::error::ApiError;
use crate::state::AppState;
use chrono::{DateTime, Utc};
use hookflow_shared::api::executions::{Execution, Summary};
use sqlx::PgConnection;
use utoipa_axum::router::OpenApiRouter;
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(launch::routes()).merge(read::routes()).merge(stream::routes()).merge(stats::routes())
}

pub const EXECUTION_COLUMNS: &str = "e.id, e.flow_id, e.flow_version, e.draft_revision, e.environment, e.status,
    e.trigger, e.attempt, e.max_attempts, e.runner_id, e.created_at, e.started_at, e.finished_at, e.summary,
    e.error, cardinality(e.node_ids) AS nodes_total";

#[derive(Debug, sqlx::FromRow)]
pub struct ExecutionRow {
    id: Uuid,
    flow_id: Uuid,
    flow_version: Option<i32>,
    draft_revision: i32,
    environment: Option<String>,
    status: String,
    trigger: String,
    attempt: i32,
    max_attempts: i32,
    runner_id: Option<Uuid>,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    summary: Option<serde_json::Value>,
    error: Option<String>,
    nodes_total: i32,
}

impl From<ExecutionRow> for Execution {
    fn from(r: ExecutionRow) -> Self {
        let summary = r
            .summary
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or(Summary { nodes_total: u32::try_from(r.nodes_total).unwrap_or(0), ..Summary::default() });
        let duration_ms = match (r.started_at, r.finished_at) {
            (Some(start), Some(end)) => Some((end - start).num_milliseconds().max(0)),
            _ => None,
        };
        Execution {
            id: r.id,
            flow_id: r.flow_id,
            flow_version: r.flow_version,
            draft_revision: r.draft_revision,
            environment: r.environment,
            status: r.status,
            trigger: r.trigger,
            attempt: r.attempt,
            max_attempts: r.max_attempts,
            runner_id: r.runner_id,
            created_at: r.created_at.into(),
            started_at: r.started_at.map(Into::into),
            finished_at: r.finished_at.map(Into::into),
            duration_ms,
            summary,
            error: r.error,
            job: None,
        }
    }
}

/// Reads an execution of a flow of the caller's organization; anything else is 404.
pub async fn fetch(
    conn: &mut PgConnection,
    org_id: Uuid,
    flow_id: Uuid,
    execution_id: Uuid,
) -> Result<Execution, ApiError> {
    select(conn, org_id, Some(flow_id), execution_id).await
}

/// Reads an execution of the organization by id alone.
pub async fn fetch_by_id(conn: &mut PgConnection, org_id: Uuid, execution_id: Uuid) -> Result<Execution, ApiError> {
    select(conn, org_id, None, execution_id).await
}

async fn select(
    conn: &mut PgConnection,
    org_id: Uuid,
    flow_id: Option<Uuid>,
    execution_id: Uuid,
) -> Result<Execution, ApiError> {
    let row: Option<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions e
         WHERE e.organization_id = $1 AND ($2::uuid IS NULL OR e.flow_id = $2) AND e.id = $3"
    )))
    .bind(org_id)
    .bind(flow_id)
    .bind(execution_id)
    .fetch_optional(conn)
    .await?;
    row.map(Into::into).ok_or_else(|| ApiError::not_found("execution"))
}

/// How an execution ends.
#[derive(Debug, Clone, Copy)]
pub struct Ending<'a> {
    pub execution_id: Uuid,
    pub attempt: i32,
    /// When set, the execution must still be held by this job (a runner's completion).
    pub job_id: Option<Uuid>,
    pub status: &'a str,
    pub error: Option<&'a str>,
}

/// Ends an execution in one statement: final status, the summary counted from the attempt's node results
/// (nodes never reported count as skipped), the dead job token, the final event and its notification. `None`
/// when the execution had already ended or (with `job_id`) moved on to another attempt.
pub async fn finish(conn: &mut PgConnection, ending: Ending<'_>) -> Result<Option<Execution>, sqlx::Error> {
    let row: Option<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH counts AS (
             SELECT count(*) FILTER (WHERE status = 'passed') AS passed,
                    count(*) FILTER (WHERE status IN ('failed', 'error')) AS failed,
                    count(*) FILTER (WHERE status = 'skipped') AS skipped
             FROM node_results WHERE execution_id = $1 AND attempt = $2),
         done AS (
             UPDATE executions e SET status = $3, error = $4, finished_at = now(),
                 started_at = COALESCE(e.started_at, now()), lease_expires_at = NULL, event_count = e.event_count + 1,
                 summary = jsonb_build_object('nodes_total', cardinality(e.node_ids), 'passed', c.passed,
                     'failed', c.failed,
                     'skipped', GREATEST(cardinality(e.node_ids) - c.passed - c.failed, c.skipped))
             FROM counts c
             WHERE e.id = $1 AND e.attempt = $2 AND e.status IN ('queued', 'running')
               AND ($5::uuid IS NULL OR e.job_id = $5)
             RETURNING e.*),
         dead AS (UPDATE jobs SET completed_at = now() WHERE execution_id = $1 AND completed_at IS NULL),
         event AS (
             INSERT INTO execution_events (execution_id, seq, data)
             SELECT id, event_count, jsonb_build_object('type', 'execution.completed', 'status', status,
                 'summary', summary, 'error', error, 'attempt', attempt,
                 'duration_ms', (extract(epoch FROM finished_at - started_at) * 1000)::bigint)::text
             FROM done)
         SELECT {EXECUTION_COLUMNS} FROM done e, pg_notify('{}', e.id::text) AS notified",
        events::EXECUTIONS_CHANNEL
    )))
    .bind(ending.execution_id)
    .bind(ending.attempt)
    .bind(ending.status)
    .bind(ending.error)
    .bind(ending.job_id)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(Into::into))
}
