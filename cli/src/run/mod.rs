//! `hookflow run`: select flows (stored ones by id or tag, and flow files run inline), launch them (at most
//! `--parallel` at once), run or follow each to its end (with `--data`, each flow once per row as one batch:
//! `batch_run`), then print the summary, write the reports and answer the exit code.

pub mod batch_run;
pub mod data;
pub mod flow_run;
pub mod outcome;
pub mod progress;
pub mod report;
pub mod select;
pub mod stop;

use crate::api::Api;
use crate::code::files;
use crate::error::{CliError, code};
use crate::output::Style;
use clap::{Args, ValueEnum};
use data::Data;
use futures_util::StreamExt as _;
use hookflow_runner::outbound::Proxy;
use hookflow_shared::FlowId;
use hookflow_shared::api::executions::{Launch, LaunchMode};
use hookflow_shared::api::flows_as_code::InlineEnvironment;
use hookflow_shared::flow::definition::VersionSelector;
use outcome::FlowRun;
use progress::Progress;
use report::ReportFile;
use select::{FileTarget, Selection, Target};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use stop::{Stop, StopReason};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Execute here with the built-in engine and report to the server (needs only flows:execute).
    Ephemeral,
    /// Queue for the organization's runners and follow the execution's stream (needs flows:read too).
    Remote,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Flow files or folders of them (`.json`, subfolders included) to run without storing them: a bare
    /// definition, a flow object (`{"key", "name", "description", "tags", "definition"}`) or an exported
    /// `hookflow.flow/v1` document (`--env` picks one of its environments). Each file runs as an execution of its
    /// own, recording the file's path and the Git commit and branch of its working tree.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// A flow to run (repeatable).
    #[arg(long = "flow", value_name = "ID")]
    pub flows: Vec<FlowId>,
    /// Run every flow carrying this tag; repeated, a flow must carry them all. Needs flows:read.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Leave out flows (selected by --tag) carrying this tag (repeatable).
    #[arg(long = "exclude-tag", value_name = "TAG")]
    pub exclude_tags: Vec<String>,
    /// Environment key whose variables the runs use (for files: an environment of each exported document).
    #[arg(long = "env", value_name = "KEY")]
    pub environment: Option<String>,
    /// Published version to run: a number or `latest`. Without it the draft runs.
    #[arg(long, value_name = "N|latest", value_parser = parse_version)]
    pub version: Option<VersionSelector>,
    /// A launch variable (repeatable). Names resolve narrowest first: values extracted during the run, launch
    /// variables, the environment's, the flow's own `variables` (its defaults), then organization variables; so
    /// a launch variable overrides the environment and the flow's default. Names under `execution.` are built in.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub variables: Vec<(String, String)>,
    /// A label a runner must carry to take the execution (remote mode; repeatable).
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Where the flows execute: `ephemeral` by default, `remote` with --data (rows are queued for the runners).
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// Run each flow once per row of this file, as one batch: a CSV file with a header row, or a JSON array of
    /// objects; each row's values are launch variables over --var. The rows are queued for the organization's
    /// runners, whose slots bound how many are in flight; the JUnit report has one test case per row.
    #[arg(long, value_name = "FILE")]
    pub data: Option<std::path::PathBuf>,
    /// With --data: the column naming each row's test case (else `row <index>`, from 0).
    #[arg(long = "name-column", value_name = "NAME", requires = "data")]
    pub name_column: Option<String>,
    /// How many flows run at once (with --data, each flow's rows run as one batch).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub parallel: u16,
    /// Stop at the first flow that does not pass: cancel the running ones, launch no more.
    #[arg(long)]
    pub fail_fast: bool,
    /// Cancel whatever still runs after this many seconds (those flows count as failed).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    /// Write a report: `junit=PATH` (JUnit XML) or `json=PATH` (repeatable).
    #[arg(long = "report", value_name = "FORMAT=PATH", value_parser = report::parse_report)]
    pub reports: Vec<ReportFile>,
    /// Send the flows' requests through this proxy (`http://host:port`; ephemeral mode), but to the hosts NO_PROXY
    /// names. Without it, HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY are read as curl reads them.
    #[arg(long, env = "HOOKFLOW_PROXY", value_name = "URL")]
    pub proxy: Option<String>,
}

fn parse_version(text: &str) -> Result<VersionSelector, String> {
    serde_json::from_value(text.parse::<u32>().map_or_else(|_| serde_json::Value::from(text), serde_json::Value::from))
        .map_err(|_| format!("expected a version number or `latest`, got {text:?}"))
}

