//! OpenAPI sync: the source a collection follows (`GET`/`PUT .../openapi-sync`), a preview of what the description
//! would change, matched by operation key (`added`, `modified` with what changed, `removed`, `unchanged`), and the
//! apply: new operations added, changed ones merged with the user's edits kept, removed ones marked `deprecated` (or
//! deleted with `delete_removed`, unless a flow uses them). Applying the same description twice changes nothing.

use crate::api::collections::crud::{Provenance, StoredRequest, check_request, store_request};
use crate::api::collections::import::{insert_generated, record_sync, store_source};
use crate::api::collections::merge::merge;
use crate::api::collections::model::fetch;
use crate::api::collections::openapi::mapping::{GeneratedRequest, Mapped};
use crate::api::collections::openapi::{self, check_source};
use crate::api::collections::refs;
use crate::api::context::Ctx;
use crate::auth::scope;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, Id};
use crate::state::AppState;
use axum::Json;
use chrono::{DateTime, Utc};
use hookflow_shared::api::collections::{
    OpenApiSource, OpenApiSync, PutOpenApiSync, SyncApplied, SyncDiff, SyncItem, SyncRecord, WriteRequest,
};
use hookflow_shared::{CollectionId, CollectionRequestId, OrgId};
use sqlx::PgConnection;
use sqlx::types::Json as SqlJson;
use std::collections::{BTreeMap, HashMap, HashSet};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_sync, put_sync, apply_sync)).routes(routes!(preview_sync))
}

/// Aspects of an operation whose fingerprints are compared.
const ASPECTS: [&str; 4] = ["parameters", "body", "responses", "summary"];

type ConfigRow = (SqlJson<OpenApiSource>, bool, String, Option<String>, Option<DateTime<Utc>>, Option<String>);

async fn config(conn: &mut PgConnection, org_id: OrgId, id: CollectionId) -> ApiResult<(OpenApiSource, bool)> {
    fetch(conn, org_id, id).await?;
    let row: Option<(SqlJson<OpenApiSource>, bool)> = sqlx::query_as(
        "SELECT source, delete_removed FROM collection_syncs WHERE organization_id = $1 AND collection_id = $2",
    )
    .bind(org_id)
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.map(|(source, delete)| (source.0, delete))
        .ok_or_else(|| ApiError::not_found("OpenAPI sync of this collection (PUT a source first)"))
}

async fn describe(conn: &mut PgConnection, org_id: OrgId, id: CollectionId) -> ApiResult<OpenApiSync> {
    fetch(conn, org_id, id).await?;
    let row: Option<ConfigRow> = sqlx::query_as(
        "SELECT source, delete_removed, status, last_error, last_synced_at, document_sha256
         FROM collection_syncs WHERE organization_id = $1 AND collection_id = $2",
    )
    .bind(org_id)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((source, delete_removed, status, last_error, last_synced_at, document_sha256)) = row else {
        return Err(ApiError::not_found("OpenAPI sync of this collection (PUT a source first)"));
    };
    let history: Vec<(DateTime<Utc>, String, i32, i32, i32, i32)> = sqlx::query_as(
        "SELECT synced_at, document_sha256, added, modified, removed, unchanged FROM collection_sync_runs
         WHERE collection_id = $1 ORDER BY synced_at DESC, id DESC LIMIT 20",
    )
    .bind(id)
    .fetch_all(conn)
    .await?;
    let history = history
        .into_iter()
        .map(|(at, sha, added, modified, removed, unchanged)| SyncRecord {
            synced_at: at.into(),
            document_sha256: sha,
            added,
            modified,
            removed,
            unchanged,
        })
        .collect();
    Ok(OpenApiSync {
        source: source.0,
        delete_removed,
        last_synced_at: last_synced_at.map(Into::into),
        document_sha256,
        status,
        last_error,
        history,
    })
}

/// The OpenAPI source a collection follows, with its recent syncs.
#[utoipa::path(get, operation_id = "get_collection_sync", path = "/collections/{id}/openapi-sync", params(Id), responses((status = 200, body = OpenApiSync)))]
async fn get_sync(
    Ctx { app, caller }: Ctx<scope::CollectionsRead>,
    Id(id): Id<CollectionId>,
) -> ApiResult<Json<OpenApiSync>> {
    let mut conn = app.pool.acquire().await?;
    Ok(Json(describe(&mut conn, caller.org_id, id).await?))
}

/// Set the OpenAPI source (a URL or the document) a collection follows.
#[utoipa::path(put, operation_id = "put_collection_sync", path = "/collections/{id}/openapi-sync", params(Id),
    request_body = PutOpenApiSync,
    responses((status = 200, body = OpenApiSync)))]
