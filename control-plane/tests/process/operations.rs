//! Operating the server: `/metrics` scraped with a real Prometheus parser while values move, and the logs of an
//! idle server (a handful of lines, no colour codes in a file, one JSON object a line with `--log-format json`).

use crate::harness::*;
use crate::prometheus::{self, sum as value};
use std::time::Duration;

/// The metrics listener's address, from the server's log line.
fn metrics_url(server: &mut Server) -> String {
    let err = server.wait_stderr("metrics listening", 60);
    let line = err.lines().find(|l| l.contains("metrics listening")).expect("the line");
    let at = line.find("address=").expect("address field") + "address=".len();
    let address: String = line[at..].chars().take_while(|c| !c.is_whitespace()).collect();
    format!("http://{address}/metrics")
}

/// Sets the organization's secret `TOKEN` to `value` through the API.
async fn put_secret(base: &str, key: &str, org: &str, value: &str) {
    let put = reqwest::Client::new()
        .put(format!("{base}/secrets/TOKEN"))
        .header(hookflow_shared::wire::header::API_KEY, key)
        .header(hookflow_shared::wire::header::ORGANIZATION, org)
        .json(&serde_json::json!({"value": value}))
        .send()
        .await
        .expect("secret");
    assert_eq!(put.status(), 200);
}

/// Every sample of one scrape, parsed by a Prometheus text-format parser.
async fn scrape(url: &str) -> prometheus_parse::Scrape {
    let response = reqwest::get(url).await.expect("scrape");
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().expect("type").starts_with("text/plain"));
    prometheus::parse(&response.text().await.expect("text"))
}

/// The newest migration's version, from the file names in `migrations/`.
fn newest_migration() -> i64 {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    std::fs::read_dir(dir)
        .expect("migrations")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.split('_').next()?.parse().ok())
        .max()
        .expect("a migration")
}

/// Hardening IV (15): the API listener's `/readyz` is open to anyone, so it names no database host, socket path or
/// lag; the metrics listener's says where the databases are and which migration the schema is at.
#[tokio::test]
async fn readiness_names_the_database_only_on_the_metrics_listener() {
    let dir = DataDir::new("readyz");
    let mut command = server_command(&dir.0, &["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"]);
    let mut server = Server::spawn(command.env_remove("HOOKFLOW_METRICS_LISTEN"));
    let base = server.base_url();
    let ready_url = metrics_url(&mut server).replace("/metrics", "/readyz");

    let public = reqwest::get(format!("{base}/readyz")).await.expect("readyz");
    assert_eq!(public.status(), 200);
    let public: serde_json::Value = public.json().await.expect("json");
    assert_eq!(public, serde_json::json!({"status": "ready"}), "nothing but the status");

    let private = reqwest::get(&ready_url).await.expect("metrics readyz");
    assert_eq!(private.status(), 200);
    let private: serde_json::Value = private.json().await.expect("json");
    assert_eq!(private["status"], "ready", "{private}");
    let primary = private["database"]["primary"].as_str().expect("the primary's host");
    assert!(!primary.is_empty(), "{private}");
    assert_eq!(private["database"]["failovers"], 0, "{private}");
    assert!(private["database"]["read_replica"].is_null(), "{private}");
    assert_eq!(private["database"]["schema_version"].as_i64(), Some(newest_migration()), "{private}");
}

