//! Webhook nodes end to end: a flow creates a payment at a fake provider (an HTTP service in the test that sends a
//! Stripe-signed webhook after a delay), waits for the provider's webhook (on an endpoint that verifies it, or on
//! the execution's own capture URL), asserts on its body and verdict; the same flow fails with `timeout` when the
//! webhook never comes, and says what it saw when the wrong one comes. Runs on the server's embedded runner.

use hookflow_tests::TestApp;
use hookflow_tests::provider::{Behaviour, Provider, ProviderOptions};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const SECRET: &str = "whsec_fake_provider";

/// A server whose embedded runner may reach the provider on 127.0.0.1.
async fn app() -> TestApp {
    TestApp::spawn_with_embedded_runner_of(8, 1.0, Duration::from_secs(120), |settings| {
        settings.allow_private_targets = true;
    })
    .await
}

/// An endpoint verifying the provider's Stripe signatures; answers its id and capture URL.
async fn stripe_endpoint(app: &TestApp) -> (String, String) {
    let verification = json!({"scheme": "stripe", "secrets": [SECRET], "mode": "record"});
    let created = app.create_webhook(json!({"name": "payments", "verification": verification})).await;
    (created["id"].as_str().expect("id").to_owned(), created["capture_url"].as_str().expect("url").to_owned())
}

/// Create a payment, then wait (on `webhook_id`, or on the execution's own URL when `None`) for its webhook.
pub fn payment_flow(provider: &str, webhook_id: Option<&str>, timeout_ms: u64) -> Value {
    let mut create = json!({"method": "POST", "url": format!("{provider}/payments"),
        "headers": {"content-type": "application/json"}, "body": "{\"amount\": 42}"});
    let mut wait = json!({"q": "body.$.data.id:{{payment_id}} header.stripe-signature:*", "timeout_ms": timeout_ms});
    match webhook_id {
        Some(id) => {
            wait["webhook_id"] = json!(id);
            wait["signature"] = json!("valid");
        }
        None => {
            create["body"] = json!("{\"amount\": 42, \"callback_url\": \"{{execution.capture_url}}\"}");
        }
    }
    json!({"timeout_s": 60, "nodes": [
        {"id": "create", "kind": "request", "request": create,
         "extractors": [{"name": "payment_id", "kind": "jsonPath", "expression": "$.id"}],
         "assertions": [{"source": "payment_id", "operator": "exists"}]},
        {"id": "paid", "kind": "webhook", "webhook": wait,
         "extractors": [{"name": "event", "kind": "jsonPath", "expression": "$.type"},
                        {"name": "paid_id", "kind": "jsonPath", "expression": "$.data.id"},
                        {"name": "verdict", "kind": "signature"},
                        {"name": "method", "kind": "statusCode"}],
         "assertions": [{"source": "event", "operator": "equals", "expected": "payment.succeeded"},
                        {"source": "method", "operator": "equals", "expected": "POST"}]}
    ]})
}

/// Runs `definition` once; answers the finished execution and its node results.
async fn run(app: &TestApp, definition: Value) -> (Value, Value) {
    let flow = app.create_flow(&format!("pay-{}", uuid::Uuid::now_v7()), definition).await;
    let id = app.launch(&flow, json!({})).await["id"].as_str().expect("id").to_owned();
    let ended = app
        .wait_execution(&flow, &id, Duration::from_secs(60), |e| {
            !matches!(e["status"].as_str(), Some("queued" | "running"))
        })
        .await;
    let nodes: Value = app.get(&format!("/flows/{flow}/executions/{id}/nodes"), 200).await;
    (ended, nodes)
}

fn node<'a>(nodes: &'a Value, id: &str) -> &'a Value {
    nodes["items"].as_array().expect("items").iter().find(|n| n["node_id"] == id).expect("the node's result")
}

