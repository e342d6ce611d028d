//! One request node sent on its own, outside a run (the API's "try a node"): the request once, its extractors and
//! assertions, with a job's variables and secrets, masked as every node result is. No retries, no condition, no
//! other node.

use crate::engine::mask::Masker;
use crate::engine::vars::Variables;
use crate::engine::{Engine, blank_result, request};
use hookflow_shared::Timestamp;
use hookflow_shared::api::executions::{NodeResult, NodeStatus};
use hookflow_shared::api::runners::Job;
use hookflow_shared::flow::definition::RequestNode;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

impl Engine {
    /// Sends `node` once, whatever its `retry`, `enabled` and `condition`, with `job`'s variables over the flow's
    /// own `flow` variables, under `job.network` and `job.secret_hosts`, within the node's timeout and
    /// `job.timeout_s`. The result (attempt `job.attempt`) is masked of the job's secrets. `None` when `cancel`
    /// fired first.
    pub async fn run_single(
        &self,
        job: &Job,
        node: &RequestNode,
        flow: &BTreeMap<String, String>,
        cancel: &CancellationToken,
    ) -> Option<NodeResult> {
        let vars = Variables::for_job(job, flow);
        let masker = Masker::new(vars.secrets());
        let mut result = blank_result(&node.id, job.attempt, NodeStatus::Passed, None);
        result.started_at = Timestamp::now();
        let clock = Instant::now();
        // A tried node keeps the cookies of its own exchange (its redirects) only.
        let jar = std::sync::Mutex::default();
        let context = request::Context { clients: &self.clients, job, masker: &masker, jar: Some(&jar) };
        let limit = Duration::from_secs(job.timeout_s.max(1));
        // Past the limit (or on `cancel`) the exchange is stopped, and awaited to its end: the caller's slot is
        // held while any of its work runs.
        let stop = cancel.child_token();
        let work = request::exchange(context, node, &vars, &stop);
        let deadline = tokio::time::sleep(limit);
        tokio::pin!(work, deadline);
        let mut timed_out = false;
        let exchange = loop {
            tokio::select! {
                exchange = &mut work => break exchange,
                () = &mut deadline, if !timed_out => {
                    timed_out = true;
                    stop.cancel();
                }
            }
        };
        if cancel.is_cancelled() {
            return None;
        }
        match (!timed_out).then_some(exchange) {
            Some(exchange) => {
                result.status = exchange.status.unwrap_or(NodeStatus::Error);
                result.request = exchange.request;
                result.response = exchange.response;
                result.extracted = exchange.extracted;
                result.assertions = exchange.assertions;
                result.error = exchange.error;
            }
            None => {
                result.status = NodeStatus::Error;
                result.error = Some(format!("no response within {} s", limit.as_secs()));
            }
        }
        result.duration_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
        masker.result(&mut result);
        Some(result)
    }
}
