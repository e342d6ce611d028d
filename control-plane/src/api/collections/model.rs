//! Stored collections and their requests: columns, rows, reads by id within the organization (with folders
//! and requests), and the conflict answer of a taken name.

use crate::error::{ApiError, ApiResult};
use chrono::{DateTime, Utc};
use hookflow_shared::api::collections::{Collection, CollectionDetail, CollectionRequest, Folder};
use hookflow_shared::{CollectionId, CollectionRequestId, OrgId};
use sqlx::PgConnection;
use sqlx::types::Json as SqlJson;
use std::collections::BTreeMap;

pub const COLLECTION_COLUMNS: &str = "c.id, c.name, c.description, c.variables,
     (SELECT count(*) FROM collection_requests r WHERE r.collection_id = c.id) AS request_count,
     c.created_at, c.updated_at";

#[derive(Debug, sqlx::FromRow)]
pub struct CollectionRow {
    id: CollectionId,
    name: String,
    description: Option<String>,
    variables: SqlJson<BTreeMap<String, String>>,
    request_count: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<CollectionRow> for Collection {
    fn from(r: CollectionRow) -> Self {
        Collection {
            id: r.id,
            name: r.name,
            description: r.description,
            variables: r.variables.0,
            request_count: r.request_count,
            created_at: r.created_at.into(),
            updated_at: r.updated_at.into(),
        }
    }
}

pub const REQUEST_COLUMNS: &str =
    "r.id, r.collection_id, r.name, r.folder, r.method, r.url, r.headers, r.query, r.body,
     r.description, r.operation_key, r.deprecated, r.created_at, r.updated_at";

#[derive(Debug, sqlx::FromRow)]
pub struct RequestRow {
    id: CollectionRequestId,
    collection_id: CollectionId,
    name: String,
    folder: Option<String>,
    method: String,
    url: String,
    headers: SqlJson<BTreeMap<String, String>>,
    query: SqlJson<BTreeMap<String, String>>,
    body: Option<String>,
    description: Option<String>,
    operation_key: Option<String>,
    deprecated: bool,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<RequestRow> for CollectionRequest {
    fn from(r: RequestRow) -> Self {
        CollectionRequest {
            id: r.id,
            collection_id: r.collection_id,
            name: r.name,
            folder: r.folder,
            method: r.method,
            url: r.url,
            headers: r.headers.0,
            query: r.query.0,
            body: r.body,
            description: r.description,
            operation_key: r.operation_key,
            deprecated: r.deprecated,
            created_at: r.created_at.into(),
            updated_at: r.updated_at.into(),
        }
    }
}

/// A collection of the caller's organization; another organization's id is 404.
pub async fn fetch(conn: &mut PgConnection, org_id: OrgId, id: CollectionId) -> ApiResult<Collection> {
    let row: Option<CollectionRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLLECTION_COLUMNS} FROM collections c WHERE c.organization_id = $1 AND c.id = $2"
    )))
    .bind(org_id)
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.map(Into::into).ok_or_else(|| ApiError::not_found("collection"))
}

/// Every request of a collection, in order.
pub async fn requests(conn: &mut PgConnection, org_id: OrgId, id: CollectionId) -> ApiResult<Vec<CollectionRequest>> {
    let rows: Vec<RequestRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {REQUEST_COLUMNS} FROM collection_requests r
         WHERE r.organization_id = $1 AND r.collection_id = $2 ORDER BY r.id"
    )))
    .bind(org_id)
    .bind(id)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// The collection with its folders (in order of first appearance) and requests.
pub async fn detail(conn: &mut PgConnection, org_id: OrgId, id: CollectionId) -> ApiResult<CollectionDetail> {
    let collection = fetch(conn, org_id, id).await?;
    let requests = requests(conn, org_id, id).await?;
    let mut folders: Vec<Folder> = Vec::new();
    for request in &requests {
        let Some(name) = &request.folder else { continue };
        match folders.iter_mut().find(|f| &f.name == name) {
            Some(folder) => folder.request_count += 1,
            None => folders.push(Folder { name: name.clone(), request_count: 1 }),
        }
    }
    Ok(CollectionDetail { collection, folders, requests })
}

pub use crate::error::conflict_on_unique;
