//! The real `hookflow` binary running flows against the real server: by id here (ephemeral) and by tag on a real
//! runner process (remote), JUnit and JSON reports read back by an XML parser, every exit code, a launch whose
//! answer was lost retried once under the same Idempotency-Key, --fail-fast and --timeout, and no secret or key
//! in anything it prints or writes.

use crate::RUNNER;
use hookflow_shared::api::resources::PutSecret;
use hookflow_tests::TestApp;
use hookflow_tests::cli::{Cli, CliOutput};
use hookflow_tests::exec::scoped;
use hookflow_tests::proxy::Proxy;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::scratch::Scratch;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};

const HOOKFLOW: &str = env!("CARGO_BIN_EXE_hookflow-under-test");
const SECRET: &str = "cli-s3cret/p@ss";

fn cli(base: &str) -> Cli {
    Cli { binary: HOOKFLOW, base: base.to_owned() }
}

/// Log in (the secret in the body and a header), then fetch orders.
fn passing(target: &str) -> Value {
    json!({"nodes": [
        {"id": "login", "kind": "request",
         "request": {"method": "POST", "url": format!("{target}/login"),
                     "headers": {"content-type": "application/json", "x-password": "{{secret.API_PASSWORD}}"},
                     "body": "{\"user\": \"ci\", \"password\": \"{{secret.API_PASSWORD}}\"}"},
         "extractors": [{"name": "token", "kind": "jsonPath", "expression": "$.token"}],
         "assertions": [{"source": "token", "operator": "equals", "expected": "tok-ci"}]},
        {"id": "orders", "kind": "request", "request": {"method": "GET", "url": format!("{target}/orders")},
         "extractors": [{"name": "count", "kind": "jsonPath", "expression": "$.count"}],
         "assertions": [{"source": "count", "operator": "equals", "expected": 2}]}
    ]})
}

/// A 500 where 200 is expected, then a node that is skipped.
fn failing(target: &str) -> Value {
    json!({"nodes": [
        {"id": "broken", "kind": "request", "request": {"method": "GET", "url": format!("{target}/status/500")},
         "extractors": [{"name": "status", "kind": "statusCode"}],
         "assertions": [{"source": "status", "operator": "equals", "expected": 200}]},
        {"id": "after", "kind": "delay", "delay_ms": 1}
    ]})
}

/// A server that runs flows, the target they call, and the secret their login step sends.
async fn with_secret() -> (TestApp, Target) {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let secret = PutSecret { value: SECRET.parse().expect("a value"), allowed_hosts: vec![], runners_only: false };
    app.api().secrets().put("API_PASSWORD", &secret).await.expect("put the secret");
    (app, target)
}

fn scratch() -> Scratch {
    Scratch::new("cli")
}

async fn executions(app: &TestApp, flow: &str) -> Vec<Value> {
    let list = app.api().executions().list(flow, &[]).await.expect("executions");
    list.items.iter().map(|e| serde_json::to_value(e).expect("json")).collect()
}

fn assert_quiet(output: &CliOutput, files: &[&str], key: &str) {
    for text in std::iter::once(output.all().as_str()).chain(files.iter().copied()) {
        assert!(!text.contains(SECRET), "the secret leaked: {text}");
        assert!(!text.contains(key), "the API key leaked: {text}");
    }
}

/// Evaluates an XPath expression over an XML document, as a string.
fn xpath(xml: &str, expression: &str) -> String {
    let package = sxd_document::parser::parse(xml).expect("the JUnit report is well-formed XML");
    let document = package.as_document();
    sxd_xpath::evaluate_xpath(&document, expression).expect("xpath").string()
}

