//! Launch bodies, executions and node results (API.md section 3), shared by the server, the engine and the CLI.

use crate::api::catalog::AssertionResult;
use crate::api::runners::Job;
use crate::flow::definition::VersionSelector;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use uuid::Uuid;

/// `queued` or `ephemeral` (the caller runs the execution itself and reports with the job token).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LaunchMode {
    #[default]
    Queued,
    Ephemeral,
}

/// `POST /flows/{id}/launch`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// Key of one of the flow's environments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// A published version number or `"latest"`; absent runs the draft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub version: Option<VersionSelector>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, String>,
    /// Labels a runner must carry to claim the execution.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runner_labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<LaunchMode>,
}

/// `POST /flows/launch`: every flow carrying all of `tags`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LaunchByTag {
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub version: Option<VersionSelector>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runner_labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<LaunchMode>,
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
    pub id: Uuid,
    pub flow_id: Uuid,
    /// The published version run; null when the draft ran.
    pub flow_version: Option<i32>,
    pub draft_revision: i32,
    pub environment: Option<String>,
    /// `queued`, `running`, `succeeded`, `failed`, `cancelled` or `error`.
    pub status: String,
    /// `api`, `cli`, `schedule` or `tag`.
    pub trigger: String,
    pub attempt: i32,
    pub max_attempts: i32,
    pub runner_id: Option<Uuid>,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub duration_ms: Option<i64>,
    pub summary: Summary,
    pub error: Option<String>,
    /// Only in the answer to an ephemeral launch: the claim to execute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<Box<Job>>,
}

/// `POST /flows/launch` answer.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LaunchedExecutions {
    pub executions: Vec<Execution>,
}

/// `passed`, `failed`, `skipped` or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeStatus {
    Passed,
    Failed,
    Skipped,
    Error,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Passed => "passed",
            NodeStatus::Failed => "failed",
            NodeStatus::Skipped => "skipped",
            NodeStatus::Error => "error",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SentRequest {
    pub method: String,
    pub url: String,
    pub headers: BTreeMap<String, String>,
    pub body: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Timings {
    /// Until the response head arrived.
    pub ttfb: f64,
    /// Until the whole body was read.
    pub total: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReceivedResponse {
    pub status: u16,
    /// Repeated headers are joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The body as text, up to 64 KiB.
    pub body: String,
    pub body_size: u64,
    pub truncated: bool,
    pub timings_ms: Timings,
}

/// What one node did (API.md section 3).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NodeResult {
    pub node_id: String,
    #[serde(default)]
    pub attempt: i32,
    pub status: NodeStatus,
    pub started_at: Timestamp,
    pub duration_ms: u64,
    #[serde(default)]
    pub request: Option<SentRequest>,
    #[serde(default)]
    pub response: Option<ReceivedResponse>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub extracted: BTreeMap<String, Value>,
    #[serde(default)]
    pub assertions: Vec<AssertionResult>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub retries: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NodeResultList {
    pub items: Vec<NodeResult>,
}

/// Bodies kept in results are cut at this many bytes.
pub const MAX_RESULT_BODY: usize = 64 * 1024;
