//! Catalog and sandboxes: extractor kinds and evaluation, the 14 operators and evaluation, special nodes.

use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn extractor_kinds_and_evaluation() {
    let app = TestApp::spawn().await;
    let kinds = app.admin(Method::GET, "/extractors", None).await;
    assert_eq!(kinds.status, 200);
    let names: Vec<&str> =
        kinds.body["items"].as_array().expect("items").iter().map(|k| k["kind"].as_str().expect("kind")).collect();
    assert_eq!(names, ["jsonPath", "xmlPath", "statusCode", "header", "body"]);
    assert_eq!(kinds.body["items"][3]["fields"][1], json!({"name": "header", "type": "string", "required": true}));

    let response = json!({"status": 201, "headers": {"X-Trace": "r-1", "Content-Type": "application/json"},
        "body": "{\"token\": \"abc\", \"items\": [{\"id\": 1}, {\"id\": 2}]}"});
    for (extractor, value) in [
        (json!({"name": "t", "kind": "jsonPath", "expression": "$.token"}), json!("abc")),
        (json!({"name": "ids", "kind": "jsonPath", "expression": "$.items[*].id"}), json!([1, 2])),
        (json!({"name": "s", "kind": "statusCode"}), json!(201)),
        (json!({"name": "h", "kind": "header", "header": "x-trace"}), json!("r-1")),
        (json!({"name": "b", "kind": "body", "regex": "\"token\": \"(\\w+)\""}), json!("abc")),
    ] {
        let reply = app
            .admin(Method::POST, "/extractors/evaluate", Some(json!({"extractor": extractor, "response": response})))
            .await;
        assert_eq!((reply.status.as_u16(), &reply.body["value"]), (200, &value), "{extractor}");
    }
    let xml = app
        .admin(
            Method::POST,
            "/extractors/evaluate",
            Some(json!({"extractor": {"name": "x", "kind": "xmlPath", "expression": "/a/b"},
            "response": {"status": 200, "headers": {}, "body": "<a><b>hi</b></a>"}})),
        )
        .await;
    assert_eq!(xml.body["value"], "hi");
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
    let operators = app.admin(Method::GET, "/assertions/operators", None).await;
    let items = operators.body["items"].as_array().expect("items");
    assert_eq!(items.len(), 14);
    assert_eq!(items[11], json!({"name": "exists", "description": items[11]["description"], "takes_expected": false}));

    let reply = app
        .admin(
            Method::POST,
            "/assertions/evaluate",
            Some(json!({
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
            })),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let results = reply.body["results"].as_array().expect("results");
    let passed: Vec<bool> = results.iter().map(|r| r["passed"].as_bool().expect("passed")).collect();
    assert_eq!(passed, [true, true, true, false, false, false, true, true]);
    assert_eq!(results[4]["reason"], "type_mismatch");
    assert_eq!(results[5]["reason"], "missing");
    assert_eq!(results[3]["actual"], "9");
    assert_eq!(results[0]["source"], "status");
    assert_eq!(results[0]["operator"], "equals");
    assert_eq!(results[0]["reason"], json!(null));

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
    let nodes = app.admin(Method::GET, "/special-nodes", None).await;
    let kinds: Vec<&str> =
        nodes.body["items"].as_array().expect("items").iter().map(|k| k["kind"].as_str().expect("kind")).collect();
    assert_eq!(kinds, ["delay", "module", "set_variables"]);
    assert!(
        nodes.body["items"][0]["fields"]
            .as_array()
            .expect("fields")
            .contains(&json!({"name": "delay_ms", "type": "integer", "required": true}))
    );
    // Any valid credential, whatever its scopes; none at all is 401.
    let runner = app.creds_with(&["runner:complete"]).await;
    for path in ["/extractors", "/assertions/operators", "/special-nodes"] {
        assert_eq!(app.call(Method::GET, path, Some(&runner), None).await.status, 200, "{path}");
        assert_eq!(app.call(Method::GET, path, None, None).await.status, 401, "{path}");
    }
}
