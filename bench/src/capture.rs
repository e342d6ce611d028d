//! `hookflow-bench capture`: durable capture throughput and latency beside a bare axum handler in the same run,
//! and capture-to-subscriber latency with many SSE subscribers at a fixed capture rate.

use crate::load::{self, BoxError, ClosedLoop, Connection};
use crate::setup::Rig;
use bytes::Bytes;
use hookflow_shared::wire::header;
use http_body_util::BodyExt as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Concurrent keep-alive connections of the throughput runs.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Seconds each throughput run lasts (after a one-second warm-up).
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Size of each JSON body.
    #[arg(long, default_value_t = 1024)]
    body_bytes: usize,
    /// SSE subscribers of the latency run.
    #[arg(long, default_value_t = 50)]
    subscribers: usize,
    /// Captures per second during the latency run.
    #[arg(long, default_value_t = 1000)]
    rate: u32,
    /// Seconds the latency run lasts.
    #[arg(long, default_value_t = 5)]
    stream_seconds: u64,
    /// Use hookflow-bench's own HTTP client even when wrk is installed.
    #[arg(long)]
    own_client: bool,
}

/// A JSON object of about `size` bytes.
fn json_body(size: usize) -> Bytes {
    let pad = size.saturating_sub(40);
    Bytes::from(format!("{{\"event\":\"bench\",\"pad\":\"{}\"}}", "x".repeat(pad)))
}

/// An endpoint verifying GitHub signatures, and the header a genuine sender of `body` puts on it.
async fn verified_endpoint(rig: &Rig, body: &[u8]) -> Result<(String, (String, String)), BoxError> {
    let secret = "bench-github-secret";
    let created = rig
        .post(
            "/webhooks",
            serde_json::json!({"name": "verified", "verification": {"scheme": "github", "secrets": [secret]}}),
        )
        .await?;
    let id = created["id"].as_str().ok_or("no id")?.to_owned();
    let sign = hookflow_tests::signers::Sign { secret, body, timestamp: 0, url: "" };
    let header = hookflow_tests::signers::github(sign).headers.into_iter().next().ok_or("no signature")?;
    Ok((format!("/webhook/{id}"), header))
}

/// An endpoint with 50 response rules (#51) of which only the last matches a POST to its capture URL (the 49
/// before it want another method or path): the rules' cost on the capture path.
async fn ruled_endpoint(rig: &Rig) -> Result<String, BoxError> {
    let mut rules: Vec<serde_json::Value> = (0..49)
        .map(|i| {
            serde_json::json!({"method": if i % 2 == 0 { "PUT" } else { "POST" }, "path": format!("/never/{i}/{{id}}"),
            "status": 202, "body": "never"})
        })
        .collect();
    rules.push(serde_json::json!({"method": "POST", "status": 200, "headers": {"Content-Type": "application/json"},
        "body": "{\"received\": \"{{request.id}}\"}"}));
    let created = rig.post("/webhooks", serde_json::json!({"name": "fifty rules", "rules": rules})).await?;
    let id = created["id"].as_str().ok_or("no id")?.to_owned();
    Ok(format!("/webhook/{id}"))
}