#[tokio::test]
async fn a_flow_waits_for_the_signed_webhook_its_payment_causes() {
    let app = app().await;
    let (webhook_id, capture_url) = stripe_endpoint(&app).await;
    let provider = Provider::spawn(ProviderOptions { endpoint: Some(capture_url), ..Default::default() }).await;
    let mut definition = payment_flow(&provider.url, Some(&webhook_id), 20_000);
    definition["nodes"][1]["assertions"]
        .as_array_mut()
        .expect("assertions")
        .push(json!({"source": "verdict", "operator": "equals", "expected": "valid"}));
    let (execution, nodes) = run(&app, definition).await;
    assert_eq!(execution["status"], "succeeded", "{execution} {nodes}");
    let paid = node(&nodes, "paid");
    let created = node(&nodes, "create");
    assert_eq!(paid["extracted"]["paid_id"], created["extracted"]["payment_id"], "the same payment: {paid}");
    assert_eq!(paid["extracted"]["verdict"], "valid");
    let capture = &paid["capture"];
    assert_eq!(capture["webhook_id"], webhook_id.as_str());
    assert_eq!(capture["method"], "POST");
    assert_eq!(capture["signature"]["verdict"], "valid");
    assert!(
        capture["headers"]
            .as_array()
            .expect("headers")
            .iter()
            .any(|h| h[0].as_str().is_some_and(|n| n.eq_ignore_ascii_case("stripe-signature"))),
        "{capture}"
    );
    let body: Value = serde_json::from_str(capture["body"].as_str().expect("body")).expect("JSON body");
    assert_eq!(body["type"], "payment.succeeded");
}

#[tokio::test]
async fn a_flow_hands_its_own_capture_url_to_the_api_under_test() {
    let app = app().await;
    let provider = Provider::spawn(ProviderOptions::default()).await;
    let definition = payment_flow(&provider.url, None, 20_000);
    let flow = app.create_flow("own-url", definition).await;
    let id = app.launch(&flow, json!({})).await["id"].as_str().expect("id").to_owned();
    let ended = app.wait_finished(&flow, &id).await;
    let nodes: Value = app.get(&format!("/flows/{flow}/executions/{id}/nodes"), 200).await;
    assert_eq!(ended["status"], "succeeded", "{ended} {nodes}");
    let capture = &node(&nodes, "paid")["capture"];
    assert_eq!(capture["webhook_id"], Value::Null);
    assert_eq!(capture["execution_id"], id.as_str());
    assert_eq!(capture["signature"]["verdict"], "unverified");

    // The execution's captures are listed under it, as the contract says.
    let listed: Value = app.get(&format!("/flows/{flow}/executions/{id}/captures"), 200).await;
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{listed}");
    assert_eq!(items[0]["id"], capture["id"]);
    assert_eq!((items[0]["webhook_id"].clone(), items[0]["execution_id"].clone()), (Value::Null, json!(id)));

    // The URL is unguessable: the execution's id alone is no capture URL, and a changed token is unknown.
    let sent = node(&nodes, "create")["request"]["body"].as_str().expect("sent body").to_owned();
    let url = serde_json::from_str::<Value>(&sent).expect("json")["callback_url"].as_str().expect("url").to_owned();
    assert!(url.starts_with(&format!("{}/webhook/", app.base)), "same origin and path as endpoints: {url}");
    assert!(!url.contains(&id), "the URL does not spell the execution id: {url}");
    let by_id = app.client.post(app.url(&format!("/webhook/{id}"))).body("x").send().await.expect("send");
    assert_eq!(by_id.status(), 404);
    let mut forged = url.clone().into_bytes();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).expect("ascii");
    assert_eq!(app.client.post(&forged).body("x").send().await.expect("send").status(), 404);
    // The real one answers like any capture URL while the execution is young, and its captures stay its own.
    let late = app.client.post(&url).body("late").send().await.expect("send");
    assert_eq!(late.status(), 200);
    let receipt: Value = late.json().await.expect("receipt");
    assert_eq!(receipt["message"], "Request captured");
    let listed: Value = app.get(&format!("/flows/{flow}/executions/{id}/captures"), 200).await;
    assert_eq!(listed["items"].as_array().expect("items").len(), 2);
}

