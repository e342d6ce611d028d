//! Real `hookflow-runner` processes against the real server and a real HTTP target: a flow with extractors and
//! assertions, secret masking everywhere it could leak, a SIGKILLed runner's job finished by another as attempt
//! 2, graceful SIGTERM, label routing, cancellation, and the embedded runner.

use crate::RUNNER;
use hookflow_shared::api::flows::Publish;
use hookflow_shared::api::resources::PutSecret;
use hookflow_tests::TestApp;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::sse::Sse;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const SECRET: &str = "s3cr3t-P@ss/word";

fn checkout(target: &str, module: &str) -> Value {
    json!({"variables": {"base_url": target}, "timeout_s": 60, "nodes": [
        {"id": "login", "kind": "request", "name": "Log in",
         "request": {"method": "POST", "url": "{{base_url}}/login", "headers": {"content-type": "application/json"},
                     "body": "{\"user\": \"{{user}}\", \"password\": \"{{secret.API_PASSWORD}}\"}"},
         "extractors": [{"name": "token", "kind": "jsonPath", "expression": "$.token"},
                        {"name": "status", "kind": "statusCode"}],
         "assertions": [{"source": "status", "operator": "equals", "expected": 200},
                        {"source": "token", "operator": "startsWith", "expected": "tok-"}]},
        {"id": "orders", "kind": "request",
         "request": {"method": "GET", "url": "{{base_url}}/orders", "headers": {"authorization": "Bearer {{token}}"}},
         "extractors": [{"name": "count", "kind": "jsonPath", "expression": "$.count"},
                        {"name": "total", "kind": "header", "header": "X-Total"}],
         "assertions": [{"source": "count", "operator": "equals", "expected": 2},
                        {"source": "total", "operator": "equals", "expected": 2}]},
        {"id": "pause", "kind": "delay", "delay_ms": 20},
        {"id": "set", "kind": "set_variables", "variables": {"summary": "{{count}} orders for {{user}}"}},
        {"id": "sub", "kind": "module", "flow_id": module, "version": "latest", "inputs": {"who": "{{summary}}"}},
        {"id": "never", "kind": "request", "condition": {"source": "count", "operator": "equals", "expected": 3},
         "request": {"method": "GET", "url": "{{base_url}}/status/500"}}
    ]})
}

fn echo_module(target: &str) -> Value {
    json!({"nodes": [{"id": "echo", "kind": "request",
        "request": {"method": "POST", "url": format!("{target}/echo"), "body": "{{who}}"},
        "extractors": [{"name": "said", "kind": "jsonPath", "expression": "$.body"}],
        "assertions": [{"source": "said", "operator": "contains", "expected": "orders"}]}]})
}

async fn published_module(app: &TestApp, target: &Target) -> String {
    let module = app.create_flow("echo module", echo_module(&target.base)).await;
    app.api().flows().publish(&module, &Publish::default()).await.expect("publish");
    module
}

async fn put_secret(app: &TestApp, name: &str, value: &str) {
    let secret = PutSecret { value: value.parse().expect("a value"), allowed_hosts: vec![], runners_only: false };
    app.api().secrets().put(name, &secret).await.expect("put the secret");
}

/// An execution's node results, as JSON.
async fn nodes(app: &TestApp, flow: &str, execution: &str) -> Value {
    serde_json::to_value(app.api().executions().nodes(flow, execution).await.expect("nodes")).expect("json")
}

