//! Exactly one launch per matching capture, whoever takes it: two replicas on one database sharing 50 captures, and
//! a server process SIGKILLed between storing a capture and launching its flow, whose launch the next server makes.

use crate::SERVER;
use base64::Engine as _;
use futures_util::future::join_all;
use hookflow_tests::TestApp;
use hookflow_tests::server::ServerProcess;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_launch_each_of_fifty_captures_once() {
    let first = TestApp::spawn().await;
    let second = first.replica().await;
    let flow = first.delay_flow("each once").await;
    let hook = first.triggered_endpoint("shared", json!([{"flow_id": flow, "q": "method:POST"}])).await;
    let sends = (0..50).map(|n| {
        let (app, hook) = (if n % 2 == 0 { &first } else { &second }, hook.clone());
        async move { app.capture(Method::POST, &hook, format!("{{\"n\": {n}}}")).await }
    });
    let replies = join_all(sends).await;
    let captured: BTreeSet<String> = replies
        .iter()
        .map(|r| {
            assert_eq!(r.status, 200, "{}", r.text);
            r.body["request_id"].as_str().expect("request id").to_owned()
        })
        .collect();
    assert_eq!(captured.len(), 50);
    let executions = first.wait_executions(&flow, 50, Duration::from_secs(30)).await;
    first.triggers_settled(Duration::from_secs(10)).await;
    // A late duplicate would come within a sweep.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let executions = if executions.len() == 50 { first.executions_of(&flow).await } else { executions };
    assert_eq!(executions.len(), 50, "one launch per capture");
    let launched: BTreeSet<String> =
        executions.iter().map(|e| e["trigger_request"]["request_id"].as_str().expect("linked").to_owned()).collect();
    assert_eq!(launched, captured, "each capture launched its own");
    let linked: i64 =
        first.rows("captures c WHERE (SELECT count(*) FROM executions e WHERE e.trigger_request_id = c.id) = 1").await;
    assert_eq!(linked, 50);
}

/// A master key both processes share, as replicas of one deployment do.
fn master_key() -> String {
    let bytes = [*uuid::Uuid::new_v4().as_bytes(), *uuid::Uuid::new_v4().as_bytes()].concat();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

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

#[tokio::test]
async fn a_server_killed_between_capture_and_launch_leaves_the_launch_to_the_next() {
    let key = master_key();
    let capturing = ServerProcess::spawn(SERVER, &["--trigger-dispatch", "false", "--master-key", &key]).await;
    let flow =
        json!({"name": "after the crash", "definition": {"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]}});
    let flow = call(&capturing, Method::POST, "/flows", Some(flow)).await["id"].as_str().expect("id").to_owned();
    let hook = json!({"name": "crash", "triggers": [{"flow_id": flow}]});
    let hook = call(&capturing, Method::POST, "/webhooks", Some(hook)).await["id"].as_str().expect("id").to_owned();
    let sent = reqwest::Client::new().post(format!("{}/webhook/{hook}", capturing.base)).body("{}").send().await;
    assert_eq!(sent.expect("capture").status(), 200, "the capture is stored and answered");
    let pool = sqlx::PgPool::connect(&capturing.database_url).await.expect("the database");
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await.expect("count") }
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        (count("SELECT count(*) FROM trigger_launches").await, count("SELECT count(*) FROM executions").await),
        (1, 0)
    );

    let mut capturing = capturing;
    capturing.child.start_kill().expect("SIGKILL");
    capturing.child.wait().await.expect("killed");
    let next = ServerProcess::spawn_beside(SERVER, &capturing, &["--master-key", &key]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while count("SELECT count(*) FROM trigger_launches").await > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the owed launch was never made");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let executions = call(&next, Method::GET, &format!("/flows/{flow}/executions"), None).await;
    let items = executions["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "exactly once: {executions}");
    assert_eq!(items[0]["trigger"], "webhook");
    assert_eq!(items[0]["trigger_request"]["webhook_id"], hook.as_str());
    next.stop().await;
    capturing.stop().await;
}
