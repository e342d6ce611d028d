//! `Idempotency-Key` on launches: the key is reserved in the launch's own transaction, so concurrent retries
//! wait for the first one and then replay its answer; a different body under the same key is 422. Keys live
//! 24 hours.

use crate::error::{ApiError, ApiResult};
use axum::http::HeaderMap;
use hookflow_shared::wire::header;
use hookflow_shared::{ErrorCode, OrgId};
use sha2::{Digest as _, Sha256};
use sqlx::PgConnection;

/// A key and the fingerprint of the request it came with.
#[derive(Debug)]
pub struct Claim {
    pub key: String,
    pub operation: &'static str,
    pub request_hash: Vec<u8>,
}

/// Reads the header; an empty or overlong key is refused.
pub fn from_headers(headers: &HeaderMap, operation: &'static str, request: &[u8]) -> ApiResult<Option<Claim>> {
    let Some(value) = headers.get(header::IDEMPOTENCY_KEY) else { return Ok(None) };
    let key = value.to_str().map(str::trim).unwrap_or_default();
    if key.is_empty() || key.len() > 255 {
        return Err(ApiError::invalid("`Idempotency-Key` must be 1 to 255 visible characters"));
    }
    Ok(Some(Claim { key: key.to_owned(), operation, request_hash: Sha256::digest(request).to_vec() }))
}

/// What a reservation found.
#[derive(Debug)]
pub enum Reservation {
    /// The key is ours: go on, then `store` the answer in the same transaction.
    New,
    /// The same request was answered before: replay this body.
    Replay(serde_json::Value),
}

pub async fn reserve(conn: &mut PgConnection, org_id: OrgId, claim: &Claim) -> ApiResult<Reservation> {
    // A concurrent holder of the key makes this INSERT wait for its commit; an expired key is taken over.
    let fresh: Option<bool> = sqlx::query_scalar(
        "INSERT INTO idempotency_keys (organization_id, operation, key, request_hash) VALUES ($1, $2, $3, $4)
         ON CONFLICT (organization_id, operation, key) DO UPDATE
             SET request_hash = EXCLUDED.request_hash, response = NULL, created_at = now()
             WHERE idempotency_keys.created_at < now() - interval '24 hours'
         RETURNING true",
    )
    .bind(org_id)
    .bind(claim.operation)
    .bind(&claim.key)
    .bind(&claim.request_hash)
    .fetch_optional(&mut *conn)
    .await?;
    if fresh.is_some() {
        return Ok(Reservation::New);
    }
    let (hash, response): (Vec<u8>, Option<serde_json::Value>) = sqlx::query_as(
        "SELECT request_hash, response FROM idempotency_keys
         WHERE organization_id = $1 AND operation = $2 AND key = $3",
    )
    .bind(org_id)
    .bind(claim.operation)
    .bind(&claim.key)
    .fetch_one(&mut *conn)
    .await?;
    if hash != claim.request_hash {
        return Err(ApiError::new(
            ErrorCode::IdempotencyKeyReused,
            "this Idempotency-Key was used with a different request; use a new key",
        ));
    }
    response
        .map(Reservation::Replay)
        .ok_or_else(|| ApiError::conflict("a launch with this Idempotency-Key is in progress"))
}

/// Records the answer to replay (never with secrets or job tokens in it).
pub async fn store(
    conn: &mut PgConnection,
    org_id: OrgId,
    claim: &Claim,
    response: &serde_json::Value,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE idempotency_keys SET response = $4 WHERE organization_id = $1 AND operation = $2 AND key = $3")
        .bind(org_id)
        .bind(claim.operation)
        .bind(&claim.key)
        .bind(response)
        .execute(conn)
        .await?;
    Ok(())
}

/// Forgets keys older than 24 hours (run by retention).
pub async fn expire(pool: &sqlx::PgPool) -> Result<u64, sqlx::Error> {
    let done = sqlx::query("DELETE FROM idempotency_keys WHERE created_at < now() - interval '24 hours'")
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}
