//! Server limits, each sent as the attack it stops over the real listener: trickled headers are cut off, job
//! tokens are checked before a body is read, unknown capture ids cannot flood the database nor evict known
//! endpoints, keys are rate limited, the capture-rate ceiling holds, live streams are counted per key, searches
//! are capped, exports stream big bodies whole, and a statement stuck behind a lock answers 503.

use hookflow_control_plane::db;
use hookflow_shared::api::admin::UpdateOrganization;
use hookflow_shared::api::webhooks::{FieldMatch, MatchOp, SearchFilter, SearchRequests};
use hookflow_tests::Credentials;
use hookflow_tests::{Creds, TestApp};
use reqwest::Method;
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.base.trim_start_matches("http://")).await.expect("connect")
}

#[tokio::test]
async fn a_trickled_header_is_cut_off() {
    let app = TestApp::spawn_with(|s| s.limits.header_timeout = Duration::from_secs(1)).await;
    let stream = connect(&app).await;
    let (mut reader, mut writer) = stream.into_split();
    let closed = tokio::spawn(async move {
        let mut answer = Vec::new();
        let _ = reader.read_to_end(&mut answer).await;
        answer
    });
    writer.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.expect("write");
    // One byte every 300 ms: the headers would take 9 s to finish; the server stops waiting after 1 s.
    let mut sent = 0;
    while sent < 30 && !closed.is_finished() {
        if writer.write_all(b"a").await.is_err() {
            break;
        }
        sent += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(sent < 30, "the connection was still open after the whole trickle");
    let answer = tokio::time::timeout(Duration::from_secs(5), closed).await.expect("closed").expect("reader");
    assert!(!String::from_utf8_lossy(&answer).contains("200 OK"), "the request was never served");
}

#[tokio::test]
async fn job_tokens_are_checked_before_the_body_is_read() {
    let app = TestApp::spawn().await;
    for route in ["nodes", "complete"] {
        let mut stream = connect(&app).await;
        let head = format!(
            "POST /runner/jobs/{}/{route} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hfj_bogus\r\n\
             Content-Type: application/json\r\nContent-Length: 16777216\r\n\r\n",
            uuid::Uuid::now_v7()
        );
        stream.write_all(head.as_bytes()).await.expect("write the head only");
        // The 16 MiB body is never sent: the answer must come from the token alone.
        let mut answer = vec![0u8; 4096];
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer))
            .await
            .expect("answered without the body")
            .expect("read");
        let answer = String::from_utf8_lossy(&answer[..read]);
        assert!(answer.starts_with("HTTP/1.1 401"), "{route}: {answer}");
    }
}

#[tokio::test]
async fn unknown_capture_ids_are_limited_per_address_and_known_endpoints_are_not() {
    let app = TestApp::spawn().await;
    let known = app.webhook_named("known").await;
    let cold = app.webhook_named("cold").await;
    assert_eq!(app.capture(Method::POST, &known, "warm").await.status, 200);
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for _ in 0..400 {
        let reply = app.capture(Method::POST, &uuid::Uuid::new_v4().to_string(), "x").await;
        *statuses.entry(reply.status.as_u16()).or_default() += 1;
        if reply.status == 429 {
            assert!(reply.headers.contains_key("retry-after"));
        }
    }
    assert!(statuses.get(&429).copied().unwrap_or(0) > 0, "a flood of unknown ids is throttled: {statuses:?}");
    assert!(statuses.get(&404).copied().unwrap_or(0) >= 250, "within the allowance they are plain 404: {statuses:?}");
    // The flood neither evicted nor slowed the endpoint memory knows, even from the flooding address.
    for _ in 0..20 {
        assert_eq!(app.capture(Method::POST, &known, "y").await.status, 200);
    }
    // Another address still has its own allowance for endpoints memory has not seen yet.
    let other = reqwest::Client::builder().local_address("127.0.0.2".parse::<std::net::IpAddr>().ok()).build();
    let base = app.base.clone();
    let reply = other.expect("client").post(format!("{base}/webhook/{cold}")).body("z").send().await.expect("send");
    assert_eq!(reply.status(), 200);
    assert_eq!(app.rows(&format!("captures WHERE webhook_id IN ('{known}', '{cold}')")).await, 22);
}

