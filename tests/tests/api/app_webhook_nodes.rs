//! Webhooks inside flows in the app, in a real browser against the server's embedded runner: a flow's webhook
//! nodes described on its page; the execution page showing what each waited for and what arrived (a signed
//! capture the test posts to an endpoint, and one to the execution's own URL, listed under the execution), the
//! timeout's error, and the capture's own page one click away.

use hookflow_shared::{ExecutionId, Role};
use hookflow_tests::TestApp;
use hookflow_tests::browser::Browser;
use hookflow_tests::signers::{Sign, stripe};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const SECRET: &str = "whsec_app_test";

/// A server with its embedded runner.
pub async fn app() -> TestApp {
    TestApp::spawn_with_embedded_runner_of(4, 1.0, Duration::from_secs(120), |_| {}).await
}

/// The own capture URL of the execution whose page the browser shows, as the server makes it.
pub async fn own_capture_url(app: &TestApp, browser: &Browser) -> String {
    let url = browser.client.current_url().await.expect("url");
    let execution = url.fragment().and_then(|f| f.rsplit('/').next()).expect("an execution page");
    let id: ExecutionId = execution.parse().expect("an execution id");
    hookflow_control_plane::capture::sinks::capture_url(&app.base, &app.master_key(), id)
}

/// Posts `body` to `url` signed as Stripe signs, with `extra` headers; answers the capture's id.
pub async fn send_signed(url: &str, body: &str, extra: &[(&str, &str)]) -> String {
    let signed = stripe(Sign { secret: SECRET, body: body.as_bytes(), timestamp: chrono::Utc::now().timestamp(), url });
    let mut request = reqwest::Client::new().request(Method::POST, url).body(signed.body);
    for (name, value) in signed.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).chain(extra.iter().copied()) {
        request = request.header(name, value);
    }
    let reply = request.send().await.expect("capture");
    assert_eq!(reply.status(), 200);
    let receipt: Value = reply.json().await.expect("receipt");
    receipt["request_id"].as_str().expect("id").to_owned()
}

/// An endpoint named `name` that verifies Stripe signatures with [`SECRET`]; answers its id and capture URL.
pub async fn stripe_endpoint(app: &TestApp, name: &str) -> (String, String) {
    let verification = json!({"scheme": "stripe", "secrets": [SECRET], "mode": "record"});
    let created = app.create_webhook(json!({"name": name, "verification": verification})).await;
    (created["id"].as_str().expect("id").to_owned(), created["capture_url"].as_str().expect("url").to_owned())
}

/// Waits for a signed order on `webhook_id`, then for a callback on the execution's own URL, then for a callback
/// that never comes.
fn waiting_flow(webhook_id: &str) -> Value {
    json!({"timeout_s": 60, "variables": {"order": "o-42"}, "nodes": [
        {"id": "paid", "kind": "webhook",
         "webhook": {"webhook_id": webhook_id, "q": "body.$.order:{{order}}", "signature": "valid", "timeout_ms": 30000},
         "extractors": [{"name": "verdict", "kind": "signature"}],
         "assertions": [{"source": "verdict", "operator": "equals", "expected": "valid"}]},
        {"id": "called", "kind": "webhook", "webhook": {"q": "body.$.state:done", "timeout_ms": 10000}},
        {"id": "never", "kind": "webhook", "webhook": {"q": "body.$.state:never", "timeout_ms": 1500}}
    ]})
}

