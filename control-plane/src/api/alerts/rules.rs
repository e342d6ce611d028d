//! Alert rules of an organization (`schedule_unclaimed`, `runners_offline`): create, list, delete, each audited.
//! `crate::alerts::rules` evaluates them.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Ctx;
use crate::auth::scope;
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiJson, ApiPath};
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::api::Page;
use hookflow_shared::api::alerts::{
    AlertRule, CreateAlertRule, RULE_AFTER_S_DEFAULT, RULE_AFTER_S_MAX, RULE_AFTER_S_MIN, RULES_MAX, RuleKind,
};
use sqlx::PgConnection;
use uuid::Uuid;

/// Most channels a rule notifies.
const RULE_CHANNELS_MAX: usize = 20;

const RULE_COLUMNS: &str = "id, kind, schedule_id, runner_labels, after_s, channels, state, created_at";

#[derive(Debug, sqlx::FromRow)]
struct RuleRow {
    id: Uuid,
    kind: String,
    schedule_id: Option<Uuid>,
    runner_labels: Vec<String>,
    after_s: i32,
    channels: Vec<Uuid>,
    state: String,
    created_at: DateTime<Utc>,
}

impl From<RuleRow> for AlertRule {
    fn from(row: RuleRow) -> Self {
        AlertRule {
            id: row.id,
            kind: if row.kind == "schedule_unclaimed" { RuleKind::ScheduleUnclaimed } else { RuleKind::RunnersOffline },
            schedule_id: row.schedule_id,
            runner_labels: row.runner_labels,
            after_s: u32::try_from(row.after_s).unwrap_or_default(),
            channels: row.channels,
            state: row.state,
            created_at: row.created_at.into(),
        }
    }
}

/// Checks that every id names a channel of the organization (locked against a concurrent delete), once each.
pub async fn check_channels(
    conn: &mut PgConnection,
    org_id: hookflow_shared::OrgId,
    channels: &[Uuid],
) -> ApiResult<()> {
    let mut sorted = channels.to_vec();
    sorted.sort();
    sorted.dedup();
    if sorted.len() != channels.len() {
        return Err(ApiError::invalid("invalid field `channels`: a channel is named twice"));
    }
    if channels.is_empty() || channels.len() > RULE_CHANNELS_MAX {
        return Err(ApiError::invalid(format!("invalid field `channels`: 1 to {RULE_CHANNELS_MAX} channel ids")));
    }
    let found: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT 1 FROM notification_channels WHERE organization_id = $1 AND id = ANY($2)
         FOR SHARE) c",
    )
    .bind(org_id)
    .bind(channels)
    .fetch_one(&mut *conn)
    .await?;
    if found != channels.len() as i64 {
        return Err(ApiError::invalid(
            "invalid field `channels`: every id must name a notification channel of the organization",
        ));
    }
    Ok(())
}

/// **Added.** Create an alert rule.
#[utoipa::path(post, path = "/alert-rules", request_body = CreateAlertRule,
    responses((status = 201, body = AlertRule), (status = 400)))]
pub async fn create_rule(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiJson(body): ApiJson<CreateAlertRule>,
) -> Created<AlertRule> {
    let after_s = body.after_s.unwrap_or(RULE_AFTER_S_DEFAULT);
    if !(RULE_AFTER_S_MIN..=RULE_AFTER_S_MAX).contains(&after_s) {
        return Err(ApiError::invalid(format!(
            "invalid field `after_s`: {RULE_AFTER_S_MIN} to {RULE_AFTER_S_MAX} seconds"
        )));
    }
    match body.kind {
        RuleKind::ScheduleUnclaimed => {
            if body.schedule_id.is_none() {
                return Err(ApiError::invalid("invalid field `schedule_id`: required for a schedule_unclaimed rule"));
            }
            if !body.runner_labels.is_empty() {
                return Err(ApiError::invalid(
                    "invalid field `runner_labels`: a schedule_unclaimed rule watches the schedule's own labels",
                ));
            }
        }
        RuleKind::RunnersOffline => {
            if body.runner_labels.is_empty() {
                return Err(ApiError::invalid("invalid field `runner_labels`: required for a runners_offline rule"));
            }
            if body.schedule_id.is_some() {
                return Err(ApiError::invalid("invalid field `schedule_id`: only for a schedule_unclaimed rule"));
            }
        }
    }
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    sqlx::query("SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE").bind(caller.org_id).execute(&mut *tx).await?;
    if let Some(schedule) = body.schedule_id {
        let found: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM flow_schedules WHERE organization_id = $1 AND id = $2)")
                .bind(caller.org_id)
                .bind(schedule)
                .fetch_one(&mut *tx)
                .await?;
        if !found {
            return Err(ApiError::invalid("invalid field `schedule_id`: no such schedule in the organization"));
        }
    }
    check_channels(&mut tx, caller.org_id, &body.channels).await?;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM alert_rules WHERE organization_id = $1")
        .bind(caller.org_id)
        .fetch_one(&mut *tx)
        .await?;
    if count >= RULES_MAX {
        return Err(ApiError::invalid(format!("an organization has at most {RULES_MAX} alert rules")));
    }
    let id = Uuid::new_v4();
    let row: RuleRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO alert_rules (id, organization_id, kind, schedule_id, runner_labels, after_s, channels)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {RULE_COLUMNS}"
    )))
    .bind(id)
    .bind(caller.org_id)
    .bind(body.kind.as_str())
    .bind(body.schedule_id)
    .bind(&*body.runner_labels)
    .bind(after_s as i32)
    .bind(&body.channels)
    .fetch_one(&mut *tx)
    .await?;
    let details = serde_json::json!({"kind": row.kind, "schedule_id": row.schedule_id,
        "runner_labels": row.runner_labels, "after_s": row.after_s, "channels": row.channels});
    audit::record(
        &mut tx,
        AuditEvent {
            org_id: caller.org_id,
            actor: caller.actor,
            action: "alert_rule.created",
            target: id.to_string(),
            details,
        },
    )
    .await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(row.into())))
}

/// **Added.** The organization's alert rules, oldest first (at most 100).
#[utoipa::path(get, path = "/alert-rules", responses((status = 200, body = Page<AlertRule>)))]
pub async fn list_rules(Ctx { app, caller }: Ctx<scope::OrganizationRead>) -> ApiResult<Json<Page<AlertRule>>> {
    let rows: Vec<RuleRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {RULE_COLUMNS} FROM alert_rules WHERE organization_id = $1 ORDER BY created_at, id"
    )))
    .bind(caller.org_id)
    .fetch_all(&app.pool)
    .await?;
    Ok(Json(Page { items: rows.into_iter().map(AlertRule::from).collect(), next_cursor: None }))
}

/// **Added.** Delete an alert rule.
#[utoipa::path(delete, path = "/alert-rules/{rule_id}", params(("rule_id" = Uuid, Path)),
    responses((status = 204), (status = 404)))]
pub async fn delete_rule(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let deleted: Option<String> =
        sqlx::query_scalar("DELETE FROM alert_rules WHERE organization_id = $1 AND id = $2 RETURNING kind")
            .bind(caller.org_id)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(kind) = deleted else { return Err(ApiError::not_found("alert rule")) };
    audit::record(
        &mut tx,
        AuditEvent {
            org_id: caller.org_id,
            actor: caller.actor,
            action: "alert_rule.deleted",
            target: id.to_string(),
            details: serde_json::json!({"kind": kind}),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}
