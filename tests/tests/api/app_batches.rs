//! Data-driven runs and inline runs in the app, in a real browser (issue #52): a batch's page after a rows launch
//! (its counts, its rows by index with their statuses, filtered by status, each linking to its execution, "Run
//! failed rows again" offered), and the organization's executions list filtered by source (stored flows, inline
//! runs of files) and by batch, an inline run showing its file and Git commit there and on its own page.

use hookflow_shared::Role;
use hookflow_tests::TestApp;
use hookflow_tests::browser::Browser;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const COMMIT: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f001234567";

/// The rows of the table below `css`, as cell texts.
async fn cells(browser: &Browser, css: &str) -> Vec<Vec<String>> {
    let script = "return [...document.querySelectorAll(arguments[0] + ' tbody tr')]
                    .map(tr => [...tr.children].map(td => td.textContent.trim()))";
    serde_json::from_value(browser.run(script, vec![json!(css)]).await).expect("rows")
}

/// Waits until the table below `css` has `count` rows; answers them.
async fn wait_rows(browser: &Browser, css: &str, count: usize) -> Vec<Vec<String>> {
    let mut seen = Vec::new();
    for _ in 0..150 {
        seen = cells(browser, css).await;
        if seen.len() == count {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("`{css}` never showed {count} rows; it shows {seen:?}");
}

/// Waits until `path` (a batch or an execution) reads back ended.
async fn ended(app: &TestApp, path: &str) -> Value {
    for _ in 0..300 {
        let read = app.admin(Method::GET, path, None).await;
        assert_eq!(read.status, 200, "{}", read.text);
        let done = if path.starts_with("/batches") {
            !read.body["finished_at"].is_null()
        } else {
            !["queued", "running"].contains(&read.body["status"].as_str().unwrap_or_default())
        };
        if done {
            return read.body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{path} never ended");
}

#[tokio::test]
async fn a_batch_page_shows_its_rows_and_the_executions_list_filters_by_source() {
    let app = TestApp::spawn_with_embedded_runner_of(2, 1.0, Duration::from_secs(60), |settings| {
        settings.allow_private_targets = true;
    })
    .await;
    let target = Target::spawn().await;
    let definition = json!({"nodes": [{"kind": "request", "id": "probe",
        "request": {"method": "GET", "url": format!("{}/status/{{{{code}}}}", target.base)},
        "extractors": [{"name": "status", "kind": "statusCode"}],
        "assertions": [{"source": "status", "operator": "equals", "expected": 200}]}]});
    let flow = app.create_flow("probe", definition.clone()).await;
    let rows = json!([{"code": "200"}, {"code": "500"}, {"code": "200"}]);
    let launched = app.admin(Method::POST, &format!("/flows/{flow}/launch"), Some(json!({"rows": rows}))).await;
    assert_eq!(launched.status, 201, "{}", launched.text);
    let batch = launched.body["batch_id"].as_str().expect("batch_id").to_owned();
    let inline = app
        .admin(
            Method::POST,
            "/executions",
            Some(json!({"definition": definition, "name": "from a file", "variables": {"code": "200"},
                "source": {"path": "flows/probe.json", "git_commit": COMMIT, "git_ref": "main"}})),
        )
        .await;
    assert_eq!(inline.status, 201, "{}", inline.text);
    let inline_id = inline.body["id"].as_str().expect("id").to_owned();
    let summary = ended(&app, &format!("/batches/{batch}")).await;
    assert_eq!((summary["succeeded"].as_i64(), summary["failed"].as_i64()), (Some(2), Some(1)), "{summary}");
    assert_eq!(ended(&app, &format!("/executions/{inline_id}")).await["status"], "succeeded");

    let person = app.person(app.admin.org, Role::Owner).await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app.base, &person.email, &person.password).await;

    // The batch's page: its counts, its rows in order with their statuses, the failed one alone when filtered.
    browser.goto(&format!("{}/#/batches/{batch}", app.base)).await;
    browser.wait_text("#batch-summary", "3 rows: 2 succeeded, 1 failed").await;
    browser.wait_text("#batch-finished", "Finished").await;
    let listed = wait_rows(&browser, "#batch-rows", 3).await;
    let shown: Vec<(&str, &str)> = listed.iter().map(|r| (r[0].as_str(), r[1].as_str())).collect();
    assert_eq!(shown, [("0", "succeeded"), ("1", "failed"), ("2", "succeeded")], "{listed:?}");
    assert!(browser.find("#batch-rerun").await.is_displayed().await.expect("displayed"), "rerun is offered");
    browser.choose("#batch-filter", "failed").await;
    let failed = wait_rows(&browser, "#batch-rows", 1).await;
    assert_eq!(failed[0][0], "1", "{failed:?}");
    let href = browser.run("return document.querySelector('#batch-rows tbody a').getAttribute('href')", vec![]).await;
    let row_1 = app.admin(Method::GET, &format!("/batches/{batch}/executions?status=failed"), None).await;
    let row_1 = row_1.body["items"][0]["id"].as_str().expect("id").to_owned();
    assert_eq!(href, json!(format!("#/flows/{flow}/executions/{row_1}")));
    browser.screenshot("batch-1280").await;

    // The batch's rows among the organization's executions.
    browser.click("#batch-in-list").await;
    let in_batch = wait_rows(&browser, "#executions-list", 3).await;
    assert!(in_batch.iter().all(|r| r[1] == "probe" && r[2].starts_with("row ")), "{in_batch:?}");

    // Every execution, then filtered by source: the inline run shows its file and commit.
    browser.goto(&format!("{}/#/executions", app.base)).await;
    let every = wait_rows(&browser, "#executions-list", 4).await;
    assert_eq!(every[0][1], format!("inline flows/probe.json @ {} (main)", &COMMIT[..12]), "newest first: {every:?}");
    browser.choose("#executions-source", "inline (files)").await;
    let inline_rows = wait_rows(&browser, "#executions-list", 1).await;
    assert!(inline_rows[0][1].contains("flows/probe.json") && inline_rows[0][2].is_empty(), "{inline_rows:?}");
    assert_eq!(inline_rows[0][4], "succeeded");
    browser.choose("#executions-source", "stored flows").await;
    let stored = wait_rows(&browser, "#executions-list", 3).await;
    assert!(stored.iter().all(|r| r[1] == "probe"), "{stored:?}");
    browser.choose("#executions-status", "failed").await;
    let stored_failed = wait_rows(&browser, "#executions-list", 1).await;
    assert_eq!(stored_failed[0][2], "row 1", "{stored_failed:?}");
    browser.screenshot("executions-1280").await;

    // The inline run's own page (no flow): its file, commit and node result.
    browser.goto(&format!("{}/#/executions/{inline_id}", app.base)).await;
    browser.wait_text("#execution-status", "succeeded").await;
    assert_eq!(browser.text("#execution-source").await, "flows/probe.json");
    assert_eq!(browser.text("#execution-commit").await, &COMMIT[..12]);
    browser.find("#execution-nodes li[data-node=probe]").await;
    browser.close().await;
}
