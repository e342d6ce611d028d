//! Regression tests of where secrets may go: launch variables are values (a `flows:execute` key cannot read a
//! secret through them, nor send one to a host it chooses), secrets list the hosts they may go to and can be kept
//! from ephemeral runs, assertions cannot be used as oracles, every rendering of a secret is masked before results
//! are cut, and a key never outlives the key that made it.

use base64::Engine as _;
use hookflow_shared::api::executions::Execution;
use hookflow_shared::api::resources::SecretInfo;
use hookflow_shared::{ErrorBody, ScopeSet};
use hookflow_tests::TestApp;
use hookflow_tests::exec::scoped;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};

const PROD: &str = "prod-db-Pa55word";

#[tokio::test]
async fn an_execute_key_cannot_read_a_secret_through_launch_variables() {
    let app = TestApp::spawn().await;
    app.put::<SecretInfo>("/secrets/PROD_DB_PASSWORD", &json!({"value": PROD}), 200).await;
    let flow = app.delay_flow("plain").await;
    let ci = scoped(&app, app.admin.org, &["flows:execute"]).await;
    let launch = json!({"mode": "ephemeral", "variables": {"x": "{{secret.PROD_DB_PASSWORD}}"}});
    let reply = app.call(Method::POST, &format!("/flows/{flow}/launch"), Some(&ci), Some(launch)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert!(!reply.text.contains(PROD), "the claim carries the secret: {}", reply.text);
    let execution: Execution = serde_json::from_value(reply.body).expect("execution");
    let job = execution.job.expect("the ephemeral claim");
    assert!(job.secrets.0.is_empty(), "no secret is resolved for a launch variable: {:?}", job.secrets);
    assert_eq!(job.layers.expect("layers").launch["x"], "{{secret.PROD_DB_PASSWORD}}", "kept as a plain value");
}

fn authorized_get(url: &str) -> Value {
    json!({"nodes": [{"id": "call", "kind": "request",
        "request": {"method": "GET", "url": url, "headers": {"authorization": "Bearer {{secret.TOKEN}}"}}}]})
}

#[tokio::test]
async fn a_launch_cannot_send_a_secret_to_a_host_it_chose_unless_the_secret_allows_it() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let trusted = Target::spawn().await;
    let chosen = Target::spawn_on("127.0.0.2:0").await;
    app.put::<SecretInfo>("/secrets/TOKEN", &json!({"value": "tok-9f8e7d"}), 200).await;
    let flow = app.create_flow("calls", authorized_get("{{base_url}}/echo")).await;
    let env = json!({"variables": {"base_url": trusted.base}});
    app.put::<Value>(&format!("/flows/{flow}/environments/prod"), &env, 200).await;
    let run = |variables: Value| {
        let app = &app;
        let flow = flow.clone();
        async move {
            let body = json!({"environment": "prod", "variables": variables});
            let id = app.launch(&flow, body).await["id"].as_str().expect("id").to_owned();
            let done = app.wait_finished(&flow, &id).await;
            let nodes = app.get::<Value>(&format!("/flows/{flow}/executions/{id}/nodes"), 200).await;
            (done, nodes["items"][0]["error"].as_str().unwrap_or_default().to_owned())
        }
    };
    let (fine, _) = run(json!({})).await;
    assert_eq!(fine["status"], "succeeded", "{fine}");
    let (redirected, error) = run(json!({"base_url": chosen.base})).await;
    assert_eq!(redirected["status"], "failed", "{redirected}");
    assert!(error.contains("secret `TOKEN`") && error.contains("a launch variable chose"), "{error}");
    assert_eq!(chosen.hits(), 0, "the launch-chosen host never received the secret");
    // The secret lists the host: now a launch may point there, and nowhere else.
    let rules = json!({"value": "tok-9f8e7d", "allowed_hosts": ["127.0.0.2", "*.example.com"]});
    let info: SecretInfo = app.put("/secrets/TOKEN", &rules, 200).await;
    assert_eq!(info.allowed_hosts, ["127.0.0.2", "*.example.com"]);
    let (allowed, _) = run(json!({"base_url": chosen.base})).await;
    assert_eq!(allowed["status"], "succeeded", "{allowed}");
    assert_eq!(chosen.hits(), 1);
    let (elsewhere, error) = run(json!({})).await;
    assert_eq!(elsewhere["status"], "failed", "127.0.0.1 is not among the hosts: {elsewhere}");
    assert!(error.contains("not among its allowed hosts"), "{error}");
}

#[tokio::test]
async fn a_secret_kept_for_runners_is_not_in_ephemeral_claims() {
    let app = TestApp::spawn_for_execution().await;
    app.put::<SecretInfo>("/secrets/DEPLOY", &json!({"value": "dep-1a2b3c", "runners_only": true}), 200).await;
    let flow = app.create_flow("deploys", authorized_get("http://127.0.0.1:9/{{secret.DEPLOY}}")).await;
    let launched = app.launch(&flow, json!({"mode": "ephemeral"})).await;
    let job = &launched["job"];
    assert_eq!(job["secrets"], json!({}), "{job}");
    assert_eq!(job["withheld_secrets"], json!(["DEPLOY"]));
    assert!(!launched.to_string().contains("dep-1a2b3c"));
    // A registered runner claims it with the secret.
    let queued = app.launch(&flow, json!({})).await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let claimed = app.next_job(&creds, &runner, 5).await.body;
    assert_eq!(claimed["execution_id"], queued["id"]);
    assert_eq!(claimed["secrets"]["DEPLOY"], "dep-1a2b3c");
}

