//! 20,000 idle connections from 127.0.0.2 and up, held by helper processes against a real server process:
//! the connection table caps and evicts them fairly, so `/healthz` and a capture from 127.0.0.1 still answer.
//! (How fast they answer meanwhile is measured in hookflow-bench, not asserted here.) And 30,000 connections
//! that each carry one key (Hardening IV, finding 4): proven ones are capped under the open-file limit, and a
//! 429 proves nothing, so the server keeps files for everyone else.

use hookflow_tests::server::{ServerProcess, line_with};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");
const HOLDER: &str = env!("CARGO_BIN_EXE_hold-connections");

fn holder(target: &str, first: &str) -> Child {
    holder_of(target, first, 10, &[])
}

/// A holder of 1,000 connections from each of `addresses` addresses from `first`, each sending `keyed` (a key
/// and an organization) when given.
fn holder_of(target: &str, first: &str, addresses: u32, keyed: &[&str]) -> Child {
    Command::new(HOLDER)
        .args([target, first, &addresses.to_string(), "1000"])
        .args(keyed)
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

/// The server's open-file limit in the keyed floods: below what the holders open, so without a proven cap the
/// server would run out of files.
const OPEN_FILES: u64 = 12_000;

/// One key opens 30,000 connections (two holders of 15 addresses x 1,000), each proving it with a request, against
/// a server whose open-file limit is 12,000; a fresh client from 127.0.0.1 must be served within a second on
/// every probe, and the server's open files stay under its limit. Answers the holders' report lines.
async fn keyed_flood(rate_limit: &str) -> Vec<String> {
    // Generous timeouts, so the connections stay open however slowly the machine opens them: the caps must hold
    // whatever the timeouts (an attacker keeps connections alive within any timeout anyway).
    let server = ServerProcess::spawn_with_open_files(
        SERVER,
        OPEN_FILES,
        &["--key-rate-limit", rate_limit, "--header-timeout-s", "900", "--idle-timeout-s", "900"],
    )
    .await;
    let (base, address, key, org) = (&server.base, &server.address, &server.key, &server.org);
    let webhook = server.post_as(org, key, "/webhooks", &serde_json::json!({"name": "keyed"})).await;
    let capture_url = format!("{base}/webhook/{}", webhook["id"].as_str().expect("id"));

    let started = std::time::Instant::now();
    let mut holders = [
        holder_of(address, "127.0.1.2", 15, &[key.as_str(), org.as_str()]),
        holder_of(address, "127.0.2.2", 15, &[key.as_str(), org.as_str()]),
    ];
    let mut reports = Vec::new();
    for holder in &mut holders {
        let mut lines = BufReader::new(holder.stdout.take().expect("stdout")).lines();
        // Each connection waits for its answer before the next wave: a minute or two on a busy machine; a server out of files never answers some, and the holder never reports.
        let report = tokio::time::timeout(Duration::from_secs(300), async {
            while let Some(line) = lines.next_line().await.expect("read") {
                if line.starts_with("held ") {
                    return line;
                }
            }
            panic!("the holder stopped before reporting");
        });
        reports.push(report.await.expect("the holder reports within 5 minutes"));
    }
    println!("keyed flood (rate limit {rate_limit}/s): {reports:?} in {:.1} s", started.elapsed().as_secs_f64());
    let opened: usize =
        reports.iter().map(|r| r.split(' ').nth(1).and_then(|n| n.parse::<usize>().ok()).expect("count")).sum();
    assert_eq!(opened, 30_000, "every connection opened: {reports:?}");

    let fresh =
        reqwest::Client::builder().timeout(Duration::from_secs(30)).pool_max_idle_per_host(0).build().expect("client");
    for probe in 0..10 {
        let asked = std::time::Instant::now();
        let health = fresh.get(format!("{base}/healthz")).send().await.expect("healthz answers");
        assert_eq!(health.status(), 200);
        let capture = fresh.post(&capture_url).body("during the keyed flood").send().await.expect("capture answers");
        assert_eq!(capture.status(), 200);
        let took = asked.elapsed();
        assert!(took < Duration::from_secs(1), "probe {probe} took {took:?}");
        let open = server.open_files();
        assert!((open as u64) < OPEN_FILES, "the server holds {open} files of its {OPEN_FILES}");
    }
    for mut holder in holders {
        drop(holder.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(30), holder.wait()).await;
    }
    server.stop().await;
    reports
}

/// Keys that pass every check: the proven cap holds them, closing the key's idlest connections. Then requests
/// answered 429 (the key's rate limit at 1 a second): they prove nothing, so their connections stay under the
/// unproven caps. One after the other, so the two floods do not share the machine.
#[tokio::test]
async fn thirty_thousand_connections_of_one_key_leave_room_for_others() {
    let reports = keyed_flood("1000000").await;
    assert!(reports.iter().any(|r| r.contains("status 200")), "the key's requests were served: {reports:?}");
    let reports = keyed_flood("1").await;
    assert!(reports.iter().any(|r| r.contains("status 429")), "the key was rate-limited: {reports:?}");
}
