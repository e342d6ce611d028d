//! The real `hookflow` binary's other commands: webhook tail resuming after a dropped connection, forward
//! delivering binary bodies byte-exact, keys (with rotation), flows and webhooks; and the CI action's script run
//! as a workflow would run it.

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method as HttpMethod, Uri};
use axum::routing::any;
use hookflow_tests::TestApp;
use hookflow_tests::cli::Cli;
use hookflow_tests::proxy::Proxy;
use hookflow_tests::scratch::Scratch;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

const HOOKFLOW: &str = env!("CARGO_BIN_EXE_hookflow-under-test");

fn cli(base: &str) -> Cli {
    Cli { binary: HOOKFLOW, base: base.to_owned() }
}

async fn webhook(app: &TestApp) -> String {
    app.create_webhook(json!({"name": "deliveries"})).await["id"].as_str().expect("webhook id").to_owned()
}

#[tokio::test]
async fn tail_resumes_after_a_dropped_connection_without_gaps_or_repeats() {
    let app = TestApp::spawn().await;
    let id = webhook(&app).await;
    let upstream = app.base.trim_start_matches("http://").parse().expect("server address");
    let proxy = Proxy::start(upstream).await;
    let mut tail = cli(&proxy.url()).start(Some(&app.admin), &["webhooks", "tail", &id, "--json", "--count", "3"]);
    tail.wait_stderr("listening for requests").await;

    let first = app.capture(Method::POST, &format!("{id}/one"), "1").await;
    let line: Value = serde_json::from_str(&tail.stdout_line().await).expect("json line");
    assert_eq!(line["id"], first.body["request_id"]);

    // The connection drops and stays down while two more requests arrive.
    proxy.refuse(true);
    proxy.cut();
    tail.wait_stderr("resuming after event").await;
    let second = app.capture(Method::POST, &format!("{id}/two"), "2").await;
    let third = app.capture(Method::PUT, &format!("{id}/three"), "3").await;
    proxy.refuse(false);

    let mut ids = Vec::new();
    for _ in 0..2 {
        let line: Value = serde_json::from_str(&tail.stdout_line().await).expect("json line");
        ids.push(line["id"].clone());
    }
    assert_eq!(ids, [second.body["request_id"].clone(), third.body["request_id"].clone()]);
    let output = tail.finish().await;
    assert_eq!(output.code, 0, "{}", output.all());
    assert!(output.stderr.contains("reconnected"), "{}", output.all());
    assert_eq!(output.stdout.lines().count(), 3, "no capture twice: {}", output.stdout);
}

/// What the local server received.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    uri: String,
    headers: HeaderMap,
    body: Bytes,
}

