//! Data-driven runs (issue #52, part B): a launch with `rows` queues one execution per row as a batch, run by the
//! embedded runner against a real target; the batch's summary and its executions by row; the failed rows (failing
//! by their data) run again alone with `rerun`, keeping their iterations; the 400s of bad rows, scopes, and another
//! organization's batch answering 404.

use hookflow_tests::TestApp;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// A flow that asks the target for the status its row names and passes only on 200.
fn status_flow(target: &Target) -> Value {
    json!({"variables": {"base_url": target.base}, "timeout_s": 30, "nodes": [
        {"id": "call", "kind": "request", "request": {"method": "GET", "url": "{{base_url}}/status/{{code}}"},
         "extractors": [{"name": "status", "kind": "statusCode"}],
         "assertions": [{"source": "status", "operator": "equals", "expected": 200}]},
        {"id": "said", "kind": "set_variables", "variables": {"who": "{{name}} {{greeting}}"}}
    ]})
}

/// Polls the batch until none of its executions is queued or running (at most `within`).
pub async fn wait_batch(app: &TestApp, batch: &str, within: Duration) -> Value {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let reply = app.admin(Method::GET, &format!("/batches/{batch}"), None).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        if !reply.body["finished_at"].is_null() {
            return reply.body;
        }
        assert!(tokio::time::Instant::now() < deadline, "the batch never finished; last seen {}", reply.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every execution of the batch (optionally of one status) through the list's pages of `limit`.
pub async fn batch_executions(app: &TestApp, batch: &str, status: Option<&str>, limit: usize) -> Vec<Value> {
    let filter = status.map_or_else(String::new, |s| format!("&status={s}"));
    let mut reply = app.admin(Method::GET, &format!("/batches/{batch}/executions?limit={limit}{filter}"), None).await;
    let mut all = Vec::new();
    loop {
        assert_eq!(reply.status, 200, "{}", reply.text);
        all.extend(reply.body["items"].as_array().expect("items").iter().cloned());
        if reply.body["next_cursor"].is_null() {
            return all;
        }
        reply = app.next_page(&format!("/batches/{batch}/executions?limit={limit}{filter}"), &reply).await;
    }
}

fn iterations(executions: &[Value]) -> Vec<i64> {
    executions.iter().map(|e| e["iteration"].as_i64().expect("an iteration")).collect()
}

#[tokio::test]
async fn a_launch_with_rows_runs_each_row_and_the_failed_rows_run_again_alone() {
    let app = TestApp::spawn_with_embedded_runner_of(4, 1.0, Duration::from_secs(60), |_| {}).await;
    let target = Target::spawn().await;
    let flow = app.create_flow("rows", status_flow(&target)).await;
    // 20 rows: rows 3, 7 and 11 ask for a 500 and fail by their data; row 5 takes the launch's `code`.
    let failing = [3, 7, 11];
    let rows: Vec<Value> = (0..20)
        .map(|i| match i {
            5 => json!({"name": format!("row-{i}")}),
            i if failing.contains(&i) => json!({"name": format!("row-{i}"), "code": "500"}),
            i => json!({"name": format!("row-{i}"), "code": "200"}),
        })
        .collect();
    let launch = json!({"variables": {"code": "200", "greeting": "hello"}, "rows": rows});
    let reply = app.admin(Method::POST, &format!("/flows/{flow}/launch"), Some(launch)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.body["executions"], 20, "{}", reply.text);
    let batch = reply.body["batch_id"].as_str().expect("batch id").to_owned();

    let done = wait_batch(&app, &batch, Duration::from_secs(60)).await;
    assert_eq!(done["id"], batch.as_str());
    assert_eq!(done["flow_id"], flow.as_str());
    assert_eq!(
        (&done["total"], &done["succeeded"], &done["failed"], &done["queued"], &done["running"], &done["cancelled"]),
        (&json!(20), &json!(17), &json!(3), &json!(0), &json!(0), &json!(0)),
        "{done}"
    );
    assert!(done["created_at"].is_string() && done["finished_at"].is_string(), "{done}");

    // By row, in pages of 6: every row once, in order, each with its batch and iteration.
    let all = batch_executions(&app, &batch, None, 6).await;
    assert_eq!(iterations(&all), (0..20).collect::<Vec<_>>());
    assert!(all.iter().all(|e| e["batch_id"] == batch.as_str() && e["flow_id"] == flow.as_str()));
    let failed = batch_executions(&app, &batch, Some("failed"), 50).await;
    assert_eq!(iterations(&failed), vec![3, 7, 11]);
    let succeeded = batch_executions(&app, &batch, Some("succeeded"), 50).await;
    assert_eq!(succeeded.len(), 17);

    // Each row's values are launch variables over the launch's own.
    let row5 = &all[5];
    let nodes = app.api().executions().nodes(&flow, row5["id"].as_str().expect("id")).await.expect("nodes");
    let nodes = serde_json::to_value(nodes).expect("json");
    assert!(nodes["items"][0]["request"]["url"].as_str().expect("url").ends_with("/status/200"), "{nodes}");
    assert_eq!(nodes["items"][1]["extracted"]["who"], "row-5 hello", "{nodes}");

    // A plain launch is in no batch.
    let plain = app.launch(&flow, json!({"variables": {"code": "200", "name": "x", "greeting": "y"}})).await;
    assert!(plain["batch_id"].is_null() && plain["iteration"].is_null(), "{plain}");

    // The failed rows run again alone, as a new batch, keeping their iterations (and fail again: same data).
    let hits = target.hits();
    let reply = app.admin(Method::POST, &format!("/batches/{batch}/rerun"), Some(json!({"only": "failed"}))).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.body["executions"], 3, "{}", reply.text);
    let rerun = reply.body["batch_id"].as_str().expect("batch id").to_owned();
    assert_ne!(rerun, batch);
    let again = wait_batch(&app, &rerun, Duration::from_secs(60)).await;
    assert_eq!((&again["total"], &again["failed"], &again["rerun_of"]), (&json!(3), &json!(3), &json!(batch)));
    let rerun_rows = batch_executions(&app, &rerun, None, 50).await;
    assert_eq!(iterations(&rerun_rows), vec![3, 7, 11]);
    assert!(rerun_rows.iter().all(|e| e["batch_id"] == rerun.as_str()));
    // Only those three rows reached the target again (and the plain launch).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(target.hits() - hits <= 4, "{} requests after the rerun", target.hits() - hits);
    // The first batch is as it was.
    let first = wait_batch(&app, &batch, Duration::from_secs(5)).await;
    assert_eq!((&first["succeeded"], &first["failed"]), (&json!(17), &json!(3)));

    // A batch where nothing failed has nothing to run again.
    let rows = json!([{"code": "200", "name": "a"}, {"code": "200", "name": "b"}]);
    let reply = app
        .admin(
            Method::POST,
            &format!("/flows/{flow}/launch"),
            Some(json!({"rows": rows, "variables": {"greeting": "g"}})),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let clean = reply.body["batch_id"].as_str().expect("batch id").to_owned();
    let finished = wait_batch(&app, &clean, Duration::from_secs(30)).await;
    assert_eq!(finished["succeeded"], 2, "{finished}");
    let reply = app.admin(Method::POST, &format!("/batches/{clean}/rerun"), Some(json!({"only": "failed"}))).await;
    assert_eq!(reply.status, 409, "{}", reply.text);
}

#[tokio::test]
async fn bad_rows_are_refused_naming_the_field_and_batches_are_their_organizations_own() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("rows checked").await;
    let path = format!("/flows/{flow}/launch");
    let too_many: Vec<Value> = (0..10_001).map(|i| json!({"n": i.to_string()})).collect();
    let refusals = [
        (json!({"rows": too_many}), "rows"),
        (json!({"rows": []}), "rows"),
        (json!({"rows": [{"a": "1"}, {"a": 2}]}), "rows[1].a"),
        (json!({"rows": [{"a": null}]}), "rows[0].a"),
        (json!({"rows": ["a"]}), "rows[0]"),
        (json!({"rows": {"a": "1"}}), "rows"),
        (json!({"rows": [{"execution.id": "x"}]}), "rows[0].execution.id"),
        (json!({"rows": [{"a": "1"}], "mode": "ephemeral"}), "mode"),
        (json!({"rows": [{"a": "1"}], "environment": "nope"}), "environment"),
    ];
    for (body, field) in refusals {
        let reply = app.admin(Method::POST, &path, Some(body)).await;
        reply.assert_refused(400, "invalid_request", &format!("`{field}`"));
    }
    // Every row stores the definition: 10,000 rows of a 60 KB flow would write 600 MB, over a batch's 512 MiB.
    let big = app
        .create_flow(
            "big",
            json!({"layout": {"pad": "x".repeat(60_000)}, "nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]}),
        )
        .await;
    let rows: Vec<Value> = (0..10_000).map(|i| json!({"n": i.to_string()})).collect();
    let reply = app.admin(Method::POST, &format!("/flows/{big}/launch"), Some(json!({"rows": rows}))).await;
    reply.assert_refused(400, "invalid_request", "512 MiB");
    assert_eq!(app.rows("executions").await, 0, "no refused launch queued anything");
    assert_eq!(app.rows("batches").await, 0);

    // 10,000 rows are taken, in one batch (the same `Idempotency-Key` answers the same batch).
    let most: Vec<Value> = (0..10_000).map(|i| json!({"n": i.to_string()})).collect();
    let first = app.launch_idempotent(&flow, "rows-once", json!({"rows": most})).await;
    assert_eq!(first.status, 201, "{}", first.text);
    assert_eq!(first.body["executions"], 10_000);
    let most: Vec<Value> = (0..10_000).map(|i| json!({"n": i.to_string()})).collect();
    let replay = app.launch_idempotent(&flow, "rows-once", json!({"rows": most})).await;
    assert_eq!((replay.status.as_u16(), &replay.body), (200, &first.body));
    assert_eq!(app.rows("executions").await, 10_000);
    let batch = first.body["batch_id"].as_str().expect("batch id").to_owned();
    let summary = app.admin(Method::GET, &format!("/batches/{batch}"), None).await;
    assert_eq!((&summary.body["total"], &summary.body["queued"]), (&json!(10_000), &json!(10_000)), "{}", summary.text);
    assert!(summary.body["finished_at"].is_null());
    let reply = app.admin(Method::GET, &format!("/batches/{batch}/executions?status=bogus"), None).await;
    reply.assert_refused(400, "invalid_request", "`status`");

    // Scopes: launching rows needs flows:execute, reading a batch flows:read.
    let reader = app.creds_with(&["flows:read"]).await;
    let executor = app.creds_with(&["flows:execute"]).await;
    let reply = app.call(Method::POST, &path, Some(&reader), Some(json!({"rows": [{"a": "1"}]}))).await;
    assert_eq!(reply.status, 403, "{}", reply.text);
    let reply = app.call(Method::POST, &format!("/batches/{batch}/rerun"), Some(&reader), Some(json!({}))).await;
    assert_eq!(reply.status, 403, "{}", reply.text);
    for read in [format!("/batches/{batch}"), format!("/batches/{batch}/executions")] {
        assert_eq!(app.call(Method::GET, &read, Some(&executor), None).await.status, 403);
        assert_eq!(app.call(Method::GET, &read, Some(&reader), None).await.status, 200);
    }

    // Another organization's batch, an unknown one and a malformed id: 404.
    let stranger = app.new_org("stranger").await;
    for id in [batch.clone(), uuid::Uuid::now_v7().to_string(), "not-a-uuid".to_owned()] {
        for (method, path) in [
            (Method::GET, format!("/batches/{id}")),
            (Method::GET, format!("/batches/{id}/executions")),
            (Method::POST, format!("/batches/{id}/rerun")),
        ] {
            let body = (method == Method::POST).then(|| json!({"only": "failed"}));
            let reply = app.call(method, &path, Some(&stranger), body).await;
            assert_eq!(reply.status, 404, "{path}: {}", reply.text);
        }
    }
    let reply = app.call(Method::POST, &path, Some(&stranger), Some(json!({"rows": [{"a": "1"}]}))).await;
    assert_eq!(reply.status, 404, "{}", reply.text);
    let reply = app.admin(Method::POST, &format!("/batches/{batch}/rerun"), Some(json!({"only": "all"}))).await;
    reply.assert_refused(400, "invalid_request", "`only`");
}
