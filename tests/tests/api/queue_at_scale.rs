//! The queue's correctness at speed: NOTIFY alone wakes a long poll on another replica (the fallback re-check is
//! set to a minute, longer than the poll), and 2,000 executions through 20 real runner processes, some killed with
//! SIGKILL at random, each end exactly once with one final status and the results of their last attempt; and
//! completions answer alike on the replica that handed the job out and on another.

use crate::RUNNER;
use hookflow_shared::OrgId;
use hookflow_shared::wire::runner_route;
use hookflow_tests::TestApp;
use hookflow_tests::notices::Notices;
use hookflow_tests::runner::RunnerProcess;
use reqwest::Method;
use serde_json::json;
use std::time::Duration;

/// Two replicas whose polls re-check only after a minute (so only NOTIFY or an in-memory wake can answer them
/// sooner), a one-node flow, runner credentials and a registered runner.
async fn two_replicas() -> (TestApp, TestApp, String, hookflow_tests::Creds, String) {
    let slow_recheck = |s: &mut hookflow_control_plane::state::Settings| s.queue_recheck = Duration::from_secs(60);
    let a = TestApp::spawn_with(slow_recheck).await;
    let b = a.replica_with(slow_recheck).await;
    let flow = a.delay_flow("cross").await;
    let creds = a.runner_creds(a.admin.org).await;
    let runner = a.register_runner(&creds, &[]).await;
    (a, b, flow, creds, runner)
}

#[tokio::test]
async fn a_launch_on_one_replica_wakes_a_poll_waiting_on_another() {
    let (a, b, flow, creds, runner) = two_replicas().await;
    // The poll waits on B for up to 20 s; without NOTIFY it would re-check only after 60 s and answer 204.
    let poll = poll_on(&b, &creds, &runner);
    tokio::time::sleep(Duration::from_millis(500)).await; // the poll is waiting
    let launched = a.launch_draft(&flow).await;
    assert_eq!(poll.await.expect("poll task"), (200, Some(launched)), "the launch on A woke the poll on B");
}

/// A long poll waiting on `app` for up to 20 s, answered with the status and the claimed execution's id.
fn poll_on(
    app: &TestApp,
    creds: &hookflow_tests::Creds,
    runner: &str,
) -> tokio::task::JoinHandle<(u16, Option<String>)> {
    let (client, url, creds, runner) =
        (app.client.clone(), app.url(runner_route::NEXT_JOB), creds.clone(), runner.to_owned());
    tokio::spawn(async move {
        let answer = client
            .post(url)
            .header(hookflow_shared::wire::header::API_KEY, &creds.key)
            .header(hookflow_shared::wire::header::ORGANIZATION, creds.org.to_string())
            .json(&json!({"runner_id": runner, "wait_s": 20}))
            .send()
            .await
            .expect("poll");
        let status = answer.status().as_u16();
        let job: serde_json::Value = answer.json().await.unwrap_or_default();
        (status, job["execution_id"].as_str().map(str::to_owned))
    })
}

/// Waits until `replica` has recorded a queue watch for `org`.
async fn watch_recorded(app: &TestApp, replica: uuid::Uuid, org: OrgId) {
    for _ in 0..100 {
        let found: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM queue_watchers WHERE replica = $1 AND organization_id = $2)",
        )
        .bind(replica)
        .bind(org)
        .fetch_one(&app.pool)
        .await
        .expect("watch");
        if found {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no queue watch was recorded");
}

