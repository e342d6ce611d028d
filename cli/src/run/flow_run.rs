//! Running one flow: launch it (retrying network failures with the same `Idempotency-Key`, so a retry never starts
//! a second execution), then either execute it here with the runner library and report under the job token
//! (ephemeral), or follow its event stream while a runner executes it (remote). A flow file's definition is sent
//! to `POST /executions` as its text, with where it came from (path, Git commit and branch).

use crate::api::Api;
use crate::error::CliError;
use crate::run::outcome::{FlowRun, RunStatus, summarize};
use crate::run::progress::FlowProgress;
use crate::run::select::Target;
use crate::run::stop::Stop;
use crate::sse::EventStream;
use backon::{ExponentialBuilder, Retryable as _};
use hookflow_runner::client::{Client, ClientError, Connection};
use hookflow_runner::engine::{Engine, Outcome};
use hookflow_runner::execute::{Options, execute_with};
use hookflow_runner::outbound::Proxy;
use hookflow_shared::api::executions::{Execution, ExecutionEvent, Launch, LaunchMode, NodeResult, Summary, Trigger};
use hookflow_shared::api::fields::Labels;
use hookflow_shared::api::flows::Flow;
use hookflow_shared::api::flows_as_code::{InlineEnvironment, SourceIn};
use hookflow_shared::api::runners::FinalStatus;
use hookflow_shared::wire::header;
use reqwest::Method;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long a cancelled remote execution may take to end before the CLI stops waiting for it.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

/// `POST /executions` as the CLI sends it: the definition's text as the file holds it.
#[derive(serde::Serialize)]
struct InlineBody<'a> {
    definition: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    environment: Option<&'a InlineEnvironment>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    variables: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Labels::is_empty")]
    runner_labels: &'a Labels,
    mode: Option<LaunchMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<hookflow_shared::api::fields::Priority>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rows: Option<&'a Vec<BTreeMap<String, String>>>,
    source: SourceIn,
}

/// Launches the target (a stored flow, or a file's definition sent inline); network failures and 5xx/429 answers
/// are retried with the same idempotency key. The answer is an execution, or with `rows` the batch.
pub(crate) async fn launch<T: serde::de::DeserializeOwned>(
    api: &Api,
    target: &Target,
    body: &Launch,
    progress: &FlowProgress,
) -> Result<T, CliError> {
    let key = uuid::Uuid::new_v4().to_string();
    let (path, inline) = match (&target.file, target.flow_id) {
        (Some(file), _) => {
            let inline = InlineBody {
                definition: &file.definition,
                environment: file.environment.as_ref(),
                variables: &body.variables,
                runner_labels: &body.runner_labels,
                mode: body.mode,
                priority: body.priority,
                rows: body.rows.as_ref(),
                source: SourceIn {
                    path: file.path.clone(),
                    git_commit: file.git_commit.clone(),
                    git_ref: file.git_ref.clone(),
                },
            };
            ("/executions".to_owned(), Some(serde_json::to_vec(&inline).map_err(|e| CliError::runtime(e.to_string()))?))
        }
        (None, Some(flow_id)) => (format!("/flows/{flow_id}/launch"), None),
        (None, None) => return Err(CliError::runtime("a run target with neither a flow nor a file")),
    };
    let send = || async {
        let request = api
            .request(Method::POST, &path)
            .header(header::IDEMPOTENCY_KEY, &key)
            .header(header::TRIGGER, Trigger::Cli.as_str());
        let request = match &inline {
            Some(bytes) => request.header(reqwest::header::CONTENT_TYPE, "application/json").body(bytes.clone()),
            None => request.json(body),
        };
        api.send::<T>(request).await
    };
    let policy = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(5))
        .with_max_times(5)
        .with_jitter();
    send.retry(policy)
        .when(CliError::is_transient)
        .notify(|e, delay| progress.notice(&format!("launch failed ({e}); retrying in {} ms", delay.as_millis())))
        .await
}

