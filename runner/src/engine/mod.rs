//! The flow engine: runs a claimed job's nodes in order (request, delay, module (once per item with `foreach`),
//! set_variables, webhook), with conditions,
//! skip-after-failure unless `continue_on_failure`, per-node retries and timeouts, the flow timeout and
//! cancellation; and one request node on its own (`single`, the API's "try a node"). Every result is masked of
//! secrets before it leaves the engine.

pub mod bodies;
pub mod clients;
pub mod cookies;
pub mod foreach;
pub mod mask;
pub mod request;
pub mod send;
pub mod single;
pub mod vars;
pub mod webhook;

use crate::engine::mask::Masker;
use crate::engine::vars::{Variables, as_text};
use crate::outbound::Proxy;
use hookflow_shared::Timestamp;
use hookflow_shared::api::catalog::{Assertion, AssertionResult};
use hookflow_shared::api::executions::{NodeResult, NodeStatus};
use hookflow_shared::api::runners::{FinalStatus, Job, module_key};
use hookflow_shared::flow::assert::Operator;
use hookflow_shared::flow::definition::{self, Node, VersionSelector};
use hookflow_shared::flow::template;
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Where finished node results go, in order.
pub type ResultSink = mpsc::UnboundedSender<NodeResult>;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: FinalStatus,
    pub error: Option<String>,
}

/// Executes flows. Cheap to clone; one connection pool per network policy, shared by every run.
#[derive(Debug, Clone)]
pub struct Engine {
    clients: clients::Clients,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

/// What a sequence of nodes came to.
#[derive(Debug, Default)]
struct Ran {
    failed: Option<String>,
    cancelled: bool,
}

struct RunContext<'a> {
    job: &'a Job,
    masker: Masker,
    cancel: &'a CancellationToken,
    /// Where webhook nodes wait for captures (none for local runs).
    captures: Option<&'a dyn webhook::CaptureSource>,
    /// Captures the run's webhook nodes took.
    taken: std::sync::Mutex<Vec<hookflow_shared::CaptureId>>,
    /// The run's cookies (`None` when the definition turns them off).
    jar: Option<std::sync::Mutex<cookies::Jar>>,
}

/// A result with nothing sent or received.
pub(crate) fn blank_result(node_id: &str, attempt: i32, status: NodeStatus, error: Option<&str>) -> NodeResult {
    NodeResult {
        node_id: node_id.to_owned(),
        attempt,
        status,
        started_at: Timestamp::now(),
        duration_ms: 0,
        request: None,
        response: None,
        extracted: BTreeMap::new(),
        assertions: Vec::new(),
        error: error.map(str::to_owned),
        retries: 0,
        capture: None,
        items: None,
    }
}

fn skipped(node_id: &str, attempt: i32, reason: &str) -> NodeResult {
    blank_result(node_id, attempt, NodeStatus::Skipped, Some(reason))
}

impl Engine {
    /// An engine that never uses a proxy (the server's embedded runner, tests).
    pub fn new() -> Self {
        Self::with_proxy(Proxy::None)
    }

    /// An engine whose flow requests go through `proxy` (installed runners and `hookflow run`).
    pub fn with_proxy(proxy: Proxy) -> Self {
        Self { clients: clients::Clients::new(proxy) }
    }

    /// Runs a job to its end; results go to `sink` as each node finishes. Webhook nodes fail: nothing to wait on.
    pub async fn run(&self, job: &Job, sink: &ResultSink, cancel: &CancellationToken) -> Outcome {
        self.run_with(job, sink, cancel, None).await
    }

