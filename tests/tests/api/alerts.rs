//! Monitors (issue #50), alerts over the real server: notification channels (create with a webhook's signing
//! secret shown once, list, read, change, delete, each audited without the secret; a test send through each kind,
//! signed and verified by the `standardwebhooks` library, mailed through a real aiosmtpd), every bad field refused
//! by name, an email channel refused without SMTP, private URLs refused, scopes and another organization's ids
//! (404); schedules may only notify existing channels of their organization and a deleted channel leaves them;
//! and a schedule that breaks and is fixed, with two replicas: exactly one `flow.failing` and one
//! `flow.recovered` per channel, listed by `/alerts`.

use crate::RUNNER;
use hookflow_tests::TestApp;
use hookflow_tests::exec::scoped;
use hookflow_tests::receiver::{Arrival, Receiver};
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::smtp::SmtpServer;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

async fn create(app: &TestApp, body: Value) -> Value {
    let reply = app.admin(Method::POST, "/notification-channels", Some(body)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.body
}

async fn app_with_mail(smtp: &SmtpServer) -> TestApp {
    let settings = smtp.settings();
    TestApp::spawn_with(move |s| s.smtp = Some(settings)).await
}

/// Every audit entry as text.
async fn audit_text(app: &TestApp) -> String {
    let rows: Vec<String> = sqlx::query_scalar("SELECT details::text || actor || target || action FROM audit_log")
        .fetch_all(&app.pool)
        .await
        .expect("audit rows");
    rows.join("\n")
}

/// Checks each arrival's Standard Webhooks signature with an independent HMAC, and with the `standardwebhooks`
/// Python library when it is installed.
pub(crate) fn verify_signatures(secret: &str, arrivals: &[Arrival]) {
    use base64::Engine as _;
    let key = base64::engine::general_purpose::STANDARD.decode(secret.strip_prefix("whsec_").expect("whsec_"));
    let key = key.expect("base64");
    let mut messages = Vec::new();
    for a in arrivals {
        let (id, ts, sig) = (
            a.header("webhook-id").expect("webhook-id"),
            a.header("webhook-timestamp").expect("webhook-timestamp"),
            a.header("webhook-signature").expect("webhook-signature"),
        );
        let mut content = format!("{id}.{ts}.").into_bytes();
        content.extend_from_slice(&a.body);
        let expected =
            format!("v1,{}", hookflow_tests::signers::b64(&hookflow_tests::signers::hmac_sha256(&key, &content)));
        assert_eq!(sig, expected, "the signature is HMAC-SHA256 of id.timestamp.body");
        messages.push(json!({"id": id, "timestamp": ts, "signature": sig,
            "body": base64::engine::general_purpose::STANDARD.encode(&a.body)}));
    }
    let script = r#"
import base64, json, sys
try:
    from standardwebhooks.webhooks import Webhook
except ImportError:
    sys.exit(3)
hook = Webhook(sys.argv[1])
for m in json.loads(sys.stdin.read()):
    hook.verify(base64.b64decode(m["body"]), {"webhook-id": m["id"], "webhook-timestamp": m["timestamp"],
                                              "webhook-signature": m["signature"]})
"#;
    use std::io::Write as _;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script, secret])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().expect("stdin").write_all(Value::Array(messages).to_string().as_bytes()).expect("write");
    let out = child.wait_with_output().expect("python3 ran");
    if out.status.code() == Some(3) {
        eprintln!("the standardwebhooks library is not installed; only the independent HMAC checked the signatures");
        return;
    }
    assert!(out.status.success(), "the library refused a signature: {}", String::from_utf8_lossy(&out.stderr));
}

fn body_of(arrival: &Arrival) -> Value {
    serde_json::from_slice(&arrival.body).expect("a JSON body")
}

