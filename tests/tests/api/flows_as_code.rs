//! Flows as code (issue #52, part A) with the real `hookflow` binary against the real server, in a temporary Git
//! repository: `hookflow run` of flow files (a changed bare definition, a flow object, an exported document with
//! `--env`) runs what the working tree holds without touching stored flows or the audit log, recording the
//! definition's SHA-256 and the commit; `hookflow apply` plans, writes only what differs (twice: nothing the
//! second time), diffs a changed definition, prunes only managed flows and refuses conflicting, duplicate and
//! missing keys; `hookflow export --all` writes files that come back byte for byte.

use hookflow_tests::TestApp;
use hookflow_tests::cli::{Cli, CliOutput};
use hookflow_tests::exec::scoped;
use hookflow_tests::scratch::Scratch;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use std::path::Path;

const HOOKFLOW: &str = env!("CARGO_BIN_EXE_hookflow-under-test");

fn cli(app: &TestApp) -> Cli {
    Cli { binary: HOOKFLOW, base: app.base.clone() }
}

/// Runs `git args...` in `repo`; answers its standard output, trimmed.
fn git(repo: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=ci", "-c", "user.email=ci@example.com", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .expect("git");
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

async fn run(app: &TestApp, args: &[&str]) -> CliOutput {
    cli(app).run(Some(&app.admin), args).await
}

async fn audit_entries(app: &TestApp) -> Value {
    app.admin(Method::GET, "/audit-log?limit=100", None).await.body["items"].clone()
}

#[tokio::test]
async fn run_of_changed_files_runs_the_working_tree_and_stores_no_flow() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let repo = Scratch::new("flows-as-code");
    git(&repo, &["init", "-q"]);
    let orders = repo.join("flows/orders.json");
    let bare = |query: &str| {
        format!(
            "{{\"nodes\": [{{\"id\": \"orders\", \"kind\": \"request\",\n  \"request\": {{\"method\": \"GET\", \"url\": \"{}/orders{query}\"}},\n  \"assertions\": [{{\"source\": \"status\", \"operator\": \"equals\", \"expected\": 200}}],\n  \"extractors\": [{{\"name\": \"status\", \"kind\": \"statusCode\"}}]}}]}}\n",
            target.base
        )
    };
    write(&orders, &bare(""));
    // A flow object: its `definition` member's text is what is sent and hashed.
    let member = format!(
        "{{ \"nodes\": [ {{\"id\": \"login\", \"kind\": \"request\", \"request\": {{\"method\": \"POST\", \"url\": \"{}/login\", \"headers\": {{\"content-type\": \"application/json\"}}, \"body\": \"{{\\\"user\\\": \\\"ci\\\"}}\"}}}} ] }}",
        target.base
    );
    write(
        &repo.join("flows/nested/login.json"),
        &format!("{{\"key\": \"login\", \"name\": \"login file\", \"definition\": {member}}}\n"),
    );
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "flows"]);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let branch = git(&repo, &["symbolic-ref", "--short", "HEAD"]);
    // Changed after the commit: the run takes the file as it is now.
    let changed = bare("?changed=1");
    write(&orders, &changed);

    let flows_before = app.admin(Method::GET, "/flows", None).await.body;
    let audit_before = audit_entries(&app).await;
    let report = repo.join("out/report.json");
    let junit = repo.join("out/junit.xml");
    let folder = repo.join("flows");
    let output = run(
        &app,
        &[
            "run",
            folder.to_str().expect("path"),
            "--report",
            &format!("json={}", report.display()),
            "--report",
            &format!("junit={}", junit.display()),
        ],
    )
    .await;
    assert_eq!(output.code, 0, "{}", output.all());
    assert!(output.stdout.contains("2 of 2 flows passed"), "{}", output.all());

    let listed = app.admin(Method::GET, "/executions?source=inline", None).await.body;
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "{listed}");
    let of = |file: &str| {
        items.iter().find(|e| e["source"]["path"].as_str().is_some_and(|p| p.ends_with(file))).expect(file).clone()
    };
    let (orders_run, login_run) = (of("orders.json"), of("login.json"));
    for run in [&orders_run, &login_run] {
        assert!(run["flow_id"].is_null());
        assert_eq!((run["status"].as_str(), run["trigger"].as_str()), (Some("succeeded"), Some("cli")), "{run}");
        assert_eq!(run["source"]["git_commit"].as_str(), Some(head.as_str()));
        assert_eq!(run["source"]["git_ref"].as_str(), Some(branch.as_str()));
    }
    let without_newline = changed.strip_suffix('\n').expect("a final newline");
    assert_eq!(orders_run["source"]["definition_sha256"].as_str(), Some(sha256(without_newline).as_str()));
    assert_eq!(login_run["source"]["definition_sha256"].as_str(), Some(sha256(&member).as_str()));
    assert_eq!(login_run["source"]["path"].as_str(), Some(repo.join("flows/nested/login.json").to_str().expect("p")));
    let id = orders_run["id"].as_str().expect("id");
    let nodes = app.admin(Method::GET, &format!("/executions/{id}/nodes"), None).await.body;
    assert_eq!(
        nodes["items"][0]["request"]["url"].as_str(),
        Some(format!("{}/orders?changed=1", target.base).as_str())
    );

    assert_eq!(app.admin(Method::GET, "/flows", None).await.body, flows_before, "no flow was made or changed");
    assert_eq!(audit_entries(&app).await, audit_before, "the run wrote nothing to the audit log");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    let paths: Vec<&str> = report["flows"]
        .as_array()
        .map_or_else(Vec::new, |runs| runs.iter().filter_map(|r| r["path"].as_str()).collect());
    assert_eq!(paths.len(), 2, "the JSON report names each file: {report}");
    let junit = std::fs::read_to_string(&junit).expect("junit");
    assert_eq!(junit.matches("<testsuite ").count(), 2, "{junit}");
    assert!(junit.contains("name=\"path\""), "{junit}");
}

