//! Notification channels of an organization: create (a `webhook` channel's signing secret shown once), list,
//! read, change, delete (which takes the channel out of every schedule's `notify.channels`), and a test send
//! (an alert row of type `test`, sent by `alerts`' sender like any alert and not listed in `/alerts`). Every write
//! is audited without the secret.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Ctx;
use crate::api::webhooks::destinations::model::{check_url, new_signing_secret};
use crate::auth::{Actor, scope};
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::{ApiJson, ApiPath};
use crate::outbound;
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::OrgId;
use hookflow_shared::api::Page;
use hookflow_shared::api::alerts::{CHANNELS_MAX, Channel, ChannelKind, CreateChannel, LastDelivery, UpdateChannel};
use sqlx::PgConnection;
use sqlx::types::Json as SqlJson;
use uuid::Uuid;

/// Channel columns; never the sealed secret.
pub const CHANNEL_COLUMNS: &str = "id, name, kind, address, url, last_delivery, created_at";

#[derive(Debug, sqlx::FromRow)]
pub struct ChannelRow {
    pub id: Uuid,
    pub name: String,
    pub kind: String,
    pub address: Option<String>,
    pub url: Option<String>,
    pub last_delivery: Option<SqlJson<LastDelivery>>,
    pub created_at: DateTime<Utc>,
}

impl From<ChannelRow> for Channel {
    fn from(row: ChannelRow) -> Self {
        let kind = match row.kind.as_str() {
            "email" => ChannelKind::Email,
            "slack" => ChannelKind::Slack,
            _ => ChannelKind::Webhook,
        };
        Channel {
            id: row.id,
            name: row.name,
            kind,
            address: row.address,
            url: row.url,
            last_delivery: row.last_delivery.map(|d| d.0),
            created_at: row.created_at.into(),
            signing_secret: None,
        }
    }
}

/// The name a channel's signing secret is sealed under (bound to it).
pub fn secret_name(id: Uuid) -> String {
    format!("channel-signing:{id}")
}

/// A channel of the organization; another organization's is 404.
pub async fn fetch(conn: &mut PgConnection, org_id: OrgId, id: Uuid) -> ApiResult<ChannelRow> {
    let row: Option<ChannelRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {CHANNEL_COLUMNS} FROM notification_channels WHERE organization_id = $1 AND id = $2"
    )))
    .bind(org_id)
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.ok_or_else(|| ApiError::not_found("notification channel"))
}

async fn record(conn: &mut PgConnection, org_id: OrgId, actor: Actor, action: &str, row: &ChannelRow) -> ApiResult<()> {
    let details = serde_json::json!({"name": row.name, "kind": row.kind, "address": row.address, "url": row.url});
    audit::record(conn, AuditEvent { org_id, actor, action, target: row.id.to_string(), details }).await?;
    Ok(())
}

/// Checks that a kind has its target (and only it): `address` for email (with SMTP configured), `url` for the
/// others (a literal private address refused unless the organization may reach private targets).
async fn check_target(
    app: &AppState,
    org_id: OrgId,
    kind: ChannelKind,
    address: Option<&str>,
    url: Option<&str>,
) -> ApiResult<()> {
    match kind {
        ChannelKind::Email => {
            if app.mailer.is_none() {
                return Err(ApiError::invalid(
                    "invalid field `kind`: email channels need the server's SMTP settings (--smtp-url), which are \
                     not configured",
                ));
            }
            if address.is_none() {
                return Err(ApiError::invalid("invalid field `address`: required for an email channel"));
            }
            if url.is_some() {
                return Err(ApiError::invalid("invalid field `url`: an email channel has an address, not a URL"));
            }
        }
        ChannelKind::Slack | ChannelKind::Webhook => {
            let Some(url) = url else {
                return Err(ApiError::invalid(format!(
                    "invalid field `url`: required for a {} channel",
                    kind.as_str()
                )));
            };
            if address.is_some() {
                return Err(ApiError::invalid(format!(
                    "invalid field `address`: a {} channel has a URL, not an address",
                    kind.as_str()
                )));
            }
            let policy = outbound::policy_for(&app.pool, app.settings.allow_private_targets, org_id).await?;
            check_url(url, true, policy)?;
        }
    }
    Ok(())
}

