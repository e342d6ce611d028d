//! Collection bodies: collections with their folders and requests, OpenAPI import, and OpenAPI sync (its source,
//! the preview diff and the record of each sync).

use crate::Timestamp;
use crate::api::fields::{CollectionVariables, LongText, Name};
use crate::api::patch::Patch;
use crate::flow::request_parts::with_request_parts;
use crate::ids::{CollectionId, CollectionRequestId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `POST /collections`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteCollection {
    #[schema(schema_with = crate::api::rules::name)]
    pub name: Name,
    #[schema(schema_with = crate::api::rules::long_text)]
    pub description: Option<LongText>,
    /// Values the collection's requests use (`{{base_url}}`); the lowest layer when a flow runs one.
    #[serde(default)]
    #[schema(schema_with = crate::api::rules::collection_variables)]
    pub variables: CollectionVariables,
}

impl WriteCollection {
    /// An empty collection of `name`, without description or variables.
    pub fn new(name: Name) -> Self {
        WriteCollection { name, description: None, variables: CollectionVariables::default() }
    }
}

/// `PATCH /collections/{id}`: absent fields stay; `null` clears the description.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchCollection {
    #[schema(schema_with = crate::api::rules::optional_name)]
    pub name: Option<Name>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(schema_with = crate::api::rules::long_text)]
    pub description: Patch<LongText>,
    #[schema(schema_with = crate::api::rules::optional_collection_variables)]
    pub variables: Option<CollectionVariables>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Collection {
    pub id: CollectionId,
    pub name: String,
    pub description: Option<String>,
    pub variables: BTreeMap<String, String>,
    pub request_count: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A folder: the requests sharing a `folder` name (one per tag on import).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Folder {
    pub name: String,
    pub request_count: i64,
}

/// `GET /collections/{id}`: the collection with its folders and every request, in order.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CollectionDetail {
    #[serde(flatten)]
    pub collection: Collection,
    pub folders: Vec<Folder>,
    pub requests: Vec<CollectionRequest>,
}

with_request_parts! {
    /// `POST /collections/{id}/requests` and `PUT .../requests/{request_id}`.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct WriteRequest {
        #[schema(schema_with = crate::api::rules::name)]
        pub name: String,
        pub folder: Option<String>,
        #[schema(schema_with = crate::api::rules::method)]
        pub method: String,
        /// May use templates: `{{base_url}}/pets/{{petId}}`.
        #[schema(schema_with = crate::api::rules::request_url)]
        pub url: String,
        ..parts,
        #[schema(schema_with = crate::api::rules::long_text)]
        pub description: Option<String>,
        /// `METHOD /normalized/{}/path` of the OpenAPI operation it came from.
        pub operation_key: Option<String>,
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CollectionRequest {
    pub id: CollectionRequestId,
    pub collection_id: CollectionId,
    pub name: String,
    pub folder: Option<String>,
    pub method: String,
    pub url: String,
    pub headers: BTreeMap<String, String>,
    pub query: BTreeMap<String, String>,
    pub body: Option<String>,
    pub description: Option<String>,
    pub operation_key: Option<String>,
    /// The operation disappeared from the synced description.
    pub deprecated: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Where an OpenAPI description comes from: exactly one of `url` (fetched by the server) or `document` (JSON or
/// YAML text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenApiSource {
    /// An `http` or `https` URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = "uri", pattern = "^[Hh][Tt][Tt][Pp][Ss]?://")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<String>,
}

/// `POST /collections/import/openapi`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportOpenApi {
    /// The collection's name; the description's `info.title` without it.
    #[schema(schema_with = crate::api::rules::optional_name)]
    pub name: Option<Name>,
    pub source: OpenApiSource,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ImportSummary {
    pub requests: usize,
    pub folders: usize,
    /// What could not be mapped, and why.
    pub warnings: Vec<String>,
}

/// `POST /collections/import/openapi` answer.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ImportedCollection {
    pub collection: CollectionDetail,
    pub summary: ImportSummary,
}

/// `PUT /collections/{id}/openapi-sync`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutOpenApiSync {
    pub source: OpenApiSource,
    /// Delete requests whose operation left the description (default: keep them, marked `deprecated`).
    #[serde(default)]
    pub delete_removed: bool,
}

/// One recorded sync.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SyncRecord {
    pub synced_at: Timestamp,
    pub document_sha256: String,
    pub added: i32,
    pub modified: i32,
    pub removed: i32,
    pub unchanged: i32,
}

/// `GET /collections/{id}/openapi-sync`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OpenApiSync {
    pub source: OpenApiSource,
    pub delete_removed: bool,
    pub last_synced_at: Option<Timestamp>,
    pub document_sha256: Option<String>,
    /// `pending` (configured, never applied), `synced`, or `failed` (see `last_error`).
    pub status: String,
    pub last_error: Option<String>,
    /// The most recent syncs, newest first (at most 20).
    pub history: Vec<SyncRecord>,
}

/// One operation in a sync diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SyncItem {
    pub operation_key: String,
    pub name: String,
    /// The collection's request, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<CollectionRequestId>,
    /// For modified operations: what changed (`parameters`, `body`, `responses`, `deprecation`, `summary`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
}

/// `POST /collections/{id}/openapi-sync/preview` answer, and the body of an applied sync.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SyncDiff {
    pub added: Vec<SyncItem>,
    pub modified: Vec<SyncItem>,
    pub removed: Vec<SyncItem>,
    pub unchanged: Vec<SyncItem>,
    pub document_sha256: String,
    pub warnings: Vec<String>,
}

/// `POST /collections/{id}/openapi-sync` answer: the diff that was applied.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SyncApplied {
    #[serde(flatten)]
    pub diff: SyncDiff,
    pub synced_at: Timestamp,
    /// Requests deleted because `delete_removed` was set.
    pub deleted: usize,
    /// Removed operations kept because a flow references them (a request a flow uses is never deleted).
    pub kept_referenced: Vec<CollectionRequestId>,
}
