//! What the server logs of each request it answers: one `answered` line, inside the request's span (method label
//! and request id, the sender's own or a new one that the error body repeats), with the matched route template
//! and the status; an unknown method is labelled `other`, an API key sent with a request never appears, and a
//! request id too long to repeat is replaced.

use hookflow_tests::server::{command, field, line_with};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// The `answered` lines naming `request_id`, once at least one has been written.
async fn answered(lines: &Mutex<Vec<String>>, request_id: &str) -> Vec<String> {
    let needle = format!("request_id=\"{request_id}\"");
    let matching = || -> Vec<String> {
        let lines = lines.lock().expect("lines");
        lines.iter().filter(|l| l.contains(&needle) && l.contains("answered")).cloned().collect()
    };
    for _ in 0..200 {
        if !matching().is_empty() {
            // A second line for the same request would come right after the first.
            tokio::time::sleep(Duration::from_millis(100)).await;
            return matching();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no answered line for {request_id}");
}

#[tokio::test]
async fn each_answer_is_one_line_in_its_requests_span_without_credentials() {
    let database_url = hookflow_tests::cluster::fresh_database_url().await;
    let data = std::env::temp_dir().join(format!("hookflow-lines-{}", uuid::Uuid::new_v4()));
    let mut child = command(crate::SERVER, &database_url, &data)
        .args(["--embedded-runner", "off", "--log", "info", "--metrics-listen", "off"])
        .spawn()
        .expect("spawn hookflow-server");
    let mut err = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let api = field(&line_with(&mut err, "hookflow-server listening").await, "address=");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = lines.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = err.next_line().await {
            kept.lock().expect("lines").push(line);
        }
    });
    let client = reqwest::Client::new();
    let secret = "hf_never-in-a-log-line-5d1c";

    let refused = client
        .get(format!("http://{api}/webhooks"))
        .header("x-request-id", "lines-401")
        .header("x-api-key", secret)
        .header("authorization", format!("Bearer {secret}"))
        .send()
        .await
        .expect("send");
    assert_eq!(refused.status(), 401);
    let found = answered(&lines, "lines-401").await;
    assert_eq!(found.len(), 1, "one line per answer: {found:?}");
    assert!(found[0].contains("method=\"GET\""), "{}", found[0]);
    assert!(found[0].contains("route=\"/webhooks\" status=401"), "{}", found[0]);

    let unknown = client
        .request(reqwest::Method::from_bytes(b"BREW").expect("method"), format!("http://{api}/webhooks"))
        .header("x-request-id", "lines-405")
        .send()
        .await
        .expect("send");
    assert_eq!(unknown.status(), 405);
    let found = answered(&lines, "lines-405").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("method=\"other\"") && found[0].contains("status=405"), "{}", found[0]);
    assert!(!found[0].contains("BREW"), "a method HTTP does not define is never logged: {}", found[0]);

    let missing = client.get(format!("http://{api}/no-such-route")).send().await.expect("send");
    assert_eq!(missing.status(), 404);
    let generated = missing.headers()["x-request-id"].to_str().expect("ascii").to_owned();
    let body: serde_json::Value = missing.json().await.expect("error body");
    assert_eq!(body["error"]["request_id"], generated.as_str(), "the error body repeats the generated id");
    let found = answered(&lines, &generated).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("route=\"unmatched\" status=404"), "{}", found[0]);
    assert!(!found[0].contains("no-such-route"), "paths a stranger sends stay out of logs: {}", found[0]);

    // An id too long (or not plain) to repeat in every line is replaced, and the answer says by what.
    let flood = "a".repeat(300);
    let replaced =
        client.get(format!("http://{api}/healthz")).header("x-request-id", &flood).send().await.expect("send");
    let given = replaced.headers()["x-request-id"].to_str().expect("ascii").to_owned();
    assert!(uuid::Uuid::parse_str(&given).is_ok(), "a new id in place of the flood: {given}");
    assert_eq!(answered(&lines, &given).await.len(), 1);

    let all = lines.lock().expect("lines").join("\n");
    assert!(!all.contains(&flood), "an over-long request id reached the log");
    assert!(!all.contains(secret), "a credential reached the log:\n{all}");
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&data);
}
