//! Published versions: publishing snapshots the draft as the next immutable number; versions list newest first;
//! restoring makes a version's definition the draft again. Both are recorded in the audit log.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Ctx;
use crate::api::flows::model::{check_endpoint_reads, ensure_exists, fetch};
use crate::auth::scope;
use crate::db::json_text::JsonText;
use crate::db::owned;
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiPath, Id, parse_json};
use crate::pagination::{self, ListParams, Listed};
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::api::Page;
use hookflow_shared::api::flows::{Flow, FlowVersion, Publish};
use hookflow_shared::{FlowId, FlowVersionId, OrgId};
use sqlx::PgConnection;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(publish))
        .routes(routes!(list_versions))
        .routes(routes!(get_version))
        .routes(routes!(restore_version))
}

type VersionRow = (FlowVersionId, i32, Option<String>, serde_json::Value, DateTime<Utc>);

fn version((id, version, note, definition, created_at): VersionRow) -> FlowVersion {
    FlowVersion { id, version, note, definition, created_at: created_at.into() }
}

/// Inserts the next version of a flow (the flow row must be locked by the caller).
pub async fn insert_version(
    conn: &mut PgConnection,
    org_id: OrgId,
    flow_id: FlowId,
    note: Option<&str>,
    definition: &serde_json::Value,
) -> Result<FlowVersion, sqlx::Error> {
    let row: VersionRow = sqlx::query_as(
        "INSERT INTO flow_versions (id, flow_id, organization_id, version, note, definition)
         VALUES ($1, $2, $3, (SELECT COALESCE(max(version), 0) + 1 FROM flow_versions WHERE flow_id = $2), $4, $5)
         RETURNING id, version, note, definition, created_at",
    )
    .bind(FlowVersionId::now_v7())
    .bind(flow_id)
    .bind(org_id)
    .bind(note)
    .bind(JsonText(definition))
    .fetch_one(conn)
    .await?;
    Ok(version(row))
}

/// Publish the current draft as the next version.
#[utoipa::path(post, operation_id = "publish_flow", path = "/flows/{id}/publish", params(Id), request_body = Publish,
    responses((status = 201, body = FlowVersion)))]
async fn publish(
    Ctx { app, caller }: Ctx<scope::FlowsWrite>,
    Id(id): Id<FlowId>,
    body: axum::body::Bytes,
) -> Created<FlowVersion> {
    // The body is optional: nothing, or `{"note": ...}`.
    let note = if body.iter().all(u8::is_ascii_whitespace) { None } else { parse_json::<Publish>(&body)?.note };
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    // Lock the flow: concurrent publishes number their versions one after the other.
    let select = "SELECT definition FROM flows WHERE organization_id = $1 AND id = $2 FOR UPDATE";
    let (draft,): (serde_json::Value,) = owned::fetch(&mut *tx, select.into(), caller.org_id, id, "flow").await?;
    check_endpoint_reads(&caller, "publishing", std::iter::once(&draft))?;
    let published = insert_version(&mut tx, caller.org_id, id, note.as_deref(), &draft).await?;
    let event = AuditEvent {
        org_id: caller.org_id,
        actor: caller.actor,
        action: "flow.published",
        target: id.to_string(),
        details: serde_json::json!({"version": published.version, "note": note}),
    };
    audit::record(&mut tx, event).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(published)))
}

/// Versions of a flow, newest first.
#[utoipa::path(get, operation_id = "list_flow_versions", path = "/flows/{id}/versions", params(Id, ListParams),
    responses((status = 200, body = Page<FlowVersion>)))]
async fn list_versions(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    Id(id): Id<FlowId>,
    params: ListParams,
) -> Listed<FlowVersion> {
    let mut conn = app.pool.acquire().await?;
    ensure_exists(&mut conn, caller.org_id, id).await?;
    let sql = "SELECT id, version, note, definition, created_at FROM flow_versions
         WHERE organization_id = $1 AND flow_id = $4 AND ($2::int IS NULL OR version < $2) ORDER BY version DESC LIMIT $3";
    let scope = (caller.org_id, Some(id.into()));
    Ok(Json(pagination::keyset_page(&mut *conn, sql.into(), scope, &params, version, |v| v.version).await?))
}

async fn fetch_version(
    conn: &mut PgConnection,
    org_id: OrgId,
    flow_id: FlowId,
    version_id: FlowVersionId,
) -> ApiResult<FlowVersion> {
    let row: Option<VersionRow> = sqlx::query_as(
        "SELECT id, version, note, definition, created_at FROM flow_versions
         WHERE organization_id = $1 AND flow_id = $2 AND id = $3",
    )
    .bind(org_id)
    .bind(flow_id)
    .bind(version_id)
    .fetch_optional(conn)
    .await?;
    row.map(version).ok_or_else(|| ApiError::not_found("flow version"))
}

/// Read one version.
#[utoipa::path(get, operation_id = "get_flow_version", path = "/flows/{id}/versions/{version_id}",
    params(Id, ("version_id" = Uuid, Path)),
    responses((status = 200, body = FlowVersion)))]
async fn get_version(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ApiPath((id, version_id)): ApiPath<(FlowId, FlowVersionId)>,
) -> ApiResult<Json<FlowVersion>> {
    let mut conn = app.pool.acquire().await?;
    Ok(Json(fetch_version(&mut conn, caller.org_id, id, version_id).await?))
}

/// Make a version's definition the draft again.
#[utoipa::path(post, operation_id = "restore_flow_version", path = "/flows/{id}/versions/{version_id}/restore",
    params(Id, ("version_id" = Uuid, Path)),
    responses((status = 200, body = Flow)))]
async fn restore_version(
    Ctx { app, caller }: Ctx<scope::FlowsWrite>,
    ApiPath((id, version_id)): ApiPath<(FlowId, FlowVersionId)>,
) -> ApiResult<Json<Flow>> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let restored = fetch_version(&mut tx, caller.org_id, id, version_id).await?;
    check_endpoint_reads(&caller, "restoring", std::iter::once(&restored.definition))?;
    sqlx::query(
        "UPDATE flows SET definition = $3, draft_revision = draft_revision + 1, updated_at = now()
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(caller.org_id)
    .bind(id)
    .bind(JsonText(&restored.definition))
    .execute(&mut *tx)
    .await?;
    let event = AuditEvent {
        org_id: caller.org_id,
        actor: caller.actor,
        action: "flow.restored",
        target: id.to_string(),
        details: serde_json::json!({"version": restored.version}),
    };
    audit::record(&mut tx, event).await?;
    let flow = fetch(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    Ok(Json(flow))
}
