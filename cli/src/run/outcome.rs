//! What one flow's run came to, as the summary, the reports and the exit code see it.

use hookflow_shared::api::executions::{ExecutionStatus, NodeResult, NodeStatus, Summary};
use hookflow_shared::{BatchId, ExecutionId, FlowId};
use serde::Serialize;

/// How a flow's run ended, from the CLI's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Succeeded,
    Failed,
    Cancelled,
    Error,
    /// `--timeout` ran out before it finished; it was cancelled.
    TimedOut,
    /// Never launched: the run stopped first (`--fail-fast`, `--timeout`, interrupt).
    NotRun,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Error => "error",
            RunStatus::TimedOut => "timed_out",
            RunStatus::NotRun => "not_run",
        }
    }

    /// How an execution's final status reads here.
    pub fn from_execution(status: ExecutionStatus) -> Self {
        match status {
            ExecutionStatus::Succeeded => RunStatus::Succeeded,
            ExecutionStatus::Failed => RunStatus::Failed,
            ExecutionStatus::Cancelled => RunStatus::Cancelled,
            ExecutionStatus::Error | ExecutionStatus::Queued | ExecutionStatus::Running => RunStatus::Error,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowRun {
    /// Null for a flow file's run.
    pub flow_id: Option<FlowId>,
    /// The flow file run (null for a stored flow's run).
    pub path: Option<String>,
    pub name: String,
    pub execution_id: Option<ExecutionId>,
    pub status: RunStatus,
    pub error: Option<String>,
    /// RFC 3339, when the launch was answered.
    pub started_at: Option<String>,
    pub duration_ms: u64,
    pub summary: Summary,
    /// The node results of the final attempt, in the order they finished.
    pub nodes: Vec<NodeResult>,
    /// With `--data`: the batch the rows ran in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<BatchId>,
    /// With `--data`: each row's execution, in row order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<RowRun>,
}

/// How one row of a data-driven run ended.
#[derive(Debug, Clone, Serialize)]
pub struct RowRun {
    pub iteration: u32,
    /// The name column's value, else `row <iteration>`.
    pub name: String,
    pub execution_id: Option<ExecutionId>,
    pub status: RunStatus,
    pub error: Option<String>,
    pub duration_ms: u64,
    pub summary: Summary,
}

impl FlowRun {
    pub fn passed(&self) -> bool {
        self.status == RunStatus::Succeeded
    }

    /// A run that was never launched.
    pub fn not_run(flow_id: Option<FlowId>, path: Option<String>, name: String) -> Self {
        Self {
            flow_id,
            path,
            name,
            execution_id: None,
            status: RunStatus::NotRun,
            error: Some("not launched: the run stopped first".to_owned()),
            started_at: None,
            duration_ms: 0,
            summary: Summary::default(),
            nodes: Vec::new(),
            batch_id: None,
            rows: Vec::new(),
        }
    }
}

/// Counts node results.
pub fn summarize(nodes: &[NodeResult]) -> Summary {
    let count = |status| u32::try_from(nodes.iter().filter(|n| n.status == status).count()).unwrap_or(u32::MAX);
    Summary {
        nodes_total: u32::try_from(nodes.len()).unwrap_or(u32::MAX),
        passed: count(NodeStatus::Passed),
        failed: count(NodeStatus::Failed) + count(NodeStatus::Error),
        skipped: count(NodeStatus::Skipped),
    }
}

/// One line on why a node did not pass: its first failed assertion, else its error.
pub fn node_failure(node: &NodeResult) -> Option<String> {
    let Some(failed) = node.assertions.iter().find(|a| !a.passed) else { return node.error.clone() };
    let show = |v: &Option<serde_json::Value>| v.as_ref().map_or_else(|| "nothing".to_owned(), ToString::to_string);
    let mut text = format!("assertion `{} {}", failed.source, failed.operator.name());
    if failed.expected.is_some() {
        text.push(' ');
        text.push_str(&show(&failed.expected));
    }
    text.push_str(&format!("` failed: got {}", show(&failed.actual)));
    if let Some(reason) = &failed.reason {
        text.push_str(&format!(" ({reason})"));
    }
    Some(text)
}
