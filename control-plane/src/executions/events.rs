//! The execution event log: events are numbered 1, 2, ... per execution in the transaction that causes them,
//! and a NOTIFY (sent at commit) wakes the stream subscribers of every replica.

use sqlx::PgConnection;
use uuid::Uuid;

pub const EXECUTIONS_CHANNEL: &str = "hookflow_executions";

/// Appends events in order and schedules the wake-up notification. The execution row is updated first, which
/// also serializes concurrent appenders of one execution.
pub async fn append(
    conn: &mut PgConnection,
    execution_id: Uuid,
    events: &[serde_json::Value],
) -> Result<(), sqlx::Error> {
    append_extending(conn, execution_id, events, None).await
}

/// Appends events and, with `lease_s`, extends the execution's lease in the same row update (one new row
/// version, not two).
pub async fn append_extending(
    conn: &mut PgConnection,
    execution_id: Uuid,
    events: &[serde_json::Value],
    lease_s: Option<f64>,
) -> Result<(), sqlx::Error> {
    let data: Vec<String> = events.iter().map(serde_json::Value::to_string).collect();
    sqlx::query(
        "WITH n AS (
             UPDATE executions SET event_count = event_count + cardinality($2::text[]),
                 lease_expires_at = CASE WHEN $3::float8 IS NULL THEN lease_expires_at
                                         ELSE now() + make_interval(secs => $3) END
             WHERE id = $1
             RETURNING event_count - cardinality($2::text[]) AS base)
         INSERT INTO execution_events (execution_id, seq, data)
         SELECT $1, n.base + e.ord, e.data FROM n, unnest($2::text[]) WITH ORDINALITY AS e(data, ord)",
    )
    .bind(execution_id)
    .bind(&data)
    .bind(lease_s)
    .execute(&mut *conn)
    .await?;
    if !events.is_empty() {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(EXECUTIONS_CHANNEL)
            .bind(execution_id.to_string())
            .execute(conn)
            .await?;
    }
    Ok(())
}

/// Events after `after`, in order, at most `limit`.
pub async fn after(
    pool: &sqlx::PgPool,
    execution_id: Uuid,
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

/// The `execution.status` event.
pub fn status_event(status: &str, attempt: i32, runner_id: Option<Uuid>) -> serde_json::Value {
    serde_json::json!({"type": "execution.status", "status": status, "attempt": attempt, "runner_id": runner_id})
}
