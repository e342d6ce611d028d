//! `POST /flows/{id}/launch` and `POST /flows/launch` (by tag): validate the body, honour `Idempotency-Key`,
//! queue what the launch resolves to, and wake the claimers. `mode: ephemeral` claims the execution for the
//! caller at once, in the launch's transaction.

use crate::api::context::Ctx;
use crate::api::executions::idempotency::{self, Reservation};
use crate::api::executions::resolve::{LaunchRequest, create_execution, resolve, resolve_kept};
use crate::api::executions::waiting;
use crate::auth::scope;
use crate::db::deadline::Deadline;
use crate::error::{ApiError, ApiResult, to_json, to_json_bytes};
use crate::extract::{ApiPath, Id, parse_json};
use crate::queue::claim::{Claimer, Target, claim};
use crate::queue::create::resolved;
use crate::queue::row::fetch_by_id;
use crate::state::AppState;
use axum::Json;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::executions::{Execution, Launch, LaunchByTag, LaunchMode, LaunchedExecutions, Trigger};
use hookflow_shared::api::runners::Job;
use hookflow_shared::flow::definition::VersionSelector;
use hookflow_shared::flow::names;
use hookflow_shared::wire::{IdempotencyHeader, header};
use hookflow_shared::{FlowId, OrgId, Scope};
use serde::de::DeserializeOwned;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(launch_flow)).routes(routes!(launch_by_tag))
}

/// The launch body, where an empty body means `{}`.
fn body_or_default<T: DeserializeOwned + Default>(bytes: &Bytes) -> ApiResult<T> {
    if bytes.iter().all(u8::is_ascii_whitespace) { Ok(T::default()) } else { parse_json(bytes) }
}

/// `cli` when the CLI says so, else what the operation implies.
pub fn trigger(headers: &HeaderMap, default: Trigger) -> Trigger {
    match headers.get(header::TRIGGER).and_then(|v| v.to_str().ok()) {
        Some(value) if value == Trigger::Cli.as_str() => Trigger::Cli,
        _ => default,
    }
}

pub fn replayed(body: serde_json::Value) -> Response {
    let mut response = (StatusCode::OK, Json(body)).into_response();
    response.headers_mut().insert(header::IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    response
}

/// Claims a just-queued execution for the caller of an ephemeral launch: the execution as it now is, and the job.
pub async fn claim_for_caller(
    conn: &mut PgConnection,
    app: &AppState,
    org_id: OrgId,
    execution: Execution,
) -> ApiResult<(Execution, Option<Job>)> {
    let target = Target::Execution { org_id, execution_id: execution.id };
    match claim(conn, &app.settings.claims(), Claimer::Caller, target).await? {
        Some(job) => Ok((fetch_by_id(conn, org_id, execution.id).await?, Some(job))),
        None => Ok((execution, None)),
    }
}

/// A retried ephemeral launch whose first answer (and so its job token) was lost: the claim is handed out again
/// while nothing was reported under it.
pub async fn reissue(
    conn: &mut PgConnection,
    app: &AppState,
    org_id: OrgId,
    replay: &serde_json::Value,
) -> ApiResult<Option<Execution>> {
    let Some(execution_id) = replay["id"].as_str().and_then(|id| id.parse().ok()) else { return Ok(None) };
    let target = Target::Reissue { org_id, execution_id };
    let Some(job) = claim(conn, &app.settings.claims(), Claimer::Caller, target).await? else { return Ok(None) };
    let mut execution = fetch_by_id(conn, org_id, execution_id).await?;
    execution.job = Some(Box::new(job));
    Ok(Some(execution))
}

/// Published versions are numbered from 1 (within PostgreSQL's `integer`).
fn check_version(version: Option<VersionSelector>) -> ApiResult<()> {
    match version {
        Some(VersionSelector::Number(n)) if n == 0 || i32::try_from(n).is_err() => {
            Err(ApiError::invalid(format!("invalid field `version`: {n} is not a version number (1 or more)")))
        }
        _ => Ok(()),
    }
}

/// Launch variables may not define a built-in name (under `execution.`).
pub fn check_variables(variables: &BTreeMap<String, String>) -> ApiResult<()> {
    match variables.keys().find_map(|name| names::reserved_problem(name).map(|message| (name, message))) {
        Some((name, message)) => Err(ApiError::invalid(format!("invalid field `variables.{name}`: {message}"))),
        None => Ok(()),
    }
}

/// Launch a flow: queued for a runner, or claimed at once for the caller (`mode: ephemeral`); with `rows`, once
/// per row as one batch (answered with a `LaunchedBatch`).
#[utoipa::path(post, path = "/flows/{id}/launch", params(Id, IdempotencyHeader),
    request_body = Launch,
    responses((status = 201, body = Execution, description = "The execution; with `rows`, a `LaunchedBatch` instead"), (status = 200, body = Execution, description = "Idempotent replay"), (status = 409), (status = 422)))]