async fn put_sync(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    Id(id): Id<CollectionId>,
    ApiJson(body): ApiJson<PutOpenApiSync>,
) -> ApiResult<Json<OpenApiSync>> {
    check_source(&body.source)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    fetch(&mut tx, caller.org_id, id).await?;
    store_source(&mut tx, caller.org_id, id, &body.source, body.delete_removed).await?;
    let described = describe(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    Ok(Json(described))
}

/// A request of the collection that came from an operation.
struct Existing {
    id: CollectionRequestId,
    current: WriteRequest,
    deprecated: bool,
    generated: Option<WriteRequest>,
    fingerprints: BTreeMap<String, String>,
}

type ExistingRow = (
    CollectionRequestId,
    String,
    Option<String>,
    String,
    String,
    SqlJson<BTreeMap<String, String>>,
    SqlJson<BTreeMap<String, String>>,
    Option<String>,
    Option<String>,
    String,
    bool,
    Option<SqlJson<WriteRequest>>,
    Option<SqlJson<BTreeMap<String, String>>>,
);

/// The collection's requests that came from operations; `lock` holds them until the caller's transaction ends.
async fn existing(
    conn: &mut PgConnection,
    org_id: OrgId,
    id: CollectionId,
    lock: bool,
) -> Result<Vec<Existing>, sqlx::Error> {
    let rows: Vec<ExistingRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT id, name, folder, method, url, headers, query, body, description, operation_key, deprecated, generated,
             fingerprints
         FROM collection_requests WHERE organization_id = $1 AND collection_id = $2 AND operation_key IS NOT NULL
         ORDER BY id {}",
        if lock { "FOR UPDATE" } else { "" }
    )))
    .bind(org_id)
    .bind(id)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(id, name, folder, method, url, headers, query, body, description, key, deprecated, generated, prints)| {
                let current = WriteRequest {
                    name,
                    folder,
                    method,
                    url,
                    headers: headers.0,
                    query: query.0,
                    body,
                    description,
                    operation_key: Some(key),
                };
                Existing {
                    id,
                    current,
                    deprecated,
                    generated: generated.map(|g| g.0),
                    fingerprints: prints.map(|p| p.0).unwrap_or_default(),
                }
            },
        )
        .collect())
}

/// What applying a description would do.
struct Plan<'a> {
    diff: SyncDiff,
    add: Vec<GeneratedRequest>,
    update: Vec<(&'a Existing, &'a GeneratedRequest)>,
    remove: Vec<&'a Existing>,
}

fn item(key: &str, name: &str, request_id: Option<CollectionRequestId>, changes: Vec<String>) -> SyncItem {
    SyncItem { operation_key: key.to_owned(), name: name.to_owned(), request_id, changes }
}

fn plan<'a>(existing: &'a [Existing], mapped: &'a Mapped, sha256: &str, delete_removed: bool) -> Plan<'a> {
    let by_key: HashMap<&str, &Existing> =
        existing.iter().filter_map(|e| Some((e.current.operation_key.as_deref()?, e))).collect();
    let mut plan = Plan {
        diff: SyncDiff { document_sha256: sha256.to_owned(), warnings: mapped.warnings.clone(), ..SyncDiff::default() },
        add: Vec::new(),
        update: Vec::new(),
        remove: Vec::new(),
    };
    let mut present = HashSet::new();
    for generated in &mapped.requests {
        let key = generated.request.operation_key.as_deref().unwrap_or_default();
        present.insert(key);
        let Some(found) = by_key.get(key) else {
            plan.diff.added.push(item(key, &generated.request.name, None, Vec::new()));
            plan.add.push(generated.clone());
            continue;
        };
        let mut changes: Vec<String> = ASPECTS
            .iter()
            .filter(|aspect| found.fingerprints.get(**aspect) != generated.fingerprints.get(**aspect))
            .map(|aspect| (*aspect).to_owned())
            .collect();
        if found.deprecated != generated.deprecated {
            changes.push("deprecation".to_owned());
        }
        if changes.is_empty() {
            plan.diff.unchanged.push(item(key, &found.current.name, Some(found.id), Vec::new()));
        } else {
            plan.diff.modified.push(item(key, &found.current.name, Some(found.id), changes));
            plan.update.push((found, generated));
        }
    }
    for found in existing {
        let key = found.current.operation_key.as_deref().unwrap_or_default();
        if present.contains(key) {
            continue;
        }
        if found.deprecated && !delete_removed {
            plan.diff.unchanged.push(item(key, &found.current.name, Some(found.id), Vec::new()));
        } else {
            plan.diff.removed.push(item(key, &found.current.name, Some(found.id), Vec::new()));
            plan.remove.push(found);
        }
    }
    plan
}

