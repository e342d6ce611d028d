//! `hookflow-bench waits`: executions waiting at once in webhook nodes. The real server binary runs in its own
//! process (its RSS and CPU are its own); runners in this process, with a slot per execution, run them all, each
//! long-polling the server for its capture. Measured: the server's RSS and CPU idle with the runner connected, then
//! while every execution waits; then captures sent at a steady rate, one per execution, and for each the time from
//! the capture's receipt (server clock) to its node's end (the runner's clock, same machine): capture -> woken,
//! beside the captures' own answer times.

use crate::load::{BoxError, p50_p99_ms};
use crate::server_process::{ServerProcess, database, postgres_cpu, start_server, usage};
use chrono::{DateTime, Utc};
use hookflow_runner::client::Connection;
use hookflow_runner::daemon::{DaemonConfig, run as run_daemon};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Executions waiting at once.
    #[arg(long, default_value_t = 1000)]
    executions: usize,
    /// Seconds the server is watched idle, and then while they wait.
    #[arg(long, default_value_t = 15)]
    watch_seconds: u64,
    /// Endpoints they wait on (execution n on endpoint n mod this): every capture wakes the waiters of its
    /// endpoint, which each look for their match.
    #[arg(long, default_value_t = 1)]
    endpoints: usize,
    /// Captures sent per second once they all wait (one per execution).
    #[arg(long, default_value_t = 100)]
    rate: u32,
}

/// The server's RSS (MiB), its CPU (share of a core) and PostgreSQL's over `seconds`.
async fn watch(server: &ServerProcess, seconds: u64) -> (f64, f64, f64) {
    let pid = server.child.id();
    let (_, cpu_before) = usage(pid);
    let pg_before = postgres_cpu(&server.dir);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let (rss, cpu_after) = usage(pid);
    let seconds = seconds as f64;
    (rss, (cpu_after - cpu_before) / seconds, (postgres_cpu(&server.dir) - pg_before) / seconds)
}

async fn count(pool: &sqlx::PgPool, status: &str) -> Result<i64, BoxError> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM executions WHERE status = $1").bind(status).fetch_one(pool).await?)
}

