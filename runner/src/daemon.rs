//! The worker loop: register, then one poller long-polls for as many jobs as the runner has free slots (of
//! `concurrency`) and runs each in its own task, while a heartbeat task reports host metrics, keeps leases alive
//! and relays cancellations. Connection failures back off exponentially
//! with jitter. On shutdown the pollers stop taking work; running jobs get a grace period, after which they are
//! abandoned. A runner also leaves by itself after `max_jobs` claims or `idle_exit` without a job: its poller
//! then stops between polls (never with a claim in flight) and running jobs finish and are reported. Every way
//! out but a removal deregisters, so what the runner still holds goes back to the queue at once.

use crate::client::{Client, ClientError, Connection};
use crate::engine::Engine;
use crate::execute::execute;
use backon::{BackoffBuilder as _, ExponentialBuilder};
use hookflow_shared::api::fields::{Labels, Name, Refusal, RunnerText};
use hookflow_shared::api::runners::{Host, Job, MAX_JOBS_PER_POLL, Metrics, RegisterRunner, Registered};
use hookflow_shared::{JobId, RunnerId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
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
    /// Leave after claiming this many jobs (when they are finished and reported).
    pub max_jobs: Option<u32>,
    /// Leave after this long without a job running.
    pub idle_exit: Option<Duration>,
    /// The proxy flow requests go through (the server's embedded runner: none, whatever the environment says).
    pub proxy: crate::outbound::Proxy,
}

/// Why the poller stopped taking work by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// Told to stop (SIGTERM, Ctrl-C).
    Shutdown,
    /// `max_jobs` claimed.
    MaxJobs,
    /// No job for `idle_exit`.
    Idle,
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
    concurrency: usize,
    jobs: Arc<Mutex<JoinSet<()>>>,
    running: Running,
    /// When the last job ended (or the runner started): the idle clock.
    last_busy: Arc<Mutex<Instant>>,
}

/// When the runner leaves by itself.
#[derive(Debug, Clone, Copy)]
struct Budget {
    /// Claims left before leaving (`None`: no limit).
    claims_left: Option<u32>,
    idle_exit: Option<Duration>,
}

