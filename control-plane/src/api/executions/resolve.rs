//! What a launch runs: the draft or a published version of a flow, the published versions its module nodes run
//! (to a depth of five), and the collection requests it references, resolved and handed to the queue.

use crate::api::flows::model::definition_error;
use crate::error::{ApiError, ApiResult};
use crate::queue;
use crate::queue::create::NewExecution;
use crate::queue::drafts::{Draft, Drafts};
use crate::state::AppState;
use chrono::{DateTime, Utc};
use hookflow_shared::api::executions::{Execution, Launch, LaunchMode, Trigger};
use hookflow_shared::api::runners::{JobFlow, module_key};
use hookflow_shared::flow::definition::{self, FlowDefinition, Node, VersionSelector};
use hookflow_shared::{FlowId, OrgId};
use serde_json::value::RawValue;
use sqlx::PgConnection;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

/// Flows run at most this long when their definition sets no `timeout_s`.
pub const DEFAULT_FLOW_TIMEOUT_S: u64 = 300;
pub const DEFAULT_MAX_ATTEMPTS: i32 = 3;
/// The priority of launches that set none (scheduled and triggered launches among them).
pub const DEFAULT_PRIORITY: i16 = 3;
const MAX_MODULE_DEPTH: usize = 5;

/// What to launch.
#[derive(Debug)]
pub struct LaunchRequest<'a> {
    /// The replica launching, which wakes its own waiting polls in memory (nil: notify every replica).
    pub replica: Uuid,
    /// The drafts this server has validated already.
    pub drafts: &'a Drafts,
    pub org_id: OrgId,
    pub flow_id: FlowId,
    pub trigger: Trigger,
    pub environment: Option<&'a str>,
    pub version: Option<VersionSelector>,
    pub variables: &'a BTreeMap<String, String>,
    pub runner_labels: &'a [String],
    pub max_attempts: i32,
    /// 1 (highest) to 5.
    pub priority: i16,
}

