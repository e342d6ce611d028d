//! Storing a converted import (or, for a preview, answering what would be stored): the collection with its
//! requests, the flow of the requests in order, or a Postman environment written into a flow. All in one
//! transaction: a refused flow stores no collection either.

use crate::api::collections::crud::{NewCollection, insert_collection};
use crate::api::collections::import::{insert_generated, record_sync, store_source};
use crate::api::collections::imports::build;
use crate::api::collections::imports::model::Prepared;
use crate::api::collections::model::detail;
use crate::api::collections::openapi::mapping::GeneratedRequest;
use crate::api::flows::environments::check_environment;
use crate::api::flows::model::{NewFlow, check_definition, insert_flow};
use crate::auth::{Caller, scope};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::validate::field;
use hookflow_shared::api::collections::{Collection, CollectionDetail, CollectionRequest, Folder, ImportSummary};
use hookflow_shared::api::fields::{CollectionVariables, Name};
use hookflow_shared::api::imports::{ImportAnswer, ImportDocument, ImportFormat, ImportedFlow};
use hookflow_shared::{CollectionId, CollectionRequestId, FlowId};
use sqlx::PgConnection;

pub async fn apply(
    app: &AppState,
    caller: &Caller<scope::CollectionsWrite>,
    body: &ImportDocument,
    prepared: Prepared,
    store: bool,
) -> ApiResult<ImportAnswer> {
    let Prepared { format, mut converted, openapi, sha256 } = prepared;
    if let Some(flow_id) = body.flow_id {
        return environment_into_flow(app, caller, flow_id, converted, store).await;
    }
    let generated = match &openapi {
        Some(mapped) => mapped.requests.clone(),
        None => build::collection_requests(&mut converted),
    };
    let name = match &body.name {
        Some(name) => name.clone(),
        None => field::<Name>("name", converted.title.trim())?,
    };
    CollectionVariables::try_from(converted.variables.clone())
        .map_err(|refusal| ApiError::invalid(refusal.for_field("variables")))?;
    let variables = &converted.variables;
    let flow = match &body.flow {
        Some(flow) => {
            if converted.requests.is_empty() {
                return Err(ApiError::invalid("invalid field `flow`: the document holds no request to make a flow of"));
            }
            let definition = build::flow_definition(&converted);
            check_definition(&definition)?;
            Some((flow.name.as_str().to_owned(), definition))
        }
        None => None,
    };
    let summary = ImportSummary {
        requests: generated.len(),
        folders: folders(&generated).len(),
        warnings: converted.report.warnings.clone(),
    };
    if !store {
        let collection = preview(name.as_str(), variables, &generated);
        let flow = flow.map(|(name, definition)| ImportedFlow {
            id: None,
            name,
            definition: Some(definition),
            environment: None,
        });
        return Ok(ImportAnswer { collection: Some(collection), summary, report: converted.report, flow });
    }
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let new = NewCollection { name: name.as_str(), description: None, variables };
    let id = insert_collection(&mut tx, caller.org_id, new).await?;
    insert_generated(&mut tx, caller.org_id, id, &generated).await?;
    if format == ImportFormat::Openapi
        && let Some(sha256) = &sha256
    {
        // Kept in sync like `POST /collections/import/openapi`'s (a Swagger 2.0 source cannot be: sync reads 3.x).
        store_source(&mut tx, caller.org_id, id, &body.source, false).await?;
        record_sync(&mut tx, id, sha256, [generated.len(), 0, 0, 0]).await?;
    }
    let flow = match flow {
        Some((name, definition)) => {
            let new = NewFlow {
                org_id: caller.org_id,
                name: &name,
                description: None,
                tags: &[],
                definition: &definition,
                schedule: None,
                quotas: app.settings.quotas,
                key: None,
                managed: false,
            };
            let flow_id = insert_flow(&mut tx, new).await?;
            Some(ImportedFlow { id: Some(flow_id), name, definition: None, environment: None })
        }
        None => None,
    };
    let collection = detail(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    tracing::info!(collection_id = %id, format = format.as_str(), requests = generated.len(),
        not_converted = converted.report.not_converted.len(), "document imported");
    Ok(ImportAnswer { collection: Some(collection), summary, report: converted.report, flow })
}

/// A Postman environment written as a flow's environment, keyed by its name (letters, digits, `_`, `-`; other
/// characters become `-`).
async fn environment_into_flow(
    app: &AppState,
    caller: &Caller<scope::CollectionsWrite>,
    flow_id: FlowId,
    mut converted: crate::api::collections::imports::model::Converted,
    store: bool,
) -> ApiResult<ImportAnswer> {
    let mut key: String = converted
        .title
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' })
        .take(64)
        .collect();
    if key.is_empty() {
        key = "imported".into();
    }
    if key != converted.title {
        converted.warn(format!("the environment is keyed `{key}` (keys are letters, digits, _ and -)"));
    }
    check_environment(&key, &converted.variables)?;
    let mut conn = app.pool.acquire().await?;
    let name = flow_name(&mut conn, caller, flow_id).await?;
    if store {
        sqlx::query(
            "INSERT INTO flow_environments (flow_id, organization_id, key, variables) VALUES ($1, $2, $3, $4)
             ON CONFLICT (flow_id, key) DO UPDATE SET variables = EXCLUDED.variables, updated_at = now()",
        )
        .bind(flow_id)
        .bind(caller.org_id)
        .bind(&key)
        .bind(sqlx::types::Json(&converted.variables))
        .execute(&mut *conn)
        .await?;
    }
    let summary = ImportSummary { requests: 0, folders: 0, warnings: converted.report.warnings.clone() };
    let flow = ImportedFlow { id: Some(flow_id), name, definition: None, environment: Some(key) };
    Ok(ImportAnswer { collection: None, summary, report: converted.report, flow: Some(flow) })
}

/// The name of a flow of the caller's organization; another organization's id is 404.
async fn flow_name(conn: &mut PgConnection, caller: &Caller<scope::CollectionsWrite>, id: FlowId) -> ApiResult<String> {
    sqlx::query_scalar("SELECT name FROM flows WHERE organization_id = $1 AND id = $2")
        .bind(caller.org_id)
        .bind(id)
        .fetch_optional(conn)
        .await?
        .ok_or_else(|| ApiError::not_found("flow"))
}

fn folders(generated: &[GeneratedRequest]) -> Vec<Folder> {
    let mut folders: Vec<Folder> = Vec::new();
    for request in generated {
        let Some(name) = &request.request.folder else { continue };
        match folders.iter_mut().find(|f| &f.name == name) {
            Some(folder) => folder.request_count += 1,
            None => folders.push(Folder { name: name.clone(), request_count: 1 }),
        }
    }
    folders
}

/// What the collection would be, with placeholder ids.
fn preview(
    name: &str,
    variables: &std::collections::BTreeMap<String, String>,
    generated: &[GeneratedRequest],
) -> CollectionDetail {
    let now: hookflow_shared::Timestamp = chrono::Utc::now().into();
    let id = CollectionId::now_v7();
    let requests = generated
        .iter()
        .map(|g| {
            let r = g.request.clone();
            CollectionRequest {
                id: CollectionRequestId::now_v7(),
                collection_id: id,
                name: r.name,
                folder: r.folder,
                method: r.method,
                url: r.url,
                headers: r.headers,
                query: r.query,
                body: r.body,
                description: r.description,
                operation_key: r.operation_key,
                deprecated: g.deprecated,
                created_at: now,
                updated_at: now,
            }
        })
        .collect();
    let collection = Collection {
        id,
        name: name.to_owned(),
        description: None,
        variables: variables.clone(),
        request_count: i64::try_from(generated.len()).unwrap_or(i64::MAX),
        created_at: now,
        updated_at: now,
    };
    CollectionDetail { collection, folders: folders(generated), requests }
}
