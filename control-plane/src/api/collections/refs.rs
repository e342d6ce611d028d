//! Flows that use collection requests (`request_ref`): checked when a flow is written, resolved into inline requests
//! when it is launched (so an edit or a sync reaches the next run), and guarding deletes while referenced.

use crate::error::{ApiError, ApiResult, to_json};
use hookflow_shared::flow::definition::{RequestRef, RequestSpec};
use hookflow_shared::{CollectionId, CollectionRequestId, OrgId};
use serde_json::Value;
use sqlx::PgConnection;
use sqlx::types::Json as SqlJson;
use std::collections::{BTreeMap, HashMap};

/// What a delete would remove.
#[derive(Debug, Clone, Copy)]
pub enum Referenced {
    Collection(CollectionId),
    Request(CollectionRequestId),
}

/// Names of the flows whose draft or a published version references `what`.
pub async fn referencing_flows(
    conn: &mut PgConnection,
    org_id: OrgId,
    what: Referenced,
) -> Result<Vec<String>, sqlx::Error> {
    let (field, id) = match what {
        Referenced::Collection(id) => ("collection_id", id.to_string()),
        Referenced::Request(id) => ("request_id", id.to_string()),
    };
    // Ids are compared lower-cased: a definition is stored as written, and a UUID may be written in capitals.
    // Definitions are `json` (kept as written): its functions, not jsonb's.
    sqlx::query_scalar(
        "SELECT f.name FROM flows f WHERE f.organization_id = $1 AND (
             EXISTS (SELECT 1 FROM json_array_elements(f.definition->'nodes') n
                     WHERE lower(n->'request_ref'->>$3) = $2)
             OR EXISTS (SELECT 1 FROM flow_versions v, json_array_elements(v.definition->'nodes') n
                        WHERE v.flow_id = f.id AND lower(n->'request_ref'->>$3) = $2))
         ORDER BY f.name",
    )
    .bind(org_id)
    .bind(id)
    .bind(field)
    .fetch_all(conn)
    .await
}

/// 409 naming the flows that reference `what`.
pub async fn refuse_if_referenced(conn: &mut PgConnection, org_id: OrgId, what: Referenced) -> ApiResult<()> {
    let flows = referencing_flows(conn, org_id, what).await?;
    if flows.is_empty() {
        return Ok(());
    }
    let thing = match what {
        Referenced::Collection(_) => "a request of this collection",
        Referenced::Request(_) => "this request",
    };
    let names: Vec<String> = flows.iter().map(|f| format!("`{f}`")).collect();
    Err(ApiError::conflict(format!(
        "{thing} is used by the flows {}; change those flows (and their published versions) first",
        names.join(", ")
    )))
}

/// Every `request_ref` in a definition's nodes.
fn references(definition: &Value) -> Vec<RequestRef> {
    let nodes = definition["nodes"].as_array().map(Vec::as_slice).unwrap_or_default();
    nodes.iter().filter_map(|node| serde_json::from_value(node.get("request_ref")?.clone()).ok()).collect()
}

type Found = HashMap<CollectionRequestId, (CollectionId, RequestSpec, BTreeMap<String, String>)>;

/// The referenced requests of the organization, by id, with their collection and its variables.
async fn load(conn: &mut PgConnection, org_id: OrgId, ids: &[CollectionRequestId]) -> Result<Found, sqlx::Error> {
    type Row = (
        CollectionRequestId,
        CollectionId,
        String,
        String,
        SqlJson<BTreeMap<String, String>>,
        SqlJson<BTreeMap<String, String>>,
        Option<String>,
        SqlJson<BTreeMap<String, String>>,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT r.id, r.collection_id, r.method, r.url, r.headers, r.query, r.body, c.variables
         FROM collection_requests r JOIN collections c ON c.id = r.collection_id
         WHERE r.organization_id = $1 AND r.id = ANY($2)",
    )
    .bind(org_id)
    .bind(ids)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, collection_id, method, url, headers, query, body, variables)| {
            let spec = RequestSpec {
                method,
                url,
                headers: headers.0,
                query: query.0,
                body,
                form: None,
                multipart: None,
                graphql: None,
                cookies: None,
                client_certificate: None,
            };
            (id, (collection_id, spec, variables.0))
        })
        .collect())
}

