//! `hookflow-bench queue`, real runners: trivial-flow executions per second through real `hookflow-runner`
//! processes (each running its jobs, reporting node results and completing them, as users run it) beside the real
//! `hookflow-server` binary, launched by wrk over HTTP, beside raw SQL claim-then-complete pairs on the server's
//! database in the same run (rounds in turns, medians compared); launch -> claimed from the server's own
//! timestamps; and a count of every execution's node results and events at the end.

use crate::load::{BoxError, MachineBusy, median, percentile_ms};
use crate::server_process::{ServerProcess, pool_of, postgres_cpu, start_server_with, usage};
use hookflow_shared::wire::header;
use serde_json::json;
use std::time::{Duration, Instant};

/// What the real-runner part takes from `hookflow-bench queue`'s arguments.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub runners: usize,
    pub slots: u32,
    pub connections: usize,
    pub seconds: u64,
    pub rounds: u16,
    pub jobs: usize,
    pub workers: usize,
    pub latency_samples: usize,
    /// Whether PostgreSQL's time per statement is gathered (`pg_stat_statements`) and printed.
    pub statements: bool,
}

/// The runner processes, killed when dropped.
struct Runners {
    children: Vec<tokio::process::Child>,
    logs: std::path::PathBuf,
}

impl Runners {
    /// Starts `n` runners of `slots` slots with the operator's defaults (log level `info`, 30 s polls), each
    /// logging to its own file.
    async fn start(server: &ServerProcess, n: usize, slots: u32) -> Result<Self, BoxError> {
        let binary = std::env::current_exe()?.with_file_name("hookflow-runner");
        if !binary.is_file() {
            return Err(format!("{} is missing: cargo build --release -p hookflow-runner", binary.display()).into());
        }
        let logs = server.dir.with_extension("runners");
        std::fs::create_dir_all(&logs)?;
        let mut children = Vec::new();
        for i in 0..n {
            let log = std::fs::File::create(logs.join(format!("runner-{i}.log")))?;
            let child = tokio::process::Command::new(&binary)
                .env_remove("RUST_LOG")
                .env("SERVICE_URL", &server.base)
                .env("SERVICE_API_KEY", &server.key)
                .env("SERVICE_ORGANIZATION_ID", &server.org)
                .args(["--name", &format!("bench-{i}"), "--concurrency", &slots.to_string()])
                .stdin(std::process::Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .kill_on_drop(true)
                .spawn()?;
            children.push(child);
        }
        Ok(Self { children, logs })
    }

    /// The end of each runner's log, for a runner that did not start.
    fn log_tails(&self) -> String {
        let mut tails = String::new();
        for entry in std::fs::read_dir(&self.logs).into_iter().flatten().flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let start = text.len().saturating_sub(600);
            tails.push_str(&format!("\n{}: {}", entry.path().display(), text.get(start..).unwrap_or_default()));
        }
        tails
    }

    fn pids(&self) -> Vec<u32> {
        self.children.iter().filter_map(tokio::process::Child::id).collect()
    }

    /// CPU seconds of every runner process.
    fn cpu(&self) -> f64 {
        self.pids().into_iter().map(|pid| usage(pid).1).sum()
    }
}

impl Drop for Runners {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.logs);
    }
}

/// The server process with its pool, its runners and the API calls the scenario makes.
struct Bench {
    server: ServerProcess,
    pool: sqlx::PgPool,
    http: reqwest::Client,
}

impl Bench {
    /// Creates a one-node flow (a `set_variables` node: it waits for nothing, so the queue is what is measured).
    async fn flow(&self, name: &str) -> Result<String, BoxError> {
        let definition = json!({"nodes": [{"id": "set", "kind": "set_variables", "variables": {"a": "1"}}]});
        let reply = self
            .http
            .post(format!("{}/flows", self.server.base))
            .header(header::API_KEY, &self.server.key)
            .header(header::ORGANIZATION, &self.server.org)
            .json(&json!({"name": name, "definition": definition}))
            .send()
            .await?;
        let body: serde_json::Value = reply.error_for_status()?.json().await?;
        Ok(body["id"].as_str().ok_or("the flow has no id")?.to_owned())
    }

    async fn launch(&self, flow: &str) -> Result<(), BoxError> {
        let reply = self
            .http
            .post(format!("{}/flows/{flow}/launch", self.server.base))
            .header(header::API_KEY, &self.server.key)
            .header(header::ORGANIZATION, &self.server.org)
            .body("{}")
            .send()
            .await?;
        if reply.status() != 201 {
            return Err(format!("a launch answered {}", reply.status()).into());
        }
        Ok(())
    }