#[tokio::test]
async fn each_key_is_rate_limited_on_its_own() {
    let app = TestApp::spawn_with(|s| s.key_rate_per_s = 5).await;
    let other = app.new_org("Other").await;
    let mut limited = 0;
    let api = app.api();
    for _ in 0..40 {
        if let Err(refused) = api.keys().permissions().await {
            assert_eq!((refused.status(), refused.code()), (429, "rate_limited"), "{refused}");
            assert!(refused.as_refused().is_some_and(|r| r.headers.contains_key("retry-after")));
            limited += 1;
        }
    }
    assert!(limited >= 20, "past the burst of 10, a key is throttled: {limited} of 40");
    app.api_as(&other).keys().permissions().await.expect("another key keeps its own allowance");
}

#[tokio::test]
async fn organizations_cannot_raise_their_capture_rate_past_the_operators_ceiling() {
    let app = TestApp::spawn_with(|s| s.max_capture_rate_per_s = 100).await;
    let api = app.api();
    let rate = |per_s| UpdateOrganization { capture_rate_limit_per_s: Some(per_s), ..Default::default() };
    let reply = api.organization().update(&rate(101)).await.expect_err("past the ceiling");
    assert_eq!(reply.status(), 400, "{reply}");
    assert!(reply.message().contains("between 1 and 100"), "{reply}");
    assert_eq!(api.organization().update(&rate(100)).await.expect("at the ceiling").capture_rate_limit_per_s, 100);
    let document: serde_json::Value = app.api_with(Credentials::None).get("/openapi.json").await.expect("the document");
    let rate = &document["components"]["schemas"]["UpdateOrganization"]["properties"]["capture_rate_limit_per_s"];
    assert_eq!(rate["maximum"], 100, "the document states this server's ceiling");
}

async fn open_stream(app: &TestApp, creds: &Creds, path: &str) -> reqwest::Response {
    app.client
        .get(app.url(path))
        .header("x-api-key", &creds.key)
        .header("x-organization-id", creds.org.to_string())
        .send()
        .await
        .expect("request")
}

#[tokio::test]
async fn live_streams_are_counted_per_key() {
    let app = TestApp::spawn_with(|s| s.streams_per_key = 2).await;
    let hook = app.create_webhook(json!({"name": "streamed"})).await;
    let path = format!("/webhooks/{}/stream", hook["id"].as_str().expect("id"));
    let first = open_stream(&app, &app.admin, &path).await;
    let second = open_stream(&app, &app.admin, &path).await;
    assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 200));
    let third = open_stream(&app, &app.admin, &path).await;
    assert_eq!(third.status(), 429);
    assert!(third.headers().contains_key("retry-after"));
    let other = app.creds_with(&["webhooks:read"]).await;
    assert_eq!(open_stream(&app, &other, &path).await.status(), 200, "another key has its own slots");
    drop(first);
    // The closed stream's slot comes back once the server notices the disconnect.
    let mut reopened = None;
    for _ in 0..50 {
        let response = open_stream(&app, &app.admin, &path).await;
        if response.status() == 200 {
            reopened = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reopened.is_some(), "a closed stream frees its slot");
}

#[tokio::test]
async fn searches_are_capped_at_32_conditions() {
    let app = TestApp::spawn().await;
    let hook = app.create_webhook(json!({"name": "searched"})).await;
    let id = hook["id"].as_str().expect("id");
    let hooks = app.api();
    let hooks = hooks.webhooks();
    let conditions = |n: usize| -> Vec<FieldMatch> {
        (0..n).map(|i| FieldMatch { name: format!("x-h{i}"), op: MatchOp::Exists, value: None }).collect()
    };
    let search = |q: Option<String>, n| SearchRequests {
        q,
        filter: SearchFilter { headers: conditions(n), ..Default::default() },
        ..Default::default()
    };
    hooks.search(id, &search(None, 32)).await.expect("32 conditions");
    let reply = hooks.search(id, &search(None, 33)).await.expect_err("33 conditions");
    assert_eq!(reply.status(), 400, "{reply}");
    assert!(reply.message().contains("at most 32"), "{reply}");
    // `q` terms count too.
    let terms: Vec<String> = (0..20).map(|i| format!("header.x-q{i}:v")).collect();
    assert_eq!(hooks.search(id, &search(Some(terms.join(" ")), 20)).await.expect_err("40 conditions").status(), 400);
}

