//! Collections and their requests: create, list, read (with folders and requests), update, delete. A request or
//! collection a flow references cannot be deleted (409 naming the flows).

use crate::api::collections::model::{
    COLLECTION_COLUMNS, CollectionRow, REQUEST_COLUMNS, RequestRow, conflict_on_unique, detail, fetch,
};
use crate::api::collections::refs;
use crate::api::context::Ctx;
use crate::auth::scope;
use crate::db::owned::{self, Owned};
use crate::db::update::Update;
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiJson, ApiPath, Id};
use crate::pagination::{self, ListParams, Listed};
use crate::state::AppState;
use crate::validate::field;
use axum::Json;
use axum::http::StatusCode;
use hookflow_shared::api::Page;
use hookflow_shared::api::collections::{
    Collection, CollectionDetail, CollectionRequest, PatchCollection, WriteCollection, WriteRequest,
};
use hookflow_shared::api::fields::{LongText, Name};
use hookflow_shared::flow::definition::{RequestParts, request_problems};
use hookflow_shared::{CollectionId, CollectionRequestId, OrgId};
use sqlx::PgConnection;
use sqlx::types::Json as SqlJson;
use std::collections::BTreeMap;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_collections, create_collection))
        .routes(routes!(get_collection, patch_collection, delete_collection))
        .routes(routes!(list_requests, create_request))
        .routes(routes!(get_request, replace_request, delete_request))
}

/// Validates a request body and answers it with the method upper-cased and names trimmed. (Imports and syncs
/// generate requests too, so the body keeps plain fields and is checked here.)
pub fn check_request(mut request: WriteRequest) -> ApiResult<WriteRequest> {
    request.name = field::<Name>("name", request.name)?.as_str().to_owned();
    request.method = request.method.to_ascii_uppercase();
    if request.url.trim().is_empty() {
        return Err(ApiError::invalid("invalid field `url`: must not be empty"));
    }
    request.folder = match request.folder.as_deref().map(str::trim) {
        Some("") | None => None,
        Some(folder) => Some(field::<Name>("folder", folder)?.as_str().to_owned()),
    };
    if let Some(description) = &request.description {
        field::<LongText>("description", description.as_str())?;
    }
    let parts = RequestParts {
        method: Some(&request.method),
        url: Some(&request.url),
        headers: &request.headers,
        query: &request.query,
        body: request.body.as_deref(),
    };
    if let Some((field, message)) = request_problems("", parts).into_iter().next() {
        return Err(ApiError::invalid(format!("invalid field `{field}`: {message}")));
    }
    Ok(request)
}

/// What an import or sync generated for a request: the base of later merges, and whether the description
/// deprecates (or dropped) its operation.
#[derive(Debug)]
pub struct Provenance<'a> {
    pub generated: &'a WriteRequest,
    pub fingerprints: &'a BTreeMap<String, String>,
    pub deprecated: bool,
}

/// A request to write: a new one, or the replacement of request `id` (already checked to be in the collection).
#[derive(Debug)]
pub struct StoredRequest<'a> {
    pub id: CollectionRequestId,
    pub org_id: OrgId,
    pub collection_id: CollectionId,
    pub request: &'a WriteRequest,
    /// `None` (a user's write) keeps what the last sync recorded.
    pub provenance: Option<Provenance<'a>>,
}

/// Inserts or replaces a (checked) request; a repeated operation key answers 409.
pub async fn store_request(conn: &mut PgConnection, stored: StoredRequest<'_>) -> ApiResult<()> {
    let request = stored.request;
    let provenance = stored.provenance.as_ref();
    sqlx::query(
        "INSERT INTO collection_requests AS r (id, organization_id, collection_id, name, folder, method, url, headers,
             query, body, description, operation_key, deprecated, generated, fingerprints)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, COALESCE($13, false), $14, $15)
         ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, folder = EXCLUDED.folder, method = EXCLUDED.method,
             url = EXCLUDED.url, headers = EXCLUDED.headers, query = EXCLUDED.query, body = EXCLUDED.body,
             description = EXCLUDED.description, operation_key = EXCLUDED.operation_key,
             deprecated = COALESCE($13, r.deprecated), generated = COALESCE($14, r.generated),
             fingerprints = COALESCE($15, r.fingerprints), updated_at = now()
         WHERE r.organization_id = EXCLUDED.organization_id AND r.collection_id = EXCLUDED.collection_id",
    )
    .bind(stored.id)
    .bind(stored.org_id)
    .bind(stored.collection_id)
    .bind(&request.name)
    .bind(&request.folder)
    .bind(&request.method)
    .bind(&request.url)
    .bind(SqlJson(&request.headers))
    .bind(SqlJson(&request.query))
    .bind(&request.body)
    .bind(&request.description)
    .bind(&request.operation_key)
    .bind(provenance.map(|p| p.deprecated))
    .bind(provenance.map(|p| SqlJson(p.generated)))
    .bind(provenance.map(|p| SqlJson(p.fingerprints)))
    .execute(conn)
    .await
    .map_err(|e| conflict_on_unique(e, "another request of this collection has that operation_key"))?;
    Ok(())
}

