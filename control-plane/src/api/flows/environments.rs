//! Environments of a flow: keyed sets of variables whose values may reference secrets (`{{secret.NAME}}`).

use crate::api::context::Ctx;
use crate::api::flows::model::ensure_exists;
use crate::auth::scope;
use crate::db::owned::{self, Owned};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, Id};
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::FlowId;
use hookflow_shared::api::flows::{Environment, EnvironmentList, PutEnvironment};
use hookflow_shared::flow::template;
use std::collections::BTreeMap;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_environments)).routes(routes!(put_environment, delete_environment))
}

pub fn environment(key: String, variables: BTreeMap<String, String>, updated_at: DateTime<Utc>) -> Environment {
    let mut secret_refs: Vec<String> = variables.values().flat_map(|v| template::secret_names(v)).collect();
    secret_refs.sort();
    secret_refs.dedup();
    Environment { key, variables, secret_refs, updated_at: updated_at.into() }
}

/// Environments of a flow, by key.
#[utoipa::path(get, operation_id = "list_flow_environments", path = "/flows/{id}/environments", params(Id), responses((status = 200, body = EnvironmentList)))]
async fn list_environments(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    Id(id): Id<FlowId>,
) -> ApiResult<Json<EnvironmentList>> {
    let mut conn = app.pool.acquire().await?;
    ensure_exists(&mut conn, caller.org_id, id).await?;
    type EnvironmentRow = (String, sqlx::types::Json<BTreeMap<String, String>>, DateTime<Utc>);
    let rows: Vec<EnvironmentRow> = sqlx::query_as(
        "SELECT key, variables, updated_at FROM flow_environments WHERE organization_id = $1 AND flow_id = $2 ORDER BY key",
    )
    .bind(caller.org_id)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(Json(EnvironmentList { items: rows.into_iter().map(|(k, v, t)| environment(k, v.0, t)).collect() }))
}

/// The `{key}` of an environment's routes (documentation of the path parameter).
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct EnvironmentKey {
    /// 1 to 64 letters, digits, `_` or `-`.
    #[param(schema_with = hookflow_shared::api::rules::environment_key)]
    #[allow(dead_code)]
    key: String,
}

/// Create or replace an environment.
#[utoipa::path(put, operation_id = "put_flow_environment", path = "/flows/{id}/environments/{key}", params(Id, EnvironmentKey),
    request_body = PutEnvironment,
    responses((status = 200, body = Environment)))]
async fn put_environment(
    Ctx { app, caller }: Ctx<scope::FlowsWrite>,
    ApiPath((id, key)): ApiPath<(FlowId, String)>,
    ApiJson(body): ApiJson<PutEnvironment>,
) -> ApiResult<Json<Environment>> {
    check_environment(&key, &body.variables)?;
    let mut conn = app.pool.acquire().await?;
    ensure_exists(&mut conn, caller.org_id, id).await?;
    let updated_at: DateTime<Utc> = sqlx::query_scalar(
        "INSERT INTO flow_environments (flow_id, organization_id, key, variables) VALUES ($1, $2, $3, $4)
         ON CONFLICT (flow_id, key) DO UPDATE SET variables = EXCLUDED.variables, updated_at = now()
         RETURNING updated_at",
    )
    .bind(id)
    .bind(caller.org_id)
    .bind(&key)
    .bind(sqlx::types::Json(&body.variables))
    .fetch_one(&mut *conn)
    .await?;
    Ok(Json(environment(key, body.variables, updated_at)))
}

/// Delete an environment.
#[utoipa::path(delete, operation_id = "delete_flow_environment", path = "/flows/{id}/environments/{key}", params(Id, EnvironmentKey), responses((status = 204)))]
async fn delete_environment(
    Ctx { app, caller }: Ctx<scope::FlowsWrite>,
    ApiPath((id, key)): ApiPath<(FlowId, String)>,
) -> ApiResult<StatusCode> {
    owned::delete(&app.pool, Owned::Environment(id), caller.org_id, &key).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Checks an environment's key (1 to 64 letters, digits, `_` or `-`), its names (none built in) and the templates
/// of its values.
pub fn check_environment(key: &str, variables: &BTreeMap<String, String>) -> ApiResult<()> {
    if !hookflow_shared::api::rules::is_key(key, 64) {
        return Err(ApiError::invalid("the environment key must be 1 to 64 letters, digits, _ or -"));
    }
    for (name, value) in variables {
        if let Some(message) = hookflow_shared::flow::names::reserved_problem(name) {
            return Err(ApiError::invalid(format!("invalid field `variables.{name}`: {message}")));
        }
        template::check(value).map_err(|e| ApiError::invalid(format!("invalid field `variables.{name}`: {e}")))?;
    }
    Ok(())
}
