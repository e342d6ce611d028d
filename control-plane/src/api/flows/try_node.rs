//! Trying a node (`POST /flows/{flow_id}/try`): one request node sent now through the runner engine, as the
//! embedded runner would send it in a run of the flow's draft (the organization's network policy, the flow's,
//! environment's, organization's and the body's variables, secrets resolved and masked), answered as its node
//! result. Nothing is stored. Bounded: a capped node timeout, the engine's response limits (at most 50
//! extractors, bodies parsed once), and a few tries in flight per organization on each server, each holding its
//! slot until its work has ended (work past the timeout is stopped, then awaited).

use crate::api::context::Ctx;
use crate::api::executions::launch::check_variables;
use crate::api::flows::model::FLOW_BODY_LIMIT;
use crate::auth::{Caller, scope};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiPath, parse_json};
use crate::queue::secrets::{self, Wanted};
use crate::state::{AppState, TRIES_PER_ORGANIZATION};
use axum::Json;
use axum::body::Body;
use hookflow_shared::api::executions::NodeResult;
use hookflow_shared::api::flows::TryNode;
use hookflow_shared::api::runners::{Job, VariableLayers};
use hookflow_shared::flow::definition::{self, Node, Problem, RequestNode};
use hookflow_shared::{ErrorCode, FlowId, OrgId, Scope};
use serde_json::{Value, json};
use sqlx::PgConnection;
use sqlx::types::Json as SqlJson;
use std::collections::BTreeMap;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(try_flow_node))
}

/// A tried node waits for its answer at most this long (its own `timeout_ms` when shorter; the default of nodes).
pub const MAX_NODE_TIMEOUT_MS: u64 = 30_000;
/// The whole try (rendering, sending, reading, extracting, asserting) at most.
pub const MAX_TRY_S: u64 = 35;

/// Send one request node now, with the flow's variables, and answer its result; nothing is stored.
#[utoipa::path(post, operation_id = "try_flow_node", path = "/flows/{flow_id}/try",
    params(("flow_id" = Uuid, Path)), request_body = TryNode,
    responses((status = 200, body = NodeResult, description = "The node's result: passed, failed (an assertion) or \
        error (the request could not be made, or was refused)"),
        (status = 400, description = "Not one request node, a problem of the node, an unknown environment"),
        (status = 403, description = "Lacks `flows:execute`, or `flows:write` for a try that references secrets"),
        (status = 413), (status = 429, description = "The organization has 4 tries in flight on this server")))]
async fn try_flow_node(
    Ctx { app, caller }: Ctx<scope::FlowsExecute>,
    ApiPath(flow_id): ApiPath<FlowId>,
    body: Body,
) -> ApiResult<Json<NodeResult>> {
    let Some(_slot) = app.tries.in_flight.take(caller.org_id) else {
        let mut refused = ApiError::new(
            ErrorCode::RateLimited,
            format!("this organization has {TRIES_PER_ORGANIZATION} tries in flight on this server; try again shortly"),
        );
        refused.retry_after_s = Some(1);
        return Err(refused);
    };
    let too_large = || ApiError::new(ErrorCode::PayloadTooLarge, "request body too large");
    let bytes = crate::http::body::read_within(body, FLOW_BODY_LIMIT, too_large, |_| Ok(())).await?;
    let body: TryNode = parse_json(&bytes)?;
    check_variables(&body.variables)?;
    let tried = prepare(&app, &caller, flow_id, body).await?;
    run(&app, caller.org_id, tried).await
}

/// Resolves what a try sends: the flow's variables, the node (a collection request inlined), the layers of
/// variables and the secrets referenced.
async fn prepare(
    app: &AppState,
    caller: &Caller<scope::FlowsExecute>,
    flow_id: FlowId,
    body: TryNode,
) -> ApiResult<Try> {
    let org_id = caller.org_id;
    let mut conn = app.pool.acquire().await?;
    let (flow_name, flow_variables) = read_flow(&mut conn, org_id, flow_id).await?;
    check_kind(&body.node)?;
    let mut definition = json!({"variables": flow_variables, "nodes": [body.node]});
    request_node(&definition)?;
    // A collection request is inlined as a launch inlines it; its collection's variables sit under the others.
    let collections =
        crate::api::collections::refs::resolve(&mut conn, org_id, std::iter::once(&mut definition)).await?;
    let mut node = request_node(&definition)?;
    node.timeout_ms = Some(node.timeout_ms.unwrap_or(MAX_NODE_TIMEOUT_MS).min(MAX_NODE_TIMEOUT_MS));
    let layers = layers(&mut conn, org_id, flow_id, body.environment.as_deref(), body.variables, collections).await?;
    let wanted = Wanted {
        org_id,
        parts: std::iter::once(secrets::Part::Value(&definition)),
        environment: layers.environment.values(),
        withhold_runners_only: true,
    };
    // A try sends what its caller wrote: a secret goes where the node says only for whoever could store that node.
    let secrets = if caller.scopes.grants(Scope::FlowsWrite) {
        secrets::resolve(&mut conn, &app.settings.master_key, wanted).await?
    } else if let Some(name) = wanted.names().first() {
        return Err(ApiError::new(
            ErrorCode::InsufficientScope,
            format!(
                "this try references the secret `{name}`: trying a node that uses secrets also needs the scope `{}`",
                Scope::FlowsWrite
            ),
        ));
    } else {
        secrets::RunSecrets::default()
    };
    Ok(Try { flow_id, flow_name, definition, layers, node, flow_variables, secrets })
}