#[tokio::test]
async fn run_by_id_executes_here_and_writes_junit_and_json() {
    let (app, target) = with_secret().await;
    let flow = app.create_flow("checkout", passing(&target.base)).await;
    // Ephemeral runs by id need nothing but flows:execute.
    let creds = scoped(&app, app.admin.org, &["flows:execute"]).await;
    let dir = scratch();
    let (junit, report) = (dir.join("out/junit.xml"), dir.join("report.json"));
    let output = cli(&app.base)
        .run(
            Some(&creds),
            &[
                "run",
                "--flow",
                &flow,
                "--report",
                &format!("junit={}", junit.display()),
                "--report",
                &format!("json={}", report.display()),
            ],
        )
        .await;
    assert_eq!(output.code, 0, "{}", output.all());
    assert!(output.stdout.contains("1 of 1 flows passed"), "{}", output.all());
    assert!(output.stderr.contains("PASS login"), "CI logs get a line per node: {}", output.all());

    let runs = executions(&app, &flow).await;
    assert_eq!(runs.len(), 1);
    let (execution, id) = (&runs[0], runs[0]["id"].as_str().expect("id"));
    assert_eq!((execution["status"].as_str(), execution["trigger"].as_str()), (Some("succeeded"), Some("cli")));
    let nodes = app.admin(Method::GET, &format!("/flows/{flow}/executions/{id}/nodes"), None).await;
    assert_eq!(nodes.body["items"].as_array().expect("nodes").len(), 2, "results were reported to the server");

    let junit = std::fs::read_to_string(&junit).expect("junit report");
    assert_eq!(xpath(&junit, "/testsuites/@tests"), "2");
    assert_eq!(xpath(&junit, "/testsuites/@failures"), "0");
    assert_eq!(xpath(&junit, "/testsuites/testsuite/@name"), "checkout");
    assert_eq!(xpath(&junit, "//testcase[1]/@name"), "login");
    assert_eq!(xpath(&junit, "//testcase[2]/@name"), "orders");
    assert_eq!(xpath(&junit, "//property[@name='execution_id']/@value"), id);
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("json report")).expect("json");
    assert_eq!(json["passed"], true);
    assert_eq!(json["flows"][0]["execution_id"], id);
    assert_eq!(json["flows"][0]["nodes"].as_array().expect("nodes").len(), 2);
    let sent = json["flows"][0]["nodes"][0]["request"]["headers"]["x-password"].as_str().expect("masked header");
    assert_eq!(sent, "***");
    assert_quiet(&output, &[&junit, &json.to_string()], &creds.key);
}

/// A fast flow's results go to the server in a few large reports, not one per node: at most one report per
/// interval of the runner's reporter (25 ms) unless a report is full (100 results). Each report but one announces
/// the node after its last result with a `node.started` event, so those events count the reports.
#[tokio::test]
async fn a_fast_flows_results_are_reported_in_few_batches_and_all_arrive() {
    const NODES: usize = 300;
    let (app, target) = (TestApp::spawn_for_execution().await, Target::spawn().await);
    let node = |i: usize| {
        json!({"id": format!("n{i:03}"), "kind": "request", "request": {"method": "GET", "url": format!("{}/orders", target.base)},
               "assertions": [{"source": "status", "operator": "equals", "expected": 200}],
               "extractors": [{"name": "status", "kind": "statusCode"}]})
    };
    let flow = app.create_flow("many", json!({"nodes": (0..NODES).map(node).collect::<Vec<_>>()})).await;
    let started = std::time::Instant::now();
    let creds = app.creds_with(&["flows:execute"]).await;
    let output = cli(&app.base).run(Some(&creds), &["run", "--flow", &flow]).await;
    let elapsed = started.elapsed();
    assert_eq!(output.code, 0, "{}", output.all());
    let runs = executions(&app, &flow).await;
    let id = runs[0]["id"].as_str().expect("id");
    let stored = app.rows(&format!("node_results WHERE execution_id = '{id}' AND status = 'passed'")).await;
    assert_eq!(stored, NODES as i64, "every result arrived");
    let lines: Vec<&str> = output.stderr.lines().filter(|l| l.contains("PASS n")).collect();
    let expected: Vec<String> = (0..NODES).map(|i| format!("PASS n{i:03}")).collect();
    assert_eq!(lines.len(), NODES, "a line per node: {}", output.stderr);
    assert!(lines.iter().zip(&expected).all(|(line, node)| line.contains(node.as_str())), "in order");
    // One `node.started` at the claim (the first node), then one per report but the last: as many as reports.
    let started_events = format!("execution_events WHERE execution_id = '{id}' AND data LIKE '%\"node.started\"%'");
    let reports = app.rows(&started_events).await;
    let allowed = elapsed.as_millis() / 25 + (NODES / 100) as u128 + 2;
    assert!(
        (1..=allowed as i64).contains(&reports),
        "{reports} reports for {NODES} results in {} ms (at most {allowed})",
        elapsed.as_millis()
    );
}

