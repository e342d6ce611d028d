//! Finish and cancel: an execution ends in one statement (final status, the summary counted from the attempt's
//! node results, the dead job token, the final event); a cancel ends a queued execution at once and flags a
//! running one, whose runner is told at its next heartbeat or report.

use crate::http::error::{ApiError, ApiResult};
use crate::queue::events::{self, LOG, bump};
use crate::queue::row::{EXECUTION_COLUMNS, ExecutionRow, fetch};
use hookflow_shared::api::executions::{Execution, ExecutionEvent, ExecutionStatus};
use sqlx::PgConnection;
use std::sync::LazyLock;
use uuid::Uuid;

/// How an execution ends.
#[derive(Debug, Clone, Copy)]
pub struct Ending<'a> {
    pub execution_id: Uuid,
    pub attempt: i32,
    /// When set, the execution must still be held by this job (a runner's completion).
    pub job_id: Option<Uuid>,
    pub status: ExecutionStatus,
    pub error: Option<&'a str>,
}

/// `$1` execution, `$2` attempt, `$3` status, `$4` error, `$5` the job that must hold it (or null). Nodes never
/// reported count as skipped.
static FINISH: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH counts AS (
             SELECT count(*) FILTER (WHERE status = 'passed') AS passed,
                    count(*) FILTER (WHERE status IN ('failed', 'error')) AS failed,
                    count(*) FILTER (WHERE status = 'skipped') AS skipped
             FROM node_results WHERE execution_id = $1 AND attempt = $2),
         ending AS (
             SELECT e.id, COALESCE(e.started_at, now()) AS started_at,
                 jsonb_build_object('nodes_total', cardinality(e.node_ids), 'passed', c.passed, 'failed', c.failed,
                     'skipped', GREATEST(cardinality(e.node_ids) - c.passed - c.failed, c.skipped)) AS summary
             FROM executions e, counts c
             WHERE e.id = $1 AND e.attempt = $2 AND e.status IN ('queued', 'running')
               AND ($5::uuid IS NULL OR e.job_id = $5)
             FOR UPDATE OF e),
         events AS (
             SELECT id, started_at, summary, ARRAY[jsonb_build_object('type', 'execution.completed',
                 'status', $3::text, 'summary', summary, 'error', $4::text, 'attempt', $2::int,
                 'duration_ms', (extract(epoch FROM now() - started_at) * 1000)::bigint)::text] AS events
             FROM ending),
         transition AS (
             UPDATE executions e SET status = $3, error = $4, finished_at = now(), started_at = ev.started_at,
                 lease_expires_at = NULL, summary = ev.summary, {}
             FROM events ev WHERE e.id = ev.id
             RETURNING {EXECUTION_COLUMNS}, e.event_count, ev.events, e.watchers),
         dead AS (
             UPDATE jobs SET completed_at = now()
             WHERE execution_id = $1 AND completed_at IS NULL AND EXISTS (SELECT 1 FROM transition)){}",
        bump("ev.events"),
        *LOG
    )
});

/// Ends an execution. `None` when it had already ended or (with `job_id`) moved on to another attempt.
pub async fn finish(conn: &mut PgConnection, ending: Ending<'_>) -> ApiResult<Option<Execution>> {
    debug_assert!(ending.status.is_final(), "an execution ends in a final status");
    let row: Option<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(FINISH.as_str()))
        .bind(ending.execution_id)
        .bind(ending.attempt)
        .bind(ending.status.as_str())
        .bind(ending.error)
        .bind(ending.job_id)
        .fetch_optional(conn)
        .await?;
    if row.is_some() {
        crate::metrics::execution_finished(ending.status.as_str());
    }
    row.map(Execution::try_from).transpose()
}

/// Which execution a cancel names.
#[derive(Debug, Clone, Copy)]
pub struct CancelTarget {
    pub org_id: Uuid,
    pub flow_id: Uuid,
    pub execution_id: Uuid,
}

/// Cancels: a queued execution ends at once; a running one is flagged for its runner. 409 once it has ended.
pub async fn cancel(conn: &mut PgConnection, target: CancelTarget) -> ApiResult<Execution> {
    let current: Option<(String, i32)> = sqlx::query_as(
        "SELECT status, attempt FROM executions WHERE organization_id = $1 AND flow_id = $2 AND id = $3 FOR UPDATE",
    )
    .bind(target.org_id)
    .bind(target.flow_id)
    .bind(target.execution_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((status, attempt)) = current else { return Err(ApiError::not_found("execution")) };
    let execution_id = target.execution_id;
    match status.parse::<ExecutionStatus>().map_err(ApiError::internal_because)? {
        ExecutionStatus::Queued => {
            let ending = Ending {
                execution_id,
                attempt,
                job_id: None,
                status: ExecutionStatus::Cancelled,
                error: Some("cancelled before a runner took it"),
            };
            finish(conn, ending).await?;
        }
        ExecutionStatus::Running => {
            sqlx::query("UPDATE executions SET cancel_requested = true WHERE id = $1")
                .bind(execution_id)
                .execute(&mut *conn)
                .await?;
            let event = ExecutionEvent::Status {
                status: ExecutionStatus::Running,
                attempt,
                runner_id: None,
                cancel_requested: true,
                reason: None,
            };
            events::append(conn, execution_id, &[events::encode(&event)?], None).await?;
        }
        other => return Err(ApiError::conflict(format!("the execution already finished ({other})"))),
    }
    fetch(conn, target.org_id, target.flow_id, execution_id).await
}
