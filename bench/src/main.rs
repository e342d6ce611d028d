//! `hookflow-bench`: performance scenarios of DESIGN.md, each printed beside a baseline measured in the same run
//! on the same machine, as ratios (absolute numbers on a shared machine mean little).

mod batches;
mod capture;
mod chaos;
mod deliveries;
mod engine;
mod fleet;
mod fleet_link;
mod flood;
mod import;
mod inspector;
mod load;
mod pg_statements;
mod pools;
mod queue;
mod queue_runners;
mod raw_pairs;
mod retention;
mod server_process;
mod setup;
mod waits;
mod wrk;

use clap::{Parser, Subcommand};

/// mimalloc, as in `hookflow-server`: the scenarios run the server in this process.
#[global_allocator]
static ALLOCATOR: hookflow_alloc::Allocator = hookflow_alloc::Allocator;

#[derive(Debug, Parser)]
#[command(
    name = "hookflow-bench",
    version,
    about = "hookflow performance scenarios, measured beside their baselines in one run."
)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// Durable captures/s and latency (1 KiB JSON POSTs) beside a bare axum handler; capture-to-subscriber
    /// latency at a fixed capture rate with many SSE subscribers.
    Capture(capture::Args),
    /// Trivial-flow executions/s through the runner protocol beside raw SQL SKIP LOCKED claim-then-complete
    /// pairs; launch-to-runner latency with an idle long-polling runner. Then the same through real
    /// hookflow-runner processes beside the real server, launched by wrk. Needs target/release/hookflow-server and
    /// hookflow-runner beside hookflow-bench, and wrk.
    Queue(queue::Args),
    /// Correctness at speed: 20,000 executions through 20 real runner processes while one is killed with SIGKILL
    /// every 400 ms; every execution must end exactly once with the results of its last attempt. Needs
    /// target/release/hookflow-runner beside hookflow-bench.
    Chaos(chaos::Args),
    /// Sequential request nodes/s for the engine alone, through a runner with results stored and as a
    /// `hookflow run` process, beside a bare reqwest loop and Hurl ($HURL or PATH). Needs target/release/hookflow.
    Engine(engine::Args),
    /// Thousands of simulated runners (long poll + heartbeat) against the real server binary in its own process:
    /// its RSS and CPU while they wait, PostgreSQL connections in use, heartbeat and launch-to-claim latency,
    /// fairness across organizations. Needs target/release/hookflow-server beside hookflow-bench.
    Fleet(fleet::Args),
    /// Importing a large OpenAPI description over HTTP beside the same parse and mapping in process and a bare
    /// YAML parse.
    Import(import::Args),
    /// How long a capture takes to show in the app's live inspector in a real browser (Chromium), beside a raw
    /// SSE subscriber, at a steady capture rate.
    Inspector(inspector::Args),
    /// Durable captures/s with and without a retention sweep deleting a million expired captures, same run.
    Retention(retention::Args),
    /// Latency of /healthz and captures from 127.0.0.1 on fresh connections, quiet and then with thousands of
    /// idle connections held from other addresses.
    Flood(flood::Args),
    /// A thousand executions waiting at once in webhook nodes on one runner: the server's RSS and CPU while they
    /// wait beside the same server idle, and capture -> waiting node woken p50/p99 beside the captures' own answer
    /// time. Needs target/release/hookflow-server beside hookflow-bench.
    Waits(waits::Args),
    /// Deliveries to destinations (issue #49): captures/s with two destinations beside none, deliveries/s by the
    /// server's sender beside a bare reqwest client, delivery lag p50/p99 at a fixed capture rate.
    Deliveries(deliveries::Args),
    /// Runner pools (issue #53): the scaler endpoint's p50/p99 with 50 pools and 100,000 queued executions, and
    /// the claim's pick with priority beside today's order by id, same run.
    Pools(pools::Args),
    /// Data-driven runs (issue #52): a 100,000-row launch (server RSS growth, rows/s queued and finished on the
    /// embedded runner) beside the same number of single launches.
    Batches(batches::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let result = runtime.block_on(async {
        match cli.scenario {
            Scenario::Capture(args) => capture::run(args).await,
            Scenario::Queue(args) => queue::run(args).await,
            Scenario::Chaos(args) => chaos::run(args).await,
            Scenario::Engine(args) => engine::run(args).await,
            Scenario::Import(args) => import::run(args).await,
            Scenario::Flood(args) => flood::run(args).await,
            Scenario::Retention(args) => retention::run(args).await,
            Scenario::Fleet(args) => fleet::run(args).await,
            Scenario::Inspector(args) => inspector::run(args).await,
            Scenario::Waits(args) => waits::run(args).await,
            Scenario::Deliveries(args) => deliveries::run(args).await,
            Scenario::Pools(args) => pools::run(args).await,
            Scenario::Batches(args) => batches::run(args).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hookflow-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