#[tokio::test]
async fn every_rendering_of_a_secret_is_masked_before_results_are_cut() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let target = Target::spawn().await;
    const PIN: &str = "987654";
    const WORD: &str = "Zq/w0rd-4x";
    app.put::<SecretInfo>("/secrets/PIN", &json!({"value": PIN}), 200).await;
    app.put::<SecretInfo>("/secrets/WORD", &json!({"value": WORD}), 200).await;
    let base = &target.base;
    let definition = json!({"nodes": [
        {"id": "pin", "kind": "request", "request": {"method": "GET", "url": format!("{base}/encodings"),
            "query": {"v": "{{secret.PIN}}"}},
         "extractors": [{"name": "number", "kind": "jsonPath", "expression": "$.number"}]},
        {"id": "word", "kind": "request", "request": {"method": "GET", "url": format!("{base}/encodings"),
            "query": {"v": "{{secret.WORD}}"}},
         "extractors": [{"name": "whole", "kind": "body"}]},
        {"id": "cut", "kind": "request", "request": {"method": "GET", "url": format!("{base}/large"),
            "query": {"bytes": "65533", "tail": "{{secret.WORD}}"}}}]});
    let (execution, nodes) = app.run_as(&app.admin, definition, json!({})).await;
    assert_eq!(execution["status"], "succeeded", "{execution}");
    assert_eq!(nodes["items"][0]["extracted"]["number"], "***", "a numeric secret is masked as a number too");
    let word = &nodes["items"][1];
    let stored = nodes.to_string();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("user:{WORD}"));
    let escaped: String = WORD.chars().map(|c| format!("\\u{:04x}", u32::from(c))).collect();
    let percent: String = WORD.bytes().map(|b| format!("%{b:02x}")).collect();
    for form in [WORD.to_owned(), PIN.to_owned(), hex::encode(WORD), basic, escaped, percent, WORD.replace('/', "\\/")]
    {
        assert!(!stored.contains(&form), "{form} shows in {stored}");
    }
    let header_names: Vec<&String> = word["response"]["headers"].as_object().expect("headers").keys().collect();
    assert!(header_names.iter().all(|n| !n.to_lowercase().contains(&WORD.to_lowercase())), "{header_names:?}");
    let cut = nodes["items"][2]["response"]["body"].as_str().expect("body");
    assert!(cut.ends_with("***") && !cut.contains("Zq"), "masked whole before the 64 KiB cut: {}", &cut[65500..]);
}

#[tokio::test]
async fn conditions_and_assertions_cannot_probe_a_secret() {
    let app = TestApp::spawn().await;
    let definition = json!({"variables": {"pw": "{{secret.P}}"}, "nodes": [
        {"id": "copy", "kind": "set_variables", "variables": {"copy": "{{pw}}"}},
        {"id": "guess", "kind": "delay", "delay_ms": 1,
         "condition": {"source": "copy", "operator": "startsWith", "expected": "a"}},
        {"id": "direct", "kind": "delay", "delay_ms": 1,
         "condition": {"source": "pw", "operator": "matches", "expected": "^a"}},
        {"id": "fine", "kind": "delay", "delay_ms": 1, "condition": {"source": "pw", "operator": "exists"}}]});
    let refused: ErrorBody = app.post("/flows", &json!({"name": "oracle", "definition": definition}), 400).await;
    let message = refused.error.message;
    assert!(message.contains("node `guess` condition.source") && message.contains("node `direct`"), "{message}");
    assert!(!message.contains("node `fine`"), "exists may look: {message}");
}

#[tokio::test]
async fn a_key_never_outlives_the_key_that_made_it() {
    let app = TestApp::spawn().await;
    let expires = chrono::Utc::now() + chrono::Duration::days(2);
    let maker = app.key(app.admin.org, ScopeSet::parse(["keys:write", "keys:read"]).expect("scopes"), Some(expires));
    let maker = hookflow_tests::Creds { key: maker.await, org: app.admin.org };
    let create = |body: Value| {
        let app = &app;
        let maker = maker.clone();
        async move { app.call(Method::POST, "/api-keys", Some(&maker), Some(body)).await }
    };
    let inherited = create(json!({"name": "child", "scopes": ["keys:read"]})).await;
    assert_eq!(inherited.status, 201, "{}", inherited.text);
    let child_expiry: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(inherited.body["expires_at"].clone()).expect("an expiry");
    assert!((child_expiry - expires).num_seconds().abs() <= 1, "it expires with its maker: {child_expiry}");
    let later = (expires + chrono::Duration::days(1)).to_rfc3339();
    let refused = create(json!({"name": "longer", "scopes": ["keys:read"], "expires_at": later})).await;
    assert_eq!((refused.status.as_u16(), refused.code()), (400, "invalid_request"), "{}", refused.text);
    assert!(refused.text.contains("expiry"));
}
