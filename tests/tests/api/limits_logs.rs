//! A log reader that stops reading (a full pipe, a stalled collector) never stalls the server: its standard error
//! is a pipe nobody reads while every request is logged (refused ones at `info`, with `trace` on), and requests keep being answered; the lines it
//! had to drop are counted in `hookflow_log_lines_dropped_total`.

use hookflow_tests::server::{command, field, line_with};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, BufReader};

#[tokio::test]
async fn a_stalled_log_reader_costs_log_lines_not_requests() {
    let database_url = hookflow_tests::cluster::fresh_database_url().await;
    let data = std::env::temp_dir().join(format!("hookflow-logs-{}", uuid::Uuid::new_v4()));
    let mut child = command(crate::SERVER, &database_url, &data)
        .args(["--embedded-runner", "off", "--log", "trace", "--metrics-listen", "127.0.0.1:0"])
        .spawn()
        .expect("spawn hookflow-server");
    let mut err = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let metrics = field(&line_with(&mut err, "metrics listening").await, "address=");
    let api = field(&line_with(&mut err, "hookflow-server listening").await, "address=");
    // From here on nobody reads the server's standard error: the pipe fills within a few requests.

    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
    let mut answered = 0;
    for round in 0..100 {
        let mut requests = tokio::task::JoinSet::new();
        for _ in 0..200 {
            let (client, url) = (client.clone(), format!("http://{api}/webhooks"));
            requests.spawn(async move { client.get(url).send().await.map(|r| r.status().as_u16()) });
        }
        while let Some(done) = requests.join_next().await {
            let status = done.expect("task").unwrap_or_else(|e| panic!("round {round}: a request stalled: {e}"));
            assert_eq!(status, 401, "an unauthenticated request is refused, and logged");
            answered += 1;
        }
    }
    let text =
        client.get(format!("http://{metrics}/metrics")).send().await.expect("scrape").text().await.expect("text");
    let dropped: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("hookflow_log_lines_dropped_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no dropped-lines counter in {text}"));
    assert!(dropped > 0, "{answered} requests logged at trace into a full pipe, yet nothing was dropped");
    drop(err);
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&data);
}