    /// Waits until no execution of `flow` is queued or running (at most `within`). Asks whether any execution is
    /// open through the queue's partial indexes (one flow runs at a time): a count over the flow's executions every
    /// 50 ms cost PostgreSQL a tenth of what it measured.
    async fn drained(&self, flow: &str, within: Duration) -> Result<(), BoxError> {
        let deadline = Instant::now() + within;
        loop {
            let open: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM executions WHERE status = 'queued')
                     OR EXISTS (SELECT 1 FROM executions WHERE status = 'running')",
            )
            .fetch_one(&self.pool)
            .await?;
            if !open {
                return Ok(());
            }
            if Instant::now() > deadline {
                let left: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM executions WHERE flow_id = $1::uuid AND status IN ('queued', 'running')",
                )
                .bind(flow)
                .fetch_one(&self.pool)
                .await?;
                return Err(format!("{left} executions had not ended after {within:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Launch -> claimed of each execution of `flow` (the server's `created_at` -> `started_at`), in microseconds.
    async fn claim_waits(&self, flow: &str) -> Result<Vec<u32>, BoxError> {
        self.spans(flow, "created_at", "started_at").await
    }

    /// `from` -> `to` (timestamp columns) of each execution of `flow` that has both, in microseconds.
    async fn spans(&self, flow: &str, from: &str, to: &str) -> Result<Vec<u32>, BoxError> {
        let spans: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT (extract(epoch FROM {to} - {from}) * 1e6)::int8 FROM executions
             WHERE flow_id = $1::uuid AND {to} IS NOT NULL AND {from} IS NOT NULL"
        )))
        .bind(flow)
        .fetch_all(&self.pool)
        .await?;
        Ok(spans.into_iter().map(|w| u32::try_from(w.max(0)).unwrap_or(u32::MAX)).collect())
    }
}

/// Executions per statement of each kind for `flow`: each statement stamps its rows with one `now()`, so the
/// distinct stamps count the statements (launches, claims, completions).
async fn per_statement(pool: &sqlx::PgPool, flow: &str) -> Result<(f64, f64, f64), BoxError> {
    let (n, launches, claims, completions): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT e.created_at), count(DISTINCT (j.runner_id, j.created_at)),
             count(DISTINCT e.finished_at)
         FROM executions e JOIN jobs j ON j.execution_id = e.id WHERE e.flow_id = $1::uuid",
    )
    .bind(flow)
    .fetch_one(pool)
    .await?;
    let per = |statements: i64| n as f64 / statements.max(1) as f64;
    Ok((per(launches), per(claims), per(completions)))
}

/// What one round through the runners measured.
struct Round {
    /// Executions per second from the first launch to the last completion (server timestamps).
    rate: f64,
    executions: i64,
    launches_per_s: f64,
    busy: f64,
    /// CPU milliseconds per execution: server, runners, PostgreSQL.
    cpu_ms: (f64, f64, f64),
    waits: Vec<u32>,
    /// Claimed -> completed (server timestamps), in microseconds: how long a runner holds a job.
    held: Vec<u32>,
    /// Executions per launch, claim and completion statement.
    batches: (f64, f64, f64),
}

/// wrk launches `flow` over `connections` connections for `seconds` while the runners drain it; then waits for
/// the last completion.
async fn through_runners(bench: &Bench, runners: &Runners, flow: &str, setup: &Setup) -> Result<Round, BoxError> {
    let url = format!("{}/flows/{flow}/launch", bench.server.base);
    let headers = vec![
        (header::API_KEY.to_owned(), bench.server.key.clone()),
        (header::ORGANIZATION.to_owned(), bench.server.org.clone()),
    ];
    let (connections, seconds) = (setup.connections, setup.seconds);
    let server_pid = bench.server.child.id();
    let cpu_before = (usage(server_pid).1, runners.cpu(), postgres_cpu(&bench.server.dir));
    let busy = MachineBusy::start();
    let wrk = tokio::task::spawn_blocking(move || {
        crate::wrk::post(&url, b"{}", &headers, connections, Duration::from_secs(seconds))
    })
    .await??;
    if wrk.failed > 0 {
        return Err(format!("{} of wrk's {} launches were refused", wrk.failed, wrk.requests).into());
    }
    bench.drained(flow, Duration::from_secs(300)).await?;
    let busy = busy.share();
    let cpu_after = (usage(server_pid).1, runners.cpu(), postgres_cpu(&bench.server.dir));
    let (executions, span): (i64, f64) = sqlx::query_as(
        "SELECT count(*), extract(epoch FROM max(finished_at) - min(created_at))::float8
         FROM executions WHERE flow_id = $1::uuid",
    )
    .bind(flow)
    .fetch_one(&bench.pool)
    .await?;
    let per = |before: f64, after: f64| (after - before) * 1000.0 / executions.max(1) as f64;
    Ok(Round {
        rate: executions as f64 / span,
        executions,
        launches_per_s: wrk.rate,
        busy,
        cpu_ms: (per(cpu_before.0, cpu_after.0), per(cpu_before.1, cpu_after.1), per(cpu_before.2, cpu_after.2)),
        waits: bench.claim_waits(flow).await?,
        held: bench.spans(flow, "started_at", "finished_at").await?,
        batches: per_statement(&bench.pool, flow).await?,
    })
}

