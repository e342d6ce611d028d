//! Autoscaling (issue #53), launches that are not `POST /flows/{id}/launch`: an endpoint's trigger and a schedule
//! carry `priority` (1 to 5, 3 when absent; stored, read back, patched, bad values 400 naming the field) and the
//! executions they launch have it; and the launch answer (201) says why a queued execution waits, as reads do.

use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// A server whose scheduler ticks every 200 ms; no runner, so what is launched stays queued.
async fn spawn() -> TestApp {
    TestApp::spawn_with(|settings| {
        settings.schedule_interval = Duration::from_millis(200);
        settings.schedule_grace = Duration::from_secs(1);
    })
    .await
}

/// `(priority, count)` of the executions launched by `column = id` (`schedule_id`, `flow_id`), lowest first.
async fn priorities(app: &TestApp, column: &str, id: &str) -> Vec<(i16, i64)> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT priority, count(*) FROM executions WHERE {column} = $1::uuid GROUP BY priority ORDER BY priority"
    )))
    .bind(id)
    .fetch_all(&app.pool)
    .await
    .expect("priorities")
}

#[tokio::test]
async fn a_trigger_launches_at_its_priority_and_refuses_one_outside_one_to_five() {
    let app = spawn().await;
    let urgent = app.delay_flow("urgent").await;
    let plain = app.delay_flow("plain").await;
    let triggers = json!([{"flow_id": urgent, "priority": 1}, {"flow_id": plain}]);
    let endpoint = app.triggered_endpoint("orders", triggers.clone()).await;
    let read = app.admin(Method::GET, &format!("/webhooks/{endpoint}"), None).await;
    assert_eq!(read.body["triggers"], triggers, "stored and read back as written: {}", read.text);

    for _ in 0..2 {
        let sent = app.capture_with(Method::POST, &endpoint, &[("Content-Type", "application/json")], "{}").await;
        assert_eq!(sent.status, 200, "{}", sent.text);
    }
    app.wait_executions(&urgent, 2, Duration::from_secs(20)).await;
    app.wait_executions(&plain, 2, Duration::from_secs(20)).await;
    app.triggers_settled(Duration::from_secs(10)).await;
    assert_eq!(priorities(&app, "flow_id", &urgent).await, [(1, 2)], "the trigger's priority");
    assert_eq!(priorities(&app, "flow_id", &plain).await, [(3, 2)], "3 when the trigger sets none");
    let listed = app.admin(Method::GET, &format!("/flows/{urgent}/executions"), None).await;
    assert!(listed.body["items"].as_array().unwrap().iter().all(|e| e["priority"] == 1), "{}", listed.text);

    for bad in [json!(0), json!(6), json!(-1), json!("high"), json!(1.5)] {
        let body = json!({"name": "bad", "triggers": [{"flow_id": urgent, "priority": bad}]});
        let refused = app.admin(Method::POST, "/webhooks", Some(body)).await;
        assert_eq!(refused.status, 400, "priority {bad}: {}", refused.text);
        assert_eq!(refused.body["error"]["code"], "invalid_request", "{}", refused.text);
        assert!(refused.text.contains("priority"), "names the field: {}", refused.text);
        let patch = json!({"triggers": [{"flow_id": urgent, "priority": bad}]});
        let refused = app.admin(Method::PATCH, &format!("/webhooks/{endpoint}"), Some(patch)).await;
        assert_eq!(refused.status, 400, "priority {bad}: {}", refused.text);
        assert!(refused.text.contains("priority"), "names the field: {}", refused.text);
    }
    let unchanged = app.admin(Method::GET, &format!("/webhooks/{endpoint}"), None).await;
    assert_eq!(unchanged.body["triggers"], triggers);

    // Another organization's key cannot read the endpoint, nor set a trigger on this organization's flow.
    let other = app.new_org("Other").await;
    let theirs = app.call(Method::GET, &format!("/webhooks/{endpoint}"), Some(&other), None).await;
    assert_eq!(theirs.status, 404, "{}", theirs.text);
    let body = json!({"name": "theirs", "triggers": [{"flow_id": urgent, "priority": 1}]});
    let refused = app.call(Method::POST, "/webhooks", Some(&other), Some(body)).await;
    assert_eq!(refused.status, 400, "a flow of another organization is no flow: {}", refused.text);
}

