//! Reading usage from the database: one organization's whole usage with its limits (`GET /organization/usage`),
//! the capture quotas of several at once (the capture view's refresh), and the totals over every organization
//! (metrics, no label per organization).

use crate::quota::QuotaDefaults;
use hookflow_shared::OrgId;
use hookflow_shared::api::admin::{Usage, UsageLimits};
use sqlx::PgPool;

/// The UTC day as PostgreSQL says it (the triggers' day).
const TODAY: &str = "(now() AT TIME ZONE 'UTC')::date";

type UsageRow = (i64, i64, i64, i64, Option<i64>, Option<i64>, Option<i64>, Option<i64>, Option<i32>, Option<i32>);

/// The server's default retentions in days (`--default-execution-retention-days`, `--default-audit-retention-days`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RetentionDays {
    pub executions: Option<u32>,
    pub audit: Option<u32>,
}

/// `org_id`'s usage and the limits in force (its own, else `defaults` and `retention`'s); `None` when there is
/// no such organization.
pub async fn read(
    pool: &PgPool,
    org_id: OrgId,
    defaults: QuotaDefaults,
    retention: RetentionDays,
) -> Result<Option<Usage>, sqlx::Error> {
    let row: Option<UsageRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT COALESCE((SELECT sum(u.stored_bytes) FROM organization_usage u WHERE u.organization_id = o.id), 0)::int8,
                (SELECT count(*) FROM webhooks w WHERE w.organization_id = o.id),
                (SELECT count(*) FROM flows f WHERE f.organization_id = o.id),
                COALESCE((SELECT sum(u.captures) FROM organization_usage u
                          WHERE u.organization_id = o.id AND u.day = {TODAY}), 0)::int8,
                o.stored_bytes_limit, o.endpoints_limit, o.flows_limit, o.captures_per_day_limit,
                o.execution_retention_days, o.audit_retention_days
         FROM organizations o WHERE o.id = $1"
    )))
    .bind(org_id)
    .fetch_optional(pool)
    .await?;
    let Some((stored_bytes, endpoints, flows, captures_today, bytes, endpoint_limit, flow_limit, per_day, ex, au)) =
        row
    else {
        return Ok(None);
    };
    let or = |own: Option<i64>, default: Option<u64>| own.or(default.map(|d| i64::try_from(d).unwrap_or(i64::MAX)));
    let days = |own: Option<i32>, default: Option<u32>| own.or(default.and_then(|d| i32::try_from(d).ok()));
    Ok(Some(Usage {
        stored_bytes,
        endpoints,
        flows,
        captures_today,
        limits: UsageLimits {
            stored_bytes: or(bytes, defaults.stored_bytes),
            endpoints: or(endpoint_limit, defaults.endpoints),
            flows: or(flow_limit, defaults.flows),
            captures_per_day: or(per_day, defaults.captures_per_day),
            execution_retention_days: days(ex, retention.executions),
            audit_retention_days: days(au, retention.audit),
        },
    }))
}

/// What the capture view needs of one organization: its own limits on stored bytes and captures per day, its
/// stored bytes and today's captures, and the day they were counted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct CaptureUsage {
    pub org_id: OrgId,
    pub stored_bytes_limit: Option<i64>,
    pub captures_per_day_limit: Option<i64>,
    pub stored_bytes: i64,
    pub captures_today: i64,
    pub day: chrono::NaiveDate,
}

/// [`CaptureUsage`] of each of `orgs` that still exists, in one statement.
pub async fn for_captures(pool: &PgPool, orgs: &[OrgId]) -> Result<Vec<CaptureUsage>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT o.id AS org_id, o.stored_bytes_limit, o.captures_per_day_limit,
                COALESCE(sum(u.stored_bytes), 0)::int8 AS stored_bytes,
                COALESCE(sum(u.captures) FILTER (WHERE u.day = {TODAY}), 0)::int8 AS captures_today,
                {TODAY} AS day
         FROM organizations o LEFT JOIN organization_usage u ON u.organization_id = o.id
         WHERE o.id = ANY($1) GROUP BY o.id"
    )))
    .bind(orgs)
    .fetch_all(pool)
    .await
}

/// Bytes stored and captures received today over every organization (`hookflow_usage_*` gauges).
pub async fn totals(pool: &PgPool) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT COALESCE(sum(stored_bytes), 0)::int8, COALESCE(sum(captures) FILTER (WHERE day = {TODAY}), 0)::int8
         FROM organization_usage"
    )))
    .fetch_one(pool)
    .await
}
