//! Scheduled runs: a Paris schedule launching on an installed runner with its environment, variables and labels;
//! state transitions recorded once per change; overlap skip; catch-up after the server was down.

use crate::RUNNER;
use hookflow_shared::api::flows::PutEnvironment;
use hookflow_tests::TestApp;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// The schedule's executions, oldest first, as `(id, status)`.
async fn executions_of(app: &TestApp, schedule: &str) -> Vec<(String, String)> {
    sqlx::query_as("SELECT id::text, status FROM executions WHERE schedule_id = $1::uuid ORDER BY created_at, id")
        .bind(schedule)
        .fetch_all(&app.pool)
        .await
        .expect("executions")
}

/// Polls until `done` holds for the schedule's executions (at most `within`); answers them.
async fn wait_for(
    app: &TestApp,
    schedule: &str,
    within: Duration,
    done: impl Fn(&[(String, String)]) -> bool,
) -> Vec<(String, String)> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let seen = executions_of(app, schedule).await;
        if done(&seen) {
            return seen;
        }
        assert!(tokio::time::Instant::now() < deadline, "the schedule's runs never got there: {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn create_schedule(app: &TestApp, flow: &str, body: Value) -> String {
    let created = app.admin(Method::POST, &format!("/flows/{flow}/schedules"), Some(body)).await;
    assert_eq!(created.status, 201, "{}", created.text);
    created.body["id"].as_str().expect("id").to_owned()
}

fn finished(status: &str) -> bool {
    !matches!(status, "queued" | "running")
}

#[tokio::test]
async fn a_paris_schedule_launches_on_the_labelled_runner_with_its_environment_and_variables() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let flow = app
        .create_flow(
            "paris monitor",
            json!({"nodes": [{"id": "call", "kind": "request",
                "request": {"method": "GET", "url": "{{base}}/echo?token={{token}}&region={{region}}"},
                "extractors": [{"name": "code", "kind": "statusCode"}],
                "assertions": [{"source": "code", "operator": "equals", "expected": 200}]}]}),
        )
        .await;
    let env = PutEnvironment { variables: [("base".to_owned(), target.base.clone())].into() };
    app.api().flows().put_environment(&flow, "staging", &env).await.expect("environment");
    let creds = app.runner_creds(app.admin.org).await;
    // Only the runner carrying `eu` may take it; the other one is there to be passed over.
    let _eu = RunnerProcess::spawn(RUNNER, &app.base, &creds, &["eu", "linux"], &[]).await;
    let _us = RunnerProcess::spawn(RUNNER, &app.base, &creds, &["us"], &[]).await;
    let eu = app.wait_runner(|r| r["labels"] == json!(["eu", "linux"])).await;
    app.wait_runner(|r| r["labels"] == json!(["us"])).await;
    let schedule = create_schedule(
        &app,
        &flow,
        json!({"cron": "*/1 * * * *", "timezone": "Europe/Paris", "environment": "staging",
            "variables": {"token": "tok-42", "region": "eu-west"}, "runner_labels": ["eu"]}),
    )
    .await;
    let runs = wait_for(&app, &schedule, Duration::from_secs(75), |runs| runs.iter().any(|(_, s)| finished(s))).await;
    let id = &runs[0].0;
    let execution = app.wait_finished(&flow, id).await;
    assert_eq!(execution["status"], "succeeded", "{execution}");
    assert_eq!((&execution["trigger"], &execution["schedule_id"]), (&json!("schedule"), &json!(schedule)));
    assert_eq!((&execution["environment"], &execution["runner_id"]), (&json!("staging"), &eu["id"]));
    assert_eq!(execution["flow_version"], Value::Null, "the draft");
    let nodes = app.api().executions().nodes(&flow, id).await.expect("node results");
    let call = serde_json::to_value(&nodes.items[0]).expect("json");
    assert_eq!(
        call["request"]["url"],
        format!("{}/echo?token=tok-42&region=eu-west", target.base),
        "environment and variables reached the node"
    );
    assert_eq!(call["status"], "passed", "{call}");
    let read = app.admin(Method::GET, &format!("/flows/{flow}/schedules/{schedule}"), None).await;
    assert_eq!(read.body["state"], "passing");
    // One minute apart: a single run so far.
    assert_eq!(executions_of(&app, &schedule).await.len(), 1);
}

type Transition = (String, String, i32);

async fn transitions(app: &TestApp, schedule: &str) -> Vec<Transition> {
    sqlx::query_as(
        "SELECT to_state, execution_id::text, failed_runs FROM schedule_transitions
         WHERE schedule_id = $1::uuid ORDER BY id",
    )
    .bind(schedule)
    .fetch_all(&app.pool)
    .await
    .expect("transitions")
}