#[tokio::test]
async fn a_failing_flow_exits_1_and_the_junit_report_says_why() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let flow = app.create_flow("broken", failing(&target.base)).await;
    let dir = scratch();
    let junit = dir.join("junit.xml");
    let output = cli(&app.base)
        .run(Some(&app.admin), &["run", "--flow", &flow, "--report", &format!("junit={}", junit.display())])
        .await;
    assert_eq!(output.code, 1, "{}", output.all());
    assert!(output.stderr.contains("FAIL broken"), "{}", output.all());
    assert!(output.stdout.contains("0 of 1 flows passed"), "{}", output.all());
    let junit = std::fs::read_to_string(&junit).expect("junit report");
    assert_eq!(xpath(&junit, "/testsuites/@failures"), "1");
    assert_eq!(xpath(&junit, "/testsuites/@skipped"), "1");
    let message = xpath(&junit, "//testcase[@name='broken']/failure/@message");
    assert!(message.contains("status equals 200") && message.contains("500"), "{message}");
    assert_eq!(executions(&app, &flow).await[0]["status"], "failed");
}

#[tokio::test]
async fn run_by_tag_follows_remote_executions_on_a_runner() {
    let (app, target) = with_secret().await;
    let mut ids = Vec::new();
    for (name, tags) in [
        ("smoke a", json!(["smoke"])),
        ("smoke b", json!(["smoke"])),
        ("slow", json!(["smoke", "slow"])),
        ("other", json!(["nightly"])),
    ] {
        let body = json!({"name": name, "tags": tags, "definition": passing(&target.base)});
        let reply = app.admin(Method::POST, "/flows", Some(body)).await;
        ids.push(reply.body["id"].as_str().expect("id").to_owned());
    }
    let runner_creds = app.runner_creds(app.admin.org).await;
    let _runner = RunnerProcess::spawn(RUNNER, &app.base, &runner_creds, &["linux"], &[]).await;
    let creds = scoped(&app, app.admin.org, &["flows:execute", "flows:read"]).await;
    let dir = scratch();
    let report = dir.join("report.json");
    let args = [
        "run",
        "--tag",
        "smoke",
        "--exclude-tag",
        "slow",
        "--mode",
        "remote",
        "--label",
        "linux",
        "--parallel",
        "2",
        "--report",
        &format!("json={}", report.display()),
    ];
    let output = cli(&app.base).run(Some(&creds), &args).await;
    assert_eq!(output.code, 0, "{}", output.all());
    assert!(output.stdout.contains("2 of 2 flows passed"), "{}", output.all());
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    let names: Vec<&str> = json["flows"].as_array().expect("flows").iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(names, ["smoke a", "smoke b"]);
    assert_eq!(json["flows"][0]["nodes"].as_array().expect("nodes from the stream").len(), 2);
    for (flow, expected) in ids.iter().zip([1, 1, 0, 0]) {
        let runs = executions(&app, flow).await;
        assert_eq!(runs.len(), expected, "flow {flow}");
        if let Some(run) = runs.first() {
            assert!(run["runner_id"].is_string(), "a runner executed it: {run}");
            assert_eq!(run["trigger"], "cli");
        }
    }
    assert_quiet(&output, &[&json.to_string()], &creds.key);
}

