//! `hookflow import` (issue #54) with the real `hookflow` binary against the real server, fed with the exported
//! files of tests/fixtures/imports: a Postman collection previewed (its report printed, nothing stored) then
//! imported with a flow, curl lines imported as JSON, a Postman environment written into a flow; and its error
//! paths: an unknown format, a file past 10 MiB (refused before it is sent), a missing file, a document the server
//! refuses, a bad key, a key without the scope, and another organization's flow.

use hookflow_tests::TestApp;
use hookflow_tests::app::Creds;
use hookflow_tests::cli::{Cli, CliOutput};
use hookflow_tests::exec::scoped;
use hookflow_tests::scratch::Scratch;
use reqwest::Method;
use serde_json::{Value, json};

const HOOKFLOW: &str = env!("CARGO_BIN_EXE_hookflow-under-test");

fn fixture(name: &str) -> String {
    format!("{}/fixtures/imports/{name}", env!("CARGO_MANIFEST_DIR"))
}

async fn hookflow(app: &TestApp, creds: &Creds, args: &[&str]) -> CliOutput {
    Cli { binary: HOOKFLOW, base: app.base.clone() }.run(Some(creds), args).await
}

/// The UUID after `prefix` on the line of `stdout` that starts with it.
fn id_after<'a>(stdout: &'a str, prefix: &str) -> &'a str {
    let line = stdout.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix:?} in {stdout}"));
    let id = line[prefix.len()..].split(' ').next().unwrap_or_default();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id:?} in {line:?}");
    id
}

/// `(method, url)` of each request of a collection.
fn lines(collection: &Value) -> Vec<(String, String)> {
    let requests = collection["requests"].as_array().expect("requests");
    let text = |value: &Value| value.as_str().expect("a string").to_owned();
    requests.iter().map(|r| (text(&r["method"]), text(&r["url"]))).collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
}

const SHOP: [(&str, &str); 5] = [
    ("POST", "{{base_url}}/login"),
    ("GET", "{{base_url}}/users?limit=10"),
    ("POST", "{{base_url}}/users"),
    ("POST", "{{base_url}}/users/{{user_id}}/avatar"),
    ("GET", "{{base_url}}/health"),
];

#[tokio::test]
async fn the_cli_previews_then_imports_a_postman_collection_with_its_flow_and_curl_lines() {
    let app = TestApp::spawn().await;
    let postman = fixture("shop.postman_collection.json");

    let preview = hookflow(&app, &app.admin, &["import", "postman", &postman, "--preview"]).await;
    assert_eq!(preview.code, 0, "{}", preview.all());
    assert!(preview.stdout.contains("(Shop API): 5 requests in 3 folders"), "{}", preview.all());
    assert!(preview.stdout.starts_with("would import collection "), "{}", preview.all());
    assert!(preview.stdout.contains("11 test lines converted, 5 lines not converted"), "{}", preview.all());
    for place in [
        "  Auth/Log in:1: console.log(\"logging in as \" + pm.environment.get(\"user\"));",
        "  Users/List users:10: pm.expect(jsonData.items.length).to.be.above(0);",
        "  Users/List users:17: postman.setNextRequest(\"Create user\");",
        "  Users/Admin/Upload avatar:2: pm.variables.set(\"ts\", Date.now());",
        "  Health:2: tests[\"fast\"] = responseTime < 200;",
    ] {
        assert!(preview.stdout.lines().any(|l| l == place), "{place:?} listed with its place: {}", preview.stdout);
    }
    assert!(preview.stderr.contains("warning: ") && preview.stderr.contains("avatar.png"), "{}", preview.all());
    assert_eq!(app.admin(Method::GET, "/collections", None).await.body["items"], json!([]), "a preview stores nothing");
    assert_eq!(app.admin(Method::GET, "/flows", None).await.body["items"], json!([]));

    let imported = hookflow(&app, &app.admin, &["import", "postman", &postman, "--flow", "Shop smoke"]).await;
    assert_eq!(imported.code, 0, "{}", imported.all());
    let collection = id_after(&imported.stdout, "imported collection ");
    let flow = id_after(&imported.stdout, "imported flow ");
    assert!(imported.stdout.contains(&format!("imported flow {flow} (Shop smoke)")), "{}", imported.stdout);
    let stored = app.admin(Method::GET, &format!("/collections/{collection}"), None).await;
    assert_eq!(stored.status, 200, "{}", stored.text);
    assert_eq!(stored.body["name"], "Shop API");
    assert_eq!(lines(&stored.body), pairs(&SHOP));
    let stored_flow = app.admin(Method::GET, &format!("/flows/{flow}"), None).await;
    assert_eq!(stored_flow.body["name"], "Shop smoke");
    let nodes = stored_flow.body["definition"]["nodes"].as_array().expect("nodes");
    let methods: Vec<&str> = nodes.iter().map(|n| n["request"]["method"].as_str().unwrap_or_default()).collect();
    assert_eq!(methods, ["POST", "GET", "POST", "POST", "GET"]);
    assert_eq!(nodes[0]["assertions"][0], json!({"source": "status", "operator": "equals", "expected": 200}));

    // curl lines, named, the whole answer as JSON.
    let curl = fixture("shop.curl.txt");
    let json = hookflow(&app, &app.admin, &["import", "curl", &curl, "--name", "From curl", "--json"]).await;
    assert_eq!(json.code, 0, "{}", json.all());
    let answer: Value = serde_json::from_str(&json.stdout).unwrap_or_else(|e| panic!("{e}: {}", json.stdout));
    assert_eq!(answer["collection"]["name"], "From curl");
    assert_eq!(
        lines(&answer["collection"]),
        pairs(&[
            ("POST", "https://shop.example.com/api/login"),
            ("POST", "https://shop.example.com/api/users"),
            ("GET", "https://shop.example.com/api/search?q=coffee%20%26%20tea"),
            ("POST", "https://shop.example.com/api/users/7/avatar"),
            ("DELETE", "https://shop.example.com/api/users/7"),
        ])
    );
    assert_eq!(answer["collection"]["requests"][1]["body"], "name=Grace&role=admin");
    let id = answer["collection"]["id"].as_str().expect("an id");
    assert_eq!(app.admin(Method::GET, &format!("/collections/{id}"), None).await.status, 200, "stored");

    // A Postman environment into the flow just made.
    let environment = fixture("shop-staging.postman_environment.json");
    let written = hookflow(&app, &app.admin, &["import", "postman", &environment, "--flow-id", flow]).await;
    assert_eq!(written.code, 0, "{}", written.all());
    assert!(
        written.stdout.contains(&format!("imported environment Shop-staging of flow {flow}")),
        "{}",
        written.stdout
    );
    let listed = app.admin(Method::GET, &format!("/flows/{flow}/environments"), None).await;
    assert_eq!(listed.body["items"][0]["variables"]["user"], "ada", "{}", listed.text);
}

