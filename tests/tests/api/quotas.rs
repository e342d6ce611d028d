//! Operating II, quotas: each of `endpoints`, `flows`, `captures_per_day` and `stored_bytes` is refused by its
//! name exactly past its limit (the Nth admitted, the N+1th refused: 403 on creation, 429 with `Retry-After` on
//! captures, before the body is read), nothing stored is lost, other organizations are unaffected,
//! `GET /organization/usage` matches what is stored, replicas overshoot no more than the bound the capture view
//! claims, and the operator's command and the metric work over the real binary.

use hookflow_control_plane::api::admin::limits::{self, OrgLimits};
use hookflow_shared::OrgId;
use hookflow_tests::{Creds, Reply, TestApp, prometheus, server::ServerProcess};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");

async fn set(app: &TestApp, org: OrgId, limits: OrgLimits) {
    let mut conn = app.pool.acquire().await.expect("conn");
    limits::set(&mut conn, org, limits).await.expect("set").expect("the organization");
}

async fn create_webhook(app: &TestApp, creds: &Creds, name: &str) -> Reply {
    app.call(Method::POST, "/webhooks", Some(creds), Some(json!({"name": name}))).await
}

async fn create_flow(app: &TestApp, creds: &Creds, name: &str) -> Reply {
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    app.call(Method::POST, "/flows", Some(creds), Some(json!({"name": name, "definition": definition}))).await
}

async fn usage(app: &TestApp, creds: &Creds) -> Value {
    let reply = app.call(Method::GET, "/organization/usage", Some(creds), None).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body
}

