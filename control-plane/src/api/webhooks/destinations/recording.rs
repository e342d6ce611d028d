//! Recording attempts, whoever made them: `delivered`, or the next attempt after the schedule's delay (from the
//! attempt's end, up to 10% jitter), or `dead` after the last; the attempt listed; the destination's
//! `failing_since` kept. Many attempts share one statement (`AttemptRecord` is a group-commit write: the server's
//! sender records whatever attempts finished while the previous statement ran, one statement and one commit for
//! them all); a runner's result is recorded alone through the same statement. The commit does not wait for the WAL
//! flush: a record lost to a crash of the database leaves the delivery pending under its lease, and it is sent
//! again (with the same `webhook-id`), which at least once allows.

use crate::api::webhooks::destinations::claim::Claimed;
use crate::db::group_commit::BatchWrite;
use crate::error::ApiResult;
use crate::outbound::signed::Attempted;
use hookflow_shared::api::destinations::LastAttempt;
use hookflow_shared::{DeliveryId, DestinationId, RunnerId};
use rand::RngExt as _;
use sqlx::PgConnection;
use sqlx::types::Json;
use std::collections::HashSet;

/// Attempts one statement records at most.
pub const MAX_BATCH: usize = 256;

/// What recording an attempt needs of its delivery, as it was claimed.
#[derive(Debug, Clone)]
pub struct Recording {
    pub id: DeliveryId,
    pub destination_id: DestinationId,
    pub attempts: i32,
    pub round_start: i32,
    pub retry_schedule_s: Vec<i32>,
    /// The runner that made the attempt (`None`: the server).
    pub runner_id: Option<RunnerId>,
    /// The lease the attempt was made under: recorded only while the delivery still has it.
    pub lease: Option<uuid::Uuid>,
}

impl Recording {
    pub fn of(row: &Claimed, runner_id: Option<RunnerId>) -> Self {
        Self {
            lease: row.lease,
            id: row.id,
            destination_id: row.destination_id,
            attempts: row.attempts,
            round_start: row.round_start,
            retry_schedule_s: row.retry_schedule_s.clone(),
            runner_id,
        }
    }
}

/// One attempt ready to record: what the delivery becomes and the attempt's row.
#[derive(Debug)]
pub struct AttemptRecord {
    id: DeliveryId,
    lease: Option<uuid::Uuid>,
    destination_id: DestinationId,
    runner_id: Option<RunnerId>,
    status: &'static str,
    last: LastAttempt,
    delay_s: f64,
    /// When the attempt started.
    at: chrono::DateTime<chrono::Utc>,
    status_code: Option<i32>,
    error: Option<String>,
    duration_ms: i32,
}

impl AttemptRecord {
    /// The record of `attempted`, made just now, of the delivery `row` says.
    pub fn new(row: &Recording, attempted: &Attempted) -> Self {
        let now = chrono::Utc::now();
        let delivered = attempted.delivered();
        // The attempts of this round (since the last replay), this one included.
        let round = (row.attempts + 1 - row.round_start).max(1) as usize;
        let dead = !delivered && round > row.retry_schedule_s.len();
        let delay_s = if delivered || dead {
            0.0
        } else {
            let base = f64::from(row.retry_schedule_s[round - 1]);
            base * (1.0 + rand::rng().random_range(0.0..0.1))
        };
        let status = if delivered {
            "delivered"
        } else if dead {
            "dead"
        } else {
            "pending"
        };
        Self {
            id: row.id,
            lease: row.lease,
            destination_id: row.destination_id,
            runner_id: row.runner_id,
            status,
            last: LastAttempt {
                at: now.into(),
                status_code: attempted.status_code,
                error: attempted.error.clone(),
                duration_ms: attempted.duration.as_millis() as u64,
            },
            delay_s,
            at: now - chrono::Duration::from_std(attempted.duration).unwrap_or_default(),
            status_code: attempted.status_code.map(i32::from),
            error: attempted.error.clone(),
            duration_ms: i32::try_from(attempted.duration.as_millis()).unwrap_or(i32::MAX),
        }
    }

    /// How long after now its delivery is due again: `None` when it is not retried (delivered, dead).
    pub fn retry_in(&self) -> Option<std::time::Duration> {
        (self.status == "pending").then(|| std::time::Duration::from_secs_f64(self.delay_s.max(0.0)))
    }

    /// Counts a recorded attempt in the metrics.
    pub fn count(&self) {
        match self.status {
            "delivered" => crate::metrics::delivery_outcome("delivered"),
            "dead" => {
                crate::metrics::delivery_outcome("failed_attempt");
                crate::metrics::delivery_outcome("dead");
            }
            _ => crate::metrics::delivery_outcome("failed_attempt"),
        }
    }
}

