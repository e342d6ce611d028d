//! Analytics: volume buckets with zeros filled and sums equal to captures, method breakdown, overview; and
//! retention by age and by count.

use hookflow_shared::api::admin::{Retention, UpdateOrganization};
use hookflow_shared::api::analytics::Bucket;
use hookflow_shared::api::webhooks::CreateWebhook;
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn volume_and_methods_count_every_capture() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("counted").await;
    for method in [Method::POST, Method::POST, Method::POST, Method::GET, Method::DELETE] {
        assert_eq!(app.capture(method, &id, "x").await.status, 200);
    }
    let now = chrono::Utc::now();
    let from = (now - chrono::Duration::minutes(5)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let to = (now + chrono::Duration::minutes(2)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let hooks = app.api();
    let hooks = hooks.webhooks();
    let volume = hooks.volume(&id, &[("bucket", "minute"), ("from", &from), ("to", &to)]).await.expect("volume");
    assert_eq!(volume.bucket, Bucket::Minute);
    assert_eq!(volume.total, 5);
    let points = &volume.points;
    assert!((7..=8).contains(&points.len()), "{} points", points.len());
    assert_eq!(points.iter().map(|p| p.count).sum::<i64>(), 5);
    assert!(points.iter().filter(|p| p.count == 0).count() >= 5, "empty minutes are 0");
    assert!(json!(points[0].t).as_str().expect("t").ends_with(":00.000000Z"));

    let hourly = hooks.volume(&id, &[]).await.expect("volume");
    assert_eq!((hourly.bucket, hourly.total), (Bucket::Hour, 5));
    assert!((24..=25).contains(&hourly.points.len()), "default window: 24 h");

    let methods = hooks.methods(&id, &[]).await.expect("methods");
    assert_eq!(methods.total, 5);
    assert_eq!(json!(methods.methods[0]), json!({"method": "POST", "count": 3, "share": 0.6}));
    let shares: f64 = methods.methods.iter().map(|m| m.share).sum();
    assert!((shares - 1.0).abs() < 1e-9);
}

#[tokio::test]
async fn history_buckets_aggregate_counters() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("history").await;
    // Past traffic, as the capture writer would have counted it.
    for (minute, method, count) in [
        ("2026-01-01T10:05:00Z", "POST", 4),
        ("2026-01-01T10:59:00Z", "POST", 1),
        ("2026-01-01T12:00:00Z", "PUT", 2),
        ("2026-01-02T00:30:00Z", "POST", 10),
    ] {
        sqlx::query("INSERT INTO capture_counts (webhook_id, organization_id, minute, method, count) VALUES ($1::uuid, $2, $3::timestamptz, $4, $5)")
            .bind(&id)
            .bind(app.admin.org)
            .bind(minute)
            .bind(method)
            .bind(count as i64)
            .execute(&app.pool)
            .await
            .expect("insert");
    }
    let volume = async |query: &str| app.get::<Value>(&format!("/webhooks/{id}/analytics/volume?{query}"), 200).await;
    let counts = |volume: &Value| -> Vec<i64> {
        volume["points"].as_array().expect("points").iter().map(|p| p["count"].as_i64().expect("count")).collect()
    };
    let hours = volume("bucket=hour&from=2026-01-01T10:00:00Z&to=2026-01-01T13:00:00Z").await;
    assert_eq!(counts(&hours), [5, 0, 2]);
    assert_eq!(hours["points"][1]["t"], "2026-01-01T11:00:00.000000Z");
    assert_eq!(counts(&volume("bucket=day&from=2026-01-01T00:00:00Z&to=2026-01-03T00:00:00Z").await), [7, 10]);
    let window = [("from", "2026-01-01T00:00:00Z"), ("to", "2026-01-01T11:00:00Z")];
    let methods = app.api().webhooks().methods(&id, &window).await.expect("methods");
    assert_eq!(json!(methods.methods), json!([{"method": "POST", "count": 5, "share": 1.0}]));

    for bad in [
        &[("bucket", "week")][..],
        &[("from", "2026-01-02T00:00:00Z"), ("to", "2026-01-01T00:00:00Z")],
        &[("from", "yesterday")],
        &[("bucket", "minute"), ("from", "2020-01-01T00:00:00Z"), ("to", "2026-01-01T00:00:00Z")],
    ] {
        let reply = app.api().webhooks().volume(&id, bad).await.expect_err("a bad window");
        assert_eq!((reply.status(), reply.code()), (400, "invalid_request"), "{bad:?}");
    }
}

