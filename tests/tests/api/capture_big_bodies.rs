//! Bodies up to 32 MiB (issue #51): a 25 MiB body to an endpoint allowing 32 MiB is stored byte for byte while
//! another organization's small captures keep being answered, and the server process's peak memory grows by less
//! than the capture path's waiting budget (160 MiB) meanwhile: a body over 1 MiB is held once, in the buffer it was
//! read into, and written to storage in parts (`capture::staged`), none left once it is stored.

use futures_util::future::join_all;
use hookflow_tests::server::ServerProcess;
use sha2::{Digest, Sha256};
use std::time::Duration;

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");
const BIG: usize = 25 * 1024 * 1024;
const LIMIT: usize = 32 * 1024 * 1024;

#[tokio::test]
async fn a_25_mib_body_is_stored_whole_while_another_tenant_keeps_capturing() {
    let server = ServerProcess::spawn(SERVER, &[]).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(300)).build().expect("client");
    let created = server
        .post_as(&server.org, &server.key, "/webhooks", &serde_json::json!({"name": "big", "max_body_bytes": LIMIT}))
        .await;
    assert_eq!(created["max_body_bytes"], LIMIT, "{created}");
    let big_url = created["capture_url"].as_str().expect("capture_url").to_owned();
    let (other_org, other_key) = server.organization(SERVER, "Neighbour").await;
    let small = server.post_as(&other_org, &other_key, "/webhooks", &serde_json::json!({"name": "small"})).await;
    let small_url = small["capture_url"].as_str().expect("capture_url").to_owned();
    for url in [&big_url, &small_url] {
        assert_eq!(client.post(url).body("warm").send().await.expect("warm").status(), 200);
    }
    let before = server.peak_rss();

    // Not one repeated byte: a body a compressing layer could not shrink, so a copy costs its full size.
    let mut body = Vec::with_capacity(BIG);
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    while body.len() < BIG {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        body.extend_from_slice(&state.to_le_bytes());
    }
    body.truncate(BIG);
    let expected = hex::encode(Sha256::digest(&body));
    let big = client.post(&big_url).header("content-type", "application/octet-stream").body(body).send();
    let small = async {
        let mut answers = Vec::new();
        for round in 0..10 {
            let batch = (0..10).map(|i| client.post(&small_url).body(format!("small {round} {i}")).send());
            answers.extend(join_all(batch).await);
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        answers
    };
    let started = std::time::Instant::now();
    let (big, small) = tokio::join!(big, small);
    let elapsed = started.elapsed();
    let big = big.expect("the big capture is answered");
    assert_eq!(big.status(), 200, "{:?}", big.text().await);
    let receipt: serde_json::Value = big.json().await.expect("receipt");
    for answer in small {
        let answer = answer.expect("a small capture is answered");
        assert_eq!(answer.status(), 200);
    }
    let growth = server.peak_rss().saturating_sub(before);
    println!("25 MiB capture stored in {elapsed:?} beside 100 small ones; peak RSS +{} MiB", growth >> 20);
    assert!(growth < 160 * 1024 * 1024, "peak RSS grew by {} MiB", growth >> 20);
    // Held once: the body bound whole into the writer's statement (its arguments, then the connection's write
    // buffer) grew the peak by 92 MiB; in parts, by 18 MiB (both measured on the development machine).
    assert!(growth < 2 * BIG as u64, "peak RSS grew by {} MiB: the body is held more than once", growth >> 20);

    // Read back: the stored SHA-256, and the bytes themselves.
    let id = receipt["request_id"].as_str().expect("request_id");
    let capture_path = big_url.replace("/webhook/", "/webhooks/") + "/requests/" + id;
    let read = |path: String| {
        client.get(path).header("x-api-key", &server.key).header("x-organization-id", &server.org).send()
    };
    let capture: serde_json::Value = read(capture_path.clone()).await.expect("read").json().await.expect("json");
    assert_eq!(capture["body_size"], BIG);
    assert_eq!(capture["body_sha256"], expected);
    let bytes = read(capture_path + "/body").await.expect("body").bytes().await.expect("bytes");
    assert_eq!(hex::encode(Sha256::digest(&bytes)), expected, "stored byte for byte");
    // The body went to storage in parts, assembled by the statement that stored the capture, which removed them.
    let pool = sqlx::PgPool::connect(&server.database_url).await.expect("connect");
    let parts: i64 =
        sqlx::query_scalar("SELECT count(*) FROM capture_body_parts").fetch_one(&pool).await.expect("parts");
    assert_eq!(parts, 0, "no part is left once the capture is stored");
    let sizes: (i64, i64) =
        sqlx::query_as("SELECT count(*), COALESCE(max(body_size), 0)::int8 FROM captures WHERE body_size > 1048576")
            .fetch_one(&pool)
            .await
            .expect("sizes");
    assert_eq!(sizes, (1, BIG as i64), "one big capture, whole");
    pool.close().await;

    // The small endpoint holds all its 101 captures (413 past the limit is `max_body_bytes_takes_up_to_32_mib`'s).
    let small_read = small_url.replace("/webhook/", "/webhooks/");
    let small: serde_json::Value = client
        .get(small_read)
        .header("x-api-key", &other_key)
        .header("x-organization-id", &other_org)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(small["request_count"], 101);
    server.stop().await;
}

