//! Webhook nodes wherever a flow runs: on an installed runner inside a network namespace (the control plane
//! receives the webhook; the runner waits for it through the runner protocol with its job token), through
//! `hookflow run` in CI (an ephemeral run), and the protocol route's own refusals.

use crate::RUNNER;
use crate::webhook_nodes::payment_flow;
use hookflow_tests::TestApp;
use hookflow_tests::cli::Cli;
use hookflow_tests::netns::Netns;
use hookflow_tests::provider::{Provider, ProviderOptions};
use hookflow_tests::proxy::Proxy;
use serde_json::{Value, json};

const HOOKFLOW: &str = env!("CARGO_BIN_EXE_hookflow-under-test");

/// A flow of one webhook node `w` waiting `timeout_ms` on the execution's own URL.
async fn waiting_flow(app: &TestApp, name: &str, timeout_ms: u64) -> String {
    let definition = json!({"nodes": [{"id": "w", "kind": "webhook", "webhook": {"timeout_ms": timeout_ms}}]});
    app.create_flow(name, definition).await
}

#[tokio::test]
async fn an_installed_runner_in_a_private_network_waits_for_the_webhook_through_the_protocol() {
    // A private /30 the test makes and owns both ends of (not 198.18.0.0/15, which runners refuse to call: the
    // provider must be an address a flow may reach).
    let Some(net) = Netns::create("wh", "10.231.79.1", "10.231.79.2", 30) else { return };
    let app = TestApp::spawn_for_execution().await;
    // The provider sits on the namespace's side of the veth's far end: reachable from the runner inside; it sends
    // its webhook to the server's capture URL (the execution's own).
    let provider = Provider::spawn_on("10.231.79.1:0", ProviderOptions::default()).await;
    let upstream = app.base.trim_start_matches("http://").parse().expect("address");
    let relay = Proxy::start_on("10.231.79.1:0", upstream).await;
    let creds = app.runner_creds(app.admin.org).await;
    let _runner = net.runner(RUNNER, &relay.url(), &creds, &[]);
    app.wait_runner(|r| r["labels"] == json!(["inside"]) && r["status"] == "online").await;

    let flow = app.create_flow("inside", payment_flow(&provider.url, None, 20_000)).await;
    let id = app.launch(&flow, json!({"runner_labels": ["inside"]})).await["id"].as_str().expect("id").to_owned();
    let ended = app.wait_finished(&flow, &id).await;
    let nodes: Value = app.get(&format!("/flows/{flow}/executions/{id}/nodes"), 200).await;
    assert_eq!(ended["status"], "succeeded", "{ended} {nodes}");
    assert!(ended["runner_id"].is_string(), "the installed runner ran it: {ended}");
    let paid = &nodes["items"][1];
    assert_eq!(paid["extracted"]["paid_id"], nodes["items"][0]["extracted"]["payment_id"], "{paid}");
    assert_eq!(paid["capture"]["execution_id"], id.as_str());
    // The callback URL the runner handed out is the control plane's, not the relay's.
    let sent = nodes["items"][0]["request"]["body"].as_str().expect("sent body");
    assert!(sent.contains(&format!("{}/webhook/", app.base)), "{sent}");
    assert_eq!(provider.sent(), 1);
}

#[tokio::test]
async fn hookflow_run_waits_for_the_webhook_in_an_ephemeral_run() {
    let app = TestApp::spawn_for_execution().await;
    let webhook = app.create_webhook(json!({"name": "ci"})).await;
    let (webhook_id, capture_url) = (webhook["id"].as_str().expect("id"), webhook["capture_url"].as_str().expect("u"));
    let provider = Provider::spawn(ProviderOptions::default()).await;
    // One flow waits on its own URL, one on the endpoint the provider was told about.
    let own = app.create_flow("own", payment_flow(&provider.url, None, 20_000)).await;
    let mut on_endpoint = payment_flow(&provider.url, Some(webhook_id), 20_000);
    on_endpoint["nodes"][0]["request"]["body"] =
        json!(format!("{{\"amount\": 42, \"callback_url\": \"{capture_url}\"}}"));
    on_endpoint["nodes"][1]["webhook"].as_object_mut().expect("webhook").remove("signature");
    let endpoint = app.create_flow("endpoint", on_endpoint).await;
    let cli = Cli { binary: HOOKFLOW, base: app.base.clone() };
    for flow in [&own, &endpoint] {
        let output = cli.run(Some(&app.admin), &["run", "--flow", flow]).await;
        assert_eq!(output.code, 0, "{}", output.all());
        let runs = app.api().executions().list(flow.as_str(), &[]).await.expect("executions");
        let run = runs.items.first().expect("one run");
        assert_eq!(run.trigger.as_str(), "cli");
        assert!(run.runner_id.is_none(), "ran here, not on a runner");
        let nodes = app.api().executions().nodes(flow.as_str(), run.id).await.expect("nodes");
        let paid = nodes.items.iter().find(|n| n.node_id == "paid").expect("paid");
        assert_eq!(paid.extracted["event"], "payment.succeeded");
        assert!(paid.capture.is_some());
    }
    assert_eq!(provider.sent(), 2);

    // Never sent: the CLI exits 1 and says `timeout`.
    let silent = waiting_flow(&app, "silent", 800).await;
    let output = cli.run(Some(&app.admin), &["run", "--flow", &silent]).await;
    assert_eq!(output.code, 1, "{}", output.all());
    assert!(output.all().contains("timeout"), "{}", output.all());
}

