//! Webhook endpoints: create (live at once), list newest first, read, change, delete (with their captures).
//! Every change NOTIFYs the capture caches of all servers; a change of `triggers` is audited.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Ctx;
pub use crate::api::webhooks::model::ensure_exists;
use crate::api::webhooks::model::{WEBHOOK_COLUMNS, WebhookRow};
use crate::api::webhooks::{answers, handshake, triggers, verification};
use crate::auth::Caller;
use crate::auth::scope;
use crate::db::owned::{self, Owned};
use crate::db::update::Update;
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiJson, Id};
use crate::pagination::{self, ListParams, Listed};
use crate::signals::Invalidation;
use crate::state::AppState;
use crate::validate::field;
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::api::admin::Retention;
use hookflow_shared::api::fields::{ShortText, ValueText};
use hookflow_shared::api::rules::ENDPOINT_BODY_LIMIT_MAX;
use hookflow_shared::api::triggers::WebhookTrigger;
use hookflow_shared::api::webhooks::{CreateWebhook, CustomResponse, UpdateWebhook, Webhook};
use hookflow_shared::api::{Page, Patch};
use hookflow_shared::{CollectionId, OrgId, WebhookId};
use sqlx::PgConnection;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_webhook, list_webhooks)).routes(routes!(
        get_webhook,
        update_webhook,
        delete_webhook
    ))
}

/// Reads an endpoint of the caller's organization; another organization's id is 404.
pub async fn fetch(conn: &mut PgConnection, org_id: OrgId, id: WebhookId) -> ApiResult<WebhookRow> {
    let select = format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks w JOIN organizations o ON o.id = w.organization_id
         WHERE w.organization_id = $1 AND w.id = $2"
    );
    owned::fetch(conn, select, org_id, id, "webhook").await
}

/// Tells every replica's capture cache that the endpoint changed, when the transaction commits.
async fn announce_change(conn: &mut PgConnection, id: WebhookId) -> Result<(), sqlx::Error> {
    Invalidation::Endpoint(id).announce(conn).await
}

fn check_body_limit(value: Option<i64>) -> ApiResult<()> {
    if value.is_some_and(|n| !(1..=ENDPOINT_BODY_LIMIT_MAX).contains(&n)) {
        return Err(ApiError::invalid("`max_body_bytes` must be between 1 and 33554432 (32 MiB)"));
    }
    Ok(())
}

fn check_retention(value: Option<&Retention>) -> ApiResult<()> {
    if let Some(r) = value {
        if r.max_age_days.is_some_and(|d| d < 1) {
            return Err(ApiError::invalid("`retention.max_age_days` must be at least 1 (or null)"));
        }
        if r.max_requests.is_some_and(|n| n < 1) {
            return Err(ApiError::invalid("`retention.max_requests` must be at least 1 (or null)"));
        }
    }
    Ok(())
}

fn check_response(value: Option<&CustomResponse>) -> ApiResult<()> {
    let Some(response) = value else { return Ok(()) };
    if !(200..=599).contains(&response.status) || (300..400).contains(&response.status) {
        return Err(ApiError::invalid("`response.status` must be an HTTP status from 200 to 599, not a redirect"));
    }
    for (name, value) in &response.headers {
        if axum::http::HeaderName::try_from(name.as_str()).is_err()
            || axum::http::HeaderValue::try_from(value.as_str()).is_err()
        {
            return Err(ApiError::invalid(format!("`response.headers`: `{name}` is not a valid header")));
        }
        if !hookflow_shared::api::rules::custom_response_header_allowed(name) {
            return Err(ApiError::invalid(format!(
                "`response.headers`: `{name}` cannot be set on a capture answer: only Content-Type, \
                 Content-Language, Retry-After and `X-` headers of your own (it is served on the API's origin)"
            )));
        }
    }
    field::<ValueText>("response.body", response.body.as_str()).map(drop)
}

/// Records who set an endpoint's triggers and which flows they launch (a trigger launches flows, as a key with
/// `flows:execute` may).
async fn audit_triggers<S>(
    conn: &mut PgConnection,
    caller: &Caller<S>,
    id: WebhookId,
    triggers: &[WebhookTrigger],
) -> ApiResult<()> {
    let flows: Vec<String> = triggers.iter().map(|t| t.flow_id.to_string()).collect();
    let details = serde_json::json!({"flow_ids": flows});
    let event = AuditEvent {
        org_id: caller.org_id,
        actor: caller.actor,
        action: "webhook.triggers.set",
        target: id.to_string(),
        details,
    };
    audit::record(conn, event).await?;
    Ok(())
}