    /// As [`Engine::run`], webhook nodes waiting on `captures` (the control plane the job came from).
    pub async fn run_with(
        &self,
        job: &Job,
        sink: &ResultSink,
        cancel: &CancellationToken,
        captures: Option<&dyn webhook::CaptureSource>,
    ) -> Outcome {
        let parsed = match definition::validate_text(&job.flow.definition) {
            Ok(parsed) => parsed,
            Err(problems) => {
                let first = problems.first().map(|p| p.message.clone()).unwrap_or_default();
                return Outcome {
                    status: FinalStatus::Error,
                    error: Some(format!("the definition is not valid: {first}")),
                };
            }
        };
        let mut vars = Variables::for_job(job, &parsed.variables);
        let context = RunContext {
            job,
            masker: Masker::new(vars.secrets()),
            cancel,
            captures,
            taken: Default::default(),
            jar: (parsed.cookies != Some(false)).then(Default::default),
        };
        let limit = Duration::from_secs(job.timeout_s.max(1));
        let ran = tokio::time::timeout(limit, self.run_nodes(&parsed.nodes, &mut vars, &context, Some(sink), 0)).await;
        match ran {
            Err(_) => Outcome {
                status: FinalStatus::Failed,
                error: Some(match &job.timeout_note {
                    Some(note) => {
                        format!("the flow did not finish within its timeout of {} s ({note})", limit.as_secs())
                    }
                    None => format!("the flow did not finish within its timeout of {} s", limit.as_secs()),
                }),
            },
            Ok(ran) if ran.cancelled => Outcome { status: FinalStatus::Cancelled, error: Some("cancelled".into()) },
            Ok(Ran { failed: Some(error), .. }) => {
                Outcome { status: FinalStatus::Failed, error: Some(context.masker.text(&error)) }
            }
            Ok(_) => Outcome { status: FinalStatus::Succeeded, error: None },
        }
    }

