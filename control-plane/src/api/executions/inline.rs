//! `POST /executions`: runs a definition sent with the request, without any stored flow (`hookflow run FILE`).
//! The definition is validated as a flow's draft is (same rules and budgets), its modules and collection requests
//! resolved as a launch resolves them, and the execution records where it came from (`source`, with the SHA-256
//! of the definition's JSON text as received). A definition that names secrets needs `flows:write`, and may use a
//! secret only when the secret's `allowed_hosts` name the hosts it goes to (an empty list, "the hosts the stored
//! flow names", grants an inline definition nothing).

use crate::api::context::Ctx;
use crate::api::executions::idempotency;
use crate::api::executions::launch::{answer_created, check_variables, replay_reserved, trigger};
use crate::api::executions::resolve::{DEFAULT_FLOW_TIMEOUT_S, DEFAULT_MAX_ATTEMPTS, resolve_modules};
use crate::api::flows::model::{check_definition, check_endpoint_reads, definition_error};
use crate::auth::{Caller, scope};
use crate::db::deadline::Deadline;
use crate::error::{ApiError, ApiResult, to_json};
use crate::extract::parse_json;
use crate::queue::inline::{NewInline, create};
use crate::queue::secrets::collect_names;
use axum::Json;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::executions::{Execution, LaunchMode, Trigger};
use hookflow_shared::api::flows_as_code::{InlineEnvironment, InlineLaunch, SOURCE_TEXT_MAX, SourceKind};
use hookflow_shared::api::runners::JobFlow;
use hookflow_shared::flow::definition;
use hookflow_shared::flow::template;
use hookflow_shared::wire::IdempotencyHeader;
use hookflow_shared::{ErrorCode, OrgId, Scope};
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};
use sqlx::PgConnection;
use std::collections::BTreeMap;

/// The execution's flow name when the body names none.
const DEFAULT_NAME: &str = "inline";

/// **Added.** Run a definition sent inline, without creating or changing any stored flow: queued for a runner, or
/// claimed at once for the caller (`mode: ephemeral`).
#[utoipa::path(post, operation_id = "run_inline_definition", path = "/executions", params(IdempotencyHeader),
    request_body = InlineLaunch,
    responses((status = 201, body = hookflow_shared::api::batches::InlineLaunched, description = "The execution, with `flow_id: null` and `source.kind: inline`; with `rows`, a `LaunchedBatch` `{batch_id, executions}` instead"),
        (status = 200, body = hookflow_shared::api::batches::InlineLaunched, description = "Idempotent replay"), (status = 409), (status = 422),
        (status = 400, description = "A problem of the definition or another field, named"),
        (status = 403, description = "Lacks `flows:execute`; or the definition uses a secret without `flows:write`, or a \
            secret whose `allowed_hosts` do not name the host it goes to (the message names the secret)"),
        (status = 413)))]
pub async fn run_inline(ctx: Ctx<scope::FlowsExecute>, headers: HeaderMap, body: Bytes) -> ApiResult<Response> {
    // Whatever the launch waits on the database for is given up at its deadline with a 503.
    Deadline::start().run(run_inline_now(ctx, headers, body)).await?
}

/// The one member read as text: the definition exactly as it came, for its hash.
#[derive(serde::Deserialize)]
struct RawDefinition<'a> {
    #[serde(borrow)]
    definition: &'a RawValue,
}

