//! Running one flow once per row of `--data`: one launch with `rows` (retried under one `Idempotency-Key`, so a
//! retry never makes a second batch) queues every row as an execution of one batch; the organization's runners
//! take them (so how many rows are in flight is bounded by the runners' slots, wherever they run). The CLI follows
//! the batch's summary until no row is queued or running, then reads each row's execution for the reports. When
//! the run is stopped (`--timeout`, Ctrl-C, `--fail-fast` elsewhere), the rows still queued or running are
//! cancelled and followed to their end for at most 30 s.

use crate::api::Api;
use crate::error::CliError;
use crate::run::data::Data;
use crate::run::flow_run::launch;
use crate::run::outcome::{FlowRun, RowRun, RunStatus};
use crate::run::progress::FlowProgress;
use crate::run::select::Target;
use crate::run::stop::Stop;
use hookflow_shared::BatchId;
use hookflow_shared::api::batches::{Batch, LaunchedBatch};
use hookflow_shared::api::executions::{Execution, Launch, Summary};
use hookflow_shared::api::flows::Flow;
use hookflow_shared::api::page::Page;
use reqwest::Method;
use std::time::{Duration, Instant};

/// How often the batch's summary is read.
const POLL: Duration = Duration::from_millis(500);
/// How often progress is printed at most.
const PRINT_EVERY: Duration = Duration::from_secs(2);
/// How long cancelled rows may take to end before the CLI stops waiting for them.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

async fn summary(api: &Api, batch_id: BatchId) -> Result<Batch, CliError> {
    api.send(api.request(Method::GET, &format!("/batches/{batch_id}"))).await
}

/// Every execution of the batch (optionally of one status), in row order.
async fn executions(api: &Api, batch_id: BatchId, status: Option<&str>) -> Result<Vec<Execution>, CliError> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        // Statuses are words and cursors URL-safe base64: nothing to escape.
        let mut path = format!("/batches/{batch_id}/executions?limit=100");
        if let Some(status) = status {
            path.push_str(&format!("&status={status}"));
        }
        if let Some(cursor) = cursor.take() {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let request = api.request(Method::GET, &path);
        let page: Page<Execution> = api.send(request).await?;
        all.extend(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
}

/// Cancels the batch's rows that are still queued or running.
async fn cancel_open(api: &Api, batch_id: BatchId, progress: &FlowProgress) {
    for status in ["queued", "running"] {
        let open = match executions(api, batch_id, Some(status)).await {
            Ok(open) => open,
            Err(e) => return progress.notice(&format!("could not list the batch's rows to cancel: {e}")),
        };
        for execution in open {
            let path = format!("/executions/{}/cancel", execution.id);
            match api.send_raw(api.request(Method::POST, &path)).await {
                Ok(_) | Err(CliError::Api { status: 409, .. }) => {}
                Err(e) => progress.notice(&format!("could not cancel row {:?}: {e}", execution.iteration)),
            }
        }
    }
}

/// Launches `target` with the rows of `data` (in `body`) and follows the batch to its end.
pub async fn run_batch(
    api: &Api,
    target: &Target,
    body: &Launch,
    data: &Data,
    stop: &Stop,
    mut progress: FlowProgress,
) -> Result<FlowRun, CliError> {
    let name = match (&target.name, target.flow_id) {
        (Some(name), _) => name.clone(),
        (None, Some(flow_id)) => {
            let flow: Flow = api.client().flows().get(flow_id).await.map_err(|e| api.error(e))?;
            flow.name
        }
        (None, None) => target.label(),
    };
    progress.set_label(&name);
    let started = Instant::now();
    let launched: LaunchedBatch = launch(api, target, body, &progress).await?;
    let batch_id = launched.batch_id;
    progress.launched(&format!("batch {batch_id}"), &format!("{} rows", launched.executions));
    let mut printed = Instant::now();
    let mut give_up_at: Option<tokio::time::Instant> = None;
    let mut last = None;
    loop {
        let batch = summary(api, batch_id).await?;
        let done = batch.succeeded + batch.failed + batch.cancelled;
        if batch.finished_at.is_some() {
            break;
        }
        if last != Some(done) && printed.elapsed() >= PRINT_EVERY {
            progress.notice(&format!("{done} of {} rows finished ({} failed)", batch.total, batch.failed));
            printed = Instant::now();
            last = Some(done);
        }
        if let Some(at) = give_up_at
            && tokio::time::Instant::now() >= at
        {
            progress.notice("cancelled rows did not end in time");
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = stop.token().cancelled(), if give_up_at.is_none() => {
                give_up_at = Some(tokio::time::Instant::now() + CANCEL_GRACE);
                cancel_open(api, batch_id, &progress).await;
            }
        }
    }
    let rows: Vec<RowRun> =
        executions(api, batch_id, None).await?.into_iter().map(|e| row_run(e, data, stop)).collect();
    let passed = rows.iter().filter(|r| r.status == RunStatus::Succeeded).count();
    let all_passed = passed == rows.len() && rows.len() == data.rows.len();
    let mut summary = Summary::default();
    for row in &rows {
        summary.nodes_total += row.summary.nodes_total;
        summary.passed += row.summary.passed;
        summary.failed += row.summary.failed;
        summary.skipped += row.summary.skipped;
    }
    let run = FlowRun {
        flow_id: target.flow_id,
        path: target.file.as_ref().map(|f| f.path.clone()),
        name,
        execution_id: None,
        status: if all_passed { RunStatus::Succeeded } else { RunStatus::Failed },
        error: (!all_passed).then(|| format!("{} of {} rows did not pass", data.rows.len() - passed, data.rows.len())),
        started_at: None,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        summary,
        nodes: Vec::new(),
        batch_id: Some(batch_id),
        rows,
    };
    progress.finished(&run);
    Ok(run)
}

/// A row's execution as the reports show it.
fn row_run(execution: Execution, data: &Data, stop: &Stop) -> RowRun {
    let iteration = execution.iteration.and_then(|i| u32::try_from(i).ok()).unwrap_or_default();
    let status = match RunStatus::from_execution(execution.status) {
        RunStatus::Cancelled => stop.cancelled_status(),
        other => other,
    };
    let status = if execution.finished_at.is_none() { RunStatus::NotRun } else { status };
    RowRun {
        iteration,
        name: data.name_of(iteration as usize),
        execution_id: Some(execution.id),
        status,
        error: execution.error,
        duration_ms: execution.duration_ms.and_then(|ms| u64::try_from(ms).ok()).unwrap_or_default(),
        summary: execution.summary,
    }
}
