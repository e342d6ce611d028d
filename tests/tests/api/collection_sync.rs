//! OpenAPI sync over the real server (preview, apply with the user's edits kept, deprecation and deletion of
//! removed operations, idempotence, the sync record), and flows running collection requests on a real runner, with
//! deletes of referenced requests refused.

use crate::RUNNER;
use crate::collections::import;
use hookflow_tests::TestApp;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};

const V1: &str = r#"openapi: 3.0.3
info: {title: Pets, version: '1'}
servers: [{url: 'https://pets.example.com'}]
paths:
  /pets:
    get:
      tags: [pets]
      summary: List pets
      parameters:
        - {name: limit, in: query, schema: {type: integer, example: 10}}
      responses: {'200': {description: ok}}
    post:
      tags: [pets]
      summary: Add a pet
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Pet'}
      responses: {'201': {description: created}}
  /pets/{id}:
    delete:
      tags: [pets]
      summary: Remove a pet
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {'204': {description: gone}}
components:
  schemas:
    Pet:
      type: object
      properties:
        name: {type: string, example: Rex}
        kind: {type: string, example: dog}
"#;

fn v2() -> String {
    V1.replace("schema: {type: integer, example: 10}}", "schema: {type: integer, example: 20}}\n        - {name: sort, in: query, schema: {type: string, default: asc}}")
        .replace("        kind: {type: string, example: dog}", "        kind: {type: string, example: dog}\n        age: {type: integer, example: 3}")
        .replace("  /pets/{id}:\n    delete:\n      tags: [pets]\n      summary: Remove a pet", "  /pets/{petId}:\n    get:\n      tags: [pets]\n      summary: Show a pet")
        .replace("parameters: [{name: id, in: path", "parameters: [{name: petId, in: path")
        .replace("responses: {'204': {description: gone}}", "responses: {'200': {description: ok}}")
}

fn keys(list: &Value) -> Vec<String> {
    let mut keys: Vec<String> =
        list.as_array().expect("list").iter().map(|i| i["operation_key"].as_str().expect("key").to_owned()).collect();
    keys.sort();
    keys
}