/// What a try sends, resolved.
struct Try {
    flow_id: FlowId,
    flow_name: String,
    definition: Value,
    layers: VariableLayers,
    node: RequestNode,
    flow_variables: BTreeMap<String, String>,
    secrets: secrets::RunSecrets,
}

/// Sends the node through the engine under the organization's network policy.
async fn run(app: &AppState, org_id: OrgId, tried: Try) -> ApiResult<Json<NodeResult>> {
    let network = crate::outbound::policy_for(&app.pool, app.settings.allow_private_targets, org_id).await?;
    let mut job = Job::standalone(&tried.flow_name, tried.definition, MAX_TRY_S);
    job.flow.id = tried.flow_id;
    job.network = network;
    job.variables = merged(&tried.layers);
    job.layers = Some(tried.layers);
    job.secrets = tried.secrets.values;
    job.secret_hosts = tried.secrets.hosts;
    job.withheld_secrets = tried.secrets.withheld;
    let engine = app.tries.engine();
    match engine.run_single(&job, &tried.node, &tried.flow_variables, &app.shutdown).await {
        Some(result) => Ok(Json(result)),
        None => Err(ApiError::unavailable()),
    }
}

type Variables = BTreeMap<String, String>;

/// The flow's name and its draft's own variables; another organization's flow is 404.
async fn read_flow(
    conn: &mut PgConnection,
    org_id: OrgId,
    flow_id: FlowId,
) -> ApiResult<(String, BTreeMap<String, String>)> {
    let row: Option<(String, Option<SqlJson<Variables>>)> =
        sqlx::query_as("SELECT name, definition->'variables' FROM flows WHERE organization_id = $1 AND id = $2")
            .bind(org_id)
            .bind(flow_id)
            .fetch_optional(conn)
            .await?;
    let (name, variables) = row.ok_or_else(|| ApiError::not_found("flow"))?;
    Ok((name, variables.map(|v| v.0).unwrap_or_default()))
}

/// Only request nodes are tried.
fn check_kind(node: &Value) -> ApiResult<()> {
    let Some(fields) = node.as_object() else {
        return Err(ApiError::invalid("invalid field `node`: expected one request node (an object)"));
    };
    match fields.get("kind").and_then(Value::as_str) {
        Some("request") | None => Ok(()),
        Some(other) => Err(ApiError::invalid(format!(
            "invalid field `node.kind`: only `request` nodes can be tried, not `{other}` nodes"
        ))),
    }
}

/// The node of a one-node definition, validated as a flow's nodes are.
fn request_node(definition: &Value) -> ApiResult<RequestNode> {
    let parsed = definition::validate(definition).map_err(|problems| node_error(&problems))?;
    match parsed.nodes.into_iter().next() {
        Some(Node::Request(node)) => Ok(*node),
        _ => Err(ApiError::invalid("invalid field `node.kind`: only `request` nodes can be tried")),
    }
}

/// A 400 listing every problem of the node, each naming its field under `node` (`node.request.url`) and the node.
fn node_error(problems: &[Problem]) -> ApiError {
    let listed: Vec<String> = problems
        .iter()
        .map(|p| match (p.node_id.as_deref(), p.field.as_str()) {
            (Some(id), "") => format!("invalid field `node` (node `{id}`): {}", p.message),
            (Some(id), field) => format!("invalid field `node.{field}` (node `{id}`): {}", p.message),
            (None, "") => format!("invalid field `node`: {}", p.message),
            (None, field) => format!("invalid field `{field}`: {}", p.message),
        })
        .collect();
    ApiError::invalid(listed.join("; "))
}

/// The variables by origin: collections under the organization's (`base`), the environment's, the body's.
async fn layers(
    conn: &mut PgConnection,
    org_id: OrgId,
    flow_id: FlowId,
    environment: Option<&str>,
    launch: BTreeMap<String, String>,
    collections: BTreeMap<String, String>,
) -> ApiResult<VariableLayers> {
    let organization: Vec<(String, String)> =
        sqlx::query_as("SELECT name, value FROM variables WHERE organization_id = $1")
            .bind(org_id)
            .fetch_all(&mut *conn)
            .await?;
    let mut base = collections;
    base.extend(organization);
    let environment = match environment {
        None => BTreeMap::new(),
        Some(key) => {
            let found: Option<SqlJson<BTreeMap<String, String>>> = sqlx::query_scalar(
                "SELECT variables FROM flow_environments WHERE organization_id = $1 AND flow_id = $2 AND key = $3",
            )
            .bind(org_id)
            .bind(flow_id)
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?;
            found
                .ok_or_else(|| {
                    ApiError::invalid(format!("invalid field `environment`: the flow has no environment `{key}`"))
                })?
                .0
        }
    };
    Ok(VariableLayers { base, environment, launch })
}

/// The layers as one map, the narrowest winning (what `Job::variables` holds for runners that read no layers).
fn merged(layers: &VariableLayers) -> BTreeMap<String, String> {
    let mut merged = layers.base.clone();
    merged.extend(layers.environment.clone());
    merged.extend(layers.launch.clone());
    merged
}
