//! `hookflow-bench engine`: sequential request nodes per second (each a small JSON POST with a JSONPath capture
//! and an assertion, over one keep-alive connection) for the engine alone, through a runner with results stored,
//! and as `hookflow run` (the CLI process, start to exit), beside a bare reqwest loop against the same local target
//! and Hurl (`$HURL`, else `hurl` on PATH) on the same requests in the same run.

use crate::load::{BoxError, median};
use crate::setup::Rig;
use hookflow_runner::engine::Engine;
use hookflow_runner::execute::execute;
use hookflow_shared::api::runners::Job;
use serde_json::{Value, json};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// CPU seconds so far of the processes a round involves: the command it ran (children waited for), this process
/// (the target, and the server with `hookflow run`), and PostgreSQL.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    command: f64,
    bench: f64,
    postgres: f64,
}

impl Cpu {
    fn now(rig: &Rig) -> Self {
        use nix::sys::resource::{UsageWho, getrusage};
        let seconds = |who| {
            getrusage(who).map_or(f64::NAN, |u| {
                let (user, system) = (u.user_time(), u.system_time());
                user.tv_sec() as f64
                    + user.tv_usec() as f64 / 1e6
                    + system.tv_sec() as f64
                    + system.tv_usec() as f64 / 1e6
            })
        };
        Self {
            command: seconds(UsageWho::RUSAGE_CHILDREN),
            bench: seconds(UsageWho::RUSAGE_SELF),
            postgres: rig.postgres_cpu(),
        }
    }

    fn since(self, before: Self) -> Self {
        Self {
            command: self.command - before.command,
            bench: self.bench - before.bench,
            postgres: self.postgres - before.postgres,
        }
    }

    fn add(&mut self, other: Self) {
        self.command += other.command;
        self.bench += other.bench;
        self.postgres += other.postgres;
    }

