//! `hookflow apply DIR [--plan] [--prune]`: makes the organization's flows match a folder of flow files, by each
//! file's `key`. Every file must name a key (a flow object's `key`, a document's `flow.key`), and no two the same.
//! A key naming a flow made by hand (not `managed`) is a conflict: the folder is refused, nothing written. Flows
//! are compared field by field (name, description, tags, the definition as JSON with its key order and numbers by
//! value, so a file's `1.0` is the `1` the server answers), and only
//! what differs is written: a new flow (`managed`), a `PATCH` of the fields that changed, or (with `--prune`) the
//! deletion of a managed flow whose file is gone. `--plan` prints the same list (a changed definition as a unified
//! diff of its two-space-indented JSON) and writes nothing.

use crate::api::Api;
use crate::code::files::{self, FlowFile, Shape};
use crate::code::{all_flows, pretty};
use crate::error::CliError;
use clap::Args;
use hookflow_shared::api::flows::Flow;
use hookflow_shared::api::flows_as_code::is_flow_key;
use reqwest::Method;
use serde_json::{Map, Number, Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The folder of flow files (`.json`, subfolders included).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Print what would be added, changed (with a diff) and removed; write nothing.
    #[arg(long)]
    pub plan: bool,
    /// Delete managed flows whose key no file has any more (flows made by hand are never deleted).
    #[arg(long)]
    pub prune: bool,
}

/// What a file asks its flow to be.
#[derive(Debug)]
struct Wanted {
    key: String,
    path: PathBuf,
    name: String,
    description: Option<String>,
    tags: Vec<String>,
    definition: Value,
}

/// One step of the plan.
#[derive(Debug)]
enum Step {
    Add(Wanted),
    /// The flow, what the file wants, and the body of the `PATCH` (the fields that differ).
    Change(Flow, Wanted, Map<String, Value>),
    Remove(Flow),
}

fn wanted(file: FlowFile) -> Result<Wanted, CliError> {
    let shown = file.path.display();
    if file.shape == Shape::Bare {
        return Err(CliError::usage(format!(
            "{shown} has no key: apply reads flow objects (`key` at the top) and exported documents (`flow.key`)"
        )));
    }
    let Some(key) = file.key else {
        return Err(CliError::usage(format!("{shown} has no key: every file apply reads must name its flow's key")));
    };
    if !is_flow_key(&key) {
        return Err(CliError::usage(format!(
            "{shown}: the key `{key}` must be 1 to 64 of a-z, 0-9, `_` and `-`, starting with a letter or a digit"
        )));
    }
    let definition: Value = serde_json::from_str(file.definition.get())
        .map_err(|e| CliError::usage(format!("{shown}: the definition is not JSON: {e}")))?;
    let mut tags: Vec<String> = Vec::new();
    for tag in file.tags.iter().map(|t| t.trim()) {
        if !tags.iter().any(|t| t == tag) {
            tags.push(tag.to_owned());
        }
    }
    Ok(Wanted {
        name: file.name.as_deref().map_or_else(|| key.clone(), |n| n.trim().to_owned()),
        key,
        path: file.path,
        description: file.description,
        tags,
        definition,
    })
}

/// The fields of `flow` that differ from what is wanted, as a `PATCH` body (empty: nothing to write).
fn differences(flow: &Flow, wanted: &Wanted) -> Map<String, Value> {
    let mut patch = Map::new();
    if flow.name != wanted.name {
        patch.insert("name".into(), json!(wanted.name));
    }
    if flow.description != wanted.description {
        patch.insert("description".into(), json!(wanted.description));
    }
    if flow.tags != wanted.tags {
        patch.insert("tags".into(), json!(wanted.tags));
    }
    // A change of key order is a change (what export writes keeps it); a number written another way is not.
    if !same_json(&flow.definition, &wanted.definition) {
        patch.insert("definition".into(), wanted.definition.clone());
    }
    patch
}

/// Whether two JSON values are the same: objects with the same members in the same order, arrays item by item,
/// numbers by value (`1`, `1.0` and `1e0` alike, `-0` and `0` alike), everything else as it is.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x, y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((ka, va), (kb, vb))| ka == kb && same_json(va, vb))
        }
        _ => a == b,
    }
}

/// Integers exactly (past 2^53 too), anything else by its `f64` value.
fn same_number(x: &Number, y: &Number) -> bool {
    if let (Some(a), Some(b)) = (x.as_i64(), y.as_i64()) {
        return a == b;
    }
    if let (Some(a), Some(b)) = (x.as_u64(), y.as_u64()) {
        return a == b;
    }
    x.as_f64() == y.as_f64()
}

