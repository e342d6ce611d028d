//! Mocks from a collection (#51), over the real server: the Petstore description imported, given examples (inline,
//! under `examples`, by `$ref`) and mocked, answers every operation (N of N) with the example the test reads from the
//! description itself; the plain Petstore answers each operation's first 2xx status with no body; a request no rule
//! matches gets 404 `not_found`; `rules/test` agrees with the capture URL for 20 requests; and every refusal: bad
//! fields, a collection without a description, too many operations, scopes, another organization.

use crate::collections::data;
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};

/// The shipped Petstore description as JSON.
fn petstore() -> Value {
    yaml_serde::from_str(&data("petstore-3.0.yaml")).expect("the Petstore parses")
}

/// The Petstore with examples: inline on `GET /pets`, under `examples` (the first a `$ref`) on `GET /pets/{petId}`;
/// `POST /pets` keeps none.
fn petstore_with_examples() -> Value {
    let mut document = petstore();
    let pets = json!([{"id": 1, "name": "Rex \"the\" dog", "tag": "a\\b {{ c"}, {"id": 2, "name": "Tom"}]);
    document["paths"]["/pets"]["get"]["responses"]["200"]["content"]["application/json"]["example"] = pets;
    document["paths"]["/pets/{petId}"]["get"]["responses"]["200"]["content"]["application/json"]["examples"] = json!({
        "rex": {"$ref": "#/components/examples/rex"},
        "tom": {"value": [{"id": 2, "name": "Tom"}]}
    });
    document["components"]["examples"] = json!({"rex": {"summary": "Rex", "value": [{"id": 7, "name": "Rex"}]}});
    document
}

/// What the test expects an operation to answer, read from the description as the Contract says: the first 2xx
/// response with an example (inline, else the first of `examples`, following a `$ref`), else the first 2xx status.
fn expected(document: &Value, op: &Value) -> (u16, Option<(String, Value)>) {
    let mut first = None;
    for (code, response) in op["responses"].as_object().expect("responses") {
        let Ok(status) = code.parse::<u16>() else { continue };
        if !(200..300).contains(&status) {
            continue;
        }
        first.get_or_insert(status);
        for (media, spec) in response["content"].as_object().into_iter().flatten() {
            let named = spec["examples"].as_object().and_then(|e| e.values().next()).map(|first| {
                match first["$ref"].as_str() {
                    Some(reference) => {
                        document.pointer(reference.trim_start_matches('#')).expect("a $ref")["value"].clone()
                    }
                    None => first["value"].clone(),
                }
            });
            if let Some(example) = spec.get("example").cloned().or(named) {
                return (status, Some((media.clone(), example)));
            }
        }
    }
    (first.expect("a 2xx response"), None)
}

/// Every operation of the description: (method, path as written, a concrete path, the operation).
fn operations(document: &Value) -> Vec<(String, String, String, Value)> {
    let mut all = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let concrete = path.replace("{petId}", "7");
            all.push((method.to_uppercase(), path.clone(), concrete, op.clone()));
        }
    }
    all
}

async fn import(app: &TestApp, document: &Value) -> String {
    let name = format!("{} {}", document["info"]["title"].as_str().unwrap_or("api"), uuid::Uuid::new_v4());
    let body = json!({"name": name, "source": {"document": document.to_string()}});
    let imported: Value = app.post("/collections/import/openapi", &body, 201).await;
    imported["collection"]["id"].as_str().expect("a collection id").to_owned()
}

async fn mock(app: &TestApp, collection: &str, body: Value) -> Value {
    app.post(&format!("/collections/{collection}/mock"), &body, 201).await
}

