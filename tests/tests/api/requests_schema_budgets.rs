//! Attacks on `matchesSchema` with `collection:` references (issue #54) over the real server: a flow referring to
//! a large imported description often enough that inlining would copy more than the 16 MiB budget is refused at
//! launch (400 naming the reference, no execution made) while one reference fewer launches, and the server keeps
//! answering; descriptions whose schemas loop (`$ref` to itself, two schemas through `allOf`), branch
//! exponentially (`anyOf` of `anyOf`, 40 levels), or hide either under `not`, fail the node with the validator's
//! budget, quickly, instead of running away or passing.

use axum::Router;
use axum::routing::get;
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The inlining budget of a launch (control-plane/src/api/collections/schemas.rs).
const COPIED_BYTES: usize = 16 * 1024 * 1024;

/// A minimal OpenAPI 3.0 description with `schemas` as its components.
fn description(title: &str, schemas: Value) -> Value {
    json!({"openapi": "3.0.3", "info": {"title": title, "version": "1"},
        "paths": {"/pets": {"get": {"operationId": "listPets",
            "responses": {"200": {"description": "pets",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}}}},
        "components": {"schemas": schemas}})
}

async fn import(app: &TestApp, document: &Value) -> String {
    let body = json!({"source": {"document": document.to_string()}});
    let reply = app.admin(Method::POST, "/collections/import/openapi", Some(body)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.body["collection"]["id"].as_str().expect("a collection id").to_owned()
}

/// A request node whose assertions check its answer against each of `references`.
fn checked(url: &str, references: &[String]) -> Value {
    let assertions: Vec<Value> = references
        .iter()
        .map(|r| json!({"source": "body", "operator": "matchesSchema", "expected": {"$ref": r}}))
        .collect();
    json!({"id": "pet", "kind": "request", "request": {"method": "GET", "url": url},
        "extractors": [{"name": "body", "kind": "jsonPath", "expression": "$"}], "assertions": assertions})
}

async fn healthy(app: &TestApp) {
    let reply = app.admin(Method::GET, "/flows", None).await;
    assert_eq!(reply.status, 200, "the server still answers: {}", reply.text);
}

#[tokio::test]
async fn references_copying_past_16_mib_refuse_the_launch_and_the_server_stays_healthy() {
    let app = TestApp::spawn().await;
    // 3.5 MiB of description: four references copy 14 MiB, five would copy 17.5 MiB.
    let padding = "p".repeat(3_500 * 1024);
    let document = description(
        "big",
        json!({"Pet": {"type": "object", "required": ["id"]},
        "Padding": {"type": "string", "description": padding}}),
    );
    let size = serde_json::to_vec(&document).expect("json").len();
    let fits = COPIED_BYTES / size;
    assert_eq!(fits, 4, "{size} bytes");
    let collection = import(&app, &document).await;
    let pet = format!("collection:{collection}#/components/schemas/Pet");
    let definition =
        |count: usize| json!({"nodes": [checked("https://api.example.com/pet", &vec![pet.clone(); count])]});

    let over = app.create_flow("over the budget", definition(fits + 1)).await;
    let started = Instant::now();
    let refused = app.admin(Method::POST, &format!("/flows/{over}/launch"), Some(json!({}))).await;
    assert_eq!((refused.status.as_u16(), refused.code()), (400, "invalid_request"), "{}", refused.text);
    let message = refused.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("more than 16 MiB") && message.contains(&pet), "{message}");
    assert!(started.elapsed() < Duration::from_secs(20), "refused in {:?}", started.elapsed());
    let executions = app.admin(Method::GET, &format!("/flows/{over}/executions"), None).await;
    assert_eq!(executions.body["items"], json!([]), "no execution was made: {}", executions.text);
    // The same through a tried node and an inline run: every way in holds the budget.
    let node = json!({"node": definition(fits + 1)["nodes"][0]});
    let tried = app.admin(Method::POST, &format!("/flows/{over}/try"), Some(node)).await;
    let inline = app.admin(Method::POST, "/executions", Some(json!({"definition": definition(fits + 1)}))).await;
    for reply in [tried, inline] {
        assert_eq!(reply.status, 400, "{}", reply.text);
        assert!(reply.text.contains("more than 16 MiB"), "{}", reply.text);
    }
    healthy(&app).await;

    let under = app.create_flow("within the budget", definition(fits)).await;
    let launched = app.admin(Method::POST, &format!("/flows/{under}/launch"), Some(json!({}))).await;
    assert!(launched.status.is_success(), "{}", launched.text);
    healthy(&app).await;
}

#[tokio::test]
async fn looping_and_exploding_schemas_fail_the_node_within_the_budget() {
    let app = TestApp::spawn_with(|settings| settings.allow_private_targets = true).await;
    let target = Router::new().route("/pet", get(|| async { "{\"id\": 1, \"name\": \"Rex\"}" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/pet", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, target).await });

    let mut schemas = serde_json::Map::new();
    schemas.insert("Pet".into(), json!({"type": "object", "required": ["id"]}));
    schemas.insert("Loop".into(), json!({"$ref": "#/components/schemas/Loop"}));
    schemas.insert("Ping".into(), json!({"allOf": [{"$ref": "#/components/schemas/Pong"}]}));
    schemas.insert("Pong".into(), json!({"allOf": [{"$ref": "#/components/schemas/Ping"}]}));
    for level in 0..40 {
        let next = json!({"$ref": format!("#/components/schemas/L{}", level + 1)});
        schemas.insert(format!("L{level}"), json!({"anyOf": [next, next]}));
    }
    schemas.insert("L40".into(), json!({"type": "string"}));
    schemas.insert("NotLoop".into(), json!({"not": {"$ref": "#/components/schemas/Loop"}}));
    schemas.insert("NotBlowup".into(), json!({"not": {"$ref": "#/components/schemas/L0"}}));
    let collection = import(&app, &description("loops", Value::Object(schemas))).await;
    let flow = app.create_flow("schemas", json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]})).await;
    let try_schema = |name: &str| {
        let reference = format!("collection:{collection}#/components/schemas/{name}");
        json!({"node": checked(&url, &[reference])})
    };

    let fine = app.admin(Method::POST, &format!("/flows/{flow}/try"), Some(try_schema("Pet"))).await;
    assert_eq!(fine.body["status"], "passed", "{}", fine.text);
    for name in ["Loop", "Ping", "L0", "NotLoop", "NotBlowup"] {
        let started = Instant::now();
        let reply = app.admin(Method::POST, &format!("/flows/{flow}/try"), Some(try_schema(name))).await;
        let took = started.elapsed();
        assert_eq!(reply.status, 200, "{name}: {}", reply.text);
        assert_eq!(reply.body["status"], "failed", "{name} never passes: {}", reply.text);
        let reason = reply.body["assertions"][0]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("past the validator's budget"), "{name}: {reason}");
        assert!(took < Duration::from_secs(20), "{name} took {took:?}");
        healthy(&app).await;
    }
}
