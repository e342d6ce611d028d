//! Sending alerts: pending rows are claimed with `FOR UPDATE SKIP LOCKED` and a lease (a crashed sender's alert
//! is taken again after it), each channel is sent to with a few tries, the channel's `last_delivery` records the
//! outcome, and the alert's `outcome` is `sent` when every channel took it. Webhook channels get the alert's JSON
//! signed (Standard Webhooks) and Slack ones `{"text": ...}`, both through `outbound::signed` (the guarded client;
//! a blocked address fails with an error beginning `blocked`); email goes through the mailer.

use crate::alerts::render;
use crate::crypto::Sealed;
use crate::outbound::{self, signed};
use crate::state::AppState;
use hookflow_shared::OrgId;
use hookflow_shared::api::alerts::AlertMessage;
use serde_json::Value;
use sqlx::types::Json;
use std::time::Duration;
use uuid::Uuid;

/// Alerts one claim takes at most.
const CLAIM_BATCH: i64 = 16;
/// Waits before the second and third tries of a channel.
const RETRY_DELAYS: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(4)];
/// One request's timeout.
const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, sqlx::FromRow)]
pub struct Claimed {
    pub id: Uuid,
    organization_id: OrgId,
    channel_ids: Vec<Uuid>,
    payload: Json<AlertMessage>,
    context: Value,
}

#[derive(Debug, sqlx::FromRow)]
struct ChannelTarget {
    id: Uuid,
    kind: String,
    address: Option<String>,
    url: Option<String>,
    signing_secret: Option<Vec<u8>>,
    signing_nonce: Option<Vec<u8>>,
    signing_key_version: Option<i32>,
}

/// Takes pending alerts for this replica for a few minutes.
pub async fn claim(app: &AppState) -> Result<Vec<Claimed>, sqlx::Error> {
    sqlx::query_as(
        "UPDATE alerts SET claimed_until = now() + interval '5 minutes'
         WHERE id IN (SELECT id FROM alerts WHERE outcome IS NULL AND (claimed_until IS NULL OR claimed_until < now())
                      ORDER BY at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING id, organization_id, channel_ids, payload, context",
    )
    .bind(CLAIM_BATCH)
    .fetch_all(&app.pool)
    .await
}

/// Sends a claimed alert to each of its channels and records the outcomes.
pub async fn send(app: &AppState, clients: &signed::Clients, alert: Claimed) -> Result<(), sqlx::Error> {
    let channels: Vec<ChannelTarget> = sqlx::query_as(
        "SELECT id, kind, address, url, signing_secret, signing_nonce, signing_key_version
         FROM notification_channels WHERE organization_id = $1 AND id = ANY($2)",
    )
    .bind(alert.organization_id)
    .bind(&alert.channel_ids)
    .fetch_all(&app.pool)
    .await?;
    // A channel deleted since the alert was made is not sent to, and fails the alert.
    let mut all_ok = channels.len() == alert.channel_ids.len();
    for channel in &channels {
        let mut outcome = Err("not tried".to_owned());
        for attempt in 0..=RETRY_DELAYS.len() {
            if attempt > 0 {
                tokio::time::sleep(RETRY_DELAYS[attempt - 1]).await;
            }
            outcome = send_one(app, clients, &alert, channel).await;
            if outcome.is_ok() {
                break;
            }
        }
        all_ok &= outcome.is_ok();
        let error = outcome.err();
        sqlx::query(
            "UPDATE notification_channels
             SET last_delivery = jsonb_build_object('at', now(), 'ok', $3::text IS NULL, 'error', $3::text)
             WHERE organization_id = $1 AND id = $2",
        )
        .bind(alert.organization_id)
        .bind(channel.id)
        .bind(error)
        .execute(&app.pool)
        .await?;
    }
    sqlx::query("UPDATE alerts SET outcome = $2 WHERE id = $1")
        .bind(alert.id)
        .bind(if all_ok { "sent" } else { "failed" })
        .execute(&app.pool)
        .await?;
    Ok(())
}

/// One try at one channel; the error never carries the URL or a secret.
async fn send_one(
    app: &AppState,
    clients: &signed::Clients,
    alert: &Claimed,
    channel: &ChannelTarget,
) -> Result<(), String> {
    let message = &alert.payload.0;
    if channel.kind == "email" {
        let Some(mailer) = &app.mailer else { return Err("mail is off: the server has no SMTP settings".to_owned()) };
        let (subject, text) = render::mail(message, &alert.context);
        let to = channel.address.as_deref().unwrap_or_default();
        return mailer.deliver(to, &subject, text).await.map_err(|e| e.to_string());
    }
    let url = channel.url.as_deref().unwrap_or_default();
    let url = reqwest::Url::parse(url).map_err(|_| "the channel's URL is not a URL".to_owned())?;
    let (body, secret) = if channel.kind == "webhook" {
        let body = serde_json::to_vec(message).map_err(|_| "the alert cannot be encoded".to_owned())?;
        let secret = match (&channel.signing_secret, &channel.signing_nonce, channel.signing_key_version) {
            (Some(ciphertext), Some(nonce), Some(key_version)) => {
                let sealed = Sealed { ciphertext: ciphertext.clone(), nonce: nonce.clone(), key_version };
                let name = crate::api::alerts::channels::secret_name(channel.id);
                let plain = app
                    .settings
                    .master_key
                    .open(alert.organization_id, &name, &sealed)
                    .map_err(|_| "the signing secret cannot be opened with the server's master keys".to_owned())?;
                let text = String::from_utf8(plain).map_err(|_| "the signing secret is damaged".to_owned())?;
                Some(
                    crate::signature::standard_webhooks_secret(&text)
                        .ok_or_else(|| "the signing secret is damaged".to_owned())?,
                )
            }
            _ => None,
        };
        (body, secret)
    } else {
        (serde_json::to_vec(&render::slack(message, &alert.context)).unwrap_or_default(), None)
    };
    let policy = outbound::policy_for(&app.pool, app.settings.allow_private_targets, alert.organization_id)
        .await
        .map_err(|_| "the organization's network policy could not be read".to_owned())?;
    let headers = [("content-type".to_owned(), "application/json".to_owned())];
    let headers = signed::outgoing_headers(&headers, &format!("msg_{}", alert.id.simple()), secret.as_deref(), &body);
    let attempted = signed::send(&clients.get(policy), policy, "POST", url, &headers, body.into(), TIMEOUT).await;
    if attempted.delivered() { Ok(()) } else { Err(attempted.error.unwrap_or_else(|| "failed".to_owned())) }
}
