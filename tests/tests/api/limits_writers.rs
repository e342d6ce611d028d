//! The capture writer's byte budget against a real server process (finding 5 of Hardening III): about 150 bodies
//! of 10 MiB at once to one organization's endpoint built a statement over 1 GiB that PostgreSQL refused, with
//! another organization's small captures of the same batch answered 503, and the server's memory reached 4.8 GB.

use futures_util::future::join_all;
use hookflow_tests::server::ServerProcess;
use std::time::Duration;

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");
const LARGE: usize = 10 * 1024 * 1024;

async fn endpoint(server: &ServerProcess, org: &str, key: &str, max_body_bytes: usize) -> String {
    let body = serde_json::json!({"name": "budget", "max_body_bytes": max_body_bytes});
    let created = server.post_as(org, key, "/webhooks", &body).await;
    created["capture_url"].as_str().expect("capture_url").to_owned()
}

#[tokio::test]
async fn large_captures_of_one_tenant_never_cost_another_tenants_small_ones() {
    let server = ServerProcess::spawn(SERVER, &[]).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().expect("client");
    let large_url = endpoint(&server, &server.org, &server.key, LARGE).await;
    let (other_org, other_key) = server.organization(SERVER, "Neighbour").await;
    let small_url = endpoint(&server, &other_org, &other_key, 1024 * 1024).await;
    // Both endpoints are known to the server (and its pool warm) before the flood, as they are in service.
    for url in [&large_url, &small_url] {
        let warm = client.post(url).body("warm").send().await.expect("warm-up capture");
        assert_eq!(warm.status(), 200);
    }
    let before = server.peak_rss();

    let body = bytes::Bytes::from(vec![b'x'; LARGE]);
    let large = join_all((0..150).map(|_| client.post(&large_url).body(body.clone()).send()));
    let small = async {
        let mut answers = Vec::new();
        for round in 0..20 {
            let batch = (0..10).map(|i| client.post(&small_url).body(format!("small {round} {i}")).send());
            answers.extend(join_all(batch).await);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        answers
    };
    let (large, small) = tokio::join!(large, small);

    for answer in &small {
        match answer {
            Ok(reply) => assert_eq!(reply.status(), 200, "every small capture is stored: {:?}", reply.headers()),
            Err(error) => panic!("a small capture failed: {error:?}"),
        }
    }
    let (mut stored, mut refused) = (0, 0);
    for answer in &large {
        let answer = answer.as_ref().unwrap_or_else(|e| panic!("a large capture was not answered: {e:?}"));
        match answer.status().as_u16() {
            200 => stored += 1,
            503 => {
                assert_eq!(answer.headers()["retry-after"], "1", "a refused sender is told when to retry");
                refused += 1;
            }
            other => panic!("a large capture answered {other}"),
        }
    }
    let growth = server.peak_rss().saturating_sub(before);
    println!("150 x 10 MiB: {stored} stored, {refused} answered 503; 200 small stored; peak RSS +{} MiB", growth >> 20);
    assert!(stored > 0, "large captures within the budget are stored");
    // Bodies waiting are held to 160 MiB and a statement to 16 MiB; before the budget this grew by gigabytes.
    assert!(growth < 1024 * 1024 * 1024, "peak RSS grew by {} MiB", growth >> 20);

    // Each endpoint's count of stored captures: all 200 small ones, and exactly the large ones answered 200.
    let stored_count = |url: &str, org: &str, key: &str| {
        let request = client
            .get(url.replace("/webhook/", "/webhooks/"))
            .header("x-api-key", key)
            .header("x-organization-id", org);
        async move {
            let webhook: serde_json::Value = request.send().await.expect("get").json().await.expect("webhook");
            webhook["request_count"].as_i64().expect("request_count")
        }
    };
    assert_eq!(stored_count(&small_url, &other_org, &other_key).await, 201);
    assert_eq!(stored_count(&large_url, &server.org, &server.key).await, stored + 1);
    server.stop().await;
}
