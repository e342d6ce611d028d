//! A database outage under load, on a PostgreSQL cluster of the test's own: captures and launches answer 503 with
//! `Retry-After` while it is down, the server recovers by itself when it returns, and nothing answered 2xx is lost.

use hookflow_control_plane::db::{self, embedded};
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What one request of the load got.
#[derive(Debug)]
struct Answer {
    status: u16,
    retry_after: bool,
    /// The capture's marker, or the launched execution's id.
    key: String,
    /// Whether it was sent after the cluster was back.
    after_restart: bool,
}

/// A cluster in a directory of its own, removed when dropped.
struct OwnCluster {
    options: embedded::ClusterOptions,
    cluster: embedded::EmbeddedCluster,
}

impl OwnCluster {
    fn start() -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let root = format!("/tmp/hookflow-outage-{}-{nanos}", std::process::id()).into();
        let options = embedded::ClusterOptions::new(root, embedded::Durability::Durable, 50);
        let cluster = embedded::EmbeddedCluster::start(&options).expect("start the test's own cluster");
        Self { options, cluster }
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = self.cluster.stop();
        let _ = std::fs::remove_dir_all(&self.options.root);
    }
}

async fn load(
    app: Arc<TestApp>,
    path: String,
    capture: bool,
    stop: Arc<AtomicBool>,
    restarted: Arc<AtomicBool>,
) -> Vec<Answer> {
    let mut answers = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let after_restart = restarted.load(Ordering::SeqCst);
        let marker = format!("{}-{n}", uuid::Uuid::new_v4());
        let reply = if capture {
            app.capture(Method::POST, &path, marker.clone()).await
        } else {
            app.call(Method::POST, &path, Some(&app.admin), Some(json!({}))).await
        };
        let key = if capture { marker } else { reply.body["id"].as_str().unwrap_or_default().to_owned() };
        let retry_after = reply.headers.contains_key("retry-after");
        answers.push(Answer { status: reply.status.as_u16(), retry_after, key, after_restart });
        if reply.status == 503 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    answers
}

/// One scenario: load, a 10 s outage, recovery, then the bookkeeping of every answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_answers_503_and_loses_nothing_answered() {
    let own = tokio::task::spawn_blocking(OwnCluster::start).await.expect("cluster thread");
    db::ensure_database(own.cluster.connect_options("postgres"), "hookflow").await.expect("database");
    let pool = db::pool(own.cluster.connect_options("hookflow"), 10);
    db::migrate(&pool).await.expect("migrate");
    let mut app = TestApp::spawn_on(pool.clone()).await;
    app.admin = app.new_org("Acme").await;
    // The load measures outages, not the endpoint's rate limit (1,000/s by default, which four senders can pass).
    let lifted = app.admin(Method::PATCH, "/organization", Some(json!({"capture_rate_limit_per_s": 10_000}))).await;
    assert_eq!(lifted.status, 200, "{}", lifted.text);
    let app = Arc::new(app);
    let hook = app.create_webhook(json!({"name": "outage"})).await;
    let capture_path = hook["id"].as_str().expect("id").to_owned();
    let flow = app.delay_flow("outage").await;
    let launch_path = format!("/flows/{flow}/launch");

    let stop = Arc::new(AtomicBool::new(false));
    let restarted = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for i in 0..6 {
        let capture = i < 4;
        let path = if capture { capture_path.clone() } else { launch_path.clone() };
        workers.push(tokio::spawn(load(app.clone(), path, capture, stop.clone(), restarted.clone())));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let own = tokio::task::spawn_blocking(move || {
        let mut own = own;
        own.cluster.stop().expect("stop PostgreSQL");
        std::thread::sleep(Duration::from_secs(10));
        own.cluster = embedded::EmbeddedCluster::start(&own.options).expect("start PostgreSQL again");
        own
    })
    .await
    .expect("outage thread");
    restarted.store(true, Ordering::SeqCst);
    // The server recovers alone: keep the load on until captures and launches succeed again, at most 60 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let capture = app.capture(Method::POST, &capture_path, "probe").await.status;
        let launch = app.call(Method::POST, &launch_path, Some(&app.admin), Some(json!({}))).await.status;
        if (capture.as_u16(), launch.as_u16()) == (200, 201) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not recovered: capture {capture}, launch {launch}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    let mut answers = Vec::new();
    for worker in workers {
        answers.extend(worker.await.expect("worker"));
    }

    let unavailable: Vec<&Answer> = answers.iter().filter(|a| a.status == 503).collect();
    let succeeded = answers.iter().filter(|a| a.status < 300).count();
    println!("outage: {} answers, {succeeded} 2xx, {} 503", answers.len(), unavailable.len());
    assert!(unavailable.len() >= 10, "the outage was met with 503s: {}", unavailable.len());
    assert!(unavailable.iter().all(|a| a.retry_after), "every 503 says when to retry");
    let others: Vec<&Answer> = answers.iter().filter(|a| ![200, 201, 503].contains(&a.status)).collect();
    assert!(others.is_empty(), "only success or 503: {others:?}");
    assert!(answers.iter().any(|a| a.after_restart && a.status == 200), "captures resumed under load");
    assert!(answers.iter().any(|a| a.after_restart && a.status == 201), "launches resumed under load");

    let captured: Vec<&str> = answers.iter().filter(|a| a.status == 200).map(|a| a.key.as_str()).collect();
    let launched: Vec<uuid::Uuid> =
        answers.iter().filter(|a| a.status == 201).map(|a| a.key.parse().expect("execution id")).collect();
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT convert_from(body, 'UTF8') FROM captures WHERE webhook_id = $1::uuid")
            .bind(&capture_path)
            .fetch_all(&pool)
            .await
            .expect("stored captures");
    let stored: std::collections::HashSet<String> = stored.into_iter().collect();
    let lost: Vec<&&str> = captured.iter().filter(|m| !stored.contains(**m)).collect();
    assert!(lost.is_empty(), "{} of {} answered captures are missing: {lost:?}", lost.len(), captured.len());
    let found: i64 = sqlx::query_scalar("SELECT count(*) FROM executions WHERE id = ANY($1)")
        .bind(&launched)
        .fetch_one(&pool)
        .await
        .expect("stored executions");
    assert_eq!(found, i64::try_from(launched.len()).expect("count"), "every answered launch is stored");
    pool.close().await;
    drop(own);
}
