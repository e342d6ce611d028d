//! One node's result, as a runner reports it and the API shows it.

use crate::api::catalog::AssertionResult;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

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
    pub request: Option<SentRequest>,
    pub response: Option<ReceivedResponse>,
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, serde_json::Value>)]
    pub extracted: BTreeMap<String, Value>,
    #[serde(default)]
    pub assertions: Vec<AssertionResult>,
    pub error: Option<String>,
    #[serde(default)]
    pub retries: u32,
    /// A webhook node's captured request (its body kept up to 64 KiB, with `signature` when the endpoint verifies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::api::webhooks::Capture>)]
    pub capture: Option<Box<crate::api::webhooks::Capture>>,
    /// A `foreach` module node's runs, one per item in item order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<ItemResult>>,
}

/// One item's run of a `foreach` module node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ItemResult {
    pub index: u32,
    pub status: NodeStatus,
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, serde_json::Value>)]
    pub extracted: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