/// Every execution of `flows` ended with its node result and events: answers a line saying so, or what is missing.
async fn check_stored(bench: &Bench, flows: &[String]) -> Result<String, BoxError> {
    let (executions, succeeded, results, without_result, events, odd_events): (i64, i64, i64, i64, i64, i64) =
        sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE e.status = 'succeeded'), coalesce(sum(r.n), 0)::int8,
                 count(*) FILTER (WHERE r.n <> 1), coalesce(sum(v.n), 0)::int8,
                 count(*) FILTER (WHERE v.completed <> 1 OR v.nodes <> 1)
             FROM executions e
             CROSS JOIN LATERAL (SELECT count(*) AS n FROM node_results r
                 WHERE r.execution_id = e.id AND r.attempt = e.attempt) r
             CROSS JOIN LATERAL (SELECT count(*) AS n,
                     count(*) FILTER (WHERE v.data::jsonb ->> 'type' = 'execution.completed') AS completed,
                     count(*) FILTER (WHERE v.data::jsonb ->> 'type' = 'node.completed') AS nodes
                 FROM execution_events v WHERE v.execution_id = e.id) v
             WHERE e.flow_id::text = ANY($1)",
        )
        .bind(flows)
        .fetch_one(&bench.pool)
        .await?;
    // Every execution's events in order, by type: one sequence for all, or the check fails.
    let sequences: Vec<(String, i64)> = sqlx::query_as(
        "SELECT types, count(*) FROM (
             SELECT string_agg(v.data::jsonb ->> 'type', ' ' ORDER BY v.seq) AS types
             FROM executions e JOIN execution_events v ON v.execution_id = e.id
             WHERE e.flow_id::text = ANY($1) GROUP BY e.id) s GROUP BY types ORDER BY 2 DESC",
    )
    .bind(flows)
    .fetch_all(&bench.pool)
    .await?;
    let line = format!(
        "{executions} executions, {succeeded} succeeded; {results} node results ({without_result} executions without \
         exactly one); {events} events ({odd_events} executions without one node.completed and one \
         execution.completed); event sequences: {sequences:?}"
    );
    if succeeded != executions || without_result != 0 || odd_events != 0 || sequences.len() != 1 {
        return Err(format!("some executions were not stored as they should be: {line}").into());
    }
    Ok(line)
}

/// PostgreSQL's execution time per statement over the rounds (raw pairs included), per execution of `flows`.
async fn statements(bench: &Bench, flows: &[String]) -> Result<(), BoxError> {
    let executions: i64 = sqlx::query_scalar("SELECT count(*) FROM executions WHERE flow_id::text = ANY($1)")
        .bind(flows)
        .fetch_one(&bench.pool)
        .await?;
    // Updates that stayed on their page (HOT) write no index entry: what the tables' fill factors buy.
    let tables: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT relname::text, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
         WHERE relname IN ('executions', 'jobs') ORDER BY relname",
    )
    .fetch_all(&bench.pool)
    .await?;
    let hot: Vec<String> = tables.iter().map(|(name, all, hot)| format!("{name} {hot} of {all}")).collect();
    println!("  updates that stayed on their page (HOT): {}", hot.join(", "));
    crate::pg_statements::print_top(&bench.pool, u64::try_from(executions).unwrap_or(0), "execution").await?;
    Ok(())
}

/// Launches one at a time while every runner waits idle in its long poll; launch -> claimed from the server's
/// timestamps.
async fn idle_latency(bench: &Bench, samples: usize) -> Result<(String, Vec<u32>), BoxError> {
    let flow = bench.flow("latency").await?;
    for _ in 0..samples {
        // Let the runners finish the previous job and wait idle again.
        tokio::time::sleep(Duration::from_millis(20)).await;
        bench.launch(&flow).await?;
    }
    bench.drained(&flow, Duration::from_secs(60)).await?;
    let waits = bench.claim_waits(&flow).await?;
    Ok((flow, waits))
}

