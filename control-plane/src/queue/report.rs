//! Reports under a job token: the token names its job (dead once the job completed: 401; an attempt that is no
//! longer current: 409, so a runner that lost its lease never overwrites the attempt that replaced it), and node
//! results are stored idempotently per (execution, attempt, node), logged as `node.completed` plus the next
//! `node.started`, and extend the lease. Results are encoded once (`stored`), for a report's statement here and for
//! a completion's (`crate::queue::finish`), which stores them by the same rules.

use crate::error::{ApiError, ApiResult, to_json_string};
use crate::queue::events;
use hookflow_shared::api::executions::{ExecutionEvent, NodeResult};
use hookflow_shared::{ExecutionId, JobId, OrgId, token};
use sqlx::PgConnection;
use std::collections::{HashMap, HashSet};

/// The job a token names.
#[derive(Debug)]
pub struct JobContext {
    pub job_id: JobId,
    pub execution_id: ExecutionId,
    /// The execution's organization.
    pub org_id: OrgId,
    pub attempt: i32,
    /// Top-level node ids in order (read only when the row was locked).
    pub node_ids: Vec<String>,
    pub cancel_requested: bool,
}

/// The answer when a job's attempt is no longer the execution's.
pub fn stale_attempt() -> ApiError {
    ApiError::conflict("this job's attempt is no longer current (its lease expired or it was removed)")
}

type JobRow = (JobId, ExecutionId, i32, bool, Option<JobId>, String, Vec<String>, bool, OrgId);

/// What the database says of a job token.
#[derive(Debug)]
pub enum JobToken {
    /// No job has this token: it cannot start to exist (tokens are made at random and handed out once stored).
    Unknown,
    /// The job it names, or why it is refused (401 for another job's path or a completed job, 409 stale).
    Known(ApiResult<JobContext>),
}

/// Resolves a job token (already checked for its form) for `job_id`, telling an unknown token apart (for the
/// budget of failed lookups). With `lock`, the execution row stays locked for the transaction, fencing the write
/// against rescues; without, the caller's write must re-check the job.
pub async fn look_up(conn: &mut PgConnection, job_token: &str, job_id: JobId, lock: bool) -> ApiResult<JobToken> {
    let row: Option<JobRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT j.id, j.execution_id, j.attempt, j.completed_at IS NOT NULL, e.job_id, e.status, {}, e.cancel_requested,
             e.organization_id
         FROM jobs j JOIN executions e ON e.id = j.execution_id
         WHERE j.token_hash = $1 {}",
        if lock { "e.node_ids" } else { "'{}'::text[]" },
        if lock { "FOR UPDATE OF e" } else { "" }
    )))
    .bind(token::hash(job_token))
    .fetch_optional(conn)
    .await?;
    let Some((id, execution_id, attempt, completed, current_job, status, node_ids, cancel_requested, org_id)) = row
    else {
        return Ok(JobToken::Unknown);
    };
    if id != job_id || completed {
        return Ok(JobToken::Known(Err(ApiError::unauthorized())));
    }
    if current_job != Some(id) || status != "running" {
        return Ok(JobToken::Known(Err(stale_attempt())));
    }
    Ok(JobToken::Known(Ok(JobContext { job_id, execution_id, org_id, attempt, node_ids, cancel_requested })))
}

/// Extends the lease of a locked job without reporting anything (callers that send no runner heartbeats).
pub async fn keep_alive(conn: &mut PgConnection, job: &JobContext, lease_s: f64) -> ApiResult<()> {
    events::append(conn, job.execution_id, &[], Some(lease_s)).await?;
    Ok(())
}

/// Stores node results of a locked job; repeats of a reported node are ignored. Returns how many were new.
pub async fn record(
    conn: &mut PgConnection,
    job: &JobContext,
    results: Vec<NodeResult>,
    lease_s: f64,
) -> ApiResult<usize> {
    // Positions are 1-based, as the node's place in the definition.
    let positions: HashMap<&str, i32> = job
        .node_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i32::try_from(i + 1).unwrap_or(i32::MAX)))
        .collect();
    let places = results
        .iter()
        .map(|result| positions.get(result.node_id.as_str()).copied().ok_or_else(|| unknown_node(&result.node_id)))
        .collect::<ApiResult<Vec<i32>>>()?;
    let results = stored(results, job.attempt)?;
    let ids: Vec<&str> = results.iter().map(|r| r.node_id.as_str()).collect();
    let statuses: Vec<&str> = results.iter().map(|r| r.status).collect();
    let payloads: Vec<&str> = results.iter().map(|r| r.payload.as_str()).collect();
    let inserted: Vec<(String, i32)> = sqlx::query_as(
        "INSERT INTO node_results (execution_id, attempt, node_id, position, status, result)
         SELECT $1, $2, r.node_id, r.position, r.status, r.result::json
         FROM unnest($3::text[], $4::text[], $5::text[], $6::int[]) AS r(node_id, status, result, position)
         ON CONFLICT DO NOTHING RETURNING node_id, position",
    )
    .bind(job.execution_id)
    .bind(job.attempt)
    .bind(&ids)
    .bind(&statuses)
    .bind(&payloads)
    .bind(&places)
    .fetch_all(&mut *conn)
    .await?;
    let announced = announcements(job, &results, &inserted)?;
    events::append(conn, job.execution_id, &announced, Some(lease_s)).await?;
    Ok(inserted.len())
}

