//! Hardening IV (issue #47), the engine's findings over the real server: responses no longer amplify memory and
//! CPU (tries of a 32 MiB JSON array with 50 extractors keep the server's memory and `/healthz`; a 51st extractor is
//! refused at write and at try), values extracted from a response to a URL a launch chose are tainted, values of
//! webhook captures whose scheme signs no timestamp stay tainted, and NAT64, Teredo and Alibaba's metadata
//! address are refused.

use futures_util::future::join_all;
use hookflow_shared::api::resources::SecretInfo;
use hookflow_tests::TestApp;
use hookflow_tests::server::ServerProcess;
use hookflow_tests::signers::{self, Sign};
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");
const ARRAY_BYTES: usize = 32 * 1024 * 1024;

/// A node of `count` extractors over `url`: mostly jsonPath, some whole-body and xmlPath ones.
fn many_extractors(url: &str, count: usize) -> Value {
    let extractors: Vec<Value> = (0..count)
        .map(|i| match i % 10 {
            0 => json!({"name": format!("e{i}"), "kind": "body"}),
            1 => json!({"name": format!("e{i}"), "kind": "xmlPath", "expression": "count(//*)"}),
            _ => json!({"name": format!("e{i}"), "kind": "jsonPath", "expression": format!("$[{i}]")}),
        })
        .collect();
    json!({"id": "big", "kind": "request", "request": {"method": "GET", "url": url}, "extractors": extractors})
}

/// A local service answering `GET /array` with a JSON array of just under `ARRAY_BYTES` bytes (`[1,1,...]`, the
/// densest in parsed values; the engine reads 32 MiB at most); answers its base URL.
async fn array_service() -> (String, tokio_util::sync::CancellationToken) {
    let mut text = String::with_capacity(ARRAY_BYTES);
    text.push('[');
    while text.len() < ARRAY_BYTES - 3 {
        text.push_str("1,");
    }
    text.push_str("1]");
    let body = bytes::Bytes::from(text);
    let router = axum::Router::new().route("/array", axum::routing::get(move || std::future::ready(body.clone())));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).with_graceful_shutdown(stopped.cancelled_owned()).await;
    });
    (base, stop)
}

