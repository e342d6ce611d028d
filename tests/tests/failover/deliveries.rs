//! Deliveries through a database failover (issue #49): an endpoint with a destination on a real receiver, captures
//! through two servers while the receiver takes them slowly (the destination's rate limit), so deliveries are
//! pending when the primary's PostgreSQL is SIGKILLed; after the standby's promotion every acknowledged capture
//! arrives at the receiver (compared by body hash), with the `webhook-id` of its delivery on the new primary.

use super::support::Api;
use super::{Kind, SERVER, Sent, load, wait_until_writable_captures};
use hookflow_tests::autofailover::FailoverSet;
use hookflow_tests::receiver::Receiver;
use hookflow_tests::server::ServerProcess;
use reqwest::Method;
use serde_json::json;
use sha2::{Digest as _, Sha256};
use sqlx::ConnectOptions as _;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Attempts a second the receiver is sent (a few hundred captures take seconds to deliver).
const RATE: u32 = 60;

fn digest(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "brings up a pg_auto_failover set (about a minute); .ci/run runs it"]
async fn every_acknowledged_capture_is_delivered_through_a_failover() {
    let mut set = FailoverSet::start().await;
    let url = set.url("read-write");
    // The receiver is on loopback: the servers may reach private targets.
    let extra = ["--metrics-listen", "127.0.0.1:0", "--allow-private-targets"];
    let first = ServerProcess::spawn_at(SERVER, &url, &extra).await;
    let second = ServerProcess::spawn_beside(SERVER, &first, &extra).await;
    let api = Api::new(&first.org, &first.key);
    let bases = vec![first.base.clone(), second.base.clone()];
    api.expect(Method::PATCH, &bases[0], "/organization", Some(json!({"capture_rate_limit_per_s": 10_000})), 200).await;
    let webhook = api.expect(Method::POST, &bases[0], "/webhooks", Some(json!({"name": "delivering"})), 201).await;
    let webhook = webhook["id"].as_str().expect("id").to_owned();
    let receiver = Receiver::spawn(200).await;
    let destination = json!({"name": "slow", "url": format!("{}/in", receiver.base), "rate_limit_per_s": RATE,
        "retry_schedule_s": [1, 1, 2, 2, 5, 5, 10, 10]});
    api.expect(Method::POST, &bases[0], &format!("/webhooks/{webhook}/destinations"), Some(destination), 201).await;

    // Two capturing workers across both servers: 2 s, the kill, until captures are stored again, 2 s more.
    let stop = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let workers: Vec<_> = (0..2)
        .map(|_| tokio::spawn(load(api.clone(), bases.clone(), Kind::Capture, webhook.clone(), stop.clone(), began)))
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before_kill = receiver.count();
    let killed_at = began.elapsed();
    set.crash(0);
    let back_after = wait_until_writable_captures(&api, &bases, &webhook, began).await - killed_at;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    let mut sent: Vec<Sent> = Vec::new();
    for worker in workers {
        sent.extend(worker.await.expect("a load worker"));
    }
    let acknowledged: Vec<&Sent> = sent.iter().filter(|s| s.answer.status == 200).collect();
    println!(
        "deliveries: {} captures acknowledged ({} sent); {before_kill} had arrived at the kill; captures back {:.1} s \
         after it",
        acknowledged.len(),
        sent.len(),
        back_after.as_secs_f64()
    );
    assert!(acknowledged.len() >= 100, "hundreds of captures were acknowledged: {}", acknowledged.len());
    assert!(
        before_kill < acknowledged.len(),
        "deliveries were pending at the kill ({before_kill} of {} arrived)",
        acknowledged.len()
    );
    assert_eq!(set.primary().await, Some(1), "node2 was promoted");

    // Every acknowledged capture arrives (the probes' captures too, but only the load's are counted).
    let owed: HashSet<String> = acknowledged.iter().map(|s| digest(s.marker.as_bytes())).collect();
    let arrivals = receiver
        .wait_until(Duration::from_secs(120), |arrivals| {
            let seen: HashSet<String> = arrivals.iter().map(|a| digest(&a.body)).collect();
            owed.is_subset(&seen)
        })
        .await;

    // Each arrival's `webhook-id` is the delivery of its capture on the new primary.
    let mut conn = set.node(1).connect().await.expect("the new primary");
    let rows: Vec<(uuid::Uuid, Vec<u8>)> = sqlx::query_as(
        "SELECT d.id, c.body FROM deliveries d JOIN captures c ON c.organization_id = d.organization_id
             AND c.id = d.capture_id WHERE d.webhook_id = $1::uuid",
    )
    .bind(&webhook)
    .fetch_all(&mut conn)
    .await
    .expect("deliveries");
    let delivery_of: HashMap<String, String> = rows.iter().map(|(id, body)| (digest(body), id.to_string())).collect();
    let mut mismatched = Vec::new();
    let mut arrived: HashMap<String, usize> = HashMap::new();
    for arrival in &arrivals {
        let hash = digest(&arrival.body);
        if !owed.contains(&hash) {
            continue;
        }
        *arrived.entry(hash.clone()).or_default() += 1;
        if delivery_of.get(&hash).map(String::as_str) != arrival.header("webhook-id") {
            mismatched.push((String::from_utf8_lossy(&arrival.body).into_owned(), arrival.header("webhook-id")));
        }
    }
    let duplicates: usize = arrived.values().map(|n| n - 1).sum();
    println!("deliveries: all {} arrived after the failover; {duplicates} arrived twice or more", owed.len());
    assert!(mismatched.is_empty(), "arrivals whose webhook-id is not their capture's delivery: {mismatched:?}");
    // An attempt whose result the failover cut off is made again once its lease ends (at least once): its
    // delivery is recorded delivered then, a little after it arrived.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let settled: i64 =
            sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE webhook_id = $1::uuid AND status = 'delivered'")
                .bind(&webhook)
                .fetch_one(&mut conn)
                .await
                .expect("delivered");
        if settled as usize >= owed.len() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{settled} deliveries recorded delivered of {} after 90 s",
            owed.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for server in [first, second] {
        server.stop().await;
    }
}
