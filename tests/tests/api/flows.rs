//! Flows: draft CRUD and validation, search and tags, versions, environments, export/import, schedules, scopes
//! and isolation.

use hookflow_shared::FlowId;
use hookflow_shared::api::flows::{
    Flow, FlowDocument, PatchFlow, Publish, PutEnvironment, SearchFlows, ValidateDefinition, WriteFlow,
};
use hookflow_shared::api::{Page, Patch};
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;

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

fn write(name: &str, definition: Value) -> WriteFlow {
    WriteFlow::new(name.parse().expect("a name"), definition)
}

async fn create(app: &TestApp, name: &str, tags: &[&str]) -> Flow {
    let flow = WriteFlow {
        tags: tags.iter().map(|t| t.to_string()).collect::<Vec<_>>().try_into().expect("tags"),
        ..write(name, definition("{{base_url}}/login"))
    };
    app.api().flows().create(&flow).await.expect("create the flow")
}

fn ids(page: &Page<Flow>) -> Vec<FlowId> {
    page.items.iter().map(|f| f.id).collect()
}

#[tokio::test]
async fn a_flow_is_created_changed_and_deleted() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let flow = create(&app, "checkout", &["smoke", "payments", "smoke"]).await;
    let id = flow.id;
    assert_eq!(flow.tags, ["smoke", "payments"], "tags deduplicated");
    assert_eq!(flow.draft_revision, 1);
    assert_eq!(flow.published_version, None);
    assert_eq!(flow.definition, definition("{{base_url}}/login"), "stored as given");

    let put =
        WriteFlow { schedule: Some("*/15 * * * *".into()), ..write("checkout v2", definition("{{base_url}}/v2")) };
    let put = api.flows().put(id, &put).await.expect("put");
    assert_eq!((put.draft_revision, put.tags), (2, Vec::<String>::new()));
    assert_eq!(put.schedule.as_deref(), Some("*/15 * * * *"));
    let patch = PatchFlow {
        description: Patch::Set("the happy path".parse().expect("a text")),
        schedule: Patch::Clear,
        ..Default::default()
    };
    let patched = api.flows().patch(id, &patch).await.expect("patch");
    assert_eq!(patched.draft_revision, 3);
    assert_eq!(patched.schedule, None);
    assert_eq!(patched.name, "checkout v2");
    let got = api.flows().get(id).await.expect("get");
    assert_eq!(serde_json::to_value(got).expect("json"), serde_json::to_value(&patched).expect("json"));

    let duplicate = api.flows().create(&write("checkout v2", definition("x"))).await.expect_err("a taken name");
    assert_eq!((duplicate.status(), duplicate.code()), (409, "conflict"));
    api.flows().delete(id).await.expect("delete");
    assert_eq!(api.flows().get(id).await.expect_err("gone").status(), 404);
    assert_eq!(api.flows().delete(id).await.expect_err("gone").status(), 404);
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
    app.api().flows().create(&write("big", big)).await.expect("a 2 MiB definition");
}

#[tokio::test]
async fn list_search_and_tags() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let a = create(&app, "alpha checkout", &["smoke", "payments"]).await;
    let b = create(&app, "beta login", &["smoke"]).await;
    let c = create(&app, "gamma", &[]).await;
    let all = api.flows().list(&[]).await.expect("list");
    assert_eq!(ids(&all), [c.id, b.id, a.id]);
    let smoke = api.flows().list(&[("tag", "smoke"), ("limit", "1")]).await.expect("list");
    assert_eq!(ids(&smoke), [b.id]);
    let cursor = smoke.next_cursor.as_deref().expect("a next page");
    let next = api.flows().list(&[("tag", "smoke"), ("limit", "1"), ("cursor", cursor)]).await.expect("list");
    assert_eq!(ids(&next), [a.id]);
    assert_eq!(ids(&api.flows().list(&[("q", "LOGIN")]).await.expect("list")), [b.id]);
    let both = SearchFlows { tags: vec!["smoke".into(), "payments".into()], ..Default::default() };
    assert_eq!(ids(&api.flows().search(&both).await.expect("search")), [a.id]);
    let none = SearchFlows {
        q: Some("checkout".into()),
        last_status: Some(hookflow_shared::api::executions::ExecutionStatus::Failed),
        ..Default::default()
    };
    assert!(api.flows().search(&none).await.expect("search").items.is_empty());
    let zero = SearchFlows { limit: Some(0), ..Default::default() };
    assert_eq!(api.flows().search(&zero).await.expect_err("limit 0").code(), "invalid_request");
    api.flows().list(&[("limit", "500")]).await.expect("clamped, not refused");
    let tags = api.flows().tags().await.expect("tags");
    let tags: Vec<(&str, i64)> = tags.items.iter().map(|t| (t.tag.as_str(), t.count)).collect();
    assert_eq!(tags, [("smoke", 2), ("payments", 1)]);
}

