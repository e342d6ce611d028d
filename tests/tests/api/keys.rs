//! API keys: creation shown once, validation, escalation refused, listing with keyset pagination, and
//! cross-organization isolation.

use hookflow_shared::api::admin::{CreateApiKey, CreatedApiKey};
use hookflow_shared::wire::header;
use hookflow_tests::{Client, Creds, TestApp};
use reqwest::Method;
use serde_json::json;
use std::collections::HashSet;

fn with_preset(name: &str, preset: &str) -> CreateApiKey {
    CreateApiKey { preset: Some(preset.into()), ..CreateApiKey::new(name.parse().expect("a name")) }
}

fn with_scopes(name: &str, scopes: &[&str]) -> CreateApiKey {
    CreateApiKey {
        scopes: Some(scopes.iter().map(|s| s.to_string()).collect()),
        ..CreateApiKey::new(name.parse().expect("a name"))
    }
}

async fn create(api: &Client, key: &CreateApiKey) -> CreatedApiKey {
    api.keys().create(key).await.expect("create the key")
}

#[tokio::test]
async fn a_created_key_is_shown_once_and_works_for_its_scopes() {
    let app = TestApp::spawn().await;
    let reply = app
        .admin(
            Method::POST,
            "/api-keys",
            Some(json!({"name": "deploy", "scopes": ["flows:read", "keys:read"],
            "expires_at": "2099-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let key = reply.body["key"].as_str().expect("key").to_owned();
    assert!(key.starts_with("hf_") && key.len() == 41, "{key}");
    assert!(hookflow_shared::token::TokenKind::ApiKey.check(&key).is_ok());
    assert!(key.starts_with(reply.body["prefix"].as_str().expect("prefix")));
    assert_eq!(reply.body["scopes"], json!(["flows:read", "keys:read"]));
    assert_eq!(reply.body["expires_at"], "2099-01-01T00:00:00.000000Z");
    let id = reply.body["id"].as_str().expect("id").to_owned();
    assert_eq!(uuid::Uuid::parse_str(&id).expect("uuid").get_version_num(), 7);

    let one = app.admin(Method::GET, &format!("/api-keys/{id}"), None).await;
    assert_eq!(one.status, 200);
    assert_eq!(one.body["name"], "deploy");
    // The wire shape: no field carries the secret again.
    assert!(one.body.get("key").is_none(), "the secret is never shown again");
    let list = app.admin(Method::GET, "/api-keys", None).await;
    assert!(!list.text.contains(&key) && !list.text.contains("hash"), "{}", list.text);

    let creds = Creds { key, org: app.admin.org };
    let as_key = app.api_as(&creds);
    as_key.keys().list(&[]).await.expect("keys:read lists");
    let denied = as_key.keys().create(&with_scopes("x", &["keys:read"])).await.expect_err("no keys:write");
    assert_eq!(denied.code(), "insufficient_scope");
}

#[tokio::test]
async fn the_stored_form_is_a_hash() {
    let app = TestApp::spawn().await;
    let created = create(&app.api(), &with_preset("x", "runner")).await;
    let key = created.key.as_str();
    let stored: Vec<u8> = sqlx::query_scalar("SELECT key_hash FROM api_keys WHERE prefix = $1")
        .bind(&created.record.prefix)
        .fetch_one(&app.pool)
        .await
        .expect("row");
    assert_eq!(stored, hookflow_shared::token::hash(key));
    let dump: String =
        sqlx::query_scalar("SELECT string_agg(t::text, ' ') FROM api_keys t").fetch_one(&app.pool).await.expect("dump");
    assert!(!dump.contains(key), "no plaintext key in the table");
}

#[tokio::test]
async fn presets_expand_to_their_scopes() {
    let app = TestApp::spawn().await;
    for (preset, scopes) in [
        ("ci", json!(["flows:read", "flows:execute"])),
        ("runner", json!(["runner:complete"])),
        (
            "read-only",
            json!([
                "webhooks:read",
                "flows:read",
                "collections:read",
                "resources:read",
                "keys:read",
                "organization:read",
                "runners:read"
            ]),
        ),
    ] {
        let created = create(&app.api(), &with_preset(preset, preset)).await;
        assert_eq!(json!(created.record.scopes), scopes, "{preset}");
    }
}

#[tokio::test]
async fn a_key_cannot_grant_what_its_creator_lacks() {
    let app = TestApp::spawn().await;
    let limited = app.api_as(&app.creds_with(&["keys:write", "flows:read"]).await);
    create(&limited, &with_scopes("sub", &["flows:read"])).await;
    let escalate = limited.keys().create(&with_scopes("up", &["flows:read", "flows:write"])).await;
    escalate.expect_err("an escalation").assert_refused(403, "insufficient_scope", "flows:write");
    let via_preset = limited.keys().create(&with_preset("up", "ci")).await.expect_err("an escalation");
    assert_eq!(via_preset.code(), "insufficient_scope", "ci needs flows:execute");
}

#[tokio::test]
async fn invalid_bodies_are_400_naming_the_problem() {
    let app = TestApp::spawn().await;
    let cases = [
        (json!({"name": "x", "scopes": ["flows:read", "flows:admin"]}), "flows:admin"),
        (json!({"name": "x", "scopes": ["flows:read"], "color": "red"}), "color"),
        (json!({"scopes": ["flows:read"]}), "name"),
        (json!({"name": "  ", "scopes": ["flows:read"]}), "name"),
        (json!({"name": "x"}), "scopes"),
        (json!({"name": "x", "scopes": []}), "scopes"),
        (json!({"name": "x", "scopes": ["flows:read"], "preset": "ci"}), "preset"),
        (json!({"name": "x", "preset": "admin"}), "preset"),
        (json!({"name": "x", "scopes": ["flows:read"], "expires_at": "2001-01-01T00:00:00Z"}), "expires_at"),
        (json!({"name": "x", "scopes": ["flows:read"], "expires_at": "tomorrow"}), "expires_at"),
        (json!({"name": 5, "scopes": ["flows:read"]}), "name"),
    ];
    for (body, named) in cases {
        let reply = app.admin(Method::POST, "/api-keys", Some(body.clone())).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{body}: {}", reply.text);
        let message = reply.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{body}: message {message:?} should name {named}");
    }
    let raw = app
        .client
        .post(app.url("/api-keys"))
        .header(header::API_KEY, &app.admin.key)
        .header(header::ORGANIZATION, app.admin.org.to_string())
        .body("{\"name\": ")
        .send()
        .await
        .expect("send");
    let raw = hookflow_tests::app::read(raw).await;
    assert_eq!(raw.code(), "invalid_request");
    let huge = "x".repeat(1024 * 1024 + 10);
    let reply = app.admin(Method::POST, "/api-keys", Some(json!({"name": huge, "scopes": ["flows:read"]}))).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (413, "payload_too_large"));
    assert_eq!(app.rows("api_keys").await, 1, "nothing stored by refused requests");
}

#[tokio::test]
async fn another_organizations_key_is_404() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let other = app.new_org("Globex").await;
    let theirs = create(&app.api_as(&other), &with_preset("theirs", "ci")).await;
    let id = theirs.record.id;
    let got = api.keys().get(id).await.expect_err("not ours");
    assert_eq!((got.status(), got.code()), (404, "not_found"));
    let deleted = api.keys().delete(id).await.expect_err("not ours");
    assert_eq!((deleted.status(), deleted.code()), (404, "not_found"));
    let list = api.keys().list(&[]).await.expect("list");
    assert!(list.items.iter().all(|k| k.id != id));
    assert_eq!(api.keys().get("not-a-uuid").await.expect_err("no such key").status(), 404);
    let still = Creds { key: theirs.key, org: other.org };
    app.api_as(&still).keys().permissions().await.expect("not deleted");
}

#[tokio::test]
async fn listing_pages_with_a_stable_cursor() {
    let app = TestApp::spawn().await;
    let api = app.api();
    for i in 0..7 {
        create(&api, &with_preset(&format!("k{i}"), "runner")).await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut query = vec![("limit", "3")];
        query.extend(cursor.as_deref().map(|c| ("cursor", c)));
        let page = api.keys().list(&query).await.expect("a page");
        assert!(page.items.len() <= 3);
        seen.extend(page.items.iter().map(|k| k.id.to_string()));
        pages += 1;
        if pages == 1 {
            // A key inserted between pages does not shift the pages already being walked.
            create(&api, &with_preset("late", "runner")).await;
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 8, "7 created + the admin key");
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 8, "no duplicates");
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, sorted, "newest first");

    for bad in ["limit=0", "limit=-1", "limit=abc", "cursor=%%%"] {
        let reply = app.admin(Method::GET, &format!("/api-keys?{bad}"), None).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{bad}");
    }
    let clamped = api.keys().list(&[("limit", "1000")]).await.expect("clamped, not refused");
    assert_eq!(clamped.items.len(), 9);
}