#[tokio::test]
async fn exports_stream_large_bodies_whole() {
    let app = TestApp::spawn().await;
    let hook = app.create_webhook(json!({"name": "big", "max_body_bytes": 2 * 1024 * 1024})).await;
    let id = hook["id"].as_str().expect("id").to_owned();
    // 24 bodies of 1 MiB: more than a page's 8 MiB, so the export spans pages.
    for i in 0..24u8 {
        let body = vec![b'a' + i % 26; 1024 * 1024];
        assert_eq!(app.capture(Method::POST, &id, body).await.status, 200);
    }
    let reply = app.api().webhooks().export(&id, &[("format", "ndjson")]).await.expect("export");
    let text = reply.text().await.expect("the export");
    let lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    assert_eq!(lines.len(), 24);
    assert!(lines.iter().all(|l| l["body_size"] == 1024 * 1024), "every body exported whole");
}

#[tokio::test]
async fn a_statement_stuck_behind_a_lock_answers_503() {
    let options = hookflow_tests::cluster::fresh_database().await;
    let pool = db::pool_with_timeout(options.clone(), 10, Duration::from_millis(500));
    let mut app = TestApp::spawn_on(pool).await;
    app.admin = app.new_org("Acme").await;
    let api = app.api();
    api.webhooks().list(&[]).await.expect("list");
    // Another session holds the table: without a statement timeout the request would wait for it forever.
    let holder = db::pool(options, 1);
    let mut lock = holder.begin().await.expect("begin");
    sqlx::query("LOCK TABLE webhooks IN ACCESS EXCLUSIVE MODE").execute(&mut *lock).await.expect("lock");
    let reply = api.webhooks().list(&[]).await.expect_err("stuck behind the lock");
    assert_eq!((reply.status(), reply.code()), (503, "unavailable"), "{reply}");
    assert!(reply.as_refused().is_some_and(|r| r.headers.contains_key("retry-after")));
    lock.rollback().await.expect("release");
    api.webhooks().list(&[]).await.expect("list once the lock is gone");
}

/// A sender that stops in the middle of the HTTP/2 preface is closed once a head's time has passed (the server
/// used to peek at it every 5 ms for as long as it stayed).
#[tokio::test]
async fn a_stalled_http2_preface_is_cut_off() {
    let app = TestApp::spawn_with(|s| s.limits.header_timeout = Duration::from_secs(1)).await;
    let mut stream = connect(&app).await;
    stream.write_all(b"PRI * HTTP/2.0\r\n").await.expect("write");
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(closed.is_ok(), "the connection was still open 5 s after it stalled");
    assert!(answer.is_empty(), "nothing was served: {answer:?}");
}

#[tokio::test]
async fn idle_connections_are_closed_and_slow_bodies_cut_off() {
    let app = TestApp::spawn_with(|s| {
        s.limits.connections.idle_timeout = Duration::from_secs(1);
        s.limits.body_timeout = Duration::from_secs(1);
    })
    .await;
    // A kept-alive connection with nothing in flight is closed once idle.
    let mut stream = connect(&app).await;
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    let mut answer = vec![0u8; 1024];
    let read = stream.read(&mut answer).await.expect("read");
    assert!(String::from_utf8_lossy(&answer[..read]).starts_with("HTTP/1.1 200"));
    let closed = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "the idle connection was closed: {closed:?}");

    // A capture body announced at 100 bytes, of which 10 arrive: refused when its deadline passes, not stored.
    let hook = app.create_webhook(json!({"name": "slow body"})).await;
    let id = hook["id"].as_str().expect("id");
    let mut stream = connect(&app).await;
    let head = format!("POST /webhook/{id} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789");
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await.expect("cut off");
    let answer = String::from_utf8_lossy(&answer);
    assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(app.rows(&format!("captures WHERE webhook_id = '{id}'")).await, 0);
}

