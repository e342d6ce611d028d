//! Quotas per organization (Operating II): `stored_bytes` (capture bodies and node results), `endpoints`, `flows`
//! and `captures_per_day` (UTC day), each the organization's own limit (set by an operator) or the server's
//! default, none unless set. Usage is counted by the database (`organization_usage`, kept by triggers on captures
//! and node results, migration 20261128000050), so every writer and every deletion is counted.
//!
//! Creating an endpoint or a flow counts the organization's rows under its advisory lock in the creating
//! transaction: exact across replicas (403 `quota_exceeded`). Captures are the hot path: they are admitted from an
//! in-memory view (`captures`) before the body is read (429 `quota_exceeded` with `Retry-After`); nothing already
//! stored is ever touched by a quota.

pub mod captures;
pub mod usage;

use crate::error::{ApiError, ApiResult};
use hookflow_shared::{ErrorCode, OrgId};
use sqlx::PgConnection;

/// The server's default limits (`--default-stored-bytes`, `--default-endpoints`, `--default-flows`,
/// `--default-captures-per-day`), for organizations whose operator set none; `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuotaDefaults {
    pub stored_bytes: Option<u64>,
    pub endpoints: Option<u64>,
    pub flows: Option<u64>,
    pub captures_per_day: Option<u64>,
}

impl QuotaDefaults {
    fn get(self, quota: Quota) -> Option<i64> {
        let value = match quota {
            Quota::StoredBytes => self.stored_bytes,
            Quota::Endpoints => self.endpoints,
            Quota::Flows => self.flows,
            Quota::CapturesPerDay => self.captures_per_day,
        };
        value.map(|v| i64::try_from(v).unwrap_or(i64::MAX))
    }
}

/// One quota, named as the API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    StoredBytes,
    Endpoints,
    Flows,
    CapturesPerDay,
}

impl Quota {
    /// The field name (`GET /organization/usage`, the error message, the metric's `quota` label).
    pub fn name(self) -> &'static str {
        match self {
            Quota::StoredBytes => "stored_bytes",
            Quota::Endpoints => "endpoints",
            Quota::Flows => "flows",
            Quota::CapturesPerDay => "captures_per_day",
        }
    }

    /// The organizations column holding an operator's limit.
    fn column(self) -> &'static str {
        match self {
            Quota::StoredBytes => "stored_bytes_limit",
            Quota::Endpoints => "endpoints_limit",
            Quota::Flows => "flows_limit",
            Quota::CapturesPerDay => "captures_per_day_limit",
        }
    }
}

/// The refusal of `quota` at `limit`, counted in `hookflow_quota_refusals_total{quota}`: 429 with `Retry-After`
/// when `retry_after_s` is given (captures), else 403 (creating endpoints and flows).
pub fn exceeded(quota: Quota, limit: i64, retry_after_s: Option<u64>) -> ApiError {
    metrics::counter!("hookflow_quota_refusals_total", "quota" => quota.name()).increment(1);
    let mut error = ApiError::new(
        ErrorCode::QuotaExceeded,
        format!("the organization's quota `{}` ({limit}) is reached; nothing already stored was removed", quota.name()),
    );
    if let Some(seconds) = retry_after_s {
        error.retry_after_s = Some(seconds.max(1));
        error.status = Some(429);
    }
    error
}

/// Admits one more endpoint or flow of `org_id` in the transaction that creates it, or 403 `quota_exceeded` when
/// its rows already reach the limit. The organization's advisory lock (held to the commit) makes concurrent
/// creations, on any replica, count one after the other.
pub async fn admit_created(
    conn: &mut PgConnection,
    org_id: OrgId,
    quota: Quota,
    defaults: QuotaDefaults,
) -> ApiResult<()> {
    let table = match quota {
        Quota::Endpoints => "webhooks",
        Quota::Flows => "flows",
        Quota::StoredBytes | Quota::CapturesPerDay => return Ok(()),
    };
    let limit = limit_of(&mut *conn, org_id, quota, defaults).await?;
    let Some(limit) = limit else { return Ok(()) };
    sqlx::query("SELECT pg_advisory_xact_lock(4848, hashtext($1::text || $2))")
        .bind(org_id)
        .bind(table)
        .execute(&mut *conn)
        .await?;
    let count: i64 =
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table} WHERE organization_id = $1")))
            .bind(org_id)
            .fetch_one(&mut *conn)
            .await?;
    if count >= limit {
        return Err(exceeded(quota, limit, None));
    }
    Ok(())
}

/// The limit of `quota` in force for `org_id`: its own, else the server's default.
async fn limit_of(
    conn: &mut PgConnection,
    org_id: OrgId,
    quota: Quota,
    defaults: QuotaDefaults,
) -> ApiResult<Option<i64>> {
    let own: Option<Option<i64>> =
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT {} FROM organizations WHERE id = $1", quota.column())))
            .bind(org_id)
            .fetch_optional(conn)
            .await?;
    Ok(own.flatten().or(defaults.get(quota)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_quota_and_captures_answer_429() {
        let created = exceeded(Quota::Flows, 3, None);
        assert_eq!((created.code, created.status, created.retry_after_s), (ErrorCode::QuotaExceeded, None, None));
        assert!(created.message.contains("`flows` (3)"), "{}", created.message);
        let captured = exceeded(Quota::CapturesPerDay, 10, Some(0));
        assert_eq!((captured.status, captured.retry_after_s), (Some(429), Some(1)));
        assert!(captured.message.contains("captures_per_day"));
    }

    #[test]
    fn defaults_apply_by_quota() {
        let defaults = QuotaDefaults { stored_bytes: Some(u64::MAX), flows: Some(2), ..QuotaDefaults::default() };
        assert_eq!(defaults.get(Quota::Flows), Some(2));
        assert_eq!(defaults.get(Quota::StoredBytes), Some(i64::MAX));
        assert_eq!(defaults.get(Quota::Endpoints), None);
    }
}
