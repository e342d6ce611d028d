//! Variable precedence over the real server and the embedded runner (narrowest wins: extracted values, launch
//! variables, environment variables, the flow's own defaults, organization variables), the names under
//! `execution.` that are built in and refused wherever a name is defined, and `{{execution.capture_url}}` in the
//! engine.

use hookflow_runner::engine::Engine;
use hookflow_shared::api::executions::{Launch, LaunchByTag, NodeStatus};
use hookflow_shared::api::flows::{PutEnvironment, WriteFlow};
use hookflow_shared::api::runners::{FinalStatus, Job};
use hookflow_tests::TestApp;
use hookflow_tests::target::Target;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A flow whose `seen` node shows what each name reads, before and after `who` is extracted from a response.
fn layered_flow(target: &str) -> Value {
    json!({"variables": {"who": "flow-default", "region": "flow-default", "level": "flow-default",
                       "greeting": "hello {{who}}"},
    "nodes": [
      {"id": "seen", "kind": "set_variables", "variables": {"who_seen": "{{who}}", "region_seen": "{{region}}",
          "level_seen": "{{level}}", "org_seen": "{{org_only}}", "greeting_seen": "{{greeting}}"}},
      {"id": "login", "kind": "request", "request": {"method": "POST", "url": format!("{target}/login"),
          "headers": {"content-type": "application/json"}, "body": "{\"user\": \"from-response\"}"},
       "extractors": [{"name": "who", "kind": "jsonPath", "expression": "$.user"}]},
      {"id": "after", "kind": "set_variables", "variables": {"who_after": "{{who}}"}}
    ]})
}

#[tokio::test]
async fn the_narrowest_layer_wins() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let target = Target::spawn().await;
    for (name, value) in [("level", "org"), ("org_only", "org"), ("who", "org"), ("region", "org")] {
        app.put::<Value>(&format!("/variables/{name}"), &json!({"value": value}), 200).await;
    }
    let flow = app.create_flow("layers", layered_flow(&target.base)).await;
    let staging = json!({"variables": {"region": "env"}});
    app.put::<Value>(&format!("/flows/{flow}/environments/staging"), &staging, 200).await;
    let run = |launch: Value| {
        let (app, flow) = (&app, &flow);
        async move {
            let id = app.launch(flow, launch).await["id"].as_str().expect("id").to_owned();
            let done = app.wait_finished(flow, &id).await;
            assert_eq!(done["status"], "succeeded", "{done}");
            let nodes = app.get::<Value>(&format!("/flows/{flow}/executions/{id}/nodes"), 200).await;
            let extracted = |node: usize| nodes["items"][node]["extracted"].clone();
            (extracted(0), extracted(2))
        }
    };
    let (seen, after) = run(json!({"environment": "staging", "variables": {"who": "launch"}})).await;
    assert_eq!(seen["who_seen"], "launch", "a launch variable overrides a flow default: {seen}");
    assert_eq!(seen["greeting_seen"], "hello launch", "a flow default renders with the launch's value: {seen}");
    assert_eq!(seen["region_seen"], "env", "an environment variable overrides a flow default: {seen}");
    assert_eq!(seen["level_seen"], "flow-default", "an organization variable is below a flow default: {seen}");
    assert_eq!(seen["org_seen"], "org", "an organization variable still reads where nothing else defines it");
    assert_eq!(after["who_after"], "from-response", "an extracted value overrides a launch variable: {after}");

    let (seen, _) = run(json!({})).await;
    assert_eq!(seen["who_seen"], "flow-default", "without a launch variable the flow's default reads: {seen}");
    assert_eq!(seen["region_seen"], "flow-default", "without the environment the flow's default reads: {seen}");
}