/// **Added.** Create a notification channel. A `webhook` channel's answer (only this one) carries its
/// `signing_secret`.
#[utoipa::path(post, path = "/notification-channels", request_body = CreateChannel,
    responses((status = 201, body = Channel), (status = 400)))]
pub async fn create_channel(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiJson(body): ApiJson<CreateChannel>,
) -> Created<Channel> {
    let address = body.address.as_ref().map(|a| a.as_str().to_owned());
    check_target(&app, caller.org_id, body.kind, address.as_deref(), body.url.as_deref()).await?;
    let id = Uuid::new_v4();
    let secret = (body.kind == ChannelKind::Webhook).then(new_signing_secret);
    let sealed = secret.as_ref().map(|s| app.settings.master_key.seal(caller.org_id, &secret_name(id), s.as_bytes()));
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    sqlx::query("SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE").bind(caller.org_id).execute(&mut *tx).await?;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM notification_channels WHERE organization_id = $1")
        .bind(caller.org_id)
        .fetch_one(&mut *tx)
        .await?;
    if count >= CHANNELS_MAX {
        return Err(ApiError::invalid(format!("an organization has at most {CHANNELS_MAX} notification channels")));
    }
    sqlx::query(
        "INSERT INTO notification_channels (id, organization_id, name, kind, address, url, signing_secret,
             signing_nonce, signing_key_version)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(id)
    .bind(caller.org_id)
    .bind(body.name.as_str())
    .bind(body.kind.as_str())
    .bind(address)
    .bind(&body.url)
    .bind(sealed.as_ref().map(|s| s.ciphertext.as_slice()))
    .bind(sealed.as_ref().map(|s| s.nonce.as_slice()))
    .bind(sealed.as_ref().map(|s| s.key_version))
    .execute(&mut *tx)
    .await?;
    let row = fetch(&mut tx, caller.org_id, id).await?;
    record(&mut tx, caller.org_id, caller.actor, "notification_channel.created", &row).await?;
    tx.commit().await?;
    let mut channel = Channel::from(row);
    channel.signing_secret = secret;
    Ok((StatusCode::CREATED, Json(channel)))
}

/// **Added.** The organization's notification channels, oldest first (at most 100).
#[utoipa::path(get, path = "/notification-channels", responses((status = 200, body = Page<Channel>)))]
pub async fn list_channels(Ctx { app, caller }: Ctx<scope::OrganizationRead>) -> ApiResult<Json<Page<Channel>>> {
    let rows: Vec<ChannelRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {CHANNEL_COLUMNS} FROM notification_channels WHERE organization_id = $1 ORDER BY created_at, id"
    )))
    .bind(caller.org_id)
    .fetch_all(&app.pool)
    .await?;
    Ok(Json(Page { items: rows.into_iter().map(Channel::from).collect(), next_cursor: None }))
}

/// **Added.** One notification channel.
#[utoipa::path(get, path = "/notification-channels/{channel_id}", params(("channel_id" = Uuid, Path)),
    responses((status = 200, body = Channel), (status = 404)))]
pub async fn get_channel(
    Ctx { app, caller }: Ctx<scope::OrganizationRead>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<Channel>> {
    let mut conn = app.pool.acquire().await?;
    Ok(Json(fetch(&mut conn, caller.org_id, id).await?.into()))
}

/// **Added.** Change a channel's name, address (email) or URL (slack, webhook); its kind and secret stay.
#[utoipa::path(patch, path = "/notification-channels/{channel_id}", params(("channel_id" = Uuid, Path)),
    request_body = UpdateChannel, responses((status = 200, body = Channel), (status = 400), (status = 404)))]
