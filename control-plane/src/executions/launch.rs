//! `POST /flows/{id}/launch` and `POST /flows/launch` (by tag): resolve what runs (draft or published version,
//! environment, variables, module versions), snapshot it into a queued execution and wake the claimers.
//! `mode: ephemeral` claims the execution for the caller at once.

use crate::auth::{Caller, scope};
use crate::error::ApiError;
use crate::executions::idempotency::{self, Reservation};
use crate::executions::{EXECUTION_COLUMNS, ExecutionRow, events, fetch_by_id};
use crate::extract::{ApiPath, parse_json};
use crate::runner_protocol::{check_labels, claim};
use crate::state::AppState;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, extract::State};
use hookflow_shared::api::executions::{Execution, Launch, LaunchByTag, LaunchMode, LaunchedExecutions};
use hookflow_shared::api::runners::module_key;
use hookflow_shared::flow::definition::{self, FlowDefinition, Node, VersionSelector};
use hookflow_shared::{ErrorBody, Scope};
use serde::de::DeserializeOwned;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(launch_flow)).routes(routes!(launch_by_tag))
}

/// Flows run at most this long when their definition sets no `timeout_s`.
pub const DEFAULT_FLOW_TIMEOUT_S: u64 = 300;
pub const DEFAULT_MAX_ATTEMPTS: i32 = 3;
const MAX_MODULE_DEPTH: usize = 5;
/// A caller marks CLI launches with this header so executions show `trigger: cli`.
pub const TRIGGER_HEADER: &str = "x-hookflow-trigger";

/// What to launch.
#[derive(Debug)]
pub struct LaunchRequest<'a> {
    pub org_id: Uuid,
    pub flow_id: Uuid,
    pub trigger: &'a str,
    pub environment: Option<&'a str>,
    pub version: Option<VersionSelector>,
    pub variables: &'a BTreeMap<String, String>,
    pub runner_labels: &'a [String],
    pub max_attempts: i32,
}

impl<'a> LaunchRequest<'a> {
    /// A launch of `flow_id` as a launch body asks; ephemeral runs belong to their caller, so if the caller
    /// vanishes they fail instead of moving to a runner.
    pub fn new(org_id: Uuid, flow_id: Uuid, trigger: &'a str, launch: &'a Launch) -> Self {
        let ephemeral = launch.mode == Some(LaunchMode::Ephemeral);
        Self {
            org_id,
            flow_id,
            trigger,
            environment: launch.environment.as_deref(),
            version: launch.version,
            variables: &launch.variables,
            runner_labels: &launch.runner_labels,
            max_attempts: if ephemeral { 1 } else { DEFAULT_MAX_ATTEMPTS },
        }
    }
}

fn selector_number(selector: Option<VersionSelector>) -> Option<i32> {
    match selector {
        Some(VersionSelector::Number(n)) => Some(i32::try_from(n).unwrap_or(i32::MAX)),
        _ => None,
    }
}

/// A published version of a flow of the organization: a number, or the newest.
async fn published(
    conn: &mut PgConnection,
    org_id: Uuid,
    flow_id: Uuid,
    number: Option<i32>,
) -> Result<Option<(i32, serde_json::Value)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT v.version, v.definition FROM flow_versions v JOIN flows f ON f.id = v.flow_id
         WHERE f.organization_id = $1 AND v.flow_id = $2 AND ($3::int IS NULL OR v.version = $3)
         ORDER BY v.version DESC LIMIT 1",
    )
    .bind(org_id)
    .bind(flow_id)
    .bind(number)
    .fetch_optional(conn)
    .await
}