/// The same shape of answer as the capture path, from a handler that stores nothing.
async fn start_bare_axum() -> Result<String, BoxError> {
    async fn receipt(body: Bytes) -> axum::Json<serde_json::Value> {
        axum::Json(serde_json::json!({"message": "Request captured", "request_id": uuid::Uuid::now_v7(),
            "received_at": hookflow_shared::Timestamp::now(), "size": body.len()}))
    }
    let router = axum::Router::new().route("/webhook/{id}", axum::routing::post(receipt));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(base)
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// One throughput run, from whichever client produced it.
#[derive(Debug, Clone, Copy)]
struct Measured {
    rate: f64,
    p50: f64,
    p99: f64,
    ok: u64,
    failed: u64,
}

/// Rows per statement of the storage limit: the capture writer's largest batch.
const STORAGE_BATCH: i64 = 512;

/// The storage limit: the same rows (same table, columns and indexes, time-ordered ids, bodies of the same size)
/// generated inside PostgreSQL, `STORAGE_BATCH` per statement, on 2 connections (the writer's batches in flight),
/// for `duration`. The rows are removed afterwards.
async fn storage_limit(rig: &Rig, body_bytes: usize, duration: Duration) -> Result<f64, BoxError> {
    let webhook = rig.webhook("storage-limit").await?;
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let mut writers = Vec::new();
    for _ in 0..2 {
        let (pool, webhook, org) = (rig.pool.clone(), webhook.clone(), rig.org);
        writers.push(tokio::spawn(async move {
            let mut rows = 0i64;
            while Instant::now() < deadline {
                let done = sqlx::query(
                    "INSERT INTO captures (id, organization_id, webhook_id, method, path, query_string, query, headers,
                                           content_type, body, body_size, body_sha256, body_utf8, source_ip, received_at)
                     SELECT (lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0')
                             || substr(md5(random()::text || n), 1, 20))::uuid,
                            $1, $2::uuid, 'POST', '', '', '{}'::jsonb,
                            '[[\"content-type\", \"application/json\"], [\"user-agent\", \"bench\"]]'::jsonb,
                            'application/json', b.body, length(b.body), sha256(b.body), true, '127.0.0.1', now()
                     FROM generate_series(1, $3) n, (SELECT convert_to(repeat('x', $4), 'UTF8') AS body) b",
                )
                .bind(org)
                .bind(&webhook)
                .bind(STORAGE_BATCH)
                .bind(i32::try_from(body_bytes).unwrap_or(1024))
                .execute(&pool)
                .await?;
                rows += i64::try_from(done.rows_affected()).unwrap_or(0);
            }
            Ok::<_, sqlx::Error>(rows)
        }));
    }
    let mut rows = 0;
    for writer in writers {
        rows += writer.await??;
    }
    let rate = rows as f64 / started.elapsed().as_secs_f64();
    sqlx::query("DELETE FROM captures WHERE webhook_id = $1::uuid").bind(&webhook).execute(&rig.pool).await?;
    Ok(rate)
}

/// One run of POSTs, by wrk or the bench's own client; only 2xx answers count (a refused request is no durable
/// capture).
async fn post_load(load: ClosedLoop, use_wrk: bool) -> Result<Measured, BoxError> {
    if !use_wrk {
        let r = load.run().await?;
        let (p50, p99) = (r.percentile_ms(50.0), r.percentile_ms(99.0));
        return Ok(Measured { rate: r.rate(), p50, p99, ok: r.ok, failed: r.failed });
    }
    let url = format!("{}{}", load.base, load.path);
    let result = tokio::task::spawn_blocking(move || {
        crate::wrk::post(&url, &load.body, load.header.as_slice(), load.connections, load.duration)
    })
    .await??;
    let ok = result.requests.saturating_sub(result.failed);
    Ok(Measured {
        rate: result.rate * ok as f64 / result.requests.max(1) as f64,
        p50: result.p50_ms,
        p99: result.p99_ms,
        ok,
        failed: result.failed,
    })
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    Rig::around(async |rig| measure(rig, &args).await).await
}

