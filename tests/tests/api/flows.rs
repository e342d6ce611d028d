//! Flows: draft CRUD and validation, search and tags, versions, environments, export/import, schedules, scopes
//! and isolation.

use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};

fn definition(url: &str) -> Value {
    json!({"variables": {"base_url": "https://api.example.com"}, "timeout_s": 300,
    "nodes": [
        {"id": "login", "kind": "request",
         "request": {"method": "POST", "url": url, "body": "{\"password\": \"{{secret.API_PASSWORD}}\"}"},
         "extractors": [{"name": "token", "kind": "jsonPath", "expression": "$.token"}],
         "assertions": [{"source": "token", "operator": "exists"}]},
        {"id": "wait", "kind": "delay", "delay_ms": 10}
    ]})
}

async fn create(app: &TestApp, name: &str, tags: Value) -> Value {
    let reply = app
        .admin(
            Method::POST,
            "/flows",
            Some(json!({"name": name, "tags": tags, "definition": definition("{{base_url}}/login")})),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.body
}

#[tokio::test]
async fn a_flow_is_created_changed_and_deleted() {
    let app = TestApp::spawn().await;
    let flow = create(&app, "checkout", json!(["smoke", "payments", "smoke"])).await;
    let id = flow["id"].as_str().expect("id").to_owned();
    assert_eq!(flow["tags"], json!(["smoke", "payments"]), "tags deduplicated");
    assert_eq!(flow["draft_revision"], 1);
    assert_eq!(flow["published_version"], json!(null));
    assert_eq!(flow["definition"], definition("{{base_url}}/login"), "stored as given");

    let put = app
        .admin(
            Method::PUT,
            &format!("/flows/{id}"),
            Some(json!({"name": "checkout v2", "definition": definition("{{base_url}}/v2"),
            "schedule": "*/15 * * * *"})),
        )
        .await;
    assert_eq!(put.status, 200, "{}", put.text);
    assert_eq!((put.body["draft_revision"].as_i64(), put.body["tags"].clone()), (Some(2), json!([])));
    assert_eq!(put.body["schedule"], "*/15 * * * *");
    let patched = app
        .admin(Method::PATCH, &format!("/flows/{id}"), Some(json!({"description": "the happy path", "schedule": null})))
        .await;
    assert_eq!(patched.body["draft_revision"], 3);
    assert_eq!(patched.body["schedule"], json!(null));
    assert_eq!(patched.body["name"], "checkout v2");
    assert_eq!(app.admin(Method::GET, &format!("/flows/{id}"), None).await.body, patched.body);

    let duplicate =
        app.admin(Method::POST, "/flows", Some(json!({"name": "checkout v2", "definition": definition("x")}))).await;
    assert_eq!((duplicate.status.as_u16(), duplicate.code()), (409, "conflict"));
    assert_eq!(app.admin(Method::DELETE, &format!("/flows/{id}"), None).await.status, 204);
    assert_eq!(app.admin(Method::GET, &format!("/flows/{id}"), None).await.status, 404);
    assert_eq!(app.admin(Method::DELETE, &format!("/flows/{id}"), None).await.status, 404);
}

#[tokio::test]
async fn invalid_definitions_and_fields_are_400_with_the_problem() {
    let app = TestApp::spawn().await;
    let mut bad_method = definition("x");
    bad_method["nodes"][0]["request"]["method"] = json!("FETCH");
    let mut bad_extractor = definition("x");
    bad_extractor["nodes"][0]["extractors"][0]["expression"] = json!("$.[");
    let mut bad_delay = definition("x");
    bad_delay["nodes"][1]["delay_ms"] = json!("soon");
    for (body, named) in [
        (json!({"name": "f", "definition": bad_method}), "request.method"),
        (json!({"name": "f", "definition": bad_extractor}), "extractors[0]"),
        (json!({"name": "f", "definition": bad_delay}), "delay_ms"),
        (json!({"name": "f", "definition": {"nodes": []}}), "nodes"),
        (json!({"name": "f", "definition": definition("x"), "schedule": "every hour"}), "schedule"),
        (json!({"name": "f", "definition": definition("x"), "tags": [""]}), "tags"),
        (json!({"name": "", "definition": definition("x")}), "name"),
        (json!({"name": "f"}), "definition"),
        (json!({"name": "f", "definition": definition("x"), "owner": "me"}), "owner"),
    ] {
        let reply = app.admin(Method::POST, "/flows", Some(body.clone())).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{body}");
        let message = reply.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{named}: {message}");
    }
    let count = app.rows("flows").await;
    assert_eq!(count, 0);
    // Definitions up to 10 MiB are accepted (the API default is 1 MiB).
    let mut big = definition("x");
    big["nodes"][0]["request"]["body"] = json!("b".repeat(2 * 1024 * 1024));
    assert_eq!(app.admin(Method::POST, "/flows", Some(json!({"name": "big", "definition": big}))).await.status, 201);
}

#[tokio::test]
async fn list_search_and_tags() {
    let app = TestApp::spawn().await;
    let a = create(&app, "alpha checkout", json!(["smoke", "payments"])).await;
    let b = create(&app, "beta login", json!(["smoke"])).await;
    let c = create(&app, "gamma", json!([])).await;
    let ids = |reply: &hookflow_tests::Reply| -> Vec<String> {
        reply.body["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|f| f["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let all = app.admin(Method::GET, "/flows", None).await;
    assert_eq!(ids(&all), [&c["id"], &b["id"], &a["id"]].map(|v| v.as_str().expect("id").to_owned()));
    let smoke = app.admin(Method::GET, "/flows?tag=smoke&limit=1", None).await;
    assert_eq!(ids(&smoke), [b["id"].as_str().expect("id")]);
    let next = app.next_page("/flows?tag=smoke&limit=1", &smoke).await;
    assert_eq!(ids(&next), [a["id"].as_str().expect("id")]);
    assert_eq!(ids(&app.admin(Method::GET, "/flows?q=LOGIN", None).await), [b["id"].as_str().expect("id")]);
    let search = app.admin(Method::POST, "/flows/search", Some(json!({"tags": ["smoke", "payments"]}))).await;
    assert_eq!(ids(&search), [a["id"].as_str().expect("id")]);
    let none = app.admin(Method::POST, "/flows/search", Some(json!({"q": "checkout", "last_status": "failed"}))).await;
    assert_eq!(none.body["items"], json!([]));
    assert_eq!(app.admin(Method::POST, "/flows/search", Some(json!({"limit": 0}))).await.code(), "invalid_request");
    assert_eq!(app.admin(Method::GET, "/flows?limit=500", None).await.status, 200, "clamped, not refused");
    let tags = app.admin(Method::GET, "/flows/tags", None).await;
    assert_eq!(tags.body, json!({"items": [{"tag": "smoke", "count": 2}, {"tag": "payments", "count": 1}]}));
}

#[tokio::test]
async fn versions_are_immutable_snapshots_and_restorable() {
    let app = TestApp::spawn().await;
    let flow = create(&app, "versioned", json!([])).await;
    let id = flow["id"].as_str().expect("id");
    let v1 = app.admin(Method::POST, &format!("/flows/{id}/publish"), Some(json!({"note": "first"}))).await;
    assert_eq!(v1.status, 201, "{}", v1.text);
    assert_eq!((v1.body["version"].as_i64(), v1.body["note"].as_str()), (Some(1), Some("first")));
    app.admin(Method::PATCH, &format!("/flows/{id}"), Some(json!({"definition": definition("{{base_url}}/changed")})))
        .await;
    let v2 = app.admin(Method::POST, &format!("/flows/{id}/publish"), None).await;
    assert_eq!(v2.body["version"], 2);
    assert_eq!(v2.body["definition"]["nodes"][0]["request"]["url"], "{{base_url}}/changed");

    let v1_id = v1.body["id"].as_str().expect("id");
    let again = app.admin(Method::GET, &format!("/flows/{id}/versions/{v1_id}"), None).await;
    assert_eq!(again.body, v1.body, "a published version never changes");
    let list = app.admin(Method::GET, &format!("/flows/{id}/versions"), None).await;
    let numbers: Vec<i64> =
        list.body["items"].as_array().expect("items").iter().map(|v| v["version"].as_i64().expect("n")).collect();
    assert_eq!(numbers, [2, 1], "newest first");
    assert_eq!(app.admin(Method::GET, &format!("/flows/{id}"), None).await.body["published_version"], 2);

    let restored = app.admin(Method::POST, &format!("/flows/{id}/versions/{v1_id}/restore"), None).await;
    assert_eq!(restored.status, 200, "{}", restored.text);
    assert_eq!(restored.body["definition"], v1.body["definition"]);
    assert_eq!(restored.body["draft_revision"], 3);
    let log = app.admin(Method::GET, "/audit-log?limit=3", None).await;
    let actions: Vec<&str> =
        log.body["items"].as_array().expect("items").iter().map(|e| e["action"].as_str().expect("a")).collect();
    assert_eq!(actions, ["flow.restored", "flow.published", "flow.published"]);

    assert_eq!(
        app.admin(Method::GET, &format!("/flows/{id}/versions/{}", uuid::Uuid::now_v7()), None).await.status,
        404
    );
    assert_eq!(
        app.admin(Method::POST, &format!("/flows/{id}/publish"), Some(json!({"notes": "x"}))).await.code(),
        "invalid_request"
    );
}

#[tokio::test]
async fn validation_checks_module_references() {
    let app = TestApp::spawn().await;
    let child = create(&app, "child", json!([])).await;
    let child_id = child["id"].as_str().expect("id");
    let mut parent_definition = definition("x");
    parent_definition["nodes"][1] = json!({"id": "sub", "kind": "module", "flow_id": child_id, "version": "latest"});
    let parent =
        app.admin(Method::POST, "/flows", Some(json!({"name": "parent", "definition": parent_definition}))).await;
    let parent_id = parent.body["id"].as_str().expect("id");
    let report = app.admin(Method::POST, &format!("/flows/{parent_id}/validate"), None).await;
    assert_eq!(report.body["valid"], false);
    assert_eq!(report.body["problems"][0]["node_id"], "sub");
    assert!(report.body["problems"][0]["message"].as_str().expect("m").contains("no published version"));
    app.admin(Method::POST, &format!("/flows/{child_id}/publish"), None).await;
    let report = app.admin(Method::POST, &format!("/flows/{parent_id}/validate"), None).await;
    assert_eq!(report.body, json!({"valid": true, "problems": []}));
    let reader = app.creds_with(&["flows:read"]).await;
    assert_eq!(app.call(Method::POST, &format!("/flows/{parent_id}/validate"), Some(&reader), None).await.status, 200);
}

/// `POST /flows/validate`: an unsaved definition gets the stored draft's checks, node by node and field by field,
/// and another organization's flow is as absent as a flow that does not exist.
#[tokio::test]
async fn unsaved_definitions_are_validated_with_the_same_rules() {
    let app = TestApp::spawn().await;
    let broken = json!({"nodes": [
        {"id": "a", "kind": "delay", "delay_ms": 1},
        {"id": "a", "kind": "delay", "delay_ms": 1},
        {"id": "b", "kind": "request", "request": {"method": "GET", "url": "http://x"},
         "extractors": [{"name": "v", "kind": "jsonPath", "expression": "$["}]}
    ]});
    let report = app.post::<Value>("/flows/validate", &json!({"definition": broken}), 200).await;
    assert_eq!(report["valid"], false);
    let problems = report["problems"].as_array().expect("problems");
    assert!(problems.iter().any(|p| p["node_id"] == "a"), "the repeated id: {problems:?}");
    assert!(
        problems
            .iter()
            .any(|p| p["node_id"] == "b" && p["field"].as_str().is_some_and(|f| f.starts_with("extractors"))),
        "the bad expression, by node and field: {problems:?}"
    );
    let fine = app.post::<Value>("/flows/validate", &json!({"definition": definition("http://x")}), 200).await;
    assert_eq!(fine, json!({"valid": true, "problems": []}));

    // A module naming this flow itself, or another organization's flow.
    let own = create(&app, "own", json!([])).await;
    let own_id = own["id"].as_str().expect("id");
    let other = app.new_org("Other").await;
    let theirs = app
        .call(Method::POST, "/flows", Some(&other), Some(json!({"name": "theirs", "definition": definition("x")})))
        .await;
    app.call(Method::POST, &format!("/flows/{}/publish", theirs.body["id"].as_str().expect("id")), Some(&other), None)
        .await;
    let modules = json!({"nodes": [
        {"id": "me", "kind": "module", "flow_id": own_id},
        {"id": "them", "kind": "module", "flow_id": theirs.body["id"]}
    ]});
    let report = app.post::<Value>("/flows/validate", &json!({"definition": modules, "flow_id": own_id}), 200).await;
    assert_eq!(report["problems"][0]["node_id"], "me");
    assert!(report["problems"][0]["message"].as_str().expect("m").contains("cannot run itself"));
    assert_eq!(report["problems"][1]["node_id"], "them");
    assert!(report["problems"][1]["message"].as_str().expect("m").contains("does not exist in this organization"));

    // Errors: a body that is not the request's shape, and a key without flows:read.
    let bad = app.admin(Method::POST, "/flows/validate", Some(json!({"definition": {}, "extra": 1}))).await;
    assert_eq!((bad.status.as_u16(), bad.code()), (400, "invalid_request"));
    // A definition that is not an object is not a definition: refused as the document says, not "checked".
    let list = app.admin(Method::POST, "/flows/validate", Some(json!({"definition": [null, null]}))).await;
    assert_eq!((list.status.as_u16(), list.code()), (400, "invalid_request"));
    let null = app.admin(Method::POST, "/flows/validate", Some(json!({"definition": null}))).await;
    assert_eq!((null.status.as_u16(), null.code()), (400, "invalid_request"));
    let writer = app.creds_with(&["webhooks:read"]).await;
    let refused = app.call(Method::POST, "/flows/validate", Some(&writer), Some(json!({"definition": {}}))).await;
    assert_eq!((refused.status.as_u16(), refused.code()), (403, "insufficient_scope"));
}

#[tokio::test]
async fn environments_hold_variables_and_secret_references() {
    let app = TestApp::spawn().await;
    let flow = create(&app, "env", json!([])).await;
    let id = flow["id"].as_str().expect("id");
    let put = app
        .admin(
            Method::PUT,
            &format!("/flows/{id}/environments/staging"),
            Some(
                json!({"variables": {"base_url": "https://staging.example.com", "password": "{{secret.STAGING_PW}}"}}),
            ),
        )
        .await;
    assert_eq!(put.status, 200, "{}", put.text);
    assert_eq!(put.body["secret_refs"], json!(["STAGING_PW"]));
    app.admin(Method::PUT, &format!("/flows/{id}/environments/prod"), Some(json!({"variables": {}}))).await;
    let list = app.admin(Method::GET, &format!("/flows/{id}/environments"), None).await;
    let keys: Vec<&str> =
        list.body["items"].as_array().expect("items").iter().map(|e| e["key"].as_str().expect("key")).collect();
    assert_eq!(keys, ["prod", "staging"]);
    for bad in [
        ("bad key!", json!({"variables": {}})),
        ("ok", json!({"variables": {"x": "{{open"}})),
        ("ok", json!({"vars": {}})),
    ] {
        let reply = app
            .admin(Method::PUT, &format!("/flows/{id}/environments/{}", bad.0.replace(' ', "%20")), Some(bad.1))
            .await;
        assert_eq!(reply.code(), "invalid_request", "{}", bad.0);
    }
    assert_eq!(app.admin(Method::DELETE, &format!("/flows/{id}/environments/prod"), None).await.status, 204);
    assert_eq!(app.admin(Method::DELETE, &format!("/flows/{id}/environments/prod"), None).await.status, 404);
}

#[tokio::test]
async fn export_imports_into_another_organization_without_secret_values() {
    let app = TestApp::spawn().await;
    let secret_value = "pa55-do-not-export";
    app.admin(Method::PUT, "/secrets/API_PASSWORD", Some(json!({"value": secret_value}))).await;
    let flow = create(&app, "portable", json!(["smoke"])).await;
    let id = flow["id"].as_str().expect("id");
    app.admin(Method::POST, &format!("/flows/{id}/publish"), Some(json!({"note": "v1"}))).await;
    app.admin(
        Method::PUT,
        &format!("/flows/{id}/environments/staging"),
        Some(json!({"variables": {"pw": "{{secret.API_PASSWORD}}"}})),
    )
    .await;
    let export = app.admin(Method::GET, &format!("/flows/{id}/export"), None).await;
    assert_eq!(export.status, 200);
    assert_eq!(export.body["format"], "hookflow.flow/v1");
    assert_eq!(export.body["versions"][0]["note"], "v1");
    assert!(!export.text.contains(secret_value), "never secret values");
    assert!(export.text.contains("{{secret.API_PASSWORD}}"), "only references");

    let other = app.new_org("Globex").await;
    let imported = app.call(Method::POST, "/flows/import", Some(&other), Some(export.body.clone())).await;
    assert_eq!(imported.status, 201, "{}", imported.text);
    let new_id = imported.body["id"].as_str().expect("id");
    assert_ne!(new_id, id);
    assert_eq!(imported.body["published_version"], 1);
    assert_eq!(imported.body["definition"], flow["definition"]);
    let envs = app.call(Method::GET, &format!("/flows/{new_id}/environments"), Some(&other), None).await;
    assert_eq!(envs.body["items"][0]["secret_refs"], json!(["API_PASSWORD"]));
    let twice = app.call(Method::POST, "/flows/import", Some(&other), Some(export.body.clone())).await;
    assert_eq!(twice.code(), "conflict", "the name is taken now");
    let mut wrong = export.body.clone();
    wrong["format"] = json!("other/v9");
    assert_eq!(app.call(Method::POST, "/flows/import", Some(&other), Some(wrong)).await.code(), "invalid_request");
}

#[tokio::test]
async fn scopes_and_other_organizations() {
    let app = TestApp::spawn().await;
    let flow = create(&app, "mine", json!([])).await;
    let id = flow["id"].as_str().expect("id");
    let version = app.admin(Method::POST, &format!("/flows/{id}/publish"), None).await;
    let version_id = version.body["id"].as_str().expect("id");
    let reader = app.creds_with(&["flows:read"]).await;
    assert_eq!(app.call(Method::GET, "/flows", Some(&reader), None).await.status, 200);
    for (method, path) in [
        (Method::POST, "/flows".to_owned()),
        (Method::DELETE, format!("/flows/{id}")),
        (Method::POST, format!("/flows/{id}/publish")),
    ] {
        assert_eq!(
            app.call(method, &path, Some(&reader), Some(json!({}))).await.code(),
            "insufficient_scope",
            "{path}"
        );
    }
    let executor = app.creds_with(&["flows:execute"]).await;
    assert_eq!(app.call(Method::GET, "/flows", Some(&executor), None).await.code(), "insufficient_scope");

    let other = app.new_org("Globex").await;
    for (method, path, body) in [
        (Method::GET, format!("/flows/{id}"), None),
        (Method::PUT, format!("/flows/{id}"), Some(json!({"name": "x", "definition": definition("x")}))),
        (Method::PATCH, format!("/flows/{id}"), Some(json!({"name": "x"}))),
        (Method::DELETE, format!("/flows/{id}"), None),
        (Method::POST, format!("/flows/{id}/validate"), None),
        (Method::POST, format!("/flows/{id}/publish"), None),
        (Method::GET, format!("/flows/{id}/versions"), None),
        (Method::GET, format!("/flows/{id}/versions/{version_id}"), None),
        (Method::POST, format!("/flows/{id}/versions/{version_id}/restore"), None),
        (Method::GET, format!("/flows/{id}/environments"), None),
        (Method::PUT, format!("/flows/{id}/environments/dev"), Some(json!({"variables": {}}))),
        (Method::DELETE, format!("/flows/{id}/environments/dev"), None),
        (Method::GET, format!("/flows/{id}/export"), None),
    ] {
        let reply = app.call(method.clone(), &path, Some(&other), body).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"), "{method} {path}: {}", reply.text);
    }
    assert_eq!(app.call(Method::GET, "/flows", Some(&other), None).await.body["items"], json!([]));
    assert_eq!(app.call(Method::GET, "/flows/tags", Some(&other), None).await.body["items"], json!([]));
    let still = app.admin(Method::GET, &format!("/flows/{id}"), None).await;
    assert_eq!((still.body["name"].as_str(), still.body["draft_revision"].as_i64()), (Some("mine"), Some(1)));
}