    fn run_nodes<'a>(
        &'a self,
        nodes: &'a [Node],
        vars: &'a mut Variables,
        context: &'a RunContext<'a>,
        sink: Option<&'a ResultSink>,
        depth: usize,
    ) -> Pin<Box<dyn Future<Output = Ran> + Send + 'a>> {
        Box::pin(async move {
            let mut ran = Ran::default();
            let mut halted = false;
            for node in nodes {
                if context.cancel.is_cancelled() {
                    ran.cancelled = true;
                    return ran;
                }
                let (enabled, condition, continues) = node_flags(node);
                let mut result = if halted {
                    skipped(node.id(), context.job.attempt, "skipped after an earlier node failed")
                } else if !enabled {
                    skipped(node.id(), context.job.attempt, "disabled")
                } else if let Some(condition) = condition
                    && !guarded_assert(condition, &vars.values_with(&BTreeMap::new()), &context.masker).passed
                {
                    skipped(node.id(), context.job.attempt, "its condition was not met")
                } else {
                    let started_at = Timestamp::now();
                    let clock = Instant::now();
                    let Some(mut result) = self.run_node(node, vars, context, depth).await else {
                        ran.cancelled = true;
                        return ran;
                    };
                    result.started_at = started_at;
                    result.duration_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
                    result
                };
                if matches!(result.status, NodeStatus::Failed | NodeStatus::Error) {
                    if ran.failed.is_none() {
                        ran.failed =
                            Some(format!("node `{}`: {}", node.id(), result.error.as_deref().unwrap_or("failed")));
                    }
                    halted = halted || !continues;
                }
                context.masker.result(&mut result);
                if let Some(sink) = sink {
                    let _ = sink.send(result);
                }
            }
            ran
        })
    }

    /// Runs one node; `None` when cancelled.
    async fn run_node(
        &self,
        node: &Node,
        vars: &mut Variables,
        context: &RunContext<'_>,
        depth: usize,
    ) -> Option<NodeResult> {
        let mut result = blank_result(node.id(), context.job.attempt, NodeStatus::Passed, None);
        match node {
            Node::Request(request) => self.run_request(request, vars, context, &mut result).await?,
            Node::Delay(delay) => {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(delay.delay_ms)) => {}
                    () = context.cancel.cancelled() => return None,
                }
            }
            Node::SetVariables(set) => set_variables(set, vars, &mut result),
            Node::Module(module) => self.run_module(module, vars, context, depth, &mut result).await?,
            Node::Webhook(node) => {
                let waiting = webhook::Waiting {
                    job: context.job,
                    source: context.captures,
                    masker: &context.masker,
                    cancel: context.cancel,
                    taken: &context.taken,
                };
                webhook::run(node, vars, waiting, &mut result).await?
            }
        }
        Some(result)
    }

    /// A request node: tries it (with its retries), keeps what it extracted. `None` when cancelled.
    async fn run_request(
        &self,
        request: &definition::RequestNode,
        vars: &mut Variables,
        context: &RunContext<'_>,
        result: &mut NodeResult,
    ) -> Option<()> {
        let retry = request.retry.unwrap_or(definition::Retry { count: 0, interval_ms: 0 });
        let mut tries = 0;
        let exchange = loop {
            let exchange_context = request::Context {
                clients: &self.clients,
                job: context.job,
                masker: &context.masker,
                jar: context.jar.as_ref(),
            };
            let stop = context.cancel.child_token();
            let exchange = tokio::select! {
                exchange = request::exchange(exchange_context, request, vars, &stop) => exchange,
                () = context.cancel.cancelled() => return None,
            };
            if exchange.status == Some(NodeStatus::Passed) || tries >= retry.count {
                break exchange;
            }
            tries += 1;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(retry.interval_ms)) => {}
                () = context.cancel.cancelled() => return None,
            }
        };
        // A response to a request whose URL a launch or a sender chose says what they chose it to say.
        for (name, value) in &exchange.extracted {
            vars.set_tainted(name, value.clone(), exchange.tainted);
        }
        result.status = exchange.status.unwrap_or(NodeStatus::Error);
        result.request = exchange.request;
        result.response = exchange.response;
        result.extracted = exchange.extracted;
        result.assertions = exchange.assertions;
        result.error = exchange.error;
        result.retries = tries;
        Some(())
    }

    /// A module node: runs the module's published definition with its inputs; its extracted values come back as
    /// `<node id>.<name>`. `None` when cancelled.
    async fn run_module(
        &self,
        module: &definition::ModuleNode,
        vars: &mut Variables,
        context: &RunContext<'_>,
        depth: usize,
        result: &mut NodeResult,
    ) -> Option<()> {
        let number = match module.version {
            Some(VersionSelector::Number(n)) => Some(n),
            _ => None,
        };
        let definition =
            context.job.modules.get(&module_key(module.flow_id, number)).and_then(|raw| definition::validate(raw).ok());
        let Some(definition) = definition else {
            result.status = NodeStatus::Error;
            result.error = Some(format!("the module's flow {} was not resolved for this run", module.flow_id));
            return Some(());
        };
        if let Some(foreach) = &module.foreach {
            return self.run_foreach(module, foreach, &definition, vars, context, depth, result).await;
        }
        let inputs = match module_inputs(module, vars) {
            Ok(inputs) => inputs,
            Err(error) => {
                result.status = NodeStatus::Error;
                result.error = Some(error);
                return Some(());
            }
        };
        let mut inner = vars.for_module(&definition.variables, inputs);
        let ran = self.run_nodes(&definition.nodes, &mut inner, context, None, depth + 1).await;
        if ran.cancelled {
            return None;
        }
        for (inner_name, value) in inner.extracted() {
            let name = format!("{}.{inner_name}", module.id);
            vars.set_tainted(&name, value.clone(), inner.is_tainted(inner_name));
            result.extracted.insert(name, value.clone());
        }
        if let Some(failure) = ran.failed {
            result.status = NodeStatus::Failed;
            result.error = Some(format!("in the module: {failure}"));
        }
        Some(())
    }
}

/// The module node's inputs rendered (with whether each came from a launch), or the node's error.
fn module_inputs(module: &definition::ModuleNode, vars: &Variables) -> Result<Vec<(String, String, bool)>, String> {
    let mut inputs = Vec::new();
    for (name, text) in &module.inputs {
        match template::render(text, &vars.scope()) {
            Ok(value) => inputs.push((name.clone(), value, vars.is_tainted_template(text))),
            Err(e) => return Err(format!("inputs.{name}: {}", vars.explain(&e))),
        }
    }
    Ok(inputs)
}

/// A set_variables node: renders each value and sets it; past [`MAX_SET_VARIABLES`] set by the run's nodes in all
/// the node fails (a value doubled, or copied, node after node would otherwise take the process's memory: each
/// node's result keeps what it set).
///
/// [`MAX_SET_VARIABLES`]: hookflow_shared::flow::budget::MAX_SET_VARIABLES
fn set_variables(set: &definition::SetVariablesNode, vars: &mut Variables, result: &mut NodeResult) {
    use hookflow_shared::flow::budget::MAX_SET_VARIABLES;
    for (name, text) in &set.variables {
        match template::render(text, &vars.scope()) {
            Ok(value) if vars.set_bytes() + value.len() > MAX_SET_VARIABLES => {
                result.status = NodeStatus::Error;
                result.error =
                    Some(format!("variables.{name}: the run would have set past {} MiB", MAX_SET_VARIABLES >> 20));
                break;
            }
            Ok(value) => {
                vars.set_rendered(name, text, value.clone());
                result.extracted.insert(name.clone(), Value::String(value));
            }
            Err(e) => {
                result.status = NodeStatus::Error;
                result.error = Some(format!("variables.{name}: {}", vars.explain(&e)));
                break;
            }
        }
    }
}