async fn measure(rig: &Rig, args: &Args) -> Result<(), BoxError> {
    let webhook = rig.webhook("throughput").await?;
    let path = format!("/webhook/{webhook}");
    let (verified_path, signature) = verified_endpoint(rig, &json_body(args.body_bytes)).await?;
    let body = json_body(args.body_bytes);
    let bare = start_bare_axum().await?;
    let (run, warm) = (Duration::from_secs(args.seconds), Duration::from_secs(1));
    println!(
        "hookflow-bench capture: {} connections, {} B JSON bodies, {} s per run, 2 cores shared by server and load",
        args.connections,
        body.len(),
        args.seconds
    );

    let use_wrk = crate::wrk::available() && !args.own_client;
    let client = if use_wrk { "wrk (2 threads)" } else { "hookflow-bench's own HTTP/1 client" };
    let load = |base: &str, path: &str, header: Option<(String, String)>, duration: Duration| {
        let load = ClosedLoop {
            base: base.to_owned(),
            path: path.to_owned(),
            body: body.clone(),
            connections: args.connections,
            duration,
            header,
        };
        post_load(load, use_wrk)
    };
    let http = |base: &str, duration: Duration| load(base, &path, None, duration);
    http(&bare, warm).await?;
    let baseline = http(&bare, run).await?;
    http(&rig.base, warm).await?;
    let rss_before = rss_mib();
    let captures = http(&rig.base, run).await?;
    let rss_after = rss_mib();
    load(&rig.base, &verified_path, Some(signature.clone()), warm).await?;
    let verified = load(&rig.base, &verified_path, Some(signature), run).await?;
    // Unverified once more, after the verified run: the table has grown since the first, so the verified run is
    // compared with the mean of the runs on either side of it.
    let again = http(&rig.base, run).await?;
    let ruled_path = ruled_endpoint(rig).await?;
    load(&rig.base, &ruled_path, None, warm).await?;
    let ruled = load(&rig.base, &ruled_path, None, run).await?;
    let after_rules = http(&rig.base, run).await?;
    let valid: i64 = sqlx::query_scalar("SELECT count(*) FROM captures WHERE signature_verdict = 'valid'")
        .fetch_one(&rig.pool)
        .await?;
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM captures").fetch_one(&rig.pool).await?;
    let limit = storage_limit(rig, args.body_bytes, run).await?;

    println!("\nHTTP load from {client}; the storage limit from SQL inside PostgreSQL over the pool.");
    println!("\n| run | per s | p50 ms | p99 ms | failed |\n|---|---|---|---|---|");
    let runs = [
        ("bare axum handler", &baseline),
        ("durable capture", &captures),
        ("durable capture, signature verified (github, HMAC-SHA256)", &verified),
        ("durable capture, again after the verified run", &again),
        ("durable capture, 50 response rules (the last one answers)", &ruled),
        ("durable capture, again after the rules run", &after_rules),
    ];
    for (name, r) in runs {
        println!("| {name} | {:.0} | {:.2} | {:.2} | {} |", r.rate, r.p50, r.p99, r.failed);
    }
    println!("| raw SQL rows, {} per statement, 2 connections | {limit:.0} | | | |", STORAGE_BATCH);
    println!(
        "\ncapture / bare ratio: {:.3} (target >= 0.25); capture / storage limit: {:.3}; capture p99 \
         {:.2} ms (target <= 25 ms)",
        captures.rate / baseline.rate,
        captures.rate / limit,
        captures.p99
    );
    // Each capture costs at least a bare exchange (load generator and HTTP) plus the cheapest write of its row, and
    // both of those saturate this machine's cores on their own: their rates bound what any capture path can do here.
    let ceiling = 1.0 / (1.0 / baseline.rate + 1.0 / limit);
    println!(
        "this machine's ceiling for captures (a bare exchange plus a raw row each, as measured above): {ceiling:.0} /s, \
         {:.3} of the storage limit; captures reach {:.3} of the ceiling (target >= 0.8)",
        ceiling / limit,
        captures.rate / ceiling
    );
    println!(
        "verified / unverified capture ratio: {:.3} (target >= 0.95; unverified: the mean of the runs before and \
         after it); {valid} verified captures stored valid",
        verified.rate / ((captures.rate + again.rate) / 2.0)
    );
    println!(
        "50 rules / no rules capture ratio: {:.3} (target >= 0.9; no rules: the mean of the runs before and after it)",
        ruled.rate / ((again.rate + after_rules.rate) / 2.0)
    );
    println!("rows stored: {stored} (every acknowledged capture of warm-up and run: {})", stored as u64 >= captures.ok);
    let process = if use_wrk { "server and bare handler; wrk runs apart" } else { "server and load generator" };
    println!(
        "process RSS ({process}): {rss_before:.0} MiB before, {rss_after:.0} MiB after the capture run (target server <= 150 MiB)"
    );

    stream_latency(rig, args).await
}

