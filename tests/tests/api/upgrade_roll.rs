//! Upgrades that roll (Operating II): the previous release's server (the commit on docs/RUNBOOK.md's `previous
//! release:` line, built once and cached under target/) and this one serve the same database after this release's
//! migrations (this one migrates first), under capture and launch load on both, each with a runner process, with
//! endpoints, triggers and executions of the kinds this release writes: no 500 from either, every launch runs.

use crate::{RUNNER, SERVER};
use hookflow_tests::previous_release;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::server::ServerProcess;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long both servers are under load.
const LOAD: Duration = Duration::from_secs(12);

/// What the load was answered: (server, request) -> status -> count.
type Answers = Arc<Mutex<BTreeMap<(String, String), BTreeMap<u16, usize>>>>;

#[derive(Clone)]
struct Api {
    client: reqwest::Client,
    org: String,
    key: String,
}

impl Api {
    async fn call(&self, method: Method, url: String, body: Option<Value>) -> (u16, Value) {
        let mut request =
            self.client.request(method, url).header("x-api-key", &self.key).header("x-organization-id", &self.org);
        if let Some(body) = body {
            request = request.json(&body);
        }
        match request.send().await {
            Ok(reply) => (reply.status().as_u16(), reply.json().await.unwrap_or(Value::Null)),
            Err(_) => (0, Value::Null),
        }
    }
}

/// What the load works on, made through this release's server.
struct Fixture {
    plain: String,
    triggered: String,
    rejecting: String,
    flow: String,
}

async fn fixture(api: &Api, base: &str, target: &str) -> Fixture {
    let create = |body: Value, path: &'static str| {
        let api = api.clone();
        let url = format!("{base}{path}");
        async move {
            let (status, body) = api.call(Method::POST, url, Some(body)).await;
            assert_eq!(status, 201, "{body}");
            body["id"].as_str().expect("id").to_owned()
        }
    };
    // A request node with an extractor and an assertion, against a local target.
    let definition = json!({"nodes": [{"id": "call", "kind": "request",
        "request": {"method": "GET", "url": format!("{target}/ok")},
        "extractors": [{"name": "n", "kind": "jsonPath", "expression": "$.n"}],
        "assertions": [{"source": "n", "operator": "equals", "expected": 7}]}]});
    let flow = create(json!({"name": "rolling", "definition": definition}), "/flows").await;
    let plain = create(json!({"name": "plain"}), "/webhooks").await;
    let triggered = create(json!({"name": "triggered", "triggers": [{"flow_id": flow}]}), "/webhooks").await;
    // A verification mode this release added.
    let rejecting = json!({"name": "rejecting", "verification":
        {"scheme": "hmac", "header": "x-signature", "secrets": ["rolling-secret"], "mode": "reject"}});
    let rejecting = create(rejecting, "/webhooks").await;
    Fixture { plain, triggered, rejecting, flow }
}