#[tokio::test]
async fn each_change_of_state_is_one_transition_across_replicas() {
    let app = TestApp::spawn_for_execution().await;
    let replica = app.replica_with(|s| s.schedule_interval = Duration::from_millis(200)).await;
    let target = Target::spawn().await;
    let flow = app
        .create_flow(
            "flaky monitor",
            json!({"nodes": [{"id": "check", "kind": "request",
                "request": {"method": "GET", "url": format!("{}/status/{{{{code}}}}", target.base)},
                "extractors": [{"name": "code", "kind": "statusCode"}],
                "assertions": [{"source": "code", "operator": "equals", "expected": 200}]}]}),
        )
        .await;
    let creds = app.runner_creds(app.admin.org).await;
    let _runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[], &[]).await;
    let schedule = create_schedule(
        &app,
        &flow,
        json!({"cron": "*/2 * * * * *", "variables": {"code": "500"}, "notify": {"after_failures": 2}}),
    )
    .await;
    let item = format!("/flows/{flow}/schedules/{schedule}");
    // Fails three times: one transition, at the second failure.
    let runs = wait_for(&app, &schedule, Duration::from_secs(40), |runs| {
        runs.iter().filter(|(_, s)| s == "failed").count() >= 3
    })
    .await;
    assert_eq!(app.admin(Method::GET, &item, None).await.body["state"], "failing");
    let failed: Vec<&String> = runs.iter().filter(|(_, s)| s == "failed").map(|(id, _)| id).collect();
    assert_eq!(transitions(&app, &schedule).await, [("failing".to_owned(), failed[1].clone(), 2)]);

    // Fixed: one recovery, carrying the length of the streak it ends.
    app.admin(Method::PATCH, &item, Some(json!({"variables": {"code": "200"}}))).await;
    let runs = wait_for(&app, &schedule, Duration::from_secs(40), |runs| {
        runs.iter().filter(|(_, s)| s == "succeeded").count() >= 2
    })
    .await;
    let streak = runs.iter().filter(|(_, s)| s == "failed").count() as i32;
    let first_success = runs.iter().find(|(_, s)| s == "succeeded").map(|(id, _)| id.clone()).expect("a success");
    let seen = transitions(&app, &schedule).await;
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1], ("passing".to_owned(), first_success, streak));
    assert_eq!(app.admin(Method::GET, &item, None).await.body["state"], "passing");
    // Each occurrence launched once between the two replicas: two seconds apart at least.
    let times: Vec<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT created_at FROM executions WHERE schedule_id = $1::uuid ORDER BY created_at")
            .bind(&schedule)
            .fetch_all(&app.pool)
            .await
            .expect("times");
    for pair in times.windows(2) {
        assert!(pair[1] - pair[0] >= chrono::TimeDelta::milliseconds(1500), "one launch per occurrence: {times:?}");
    }
    app.delete(&item, 204).await;
    drop(replica);
}

#[tokio::test]
async fn overlap_skip_launches_no_second_run_while_one_is_running() {
    let app = TestApp::spawn_for_execution().await;
    let slow = app.create_flow("slow", json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 4000}]})).await;
    let creds = app.runner_creds(app.admin.org).await;
    let _runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[], &["--concurrency", "4"]).await;
    let skip = create_schedule(&app, &slow, json!({"cron": "* * * * * *", "overlap": "skip"})).await;
    let first = wait_for(&app, &skip, Duration::from_secs(15), |runs| runs.iter().any(|(_, s)| s == "running")).await;
    let first = first[0].0.clone();
    let done = app.wait_finished(&slow, &first).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    // While it ran (4 s, a period of 1 s) no other run of the schedule was launched.
    let finished_at: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT finished_at FROM executions WHERE id = $1::uuid")
            .bind(&first)
            .fetch_one(&app.pool)
            .await
            .expect("finished_at");
    let during: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM executions WHERE schedule_id = $1::uuid AND id <> $2::uuid AND created_at < $3",
    )
    .bind(&skip)
    .bind(&first)
    .bind(finished_at)
    .fetch_one(&app.pool)
    .await
    .expect("count");
    assert_eq!(during, 0, "no second run while the first was running");
    let log = app.admin(Method::GET, "/audit-log?limit=100", None).await;
    let skipped: Vec<&Value> =
        log.body["items"].as_array().expect("items").iter().filter(|e| e["action"] == "schedule.skipped").collect();
    assert!(skipped.len() >= 2, "skips are audited: {}", log.text);
    for entry in &skipped {
        assert_eq!(entry["details"], json!({"schedule_id": skip, "reason": "overlap"}));
    }
    // Once it ended, the schedule launches again.
    wait_for(&app, &skip, Duration::from_secs(10), |runs| runs.len() >= 2).await;
    app.delete(&format!("/flows/{slow}/schedules/{skip}"), 204).await;

    // `allow` launches each occurrence whatever runs.
    let other =
        app.create_flow("slow too", json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 4000}]})).await;
    let allow = create_schedule(&app, &other, json!({"cron": "* * * * * *", "overlap": "allow"})).await;
    let runs = wait_for(&app, &allow, Duration::from_secs(15), |runs| runs.len() >= 3).await;
    assert!(runs.iter().filter(|(_, s)| !finished(s)).count() >= 2, "runs overlap: {runs:?}");
    app.delete(&format!("/flows/{other}/schedules/{allow}"), 204).await;
}

