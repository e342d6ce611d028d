//! `hookflow-bench deliveries` (issue #49): captures/s into an endpoint with two destinations beside one without
//! (same run); deliveries/s from the server's sender to a local receiver beside a bare reqwest client sending the
//! same requests with the same concurrency; delivery lag (capture answered -> receiver) p50/p99 at a fixed capture
//! rate.

use crate::load::{ClosedLoop, on_load_runtime, p50_p99_ms};
use crate::setup::{BoxError, Rig};
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Concurrent keep-alive connections of the capture runs.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Seconds each capture run lasts.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Deliveries of the throughput run.
    #[arg(long, default_value_t = 5000)]
    deliveries: usize,
    /// In flight at once for the bare client: the server's sender keeps at most 32 attempts of one organization in
    /// flight on a replica (`delivery::room::ORG_IN_FLIGHT`), and every delivery here is one organization's.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Captures per second of the lag run.
    #[arg(long, default_value_t = 1000)]
    rate: u32,
    /// Seconds the lag run lasts.
    #[arg(long, default_value_t = 5)]
    lag_seconds: u64,
    /// Print PostgreSQL's execution time per statement of the deliveries/s run (`pg_stat_statements`).
    #[arg(long)]
    pg_statements: bool,
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// A receiver that counts arrivals and, for bodies carrying `"t": <unix µs>`, records how long after it they came.
#[derive(Debug, Default)]
struct Receiver {
    arrivals: AtomicU64,
    lags_us: Mutex<Vec<u32>>,
}

