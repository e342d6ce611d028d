//! `hookflow-runner`: the worker daemon that claims flow executions from a control plane and runs them.

use clap::Parser;
use hookflow_runner::client::Connection;
use hookflow_runner::daemon::{self, DaemonConfig, DaemonError};
use hookflow_shared::OrgId;
use std::process::ExitCode;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// mimalloc, as in `hookflow-server`: with glibc's allocator a third of a busy runner's user time went to
/// `malloc`/`free` (`perf` during `hookflow-bench queue`).
#[global_allocator]
static ALLOCATOR: hookflow_alloc::Allocator = hookflow_alloc::Allocator;

#[derive(Debug, Parser)]
#[command(
    name = "hookflow-runner",
    version,
    about = "hookflow runner: claims flow executions from a hookflow control plane and runs them where your APIs are reachable.",
    long_about = "hookflow runner: claims flow executions from a hookflow control plane and runs them where your APIs \
        are reachable. It needs only outbound HTTP(S) to the control plane: it registers, long-polls for jobs, \
        sends heartbeats with host metrics and reports every node's result.",
    after_help = "Create the key with the `runner` preset (scope runner:complete), for example:\n  \
        SERVICE_URL=https://hookflow.example.com SERVICE_API_KEY=hf_... SERVICE_ORGANIZATION_ID=<uuid> \\\n    \
        hookflow-runner --labels linux,staging --concurrency 4\n\n\
        On SIGTERM or Ctrl-C the runner stops taking jobs, lets running ones finish within --grace-s, deregisters and \
        exits 0. With --max-jobs or --idle-exit-s it also leaves by itself (exit 0, deregistered), the shape \
        autoscalers want (scale from zero with one-shot runners)."
)]
struct Args {
    /// Base URL of the control plane.
    #[arg(long, env = "SERVICE_URL")]
    url: String,
    /// API key with the runner:complete scope (the `runner` preset).
    #[arg(long, env = "SERVICE_API_KEY", hide_env_values = true)]
    api_key: String,
    /// Organization id the key belongs to.
    #[arg(long, env = "SERVICE_ORGANIZATION_ID")]
    organization_id: OrgId,
    /// Name shown in the runner list (default: the host name).
    #[arg(long, env = "RUNNER_NAME")]
    name: Option<String>,
    /// Labels this runner carries, comma-separated; it takes jobs whose required labels it all has.
    #[arg(long, env = "RUNNER_LABELS", value_delimiter = ',')]
    labels: Vec<String>,
    /// Jobs run at the same time.
    #[arg(long, env = "RUNNER_CONCURRENCY", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    concurrency: u32,
    /// Seconds running jobs may take to finish after SIGTERM.
    #[arg(long, env = "RUNNER_GRACE_S", default_value_t = 30)]
    grace_s: u64,
    /// Leave after this many jobs: exit 0 once they are finished and reported (a one-shot runner:
    /// `--max-jobs 1`). The runner never claims more, whatever its concurrency.
    #[arg(long, env = "RUNNER_MAX_JOBS", value_parser = clap::value_parser!(u32).range(1..))]
    max_jobs: Option<u32>,
    /// Leave after this many seconds without a job running: exit 0, deregistered.
    #[arg(long, env = "RUNNER_IDLE_EXIT_S", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    idle_exit_s: Option<u64>,
    /// Seconds each long poll waits for a job (at most 60).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=60))]
    poll_wait_s: u64,
    /// Allow a plain-http control plane on another machine (the key then crosses the network in clear text).
    /// The variable takes 1/0, true/false, yes/no, on/off.
    #[arg(long, env = "SERVICE_INSECURE_HTTP", value_parser = clap::builder::BoolishValueParser::new())]
    insecure_http: bool,
    /// Serve Prometheus metrics (jobs running, results posted, reconnects) at `GET /metrics` on this address,
    /// e.g. 127.0.0.1:9465. Off when unset.
    #[arg(long, env = "RUNNER_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Send flow requests through this proxy (`http://host:port`), but to the hosts NO_PROXY names. Without it,
    /// HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY are read as curl reads them.
    #[arg(long, env = "HOOKFLOW_PROXY")]
    proxy: Option<String>,
    /// Log filter (tracing syntax), e.g. `info` or `hookflow_runner=debug`.
    #[arg(long, env = "RUST_LOG", default_value = "info")]
    log: String,
}

async fn shutdown_signal(token: CancellationToken) {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => {
                let _ = interrupt.await;
                token.cancel();
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
    token.cancel();
}

/// Installs the metrics recorder and answers every request on `address` with the metrics in the Prometheus text
/// format (a scraper asks for `GET /metrics`; nothing else is served there).
async fn serve_metrics(address: std::net::SocketAddr) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let handle =
        metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder().map_err(std::io::Error::other)?;
    let listener = tokio::net::TcpListener::bind(address).await?;
    tracing::info!(address = %listener.local_addr()?, "metrics listening");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let handle = handle.clone();
            tokio::spawn(async move {
                // The request itself is not needed: read its head (bounded) so the client sees a normal exchange.
                let mut head = [0u8; 4096];
                let _ = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut head)).await;
                let body = handle.render();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match std::env::var("HOOKFLOW_RUNNER_RT_TMP").as_deref() {
        Ok("current") => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        Ok("one") => tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build(),
        _ => tokio::runtime::Builder::new_multi_thread().enable_all().build(),
    };
    let Ok(runtime) = runtime else {
        eprintln!("hookflow-runner: cannot start the async runtime");
        return ExitCode::FAILURE;
    };
    let base_url = match hookflow_runner::client::check_base_url(&args.url, args.insecure_http) {
        Ok(url) => url,
        Err(e) => {
            eprintln!("hookflow-runner: SERVICE_URL (--url): {e}");
            return ExitCode::from(2);
        }
    };
    let config = DaemonConfig {
        connection: Connection { base_url, api_key: args.api_key.into(), organization_id: Some(args.organization_id) },
        name: args.name.unwrap_or_else(|| daemon::host().hostname),
        labels: args.labels.into_iter().map(|l| l.trim().to_owned()).filter(|l| !l.is_empty()).collect(),
        concurrency: args.concurrency,
        grace: Duration::from_secs(args.grace_s),
        poll_wait_s: args.poll_wait_s,
        max_jobs: args.max_jobs,
        idle_exit: args.idle_exit_s.map(Duration::from_secs),
        proxy: match args.proxy.filter(|p| !p.trim().is_empty()) {
            Some(url) => hookflow_runner::outbound::Proxy::Url(url),
            None => hookflow_runner::outbound::Proxy::FromEnvironment,
        },
    };
    runtime.block_on(async {
        if let Some(address) = args.metrics_listen
            && let Err(e) = serve_metrics(address).await
        {
            eprintln!("hookflow-runner: cannot listen for metrics on {address}: {e}");
            return ExitCode::from(2);
        }
        let shutdown = CancellationToken::new();
        tokio::spawn(shutdown_signal(shutdown.clone()));
        match daemon::run(config, shutdown).await {
            Ok(()) => {
                tracing::info!("stopped");
                ExitCode::SUCCESS
            }
            Err(DaemonError::Client(e)) => {
                eprintln!("hookflow-runner: {e} (control plane {})", args.url);
                ExitCode::from(2)
            }
            Err(DaemonError::Refused(e)) => {
                eprintln!("hookflow-runner: {e}");
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("hookflow-runner: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
