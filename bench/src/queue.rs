//! `hookflow-bench queue`: trivial-flow executions per second through the whole protocol (launch, claim,
//! complete over HTTP) beside a raw SQL `SKIP LOCKED` claim-then-complete pair rate on the same database in the
//! same run, and launch-to-runner latency with an idle long-polling runner; then the same through real runner
//! processes (`queue_runners`).

use crate::load::{BoxError, MachineBusy, median, on_load_runtime, percentile_ms};
use crate::setup::Rig;
use hookflow_shared::api::runners::FinalStatus;
use hookflow_shared::wire::header;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Executions (and raw jobs) per throughput run.
    #[arg(long, default_value_t = 8000)]
    jobs: usize,
    /// Concurrent claimers (runner pollers, or SQL workers): each poller is a runner with `--batch` slots.
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Concurrent launchers of the protocol run (the CI jobs of a team launching at once); a second run with
    /// `--few-launchers` shows the rate where launch round trips, not the queue, are what limits.
    #[arg(long, default_value_t = 64)]
    launchers: usize,
    /// Rounds of the raw pairs and the protocol run, taken in turns; the medians are compared.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    rounds: u16,
    /// Concurrent launchers of the second protocol run.
    #[arg(long, default_value_t = 8)]
    few_launchers: usize,
    /// Launches of the latency run.
    #[arg(long, default_value_t = 300)]
    latency_samples: usize,
    /// Jobs each poll of the protocol run may claim (`max_jobs`): each poller is a runner with this many slots.
    #[arg(long, default_value_t = 16)]
    batch: u32,
    /// Which parts run: the protocol's own clients in process (`clients`), real runner processes beside the real
    /// server (`runners`), or both.
    #[arg(long, value_enum, default_value_t = Part::All)]
    part: Part,
    /// Real `hookflow-runner` processes of the runners part.
    #[arg(long, default_value_t = 4)]
    runners: usize,
    /// Slots (`--concurrency`) of each real runner.
    #[arg(long, default_value_t = 16)]
    runner_slots: u32,
    /// wrk's connections launching in the runners part.
    #[arg(long, default_value_t = 32)]
    wrk_connections: usize,
    /// Seconds wrk launches in each round of the runners part.
    #[arg(long, default_value_t = 5)]
    wrk_seconds: u64,
    /// Also print PostgreSQL's execution time per statement in the runners part (`pg_stat_statements`, loaded
    /// by restarting the server once; the raw pairs' statements are counted too).
    #[arg(long)]
    pg_statements: bool,
}

/// The parts of `hookflow-bench queue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    All,
    Clients,
    Runners,
}

/// One launch of the flow's draft over HTTP.
async fn launch_once(http: &reqwest::Client, base: &str, key: &str, org: &str, flow: &str) -> Result<(), BoxError> {
    let response = http
        .post(format!("{base}/flows/{flow}/launch"))
        .header(header::API_KEY, key)
        .header(header::ORGANIZATION, org)
        .body("{}")
        .send()
        .await?;
    if response.status() != 201 {
        return Err(format!("launch answered {}", response.status()).into());
    }
    Ok(())
}

/// A protocol run's figures.
#[derive(Debug)]
struct ProtocolRate {
    /// Executions launched, claimed and completed per second, until the last completion.
    executions: f64,
    /// Launches per second, until the last launch was answered.
    launches: f64,
    /// How busy the cores were until the last completion (0 to 1).
    busy: f64,
}

/// Launches `jobs` executions from `launchers` tasks while `workers` pollers claim and complete them.
async fn protocol_rate(
    rig: &Rig,
    flow: &str,
    args: &Args,
    jobs: usize,
    launchers: usize,
) -> Result<ProtocolRate, BoxError> {
    let client = rig.runner_client();
    let runner = Rig::register_runner(&client, 64).await?;
    let (base, key, org, flow) = (rig.base.clone(), rig.key.clone(), rig.org.to_string(), flow.to_owned());
    let (workers, batch) = (args.workers, args.batch);
    on_load_runtime(move || async move {
        let completed = Arc::new(AtomicUsize::new(0));
        // When the last completion was answered, and how busy the cores were until then: idle pollers still wait
        // out their long poll after it.
        let finished = Arc::new(std::sync::OnceLock::new());
        let busy = MachineBusy::start();
        let started = Instant::now();
        let mut pollers = Vec::new();
        for _ in 0..workers {
            let (client, completed, finished) = (client.clone(), completed.clone(), finished.clone());
            pollers.push(tokio::spawn(async move {
                while completed.load(Ordering::SeqCst) < jobs {
                    // Like a runner's slots, the jobs of one poll finish (and complete) side by side.
                    let claimed = client.next_jobs(runner, 1, batch).await?;
                    let completions = claimed.iter().map(|job| client.complete(job, FinalStatus::Succeeded, None));
                    for completion in futures_util::future::join_all(completions).await {
                        completion?;
                        if completed.fetch_add(1, Ordering::SeqCst) + 1 == jobs {
                            let _ = finished.set((Instant::now(), busy.share()));
                        }
                    }
                }
                Ok::<_, BoxError>(())
            }));
        }
        let http = reqwest::Client::new();
        let mut senders = Vec::new();
        let launched = Arc::new(AtomicUsize::new(0));
        for _ in 0..launchers {
            let (http, base, key, org, flow, launched) =
                (http.clone(), base.clone(), key.clone(), org.clone(), flow.clone(), launched.clone());
            senders.push(tokio::spawn(async move {
                while launched.fetch_add(1, Ordering::SeqCst) < jobs {
                    launch_once(&http, &base, &key, &org, &flow).await?;
                }
                Ok::<(), BoxError>(())
            }));
        }
        for sender in senders {
            sender.await??;
        }
        let launch_elapsed = started.elapsed();
        for poller in pollers {
            poller.await??;
        }
        let (at, busy) = finished.get().ok_or("the pollers stopped before the last completion")?;
        Ok(ProtocolRate {
            executions: jobs as f64 / at.duration_since(started).as_secs_f64(),
            launches: jobs as f64 / launch_elapsed.as_secs_f64(),
            busy: *busy,
        })
    })
    .await
}

