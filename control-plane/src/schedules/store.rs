//! Schedules as stored: the row, its API form (with the coming fire times), and the writes: insert (at most 10
//! per flow, counted under the flow's row lock), update, delete, and the mirror of a flow's legacy `schedule` text
//! (the row with `legacy`: UTC, the draft). Every write sets `next_at`, the next occurrence to fire (NULL when
//! paused).

use crate::error::{ApiError, ApiResult};
use crate::schedules::occurrences::{ZonedCron, rfc3339};
use chrono::{DateTime, Utc};
use hookflow_shared::api::schedules::{MAX_PER_FLOW, NEXT_OCCURRENCES, Notify, Overlap, Schedule, ScheduleState};
use hookflow_shared::flow::definition::VersionSelector;
use hookflow_shared::{ExecutionId, FlowId, OrgId, ScheduleId};
use sqlx::PgConnection;
use sqlx::types::Json;
use std::collections::BTreeMap;
use uuid::Uuid;

/// The columns of [`ScheduleRow`], from a `flow_schedules` row aliased `s`.
pub const COLUMNS: &str = "s.id, s.organization_id, s.flow_id, s.legacy, s.cron, s.timezone, s.environment,
    s.version, s.variables, s.runner_labels, s.priority, s.overlap, s.catch_up_s, s.paused, s.notify_channels,
    s.notify_after_failures, s.notify_on_recovery, s.state, s.next_at, s.last_execution_id, s.created_at,
    s.updated_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ScheduleRow {
    pub id: ScheduleId,
    pub organization_id: OrgId,
    pub flow_id: FlowId,
    pub legacy: bool,
    pub cron: String,
    pub timezone: String,
    pub environment: Option<String>,
    pub version: Json<Option<VersionSelector>>,
    pub variables: Json<BTreeMap<String, String>>,
    pub runner_labels: Vec<String>,
    pub priority: i16,
    pub overlap: String,
    pub catch_up_s: i32,
    pub paused: bool,
    pub notify_channels: Vec<Uuid>,
    pub notify_after_failures: i32,
    pub notify_on_recovery: bool,
    pub state: String,
    pub next_at: Option<DateTime<Utc>>,
    pub last_execution_id: Option<ExecutionId>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ScheduleRow {
    pub fn overlap(&self) -> Overlap {
        if self.overlap == "allow" { Overlap::Allow } else { Overlap::Skip }
    }

    /// The settings a write starts from.
    pub fn settings(&self) -> Settings {
        Settings {
            cron: self.cron.clone(),
            timezone: self.timezone.clone(),
            environment: self.environment.clone(),
            version: self.version.0,
            variables: self.variables.0.clone(),
            runner_labels: self.runner_labels.clone(),
            priority: self.priority,
            overlap: self.overlap(),
            catch_up_s: u32::try_from(self.catch_up_s).unwrap_or(0),
            paused: self.paused,
            notify: Notify {
                channels: self.notify_channels.clone(),
                after_failures: u32::try_from(self.notify_after_failures).unwrap_or(1),
                on_recovery: self.notify_on_recovery,
            },
        }
    }

    /// The API form; the coming fire times are counted from `now`.
    pub fn into_schedule(self, now: DateTime<Utc>) -> ApiResult<Schedule> {
        let state = match self.state.as_str() {
            "passing" => ScheduleState::Passing,
            "failing" => ScheduleState::Failing,
            _ => ScheduleState::Unknown,
        };
        let next_occurrences = if self.paused {
            Vec::new()
        } else {
            let cron = ZonedCron::parse(&self.cron, &self.timezone)
                .map_err(|(_, e)| ApiError::internal_because(format!("stored schedule {}: {e}", self.id)))?;
            cron.after(now, NEXT_OCCURRENCES).iter().map(rfc3339).collect()
        };
        let settings = self.settings();
        Ok(Schedule {
            id: self.id,
            flow_id: self.flow_id,
            cron: settings.cron,
            timezone: settings.timezone,
            environment: settings.environment,
            version: settings.version,
            variables: settings.variables,
            runner_labels: settings.runner_labels,
            priority: i32::from(settings.priority),
            overlap: settings.overlap,
            catch_up_s: settings.catch_up_s,
            paused: settings.paused,
            notify: settings.notify,
            next_occurrences,
            state,
            created_at: self.created_at.into(),
            updated_at: self.updated_at.into(),
        })
    }
}

/// Everything a schedule is set to, already validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub cron: String,
    pub timezone: String,
    pub environment: Option<String>,
    pub version: Option<VersionSelector>,
    pub variables: BTreeMap<String, String>,
    pub runner_labels: Vec<String>,
    /// 1 (highest) to 5.
    pub priority: i16,
    pub overlap: Overlap,
    pub catch_up_s: u32,
    pub paused: bool,
    pub notify: Notify,
}