/// A launch NOTIFYs only when another replica has polls waiting for its organization (a NOTIFY serializes commits
/// cluster-wide): with polls waiting only on the launching replica it sends none and they are woken in memory;
/// once a poll waits on another replica, the launch notifies and that poll gets the job.
#[tokio::test]
async fn launches_notify_only_when_another_replica_has_polls_waiting() {
    let (a, b, flow, creds, runner) = two_replicas().await;
    let mut notices = Notices::listen(&a.pool, hookflow_control_plane::signals::QUEUE_CHANNEL).await;

    let on_a = poll_on(&a, &creds, &runner);
    watch_recorded(&a, a.replica, a.admin.org).await;
    let first = a.launch_draft(&flow).await;
    assert_eq!(on_a.await.expect("poll"), (200, Some(first)), "woken in memory on its own replica");
    // Delivered in commit order: had the launch notified, its NOTIFY would come before this marker.
    sqlx::query("SELECT pg_notify($1, 'marker')")
        .bind(hookflow_control_plane::signals::QUEUE_CHANNEL)
        .execute(&a.pool)
        .await
        .expect("marker");
    assert_eq!(notices.next().await, "marker", "a launch with no other replica waiting sent no NOTIFY");

    let on_b = poll_on(&b, &creds, &runner);
    watch_recorded(&a, b.replica, a.admin.org).await;
    let second = a.launch_draft(&flow).await;
    assert_eq!(notices.next().await, a.admin.org.to_string());
    assert_eq!(on_b.await.expect("poll"), (200, Some(second)), "the NOTIFY woke the poll on B");
}

/// While work remains, kills a runner every 400 ms (each of the 20 is busy then) and starts a fresh one in its
/// place; answers how many were killed.
async fn chaos(app: &TestApp, creds: &hookflow_tests::Creds, runners: &mut [RunnerProcess], flow: &str) -> usize {
    let mut killed = 0;
    for round in 0..10 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        if app.rows(&format!("executions WHERE flow_id = '{flow}' AND status = 'queued'")).await == 0 {
            break;
        }
        let victim = (round * 7 + 3) % runners.len();
        runners[victim].kill().await;
        killed += 1;
        runners[victim] = RunnerProcess::spawn(RUNNER, &app.base, creds, &[], &["--concurrency", "4"]).await;
    }
    killed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_executions_end_exactly_once_while_runners_are_killed() {
    const EXECUTIONS: usize = 2_000;
    let app = TestApp::spawn_for_execution().await;
    let flow = app
        .create_flow(
            "many",
            json!({"nodes": [{"id": "one", "kind": "delay", "delay_ms": 5}, {"id": "two", "kind": "delay", "delay_ms": 5}]}),
        )
        .await;
    // Launched through the API by 8 concurrent clients.
    let mut launchers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (client, url, key, org) =
            (app.client.clone(), app.url(&format!("/flows/{flow}/launch")), app.admin.key.clone(), app.admin.org);
        launchers.spawn(async move {
            let mut launched = 0;
            while launched < EXECUTIONS / 8 {
                let reply = client
                    .post(&url)
                    .header(hookflow_shared::wire::header::API_KEY, &key)
                    .header(hookflow_shared::wire::header::ORGANIZATION, org.to_string())
                    .json(&json!({}))
                    .send()
                    .await
                    .expect("launch");
                // The key's request budget (2,000/s) may be met by eight launchers on a fast machine: wait as told.
                if reply.status() == 429 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                assert_eq!(reply.status(), 201);
                launched += 1;
            }
        });
    }
    while let Some(done) = launchers.join_next().await {
        done.expect("launcher");
    }

    let creds = app.runner_creds(app.admin.org).await;
    let mut runners = Vec::new();
    for _ in 0..20 {
        runners.push(RunnerProcess::spawn(RUNNER, &app.base, &creds, &[], &["--concurrency", "4"]).await);
    }
    let killed = chaos(&app, &creds, &mut runners, &flow).await;
    assert!(killed >= 3, "the runners were killed while work remained ({killed})");

    // Every execution ends (killed runners' jobs come back when their 2 s lease expires).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let open = app.rows(&format!("executions WHERE flow_id = '{flow}' AND status IN ('queued', 'running')")).await;
        if open == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{open} executions never ended");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Exactly once: one final status and one completion event each; results only from the last attempt, whole.
    let ended: Vec<(String, i64)> = sqlx::query_as(
        "SELECT status, count(*) FROM executions WHERE flow_id = $1::uuid GROUP BY status ORDER BY status",
    )
    .bind(&flow)
    .fetch_all(&app.pool)
    .await
    .expect("statuses");
    let total: i64 = ended.iter().map(|(_, n)| n).sum();
    assert_eq!(total, EXECUTIONS as i64, "{ended:?}");
    assert!(ended.iter().all(|(s, _)| s == "succeeded" || s == "failed"), "{ended:?}");
    let doubled: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (
            SELECT e.id FROM executions e JOIN execution_events v ON v.execution_id = e.id
            WHERE e.flow_id = $1::uuid AND v.data::jsonb ->> 'type' = 'execution.completed'
            GROUP BY e.id HAVING count(*) <> 1) wrong",
    )
    .bind(&flow)
    .fetch_one(&app.pool)
    .await
    .expect("completions");
    assert_eq!(doubled, 0, "every execution has exactly one execution.completed event");
    let stale: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM node_results r JOIN executions e ON e.id = r.execution_id
         WHERE e.flow_id = $1::uuid AND r.attempt <> e.attempt",
    )
    .bind(&flow)
    .fetch_one(&app.pool)
    .await
    .expect("results");
    let (succeeded, whole): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE (SELECT count(*) FROM node_results r
                                                   WHERE r.execution_id = e.id AND r.attempt = e.attempt) = 2)
         FROM executions e WHERE e.flow_id = $1::uuid AND e.status = 'succeeded'",
    )
    .bind(&flow)
    .fetch_one(&app.pool)
    .await
    .expect("whole");
    assert!(succeeded > 0);
    assert_eq!(whole, succeeded, "each succeeded execution has both results of its last attempt");
    // Results of earlier attempts are kept apart from the last one's: the API reads the last attempt only.
    let sample: String = sqlx::query_scalar(
        "SELECT id::text FROM executions WHERE flow_id = $1::uuid AND status = 'succeeded' ORDER BY attempt DESC LIMIT 1",
    )
    .bind(&flow)
    .fetch_one(&app.pool)
    .await
    .expect("sample");
    let nodes = app.admin(Method::GET, &format!("/flows/{flow}/executions/{sample}/nodes"), None).await;
    assert_eq!(nodes.body["items"].as_array().map(Vec::len), Some(2), "{}", nodes.text);
    let retried = app.rows(&format!("executions WHERE flow_id = '{flow}' AND attempt > 1")).await;
    assert!(retried > 0, "some kills interrupted running jobs, which ran again");
    println!(
        "{EXECUTIONS} executions, {killed} runners killed, {retried} retried: {ended:?}; {stale} results of earlier \
         attempts kept apart"
    );
    for runner in &mut runners {
        runner.kill().await;
    }
}