/// One idle runner long-polls; each launch is timed until the runner holds the job.
async fn launch_latency(rig: &Rig, flow: &str, samples: usize) -> Result<(Vec<u32>, Vec<u32>), BoxError> {
    let client = rig.runner_client();
    let runner = Rig::register_runner(&client, 64).await?;
    let (base, key, org, flow) = (rig.base.clone(), rig.key.clone(), rig.org.to_string(), flow.to_owned());
    on_load_runtime(move || async move {
        let (received_tx, mut received) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let poller = tokio::spawn(async move {
            loop {
                match client.next_jobs(runner, 30, 1).await {
                    Ok(jobs) => {
                        for job in jobs {
                            let _ = received_tx.send(Instant::now());
                            let _ = client.complete(&job, FinalStatus::Succeeded, None).await;
                        }
                    }
                    Err(_) => return,
                }
            }
        });
        let http = reqwest::Client::new();
        let mut latencies = Vec::with_capacity(samples);
        let mut answers = Vec::with_capacity(samples);
        for _ in 0..samples {
            // Let the poller finish the previous job and wait idle again.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let sent = Instant::now();
            launch_once(&http, &base, &key, &org, &flow).await?;
            answers.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
            let at = tokio::time::timeout(Duration::from_secs(10), received.recv()).await?.ok_or("poller stopped")?;
            latencies.push(u32::try_from(at.duration_since(sent).as_micros()).unwrap_or(u32::MAX));
        }
        poller.abort();
        Ok((latencies, answers))
    })
    .await
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    if args.part != Part::Runners {
        clients(&args).await?;
    }
    if args.part == Part::Clients {
        return Ok(());
    }
    crate::queue_runners::run(crate::queue_runners::Setup {
        runners: args.runners,
        slots: args.runner_slots,
        connections: args.wrk_connections,
        seconds: args.wrk_seconds,
        rounds: args.rounds,
        jobs: args.jobs,
        workers: args.workers,
        latency_samples: args.latency_samples,
        statements: args.pg_statements,
    })
    .await
}

/// The protocol's own minimal clients (claim and complete, nothing run) against a server in this process.
async fn clients(args: &Args) -> Result<(), BoxError> {
    // One key launches, polls and completes: its request budget (2,000/s by default) would be what is measured.
    let rig = Rig::start_with(|s| s.key_rate_per_s = 1_000_000).await?;
    let flow = rig
        .flow(
            "trivial",
            serde_json::json!({"nodes": [{"id": "set", "kind": "set_variables", "variables": {"a": "1"}}]}),
        )
        .await?;
    println!(
        "queue: {} jobs, {} claimers (runners of {} slots, or SQL workers), {} launchers (server, PostgreSQL and load share this machine)",
        args.jobs, args.workers, args.batch, args.launchers
    );
    // Warm-up, then the statistics autovacuum would gather within a minute of the tables filling: plans made for
    // empty tables would otherwise be measured.
    protocol_rate(&rig, &flow, args, args.jobs / 4, args.launchers).await?;
    sqlx::query("ANALYZE").execute(&rig.pool).await?;
    // Rounds in turns, medians compared: one run of each varies by a tenth on a shared machine.
    let (mut raws, mut runs) = (Vec::new(), Vec::new());
    for round in 1..=args.rounds {
        let busy = MachineBusy::start();
        let raw = crate::raw_pairs::raw_sql_pairs(&rig.pool, args.jobs, args.workers).await?;
        let raw_busy = busy.share();
        let run = protocol_rate(&rig, &flow, args, args.jobs, args.launchers).await?;
        println!(
            "  round {round}: raw SQL pairs {raw:>6.0} /s (cores busy {:.0}%), protocol {:>6.0} /s (cores busy {:.0}%; \
             launches {:.0} /s): {:.3}",
            raw_busy * 100.0,
            run.executions,
            run.busy * 100.0,
            run.launches,
            run.executions / raw
        );
        raws.push(raw);
        runs.push(run.executions);
    }
    let (raw, through) = (median(&mut raws), median(&mut runs));
    println!("  raw SQL claim-then-complete pairs:   {raw:>8.0} /s (median of {})", args.rounds);
    println!("  executions through the protocol:    {through:>8.0} /s (median; launch, claim, complete over HTTP)");
    println!("  ratio protocol / raw SQL:            {:>8.3} (target >= 0.9)", through / raw);
    let few = protocol_rate(&rig, &flow, args, args.jobs, args.few_launchers).await?;
    println!(
        "  the same with {} launchers:          {:>8.0} /s (cores busy {:.0}%; ratio {:.3}: each launcher waits for its answer)",
        args.few_launchers,
        few.executions,
        few.busy * 100.0,
        few.executions / raw
    );
    let (latencies, answers) = launch_latency(&rig, &flow, args.latency_samples).await?;
    println!(
        "  launch -> idle runner holds the job: p50 {:.2} ms, p99 {:.2} ms over {} launches (targets 3 ms / 25 ms)",
        percentile_ms(&latencies, 50.0),
        percentile_ms(&latencies, 99.0),
        latencies.len()
    );
    println!(
        "  the launch call itself:              p50 {:.2} ms, p99 {:.2} ms",
        percentile_ms(&answers, 50.0),
        percentile_ms(&answers, 99.0)
    );
    rig.stop().await;
    Ok(())
}
