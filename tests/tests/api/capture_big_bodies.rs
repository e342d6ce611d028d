//! Bodies up to 32 MiB (issue #51): a 25 MiB body to an endpoint allowing 32 MiB is stored byte for byte while
//! another organization's small captures keep being answered, and the server process's peak memory grows by less
//! than the capture path's waiting budget (160 MiB) meanwhile.

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
