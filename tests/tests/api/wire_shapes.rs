//! The wire spelling of the main resources, pinned in one place: each answer is read as raw JSON (not through the
//! typed client, which would hide a renamed field behind serde), its generated values (ids, timestamps, secrets)
//! replaced by placeholders, and compared (fields sorted by name) with a snapshot in `snapshots/`. A renamed, added
//! or removed field fails here, once, with a diff; the other tests go through the typed client.

use hookflow_shared::api::flows::Publish;
use hookflow_tests::{Client, Credentials, TestApp};
use reqwest::Method;
use serde_json::{Value, json};

/// Replaces generated values (ids, timestamps, secrets, URLs with ports) by `[name]`, at any depth.
fn redacted(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(fields) => {
                for (name, field) in fields.iter_mut() {
                    let generated = name == "id"
                        || name.ends_with("_id")
                        || name.ends_with("_at")
                        || ["capture_url", "key", "prefix", "job_token", "duration_ms"].contains(&name.as_str());
                    if generated && !field.is_null() {
                        *field = json!(format!("[{name}]"));
                    } else {
                        walk(field);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

async fn raw(api: &Client, method: Method, path: &str, body: Option<Value>) -> Value {
    let mut request = api.request(method, path);
    if let Some(body) = body {
        request = request.json(&body);
    }
    redacted(api.send::<Value>(request).await.expect("a success"))
}

#[tokio::test]
async fn the_main_resources_keep_their_wire_spelling() {
    // Fields are compared by name, sorted: the snapshots pin spelling, not order (answers keep their structs'
    // order, and definitions their author's: `flows::definitions_keep_their_authors_key_order` pins that).
    let mut settings = insta::Settings::clone_current();
    settings.set_sort_maps(true);
    let _sorted = settings.bind_to_scope();
    let app = TestApp::spawn().await;
    let api = app.api();

    let webhook = raw(&api, Method::POST, "/webhooks", Some(json!({"name": "GitHub"}))).await;
    insta::assert_json_snapshot!("webhook", webhook);

    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let flow = raw(
        &api,
        Method::POST,
        "/flows",
        Some(json!({"name": "checkout", "tags": ["smoke"], "definition": definition})),
    )
    .await;
    insta::assert_json_snapshot!("flow", flow);
    let flow_id = api.flows().list(&[]).await.expect("flows").items[0].id;
    api.flows().publish(flow_id, &Publish { note: Some("first".parse().expect("a note")) }).await.expect("publish");
    let versions = raw(&api, Method::GET, &format!("/flows/{flow_id}/versions"), None).await;
    insta::assert_json_snapshot!("flow_versions", versions);

    let execution =
        raw(&api, Method::POST, &format!("/flows/{flow_id}/launch"), Some(json!({"variables": {"a": "b"}}))).await;
    insta::assert_json_snapshot!("execution", execution);

    let key = raw(&api, Method::POST, "/api-keys", Some(json!({"name": "ci", "preset": "ci"}))).await;
    insta::assert_json_snapshot!("created_api_key", key);

    let collection = raw(
        &api,
        Method::POST,
        "/collections",
        Some(json!({"name": "Orders", "variables": {"base_url": "https://api.example.com"}})),
    )
    .await;
    insta::assert_json_snapshot!("collection", collection);

    let organization = raw(&api, Method::GET, "/organization", None).await;
    insta::assert_json_snapshot!("organization", organization);
}

#[tokio::test]
async fn the_error_body_keeps_its_wire_spelling() {
    let app = TestApp::spawn().await;
    let refused = app.api_with(Credentials::None).flows().list(&[]).await.expect_err("anonymous");
    let text = refused.as_refused().expect("a refusal").text.clone();
    let body = redacted(serde_json::from_str(&text).expect("a JSON error body"));
    insta::assert_json_snapshot!("error_body", body);
}
