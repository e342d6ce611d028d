//! A module node with `foreach`: the module runs once per item of a JSON array (at most 1,000), at most
//! `parallel` items at once (1 to 32), each with the node's inputs plus `item` (a string item as it is, any other
//! its JSON text) and `index`. Every item runs; the node's result lists them (`items`, in item order) and fails
//! when any failed, unless the node has `continue_on_failure` (then the failures stay in `items`). The values
//! the items extracted come back as `<node id>.items`, a JSON array of one object per item.

use super::{Engine, Ran, RunContext, module_inputs};
use crate::engine::vars::Variables;
use futures_util::StreamExt as _;
use futures_util::stream::FuturesOrdered;
use hookflow_shared::api::executions::{NodeResult, NodeStatus};
use hookflow_shared::api::node_results::ItemResult;
use hookflow_shared::flow::definition::{self, FlowDefinition, MAX_FOREACH_ITEMS, MAX_FOREACH_PARALLEL};
use hookflow_shared::flow::template;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// One item's run of the module: its index, how its nodes went, and its variables after.
type ItemRun<'a> = Pin<Box<dyn Future<Output = (usize, Ran, Variables)> + Send + 'a>>;

/// An item as the module's `item` input.
fn item_text(item: &Value) -> String {
    match item {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The array `foreach` names, rendered and read; else the node's error.
fn items(foreach: &str, vars: &Variables) -> Result<Vec<Value>, String> {
    let text = template::render(foreach, &vars.scope()).map_err(|e| format!("foreach: {}", vars.explain(&e)))?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(items)) if items.len() <= MAX_FOREACH_ITEMS => Ok(items),
        Ok(Value::Array(items)) => {
            Err(format!("foreach: at most {MAX_FOREACH_ITEMS} items; the array has {}", items.len()))
        }
        _ => Err("foreach: the value is not a JSON array".into()),
    }
}

impl Engine {
    /// Runs `definition` (the module of `module`) once per item; `None` when cancelled.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_foreach(
        &self,
        module: &definition::ModuleNode,
        foreach: &str,
        definition: &FlowDefinition,
        vars: &mut Variables,
        context: &RunContext<'_>,
        depth: usize,
        result: &mut NodeResult,
    ) -> Option<()> {
        let prepared = items(foreach, vars).and_then(|items| Ok((items, module_inputs(module, vars)?)));
        let (items, inputs) = match prepared {
            Ok(prepared) => prepared,
            Err(error) => {
                result.status = NodeStatus::Error;
                result.error = Some(error);
                return Some(());
            }
        };
        let tainted = vars.is_tainted_template(foreach);
        let parallel = module.parallel.unwrap_or(1).clamp(1, MAX_FOREACH_PARALLEL) as usize;
        let parent: &Variables = vars;
        // Items start in order as earlier ones end, at most `parallel` in flight; results come back in item order.
        let start = |index: usize, item: &Value| -> ItemRun<'_> {
            let mut item_inputs = inputs.clone();
            item_inputs.push(("item".to_owned(), item_text(item), tainted));
            item_inputs.push(("index".to_owned(), index.to_string(), false));
            let mut inner = parent.for_module(&definition.variables, item_inputs);
            Box::pin(async move {
                let ran = self.run_nodes(&definition.nodes, &mut inner, context, None, depth + 1).await;
                (index, ran, inner)
            })
        };
        let mut pending = items.iter().enumerate();
        let mut in_flight = FuturesOrdered::new();
        let mut runs = Vec::with_capacity(items.len());
        loop {
            while in_flight.len() < parallel
                && let Some((index, item)) = pending.next()
            {
                in_flight.push_back(start(index, item));
            }
            match in_flight.next().await {
                Some(run) => runs.push(run),
                None => break,
            }
        }
        let mut outcomes = Vec::with_capacity(runs.len());
        let mut extracted = Vec::with_capacity(runs.len());
        let mut any_tainted = false;
        let mut first_failure = None;
        for (index, ran, inner) in runs {
            if ran.cancelled {
                return None;
            }
            let values = inner.extracted().clone();
            any_tainted = any_tainted || values.keys().any(|name| inner.is_tainted(name));
            extracted.push(Value::Object(values.clone().into_iter().collect()));
            if first_failure.is_none()
                && let Some(failure) = &ran.failed
            {
                first_failure = Some(format!("item {index}: {failure}"));
            }
            outcomes.push(ItemResult {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                status: if ran.failed.is_some() { NodeStatus::Failed } else { NodeStatus::Passed },
                extracted: values,
                error: ran.failed,
            });
        }
        vars.set_tainted(&format!("{}.items", module.id), Value::Array(extracted), any_tainted);
        result.items = Some(outcomes);
        if let Some(failure) = first_failure
            && !module.continue_on_failure
        {
            result.status = NodeStatus::Failed;
            result.error = Some(format!("in the module: {failure}"));
        }
        Some(())
    }
}
