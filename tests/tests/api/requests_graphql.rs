//! Issue #54, GraphQL request nodes against a real GraphQL server: an `async-graphql` schema (a query taking
//! variables, a resolver that fails for an unknown id) served over HTTP with axum, as GraphQL over HTTP asks (a POST
//! of `query`, `variables` and `operationName`). A query with variables of several types answers its data to the
//! extractors; an answer with `errors` (a resolver's, or the library's own validation error) fails the node naming
//! the first error's message as the server listed it, unless the node allows errors; the same through the real
//! server's `/flows/{id}/try`.

use async_graphql::{EmptyMutation, EmptySubscription, ID, Object, Schema, SimpleObject};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use hookflow_runner::engine::{Engine, Outcome};
use hookflow_shared::api::executions::{NodeResult, NodeStatus};
use hookflow_shared::api::runners::{FinalStatus, Job};
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

#[derive(SimpleObject, Clone)]
struct Pet {
    id: ID,
    name: String,
    tag: Option<String>,
}

fn pets() -> Vec<Pet> {
    [("1", "Rex", Some("dog")), ("2", "Tom", Some("cat")), ("3", "Fido", Some("dog")), ("4", "Nemo", None)]
        .into_iter()
        .map(|(id, name, tag)| Pet { id: ID::from(id), name: name.to_owned(), tag: tag.map(str::to_owned) })
        .collect()
}

struct Query;

#[Object]
impl Query {
    /// One pet; an unknown id is an error of this field.
    async fn pet(&self, id: ID) -> async_graphql::Result<Pet> {
        pets()
            .into_iter()
            .find(|pet| pet.id == id)
            .ok_or_else(|| async_graphql::Error::new(format!("no pet with id {}", id.as_str())))
    }

    /// The first `first` pets with `tag`.
    async fn pets(&self, tag: String, first: i32) -> async_graphql::Result<Vec<Pet>> {
        let first = usize::try_from(first).map_err(|_| async_graphql::Error::new("first must not be negative"))?;
        Ok(pets().into_iter().filter(|pet| pet.tag.as_deref() == Some(tag.as_str())).take(first).collect())
    }
}

type PetSchema = Schema<Query, EmptyMutation, EmptySubscription>;

/// What the server received: content type, accept and the request's JSON.
type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>, Value)>>>;

#[derive(Clone)]
struct Served {
    schema: PetSchema,
    seen: Seen,
}

/// GraphQL over HTTP: the POSTed JSON executed by the schema, the answer as `application/graphql-response+json`.
async fn graphql(State(served): State<Served>, headers: HeaderMap, body: Bytes) -> (StatusCode, HeaderMap, String) {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let raw: Value = serde_json::from_slice(&body).unwrap_or_default();
    served.seen.lock().expect("seen").push((text(header::CONTENT_TYPE), text(header::ACCEPT), raw));
    let mut out = HeaderMap::new();
    let Ok(request) = serde_json::from_slice::<async_graphql::Request>(&body) else {
        return (StatusCode::BAD_REQUEST, out, "{\"errors\": [{\"message\": \"not a GraphQL request\"}]}".into());
    };
    let response = served.schema.execute(request).await;
    out.insert(header::CONTENT_TYPE, "application/graphql-response+json".parse().expect("header"));
    (StatusCode::OK, out, serde_json::to_string(&response).expect("json"))
}

async fn server() -> (String, Seen) {
    let seen = Seen::default();
    let schema = Schema::build(Query, EmptyMutation, EmptySubscription).finish();
    let app = Router::new().route("/graphql", post(graphql)).with_state(Served { schema, seen: seen.clone() });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, seen)
}

async fn run(definition: Value) -> (Outcome, Vec<NodeResult>) {
    let (sink, mut results) = tokio::sync::mpsc::unbounded_channel();
    let job = Job::standalone("graphql", definition, 60);
    let outcome = Engine::new().run(&job, &sink, &CancellationToken::new()).await;
    drop(sink);
    let mut all = Vec::new();
    while let Some(result) = results.recv().await {
        all.push(result);
    }
    (outcome, all)
}

fn node(id: &str, base: &str, graphql: Value) -> Value {
    json!({"id": id, "kind": "request", "continue_on_failure": true,
        "request": {"method": "POST", "url": format!("{base}/graphql"), "graphql": graphql}})
}

const PET: &str = "query Pet($id: ID!) { pet(id: $id) { name tag } }";

/// The error a node must show for the answer it got: the count and the first message, as the server listed them.
fn named_first(result: &NodeResult) -> (String, String) {
    let body = result.response.as_ref().map(|r| r.body.as_str()).expect("an answer body");
    let answer: Value = serde_json::from_str(body).expect("a JSON answer");
    let errors = answer["errors"].as_array().expect("errors");
    let first = errors[0]["message"].as_str().expect("a message").to_owned();
    (format!("the GraphQL answer has {} error(s); the first: {first}", errors.len()), first)
}