async fn start_receiver() -> Result<(String, Arc<Receiver>), BoxError> {
    let state = Arc::new(Receiver::default());
    let shared = state.clone();
    let router = axum::Router::new().fallback(move |body: Bytes| {
        let state = shared.clone();
        async move {
            state.arrivals.fetch_add(1, Ordering::Relaxed);
            if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&body)
                && let Some(t) = value["t"].as_u64()
            {
                let lag = now_us().saturating_sub(t).min(u64::from(u32::MAX)) as u32;
                state.lags_us.lock().expect("lock").push(lag);
            }
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok((base, state))
}

async fn wait_for(receiver: &Receiver, n: u64, within: Duration) -> Result<Duration, BoxError> {
    let started = Instant::now();
    while receiver.arrivals.load(Ordering::Relaxed) < n {
        if started.elapsed() > within {
            return Err(format!("only {} of {n} arrived", receiver.arrivals.load(Ordering::Relaxed)).into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(started.elapsed())
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    let rig = if args.pg_statements {
        Rig::start_with_settings(crate::pg_statements::PRELOAD).await?
    } else {
        Rig::start().await?
    };
    let outcome = measure(&rig, &args).await;
    rig.stop().await;
    outcome
}

async fn measure(rig: &Rig, args: &Args) -> Result<(), BoxError> {
    {
        let (receiver_base, receiver) = start_receiver().await?;
        let body = Bytes::from(format!("{{\"event\":\"bench\",\"pad\":\"{}\"}}", "x".repeat(1000)));
        let duration = Duration::from_secs(args.seconds);
        sqlx::query("UPDATE organizations SET private_network = true").execute(&rig.pool).await?;

        // 1. Captures/s without and with two destinations, same run.
        let plain = rig.webhook("plain").await?;
        let delivering = rig.webhook("delivering").await?;
        for name in ["one", "two"] {
            rig.post(
                &format!("/webhooks/{delivering}/destinations"),
                serde_json::json!({"name": name, "url": format!("{receiver_base}/{name}")}),
            )
            .await?;
        }
        let run = |id: &str| ClosedLoop {
            base: rig.base.clone(),
            path: format!("/webhook/{id}"),
            body: body.clone(),
            connections: args.connections,
            duration,
            header: None,
        };
        // The capture path's own cost apart from the sending's CPU (on a small machine both share the cores):
        // two destinations whose deliveries are written but wait (disabled).
        let waiting = rig.webhook("waiting").await?;
        for name in ["one", "two"] {
            rig.post(
                &format!("/webhooks/{waiting}/destinations"),
                serde_json::json!({"name": name, "url": format!("{receiver_base}/{name}"), "enabled": false}),
            )
            .await?;
        }
        let without = run(&plain).run().await?;
        let written = run(&waiting).run().await?;
        let with = run(&delivering).run().await?;
        let owed = 2 * with.ok;
        wait_for(&receiver, owed, Duration::from_secs(600)).await?;
        println!(
            "captures/s: {:.0} with two destinations, {:.0} without (ratio {:.2}); {} deliveries sent meanwhile and \
             after",
            with.rate(),
            without.rate(),
            with.rate() / without.rate(),
            owed
        );
        println!(
            "captures/s: {:.0} with two destinations whose deliveries wait (written, not sent), {:.0} without \
             (ratio {:.2}): the capture path's cost apart from sending's CPU",
            written.rate(),
            without.rate(),
            written.rate() / without.rate()
        );

        // 2. Deliveries/s: N pending deliveries released at once, beside a bare client sending N alike.
        let backlog = rig.webhook("backlog").await?;
        let made = rig
            .post(
                &format!("/webhooks/{backlog}/destinations"),
                serde_json::json!({"name": "backlog", "url": format!("{receiver_base}/backlog"), "enabled": false}),
            )
            .await?;
        let destination = made["id"].as_str().ok_or("no id")?.to_owned();
        let client = reqwest::Client::new();
        let capture_url = format!("{}/webhook/{backlog}", rig.base);
        {
            use futures_util::StreamExt as _;
            futures_util::stream::iter(0..args.deliveries)
                .map(|_| client.post(&capture_url).body(body.clone()).send())
                .buffer_unordered(32)
                .collect::<Vec<_>>()
                .await;
        }
        let before = receiver.arrivals.load(Ordering::Relaxed);
        if args.pg_statements {
            crate::pg_statements::reset(&rig.pool).await?;
        }
        // Enabling the destination makes its backlog due (one statement moves every pending row out of its
        // wait): timed apart; the rate counts from its answer, the deliveries made by then apart.
        let enabling = Instant::now();
        rig.api()
            .patch::<_, serde_json::Value>(
                &format!("/webhooks/{backlog}/destinations/{destination}"),
                &serde_json::json!({"enabled": true}),
            )
            .await?;
        let started = Instant::now();
        let enabled_in = started - enabling;
        let early = receiver.arrivals.load(Ordering::Relaxed) - before;
        println!(
            "  enabling the destination (its {} pending deliveries made due) answered in {:.1} ms ({early} sent by then)",
            args.deliveries,
            enabled_in.as_secs_f64() * 1000.0
        );
        wait_for(&receiver, before + args.deliveries as u64, Duration::from_secs(600)).await?;
        let server_rate = (args.deliveries as u64 - early) as f64 / started.elapsed().as_secs_f64();
        let with_enabling = args.deliveries as f64 / enabling.elapsed().as_secs_f64();
        if args.pg_statements {
            let (avg, max, n): (f64, i32, i64) =
                sqlx::query_as("SELECT avg(duration_ms)::float8, max(duration_ms), count(*) FROM delivery_attempts")
                    .fetch_one(&rig.pool)
                    .await?;
            println!("  attempts: {n}, duration avg {avg:.1} ms, max {max} ms");
            crate::pg_statements::print_top(&rig.pool, args.deliveries as u64, "delivery").await?;
        }
        let (n, concurrency, url, sent_body) =
            (args.deliveries, args.concurrency, format!("{receiver_base}/bare"), body.clone());
        let bare = on_load_runtime(move || async move {
            use futures_util::StreamExt as _;
            let client = reqwest::Client::new();
            let started = Instant::now();
            futures_util::stream::iter(0..n)
                .map(|i| {
                    client
                        .post(&url)
                        .header("content-type", "application/json")
                        .header("webhook-id", i.to_string())
                        .body(sent_body.clone())
                        .send()
                })
                .buffer_unordered(concurrency)
                .collect::<Vec<_>>()
                .await;
            Ok(n as f64 / started.elapsed().as_secs_f64())
        })
        .await?;
        println!(
            "deliveries/s: {server_rate:.0} by the server's sender, {bare:.0} by a bare reqwest client ({} in flight) \
             (ratio {:.2}; counting the enabling too {with_enabling:.0}/s, ratio {:.2})",
            args.concurrency,
            server_rate / bare,
            with_enabling / bare
        );

        // 3. Lag at a fixed capture rate: each body carries its send time.
        let lagging = rig.webhook("lag").await?;
        rig.post(
            &format!("/webhooks/{lagging}/destinations"),
            serde_json::json!({"name": "lag", "url": format!("{receiver_base}/lag")}),
        )
        .await?;
        receiver.lags_us.lock().expect("lock").clear();
        let total = u64::from(args.rate) * args.lag_seconds;
        let before = receiver.arrivals.load(Ordering::Relaxed);
        let (rate, url) = (args.rate, format!("{}/webhook/{lagging}", rig.base));
        on_load_runtime(move || async move {
            let client = reqwest::Client::new();
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
            let mut sends = Vec::with_capacity(total as usize);
            for _ in 0..total {
                tick.tick().await;
                let request = client.post(&url).body(format!("{{\"t\": {}}}", now_us()));
                sends.push(tokio::spawn(request.send()));
            }
            for send in sends {
                let _ = send.await;
            }
            Ok(())
        })
        .await?;
        wait_for(&receiver, before + total, Duration::from_secs(600)).await?;
        let lags = receiver.lags_us.lock().expect("lock").clone();
        let (p50, p99) = p50_p99_ms(&lags);
        println!(
            "delivery lag at {} captures/s: p50 {p50:.1} ms, p99 {p99:.1} ms ({} deliveries)",
            args.rate,
            lags.len()
        );
        Ok(())
    }
}
