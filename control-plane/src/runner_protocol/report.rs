//! Reports under a job token: node results (idempotent per execution, attempt and node; each extends the lease)
//! and completion. A token is dead once its job completed (401); a token of an attempt that is no longer current
//! gets 409, so a runner that lost its lease can never overwrite the attempt that replaced it.

use crate::error::ApiError;
use crate::executions::{Ending, events, finish};
use crate::extract::{ApiPath, parse_json};
use crate::state::AppState;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use hookflow_shared::ErrorBody;
use hookflow_shared::api::executions::Execution;
use hookflow_shared::api::runners::{Complete, NodeReport, ReportReply};
use hookflow_shared::token::{self, TokenKind};
use sqlx::PgConnection;
use std::collections::{HashMap, HashSet};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(report_nodes)).routes(routes!(complete_job))
}

/// The job a token names, locked for the report.
struct JobContext {
    execution_id: Uuid,
    attempt: i32,
    node_ids: Vec<String>,
    cancel_requested: bool,
}

fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let token = value.and_then(|v| v.strip_prefix("Bearer ")).map(str::trim).ok_or_else(ApiError::unauthorized)?;
    TokenKind::Job.check(token).map_err(|_| ApiError::unauthorized())?;
    Ok(token)
}

type JobRow = (Uuid, Uuid, Uuid, i32, bool, Option<Uuid>, String, Vec<String>, bool);

/// Resolves the token for `job_id`. With `lock`, the execution row stays locked for the transaction, fencing the
/// write against rescues; without, the caller's write must re-check the job itself.
async fn authorize(
    conn: &mut PgConnection,
    headers: &HeaderMap,
    job_id: Uuid,
    lock: bool,
) -> Result<JobContext, ApiError> {
    let token = bearer(headers)?;
    let row: Option<JobRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT j.id, j.execution_id, j.organization_id, j.attempt, j.completed_at IS NOT NULL, e.job_id, e.status,
                {}, e.cancel_requested
         FROM jobs j JOIN executions e ON e.id = j.execution_id
         WHERE j.token_hash = $1 {}",
        if lock { "e.node_ids" } else { "'{}'::text[]" },
        if lock { "FOR UPDATE OF e" } else { "" }
    )))
    .bind(token::hash(token))
    .fetch_optional(conn)
    .await?;
    let Some((id, execution_id, _org_id, attempt, completed, current_job, status, node_ids, cancel_requested)) = row
    else {
        return Err(ApiError::unauthorized());
    };
    if id != job_id || completed {
        return Err(ApiError::unauthorized());
    }
    if current_job != Some(id) || status != "running" {
        return Err(ApiError::conflict(
            "this job's attempt is no longer current (its lease expired or it was removed)",
        ));
    }
    Ok(JobContext { execution_id, attempt, node_ids, cancel_requested })
}

/// Report one node result, or several (`{"results": [..]}`); repeats of a reported node are ignored. An empty
/// list only extends the lease (the keep-alive of callers that send no runner heartbeats).
#[utoipa::path(post, path = "/runner/jobs/{job_id}/nodes", tag = "Runner", params(("job_id" = Uuid, Path)),
    request_body = NodeReport,
    responses((status = 200, body = ReportReply), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody)),
    security(("job_token" = [])))]
async fn report_nodes(
    State(app): State<AppState>,
    ApiPath(job_id): ApiPath<Uuid>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<ReportReply>, ApiError> {
    let mut tx = app.pool.begin().await?;
    let job = authorize(&mut tx, &headers, job_id, true).await?;
    let mut results = parse_json::<NodeReport>(&body)?.into_results();
    if results.is_empty() {
        // A keep-alive: callers without runner heartbeats (the CLI's ephemeral runs) extend the lease this way.
        events::append_extending(&mut tx, job.execution_id, &[], Some(app.settings.lease.as_secs_f64())).await?;
        tx.commit().await?;
        return Ok(Json(ReportReply { accepted: 0, cancel: job.cancel_requested }));
    }
    // Positions are 1-based, as the node's place in the definition.
    let positions: HashMap<&str, i32> = job
        .node_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i32::try_from(i + 1).unwrap_or(i32::MAX)))
        .collect();
    let (mut ids, mut places, mut statuses, mut payloads) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for result in &mut results {
        let Some(position) = positions.get(result.node_id.as_str()) else {
            return Err(ApiError::invalid(format!(
                "invalid field `node_id`: `{}` is not a node of this flow",
                result.node_id
            )));
        };
        result.attempt = job.attempt;
        places.push(*position);
        ids.push(result.node_id.clone());
        statuses.push(result.status.as_str());
        payloads.push(serde_json::to_value(&*result).unwrap_or_default());
    }
    let inserted: Vec<(String, i32)> = sqlx::query_as(
        "INSERT INTO node_results (execution_id, attempt, node_id, position, status, result)
         SELECT $1, $2, r.node_id, r.position, r.status, r.result
         FROM unnest($3::text[], $4::text[], $5::jsonb[], $6::int[]) AS r(node_id, status, result, position)
         ON CONFLICT DO NOTHING RETURNING node_id, position",
    )
    .bind(job.execution_id)
    .bind(job.attempt)
    .bind(&ids)
    .bind(&statuses)
    .bind(&payloads)
    .bind(&places)
    .fetch_all(&mut *tx)
    .await?;
    let fresh: HashMap<&str, i32> = inserted.iter().map(|(id, position)| (id.as_str(), *position)).collect();
    let reported: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let mut announced = Vec::new();
    for (result, mut payload) in results.iter().zip(payloads) {
        let Some(position) = fresh.get(result.node_id.as_str()) else { continue };
        if let Some(object) = payload.as_object_mut() {
            object.insert("type".into(), "node.completed".into());
        }
        announced.push(payload);
        let next = usize::try_from(*position).ok().and_then(|p| job.node_ids.get(p));
        if let Some(next) = next
            && !reported.contains(next.as_str())
        {
            announced.push(serde_json::json!({"type": "node.started", "node_id": next, "attempt": job.attempt}));
        }
    }
    events::append_extending(&mut tx, job.execution_id, &announced, Some(app.settings.lease.as_secs_f64())).await?;
    tx.commit().await?;
    Ok(Json(ReportReply { accepted: inserted.len(), cancel: job.cancel_requested }))
}

/// Complete the job; the token is dead afterwards.
#[utoipa::path(post, path = "/runner/jobs/{job_id}/complete", tag = "Runner", params(("job_id" = Uuid, Path)),
    request_body = Complete,
    responses((status = 200, body = Execution), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody)),
    security(("job_token" = [])))]
async fn complete_job(
    State(app): State<AppState>,
    ApiPath(job_id): ApiPath<Uuid>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Execution>, ApiError> {
    let mut conn = app.pool.acquire().await?;
    let job = authorize(&mut conn, &headers, job_id, false).await?;
    let complete: Complete = parse_json(&body)?;
    let error: Option<String> = complete.error.map(|e| e.chars().take(2000).collect());
    let ending = Ending {
        execution_id: job.execution_id,
        attempt: job.attempt,
        job_id: Some(job_id),
        status: complete.status.as_str(),
        error: error.as_deref(),
    };
    // The statement re-checks that the job still holds the execution, so a rescue in between answers 409.
    finish(&mut conn, ending).await?.map(Json).ok_or_else(|| {
        ApiError::conflict("this job's attempt is no longer current (its lease expired or it was removed)")
    })
}
