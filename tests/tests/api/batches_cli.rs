//! `hookflow run --data` (issue #52, part B) with the real CLI binary over 4 real runner processes: a 1,000-row CSV
//! is one batch of 1,000 executions spread over the runners; one runner is SIGKILLed mid-batch and every row still
//! ends exactly once (one final execution per row, the killed runner's rows run again as a next attempt); the JUnit
//! report has 1,000 test cases named by the name column, the failing rows (by their data) among them; and `rerun`
//! runs those rows alone.

use crate::RUNNER;
use crate::batches::{batch_executions, wait_batch};
use hookflow_tests::TestApp;
use hookflow_tests::cli::Cli;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::scratch::Scratch;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

const HOOKFLOW: &str = env!("CARGO_BIN_EXE_hookflow-under-test");
const ROWS: usize = 1_000;

fn failing_row(i: usize) -> bool {
    i % 100 == 7
}

/// Waits a little at the target (so the runners' slots stay busy), then asks for the row's status.
fn row_flow(target: &Target) -> Value {
    json!({"variables": {"base_url": target.base}, "timeout_s": 30, "nodes": [
        {"id": "wait", "kind": "request", "request": {"method": "GET", "url": "{{base_url}}/slow?ms=20"}},
        {"id": "call", "kind": "request", "request": {"method": "GET", "url": "{{base_url}}/status/{{code}}"},
         "extractors": [{"name": "status", "kind": "statusCode"}],
         "assertions": [{"source": "status", "operator": "equals", "expected": 200}]}
    ]})
}

/// Evaluates an XPath expression over an XML document, as a string.
fn xpath(xml: &str, expression: &str) -> String {
    let package = sxd_document::parser::parse(xml).expect("the JUnit report is well-formed XML");
    let document = package.as_document();
    sxd_xpath::evaluate_xpath(&document, expression).expect("xpath").string()
}

#[tokio::test]
async fn a_thousand_rows_over_four_runners_survive_a_killed_runner_and_the_failed_rows_rerun_alone() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let flow = app.create_flow("rows over runners", row_flow(&target)).await;
    let creds = app.runner_creds(app.admin.org).await;
    let mut runners = Vec::new();
    for _ in 0..4 {
        runners.push(RunnerProcess::spawn(RUNNER, &app.base, &creds, &[], &["--concurrency", "4"]).await);
    }
    let dir = Scratch::new("batches-cli");
    let mut csv = String::from("case,code,note\n");
    for i in 0..ROWS {
        let code = if failing_row(i) { 500 } else { 200 };
        let _ = writeln!(csv, "case-{i:04},{code},\"row {i}, quoted\"");
    }
    let data = dir.join("rows.csv");
    std::fs::write(&data, csv).expect("write the CSV");
    let (junit, report) = (dir.join("junit.xml"), dir.join("report.json"));

    let cli = Cli { binary: HOOKFLOW, base: app.base.clone() };
    let args = [
        "run",
        "--flow",
        &flow,
        "--data",
        data.to_str().expect("path"),
        "--name-column",
        "case",
        "--parallel",
        "20",
        "--report",
        &format!("junit={}", junit.display()),
        "--report",
        &format!("json={}", report.display()),
    ];
    let child = cli.command(Some(&app.admin), &args).spawn().expect("start hookflow");

    // Once a fifth of the rows have ended, one runner dies with its jobs in hand.
    let batch = loop {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT batch_id::text FROM executions WHERE flow_id = $1::uuid AND batch_id IS NOT NULL LIMIT 1",
        )
        .bind(&flow)
        .fetch_all(&app.pool)
        .await
        .expect("the batch");
        if let Some((batch,)) = rows.into_iter().next() {
            break batch;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let summary = app.admin(Method::GET, &format!("/batches/{batch}"), None).await.body;
        let ended = summary["succeeded"].as_u64().unwrap_or(0) + summary["failed"].as_u64().unwrap_or(0);
        if ended >= 200 {
            assert!(summary["running"].as_u64().unwrap_or(0) > 0, "rows still running when the runner dies: {summary}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the batch does not move: {summary}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    runners[0].kill().await;

    let output = tokio::time::timeout(Duration::from_secs(240), child.wait_with_output())
        .await
        .expect("hookflow finishes within 240 s")
        .expect("hookflow output");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "rows failed by their data\n{stdout}\n{stderr}");

    // Every row ended exactly once: one execution per row, each final; the killed runner's rows ran again.
    let done = wait_batch(&app, &batch, Duration::from_secs(5)).await;
    let failing = (0..ROWS).filter(|i| failing_row(*i)).count();
    assert_eq!(
        (&done["total"], &done["succeeded"], &done["failed"], &done["cancelled"]),
        (&json!(ROWS), &json!(ROWS - failing), &json!(failing), &json!(0)),
        "{done}"
    );
    let (executions, rows, retried): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT iteration), count(*) FILTER (WHERE attempt > 1) FROM executions
         WHERE batch_id = $1::uuid",
    )
    .bind(&batch)
    .fetch_one(&app.pool)
    .await
    .expect("count");
    assert_eq!((executions, rows), (ROWS as i64, ROWS as i64));
    assert!(retried > 0, "the killed runner held rows, which ran again as a next attempt");

    // JUnit: one test case per row, named by the name column, the failing rows failed.
    let junit = std::fs::read_to_string(&junit).expect("junit report");
    assert_eq!(xpath(&junit, "count(//testcase)"), ROWS.to_string());
    assert_eq!(xpath(&junit, "count(//testcase[failure])"), failing.to_string());
    assert_eq!(xpath(&junit, "string((//testcase[failure])[1]/@name)"), "case-0007");
    assert_eq!(xpath(&junit, "string(//property[@name='batch_id']/@value)"), batch);
    let package = sxd_document::parser::parse(&junit).expect("xml");
    let names: BTreeSet<String> = match sxd_xpath::evaluate_xpath(&package.as_document(), "//testcase/@name") {
        Ok(sxd_xpath::Value::Nodeset(nodes)) => nodes.iter().map(|n| n.string_value()).collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(names, (0..ROWS).map(|i| format!("case-{i:04}")).collect::<BTreeSet<_>>());
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).expect("json report")).expect("json");
    assert_eq!(report["flows"][0]["batch_id"], batch.as_str());
    assert_eq!(report["flows"][0]["rows"].as_array().expect("rows").len(), ROWS);

    // The rows that failed by their data run again alone, keeping their iterations.
    let hits = target.hits();
    let reply = app.admin(Method::POST, &format!("/batches/{batch}/rerun"), Some(json!({"only": "failed"}))).await;
    assert_eq!((reply.status.as_u16(), &reply.body["executions"]), (201, &json!(failing)), "{}", reply.text);
    let rerun = reply.body["batch_id"].as_str().expect("batch id").to_owned();
    let again = wait_batch(&app, &rerun, Duration::from_secs(60)).await;
    assert_eq!(again["failed"], failing, "{again}");
    let iterations: Vec<u64> = batch_executions(&app, &rerun, None, 100)
        .await
        .iter()
        .map(|e| e["iteration"].as_u64().expect("iteration"))
        .collect();
    assert_eq!(iterations, (0..ROWS as u64).filter(|i| failing_row(*i as usize)).collect::<Vec<_>>());
    assert_eq!(target.hits() - hits, 2 * failing, "two requests per rerun row, no other");
}
