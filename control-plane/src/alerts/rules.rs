//! Evaluating alert rules: every rule, taken with `FOR UPDATE SKIP LOCKED`, is checked against the database; a
//! change of its state writes the state and the alert (`schedule.unclaimed` / `schedule.claimed`,
//! `runners.offline` / `runners.online`) in one transaction, so each change alerts once across replicas.

use crate::api::alerts::channels::insert_alert;
use crate::state::AppState;
use chrono::{DateTime, Utc};
use hookflow_shared::OrgId;
use hookflow_shared::api::alerts::AlertMessage;
use uuid::Uuid;

/// Rules evaluated in one transaction at most.
const BATCH: i64 = 256;

#[derive(Debug, sqlx::FromRow)]
struct Rule {
    id: Uuid,
    organization_id: OrgId,
    kind: String,
    schedule_id: Option<Uuid>,
    runner_labels: Vec<String>,
    after_s: i32,
    channels: Vec<Uuid>,
    state: String,
    created_at: DateTime<Utc>,
}

/// What a schedule_unclaimed rule sees: the schedule's newest execution, its flow and its zone.
#[derive(Debug, sqlx::FromRow)]
struct Watched {
    flow_id: Uuid,
    flow_name: Option<String>,
    cron: String,
    timezone: String,
    execution_id: Option<Uuid>,
    unclaimed: bool,
}

/// Evaluates every rule once; answers how many changed state.
pub async fn evaluate(app: &AppState) -> Result<usize, sqlx::Error> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let rules: Vec<Rule> = sqlx::query_as(
        "SELECT id, organization_id, kind, schedule_id, runner_labels, after_s, channels, state, created_at
         FROM alert_rules ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(BATCH)
    .fetch_all(&mut *tx)
    .await?;
    let mut changed = 0;
    let offline_after = app.settings.heartbeat_interval.as_secs_f64() * 3.0;
    for rule in rules {
        let alerting = rule.state == "alerting";
        let now = Utc::now();
        let mut message = AlertMessage {
            kind: String::new(),
            organization_id: rule.organization_id.into(),
            flow_id: None,
            flow_name: None,
            schedule_id: rule.schedule_id,
            execution_id: None,
            execution_url: None,
            failed_runs: None,
            node_id: None,
            error: None,
            at: now.into(),
        };
        let context;
        let condition = if rule.kind == "schedule_unclaimed" {
            let watched: Option<Watched> = sqlx::query_as(
                "SELECT s.flow_id, f.name AS flow_name, s.cron, s.timezone, e.id AS execution_id,
                        coalesce(e.status = 'queued' AND e.created_at < now() - make_interval(secs => $2), false)
                            AS unclaimed
                 FROM flow_schedules s LEFT JOIN flows f ON f.id = s.flow_id
                 LEFT JOIN executions e ON e.id = s.last_execution_id
                 WHERE s.id = $1",
            )
            .bind(rule.schedule_id)
            .bind(f64::from(rule.after_s))
            .fetch_optional(&mut *tx)
            .await?;
            let Some(watched) = watched else { continue };
            let base = app.settings.public_url.trim_end_matches('/');
            message.flow_id = Some(watched.flow_id);
            message.flow_name = watched.flow_name;
            message.execution_id = watched.execution_id;
            message.execution_url =
                watched.execution_id.map(|e| format!("{base}/#/flows/{}/executions/{e}", watched.flow_id));
            message.error = watched
                .unclaimed
                .then(|| format!("no runner claimed the scheduled run within {} seconds", rule.after_s));
            context = serde_json::json!({"cron": watched.cron, "timezone": watched.timezone});
            watched.unclaimed
        } else {
            // Offline since the newest heartbeat of a runner carrying the labels, or the rule's creation if later
            // (or if no runner ever carried them).
            let (online, last_seen): (bool, Option<DateTime<Utc>>) = sqlx::query_as(
                "SELECT coalesce(bool_or(last_seen_at > now() - make_interval(secs => $3)), false), max(last_seen_at)
                 FROM runners WHERE organization_id = $1 AND labels @> $2",
            )
            .bind(rule.organization_id)
            .bind(&rule.runner_labels)
            .bind(offline_after)
            .fetch_one(&mut *tx)
            .await?;
            let since = last_seen.map_or(rule.created_at, |seen| seen.max(rule.created_at));
            context = serde_json::json!({"runner_labels": rule.runner_labels});
            let offline = !online && (now - since).num_seconds() >= i64::from(rule.after_s);
            message.error = offline.then(|| {
                format!("no runner carrying {} online for {} seconds", rule.runner_labels.join(", "), rule.after_s)
            });
            offline
        };
        if condition == alerting {
            continue;
        }
        let unclaimed = rule.kind == "schedule_unclaimed";
        message.kind = match (unclaimed, condition) {
            (true, true) => "schedule.unclaimed",
            (true, false) => "schedule.claimed",
            (false, true) => "runners.offline",
            (false, false) => "runners.online",
        }
        .to_owned();
        insert_alert(&mut tx, Uuid::new_v4(), rule.organization_id, &message, &rule.channels, false, context).await?;
        sqlx::query("UPDATE alert_rules SET state = $2 WHERE id = $1")
            .bind(rule.id)
            .bind(if condition { "alerting" } else { "ok" })
            .execute(&mut *tx)
            .await?;
        changed += 1;
    }
    tx.commit().await?;
    Ok(changed)
}
