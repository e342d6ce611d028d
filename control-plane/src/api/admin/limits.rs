//! What an operator sets of an organization (`hookflow-server orgs limits`): its retention of executions and
//! audit entries and its quotas, each its own or cleared back to the server's default; audited as
//! `organization.limits` with every value then in force.

use crate::api::admin::audit::{self, AuditEvent};
use crate::auth::Actor;
use hookflow_shared::OrgId;
use sqlx::PgConnection;

/// For each limit: absent keeps it, `Some(None)` clears it (the server's default applies), `Some(Some(n))` sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrgLimits {
    pub execution_retention_days: Option<Option<u32>>,
    pub audit_retention_days: Option<Option<u32>>,
    pub stored_bytes: Option<Option<u64>>,
    pub endpoints: Option<Option<u64>>,
    pub flows: Option<Option<u64>>,
    pub captures_per_day: Option<Option<u64>>,
}

impl OrgLimits {
    /// Whether it names no limit at all.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// An organization's own limits after a change (`None`: the server's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct OwnLimits {
    pub execution_retention_days: Option<i32>,
    pub audit_retention_days: Option<i32>,
    pub stored_bytes: Option<i64>,
    pub endpoints: Option<i64>,
    pub flows: Option<i64>,
    pub captures_per_day: Option<i64>,
}

/// Sets what `limits` names, audited; answers the organization's own limits now, or `None` when there is no such
/// organization.
pub async fn set(conn: &mut PgConnection, org_id: OrgId, limits: OrgLimits) -> Result<Option<OwnLimits>, sqlx::Error> {
    let days = |value: Option<Option<u32>>| value.map(|d| d.and_then(|d| i32::try_from(d).ok()));
    let count = |value: Option<Option<u64>>| value.map(|n| n.map(|n| i64::try_from(n).unwrap_or(i64::MAX)));
    let (execution, audit) = (days(limits.execution_retention_days), days(limits.audit_retention_days));
    let (bytes, endpoints) = (count(limits.stored_bytes), count(limits.endpoints));
    let (flows, per_day) = (count(limits.flows), count(limits.captures_per_day));
    let now: Option<OwnLimits> = sqlx::query_as(
        "UPDATE organizations SET
             execution_retention_days = CASE WHEN $2 THEN $3 ELSE execution_retention_days END,
             audit_retention_days = CASE WHEN $4 THEN $5 ELSE audit_retention_days END,
             stored_bytes_limit = CASE WHEN $6 THEN $7 ELSE stored_bytes_limit END,
             endpoints_limit = CASE WHEN $8 THEN $9 ELSE endpoints_limit END,
             flows_limit = CASE WHEN $10 THEN $11 ELSE flows_limit END,
             captures_per_day_limit = CASE WHEN $12 THEN $13 ELSE captures_per_day_limit END
         WHERE id = $1
         RETURNING execution_retention_days, audit_retention_days, stored_bytes_limit AS stored_bytes,
                   endpoints_limit AS endpoints, flows_limit AS flows, captures_per_day_limit AS captures_per_day",
    )
    .bind(org_id)
    .bind(execution.is_some())
    .bind(execution.flatten())
    .bind(audit.is_some())
    .bind(audit.flatten())
    .bind(bytes.is_some())
    .bind(bytes.flatten())
    .bind(endpoints.is_some())
    .bind(endpoints.flatten())
    .bind(flows.is_some())
    .bind(flows.flatten())
    .bind(per_day.is_some())
    .bind(per_day.flatten())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(now) = now else { return Ok(None) };
    let details = serde_json::to_value(now).unwrap_or_default();
    let event = AuditEvent {
        org_id,
        actor: Actor::Operator,
        action: "organization.limits",
        target: org_id.to_string(),
        details,
    };
    audit::record(conn, event).await?;
    Ok(Some(now))
}