#[tokio::test]
async fn a_mock_of_the_petstore_answers_every_operation_with_its_example() {
    let app = TestApp::spawn().await;
    let document = petstore_with_examples();
    let collection = import(&app, &document).await;
    let endpoint = mock(&app, &collection, json!({})).await;
    assert_eq!(endpoint["mock_of"], collection.as_str());
    assert!(endpoint["name"].as_str().is_some_and(|n| n.starts_with("Mock of Swagger Petstore ")), "{endpoint}");
    let id = endpoint["id"].as_str().expect("id").to_owned();
    let rules = endpoint["rules"].as_array().expect("rules");
    let operations = operations(&document);
    assert_eq!(rules.len(), operations.len(), "one rule per operation: {rules:?}");
    let mut answered = 0;
    for (method, path, concrete, op) in &operations {
        assert!(
            rules.iter().any(|r| r["method"] == method.as_str() && r["path"] == path.as_str()),
            "{method} {path}: a rule with the operation's path as written"
        );
        let (status, example) = expected(&document, op);
        let reply = app
            .capture_with(Method::from_bytes(method.as_bytes()).expect("method"), &format!("{id}{concrete}"), &[], "")
            .await;
        assert_eq!(reply.status.as_u16(), status, "{method} {concrete}: {}", reply.text);
        match example {
            Some((media, example)) => {
                assert_eq!(reply.headers["content-type"], media.as_str(), "{method} {concrete}");
                let body: Value = serde_json::from_str(&reply.text).expect("a JSON example");
                assert_eq!(body, example, "{method} {concrete}: the example as the description gives it");
            }
            None => assert_eq!(reply.text, "", "{method} {concrete}: no example, no body"),
        }
        answered += 1;
    }
    assert_eq!((answered, operations.len()), (3, 3), "N of N operations answered");
    // The examples were found where the description put them: inline, and the first of `examples` by `$ref`.
    let list = app.capture(Method::GET, &format!("{id}/pets"), "").await;
    assert_eq!(list.body[0]["tag"], "a\\b {{ c", "an example's `{{` is text");
    assert_eq!(app.capture(Method::GET, &format!("{id}/pets/42"), "").await.body[0]["name"], "Rex");
    // HEAD is answered like GET, without a body.
    let head = app.capture(Method::HEAD, &format!("{id}/pets/42"), "").await;
    assert_eq!((head.status.as_u16(), head.text.as_str()), (200, ""));
    // Requests no rule matches: 404 `not_found`, captured all the same.
    for (method, path) in
        [(Method::DELETE, "/pets"), (Method::GET, "/pets/1/toys"), (Method::GET, ""), (Method::PUT, "/pets/1")]
    {
        let reply = app.capture(method.clone(), &format!("{id}{path}"), "").await;
        assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"), "{method} {path}: {}", reply.text);
    }
    assert_eq!(app.rows(&format!("captures WHERE webhook_id = '{id}'")).await, 3 + 3 + 4);

    // The plain Petstore has no examples: each operation answers its first 2xx status with no body.
    let plain = import(&app, &json!(petstore())).await;
    let plain_id = mock(&app, &plain, json!({"name": "plain pets"})).await["id"].as_str().expect("id").to_owned();
    for (method, path, status) in [("GET", "/pets", 200), ("POST", "/pets", 201), ("GET", "/pets/3", 200)] {
        let reply =
            app.capture(Method::from_bytes(method.as_bytes()).expect("method"), &format!("{plain_id}{path}"), "").await;
        assert_eq!((reply.status.as_u16(), reply.text.as_str()), (status, ""), "{method} {path}");
    }
    let read: Value = app.get(&format!("/webhooks/{plain_id}"), 200).await;
    assert_eq!((read["name"].clone(), read["mock_of"].clone()), (json!("plain pets"), json!(plain)));
}