/// Waits until `n` runners have registered and had time to start polling.
async fn registered(bench: &Bench, runners: &Runners, n: usize) -> Result<(), BoxError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM runners").fetch_one(&bench.pool).await?;
        if usize::try_from(count)? >= n {
            tokio::time::sleep(Duration::from_millis(500)).await;
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{count} of {n} runners registered within 30 s:{}", runners.log_tails()).into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

pub async fn run(setup: Setup) -> Result<(), BoxError> {
    if !crate::wrk::available() {
        return Err("wrk is not on PATH (../shared/tools/install-peers.sh installs it)".into());
    }
    // Launches from one key at wrk's rate: the key's request budget (2,000/s by default) would be what is measured.
    let extra = ["--key-rate-limit", "1000000"];
    let mut server = start_server_with(&extra)?;
    if setup.statements {
        let more = std::env::var("HOOKFLOW_BENCH_PG_SETTINGS_TMP").unwrap_or_default();
        server.restart_with_settings(&format!("\n{}\n{more}\n", crate::pg_statements::PRELOAD), &extra)?;
    }
    let pool = pool_of(&server, u32::try_from(setup.workers)?.max(4) + 2)?;
    let bench = Bench { server, pool, http: reqwest::Client::new() };
    let runners = Runners::start(&bench.server, setup.runners, setup.slots).await?;
    registered(&bench, &runners, setup.runners).await?;
    println!(
        "queue, real runners: {} hookflow-runner processes of {} slots beside one hookflow-server process; wrk \
         launches a one-node flow (set_variables) over {} connections for {} s a round; raw pairs: {} jobs, {} SQL \
         workers (load average before: {})",
        setup.runners,
        setup.slots,
        setup.connections,
        setup.seconds,
        setup.jobs,
        setup.workers,
        load_average()
    );
    // Warm-up (plans, caches, the runners' connections), then the statistics autovacuum would gather.
    let warm = bench.flow("warm-up").await?;
    through_runners(&bench, &runners, &warm, &Setup { seconds: 2, ..setup }).await?;
    sqlx::query("ANALYZE").execute(&bench.pool).await?;
    if let Ok(sql) = std::env::var("HOOKFLOW_BENCH_SQL_TMP") {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&bench.pool).await?;
    }
    if setup.statements {
        crate::pg_statements::reset(&bench.pool).await?;
    }
    let (mut raws, mut rates, mut flows, mut waits) = (Vec::new(), Vec::new(), vec![warm], Vec::new());
    for round in 1..=setup.rounds {
        let busy = MachineBusy::start();
        let raw = crate::raw_pairs::raw_sql_pairs(&bench.pool, setup.jobs, setup.workers).await?;
        let raw_busy = busy.share();
        let flow = bench.flow(&format!("round {round}")).await?;
        let run = through_runners(&bench, &runners, &flow, &setup).await?;
        let (p50, p99) = (percentile_ms(&run.waits, 50.0), percentile_ms(&run.waits, 99.0));
        println!(
            "  round {round}: raw SQL pairs {raw:>6.0} /s (cores busy {:.0}%), real runners {:>6.0} /s ({} executions, \
             cores busy {:.0}%, wrk launched {:.0} /s): {:.3}; CPU ms per execution: server {:.3}, runners {:.3}, \
             PostgreSQL {:.3}; executions per statement: launch {:.1}, claim {:.1}, completion {:.1}; launch -> \
             claimed under this load p50 {p50:.1} ms, p99 {p99:.1} ms; claimed -> completed p50 {:.1} ms, p99 {:.1} \
             ms; load average {}",
            raw_busy * 100.0,
            run.rate,
            run.executions,
            run.busy * 100.0,
            run.launches_per_s,
            run.rate / raw,
            run.cpu_ms.0,
            run.cpu_ms.1,
            run.cpu_ms.2,
            run.batches.0,
            run.batches.1,
            run.batches.2,
            percentile_ms(&run.held, 50.0),
            percentile_ms(&run.held, 99.0),
            load_average()
        );
        raws.push(raw);
        rates.push(run.rate);
        waits.extend(run.waits);
        flows.push(flow);
    }
    if setup.statements {
        statements(&bench, &flows[1..]).await?;
    }
    let (raw, through) = (median(&mut raws), median(&mut rates));
    println!("  raw SQL claim-then-complete pairs:   {raw:>8.0} /s (median of {})", setup.rounds);
    println!("  executions through real runners:    {through:>8.0} /s (median; results and events stored)");
    println!("  ratio real runners / raw SQL:        {:>8.3} (target >= 0.6)", through / raw);
    let (latency_flow, idle) = idle_latency(&bench, setup.latency_samples).await?;
    flows.push(latency_flow);
    println!(
        "  launch -> claimed, runners idle:     p50 {:.2} ms, p99 {:.2} ms over {} launches (server timestamps; targets \
         3 ms / 25 ms)",
        percentile_ms(&idle, 50.0),
        percentile_ms(&idle, 99.0),
        idle.len()
    );
    println!("  stored: {}", check_stored(&bench, &flows).await?);
    drop(runners);
    bench.pool.close().await;
    Ok(())
}
