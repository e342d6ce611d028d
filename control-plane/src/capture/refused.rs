//! Captures an endpoint in `reject` mode refused (an invalid, missing or duplicate signature): never stored, only
//! counted in the endpoint's per-minute analytics counters (`count`, and `invalid` for an invalid signature). They
//! share statements through a group commit of their own, so a flood of refused senders costs one statement per
//! batch (aggregated per endpoint, minute and method), not one per request, and waits its turn like captures do.

use crate::db::group_commit::BatchWrite;
use crate::error::ApiResult;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use hookflow_shared::{OrgId, WebhookId};
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// Refusals per statement at most.
pub const MAX_BATCH: usize = 1024;
/// This server's counter slot (as the capture writer's: slot 0 is where deletions subtract).
static SLOT: LazyLock<i16> = LazyLock::new(|| 1 + (rand::random::<u32>() % 8) as i16);

/// One refused capture, as its counters see it.
#[derive(Debug, Clone)]
pub struct RefusedCapture {
    pub webhook_id: WebhookId,
    pub org_id: OrgId,
    pub method: String,
    pub received_at: DateTime<Utc>,
    /// The verdict was `invalid` (counted in `invalid` too).
    pub invalid: bool,
}

const COUNT: &str = "
INSERT INTO capture_counts AS c (webhook_id, organization_id, minute, method, slot, count, valid, invalid)
SELECT u.webhook, u.org, u.minute, u.method, $5, u.n, 0, u.invalid
FROM UNNEST($1::uuid[], $2::uuid[], $3::timestamptz[], $4::text[], $6::int8[], $7::int8[])
    AS u(webhook, org, minute, method, n, invalid)
WHERE EXISTS (SELECT 1 FROM webhooks w WHERE w.id = u.webhook)
ON CONFLICT (webhook_id, minute, method, slot) DO UPDATE SET count = c.count + EXCLUDED.count,
    invalid = c.invalid + EXCLUDED.invalid";

impl BatchWrite for RefusedCapture {
    type Out = ();

    fn bytes(&self) -> usize {
        64 + self.method.len()
    }

    async fn write_many(conn: &mut PgConnection, batch: &[Self]) -> ApiResult<Vec<()>> {
        type Key = (WebhookId, OrgId, DateTime<Utc>, String);
        let mut counts: BTreeMap<Key, (i64, i64)> = BTreeMap::new();
        for refused in batch {
            let at = refused.received_at;
            let minute = at.duration_trunc(TimeDelta::minutes(1)).unwrap_or(at);
            let entry = counts.entry((refused.webhook_id, refused.org_id, minute, refused.method.clone())).or_default();
            entry.0 += 1;
            entry.1 += i64::from(refused.invalid);
        }
        let (keys, values): (Vec<Key>, Vec<(i64, i64)>) = counts.into_iter().unzip();
        sqlx::query(COUNT)
            .bind(keys.iter().map(|k| k.0).collect::<Vec<_>>())
            .bind(keys.iter().map(|k| k.1).collect::<Vec<_>>())
            .bind(keys.iter().map(|k| k.2).collect::<Vec<_>>())
            .bind(keys.iter().map(|k| k.3.as_str()).collect::<Vec<_>>())
            .bind(*SLOT)
            .bind(values.iter().map(|v| v.0).collect::<Vec<_>>())
            .bind(values.iter().map(|v| v.1).collect::<Vec<_>>())
            .execute(&mut *conn)
            .await?;
        Ok(vec![(); batch.len()])
    }
}