/// Finding 4 of Hardening III: the raw method was a metrics label and a log field, so 200 requests with unique
/// 100 KB methods made `/metrics` 320 MB. Unknown methods are answered 405 before routing, and labels are closed
/// sets: the methods HTTP defines, or `other`.
#[tokio::test]
async fn unknown_methods_never_become_labels() {
    let app = TestApp::spawn().await;
    let handle = hookflow_control_plane::metrics::install();
    let webhook = app.create_webhook(serde_json::json!({"name": "methods"})).await;
    let id = webhook["id"].as_str().expect("id");
    for i in 0..50 {
        let method = format!("M{i}{}", "X".repeat(20_000));
        let request = format!("{method} /webhook/{id} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
        let answer = app.raw_http(request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 405"), "{}", &answer[..answer.len().min(200)]);
        assert!(answer.contains("method_not_allowed"), "the error body: {}", &answer[..answer.len().min(400)]);
    }
    let text = handle.render();
    assert!(!text.contains("XXXXXXXX"), "a method became a label");
    assert!(text.contains("method=\"other\""), "unknown methods are counted as `other`");
    assert!(text.len() < 2_000_000, "metrics grew to {} bytes", text.len());
    let stored = app.get::<serde_json::Value>(&format!("/webhooks/{id}/requests"), 200).await;
    assert_eq!(stored["items"], serde_json::json!([]), "nothing was captured");
}

#[tokio::test]
async fn the_largest_head_the_server_allows_is_read_whole() {
    let app = TestApp::spawn().await;
    // 90 headers of 4,000 bytes (360 KB) over a connection's first request: hyper's read buffer starts at 8 KiB
    // and grows to its 408 KiB ceiling; the header count stays under its 100.
    let lines: String = (0..90).map(|i| format!("X-Big-{i}: {}\r\n", "v".repeat(3990))).collect();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: h\r\n{lines}Connection: close\r\n\r\n");
    let answer = app.raw_http(request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{}", &answer[..answer.len().min(300)]);
}

#[tokio::test]
async fn http2_and_http1_share_the_listener() {
    let app = TestApp::spawn().await;
    let http2 = reqwest::Client::builder().http2_prior_knowledge().build().expect("client");
    let id = app.webhook_named("h2").await;
    for _ in 0..3 {
        let answer = http2.get(format!("{}/healthz", app.base)).send().await.expect("h2 healthz");
        assert_eq!((answer.version(), answer.status().as_u16()), (reqwest::Version::HTTP_2, 200));
    }
    let answer = http2.post(format!("{}/webhook/{id}", app.base)).body("over h2").send().await.expect("h2 capture");
    assert_eq!((answer.version(), answer.status().as_u16()), (reqwest::Version::HTTP_2, 200));
    // Stored as sent: no request id the sender did not send, and a sender's own kept whole, even one too long to
    // be this request's id in logs.
    let long = "r".repeat(300);
    let answer = http2.post(format!("{}/webhook/{id}", app.base)).header("x-request-id", &long).send().await;
    assert_eq!(answer.expect("h2 capture").status(), 200);
    let list = app.admin(Method::GET, &format!("/webhooks/{id}/requests"), None).await;
    let items = list.body["items"].as_array().expect("items");
    let ids = |item: &serde_json::Value| -> Vec<String> {
        let headers: Vec<(String, String)> = serde_json::from_value(item["headers"].clone()).expect("headers");
        headers.into_iter().filter(|(name, _)| name.eq_ignore_ascii_case("x-request-id")).map(|(_, v)| v).collect()
    };
    assert_eq!((items.len(), ids(&items[0]), ids(&items[1])), (2, vec![long], vec![]));
    let answer = reqwest::get(format!("{}/healthz", app.base)).await.expect("h1 healthz");
    assert_eq!((answer.version(), answer.status().as_u16()), (reqwest::Version::HTTP_11, 200));
    // A connection that sends only part of the HTTP/2 preface, then the rest, is still served as HTTP/2.
    let mut stream = connect(&app).await;
    stream.write_all(b"PRI * HTTP/2.0\r\n").await.expect("write");
    tokio::time::sleep(Duration::from_millis(50)).await;
    stream.write_all(b"\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.expect("write");
    let mut frame = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut frame)).await.expect("in time").expect("read");
    assert_eq!(frame[3], 4, "the server's first frame is its SETTINGS");
}
