//! Group commit on the queue: launches and completions made at the same time share statements, each still gets
//! its own answer (its organization's, never another's), and one that cannot be written fails alone.

use futures_util::future::join_all;
use hookflow_control_plane::db::group_commit::{BatchWrite, GroupCommit};
use hookflow_control_plane::error::ApiResult;
use hookflow_shared::OrgId;
use hookflow_shared::wire::runner_route;
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgConnection;
use std::sync::Mutex;

/// Sizes of the batches the probe writer was handed.
static PROBE_BATCHES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// A write of one number into `probe_writes`, whose CHECK refuses negative ones.
struct Probe(i32);

impl BatchWrite for Probe {
    type Out = i32;

    fn bytes(&self) -> usize {
        4
    }

    async fn write_many(conn: &mut PgConnection, batch: &[Self]) -> ApiResult<Vec<i32>> {
        PROBE_BATCHES.lock().expect("probe").push(batch.len());
        let numbers: Vec<i32> = batch.iter().map(|p| p.0).collect();
        let stored: Vec<i32> = sqlx::query_scalar(
            "INSERT INTO probe_writes (n) SELECT n FROM unnest($1::int[]) WITH ORDINALITY AS u(n, ord)
             ORDER BY ord RETURNING n",
        )
        .bind(&numbers)
        .fetch_all(conn)
        .await?;
        Ok(stored)
    }
}

#[tokio::test]
async fn concurrent_writes_share_statements_and_a_refused_one_fails_alone() {
    let app = TestApp::spawn().await;
    sqlx::query("CREATE TABLE probe_writes (n int PRIMARY KEY CHECK (n >= 0))")
        .execute(&app.pool)
        .await
        .expect("table");
    let writer = GroupCommit::<Probe>::start(app.pool.clone(), 64, "probes");
    let answers = join_all((-1..60).map(|n| writer.submit(Probe(n)))).await;
    for (n, answer) in (-1..60).zip(&answers) {
        match answer {
            Ok(stored) => assert_eq!(*stored, n, "each write is answered with its own outcome"),
            Err(_) => assert_eq!(n, -1, "only the refused write fails"),
        }
    }
    assert!(answers[0].is_err(), "the negative number is refused");
    assert_eq!(app.rows("probe_writes").await, 60, "its batch neighbours were stored");
    let batches = PROBE_BATCHES.lock().expect("probe").clone();
    assert!(batches.iter().any(|&n| n > 1), "writes made together share a statement: {batches:?}");
}

/// Bytes each batch of `Heavy` writes carried.
static HEAVY_BATCHES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// A write that says it is 10 MiB (`large`) or 100 bytes, storing only its number.
struct Heavy {
    n: i32,
    large: bool,
}

impl BatchWrite for Heavy {
    type Out = i32;

    fn bytes(&self) -> usize {
        if self.large { 10 * 1024 * 1024 } else { 100 }
    }

    async fn write_many(conn: &mut PgConnection, batch: &[Self]) -> ApiResult<Vec<i32>> {
        HEAVY_BATCHES.lock().expect("heavy").push(batch.iter().map(Heavy::bytes).sum());
        let numbers: Vec<i32> = batch.iter().map(|h| h.n).collect();
        let stored: Vec<i32> =
            sqlx::query_scalar("SELECT n FROM unnest($1::int[]) WITH ORDINALITY AS u(n, ord) ORDER BY ord")
                .bind(&numbers)
                .fetch_all(conn)
                .await?;
        Ok(stored)
    }
}

/// Finding 5 of Hardening III: a group-commit writer had no byte budget (128 launches of 10 MiB definitions made
/// one statement). Batches close at 16 MiB, and large writes past the waiting budget (128 MiB) are answered 503
/// at once while small neighbours never are.
#[tokio::test]
async fn large_writes_are_budgeted_and_small_ones_are_never_refused_for_them() {
    let app = TestApp::spawn().await;
    let writer = GroupCommit::<Heavy>::start(app.pool.clone(), 512, "heavies");
    let writes = (0..200).map(|n| Heavy { n, large: n % 2 == 0 });
    let answers = join_all(writes.map(|w| writer.submit(w))).await;
    let (mut stored_large, mut refused_large) = (0, 0);
    for (n, answer) in (0..200).zip(&answers) {
        match (n % 2 == 0, answer) {
            (_, Ok(stored)) => {
                assert_eq!(*stored, n);
                stored_large += usize::from(n % 2 == 0);
            }
            (true, Err(error)) => {
                assert_eq!((error.code, error.retry_after_s), (hookflow_shared::ErrorCode::Unavailable, Some(1)));
                refused_large += 1;
            }
            (false, Err(error)) => panic!("a small write was refused: {error:?}"),
        }
    }
    assert!(refused_large > 0 && stored_large >= 12, "stored {stored_large}, refused {refused_large}");
    let batches = HEAVY_BATCHES.lock().expect("heavy").clone();
    assert!(batches.iter().all(|&bytes| bytes <= 16 * 1024 * 1024), "a batch passed 16 MiB: {batches:?}");
}