#[tokio::test]
async fn a_webhook_that_never_comes_fails_the_node_with_timeout_in_the_stated_time() {
    let app = app().await;
    let (webhook_id, capture_url) = stripe_endpoint(&app).await;
    let options = ProviderOptions { behaviour: Behaviour::Never, endpoint: Some(capture_url), ..Default::default() };
    let provider = Provider::spawn(options).await;
    let started = Instant::now();
    let (execution, nodes) = run(&app, payment_flow(&provider.url, Some(&webhook_id), 1_500)).await;
    let took = started.elapsed();
    assert_eq!(execution["status"], "failed", "{execution}");
    let paid = node(&nodes, "paid");
    assert_eq!(paid["status"], "failed");
    let error = paid["error"].as_str().expect("error");
    assert!(error.starts_with("timeout"), "{error}");
    assert!(error.contains("0 captures arrived"), "{error}");
    let waited = paid["duration_ms"].as_u64().expect("duration");
    assert!((1_500..6_000).contains(&waited), "the node waited its 1.5 s, not much more: {waited} ms");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert_eq!(provider.sent(), 0);
}

#[tokio::test]
async fn the_wrong_webhook_fails_the_node_saying_what_it_saw() {
    let app = app().await;
    let (webhook_id, capture_url) = stripe_endpoint(&app).await;
    let options = ProviderOptions {
        behaviour: Behaviour::WrongId,
        endpoint: Some(capture_url),
        delay: Duration::from_millis(50),
        ..Default::default()
    };
    let provider = Provider::spawn(options).await;
    let (execution, nodes) = run(&app, payment_flow(&provider.url, Some(&webhook_id), 2_500)).await;
    assert_eq!(execution["status"], "failed", "{execution}");
    let error = node(&nodes, "paid")["error"].as_str().expect("error").to_owned();
    assert!(error.starts_with("timeout"), "{error}");
    assert!(error.contains("1 capture arrived at endpoint"), "{error}");
    assert!(error.contains("does not match `body.$.data.id:pay_1_"), "{error}");
    assert!(error.contains("it has `pay_other` there"), "{error}");
    assert_eq!(provider.sent(), 1);
}

#[tokio::test]
async fn a_webhook_that_arrives_before_the_node_starts_counts_and_each_capture_serves_one_node() {
    let app = app().await;
    let webhook = app.create_webhook(json!({"name": "early"})).await;
    let (webhook_id, capture_url) = (webhook["id"].as_str().expect("id"), webhook["capture_url"].as_str().expect("u"));
    // Two nodes wait for the same kind of capture; a delay node before them lets both captures arrive first.
    let wait = |id: &str| {
        json!({"id": id, "kind": "webhook", "webhook": {"webhook_id": webhook_id, "q": "header.x-order:*",
            "timeout_ms": 10_000},
            "extractors": [{"name": format!("{id}_order"), "kind": "header", "header": "x-order"}]})
    };
    let definition =
        json!({"nodes": [{"id": "pause", "kind": "delay", "delay_ms": 1_500}, wait("first"), wait("second")]});
    let flow = app.create_flow("early", definition).await;
    let id = app.launch(&flow, json!({})).await["id"].as_str().expect("id").to_owned();
    // A capture from before the launch never counts.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for order in ["1", "2"] {
        let sent = app.client.post(capture_url).header("x-order", order).body("{}").send().await.expect("send");
        assert_eq!(sent.status(), 200);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ended = app.wait_finished(&flow, &id).await;
    let nodes: Value = app.get(&format!("/flows/{flow}/executions/{id}/nodes"), 200).await;
    assert_eq!(ended["status"], "succeeded", "{ended} {nodes}");
    assert_eq!(node(&nodes, "first")["extracted"]["first_order"], "1", "earliest first");
    assert_eq!(node(&nodes, "second")["extracted"]["second_order"], "2", "each capture taken once");
}

