//! Launch bodies, executions and node results (API.md section 3), shared by the server, the engine and the CLI.

use crate::api::fields::{Labels, Tags};
use crate::api::runners::{FinalStatus, Job};
use crate::api::triggers::TriggerRequest;
use crate::flow::definition::VersionSelector;
use crate::ids::{BatchId, ExecutionId, FlowId, RunnerId, ScheduleId};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `queued` or `ephemeral` (the caller runs the execution itself and reports with the job token).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LaunchMode {
    #[default]
    Queued,
    Ephemeral,
}

/// Declares a launch body: its own fields, then the options every launch takes, refusing unknown fields (which
/// rules out a flattened common part).
macro_rules! launch_body {
    ($(#[$doc:meta])* pub struct $name:ident { $($(#[$meta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($(#[$meta])* pub $field: $ty,)*
            /// Key of one of the flow's environments.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub environment: Option<String>,
            /// A published version number or `"latest"`; absent runs the draft.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schema(schema_with = crate::api::rules::version_selector)]
            pub version: Option<VersionSelector>,
            #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
            pub variables: BTreeMap<String, String>,
            /// Labels a runner must carry to claim the execution.
            #[serde(default, skip_serializing_if = "Labels::is_empty")]
            #[schema(schema_with = crate::api::rules::labels)]
            pub runner_labels: Labels,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub mode: Option<LaunchMode>,
            /// 1 (highest) to 5 (lowest); absent: 3. Claims take higher priority first, then the oldest.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub priority: Option<crate::api::fields::Priority>,
        }
    };
}

launch_body! {
    /// `POST /flows/{id}/launch`.
    pub struct Launch {
        /// Data-driven run: one execution per row, each row's values launch variables over `variables` (at most
        /// 10,000 rows); the answer is then a `LaunchedBatch`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub rows: Option<Vec<BTreeMap<String, String>>>,
    }
}

launch_body! {
    /// `POST /flows/launch`: every flow carrying all of `tags`.
    pub struct LaunchByTag {
        #[schema(schema_with = crate::api::rules::launch_tags)]
        pub tags: Tags,
    }
}

/// Where an execution is in its life: `queued` -> `running` -> one of the four final states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Error,
}

impl ExecutionStatus {
    pub const ALL: [ExecutionStatus; 6] = [
        ExecutionStatus::Queued,
        ExecutionStatus::Running,
        ExecutionStatus::Succeeded,
        ExecutionStatus::Failed,
        ExecutionStatus::Cancelled,
        ExecutionStatus::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionStatus::Queued => "queued",
            ExecutionStatus::Running => "running",
            ExecutionStatus::Succeeded => "succeeded",
            ExecutionStatus::Failed => "failed",
            ExecutionStatus::Cancelled => "cancelled",
            ExecutionStatus::Error => "error",
        }
    }

    /// Whether the execution has ended.
    pub fn is_final(self) -> bool {
        !matches!(self, ExecutionStatus::Queued | ExecutionStatus::Running)
    }
}

impl std::fmt::Display for ExecutionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ExecutionStatus {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL.into_iter().find(|s| s.as_str() == text).ok_or_else(|| format!("unknown execution status `{text}`"))
    }
}

impl From<FinalStatus> for ExecutionStatus {
    fn from(status: FinalStatus) -> Self {
        match status {
            FinalStatus::Succeeded => ExecutionStatus::Succeeded,
            FinalStatus::Failed => ExecutionStatus::Failed,
            FinalStatus::Cancelled => ExecutionStatus::Cancelled,
            FinalStatus::Error => ExecutionStatus::Error,
        }
    }
}

/// What launched an execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    Api,
    Cli,
    Schedule,
    Tag,
    /// A capture matched one of its endpoint's `triggers`.
    Webhook,
}

impl Trigger {
    pub const ALL: [Trigger; 5] = [Trigger::Api, Trigger::Cli, Trigger::Schedule, Trigger::Tag, Trigger::Webhook];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Api => "api",
            Trigger::Cli => "cli",
            Trigger::Schedule => "schedule",
            Trigger::Tag => "tag",
            Trigger::Webhook => "webhook",
        }
    }
}

impl std::str::FromStr for Trigger {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL.into_iter().find(|t| t.as_str() == text).ok_or_else(|| format!("unknown trigger `{text}`"))
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Summary {
    pub nodes_total: u32,
    pub passed: u32,
    pub failed: u32,
    pub skipped: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Execution {
    pub id: ExecutionId,
    /// **Changed:** null for an inline definition's execution (`POST /executions`).
    pub flow_id: Option<FlowId>,
    /// The published version run; null when the draft ran.
    pub flow_version: Option<i32>,
    pub draft_revision: i32,
    pub environment: Option<String>,
    pub status: ExecutionStatus,
    pub trigger: Trigger,
    /// The capture that launched it (`trigger: webhook`); null for other triggers.
    #[serde(default)]
    pub trigger_request: Option<TriggerRequest>,
    /// The schedule that launched it (`trigger: schedule`); null for other triggers and the legacy schedule of a
    /// flow written before schedules were a resource.
    #[serde(default)]
    pub schedule_id: Option<ScheduleId>,
    pub attempt: i32,
    pub max_attempts: i32,
    pub runner_id: Option<RunnerId>,
    /// 1 (highest) to 5 (lowest), as launched (issue #53).
    #[serde(default = "default_priority")]
    pub priority: i32,
    /// Why it waits, in words a person acts on, while `queued` (null otherwise); computed when read (issue #53).
    #[serde(default)]
    pub waiting_reason: Option<String>,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub duration_ms: Option<i64>,
    pub summary: Summary,
    pub error: Option<String>,
    /// The batch of a data-driven launch the execution runs a row of; null outside a batch.
    #[serde(default)]
    pub batch_id: Option<BatchId>,
    /// The row's index in its data (from 0); null outside a batch.
    #[serde(default)]
    pub iteration: Option<i32>,
    /// **Added:** where the definition came from (a stored flow, or an inline definition with its file).
    #[serde(default)]
    pub source: crate::api::sources::ExecutionSource,
    /// Only in the answer to an ephemeral launch: the claim to execute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<Box<Job>>,
}

fn default_priority() -> i32 {
    3
}

/// `POST /flows/launch` answer.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LaunchedExecutions {
    pub executions: Vec<Execution>,
}

pub use crate::api::node_results::{NodeResult, NodeStatus, ReceivedResponse, SentRequest, Timings};

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NodeResultList {
    pub items: Vec<NodeResult>,
}

/// An event of an execution's stream (API.md section 4), told apart by its `type`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ExecutionEvent {
    #[serde(rename = "execution.status")]
    Status {
        status: ExecutionStatus,
        attempt: i32,
        runner_id: Option<RunnerId>,
        /// A cancel was asked for while the execution runs.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cancel_requested: bool,
        /// Why the execution went back to the queue (`lease_expired`, `runner_removed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    #[serde(rename = "node.started")]
    NodeStarted { node_id: String, attempt: i32 },
    #[serde(rename = "node.completed")]
    NodeCompleted(Box<NodeResult>),
    #[serde(rename = "execution.completed")]
    Completed {
        status: ExecutionStatus,
        summary: Summary,
        error: Option<String>,
        attempt: i32,
        duration_ms: Option<i64>,
    },
}

/// Bodies kept in results are cut at this many bytes.
pub const MAX_RESULT_BODY: usize = 64 * 1024;