/// Resolves every module node (and theirs, to a depth of five) to a published definition.
async fn resolve_modules(
    conn: &mut PgConnection,
    org_id: Uuid,
    root: &FlowDefinition,
) -> Result<BTreeMap<String, serde_json::Value>, ApiError> {
    let mut modules = BTreeMap::new();
    let mut level: Vec<FlowDefinition> = vec![root.clone()];
    for depth in 0..=MAX_MODULE_DEPTH {
        let mut next = Vec::new();
        for flow in &level {
            for node in &flow.nodes {
                let Node::Module(module) = node else { continue };
                if depth == MAX_MODULE_DEPTH {
                    return Err(ApiError::invalid(format!(
                        "node `{}`: modules nest deeper than {MAX_MODULE_DEPTH} levels (is there a cycle?)",
                        module.id
                    )));
                }
                let number = selector_number(module.version);
                let key = module_key(module.flow_id, number.map(|n| n as u32));
                if modules.contains_key(&key) {
                    continue;
                }
                let Some((_, raw)) = published(conn, org_id, module.flow_id, number).await? else {
                    return Err(ApiError::invalid(format!(
                        "node `{}`: flow {} has no such published version",
                        module.id, module.flow_id
                    )));
                };
                let parsed = definition::validate(&raw).map_err(|_| {
                    ApiError::invalid(format!("node `{}`: the module's definition is not valid", module.id))
                })?;
                modules.insert(key, raw);
                next.push(parsed);
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    Ok(modules)
}

/// Creates a queued execution (in the caller's transaction, if any) and wakes the claimers when it commits.
pub async fn create_execution(conn: &mut PgConnection, request: &LaunchRequest<'_>) -> Result<Execution, ApiError> {
    let flow: Option<(String, serde_json::Value, i32)> =
        sqlx::query_as("SELECT name, definition, draft_revision FROM flows WHERE organization_id = $1 AND id = $2")
            .bind(request.org_id)
            .bind(request.flow_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some((flow_name, draft, draft_revision)) = flow else { return Err(ApiError::not_found("flow")) };
    let (flow_version, raw) = match request.version {
        None => (None, draft),
        Some(selector) => match published(conn, request.org_id, request.flow_id, selector_number(Some(selector)))
            .await?
        {
            Some((number, raw)) => (Some(number), raw),
            None if matches!(selector, VersionSelector::Number(_)) => {
                return Err(ApiError::invalid("invalid field `version`: the flow has no such published version"));
            }
            None => return Err(ApiError::invalid("invalid field `version`: the flow has no published version yet")),
        },
    };
    let parsed = definition::validate(&raw).map_err(|p| crate::flows::definition_error(&p))?;
    let mut modules = resolve_modules(conn, request.org_id, &parsed).await?;
    let mut raw = raw;
    // Collection requests are inlined now, so the run uses them as they are at launch.
    let definitions = std::iter::once(&mut raw).chain(modules.values_mut());
    let collection_variables = crate::collections::refs::resolve(conn, request.org_id, definitions).await?;
    let node_ids: Vec<String> = parsed.nodes.iter().map(|n| n.id().to_owned()).collect();
    let timeout_s = parsed.timeout_s.unwrap_or(DEFAULT_FLOW_TIMEOUT_S);
    let queued = events::status_event("queued", 1, None).to_string();
    // One statement: variables layered (collections < organization < environment < launch), the row, its first
    // event and the notifications. No row comes back when the named environment does not exist.
    let row: Option<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "WITH env AS (
             SELECT variables FROM flow_environments WHERE organization_id = $2 AND flow_id = $3 AND key = $9),
         inserted AS (
             INSERT INTO executions (id, organization_id, flow_id, flow_name, flow_version, draft_revision, definition,
                 modules, environment, variables, runner_labels, node_ids, status, trigger, max_attempts, timeout_s,
                 event_count)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9,
                 $17::jsonb
                     || COALESCE((SELECT jsonb_object_agg(name, value) FROM variables WHERE organization_id = $2), '{{}}')
                     || COALESCE((SELECT variables FROM env), '{{}}') || $10::jsonb,
                 $11, $12, 'queued', $13, $14, $15, 1
             WHERE $9::text IS NULL OR EXISTS (SELECT 1 FROM env)
             RETURNING *),
         announced AS (INSERT INTO execution_events (execution_id, seq, data) SELECT id, 1, $16 FROM inserted)
         SELECT {EXECUTION_COLUMNS} FROM inserted e, pg_notify('{}', e.id::text) AS streamed,
             pg_notify('{}', e.organization_id::text) AS queued",
        events::EXECUTIONS_CHANNEL,
        crate::runner_protocol::QUEUE_CHANNEL
    )))
    .bind(Uuid::now_v7())
    .bind(request.org_id)
    .bind(request.flow_id)
    .bind(&flow_name)
    .bind(flow_version)
    .bind(draft_revision)
    .bind(&raw)
    .bind(serde_json::to_value(&modules).unwrap_or_default())
    .bind(request.environment)
    .bind(serde_json::to_value(request.variables).unwrap_or_default())
    .bind(request.runner_labels)
    .bind(&node_ids)
    .bind(request.trigger)
    .bind(request.max_attempts)
    .bind(i32::try_from(timeout_s).unwrap_or(i32::MAX))
    .bind(queued)
    .bind(serde_json::to_value(&collection_variables).unwrap_or_default())
    .fetch_optional(&mut *conn)
    .await?;
    match (row, request.environment) {
        (Some(row), _) => Ok(row.into()),
        (None, Some(key)) => {
            Err(ApiError::invalid(format!("invalid field `environment`: the flow has no environment `{key}`")))
        }
        (None, None) => Err(ApiError::internal()),
    }
}

