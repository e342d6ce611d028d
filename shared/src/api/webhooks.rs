//! Webhook bodies: endpoints, the capture receipt, captured requests, search, replay.

use crate::Timestamp;
use crate::api::admin::Retention;
use crate::api::answers::{Cors, ResponseRule};
use crate::api::fields::{Name, ShortText};
use crate::api::patch::Patch;
pub use crate::api::search::{FieldMatch, JsonMatch, MatchOp, SearchFilter};
use crate::api::signatures::{Signature, Verification, VerificationSettings};
use crate::api::triggers::{CaptureExecution, Triggers, WebhookTrigger};
use crate::ids::{CaptureId, CollectionId, ExecutionId, WebhookId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A custom answer an endpoint gives senders instead of the JSON receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CustomResponse {
    /// HTTP status, 100 to 599.
    #[schema(schema_with = crate::api::rules::answer_status)]
    pub status: u16,
    /// Headers of the answer: `Content-Type`, `Content-Language`, `Retry-After` and `X-` names of your own.
    #[serde(default)]
    #[schema(schema_with = crate::api::rules::custom_response_headers)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    #[schema(max_length = 65536)]
    pub body: String,
}

/// A provider whose URL check (handshake) a capture URL answers (issue #51).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HandshakePreset {
    Slack,
    Meta,
    Msgraph,
    Zoom,
    Dropbox,
    Twitter,
    Twitch,
    Smartsheet,
    Trello,
}

impl HandshakePreset {
    pub const ALL: [HandshakePreset; 9] = [
        Self::Slack,
        Self::Meta,
        Self::Msgraph,
        Self::Zoom,
        Self::Dropbox,
        Self::Twitter,
        Self::Twitch,
        Self::Smartsheet,
        Self::Trello,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Slack => "slack",
            Self::Meta => "meta",
            Self::Msgraph => "msgraph",
            Self::Zoom => "zoom",
            Self::Dropbox => "dropbox",
            Self::Twitter => "twitter",
            Self::Twitch => "twitch",
            Self::Smartsheet => "smartsheet",
            Self::Trello => "trello",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// Whether its answer needs a secret (its own, or else the endpoint's first verification secret): Zoom's,
    /// X's and Twitch's HMACs, Meta's verify token. Slack's signing secret is optional (when known, the challenge's
    /// signature must verify); the others take none.
    pub fn needs_secret(self) -> bool {
        matches!(self, Self::Zoom | Self::Twitter | Self::Twitch | Self::Meta)
    }

    /// Whether it uses a secret at all.
    pub fn takes_secret(self) -> bool {
        self.needs_secret() || self == Self::Slack
    }
}

/// An endpoint's `handshake` as written: the preset and its secret (write-only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HandshakeSettings {
    pub preset: HandshakePreset,
    /// Zoom's secret token, X's consumer secret, Twitch's subscription secret, Meta's verify token or Slack's
    /// signing secret (1 to 256 printable ASCII characters); never shown again. Absent: the endpoint's first
    /// verification secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub secret: Option<String>,
}

/// An endpoint's `handshake` as read: the preset and whether a secret of its own is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Handshake {
    pub preset: HandshakePreset,
    pub secret_set: bool,
}

/// `POST /webhooks`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhook {
    #[schema(schema_with = crate::api::rules::name)]
    pub name: Name,
    #[schema(schema_with = crate::api::rules::short_text)]
    pub description: Option<ShortText>,
    /// Largest accepted body in bytes (default: the organization's, 1 MiB; at most 32 MiB).
    #[schema(schema_with = crate::api::rules::optional_endpoint_body_limit)]
    pub max_body_bytes: Option<i64>,
    pub retention: Option<Retention>,
    pub response: Option<CustomResponse>,
    /// Verify every capture's signature (docs/signatures.md describes each scheme).
    pub verification: Option<VerificationSettings>,
    /// Answer a provider's URL check (issue #51).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake: Option<HandshakeSettings>,
    /// Flows its captures launch (at most 10); setting any also needs `flows:execute`.
    #[serde(default, skip_serializing_if = "<[WebhookTrigger]>::is_empty")]
    #[schema(value_type = Vec<WebhookTrigger>, max_items = 10)]
    pub triggers: Triggers,
    /// Response rules, tried in order (at most 50); the first match answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 50)]
    pub rules: Option<Vec<ResponseRule>>,
    /// CORS for browser senders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Cors>,
}

impl CreateWebhook {
    /// An endpoint of `name` with the defaults.
    pub fn new(name: Name) -> Self {
        CreateWebhook {
            name,
            description: None,
            max_body_bytes: None,
            retention: None,
            response: None,
            verification: None,
            handshake: None,
            triggers: Triggers::default(),
            rules: None,
            cors: None,
        }
    }
}

