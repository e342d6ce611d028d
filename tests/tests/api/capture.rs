//! The capture URL: what is stored (exactly as sent), limits, rate limits, custom answers, methods, errors.

use base64::Engine as _;
use futures_util::future::join_all;
use hookflow_shared::api::admin::UpdateOrganization;
use hookflow_shared::api::webhooks::BodyEncoding;
use hookflow_shared::wire::header;
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::json;
use sha2::{Digest, Sha256};

#[tokio::test]
async fn a_capture_keeps_headers_in_order_with_case_and_repeats() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("raw").await;
    let body = r#"{"action":"opened"}"#;
    let request = format!(
        "POST /webhook/{id}/github/events?a=1&a=2&b=x%20y HTTP/1.1\r\nHost: hooks.test\r\nX-Signature: s1\r\n\
         Content-Type: application/json\r\nx-signature: s2\r\nX-Empty: \r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = app.raw_http(request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let receipt: serde_json::Value =
        serde_json::from_str(answer.split("\r\n\r\n").nth(1).expect("body")).expect("json");
    assert_eq!(receipt["message"], "Request captured");
    let capture_id = receipt["request_id"].as_str().expect("request_id");
    assert!(receipt["received_at"].as_str().expect("received_at").len() == 27, "microseconds and Z: {receipt}");

    let stored = app.admin(Method::GET, &format!("/webhooks/{id}/requests/{capture_id}"), None).await;
    assert_eq!(stored.status, 200, "{}", stored.text);
    let c = stored.body;
    assert_eq!(c["method"], "POST");
    assert_eq!(c["path"], "/github/events");
    assert_eq!(c["query_string"], "a=1&a=2&b=x%20y");
    assert_eq!(c["query"], json!({"a": ["1", "2"], "b": ["x y"]}));
    assert_eq!(
        c["headers"],
        json!([
            ["Host", "hooks.test"],
            ["X-Signature", "s1"],
            ["Content-Type", "application/json"],
            ["x-signature", "s2"],
            ["X-Empty", ""],
            ["Content-Length", "19"],
            ["Connection", "close"]
        ])
    );
    assert_eq!(c["content_type"], "application/json");
    assert_eq!(c["body"], body);
    assert_eq!(c["body_encoding"], "utf8");
    assert_eq!(c["body_size"], 19);
    assert_eq!(c["body_sha256"], hex::encode(Sha256::digest(body)));
    assert_eq!(c["source_ip"], "127.0.0.1");
    assert_eq!(c["received_at"], receipt["received_at"]);
    assert_eq!(c["webhook_id"], id);
    assert!(c.get("body_truncated").is_none());
}

#[tokio::test]
async fn keep_alive_connections_and_other_clients_still_record_every_header() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("clients").await;
    // Two captures and an API call on one keep-alive connection, the first with a chunked body.
    let request = format!(
        "PUT /webhook/{id} HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nX-One: 1\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
         GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n\
         DELETE /webhook/{id}/x HTTP/1.1\r\nHost: a\r\nX-Two: 2\r\nConnection: close\r\n\r\n"
    );
    let answer = app.raw_http(request.as_bytes()).await;
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 3, "{answer}");
    let list = app.admin(Method::GET, &format!("/webhooks/{id}/requests"), None).await;
    let items = list.body["items"].as_array().expect("items");
    assert_eq!(items[1]["method"], "PUT");
    assert_eq!(items[1]["body"], "abc");
    assert_eq!(items[1]["headers"][2], json!(["X-One", "1"]));
    assert_eq!(items[0]["method"], "DELETE");
    assert_eq!(items[0]["path"], "/x");
    assert_eq!(items[0]["headers"][1], json!(["X-Two", "2"]));
    // A client library (lower-case names) works as well.
    let reply = app
        .client
        .post(app.url(&format!("/webhook/{id}")))
        .header("X-Lib", "reqwest")
        .body("hi")
        .send()
        .await
        .expect("send");
    assert_eq!(reply.status(), 200);
}

