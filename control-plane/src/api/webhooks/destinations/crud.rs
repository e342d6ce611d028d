//! Destinations of an endpoint: create (at most 10 an endpoint; a signing secret shown once), list, read, change
//! (`enabled: true` re-enables and clears `disabled_reason`), delete (with its deliveries). Every write is audited
//! without the secret.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Ctx;
use crate::api::webhooks::destinations::model::{
    self, DESTINATION_COLUMNS, DestinationRow, check_disable_after, check_rate, check_schedule, check_timeout,
    check_url, secret_name,
};
use crate::auth::{Actor, scope};
use crate::db::update::Update;
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiJson, ApiPath, Id};
use crate::outbound;
use axum::Json;
use axum::http::StatusCode;
use hookflow_shared::api::Page;
use hookflow_shared::api::destinations::{
    CreateDestination, DEFAULT_DISABLE_AFTER_FAILING_S, DEFAULT_RETRY_SCHEDULE_S, DEFAULT_TIMEOUT_MS, DESTINATIONS_MAX,
    Destination, Signing, UpdateDestination,
};
use hookflow_shared::{DestinationId, OrgId, WebhookId};
use sqlx::PgConnection;
use uuid::Uuid;

/// Reads a destination of the organization's endpoint; another endpoint's or organization's is 404.
pub async fn fetch(
    conn: &mut PgConnection,
    org_id: OrgId,
    webhook_id: WebhookId,
    id: DestinationId,
) -> ApiResult<DestinationRow> {
    let row: Option<DestinationRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {DESTINATION_COLUMNS} FROM destinations WHERE organization_id = $1 AND webhook_id = $2 AND id = $3"
    )))
    .bind(org_id)
    .bind(webhook_id)
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.ok_or_else(|| ApiError::not_found("destination"))
}

/// Records a destination's change (never its secret).
pub async fn record(
    conn: &mut PgConnection,
    org_id: OrgId,
    actor: Actor,
    action: &str,
    id: DestinationId,
    details: serde_json::Value,
) -> ApiResult<()> {
    let event = AuditEvent { org_id, actor, action, target: id.to_string(), details };
    audit::record(conn, event).await?;
    Ok(())
}

/// What an audit entry says of a destination: where it delivers and how, never the secret.
fn described(row: &DestinationRow) -> serde_json::Value {
    serde_json::json!({"webhook_id": row.webhook_id, "name": row.name, "url": row.url,
        "runner_labels": row.runner_labels, "enabled": row.enabled, "signing": row.signing})
}

/// Create a destination: every capture of the endpoint from now on that matches `q`/`filter` is delivered to
/// `url`. With `signing` the answer (only this one) carries `signing_secret`.
#[utoipa::path(post, path = "/webhooks/{id}/destinations", params(Id), request_body = CreateDestination,
    responses((status = 201, body = Destination)))]
