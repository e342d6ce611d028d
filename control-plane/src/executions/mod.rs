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
    let row: Option<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions e
         WHERE e.organization_id = $1 AND e.flow_id = $2 AND e.id = $3"
    )))
    .bind(org_id)
    .bind(flow_id)
    .bind(execution_id)
    .fetch_optional(conn)
    .await?;
    row.map(Into::into).ok_or_else(|| ApiError::not_found("execution"))
}

/// Reads an execution by id alone (callers have already checked its organization).
pub async fn fetch_by_id(conn: &mut PgConnection, org_id: Uuid, execution_id: Uuid) -> Result<Execution, ApiError> {
    let row: Option<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions e WHERE e.organization_id = $1 AND e.id = $2"
    )))
    .bind(org_id)
    .bind(execution_id)
    .fetch_optional(conn)
    .await?;
    row.map(Into::into).ok_or_else(|| ApiError::not_found("execution"))
}

/// Counts the node results of an attempt into a summary.
pub async fn summarize(conn: &mut PgConnection, execution_id: Uuid, attempt: i32) -> Result<Summary, sqlx::Error> {
    let (total, passed, failed, skipped): (i32, i64, i64, i64) = sqlx::query_as(
        "SELECT cardinality(e.node_ids),
                count(*) FILTER (WHERE r.status = 'passed'),
                count(*) FILTER (WHERE r.status IN ('failed', 'error')),
                count(*) FILTER (WHERE r.status = 'skipped')
         FROM executions e LEFT JOIN node_results r ON r.execution_id = e.id AND r.attempt = $2
         WHERE e.id = $1 GROUP BY e.node_ids",
    )
    .bind(execution_id)
    .bind(attempt)
    .fetch_one(conn)
    .await?;
    let n = |v: i64| u32::try_from(v).unwrap_or(0);
    let total = u32::try_from(total).unwrap_or(0);
    let (passed, failed, reported_skipped) = (n(passed), n(failed), n(skipped));
    // Nodes never reported (the run stopped early) count as skipped.
    let skipped = total.saturating_sub(passed + failed).max(reported_skipped);
    Ok(Summary { nodes_total: total, passed, failed, skipped })
}

/// Ends an execution: final status, summary, event, and the flow's `last_status` when it is the newest.
pub async fn finish(
    conn: &mut PgConnection,
    execution_id: Uuid,
    attempt: i32,
    status: &str,
    error: Option<&str>,
) -> Result<(), sqlx::Error> {
    let summary = summarize(conn, execution_id, attempt).await?;
    let summary_json = serde_json::to_value(summary).unwrap_or_default();
    let (flow_id, duration_ms): (Uuid, Option<i64>) = sqlx::query_as(
        "UPDATE executions SET status = $2, error = $3, summary = $4, finished_at = now(),
             started_at = COALESCE(started_at, now()), lease_expires_at = NULL
         WHERE id = $1
         RETURNING flow_id, (extract(epoch FROM finished_at - started_at) * 1000)::bigint",
    )
    .bind(execution_id)
    .bind(status)
    .bind(error)
    .bind(&summary_json)
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query("UPDATE jobs SET completed_at = now() WHERE execution_id = $1 AND completed_at IS NULL")
        .bind(execution_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "UPDATE flows SET last_status = $2
         WHERE id = $1 AND $3 = (SELECT id FROM executions WHERE flow_id = $1 ORDER BY id DESC LIMIT 1)",
    )
    .bind(flow_id)
    .bind(status)
    .bind(execution_id)
    .execute(&mut *conn)
    .await?;
    let event = serde_json::json!({
        "type": "execution.completed", "status": status, "summary": summary, "error": error,
        "duration_ms": duration_ms, "attempt": attempt,
    });
    events::append(conn, execution_id, &[event]).await
}