/// The launch body, where an empty body means `{}`.
fn body_or_default<T: DeserializeOwned + Default>(bytes: &Bytes) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) { Ok(T::default()) } else { parse_json(bytes) }
}

fn trigger(headers: &HeaderMap, default: &'static str) -> &'static str {
    match headers.get(TRIGGER_HEADER).and_then(|v| v.to_str().ok()) {
        Some("cli") => "cli",
        _ => default,
    }
}

/// A retried ephemeral launch whose first answer (and so its job token) was lost: the claim is handed out again
/// while nothing was reported under it.
async fn reissue(
    conn: &mut sqlx::PgConnection,
    app: &AppState,
    org_id: Uuid,
    replay: &serde_json::Value,
) -> Result<Option<Execution>, ApiError> {
    let Some(execution_id) = replay["id"].as_str().and_then(|id| Uuid::parse_str(id).ok()) else { return Ok(None) };
    let Some(job) = claim::reissue_execution(conn, app, org_id, execution_id).await? else { return Ok(None) };
    let mut execution = fetch_by_id(conn, org_id, execution_id).await?;
    execution.job = Some(Box::new(job));
    Ok(Some(execution))
}

fn replayed(body: serde_json::Value) -> Response {
    let mut response = (StatusCode::OK, Json(body)).into_response();
    response.headers_mut().insert(idempotency::REPLAYED_HEADER, HeaderValue::from_static("true"));
    response
}

/// Launch a flow: queued for a runner, or claimed at once for the caller (`mode: ephemeral`).
#[utoipa::path(post, path = "/flows/{id}/launch", tag = "Flows", params(("id" = Uuid, Path),
        ("Idempotency-Key" = Option<String>, Header, description = "Retries with the same key and body replay the first answer")),
    request_body = Launch,
    responses((status = 201, body = Execution), (status = 200, body = Execution, description = "Idempotent replay"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn launch_flow(
    State(app): State<AppState>,
    caller: Caller<scope::FlowsExecute>,
    ApiPath(flow_id): ApiPath<Uuid>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let launch: Launch = body_or_default(&body)?;
    check_labels("runner_labels", &launch.runner_labels)?;
    let fingerprint = serde_json::to_vec(&(flow_id, &launch)).unwrap_or_default();
    let claim = idempotency::from_headers(&headers, "launch", &fingerprint)?;
    let ephemeral = launch.mode == Some(LaunchMode::Ephemeral);
    let request = LaunchRequest::new(caller.org_id, flow_id, trigger(&headers, "api"), &launch);
    if claim.is_none() && !ephemeral {
        // The plain launch needs no transaction: the execution is created by one statement.
        let mut conn = app.pool.acquire().await?;
        let execution = create_execution(&mut conn, &request).await?;
        app.queue.wake(caller.org_id);
        return Ok((StatusCode::CREATED, Json(execution)).into_response());
    }
    let mut tx = app.pool.begin().await?;
    if let Some(claim) = &claim
        && let Reservation::Replay(body) = idempotency::reserve(&mut tx, caller.org_id, claim).await?
    {
        if ephemeral && let Some(execution) = reissue(&mut tx, &app, caller.org_id, &body).await? {
            tx.commit().await?;
            return Ok(replayed(serde_json::to_value(execution).unwrap_or_default()));
        }
        return Ok(replayed(body));
    }
    let mut execution = create_execution(&mut tx, &request).await?;
    let job = if ephemeral { claim::claim_execution(&mut tx, &app, caller.org_id, execution.id).await? } else { None };
    if job.is_some() {
        execution = fetch_by_id(&mut tx, caller.org_id, execution.id).await?;
    }
    if let Some(claim) = &claim {
        idempotency::store(&mut tx, caller.org_id, claim, &serde_json::to_value(&execution).unwrap_or_default())
            .await?;
    }
    tx.commit().await?;
    app.queue.wake(caller.org_id);
    execution.job = job.map(Box::new);
    Ok((StatusCode::CREATED, Json(execution)).into_response())
}

/// Launch every flow carrying all of `tags` (at most 100 flows).
#[utoipa::path(post, path = "/flows/launch", tag = "Flows",
    params(("Idempotency-Key" = Option<String>, Header, description = "Retries with the same key and body replay the first answer")),
    request_body = LaunchByTag,
    responses((status = 201, body = LaunchedExecutions), (status = 200, body = LaunchedExecutions, description = "Idempotent replay"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody)),
    security(("api_key" = [], "organization" = [])))]
