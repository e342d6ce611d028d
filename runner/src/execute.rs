//! Runs one claimed job end to end: the engine executes it while a reporter posts node results in batches (what
//! piles up while a post is in flight, and for at least [`REPORT_INTERVAL`] after the previous post, goes in the
//! next one), then the job is completed, with the results the engine produced after the last post (a short flow's
//! only results, often: one request instead of two). A report answered "cancel" stops the engine; a report refused because the
//! attempt moved on abandons the job.

use crate::client::{Client, ClientError};
use crate::engine::{Engine, Outcome};
use backon::{ExponentialBuilder, Retryable as _};
use hookflow_shared::api::executions::NodeResult;
use hookflow_shared::api::runners::{Job, NodeReportBatch};
use reqwest::StatusCode;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn retry_policy() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .with_max_times(6)
        .with_jitter()
}

/// How a job is run beyond the defaults.
#[derive(Debug, Default)]
pub struct Options {
    /// Also receives every (masked) node result, a report's results together once it is complete (before it is
    /// posted): for a caller that shows progress.
    pub observer: Option<mpsc::UnboundedSender<NodeResult>>,
    /// When nothing was reported for this long, an empty report keeps the lease alive. For callers that send no
    /// runner heartbeats (the CLI's ephemeral runs).
    pub keep_alive: Option<Duration>,
}

/// While results keep coming, at most one report per this interval: a fast flow's results go in a few large posts
/// instead of one per node (each post is a transaction on the server), and a stream sees them this much later at
/// most. A result after a quiet spell is posted at once.
const REPORT_INTERVAL: Duration = Duration::from_millis(25);
/// A report is posted once it holds this many results ...
const MAX_REPORT_RESULTS: usize = 100;
/// ... or this many bytes (a quarter of the server's limit for a report body).
const MAX_REPORT_BYTES: usize = 4 * 1024 * 1024;

/// Posts a batch (an empty one keeps the lease alive), retrying transient failures; an answer saying "cancel", or
/// a failure, cancels the run.
async fn post(
    client: &Client,
    job: &Job,
    batch: NodeReportBatch,
    cancel: &CancellationToken,
) -> Result<(), ClientError> {
    let count = batch.len();
    let body = bytes::Bytes::from(batch.into_body());
    let reply =
        (|| client.report(job, body.clone(), count)).retry(retry_policy()).when(ClientError::is_transient).await;
    match reply {
        Ok(reply) if reply.cancel => cancel.cancel(),
        Ok(_) => {}
        Err(e) => {
            cancel.cancel();
            return Err(e);
        }
    }
    Ok(())
}

/// The engine's results as the reporter takes them.
struct Results {
    receiver: mpsc::UnboundedReceiver<NodeResult>,
    observer: Option<mpsc::UnboundedSender<NodeResult>>,
    /// Results of the batch being filled, for the observer once the batch is complete.
    unseen: Vec<NodeResult>,
}

impl Results {
    /// Encodes `result` into `batch`, and keeps it (moved: a result may carry bodies) for the observer.
    fn take(&mut self, batch: &mut NodeReportBatch, result: NodeResult) {
        if let Err(e) = batch.push(&result) {
            tracing::error!(node = %result.node_id, error = %e, "a node result could not be encoded; it is not reported");
        }
        if self.observer.is_some() {
            self.unseen.push(result);
        }
    }

    /// Hands the observer the results of a complete batch together: it shows them at once (a CLI printing one
    /// line per node as each arrived made a write, and woke whoever reads its log, per node).
    fn show(&mut self) {
        if let Some(observer) = &self.observer {
            for result in self.unseen.drain(..) {
                let _ = observer.send(result);
            }
        }
    }

    /// Adds to `batch` what arrives until `until` (what is already there when `until` has passed), stopping early
    /// when the batch is full or the engine has finished; answers whether it has (no more results will come).
    async fn fill(&mut self, batch: &mut NodeReportBatch, until: Instant) -> bool {
        while batch.len() < MAX_REPORT_RESULTS && batch.encoded_len() < MAX_REPORT_BYTES {
            let next = match self.receiver.try_recv() {
                Ok(result) => Some(result),
                Err(mpsc::error::TryRecvError::Disconnected) => None,
                Err(mpsc::error::TryRecvError::Empty) if Instant::now() >= until => return false,
                Err(mpsc::error::TryRecvError::Empty) => tokio::select! {
                    next = self.receiver.recv() => next,
                    () = tokio::time::sleep_until(until) => return false,
                },
            };
            let Some(result) = next else { return true };
            self.take(batch, result);
        }
        false
    }
}