    /// Microseconds per request of `count` requests.
    fn per(self, count: usize) -> (f64, f64, f64) {
        let us = |seconds: f64| seconds * 1e6 / count.max(1) as f64;
        (us(self.command), us(self.bench), us(self.postgres))
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Request nodes per run.
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// Rounds of the bare loop, the engine alone, `hookflow run` and Hurl, taken in turns; the medians are compared
    /// (one run of each is noisy).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Also print PostgreSQL's execution time per statement over the rounds, per node (`pg_stat_statements`,
    /// loaded by restarting the bench's new cluster once)
    #[arg(long)]
    pg_statements: bool,
}

/// What every request posts.
const REQUEST_BODY: &str = r#"{"n":1}"#;

async fn start_target() -> Result<String, BoxError> {
    async fn item() -> axum::Json<Value> {
        axum::Json(json!({"token": "abc123", "n": 1, "items": [{"id": 1}, {"id": 2}]}))
    }
    let router = axum::Router::new().route("/item", axum::routing::post(item));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(base)
}

fn flow(target: &str, nodes: usize) -> Value {
    let node = |i: usize| {
        json!({"id": format!("n{i}"), "kind": "request", "request": {"method": "POST", "url": format!("{target}/item"),
                "headers": {"content-type": "application/json"}, "body": REQUEST_BODY},
            "extractors": [{"name": "token", "kind": "jsonPath", "expression": "$.token"}],
            "assertions": [{"source": "token", "operator": "equals", "expected": "abc123"}]})
    };
    json!({"timeout_s": 3600, "nodes": (0..nodes).map(node).collect::<Vec<_>>()})
}

async fn bare_reqwest(target: &str, n: usize) -> Result<f64, BoxError> {
    let client = reqwest::Client::new();
    let started = Instant::now();
    for _ in 0..n {
        let request = client.post(format!("{target}/item")).header("content-type", "application/json");
        let body = request.body(REQUEST_BODY).send().await?.bytes().await?;
        std::hint::black_box(body);
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

async fn engine_alone(definition: &Value, n: usize) -> Result<f64, BoxError> {
    let job = Job::standalone("bench", definition.clone(), 3600);
    let (sink, mut results) = tokio::sync::mpsc::unbounded_channel::<hookflow_shared::api::executions::NodeResult>();
    let drain = tokio::spawn(async move {
        let mut passed = 0usize;
        while let Some(result) = results.recv().await {
            passed += usize::from(result.status == hookflow_shared::api::executions::NodeStatus::Passed);
        }
        passed
    });
    let started = Instant::now();
    let outcome = Engine::new().run(&job, &sink, &CancellationToken::new()).await;
    let elapsed = started.elapsed();
    drop(sink);
    let passed = drain.await?;
    if passed != n {
        return Err(format!("the engine passed {passed} of {n} nodes ({outcome:?})").into());
    }
    Ok(n as f64 / elapsed.as_secs_f64())
}

async fn end_to_end(rig: &Rig, flow_id: &str, n: usize) -> Result<f64, BoxError> {
    let client = rig.runner_client();
    let runner = Rig::register_runner(&client, 1).await?;
    rig.launch(flow_id).await?;
    let job = client.next_jobs(runner, 10, 1).await?.into_iter().next().ok_or("no job")?;
    let started = Instant::now();
    let outcome = execute(&client, &Engine::new(), &job, &CancellationToken::new()).await?;
    let elapsed = started.elapsed();
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM node_results WHERE execution_id = $1 AND status = 'passed'")
            .bind(job.execution_id)
            .fetch_one(&rig.pool)
            .await?;
    if usize::try_from(stored)? != n {
        return Err(format!("{stored} of {n} results stored ({outcome:?})").into());
    }
    Ok(n as f64 / elapsed.as_secs_f64())
}

/// The Hurl binary: `$HURL`, else `hurl` on PATH, when it answers `--version`.
fn hurl_binary() -> Option<String> {
    let binary = std::env::var("HURL").ok().filter(|b| !b.is_empty()).unwrap_or_else(|| "hurl".to_owned());
    let found = std::process::Command::new(&binary).arg("--version").output().ok()?;
    found.status.success().then_some(binary)
}

/// Hurl on the same requests: `hurl --test` over a file of `n` entries, process start to exit.
fn hurl(binary: &str, target: &str, n: usize) -> Result<f64, BoxError> {
    let entry = format!(
        "POST {target}/item\nContent-Type: application/json\n```\n{REQUEST_BODY}\n```\nHTTP 200\n[Captures]\ntoken: jsonpath \"$.token\"\n[Asserts]\njsonpath \"$.token\" == \"abc123\"\n\n"
    );
    let path = std::env::temp_dir().join(format!("hookflow-bench-{}.hurl", std::process::id()));
    std::fs::write(&path, entry.repeat(n))?;
    let started = Instant::now();
    let status = std::process::Command::new(binary).arg("--test").arg(&path).output()?;
    let elapsed = started.elapsed();
    let _ = std::fs::remove_file(&path);
    if !status.status.success() {
        return Err(format!("hurl failed: {}", String::from_utf8_lossy(&status.stderr)).into());
    }
    Ok(n as f64 / elapsed.as_secs_f64())
}

/// `hookflow run --flow ID` (ephemeral: the CLI claims, executes and reports) as a process, start to exit; the
/// results it stored are counted afterwards.
async fn cli_run(rig: &Rig, flow_id: &str, n: usize) -> Result<f64, BoxError> {
    let binary = std::env::current_exe()?.with_file_name("hookflow");
    if !binary.exists() {
        return Err(format!("{} is missing: cargo build --release -p hookflow-cli", binary.display()).into());
    }
    let started = Instant::now();
    let output = tokio::process::Command::new(&binary)
        .args(["run", "--flow", flow_id])
        .env(hookflow_runner::env::SERVICE_URL, &rig.base)
        .env(hookflow_runner::env::SERVICE_API_KEY, &rig.key)
        .env(hookflow_runner::env::SERVICE_ORGANIZATION_ID, rig.org.to_string())
        .env("NO_COLOR", "1")
        .output()
        .await?;
    let elapsed = started.elapsed();
    if !output.status.success() {
        return Err(format!("hookflow run failed: {}", String::from_utf8_lossy(&output.stderr)).into());
    }
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM node_results WHERE status = 'passed' AND execution_id = (
             SELECT id FROM executions WHERE flow_id = $1 AND trigger = 'cli' ORDER BY created_at DESC LIMIT 1)",
    )
    .bind(uuid::Uuid::parse_str(flow_id)?)
    .fetch_one(&rig.pool)
    .await?;
    if usize::try_from(stored)? != n {
        return Err(format!("hookflow run stored {stored} of {n} passed results").into());
    }
    Ok(n as f64 / elapsed.as_secs_f64())
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    let target = start_target().await?;
    let definition = flow(&target, args.nodes);
    let rig = if args.pg_statements {
        Rig::start_with_settings(crate::pg_statements::PRELOAD).await?
    } else {
        Rig::start().await?
    };
    let flow_id = rig.flow("engine bench", definition.clone()).await?;
    println!(
        "engine: {} sequential request nodes (JSON POST, JSONPath capture, assert), one keep-alive connection",
        args.nodes
    );
    let stored = end_to_end(&rig, &flow_id, args.nodes).await?;
    if args.pg_statements {
        crate::pg_statements::reset(&rig.pool).await?;
    }
    let hurl_found = hurl_binary();
    let (mut bares, mut alones, mut runs, mut hurls) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut run_cpu, mut hurl_cpu) = (Cpu::default(), Cpu::default());
    // Every kind once a round, in turns, so that a slow spell of the machine falls on all of them.
    for _ in 0..args.rounds.max(1) {
        bares.push(bare_reqwest(&target, args.nodes).await?);
        alones.push(engine_alone(&definition, args.nodes).await?);
        let before = Cpu::now(&rig);
        runs.push(cli_run(&rig, &flow_id, args.nodes).await?);
        run_cpu.add(Cpu::now(&rig).since(before));
        if let Some(binary) = &hurl_found {
            let before = Cpu::now(&rig);
            hurls.push(hurl(binary, &target, args.nodes)?);
            hurl_cpu.add(Cpu::now(&rig).since(before));
        }
    }
    let requests = args.nodes * args.rounds.max(1);
    let (bare, alone) = (median(&mut bares), median(&mut alones));
    println!("  bare reqwest loop:                  {bare:>8.0} requests/s (median of {})", bares.len());
    println!(
        "  engine alone:                       {alone:>8.0} nodes/s  ({:.2} x bare reqwest; median of {})",
        alone / bare,
        alones.len()
    );
    println!("  end to end, results stored:         {stored:>8.0} nodes/s  ({:.2} x bare reqwest)", stored / bare);
    let run = median(&mut runs);
    println!(
        "  hookflow run (process start to exit): {run:>6.0} nodes/s  ({:.2} x bare reqwest; median of {})",
        run / bare,
        runs.len()
    );
    let (cli, bench, postgres) = run_cpu.per(requests);
    println!(
        "    CPU us per node: the hookflow process {cli:.0}, server and target (this process) {bench:.0}, PostgreSQL {postgres:.0}"
    );
    match hurl_found {
        Some(binary) => {
            let hurl = median(&mut hurls);
            println!(
                "  hurl --test (process start to exit): {hurl:>7.0} requests/s (median of {}; {binary})",
                hurls.len()
            );
            let (hurl_own, target_cpu, _) = hurl_cpu.per(requests);
            println!("    CPU us per request: the hurl process {hurl_own:.0}, target (this process) {target_cpu:.0}");
            println!(
                "  engine alone {:.2} x hurl (target 2); hookflow run {:.2} x hurl (target 1.3); runner with results stored {:.2} x hurl",
                alone / hurl,
                run / hurl,
                stored / hurl
            );
        }
        None => println!("  hurl: neither $HURL nor `hurl` on PATH, so no side-by-side figure"),
    }
    if args.pg_statements {
        // Only `hookflow run` stores anything after the reset: its rounds' nodes.
        crate::pg_statements::print_top(&rig.pool, u64::try_from(requests)?, "node").await?;
    }
    rig.stop().await;
    Ok(())
}
