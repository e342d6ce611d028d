//! `hookflow-bench batches`: a data-driven launch of many rows (issue #52; DESIGN.md: a 100,000-row launch grows
//! server RSS by < 50 MiB) beside the same number of single launches, same run. The server runs in this process
//! with its embedded runner (so the RSS is the server's and its runner's): rows/s queued (launches of 10,000 rows
//! each, the most one takes) and rows/s finished by the embedded runner, and the RSS before and at its peak; then
//! the same for single launches made by `--connections` concurrent clients. `--inline` launches the rows as an
//! inline definition (`POST /executions` with `rows`, what `hookflow run FILE --data` sends) instead.

use crate::load::BoxError;
use crate::setup::Rig;
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Rows of the data-driven launch (and single launches beside it).
    #[arg(long, default_value_t = 100_000)]
    rows: usize,
    /// Slots of the embedded runner.
    #[arg(long, default_value_t = 16)]
    slots: u32,
    /// Concurrent clients making the single launches.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Launch the rows as an inline definition (`POST /executions` with `rows`, as `hookflow run FILE --data`)
    /// instead of a stored flow's launch.
    #[arg(long)]
    inline: bool,
    /// Only queue the rows, without the embedded runner: rows/s queued and the server's RSS for row counts the
    /// runner of a debug build cannot finish in reasonable time.
    #[arg(long)]
    queue_only: bool,
}