/// Polls until `status` holds `n` executions (at most `within`).
async fn until(pool: &sqlx::PgPool, status: &str, n: usize, within: Duration) -> Result<(), BoxError> {
    let deadline = Instant::now() + within;
    while count(pool, status).await? < n as i64 {
        if Instant::now() > deadline {
            return Err(format!("only {} of {n} executions are {status}", count(pool, status).await?).into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    let server = start_server()?;
    let pool = database(&server)?;
    let org: hookflow_shared::OrgId = server.org.parse()?;
    let api =
        hookflow_client::Client::new(&server.base, hookflow_client::Credentials::api_key(server.key.clone(), org));
    sqlx::query("UPDATE organizations SET capture_rate_limit_per_s = 100000").execute(&pool).await?;
    // Execution `run` waits on endpoint `run % endpoints`.
    let mut endpoints = Vec::new();
    for n in 0..args.endpoints.max(1) {
        let webhook: Value = api.post("/webhooks", &json!({"name": format!("waits-{n}")})).await?;
        let id = webhook["id"].as_str().ok_or("no endpoint id")?.to_owned();
        endpoints.push((id, webhook["capture_url"].as_str().ok_or("no capture URL")?.to_owned()));
    }
    let mut flows = Vec::new();
    for (n, (endpoint, _)) in endpoints.iter().enumerate() {
        let definition = json!({"timeout_s": 900, "nodes": [{"id": "w", "kind": "webhook",
            "webhook": {"webhook_id": endpoint, "q": "header.x-run:{{run}}", "timeout_ms": 600_000}}]});
        let flow: Value = api.post("/flows", &json!({"name": format!("waits-{n}"), "definition": definition})).await?;
        flows.push(flow["id"].as_str().ok_or("no flow id")?.to_owned());
    }

    // Runners take at most 1,000 slots each: as many runners as the executions need, in this process.
    let stop = CancellationToken::new();
    let runner_count = args.executions.div_ceil(500).max(1);
    let slots = u32::try_from(args.executions.div_ceil(runner_count))? + 8;
    let mut runners = Vec::new();
    for n in 0..runner_count {
        let config = DaemonConfig {
            connection: Connection {
                base_url: server.base.clone(),
                api_key: server.key.clone().into(),
                organization_id: Some(org),
            },
            name: format!("waits-{n}"),
            labels: Vec::new(),
            concurrency: slots,
            grace: Duration::from_secs(1),
            poll_wait_s: 20,
            max_jobs: None,
            idle_exit: None,
            proxy: hookflow_runner::outbound::Proxy::None,
        };
        runners.push(tokio::spawn(run_daemon(config, stop.clone())));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_idle, cpu_idle, pg_idle) = watch(&server, args.watch_seconds).await;

    let launched = Instant::now();
    let mut launches = tokio::task::JoinSet::new();
    for run in 0..args.executions {
        let (api, flow) = (api.clone(), flows[run % flows.len()].clone());
        launches.spawn(async move {
            let body = json!({"variables": {"run": run.to_string()}});
            api.post::<_, Value>(&format!("/flows/{flow}/launch"), &body).await
        });
        if launches.len() >= 32 {
            launches.join_next().await.ok_or("launch task")???;
        }
    }
    while let Some(done) = launches.join_next().await {
        done??;
    }
    if let Some(ended) = runners.iter().position(tokio::task::JoinHandle::is_finished) {
        return Err(format!("runner {ended} stopped early").into());
    }
    until(&pool, "running", args.executions, Duration::from_secs(120)).await?;
    let all_waiting = launched.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_waiting, cpu_waiting, pg_waiting) = watch(&server, args.watch_seconds).await;

    let client = reqwest::Client::new();
    let mut answers = Vec::with_capacity(args.executions);
    let period = Duration::from_secs_f64(1.0 / f64::from(args.rate.max(1)));
    let mut next = tokio::time::Instant::now();
    for run in 0..args.executions {
        tokio::time::sleep_until(next).await;
        next += period;
        let started = Instant::now();
        let capture_url = &endpoints[run % endpoints.len()].1;
        let sent = client.post(capture_url).header("x-run", run.to_string()).body("{}").send().await?;
        if !sent.status().is_success() {
            return Err(format!("a capture answered {}", sent.status()).into());
        }
        answers.push(u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX));
    }
    until(&pool, "succeeded", args.executions, Duration::from_secs(120)).await?;
    let woken = woken_latencies(&pool).await?;
    stop.cancel();
    for runner in runners {
        let _ = tokio::time::timeout(Duration::from_secs(5), runner).await;
    }

    let per_wait_kib = (rss_waiting - rss_idle) * 1024.0 / args.executions as f64;
    println!(
        "waits: {} executions waiting at once in webhook nodes on {} endpoint(s) ({runner_count} runners, a slot each)",
        args.executions,
        endpoints.len()
    );
    println!("  all claimed and waiting {:.1} s after the first launch", all_waiting.as_secs_f64());
    println!(
        "  server idle:    RSS {rss_idle:.0} MiB, CPU {:.1}% of a core, PostgreSQL {:.1}%",
        cpu_idle * 100.0,
        pg_idle * 100.0
    );
    println!(
        "  while waiting:  RSS {rss_waiting:.0} MiB ({per_wait_kib:+.1} KiB per waiting execution), CPU {:.1}% of a core, \
         PostgreSQL {:.1}%",
        cpu_waiting * 100.0,
        pg_waiting * 100.0
    );
    let (answer_p50, answer_p99) = p50_p99_ms(&answers);
    let (woken_p50, woken_p99) = p50_p99_ms(&woken);
    println!("  captures at {}/s: answered p50 {answer_p50:.2} ms, p99 {answer_p99:.2} ms", args.rate);
    println!("  capture -> waiting node woken (its node ended): p50 {woken_p50:.2} ms, p99 {woken_p99:.2} ms");
    Ok(())
}

/// For every webhook node that matched: its end (start + duration, runner clock) minus its capture's receipt
/// (server clock), in microseconds.
async fn woken_latencies(pool: &sqlx::PgPool) -> Result<Vec<u32>, BoxError> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT result->'capture'->>'received_at', result->>'started_at', (result->>'duration_ms')::bigint
         FROM node_results WHERE node_id = 'w' AND result->'capture' IS NOT NULL",
    )
    .fetch_all(pool)
    .await?;
    let mut latencies = Vec::with_capacity(rows.len());
    for (received, started, duration_ms) in rows {
        let received: DateTime<Utc> = received.parse()?;
        let started: DateTime<Utc> = started.parse()?;
        let ended = started + chrono::Duration::milliseconds(duration_ms);
        let micros = (ended - received).num_microseconds().unwrap_or(0).max(0);
        latencies.push(u32::try_from(micros).unwrap_or(u32::MAX));
    }
    Ok(latencies)
}
