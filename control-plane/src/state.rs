//! `AppState`: what every handler can reach — the pool, settings, the capture cache and writer, the stream hub
//! and the shutdown signal — and `AppState::start`, which also starts the background tasks.

use crate::capture::cache::EndpointCache;
use crate::capture::writer::CaptureWriter;
use crate::webhooks::hub::StreamHub;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct AppState(Arc<Inner>);

#[derive(Debug)]
pub struct Inner {
    pub pool: PgPool,
    pub settings: Settings,
    pub endpoints: EndpointCache,
    pub captures: CaptureWriter,
    pub hub: Arc<StreamHub>,
    /// Wakes long-polling claims.
    pub queue: crate::runner_protocol::QueueSignal,
    /// Ids of executions with new events (execution streams filter their own).
    pub execution_wakes: tokio::sync::broadcast::Sender<uuid::Uuid>,
    /// Cancelled when the server stops: streams end, background tasks return.
    pub shutdown: CancellationToken,
}

/// Settings that handlers read; built once at startup.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Base URL clients reach the server at, without a trailing slash (capture URLs are built from it).
    pub public_url: String,
    /// Whether server-side requests (replay) may go to loopback, private and link-local addresses.
    pub allow_private_targets: bool,
    /// How often retention runs.
    pub retention_interval: Duration,
    /// Interval of `: keep-alive` comments on idle streams.
    pub stream_keep_alive: Duration,
    /// Events buffered per stream subscriber before it is told it lagged.
    pub stream_buffer: usize,
    /// Encrypts secrets at rest.
    pub master_key: crate::crypto::MasterKey,
    /// How long a claim (or the last heartbeat or result) holds a job.
    pub lease: Duration,
    /// How often runners are asked to send heartbeats; offline after three missed.
    pub heartbeat_interval: Duration,
    /// How often expired leases are looked for.
    pub rescue_interval: Duration,
    /// How often due schedules are looked for.
    pub schedule_interval: Duration,
    /// Hash of the embedded runner's per-process key, which claims for every organization.
    pub embedded_runner_key_hash: Option<Vec<u8>>,
}

impl Settings {
    pub fn new(public_url: impl Into<String>) -> Self {
        Self {
            public_url: public_url.into(),
            allow_private_targets: false,
            retention_interval: Duration::from_secs(60),
            stream_keep_alive: Duration::from_secs(15),
            stream_buffer: 1024,
            master_key: crate::crypto::MasterKey::random(),
            lease: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(10),
            rescue_interval: Duration::from_secs(1),
            schedule_interval: Duration::from_secs(1),
            embedded_runner_key_hash: None,
        }
    }
}

impl AppState {
    /// Builds the state and starts the capture writer, the LISTEN task and retention; all stop with `shutdown`
    /// (the writer once the last request using it is done).
    pub fn start(pool: PgPool, settings: Settings, shutdown: CancellationToken) -> Self {
        let state = Self(Arc::new(Inner {
            captures: CaptureWriter::start(pool.clone()),
            hub: StreamHub::new(pool.clone(), shutdown.clone(), settings.stream_buffer),
            endpoints: EndpointCache::default(),
            queue: crate::runner_protocol::QueueSignal::default(),
            execution_wakes: tokio::sync::broadcast::channel(4096).0,
            pool,
            settings,
            shutdown,
        }));
        tokio::spawn(crate::notify::run(state.clone()));
        tokio::spawn(crate::retention::run(state.clone()));
        tokio::spawn(crate::runner_protocol::rescue::run(state.clone()));
        tokio::spawn(crate::scheduler::run(state.clone()));
        state
    }
}

/// Runs `pass` every `interval` until shutdown; a failed pass is logged as `what` and tried again next time.
pub async fn every<F, Fut, T>(shutdown: CancellationToken, interval: Duration, what: &str, mut pass: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        if let Err(e) = pass().await {
            tracing::warn!(error = %e, "{what} failed; retrying");
        }
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}