async fn recorder() -> (String, Arc<Mutex<Vec<Received>>>) {
    let seen: Arc<Mutex<Vec<Received>>> = Arc::default();
    let store = Arc::clone(&seen);
    let router = Router::new().fallback(any(move |method: HttpMethod, uri: Uri, headers: HeaderMap, body: Bytes| {
        let store = Arc::clone(&store);
        async move {
            let received = Received { method: method.to_string(), uri: uri.to_string(), headers, body };
            store.lock().expect("lock").push(received);
            "thanks"
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (base, seen)
}

#[tokio::test]
async fn forward_replays_each_capture_byte_exact_to_a_local_server() {
    let app = TestApp::spawn().await;
    let id = webhook(&app).await;
    let (local, seen) = recorder().await;
    let mut forward = cli(&app.base)
        .start(Some(&app.admin), &["webhooks", "forward", &id, "--to", &format!("{local}/hooks"), "--count", "2"]);
    forward.wait_stderr("forwarding requests").await;

    // A small binary body (it travels in the stream as base64) and one over 64 KiB (fetched from `.../body`).
    let small: Vec<u8> = (0..=255u8).rev().collect();
    let large: Vec<u8> = (0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    for body in [&small, &large] {
        let headers = [("content-type", "application/octet-stream"), ("X-Signature", "sha256=abc")];
        let rest = format!("{id}/deliveries/7?x=1&x=2&note=a%20b");
        assert_eq!(app.capture_with(Method::POST, &rest, &headers, body.clone()).await.status, 200);
    }
    let output = forward.finish().await;
    assert_eq!(output.code, 0, "{}", output.all());
    assert_eq!(output.stdout.matches("POST /deliveries/7 -> 200").count(), 2, "{}", output.all());
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2);
    for (received, sent) in seen.iter().zip([&small, &large]) {
        assert_eq!(received.method, "POST");
        assert_eq!(received.uri, "/hooks/deliveries/7?x=1&x=2&note=a%20b");
        assert_eq!(received.headers["x-signature"], "sha256=abc");
        assert_eq!(received.headers["content-type"], "application/octet-stream");
        assert_eq!(received.body.as_ref(), sent.as_slice(), "the body arrived byte for byte");
    }
}

#[tokio::test]
async fn keys_can_be_created_listed_rotated_and_deleted() {
    let app = TestApp::spawn().await;
    let cli = cli(&app.base);
    let created = cli
        .run(Some(&app.admin), &["keys", "create", "--name", "ci", "--preset", "ci", "--expires-in", "30d", "--json"])
        .await;
    assert_eq!(created.code, 0, "{}", created.all());
    let key: Value = serde_json::from_str(&created.stdout).expect("json");
    let (id, secret) = (key["id"].as_str().expect("id"), key["key"].as_str().expect("secret"));
    assert!(secret.starts_with("hf_"));
    assert_eq!(key["scopes"], json!(["flows:read", "flows:execute"]));

    let listed = cli.run(Some(&app.admin), &["keys", "list"]).await;
    assert_eq!(listed.code, 0, "{}", listed.all());
    assert!(listed.stdout.contains(id) && listed.stdout.contains("flows:read"), "{}", listed.stdout);
    assert!(!listed.stdout.contains(secret), "lists never show secrets");

    let rotated = cli.run(Some(&app.admin), &["keys", "rotate", id, "--expires-in", "90d"]).await;
    assert_eq!(rotated.code, 0, "{}", rotated.all());
    assert!(rotated.stdout.contains(&format!("hookflow keys delete {id}")), "{}", rotated.stdout);
    let keys = app.api().keys().list(&[]).await.expect("keys").items;
    let replacement = keys.iter().find(|k| k.name.starts_with("ci (rotated ")).expect("new key");
    assert_eq!(serde_json::json!(replacement.scopes), key["scopes"]);
    assert!(replacement.expires_at.is_some());

    let deleted = cli.run(Some(&app.admin), &["keys", "delete", id]).await;
    assert_eq!(deleted.code, 0, "{}", deleted.all());
    assert_eq!(app.api().keys().get(id).await.expect_err("deleted").status(), 404);
    let gone = cli.run(Some(&app.admin), &["keys", "delete", id]).await;
    assert_eq!(gone.code, 4, "{}", gone.all());
    let bad = cli.run(Some(&app.admin), &["keys", "create", "--name", "x", "--scope", "no:such"]).await;
    assert_eq!(bad.code, 4, "the server refuses an unknown scope: {}", bad.all());
}

#[tokio::test]
async fn flows_and_webhooks_commands_round_trip() {
    let app = TestApp::spawn().await;
    let cli = cli(&app.base);
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let flow = app
        .admin(Method::POST, "/flows", Some(json!({"name": "exported", "tags": ["smoke"], "definition": definition})))
        .await;
    let flow = flow.body["id"].as_str().expect("id").to_owned();

    let listed = cli.run(Some(&app.admin), &["flows", "list", "--tag", "smoke"]).await;
    assert!(
        listed.code == 0 && listed.stdout.contains(&flow) && listed.stdout.contains("exported"),
        "{}",
        listed.all()
    );
    let published = cli.run(Some(&app.admin), &["flows", "publish", &flow, "--note", "first"]).await;
    assert!(published.code == 0 && published.stdout.contains("published version 1"), "{}", published.all());
    let scratch = Scratch::new("export");
    let file = scratch.join("flow.json");
    let exported = cli.run(Some(&app.admin), &["flows", "export", &flow, "-o", &file.display().to_string()]).await;
    assert_eq!(exported.code, 0, "{}", exported.all());
    let again = cli.run(Some(&app.admin), &["flows", "import", &file.display().to_string()]).await;
    assert_eq!(again.code, 4, "the name is taken in this organization: {}", again.all());
    assert!(again.stderr.contains("conflict"), "{}", again.all());
    // Another organization takes the document whole, published version included.
    let other = app.new_org("Other").await;
    let imported = cli.run(Some(&other), &["flows", "import", &file.display().to_string()]).await;
    assert_eq!(imported.code, 0, "{}", imported.all());
    let new_id = imported.stdout.split_whitespace().nth(2).expect("new id");
    let copy = app.api_as(&other).flows().get(new_id).await.expect("the copy");
    assert_eq!((copy.name.as_str(), copy.published_version), ("exported", Some(1)));
    let got = cli.run(Some(&other), &["flows", "get", new_id]).await;
    assert_eq!(serde_json::from_str::<Value>(&got.stdout).expect("json")["id"], new_id);
    let missing = cli.run(Some(&app.admin), &["flows", "import", "/nonexistent/file.json"]).await;
    assert_eq!(missing.code, 2, "{}", missing.all());

    let created = cli.run(Some(&app.admin), &["webhooks", "create", "--name", "stripe", "--json"]).await;
    assert_eq!(created.code, 0, "{}", created.all());
    let hook: Value = serde_json::from_str(&created.stdout).expect("json");
    assert!(
        hook["capture_url"].as_str().expect("url").ends_with(&format!("/webhook/{}", hook["id"].as_str().expect("id")))
    );
    let listed = cli.run(Some(&app.admin), &["webhooks", "list"]).await;
    assert!(listed.stdout.contains("stripe"), "{}", listed.all());
    let foreign = cli.run(Some(&other), &["flows", "get", &flow]).await;
    assert_eq!(foreign.code, 4, "another organization's flow answers 404: {}", foreign.all());
}

/// Operating II: `webhooks create` sets an endpoint's verification from flags; the secret is never printed, and
/// a misspelt scheme or mode is refused before anything is sent, naming the flag.
#[tokio::test]
async fn webhooks_create_takes_verification_flags() {
    let app = TestApp::spawn().await;
    let cli = cli(&app.base);
    let secret = "whsec_c2VjcmV0LXZhbHVlLWZvci1jbGk=";
    let created = cli
        .run(
            Some(&app.admin),
            &[
                "webhooks",
                "create",
                "--name",
                "signed",
                "--verification-scheme",
                "standard_webhooks",
                "--verification-secret",
                secret,
                "--verification-secret",
                "whsec_b3RoZXItc2VjcmV0LXZhbHVl",
                "--verification-mode",
                "enforce",
                "--json",
            ],
        )
        .await;
    assert_eq!(created.code, 0, "{}", created.all());
    assert!(!created.all().contains(secret), "the secret is not printed: {}", created.all());
    let hook: Value = serde_json::from_str(&created.stdout).expect("json");
    let read = app.admin(Method::GET, &format!("/webhooks/{}", hook["id"].as_str().expect("id")), None).await;
    let verification = &read.body["verification"];
    assert_eq!(
        (verification["scheme"].as_str(), verification["mode"].as_str(), verification["secrets_count"].as_u64()),
        (Some("standard_webhooks"), Some("enforce"), Some(2)),
        "{}",
        read.text
    );

    let scheme = cli
        .run(
            Some(&app.admin),
            &["webhooks", "create", "--name", "x", "--verification-scheme", "nope", "--verification-secret", "s"],
        )
        .await;
    assert_eq!(scheme.code, 2, "{}", scheme.all());
    assert!(scheme.stderr.contains("--verification-scheme"), "{}", scheme.all());
    let mode = cli
        .run(
            Some(&app.admin),
            &[
                "webhooks",
                "create",
                "--name",
                "x",
                "--verification-scheme",
                "github",
                "--verification-secret",
                "s",
                "--verification-mode",
                "sometimes",
            ],
        )
        .await;
    assert_eq!(mode.code, 2, "{}", mode.all());
    assert!(mode.stderr.contains("--verification-mode"), "{}", mode.all());
    let lonely = cli.run(Some(&app.admin), &["webhooks", "create", "--name", "x", "--verification-secret", "s"]).await;
    assert_eq!(lonely.code, 2, "a secret without a scheme is a usage error: {}", lonely.all());
    let listed = app.admin(Method::GET, "/webhooks", None).await;
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(1), "nothing else was made: {}", listed.text);
}

/// The action's script, as the workflow runner would start it: inputs in INPUT_* variables, outputs to a file.
async fn action(app: &TestApp, inputs: &[(&str, &str)]) -> (i32, String, String, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/github-action/run.sh");
    let dir = Scratch::new("action");
    let outputs = dir.join("outputs");
    let mut command = tokio::process::Command::new("bash");
    command
        .arg(script)
        .env_remove("SERVICE_API_KEY")
        .env_remove("SERVICE_ORGANIZATION_ID")
        .env("GITHUB_OUTPUT", &outputs)
        .env("RUNNER_TEMP", &dir)
        .env("NO_COLOR", "1")
        .env("INPUT_HOOKFLOW_PATH", HOOKFLOW)
        .env("INPUT_BASE_URL", &app.base)
        .current_dir(&dir);
    for (name, value) in inputs {
        command.env(name, value);
    }
    let output = command.output().await.expect("run the action script");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        std::fs::read_to_string(&outputs).unwrap_or_default(),
    )
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test]
async fn the_ci_action_masks_the_key_first_and_fails_the_job_when_a_flow_fails() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let good = app
        .create_flow(
            "good",
            json!({"nodes": [{"id": "orders", "kind": "request",
        "request": {"method": "GET", "url": format!("{}/orders", target.base)}}]}),
        )
        .await;
    let bad = app
        .create_flow(
            "bad",
            json!({"nodes": [{"id": "boom", "kind": "request",
        "request": {"method": "GET", "url": format!("{}/status/500", target.base)},
        "extractors": [{"name": "status", "kind": "statusCode"}],
        "assertions": [{"source": "status", "operator": "equals", "expected": 200}]}]}),
        )
        .await;
    let org = app.admin.org.to_string();
    let key = app.admin.key.clone();
    let marker = std::env::temp_dir().join(format!("hookflow-injected-{}", uuid::Uuid::now_v7()));
    // Shell text in an input stays data: the id list is split, never evaluated.
    let injected = format!("{good}, $(touch {})", marker.display());
    let (code, stdout, stderr, outputs) = action(
        &app,
        &[
            ("INPUT_API_KEY", &key),
            ("INPUT_ORGANIZATION_ID", &org),
            ("INPUT_FLOW_IDS", &format!("{good}\n{good}")),
            ("INPUT_REPORT_PATH", "reports/hookflow.xml"),
        ],
    )
    .await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(stdout.lines().next(), Some(format!("::add-mask::{key}").as_str()), "masking comes first");
    assert_eq!(format!("{stdout}{stderr}").matches(&key).count(), 1, "the key appears only in the mask command");
    assert!(outputs.contains("exit-code=0") && outputs.contains("report-path=reports/hookflow.xml"), "{outputs}");

    let (code, stdout, _, outputs) = action(
        &app,
        &[("INPUT_API_KEY", &key), ("INPUT_ORGANIZATION_ID", &org), ("INPUT_FLOW_IDS", &format!("{good},{bad}"))],
    )
    .await;
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("::error title=hookflow::a flow did not pass"), "{stdout}");
    assert!(outputs.contains("exit-code=1"), "{outputs}");

    let (code, stdout, _, _) = action(&app, &[("INPUT_ORGANIZATION_ID", &org), ("INPUT_FLOW_IDS", &good)]).await;
    assert_eq!(code, 2, "{stdout}");
    assert!(stdout.contains("api-key input is empty") && !stdout.contains("::add-mask::"), "{stdout}");

    let (code, stdout, stderr, _) =
        action(&app, &[("INPUT_API_KEY", &key), ("INPUT_ORGANIZATION_ID", &org), ("INPUT_FLOW_IDS", &injected)]).await;
    assert_eq!(code, 2, "the injected text is passed on as a (bad) flow id: {stdout}\n{stderr}");
    assert!(!marker.exists(), "nothing in an input was executed");

    let yaml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/github-action/action.yml"))
        .expect("action.yml");
    for line in yaml.lines().filter(|l| l.contains("${{ inputs.")) {
        assert!(line.trim_start().starts_with("INPUT_"), "inputs only reach the script as env: {line}");
    }
}