#[tokio::test]
async fn versions_are_immutable_snapshots_and_restorable() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let id = create(&app, "versioned", &[]).await.id;
    let v1 = api.flows().publish(id, &Publish { note: Some("first".parse().expect("a note")) }).await.expect("publish");
    assert_eq!((v1.version, v1.note.as_deref()), (1, Some("first")));
    let changed = PatchFlow { definition: Some(definition("{{base_url}}/changed")), ..Default::default() };
    api.flows().patch(id, &changed).await.expect("patch");
    // No body at all, as a bare publish is sent.
    let v2: hookflow_shared::api::flows::FlowVersion =
        api.post_empty(&format!("/flows/{id}/publish")).await.expect("publish without a body");
    assert_eq!(v2.version, 2);
    assert_eq!(v2.definition["nodes"][0]["request"]["url"], "{{base_url}}/changed");

    let again = api.flows().version(id, v1.id).await.expect("version");
    assert_eq!(
        serde_json::to_value(again).expect("json"),
        serde_json::to_value(&v1).expect("json"),
        "a published version never changes"
    );
    let list = api.flows().versions(id).await.expect("versions");
    let numbers: Vec<i32> = list.items.iter().map(|v| v.version).collect();
    assert_eq!(numbers, [2, 1], "newest first");
    assert_eq!(api.flows().get(id).await.expect("get").published_version, Some(2));

    let restored = api.flows().restore(id, v1.id).await.expect("restore");
    assert_eq!(restored.definition, v1.definition);
    assert_eq!(restored.draft_revision, 3);
    let log = api.organization().audit_log(&[("limit", "3")]).await.expect("audit log");
    let actions: Vec<&str> = log.items.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["flow.restored", "flow.published", "flow.published"]);

    assert_eq!(api.flows().version(id, uuid::Uuid::now_v7()).await.expect_err("no such version").status(), 404);
    assert_eq!(
        app.admin(Method::POST, &format!("/flows/{id}/publish"), Some(json!({"notes": "x"}))).await.code(),
        "invalid_request"
    );
}