/// The server process's resident memory now (`VmRSS`), in bytes.
fn rss(server: &ServerProcess) -> u64 {
    let pid = server.child.id().expect("running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).expect("kB") * 1024
}

async fn tries_hold_memory_and_health(run_for: Duration) {
    let server = ServerProcess::spawn(SERVER, &[]).await;
    let (base, stop) = array_service().await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
    let send = |method: Method, path: &str, body: Option<Value>| {
        let mut request = client
            .request(method, format!("{}{path}", server.base))
            .header("x-api-key", &server.key)
            .header("x-organization-id", &server.org);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send()
    };
    let url = format!("{base}/array");
    let definition = json!({"nodes": [many_extractors(&url, 50)]});
    let created = send(Method::POST, "/flows", Some(json!({"name": "big", "definition": definition})))
        .await
        .expect("create the flow");
    assert_eq!(created.status(), 201);
    let flow = created.json::<Value>().await.expect("json")["id"].as_str().expect("id").to_owned();
    let try_path = format!("/flows/{flow}/try");

    // One try first: it reads the whole array, and every jsonPath and xmlPath extractor says the body is too large.
    let first: Value = send(Method::POST, &try_path, Some(json!({"node": many_extractors(&url, 50)})))
        .await
        .expect("try")
        .json()
        .await
        .expect("a node result");
    assert_eq!(first["status"], "error", "{first}");
    assert_eq!(first["response"]["body_size"], ARRAY_BYTES - 1, "the whole array was read");
    assert!(first["response"]["body"].as_str().expect("kept body").len() <= 64 * 1024);
    let error = first["error"].as_str().expect("error");
    assert!(error.contains("body too large to evaluate"), "{error}");

    // 51 extractors: refused at write and at try, the node named.
    let refused = send(Method::POST, &try_path, Some(json!({"node": many_extractors(&url, 51)}))).await.expect("try");
    assert_eq!(refused.status(), 400);
    let text = refused.text().await.expect("text");
    assert!(text.contains("at most 50 extractors") && text.contains("node `big`"), "{text}");

    let before = rss(&server);
    let started = Instant::now();
    let health = async {
        let mut slowest = Duration::ZERO;
        let mut probes = 0;
        while started.elapsed() < run_for {
            let asked = Instant::now();
            let reply = client.get(format!("{}/healthz", server.base)).send().await.expect("healthz");
            assert_eq!(reply.status(), 200);
            slowest = slowest.max(asked.elapsed());
            probes += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        (slowest, probes)
    };
    let peak = std::sync::atomic::AtomicU64::new(0);
    let tries = join_all((0..4).map(|_| async {
        let mut done = 0;
        while started.elapsed() < run_for {
            let reply =
                send(Method::POST, &try_path, Some(json!({"node": many_extractors(&url, 50)}))).await.expect("try");
            match reply.status().as_u16() {
                200 => done += 1,
                429 => tokio::time::sleep(Duration::from_millis(100)).await,
                other => panic!("a try answered {other}: {}", reply.text().await.unwrap_or_default()),
            }
            peak.fetch_max(rss(&server), std::sync::atomic::Ordering::Relaxed);
        }
        done
    }));
    let ((slowest, probes), done) = tokio::join!(health, tries);
    let growth = peak.into_inner().max(rss(&server)).saturating_sub(before);
    let done: usize = done.iter().sum();
    println!(
        "{done} tries of a 32 MiB array with 50 extractors in {} s: RSS {} MiB before, +{} MiB at most; \
         /healthz slowest {} ms over {probes} probes",
        run_for.as_secs(),
        before >> 20,
        growth >> 20,
        slowest.as_millis()
    );
    assert!(done >= 4, "tries completed: {done}");
    assert!(growth < 1024 * 1024 * 1024, "RSS grew by {} MiB", growth >> 20);
    assert!(slowest < Duration::from_secs(1), "/healthz took {slowest:?}");
    stop.cancel();
    server.stop().await;
}

#[tokio::test]
async fn tries_of_a_32_mib_array_with_50_extractors_keep_memory_and_health() {
    tries_hold_memory_and_health(Duration::from_secs(35)).await;
}

/// The issue's own figure: two minutes.
#[tokio::test]
#[ignore = "two minutes; the default suite runs the 35 s variant"]
async fn tries_of_a_32_mib_array_with_50_extractors_for_two_minutes() {
    tries_hold_memory_and_health(Duration::from_secs(120)).await;
}

#[tokio::test]
async fn a_node_with_51_extractors_is_refused_at_write_naming_the_node() {
    let app = TestApp::spawn().await;
    let definition = json!({"nodes": [many_extractors("http://127.0.0.1:9/", 51)]});
    let reply = app
        .call(Method::POST, "/flows", Some(&app.admin), Some(json!({"name": "big", "definition": definition})))
        .await;
    reply.assert_refused(400, "invalid_request", "node `big` extractors: a node has at most 50 extractors");
    let fifty = json!({"nodes": [many_extractors("http://127.0.0.1:9/", 50)]});
    let reply =
        app.call(Method::POST, "/flows", Some(&app.admin), Some(json!({"name": "ok", "definition": fifty}))).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    // A webhook node counts alike.
    let mut webhook = many_extractors("x", 51);
    webhook = json!({"id": "hook", "kind": "webhook", "webhook": {}, "extractors": webhook["extractors"]});
    let reply = app
        .call(Method::POST, "/flows", Some(&app.admin), Some(json!({"name": "w", "definition": {"nodes": [webhook]}})))
        .await;
    reply.assert_refused(400, "invalid_request", "node `hook` extractors");
}

#[tokio::test]
async fn nat64_teredo_and_alibaba_metadata_are_refused_before_any_connection() {
    let app = TestApp::spawn().await;
    // The admin organization may reach private networks (the first start's): still none of these.
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let flow = app.create_flow("tried", definition).await;
    for (url, what) in [
        ("http://100.100.100.200/latest/meta-data/", "link-local or cloud metadata"),
        ("http://[64:ff9b:1::a00:1]/", "reserved"),
        ("http://[64:ff9b::a9fe:a9fe]/", "reserved"),
        ("http://[2001::1]/", "reserved"),
        ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "reserved"),
    ] {
        let node = json!({"id": "probe", "kind": "request", "request": {"method": "GET", "url": url}});
        let started = Instant::now();
        let path = format!("/flows/{flow}/try");
        let reply = app.call(Method::POST, &path, Some(&app.admin), Some(json!({"node": node}))).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.body["status"], "error", "{url}: {}", reply.text);
        let error = reply.body["error"].as_str().unwrap_or_default();
        assert!(error.contains(what) && error.contains("not allowed for this organization"), "{url}: {error}");
        assert!(reply.body["response"].is_null(), "nothing answered: {}", reply.text);
        assert!(started.elapsed() < Duration::from_secs(5), "refused at once, not after a connection attempt");
    }
}

/// A flow that asks `{{lookup}}` where to go next, then sends the secret there.
fn laundering_flow() -> Value {
    json!({"nodes": [
        {"id": "ask", "kind": "request", "request": {"method": "GET", "url": "{{lookup}}"},
         "extractors": [{"name": "next", "kind": "body", "regex": "next=([^\"&]+)"}]},
        {"id": "send", "kind": "request",
         "request": {"method": "GET", "url": "{{next}}/echo", "headers": {"authorization": "Bearer {{secret.TOKEN}}"}}}
    ]})
}

