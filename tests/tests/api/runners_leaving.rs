//! Runners that leave (issue #53): `--max-jobs` (one-shot runners, 100 of them one after another each running one
//! job exactly once), `--idle-exit-s`, the SIGTERM drain (a running job finishes and is reported), and
//! `POST /runner/deregister` (gone from the list at once; held work back to the queue; another organization's
//! runner 404). The hundred one-shot runners are also the regression test of `db::begin`: each leaves with a
//! delivery long poll open, and before it a poll cut off while beginning its transaction left a pooled connection
//! inside it, so the next runner's registration was answered 201 and never committed.

use crate::RUNNER;
use hookflow_tests::TestApp;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::target::Target;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const LABEL: &str = "leaving";

/// A flow of one request to the target (`path` under its base).
async fn request_flow(app: &TestApp, target: &Target, path: &str) -> String {
    let definition = json!({"nodes": [{"id": "call", "kind": "request",
        "request": {"method": "GET", "url": format!("{}{path}", target.base)}}]});
    app.create_flow("leaving", definition).await
}

/// Launches `flow` `count` times for runners labelled [`LABEL`]; answers the execution ids.
async fn launch_labelled(app: &TestApp, flow: &str, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let launched = app.launch(flow, json!({"runner_labels": [LABEL]})).await;
        ids.push(launched["id"].as_str().expect("id").to_owned());
    }
    ids
}

/// The flow's executions (at most 100 newest, enough here).
async fn executions(app: &TestApp, flow: &str) -> Vec<Value> {
    let listed = app.admin(Method::GET, &format!("/flows/{flow}/executions?limit=100"), None).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    listed.body["items"].as_array().expect("items").clone()
}

/// `POST /runner/deregister` with `creds` and `body`.
async fn deregister(app: &TestApp, creds: &hookflow_tests::Creds, body: Value) -> reqwest::Response {
    app.api_as(creds).request(Method::POST, "/runner/deregister").json(&body).send().await.expect("deregister")
}

fn count(executions: &[Value], status: &str) -> usize {
    executions.iter().filter(|e| e["status"] == status).count()
}

/// Waits for the runner process to exit by itself; answers its status and when it exited.
async fn exits_by_itself(runner: &mut RunnerProcess, within: Duration) -> (std::process::ExitStatus, Instant) {
    let status = tokio::time::timeout(within, runner.child.wait())
        .await
        .unwrap_or_else(|_| panic!("the runner did not leave within {within:?}:\n{}", runner.output()))
        .expect("wait for the runner");
    (status, Instant::now())
}

async fn listed_runners(app: &TestApp) -> Vec<Value> {
    let listed = app.admin(Method::GET, "/runners", None).await;
    listed.body["items"].as_array().expect("items").clone()
}

#[tokio::test]
async fn a_one_shot_runner_runs_one_job_and_leaves_and_a_hundred_run_each_job_once() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let flow = request_flow(&app, &target, "/orders").await;
    let ids = launch_labelled(&app, &flow, 100).await;
    let creds = app.runner_creds(app.admin.org).await;

    // Concurrency 4 does not let a one-shot runner claim more than its one job.
    let one_shot = ["--max-jobs", "1", "--concurrency", "4"];
    let mut first = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[LABEL], &one_shot).await;
    let (status, _) = exits_by_itself(&mut first, Duration::from_secs(30)).await;
    assert!(status.success(), "exit 0 after its job: {status:?}\n{}", first.output());
    let after_one = executions(&app, &flow).await;
    assert_eq!(count(&after_one, "succeeded"), 1, "exactly one job run");
    assert_eq!(count(&after_one, "queued"), 99, "the rest left queued");
    assert_eq!(target.hits(), 1);
    assert!(first.output().contains("deregistered"), "{}", first.output());
    assert!(listed_runners(&app).await.is_empty(), "deregistered: not listed, online or offline");

    // 99 more one-shot runners, started one after another, each when the previous one has left.
    for _ in 1..100 {
        let mut runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[LABEL], &one_shot).await;
        let (status, _) = exits_by_itself(&mut runner, Duration::from_secs(60)).await;
        assert!(status.success(), "{status:?}\n{}", runner.output());
        assert_eq!(runner.output().matches("running a job").count(), 1, "{}", runner.output());
    }
    for id in &ids {
        let done = app.wait_finished(&flow, id).await;
        assert_eq!(done["status"], "succeeded", "{done}");
        assert_eq!(done["attempt"], 1, "each job run once, never handed to a second runner: {done}");
    }
    assert_eq!(target.hits(), 100, "each job's request sent exactly once");
    assert!(listed_runners(&app).await.is_empty(), "every one-shot runner deregistered");
}

