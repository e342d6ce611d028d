//! What `hookflow-server` does for each subcommand: serve (open storage, migrate, bootstrap, listen until
//! SIGINT/SIGTERM, then stop the embedded cluster) or run an operator command.

pub mod backup;
pub mod bootstrap;
pub mod config;
pub mod embedded_runner;
pub mod fd_limit;
pub mod operator;
pub mod rotate;

use crate::api;
use crate::db::data_dir;
use crate::db::storage::{BoxError, Opener, Storage};
use crate::state::{AppState, Settings};
use config::{Cli, Command, EmbeddedRunner, LogArgs, LogFormat, ServeArgs, StorageArgs};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub async fn run(cli: Cli) -> Result<(), BoxError> {
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(cli.storage, cli.serve).await,
        Command::Orgs(command) => {
            let storage = Storage::open(&cli.storage.options(), Opener::Operator, 2).await?;
            let result = operator::orgs(&storage.pool, command).await;
            storage.close().await?;
            result
        }
        Command::Backup { to, include_master_key } => {
            backup::backup(&cli.storage, &cli.serve, &to, include_master_key).await
        }
        Command::Restore { from } => backup::restore(&cli.storage, &from).await,
        Command::Openapi { max_capture_rate } => {
            let mut document = crate::api::openapi_document();
            crate::api::openapi::state_server_limits(&mut document, max_capture_rate);
            println!("{}", serde_json::to_string_pretty(&document)?);
            Ok(())
        }
        Command::Keys(command) => {
            let storage = Storage::open(&cli.storage.options(), Opener::Operator, 2).await?;
            let master = data_dir::master_keys(
                &cli.storage.data_dir,
                cli.serve.master_key.as_deref(),
                &cli.serve.previous_master_keys,
            );
            let result = match master {
                Ok(master) => operator::keys(&storage.pool, master, command).await,
                Err(e) => Err(e.into()),
            };
            storage.close().await?;
            result
        }
        Command::Users(command) => {
            let storage = Storage::open(&cli.storage.options(), Opener::Operator, 2).await?;
            let result = operator::users(&storage.pool, command).await;
            storage.close().await?;
            result
        }
    }
}

async fn serve(storage_args: StorageArgs, args: ServeArgs) -> Result<(), BoxError> {
    // A bad pool stops the start before anything is bound or opened.
    crate::pools::declared(&args.runner_pools)?;
    // Bind every listener first: a taken port fails fast, before a database or any task is started.
    let listeners = Listeners::bind(&args).await?;
    let statement_timeout = std::time::Duration::from_secs(args.limits.statement_timeout_s.max(1));
    let storage =
        Storage::open_with(&storage_args.options(), Opener::Server, args.db_max_connections, statement_timeout).await?;
    let result = serve_with(&storage, &storage_args, &args, listeners).await;
    let closed = storage.close().await;
    result.and(closed)
}

/// The server's listeners, bound before anything else starts.
struct Listeners {
    api: TcpListener,
    local: std::net::SocketAddr,
    metrics: Option<TcpListener>,
}

impl Listeners {
    /// Binds the API listener, then the metrics listener (a refusal to bind either stops the start, naming the
    /// flag that chooses the address).
    async fn bind(args: &ServeArgs) -> Result<Self, BoxError> {
        let api = crate::http::listener::bind(args.listen)
            .map_err(|e| format!("cannot listen on {}: {e} (set --listen)", args.listen))?;
        let local = api.local_addr()?;
        let metrics = match args.metrics_listen {
            config::MetricsListen::Off => None,
            config::MetricsListen::At(address) => Some(TcpListener::bind(address).await.map_err(|e| {
                format!("cannot listen for metrics on {address}: {e} (set --metrics-listen to another address, or off)")
            })?),
        };
        Ok(Self { api, local, metrics })
    }
}