#[tokio::test]
async fn every_exit_code_means_what_the_help_says() {
    let (app, target) = with_secret().await;
    let flow = app.create_flow("fine", passing(&target.base)).await;
    let cli = cli(&app.base);

    let no_key = cli.run(None, &["run", "--flow", &flow]).await;
    assert_eq!(no_key.code, 2, "{}", no_key.all());
    assert!(no_key.stderr.contains("SERVICE_API_KEY"), "{}", no_key.all());
    let nothing = cli.run(Some(&app.admin), &["run"]).await;
    assert_eq!(nothing.code, 2, "{}", nothing.all());
    assert!(nothing.stderr.contains("nothing to run"), "{}", nothing.all());
    let no_such_tag = cli.run(Some(&app.admin), &["run", "--tag", "no-such-tag"]).await;
    assert_eq!(no_such_tag.code, 2, "{}", no_such_tag.all());
    let bad_flag = cli.run(Some(&app.admin), &["run", "--flow", "not-a-uuid"]).await;
    assert_eq!(bad_flag.code, 2, "{}", bad_flag.all());
    let labels_here = cli.run(Some(&app.admin), &["run", "--flow", &flow, "--label", "gpu"]).await;
    assert_eq!(labels_here.code, 2, "--label needs --mode remote: {}", labels_here.all());

    let unreachable = Cli { binary: HOOKFLOW, base: "http://127.0.0.1:9".to_owned() };
    let down = unreachable.run(Some(&app.admin), &["run", "--flow", &flow]).await;
    assert_eq!(down.code, 3, "{}", down.all());
    assert!(down.stderr.contains("cannot reach"), "{}", down.all());

    let mut wrong = app.admin.clone();
    wrong.key = format!("{}x", wrong.key);
    let refused = cli.run(Some(&wrong), &["run", "--flow", &flow]).await;
    assert_eq!(refused.code, 4, "{}", refused.all());
    assert!(refused.stderr.contains("unauthorized"), "{}", refused.all());
    assert!(!refused.all().contains(&wrong.key), "the key is never printed");
    let execute_only = scoped(&app, app.admin.org, &["flows:execute"]).await;
    let scope = cli.run(Some(&execute_only), &["run", "--tag", "smoke"]).await;
    assert_eq!(scope.code, 4, "{}", scope.all());
    assert!(scope.stderr.contains("insufficient_scope") && scope.stderr.contains("flows:read"), "{}", scope.all());
    let other = app.new_org("Other").await;
    let foreign = cli.run(Some(&other), &["run", "--flow", &flow]).await;
    assert_eq!(foreign.code, 4, "another organization's flow is not found: {}", foreign.all());
    assert!(foreign.stderr.contains("not_found"), "{}", foreign.all());
    assert!(executions(&app, &flow).await.is_empty(), "nothing ran");

    let passed = cli.run(Some(&app.admin), &["run", "--flow", &flow]).await;
    assert_eq!(passed.code, 0, "{}", passed.all());
}

#[tokio::test]
async fn a_launch_whose_answer_was_lost_is_retried_once_under_the_same_key() {
    let (app, target) = with_secret().await;
    let flow = app.create_flow("retried", passing(&target.base)).await;
    let upstream = app.base.trim_start_matches("http://").parse().expect("server address");
    let proxy = Proxy::start(upstream).await;
    proxy.swallow_answers(1);
    let output = cli(&proxy.url()).run(Some(&app.admin), &["run", "--flow", &flow]).await;
    assert_eq!(output.code, 0, "{}", output.all());
    assert!(output.stderr.contains("retrying"), "{}", output.all());
    let runs = executions(&app, &flow).await;
    assert_eq!(runs.len(), 1, "the retry replayed the launch instead of starting another: {runs:?}");
    assert_eq!(runs[0]["status"], "succeeded", "the claim was handed out again and completed");
}

#[tokio::test]
async fn fail_fast_launches_nothing_after_a_failure() {
    let (app, target) = with_secret().await;
    let broken = app.create_flow("broken", failing(&target.base)).await;
    let fine = app.create_flow("fine", passing(&target.base)).await;
    let dir = scratch();
    let junit = dir.join("junit.xml");
    let args =
        ["run", "--flow", &broken, "--flow", &fine, "--fail-fast", "--report", &format!("junit={}", junit.display())];
    let output = cli(&app.base).run(Some(&app.admin), &args).await;
    assert_eq!(output.code, 1, "{}", output.all());
    assert!(output.stdout.contains("not_run"), "{}", output.all());
    assert!(executions(&app, &fine).await.is_empty(), "the second flow never launched");
    let junit = std::fs::read_to_string(&junit).expect("junit");
    assert_eq!(xpath(&junit, "count(//testsuite)"), "2");
    assert!(xpath(&junit, "//testsuite[2]//skipped/@message").contains("not launched"));
}

#[tokio::test]
async fn timeout_cancels_what_still_runs() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.create_flow("sleepy", json!({"nodes": [{"id": "nap", "kind": "delay", "delay_ms": 60000}]})).await;
    let output = cli(&app.base).run(Some(&app.admin), &["run", "--flow", &flow, "--timeout", "1"]).await;
    assert_eq!(output.code, 1, "{}", output.all());
    assert!(output.stdout.contains("timed_out"), "{}", output.all());
    assert!(output.stderr.contains("--timeout"), "{}", output.all());
    assert_eq!(executions(&app, &flow).await[0]["status"], "cancelled");
}
