//! Monitors (issue #50), alerts: notification channels of an organization (email, Slack, signed webhook), the
//! alerts sent to them.

use crate::Timestamp;
use crate::api::fields::{Email, Labels, Name};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Channels one organization may have.
pub const CHANNELS_MAX: i64 = 100;

/// Where a channel sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    /// A mail to `address`, through the server's SMTP settings.
    Email,
    /// A Slack incoming webhook at `url` (`{"text": ...}`).
    Slack,
    /// The alert's JSON posted to `url`, signed the Standard Webhooks way.
    Webhook,
}

impl ChannelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Email => "email",
            ChannelKind::Slack => "slack",
            ChannelKind::Webhook => "webhook",
        }
    }
}

/// `POST /notification-channels`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateChannel {
    #[schema(schema_with = crate::api::rules::name)]
    pub name: Name,
    pub kind: ChannelKind,
    /// The recipient (`email` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_email)]
    pub address: Option<Email>,
    /// `http` or `https`, at most 2,048 characters (`slack` and `webhook` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_http_url)]
    pub url: Option<String>,
}

/// `PATCH /notification-channels/{channel_id}`: absent fields are kept; the kind never changes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateChannel {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_name)]
    pub name: Option<Name>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_email)]
    pub address: Option<Email>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_http_url)]
    pub url: Option<String>,
}

/// The outcome of a channel's newest send; `error` is null when `ok`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LastDelivery {
    pub at: Timestamp,
    pub ok: bool,
    pub error: Option<String>,
}

/// A notification channel. `signing_secret` only in the 201 of a `webhook` channel's create.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Channel {
    pub id: Uuid,
    pub name: String,
    pub kind: ChannelKind,
    pub address: Option<String>,
    pub url: Option<String>,
    pub last_delivery: Option<LastDelivery>,
    pub created_at: Timestamp,
    /// `whsec_` + base64 of 24 random bytes: shown once, in the 201 of a `webhook` channel's create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
}

/// Whether every channel took an alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AlertOutcome {
    Sent,
    Failed,
}

/// An alert sent (`GET /alerts`); `outcome` is null while it is being sent.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AlertRecord {
    pub id: Uuid,
    /// `flow.failing`, `flow.recovered`, `schedule.unclaimed`, `schedule.claimed`, `runners.offline`,
    /// `runners.online`.
    #[serde(rename = "type")]
    pub kind: String,
    pub at: Timestamp,
    pub channel_ids: Vec<Uuid>,
    pub outcome: Option<AlertOutcome>,
}

/// The alert itself: the `webhook` channel's body, and what the Slack and email texts say. Fields that do not
/// apply are null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AlertMessage {
    #[serde(rename = "type")]
    pub kind: String,
    pub organization_id: Uuid,
    pub flow_id: Option<Uuid>,
    pub flow_name: Option<String>,
    pub schedule_id: Option<Uuid>,
    pub execution_id: Option<Uuid>,
    pub execution_url: Option<String>,
    pub failed_runs: Option<u32>,
    pub node_id: Option<String>,
    pub error: Option<String>,
    pub at: Timestamp,
}

/// What an alert rule watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// A schedule's newest run still queued `after_s` after its launch (no runner with its labels took it).
    ScheduleUnclaimed,
    /// No runner carrying all of `runner_labels` online for `after_s`.
    RunnersOffline,
}

impl RuleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::ScheduleUnclaimed => "schedule_unclaimed",
            RuleKind::RunnersOffline => "runners_offline",
        }
    }
}

/// `after_s` when absent, and its bounds.
pub const RULE_AFTER_S_DEFAULT: u32 = 120;
pub const RULE_AFTER_S_MIN: u32 = 30;
pub const RULE_AFTER_S_MAX: u32 = 86_400;
/// Alert rules one organization may have.
pub const RULES_MAX: i64 = 100;

/// `POST /alert-rules`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAlertRule {
    pub kind: RuleKind,
    /// The schedule watched (`schedule_unclaimed` only, required for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_id: Option<Uuid>,
    /// The labels watched (`runners_offline` only, required for it).
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    #[schema(schema_with = crate::api::rules::labels)]
    pub runner_labels: Labels,
    /// 30 to 86400 (default 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 30, maximum = 86400)]
    pub after_s: Option<u32>,
    /// Channels of the organization to notify (1 to 20).
    pub channels: Vec<Uuid>,
}

/// An alert rule; `state` is `ok` or `alerting`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AlertRule {
    pub id: Uuid,
    pub kind: RuleKind,
    pub schedule_id: Option<Uuid>,
    pub runner_labels: Vec<String>,
    pub after_s: u32,
    pub channels: Vec<Uuid>,
    pub state: String,
    pub created_at: Timestamp,
}

/// `POST /notification-channels/{channel_id}/test`: the test alert queued for the channel.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TestQueued {
    /// The test alert's id (not listed in `/alerts`).
    pub id: Uuid,
    /// Always `queued`; the outcome shows in the channel's `last_delivery`.
    pub status: String,
}