/// Subscribers measure, per event, now minus the send time carried in the capture's body.
async fn stream_latency(rig: &Rig, args: &Args) -> Result<(), BoxError> {
    let webhook = rig.webhook("stream").await?;
    let (base, key, org) = (rig.base.clone(), rig.key.clone(), rig.org.to_string());
    let (subscribers, rate, seconds) = (args.subscribers, args.rate, args.stream_seconds);
    let (sent, samples) = load::on_load_runtime(move || async move {
        subscribe_and_send(&base, &key, &org, &webhook, subscribers, rate, seconds).await
    })
    .await?;
    let expected = sent * subscribers as u64;
    let ((p50, p99), seen, rate) = (load::p50_p99_ms(&samples), samples.len(), sent as f64 / seconds as f64);
    println!(
        "\ncapture -> SSE subscriber: {subscribers} subscribers, {rate:.0} captures/s sent for {seconds} s; {seen} of {expected} deliveries seen; p50 {p50:.2} ms, p99 {p99:.2} ms (target p99 <= 50 ms)"
    );
    Ok(())
}

/// Opens the subscribers, sends paced captures, and returns how many were sent and every delivery latency. One
/// function on purpose: the subscribers, the pacing and the clock share one timeline.
pub async fn subscribe_and_send(
    base: &str,
    key: &str,
    org: &str,
    webhook: &str,
    subscriber_count: usize,
    rate: u32,
    seconds: u64,
) -> Result<(u64, Vec<u32>), BoxError> {
    let samples: Arc<Mutex<Vec<u32>>> = Arc::default();
    let mut subscribers = Vec::new();
    for _ in 0..subscriber_count {
        let mut connection = Connection::open(base).await?;
        let mut body = connection
            .open_stream(&format!("/webhooks/{webhook}/stream"), &[(header::API_KEY, key), (header::ORGANIZATION, org)])
            .await?;
        let samples = samples.clone();
        subscribers.push(tokio::spawn(async move {
            let _keep = connection;
            let mut buffer = String::new();
            while let Some(Ok(frame)) = body.frame().await {
                let Ok(data) = frame.into_data() else { continue };
                buffer.push_str(&String::from_utf8_lossy(&data));
                while let Some(end) = buffer.find('\n') {
                    let line: String = buffer.drain(..=end).collect();
                    // The body is `{"t":<micros>}`, escaped inside the event's JSON: find it without parsing.
                    let Some(at) = line.find(r#"{\"t\":"#) else { continue };
                    let digits: String = line[at + 7..].chars().take_while(char::is_ascii_digit).collect();
                    let sent = digits.parse::<u64>().ok();
                    if let Some(sent) = sent {
                        let now =
                            SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0);
                        samples.lock().expect("lock").push(now.saturating_sub(sent).min(u64::from(u32::MAX)) as u32);
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Paced senders: `rate` captures per second in total.
    // Enough connections that each sends well under its round-trip rate.
    let senders = 32u32;
    let per_sender = Duration::from_secs_f64(f64::from(senders) / f64::from(rate.max(1)));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let path = format!("/webhook/{webhook}");
    let mut pacers = Vec::new();
    for _ in 0..senders {
        let mut connection = Connection::open(base).await?;
        let path = path.clone();
        pacers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(per_sender);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut sent = 0u64;
            while Instant::now() < deadline {
                tick.tick().await;
                let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0);
                if let Ok((200, _)) = connection
                    .send("POST", &path, &[("content-type", "application/json")], Bytes::from(format!("{{\"t\":{t}}}")))
                    .await
                {
                    sent += 1;
                }
            }
            sent
        }));
    }
    let mut sent = 0;
    for pacer in pacers {
        sent += pacer.await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for subscriber in &subscribers {
        subscriber.abort();
    }
    let samples = samples.lock().expect("lock").clone();
    Ok((sent, samples))
}
