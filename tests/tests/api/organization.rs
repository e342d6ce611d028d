//! The scope catalog, the organization resource and the audit log.

use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn permissions_lists_the_closed_catalog_and_presets() {
    let app = TestApp::spawn().await;
    let reply = app.admin(Method::GET, "/permissions", None).await;
    assert_eq!(reply.status, 200);
    let scopes: Vec<&str> =
        reply.body["scopes"].as_array().expect("scopes").iter().map(|s| s["scope"].as_str().expect("scope")).collect();
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
    assert!(
        reply.body["scopes"]
            .as_array()
            .expect("scopes")
            .iter()
            .all(|s| s["description"].as_str().is_some_and(|d| !d.is_empty()))
    );
    let presets = reply.body["presets"].as_array().expect("presets");
    let names: Vec<&str> = presets.iter().map(|p| p["name"].as_str().expect("name")).collect();
    assert_eq!(names, ["ci", "runner", "read-only"]);
    assert_eq!(presets[0]["scopes"], json!(["flows:read", "flows:execute"]));
}

#[tokio::test]
async fn the_organization_can_be_read_and_changed() {
    let app = TestApp::spawn().await;
    let org = app.admin(Method::GET, "/organization", None).await;
    assert_eq!(org.status, 200);
    assert_eq!(org.body["id"], app.admin.org.to_string());
    assert_eq!(org.body["name"], "Acme");
    assert_eq!(org.body["default_max_body_bytes"], 1_048_576);
    let changed = app
        .admin(
            Method::PATCH,
            "/organization",
            Some(json!({"name": "Acme Payments",
            "default_retention": {"max_age_days": 7, "max_requests": 10000}})),
        )
        .await;
    assert_eq!(changed.status, 200, "{}", changed.text);
    assert_eq!(changed.body["name"], "Acme Payments");
    assert_eq!(changed.body["default_retention"], json!({"max_age_days": 7, "max_requests": 10000}));
    let again = app.admin(Method::GET, "/organization", None).await;
    assert_eq!(again.body, changed.body);

    for bad in [json!({"name": ""}), json!({"default_max_body_bytes": 20_000_000}), json!({"plan": "pro"})] {
        let reply = app.admin(Method::PATCH, "/organization", Some(bad.clone())).await;
        assert_eq!(reply.code(), "invalid_request", "{bad}");
    }
    let reader = app.creds_with(&["organization:read"]).await;
    assert_eq!(app.call(Method::GET, "/organization", Some(&reader), None).await.status, 200);
    let denied = app.call(Method::PATCH, "/organization", Some(&reader), Some(json!({"name": "x"}))).await;
    assert_eq!(denied.code(), "insufficient_scope");
    let other = app.new_org("Globex").await;
    let theirs = app.call(Method::GET, "/organization", Some(&other), None).await;
    assert_eq!(theirs.body["name"], "Globex", "each key sees its own organization only");
}

#[tokio::test]
async fn the_audit_log_records_key_changes() {
    let app = TestApp::spawn().await;
    let created = app.admin(Method::POST, "/api-keys", Some(json!({"name": "ci", "preset": "ci"}))).await;
    let id = created.body["id"].as_str().expect("id");
    app.admin(Method::DELETE, &format!("/api-keys/{id}"), None).await;
    let log = app.admin(Method::GET, "/audit-log?limit=2", None).await;
    assert_eq!(log.status, 200);
    let entries = log.body["items"].as_array().expect("items");
    assert_eq!(entries[0]["action"], "api_key.deleted");
    assert_eq!(entries[1]["action"], "api_key.created");
    assert_eq!(entries[0]["target"], id);
    assert!(entries[0]["actor"].as_str().expect("actor").starts_with("key:"));
    assert!(!log.text.contains(created.body["key"].as_str().expect("key")), "no secret in the audit log");
    let other = app.new_org("Globex").await;
    let theirs = app.call(Method::GET, "/audit-log", Some(&other), None).await;
    assert!(!theirs.text.contains(id), "another organization's log is separate");
}