pub async fn create_destination(
    Ctx { app, caller }: Ctx<scope::WebhooksWrite>,
    ApiPath(webhook_id): ApiPath<WebhookId>,
    ApiJson(body): ApiJson<CreateDestination>,
) -> Created<Destination> {
    let policy = outbound::policy_for(&app.pool, app.settings.allow_private_targets, caller.org_id).await?;
    check_url(&body.url, body.runner_labels.is_empty(), policy)?;
    model::check_conditions(&app.pool, body.q.as_deref(), body.filter.as_ref()).await?;
    let schedule = check_schedule(body.retry_schedule_s.as_deref().unwrap_or(&DEFAULT_RETRY_SCHEDULE_S))?;
    let timeout_ms = check_timeout(body.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS))?;
    let rate = body.rate_limit_per_s.map(check_rate).transpose()?;
    let disable_after = check_disable_after(body.disable_after_failing_s.unwrap_or(DEFAULT_DISABLE_AFTER_FAILING_S))?;
    let id = DestinationId::new(Uuid::new_v4());
    let secret = body.signing.map(|_| model::new_signing_secret());
    let sealed = secret.as_ref().map(|s| app.settings.master_key.seal(caller.org_id, &secret_name(id), s.as_bytes()));
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    // The endpoint's row, locked: concurrent creates count each other's destinations.
    let found: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM webhooks WHERE organization_id = $1 AND id = $2 FOR UPDATE")
            .bind(caller.org_id)
            .bind(webhook_id)
            .fetch_optional(&mut *tx)
            .await?;
    if found.is_none() {
        return Err(ApiError::not_found("webhook"));
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM destinations WHERE webhook_id = $1")
        .bind(webhook_id)
        .fetch_one(&mut *tx)
        .await?;
    if count >= DESTINATIONS_MAX {
        return Err(ApiError::invalid(format!("an endpoint has at most {DESTINATIONS_MAX} destinations")));
    }
    sqlx::query(
        "INSERT INTO destinations (id, organization_id, webhook_id, name, url, q, filter, runner_labels,
             retry_schedule_s, timeout_ms, rate_limit_per_s, disable_after_failing_s, signing, signing_secret,
             signing_nonce, signing_key_version, enabled)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
    )
    .bind(id)
    .bind(caller.org_id)
    .bind(webhook_id)
    .bind(body.name.as_str())
    .bind(&body.url)
    .bind(body.q.as_deref())
    .bind(body.filter.as_ref().map(sqlx::types::Json))
    .bind(&*body.runner_labels)
    .bind(&schedule)
    .bind(timeout_ms)
    .bind(rate)
    .bind(disable_after)
    .bind(body.signing.map(|_| "standard-webhooks"))
    .bind(sealed.as_ref().map(|s| s.ciphertext.as_slice()))
    .bind(sealed.as_ref().map(|s| s.nonce.as_slice()))
    .bind(sealed.as_ref().map(|s| s.key_version))
    .bind(body.enabled.unwrap_or(true))
    .execute(&mut *tx)
    .await?;
    let row = fetch(&mut tx, caller.org_id, webhook_id, id).await?;
    record(&mut tx, caller.org_id, caller.actor, "destination.created", id, described(&row)).await?;
    tx.commit().await?;
    let mut destination = Destination::from(row);
    if destination.signing == Some(Signing::StandardWebhooks) {
        destination.signing_secret = secret;
    }
    Ok((StatusCode::CREATED, Json(destination)))
}

/// List an endpoint's destinations, oldest first (at most 10).
#[utoipa::path(get, path = "/webhooks/{id}/destinations", params(Id),
    responses((status = 200, body = Page<Destination>)))]
pub async fn list_destinations(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath(webhook_id): ApiPath<WebhookId>,
) -> ApiResult<Json<Page<Destination>>> {
    crate::api::webhooks::model::ensure_exists(&app.pool, caller.org_id, webhook_id).await?;
    let rows: Vec<DestinationRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {DESTINATION_COLUMNS} FROM destinations WHERE organization_id = $1 AND webhook_id = $2
         ORDER BY created_at, id"
    )))
    .bind(caller.org_id)
    .bind(webhook_id)
    .fetch_all(&app.pool)
    .await?;
    Ok(Json(Page { items: rows.into_iter().map(Destination::from).collect(), next_cursor: None }))
}

/// Read a destination.
#[utoipa::path(get, path = "/webhooks/{id}/destinations/{destination_id}",
    params(Id, ("destination_id" = Uuid, Path)), responses((status = 200, body = Destination)))]
pub async fn get_destination(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath((webhook_id, id)): ApiPath<(WebhookId, DestinationId)>,
) -> ApiResult<Json<Destination>> {
    let mut conn = app.pool.acquire().await?;
    Ok(Json(fetch(&mut conn, caller.org_id, webhook_id, id).await?.into()))
}

/// Change a destination; `enabled: true` re-enables a disabled one (its pending deliveries resume) and clears
/// `disabled_reason`.
#[utoipa::path(patch, path = "/webhooks/{id}/destinations/{destination_id}",
    params(Id, ("destination_id" = Uuid, Path)), request_body = UpdateDestination,
    responses((status = 200, body = Destination)))]