#[tokio::test]
async fn rules_test_agrees_with_a_mock_for_twenty_requests() {
    let app = TestApp::spawn().await;
    let collection = import(&app, &petstore_with_examples()).await;
    let id = mock(&app, &collection, json!({})).await["id"].as_str().expect("id").to_owned();
    let requests = [
        ("GET", "/pets"),
        ("POST", "/pets"),
        ("GET", "/pets/1"),
        ("GET", "/pets/abc"),
        ("HEAD", "/pets"),
        ("HEAD", "/pets/9"),
        ("DELETE", "/pets"),
        ("PUT", "/pets"),
        ("PATCH", "/pets/1"),
        ("GET", ""),
        ("POST", ""),
        ("GET", "/pets/1/2"),
        ("GET", "/pets/"),
        ("GET", "/petsx"),
        ("OPTIONS", "/pets"),
        ("POST", "/pets/1"),
        ("GET", "/pets/a%20b"),
        ("DELETE", "/pets/1"),
        ("GET", "/other"),
        ("POST", "/pets?limit=3"),
    ];
    let mut matched = 0;
    for (i, (method, path_query)) in requests.iter().enumerate() {
        let live =
            app.capture(Method::from_bytes(method.as_bytes()).expect("method"), &format!("{id}{path_query}"), "").await;
        let (path, query) = path_query.split_once('?').unwrap_or((path_query, ""));
        let path = if path.is_empty() { "/" } else { path };
        let said: Value = app
            .post(&format!("/webhooks/{id}/rules/test"), &json!({"method": method, "path": path, "query": query}), 200)
            .await;
        assert_eq!(said["status"], live.status.as_u16(), "request {i}: {method} {path_query}: {said}");
        assert_eq!(
            said["headers"]["content-type"].as_str(),
            live.headers.get("content-type").and_then(|v| v.to_str().ok()),
            "request {i}"
        );
        if said["rule_index"].is_null() {
            assert_eq!((live.status.as_u16(), live.code()), (404, "not_found"), "request {i}: a mock's 404");
            let body: Value = serde_json::from_str(said["body"].as_str().expect("body")).expect("an error body");
            assert_eq!(body["error"]["code"], "not_found", "request {i}");
        } else {
            matched += 1;
            assert_eq!(said["body"], live.text, "request {i}: the same body");
        }
    }
    assert_eq!(matched, 8, "the requests the mock's three rules answer");
    assert_eq!(app.rows(&format!("captures WHERE webhook_id = '{id}'")).await, 20, "rules/test stores nothing");
}

#[tokio::test]
async fn mocks_refuse_bad_fields_scopes_and_other_organizations() {
    let app = TestApp::spawn().await;
    let collection = import(&app, &petstore_with_examples()).await;
    let path = format!("/collections/{collection}/mock");
    for (body, named) in [
        (json!({"colour": "red"}), "colour"),
        (json!({"name": ""}), "name"),
        (json!({"name": "x".repeat(201)}), "name"),
        (json!([]), ""),
    ] {
        app.admin(Method::POST, &path, Some(body.clone())).await.assert_refused(400, "invalid_request", named);
    }
    // A collection made by hand follows no description.
    let by_hand: Value = app.post("/collections", &json!({"name": "by hand"}), 201).await;
    let by_hand = by_hand["id"].as_str().expect("id").to_owned();
    let reply = app.admin(Method::POST, &format!("/collections/{by_hand}/mock"), Some(json!({}))).await;
    reply.assert_refused(400, "invalid_request", "OpenAPI");
    // More operations than an endpoint has rules.
    let mut paths = serde_json::Map::new();
    for i in 0..51 {
        paths.insert(format!("/r{i}"), json!({"get": {"responses": {"200": {"description": "ok"}}}}));
    }
    let wide = json!({"openapi": "3.0.3", "info": {"title": "Wide", "version": "1"}, "paths": paths});
    let wide = import(&app, &wide).await;
    let reply = app.admin(Method::POST, &format!("/collections/{wide}/mock"), Some(json!({}))).await;
    reply.assert_refused(400, "invalid_request", "at most 50");
    // Only operations the collection still holds are mocked.
    let held: Value = app.get(&format!("/collections/{collection}"), 200).await;
    let post = held["requests"].as_array().expect("requests").iter().find(|r| r["method"] == "POST").expect("POST");
    let post_id = post["id"].as_str().expect("id");
    app.admin(Method::DELETE, &format!("/collections/{collection}/requests/{post_id}"), None).await;
    let fewer = mock(&app, &collection, json!({})).await;
    assert_eq!(fewer["rules"].as_array().map(Vec::len), Some(2), "the deleted operation is not mocked");
    let fewer_id = fewer["id"].as_str().expect("id");
    assert_eq!(app.capture(Method::POST, &format!("{fewer_id}/pets"), "").await.status, 404);

    // Scopes: both `collections:read` and `webhooks:write`.
    for (scopes, status) in [(&["collections:read"][..], 403), (&["webhooks:write"][..], 403)] {
        let creds = app.creds_with(scopes).await;
        let reply = app.call(Method::POST, &path, Some(&creds), Some(json!({}))).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (status, "insufficient_scope"), "{scopes:?}: {}", reply.text);
    }
    let both = app.creds_with(&["collections:read", "webhooks:write"]).await;
    assert_eq!(app.call(Method::POST, &path, Some(&both), Some(json!({}))).await.status, 201);
    assert_eq!(app.call(Method::POST, &path, None, Some(json!({}))).await.status, 401);
    // Another organization's collection is not found, and its own mock is its own.
    let other = app.new_org("Other").await;
    let theirs = app.call(Method::POST, &path, Some(&other), Some(json!({}))).await;
    theirs.assert_refused(404, "not_found", "collection");
    let unknown = uuid::Uuid::new_v4();
    app.admin(Method::POST, &format!("/collections/{unknown}/mock"), Some(json!({}))).await.assert_refused(
        404,
        "not_found",
        "collection",
    );
    let mocks = app.rows(&format!("webhooks WHERE mock_of = '{collection}'")).await;
    assert_eq!(mocks, 2, "the admin's two mocks, nothing for the refusals");
}