#[tokio::test]
async fn an_exported_document_runs_with_the_environment_env_chooses() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let dir = Scratch::new("flows-as-code-doc");
    let document = json!({
        "format": "hookflow.flow/v1",
        "flow": {"name": "orders doc", "key": "orders-doc", "definition": {"nodes": [
            {"id": "orders", "kind": "request", "request": {"method": "GET", "url": "{{base}}/orders"},
             "extractors": [{"name": "count", "kind": "jsonPath", "expression": "$.count"}],
             "assertions": [{"source": "count", "operator": "equals", "expected": 2}]}]}},
        "versions": [],
        "environments": [{"key": "staging", "variables": {"base": target.base}}]
    });
    let file = dir.join("orders.json");
    write(&file, &serde_json::to_string_pretty(&document).expect("json"));
    let file = file.to_str().expect("path");
    let ran = run(&app, &["run", file, "--env", "staging"]).await;
    assert_eq!(ran.code, 0, "{}", ran.all());
    let listed = app.admin(Method::GET, "/executions?source=inline", None).await.body;
    assert_eq!(listed["items"][0]["environment"], "staging");
    assert!(listed["items"][0]["source"]["git_commit"].is_null(), "not in a repository");
    let missing = run(&app, &["run", file, "--env", "prod"]).await;
    assert_eq!(missing.code, 2, "{}", missing.all());
    assert!(missing.stderr.contains("no environment `prod`"), "{}", missing.all());
    // A flow file needs only flows:execute (no secrets): the run makes nothing the key could not.
    let executor = scoped(&app, app.admin.org, &["flows:execute"]).await;
    let as_executor = cli(&app).run(Some(&executor), &["run", file, "--env", "staging"]).await;
    assert_eq!(as_executor.code, 0, "{}", as_executor.all());
}

/// A flow file in export's layout.
fn flow_file(key: &str, delay_ms: u64) -> String {
    let object = json!({
        "key": key,
        "name": format!("flow {key}"),
        "description": if key == "a" { Value::Null } else { json!(format!("about {key}")) },
        "tags": ["smoke", key],
        "definition": {"timeout_s": 30, "nodes": [{"kind": "delay", "id": "wait", "delay_ms": delay_ms}]}
    });
    serde_json::to_string_pretty(&object).expect("json") + "\n"
}

/// Every flow's (key, managed, draft_revision, updated_at), by name.
async fn snapshot(app: &TestApp) -> Vec<Value> {
    let mut flows: Vec<Value> = app.admin(Method::GET, "/flows?limit=100", None).await.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|f| json!([f["name"], f["key"], f["managed"], f["draft_revision"], f["updated_at"]]))
        .collect();
    flows.sort_by_key(|f| f[0].as_str().unwrap_or_default().to_owned());
    flows
}

