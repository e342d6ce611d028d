//! The stored flow: its columns and row, reads by id within the organization, the checks every write of a flow
//! makes besides its body's types (definition, schedule, unique name), and the size its bodies may have.

use crate::auth::Caller;
use crate::db::json_text::JsonText;
use crate::db::owned;
use crate::error::{ApiError, ApiResult};
use chrono::{DateTime, Utc};
use hookflow_shared::api::flows::Flow;
use hookflow_shared::flow::definition::{self, Problem};
use hookflow_shared::flow::schedule::Schedule;
use hookflow_shared::{ErrorCode, FlowId, OrgId, Scope};
use sqlx::PgConnection;

/// Flow bodies (definitions, imports, tried nodes) may be up to 10 MiB.
pub const FLOW_BODY_LIMIT: usize = 10 * 1024 * 1024;

pub const FLOW_COLUMNS: &str = "f.id, f.name, f.description, f.tags, f.definition, f.schedule, f.draft_revision,
     (SELECT max(v.version) FROM flow_versions v WHERE v.flow_id = f.id) AS published_version,
     (SELECT x.status FROM executions x WHERE x.flow_id = f.id ORDER BY x.id DESC LIMIT 1) AS last_status,
     f.created_at, f.updated_at, f.key, f.managed";

#[derive(Debug, sqlx::FromRow)]
pub struct FlowRow {
    id: FlowId,
    name: String,
    description: Option<String>,
    tags: Vec<String>,
    definition: serde_json::Value,
    schedule: Option<String>,
    draft_revision: i32,
    published_version: Option<i32>,
    last_status: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    key: Option<String>,
    managed: bool,
}

impl TryFrom<FlowRow> for Flow {
    type Error = ApiError;

    fn try_from(r: FlowRow) -> ApiResult<Self> {
        Ok(Flow {
            id: r.id,
            name: r.name,
            description: r.description,
            tags: r.tags,
            definition: r.definition,
            schedule: r.schedule,
            draft_revision: r.draft_revision,
            published_version: r.published_version,
            last_status: r.last_status.as_deref().map(str::parse).transpose().map_err(ApiError::internal_because)?,
            created_at: r.created_at.into(),
            updated_at: r.updated_at.into(),
            key: r.key,
            managed: r.managed,
        })
    }
}

/// Reads a flow of the caller's organization; another organization's id is 404.
pub async fn fetch(conn: &mut PgConnection, org_id: OrgId, id: FlowId) -> ApiResult<Flow> {
    let select = format!("SELECT {FLOW_COLUMNS} FROM flows f WHERE f.organization_id = $1 AND f.id = $2");
    owned::fetch::<FlowRow, _>(conn, select, org_id, id, "flow").await?.try_into()
}

/// Checks that a flow of the caller's organization exists, without reading it; another organization's id is 404.
pub async fn ensure_exists(conn: &mut PgConnection, org_id: OrgId, id: FlowId) -> ApiResult<()> {
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM flows WHERE organization_id = $1 AND id = $2)")
        .bind(org_id)
        .bind(id)
        .fetch_one(conn)
        .await?;
    if exists { Ok(()) } else { Err(ApiError::not_found("flow")) }
}

/// A 400 listing every problem of a definition.
pub fn definition_error(problems: &[Problem]) -> ApiError {
    let listed: Vec<String> = problems
        .iter()
        .map(|p| match &p.node_id {
            Some(node) => format!("node `{node}` {}: {}", p.field, p.message),
            None => format!("{}: {}", if p.field.is_empty() { "definition" } else { &p.field }, p.message),
        })
        .collect();
    ApiError::invalid(format!("invalid field `definition`: {}", listed.join("; ")))
}

/// Validates a definition for storing. A NUL character (U+0000) is refused anywhere in it, as jsonb refused it:
/// the `json` column would take it, but its operators fail on the whole text (and with them every query into the
/// organization's definitions).
pub fn check_definition(raw: &serde_json::Value) -> ApiResult<()> {
    definition::validate(raw).map_err(|problems| definition_error(&problems))?;
    if holds_nul(raw) {
        return Err(ApiError::invalid("the request holds a NUL character (U+0000), which cannot be stored"));
    }
    Ok(())
}