#[tokio::test]
async fn a_capture_from_before_the_launch_does_not_count() {
    let app = app().await;
    let webhook = app.create_webhook(json!({"name": "old"})).await;
    let (webhook_id, capture_url) = (webhook["id"].as_str().expect("id"), webhook["capture_url"].as_str().expect("u"));
    assert_eq!(app.client.post(capture_url).body("{}").send().await.expect("send").status(), 200);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let definition = json!({"nodes": [{"id": "w", "kind": "webhook",
        "webhook": {"webhook_id": webhook_id, "timeout_ms": 1_000}}]});
    let (execution, nodes) = run(&app, definition).await;
    assert_eq!(execution["status"], "failed");
    let error = node(&nodes, "w")["error"].as_str().expect("error");
    assert!(error.contains("0 captures arrived"), "{error}");
}

#[tokio::test]
async fn another_organizations_endpoint_cannot_be_waited_on() {
    let app = app().await;
    let stranger = app.new_org("stranger").await;
    let endpoint = hookflow_shared::api::webhooks::CreateWebhook::new("theirs".parse().expect("a name"));
    let theirs = app.api_as(&stranger).webhooks().create(&endpoint).await.expect("their endpoint");
    let definition = json!({"nodes": [{"id": "w", "kind": "webhook",
        "webhook": {"webhook_id": theirs.id, "timeout_ms": 5_000}}]});
    let started = Instant::now();
    let (execution, nodes) = run(&app, definition).await;
    assert_eq!(execution["status"], "failed", "{execution}");
    let result = node(&nodes, "w");
    assert_eq!(result["status"], "error");
    assert!(result["error"].as_str().expect("error").contains("404"), "{result}");
    assert!(started.elapsed() < Duration::from_secs(5), "refused at once, not after the wait");
}

#[tokio::test]
async fn definitions_with_a_bad_webhook_node_are_refused_where_they_are_wrong() {
    let app = TestApp::spawn().await;
    let cases = [
        (
            json!({"timeout_s": 5, "nodes": [{"id": "w", "kind": "webhook", "webhook": {"timeout_ms": 6_000}}]}),
            "webhook.timeout_ms",
        ),
        (json!({"nodes": [{"id": "w", "kind": "webhook", "webhook": {"q": "body:{{unclosed"}}]}), "webhook.q"),
        (json!({"nodes": [{"id": "w", "kind": "webhook", "webhook": {"signature": "invalid"}}]}), "webhook.signature"),
        (
            json!({"nodes": [{"id": "r", "kind": "request", "request": {"method": "GET", "url": "http://x.test"},
            "extractors": [{"name": "v", "kind": "signature"}]}]}),
            "extractors",
        ),
    ];
    for (definition, field) in cases {
        let reply: Value = app.post("/flows/validate", &json!({"definition": definition}), 200).await;
        let problems = reply["problems"].as_array().expect("problems");
        assert!(problems.iter().any(|p| p["field"].as_str().is_some_and(|f| f.contains(field))), "{field}: {reply}");
    }
    // The example the docs point to is a valid flow.
    let example: Value =
        serde_json::from_str(include_str!("../../../docs/examples/webhook-end-to-end.json")).expect("json");
    let reply: Value = app.post("/flows/validate", &json!({"definition": example["definition"]}), 200).await;
    assert_eq!(reply["valid"], true, "{reply}");
    let catalog: Value = app.get("/special-nodes", 200).await;
    assert!(catalog["items"].as_array().expect("items").iter().any(|k| k["kind"] == "webhook"), "{catalog}");
    let extractors: Value = app.get("/extractors", 200).await;
    assert!(extractors["items"].as_array().expect("items").iter().any(|k| k["kind"] == "signature"));
}