pub async fn update_destination(
    Ctx { app, caller }: Ctx<scope::WebhooksWrite>,
    ApiPath((webhook_id, id)): ApiPath<(WebhookId, DestinationId)>,
    ApiJson(body): ApiJson<UpdateDestination>,
) -> ApiResult<Json<Destination>> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let current = fetch(&mut tx, caller.org_id, webhook_id, id).await?;
    let labels = body.runner_labels.as_ref().map_or(current.runner_labels.clone(), |l| l.to_vec());
    if body.url.is_some() || body.runner_labels.is_some() {
        let policy = outbound::policy_for(&app.pool, app.settings.allow_private_targets, caller.org_id).await?;
        check_url(body.url.as_deref().unwrap_or(&current.url), labels.is_empty(), policy)?;
    }
    if !body.q.is_keep() || !body.filter.is_keep() {
        let q = if body.q.is_keep() { current.q.clone() } else { body.q.value().cloned() };
        let filter =
            if body.filter.is_keep() { current.filter.clone().map(|f| f.0) } else { body.filter.value().cloned() };
        model::check_conditions(&app.pool, q.as_deref(), filter.as_ref()).await?;
    }
    let schedule = body.retry_schedule_s.as_deref().map(check_schedule).transpose()?;
    let timeout = body.timeout_ms.map(check_timeout).transpose()?;
    let rate = body.rate_limit_per_s.as_ref().map(|r| check_rate(*r));
    let rate = match rate {
        hookflow_shared::api::Patch::Set(r) => hookflow_shared::api::Patch::Set(r?),
        hookflow_shared::api::Patch::Clear => hookflow_shared::api::Patch::Clear,
        hookflow_shared::api::Patch::Keep => hookflow_shared::api::Patch::Keep,
    };
    let disable_after = body.disable_after_failing_s.map(check_disable_after).transpose()?;
    let mut update = Update::new("destinations")
        .set_some("name", body.name.as_ref().map(|n| n.as_str().to_owned()))
        .set_some("url", body.url.clone())
        .patch("q", body.q.clone())
        .patch("filter", body.filter.clone().map(sqlx::types::Json))
        .set_some("runner_labels", body.runner_labels.as_ref().map(|l| l.to_vec()))
        .set_some("retry_schedule_s", schedule)
        .set_some("timeout_ms", timeout)
        .patch("rate_limit_per_s", rate)
        .set_some("disable_after_failing_s", disable_after)
        .set_some("enabled", body.enabled)
        .sql("updated_at", "now()");
    if body.enabled == Some(true) {
        update = update.sql("disabled_reason", "NULL").sql("failing_since", "NULL");
    }
    update.execute(&mut tx, caller.org_id, id).await?;
    if body.enabled == Some(true) {
        sqlx::query("SELECT pg_notify('hookflow_deliveries', '')").execute(&mut *tx).await?;
    }
    let row = fetch(&mut tx, caller.org_id, webhook_id, id).await?;
    record(&mut tx, caller.org_id, caller.actor, "destination.updated", id, described(&row)).await?;
    tx.commit().await?;
    Ok(Json(row.into()))
}

/// Delete a destination and its deliveries.
#[utoipa::path(delete, path = "/webhooks/{id}/destinations/{destination_id}",
    params(Id, ("destination_id" = Uuid, Path)), responses((status = 204)))]
pub async fn delete_destination(
    Ctx { app, caller }: Ctx<scope::WebhooksWrite>,
    ApiPath((webhook_id, id)): ApiPath<(WebhookId, DestinationId)>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let row = fetch(&mut tx, caller.org_id, webhook_id, id).await?;
    sqlx::query("DELETE FROM destinations WHERE organization_id = $1 AND id = $2")
        .bind(caller.org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    record(&mut tx, caller.org_id, caller.actor, "destination.deleted", id, described(&row)).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}
