//! Schedule bodies (issue #50): a flow's schedules with their zone, launch options, overlap policy, catch-up window,
//! pause and notification settings, and the preview of fire times.

use crate::api::fields::{Labels, Priority};
use crate::api::patch::Patch;
use crate::flow::definition::VersionSelector;
use crate::ids::{FlowId, ScheduleId};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// At most this many schedules per flow.
pub const MAX_PER_FLOW: usize = 10;
/// At most this many channels notified per schedule.
pub const MAX_CHANNELS: usize = 20;
/// The longest catch-up window, in seconds.
pub const MAX_CATCH_UP_S: u32 = 86_400;
/// At most this many fire times in one preview.
pub const MAX_PREVIEW: u32 = 100;
/// At most this many upcoming fire times in a schedule's `next_occurrences`.
pub const NEXT_OCCURRENCES: usize = 5;

/// What an occurrence does when the schedule's previous execution is still queued or running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Overlap {
    /// Launch nothing (audited as `schedule.skipped`).
    #[default]
    Skip,
    /// Launch anyway.
    Allow,
}

impl Overlap {
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Allow => "allow",
        }
    }
}

/// A schedule's state from its runs: `unknown` until the first ends (it counts as passing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleState {
    Passing,
    Failing,
    Unknown,
}

/// Whom to tell when the schedule's state changes; the channels are ids of the organization's notification
/// channels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteNotify {
    /// At most 20 channel ids.
    #[serde(default)]
    pub channels: Vec<Uuid>,
    /// Consecutive failed runs before the schedule is failing: 1 (default) to 100.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub after_failures: Option<u32>,
    /// Whether a recovery is told (default true).
    #[serde(default)]
    pub on_recovery: Option<bool>,
}

/// A schedule's notification settings as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Notify {
    pub channels: Vec<Uuid>,
    pub after_failures: u32,
    pub on_recovery: bool,
}

/// `POST /flows/{flow_id}/schedules`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteSchedule {
    /// A cron expression: 5 fields, or 6 with seconds first.
    pub cron: String,
    /// An IANA time zone name; default `UTC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// Key of one of the flow's environments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// A published version number or `"latest"`; absent runs the draft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::version_selector)]
    pub version: Option<VersionSelector>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, String>,
    /// Labels a runner must carry to claim the schedule's executions.
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    #[schema(schema_with = crate::api::rules::labels)]
    pub runner_labels: Labels,
    /// Priority of the schedule's executions (issue #53): 1 (highest) to 5 (lowest); absent: 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<Overlap>,
    /// 0 (default) to 86400: after downtime, an occurrence missed less than this long ago launches once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 86400)]
    pub catch_up_s: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<WriteNotify>,
}

impl WriteSchedule {
    /// A schedule of `cron` in `timezone` with every other field at its default.
    pub fn new(cron: &str, timezone: &str) -> Self {
        WriteSchedule { cron: cron.to_owned(), timezone: Some(timezone.to_owned()), ..Default::default() }
    }
}

/// `PATCH /flows/{flow_id}/schedules/{schedule_id}`: absent fields stay; `null` clears `environment` and `version`
/// (the draft).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchSchedule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(value_type = Option<String>)]
    pub environment: Patch<String>,
    #[serde(default, skip_serializing_if = "Patch::is_keep")]
    #[schema(schema_with = crate::api::rules::version_selector)]
    pub version: Patch<VersionSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::optional_labels)]
    pub runner_labels: Option<Labels>,
    /// 1 (highest) to 5 (lowest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<Overlap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 86400)]
    pub catch_up_s: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<WriteNotify>,
}

/// A schedule of a flow.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Schedule {
    pub id: ScheduleId,
    pub flow_id: FlowId,
    pub cron: String,
    pub timezone: String,
    pub environment: Option<String>,
    /// null: the draft.
    #[schema(schema_with = crate::api::rules::version_selector)]
    pub version: Option<VersionSelector>,
    pub variables: BTreeMap<String, String>,
    pub runner_labels: Vec<String>,
    /// Priority of the schedule's executions: 1 (highest) to 5 (lowest).
    #[schema(minimum = 1, maximum = 5)]
    pub priority: i32,
    pub overlap: Overlap,
    pub catch_up_s: u32,
    pub paused: bool,
    pub notify: Notify,
    /// Up to 5 coming fire times, RFC 3339 with the zone's offset at each; empty when paused.
    pub next_occurrences: Vec<String>,
    pub state: ScheduleState,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ScheduleList {
    pub items: Vec<Schedule>,
}

/// `POST /schedules/preview`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewSchedule {
    pub cron: String,
    /// An IANA time zone name.
    pub timezone: String,
    /// Fire times strictly after this instant (RFC 3339).
    pub from: String,
    /// 1 to 100.
    #[schema(minimum = 1, maximum = 100)]
    pub count: u32,
}

/// The answer to a preview: exactly `count` fire times, RFC 3339 with the zone's offset at each.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SchedulePreview {
    pub occurrences: Vec<String>,
}
