//! Regression tests of where the server's own requests may go (the guarded outbound client): the embedded runner
//! keeps organizations off this machine unless the operator allowed them, link-local addresses are refused for
//! everyone, redirect hops are checked, no proxy is used, and installed runners keep reaching their networks.
//! Attacks aim only at loopback or at addresses the test made in its own network namespace.

use crate::RUNNER;
use hookflow_control_plane::api::admin::organization;
use hookflow_tests::TestApp;
use hookflow_tests::netns::Netns;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::target::Target;
use serde_json::{Value, json};

fn get(url: &str) -> Value {
    json!({"nodes": [{"id": "read", "kind": "request", "request": {"method": "GET", "url": url},
        "extractors": [{"name": "count", "kind": "jsonPath", "expression": "$.count"}],
        "assertions": [{"source": "count", "operator": "equals", "expected": 2}]}]})
}

fn node_error(nodes: &Value) -> String {
    nodes["items"][0]["error"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn the_embedded_runner_keeps_other_organizations_off_this_machine() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let target = Target::spawn().await;
    let port = target.base.rsplit(':').next().expect("port").to_owned();
    // The first organization is on the operator's list, as the first start's is: it tests its local APIs.
    let (mine, _) = app.run_as(&app.admin, get(&format!("{}/orders", target.base)), json!({})).await;
    assert_eq!(mine["status"], "succeeded", "{mine}");
    let hits = target.hits();
    let other = app.new_org("Tenant").await;
    for host in ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "2130706433", "[::1]"] {
        let (execution, nodes) = app.run_as(&other, get(&format!("http://{host}:{port}/orders")), json!({})).await;
        assert_eq!(execution["status"], "failed", "{host}: {execution}");
        let error = node_error(&nodes);
        assert!(error.contains("not allowed"), "{host}: {error}");
    }
    assert_eq!(target.hits(), hits, "no request of the tenant reached the loopback-only service");
    // The operator puts the tenant on the list: now it may.
    let mut conn = app.pool.acquire().await.expect("connection");
    organization::set_private_network(&mut conn, other.org, true).await.expect("allow");
    let (allowed, _) = app.run_as(&other, get(&format!("http://localhost:{port}/orders")), json!({})).await;
    assert_eq!(allowed["status"], "succeeded", "{allowed}");
}

#[tokio::test]
async fn link_local_addresses_are_refused_for_every_organization_and_redirects_are_checked() {
    let Some(net) = Netns::create("ll", "169.254.77.1", "169.254.77.2", 30) else { return };
    let app = TestApp::spawn_with_embedded_runner().await;
    let metadata = Target::spawn_on(&format!("{}:0", net.host_ip)).await;
    let local = Target::spawn().await;
    // The admin organization may reach private networks, never link-local ones (where cloud metadata lives).
    let (direct, nodes) = app.run_as(&app.admin, get(&format!("{}/orders", metadata.base)), json!({})).await;
    assert_eq!(direct["status"], "failed", "{direct}");
    assert!(node_error(&nodes).contains("link-local"), "{}", node_error(&nodes));
    let hop = format!("{}/redirect?to={}/orders", local.base, metadata.base);
    let (redirected, nodes) = app.run_as(&app.admin, get(&hop), json!({})).await;
    assert_eq!(redirected["status"], "failed", "{redirected}");
    assert!(node_error(&nodes).contains("link-local"), "the redirect hop is checked: {}", node_error(&nodes));
    assert_eq!(local.hits(), 1, "the first hop was sent");
    assert_eq!(metadata.hits(), 0, "nothing reached the link-local address");
}

#[tokio::test]
/// Installed runners honour the proxy variables since #54 (`requests_real` sends through a proxy); a target its
/// `NO_PROXY` names is reached directly, and the server it talks to as well.
async fn installed_runners_reach_what_no_proxy_names_without_the_proxy() {
    let app = TestApp::spawn_for_execution().await;
    // On another loopback address than the server's; NO_PROXY names both.
    let target = Target::spawn_on("127.0.0.2:0").await;
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let proxy_url = format!("http://{}", proxy.local_addr().expect("addr"));
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = connections.clone();
    tokio::spawn(async move {
        while proxy.accept().await.is_ok() {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let creds = app.runner_creds(app.admin.org).await;
    let env = [
        ("HTTP_PROXY", proxy_url.as_str()),
        ("http_proxy", proxy_url.as_str()),
        ("ALL_PROXY", proxy_url.as_str()),
        ("NO_PROXY", "127.0.0.1,127.0.0.2"),
        ("no_proxy", "127.0.0.1,127.0.0.2"),
    ];
    let _runner = RunnerProcess::spawn_with_env(RUNNER, &app.base, &creds, &[], &[], &env).await;
    let (execution, _) = app.run_as(&app.admin, get(&format!("{}/orders", target.base)), json!({})).await;
    assert_eq!(execution["status"], "succeeded", "{execution}");
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 0, "NO_PROXY was not honoured");
}
