//! Catalog and sandboxes: extractor kinds and evaluation, the 15 operators and evaluation, special nodes.

use hookflow_shared::api::catalog::{EvaluateAssertions, EvaluateExtractor, Extracted};
use hookflow_tests::{Credentials, TestApp};
use reqwest::Method;
use serde_json::{Value, json};

/// Evaluates an extractor written as its JSON body (read as the wire type first).
async fn evaluate(app: &TestApp, body: Value) -> Extracted {
    let body: EvaluateExtractor = serde_json::from_value(body).expect("an extractor body");
    app.api().catalog().evaluate_extractor(&body).await.expect("evaluate")
}

#[tokio::test]
async fn extractor_kinds_and_evaluation() {
    let app = TestApp::spawn().await;
    let kinds = app.api().catalog().extractors().await.expect("extractors");
    let names: Vec<&str> = kinds.items.iter().map(|k| k.kind.as_str()).collect();
    assert_eq!(names, ["jsonPath", "xmlPath", "statusCode", "header", "body", "signature", "duration"]);
    assert_eq!(json!(kinds.items[3].fields[1]), json!({"name": "header", "type": "string", "required": true}));

    let response = json!({"status": 201, "headers": {"X-Trace": "r-1", "Content-Type": "application/json"},
        "body": "{\"token\": \"abc\", \"items\": [{\"id\": 1}, {\"id\": 2}]}"});
    for (extractor, value) in [
        (json!({"name": "t", "kind": "jsonPath", "expression": "$.token"}), json!("abc")),
        (json!({"name": "ids", "kind": "jsonPath", "expression": "$.items[*].id"}), json!([1, 2])),
        (json!({"name": "s", "kind": "statusCode"}), json!(201)),
        (json!({"name": "h", "kind": "header", "header": "x-trace"}), json!("r-1")),
        (json!({"name": "b", "kind": "body", "regex": "\"token\": \"(\\w+)\""}), json!("abc")),
    ] {
        let extracted = evaluate(&app, json!({"extractor": extractor, "response": response})).await;
        assert_eq!(extracted.value.as_ref(), Some(&value), "{extractor}");
    }
    let xml = evaluate(
        &app,
        json!({"extractor": {"name": "x", "kind": "xmlPath", "expression": "/a/b"},
        "response": {"status": 200, "headers": {}, "body": "<a><b>hi</b></a>"}}),
    )
    .await;
    assert_eq!(xml.value, Some(json!("hi")));
    // Absent when nothing matched: the wire form has no `value` at all.
    let nothing = app
        .admin(
            Method::POST,
            "/extractors/evaluate",
            Some(json!({"extractor": {"name": "m", "kind": "jsonPath", "expression": "$.nope"},
            "response": response})),
        )
        .await;
    assert_eq!(nothing.status, 200);
    assert!(nothing.body.get("value").is_none(), "absent when nothing matched: {}", nothing.text);

    for bad in [
        json!({"extractor": {"name": "x", "kind": "jsonPath", "expression": "$.["}, "response": response}),
        json!({"extractor": {"name": "x", "kind": "xmlPath", "expression": "//["}, "response": response}),
        json!({"extractor": {"name": "x", "kind": "jsonPath"}, "response": response}),
        json!({"extractor": {"name": "x", "kind": "header"}, "response": response}),
        json!({"extractor": {"name": "x", "kind": "body", "regex": "("}, "response": response}),
        json!({"extractor": {"name": "x", "kind": "css"}, "response": response}),
        json!({"extractor": {"name": "x", "kind": "statusCode", "extra": 1}, "response": response}),
    ] {
        let reply = app.admin(Method::POST, "/extractors/evaluate", Some(bad.clone())).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{bad}");
    }
}

#[tokio::test]
async fn operators_and_assertion_evaluation() {
    let app = TestApp::spawn().await;
    let operators = app.api().catalog().operators().await.expect("operators");
    let items = &operators.items;
    assert_eq!(items.len(), 15);
    assert_eq!((items[11].name.as_str(), items[11].takes_expected), ("exists", false));

    let body: EvaluateAssertions = serde_json::from_value(json!({
                "assertions": [
                    {"source": "status", "operator": "equals", "expected": 200},
                    {"source": "status", "operator": "equals", "expected": "200"},
                    {"source": "token", "operator": "exists"},
                    {"source": "count", "operator": "greaterThan", "expected": 10},
                    {"source": "name", "operator": "greaterThan", "expected": 1},
                    {"source": "ghost", "operator": "equals", "expected": 1},
                    {"source": "ghost", "operator": "notExists"},
                    {"source": "nothing", "operator": "exists"}
                ],
                "values": {"status": 200.0, "token": "abc", "count": "9", "name": "bob", "nothing": null}
    }))
    .expect("an assertions body");
    let results = app.api().catalog().evaluate_assertions(&body).await.expect("evaluate").results;
    let passed: Vec<bool> = results.iter().map(|r| r.passed).collect();
    assert_eq!(passed, [true, true, true, false, false, false, true, true]);
    assert_eq!(results[4].reason.as_deref(), Some("type_mismatch"));
    assert_eq!(results[5].reason.as_deref(), Some("missing"));
    assert_eq!(results[3].actual, Some(json!("9")));
    assert_eq!(results[0].source, "status");
    assert_eq!(json!(results[0].operator), "equals");
    assert_eq!(results[0].reason, None);

    for bad in [
        json!({"assertions": [{"source": "a", "operator": "roughlyEquals", "expected": 1}], "values": {}}),
        json!({"assertions": [{"source": "a", "operator": "equals"}], "values": {}}),
        json!({"values": {}}),
    ] {
        let reply = app.admin(Method::POST, "/assertions/evaluate", Some(bad.clone())).await;
        assert_eq!(reply.code(), "invalid_request", "{bad}");
    }
}

#[tokio::test]
async fn special_nodes_and_authentication() {
    let app = TestApp::spawn().await;
    let nodes = app.api().catalog().special_nodes().await.expect("special nodes");
    let kinds: Vec<&str> = nodes.items.iter().map(|k| k.kind.as_str()).collect();
    assert_eq!(kinds, ["delay", "module", "set_variables", "webhook"]);
    assert!(
        json!(nodes.items[0].fields)
            .as_array()
            .expect("fields")
            .contains(&json!({"name": "delay_ms", "type": "integer", "required": true}))
    );
    // Any valid credential, whatever its scopes; none at all is 401.
    let runner = app.api_as(&app.creds_with(&["runner:complete"]).await);
    let anonymous = app.api_with(Credentials::None);
    for client in [&runner, &anonymous] {
        let expected = if client.credentials() == &Credentials::None { 401 } else { 200 };
        let catalog = client.catalog();
        let statuses = [
            catalog.extractors().await.map(drop),
            catalog.operators().await.map(drop),
            catalog.special_nodes().await.map(drop),
        ]
        .map(|answer| answer.map_or_else(|e| e.status(), |()| 200));
        assert_eq!(statuses, [expected; 3], "{:?}", client.credentials());
    }
}
