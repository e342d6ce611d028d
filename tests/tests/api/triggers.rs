//! Captures that start flows, over the real server: a matching capture launches its flow once with the capture as
//! launch variables (echoed by the run to another endpoint), linked both ways; captures that do not match, or that
//! `enforce` refused, launch nothing; who may set triggers, and on which flows; every bad field refused by name.

use hookflow_shared::api::flows::WriteFlow;
use hookflow_shared::api::resources::PutSecret;
use hookflow_tests::TestApp;
use hookflow_tests::exec::scoped;
use hookflow_tests::signers::{Sign, github};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// A flow that posts what its capture gave it to `sink`: the facts as query parameters, the body as the body.
fn echo_flow(sink: &str) -> Value {
    let query: serde_json::Map<String, Value> = [
        ("method", "capture.method"),
        ("path", "capture.path"),
        ("event", "capture.headers.x-event"),
        ("page", "capture.query.page"),
        ("signature", "capture.signature"),
        ("request", "capture.request_id"),
        ("webhook", "capture.webhook_id"),
        ("order", "order"),
        ("team", "team"),
    ]
    .into_iter()
    .map(|(name, variable)| (name.to_owned(), json!(format!("{{{{{variable}}}}}"))))
    .collect();
    json!({"nodes": [{"id": "echo", "kind": "request",
        "request": {"method": "POST", "url": sink, "query": query, "body": "{{capture.body}}"}}]})
}

/// The newest capture of endpoint `id`.
async fn newest_capture(app: &TestApp, id: &str) -> Value {
    let page = app.api().webhooks().requests(id, &[("limit", "1")]).await.expect("captures");
    serde_json::to_value(&page.items[0]).expect("json")
}

#[tokio::test]
async fn a_matching_capture_launches_its_flow_once_with_the_capture_as_variables() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let secret =
        PutSecret { value: "s3cr3t-never-sent".parse().expect("a value"), allowed_hosts: vec![], runners_only: false };
    app.api().secrets().put("TOKEN", &secret).await.expect("a secret");
    let sink = app.webhook_named("sink").await;
    let flow = app.create_flow("echo", echo_flow(&app.capture_url(&sink, "/echo"))).await;
    let trigger = json!({"flow_id": flow, "q": "method:POST header.x-event:paid", "variables": {"team": "payments"},
        "extract": {"order": "$.data.id"}});
    let orders = app.triggered_endpoint("orders", json!([trigger])).await;
    let endpoint = app.api().webhooks().get(&orders).await.expect("the endpoint");
    assert_eq!(serde_json::to_value(&endpoint.triggers).expect("json"), json!([trigger]), "the answer shows them");

    // A sender may write templates; they reach the run as text, never as a secret.
    let body = r#"{"data": {"id": "ord_1"}, "note": "{{secret.TOKEN}}"}"#;
    let headers = [("X-Event", "paid"), ("Content-Type", "application/json")];
    let sent = app.capture_with(Method::POST, &format!("{orders}/orders?page=2&page=3"), &headers, body).await;
    assert_eq!(sent.status, 200, "{}", sent.text);
    let request_id = sent.body["request_id"].as_str().expect("request id").to_owned();
    let other = app.capture_with(Method::POST, &orders, &[("X-Event", "refunded")], "{}").await;
    assert_eq!(other.status, 200);
    let get = app.capture(Method::GET, &format!("{orders}?page=1"), "").await;
    assert_eq!(get.status, 200);

    let executions = app.wait_executions(&flow, 1, Duration::from_secs(20)).await;
    app.triggers_settled(Duration::from_secs(10)).await;
    let execution = &executions[0];
    assert_eq!(execution["trigger"], "webhook");
    assert_eq!(execution["trigger_request"], json!({"webhook_id": orders, "request_id": request_id}));
    let id = execution["id"].as_str().expect("id");
    let done = app.wait_finished(&flow, id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(app.executions_of(&flow).await.len(), 1, "one launch, for the one capture that matched");

    let echoed = newest_capture(&app, &sink).await;
    let first = |name: &str| echoed["query"][name][0].clone();
    assert_eq!(
        ["method", "path", "event", "page", "signature", "order", "team"].map(first),
        ["POST", "/orders", "paid", "2", "unverified", "ord_1", "payments"].map(|v| json!(v))
    );
    assert_eq!((first("request"), first("webhook")), (json!(request_id), json!(orders)));
    assert_eq!(echoed["body"], body, "the body, with its template as text");
    let depth = echoed["headers"].as_array().expect("headers").iter().find(|h| h[0] == "hookflow-trigger-depth");
    assert_eq!(depth.map(|h| h[1].clone()), Some(json!("1")), "{echoed}");
    assert!(!echoed.to_string().contains("s3cr3t-never-sent"));

    // Linked both ways: the capture names its execution; the others name none.
    let capture = app.api().webhooks().request(&orders, &request_id).await.expect("the capture");
    let linked = serde_json::to_value(&capture.executions).expect("json");
    assert_eq!(linked, json!([{"flow_id": flow, "execution_id": id}]));
    let listed = app.api().webhooks().requests(&orders, &[]).await.expect("captures");
    let counts: Vec<usize> = listed.items.iter().map(|c| c.executions.len()).collect();
    assert_eq!(counts, [0, 0, 1], "newest first: the GET, the refund, the paid order");
}

