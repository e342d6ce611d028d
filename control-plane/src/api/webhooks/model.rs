//! Rows of the webhook tables and their API shapes: endpoints (and whether one exists, for the nested resources),
//! and the stored count of their captures (the captures' own rows are `capture::row`'s).

use crate::capture::stored_verification::StoredVerification;
use crate::db::owned;
use crate::error::ApiResult;
use chrono::{DateTime, Utc};
use hookflow_shared::api::admin::Retention;
use hookflow_shared::api::triggers::WebhookTrigger;
use hookflow_shared::api::webhooks::{CustomResponse, Webhook};
use hookflow_shared::{OrgId, WebhookId};
use sqlx::PgExecutor;
use sqlx::types::Json;

/// Columns of an endpoint with the organization's defaults applied (`FROM webhooks w JOIN organizations o`).
pub const WEBHOOK_COLUMNS: &str =
    "w.id, w.name, w.description, COALESCE(w.max_body_bytes, o.default_max_body_bytes) AS max_body_bytes,
     COALESCE(w.max_age_days, o.default_max_age_days) AS max_age_days,
     COALESCE(w.max_requests, o.default_max_requests) AS max_requests, w.response, w.verification, w.triggers,
     w.rules, w.cors, w.handshake, w.handshake_secret IS NOT NULL AS handshake_secret_set, w.mock_of,
     (SELECT COALESCE(sum(c.stored), 0)::bigint FROM webhook_counters c WHERE c.webhook_id = w.id) AS request_count,
     (SELECT max(c.last_request_at) FROM webhook_counters c WHERE c.webhook_id = w.id) AS last_request_at,
     w.created_at, w.updated_at";

#[derive(Debug, sqlx::FromRow)]
pub struct WebhookRow {
    pub id: WebhookId,
    pub name: String,
    pub description: Option<String>,
    pub max_body_bytes: i64,
    pub max_age_days: Option<i32>,
    pub max_requests: Option<i64>,
    pub response: Option<Json<CustomResponse>>,
    pub verification: Option<Json<StoredVerification>>,
    pub triggers: Json<Vec<WebhookTrigger>>,
    pub rules: Option<Json<Vec<hookflow_shared::api::answers::ResponseRule>>>,
    pub cors: Option<Json<hookflow_shared::api::answers::Cors>>,
    pub handshake: Option<String>,
    pub handshake_secret_set: bool,
    pub mock_of: Option<hookflow_shared::CollectionId>,
    pub request_count: i64,
    pub last_request_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl WebhookRow {
    pub fn into_api(self, capture_base: &str) -> Webhook {
        Webhook {
            capture_url: format!("{capture_base}/webhook/{}", self.id),
            id: self.id,
            name: self.name,
            description: self.description,
            max_body_bytes: self.max_body_bytes,
            retention: Retention { max_age_days: self.max_age_days, max_requests: self.max_requests },
            response: self.response.map(|r| r.0),
            verification: self.verification.map(|v| v.0.into_verification()),
            triggers: self.triggers.0,
            rules: self.rules.map(|r| r.0),
            cors: self.cors.map(|c| c.0),
            handshake: crate::api::webhooks::handshake::view(self.handshake.as_deref(), self.handshake_secret_set),
            mock_of: self.mock_of,
            request_count: self.request_count,
            last_request_at: self.last_request_at.map(Into::into),
            created_at: self.created_at.into(),
            updated_at: self.updated_at.into(),
        }
    }
}

/// Checks that an endpoint of this organization exists (for the nested resources), in `conn`'s transaction when
/// it is one.
pub async fn ensure_exists<'c>(conn: impl PgExecutor<'c>, org_id: OrgId, id: WebhookId) -> ApiResult<()> {
    let select = "SELECT 1 FROM webhooks WHERE organization_id = $1 AND id = $2";
    owned::fetch::<(i32,), _>(conn, select.into(), org_id, id, "webhook").await.map(drop)
}

/// Subtracts captures deleted outside the writer (by hand or by retention) from an endpoint's count.
pub async fn subtract_stored(
    conn: &mut sqlx::PgConnection,
    webhook_id: WebhookId,
    removed: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO webhook_counters AS c (webhook_id, slot, stored) VALUES ($1, 0, -$2)
         ON CONFLICT (webhook_id, slot) DO UPDATE SET stored = c.stored - $2",
    )
    .bind(webhook_id)
    .bind(removed)
    .execute(conn)
    .await?;
    Ok(())
}