#[tokio::test]
async fn launches_made_together_each_get_their_own_answer() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("together").await;
    let staging = json!({"variables": {"a": "1"}});
    let put = app.admin(Method::PUT, &format!("/flows/{flow}/environments/staging"), Some(staging)).await;
    assert_eq!(put.status, 200, "{}", put.text);
    let bodies: Vec<Value> = (0..45)
        .map(|i| match i % 3 {
            0 => json!({"environment": "nope"}),
            1 => json!({"environment": "staging", "variables": {"n": i.to_string()}}),
            _ => json!({"variables": {"n": i.to_string()}}),
        })
        .collect();
    let path = format!("/flows/{flow}/launch");
    let replies = join_all(bodies.iter().map(|b| app.admin(Method::POST, &path, Some(b.clone())))).await;
    for (body, reply) in bodies.iter().zip(&replies) {
        if body["environment"] == "nope" {
            reply.assert_refused(400, "invalid_request", "nope");
            continue;
        }
        assert_eq!(reply.status, 201, "{}", reply.text);
        assert_eq!(reply.body["environment"], body["environment"]);
        let stored: Value = sqlx::query_scalar("SELECT variables FROM executions WHERE id = $1::uuid")
            .bind(reply.body["id"].as_str().expect("id"))
            .fetch_one(&app.pool)
            .await
            .expect("variables");
        assert_eq!(stored["n"], body["variables"]["n"], "each launch keeps its own variables");
        let from_environment = if body["environment"] == "staging" { json!("1") } else { Value::Null };
        assert_eq!(stored["a"], from_environment);
    }
    assert_eq!(app.rows("executions").await, 30);
    assert_eq!(app.rows("execution_events").await, 30, "one queued event each");
}

#[tokio::test]
async fn completions_made_together_end_each_execution_once_as_reported() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("together").await;
    join_all((0..12).map(|_| app.launch_draft(&flow))).await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let poll = json!({"runner_id": runner, "wait_s": 5, "max_jobs": 12});
    let claimed = app.call(Method::POST, runner_route::NEXT_JOB, Some(&creds), Some(poll)).await;
    let jobs = claimed.body["jobs"].as_array().expect("a batch").clone();
    assert_eq!(jobs.len(), 12, "one statement claims every queued execution");
    let ending = |i: usize| match i % 3 {
        0 => json!({"status": "succeeded"}),
        1 => json!({"status": "failed", "error": format!("error {i}")}),
        _ => json!({"status": "cancelled"}),
    };
    // Every job completes at once, the first one twice.
    let calls = jobs.iter().enumerate().chain([(0, &jobs[0])]).map(|(i, job)| app.job_call(job, "complete", ending(i)));
    let replies = join_all(calls).await;
    let (first, repeat) = (&replies[0], &replies[12]);
    assert!(first.status == 200 || repeat.status == 200, "one of the two completions ends it");
    assert_ne!(first.status, repeat.status, "and only one");
    let refused = if first.status == 200 { repeat } else { first };
    assert!([401, 409].contains(&refused.status.as_u16()), "{}", refused.text);
    for (i, (job, reply)) in jobs.iter().zip(&replies).enumerate().skip(1) {
        assert_eq!(reply.status, 200, "{}", reply.text);
        let execution = app.execution(&flow, job["execution_id"].as_str().expect("id")).await;
        assert_eq!(execution["status"], ending(i)["status"], "each ends as its own runner said");
        assert_eq!(execution["error"], ending(i).get("error").cloned().unwrap_or(Value::Null));
    }
    let completed = app.rows("execution_events WHERE data LIKE '%\"execution.completed\"%'").await;
    assert_eq!(completed, 12, "one completion event per execution");
    assert_eq!(app.rows("jobs WHERE completed_at IS NULL").await, 0, "every job token is dead");
}

#[tokio::test]
async fn launches_of_two_organizations_in_one_batch_stay_apart() {
    let app = TestApp::spawn_for_execution().await;
    let other = app.new_org("other").await;
    let mut flows = Vec::new();
    for (creds, who) in [(app.admin.clone(), "admin"), (other.clone(), "other")] {
        let variable = app.call(Method::PUT, "/variables/who", Some(&creds), Some(json!({"value": who}))).await;
        assert_eq!(variable.status, 200, "{}", variable.text);
        let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
        let body = json!({"name": who, "definition": definition});
        let flow = app.call(Method::POST, "/flows", Some(&creds), Some(body)).await;
        let flow = flow.body["id"].as_str().expect("flow id").to_owned();
        flows.push((creds, who, flow));
    }
    // Each organization launches its own flow and, with its own key, the other's (404: it names no flow of theirs).
    let paths: Vec<String> = (0..40).map(|i| format!("/flows/{}/launch", flows[(i / 2) % 2].2)).collect();
    let launches =
        paths.iter().enumerate().map(|(i, path)| app.call(Method::POST, path, Some(&flows[i % 2].0), Some(json!({}))));
    let replies = join_all(launches).await;
    for (i, reply) in replies.iter().enumerate() {
        let (creds, who, _) = &flows[i % 2];
        if i % 2 != (i / 2) % 2 {
            reply.assert_refused(404, "not_found", "flow");
            continue;
        }
        assert_eq!(reply.status, 201, "{}", reply.text);
        let (org, variables): (OrgId, Value) =
            sqlx::query_as("SELECT organization_id, variables FROM executions WHERE id = $1::uuid")
                .bind(reply.body["id"].as_str().expect("id"))
                .fetch_one(&app.pool)
                .await
                .expect("execution");
        assert_eq!(org, creds.org, "the execution belongs to the organization that launched it");
        assert_eq!(variables["who"], *who, "with that organization's variables");
    }
    assert_eq!(app.rows("executions").await, 20);
}
