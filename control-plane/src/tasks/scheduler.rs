//! Cron schedules: every replica runs a pass each `schedule_interval` (`schedules::launcher`, which takes due
//! schedules once across replicas); this file gives it what lives above the schedules' layer: making an execution
//! (the schedule's environment, version, variables and runner labels; `trigger: schedule`) and the audit entry of
//! a skipped occurrence.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::executions::resolve::{DEFAULT_MAX_ATTEMPTS, LaunchRequest, create_execution};
use crate::auth::Actor;
use crate::schedules::launcher::{Launch, Pass, fire_due};
use crate::schedules::store::ScheduleRow;
use crate::state::AppState;
use hookflow_shared::ExecutionId;
use hookflow_shared::api::executions::Trigger;
use sqlx::PgConnection;
use uuid::Uuid;

struct Launcher<'a>(&'a AppState);

impl Launch for Launcher<'_> {
    async fn launch(&self, conn: &mut PgConnection, s: &ScheduleRow) -> Result<Option<ExecutionId>, sqlx::Error> {
        let request = LaunchRequest {
            // No replica excluded: whoever waits is notified, this one included.
            replica: Uuid::nil(),
            drafts: &self.0.drafts,
            org_id: s.organization_id,
            flow_id: s.flow_id,
            trigger: Trigger::Schedule,
            environment: s.environment.as_deref(),
            version: s.version.0,
            variables: &s.variables.0,
            runner_labels: &s.runner_labels,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            priority: s.priority,
        };
        // A launch that cannot be made (say, a module lost its published version) must not stop the others.
        sqlx::query("SAVEPOINT fire").execute(&mut *conn).await?;
        match create_execution(conn, &request).await {
            Ok(execution) => Ok(Some(execution.id)),
            Err(e) => {
                tracing::warn!(flow_id = %s.flow_id, schedule_id = %s.id, error = %e.message, "scheduled launch failed");
                sqlx::query("ROLLBACK TO SAVEPOINT fire").execute(&mut *conn).await?;
                Ok(None)
            }
        }
    }

    async fn skipped(&self, conn: &mut PgConnection, s: &ScheduleRow, reason: &str) -> Result<(), sqlx::Error> {
        let event = AuditEvent {
            org_id: s.organization_id,
            actor: Actor::Schedule(s.id),
            action: "schedule.skipped",
            target: s.flow_id.to_string(),
            details: serde_json::json!({"schedule_id": s.id, "reason": reason}),
        };
        audit::record(conn, event).await
    }
}

/// One pass; returns what it launched and skipped.
pub async fn fire_due_schedules(app: &AppState) -> Result<Pass, sqlx::Error> {
    let grace = chrono::TimeDelta::from_std(app.settings.schedule_grace).unwrap_or(chrono::TimeDelta::seconds(10));
    fire_due(&app.pool, &Launcher(app), grace).await
}

/// Runs the scheduler until shutdown.
pub async fn run(app: AppState) {
    let (shutdown, interval) = (app.shutdown.clone(), app.settings.schedule_interval);
    super::periodic::every(shutdown, interval, "schedule pass", || fire_due_schedules(&app)).await;
}
