//! 20,000 idle connections from 127.0.0.2 and up, held by helper processes against a real server process:
//! the connection table caps and evicts them fairly, so `/healthz` and a capture from 127.0.0.1 still answer.
//! (How fast they answer meanwhile is measured in hookflow-bench, not asserted here.)

use hookflow_tests::server::{ServerProcess, line_with};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");
const HOLDER: &str = env!("CARGO_BIN_EXE_hold-connections");

fn holder(target: &str, first: &str) -> Child {
    Command::new(HOLDER)
        .args([target, first, "10", "1000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn hold-connections")
}

/// One scenario: a server process, two holders of 10,000 connections each, then requests from 127.0.0.1.
#[tokio::test]
async fn twenty_thousand_idle_connections_do_not_lock_out_other_clients() {
    let server = ServerProcess::spawn(SERVER, &[]).await;
    let (base, address, key, org) = (&server.base, &server.address, &server.key, &server.org);
    let webhook = server.post_as(org, key, "/webhooks", &serde_json::json!({"name": "flooded"})).await;
    let capture_url = format!("{base}/webhook/{}", webhook["id"].as_str().expect("id"));

    let started = std::time::Instant::now();
    let mut holders = [holder(address, "127.0.0.2"), holder(address, "127.0.0.12")];
    let mut held = 0;
    for holder in &mut holders {
        let mut lines = BufReader::new(holder.stdout.take().expect("stdout")).lines();
        let report = line_with(&mut lines, "held ").await;
        let count: usize = report.split(' ').nth(1).and_then(|n| n.parse().ok()).expect("count");
        held += count;
    }
    assert_eq!(held, 20_000, "every connection opened");
    println!("20,000 connections opened in {:.1} s", started.elapsed().as_secs_f64());

    // While they are held, a fresh client from 127.0.0.1 is served: probes and captures alike.
    let fresh = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
    for _ in 0..5 {
        let health = fresh.get(format!("{base}/healthz")).send().await.expect("healthz answers");
        assert_eq!(health.status(), 200);
        let capture = fresh.post(&capture_url).body("during the flood").send().await.expect("capture answers");
        assert_eq!(capture.status(), 200);
    }
    for mut holder in holders {
        drop(holder.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(30), holder.wait()).await;
    }
    server.stop().await;
}
