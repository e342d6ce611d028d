//! Issue #47, findings 3 and 8, over the real server: a trigger whose match runs past its timeout is refused
//! (`timeout`) without holding up another organization's launches; organizations take turns; the per-minute limit
//! comes before matching; `capture.body` is cut at 64 KiB; an execution's capture URL stores exactly 1,000.

use futures_util::StreamExt as _;
use hookflow_shared::api::flows::WriteFlow;
use hookflow_tests::{Creds, TestApp};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A filter PostgreSQL takes seconds to evaluate over a JSON array of a few thousand numbers (every element is
/// compared with every element), and that never matches.
const POISON_PATH: &str = r#"$[*] ? ($[*] == "nope")"#;

/// A body the poison filter takes far longer than 2 s over (6,000 numbers, about 30 KiB).
fn poison_body() -> String {
    serde_json::to_string(&(0..6000).collect::<Vec<u32>>()).expect("json")
}

/// A flow of `creds`' organization (a short delay: no runner runs it here); its id.
async fn flow_of(app: &TestApp, creds: &Creds, name: &str) -> String {
    let flow =
        WriteFlow::new(name.parse().expect("a name"), json!({"nodes": [{"id": "w", "kind": "delay", "delay_ms": 1}]}));
    app.api_as(creds).flows().create(&flow).await.expect("a flow").id.to_string()
}

/// An endpoint of `creds`' organization with `triggers`; its id.
async fn endpoint_of(app: &TestApp, creds: &Creds, name: &str, triggers: Value) -> String {
    let made =
        app.call(Method::POST, "/webhooks", Some(creds), Some(json!({"name": name, "triggers": triggers}))).await;
    assert_eq!(made.status, 201, "{}", made.text);
    made.body["id"].as_str().expect("id").to_owned()
}

/// Sends `n` captures of `body` to endpoint `id`, `at_once` at a time; every one is answered 200.
async fn flood(app: &TestApp, id: &str, n: usize, at_once: usize, body: &str) {
    let url = app.capture_url(id, "");
    let statuses: Vec<u16> = futures_util::stream::iter(0..n)
        .map(|_| {
            let request = app.client.post(&url).body(body.to_owned());
            async move { request.send().await.map(|r| r.status().as_u16()).unwrap_or(0) }
        })
        .buffer_unordered(at_once)
        .collect()
        .await;
    assert!(
        statuses.iter().all(|s| *s == 200),
        "{:?}",
        statuses.iter().filter(|s| **s != 200).take(5).collect::<Vec<_>>()
    );
}

/// Sends one capture to endpoint `id`; its request id.
async fn capture_one(app: &TestApp, id: &str, body: &str) -> String {
    let sent = app.capture_with(Method::POST, id, &[("Content-Type", "application/json")], body.to_owned()).await;
    assert_eq!(sent.status, 200, "{}", sent.text);
    sent.body["request_id"].as_str().expect("request id").to_owned()
}

/// How many executions capture `request_id` launched.
async fn launched_by(app: &TestApp, request_id: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM executions WHERE trigger_request_id = $1::uuid")
        .bind(request_id)
        .fetch_one(&app.pool)
        .await
        .expect("count")
}

/// Waits (at most `within`) until capture `request_id` launched its flow; how long that took.
async fn until_launched(app: &TestApp, request_id: &str, within: Duration) -> Duration {
    let started = Instant::now();
    while launched_by(app, request_id).await == 0 {
        assert!(started.elapsed() < within, "capture {request_id} launched nothing within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// The launches organization `org` still owes.
async fn owed_by(app: &TestApp, org: &Creds) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM trigger_launches WHERE organization_id = $1::uuid")
        .bind(org.org.to_string())
        .fetch_one(&app.pool)
        .await
        .expect("count")
}

/// The `trigger.refused` entries of `creds`' organization for endpoint `id`: their reasons, newest first.
async fn refusals(app: &TestApp, creds: &Creds, id: &str) -> Vec<Value> {
    let log = app.call(Method::GET, "/audit-log?limit=100", Some(creds), None).await;
    assert_eq!(log.status, 200, "{}", log.text);
    let items = log.body["items"].as_array().expect("items");
    items
        .iter()
        .filter(|e| e["action"] == "trigger.refused" && e["target"] == id)
        .map(|e| e["details"].clone())
        .collect()
}

#[tokio::test]
async fn a_poison_match_is_refused_on_its_timeout_and_never_holds_up_another_organization() {
    let app = TestApp::spawn().await;
    let (mallory, alice) = (app.admin.clone(), app.new_org("Alice").await);
    let theirs = flow_of(&app, &mallory, "poisoned").await;
    let poison = json!([{"flow_id": theirs, "filter": {"body_json": [{"path": POISON_PATH, "op": "exists"}]}}]);
    let poisoned = endpoint_of(&app, &mallory, "poisoned", poison).await;
    let noisy = endpoint_of(&app, &mallory, "noisy", json!([{"flow_id": theirs, "q": "method:POST"}])).await;
    let flow = flow_of(&app, &alice, "orders").await;
    let orders = endpoint_of(&app, &alice, "orders", json!([{"flow_id": flow, "q": "method:POST"}])).await;

    // Poison first (oldest), then a flood of matching captures, then another organization's capture.
    let body = poison_body();
    let first_poison = capture_one(&app, &poisoned, &body).await;
    for _ in 0..4 {
        capture_one(&app, &poisoned, &body).await;
    }
    flood(&app, &noisy, 300, 16, "{}").await;
    let hers = capture_one(&app, &orders, r#"{"id": 1}"#).await;
    let waited = until_launched(&app, &hers, Duration::from_secs(30)).await;
    assert!(waited < Duration::from_secs(5), "another organization's launch waited {waited:?}");

    // Each poison row is refused when its match times out; the rest of the organization's launches are made.
    app.triggers_settled(Duration::from_secs(60)).await;
    // One entry a minute per endpoint and reason (two if the refusals straddle a minute), the oldest row's first.
    let refused = refusals(&app, &mallory, &poisoned).await;
    assert!(matches!(refused.len(), 1 | 2), "{refused:?}");
    assert!(refused.iter().all(|r| r["reason"] == "timeout" && r["flow_id"] == theirs.as_str()), "{refused:?}");
    assert_eq!(refused.last().expect("an entry")["request_id"], first_poison.as_str(), "{refused:?}");
    let executions: i64 = sqlx::query_scalar("SELECT count(*) FROM executions WHERE flow_id = $1::uuid")
        .bind(&theirs)
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(executions, 300, "every matching capture launched, no poison one did");
}

#[tokio::test]
async fn one_organizations_backlog_does_not_delay_anothers_launch() {
    let app = TestApp::spawn_with(|s| s.triggers.launches_per_minute = 1_000_000).await;
    let (busy, quiet) = (app.admin.clone(), app.new_org("Quiet").await);
    let theirs = flow_of(&app, &busy, "busy").await;
    // Ten triggers: each capture owes ten launches, so the backlog outgrows what one dispatcher launches.
    let ten: Vec<Value> = (0..10).map(|_| json!({"flow_id": theirs})).collect();
    let backlog = endpoint_of(&app, &busy, "backlog", json!(ten)).await;
    let flow = flow_of(&app, &quiet, "quiet").await;
    let hers = endpoint_of(&app, &quiet, "quiet", json!([{"flow_id": flow}])).await;

    flood(&app, &backlog, 1000, 32, "{}").await;
    let request = capture_one(&app, &hers, "{}").await;
    let waited = until_launched(&app, &request, Duration::from_secs(60)).await;
    let still_owed = owed_by(&app, &busy).await;
    assert!(waited < Duration::from_secs(3), "the quiet organization waited {waited:?} behind the busy one");
    assert!(still_owed >= 1000, "the quiet organization's launch came before the busy backlog ({still_owed} left)");
}

#[tokio::test]
async fn the_per_minute_limit_is_checked_before_matching() {
    use chrono::Timelike as _;
    let app = TestApp::spawn_with(|s| s.triggers.launches_per_minute = 1).await;
    let creds = app.admin.clone();
    let flow = flow_of(&app, &creds, "limited").await;
    let open = endpoint_of(&app, &creds, "open", json!([{"flow_id": flow}])).await;
    let poison = json!([{"flow_id": flow, "filter": {"body_json": [{"path": POISON_PATH, "op": "exists"}]}}]);
    let poisoned = endpoint_of(&app, &creds, "poisoned", poison).await;
    // Both captures are decided within one minute (the limit's count starts again with the next).
    let second = chrono::Utc::now().second();
    if second >= 45 {
        tokio::time::sleep(Duration::from_secs(u64::from(61 - second))).await;
    }
    let first = capture_one(&app, &open, "{}").await;
    until_launched(&app, &first, Duration::from_secs(10)).await;

    // The organization made its launch of the minute: the poison capture is refused before its filter runs.
    let started = Instant::now();
    let late = capture_one(&app, &poisoned, &poison_body()).await;
    app.triggers_settled(Duration::from_secs(30)).await;
    let refused = refusals(&app, &creds, &poisoned).await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        (refused[0]["reason"].as_str(), refused[0]["request_id"].as_str()),
        (Some("limit"), Some(late.as_str()))
    );
    assert!(started.elapsed() < Duration::from_secs(2), "no match was run: {:?}", started.elapsed());
}

#[tokio::test]
async fn a_large_capture_launches_with_its_body_cut_to_64_kib() {
    let app = TestApp::spawn().await;
    let creds = app.admin.clone();
    let flow = flow_of(&app, &creds, "big").await;
    let big = endpoint_of(&app, &creds, "big", json!([{"flow_id": flow, "extract": {"tail": "$.tail"}}])).await;
    let filler = "x".repeat(1024 * 1024 - 64);
    let body = json!({"filler": filler, "tail": "end"}).to_string();
    assert!(body.len() <= 1024 * 1024 && body.len() > 1024 * 1024 - 100);
    let request = capture_one(&app, &big, &body).await;
    until_launched(&app, &request, Duration::from_secs(20)).await;
    let variables: Value = sqlx::query_scalar("SELECT variables FROM executions WHERE trigger_request_id = $1::uuid")
        .bind(&request)
        .fetch_one(&app.pool)
        .await
        .expect("variables");
    let kept = variables["capture.body"].as_str().expect("capture.body");
    assert!(kept.len() <= 64 * 1024 && kept.len() > 60 * 1024, "{} bytes kept", kept.len());
    assert!(body.starts_with(kept));
    assert_eq!(variables["capture.body_truncated"], "true");
    assert_eq!(variables["tail"], "end", "extracted names still read the whole body");
}

#[tokio::test]
async fn an_execution_url_stores_exactly_1000_captures_however_they_arrive() {
    let app = TestApp::spawn().await;
    let flow = app.delay_flow("waits").await;
    // No runner: the execution stays queued, and its capture URL takes captures.
    let id = app.launch_draft(&flow).await;
    let url = hookflow_tests::exec::execution_capture_url(&app, &id);
    let answered: Vec<u16> = futures_util::stream::iter(0..1500)
        .map(|n| {
            let request = app.client.post(&url).body(format!("{{\"n\": {n}}}"));
            async move { request.send().await.map(|r| r.status().as_u16()).unwrap_or(0) }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM captures WHERE execution_id = $1::uuid")
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(stored, 1000, "answers: {} of 200", answered.iter().filter(|s| **s == 200).count());
    assert_eq!(answered.iter().filter(|s| **s == 200).count(), 1000, "exactly the stored ones are accepted");
}
