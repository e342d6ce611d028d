//! API keys as credentials: the checksum is verified first (a typo never reaches the database), then the cache
//! or the database. A key a person made works only while that person is a member of the key's organization, and
//! never grants more than their role. Failed lookups are budgeted per client address (`failures`).

use crate::auth::component::Auth;
use crate::auth::key_cache::{Cached, KeyIdentity};
use crate::error::{ApiError, ApiResult};
use chrono::{DateTime, Utc};
use hookflow_shared::token::{self, TokenKind};
use hookflow_shared::{ApiKeyId, OrgId, Role, ScopeSet, UserId};
use std::net::IpAddr;

/// Resolves an API key: the checksum is verified first (a typo never reaches the database), then the cache or
/// the database; unknown, deleted and expired keys all answer the same 401. A key not in the cache is looked up
/// only while its client `address` has failed lookups to spare, and not when it was looked up lately and not
/// found (`failures`).
pub async fn authenticate_key(auth: &Auth, key: &str, address: Option<IpAddr>) -> ApiResult<KeyIdentity> {
    TokenKind::ApiKey.check(key).map_err(|_| ApiError::unauthorized())?;
    let hash = token::hash(key);
    let identity = match auth.keys.get(&hash) {
        Cached::Hit { identity, record_use } => {
            if record_use {
                record_last_use(auth, identity.key_id);
            }
            identity
        }
        cached => {
            if matches!(cached, Cached::Miss) {
                auth.credential_failures.before_lookup(address, &hash)?;
            }
            let identity = match lookup_key(auth, &hash).await? {
                KeyLookup::Found(identity) => identity,
                KeyLookup::Unknown => {
                    auth.credential_failures.not_found(address, hash);
                    return Err(ApiError::unauthorized());
                }
                KeyLookup::Refused => {
                    auth.credential_failures.failed(address);
                    return Err(ApiError::unauthorized());
                }
            };
            record_last_use(auth, identity.key_id);
            auth.keys.insert(hash, identity.clone());
            identity
        }
    };
    if identity.is_expired() {
        return Err(ApiError::unauthorized());
    }
    Ok(identity)
}

/// What the database says of a key.
enum KeyLookup {
    Found(KeyIdentity),
    /// No such key: it cannot start to exist (keys are made at random and shown once stored).
    Unknown,
    /// The key exists but its maker left its organization (a membership may come back: never remembered).
    Refused,
}

async fn lookup_key(auth: &Auth, hash: &[u8]) -> ApiResult<KeyLookup> {
    type KeyRow = (ApiKeyId, OrgId, Vec<String>, Option<DateTime<Utc>>, Option<UserId>, Option<String>);
    let row: Option<KeyRow> = sqlx::query_as(
        "SELECT k.id, k.organization_id, k.scopes, k.expires_at, k.created_by_user, m.role
         FROM api_keys k
         LEFT JOIN memberships m ON m.organization_id = k.organization_id AND m.user_id = k.created_by_user
         WHERE k.key_hash = $1",
    )
    .bind(hash)
    .fetch_optional(&auth.pool)
    .await?;
    let Some((key_id, org_id, scopes, expires_at, maker, role)) = row else { return Ok(KeyLookup::Unknown) };
    // Scopes were validated when the key was made; a name dropped from the catalog since simply grants nothing.
    let mut scopes: ScopeSet = scopes.iter().filter_map(|s| s.parse().ok()).collect();
    if maker.is_some() {
        // The person who made it left: the key went with them. Demoted: it grants no more than the new role.
        let Some(role) = role.as_deref().and_then(Role::parse) else { return Ok(KeyLookup::Refused) };
        let allowed = role.key_scopes();
        scopes = scopes.iter().filter(|s| allowed.grants(*s)).collect();
    }
    Ok(KeyLookup::Found(KeyIdentity { key_id, org_id, scopes, expires_at }))
}

/// Writes a key's last use, off the request's path (at most once a minute per key and replica).
fn record_last_use(auth: &Auth, key_id: ApiKeyId) {
    let pool = auth.pool.clone();
    tokio::spawn(async move {
        let _ = sqlx::query(
            "UPDATE api_keys SET last_used_at = now()
             WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
        )
        .bind(key_id)
        .execute(&pool)
        .await;
    });
}