/// Records a batch of attempts, each only while its delivery is still pending under the lease it was made with (a
/// delivery whose lease ran out and was claimed again is recorded by the new claim's attempt only). A destination's `failing_since`
/// follows its attempts of the batch in the order they ended: cleared when the last delivered, else the start of
/// the first failed attempt after the last delivered one (kept from before when none in the batch delivered); the
/// row is written only when that changes it.
const RECORD: &str = "
WITH u AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::jsonb[], $5::float8[], $6::timestamptz[],
                         $7::int4[], $8::text[], $9::int4[], $10::uuid[], $11::uuid[])
        AS u(id, destination_id, status, last, delay_s, at, status_code, error, duration_ms, runner_id, lease)
), d AS (
    UPDATE deliveries SET attempts = deliveries.attempts + 1, status = u.status, last_attempt = u.last,
        next_attempt_at = CASE WHEN t.enabled THEN now() + make_interval(secs => u.delay_s)
                               ELSE 'infinity'::timestamptz END,
        delivered_at = CASE WHEN u.status = 'delivered' THEN now() END, leased_until = NULL
    FROM u JOIN destinations t ON t.id = u.destination_id
    WHERE deliveries.id = u.id AND deliveries.status = 'pending' AND deliveries.lease IS NOT DISTINCT FROM u.lease
        AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
    RETURNING deliveries.id, deliveries.attempts
), a AS (
    INSERT INTO delivery_attempts (delivery_id, attempt, at, status_code, error, duration_ms, runner_id)
    SELECT d.id, d.attempts, u.at, u.status_code, u.error, u.duration_ms, u.runner_id FROM d JOIN u ON u.id = d.id
    ON CONFLICT DO NOTHING
), ends AS (
    SELECT u.destination_id,
           max(u.at + make_interval(secs => u.duration_ms / 1000.0)) FILTER (WHERE u.status = 'delivered') AS last_ok,
           array_agg(u.at + make_interval(secs => u.duration_ms / 1000.0)) FILTER (WHERE u.status <> 'delivered')
               AS failed_ends,
           array_agg(u.at) FILTER (WHERE u.status <> 'delivered') AS failed_starts
    FROM d JOIN u ON u.id = d.id GROUP BY u.destination_id
), next AS (
    SELECT e.destination_id, e.last_ok,
           (SELECT min(s) FROM unnest(e.failed_starts, e.failed_ends) AS f(s, x)
            WHERE e.last_ok IS NULL OR x > e.last_ok) AS failing_from
    FROM ends e
), f AS (
    UPDATE destinations t
    SET failing_since = CASE WHEN n.failing_from IS NULL THEN NULL
                             WHEN n.last_ok IS NULL THEN COALESCE(t.failing_since, n.failing_from)
                             ELSE n.failing_from END
    FROM next n
    WHERE t.id = n.destination_id
      AND t.failing_since IS DISTINCT FROM (CASE WHEN n.failing_from IS NULL THEN NULL
                                                 WHEN n.last_ok IS NULL THEN COALESCE(t.failing_since, n.failing_from)
                                                 ELSE n.failing_from END)
)
SELECT id FROM d";

impl BatchWrite for AttemptRecord {
    /// Whether the attempt was recorded (its delivery was still pending).
    type Out = bool;

    fn bytes(&self) -> usize {
        256 + self.error.as_ref().map_or(0, String::len) * 2
    }

    async fn write_many(conn: &mut PgConnection, records: &[Self]) -> ApiResult<Vec<bool>> {
        let recorded: HashSet<DeliveryId> = sqlx::query_scalar(RECORD)
            .bind(records.iter().map(|r| r.id).collect::<Vec<_>>())
            .bind(records.iter().map(|r| r.destination_id).collect::<Vec<_>>())
            .bind(records.iter().map(|r| r.status).collect::<Vec<_>>())
            .bind(records.iter().map(|r| Json(&r.last)).collect::<Vec<_>>())
            .bind(records.iter().map(|r| r.delay_s).collect::<Vec<_>>())
            .bind(records.iter().map(|r| r.at).collect::<Vec<_>>())
            .bind(records.iter().map(|r| r.status_code).collect::<Vec<_>>())
            .bind(records.iter().map(|r| r.error.as_deref()).collect::<Vec<_>>())
            .bind(records.iter().map(|r| r.duration_ms).collect::<Vec<_>>())
            .bind(records.iter().map(|r| r.runner_id).collect::<Vec<_>>())
            .bind(records.iter().map(|r| r.lease).collect::<Vec<_>>())
            .fetch_all(conn)
            .await?
            .into_iter()
            .collect();
        Ok(records
            .iter()
            .map(|r| {
                let done = recorded.contains(&r.id);
                if done {
                    r.count();
                }
                done
            })
            .collect())
    }
}

/// Records one attempt alone (a runner's result, or an attempt that could not be sent), in the same statement.
pub async fn record(pool: &sqlx::PgPool, row: &Recording, attempted: &Attempted) -> ApiResult<()> {
    let mut conn = pool.acquire().await?;
    AttemptRecord::new(row, attempted).write_one(&mut conn).await?;
    Ok(())
}
