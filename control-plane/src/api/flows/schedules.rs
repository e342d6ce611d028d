//! Schedules of a flow (issue #50): create (at most 10 per flow), list, read, patch, delete, and the preview of a
//! cron expression's fire times in a zone. The rows, their writes and the fire times are `crate::schedules`'s;
//! this file checks bodies and scopes.

use crate::api::context::Ctx;
use crate::api::executions::launch::check_variables;
use crate::auth::scope;
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiJson, ApiPath, Id};
use crate::schedules::occurrences::{ZonedCron, rfc3339};
use crate::schedules::store::{self, Settings};
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use chrono::Utc;
use hookflow_shared::api::Patch;
use hookflow_shared::api::schedules::{
    MAX_CATCH_UP_S, MAX_CHANNELS, MAX_PREVIEW, Notify, PatchSchedule, PreviewSchedule, Schedule, ScheduleList,
    SchedulePreview, WriteNotify, WriteSchedule,
};
use hookflow_shared::flow::definition::VersionSelector;
use hookflow_shared::{FlowId, OrgId, ScheduleId, Timestamp};
use sqlx::PgConnection;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_schedules, create_schedule))
        .routes(routes!(get_schedule, patch_schedule, delete_schedule))
        .routes(routes!(preview_schedule))
}

/// The `{schedule_id}` of a schedule's routes.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SchedulePath {
    /// The flow's id.
    #[allow(dead_code)]
    id: FlowId,
    /// The schedule's id.
    #[allow(dead_code)]
    schedule_id: ScheduleId,
}

/// **Added.** Schedules of a flow, the legacy `schedule` first, then oldest first.
#[utoipa::path(get, operation_id = "list_flow_schedules", path = "/flows/{id}/schedules", params(Id),
    responses((status = 200, body = ScheduleList), (status = 404)))]
async fn list_schedules(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    Id(id): Id<FlowId>,
) -> ApiResult<Json<ScheduleList>> {
    let mut conn = app.pool.acquire().await?;
    crate::api::flows::model::ensure_exists(&mut conn, caller.org_id, id).await?;
    let now = Utc::now();
    let rows = store::list(&mut conn, caller.org_id, id).await?;
    let items = rows.into_iter().map(|r| r.into_schedule(now)).collect::<ApiResult<_>>()?;
    Ok(Json(ScheduleList { items }))
}

/// **Added.** Create a schedule of a flow (at most 10 per flow).
#[utoipa::path(post, operation_id = "create_flow_schedule", path = "/flows/{id}/schedules", params(Id),
    request_body = WriteSchedule, responses((status = 201, body = Schedule), (status = 400), (status = 404)))]
async fn create_schedule(
    Ctx { app, caller }: Ctx<scope::FlowsWrite>,
    Id(id): Id<FlowId>,
    ApiJson(body): ApiJson<WriteSchedule>,
) -> Created<Schedule> {
    let settings = settings_of(body)?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    store::lock_flow(&mut tx, caller.org_id, id).await?;
    check_targets(&mut tx, caller.org_id, id, &settings).await?;
    let row = store::insert(&mut tx, caller.org_id, id, &settings, false).await?;
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(row.into_schedule(Utc::now())?)))
}

/// **Added.** One schedule of a flow.
#[utoipa::path(get, operation_id = "get_flow_schedule", path = "/flows/{id}/schedules/{schedule_id}",
    params(SchedulePath), responses((status = 200, body = Schedule), (status = 404)))]
async fn get_schedule(
    Ctx { app, caller }: Ctx<scope::FlowsRead>,
    ApiPath((flow_id, schedule_id)): ApiPath<(FlowId, ScheduleId)>,
) -> ApiResult<Json<Schedule>> {
    let mut conn = app.pool.acquire().await?;
    let row = store::fetch(&mut conn, caller.org_id, flow_id, schedule_id, false).await?;
    Ok(Json(row.into_schedule(Utc::now())?))
}

/// **Added.** Change some fields of a schedule; `null` clears `environment` or `version` (the draft).
#[utoipa::path(patch, operation_id = "update_flow_schedule", path = "/flows/{id}/schedules/{schedule_id}",
    params(SchedulePath), request_body = PatchSchedule,
    responses((status = 200, body = Schedule), (status = 400), (status = 404)))]