#[tokio::test]
async fn collections_are_imported_and_synced_from_the_command_line() {
    let app = TestApp::spawn().await;
    let cli = cli(&app.base);
    let dir = Scratch::new("cli-openapi");
    let petstore = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/openapi/petstore-3.0.yaml"))
        .expect("petstore");
    let (v1, v2) = (dir.join("v1.yaml"), dir.join("v2.yaml"));
    std::fs::write(&v1, &petstore).expect("v1");
    std::fs::write(&v2, petstore.replace("summary: List all pets", "summary: List the pets")).expect("v2");

    let imported = cli
        .run(Some(&app.admin), &["collections", "import", "--file", &v1.display().to_string(), "--name", "Pets"])
        .await;
    assert_eq!(imported.code, 0, "{}", imported.all());
    assert!(imported.stdout.contains("3 requests in 1 folders"), "{}", imported.stdout);
    let id = imported.stdout.split_whitespace().nth(2).expect("id").to_owned();
    let listed = cli.run(Some(&app.admin), &["collections", "list"]).await;
    assert!(listed.stdout.contains(&id) && listed.stdout.contains("Pets"), "{}", listed.all());

    let preview = cli
        .run(Some(&app.admin), &["collections", "sync", &id, "--file", &v2.display().to_string(), "--preview"])
        .await;
    assert_eq!(preview.code, 0, "{}", preview.all());
    assert!(preview.stdout.contains("~ GET /pets (List all pets) [summary]"), "{}", preview.stdout);
    assert!(preview.stdout.contains("0 added, 1 modified, 0 removed, 2 unchanged"), "{}", preview.stdout);
    let applied = cli.run(Some(&app.admin), &["collections", "sync", &id]).await;
    assert_eq!(applied.code, 0, "{}", applied.all());
    assert!(applied.stdout.contains("1 modified") && applied.stdout.contains("0 deleted"), "{}", applied.stdout);
    let collection = app.api().collections().get(id).await.expect("the collection");
    assert!(collection.requests.iter().any(|r| r.name == "List the pets"));

    let broken = dir.join("broken.yaml");
    std::fs::write(&broken, "openapi: 3.0.3\ninfo: [").expect("broken");
    let refused = cli.run(Some(&app.admin), &["collections", "import", "--file", &broken.display().to_string()]).await;
    assert_eq!(refused.code, 4, "{}", refused.all());
    assert!(refused.stderr.contains("YAML"), "{}", refused.all());
    let neither = cli.run(Some(&app.admin), &["collections", "import"]).await;
    assert_eq!(neither.code, 2, "{}", neither.all());
}