/// Evaluates an assertion or condition. One that would look inside a value holding a secret (with any operator
/// but exists, notExists and isType) fails instead: an assertion must never be an oracle for a secret.
pub(crate) fn guarded_assert(
    assertion: &Assertion,
    values: &BTreeMap<String, Value>,
    masker: &Masker,
) -> AssertionResult {
    let holds_secret = values.get(&assertion.source).is_some_and(|v| !masker.carried(&as_text(v)).is_empty());
    if holds_secret && !matches!(assertion.operator, Operator::Exists | Operator::NotExists | Operator::IsType) {
        return AssertionResult {
            source: assertion.source.clone(),
            operator: assertion.operator,
            expected: None,
            actual: None,
            passed: false,
            reason: Some("the value holds a secret: only exists, notExists and isType may look at it".into()),
        };
    }
    assertion.evaluate(values)
}

fn node_flags(node: &Node) -> (bool, Option<&hookflow_shared::api::catalog::Assertion>, bool) {
    match node {
        Node::Request(n) => (n.enabled, n.condition.as_ref(), n.continue_on_failure),
        Node::Delay(n) => (n.enabled, n.condition.as_ref(), n.continue_on_failure),
        Node::Module(n) => (n.enabled, n.condition.as_ref(), n.continue_on_failure),
        Node::SetVariables(n) => (n.enabled, n.condition.as_ref(), n.continue_on_failure),
        Node::Webhook(n) => (n.enabled, n.condition.as_ref(), n.continue_on_failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(pairs: &[(&str, &str)]) -> definition::SetVariablesNode {
        definition::SetVariablesNode {
            id: "set".into(),
            name: None,
            enabled: true,
            condition: None,
            continue_on_failure: false,
            variables: pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        }
    }

    #[test]
    fn values_doubled_node_after_node_stop_at_the_budgets() {
        let mut vars = Variables::default();
        vars.set("x", Value::String("a".repeat(1024)));
        let double = setting(&[("x", "{{x}}{{x}}")]);
        // 1 KiB doubled 14 times is 16 MiB: the 15th doubling would render past the template budget.
        for _ in 0..14 {
            let mut result = blank_result("set", 1, NodeStatus::Passed, None);
            set_variables(&double, &mut vars, &mut result);
            assert_eq!(result.status, NodeStatus::Passed, "{:?}", result.error);
        }
        let mut result = blank_result("set", 1, NodeStatus::Passed, None);
        set_variables(&double, &mut vars, &mut result);
        assert_eq!(result.status, NodeStatus::Error);
        assert!(result.error.as_deref().is_some_and(|e| e.contains("renders past 16 MiB")), "{:?}", result.error);
        // The doublings set 2 KiB + ... + 16 MiB (2 KiB under 32 MiB); copies of the 16 MiB value, even under one
        // name, count each time: two more fit in 64 MiB, the third does not.
        for _ in 0..2 {
            let mut result = blank_result("set", 1, NodeStatus::Passed, None);
            set_variables(&setting(&[("x", "{{x}}")]), &mut vars, &mut result);
            assert_eq!(result.status, NodeStatus::Passed, "{:?}", result.error);
        }
        let mut result = blank_result("set", 1, NodeStatus::Passed, None);
        set_variables(&setting(&[("x", "{{x}}")]), &mut vars, &mut result);
        assert_eq!(result.status, NodeStatus::Error);
        assert!(result.error.as_deref().is_some_and(|e| e.contains("set past 64 MiB")), "{:?}", result.error);
        assert!(vars.set_bytes() <= hookflow_shared::flow::budget::MAX_SET_VARIABLES);
    }
}