async fn launch_flow(
    ctx: Ctx<scope::FlowsExecute>,
    flow: ApiPath<FlowId>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    // Whatever the launch waits on the database for is given up at its deadline with a 503.
    Deadline::start().run(launch_flow_now(ctx, flow, headers, body)).await?
}

/// `launch_flow`, without its deadline.
async fn launch_flow_now(
    Ctx { app, caller }: Ctx<scope::FlowsExecute>,
    ApiPath(flow_id): ApiPath<FlowId>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let launch: Launch = body_or_default(&body)?;
    check_version(launch.version)?;
    check_variables(&launch.variables)?;
    let key = idempotency::from_headers(&headers, "launch", &to_json_bytes(&(flow_id, &launch))?)?;
    if launch.rows.is_some() {
        let trigger = trigger(&headers, Trigger::Api);
        return crate::api::batches::launch::launch_rows(&app, caller.org_id, flow_id, trigger, launch, key).await;
    }
    let ephemeral = launch.mode == Some(LaunchMode::Ephemeral);
    let request = LaunchRequest::new(&app, caller.org_id, flow_id, trigger(&headers, Trigger::Api), &launch);
    if key.is_none() && !ephemeral {
        // The plain launch needs no transaction: it shares a statement with the launches made meanwhile. A draft
        // this server keeps is launched without reading anything first, while the statement finds it current.
        // Launches count against their organization's shares: of the writer's byte budget, and of the pool while
        // a flow is read and resolved.
        let kept = match resolve_kept(&request) {
            Some(new) => app.writers.launches.submit_for(caller.org_id, new).await??,
            None => None,
        };
        let mut execution = match kept {
            Some(execution) => execution,
            None => {
                let turn = app.shares.take(caller.org_id).await?;
                let new = resolve(&mut *app.pool.acquire().await?, &request).await?;
                drop(turn);
                resolved(app.writers.launches.submit_for(caller.org_id, new).await??)?
            }
        };
        app.queue.wake(caller.org_id);
        let labelled = !launch.runner_labels.is_empty();
        say_why_it_waits(&app, caller.org_id, std::slice::from_mut(&mut execution), labelled).await;
        return Ok((StatusCode::CREATED, Json(execution)).into_response());
    }
    let _turn = app.shares.take(caller.org_id).await?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    if let Some(answer) = replay_reserved(&mut tx, &app, caller.org_id, key.as_ref(), ephemeral).await? {
        tx.commit().await?;
        return Ok(answer);
    }
    let execution = create_execution(&mut tx, &request).await?;
    let labelled = !launch.runner_labels.is_empty();
    answer_created(tx, &app, caller.org_id, execution, ephemeral, key.as_ref(), labelled).await
}

/// The start of every launch of one execution under an idempotency key: the key reserved, or, when it was used
/// before, the first answer again (an ephemeral launch's claim issued anew). The caller commits.
pub async fn replay_reserved(
    tx: &mut PgConnection,
    app: &AppState,
    org_id: OrgId,
    key: Option<&idempotency::Claim>,
    ephemeral: bool,
) -> ApiResult<Option<Response>> {
    let Some(key) = key else { return Ok(None) };
    let Reservation::Replay(body) = idempotency::reserve(&mut *tx, org_id, key).await? else { return Ok(None) };
    if ephemeral && let Some(execution) = reissue(&mut *tx, app, org_id, &body).await? {
        return Ok(Some(replayed(to_json(&execution)?)));
    }
    Ok(Some(replayed(body)))
}

/// The end of every launch of one execution (a flow's, or an inline definition's): claimed at once for the caller
/// when `ephemeral`, the answer kept under the idempotency key, committed, runners woken; 201 with the execution
/// (why it waits, when `labelled`).
pub async fn answer_created(
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    app: &AppState,
    org_id: OrgId,
    mut execution: Execution,
    ephemeral: bool,
    key: Option<&idempotency::Claim>,
    labelled: bool,
) -> ApiResult<Response> {
    let mut job = None;
    if ephemeral {
        (execution, job) = claim_for_caller(&mut tx, app, org_id, execution).await?;
    }
    if let Some(key) = key {
        idempotency::store(&mut tx, org_id, key, &to_json(&execution)?).await?;
    }
    tx.commit().await?;
    app.queue.wake(org_id);
    execution.job = job.map(Box::new);
    say_why_it_waits(app, org_id, std::slice::from_mut(&mut execution), labelled).await;
    Ok((StatusCode::CREATED, Json(execution)).into_response())
}