#[tokio::test]
async fn a_runner_process_runs_a_flow_with_extractors_assertions_and_modules() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    put_secret(&app, "API_PASSWORD", SECRET).await;
    let module = published_module(&app, &target).await;
    let flow = app.create_flow("checkout", checkout(&target.base, &module)).await;
    let creds = app.runner_creds(app.admin.org).await;
    let mut runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &["linux"], &[]).await;
    let id = app.launch(&flow, json!({"variables": {"user": "ada"}})).await["id"].as_str().expect("id").to_owned();
    let mut sse = Sse::open(&app, &format!("/flows/{flow}/executions/{id}/stream"), None).await;
    let done = app.wait_finished(&flow, &id).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", runner.output());
    assert_eq!(done["summary"], json!({"nodes_total": 6, "passed": 5, "failed": 0, "skipped": 1}));

    let nodes = nodes(&app, &flow, &id).await;
    let items = nodes["items"].as_array().expect("items");
    let order: Vec<&str> = items.iter().map(|n| n["node_id"].as_str().unwrap_or("")).collect();
    assert_eq!(order, ["login", "orders", "pause", "set", "sub", "never"]);
    let login = &items[0];
    assert_eq!(login["status"], "passed");
    assert_eq!(login["extracted"], json!({"token": "tok-ada", "status": 200}));
    assert_eq!(login["request"]["method"], "POST");
    assert_eq!(login["request"]["url"], format!("{}/login", target.base));
    assert_eq!(login["response"]["status"], 200);
    assert_eq!(login["response"]["truncated"], false);
    assert!(login["response"]["timings_ms"]["total"].as_f64().is_some());
    assert_eq!(
        login["assertions"][1],
        json!({"source": "token", "operator": "startsWith", "expected": "tok-",
        "actual": "tok-ada", "passed": true, "reason": null})
    );
    assert_eq!(items[1]["extracted"], json!({"count": 2, "total": "2"}));
    assert_eq!(items[1]["request"]["headers"]["authorization"], "Bearer tok-ada", "no secret: shown as sent");
    assert_eq!(items[3]["extracted"], json!({"summary": "2 orders for ada"}));
    assert_eq!(items[4]["status"], "passed");
    assert_eq!(items[4]["extracted"]["sub.said"], "2 orders for ada", "module values come back prefixed");
    assert_eq!(items[5]["status"], "skipped", "condition not met");

    let events = sse.until_closed().await;
    let completed: Vec<&Value> = events.iter().map(|e| &e.data).filter(|d| d["type"] == "node.completed").collect();
    assert_eq!(completed.len(), 6);
    assert_eq!(completed[0]["extracted"]["token"], "tok-ada");
    assert_eq!(events.last().map(|e| e.data["type"].clone()), Some(json!("execution.completed")));
    assert_eq!(target.hits(), 3, "login, orders, the module's echo; the skipped node sent nothing");
    assert!(!runner.output().contains(SECRET), "the runner's log never holds the secret");
    // Heartbeats carry host metrics (one per second with these settings).
    let shown = app.wait_runner(|r| r["metrics"]["memory_used_bytes"].as_u64().is_some_and(|m| m > 0)).await;
    assert_eq!(shown["labels"], json!(["linux"]));
    assert_eq!(shown["status"], "online");
    assert!(shown["host"]["memory_bytes"].as_u64().is_some_and(|m| m > 0), "{shown}");
    assert!(shown["host"]["cpus"].as_u64().is_some_and(|n| n >= 1));
    let stopped = runner.terminate().await;
    assert!(stopped.success(), "SIGTERM on an idle runner exits cleanly: {stopped:?}");
}

#[tokio::test]
async fn secrets_never_reach_results_streams_or_logs() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    put_secret(&app, "API_PASSWORD", SECRET).await;
    put_secret(&app, "BASIC", "dXNlcjpwYXNz-basic").await;
    let definition = json!({"nodes": [
        {"id": "echo", "kind": "request",
         "request": {"method": "POST", "url": format!("{}/echo", target.base),
                     "query": {"key": "{{secret.API_PASSWORD}}"},
                     "headers": {"authorization": "Basic {{secret.BASIC}}", "x-plain": "{{secret.API_PASSWORD}}"},
                     "body": "{\"password\": \"{{secret.API_PASSWORD}}\"}"},
         "extractors": [{"name": "echoed", "kind": "jsonPath", "expression": "$.body"},
                        {"name": "whole", "kind": "body"}],
         "assertions": [{"source": "echoed", "operator": "equals", "expected": "nothing like it"}]}
    ]});
    let flow = app.create_flow("leaky", definition).await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[], &[]).await;
    let id = app.launch_draft(&flow).await;
    let done = app.wait_finished(&flow, &id).await;
    assert_eq!(done["status"], "failed", "the assertion fails: {done}");
    let nodes = app.admin(Method::GET, &format!("/flows/{flow}/executions/{id}/nodes"), None).await;
    let mut sse = Sse::open(&app, &format!("/flows/{flow}/executions/{id}/stream"), None).await;
    let streamed: Vec<String> = sse.until_closed().await.iter().map(|e| e.data.to_string()).collect();
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT result::text FROM node_results").fetch_all(&app.pool).await.expect("rows");
    let events: Vec<String> =
        sqlx::query_scalar("SELECT data FROM execution_events").fetch_all(&app.pool).await.expect("rows");
    let execution = app.execution(&flow, &id).await.to_string();
    use base64::Engine as _;
    let encodings = [
        SECRET.to_owned(),
        "s3cr3t-P%40ss%2Fword".to_owned(),
        base64::engine::general_purpose::STANDARD.encode(SECRET),
    ];
    for place in
        [nodes.text.clone(), streamed.join("\n"), stored.join("\n"), events.join("\n"), execution, runner.output()]
    {
        for form in &encodings {
            assert!(!place.contains(form.as_str()), "a form of the secret leaked into {place}");
        }
        assert!(!place.contains("dXNlcjpwYXNz-basic"));
    }
    let node = &nodes.body["items"][0];
    assert_eq!(node["request"]["headers"]["authorization"], "***");
    assert!(node["request"]["body"].as_str().expect("body").contains("***"));
    assert!(node["request"]["url"].as_str().expect("url").contains("key=***"));
    assert!(node["response"]["body"].as_str().expect("body").contains("***"), "the echo is masked too");
    // The echoed value holds the secret: the assertion may not look inside it (no equality oracle), so it fails.
    assert_eq!(node["assertions"][0]["passed"], false);
    assert_eq!(node["assertions"][0]["actual"], Value::Null);
    assert!(node["assertions"][0]["reason"].as_str().expect("reason").contains("holds a secret"));
}