#[tokio::test]
async fn a_capture_enforce_refuses_launches_nothing_and_a_signed_one_does() {
    let app = TestApp::spawn().await;
    let flow = app.delay_flow("on push").await;
    let secret = "github-secret";
    let created = app
        .create_webhook(json!({"name": "github", "triggers": [{"flow_id": flow}],
            "verification": {"scheme": "github", "secrets": [secret], "mode": "enforce"}}))
        .await;
    let id = created["id"].as_str().expect("id").to_owned();
    let unsigned = app.capture(Method::POST, &id, "{}").await;
    assert_eq!(unsigned.status, 401, "{}", unsigned.text);
    let signed = github(Sign { secret, body: b"{\"ok\": true}", timestamp: 0, url: "" });
    let headers: Vec<(&str, &str)> = signed.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let accepted = app.capture_with(Method::POST, &id, &headers, signed.body.clone()).await;
    assert_eq!(accepted.status, 200, "{}", accepted.text);
    let executions = app.wait_executions(&flow, 1, Duration::from_secs(10)).await;
    app.triggers_settled(Duration::from_secs(10)).await;
    assert_eq!(app.executions_of(&flow).await.len(), 1, "only the signed capture launched");
    assert_eq!(executions[0]["trigger_request"]["request_id"], accepted.body["request_id"]);
    let variables: Value = sqlx::query_scalar("SELECT variables FROM executions WHERE trigger_request_id IS NOT NULL")
        .fetch_one(&app.pool)
        .await
        .expect("variables");
    assert_eq!(variables["capture.signature"], "valid");
    assert_eq!(variables["capture.headers.x-github-event"], "push");
}

#[tokio::test]
async fn setting_triggers_needs_flows_execute_and_a_flow_of_ones_own() {
    let app = TestApp::spawn().await;
    let flow = app.delay_flow("mine").await;
    let body = json!({"name": "hook", "triggers": [{"flow_id": flow}]});
    let writer = scoped(&app, app.admin.org, &["webhooks:read", "webhooks:write"]).await;
    let refused = app.call(Method::POST, "/webhooks", Some(&writer), Some(body.clone())).await;
    refused.assert_refused(403, "insufficient_scope", "flows:execute");
    let plain = app.call(Method::POST, "/webhooks", Some(&writer), Some(json!({"name": "plain"}))).await;
    assert_eq!(plain.status, 201, "an endpoint without triggers needs webhooks:write only");
    let patch = app
        .call(
            Method::PATCH,
            &format!("/webhooks/{}", plain.body["id"].as_str().expect("id")),
            Some(&writer),
            Some(json!({"triggers": [{"flow_id": flow}]})),
        )
        .await;
    patch.assert_refused(403, "insufficient_scope", "flows:execute");
    let launcher = scoped(&app, app.admin.org, &["webhooks:read", "webhooks:write", "flows:execute"]).await;
    let made = app.call(Method::POST, "/webhooks", Some(&launcher), Some(body)).await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(app.audit_entries("webhook.triggers.set").await.len(), 1);

    // Another organization's flow is refused as a flow that does not exist; nothing of either leaks.
    let other = app.new_org("Other").await;
    let their_flow = WriteFlow::new(
        "theirs".parse().expect("a name"),
        json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]}),
    );
    let theirs = app.api_as(&other).flows().create(&their_flow).await.expect("their flow").id.to_string();
    for flow_id in [theirs.clone(), uuid::Uuid::now_v7().to_string()] {
        let reply =
            app.admin(Method::POST, "/webhooks", Some(json!({"name": "x", "triggers": [{"flow_id": flow_id}]}))).await;
        reply.assert_refused(400, "invalid_request", "`triggers[0].flow_id`: no flow with this id");
    }
    let hook = made.body["id"].as_str().expect("id");
    let sent = app.capture(Method::POST, hook, "{}").await;
    let request = sent.body["request_id"].as_str().expect("request id");
    app.wait_executions(&flow, 1, Duration::from_secs(10)).await;
    let peek = app.call(Method::GET, &format!("/webhooks/{hook}/requests/{request}"), Some(&other), None).await;
    assert_eq!(peek.status, 404);
    let runs = app.call(Method::GET, &format!("/flows/{flow}/executions"), Some(&other), None).await;
    assert_eq!(runs.status, 404);
    assert!(app.api_as(&other).executions().list(&theirs, &[]).await.expect("theirs").items.is_empty());
}