#[tokio::test]
async fn rules_test_answers_a_handshake_as_the_capture_url_does() {
    let app = TestApp::spawn().await;
    // A rule that would answer everything: the handshake comes first, as at the capture URL.
    let rules = json!([{"status": 209, "body": "a rule"}]);
    let cases = [
        (json!({"preset": "dropbox"}), "GET", "/", "challenge=abc%20d", None::<(&str, &str)>, ""),
        (
            json!({"preset": "slack"}),
            "POST",
            "/",
            "",
            Some(("Content-Type", "application/json")),
            r#"{"type": "url_verification", "challenge": "c-1"}"#,
        ),
        (
            json!({"preset": "zoom", "secret": "zoom-secret"}),
            "POST",
            "/events",
            "",
            Some(("Content-Type", "application/json")),
            r#"{"event": "endpoint.url_validation", "payload": {"plainToken": "p-1"}}"#,
        ),
        (
            json!({"preset": "meta", "secret": "verify-me"}),
            "GET",
            "/",
            "hub.mode=subscribe&hub.challenge=9&hub.verify_token=wrong",
            None,
            "",
        ),
        (json!({"preset": "msgraph"}), "GET", "/", "", None, ""),
    ];
    let mut shaken = 0;
    for (i, (handshake, method, path, query, header, body)) in cases.iter().enumerate() {
        let id =
            app.create_webhook(json!({"name": format!("hs {i}"), "rules": rules, "handshake": handshake})).await["id"]
                .as_str()
                .expect("id")
                .to_owned();
        let mut test = json!({"method": method, "path": path, "query": query, "body": body});
        if let Some((name, value)) = header {
            test["headers"] = json!({*name: value});
        }
        let said: Value = app.post(&format!("/webhooks/{id}/rules/test"), &test, 200).await;
        let live_path = if *path == "/" { "" } else { path };
        let rest = if query.is_empty() { format!("{id}{live_path}") } else { format!("{id}{live_path}?{query}") };
        let headers: Vec<(&str, &str)> = header.iter().copied().collect();
        let live = app
            .capture_with(Method::from_bytes(method.as_bytes()).expect("method"), &rest, &headers, body.to_string())
            .await;
        assert_eq!(said["status"], live.status.as_u16(), "case {i}: {said} / {}", live.text);
        if live.status.is_success() {
            assert_eq!(said["body"], live.text, "case {i}");
        } else {
            let error: Value = serde_json::from_str(said["body"].as_str().expect("body")).expect("an error body");
            assert_eq!(error["error"]["code"], live.code(), "case {i}: {}", live.text);
        }
        let handshake_answered = live.status != 209;
        assert_eq!(said["rule_index"], if handshake_answered { json!(null) } else { json!(0) }, "case {i}");
        if handshake_answered {
            shaken += 1;
        }
    }
    assert_eq!(shaken, 4, "dropbox, slack, zoom and meta (refused 403) answer; msgraph without a token does not");
    assert_eq!(app.rows("captures WHERE handshake IS NOT NULL").await, 4, "only the live requests are stored");
}