#[tokio::test]
async fn the_execution_page_shows_what_webhook_nodes_waited_for_and_what_arrived() {
    let app = app().await;
    let person = app.person(app.admin.org, Role::Member).await;
    let (webhook_id, capture_url) = stripe_endpoint(&app, "Payments").await;
    let flow = app.create_flow("checkout", waiting_flow(&webhook_id)).await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app.base, &person.email, &person.password).await;

    // The flow's page says what each webhook node waits for.
    browser.goto(&format!("{}/#/flows/{flow}", app.base)).await;
    let paid = browser.wait_text("section[aria-label=Nodes] li[data-node=paid]", "Payments").await;
    assert!(
        paid.contains("body.$.order:{{order}}") && paid.contains("must be valid") && paid.contains("30 s"),
        "{paid}"
    );
    let called = browser.text("section[aria-label=Nodes] li[data-node=called]").await;
    assert!(called.contains("this execution's own URL") && called.contains("10 s"), "{called}");
    let link = browser
        .run("return document.querySelector('li[data-node=paid] a.wait-place').getAttribute('href')", vec![])
        .await;
    assert_eq!(link, format!("#/webhooks/{webhook_id}"));

    // Launched, the node waits and says for what; the signed order the test sends arrives.
    browser.click_named("#launch-form", "Launch").await;
    let waiting = browser.wait_text("#execution-nodes li[data-node=paid]", "running").await;
    assert!(waiting.contains("Waits for a capture at Payments"), "{waiting}");
    let hostile = "<img src=x onerror=\"window.__pwned = 1\">";
    let body = "{\"order\": \"o-42\", \"note\": \"<script>window.__pwned = 2</script>\"}";
    let capture = send_signed(&format!("{capture_url}/stripe"), body, &[("x-note", hostile)]).await;
    let own = own_capture_url(&app, &browser).await;
    let reply = reqwest::Client::new().post(format!("{own}/done")).body("{\"state\": \"done\"}").send().await;
    assert_eq!(reply.expect("capture at the execution's URL").status(), 200);
    browser.wait_text("#execution-status", "failed").await;

    let paid = browser.text("#execution-nodes li[data-node=paid]").await;
    for shown in ["passed", "Payments", "body.$.order:{{order}}", "must be valid", "Arrived", "POST", "/stripe", "o-42"]
    {
        assert!(paid.contains(shown), "the paid node shows {shown:?}: {paid}");
    }
    let verdict =
        browser.run("return document.querySelector('li[data-node=paid] .arrived .sig').dataset.verdict", vec![]).await;
    assert_eq!(verdict, "valid");
    let called = browser.text("#execution-nodes li[data-node=called]").await;
    assert!(called.contains("this execution's own URL") && called.contains("/done"), "{called}");
    assert!(!browser.has("li[data-node=called] a.capture-link").await, "a capture of the execution's URL has no page");
    let never = browser.text("#execution-nodes li[data-node=never] .node-error").await;
    assert!(never.starts_with("timeout"), "{never}");
    assert!(browser.text("#execution-nodes li[data-node=never]").await.contains("body.$.state:never"));
    let listed = browser.wait_text("#execution-captures", "/done").await;
    assert!(listed.contains("Captures at this execution's URL"), "{listed}");
    let effects = browser
        .run(
            "return [window.__pwned === undefined, document.querySelectorAll('#root img, #root script').length]",
            vec![],
        )
        .await;
    assert_eq!(effects, json!([true, 0]), "the capture's header and body are text");
    browser.screenshot("webhook-node-1280.png").await;

    // The capture's own page, one click away.
    browser.click("li[data-node=paid] a.capture-link").await;
    let sha = browser.text("#body-sha256").await;
    assert_eq!(sha, hex::encode(<sha2::Sha256 as sha2::Digest>::digest(body)));
    let url = browser.client.current_url().await.expect("url");
    assert_eq!(url.fragment(), Some(format!("/webhooks/{webhook_id}/requests/{capture}").as_str()));
    browser.wait_text("#capture-detail", "valid").await;
    browser.close().await;
}

