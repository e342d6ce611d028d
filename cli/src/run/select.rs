//! Which flows a run covers: every `--flow` id, plus every flow carrying all the `--tag`s and none of the
//! `--exclude-tag`s (listed through `POST /flows/search`, which needs `flows:read`). Duplicates run once. Flow
//! files given as paths are targets too (`FileTarget`, read by `crate::code::files`).

use crate::api::Api;
use crate::error::CliError;
use hookflow_shared::FlowId;
use hookflow_shared::api::flows::{Flow, SearchFlows};
use hookflow_shared::api::flows_as_code::InlineEnvironment;
use hookflow_shared::api::page::Page;
use serde_json::value::RawValue;
use std::collections::HashSet;
use std::sync::Arc;

/// One flow to run: a stored flow (its name is known when it was selected by tag), or a flow file's definition.
#[derive(Debug, Clone)]
pub struct Target {
    pub flow_id: Option<FlowId>,
    pub name: Option<String>,
    pub file: Option<Arc<FileTarget>>,
}

/// A flow file to run inline (`POST /executions`).
#[derive(Debug)]
pub struct FileTarget {
    /// The path as the run names it.
    pub path: String,
    /// The definition's text as the file holds it.
    pub definition: Box<RawValue>,
    pub environment: Option<InlineEnvironment>,
    pub git_commit: Option<String>,
    pub git_ref: Option<String>,
}

impl Target {
    pub fn label(&self) -> String {
        match (&self.name, &self.file, self.flow_id) {
            (Some(name), _, _) => name.clone(),
            (None, Some(file), _) => file.path.clone(),
            (None, None, Some(id)) => id.to_string(),
            (None, None, None) => String::new(),
        }
    }
}

/// What to select.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub flow_ids: Vec<FlowId>,
    pub tags: Vec<String>,
    pub exclude_tags: Vec<String>,
}

async fn flows_tagged(api: &Api, tags: &[String]) -> Result<Vec<Flow>, CliError> {
    let mut flows = Vec::new();
    let mut cursor = None;
    loop {
        let search = SearchFlows { tags: tags.to_vec(), limit: Some(100), cursor, ..SearchFlows::default() };
        let page: Page<Flow> = api.client().flows().search(&search).await.map_err(|e| api.error(e))?;
        flows.extend(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(flows),
        }
    }
}

/// The flows to run, `--flow` ones first in the order given, then tagged ones by name.
pub async fn targets(api: &Api, selection: &Selection) -> Result<Vec<Target>, CliError> {
    if selection.flow_ids.is_empty() && selection.tags.is_empty() {
        return Err(CliError::usage(
            "nothing to run: pass flow files or folders, --flow ID or --tag TAG (each may be repeated)",
        ));
    }
    let mut seen = HashSet::new();
    let mut targets: Vec<Target> = selection
        .flow_ids
        .iter()
        .filter(|id| seen.insert(**id))
        .map(|id| Target { flow_id: Some(*id), name: None, file: None })
        .collect();
    if !selection.tags.is_empty() {
        let mut tagged = flows_tagged(api, &selection.tags).await?;
        tagged.retain(|flow| !flow.tags.iter().any(|tag| selection.exclude_tags.contains(tag)));
        tagged.sort_by(|a, b| a.name.cmp(&b.name));
        if tagged.is_empty() && targets.is_empty() {
            let excluded = if selection.exclude_tags.is_empty() {
                String::new()
            } else {
                format!(" and none of {}", selection.exclude_tags.join(", "))
            };
            return Err(CliError::usage(format!(
                "no flow carries all of the tags {}{excluded}: nothing to run",
                selection.tags.join(", ")
            )));
        }
        for flow in tagged {
            if seen.insert(flow.id) {
                targets.push(Target { flow_id: Some(flow.id), name: Some(flow.name), file: None });
            }
        }
    }
    Ok(targets)
}