async fn patch_schedule(
    Ctx { app, caller }: Ctx<scope::FlowsWrite>,
    ApiPath((flow_id, schedule_id)): ApiPath<(FlowId, ScheduleId)>,
    ApiJson(body): ApiJson<PatchSchedule>,
) -> ApiResult<Json<Schedule>> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let row = store::fetch(&mut tx, caller.org_id, flow_id, schedule_id, true).await?;
    let settings = patched(row.settings(), body)?;
    check_targets(&mut tx, caller.org_id, flow_id, &settings).await?;
    let updated = store::update(&mut tx, &row, &settings).await?;
    tx.commit().await?;
    Ok(Json(updated.into_schedule(Utc::now())?))
}

/// **Added.** Delete a schedule (its executions keep its id).
#[utoipa::path(delete, operation_id = "delete_flow_schedule", path = "/flows/{id}/schedules/{schedule_id}",
    params(SchedulePath), responses((status = 204), (status = 404)))]
async fn delete_schedule(
    Ctx { app, caller }: Ctx<scope::FlowsWrite>,
    ApiPath((flow_id, schedule_id)): ApiPath<(FlowId, ScheduleId)>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let row = store::fetch(&mut tx, caller.org_id, flow_id, schedule_id, true).await?;
    store::delete(&mut tx, &row).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// **Added.** Exactly `count` fire times of a cron expression in a zone, strictly after `from`, each with the
/// zone's offset at that instant.
#[utoipa::path(post, operation_id = "preview_schedule", path = "/schedules/preview",
    request_body = PreviewSchedule, responses((status = 200, body = SchedulePreview), (status = 400)))]
async fn preview_schedule(
    Ctx { app: _, caller: _ }: Ctx<scope::FlowsRead>,
    ApiJson(body): ApiJson<PreviewSchedule>,
) -> ApiResult<Json<SchedulePreview>> {
    let cron = zoned(&body.cron, &body.timezone)?;
    let from = Timestamp::parse(&body.from)
        .map_err(|_| ApiError::invalid("invalid field `from`: an RFC 3339 time such as 2026-03-29T00:00:00+01:00"))?;
    if body.count == 0 || body.count > MAX_PREVIEW {
        return Err(ApiError::invalid(format!("invalid field `count`: 1 to {MAX_PREVIEW}")));
    }
    let occurrences = cron.after(from.0, body.count as usize);
    if occurrences.len() < body.count as usize {
        return Err(ApiError::invalid(format!(
            "invalid field `cron`: `{}` fires fewer than {} times after `from`",
            body.cron, body.count
        )));
    }
    Ok(Json(SchedulePreview { occurrences: occurrences.iter().map(rfc3339).collect() }))
}

fn zoned(cron: &str, timezone: &str) -> ApiResult<ZonedCron> {
    if cron.len() > 200 {
        return Err(ApiError::invalid("invalid field `cron`: at most 200 characters"));
    }
    ZonedCron::parse(cron, timezone).map_err(|(field, e)| ApiError::invalid(format!("invalid field `{field}`: {e}")))
}

/// A create body's settings, checked.
fn settings_of(body: WriteSchedule) -> ApiResult<Settings> {
    let notify = notify_of(body.notify, None)?;
    let settings = Settings {
        cron: body.cron.trim().to_owned(),
        timezone: body.timezone.unwrap_or_else(|| "UTC".to_owned()),
        environment: body.environment,
        version: body.version,
        variables: body.variables,
        runner_labels: body.runner_labels.into_inner(),
        priority: i16::from(body.priority.unwrap_or_default().get()),
        overlap: body.overlap.unwrap_or_default(),
        catch_up_s: body.catch_up_s.unwrap_or(0),
        paused: body.paused.unwrap_or(false),
        notify,
    };
    check(&settings)?;
    Ok(settings)
}