/// `run_inline`, without its deadline.
async fn run_inline_now(
    Ctx { app, caller }: Ctx<scope::FlowsExecute>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let launch: InlineLaunch = parse_json(&body)?;
    let raw: RawDefinition<'_> =
        serde_json::from_slice(&body).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))?;
    let sha256 = hex::encode(Sha256::digest(raw.definition.get().as_bytes()));
    check_variables(&launch.variables)?;
    if let Some(environment) = &launch.environment {
        check_inline_environment(environment)?;
    }
    check_source(&launch)?;
    if let Some(rows) = &launch.rows {
        crate::api::batches::launch::check_rows(rows)?;
        if launch.mode == Some(LaunchMode::Ephemeral) {
            return Err(ApiError::invalid(
                "invalid field `mode`: rows are queued for runners; `ephemeral` runs one execution",
            ));
        }
    }
    check_definition(&launch.definition)?;
    check_endpoint_reads(&caller, "running", std::iter::once(&launch.definition))?;
    let parsed = definition::validate(&launch.definition).map_err(|p| definition_error(&p))?;
    let mut conn = app.pool.acquire().await?;
    let mut modules = resolve_modules(&mut conn, caller.org_id, &parsed).await?;
    let mut definition = launch.definition.clone();
    let definitions = std::iter::once(&mut definition).chain(modules.values_mut());
    let collection_variables = crate::api::collections::refs::resolve(&mut conn, caller.org_id, definitions).await?;
    // Secrets are checked in what runs: the definition with its collection requests resolved, and its modules (a
    // secret a collection request or a module names is the inline definition's as much as one it writes).
    check_secrets(&mut conn, &caller, &definition, launch.environment.as_ref()).await?;
    for module in modules.values() {
        check_secrets(&mut conn, &caller, module, None).await?;
    }
    drop(conn);
    let ephemeral = launch.mode == Some(LaunchMode::Ephemeral);
    let source = launch.source.as_ref();
    let labelled = !launch.runner_labels.is_empty();
    let new = NewInline {
        replica: app.replica,
        org_id: caller.org_id,
        name: launch.name.as_ref().map_or(DEFAULT_NAME, |n| n.as_str()).to_owned(),
        definition: JobFlow::text_of(&definition),
        modules,
        node_ids: parsed.nodes.iter().map(|n| n.id().to_owned()).collect(),
        timeout_s: parsed.timeout_s.unwrap_or(DEFAULT_FLOW_TIMEOUT_S),
        environment: launch.environment.map(|e| (e.key, e.variables)),
        collection_variables,
        launch_variables: launch.variables,
        runner_labels: launch.runner_labels.to_vec(),
        trigger: trigger(&headers, Trigger::Api),
        max_attempts: if ephemeral { 1 } else { DEFAULT_MAX_ATTEMPTS },
        source: serde_json::json!({
            "kind": SourceKind::Inline,
            "path": source.map(|s| &s.path),
            "definition_sha256": sha256,
            "git_commit": source.and_then(|s| s.git_commit.as_ref()),
            "git_ref": source.and_then(|s| s.git_ref.as_ref()),
        }),
        priority: launch.priority.map_or(3, |p| i16::from(p.get())),
    };
    let key = idempotency::from_headers(&headers, "run_inline", &body)?;
    let _turn = app.shares.take(caller.org_id).await?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    if let Some(answer) = replay_reserved(&mut tx, &app, caller.org_id, key.as_ref(), ephemeral).await? {
        tx.commit().await?;
        return Ok(answer);
    }
    if let Some(rows) = &launch.rows {
        let batch = crate::queue::inline::create_batch(&mut tx, &new, rows).await?;
        if let Some(key) = &key {
            idempotency::store(&mut tx, caller.org_id, key, &to_json(&batch)?).await?;
        }
        tx.commit().await?;
        app.queue.wake(caller.org_id);
        return Ok((StatusCode::CREATED, Json(batch)).into_response());
    }
    let execution: Execution = create(&mut tx, &new).await?;
    answer_created(tx, &app, caller.org_id, execution, ephemeral, key.as_ref(), labelled).await
}

/// The inline environment: its key, its variables' names (none built in) and their templates.
fn check_inline_environment(environment: &InlineEnvironment) -> ApiResult<()> {
    if !hookflow_shared::api::rules::is_key(&environment.key, 64) {
        return Err(ApiError::invalid("invalid field `environment.key`: must be 1 to 64 letters, digits, `_` or `-`"));
    }
    for (name, value) in &environment.variables {
        if let Some(message) = hookflow_shared::flow::names::reserved_problem(name) {
            return Err(ApiError::invalid(format!("invalid field `environment.variables.{name}`: {message}")));
        }
        template::check(value)
            .map_err(|e| ApiError::invalid(format!("invalid field `environment.variables.{name}`: {e}")))?;
    }
    Ok(())
}

/// `source`: a path of 1 to 1,000 characters, a commit and a ref of at most 1,000, none holding a control
/// character.
fn check_source(launch: &InlineLaunch) -> ApiResult<()> {
    let Some(source) = &launch.source else { return Ok(()) };
    let fields = [
        ("path", Some(&source.path)),
        ("git_commit", source.git_commit.as_ref()),
        ("git_ref", source.git_ref.as_ref()),
    ];
    for (field, value) in fields {
        let Some(value) = value else { continue };
        let length = value.chars().count();
        if (field == "path" && length == 0) || length > SOURCE_TEXT_MAX || value.chars().any(char::is_control) {
            return Err(ApiError::invalid(format!(
                "invalid field `source.{field}`: must be {} to {SOURCE_TEXT_MAX} characters without control characters",
                if field == "path" { 1 } else { 0 }
            )));
        }
    }
    Ok(())
}