/// Changing or removing the verification of an endpoint that launches flows (its triggers, as stored or as this
/// change sets them) disarms or re-arms what gates those launches: it needs `flows:execute` as setting the
/// triggers does. The row is locked, so triggers set meanwhile are seen.
async fn guard_verification<S>(
    conn: &mut PgConnection,
    caller: &Caller<S>,
    id: WebhookId,
    new_triggers: Option<&[WebhookTrigger]>,
) -> ApiResult<()> {
    let armed: Option<bool> = sqlx::query_scalar(
        "SELECT COALESCE(jsonb_typeof(triggers) = 'array' AND triggers <> '[]'::jsonb, false) FROM webhooks
         WHERE organization_id = $1 AND id = $2 FOR UPDATE",
    )
    .bind(caller.org_id)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(armed) = armed else { return Err(ApiError::not_found("webhook")) };
    if armed || new_triggers.is_some_and(|t| !t.is_empty()) {
        caller.require(hookflow_shared::Scope::FlowsExecute)?;
    }
    Ok(())
}

/// Create an endpoint; it captures at `capture_url` at once.
#[utoipa::path(post, path = "/webhooks", request_body = CreateWebhook, responses((status = 201, body = Webhook),
    (status = 403, description = "`quota_exceeded`: the organization's `endpoints` quota is reached")))]
async fn create_webhook(
    Ctx { app, caller }: Ctx<scope::WebhooksWrite>,
    ApiJson(body): ApiJson<CreateWebhook>,
) -> Created<Webhook> {
    Ok((StatusCode::CREATED, Json(create(&app, &caller, body, None).await?)))
}

/// Creates an endpoint as `POST /webhooks` does (the caller has `webhooks:write`), a mock of a collection when
/// `mock_of` names one.
pub async fn create<S>(
    app: &AppState,
    caller: &Caller<S>,
    body: CreateWebhook,
    mock_of: Option<CollectionId>,
) -> ApiResult<Webhook> {
    check_body_limit(body.max_body_bytes)?;
    check_retention(body.retention.as_ref())?;
    check_response(body.response.as_ref())?;
    verification::check(body.verification.as_ref())?;
    handshake::check(body.handshake.as_ref(), body.verification.is_some())?;
    triggers::check(&app.pool, caller, &body.triggers).await?;
    let rule_conditions = match &body.rules {
        Some(rules) => Some(answers::compile(&app.pool, rules).await?),
        None => None,
    };
    answers::check_cors(body.cors.as_ref())?;
    let id = WebhookId::new(Uuid::new_v4());
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    crate::quota::admit_created(&mut tx, caller.org_id, crate::quota::Quota::Endpoints, app.settings.quotas).await?;
    sqlx::query(
        "INSERT INTO webhooks (id, organization_id, name, description, max_body_bytes, max_age_days, max_requests, response,
                               triggers, rules, rule_conditions, cors, mock_of)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(id)
    .bind(caller.org_id)
    .bind(body.name.as_str())
    .bind(body.description.as_deref())
    .bind(body.max_body_bytes)
    .bind(body.retention.and_then(|r| r.max_age_days))
    .bind(body.retention.and_then(|r| r.max_requests))
    .bind(body.response.map(sqlx::types::Json))
    .bind(sqlx::types::Json(&*body.triggers))
    .bind(body.rules.as_ref().map(sqlx::types::Json))
    .bind(rule_conditions.map(sqlx::types::Json))
    .bind(body.cors.as_ref().map(sqlx::types::Json))
    .bind(mock_of)
    .execute(&mut *tx)
    .await?;
    if !body.triggers.is_empty() {
        audit_triggers(&mut tx, caller, id, &body.triggers).await?;
    }
    if let Some(settings) = &body.verification {
        let writer =
            verification::Writer { master: &app.settings.master_key, org_id: caller.org_id, actor: &caller.actor };
        verification::store(&mut tx, writer, id, Some(settings)).await?;
    }
    if let Some(settings) = &body.handshake {
        let writer =
            verification::Writer { master: &app.settings.master_key, org_id: caller.org_id, actor: &caller.actor };
        handshake::store(&mut tx, writer, id, Some(settings)).await?;
    }
    announce_change(&mut tx, id).await?;
    let row = fetch(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    app.invalidate(Invalidation::Endpoint(id));
    Ok(row.into_api(&app.settings.capture_url))
}

/// List endpoints, newest first.
#[utoipa::path(get, path = "/webhooks", params(ListParams), responses((status = 200, body = Page<Webhook>)))]
async fn list_webhooks(Ctx { app, caller }: Ctx<scope::WebhooksRead>, params: ListParams) -> Listed<Webhook> {
    let page = params.page::<(DateTime<Utc>, WebhookId)>()?;
    let rows: Vec<WebhookRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks w JOIN organizations o ON o.id = w.organization_id
         WHERE w.organization_id = $1 AND ($2::timestamptz IS NULL OR (w.created_at, w.id) < ($2, $3))
         ORDER BY w.created_at DESC, w.id DESC LIMIT $4"
    )))
    .bind(caller.org_id)
    .bind(page.after.map(|a| a.0))
    .bind(page.after.map(|a| a.1))
    .bind(page.fetch_limit())
    .fetch_all(&app.pool)
    .await?;
    let items: Vec<Webhook> = rows.into_iter().map(|r| r.into_api(&app.settings.capture_url)).collect();
    Ok(Json(pagination::finish(items, &page, |w| (w.created_at.0, w.id))?))
}

