//! Claims: `POST /runner/jobs/next` long-polls the queue. One statement picks the oldest queued execution whose
//! required labels the runner carries (`FOR UPDATE SKIP LOCKED`), leases it, and records the job with its hashed
//! token. A waiting poll is woken by NOTIFY (or a local launch) and re-checks every second regardless. A runner
//! serving every organization takes the least recently served organization first.

use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::runner_protocol::{RunnerCaller, touch_runner};
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use hookflow_shared::ErrorBody;
use hookflow_shared::api::runners::{DEFAULT_WAIT_S, Job, JobFlow, MAX_WAIT_S, NextJob, SecretValues};
use hookflow_shared::flow::template;
use hookflow_shared::token::{self, TokenKind};
use rand::Rng as _;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::time::Duration;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(next_job))
}

/// How often a waiting poll re-checks the queue without a wake-up.
const RECHECK: Duration = Duration::from_secs(1);

/// Shared by every claim, so a claim is one statement: lease the picked row, record the job, append the
/// `execution.status` (running) and first `node.started` events. `$1` runner, `$2` job id, `$3` lease seconds,
/// `$4` token hash; the picking CTE uses `$5` onwards.
const CLAIM_TAIL: &str = ",
claimed AS (
    UPDATE executions e SET status = 'running', runner_id = $1, job_id = $2,
        lease_expires_at = now() + make_interval(secs => $3), started_at = COALESCE(e.started_at, now()),
        event_count = e.event_count + CASE WHEN cardinality(e.node_ids) > 0 THEN 2 ELSE 1 END
    FROM picked WHERE e.id = picked.id
    RETURNING e.id, e.organization_id, e.attempt, e.flow_id, e.flow_name, e.flow_version, e.definition, e.modules,
        e.environment, e.variables, e.lease_expires_at, e.timeout_s, e.node_ids[1] AS first_node, e.event_count),
job AS (
    INSERT INTO jobs (id, execution_id, organization_id, attempt, runner_id, token_hash)
    SELECT $2, id, organization_id, attempt, $1, $4 FROM claimed),
announced AS (
    INSERT INTO execution_events (execution_id, seq, data)
    SELECT id, event_count - CASE WHEN first_node IS NULL THEN 0 ELSE 1 END,
        jsonb_build_object('type', 'execution.status', 'status', 'running', 'attempt', attempt, 'runner_id', $1::uuid)::text
    FROM claimed
    UNION ALL
    SELECT id, event_count, jsonb_build_object('type', 'node.started', 'node_id', first_node, 'attempt', attempt)::text
    FROM claimed WHERE first_node IS NOT NULL)";

const PICK_IN_ORGANIZATION: &str = "WITH picked AS (
    SELECT id FROM executions WHERE organization_id = $5 AND status = 'queued' AND runner_labels <@ $6
    ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)";

const PICK_FAIRLY: &str = "WITH picked AS (
    SELECT q.id FROM (SELECT id FROM organizations ORDER BY last_claim_at NULLS FIRST, id) o
    CROSS JOIN LATERAL (
        SELECT id FROM executions WHERE organization_id = o.id AND status = 'queued' AND runner_labels <@ $5
        ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) q
    LIMIT 1)";

const SERVED: &str = ",
served AS (UPDATE organizations o SET last_claim_at = now() FROM claimed WHERE o.id = claimed.organization_id)";

const PICK_ONE: &str = "WITH picked AS (
    SELECT id FROM executions WHERE organization_id = $5 AND id = $6 AND status = 'queued' FOR UPDATE)";

/// An ephemeral claim (no runner) whose answer was lost: handed out again with a new job and token while nothing has
/// been reported under the old one, which then gets 409.
const PICK_REISSUE: &str = "WITH picked AS (
    SELECT id FROM executions e
    WHERE organization_id = $5 AND id = $6 AND status = 'running' AND runner_id IS NULL
        AND NOT EXISTS (SELECT 1 FROM node_results r WHERE r.execution_id = e.id)
    FOR UPDATE)";

