//! Polls of a runner this server saw within the last second take its labels from memory: a runner removed
//! meanwhile (through another replica: its row is simply gone) claims nothing and is answered 404.

use hookflow_tests::TestApp;
use uuid::Uuid;

#[tokio::test]
async fn a_runner_removed_elsewhere_claims_nothing_within_its_remembered_second() {
    let app = TestApp::spawn_for_execution().await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let flow = app.delay_flow("seen").await;
    // A first poll reads the runner's row (nothing queued: 204 after a second).
    assert_eq!(app.next_job(&creds, &runner, 0).await.status, 204);
    let id = app.launch_draft(&flow).await;
    // Removed by another server: this one still remembers the runner.
    let runner_id: Uuid = runner.parse().expect("runner id");
    sqlx::query("DELETE FROM runners WHERE id = $1").bind(runner_id).execute(&app.pool).await.expect("delete");
    let reply = app.next_job(&creds, &runner, 5).await;
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert_eq!(app.execution(&flow, &id).await["status"], "queued", "nothing was claimed for the removed runner");
}