#[tokio::test]
async fn the_overview_totals_the_organization() {
    let app = TestApp::spawn().await;
    let busy = app.webhook_named("busy").await;
    let quiet = app.webhook_named("quiet").await;
    for _ in 0..3 {
        app.capture(Method::POST, &busy, "x").await;
    }
    app.capture(Method::POST, &quiet, "x").await;
    let other = app.new_org("Globex").await;
    let theirs = CreateWebhook::new("theirs".parse().expect("a name"));
    let foreign = app.api_as(&other).webhooks().create(&theirs).await.expect("create");
    app.capture(Method::POST, &foreign.id.to_string(), "x").await;

    let overview = app.api().organization().overview(&[]).await.expect("overview");
    assert_eq!(overview.captures.total, 4);
    assert_eq!(json!(overview.captures.endpoints[0]), json!({"webhook_id": busy, "name": "busy", "count": 3}));
    assert_eq!(overview.captures.endpoints.len(), 2, "only this organization");
    assert_eq!(overview.executions["succeeded"], 0);
    let reader = app.api_as(&app.creds_with(&["flows:read"]).await);
    assert_eq!(reader.organization().overview(&[]).await.expect_err("no scope").code(), "insufficient_scope");
}

#[tokio::test]
async fn retention_keeps_the_newest_and_drops_the_old() {
    let app = TestApp::spawn().await;
    let capped = app
        .create_webhook(json!({"name": "capped", "retention": {"max_age_days": null, "max_requests": 3}}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(
            app.capture(Method::POST, &capped, format!("{i}")).await.body["request_id"]
                .as_str()
                .expect("id")
                .to_owned(),
        );
    }
    let aged =
        app.create_webhook(json!({"name": "aged", "retention": {"max_age_days": 1, "max_requests": null}})).await["id"]
            .as_str()
            .expect("id")
            .to_owned();
    let old = app.capture(Method::POST, &aged, "old").await.body["request_id"].as_str().expect("id").to_owned();
    let fresh = app.capture(Method::POST, &aged, "fresh").await.body["request_id"].as_str().expect("id").to_owned();
    sqlx::query("UPDATE captures SET received_at = now() - interval '2 days' WHERE id = $1::uuid")
        .bind(&old)
        .execute(&app.pool)
        .await
        .expect("age");
    // The organization default applies to endpoints without their own.
    let one = UpdateOrganization {
        default_retention: Some(Retention { max_age_days: None, max_requests: Some(1) }),
        ..Default::default()
    };
    app.api().organization().update(&one).await.expect("update");
    let defaulted = app.webhook_named("defaulted").await;
    app.capture(Method::POST, &defaulted, "a").await;
    let last = app.capture(Method::POST, &defaulted, "b").await.body["request_id"].as_str().expect("id").to_owned();

    let deleted = hookflow_control_plane::tasks::retention::sweep(&app.pool).await.expect("sweep");
    assert_eq!(deleted, 2 + 1 + 1);
    let api = app.api();
    let ids = async |webhook: &str| -> Vec<String> {
        let page = api.webhooks().requests(webhook, &[]).await.expect("list");
        page.items.iter().map(|c| c.id.to_string()).collect()
    };
    let kept = ids(&capped).await;
    assert_eq!(kept, [sent[4].clone(), sent[3].clone(), sent[2].clone()]);
    assert_eq!(ids(&aged).await, [fresh]);
    assert_eq!(ids(&defaulted).await, [last]);
    assert_eq!(api.webhooks().get(&capped).await.expect("get").request_count, 3);
    let analytics = api.webhooks().volume(&capped, &[]).await.expect("volume");
    assert_eq!(analytics.total, 5, "analytics count what was received");
    assert_eq!(hookflow_control_plane::tasks::retention::sweep(&app.pool).await.expect("sweep"), 0, "idempotent");
}

#[tokio::test]
async fn the_background_task_enforces_retention() {
    let app = TestApp::spawn_with(|s| s.retention_interval = std::time::Duration::from_millis(200)).await;
    let id = app.create_webhook(json!({"name": "auto", "retention": {"max_age_days": null, "max_requests": 1}})).await
        ["id"]
        .as_str()
        .expect("id")
        .to_owned();
    for i in 0..3 {
        app.capture(Method::POST, &id, format!("{i}")).await;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let count = app.api().webhooks().get(&id).await.expect("get").request_count;
        if count == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "retention never ran");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
