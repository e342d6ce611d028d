//! Rows of the webhook tables and their API shapes: endpoints and captured requests.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use hookflow_shared::api::admin::Retention;
use hookflow_shared::api::signatures::{Signature, SignatureScheme, Verdict, Verification};
use hookflow_shared::api::webhooks::{BodyEncoding, CapturedRequest, CustomResponse, Webhook};
use hookflow_shared::{CaptureId, WebhookId};
use sqlx::types::Json;
use std::collections::BTreeMap;

/// Bodies larger than this are left out of lists, searches and streams (`body_truncated: true`).
pub const INLINE_BODY_LIMIT: i32 = 64 * 1024;

/// Columns of an endpoint with the organization's defaults applied (`FROM webhooks w JOIN organizations o`).
pub const WEBHOOK_COLUMNS: &str =
    "w.id, w.name, w.description, COALESCE(w.max_body_bytes, o.default_max_body_bytes) AS max_body_bytes,
     COALESCE(w.max_age_days, o.default_max_age_days) AS max_age_days,
     COALESCE(w.max_requests, o.default_max_requests) AS max_requests, w.response, w.verification,
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
    pub verification: Option<Json<Verification>>,
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
            verification: self.verification.map(|v| v.0),
            request_count: self.request_count,
            last_request_at: self.last_request_at.map(Into::into),
            created_at: self.created_at.into(),
            updated_at: self.updated_at.into(),
        }
    }
}

/// Capture columns with the body inline only up to `INLINE_BODY_LIMIT`.
pub const CAPTURE_COLUMNS_INLINE: &str = "id, webhook_id, method, path, query_string, query, headers, content_type,
     CASE WHEN body_size <= 65536 THEN body END AS body, body_size, body_sha256, body_utf8, source_ip, received_at,
     signature_verdict, signature_scheme, signature_reason, signature_secret_index";
/// Capture columns with the whole body.
pub const CAPTURE_COLUMNS_FULL: &str = "id, webhook_id, method, path, query_string, query, headers, content_type,
     body, body_size, body_sha256, body_utf8, source_ip, received_at,
     signature_verdict, signature_scheme, signature_reason, signature_secret_index";

#[derive(Debug, sqlx::FromRow)]
pub struct CaptureRow {
    pub id: CaptureId,
    pub webhook_id: WebhookId,
    pub method: String,
    pub path: String,
    pub query_string: String,
    pub query: Json<BTreeMap<String, Vec<String>>>,
    pub headers: Json<Vec<(String, String)>>,
    pub content_type: Option<String>,
    pub body: Option<Vec<u8>>,
    pub body_size: i32,
    pub body_sha256: Vec<u8>,
    pub body_utf8: bool,
    pub source_ip: String,
    pub received_at: DateTime<Utc>,
    pub signature_verdict: String,
    pub signature_scheme: Option<String>,
    pub signature_reason: Option<String>,
    pub signature_secret_index: Option<i16>,
}

impl CaptureRow {
    /// The stored verdict (values the column's check admits; anything else reads `unverified`).
    pub fn signature(&self) -> Signature {
        Signature {
            verdict: Verdict::parse(&self.signature_verdict).unwrap_or(Verdict::Unverified),
            scheme: self.signature_scheme.as_deref().and_then(SignatureScheme::parse),
            reason: self.signature_reason.clone(),
            secret_index: self.signature_secret_index.and_then(|i| u8::try_from(i).ok()),
        }
    }
}

impl From<CaptureRow> for CapturedRequest {
    fn from(row: CaptureRow) -> Self {
        let encoding = if row.body_utf8 { BodyEncoding::Utf8 } else { BodyEncoding::Base64 };
        let truncated = row.body.is_none();
        let signature = row.signature();
        let body = row.body.map(|bytes| encode_body(bytes, encoding));
        CapturedRequest {
            signature,
            id: row.id,
            webhook_id: row.webhook_id,
            method: row.method,
            path: row.path,
            query_string: row.query_string,
            query: row.query.0,
            headers: row.headers.0,
            content_type: row.content_type,
            body,
            body_encoding: encoding,
            body_size: i64::from(row.body_size),
            body_sha256: hex::encode(row.body_sha256),
            source_ip: row.source_ip,
            received_at: row.received_at.into(),
            body_truncated: truncated,
        }
    }
}

/// Text for UTF-8 bodies, base64 for anything else.
pub fn encode_body(bytes: Vec<u8>, encoding: BodyEncoding) -> String {
    match encoding {
        BodyEncoding::Utf8 => String::from_utf8(bytes).unwrap_or_else(|e| STANDARD.encode(e.into_bytes())),
        BodyEncoding::Base64 => STANDARD.encode(bytes),
    }
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