pub async fn update_channel(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<UpdateChannel>,
) -> ApiResult<Json<Channel>> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let current = fetch(&mut tx, caller.org_id, id).await?;
    let kind = Channel::from(ChannelRow { last_delivery: None, ..current }).kind;
    let address = body.address.as_ref().map(|a| a.as_str().to_owned());
    if address.is_some() || body.url.is_some() {
        let (a, u) = match kind {
            ChannelKind::Email => (address.as_deref().or(Some("-")), body.url.as_deref()),
            _ => (address.as_deref(), body.url.as_deref().or(Some("http://unchanged.invalid/"))),
        };
        check_target(&app, caller.org_id, kind, a, u).await?;
    }
    sqlx::query(
        "UPDATE notification_channels SET name = coalesce($3, name), address = coalesce($4, address),
             url = coalesce($5, url), updated_at = now()
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(caller.org_id)
    .bind(id)
    .bind(body.name.as_ref().map(|n| n.as_str()))
    .bind(address)
    .bind(&body.url)
    .execute(&mut *tx)
    .await?;
    let row = fetch(&mut tx, caller.org_id, id).await?;
    record(&mut tx, caller.org_id, caller.actor, "notification_channel.updated", &row).await?;
    tx.commit().await?;
    Ok(Json(row.into()))
}

/// **Added.** Delete a channel; schedules that notified it no longer do (it leaves their `notify.channels`).
#[utoipa::path(delete, path = "/notification-channels/{channel_id}", params(("channel_id" = Uuid, Path)),
    responses((status = 204), (status = 404)))]
pub async fn delete_channel(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let row = fetch(&mut tx, caller.org_id, id).await?;
    sqlx::query("DELETE FROM notification_channels WHERE organization_id = $1 AND id = $2")
        .bind(caller.org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE flow_schedules SET notify_channels = array_remove(notify_channels, $2), updated_at = now()
         WHERE organization_id = $1 AND $2 = ANY(notify_channels)",
    )
    .bind(caller.org_id)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    // Rules keep at least one channel: a rule whose only channel this was is deleted with it.
    sqlx::query("DELETE FROM alert_rules WHERE organization_id = $1 AND channels = ARRAY[$2::uuid]")
        .bind(caller.org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE alert_rules SET channels = array_remove(channels, $2) WHERE organization_id = $1 AND $2 = ANY(channels)",
    )
    .bind(caller.org_id)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    record(&mut tx, caller.org_id, caller.actor, "notification_channel.deleted", &row).await?;
    tx.commit().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// **Added.** Send a test alert (`type: "test"`) to the channel; its outcome shows in the channel's
/// `last_delivery`. Not listed in `/alerts`.
#[utoipa::path(post, path = "/notification-channels/{channel_id}/test", params(("channel_id" = Uuid, Path)),
    responses((status = 202, body = hookflow_shared::api::alerts::TestQueued), (status = 404)))]
pub async fn test_channel(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<(StatusCode, Json<hookflow_shared::api::alerts::TestQueued>)> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    fetch(&mut tx, caller.org_id, id).await?;
    let now = Utc::now();
    let message = hookflow_shared::api::alerts::AlertMessage {
        kind: "test".to_owned(),
        organization_id: caller.org_id.into(),
        flow_id: None,
        flow_name: None,
        schedule_id: None,
        execution_id: None,
        execution_url: None,
        failed_runs: None,
        node_id: None,
        error: None,
        at: now.into(),
    };
    let alert_id = Uuid::new_v4();
    insert_alert(&mut tx, alert_id, caller.org_id, &message, &[id], true, serde_json::json!({})).await?;
    tx.commit().await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(hookflow_shared::api::alerts::TestQueued { id: alert_id, status: "queued".to_owned() }),
    ))
}

/// Writes an alert for the sender (`alerts`, which polls for them).
pub async fn insert_alert(
    conn: &mut PgConnection,
    id: Uuid,
    org_id: OrgId,
    message: &hookflow_shared::api::alerts::AlertMessage,
    channels: &[Uuid],
    test: bool,
    context: serde_json::Value,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO alerts (id, organization_id, type, test, channel_ids, payload, context)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(id)
    .bind(org_id)
    .bind(&message.kind)
    .bind(test)
    .bind(channels)
    .bind(SqlJson(message))
    .bind(context)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