#[tokio::test]
async fn binary_bodies_round_trip_byte_exact() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("bin").await;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let reply = app
        .client
        .post(app.url(&format!("/webhook/{id}")))
        .header("Content-Type", "application/x-protobuf")
        .body(bytes.clone())
        .send()
        .await
        .expect("send");
    let receipt: serde_json::Value = reply.json().await.expect("receipt");
    let capture_id = receipt["request_id"].as_str().expect("id");
    let raw = app
        .client
        .get(app.url(&format!("/webhooks/{id}/requests/{capture_id}/body")))
        .header(header::API_KEY, &app.admin.key)
        .header(header::ORGANIZATION, app.admin.org.to_string())
        .send()
        .await
        .expect("send");
    assert_eq!(raw.headers()["content-type"], "application/x-protobuf");
    assert_eq!(raw.bytes().await.expect("bytes").to_vec(), bytes);
    let stored = app.api().webhooks().request(&id, capture_id).await.expect("the capture");
    assert_eq!(stored.body_encoding, BodyEncoding::Base64);
    let decoded =
        base64::engine::general_purpose::STANDARD.decode(stored.body.as_deref().expect("body")).expect("base64");
    assert_eq!(decoded, bytes);
    assert_eq!(stored.body_size, 3000);
}

#[tokio::test]
async fn methods_unknown_endpoints_and_not_allowed() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("methods").await;
    for method in [Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
        let reply = app.capture(method.clone(), &format!("{id}/deep/path"), "").await;
        assert_eq!(reply.status, 200, "{method}");
        assert!(reply.body["request_id"].is_string());
    }
    // HEAD and OPTIONS are captured too (#51): HEAD answered like GET without a body.
    for method in [Method::OPTIONS, Method::HEAD] {
        let reply = app.capture(method.clone(), &id, "").await;
        assert_eq!(reply.status, 200, "{method}");
    }
    let purge = app.capture(Method::from_bytes(b"PURGE").expect("method"), &id, "").await;
    assert_eq!((purge.status.as_u16(), purge.code()), (405, "method_not_allowed"));
    let unknown = app.capture(Method::POST, &uuid::Uuid::new_v4().to_string(), "x").await;
    assert_eq!((unknown.status.as_u16(), unknown.code()), (404, "not_found"));
    assert_eq!(app.capture(Method::POST, "not-a-uuid", "x").await.status, 404);
    assert_eq!(app.api().webhooks().get(&id).await.expect("get").request_count, 7);
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused_and_not_stored() {
    let app = TestApp::spawn().await;
    let id = app.create_webhook(json!({"name": "small", "max_body_bytes": 100})).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(app.capture(Method::POST, &id, vec![b'a'; 100]).await.status, 200);
    let over = app.capture(Method::POST, &id, vec![b'a'; 101]).await;
    assert_eq!((over.status.as_u16(), over.code()), (413, "payload_too_large"));
    // Without a Content-Length (chunked), the limit holds while reading.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(vec![b'b'; 60]), Ok(vec![b'b'; 60])];
    let streamed = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    let over = app.capture(Method::POST, &id, streamed).await;
    assert_eq!((over.status.as_u16(), over.code()), (413, "payload_too_large"));
    let count = app.rows("captures").await;
    assert_eq!(count, 1);
    let big = app.create_webhook(json!({"name": "big", "max_body_bytes": 10_485_760})).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let ten_mib = app.capture(Method::POST, &big, vec![b'z'; 10 * 1024 * 1024]).await;
    assert_eq!(ten_mib.status, 200, "10 MiB endpoints take 10 MiB");
}

#[tokio::test]
async fn the_rate_limit_answers_429_with_retry_after() {
    let app = TestApp::spawn().await;
    let two = UpdateOrganization { capture_rate_limit_per_s: Some(2), ..Default::default() };
    app.api().organization().update(&two).await.expect("update");
    let id = app.webhook_named("limited").await;
    let mut accepted = 0;
    let mut limited = None;
    for _ in 0..6 {
        let reply = app.capture(Method::POST, &id, "x").await;
        match reply.status.as_u16() {
            200 => accepted += 1,
            429 => limited = Some(reply),
            other => panic!("unexpected {other}"),
        }
    }
    let limited = limited.expect("some requests are limited");
    assert_eq!(limited.code(), "rate_limited");
    assert!(limited.headers["retry-after"].to_str().expect("ascii").parse::<u64>().expect("seconds") >= 1);
    let count = app.rows("captures").await;
    assert_eq!(count, accepted, "refused captures are not stored");
    assert!(accepted < 6);
}