/// Launches and runs one flow to its end.
pub async fn run_flow(
    api: &Api,
    target: &Target,
    body: &Launch,
    stop: &Stop,
    mut progress: FlowProgress,
) -> Result<FlowRun, CliError> {
    let ephemeral = body.mode == Some(LaunchMode::Ephemeral);
    let mut name = target.name.clone();
    if let Some(flow_id) = target.flow_id
        && name.is_none()
        && !ephemeral
    {
        // Remote runs need flows:read for the stream anyway; this also turns an unknown id into a clear 404.
        let flow: Flow = api.client().flows().get(flow_id).await.map_err(|e| api.error(e))?;
        name = Some(flow.name);
    }
    let started = Instant::now();
    let execution: Execution = launch(api, target, body, &progress).await?;
    let name =
        name.or_else(|| execution.job.as_ref().map(|job| job.flow.name.clone())).unwrap_or_else(|| target.label());
    progress.set_label(&name);
    progress.launched(&execution.id.to_string(), if ephemeral { "ephemeral" } else { "remote" });
    let mut run = FlowRun {
        flow_id: target.flow_id,
        path: target.file.as_ref().map(|f| f.path.clone()),
        name,
        execution_id: Some(execution.id),
        status: RunStatus::Error,
        error: None,
        started_at: Some(execution.created_at.to_string()),
        duration_ms: 0,
        summary: Summary::default(),
        nodes: Vec::new(),
        batch_id: None,
        rows: Vec::new(),
    };
    if ephemeral {
        run_here(api, execution, stop, &progress, &mut run).await?;
    } else {
        follow(api, &execution, stop, &progress, &mut run).await?;
    }
    if run.duration_ms == 0 {
        run.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    }
    progress.finished(&run);
    Ok(run)
}

/// The proxy this process's flow requests go through (`--proxy`, or the environment's), set once at the start.
static PROXY: std::sync::OnceLock<Proxy> = std::sync::OnceLock::new();
/// One engine (its connection pools) for every flow this process runs.
static ENGINE: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();

/// Sets the proxy of the flows run here (before the first runs).
pub fn use_proxy(proxy: Proxy) {
    let _ = PROXY.set(proxy);
}

/// Ephemeral: the runner library executes the claim the launch answered with, here.
async fn run_here(
    api: &Api,
    execution: Execution,
    stop: &Stop,
    progress: &FlowProgress,
    run: &mut FlowRun,
) -> Result<(), CliError> {
    let job =
        execution.job.ok_or_else(|| CliError::runtime("the server answered an ephemeral launch without its job"))?;
    let credentials = api.credentials();
    let client = Client::new(Connection {
        base_url: credentials.base_url.clone(),
        api_key: credentials.api_key.clone(),
        organization_id: Some(credentials.organization_id),
    });
    // Reports extend the lease; when a node runs long, empty reports keep it alive (a third of the lease).
    let lease = (job.lease_expires_at.0 - chrono::Utc::now()).to_std().unwrap_or(Duration::from_secs(30));
    let keep_alive = (lease / 3).max(Duration::from_millis(500));
    let (observer, mut observed) = mpsc::unbounded_channel::<NodeResult>();
    let cancel = stop.token().child_token();
    let options = Options { observer: Some(observer), keep_alive: Some(keep_alive) };
    let started = Instant::now();
    let engine = ENGINE.get_or_init(|| Engine::with_proxy(PROXY.get().cloned().unwrap_or_default()));
    let execute = execute_with(&client, &engine, &job, &cancel, options);
    let collect = async {
        let mut nodes = Vec::new();
        while let Some(node) = observed.recv().await {
            // Results come in the reporter's batches: what is there is printed at once.
            let from = nodes.len();
            nodes.push(node);
            while let Ok(more) = observed.try_recv() {
                nodes.push(more);
            }
            progress.nodes(&nodes[from..]);
        }
        nodes
    };
    let (outcome, nodes) = tokio::join!(execute, collect);
    run.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    run.summary = summarize(&nodes);
    run.nodes = nodes;
    record_outcome(run, outcome, stop)
}

