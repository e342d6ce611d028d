//! Deleting a flow deletes its executions with their jobs, node results and events: no foreign key holds those
//! rows (the statements that write them hold the execution's row), a statement trigger on `executions` deletes them.

use hookflow_tests::TestApp;
use serde_json::json;
use uuid::Uuid;

/// The jobs, node results and events stored for `execution`.
async fn children(app: &TestApp, execution: Uuid) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM jobs WHERE execution_id = $1),
                (SELECT count(*) FROM node_results WHERE execution_id = $1),
                (SELECT count(*) FROM execution_events WHERE execution_id = $1)",
    )
    .bind(execution)
    .fetch_one(&app.pool)
    .await
    .expect("count")
}

#[tokio::test]
async fn deleting_a_flow_deletes_its_executions_jobs_results_and_events_and_nothing_else() {
    let app = TestApp::spawn_for_execution().await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let (doomed, kept) = (app.delay_flow("doomed").await, app.delay_flow("kept").await);
    let mut executions = Vec::new();
    for flow in [&doomed, &kept] {
        let id: Uuid = app.launch_draft(flow).await.parse().expect("execution id");
        let job = app.next_job(&creds, &runner, 5).await.body;
        let result = json!({"node_id": "wait", "status": "passed", "started_at": "2026-11-24T10:20:47Z",
            "duration_ms": 1, "extracted": {}, "assertions": [], "error": null, "retries": 0});
        assert_eq!(app.job_call(&job, "nodes", result).await.status, 200);
        assert_eq!(app.job_call(&job, "complete", json!({"status": "succeeded"})).await.status, 200);
        // queued, running, node.started, node.completed, execution.completed
        assert_eq!(children(&app, id).await, (1, 1, 5));
        executions.push(id);
    }
    app.api().flows().delete(&doomed).await.expect("delete the flow");
    assert_eq!(children(&app, executions[0]).await, (0, 0, 0), "the deleted flow's execution left nothing");
    assert_eq!(children(&app, executions[1]).await, (1, 1, 5), "another flow's execution is untouched");
}
