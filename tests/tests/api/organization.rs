//! The scope catalog, the organization resource and the audit log.

use hookflow_shared::api::admin::{CreateApiKey, Retention, UpdateOrganization};
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn permissions_lists_the_closed_catalog_and_presets() {
    let app = TestApp::spawn().await;
    let permissions = app.api().keys().permissions().await.expect("permissions");
    // The scopes as the wire spells them.
    let scopes: Vec<serde_json::Value> = permissions.scopes.iter().map(|s| json!(s.scope)).collect();
    assert_eq!(
        scopes,
        [
            "webhooks:read",
            "webhooks:write",
            "flows:read",
            "flows:write",
            "flows:execute",
            "collections:read",
            "collections:write",
            "resources:read",
            "resources:write",
            "keys:read",
            "keys:write",
            "organization:read",
            "organization:write",
            "runners:read",
            "runners:write",
            "runner:complete"
        ]
    );
    assert!(permissions.scopes.iter().all(|s| !s.description.is_empty()));
    let presets = &permissions.presets;
    let names: Vec<&str> = presets.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["ci", "runner", "read-only"]);
    assert_eq!(json!(presets[0].scopes), json!(["flows:read", "flows:execute"]));
}

#[tokio::test]
async fn the_organization_can_be_read_and_changed() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let org = api.organization().get().await.expect("organization");
    assert_eq!(org.id, app.admin.org);
    assert_eq!(org.name, "Acme");
    assert_eq!(org.default_max_body_bytes, 1_048_576);
    let change = UpdateOrganization {
        name: Some("Acme Payments".parse().expect("a name")),
        default_retention: Some(Retention { max_age_days: Some(7), max_requests: Some(10000) }),
        ..Default::default()
    };
    let changed = api.organization().update(&change).await.expect("update");
    assert_eq!(changed.name, "Acme Payments");
    assert_eq!(changed.default_retention, Retention { max_age_days: Some(7), max_requests: Some(10000) });
    let again = api.organization().get().await.expect("organization");
    assert_eq!(json!(again), json!(changed));

    for bad in [json!({"name": ""}), json!({"default_max_body_bytes": 20_000_000}), json!({"plan": "pro"})] {
        let reply = app.admin(Method::PATCH, "/organization", Some(bad.clone())).await;
        assert_eq!(reply.code(), "invalid_request", "{bad}");
    }
    let reader = app.api_as(&app.creds_with(&["organization:read"]).await);
    reader.organization().get().await.expect("organization:read reads");
    let rename = UpdateOrganization { name: Some("x".parse().expect("a name")), ..Default::default() };
    assert_eq!(reader.organization().update(&rename).await.expect_err("read only").code(), "insufficient_scope");
    let theirs = app.api_as(&app.new_org("Globex").await).organization().get().await.expect("organization");
    assert_eq!(theirs.name, "Globex", "each key sees its own organization only");
}

#[tokio::test]
async fn the_audit_log_records_key_changes() {
    let app = TestApp::spawn().await;
    let ci = CreateApiKey { preset: Some("ci".into()), ..CreateApiKey::new("ci".parse().expect("a name")) };
    let created = app.api().keys().create(&ci).await.expect("create");
    let id = created.record.id.to_string();
    let id = id.as_str();
    app.api().keys().delete(id).await.expect("delete");
    let log = app.admin(Method::GET, "/audit-log?limit=2", None).await;
    assert_eq!(log.status, 200);
    let entries = log.body["items"].as_array().expect("items");
    assert_eq!(entries[0]["action"], "api_key.deleted");
    assert_eq!(entries[1]["action"], "api_key.created");
    assert_eq!(entries[0]["target"], id);
    assert!(entries[0]["actor"].as_str().expect("actor").starts_with("key:"));
    assert!(!log.text.contains(&created.key), "no secret in the audit log");
    let other = app.new_org("Globex").await;
    let theirs = app.call(Method::GET, "/audit-log", Some(&other), None).await;
    assert!(!theirs.text.contains(id), "another organization's log is separate");
}