fn parse_var(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => Ok((name.trim().to_owned(), value.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
}

impl RunArgs {
    /// The mode asked for, else `remote` with --data and `ephemeral` without.
    fn mode(&self) -> Mode {
        self.mode.unwrap_or(if self.data.is_some() { Mode::Remote } else { Mode::Ephemeral })
    }

    fn launch_body(&self) -> Result<Launch, CliError> {
        if self.data.is_some() && self.mode() == Mode::Ephemeral {
            return Err(CliError::usage("--data queues each row for the runners: it runs in --mode remote only"));
        }
        if self.mode() == Mode::Ephemeral && !self.labels.is_empty() {
            return Err(CliError::usage(
                "--label routes queued executions to runners; ephemeral runs execute here (add --mode remote)",
            ));
        }
        Ok(Launch {
            environment: self.environment.clone(),
            version: self.version,
            variables: self.variables.iter().cloned().collect::<BTreeMap<_, _>>(),
            runner_labels: CliError::option("--label", self.labels.clone())?,
            mode: Some(if self.mode() == Mode::Ephemeral { LaunchMode::Ephemeral } else { LaunchMode::Queued }),
            priority: None,
            rows: None,
        })
    }
}

/// Stops the run at the deadline or on Ctrl-C.
fn watch_for_stop(stop: &Arc<Stop>, timeout: Option<u64>) -> tokio::task::JoinHandle<()> {
    let stop = Arc::clone(stop);
    tokio::spawn(async move {
        let deadline = async {
            match timeout {
                Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = deadline => stop.stop(StopReason::TimedOut),
            _ = tokio::signal::ctrl_c() => stop.stop(StopReason::Interrupted),
            () = stop.token().cancelled() => {}
        }
    })
}

/// The flow files `paths` name, as targets; `--env` chooses each document's environment.
fn file_targets(paths: &[PathBuf], environment: Option<&str>) -> Result<Vec<Target>, CliError> {
    let mut targets = Vec::new();
    for path in files::expand(paths)? {
        let file = files::read(&path)?;
        let environment = match environment {
            None => None,
            Some(key) => match file.environments.get(key) {
                Some(variables) => Some(InlineEnvironment { key: key.to_owned(), variables: variables.clone() }),
                None => {
                    return Err(CliError::usage(format!(
                        "--env {key}: {} has no environment `{key}` (only exported {} documents carry environments)",
                        path.display(),
                        files::DOCUMENT_FORMAT
                    )));
                }
            },
        };
        let (git_commit, git_ref) = files::git_of(&path);
        let shown = path.display().to_string();
        targets.push(Target {
            flow_id: None,
            name: Some(file.name.clone().unwrap_or_else(|| shown.clone())),
            file: Some(Arc::new(FileTarget {
                path: shown,
                definition: file.definition,
                environment,
                git_commit,
                git_ref,
            })),
        });
    }
    Ok(targets)
}

pub async fn run(api: Api, args: RunArgs, style: Style) -> Result<ExitCode, CliError> {
    flow_run::use_proxy(match args.proxy.clone().filter(|p| !p.trim().is_empty()) {
        Some(url) => Proxy::Url(url),
        None => Proxy::FromEnvironment,
    });
    let mut body = args.launch_body()?;
    let data = args.data.as_deref().map(|path| Data::read(path, args.name_column.as_deref())).transpose()?;
    if let Some(data) = &data {
        body.rows = Some(data.rows.clone());
    }
    let data = data.map(Arc::new);
    let selection =
        Selection { flow_ids: args.flows.clone(), tags: args.tags.clone(), exclude_tags: args.exclude_tags.clone() };
    let mut targets = file_targets(&args.paths, args.environment.as_deref())?;
    if targets.is_empty() || !selection.flow_ids.is_empty() || !selection.tags.is_empty() {
        targets.extend(select::targets(&api, &selection).await?);
    }
    let progress = Progress::new(style, targets.len());
    let stop = Arc::new(Stop::default());
    let watcher = watch_for_stop(&stop, args.timeout);
    let run_one = |target: Target| {
        let (api, body, stop, progress) = (api.clone(), body.clone(), Arc::clone(&stop), Arc::clone(&progress));
        let data = data.clone();
        let fail_fast = args.fail_fast;
        async move {
            if stop.is_stopped() {
                let path = target.file.as_ref().map(|f| f.path.clone());
                return Ok(FlowRun::not_run(target.flow_id, path, target.label()));
            }
            let flow_progress = progress.flow(&target.label());
            let result = match &data {
                Some(data) => batch_run::run_batch(&api, &target, &body, data, &stop, flow_progress).await,
                None => flow_run::run_flow(&api, &target, &body, &stop, flow_progress).await,
            };
            match &result {
                Ok(run) if !run.passed() && fail_fast => stop.stop(StopReason::FailFast),
                Ok(_) => {}
                // An API refusal or a lost network ends the whole run.
                Err(_) => stop.stop(StopReason::Interrupted),
            }
            result
        }
    };
    let mut results: Vec<(usize, Result<FlowRun, CliError>)> =
        futures_util::stream::iter(targets.into_iter().enumerate())
            .map(|(i, target)| {
                let run = run_one(target);
                async move { (i, run.await) }
            })
            .buffer_unordered(usize::from(args.parallel))
            .collect()
            .await;
    watcher.abort();
    progress.finish();
    results.sort_by_key(|(i, _)| *i);
    let mut runs = Vec::new();
    let mut first_error = None;
    for (_, result) in results {
        match result {
            Ok(run) => runs.push(run),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if !runs.is_empty() {
        println!("{}", report::summary(&runs));
    }
    report::write_all(&args.reports, &runs)?;
    if let Some(e) = first_error {
        return Err(e);
    }
    if stop.reason() == Some(StopReason::TimedOut) {
        eprintln!("hookflow: --timeout of {} s ran out", args.timeout.unwrap_or_default());
    }
    Ok(ExitCode::from(if runs.iter().all(FlowRun::passed) { code::PASSED } else { code::FLOW_FAILED }))
}
