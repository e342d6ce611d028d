//! Launches run a flow as it is at launch, although each server keeps the drafts it validated: an edit through
//! another replica reaches the next launch at once, a published version runs as published, and collection requests
//! are inlined afresh each time (the kept draft keeps its references). A plain launch of a kept draft reads nothing
//! first: the statement that creates it checks the draft, the flow's organization and the environment.

use hookflow_shared::api::collections::{WriteCollection, WriteRequest};
use hookflow_shared::api::executions::Launch;
use hookflow_shared::api::flows::{PatchFlow, Publish, PutEnvironment, WriteFlow};
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
        let flows = editor.api();
        let flows = flows.flows();
        if method == Method::PUT {
            let put = WriteFlow::new("edited".parse().expect("a name"), one_node(node));
            flows.put(&flow, &put).await.expect("put");
        } else {
            let patch = PatchFlow { definition: Some(one_node(node)), ..Default::default() };
            flows.patch(&flow, &patch).await.expect("patch");
        }
        for _ in 0..2 {
            let ran = first_node(launched_definition(&app, &flow, json!({})).await);
            assert_eq!(ran.as_deref(), Some(node), "the launch after an edit through another server runs the edit");
        }
    }
    other.api().flows().publish(&flow, &Publish::default()).await.expect("publish");
    let fourth = PatchFlow { definition: Some(one_node("fourth")), ..Default::default() };
    other.api().flows().patch(&flow, &fourth).await.expect("patch");
    let version = first_node(launched_definition(&app, &flow, json!({"version": 1})).await);
    assert_eq!(version.as_deref(), Some("third"), "a published version runs as published");
    assert_eq!(first_node(launched_definition(&app, &flow, json!({})).await).as_deref(), Some("fourth"));
}

#[tokio::test]
async fn collection_requests_are_inlined_afresh_at_each_launch_of_a_kept_draft() {
    let app = TestApp::spawn_for_execution().await;
    let api = app.api();
    let orders = WriteCollection::new("Orders API".parse().expect("a name"));
    let collection = api.collections().create(&orders).await.expect("create").collection.id;
    let list =
        |url: &str| WriteRequest { name: "List".into(), method: "GET".into(), url: url.into(), ..Default::default() };
    let request = api.collections().add_request(collection, &list("http://127.0.0.1:9/v1/orders")).await;
    let request = request.expect("add").id;
    let definition = json!({"nodes": [{"id": "list", "kind": "request",
        "request_ref": {"collection_id": collection, "request_id": request}}]});
    let flow = app.create_flow("uses a collection", definition).await;
    let url = |definition: Value| definition["nodes"][0]["request"]["url"].as_str().map(str::to_owned);
    for _ in 0..2 {
        let inlined = url(launched_definition(&app, &flow, json!({})).await);
        assert_eq!(inlined.as_deref(), Some("http://127.0.0.1:9/v1/orders"));
    }
    api.collections().put_request(collection, request, &list("http://127.0.0.1:9/v2/orders")).await.expect("put");
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
    let renamed = Some("renamed".parse().expect("a name"));
    let edit = PatchFlow { name: renamed, definition: Some(one_node("second")), ..Default::default() };
    other.api().flows().patch(&flow, &edit).await.expect("patch");
    app.launch_draft(&flow).await;
    assert_eq!(claimed(&app, &runner).await, ("renamed".to_owned(), "second".to_owned()), "the edit runs");
    app.launch_draft(&flow).await;
    assert_eq!(claimed(&app, &runner).await, ("renamed".to_owned(), "second".to_owned()));

    // Another organization naming the flow's id gets 404 and creates nothing, though this server keeps the draft.
    let stranger = app.new_org("stranger").await;
    let foreign = app.api_as(&stranger).flows().launch(&flow, &Launch::default()).await;
    assert_eq!(foreign.expect_err("not theirs").status(), 404);
    let listed = app.api().executions().list(&flow, &[]).await.expect("list");
    assert_eq!(listed.items.len(), 4, "{listed:?}");

    // Environments are checked by the statement: a missing one is refused, an existing one applies its variables.
    let nope = Launch { environment: Some("nope".into()), ..Default::default() };
    let missing = app.api().flows().launch(&flow, &nope).await.expect_err("no such environment");
    assert_eq!((missing.status(), missing.code()), (400, "invalid_request"), "{missing}");
    let put = PutEnvironment { variables: [("region".to_owned(), "eu".to_owned())].into() };
    other.api().flows().put_environment(&flow, "staging", &put).await.expect("put staging");
    app.launch(&flow, json!({"environment": "staging"})).await;
    let job = app.next_job(&runner.0, &runner.1, 5).await;
    assert_eq!(job.body["variables"]["region"], "eu", "{}", job.text);

    // A flow deleted through another server is not launched from the kept draft.
    other.delete(&format!("/flows/{flow}"), 204).await;
    let gone = app.api().flows().launch(&flow, &Launch::default()).await.expect_err("deleted");
    assert_eq!(gone.status(), 404, "{gone}");
}
