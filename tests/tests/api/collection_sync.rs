//! OpenAPI sync over the real server (preview, apply with the user's edits kept, deprecation and deletion of
//! removed operations, idempotence, the sync record), and flows running collection requests on a real runner, with
//! deletes of referenced requests refused.

use crate::RUNNER;
use crate::collections::import;
use hookflow_shared::api::collections::{
    CollectionDetail, CollectionRequest, OpenApiSource, PutOpenApiSync, SyncItem, WriteCollection, WriteRequest,
};
use hookflow_shared::api::flows::WriteFlow;
use hookflow_tests::TestApp;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::target::Target;
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

fn keys(list: &[SyncItem]) -> Vec<String> {
    let mut keys: Vec<String> = list.iter().map(|i| i.operation_key.clone()).collect();
    keys.sort();
    keys
}

fn by_key<'a>(collection: &'a CollectionDetail, key: &str) -> &'a CollectionRequest {
    collection.requests.iter().find(|r| r.operation_key.as_deref() == Some(key)).unwrap_or_else(|| panic!("no {key}"))
}

fn source(document: impl Into<String>, delete_removed: bool) -> PutOpenApiSync {
    PutOpenApiSync { source: OpenApiSource { url: None, document: Some(document.into()) }, delete_removed }
}

fn query(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test]
async fn a_sync_previews_then_applies_changes_keeping_user_edits() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let imported = import(&app, json!({"source": {"document": V1}})).await;
    let collection: CollectionDetail = serde_json::from_value(imported["collection"].clone()).expect("a collection");
    let id = collection.collection.id;
    let (list, add) = (by_key(&collection, "GET /pets"), by_key(&collection, "POST /pets"));
    assert_eq!(list.query, query(&[("limit", "10")]));

    // The user edits the body's name and adds a header; the list request stays as generated.
    let mut headers = add.headers.clone();
    headers.insert("x-team".into(), "payments".into());
    let body = WriteRequest {
        name: "Add a pet".into(),
        folder: Some("pets".into()),
        method: "POST".into(),
        url: add.url.clone(),
        headers,
        body: Some("{\n  \"name\": \"Fido\",\n  \"kind\": \"dog\"\n}".into()),
        operation_key: Some("POST /pets".into()),
        ..Default::default()
    };
    api.collections().put_request(id, add.id, &body).await.expect("edit the request");

    let configured = api.collections().put_sync(id, &source(v2(), false)).await.expect("configure");
    assert_eq!(configured.status, "pending");
    let preview = api.collections().preview_sync(id).await.expect("preview");
    assert_eq!(keys(&preview.added), ["GET /pets/{}"]);
    assert_eq!(keys(&preview.modified), ["GET /pets", "POST /pets"]);
    assert_eq!(keys(&preview.removed), ["DELETE /pets/{}"]);
    let changes = |key: &str| preview.modified.iter().find(|i| i.operation_key == key).expect(key).changes.clone();
    assert_eq!(changes("GET /pets"), ["parameters"]);
    assert_eq!(changes("POST /pets"), ["body"]);
    let untouched = api.collections().get(id).await.expect("detail");
    assert_eq!(by_key(&untouched, "GET /pets").query, query(&[("limit", "10")]), "a preview changes nothing");

    api.collections().apply_sync(id).await.expect("apply");
    let after = api.collections().get(id).await.expect("detail");
    assert_eq!(
        by_key(&after, "GET /pets").query,
        query(&[("limit", "20"), ("sort", "asc")]),
        "unedited values follow the description"
    );
    let add = by_key(&after, "POST /pets");
    let add_body: Value = serde_json::from_str(add.body.as_deref().expect("body")).expect("json");
    assert_eq!(
        add_body,
        json!({"name": "Fido", "kind": "dog", "age": 3}),
        "the user's field stays, the new field arrives"
    );
    assert_eq!(add.headers["x-team"], "payments");
    let removed = by_key(&after, "DELETE /pets/{}");
    assert!(removed.deprecated, "removed operations are kept, deprecated");
    assert_eq!(by_key(&after, "GET /pets/{}").url, "{{base_url}}/pets/{{petId}}");

    // The same description again: nothing to do.
    let again = api.collections().apply_sync(id).await.expect("apply");
    for (name, list) in
        [("added", &again.diff.added), ("modified", &again.diff.modified), ("removed", &again.diff.removed)]
    {
        assert!(list.is_empty(), "{name}: {list:?}");
    }
    let same = api.collections().get(id).await.expect("detail");
    assert_eq!(same.requests, after.requests, "a second sync of the same description changes nothing");
    let described = api.collections().get_sync(id).await.expect("sync");
    assert_eq!(described.status, "synced");
    assert_eq!(described.history.len(), 3, "import and two syncs are recorded");
    assert_eq!(Some(&described.history[0].document_sha256), described.document_sha256.as_ref());
    assert_ne!(described.history[0].document_sha256, described.history[2].document_sha256);

    // With delete_removed, the removed operation goes.
    api.collections().put_sync(id, &source(v2(), true)).await.expect("configure");
    let deleting = api.collections().apply_sync(id).await.expect("apply");
    assert_eq!(deleting.deleted, 1);
    let last = api.collections().get(id).await.expect("detail");
    assert_eq!(last.requests.len(), 3);

    // A source that no longer parses: 400, recorded on the sync, nothing changed.
    api.collections().put_sync(id, &source("openapi: 3.0.3\ninfo: [", false)).await.expect("configure");
    assert_eq!(api.collections().apply_sync(id).await.expect_err("broken").status(), 400);
    let described = api.collections().get_sync(id).await.expect("sync");
    assert_eq!(described.status, "failed");
    assert!(described.last_error.as_deref().expect("error").contains("YAML"));
    assert_eq!(api.collections().get(id).await.expect("detail").requests, last.requests);
    assert_eq!(api.collections().get_sync(uuid::Uuid::now_v7()).await.expect_err("no such collection").status(), 404);
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test]
async fn flows_run_collection_requests_and_keep_them_from_being_deleted() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let api = app.api();
    let collection = WriteCollection {
        variables: query(&[("base_url", &target.base), ("user", "from-collection")]).try_into().expect("variables"),
        ..WriteCollection::new("Target".parse().expect("a name"))
    };
    let id = api.collections().create(&collection).await.expect("create").collection.id.to_string();
    let login = WriteRequest {
        name: "Log in".into(),
        method: "POST".into(),
        url: "{{base_url}}/login".into(),
        headers: query(&[("content-type", "application/json")]),
        body: Some("{\"user\": \"{{user}}\"}".into()),
        ..Default::default()
    };
    let request_id = api.collections().add_request(&id, &login).await.expect("add").id.to_string();
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
        let nodes = app.api().executions().nodes(flow, &id).await.expect("nodes");
        serde_json::to_value(&nodes.items[0]).expect("json")
    };
    let first = run(json!({})).await;
    assert_eq!(first["request"]["url"], format!("{}/login", target.base));
    assert_eq!(first["request"]["headers"]["x-from-flow"], "yes", "overrides apply");
    assert_eq!(first["extracted"]["token"], "tok-from-collection", "collection variables are the lowest layer");
    let second = run(json!({"user": "launch"})).await;
    assert_eq!(second["extracted"]["token"], "tok-launch", "launch variables win over the collection's");

    // An edit of the request reaches the next run.
    let edited = WriteRequest {
        name: "Log in".into(),
        method: "POST".into(),
        url: "{{base_url}}/echo".into(),
        body: Some("edited".into()),
        ..Default::default()
    };
    api.collections().put_request(&id, &request_id, &edited).await.expect("edit");
    let third = run(json!({})).await;
    assert_eq!(third["request"]["url"], format!("{}/echo", target.base));

    let refused = api.collections().delete_request(&id, &request_id).await.expect_err("a flow uses it");
    refused.assert_refused(409, "conflict", "uses a collection");
    assert_eq!(api.collections().delete(&id).await.expect_err("a flow uses it").status(), 409);

    // Writing a flow that names a request that does not exist, or another organization's, is refused.
    let dangling = json!({"nodes": [{"id": "x", "kind": "request",
        "request_ref": {"collection_id": id, "request_id": uuid::Uuid::now_v7()}}]});
    let flow_of = |name: &str, definition| WriteFlow::new(name.parse().expect("a name"), definition);
    let reply = api.flows().create(&flow_of("dangling", dangling)).await.expect_err("a dangling reference");
    assert_eq!((reply.status(), reply.code()), (400, "invalid_request"), "{reply}");
    let other = app.api_as(&app.new_org("Other").await);
    let foreign = other.flows().create(&flow_of("foreign", node(Value::Null))).await.expect_err("another's request");
    assert_eq!(foreign.status(), 400, "{foreign}");
    let bad_override = api.flows().create(&flow_of("bad", node(json!({"method": "BREW"})))).await;
    assert_eq!(bad_override.expect_err("a bad override").status(), 400);

    // Once no flow uses it, the request can go.
    api.flows().delete(flow).await.expect("delete the flow");
    api.collections().delete_request(&id, &request_id).await.expect("delete the request");
}