#[tokio::test]
async fn the_action_refuses_a_report_path_that_would_write_other_outputs() {
    let app = TestApp::spawn().await;
    let inputs = [
        ("INPUT_API_KEY", app.admin.key.as_str()),
        ("INPUT_ORGANIZATION_ID", &app.admin.org.to_string()),
        ("INPUT_TAGS", "smoke"),
        ("INPUT_REPORT_PATH", "report.xml\nexit-code=0"),
    ];
    let inputs: Vec<(&str, &str)> = inputs.iter().map(|(k, v)| (*k, *v)).collect();
    let (code, stdout, _, outputs) = action(&app, &inputs).await;
    assert_eq!(code, 2, "{stdout}");
    assert!(stdout.contains("line break"), "{stdout}");
    assert!(!outputs.contains("exit-code=0"), "nothing was injected: {outputs:?}");
}

#[tokio::test]
async fn the_cli_never_follows_a_redirect_with_its_key_nor_sends_it_in_clear_text() {
    let app = TestApp::spawn().await;
    let elsewhere = hookflow_tests::target::Target::spawn_on("127.0.0.2:0").await;
    let redirecting = hookflow_tests::target::Target::spawn().await;
    // A server whose every answer is a redirect to another host.
    let to = format!("{}/echo", elsewhere.base);
    let base = format!("{}/redirect?to={to}&", redirecting.base);
    let hooks = Cli { binary: HOOKFLOW, base: base.trim_end_matches('&').to_owned() };
    let followed = hooks.run(Some(&app.admin), &["flows", "list"]).await;
    assert_ne!(followed.code, 0, "{}", followed.all());
    assert_eq!(elsewhere.hits(), 0, "the key never went to the other host");
    let remote = Cli { binary: HOOKFLOW, base: "http://hookflow.invalid:8080".to_owned() };
    let clear = remote.run(Some(&app.admin), &["flows", "list"]).await;
    assert_eq!(clear.code, 2, "{}", clear.all());
    assert!(clear.stderr.contains("clear text"), "{}", clear.all());
}
