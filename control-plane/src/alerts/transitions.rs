//! Schedule transitions to alerts: each unhandled `schedule_transitions` row, taken with `FOR UPDATE SKIP LOCKED`,
//! becomes one `flow.failing` (to `failing`) or `flow.recovered` (to `passing`, when the schedule tells
//! recoveries) alert for the schedule's channels, in the transaction that marks the row handled: exactly once
//! whichever replica takes it.

use crate::api::alerts::channels::insert_alert;
use crate::state::AppState;
use chrono::{DateTime, Utc};
use hookflow_shared::OrgId;
use hookflow_shared::api::alerts::AlertMessage;
use serde_json::Value;
use uuid::Uuid;

/// Transitions handled in one transaction at most.
const BATCH: i64 = 32;

#[derive(Debug, sqlx::FromRow)]
struct Transition {
    id: i64,
    organization_id: OrgId,
    schedule_id: Uuid,
    flow_id: Uuid,
    execution_id: Uuid,
    to_state: String,
    failed_runs: i32,
    at: DateTime<Utc>,
    notify_channels: Vec<Uuid>,
    notify_on_recovery: bool,
    cron: String,
    timezone: String,
    flow_name: Option<String>,
}

/// Handles the pending transitions (a batch); answers how many.
pub async fn handle_pending(app: &AppState) -> Result<usize, sqlx::Error> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let rows: Vec<Transition> = sqlx::query_as(
        "SELECT t.id, t.organization_id, t.schedule_id, t.flow_id, t.execution_id, t.to_state, t.failed_runs, t.at,
                s.notify_channels, s.notify_on_recovery, s.cron, s.timezone, f.name AS flow_name
         FROM schedule_transitions t
         JOIN flow_schedules s ON s.id = t.schedule_id
         LEFT JOIN flows f ON f.id = t.flow_id
         WHERE t.handled_at IS NULL ORDER BY t.id LIMIT $1 FOR UPDATE OF t SKIP LOCKED",
    )
    .bind(BATCH)
    .fetch_all(&mut *tx)
    .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    for row in &rows {
        let failing = row.to_state == "failing";
        if row.notify_channels.is_empty() || (!failing && !row.notify_on_recovery) {
            continue;
        }
        let (node_id, error) = if failing { first_failure(&mut tx, row.execution_id).await? } else { (None, None) };
        let base = app.settings.public_url.trim_end_matches('/');
        let message = AlertMessage {
            kind: if failing { "flow.failing" } else { "flow.recovered" }.to_owned(),
            organization_id: row.organization_id.into(),
            flow_id: Some(row.flow_id),
            flow_name: row.flow_name.clone(),
            schedule_id: Some(row.schedule_id),
            execution_id: Some(row.execution_id),
            execution_url: Some(format!("{base}/#/flows/{}/executions/{}", row.flow_id, row.execution_id)),
            failed_runs: Some(u32::try_from(row.failed_runs).unwrap_or_default()),
            node_id,
            error,
            at: row.at.into(),
        };
        let context = serde_json::json!({"cron": row.cron, "timezone": row.timezone});
        insert_alert(&mut tx, Uuid::new_v4(), row.organization_id, &message, &row.notify_channels, false, context)
            .await?;
    }
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    sqlx::query("UPDATE schedule_transitions SET handled_at = now() WHERE id = ANY($1)")
        .bind(&ids)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(rows.len())
}

/// The first failing node of an execution's last attempt and its error: the node's `error`, else its first failed
/// assertion's reason; without a failing node, the execution's own error.
async fn first_failure(
    conn: &mut sqlx::PgConnection,
    execution_id: Uuid,
) -> Result<(Option<String>, Option<String>), sqlx::Error> {
    let node: Option<(String, Value)> = sqlx::query_as(
        "SELECT node_id, result FROM node_results WHERE execution_id = $1 AND status IN ('failed', 'error')
         ORDER BY attempt DESC, position LIMIT 1",
    )
    .bind(execution_id)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some((node_id, result)) = node {
        return Ok((Some(node_id), failure_of(&result)));
    }
    let error: Option<String> = sqlx::query_scalar("SELECT error FROM executions WHERE id = $1")
        .bind(execution_id)
        .fetch_optional(&mut *conn)
        .await?
        .flatten();
    Ok((None, error))
}

/// A node result's first failed assertion (with its reason, or what it got), else the node's error (a `webhook`
/// node's timeout explanation).
pub fn failure_of(result: &Value) -> Option<String> {
    let error = result.get("error").and_then(Value::as_str).map(str::to_owned);
    // A failed assertion is more telling than the node's summary ("1 of 1 assertions failed").
    let failed = result
        .get("assertions")
        .and_then(Value::as_array)
        .and_then(|all| all.iter().find(|a| a.get("passed") == Some(&Value::Bool(false))));
    let Some(failed) = failed else { return error };
    let source = failed.get("source").and_then(Value::as_str).unwrap_or("?");
    let operator = failed.get("operator").and_then(Value::as_str).unwrap_or("?");
    let expected = failed.get("expected").map(Value::to_string).unwrap_or_default();
    let actual = failed.get("actual").map(Value::to_string).unwrap_or_else(|| "null".to_owned());
    Some(match failed.get("reason").and_then(Value::as_str) {
        Some(reason) => format!("assertion `{source} {operator} {expected}` failed: {reason}"),
        None => format!("assertion `{source} {operator} {expected}` failed: got {actual}"),
    })
}

#[cfg(test)]
mod tests {
    use super::failure_of;
    use serde_json::json;

    #[test]
    fn a_node_error_comes_first_then_the_failed_assertion() {
        assert_eq!(failure_of(&json!({"error": "timed out", "assertions": []})).as_deref(), Some("timed out"));
        let result = json!({"error": "1 of 2 assertions failed", "assertions": [
            {"source": "a", "operator": "equals", "expected": 1, "actual": 1, "passed": true},
            {"source": "code", "operator": "equals", "expected": 200, "actual": 500, "passed": false, "reason": null}]});
        assert_eq!(failure_of(&result).as_deref(), Some("assertion `code equals 200` failed: got 500"));
        assert_eq!(failure_of(&json!({"assertions": []})), None);
    }
}
