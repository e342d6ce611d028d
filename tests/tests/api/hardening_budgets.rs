//! Budgets an attacker review found missing, each attack sent over the real server: a capture rule's JSONPath that
//! would list billions of matches for a stranger's deep body is refused when written (one descendant segment
//! still answers that body at once); a tried node whose template names a large value a million times is refused
//! before the text is built; a batch whose launch variables are copied into every row is measured with them, and
//! refused past the batch budget.

use hookflow_shared::api::flows::TryNode;
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// About 800 KB of JSON a hundred arrays deep around 400,000 numbers: within a capture's default body limit and the
/// parser's nesting limit.
fn deep_body() -> String {
    format!("{}{}0{}", "[".repeat(100), "0,".repeat(400_000), "]".repeat(100))
}

#[tokio::test]
async fn a_rule_json_path_that_could_list_billions_of_matches_is_refused_and_one_descendant_answers_at_once() {
    let app = TestApp::spawn().await;
    let explosive = json!([{"name": "echo", "status": 200, "body": "{{request.body.$..*..*..*..*}}"}]);
    let reply = app.admin(Method::POST, "/webhooks", Some(json!({"name": "boom", "rules": explosive}))).await;
    reply.assert_refused(400, "invalid_request", "descendant segments");
    let made = app.create_webhook(json!({"name": "deep"})).await;
    let id = made["id"].as_str().expect("id").to_owned();
    let reply = app.admin(Method::PATCH, &format!("/webhooks/{id}"), Some(json!({"rules": explosive}))).await;
    reply.assert_refused(400, "invalid_request", "descendant segments");
    for (path, named) in [
        ("$[*,*,*][*,*,*]", "multiply matches by 9"),
        // Each node's filter would walk the whole body again: quadratic in it.
        ("$[?count($[*]) > 0]", "queries the root"),
        // A pattern compiled again for every node of the body.
        ("$..*[?search(@, 'a+')]", "`match()` and `search()`"),
    ] {
        let rules = json!([{"name": "w", "status": 200, "body": format!("{{{{request.body.{path}}}}}")}]);
        let reply = app.admin(Method::PATCH, &format!("/webhooks/{id}"), Some(json!({"rules": rules}))).await;
        reply.assert_refused(400, "invalid_request", named);
    }

    // One descendant segment grows with the body only: the deep body is answered with its first match.
    let linear = json!([{"name": "first", "status": 200, "body": "first={{request.body.$..*}}"}]);
    app.admin(Method::PATCH, &format!("/webhooks/{id}"), Some(json!({"rules": linear}))).await;
    let started = Instant::now();
    let answered = app.capture(Method::POST, &id, deep_body()).await;
    assert_eq!(answered.status, 200, "{}", answered.text);
    assert!(answered.text.starts_with("first=[[["), "{}", &answered.text[..answered.text.len().min(80)]);
    assert!(started.elapsed() < Duration::from_secs(30), "answered in {:?}", started.elapsed());
    let healthy = app.call(Method::GET, "/healthz", None, None).await;
    assert_eq!(healthy.status, 200);
}

#[tokio::test]
async fn a_tried_template_rendering_past_16_mib_is_refused_before_it_is_built() {
    let app = TestApp::spawn().await;
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let flow = app.create_flow("tried", definition).await;
    // 1 MiB named 100,000 times: 100 GiB if it were built.
    let node = json!({"id": "n", "kind": "request",
        "request": {"method": "POST", "url": "http://127.0.0.1:9/", "body": "{{x}}".repeat(100_000)}});
    let body = TryNode { node, environment: None, variables: [("x".to_owned(), "a".repeat(1 << 20))].into() };
    let started = Instant::now();
    let reply =
        app.admin(Method::POST, &format!("/flows/{flow}/try"), Some(serde_json::to_value(&body).expect("json"))).await;
    assert_eq!(reply.status, 200, "{}", &reply.text[..reply.text.len().min(300)]);
    assert_eq!(reply.body["status"], "error", "{}", &reply.text[..reply.text.len().min(300)]);
    let error = reply.body["error"].as_str().unwrap_or_default();
    assert!(error.contains("renders past 16 MiB"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(30), "refused in {:?}", started.elapsed());
    assert!(reply.text.len() < 64 * 1024, "the answer carries no rendered text: {} bytes", reply.text.len());
}

#[tokio::test]
async fn a_batch_is_measured_with_the_launch_variables_each_row_copies() {
    let app = TestApp::spawn().await;
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let flow = app.create_flow("batched", definition).await;
    // 7 MiB of launch variables copied into 10,000 rows: about 140 GB of rows, if they were written.
    let rows: Vec<Value> = (0..10_000).map(|_| json!({})).collect();
    let launch = json!({"variables": {"v": "x".repeat(7 << 20)}, "rows": rows});
    let started = Instant::now();
    let reply = app.admin(Method::POST, &format!("/flows/{flow}/launch"), Some(launch)).await;
    reply.assert_refused(400, "invalid_request", "launch variables");
    assert!(started.elapsed() < Duration::from_secs(30), "refused in {:?}", started.elapsed());
    assert_eq!(app.rows("executions").await, 0, "no row was written");
    // The same variables for a handful of rows are fine.
    let rows: Vec<Value> = (0..3).map(|_| json!({})).collect();
    let reply = app
        .admin(Method::POST, &format!("/flows/{flow}/launch"), Some(json!({"variables": {"v": "small"}, "rows": rows})))
        .await;
    assert!(reply.status.is_success(), "{}", reply.text);
}
