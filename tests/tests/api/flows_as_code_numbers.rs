//! Regression (issue #52): `hookflow apply` compared definitions as text, so a file saying `1.0` (or `1e2`, `-0`)
//! where the server stores `1` (a flow the app or a script wrote: JavaScript writes `1`) was a change every time
//! it was planned or applied. Definitions are now compared as JSON, numbers by value and members in order: such a
//! file, and a folder `export --all` wrote, are no change and apply writes nothing; a number that really changed
//! is still a change, with its diff, and once applied is no change either.

use hookflow_tests::TestApp;
use hookflow_tests::cli::{Cli, CliOutput};
use hookflow_tests::scratch::Scratch;
use reqwest::Method;
use serde_json::{Value, json};
use std::path::Path;

const HOOKFLOW: &str = env!("CARGO_BIN_EXE_hookflow-under-test");

async fn run(app: &TestApp, args: &[&str]) -> CliOutput {
    Cli { binary: HOOKFLOW, base: app.base.clone() }.run(Some(&app.admin), args).await
}

/// A flow object whose definition writes numbers the way people and editors do.
fn numbers_file(x: &str) -> String {
    format!(
        r#"{{
  "key": "numbers",
  "name": "numbers",
  "description": null,
  "tags": [],
  "definition": {{
    "nodes": [{{"kind": "delay", "id": "wait", "delay_ms": 1}}],
    "layout": {{"wait": {{"x": {x}, "y": 1e2, "z": -0, "scale": [0.50, 2E0, -1.25e1]}}}}
  }}
}}
"#
    )
}

/// The flow's (draft_revision, updated_at) and the audit log's length.
async fn written(app: &TestApp) -> (Value, Value, usize) {
    let flow = app.admin(Method::GET, "/flows?key=numbers", None).await.body["items"][0].clone();
    let audit = app.admin(Method::GET, "/audit-log?limit=100", None).await.body["items"].clone();
    (flow["draft_revision"].clone(), flow["updated_at"].clone(), audit.as_array().map_or(0, Vec::len))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

#[tokio::test]
async fn numbers_written_another_way_are_no_change_and_a_changed_number_is_one() {
    let app = TestApp::spawn().await;
    // The flow as another client (the app, a script) wrote it: JavaScript writes `1`, `100` and `0`.
    let made: Value = app
        .post(
            "/flows",
            &json!({"name": "numbers", "key": "numbers", "managed": true, "description": null, "tags": [],
                "definition": {"nodes": [{"kind": "delay", "id": "wait", "delay_ms": 1}],
                    "layout": {"wait": {"x": 1, "y": 100, "z": 0, "scale": [0.5, 2, -12.5]}}}}),
            201,
        )
        .await;
    let id = made["id"].as_str().expect("id").to_owned();
    let raw = app.admin(Method::GET, &format!("/flows/{id}"), None).await.text;
    assert!(raw.contains(r#""x":1,"y":100,"z":0"#), "the server answers the numbers as written: {raw}");
    let dir = Scratch::new("flows-as-code-numbers");
    let folder = dir.join("flows");
    write(&folder.join("numbers.json"), &numbers_file("1.0"));
    let f = folder.to_str().expect("path");
    let before = written(&app).await;

    // The file says `1.0`, `1e2`, `-0`, `0.50`, `2E0`, `-1.25e1`: the same numbers, so no change, nothing written.
    let plan = run(&app, &["apply", f, "--plan"]).await;
    assert_eq!(plan.code, 0, "{}", plan.all());
    assert!(plan.stdout.contains("0 to add, 0 to change, 0 to remove."), "{}", plan.all());
    let again = run(&app, &["apply", f]).await;
    assert!(again.stdout.contains("0 to add, 0 to change, 0 to remove."), "{}", again.all());
    assert_eq!(written(&app).await, before, "apply wrote nothing (revision, updated_at, audit log)");

    // Export, then plan the exported folder: no change either.
    let out = dir.join("out");
    let exported = run(&app, &["export", "--all", out.to_str().expect("path")]).await;
    assert_eq!(exported.code, 0, "{}", exported.all());
    let plan = run(&app, &["apply", out.to_str().expect("path"), "--plan"]).await;
    assert!(plan.stdout.contains("0 to add, 0 to change, 0 to remove."), "{}", plan.all());
    assert_eq!(written(&app).await, before);

    // A number that changed by value is a change, with its diff; applied once, the file is then no change.
    write(&folder.join("numbers.json"), &numbers_file("1.5"));
    let plan = run(&app, &["apply", f, "--plan"]).await;
    assert!(plan.stdout.contains("0 to add, 1 to change, 0 to remove."), "{}", plan.all());
    assert!(plan.stdout.contains("~ change  numbers (numbers): definition"), "{}", plan.all());
    assert!(plan.stdout.contains("+      \"x\": 1.5"), "{}", plan.all());
    assert_eq!(run(&app, &["apply", f]).await.code, 0);
    let changed = written(&app).await;
    assert_eq!(changed.0, json!(before.0.as_i64().expect("revision") + 1), "one write: {changed:?}");
    let flow = app.admin(Method::GET, "/flows?key=numbers", None).await.body["items"][0].clone();
    assert_eq!(flow["definition"]["layout"]["wait"]["x"].as_f64(), Some(1.5), "{flow}");
    let again = run(&app, &["apply", f]).await;
    assert!(again.stdout.contains("0 to add, 0 to change, 0 to remove."), "{}", again.all());
    assert_eq!(written(&app).await, changed);
}
