//! Destinations (issue #49): where an endpoint's captures are delivered, with retries, dead letters and replay;
//! the deliveries each capture owes and their attempts.

use crate::Timestamp;
use crate::api::fields::{Labels, Name};
use crate::api::patch::Patch;
use crate::api::search::SearchFilter;
use crate::ids::{CaptureId, DeliveryId, DestinationId, RunnerId, WebhookId};
use serde::{Deserialize, Serialize};

/// Destinations one endpoint may have.
pub const DESTINATIONS_MAX: i64 = 10;
/// Longest destination URL, in characters.
pub const URL_MAX: usize = 2_048;
/// Delays after each failed attempt when none are given, in seconds.
pub const DEFAULT_RETRY_SCHEDULE_S: [u32; 8] = [5, 30, 120, 600, 1800, 3600, 7200, 14400];
/// Most entries of a retry schedule.
pub const RETRY_SCHEDULE_MAX: usize = 20;
/// Longest delay of a retry schedule, in seconds.
pub const RETRY_DELAY_MAX: u32 = 86_400;
pub const DEFAULT_TIMEOUT_MS: u32 = 10_000;
pub const TIMEOUT_MS_MIN: u32 = 100;
pub const TIMEOUT_MS_MAX: u32 = 60_000;
pub const RATE_LIMIT_MAX: u32 = 10_000;
pub const DEFAULT_DISABLE_AFTER_FAILING_S: u32 = 432_000;
pub const DISABLE_AFTER_FAILING_MIN: u32 = 60;
/// The one signing scheme: Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
pub const STANDARD_WEBHOOKS: &str = "standard-webhooks";

/// How deliveries are signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum Signing {
    /// Standard Webhooks: HMAC-SHA256 over `<id>.<timestamp>.<body>`, `v1,<base64>`.
    #[serde(rename = "standard-webhooks")]
    StandardWebhooks,
}

/// `POST /webhooks/{webhook_id}/destinations`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDestination {
    #[schema(schema_with = crate::api::rules::name)]
    pub name: Name,
    /// `http` or `https`, at most 2,048 characters; the capture's sub-path and query are appended.
    #[schema(schema_with = crate::api::rules::http_url)]
    pub url: String,
    /// Search terms a capture must match to be delivered (the `q` of a capture search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub q: Option<String>,
    /// A search filter a capture must match to be delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<SearchFilter>,
    /// Deliver through an installed runner carrying all these labels (its network), not from the server.
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    #[schema(schema_with = crate::api::rules::labels)]
    pub runner_labels: Labels,
    /// Delays in seconds after each failed attempt (0 to 20 entries, each 1 to 86400); after the last, `dead`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::retry_schedule)]
    pub retry_schedule_s: Option<Vec<u32>>,
    /// 100 to 60000 (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 100, maximum = 60000)]
    pub timeout_ms: Option<u32>,
    /// At most this many attempts a second, across replicas (1 to 10000; absent: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 10000)]
    pub rate_limit_per_s: Option<u32>,
    /// Disabled once every attempt has failed for this long (seconds, at least 60; default 432000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 60)]
    pub disable_after_failing_s: Option<u32>,
    /// Sign deliveries (`standard-webhooks`) or not (`null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing: Option<Signing>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl CreateDestination {
    /// A destination of `name` delivering every capture to `url`, with the defaults.
    pub fn new(name: Name, url: impl Into<String>) -> Self {
        Self {
            name,
            url: url.into(),
            q: None,
            filter: None,
            runner_labels: Labels::default(),
            retry_schedule_s: None,
            timeout_ms: None,
            rate_limit_per_s: None,
            disable_after_failing_s: None,
            signing: None,
            enabled: None,
        }
    }
}