/// The 403 refusing `name` to an inline definition (the same whether the secret is missing or has no hosts, so
/// the answer tells nothing of the organization's secrets to whoever may not read them).
fn refused_secret(name: &str, why: &str) -> ApiError {
    ApiError::new(ErrorCode::InsufficientScope, format!("an inline definition may not use the secret `{name}`: {why}"))
}

/// Secrets in an inline definition (or its environment): only with `flows:write`, only secrets that list hosts,
/// and (where a request node's URL names its host outright) only to a host the secret lists. Hosts a template
/// chooses are checked by the runner as it sends, against the same lists.
async fn check_secrets(
    conn: &mut PgConnection,
    caller: &Caller<scope::FlowsExecute>,
    definition: &Value,
    environment: Option<&InlineEnvironment>,
) -> ApiResult<()> {
    let mut from_environment = Vec::new();
    for value in environment.iter().flat_map(|e| e.variables.values()) {
        collect_names(&Value::String(value.clone()), &mut from_environment);
    }
    let mut names = Vec::new();
    collect_names(definition, &mut names);
    for name in &from_environment {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let Some(first) = names.first() else { return Ok(()) };
    if !caller.scopes.grants(Scope::FlowsWrite) {
        return Err(ApiError::new(
            ErrorCode::InsufficientScope,
            format!(
                "this definition references the secret `{first}`: running an inline definition that uses secrets also \
                 needs the scope `{}`",
                Scope::FlowsWrite
            ),
        ));
    }
    let listed: BTreeMap<String, Vec<String>> = hosts_of(conn, caller.org_id, &names).await?;
    for name in &names {
        if listed.get(name).is_none_or(Vec::is_empty) {
            return Err(refused_secret(
                name,
                "only a secret whose `allowed_hosts` name the hosts it goes to may be used inline, and this one names none",
            ));
        }
    }
    for node in definition["nodes"].as_array().into_iter().flatten() {
        let Some(host) = literal_host(&node["request"]["url"]) else { continue };
        let mut carried = Vec::new();
        collect_names(node, &mut carried);
        for name in carried.iter().chain(&from_environment) {
            let allowed = listed.get(name).map(Vec::as_slice).unwrap_or_default();
            if !allowed.iter().any(|pattern| host_matches(&host, pattern)) {
                return Err(refused_secret(name, &format!("its `allowed_hosts` do not name {host}")));
            }
        }
    }
    Ok(())
}

/// The `allowed_hosts` of the organization's secrets among `names`.
async fn hosts_of(
    conn: &mut PgConnection,
    org_id: OrgId,
    names: &[String],
) -> ApiResult<BTreeMap<String, Vec<String>>> {
    let rows: Vec<(String, Vec<String>)> =
        sqlx::query_as("SELECT name, allowed_hosts FROM secrets WHERE organization_id = $1 AND name = ANY($2)")
            .bind(org_id)
            .bind(names)
            .fetch_all(conn)
            .await?;
    Ok(rows.into_iter().collect())
}

/// The host of a URL written out in full (lower-case); `None` when a template chooses it.
fn literal_host(url: &Value) -> Option<String> {
    let url = url.as_str()?;
    let scheme_end = url.find("://")? + 3;
    let authority = url[scheme_end..].split(['/', '?', '#']).next()?;
    if authority.contains("{{") || url[..scheme_end].contains("{{") {
        return None;
    }
    let parsed = url::Url::parse(&format!("{}{authority}", &url[..scheme_end])).ok()?;
    parsed.host_str().map(str::to_ascii_lowercase)
}

/// `api.example.com` matches itself; `*.example.com` every subdomain of example.com (as the runner matches).
fn host_matches(host: &str, pattern: &str) -> bool {
    let pattern = pattern.trim().to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(domain) => host.strip_suffix(domain).is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
        None => host == pattern,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_written_out_are_read_and_templated_ones_are_not() {
        let host = |url: &str| literal_host(&Value::String(url.to_owned()));
        assert_eq!(host("https://API.example.com/x/{{secret.a}}").as_deref(), Some("api.example.com"));
        assert_eq!(host("http://127.0.0.1:8080/{{env.path}}").as_deref(), Some("127.0.0.1"));
        assert_eq!(host("{{env.base}}/x"), None);
        assert_eq!(host("https://{{env.host}}/x"), None);
        assert!(host_matches("a.example.com", "*.example.com"));
        assert!(!host_matches("example.com", "*.example.com"));
        assert!(!host_matches("evil.com", "example.com"));
    }
}
