//! CORS, HEAD and OPTIONS at capture URLs (#51, part A), over the real server: a preflight from an allowed origin
//! answered 204 with the CORS headers, from another origin (and a plain OPTIONS) the ordinary answer without them;
//! `["*"]` naming the request's origin; HEAD answered like GET without a body; every one of them captured; and a
//! real browser (Chromium) on an allowed origin reading the answer while a page on another origin cannot.

use hookflow_tests::TestApp;
use hookflow_tests::browser::Browser;
use reqwest::Method;
use serde_json::{Value, json};

const ALLOWED: &str = "https://app.example.com";

#[tokio::test]
async fn a_preflight_from_an_allowed_origin_is_answered_and_others_get_the_ordinary_answer() {
    let app = TestApp::spawn().await;
    let cors = json!({"allow_origins": [ALLOWED], "allow_headers": ["Content-Type", "X-Token"], "max_age_s": 120});
    let rules = json!([{"method": "POST", "status": 201, "body": "made"}]);
    let id = app.create_webhook(json!({"name": "cors", "cors": cors, "rules": rules})).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let preflight = [("Origin", ALLOWED), ("Access-Control-Request-Method", "POST")];
    let answer = app.capture_with(Method::OPTIONS, &id, &preflight, "").await;
    assert_eq!(answer.status, 204, "{}", answer.text);
    assert_eq!(answer.headers["access-control-allow-origin"], ALLOWED);
    assert_eq!(answer.headers["access-control-allow-methods"], "GET, POST, PUT, PATCH, DELETE, HEAD");
    assert_eq!(answer.headers["access-control-allow-headers"], "Content-Type, X-Token");
    assert_eq!(answer.headers["access-control-max-age"], "120");
    assert_eq!(answer.headers["vary"], "Origin");
    assert!(!answer.headers.contains_key("access-control-allow-credentials"), "never sent");
    assert_eq!(answer.text, "");
    // Another origin's preflight, and a plain OPTIONS: the ordinary answer (the receipt), no CORS headers.
    let foreign = [("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST")];
    for headers in [&foreign[..], &[("Origin", ALLOWED)][..], &[][..]] {
        let answer = app.capture_with(Method::OPTIONS, &id, headers, "").await;
        assert_eq!(answer.status, 200, "{headers:?}");
        assert_eq!(answer.body["message"], "Request captured");
        if headers.first().is_some_and(|(_, o)| *o == ALLOWED) {
            assert_eq!(answer.headers["access-control-allow-origin"], ALLOWED, "an answer to the allowed origin");
        } else {
            assert!(!answer.headers.contains_key("access-control-allow-origin"), "{headers:?}");
            assert!(!answer.headers.contains_key("access-control-allow-methods"), "{headers:?}");
        }
    }
    // Every other answer to an allowed origin carries the origin and Vary; another origin's does not.
    let made = app.capture_with(Method::POST, &id, &[("Origin", ALLOWED)], "{}").await;
    assert_eq!((made.status.as_u16(), made.text.as_str()), (201, "made"));
    assert_eq!(made.headers["access-control-allow-origin"], ALLOWED);
    assert_eq!(made.headers["vary"], "Origin");
    let foreign = app.capture_with(Method::POST, &id, &[("Origin", "https://evil.example")], "{}").await;
    assert_eq!(foreign.status, 201);
    assert!(!foreign.headers.contains_key("access-control-allow-origin"));
    // rules/test says the same of the preflight.
    let said: Value = app
        .post(
            &format!("/webhooks/{id}/rules/test"),
            &json!({"method": "OPTIONS", "path": "/", "headers": {"Origin": ALLOWED, "Access-Control-Request-Method": "POST"}}),
            200,
        )
        .await;
    assert_eq!((said["status"].clone(), said["rule_index"].clone()), (json!(204), Value::Null));
    assert_eq!(said["headers"]["access-control-allow-origin"], ALLOWED);
    // All six were captured, preflights included.
    assert_eq!(app.rows(&format!("captures WHERE webhook_id = '{id}'")).await, 6);
    assert_eq!(app.rows(&format!("captures WHERE webhook_id = '{id}' AND method = 'OPTIONS'")).await, 4);
}

