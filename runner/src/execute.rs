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

async fn report_all(
    client: Client,
    job: Job,
    mut results: mpsc::UnboundedReceiver<NodeResult>,
    cancel: CancellationToken,
) -> Result<(), ClientError> {
    let mut batch = Vec::new();
    while let Some(first) = results.recv().await {
        batch.clear();
        batch.push(first);
        while let Ok(more) = results.try_recv() {
            batch.push(more);
        }
        let reply = (|| client.report(&job, &batch)).retry(retry_policy()).when(ClientError::is_transient).await;
        match reply {
            Ok(reply) if reply.cancel => cancel.cancel(),
            Ok(_) => {}
            Err(e) => {
                cancel.cancel();
                return Err(e);
            }
        }
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
    let (sink, results) = mpsc::unbounded_channel();
    // Its own task, so reports are encoded and sent in parallel with the run.
    let reporting = tokio::spawn(report_all(client.clone(), job.clone(), results, cancel.clone()));
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