/// One long poll at a time, asking for as many jobs as there are free slots (and claims left); each claimed job
/// runs in a task of `jobs` holding one slot. Waits for a free slot before polling again. Leaves between polls
/// when the claims are used up or the runner has been idle for `idle_exit` (an idle runner's poll waits no
/// longer than what is left of it).
async fn poll(
    client: Client,
    engine: Engine,
    runner_id: RunnerId,
    wait_s: u64,
    work: Work,
    mut budget: Budget,
    stop: CancellationToken,
) -> Result<Leave, DaemonError> {
    let Work { slots, concurrency, jobs, running, last_busy } = work;
    let mut delays = backoff();
    while !stop.is_cancelled() {
        if budget.claims_left == Some(0) {
            return Ok(Leave::MaxJobs);
        }
        let first = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => return Ok(Leave::Shutdown) },
            () = stop.cancelled() => return Ok(Leave::Shutdown),
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
        let mut wait = wait_s;
        if let Some(idle_exit) = budget.idle_exit {
            // The idle clock runs while no job does; a poll never outlasts what is left of it (nor, while jobs
            // run, the whole of it: one may end during the poll and start the clock).
            let idle = match permits.len() == concurrency {
                true => last_busy.lock().map(|at| at.elapsed()).unwrap_or_default(),
                false => Duration::ZERO,
            };
            let Some(left) = idle_exit.checked_sub(idle).filter(|left| !left.is_zero()) else {
                return Ok(Leave::Idle);
            };
            wait = wait.min(left.as_secs_f64().ceil() as u64).max(1);
        }
        let allowed = budget.claims_left.map_or(usize::MAX, |left| left as usize);
        permits.truncate(allowed.max(1));
        let free = u32::try_from(permits.len()).unwrap_or(u32::MAX).min(MAX_JOBS_PER_POLL);
        let claimed = tokio::select! {
            claimed = client.next_jobs(runner_id, wait, free) => claimed,
            () = stop.cancelled() => return Ok(Leave::Shutdown),
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
                    () = stop.cancelled() => return Ok(Leave::Shutdown),
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        delays = backoff();
        if let Some(left) = budget.claims_left.as_mut() {
            *left = left.saturating_sub(u32::try_from(claimed.len()).unwrap_or(u32::MAX));
        }
        for (job, permit) in claimed.into_iter().zip(permits) {
            let (client, engine, running, last_busy) =
                (client.clone(), engine.clone(), running.clone(), last_busy.clone());
            if let Ok(mut at) = last_busy.lock() {
                *at = Instant::now();
            }
            if let Ok(mut jobs) = jobs.lock() {
                jobs.spawn(async move {
                    run_job(&client, &engine, &job, &running).await;
                    if let Ok(mut at) = last_busy.lock() {
                        *at = Instant::now();
                    }
                    drop(permit);
                });
            }
        }
    }
    Ok(Leave::Shutdown)
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
    // Without a proxy for its flows (the server's embedded runner), none for its calls to the control plane either.
    let client = match config.proxy {
        crate::outbound::Proxy::None => Client::direct(config.connection.clone()),
        _ => Client::new(config.connection.clone()),
    };
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
    let engine = Engine::with_proxy(config.proxy.clone());
    let stop = CancellationToken::new();
    let concurrency = config.concurrency.max(1) as usize;
    let slots = Arc::new(Semaphore::new(concurrency));
    let jobs: Arc<Mutex<JoinSet<()>>> = Arc::default();
    let wait_s = config.poll_wait_s.min(60);
    let work = Work {
        slots,
        concurrency,
        jobs: jobs.clone(),
        running: running.clone(),
        last_busy: Arc::new(Mutex::new(Instant::now())),
    };
    let budget = Budget { claims_left: config.max_jobs, idle_exit: config.idle_exit };
    let mut poller = tokio::spawn(poll(client.clone(), engine, registered.id, wait_s, work, budget, stop.clone()));
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
    let outcome = ended.unwrap_or(Ok(Leave::Shutdown));
    // Leaving by itself, the runner waits for its jobs however long they take (they were claimed to be run);
    // told to stop, it gives them the grace period.
    let grace = match outcome {
        Ok(Leave::MaxJobs) => {
            tracing::info!(max_jobs = config.max_jobs, "claimed --max-jobs jobs: leaving once they are reported");
            Duration::MAX
        }
        Ok(Leave::Idle) => {
            tracing::info!(idle_exit_s = config.idle_exit.map(|d| d.as_secs()), "idle for --idle-exit-s: leaving");
            Duration::MAX
        }
        _ => config.grace,
    };
    let mut jobs = jobs.lock().map(|mut j| std::mem::take(&mut *j)).unwrap_or_default();
    let all_done = async { while jobs.join_next().await.is_some() {} };
    let drained = match grace {
        Duration::MAX => {
            all_done.await;
            Ok(())
        }
        grace => tokio::time::timeout(grace, all_done).await,
    };
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
    // The server's embedded runner (no organization) is the server's own and is never deregistered.
    if outcome.is_ok() && config.connection.organization_id.is_some() {
        // Gone from the runner list at once, and anything still held (a job abandoned after the grace period)
        // back to the queue without waiting for its lease.
        match tokio::time::timeout(Duration::from_secs(10), client.deregister(registered.id)).await {
            Ok(Ok(())) => tracing::info!(runner_id = %registered.id, "deregistered"),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "deregistering failed; the control plane sees this runner go offline")
            }
            Err(_) => tracing::warn!("deregistering timed out; the control plane sees this runner go offline"),
        }
    }
    outcome.map(|_| ())
}