#[tokio::test]
async fn a_hundred_executions_wait_at_once_and_each_gets_its_own_capture_while_the_api_answers() {
    let app = TestApp::spawn_with_embedded_runner_of(256, 1.0, Duration::from_secs(120), |_| {}).await;
    let webhook = app.create_webhook(json!({"name": "many"})).await;
    let (webhook_id, capture_url) = (webhook["id"].as_str().expect("id"), webhook["capture_url"].as_str().expect("u"));
    let definition = json!({"nodes": [{"id": "w", "kind": "webhook",
        "webhook": {"webhook_id": webhook_id, "q": "header.x-run:{{run}}", "timeout_ms": 60_000},
        "extractors": [{"name": "got", "kind": "jsonPath", "expression": "$.run"}]}]});
    let flow = app.create_flow("many", definition).await;
    let mut ids = Vec::new();
    for run in 0..100 {
        ids.push(
            app.launch(&flow, json!({"variables": {"run": run.to_string()}})).await["id"]
                .as_str()
                .expect("id")
                .to_owned(),
        );
    }
    // Every execution is claimed and waiting before a capture is sent.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page: Value = app.get(&format!("/flows/{flow}/executions?limit=100"), 200).await;
        let running = page["items"].as_array().expect("items").iter().filter(|e| e["status"] == "running").count();
        if running == 100 {
            break;
        }
        assert!(Instant::now() < deadline, "only {running} of 100 running");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let send = async {
        for run in (0..100).rev() {
            let body = json!({"run": run.to_string()}).to_string();
            let sent = app.client.post(capture_url).header("x-run", run.to_string()).body(body).send().await;
            assert_eq!(sent.expect("send").status(), 200);
        }
    };
    let probe = async {
        let mut latencies = Vec::new();
        for _ in 0..40 {
            let started = Instant::now();
            let _: Value = app.get(&format!("/flows/{flow}/executions?limit=20"), 200).await;
            latencies.push(started.elapsed());
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        latencies
    };
    let ((), mut latencies) = tokio::join!(send, probe);
    latencies.sort();
    let p95 = latencies[latencies.len() * 95 / 100];
    assert!(p95 < Duration::from_secs(1), "the API kept answering: p95 {p95:?}");
    for (run, id) in ids.iter().enumerate() {
        let ended = app.wait_finished(&flow, id).await;
        assert_eq!(ended["status"], "succeeded", "{ended}");
        let nodes: Value = app.get(&format!("/flows/{flow}/executions/{id}/nodes"), 200).await;
        assert_eq!(nodes["items"][0]["extracted"]["got"], run.to_string(), "run {run} got its own capture");
    }
}

#[tokio::test]
async fn what_an_unsigned_capture_says_cannot_choose_where_a_secret_goes() {
    let app = app().await;
    let secret = hookflow_shared::api::resources::PutSecret {
        value: "psp-s3cret".parse().expect("a value"),
        allowed_hosts: vec![],
        runners_only: false,
    };
    app.api().secrets().put("PSP", &secret).await.expect("put the secret");
    let target = hookflow_tests::target::Target::spawn().await;
    // The flow reads a URL from the webhook and calls it with its secret: a stranger's webhook must not steer it.
    let definition = json!({"nodes": [
        {"id": "hook", "kind": "webhook", "webhook": {"timeout_ms": 20_000},
         "extractors": [{"name": "receipt", "kind": "jsonPath", "expression": "$.receipt_url"}]},
        {"id": "fetch", "kind": "request", "request": {"method": "GET", "url": "{{receipt}}",
            "headers": {"authorization": "Bearer {{secret.PSP}}"}}}]});
    let flow = app.create_flow("steered", definition).await;
    let id = app.launch(&flow, json!({})).await["id"].as_str().expect("id").to_owned();
    let url = loop {
        let listed: Value = app.get(&format!("/flows/{flow}/executions/{id}"), 200).await;
        if listed["status"] == "running" {
            break hookflow_tests::exec::execution_capture_url(&app, &id);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let body = json!({"receipt_url": format!("{}/orders", target.base)}).to_string();
    assert_eq!(app.client.post(&url).body(body).send().await.expect("send").status(), 200);
    let ended = app.wait_finished(&flow, &id).await;
    let nodes: Value = app.get(&format!("/flows/{flow}/executions/{id}/nodes"), 200).await;
    assert_eq!(ended["status"], "failed", "{ended}");
    let error = node(&nodes, "fetch")["error"].as_str().expect("error").to_owned();
    assert!(error.contains("secret `PSP`"), "{error}");
    assert_eq!(target.hits(), 0, "the secret was never sent");
}