async fn serve_with(
    storage: &Storage,
    storage_args: &StorageArgs,
    args: &ServeArgs,
    listeners: Listeners,
) -> Result<(), BoxError> {
    let Listeners { api: listener, local, metrics } = listeners;
    let metrics_listens = metrics.is_some();
    data_dir::create(&storage_args.data_dir)?;
    let master_keys =
        data_dir::master_keys(&storage_args.data_dir, args.master_key.as_deref(), &args.previous_master_keys)?;
    let public_url = args.public_url.clone().unwrap_or_else(|| format!("http://{local}"));
    let public_url = public_url.trim_end_matches('/').to_owned();
    if let Some(done) = bootstrap::first_start(&storage.pool, &args.people.owner_email).await? {
        println!("{}", bootstrap::announcement(&done, &public_url));
    }
    let smtp = args.mail.settings()?;
    let capture_url = args.capture_url.as_deref().map_or(public_url.clone(), |u| u.trim_end_matches('/').to_owned());
    let settings = Settings {
        public_url: public_url.clone(),
        capture_url,
        allow_private_targets: args.allow_private_targets,
        retention_interval: std::time::Duration::from_secs(args.retention_interval_s.max(1)),
        retention: crate::state::RetentionDefaults {
            execution_days: args.default_execution_retention_days,
            audit_days: args.default_audit_retention_days,
            min_audit_days: args.min_audit_retention_days,
        },
        quotas: crate::quota::QuotaDefaults {
            stored_bytes: args.default_stored_bytes,
            endpoints: args.default_endpoints,
            flows: args.default_flows,
            captures_per_day: args.default_captures_per_day,
        },
        quota_refresh: std::time::Duration::from_millis(args.quota_refresh_ms),
        master_key: master_keys.keyring(),
        master_key_file: master_keys.file.clone(),
        lease: std::time::Duration::from_secs(args.lease_s),
        heartbeat_interval: std::time::Duration::from_secs((args.lease_s / 3).clamp(1, 10)),
        limits: listener_limits(&args.limits, database_connections(storage_args, args), metrics_listens),
        trusted_proxies: args.limits.trusted_proxies.clone().reading(args.limits.forwarded_header),
        key_rate_per_s: args.limits.key_rate_limit,
        max_capture_rate_per_s: args.limits.max_capture_rate,
        streams_per_key: args.limits.streams_per_key.max(1),
        access_token_ttl: std::time::Duration::from_secs(args.people.access_token_ttl_s),
        session_ttl: std::time::Duration::from_secs(args.people.session_ttl_days * 86_400),
        signup: args.people.signup,
        smtp,
        max_organizations_per_person: args.people.max_organizations_per_person,
        credential_failures_per_minute: args.limits.credential_failures_per_minute,
        embedded_runner: crate::state::EmbeddedRunnerLimits::new(
            args.embedded_runner_concurrency,
            args.embedded_runner_org_share,
            std::time::Duration::from_secs(args.embedded_runner_max_run_s),
        ),
        issuers: args.people.oidc_issuers.clone(),
        triggers: args.triggers.settings(),
        waits: args.limits.waits(),
        runner_pools: crate::pools::declared(&args.runner_pools)?.into(),
        ..Settings::new(public_url.clone())
    };
    let run_embedded = match args.embedded_runner {
        EmbeddedRunner::On => true,
        EmbeddedRunner::Off => false,
        EmbeddedRunner::Auto => storage_args.database_url().is_none(),
    };
    let embedded_key = run_embedded.then(embedded_runner::new_key);
    let settings = Settings { embedded_runner_key_hash: embedded_key.as_ref().map(|k| k.hash.clone()), ..settings };
    let shutdown = CancellationToken::new();
    let state = AppState::with_databases(storage.databases.clone(), settings, shutdown.clone());
    crate::tasks::start(&state);
    tokio::spawn(stop_on_signal(shutdown.clone()));
    if let Some(key) = embedded_key {
        embedded_runner::spawn(local, key, args.embedded_runner_concurrency, shutdown.clone());
    }
    if let Some(metrics) = metrics {
        tracing::info!(address = %metrics.local_addr()?, "metrics listening");
        tokio::spawn(crate::metrics::endpoint::serve(
            metrics,
            state.databases.clone(),
            state.settings.heartbeat_interval,
            state.settings.runner_pools.clone(),
            state.shutdown.clone(),
        ));
    }
    // What starting freed on this thread (the migrations, the first start's writes) goes back to the system now,
    // not whenever the allocator next gets round to it: an idle fleet's server held 33 MiB before its runners
    // came, 30 with this.
    hookflow_alloc::release_freed_memory();
    tracing::info!(address = %local, public_url, "hookflow-server listening");
    api::serve(listener, state).await?;
    tracing::info!("shutting down");
    Ok(())
}

/// The database connections the pools may hold at once (the primary's and the read replica's).
fn database_connections(storage_args: &StorageArgs, args: &ServeArgs) -> u64 {
    let pools = if storage_args.read_database_url.as_deref().is_some_and(|u| !u.is_empty()) { 2 } else { 1 };
    u64::from(args.db_max_connections) * pools
}

fn listener_limits(
    args: &config::LimitArgs,
    database_connections: u64,
    metrics: bool,
) -> crate::http::listener::Limits {
    use std::time::Duration;
    // The API listener, the metrics one, and the LISTEN connection of each pool.
    let listeners = 1 + u64::from(metrics) + 2;
    let fitted =
        fd_limit::fit(args.max_connections.max(1), args.max_proven_connections, database_connections, listeners);
    crate::http::listener::Limits {
        connections: crate::http::listener::connections::ConnectionLimits {
            max: fitted.unproven,
            per_address: args.max_connections_per_address.max(1),
            max_proven: fitted.proven,
            idle_timeout: Duration::from_secs(args.idle_timeout_s.max(1)),
        },
        header_timeout: Duration::from_secs(args.header_timeout_s.max(1)),
        body_timeout: Duration::from_secs(args.body_timeout_s.max(1)),
    }
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    shutdown.cancel();
}

/// Log lines held for the writer thread before new ones are dropped (counted in
/// `hookflow_log_lines_dropped_total`).
const LOG_LINES_BUFFERED: usize = 16_384;

/// Logs go to standard error, as text or JSON, filtered by `--log`, through a writer thread: a reader of standard
/// error that stops reading (a full pipe, a stalled collector) costs dropped lines, never a stalled request. The
/// guard writes what is still held when it is dropped at exit.
pub fn init_logging(args: &LogArgs) -> tracing_appender::non_blocking::WorkerGuard {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LOG_LINES_BUFFERED)
        .thread_name("hookflow-log")
        .finish(std::io::stderr());
    crate::metrics::count_dropped_log_lines(writer.error_counter());
    // Colour only for a person at a terminal: files and collectors get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match args.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
    guard
}