#[tokio::test]
async fn every_bad_trigger_field_is_refused_by_name() {
    let app = TestApp::spawn().await;
    let flow = app.delay_flow("target").await;
    let trigger = |extra: Value| {
        let mut t = json!({"flow_id": flow});
        t.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        t
    };
    let one = trigger(json!({}));
    let cases: Vec<(Value, &str)> = vec![
        (json!(vec![one.clone(); 11]), "at most 10 triggers"),
        (json!([trigger(json!({"q": "colour:red"}))]), "`triggers[0].q`: unknown search field `colour`"),
        (json!([one.clone(), trigger(json!({"q": "x".repeat(2001)}))]), "`triggers[1].q` must be at most 2000"),
        (json!([trigger(json!({"filter": {"body_json": [{"path": "$.[", "op": "exists"}]}}))]), "`triggers[0].filter`"),
        (json!([trigger(json!({"filter": {"headers": [{"name": "x", "op": "eq"}]}}))]), "needs a `value`"),
        (json!([trigger(json!({"extract": {"a.b": "$.x"}}))]), "`a.b` is not a variable name"),
        (
            json!([trigger(json!({"extract": {"id": "$.["}}))]),
            "`triggers[0].extract.id`: `$.[` is not a valid JSONPath",
        ),
        (json!([trigger(json!({"variables": {"capture.method": "x"}}))]), "not a variable name"),
        (json!([trigger(json!({"variables": {"id": "1"}, "extract": {"id": "$.id"}}))]), "`id` is also extracted"),
        (json!([trigger(json!({"environment": "staging"}))]), "`triggers[0].environment`: the flow has no environment"),
        (json!([trigger(json!({"version": 0}))]), "`triggers[0].version`: 0 is not a version number"),
        (json!([trigger(json!({"version": 7}))]), "`triggers[0].version`: the flow has no such published version"),
        (json!([trigger(json!({"version": "latest"}))]), "no such published version"),
        (json!([trigger(json!({"colour": "red"}))]), "colour"),
    ];
    let hook = app.webhook_named("bad").await;
    for (triggers, mentioning) in cases {
        let created =
            app.admin(Method::POST, "/webhooks", Some(json!({"name": "x", "triggers": triggers.clone()}))).await;
        created.assert_refused(400, "invalid_request", mentioning);
        let patched = app.admin(Method::PATCH, &format!("/webhooks/{hook}"), Some(json!({"triggers": triggers}))).await;
        patched.assert_refused(400, "invalid_request", mentioning);
    }
    assert_eq!(app.rows("webhooks WHERE triggers <> '[]'").await, 0, "nothing stored");
    // `null` and `[]` both remove them.
    let set = app.admin(Method::PATCH, &format!("/webhooks/{hook}"), Some(json!({"triggers": [one]}))).await;
    assert_eq!(set.body["triggers"].as_array().map(Vec::len), Some(1), "{}", set.text);
    let cleared = app.admin(Method::PATCH, &format!("/webhooks/{hook}"), Some(json!({"triggers": null}))).await;
    assert_eq!(cleared.body["triggers"], json!([]), "{}", cleared.text);
}