/// The plan: the folder's files against the organization's flows. Refuses duplicate and missing keys, and keys of
/// flows made by hand.
fn plan(files: Vec<FlowFile>, flows: Vec<Flow>, prune: bool) -> Result<Vec<Step>, CliError> {
    let mut by_key: BTreeMap<String, Wanted> = BTreeMap::new();
    for file in files {
        let wanted = wanted(file)?;
        if let Some(first) = by_key.get(&wanted.key) {
            return Err(CliError::usage(format!(
                "{} and {} both have the key `{}`: each flow file needs a key of its own",
                first.path.display(),
                wanted.path.display(),
                wanted.key
            )));
        }
        by_key.insert(wanted.key.clone(), wanted);
    }
    let mut existing: BTreeMap<String, Flow> =
        flows.into_iter().filter_map(|f| f.key.clone().map(|key| (key, f))).collect();
    let conflicts: Vec<String> = by_key
        .values()
        .filter(|w| existing.get(&w.key).is_some_and(|f| !f.managed))
        .map(|w| format!("{} (key `{}`: flow {}, made by hand)", w.path.display(), w.key, existing[&w.key].id))
        .collect();
    if !conflicts.is_empty() {
        return Err(CliError::usage(format!(
            "refusing the folder: a file's key names a flow that apply does not manage: {}",
            conflicts.join("; ")
        )));
    }
    let mut steps = Vec::new();
    for (key, wanted) in by_key {
        match existing.remove(&key) {
            None => steps.push(Step::Add(wanted)),
            Some(flow) => {
                let patch = differences(&flow, &wanted);
                if !patch.is_empty() {
                    steps.push(Step::Change(flow, wanted, patch));
                }
            }
        }
    }
    if prune {
        steps.extend(existing.into_values().filter(|f| f.managed).map(Step::Remove));
    }
    Ok(steps)
}

/// A unified diff of two definitions' two-space-indented JSON.
fn definition_diff(old: &Value, new: &Value, key: &str) -> String {
    let (old, new) = (pretty(old) + "\n", pretty(new) + "\n");
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("{key} (server)"), &format!("{key} (folder)"))
        .to_string()
}

/// The plan as printed.
fn describe(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Add(w) => out.push_str(&format!("+ add     {} ({}) from {}\n", w.key, w.name, w.path.display())),
            Step::Change(flow, w, patch) => {
                let fields: Vec<&str> = patch.keys().map(String::as_str).collect();
                out.push_str(&format!("~ change  {} ({}): {}\n", w.key, flow.name, fields.join(", ")));
                if patch.contains_key("definition") {
                    out.push_str(&definition_diff(&flow.definition, &w.definition, &w.key));
                }
            }
            Step::Remove(flow) => {
                out.push_str(&format!("- remove  {} ({})\n", flow.key.as_deref().unwrap_or_default(), flow.name));
            }
        }
    }
    let count = |f: fn(&Step) -> bool| steps.iter().filter(|s| f(s)).count();
    out.push_str(&format!(
        "{} to add, {} to change, {} to remove.",
        count(|s| matches!(s, Step::Add(_))),
        count(|s| matches!(s, Step::Change(..))),
        count(|s| matches!(s, Step::Remove(_)))
    ));
    out
}

pub async fn run(api: &Api, args: ApplyArgs) -> Result<(), CliError> {
    let paths = files::expand(std::slice::from_ref(&args.dir))?;
    let files = paths.iter().map(|p| files::read(p)).collect::<Result<Vec<_>, _>>()?;
    let flows = all_flows(api).await?;
    let steps = plan(files, flows, args.prune)?;
    println!("{}", describe(&steps));
    if args.plan {
        return Ok(());
    }
    for step in steps {
        match step {
            Step::Add(w) => {
                let body = json!({"name": w.name, "description": w.description, "tags": w.tags,
                    "definition": w.definition, "key": w.key, "managed": true});
                let _: Flow = api.post("/flows", &body).await?;
            }
            Step::Change(flow, _, patch) => {
                let request = api.request(Method::PATCH, &format!("/flows/{}", flow.id)).json(&Value::Object(patch));
                let _: Flow = api.send(request).await?;
            }
            Step::Remove(flow) => api.delete(&format!("/flows/{}", flow.id)).await?,
        }
    }
    println!("Applied.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: &str, b: &str) -> bool {
        same_json(&serde_json::from_str(a).expect("json"), &serde_json::from_str(b).expect("json"))
    }

    #[test]
    fn numbers_are_compared_by_value_and_members_in_order() {
        assert!(same(r#"{"x": 1.0, "y": 1e2, "z": -0}"#, r#"{"x": 1, "y": 100, "z": 0}"#));
        assert!(same(r#"[0.5, -0.0, 1E+2, 18446744073709551615]"#, r#"[5e-1, 0, 100.0, 18446744073709551615]"#));
        assert!(!same(r#"{"x": 1.5}"#, r#"{"x": 1}"#));
        assert!(!same(r#"[9007199254740993]"#, r#"[9007199254740992]"#), "integers past 2^53 exactly");
        assert!(!same(r#"{"x": 1, "y": 2}"#, r#"{"y": 2, "x": 1}"#), "a change of key order is a change");
        assert!(!same(r#"{"x": "1"}"#, r#"{"x": 1}"#));
        assert!(!same(r#"[1, 2]"#, r#"[1, 2, 3]"#));
    }
}