async fn launch_by_tag(
    State(app): State<AppState>,
    caller: Caller<scope::FlowsExecute>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    caller.require(Scope::FlowsRead)?;
    let launch: LaunchByTag = parse_json(&body)?;
    let tags = crate::flows::clean_tags(&launch.tags)?;
    if tags.is_empty() {
        return Err(ApiError::invalid("invalid field `tags`: name at least one tag"));
    }
    check_labels("runner_labels", &launch.runner_labels)?;
    let fingerprint = serde_json::to_vec(&launch).unwrap_or_default();
    let claim = idempotency::from_headers(&headers, "launch_by_tag", &fingerprint)?;
    let mut tx = app.pool.begin().await?;
    if let Some(claim) = &claim
        && let Reservation::Replay(body) = idempotency::reserve(&mut tx, caller.org_id, claim).await?
    {
        return Ok(replayed(body));
    }
    let flow_ids: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM flows WHERE organization_id = $1 AND tags @> $2 ORDER BY name LIMIT 100")
            .bind(caller.org_id)
            .bind(&tags)
            .fetch_all(&mut *tx)
            .await?;
    let common = Launch {
        environment: launch.environment,
        version: launch.version,
        variables: launch.variables,
        runner_labels: launch.runner_labels,
        mode: launch.mode,
    };
    let ephemeral = common.mode == Some(LaunchMode::Ephemeral);
    let mut executions = Vec::with_capacity(flow_ids.len());
    for flow_id in flow_ids {
        let request = LaunchRequest::new(caller.org_id, flow_id, trigger(&headers, "tag"), &common);
        let mut execution = create_execution(&mut tx, &request).await?;
        let job =
            if ephemeral { claim::claim_execution(&mut tx, &app, caller.org_id, execution.id).await? } else { None };
        if job.is_some() {
            execution = fetch_by_id(&mut tx, caller.org_id, execution.id).await?;
        }
        executions.push((execution, job));
    }
    if let Some(claim) = &claim {
        let plain: Vec<&Execution> = executions.iter().map(|(e, _)| e).collect();
        idempotency::store(&mut tx, caller.org_id, claim, &serde_json::json!({"executions": plain})).await?;
    }
    tx.commit().await?;
    app.queue.wake(caller.org_id);
    let executions = executions
        .into_iter()
        .map(|(mut execution, job)| {
            execution.job = job.map(Box::new);
            execution
        })
        .collect();
    Ok((StatusCode::CREATED, Json(LaunchedExecutions { executions })).into_response())
}
