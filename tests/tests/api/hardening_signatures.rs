//! Issue #47's signature findings over the real server: Twilio forms and bodies nothing signs, the re-check off
//! the async workers, duplicates that survive retention and forget failed stores, the scope that guards the
//! signature gate of an endpoint with triggers, and the `reject` mode that stores nothing.

use crate::signatures::{newest_signature, send, standard_webhooks_case};
use hookflow_shared::api::signatures::Verdict;
use hookflow_tests::TestApp;
use hookflow_tests::signers::{self, Sign, Signed};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const TWILIO_TOKEN: &str = "twilio-auth-token";
const WHSEC: &str = "whsec_c3RhbmRhcmQta2V5LW9uZQ==";

/// A Twilio endpoint in record mode taking bodies up to `max_body_bytes`; its id and capture URL.
async fn twilio_endpoint(app: &TestApp, max_body_bytes: usize) -> (String, String) {
    let verification = json!({"scheme": "twilio", "secrets": [TWILIO_TOKEN]});
    let created = app
        .create_webhook(json!({"name": "twilio", "max_body_bytes": max_body_bytes, "verification": verification}))
        .await;
    (created["id"].as_str().expect("id").to_owned(), created["capture_url"].as_str().expect("url").to_owned())
}

/// A form of `params` parameters padded to exactly `size` bytes.
fn form(params: usize, size: usize) -> Vec<u8> {
    let mut body = String::with_capacity(size);
    for i in 0..params {
        body.push_str(&format!("p{i}=v&"));
    }
    body.push_str("last=");
    assert!(body.len() <= size, "{params} parameters do not fit in {size} bytes");
    body.push_str(&"x".repeat(size - body.len()));
    body.into_bytes()
}