impl Settings {
    /// What a flow's legacy `schedule` text stands for: UTC, the draft, every other setting at its default.
    pub fn legacy(cron: &str) -> Self {
        Settings {
            cron: cron.trim().to_owned(),
            timezone: "UTC".to_owned(),
            environment: None,
            version: None,
            variables: BTreeMap::new(),
            runner_labels: Vec::new(),
            priority: 3,
            overlap: Overlap::Allow,
            catch_up_s: 0,
            paused: false,
            notify: Notify { channels: Vec::new(), after_failures: 1, on_recovery: true },
        }
    }

    /// Whether a flow's legacy `schedule` text can stand for this schedule.
    fn is_legacy_shaped(&self) -> bool {
        self.timezone == "UTC" && self.version.is_none() && !self.paused
    }

    /// The next occurrence after `now` (none when paused or never again).
    fn next_at(&self, now: DateTime<Utc>) -> ApiResult<Option<DateTime<Utc>>> {
        if self.paused {
            return Ok(None);
        }
        let cron = ZonedCron::parse(&self.cron, &self.timezone)
            .map_err(|(field, e)| ApiError::invalid(format!("invalid field `{field}`: {e}")))?;
        Ok(cron.next_after(now).map(|t| t.to_utc()))
    }
}

/// Locks the flow's row (so concurrent writes of its schedules count right); a flow of another organization is 404.
pub async fn lock_flow(conn: &mut PgConnection, org_id: OrgId, flow_id: FlowId) -> ApiResult<()> {
    let found: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM flows WHERE id = $1 AND organization_id = $2 FOR UPDATE")
            .bind(flow_id)
            .bind(org_id)
            .fetch_optional(&mut *conn)
            .await?;
    found.map(|_| ()).ok_or_else(|| ApiError::not_found("flow"))
}

/// The flow's schedules, the legacy one first, then oldest first.
pub async fn list(conn: &mut PgConnection, org_id: OrgId, flow_id: FlowId) -> ApiResult<Vec<ScheduleRow>> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM flow_schedules s WHERE s.organization_id = $1 AND s.flow_id = $2
         ORDER BY s.legacy DESC, s.created_at, s.id"
    )))
    .bind(org_id)
    .bind(flow_id)
    .fetch_all(conn)
    .await?)
}

/// One schedule of the flow (404 when it is not one of this organization's flow's).
pub async fn fetch(
    conn: &mut PgConnection,
    org_id: OrgId,
    flow_id: FlowId,
    id: ScheduleId,
    lock: bool,
) -> ApiResult<ScheduleRow> {
    let lock = if lock { " FOR UPDATE" } else { "" };
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM flow_schedules s WHERE s.organization_id = $1 AND s.flow_id = $2 AND s.id = $3{lock}"
    )))
    .bind(org_id)
    .bind(flow_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| ApiError::not_found("schedule"))
}

/// Inserts a schedule of a flow already locked by [`lock_flow`]; past 10 per flow answers 400.
pub async fn insert(
    conn: &mut PgConnection,
    org_id: OrgId,
    flow_id: FlowId,
    settings: &Settings,
    legacy: bool,
) -> ApiResult<ScheduleRow> {
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM flow_schedules WHERE flow_id = $1")
        .bind(flow_id)
        .fetch_one(&mut *conn)
        .await?;
    if count >= MAX_PER_FLOW as i64 {
        let field = if legacy { "schedule" } else { "cron" };
        return Err(ApiError::invalid(format!(
            "invalid field `{field}`: a flow has at most {MAX_PER_FLOW} schedules; delete one first"
        )));
    }
    let next_at = settings.next_at(Utc::now())?;
    let id = ScheduleId::now_v7();
    sqlx::query(
        "INSERT INTO flow_schedules (id, organization_id, flow_id, legacy, cron, timezone, environment, version,
             variables, runner_labels, overlap, catch_up_s, paused, notify_channels, notify_after_failures,
             notify_on_recovery, next_at, priority)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
    )
    .bind(id)
    .bind(org_id)
    .bind(flow_id)
    .bind(legacy)
    .bind(&settings.cron)
    .bind(&settings.timezone)
    .bind(&settings.environment)
    .bind(Json(settings.version))
    .bind(Json(&settings.variables))
    .bind(&settings.runner_labels)
    .bind(settings.overlap.as_str())
    .bind(settings.catch_up_s as i32)
    .bind(settings.paused)
    .bind(&settings.notify.channels)
    .bind(settings.notify.after_failures as i32)
    .bind(settings.notify.on_recovery)
    .bind(next_at)
    .bind(settings.priority)
    .execute(&mut *conn)
    .await?;
    fetch(conn, org_id, flow_id, id, false).await
}

