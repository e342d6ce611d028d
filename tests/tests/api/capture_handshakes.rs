//! Provider handshakes at capture URLs (issue #51, part B): each preset answers its provider's URL check byte for
//! byte as the provider documents it (HMACs computed here with RustCrypto, apart from the server's aws-lc-rs), the
//! check is stored as a capture marked with its preset and found by `handshake:<preset>`; refused checks answer 403
//! and are stored too; secrets never come back; bad settings are 400; another organization's endpoint is 404.

use hookflow_tests::{TestApp, signers};
use reqwest::Method;
use serde_json::{Value, json};

const ZOOM_SECRET: &str = "zoom-secret-token-3f9a";
const X_SECRET: &str = "x-consumer-secret-77c1";
const TWITCH_SECRET: &str = "twitch-subscription-secret-0b2e";
const META_TOKEN: &str = "meta-verify-token-5d4c";

async fn endpoint(app: &TestApp, handshake: Value) -> String {
    let created =
        app.admin(Method::POST, "/webhooks", Some(json!({"name": "handshake", "handshake": handshake}))).await;
    assert_eq!(created.status, 201, "{}", created.text);
    created.body["id"].as_str().expect("id").to_owned()
}

/// The captures of `id` a `q` finds.
async fn found(app: &TestApp, id: &str, q: &str) -> Vec<Value> {
    let reply = app.admin(Method::POST, &format!("/webhooks/{id}/requests/search"), Some(json!({"q": q}))).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body["items"].as_array().expect("items").clone()
}

fn content_type(reply: &hookflow_tests::Reply) -> &str {
    reply.headers.get("content-type").map_or("", |v| v.to_str().expect("text"))
}

fn twitch_headers(id: &str, timestamp: &str, body: &str, secret: &str) -> Vec<(String, String)> {
    let tag = hex::encode(signers::hmac_sha256(secret.as_bytes(), format!("{id}{timestamp}{body}").as_bytes()));
    vec![
        ("Twitch-Eventsub-Message-Id".into(), id.into()),
        ("Twitch-Eventsub-Message-Retry".into(), "0".into()),
        ("Twitch-Eventsub-Message-Type".into(), "webhook_callback_verification".into()),
        ("Twitch-Eventsub-Message-Signature".into(), format!("sha256={tag}")),
        ("Twitch-Eventsub-Message-Timestamp".into(), timestamp.into()),
        ("Twitch-Eventsub-Subscription-Type".into(), "channel.follow".into()),
        ("Twitch-Eventsub-Subscription-Version".into(), "2".into()),
        ("Content-Type".into(), "application/json".into()),
    ]
}

async fn send(
    app: &TestApp,
    method: Method,
    rest: &str,
    headers: &[(String, String)],
    body: &str,
) -> hookflow_tests::Reply {
    let pairs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    app.capture_with(method, rest, &pairs, body.to_owned()).await
}

const TWITCH_BODY: &str = r#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"2","cost":1,"condition":{"broadcaster_user_id":"12826","moderator_user_id":"12826"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2019-11-16T10:11:12.634234626Z"}}"#;

