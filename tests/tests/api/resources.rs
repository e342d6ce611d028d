//! Resources: write-only secrets encrypted at rest (bound to their organization and name), and variables.

use hookflow_control_plane::crypto::{MasterKey, Sealed};
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn secrets_are_write_only_and_encrypted_at_rest() {
    let key = MasterKey::new([7; 32]);
    let server_key = key.clone();
    let app = TestApp::spawn_with(move |s| s.master_key = server_key).await;
    let value = "s3cr3t-Value-that-must-not-leak";
    let put = app.admin(Method::PUT, "/secrets/API_PASSWORD", Some(json!({"value": value}))).await;
    assert_eq!(put.status, 200, "{}", put.text);
    assert_eq!(put.body["name"], "API_PASSWORD");
    assert!(put.body.get("value").is_none());
    app.admin(Method::PUT, "/secrets/B_TOKEN", Some(json!({"value": "other"}))).await;
    let replaced = app.admin(Method::PUT, "/secrets/API_PASSWORD", Some(json!({"value": format!("{value}!")}))).await;
    assert_eq!(replaced.body["created_at"], put.body["created_at"]);

    let list = app.admin(Method::GET, "/secrets", None).await;
    let names: Vec<&str> =
        list.body["items"].as_array().expect("items").iter().map(|s| s["name"].as_str().expect("name")).collect();
    assert_eq!(names, ["API_PASSWORD", "B_TOKEN"]);
    let log = app.admin(Method::GET, "/audit-log", None).await;
    assert!(log.text.contains("secret.written"));
    for text in [&put.text, &list.text, &log.text] {
        assert!(!text.contains(value), "a secret value leaked into an answer");
    }

    // Nothing in the database holds the plaintext; the stored value opens only for its organization and name.
    let dump: String =
        sqlx::query_scalar("SELECT string_agg(encode(ciphertext, 'escape') || encode(nonce, 'hex'), ' ') FROM secrets")
            .fetch_one(&app.pool)
            .await
            .expect("dump");
    assert!(!dump.contains(value));
    let (ciphertext, nonce, key_version): (Vec<u8>, Vec<u8>, i32) =
        sqlx::query_as("SELECT ciphertext, nonce, key_version FROM secrets WHERE name = 'API_PASSWORD'")
            .fetch_one(&app.pool)
            .await
            .expect("row");
    let sealed = Sealed { ciphertext, nonce, key_version };
    let opened = key.open(app.admin.org, "API_PASSWORD", &sealed).expect("opens for its organization and name");
    assert_eq!(opened, format!("{value}!").into_bytes());
    let other = app.new_org("Globex").await;
    // A ciphertext copied into another organization's row does not open there.
    assert!(key.open(other.org, "API_PASSWORD", &sealed).is_err());
    assert!(key.open(other.org, "STOLEN", &sealed).is_err());
    sqlx::query(
        "INSERT INTO secrets (organization_id, name, ciphertext, nonce, key_version) VALUES ($1, 'STOLEN', $2, $3, $4)",
    )
    .bind(other.org)
    .bind(&sealed.ciphertext)
    .bind(&sealed.nonce)
    .bind(sealed.key_version)
    .execute(&app.pool)
    .await
    .expect("copy");
    let theirs = app.call(Method::GET, "/secrets", Some(&other), None).await;
    assert_eq!(theirs.body["items"].as_array().map(Vec::len), Some(1), "each organization sees its own names only");

    assert_eq!(app.admin(Method::DELETE, "/secrets/B_TOKEN", None).await.status, 204);
    assert_eq!(app.admin(Method::DELETE, "/secrets/B_TOKEN", None).await.code(), "not_found");
    assert_eq!(app.admin(Method::DELETE, "/secrets/STOLEN", None).await.status, 404, "another organization's secret");
}

