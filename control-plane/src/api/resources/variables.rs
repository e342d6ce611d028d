//! Organization variables: plain values flows read as `{{NAME}}` (never templates), listed with their values.

use crate::api::context::Ctx;
use crate::api::resources::fields::{ResourceName, check_name};
use crate::auth::scope;
use crate::db::owned::{self, Owned};
use crate::error::ApiResult;
use crate::extract::ApiJson;
use crate::pagination::{self, ListParams, Listed};
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::api::Page;
use hookflow_shared::api::resources::{PutValue, Variable};

type VariableRow = (String, String, DateTime<Utc>, DateTime<Utc>);

fn variable((name, value, created_at, updated_at): VariableRow) -> Variable {
    Variable { name, value, created_at: created_at.into(), updated_at: updated_at.into() }
}

/// List organization variables, alphabetically.
#[utoipa::path(get, path = "/variables", params(ListParams), responses((status = 200, body = Page<Variable>)))]
pub async fn list_variables(Ctx { app, caller }: Ctx<scope::ResourcesRead>, params: ListParams) -> Listed<Variable> {
    let sql = "SELECT name, value, created_at, updated_at FROM variables
         WHERE organization_id = $1 AND ($2::text IS NULL OR name > $2) ORDER BY name LIMIT $3";
    let org = (caller.org_id, None);
    Ok(Json(pagination::keyset_page(&app.pool, sql.into(), org, &params, variable, |v| v.name.clone()).await?))
}

/// Write a variable (create or replace).
#[utoipa::path(put, path = "/variables/{name}", params(ResourceName), request_body = PutValue,
    responses((status = 200, body = Variable)))]
pub async fn put_variable(
    Ctx { app, caller }: Ctx<scope::ResourcesWrite>,
    ResourceName(name): ResourceName,
    ApiJson(body): ApiJson<PutValue>,
) -> ApiResult<Json<Variable>> {
    check_name(&name)?;
    let row: VariableRow = sqlx::query_as(
        "INSERT INTO variables (organization_id, name, value) VALUES ($1, $2, $3)
         ON CONFLICT (organization_id, name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
         RETURNING name, value, created_at, updated_at",
    )
    .bind(caller.org_id)
    .bind(&name)
    .bind(body.value.as_str())
    .fetch_one(&app.pool)
    .await?;
    Ok(Json(variable(row)))
}

/// Delete a variable.
#[utoipa::path(delete, path = "/variables/{name}", params(ResourceName), responses((status = 204)))]
pub async fn delete_variable(
    Ctx { app, caller }: Ctx<scope::ResourcesWrite>,
    ResourceName(name): ResourceName,
) -> ApiResult<StatusCode> {
    owned::delete(&app.pool, Owned::Variable, caller.org_id, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