async fn counts(app: &TestApp, schedules: &[String]) -> Vec<usize> {
    counts_before(app, schedules, chrono::Utc::now() + chrono::TimeDelta::days(1)).await
}

/// How many executions each schedule launched before `cutoff`.
async fn counts_before(app: &TestApp, schedules: &[String], cutoff: chrono::DateTime<chrono::Utc>) -> Vec<usize> {
    let mut out = Vec::new();
    for schedule in schedules {
        let count: i64 =
            sqlx::query_scalar("SELECT count(*) FROM executions WHERE schedule_id = $1::uuid AND created_at < $2")
                .bind(schedule)
                .bind(cutoff)
                .fetch_one(&app.pool)
                .await
                .expect("count");
        out.push(count as usize);
    }
    out
}

/// A server whose scheduler ticks every 200 ms and fires an occurrence at most 1 s late without catch-up.
fn quick(settings: &mut hookflow_control_plane::state::Settings) {
    settings.schedule_interval = Duration::from_millis(200);
    settings.schedule_grace = Duration::from_secs(1);
}

#[tokio::test]
async fn missed_occurrences_launch_once_each_after_downtime_within_the_catch_up_window() {
    let app = TestApp::spawn_with(quick).await;
    let every_5s = "*/5 * * * * *";
    let mut schedules = Vec::new();
    for (name, catch_up_s, overlap) in
        [("caught up", 600, "allow"), ("not caught up", 0, "allow"), ("skip", 600, "skip")]
    {
        let flow = app.delay_flow(name).await;
        let body = json!({"cron": every_5s, "catch_up_s": catch_up_s, "overlap": overlap});
        schedules.push(create_schedule(&app, &flow, body).await);
    }
    for schedule in &schedules {
        wait_for(&app, schedule, Duration::from_secs(10), |runs| !runs.is_empty()).await;
    }
    // The server goes down (no runner: runs stay queued, so `skip` finds its previous run busy).
    app.shutdown_token().cancel();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = counts(&app, &schedules).await;
    let next_at: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT next_at FROM flow_schedules WHERE id = $1::uuid")
            .bind(&schedules[0])
            .fetch_one(&app.pool)
            .await
            .expect("next_at");
    // Down at least 16 s; back 1.5 s after a multiple of 5 s, so no occurrence is merely late at the restart.
    tokio::time::sleep(Duration::from_secs(16)).await;
    let now = chrono::Utc::now();
    let into = now.timestamp_subsec_millis() as i64 + (now.timestamp() % 5) * 1000;
    tokio::time::sleep(Duration::from_millis(((1500 - into).rem_euclid(5000)) as u64)).await;
    let restarted_at = chrono::Utc::now();
    let (mut missed, mut next_regular) = (0, next_at);
    while next_regular <= restarted_at {
        missed += 1;
        next_regular += chrono::TimeDelta::seconds(5);
    }
    assert!(missed >= 3, "{missed} occurrences missed");
    let restarted = app.replica_with(quick).await;
    let until = next_regular + chrono::TimeDelta::milliseconds(2500) - chrono::Utc::now();
    tokio::time::sleep(until.to_std().unwrap_or_default()).await;
    // Before the next regular occurrence (at most 3.5 s after the start), only catch-up launched anything.
    let caught = counts_before(&app, &schedules, next_regular).await;
    assert_eq!(caught[0] - before[0], missed, "each missed occurrence launched once");
    assert_eq!(caught[1] - before[1], 0, "catch_up_s 0 launches none of them");
    assert_eq!(caught[2] - before[2], 0, "skip: the previous run is still queued");
    let skipped: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE action = 'schedule.skipped' AND details->>'schedule_id' = $1",
    )
    .bind(&schedules[2])
    .fetch_one(&app.pool)
    .await
    .expect("skips");
    assert!(skipped >= missed as i64, "every missed occurrence of `skip` was skipped: {skipped}");
    // The next regular occurrence fires as usual.
    let regular = counts_before(&app, &schedules, next_regular + chrono::TimeDelta::milliseconds(2500)).await;
    assert_eq!((regular[0] - caught[0], regular[1] - caught[1]), (1, 1), "the regular occurrence fires once");
    drop(restarted);
}
