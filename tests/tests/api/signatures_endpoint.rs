//! An endpoint's `verification` around the schemes: settings written and read back without secrets, refused
//! settings, `enforce` (401 after storing), Standard Webhooks duplicates, the verdict in search, the stream,
//! exports and analytics, the re-check, scopes and other organizations, and secrets that never come back.

use crate::signatures::{Key, Verifying, cases, endpoint, newest_signature, send, standard_webhooks_case};
use hookflow_shared::api::Patch;
use hookflow_shared::api::signatures::{SignatureScheme, Verdict, VerifyCapture};
use hookflow_shared::api::webhooks::UpdateWebhook;
use hookflow_tests::TestApp;
use hookflow_tests::signers::{self, Sign};
use hookflow_tests::sse::Sse;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn json_text(value: impl serde::Serialize) -> String {
    serde_json::to_string(&value).expect("json")
}

fn case(scheme: SignatureScheme) -> crate::signatures::Case {
    cases().into_iter().find(|c| c.scheme == scheme).expect("a case for every scheme")
}

#[tokio::test]
async fn settings_are_read_back_without_their_secrets_and_null_removes_them() {
    let app = TestApp::spawn().await;
    let stripe = case(SignatureScheme::Stripe);
    let (id, _) = endpoint(&app, &stripe, "enforce").await;
    let read = app.api().webhooks().get(&id).await.expect("read");
    let read_text = json_text(&read);
    assert_eq!(
        serde_json::to_value(&read.verification).expect("json"),
        json!({"scheme": "stripe", "secrets_count": 2, "tolerance_s": 300, "mode": "enforce"}),
        "{read_text}"
    );
    let listed = json_text(app.api().webhooks().list(&[]).await.expect("list"));
    for text in [&read_text, &listed] {
        for secret in &stripe.secrets {
            assert!(!text.contains(secret.as_str()), "a secret came back: {text}");
        }
    }
    let defaults =
        app.create_webhook(json!({"name": "d", "verification": {"scheme": "github", "secrets": ["s"]}})).await;
    assert_eq!(defaults["verification"]["mode"], "record");
    assert_eq!(defaults["verification"]["tolerance_s"], 300);
    let removed = app.admin(Method::PATCH, &format!("/webhooks/{id}"), Some(json!({"verification": null}))).await;
    assert_eq!((removed.status.as_u16(), &removed.body["verification"]), (200, &Value::Null), "{}", removed.text);
    let now = chrono::Utc::now().timestamp();
    let url = app.url(&format!("/webhook/{id}"));
    let (status, _) = send(&app, &url, &(stripe.sign)(Key::Wrong, now, b"{}", &url)).await;
    assert_eq!(status, 200, "no verification: nothing is refused");
    let signature = newest_signature(&app, &id).await;
    assert_eq!((signature.verdict, signature.scheme), (Verdict::Unverified, None));
}

#[tokio::test]
async fn settings_no_verifier_can_use_are_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    let bad = [
        json!({"scheme": "nope", "secrets": ["s"]}),
        json!({"scheme": "github", "secrets": []}),
        json!({"scheme": "github", "secrets": ["a", "b", "c"]}),
        json!({"scheme": "github", "secrets": [""]}),
        json!({"scheme": "github", "secrets": ["s"], "tolerance_s": 604801}),
        json!({"scheme": "github", "secrets": ["s"], "mode": "block"}),
        json!({"scheme": "github", "secrets": ["s"], "header": "X-Sig"}),
        json!({"scheme": "standard_webhooks", "secrets": ["not-whsec"]}),
        json!({"scheme": "standard_webhooks", "secrets": ["whsec_!!!"]}),
        json!({"scheme": "discord", "secrets": ["abcd"]}),
        json!({"scheme": "hmac", "secrets": ["s"]}),
        json!({"scheme": "hmac", "secrets": ["s"], "header": "bad header"}),
        json!({"scheme": "hmac", "secrets": ["s"], "header": "X-Sig", "algorithm": "md5"}),
        json!({"scheme": "github", "secrets": ["s"], "colour": "red"}),
    ];
    for verification in bad {
        let reply =
            app.admin(Method::POST, "/webhooks", Some(json!({"name": "x", "verification": verification}))).await;
        reply.assert_refused(400, "invalid_request", "");
        assert!(!reply.text.contains("whsec_!!!") && !reply.text.contains("not-whsec"), "{}", reply.text);
    }
    assert_eq!(app.rows("webhooks").await, 0, "nothing refused was stored");
    let id = app.webhook_named("ok").await;
    let reply = app
        .admin(
            Method::PATCH,
            &format!("/webhooks/{id}"),
            Some(json!({"verification": {"scheme": "hmac", "secrets": ["s"]}})),
        )
        .await;
    reply.assert_refused(400, "invalid_request", "header");
}

