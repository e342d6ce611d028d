//! API keys: create (secret shown once, never more scopes than the creator holds), list, read, delete. Only the
//! SHA-256 of a key and a display prefix are stored.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Ctx;
use crate::auth::{Actor, Caller, scope};
use crate::db::owned;
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiJson, Id};
use crate::pagination::{self, ListParams, Listed};
use crate::signals::Invalidation;
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::api::Page;
use hookflow_shared::api::admin::{ApiKey, CreateApiKey, CreatedApiKey};
use hookflow_shared::scope::Preset;
use hookflow_shared::token::{self, TokenKind};
use hookflow_shared::{ApiKeyId, ErrorCode, OrgId, ScopeSet, Timestamp, UserId};
use sqlx::PgConnection;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_api_key, list_api_keys)).routes(routes!(get_api_key, delete_api_key))
}

/// A key to create, already validated.
#[derive(Debug)]
pub struct NewKey {
    pub org_id: OrgId,
    pub name: String,
    pub scopes: ScopeSet,
    pub expires_at: Option<DateTime<Utc>>,
    pub actor: Actor,
}

#[derive(sqlx::FromRow)]
struct KeyRow {
    id: ApiKeyId,
    name: String,
    scopes: Vec<String>,
    prefix: String,
    expires_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    last_used_at: Option<DateTime<Utc>>,
}

impl From<KeyRow> for ApiKey {
    fn from(row: KeyRow) -> Self {
        ApiKey {
            id: row.id,
            name: row.name,
            scopes: row.scopes.iter().filter_map(|s| s.parse().ok()).collect(),
            prefix: row.prefix,
            expires_at: row.expires_at.map(Into::into),
            created_at: row.created_at.into(),
            last_used_at: row.last_used_at.map(Into::into),
        }
    }
}

const KEY_COLUMNS: &str = "id, name, scopes, prefix, expires_at, created_at, last_used_at";

/// Stores a new key and its audit entry; the answer is the only place the secret ever appears.
pub async fn create(conn: &mut PgConnection, new: NewKey) -> Result<CreatedApiKey, sqlx::Error> {
    let secret = crate::crypto::new_token(TokenKind::ApiKey);
    let id = ApiKeyId::now_v7();
    // The person behind the key: its maker, or the person behind the key that made it. The key works only while
    // that person is a member, within their role.
    let person: Option<UserId> = match new.actor {
        Actor::User(user_id) => Some(user_id),
        Actor::Key(key_id) => sqlx::query_scalar("SELECT created_by_user FROM api_keys WHERE id = $1")
            .bind(key_id)
            .fetch_optional(&mut *conn)
            .await?
            .flatten(),
        Actor::Address(_) | Actor::Operator | Actor::Webhook(_) | Actor::Schedule(_) => None,
    };
    let row: KeyRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO api_keys (id, organization_id, name, prefix, key_hash, scopes, expires_at, created_by,
                               created_by_user)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {KEY_COLUMNS}"
    )))
    .bind(id)
    .bind(new.org_id)
    .bind(&new.name)
    .bind(TokenKind::ApiKey.display_prefix(&secret))
    .bind(token::hash(&secret))
    .bind(new.scopes.names())
    .bind(new.expires_at)
    .bind(new.actor.to_string())
    .bind(person)
    .fetch_one(&mut *conn)
    .await?;
    audit::record(
        conn,
        AuditEvent {
            org_id: new.org_id,
            actor: new.actor,
            action: "api_key.created",
            target: id.to_string(),
            details: serde_json::json!({"name": new.name, "scopes": new.scopes.names(), "expires_at": new.expires_at}),
        },
    )
    .await?;
    Ok(CreatedApiKey { record: row.into(), key: secret })
}

