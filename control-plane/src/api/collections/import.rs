//! `POST /collections/import/openapi`: a new collection from an OpenAPI description (text or URL), its source
//! kept for later syncs and the import recorded as the first sync.

use crate::api::collections::crud::{NewCollection, insert_collection};
use crate::api::collections::model::detail;
use crate::api::collections::openapi::mapping::GeneratedRequest;
use crate::api::collections::openapi::{self, Loaded};
use crate::api::context::Ctx;
use crate::auth::scope;
use crate::error::{ApiResult, Created, to_json};
use crate::extract::ApiJson;
use crate::state::AppState;
use crate::validate::field;
use axum::Json;
use axum::http::StatusCode;
use hookflow_shared::api::collections::{ImportOpenApi, ImportSummary, ImportedCollection, OpenApiSource};
use hookflow_shared::api::fields::Name;
use hookflow_shared::{CollectionId, CollectionRequestId, OrgId};
use sqlx::PgConnection;
use std::time::Instant;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(import_openapi))
}

/// Inserts generated requests in one statement; answers their ids in order.
pub async fn insert_generated(
    conn: &mut PgConnection,
    org_id: OrgId,
    collection_id: CollectionId,
    generated: &[GeneratedRequest],
) -> ApiResult<Vec<CollectionRequestId>> {
    let ids: Vec<CollectionRequestId> = generated.iter().map(|_| CollectionRequestId::now_v7()).collect();
    let requests = generated.iter().map(|g| to_json(&g.request)).collect::<Result<Vec<_>, _>>()?;
    let fingerprints = generated.iter().map(|g| to_json(&g.fingerprints)).collect::<Result<Vec<_>, _>>()?;
    let deprecated: Vec<bool> = generated.iter().map(|g| g.deprecated).collect();
    sqlx::query(
        "INSERT INTO collection_requests (id, organization_id, collection_id, name, folder, method, url, headers, query,
             body, description, operation_key, deprecated, generated, fingerprints)
         SELECT g.id, $1, $2, g.r->>'name', g.r->>'folder', g.r->>'method', g.r->>'url', g.r->'headers', g.r->'query',
             g.r->>'body', g.r->>'description', g.r->>'operation_key', g.deprecated, g.r, g.fingerprints
         FROM unnest($3::uuid[], $4::jsonb[], $5::bool[], $6::jsonb[]) WITH ORDINALITY
             AS g(id, r, deprecated, fingerprints, ord)
         ORDER BY g.ord",
    )
    .bind(org_id)
    .bind(collection_id)
    .bind(&ids)
    .bind(&requests)
    .bind(&deprecated)
    .bind(&fingerprints)
    .execute(conn)
    .await
    .map_err(|e| crate::api::collections::model::conflict_on_unique(e, "two requests map to the same operation key"))?;
    Ok(ids)
}

/// Records an applied sync (the import is the first) and marks the source synced.
pub async fn record_sync(
    conn: &mut PgConnection,
    collection_id: CollectionId,
    sha256: &str,
    counts: [usize; 4],
) -> Result<chrono::DateTime<chrono::Utc>, sqlx::Error> {
    let count = |i: usize| i32::try_from(counts[i]).unwrap_or(i32::MAX);
    sqlx::query_scalar(
        "WITH run AS (
             INSERT INTO collection_sync_runs (id, collection_id, document_sha256, added, modified, removed, unchanged)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING synced_at)
         UPDATE collection_syncs SET status = 'synced', last_error = NULL, document_sha256 = $3,
             last_synced_at = (SELECT synced_at FROM run)
         WHERE collection_id = $2 RETURNING last_synced_at",
    )
    .bind(Uuid::now_v7())
    .bind(collection_id)
    .bind(sha256)
    .bind(count(0))
    .bind(count(1))
    .bind(count(2))
    .bind(count(3))
    .fetch_one(conn)
    .await
}

/// Stores the source a collection follows.
pub async fn store_source(
    conn: &mut PgConnection,
    org_id: OrgId,
    collection_id: CollectionId,
    source: &OpenApiSource,
    delete_removed: bool,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO collection_syncs (collection_id, organization_id, source, delete_removed) VALUES ($1, $2, $3, $4)
         ON CONFLICT (collection_id) DO UPDATE SET source = EXCLUDED.source, delete_removed = EXCLUDED.delete_removed,
             status = CASE WHEN collection_syncs.source = EXCLUDED.source THEN collection_syncs.status ELSE 'pending' END",
    )
    .bind(collection_id)
    .bind(org_id)
    .bind(sqlx::types::Json(source))
    .bind(delete_removed)
    .execute(conn)
    .await
    .map(|_| ())
}

/// Import an OpenAPI 3.0 or 3.1 description (JSON or YAML text, or a URL the server fetches) as a new collection.
#[utoipa::path(post, operation_id = "import_collection", path = "/collections/import/openapi", request_body = ImportOpenApi,
    responses((status = 201, body = ImportedCollection),
        (status = 409),
        (status = 413)))]
async fn import_openapi(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    ApiJson(body): ApiJson<ImportOpenApi>,
) -> Created<ImportedCollection> {
    let started = Instant::now();
    let Loaded { document, sha256, url } = openapi::load(&app, caller.org_id, &body.source).await?;
    let kept = document.clone();
    let mapped = openapi::map_loaded(document, url).await?;
    let name = match body.name {
        Some(name) => name,
        None => field::<Name>("name", mapped.title.as_str())?,
    };
    let new = NewCollection { name: name.as_str(), description: None, variables: &mapped.variables };
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let id = insert_collection(&mut tx, caller.org_id, new).await?;
    insert_generated(&mut tx, caller.org_id, id, &mapped.requests).await?;
    store_source(&mut tx, caller.org_id, id, &body.source, false).await?;
    record_sync(&mut tx, id, &sha256, [mapped.requests.len(), 0, 0, 0]).await?;
    crate::api::collections::schemas::store(&mut tx, caller.org_id, id, &kept).await?;
    let detail = detail(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    tracing::info!(collection_id = %id, requests = mapped.requests.len(), elapsed_ms = started.elapsed().as_millis(),
        "OpenAPI description imported");
    let summary =
        ImportSummary { requests: mapped.requests.len(), folders: mapped.folder_count(), warnings: mapped.warnings };
    Ok((StatusCode::CREATED, Json(ImportedCollection { collection: detail, summary })))
}