#[tokio::test]
async fn enforce_refuses_the_sender_with_401_and_still_stores_the_capture() {
    let Verifying { app, case: github, id, url, now } =
        Verifying::start(case(SignatureScheme::Github), "enforce").await;
    let (status, receipt) = send(&app, &url, &(github.sign)(Key::Stored(0), now, b"{}", &url)).await;
    assert_eq!(status, 200, "{receipt}");
    assert_eq!(receipt["message"], "Request captured");
    let (status, answer) = send(&app, &url, &(github.sign)(Key::Wrong, now, b"{}", &url)).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (401, Some("signature_invalid")), "{answer}");
    assert!(!answer["error"]["message"].as_str().unwrap_or_default().is_empty(), "{answer}");
    assert_eq!(newest_signature(&app, &id).await.verdict, Verdict::Invalid, "stored, flagged");
    let unsigned = signers::Signed { headers: Vec::new(), body: b"{}".to_vec() };
    let (status, answer) = send(&app, &url, &unsigned).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (401, Some("signature_invalid")), "{answer}");
    assert_eq!(newest_signature(&app, &id).await.verdict, Verdict::Missing);
    assert_eq!(app.rows("captures").await, 3, "the refused captures are stored too");
}

#[tokio::test]
async fn a_repeated_webhook_id_is_a_duplicate_and_enforce_refuses_it() {
    let Verifying { app, case: standard, id, url, now } =
        Verifying::start(standard_webhooks_case("webhook"), "enforce").await;
    let signed = (standard.sign)(Key::Stored(0), now, b"{\"type\":\"invoice.paid\"}", &url);
    assert_eq!(send(&app, &url, &signed).await.0, 200);
    assert_eq!(newest_signature(&app, &id).await.verdict, Verdict::Valid);
    let (status, answer) = send(&app, &url, &signed).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (401, Some("signature_invalid")), "{answer}");
    let duplicate = newest_signature(&app, &id).await;
    assert_eq!(duplicate.verdict, Verdict::Duplicate, "{duplicate:?}");
    assert!(duplicate.reason.as_deref().unwrap_or_default().contains("msg_"), "{duplicate:?}");
    // A fresh id of the same sender is fine; the same id on another endpoint too.
    assert_eq!(send(&app, &url, &(standard.sign)(Key::Stored(1), now, b"{}", &url)).await.0, 200);
    let (other, other_url) = endpoint(&app, &standard, "record").await;
    send(&app, &other_url, &signed).await;
    assert_eq!(newest_signature(&app, &other).await.verdict, Verdict::Valid);
}