#[tokio::test]
async fn a_custom_response_is_sent_verbatim_after_storing() {
    let app = TestApp::spawn().await;
    let id = app
        .create_webhook(json!({"name": "teapot", "response": {"status": 418, "headers": {"X-Reply": "yes"}, "body": "short and stout"}}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let reply = app.capture(Method::POST, &id, "brew").await;
    assert_eq!(reply.status, 418);
    assert_eq!(reply.headers["x-reply"], "yes");
    assert_eq!(reply.text, "short and stout");
    let stored = app.api().webhooks().requests(&id, &[]).await.expect("list");
    assert_eq!(stored.items[0].body.as_deref(), Some("brew"));
}

/// A custom answer's Content-Type that names no media type is not served (the answer would be malformed): the
/// default `text/plain` stays. Found by schemathesis with `{"Content-Type": ""}`.
#[tokio::test]
async fn a_custom_content_type_that_is_no_media_type_is_not_served() {
    let app = TestApp::spawn().await;
    for (given, served) in [
        ("", "text/plain; charset=utf-8"),
        ("json", "text/plain; charset=utf-8"),
        ("application/json; charset=utf-8", "application/json; charset=utf-8"),
    ] {
        let response = json!({"status": 200, "headers": {"Content-Type": given}, "body": ""});
        let id = app.create_webhook(json!({"name": "typed", "response": response})).await["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let reply = app.capture(Method::DELETE, &id, "").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.headers["content-type"], served, "given {given:?}");
    }
}

#[tokio::test]
async fn captures_answer_503_when_the_database_is_down() {
    let options = hookflow_control_plane::db::parse_url("postgres://hookflow@127.0.0.1:1/hookflow").expect("url");
    let app = TestApp::spawn_on(hookflow_control_plane::db::pool(options, 2)).await;
    let reply = app.capture(Method::POST, &uuid::Uuid::new_v4().to_string(), "x").await;
    assert_eq!((reply.status.as_u16(), reply.code()), (503, "unavailable"));
    assert!(reply.headers.contains_key("retry-after"));
}

#[tokio::test]
async fn concurrent_captures_are_all_stored_and_counted() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("busy").await;
    let sends = (0..200)
        .map(|i| app.client.post(app.url(&format!("/webhook/{id}?n={i}"))).body(format!("{{\"n\":{i}}}")).send());
    for reply in join_all(sends).await {
        assert_eq!(reply.expect("send").status(), 200);
    }
    assert_eq!(app.api().webhooks().get(&id).await.expect("get").request_count, 200);
    let ids: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT id) FROM captures").fetch_one(&app.pool).await.expect("count");
    assert_eq!(ids, 200);
}

#[tokio::test]
async fn a_head_as_large_as_the_recorder_keeps_is_recorded_whole_or_in_pieces() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("large head").await;
    // 60 headers of 1,000 bytes: about 60 KB, under the 64 KiB the recorder keeps of one head.
    let headers: Vec<(String, String)> = (0..60).map(|i| (format!("X-Big-{i}"), "v".repeat(990))).collect();
    let lines: String = headers.iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
    let request =
        format!("POST /webhook/{id} HTTP/1.1\r\nHost: h\r\n{lines}Content-Length: 2\r\nConnection: close\r\n\r\nok");
    for piece in [request.len(), 700] {
        let mut stream = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://")).await.expect("connect");
        for chunk in request.as_bytes().chunks(piece) {
            tokio::io::AsyncWriteExt::write_all(&mut stream, chunk).await.expect("write");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let mut answer = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut answer).await.expect("read");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let receipt: serde_json::Value =
            serde_json::from_str(answer.split("\r\n\r\n").nth(1).expect("body")).expect("json");
        let path = format!("/webhooks/{id}/requests/{}", receipt["request_id"].as_str().expect("id"));
        let stored = app.admin(Method::GET, &path, None).await.body;
        let kept: Vec<(String, String)> = serde_json::from_value(stored["headers"].clone()).expect("headers");
        assert_eq!(kept.len(), 63, "pieces of {piece}");
        assert_eq!(kept[1..61], headers[..], "in order with their case, pieces of {piece}");
    }
}
