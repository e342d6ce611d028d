//! 20,000 idle connections from 127.0.0.2 and up, held by helper processes against a real server process:
//! the connection table caps and evicts them fairly, so `/healthz` and a capture from 127.0.0.1 still answer.
//! (How fast they answer meanwhile is measured in hookflow-bench, not asserted here.)

use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");
const HOLDER: &str = env!("CARGO_BIN_EXE_hold-connections");

/// Waits for a line of `child`'s output (stdout or stderr, as `lines` reads) containing `needle`.
async fn line_with(lines: &mut tokio::io::Lines<BufReader<impl tokio::io::AsyncRead + Unpin>>, needle: &str) -> String {
    let wait = async {
        while let Some(line) = lines.next_line().await.expect("read output") {
            if line.contains(needle) {
                return line;
            }
        }
        panic!("the output ended before `{needle}`");
    };
    tokio::time::timeout(Duration::from_secs(120), wait).await.unwrap_or_else(|_| panic!("no `{needle}` in time"))
}

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
    let data = std::env::temp_dir().join(format!("hookflow-flood-{}", uuid::Uuid::new_v4()));
    let url = hookflow_tests::cluster::fresh_database_url().await;
    let mut server = Command::new(SERVER)
        .args(["--listen", "127.0.0.1:0", "--embedded-runner", "off", "--database-url", &url])
        .arg("--data-dir")
        .arg(&data)
        .env("NO_COLOR", "1")
        .env("HOOKFLOW_METRICS_LISTEN", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn hookflow-server");
    let mut out = BufReader::new(server.stdout.take().expect("stdout")).lines();
    let mut err = BufReader::new(server.stderr.take().expect("stderr")).lines();
    let org = line_with(&mut out, "organization id:").await.rsplit(' ').next().expect("org").to_owned();
    let key = line_with(&mut out, "api key:").await.rsplit(' ').next().expect("key").to_owned();
    let listening = line_with(&mut err, "hookflow-server listening").await;
    let address: String = listening[listening.find("address=").expect("address") + 8..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    tokio::spawn(async move { while let Ok(Some(_)) = err.next_line().await {} });
    let base = format!("http://{address}");
    let client = reqwest::Client::new();
    let webhook: serde_json::Value = client
        .post(format!("{base}/webhooks"))
        .header("x-api-key", &key)
        .header("x-organization-id", &org)
        .json(&serde_json::json!({"name": "flooded"}))
        .send()
        .await
        .expect("create webhook")
        .json()
        .await
        .expect("webhook");
    let capture_url = format!("{base}/webhook/{}", webhook["id"].as_str().expect("id"));

    let started = std::time::Instant::now();
    let mut holders = [holder(&address, "127.0.0.2"), holder(&address, "127.0.0.12")];
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
    let _ = server.start_kill();
    let _ = server.wait().await;
    let _ = std::fs::remove_dir_all(&data);
}