impl<'a> LaunchRequest<'a> {
    /// A launch of `flow_id` as a launch body asks; ephemeral runs belong to their caller, so if the caller
    /// vanishes they fail instead of moving to a runner.
    pub fn new(app: &'a AppState, org_id: OrgId, flow_id: FlowId, trigger: Trigger, launch: &'a Launch) -> Self {
        let ephemeral = launch.mode == Some(LaunchMode::Ephemeral);
        Self {
            replica: app.replica,
            drafts: &app.drafts,
            org_id,
            flow_id,
            trigger,
            environment: launch.environment.as_deref(),
            version: launch.version,
            variables: &launch.variables,
            runner_labels: &launch.runner_labels,
            max_attempts: if ephemeral { 1 } else { DEFAULT_MAX_ATTEMPTS },
            priority: i16::from(launch.priority.unwrap_or_default().get()),
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
    org_id: OrgId,
    flow_id: FlowId,
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
pub async fn resolve_modules(
    conn: &mut PgConnection,
    org_id: OrgId,
    root: &FlowDefinition,
) -> ApiResult<BTreeMap<String, serde_json::Value>> {
    let mut modules = BTreeMap::new();
    // The flows of the current depth: the root, then the modules found at the depth before.
    let mut found: Vec<FlowDefinition>;
    let mut level: Vec<&FlowDefinition> = vec![root];
    for depth in 0..=MAX_MODULE_DEPTH {
        let mut next = Vec::new();
        for flow in level {
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
        found = next;
        level = found.iter().collect();
    }
    Ok(modules)
}

/// Resolves what runs: the draft or a published version, its modules, collection requests inlined.
pub async fn resolve(conn: &mut PgConnection, request: &LaunchRequest<'_>) -> ApiResult<NewExecution> {
    let (flow_name, draft_revision, draft) = read_flow(conn, request).await?;
    if request.version.is_none()
        && let Some(draft) = draft.as_ref().filter(|draft| draft.self_contained)
    {
        return Ok(self_contained(request, flow_name, draft_revision, draft));
    }
    let (flow_version, mut raw, parsed) = match (request.version, &draft) {
        (None, Some(draft)) => (None, draft.raw.clone(), Cow::Borrowed(&draft.parsed)),
        (Some(selector), _) => {
            let (number, raw) = chosen_version(conn, request, selector).await?;
            let parsed = definition::validate(&raw).map_err(|p| definition_error(&p))?;
            (Some(number), raw, Cow::Owned(parsed))
        }
        (None, None) => return Err(ApiError::internal_because("a draft launch came without its draft")),
    };
    let mut modules = resolve_modules(conn, request.org_id, &parsed).await?;
    // Collection requests are inlined now, so the run uses them as they are at launch.
    let definitions = std::iter::once(&mut raw).chain(modules.values_mut());
    let collection_variables = crate::api::collections::refs::resolve(conn, request.org_id, definitions).await?;
    let definition = JobFlow::text_of(&raw);
    let flow = JobFlow { id: request.flow_id, name: flow_name, version: flow_version, definition };
    Ok(new_execution(request, flow, draft_revision, &parsed, modules, collection_variables))
}

/// A launch of the draft this server keeps for the flow, when that draft needs nothing else read (no module
/// nodes, no collection requests): it reads nothing, and the statement creates it only while the flow row still
/// has the kept draft's revision and update time (`NewExecution::kept_draft`). `None` when the launch must be
/// resolved.
pub fn resolve_kept(request: &LaunchRequest<'_>) -> Option<NewExecution> {
    if request.version.is_some() {
        return None;
    }
    let draft = request.drafts.get(request.flow_id).filter(|draft| draft.self_contained)?;
    // The name stored is the flow row's (see the create statement).
    let mut new = self_contained(request, String::new(), draft.revision, &draft);
    new.kept_draft = Some((draft.revision, draft.updated_at));
    Some(new)
}

/// The queued execution of a launch of a self-contained draft: nothing to inline or add, its text is what runs.
fn self_contained(request: &LaunchRequest<'_>, flow_name: String, draft_revision: i32, draft: &Draft) -> NewExecution {
    let flow = JobFlow { id: request.flow_id, name: flow_name, version: None, definition: draft.text.clone() };
    new_execution(request, flow, draft_revision, &draft.parsed, BTreeMap::new(), BTreeMap::new())
}

/// The queued execution of a launch resolved to `flow` (as `parsed`), its modules and collection variables.
fn new_execution(
    request: &LaunchRequest<'_>,
    flow: JobFlow,
    draft_revision: i32,
    parsed: &FlowDefinition,
    modules: BTreeMap<String, serde_json::Value>,
    collection_variables: BTreeMap<String, String>,
) -> NewExecution {
    NewExecution {
        replica: request.replica,
        org_id: request.org_id,
        flow,
        draft_revision,
        kept_draft: None,
        modules,
        node_ids: parsed.nodes.iter().map(|n| n.id().to_owned()).collect(),
        timeout_s: parsed.timeout_s.unwrap_or(DEFAULT_FLOW_TIMEOUT_S),
        environment: request.environment.map(str::to_owned),
        collection_variables,
        launch_variables: request.variables.clone(),
        runner_labels: request.runner_labels.to_vec(),
        trigger: request.trigger,
        max_attempts: request.max_attempts,
        priority: request.priority,
    }
}

/// The flow's name, its draft's revision and, for a launch of the draft, the draft: kept by this server while its
/// revision and update time match the row (the definition is then not even read), else read, validated and kept.
async fn read_flow(
    conn: &mut PgConnection,
    request: &LaunchRequest<'_>,
) -> ApiResult<(String, i32, Option<Arc<Draft>>)> {
    let of_draft = request.version.is_none();
    let kept = of_draft.then(|| request.drafts.get(request.flow_id)).flatten();
    let row: Option<(String, i32, DateTime<Utc>, Option<String>)> = sqlx::query_as(
        "SELECT name, draft_revision, updated_at,
             CASE WHEN NOT $5 OR (draft_revision = $3 AND updated_at = $4) THEN NULL ELSE definition::text END
         FROM flows WHERE organization_id = $1 AND id = $2",
    )
    .bind(request.org_id)
    .bind(request.flow_id)
    .bind(kept.as_ref().map(|d| d.revision))
    .bind(kept.as_ref().map(|d| d.updated_at))
    .bind(of_draft)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((name, revision, updated_at, text)) = row else { return Err(ApiError::not_found("flow")) };
    let text = match (text, kept) {
        (None, kept) => return Ok((name, revision, kept)),
        (Some(text), _) => text,
    };
    let draft = Arc::new(off_workers_if_large(text.len(), move || parse_draft(revision, updated_at, text)).await?);
    request.drafts.keep(request.flow_id, Arc::clone(&draft));
    Ok((name, revision, Some(draft)))
}

/// A draft's definition as read: parsed and validated.
fn parse_draft(revision: i32, updated_at: DateTime<Utc>, text: String) -> ApiResult<Draft> {
    let text = RawValue::from_string(text).map_err(ApiError::internal_because)?;
    let raw: serde_json::Value = serde_json::from_str(text.get()).map_err(ApiError::internal_because)?;
    let parsed = definition::validate(&raw).map_err(|p| definition_error(&p))?;
    Ok(Draft::read(revision, updated_at, text, raw, parsed))
}

/// Definitions larger than this are parsed off the async workers: one of 10 MiB takes a worker long enough (tens
/// of milliseconds, seconds on a starved machine, several launches at once) to hold up every other request's
/// timers and connections with it, so a neighbour's pool wait timed out while the pool had room.
const PARSE_OFF_WORKERS: usize = 64 * 1024;

/// Runs `work` on the blocking pool when `size` is over `PARSE_OFF_WORKERS`, else here.
async fn off_workers_if_large<T: Send + 'static>(
    size: usize,
    work: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    if size <= PARSE_OFF_WORKERS {
        return work();
    }
    tokio::task::spawn_blocking(work).await.map_err(ApiError::internal_because)?
}

/// Resolves what runs and queues it (in the caller's transaction, if any); runners are woken when it commits.
pub async fn create_execution(conn: &mut PgConnection, request: &LaunchRequest<'_>) -> ApiResult<Execution> {
    let new = resolve(conn, request).await?;
    queue::create::create(conn, new).await
}

/// The published version a launch selects, with its definition.
async fn chosen_version(
    conn: &mut PgConnection,
    request: &LaunchRequest<'_>,
    selector: VersionSelector,
) -> ApiResult<(i32, serde_json::Value)> {
    match published(conn, request.org_id, request.flow_id, selector_number(Some(selector))).await? {
        Some((number, raw)) => Ok((number, raw)),
        None if matches!(selector, VersionSelector::Number(_)) => {
            Err(ApiError::invalid("invalid field `version`: the flow has no such published version"))
        }
        None => Err(ApiError::invalid("invalid field `version`: the flow has no published version yet")),
    }
}