#[tokio::test]
async fn a_real_graphql_server_answers_variables_and_its_errors_fail_the_node() {
    let (base, seen) = server().await;
    let mut found =
        node("found", &base, json!({"query": PET, "variables": {"id": "{{pet}}"}, "operation_name": "Pet"}));
    found["extractors"] = json!([{"name": "name", "kind": "jsonPath", "expression": "$.data.pet.name"},
        {"name": "tag", "kind": "jsonPath", "expression": "$.data.pet.tag"}]);
    found["assertions"] = json!([{"source": "name", "operator": "equals", "expected": "Rex"}]);
    // Variables of several types: an Int must arrive as a number for the library to accept it.
    let mut dogs = node(
        "dogs",
        &base,
        json!({
        "query": "query Tagged($tag: String!, $first: Int!) { pets(tag: $tag, first: $first) { id name } }",
        "variables": {"tag": "{{kind}}", "first": 1}}),
    );
    dogs["extractors"] = json!([{"name": "dogs", "kind": "jsonPath", "expression": "$.data.pets"}]);
    let missing = node("missing", &base, json!({"query": PET, "variables": {"id": "9"}}));
    let two = "query Two($a: ID!, $b: ID!) { a: pet(id: $a) { name } b: pet(id: $b) { name } }";
    let both = node("both", &base, json!({"query": two, "variables": {"a": "7", "b": "8"}}));
    let invalid = node("invalid", &base, json!({"query": "{ pet(id: \"1\") { owner } }"}));
    let mut allowed = node("allowed", &base, json!({"query": PET, "variables": {"id": "9"}, "allow_errors": true}));
    allowed["extractors"] = json!([{"name": "data", "kind": "jsonPath", "expression": "$.data"}]);
    let definition = json!({"nodes": [found, dogs, missing, both, invalid, allowed],
        "variables": {"pet": "1", "kind": "dog"}});
    let (outcome, results) = run(definition).await;
    assert_eq!(outcome.status, FinalStatus::Failed);
    assert_eq!(results.len(), 6, "{results:?}");

    assert_eq!(results[0].status, NodeStatus::Passed, "{:?}", results[0]);
    assert_eq!((&results[0].extracted["name"], &results[0].extracted["tag"]), (&json!("Rex"), &json!("dog")));
    assert_eq!(results[1].status, NodeStatus::Passed, "{:?}", results[1]);
    assert_eq!(results[1].extracted["dogs"], json!([{"id": "1", "name": "Rex"}]));

    // A resolver's error, two of them, and the library's validation error: each fails its node by the first.
    for (index, expected) in [(2, "no pet with id 9"), (3, "no pet with id "), (4, "owner")] {
        let result = &results[index];
        assert_eq!(result.status, NodeStatus::Failed, "{result:?}");
        let (shown, first) = named_first(result);
        assert!(first.contains(expected), "the server's first error {first:?} is about {expected:?}");
        assert_eq!(result.error.as_deref(), Some(shown.as_str()), "{result:?}");
    }
    assert_eq!(results[5].status, NodeStatus::Passed, "allow_errors: {:?}", results[5].error);
    assert_eq!(results[5].extracted["data"], Value::Null, "the failed non-null field nulls the data");

    // What the server received: GraphQL over HTTP's POST, the variables with their types.
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 6);
    let (content_type, accept, request) = &seen[0];
    assert_eq!(content_type.as_deref(), Some("application/json"));
    assert_eq!(accept.as_deref(), Some("application/graphql-response+json, application/json"));
    assert_eq!(request, &json!({"query": PET, "variables": {"id": "1"}, "operationName": "Pet"}));
    assert_eq!(seen[1].2["variables"], json!({"tag": "dog", "first": 1}));
    assert!(seen[4].2.get("variables").is_none() && seen[4].2.get("operationName").is_none(), "{:?}", seen[4]);
    assert_eq!(results[0].request.as_ref().expect("request").method, "POST");
}

#[tokio::test]
async fn the_servers_try_of_a_graphql_node_names_the_first_error() {
    let app = TestApp::spawn_with(|settings| settings.allow_private_targets = true).await;
    let (base, seen) = server().await;
    let flow = app.create_flow("graphql", json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]})).await;
    let try_node = |id: &str| {
        let mut node = node("pet", &base, json!({"query": PET, "variables": {"id": id}}));
        node["extractors"] = json!([{"name": "name", "kind": "jsonPath", "expression": "$.data.pet.name"}]);
        node["assertions"] = json!([{"source": "name", "operator": "equals", "expected": "Tom"}]);
        json!({"node": node})
    };
    let found = app.admin(Method::POST, &format!("/flows/{flow}/try"), Some(try_node("2"))).await;
    assert_eq!((found.status.as_u16(), &found.body["status"]), (200, &json!("passed")), "{}", found.text);
    let missing = app.admin(Method::POST, &format!("/flows/{flow}/try"), Some(try_node("5"))).await;
    assert_eq!(missing.body["status"], "failed", "{}", missing.text);
    let error = missing.body["error"].as_str().unwrap_or_default();
    assert_eq!(error, "the GraphQL answer has 1 error(s); the first: no pet with id 5", "{}", missing.text);
    assert_eq!(seen.lock().expect("seen").len(), 2, "both reached the GraphQL server");
}