/// A stored schedule's settings with a patch applied, checked.
fn patched(mut settings: Settings, body: PatchSchedule) -> ApiResult<Settings> {
    if let Some(cron) = body.cron {
        settings.cron = cron.trim().to_owned();
    }
    if let Some(timezone) = body.timezone {
        settings.timezone = timezone;
    }
    match body.environment {
        Patch::Keep => {}
        Patch::Clear => settings.environment = None,
        Patch::Set(key) => settings.environment = Some(key),
    }
    match body.version {
        Patch::Keep => {}
        Patch::Clear => settings.version = None,
        Patch::Set(version) => settings.version = Some(version),
    }
    if let Some(variables) = body.variables {
        settings.variables = variables;
    }
    if let Some(labels) = body.runner_labels {
        settings.runner_labels = labels.into_inner();
    }
    if let Some(priority) = body.priority {
        settings.priority = i16::from(priority.get());
    }
    settings.overlap = body.overlap.unwrap_or(settings.overlap);
    settings.catch_up_s = body.catch_up_s.unwrap_or(settings.catch_up_s);
    settings.paused = body.paused.unwrap_or(settings.paused);
    if body.notify.is_some() {
        settings.notify = notify_of(body.notify, Some(&settings.notify))?;
    }
    check(&settings)?;
    Ok(settings)
}

/// `notify` as given over what it replaces (absent parts keep the stored value, or the default on create).
fn notify_of(given: Option<WriteNotify>, stored: Option<&Notify>) -> ApiResult<Notify> {
    let base = stored.cloned().unwrap_or(Notify { channels: Vec::new(), after_failures: 1, on_recovery: true });
    let Some(given) = given else { return Ok(base) };
    let mut channels = given.channels;
    if channels.len() > MAX_CHANNELS {
        return Err(ApiError::invalid(format!("invalid field `notify.channels`: at most {MAX_CHANNELS} channel ids")));
    }
    let count = channels.len();
    channels.sort();
    channels.dedup();
    if channels.len() != count {
        return Err(ApiError::invalid("invalid field `notify.channels`: a channel is named twice"));
    }
    let after_failures = given.after_failures.unwrap_or(base.after_failures);
    if !(1..=100).contains(&after_failures) {
        return Err(ApiError::invalid("invalid field `notify.after_failures`: 1 to 100"));
    }
    Ok(Notify { channels, after_failures, on_recovery: given.on_recovery.unwrap_or(base.on_recovery) })
}

/// Checks what needs no database: cron and zone, the environment key, variables, catch-up window.
fn check(settings: &Settings) -> ApiResult<()> {
    zoned(&settings.cron, &settings.timezone)?;
    if let Some(key) = &settings.environment
        && !hookflow_shared::api::rules::is_key(key, 64)
    {
        return Err(ApiError::invalid("invalid field `environment`: 1 to 64 letters, digits, _ or -"));
    }
    check_variables(&settings.variables)?;
    if settings.catch_up_s > MAX_CATCH_UP_S {
        return Err(ApiError::invalid(format!("invalid field `catch_up_s`: 0 to {MAX_CATCH_UP_S}")));
    }
    Ok(())
}

/// Checks that the environment and the published version a schedule names exist, so its launches can be made.
async fn check_targets(conn: &mut PgConnection, org_id: OrgId, flow_id: FlowId, settings: &Settings) -> ApiResult<()> {
    if let Some(key) = &settings.environment {
        let found: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM flow_environments WHERE organization_id = $1 AND flow_id = $2 AND key = $3)",
        )
        .bind(org_id)
        .bind(flow_id)
        .bind(key)
        .fetch_one(&mut *conn)
        .await?;
        if !found {
            return Err(ApiError::invalid(format!("invalid field `environment`: the flow has no environment `{key}`")));
        }
    }
    if let Some(version) = settings.version {
        let number = match version {
            VersionSelector::Number(n) => Some(i32::try_from(n).unwrap_or(i32::MAX)),
            VersionSelector::Latest(_) => None,
        };
        let found: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM flow_versions WHERE flow_id = $1 AND ($2::int IS NULL OR version = $2))",
        )
        .bind(flow_id)
        .bind(number)
        .fetch_one(&mut *conn)
        .await?;
        if !found {
            return Err(ApiError::invalid("invalid field `version`: the flow has no such published version"));
        }
    }
    if !settings.notify.channels.is_empty() {
        // Locks the channels named: a concurrent delete (which takes them out of notify lists) waits for this.
        let found: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT 1 FROM notification_channels WHERE organization_id = $1 AND id = ANY($2)
             FOR SHARE) c",
        )
        .bind(org_id)
        .bind(&settings.notify.channels)
        .fetch_one(&mut *conn)
        .await?;
        if found != settings.notify.channels.len() as i64 {
            return Err(ApiError::invalid(
                "invalid field `notify.channels`: every id must name a notification channel of the organization",
            ));
        }
    }
    Ok(())
}
