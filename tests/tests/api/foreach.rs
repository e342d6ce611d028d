//! `foreach` on module nodes (issue #52, part B), run by the embedded runner against a real target: the module
//! runs once per item with `item` and `index`, at most `parallel` at once (100 items of 50 ms with 10 in flight
//! end well under 1.5 s, where one at a time would take 5 s), the node's result lists the items, and it fails when
//! one fails unless `continue_on_failure`; the definition's checks name the field.

use hookflow_shared::api::flows::Publish;
use hookflow_tests::TestApp;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

async fn published(app: &TestApp, name: &str, definition: Value) -> String {
    let module = app.create_flow(name, definition).await;
    app.api().flows().publish(&module, &Publish::default()).await.expect("publish");
    module
}

/// The module: waits 50 ms at the target, then records what it was given.
fn slow_module(target: &Target) -> Value {
    json!({"nodes": [
        {"id": "wait", "kind": "request", "request": {"method": "GET", "url": format!("{}/slow?ms=50", target.base)},
         "extractors": [{"name": "status", "kind": "statusCode"}],
         "assertions": [{"source": "status", "operator": "equals", "expected": 200}]},
        {"id": "seen", "kind": "set_variables", "variables": {"seen": "{{item}}@{{index}}:{{tag}}"}}
    ]})
}

/// The module: asks the target for the status its item names.
fn status_module(target: &Target) -> Value {
    json!({"nodes": [
        {"id": "call", "kind": "request", "request": {"method": "GET", "url": format!("{}/status/{{{{item}}}}", target.base)},
         "extractors": [{"name": "status", "kind": "statusCode"}],
         "assertions": [{"source": "status", "operator": "equals", "expected": 200}]}
    ]})
}

async fn run(app: &TestApp, definition: Value, launch: Value) -> (Value, Value) {
    app.run_as(&app.admin, definition, launch).await
}

#[tokio::test]
async fn foreach_runs_the_module_once_per_item_in_parallel_and_lists_the_items() {
    let app = TestApp::spawn_with_embedded_runner_of(2, 1.0, Duration::from_secs(60), |_| {}).await;
    let target = Target::spawn().await;
    let module = published(&app, "slow module", slow_module(&target)).await;
    // 99 string ids and one object: a string item is given as it is, any other as its JSON text.
    let mut ids: Vec<Value> = (0..99).map(|i| json!(format!("id-{i}"))).collect();
    ids.push(json!({"k": 1}));
    let definition = json!({"nodes": [
        {"id": "each", "kind": "module", "flow_id": module, "version": "latest", "foreach": "{{ids}}",
         "parallel": 10, "inputs": {"tag": "t-{{who}}"}},
        {"id": "after", "kind": "set_variables", "variables": {"first": "{{each.items}}"}}
    ]});
    let hits = target.hits();
    let launch = json!({"variables": {"ids": serde_json::to_string(&ids).expect("json"), "who": "ada"}});
    let (execution, nodes) = run(&app, definition, launch).await;
    assert_eq!(execution["status"], "succeeded", "{execution}\n{nodes}");
    let each = &nodes["items"][0];
    assert_eq!(each["node_id"], "each");
    let took = each["duration_ms"].as_u64().expect("duration");
    assert!(took < 1_500, "100 items of 50 ms, 10 at once, took {took} ms");
    assert!(took >= 450, "10 at once cannot end 100 items of 50 ms in {took} ms");
    assert_eq!(target.hits() - hits, 100, "one request per item");
    let items = each["items"].as_array().expect("items");
    assert_eq!(items.len(), 100);
    for (i, item) in items.iter().enumerate() {
        let given = if i == 99 { r#"{"k":1}"#.to_owned() } else { format!("id-{i}") };
        assert_eq!(item["index"], i, "{item}");
        assert_eq!(item["status"], "passed", "{item}");
        assert_eq!(item["extracted"]["seen"], format!("{given}@{i}:t-ada"), "{item}");
    }
    // The items' values come back as `<node id>.items`.
    let first: Value =
        serde_json::from_str(nodes["items"][1]["extracted"]["first"].as_str().expect("text")).expect("json");
    assert_eq!(first[3]["seen"], "id-3@3:t-ada", "{first}");

    // One failing item fails the node (and the run)...
    let status = published(&app, "status module", status_module(&target)).await;
    let failing = |continues: bool| {
        json!({"nodes": [{"id": "each", "kind": "module", "flow_id": status, "version": "latest",
            "foreach": "{{codes}}", "parallel": 2, "continue_on_failure": continues}]})
    };
    let codes = json!({"variables": {"codes": "[200, 500, 201]"}});
    let (execution, nodes) = run(&app, failing(false), codes.clone()).await;
    assert_eq!(execution["status"], "failed", "{execution}");
    let each = &nodes["items"][0];
    assert_eq!(each["status"], "failed", "{each}");
    assert!(each["error"].as_str().expect("error").contains("item 1"), "{each}");
    let statuses: Vec<&str> =
        each["items"].as_array().expect("items").iter().map(|i| i["status"].as_str().expect("s")).collect();
    assert_eq!(statuses, ["passed", "failed", "failed"], "201 fails the assertion too: {each}");
    // ...unless the node continues on failure: the failures stay in its items.
    let (execution, nodes) = run(&app, failing(true), codes).await;
    assert_eq!(execution["status"], "succeeded", "{execution}");
    assert_eq!(nodes["items"][0]["items"][1]["status"], "failed");

    // What is not an array of at most 1,000 items is the node's error.
    for (value, says) in [("{\"a\": 1}", "not a JSON array"), ("nope", "not a JSON array")] {
        let (execution, nodes) = run(&app, failing(false), json!({"variables": {"codes": value}})).await;
        assert_eq!(execution["status"], "failed", "{execution}");
        assert_eq!(nodes["items"][0]["status"], "error");
        assert!(nodes["items"][0]["error"].as_str().expect("error").contains(says), "{nodes}");
    }
    let many = serde_json::to_string(&vec![200; 1_001]).expect("json");
    let (_, nodes) = run(&app, failing(false), json!({"variables": {"codes": many}})).await;
    assert!(nodes["items"][0]["error"].as_str().expect("error").contains("at most 1000"), "{nodes}");
}

#[tokio::test]
async fn foreach_and_parallel_are_checked_naming_the_field() {
    let app = TestApp::spawn().await;
    let module = app.delay_flow("module").await;
    let node = |extra: Value| {
        let mut node = json!({"id": "each", "kind": "module", "flow_id": module});
        node.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        json!({"name": "foreach checked", "definition": {"nodes": [node]}})
    };
    let refused = [
        (json!({"foreach": "{{ids}}", "parallel": 0}), "parallel"),
        (json!({"foreach": "{{ids}}", "parallel": 33}), "parallel"),
        (json!({"parallel": 2}), "parallel"),
        (json!({"foreach": "{{ids"}), "foreach"),
        (json!({"foreach": "{{ids}}", "inputs": {"item": "x"}}), "inputs.item"),
        (json!({"foreach": 3}), "foreach"),
    ];
    for (extra, field) in refused {
        let reply = app.admin(Method::POST, "/flows", Some(node(extra.clone()))).await;
        assert_eq!(reply.status, 400, "{extra}: {}", reply.text);
        assert!(reply.text.contains(field), "{extra}: {}", reply.text);
    }
    let reply = app.admin(Method::POST, "/flows", Some(node(json!({"foreach": "{{ids}}", "parallel": 32})))).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
}
