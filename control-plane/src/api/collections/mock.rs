//! `POST /collections/{collection_id}/mock` (#51): an endpoint whose response rules answer each operation of the
//! collection's OpenAPI description (loaded from the source the collection follows, fetched through the guarded
//! client when it is a URL) with its example (`openapi::responses`); only operations the collection still holds
//! (by operation key) are mocked. The endpoint is created as `POST /webhooks` creates one (quota, checks, NOTIFY),
//! with `mock_of` set: a request no rule matches gets 404.

use crate::api::collections::model::fetch;
use crate::api::collections::openapi::{self, responses};
use crate::api::context::Ctx;
use crate::api::webhooks::endpoints;
use crate::auth::scope;
use crate::error::{ApiError, Created};
use crate::extract::{ApiJson, Id};
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use hookflow_shared::api::answers::{CreateMock, RULES_MAX};
use hookflow_shared::api::collections::OpenApiSource;
use hookflow_shared::api::rules::NAME_MAX;
use hookflow_shared::api::triggers::Triggers;
use hookflow_shared::api::webhooks::{CreateWebhook, Webhook};
use hookflow_shared::{CollectionId, Scope};
use sqlx::types::Json as SqlJson;
use std::collections::HashSet;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_mock))
}

/// Create a mock of a collection: an endpoint whose `rules` answer each operation of the collection's OpenAPI
/// description with its example (the first 2xx response with one, inline or under `examples`: its status, content
/// type and body; else the first 2xx status with no body), matched by method and the operation's path as the
/// description writes it. A request no rule matches gets 404. Needs `collections:read` and `webhooks:write`.
#[utoipa::path(post, operation_id = "create_collection_mock", path = "/collections/{id}/mock", params(Id),
    request_body = CreateMock,
    responses((status = 201, body = Webhook),
        (status = 400, description = "The collection follows no OpenAPI description, holds none of its operations or \
            more than 50, or an operation cannot be a rule (its path, an example over 65,536 characters)"),
        (status = 403, description = "`insufficient_scope` (`webhooks:write` too), or `quota_exceeded` (endpoints)"),
        (status = 404, description = "No such collection in this organization")))]
async fn create_mock(
    Ctx { app, caller }: Ctx<scope::CollectionsRead>,
    Id(id): Id<CollectionId>,
    ApiJson(body): ApiJson<CreateMock>,
) -> Created<Webhook> {
    caller.require(Scope::WebhooksWrite)?;
    let mut conn = app.pool.acquire().await?;
    let collection = fetch(&mut conn, caller.org_id, id).await?;
    let source: Option<(SqlJson<OpenApiSource>,)> =
        sqlx::query_as("SELECT source FROM collection_syncs WHERE organization_id = $1 AND collection_id = $2")
            .bind(caller.org_id)
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    let keys: HashSet<String> = sqlx::query_scalar(
        "SELECT operation_key FROM collection_requests
         WHERE organization_id = $1 AND collection_id = $2 AND operation_key IS NOT NULL",
    )
    .bind(caller.org_id)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .collect();
    drop(conn);
    let Some((source,)) = source else {
        return Err(ApiError::invalid(
            "this collection follows no OpenAPI description (import one, or PUT its openapi-sync source): a mock \
             answers with the description's examples",
        ));
    };
    let loaded = openapi::load(&app, caller.org_id, &source.0).await?;
    let rules = tokio::task::spawn_blocking(move || responses::mock_rules(&loaded.document, &|key| keys.contains(key)))
        .await
        .map_err(ApiError::internal_because)?
        .map_err(|e| ApiError::invalid(format!("this collection cannot be mocked: {e}")))?;
    if rules.is_empty() {
        return Err(ApiError::invalid(
            "this collection holds none of its OpenAPI description's operations: there is nothing to mock",
        ));
    }
    if rules.len() > RULES_MAX {
        return Err(ApiError::invalid(format!(
            "this collection has {} operations: a mock answers at most {RULES_MAX} (one rule each)",
            rules.len()
        )));
    }
    let name = match body.name {
        Some(name) => name,
        None => {
            let name: String = format!("Mock of {}", collection.name).chars().take(NAME_MAX).collect();
            crate::validate::field("name", name)?
        }
    };
    let create = CreateWebhook {
        name,
        description: None,
        max_body_bytes: None,
        retention: None,
        response: None,
        verification: None,
        handshake: None,
        triggers: Triggers::default(),
        rules: Some(rules),
        cors: None,
    };
    let webhook = endpoints::create(&app, &caller, create, Some(id)).await?;
    Ok((StatusCode::CREATED, Json(webhook)))
}