/// A collection to insert, already validated (an import's variables are the description's, as mapped).
#[derive(Debug)]
pub struct NewCollection<'a> {
    pub name: &'a str,
    pub description: Option<&'a str>,
    pub variables: &'a BTreeMap<String, String>,
}

/// Inserts a collection; a taken name answers 409.
pub async fn insert_collection(
    conn: &mut PgConnection,
    org_id: OrgId,
    body: NewCollection<'_>,
) -> ApiResult<CollectionId> {
    let id = CollectionId::now_v7();
    sqlx::query(
        "INSERT INTO collections (id, organization_id, name, description, variables) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(id)
    .bind(org_id)
    .bind(body.name)
    .bind(body.description)
    .bind(SqlJson(body.variables))
    .execute(conn)
    .await
    .map_err(|e| conflict_on_unique(e, "a collection with that name already exists in this organization"))?;
    Ok(id)
}

/// Create an empty collection.
#[utoipa::path(post, path = "/collections", request_body = WriteCollection,
    responses((status = 201, body = CollectionDetail), (status = 409)))]
async fn create_collection(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    ApiJson(WriteCollection { name, description, variables }): ApiJson<WriteCollection>,
) -> Created<CollectionDetail> {
    let new = NewCollection { name: name.as_str(), description: description.as_deref(), variables: &variables };
    let mut conn = app.pool.acquire().await?;
    let id = insert_collection(&mut conn, caller.org_id, new).await?;
    Ok((StatusCode::CREATED, Json(detail(&mut conn, caller.org_id, id).await?)))
}

/// List collections, newest first.
#[utoipa::path(get, path = "/collections", params(ListParams), responses((status = 200, body = Page<Collection>)))]
async fn list_collections(Ctx { app, caller }: Ctx<scope::CollectionsRead>, params: ListParams) -> Listed<Collection> {
    let sql = format!(
        "SELECT {COLLECTION_COLUMNS} FROM collections c
         WHERE c.organization_id = $1 AND ($2::uuid IS NULL OR c.id < $2) ORDER BY c.id DESC LIMIT $3"
    );
    let into = Collection::from;
    let org = (caller.org_id, None);
    Ok(Json(pagination::keyset_page::<CollectionRow, _, _>(&app.pool, sql, org, &params, into, |c| c.id).await?))
}

/// A collection with its folders and every request.
#[utoipa::path(get, path = "/collections/{id}", params(Id), responses((status = 200, body = CollectionDetail)))]
async fn get_collection(
    Ctx { app, caller }: Ctx<scope::CollectionsRead>,
    Id(id): Id<CollectionId>,
) -> ApiResult<Json<CollectionDetail>> {
    let mut conn = app.pool.acquire().await?;
    Ok(Json(detail(&mut conn, caller.org_id, id).await?))
}

/// Rename, describe, or replace the variables of a collection.
#[utoipa::path(patch, operation_id = "update_collection", path = "/collections/{id}", params(Id),
    request_body = PatchCollection,
    responses((status = 200, body = CollectionDetail), (status = 409)))]
async fn patch_collection(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    Id(id): Id<CollectionId>,
    ApiJson(body): ApiJson<PatchCollection>,
) -> ApiResult<Json<CollectionDetail>> {
    let name = body.name.as_ref().map(|n| n.as_str().to_owned());
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    fetch(&mut tx, caller.org_id, id).await?;
    Update::new("collections")
        .set_some("name", name)
        .patch("description", body.description.map(LongText::into_inner))
        .set_some("variables", body.variables.map(|v| SqlJson(v.into_inner())))
        .sql("updated_at", "now()")
        .execute(&mut tx, caller.org_id, id)
        .await
        .map_err(|e| conflict_on_unique(e, "a collection with that name already exists in this organization"))?;
    let detail = detail(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    Ok(Json(detail))
}

/// Delete a collection and its requests; refused (409) while a flow references one of them.
#[utoipa::path(delete, path = "/collections/{id}", params(Id), responses((status = 204), (status = 409)))]
async fn delete_collection(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    Id(id): Id<CollectionId>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    fetch(&mut tx, caller.org_id, id).await?;
    refs::refuse_if_referenced(&mut tx, caller.org_id, refs::Referenced::Collection(id)).await?;
    owned::delete(&mut *tx, Owned::Collection, caller.org_id, id).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The requests of a collection, in order.
#[utoipa::path(get, operation_id = "list_collection_requests", path = "/collections/{id}/requests", params(Id, ListParams),
    responses((status = 200, body = Page<CollectionRequest>)))]