#[derive(Debug, sqlx::FromRow)]
struct Claimed {
    id: Uuid,
    organization_id: Uuid,
    attempt: i32,
    flow_id: Uuid,
    flow_name: String,
    flow_version: Option<i32>,
    definition: serde_json::Value,
    modules: serde_json::Value,
    environment: Option<String>,
    variables: serde_json::Value,
    lease_expires_at: DateTime<Utc>,
    timeout_s: i32,
}

/// Which execution to claim.
enum Target<'a> {
    Organization { org_id: Uuid, labels: &'a [String] },
    AnyOrganization { labels: &'a [String] },
    Execution { org_id: Uuid, execution_id: Uuid },
    Reissue { org_id: Uuid, execution_id: Uuid },
}

async fn claim(
    conn: &mut PgConnection,
    app: &AppState,
    runner_id: Option<Uuid>,
    target: Target<'_>,
) -> Result<Option<Job>, ApiError> {
    let job_id = Uuid::now_v7();
    let mut random = [0u8; token::BODY_LEN];
    rand::rng().fill_bytes(&mut random);
    let job_token = TokenKind::Job.assemble(&random);
    let lease_s = app.settings.lease.as_secs_f64();
    let pick = match target {
        Target::Organization { .. } => PICK_IN_ORGANIZATION,
        Target::AnyOrganization { .. } => PICK_FAIRLY,
        Target::Execution { .. } => PICK_ONE,
        Target::Reissue { .. } => PICK_REISSUE,
    };
    let served = if matches!(target, Target::AnyOrganization { .. }) { SERVED } else { "" };
    // The answer, with the wake-up of the execution's stream subscribers.
    let sql = format!(
        "{pick}{CLAIM_TAIL}{served} SELECT claimed.* FROM claimed, pg_notify('{}', claimed.id::text) AS notified",
        crate::executions::events::EXECUTIONS_CHANNEL
    );
    let query = sqlx::query_as::<_, Claimed>(sqlx::AssertSqlSafe(sql))
        .bind(runner_id)
        .bind(job_id)
        .bind(lease_s)
        .bind(token::hash(&job_token));
    let query = match target {
        Target::Organization { org_id, labels } => query.bind(org_id).bind(labels),
        Target::AnyOrganization { labels } => query.bind(labels),
        Target::Execution { org_id, execution_id } | Target::Reissue { org_id, execution_id } => {
            query.bind(org_id).bind(execution_id)
        }
    };
    let Some(row) = query.fetch_optional(&mut *conn).await? else { return Ok(None) };
    let secrets = resolve_secrets(conn, app, &row).await?;
    Ok(Some(Job {
        job_id,
        execution_id: row.id,
        attempt: row.attempt,
        flow: JobFlow { id: row.flow_id, name: row.flow_name, version: row.flow_version, definition: row.definition },
        environment: row.environment,
        variables: serde_json::from_value(row.variables).unwrap_or_default(),
        secrets,
        modules: serde_json::from_value(row.modules).unwrap_or_default(),
        job_token,
        lease_expires_at: row.lease_expires_at.into(),
        timeout_s: u64::try_from(row.timeout_s).unwrap_or(0),
    }))
}

/// Every `{{secret.NAME}}` in any string of a JSON value.
fn collect_secret_names(value: &serde_json::Value, names: &mut Vec<String>) {
    match value {
        serde_json::Value::String(text) => {
            for name in template::secret_names(text) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_secret_names(v, names)),
        serde_json::Value::Object(map) => map.values().for_each(|v| collect_secret_names(v, names)),
        _ => {}
    }
}

/// Decrypts only the secrets the definition, its modules and its variables reference. A name with no secret is
/// left out: the node that uses it fails with "not defined".
async fn resolve_secrets(conn: &mut PgConnection, app: &AppState, row: &Claimed) -> Result<SecretValues, ApiError> {
    let mut names = Vec::new();
    for part in [&row.definition, &row.modules, &row.variables] {
        collect_secret_names(part, &mut names);
    }
    if names.is_empty() {
        return Ok(SecretValues::default());
    }
    let sealed: Vec<(String, Vec<u8>, Vec<u8>, i32)> = sqlx::query_as(
        "SELECT name, ciphertext, nonce, key_version FROM secrets WHERE organization_id = $1 AND name = ANY($2)",
    )
    .bind(row.organization_id)
    .bind(&names)
    .fetch_all(conn)
    .await?;
    let mut values = BTreeMap::new();
    for (name, ciphertext, nonce, key_version) in sealed {
        let sealed = crate::crypto::Sealed { ciphertext, nonce, key_version };
        match app.settings.master_key.open(row.organization_id, &name, &sealed) {
            Ok(plain) => {
                values.insert(name, String::from_utf8_lossy(&plain).into_owned());
            }
            Err(_) => tracing::error!(secret = %name, "a secret cannot be decrypted with the configured master key"),
        }
    }
    Ok(SecretValues(values))
}

/// Claims one queued execution for an ephemeral launch, in the launch's transaction.
pub async fn claim_execution(
    conn: &mut PgConnection,
    app: &AppState,
    org_id: Uuid,
    execution_id: Uuid,
) -> Result<Option<Job>, ApiError> {
    claim(conn, app, None, Target::Execution { org_id, execution_id }).await
}

/// Hands an ephemeral launch's claim out again when its caller retries the launch with the same `Idempotency-Key`
/// (the first answer was lost on the way); `None` once anything was reported or the execution ended.
pub async fn reissue_execution(
    conn: &mut PgConnection,
    app: &AppState,
    org_id: Uuid,
    execution_id: Uuid,
) -> Result<Option<Job>, ApiError> {
    claim(conn, app, None, Target::Reissue { org_id, execution_id }).await
}

/// Tries once to claim a job for a runner.
pub async fn try_claim(
    app: &AppState,
    caller: RunnerCaller,
    runner_id: Uuid,
    labels: &[String],
) -> Result<Option<Job>, ApiError> {
    let target = match caller.org_id {
        Some(org_id) => Target::Organization { org_id, labels },
        None => Target::AnyOrganization { labels },
    };
    // One statement: it commits on its own, with no BEGIN/COMMIT round trips.
    let mut conn = app.pool.acquire().await?;
    claim(&mut conn, app, Some(runner_id), target).await
}

/// Long poll for the next job: 200 with the claim, or 204 when none came within `wait_s`.
#[utoipa::path(post, path = "/runner/jobs/next", tag = "Runner", request_body = NextJob,
    responses((status = 200, body = Job), (status = 204, description = "No job within wait_s"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn next_job(
    State(app): State<AppState>,
    caller: RunnerCaller,
    ApiJson(body): ApiJson<NextJob>,
) -> Result<Response, ApiError> {
    let wait_s = body.wait_s.unwrap_or(DEFAULT_WAIT_S);
    if wait_s > MAX_WAIT_S {
        return Err(ApiError::invalid(format!("invalid field `wait_s`: at most {MAX_WAIT_S}")));
    }
    let labels = touch_runner(&app, caller, body.runner_id).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s);
    let wake = app.queue.for_runner(caller.org_id);
    loop {
        if let Some(job) = try_claim(&app, caller, body.runner_id, &labels).await? {
            // More may be queued: pass the wake on to another waiter.
            wake.notify_one();
            return Ok((StatusCode::OK, Json(job)).into_response());
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let pause = RECHECK.min(deadline - now);
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(pause) => {}
            () = app.shutdown.cancelled() => return Ok(StatusCode::NO_CONTENT.into_response()),
        }
    }
}