async fn listed(app: &TestApp, creds: &Creds, path: &str) -> usize {
    let reply = app.call(Method::GET, path, Some(creds), None).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body["items"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn endpoints_and_flows_are_refused_403_past_their_quota_nothing_lost_others_unaffected() {
    let app = TestApp::spawn_with(|s| s.quotas.endpoints = Some(2)).await;
    let other = app.new_org("Other").await;
    for n in 0..2 {
        assert_eq!(create_webhook(&app, &app.admin, &format!("hook-{n}")).await.status, 201);
    }
    let refused = create_webhook(&app, &app.admin, "hook-2").await;
    refused.assert_refused(403, "quota_exceeded", "endpoints");
    assert!(refused.headers.get("retry-after").is_none(), "a creation is not retried later");
    assert_eq!(listed(&app, &app.admin, "/webhooks").await, 2, "what was created is still there");
    // The default is per organization: another one has its own two.
    for n in 0..2 {
        assert_eq!(create_webhook(&app, &other, &format!("theirs-{n}")).await.status, 201);
    }
    create_webhook(&app, &other, "theirs-2").await.assert_refused(403, "quota_exceeded", "endpoints");
    // An organization's own limit wins over the default.
    set(&app, app.admin.org, OrgLimits { endpoints: Some(Some(3)), flows: Some(Some(1)), ..OrgLimits::default() })
        .await;
    assert_eq!(create_webhook(&app, &app.admin, "hook-2").await.status, 201);
    create_webhook(&app, &app.admin, "hook-3").await.assert_refused(403, "quota_exceeded", "endpoints");

    let first = create_flow(&app, &app.admin, "flow-0").await;
    assert_eq!(first.status, 201, "{}", first.text);
    create_flow(&app, &app.admin, "flow-1").await.assert_refused(403, "quota_exceeded", "flows");
    // Importing creates a flow too.
    let path = format!("/flows/{}/export", first.body["id"].as_str().expect("id"));
    let mut document = app.call(Method::GET, &path, Some(&app.admin), None).await.body;
    document["flow"]["name"] = json!("imported");
    let imported = app.call(Method::POST, "/flows/import", Some(&app.admin), Some(document.clone())).await;
    imported.assert_refused(403, "quota_exceeded", "flows");
    assert_eq!(listed(&app, &app.admin, "/flows").await, 1);
    let theirs = app.call(Method::POST, "/flows/import", Some(&other), Some(document)).await;
    assert_eq!(theirs.status, 201, "no flows quota for the other organization: {}", theirs.text);

    // Clearing the organization's limit brings the default back.
    set(&app, app.admin.org, OrgLimits { endpoints: Some(None), ..OrgLimits::default() }).await;
    create_webhook(&app, &app.admin, "hook-3").await.assert_refused(403, "quota_exceeded", "endpoints");
    let mine = usage(&app, &app.admin).await;
    assert_eq!((mine["endpoints"].as_i64(), mine["flows"].as_i64()), (Some(3), Some(1)), "{mine}");
    assert_eq!(mine["limits"]["endpoints"], 2, "{mine}");
    assert_eq!(mine["limits"]["flows"], 1, "{mine}");
    assert_eq!(mine["limits"]["captures_per_day"], Value::Null, "{mine}");
}

/// Concurrent creations on two replicas are counted one after the other: never more than the limit.
#[tokio::test]
async fn concurrent_creations_on_two_replicas_stop_at_the_limit() {
    let app = TestApp::spawn_with(|s| s.quotas.flows = Some(5)).await;
    let replica = app.replica_with(|s| s.quotas.flows = Some(5)).await;
    let names: Vec<String> = (0..12).map(|n| format!("flow-{n}")).collect();
    let attempts = names.iter().enumerate().map(|(n, name)| {
        let server = if n % 2 == 0 { &app } else { &replica };
        create_flow(server, &app.admin, name)
    });
    let replies = futures_util::future::join_all(attempts).await;
    let created = replies.iter().filter(|r| r.status == 201).count();
    let refused = replies.iter().filter(|r| r.status == 403 && r.code() == "quota_exceeded").count();
    eprintln!("12 concurrent creations on two replicas, limit 5: {created} created, {refused} refused");
    assert_eq!((created, refused), (5, 7));
    assert_eq!(app.rows("flows").await, 5);
}

/// A capture URL request with a declared body that never comes: answered at once (before any body is read).
async fn capture_without_body(app: &TestApp, webhook: &str) -> String {
    capture_declaring(app, webhook, 1_000_000).await
}

/// The answer to a capture that declares `length` bytes and sends none of them.
async fn capture_declaring(app: &TestApp, webhook: &str, length: u64) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let address = app.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
    let head = format!("POST /webhook/{webhook} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("answered without the body")
        .expect("read");
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

#[tokio::test]
async fn captures_past_the_days_count_or_stored_bytes_are_answered_429_before_their_body() {
    // No refresh during the test: admissions are this server's own counts over the first read.
    let app = TestApp::spawn_with(|s| s.quota_refresh = Duration::from_secs(600)).await;
    let other = app.new_org("Other").await;
    set(&app, app.admin.org, OrgLimits { captures_per_day: Some(Some(3)), ..OrgLimits::default() }).await;
    set(&app, other.org, OrgLimits { stored_bytes: Some(Some(3000)), ..OrgLimits::default() }).await;
    let hook = app.webhook_named("counted").await;
    let bodies = ["a".repeat(10), "b".repeat(20), "c".repeat(30)];
    for body in &bodies {
        let reply = app.capture(Method::POST, &hook, body.clone()).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let refused = app.capture(Method::POST, &hook, "d").await;
    refused.assert_refused(429, "quota_exceeded", "captures_per_day");
    let retry: u64 = refused.headers["retry-after"].to_str().expect("text").parse().expect("seconds");
    assert!((1..=86_400).contains(&retry), "until the next UTC day: {retry}");
    let started = Instant::now();
    let raw = capture_without_body(&app, &hook).await;
    eprintln!("a refused capture declaring 1 MB, none sent, answered in {:?}", started.elapsed());
    assert!(raw.starts_with("HTTP/1.1 429") && raw.contains("quota_exceeded"), "{raw}");
    assert_eq!(listed(&app, &app.admin, &format!("/webhooks/{hook}/requests")).await, 3, "nothing stored is lost");
    let mine = usage(&app, &app.admin).await;
    assert_eq!(mine["captures_today"], 3, "{mine}");
    assert_eq!(mine["stored_bytes"], 60, "the bodies stored: {mine}");

    // stored_bytes: 1000 + 1000, a declared 1500 would pass 3000, 1000 reaches it exactly, then nothing more.
    let theirs = create_webhook(&app, &other, "theirs").await.body["id"].as_str().expect("id").to_owned();
    for (size, status) in [(1000, 200), (1000, 200), (1500, 429), (1000, 200), (1, 429)] {
        let reply = app.capture(Method::POST, &theirs, "x".repeat(size)).await;
        assert_eq!(reply.status, status, "{size} bytes: {}", reply.text);
        if status == 429 {
            reply.assert_refused(429, "quota_exceeded", "stored_bytes");
            assert!(reply.headers.contains_key("retry-after"));
        }
    }
    // A body over the endpoint's own limit is 413 whatever the quota says: a 429 would have its sender retry it.
    let oversized = capture_declaring(&app, &theirs, 50 << 20).await;
    assert!(oversized.starts_with("HTTP/1.1 413"), "{oversized}");
    let theirs_usage = usage(&app, &other).await;
    assert_eq!((theirs_usage["stored_bytes"].as_i64(), theirs_usage["captures_today"].as_i64()), (Some(3000), Some(3)));
    // Each organization's quotas are its own: the first is past its day's count, not past any stored_bytes.
    assert_eq!(usage(&app, &app.admin).await["captures_today"], 3);
    assert_eq!(app.rows("captures").await, 6, "every admitted capture stored, no refused one");
}

#[tokio::test]
async fn usage_matches_what_is_stored_and_needs_organization_read() {
    let app = TestApp::spawn_with_embedded_runner_of(2, 0.5, Duration::from_secs(900), |s| {
        s.quotas.stored_bytes = Some(1 << 30);
        s.retention.execution_days = Some(30);
    })
    .await;
    let other = app.new_org("Other").await;
    let (execution, _) =
        app.run_as(&app.admin, json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]}), json!({})).await;
    assert_eq!(execution["status"], "succeeded", "{execution}");
    let hooks = [app.webhook_named("one").await, app.webhook_named("two").await];
    let mut bodies = 0;
    for (n, hook) in hooks.iter().cycle().take(7).enumerate() {
        let body = "z".repeat(100 * (n + 1));
        bodies += body.len() as i64;
        assert_eq!(app.capture(Method::PUT, hook, body).await.status, 200);
    }
    let results: i64 = sqlx::query_scalar(
        "SELECT COALESCE(sum(octet_length(n.result::text)), 0)::int8 FROM node_results n
         JOIN executions e ON e.id = n.execution_id WHERE e.organization_id = $1",
    )
    .bind(app.admin.org)
    .fetch_one(&app.pool)
    .await
    .expect("results");
    assert!(results > 0);
    let mine = usage(&app, &app.admin).await;
    eprintln!("usage after 7 captures of {bodies} bytes and node results of {results} bytes: {mine}");
    assert_eq!(mine["stored_bytes"].as_i64(), Some(bodies + results), "{mine}");
    assert_eq!((mine["endpoints"].as_i64(), mine["flows"].as_i64()), (Some(2), Some(1)));
    assert_eq!(mine["captures_today"], 7);
    let expected = json!({"stored_bytes": 1 << 30, "endpoints": null, "flows": null, "captures_per_day": null,
        "execution_retention_days": 30, "audit_retention_days": null});
    assert_eq!(mine["limits"], expected);
    let theirs = usage(&app, &other).await;
    assert_eq!(theirs, json!({"stored_bytes": 0, "endpoints": 0, "flows": 0, "captures_today": 0, "limits": expected}));

    // Deleting an endpoint gives its bodies back; today's count stays what was received.
    let first_bodies: i64 = [100, 300, 500, 700].iter().sum();
    app.delete(&format!("/webhooks/{}", hooks[0]), 204).await;
    let mine = usage(&app, &app.admin).await;
    assert_eq!(mine["stored_bytes"].as_i64(), Some(bodies - first_bodies + results), "{mine}");
    assert_eq!((mine["endpoints"].as_i64(), mine["captures_today"].as_i64()), (Some(1), Some(7)));
    // Deleting the execution gives its results back.
    sqlx::query("DELETE FROM executions WHERE organization_id = $1")
        .bind(app.admin.org)
        .execute(&app.pool)
        .await
        .expect("delete");
    assert_eq!(usage(&app, &app.admin).await["stored_bytes"].as_i64(), Some(bodies - first_bodies));

    let reader = app.creds_with(&["webhooks:read"]).await;
    let refused = app.call(Method::GET, "/organization/usage", Some(&reader), None).await;
    refused.assert_refused(403, "insufficient_scope", "organization:read");
    let allowed = app.creds_with(&["organization:read"]).await;
    assert_eq!(app.call(Method::GET, "/organization/usage", Some(&allowed), None).await.status, 200);
    let anonymous = app.call(Method::GET, "/organization/usage", None, None).await;
    assert_eq!((anonymous.status.as_u16(), anonymous.code()), (401, "unauthorized"));
}

/// The bound the capture view claims across replicas: a limit is overshot by at most what the other replicas
/// admit between two of a replica's refreshes; after a refresh every replica refuses.
#[tokio::test]
async fn replicas_overshoot_the_days_count_by_at_most_what_the_others_admit_between_refreshes() {
    let refresh = Duration::from_millis(1000);
    let app = TestApp::spawn_with(|s| s.quota_refresh = refresh).await;
    let replica = app.replica_with(|s| s.quota_refresh = refresh).await;
    set(&app, app.admin.org, OrgLimits { captures_per_day: Some(Some(5)), ..OrgLimits::default() }).await;
    let hook = app.webhook_named("shared").await;
    async fn send(server: &TestApp, hook: &str) -> Reply {
        server.capture(Method::POST, hook, "x").await
    }
    // The replica reads the organization's usage at its first capture.
    assert_eq!(send(&replica, &hook).await.status, 200);
    let mut first = 0;
    while send(&app, &hook).await.status == 200 {
        first += 1;
    }
    let mut second = 0;
    while send(&replica, &hook).await.status == 200 {
        second += 1;
    }
    let stored = app.rows("captures").await;
    eprintln!(
        "limit 5: the replica admitted 1, then the first server {first}, then the replica {second} more: {stored} stored"
    );
    assert_eq!(first, 4, "the first server read the replica's capture at its own first capture");
    assert!(second <= first, "overshoot {second} is at most what the other server admitted since the last refresh");
    assert_eq!(stored, 5 + second as i64);
    tokio::time::sleep(refresh * 2 + Duration::from_millis(500)).await;
    for server in [&app, &replica] {
        send(server, &hook).await.assert_refused(429, "quota_exceeded", "captures_per_day");
    }
    assert_eq!(usage(&app, &app.admin).await["captures_today"].as_i64(), Some(stored));
    // Raising the limit reaches both replicas within a refresh.
    set(&app, app.admin.org, OrgLimits { captures_per_day: Some(Some(100)), ..OrgLimits::default() }).await;
    tokio::time::sleep(refresh * 2 + Duration::from_millis(500)).await;
    for server in [&app, &replica] {
        assert_eq!(send(server, &hook).await.status, 200);
    }
}

async fn scrape(metrics: &str, quota: &str) -> f64 {
    let text = reqwest::get(format!("http://{metrics}/metrics")).await.expect("scrape").text().await.expect("text");
    prometheus::sum(&prometheus::parse(&text), "hookflow_quota_refusals_total", &[("quota", quota)])
}

/// The operator's command over the real binary: sets and clears quotas (bad values refused with a message),
/// audited; the server's defaults apply where an organization sets none; refusals are counted by quota.
#[tokio::test]
async fn orgs_limits_sets_and_clears_quotas_and_refusals_are_counted() {
    let server = ServerProcess::spawn(
        SERVER,
        &["--metrics-listen", "127.0.0.1:0", "--quota-refresh-ms", "100", "--default-flows", "1"],
    )
    .await;
    let metrics = server.metrics.clone().expect("a metrics listener");
    let org = server.org.clone();
    let out = server
        .operator(SERVER, &["orgs", "limits", "--org", &org, "--captures-per-day", "2", "--endpoints", "1"])
        .await;
    assert!(out.contains("captures_per_day 2") && out.contains("endpoints 1"), "{out}");
    let client = reqwest::Client::new();
    let call = |method: Method, path: &str, body: Value| {
        client
            .request(method, format!("{}{path}", server.base))
            .header("x-api-key", &server.key)
            .header("x-organization-id", &org)
            .json(&body)
            .send()
    };
    let hook: Value =
        call(Method::POST, "/webhooks", json!({"name": "one"})).await.expect("send").json().await.expect("json");
    let hook = hook["id"].as_str().expect("id").to_owned();
    let second = call(Method::POST, "/webhooks", json!({"name": "two"})).await.expect("send");
    assert_eq!(second.status(), 403);
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    for (n, status) in [(0, 201), (1, 403)] {
        let reply = call(Method::POST, "/flows", json!({"name": format!("f{n}"), "definition": definition})).await;
        assert_eq!(reply.expect("send").status(), status, "--default-flows 1");
    }
    let capture = || client.post(format!("{}/webhook/{hook}", server.base)).body("hello").send();
    for status in [200, 200, 429] {
        assert_eq!(capture().await.expect("send").status(), status);
    }
    assert_eq!(scrape(&metrics, "captures_per_day").await, 1.0);
    assert_eq!(scrape(&metrics, "endpoints").await, 1.0);
    assert_eq!(scrape(&metrics, "flows").await, 1.0);
    assert_eq!(scrape(&metrics, "stored_bytes").await, 0.0);

    let out = server.operator(SERVER, &["orgs", "limits", "--org", &org, "--captures-per-day", "none"]).await;
    assert!(out.contains("captures_per_day the server's default") && out.contains("endpoints 1"), "{out}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(capture().await.expect("send").status(), 200, "cleared, and no default: no limit");
    let usage: Value =
        call(Method::GET, "/organization/usage", Value::Null).await.expect("send").json().await.expect("json");
    assert_eq!(usage["captures_today"], 3, "{usage}");
    assert_eq!(usage["stored_bytes"], 15, "{usage}");
    assert_eq!((usage["limits"]["flows"].as_i64(), usage["limits"]["endpoints"].as_i64()), (Some(1), Some(1)));
    assert_eq!(usage["limits"]["captures_per_day"], Value::Null);

    for (bad, says) in [
        (&["--stored-bytes=-1"][..], "not a whole number"),
        (&["--flows", "many"][..], "not a whole number"),
        (&["--endpoints", "1.5"][..], "not a whole number"),
        (&["--captures-per-day", "99999999999999999999"][..], "not a whole number"),
        (&[][..], "name a limit"),
    ] {
        let output = tokio::process::Command::new(SERVER)
            .args(["--database-url", &server.database_url, "orgs", "limits", "--org", &org])
            .args(bad)
            .output()
            .await
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains(says), "{bad:?}: {stderr}");
    }
    let pool = sqlx::PgPool::connect(&server.database_url).await.expect("connect");
    let audited: Vec<Value> =
        sqlx::query_scalar("SELECT details FROM audit_log WHERE action = 'organization.limits' ORDER BY id")
            .fetch_all(&pool)
            .await
            .expect("audit");
    assert_eq!(audited.len(), 2, "refused commands change and audit nothing");
    assert_eq!(audited[0]["captures_per_day"], 2);
    assert_eq!(audited[1]["captures_per_day"], Value::Null);
    assert_eq!(audited[1]["endpoints"], 1);
    server.stop().await;
}