#[tokio::test]
async fn names_under_execution_are_refused_wherever_a_name_is_defined() {
    let app = TestApp::spawn().await;
    let flow = app.delay_flow("plain").await;
    let refused = |answer: Result<(), hookflow_tests::ApiFailure>, field: &str| {
        let failure = answer.expect_err("refused");
        assert_eq!((failure.status(), failure.code()), (400, "invalid_request"), "{failure:?}");
        assert!(failure.message().contains(field) && failure.message().contains("reserved"), "{field}: {failure:?}");
    };
    let api = app.api();
    let flows = api.flows();
    let delay = json!({"id": "wait", "kind": "delay", "delay_ms": 1});
    let definitions = [
        (json!({"variables": {"execution.capture_url": "x"}, "nodes": [delay]}), "variables.execution.capture_url"),
        (
            json!({"nodes": [{"id": "set", "kind": "set_variables", "variables": {"execution.id": "x"}}]}),
            "node `set` variables.execution.id",
        ),
        (
            json!({"nodes": [{"id": "call", "kind": "request", "request": {"method": "GET", "url": "http://127.0.0.1:9"},
                "extractors": [{"name": "execution.code", "kind": "statusCode"}]}]}),
            "node `call` extractors[0].name",
        ),
    ];
    for (definition, field) in definitions {
        let body = WriteFlow::new("reserved".parse().expect("a name"), definition);
        refused(flows.create(&body).await.map(drop), field);
        refused(flows.put(&flow, &body).await.map(drop), field);
    }
    let variables = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let environment =
        PutEnvironment { variables: variables(&[("base_url", "https://api.example"), ("execution.capture_url", "x")]) };
    refused(flows.put_environment(&flow, "prod", &environment).await.map(drop), "variables.execution.capture_url");

    let launch = Launch {
        variables: variables(&[("sha", "abc"), ("execution.capture_url", "https://evil.example")]),
        ..Launch::default()
    };
    refused(flows.launch(&flow, &launch).await.map(drop), "variables.execution");
    let by_tag = LaunchByTag {
        tags: vec!["smoke".to_owned()].try_into().expect("tags"),
        variables: launch.variables.clone(),
        ..LaunchByTag::default()
    };
    refused(flows.launch_by_tag(&by_tag).await.map(drop), "variables.execution");
    let fine = Launch {
        variables: variables(&[("executions", "3"), ("Execution.capture_url", "case matters")]),
        ..Launch::default()
    };
    flows.launch(&flow, &fine).await.expect("names merely like the built-in ones are fine");
}

async fn run(job: &Job) -> (hookflow_runner::engine::Outcome, Vec<hookflow_shared::api::executions::NodeResult>) {
    let (sink, mut results) = tokio::sync::mpsc::unbounded_channel();
    let outcome = Engine::new().run(job, &sink, &CancellationToken::new()).await;
    drop(sink);
    let mut all = Vec::new();
    while let Some(result) = results.recv().await {
        all.push(result);
    }
    (outcome, all)
}

#[tokio::test]
async fn the_capture_url_is_built_in_and_a_run_without_one_says_so() {
    let definition = json!({"variables": {"callback": "{{execution.capture_url}}/done"}, "nodes": [
        {"id": "cb", "kind": "set_variables", "variables": {"url": "{{execution.capture_url}}", "via": "{{callback}}"}}
    ]});
    let mut job = Job::standalone("capture", definition, 30);
    job.capture_url = Some("https://hooks.example/webhook/x-1".into());
    let (outcome, results) = run(&job).await;
    assert_eq!(outcome.status, FinalStatus::Succeeded, "{outcome:?}");
    assert_eq!(results[0].extracted["url"], "https://hooks.example/webhook/x-1");
    assert_eq!(results[0].extracted["via"], "https://hooks.example/webhook/x-1/done");

    job.capture_url = None;
    let (outcome, results) = run(&job).await;
    assert_eq!(outcome.status, FinalStatus::Failed);
    assert_eq!(results[0].status, NodeStatus::Error);
    let error = results[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("this run has no capture URL: "), "{error}");
    assert!(error.contains("a local run without a server"), "{error}");
}
