//! Which flows a run covers: every `--flow` id, plus every flow carrying all the `--tag`s and none of the
//! `--exclude-tag`s (listed through `POST /flows/search`, which needs `flows:read`). Duplicates run once.

use crate::api::Api;
use crate::error::CliError;
use hookflow_shared::FlowId;
use hookflow_shared::api::flows::{Flow, SearchFlows};
use hookflow_shared::api::page::Page;
use std::collections::HashSet;

/// One flow to run; its name is known when it was selected by tag.
#[derive(Debug, Clone)]
pub struct Target {
    pub flow_id: FlowId,
    pub name: Option<String>,
}

impl Target {
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.flow_id.to_string())
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
        return Err(CliError::usage("nothing to run: pass --flow ID or --tag TAG (each may be repeated)"));
    }
    let mut seen = HashSet::new();
    let mut targets: Vec<Target> = selection
        .flow_ids
        .iter()
        .filter(|id| seen.insert(**id))
        .map(|id| Target { flow_id: *id, name: None })
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
                targets.push(Target { flow_id: flow.id, name: Some(flow.name) });
            }
        }
    }
    Ok(targets)
}
