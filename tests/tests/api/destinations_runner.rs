//! A destination inside a private network (issue #49): the test makes a network namespace, an HTTP target on the
//! namespace's own loopback and a real `hookflow-runner` inside it reaching the server over a veth. A destination
//! with the runner's labels is delivered by that runner (its attempts name it); the same URL without labels is
//! attempted by the server, which has no route there and fails; a literal private address without labels is
//! refused for an organization that may not reach private targets. Only addresses the test created are used.

use crate::RUNNER;
use hookflow_tests::TestApp;
use hookflow_tests::netns::{Killed, Netns};
use hookflow_tests::proxy::Proxy;
use reqwest::Method;
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

const TARGET_SERVER: &str = env!("CARGO_BIN_EXE_target-server");

fn port_free_here() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

async fn deliveries(app: &TestApp, webhook: &str, destination: &str) -> Vec<Value> {
    let page =
        app.admin(Method::GET, &format!("/webhooks/{webhook}/destinations/{destination}/deliveries"), None).await;
    page.body["items"].as_array().expect("items").clone()
}

#[tokio::test]
async fn a_runner_in_a_private_network_delivers_what_the_server_cannot_reach() {
    // 198.18.0.0/15 is reserved for network tests; the test owns both ends of this /30.
    let Some(net) = Netns::create("dr", "198.18.79.1", "198.18.79.2", 30) else { return };
    let app = TestApp::spawn().await;
    let port = port_free_here();
    let mut target = net.command(TARGET_SERVER);
    let mut target = Killed(
        target.arg(format!("127.0.0.1:{port}")).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("target"),
    );
    let mut line = String::new();
    std::io::BufReader::new(target.0.stdout.take().expect("stdout")).read_line(&mut line).expect("target's base");
    let target_base = line.trim().to_owned();

    let webhook = app.webhook_named("inside").await;
    let path = format!("/webhooks/{webhook}/destinations");
    let url = format!("{target_base}/echo");
    let through_runner = app
        .admin(
            Method::POST,
            &path,
            Some(json!({"name": "inside", "url": url, "runner_labels": ["inside"],
            "signing": "standard-webhooks"})),
        )
        .await;
    assert_eq!(through_runner.status, 201, "{}", through_runner.text);
    let by_runner = through_runner.body["id"].as_str().expect("id").to_owned();
    let direct =
        app.admin(Method::POST, &path, Some(json!({"name": "direct", "url": url, "retry_schedule_s": []}))).await;
    assert_eq!(direct.status, 201, "{}", direct.text);
    let by_server = direct.body["id"].as_str().expect("id").to_owned();

    for n in 0..3 {
        let sent = app.capture(Method::POST, &webhook, format!("{{\"n\": {n}}}")).await;
        assert_eq!(sent.status, 200);
    }
    // The server tries its own destination and cannot connect: nothing listens there in its network.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let items = deliveries(&app, &webhook, &by_server).await;
        if items.len() == 3 && items.iter().all(|d| d["status"] == "dead") {
            assert!(items.iter().all(|d| d["last_attempt"]["status_code"].is_null()), "{items:?}");
            break;
        }
        assert!(Instant::now() < deadline, "the server's attempts: {items:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Nothing delivers the runner's destination before a runner with its labels is there.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        deliveries(&app, &webhook, &by_runner).await.iter().all(|d| d["status"] == "pending" && d["attempts"] == 0)
    );

    let upstream = app.base.trim_start_matches("http://").parse().expect("address");
    let relay = Proxy::start_on("198.18.79.1:0", upstream).await;
    let creds = app.runner_creds(app.admin.org).await;
    let _runner = net.runner(RUNNER, &relay.url(), &creds, &[]);
    let runner = app.wait_runner(|r| r["labels"] == json!(["inside"]) && r["status"] == "online").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let delivered = loop {
        let items = deliveries(&app, &webhook, &by_runner).await;
        if items.len() == 3 && items.iter().all(|d| d["status"] == "delivered") {
            break items;
        }
        assert!(Instant::now() < deadline, "the runner's deliveries: {items:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for d in &delivered {
        assert_eq!(d["last_attempt"]["status_code"], 200);
        let attempts = app
            .admin(
                Method::GET,
                &format!("{path}/{by_runner}/deliveries/{}/attempts", d["id"].as_str().expect("id")),
                None,
            )
            .await;
        assert_eq!(attempts.body["items"][0]["runner_id"], runner["id"], "{}", attempts.text);
    }

    // Without labels, for an organization that may not reach private targets, a literal private address is refused.
    let other = app.new_org("Public only").await;
    let theirs = app
        .api_as(&other)
        .webhooks()
        .create(&hookflow_shared::api::webhooks::CreateWebhook::new("w".parse().expect("name")))
        .await
        .expect("webhook");
    let refused = app
        .call(
            Method::POST,
            &format!("/webhooks/{}/destinations", theirs.id),
            Some(&other),
            Some(json!({"name": "x", "url": url})),
        )
        .await;
    refused.assert_refused(400, "invalid_request", "url");
    drop(target);
}