/// The events of newly stored results: each `node.completed` (the stored result with its `type`, as
/// `ExecutionEvent::NodeCompleted` encodes it), then `node.started` for the node after it unless that one was
/// reported in the same batch.
fn announcements(job: &JobContext, results: &[StoredResult], inserted: &[(String, i32)]) -> ApiResult<Vec<String>> {
    let mut fresh: HashMap<&str, i32> = inserted.iter().map(|(id, position)| (id.as_str(), *position)).collect();
    let reported: HashSet<&str> = results.iter().map(|r| r.node_id.as_str()).collect();
    let mut announced = Vec::new();
    // Of two results of one node in a report the first was stored (the insert takes them in order): only it is told.
    for result in results {
        let Some(position) = fresh.remove(result.node_id.as_str()) else { continue };
        announced.push(result.event.clone());
        let next = usize::try_from(position).ok().and_then(|p| job.node_ids.get(p));
        if let Some(next) = next
            && !reported.contains(next.as_str())
        {
            let started = ExecutionEvent::NodeStarted { node_id: next.clone(), attempt: job.attempt };
            announced.push(events::encode(&started)?);
        }
    }
    Ok(announced)
}

/// A node result as it is stored: the text of its row and of its `node.completed` event, encoded once.
#[derive(Debug)]
pub struct StoredResult {
    pub node_id: String,
    pub status: &'static str,
    pub payload: String,
    pub event: String,
}

/// Encodes a job's results for storing with its completion (each stamped with the job's attempt).
pub fn stored(results: Vec<NodeResult>, attempt: i32) -> ApiResult<Vec<StoredResult>> {
    results
        .into_iter()
        .map(|mut result| {
            result.attempt = attempt;
            let payload = to_json_string(&result)?;
            let event = completed_event(&payload)?;
            Ok(StoredResult { node_id: result.node_id, status: result.status.as_str(), payload, event })
        })
        .collect()
}

/// The refusal of a result whose node the flow does not have.
pub fn unknown_node(node_id: &str) -> ApiError {
    ApiError::invalid(format!("invalid field `node_id`: `{node_id}` is not a node of this flow"))
}

/// The `node.completed` event of a stored result: the result's JSON object with `"type"` first.
fn completed_event(result: &str) -> ApiResult<String> {
    let fields = result.strip_prefix('{').filter(|rest| rest.len() > 1 && rest.ends_with('}'));
    let fields = fields.ok_or_else(|| ApiError::internal_because("a node result did not encode as an object"))?;
    Ok(format!(r#"{{"type":"node.completed",{fields}"#))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookflow_shared::api::executions::NodeStatus;

    #[test]
    fn a_completed_event_is_the_result_with_its_type() {
        let result = NodeResult {
            node_id: "login".into(),
            attempt: 2,
            status: NodeStatus::Failed,
            started_at: hookflow_shared::time::Timestamp::now(),
            duration_ms: 12,
            request: None,
            response: None,
            extracted: [("token".to_owned(), serde_json::json!("a}\"{b"))].into(),
            assertions: Vec::new(),
            error: Some("expected 200".into()),
            retries: 1,
            capture: None,
            items: None,
        };
        let event = completed_event(&serde_json::to_string(&result).expect("encode")).expect("an object");
        match serde_json::from_str::<ExecutionEvent>(&event).expect("an event") {
            ExecutionEvent::NodeCompleted(node) => {
                assert_eq!((node.node_id.as_str(), node.attempt, node.retries), ("login", 2, 1));
                assert_eq!(node.extracted["token"], "a}\"{b");
            }
            other => panic!("not node.completed: {other:?}"),
        }
        assert!(completed_event("{}").is_err() && completed_event("[1]").is_err());
    }
}
