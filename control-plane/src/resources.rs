//! Organization resources: secrets (write-only, encrypted at rest, names and times readable) and variables.
//! Writing or deleting a secret is recorded in the audit log, never with its value.

use crate::admin::audit::{self, AuditEvent};
use crate::http::auth::{Ctx, scope};
use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::{ApiJson, ApiPath, ApiQuery};
use crate::http::pagination::{self, ListParams};
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::api::Page;
use hookflow_shared::api::resources::{PutValue, SecretInfo, Variable};
use utoipa_axum::{router::OpenApiRouter, routes};

/// Largest secret or variable value.
const MAX_VALUE: usize = 64 * 1024;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_secrets))
        .routes(routes!(put_secret, delete_secret))
        .routes(routes!(list_variables))
        .routes(routes!(put_variable, delete_variable))
}

/// Names usable in templates (`{{secret.NAME}}`, `{{NAME}}`): a letter or `_`, then letters, digits, `_`.
fn check_name(name: &str) -> ApiResult<()> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || name.len() > 128 || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(ApiError::invalid(format!(
            "`{name}` is not a valid name: use letters, digits and _ (not first), at most 128 characters"
        )));
    }
    Ok(())
}

fn check_value(value: &str) -> ApiResult<()> {
    if value.len() > MAX_VALUE {
        return Err(ApiError::invalid("`value` must be at most 64 KiB"));
    }
    Ok(())
}

/// List secret names, alphabetically (never their values).
#[utoipa::path(get, path = "/secrets", tag = "Resources", params(ListParams),
    responses((status = 200, body = Page<SecretInfo>)))]
async fn list_secrets(
    Ctx { app, caller }: Ctx<scope::ResourcesRead>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<Page<SecretInfo>>> {
    let page = params.page::<String>()?;
    let rows: Vec<(String, DateTime<Utc>, DateTime<Utc>)> = sqlx::query_as(
        "SELECT name, created_at, updated_at FROM secrets WHERE organization_id = $1 AND ($2::text IS NULL OR name > $2)
         ORDER BY name LIMIT $3",
    )
    .bind(caller.org_id)
    .bind(&page.after)
    .bind(page.fetch_limit())
    .fetch_all(&app.pool)
    .await?;
    let items = rows
        .into_iter()
        .map(|(name, created_at, updated_at)| SecretInfo {
            name,
            created_at: created_at.into(),
            updated_at: updated_at.into(),
        })
        .collect();
    Ok(Json(pagination::finish(items, &page, |s| s.name.clone())?))
}

/// Write a secret (create or replace). The value cannot be read back.
#[utoipa::path(put, path = "/secrets/{name}", tag = "Resources", params(("name" = String, Path)), request_body = PutValue,
    responses((status = 200, body = SecretInfo)))]
async fn put_secret(
    Ctx { app, caller }: Ctx<scope::ResourcesWrite>,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<PutValue>,
) -> ApiResult<Json<SecretInfo>> {
    check_name(&name)?;
    check_value(&body.value)?;
    let sealed = app.settings.master_key.seal(caller.org_id, &name, body.value.as_bytes());
    let mut tx = app.pool.begin().await?;
    let (created_at, updated_at): (DateTime<Utc>, DateTime<Utc>) = sqlx::query_as(
        "INSERT INTO secrets (organization_id, name, ciphertext, nonce, key_version) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (organization_id, name) DO UPDATE SET ciphertext = EXCLUDED.ciphertext, nonce = EXCLUDED.nonce,
             key_version = EXCLUDED.key_version, updated_at = now()
         RETURNING created_at, updated_at",
    )
    .bind(caller.org_id)
    .bind(&name)
    .bind(&sealed.ciphertext)
    .bind(&sealed.nonce)
    .bind(sealed.key_version)
    .fetch_one(&mut *tx)
    .await?;
    let event = AuditEvent {
        org_id: caller.org_id,
        actor: caller.actor,
        action: "secret.written",
        target: name.clone(),
        details: serde_json::json!({}),
    };
    audit::record(&mut tx, event).await?;
    tx.commit().await?;
    Ok(Json(SecretInfo { name, created_at: created_at.into(), updated_at: updated_at.into() }))
}

/// Delete a secret.
#[utoipa::path(delete, path = "/secrets/{name}", tag = "Resources", params(("name" = String, Path)),
    responses((status = 204)))]
async fn delete_secret(
    Ctx { app, caller }: Ctx<scope::ResourcesWrite>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<StatusCode> {
    let mut tx = app.pool.begin().await?;
    let deleted = sqlx::query("DELETE FROM secrets WHERE organization_id = $1 AND name = $2")
        .bind(caller.org_id)
        .bind(&name)
        .execute(&mut *tx)
        .await?;
    if deleted.rows_affected() == 0 {
        return Err(ApiError::not_found("secret"));
    }
    let event = AuditEvent {
        org_id: caller.org_id,
        actor: caller.actor,
        action: "secret.deleted",
        target: name,
        details: serde_json::json!({}),
    };
    audit::record(&mut tx, event).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

type VariableRow = (String, String, DateTime<Utc>, DateTime<Utc>);

fn variable((name, value, created_at, updated_at): VariableRow) -> Variable {
    Variable { name, value, created_at: created_at.into(), updated_at: updated_at.into() }
}

/// List organization variables, alphabetically.
#[utoipa::path(get, path = "/variables", tag = "Resources", params(ListParams),
    responses((status = 200, body = Page<Variable>)))]
async fn list_variables(
    Ctx { app, caller }: Ctx<scope::ResourcesRead>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<Page<Variable>>> {
    let page = params.page::<String>()?;
    let rows: Vec<VariableRow> = sqlx::query_as(
        "SELECT name, value, created_at, updated_at FROM variables
         WHERE organization_id = $1 AND ($2::text IS NULL OR name > $2) ORDER BY name LIMIT $3",
    )
    .bind(caller.org_id)
    .bind(&page.after)
    .bind(page.fetch_limit())
    .fetch_all(&app.pool)
    .await?;
    Ok(Json(pagination::finish(rows.into_iter().map(variable).collect(), &page, |v| v.name.clone())?))
}

/// Write a variable (create or replace).
#[utoipa::path(put, path = "/variables/{name}", tag = "Resources", params(("name" = String, Path)), request_body = PutValue,
    responses((status = 200, body = Variable)))]
async fn put_variable(
    Ctx { app, caller }: Ctx<scope::ResourcesWrite>,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<PutValue>,
) -> ApiResult<Json<Variable>> {
    check_name(&name)?;
    check_value(&body.value)?;
    let row: VariableRow = sqlx::query_as(
        "INSERT INTO variables (organization_id, name, value) VALUES ($1, $2, $3)
         ON CONFLICT (organization_id, name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
         RETURNING name, value, created_at, updated_at",
    )
    .bind(caller.org_id)
    .bind(&name)
    .bind(&body.value)
    .fetch_one(&app.pool)
    .await?;
    Ok(Json(variable(row)))
}

/// Delete a variable.
#[utoipa::path(delete, path = "/variables/{name}", tag = "Resources", params(("name" = String, Path)),
    responses((status = 204)))]
async fn delete_variable(
    Ctx { app, caller }: Ctx<scope::ResourcesWrite>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<StatusCode> {
    let deleted = sqlx::query("DELETE FROM variables WHERE organization_id = $1 AND name = $2")
        .bind(caller.org_id)
        .bind(&name)
        .execute(&app.pool)
        .await?;
    if deleted.rows_affected() == 0 {
        return Err(ApiError::not_found("variable"));
    }
    Ok(StatusCode::NO_CONTENT)
}
