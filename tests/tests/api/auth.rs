//! The authentication table of API.md section 0, row by row and in its order.

use hookflow_shared::ScopeSet;
use hookflow_shared::api::admin::CreateApiKey;
use hookflow_shared::wire::header;
use hookflow_tests::{Credentials, Creds, TestApp};
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
        let credentials = key.map_or(Credentials::None, |key| Credentials::api_key(key, org));
        let reply = app.api_with(credentials).keys().permissions().await.expect_err("not authenticated");
        assert_eq!((reply.status(), reply.code()), (401, "unauthorized"), "{reply}");
        messages.push(reply.message().to_owned());
    }
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "same body whatever the cause: {messages:?}");

    let bearer = app.api_with(Credentials::bearer("eyJhbGciOiJIUzI1NiJ9.e30.x", Some(org)));
    assert_eq!(bearer.keys().permissions().await.expect_err("a forged token").status(), 401);
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
    let reply = app.api_as(&crossed).keys().permissions().await.expect_err("another organization");
    assert_eq!((reply.status(), reply.code()), (403, "organization_mismatch"));
    // A bad key with a missing organization is still 401 first: checks run in the table's order.
    let reply = app.client.get(app.url("/permissions")).header(header::API_KEY, "hf_nope").send().await.expect("send");
    assert_eq!(reply.status(), 401);
}

#[tokio::test]
async fn a_missing_scope_is_403_naming_it() {
    let app = TestApp::spawn().await;
    let reader = app.creds_with(&["flows:read"]).await;
    let listed = app.api_as(&reader).keys().list(&[]).await.expect_err("no keys:read");
    listed.assert_refused(403, "insufficient_scope", "keys:read");
    // The scope check comes before body validation.
    let reply = app.call(Method::POST, "/api-keys", Some(&reader), Some(json!({"bogus": true}))).await;
    assert_eq!(reply.code(), "insufficient_scope");
    // Any valid credential reads the catalog.
    app.api_as(&reader).keys().permissions().await.expect("any credential reads the catalog");
}

#[tokio::test]
async fn expired_keys_are_refused_on_every_request() {
    let app = TestApp::spawn().await;
    let soon = chrono::Utc::now() + chrono::Duration::milliseconds(1500);
    let key = app.key(app.admin.org, ScopeSet::all(), Some(soon)).await;
    let as_key = app.api_as(&Creds { key, org: app.admin.org });
    as_key.keys().permissions().await.expect("not expired yet");
    tokio::time::sleep(std::time::Duration::from_millis(1700)).await;
    let reply = as_key.keys().permissions().await.expect_err("expired");
    assert_eq!((reply.status(), reply.code()), (401, "unauthorized"));
}

#[tokio::test]
async fn a_deleted_key_fails_at_once() {
    let app = TestApp::spawn().await;
    let ci = CreateApiKey { preset: Some("ci".into()), ..CreateApiKey::new("ci".parse().expect("a name")) };
    let created = app.api().keys().create(&ci).await.expect("create");
    let as_key = app.api_as(&Creds { key: created.key, org: app.admin.org });
    as_key.keys().permissions().await.expect("a live key");
    app.api().keys().delete(created.record.id).await.expect("delete");
    let reply = as_key.keys().permissions().await.expect_err("deleted");
    assert_eq!((reply.status(), reply.code()), (401, "unauthorized"));
}