#[tokio::test]
async fn any_origin_is_named_back_and_head_is_answered_like_get_without_a_body() {
    let app = TestApp::spawn().await;
    let rules = json!([{"method": "GET", "status": 200, "headers": {"Content-Type": "text/plain", "X-Kind": "read"},
        "body": "hello {{request.path}}!"}]);
    let cors = json!({"allow_origins": ["*"]});
    let id = app.create_webhook(json!({"name": "any", "cors": cors, "rules": rules})).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let origin = "http://localhost:3000";
    let answer = app
        .capture_with(Method::OPTIONS, &id, &[("Origin", origin), ("Access-Control-Request-Method", "PUT")], "")
        .await;
    assert_eq!(answer.status, 204);
    assert_eq!(answer.headers["access-control-allow-origin"], origin, "the request's origin, never `*`");
    assert_eq!(answer.headers["access-control-allow-headers"], "Content-Type");
    assert_eq!(answer.headers["access-control-max-age"], "600");
    let get =
        app.raw_http(format!("GET /webhook/{id} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes()).await;
    let head =
        app.raw_http(format!("HEAD /webhook/{id} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes()).await;
    let (get_head, get_body) = get.split_once("\r\n\r\n").expect("GET answer");
    let (head_head, head_body) = head.split_once("\r\n\r\n").expect("HEAD answer");
    assert_eq!(get_body, "hello !");
    assert_eq!(head_body, "", "HEAD has no body");
    let lines = |head: &str| -> Vec<String> {
        let mut lines: Vec<String> = head
            .lines()
            .map(str::to_ascii_lowercase)
            .filter(|l| !l.starts_with("date:") && !l.starts_with("x-request-id:"))
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(lines(head_head), lines(get_head), "HEAD answered like GET, Content-Length included: {head}");
    let methods: Vec<String> =
        sqlx::query_scalar("SELECT method FROM captures WHERE webhook_id = $1::uuid ORDER BY received_at")
            .bind(&id)
            .fetch_all(&app.pool)
            .await
            .expect("methods");
    assert_eq!(methods, ["OPTIONS", "GET", "HEAD"], "all captured, as sent");
}

/// Serves one page at `/` on 127.0.0.1 (its own origin) whose script the test runs.
async fn page_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let origin = format!("http://127.0.0.1:{}", listener.local_addr().expect("address").port());
    let router = axum::Router::new().route(
        "/",
        axum::routing::get(|| async { axum::response::Html("<!doctype html><title>sender</title><p>sender</p>") }),
    );
    let task = tokio::spawn(async move {
        axum::serve(listener, router).await.expect("serve");
    });
    (origin, task)
}

#[tokio::test]
async fn a_browser_on_an_allowed_origin_reads_the_answer_and_another_origin_cannot() {
    let app = TestApp::spawn().await;
    let (allowed, _allowed_task) = page_server().await;
    let (other, _other_task) = page_server().await;
    let cors = json!({"allow_origins": [allowed.clone()], "allow_headers": ["Content-Type"]});
    let rules = json!([{"method": "POST", "status": 200, "headers": {"Content-Type": "application/json"},
        "body": "{\"got\": \"{{request.body.$.ping}}\"}"}]);
    let id = app.create_webhook(json!({"name": "browser", "cors": cors, "rules": rules})).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let url = app.url(&format!("/webhook/{id}"));
    // A JSON POST needs a preflight; the script says what the page could read.
    let script = "return fetch(arguments[0], {method: 'POST', headers: {'Content-Type': 'application/json'}, \
                  body: JSON.stringify({ping: 'pong'})}).then(r => r.text()).then(t => 'read:' + t, e => 'failed:' + e)";
    let browser = Browser::start(1024).await;
    browser.goto(&format!("{allowed}/")).await;
    let read = browser.run(script, vec![json!(url)]).await;
    assert_eq!(read, json!("read:{\"got\": \"pong\"}"), "the allowed origin reads the answer");
    browser.goto(&format!("{other}/")).await;
    let refused = browser.run(script, vec![json!(url)]).await;
    let refused = refused.as_str().expect("text");
    assert!(refused.starts_with("failed:"), "another origin cannot read it: {refused}");
    browser.close().await;
    // The allowed page's preflight and POST were captured, and the other's preflight.
    let methods: Vec<String> =
        sqlx::query_scalar("SELECT method FROM captures WHERE webhook_id = $1::uuid ORDER BY received_at")
            .bind(&id)
            .fetch_all(&app.pool)
            .await
            .expect("methods");
    assert_eq!(&methods[..2], ["OPTIONS", "POST"], "{methods:?}");
    assert!(methods[2..].iter().all(|m| m == "OPTIONS"), "the other origin's preflight only: {methods:?}");
}
