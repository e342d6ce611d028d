//! Attacks on destinations (review of issue #49), each sent for real: a capture sub-path with `..` segments
//! (also `%2e%2e`) never takes a delivery out of the destination's path; a capture whose signature did not verify
//! on a `record` endpoint is delivered unsigned, saying its verdict, and a sender's own `hookflow-verification`
//! header is dropped.

use hookflow_tests::TestApp;
use hookflow_tests::receiver::Receiver;
use hookflow_tests::signers::{Sign, stripe};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn destination(app: &TestApp, webhook: &str, body: Value) -> Value {
    let reply = app.admin(Method::POST, &format!("/webhooks/{webhook}/destinations"), Some(body)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.body
}

/// Sends a capture with a raw request line (no client normalises its path) and answers the capture's id (`None`:
/// the server refused to capture it, 400).
async fn raw_capture(app: &TestApp, target: &str) -> Option<String> {
    // The length is the body's own (a length past it would leave the server waiting for bytes never sent).
    let body = r#"{"a": 1}"#;
    let request = format!(
        "POST {target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = app.raw_http(request.as_bytes()).await;
    if answer.starts_with("HTTP/1.1 400") {
        return None;
    }
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let body = &answer[answer.find("\r\n\r\n").expect("a body") + 4..];
    let receipt: Value = serde_json::from_str(body.trim()).expect("a receipt");
    Some(receipt["request_id"].as_str().expect("request_id").to_owned())
}

/// The status and last attempt of a capture's delivery, once it is no longer pending.
async fn settled(app: &TestApp, capture: &str) -> (String, Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let row: Option<(String, Option<Value>)> = sqlx::query_as(
            "SELECT status, last_attempt FROM deliveries WHERE capture_id = $1::uuid AND status <> 'pending'",
        )
        .bind(capture)
        .fetch_optional(&app.pool)
        .await
        .expect("delivery");
        if let Some((status, last)) = row {
            return (status, last.unwrap_or(Value::Null));
        }
        assert!(Instant::now() < deadline, "the delivery of {capture} settled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_capture_sub_path_with_dot_segments_never_leaves_the_destination_path() {
    let app = TestApp::spawn().await;
    let webhook = app.webhook_named("escape").await;
    let receiver = Receiver::spawn(200).await;
    destination(
        &app,
        &webhook,
        json!({"name": "hooks", "url": format!("{}/hooks/", receiver.base), "retry_schedule_s": []}),
    )
    .await;
    let mut escapes = Vec::new();
    for sub in ["%2e%2e/x", "%2e%2e/%2e%2e/admin/x", "%2E./admin", "a/../../admin", "./x", ".%2e/admin"] {
        if let Some(capture) = raw_capture(&app, &format!("/webhook/{webhook}/{sub}")).await {
            escapes.push((sub, capture));
        }
    }
    let captured: Vec<&str> = escapes.iter().map(|(sub, _)| *sub).collect();
    assert!(captured.contains(&"%2e%2e/%2e%2e/admin/x"), "the encoded escape is captured: {captured:?}");
    let fine = raw_capture(&app, &format!("/webhook/{webhook}/orders/%2e%2e%2fx?k=v")).await.expect("captured");
    for (sub, capture) in &escapes {
        let (status, last) = settled(&app, capture).await;
        assert_eq!(status, "dead", "{sub}: not sent anywhere");
        assert_eq!(last["status_code"], Value::Null, "{sub}: {last}");
        assert!(last["error"].as_str().is_some_and(|e| e.contains("make no URL")), "{sub}: {last}");
    }
    assert_eq!(settled(&app, &fine).await.0, "delivered");
    let arrivals = receiver.arrivals();
    assert_eq!(arrivals.len(), 1, "{:?}", arrivals.iter().map(|a| &a.uri).collect::<Vec<_>>());
    assert_eq!(arrivals[0].uri, "/hooks/orders/%2e%2e%2fx?k=v");
}

const SECRET: &str = "whsec_dfix_test";

#[tokio::test]
async fn a_capture_that_failed_verification_is_delivered_unsigned_with_its_verdict() {
    let app = TestApp::spawn().await;
    let verification = json!({"scheme": "stripe", "secrets": [SECRET], "mode": "record"});
    let created = app.create_webhook(json!({"name": "payments", "verification": verification})).await;
    let webhook = created["id"].as_str().expect("id").to_owned();
    let receiver = Receiver::spawn(200).await;
    let made = destination(
        &app,
        &webhook,
        json!({"name": "signed", "url": format!("{}/in", receiver.base), "signing": "standard-webhooks"}),
    )
    .await;
    assert!(made["signing_secret"].as_str().is_some_and(|s| s.starts_with("whsec_")));

    let url = format!("{}/webhook/{webhook}/p", app.base);
    let send = |body: &'static str, headers: Vec<(String, String)>| {
        let url = url.clone();
        async move {
            let mut request = reqwest::Client::new().post(&url).body(body);
            for (n, v) in headers {
                request = request.header(n, v);
            }
            assert_eq!(request.send().await.expect("capture").status(), 200);
        }
    };
    let now = chrono::Utc::now().timestamp();
    let good = stripe(Sign { secret: SECRET, body: br#"{"n":"valid"}"#, timestamp: now, url: &url });
    send(r#"{"n":"valid"}"#, good.headers.clone()).await;
    let forged = stripe(Sign { secret: "whsec_not_it", body: br#"{"n":"invalid"}"#, timestamp: now, url: &url });
    let mut forged_headers = forged.headers.clone();
    forged_headers.push(("hookflow-verification".to_owned(), "valid".to_owned()));
    send(r#"{"n":"invalid"}"#, forged_headers).await;
    send(r#"{"n":"missing"}"#, vec![("Hookflow-Verification".to_owned(), "valid".to_owned())]).await;

    let arrivals = receiver.wait_until(Duration::from_secs(30), |a| a.len() >= 3).await;
    for a in &arrivals {
        let body = String::from_utf8_lossy(&a.body).into_owned();
        let verdicts: Vec<&str> = a
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("hookflow-verification"))
            .map(|(_, v)| v.as_str())
            .collect();
        assert!(a.header("webhook-id").is_some(), "{body}");
        if body.contains("\"valid\"") {
            assert!(verdicts.is_empty(), "{verdicts:?}");
            assert!(a.header("webhook-signature").is_some_and(|s| s.starts_with("v1,")), "{body}");
            assert!(a.header("webhook-timestamp").is_some(), "{body}");
        } else {
            let expected = if body.contains("invalid") { "invalid" } else { "missing" };
            assert_eq!(verdicts, [expected], "{body}: only the server's verdict");
            assert_eq!(a.header("webhook-signature"), None, "{body}: a failed capture is not vouched for");
            assert_eq!(a.header("webhook-timestamp"), None, "{body}");
        }
    }
}

/// Sends `n` captures to `webhook`, `together` at a time, then waits for the tarpit to hold 32 attempts.
async fn flood(app: &TestApp, webhook: &str, n: usize, together: usize, held: &std::sync::atomic::AtomicUsize) {
    use futures_util::StreamExt as _;
    futures_util::stream::iter(0..n)
        .map(|i| async move {
            assert_eq!(app.capture(Method::POST, webhook, format!("{{\"n\": {i}}}")).await.status, 200);
        })
        .buffer_unordered(together)
        .collect::<Vec<_>>()
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while held.load(std::sync::atomic::Ordering::SeqCst) < 32 {
        assert!(Instant::now() < deadline, "the tarpit's attempts began");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Another organization (allowed private targets: the test's receiver is on loopback) with an endpoint whose one
/// destination (`destination`, its URL added) is a receiver answering 200; returns the receiver and the endpoint.
async fn other_tenant(app: &TestApp, mut destination: Value) -> (Receiver, String) {
    let other = app.new_org("other").await;
    let created = app.call(Method::POST, "/webhooks", Some(&other), Some(json!({"name": "b"}))).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let webhook = created.body["id"].as_str().expect("id").to_owned();
    sqlx::query("UPDATE organizations SET private_network = true WHERE id = $1")
        .bind(other.org)
        .execute(&app.pool)
        .await
        .expect("private network");
    let receiver = Receiver::spawn(200).await;
    destination["url"] = json!(receiver.base);
    let path = format!("/webhooks/{webhook}/destinations");
    let made = app.call(Method::POST, &path, Some(&other), Some(destination)).await;
    assert_eq!(made.status, 201, "{}", made.text);
    (receiver, webhook)
}

/// A receiver that accepts connections and never answers; counts the connections it holds.
async fn tarpit() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let held = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counting = held.clone();
    tokio::spawn(async move {
        let mut streams = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            counting.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            streams.push(stream);
        }
    });
    (base, held)
}

#[tokio::test]
async fn a_tenant_whose_receivers_hold_every_attempt_does_not_starve_another_tenants_deliveries() {
    let app = TestApp::spawn().await;
    // Tenant A: a tarpit holding each attempt to its 60 s timeout, and more deliveries than the sender's slots.
    let (pit, held) = tarpit().await;
    let hostile = app.webhook_named("tarpit").await;
    destination(&app, &hostile, json!({"name": "pit", "url": format!("{pit}/in"), "timeout_ms": 60000})).await;
    flood(&app, &hostile, 200, 8, &held).await;
    // Tenant B, arriving behind A's backlog, is delivered at once.
    let (receiver, webhook_b) = other_tenant(&app, json!({"name": "b"})).await;
    let started = Instant::now();
    for i in 0..20 {
        assert_eq!(app.capture(Method::POST, &webhook_b, format!("{{\"b\": {i}}}")).await.status, 200);
    }
    receiver.wait_until(Duration::from_secs(15), |a| a.len() >= 20).await;
    eprintln!("tenant B's 20 deliveries arrived {:?} after its first capture", started.elapsed());
    let in_flight = held.load(std::sync::atomic::Ordering::SeqCst);
    assert!(in_flight <= 48, "tenant A holds {in_flight} attempts (its cap is 32, plus one claim's 16)");
}

#[tokio::test]
async fn a_flood_into_ten_hanging_destinations_takes_one_share_of_the_sender_and_never_stalls_the_claims() {
    let app = TestApp::spawn().await;
    // Tenant A: ten destinations holding every attempt to its timeout, and a flood of captures sent together, each
    // owing ten deliveries the server could send at once (handed to its sender with the capture).
    let (pit, held) = tarpit().await;
    let hostile = app.webhook_named("flood").await;
    for n in 0..10 {
        let body = json!({"name": format!("pit{n}"), "url": format!("{pit}/in/{n}"), "timeout_ms": 60000});
        destination(&app, &hostile, body).await;
    }
    flood(&app, &hostile, 300, 64, &held).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // What the sender holds of A (leased to it: sending or waiting their turn) is one organization's share.
    let leased: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deliveries d JOIN destinations t ON t.id = d.destination_id
         WHERE t.webhook_id = $1::uuid AND d.status = 'pending' AND d.leased_until > now()",
    )
    .bind(&hostile)
    .fetch_one(&app.pool)
    .await
    .expect("leased");
    assert!(leased <= 64, "tenant A's flood holds {leased} of the sender's rows (its share is 64)");
    // Tenant B's deliveries that only a claim sends (a `q` destination) go at once all the same.
    let (receiver, webhook_b) = other_tenant(&app, json!({"name": "b", "q": "method:POST"})).await;
    for i in 0..10 {
        assert_eq!(app.capture(Method::POST, &webhook_b, format!("{{\"b\": {i}}}")).await.status, 200);
    }
    receiver.wait_until(Duration::from_secs(15), |a| a.len() >= 10).await;
    let in_flight = held.load(std::sync::atomic::Ordering::SeqCst);
    assert!(in_flight <= 48, "tenant A holds {in_flight} attempts (its cap is 32, plus one claim's 16)");
}

#[tokio::test]
async fn a_disabled_destination_s_deliveries_leave_the_due_scan_and_come_back_when_it_is_enabled() {
    let app = TestApp::spawn().await;
    let webhook = app.webhook_named("paused").await;
    let receiver = Receiver::spawn(200).await;
    let made = destination(&app, &webhook, json!({"name": "r", "url": receiver.base})).await;
    let id = made["id"].as_str().expect("id").to_owned();
    let runner =
        destination(&app, &webhook, json!({"name": "in-vpc", "url": "http://10.0.0.9/in", "runner_labels": ["vpc"]}))
            .await;
    let at = format!("/webhooks/{webhook}/destinations/{id}");
    let off = app.admin(Method::PATCH, &at, Some(json!({"enabled": false}))).await;
    assert_eq!(off.status, 200, "{}", off.text);
    for i in 0..5 {
        assert_eq!(app.capture(Method::POST, &webhook, format!("{{\"n\": {i}}}")).await.status, 200);
    }
    let waiting: Vec<(bool, bool)> = sqlx::query_as(
        "SELECT next_attempt_at = 'infinity', by_runner FROM deliveries WHERE destination_id = $1::uuid
           AND status = 'pending'",
    )
    .bind(&id)
    .fetch_all(&app.pool)
    .await
    .expect("deliveries");
    assert_eq!(waiting, vec![(true, false); 5], "all wait out of the due scan");
    let runner_rows: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deliveries WHERE destination_id = $1::uuid AND by_runner AND next_attempt_at <> 'infinity'",
    )
    .bind(runner["id"].as_str().expect("id"))
    .fetch_one(&app.pool)
    .await
    .expect("runner rows");
    assert_eq!(runner_rows, 5, "a runner destination's rows are marked for runners");
    let listed = app.admin(Method::GET, &format!("{at}/deliveries?status=pending"), None).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let items = listed.body["items"].as_array().expect("items");
    assert_eq!(items.len(), 5);
    assert!(items.iter().all(|d| d["next_attempt_at"].is_null()), "{}", listed.text);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(receiver.count(), 0, "nothing sent while disabled");

    let on = app.admin(Method::PATCH, &at, Some(json!({"enabled": true}))).await;
    assert_eq!(on.status, 200, "{}", on.text);
    receiver.wait_until(Duration::from_secs(15), |a| a.len() >= 5).await;
}

#[tokio::test]
async fn a_runner_result_needs_the_lease_its_delivery_was_handed_out_with() {
    let app = TestApp::spawn().await;
    let webhook = app.webhook_named("leased").await;
    let made =
        destination(&app, &webhook, json!({"name": "in-vpc", "url": "http://10.0.0.9/in", "runner_labels": ["vpc"]}))
            .await;
    let id = made["id"].as_str().expect("id").to_owned();
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &["vpc"]).await;
    let other_runner = app.register_runner(&creds, &["vpc"]).await;
    assert_eq!(app.capture(Method::POST, &webhook, "{}").await.status, 200);
    let polled = app
        .call(Method::POST, "/runner/deliveries/next", Some(&creds), Some(json!({"runner_id": runner, "wait_s": 10})))
        .await;
    assert_eq!(polled.status, 200, "{}", polled.text);
    let delivery = &polled.body["deliveries"][0];
    let delivery_id = delivery["delivery_id"].as_str().expect("delivery_id");
    let lease = delivery["lease"].as_str().expect("lease").to_owned();
    let result = format!("/runner/deliveries/{delivery_id}/result");
    let report =
        |runner: &str, lease: &str| json!({"runner_id": runner, "lease": lease, "status_code": 200, "duration_ms": 5});
    // Another runner of the organization, or a forged lease: refused.
    let forged = uuid::Uuid::new_v4().to_string();
    for (who, lease) in [(&other_runner, forged.as_str()), (&runner, forged.as_str())] {
        let refused = app.call(Method::POST, &result, Some(&creds), Some(report(who, lease))).await;
        assert_eq!(refused.status, 404, "{}", refused.text);
    }
    let missing = app
        .call(
            Method::POST,
            &result,
            Some(&creds),
            Some(json!({"runner_id": runner, "status_code": 200, "duration_ms": 5})),
        )
        .await;
    assert_eq!(missing.status, 400, "{}", missing.text);
    let pending: String = sqlx::query_scalar("SELECT status FROM deliveries WHERE destination_id = $1::uuid")
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .expect("status");
    assert_eq!(pending, "pending", "no forged result recorded");
    let taken = app.call(Method::POST, &result, Some(&creds), Some(report(&runner, &lease))).await;
    assert_eq!(taken.status, 204, "{}", taken.text);
    let delivered: String = sqlx::query_scalar("SELECT status FROM deliveries WHERE destination_id = $1::uuid")
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .expect("status");
    assert_eq!(delivered, "delivered");
    let again = app.call(Method::POST, &result, Some(&creds), Some(report(&runner, &lease))).await;
    assert_eq!(again.status, 404, "a lease serves one result");
}