fn by_key<'a>(collection: &'a Value, key: &str) -> &'a Value {
    collection["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .find(|r| r["operation_key"] == key)
        .unwrap_or_else(|| panic!("no {key}"))
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test]
async fn a_sync_previews_then_applies_changes_keeping_user_edits() {
    let app = TestApp::spawn().await;
    let imported = import(&app, json!({"source": {"document": V1}})).await;
    let id = imported["collection"]["id"].as_str().expect("id").to_owned();
    let collection = &imported["collection"];
    let (list, add) = (by_key(collection, "GET /pets"), by_key(collection, "POST /pets"));
    assert_eq!(list["query"], json!({"limit": "10"}));

    // The user edits the body's name and adds a header; the list request stays as generated.
    let mut edited = add.clone();
    edited["body"] = json!("{\n  \"name\": \"Fido\",\n  \"kind\": \"dog\"\n}");
    edited["headers"]["x-team"] = json!("payments");
    let body = json!({"name": "Add a pet", "folder": "pets", "method": "POST", "url": edited["url"], "headers": edited["headers"],
        "body": edited["body"], "operation_key": "POST /pets"});
    let put = app
        .admin(Method::PUT, &format!("/collections/{id}/requests/{}", add["id"].as_str().expect("id")), Some(body))
        .await;
    assert_eq!(put.status, 200, "{}", put.text);

    let sync = format!("/collections/{id}/openapi-sync");
    let configured = app.admin(Method::PUT, &sync, Some(json!({"source": {"document": v2()}}))).await;
    assert_eq!(
        (configured.status.as_u16(), configured.body["status"].as_str()),
        (200, Some("pending")),
        "{}",
        configured.text
    );
    let preview = app.admin(Method::POST, &format!("{sync}/preview"), None).await;
    assert_eq!(preview.status, 200, "{}", preview.text);
    assert_eq!(keys(&preview.body["added"]), ["GET /pets/{}"]);
    assert_eq!(keys(&preview.body["modified"]), ["GET /pets", "POST /pets"]);
    assert_eq!(keys(&preview.body["removed"]), ["DELETE /pets/{}"]);
    let changes = |key: &str| {
        preview.body["modified"].as_array().expect("modified").iter().find(|i| i["operation_key"] == key).expect(key)["changes"].clone()
    };
    assert_eq!(changes("GET /pets"), json!(["parameters"]));
    assert_eq!(changes("POST /pets"), json!(["body"]));
    let untouched = app.admin(Method::GET, &format!("/collections/{id}"), None).await.body;
    assert_eq!(by_key(&untouched, "GET /pets")["query"], json!({"limit": "10"}), "a preview changes nothing");

    let applied = app.admin(Method::POST, &sync, None).await;
    assert_eq!(applied.status, 200, "{}", applied.text);
    let after = app.admin(Method::GET, &format!("/collections/{id}"), None).await.body;
    assert_eq!(
        by_key(&after, "GET /pets")["query"],
        json!({"limit": "20", "sort": "asc"}),
        "unedited values follow the description"
    );
    let add = by_key(&after, "POST /pets");
    let add_body: Value = serde_json::from_str(add["body"].as_str().expect("body")).expect("json");
    assert_eq!(
        add_body,
        json!({"name": "Fido", "kind": "dog", "age": 3}),
        "the user's field stays, the new field arrives"
    );
    assert_eq!(add["headers"]["x-team"], "payments");
    let removed = by_key(&after, "DELETE /pets/{}");
    assert_eq!(removed["deprecated"], true, "removed operations are kept, deprecated");
    assert_eq!(by_key(&after, "GET /pets/{}")["url"], "{{base_url}}/pets/{{petId}}");

    // The same description again: nothing to do.
    let again = app.admin(Method::POST, &sync, None).await;
    assert_eq!(again.status, 200);
    for list in ["added", "modified", "removed"] {
        assert_eq!(again.body[list].as_array().map(Vec::len), Some(0), "{list}: {}", again.text);
    }
    let same = app.admin(Method::GET, &format!("/collections/{id}"), None).await.body;
    assert_eq!(same["requests"], after["requests"], "a second sync of the same description changes nothing");
    let described = app.admin(Method::GET, &sync, None).await.body;
    assert_eq!(described["status"], "synced");
    assert_eq!(described["history"].as_array().map(Vec::len), Some(3), "import and two syncs are recorded");
    assert_eq!(described["history"][0]["document_sha256"], described["document_sha256"]);
    assert_ne!(described["history"][0]["document_sha256"], described["history"][2]["document_sha256"]);

    // With delete_removed, the removed operation goes.
    app.admin(Method::PUT, &sync, Some(json!({"source": {"document": v2()}, "delete_removed": true}))).await;
    let deleting = app.admin(Method::POST, &sync, None).await;
    assert_eq!((deleting.status.as_u16(), deleting.body["deleted"].as_u64()), (200, Some(1)), "{}", deleting.text);
    let last = app.admin(Method::GET, &format!("/collections/{id}"), None).await.body;
    assert_eq!(last["requests"].as_array().map(Vec::len), Some(3));

    // A source that no longer parses: 400, recorded on the sync, nothing changed.
    app.admin(Method::PUT, &sync, Some(json!({"source": {"document": "openapi: 3.0.3\ninfo: ["}}))).await;
    let broken = app.admin(Method::POST, &sync, None).await;
    assert_eq!(broken.status, 400);
    let described = app.admin(Method::GET, &sync, None).await.body;
    assert_eq!(described["status"], "failed");
    assert!(described["last_error"].as_str().expect("error").contains("YAML"));
    assert_eq!(app.admin(Method::GET, &format!("/collections/{id}"), None).await.body["requests"], last["requests"]);
    let missing = app.admin(Method::GET, &format!("/collections/{}/openapi-sync", uuid::Uuid::now_v7()), None).await;
    assert_eq!(missing.status, 404);
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test]
async fn flows_run_collection_requests_and_keep_them_from_being_deleted() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let collection = app
        .admin(
            Method::POST,
            "/collections",
            Some(json!({"name": "Target", "variables": {"base_url": target.base, "user": "from-collection"}})),
        )
        .await
        .body;
    let id = collection["id"].as_str().expect("id").to_owned();
    let login = app
        .admin(Method::POST, &format!("/collections/{id}/requests"), Some(json!({"name": "Log in", "method": "POST",
            "url": "{{base_url}}/login", "headers": {"content-type": "application/json"}, "body": "{\"user\": \"{{user}}\"}"})))
        .await
        .body;
    let request_id = login["id"].as_str().expect("request id").to_owned();
    // The request id written in capitals: references are found whatever the case.
    let node = |overrides: Value| {
        json!({"nodes": [{"id": "login", "kind": "request",
        "request_ref": {"collection_id": id, "request_id": request_id.to_uppercase(), "overrides": overrides},
        "extractors": [{"name": "token", "kind": "jsonPath", "expression": "$.token"}]}]})
    };
    let flow = app.create_flow("uses a collection", node(json!({"headers": {"x-from-flow": "yes"}}))).await;
    let creds = app.runner_creds(app.admin.org).await;
    let _runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[], &[]).await;

    let (app, flow) = (&app, &flow);
    let run = |variables: Value| async move {
        let execution = app.launch(flow, json!({"variables": variables})).await;
        let id = execution["id"].as_str().expect("id").to_owned();
        let done = app.wait_finished(flow, &id).await;
        assert_eq!(done["status"], "succeeded", "{done}");
        app.admin(Method::GET, &format!("/flows/{flow}/executions/{id}/nodes"), None).await.body["items"][0].clone()
    };
    let first = run(json!({})).await;
    assert_eq!(first["request"]["url"], format!("{}/login", target.base));
    assert_eq!(first["request"]["headers"]["x-from-flow"], "yes", "overrides apply");
    assert_eq!(first["extracted"]["token"], "tok-from-collection", "collection variables are the lowest layer");
    let second = run(json!({"user": "launch"})).await;
    assert_eq!(second["extracted"]["token"], "tok-launch", "launch variables win over the collection's");

    // An edit of the request reaches the next run.
    let edited = app
        .admin(
            Method::PUT,
            &format!("/collections/{id}/requests/{request_id}"),
            Some(json!({"name": "Log in", "method": "POST",
            "url": "{{base_url}}/echo", "body": "edited"})),
        )
        .await;
    assert_eq!(edited.status, 200);
    let third = run(json!({})).await;
    assert_eq!(third["request"]["url"], format!("{}/echo", target.base));

    let refused = app.admin(Method::DELETE, &format!("/collections/{id}/requests/{request_id}"), None).await;
    assert_eq!((refused.status.as_u16(), refused.code()), (409, "conflict"));
    assert!(
        refused.body["error"]["message"].as_str().expect("message").contains("uses a collection"),
        "{}",
        refused.text
    );
    let whole = app.admin(Method::DELETE, &format!("/collections/{id}"), None).await;
    assert_eq!(whole.status, 409);

    // Writing a flow that names a request that does not exist, or another organization's, is refused.
    let dangling = json!({"nodes": [{"id": "x", "kind": "request",
        "request_ref": {"collection_id": id, "request_id": uuid::Uuid::now_v7()}}]});
    let reply = app.admin(Method::POST, "/flows", Some(json!({"name": "dangling", "definition": dangling}))).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{}", reply.text);
    let other = app.new_org("Other").await;
    let foreign = app
        .call(Method::POST, "/flows", Some(&other), Some(json!({"name": "foreign", "definition": node(Value::Null)})))
        .await;
    assert_eq!(foreign.status, 400, "{}", foreign.text);
    let bad_override = app
        .admin(Method::POST, "/flows", Some(json!({"name": "bad", "definition": node(json!({"method": "BREW"}))})))
        .await;
    assert_eq!(bad_override.status, 400);

    // Once no flow uses it, the request can go.
    assert_eq!(app.admin(Method::DELETE, &format!("/flows/{flow}"), None).await.status, 204);
    assert_eq!(app.admin(Method::DELETE, &format!("/collections/{id}/requests/{request_id}"), None).await.status, 204);
}
