//! An execution as stored and as the API shows it: the columns every read selects, the row type, and the reads
//! by id (always within the caller's organization).

use crate::error::{ApiError, ApiResult};
use chrono::{DateTime, Utc};
use hookflow_shared::api::executions::{Execution, ExecutionStatus, Summary, Trigger};
use hookflow_shared::api::flows_as_code::ExecutionSource;
use hookflow_shared::api::triggers::TriggerRequest;
use hookflow_shared::{BatchId, CaptureId, ExecutionId, FlowId, OrgId, RunnerId, ScheduleId, WebhookId};
use sqlx::PgConnection;

/// The columns of [`ExecutionRow`], from an `executions` row aliased `e`.
pub const EXECUTION_COLUMNS: &str = "e.id, e.flow_id, e.flow_version, e.draft_revision, e.environment, e.status,
    e.trigger, e.attempt, e.max_attempts, e.runner_id, e.created_at, e.started_at, e.finished_at, e.summary,
    e.error, cardinality(e.node_ids) AS nodes_total, e.trigger_webhook_id, e.trigger_request_id, e.schedule_id, e.priority,
    e.batch_id, e.iteration, e.source";

#[derive(Debug, sqlx::FromRow)]
pub struct ExecutionRow {
    id: ExecutionId,
    flow_id: Option<FlowId>,
    flow_version: Option<i32>,
    draft_revision: i32,
    environment: Option<String>,
    status: String,
    trigger: String,
    attempt: i32,
    max_attempts: i32,
    runner_id: Option<RunnerId>,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    summary: Option<serde_json::Value>,
    error: Option<String>,
    nodes_total: i32,
    trigger_webhook_id: Option<WebhookId>,
    trigger_request_id: Option<CaptureId>,
    schedule_id: Option<ScheduleId>,
    priority: i16,
    batch_id: Option<BatchId>,
    iteration: Option<i32>,
    /// An inline run's `{path, definition_sha256, git_commit, git_ref}`; NULL for a stored flow's.
    source: Option<serde_json::Value>,
}

impl TryFrom<ExecutionRow> for Execution {
    type Error = ApiError;

    /// A status or trigger the schema's CHECK constraints allow but this build does not know is an internal error.
    fn try_from(r: ExecutionRow) -> ApiResult<Self> {
        let status: ExecutionStatus = r.status.parse().map_err(ApiError::internal_because)?;
        let trigger: Trigger = r.trigger.parse().map_err(ApiError::internal_because)?;
        let summary = match r.summary {
            Some(stored) => serde_json::from_value(stored).map_err(ApiError::internal_because)?,
            None => Summary { nodes_total: u32::try_from(r.nodes_total).unwrap_or(0), ..Summary::default() },
        };
        let duration_ms = match (r.started_at, r.finished_at) {
            (Some(start), Some(end)) => Some((end - start).num_milliseconds().max(0)),
            _ => None,
        };
        Ok(Execution {
            id: r.id,
            flow_id: r.flow_id,
            flow_version: r.flow_version,
            draft_revision: r.draft_revision,
            environment: r.environment,
            status,
            trigger,
            trigger_request: r
                .trigger_webhook_id
                .zip(r.trigger_request_id)
                .map(|(webhook_id, request_id)| TriggerRequest { webhook_id, request_id }),
            schedule_id: r.schedule_id,
            attempt: r.attempt,
            max_attempts: r.max_attempts,
            runner_id: r.runner_id,
            priority: i32::from(r.priority),
            waiting_reason: None,
            created_at: r.created_at.into(),
            started_at: r.started_at.map(Into::into),
            finished_at: r.finished_at.map(Into::into),
            duration_ms,
            summary,
            error: r.error,
            batch_id: r.batch_id,
            iteration: r.iteration,
            source: match r.source {
                Some(stored) => serde_json::from_value(stored).map_err(ApiError::internal_because)?,
                None => ExecutionSource::default(),
            },
            job: None,
        })
    }
}

/// Turns rows into executions; one unreadable row fails the answer rather than vanishing from it.
impl ExecutionRow {
    pub fn id(&self) -> ExecutionId {
        self.id
    }
}

pub fn into_executions(rows: Vec<ExecutionRow>) -> ApiResult<Vec<Execution>> {
    rows.into_iter().map(Execution::try_from).collect()
}

/// Reads an execution of a flow of the caller's organization (`None`: any execution of the organization, inline
/// ones included); anything else is 404.
pub async fn fetch(
    conn: &mut PgConnection,
    org_id: OrgId,
    flow_id: impl Into<Option<FlowId>>,
    execution_id: ExecutionId,
) -> ApiResult<Execution> {
    select(conn, org_id, flow_id.into(), execution_id).await
}

/// Reads an execution of the organization by id alone.
pub async fn fetch_by_id(conn: &mut PgConnection, org_id: OrgId, execution_id: ExecutionId) -> ApiResult<Execution> {
    select(conn, org_id, None, execution_id).await
}

async fn select(
    conn: &mut PgConnection,
    org_id: OrgId,
    flow_id: Option<FlowId>,
    execution_id: ExecutionId,
) -> ApiResult<Execution> {
    let row: Option<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions e
         WHERE e.organization_id = $1 AND ($2::uuid IS NULL OR e.flow_id = $2) AND e.id = $3"
    )))
    .bind(org_id)
    .bind(flow_id)
    .bind(execution_id)
    .fetch_optional(conn)
    .await?;
    row.ok_or_else(|| ApiError::not_found("execution"))?.try_into()
}
