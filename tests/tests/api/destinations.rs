//! Destinations (issue #49) over the real server: create (defaults, a signing secret shown once), list, read,
//! change, delete, each audited without the secret; every bad field refused by name; at most 10 an endpoint; a
//! literal private address refused without runner labels; scopes; another organization's ids answer 404.

use hookflow_tests::TestApp;
use hookflow_tests::exec::scoped;
use reqwest::Method;
use serde_json::{Value, json};

fn path(webhook: &str) -> String {
    format!("/webhooks/{webhook}/destinations")
}

async fn create(app: &TestApp, webhook: &str, body: Value) -> Value {
    let reply = app.admin(Method::POST, &path(webhook), Some(body)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.body
}

#[tokio::test]
async fn a_destination_is_created_read_changed_and_deleted_with_its_secret_shown_once() {
    let app = TestApp::spawn().await;
    let webhook = app.webhook_named("orders").await;
    let plain = create(&app, &webhook, json!({"name": "consumer", "url": "https://consumer.example/in"})).await;
    assert_eq!(plain["webhook_id"], webhook.as_str());
    assert_eq!(plain["retry_schedule_s"], json!([5, 30, 120, 600, 1800, 3600, 7200, 14400]));
    assert_eq!(
        [&plain["timeout_ms"], &plain["rate_limit_per_s"], &plain["disable_after_failing_s"], &plain["signing"]],
        [&json!(10000), &Value::Null, &json!(432000), &Value::Null]
    );
    assert_eq!((plain["enabled"].clone(), plain["disabled_reason"].clone()), (json!(true), Value::Null));
    assert_eq!(
        (plain["q"].clone(), plain["filter"].clone(), plain["runner_labels"].clone()),
        (Value::Null, Value::Null, json!([]))
    );
    assert!(plain.get("signing_secret").is_none(), "{plain}");

    let signed = create(
        &app,
        &webhook,
        json!({"name": "signed", "url": "https://signed.example/hooks?k=v", "signing": "standard-webhooks",
            "q": "method:POST", "retry_schedule_s": [1, 2], "timeout_ms": 500, "rate_limit_per_s": 5,
            "disable_after_failing_s": 60, "enabled": false}),
    )
    .await;
    let secret = signed["signing_secret"].as_str().expect("a secret in the 201").to_owned();
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD.decode(secret.strip_prefix("whsec_").expect("whsec_"));
    assert_eq!(raw.expect("base64").len(), 24, "{secret}");
    assert_eq!((signed["signing"].clone(), signed["enabled"].clone()), (json!("standard-webhooks"), json!(false)));
    let id = signed["id"].as_str().expect("id");

    // Reads never show the secret.
    let read = app.admin(Method::GET, &format!("{}/{id}", path(&webhook)), None).await;
    assert_eq!(read.status, 200, "{}", read.text);
    assert!(read.body.get("signing_secret").is_none() && !read.text.contains(&secret));
    assert_eq!(read.body["retry_schedule_s"], json!([1, 2]));
    let listed = app.admin(Method::GET, &path(&webhook), None).await;
    let names: Vec<&str> =
        listed.body["items"].as_array().expect("items").iter().map(|d| d["name"].as_str().expect("name")).collect();
    assert_eq!(names, ["consumer", "signed"], "oldest first");
    assert!(!listed.text.contains(&secret));

    // Change: the rate limit cleared, renamed, enabled.
    let changed = app
        .admin(
            Method::PATCH,
            &format!("{}/{id}", path(&webhook)),
            Some(json!({"name": "renamed", "rate_limit_per_s": null, "enabled": true})),
        )
        .await;
    assert_eq!(changed.status, 200, "{}", changed.text);
    assert_eq!(
        [&changed.body["name"], &changed.body["rate_limit_per_s"], &changed.body["enabled"]],
        [&json!("renamed"), &Value::Null, &json!(true)]
    );
    assert_eq!(changed.body["q"], "method:POST", "absent fields stay");

    let deleted = app.admin(Method::DELETE, &format!("{}/{id}", path(&webhook)), None).await;
    assert_eq!(deleted.status, 204);
    let gone = app.admin(Method::GET, &format!("{}/{id}", path(&webhook)), None).await;
    gone.assert_refused(404, "not_found", "destination");

    // Audited, never with the secret.
    let audit: Vec<(String, Value)> =
        sqlx::query_as("SELECT action, details FROM audit_log WHERE action LIKE 'destination.%' ORDER BY created_at")
            .fetch_all(&app.pool)
            .await
            .expect("audit");
    let actions: Vec<&str> = audit.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(actions, ["destination.created", "destination.created", "destination.updated", "destination.deleted"]);
    let everything: String = sqlx::query_scalar("SELECT string_agg(details::text, ' ') FROM audit_log")
        .fetch_one(&app.pool)
        .await
        .expect("audit text");
    assert!(!everything.contains(&secret), "the secret is in no audit entry");
    let stored: Vec<u8> = sqlx::query_scalar(
        "SELECT COALESCE(string_agg(convert_to(url || coalesce(q, ''), 'UTF8'), ''), '') FROM destinations",
    )
    .fetch_one(&app.pool)
    .await
    .map(|s: Vec<u8>| s)
    .unwrap_or_default();
    assert!(!String::from_utf8_lossy(&stored).contains(&secret));
}

#[tokio::test]
async fn every_bad_field_is_refused_by_name() {
    let app = TestApp::spawn().await;
    let webhook = app.webhook_named("orders").await;
    let long = format!("https://x.example/{}", "a".repeat(2100));
    let schedule: Vec<u32> = vec![1; 21];
    let cases = [
        (json!({"name": "a", "url": "ftp://x.example/"}), "url"),
        (json!({"name": "a", "url": "not a url"}), "url"),
        (json!({"name": "a", "url": long}), "url"),
        (json!({"name": "a", "url": "https://x.example/", "retry_schedule_s": schedule}), "retry_schedule_s"),
        (json!({"name": "a", "url": "https://x.example/", "retry_schedule_s": [0]}), "retry_schedule_s"),
        (json!({"name": "a", "url": "https://x.example/", "retry_schedule_s": [86401]}), "retry_schedule_s"),
        (json!({"name": "a", "url": "https://x.example/", "timeout_ms": 99}), "timeout_ms"),
        (json!({"name": "a", "url": "https://x.example/", "timeout_ms": 60001}), "timeout_ms"),
        (json!({"name": "a", "url": "https://x.example/", "rate_limit_per_s": 0}), "rate_limit_per_s"),
        (json!({"name": "a", "url": "https://x.example/", "rate_limit_per_s": 10001}), "rate_limit_per_s"),
        (json!({"name": "a", "url": "https://x.example/", "disable_after_failing_s": 59}), "disable_after_failing_s"),
        (json!({"name": "a", "url": "https://x.example/", "q": "method:"}), "q"),
        (json!({"name": "a", "url": "https://x.example/", "signing": "hmac"}), "signing"),
        (json!({"name": "a", "url": "https://x.example/", "colour": "red"}), "colour"),
        (json!({"name": "", "url": "https://x.example/"}), "name"),
    ];
    for (body, field) in cases {
        let reply = app.admin(Method::POST, &path(&webhook), Some(body.clone())).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert!(reply.text.contains(field), "{body}: {}", reply.text);
    }
    assert_eq!(app.rows("destinations").await, 0);
    // An empty schedule (no retry) and the bounds themselves are accepted.
    create(
        &app,
        &webhook,
        json!({"name": "edges", "url": "https://x.example/", "retry_schedule_s": [], "timeout_ms": 100,
        "rate_limit_per_s": 10000, "disable_after_failing_s": 60}),
    )
    .await;
    // A name that does not resolve is accepted: its attempts fail until it does.
    create(&app, &webhook, json!({"name": "later", "url": "https://not-yet.invalid/"})).await;
}

#[tokio::test]
async fn a_literal_private_address_is_refused_without_runner_labels_unless_the_organization_may() {
    let app = TestApp::spawn().await;
    let other = app.new_org("Public only").await;
    let api = app.api_as(&other);
    let create_webhook = hookflow_shared::api::webhooks::CreateWebhook::new("w".parse().expect("name"));
    let webhook = api.webhooks().create(&create_webhook).await.expect("webhook").id.to_string();
    for url in [
        "http://10.0.0.1/in",
        "http://127.0.0.1:9/in",
        "http://169.254.169.254/latest",
        "http://[::1]/in",
        "http://192.168.1.2/",
    ] {
        let reply = app.call(Method::POST, &path(&webhook), Some(&other), Some(json!({"name": "p", "url": url}))).await;
        reply.assert_refused(400, "invalid_request", "url");
    }
    let through_runner = app
        .call(
            Method::POST,
            &path(&webhook),
            Some(&other),
            Some(json!({"name": "p", "url": "http://10.0.0.1/in", "runner_labels": ["vpc"]})),
        )
        .await;
    assert_eq!(through_runner.status, 201, "{}", through_runner.text);
    // The first organization may reach private targets (as its flows may).
    let own = app.webhook_named("own").await;
    create(&app, &own, json!({"name": "local", "url": "http://127.0.0.1:9/in"})).await;
    // A change to a private literal is refused the same way.
    let id = through_runner.body["id"].as_str().expect("id");
    let reply = app
        .call(Method::PATCH, &format!("{}/{id}", path(&webhook)), Some(&other), Some(json!({"runner_labels": []})))
        .await;
    reply.assert_refused(400, "invalid_request", "url");
}

#[tokio::test]
async fn an_endpoint_has_at_most_ten_destinations() {
    let app = TestApp::spawn().await;
    let webhook = app.webhook_named("orders").await;
    for n in 0..10 {
        create(&app, &webhook, json!({"name": format!("d{n}"), "url": "https://x.example/"})).await;
    }
    let eleventh =
        app.admin(Method::POST, &path(&webhook), Some(json!({"name": "d10", "url": "https://x.example/"}))).await;
    eleventh.assert_refused(400, "invalid_request", "at most 10");
    let other = app.webhook_named("other").await;
    create(&app, &other, json!({"name": "d0", "url": "https://x.example/"})).await;
}

#[tokio::test]
async fn scopes_hold_and_another_organizations_ids_answer_404() {
    let app = TestApp::spawn().await;
    let webhook = app.webhook_named("orders").await;
    let made = create(&app, &webhook, json!({"name": "d", "url": "https://x.example/"})).await;
    let id = made["id"].as_str().expect("id");
    let one = format!("{}/{id}", path(&webhook));
    let deliveries = format!("{one}/deliveries");
    let replay = format!("{deliveries}/replay");

    let reader = scoped(&app, app.admin.org, &["webhooks:read"]).await;
    assert_eq!(app.call(Method::GET, &path(&webhook), Some(&reader), None).await.status, 200);
    assert_eq!(app.call(Method::GET, &one, Some(&reader), None).await.status, 200);
    assert_eq!(app.call(Method::GET, &deliveries, Some(&reader), None).await.status, 200);
    let refused = [
        (Method::POST, path(&webhook), Some(json!({"name": "x", "url": "https://x.example/"}))),
        (Method::PATCH, one.clone(), Some(json!({"enabled": false}))),
        (Method::DELETE, one.clone(), None),
        (Method::POST, replay.clone(), Some(json!({"status": "dead"}))),
    ];
    for (method, at, body) in refused {
        let reply = app.call(method.clone(), &at, Some(&reader), body).await;
        assert_eq!(reply.status, 403, "{method} {at}: {}", reply.text);
    }
    let nobody = scoped(&app, app.admin.org, &["flows:read"]).await;
    assert_eq!(app.call(Method::GET, &path(&webhook), Some(&nobody), None).await.status, 403);

    // Another organization: every id is 404, whatever it asks.
    let stranger = app.new_org("Stranger").await;
    let theirs = app
        .api_as(&stranger)
        .webhooks()
        .create(&hookflow_shared::api::webhooks::CreateWebhook::new("t".parse().expect("a name")))
        .await
        .expect("webhook");
    let attempts = format!("{deliveries}/{}/attempts", uuid::Uuid::new_v4());
    let cases = [
        (Method::GET, path(&webhook), None),
        (Method::GET, one.clone(), None),
        (Method::PATCH, one.clone(), Some(json!({"enabled": false}))),
        (Method::DELETE, one.clone(), None),
        (Method::GET, deliveries.clone(), None),
        (Method::GET, attempts.clone(), None),
        (Method::POST, replay.clone(), Some(json!({"status": "dead"}))),
        (Method::POST, path(&webhook), Some(json!({"name": "x", "url": "https://x.example/"}))),
        // Their own endpoint with our destination's id.
        (Method::GET, format!("/webhooks/{}/destinations/{id}", theirs.id), None),
    ];
    for (method, at, body) in cases {
        let reply = app.call(method.clone(), &at, Some(&stranger), body).await;
        assert_eq!(reply.status, 404, "{method} {at}: {}", reply.text);
    }
    let still = app.admin(Method::GET, &one, None).await;
    assert_eq!((still.status.as_u16(), still.body["enabled"].clone()), (200, json!(true)));
}