#[tokio::test]
async fn a_killed_runners_job_is_finished_by_another_as_attempt_two() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let definition = json!({"nodes": [
        {"id": "slow", "kind": "request", "request": {"method": "GET", "url": format!("{}/slow?ms=3000", target.base)},
         "extractors": [{"name": "ok", "kind": "jsonPath", "expression": "$.ok"}],
         "assertions": [{"source": "ok", "operator": "equals", "expected": true}]}
    ]});
    let flow = app.create_flow("slow", definition).await;
    let creds = app.runner_creds(app.admin.org).await;
    let mut first = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[], &[]).await;
    let id = app.launch_draft(&flow).await;
    let running = app.wait_execution(&flow, &id, Duration::from_secs(20), |e| e["status"] == "running").await;
    let first_runner = running["runner_id"].clone();
    first.kill().await;
    let second = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[], &[]).await;
    let done = app.wait_finished(&flow, &id).await;
    assert_eq!(done["status"], "succeeded", "{done}\n{}", second.output());
    assert_eq!(done["attempt"], 2);
    assert_ne!(done["runner_id"], first_runner, "finished by the other runner");
    assert_eq!(nodes(&app, &flow, &id).await["items"][0]["attempt"], 2, "results of the latest attempt");
}

#[tokio::test]
async fn sigterm_lets_the_running_job_finish_before_exiting() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let definition = json!({"nodes": [
        {"id": "slow", "kind": "request", "request": {"method": "GET", "url": format!("{}/slow?ms=1500", target.base)}}
    ]});
    let flow = app.create_flow("drain", definition).await;
    let creds = app.runner_creds(app.admin.org).await;
    let mut runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[], &[]).await;
    let id = app.launch_draft(&flow).await;
    app.wait_execution(&flow, &id, Duration::from_secs(20), |e| e["status"] == "running").await;
    let status = runner.terminate().await;
    assert!(status.success(), "{status:?}\n{}", runner.output());
    let done = app.execution(&flow, &id).await;
    assert_eq!((done["status"].as_str(), done["attempt"].as_i64()), (Some("succeeded"), Some(1)), "{done}");
}

#[tokio::test]
async fn runner_processes_respect_labels_and_cancellation() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let definition = json!({"nodes": [
        {"id": "long", "kind": "delay", "delay_ms": 60000},
        {"id": "after", "kind": "request", "request": {"method": "GET", "url": format!("{}/orders", target.base)}}
    ]});
    let flow = app.create_flow("cancel me", definition).await;
    let creds = app.runner_creds(app.admin.org).await;
    let _plain = RunnerProcess::spawn(RUNNER, &app.base, &creds, &["linux"], &[]).await;
    let id = app.launch(&flow, json!({"runner_labels": ["gpu"]})).await["id"].as_str().expect("id").to_owned();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(app.execution(&flow, &id).await["status"], "queued", "no runner carries `gpu`");
    let gpu = RunnerProcess::spawn(RUNNER, &app.base, &creds, &["gpu", "linux"], &[]).await;
    let running = app.wait_execution(&flow, &id, Duration::from_secs(20), |e| e["status"] == "running").await;
    let runners = app.api().runners().list(&[]).await.expect("runners");
    let gpu_runner = runners.items.iter().find(|r| r.labels == ["gpu", "linux"]).expect("gpu runner");
    assert_eq!(running["runner_id"], json!(gpu_runner.id));
    app.api().executions().cancel(&flow, &id).await.expect("cancel");
    let done = app.wait_finished(&flow, &id).await;
    assert_eq!(done["status"], "cancelled", "{done}\n{}", gpu.output());
    assert_eq!(target.hits(), 0, "the node after the delay never ran");
}

