//! Organization secrets: write-only (names, times and rules readable, never values), encrypted at rest; each may
//! name the hosts it may be sent to and be kept for registered runners. Writes and deletes are audited, never with
//! the value.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Ctx;
use crate::api::resources::fields::{ResourceName, check_name};
use crate::auth::scope;
use crate::db::owned::{self, Owned};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::pagination::{self, ListParams, Listed};
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::api::Page;
use hookflow_shared::api::resources::{PutSecret, SecretInfo};

/// The columns of a secret's metadata.
const SECRET_COLUMNS: &str = "name, allowed_hosts, runners_only, created_at, updated_at";

type SecretRow = (String, Vec<String>, bool, DateTime<Utc>, DateTime<Utc>);

fn info((name, allowed_hosts, runners_only, created_at, updated_at): SecretRow) -> SecretInfo {
    SecretInfo { name, allowed_hosts, runners_only, created_at: created_at.into(), updated_at: updated_at.into() }
}

/// Host patterns: at most 20, each a host name (letters, digits, `-`, `.`) or `*.` and one, at most 253 long.
fn check_hosts(hosts: &[String]) -> ApiResult<Vec<String>> {
    if hosts.len() > 20 {
        return Err(ApiError::invalid("invalid field `allowed_hosts`: at most 20 hosts"));
    }
    hosts
        .iter()
        .map(|host| {
            let host = host.to_ascii_lowercase();
            let name = host.strip_prefix("*.").unwrap_or(&host);
            let valid = !name.is_empty()
                && host.len() <= 253
                && name
                    .split('.')
                    .all(|label| !label.is_empty() && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
            if valid {
                Ok(host)
            } else {
                Err(ApiError::invalid(format!(
                    "invalid field `allowed_hosts`: `{host}` is not a host name or `*.` and a domain"
                )))
            }
        })
        .collect()
}

/// List secrets, alphabetically: names and rules, never values.
#[utoipa::path(get, path = "/secrets", params(ListParams), responses((status = 200, body = Page<SecretInfo>)))]
pub async fn list_secrets(Ctx { app, caller }: Ctx<scope::ResourcesRead>, params: ListParams) -> Listed<SecretInfo> {
    let sql = format!(
        "SELECT {SECRET_COLUMNS} FROM secrets WHERE organization_id = $1 AND ($2::text IS NULL OR name > $2)
         ORDER BY name LIMIT $3"
    );
    let org = (caller.org_id, None);
    Ok(Json(pagination::keyset_page(&app.pool, sql, org, &params, info, |s| s.name.clone()).await?))
}

/// Write a secret (create or replace) with its rules: the hosts it may be sent to (none: only hosts the stored
/// flow and its environment name) and whether only registered runners get it. The value cannot be read back.
#[utoipa::path(put, path = "/secrets/{name}", params(ResourceName),
    request_body = PutSecret, responses((status = 200, body = SecretInfo)))]
pub async fn put_secret(
    Ctx { app, caller }: Ctx<scope::ResourcesWrite>,
    ResourceName(name): ResourceName,
    ApiJson(body): ApiJson<PutSecret>,
) -> ApiResult<Json<SecretInfo>> {
    check_name(&name)?;
    let hosts = check_hosts(&body.allowed_hosts)?;
    let sealed = app.settings.master_key.seal(caller.org_id, &name, body.value.as_bytes());
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let row: SecretRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO secrets (organization_id, name, ciphertext, nonce, key_version, allowed_hosts, runners_only)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (organization_id, name) DO UPDATE SET ciphertext = EXCLUDED.ciphertext, nonce = EXCLUDED.nonce,
             key_version = EXCLUDED.key_version, allowed_hosts = EXCLUDED.allowed_hosts,
             runners_only = EXCLUDED.runners_only, updated_at = now()
         RETURNING {SECRET_COLUMNS}"
    )))
    .bind(caller.org_id)
    .bind(&name)
    .bind(&sealed.ciphertext)
    .bind(&sealed.nonce)
    .bind(sealed.key_version)
    .bind(&hosts)
    .bind(body.runners_only)
    .fetch_one(&mut *tx)
    .await?;
    let details = serde_json::json!({"allowed_hosts": hosts, "runners_only": body.runners_only});
    let event =
        AuditEvent { org_id: caller.org_id, actor: caller.actor, action: "secret.written", target: name, details };
    audit::record(&mut tx, event).await?;
    tx.commit().await?;
    Ok(Json(info(row)))
}

/// Delete a secret.
#[utoipa::path(delete, path = "/secrets/{name}", params(ResourceName), responses((status = 204)))]
pub async fn delete_secret(
    Ctx { app, caller }: Ctx<scope::ResourcesWrite>,
    ResourceName(name): ResourceName,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    owned::delete(&mut *tx, Owned::Secret, caller.org_id, &name).await?;
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
