//! The audit log: security-relevant changes (keys, publishing, secrets, members), written in the same
//! transaction as the change they record.

use crate::auth::Actor;
use hookflow_shared::OrgId;
use sqlx::PgConnection;
use uuid::Uuid;

/// One change to record.
#[derive(Debug)]
pub struct AuditEvent<'a> {
    pub org_id: OrgId,
    pub actor: Actor,
    pub action: &'a str,
    pub target: String,
    pub details: serde_json::Value,
}

pub async fn record(conn: &mut PgConnection, event: AuditEvent<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO audit_log (id, organization_id, action, actor, target, details) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(Uuid::now_v7())
    .bind(event.org_id)
    .bind(event.action)
    .bind(event.actor.to_string())
    .bind(event.target)
    .bind(event.details)
    .execute(conn)
    .await?;
    Ok(())
}