/// Sets `waiting_reason` on the queued executions of a launch's answer, as a read would say it now (not kept for
/// an idempotent replay). The launch is committed already, so a failure here leaves the reason null rather than
/// answering an error a client would retry into a second launch; so does a database slower than
/// [`WAITING_REASON_WITHIN`] (the request's own deadline would otherwise answer 503 for a committed launch).
/// Only labelled launches ask (`labelled`): an unlabelled one is any runner's (the embedded one's too), and its
/// answer keeps the launch path free of the extra queries (a read says why it waits).
async fn say_why_it_waits(app: &AppState, org_id: OrgId, executions: &mut [Execution], labelled: bool) {
    if !labelled {
        return;
    }
    let filled = async {
        let mut conn = app.pool.acquire().await?;
        waiting::fill(app, &mut conn, org_id, executions).await
    };
    match tokio::time::timeout(WAITING_REASON_WITHIN, filled).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(%org_id, error = %e.message, "a launch answer goes without its waiting reason"),
        Err(_) => tracing::warn!(%org_id, "a launch answer goes without its waiting reason: the database was slow"),
    }
}

/// How long a launch answer waits for its `waiting_reason`.
const WAITING_REASON_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// The flows of the organization carrying every one of `tags`, by name, at most 100.
async fn flows_tagged(conn: &mut PgConnection, org_id: OrgId, tags: &[String]) -> ApiResult<Vec<FlowId>> {
    Ok(sqlx::query_scalar("SELECT id FROM flows WHERE organization_id = $1 AND tags @> $2 ORDER BY name LIMIT 100")
        .bind(org_id)
        .bind(tags)
        .fetch_all(conn)
        .await?)
}

/// Launch every flow carrying all of `tags` (at most 100 flows).
#[utoipa::path(post, operation_id = "launch_flows_by_tag", path = "/flows/launch", params(IdempotencyHeader), request_body = LaunchByTag,
    responses((status = 201, body = LaunchedExecutions),
        (status = 200, body = LaunchedExecutions, description = "Idempotent replay"), (status = 409), (status = 422)))]
async fn launch_by_tag(ctx: Ctx<scope::FlowsExecute>, headers: HeaderMap, body: Bytes) -> ApiResult<Response> {
    // Whatever the launch waits on the database for is given up at its deadline with a 503.
    Deadline::start().run(launch_by_tag_now(ctx, headers, body)).await?
}

/// `launch_by_tag`, without its deadline.
async fn launch_by_tag_now(
    Ctx { app, caller }: Ctx<scope::FlowsExecute>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require(Scope::FlowsRead)?;
    let launch: LaunchByTag = parse_json(&body)?;
    let tags = launch.tags.distinct();
    if tags.is_empty() {
        return Err(ApiError::invalid("invalid field `tags`: name at least one tag"));
    }
    check_version(launch.version)?;
    check_variables(&launch.variables)?;
    let key = idempotency::from_headers(&headers, "launch_by_tag", &to_json_bytes(&launch)?)?;
    let _turn = app.shares.take(caller.org_id).await?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    if let Some(key) = &key
        && let Reservation::Replay(body) = idempotency::reserve(&mut tx, caller.org_id, key).await?
    {
        return Ok(replayed(body));
    }
    let flow_ids = flows_tagged(&mut tx, caller.org_id, &tags).await?;
    let common = Launch {
        environment: launch.environment,
        version: launch.version,
        variables: launch.variables,
        runner_labels: launch.runner_labels,
        mode: launch.mode,
        priority: launch.priority,
        rows: None,
    };
    let mut executions = Vec::with_capacity(flow_ids.len());
    for flow_id in flow_ids {
        let request = LaunchRequest::new(&app, caller.org_id, flow_id, trigger(&headers, Trigger::Tag), &common);
        let execution = create_execution(&mut tx, &request).await?;
        executions.push(match common.mode {
            Some(LaunchMode::Ephemeral) => claim_for_caller(&mut tx, &app, caller.org_id, execution).await?,
            _ => (execution, None),
        });
    }
    if let Some(key) = &key {
        let plain: Vec<&Execution> = executions.iter().map(|(e, _)| e).collect();
        idempotency::store(&mut tx, caller.org_id, key, &serde_json::json!({"executions": plain})).await?;
    }
    tx.commit().await?;
    app.queue.wake(caller.org_id);
    let mut executions: Vec<Execution> = executions
        .into_iter()
        .map(|(mut execution, job)| {
            execution.job = job.map(Box::new);
            execution
        })
        .collect();
    let labelled = !common.runner_labels.is_empty();
    say_why_it_waits(&app, caller.org_id, &mut executions, labelled).await;
    Ok((StatusCode::CREATED, Json(LaunchedExecutions { executions })).into_response())
}
