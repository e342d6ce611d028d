//! What holds trigger launches back, in the dispatcher's transaction: the organization's launches this minute
//! (a row every replica's dispatcher counts in, under its lock), and the audit entry of a refusal, written by the
//! first refusal of its kind per endpoint and minute so a flood or a loop writes one entry a minute, not one per
//! capture.

use crate::api::admin::audit::{self, AuditEvent};
use crate::auth::Actor;
use hookflow_shared::{CaptureId, FlowId, OrgId, WebhookId};
use sqlx::{PgConnection, PgPool};

/// Why a launch a capture owed was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The capture came from a run this deep in a chain of triggered runs; the launch would go deeper than allowed.
    Depth { depth: u32, max: u32 },
    /// The organization made its trigger launches of this minute already.
    Limit { per_minute: u32 },
    /// The capture's match against the trigger's `q` and `filter` ran past its timeout and was cancelled.
    Timeout { after: std::time::Duration },
    /// The launch itself was refused (the flow, its environment or version gone, a module unpublished, ...), or
    /// its match failed.
    Launch(String),
}

impl Refusal {
    /// The kind, as the audit entry's `reason` says it.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Depth { .. } => "depth",
            Refusal::Limit { .. } => "limit",
            Refusal::Timeout { .. } => "timeout",
            Refusal::Launch(_) => "launch",
        }
    }

    fn message(&self) -> String {
        match self {
            Refusal::Depth { depth, max } => {
                format!("the capture came from a run at trigger depth {depth}; chains stop at depth {max}")
            }
            Refusal::Limit { per_minute } => {
                format!("the organization launched {per_minute} flows from captures this minute, its limit")
            }
            Refusal::Timeout { after } => format!(
                "matching the capture against the trigger's `q` and `filter` took longer than {} ms; cancelled",
                after.as_millis()
            ),
            Refusal::Launch(message) => message.clone(),
        }
    }
}

/// A refused launch: what it was for and why not.
#[derive(Debug)]
pub struct Refused {
    pub org_id: OrgId,
    pub webhook_id: WebhookId,
    pub request_id: CaptureId,
    /// The trigger's flow (unknown only for a stored trigger that cannot be read).
    pub flow_id: Option<FlowId>,
    pub refusal: Refusal,
}

/// Locks the organization's row of this minute (the transaction's minute), making it if need be; the launches
/// counted in it so far. Dispatchers take these locks in organization order, so none waits on another in a circle.
pub async fn lock_minute(conn: &mut PgConnection, org_id: OrgId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO trigger_minutes AS m (organization_id, minute) VALUES ($1, date_trunc('minute', now(), 'UTC'))
         ON CONFLICT (organization_id, minute) DO UPDATE SET launched = m.launched
         RETURNING m.launched::bigint",
    )
    .bind(org_id)
    .fetch_one(conn)
    .await
}

/// Counts `n` launches in the organization's row of this minute (locked by [`lock_minute`]).
pub async fn count_launches(conn: &mut PgConnection, org_id: OrgId, n: i64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE trigger_minutes SET launched = launched + $2
         WHERE organization_id = $1 AND minute = date_trunc('minute', now(), 'UTC')",
    )
    .bind(org_id)
    .bind(n)
    .execute(conn)
    .await
    .map(drop)
}

/// Counts `n` refusals of one kind for an endpoint (`refused` the first of them) and, when they are the first of
/// that kind for the endpoint this minute, writes the audit entry `trigger.refused` (actor: the endpoint; details:
/// reason, message, flow and capture of the first).
pub async fn refuse(conn: &mut PgConnection, refused: &Refused, n: i64) -> Result<(), sqlx::Error> {
    let reason = refused.refusal.reason();
    let first: bool = sqlx::query_scalar(
        "INSERT INTO trigger_refusals AS r (webhook_id, reason, minute, refused)
         VALUES ($1, $2, date_trunc('minute', now(), 'UTC'), $3::int)
         ON CONFLICT (webhook_id, reason, minute) DO UPDATE SET refused = r.refused + EXCLUDED.refused
         RETURNING r.refused = $3",
    )
    .bind(refused.webhook_id)
    .bind(reason)
    .bind(i32::try_from(n).unwrap_or(i32::MAX))
    .fetch_one(&mut *conn)
    .await?;
    tracing::info!(webhook_id = %refused.webhook_id, flow_id = ?refused.flow_id, request_id = %refused.request_id,
        reason, refused = n, "trigger launches were refused");
    if !first {
        return Ok(());
    }
    let details = serde_json::json!({
        "reason": reason,
        "message": refused.refusal.message(),
        "flow_id": refused.flow_id,
        "request_id": refused.request_id,
    });
    let event = AuditEvent {
        org_id: refused.org_id,
        actor: Actor::Webhook(refused.webhook_id),
        action: "trigger.refused",
        target: refused.webhook_id.to_string(),
        details,
    };
    audit::record(conn, event).await
}

/// Removes the counts of minutes over an hour old (retention's pass); how many rows went.
pub async fn forget_old(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let minutes = sqlx::query("DELETE FROM trigger_minutes WHERE minute < now() - interval '1 hour'")
        .execute(pool)
        .await?
        .rows_affected();
    let refusals = sqlx::query("DELETE FROM trigger_refusals WHERE minute < now() - interval '1 hour'")
        .execute(pool)
        .await?
        .rows_affected();
    Ok(minutes + refusals)
}