#[tokio::test]
async fn the_embedded_runner_runs_flows_of_every_organization() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let target = Target::spawn().await;
    let definition = json!({"nodes": [{"id": "orders", "kind": "request",
        "request": {"method": "GET", "url": format!("{}/orders", target.base)},
        "extractors": [{"name": "count", "kind": "jsonPath", "expression": "$.count"}],
        "assertions": [{"source": "count", "operator": "equals", "expected": 2}]}]});
    let (mine, _) = app.run_as(&app.admin, definition.clone(), json!({})).await;
    assert_eq!(mine["status"], "succeeded", "{mine}");
    // Another organization, allowed by the operator to reach this machine, is served by the same runner.
    let other = app.new_org("Other").await;
    let mut conn = app.pool.acquire().await.expect("connection");
    hookflow_control_plane::api::admin::organization::set_private_network(&mut conn, other.org, true)
        .await
        .expect("allow");
    let (theirs, _) = app.run_as(&other, definition, json!({})).await;
    assert_eq!(theirs["status"], "succeeded", "{theirs}");
    // Each organization sees the runner that ran its flows, as its part of it; neither may remove it.
    for creds in [&app.admin, &other] {
        let listed = app.api_as(creds).runners().list(&[]).await.expect("runners");
        let [embedded] = listed.items.as_slice() else { panic!("the embedded runner alone: {listed:?}") };
        assert_eq!((embedded.name.as_str(), embedded.host.as_ref()), ("embedded", None), "{embedded:?}");
        assert_eq!(embedded.labels, ["embedded"]);
        let removed = app.api_as(creds).runners().delete(embedded.id).await.expect_err("not theirs to remove");
        assert_eq!((removed.status(), removed.code()), (409, "conflict"), "{removed}");
    }
}

/// Forwards connections from `listener` to `target` (host:port).
async fn forward(listener: tokio::net::TcpListener, target: String) {
    while let Ok((mut inbound, _)) = listener.accept().await {
        let target = target.clone();
        tokio::spawn(async move {
            if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[tokio::test]
async fn a_runner_started_before_its_server_keeps_retrying_then_works() {
    let app = TestApp::spawn_for_execution().await;
    let creds = app.runner_creds(app.admin.org).await;
    // A port with nothing behind it yet.
    let reserved = std::net::TcpListener::bind("127.0.0.1:0").expect("reserve a port");
    let address = reserved.local_addr().expect("address");
    drop(reserved);
    let runner = RunnerProcess::spawn(RUNNER, &format!("http://{address}"), &creds, &[], &[]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(runner.output().contains("retrying"), "{}", runner.output());
    let listener = tokio::net::TcpListener::bind(address).await.expect("bind the reserved port");
    tokio::spawn(forward(listener, app.base.trim_start_matches("http://").to_owned()));
    let flow = app.delay_flow("late").await;
    let id = app.launch_draft(&flow).await;
    let done = app.wait_finished(&flow, &id).await;
    assert_eq!(done["status"], "succeeded", "{}", runner.output());
}

/// Boolean variables take 1/0 (and true/false, yes/no): the refusal of plain http to another machine tells the
/// operator to set `SERVICE_INSECURE_HTTP=1`, and the runner accepts exactly that.
#[tokio::test]
async fn the_runner_takes_service_insecure_http_as_one_or_zero() {
    let app = TestApp::spawn_for_execution().await;
    let creds = app.runner_creds(app.admin.org).await;
    // 192.0.2.0/24 is documentation space: nothing is contacted, the URL is refused before.
    let env = [("SERVICE_INSECURE_HTTP", "0")];
    let mut refused = RunnerProcess::spawn_with_env(RUNNER, "http://192.0.2.1:9", &creds, &[], &[], &env).await;
    let status =
        tokio::time::timeout(Duration::from_secs(30), refused.child.wait()).await.expect("exits").expect("wait");
    assert!(!status.success(), "{}", refused.output());
    assert!(refused.output().contains("SERVICE_INSECURE_HTTP=1"), "{}", refused.output());

    let env = [("SERVICE_INSECURE_HTTP", "1")];
    let runner = RunnerProcess::spawn_with_env(RUNNER, &app.base, &creds, &[], &[], &env).await;
    let flow = app.delay_flow("insecure-http-one").await;
    let id = app.launch_draft(&flow).await;
    let done = app.wait_finished(&flow, &id).await;
    assert_eq!(done["status"], "succeeded", "{}", runner.output());
}
