//! The execution event log, numbered 1, 2, ... per execution. Its one rule, written here once: a statement that
//! appends events adds their number to `executions.event_count` in the same row update (which also orders
//! appenders of one execution) and numbers them `event_count - n + 1 ..= event_count`. Transitions that append in
//! the same statement as their row change use [`bump`] in their `SET` and end with [`LOG`]; everything else calls
//! [`append`]. A NOTIFY, delivered at commit, wakes the execution's stream subscribers on every replica.

use crate::error::{ApiError, ApiResult};
use crate::signals::EXECUTIONS_CHANNEL;
use hookflow_shared::api::executions::{ExecutionEvent, ExecutionStatus};
use hookflow_shared::{ExecutionId, RunnerId};
use sqlx::PgConnection;
use std::sync::LazyLock;

/// The `SET` item that reserves event numbers for `events` (a SQL `text[]` expression) on the row aliased `e`.
pub fn bump(events: &str) -> String {
    format!("event_count = e.event_count + cardinality({events})")
}

/// The end of a transition's statement: writes its events and wakes their subscribers, and answers the
/// transition's rows. The statement must have a CTE named `transition` returning `id`, the row's `event_count`
/// after [`bump`], `events` (`text[]`) and `watchers`, plus whatever the caller reads.
///
/// Only executions that an event stream watches (`watchers > 0`, see [`watch`]) are NOTIFYed: a NOTIFY takes a
/// cluster-wide lock at commit, which serialized every transition of the queue, and most executions are never
/// watched. `watchers` is read from the row the transition updates, so a stream that registered first is seen
/// (PostgreSQL re-reads a row updated concurrently), and one that registers later waits for the transition's
/// commit and then reads its events.
pub static LOG: LazyLock<String> = LazyLock::new(|| {
    format!(
        ",
logged AS (
    INSERT INTO execution_events (execution_id, seq, data)
    SELECT t.id, t.event_count - cardinality(t.events) + e.ord, e.data
    FROM transition t, unnest(t.events) WITH ORDINALITY AS e(data, ord))
SELECT t.* FROM transition t CROSS JOIN LATERAL (
    SELECT count(*) FROM (SELECT pg_notify('{EXECUTIONS_CHANNEL}', t.id::text) WHERE cardinality(t.events) > 0 AND t.watchers > 0) n
) woken"
    )
});

/// Appends events (one JSON line each) in order and, with `lease_s`, extends the execution's lease in the same
/// row update (one new row version, not two). Returns whether the execution exists.
pub async fn append(
    conn: &mut PgConnection,
    execution_id: ExecutionId,
    data: &[String],
    lease_s: Option<f64>,
) -> Result<bool, sqlx::Error> {
    let found: Option<ExecutionId> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "WITH transition AS (
             UPDATE executions e SET {},
                 lease_expires_at = CASE WHEN $3::float8 IS NULL THEN e.lease_expires_at
                                         ELSE now() + make_interval(secs => $3) END
             WHERE e.id = $1
             RETURNING e.id, e.event_count, $2::text[] AS events, e.watchers){}",
        bump("$2::text[]"),
        *LOG
    )))
    .bind(execution_id)
    .bind(data)
    .bind(lease_s)
    .fetch_optional(conn)
    .await?;
    Ok(found.is_some())
}

/// An event stream's mark on its execution: while it stands, the execution's transitions NOTIFY (see [`LOG`]).
/// Taken by an `UPDATE` of the row, so it waits for a transition in progress to commit; dropping it gives the
/// mark back (a replica that dies leaves its marks, which only cost a few NOTIFYs until the execution ends).
#[derive(Debug)]
pub struct Watching {
    pool: sqlx::PgPool,
    execution_id: ExecutionId,
}

/// Marks `execution_id` as watched by one more stream.
pub async fn watch(pool: &sqlx::PgPool, execution_id: ExecutionId) -> Result<Watching, sqlx::Error> {
    sqlx::query("UPDATE executions SET watchers = watchers + 1 WHERE id = $1").bind(execution_id).execute(pool).await?;
    Ok(Watching { pool: pool.clone(), execution_id })
}

impl Drop for Watching {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (pool, execution_id) = (self.pool.clone(), self.execution_id);
        runtime.spawn(async move {
            let unwatched = sqlx::query("UPDATE executions SET watchers = GREATEST(watchers - 1, 0) WHERE id = $1")
                .bind(execution_id)
                .execute(&pool)
                .await;
            if let Err(e) = unwatched {
                tracing::warn!(error = %e, %execution_id, "a closed stream's mark stays on its execution");
            }
        });
    }
}

/// Events after `after`, in order, at most `limit`.
pub async fn after(
    pool: &sqlx::PgPool,
    execution_id: ExecutionId,
    after: i32,
    limit: i64,
) -> Result<Vec<(i32, String)>, sqlx::Error> {
    sqlx::query_as("SELECT seq, data FROM execution_events WHERE execution_id = $1 AND seq > $2 ORDER BY seq LIMIT $3")
        .bind(execution_id)
        .bind(after)
        .bind(limit)
        .fetch_all(pool)
        .await
}

/// An event as its stored line.
pub fn encode(event: &ExecutionEvent) -> ApiResult<String> {
    serde_json::to_string(event).map_err(|e| ApiError::internal_because(format!("an event cannot be encoded: {e}")))
}

/// The `execution.status` event of a plain change.
pub fn status_event(status: ExecutionStatus, attempt: i32, runner_id: Option<RunnerId>) -> ExecutionEvent {
    ExecutionEvent::Status { status, attempt, runner_id, cancel_requested: false, reason: None }
}
