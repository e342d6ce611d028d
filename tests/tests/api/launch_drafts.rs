//! Launches run a flow as it is at launch, although each server keeps the drafts it validated: an edit through
//! another replica reaches the next launch at once, a published version runs as published, and collection requests
//! are inlined afresh each time (the kept draft keeps its references). A plain launch of a kept draft reads nothing
//! first: the statement that creates it checks the draft, the flow's organization and the environment.

use hookflow_tests::{Creds, TestApp};
use reqwest::Method;
use serde_json::{Value, json};

fn one_node(id: &str) -> Value {
    json!({"nodes": [{"id": id, "kind": "delay", "delay_ms": 1}]})
}

/// An ephemeral launch on `app`, answering the definition its claim carries.
async fn launched_definition(app: &TestApp, flow: &str, body: Value) -> Value {
    let mut body = body;
    body["mode"] = json!("ephemeral");
    app.launch(flow, body).await["job"]["flow"]["definition"].clone()
}

#[tokio::test]
async fn every_launch_runs_the_flow_as_it_is_now_whichever_replica_edited_it() {
    let app = TestApp::spawn_for_execution().await;
    let other = app.replica().await;
    let flow = app.create_flow("edited", one_node("first")).await;
    let first_node = |definition: Value| definition["nodes"][0]["id"].as_str().map(str::to_owned);
    for _ in 0..2 {
        assert_eq!(first_node(launched_definition(&app, &flow, json!({})).await).as_deref(), Some("first"));
    }
    for (editor, method, node) in [(&other, Method::PATCH, "second"), (&app, Method::PUT, "third")] {
        let mut body = json!({"definition": one_node(node)});
        if method == Method::PUT {
            body["name"] = json!("edited");
        }
        let edited = editor.admin(method, &format!("/flows/{flow}"), Some(body)).await;
        assert_eq!(edited.status, 200, "{}", edited.text);
        for _ in 0..2 {
            let ran = first_node(launched_definition(&app, &flow, json!({})).await);
            assert_eq!(ran.as_deref(), Some(node), "the launch after an edit through another server runs the edit");
        }
    }
    assert_eq!(other.admin(Method::POST, &format!("/flows/{flow}/publish"), None).await.status, 201);
    other.admin(Method::PATCH, &format!("/flows/{flow}"), Some(json!({"definition": one_node("fourth")}))).await;
    let version = first_node(launched_definition(&app, &flow, json!({"version": 1})).await);
    assert_eq!(version.as_deref(), Some("third"), "a published version runs as published");
    assert_eq!(first_node(launched_definition(&app, &flow, json!({})).await).as_deref(), Some("fourth"));
}

#[tokio::test]
async fn collection_requests_are_inlined_afresh_at_each_launch_of_a_kept_draft() {
    let app = TestApp::spawn_for_execution().await;
    let collection = app.admin(Method::POST, "/collections", Some(json!({"name": "Orders API"}))).await;
    let collection = collection.body["id"].as_str().expect("collection id").to_owned();
    let requests = format!("/collections/{collection}/requests");
    let request = json!({"name": "List", "method": "GET", "url": "http://127.0.0.1:9/v1/orders"});
    let request = app.admin(Method::POST, &requests, Some(request)).await;
    assert_eq!(request.status, 201, "{}", request.text);
    let request = request.body["id"].as_str().expect("request id").to_owned();
    let definition = json!({"nodes": [{"id": "list", "kind": "request",
        "request_ref": {"collection_id": collection, "request_id": request}}]});
    let flow = app.create_flow("uses a collection", definition).await;
    let url = |definition: Value| definition["nodes"][0]["request"]["url"].as_str().map(str::to_owned);
    for _ in 0..2 {
        let inlined = url(launched_definition(&app, &flow, json!({})).await);
        assert_eq!(inlined.as_deref(), Some("http://127.0.0.1:9/v1/orders"));
    }
    let moved = json!({"name": "List", "method": "GET", "url": "http://127.0.0.1:9/v2/orders"});
    let replaced = app.admin(Method::PUT, &format!("{requests}/{request}"), Some(moved)).await;
    assert_eq!(replaced.status, 200, "{}", replaced.text);
    let inlined = url(launched_definition(&app, &flow, json!({})).await);
    assert_eq!(inlined.as_deref(), Some("http://127.0.0.1:9/v2/orders"), "the request as it is now");
}

/// The job a runner of the admin's organization claims next: its flow's name and first node.
async fn claimed(app: &TestApp, runner: &(Creds, String)) -> (String, String) {
    let job = app.next_job(&runner.0, &runner.1, 5).await;
    assert_eq!(job.status, 200, "{}", job.text);
    let flow = &job.body["flow"];
    let name = flow["name"].as_str().expect("flow name").to_owned();
    (name, flow["definition"]["nodes"][0]["id"].as_str().expect("node id").to_owned())
}

#[tokio::test]
async fn plain_launches_of_a_kept_draft_run_it_as_it_is_now_and_stay_in_their_organization() {
    let app = TestApp::spawn_for_execution().await;
    let other = app.replica().await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = (creds.clone(), app.register_runner(&creds, &[]).await);
    let flow = app.create_flow("kept", one_node("first")).await;
    // The first launch reads and keeps the draft; the second is made from the kept draft.
    for _ in 0..2 {
        app.launch_draft(&flow).await;
        assert_eq!(claimed(&app, &runner).await, ("kept".to_owned(), "first".to_owned()));
    }
    let edit = json!({"name": "renamed", "definition": one_node("second")});
    assert_eq!(other.admin(Method::PATCH, &format!("/flows/{flow}"), Some(edit)).await.status, 200);
    app.launch_draft(&flow).await;
    assert_eq!(claimed(&app, &runner).await, ("renamed".to_owned(), "second".to_owned()), "the edit runs");
    app.launch_draft(&flow).await;
    assert_eq!(claimed(&app, &runner).await, ("renamed".to_owned(), "second".to_owned()));

    // Another organization naming the flow's id gets 404 and creates nothing, though this server keeps the draft.
    let stranger = app.new_org("stranger").await;
    let foreign = app.call(Method::POST, &format!("/flows/{flow}/launch"), Some(&stranger), Some(json!({}))).await;
    assert_eq!(foreign.status, 404, "{}", foreign.text);
    let listed = app.admin(Method::GET, &format!("/flows/{flow}/executions"), None).await;
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(4), "{}", listed.text);

    // Environments are checked by the statement: a missing one is refused, an existing one applies its variables.
    let missing = app.admin(Method::POST, &format!("/flows/{flow}/launch"), Some(json!({"environment": "nope"}))).await;
    assert_eq!(missing.status, 400, "{}", missing.text);
    assert_eq!(missing.body["error"]["code"], "invalid_request", "{}", missing.text);
    let put = json!({"variables": {"region": "eu"}});
    assert_eq!(other.admin(Method::PUT, &format!("/flows/{flow}/environments/staging"), Some(put)).await.status, 200);
    app.launch(&flow, json!({"environment": "staging"})).await;
    let job = app.next_job(&runner.0, &runner.1, 5).await;
    assert_eq!(job.body["variables"]["region"], "eu", "{}", job.text);

    // A flow deleted through another server is not launched from the kept draft.
    other.delete(&format!("/flows/{flow}"), 204).await;
    let gone = app.admin(Method::POST, &format!("/flows/{flow}/launch"), Some(json!({}))).await;
    assert_eq!(gone.status, 404, "{}", gone.text);
}
