//! What runners exist for: an API inside a network the server cannot reach. The test makes a network namespace
//! with a veth pair, starts an HTTP target on the namespace's own loopback and a real `hookflow-runner` inside
//! the namespace that reaches the server over the veth. A flow routed to that runner by label succeeds; the same
//! flow on the server's embedded runner (for an organization allowed private targets) cannot connect. The
//! runner's own `/metrics` count the job. Only addresses the test created are used.

use crate::RUNNER;
use hookflow_tests::TestApp;
use hookflow_tests::netns::{Killed, Netns};
use hookflow_tests::prometheus;
use hookflow_tests::proxy::Proxy;
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::process::Stdio;
use std::time::Duration;

const TARGET_SERVER: &str = env!("CARGO_BIN_EXE_target-server");

/// A port nothing listens on in this (the root) namespace right now.
fn port_free_here() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// Scrapes until the samples of `name` whose labels include `labels` add up to at least `at_least` (at most 10 s);
/// answers that sum. The text is read by a Prometheus text-format parser.
async fn scrape_until(url: &str, name: &str, labels: &[(&str, &str)], at_least: f64) -> f64 {
    let mut seen = 0.0;
    for _ in 0..100 {
        if let Ok(response) = reqwest::get(url).await
            && let Ok(text) = response.text().await
        {
            seen = prometheus::sum(&prometheus::parse(&text), name, labels);
            if seen >= at_least {
                return seen;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

#[tokio::test]
async fn a_runner_inside_a_private_network_reaches_what_the_server_cannot() {
    // 198.18.0.0/15 is reserved for network tests; the test owns both ends of this /30.
    let Some(net) = Netns::create("pn", "198.18.77.1", "198.18.77.2", 30) else { return };
    let app = TestApp::spawn_with_embedded_runner().await;

    // The target listens on the namespace's own loopback, on a port nothing uses out here.
    let port = port_free_here();
    let mut target = net.command(TARGET_SERVER);
    let mut target = Killed(
        target.arg(format!("127.0.0.1:{port}")).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("target"),
    );
    let mut line = String::new();
    std::io::BufReader::new(target.0.stdout.take().expect("stdout")).read_line(&mut line).expect("target's base");
    let target_base = line.trim().to_owned();
    assert_eq!(target_base, format!("http://127.0.0.1:{port}"));

    let definition = json!({"nodes": [{"id": "orders", "kind": "request",
        "request": {"method": "GET", "url": format!("{target_base}/orders")},
        "extractors": [{"name": "count", "kind": "jsonPath", "expression": "$.count"}],
        "assertions": [{"source": "count", "operator": "equals", "expected": 2}]}]});
    let flow = app.create_flow("inside", definition).await;

    // The embedded runner runs in the server's network: nothing answers there.
    let outside = app.launch_draft(&flow).await;
    let ended = app.wait_finished(&flow, &outside).await;
    assert_eq!(ended["status"], "failed", "{ended}");
    let nodes: Value = app.get(&format!("/flows/{flow}/executions/{outside}/nodes"), 200).await;
    let error = nodes["items"][0]["error"].as_str().unwrap_or_default().to_lowercase();
    assert!(error.contains("connect"), "a connection error: {nodes}");

    // The server is reachable from the namespace over the veth, through a relay on the root namespace's end.
    let upstream = app.base.trim_start_matches("http://").parse().expect("address");
    let relay = Proxy::start_on("198.18.77.1:0", upstream).await;
    let metrics = format!("{}:{}", net.inner_ip, port_free_here());
    let creds = app.runner_creds(app.admin.org).await;
    let _runner = net.runner(RUNNER, &relay.url(), &creds, &["--metrics-listen", &metrics]);
    app.wait_runner(|r| r["labels"] == json!(["inside"]) && r["status"] == "online").await;

    let inside = app.launch(&flow, json!({"runner_labels": ["inside"]})).await["id"].as_str().expect("id").to_owned();
    let ended = app.wait_finished(&flow, &inside).await;
    assert_eq!(ended["status"], "succeeded", "{ended}");
    let nodes: Value = app.get(&format!("/flows/{flow}/executions/{inside}/nodes"), 200).await;
    assert_eq!(nodes["items"][0]["extracted"]["count"], 2);

    // The runner's own metrics, scraped over the veth.
    let url = format!("http://{metrics}/metrics");
    let finished = scrape_until(&url, "hookflow_runner_jobs_finished_total", &[("status", "succeeded")], 1.0).await;
    assert_eq!(finished, 1.0);
    assert!(scrape_until(&url, "hookflow_runner_results_posted_total", &[], 1.0).await >= 1.0);
    assert_eq!(scrape_until(&url, "hookflow_runner_jobs_running", &[], 0.0).await, 0.0);
}