#[tokio::test]
async fn the_cli_refuses_unknown_formats_big_files_bad_keys_and_other_organizations() {
    let app = TestApp::spawn().await;
    let scratch = Scratch::new("import-cli");
    let curl = fixture("shop.curl.txt");

    let unknown = hookflow(&app, &app.admin, &["import", "word", &curl]).await;
    assert_eq!(unknown.code, 2, "{}", unknown.all());
    assert!(unknown.stderr.contains("invalid value 'word'"), "{}", unknown.all());
    assert!(unknown.stderr.contains("postman"), "the formats are listed: {}", unknown.all());

    // Past 10 MiB: refused before anything is sent (the server would answer 413 for the whole body).
    let big = scratch.join("big.curl.txt");
    std::fs::write(&big, format!("curl https://a.example/ -d '{}'\n", "x".repeat(10 * 1024 * 1024))).expect("write");
    let big = big.to_str().expect("a path");
    let too_big = hookflow(&app, &app.admin, &["import", "curl", big]).await;
    assert_eq!(too_big.code, 2, "{}", too_big.all());
    assert!(too_big.stderr.contains("larger than 10 MiB"), "{}", too_big.all());

    let missing = scratch.join("missing.json");
    let gone = hookflow(&app, &app.admin, &["import", "har", missing.to_str().expect("a path")]).await;
    assert_eq!(gone.code, 2, "{}", gone.all());
    assert!(gone.stderr.contains("cannot read") && gone.stderr.contains("missing.json"), "{}", gone.all());

    // A document the server refuses: its message and status, exit 4.
    let not_har = scratch.join("not.har");
    std::fs::write(&not_har, "{\"log\": {}}").expect("write");
    let refused = hookflow(&app, &app.admin, &["import", "har", not_har.to_str().expect("a path")]).await;
    assert_eq!(refused.code, 4, "{}", refused.all());
    assert!(refused.stderr.contains("log.entries") && refused.stderr.contains("400"), "{}", refused.all());

    // A bad key: 401, exit 4, the key never printed.
    let bad = Creds { key: "hf_not-a-real-key-5d0c2b7e".to_owned(), org: app.admin.org };
    let unknown_key = hookflow(&app, &bad, &["import", "curl", &curl]).await;
    assert_eq!(unknown_key.code, 4, "{}", unknown_key.all());
    assert!(unknown_key.stderr.contains("401"), "{}", unknown_key.all());
    assert!(!unknown_key.all().contains("not-a-real-key"), "the key is not printed: {}", unknown_key.all());

    // Scopes: collections:write to import, flows:write too for --flow.
    let reader = scoped(&app, app.admin.org, &["collections:read", "flows:write"]).await;
    let read_only = hookflow(&app, &reader, &["import", "curl", &curl, "--preview"]).await;
    assert_eq!(read_only.code, 4, "{}", read_only.all());
    assert!(read_only.stderr.contains("403 insufficient_scope"), "{}", read_only.all());
    let writer = scoped(&app, app.admin.org, &["collections:write"]).await;
    let no_flows = hookflow(&app, &writer, &["import", "curl", &curl, "--flow", "curl flow"]).await;
    assert_eq!(no_flows.code, 4, "{}", no_flows.all());
    assert!(no_flows.stderr.contains("403 insufficient_scope"), "{}", no_flows.all());
    assert_eq!(app.admin(Method::GET, "/collections", None).await.body["items"], json!([]), "nothing was stored");

    // Another organization's flow is not found.
    let flow = app.create_flow("Theirs", json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]})).await;
    let other = app.new_org("Other").await;
    let environment = fixture("shop-staging.postman_environment.json");
    let elsewhere = hookflow(&app, &other, &["import", "postman", &environment, "--flow-id", &flow]).await;
    assert_eq!(elsewhere.code, 4, "{}", elsewhere.all());
    assert!(elsewhere.stderr.contains("404 not_found"), "{}", elsewhere.all());
    let listed = app.admin(Method::GET, &format!("/flows/{flow}/environments"), None).await;
    assert_eq!(listed.body["items"], json!([]), "{}", listed.text);
}
