//! `hookflow run`: select flows, launch them (at most `--parallel` at once), run or follow each to its end, then
//! print the summary, write the reports and answer the exit code.

pub mod flow_run;
pub mod outcome;
pub mod progress;
pub mod report;
pub mod select;
pub mod stop;

use crate::api::Api;
use crate::error::{CliError, code};
use crate::output::Style;
use clap::{Args, ValueEnum};
use futures_util::StreamExt as _;
use hookflow_runner::outbound::Proxy;
use hookflow_shared::FlowId;
use hookflow_shared::api::executions::{Launch, LaunchMode};
use hookflow_shared::flow::definition::VersionSelector;
use outcome::FlowRun;
use progress::Progress;
use report::ReportFile;
use select::{Selection, Target};
use std::collections::BTreeMap;
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
    /// A flow to run (repeatable).
    #[arg(long = "flow", value_name = "ID")]
    pub flows: Vec<FlowId>,
    /// Run every flow carrying this tag; repeated, a flow must carry them all. Needs flows:read.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Leave out flows (selected by --tag) carrying this tag (repeatable).
    #[arg(long = "exclude-tag", value_name = "TAG")]
    pub exclude_tags: Vec<String>,
    /// Environment key whose variables the runs use.
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
    /// Where the flows execute.
    #[arg(long, value_enum, default_value_t = Mode::Ephemeral)]
    pub mode: Mode,
    /// How many flows run at once.
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
    fn launch_body(&self) -> Result<Launch, CliError> {
        if self.mode == Mode::Ephemeral && !self.labels.is_empty() {
            return Err(CliError::usage(
                "--label routes queued executions to runners; ephemeral runs execute here (add --mode remote)",
            ));
        }
        Ok(Launch {
            environment: self.environment.clone(),
            version: self.version,
            variables: self.variables.iter().cloned().collect::<BTreeMap<_, _>>(),
            runner_labels: CliError::option("--label", self.labels.clone())?,
            mode: Some(if self.mode == Mode::Ephemeral { LaunchMode::Ephemeral } else { LaunchMode::Queued }),
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

pub async fn run(api: Api, args: RunArgs, style: Style) -> Result<ExitCode, CliError> {
    flow_run::use_proxy(match args.proxy.clone().filter(|p| !p.trim().is_empty()) {
        Some(url) => Proxy::Url(url),
        None => Proxy::FromEnvironment,
    });
    let body = args.launch_body()?;
    let selection =
        Selection { flow_ids: args.flows.clone(), tags: args.tags.clone(), exclude_tags: args.exclude_tags.clone() };
    let targets = select::targets(&api, &selection).await?;
    let progress = Progress::new(style, targets.len());
    let stop = Arc::new(Stop::default());
    let watcher = watch_for_stop(&stop, args.timeout);
    let run_one = |target: Target| {
        let (api, body, stop, progress) = (api.clone(), body.clone(), Arc::clone(&stop), Arc::clone(&progress));
        let fail_fast = args.fail_fast;
        async move {
            if stop.is_stopped() {
                return Ok(FlowRun::not_run(target.flow_id, target.label()));
            }
            let result = flow_run::run_flow(&api, &target, &body, &stop, progress.flow(&target.label())).await;
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
