//! The authentication table of API.md section 0, row by row and in its order.

use hookflow_shared::ScopeSet;
use hookflow_shared::wire::header;
use hookflow_tests::{Creds, TestApp};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn missing_or_bad_credentials_answer_the_same_401() {
    let app = TestApp::spawn().await;
    let org = app.admin.org;
    let wrong_checksum = {
        let mut key = app.admin.key.clone();
        let last = key.pop().expect("non-empty");
        key.push(if last == 'a' { 'b' } else { 'a' });
        key
    };
    // A well-formed key that was never issued: checksum valid, hash unknown.
    let never_issued = hookflow_shared::token::TokenKind::ApiKey.assemble(&[7u8; 32]);
    let mut messages = Vec::new();
    for key in [None, Some("not-a-key".to_owned()), Some(wrong_checksum), Some(never_issued)] {
        let reply = match key {
            None => app.call(Method::GET, "/permissions", None, None).await,
            Some(key) => app.call(Method::GET, "/permissions", Some(&Creds { key, org }), None).await,
        };
        assert_eq!(reply.status, 401, "{}", reply.text);
        assert_eq!(reply.code(), "unauthorized");
        messages.push(reply.body["error"]["message"].clone());
    }
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "same body whatever the cause: {messages:?}");

    let bearer = app
        .client
        .get(app.url("/permissions"))
        .bearer_auth("eyJhbGciOiJIUzI1NiJ9.e30.x")
        .header(header::ORGANIZATION, org.to_string())
        .send()
        .await
        .expect("send");
    assert_eq!(bearer.status(), 401);
}

#[tokio::test]
async fn organization_header_is_required_and_must_match_the_key() {
    let app = TestApp::spawn().await;
    let missing =
        app.client.get(app.url("/permissions")).header(header::API_KEY, &app.admin.key).send().await.expect("send");
    let missing = hookflow_tests::app::read(missing).await;
    assert_eq!((missing.status.as_u16(), missing.code()), (400, "organization_required"));

    let garbage = Creds { key: app.admin.key.clone(), org: app.admin.org };
    let reply = app
        .client
        .get(app.url("/permissions"))
        .header(header::API_KEY, &garbage.key)
        .header(header::ORGANIZATION, "not-a-uuid")
        .send()
        .await
        .expect("send");
    assert_eq!(hookflow_tests::app::read(reply).await.code(), "organization_required");

    let other = app.new_org("Globex").await;
    let crossed = Creds { key: app.admin.key.clone(), org: other.org };
    let reply = app.call(Method::GET, "/permissions", Some(&crossed), None).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (403, "organization_mismatch"));
    // A bad key with a missing organization is still 401 first: checks run in the table's order.
    let reply = app.client.get(app.url("/permissions")).header(header::API_KEY, "hf_nope").send().await.expect("send");
    assert_eq!(reply.status(), 401);
}

#[tokio::test]
async fn a_missing_scope_is_403_naming_it() {
    let app = TestApp::spawn().await;
    let reader = app.creds_with(&["flows:read"]).await;
    let reply = app.call(Method::GET, "/api-keys", Some(&reader), None).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (403, "insufficient_scope"));
    assert!(reply.body["error"]["message"].as_str().unwrap_or_default().contains("keys:read"), "{}", reply.text);
    // The scope check comes before body validation.
    let reply = app.call(Method::POST, "/api-keys", Some(&reader), Some(json!({"bogus": true}))).await;
    assert_eq!(reply.code(), "insufficient_scope");
    // Any valid credential reads the catalog.
    assert_eq!(app.call(Method::GET, "/permissions", Some(&reader), None).await.status, 200);
}

#[tokio::test]
async fn expired_keys_are_refused_on_every_request() {
    let app = TestApp::spawn().await;
    let soon = chrono::Utc::now() + chrono::Duration::milliseconds(1500);
    let key = app.key(app.admin.org, ScopeSet::all(), Some(soon)).await;
    let creds = Creds { key, org: app.admin.org };
    assert_eq!(app.call(Method::GET, "/permissions", Some(&creds), None).await.status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1700)).await;
    let reply = app.call(Method::GET, "/permissions", Some(&creds), None).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (401, "unauthorized"));
}

#[tokio::test]
async fn a_deleted_key_fails_at_once() {
    let app = TestApp::spawn().await;
    let created = app.admin(Method::POST, "/api-keys", Some(json!({"name": "ci", "preset": "ci"}))).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let creds = Creds { key: created.body["key"].as_str().expect("key").to_owned(), org: app.admin.org };
    assert_eq!(app.call(Method::GET, "/permissions", Some(&creds), None).await.status, 200);
    let id = created.body["id"].as_str().expect("id");
    let deleted = app.admin(Method::DELETE, &format!("/api-keys/{id}"), None).await;
    assert_eq!(deleted.status, 204);
    let reply = app.call(Method::GET, "/permissions", Some(&creds), None).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (401, "unauthorized"));
}