#[tokio::test]
async fn alerts_channels_are_created_read_changed_tested_and_deleted_with_the_secret_shown_once() {
    let smtp = SmtpServer::start().await;
    let app = app_with_mail(&smtp).await;
    let hook = Receiver::spawn(204).await;
    let slack_in = Receiver::spawn(200).await;

    let webhook =
        create(&app, json!({"name": "ops hook", "kind": "webhook", "url": format!("{}/alerts", hook.base)})).await;
    let secret = webhook["signing_secret"].as_str().expect("a secret in the 201").to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(
        (&webhook["kind"], &webhook["address"], &webhook["last_delivery"]),
        (&json!("webhook"), &Value::Null, &Value::Null)
    );
    let slack =
        create(&app, json!({"name": "ops slack", "kind": "slack", "url": format!("{}/slack", slack_in.base)})).await;
    assert!(slack.get("signing_secret").is_none(), "{slack}");
    let email = create(&app, json!({"name": "on call", "kind": "email", "address": "Oncall@Example.com"})).await;
    assert_eq!((&email["address"], &email["url"]), (&json!("oncall@example.com"), &Value::Null));
    let (wid, sid, eid) =
        (webhook["id"].as_str().unwrap(), slack["id"].as_str().unwrap(), email["id"].as_str().unwrap());

    let listed = app.admin(Method::GET, "/notification-channels", None).await;
    assert_eq!(listed.status, 200);
    let names: Vec<&str> =
        listed.body["items"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ops hook", "ops slack", "on call"]);
    let read = app.admin(Method::GET, &format!("/notification-channels/{wid}"), None).await;
    assert_eq!((read.status.as_u16(), &read.body["name"]), (200, &json!("ops hook")));
    assert!(!read.text.contains(&secret) && !listed.text.contains(&secret));

    let changed =
        app.admin(Method::PATCH, &format!("/notification-channels/{sid}"), Some(json!({"name": "slack #ops"}))).await;
    assert_eq!((changed.status.as_u16(), &changed.body["name"]), (200, &json!("slack #ops")));
    assert_eq!(changed.body["url"], slack["url"]);

    // Test sends: one through each kind; each channel's last_delivery says it went.
    for id in [wid, sid, eid] {
        let reply = app.admin(Method::POST, &format!("/notification-channels/{id}/test"), None).await;
        assert_eq!(reply.status, 202, "{}", reply.text);
    }
    let arrivals = hook.wait_until(Duration::from_secs(20), |a| !a.is_empty()).await;
    assert_eq!(arrivals[0].uri, "/alerts");
    let test = body_of(&arrivals[0]);
    assert_eq!(test["type"], "test");
    assert_eq!(test["organization_id"], app.admin.org.to_string());
    verify_signatures(&secret, &arrivals);
    let slack_arrivals = slack_in.wait_until(Duration::from_secs(20), |a| !a.is_empty()).await;
    let text = body_of(&slack_arrivals[0])["text"].as_str().expect("a Slack text").to_owned();
    assert!(text.contains("test message"), "{text}");
    assert!(slack_arrivals[0].header("webhook-signature").is_none(), "Slack messages are not signed");
    let mails = smtp.wait_for("oncall@example.com", 1).await;
    assert!(mails[0].subject.starts_with("[hookflow]"), "{}", mails[0].subject);
    for id in [wid, sid, eid] {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let read = app.admin(Method::GET, &format!("/notification-channels/{id}"), None).await;
            if !read.body["last_delivery"].is_null() {
                assert_eq!(read.body["last_delivery"]["ok"], true, "{}", read.text);
                assert_eq!(read.body["last_delivery"]["error"], Value::Null);
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "no last_delivery on {id}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Test sends are not alerts.
    let alerts = app.admin(Method::GET, "/alerts", None).await;
    assert_eq!((alerts.status.as_u16(), &alerts.body["items"]), (200, &json!([])));

    app.delete(&format!("/notification-channels/{eid}"), 204).await;
    assert_eq!(app.admin(Method::GET, &format!("/notification-channels/{eid}"), None).await.status, 404);
    let audit = audit_text(&app).await;
    for action in ["notification_channel.created", "notification_channel.updated", "notification_channel.deleted"] {
        assert!(audit.contains(action), "{action} audited");
    }
    assert!(!audit.contains(&secret), "the secret is in the audit log");
    let raw: i64 =
        sqlx::query_scalar("SELECT count(*) FROM notification_channels WHERE signing_secret::text LIKE '%whsec%'")
            .fetch_one(&app.pool)
            .await
            .expect("count");
    assert_eq!(raw, 0, "the secret is sealed");
}

#[tokio::test]
async fn alerts_bad_fields_private_urls_and_email_without_smtp_are_refused_by_name() {
    let app = TestApp::spawn().await;
    let post = |body: Value| {
        let app = &app;
        async move { app.admin(Method::POST, "/notification-channels", Some(body)).await }
    };
    post(json!({"name": "m", "kind": "email", "address": "a@example.com"})).await.assert_refused(
        400,
        "invalid_request",
        "SMTP",
    );
    post(json!({"name": "s", "kind": "slack"})).await.assert_refused(400, "invalid_request", "url");
    post(json!({"name": "s", "kind": "webhook", "url": "ftp://x.example/"})).await.assert_refused(
        400,
        "invalid_request",
        "url",
    );
    post(json!({"name": "s", "kind": "webhook", "url": "not a url"})).await.assert_refused(
        400,
        "invalid_request",
        "url",
    );
    post(json!({"name": "s", "kind": "slack", "url": "https://x.example/", "address": "a@example.com"}))
        .await
        .assert_refused(400, "invalid_request", "address");
    post(json!({"name": "s", "kind": "pager", "url": "https://x.example/"})).await.assert_refused(
        400,
        "invalid_request",
        "kind",
    );
    post(json!({"kind": "slack", "url": "https://x.example/"})).await.assert_refused(400, "invalid_request", "name");
    post(json!({"name": "s", "kind": "slack", "url": "https://x.example/", "extra": 1})).await.assert_refused(
        400,
        "invalid_request",
        "extra",
    );

    // An organization that may not reach private targets: literal private addresses are refused.
    let other = app.new_org("Public only").await;
    for url in ["http://10.0.0.1/in", "http://127.0.0.1:9/in", "http://169.254.169.254/latest", "http://[::1]/in"] {
        let reply = app
            .call(
                Method::POST,
                "/notification-channels",
                Some(&other),
                Some(json!({"name": "p", "kind": "webhook", "url": url})),
            )
            .await;
        reply.assert_refused(400, "invalid_request", "url");
    }
    let public = app
        .call(
            Method::POST,
            "/notification-channels",
            Some(&other),
            Some(json!({"name": "p", "kind": "slack", "url": "https://hooks.example/x"})),
        )
        .await;
    assert_eq!(public.status, 201, "{}", public.text);
    let id = public.body["id"].as_str().unwrap();
    let reply = app
        .call(
            Method::PATCH,
            &format!("/notification-channels/{id}"),
            Some(&other),
            Some(json!({"url": "http://192.168.1.2/"})),
        )
        .await;
    reply.assert_refused(400, "invalid_request", "url");
}

#[tokio::test]
async fn alerts_scopes_hold_and_another_organizations_channels_answer_404_and_schedules_name_only_their_own() {
    let app = TestApp::spawn().await;
    let made = create(&app, json!({"name": "c", "kind": "slack", "url": "https://hooks.example/a"})).await;
    let id = made["id"].as_str().unwrap().to_owned();
    let one = format!("/notification-channels/{id}");
    let reader = scoped(&app, app.admin.org, &["organization:read"]).await;
    assert_eq!(app.call(Method::GET, "/notification-channels", Some(&reader), None).await.status, 200);
    assert_eq!(app.call(Method::GET, &one, Some(&reader), None).await.status, 200);
    assert_eq!(app.call(Method::GET, "/alerts", Some(&reader), None).await.status, 200);
    for (method, at, body) in [
        (
            Method::POST,
            "/notification-channels".to_owned(),
            Some(json!({"name": "x", "kind": "slack", "url": "https://x.example/"})),
        ),
        (Method::PATCH, one.clone(), Some(json!({"name": "y"}))),
        (Method::DELETE, one.clone(), None),
        (Method::POST, format!("{one}/test"), None),
    ] {
        let reply = app.call(method.clone(), &at, Some(&reader), body).await;
        assert_eq!(reply.status, 403, "{method} {at}: {}", reply.text);
    }
    let nobody = scoped(&app, app.admin.org, &["flows:read"]).await;
    assert_eq!(app.call(Method::GET, "/notification-channels", Some(&nobody), None).await.status, 403);
    assert_eq!(app.call(Method::GET, "/alerts", Some(&nobody), None).await.status, 403);

    let stranger = app.new_org("Stranger").await;
    for (method, at, body) in [
        (Method::GET, one.clone(), None),
        (Method::PATCH, one.clone(), Some(json!({"name": "y"}))),
        (Method::DELETE, one.clone(), None),
        (Method::POST, format!("{one}/test"), None),
    ] {
        let reply = app.call(method.clone(), &at, Some(&stranger), body).await;
        assert_eq!(reply.status, 404, "{method} {at}: {}", reply.text);
    }
    let theirs = app.call(Method::GET, "/notification-channels", Some(&stranger), None).await;
    assert_eq!(theirs.body["items"], json!([]));

    // Schedules: only existing channels of the organization.
    let flow = app.create_flow("monitored", json!({"nodes": [{"id": "d", "kind": "delay", "delay_ms": 1}]})).await;
    let schedules = format!("/flows/{flow}/schedules");
    let theirs = app
        .call(
            Method::POST,
            "/notification-channels",
            Some(&stranger),
            Some(json!({"name": "t", "kind": "slack", "url": "https://hooks.example/t"})),
        )
        .await;
    for channel in [uuid::Uuid::new_v4().to_string(), theirs.body["id"].as_str().unwrap().to_owned()] {
        let reply = app
            .admin(Method::POST, &schedules, Some(json!({"cron": "0 3 * * *", "notify": {"channels": [channel]}})))
            .await;
        reply.assert_refused(400, "invalid_request", "notify.channels");
    }
    let second = create(&app, json!({"name": "c2", "kind": "slack", "url": "https://hooks.example/b"})).await;
    let created = app
        .admin(Method::POST, &schedules, Some(json!({"cron": "0 3 * * *", "notify": {"channels": [id, second["id"]]}})))
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    // Deleting a channel takes it out of the schedules that notified it.
    app.delete(&one, 204).await;
    let read = app.admin(Method::GET, &format!("{schedules}/{}", created.body["id"].as_str().unwrap()), None).await;
    assert_eq!(read.body["notify"]["channels"], json!([second["id"]]));
}

/// Arrivals whose JSON (or Slack text) is of `kind`.
fn of_type<'a>(arrivals: &'a [Arrival], kind: &str) -> Vec<&'a Arrival> {
    arrivals.iter().filter(|a| body_of(a)["type"] == kind).collect()
}

#[tokio::test]
async fn alerts_a_schedule_that_breaks_and_is_fixed_alerts_once_each_way_per_channel_across_two_replicas() {
    let smtp = SmtpServer::start().await;
    let settings = smtp.settings();
    let app = TestApp::spawn_with(move |s| {
        s.lease = Duration::from_secs(2);
        s.heartbeat_interval = Duration::from_secs(1);
        s.rescue_interval = Duration::from_millis(200);
        s.schedule_interval = Duration::from_millis(200);
        s.smtp = Some(settings);
    })
    .await;
    let smtp_settings = smtp.settings();
    let replica = app
        .replica_with(move |s| {
            s.schedule_interval = Duration::from_millis(200);
            s.smtp = Some(smtp_settings);
        })
        .await;
    let target = Target::spawn().await;
    let hook = Receiver::spawn(200).await;
    let slack_in = Receiver::spawn(200).await;
    let webhook = create(&app, json!({"name": "hook", "kind": "webhook", "url": hook.base})).await;
    let secret = webhook["signing_secret"].as_str().unwrap().to_owned();
    let slack = create(&app, json!({"name": "slack", "kind": "slack", "url": slack_in.base})).await;
    let email = create(&app, json!({"name": "mail", "kind": "email", "address": "oncall@example.com"})).await;
    let flow = app
        .create_flow(
            "checkout monitor",
            json!({"nodes": [{"id": "check", "kind": "request",
                "request": {"method": "GET", "url": format!("{}/status/{{{{code}}}}", target.base)},
                "extractors": [{"name": "code", "kind": "statusCode"}],
                "assertions": [{"source": "code", "operator": "equals", "expected": 200}]}]}),
        )
        .await;
    let creds = app.runner_creds(app.admin.org).await;
    let _runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[], &[]).await;
    let created = app
        .admin(
            Method::POST,
            &format!("/flows/{flow}/schedules"),
            Some(json!({"cron": "*/2 * * * * *", "timezone": "Europe/Paris", "variables": {"code": "500"},
                "notify": {"channels": [webhook["id"], slack["id"], email["id"]], "after_failures": 1}})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let schedule = created.body["id"].as_str().unwrap().to_owned();
    let item = format!("/flows/{flow}/schedules/{schedule}");

    // Broken: the first failed run alerts, the next ones do not.
    let arrivals = hook.wait_until(Duration::from_secs(60), |a| !a.is_empty()).await;
    let failing = body_of(&arrivals[0]);
    assert_eq!(failing["type"], "flow.failing", "{failing}");
    let first_failed: String = sqlx::query_scalar(
        "SELECT id::text FROM executions WHERE schedule_id = $1::uuid AND status = 'failed' ORDER BY created_at LIMIT 1",
    )
    .bind(&schedule)
    .fetch_one(&app.pool)
    .await
    .expect("the first failed run");
    assert_eq!(failing["execution_id"], first_failed.as_str());
    assert_eq!(
        failing["execution_url"],
        format!("{}/#/flows/{flow}/executions/{first_failed}", app.base.trim_end_matches('/'))
    );
    assert_eq!(
        (
            &failing["flow_id"],
            &failing["flow_name"],
            &failing["schedule_id"],
            &failing["failed_runs"],
            &failing["node_id"]
        ),
        (&json!(flow), &json!("checkout monitor"), &json!(schedule), &json!(1), &json!("check"))
    );
    assert_eq!(failing["organization_id"], app.admin.org.to_string());
    let error = failing["error"].as_str().expect("an error").to_owned();
    assert!(error.contains("code") && error.contains("200"), "{error}");
    // Let three more runs fail: still one alert.
    let failed_count = |app: &TestApp, schedule: String| {
        let pool = app.pool.clone();
        async move {
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM executions WHERE schedule_id = $1::uuid AND status = 'failed'",
            )
            .bind(&schedule)
            .fetch_one(&pool)
            .await
            .expect("count");
            n
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    while failed_count(&app, schedule.clone()).await < 4 {
        assert!(tokio::time::Instant::now() < deadline, "the runs did not go on failing");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(of_type(&hook.arrivals(), "flow.failing").len(), 1, "one flow.failing only");

    // Fixed: one recovery.
    let fixed = app.admin(Method::PATCH, &item, Some(json!({"variables": {"code": "200"}}))).await;
    assert_eq!(fixed.status, 200, "{}", fixed.text);
    let arrivals = hook.wait_until(Duration::from_secs(60), |a| !of_type(a, "flow.recovered").is_empty()).await;
    let recovered = body_of(of_type(&arrivals, "flow.recovered")[0]);
    assert_eq!((&recovered["node_id"], &recovered["error"]), (&Value::Null, &Value::Null));
    assert!(recovered["failed_runs"].as_u64().expect("failed_runs") >= 4, "{recovered}");
    // Two more successful runs: nothing more.
    let ok_count = |pool: sqlx::PgPool, schedule: String| async move {
        let n: i64 =
            sqlx::query_scalar("SELECT count(*) FROM executions WHERE schedule_id = $1::uuid AND status = 'succeeded'")
                .bind(&schedule)
                .fetch_one(&pool)
                .await
                .expect("count");
        n
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    while ok_count(app.pool.clone(), schedule.clone()).await < 3 {
        assert!(tokio::time::Instant::now() < deadline, "the runs did not succeed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let arrivals = hook.arrivals();
    assert_eq!(
        arrivals.len(),
        2,
        "one flow.failing and one flow.recovered: {:?}",
        arrivals.iter().map(body_of).collect::<Vec<_>>()
    );
    verify_signatures(&secret, &arrivals);

    // Slack: one message each way naming the flow, schedule (cron, zone), node, error and link.
    let slack_arrivals = slack_in.wait_until(Duration::from_secs(20), |a| a.len() >= 2).await;
    assert_eq!(slack_arrivals.len(), 2);
    let text = body_of(&slack_arrivals[0])["text"].as_str().unwrap().to_owned();
    for part in [
        "checkout monitor",
        "*/2 * * * * *",
        "Europe/Paris",
        "check",
        error.as_str(),
        &failing["execution_url"].as_str().unwrap().to_owned(),
    ] {
        assert!(text.contains(part), "`{part}` not in the Slack text: {text}");
    }
    assert!(body_of(&slack_arrivals[1])["text"].as_str().unwrap().contains("recovered"));
    // Email: one each way.
    let mails = smtp.wait_for("oncall@example.com", 2).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mails_now = smtp.to("oncall@example.com");
    assert_eq!(mails_now.len(), 2, "{:?}", mails.iter().map(|m| &m.subject).collect::<Vec<_>>());
    assert!(mails_now.iter().all(|m| m.subject.starts_with("[hookflow]")));
    assert!(mails_now.iter().any(|m| m.subject.contains("failing")
        && m.body.contains("checkout monitor")
        && m.body.contains("Europe/Paris")));

    // The alert history: newest first, both sent to the three channels.
    let listed = app.admin(Method::GET, "/alerts", None).await;
    let items = listed.body["items"].as_array().expect("items");
    let types: Vec<&str> = items.iter().map(|a| a["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["flow.recovered", "flow.failing"], "{}", listed.text);
    for item in items {
        assert_eq!(item["outcome"], "sent", "{item}");
        assert_eq!(item["channel_ids"].as_array().unwrap().len(), 3);
    }
    let page = app.admin(Method::GET, "/alerts?limit=1", None).await;
    let cursor = page.body["next_cursor"].as_str().expect("a cursor").to_owned();
    let next = app.admin(Method::GET, &format!("/alerts?limit=1&cursor={cursor}"), None).await;
    assert_eq!(next.body["items"][0]["type"], "flow.failing");
    drop(replica);
}

#[tokio::test]
async fn alerts_rules_are_validated_scoped_and_listed() {
    let app = TestApp::spawn().await;
    let channel = create(&app, json!({"name": "c", "kind": "slack", "url": "https://hooks.example/a"})).await;
    let cid = channel["id"].as_str().unwrap().to_owned();
    let post = |body: Value| {
        let app = &app;
        async move { app.admin(Method::POST, "/alert-rules", Some(body)).await }
    };
    post(json!({"kind": "schedule_unclaimed", "channels": [cid]})).await.assert_refused(
        400,
        "invalid_request",
        "schedule_id",
    );
    post(json!({"kind": "runners_offline", "channels": [cid]})).await.assert_refused(
        400,
        "invalid_request",
        "runner_labels",
    );
    post(json!({"kind": "runners_offline", "runner_labels": ["eu"], "after_s": 29, "channels": [cid]}))
        .await
        .assert_refused(400, "invalid_request", "after_s");
    post(json!({"kind": "runners_offline", "runner_labels": ["eu"], "after_s": 86401, "channels": [cid]}))
        .await
        .assert_refused(400, "invalid_request", "after_s");
    post(json!({"kind": "runners_offline", "runner_labels": ["eu"], "channels": []})).await.assert_refused(
        400,
        "invalid_request",
        "channels",
    );
    post(json!({"kind": "runners_offline", "runner_labels": ["eu"], "channels": [uuid::Uuid::new_v4()]}))
        .await
        .assert_refused(400, "invalid_request", "channels");
    post(json!({"kind": "schedule_unclaimed", "schedule_id": uuid::Uuid::new_v4(), "channels": [cid]}))
        .await
        .assert_refused(400, "invalid_request", "schedule_id");
    post(json!({"kind": "nope", "channels": [cid]})).await.assert_refused(400, "invalid_request", "kind");
    let made = post(json!({"kind": "runners_offline", "runner_labels": ["eu"], "channels": [cid]})).await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(
        (&made.body["after_s"], &made.body["state"], &made.body["schedule_id"], &made.body["runner_labels"]),
        (&json!(120), &json!("ok"), &Value::Null, &json!(["eu"]))
    );
    let id = made.body["id"].as_str().unwrap().to_owned();
    let listed = app.admin(Method::GET, "/alert-rules", None).await;
    assert_eq!(listed.body["items"].as_array().unwrap().len(), 1);
    let reader = scoped(&app, app.admin.org, &["organization:read"]).await;
    assert_eq!(app.call(Method::GET, "/alert-rules", Some(&reader), None).await.status, 200);
    assert_eq!(app.call(Method::DELETE, &format!("/alert-rules/{id}"), Some(&reader), None).await.status, 403);
    let stranger = app.new_org("Stranger").await;
    assert_eq!(app.call(Method::DELETE, &format!("/alert-rules/{id}"), Some(&stranger), None).await.status, 404);
    assert_eq!(app.call(Method::GET, "/alert-rules", Some(&stranger), None).await.body["items"], json!([]));
    app.delete(&format!("/alert-rules/{id}"), 204).await;
    app.delete(&format!("/alert-rules/{id}"), 404).await;
}

#[tokio::test]
async fn alerts_rules_raise_unclaimed_then_claimed_and_offline_then_online() {
    let app = TestApp::spawn_for_execution().await;
    let hook = Receiver::spawn(200).await;
    let channel = create(&app, json!({"name": "hook", "kind": "webhook", "url": hook.base})).await;
    let flow = app.create_flow("edge check", json!({"nodes": [{"id": "d", "kind": "delay", "delay_ms": 1}]})).await;
    let created = app
        .admin(
            Method::POST,
            &format!("/flows/{flow}/schedules"),
            Some(json!({"cron": "*/5 * * * * *", "timezone": "Europe/Paris", "runner_labels": ["edge"]})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let schedule = created.body["id"].as_str().unwrap().to_owned();
    for body in [
        json!({"kind": "schedule_unclaimed", "schedule_id": schedule, "after_s": 30, "channels": [channel["id"]]}),
        json!({"kind": "runners_offline", "runner_labels": ["edge"], "after_s": 30, "channels": [channel["id"]]}),
    ] {
        let made = app.admin(Method::POST, "/alert-rules", Some(body)).await;
        assert_eq!(made.status, 201, "{}", made.text);
    }
    let started = std::time::Instant::now();
    // No runner carries `edge`: both rules alert, once each, after 30 s.
    let arrivals = hook
        .wait_until(Duration::from_secs(75), |a| {
            !of_type(a, "schedule.unclaimed").is_empty() && !of_type(a, "runners.offline").is_empty()
        })
        .await;
    assert!(started.elapsed() >= Duration::from_secs(25), "alerted before after_s");
    let unclaimed = body_of(of_type(&arrivals, "schedule.unclaimed")[0]);
    assert_eq!((&unclaimed["schedule_id"], &unclaimed["flow_name"]), (&json!(schedule), &json!("edge check")));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(hook.count(), 2, "one alert per rule");
    let rules = app.admin(Method::GET, "/alert-rules", None).await;
    assert!(rules.body["items"].as_array().unwrap().iter().all(|r| r["state"] == "alerting"), "{}", rules.text);

    // A runner with the label comes: it claims the queued run and is online.
    let creds = app.runner_creds(app.admin.org).await;
    let _runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &["edge"], &[]).await;
    let arrivals = hook
        .wait_until(Duration::from_secs(60), |a| {
            !of_type(a, "schedule.claimed").is_empty() && !of_type(a, "runners.online").is_empty()
        })
        .await;
    assert_eq!(arrivals.len(), 4, "{:?}", arrivals.iter().map(body_of).collect::<Vec<_>>());
    let listed = app.admin(Method::GET, "/alerts", None).await;
    assert_eq!(listed.body["items"].as_array().unwrap().len(), 4, "{}", listed.text);
}