#[tokio::test]
async fn the_wait_route_checks_its_token_its_search_and_its_endpoint() {
    let app = TestApp::spawn_for_execution().await;
    let flow = waiting_flow(&app, "waits", 1_000).await;
    let execution = app.launch_draft(&flow).await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let job = app.next_job(&creds, &runner, 5).await.body;
    assert_eq!(job["execution_id"], execution.as_str());
    let capture_url = job["capture_url"].as_str().expect("the claim carries the execution's capture URL").to_owned();

    // Nothing there yet: an empty answer within the wait, with an explanation when asked.
    let empty = app.job_call(&job, "captures", json!({"node_id": "w", "wait_ms": 300, "explain": true})).await;
    assert_eq!(empty.status, 200, "{:?}", empty.body);
    assert_eq!((empty.body["capture"].clone(), empty.body["seen"].clone()), (Value::Null, json!(0)));

    // A capture at the execution's URL wakes a waiting poll.
    let started = std::time::Instant::now();
    let (woken, sent) =
        tokio::join!(app.job_call(&job, "captures", json!({"node_id": "w", "wait_ms": 20_000})), async {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            app.client.post(&capture_url).header("x-n", "1").body("{\"n\": 1}").send().await.expect("send")
        });
    assert_eq!(sent.status(), 200);
    assert_eq!(woken.status, 200);
    assert_eq!(woken.body["capture"]["execution_id"], execution.as_str());
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "woken, not timed out");

    // The same capture, excluded, no longer matches; a search that does not match explains itself.
    let id = woken.body["capture"]["id"].clone();
    let taken =
        app.job_call(&job, "captures", json!({"node_id": "w", "wait_ms": 0, "exclude": [id], "explain": true})).await;
    assert_eq!(taken.body["capture"], Value::Null);
    assert!(
        taken.body["closest"].as_str().expect("why").contains("another node of this run took it"),
        "{:?}",
        taken.body
    );
    let other =
        app.job_call(&job, "captures", json!({"node_id": "w", "wait_ms": 0, "q": "body.$.n:2", "explain": true})).await;
    let why = other.body["closest"].as_str().expect("why").to_owned();
    assert!(why.contains("does not match `body.$.n:2`") && why.contains("it has `1` there"), "{why}");

    // Refusals: a bad search (400), another organization's endpoint (404), a token that is not this job's (401).
    let bad = app.job_call(&job, "captures", json!({"node_id": "w", "q": "nosuchfield:x"})).await;
    bad.assert_refused(400, "invalid_request", "unknown search field");
    let stranger = app.new_org("stranger").await;
    let endpoint = hookflow_shared::api::webhooks::CreateWebhook::new("theirs".parse().expect("a name"));
    let theirs = app.api_as(&stranger).webhooks().create(&endpoint).await.expect("their endpoint");
    let foreign = app.job_call(&job, "captures", json!({"node_id": "w", "webhook_id": theirs.id, "wait_ms": 0})).await;
    assert_eq!(foreign.status, 404, "{:?}", foreign.body);
    let mut forged = job.clone();
    forged["job_token"] = json!(hookflow_control_plane::crypto::new_token(hookflow_shared::token::TokenKind::Job));
    assert_eq!(app.job_call(&forged, "captures", json!({"node_id": "w"})).await.status, 401);
    // An endpoint of its own organization that no webhook node of the run names is not the job's to read.
    let mine = app.create_webhook(json!({"name": "not named by the flow"})).await;
    let unnamed = app.job_call(&job, "captures", json!({"node_id": "w", "webhook_id": mine["id"], "wait_ms": 0})).await;
    assert_eq!(unnamed.status, 404, "{:?}", unnamed.body);
    let too_many: Vec<String> = (0..101).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    let long = app.job_call(&job, "captures", json!({"node_id": "w", "exclude": too_many})).await;
    assert_eq!(long.status, 400);
    // A job's nodes wait one at a time: a fifth wait at once is refused (the lease is renewed first: it is short here).
    assert_eq!(app.job_call(&job, "nodes", json!({"results": []})).await.status, 200);
    let open =
        |n: u32| app.job_call(&job, "captures", json!({"node_id": "w", "wait_ms": 800, "q": format!("header.n:{n}")}));
    let (a, b, c, d, e) = tokio::join!(open(1), open(2), open(3), open(4), async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        open(5).await
    });
    assert!([a.status, b.status, c.status, d.status] == [200; 4], "four at once are fine");
    e.assert_refused(429, "rate_limited", "waits open");
}
