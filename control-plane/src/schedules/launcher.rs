//! The launcher: one pass over due schedules. Every replica runs passes (`tasks::scheduler`); a pass takes due
//! rows with `FOR UPDATE SKIP LOCKED`, fires what [`plan`](crate::schedules::plan) says (on-time occurrences, and
//! missed ones within `catch_up_s`, in order), and moves `next_at` forward in the same transaction, so exactly one
//! process fires each occurrence. With `overlap: skip`, an occurrence that finds the schedule's previous execution
//! still queued or running launches nothing and is audited as `schedule.skipped`.

use crate::schedules::occurrences::ZonedCron;
use crate::schedules::plan::plan;
use crate::schedules::store::{COLUMNS, ScheduleRow};
use chrono::{DateTime, TimeDelta, TimeZone as _, Utc};
use hookflow_shared::ExecutionId;
use hookflow_shared::api::schedules::Overlap;
use sqlx::{PgConnection, PgPool};

/// Due schedules taken per pass at most.
const BATCH: i64 = 50;

/// What the launcher needs from the layers above it: making an execution, and auditing a skip.
pub trait Launch {
    /// Launches one occurrence of `schedule` in the pass's transaction; `None` when it could not be launched (the
    /// implementation logs why and leaves the transaction usable).
    fn launch(
        &self,
        conn: &mut PgConnection,
        schedule: &ScheduleRow,
    ) -> impl Future<Output = Result<Option<ExecutionId>, sqlx::Error>> + Send;

    /// Records that an occurrence of `schedule` launched nothing, and why.
    fn skipped(
        &self,
        conn: &mut PgConnection,
        schedule: &ScheduleRow,
        reason: &str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    pub launched: usize,
    pub skipped: usize,
}

/// One pass. `grace`: how late an occurrence may still fire when its schedule has no catch-up window as long.
pub async fn fire_due<L: Launch>(pool: &PgPool, launcher: &L, grace: TimeDelta) -> Result<Pass, sqlx::Error> {
    let mut tx = crate::db::begin::begin(&pool).await?;
    let due: Vec<ScheduleRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM flow_schedules s
         WHERE NOT s.paused AND (s.next_at IS NULL OR s.next_at <= now())
         ORDER BY s.next_at NULLS FIRST LIMIT {BATCH} FOR UPDATE OF s SKIP LOCKED"
    )))
    .fetch_all(&mut *tx)
    .await?;
    let now = Utc::now();
    let mut pass = Pass::default();
    for mut row in due {
        let next_at = match ZonedCron::parse(&row.cron, &row.timezone) {
            Ok(cron) => {
                let window = grace.max(TimeDelta::seconds(i64::from(row.catch_up_s)));
                let planned = plan(&cron, row.next_at, now, window);
                for _ in planned.fire {
                    fire(&mut tx, launcher, &mut row, &mut pass).await?;
                }
                planned.next_at
            }
            Err((_, e)) => {
                tracing::warn!(schedule_id = %row.id, error = %e, "stored schedule does not parse");
                None
            }
        };
        sqlx::query("UPDATE flow_schedules SET next_at = $2, last_execution_id = $3 WHERE id = $1")
            .bind(row.id)
            .bind(next_at.unwrap_or_else(never))
            .bind(row.last_execution_id)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(pass)
}

/// Fires one occurrence: launches unless `overlap: skip` finds the previous execution still queued or running.
async fn fire<L: Launch>(
    conn: &mut PgConnection,
    launcher: &L,
    row: &mut ScheduleRow,
    pass: &mut Pass,
) -> Result<(), sqlx::Error> {
    if row.overlap() == Overlap::Skip
        && let Some(previous) = row.last_execution_id
    {
        let busy: Option<bool> =
            sqlx::query_scalar("SELECT status IN ('queued', 'running') FROM executions WHERE id = $1")
                .bind(previous)
                .fetch_optional(&mut *conn)
                .await?;
        if busy == Some(true) {
            launcher.skipped(conn, row, "overlap").await?;
            pass.skipped += 1;
            return Ok(());
        }
    }
    if let Some(execution_id) = launcher.launch(conn, row).await? {
        sqlx::query("UPDATE executions SET schedule_id = $2 WHERE id = $1")
            .bind(execution_id)
            .bind(row.id)
            .execute(&mut *conn)
            .await?;
        row.last_execution_id = Some(execution_id);
        pass.launched += 1;
    }
    Ok(())
}

/// The `next_at` of a schedule that never fires again (a pattern such as February 30th): far enough never to be
/// due, and after every real row in the due order.
fn never() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(9999, 1, 1, 0, 0, 0).single().expect("a valid date")
}
