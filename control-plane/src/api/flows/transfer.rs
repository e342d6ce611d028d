//! The export document (`hookflow.flow/v1`: the flow, its versions and environments, never secret values) and
//! importing it as a new flow, in this or another organization.

use crate::api::context::Ctx;
use crate::api::flows::environments::check_environment;
use crate::api::flows::model::{NewFlow, check_definition, check_endpoint_reads, check_schedule, fetch, insert_flow};
use crate::api::flows::versions::insert_version;
use crate::auth::scope;
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiJson, Id};
use crate::state::AppState;
use crate::validate::field;
use axum::Json;
use axum::http::StatusCode;
use hookflow_shared::FlowId;
use hookflow_shared::api::fields::{Name, Refusal, ShortText, Tags};
use hookflow_shared::api::flows::{EXPORT_FORMAT, ExportedEnvironment, ExportedVersion, Flow, FlowDocument, WriteFlow};
use hookflow_shared::api::flows_as_code::FlowKey;
use std::collections::BTreeMap;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(export_flow)).routes(routes!(import_flow))
}

/// The flow as a self-contained document.
#[utoipa::path(get, path = "/flows/{id}/export", params(Id), responses((status = 200, body = FlowDocument)))]
async fn export_flow(Ctx { app, caller }: Ctx<scope::FlowsRead>, Id(id): Id<FlowId>) -> ApiResult<Json<FlowDocument>> {
    let mut conn = app.pool.acquire().await?;
    let flow = fetch(&mut conn, caller.org_id, id).await?;
    let versions: Vec<(i32, Option<String>, serde_json::Value)> = sqlx::query_as(
        "SELECT version, note, definition FROM flow_versions WHERE organization_id = $1 AND flow_id = $2 ORDER BY version",
    )
    .bind(caller.org_id)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    let environments: Vec<(String, sqlx::types::Json<BTreeMap<String, String>>)> = sqlx::query_as(
        "SELECT key, variables FROM flow_environments WHERE organization_id = $1 AND flow_id = $2 ORDER BY key",
    )
    .bind(caller.org_id)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(Json(FlowDocument {
        format: EXPORT_FORMAT.into(),
        flow: as_written(flow)?,
        versions: versions
            .into_iter()
            .map(|(version, note, definition)| ExportedVersion { version, note, definition })
            .collect(),
        environments: environments.into_iter().map(|(key, v)| ExportedEnvironment { key, variables: v.0 }).collect(),
    }))
}

/// The stored flow as `POST /flows` takes it. What the database holds was parsed on its way in: a refusal here
/// is the server's fault.
fn as_written(flow: Flow) -> ApiResult<WriteFlow> {
    let broken = |field: &'static str| {
        move |refusal: Refusal| ApiError::internal_because(format!("flow {}: {}", flow.id, refusal.for_field(field)))
    };
    Ok(WriteFlow {
        name: Name::try_from(flow.name).map_err(broken("name"))?,
        description: flow.description.map(ShortText::try_from).transpose().map_err(broken("description"))?,
        tags: Tags::try_from(flow.tags).map_err(broken("tags"))?,
        definition: flow.definition,
        schedule: flow.schedule,
        key: flow.key.map(FlowKey::try_from).transpose().map_err(broken("key"))?,
        managed: None,
    })
}

/// Import an exported document as a new flow (versions renumbered from 1 in their order).
#[utoipa::path(post, path = "/flows/import", request_body = FlowDocument,
    responses((status = 201, body = Flow), (status = 409),
        (status = 403, description = "`quota_exceeded`: the organization's `flows` quota is reached")))]
async fn import_flow(
    Ctx { app, caller }: Ctx<scope::FlowsWrite>,
    ApiJson(document): ApiJson<FlowDocument>,
) -> Created<Flow> {
    if document.format != EXPORT_FORMAT {
        return Err(ApiError::invalid(format!("invalid field `format`: expected `{EXPORT_FORMAT}`")));
    }
    let source = document.flow;
    let tags = source.tags.distinct();
    // A version's note stays plain text in the document: its refusal names `versions.note`, not one version.
    for note in document.versions.iter().filter_map(|v| v.note.as_deref()) {
        field::<ShortText>("versions.note", note)?;
    }
    for environment in &document.environments {
        check_environment(&environment.key, &environment.variables)?;
    }
    check_schedule(source.schedule.as_deref())?;
    check_definition(&source.definition)?;
    let mut versions = document.versions;
    versions.sort_by_key(|v| v.version);
    for version in &versions {
        check_definition(&version.definition)?;
    }
    let definitions = std::iter::once(&source.definition).chain(versions.iter().map(|v| &v.definition));
    check_endpoint_reads(&caller, "importing", definitions)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    for definition in std::iter::once(&source.definition).chain(versions.iter().map(|v| &v.definition)) {
        crate::api::collections::refs::check(&mut tx, caller.org_id, definition).await?;
    }
    let new = NewFlow {
        org_id: caller.org_id,
        name: source.name.as_str(),
        description: source.description.as_deref(),
        tags: &tags,
        definition: &source.definition,
        schedule: source.schedule.as_deref(),
        key: source.key.as_ref().map(|k| k.as_str()),
        managed: source.managed.unwrap_or(false),
        quotas: app.settings.quotas,
    };
    let id = insert_flow(&mut tx, new).await?;
    for version in &versions {
        insert_version(&mut tx, caller.org_id, id, version.note.as_deref(), &version.definition).await?;
    }
    for environment in &document.environments {
        sqlx::query("INSERT INTO flow_environments (flow_id, organization_id, key, variables) VALUES ($1, $2, $3, $4)")
            .bind(id)
            .bind(caller.org_id)
            .bind(&environment.key)
            .bind(sqlx::types::Json(&environment.variables))
            .execute(&mut *tx)
            .await
            .map_err(|e| match &e {
                sqlx::Error::Database(db) if db.code().as_deref() == Some("23505") => {
                    ApiError::invalid(format!("environment `{}` appears twice", environment.key))
                }
                _ => e.into(),
            })?;
    }
    let flow = fetch(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(flow)))
}