#[tokio::test]
async fn an_idle_runner_leaves_within_its_idle_time_after_its_last_job() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let flow = request_flow(&app, &target, "/orders").await;
    let creds = app.runner_creds(app.admin.org).await;
    let mut runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &[LABEL], &["--idle-exit-s", "2"]).await;
    app.wait_runner(|r| r["labels"] == json!([LABEL])).await;
    let ids = launch_labelled(&app, &flow, 3).await;
    let mut last_finished = Instant::now();
    for id in &ids {
        let done = app.wait_finished(&flow, id).await;
        assert_eq!(done["status"], "succeeded", "{done}");
        last_finished = Instant::now();
    }
    let (status, exited) = exits_by_itself(&mut runner, Duration::from_secs(10)).await;
    assert!(status.success(), "{status:?}\n{}", runner.output());
    let after = exited.duration_since(last_finished);
    assert!(after < Duration::from_secs(4), "left {after:?} after its last job (idle exit 2 s)");
    assert!(listed_runners(&app).await.is_empty(), "deregistered");
}

#[tokio::test]
async fn sigterm_during_a_job_lets_it_finish_and_report_then_the_runner_leaves() {
    let app = TestApp::spawn_for_execution().await;
    let target = Target::spawn().await;
    let flow = request_flow(&app, &target, "/slow?ms=3000").await;
    let creds = app.runner_creds(app.admin.org).await;
    let mut runner = RunnerProcess::spawn_with_env(RUNNER, &app.base, &creds, &[LABEL], &[], &[]).await;
    // The harness passes `--grace-s 5`; the job takes 3 s from its start, which comes first (the 2 s between them
    // leave the report room on a loaded machine: with a 5 s job it could miss the grace and be queued again).
    let id = launch_labelled(&app, &flow, 1).await.remove(0);
    app.wait_execution(&flow, &id, Duration::from_secs(15), |e| e["status"] == "running").await;
    let stopped = runner.terminate().await;
    assert!(stopped.success(), "exit 0 after the drain: {stopped:?}\n{}", runner.output());
    let done = app.admin(Method::GET, &format!("/flows/{flow}/executions/{id}"), None).await.body;
    assert_eq!(done["status"], "succeeded", "finished and reported before the runner left: {done}");
    assert_eq!(done["attempt"], 1);
    assert!(listed_runners(&app).await.is_empty(), "not listed online (nor at all) once it left");
}

#[tokio::test]
async fn deregister_releases_held_jobs_at_once_and_is_the_runners_own_organizations() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("held").await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner_id = app.register_runner(&creds, &[]).await;
    let id = app.launch_draft(&flow).await;
    // Claimed through the protocol and then never run: what a runner stopped mid-poll leaves behind.
    let claim = app
        .api_as(&creds)
        .request(Method::POST, "/runner/jobs/next")
        .json(&json!({"runner_id": runner_id, "wait_s": 5}))
        .send()
        .await
        .expect("claim");
    assert_eq!(claim.status(), StatusCode::OK);

    // Another organization's runner key cannot deregister this runner.
    let other = app.new_org("Other").await;
    let other_creds = app.runner_creds(other.org).await;
    let refused = deregister(&app, &other_creds, json!({"runner_id": runner_id})).await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    // A key without runner:complete is refused before anything else.
    let reader = hookflow_tests::exec::scoped(&app, app.admin.org, &["runners:read"]).await;
    let forbidden = deregister(&app, &reader, json!({"runner_id": runner_id})).await;
    assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);

    let gone = deregister(&app, &creds, json!({"runner_id": runner_id})).await;
    assert_eq!(gone.status(), StatusCode::NO_CONTENT);
    let queued = app.admin(Method::GET, &format!("/flows/{flow}/executions/{id}"), None).await.body;
    assert_eq!(queued["status"], "queued", "back in the queue at once, no lease to wait for: {queued}");
    assert!(listed_runners(&app).await.is_empty());
    let again = deregister(&app, &creds, json!({"runner_id": runner_id})).await;
    assert_eq!(again.status(), StatusCode::NOT_FOUND, "a runner leaves once");
    let bad = deregister(&app, &creds, json!({"runner_id": "not-an-id"})).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}