/// Loads and maps the collection's source; a failure is recorded on the sync before it is answered.
async fn load_mapped(
    app: &AppState,
    org_id: OrgId,
    id: CollectionId,
    source: &OpenApiSource,
) -> ApiResult<(Mapped, String, serde_json::Value)> {
    let loaded = match openapi::load(app, org_id, source).await {
        Ok(loaded) => loaded,
        Err(e) => {
            sqlx::query("UPDATE collection_syncs SET status = 'failed', last_error = $3 WHERE organization_id = $1 AND collection_id = $2")
                .bind(org_id)
                .bind(id)
                .bind(&e.message)
                .execute(&app.pool)
                .await?;
            return Err(e);
        }
    };
    let openapi::Loaded { document, sha256, url } = loaded;
    let kept = document.clone();
    let mapped = openapi::map_loaded(document, url).await?;
    Ok((mapped, sha256, kept))
}

/// What syncing the source now would change, by operation key.
#[utoipa::path(post, operation_id = "preview_collection_sync", path = "/collections/{id}/openapi-sync/preview", params(Id),
    responses((status = 200, body = SyncDiff)))]
async fn preview_sync(
    Ctx { app, caller }: Ctx<scope::CollectionsRead>,
    Id(id): Id<CollectionId>,
) -> ApiResult<Json<SyncDiff>> {
    let (source, delete_removed) = config(&mut *app.pool.acquire().await?, caller.org_id, id).await?;
    let (mapped, sha256, _) = load_mapped(&app, caller.org_id, id, &source).await?;
    let existing = existing(&mut *app.pool.acquire().await?, caller.org_id, id, false).await?;
    Ok(Json(plan(&existing, &mapped, &sha256, delete_removed).diff))
}

async fn update_request(
    conn: &mut PgConnection,
    org_id: OrgId,
    collection_id: CollectionId,
    found: &Existing,
    generated: &GeneratedRequest,
) -> ApiResult<()> {
    let base = found.generated.as_ref().unwrap_or(&generated.request);
    let merged =
        check_request(merge(base, &found.current, &generated.request)).unwrap_or_else(|_| generated.request.clone());
    let provenance = Provenance {
        generated: &generated.request,
        fingerprints: &generated.fingerprints,
        deprecated: generated.deprecated,
    };
    store_request(
        conn,
        StoredRequest { id: found.id, org_id, collection_id, request: &merged, provenance: Some(provenance) },
    )
    .await
}

/// Apply the source: add, merge, deprecate (or delete) by operation key, and record the sync.
#[utoipa::path(post, operation_id = "apply_collection_sync", path = "/collections/{id}/openapi-sync", params(Id),
    responses((status = 200, body = SyncApplied)))]
async fn apply_sync(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    Id(id): Id<CollectionId>,
) -> ApiResult<Json<SyncApplied>> {
    let (source, delete_removed) = config(&mut *app.pool.acquire().await?, caller.org_id, id).await?;
    let (mapped, sha256, kept) = load_mapped(&app, caller.org_id, id, &source).await?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    crate::api::collections::schemas::store(&mut tx, caller.org_id, id, &kept).await?;
    // Serializes concurrent syncs of one collection.
    sqlx::query("SELECT 1 FROM collection_syncs WHERE collection_id = $1 FOR UPDATE")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    let existing = existing(&mut tx, caller.org_id, id, true).await?;
    let plan = plan(&existing, &mapped, &sha256, delete_removed);
    insert_generated(&mut tx, caller.org_id, id, &plan.add).await?;
    for (found, generated) in &plan.update {
        update_request(&mut tx, caller.org_id, id, found, generated).await?;
    }
    let (mut deleted, mut kept_referenced) = (0, Vec::new());
    for found in &plan.remove {
        let used = delete_removed
            && !refs::referencing_flows(&mut tx, caller.org_id, refs::Referenced::Request(found.id)).await?.is_empty();
        if delete_removed && !used {
            sqlx::query("DELETE FROM collection_requests WHERE id = $1").bind(found.id).execute(&mut *tx).await?;
            deleted += 1;
        } else {
            sqlx::query(
                "UPDATE collection_requests SET deprecated = true, updated_at = now() WHERE id = $1 AND NOT deprecated",
            )
            .bind(found.id)
            .execute(&mut *tx)
            .await?;
            if used {
                kept_referenced.push(found.id);
            }
        }
    }
    // New variables are added; values the collection already has (perhaps edited) stay.
    sqlx::query("UPDATE collections SET variables = $3::jsonb || variables WHERE organization_id = $1 AND id = $2")
        .bind(caller.org_id)
        .bind(id)
        .bind(SqlJson(&mapped.variables))
        .execute(&mut *tx)
        .await?;
    let diff = plan.diff;
    let counts = [diff.added.len(), diff.modified.len(), diff.removed.len(), diff.unchanged.len()];
    let synced_at = record_sync(&mut tx, id, &sha256, counts).await?;
    tx.commit().await?;
    Ok(Json(SyncApplied { diff, synced_at: synced_at.into(), deleted, kept_referenced }))
}
