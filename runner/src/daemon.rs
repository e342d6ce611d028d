//! The worker loop: register, then one poller long-polls for as many jobs as the runner has free slots (of
//! `concurrency`) and runs each in its own task, while a heartbeat task reports host metrics, keeps leases alive
//! and relays cancellations. Connection failures back off exponentially
//! with jitter. On shutdown the pollers stop taking work; running jobs get a grace period, after which they are
//! abandoned (their leases expire and the control plane hands them to another runner).

use crate::client::{Client, ClientError, Connection};
use crate::engine::Engine;
use crate::execute::execute;
use backon::{BackoffBuilder as _, ExponentialBuilder};
use hookflow_shared::api::fields::{Labels, Name, Refusal, RunnerText};
use hookflow_shared::api::runners::{Host, Job, MAX_JOBS_PER_POLL, Metrics, RegisterRunner, Registered};
use hookflow_shared::{JobId, RunnerId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub connection: Connection,
    pub name: String,
    pub labels: Vec<String>,
    pub concurrency: u32,
    /// How long running jobs may finish after shutdown is asked for.
    pub grace: Duration,
    /// Long-poll wait per request (at most 60 s).
    pub poll_wait_s: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{0}")]
    Client(#[from] ClientError),
    #[error("this runner was removed from the control plane")]
    Removed,
    /// A setting registration would send breaks the field's rule (the server would refuse it).
    #[error("{0}")]
    Refused(String),
}

type Running = Arc<Mutex<HashMap<JobId, CancellationToken>>>;

/// How many times the poller lets other tasks run before counting its free slots.
const GATHER_YIELDS: usize = 4;

fn backoff() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(30))
        .without_max_times()
        .with_jitter()
        .build()
}

/// This machine, as registration reports it.
pub fn host() -> Host {
    let memory_bytes = sysinfo::System::new().map_or(0, |mut system| {
        system.refresh_memory();
        system.total_memory()
    });
    Host {
        hostname: sysinfo::System::host_name().unwrap_or_else(|_| "unknown".into()),
        os: sysinfo::System::long_os_version().unwrap_or_else(|_| std::env::consts::OS.into()),
        arch: std::env::consts::ARCH.into(),
        cpus: std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1)),
        memory_bytes,
    }
}

