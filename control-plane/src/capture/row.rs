//! A capture as stored in `captures`: its row, the column lists that read it (body inline or whole, with the
//! executions its endpoint's triggers launched), and its API shape (`Capture`), for the live hub and the API's
//! reads alike.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use hookflow_shared::api::destinations::CaptureDelivery;
use hookflow_shared::api::signatures::{Signature, SignatureScheme, Verdict};
use hookflow_shared::api::triggers::CaptureExecution;
use hookflow_shared::api::webhooks::{BodyEncoding, Capture, HandshakePreset};
use hookflow_shared::{CaptureId, ExecutionId, WebhookId};
use sqlx::types::Json;
use std::collections::BTreeMap;

/// The executions a capture's triggers launched, oldest first (a look in a partial index of the triggered ones).
macro_rules! capture_executions {
    () => {
        "COALESCE((SELECT jsonb_agg(jsonb_build_object('flow_id', e.flow_id, 'execution_id', e.id) ORDER BY e.id)
             FROM executions e WHERE e.trigger_request_id = captures.id
                 AND e.organization_id = captures.organization_id), '[]') AS executions"
    };
}

/// The deliveries a capture owes its endpoint's destinations, oldest first (those its match dropped are gone).
macro_rules! capture_deliveries {
    () => {
        "COALESCE((SELECT jsonb_agg(jsonb_build_object('destination_id', d.destination_id, 'delivery_id', d.id,
                                                   'status', d.status) ORDER BY d.created_at, d.id)
             FROM deliveries d WHERE d.capture_id = captures.id AND d.organization_id = captures.organization_id
                 AND d.matched IS DISTINCT FROM false), '[]') AS deliveries"
    };
}

/// Bodies larger than this are left out of lists, searches and streams (`body_truncated: true`).
pub const INLINE_BODY_LIMIT: i32 = 64 * 1024;

/// Capture columns with the body inline only up to `INLINE_BODY_LIMIT` (from `captures`, not aliased).
pub const CAPTURE_COLUMNS_INLINE: &str = concat!(
    "id, webhook_id, execution_id, method, path, query_string, query, headers, content_type,
     CASE WHEN body_size <= 65536 THEN body END AS body, body_size, body_sha256, body_utf8, source_ip, received_at,
     signature_verdict, signature_scheme, signature_reason, signature_secret_index, handshake, ",
    capture_executions!(),
    ", ",
    capture_deliveries!()
);
/// Capture columns with the whole body (from `captures`, not aliased).
pub const CAPTURE_COLUMNS_FULL: &str = concat!(
    "id, webhook_id, execution_id, method, path, query_string, query, headers, content_type,
     body, body_size, body_sha256, body_utf8, source_ip, received_at,
     signature_verdict, signature_scheme, signature_reason, signature_secret_index, handshake, ",
    capture_executions!(),
    ", ",
    capture_deliveries!()
);

#[derive(Debug, sqlx::FromRow)]
pub struct CaptureRow {
    pub id: CaptureId,
    pub webhook_id: Option<WebhookId>,
    pub execution_id: Option<ExecutionId>,
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
    pub handshake: Option<String>,
    pub executions: Json<Vec<CaptureExecution>>,
    pub deliveries: Json<Vec<CaptureDelivery>>,
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

impl From<CaptureRow> for Capture {
    fn from(row: CaptureRow) -> Self {
        let encoding = if row.body_utf8 { BodyEncoding::Utf8 } else { BodyEncoding::Base64 };
        let truncated = row.body.is_none();
        let signature = row.signature();
        let body = row.body.map(|bytes| encode_body(bytes, encoding));
        Capture {
            signature,
            id: row.id,
            webhook_id: row.webhook_id,
            execution_id: row.execution_id,
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
            handshake: row.handshake.as_deref().and_then(HandshakePreset::parse),
            executions: row.executions.0,
            deliveries: row.deliveries.0,
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