/// A job claimed through one replica may be completed through another; its token is then dead on both (401), as
/// for a repeat, and a token sent for another job's path is refused too.
#[tokio::test]
async fn completions_answer_alike_on_the_replica_that_claimed_and_on_another() {
    let (a, b, flow, creds, runner) = two_replicas().await;
    let (succeeded, failed) = (json!({"status": "succeeded"}), json!({"status": "failed"}));
    a.launch_draft(&flow).await;
    let first = a.next_job(&creds, &runner, 5).await.body;
    assert_eq!(b.job_call(&first, "complete", succeeded.clone()).await.status, 200, "B checks the database");
    let dead = a.job_call(&first, "complete", failed.clone()).await;
    assert_eq!((dead.status.as_u16(), dead.code()), (401, "unauthorized"), "A handed the token out, B ended it");

    a.launch_draft(&flow).await;
    let second = a.next_job(&creds, &runner, 5).await.body;
    let mut crossed = second.clone();
    crossed["job_id"] = first["job_id"].clone();
    assert_eq!(a.job_call(&crossed, "complete", failed.clone()).await.status, 401, "a token names its own job");
    assert_eq!(a.job_call(&second, "complete", succeeded.clone()).await.status, 200);
    assert_eq!(a.job_call(&second, "complete", failed).await.status, 401, "a repeat finds the token dead");
    assert_eq!(a.rows("executions WHERE status = 'succeeded'").await, 2, "each ended once, as first reported");
}