/// A local target answering `{"n": 7}`.
async fn target() -> String {
    let router = axum::Router::new().route("/ok", axum::routing::get(|| async { axum::Json(json!({"n": 7})) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    base
}

fn note(answers: &Answers, server: &str, what: &str, status: u16) {
    let mut answers = answers.lock().expect("answers");
    *answers.entry((server.to_owned(), what.to_owned())).or_default().entry(status).or_default() += 1;
}

/// One server's share of the load until `stop`: captures (plain, triggering, refused by signature), launches
/// with reads of their executions, and reads of endpoints and captures. The launched executions' ids.
async fn load(
    api: Api,
    name: &'static str,
    base: String,
    f: Arc<Fixture>,
    stop: Arc<AtomicBool>,
    answers: Answers,
) -> Vec<String> {
    let mut launched = Vec::new();
    let mut round = 0u64;
    while !stop.load(Ordering::SeqCst) {
        round += 1;
        let capture = |endpoint: &str| {
            api.client.post(format!("{base}/webhook/{endpoint}")).body(format!("{{\"round\":{round}}}"))
        };
        for (what, request) in [
            ("capture plain", capture(&f.plain)),
            ("capture triggering", capture(&f.triggered)),
            ("capture badly signed", capture(&f.rejecting).header("x-signature", "00")),
        ] {
            let status = request.send().await.map_or(0, |r| r.status().as_u16());
            note(&answers, name, what, status);
        }
        let (status, execution) =
            api.call(Method::POST, format!("{base}/flows/{}/launch", f.flow), Some(json!({}))).await;
        note(&answers, name, "launch", status);
        if let Some(id) = execution["id"].as_str() {
            launched.push(id.to_owned());
        }
        if let Some(earlier) = launched.get(launched.len().saturating_sub(5)) {
            let path = format!("{base}/flows/{}/executions/{earlier}", f.flow);
            note(&answers, name, "get execution", api.call(Method::GET, path.clone(), None).await.0);
            note(&answers, name, "get node results", api.call(Method::GET, format!("{path}/nodes"), None).await.0);
        }
        for (what, path) in [
            ("list endpoints", "/webhooks".to_owned()),
            ("get rejecting endpoint", format!("/webhooks/{}", f.rejecting)),
            ("list captures", format!("/webhooks/{}/requests?limit=5", f.triggered)),
            ("list executions", format!("/flows/{}/executions?limit=5", f.flow)),
        ] {
            note(&answers, name, what, api.call(Method::GET, format!("{base}{path}"), None).await.0);
        }
    }
    launched
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "builds the previous release once (minutes when cold, cached under target/previous-release): .ci/run's part `rolling upgrade`"]
async fn the_previous_release_and_this_one_serve_one_database_under_load() {
    let commit = previous_release::commit();
    let built = {
        let commit = commit.clone();
        tokio::task::spawn_blocking(move || previous_release::server(&commit)).await.expect("build thread")
    };
    let (previous, took) = built;
    eprintln!("previous release {commit}: its server ready in {:.1} s", took.as_secs_f64());
    // Replicas share the master key, written as the previous release reads keys (base64 of 32 bytes, no `v2:`).
    let bytes: Vec<u8> = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()].iter().flat_map(|u| *u.as_bytes()).collect();
    let master = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes);
    let shared = ["--master-key", master.as_str()];
    // This release's server starts first, on a fresh database, and migrates it; the previous one joins.
    let new = ServerProcess::spawn(SERVER, &shared).await;
    let old = ServerProcess::spawn_beside(previous.to_str().expect("path"), &new, &shared).await;
    let api = Api {
        client: reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client"),
        org: new.org.clone(),
        key: new.key.clone(),
    };
    let target = target().await;
    let f = Arc::new(fixture(&api, &new.base, &target).await);
    let key = new.operator(SERVER, &["keys", "create", "--org", &new.org, "--preset", "runner"]).await;
    let key = key.lines().find_map(|l| l.trim_start().strip_prefix("key:")).expect("key").trim().to_owned();
    let creds = hookflow_tests::Creds { key, org: new.org.parse().expect("org") };
    let runners = [
        RunnerProcess::spawn(RUNNER, &new.base, &creds, &[], &["--concurrency", "4"]).await,
        RunnerProcess::spawn(RUNNER, &old.base, &creds, &[], &["--concurrency", "4"]).await,
    ];

    let (stop, answers): (Arc<AtomicBool>, Answers) = (Arc::default(), Answers::default());
    let workers: Vec<_> = [("new", new.base.clone()), ("previous", old.base.clone())]
        .into_iter()
        .map(|(name, base)| tokio::spawn(load(api.clone(), name, base, f.clone(), stop.clone(), answers.clone())))
        .collect();
    tokio::time::sleep(LOAD).await;
    stop.store(true, Ordering::SeqCst);
    let mut launched = Vec::new();
    for worker in workers {
        launched.extend(worker.await.expect("a load worker"));
    }

    // Every launch runs to its end, whichever server launched it and whichever runner claimed it.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for id in &launched {
        let url = format!("{}/flows/{}/executions/{id}", new.base, f.flow);
        let status = loop {
            let (_, execution) = api.call(Method::GET, url.clone(), None).await;
            let status = execution["status"].as_str().unwrap_or("").to_owned();
            if !matches!(status.as_str(), "queued" | "running" | "") || Instant::now() > deadline {
                break status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        *statuses.entry(status).or_default() += 1;
    }
    let answers = answers.lock().expect("answers").clone();
    for ((server, what), counts) in &answers {
        eprintln!("{server:>8} {what:<24} {counts:?}");
    }
    eprintln!("executions launched {}: {statuses:?}", launched.len());
    let failures: Vec<_> = answers
        .iter()
        .filter(|(_, counts)| counts.keys().any(|s| *s >= 500 || *s == 0))
        .map(|((server, what), counts)| format!("{server} {what}: {counts:?}"))
        .collect();
    let old_output = old.output();
    assert!(
        failures.is_empty(),
        "answers of 500 (or none): {failures:?}\nprevious release's output:\n{}",
        tail(&old_output)
    );
    for server in ["new", "previous"] {
        let launches = answers.get(&(server.to_owned(), "launch".to_owned())).and_then(|c| c.get(&201)).copied();
        assert!(launches.unwrap_or(0) > 0, "{server} launched flows");
    }
    assert_eq!(statuses.get("succeeded").copied(), Some(launched.len()), "{statuses:?}");
    drop(runners);
    old.stop().await;
    new.stop().await;
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
