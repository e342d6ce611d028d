//! `hookflow-bench retention`: durable captures/s under load, without and then with a retention sweep deleting a
//! million expired captures, in the same run: the throughput dip the sweep costs (target <= 20%), and how long
//! the sweep took.

use crate::load::BoxError;
use crate::setup::Rig;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Expired captures the sweep deletes.
    #[arg(long, default_value_t = 1_000_000)]
    expired: i64,
    /// Concurrent connections of the capture load.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Seconds of each load run.
    #[arg(long, default_value_t = 8)]
    seconds: u64,
}

/// Expired rows of `webhook`, 40 days old, made inside PostgreSQL in chunks.
async fn plant(rig: &Rig, webhook: &str, rows: i64) -> Result<(), BoxError> {
    let mut done = 0;
    while done < rows {
        let chunk = (rows - done).min(100_000);
        sqlx::query(
            "INSERT INTO captures (id, organization_id, webhook_id, method, path, query_string, query, headers,
                                   content_type, body, body_size, body_sha256, body_utf8, source_ip, received_at)
             SELECT gen_random_uuid(), $1, $2::uuid, 'POST', '', '', '{}'::jsonb, '[]'::jsonb, 'application/json',
                    b.body, length(b.body), sha256(b.body), true, '127.0.0.1', now() - interval '40 days'
             FROM generate_series(1, $3) n, (SELECT convert_to(repeat('x', 1024), 'UTF8') AS body) b",
        )
        .bind(rig.org)
        .bind(webhook)
        .bind(chunk)
        .execute(&rig.pool)
        .await?;
        done += chunk;
    }
    sqlx::query("ANALYZE captures").execute(&rig.pool).await?;
    Ok(())
}

async fn load(rig: &Rig, path: &str, args: &Args) -> Result<f64, BoxError> {
    let body = bytes::Bytes::from(format!("{{\"pad\":\"{}\"}}", "x".repeat(1000)));
    if crate::wrk::available() {
        let (url, connections, seconds) = (format!("{}{path}", rig.base), args.connections, args.seconds);
        let result = tokio::task::spawn_blocking(move || {
            crate::wrk::post(&url, &body, &[], connections, Duration::from_secs(seconds))
        })
        .await??;
        return Ok(result.rate * result.requests.saturating_sub(result.failed) as f64 / result.requests.max(1) as f64);
    }
    let result = crate::load::ClosedLoop {
        base: rig.base.clone(),
        path: path.to_owned(),
        body,
        connections: args.connections,
        duration: Duration::from_secs(args.seconds),
        header: None,
    }
    .run()
    .await?;
    Ok(result.rate())
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    Rig::around(async |rig| measure(rig, &args).await).await
}

async fn measure(rig: &Rig, args: &Args) -> Result<(), BoxError> {
    let live = rig.webhook("live").await?;
    let old = rig.webhook("old").await?;
    // Captures older than 30 days go; the live endpoint keeps everything it gets during the runs.
    sqlx::query("UPDATE webhooks SET max_age_days = 30 WHERE id = $1::uuid").bind(&old).execute(&rig.pool).await?;
    let started = Instant::now();
    plant(rig, &old, args.expired).await?;
    println!("retention: {} expired captures planted in {:.1} s", args.expired, started.elapsed().as_secs_f64());
    let path = format!("/webhook/{live}");
    load(rig, &path, args).await?; // warm-up
    let quiet = load(rig, &path, args).await?;
    let pool = rig.pool.clone();
    let sweep = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await; // the load is running
        let started = chrono::Utc::now();
        let deleted = hookflow_control_plane::tasks::retention::sweep(&pool).await;
        (deleted, started, chrono::Utc::now())
    });
    // The load runs in rounds until the sweep is over, so every moment of the sweep is under load.
    let mut rounds = vec![load(rig, &path, args).await?];
    while !sweep.is_finished() {
        rounds.push(load(rig, &path, args).await?);
    }
    let during = rounds.iter().sum::<f64>() / rounds.len() as f64;
    let (deleted, from, to) = sweep.await?;
    let deleted = deleted?;
    // Captures stored while the sweep itself ran, by their receipt times.
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM captures WHERE webhook_id = $1::uuid AND received_at BETWEEN $2 AND $3",
    )
    .bind(&live)
    .bind(from)
    .bind(to)
    .fetch_one(&rig.pool)
    .await?;
    let took = (to - from).to_std().unwrap_or_default().as_secs_f64();
    let in_sweep = stored as f64 / took.max(0.001);
    println!("  durable captures/s without a sweep: {quiet:.0}");
    println!("  durable captures/s over {} runs with the sweep in them: {during:.0}", rounds.len());
    println!(
        "  the sweep deleted {deleted} captures in {took:.1} s; captures/s while it ran: {in_sweep:.0}, a dip of \
         {:.1}% (target <= 20%)",
        (1.0 - in_sweep / quiet) * 100.0
    );
    Ok(())
}
