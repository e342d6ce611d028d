//! Parser and generator budgets, sent as attacks over the real server: deep expressions and documents answer 400
//! naming the limit (they once overflowed the stack and killed every tenant's server), YAML alias bombs and
//! example-generation explosions in OpenAPI imports are refused, and responses the engine parses are held to
//! the same budgets. After each attack the server still answers.

use hookflow_runner::engine::Engine;
use hookflow_shared::api::executions::NodeStatus;
use hookflow_shared::api::runners::Job;
use hookflow_tests::TestApp;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn evaluate(app: &TestApp, kind: &str, expression: &str, body: &str) -> (u16, String) {
    let request = json!({"extractor": {"name": "v", "kind": kind, "expression": expression},
        "response": {"status": 200, "body": body}});
    let reply = app.admin(Method::POST, "/extractors/evaluate", Some(request)).await;
    (reply.status.as_u16(), reply.text)
}

async fn still_serving(app: &TestApp) {
    assert_eq!(app.call(Method::GET, "/healthz", None, None).await.status, 200, "the server survived");
}

#[tokio::test]
async fn deep_expressions_and_documents_are_refused_with_the_limit() {
    let app = TestApp::spawn().await;
    // 3,000 nested parentheses (the finding): refused for its size, before any parser sees it.
    let xpath = format!("{}1{}", "(".repeat(3000), ")".repeat(3000));
    let (status, text) = evaluate(&app, "xmlPath", &xpath, "<a/>").await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("4096 bytes"), "{text}");
    // Within the size, nesting past 32 levels is refused too.
    let xpath = format!("{}1{}", "(".repeat(40), ")".repeat(40));
    let (status, text) = evaluate(&app, "xmlPath", &xpath, "<a/>").await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("deeper than 32"), "{text}");
    // 2,000 nested JSONPath filters, and 40 within the size.
    for depth in [2000, 40] {
        let jsonpath = format!("${}", "[?@".repeat(depth)) + &"]".repeat(depth);
        let (status, text) = evaluate(&app, "jsonPath", &jsonpath, "[]").await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("4096 bytes") || text.contains("deeper than 32"), "{text}");
    }
    // XML bodies nested 40,000 and 60,000 deep (once a stack overflow, and quadratic on an async worker).
    for depth in [40_000, 60_000] {
        let xml = format!("{}{}", "<a>".repeat(depth), "</a>".repeat(depth));
        let (status, text) = evaluate(&app, "xmlPath", "/a", &xml).await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("deeper than 256 elements"), "{text}");
    }
    // A JSON body nested 100,000 deep is not JSON the extractor can read (it is not parsed by recursion).
    let deep_json = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let (status, text) = evaluate(&app, "jsonPath", "$[0]", &deep_json).await;
    assert_eq!((status, text.as_str()), (200, "{}"), "no value, no crash");
    still_serving(&app).await;

    // The same expressions inside a flow definition are refused when the flow is written.
    let xpath = format!("{}1{}", "(".repeat(40), ")".repeat(40));
    let definition = json!({"nodes": [{"id": "get", "kind": "request",
        "request": {"method": "GET", "url": "https://example.com/"},
        "extractors": [{"name": "v", "kind": "xmlPath", "expression": xpath}]}]});
    let reply = app.admin(Method::POST, "/flows", Some(json!({"name": "deep", "definition": definition}))).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(reply.text.contains("extractors[0]") && reply.text.contains("deeper than 32"), "{}", reply.text);
    still_serving(&app).await;
}

#[tokio::test]
async fn responses_the_engine_parses_are_held_to_the_budgets() {
    let target = Target::spawn().await;
    for (kind, expression, query) in
        [("xmlPath", "/a", "kind=xml&depth=40000"), ("jsonPath", "$[0]", "kind=json&depth=100000")]
    {
        let definition = json!({"nodes": [{"id": "get", "kind": "request",
            "request": {"method": "GET", "url": format!("{}/nested?{query}", target.base)},
            "extractors": [{"name": "v", "kind": kind, "expression": expression}]}]});
        let (sink, mut results) = tokio::sync::mpsc::unbounded_channel();
        let job = Job::standalone("deep", definition, 60);
        let outcome = Engine::new().run(&job, &sink, &CancellationToken::new()).await;
        drop(sink);
        let result = results.recv().await.expect("a node result");
        if kind == "xmlPath" {
            // The XML budget refuses the document, naming the limit.
            assert_eq!(result.status, NodeStatus::Error, "{outcome:?}");
            assert!(result.error.unwrap_or_default().contains("deeper than 256"), "{outcome:?}");
        } else {
            // JSON past the parser's recursion limit is not JSON: the extractor finds nothing.
            assert!(result.extracted.get("v").is_none_or(Value::is_null), "{:?}", result.extracted);
        }
    }
}