/// The first execution of `flow` a capture started, waited for.
async fn triggered_execution(app: &TestApp, flow: &str) -> Value {
    for _ in 0..150 {
        let page: Value = app.get(&format!("/flows/{flow}/executions"), 200).await;
        if let Some(found) = page["items"].as_array().and_then(|items| items.iter().find(|x| x["trigger"] == "webhook"))
        {
            return found.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no capture launched flow {flow}");
}

#[tokio::test]
async fn the_endpoint_page_adds_a_trigger_and_its_runs_link_both_ways() {
    let app = app().await;
    let person = app.person(app.admin.org, Role::Member).await;
    let flow = app.create_flow("on-order", json!({"nodes": [{"id": "note", "kind": "delay", "delay_ms": 1}]})).await;
    app.put::<Value>(&format!("/flows/{flow}/environments/staging"), &json!({"variables": {"base": "https://x"}}), 200)
        .await;
    app.post::<Value>(&format!("/flows/{flow}/publish"), &json!({"note": "first"}), 201).await;
    let webhook = app.webhook_named("Orders").await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app.base, &person.email, &person.password).await;
    browser.goto(&format!("{}/#/webhooks/{webhook}", app.base)).await;
    browser.wait_text("#triggers", "No triggers").await;

    // A trigger added through the form, named as a person finds its controls.
    browser.click_named("#triggers", "Edit triggers").await;
    browser.click_named("#triggers", "Add trigger").await;
    browser.choose(&browser.labelled("#triggers", "Flow").await, "on-order").await;
    browser.type_into(&browser.labelled("#triggers", "Search").await, "method:POST").await;
    browser.choose(&browser.labelled("#triggers", "Environment").await, "staging").await;
    browser.choose(&browser.labelled("#triggers", "Version").await, "latest published").await;
    browser.type_into(&browser.labelled("#triggers", "Variables").await, "team=payments").await;
    browser.type_into(&browser.labelled("#triggers", "From the body").await, "order=$.order").await;
    browser.click_named("#triggers", "Save").await;
    browser.wait_text("#trigger-table", "on-order").await;
    browser.screenshot("triggers-1280.png").await;
    let stored: Value = app.get(&format!("/webhooks/{webhook}"), 200).await;
    assert_eq!(
        stored["triggers"],
        json!([{"flow_id": flow, "q": "method:POST", "environment": "staging", "version": "latest",
                "variables": {"team": "payments"}, "extract": {"order": "$.order"}}])
    );

    // A refusal shows at the field it names, in the trigger it names.
    browser.click_named("#triggers", "Add trigger").await;
    browser.choose(&browser.labelled("#triggers", "Flow").await, "on-order").await;
    let paths = browser.labelled("#triggers", "From the body").await;
    browser.type_into(&paths, "id=$.[").await;
    browser.click_named("#triggers", "Save").await;
    let marked = browser.wait_text(&format!(".field:has({paths}) .field-error"), "JSONPath").await;
    assert!(marked.contains("triggers[1]"), "{marked}");
    let invalid = browser
        .run("return document.querySelector(arguments[0]).getAttribute('aria-invalid')", vec![json!(paths)])
        .await;
    assert_eq!(invalid, "true");
    let first = browser.labelled("#triggers fieldset:first-of-type", "From the body").await;
    assert!(!browser.has(&format!(".field:has({first}) .field-error")).await, "the first trigger is not marked");
    assert_eq!(app.get::<Value>(&format!("/webhooks/{webhook}"), 200).await["triggers"], stored["triggers"]);
    browser.run("[...document.querySelectorAll('#triggers button')].filter(b => b.textContent === 'Remove trigger').pop().click()", vec![]).await;

    // A capture launches the flow; its detail links to the run, and the run links back to it.
    let receipt = app
        .capture_with(
            Method::POST,
            &format!("{webhook}/orders"),
            &[("content-type", "application/json")],
            "{\"order\": \"o-7\"}",
        )
        .await;
    let capture = receipt.body["request_id"].as_str().expect("id").to_owned();
    let execution = triggered_execution(&app, &flow).await;
    let execution_id = execution["id"].as_str().expect("id");
    assert_eq!(execution["trigger_request"], json!({"webhook_id": webhook, "request_id": capture}));
    browser.click(&format!("#captures li[data-id='{capture}'] button")).await;
    let started = browser.wait_text("#capture-executions", execution_id).await;
    assert!(started.contains("on-order"), "{started}");
    browser.click("#capture-executions a").await;
    browser.wait_text("#execution-facts", "trigger webhook").await;
    let url = browser.client.current_url().await.expect("url");
    assert_eq!(url.fragment(), Some(format!("/flows/{flow}/executions/{execution_id}").as_str()));
    browser.screenshot("triggered-execution-1280.png").await;
    browser.click("#trigger-capture").await;
    browser.wait_text("#capture-detail", "o-7").await;
    let url = browser.client.current_url().await.expect("url");
    assert_eq!(url.fragment(), Some(format!("/webhooks/{webhook}/requests/{capture}").as_str()));
    browser.wait_text("#capture-executions", execution_id).await;
    browser.close().await;
}
