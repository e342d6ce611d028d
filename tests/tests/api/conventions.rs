//! Cross-cutting conventions: error bodies with request ids, unknown routes and methods, health probes, and
//! 503 when the database is down.

use hookflow_control_plane::db;
use hookflow_shared::OrgId;
use hookflow_shared::wire::header;
use hookflow_tests::TestApp;
use reqwest::Method;

#[tokio::test]
async fn every_response_carries_a_request_id_that_errors_repeat() {
    let app = TestApp::spawn().await;
    let ok = app.admin(Method::GET, "/permissions", None).await;
    assert!(ok.headers.contains_key(header::REQUEST_ID));
    let reply = app.call(Method::GET, "/permissions", None, None).await;
    let header = reply.headers[header::REQUEST_ID].to_str().expect("ascii");
    assert_eq!(reply.body["error"]["request_id"], header);
    assert_eq!(reply.headers["content-type"], "application/json");
    // A caller's own request id is kept, so logs on both sides line up.
    let mine =
        app.client.get(app.url("/healthz")).header(header::REQUEST_ID, "trace-me-42").send().await.expect("send");
    assert_eq!(mine.headers()[header::REQUEST_ID], "trace-me-42");
}

#[tokio::test]
async fn unknown_routes_and_methods_get_the_error_body() {
    let app = TestApp::spawn().await;
    let reply = app.admin(Method::GET, "/no-such-thing", None).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"));
    assert!(reply.body["error"]["request_id"].is_string());
    let reply = app.admin(Method::PUT, "/permissions", None).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (405, "method_not_allowed"));
}

#[tokio::test]
async fn health_and_readiness() {
    let app = TestApp::spawn().await;
    assert_eq!(app.call(Method::GET, "/healthz", None, None).await.status, 200);
    let ready = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!(ready.status.as_u16(), 200);
    assert_eq!(ready.body, serde_json::json!({"status": "ready"}), "strangers learn no database host");
}

#[tokio::test]
async fn a_database_that_is_down_answers_503_with_retry_after() {
    // Port 1 on loopback: nothing listens, every connection attempt is refused.
    let options = db::parse_url("postgres://hookflow@127.0.0.1:1/hookflow").expect("url");
    let app = TestApp::spawn_on(db::pool(options, 2)).await;
    assert_eq!(app.call(Method::GET, "/healthz", None, None).await.status, 200, "liveness needs no database");
    let ready = app.call(Method::GET, "/readyz", None, None).await;
    assert_eq!((ready.status.as_u16(), ready.code()), (503, "unavailable"));
    assert!(ready.headers.contains_key("retry-after"));
    assert!(ready.body.get("database").is_none() && !ready.text.contains("127.0.0.1"), "{}", ready.text);
    let key = hookflow_shared::token::TokenKind::ApiKey.assemble(&[1u8; 32]);
    let creds = hookflow_tests::Creds { key, org: OrgId::now_v7() };
    let reply = app.call(Method::GET, "/api-keys", Some(&creds), None).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (503, "unavailable"), "{}", reply.text);
    assert!(!reply.text.to_lowercase().contains("connection refused"), "no database error text leaks: {}", reply.text);
}