/// `PATCH /webhooks/{id}`: absent fields stay; `null` resets a field to its default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateWebhook {
    #[schema(schema_with = crate::api::rules::optional_name)]
    pub name: Option<Name>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(schema_with = crate::api::rules::short_text)]
    pub description: Patch<ShortText>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(schema_with = crate::api::rules::optional_endpoint_body_limit)]
    pub max_body_bytes: Patch<i64>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<Retention>)]
    pub retention: Patch<Retention>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<CustomResponse>)]
    pub response: Patch<CustomResponse>,
    /// New verification settings (secrets included: they replace the stored ones); `null` removes verification.
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<VerificationSettings>)]
    pub verification: Patch<VerificationSettings>,
    /// A new handshake (its secret replaces the stored one); `null` removes it.
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<HandshakeSettings>)]
    pub handshake: Patch<HandshakeSettings>,
    /// New triggers, replacing the stored ones; `null` or `[]` removes them. Setting any also needs
    /// `flows:execute`.
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<Vec<WebhookTrigger>>, max_items = 10)]
    pub triggers: Patch<Triggers>,
    /// New response rules, replacing the stored ones; `null` removes them.
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<Vec<ResponseRule>>, max_items = 50)]
    pub rules: Patch<Vec<ResponseRule>>,
    /// New CORS settings; `null` removes them.
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<Cors>)]
    pub cors: Patch<Cors>,
}

/// A webhook endpoint. `max_body_bytes` and `retention` are the effective values (the organization's defaults
/// where the endpoint sets none).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Webhook {
    pub id: WebhookId,
    pub name: String,
    pub description: Option<String>,
    pub max_body_bytes: i64,
    pub retention: Retention,
    pub response: Option<CustomResponse>,
    /// How captures' signatures are verified (never with the secrets), or `null`.
    pub verification: Option<Verification>,
    /// The provider handshake it answers (never with its secret), or `null`.
    #[serde(default)]
    pub handshake: Option<Handshake>,
    /// Where senders send: `<public base URL>/webhook/<id>` (any sub-path too).
    pub capture_url: String,
    /// Flows its captures launch.
    #[serde(default)]
    pub triggers: Vec<WebhookTrigger>,
    /// Response rules, tried in order, or `null`.
    #[serde(default)]
    pub rules: Option<Vec<ResponseRule>>,
    /// CORS settings, or `null`.
    #[serde(default)]
    pub cors: Option<Cors>,
    /// The collection this endpoint mocks (`POST /collections/{id}/mock`), or `null`: a mock answers 404 to a
    /// request no rule matches.
    #[serde(default)]
    pub mock_of: Option<CollectionId>,
    pub request_count: i64,
    pub last_request_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What the capture URL answers once the request is stored.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CaptureReceipt {
    pub message: String,
    /// The captured request's id.
    pub request_id: CaptureId,
    pub received_at: Timestamp,
}

/// How `body` is written: UTF-8 text as is, anything else in base64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BodyEncoding {
    Utf8,
    Base64,
}

// A capture: one request as an endpoint received it. The OpenAPI document keeps its first name,
// `CapturedRequest`, which generated clients know it by.
/// A captured request.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = CapturedRequest)]
pub struct Capture {
    pub id: CaptureId,
    /// The endpoint that received it; null for a capture sent to an execution's own URL.
    pub webhook_id: Option<WebhookId>,
    /// The execution whose own URL (`{{execution.capture_url}}`) received it; null for an endpoint's capture.
    pub execution_id: Option<ExecutionId>,
    pub method: String,
    /// The part after `/webhook/{id}`: empty or starting with `/`.
    pub path: String,
    pub query_string: String,
    pub query: BTreeMap<String, Vec<String>>,
    #[schema(schema_with = crate::api::rules::header_pairs)]
    pub headers: Vec<(String, String)>,
    pub content_type: Option<String>,
    /// The body, absent when `body_truncated` (fetch `.../body` for the bytes).
    pub body: Option<String>,
    pub body_encoding: BodyEncoding,
    pub body_size: i64,
    /// Hex SHA-256 of the raw body.
    pub body_sha256: String,
    pub source_ip: String,
    pub received_at: Timestamp,
    /// Whether the sender proved who it is (`unverified` when the endpoint verifies nothing).
    pub signature: Signature,
    /// The handshake preset that recognised it (answered or refused 403), or `null`.
    #[serde(default)]
    pub handshake: Option<HandshakePreset>,
    /// Present and true when the body was left out for size (lists and streams carry bodies up to 64 KiB).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body_truncated: bool,
    /// The executions the endpoint's triggers launched for it (empty when none did, or not yet: a launch follows
    /// its capture, so the live stream always shows it empty).
    #[serde(default)]
    pub executions: Vec<CaptureExecution>,
    /// The deliveries it owes its endpoint's destinations (issue #49): which destination, which delivery, its
    /// status.
    #[serde(default)]
    pub deliveries: Vec<crate::api::destinations::CaptureDelivery>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortField {
    #[default]
    ReceivedAt,
    BodySize,
    Method,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SortOrder {
    Asc,
    #[default]
    Desc,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchSort {
    #[serde(default)]
    pub field: SortField,
    #[serde(default)]
    pub order: SortOrder,
}

/// `POST /webhooks/{id}/requests/search`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequests {
    /// AND-ed `field:value` terms over method, path, header.<name>, query.<name>, body, content_type, ip,
    /// signature (a verdict: `signature:invalid`), handshake (a preset: `handshake:slack`);
    /// `-` negates a term, quotes allow spaces: `method:POST header.x-github-event:push -body:"dry run"`.
    pub q: Option<String>,
    #[serde(default)]
    pub filter: SearchFilter,
    #[serde(default)]
    pub sort: SearchSort,
    #[schema(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

/// `POST /webhooks/{id}/requests/{request_id}/replay`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// Base URL to resend to; the captured path and query are appended.
    pub target_url: String,
}

/// The target's answer to a replay.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplayResult {
    pub status: u16,
    #[schema(schema_with = crate::api::rules::header_pairs)]
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub body_encoding: BodyEncoding,
    pub duration_ms: u64,
}
