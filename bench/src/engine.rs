//! `hookflow-bench engine`: sequential request nodes per second (each a GET with a JSONPath extract and an
//! assertion, over one keep-alive connection) for the engine alone and end to end through a runner with results
//! stored, beside a bare reqwest loop against the same local target, and beside Hurl when `hurl` is on PATH.

use crate::load::BoxError;
use crate::setup::Rig;
use hookflow_runner::client::{Client, Connection};
use hookflow_runner::engine::Engine;
use hookflow_runner::execute::execute;
use hookflow_shared::api::runners::{Host, Job, RegisterRunner};
use serde_json::{Value, json};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Request nodes per run.
    #[arg(long, default_value_t = 3000)]
    nodes: usize,
}

async fn start_target() -> Result<String, BoxError> {
    async fn item() -> axum::Json<Value> {
        axum::Json(json!({"token": "abc123", "n": 1, "items": [{"id": 1}, {"id": 2}]}))
    }
    let router = axum::Router::new().route("/item", axum::routing::get(item));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(base)
}

fn flow(target: &str, nodes: usize) -> Value {
    let node = |i: usize| {
        json!({"id": format!("n{i}"), "kind": "request", "request": {"method": "GET", "url": format!("{target}/item")},
            "extractors": [{"name": "token", "kind": "jsonPath", "expression": "$.token"}],
            "assertions": [{"source": "token", "operator": "equals", "expected": "abc123"}]})
    };
    json!({"timeout_s": 3600, "nodes": (0..nodes).map(node).collect::<Vec<_>>()})
}

async fn bare_reqwest(target: &str, n: usize) -> Result<f64, BoxError> {
    let client = reqwest::Client::new();
    let started = Instant::now();
    for _ in 0..n {
        let body = client.get(format!("{target}/item")).send().await?.bytes().await?;
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
    let client = Client::new(Connection {
        base_url: rig.base.clone(),
        api_key: rig.key.clone(),
        organization_id: Some(rig.org),
    });
    let registration = RegisterRunner {
        name: "bench".into(),
        labels: vec![],
        version: "bench".into(),
        max_concurrency: 1,
        host: Host { hostname: "bench".into(), os: "linux".into(), arch: "x86_64".into(), cpus: 2, memory_bytes: 0 },
    };
    let runner = client.register(&registration).await?.id;
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

/// Hurl on the same requests, when it is installed: `hurl --test` over a file of `n` entries.
fn hurl(target: &str, n: usize) -> Option<Result<f64, BoxError>> {
    let found = std::process::Command::new("hurl").arg("--version").output().ok()?;
    if !found.status.success() {
        return None;
    }
    let entry = format!(
        "GET {target}/item\nHTTP 200\n[Captures]\ntoken: jsonpath \"$.token\"\n[Asserts]\njsonpath \"$.token\" == \"abc123\"\n\n"
    );
    let path = std::env::temp_dir().join(format!("hookflow-bench-{}.hurl", std::process::id()));
    Some((|| {
        std::fs::write(&path, entry.repeat(n))?;
        let started = Instant::now();
        let status = std::process::Command::new("hurl").arg("--test").arg(&path).output()?;
        let elapsed = started.elapsed();
        let _ = std::fs::remove_file(&path);
        if !status.status.success() {
            return Err(format!("hurl failed: {}", String::from_utf8_lossy(&status.stderr)).into());
        }
        Ok(n as f64 / elapsed.as_secs_f64())
    })())
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    let target = start_target().await?;
    let definition = flow(&target, args.nodes);
    let rig = Rig::start().await?;
    let flow_id = rig.flow("engine bench", definition.clone()).await?;
    println!(
        "engine: {} sequential request nodes (GET, JSONPath extract, assert), one keep-alive connection",
        args.nodes
    );
    let bare = bare_reqwest(&target, args.nodes).await?;
    println!("  bare reqwest loop:                  {bare:>8.0} requests/s");
    let alone = engine_alone(&definition, args.nodes).await?;
    println!("  engine alone:                       {alone:>8.0} nodes/s  ({:.2} x bare reqwest)", alone / bare);
    let stored = end_to_end(&rig, &flow_id, args.nodes).await?;
    println!("  end to end, results stored:         {stored:>8.0} nodes/s  ({:.2} x bare reqwest)", stored / bare);
    match hurl(&target, args.nodes) {
        Some(Ok(hurl)) => println!(
            "  hurl --test:                        {hurl:>8.0} requests/s; engine {:.2} x hurl (target 1.5), end to end {:.2} x hurl (target 1.0)",
            alone / hurl,
            stored / hurl
        ),
        Some(Err(e)) => println!("  hurl: {e}"),
        None => println!(
            "  hurl: not on PATH, so no side-by-side figure (DESIGN.md quotes ~6.1k/s on this kind of machine)"
        ),
    }
    rig.stop().await;
    Ok(())
}