/// `PATCH /webhooks/{webhook_id}/destinations/{destination_id}`: absent fields stay; `null` clears `q`,
/// `filter`, `rate_limit_per_s` and `signing`. `enabled: true` re-enables and clears `disabled_reason`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateDestination {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_name)]
    pub name: Option<Name>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_http_url)]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<String>, max_length = 2000)]
    pub q: Patch<String>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<SearchFilter>)]
    pub filter: Patch<SearchFilter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_labels)]
    pub runner_labels: Option<Labels>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::retry_schedule)]
    pub retry_schedule_s: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 100, maximum = 60000)]
    pub timeout_ms: Option<u32>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 10000)]
    pub rate_limit_per_s: Patch<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 60)]
    pub disable_after_failing_s: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// A destination. `signing_secret` only in the 201 of a create with `signing`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Destination {
    pub id: DestinationId,
    pub webhook_id: WebhookId,
    pub name: String,
    pub url: String,
    pub q: Option<String>,
    pub filter: Option<SearchFilter>,
    pub runner_labels: Vec<String>,
    pub retry_schedule_s: Vec<u32>,
    pub timeout_ms: u32,
    pub rate_limit_per_s: Option<u32>,
    pub disable_after_failing_s: u32,
    pub signing: Option<Signing>,
    pub enabled: bool,
    /// Why the server disabled it (after failing for `disable_after_failing_s`); `null` when enabled.
    pub disabled_reason: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// `whsec_` + base64 of 24 random bytes: shown once, in the 201 of a create with `signing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    Dead,
    Cancelled,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Dead => "dead",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Dead, Self::Cancelled].into_iter().find(|s| s.as_str() == text)
    }
}

/// One attempt's outcome, in a delivery's `last_attempt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LastAttempt {
    pub at: Timestamp,
    /// The receiver's status; `null` when no answer came (refused, timed out, blocked).
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// One capture's delivery to one destination.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Delivery {
    pub id: DeliveryId,
    pub destination_id: DestinationId,
    /// The capture delivered.
    pub request_id: CaptureId,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub next_attempt_at: Option<Timestamp>,
    pub last_attempt: Option<LastAttempt>,
    pub created_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeliveryAttempt {
    /// 1 for the first.
    pub attempt: u32,
    pub at: Timestamp,
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: u64,
    /// The runner that made it (`runner_labels` destinations); `null` for the server.
    pub runner_id: Option<RunnerId>,
}

/// `GET .../deliveries/{delivery_id}/attempts`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeliveryAttempts {
    pub items: Vec<DeliveryAttempt>,
}

/// `POST .../deliveries/replay`: exactly one of `status` (`dead`), `q` (dead deliveries whose captures match) or
/// `delivery_ids`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayDeliveries {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeliveryStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub q: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 1000)]
    pub delivery_ids: Option<Vec<DeliveryId>>,
}

/// What a replay answers (202).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Replayed {
    pub replayed: u64,
}

/// A capture's delivery, in the capture's `deliveries`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CaptureDelivery {
    pub destination_id: DestinationId,
    pub delivery_id: DeliveryId,
    pub status: DeliveryStatus,
}

/// `POST /runner/deliveries/next`: a runner's long poll for deliveries it may make (its organization's
/// destinations whose `runner_labels` it carries all of).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NextDeliveries {
    pub runner_id: RunnerId,
    /// Seconds to wait for one (0 to 60; default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 60)]
    pub wait_s: Option<u64>,
}

/// One delivery a runner makes: the request exactly as to send (headers signed), within `timeout_ms`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunnerDelivery {
    pub delivery_id: DeliveryId,
    pub method: String,
    pub url: String,
    #[schema(schema_with = crate::api::rules::header_pairs)]
    pub headers: Vec<(String, String)>,
    /// The body, base64.
    pub body: String,
    pub timeout_ms: u32,
    /// This claim's lease: its result must carry it (a result without the current lease is refused, 404).
    pub lease: uuid::Uuid,
}

/// What a runner's poll for deliveries answers (200; 204 when none came within `wait_s`).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunnerDeliveries {
    pub deliveries: Vec<RunnerDelivery>,
}

/// `POST /runner/deliveries/{delivery_id}/result`: what a runner's attempt came to.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliveryResult {
    pub runner_id: RunnerId,
    /// The `lease` the delivery was handed out with.
    pub lease: uuid::Uuid,
    /// The receiver's status; `null` when no answer came.
    #[schema(minimum = 100, maximum = 599)]
    pub status_code: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub error: Option<String>,
    pub duration_ms: u64,
}