#[tokio::test]
async fn variables_round_trip() {
    let app = TestApp::spawn().await;
    let put = app.admin(Method::PUT, "/variables/base_url", Some(json!({"value": "https://api.example.com"}))).await;
    assert_eq!(put.status, 200, "{}", put.text);
    assert_eq!(put.body["value"], "https://api.example.com");
    app.admin(Method::PUT, "/variables/region", Some(json!({"value": "eu"}))).await;
    let list = app.admin(Method::GET, "/variables?limit=1", None).await;
    assert_eq!(list.body["items"][0]["name"], "base_url");
    let next = list.body["next_cursor"].as_str().expect("more");
    let rest = app.admin(Method::GET, &format!("/variables?limit=1&cursor={next}"), None).await;
    assert_eq!(
        rest.body["items"][0],
        json!({"name": "region", "value": "eu", "created_at": rest.body["items"][0]["created_at"],
        "updated_at": rest.body["items"][0]["updated_at"]})
    );
    assert_eq!(app.admin(Method::DELETE, "/variables/region", None).await.status, 204);
    assert_eq!(app.admin(Method::DELETE, "/variables/region", None).await.status, 404);
    let other = app.new_org("Globex").await;
    assert_eq!(app.call(Method::GET, "/variables", Some(&other), None).await.body["items"], json!([]));
    assert_eq!(app.call(Method::DELETE, "/variables/base_url", Some(&other), None).await.status, 404);
}

#[tokio::test]
async fn names_values_and_scopes_are_checked() {
    let app = TestApp::spawn().await;
    for name in ["1ABC", "has-dash", "sp%20ace", "x.y"] {
        let reply = app.admin(Method::PUT, &format!("/secrets/{name}"), Some(json!({"value": "v"}))).await;
        assert_eq!(reply.code(), "invalid_request", "{name}");
        let reply = app.admin(Method::PUT, &format!("/variables/{name}"), Some(json!({"value": "v"}))).await;
        assert_eq!(reply.code(), "invalid_request", "{name}");
    }
    for body in
        [json!({}), json!({"value": 5}), json!({"value": "v", "extra": 1}), json!({"value": "x".repeat(70_000)})]
    {
        assert_eq!(app.admin(Method::PUT, "/secrets/OK", Some(body.clone())).await.code(), "invalid_request", "{body}");
    }
    let reader = app.creds_with(&["resources:read"]).await;
    assert_eq!(app.call(Method::GET, "/secrets", Some(&reader), None).await.status, 200);
    assert_eq!(
        app.call(Method::PUT, "/secrets/X", Some(&reader), Some(json!({"value": "v"}))).await.code(),
        "insufficient_scope"
    );
    assert_eq!(app.call(Method::DELETE, "/variables/X", Some(&reader), None).await.code(), "insufficient_scope");
    let none = app.creds_with(&["flows:read"]).await;
    assert_eq!(app.call(Method::GET, "/variables", Some(&none), None).await.code(), "insufficient_scope");
}

#[tokio::test]
async fn a_database_dump_holds_no_plaintext_secret() {
    let app = TestApp::spawn().await;
    let value = "plaintext-that-pg_dump-must-not-find-7431";
    assert_eq!(app.admin(Method::PUT, "/secrets/DUMPED", Some(json!({"value": value}))).await.status, 200);
    let options = app.pool.connect_options();
    let bindir = hookflow_control_plane::db::embedded::find_bindir().expect("PostgreSQL binaries");
    let socket = options.get_socket().expect("the test cluster listens on a socket");
    let dump = std::process::Command::new(bindir.join("pg_dump"))
        .arg("--host")
        .arg(socket)
        .args(["--port", &options.get_port().to_string(), "--username", options.get_username(), "--no-password"])
        .arg(options.get_database().expect("database"))
        .env("PGPASSWORD", hookflow_tests::cluster::password())
        .output()
        .expect("run pg_dump");
    assert!(dump.status.success(), "pg_dump failed: {}", String::from_utf8_lossy(&dump.stderr));
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(text.contains("DUMPED"), "the dump has the secret's row");
    assert!(!text.contains(value), "the dump holds the plaintext");
}
