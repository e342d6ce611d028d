//! Resources: write-only secrets encrypted at rest (bound to their organization and name), and variables.

use hookflow_control_plane::crypto::{MasterKey, Sealed};
use hookflow_shared::api::resources::PutSecret;
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::json;

fn secret(value: &str) -> PutSecret {
    PutSecret { value: value.parse().expect("a value"), allowed_hosts: vec![], runners_only: false }
}

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
    let api = app.api();
    api.secrets().put("B_TOKEN", &secret("other")).await.expect("put");
    let replaced = api.secrets().put("API_PASSWORD", &secret(&format!("{value}!"))).await.expect("replace");
    assert_eq!(json!(replaced.created_at), put.body["created_at"]);

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
    let theirs = app.api_as(&other).secrets().list(&[]).await.expect("list");
    assert_eq!(theirs.items.len(), 1, "each organization sees its own names only");

    api.secrets().delete("B_TOKEN").await.expect("delete");
    assert_eq!(api.secrets().delete("B_TOKEN").await.expect_err("gone").code(), "not_found");
    let stolen = api.secrets().delete("STOLEN").await.expect_err("another organization's secret");
    assert_eq!(stolen.status(), 404, "another organization's secret");
}

#[tokio::test]
async fn variables_round_trip() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let value = |text: &str| text.parse().expect("a value");
    let put = api.variables().put("base_url", &value("https://api.example.com")).await.expect("put");
    assert_eq!(put.value, "https://api.example.com");
    api.variables().put("region", &value("eu")).await.expect("put");
    let list = api.variables().list(&[("limit", "1")]).await.expect("list");
    assert_eq!(list.items[0].name, "base_url");
    let next = list.next_cursor.as_deref().expect("more");
    let rest = api.variables().list(&[("limit", "1"), ("cursor", next)]).await.expect("list");
    // The exact shape of a variable on the wire (its timestamps aside).
    let mut region = serde_json::to_value(&rest.items[0]).expect("json");
    region["created_at"] = json!("<t>");
    region["updated_at"] = json!("<t>");
    assert_eq!(region, json!({"name": "region", "value": "eu", "created_at": "<t>", "updated_at": "<t>"}));
    api.variables().delete("region").await.expect("delete");
    assert_eq!(api.variables().delete("region").await.expect_err("gone").status(), 404);
    let other = app.api_as(&app.new_org("Globex").await);
    assert!(other.variables().list(&[]).await.expect("list").items.is_empty());
    assert_eq!(other.variables().delete("base_url").await.expect_err("not theirs").status(), 404);
}

#[tokio::test]
async fn names_values_and_scopes_are_checked() {
    let app = TestApp::spawn().await;
    let api = app.api();
    for name in ["1ABC", "has-dash", "sp%20ace", "x.y"] {
        assert_eq!(api.secrets().put(name, &secret("v")).await.expect_err(name).code(), "invalid_request", "{name}");
        let v = "v".parse().expect("a value");
        assert_eq!(api.variables().put(name, &v).await.expect_err(name).code(), "invalid_request", "{name}");
    }
    for body in
        [json!({}), json!({"value": 5}), json!({"value": "v", "extra": 1}), json!({"value": "x".repeat(70_000)})]
    {
        assert_eq!(app.admin(Method::PUT, "/secrets/OK", Some(body.clone())).await.code(), "invalid_request", "{body}");
    }
    let reader = app.api_as(&app.creds_with(&["resources:read"]).await);
    reader.secrets().list(&[]).await.expect("resources:read lists");
    assert_eq!(reader.secrets().put("X", &secret("v")).await.expect_err("read only").code(), "insufficient_scope");
    assert_eq!(reader.variables().delete("X").await.expect_err("read only").code(), "insufficient_scope");
    let none = app.api_as(&app.creds_with(&["flows:read"]).await);
    assert_eq!(none.variables().list(&[]).await.expect_err("no resources scope").code(), "insufficient_scope");
}

#[tokio::test]
async fn a_database_dump_holds_no_plaintext_secret() {
    let app = TestApp::spawn().await;
    let value = "plaintext-that-pg_dump-must-not-find-7431";
    app.api().secrets().put("DUMPED", &secret(value)).await.expect("put");
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