async fn list_requests(
    Ctx { app, caller }: Ctx<scope::CollectionsRead>,
    Id(id): Id<CollectionId>,
    params: ListParams,
) -> Listed<CollectionRequest> {
    let mut conn = app.pool.acquire().await?;
    fetch(&mut conn, caller.org_id, id).await?;
    // Requests are appended in id order (time-ordered ids), so id order is the collection's order.
    let sql = format!(
        "SELECT {REQUEST_COLUMNS} FROM collection_requests r
         WHERE r.organization_id = $1 AND r.collection_id = $4 AND ($2::uuid IS NULL OR r.id > $2)
         ORDER BY r.id LIMIT $3"
    );
    let (into, scope) = (CollectionRequest::from, (caller.org_id, Some(id.into())));
    Ok(Json(pagination::keyset_page::<RequestRow, _, _>(&mut *conn, sql, scope, &params, into, |r| r.id).await?))
}

async fn fetch_request(
    conn: &mut PgConnection,
    org_id: OrgId,
    collection_id: CollectionId,
    id: CollectionRequestId,
) -> ApiResult<CollectionRequest> {
    let row: Option<RequestRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {REQUEST_COLUMNS} FROM collection_requests r
         WHERE r.organization_id = $1 AND r.collection_id = $2 AND r.id = $3"
    )))
    .bind(org_id)
    .bind(collection_id)
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.map(Into::into).ok_or_else(|| ApiError::not_found("request"))
}

/// Add a request to a collection.
#[utoipa::path(post, operation_id = "create_collection_request", path = "/collections/{id}/requests", params(Id),
    request_body = WriteRequest,
    responses((status = 201, body = CollectionRequest), (status = 409)))]
async fn create_request(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    Id(id): Id<CollectionId>,
    ApiJson(body): ApiJson<WriteRequest>,
) -> Created<CollectionRequest> {
    let request = check_request(body)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    fetch(&mut tx, caller.org_id, id).await?;
    let request_id = CollectionRequestId::now_v7();
    let stored =
        StoredRequest { id: request_id, org_id: caller.org_id, collection_id: id, request: &request, provenance: None };
    store_request(&mut tx, stored).await?;
    let created = fetch_request(&mut tx, caller.org_id, id, request_id).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// One request.
#[utoipa::path(get, operation_id = "get_collection_request", path = "/collections/{id}/requests/{request_id}",
    params(Id, ("request_id" = Uuid, Path)),
    responses((status = 200, body = CollectionRequest)))]
async fn get_request(
    Ctx { app, caller }: Ctx<scope::CollectionsRead>,
    ApiPath((id, request_id)): ApiPath<(CollectionId, CollectionRequestId)>,
) -> ApiResult<Json<CollectionRequest>> {
    let mut conn = app.pool.acquire().await?;
    Ok(Json(fetch_request(&mut conn, caller.org_id, id, request_id).await?))
}

/// Replace a request. Values that differ from what the OpenAPI sync generated count as the user's edits and
/// survive later syncs.
#[utoipa::path(put, operation_id = "replace_collection_request", path = "/collections/{id}/requests/{request_id}",
    params(Id, ("request_id" = Uuid, Path)), request_body = WriteRequest,
    responses((status = 200, body = CollectionRequest), (status = 409)))]
async fn replace_request(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    ApiPath((id, request_id)): ApiPath<(CollectionId, CollectionRequestId)>,
    ApiJson(body): ApiJson<WriteRequest>,
) -> ApiResult<Json<CollectionRequest>> {
    let request = check_request(body)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    fetch_request(&mut tx, caller.org_id, id, request_id).await?;
    let stored =
        StoredRequest { id: request_id, org_id: caller.org_id, collection_id: id, request: &request, provenance: None };
    store_request(&mut tx, stored).await?;
    let updated = fetch_request(&mut tx, caller.org_id, id, request_id).await?;
    tx.commit().await?;
    Ok(Json(updated))
}

/// Delete a request; refused (409, naming the flows) while a flow references it.
#[utoipa::path(delete, operation_id = "delete_collection_request", path = "/collections/{id}/requests/{request_id}",
    params(Id, ("request_id" = Uuid, Path)),
    responses((status = 204), (status = 409)))]
async fn delete_request(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    ApiPath((id, request_id)): ApiPath<(CollectionId, CollectionRequestId)>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    fetch_request(&mut tx, caller.org_id, id, request_id).await?;
    refs::refuse_if_referenced(&mut tx, caller.org_id, refs::Referenced::Request(request_id)).await?;
    owned::delete(&mut *tx, Owned::CollectionRequest(id), caller.org_id, request_id).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}
