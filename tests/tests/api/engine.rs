//! The flow engine on its own against a real HTTP target: retries, node and flow timeouts, skip-after-failure and
//! `continue_on_failure`, disabled nodes, undefined names, cancellation; and fairness of a runner serving every
//! organization.

use hookflow_runner::engine::{Engine, Outcome};
use hookflow_shared::OrgId;
use hookflow_shared::api::executions::{NodeResult, NodeStatus};
use hookflow_shared::api::runners::{FinalStatus, Job};
use hookflow_shared::wire::{header, runner_route};
use hookflow_tests::TestApp;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

async fn run(definition: Value, timeout_s: u64, cancel: &CancellationToken) -> (Outcome, Vec<NodeResult>) {
    let (sink, mut results) = tokio::sync::mpsc::unbounded_channel();
    let outcome = Engine::new().run(&Job::standalone("engine", definition, timeout_s), &sink, cancel).await;
    drop(sink);
    let mut all = Vec::new();
    while let Some(result) = results.recv().await {
        all.push(result);
    }
    (outcome, all)
}

fn status_check(id: &str, url: String) -> Value {
    json!({"id": id, "kind": "request", "request": {"method": "GET", "url": url},
        "extractors": [{"name": "code", "kind": "statusCode"}],
        "assertions": [{"source": "code", "operator": "equals", "expected": 200}]})
}

#[tokio::test]
async fn failed_nodes_are_retried_then_stop_the_flow_unless_told_to_continue() {
    let target = Target::spawn().await;
    let mut failing = status_check("flaky", format!("{}/status/500", target.base));
    failing["retry"] = json!({"count": 2, "interval_ms": 10});
    let after = status_check("after", format!("{}/status/200", target.base));
    let (outcome, results) =
        run(json!({"nodes": [failing.clone(), after.clone()]}), 30, &CancellationToken::new()).await;
    assert_eq!(outcome.status, FinalStatus::Failed);
    assert!(outcome.error.as_deref().unwrap_or("").contains("flaky"), "{outcome:?}");
    assert_eq!(target.hits(), 3, "one try and two retries");
    assert_eq!((results[0].status, results[0].retries), (NodeStatus::Failed, 2));
    assert_eq!(results[0].assertions[0].actual, Some(json!(500)));
    assert_eq!(results[1].status, NodeStatus::Skipped, "the rest is skipped after a failure");

    failing["continue_on_failure"] = json!(true);
    let (outcome, results) = run(json!({"nodes": [failing, after]}), 30, &CancellationToken::new()).await;
    assert_eq!(outcome.status, FinalStatus::Failed, "a failed node still fails the run");
    assert_eq!(results[1].status, NodeStatus::Passed, "continue_on_failure lets the next node run");
}

#[tokio::test]
async fn node_and_flow_timeouts_end_what_runs_too_long() {
    let target = Target::spawn().await;
    let mut slow = status_check("slow", format!("{}/slow?ms=3000", target.base));
    slow["timeout_ms"] = json!(200);
    let (outcome, results) = run(json!({"nodes": [slow]}), 30, &CancellationToken::new()).await;
    assert_eq!(outcome.status, FinalStatus::Failed);
    assert_eq!(results[0].status, NodeStatus::Error);
    assert_eq!(results[0].error.as_deref(), Some("no response within 200 ms"));

    let long = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 60000}]});
    let started = std::time::Instant::now();
    let (outcome, _) = run(long, 1, &CancellationToken::new()).await;
    assert_eq!(outcome.status, FinalStatus::Failed);
    assert!(outcome.error.as_deref().unwrap_or("").contains("timeout of 1 s"), "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn disabled_nodes_undefined_names_and_cancellation() {
    let target = Target::spawn().await;
    let definition = json!({"nodes": [
        {"id": "off", "kind": "request", "enabled": false, "request": {"method": "GET", "url": format!("{}/orders", target.base)}},
        {"id": "undefined", "kind": "request", "request": {"method": "GET", "url": "{{nowhere}}/orders"}}
    ]});
    let (outcome, results) = run(definition, 30, &CancellationToken::new()).await;
    assert_eq!(results[0].status, NodeStatus::Skipped);
    assert_eq!(results[0].error.as_deref(), Some("disabled"));
    assert_eq!(results[1].status, NodeStatus::Error);
    assert!(results[1].error.as_deref().unwrap_or("").contains("`{{nowhere}}` is not defined"), "{:?}", results[1]);
    assert_eq!(outcome.status, FinalStatus::Failed);
    assert_eq!(target.hits(), 0);

    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop.cancel();
    });
    let started = std::time::Instant::now();
    let (outcome, results) =
        run(json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 60000}]}), 120, &cancel).await;
    assert_eq!(outcome.status, FinalStatus::Cancelled);
    assert!(results.is_empty(), "an interrupted node reports nothing");
    assert!(started.elapsed() < Duration::from_secs(10), "the delay is cancellable");
}

#[tokio::test]
async fn a_runner_serving_every_organization_takes_turns_between_them() {
    let key = hookflow_control_plane::server::embedded_runner::new_key();
    let hash = key.hash.clone();
    let app = TestApp::spawn_with(|settings| settings.embedded_runner_key_hash = Some(hash)).await;
    let busy = app.admin.clone();
    let quiet = app.new_org("Quiet").await;
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let create = |creds: hookflow_tests::Creds, name: &'static str| {
        let body = json!({"name": name, "definition": definition.clone()});
        let app = &app;
        async move {
            let reply = app.call(Method::POST, "/flows", Some(&creds), Some(body)).await;
            reply.body["id"].as_str().expect("flow").to_owned()
        }
    };
    let busy_flow = create(busy.clone(), "busy").await;
    let quiet_flow = create(quiet.clone(), "quiet").await;
    for _ in 0..4 {
        app.call(Method::POST, &format!("/flows/{busy_flow}/launch"), Some(&busy), None).await;
    }
    app.call(Method::POST, &format!("/flows/{quiet_flow}/launch"), Some(&quiet), None).await;
    let shared = hookflow_tests::Creds { key: key.secret().to_owned(), org: OrgId::nil() };
    let register = json!({"name": "shared", "version": "1", "max_concurrency": 1,
        "host": {"hostname": "h", "os": "linux", "arch": "x86_64", "cpus": 1, "memory_bytes": 1}});
    let response = app
        .client
        .post(app.url(runner_route::RUNNERS))
        .header(header::API_KEY, &shared.key)
        .json(&register)
        .send()
        .await
        .expect("register");
    assert_eq!(response.status(), 201, "the embedded key needs no organization header");
    let runner: Value = response.json().await.expect("json");
    let mut flows = Vec::new();
    for _ in 0..3 {
        let job: Value = app
            .client
            .post(app.url(runner_route::NEXT_JOB))
            .header(header::API_KEY, &shared.key)
            .json(&json!({"runner_id": runner["id"], "wait_s": 2}))
            .send()
            .await
            .expect("claim")
            .json()
            .await
            .expect("job");
        flows.push(job["flow"]["id"].as_str().expect("flow").to_owned());
    }
    assert!(flows[..2].contains(&quiet_flow), "the quiet organization is served within the first two: {flows:?}");
}
