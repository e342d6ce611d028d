//! A delivery's lease (issue #49, review of the one-statement claim): an attempt is recorded only under the lease it
//! was made with. The attack: an attempt outlives its lease (a receiver that hangs), another claim takes the
//! delivery and fails, then the first attempt ends with 200; recorded anyway, it would mark the delivery delivered
//! twice over (attempts counted for both) and hide the failure of the attempt that holds the lease.

use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A receiver whose first request hangs for `hang` then answers 200, whose second answers 503 and the rest 200;
/// it keeps each arrival's `webhook-id`.
async fn hanging_receiver(hang: Duration) -> (String, Arc<AtomicUsize>, Arc<std::sync::Mutex<Vec<String>>>) {
    let arrivals = Arc::new(AtomicUsize::new(0));
    let ids = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (count, seen) = (arrivals.clone(), ids.clone());
    let router = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let (count, seen) = (count.clone(), seen.clone());
        async move {
            let id = headers.get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            seen.lock().expect("lock").push(id);
            match count.fetch_add(1, Ordering::SeqCst) {
                0 => {
                    tokio::time::sleep(hang).await;
                    axum::http::StatusCode::OK
                }
                1 => axum::http::StatusCode::SERVICE_UNAVAILABLE,
                _ => axum::http::StatusCode::OK,
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    (base, arrivals, ids)
}

async fn delivery(app: &TestApp, destination: &str) -> (String, i32) {
    sqlx::query_as("SELECT status, attempts FROM deliveries WHERE destination_id = $1::uuid")
        .bind(destination)
        .fetch_one(&app.pool)
        .await
        .expect("the delivery")
}

async fn wait_for(what: &str, within: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_attempt_that_outlived_its_lease_is_not_recorded() {
    let app = TestApp::spawn().await;
    let webhook = app.webhook_named("leases").await;
    let hang = Duration::from_secs(2);
    let (base, arrivals, ids) = hanging_receiver(hang).await;
    let made = app
        .admin(
            Method::POST,
            &format!("/webhooks/{webhook}/destinations"),
            Some(json!({"name": "hangs", "url": format!("{base}/in"), "retry_schedule_s": [5, 1]})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    let destination = made.body["id"].as_str().expect("id").to_owned();
    assert_eq!(app.capture(Method::POST, &format!("{webhook}/x"), "{}").await.status, 200);

    // The first attempt hangs at the receiver; its lease is taken over as when it runs out and another claim
    // takes the delivery (a new lease, due at once).
    let first = tokio::time::timeout(Duration::from_secs(10), async {
        while arrivals.load(Ordering::SeqCst) < 1 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    if first.is_err() {
        let row: (String, i32, Option<serde_json::Value>) =
            sqlx::query_as("SELECT status, attempts, last_attempt FROM deliveries WHERE destination_id = $1::uuid")
                .bind(&destination)
                .fetch_one(&app.pool)
                .await
                .expect("the delivery");
        panic!("the first attempt did not arrive within 10 s: {row:?}");
    }
    let hung_at = Instant::now();
    sqlx::query(
        "UPDATE deliveries SET lease = gen_random_uuid(), leased_until = now() - interval '1 second'
         WHERE destination_id = $1::uuid",
    )
    .bind(&destination)
    .execute(&app.pool)
    .await
    .expect("the lease taken over");
    // The sender claims it again: that attempt gets 503 and is recorded (pending, one attempt).
    wait_for("the second attempt recorded", Duration::from_secs(10), async || {
        delivery(&app, &destination).await.1 >= 1
    })
    .await;
    // The hung attempt ends with 200 under a lease the delivery no longer has: not recorded, the delivery stays
    // pending for its retry (5 s after the failed attempt).
    tokio::time::sleep((hung_at + hang + Duration::from_secs(1)).saturating_duration_since(Instant::now())).await;
    assert_eq!(delivery(&app, &destination).await, ("pending".to_owned(), 1), "the hung attempt was recorded");
    let attempts: Vec<(i32, Option<i32>)> = sqlx::query_as(
        "SELECT a.attempt, a.status_code FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
         WHERE d.destination_id = $1::uuid ORDER BY a.attempt",
    )
    .bind(&destination)
    .fetch_all(&app.pool)
    .await
    .expect("attempts");
    assert_eq!(attempts, vec![(1, Some(503))], "only the attempt under the current lease");
    wait_for("delivered by the retry", Duration::from_secs(15), async || {
        delivery(&app, &destination).await.0 == "delivered"
    })
    .await;
    let (status, attempts) = delivery(&app, &destination).await;
    assert_eq!((status.as_str(), attempts), ("delivered", 2));
    assert_eq!(arrivals.load(Ordering::SeqCst), 3, "hung, failed, delivered");
    let ids = ids.lock().expect("lock").clone();
    assert!(ids.iter().all(|id| id == &ids[0]) && !ids[0].is_empty(), "one webhook-id on every attempt: {ids:?}");
}
