//! Schemas of a collection's description for `matchesSchema` (#54): the description is kept when a collection is
//! imported or synced, and a launch (or a tried node) replaces every `{"$ref": "collection:<id>#<pointer>"}`
//! expected value by a schema that holds the pointed schema and the description's `components` (what its own
//! `$ref`s point into), so the job carries all a runner needs and the runner never asks the server. Another
//! organization's collection, or a pointer to nothing, refuses the launch.

use crate::error::{ApiError, ApiResult};
use hookflow_shared::flow::json_schema::unresolved_collection_ref;
use hookflow_shared::{CollectionId, OrgId};
use serde_json::Value;
use sqlx::PgConnection;
use sqlx::types::Json as SqlJson;
use std::collections::HashMap;

/// Keeps `document` as the description of `collection_id`.
pub async fn store(
    conn: &mut PgConnection,
    org_id: OrgId,
    collection_id: CollectionId,
    document: &Value,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO collection_documents (collection_id, organization_id, document) VALUES ($1, $2, $3)
         ON CONFLICT (collection_id) DO UPDATE SET document = EXCLUDED.document, updated_at = now()",
    )
    .bind(collection_id)
    .bind(org_id)
    .bind(SqlJson(document))
    .execute(conn)
    .await
    .map(|_| ())
}

/// The assertions and conditions of a definition's nodes whose expected value is still a collection reference.
fn unresolved(definition: &mut Value) -> Vec<&mut Value> {
    let mut found = Vec::new();
    let Some(nodes) = definition.get_mut("nodes").and_then(Value::as_array_mut) else { return found };
    for node in nodes {
        let Some(node) = node.as_object_mut() else { continue };
        for (key, value) in node.iter_mut() {
            let checks: Vec<&mut Value> = match key.as_str() {
                "assertions" => value.as_array_mut().map(|a| a.iter_mut().collect()).unwrap_or_default(),
                "condition" => vec![value],
                _ => continue,
            };
            for check in checks {
                if check["operator"] == "matchesSchema"
                    && let Some(expected) = check.get_mut("expected")
                    && unresolved_collection_ref(expected).is_some()
                {
                    found.push(expected);
                }
            }
        }
    }
    found
}

/// `collection:<id>#<pointer>` read.
fn parse(reference: &str) -> Option<(CollectionId, String)> {
    let rest = reference.strip_prefix("collection:")?;
    let (id, pointer) = rest.split_once('#').unwrap_or((rest, ""));
    Some((id.parse().ok()?, pointer.to_owned()))
}

/// Description bytes one launch's references may copy in all: each reference carries its description's
/// `components`, so thousands of references to one large description would otherwise ask for gigabytes.
const COPIED_BYTES: usize = 16 * 1024 * 1024;

/// Replaces every collection schema reference in `definitions` by the schema it names.
pub async fn inline(conn: &mut PgConnection, org_id: OrgId, definitions: &mut [&mut Value]) -> ApiResult<()> {
    let mut documents: HashMap<CollectionId, (Value, usize)> = HashMap::new();
    let mut copied = 0usize;
    for definition in definitions.iter_mut() {
        for expected in unresolved(definition) {
            let reference = unresolved_collection_ref(expected).unwrap_or_default().to_owned();
            let Some((id, pointer)) = parse(&reference) else {
                return Err(ApiError::invalid(format!(
                    "`{reference}`: a reference is `collection:<id>#<JSON pointer>`"
                )));
            };
            if !documents.contains_key(&id) {
                let document: Option<SqlJson<Value>> = sqlx::query_scalar(
                    "SELECT document FROM collection_documents WHERE organization_id = $1 AND collection_id = $2",
                )
                .bind(org_id)
                .bind(id)
                .fetch_optional(&mut *conn)
                .await?;
                let Some(SqlJson(document)) = document else {
                    return Err(ApiError::invalid(format!(
                        "`{reference}`: no collection of this organization with an imported description has this id"
                    )));
                };
                let size = serde_json::to_vec(&document).map_or(usize::MAX, |text| text.len());
                documents.insert(id, (document, size));
            }
            let (document, size) = &documents[&id];
            copied = copied.saturating_add(*size);
            if copied > COPIED_BYTES {
                return Err(ApiError::invalid(format!(
                    "`{reference}`: the definition's collection schema references would copy more than {} MiB of \
                     descriptions into the run; refer to fewer schemas (or a smaller description)",
                    COPIED_BYTES / (1024 * 1024)
                )));
            }
            if document.pointer(&pointer).is_none() {
                return Err(ApiError::invalid(format!("`{reference}`: the description has nothing at `{pointer}`")));
            }
            let mut schema = serde_json::Map::new();
            schema.insert("$ref".into(), Value::String(format!("#{pointer}")));
            for part in ["components", "definitions"] {
                if let Some(value) = document.get(part) {
                    schema.insert(part.into(), value.clone());
                }
            }
            if let Some(first) = pointer.trim_start_matches('/').split('/').next()
                && !schema.contains_key(first)
                && let Some(value) = document.get(first)
            {
                schema.insert(first.to_owned(), value.clone());
            }
            *expected = Value::Object(schema);
        }
    }
    Ok(())
}
