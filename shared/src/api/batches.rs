//! Data-driven runs (issue #52): a launch with `rows` makes a batch, one execution per row; its summary, and the
//! rerun of its failed rows.

use crate::ids::{BatchId, FlowId};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Rows a launch takes at most.
pub const MAX_ROWS: usize = 10_000;

/// The answer to a launch with `rows`, and to a rerun.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LaunchedBatch {
    pub batch_id: BatchId,
    /// How many executions the batch made (one per row).
    pub executions: u32,
}

/// `GET /batches/{batch_id}`: how the batch's executions stand (`failed` counts `error` too). `finished_at` is set
/// once none is queued or running: the last one's end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Batch {
    pub id: BatchId,
    /// Null for a batch of an inline definition.
    pub flow_id: Option<FlowId>,
    pub total: u32,
    pub queued: u32,
    pub running: u32,
    pub succeeded: u32,
    pub failed: u32,
    pub cancelled: u32,
    /// The batch whose failed rows this one runs again.
    #[serde(default)]
    pub rerun_of: Option<BatchId>,
    pub created_at: Timestamp,
    pub finished_at: Option<Timestamp>,
}

/// Which rows a rerun takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RerunRows {
    /// Rows whose execution ended `failed` or `error`.
    #[default]
    Failed,
}

/// `POST /batches/{batch_id}/rerun`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rerun {
    #[serde(default)]
    pub only: RerunRows,
}

/// The answer to `POST /executions` (issue #52): the execution, or with `rows` the batch.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum InlineLaunched {
    Execution(Box<crate::api::executions::Execution>),
    Batch(LaunchedBatch),
}