#[tokio::test]
async fn a_loop_of_triggered_runs_stops_at_the_stated_depth_with_an_audit_entry() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let flow = app.delay_flow("loop").await;
    let hook = app.triggered_endpoint("loop", json!([{"flow_id": flow}])).await;
    // The flow posts to the endpoint that triggers it, whatever depth header it tries to send itself.
    let definition = json!({"nodes": [{"id": "again", "kind": "request", "request": {"method": "POST",
        "url": app.capture_url(&hook, "/again"), "headers": {"Hookflow-Trigger-Depth": "0"}, "body": "again"}}]});
    let looping = WriteFlow::new("loop".parse().expect("a name"), definition);
    app.api().flows().put(&flow, &looping).await.expect("the looping flow");
    assert_eq!(app.capture(Method::POST, &hook, "start").await.status, 200);
    let executions = app.wait_executions(&flow, 5, Duration::from_secs(60)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while app.audit_entries("trigger.refused").await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the loop was never refused");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.triggers_settled(Duration::from_secs(10)).await;
    assert_eq!(app.executions_of(&flow).await.len(), 5, "{executions:?}");
    let depths: Vec<i32> = sqlx::query_scalar("SELECT trigger_depth FROM executions ORDER BY trigger_depth")
        .fetch_all(&app.pool)
        .await
        .expect("depths");
    assert_eq!(depths, [1, 2, 3, 4, 5]);
    let refused = app.audit_entries("trigger.refused").await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["details"]["reason"], "depth");
    assert_eq!(refused[0]["target"], hook.as_str());
    assert_eq!(refused[0]["actor"], format!("webhook:{hook}"));
    assert_eq!(app.rows("captures").await, 6, "the start and five runs' posts, all stored");
}

#[tokio::test]
async fn a_flood_past_the_organizations_limit_is_refused_visibly_and_still_captured() {
    let app = TestApp::spawn_with(|s| s.triggers.launches_per_minute = 5).await;
    let flow = app.delay_flow("flooded").await;
    let hook = app.triggered_endpoint("flood", json!([{"flow_id": flow}])).await;
    let started = chrono::Utc::now();
    for n in 0..20 {
        let sent = app.capture(Method::POST, &hook, format!("{{\"n\": {n}}}")).await;
        assert_eq!(sent.status, 200, "the capture is answered whatever its launch: {}", sent.text);
    }
    app.triggers_settled(Duration::from_secs(20)).await;
    let ended = chrono::Utc::now();
    // A minute boundary crossed mid-test gives the next minute its own five.
    let minutes = if started.format("%H%M").to_string() == ended.format("%H%M").to_string() { 1 } else { 2 };
    let launched = app.executions_of(&flow).await.len();
    assert!((5..=5 * minutes).contains(&launched), "{launched} launches in {minutes} minute(s)");
    assert_eq!(app.rows("captures").await, 20);
    let refused = app.audit_entries("trigger.refused").await;
    assert!((1..=minutes).contains(&refused.len()), "one entry a minute, not one per capture: {refused:?}");
    assert_eq!(refused[0]["details"]["reason"], "limit");
    let counted: i64 = sqlx::query_scalar("SELECT sum(refused)::bigint FROM trigger_refusals")
        .fetch_one(&app.pool)
        .await
        .expect("refusals");
    assert_eq!(counted as usize, 20 - launched);
}

#[tokio::test]
async fn a_trigger_launches_the_version_it_names_and_one_whose_flow_is_gone_is_refused_visibly() {
    let app = TestApp::spawn().await;
    let flow = app.delay_flow("published").await;
    let publish = hookflow_shared::api::flows::Publish { note: None };
    app.api().flows().publish(&flow, &publish).await.expect("version 1");
    let gone = app.delay_flow("to delete").await;
    let hook =
        app.triggered_endpoint("versions", json!([{"flow_id": flow, "version": "latest"}, {"flow_id": gone}])).await;
    app.api().flows().delete(&gone).await.expect("delete the second flow");
    assert_eq!(app.capture(Method::POST, &hook, "{}").await.status, 200);
    let executions = app.wait_executions(&flow, 1, Duration::from_secs(10)).await;
    app.triggers_settled(Duration::from_secs(10)).await;
    assert_eq!(executions[0]["flow_version"], 1, "the published version");
    let refused = app.audit_entries("trigger.refused").await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["details"]["reason"], "launch");
    assert_eq!(refused[0]["details"]["flow_id"], gone.as_str());
    assert!(refused[0]["details"]["message"].as_str().expect("message").contains("flow not found"), "{refused:?}");
}