/// Read an endpoint.
#[utoipa::path(get, path = "/webhooks/{id}", params(Id), responses((status = 200, body = Webhook)))]
async fn get_webhook(Ctx { app, caller }: Ctx<scope::WebhooksRead>, Id(id): Id<WebhookId>) -> ApiResult<Json<Webhook>> {
    let mut conn = app.pool.acquire().await?;
    Ok(Json(fetch(&mut conn, caller.org_id, id).await?.into_api(&app.settings.capture_url)))
}

/// Change any of the create fields; `null` resets description, limits, retention, response, rules or cors to
/// defaults.
/// Changing or removing `verification` of an endpoint with triggers also needs `flows:execute`.
#[utoipa::path(patch, path = "/webhooks/{id}", params(Id), request_body = UpdateWebhook,
    responses((status = 200, body = Webhook)))]
async fn update_webhook(
    Ctx { app, caller }: Ctx<scope::WebhooksWrite>,
    Id(id): Id<WebhookId>,
    ApiJson(body): ApiJson<UpdateWebhook>,
) -> ApiResult<Json<Webhook>> {
    let name = body.name.as_ref().map(|n| n.as_str().to_owned());
    check_body_limit(body.max_body_bytes.value().copied())?;
    check_retention(body.retention.value())?;
    check_response(body.response.value())?;
    verification::check(body.verification.value())?;
    let new_triggers = match &body.triggers {
        Patch::Keep => None,
        Patch::Clear => Some(Vec::new()),
        Patch::Set(triggers) => Some(triggers.to_vec()),
    };
    if let Some(triggers) = &new_triggers {
        triggers::check(&app.pool, &caller, triggers).await?;
    }
    let rule_conditions = match body.rules.value() {
        Some(rules) => Patch::Set(answers::compile(&app.pool, rules).await?),
        None if body.rules.is_keep() => Patch::Keep,
        None => Patch::Clear,
    };
    answers::check_cors(body.cors.value())?;
    // A retention replaces both of its limits; `null` clears both.
    let (max_age_days, max_requests) = match body.retention {
        Patch::Keep => (Patch::Keep, Patch::Keep),
        Patch::Clear => (Patch::Clear, Patch::Clear),
        Patch::Set(r) => (Patch::from_option(r.max_age_days), Patch::from_option(r.max_requests)),
    };
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    if !body.verification.is_keep() {
        guard_verification(&mut tx, &caller, id, new_triggers.as_deref()).await?;
    }
    let updated = Update::new("webhooks")
        .set_some("name", name)
        .patch("description", body.description.map(ShortText::into_inner))
        .patch("max_body_bytes", body.max_body_bytes)
        .patch("max_age_days", max_age_days)
        .patch("max_requests", max_requests)
        .patch("response", body.response.map(sqlx::types::Json))
        .set_some("triggers", new_triggers.as_ref().map(sqlx::types::Json))
        .patch("rules", body.rules.map(sqlx::types::Json))
        .patch("rule_conditions", rule_conditions.map(sqlx::types::Json))
        .patch("cors", body.cors.map(sqlx::types::Json))
        .sql("updated_at", "now()")
        .execute(&mut tx, caller.org_id, id)
        .await?;
    if updated == 0 {
        return Err(ApiError::not_found("webhook"));
    }
    if let Some(triggers) = &new_triggers {
        audit_triggers(&mut tx, &caller, id, triggers).await?;
    }
    if !body.verification.is_keep() {
        let writer =
            verification::Writer { master: &app.settings.master_key, org_id: caller.org_id, actor: &caller.actor };
        verification::store(&mut tx, writer, id, body.verification.value()).await?;
    }
    if !body.handshake.is_keep() {
        let writer =
            verification::Writer { master: &app.settings.master_key, org_id: caller.org_id, actor: &caller.actor };
        // The verification as this change leaves it.
        let verifies = match &body.verification {
            Patch::Keep => handshake::stored_verifies(&mut tx, writer, id).await?,
            Patch::Clear => false,
            Patch::Set(_) => true,
        };
        handshake::check(body.handshake.value(), verifies)?;
        handshake::store(&mut tx, writer, id, body.handshake.value()).await?;
    }
    announce_change(&mut tx, id).await?;
    let row = fetch(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    app.invalidate(Invalidation::Endpoint(id));
    Ok(Json(row.into_api(&app.settings.capture_url)))
}

/// Delete an endpoint and all its captures; its capture URL answers 404 from then on.
#[utoipa::path(delete, path = "/webhooks/{id}", params(Id), responses((status = 204)))]
async fn delete_webhook(
    Ctx { app, caller }: Ctx<scope::WebhooksWrite>,
    Id(id): Id<WebhookId>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    owned::delete(&mut *tx, Owned::Webhook, caller.org_id, id).await?;
    announce_change(&mut tx, id).await?;
    tx.commit().await?;
    app.invalidate(Invalidation::Endpoint(id));
    Ok(StatusCode::NO_CONTENT)
}
