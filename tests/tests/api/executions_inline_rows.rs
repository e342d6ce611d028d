//! An inline definition with `rows` (issue #52): the rows are inserted set-based, a chunk of rows per statement,
//! and every row still gets what the row-per-statement insert gave it: its own execution in row order (ids rise
//! with `iteration`), its values as launch variables over the launch's own (over the inline environment and the
//! organization's variables), its `queued` event, the launch's source, priority and labels; the same
//! `Idempotency-Key` answers the same batch and queues nothing more. 2,500 rows cross two chunk boundaries.

use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Instant;
use uuid::Uuid;

const ROWS: usize = 2_500;

#[derive(sqlx::FromRow)]
struct Stored {
    id: Uuid,
    iteration: Option<i32>,
    variables: Value,
    variable_layers: Value,
    source: Value,
    priority: i16,
    runner_labels: Vec<String>,
    environment: Option<String>,
    status: String,
    event_count: i32,
    flow_id: Option<Uuid>,
    flow_name: String,
}

#[tokio::test]
async fn inline_rows_are_inserted_by_chunks_each_row_keeping_its_order_values_and_idempotency() {
    let app = TestApp::spawn().await;
    app.put::<Value>("/variables/org_v", &json!({"value": "from-org"}), 200).await;
    let definition = json!({"nodes": [{"id": "set", "kind": "set_variables", "variables": {"seen": "{{n}}"}}]});
    let rows: Vec<Value> = (0..ROWS).map(|i| json!({"n": i.to_string(), "shared": format!("row-{i}")})).collect();
    let body = json!({"definition": definition, "name": "rows", "rows": rows, "priority": 2,
        "runner_labels": ["linux"], "variables": {"shared": "launch", "fixed": "f"},
        "environment": {"key": "staging", "variables": {"env_v": "e", "fixed": "env"}},
        "source": {"path": "flows/rows.json", "git_commit": "abc123"}});
    let send = || {
        let request = app.api().request(Method::POST, "/executions").header("idempotency-key", "rows-1").json(&body);
        async move { hookflow_tests::app::read(request.send().await.expect("send")).await }
    };
    let started = Instant::now();
    let launched = send().await;
    let took = started.elapsed();
    assert_eq!(launched.status, 201, "{}", launched.text);
    assert_eq!(launched.body["executions"], ROWS, "{}", launched.text);
    println!("{ROWS} inline rows queued in {took:?}");
    let batch_id: Uuid = launched.body["batch_id"].as_str().expect("batch_id").parse().expect("uuid");

    let stored: Vec<Stored> = sqlx::query_as(
        "SELECT id, iteration, variables, variable_layers, source, priority, runner_labels, environment, status,
             event_count, flow_id, flow_name
         FROM executions WHERE batch_id = $1 ORDER BY iteration",
    )
    .bind(batch_id)
    .fetch_all(&app.pool)
    .await
    .expect("the batch's executions");
    assert_eq!(stored.len(), ROWS);
    let sha = stored[0].source["definition_sha256"].clone();
    assert_eq!(sha.as_str().map(str::len), Some(64), "{}", stored[0].source);
    for (i, row) in stored.iter().enumerate() {
        assert_eq!(row.iteration, Some(i32::try_from(i).expect("i32")), "every row once, in order");
        if i > 0 {
            assert!(row.id > stored[i - 1].id, "ids rise with the row index (runners take rows in order)");
        }
        let n = i.to_string();
        let shared = format!("row-{i}");
        assert_eq!(
            row.variables,
            json!({"org_v": "from-org", "env_v": "e", "fixed": "f", "shared": shared, "n": n}),
            "row {i}: the row's values over the launch's, over the environment's, over the organization's"
        );
        assert_eq!(row.variable_layers["launch"], json!({"fixed": "f", "shared": shared, "n": n}), "row {i}");
        assert_eq!(row.variable_layers["environment"], json!({"env_v": "e", "fixed": "env"}), "row {i}");
        assert_eq!(row.variable_layers["base"]["org_v"], "from-org", "row {i}");
        assert_eq!(
            (row.status.as_str(), row.event_count, row.priority, row.flow_id, row.flow_name.as_str()),
            ("queued", 1, 2, None, "rows"),
            "row {i}"
        );
        assert_eq!(
            (row.runner_labels.as_slice(), row.environment.as_deref()),
            (&["linux".to_owned()][..], Some("staging"))
        );
        assert_eq!(
            row.source,
            json!({"kind": "inline", "path": "flows/rows.json", "definition_sha256": sha, "git_commit": "abc123",
                   "git_ref": null}),
            "row {i}"
        );
    }
    // One `queued` event per row, numbered 1.
    let events: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE ev.seq = 1 AND ev.data LIKE '%\"queued\"%')
         FROM execution_events ev JOIN executions e ON e.id = ev.execution_id WHERE e.batch_id = $1",
    )
    .bind(batch_id)
    .fetch_all(&app.pool)
    .await
    .expect("events");
    assert_eq!(events, [(ROWS as i64, ROWS as i64)]);

    // The same key answers the same batch and queues nothing more.
    let again = send().await;
    assert_eq!((again.status.as_u16(), &again.body), (200, &launched.body), "{}", again.text);
    assert_eq!(app.rows("executions").await, ROWS as i64);
    assert_eq!(app.rows("batches").await, 1);
    let summary = app.admin(Method::GET, &format!("/batches/{batch_id}"), None).await;
    assert_eq!((&summary.body["total"], &summary.body["queued"]), (&json!(ROWS), &json!(ROWS)), "{}", summary.text);
    let listed = app.admin(Method::GET, &format!("/executions?batch_id={batch_id}&source=inline&limit=5"), None).await;
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(5), "{}", listed.text);
}