#[tokio::test]
async fn a_schedule_launches_at_its_priority_stored_patched_and_checked() {
    let app = spawn().await;
    let flow = app.delay_flow("nightly").await;
    let path = format!("/flows/{flow}/schedules");

    // Absent: 3, read back.
    let plain = app.admin(Method::POST, &path, Some(json!({"cron": "0 3 * * *"}))).await;
    assert_eq!(plain.status, 201, "{}", plain.text);
    assert_eq!(plain.body["priority"], 3, "{}", plain.text);

    // Every second at priority 2 (nothing runs them: `allow` launches each occurrence though the last is queued);
    // patched to 1 it launches at 1 from then on.
    let created =
        app.admin(Method::POST, &path, Some(json!({"cron": "* * * * * *", "overlap": "allow", "priority": 2}))).await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["priority"], 2);
    let id = created.body["id"].as_str().expect("id").to_owned();
    let one = format!("{path}/{id}");
    assert_eq!(app.admin(Method::GET, &one, None).await.body["priority"], 2);
    wait_priorities(&app, &id, |seen| seen.iter().any(|(p, _)| *p == 2)).await;

    let patched = app.admin(Method::PATCH, &one, Some(json!({"priority": 1}))).await;
    assert_eq!(patched.status, 200, "{}", patched.text);
    assert_eq!(patched.body["priority"], 1);
    let other_field = app.admin(Method::PATCH, &one, Some(json!({"catch_up_s": 5}))).await;
    assert_eq!(other_field.body["priority"], 1, "a patch without priority keeps it: {}", other_field.text);
    let seen = wait_priorities(&app, &id, |seen| seen.iter().any(|(p, _)| *p == 1)).await;
    assert!(seen.iter().all(|(p, _)| *p == 1 || *p == 2), "only the schedule's priorities: {seen:?}");
    app.admin(Method::PATCH, &one, Some(json!({"paused": true}))).await;

    for bad in [json!(0), json!(6), json!("urgent"), json!(2.5)] {
        let refused = app.admin(Method::POST, &path, Some(json!({"cron": "0 4 * * *", "priority": bad}))).await;
        assert_eq!(refused.status, 400, "priority {bad}: {}", refused.text);
        assert!(refused.text.contains("priority"), "names the field: {}", refused.text);
        let refused = app.admin(Method::PATCH, &one, Some(json!({"priority": bad}))).await;
        assert_eq!(refused.status, 400, "priority {bad}: {}", refused.text);
        assert!(refused.text.contains("priority"), "names the field: {}", refused.text);
    }
    assert_eq!(app.admin(Method::GET, &one, None).await.body["priority"], 1, "refusals changed nothing");

    // Another organization's key: 404.
    let other = app.new_org("Other").await;
    let theirs = app.call(Method::PATCH, &one, Some(&other), Some(json!({"priority": 5}))).await;
    assert_eq!(theirs.status, 404, "{}", theirs.text);
}

/// Polls the schedule's executions' priorities until `done` holds (at most 15 s).
async fn wait_priorities(app: &TestApp, schedule: &str, done: impl Fn(&[(i16, i64)]) -> bool) -> Vec<(i16, i64)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let seen = priorities(app, "schedule_id", schedule).await;
        if done(&seen) {
            return seen;
        }
        assert!(tokio::time::Instant::now() < deadline, "the schedule never launched so: {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn reason(answer: &Value) -> &str {
    answer["waiting_reason"].as_str().unwrap_or_else(|| panic!("a waiting reason in the answer: {answer}"))
}

#[tokio::test]
async fn the_launch_answer_says_why_a_queued_execution_waits() {
    let app = spawn().await;
    let flow = app.delay_flow("labelled").await;
    let creds = app.runner_creds(app.admin.org).await;
    app.register_runner(&creds, &["linux"]).await;

    let launched =
        app.admin(Method::POST, &format!("/flows/{flow}/launch"), Some(json!({"runner_labels": ["gpu", "eu"]}))).await;
    assert_eq!(launched.status, 201, "{}", launched.text);
    assert_eq!(launched.body["status"], "queued");
    let said = reason(&launched.body);
    assert!(said.starts_with("no online runner carries [gpu, eu]"), "{said}");
    assert!(said.contains("[linux]"), "which labels the online runners carry: {said}");
    let id = launched.body["id"].as_str().unwrap();
    let read = app.admin(Method::GET, &format!("/flows/{flow}/executions/{id}"), None).await;
    assert_eq!(read.body["waiting_reason"].as_str(), Some(said), "the answer says what a read says");

    // A launch by tag answers each execution with its reason too.
    app.admin(Method::PATCH, &format!("/flows/{flow}"), Some(json!({"tags": ["nightly"]}))).await;
    let tagged =
        app.admin(Method::POST, "/flows/launch", Some(json!({"tags": ["nightly"], "runner_labels": ["arm"]}))).await;
    assert_eq!(tagged.status, 201, "{}", tagged.text);
    let first = &tagged.body["executions"][0];
    assert!(reason(first).starts_with("no online runner carries [arm]"), "{first}");

    // An ephemeral launch is claimed at once: running, no reason.
    let ephemeral = app.admin(Method::POST, &format!("/flows/{flow}/launch"), Some(json!({"mode": "ephemeral"}))).await;
    assert_eq!(ephemeral.status, 201, "{}", ephemeral.text);
    assert_eq!(ephemeral.body["status"], "running", "{}", ephemeral.text);
    assert_eq!(ephemeral.body["waiting_reason"], Value::Null, "null unless queued: {}", ephemeral.text);
}