#[tokio::test]
async fn apply_plans_writes_only_what_differs_prunes_managed_flows_and_export_round_trips() {
    let app = TestApp::spawn().await;
    let dir = Scratch::new("flows-as-code-apply");
    let folder = dir.join("flows");
    for key in ["a", "b", "c", "d", "e"] {
        write(&folder.join(format!("{key}.json")), &flow_file(key, 1));
    }
    let manual = app.create_flow("manual", json!({"nodes": [{"id": "w", "kind": "delay", "delay_ms": 1}]})).await;
    let hand = app
        .post::<Value>(
            "/flows",
            &json!({"name": "hand", "key": "hand",
        "definition": {"nodes": [{"id": "w", "kind": "delay", "delay_ms": 1}]}}),
            201,
        )
        .await;
    assert_eq!((hand["key"].as_str(), hand["managed"].as_bool()), (Some("hand"), Some(false)));
    let f = folder.to_str().expect("path");

    let plan = run(&app, &["apply", f, "--plan"]).await;
    assert_eq!(plan.code, 0, "{}", plan.all());
    assert!(plan.stdout.contains("5 to add, 0 to change, 0 to remove."), "{}", plan.all());
    assert_eq!(plan.stdout.matches("+ add").count(), 5, "{}", plan.all());
    assert_eq!(snapshot(&app).await.len(), 2, "the plan wrote nothing");

    let applied = run(&app, &["apply", f]).await;
    assert_eq!(applied.code, 0, "{}", applied.all());
    let made = snapshot(&app).await;
    assert_eq!(made.len(), 7);
    let a = app.admin(Method::GET, "/flows?key=a", None).await.body;
    assert_eq!(a["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        (a["items"][0]["managed"].as_bool(), a["items"][0]["tags"].clone()),
        (Some(true), json!(["smoke", "a"]))
    );

    let audit = audit_entries(&app).await;
    let again = run(&app, &["apply", f]).await;
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(again.stdout.contains("0 to add, 0 to change, 0 to remove."), "{}", again.all());
    assert_eq!(snapshot(&app).await, made, "the second apply wrote nothing");
    assert_eq!(audit_entries(&app).await, audit);

    write(&folder.join("c.json"), &flow_file("c", 5));
    let plan = run(&app, &["apply", f, "--plan"]).await;
    assert!(plan.stdout.contains("0 to add, 1 to change, 0 to remove."), "{}", plan.all());
    assert!(plan.stdout.contains("~ change  c (flow c): definition"), "{}", plan.all());
    assert!(
        plan.stdout.contains("-      \"delay_ms\": 1") && plan.stdout.contains("+      \"delay_ms\": 5"),
        "{}",
        plan.all()
    );
    assert!(plan.stdout.contains("@@ "), "a unified diff: {}", plan.all());
    assert_eq!(run(&app, &["apply", f]).await.code, 0);
    let c = app.admin(Method::GET, "/flows?key=c", None).await.body["items"][0].clone();
    assert_eq!((c["draft_revision"].as_i64(), c["definition"]["nodes"][0]["delay_ms"].as_i64()), (Some(2), Some(5)));

    std::fs::remove_file(folder.join("e.json")).expect("rm");
    let kept = run(&app, &["apply", f]).await;
    assert!(kept.stdout.contains("0 to remove."), "without --prune nothing goes: {}", kept.all());
    let plan = run(&app, &["apply", f, "--prune", "--plan"]).await;
    assert!(
        plan.stdout.contains("0 to add, 0 to change, 1 to remove.") && plan.stdout.contains("- remove  e"),
        "{}",
        plan.all()
    );
    assert_eq!(run(&app, &["apply", f, "--prune"]).await.code, 0);
    let names: Vec<Value> = snapshot(&app).await.iter().map(|f| f[0].clone()).collect();
    assert_eq!(
        names,
        json!(["flow a", "flow b", "flow c", "flow d", "hand", "manual"]).as_array().expect("names").clone()
    );

    // A key of a flow made by hand refuses the folder; so do two files with one key and a file without a key.
    write(&folder.join("hand.json"), &flow_file("hand", 1));
    let conflict = run(&app, &["apply", f]).await;
    assert_eq!(conflict.code, 2, "{}", conflict.all());
    assert!(conflict.stderr.contains("hand.json") && conflict.stderr.contains("made by hand"), "{}", conflict.all());
    std::fs::remove_file(folder.join("hand.json")).expect("rm");
    write(&folder.join("copy.json"), &flow_file("a", 1));
    let duplicate = run(&app, &["apply", f]).await;
    assert_eq!(duplicate.code, 2, "{}", duplicate.all());
    assert!(duplicate.stderr.contains("a.json") && duplicate.stderr.contains("copy.json"), "{}", duplicate.all());
    write(&folder.join("copy.json"), "{\"nodes\": []}\n");
    let keyless = run(&app, &["apply", f]).await;
    assert_eq!(keyless.code, 2, "{}", keyless.all());
    assert!(keyless.stderr.contains("copy.json has no key"), "{}", keyless.all());
    std::fs::remove_file(folder.join("copy.json")).expect("rm");
    let after_refusals = snapshot(&app).await;
    assert_eq!(after_refusals.len(), 6, "refused folders wrote nothing");
    let hand_id = hand["id"].as_str().expect("id");
    app.patch::<Value>(&format!("/flows/{hand_id}"), &json!({"key": null}), 200).await;

    let out = dir.join("out");
    let exported = run(&app, &["export", "--all", out.to_str().expect("path")]).await;
    assert_eq!(exported.code, 0, "{}", exported.all());
    assert!(
        exported.stdout.contains("skipped (no key): manual") && exported.stdout.contains(&manual),
        "{}",
        exported.all()
    );
    assert!(exported.stdout.contains("skipped (no key): hand"), "{}", exported.all());
    for key in ["a", "b", "c", "d"] {
        let written = std::fs::read(out.join(format!("{key}.json"))).expect("exported");
        let source = std::fs::read(folder.join(format!("{key}.json"))).expect("source");
        assert_eq!(
            String::from_utf8_lossy(&written),
            String::from_utf8_lossy(&source),
            "{key} came back byte for byte"
        );
    }
    let plan = run(&app, &["apply", out.to_str().expect("path"), "--plan"]).await;
    assert!(plan.stdout.contains("0 to add, 0 to change, 0 to remove."), "{}", plan.all());
}

#[tokio::test]
async fn flow_keys_are_unique_checked_and_found() {
    let app = TestApp::spawn().await;
    let definition = json!({"nodes": [{"id": "w", "kind": "delay", "delay_ms": 1}]});
    let made = app.post::<Value>("/flows", &json!({"name": "one", "key": "one", "definition": definition}), 201).await;
    let taken =
        app.admin(Method::POST, "/flows", Some(json!({"name": "two", "key": "one", "definition": definition}))).await;
    taken.assert_refused(409, "conflict", "key");
    for key in ["Upper", "-lead", "a b", &"x".repeat(65)] {
        let bad =
            app.admin(Method::POST, "/flows", Some(json!({"name": "x", "key": key, "definition": definition}))).await;
        bad.assert_refused(400, "invalid_request", "key");
    }
    let id = made["id"].as_str().expect("id");
    let managed = app.patch::<Value>(&format!("/flows/{id}"), &json!({"managed": true, "key": "uno"}), 200).await;
    assert_eq!((managed["key"].as_str(), managed["managed"].as_bool()), (Some("uno"), Some(true)));
    // PUT without key or managed keeps both.
    let put = app.put::<Value>(&format!("/flows/{id}"), &json!({"name": "one", "definition": definition}), 200).await;
    assert_eq!((put["key"].as_str(), put["managed"].as_bool()), (Some("uno"), Some(true)));
    let found = app.admin(Method::GET, "/flows?key=uno", None).await.body;
    assert_eq!(found["items"][0]["id"].as_str(), Some(id));
    let none = app.admin(Method::GET, "/flows?key=one", None).await.body;
    assert_eq!(none["items"].as_array().map(Vec::len), Some(0));
    // The same key in another organization is another flow's.
    let other = app.new_org("other").await;
    let theirs = app
        .call(
            Method::POST,
            "/flows",
            Some(&other),
            Some(json!({"name": "one", "key": "uno", "definition": definition})),
        )
        .await;
    assert_eq!(theirs.status, 201, "{}", theirs.text);
    let mine = app.call(Method::GET, "/flows?key=uno", Some(&other), None).await.body;
    assert_ne!(mine["items"][0]["id"].as_str(), Some(id));
}