fn twilio_signed(url: &str, body: &[u8]) -> Signed {
    signers::twilio(Sign { secret: TWILIO_TOKEN, body, timestamp: 0, url })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_mib_twilio_form_of_100000_parameters_is_invalid_within_a_second() {
    let app = TestApp::spawn().await;
    let (id, url) = twilio_endpoint(&app, 2 * 1024 * 1024).await;
    let body = form(100_000, 1024 * 1024);
    let signed = twilio_signed(&url, &body);
    let started = Instant::now();
    let (status, answer) = send(&app, &url, &signed).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{answer}");
    assert!(took < Duration::from_secs(1), "answered in {took:?}");
    let signature = newest_signature(&app, &id).await;
    assert_eq!(signature.verdict, Verdict::Invalid, "a genuine signature over too many parameters: {signature:?}");
    let reason = signature.reason.unwrap_or_default();
    assert!(reason.contains("more than 1000 parameters"), "{reason}");
    // A form of Twilio's size with the same signing still verifies.
    let small = twilio_signed(&url, b"CallSid=CA1&From=%2B15550001&Body=hi");
    send(&app, &url, &small).await;
    assert_eq!(newest_signature(&app, &id).await.verdict, Verdict::Valid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_within_a_second_during_eight_rechecks_of_a_10_mib_capture() {
    let app = TestApp::spawn().await;
    let (id, url) = twilio_endpoint(&app, 10 * 1024 * 1024).await;
    // 10 MiB of parameters: sorting them all on an async worker took seconds per re-check.
    let body = "a=b&".repeat(10 * 1024 * 1024 / 4).into_bytes();
    let (status, receipt) = send(&app, &url, &twilio_signed(&url, &body)).await;
    assert_eq!(status, 200, "{receipt}");
    let capture = receipt["request_id"].as_str().expect("request id").to_owned();
    let path = format!("/webhooks/{id}/requests/{capture}/verify");
    let rechecks: Vec<_> = (0..8)
        .map(|_| {
            let (client, url, key, org) =
                (app.client.clone(), app.url(&path), app.admin.key.clone(), app.admin.org.to_string());
            tokio::spawn(async move {
                let reply = client
                    .post(url)
                    .header("x-api-key", key)
                    .header("x-organization-id", org)
                    .json(&json!({}))
                    .send()
                    .await
                    .expect("re-check");
                (reply.status().as_u16(), reply.json::<Value>().await.unwrap_or(Value::Null))
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    let mut probes = 0;
    while !rechecks.iter().all(|r| r.is_finished()) && probes < 400 {
        let started = Instant::now();
        let health = app.client.get(app.url("/healthz")).timeout(Duration::from_secs(5)).send().await;
        slowest = slowest.max(started.elapsed());
        assert!(health.is_ok_and(|h| h.status() == 200), "/healthz answers");
        probes += 1;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    for recheck in rechecks {
        let (status, result) = recheck.await.expect("re-check task");
        assert_eq!((status, result["verdict"].as_str()), (200, Some("invalid")), "{result}");
    }
    assert!(probes > 0, "probed while the re-checks ran");
    assert!(slowest < Duration::from_secs(1), "the slowest /healthz of {probes} took {slowest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_body_replayed_under_a_signed_gets_twilio_signature_is_invalid() {
    let app = TestApp::spawn().await;
    let (id, base) = twilio_endpoint(&app, 1024 * 1024).await;
    let url = format!("{base}/status?CallSid=CA42&CallStatus=completed");
    // A signed GET: the URL alone is signed.
    let signature = signers::b64(&signers::hmac_sha1(TWILIO_TOKEN.as_bytes(), url.as_bytes()));
    let get = app.client.get(&url).header("X-Twilio-Signature", &signature).send().await.expect("get");
    assert_eq!(get.status(), 200);
    assert_eq!(newest_signature(&app, &id).await.verdict, Verdict::Valid, "the genuine GET");
    // Anyone who saw it posts any JSON under the same signature.
    let forged = app
        .client
        .post(&url)
        .header("X-Twilio-Signature", &signature)
        .header("Content-Type", "application/json")
        .body(r#"{"amount": 1000000, "to": "attacker"}"#)
        .send()
        .await
        .expect("post");
    assert_eq!(forged.status(), 200);
    let verdict = newest_signature(&app, &id).await;
    assert_eq!(verdict.verdict, Verdict::Invalid, "{verdict:?}");
    assert!(verdict.reason.unwrap_or_default().contains("not signed"));
}

/// A Standard Webhooks endpoint in `mode` with `extra` fields; its id and capture URL.
async fn standard_endpoint(app: &TestApp, mode: &str, extra: Value) -> (String, String) {
    let mut body = json!({"name": "standard", "verification": {"scheme": "standard_webhooks", "secrets": [WHSEC],
        "mode": mode}});
    for (name, value) in extra.as_object().expect("fields") {
        body[name] = value.clone();
    }
    let created = app.create_webhook(body).await;
    (created["id"].as_str().expect("id").to_owned(), created["capture_url"].as_str().expect("url").to_owned())
}

fn standard_signed(url: &str, message_id: &str, body: &[u8]) -> Signed {
    let now = chrono::Utc::now().timestamp();
    signers::standard_webhooks(Sign { secret: WHSEC, body, timestamp: now, url }, message_id, "webhook")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_id_whose_store_failed_is_accepted_on_retry() {
    let app = TestApp::spawn().await;
    let (id, url) = standard_endpoint(&app, "record", json!({})).await;
    // The database refuses this one capture for real (a constraint), then takes it again.
    sqlx::query(
        "ALTER TABLE captures ADD CONSTRAINT hardening_refuses CHECK (signature_message_id IS DISTINCT FROM \
         'msg_refused') NOT VALID",
    )
    .execute(&app.pool)
    .await
    .expect("a refusing constraint");
    let signed = standard_signed(&url, "msg_refused", b"{\"type\":\"invoice.paid\"}");
    let (status, answer) = send(&app, &url, &signed).await;
    assert_eq!(status, 400, "the store failed: {answer}");
    assert_eq!(app.rows("captures").await, 0);
    sqlx::query("ALTER TABLE captures DROP CONSTRAINT hardening_refuses").execute(&app.pool).await.expect("drop");
    let (status, answer) = send(&app, &url, &signed).await;
    assert_eq!(status, 200, "{answer}");
    let retried = newest_signature(&app, &id).await;
    assert_eq!(retried.verdict, Verdict::Valid, "the honest retry is not a duplicate: {retried:?}");
    send(&app, &url, &signed).await;
    assert_eq!(newest_signature(&app, &id).await.verdict, Verdict::Duplicate, "once stored, a replay is");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_id_is_still_a_duplicate_after_retention_removed_its_capture() {
    let app = TestApp::spawn().await;
    let (id, url) = standard_endpoint(&app, "record", json!({"retention": {"max_requests": 1}})).await;
    let first = standard_signed(&url, "msg_first", b"{\"n\":1}");
    assert_eq!(send(&app, &url, &first).await.0, 200);
    assert_eq!(send(&app, &url, &standard_signed(&url, "msg_second", b"{\"n\":2}")).await.0, 200);
    hookflow_control_plane::tasks::retention::sweep(&app.pool).await.expect("retention");
    let kept = app.rows("captures WHERE signature_message_id = 'msg_first'").await;
    assert_eq!(kept, 0, "retention removed the first capture");
    // Another replica (nothing in flight in its memory) still knows the id within the tolerance.
    let replica = app.replica().await;
    let replayed_url = replica.url(&format!("/webhook/{id}"));
    assert_eq!(send(&replica, &replayed_url, &first).await.0, 200);
    let replayed = newest_signature(&app, &id).await;
    assert_eq!(replayed.verdict, Verdict::Duplicate, "{replayed:?}");
    // Past twice the tolerance an id is forgotten: the memory is bounded.
    sqlx::query("UPDATE signature_message_ids SET expires_at = now() - interval '1 second'")
        .execute(&app.pool)
        .await
        .expect("age the ids");
    let forgotten = hookflow_control_plane::capture::signing::forget_expired_ids(&app.pool).await.expect("forget");
    assert!(forgotten >= 2, "{forgotten}");
    assert_eq!(app.rows("signature_message_ids").await, 0);
}

#[tokio::test]
async fn webhooks_write_alone_cannot_change_the_verification_of_an_endpoint_with_triggers() {
    let app = TestApp::spawn().await;
    let flow = app.delay_flow("gated").await;
    let verification = json!({"scheme": "github", "secrets": ["gh-secret"], "mode": "enforce"});
    let created = app
        .create_webhook(json!({"name": "gated", "triggers": [{"flow_id": flow}], "verification": verification}))
        .await;
    let gated = created["id"].as_str().expect("id").to_owned();
    let plain = app.create_webhook(json!({"name": "plain", "verification": verification})).await;
    let plain = plain["id"].as_str().expect("id").to_owned();
    let writer = app.creds_with(&["webhooks:read", "webhooks:write"]).await;
    let record = json!({"verification": {"scheme": "github", "secrets": ["mine"], "mode": "record"}});
    for change in [json!({"verification": null}), record.clone()] {
        let reply = app.call(Method::PATCH, &format!("/webhooks/{gated}"), Some(&writer), Some(change)).await;
        reply.assert_refused(403, "insufficient_scope", "flows:execute");
    }
    // Clearing the triggers while disarming in one request counts as an endpoint with triggers too.
    let both = json!({"verification": null, "triggers": []});
    let reply = app.call(Method::PATCH, &format!("/webhooks/{gated}"), Some(&writer), Some(both)).await;
    reply.assert_refused(403, "insufficient_scope", "flows:execute");
    let read = app.api().webhooks().get(&gated).await.expect("read");
    let mode = read.verification.map(|v| v.mode);
    assert_eq!(mode, Some(hookflow_shared::api::signatures::VerificationMode::Enforce), "unchanged");
    // Other fields stay webhooks:write's.
    let renamed =
        app.call(Method::PATCH, &format!("/webhooks/{gated}"), Some(&writer), Some(json!({"name": "n"}))).await;
    assert_eq!(renamed.status, 200, "{}", renamed.text);
    // Without triggers, webhooks:write is enough.
    let reply = app.call(Method::PATCH, &format!("/webhooks/{plain}"), Some(&writer), Some(record.clone())).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = app
        .call(Method::PATCH, &format!("/webhooks/{plain}"), Some(&writer), Some(json!({"verification": null})))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    // With flows:execute as well, the gated one changes, audited.
    let launcher = app.creds_with(&["webhooks:read", "webhooks:write", "flows:execute"]).await;
    let reply = app.call(Method::PATCH, &format!("/webhooks/{gated}"), Some(&launcher), Some(record)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = app
        .call(Method::PATCH, &format!("/webhooks/{gated}"), Some(&launcher), Some(json!({"verification": null})))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert!(!app.audit_entries("webhook.verification.removed").await.is_empty());
    assert!(app.audit_entries("webhook.verification.set").await.len() >= 3, "created twice, changed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_answers_401_stores_nothing_and_analytics_count_it() {
    let app = TestApp::spawn().await;
    let (id, url) = standard_endpoint(&app, "reject", json!({})).await;
    let read = app.api().webhooks().get(&id).await.expect("read");
    assert_eq!(serde_json::to_value(read.verification.map(|v| v.mode)).expect("json"), json!("reject"));
    let genuine = standard_signed(&url, "msg_genuine", b"{\"ok\":true}");
    let (status, receipt) = send(&app, &url, &genuine).await;
    assert_eq!(status, 200, "{receipt}");
    let case = standard_webhooks_case("webhook");
    let now = chrono::Utc::now().timestamp();
    let forged = (case.sign)(crate::signatures::Key::Wrong, now, b"{\"ok\":false}", &url);
    let unsigned = Signed { headers: Vec::new(), body: b"{}".to_vec() };
    for (what, signed) in [("invalid", &forged), ("missing", &unsigned), ("duplicate", &genuine)] {
        let (status, answer) = send(&app, &url, signed).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (401, Some("signature_invalid")), "{what}: {answer}");
    }
    assert_eq!(app.rows("captures").await, 1, "only the genuine capture is stored");
    assert_eq!(newest_signature(&app, &id).await.verdict, Verdict::Valid);
    let volume = app.api().webhooks().volume(&id, &[]).await.expect("volume");
    let (count, valid, invalid) =
        volume.points.iter().fold((0, 0, 0), |a, p| (a.0 + p.count, a.1 + p.valid, a.2 + p.invalid));
    assert_eq!((count, valid, invalid), (4, 1, 1), "every refusal counted, the invalid one as invalid");
    // `enforce` keeps storing what it refuses.
    let (enforced, enforced_url) = standard_endpoint(&app, "enforce", json!({})).await;
    assert_eq!(send(&app, &enforced_url, &unsigned).await.0, 401);
    assert_eq!(newest_signature(&app, &enforced).await.verdict, Verdict::Missing);
}