#[tokio::test]
async fn a_value_extracted_from_a_launch_chosen_host_cannot_choose_where_a_secret_goes() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let trusted = Target::spawn().await;
    let chosen = Target::spawn_on("127.0.0.2:0").await;
    app.put::<SecretInfo>("/secrets/TOKEN", &json!({"value": "tok-launder-5a4b"}), 200).await;
    let flow = app.create_flow("launder", laundering_flow()).await;
    // The environment (the flow's author) names where to ask: what that host answers may lead the secret on.
    let env = json!({"variables": {"lookup": format!("{}/echo?next={}", trusted.base, trusted.base)}});
    app.put::<Value>(&format!("/flows/{flow}/environments/prod"), &env, 200).await;
    let run = |variables: Value| {
        let (app, flow) = (&app, flow.clone());
        async move {
            let body = json!({"environment": "prod", "variables": variables});
            let id = app.launch(&flow, body).await["id"].as_str().expect("id").to_owned();
            let done = app.wait_finished(&flow, &id).await;
            let nodes = app.get::<Value>(&format!("/flows/{flow}/executions/{id}/nodes"), 200).await;
            (done, nodes)
        }
    };
    let (fine, nodes) = run(json!({})).await;
    assert_eq!(fine["status"], "succeeded", "{fine} {nodes}");

    // A launch chooses where to ask, and that host answers with itself: the secret must not follow.
    let lookup = format!("{}/echo?next={}", chosen.base, chosen.base);
    let (laundered, nodes) = run(json!({"lookup": lookup})).await;
    assert_eq!(laundered["status"], "failed", "{laundered} {nodes}");
    let send = nodes["items"].as_array().expect("items").iter().find(|n| n["node_id"] == "send").expect("send");
    let error = send["error"].as_str().unwrap_or_default();
    assert!(error.contains("secret `TOKEN`") && error.contains("a launch variable chose"), "{error}");
    assert_eq!(chosen.hits(), 1, "the chosen host was asked once and never sent the secret");
}

/// Signs `body` for `scheme` (as its sender would) and posts it to `capture_url`.
async fn send_signed(app: &TestApp, capture_url: &str, body: &str, secret: &str, github: bool) -> u16 {
    let timestamp = chrono::Utc::now().timestamp();
    let sign = Sign { secret, body: body.as_bytes(), timestamp, url: capture_url };
    let signed = if github { signers::github(sign) } else { signers::generic(sign) };
    let mut request = app.client.post(capture_url).body(signed.body);
    for (name, value) in signed.headers {
        request = request.header(name, value);
    }
    request.send().await.expect("capture").status().as_u16()
}

#[tokio::test]
async fn webhook_values_of_schemes_without_a_signed_timestamp_stay_tainted() {
    let app = TestApp::spawn_with_embedded_runner_of(4, 1.0, Duration::from_secs(120), |settings| {
        settings.allow_private_targets = true;
    })
    .await;
    let chosen = Target::spawn_on("127.0.0.2:0").await;
    app.put::<SecretInfo>("/secrets/TOKEN", &json!({"value": "tok-replay-7c6d"}), 200).await;
    const KEY: &str = "shared-webhook-secret";
    let github = json!({"scheme": "github", "secrets": [KEY], "mode": "record"});
    let timed = json!({"scheme": "hmac", "secrets": [KEY], "mode": "record", "header": "X-Sig", "algorithm": "sha512",
        "encoding": "base64", "prefix": "sha512=", "timestamp_header": "X-Ts", "separator": ":"});
    for (verification, is_github, tainted) in [(github, true, true), (timed, false, false)] {
        let endpoint = app.create_webhook(json!({"name": "hooks", "verification": verification})).await;
        let (id, capture_url) = (endpoint["id"].as_str().expect("id"), endpoint["capture_url"].as_str().expect("url"));
        let definition = json!({"nodes": [
            {"id": "hook", "kind": "webhook", "webhook": {"webhook_id": id, "signature": "valid", "timeout_ms": 20000},
             "extractors": [{"name": "next", "kind": "jsonPath", "expression": "$.next"}]},
            {"id": "send", "kind": "request",
             "request": {"method": "GET", "url": "{{next}}/echo", "headers": {"authorization": "Bearer {{secret.TOKEN}}"}}}
        ]});
        let flow = app.create_flow(&format!("hook-{is_github}"), definition).await;
        let execution = app.launch(&flow, json!({})).await["id"].as_str().expect("id").to_owned();
        let body = json!({"next": chosen.base}).to_string();
        assert_eq!(send_signed(&app, capture_url, &body, KEY, is_github).await, 200);
        let done = app.wait_finished(&flow, &execution).await;
        let nodes = app.get::<Value>(&format!("/flows/{flow}/executions/{execution}/nodes"), 200).await;
        let hook = &nodes["items"][0];
        assert_eq!(hook["capture"]["signature"]["verdict"], "valid", "{nodes}");
        let send = &nodes["items"][1];
        if tainted {
            // A GitHub signature signs no timestamp: whoever saw one signed delivery can send it again.
            assert_eq!(done["status"], "failed", "{done} {nodes}");
            let error = send["error"].as_str().unwrap_or_default();
            assert!(error.contains("secret `TOKEN`") && error.contains("a launch variable chose"), "{error}");
            assert_eq!(chosen.hits(), 0, "the secret never reached the host a replayable capture named");
        } else {
            assert_eq!(done["status"], "succeeded", "a fresh timestamped signature vouches: {done} {nodes}");
            assert_eq!(chosen.hits(), 1);
        }
    }
}