#[tokio::test]
async fn each_preset_answers_its_providers_check_and_stores_it_marked() {
    let app = TestApp::spawn().await;
    let json_ct = "application/json";
    let text_ct = "text/plain; charset=utf-8";

    // Slack's Events API: `url_verification` -> the challenge in JSON.
    let slack = endpoint(&app, json!({"preset": "slack"})).await;
    let body = r#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let reply = send(&app, Method::POST, &slack, &[("Content-Type".into(), json_ct.into())], body).await;
    assert_eq!((reply.status.as_u16(), content_type(&reply)), (200, json_ct));
    assert_eq!(reply.text, r#"{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}"#);

    // Meta: hub.challenge echoed when the verify token matches.
    let meta = endpoint(&app, json!({"preset": "meta", "secret": META_TOKEN})).await;
    let query = format!("{meta}?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token={META_TOKEN}");
    let reply = send(&app, Method::GET, &query, &[], "").await;
    assert_eq!((reply.status.as_u16(), content_type(&reply), reply.text.as_str()), (200, text_ct, "1158201444"));

    // Microsoft Graph: the validationToken, URL-decoded, as text.
    let msgraph = endpoint(&app, json!({"preset": "msgraph"})).await;
    let token = "Validation: Testing client application reachability for subscription Request-Id: 9f1d0a8b-2e47";
    let encoded = token.replace(' ', "+").replace(':', "%3A");
    let reply = send(
        &app,
        Method::POST,
        &format!("{msgraph}?validationToken={encoded}"),
        &[("Content-Type".into(), "text/plain".into())],
        "",
    )
    .await;
    assert_eq!((reply.status.as_u16(), content_type(&reply), reply.text.as_str()), (200, text_ct, token));

    // Zoom: plainToken and its HMAC-SHA256 under the secret token, hex.
    let zoom = endpoint(&app, json!({"preset": "zoom", "secret": ZOOM_SECRET})).await;
    let body = r#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
    let reply = send(&app, Method::POST, &zoom, &[("Content-Type".into(), json_ct.into())], body).await;
    let encrypted = hex::encode(signers::hmac_sha256(ZOOM_SECRET.as_bytes(), b"qgg8vlvZRS6UYooatFL8Aw"));
    assert_eq!((reply.status.as_u16(), content_type(&reply)), (200, json_ct));
    assert_eq!(reply.text, format!(r#"{{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"{encrypted}"}}"#));

    // Dropbox: the challenge as text, not sniffed.
    let dropbox = endpoint(&app, json!({"preset": "dropbox"})).await;
    let reply = send(&app, Method::GET, &format!("{dropbox}?challenge=q3bD8aXk2Lm"), &[], "").await;
    assert_eq!((reply.status.as_u16(), content_type(&reply), reply.text.as_str()), (200, text_ct, "q3bD8aXk2Lm"));
    assert_eq!(reply.headers["x-content-type-options"], "nosniff");

    // X's CRC: sha256= base64 HMAC of the crc_token under the consumer secret.
    let twitter = endpoint(&app, json!({"preset": "twitter", "secret": X_SECRET})).await;
    let reply = send(&app, Method::GET, &format!("{twitter}?crc_token=a6fbc2b1-e7c0-4c5e&nonce=MTQ4"), &[], "").await;
    let tag = signers::b64(&signers::hmac_sha256(X_SECRET.as_bytes(), b"a6fbc2b1-e7c0-4c5e"));
    assert_eq!((reply.status.as_u16(), content_type(&reply)), (200, json_ct));
    assert_eq!(reply.text, format!(r#"{{"response_token":"sha256={tag}"}}"#));

    // Twitch: a verification whose signature verifies -> the challenge as text.
    let twitch = endpoint(&app, json!({"preset": "twitch", "secret": TWITCH_SECRET})).await;
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let headers = twitch_headers("e76c6bd4-55c9-4987-8304-da1588d8988b", &now, TWITCH_BODY, TWITCH_SECRET);
    let reply = send(&app, Method::POST, &twitch, &headers, TWITCH_BODY).await;
    assert_eq!(
        (reply.status.as_u16(), content_type(&reply), reply.text.as_str()),
        (200, text_ct, "pogchamp-kappa-360noscope-vohiyo")
    );

    // Smartsheet: the challenge in a header and in the JSON body.
    let smartsheet = endpoint(&app, json!({"preset": "smartsheet"})).await;
    let challenge = "d78dd1d3-01ce-4481-81de-92b4f3aa5ab1";
    let body = format!(r#"{{"challenge":"{challenge}","webhookId":2674017481058180}}"#);
    let headers = [("Smartsheet-Hook-Challenge".into(), challenge.into()), ("Content-Type".into(), json_ct.into())];
    let reply = send(&app, Method::POST, &smartsheet, &headers, &body).await;
    assert_eq!((reply.status.as_u16(), content_type(&reply)), (200, json_ct));
    assert_eq!(reply.headers["smartsheet-hook-response"], challenge);
    assert_eq!(reply.text, format!(r#"{{"smartsheetHookResponse":"{challenge}"}}"#));

    // Trello: HEAD -> 200, no body (raw, so an empty body is seen as sent).
    let trello = endpoint(&app, json!({"preset": "trello"})).await;
    let answer = app
        .raw_http(
            format!("HEAD /webhook/{trello} HTTP/1.1\r\nHost: hooks.test\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("\r\n\r\n"), "no body: {answer}");
    // Elsewhere HEAD is captured and answered like GET without a body (the receipt's headers), never as trello's.
    let plain = app.create_webhook(json!({"name": "no handshake"})).await["id"].as_str().expect("id").to_owned();
    let answer = app
        .raw_http(format!("HEAD /webhook/{plain} HTTP/1.1\r\nHost: hooks.test\r\nConnection: close\r\n\r\n").as_bytes())
        .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("content-type: application/json"), "the receipt's head: {answer}");

    // Each check is stored once, marked with its preset, and found by `handshake:<preset>`; an ordinary request to
    // the same endpoint gets the receipt and is not marked.
    let all = [
        (&slack, "slack"),
        (&meta, "meta"),
        (&msgraph, "msgraph"),
        (&zoom, "zoom"),
        (&dropbox, "dropbox"),
        (&twitter, "twitter"),
        (&twitch, "twitch"),
        (&smartsheet, "smartsheet"),
        (&trello, "trello"),
    ];
    for (id, preset) in all {
        let ordinary = app.capture(Method::POST, id, r#"{"type":"event_callback"}"#).await;
        assert_eq!(ordinary.status, 200, "{preset}: {}", ordinary.text);
        assert_eq!(ordinary.body["message"], "Request captured", "{preset}");
        let marked = found(&app, id, &format!("handshake:{preset}")).await;
        assert_eq!(marked.len(), 1, "{preset}: {marked:?}");
        assert_eq!(marked[0]["handshake"], preset);
        let stored = app
            .admin(Method::GET, &format!("/webhooks/{id}/requests/{}", marked[0]["id"].as_str().unwrap()), None)
            .await;
        assert_eq!(stored.body["handshake"], preset);
        let unmarked = found(&app, id, &format!("-handshake:{preset}")).await;
        assert_eq!(unmarked.len(), 1, "{preset}");
        assert_eq!(unmarked[0]["handshake"], Value::Null);
        // Another preset's term finds nothing here.
        let other = if preset == "zoom" { "slack" } else { "zoom" };
        assert!(found(&app, id, &format!("handshake:{other}")).await.is_empty());
    }
    let trello_capture = &found(&app, &trello, "handshake:trello").await[0];
    assert_eq!(trello_capture["method"], "HEAD");
}

#[tokio::test]
async fn refused_checks_answer_403_and_are_stored() {
    let app = TestApp::spawn().await;
    let meta = endpoint(&app, json!({"preset": "meta", "secret": META_TOKEN})).await;
    let query = format!("{meta}?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=guessed-token");
    let reply = send(&app, Method::GET, &query, &[], "").await;
    assert_eq!(reply.status, 403, "{}", reply.text);
    assert!(!reply.text.contains("1158201444"), "the challenge is not echoed: {}", reply.text);
    assert_eq!(found(&app, &meta, "handshake:meta").await.len(), 1);

    let twitch = endpoint(&app, json!({"preset": "twitch", "secret": TWITCH_SECRET})).await;
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let forged = twitch_headers("e76c6bd4-55c9-4987-8304-da1588d8988b", &now, TWITCH_BODY, "not-the-secret");
    let reply = send(&app, Method::POST, &twitch, &forged, TWITCH_BODY).await;
    assert_eq!(reply.status, 403, "{}", reply.text);
    assert!(!reply.text.contains("pogchamp"), "{}", reply.text);
    // A stale timestamp, correctly signed, is refused as well.
    let stale = "2019-11-16T10:11:12.634234626Z";
    let old = twitch_headers("e76c6bd4-55c9-4987-8304-da1588d8988c", stale, TWITCH_BODY, TWITCH_SECRET);
    assert_eq!(send(&app, Method::POST, &twitch, &old, TWITCH_BODY).await.status, 403);
    let stored = found(&app, &twitch, "handshake:twitch").await;
    assert_eq!(stored.len(), 2, "{stored:?}");
}

#[tokio::test]
async fn under_enforce_a_check_with_a_bad_signature_is_refused_401_and_stored() {
    let app = TestApp::spawn().await;
    let secret = "slack-signing-secret-8f74";
    let created = app
        .admin(
            Method::POST,
            "/webhooks",
            Some(json!({"name": "slack", "handshake": {"preset": "slack"},
            "verification": {"scheme": "slack", "secrets": [secret], "mode": "enforce"}})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.body["id"].as_str().unwrap().to_owned();
    let body = r#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"c-2595E9CY3gmd","type":"url_verification"}"#;
    let ts = chrono::Utc::now().timestamp().to_string();
    let sign = |key: &str| {
        format!("v0={}", hex::encode(signers::hmac_sha256(key.as_bytes(), format!("v0:{ts}:{body}").as_bytes())))
    };
    let headers = |signature: String| {
        vec![
            ("X-Slack-Request-Timestamp".to_owned(), ts.clone()),
            ("X-Slack-Signature".to_owned(), signature),
            ("Content-Type".to_owned(), "application/json".to_owned()),
        ]
    };
    let reply = send(&app, Method::POST, &id, &headers(sign("wrong-secret")), body).await;
    assert_eq!(reply.status, 401, "{}", reply.text);
    let reply = send(&app, Method::POST, &id, &headers(sign(secret)), body).await;
    assert_eq!((reply.status.as_u16(), reply.text.as_str()), (200, r#"{"challenge":"c-2595E9CY3gmd"}"#));
    let stored = found(&app, &id, "handshake:slack").await;
    assert_eq!(stored.len(), 2);
    let verdicts: Vec<&str> = stored.iter().map(|c| c["signature"]["verdict"].as_str().unwrap()).collect();
    assert!(verdicts.contains(&"invalid") && verdicts.contains(&"valid"), "{verdicts:?}");

    // Zoom's answer uses the endpoint's verification secret when the handshake sets none.
    let created = app
        .admin(
            Method::POST,
            "/webhooks",
            Some(json!({"name": "zoom", "handshake": {"preset": "zoom"},
            "verification": {"scheme": "zoom", "secrets": [ZOOM_SECRET], "mode": "record"}})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["handshake"], json!({"preset": "zoom", "secret_set": false}));
    let zoom = created.body["id"].as_str().unwrap();
    let body = r#"{"payload":{"plainToken":"p-9x"},"event_ts":1654503849680,"event":"endpoint.url_validation"}"#;
    let reply = send(&app, Method::POST, zoom, &[], body).await;
    let encrypted = hex::encode(signers::hmac_sha256(ZOOM_SECRET.as_bytes(), b"p-9x"));
    assert_eq!(reply.text, format!(r#"{{"plainToken":"p-9x","encryptedToken":"{encrypted}"}}"#));
}

#[tokio::test]
async fn secrets_are_never_read_back() {
    let app = TestApp::spawn().await;
    let secret = "never-shown-handshake-secret-e1d7";
    let created = app
        .admin(
            Method::POST,
            "/webhooks",
            Some(json!({"name": "x", "handshake": {"preset": "twitter", "secret": secret}})),
        )
        .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.body["handshake"], json!({"preset": "twitter", "secret_set": true}));
    let id = created.body["id"].as_str().unwrap().to_owned();
    let reply = send(&app, Method::GET, &format!("{id}?crc_token=t1"), &[], "").await;
    assert_eq!(reply.status, 200);
    let patched = app
        .admin(
            Method::PATCH,
            &format!("/webhooks/{id}"),
            Some(json!({"handshake": {"preset": "twitter", "secret": secret}})),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text);
    let mut texts = vec![created.text, patched.text, reply.text];
    for path in [
        format!("/webhooks/{id}"),
        "/webhooks".to_owned(),
        format!("/webhooks/{id}/requests"),
        "/audit-log?limit=100".to_owned(),
    ] {
        let read = app.admin(Method::GET, &path, None).await;
        assert_eq!(read.status, 200, "{path}: {}", read.text);
        texts.push(read.text);
    }
    texts.push(app.admin(Method::GET, "/openapi.json", None).await.text);
    for text in &texts {
        assert!(!text.contains(secret), "the secret came back: {text}");
    }
    let audit = app.admin(Method::GET, "/audit-log?limit=100", None).await;
    assert!(audit.text.contains("webhook.handshake.set"), "{}", audit.text);
    let stored: Vec<u8> = sqlx::query_scalar("SELECT handshake_secret FROM webhooks WHERE id = $1::uuid")
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .expect("row");
    assert!(!String::from_utf8_lossy(&stored).contains(secret), "sealed at rest");

    // `null` clears the handshake: the crc is an ordinary capture again.
    let cleared = app.admin(Method::PATCH, &format!("/webhooks/{id}"), Some(json!({"handshake": null}))).await;
    assert_eq!(cleared.body["handshake"], Value::Null);
    let reply = send(&app, Method::GET, &format!("{id}?crc_token=t2"), &[], "").await;
    assert_eq!(reply.body["message"], "Request captured");
}

#[tokio::test]
async fn bad_presets_and_secrets_are_refused_400_naming_the_field() {
    let app = TestApp::spawn().await;
    for (handshake, mentioning) in [
        (json!({"preset": "github"}), "handshake"),
        (json!({"preset": "zoom"}), "handshake.secret"),
        (json!({"preset": "meta", "secret": ""}), "handshake.secret"),
        (json!({"preset": "twitch", "secret": "a\u{7}b"}), "handshake.secret"),
        (json!({"preset": "twitter", "secret": "s".repeat(257)}), "handshake.secret"),
        (json!({"preset": "dropbox", "secret": "unused"}), "handshake.secret"),
        (json!({"preset": "trello", "extra": 1}), "handshake"),
        (json!("slack"), "handshake"),
    ] {
        let reply = app.admin(Method::POST, "/webhooks", Some(json!({"name": "bad", "handshake": handshake}))).await;
        reply.assert_refused(400, "invalid_request", mentioning);
    }
    let id = app.webhook_named("patched").await;
    let reply =
        app.admin(Method::PATCH, &format!("/webhooks/{id}"), Some(json!({"handshake": {"preset": "meta"}}))).await;
    reply.assert_refused(400, "invalid_request", "handshake.secret");
    let reply = app
        .admin(Method::POST, &format!("/webhooks/{id}/requests/search"), Some(json!({"q": "handshake:github"})))
        .await;
    reply.assert_refused(400, "invalid_request", "handshake:github");
    assert_eq!(app.rows("webhooks WHERE handshake IS NOT NULL").await, 0);
}

#[tokio::test]
async fn another_organizations_endpoint_is_404() {
    let app = TestApp::spawn().await;
    let id = endpoint(&app, json!({"preset": "meta", "secret": META_TOKEN})).await;
    let other = app.new_org("Other").await;
    let patch = json!({"handshake": {"preset": "dropbox"}});
    let reply = app.call(Method::PATCH, &format!("/webhooks/{id}"), Some(&other), Some(patch)).await;
    reply.assert_refused(404, "not_found", "webhook");
    let reply = app
        .call(
            Method::POST,
            &format!("/webhooks/{id}/requests/search"),
            Some(&other),
            Some(json!({"q": "handshake:meta"})),
        )
        .await;
    assert_eq!(reply.status, 404);
    let read = app.admin(Method::GET, &format!("/webhooks/{id}"), None).await;
    assert_eq!(read.body["handshake"], json!({"preset": "meta", "secret_set": true}), "unchanged");
}
