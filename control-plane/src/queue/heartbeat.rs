//! Heartbeats' writes of when each runner was last heard from (its metrics and how many jobs it runs), many runners
//! per statement: 20,000 runners over HTTP/2 heartbeat 2,000 times a second, and with a statement and commit each
//! their PostgreSQL ran at 92% of a core and heartbeat p99 was 116 ms (28 ms sharing statements, same hour).
//! Handlers share the statements through group commit (`AppState::writers`); the leases a heartbeat extends are
//! `lease`'s.

use crate::db::group_commit::BatchWrite;
use crate::error::ApiResult;
use hookflow_shared::{OrgId, RunnerId};
use sqlx::PgConnection;
use std::collections::HashSet;

/// Heartbeats per statement at most.
pub const MAX_BATCH: usize = 512;

/// One heartbeat as stored.
#[derive(Debug)]
pub struct Beat {
    pub runner_id: RunnerId,
    /// The runner's organization; `None` for the server's embedded runners.
    pub org_id: Option<OrgId>,
    /// What the runner said of itself, kept when it says nothing this time.
    pub metrics: Option<serde_json::Value>,
    pub running_jobs: i32,
}

/// `$1`..`$4`: runner ids, organizations, metrics and running job counts, one element per heartbeat; of two
/// heartbeats of one runner from one organization in a batch the last counts, and one naming a runner of another
/// organization (or none) changes nothing and is not returned. Rows are locked in id order, so two replicas'
/// batches never wait on each other in a circle: `locked` locks each row in its lateral lookup, once per `beat` row,
/// and `beat` is materialized in its `DISTINCT ON` order, by id (as in `finish`); keep that order when changing
/// `beat`. A batch waits on a row another transaction holds (a runner being removed) for as long as that holds.
/// The commit does not wait for its WAL flush (`synchronous_commit` off for this transaction only): a crash may
/// forget the last fraction of a second of `last_seen_at`, which only says when a runner was last heard from; the
/// leases a heartbeat extends stay durable. The arrays are read through `(SELECT $n)` so the plan does not depend
/// on the batch size.
const STATEMENT: &str = "
    WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)),
    beat AS (
        SELECT DISTINCT ON (id, org) * FROM unnest((SELECT $1::uuid[]), (SELECT $2::uuid[]), (SELECT $3::jsonb[]),
            (SELECT $4::int[])) WITH ORDINALITY AS b(id, org, metrics, running_jobs, ord)
        ORDER BY id, org, ord DESC),
    locked AS (
        SELECT r.id, b.ord FROM beat b
        CROSS JOIN LATERAL (
            SELECT id FROM runners r WHERE r.id = b.id AND r.organization_id IS NOT DISTINCT FROM b.org OFFSET 0) r
        ORDER BY r.id FOR UPDATE OF r)
    UPDATE runners r SET last_seen_at = now(), metrics = COALESCE(b.metrics, r.metrics), running_jobs = b.running_jobs
    FROM relaxed, locked l JOIN beat b ON b.ord = l.ord
    WHERE r.id = l.id
    RETURNING r.id, r.organization_id";

impl BatchWrite for Beat {
    /// Whether the runner exists (in that organization).
    type Out = bool;

    fn bytes(&self) -> usize {
        64 + self.metrics.as_ref().map_or(0, hookflow_shared::flow::budget::json_size)
    }

    async fn write_many(conn: &mut PgConnection, beats: &[Self]) -> ApiResult<Vec<bool>> {
        let seen: HashSet<(RunnerId, Option<OrgId>)> = sqlx::query_as(STATEMENT)
            .bind(beats.iter().map(|b| b.runner_id).collect::<Vec<_>>())
            .bind(beats.iter().map(|b| b.org_id).collect::<Vec<_>>())
            .bind(beats.iter().map(|b| b.metrics.as_ref()).collect::<Vec<_>>())
            .bind(beats.iter().map(|b| b.running_jobs).collect::<Vec<_>>())
            .fetch_all(conn)
            .await?
            .into_iter()
            .collect();
        Ok(beats.iter().map(|b| seen.contains(&(b.runner_id, b.org_id))).collect())
    }
}