/// Which executions a phase waits for: a stored flow's, or the inline runs of one name.
#[derive(Clone, Copy)]
enum Of<'a> {
    Flow(&'a str),
    Inline(&'a str),
}

fn rss_mib() -> f64 {
    crate::server_process::usage(std::process::id()).0
}

/// Samples this process's RSS until stopped; answers the peak (MiB).
fn watch_peak() -> (Arc<AtomicBool>, tokio::task::JoinHandle<f64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let watching = Arc::clone(&stop);
    let peak = tokio::spawn(async move {
        let mut peak = rss_mib();
        while !watching.load(Ordering::Relaxed) {
            peak = peak.max(rss_mib());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        peak
    });
    (stop, peak)
}

/// Waits until `expected` executions of the flow (or inline runs of the name) have ended.
async fn finished(rig: &Rig, of: Of<'_>, expected: i64) -> Result<(), BoxError> {
    let (which, value) = match of {
        Of::Flow(flow) => ("flow_id = $1::uuid", flow),
        Of::Inline(name) => ("flow_id IS NULL AND flow_name = $1", name),
    };
    let query = format!("SELECT count(*) FROM executions WHERE {which} AND status NOT IN ('queued', 'running')");
    loop {
        let done: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(query.as_str())).bind(value).fetch_one(&rig.pool).await?;
        if done >= expected {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct Phase {
    queued_s: f64,
    finished_s: f64,
    rss_before: f64,
    rss_peak: f64,
}

impl Phase {
    fn print(&self, name: &str, rows: usize) {
        if self.finished_s.is_nan() {
            println!(
                "  {name:<8} queued {:>8.0} rows/s ({:.1} s), not run (--queue-only), RSS {:.0} -> peak {:.0} MiB ({:+.0})",
                rows as f64 / self.queued_s,
                self.queued_s,
                self.rss_before,
                self.rss_peak,
                self.rss_peak - self.rss_before
            );
            return;
        }
        println!(
            "  {name:<8} queued {:>8.0} rows/s ({:.1} s), finished {:>7.0} rows/s ({:.1} s), RSS {:.0} -> peak {:.0} MiB ({:+.0})",
            rows as f64 / self.queued_s,
            self.queued_s,
            rows as f64 / self.finished_s,
            self.finished_s,
            self.rss_before,
            self.rss_peak,
            self.rss_peak - self.rss_before
        );
    }
}

async fn batch_phase(rig: &Rig, of: Of<'_>, definition: &Value, rows: usize, wait: bool) -> Result<Phase, BoxError> {
    let rss_before = rss_mib();
    let (stop, peak) = watch_peak();
    let started = Instant::now();
    let mut left = rows;
    let mut first = 0;
    while left > 0 {
        let chunk = left.min(10_000);
        let data: Vec<Value> = (first..first + chunk).map(|i| json!({"row": i.to_string()})).collect();
        match of {
            Of::Flow(flow) => rig.post(&format!("/flows/{flow}/launch"), json!({"rows": data})).await?,
            Of::Inline(name) => {
                rig.post("/executions", json!({"definition": definition, "name": name, "rows": data})).await?
            }
        };
        left -= chunk;
        first += chunk;
    }
    let queued_s = started.elapsed().as_secs_f64();
    let finished_s = if wait {
        finished(rig, of, rows as i64).await?;
        started.elapsed().as_secs_f64()
    } else {
        f64::NAN
    };
    stop.store(true, Ordering::Relaxed);
    Ok(Phase { queued_s, finished_s, rss_before, rss_peak: peak.await? })
}

async fn singles_phase(rig: &Rig, flow: &str, rows: usize, connections: usize, wait: bool) -> Result<Phase, BoxError> {
    let rss_before = rss_mib();
    let (stop, peak) = watch_peak();
    let started = Instant::now();
    let api = rig.api();
    // Each answer is dropped as it comes (collecting 100,000 of them would count in this process's RSS, which is
    // the server's).
    let mut launches = futures_util::stream::iter(0..rows)
        .map(|i| {
            let api = api.clone();
            let flow = flow.to_owned();
            async move {
                api.post::<_, Value>(&format!("/flows/{flow}/launch"), &json!({"variables": {"row": i.to_string()}}))
                    .await
            }
        })
        .buffer_unordered(connections);
    while let Some(launched) = launches.next().await {
        launched?;
    }
    let queued_s = started.elapsed().as_secs_f64();
    let finished_s = if wait {
        finished(rig, Of::Flow(flow), rows as i64).await?;
        started.elapsed().as_secs_f64()
    } else {
        f64::NAN
    };
    stop.store(true, Ordering::Relaxed);
    Ok(Phase { queued_s, finished_s, rss_before, rss_peak: peak.await? })
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    let key = hookflow_control_plane::server::embedded_runner::new_key();
    let hash = key.hash.clone();
    let slots = args.slots;
    let rig = Rig::start_with(|settings| {
        settings.embedded_runner_key_hash = Some(hash);
        settings.embedded_runner =
            hookflow_control_plane::state::EmbeddedRunnerLimits::new(slots, 1.0, Duration::from_secs(600));
    })
    .await?;
    let runner_stop = tokio_util::sync::CancellationToken::new();
    let address = rig.base.trim_start_matches("http://").parse()?;
    if !args.queue_only {
        hookflow_control_plane::server::embedded_runner::spawn(address, key, slots, runner_stop.clone());
    }
    let outcome = async {
        let definition = json!({"nodes": [{"id": "set", "kind": "set_variables", "variables": {"seen": "{{row}}"}}]});
        let batched = rig.flow("batched", definition.clone()).await?;
        let single = rig.flow("single", definition.clone()).await?;
        let of = if args.inline { Of::Inline("batched-inline") } else { Of::Flow(&batched) };
        let launched = if args.inline { "an inline definition's" } else { "a flow's" };
        println!("batches: {} rows of {launched} launch, embedded runner with {} slots", args.rows, args.slots);
        let batch = batch_phase(&rig, of, &definition, args.rows, !args.queue_only).await?;
        batch.print("batch", args.rows);
        let singles = singles_phase(&rig, &single, args.rows, args.connections, !args.queue_only).await?;
        singles.print("singles", args.rows);
        println!(
            "  batch vs singles: queued x{:.1}, finished x{:.2} (NaN: not run); RSS growth of the batch {:+.0} MiB (target < 50)",
            singles.queued_s / batch.queued_s,
            singles.finished_s / batch.finished_s,
            batch.rss_peak - batch.rss_before
        );
        Ok::<(), BoxError>(())
    }
    .await;
    runner_stop.cancel();
    rig.stop().await;
    outcome
}