/// What an ephemeral run's end means for its summary; refusals other than a lost job are errors of the command.
fn record_outcome(run: &mut FlowRun, outcome: Result<Outcome, ClientError>, stop: &Stop) -> Result<(), CliError> {
    match outcome {
        Ok(outcome) => {
            run.status = match outcome.status {
                FinalStatus::Succeeded => RunStatus::Succeeded,
                FinalStatus::Failed => RunStatus::Failed,
                FinalStatus::Error => RunStatus::Error,
                FinalStatus::Cancelled => stop.cancelled_status(),
            };
            run.error = outcome.error;
            Ok(())
        }
        Err(ClientError::JobLost(status)) => {
            run.status = RunStatus::Error;
            run.error = Some(format!(
                "the server took the job back ({status}): it was cancelled, or its lease expired while unreachable"
            ));
            Ok(())
        }
        Err(ClientError::Transport(reason)) => Err(CliError::Network(format!("reporting results failed: {reason}"))),
        Err(ClientError::Refused(status)) => Err(CliError::Api {
            status: status.as_u16(),
            code: "unauthorized".to_owned(),
            message: "the server refused the job token".to_owned(),
        }),
        Err(ClientError::Status { status, code, message }) => {
            Err(CliError::Api { status: status.as_u16(), code: code.to_owned(), message })
        }
    }
}

/// Remote: follows the execution's stream until `execution.completed`. When the run is stopped, the execution is
/// cancelled and followed to its end for at most [`CANCEL_GRACE`].
async fn follow(
    api: &Api,
    execution: &Execution,
    stop: &Stop,
    progress: &FlowProgress,
    run: &mut FlowRun,
) -> Result<(), CliError> {
    let path = format!("/executions/{}/stream", execution.id);
    let mut events = EventStream::new(api.clone(), path, None, progress.notifier());
    let mut give_up_at: Option<tokio::time::Instant> = None;
    let mut nodes: Vec<NodeResult> = Vec::new();
    loop {
        let event = tokio::select! {
            event = events.next() => event?,
            () = stop.token().cancelled(), if give_up_at.is_none() => {
                give_up_at = Some(tokio::time::Instant::now() + CANCEL_GRACE);
                let cancel = format!("/executions/{}/cancel", execution.id);
                match api.send_raw(api.request(Method::POST, &cancel)).await {
                    Ok(_) | Err(CliError::Api { status: 409, .. }) => {}
                    Err(e) => progress.notice(&format!("could not cancel the execution: {e}")),
                }
                continue;
            }
            () = async { tokio::time::sleep_until(give_up_at.unwrap_or_else(tokio::time::Instant::now)).await },
                if give_up_at.is_some() => {
                run.status = stop.cancelled_status();
                run.error = Some("cancelled; it did not end in time".to_owned());
                run.summary = summarize(&nodes);
                run.nodes = nodes;
                return Ok(());
            }
        };
        // Events of kinds this build does not know are passed over.
        let Ok(event) = serde_json::from_value::<ExecutionEvent>(event.data) else { continue };
        match event {
            ExecutionEvent::NodeStarted { node_id, .. } => progress.node_started(&node_id),
            ExecutionEvent::NodeCompleted(node) => {
                progress.nodes(std::slice::from_ref(&node));
                nodes.push(*node);
            }
            ExecutionEvent::Completed { status, summary, error, attempt, duration_ms } => {
                nodes.retain(|node| node.attempt == attempt);
                run.status = match RunStatus::from_execution(status) {
                    RunStatus::Cancelled => stop.cancelled_status(),
                    other => other,
                };
                run.error = error;
                run.summary = summary;
                run.duration_ms = duration_ms.and_then(|ms| u64::try_from(ms).ok()).unwrap_or_default();
                run.nodes = nodes;
                return Ok(());
            }
            ExecutionEvent::Status { .. } => {}
        }
    }
}