#[tokio::test]
async fn search_stream_export_and_analytics_carry_the_verdict() {
    let Verifying { app, case: stripe, id, url, now } = Verifying::start(case(SignatureScheme::Stripe), "record").await;
    let mut sse = Sse::open(&app, &format!("/webhooks/{id}/stream"), None).await;
    send(&app, &url, &(stripe.sign)(Key::Stored(0), now, b"{\"n\":1}", &url)).await;
    send(&app, &url, &(stripe.sign)(Key::Wrong, now, b"{\"n\":2}", &url)).await;
    send(&app, &url, &signers::Signed { headers: Vec::new(), body: b"{\"n\":3}".to_vec() }).await;
    let verdicts: Vec<Value> = [sse.event().await, sse.event().await, sse.event().await]
        .into_iter()
        .map(|e| e.data["signature"]["verdict"].clone())
        .collect();
    assert_eq!(verdicts, [json!("valid"), json!("invalid"), json!("missing")]);

    let search_path = format!("/webhooks/{id}/requests/search");
    let search = |body: Value| app.admin(Method::POST, &search_path, Some(body));
    let found = search(json!({"q": "signature:invalid"})).await;
    assert_eq!(found.body["items"].as_array().map(Vec::len), Some(1), "{}", found.text);
    assert_eq!(found.body["items"][0]["body"], "{\"n\":2}");
    let found = search(json!({"q": "-signature:valid"})).await;
    assert_eq!(found.body["items"].as_array().map(Vec::len), Some(2), "{}", found.text);
    let found = search(json!({"filter": {"signatures": ["valid", "missing"]}})).await;
    assert_eq!(found.body["items"].as_array().map(Vec::len), Some(2), "{}", found.text);
    search(json!({"q": "signature:genuine"})).await.assert_refused(400, "invalid_request", "signature:genuine");
    search(json!({"filter": {"signatures": ["genuine"]}})).await.assert_refused(400, "invalid_request", "");

    let hooks = app.api();
    let export = hooks.webhooks().export(&id, &[("q", "signature:valid")]).await.expect("export");
    let export = export.text().await.expect("text");
    let lines: Vec<Value> = export.lines().map(|l| serde_json::from_str(l).expect("a line")).collect();
    assert_eq!(lines.len(), 1, "{export}");
    assert_eq!(
        lines[0]["signature"],
        json!({"verdict": "valid", "scheme": "stripe", "reason": null, "secret_index": 0})
    );
    let har = hooks.webhooks().export(&id, &[("format", "har")]).await.expect("har");
    let har: Value = har.json().await.expect("json");
    let entries = har["log"]["entries"].as_array().expect("entries");
    assert!(entries.iter().any(|e| e["_signature"]["verdict"] == "invalid"), "{har}");

    let volume = app.api().webhooks().volume(&id, &[]).await.expect("volume");
    let (valid, invalid, count) =
        volume.points.iter().fold((0, 0, 0), |a, p| (a.0 + p.valid, a.1 + p.invalid, a.2 + p.count));
    assert_eq!((valid, invalid, count), (1, 1, 3), "missing is counted in neither");
}

