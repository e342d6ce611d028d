//! Regression tests of capture integrity across tenants: a NUL byte from one sender never fails another tenant's
//! captures, a row the database refuses never fails its batch, a request refused early never lends its head to
//! the next request on the connection, a custom answer is sandboxed, and NUL bytes in API input answer 400.

use bytes::Bytes;
use chrono::Utc;
use hookflow_control_plane::capture::writer::{CaptureRecord, CaptureWriter, Outcome};
use hookflow_shared::api::webhooks::CreateWebhook;
use hookflow_shared::{ErrorBody, OrgId, WebhookId};
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;

#[tokio::test]
async fn a_senders_nul_byte_never_fails_another_tenants_captures() {
    let app = TestApp::spawn().await;
    let other = app.new_org("Other").await;
    let mine = app.webhook_named("mine").await;
    let theirs = CreateWebhook::new("theirs".parse().expect("a name"));
    let theirs = app.api_as(&other).webhooks().create(&theirs).await.expect("create").id.to_string();
    let mut sent = Vec::new();
    for round in 0..5 {
        for i in 0..63 {
            let (endpoint, query) = match i % 21 {
                0 => (&mine, "?evil=%00&x=1".to_owned()),
                n if n % 2 == 0 => (&mine, format!("?round={round}&i={i}")),
                _ => (&theirs, format!("?round={round}&i={i}")),
            };
            let url = app.url(&format!("/webhook/{endpoint}{query}"));
            sent.push(tokio::spawn(app.client.post(url).body(format!("{{\"i\": {i}}}")).send()));
        }
    }
    let mut statuses = Vec::new();
    for handle in sent {
        statuses.push(handle.await.expect("task").expect("send").status().as_u16());
    }
    assert!(statuses.iter().all(|s| *s == 200), "every capture was stored: {statuses:?}");
    let stored = app.rows("captures").await;
    assert_eq!(stored, 315);
    // The decoded view of a NUL byte reads U+FFFD; the query string keeps the exact bytes.
    // Mine holds 165 captures sent concurrently: every page is read, since the NUL ones may sort past the first.
    let (mut evil, mut cursor) = (Vec::new(), String::new());
    loop {
        let page = app.get::<Value>(&format!("/webhooks/{mine}/requests?limit=100{cursor}"), 200).await;
        let items = page["items"].as_array().expect("items");
        evil.extend(items.iter().filter(|c| c["query_string"] == "evil=%00&x=1").cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(evil.len(), 15, "every NUL capture was stored");
    assert!(evil.iter().all(|c| c["query"]["evil"] == json!(["\u{FFFD}"])), "{evil:?}");
}

fn record(org_id: OrgId, webhook_id: WebhookId, query_json: &str) -> CaptureRecord {
    CaptureRecord {
        org_id,
        target: hookflow_control_plane::capture::cache::CaptureTarget::Webhook(webhook_id),
        method: "POST".into(),
        path: String::new(),
        query_string: String::new(),
        query_json: query_json.into(),
        headers_json: "[]".into(),
        content_type: None,
        body: Bytes::from_static(b"{}"),
        staged: None,
        body_sha256: vec![0; 32],
        body_utf8: true,
        source_ip: "127.0.0.1".into(),
        received_at: Utc::now(),
        signature: hookflow_control_plane::capture::batch::CaptureSignature::unverified(),
        handshake: None,
        hand: false,
    }
}

#[tokio::test]
async fn a_row_the_database_refuses_never_fails_its_batch() {
    let app = TestApp::spawn().await;
    let id: WebhookId =
        app.create_webhook(json!({"name": "batch"})).await["id"].as_str().expect("id").parse().expect("id");
    let writer = CaptureWriter::start(app.pool.clone());
    let mut pending = Vec::new();
    for i in 0..40 {
        // jsonb refuses \u0000: this row cannot be stored whatever the statement.
        let query = if i % 10 == 3 { r#"{"x": ["\u0000"]}"# } else { "{}" };
        let writer = writer.clone();
        let record = record(app.admin.org, id, query);
        pending.push(tokio::spawn(async move { writer.store(record, Default::default()).await }));
    }
    let mut outcomes = Vec::new();
    for handle in pending {
        outcomes.push(handle.await.expect("task").0);
    }
    let rejected = outcomes.iter().filter(|o| **o == Outcome::Rejected).count();
    let stored = outcomes.iter().filter(|o| matches!(o, Outcome::Stored(_))).count();
    assert_eq!((stored, rejected), (36, 4), "{outcomes:?}");
    let rows = app.rows("captures").await;
    assert_eq!(rows, 36);
}

#[tokio::test]
async fn a_request_refused_early_never_lends_its_headers_to_the_next() {
    let app = TestApp::spawn().await;
    let small = app.create_webhook(json!({"name": "small", "max_body_bytes": 8})).await;
    let id = small["id"].as_str().expect("id").to_owned();
    let unknown = Uuid::new_v4();
    let request = format!(
        "POST /webhook/{unknown} HTTP/1.1\r\nHost: h\r\nX-Forged-Sig: evil-404\r\nContent-Length: 0\r\n\r\n\
         POST /webhook/{id} HTTP/1.1\r\nHost: h\r\nX-Forged-Sig: evil-413\r\nContent-Length: 12\r\n\r\n123456789012\
         POST /webhook/{id} HTTP/1.1\r\nHost: h\r\nX-Sig: good\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    );
    let answer = app.raw_http(request.as_bytes()).await;
    assert!(answer.contains("HTTP/1.1 404") && answer.contains("HTTP/1.1 413"), "{answer}");
    let stored = app.get::<Value>(&format!("/webhooks/{id}/requests"), 200).await;
    let items = stored["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{stored}");
    assert_eq!(
        items[0]["headers"],
        json!([["Host", "h"], ["X-Sig", "good"], ["Content-Length", "2"], ["Connection", "close"]])
    );
}

#[tokio::test]
async fn a_custom_answer_is_sandboxed_and_sets_no_cookie() {
    let app = TestApp::spawn().await;
    let refused_headers = [
        "Set-Cookie",
        "location",
        "Content-Security-Policy",
        "Content-Length",
        "transfer-encoding",
        "Connection",
        "Upgrade",
        "Clear-Site-Data",
        "Service-Worker-Allowed",
        "Cache-Control",
        "Vary",
        "X-Accel-Redirect",
        "X-Envoy-Immediate-Health-Check-Fail",
        "X-LiteSpeed-Location",
        "X-Sendfile",
        "X-Frame-Options",
        "X-Forwarded-Host",
    ];
    for refused in refused_headers {
        let body = json!({"name": "x", "response": {"status": 200, "headers": {refused: "v"}}});
        let error: ErrorBody = app.post("/webhooks", &body, 400).await;
        assert!(error.error.message.contains(refused), "{}", error.error.message);
    }
    let body = json!({"name": "html", "response": {"status": 200, "headers": {"Content-Type": "text/html"},
        "body": "<script>alert(document.cookie)</script>"}});
    let id = app.create_webhook(body).await["id"].as_str().expect("id").to_owned();
    let answer = app.capture(Method::POST, &id, "x").await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.headers["x-content-type-options"], "nosniff");
    assert!(answer.headers["content-security-policy"].to_str().expect("csp").starts_with("sandbox"));
    assert!(answer.headers.get("set-cookie").is_none());
}

/// Finding 1 of Hardening III: with `Content-Length: 0` and a body that is a whole HTTP response, one capture got
/// two answers on a keep-alive connection (the second the tenant's HTML without the sandbox). Headers outside the
/// allow-list are refused at write, and dropped at serve for endpoints stored before the rule.
#[tokio::test]
async fn a_custom_answer_cannot_frame_a_second_response() {
    let app = TestApp::spawn().await;
    let allowed = json!({"name": "ok", "response": {"status": 503, "headers": {"Content-Type": "text/plain",
        "Retry-After": "5", "X-Reply": "yes", "content-language": "en"}, "body": "later"}});
    let id = app.create_webhook(allowed).await["id"].as_str().expect("id").to_owned();
    let smuggled =
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 29\r\n\r\n<script>steal()</script>\r\n";
    let forged = json!({"status": 200, "headers": {"Content-Length": "0", "Connection": "keep-alive",
        "Transfer-Encoding": "identity", "Clear-Site-Data": "\"*\"", "X-Reply": "kept"}, "body": smuggled});
    let webhook_id: WebhookId = id.parse().expect("uuid");
    sqlx::query("UPDATE webhooks SET response = $1 WHERE id = $2")
        .bind(&forged)
        .bind(webhook_id)
        .execute(&app.pool)
        .await
        .expect("forge a stored answer");
    let request =
        format!("POST /webhook/{id} HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}");
    let answer = app.raw_http(request.as_bytes()).await;
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{answer}");
    assert!(head.contains(&format!("content-length: {}", smuggled.len())), "framed by the server: {answer}");
    assert!(!head.contains("transfer-encoding") && !head.contains("clear-site-data"), "{answer}");
    assert!(head.contains("x-reply: kept") && head.contains("content-security-policy: sandbox"), "{answer}");
    assert_eq!(body, smuggled, "the smuggled response is this answer's body, not a second answer");
}

#[tokio::test]
async fn nul_bytes_in_api_input_answer_400() {
    let app = TestApp::spawn().await;
    let error: ErrorBody = app.get("/flows?tag=a%00b", 400).await;
    assert!(error.error.message.contains("NUL"), "{}", error.error.message);
    let body = json!({"name": "nul\u{0}name"});
    let error: ErrorBody = app.post("/webhooks", &body, 400).await;
    assert!(error.error.message.contains("NUL"), "{}", error.error.message);
}

/// Finding 15 of Hardening III: capture URLs share the app's origin unless the operator gives them one of their
/// own (`--capture-url`); then endpoints hand senders that origin.
#[tokio::test]
async fn capture_urls_can_live_on_an_origin_of_their_own() {
    let app = TestApp::spawn_with(|s| s.capture_url = "https://hooks.example.test".into()).await;
    let created = app.create_webhook(json!({"name": "own origin"})).await;
    let id = created["id"].as_str().expect("id");
    assert_eq!(created["capture_url"], format!("https://hooks.example.test/webhook/{id}"));
    let listed: Value = app.get("/webhooks", 200).await;
    assert_eq!(listed["items"][0]["capture_url"], created["capture_url"]);
}

/// Review of Hardening III: a declared length is reserved in full before the body is read, so sixteen senders
/// declaring 10 MiB and stalling filled the writer's byte budget and every other tenant's large capture was
/// answered 503. One organization's endpoints now hold at most a quarter of the budget.
#[tokio::test]
async fn one_tenants_stalled_senders_leave_room_for_others() {
    use tokio::io::AsyncWriteExt as _;
    let app = TestApp::spawn().await;
    let created = app.create_webhook(json!({"name": "stalled", "max_body_bytes": 10 * 1024 * 1024})).await;
    let id = created["id"].as_str().expect("id").to_owned();
    let address = app.url("").trim_start_matches("http://").trim_end_matches('/').to_owned();
    let mut stalled = Vec::new();
    for _ in 0..24 {
        let mut sender = tokio::net::TcpStream::connect(&address).await.expect("connect");
        let head = format!("POST /webhook/{id} HTTP/1.1\r\nHost: h\r\nContent-Length: 10485760\r\n\r\n");
        sender.write_all(head.as_bytes()).await.expect("head");
        sender.write_all(&vec![b'x'; 100_000]).await.expect("a little body");
        stalled.push(sender);
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let other = app.new_org("Neighbour").await;
    let client = app.api_as(&other);
    let theirs = client.webhooks();
    let body = hookflow_shared::api::webhooks::CreateWebhook {
        max_body_bytes: Some(10 * 1024 * 1024),
        ..hookflow_shared::api::webhooks::CreateWebhook::new("theirs".parse().expect("a name"))
    };
    let endpoint = theirs.create(&body).await.expect("the neighbour's endpoint");
    for _ in 0..3 {
        let answer = app.capture(Method::POST, &endpoint.id.to_string(), vec![b'y'; 5 * 1024 * 1024]).await;
        assert_eq!(answer.status, 200, "{}", answer.text);
    }
    drop(stalled);
}
