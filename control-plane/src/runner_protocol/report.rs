//! Reports under a job token: node results (idempotent per execution, attempt and node; each extends the lease)
//! and completion. A token is dead once its job completed (401); a token of an attempt that is no longer current
//! gets 409, so a runner that lost its lease can never overwrite the attempt that replaced it.

use crate::error::ApiError;
use crate::executions::{events, fetch_by_id, finish};
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
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(report_nodes)).routes(routes!(complete_job))
}

/// The job a token names, locked for the report.
struct JobContext {
    execution_id: Uuid,
    org_id: Uuid,
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

/// Resolves the token for `job_id` and locks the execution row, fencing the write against rescues.
async fn authorize(conn: &mut PgConnection, headers: &HeaderMap, job_id: Uuid) -> Result<JobContext, ApiError> {
    let token = bearer(headers)?;
    let row: Option<JobRow> = sqlx::query_as(
        "SELECT j.id, j.execution_id, j.organization_id, j.attempt, j.completed_at IS NOT NULL, e.job_id, e.status,
                e.node_ids, e.cancel_requested
         FROM jobs j JOIN executions e ON e.id = j.execution_id
         WHERE j.token_hash = $1 FOR UPDATE OF e",
    )
    .bind(token::hash(token))
    .fetch_optional(conn)
    .await?;
    let Some((id, execution_id, org_id, attempt, completed, current_job, status, node_ids, cancel_requested)) = row
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
    Ok(JobContext { execution_id, org_id, attempt, node_ids, cancel_requested })
}

/// Report one node result, or several (`{"results": [..]}`); repeats of a reported node are ignored.
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
    let job = authorize(&mut tx, &headers, job_id).await?;
    let mut results = parse_json::<NodeReport>(&body)?.into_results();
    if results.is_empty() {
        return Err(ApiError::invalid("invalid field `results`: report at least one node result"));
    }
    let (mut ids, mut statuses, mut payloads) = (Vec::new(), Vec::new(), Vec::new());
    for result in &mut results {
        if !job.node_ids.contains(&result.node_id) {
            return Err(ApiError::invalid(format!(
                "invalid field `node_id`: `{}` is not a node of this flow",
                result.node_id
            )));
        }
        result.attempt = job.attempt;
        ids.push(result.node_id.clone());
        statuses.push(result.status.as_str());
        payloads.push(serde_json::to_value(&*result).unwrap_or_default());
    }
    let inserted: Vec<(String, i32)> = sqlx::query_as(
        "INSERT INTO node_results (execution_id, attempt, node_id, position, status, result)
         SELECT $1, $2, r.node_id, COALESCE(array_position($6::text[], r.node_id), 0), r.status, r.result
         FROM unnest($3::text[], $4::text[], $5::jsonb[]) AS r(node_id, status, result)
         ON CONFLICT DO NOTHING RETURNING node_id, position",
    )
    .bind(job.execution_id)
    .bind(job.attempt)
    .bind(&ids)
    .bind(&statuses)
    .bind(&payloads)
    .bind(&job.node_ids)
    .fetch_all(&mut *tx)
    .await?;
    let mut announced = Vec::new();
    for (result, mut payload) in results.iter().zip(payloads) {
        let Some((_, position)) = inserted.iter().find(|(id, _)| *id == result.node_id) else { continue };
        if let Some(object) = payload.as_object_mut() {
            object.insert("type".into(), "node.completed".into());
        }
        announced.push(payload);
        let next = usize::try_from(*position).ok().and_then(|p| job.node_ids.get(p));
        if let Some(next) = next
            && !ids.contains(next)
        {
            announced.push(serde_json::json!({"type": "node.started", "node_id": next, "attempt": job.attempt}));
        }
    }
    events::append(&mut tx, job.execution_id, &announced).await?;
    sqlx::query("UPDATE executions SET lease_expires_at = now() + make_interval(secs => $2) WHERE id = $1")
        .bind(job.execution_id)
        .bind(app.settings.lease.as_secs_f64())
        .execute(&mut *tx)
        .await?;
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
    let mut tx = app.pool.begin().await?;
    let job = authorize(&mut tx, &headers, job_id).await?;
    let complete: Complete = parse_json(&body)?;
    let error: Option<String> = complete.error.map(|e| e.chars().take(2000).collect());
    finish(&mut tx, job.execution_id, job.attempt, complete.status.as_str(), error.as_deref()).await?;
    let execution = fetch_by_id(&mut tx, job.org_id, job.execution_id).await?;
    tx.commit().await?;
    Ok(Json(execution))
}