#[tokio::test]
async fn the_recheck_shows_what_was_expected_and_tries_a_candidate_secret() {
    let Verifying { app, case: stripe, id, url, now } = Verifying::start(case(SignatureScheme::Stripe), "record").await;
    let (_, receipt) = send(&app, &url, &(stripe.sign)(Key::Stored(1), now, b"{\"ok\":true}", &url)).await;
    let good = receipt["request_id"].as_str().expect("id").to_owned();
    let (_, receipt) = send(&app, &url, &(stripe.sign)(Key::Wrong, now, b"{\"ok\":false}", &url)).await;
    let bad = receipt["request_id"].as_str().expect("id").to_owned();
    let hooks = app.api();
    let hooks = hooks.webhooks();

    let result = hooks.verify(&id, &good, &VerifyCapture::default()).await.expect("verify");
    assert_eq!((result.verdict, result.secret_index, result.expected), (Verdict::Valid, Some(1), None));
    let result = hooks.verify(&id, &bad, &VerifyCapture::default()).await.expect("verify");
    assert_eq!(result.verdict, Verdict::Invalid);
    let expected = result.expected.expect("what was expected");
    let signed_content = format!("{now}.{{\"ok\":false}}");
    assert_eq!(expected.signed_content_sha256, hex::encode(Sha256::digest(signed_content.as_bytes())));
    let computed = hex::encode(signers::hmac_sha256(stripe.secrets[0].as_bytes(), signed_content.as_bytes()));
    assert_eq!(expected.signature_prefix, computed[..8]);

    let candidate = VerifyCapture { secret: Some("not-the-secret".into()) };
    let result = hooks.verify(&id, &bad, &candidate).await.expect("verify with a candidate");
    assert_eq!((result.verdict, result.secret_index), (Verdict::Valid, None), "the sender's secret was this one");
    assert_eq!(app.rows("captures WHERE signature_verdict = 'invalid'").await, 1, "a re-check changes nothing stored");

    let reply = app
        .admin(Method::POST, &format!("/webhooks/{id}/requests/{}/verify", uuid::Uuid::new_v4()), Some(json!({})))
        .await;
    reply.assert_refused(404, "not_found", "");
    let reply =
        app.admin(Method::POST, &format!("/webhooks/{id}/requests/{bad}/verify"), Some(json!({"colour": 1}))).await;
    reply.assert_refused(400, "invalid_request", "colour");
    let plain = app.webhook_named("plain").await;
    let (_, receipt) =
        send(&app, &app.url(&format!("/webhook/{plain}")), &signers::Signed { headers: vec![], body: vec![] }).await;
    let capture = receipt["request_id"].as_str().expect("id");
    let result = hooks.verify(&plain, capture, &VerifyCapture::default()).await.expect("verify");
    assert_eq!(result.verdict, Verdict::Unverified);
}

#[tokio::test]
async fn scopes_and_other_organizations() {
    let Verifying { app, case: stripe, id, url, .. } = Verifying::start(case(SignatureScheme::Stripe), "record").await;
    let (_, receipt) = send(&app, &url, &(stripe.sign)(Key::Stored(0), 0, b"{}", &url)).await;
    let capture = receipt["request_id"].as_str().expect("id");
    let reader = app.creds_with(&["webhooks:read"]).await;
    let check = VerifyCapture::default();
    let as_reader = app.api_as(&reader);
    let result = as_reader.webhooks().verify(&id, capture, &check).await.expect("a reader may re-check");
    assert_eq!(result.verdict, Verdict::Invalid, "signed at 1970: outside the tolerance");
    let patch = UpdateWebhook { verification: Patch::Clear, ..UpdateWebhook::default() };
    let refused = as_reader.webhooks().update(&id, &patch).await.expect_err("a reader cannot change it");
    refused.assert_refused(403, "insufficient_scope", "webhooks:write");
    let flows_only = app.api_as(&app.creds_with(&["flows:read"]).await);
    let refused = flows_only.webhooks().verify(&id, capture, &check).await.expect_err("no webhooks:read");
    refused.assert_refused(403, "insufficient_scope", "");
    let anonymous = app.api_with(hookflow_tests::Credentials::None);
    anonymous.webhooks().verify(&id, capture, &check).await.expect_err("no key").assert_refused(
        401,
        "unauthorized",
        "",
    );
    let stranger = app.api_as(&app.new_org("Other").await);
    stranger.webhooks().verify(&id, capture, &check).await.expect_err("theirs").assert_refused(404, "not_found", "");
    stranger.webhooks().update(&id, &patch).await.expect_err("theirs").assert_refused(404, "not_found", "");
    assert!(app.api().webhooks().get(&id).await.expect("read").verification.is_some(), "nothing changed");
}