#[tokio::test]
async fn max_body_bytes_takes_up_to_32_mib() {
    let app = hookflow_tests::TestApp::spawn().await;
    let ok = app
        .admin(reqwest::Method::POST, "/webhooks", Some(serde_json::json!({"name": "a", "max_body_bytes": LIMIT})))
        .await;
    assert_eq!((ok.status.as_u16(), ok.body["max_body_bytes"].as_u64()), (201, Some(LIMIT as u64)), "{}", ok.text);
    let over = app
        .admin(reqwest::Method::POST, "/webhooks", Some(serde_json::json!({"name": "b", "max_body_bytes": LIMIT + 1})))
        .await;
    over.assert_refused(400, "invalid_request", "max_body_bytes");
    let id = ok.body["id"].as_str().unwrap();
    let over = app
        .admin(
            reqwest::Method::PATCH,
            &format!("/webhooks/{id}"),
            Some(serde_json::json!({"max_body_bytes": LIMIT + 1})),
        )
        .await;
    over.assert_refused(400, "invalid_request", "max_body_bytes");
    // A declared length past 32 MiB is answered 413 before the body is read.
    let head = format!(
        "POST /webhook/{id} HTTP/1.1\r\nHost: hooks.test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        LIMIT + 1
    );
    let answer = app.raw_http(head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let default = app.admin(reqwest::Method::POST, "/webhooks", Some(serde_json::json!({"name": "c"}))).await;
    assert_eq!(default.body["max_body_bytes"], 1024 * 1024, "the default stays 1 MiB");
}

#[tokio::test]
async fn bodies_around_the_parts_threshold_are_stored_whole_and_still_answered_from() {
    let app = hookflow_tests::TestApp::spawn().await;
    // A rule reads the body: a staged body is still the one the answer is rendered from.
    let rules = serde_json::json!([{"status": 200, "headers": {"Content-Type": "text/plain"},
        "body": "{{request.body.$.tail}}"}]);
    let hook =
        app.create_webhook(serde_json::json!({"name": "parts", "max_body_bytes": 8 << 20, "rules": rules})).await;
    let id = hook["id"].as_str().expect("id").to_owned();
    // Just under, at, and over the threshold; over by a part and a few bytes (a short last part).
    for size in [(1 << 20) - 1, 1 << 20, (1 << 20) + 1, (3 << 20) + 123] {
        let filler = "x".repeat(size - r#"{"pad":"","tail":"end-0000000000"}"#.len());
        let body = format!(r#"{{"pad":"{filler}","tail":"end-{size:010}"}}"#);
        assert_eq!(body.len(), size);
        let reply = app.capture(reqwest::Method::POST, &id, body.clone()).await;
        assert_eq!((reply.status.as_u16(), reply.text.as_str()), (200, format!("end-{size:010}").as_str()));
        let stored: (Vec<u8>, i32) = sqlx::query_as(
            "SELECT body_sha256, body_size FROM captures WHERE webhook_id = $1::uuid ORDER BY id DESC LIMIT 1",
        )
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .expect("stored");
        assert_eq!((stored.0, stored.1 as usize), (Sha256::digest(body.as_bytes()).to_vec(), size), "{size} bytes");
        let whole: bool = sqlx::query_scalar(
            "SELECT sha256(body) = body_sha256 FROM captures WHERE webhook_id = $1::uuid ORDER BY id DESC LIMIT 1",
        )
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .expect("whole");
        assert!(whole, "{size} bytes: the stored body is the one sent");
    }
    assert_eq!(app.rows("capture_body_parts").await, 0, "no part is left");
}
