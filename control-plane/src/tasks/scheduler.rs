//! Cron schedules: every replica ticks each second and takes due flows with `FOR UPDATE SKIP LOCKED`, launching
//! each occurrence and moving `schedule_next_at` forward in the same transaction, so exactly one process fires
//! it. A scheduled launch runs the newest published version, or the draft when nothing is published.

use crate::api::executions::resolve::{DEFAULT_MAX_ATTEMPTS, LaunchRequest, create_execution};
use crate::state::AppState;
use chrono::{DateTime, Utc};
use hookflow_shared::api::executions::Trigger;
use hookflow_shared::flow::definition::{Latest, VersionSelector};
use hookflow_shared::flow::schedule::Schedule;
use hookflow_shared::{FlowId, OrgId};
use std::collections::BTreeMap;
use uuid::Uuid;

/// One pass; returns how many executions it launched.
pub async fn fire_due(app: &AppState) -> Result<usize, sqlx::Error> {
    let mut tx = app.pool.begin().await?;
    type Due = (FlowId, OrgId, String, Option<DateTime<Utc>>, bool);
    let due: Vec<Due> = sqlx::query_as(
        "SELECT f.id, f.organization_id, f.schedule, f.schedule_next_at,
                EXISTS (SELECT 1 FROM flow_versions v WHERE v.flow_id = f.id)
         FROM flows f
         WHERE f.schedule IS NOT NULL AND (f.schedule_next_at IS NULL OR f.schedule_next_at <= now())
         ORDER BY f.schedule_next_at NULLS FIRST LIMIT 50 FOR UPDATE OF f SKIP LOCKED",
    )
    .fetch_all(&mut *tx)
    .await?;
    let now = Utc::now();
    let mut launched = 0;
    for (flow_id, org_id, text, next_at, published) in due {
        let Ok(schedule) = Schedule::parse(&text) else { continue };
        if next_at.is_some() {
            let no_variables = BTreeMap::new();
            let request = LaunchRequest {
                // No replica excluded: whoever waits is notified, this one included.
                replica: Uuid::nil(),
                drafts: &app.drafts,
                org_id,
                flow_id,
                trigger: Trigger::Schedule,
                environment: None,
                version: published.then_some(VersionSelector::Latest(Latest::Latest)),
                variables: &no_variables,
                runner_labels: &[],
                max_attempts: DEFAULT_MAX_ATTEMPTS,
            };
            // A launch that cannot be made (say, a module lost its published version) must not stop the others.
            sqlx::query("SAVEPOINT fire").execute(&mut *tx).await?;
            match create_execution(&mut tx, &request).await {
                Ok(_) => launched += 1,
                Err(e) => {
                    tracing::warn!(flow_id = %flow_id, error = %e.message, "scheduled launch failed");
                    sqlx::query("ROLLBACK TO SAVEPOINT fire").execute(&mut *tx).await?;
                }
            }
        }
        sqlx::query("UPDATE flows SET schedule_next_at = $2 WHERE id = $1")
            .bind(flow_id)
            .bind(schedule.next_after(now))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(launched)
}

/// Runs the scheduler until shutdown.
pub async fn run(app: AppState) {
    let (shutdown, interval) = (app.shutdown.clone(), app.settings.schedule_interval);
    super::periodic::every(shutdown, interval, "schedule pass", || fire_due(&app)).await;
}