#[tokio::test]
async fn secrets_never_reach_answers_the_audit_log_or_exports() {
    let app = TestApp::spawn().await;
    let secret = "whsec_".to_owned() + &signers::b64(b"the-secret-that-must-not-leak");
    let body = json!({"name": "leak", "verification": {"scheme": "standard_webhooks", "secrets": [secret]}});
    let created = app.admin(Method::POST, "/webhooks", Some(body)).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.body["id"].as_str().expect("id").to_owned();
    let url = app.url(&format!("/webhook/{id}"));
    let now = chrono::Utc::now().timestamp();
    let wrong = format!("whsec_{}", signers::b64(b"wrong"));
    let signed =
        signers::standard_webhooks(Sign { secret: &wrong, body: b"{}", timestamp: now, url: &url }, "msg_1", "webhook");
    let (_, receipt) = send(&app, &url, &signed).await;
    let capture = receipt["request_id"].as_str().expect("id");
    let rotated =
        json!({"verification": {"scheme": "standard_webhooks", "secrets": [secret, wrong], "mode": "enforce"}});
    let patched = app.admin(Method::PATCH, &format!("/webhooks/{id}"), Some(rotated)).await;
    let api = app.api();
    let texts = [
        created.text,
        patched.text,
        json_text(api.webhooks().get(&id).await.expect("read")),
        json_text(api.webhooks().request(&id, capture).await.expect("the capture")),
        json_text(api.webhooks().verify(&id, capture, &VerifyCapture::default()).await.expect("re-check")),
        json_text(api.organization().audit_log(&[]).await.expect("audit log")),
        api.webhooks().export(&id, &[("format", "har")]).await.expect("export").text().await.expect("text"),
    ];
    let key_bytes = signers::b64(b"the-secret-that-must-not-leak");
    for text in &texts {
        assert!(!text.contains(&key_bytes), "the secret leaked: {text}");
    }
    assert!(texts[5].contains("webhook.verification.set"), "the change is audited: {}", texts[5]);
    let stored: Vec<u8> = sqlx::query_scalar("SELECT verification_secrets FROM webhooks WHERE id = $1::uuid")
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .expect("sealed");
    assert!(!String::from_utf8_lossy(&stored).contains("must-not-leak"), "sealed, not stored in clear");
}

#[tokio::test]
async fn secrets_never_reach_the_server_log_even_at_debug_level() {
    use hookflow_tests::server::ServerProcess;
    let server = ServerProcess::spawn(crate::SERVER, &["--log", "debug"]).await;
    let secret = "gh-secret-that-must-not-reach-the-log";
    let candidate = "candidate-secret-that-must-not-reach-the-log";
    let body = json!({"name": "logged", "verification": {"scheme": "github", "secrets": [secret], "mode": "enforce"}});
    let created = server.post_as(&server.org, &server.key, "/webhooks", &body).await;
    let id = created["id"].as_str().expect("id").to_owned();
    let url = format!("{}/webhook/{id}", server.base);
    let client = reqwest::Client::new();
    let genuine = signers::github(Sign { secret, body: b"{}", timestamp: 0, url: &url });
    let forged = signers::github(Sign { secret: candidate, body: b"{}", timestamp: 0, url: &url });
    let mut ids = Vec::new();
    for signed in [&genuine, &forged] {
        let (name, value) = &signed.headers[0];
        let answer = client.post(&url).header(name, value).body("{}").send().await.expect("capture");
        if answer.status() == 200 {
            ids.push(answer.json::<Value>().await.expect("receipt")["request_id"].as_str().expect("id").to_owned());
        }
    }
    assert_eq!(ids.len(), 1, "the forged one is refused");
    let path = format!("/webhooks/{id}/requests/{}/verify", ids[0]);
    server.post_as(&server.org, &server.key, &path, &json!({"secret": candidate})).await;
    server.post_as(&server.org, &server.key, &path, &json!({"secret": "x".repeat(2000)})).await;
    let bad = json!({"name": "bad", "verification": {"scheme": "discord", "secrets": [secret]}});
    server.post_as(&server.org, &server.key, "/webhooks", &bad).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let output = server.output();
    assert!(output.contains("DEBUG") || output.contains("debug"), "the log is at debug level: {output:.2000}");
    for value in [secret, candidate] {
        assert!(!output.contains(value), "a secret reached the log");
    }
    server.stop().await;
}