/// Writes `settings` over a locked row. A changed cron, zone or pause computes the next occurrence afresh. The
/// legacy row stays the flow's `schedule` while it can stand for it (UTC, the draft, not paused), and the flow's
/// text follows it; otherwise it becomes an ordinary schedule and the flow's text is cleared.
pub async fn update(conn: &mut PgConnection, row: &ScheduleRow, settings: &Settings) -> ApiResult<ScheduleRow> {
    let old = row.settings();
    let timing_changed =
        old.cron != settings.cron || old.timezone != settings.timezone || old.paused != settings.paused;
    let next_at = if timing_changed { settings.next_at(Utc::now())? } else { row.next_at };
    let legacy = row.legacy && settings.is_legacy_shaped();
    sqlx::query(
        "UPDATE flow_schedules SET cron = $2, timezone = $3, environment = $4, version = $5, variables = $6,
             runner_labels = $7, overlap = $8, catch_up_s = $9, paused = $10, notify_channels = $11,
             notify_after_failures = $12, notify_on_recovery = $13, next_at = $14, legacy = $15, priority = $16,
             updated_at = now()
         WHERE id = $1",
    )
    .bind(row.id)
    .bind(&settings.cron)
    .bind(&settings.timezone)
    .bind(&settings.environment)
    .bind(Json(settings.version))
    .bind(Json(&settings.variables))
    .bind(&settings.runner_labels)
    .bind(settings.overlap.as_str())
    .bind(settings.catch_up_s as i32)
    .bind(settings.paused)
    .bind(&settings.notify.channels)
    .bind(settings.notify.after_failures as i32)
    .bind(settings.notify.on_recovery)
    .bind(next_at)
    .bind(legacy)
    .bind(settings.priority)
    .execute(&mut *conn)
    .await?;
    if row.legacy {
        sqlx::query("UPDATE flows SET schedule = $2, updated_at = now() WHERE id = $1")
            .bind(row.flow_id)
            .bind(legacy.then_some(settings.cron.as_str()))
            .execute(&mut *conn)
            .await?;
    }
    fetch(conn, row.organization_id, row.flow_id, row.id, false).await
}

/// Deletes a locked row; the legacy one clears the flow's `schedule` text.
pub async fn delete(conn: &mut PgConnection, row: &ScheduleRow) -> ApiResult<()> {
    sqlx::query("DELETE FROM flow_schedules WHERE id = $1").bind(row.id).execute(&mut *conn).await?;
    if row.legacy {
        sqlx::query("UPDATE flows SET schedule = NULL, updated_at = now() WHERE id = $1")
            .bind(row.flow_id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Mirrors a write of a flow's legacy `schedule` text (already validated): a text sets the legacy row's cron (a
/// new row when there is none, counted against the 10), none deletes the row. Runs in the write's transaction.
pub async fn sync_legacy(conn: &mut PgConnection, org_id: OrgId, flow_id: FlowId, cron: Option<&str>) -> ApiResult<()> {
    let existing: Option<ScheduleRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM flow_schedules s WHERE s.flow_id = $1 AND s.legacy FOR UPDATE"
    )))
    .bind(flow_id)
    .fetch_optional(&mut *conn)
    .await?;
    match (existing, cron) {
        (None, None) => Ok(()),
        (Some(row), None) => {
            sqlx::query("DELETE FROM flow_schedules WHERE id = $1").bind(row.id).execute(&mut *conn).await?;
            Ok(())
        }
        (Some(row), Some(cron)) => {
            let settings = Settings { cron: cron.trim().to_owned(), ..row.settings() };
            if settings != row.settings() {
                let next_at = settings.next_at(Utc::now())?;
                sqlx::query("UPDATE flow_schedules SET cron = $2, next_at = $3, updated_at = now() WHERE id = $1")
                    .bind(row.id)
                    .bind(&settings.cron)
                    .bind(next_at)
                    .execute(&mut *conn)
                    .await?;
            }
            Ok(())
        }
        (None, Some(cron)) => {
            lock_flow(conn, org_id, flow_id).await?;
            insert(conn, org_id, flow_id, &Settings::legacy(cron), true).await.map(|_| ())
        }
    }
}
