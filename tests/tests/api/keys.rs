//! API keys: creation shown once, validation, escalation refused, listing with keyset pagination, and
//! cross-organization isolation.

use hookflow_shared::wire::header;
use hookflow_tests::{Creds, TestApp};
use reqwest::Method;
use serde_json::json;
use std::collections::HashSet;

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
    assert!(one.body.get("key").is_none(), "the secret is never shown again");
    let list = app.admin(Method::GET, "/api-keys", None).await;
    assert!(!list.text.contains(&key) && !list.text.contains("hash"), "{}", list.text);

    let creds = Creds { key, org: app.admin.org };
    assert_eq!(app.call(Method::GET, "/api-keys", Some(&creds), None).await.status, 200);
    let denied =
        app.call(Method::POST, "/api-keys", Some(&creds), Some(json!({"name": "x", "scopes": ["keys:read"]}))).await;
    assert_eq!(denied.code(), "insufficient_scope");
}

#[tokio::test]
async fn the_stored_form_is_a_hash() {
    let app = TestApp::spawn().await;
    let reply = app.admin(Method::POST, "/api-keys", Some(json!({"name": "x", "preset": "runner"}))).await;
    let key = reply.body["key"].as_str().expect("key");
    let stored: Vec<u8> = sqlx::query_scalar("SELECT key_hash FROM api_keys WHERE prefix = $1")
        .bind(reply.body["prefix"].as_str())
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
        let reply = app.admin(Method::POST, "/api-keys", Some(json!({"name": preset, "preset": preset}))).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        assert_eq!(reply.body["scopes"], scopes, "{preset}");
    }
}

#[tokio::test]
async fn a_key_cannot_grant_what_its_creator_lacks() {
    let app = TestApp::spawn().await;
    let limited = app.creds_with(&["keys:write", "flows:read"]).await;
    let ok = app
        .call(Method::POST, "/api-keys", Some(&limited), Some(json!({"name": "sub", "scopes": ["flows:read"]})))
        .await;
    assert_eq!(ok.status, 201, "{}", ok.text);
    let escalate = app
        .call(
            Method::POST,
            "/api-keys",
            Some(&limited),
            Some(json!({"name": "up", "scopes": ["flows:read", "flows:write"]})),
        )
        .await;
    assert_eq!((escalate.status.as_u16(), escalate.code()), (403, "insufficient_scope"));
    assert!(escalate.body["error"]["message"].as_str().unwrap_or_default().contains("flows:write"));
    let via_preset =
        app.call(Method::POST, "/api-keys", Some(&limited), Some(json!({"name": "up", "preset": "ci"}))).await;
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
    let count = app.rows("api_keys").await;
    assert_eq!(count, 1, "nothing stored by refused requests");
}

#[tokio::test]
async fn another_organizations_key_is_404() {
    let app = TestApp::spawn().await;
    let other = app.new_org("Globex").await;
    let theirs =
        app.call(Method::POST, "/api-keys", Some(&other), Some(json!({"name": "theirs", "preset": "ci"}))).await;
    let id = theirs.body["id"].as_str().expect("id");
    for method in [Method::GET, Method::DELETE] {
        let reply = app.admin(method, &format!("/api-keys/{id}"), None).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"));
    }
    let list = app.admin(Method::GET, "/api-keys", None).await;
    assert!(!list.text.contains(id));
    assert_eq!(app.admin(Method::GET, "/api-keys/not-a-uuid", None).await.status, 404);
    let still = Creds { key: theirs.body["key"].as_str().expect("key").to_owned(), org: other.org };
    assert_eq!(app.call(Method::GET, "/permissions", Some(&still), None).await.status, 200, "not deleted");
}

#[tokio::test]
async fn listing_pages_with_a_stable_cursor() {
    let app = TestApp::spawn().await;
    for i in 0..7 {
        let reply =
            app.admin(Method::POST, "/api-keys", Some(json!({"name": format!("k{i}"), "preset": "runner"}))).await;
        assert_eq!(reply.status, 201);
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api-keys?limit=3&cursor={c}"),
            None => "/api-keys?limit=3".to_owned(),
        };
        let page = app.admin(Method::GET, &path, None).await;
        assert_eq!(page.status, 200, "{}", page.text);
        let items = page.body["items"].as_array().expect("items");
        assert!(items.len() <= 3);
        seen.extend(items.iter().map(|k| k["id"].as_str().expect("id").to_owned()));
        pages += 1;
        if pages == 1 {
            // A key inserted between pages does not shift the pages already being walked.
            app.admin(Method::POST, "/api-keys", Some(json!({"name": "late", "preset": "runner"}))).await;
        }
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
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
    let clamped = app.admin(Method::GET, "/api-keys?limit=1000", None).await;
    assert_eq!(clamped.status, 200);
    assert_eq!(clamped.body["items"].as_array().map(Vec::len), Some(9));
}