async fn register(client: &Client, config: &DaemonConfig, stop: &CancellationToken) -> Result<Registered, DaemonError> {
    let refused = |field: &'static str| move |refusal: Refusal| DaemonError::Refused(refusal.for_field(field));
    let registration = RegisterRunner {
        name: Name::try_from(config.name.clone()).map_err(refused("name"))?,
        labels: Labels::try_from(config.labels.clone()).map_err(refused("labels"))?,
        version: RunnerText::try_from(env!("CARGO_PKG_VERSION")).map_err(refused("version"))?,
        max_concurrency: config.concurrency,
        host: host(),
    };
    let mut delays = backoff();
    loop {
        match client.register(&registration).await {
            Ok(registered) => return Ok(registered),
            Err(e) if e.is_transient() => {
                let delay = delays.next().unwrap_or(Duration::from_secs(30));
                tracing::warn!(error = %e, "registration failed; retrying in {delay:?}");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = stop.cancelled() => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

async fn heartbeats(
    client: Client,
    runner_id: RunnerId,
    interval: Duration,
    running: Running,
    stop: CancellationToken,
) {
    let mut system = sysinfo::System::new().ok();
    let mut tick = tokio::time::interval(interval);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        let metrics = system.as_mut().map(|system| {
            system.refresh_cpu_usage();
            system.refresh_memory();
            Metrics {
                cpu_percent: f64::from(system.global_cpu_usage()),
                memory_used_bytes: system.used_memory(),
                load_avg_1m: sysinfo::System::load_average().map_or(0.0, |load| load.one),
            }
        });
        let jobs: Vec<JobId> = running.lock().map(|r| r.keys().copied().collect()).unwrap_or_default();
        match client.heartbeat(runner_id, jobs, metrics).await {
            Ok(reply) => {
                if let Ok(running) = running.lock() {
                    for job in reply.cancel {
                        if let Some(token) = running.get(&job) {
                            tracing::info!(job_id = %job, "the control plane asked to stop a job");
                            token.cancel();
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
        }
    }
}

/// Where claimed jobs go: a free slot each, a task in `jobs`, an entry in `running` while they run.
struct Work {
    slots: Arc<Semaphore>,
    jobs: Arc<Mutex<JoinSet<()>>>,
    running: Running,
}

/// One long poll at a time, asking for as many jobs as there are free slots; each claimed job runs in a task of
/// `jobs` holding one slot. Waits for a free slot before polling again.
async fn poll(
    client: Client,
    engine: Engine,
    runner_id: RunnerId,
    wait_s: u64,
    work: Work,
    stop: CancellationToken,
) -> Result<(), DaemonError> {
    let Work { slots, jobs, running } = work;
    let mut delays = backoff();
    while !stop.is_cancelled() {
        let first = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => return Ok(()) },
            () = stop.cancelled() => return Ok(()),
        };
        // Jobs whose completions were answered in the same batch as the one that freed this slot are about to
        // free theirs: let them run first, so one claim takes them all (a claim costs about as much for one job
        // as for several). When nothing else is ready, this returns at once.
        for _ in 0..GATHER_YIELDS {
            tokio::task::yield_now().await;
        }
        let mut permits = vec![first];
        while let Ok(permit) = slots.clone().try_acquire_owned() {
            permits.push(permit);
        }
        let free = u32::try_from(permits.len()).unwrap_or(u32::MAX).min(MAX_JOBS_PER_POLL);
        let claimed = tokio::select! {
            claimed = client.next_jobs(runner_id, wait_s, free) => claimed,
            () = stop.cancelled() => return Ok(()),
        };
        let claimed = match claimed {
            Ok(claimed) => claimed,
            Err(ClientError::Status { status, .. }) if status == reqwest::StatusCode::NOT_FOUND => {
                return Err(DaemonError::Removed);
            }
            Err(e) if e.is_transient() => {
                let delay = delays.next().unwrap_or(Duration::from_secs(30));
                metrics::counter!("hookflow_runner_reconnects_total").increment(1);
                tracing::warn!(error = %e, "polling failed; retrying in {delay:?}");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = stop.cancelled() => return Ok(()),
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        delays = backoff();
        for (job, permit) in claimed.into_iter().zip(permits) {
            let (client, engine, running) = (client.clone(), engine.clone(), running.clone());
            if let Ok(mut jobs) = jobs.lock() {
                jobs.spawn(async move {
                    run_job(&client, &engine, &job, &running).await;
                    drop(permit);
                });
            }
        }
    }
    Ok(())
}

/// Runs one claimed job to its end (or until the control plane takes it back), keeping the running set current.
async fn run_job(client: &Client, engine: &Engine, job: &Job, running: &Running) {
    let cancel = CancellationToken::new();
    if let Ok(mut running) = running.lock() {
        running.insert(job.job_id, cancel.clone());
    }
    tracing::info!(job_id = %job.job_id, execution_id = %job.execution_id, attempt = job.attempt, flow = %job.flow.name, "running a job");
    let running_jobs = metrics::gauge!("hookflow_runner_jobs_running");
    running_jobs.increment(1.0);
    let status = match execute(client, engine, job, &cancel).await {
        Ok(outcome) => {
            tracing::info!(job_id = %job.job_id, status = outcome.status.as_str(), "job finished");
            outcome.status.as_str()
        }
        Err(e) => {
            tracing::warn!(job_id = %job.job_id, error = %e, "job abandoned");
            "abandoned"
        }
    };
    running_jobs.decrement(1.0);
    metrics::counter!("hookflow_runner_jobs_finished_total", "status" => status).increment(1);
    if let Ok(mut running) = running.lock() {
        running.remove(&job.job_id);
    }
}

/// Runs until `shutdown` (then drains within the grace period) or until the credentials are refused.
pub async fn run(config: DaemonConfig, shutdown: CancellationToken) -> Result<(), DaemonError> {
    let client = Client::new(config.connection.clone());
    let registered = register(&client, &config, &shutdown).await?;
    tracing::info!(runner_id = %registered.id, labels = ?config.labels, concurrency = config.concurrency, "registered");
    let running: Running = Arc::default();
    let beat_stop = CancellationToken::new();
    let beat = tokio::spawn(heartbeats(
        client.clone(),
        registered.id,
        Duration::from_secs(registered.heartbeat_interval_s.max(1)),
        running.clone(),
        beat_stop.clone(),
    ));
    let engine = Engine::new();
    let stop = CancellationToken::new();
    let slots = Arc::new(Semaphore::new(config.concurrency.max(1) as usize));
    let jobs: Arc<Mutex<JoinSet<()>>> = Arc::default();
    let wait_s = config.poll_wait_s.min(60);
    let mut poller = tokio::spawn(poll(
        client.clone(),
        engine,
        registered.id,
        wait_s,
        Work { slots, jobs: jobs.clone(), running: running.clone() },
        stop.clone(),
    ));
    // Deliveries to destinations with this runner's labels, polled beside the jobs (an installed runner's: the
    // server's embedded runner serves every organization and delivers nothing of theirs).
    let deliveries = config
        .connection
        .organization_id
        .is_some()
        .then(|| tokio::spawn(crate::deliver::run(client.clone(), registered.id, wait_s, stop.clone())));
    let ended = tokio::select! {
        () = shutdown.cancelled() => {
            tracing::info!("stopping: no new jobs; waiting for running ones");
            None
        }
        ended = &mut poller => Some(ended),
    };
    stop.cancel();
    // The poller stops at once when told; its result says whether the control plane refused this runner.
    let ended = match ended {
        Some(ended) => ended,
        None => poller.await,
    };
    let outcome = ended.unwrap_or(Ok(()));
    let mut jobs = jobs.lock().map(|mut j| std::mem::take(&mut *j)).unwrap_or_default();
    let drained = tokio::time::timeout(config.grace, async { while jobs.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        let left = running.lock().map(|r| r.len()).unwrap_or(0);
        tracing::warn!(jobs = left, "grace period over; abandoning running jobs to be retried elsewhere");
        jobs.abort_all();
    }
    beat_stop.cancel();
    let _ = beat.await;
    if let Some(deliveries) = deliveries {
        let _ = deliveries.await;
    }
    outcome
}