/// Validates a creation request against the creator's own scopes and expiry: a key never grants more than its
/// maker holds nor outlives it (without an `expires_at` it expires with its maker).
fn validate<S>(caller: &Caller<S>, body: CreateApiKey) -> ApiResult<(String, ScopeSet, Option<DateTime<Utc>>)> {
    let caller_scopes = &caller.grantable;
    let name = body.name.as_str().to_owned();
    let scopes = match (body.scopes, body.preset) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid("give either `scopes` or `preset`, not both"));
        }
        (None, None) => return Err(ApiError::invalid("`scopes` (or a `preset`) is required")),
        (Some(names), None) => ScopeSet::parse(names.iter().map(String::as_str))
            .map_err(|e| ApiError::invalid(format!("invalid field `scopes`: {e}")))?,
        (None, Some(preset)) => Preset::from_name(&preset)
            .ok_or_else(|| ApiError::invalid(format!("unknown `preset` `{preset}`: use ci, runner or read-only")))?
            .scopes(),
    };
    if scopes.is_empty() {
        return Err(ApiError::invalid("`scopes` must name at least one scope"));
    }
    if let Some(missing) = caller_scopes.missing_from(&scopes).next() {
        return Err(ApiError::new(
            ErrorCode::InsufficientScope,
            format!("a key cannot grant `{missing}`: the caller may not grant that scope"),
        ));
    }
    let expires_at = body.expires_at.map(|t| t.0);
    if expires_at.is_some_and(|at| at <= Utc::now()) {
        return Err(ApiError::invalid("`expires_at` must be in the future"));
    }
    let expires_at = match (expires_at, caller.expires_at) {
        (Some(at), Some(limit)) if at > limit => {
            return Err(ApiError::invalid(format!(
                "`expires_at` must not be later than the calling key's own expiry ({})",
                Timestamp(limit)
            )));
        }
        (None, limit) => limit,
        (at, _) => at,
    };
    Ok((name, scopes, expires_at))
}

/// Create an API key; its secret is in this answer only.
#[utoipa::path(post, path = "/api-keys", request_body = CreateApiKey, responses((status = 201, body = CreatedApiKey)))]
async fn create_api_key(
    Ctx { app, caller }: Ctx<scope::KeysWrite>,
    ApiJson(body): ApiJson<CreateApiKey>,
) -> Created<CreatedApiKey> {
    let (name, scopes, expires_at) = validate(&caller, body)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let created =
        create(&mut tx, NewKey { org_id: caller.org_id, name, scopes, expires_at, actor: caller.actor }).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// List the organization's API keys, newest first (never their secrets).
#[utoipa::path(get, path = "/api-keys", params(ListParams), responses((status = 200, body = Page<ApiKey>)))]
async fn list_api_keys(Ctx { app, caller }: Ctx<scope::KeysRead>, params: ListParams) -> Listed<ApiKey> {
    let sql = format!(
        "SELECT {KEY_COLUMNS} FROM api_keys
         WHERE organization_id = $1 AND ($2::uuid IS NULL OR id < $2) ORDER BY id DESC LIMIT $3"
    );
    let into = ApiKey::from;
    Ok(Json(
        pagination::keyset_page::<KeyRow, _, _>(&app.pool, sql, (caller.org_id, None), &params, into, |k| k.id).await?,
    ))
}

/// Read one API key (never its secret).
#[utoipa::path(get, path = "/api-keys/{id}", params(Id), responses((status = 200, body = ApiKey)))]
async fn get_api_key(Ctx { app, caller }: Ctx<scope::KeysRead>, Id(id): Id<ApiKeyId>) -> ApiResult<Json<ApiKey>> {
    let select = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE organization_id = $1 AND id = $2");
    let row: KeyRow = owned::fetch(&app.pool, select, caller.org_id, id, "API key").await?;
    Ok(Json(row.into()))
}

/// Delete an API key; it stops working at once.
#[utoipa::path(delete, path = "/api-keys/{id}", params(Id), responses((status = 204)))]
async fn delete_api_key(Ctx { app, caller }: Ctx<scope::KeysWrite>, Id(id): Id<ApiKeyId>) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let delete = "DELETE FROM api_keys WHERE organization_id = $1 AND id = $2 RETURNING name";
    let (name,): (String,) = owned::fetch(&mut *tx, delete.into(), caller.org_id, id, "API key").await?;
    audit::record(
        &mut tx,
        AuditEvent {
            org_id: caller.org_id,
            actor: caller.actor,
            action: "api_key.deleted",
            target: id.to_string(),
            details: serde_json::json!({"name": name}),
        },
    )
    .await?;
    Invalidation::Key(id).announce(&mut tx).await?;
    tx.commit().await?;
    app.invalidate(Invalidation::Key(id));
    Ok(StatusCode::NO_CONTENT)
}