/// Whether a definition's `webhook` nodes name an endpoint (`webhook.webhook_id`): such a node reads that
/// endpoint's captures, and its results show them.
pub fn names_endpoint(raw: &serde_json::Value) -> bool {
    raw["nodes"].as_array().is_some_and(|nodes| {
        nodes.iter().any(|node| node["kind"] == "webhook" && !node["webhook"]["webhook_id"].is_null())
    })
}

/// A definition whose webhook nodes name an endpoint reads its captures: storing one (or, `doing` says, running
/// one) needs `webhooks:read` as well as the operation's own scope (403 `insufficient_scope`).
pub fn check_endpoint_reads<'a, S>(
    caller: &Caller<S>,
    doing: &str,
    mut definitions: impl Iterator<Item = &'a serde_json::Value>,
) -> ApiResult<()> {
    if caller.scopes.grants(Scope::WebhooksRead) || !definitions.any(names_endpoint) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::InsufficientScope,
        format!(
            "a webhook node of this flow names an endpoint, whose captures it reads: {doing} it also needs the \
             scope `{}`",
            Scope::WebhooksRead
        ),
    ))
}

/// Whether a string or a key anywhere in `value` holds U+0000.
fn holds_nul(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(items) => items.iter().any(holds_nul),
        serde_json::Value::Object(fields) => fields.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        _ => false,
    }
}

pub fn check_schedule(schedule: Option<&str>) -> ApiResult<()> {
    match schedule {
        Some(text) => {
            Schedule::parse(text).map(|_| ()).map_err(|e| ApiError::invalid(format!("invalid field `schedule`: {e}")))
        }
        None => Ok(()),
    }
}

/// A flow to insert, already validated.
#[derive(Debug)]
pub struct NewFlow<'a> {
    pub org_id: OrgId,
    pub name: &'a str,
    pub description: Option<&'a str>,
    pub tags: &'a [String],
    pub definition: &'a serde_json::Value,
    pub schedule: Option<&'a str>,
    /// The flow's key (unique in the organization) and whether `hookflow apply` manages it.
    pub key: Option<&'a str>,
    pub managed: bool,
    /// The server's default quotas (the organization's `flows` quota is checked here).
    pub quotas: crate::quota::QuotaDefaults,
}

/// Inserts a flow and returns its new id; a taken name answers 409, a flow past the organization's `flows` quota
/// 403 `quota_exceeded`.
pub async fn insert_flow(conn: &mut PgConnection, flow: NewFlow<'_>) -> ApiResult<FlowId> {
    crate::quota::admit_created(&mut *conn, flow.org_id, crate::quota::Quota::Flows, flow.quotas).await?;
    let id = FlowId::now_v7();
    sqlx::query(
        "INSERT INTO flows (id, organization_id, name, description, tags, definition, schedule, key, managed)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(id)
    .bind(flow.org_id)
    .bind(flow.name)
    .bind(flow.description)
    .bind(flow.tags)
    .bind(JsonText(flow.definition))
    .bind(flow.schedule.map(str::trim))
    .bind(flow.key)
    .bind(flow.managed)
    .execute(&mut *conn)
    .await
    .map_err(name_taken)?;
    crate::schedules::store::sync_legacy(conn, flow.org_id, id, flow.schedule).await?;
    Ok(id)
}

/// A unique-name (or, by the index `flows_key`, unique-key) violation answers 409.
pub fn name_taken(error: sqlx::Error) -> ApiError {
    let key = matches!(&error, sqlx::Error::Database(db) if db.constraint() == Some("flows_key"));
    if key {
        return crate::error::conflict_on_unique(error, "a flow with that key already exists in this organization");
    }
    crate::error::conflict_on_unique(error, "a flow with that name already exists in this organization")
}