#[tokio::test]
async fn validation_checks_module_references() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let child_id = create(&app, "child", &[]).await.id;
    let mut parent_definition = definition("x");
    parent_definition["nodes"][1] = json!({"id": "sub", "kind": "module", "flow_id": child_id, "version": "latest"});
    let parent_id = api.flows().create(&write("parent", parent_definition)).await.expect("create").id;
    let report = api.flows().validate(parent_id).await.expect("validate");
    assert!(!report.valid);
    assert_eq!(report.problems[0].node_id.as_deref(), Some("sub"));
    assert!(report.problems[0].message.contains("no published version"));
    api.flows().publish(child_id, &Publish::default()).await.expect("publish");
    let report = api.flows().validate(parent_id).await.expect("validate");
    assert!(report.valid && report.problems.is_empty(), "{:?}", report.problems);
    let reader = app.creds_with(&["flows:read"]).await;
    app.api_as(&reader).flows().validate(parent_id).await.expect("flows:read validates");
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
    let own_id = create(&app, "own", &[]).await.id;
    let other = app.api_as(&app.new_org("Other").await);
    let theirs = other.flows().create(&write("theirs", definition("x"))).await.expect("create").id;
    other.flows().publish(theirs, &Publish::default()).await.expect("publish");
    let modules = json!({"nodes": [
        {"id": "me", "kind": "module", "flow_id": own_id},
        {"id": "them", "kind": "module", "flow_id": theirs}
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
    let writer = app.api_as(&app.creds_with(&["webhooks:read"]).await);
    let empty = ValidateDefinition { definition: json!({}), flow_id: None };
    let refused = writer.flows().validate_definition(&empty).await.expect_err("no flows:read");
    assert_eq!((refused.status(), refused.code()), (403, "insufficient_scope"));
}

#[tokio::test]
async fn environments_hold_variables_and_secret_references() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let id = create(&app, "env", &[]).await.id;
    let staging = PutEnvironment {
        variables: BTreeMap::from([
            ("base_url".into(), "https://staging.example.com".into()),
            ("password".into(), "{{secret.STAGING_PW}}".into()),
        ]),
    };
    let put = api.flows().put_environment(id, "staging", &staging).await.expect("put staging");
    assert_eq!(put.secret_refs, ["STAGING_PW"]);
    api.flows().put_environment(id, "prod", &PutEnvironment { variables: BTreeMap::new() }).await.expect("put prod");
    let list = api.flows().environments(id).await.expect("environments");
    let keys: Vec<&str> = list.items.iter().map(|e| e.key.as_str()).collect();
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
    api.flows().delete_environment(id, "prod").await.expect("delete");
    assert_eq!(api.flows().delete_environment(id, "prod").await.expect_err("gone").status(), 404);
}

#[tokio::test]
async fn export_imports_into_another_organization_without_secret_values() {
    let app = TestApp::spawn().await;
    let secret_value = "pa55-do-not-export";
    let api = app.api();
    let secret = hookflow_shared::api::resources::PutSecret {
        value: secret_value.parse().expect("a value"),
        allowed_hosts: vec![],
        runners_only: false,
    };
    api.secrets().put("API_PASSWORD", &secret).await.expect("put the secret");
    let flow = create(&app, "portable", &["smoke"]).await;
    let id = flow.id;
    api.flows().publish(id, &Publish { note: Some("v1".parse().expect("a note")) }).await.expect("publish");
    let staging = PutEnvironment { variables: BTreeMap::from([("pw".into(), "{{secret.API_PASSWORD}}".into())]) };
    api.flows().put_environment(id, "staging", &staging).await.expect("put staging");
    let export: FlowDocument = api.flows().export(id).await.expect("export");
    let text = serde_json::to_string(&export).expect("json");
    assert_eq!(export.format, "hookflow.flow/v1");
    assert_eq!(export.versions[0].note.as_deref(), Some("v1"));
    assert!(!text.contains(secret_value), "never secret values");
    assert!(text.contains("{{secret.API_PASSWORD}}"), "only references");

    let other = app.api_as(&app.new_org("Globex").await);
    let imported = other.flows().import(&export).await.expect("import");
    assert_ne!(imported.id, id);
    assert_eq!(imported.published_version, Some(1));
    assert_eq!(imported.definition, flow.definition);
    let envs = other.flows().environments(imported.id).await.expect("environments");
    assert_eq!(envs.items[0].secret_refs, ["API_PASSWORD"]);
    let twice = other.flows().import(&export).await.expect_err("imported twice");
    assert_eq!(twice.code(), "conflict", "the name is taken now");
    let wrong = FlowDocument { format: "other/v9".into(), ..export };
    assert_eq!(other.flows().import(&wrong).await.expect_err("another format").code(), "invalid_request");
}

#[tokio::test]
async fn scopes_and_other_organizations() {
    let app = TestApp::spawn().await;
    let id = create(&app, "mine", &[]).await.id;
    let version_id = app.api().flows().publish(id, &Publish::default()).await.expect("publish").id;
    let reader = app.creds_with(&["flows:read"]).await;
    app.api_as(&reader).flows().list(&[]).await.expect("flows:read lists");
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
    let executor = app.api_as(&app.creds_with(&["flows:execute"]).await);
    assert_eq!(executor.flows().list(&[]).await.expect_err("no flows:read").code(), "insufficient_scope");

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
    let theirs = app.api_as(&other);
    assert!(theirs.flows().list(&[]).await.expect("list").items.is_empty());
    assert!(theirs.flows().tags().await.expect("tags").items.is_empty());
    let still = app.api().flows().get(id).await.expect("get");
    assert_eq!((still.name.as_str(), still.draft_revision), ("mine", 1));
}