/// Checks that every `request_ref` of a definition names a request of the organization, in that collection.
pub async fn check(conn: &mut PgConnection, org_id: OrgId, definition: &Value) -> ApiResult<()> {
    let refs = references(definition);
    if refs.is_empty() {
        return Ok(());
    }
    let ids: Vec<CollectionRequestId> = refs.iter().map(|r| r.request_id).collect();
    let found = load(conn, org_id, &ids).await?;
    for reference in &refs {
        match found.get(&reference.request_id) {
            Some((collection, ..)) if *collection == reference.collection_id => {}
            _ => {
                return Err(ApiError::invalid(format!(
                    "invalid field `definition`: `request_ref` names request {} of collection {}, which does not exist",
                    reference.request_id, reference.collection_id
                )));
            }
        }
    }
    Ok(())
}

/// Replaces every `request_ref` in `definitions` by the request it names (overrides applied), and answers the
/// variables of the collections used (the first collection wins a name both define).
pub async fn resolve<'a>(
    conn: &mut PgConnection,
    org_id: OrgId,
    definitions: impl IntoIterator<Item = &'a mut Value>,
) -> ApiResult<BTreeMap<String, String>> {
    let mut definitions: Vec<&mut Value> = definitions.into_iter().collect();
    crate::api::collections::schemas::inline(conn, org_id, &mut definitions).await?;
    let ids: Vec<CollectionRequestId> = definitions.iter().flat_map(|d| references(d)).map(|r| r.request_id).collect();
    let mut variables = BTreeMap::new();
    if ids.is_empty() {
        return Ok(variables);
    }
    let found = load(conn, org_id, &ids).await?;
    for definition in definitions {
        let Some(nodes) = definition.get_mut("nodes").and_then(Value::as_array_mut) else { continue };
        for node in nodes {
            let Some(reference) =
                node.get("request_ref").and_then(|r| serde_json::from_value::<RequestRef>(r.clone()).ok())
            else {
                continue;
            };
            let node_id = node["id"].as_str().unwrap_or_default().to_owned();
            let Some((collection, spec, collection_variables)) =
                found.get(&reference.request_id).filter(|(c, ..)| *c == reference.collection_id)
            else {
                return Err(ApiError::invalid(format!(
                    "node `{node_id}`: the collection request it uses no longer exists"
                )));
            };
            let spec = reference.overrides.as_ref().map_or_else(|| spec.clone(), |o| o.apply(spec.clone()));
            if let Some(object) = node.as_object_mut() {
                inline(object, to_json(&spec)?);
            }
            tracing::debug!(node = %node_id, collection = %collection, "request_ref resolved");
            for (name, value) in collection_variables {
                variables.entry(name.clone()).or_insert_with(|| value.clone());
            }
        }
    }
    Ok(variables)
}

/// Puts the inlined `request` where the node's `request_ref` was, so the node keeps its author's key order (an
/// explicit `"request": null` beside the reference gives way). The request's own fields come in the collection
/// request's order: `method`, `url`, `headers`, `query`, `body`, headers and query by name.
fn inline(node: &mut serde_json::Map<String, Value>, request: Value) {
    let fields = std::mem::take(node);
    let mut request = Some(request);
    for (name, value) in fields {
        match name.as_str() {
            "request" => {}
            "request_ref" => {
                node.insert("request".into(), request.take().unwrap_or(Value::Null));
            }
            _ => {
                node.insert(name, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inlined_request_takes_the_place_of_the_reference() {
        let mut node =
            serde_json::json!({"kind": "request", "request": null, "id": "a", "request_ref": {}, "extractors": []});
        inline(node.as_object_mut().expect("object"), serde_json::json!({"url": "u", "method": "GET"}));
        assert_eq!(
            serde_json::to_string(&node).expect("text"),
            r#"{"kind":"request","id":"a","request":{"url":"u","method":"GET"},"extractors":[]}"#
        );
    }
}