#[tokio::test]
async fn metrics_move_with_captures_launches_and_streams() {
    let dir = DataDir::new("metrics");
    let mut command = server_command(&dir.0, &["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"]);
    let mut server = Server::spawn(command.env_remove("HOOKFLOW_METRICS_LISTEN"));
    let base = server.base_url();
    let url = metrics_url(&mut server);
    let out = server.stdout();
    let (key, org) = (field(&out, "api key:"), field(&out, "organization id:"));
    let before = scrape(&url).await;
    assert!(value(&before, "hookflow_db_pool_max_connections", &[]) >= 1.0);
    assert!(
        before.samples.iter().all(|s| !s.labels.iter().any(|(k, _)| k.contains("organization"))),
        "no organization labels"
    );

    let hook = post_json(&base, "/webhooks", &key, &org, serde_json::json!({"name": "metrics"})).await;
    let capture_url = hook["capture_url"].as_str().expect("capture url").to_owned();
    let client = reqwest::Client::new();
    for _ in 0..3 {
        assert_eq!(client.post(&capture_url).body("{}").send().await.expect("capture").status(), 200);
    }
    let unknown = format!("{base}/webhook/{}", uuid::Uuid::new_v4());
    assert_eq!(client.post(&unknown).send().await.expect("capture").status(), 404);
    // A live stream is a subscriber while it is open.
    let stream = client
        .get(format!("{base}/webhooks/{}/stream", hook["id"].as_str().expect("id")))
        .header(hookflow_shared::wire::header::API_KEY, &key)
        .header(hookflow_shared::wire::header::ORGANIZATION, &org)
        .send()
        .await
        .expect("stream");
    assert_eq!(stream.status(), 200);
    // A flow through the embedded runner: a claim, a finished execution, a result posted.
    let definition = serde_json::json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let flow = post_json(&base, "/flows", &key, &org, serde_json::json!({"name": "m", "definition": definition})).await;
    let flow_id = flow["id"].as_str().expect("flow id");
    post_json(&base, &format!("/flows/{flow_id}/launch"), &key, &org, serde_json::json!({})).await;
    let mut after = scrape(&url).await;
    for _ in 0..100 {
        if value(&after, "hookflow_executions_finished_total", &[("status", "succeeded")]) >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = scrape(&url).await;
    }
    let delta = |name: &str, labels: &[(&str, &str)]| value(&after, name, labels) - value(&before, name, labels);
    assert_eq!(delta("hookflow_captures_stored_total", &[]), 3.0);
    assert!(delta("hookflow_capture_batch_rows", &[]) >= 1.0, "batches are counted");
    assert_eq!(delta("hookflow_captures_refused_total", &[("status", "404")]), 1.0);
    assert_eq!(
        delta("hookflow_http_requests_total", &[("route", "/webhooks"), ("method", "POST"), ("status", "201")]),
        1.0
    );
    assert!(delta("hookflow_http_request_duration_seconds", &[("route", "/webhooks/{id}/stream")]) >= 0.0);
    assert_eq!(value(&after, "hookflow_stream_subscribers", &[]), 1.0, "the open stream");
    assert!(delta("hookflow_claims_total", &[]) >= 1.0);
    assert_eq!(delta("hookflow_executions_finished_total", &[("status", "succeeded")]), 1.0);
    assert!(delta("hookflow_runner_results_posted_total", &[]) >= 1.0, "the embedded runner's own metrics");
    assert_eq!(value(&after, "hookflow_runners_online", &[]), 1.0, "the embedded runner");
    assert_eq!(value(&after, "hookflow_queue_depth", &[]), 0.0);
    drop(stream);
    for _ in 0..50 {
        if value(&scrape(&url).await, "hookflow_stream_subscribers", &[]) == 0.0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("a closed stream is no subscriber any more");
}

/// An idle server with its embedded runner (long polls and heartbeats all the time) says almost nothing, in plain
/// text when standard error is not a terminal; `--log-format json` writes one object a line.
#[tokio::test]
async fn an_idle_server_is_quiet_and_its_logs_are_plain_or_json() {
    let dir = DataDir::new("logs");
    // Heartbeats every 2 s (lease 6 s) and long polls of 30 s: an idle minute would be dozens of requests.
    let mut command = server_command(&dir.0, &["--listen", "127.0.0.1:0", "--lease-s", "6"]);
    let mut server = Server::spawn(command.env_remove("NO_COLOR"));
    server.base_url();
    server.wait_stderr("registered", 60);
    let settled = server.stderr().lines().count();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let log = server.stderr();
    let idle: Vec<&str> = log.lines().skip(settled).collect();
    assert!(idle.len() <= 3, "an idle server logged {} lines in 10 s:\n{}", idle.len(), idle.join("\n"));
    assert!(!log.contains('\u{1b}'), "no colour codes when standard error is not a terminal:\n{log}");
    drop(server);

    let dir = DataDir::new("json-logs");
    let mut server = Server::start(&dir.0, &["--log-format", "json", "--embedded-runner", "off"]);
    let err = server.wait_stderr("hookflow-server listening", 120);
    for line in err.lines().filter(|l| !l.trim().is_empty()) {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not one JSON object a line ({e}): {line}"));
        assert!(object["level"].is_string() && object["fields"].is_object(), "{line}");
    }
}

/// Runs a flow whose request carries a secret to one of the server's own capture URLs (the first start's
/// organization may reach this machine), and answers the header the capture received.
async fn secret_delivered(base: &str, key: &str, org: &str, flow: &str, webhook: &str) -> String {
    let execution = post_json(base, &format!("/flows/{flow}/launch"), key, org, serde_json::json!({})).await;
    let id = execution["id"].as_str().expect("id");
    for _ in 0..200 {
        let (_, current) = get(base, &format!("/flows/{flow}/executions/{id}"), key, org).await;
        match current["status"].as_str() {
            Some("queued" | "running") => tokio::time::sleep(Duration::from_millis(50)).await,
            Some("succeeded") => {
                let (_, page) = get(base, &format!("/webhooks/{webhook}/requests?limit=1"), key, org).await;
                let headers = page["items"][0]["headers"].as_array().expect("headers").clone();
                let token = headers.iter().find(|h| h[0] == "x-token").expect("the secret's header");
                return token[1].as_str().expect("value").to_owned();
            }
            _ => {
                let (_, nodes) = get(base, &format!("/flows/{flow}/executions/{id}/nodes"), key, org).await;
                panic!("the flow did not succeed: {current}\n{nodes}")
            }
        }
    }
    panic!("the flow never finished");
}

/// The embedded default rotates online: a new key heads master.key, running servers switch to it, every value is
/// re-encrypted, the old key is retired, and secrets reach the embedded runner's requests before, during and
/// after, and after a restart.
#[tokio::test]
async fn the_master_key_rotates_online_with_the_embedded_default() {
    let dir = DataDir::new("rotate");
    let mut server = Server::start(&dir.0, &[]);
    let base = server.base_url();
    server.wait_stderr("registered", 60);
    let out = server.stdout();
    let (key, org) = (field(&out, "api key:"), field(&out, "organization id:"));
    let hook = post_json(&base, "/webhooks", &key, &org, serde_json::json!({"name": "target"})).await;
    let (webhook, capture_url) = (hook["id"].as_str().expect("id"), hook["capture_url"].as_str().expect("url"));
    put_secret(&base, &key, &org, "before-rotation").await;
    let definition = serde_json::json!({"nodes": [{"id": "send", "kind": "request",
        "request": {"method": "POST", "url": capture_url, "headers": {"x-token": "{{secret.TOKEN}}"}}}]});
    let flow = post_json(&base, "/flows", &key, &org, serde_json::json!({"name": "s", "definition": definition})).await;
    let flow = flow["id"].as_str().expect("flow id");
    assert_eq!(secret_delivered(&base, &key, &org, flow, webhook).await, "before-rotation");
    let key_file = dir.0.join("master.key");
    let old = std::fs::read_to_string(&key_file).expect("key file");
    assert!(old.starts_with("v2:"), "a first start's key is used through subkeys (Hardening IV)");

    let (ok, out, err) = operator(&dir.0, &["keys", "rotate-master", "--new-key"]);
    assert!(ok, "{err}");
    assert!(out.contains("re-encrypted 1 secrets") && out.contains("0 values remain"), "{out}");
    let rotated = std::fs::read_to_string(&key_file).expect("key file");
    assert_eq!(rotated.lines().count(), 2);
    assert!(rotated.starts_with("v2:"), "a rotation's new key is used through subkeys");
    assert_eq!(rotated.lines().nth(1), old.lines().next(), "the old key follows the new one");
    assert!(!out.contains(rotated.lines().next().expect("new")), "no key is printed");
    // The running server opens the re-encrypted secret, and seals new values with the new key.
    assert_eq!(secret_delivered(&base, &key, &org, flow, webhook).await, "before-rotation");
    put_secret(&base, &key, &org, "after-rotation").await;
    let (ok, out, err) = operator(&dir.0, &["keys", "rotate-master", "--retire-previous"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("re-encrypted 0 secrets") && out.contains("0 values remain"),
        "the server sealed with the new key: {out}"
    );
    assert_eq!(std::fs::read_to_string(&key_file).expect("key file").lines().count(), 1);
    assert_eq!(secret_delivered(&base, &key, &org, flow, webhook).await, "after-rotation");

    // --new-key needs the key file: with a configured key it says what to do instead.
    let (ok, _, err) = operator(&dir.0, &["keys", "rotate-master", "--new-key", "--master-key", &"A".repeat(43)]);
    assert!(!ok && (err.contains("--previous-master-keys") || err.contains("not 32 bytes")), "{err}");

    // A restart reads the one-key file.
    server.signal("-TERM");
    assert!(server.wait_exit(60).success());
    let address = base.trim_start_matches("http://").to_owned();
    let mut server = Server::spawn(&mut server_command(&dir.0, &["--listen", &address]));
    assert_eq!(server.base_url(), base, "the same address, which the flow's request names");
    assert_eq!(secret_delivered(&base, &key, &org, flow, webhook).await, "after-rotation");
}
