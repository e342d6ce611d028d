//! Flows as code: flow files (`files`), making the organization's flows match a folder of them (`apply`, with a
//! plan and a unified diff of each changed definition) and writing every keyed flow to a folder (`export`).

pub mod apply;
pub mod export;
pub mod files;

use crate::api::Api;
use crate::error::CliError;
use hookflow_shared::api::flows::Flow;

/// Every flow of the organization.
pub async fn all_flows(api: &Api) -> Result<Vec<Flow>, CliError> {
    api.list_all("/flows", &[]).await
}

/// A definition as `--plan` diffs it and `export` writes it: two-space-indented JSON.
pub fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}
