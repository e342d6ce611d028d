//! `hookflow-bench chaos`: the queue's correctness at speed. Executions are launched over HTTP while real runner
//! processes claim them and one runner is killed with SIGKILL every 400 ms and replaced; at the end every execution
//! must have ended exactly once (one final status, one completion event) with both results of its last attempt.
//! The same checks as the 2,000-execution test, at 20,000 by default, with the rates it reached.

use crate::load::BoxError;
use crate::setup::Rig;
use hookflow_shared::wire::header;
use hookflow_tests::Creds;
use hookflow_tests::runner::RunnerProcess;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Executions to launch.
    #[arg(long, default_value_t = 20_000)]
    executions: usize,
    /// Runner processes (each with 4 slots).
    #[arg(long, default_value_t = 20)]
    runners: usize,
    /// Seconds the run may take before the bench gives up.
    #[arg(long, default_value_t = 900)]
    deadline_s: u64,
}

/// Every launch over HTTP from 8 concurrent clients; the count launched so far is shared with the caller.
async fn launch_all(rig: &Rig, flow: &str, total: usize, launched: Arc<AtomicUsize>) -> Result<(), BoxError> {
    let http = reqwest::Client::new();
    let mut launchers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (http, launched) = (http.clone(), launched.clone());
        let url = format!("{}/flows/{flow}/launch", rig.base);
        let (key, org) = (rig.key.clone(), rig.org.to_string());
        launchers.spawn(async move {
            while launched.fetch_add(1, Ordering::SeqCst) < total {
                let reply = http
                    .post(&url)
                    .header(header::API_KEY, &key)
                    .header(header::ORGANIZATION, &org)
                    .body("{}")
                    .send()
                    .await?;
                if reply.status() != 201 {
                    return Err::<(), BoxError>(format!("a launch answered {}", reply.status()).into());
                }
            }
            Ok(())
        });
    }
    while let Some(done) = launchers.join_next().await {
        done??;
    }
    Ok(())
}

async fn open_executions(rig: &Rig, flow: &str) -> Result<i64, BoxError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM executions WHERE flow_id = $1::uuid AND status IN ('queued', 'running')",
    )
    .bind(flow)
    .fetch_one(&rig.pool)
    .await?)
}

/// The exactly-once checks: (final statuses with counts, executions without exactly one completion event,
/// succeeded executions missing a result of their last attempt, executions that ran more than once).
async fn verify(rig: &Rig, flow: &str) -> Result<(Vec<(String, i64)>, i64, i64, i64), BoxError> {
    let ended: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM executions WHERE flow_id = $1::uuid GROUP BY 1 ORDER BY 1")
            .bind(flow)
            .fetch_all(&rig.pool)
            .await?;
    let doubled: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM executions e WHERE e.flow_id = $1::uuid AND (
             SELECT count(*) FROM execution_events v
             WHERE v.execution_id = e.id AND v.data::jsonb ->> 'type' = 'execution.completed') <> 1",
    )
    .bind(flow)
    .fetch_one(&rig.pool)
    .await?;
    let partial: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM executions e WHERE e.flow_id = $1::uuid AND e.status = 'succeeded'
             AND (SELECT count(*) FROM node_results r WHERE r.execution_id = e.id AND r.attempt = e.attempt) <> 2",
    )
    .bind(flow)
    .fetch_one(&rig.pool)
    .await?;
    let retried: i64 = sqlx::query_scalar("SELECT count(*) FROM executions WHERE flow_id = $1::uuid AND attempt > 1")
        .bind(flow)
        .fetch_one(&rig.pool)
        .await?;
    Ok((ended, doubled, partial, retried))
}

/// Kills a runner (SIGKILL) every 400 ms and starts a fresh one in its place until every execution is launched
/// and ended; answers how many were killed.
async fn kill_until_done(
    rig: &Rig,
    flow: &str,
    args: &Args,
    launched: &AtomicUsize,
    runners: &mut [RunnerProcess],
    spawn: impl AsyncFn() -> RunnerProcess,
) -> Result<usize, BoxError> {
    let started = Instant::now();
    let (mut killed, mut round) = (0usize, 0usize);
    let deadline = started + Duration::from_secs(args.deadline_s);
    loop {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let open = open_executions(rig, flow).await?;
        if open == 0 && launched.load(Ordering::SeqCst) >= args.executions {
            return Ok(killed);
        }
        if Instant::now() > deadline {
            return Err(format!("{open} executions had not ended after {} s", args.deadline_s).into());
        }
        let victim = (round * 7 + 3) % runners.len();
        round += 1;
        runners[victim].kill().await;
        let _ = std::fs::remove_file(&runners[victim].log);
        runners[victim] = spawn().await;
        killed += 1;
    }
}

async fn measure(rig: &Rig, args: &Args) -> Result<(), BoxError> {
    let binary = std::env::current_exe()?.with_file_name("hookflow-runner");
    if !binary.exists() {
        return Err(format!("{} is missing: cargo build --release -p hookflow-runner", binary.display()).into());
    }
    let binary = binary.to_string_lossy().into_owned();
    let definition = serde_json::json!({"nodes": [
        {"id": "one", "kind": "delay", "delay_ms": 5}, {"id": "two", "kind": "delay", "delay_ms": 5}]});
    let flow = rig.flow("chaos", definition).await?;
    let creds = Creds { key: rig.key.clone(), org: rig.org };
    let spawn = async || {
        let quiet = [("RUST_LOG", "warn")];
        RunnerProcess::spawn_with_env(&binary, &rig.base, &creds, &[], &["--concurrency", "4"], &quiet).await
    };
    let mut runners = Vec::new();
    for _ in 0..args.runners {
        runners.push(spawn().await);
    }
    println!(
        "chaos: {} executions (two 5 ms delay nodes each) through {} runner processes, one killed with SIGKILL every 400 ms",
        args.executions, args.runners
    );
    let started = Instant::now();
    let launched = Arc::new(AtomicUsize::new(0));
    let launching = launch_all(rig, &flow, args.executions, launched.clone());
    let chaos = kill_until_done(rig, &flow, args, &launched, &mut runners, spawn);
    let (launch, killed) = tokio::join!(launching, chaos);
    let elapsed = started.elapsed();
    for runner in &mut runners {
        runner.kill().await;
        let _ = std::fs::remove_file(&runner.log);
    }
    launch?;
    let killed = killed?;
    let (ended, doubled, partial, retried) = verify(rig, &flow).await?;
    let total: i64 = ended.iter().map(|(_, n)| n).sum();
    println!(
        "  {total} executions ended in {:.1} s ({:.0}/s) with {killed} runners killed; {retried} ran again after a kill",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
    println!("  final statuses: {ended:?}");
    println!(
        "  without exactly one completion event: {doubled}; succeeded without both results of the last attempt: {partial}"
    );
    let only_final = ended.iter().all(|(status, _)| status == "succeeded" || status == "failed");
    if usize::try_from(total)? != args.executions || !only_final || doubled != 0 || partial != 0 {
        return Err("exactly-once was violated (see above)".into());
    }
    println!("  exactly once: every execution ended once, with the results of its last attempt");
    Ok(())
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    // Leases as short as the execution tests': a killed runner's jobs come back within seconds.
    let rig = Rig::start_with(|settings| {
        settings.lease = Duration::from_secs(2);
        settings.heartbeat_interval = Duration::from_secs(1);
        settings.rescue_interval = Duration::from_millis(200);
    })
    .await?;
    let outcome = measure(&rig, &args).await;
    rig.stop().await;
    outcome
}