/// An OpenAPI description of one anchor and `aliases` aliases, each alias listing the anchor `width` times.
fn alias_bomb(width: usize, aliases: usize) -> String {
    let anchor: Vec<String> = (0..width).map(|i| format!("\"{i:0>40}\"")).collect();
    let mut text = format!(
        "openapi: 3.0.3\ninfo: {{title: bomb, version: '1'}}\npaths: {{}}\nx-base: &a [{}]\n",
        anchor.join(", ")
    );
    for i in 0..aliases {
        text.push_str(&format!("x-{i}: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"));
    }
    text
}

/// A description of `operations` operations whose bodies are the first of `width` schemas, each holding `width`
/// properties that reference every schema.
fn mutual_references(width: usize, operations: usize) -> Value {
    let schemas: serde_json::Map<String, Value> = (0..width)
        .map(|i| {
            let properties: serde_json::Map<String, Value> =
                (0..width).map(|j| (format!("p{j}"), json!({"$ref": format!("#/components/schemas/S{j}")}))).collect();
            (format!("S{i}"), json!({"type": "object", "properties": properties}))
        })
        .collect();
    let paths: serde_json::Map<String, Value> = (0..operations)
        .map(|i| {
            let body = json!({"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}});
            (format!("/things{i}"), json!({"post": {"requestBody": body, "responses": {"200": {"description": "ok"}}}}))
        })
        .collect();
    json!({"openapi": "3.0.3", "info": {"title": "wide", "version": "1"}, "paths": paths,
        "components": {"schemas": schemas}})
}

#[tokio::test]
async fn openapi_imports_cannot_expand_without_bound() {
    let app = TestApp::spawn().await;
    // 5,000 aliases of a 100-item anchor: 25 KB of text that expands to 5 million nodes (once 3 GB of memory).
    let bomb = alias_bomb(100, 5000);
    assert!(bomb.len() < 400_000, "{}", bomb.len());
    let reply =
        app.admin(Method::POST, "/collections/import/openapi", Some(json!({"source": {"document": bomb}}))).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(reply.text.contains("it expands to more than"), "{}", reply.text);
    still_serving(&app).await;

    // Schemas referencing each other 20 wide (once 30 s of CPU for 6.8 KB): each example is cut short at its
    // budget, with a warning.
    let wide = serde_json::to_string(&mutual_references(20, 1)).expect("json");
    let reply =
        app.admin(Method::POST, "/collections/import/openapi", Some(json!({"source": {"document": wide}}))).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let id = reply.body["collection"]["id"].as_str().expect("id").to_owned();
    assert!(
        reply.text.contains("cut short: their schemas reference each other too widely"),
        "{}",
        reply.body["summary"]
    );
    // 150 such operations exhaust the document's budget: refused, on import and on sync alike.
    let wider = serde_json::to_string(&mutual_references(20, 150)).expect("json");
    let reply =
        app.admin(Method::POST, "/collections/import/openapi", Some(json!({"source": {"document": wider}}))).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(reply.text.contains("reference each other too widely"), "{}", reply.text);
    let sync = json!({"source": {"document": wider}});
    let reply = app.admin(Method::PUT, &format!("/collections/{id}/openapi-sync"), Some(sync)).await;
    assert_eq!(reply.status, 200, "the source is stored: {}", reply.status);
    let reply = app.admin(Method::POST, &format!("/collections/{id}/openapi-sync/preview"), None).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(reply.text.contains("reference each other too widely"), "{}", reply.text);
    still_serving(&app).await;
}
