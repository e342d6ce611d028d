//! Deliveries survive a crash (issue #49): a server process SIGKILLed while 2,000 deliveries are pending (some in
//! flight) leaves them to the next process, which delivers every capture.

use crate::SERVER;
use base64::Engine as _;
use hookflow_tests::receiver::Receiver;
use hookflow_tests::server::ServerProcess;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::{Duration, Instant};

async fn call(server: &ServerProcess, method: Method, path: &str, body: Option<Value>) -> Value {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", server.base))
        .header("x-api-key", &server.key)
        .header("x-organization-id", &server.org);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let reply = request.send().await.expect("send");
    assert!(reply.status().is_success(), "{path}: {}", reply.status());
    reply.json().await.unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_with_two_thousand_deliveries_pending_leaves_them_to_the_next() {
    let bytes = [*uuid::Uuid::new_v4().as_bytes(), *uuid::Uuid::new_v4().as_bytes()].concat();
    let key = base64::engine::general_purpose::STANDARD.encode(bytes);
    let first = ServerProcess::spawn(SERVER, &["--master-key", &key]).await;
    let receiver = Receiver::spawn(200).await;
    // 2,000 captures 8 at a time go past the default 1,000/s on a fast machine: every one must be acknowledged.
    call(&first, Method::PATCH, "/organization", Some(json!({"capture_rate_limit_per_s": 10_000}))).await;
    let hook = call(&first, Method::POST, "/webhooks", Some(json!({"name": "crash"}))).await;
    let hook = hook["id"].as_str().expect("id").to_owned();
    // Disabled while the captures arrive: all 2,000 deliveries pending at once.
    let made = json!({"name": "after the crash", "url": receiver.base, "enabled": false, "timeout_ms": 1000});
    let made = call(&first, Method::POST, &format!("/webhooks/{hook}/destinations"), Some(made)).await;
    let destination = made["id"].as_str().expect("id").to_owned();
    const N: usize = 2000;
    {
        use futures_util::StreamExt as _;
        let client = reqwest::Client::new();
        let url = format!("{}/webhook/{hook}", first.base);
        futures_util::stream::iter(0..N)
            .map(|i| {
                let (client, url) = (client.clone(), url.clone());
                async move {
                    let sent = client.post(url).body(format!("{{\"n\": {i}}}")).send().await.expect("capture");
                    assert_eq!(sent.status(), 200);
                }
            })
            .buffer_unordered(8)
            .collect::<Vec<_>>()
            .await;
    }
    let pool = sqlx::PgPool::connect(&first.database_url).await.expect("the database");
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE status = 'pending'")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(pending, N as i64, "every acknowledged capture owes its delivery");

    // Enabled, then killed while it delivers.
    let one = format!("/webhooks/{hook}/destinations/{destination}");
    call(&first, Method::PATCH, &one, Some(json!({"enabled": true}))).await;
    receiver.wait_until(Duration::from_secs(30), |a| a.len() >= 50).await;
    let mut first = first;
    first.child.start_kill().expect("SIGKILL");
    first.child.wait().await.expect("killed");
    let at_kill = receiver.count();
    assert!(at_kill < N, "killed before it was done ({at_kill})");

    let started = Instant::now();
    let next = ServerProcess::spawn_beside(SERVER, &first, &["--master-key", &key]).await;
    let arrivals = receiver
        .wait_until(Duration::from_secs(120), |a| a.iter().map(|x| x.body.clone()).collect::<HashSet<_>>().len() >= N)
        .await;
    let distinct: HashSet<_> = arrivals.iter().map(|a| a.body.clone()).collect();
    assert_eq!(distinct.len(), N, "every capture arrived");
    eprintln!(
        "killed after {at_kill} arrivals; the next process delivered the rest in {:?} ({} arrivals, {} duplicates)",
        started.elapsed(),
        arrivals.len(),
        arrivals.len() - N
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let delivered: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE status = 'delivered'")
            .fetch_one(&pool)
            .await
            .expect("count");
        if delivered == N as i64 {
            break;
        }
        assert!(Instant::now() < deadline, "{delivered} delivered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    next.stop().await;
    first.stop().await;
}