/// Posts results as they come; answers the ones the engine produced last when it had finished before they were
/// posted: those go with the completion.
async fn report_all(
    client: Client,
    job: Job,
    receiver: mpsc::UnboundedReceiver<NodeResult>,
    cancel: CancellationToken,
    options: Options,
) -> Result<NodeReportBatch, ClientError> {
    let mut results = Results { receiver, observer: options.observer, unseen: Vec::new() };
    let mut last_post = Instant::now().checked_sub(REPORT_INTERVAL).unwrap_or_else(Instant::now);
    loop {
        let next = match options.keep_alive {
            None => results.receiver.recv().await,
            Some(period) => tokio::select! {
                next = results.receiver.recv() => next,
                () = tokio::time::sleep(period) => {
                    post(&client, &job, NodeReportBatch::default(), &cancel).await?;
                    continue;
                }
            },
        };
        let Some(first) = next else { break };
        let mut batch = NodeReportBatch::default();
        results.take(&mut batch, first);
        let finished = results.fill(&mut batch, last_post + REPORT_INTERVAL).await;
        results.show();
        if finished {
            return Ok(batch);
        }
        last_post = Instant::now();
        post(&client, &job, batch, &cancel).await?;
    }
    Ok(NodeReportBatch::default())
}

/// Completes the job with the results not posted yet in the same request. A server that does not take results
/// with a completion (it predates them: 400 naming the field) is remembered: they go as a report first, then the
/// completion alone, from then on.
async fn complete(
    client: &Client,
    job: &Job,
    outcome: &Outcome,
    left: NodeReportBatch,
    cancel: &CancellationToken,
) -> Result<(), ClientError> {
    let (status, error) = (outcome.status, outcome.error.clone());
    if !left.is_empty() && client.completions_take_results() {
        let with_results = (|| client.complete_with(job, status, error.clone(), &left))
            .retry(retry_policy())
            .when(ClientError::is_transient)
            .await;
        match with_results {
            Err(ClientError::Status { status: StatusCode::BAD_REQUEST, message, .. })
                if message.contains("unknown field `results`") =>
            {
                tracing::info!("the control plane takes no results with a completion: reporting them first");
                client.refuse_results_with_completions();
            }
            done => return done,
        }
    }
    if !left.is_empty() {
        post(client, job, left, cancel).await?;
    }
    (|| client.complete(job, status, error.clone())).retry(retry_policy()).when(ClientError::is_transient).await
}

/// Executes `job` and reports it; returns how it ended, or why it could not be reported.
pub async fn execute(
    client: &Client,
    engine: &Engine,
    job: &Job,
    cancel: &CancellationToken,
) -> Result<Outcome, ClientError> {
    execute_with(client, engine, job, cancel, Options::default()).await
}

/// As [`execute`], with `options`.
pub async fn execute_with(
    client: &Client,
    engine: &Engine,
    job: &Job,
    cancel: &CancellationToken,
    options: Options,
) -> Result<Outcome, ClientError> {
    let (sink, results) = mpsc::unbounded_channel();
    // Its own task, so reports are encoded and sent in parallel with the run.
    let reporting = tokio::spawn(report_all(client.clone(), job.clone(), results, cancel.clone(), options));
    let outcome = engine.run_with(job, &sink, cancel, Some(client)).await;
    drop(sink);
    let left = match reporting.await {
        Ok(reported) => reported?,
        Err(e) => return Err(ClientError::Transport(format!("the reporter stopped: {e}"))),
    };
    complete(client, job, &outcome, left, cancel).await?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookflow_shared::api::executions::NodeStatus;

    fn result(node_id: &str) -> NodeResult {
        crate::engine::blank_result(node_id, 1, NodeStatus::Passed, None)
    }

    /// The observer gets a report's results together, in order, once the report is complete; none before.
    #[test]
    fn the_observer_sees_a_report_whole() {
        let (_sink, receiver) = mpsc::unbounded_channel();
        let (observer, mut observed) = mpsc::unbounded_channel();
        let mut results = Results { receiver, observer: Some(observer), unseen: Vec::new() };
        let mut batch = NodeReportBatch::default();
        for id in ["a", "b", "c"] {
            results.take(&mut batch, result(id));
        }
        assert_eq!(batch.len(), 3);
        assert!(observed.try_recv().is_err(), "nothing is shown while the report fills");
        results.show();
        let shown: Vec<String> = std::iter::from_fn(|| observed.try_recv().ok()).map(|r| r.node_id).collect();
        assert_eq!(shown, ["a", "b", "c"]);
        results.show();
        assert!(observed.try_recv().is_err(), "each result is shown once");
    }
}
