//! Trying a node (`POST /flows/{flow_id}/try`): one request node of a flow sent now, against a real local HTTP
//! target, through the runner engine under the organization's network policy, with the flow's, environment's,
//! organization's and the body's variables, secrets resolved and masked; its node result answered, nothing
//! stored. Refusals: other kinds and bad nodes (400), scopes (checked before the body), other organizations'
//! flows (404), more than 4 tries in flight (429).

use hookflow_shared::Role;
use hookflow_shared::api::executions::NodeStatus;
use hookflow_shared::api::flows::{PutEnvironment, TryNode};
use hookflow_tests::target::Target;
use hookflow_tests::{Creds, Reply, TestApp};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const SECRET: &str = "tok-S3cr3t-9f8e7d6c";

fn try_body(node: Value) -> TryNode {
    TryNode { node, environment: None, variables: Default::default() }
}

/// A flow whose draft sets `variables` (the node is the caller's), as `creds`; answers its id.
async fn flow_with(app: &TestApp, creds: &Creds, variables: Value) -> String {
    let definition = json!({"variables": variables, "nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let flow = hookflow_shared::api::flows::WriteFlow::new("tried".parse().expect("a name"), definition);
    app.api_as(creds).flows().create(&flow).await.expect("create the flow").id.to_string()
}

async fn try_raw(app: &TestApp, creds: &Creds, flow: &str, body: Value) -> Reply {
    app.call(Method::POST, &format!("/flows/{flow}/try"), Some(creds), Some(body)).await
}

fn orders(base: &str) -> Value {
    json!({"id": "orders", "kind": "request", "request": {"method": "GET", "url": format!("{base}/orders")},
        "extractors": [{"name": "count", "kind": "jsonPath", "expression": "$.count"}],
        "assertions": [{"source": "count", "operator": "equals", "expected": 2}]})
}

#[tokio::test]
async fn a_tried_node_answers_its_result_with_the_flows_variables_and_stores_nothing() {
    let app = TestApp::spawn().await;
    let target = Target::spawn().await;
    let api = app.api();
    app.put::<Value>("/variables/org_only", &json!({"value": "from-org"}), 200).await;
    let flow = flow_with(&app, &app.admin, json!({"base_url": "http://wrong.invalid", "who": "flow"})).await;
    let environment = PutEnvironment { variables: [("base_url".into(), target.base.clone())].into() };
    api.flows().put_environment(&flow, "local", &environment).await.expect("environment");

    let audited = app.rows("audit_log").await;
    // The environment overrides the flow's default, the body's variables override both.
    let node = json!({"id": "echo", "kind": "request",
        "request": {"method": "POST", "url": "{{base_url}}/echo", "headers": {"x-who": "{{who}}", "x-org": "{{org_only}}"},
                    "body": "hello"},
        "extractors": [{"name": "who", "kind": "jsonPath", "expression": "$.headers['x-who']"},
                       {"name": "org", "kind": "jsonPath", "expression": "$.headers['x-org']"}],
        "assertions": [{"source": "who", "operator": "equals", "expected": "body"},
                       {"source": "org", "operator": "equals", "expected": "from-org"}]});
    let body =
        TryNode { node, environment: Some("local".into()), variables: [("who".to_owned(), "body".to_owned())].into() };
    let result = api.flows().try_node(&flow, &body).await.expect("tried");
    assert_eq!(result.status, NodeStatus::Passed, "{result:?}");
    assert_eq!((result.node_id.as_str(), result.attempt), ("echo", 1));
    let response = result.response.as_ref().expect("a response");
    assert_eq!(response.status, 200);
    assert!(response.body.contains("hello"), "{}", response.body);
    assert_eq!(result.extracted["who"], json!("body"));
    assert_eq!(result.request.as_ref().map(|r| r.url.clone()), Some(format!("{}/echo", target.base)));
    assert_eq!(result.assertions.len(), 2);

    // A failing assertion is a result too: 200, `failed`.
    let failing = json!({"id": "orders", "kind": "request", "request": {"method": "GET", "url": "{{base_url}}/orders"},
        "extractors": [{"name": "count", "kind": "jsonPath", "expression": "$.count"}],
        "assertions": [{"source": "count", "operator": "equals", "expected": 3}]});
    let body = TryNode { environment: Some("local".into()), ..try_body(failing) };
    let result = api.flows().try_node(&flow, &body).await.expect("tried");
    assert_eq!(result.status, NodeStatus::Failed, "{result:?}");
    assert_eq!(result.extracted["count"], json!(2));
    assert!(!result.assertions[0].passed);

    assert_eq!(target.hits(), 2);
    assert_eq!(app.rows("executions").await, 0, "nothing is stored");
    assert_eq!(app.rows("jobs").await, 0);
    assert_eq!(app.rows("audit_log").await, audited, "nor audited");
}

#[tokio::test]
async fn a_tried_node_goes_where_the_organizations_runs_may_go() {
    let app = TestApp::spawn().await;
    let target = Target::spawn().await;
    // The admin organization is on the operator's private-network list (as the first start's): this machine.
    let flow = flow_with(&app, &app.admin, json!({})).await;
    let mine = app.api().flows().try_node(&flow, &try_body(orders(&target.base))).await.expect("tried");
    assert_eq!(mine.status, NodeStatus::Passed, "{mine:?}");
    // Link-local (cloud metadata) addresses: never.
    let metadata = app.api().flows().try_node(&flow, &try_body(orders("http://169.254.169.254"))).await;
    let metadata = metadata.expect("tried");
    assert_eq!(metadata.status, NodeStatus::Error);
    assert!(metadata.error.as_deref().unwrap_or_default().contains("link-local"), "{metadata:?}");

    // Another organization, under the default policy: loopback is refused as its runs on the embedded runner are.
    let other = app.new_org("Tenant").await;
    let theirs = flow_with(&app, &other, json!({})).await;
    let hits = target.hits();
    let refused = app.api_as(&other).flows().try_node(&theirs, &try_body(orders(&target.base))).await;
    let refused = refused.expect("tried");
    assert_eq!(refused.status, NodeStatus::Error, "{refused:?}");
    let error = refused.error.as_deref().unwrap_or_default();
    assert!(error.contains("loopback or private address") && error.contains("not allowed"), "{error}");
    assert_eq!(target.hits(), hits, "nothing reached this machine");

    // Neither sees the other's flow.
    let foreign = try_raw(&app, &other, &flow, json!({"node": orders(&target.base)})).await;
    foreign.assert_refused(404, "not_found", "flow");
}

#[tokio::test]
async fn secrets_are_resolved_for_who_could_store_the_node_and_masked_in_the_answer() {
    let app = TestApp::spawn().await;
    let target = Target::spawn().await;
    app.put::<Value>("/secrets/TOKEN", &json!({"value": SECRET}), 200).await;
    app.put::<Value>("/secrets/KEPT", &json!({"value": "kept-for-runners-77", "runners_only": true}), 200).await;
    let flow = flow_with(&app, &app.admin, json!({})).await;
    let environment = PutEnvironment { variables: [("auth".into(), "Bearer {{secret.TOKEN}}".into())].into() };
    app.api().flows().put_environment(&flow, "env", &environment).await.expect("environment");
    let node = json!({"id": "echo", "kind": "request",
        "request": {"method": "POST", "url": format!("{}/echo?k={{{{secret.TOKEN}}}}", target.base),
                    "headers": {"authorization": "{{auth}}", "x-raw": "{{secret.TOKEN}}"}, "body": "{{secret.TOKEN}}"},
        "extractors": [{"name": "echoed", "kind": "jsonPath", "expression": "$.body"}],
        "assertions": [{"source": "echoed", "operator": "exists"}]});
    let body = json!({"node": node, "environment": "env"});
    let tried = try_raw(&app, &app.admin, &flow, body.clone()).await;
    assert_eq!(tried.status, 200, "{}", tried.text);
    assert_eq!(tried.body["status"], "passed", "{}", tried.text);
    assert!(tried.body["response"]["body"].as_str().unwrap_or_default().contains("***"), "{}", tried.text);
    use base64::Engine as _;
    for form in [SECRET.to_owned(), base64::engine::general_purpose::STANDARD.encode(SECRET)] {
        assert!(!tried.text.contains(&form), "the secret ({form}) leaked: {}", tried.text);
    }

    // A key that may run flows but not write them cannot make a secret go where it likes.
    let runs_only = app.creds_with(&["flows:execute", "flows:read"]).await;
    let refused = try_raw(&app, &runs_only, &flow, body).await;
    refused.assert_refused(403, "insufficient_scope", "flows:write");
    // Secrets kept for registered runners are not given to a try.
    let kept = json!({"id": "kept", "kind": "request",
        "request": {"method": "GET", "url": format!("{}/echo", target.base), "headers": {"x-k": "{{secret.KEPT}}"}}});
    let withheld = try_raw(&app, &app.admin, &flow, json!({"node": kept})).await;
    assert_eq!(withheld.body["status"], "error", "{}", withheld.text);
    assert!(withheld.body["error"].as_str().unwrap_or_default().contains("registered runners"), "{}", withheld.text);
    assert!(!withheld.text.contains("kept-for-runners-77"));
}

#[tokio::test]
async fn only_request_nodes_of_the_callers_flows_are_tried_by_who_may_run_them() {
    let app = TestApp::spawn().await;
    let flow = flow_with(&app, &app.admin, json!({})).await;
    let admin = app.admin.clone();
    let delay = try_raw(&app, &admin, &flow, json!({"node": {"id": "w", "kind": "delay", "delay_ms": 1}})).await;
    delay.assert_refused(400, "invalid_request", "only `request` nodes");
    let bad = json!({"node": {"id": "x", "kind": "request", "request": {"method": "BREW", "url": "http://a.example"}}});
    try_raw(&app, &admin, &flow, bad).await.assert_refused(400, "invalid_request", "node.request.method");
    let node = json!({"id": "x", "kind": "request", "request": {"method": "GET", "url": "http://a.example"}});
    let unknown = try_raw(&app, &admin, &flow, json!({"node": node, "environment": "nope"})).await;
    unknown.assert_refused(400, "invalid_request", "environment");
    let reserved =
        try_raw(&app, &admin, &flow, json!({"node": node, "variables": {"execution.capture_url": "x"}})).await;
    reserved.assert_refused(400, "invalid_request", "variables.execution.capture_url");
    try_raw(&app, &admin, &flow, json!({})).await.assert_refused(400, "invalid_request", "node");

    // The scope is checked before the body is read: a reader's malformed body is refused for the scope.
    let reader = app.creds_with(&["flows:read"]).await;
    let response = app
        .api_as(&reader)
        .request(Method::POST, &format!("/flows/{flow}/try"))
        .body("{not json")
        .send()
        .await
        .expect("send");
    hookflow_tests::app::read(response).await.assert_refused(403, "insufficient_scope", "flows:execute");
    let viewer = app.person(app.admin.org, Role::Viewer).await;
    let (bearer, _) = app.bearer(&viewer, Some(app.admin.org)).await;
    let path = format!("/flows/{flow}/try");
    let as_viewer = app.call_bearer(Method::POST, &path, &bearer, Some(json!({"node": node}))).await;
    as_viewer.assert_refused(403, "insufficient_scope", "flows:execute");
    let member = app.person(app.admin.org, Role::Member).await;
    let (bearer, _) = app.bearer(&member, Some(app.admin.org)).await;
    let unreachable = json!({"id": "x", "kind": "request", "request": {"method": "GET", "url": "http://127.0.0.1:9/"}});
    let as_member = app.call_bearer(Method::POST, &path, &bearer, Some(json!({"node": unreachable}))).await;
    assert_eq!((as_member.status.as_u16(), &as_member.body["status"]), (200, &json!("error")), "{}", as_member.text);
}

#[tokio::test]
async fn an_organization_has_at_most_four_tries_in_flight() {
    let app = TestApp::spawn().await;
    let target = Target::spawn().await;
    let flow = flow_with(&app, &app.admin, json!({})).await;
    let slow = json!({"id": "slow", "kind": "request", "request": {"method": "GET", "url": format!("{}/slow?ms=1500", target.base)}});
    let mut tries = Vec::new();
    for _ in 0..4 {
        let (app, flow, slow) = (app.api(), flow.clone(), try_body(slow.clone()));
        tries.push(tokio::spawn(async move { app.flows().try_node(&flow, &slow).await }));
    }
    for _ in 0..100 {
        if target.hits() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(target.hits(), 4, "four tries are at the target");
    let fifth = try_raw(&app, &app.admin, &flow, json!({"node": slow})).await;
    fifth.assert_refused(429, "rate_limited", "4 tries in flight");
    assert!(fifth.headers.get("retry-after").is_some(), "{:?}", fifth.headers);
    for tried in tries {
        let result = tried.await.expect("joined").expect("tried");
        assert_eq!(result.status, NodeStatus::Passed, "{result:?}");
    }
    let again = app.api().flows().try_node(&flow, &try_body(orders(&target.base))).await.expect("a slot again");
    assert_eq!(again.status, NodeStatus::Passed);
}
