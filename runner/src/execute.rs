//! Runs one claimed job end to end: the engine executes it while a reporter posts node results in batches (what
//! piles up while a post is in flight goes in the next one), then the job is completed. A report answered
//! "cancel" stops the engine; a report refused because the attempt moved on abandons the job.

use crate::client::{Client, ClientError};
use crate::engine::{Engine, Outcome};
use backon::{ExponentialBuilder, Retryable as _};
use hookflow_shared::api::executions::NodeResult;
use hookflow_shared::api::runners::Job;
use std::time::Duration;
use tokio::sync::mpsc;
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
    /// Also receives every (masked) node result as the reporter takes it: for a caller that shows progress.
    pub observer: Option<mpsc::UnboundedSender<NodeResult>>,
    /// When nothing was reported for this long, an empty report keeps the lease alive. For callers that send no
    /// runner heartbeats (the CLI's ephemeral runs).
    pub keep_alive: Option<Duration>,
}

/// Posts a batch (an empty one keeps the lease alive), retrying transient failures; an answer saying "cancel", or
/// a failure, cancels the run.
async fn post(client: &Client, job: &Job, batch: &[NodeResult], cancel: &CancellationToken) -> Result<(), ClientError> {
    let reply = (|| client.report(job, batch)).retry(retry_policy()).when(ClientError::is_transient).await;
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

async fn report_all(
    client: Client,
    job: Job,
    mut results: mpsc::UnboundedReceiver<NodeResult>,
    cancel: CancellationToken,
    options: Options,
) -> Result<(), ClientError> {
    let observe = |result: &NodeResult| {
        if let Some(observer) = &options.observer {
            let _ = observer.send(result.clone());
        }
    };
    let mut batch = Vec::new();
    loop {
        let next = match options.keep_alive {
            None => results.recv().await,
            Some(period) => tokio::select! {
                next = results.recv() => next,
                () = tokio::time::sleep(period) => {
                    post(&client, &job, &[], &cancel).await?;
                    continue;
                }
            },
        };
        let Some(first) = next else { break };
        observe(&first);
        batch.clear();
        batch.push(first);
        while let Ok(more) = results.try_recv() {
            observe(&more);
            batch.push(more);
        }
        post(&client, &job, &batch, &cancel).await?;
    }
    Ok(())
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
    let outcome = engine.run(job, &sink, cancel).await;
    drop(sink);
    match reporting.await {
        Ok(reported) => reported?,
        Err(e) => return Err(ClientError::Transport(format!("the reporter stopped: {e}"))),
    }
    let (status, error) = (outcome.status, outcome.error.clone());
    (|| client.complete(job, status, error.clone())).retry(retry_policy()).when(ClientError::is_transient).await?;
    Ok(outcome)
}
