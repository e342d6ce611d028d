//! Watches: rows saying that a replica waits for something (long polls for an organization's work, a stream hub
//! topic for an endpoint's captures). Writers NOTIFY only where a watch stands, since a NOTIFY takes a
//! cluster-wide lock at commit; watches are refreshed while they hold and stop counting when they go stale.

use hookflow_shared::{OrgId, WebhookId};
use sqlx::PgPool;
use uuid::Uuid;

/// What is watched.
#[derive(Debug, Clone, Copy)]
pub enum Watch {
    /// Long polls for an organization's work (nil: runners serving every organization).
    Queue { organization_id: OrgId },
    /// A stream hub topic of an endpoint.
    Captures { webhook_id: WebhookId },
}

/// Records (or refreshes) `replica`'s watch. A failure costs only latency (the waiters re-check on timers), so
/// it is logged and answered `false`.
pub async fn record(pool: &PgPool, watch: Watch, replica: Uuid) -> bool {
    let (sql, id): (&str, Uuid) = match watch {
        Watch::Queue { organization_id } => (
            "INSERT INTO queue_watchers (organization_id, replica) VALUES ($1, $2)
             ON CONFLICT (organization_id, replica) DO UPDATE SET seen_at = now()",
            organization_id.into(),
        ),
        Watch::Captures { webhook_id } => (
            "INSERT INTO capture_watchers (webhook_id, replica) VALUES ($1, $2)
             ON CONFLICT (webhook_id, replica) DO UPDATE SET seen_at = now()",
            webhook_id.into(),
        ),
    };
    match sqlx::query(sql).bind(id).bind(replica).execute(pool).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, ?watch, "a watch was not recorded; its waiters rely on their re-checks");
            false
        }
    }
}

/// Removes `replica`'s watch of an endpoint once its last subscriber left (a failure leaves a watch that goes
/// stale by itself).
pub async fn forget_captures(pool: &PgPool, webhook_id: WebhookId, replica: Uuid) {
    let removed = sqlx::query("DELETE FROM capture_watchers WHERE webhook_id = $1 AND replica = $2")
        .bind(webhook_id)
        .bind(replica)
        .execute(pool)
        .await;
    if let Err(e) = removed {
        tracing::debug!(error = %e, %webhook_id, "a stream's watch stays until it goes stale");
    }
}

/// Removes watches not refreshed for an hour (replicas that stopped; writers ignore them long before).
pub async fn sweep(pool: &PgPool) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM capture_watchers WHERE seen_at < now() - interval '1 hour'").execute(pool).await?;
    sqlx::query("DELETE FROM queue_watchers WHERE seen_at < now() - interval '1 hour'").execute(pool).await?;
    Ok(())
}
